/* Starving jobs' reservations and the backfill rule around them (see sched.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "gpuq/core/sched-internal.h"
#include "lib/macro.h"

bool pick_now(const struct pass *p, const struct sched_job *sj, struct res_set *ret)
{
    const struct job *j = sj->job;
    if (p->cpu_free < (int64_t)j->spec.res.cpu_milli ||
        p->mem_free < (int64_t)j->spec.res.mem_bytes)
        return false;
    struct res_set avail = p->free;
    double limit = sched_time_limit(j, &p->in->config->queues[sj->queue]);
    for (size_t k = 0; k < p->n_resv; k++) {
        /* Backfill: a job that surely ends before the reservation may use its slots. */
        bool ends_before = limit > 0 && p->in->now + limit <= p->resv[k].at;
        if (!ends_before)
            res_set_minus(&avail, &p->resv[k].slots);
    }
    return res_pick(p->in->node, &avail, &j->spec.res, ret);
}

struct release {
    double at;
    size_t job;
};

static int cmp_release(const void *a, const void *b)
{
    const struct release *x = a, *y = b;
    if (x->at != y->at)
        return x->at < y->at ? -1 : 1;
    return x->job < y->job ? -1 : x->job > y->job;
}

/* When a running job's slots come free: at its stop deadline while it stops, else at the end of
 * its time limit; INFINITY without one. */
static double release_time(const struct pass *p, size_t v)
{
    const struct sched_job *sv = &p->in->jobs[v];
    const struct job *j = sv->job;
    if (j->state == JOB_STOPPING)
        return j->stop_deadline;
    if (p->victim[v])
        return p->in->now + j->spec.grace_s;
    double limit = sched_time_limit(j, &p->in->config->queues[sv->queue]);
    return limit > 0 ? j->start_time + limit : INFINITY;
}

static int add_reservation(struct pass *p, const struct res_set *slots, double at)
{
    if (p->n_resv == p->cap_resv) {
        size_t cap = p->cap_resv ? 2 * p->cap_resv : 8;
        struct reservation *r = realloc(p->resv, cap * sizeof(*r));
        if (!r)
            return -ENOMEM;
        p->resv = r;
        p->cap_resv = cap;
    }
    p->resv[p->n_resv++] = (struct reservation){.slots = *slots, .at = at};
    return 0;
}

int reserve_if_starving(struct pass *p, size_t i)
{
    const struct job *j = p->in->jobs[i].job;
    double after = p->in->config->starve_after_s;
    if (after <= 0 || p->in->now - j->submit_time < after)
        return 0;
    _cleanup_free_ struct release *rel = malloc((p->in->n_jobs ? p->in->n_jobs : 1) * sizeof(*rel));
    if (!rel)
        return -ENOMEM;
    size_t n = 0;
    for (size_t v = 0; v < p->in->n_jobs; v++) {
        enum job_state s = p->in->jobs[v].job->state;
        if ((s == JOB_RUNNING || s == JOB_STOPPING) && !p->claimed[v])
            rel[n++] = (struct release){.at = release_time(p, v), .job = v};
    }
    qsort(rel, n, sizeof(*rel), cmp_release);
    struct res_set avail = p->free;
    for (size_t k = 0; k < p->n_resv; k++)
        res_set_minus(&avail, &p->resv[k].slots);
    struct res_set got;
    for (size_t k = 0; k <= n; k++) {
        if (res_pick(p->in->node, &avail, &j->spec.res, &got)) {
            double at = k == 0 ? p->in->now : rel[k - 1].at;
            p->reasons[i] = "Reserved";
            p->reserved_at[i] = at;
            return add_reservation(p, &got, at);
        }
        if (k < n) {
            const struct job *v = p->in->jobs[rel[k].job].job;
            struct res_set s = {{v->slots[0], v->slots[1]}};
            res_set_union(&avail, &s);
        }
    }
    p->reasons[i] = "Resources";
    return 0;
}
