/* Running a container: the parent's side (identity, clone into new namespaces, id maps, the
 * report pipe, signal forwarding, exit status), the child's setup sequence, capsule exec and
 * the probes. See runtime.h; rootfs.c and mounts.c build the root, init.c runs the command. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/nsfs.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/cgroup.h"
#include "capsule/runtime/fuse-root.h"
#include "capsule/runtime/init.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "capsule/runtime/mounts.h"
#include "lib/names.h"
#include "lib/rm-tree.h"
#include "capsule/runtime/rootfs.h"
#include "capsule/runtime/runtime.h"
#include "lib/strv.h"
#include "capsule/runtime/tty.h"

/* Everything the child needs, computed before the clone (the child gets a copy). */
struct run_ctx {
    const struct run_spec *spec;
    struct mounts_plan plan;
    char *copy_dir;        /* the copy fallback's merged tree, removed after the run */
    struct fuse_root fuse; /* spec->fuse_overlayfs: its directory and command line */
    char **env;            /* spec->env (borrowed strings) plus HOME when it has none */
    char *home_env, *user, *group;
    uid_t host_uid;
    gid_t host_gid;
    sigset_t old_mask;
};

/* Signal state of the parent while it supervises: forwarded signals and SIGCHLD blocked and
 * read through a signalfd, SIGCHLD not ignored (or the child would be reaped for us). */
struct sig_state {
    sigset_t old_mask;
    struct sigaction old_chld;
};

static void sig_enter(struct sig_state *s)
{
    sigset_t set;
    init_signal_set(&set);
    struct sigaction dfl = {.sa_handler = SIG_DFL};
    sigaction(SIGCHLD, &dfl, &s->old_chld);
    sigprocmask(SIG_BLOCK, &set, &s->old_mask);
}

static void sig_leave(struct sig_state *s)
{
    sigset_t set;
    init_signal_set(&set);
    /* A terminal's Ctrl-C reached us too: consume it rather than die of it on unblocking. */
    struct timespec zero = {0, 0};
    while (sigtimedwait(&set, NULL, &zero) > 0)
        ;
    sigprocmask(SIG_SETMASK, &s->old_mask, NULL);
    sigaction(SIGCHLD, &s->old_chld, NULL);
}

static void kill_and_reap(pid_t pid)
{
    kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
        ;
}

static int read_sysctl(const char *path)
{
    _cleanup_fclose_ FILE *f = fopen(path, "re");
    int v;
    return f && fscanf(f, "%d", &v) == 1 ? v : -1;
}

/* What to change when the kernel refuses us a user namespace (or its capabilities). */
static int userns_error(int r, const char *what, struct errmsg *e)
{
    if (read_sysctl("/proc/sys/kernel/unprivileged_userns_clone") == 0)
        return errmsg_set(e, r,
                          "%s: unprivileged user namespaces are disabled: sysctl "
                          "kernel.unprivileged_userns_clone=1",
                          what);
    if (read_sysctl("/proc/sys/user/max_user_namespaces") == 0)
        return errmsg_set(e, r,
                          "%s: user namespaces are disabled: sysctl "
                          "user.max_user_namespaces=15000",
                          what);
    if (r == -ENOSPC)
        return errmsg_set(e, r,
                          "%s: too many user namespaces: raise sysctl "
                          "user.max_user_namespaces",
                          what);
    if (r == -EPERM && read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1)
        return errmsg_set(e, r,
                          "%s: AppArmor restricts unprivileged user namespaces: sysctl "
                          "kernel.apparmor_restrict_unprivileged_userns=0 or an AppArmor "
                          "profile for capsule that allows userns",
                          what);
    return errmsg_set(e, r, "%s: %s", what, strerror(-r));
}

struct clone_args_v0 {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

/* fork() into new namespaces: no helper program, no second fork for the pid namespace (the
 * child is its pid 1). The child is a copy of this single thread, as after fork(). */
static pid_t clone_namespaces(unsigned long flags)
{
    struct clone_args_v0 a = {.flags = flags, .exit_signal = SIGCHLD};
    long pid = syscall(SYS_clone3, &a, sizeof(a));
    if (pid < 0 && errno == ENOSYS)
        pid = syscall(SYS_clone, flags | SIGCHLD, NULL, NULL, NULL, NULL);
    return (pid_t)pid;
}

static int write_proc_self(const char *file, const char *text)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/%s", file);
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    size_t len = strlen(text);
    return write(fd, text, len) == (ssize_t)len ? 0 : negative_errno();
}

/* In the child, for itself: one id each, the caller's, to itself or to 0. A process may map
 * its own ids without privilege, after denying setgroups; the supplementary groups stay in
 * effect (group-readable device nodes keep working). No round trip through the parent. */
static int write_id_maps(uid_t uid_in, uid_t uid_out, gid_t gid_in, gid_t gid_out, struct errmsg *e)
{
    char map[64];
    int r = write_proc_self("setgroups", "deny");
    if (r < 0 && r != -ENOENT)
        return userns_error(r, "write setgroups of the user namespace", e);
    snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)gid_in, (unsigned)gid_out);
    if ((r = write_proc_self("gid_map", map)) < 0)
        return userns_error(r, "write the user namespace's gid_map", e);
    snprintf(map, sizeof(map), "%u %u 1\n", (unsigned)uid_in, (unsigned)uid_out);
    if ((r = write_proc_self("uid_map", map)) < 0)
        return userns_error(r, "write the user namespace's uid_map", e);
    return 0;
}

static bool signal_ends_setup(int sig)
{
    return sig == SIGINT || sig == SIGTERM || sig == SIGHUP || sig == SIGQUIT;
}

struct supervise {
    pid_t pid;
    int report_fd, sig_fd;
    struct tty_relay *relay; /* the command's terminal (tty.h), once its master came */
    bool started, exited, aborted;
    int status;
    sigset_t pending; /* arrived during the setup, for the command once it runs */
    int n_stops;
    struct init_report report;
};

static void on_signal(struct supervise *s, const struct signalfd_siginfo *si)
{
    int sig = (int)si->ssi_signo;
    if (sig == SIGCHLD) {
        if (!s->exited && waitpid(s->pid, &s->status, WNOHANG) == s->pid)
            s->exited = true;
        return;
    }
    /* A terminal's signals (SI_KERNEL) went to its whole foreground process group: when the
     * child is in it, passing them on would deliver them twice. */
    if (s->exited || (si->ssi_code == SI_KERNEL && init_terminal_reached(s->pid)))
        return;
    /* The container's terminal signals its own job when its size changes. */
    if (sig == SIGWINCH && s->relay) {
        tty_relay_resize(s->relay);
        return;
    }
    if (s->started) {
        kill(s->pid, sig);
        return;
    }
    /* Nothing runs yet to take it: keep it for the command. A second request to stop means
     * the user gives up on a start that hangs. */
    sigaddset(&s->pending, sig);
    if (signal_ends_setup(sig) && ++s->n_stops == 2 && !s->aborted) {
        kill(s->pid, SIGKILL);
        s->aborted = true;
    }
}

static void read_signal(struct supervise *s)
{
    struct signalfd_siginfo si;
    if (read(s->sig_fd, &si, sizeof(si)) == (ssize_t)sizeof(si))
        on_signal(s, &si);
}

/* Until the report pipe closes: EOF alone means the command's execve succeeded. The pipe is
 * read before the signals that arrived with it, so that a signal sent to a command that has
 * already started is forwarded, not kept. */
static int wait_exec(struct supervise *s, struct errmsg *e)
{
    size_t got = 0;
    for (;;) {
        struct pollfd p[2] = {{.fd = s->report_fd, .events = POLLIN},
                              {.fd = s->sig_fd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return errmsg_set(e, negative_errno(), "wait for the container: %m");
        }
        if (p[0].revents) {
            ssize_t n = read(s->report_fd, (char *)&s->report + got, sizeof(s->report) - got);
            if (n > 0)
                got += (size_t)n;
            else if (n == 0 || errno != EINTR)
                break;
        } else if (p[1].revents & POLLIN)
            read_signal(s);
    }
    if (got == sizeof(s->report))
        return errmsg_set(e, s->report.err < 0 ? s->report.err : -EIO, "%s", s->report.msg);
    if (s->aborted)
        return errmsg_set(e, -EINTR, "interrupted while starting the container");
    if (got > 0)
        return errmsg_set(e, -EIO, "the container failed before it started");
    s->started = true;
    for (int sig = 1; sig < NSIG; sig++)
        if (sigismember(&s->pending, sig) == 1 && !s->exited)
            kill(s->pid, sig);
    return 0;
}

static int wait_exit(struct supervise *s)
{
    bool relaying = s->relay != NULL;
    while (!s->exited) {
        struct pollfd p[3] = {{.fd = s->sig_fd, .events = POLLIN}, {.fd = -1}, {.fd = -1}};
        int tty[2] = {-1, -1};
        if (relaying)
            tty_relay_fds(s->relay, tty);
        p[1] = (struct pollfd){.fd = tty[0], .events = POLLIN};
        p[2] = (struct pollfd){.fd = tty[1], .events = POLLIN};
        if (poll(p, 3, -1) < 0 && errno != EINTR) {
            /* Should never happen; still collect the child rather than leave it. */
            while (waitpid(s->pid, &s->status, 0) < 0)
                if (errno != EINTR)
                    return negative_errno();
            s->exited = true;
            break;
        }
        if (p[0].revents & POLLIN)
            read_signal(s);
        if (relaying && (p[1].revents || p[2].revents))
            relaying = tty_relay_pump(s->relay, p[1].revents != 0, p[2].revents != 0);
    }
    return 0;
}

/* The parent's whole job once the child runs: learn whether the command started, tell the
 * caller, forward signals, collect the exit status. The child is always reaped. */
static int supervise(pid_t pid, int report_fd, int tty_sock, const struct run_spec *spec,
                     int *ret_exit, unsigned *ret_flags, struct errmsg *e)
{
    sigset_t set;
    init_signal_set(&set);
    struct supervise s = {.pid = pid, .report_fd = report_fd};
    sigemptyset(&s.pending);
    _cleanup_close_ int sfd = s.sig_fd = signalfd(-1, &set, SFD_CLOEXEC);
    if (sfd < 0) {
        kill_and_reap(pid);
        return errmsg_set(e, negative_errno(), "signalfd: %m");
    }
    int r = wait_exec(&s, e);
    if (r >= 0 && tty_sock >= 0 && (r = tty_relay_start(tty_sock, &s.relay, e)) < 0)
        kill_and_reap(pid);
    if (r >= 0 && spec && spec->on_started && (r = spec->on_started(pid, spec->userdata)) < 0)
        errmsg_set(e, r, "container start hook: %s", strerror(-r));
    if (r < 0) {
        *ret_flags = s.report.flags;
        if (!s.exited)
            kill_and_reap(pid);
        tty_relay_end(s.relay);
        return r;
    }
    r = wait_exit(&s);
    tty_relay_end(s.relay);
    if (r < 0)
        return errmsg_set(e, r, "wait for the container: %s", strerror(-r));
    *ret_exit = init_exit_code(s.status);
    return 0;
}

/* Moves this process into a user and mount namespace nested in the container's, with the same
 * ids: the mounts it had become locked (a copy into a less privileged mount namespace), so a
 * root of the container can no longer unmount or remount what keeps capsule's cache read-only
 * (mounts-protect.c). The command, its init and `capsule exec` all live in the nested one. */
static int lock_mounts(const struct mounts_identity *id, struct errmsg *e)
{
    if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
        return userns_error(negative_errno(), "lock the container's mounts", e);
    return write_id_maps(id->uid, id->uid, id->gid, id->gid, e);
}

static _Noreturn void child_fail(int report_fd, int r, unsigned flags, const struct errmsg *e)
{
    init_report(report_fd, r, flags, e->text);
    _exit(125);
}

/* The child, in its new namespaces: map the ids, build the root, run the command. */
static _Noreturn void child_main(const struct run_ctx *c, int alive_fd, int report_fd, int tty_sock)
{
    const struct run_spec *s = c->spec;
    const struct mounts_identity *id = &c->plan.id;
    struct errmsg e = {{0}};
    bool refused = false;
    int root_fd = -1;
    /* Leftover containers are a classic complaint: die with capsule. If capsule died before
     * that took effect, its end of this pipe (never written) has closed. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    /* Then wait for capsule's go: it puts this process in the container's cgroup first, so that
     * nothing the command starts is left outside it. */
    char go;
    ssize_t n;
    while ((n = read(alive_fd, &go, 1)) < 0 && errno == EINTR)
        ;
    if (n != 1)
        _exit(125);
    /* fuse-overlayfs' root is asked for on the same socket. */
    struct rootfs_fuse fuse = {.dir = c->fuse.dir, .sock = alive_fd};
    const struct rootfs_fuse *fusep = s->fuse_overlayfs ? &fuse : NULL;
    if (!fusep)
        close(alive_fd);
    struct mounts_host_root host = {0};
    int r = write_id_maps(id->uid, c->host_uid, id->gid, c->host_gid, &e);
    if (r >= 0 && s->hostname && sethostname(s->hostname, strlen(s->hostname)) < 0)
        r = errmsg_set(&e, negative_errno(), "set the hostname '%s': %m", s->hostname);
    if (r >= 0)
        r = mounts_host_root_prepare(s, &host, &e);
    if (r >= 0 && (r = rootfs_assemble(s, c->copy_dir, fusep, &root_fd, &refused, &e)) >= 0) {
        r = mounts_setup(root_fd, &c->plan, &host, &e);
        /* Layers of another user (a cache shared by a node) show unmapped owners: the overlay
         * cannot create mount points or generated files in their directories, a copy can. */
        refused = !c->copy_dir && !fusep && (r == -EACCES || r == -EOVERFLOW);
        if (r >= 0)
            r = rootfs_pivot(root_fd, &e);
        /* Always: a later mount may cover the cache where no protecting bind could be made,
         * and only a locked mount stays where it is (--mount X:$HOME/.cache, then umount). */
        if (r >= 0)
            r = lock_mounts(id, &e);
    }
    if (r < 0)
        child_fail(report_fd, r, refused ? INIT_REPORT_OVERLAY_REFUSED : 0, &e);
    close(root_fd);
    if (fusep)
        close(alive_fd);
    struct init_command cmd = {
        .argv = s->argv,
        .env = c->env,
        .cwd = s->cwd,
        .mask = &c->old_mask,
        .report_fd = report_fd,
        .run_ldconfig = s->run_ldconfig,
        .ld_library_dir = s->ld_library_dir,
        .make_readonly = !s->writable,
        .fake_ids = s->remap_root,
        .tty_sock = tty_sock,
        .tty_all = s->tty_all,
        .hold_fd = s->hold ? s->hold_fd : -1,
        .keep_fds = s->keep_fds,
        .n_keep_fds = s->n_keep_fds,
        .output_fd = s->output_fd ? *s->output_fd : -1,
    };
    if (s->pid_ns)
        init_run(&cmd);
    init_exec_command(&cmd);
}

/* Puts the container's first process in a cgroup of its own, where the host allows; returns its
 * directory (malloc'd) or NULL, having said why at debug level. */
static char *enter_scope(const struct run_spec *s, pid_t pid)
{
    char *dir = NULL;
    struct errmsg e = {{0}};
    if (s->cgroup_scope && cgroup_scope_enter(s->cgroup_scope, pid, &dir, &e) < 0)
        log_debug("no cgroup of its own for the container (%s); gpumon attributes it by %s", e.text,
                  NAMES_ENV_CAPSULE_NAME);
    return dir;
}

static int spawn(struct run_ctx *c, int *ret_exit, unsigned *ret_flags, struct errmsg *e)
{
    const struct run_spec *s = c->spec;
    int alive[2], report[2];
    /* A socket pair, not a pipe: the go is sent with MSG_NOSIGNAL, so a child killed before it
     * reads it costs an error, not capsule's life (SIGPIPE). */
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, alive) < 0)
        return errmsg_set(e, negative_errno(), "socketpair: %m");
    _cleanup_close_ int alive_r = alive[0], alive_w = alive[1];
    if (pipe2(report, O_CLOEXEC) < 0)
        return errmsg_set(e, negative_errno(), "pipe: %m");
    _cleanup_close_ int report_r = report[0], report_w = report[1];
    int tty[2];
    int r = tty_channel(s->tty, tty, e);
    if (r < 0)
        return r;
    _cleanup_close_ int tty_r = tty[0], tty_w = tty[1];
    unsigned long flags = CLONE_NEWUSER | CLONE_NEWNS | (s->pid_ns ? CLONE_NEWPID : 0) |
                          (s->hostname ? CLONE_NEWUTS : 0);
    pid_t pid = clone_namespaces(flags);
    if (pid < 0)
        return userns_error(negative_errno(), "create the container's namespaces", e);
    if (pid == 0) {
        close(alive_w);
        close(report_r);
        if (tty_r >= 0)
            close(tty_r);
        child_main(c, alive_r, report_w, tty_w);
    }
    close(TAKE_FD(alive_r));
    close(TAKE_FD(report_w));
    if (tty_w >= 0)
        close(TAKE_FD(tty_w));
    _cleanup_free_ char *scope = enter_scope(s, pid);
    if (send(alive_w, "g", 1, MSG_NOSIGNAL) != 1) {
        r = errmsg_set(e, negative_errno(), "start the container: its first process: %m");
        kill_and_reap(pid);
    } else if (s->fuse_overlayfs &&
               (r = fuse_root_serve(&c->fuse, alive_w, pid, scope, &c->old_mask, e)) < 0)
        kill_and_reap(pid);
    else
        r = supervise(pid, report_r, tty_r, s, ret_exit, ret_flags, e);
    /* The container has ended: its root goes too, before its cgroup (fuse-overlayfs is in it). */
    fuse_root_stop(&c->fuse);
    if (scope && cgroup_scope_remove(scope) < 0)
        log_debug("cgroup %s stays: processes of the container are left in it", scope);
    /* A mount refused in the namespace: say why when AppArmor is the likely reason. */
    if (r == -EPERM && e && !strstr(e->text, "AppArmor") &&
        read_sysctl("/proc/sys/kernel/apparmor_restrict_unprivileged_userns") == 1)
        errmsg_prefix(e, r,
                      "AppArmor restricts unprivileged user namespaces (sysctl "
                      "kernel.apparmor_restrict_unprivileged_userns)");
    return r;
}

static int run_once(struct run_ctx *c, int *ret_exit, bool *ret_refused, struct errmsg *e)
{
    struct sig_state st;
    sig_enter(&st);
    c->old_mask = st.old_mask;
    unsigned flags = 0;
    int r = spawn(c, ret_exit, &flags, e);
    sig_leave(&st);
    *ret_refused = r < 0 && (flags & INIT_REPORT_OVERLAY_REFUSED);
    return r;
}

static int prepare_identity(struct run_ctx *c)
{
    const struct run_spec *s = c->spec;
    struct mounts_identity *id = &c->plan.id;
    c->host_uid = getuid();
    c->host_gid = getgid();
    id->uid = s->remap_root ? 0 : c->host_uid;
    id->gid = s->remap_root ? 0 : c->host_gid;
    if (s->remap_root) {
        id->user = id->group = "root";
    } else {
        struct passwd *pw = s->user_name ? NULL : getpwuid(c->host_uid);
        if (pw && !(c->user = strdup(pw->pw_name)))
            return -ENOMEM;
        id->user = s->user_name ? s->user_name : c->user ? c->user : "user";
        struct group *gr = getgrgid(c->host_gid);
        if (gr && !(c->group = strdup(gr->gr_name)))
            return -ENOMEM;
        id->group = c->group ? c->group : id->user;
    }
    const char *home = s->home ? s->home : getenv("HOME");
    /* Never bind the host's / or a relative path over the container. */
    if (home && (home[0] != '/' || home[1] == '\0'))
        home = NULL;
    c->plan.host_home = s->no_home ? NULL : home;
    id->home = s->no_home || !home ? (s->remap_root ? "/root" : "/") : home;
    return 0;
}

static int prepare_env(struct run_ctx *c)
{
    char *const *env = c->spec->env;
    size_t n = 0;
    while (env && env[n])
        n++;
    if (!(c->env = calloc(n + 2, sizeof(char *))))
        return -ENOMEM;
    memcpy(c->env, env, n * sizeof(char *));
    /* The spec's HOME wins; ours only fills a gap. */
    if (!strv_env_get(env, "HOME")) {
        if (asprintf(&c->home_env, "HOME=%s", c->plan.id.home) < 0)
            return -ENOMEM;
        c->env[n] = c->home_env;
    }
    return 0;
}

static void run_ctx_done(struct run_ctx *c)
{
    fuse_root_done(&c->fuse);
    if (c->copy_dir)
        rm_tree(c->copy_dir);
    free(c->copy_dir);
    free(c->env);
    free(c->home_env);
    free(c->user);
    free(c->group);
}

static int check_spec(const struct run_spec *s, struct errmsg *e)
{
    if (s->hold ? s->hold_fd <= STDERR_FILENO || s->tty : !s->argv || !s->argv[0] || !s->argv[0][0])
        return errmsg_set(e, -EINVAL,
                          s->hold ? "nothing to hold the container by" : "no command to run");
    if (!s->upper_dir != !s->work_dir)
        return errmsg_set(e, -EINVAL, "an upper directory needs a work directory and back");
    if (s->n_layers > 0 && !s->layers)
        return errmsg_set(e, -EINVAL, "no layer directories");
    if (s->fuse_overlayfs && s->rootfs_mode == RUNTIME_ROOTFS_COPY)
        return errmsg_set(e, -EINVAL,
                          "node cache layers are mounted with fuse-overlayfs: a copy of them "
                          "(rootfs = copy) would lose the image's file modes");
    return 0;
}

int runtime_run(const struct run_spec *spec, int *ret_exit, struct errmsg *e)
{
    int r = check_spec(spec, e);
    if (r < 0)
        return r;
    struct run_ctx c = {.spec = spec, .plan.spec = spec, .fuse.log_fd = -1};
    if ((r = prepare_identity(&c)) < 0 || (r = prepare_env(&c)) < 0) {
        run_ctx_done(&c);
        return errmsg_set(e, r, "prepare the container: %s", strerror(-r));
    }
    if (spec->fuse_overlayfs &&
        (r = fuse_root_prepare(spec, c.plan.id.uid, c.plan.id.gid, &c.fuse, e)) < 0) {
        run_ctx_done(&c);
        return r;
    }
    bool refused = false;
    if (spec->rootfs_mode == RUNTIME_ROOTFS_COPY)
        r = rootfs_copy_prepare(spec, "rootfs = copy", &c.copy_dir, e);
    if (r >= 0)
        r = run_once(&c, ret_exit, &refused, e);
    if (r < 0 && refused && spec->rootfs_mode == RUNTIME_ROOTFS_AUTO) {
        /* Why the overlay could not serve goes into the copy's error, should it fail too. */
        struct errmsg why = {{0}};
        errmsg_set(&why, r, "the overlay could not be used: %s", e ? e->text : "refused");
        log_debug("%s; using a copy of the image instead", why.text);
        if ((r = rootfs_copy_prepare(spec, why.text, &c.copy_dir, e)) >= 0)
            r = run_once(&c, ret_exit, &refused, e);
    }
    run_ctx_done(&c);
    return r;
}

/* ---- capsule exec ---- */

struct exec_target {
    int user, mnt, pid, root;
    /* The user namespace that owns the pid namespace, when it is not `user`: the container's
     * own, around the nested one that lock_mounts() made. -1 otherwise. */
    int pid_owner;
    bool own_pid_ns;
};

static void exec_target_done(struct exec_target *t)
{
    int *fds[] = {&t->user, &t->mnt, &t->pid, &t->root, &t->pid_owner};
    for (size_t i = 0; i < ELEMENTSOF(fds); i++)
        closep(fds[i]);
}

static int open_target(pid_t pid, struct exec_target *t, struct errmsg *e)
{
    static const char *const names[] = {"ns/user", "ns/mnt", "ns/pid", "root"};
    int *fds[] = {&t->user, &t->mnt, &t->pid, &t->root};
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, names[i]);
        *fds[i] = open(path, (i == 3 ? O_PATH | O_DIRECTORY : O_RDONLY) | O_CLOEXEC);
        if (*fds[i] < 0) {
            int r = negative_errno();
            if (r == -ENOENT)
                return errmsg_set(e, -ESRCH, "container process %d is not running", (int)pid);
            return errmsg_set(e, r, "open %s: %s", path, strerror(-r));
        }
    }
    struct stat theirs, ours;
    if (fstat(t->pid, &theirs) < 0 || stat("/proc/self/ns/pid", &ours) < 0)
        return errmsg_set(e, negative_errno(), "compare pid namespaces: %m");
    t->own_pid_ns = theirs.st_ino != ours.st_ino || theirs.st_dev != ours.st_dev;
    if (!t->own_pid_ns)
        return 0;
    /* Joining a pid namespace takes CAP_SYS_ADMIN in the user namespace that owns it: join that
     * one first when the container's processes live in one nested below it. */
    _cleanup_close_ int owner = ioctl(t->pid, NS_GET_USERNS);
    struct stat o, u;
    if (owner < 0 || fstat(owner, &o) < 0 || fstat(t->user, &u) < 0)
        return errmsg_set(e, negative_errno(),
                          "find the owner of the container's pid namespace: %m");
    if (o.st_ino != u.st_ino || o.st_dev != u.st_dev)
        t->pid_owner = TAKE_FD(owner);
    return 0;
}

/* The cgroup.procs of the container's scope (lib/cgroup.h), when it has one: read through the
 * process's /proc directory, and only if that is still the container's process (its mount
 * namespace is the one open_target opened), so a reused pid cannot lead into another cgroup.
 * Worked out before the fork, so that the child only opens and writes. NULL: none. */
static char *target_scope(pid_t pid, const struct exec_target *t)
{
    char path[32];
    snprintf(path, sizeof(path), "/proc/%d", (int)pid);
    _cleanup_close_ int dir = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    _cleanup_close_ int mnt = dir < 0 ? -1 : openat(dir, "ns/mnt", O_RDONLY | O_CLOEXEC);
    struct stat now, then;
    char *procs = NULL;
    if (mnt < 0 || fstat(mnt, &now) < 0 || fstat(t->mnt, &then) < 0 || now.st_ino != then.st_ino ||
        now.st_dev != then.st_dev || cgroup_scope_procs_of(dir, &procs) < 0)
        return NULL;
    return procs;
}

/* Moves the calling (single-threaded) process into the container: its scope (scope_procs, may
 * be NULL), then the pid namespace while this process has the capabilities of its owner, then
 * the user and mount namespaces the container's processes are in, then its root. Allocates
 * nothing: exec's child calls it between fork and exec. */
static int join_target(const struct exec_target *t, const char *scope_procs, struct errmsg *e)
{
    /* While the host's cgroup tree is still in sight; where the scope is not ours to change,
     * the process stays where it is. */
    if (scope_procs)
        (void)cgroup_enter(scope_procs);
    if ((t->pid_owner >= 0 && setns(t->pid_owner, CLONE_NEWUSER) < 0) ||
        (t->pid_owner >= 0 && setns(t->pid, CLONE_NEWPID) < 0) ||
        setns(t->user, CLONE_NEWUSER) < 0 || setns(t->mnt, CLONE_NEWNS) < 0 ||
        (t->own_pid_ns && t->pid_owner < 0 && setns(t->pid, CLONE_NEWPID) < 0))
        return errmsg_set(e, negative_errno(), "join the container's namespaces: %m");
    if (fchdir(t->root) < 0 || chroot(".") < 0)
        return errmsg_set(e, negative_errno(), "enter the container root: %m");
    return 0;
}

static _Noreturn void exec_child(const struct exec_target *t, const char *scope_procs,
                                 const struct init_command *cmd)
{
    struct errmsg e = {{0}};
    int r = join_target(t, scope_procs, &e);
    if (r < 0)
        child_fail(cmd->report_fd, r, 0, &e);
    if (!t->own_pid_ns)
        init_exec_command(cmd);
    /* setns(CLONE_NEWPID) applies to children only: the command is one. */
    pid_t pid = fork();
    if (pid < 0)
        child_fail(cmd->report_fd, errmsg_set(&e, negative_errno(), "fork: %m"), 0, &e);
    if (pid == 0)
        init_exec_command(cmd);
    close(cmd->report_fd);
    close_range(3, ~0U, 0);
    if (cmd->tty_sock >= 0)
        init_null_stdio();
    init_supervise(pid, false);
}

int runtime_join(pid_t pid, struct errmsg *e)
{
    _cleanup_(exec_target_done) struct exec_target t = {-1, -1, -1, -1, -1, false};
    int r = open_target(pid, &t, e);
    if (r < 0)
        return r;
    _cleanup_free_ char *scope_procs = target_scope(pid, &t);
    if ((r = join_target(&t, scope_procs, e)) < 0)
        return r;
    return t.own_pid_ns ? 1 : 0;
}

int runtime_exec(pid_t pid, const struct runtime_exec_spec *spec, int *ret_exit, struct errmsg *e)
{
    if (!spec->argv || !spec->argv[0] || !spec->argv[0][0])
        return errmsg_set(e, -EINVAL, "no command to run");
    _cleanup_(exec_target_done) struct exec_target t = {-1, -1, -1, -1, -1, false};
    int r = open_target(pid, &t, e);
    if (r < 0)
        return r;
    _cleanup_free_ char *scope_procs = target_scope(pid, &t);
    int report[2];
    if (pipe2(report, O_CLOEXEC) < 0)
        return errmsg_set(e, negative_errno(), "pipe: %m");
    _cleanup_close_ int report_r = report[0], report_w = report[1];
    int tty[2];
    if ((r = tty_channel(spec->tty, tty, e)) < 0)
        return r;
    _cleanup_close_ int tty_r = tty[0], tty_w = tty[1];
    struct sig_state st;
    sig_enter(&st);
    struct init_command cmd = {.argv = spec->argv,
                               .env = spec->env,
                               .cwd = spec->cwd,
                               .mask = &st.old_mask,
                               .report_fd = report_w,
                               .fake_ids = spec->remap_root,
                               .tty_sock = tty_w,
                               .tty_all = spec->tty_all,
                               .hold_fd = -1,
                               .output_fd = -1};
    pid_t child = fork();
    if (child == 0) {
        close(report_r);
        if (tty_r >= 0)
            close(tty_r);
        exec_child(&t, scope_procs, &cmd);
    }
    if (child < 0)
        r = errmsg_set(e, negative_errno(), "fork: %m");
    else {
        close(TAKE_FD(report_w));
        if (tty_w >= 0)
            close(TAKE_FD(tty_w));
        unsigned flags = 0;
        r = supervise(child, report_r, tty_r, NULL, ret_exit, &flags, e);
    }
    sig_leave(&st);
    return r;
}

/* ---- probes ---- */

/* Runs fn in a child in new user and mount namespaces (the caller's ids mapped to themselves)
 * and returns what it returned, with its message. */
static int probe_spawn(int (*fn)(void *arg, struct errmsg *e), void *arg, struct errmsg *e)
{
    int report[2];
    if (pipe2(report, O_CLOEXEC) < 0)
        return errmsg_set(e, negative_errno(), "pipe: %m");
    _cleanup_close_ int report_r = report[0], report_w = report[1];
    /* Read here: in the new namespace they read as the overflow id until mapped. */
    uid_t uid = getuid();
    gid_t gid = getgid();
    pid_t pid = clone_namespaces(CLONE_NEWUSER | CLONE_NEWNS);
    if (pid < 0)
        return userns_error(negative_errno(), "create a user namespace", e);
    if (pid == 0) {
        struct errmsg ce = {{0}};
        int r = write_id_maps(uid, uid, gid, gid, &ce);
        if (r >= 0)
            r = fn(arg, &ce);
        if (r < 0)
            init_report(report_w, r, 0, ce.text);
        _exit(r < 0 ? 1 : 0);
    }
    close(TAKE_FD(report_w));
    struct init_report rep;
    ssize_t n;
    while ((n = read(report_r, &rep, sizeof(rep))) < 0 && errno == EINTR)
        ;
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (n == (ssize_t)sizeof(rep))
        return errmsg_set(e, rep.err < 0 ? rep.err : -EIO, "%s", rep.msg);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
        return errmsg_set(e, -EIO, "the probe failed (status %d)", init_exit_code(status));
    return 0;
}

static int probe_userns_child(void *arg, struct errmsg *e)
{
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("tmpfs", "/", "tmpfs", 0, NULL) < 0)
        return userns_error(negative_errno(), "mount in a user namespace", e);
    return 0;
}

int runtime_probe_userns(struct errmsg *e)
{
    return probe_spawn(probe_userns_child, NULL, e);
}

static int probe_overlay_child(void *arg, struct errmsg *e)
{
    const struct run_spec *spec = arg;
    _cleanup_close_ int root = -1;
    bool refused;
    int r = rootfs_assemble(spec, NULL, NULL, &root, &refused, e);
    if (r < 0)
        return r;
    if (faccessat(root, "kept", F_OK, 0) < 0)
        return errmsg_set(e, -EIO, "overlay in a user namespace: the lower layer is missing");
    if (faccessat(root, "gone", F_OK, 0) == 0 || faccessat(root, "dir/old", F_OK, 0) == 0)
        return errmsg_set(e, -EOPNOTSUPP,
                          "overlay in a user namespace ignores whiteouts or "
                          "opaque directories (kernel older than 5.11?)");
    return 0;
}

/* Two layers in the cache's file system, as unpack_layer writes them: a file, a file deleted
 * by a whiteout, a directory made opaque. */
static int probe_layers(const char *dir, struct errmsg *e)
{
    char p[4096];
    static const char *const dirs[] = {"l1", "l1/dir", "l2", "l2/dir"};
    for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, dirs[i]);
        if (mkdir(p, 0755) < 0)
            return errmsg_set(e, negative_errno(), "create %s: %m", p);
    }
    static const char *const files[] = {"l1/kept", "l1/gone", "l1/dir/old"};
    for (size_t i = 0; i < ELEMENTSOF(files); i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, files[i]);
        int fd = open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
        if (fd < 0)
            return errmsg_set(e, negative_errno(), "create %s: %m", p);
        close(fd);
    }
    snprintf(p, sizeof(p), "%s/l2/gone", dir);
    if (mknod(p, S_IFCHR | 0600, makedev(0, 0)) < 0)
        return errmsg_set(e, negative_errno(), "create an overlay whiteout in '%s': %m", dir);
    snprintf(p, sizeof(p), "%s/l2/dir", dir);
    if (setxattr(p, "user.overlay.opaque", "y", 1, 0) < 0)
        return errmsg_set(e, negative_errno(),
                          "set user.overlay.opaque in '%s': %m (the cache's file system needs "
                          "user extended attributes)",
                          dir);
    return 0;
}

int runtime_probe_overlay(const char *scratch_dir, struct errmsg *e)
{
    const char *scratch = scratch_dir ? scratch_dir : getenv("TMPDIR");
    if (!scratch || !*scratch)
        scratch = "/tmp";
    _cleanup_free_ char *dir = NULL, *l1 = NULL, *l2 = NULL;
    if (asprintf(&dir, "%s/capsule-probe-XXXXXX", scratch) < 0)
        return -ENOMEM;
    if (!mkdtemp(dir))
        return errmsg_set(e, negative_errno(), "create a probe directory in '%s': %m", scratch);
    int r = probe_layers(dir, e);
    if (r >= 0 && (asprintf(&l1, "%s/l1", dir) < 0 || asprintf(&l2, "%s/l2", dir) < 0))
        r = -ENOMEM;
    if (r >= 0) {
        char *layers[] = {l1, l2};
        struct run_spec spec = {
            .layers = layers, .n_layers = 2, .rootfs_mode = RUNTIME_ROOTFS_OVERLAY};
        r = probe_spawn(probe_overlay_child, &spec, e);
    }
    rm_tree(dir);
    return r;
}

static int probe_fuse_child(void *arg, struct errmsg *e)
{
    const char *const *a = arg;
    return fuse_root_probe_mount(a[0], a[1], e);
}

int runtime_probe_fuse_overlayfs(const char *program, struct errmsg *e)
{
    int r = fuse_root_check(program, e);
    if (r < 0)
        return r;
    const char *scratch = getenv("TMPDIR");
    if (!scratch || !*scratch)
        scratch = "/tmp";
    _cleanup_free_ char *dir = NULL;
    if (asprintf(&dir, "%s/capsule-probe-XXXXXX", scratch) < 0)
        return -ENOMEM;
    if (!mkdtemp(dir))
        return errmsg_set(e, negative_errno(), "create a probe directory in '%s': %m", scratch);
    const char *args[] = {program, dir};
    r = probe_spawn(probe_fuse_child, args, e);
    rm_tree(dir);
    return r;
}

void mount_entry_done(struct mount_entry *m)
{
    free(m->source);
    free(m->target);
    m->source = m->target = NULL;
}

void link_entry_done(struct link_entry *l)
{
    free(l->path);
    free(l->target);
    l->path = l->target = NULL;
}
