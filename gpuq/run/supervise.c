#include "gpuq/run/supervise.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "gpuq/run/run-control.h"
#include "gpuq/run/run-env.h"
#include "gpuq/run/run-exit.h"
#include "gpuq/run/run-file.h"
#include "lib/cgroup.h"
#include "lib/clock.h"
#include "lib/fileio.h"
#include "lib/macro.h"
#include "lib/names.h"
#include "lib/strv.h"

extern char **environ;

#define NOTE_MAX 2048
/* How long the job's leftovers get to die after SIGKILL: a process that tears down a CUDA
 * context takes seconds; one stuck in the kernel (a hung NFS server) may never go. */
#define LEFTOVER_TIMEOUT_MS 30000
/* How long a leftover scope's processes get before the run is refused. */
#define LEFTOVER_SCOPE_TIMEOUT_MS 10000

struct sup {
    const struct run_spec *s;
    int log_fd;
    char *scope;          /* the scope's directory, or NULL */
    char procs[PATH_MAX]; /* its cgroup.procs, for the child to enter */
    char **env, **argv;
    gid_t *groups;
    int n_groups;
    pid_t child;
    char note[NOTE_MAX];
    struct run_exit x;
};

/* Where a child that failed before its command says how, through a pipe closed by its exec. */
enum child_stage {
    STAGE_CGROUP = 1,
    STAGE_FDS,
    STAGE_CREDS,
    STAGE_CHDIR,
    STAGE_EXEC,
};

struct child_failure {
    int stage;
    int err;
};

/* Adds to the exit record's note and, when the log is open, a line of the log: the user reads
 * the log, gpuqd the record. */
static void note_add(struct sup *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_add(struct sup *p, const char *fmt, ...)
{
    char text[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    size_t used = strlen(p->note);
    snprintf(p->note + used, sizeof(p->note) - used, "%s%s", used ? "; " : "", text);
    if (p->log_fd >= 0)
        (void)!dprintf(p->log_fd, "gpuq-run: %s\n", text);
}

int supervise_detach(struct errmsg *e)
{
    /* A descriptor opened later must not become the job's stdin, stdout or stderr by chance. */
    int fd;
    while ((fd = open("/dev/null", O_RDWR)) >= 0 && fd <= STDERR_FILENO)
        ;
    if (fd > STDERR_FILENO)
        close(fd);
    /* EPERM: already a process group leader (started by hand from a shell); then it stays in
     * that session, which only matters to that shell. */
    if (setsid() < 0 && errno != EPERM)
        return errmsg_set(e, negative_errno(), "setsid: %m");
    static const int ignored[] = {SIGHUP,  SIGINT,  SIGQUIT, SIGPIPE, SIGALRM,   SIGTERM,
                                  SIGUSR1, SIGUSR2, SIGPOLL, SIGPROF, SIGVTALRM, SIGXCPU,
                                  SIGXFSZ, SIGPWR,  SIGTSTP, SIGTTIN, SIGTTOU};
    for (size_t i = 0; i < ELEMENTSOF(ignored); i++)
        if (signal(ignored[i], SIG_IGN) == SIG_ERR)
            return errmsg_set(e, negative_errno(), "signal %d: %m", ignored[i]);
    sigset_t none;
    sigemptyset(&none);
    if (signal(SIGCHLD, SIG_DFL) == SIG_ERR || sigprocmask(SIG_SETMASK, &none, NULL) < 0)
        return errmsg_set(e, negative_errno(), "signals: %m");
    /* What the job leaves behind when its parent ends comes to us, to be killed and reaped. */
    if (prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0)
        return errmsg_set(e, negative_errno(), "PR_SET_CHILD_SUBREAPER: %m");
    if (chdir("/") < 0)
        return errmsg_set(e, negative_errno(), "chdir /: %m");
    umask(077);
    return 0;
}

static int open_log(struct sup *p, struct errmsg *e)
{
    const struct run_spec *s = p->s;
    /* O_NONBLOCK: a FIFO put there must not block the open; refused below anyway. */
    _cleanup_close_ int fd =
        open(s->log_path,
             O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC, 0600);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return errmsg_set(e, negative_errno(), "cannot open the log %s: %m", s->log_path);
    if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
        return errmsg_set(e, -EPERM, "the log %s is not a regular file with one name", s->log_path);
    if (fchown(fd, s->uid, s->gid) < 0 || fchmod(fd, 0600) < 0 ||
        fcntl(fd, F_SETFL, O_WRONLY | O_APPEND) < 0)
        return errmsg_set(e, negative_errno(), "cannot hand the log %s to uid %lu: %m", s->log_path,
                          (unsigned long)s->uid);
    p->log_fd = TAKE_FD(fd);
    return 0;
}

/* Writes one limit, or says in the note why it is not enforced. */
static void write_limit(struct sup *p, const char *controller, const char *file, const char *value)
{
    int r = cgroup_has_controller(p->scope, controller);
    if (r == 0)
        note_add(p,
                 "limits not enforced: the %s controller is not enabled for %s (it needs +%s in "
                 "cgroup.subtree_control of %s)",
                 controller, p->scope, controller, p->s->cgroup_parent);
    else if (r < 0 || (r = cgroup_attr_write(p->scope, file, value)) < 0)
        note_add(p, "limits not enforced: %s/%s: %s", p->scope, file, strerror(-r));
}

static void set_limits(struct sup *p)
{
    const struct run_spec *s = p->s;
    char value[64];
    if (s->cpu_milli) {
        /* A period of 100 ms; the kernel's smallest quota is 1 ms. */
        uint64_t quota = (uint64_t)s->cpu_milli * 100;
        snprintf(value, sizeof(value), "%" PRIu64 " 100000", quota < 1000 ? 1000 : quota);
        write_limit(p, "cpu", "cpu.max", value);
    }
    if (s->mem_bytes) {
        snprintf(value, sizeof(value), "%" PRIu64, s->mem_bytes);
        write_limit(p, "memory", "memory.max", value);
        /* Best effort: without swap accounting there is no memory.swap.max, and nothing to
         * limit. */
        (void)cgroup_attr_write(p->scope, "memory.swap.max", "0");
        (void)cgroup_attr_write(p->scope, "memory.oom.group", "1");
    }
}

/* Kills what a run whose supervisor was killed left in the scope, and makes the scope afresh
 * (no sub-cgroups, no counters of that run). */
static int clear_leftover_scope(struct sup *p, const char *name, struct errmsg *e)
{
    int r = cgroup_signal(p->scope, SIGKILL);
    if (r == 0) {
        note_add(p, "killed the processes an earlier run left in %s", p->scope);
        r = cgroup_wait_empty(p->scope, LEFTOVER_SCOPE_TIMEOUT_MS);
    }
    if (r < 0 && r != -ESRCH)
        return errmsg_set(e, r, "scope %s: an earlier run's processes are still there: %s",
                          p->scope, strerror(-r));
    r = cgroup_remove_tree(p->scope);
    if (r < 0)
        return errmsg_set(e, r, "cannot remove the leftover scope %s: %s", p->scope, strerror(-r));
    free(p->scope);
    p->scope = NULL;
    r = cgroup_make(p->s->cgroup_parent, name, &p->scope, e);
    return r < 0 ? r : 0;
}

static int make_scope(struct sup *p, struct errmsg *e)
{
    const struct run_spec *s = p->s;
    if (!s->cgroup_parent)
        return 0;
    char name[64];
    snprintf(name, sizeof(name), NAMES_SCOPE_GPUQ_JOB "%" PRIu64 NAMES_SCOPE_SUFFIX, s->job_id);
    int r = cgroup_make(s->cgroup_parent, name, &p->scope, e);
    if (r == 0)
        r = clear_leftover_scope(p, name, e);
    if (r < 0)
        return r;
    if (snprintf(p->procs, sizeof(p->procs), "%s/cgroup.procs", p->scope) >= (int)sizeof(p->procs))
        return errmsg_set(e, -ENAMETOOLONG, "scope %s: path too long", p->scope);
    set_limits(p);
    return 0;
}

/* The environment, command line and supplementary groups, made before the fork: the child only
 * makes system calls. */
static int prepare(struct sup *p, struct errmsg *e)
{
    const struct run_spec *s = p->s;
    if (run_env_build(s, &p->env) < 0 || run_env_argv(s, p->env, &p->argv) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int n = 32;
    for (;;) {
        gid_t *g = realloc(p->groups, (size_t)n * sizeof(gid_t));
        if (!g)
            return errmsg_set(e, -ENOMEM, "out of memory");
        p->groups = g;
        int want = n;
        if (getgrouplist(s->user, s->gid, p->groups, &want) >= 0) {
            p->n_groups = want;
            return 0;
        }
        if (want <= n || want > 65536)
            return errmsg_set(e, -EINVAL, "cannot list the groups of user '%s'", s->user);
        n = want;
    }
}

static int exit_code_for(const struct child_failure *f)
{
    if (f->stage != STAGE_CHDIR && f->stage != STAGE_EXEC)
        return RUN_EXIT_SETUP;
    return f->err == ENOENT || f->err == ENOTDIR ? RUN_EXIT_NOT_FOUND : RUN_EXIT_CANNOT_EXEC;
}

static _Noreturn void child_fail(int report_fd, int stage, int err)
{
    struct child_failure f = {stage, err};
    (void)!write(report_fd, &f, sizeof(f));
    _exit(exit_code_for(&f));
}

/* Drops root for the job's user and checks that it is gone: with uid 0 left anywhere, a job
 * could take it back. */
static int become_user(const struct sup *p)
{
    uid_t ru, eu, su;
    gid_t rg, eg, sg;
    uid_t uid = p->s->uid;
    gid_t gid = p->s->gid;
    if (setgroups((size_t)p->n_groups, p->groups) < 0 || setresgid(gid, gid, gid) < 0 ||
        setresuid(uid, uid, uid) < 0)
        return errno;
    if (getresuid(&ru, &eu, &su) < 0 || getresgid(&rg, &eg, &sg) < 0)
        return errno;
    if (ru != uid || eu != uid || su != uid || rg != gid || eg != gid || sg != gid)
        return EPERM;
    if (uid != 0 && setresuid(0, 0, 0) == 0)
        return EPERM;
    return 0;
}

/* The job's process between fork and exec. Only system calls: everything it needs was made
 * before the fork. */
static _Noreturn void child_main(const struct sup *p, int null_fd, int report_fd)
{
    sigset_t none;
    sigemptyset(&none);
    (void)sigprocmask(SIG_SETMASK, &none, NULL);
    /* The supervisor's ignored signals would stay ignored across exec. */
    for (int sig = 1; sig < NSIG; sig++)
        (void)signal(sig, SIG_DFL);
    if (p->scope && cgroup_enter(p->procs) < 0)
        child_fail(report_fd, STAGE_CGROUP, errno);
    (void)setpgid(0, 0);
    if (dup2(null_fd, STDIN_FILENO) < 0 || dup2(p->log_fd, STDOUT_FILENO) < 0 ||
        dup2(p->log_fd, STDERR_FILENO) < 0)
        child_fail(report_fd, STAGE_FDS, errno);
    int err = become_user(p);
    if (err)
        child_fail(report_fd, STAGE_CREDS, err);
    umask((mode_t)p->s->umask);
    if (chdir(run_env_cwd(p->s)) < 0)
        child_fail(report_fd, STAGE_CHDIR, errno);
    /* execvp searches the PATH of environ: the job's, as the user. */
    environ = p->env;
    execvp(p->argv[0], p->argv);
    child_fail(report_fd, STAGE_EXEC, errno);
}

static void note_child_failure(struct sup *p, const struct child_failure *f)
{
    const struct run_spec *s = p->s;
    const char *why = strerror(f->err);
    switch (f->stage) {
    case STAGE_CGROUP:
        note_add(p, "not started: cannot enter the scope %s: %s", p->scope, why);
        break;
    case STAGE_FDS:
        note_add(p, "not started: cannot set up stdin, stdout and stderr: %s", why);
        break;
    case STAGE_CREDS:
        note_add(p, "not started: cannot become uid %lu gid %lu ('%s'): %s", (unsigned long)s->uid,
                 (unsigned long)s->gid, s->user, why);
        break;
    case STAGE_CHDIR:
        note_add(p, "not started: cannot enter the working directory '%s' as uid %lu: %s",
                 run_env_cwd(s), (unsigned long)s->uid, why);
        break;
    default:
        note_add(p, "not started: cannot execute '%s': %s", p->argv[0], why);
        break;
    }
}

static void write_pid_file(struct sup *p)
{
    char text[32];
    struct errmsg e = {{0}};
    int n = snprintf(text, sizeof(text), "%ld\n", (long)p->child);
    if (run_file_write_atomic(p->s->pid_path, text, (size_t)n, 0600, &e) < 0)
        note_add(p, "%s", e.text);
}

static int start_child(struct sup *p, struct errmsg *e)
{
    int pipe_fds[2];
    if (pipe2(pipe_fds, O_CLOEXEC) < 0)
        return errmsg_set(e, negative_errno(), "pipe: %m");
    _cleanup_close_ int report_r = pipe_fds[0], report_w = pipe_fds[1];
    _cleanup_close_ int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (null_fd < 0)
        return errmsg_set(e, negative_errno(), "/dev/null: %m");
    p->x.start = clock_wall_sec();
    pid_t pid = fork();
    if (pid < 0)
        return errmsg_set(e, negative_errno(), "fork: %m");
    if (pid == 0)
        child_main(p, null_fd, report_w);
    p->child = pid;
    closep(&report_w);
    /* Also here, so that the group exists before the pid file names it. */
    (void)setpgid(pid, pid);
    write_pid_file(p);
    struct child_failure f;
    size_t n = 0;
    int r = fd_read_up_to(report_r, &f, sizeof(f), &n);
    p->x.started = r == 0 && n == 0;
    if (n == sizeof(f))
        note_child_failure(p, &f);
    return 0;
}

/* Waits for the job's main process to end, reaping what else of the job ends meanwhile, and
 * leaves it a zombie: its pid, and so its process group, cannot be taken by another process
 * until the group has been killed. */
static int wait_main(struct sup *p)
{
    for (;;) {
        siginfo_t si = {0};
        if (waitid(P_ALL, 0, &si, WEXITED | WNOWAIT) < 0) {
            if (errno == EINTR)
                continue;
            return negative_errno();
        }
        if (si.si_pid == p->child)
            return 0;
        (void)waitpid(si.si_pid, NULL, 0);
    }
}

/* SIGKILL to each of our children (the adopted ones too); how many there were. */
static unsigned kill_children(void)
{
    DIR *d = opendir("/proc");
    unsigned n = 0;
    struct dirent *de;
    pid_t self = getpid();
    while (d && (de = readdir(d))) {
        char *end;
        long pid = strtol(de->d_name, &end, 10);
        struct run_pid_stat st;
        if (*end || pid <= 0 || run_pid_stat((pid_t)pid, &st) < 0 || st.ppid != self)
            continue;
        (void)kill((pid_t)pid, SIGKILL);
        n++;
    }
    if (d)
        closedir(d);
    return n;
}

/* Kills and reaps every child left until there is none, or the deadline. */
static int reap_leftovers(uint64_t deadline_ms)
{
    for (;;) {
        (void)kill_children();
        pid_t r;
        while ((r = waitpid(-1, NULL, WNOHANG)) > 0)
            ;
        if (r < 0 && errno == ECHILD)
            return 0;
        if (clock_now_msec() >= deadline_ms)
            return -ETIMEDOUT;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

static void note_oom_kills(struct sup *p)
{
    _cleanup_free_ char *text = NULL;
    if (cgroup_attr_read(p->scope, "memory.events", &text) < 0)
        return;
    const char *line = strstr(text, "oom_kill ");
    if (line && (line == text || line[-1] == '\n'))
        p->x.oom_kills = strtoull(line + 9, NULL, 10);
    if (p->x.oom_kills)
        note_add(p,
                 "the job reached its memory limit: the OOM killer ended %" PRIu64
                 " of its processes",
                 p->x.oom_kills);
}

/* The main process has ended (a zombie still): the rest of the job goes, then the scope. */
static void end_job(struct sup *p)
{
    uint64_t deadline = clock_now_msec() + LEFTOVER_TIMEOUT_MS;
    if (p->scope)
        (void)cgroup_signal(p->scope, SIGKILL);
    (void)killpg(p->child, SIGKILL);
    int status = 0;
    while (waitpid(p->child, &status, 0) < 0 && errno == EINTR)
        ;
    p->x.end = clock_wall_sec();
    run_exit_set_status(&p->x, status);
    int r = reap_leftovers(deadline);
    if (r < 0)
        note_add(p, "processes of the job did not die within %u s of SIGKILL",
                 LEFTOVER_TIMEOUT_MS / 1000);
    if (!p->scope)
        return;
    uint64_t now = clock_now_msec();
    r = cgroup_wait_empty(p->scope, now < deadline ? (unsigned)(deadline - now) : 0);
    note_oom_kills(p);
    if (r < 0)
        note_add(p, "processes of the job are still in %s: it stays", p->scope);
    else if ((r = cgroup_remove_tree(p->scope)) < 0)
        note_add(p, "cannot remove the scope %s: %s", p->scope, strerror(-r));
}

static int write_record(struct sup *p, struct errmsg *e)
{
    _cleanup_free_ char *text = NULL;
    p->x.note = p->note;
    int r = run_exit_to_json(&p->x, &text);
    p->x.note = NULL;
    if (r < 0)
        return errmsg_set(e, r, "out of memory");
    return run_file_write_atomic(p->s->exit_path, text, strlen(text), 0600, e);
}

static void sup_done(struct sup *p)
{
    closep(&p->log_fd);
    free(p->scope);
    strv_free(p->env);
    strv_free(p->argv);
    free(p->groups);
}

int supervise_run(const struct run_spec *s, struct errmsg *e)
{
    struct sup p = {.s = s, .log_fd = -1, .child = -1};
    struct errmsg why = {{0}};
    /* Records left at these paths would tell gpuqd that this run has ended, or name a process
     * group that is not this run's. */
    (void)unlink(s->exit_path);
    (void)unlink(s->pid_path);
    int r = open_log(&p, &why);
    if (r >= 0)
        r = make_scope(&p, &why);
    if (r >= 0)
        r = prepare(&p, &why);
    if (r >= 0)
        r = start_child(&p, &why);
    if (r >= 0) {
        r = wait_main(&p);
        if (r < 0)
            note_add(&p, "waiting for the job failed: %s", strerror(-r));
        end_job(&p);
    } else {
        note_add(&p, "not started: %s", why.text);
        p.x.start = p.x.end = clock_wall_sec();
        run_exit_set_status(&p.x, W_EXITCODE(RUN_EXIT_SETUP, 0));
        if (p.scope)
            (void)cgroup_remove_tree(p.scope);
    }
    r = write_record(&p, e);
    sup_done(&p);
    return r;
}
