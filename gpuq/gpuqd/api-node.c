/* The node's handlers: queues (quota in effect, use, borrowing, calendar), status, drain and
 * resume. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "gpuq/gpuqd/api.h"
#include "gpuq/policy/calendar.h"
#include "gpuq/store/store.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/roles.h"

/* {key: amount} of what the queue's running jobs (or only its borrowers) hold, for each limit of
 * the quota in effect. */
static json_t *held_json(const struct gpuqd *d, unsigned queue, bool borrowed_only)
{
    const struct quota *quota = &d->quotas[queue];
    uint64_t used[QUOTA_MAX] = {0};
    for (size_t i = 0; i < d->n_jobs; i++) {
        const struct qjob *q = d->jobs[i];
        if (q->queue != queue || (q->j.state != JOB_RUNNING && q->j.state != JOB_STOPPING) ||
            (borrowed_only && !q->borrowing))
            continue;
        struct res_set s = {{q->j.slots[0], q->j.slots[1]}};
        sched_quota_charge(&d->node, quota, used, &q->j.spec.res, &s);
    }
    json_t *o = json_object();
    char key[64];
    for (unsigned k = 0; k < quota->n; k++)
        json_object_set_new(o, quota_key(&quota->l[k], key, sizeof(key)),
                            json_integer((json_int_t)used[k]));
    return o;
}

static json_t *quota_json(const struct quota *quota)
{
    json_t *o = json_object();
    char key[64];
    for (unsigned k = 0; k < quota->n; k++)
        json_object_set_new(o, quota_key(&quota->l[k], key, sizeof(key)),
                            json_integer((json_int_t)quota->l[k].limit));
    return o;
}

static json_t *queue_json(const struct gpuqd *d, unsigned i, time_t now)
{
    const struct queue *q = &d->cfg.sched.queues[i];
    const struct window *w = NULL;
    struct quota in_effect;
    time_t next;
    if (calendar_quota_at(q, d->cfg.sched.time_zone, now, &in_effect, &w) < 0)
        in_effect = d->quotas[i];
    bool has_next = calendar_next_change(q, d->cfg.sched.time_zone, now, &next) == 0;
    unsigned pending = 0, running = 0;
    for (size_t k = 0; k < d->n_jobs; k++) {
        if (d->jobs[k]->queue != i)
            continue;
        pending += d->jobs[k]->j.state == JOB_PENDING;
        running += d->jobs[k]->j.state != JOB_PENDING;
    }
    return json_pack("{s:s, s:i, s:s, s:o, s:o, s:o, s:o, s:o, s:I, s:I}", "name", q->name,
                     "priority", q->priority, "class", service_class_name(q->class), "quota",
                     quota_json(&in_effect), "used", held_json(d, i, false), "borrowed",
                     held_json(d, i, true), "window", w ? json_string(w->name) : json_null(),
                     "next_change", has_next ? json_integer((json_int_t)next) : json_null(),
                     "pending", (json_int_t)pending, "running", (json_int_t)running);
}

void api_queues(struct api_call *c)
{
    struct gpuqd *d = c->d;
    json_t *queues = json_array();
    pthread_mutex_lock(&d->lock);
    time_t now = (time_t)clock_wall_sec();
    for (unsigned i = 0; i < d->cfg.sched.n_queues; i++)
        json_array_append_new(queues, queue_json(d, i, now));
    json_t *o = json_pack("{s:o, s:b, s:I, s:I, s:s*}", "queues", queues, "drained", d->drained,
                          "gpus_total", (json_int_t)d->node.n_slots, "gpus_allocated",
                          (json_int_t)jobs_gpus_allocated(d), "time_zone", d->cfg.sched.time_zone);
    pthread_mutex_unlock(&d->lock);
    http_reply_json(c->reply, 200, o);
}

void api_status(struct api_call *c)
{
    struct gpuqd *d = c->d;
    unsigned n[JOB_STATE_COUNT] = {0};
    pthread_mutex_lock(&d->lock);
    for (size_t i = 0; i < d->n_jobs; i++)
        n[d->jobs[i]->j.state]++;
    json_t *jobs = json_object();
    for (int s = 0; s < JOB_STATE_COUNT; s++)
        if (!job_state_is_final((enum job_state)s))
            json_object_set_new(jobs, job_state_name((enum job_state)s), json_integer(n[s]));
    json_t *o = json_pack("{s:s, s:b, s:o, s:I, s:I}", "version", GPUNODE_VERSION, "drained",
                          d->drained, "jobs", jobs, "gpus_total", (json_int_t)d->node.n_slots,
                          "gpus_allocated", (json_int_t)jobs_gpus_allocated(d));
    pthread_mutex_unlock(&d->lock);
    http_reply_json(c->reply, 200, o);
}

static bool admin_write(struct api_call *c)
{
    if (!c->admin) {
        const char *group = roles_admin_group(c->d->roles);
        http_reply_error(c->reply, 403, "only root%s%s%s may drain or resume the node",
                         group ? " and members of group '" : "", group ? group : "",
                         group ? "'" : "");
        api_audit(c, "denied");
        return false;
    }
    if (api_audit(c, "requested") < 0) {
        http_reply_error(c->reply, 503, "the audit log cannot be written; nothing was changed");
        return false;
    }
    return true;
}

static int set_drained(struct gpuqd *d, bool drained, struct errmsg *e)
{
    int r = store_meta_set(d->store, "drained", drained ? "1" : "0", e);
    if (r == 0)
        d->drained = drained;
    return r;
}

static unsigned count_running(const struct gpuqd *d)
{
    unsigned n = 0;
    for (size_t i = 0; i < d->n_jobs; i++)
        n += d->jobs[i]->j.state == JOB_RUNNING || d->jobs[i]->j.state == JOB_STOPPING;
    return n;
}

/* Number or absent; -1 when present and not a non-negative number. */
static double body_seconds(json_t *body, const char *key)
{
    json_t *v = body ? json_object_get(body, key) : NULL;
    if (!v)
        return 0;
    return json_is_number(v) && json_number_value(v) >= 0 ? json_number_value(v) : -1;
}

void api_drain(struct api_call *c)
{
    struct gpuqd *d = c->d;
    struct errmsg e = {{0}};
    double grace_max = body_seconds(c->body, "grace_max"), wait = body_seconds(c->body, "wait");
    if (grace_max < 0 || wait < 0) {
        http_reply_error(c->reply, 400, "grace_max and wait are seconds (numbers >= 0)");
        return;
    }
    if (!admin_write(c))
        return;
    pthread_mutex_lock(&d->lock);
    int r = set_drained(d, true, &e);
    unsigned stopped = 0;
    for (size_t i = 0; r == 0 && i < d->n_jobs; i++)
        if (d->jobs[i]->j.state == JOB_RUNNING) {
            r = runs_stop(d, d->jobs[i], JOB_STOP_DRAIN,
                          grace_max > 0 ? grace_max : d->cfg.drain_grace_max_s);
            stopped++;
        }
    schedule_wake(d);
    struct timespec until = clock_deadline_msec((uint64_t)(wait * 1000));
    while (r == 0 && wait > 0 && count_running(d) > 0)
        if (pthread_cond_timedwait(&d->changed, &d->lock, &until) == ETIMEDOUT)
            break;
    unsigned left = count_running(d);
    pthread_mutex_unlock(&d->lock);
    if (r < 0) {
        http_reply_error(c->reply, 500, "drain: %s", e.text);
        api_audit(c, "failed");
        return;
    }
    log_notice("drained by uid %u: %u job(s) stopping, %u still running",
               (unsigned)c->req->peer.uid, stopped, left);
    http_reply_json(c->reply, 200,
                    json_pack("{s:b, s:I, s:I}", "drained", true, "stopped", (json_int_t)stopped,
                              "running", (json_int_t)left));
    api_audit(c, "applied");
}

void api_resume(struct api_call *c)
{
    struct gpuqd *d = c->d;
    struct errmsg e = {{0}};
    if (!admin_write(c))
        return;
    pthread_mutex_lock(&d->lock);
    int r = set_drained(d, false, &e);
    pthread_mutex_unlock(&d->lock);
    if (r < 0) {
        http_reply_error(c->reply, 500, "resume: %s", e.text);
        api_audit(c, "failed");
        return;
    }
    log_notice("resumed by uid %u", (unsigned)c->req->peer.uid);
    schedule_wake(d);
    http_reply_json(c->reply, 200, json_pack("{s:b}", "drained", false));
    api_audit(c, "applied");
}
