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
#include <unistd.h>

#include "lib/fileio.h"
#include "lib/macro.h"

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

/* The v2 cgroup ("/" or "/a/b") of pid (0: the caller), from the "0::" line of /proc/PID/cgroup. */
static int cgroup_of(pid_t pid, char **ret)
{
    char path[64];
    if (pid)
        snprintf(path, sizeof(path), "/proc/%ld/cgroup", (long)pid);
    else
        snprintf(path, sizeof(path), "/proc/self/cgroup");
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = fd < 0 ? (errno == ENOENT ? -ESRCH : negative_errno())
                   : fd_read_all(fd, 64 * 1024, &text, &len);
    if (r < 0)
        return r;
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strncmp(line, "0::/", 4) == 0) {
            *ret = strdup(line + 3);
            return *ret ? 0 : -ENOMEM;
        }
        line = nl ? nl + 1 : NULL;
    }
    return -ENOENT;
}

/* mount + cgroup path (+ "/" + name when name is set), malloc'd. */
static int cgroup_dir(const char *mnt, const char *cg, const char *name, char **ret)
{
    const char *base = strcmp(cg, "/") == 0 ? "" : cg;
    int n = name ? asprintf(ret, "%s%s/%s", mnt, base, name) : asprintf(ret, "%s%s", mnt, cg);
    return n < 0 ? -ENOMEM : 0;
}

static int write_pid(const char *dir, pid_t pid)
{
    char path[PATH_MAX], text[32];
    if (snprintf(path, sizeof(path), "%s/cgroup.procs", dir) >= (int)sizeof(path))
        return -ENAMETOOLONG;
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    int n = snprintf(text, sizeof(text), "%ld\n", (long)pid);
    /* The kernel takes one pid per write(2). */
    return write(fd, text, (size_t)n) == n ? 0 : negative_errno();
}

int cgroup_scope_enter(const char *name, pid_t pid, char **ret_dir, struct errmsg *e)
{
    if (!*name || strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return errmsg_set(e, -EINVAL, "cgroup '%s': not a name", name);
    const char *mnt = v2_mount();
    if (!mnt)
        return errmsg_set(e, -ENOENT, "no cgroup v2 hierarchy on this host");
    _cleanup_free_ char *own = NULL, *dir = NULL;
    int r = cgroup_of(0, &own);
    if (r < 0)
        return errmsg_set(e, r, "/proc/self/cgroup: no cgroup v2 entry (%s)", strerror(-r));
    if (cgroup_dir(mnt, own, name, &dir) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    bool made = mkdir(dir, 0755) == 0;
    if (!made && errno != EEXIST)
        return errmsg_set(e, negative_errno(), "cannot make cgroup %s: %m", dir);
    r = write_pid(dir, pid);
    if (r < 0) {
        if (made)
            (void)rmdir(dir);
        return errmsg_set(e, r, "cannot move pid %ld into cgroup %s: %s", (long)pid, dir,
                          strerror(-r));
    }
    *ret_dir = TAKE_PTR(dir);
    return 0;
}

int cgroup_join(pid_t target, pid_t pid)
{
    const char *mnt = v2_mount();
    _cleanup_free_ char *cg = NULL, *dir = NULL;
    int r = mnt ? cgroup_of(target, &cg) : -ENOENT;
    if (r >= 0)
        r = cgroup_dir(mnt, cg, NULL, &dir);
    return r < 0 ? r : write_pid(dir, pid);
}

int cgroup_scope_remove(const char *dir)
{
    return rmdir(dir) == 0 || errno == ENOENT ? 0 : negative_errno();
}
