#include "hooks.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "lib/macro.h"
#include "lib/process.h"

extern char **environ;

/* How long a SIGKILLed process group may take to be reaped before we stop waiting for it: a
 * process stuck in the kernel (D state) must not hold up the shutdown. */
#define REAP_AFTER_KILL_US 1000000u
/* Poll tick when a child cannot be watched with a pidfd, or a cancel flag must be checked. */
#define TICK_MS 50

struct child {
    pid_t pid;  /* > 0 while started and not yet reaped */
    int out_fd; /* read end of the output pipe, -1 when closed or not captured */
    int pidfd;  /* readable when the child exits; -1 when the kernel has no pidfds */
    uint64_t started_us;
    size_t len;
    char buf[HOOKS_LINE_MAX + 1];
};

static int spawn_child(const struct hooks_job *job, const struct hooks_exec_opts *o,
                       struct child *c)
{
    int pipefd[2] = {-1, -1};
    if (!o->inherit_output && pipe2(pipefd, O_CLOEXEC) < 0)
        return negative_errno();

    /* The hook gets /dev/null, our pipe (or our output) and nothing else of ours: not every fd
     * of the daemon is close-on-exec (libraries open some without the flag, libcurl's sockets
     * for one), and another thread may hold such an fd right now, e.g. a root connection to
     * the Docker Engine. Its own process group, so that killing it kills its children too. */
    int out = o->inherit_output ? PROCESS_KEEP : pipefd[1];
    struct process_opts po = {.in = PROCESS_NULL,
                              .out = out,
                              .err = out,
                              .close_others = true,
                              .new_pgroup = true,
                              .envp = o->envp};
    pid_t pid;
    int r = process_spawn(job->path, job->argv, &po, &pid);
    if (pipefd[1] >= 0)
        close(pipefd[1]);
    if (r < 0) {
        if (pipefd[0] >= 0)
            close(pipefd[0]);
        return r;
    }
    if (pipefd[0] >= 0)
        fcntl(pipefd[0], F_SETFL, O_NONBLOCK);
    c->pid = pid;
    c->out_fd = pipefd[0];
    c->started_us = clock_now_usec();
    /* pidfds are always close-on-exec. Without one we fall back to a poll tick. */
    c->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    return 0;
}

static void emit_line(const struct hooks_job *job, const struct hooks_exec_opts *o, char *line,
                      size_t len)
{
    if (len > 0 && line[len - 1] == '\r')
        len--;
    line[len] = '\0';
    if (o->line_fn)
        o->line_fn(job->name, line, o->userdata);
}

/* Hands every complete line in the buffer to the callback and keeps the rest; a line that fills
 * the whole buffer is handed on in pieces. At EOF the unterminated rest goes out too. */
static void flush_lines(const struct hooks_job *job, const struct hooks_exec_opts *o,
                        struct child *c, bool eof)
{
    size_t start = 0;
    for (size_t i = 0; i < c->len; i++) {
        if (c->buf[i] != '\n')
            continue;
        emit_line(job, o, c->buf + start, i - start);
        start = i + 1;
    }
    if (start > 0) {
        memmove(c->buf, c->buf + start, c->len - start);
        c->len -= start;
    }
    if (c->len > 0 && (eof || c->len == HOOKS_LINE_MAX)) {
        emit_line(job, o, c->buf, c->len);
        c->len = 0;
    }
}

/* Reads what the pipe holds now (until it would block, or only once unless drain is set). */
static void read_output(const struct hooks_job *job, const struct hooks_exec_opts *o,
                        struct child *c, bool drain)
{
    while (c->out_fd >= 0) {
        ssize_t k = read(c->out_fd, c->buf + c->len, HOOKS_LINE_MAX - c->len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN) {
            if (drain)
                flush_lines(job, o, c, true);
            return;
        }
        if (k <= 0) {
            flush_lines(job, o, c, true);
            close(c->out_fd);
            c->out_fd = -1;
            return;
        }
        c->len += (size_t)k;
        flush_lines(job, o, c, false);
        if (!drain)
            return;
    }
}

static void child_reaped(struct child *c, struct hooks_outcome *out, int status)
{
    out->exited = true;
    out->status = status;
    out->seconds = (double)(clock_now_usec() - c->started_us) / 1e6;
    c->pid = 0;
    if (c->pidfd >= 0) {
        close(c->pidfd);
        c->pidfd = -1;
    }
}

static size_t reap_exited(struct child *ch, size_t n, struct hooks_outcome *ret)
{
    size_t alive = 0;
    for (size_t i = 0; i < n; i++) {
        if (ch[i].pid <= 0)
            continue;
        int status;
        pid_t p = waitpid(ch[i].pid, &status, WNOHANG);
        if (p == ch[i].pid)
            child_reaped(&ch[i], &ret[i], status);
        else if (p < 0 && errno == ECHILD) /* someone else reaped it; nothing more to learn */
            child_reaped(&ch[i], &ret[i], 0);
        else
            alive++;
    }
    return alive;
}

/* The deadline came: kill (or leave) what still runs. Killed children are reaped for a bounded
 * time so that their statuses are known and no zombies stay behind. */
static void stop_remaining(struct child *ch, size_t n, const struct hooks_exec_opts *o,
                           struct hooks_outcome *ret)
{
    uint64_t now = clock_now_usec();
    for (size_t i = 0; i < n; i++) {
        if (ch[i].pid <= 0)
            continue;
        ret[i].seconds = (double)(now - ch[i].started_us) / 1e6;
        if (!o->kill_at_deadline) {
            ret[i].running = true;
            ch[i].pid = 0;
            continue;
        }
        ret[i].killed = true;
        if (killpg(ch[i].pid, SIGKILL) < 0)
            kill(ch[i].pid, SIGKILL);
    }
    uint64_t until = now + REAP_AFTER_KILL_US;
    while (reap_exited(ch, n, ret) > 0 && clock_now_usec() < until)
        usleep(5000);
    for (size_t i = 0; i < n; i++)
        if (ch[i].pid > 0) {
            ret[i].exited = false;
            ch[i].pid = 0;
        }
}

static int poll_timeout_ms(const struct child *ch, size_t n, const struct hooks_exec_opts *o,
                           uint64_t now)
{
    int timeout = -1;
    if (o->deadline_us > 0) {
        uint64_t left = o->deadline_us > now ? o->deadline_us - now : 0;
        timeout = (int)((left + 999) / 1000 > INT32_MAX ? INT32_MAX : (left + 999) / 1000);
    }
    bool tick = o->cancel != NULL;
    for (size_t i = 0; i < n; i++)
        if (ch[i].pid > 0 && ch[i].pidfd < 0)
            tick = true;
    if (tick && (timeout < 0 || timeout > TICK_MS))
        timeout = TICK_MS;
    return timeout;
}

static int supervise(const struct hooks_job *jobs, struct child *ch, size_t n,
                     const struct hooks_exec_opts *o, struct hooks_outcome *ret, struct errmsg *e)
{
    _cleanup_free_ struct pollfd *pfd = calloc(2 * n, sizeof(*pfd));
    _cleanup_free_ size_t *owner = calloc(2 * n, sizeof(*owner));
    if (!pfd || !owner) {
        stop_remaining(ch, n, o, ret);
        return errmsg_set(e, -ENOMEM, "out of memory supervising %zu children", n);
    }
    for (;;) {
        if (reap_exited(ch, n, ret) == 0)
            break;
        uint64_t now = clock_now_usec();
        if ((o->cancel && atomic_load(o->cancel)) ||
            (o->deadline_us > 0 && now >= o->deadline_us)) {
            stop_remaining(ch, n, o, ret);
            break;
        }
        nfds_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (ch[i].out_fd >= 0) {
                owner[k] = i;
                pfd[k++] = (struct pollfd){.fd = ch[i].out_fd, .events = POLLIN};
            }
            if (ch[i].pidfd >= 0) {
                owner[k] = i;
                pfd[k++] = (struct pollfd){.fd = ch[i].pidfd, .events = POLLIN};
            }
        }
        if (poll(pfd, k, poll_timeout_ms(ch, n, o, now)) < 0) {
            if (errno == EINTR)
                continue;
            int r = negative_errno();
            stop_remaining(ch, n, o, ret);
            return errmsg_set(e, r, "poll on hook output: %s", strerror(-r));
        }
        for (nfds_t j = 0; j < k; j++)
            if (pfd[j].revents && pfd[j].fd == ch[owner[j]].out_fd)
                read_output(&jobs[owner[j]], o, &ch[owner[j]], false);
    }
    /* What the children wrote before they ended is still in the pipes; a grandchild that keeps a
     * pipe open (a daemonised helper) must not keep us waiting, so read only what is there. */
    for (size_t i = 0; i < n; i++)
        read_output(&jobs[i], o, &ch[i], true);
    return 0;
}

int hooks_exec(const struct hooks_job *jobs, size_t n, const struct hooks_exec_opts *o,
               struct hooks_outcome *ret, struct errmsg *e)
{
    if (n == 0)
        return 0;
    _cleanup_free_ struct child *ch = calloc(n, sizeof(*ch));
    if (!ch)
        return errmsg_set(e, -ENOMEM, "out of memory starting %zu children", n);
    memset(ret, 0, n * sizeof(*ret));
    for (size_t i = 0; i < n; i++) {
        ch[i].out_fd = ch[i].pidfd = -1;
        ret[i].spawn_error = spawn_child(&jobs[i], o, &ch[i]);
        ret[i].pid = ch[i].pid;
    }
    int r = supervise(jobs, ch, n, o, ret, e);
    for (size_t i = 0; i < n; i++) {
        if (ch[i].out_fd >= 0)
            close(ch[i].out_fd);
        if (ch[i].pidfd >= 0)
            close(ch[i].pidfd);
    }
    return r;
}

bool hooks_name_ignored(const char *name)
{
    size_t len = strlen(name);
    if (len == 0 || name[0] == '.' || name[len - 1] == '~')
        return true;
    /* Leftovers of package upgrades: an old copy of a hook must not run next to the new one. */
    static const char *const infixes[] = {".dpkg-", ".rpmnew", ".rpmsave", ".rpmorig", ".ucf-"};
    for (size_t i = 0; i < ELEMENTSOF(infixes); i++)
        if (strstr(name, infixes[i]))
            return true;
    return false;
}

void hooks_names_free(char **names, size_t n)
{
    if (!names)
        return;
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool is_hook(int dfd, const char *name)
{
    struct stat st;
    if (hooks_name_ignored(name) || fstatat(dfd, name, &st, 0) < 0 || !S_ISREG(st.st_mode))
        return false;
    return faccessat(dfd, name, X_OK, AT_EACCESS) == 0;
}

int hooks_list(const char *dir, char ***ret_names, size_t *ret_n, struct errmsg *e)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) {
            *ret_names = NULL;
            *ret_n = 0;
            return 0;
        }
        int r = negative_errno();
        return errmsg_set(e, r, "hooks directory '%s': %s", dir, strerror(-r));
    }
    DIR *d = fdopendir(fd);
    if (!d) {
        int r = negative_errno();
        close(fd);
        return errmsg_set(e, r, "hooks directory '%s': %s", dir, strerror(-r));
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!is_hook(dirfd(d), de->d_name))
            continue;
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            char **nn = realloc(names, ncap * sizeof(*nn));
            if (!nn) {
                r = -ENOMEM;
                break;
            }
            names = nn;
            cap = ncap;
        }
        if (!(names[n] = strdup(de->d_name))) {
            r = -ENOMEM;
            break;
        }
        n++;
    }
    closedir(d);
    if (r < 0) {
        hooks_names_free(names, n);
        return errmsg_set(e, r, "hooks directory '%s': out of memory", dir);
    }
    if (n > 1)
        qsort(names, n, sizeof(*names), compare_names);
    *ret_names = names;
    *ret_n = n;
    return 0;
}

/* The daemon's environment without any COOLD_* variables, plus the four that describe the event.
 * Built before any child starts, because nothing may allocate between fork and exec. */
static char **build_env(const struct hooks_event *ev, char vars[4][96])
{
    size_t n = 0;
    for (char **p = environ; p && *p; p++)
        n++;
    char **env = calloc(n + 5, sizeof(*env));
    if (!env)
        return NULL;
    size_t k = 0;
    for (char **p = environ; p && *p; p++)
        if (strncmp(*p, "COOLD_", 6) != 0)
            env[k++] = *p;
    uint64_t now = clock_now_usec();
    uint64_t left_s = ev->power_cut_us > now ? (ev->power_cut_us - now) / 1000000u : 0;
    snprintf(vars[0], sizeof(vars[0]), "COOLD_EVENT=%s", ev->event);
    snprintf(vars[1], sizeof(vars[1]), "COOLD_REASON=%s", ev->reason ? ev->reason : "unknown");
    snprintf(vars[2], sizeof(vars[2]), "COOLD_DEADLINE_SECONDS=%" PRIu64, left_s);
    snprintf(vars[3], sizeof(vars[3]), "COOLD_DRILL=%d", ev->drill ? 1 : 0);
    for (size_t i = 0; i < 4; i++)
        env[k++] = vars[i];
    env[k] = NULL;
    return env;
}

static void describe_outcome(const struct hooks_outcome *out, char *buf, size_t size)
{
    if (out->spawn_error < 0)
        snprintf(buf, size, "not started: %s", strerror(-out->spawn_error));
    else if (out->killed)
        snprintf(buf, size, "killed at budget after %.1fs", out->seconds);
    else if (out->exited && WIFEXITED(out->status))
        snprintf(buf, size, "exit %d", WEXITSTATUS(out->status));
    else if (out->exited && WIFSIGNALED(out->status))
        snprintf(buf, size, "signal %d", WTERMSIG(out->status));
    else
        snprintf(buf, size, "still running");
}

static void summarise(char **names, size_t n, const struct hooks_outcome *outs,
                      struct hooks_summary *sum)
{
    char bad[192] = "";
    size_t used = 0;
    for (size_t i = 0; i < n; i++) {
        const struct hooks_outcome *o = &outs[i];
        if (o->exited && WIFEXITED(o->status) && WEXITSTATUS(o->status) == 0) {
            sum->ok++;
            continue;
        }
        if (o->killed)
            sum->killed++;
        else
            sum->failed++;
        char what[64];
        describe_outcome(o, what, sizeof(what));
        int k =
            snprintf(bad + used, sizeof(bad) - used, "%s%s: %s", used ? "; " : "", names[i], what);
        if (k < 0 || (size_t)k >= sizeof(bad) - used)
            break;
        used += (size_t)k;
    }
    sum->total = (unsigned)n;
    snprintf(sum->detail, sizeof(sum->detail), "%u hook%s: %u ok, %u failed, %u killed%s%s%s",
             sum->total, n == 1 ? "" : "s", sum->ok, sum->failed, sum->killed, used ? " (" : "",
             bad, used ? ")" : "");
}

int hooks_run(const char *dir, const struct hooks_event *ev, const struct hooks_exec_opts *o,
              struct hooks_summary *ret, struct errmsg *e)
{
    char **names = NULL;
    size_t n = 0;
    int r = hooks_list(dir, &names, &n, e);
    if (r < 0)
        return r;
    memset(ret, 0, sizeof(*ret));
    if (n == 0) {
        snprintf(ret->detail, sizeof(ret->detail), "no hooks in %s", dir);
        return 0;
    }
    char vars[4][96];
    _cleanup_free_ char **env = build_env(ev, vars);
    _cleanup_free_ struct hooks_job *jobs = calloc(n, sizeof(*jobs));
    _cleanup_free_ struct hooks_outcome *outs = calloc(n, sizeof(*outs));
    /* argv for job i: {path, event, NULL} at argvs[3 * i]. */
    _cleanup_free_ char **argvs = calloc(3 * n, sizeof(*argvs));
    if (!env || !jobs || !outs || !argvs) {
        hooks_names_free(names, n);
        return errmsg_set(e, -ENOMEM, "out of memory running hooks");
    }
    for (size_t i = 0; i < n && r >= 0; i++) {
        if (asprintf(&argvs[3 * i], "%s/%s", dir, names[i]) < 0) {
            argvs[3 * i] = NULL;
            r = errmsg_set(e, -ENOMEM, "out of memory running hooks");
            break;
        }
        argvs[3 * i + 1] = (char *)ev->event;
        jobs[i] = (struct hooks_job){.name = names[i], .path = argvs[3 * i], .argv = &argvs[3 * i]};
    }
    if (r >= 0) {
        struct hooks_exec_opts opts = *o;
        opts.envp = env;
        opts.inherit_output = false;
        r = hooks_exec(jobs, n, &opts, outs, e);
        summarise(names, n, outs, ret);
    }
    for (size_t i = 0; i < n; i++)
        free(argvs[3 * i]);
    hooks_names_free(names, n);
    return r;
}
