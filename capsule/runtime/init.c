/* The command process and its supervisor: exec with PATH lookup and failure reports, the
 * pid-namespace init, signal forwarding. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "capsule/runtime/id-filter.h"
#include "capsule/runtime/init.h"
#include "lib/macro.h"
#include "capsule/runtime/rootfs.h"
#include "lib/strv.h"
#include "capsule/runtime/tty.h"

#define DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

static const int forwarded_signals[] = {
    SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGWINCH, SIGCONT,
};

void init_signal_set(sigset_t *ret)
{
    sigemptyset(ret);
    for (size_t i = 0; i < ELEMENTSOF(forwarded_signals); i++)
        sigaddset(ret, forwarded_signals[i]);
    sigaddset(ret, SIGCHLD);
}

bool init_signal_forwarded(int sig)
{
    for (size_t i = 0; i < ELEMENTSOF(forwarded_signals); i++)
        if (forwarded_signals[i] == sig)
            return true;
    return false;
}

bool init_terminal_reached(pid_t pid)
{
    int fd = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return false;
    pid_t fg = tcgetpgrp(fd);
    close(fd);
    /* In a pid namespace both read 0 when the group leader (capsule) lives outside it. */
    pid_t group = getpgid(pid);
    return fg >= 0 && group >= 0 && fg == group;
}

int init_exit_code(int status)
{
    if (WIFEXITED(status))
        return WEXITSTATUS(status);
    if (WIFSIGNALED(status))
        return 128 + WTERMSIG(status);
    return 255;
}

void init_report(int fd, int err, unsigned flags, const char *msg)
{
    struct init_report r = {.err = err, .flags = flags};
    snprintf(r.msg, sizeof(r.msg), "%s", msg);
    /* One write of less than PIPE_BUF bytes is atomic; nothing else can be done on failure. */
    ssize_t n = write(fd, &r, sizeof(r));
    (void)n;
}

/* execvp's rules with the container's PATH instead of ours: a name without '/' is tried in each
 * PATH directory; not found anywhere is -ENOENT, found but not executable is -EACCES. Returns
 * only on failure. */
static int exec_lookup(char *const *argv, char *const *env)
{
    const char *name = argv[0];
    if (strchr(name, '/')) {
        execve(name, argv, env);
        return negative_errno();
    }
    const char *path = strv_env_get(env, "PATH");
    if (!path)
        path = DEFAULT_PATH;
    size_t name_len = strlen(name);
    int result = -ENOENT;
    for (const char *p = path;; p++) {
        const char *end = strchrnul(p, ':');
        size_t dir_len = (size_t)(end - p);
        char buf[4096];
        if (dir_len + name_len + 2 <= sizeof(buf)) {
            /* An empty PATH element means the working directory, as in execvp. */
            int n = dir_len ? snprintf(buf, sizeof(buf), "%.*s/%s", (int)dir_len, p, name)
                            : snprintf(buf, sizeof(buf), "%s", name);
            if (n > 0) {
                execve(buf, argv, env);
                if (errno == EACCES)
                    result = -EACCES;
                else if (errno != ENOENT && errno != ENOTDIR && errno != ENAMETOOLONG)
                    return negative_errno();
            }
        }
        if (!*end)
            break;
        p = end;
    }
    return result;
}

static char **env_with(char *const *env, const char *key, const char *value)
{
    size_t n = 0;
    while (env && env[n])
        n++;
    char **out = calloc(n + 2, sizeof(char *));
    if (!out)
        return NULL;
    size_t j = 0;
    const char *old = strv_env_get(env, key);
    for (size_t i = 0; i < n; i++)
        if (strncmp(env[i], key, strlen(key)) != 0 || env[i][strlen(key)] != '=')
            out[j++] = env[i];
    if (asprintf(&out[j], "%s=%s%s%s", key, value, old ? ":" : "", old ? old : "") < 0) {
        free(out);
        return NULL;
    }
    return out;
}

/* Runs the image's ldconfig with lib_dir added to the cache; output is noise for the user.
 * Returns 0 when it ran and succeeded. */
static int run_ldconfig(const char *lib_dir)
{
    static const char *const candidates[] = {"/sbin/ldconfig", "/usr/sbin/ldconfig"};
    const char *ldconfig = NULL;
    for (size_t i = 0; i < ELEMENTSOF(candidates) && !ldconfig; i++)
        if (access(candidates[i], X_OK) == 0)
            ldconfig = candidates[i];
    if (!ldconfig)
        return -ENOENT;
    pid_t pid = fork();
    if (pid < 0)
        return negative_errno();
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null >= 0) {
            dup2(null, STDOUT_FILENO);
            dup2(null, STDERR_FILENO);
        }
        char *argv[] = {(char *)"ldconfig", (char *)lib_dir, NULL};
        char *envp[] = {NULL};
        execve(ldconfig, argv, envp);
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return negative_errno();
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static _Noreturn void fail(const struct init_command *c, int err, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static _Noreturn void fail(const struct init_command *c, int err, int code, const char *fmt, ...)
{
    char msg[ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    init_report(c->report_fd, err, 0, msg);
    _exit(code);
}

/* A container kept for host programs to join: nothing of the image runs, this process only
 * keeps the namespaces alive. Closing the report pipe tells the parent it is ready; it keeps no
 * other file of capsule's and no terminal. */
static _Noreturn void hold(const struct init_command *c)
{
    int fd = c->hold_fd;
    if (fd > 3)
        close_range(3, (unsigned)fd - 1, 0);
    close_range((unsigned)fd + 1, ~0U, 0);
    init_null_stdio();
    sigprocmask(SIG_SETMASK, c->mask, NULL);
    char buf[64];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) != 0)
        if (n < 0 && errno != EINTR)
            break;
    _exit(0);
}

/* The descriptors the command keeps (run_spec.keep_fds), at their numbers and without
 * close-on-exec, and its output. Each is first moved above every target, so that one target
 * cannot overwrite another's source. */
static int give_fds(const struct init_command *c)
{
    int moved[8];
    if (c->n_keep_fds > ELEMENTSOF(moved))
        return errno = E2BIG, -1;
    for (size_t i = 0; i < c->n_keep_fds; i++)
        if ((moved[i] = fcntl(c->keep_fds[i][0], F_DUPFD_CLOEXEC, 64)) < 0)
            return -1;
    for (size_t i = 0; i < c->n_keep_fds; i++)
        if (dup2(moved[i], c->keep_fds[i][1]) < 0)
            return -1;
    if (c->output_fd >= 0 &&
        (dup2(c->output_fd, STDOUT_FILENO) < 0 || dup2(c->output_fd, STDERR_FILENO) < 0))
        return -1;
    return 0;
}

_Noreturn void init_exec_command(const struct init_command *c)
{
    char *const *env = c->env;
    if (c->run_ldconfig && c->ld_library_dir && run_ldconfig(c->ld_library_dir) < 0) {
        /* Without a cache entry the loader still finds the injected libraries this way. */
        char **with = env_with(env, "LD_LIBRARY_PATH", c->ld_library_dir);
        if (with)
            env = with;
    }
    if (c->make_readonly) {
        struct errmsg e = {{0}};
        int r = rootfs_make_readonly(&e);
        if (r < 0)
            fail(c, r, 125, "%s", e.text);
    }
    if (c->hold_fd >= 0)
        hold(c);
    if (c->tty_sock >= 0) {
        struct errmsg e = {{0}};
        int r = tty_child_attach(c->tty_sock, c->tty_all, &e);
        if (r < 0)
            fail(c, r, 125, "%s", e.text);
    } else if (isatty(STDIN_FILENO) && getsid(0) != getpid()) {
        /* The caller's terminal as stdin, without a terminal of its own: in a session of its
         * own the command cannot make it its controlling terminal, so it cannot push input
         * into the caller's shell (TIOCSTI). Ctrl-C still reaches it, forwarded by capsule. */
        setsid();
    }
    if (c->fake_ids) {
        struct errmsg e = {{0}};
        int r = id_filter_install(&e);
        if (r < 0)
            fail(c, r, 125, "%s", e.text);
    }
    if (give_fds(c) < 0)
        fail(c, negative_errno(), 125, "pass descriptors to the command: %s", strerror(errno));
    const char *cwd = c->cwd ? c->cwd : "/";
    if (chdir(cwd) < 0)
        fail(c, negative_errno(), 125, "working directory '%s': %s", cwd, strerror(errno));
    sigprocmask(SIG_SETMASK, c->mask, NULL);
    int r = exec_lookup(c->argv, env);
    /* "No such file or directory" of a bare name leaves the user wondering where it looked. */
    if (r == -ENOENT && !strchr(c->argv[0], '/')) {
        const char *path = strv_env_get(env, "PATH");
        fail(c, r, 127, "exec '%s': not found in PATH=%s", c->argv[0], path ? path : DEFAULT_PATH);
    }
    fail(c, r, r == -ENOENT ? 127 : 126, "exec '%s': %s", c->argv[0], strerror(-r));
}

static void reap(pid_t pid, bool reap_all)
{
    int status;
    pid_t w;
    /* Orphans in a pid namespace become our children: collect them all, leave when the
     * command is gone (the kernel kills what is left when the init exits). */
    while ((w = waitpid(reap_all ? -1 : pid, &status, WNOHANG)) > 0)
        if (w == pid)
            _exit(init_exit_code(status));
}

_Noreturn void init_supervise(pid_t pid, bool reap_all)
{
    sigset_t set;
    init_signal_set(&set);
    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(&set, &si);
        if (sig < 0) {
            if (errno == EINTR)
                continue;
            _exit(125);
        }
        if (sig == SIGCHLD)
            reap(pid, reap_all);
        else if (si.si_code != SI_KERNEL || !init_terminal_reached(pid))
            kill(pid, sig);
    }
}

void init_null_stdio(void)
{
    int fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int i = 0; fd >= 0 && i < 3; i++)
        dup2(fd, i);
    if (fd > 2)
        close(fd);
}

_Noreturn void init_run(const struct init_command *c)
{
    /* vfork: the init only waits meanwhile, and copying its page tables would cost more than
     * the rest of the start. The command never returns here (execve or _exit). */
    pid_t pid = vfork();
    if (pid < 0)
        fail(c, negative_errno(), 125, "fork the command: %s", strerror(errno));
    if (pid == 0)
        init_exec_command(c);
    /* The parent reads EOF once the command's execve closed the last other copy. The init
     * lives as long as the container: it keeps none of capsule's other files either, nor the
     * caller's terminal once the command has one of its own (a root of the container could read
     * the keys typed there through /proc/1/fd/0). */
    close(c->report_fd);
    close_range(3, ~0U, 0);
    if (c->tty_sock >= 0)
        init_null_stdio();
    init_supervise(pid, true);
}
