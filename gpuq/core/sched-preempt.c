/* Preemption: the fewest, cheapest victims that make room for a job (rules in sched.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq/core/sched-internal.h"
#include "lib/macro.h"

/* A pool of capacity: free slots plus those of the jobs taken into it. */
struct pool {
    struct res_set slots;
    int64_t cpu, mem;
};

static void pool_take(const struct pass *p, struct pool *pool, size_t j, int sign)
{
    const struct job *job = p->in->jobs[j].job;
    struct res_set s = {{job->slots[0], job->slots[1]}};
    if (sign > 0)
        res_set_union(&pool->slots, &s);
    else
        res_set_minus(&pool->slots, &s);
    pool->cpu += sign * (int64_t)job->spec.res.cpu_milli;
    pool->mem += sign * (int64_t)job->spec.res.mem_bytes;
}

static bool pool_fits(const struct pass *p, const struct pool *pool, const struct job *j)
{
    struct res_set got;
    return pool->cpu >= (int64_t)j->spec.res.cpu_milli &&
           pool->mem >= (int64_t)j->spec.res.mem_bytes &&
           res_pick(p->in->node, &pool->slots, &j->spec.res, &got);
}

/* Free slots that no reservation holds: preemption makes room on those only. */
static struct pool base_pool(const struct pass *p)
{
    struct pool pool = {.slots = p->free, .cpu = p->cpu_free, .mem = p->mem_free};
    for (size_t k = 0; k < p->n_resv; k++)
        res_set_minus(&pool.slots, &p->resv[k].slots);
    return pool;
}

static bool may_preempt(const struct pass *p, size_t v, size_t i, bool within)
{
    const struct sched_job *sv = &p->in->jobs[v], *si = &p->in->jobs[i];
    const struct queue *qv = &p->in->config->queues[sv->queue];
    const struct queue *qi = &p->in->config->queues[si->queue];
    if (sv->job->state != JOB_RUNNING || p->victim[v] || qv->class == SERVICE_GUARANTEED)
        return false;
    if (p->in->now - sv->job->start_time < qv->min_runtime_s)
        return false;
    if (!within)
        return qv->class == SERVICE_BESTEFFORT && qv->priority < qi->priority;
    if (p->borrowing[v])
        return true;
    return sv->queue == si->queue && sv->job->priority < si->job->priority;
}

static int victim_rank(const struct pass *p, size_t v)
{
    const struct queue *q = &p->in->config->queues[p->in->jobs[v].queue];
    if (q->class == SERVICE_BESTEFFORT)
        return 0;
    return p->borrowing[v] ? 1 : 2;
}

/* Work a victim loses: the time since its last checkpoint (or its start). */
static double lost_work(const struct pass *p, size_t v)
{
    const struct job *j = p->in->jobs[v].job;
    double since = j->last_checkpoint > j->start_time ? j->last_checkpoint : j->start_time;
    return p->in->now - since;
}

static int cmp_victims(const void *a, const void *b, void *ud)
{
    const struct pass *p = ud;
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    int rx = victim_rank(p, x), ry = victim_rank(p, y);
    if (rx != ry)
        return rx < ry ? -1 : 1;
    const struct sched_job *sx = &p->in->jobs[x], *sy = &p->in->jobs[y];
    int qx = p->in->config->queues[sx->queue].priority,
        qy = p->in->config->queues[sy->queue].priority;
    if (qx != qy)
        return qx < qy ? -1 : 1;
    if (sx->job->priority != sy->job->priority)
        return sx->job->priority < sy->job->priority ? -1 : 1;
    double lx = lost_work(p, x), ly = lost_work(p, y);
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return sx->job->start_time > sy->job->start_time ? -1 : 1;
}

/* Greedily adds candidates (in order) to pool until job i fits, then drops every one that is not
 * needed, last added first. Returns how many are kept (moved to the front of cand), or 0. */
static size_t choose(const struct pass *p, struct pool start, size_t *cand, size_t n, size_t i)
{
    const struct job *j = p->in->jobs[i].job;
    struct pool *pool = &start;
    size_t used = 0;
    while (!pool_fits(p, pool, j)) {
        if (used == n)
            return 0;
        pool_take(p, pool, cand[used++], +1);
    }
    size_t kept = 0;
    for (size_t k = used; k-- > 0;) {
        pool_take(p, pool, cand[k], -1);
        if (pool_fits(p, pool, j))
            cand[k] = SIZE_MAX;
        else
            pool_take(p, pool, cand[k], +1);
    }
    for (size_t k = 0; k < used; k++)
        if (cand[k] != SIZE_MAX)
            cand[kept++] = cand[k];
    return kept;
}

/* Stopping jobs whose capacity nobody waits for yet (stopping), or the jobs job i may preempt,
 * into cand. Only running and stopping jobs can be either. */
static size_t collect(const struct pass *p, size_t i, bool within, bool stopping, size_t *cand)
{
    size_t n = 0;
    for (size_t k = 0; k < p->n_running; k++) {
        size_t v = p->running[k];
        if (stopping ? (p->stopping[v] && !p->claimed[v]) : may_preempt(p, v, i, within))
            cand[n++] = v;
    }
    return n;
}

int preempt_for(struct pass *p, size_t i, bool within)
{
    const struct queue *q = &p->in->config->queues[p->in->jobs[i].queue];
    if (q->class == SERVICE_BESTEFFORT)
        return 0;
    size_t *cand = p->scratch;
    struct pool pool = base_pool(p);
    size_t n = collect(p, i, within, true, cand);
    size_t kept = choose(p, pool, cand, n, i);
    if (kept > 0) {
        for (size_t k = 0; k < kept; k++)
            p->claimed[cand[k]] = true;
        p->reasons[i] = "Preempting";
        return 1;
    }
    /* Every unclaimed stopping job in the pool, then the fewest victims on top. */
    for (size_t k = 0; k < n; k++)
        pool_take(p, &pool, cand[k], +1);
    size_t n_stopping = n;
    _cleanup_free_ size_t *stopping = malloc((n ? n : 1) * sizeof(*stopping));
    if (!stopping)
        return -ENOMEM;
    memcpy(stopping, cand, n * sizeof(*cand));
    n = collect(p, i, within, false, cand);
    qsort_r(cand, n, sizeof(*cand), cmp_victims, p);
    kept = choose(p, pool, cand, n, i);
    if (kept == 0)
        return 0;
    for (size_t k = 0; k < n_stopping; k++)
        p->claimed[stopping[k]] = true;
    for (size_t k = 0; k < kept; k++) {
        const struct job *v = p->in->jobs[cand[k]].job;
        struct res_set s = {{v->slots[0], v->slots[1]}};
        p->victim[cand[k]] = p->claimed[cand[k]] = true;
        int r = add_action(p, SCHED_PREEMPT, cand[k], i, &s);
        if (r < 0)
            return r;
    }
    p->reasons[i] = "Preempting";
    return 1;
}
