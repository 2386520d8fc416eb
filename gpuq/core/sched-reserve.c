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
    /* Only GPUs are reserved: a job without any waits for CPUs or memory alone, which free
     * up as jobs end whatever is reserved. */
    if (after <= 0 || p->in->now - j->submit_time < after || j->spec.res.gpu_kind == JOB_GPU_NONE ||
        j->spec.res.gpus == 0)
        return 0;
    /* Reservations never share a slot (a simplification of Slurm's backfill, which lays them
     * out in time): so at most one per slot exists, and each is honoured. */
    struct res_set reserved = {{0, 0}}, unreserved = {{0, 0}};
    for (size_t k = 0; k < p->n_resv; k++)
        res_set_union(&reserved, &p->resv[k].slots);
    for (unsigned s = 0; s < p->in->node->n_slots; s++)
        res_set_add(&unreserved, s);
    res_set_minus(&unreserved, &reserved);
    struct res_set avail = p->free;
    res_set_minus(&avail, &reserved);
    struct res_set got;
    /* Every slot of its kind is reserved for jobs ahead: nothing to reserve, nothing to scan. */
    if (!res_pick(p->in->node, &unreserved, &j->spec.res, &got)) {
        p->reasons[i] = "Resources";
        return 0;
    }
    struct release *rel = p->rel;
    size_t n = 0;
    for (size_t k = 0; k < p->n_running; k++) {
        size_t v = p->running[k];
        if (!p->claimed[v])
            rel[n++] = (struct release){.at = release_time(p, v), .job = v};
    }
    qsort(rel, n, sizeof(*rel), cmp_release);
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
            res_set_minus(&avail, &reserved);
        }
    }
    p->reasons[i] = "Resources";
    return 0;
}
