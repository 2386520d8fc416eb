/* gpuqd's side of a scheduling pass: the quotas the calendar puts in effect, the users'
 * fair-share usage, the pure pass (gpuq/core/sched.h), and its decisions applied. */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "gpuq/gpuqd/gpuqd.h"
#include "gpuq/policy/calendar.h"
#include "gpuq/store/store.h"
#include "lib/log.h"
#include "lib/clock.h"
#include "lib/macro.h"

void schedule_wake(struct gpuqd *d)
{
    uint64_t one = 1;
    if (write(d->wake_fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
        log_warning("cannot wake the scheduler: %m");
}

double *schedule_usage(struct gpuqd *d, unsigned queue, uid_t uid, bool add)
{
    for (size_t i = 0; i < d->n_usage; i++)
        if (d->usage[i].queue == queue && d->usage[i].uid == uid)
            return &d->usage[i].value;
    if (!add)
        return NULL;
    struct usage *u = realloc(d->usage, (d->n_usage + 1) * sizeof(*u));
    if (!u)
        return NULL;
    d->usage = u;
    d->usage[d->n_usage] = (struct usage){.queue = queue, .uid = uid, .time = clock_wall_sec()};
    return &d->usage[d->n_usage++].value;
}

/* GPUs a run holds, for fair share: a MIG instance counts its compute slices out of 7. */
static double gpu_weight(const struct gpuqd *d, const struct job *j)
{
    struct res_set s = {{j->slots[0], j->slots[1]}};
    double w = 0;
    for (unsigned i = 0; i < d->node.n_slots; i++) {
        if (!res_set_has(&s, i))
            continue;
        const struct res_slot *slot = &d->node.slots[i];
        int slices = slot->mig ? atoi(slot->profile) : 7;
        w += (slices > 0 ? slices : 1) / 7.0;
    }
    return w;
}

void schedule_account(struct gpuqd *d, double now)
{
    double half = d->cfg.sched.fairshare_half_life_s;
    for (size_t i = 0; i < d->n_usage; i++) {
        struct usage *u = &d->usage[i];
        if (half > 0 && now > u->time)
            u->value *= exp2(-(now - u->time) / half);
        u->time = now;
    }
    for (size_t i = 0; i < d->n_jobs; i++) {
        struct qjob *q = d->jobs[i];
        if (q->j.state != JOB_RUNNING && q->j.state != JOB_STOPPING)
            continue;
        double since = q->accounted > q->j.start_time ? q->accounted : q->j.start_time;
        double *v = schedule_usage(d, q->queue, q->j.uid, true);
        if (v && now > since)
            *v += gpu_weight(d, &q->j) * (now - since);
        q->accounted = now;
    }
    if (now - d->last_usage_save < 60)
        return;
    d->last_usage_save = now;
    struct errmsg e = {{0}};
    for (size_t i = 0; i < d->n_usage; i++)
        if (store_usage_set(d->store, d->cfg.sched.queues[d->usage[i].queue].name, d->usage[i].uid,
                            d->usage[i].value, d->usage[i].time, &e) < 0) {
            log_warning("saving fair-share usage: %s", e.text);
            break;
        }
}

void schedule_record_wait(struct gpuqd *d, const struct qjob *q, double now)
{
    static const double bounds[WAIT_BUCKETS] = {1,   2,   5,    10,    30,    60,
                                                300, 900, 3600, 14400, 86400, INFINITY};
    double since = q->j.requeue_time > 0                   ? q->j.requeue_time
                   : q->j.eligible_time > q->j.submit_time ? q->j.eligible_time
                                                           : q->j.submit_time;
    double wait = now > since ? now - since : 0;
    for (unsigned b = 0; b < WAIT_BUCKETS; b++)
        if (wait <= bounds[b]) {
            d->stats.wait_buckets[q->queue * WAIT_BUCKETS + b]++;
            break;
        }
    d->stats.wait_sum[q->queue] += wait;
    d->stats.wait_count[q->queue]++;
}

/* The quotas in effect now; returns when the calendar next changes them. */
static double update_quotas(struct gpuqd *d, double now)
{
    double next = INFINITY;
    for (unsigned i = 0; i < d->cfg.sched.n_queues; i++) {
        const struct queue *q = &d->cfg.sched.queues[i];
        time_t change;
        if (calendar_quota_at(q, d->cfg.sched.time_zone, (time_t)now, &d->quotas[i], NULL) < 0)
            d->quotas[i] = q->quota;
        if (calendar_next_change(q, d->cfg.sched.time_zone, (time_t)now, &change) == 0 &&
            (double)change < next)
            next = (double)change;
    }
    return next;
}

static int apply(struct gpuqd *d, const struct sched_result *res)
{
    /* Preemptions first: their signals go out before the new runs start. */
    for (size_t k = 0; k < res->n_actions; k++) {
        const struct sched_action *a = &res->actions[k];
        if (a->kind != SCHED_PREEMPT)
            continue;
        struct qjob *victim = d->jobs[a->job], *for_job = d->jobs[a->for_job];
        log_notice("job %llu: preempted for job %llu", (unsigned long long)victim->j.id,
                   (unsigned long long)for_job->j.id);
        int r = runs_stop(d, victim, JOB_STOP_PREEMPT, 0);
        if (r < 0)
            return r;
    }
    for (size_t k = 0; k < res->n_actions; k++) {
        const struct sched_action *a = &res->actions[k];
        if (a->kind == SCHED_START) {
            int r = runs_start(d, d->jobs[a->job], &a->slots);
            if (r < 0)
                return r;
        }
    }
    return 0;
}

struct sched_job *schedule_input(struct gpuqd *d, double now, struct sched_input *ret)
{
    struct sched_job *sj = calloc(d->n_jobs ? d->n_jobs : 1, sizeof(*sj));
    for (size_t i = 0; sj && i < d->n_jobs; i++) {
        struct qjob *q = d->jobs[i];
        double *u = schedule_usage(d, q->queue, q->j.uid, false);
        sj[i] = (struct sched_job){.job = &q->j, .queue = q->queue, .usage = u ? *u : 0};
    }
    *ret = (struct sched_input){.node = &d->node,
                                .config = &d->cfg.sched,
                                .quotas = d->quotas,
                                .jobs = sj,
                                .n_jobs = d->n_jobs,
                                .now = now,
                                .drained = d->drained};
    return sj;
}

double schedule_pass(struct gpuqd *d, double now)
{
    schedule_account(d, now);
    double next = update_quotas(d, now);
    struct sched_input in;
    _cleanup_free_ struct sched_job *sj = schedule_input(d, now, &in);
    _cleanup_free_ bool *borrowing = calloc(d->n_jobs ? d->n_jobs : 1, sizeof(bool));
    struct sched_result res = {0};
    if (!sj || !borrowing) {
        log_error("scheduling pass: out of memory");
        return now + 1;
    }
    if (sched_pass(&in, &res) < 0) {
        log_error("scheduling pass: out of memory");
        return now + 1;
    }
    size_t n = d->n_jobs; /* apply() adds none, and prunes none */
    for (size_t i = 0; i < n; i++)
        if (d->jobs[i]->j.state == JOB_PENDING) {
            d->jobs[i]->why = res.reasons[i];
            if (res.reasons[i][0])
                snprintf(d->jobs[i]->j.reason, sizeof(d->jobs[i]->j.reason), "%s", res.reasons[i]);
        }
    if (apply(d, &res) < 0)
        log_error("scheduling pass: the store failed; decisions may be lost");
    sched_result_done(&res);
    /* in still describes the jobs: apply() changed their states in place, added none. */
    if (sched_borrowers(&in, borrowing) == 0)
        for (size_t i = 0; i < n; i++)
            d->jobs[i]->borrowing = borrowing[i];
    for (size_t i = 0; i < n; i++) {
        const struct job *j = &d->jobs[i]->j;
        if (j->state == JOB_PENDING && j->eligible_time > now && j->eligible_time < next)
            next = j->eligible_time;
    }
    return next;
}
