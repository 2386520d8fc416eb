/* The job handlers of gpuqd's API: submit, list, show, cancel, hold, release, checkpoint,
 * log. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpuq/gpuqd/api.h"
#include "gpuq/spec/job-spec.h"
#include "gpuq/store/store.h"
#include "lib/log.h"
#include "lib/clock.h"
#include "lib/macro.h"
#include "lib/names.h"

#define LIST_RECENT  200u
#define ESTIMATE_MAX 1000u

/* Resolves the queue and priority class a spec names, and checks it can ever run here. Replies
 * and returns false when not. */
static bool resolve(struct api_call *c, struct qjob *q)
{
    const struct sched_config *sc = &c->d->cfg.sched;
    const struct job_spec *s = &q->j.spec;
    if (s->queue) {
        const struct queue *qu = sched_config_queue(sc, s->queue);
        if (!qu) {
            http_reply_error(c->reply, 404, "no queue '%s' (gpuq queues lists them)", s->queue);
            return false;
        }
        q->queue = (unsigned)(qu - sc->queues);
    }
    const char *cls = s->priority_class ? s->priority_class : sc->default_class;
    if (cls) {
        const struct priority_class *pc = sched_config_class(sc, cls);
        if (!pc) {
            http_reply_error(c->reply, 404, "no priority class '%s'", cls);
            return false;
        }
        q->j.priority = pc->value;
    }
    if (s->grace_s > sc->max_grace_s) {
        http_reply_error(c->reply, 400, "grace %.0fs is over this node's max_grace of %.0fs",
                         s->grace_s, sc->max_grace_s);
        return false;
    }
    const struct queue *qu = &sc->queues[q->queue];
    if (qu->max_time_s > 0 && s->time_limit_s > qu->max_time_s) {
        http_reply_error(c->reply, 400, "time limit %.0fs is over the limit of queue '%s', %.0fs",
                         s->time_limit_s, qu->name, qu->max_time_s);
        return false;
    }
    if (!res_node_can_hold(&c->d->node, &s->res)) {
        http_reply_error(c->reply, 422,
                         "the job can never run on this node: it asks for %u %s%s%s "
                         "GPU(s), %.1f CPUs, %llu bytes of memory",
                         s->res.gpus, s->res.gpu_kind == JOB_GPU_MIG ? "MIG " : "",
                         s->res.gpu_kind == JOB_GPU_MIG ? s->res.profile : s->res.model,
                         s->res.gpu_kind == JOB_GPU_MIG ? " instance" : "",
                         s->res.cpu_milli / 1000.0, (unsigned long long)s->res.mem_bytes);
        return false;
    }
    return true;
}

static unsigned long jobs_of_user(const struct gpuqd *d, uid_t uid)
{
    unsigned long n = 0;
    for (size_t i = 0; i < d->n_jobs; i++)
        n += d->jobs[i]->j.uid == uid;
    return n;
}

/* A new job from the request body; replies and returns NULL on a bad request. */
static struct qjob *new_job(struct api_call *c, char **ret_spec_json)
{
    struct errmsg e = {{0}};
    if (!c->body) {
        http_reply_error(c->reply, 400, "submit needs a JSON body (the job)");
        return NULL;
    }
    struct qjob *q = calloc(1, sizeof(*q));
    if (!q) {
        http_reply_error(c->reply, 500, "out of memory");
        return NULL;
    }
    q->pidfd = -1;
    bool held = false;
    if (job_spec_from_json(c->body, &q->j.spec, &held, &e) < 0) {
        http_reply_error(c->reply, 400, "%s", e.text);
        qjob_free(q);
        return NULL;
    }
    json_t *sj = job_spec_to_json(&q->j.spec);
    _cleanup_free_ char *text = sj ? json_dumps(sj, JSON_COMPACT) : NULL;
    json_decref(sj);
    if (!text)
        http_reply_error(c->reply, 500, "out of memory");
    if (!text || !resolve(c, q)) {
        qjob_free(q);
        return NULL;
    }
    *ret_spec_json = TAKE_PTR(text);
    q->j.uid = c->req->peer.uid;
    q->j.gid = c->req->peer.gid;
    q->j.held = held;
    q->j.state = JOB_PENDING;
    q->j.exit_status = -1;
    return q;
}

void api_submit(struct api_call *c)
{
    struct errmsg e = {{0}};
    _cleanup_free_ char *spec_json = NULL;
    struct qjob *q = new_job(c, &spec_json);
    if (!q) {
        api_audit(c, "refused");
        return;
    }
    if (api_audit(c, "requested") < 0) {
        http_reply_error(c->reply, 503, "the audit log cannot be written; nothing was changed");
        qjob_free(q);
        return;
    }
    struct gpuqd *d = c->d;
    pthread_mutex_lock(&d->lock);
    if (jobs_of_user(d, q->j.uid) >= d->cfg.sched.max_jobs_per_user) {
        pthread_mutex_unlock(&d->lock);
        http_reply_error(c->reply, 429,
                         "you have %lu jobs pending or running, this node's "
                         "max_jobs_per_user",
                         d->cfg.sched.max_jobs_per_user);
        qjob_free(q);
        api_audit(c, "refused");
        return;
    }
    q->j.submit_time = clock_wall_sec();
    /* The job and its first event in one transaction: one fsync before the reply. */
    int r = store_begin(d->store, &e);
    if (r == 0)
        r = store_job_insert(d->store, &q->j, spec_json, &e);
    if (r == 0)
        r = store_event_add(d->store, q->j.id, q->j.submit_time,
                            q->j.held ? "submitted, held" : "submitted", &e);
    if (r == 0)
        r = store_commit(d->store, &e);
    if (r < 0)
        store_rollback(d->store);
    if (r == 0 && (r = jobs_add(d, q)) < 0)
        snprintf(e.text, sizeof(e.text), "out of memory");
    if (r < 0) {
        pthread_mutex_unlock(&d->lock);
        http_reply_error(c->reply, r == -ENOSPC ? 507 : 500, "job not submitted: %s", e.text);
        qjob_free(q);
        api_audit(c, "failed");
        return;
    }
    if (q->j.id > d->last_id)
        d->last_id = q->j.id;
    json_t *job = jobs_to_json(d, &q->j, q->queue, q, JOBS_JSON_PRIVATE);
    pthread_mutex_unlock(&d->lock);
    log_info("job %llu: submitted by uid %u to queue %s", (unsigned long long)q->j.id,
             (unsigned)q->j.uid, d->cfg.sched.queues[q->queue].name);
    schedule_wake(d);
    http_reply_json(c->reply, 201, json_pack("{s:I, s:o*}", "id", (json_int_t)q->j.id, "job", job));
    api_audit(c, "applied");
}

/* ---- list ---- */

struct filter {
    bool has_uid;
    uid_t uid;
    const char *states; /* "PENDING,RUNNING" */
    const char *queue;
};

static bool filter_parse(struct api_call *c, struct filter *f)
{
    memset(f, 0, sizeof(*f));
    const char *user = http_request_query(c->req, "user");
    f->states = http_request_query(c->req, "state");
    f->queue = http_request_query(c->req, "queue");
    if (user && *user) {
        char buf[4096];
        struct passwd pw, *res = NULL;
        char *end;
        unsigned long v = strtoul(user, &end, 10);
        if (*end == '\0' && end != user) {
            f->uid = (uid_t)v;
        } else if (getpwnam_r(user, &pw, buf, sizeof(buf), &res) == 0 && res) {
            f->uid = res->pw_uid;
        } else {
            http_reply_error(c->reply, 404, "no user '%s'", user);
            return false;
        }
        f->has_uid = true;
    }
    return true;
}

static bool filter_match(const struct filter *f, const struct gpuqd *d, const struct job *j,
                         unsigned queue)
{
    if (f->has_uid && j->uid != f->uid)
        return false;
    if (f->queue && *f->queue && strcmp(d->cfg.sched.queues[queue].name, f->queue) != 0)
        return false;
    if (f->states && *f->states) {
        const char *name = job_state_name(j->state);
        size_t n = strlen(name);
        for (const char *p = f->states; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
            if (strncasecmp(p, name, n) == 0 && (p[n] == ',' || p[n] == '\0'))
                return true;
        return false;
    }
    return true;
}

/* Positions and estimated starts of the pending jobs, as of now. */
static void estimate(struct gpuqd *d)
{
    struct sched_input in;
    _cleanup_free_ struct sched_job *sj = schedule_input(d, clock_wall_sec(), &in);
    _cleanup_free_ double *start = calloc(d->n_jobs ? d->n_jobs : 1, sizeof(*start));
    _cleanup_free_ size_t *order = NULL;
    size_t n = 0;
    if (!sj || !start)
        return;
    if (sched_order(&in, &order, &n) < 0 || sched_estimate(&in, ESTIMATE_MAX, start) < 0)
        return;
    for (size_t k = 0; k < n; k++)
        d->jobs[order[k]]->position = (unsigned)(k + 1);
    for (size_t i = 0; i < d->n_jobs; i++)
        d->jobs[i]->estimated_start = start[i];
}

struct list_ctx {
    struct api_call *c;
    struct filter *f;
    json_t *jobs;
};

/* A finished job out of the store, as the API shows it. */
static int stored_job(struct job *j, const char *spec_json, void *userdata)
{
    struct list_ctx *l = userdata;
    struct gpuqd *d = l->c->d;
    if (!job_state_is_final(j->state))
        return 0;
    json_t *sj = json_loads(spec_json, 0, NULL);
    bool held;
    if (!sj || job_spec_from_json(sj, &j->spec, &held, NULL) < 0) {
        json_decref(sj);
        return 0;
    }
    json_decref(sj);
    const struct queue *qu =
        j->spec.queue ? sched_config_queue(&d->cfg.sched, j->spec.queue) : NULL;
    unsigned queue = qu ? (unsigned)(qu - d->cfg.sched.queues) : 0;
    if (filter_match(l->f, d, j, queue)) {
        bool own = l->c->admin || l->c->req->peer.uid == j->uid;
        json_array_append_new(l->jobs,
                              jobs_to_json(d, j, queue, NULL, own ? JOBS_JSON_PRIVATE : 0));
    }
    job_spec_done(&j->spec);
    return 0;
}

static int cmp_position(const void *a, const void *b)
{
    const struct qjob *x = *(struct qjob *const *)a, *y = *(struct qjob *const *)b;
    unsigned px = x->j.state == JOB_PENDING ? x->position : 0;
    unsigned py = y->j.state == JOB_PENDING ? y->position : 0;
    if (px != py)
        return px < py ? -1 : 1;
    return x->j.id < y->j.id ? -1 : x->j.id > y->j.id;
}

void api_list(struct api_call *c)
{
    struct filter f;
    if (!filter_parse(c, &f))
        return;
    const char *all = http_request_query(c->req, "all");
    struct gpuqd *d = c->d;
    json_t *jobs = json_array();
    pthread_mutex_lock(&d->lock);
    struct list_ctx l = {.c = c, .f = &f, .jobs = jobs};
    if (all && strcmp(all, "0") != 0) {
        uint64_t last = d->last_id > LIST_RECENT ? d->last_id - LIST_RECENT : 0;
        store_jobs_each(d->store, false, last, 0, stored_job, &l, NULL);
    }
    estimate(d);
    _cleanup_free_ struct qjob **sorted = malloc((d->n_jobs ? d->n_jobs : 1) * sizeof(*sorted));
    if (sorted) {
        if (d->n_jobs)
            memcpy(sorted, d->jobs, d->n_jobs * sizeof(*sorted));
        qsort(sorted, d->n_jobs, sizeof(*sorted), cmp_position);
        for (size_t i = 0; i < d->n_jobs; i++) {
            const struct qjob *q = sorted[i];
            if (!filter_match(&f, d, &q->j, q->queue))
                continue;
            bool own = c->admin || c->req->peer.uid == q->j.uid;
            json_array_append_new(jobs,
                                  jobs_to_json(d, &q->j, q->queue, q, own ? JOBS_JSON_PRIVATE : 0));
        }
    }
    pthread_mutex_unlock(&d->lock);
    http_reply_json(c->reply, 200, json_pack("{s:o}", "jobs", jobs));
}

/* ---- one job ---- */

struct found {
    struct gpuqd *d;
    json_t *job;
    uid_t uid;
    bool full;
    const struct api_call *c;
};

static int found_job(struct job *j, const char *spec_json, void *userdata)
{
    struct found *f = userdata;
    json_t *sj = json_loads(spec_json, 0, NULL);
    bool held;
    if (!sj || job_spec_from_json(sj, &j->spec, &held, NULL) < 0) {
        json_decref(sj);
        return -EUCLEAN;
    }
    json_decref(sj);
    const struct queue *qu =
        j->spec.queue ? sched_config_queue(&f->d->cfg.sched, j->spec.queue) : NULL;
    f->uid = j->uid;
    f->full = f->c->admin || f->c->req->peer.uid == j->uid;
    f->job = jobs_to_json(f->d, j, qu ? (unsigned)(qu - f->d->cfg.sched.queues) : 0, NULL,
                          f->full ? JOBS_JSON_PRIVATE | JOBS_JSON_ENV : 0);
    job_spec_done(&j->spec);
    return 0;
}

static int add_event(double time, const char *text, void *userdata)
{
    json_array_append_new(userdata, json_pack("{s:f, s:s}", "time", time, "text", text));
    return 0;
}

/* The job's JSON from memory or the store; NULL (and a 404 reply) when there is none. Called
 * locked. */
static json_t *lookup(struct api_call *c, uint64_t id, uid_t *ret_uid)
{
    struct gpuqd *d = c->d;
    struct qjob *q = jobs_find(d, id);
    if (q) {
        estimate(d);
        *ret_uid = q->j.uid;
        bool own = c->admin || c->req->peer.uid == q->j.uid;
        return jobs_to_json(d, &q->j, q->queue, q, own ? JOBS_JSON_PRIVATE | JOBS_JSON_ENV : 0);
    }
    struct found f = {.d = d, .c = c};
    if (store_job_get(d->store, id, found_job, &f, NULL) < 0 || !f.job) {
        http_reply_error(c->reply, 404, "no job %llu", (unsigned long long)id);
        return NULL;
    }
    *ret_uid = f.uid;
    return f.job;
}

void api_show(struct api_call *c, uint64_t id)
{
    struct gpuqd *d = c->d;
    uid_t uid;
    pthread_mutex_lock(&d->lock);
    json_t *job = lookup(c, id, &uid);
    json_t *events = json_array();
    if (job)
        store_events_each(d->store, id, add_event, events, NULL);
    pthread_mutex_unlock(&d->lock);
    if (!job) {
        json_decref(events);
        return;
    }
    http_reply_json(c->reply, 200, json_pack("{s:o, s:o}", "job", job, "events", events));
}
