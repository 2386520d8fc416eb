#include "lib/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/clock.h"
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

const char *cgroup_v2_path(void)
{
    return v2_mount();
}

static bool is_one_component(const char *name)
{
    return *name && !strchr(name, '/') && strcmp(name, ".") != 0 && strcmp(name, "..") != 0;
}

int cgroup_make(const char *parent, const char *name, char **ret_dir, struct errmsg *e)
{
    if (!is_one_component(name))
        return errmsg_set(e, -EINVAL, "cgroup '%s': not a name", name);
    struct statfs sf;
    if (statfs(parent, &sf) < 0)
        return errmsg_set(e, negative_errno(), "cgroup %s: %m", parent);
    if (sf.f_type != CGROUP2_SUPER_MAGIC)
        return errmsg_set(e, -EMEDIUMTYPE, "%s is not on a cgroup v2 hierarchy", parent);
    _cleanup_free_ char *dir = NULL;
    if (asprintf(&dir, "%s/%s", parent, name) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int made = mkdir(dir, 0755) == 0;
    /* In a cgroup file system only a cgroup can be a directory of that name. */
    if (!made && errno != EEXIST)
        return errmsg_set(e, negative_errno(), "cannot make cgroup %s: %m", dir);
    *ret_dir = TAKE_PTR(dir);
    return made;
}

/* dir + "/" + name into path (PATH_MAX bytes). */
static int attr_path(char *path, const char *dir, const char *name)
{
    return snprintf(path, PATH_MAX, "%s/%s", dir, name) >= PATH_MAX ? -ENAMETOOLONG : 0;
}

int cgroup_attr_read(const char *dir, const char *name, char **ret)
{
    char path[PATH_MAX];
    int r = attr_path(path, dir, name);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    char *text = NULL;
    size_t len = 0;
    r = fd_read_all(fd, CGROUP_FILE_MAX, &text, &len);
    if (r < 0)
        return r;
    if (len && text[len - 1] == '\n')
        text[len - 1] = '\0';
    *ret = text;
    return 0;
}

int cgroup_attr_write(const char *dir, const char *name, const char *value)
{
    char path[PATH_MAX];
    int r = attr_path(path, dir, name);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    /* One write(2): the kernel takes a value per write, and reports a bad one there. */
    size_t n = strlen(value);
    ssize_t w = write(fd, value, n);
    return w == (ssize_t)n ? 0 : w < 0 ? negative_errno() : -EIO;
}

/* The value of "populated" in the text of a cgroup.events file: 1, 0, or -EBADMSG. */
static int populated_in(const char *text)
{
    for (const char *p = text; p && *p;) {
        if (strncmp(p, "populated ", 10) == 0)
            return p[10] == '1' ? 1 : p[10] == '0' ? 0 : -EBADMSG;
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return -EBADMSG;
}

int cgroup_populated(const char *dir)
{
    _cleanup_free_ char *text = NULL;
    int r = cgroup_attr_read(dir, "cgroup.events", &text);
    return r < 0 ? r : populated_in(text);
}

int cgroup_has_controller(const char *dir, const char *controller)
{
    _cleanup_free_ char *text = NULL;
    int r = cgroup_attr_read(dir, "cgroup.controllers", &text);
    if (r < 0)
        return r;
    size_t n = strlen(controller);
    for (const char *p = text; *p;) {
        size_t len = strcspn(p, " \n");
        if (len == n && strncmp(p, controller, n) == 0)
            return 1;
        p += len;
        p += strspn(p, " \n");
    }
    return 0;
}

/* Cgroups nest only as deep as someone with the right to make them chose; a bound keeps a
 * runaway tree from taking the stack. */
#define CGROUP_WALK_DEPTH 32

/* Calls fn on every cgroup below dir (not dir itself), the deepest first. */
static int walk_below(const char *dir, unsigned depth, int (*fn)(const char *, void *), void *data)
{
    if (depth > CGROUP_WALK_DEPTH)
        return -ELOOP;
    DIR *d = opendir(dir);
    if (!d)
        return errno == ENOENT ? 0 : negative_errno();
    int r = 0;
    struct dirent *de;
    while (r >= 0 && (de = readdir(d))) {
        char sub[PATH_MAX];
        if (de->d_type != DT_DIR || strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        r = attr_path(sub, dir, de->d_name);
        if (r >= 0)
            r = walk_below(sub, depth + 1, fn, data);
        if (r >= 0)
            r = fn(sub, data);
    }
    closedir(d);
    return r;
}

struct signal_walk {
    int sig;
    unsigned sent;
};

/* Signals each process that dir's own cgroup.procs lists. */
static int signal_procs(const char *dir, void *data)
{
    struct signal_walk *w = data;
    _cleanup_free_ char *text = NULL;
    int r = cgroup_attr_read(dir, "cgroup.procs", &text);
    if (r < 0)
        return r == -ENOENT ? 0 : r;
    for (char *p = text; *p;) {
        char *end;
        long pid = strtol(p, &end, 10);
        if (end == p)
            break;
        /* 0: a process outside this pid namespace, which cannot be named from here. */
        if (pid > 0 && kill((pid_t)pid, w->sig) == 0)
            w->sent++;
        p = end + strspn(end, "\n");
    }
    return 0;
}

int cgroup_signal(const char *dir, int sig)
{
    int r = cgroup_populated(dir);
    if (r <= 0)
        return r == 0 ? -ESRCH : r;
    if (sig == SIGKILL) {
        r = cgroup_attr_write(dir, "cgroup.kill", "1");
        if (r != -ENOENT)
            return r;
    }
    struct signal_walk w = {sig, 0};
    r = walk_below(dir, 0, signal_procs, &w);
    if (r >= 0)
        r = signal_procs(dir, &w);
    return r < 0 ? r : w.sent ? 0 : -ESRCH;
}

int cgroup_wait_empty(const char *dir, unsigned timeout_ms)
{
    char path[PATH_MAX];
    int r = attr_path(path, dir, "cgroup.events");
    if (r < 0)
        return r;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : negative_errno();
    uint64_t deadline = clock_now_msec() + timeout_ms;
    for (;;) {
        char buf[256];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        if (n < 0)
            return errno == ENODEV ? 0 : negative_errno();
        buf[n] = '\0';
        r = populated_in(buf);
        if (r <= 0)
            return r;
        uint64_t now = clock_now_msec();
        if (now >= deadline)
            return -ETIMEDOUT;
        /* The kernel wakes a poller of cgroup.events when it changes; the cap also covers a
         * change between the read and the poll. */
        struct pollfd pfd = {fd, POLLPRI, 0};
        uint64_t left = deadline - now;
        (void)poll(&pfd, 1, left < 50 ? (int)left : 50);
    }
}

static int remove_one(const char *dir, void *data)
{
    return rmdir(dir) == 0 || errno == ENOENT ? 0 : negative_errno();
}

int cgroup_remove_tree(const char *dir)
{
    int r = walk_below(dir, 0, remove_one, NULL);
    return r < 0 ? r : remove_one(dir, NULL);
}

int cgroup_self_dir(char **ret)
{
    const char *mount = v2_mount();
    if (!mount)
        return -ENOENT;
    _cleanup_close_ int self = open("/proc/self", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (self < 0)
        return negative_errno();
    _cleanup_free_ char *cg = NULL;
    int r = cgroup_of(self, &cg);
    if (r < 0)
        return r;
    char *dir = NULL;
    if (asprintf(&dir, "%s%s", mount, strcmp(cg, "/") == 0 ? "" : cg) < 0)
        return -ENOMEM;
    if (!lists(dir, getpid())) {
        free(dir);
        return -ENOENT;
    }
    *ret = dir;
    return 0;
}

bool cgroup_ours_to_change(const char *dir)
{
    return access(dir, W_OK) == 0 && ours_to_change(dir);
}
