#include "lib/cgroup.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/fileio.h"
#include "lib/macro.h"
#include "lib/names.h"

#define CGROUP_FILE_MAX (4u << 20)

/* Where the v2 hierarchy is: /sys/fs/cgroup on a pure v2 host, its "unified" folder on a hybrid
 * one. NULL when there is none. */
static const char *v2_mount(void)
{
    static const char *const places[] = {"/sys/fs/cgroup", "/sys/fs/cgroup/unified"};
    for (size_t i = 0; i < ELEMENTSOF(places); i++) {
        struct statfs sf;
        if (statfs(places[i], &sf) == 0 && sf.f_type == CGROUP2_SUPER_MAGIC)
            return places[i];
    }
    return NULL;
}

/* The v2 cgroup ("/" or "/a/b") in the "cgroup" file of dirfd (a /proc/PID or /proc/self), from
 * its "0::" line. -ENOENT without one, or when it is not a plain path below the root (in a cgroup
 * namespace a process outside it shows as "/../x"). */
static int cgroup_of(int dirfd, char **ret)
{
    _cleanup_close_ int fd = openat(dirfd, "cgroup", O_RDONLY | O_CLOEXEC);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = fd < 0 ? (errno == ENOENT ? -ESRCH : negative_errno())
                   : fd_read_all(fd, 64 * 1024, &text, &len);
    if (r < 0)
        return r == -ENOENT ? -ESRCH : r;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strncmp(line, "0::/", 4) == 0) {
            if (strstr(line + 3, "/..") || strstr(line + 3, " (deleted)"))
                return -ENOENT;
            *ret = strdup(line + 3);
            return *ret ? 0 : -ENOMEM;
        }
        line = nl ? nl + 1 : NULL;
    }
    return -ENOENT;
}

/* Whether pid is listed in dir's cgroup.procs: the directory is really the caller's cgroup, and
 * not one that a cgroup namespace's "/" only looks like. */
static bool lists(const char *dir, pid_t pid)
{
    char path[PATH_MAX], want[32];
    if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= (int)sizeof(path))
        return false;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    if (fd < 0 || fd_read_all(fd, CGROUP_FILE_MAX, &text, &len) < 0)
        return false;
    int n = snprintf(want, sizeof(want), "%ld\n", (long)pid);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, want, (size_t)n) == 0)
            return true;
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return false;
}

/* On a host whose cgroups systemd manages, only a delegated cgroup (Delegate=yes marks it) may
 * get cgroups of someone else's below it. */
static bool ours_to_change(const char *dir)
{
    if (access("/run/systemd/system", F_OK) < 0)
        return true;
    static const char *const marks[] = {"user.delegate", "trusted.delegate"};
    for (size_t i = 0; i < ELEMENTSOF(marks); i++) {
        char v[8];
        ssize_t n = getxattr(dir, marks[i], v, sizeof(v) - 1);
        if (n > 0 && v[0] == '1')
            return true;
    }
    return false;
}

/* Whether the cgroup dir holds processes. */
static bool populated(const char *dir)
{
    char path[PATH_MAX], buf[2];
    if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= (int)sizeof(path))
        return true;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    size_t n = 0;
    return fd < 0 || fd_read_up_to(fd, buf, 1, &n) < 0 || n > 0;
}

static int write_pid(const char *procs_path, pid_t pid)
{
    char text[32];
    int fd = open(procs_path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    int n = snprintf(text, sizeof(text), "%ld\n", (long)pid);
    /* The kernel takes one pid per write(2). */
    int r = write(fd, text, (size_t)n) == n ? 0 : negative_errno();
    close(fd);
    return r;
}

/* The caller's cgroup directory, checked: in sight, and its own to change. */
static int own_dir(char **ret, struct errmsg *e)
{
    const char *mnt = v2_mount();
    if (!mnt)
        return errmsg_set(e, -ENOENT, "no cgroup v2 hierarchy on this host");
    _cleanup_close_ int self = open("/proc/self", O_PATH | O_DIRECTORY | O_CLOEXEC);
    _cleanup_free_ char *own = NULL, *dir = NULL;
    int r = self < 0 ? negative_errno() : cgroup_of(self, &own);
    if (r < 0)
        return errmsg_set(e, r, "/proc/self/cgroup: no cgroup v2 path in sight (%s)", strerror(-r));
    if (asprintf(&dir, "%s%s", mnt, own) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    if (!lists(dir, getpid()))
        return errmsg_set(e, -ENOENT, "%s is not this process's cgroup (a cgroup namespace?)", dir);
    if (!ours_to_change(dir))
        return errmsg_set(e, -EPERM,
                          "systemd manages %s and did not delegate it (run under a unit or "
                          "`systemd-run --scope -p Delegate=yes`)",
                          dir);
    *ret = TAKE_PTR(dir);
    return 0;
}

int cgroup_scope_enter(const char *name, pid_t pid, char **ret_dir, struct errmsg *e)
{
    if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return errmsg_set(e, -EINVAL, "cgroup '%s': not a name", name);
    _cleanup_free_ char *own = NULL, *dir = NULL;
    int r = own_dir(&own, e);
    if (r < 0)
        return r;
    if (asprintf(&dir, "%s/%s", own, name) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    bool made = mkdir(dir, 0755) == 0;
    if (!made && errno != EEXIST)
        return errmsg_set(e, negative_errno(), "cannot make cgroup %s: %m", dir);
    /* A leftover of a killed run is reused only once its processes are gone: another run's
     * processes must not be counted as this one's. */
    if (!made && populated(dir))
        return errmsg_set(e, -EBUSY, "cgroup %s still holds processes of an earlier run", dir);
    char procs[PATH_MAX];
    r = snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir) >= (int)sizeof(procs)
            ? -ENAMETOOLONG
            : write_pid(procs, pid);
    if (r < 0) {
        if (made)
            (void)rmdir(dir);
        return errmsg_set(e, r, "cannot move pid %ld into cgroup %s: %s", (long)pid, dir,
                          strerror(-r));
    }
    *ret_dir = TAKE_PTR(dir);
    return 0;
}

int cgroup_scope_remove(const char *dir)
{
    return rmdir(dir) == 0 || errno == ENOENT ? 0 : negative_errno();
}

int cgroup_scope_procs_of(int proc_dirfd, char **ret_path)
{
    const char *mnt = v2_mount();
    _cleanup_free_ char *cg = NULL;
    int r = mnt ? cgroup_of(proc_dirfd, &cg) : -ENOENT;
    if (r < 0)
        return r;
    const char *base = strrchr(cg, '/') + 1;
    size_t n = strlen(base), pre = strlen(NAMES_SCOPE_CAPSULE), suf = strlen(NAMES_SCOPE_SUFFIX);
    if (n <= pre + suf || strncmp(base, NAMES_SCOPE_CAPSULE, pre) != 0 ||
        strcmp(base + n - suf, NAMES_SCOPE_SUFFIX) != 0)
        return -ENOENT;
    return asprintf(ret_path, "%s%s/cgroup.procs", mnt, cg) < 0 ? -ENOMEM : 0;
}

int cgroup_enter(const char *procs_path)
{
    return write_pid(procs_path, 0);
}
