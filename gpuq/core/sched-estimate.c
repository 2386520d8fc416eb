/* Estimated start times for `gpuq ls` (see sched_estimate in sched.h): pending jobs laid out in
 * scheduling order on the slots as they come free. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "gpuq/core/sched.h"
#include "lib/macro.h"

/* The k-th smallest free time among the slots job r could use; INFINITY when fewer exist. The
 * chosen slots are returned in *ret. */
static double earliest(const struct res_node *node, const double *free_at,
                       const struct job_resources *r, struct res_set *ret)
{
    ret->w[0] = ret->w[1] = 0;
    unsigned want = r->gpu_kind == JOB_GPU_NONE ? 0 : r->gpus;
    double t = 0;
    for (unsigned n = 0; n < want; n++) {
        int best = -1;
        for (unsigned i = 0; i < node->n_slots; i++)
            if (!res_set_has(ret, i) && res_slot_matches(&node->slots[i], r) &&
                (best < 0 || free_at[i] < free_at[best]))
                best = (int)i;
        if (best < 0)
            return INFINITY;
        res_set_add(ret, (unsigned)best);
        if (free_at[best] > t)
            t = free_at[best];
    }
    return t;
}

int sched_estimate(const struct sched_input *in, size_t max_jobs, double *ret_start)
{
    double free_at[RES_MAX_SLOTS];
    for (unsigned i = 0; i < RES_MAX_SLOTS; i++)
        free_at[i] = in->now;
    for (size_t k = 0; k < in->n_jobs; k++) {
        const struct job *j = in->jobs[k].job;
        ret_start[k] = 0;
        if (j->state != JOB_RUNNING && j->state != JOB_STOPPING)
            continue;
        double limit = sched_time_limit(j, &in->config->queues[in->jobs[k].queue]);
        double end = j->state == JOB_STOPPING ? j->stop_deadline
                     : limit > 0              ? j->start_time + limit
                                              : INFINITY;
        for (unsigned i = 0; i < in->node->n_slots; i++)
            if (res_set_has(&(struct res_set){{j->slots[0], j->slots[1]}}, i))
                free_at[i] = end;
    }
    _cleanup_free_ size_t *order = NULL;
    size_t n = 0;
    int r = sched_order(in, &order, &n);
    if (r < 0)
        return r;
    for (size_t k = 0; k < n; k++) {
        size_t i = order[k];
        const struct job *j = in->jobs[i].job;
        if (k >= max_jobs || j->held || in->drained || !res_node_can_hold(in->node, &j->spec.res)) {
            ret_start[i] = INFINITY;
            continue;
        }
        struct res_set got;
        double t = earliest(in->node, free_at, &j->spec.res, &got);
        if (t < in->now)
            t = in->now;
        if (j->eligible_time > t)
            t = j->eligible_time;
        ret_start[i] = t;
        double limit = sched_time_limit(j, &in->config->queues[in->jobs[i].queue]);
        for (unsigned s = 0; s < in->node->n_slots; s++)
            if (res_set_has(&got, s))
                free_at[s] = limit > 0 && isfinite(t) ? t + limit : INFINITY;
    }
    return 0;
}
