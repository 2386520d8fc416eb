/* gpuqd's table of active jobs, their persistence and their JSON form. */
#include <errno.h>
#include <math.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuq/gpuqd/gpuqd.h"
#include "gpuq/spec/job-spec.h"
#include "gpuq/store/store.h"
#include "lib/log.h"
#include "lib/clock.h"
#include "lib/macro.h"
#include "lib/rm-tree.h"

struct qjob *jobs_find(struct gpuqd *d, uint64_t id)
{
    for (size_t i = 0; i < d->n_jobs; i++)
        if (d->jobs[i]->j.id == id)
            return d->jobs[i];
    return NULL;
}

int jobs_add(struct gpuqd *d, struct qjob *q)
{
    if (d->n_jobs == d->cap_jobs) {
        size_t cap = d->cap_jobs ? 2 * d->cap_jobs : 64;
        struct qjob **n = realloc(d->jobs, cap * sizeof(*n));
        if (!n)
            return -ENOMEM;
        d->jobs = n;
        d->cap_jobs = cap;
    }
    d->jobs[d->n_jobs++] = q;
    return 0;
}

void qjob_free(struct qjob *q)
{
    if (!q)
        return;
    if (q->pidfd >= 0)
        close(q->pidfd);
    job_spec_done(&q->j.spec);
    free(q);
}

/* A job that has ended needs its run's files (spec, pid and exit record) no more; its log
 * stays until the job is purged. */
static void remove_run_files(const struct gpuqd *d, uint64_t id)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/jobs/%llu", d->cfg.state_dir, (unsigned long long)id);
    int r = rm_tree(path);
    if (r < 0)
        log_warning("job %llu: cannot remove %s: %s", (unsigned long long)id, path, strerror(-r));
}

void jobs_prune(struct gpuqd *d)
{
    size_t k = 0;
    for (size_t i = 0; i < d->n_jobs; i++) {
        if (job_state_is_final(d->jobs[i]->j.state)) {
            remove_run_files(d, d->jobs[i]->j.id);
            qjob_free(d->jobs[i]);
        } else {
            d->jobs[k++] = d->jobs[i];
        }
    }
    d->n_jobs = k;
}

struct purged {
    const struct gpuqd *d;
    double before;
};

/* Logs of the jobs about to be purged go with them. */
static int remove_log(struct job *j, const char *spec_json, void *userdata)
{
    const struct purged *p = userdata;
    char path[4096];
    if (!job_state_is_final(j->state) || j->end_time >= p->before)
        return 0;
    if (runs_log_path(p->d, j->id, path, sizeof(path)) == 0 && unlink(path) < 0 && errno != ENOENT)
        log_warning("job %llu: cannot remove %s: %m", (unsigned long long)j->id, path);
    return 0;
}

void jobs_purge(struct gpuqd *d, double now)
{
    struct errmsg e = {{0}};
    struct purged p = {.d = d, .before = now - JOBS_KEEP_S};
    unsigned n = 0;
    int r = store_jobs_each(d->store, false, 0, 0, remove_log, &p, &e);
    if (r == 0)
        r = store_jobs_purge(d->store, p.before, &n, &e);
    if (r < 0)
        log_warning("purging old jobs: %s", e.text);
    else if (n > 0)
        log_info("purged %u job(s) that ended more than %.0f days ago", n, JOBS_KEEP_S / 86400);
}

int jobs_save(struct gpuqd *d, struct qjob *q, const char *event, struct errmsg *e)
{
    int r = store_job_update(d->store, &q->j, e);
    if (r == 0 && event)
        r = store_event_add(d->store, q->j.id, clock_wall_sec(), event, e);
    pthread_cond_broadcast(&d->changed);
    return r;
}

unsigned jobs_gpus_allocated(const struct gpuqd *d)
{
    unsigned n = 0;
    for (size_t i = 0; i < d->n_jobs; i++) {
        const struct job *j = &d->jobs[i]->j;
        struct res_set s = {{j->slots[0], j->slots[1]}};
        if (j->state == JOB_RUNNING || j->state == JOB_STOPPING)
            n += res_set_count(&s);
    }
    return n;
}

const char *jobs_user_name(uid_t uid, char *buf, size_t size)
{
    struct passwd pw, *res = NULL;
    char tmp[4096];
    if (getpwuid_r(uid, &pw, tmp, sizeof(tmp), &res) == 0 && res)
        snprintf(buf, size, "%s", pw.pw_name);
    else
        snprintf(buf, size, "%lu", (unsigned long)uid);
    return buf;
}

static json_t *time_or_null(double t)
{
    return t > 0 && isfinite(t) ? json_real(t) : json_null();
}

static json_t *gpus_json(const struct job_resources *r)
{
    const char *kind = r->gpu_kind == JOB_GPU_WHOLE ? "whole"
                       : r->gpu_kind == JOB_GPU_MIG ? "mig"
                                                    : "none";
    return json_pack("{s:s, s:I, s:s, s:s}", "kind", kind, "count", (json_int_t)r->gpus, "model",
                     r->model, "profile", r->profile);
}

static json_t *strv_json(char *const *v)
{
    json_t *a = json_array();
    for (size_t i = 0; v && v[i]; i++)
        json_array_append_new(a, json_string(v[i]));
    return a;
}

static json_t *allocated_json(const struct gpuqd *d, const struct job *j)
{
    json_t *a = json_array();
    struct res_set s = {{j->slots[0], j->slots[1]}};
    for (unsigned i = 0; i < d->node.n_slots; i++)
        if (res_set_has(&s, i))
            json_array_append_new(a, json_string(d->node.slots[i].uuid));
    return a;
}

/* How the last run ended: exit code or signal, from the wait status. */
static void set_exit(json_t *o, const struct job *j)
{
    int st = j->exit_status;
    bool has = st >= 0 && j->runs > 0;
    json_object_set_new(o, "exit_code",
                        has && WIFEXITED(st) ? json_integer(WEXITSTATUS(st)) : json_null());
    json_object_set_new(o, "signal",
                        has && WIFSIGNALED(st) ? json_integer(WTERMSIG(st)) : json_null());
}

json_t *jobs_to_json(const struct gpuqd *d, const struct job *j, unsigned queue,
                     const struct qjob *active, unsigned what)
{
    char user[64], log[512];
    const struct queue *q = &d->cfg.sched.queues[queue];
    const char *sig = sigabbrev_np(j->spec.checkpoint_signal);
    json_t *o = json_pack(
        "{s:I, s:s, s:s, s:I, s:s, s:s*, s:i, s:s, s:s, s:b, s:b, s:o, s:o, s:o, s:o, s:o, s:o,"
        " s:I, s:I, s:s*, s:I, s:I, s:I, s:I, s:o, s:s*, s:f, s:o}",
        "id", (json_int_t)j->id, "name", j->spec.name ? j->spec.name : "", "user",
        jobs_user_name(j->uid, user, sizeof(user)), "uid", (json_int_t)j->uid, "queue", q->name,
        "priority_class", j->spec.priority_class, "priority", j->priority, "state",
        job_state_name(j->state), "reason", j->reason, "held", j->held, "interactive",
        j->spec.interactive, "submit_time", time_or_null(j->submit_time), "start_time",
        time_or_null(j->start_time), "end_time", time_or_null(j->end_time), "first_start_time",
        time_or_null(j->first_start_time), "time_limit", time_or_null(sched_time_limit(j, q)),
        "gpus", gpus_json(&j->spec.res), "cpu_milli", (json_int_t)j->spec.res.cpu_milli,
        "mem_bytes", (json_int_t)j->spec.res.mem_bytes, "image", j->spec.image, "failures",
        (json_int_t)j->failures, "backoff_limit", (json_int_t)j->spec.backoff_limit, "preemptions",
        (json_int_t)j->preemptions, "runs", (json_int_t)j->runs, "last_checkpoint",
        time_or_null(j->last_checkpoint), "checkpoint_signal", sig, "grace", j->spec.grace_s,
        "eligible_time", time_or_null(j->eligible_time));
    if (!o)
        return NULL;
    set_exit(o, j);
    json_object_set_new(o, "allocated", allocated_json(d, j));
    if (runs_log_path(d, j->id, log, sizeof(log)) == 0)
        json_object_set_new(o, "log", json_string(log));
    if (what & JOBS_JSON_PRIVATE) {
        json_object_set_new(o, "command", strv_json(j->spec.argv));
        if (j->spec.cwd)
            json_object_set_new(o, "cwd", json_string(j->spec.cwd));
    }
    if ((what & JOBS_JSON_PRIVATE) && (what & JOBS_JSON_ENV))
        json_object_set_new(o, "env", strv_json(j->spec.env));
    if (active) {
        json_object_set_new(o, "borrowing", json_boolean(active->borrowing));
        if (j->state == JOB_PENDING) {
            json_object_set_new(o, "position", json_integer(active->position));
            json_object_set_new(o, "estimated_start", time_or_null(active->estimated_start));
        }
    }
    return o;
}
