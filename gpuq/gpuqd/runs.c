/* A job's runs: starting one through gpuq-run as the job's user, stopping it with its
 * checkpoint signal and grace, and recording how it ended (requeue after a preemption, retry
 * with backoff after a failure, or a final state). */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuq/gpuqd/gpuqd.h"
#include "gpuq/run/run-control.h"
#include "gpuq/run/run-spec.h"
#include "lib/fileio.h"
#include "lib/log.h"
#include "lib/clock.h"
#include "lib/macro.h"
#include "lib/names.h"
#include "lib/strv.h"

static int job_path(const struct gpuqd *d, uint64_t id, const char *leaf, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s/jobs/%llu%s%s", d->cfg.state_dir, (unsigned long long)id,
                     leaf ? "/" : "", leaf ? leaf : "");
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

int runs_log_path(const struct gpuqd *d, uint64_t id, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s/logs/%llu.log", d->cfg.state_dir, (unsigned long long)id);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

static int pidfd_of(pid_t pid)
{
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    return fd < 0 ? negative_errno() : fd;
}

/* The environment gpuq-run gives the job on top of passwd's: the user's own, then the names
 * that make it this job (last, so that the user's own values of them do not count). */
static int job_env(const struct gpuqd *d, const struct job *j, const struct res_set *slots,
                   char ***ret)
{
    char uuids[RES_MAX_SLOTS * RES_UUID_MAX], id[32];
    _cleanup_strv_free_ char **env = strv_copy(j->spec.env);
    if (!env || !res_uuids(&d->node, slots, uuids, sizeof(uuids)))
        return -ENOMEM;
    snprintf(id, sizeof(id), "%llu", (unsigned long long)j->id);
    bool none = res_set_empty(slots);
    if (strv_env_set(&env, NAMES_ENV_GPUQ_JOB_ID, id) < 0 ||
        strv_env_set(&env, "CUDA_VISIBLE_DEVICES", uuids) < 0 ||
        strv_env_set(&env, "NVIDIA_VISIBLE_DEVICES", none ? "void" : uuids) < 0 ||
        strv_env_set(&env, "CUDA_DEVICE_ORDER", "PCI_BUS_ID") < 0)
        return -ENOMEM;
    *ret = TAKE_PTR(env);
    return 0;
}

/* Writes what gpuq-run needs into jobs/ID/run.json (root's, 0600). */
static int write_spec(struct gpuqd *d, const struct job *j, const struct res_set *slots,
                      const struct passwd *pw, char *spec_path, size_t size, struct errmsg *e)
{
    char dir[512], log[512], exit_path[512], pid_path[512];
    if (job_path(d, j->id, NULL, dir, sizeof(dir)) < 0 ||
        job_path(d, j->id, "run.json", spec_path, size) < 0 ||
        job_path(d, j->id, "exit.json", exit_path, sizeof(exit_path)) < 0 ||
        job_path(d, j->id, "pgid", pid_path, sizeof(pid_path)) < 0 ||
        runs_log_path(d, j->id, log, sizeof(log)) < 0)
        return errmsg_set(e, -ENAMETOOLONG, "state_dir is too long");
    if (mkdir(dir, 0700) < 0 && errno != EEXIST)
        return errmsg_set(e, negative_errno(), "cannot make %s: %m", dir);
    if (unlink(exit_path) < 0 && errno != ENOENT)
        return errmsg_set(e, negative_errno(), "cannot remove %s: %m", exit_path);
    _cleanup_strv_free_ char **env = NULL;
    if (job_env(d, j, slots, &env) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    struct run_spec rs = {
        .job_id = j->id,
        .run = j->runs + 1,
        .uid = j->uid,
        .gid = j->gid,
        .user = pw->pw_name,
        .home = pw->pw_dir,
        .shell = pw->pw_shell,
        .argv = j->spec.argv,
        .env = env,
        .cwd = j->spec.cwd,
        .image = j->spec.image,
        .capsule = (char *)d->capsule_program,
        .cgroup_parent = d->cgroup_parent,
        .cpu_milli = j->spec.res.cpu_milli,
        .mem_bytes = j->spec.res.mem_bytes,
        .log_path = log,
        .exit_path = exit_path,
        .pid_path = pid_path,
        .umask = j->spec.umask >= 0 ? (unsigned)j->spec.umask : RUN_UMASK_DEFAULT,
    };
    return run_spec_write(spec_path, &rs, e);
}

static void start_failed(struct gpuqd *d, struct qjob *q, const char *why);

int runs_start(struct gpuqd *d, struct qjob *q, const struct res_set *slots)
{
    struct job *j = &q->j;
    struct errmsg e = {{0}};
    char spec_path[512], buf[4096];
    struct passwd pw, *pwp = NULL;
    if (getpwuid_r(j->uid, &pw, buf, sizeof(buf), &pwp) != 0 || !pwp) {
        start_failed(d, q, "the job's user no longer exists");
        return 0;
    }
    pid_t pid = 0;
    uint64_t pid_start = 0;
    int r = write_spec(d, j, slots, &pw, spec_path, sizeof(spec_path), &e);
    if (r == 0)
        r = run_start(d->run_program, spec_path, &pid, &pid_start, &e);
    if (r < 0) {
        start_failed(d, q, e.text);
        return 0;
    }
    double now = clock_wall_sec();
    schedule_record_wait(d, q, now);
    q->pidfd = pidfd_of(pid);
    j->state = JOB_RUNNING;
    j->stop_reason = JOB_STOP_NONE;
    j->start_time = now;
    if (j->first_start_time <= 0)
        j->first_start_time = now;
    j->runs++;
    j->slots[0] = slots->w[0];
    j->slots[1] = slots->w[1];
    j->pid = pid;
    j->pid_start = pid_start;
    j->last_checkpoint = 0;
    j->requeue_time = 0;
    j->reason[0] = '\0';
    char uuids[RES_MAX_SLOTS * RES_UUID_MAX], event[sizeof(uuids) + 64];
    res_uuids(&d->node, slots, uuids, sizeof(uuids));
    snprintf(event, sizeof(event), "run %u started%s%s", j->runs, uuids[0] ? " on " : "", uuids);
    log_info("job %llu: %s", (unsigned long long)j->id, event);
    return jobs_save(d, q, event, &e);
}

/* How long after a failure the next run may start: Kubernetes' 10 s, 20 s, 40 s, ... capped. */
static double backoff_delay(const struct gpuqd *d, unsigned failures)
{
    double t = d->cfg.sched.backoff_base_s * exp2((double)(failures ? failures - 1 : 0));
    return t > d->cfg.sched.backoff_max_s ? d->cfg.sched.backoff_max_s : t;
}

/* A failed run: retried after its backoff while backoff_limit allows, else the job failed. */
static void run_failed(struct gpuqd *d, struct qjob *q, double now, const char *why)
{
    struct job *j = &q->j;
    j->failures++;
    if (j->failures <= j->spec.backoff_limit) {
        j->state = JOB_PENDING;
        j->eligible_time = now + backoff_delay(d, j->failures);
        snprintf(j->reason, sizeof(j->reason), "BackOff");
        d->stats.retries[q->queue]++;
    } else {
        j->state = JOB_FAILED;
        j->end_time = now;
        snprintf(j->reason, sizeof(j->reason), "%s",
                 j->spec.backoff_limit ? "BackoffLimitExceeded" : why);
    }
}

static void start_failed(struct gpuqd *d, struct qjob *q, const char *why)
{
    struct errmsg e = {{0}};
    char event[ERRMSG_MAX + 32];
    snprintf(event, sizeof(event), "could not start: %s", why);
    log_warning("job %llu: %s", (unsigned long long)q->j.id, event);
    q->j.runs++;
    run_failed(d, q, clock_wall_sec(), "LaunchFailed");
    if (jobs_save(d, q, event, &e) < 0)
        log_error("job %llu: %s", (unsigned long long)q->j.id, e.text);
}

static int scope_of(const struct gpuqd *d, uint64_t id, char *buf, size_t size)
{
    if (!d->cgroup_parent)
        return -ENOENT;
    return run_scope_path(d->cgroup_parent, id, buf, size);
}

static pid_t pgid_of(const struct gpuqd *d, uint64_t id)
{
    char path[512];
    pid_t pgid = 0;
    if (job_path(d, id, "pgid", path, sizeof(path)) < 0 || run_pgid_read(path, &pgid, NULL) < 0)
        return 0;
    return pgid;
}

/* Every process of the job gets sig (the scope's, else the job's process group). */
static int signal_job(const struct gpuqd *d, const struct job *j, int sig)
{
    char scope[512];
    bool has_scope = scope_of(d, j->id, scope, sizeof(scope)) == 0;
    return run_signal(has_scope ? scope : NULL, pgid_of(d, j->id), sig);
}

/* A job already stopping: a cancel wins over a preemption (the job must not come back) and
 * ends it now (as a second scancel does); a tighter cap (a drain's) brings its deadline in. */
static int stop_again(struct gpuqd *d, struct qjob *q, enum job_stop_reason why, double grace_max)
{
    struct job *j = &q->j;
    struct errmsg e = {{0}};
    double now = clock_wall_sec();
    const char *event = NULL;
    if (why == JOB_STOP_CANCEL) {
        j->stop_reason = why;
        j->stop_deadline = now;
        snprintf(j->reason, sizeof(j->reason), "Cancelled");
        event = "cancelled while stopping: SIGKILL sent";
    } else if (grace_max > 0 && j->stop_deadline > now + grace_max) {
        j->stop_deadline = now + grace_max;
        event = "grace cut short by a drain";
    }
    if (j->stop_deadline <= now)
        signal_job(d, j, SIGKILL);
    return jobs_save(d, q, event, &e);
}

int runs_stop(struct gpuqd *d, struct qjob *q, enum job_stop_reason why, double grace_max)
{
    struct job *j = &q->j;
    struct errmsg e = {{0}};
    double now = clock_wall_sec();
    if (j->state == JOB_STOPPING)
        return stop_again(d, q, why, grace_max);
    /* The job's own grace, within the node's max_grace (a job stored before the config
     * lowered it) and the caller's cap. */
    double grace = j->spec.grace_s;
    if (grace > d->cfg.sched.max_grace_s)
        grace = d->cfg.sched.max_grace_s;
    if (grace_max > 0 && grace > grace_max)
        grace = grace_max;
    int sig = why == JOB_STOP_CANCEL ? SIGTERM : j->spec.checkpoint_signal;
    j->state = JOB_STOPPING;
    j->stop_reason = why;
    j->stop_deadline = now + grace;
    if (why == JOB_STOP_CANCEL)
        snprintf(j->reason, sizeof(j->reason), "Cancelled");
    signal_job(d, j, SIGCONT);
    int r = signal_job(d, j, grace > 0 ? sig : SIGKILL);
    char event[128];
    snprintf(event, sizeof(event), "%s: SIG%s sent, SIGKILL after %.0fs", job_stop_reason_name(why),
             sigabbrev_np(grace > 0 ? sig : SIGKILL), grace);
    if (r < 0)
        log_warning("job %llu: signalling: %s", (unsigned long long)j->id, strerror(-r));
    log_info("job %llu: %s", (unsigned long long)j->id, event);
    return jobs_save(d, q, event, &e);
}

/* The end of a run whose job was stopping: requeued after a preemption or drain. */
static bool end_stopped(struct gpuqd *d, struct qjob *q, double now)
{
    struct job *j = &q->j;
    switch (j->stop_reason) {
    case JOB_STOP_PREEMPT:
    case JOB_STOP_DRAIN:
        j->state = JOB_PENDING;
        j->requeue_time = now;
        j->preemptions++;
        d->stats.preemptions[q->queue]++;
        snprintf(j->reason, sizeof(j->reason), "%s",
                 j->stop_reason == JOB_STOP_DRAIN ? "Drained" : "Preempted");
        return true;
    case JOB_STOP_CANCEL:
        j->state = JOB_CANCELLED;
        return true;
    case JOB_STOP_TIMEOUT:
        j->state = JOB_TIMEOUT;
        return true;
    case JOB_STOP_NONE:
        break;
    }
    return false;
}

int runs_reap(struct gpuqd *d, struct qjob *q)
{
    struct job *j = &q->j;
    struct errmsg e = {{0}};
    char path[512];
    /* The run's last stretch counts in its user's fair share too. */
    schedule_account(d, clock_wall_sec());
    /* gpuq-run is our child unless gpuqd restarted since it started. */
    if (j->pid > 0)
        while (waitpid(j->pid, NULL, WNOHANG) < 0 && errno == EINTR)
            ;
    if (q->pidfd >= 0)
        close(q->pidfd);
    q->pidfd = -1;
    struct run_exit x = {.status = -1};
    const char *note = "the run ended without a record (its supervisor was killed)";
    if (job_path(d, j->id, "exit.json", path, sizeof(path)) == 0 &&
        run_exit_read(path, &x, &e) == 0)
        note = NULL;
    else
        signal_job(d, j, SIGKILL); /* what may be left of it must not hold the GPUs */
    double now = clock_wall_sec();
    j->exit_status = x.status;
    j->pid = 0;
    j->pid_start = 0;
    /* slots stay: what the last run ran on, for `gpuq show`; only a running or stopping job
     * holds them. */
    if (j->state != JOB_STOPPING || !end_stopped(d, q, now)) {
        if (!note && WIFEXITED(x.status) && WEXITSTATUS(x.status) == 0)
            j->state = JOB_COMPLETED;
        else
            run_failed(d, q, now, note ? "SupervisorLost" : "NonZeroExitCode");
    }
    j->stop_reason = JOB_STOP_NONE;
    if (job_state_is_final(j->state))
        j->end_time = now;
    char event[ERRMSG_MAX + 64];
    if (note)
        snprintf(event, sizeof(event), "run %u: %s; %s", j->runs, note, job_state_name(j->state));
    else if (WIFSIGNALED(x.status))
        snprintf(event, sizeof(event), "run %u ended by SIG%s; %s%s%s", j->runs,
                 sigabbrev_np(WTERMSIG(x.status)), job_state_name(j->state),
                 j->reason[0] ? " " : "", j->reason);
    else
        snprintf(event, sizeof(event), "run %u exited %d; %s%s%s", j->runs, WEXITSTATUS(x.status),
                 job_state_name(j->state), j->reason[0] ? " " : "", j->reason);
    log_info("job %llu: %s", (unsigned long long)j->id, event);
    run_exit_done(&x);
    return jobs_save(d, q, event, &e);
}

/* A running job past its time limit or active deadline is stopped; a pending one past its
 * deadline ends at once (Kubernetes fails the Job the same way). */
static double check_limits(struct gpuqd *d, struct qjob *q, double now)
{
    struct job *j = &q->j;
    struct errmsg e = {{0}};
    double limit = sched_time_limit(j, &d->cfg.sched.queues[q->queue]);
    double end = j->state == JOB_RUNNING && limit > 0 ? j->start_time + limit : INFINITY;
    double deadline = j->spec.active_deadline_s > 0 && j->first_start_time > 0
                          ? j->first_start_time + j->spec.active_deadline_s
                          : INFINITY;
    if (j->state == JOB_PENDING && now >= deadline) {
        j->state = JOB_TIMEOUT;
        j->end_time = now;
        snprintf(j->reason, sizeof(j->reason), "DeadlineExceeded");
        jobs_save(d, q, "active deadline passed while pending", &e);
        return INFINITY;
    }
    if (j->state != JOB_RUNNING)
        return j->state == JOB_PENDING ? deadline : INFINITY;
    if (now >= end || now >= deadline) {
        snprintf(j->reason, sizeof(j->reason), "%s", now >= end ? "TimeLimit" : "DeadlineExceeded");
        runs_stop(d, q, JOB_STOP_TIMEOUT, 0);
        return j->stop_deadline;
    }
    return end < deadline ? end : deadline;
}

double runs_timers(struct gpuqd *d, double now)
{
    double next = INFINITY;
    for (size_t i = 0; i < d->n_jobs; i++) {
        struct qjob *q = d->jobs[i];
        double t;
        if (q->j.state == JOB_STOPPING) {
            t = q->j.stop_deadline;
            if (now >= t) {
                signal_job(d, &q->j, SIGKILL);
                t = now + 1; /* again until its supervisor reports the end */
            }
        } else {
            t = check_limits(d, q, now);
        }
        if (t < next)
            next = t;
    }
    return next;
}

int runs_recover(struct gpuqd *d)
{
    for (size_t i = 0; i < d->n_jobs; i++) {
        struct qjob *q = d->jobs[i];
        if (q->j.state != JOB_RUNNING && q->j.state != JOB_STOPPING)
            continue;
        if (q->j.pid > 0 && run_alive(q->j.pid, q->j.pid_start)) {
            q->pidfd = pidfd_of(q->j.pid);
            if (q->pidfd >= 0) {
                log_info("job %llu: still running (gpuq-run %ld)", (unsigned long long)q->j.id,
                         (long)q->j.pid);
                continue;
            }
        }
        int r = runs_reap(d, q);
        if (r < 0)
            return r;
    }
    return 0;
}
