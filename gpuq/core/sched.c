/* One scheduling pass (see sched.h). */
#include "gpuq/core/sched.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq/core/sched-internal.h"
#include "lib/macro.h"

double sched_time_limit(const struct job *j, const struct queue *q)
{
    double t = j->spec.time_limit_s > 0 ? j->spec.time_limit_s : q->default_time_s;
    if (q->max_time_s > 0 && (t <= 0 || t > q->max_time_s))
        t = q->max_time_s;
    return t;
}

/* ---- the pass's working state ---- */

static int state_init(struct pass *p, const struct sched_input *in)
{
    memset(p, 0, sizeof(*p));
    p->in = in;
    p->free.w[0] = p->free.w[1] = 0;
    for (unsigned i = 0; i < in->node->n_slots; i++)
        res_set_add(&p->free, i);
    p->cpu_free = in->node->cpu_milli ? (int64_t)in->node->cpu_milli : INT64_MAX;
    p->mem_free = in->node->mem_bytes ? (int64_t)in->node->mem_bytes : INT64_MAX;
    p->ledger = calloc(in->config->n_queues ? in->config->n_queues : 1, sizeof(*p->ledger));
    p->stopping = calloc(in->n_jobs ? in->n_jobs : 1, sizeof(*p->stopping));
    p->borrowing = calloc(in->n_jobs ? in->n_jobs : 1, sizeof(*p->borrowing));
    p->victim = calloc(in->n_jobs ? in->n_jobs : 1, sizeof(*p->victim));
    p->claimed = calloc(in->n_jobs ? in->n_jobs : 1, sizeof(*p->claimed));
    if (!p->ledger || !p->stopping || !p->borrowing || !p->victim || !p->claimed)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < in->n_jobs; i++)
        n += in->jobs[i].job->state == JOB_RUNNING || in->jobs[i].job->state == JOB_STOPPING;
    p->running = malloc((n ? n : 1) * sizeof(*p->running));
    p->scratch = malloc((n ? n : 1) * sizeof(*p->scratch));
    p->rel = malloc((n ? n : 1) * sizeof(*p->rel));
    if (!p->running || !p->scratch || !p->rel)
        return -ENOMEM;
    for (size_t i = 0; i < in->n_jobs; i++)
        if (in->jobs[i].job->state == JOB_RUNNING || in->jobs[i].job->state == JOB_STOPPING)
            p->running[p->n_running++] = i;
    return 0;
}

static void state_done(struct pass *p)
{
    free(p->ledger);
    free(p->stopping);
    free(p->borrowing);
    free(p->victim);
    free(p->claimed);
    free(p->users);
    free(p->resv);
    free(p->running);
    free(p->scratch);
    free(p->rel);
}

/* Takes what a running or stopping job holds out of the free capacity and into the ledgers. */
static int hold(struct pass *p, size_t i, const struct res_set *slots)
{
    const struct sched_job *sj = &p->in->jobs[i];
    res_set_minus(&p->free, slots);
    p->cpu_free -= sj->job->spec.res.cpu_milli;
    p->mem_free -= (int64_t)sj->job->spec.res.mem_bytes;
    return ledger_add(p, sj, slots, +1);
}

static int account_running(struct pass *p)
{
    for (size_t k = 0; k < p->n_running; k++) {
        size_t i = p->running[k];
        const struct job *j = p->in->jobs[i].job;
        struct res_set s = {{j->slots[0], j->slots[1]}};
        int r = hold(p, i, &s);
        if (r < 0)
            return r;
        p->stopping[i] = j->state == JOB_STOPPING;
    }
    return 0;
}

/* ---- borrowers ---- */

static int cmp_start(const void *a, const void *b, void *ud)
{
    const struct sched_input *in = ud;
    const struct job *x = in->jobs[*(const size_t *)a].job, *y = in->jobs[*(const size_t *)b].job;
    if (x->start_time != y->start_time)
        return x->start_time < y->start_time ? -1 : 1;
    return x->id < y->id ? -1 : x->id > y->id;
}

int sched_borrowers(const struct sched_input *in, bool *borrowing)
{
    _cleanup_free_ size_t *idx = calloc(in->n_jobs ? in->n_jobs : 1, sizeof(*idx));
    _cleanup_free_ uint64_t(*used)[QUOTA_MAX] =
        calloc(in->config->n_queues ? in->config->n_queues : 1, sizeof(*used));
    if (!idx || !used)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < in->n_jobs; i++) {
        borrowing[i] = false;
        const struct job *j = in->jobs[i].job;
        if (j->state == JOB_RUNNING || j->state == JOB_STOPPING)
            idx[n++] = i;
    }
    qsort_r(idx, n, sizeof(*idx), cmp_start, (void *)in);
    for (size_t k = 0; k < n; k++) {
        const struct sched_job *sj = &in->jobs[idx[k]];
        const struct queue *q = &in->config->queues[sj->queue];
        struct res_set s = {{sj->job->slots[0], sj->job->slots[1]}};
        const struct quota *quota = &in->quotas[sj->queue];
        bool over = !quota_fits(in->node, quota, used[sj->queue], &sj->job->spec.res, &s);
        quota_charge(in->node, quota, used[sj->queue], &sj->job->spec.res, &s, +1);
        borrowing[idx[k]] =
            q->class == SERVICE_BESTEFFORT || (q->class == SERVICE_BURSTABLE && over);
    }
    return 0;
}

/* ---- order ---- */

static int cmp_pending(const void *a, const void *b, void *ud)
{
    const struct sched_input *in = ud;
    const struct sched_job *x = &in->jobs[*(const size_t *)a], *y = &in->jobs[*(const size_t *)b];
    const struct job *jx = x->job, *jy = y->job;
    int qx = in->config->queues[x->queue].priority, qy = in->config->queues[y->queue].priority;
    if (jx->spec.interactive != jy->spec.interactive)
        return jx->spec.interactive ? -1 : 1;
    if (qx != qy)
        return qx > qy ? -1 : 1;
    if (jx->priority != jy->priority)
        return jx->priority > jy->priority ? -1 : 1;
    if ((jx->requeue_time > 0) != (jy->requeue_time > 0))
        return jx->requeue_time > 0 ? -1 : 1;
    if (x->queue == y->queue && x->usage != y->usage)
        return x->usage < y->usage ? -1 : 1;
    if (jx->submit_time != jy->submit_time)
        return jx->submit_time < jy->submit_time ? -1 : 1;
    return jx->id < jy->id ? -1 : jx->id > jy->id;
}

int sched_order(const struct sched_input *in, size_t **ret, size_t *ret_n)
{
    size_t *idx = malloc((in->n_jobs ? in->n_jobs : 1) * sizeof(*idx));
    if (!idx)
        return -ENOMEM;
    size_t n = 0;
    for (size_t i = 0; i < in->n_jobs; i++)
        if (in->jobs[i].job->state == JOB_PENDING)
            idx[n++] = i;
    qsort_r(idx, n, sizeof(*idx), cmp_pending, (void *)in);
    *ret = idx;
    *ret_n = n;
    return 0;
}

/* ---- the pass ---- */

int add_action(struct pass *p, enum sched_action_kind kind, size_t job, size_t for_job,
               const struct res_set *slots)
{
    if (p->n_actions == p->cap_actions) {
        size_t cap = p->cap_actions ? 2 * p->cap_actions : 16;
        struct sched_action *a = realloc(p->actions, cap * sizeof(*a));
        if (!a)
            return -ENOMEM;
        p->actions = a;
        p->cap_actions = cap;
    }
    p->actions[p->n_actions++] =
        (struct sched_action){.kind = kind, .job = job, .for_job = for_job, .slots = *slots};
    return 0;
}

/* Why a pending job cannot even be considered now; NULL when it can. */
static const char *ineligible(const struct pass *p, const struct job *j)
{
    if (j->held)
        return "JobHeldUser";
    if (p->in->drained)
        return "Drained";
    if (j->eligible_time > p->in->now)
        return "BackOff";
    if (!res_node_can_hold(p->in->node, &j->spec.res))
        return "NeverFits";
    return NULL;
}

static int start(struct pass *p, size_t i, const struct res_set *slots)
{
    int r = hold(p, i, slots);
    if (r < 0)
        return r;
    p->reasons[i] = "";
    return add_action(p, SCHED_START, i, i, slots);
}

/* Tries to place one pending job; sets its reason when it must wait. */
static int place(struct pass *p, size_t i)
{
    const struct sched_job *sj = &p->in->jobs[i];
    const struct job *j = sj->job;
    const struct queue *q = &p->in->config->queues[sj->queue];
    const char *why = ineligible(p, j);
    if (why) {
        p->reasons[i] = why;
        return 0;
    }
    if (!user_fits(p, sj)) {
        p->reasons[i] = "UserLimit";
        return 0;
    }
    struct res_set slots;
    if (pick_now(p, sj, &slots)) {
        bool within = queue_fits(p, sj, &slots);
        if (within || q->class != SERVICE_GUARANTEED)
            return start(p, i, &slots);
        p->reasons[i] = "QuotaExceeded";
        return 0;
    }
    /* It does not fit now. Guaranteed jobs beyond quota wait for their own queue. */
    bool within = queue_fits(p, sj, NULL);
    if (!within && q->class == SERVICE_GUARANTEED) {
        p->reasons[i] = "QuotaExceeded";
        return 0;
    }
    int r = preempt_for(p, i, within);
    if (r != 0)
        return r < 0 ? r : 0;
    r = reserve_if_starving(p, i);
    /* Slurm's words: the first job that waits for capacity waits for "Resources", those after
     * it for "Priority" (a job ahead of them comes first). */
    if (r == 0 && strcmp(p->reasons[i], "Priority") == 0 && !p->blocked)
        p->reasons[i] = "Resources";
    p->blocked = true;
    return r;
}

static int run_pass(struct pass *p)
{
    int r = account_running(p);
    if (r < 0)
        return r;
    r = sched_borrowers(p->in, p->borrowing);
    if (r < 0)
        return r;
    _cleanup_free_ size_t *order = NULL;
    size_t n = 0;
    r = sched_order(p->in, &order, &n);
    if (r < 0)
        return r;
    for (size_t k = 0; k < n; k++) {
        p->reasons[order[k]] = "Priority";
        r = place(p, order[k]);
        if (r < 0)
            return r;
    }
    return 0;
}

int sched_pass(const struct sched_input *in, struct sched_result *ret)
{
    struct pass p;
    int r = state_init(&p, in);
    const char **reasons = calloc(in->n_jobs ? in->n_jobs : 1, sizeof(*reasons));
    double *reserved_at = calloc(in->n_jobs ? in->n_jobs : 1, sizeof(*reserved_at));
    if (r == 0 && (!reasons || !reserved_at))
        r = -ENOMEM;
    for (size_t i = 0; r == 0 && i < in->n_jobs; i++)
        reasons[i] = "";
    p.reasons = reasons;
    p.reserved_at = reserved_at;
    if (r == 0)
        r = run_pass(&p);
    state_done(&p);
    if (r < 0) {
        free(p.actions);
        free(reasons);
        free(reserved_at);
        return r;
    }
    *ret = (struct sched_result){.actions = p.actions,
                                 .n_actions = p.n_actions,
                                 .reasons = reasons,
                                 .reserved_at = reserved_at};
    return 0;
}

void sched_result_done(struct sched_result *r)
{
    free(r->actions);
    free(r->reasons);
    free(r->reserved_at);
    memset(r, 0, sizeof(*r));
}
