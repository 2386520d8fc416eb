/* The container root through fuse-overlayfs: the command line, the process started in the
 * container's namespaces by the parent, the wait for its mount, its end. See fuse-root.h. */
#include <errno.h>
#include <limits.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/capability.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/cgroup.h"
#include "lib/log.h"
#include "lib/rm-tree.h"
#include "lib/macro.h"
#include "lib/strv.h"
#include "capsule/runtime/fuse-root.h"

unsigned fuse_root_timeout_ms = FUSE_ROOT_TIMEOUT_MS;

int fuse_root_check(const char *program, struct errmsg *e)
{
    if (!program || program[0] != '/')
        return errmsg_set(e, -EINVAL, "the fuse-overlayfs program '%s' is not an absolute path",
                          program ? program : "");
    if (access(program, X_OK) < 0) {
        int r = negative_errno();
        if (r == -ENOENT)
            return errmsg_set(e, r,
                              "node cache layers need fuse-overlayfs: no '%s' (apt install "
                              "fuse-overlayfs)",
                              program);
        return errmsg_set(e, r, "node cache layers need fuse-overlayfs: '%s': %s", program,
                          strerror(-r));
    }
    _cleanup_close_ int fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
    if (fd < 0) {
        int r = negative_errno();
        if (r == -ENOENT || r == -ENXIO || r == -ENODEV)
            return errmsg_set(e, r,
                              "node cache layers need /dev/fuse: %s (modprobe fuse; apt install "
                              "fuse3)",
                              strerror(-r));
        if (r == -EACCES || r == -EPERM)
            return errmsg_set(e, r,
                              "node cache layers need /dev/fuse open to users: chmod 0666 "
                              "/dev/fuse (as Debian's udev rule sets it)");
        return errmsg_set(e, r, "node cache layers need /dev/fuse: %s", strerror(-r));
    }
    return 0;
}

/* fuse-overlayfs takes its options through libfuse, which splits them on ',' and lets a
 * backslash escape one; lowerdir it splits on ':' itself, with no escape (1.10). */
static int put_path(FILE *f, const char *what, const char *path, struct errmsg *e)
{
    if (strchr(path, ':'))
        return errmsg_set(e, -EINVAL, "%s '%s': fuse-overlayfs cannot take a path with ':' in it",
                          what, path);
    for (const char *s = path; *s; s++) {
        if (*s == ',' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
    return 0;
}

/* fuse-overlayfs's command line is anyone's to read (/proc/PID/cmdline), and a node cache layer's
 * path is its only secret: the lower directories go there as links in a directory of the run's
 * own (0700), DIR.lower/N, which only the caller can follow. Beside DIR, not in it: the run's
 * tmpfs is mounted on DIR. */
static int make_links_dir(const char *dir, struct errmsg *e)
{
    char lower[PATH_MAX];
    snprintf(lower, sizeof(lower), "%s.lower", dir);
    /* DIR's name is random, but /tmp is everyone's: one that exists already is someone else's. */
    if (mkdir(lower, 0700) < 0)
        return errmsg_set(e, negative_errno(), "create '%s': %m", lower);
    return 0;
}

static int layer_link(const char *dir, size_t i, const char *layer, char *buf, size_t size,
                      struct errmsg *e)
{
    char lower[PATH_MAX];
    snprintf(lower, sizeof(lower), "%s.lower", dir);
    if (snprintf(buf, size, "%s/%zu", lower, i) >= (int)size)
        return errmsg_set(e, -ENAMETOOLONG, "'%s': path too long", lower);
    if (symlink(layer, buf) < 0)
        return errmsg_set(e, negative_errno(), "link '%s' to layer '%s': %m", buf, layer);
    return 0;
}

/* Removes what layer_link made. */
static void remove_links(const char *dir)
{
    char lower[PATH_MAX];
    snprintf(lower, sizeof(lower), "%s.lower", dir);
    (void)rm_tree(lower);
}

static int build_options(const struct run_spec *spec, const char *dir, uid_t uid, gid_t gid,
                         char **ret, struct errmsg *e)
{
    _cleanup_free_ char *opts = NULL, *empty = NULL, *upper = NULL, *work = NULL;
    size_t len = 0;
    if (asprintf(&empty, "%s/empty", dir) < 0 || asprintf(&upper, "%s/upper", dir) < 0 ||
        asprintf(&work, "%s/work", dir) < 0)
        return -ENOMEM;
    _cleanup_fclose_ FILE *f = open_memstream(&opts, &len);
    if (!f)
        return -ENOMEM;
    fputs("lowerdir=", f);
    int r = spec->n_layers ? make_links_dir(dir, e) : put_path(f, "layer", empty, e);
    for (size_t i = spec->n_layers; r >= 0 && i-- > 0;) {
        char link[PATH_MAX];
        if ((r = layer_link(dir, i, spec->layers[i], link, sizeof(link), e)) >= 0)
            r = put_path(f, "layer", link, e);
        if (i > 0)
            fputc(':', f);
    }
    if (r >= 0 && fputs(",upperdir=", f) >= 0)
        r = put_path(f, "upper directory", spec->upper_dir ? spec->upper_dir : upper, e);
    if (r >= 0 && fputs(",workdir=", f) >= 0)
        r = put_path(f, "work directory", spec->work_dir ? spec->work_dir : work, e);
    if (r < 0)
        return r;
    /* Every file shows as the container user's: the layers' owners (the node cache's account)
     * mean nothing inside, and the image's own owners are presented from the xattrs. */
    fprintf(f, ",squash_to_uid=%u,squash_to_gid=%u", (unsigned)uid, (unsigned)gid);
    if (fclose(TAKE_PTR(f)) != 0)
        return -ENOMEM;
    *ret = TAKE_PTR(opts);
    return 0;
}

static int build_argv(const char *program, const char *opts, const char *mountpoint, char ***ret)
{
    const char *args[] = {program, "-f", "-o", opts, mountpoint};
    char **argv = calloc(ELEMENTSOF(args) + 1, sizeof(char *));
    if (!argv)
        return -ENOMEM;
    for (size_t i = 0; i < ELEMENTSOF(args); i++)
        if (!(argv[i] = strdup(args[i]))) {
            strv_free(argv);
            return -ENOMEM;
        }
    *ret = argv;
    return 0;
}

int fuse_root_prepare(const struct run_spec *spec, uid_t uid, gid_t gid, struct fuse_root *ret,
                      struct errmsg *e)
{
    *ret = (struct fuse_root){.log_fd = -1};
    int r = fuse_root_check(spec->fuse_overlayfs, e);
    if (r < 0)
        return r;
    const char *scratch = spec->scratch_dir ? spec->scratch_dir : getenv("TMPDIR");
    if (!scratch || !*scratch)
        scratch = "/tmp";
    _cleanup_free_ char *dir = NULL, *mountpoint = NULL, *opts = NULL;
    if (asprintf(&dir, "%s/capsule-fuse-XXXXXX", scratch) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    if (!mkdtemp(dir))
        return errmsg_set(e, negative_errno(),
                          "create a directory for the container root in '%s': %m", scratch);
    /* Absolute and free of symbolic links: fuse-overlayfs and the container's first process
     * take it from their own roots, the parent from the latter's. */
    _cleanup_free_ char *real = realpath(dir, NULL);
    if (!real) {
        r = errmsg_set(e, negative_errno(), "resolve '%s': %m", dir);
        rmdir(dir);
        return r;
    }
    free(dir);
    dir = TAKE_PTR(real);
    if (asprintf(&mountpoint, "%s/root", dir) < 0)
        r = -ENOMEM;
    if (r >= 0)
        r = build_options(spec, dir, uid, gid, &opts, e);
    if (r >= 0)
        r = build_argv(spec->fuse_overlayfs, opts, mountpoint, &ret->argv);
    if (r < 0) {
        remove_links(dir);
        rmdir(dir);
        return r == -ENOMEM ? errmsg_set(e, r, "out of memory") : r;
    }
    ret->dir = TAKE_PTR(dir);
    return 0;
}

/* fuse-overlayfs mounts with mount(2) itself, which takes CAP_SYS_ADMIN in the namespace; an
 * exec as any uid but 0 there drops it, and fusermount3 (set-uid root) is no help in a user
 * namespace. An ambient capability survives the exec. */
static int keep_sys_admin(void)
{
    struct __user_cap_header_struct h = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0)
        return negative_errno();
    d[CAP_TO_INDEX(CAP_SYS_ADMIN)].inheritable |= CAP_TO_MASK(CAP_SYS_ADMIN);
    if (syscall(SYS_capset, &h, d) < 0 ||
        prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, CAP_SYS_ADMIN, 0, 0) < 0)
        return negative_errno();
    return 0;
}

/* What the process between fork and exec needs, all opened before the fork. */
struct fuse_exec {
    char *const *argv;
    pid_t parent;
    int user, mnt, root; /* the container's namespaces and root; -1: stay where we are */
    const char *scope_procs;
    const sigset_t *mask;
    int null_fd, log_fd;
};

static _Noreturn void exec_fail(int log_fd, const char *what)
{
    dprintf(log_fd, "capsule: %s: %s\n", what, strerror(errno));
    _exit(127);
}

static _Noreturn void fuse_exec(const struct fuse_exec *x)
{
    setsid();
    /* Dies with capsule; if capsule died before that took effect, our parent has changed. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() != x->parent)
        _exit(127);
    if (x->scope_procs)
        (void)cgroup_enter(x->scope_procs);
    /* A copy of the container's mount namespace, not the namespace itself: pivot_root moves
     * every process whose root is the old one onto the new one, which would leave fuse-overlayfs
     * looking up its own /proc/self/fd through the container's root (in a pid namespace of
     * the container, a procfs without it). Its mount reaches the container's through the
     * shared tmpfs (rootfs.c). */
    if (x->user >= 0 && (setns(x->user, CLONE_NEWUSER) < 0 || setns(x->mnt, CLONE_NEWNS) < 0 ||
                         fchdir(x->root) < 0 || chroot(".") < 0 || unshare(CLONE_NEWNS) < 0))
        exec_fail(x->log_fd, "join the container's namespaces");
    if (keep_sys_admin() < 0)
        exec_fail(x->log_fd, "keep CAP_SYS_ADMIN for fuse-overlayfs");
    if (dup2(x->null_fd, STDIN_FILENO) < 0 || dup2(x->log_fd, STDOUT_FILENO) < 0 ||
        dup2(x->log_fd, STDERR_FILENO) < 0)
        exec_fail(x->log_fd, "redirect fuse-overlayfs' output");
    sigprocmask(SIG_SETMASK, x->mask, NULL);
    close_range(3, ~0U, 0);
    char *const env[] = {NULL};
    execve(x->argv[0], x->argv, env);
    char what[300];
    snprintf(what, sizeof(what), "exec '%s'", x->argv[0]);
    exec_fail(STDERR_FILENO, what);
}

/* The end of what fuse-overlayfs wrote, on one line, for an error message. */
static void log_tail(int log_fd, char *buf, size_t size)
{
    buf[0] = '\0';
    off_t end = log_fd >= 0 ? lseek(log_fd, 0, SEEK_END) : -1;
    if (end <= 0)
        return;
    off_t from = end > (off_t)size - 1 ? end - (off_t)size + 1 : 0;
    ssize_t n = pread(log_fd, buf, size - 1, from);
    if (n <= 0)
        return;
    buf[n] = '\0';
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' '))
        buf[--n] = '\0';
    for (char *p = buf; *p; p++)
        if (*p == '\n')
            *p = ';';
}

static int exit_error(int status, int log_fd, struct errmsg *e)
{
    char said[300];
    log_tail(log_fd, said, sizeof(said));
    return errmsg_set(e, -EIO, "fuse-overlayfs failed (%s %d)%s%s",
                      WIFSIGNALED(status) ? "signal" : "exit status",
                      WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status),
                      said[0] ? ": " : "", said);
}

static int device_of(int dir_fd, const char *path, dev_t *ret)
{
    struct statx stx;
    /* No attributes asked for and none synced: no request to fuse-overlayfs, which might hang. */
    if (statx(dir_fd, path, AT_STATX_DONT_SYNC, 0, &stx) < 0)
        return negative_errno();
    *ret = makedev(stx.stx_dev_major, stx.stx_dev_minor);
    return 0;
}

/* Until a file system other than the one of before (was) is mounted on path below dir_fd, while
 * *pid runs (reaped here if it exits: *pid = 0 then). */
static int wait_mounted(pid_t *pid, int dir_fd, const char *path, dev_t was, int log_fd,
                        struct errmsg *e)
{
    struct timespec step = {0, 1000000};
    for (unsigned waited_ms = 0;;) {
        dev_t now;
        int r = device_of(dir_fd, path, &now);
        if (r < 0)
            return errmsg_set(e, r, "wait for fuse-overlayfs to mount '%s': %s", path,
                              strerror(-r));
        if (now != was)
            return 0;
        int status;
        if (waitpid(*pid, &status, WNOHANG) == *pid) {
            *pid = 0;
            return exit_error(status, log_fd, e);
        }
        if (waited_ms >= fuse_root_timeout_ms) {
            char said[300];
            log_tail(log_fd, said, sizeof(said));
            return errmsg_set(e, -ETIMEDOUT, "fuse-overlayfs did not mount the root in %u ms%s%s",
                              fuse_root_timeout_ms, said[0] ? ": " : "", said);
        }
        nanosleep(&step, NULL);
        waited_ms += (unsigned)(step.tv_nsec / 1000000);
        if (step.tv_nsec < 32000000)
            step.tv_nsec *= 2;
    }
}

/* Forks fuse-overlayfs as set in x (argv, namespaces) and waits until it mounted path below
 * dir_fd. *ret_pid is set as soon as it runs, to 0 again when it is gone. */
static int spawn_and_wait(struct fuse_exec *x, int dir_fd, const char *path, pid_t *ret_pid,
                          struct errmsg *e)
{
    dev_t was;
    int r = device_of(dir_fd, path, &was);
    if (r < 0)
        return errmsg_set(e, r, "the mount point '%s' of the container root: %s", path,
                          strerror(-r));
    _cleanup_close_ int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0)
        return errmsg_set(e, negative_errno(), "open /dev/null: %m");
    x->null_fd = null_fd;
    x->parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return errmsg_set(e, negative_errno(), "fork: %m");
    if (pid == 0)
        fuse_exec(x);
    *ret_pid = pid;
    return wait_mounted(ret_pid, dir_fd, path, was, x->log_fd, e);
}

static int open_ns(pid_t pid, const char *name, int flags, struct errmsg *e)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
    int fd = open(path, flags | O_CLOEXEC);
    return fd >= 0 ? fd : errmsg_set(e, negative_errno(), "open %s: %m", path);
}

static int fuse_root_start(struct fuse_root *f, pid_t child, const char *scope_dir,
                           const sigset_t *mask, struct errmsg *e)
{
    _cleanup_close_ int user = open_ns(child, "ns/user", O_RDONLY, e);
    _cleanup_close_ int mnt = user < 0 ? -1 : open_ns(child, "ns/mnt", O_RDONLY, e);
    _cleanup_close_ int root = mnt < 0 ? -1 : open_ns(child, "root", O_PATH | O_DIRECTORY, e);
    if (root < 0)
        return user < 0 ? user : mnt < 0 ? mnt : root;
    if (f->log_fd < 0 && (f->log_fd = memfd_create("fuse-overlayfs", MFD_CLOEXEC)) < 0)
        return errmsg_set(e, negative_errno(), "memfd_create: %m");
    _cleanup_free_ char *procs = NULL;
    if (scope_dir && asprintf(&procs, "%s/cgroup.procs", scope_dir) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    struct fuse_exec x = {.argv = f->argv,
                          .user = user,
                          .mnt = mnt,
                          .root = root,
                          .scope_procs = procs,
                          .mask = mask,
                          .log_fd = f->log_fd};
    /* The mount point as the container's first process sees it: below its root. */
    const char *mountpoint = f->argv[4] + 1;
    int r = spawn_and_wait(&x, root, mountpoint, &f->pid, e);
    /* Mounted, it holds its layers open: the links have done their work, and a capsule that is
     * killed later leaves none behind. */
    remove_links(f->dir);
    if (r < 0)
        fuse_root_stop(f);
    return r;
}

int fuse_root_serve(struct fuse_root *f, int sock, pid_t child, const char *scope_dir,
                    const sigset_t *mask, struct errmsg *e)
{
    char req;
    ssize_t n;
    while ((n = read(sock, &req, 1)) < 0 && errno == EINTR)
        ;
    if (n != 1 || req != 'f')
        return 0;
    int r = fuse_root_start(f, child, scope_dir, mask, e);
    if (r < 0)
        return errmsg_prefix(e, r, "mount the container root");
    /* A child gone meanwhile has its report; supervise reads it. */
    (void)send(sock, "r", 1, MSG_NOSIGNAL);
    return 0;
}

void fuse_root_stop(struct fuse_root *f)
{
    if (f->pid <= 0)
        return;
    int status;
    pid_t got;
    while ((got = waitpid(f->pid, &status, WNOHANG)) < 0 && errno == EINTR)
        ;
    if (got == f->pid) {
        /* It ended on its own, under a running container: say what it said, for debugging. */
        char said[300];
        log_tail(f->log_fd, said, sizeof(said));
        log_debug("fuse-overlayfs ended before the container (status %d): %s", status, said);
    } else {
        /* The container has ended: nothing is left to write through it. */
        kill(f->pid, SIGKILL);
        while (waitpid(f->pid, NULL, 0) < 0 && errno == EINTR)
            ;
    }
    f->pid = 0;
}

void fuse_root_done(struct fuse_root *f)
{
    fuse_root_stop(f);
    closep(&f->log_fd);
    /* Only while fuse-overlayfs ran was something mounted on it (in its copy of the container's
     * mount namespace): removing it earlier would have taken its upper directory's path, which it
     * uses all along. */
    if (f->dir)
        remove_links(f->dir);
    if (f->dir && rmdir(f->dir) < 0)
        log_debug("remove '%s': %m", f->dir);
    free(f->dir);
    strv_free(f->argv);
    *f = (struct fuse_root){.log_fd = -1};
}

int fuse_root_request(int sock, struct errmsg *e)
{
    char answer = 0;
    ssize_t n;
    if (send(sock, "f", 1, MSG_NOSIGNAL) != 1)
        return errmsg_set(e, -EIO, "ask capsule for the fuse-overlayfs root: %m");
    while ((n = read(sock, &answer, 1)) < 0 && errno == EINTR)
        ;
    if (n != 1 || answer != 'r')
        return errmsg_set(e, -EIO, "capsule did not mount the fuse-overlayfs root");
    return 0;
}

/* The probe's layer, as the node cache stores one: a 0600 file widened to 0644 on disk, its mode
 * and the layer root's in override_stat xattrs. -EOPNOTSUPP where dir has no user xattrs. */
static int probe_layer(const char *dir, struct errmsg *e)
{
    static const char *const dirs[] = {"layer", "upper", "work", "root"};
    char p[4096];
    for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, dirs[i]);
        if (mkdir(p, 0755) < 0)
            return errmsg_set(e, negative_errno(), "create %s: %m", p);
    }
    snprintf(p, sizeof(p), "%s/layer/secret", dir);
    _cleanup_close_ int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "create %s: %m", p);
    static const char name[] = "user.containers.override_stat";
    static const char file[] = "0:0:0600:file", root[] = "0:0:0755:dir";
    snprintf(p, sizeof(p), "%s/layer", dir);
    if (fsetxattr(fd, name, file, strlen(file), 0) < 0 ||
        setxattr(p, name, root, strlen(root), 0) < 0) {
        int r = negative_errno();
        return r == -EOPNOTSUPP ? r : errmsg_set(e, r, "set %s in '%s': %m", name, p);
    }
    return 0;
}

int fuse_root_probe_mount(const char *program, const char *dir, struct errmsg *e)
{
    int r = probe_layer(dir, e);
    /* Without user xattrs here, the probe still shows that fuse-overlayfs mounts. */
    bool xattrs = r != -EOPNOTSUPP;
    if (r < 0 && xattrs)
        return r;
    struct run_spec spec = {.fuse_overlayfs = program};
    _cleanup_free_ char *layer = NULL, *opts = NULL;
    if (asprintf(&layer, "%s/layer", dir) < 0)
        return -ENOMEM;
    char *layers[] = {layer};
    spec.layers = layers;
    spec.n_layers = 1;
    if ((r = build_options(&spec, dir, getuid(), getgid(), &opts, e)) < 0)
        return r;
    char mountpoint[4096];
    snprintf(mountpoint, sizeof(mountpoint), "%s/root", dir);
    _cleanup_strv_free_ char **argv = NULL;
    if (build_argv(program, opts, mountpoint, &argv) < 0)
        return -ENOMEM;
    sigset_t mask;
    sigprocmask(SIG_SETMASK, NULL, &mask);
    struct fuse_root f = {.argv = argv, .log_fd = memfd_create("fuse-overlayfs", MFD_CLOEXEC)};
    if (f.log_fd < 0)
        return errmsg_set(e, negative_errno(), "memfd_create: %m");
    struct fuse_exec x = {
        .argv = argv, .user = -1, .mnt = -1, .root = -1, .mask = &mask, .log_fd = f.log_fd};
    r = spawn_and_wait(&x, AT_FDCWD, mountpoint, &f.pid, e);
    remove_links(dir);
    struct stat st;
    snprintf(mountpoint, sizeof(mountpoint), "%s/root/secret", dir);
    if (r >= 0 && stat(mountpoint, &st) < 0)
        r = errmsg_set(e, negative_errno(), "fuse-overlayfs: stat a file of the layer: %m");
    else if (r >= 0 && xattrs && (st.st_mode & 07777) != 0600)
        r = errmsg_set(e, -EOPNOTSUPP,
                       "fuse-overlayfs shows a 0600 file of the node cache as %04o: it does not "
                       "read user.containers.override_stat (fuse-overlayfs 1.10 or later)",
                       (unsigned)(st.st_mode & 07777));
    fuse_root_stop(&f);
    close(f.log_fd);
    return r;
}
