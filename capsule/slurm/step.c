#include "capsule/slurm/step.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/pidfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/runtime/id-filter.h"
#include "capsule/runtime/runtime.h"
#include "lib/clock.h"
#include "lib/macro.h"

#define STDERR_KEEP 8192 /* what is kept of capsule's stderr for the message */
#define MIN(a, b)   ((a) < (b) ? (a) : (b))

/* The child: fds 0..3 in place (3 only with a socket), the job's ids (all three of each), then
 * capsule. Only async-signal-safe calls: slurmstepd has threads. */
static _Noreturn void spawn_child(const struct step_spawn *s, int sock, int err, int null)
{
    if (dup2(null, STDIN_FILENO) < 0 || dup2(null, STDOUT_FILENO) < 0 ||
        dup2(err, STDERR_FILENO) < 0 || (sock >= 0 && dup2(sock, 3) < 0))
        _exit(125);
    close_range(4, ~0U, 0);
    if (setresgid(s->gid, s->gid, s->gid) < 0 || setresuid(s->uid, s->uid, s->uid) < 0)
        _exit(125);
    execve(s->program, s->argv, s->env);
    _exit(127);
}

/* The last lines of capsule's stderr as one message ("a; b"), or what its status says. */
static int failure(const char *err, size_t n, int status, const char *program, struct errmsg *e)
{
    char msg[ERRMSG_MAX] = "";
    size_t len = 0;
    for (const char *p = err; p < err + n;) {
        const char *nl = memchr(p, '\n', (size_t)(err + n - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(err + n - p);
        /* capsule's own lines; a usage line is for people at a terminal */
        /* The plugin says "capsule: " itself. */
        size_t skip = l >= 9 && strncmp(p, "capsule: ", 9) == 0 ? 9 : 0;
        if (l > skip && strncmp(p, "usage:", 6) != 0 && len + l + 3 < sizeof(msg)) {
            if (len)
                len += (size_t)snprintf(msg + len, sizeof(msg) - len, "; ");
            len +=
                (size_t)snprintf(msg + len, sizeof(msg) - len, "%.*s", (int)(l - skip), p + skip);
        }
        p += l + 1;
    }
    if (len)
        return errmsg_set(e, -EIO, "%s", msg);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
        return errmsg_set(e, -ENOENT, "cannot run %s", program);
    if (WIFSIGNALED(status))
        return errmsg_set(e, -EIO, "%s was killed by signal %d", program, WTERMSIG(status));
    return errmsg_set(e, -EIO, "%s ended (status %d) without holding the container", program,
                      WIFEXITED(status) ? WEXITSTATUS(status) : -1);
}

/* Reads the line from sock and stderr from err until the line is whole or both end. */
static int read_line(int sock, int err, char **line, size_t *line_n, char *errbuf, size_t *err_n)
{
    size_t cap = 0;
    bool sock_open = true, err_open = true;
    while (sock_open && !(*line_n && (*line)[*line_n - 1] == '\n')) {
        struct pollfd p[2] = {{.fd = sock, .events = POLLIN},
                              {.fd = err_open ? err : -1, .events = POLLIN}};
        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            return negative_errno();
        }
        if (p[1].revents) {
            char buf[1024];
            ssize_t n = read(err, buf, sizeof(buf));
            if (n <= 0)
                err_open = false;
            else {
                size_t keep = MIN((size_t)n, STDERR_KEEP - *err_n);
                memcpy(errbuf + *err_n, buf, keep);
                *err_n += keep;
            }
        }
        if (p[0].revents) {
            if (*line_n + 4096 > cap) {
                if (cap >= HELD_LINE_MAX)
                    return -EMSGSIZE;
                char *n = realloc(*line, cap = cap ? cap * 2 : 8192);
                if (!n)
                    return -ENOMEM;
                *line = n;
            }
            ssize_t n = read(sock, *line + *line_n, cap - *line_n);
            if (n <= 0)
                sock_open = false;
            else
                *line_n += (size_t)n;
        }
    }
    return 0;
}

/* The rest of the program's stderr, then its wait status; -1 when it cannot be had (slurmstepd
 * reaps every child it has, ours too at times). */
static int wait_end(struct step_holder *h, int err, char *errbuf, size_t *err_n)
{
    ssize_t n;
    char buf[1024];
    while ((n = read(err, buf, sizeof(buf))) > 0 || (n < 0 && errno == EINTR)) {
        size_t keep = n > 0 ? MIN((size_t)n, STDERR_KEEP - *err_n) : 0;
        memcpy(errbuf + *err_n, buf, keep);
        *err_n += keep;
    }
    siginfo_t si = {0};
    int status = -1;
    if (waitid(P_PIDFD, (id_t)h->pidfd, &si, WEXITED) == 0)
        status = si.si_code == CLD_EXITED ? W_EXITCODE(si.si_status, 0) : si.si_status;
    h->pid = 0;
    return status;
}

/* Starts s as the job's user (spawn_child): its stderr into a pipe whose read end is *ret_err,
 * sock (>= 0) as its fd 3; *ret holds its pid and pidfd. Nothing is left running on failure. */
static int start(const struct step_spawn *s, int sock, struct step_holder *ret, int *ret_err,
                 struct errmsg *e)
{
    int ep[2];
    if (pipe2(ep, O_CLOEXEC) < 0)
        return errmsg_set(e, negative_errno(), "pipe: %m");
    _cleanup_close_ int err_r = ep[0], err_w = ep[1];
    _cleanup_close_ int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null < 0)
        return errmsg_set(e, negative_errno(), "open /dev/null: %m");
    pid_t pid = fork();
    if (pid < 0)
        return errmsg_set(e, negative_errno(), "fork: %m");
    if (pid == 0)
        spawn_child(s, sock, err_w, null);
    *ret = (struct step_holder){.pid = pid, .pidfd = pidfd_open(pid, 0), .sock = -1};
    if (ret->pidfd < 0) {
        int r = errmsg_set(e, negative_errno(), "pidfd_open: %m");
        kill(pid, SIGKILL);
        return r;
    }
    *ret_err = TAKE_FD(err_r);
    return 0;
}

int step_hold(const struct step_spawn *s, struct step_holder *ret, struct errmsg *e)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return errmsg_set(e, negative_errno(), "socketpair: %m");
    _cleanup_close_ int ours = sv[0], theirs = sv[1], err_r = -1;
    struct step_holder h;
    int r = start(s, theirs, &h, &err_r, e);
    if (r < 0)
        return r;
    closep(&theirs);
    _cleanup_free_ char *line = NULL;
    char errbuf[STDERR_KEEP];
    size_t line_n = 0, err_n = 0;
    r = read_line(ours, err_r, &line, &line_n, errbuf, &err_n);
    if (r < 0)
        errmsg_set(e, r, "read what %s said: %s", s->program, strerror(-r));
    else if (line_n == 0) {
        int status = wait_end(&h, err_r, errbuf, &err_n);
        r = failure(errbuf, err_n, status < 0 ? 0 : status, s->program, e);
    } else
        r = held_parse(line, line_n, &h.held, e);
    if (r < 0) {
        step_release(&h, 0);
        return r;
    }
    h.sock = TAKE_FD(ours);
    *ret = h;
    return 0;
}

int step_release(struct step_holder *h, int timeout_ms)
{
    int r = 0;
    closep(&h->sock);
    if (h->pidfd >= 0 && h->pid > 0) {
        struct pollfd p = {.fd = h->pidfd, .events = POLLIN};
        uint64_t deadline = clock_now_msec() + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0);
        int n;
        do {
            uint64_t now = clock_now_msec();
            n = poll(&p, 1, now >= deadline ? 0 : (int)(deadline - now));
        } while (n < 0 && errno == EINTR);
        if (n == 0) {
            (void)syscall(SYS_pidfd_send_signal, h->pidfd, SIGKILL, NULL, 0);
            r = -ETIMEDOUT;
        }
        /* slurmstepd reaps every child it has; where it did not yet, we do. */
        (void)waitid(P_PIDFD, (id_t)h->pidfd, &(siginfo_t){0}, WEXITED | WNOHANG);
    }
    closep(&h->pidfd);
    h->pid = 0;
    held_done(&h->held);
    return r;
}

int step_join(const struct held *h, const char *workdir, struct errmsg *e)
{
    int r = runtime_join(h->pid, e);
    if (r < 0)
        return r;
    if (r == 1)
        return errmsg_set(e, -EINVAL, "the container has a pid namespace of its own");
    const char *dir = workdir ? workdir : h->cwd;
    if (chdir(dir) < 0)
        return errmsg_set(e, negative_errno(), "couldn't chdir to %s: %m", dir);
    return h->remap_root ? id_filter_install(e) : 0;
}

int step_run(const struct step_spawn *s, struct errmsg *e)
{
    _cleanup_close_ int err_r = -1;
    struct step_holder h;
    int r = start(s, -1, &h, &err_r, e);
    if (r < 0)
        return r;
    char errbuf[STDERR_KEEP];
    size_t n = 0;
    int status = wait_end(&h, err_r, errbuf, &n);
    closep(&h.pidfd);
    /* Reaped by slurmstepd before us: what it said is all there is to go by. */
    if ((status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) || (status < 0 && n == 0))
        return 0;
    return failure(errbuf, n, status < 0 ? W_EXITCODE(1, 0) : status, s->program, e);
}
