/* Quota ledgers of a scheduling pass: what each queue and each user in it holds, against the
 * limits in effect. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq/core/sched-internal.h"

static uint64_t slots_matching(const struct res_node *node, const struct res_set *slots,
                               const struct quota_limit *l)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < node->n_slots; i++) {
        if (!res_set_has(slots, i))
            continue;
        const struct res_slot *s = &node->slots[i];
        if (l->kind == QUOTA_GPUS)
            n += !s->mig;
        else if (l->kind == QUOTA_GPU_MODEL)
            n += !s->mig && quota_model_matches(s->model, l->what);
        else if (l->kind == QUOTA_MIG)
            n += s->mig && strcmp(s->profile, l->what) == 0;
    }
    return n;
}

uint64_t quota_amount(const struct res_node *node, const struct quota_limit *l,
                      const struct job_resources *r, const struct res_set *slots)
{
    switch (l->kind) {
    case QUOTA_CPUS:
        return r->cpu_milli;
    case QUOTA_MEMORY:
        return r->mem_bytes;
    case QUOTA_JOBS:
        return 1;
    case QUOTA_GPUS:
    case QUOTA_GPU_MODEL:
    case QUOTA_MIG:
        break;
    }
    if (slots)
        return slots_matching(node, slots, l);
    if (l->kind == QUOTA_GPUS)
        return r->gpu_kind == JOB_GPU_WHOLE ? r->gpus : 0;
    if (l->kind == QUOTA_GPU_MODEL)
        return r->gpu_kind == JOB_GPU_WHOLE && r->model[0] && quota_model_matches(r->model, l->what)
                   ? r->gpus
                   : 0;
    return r->gpu_kind == JOB_GPU_MIG && strcmp(r->profile, l->what) == 0 ? r->gpus : 0;
}

bool quota_fits(const struct res_node *node, const struct quota *quota, const uint64_t *used,
                const struct job_resources *r, const struct res_set *slots)
{
    for (unsigned k = 0; k < quota->n; k++) {
        uint64_t want = quota_amount(node, &quota->l[k], r, slots);
        if (want && used[k] + want > quota->l[k].limit)
            return false;
    }
    return true;
}

void quota_charge(const struct res_node *node, const struct quota *quota, uint64_t *used,
                  const struct job_resources *r, const struct res_set *slots, int sign)
{
    for (unsigned k = 0; k < quota->n; k++) {
        uint64_t a = quota_amount(node, &quota->l[k], r, slots);
        used[k] = sign > 0 ? used[k] + a : (used[k] > a ? used[k] - a : 0);
    }
}

static struct user_ledger *user_ledger(struct pass *p, unsigned queue, uid_t uid, bool add)
{
    for (size_t k = 0; k < p->n_users; k++)
        if (p->users[k].queue == queue && p->users[k].uid == uid)
            return &p->users[k];
    if (!add)
        return NULL;
    if (p->n_users == p->cap_users) {
        size_t cap = p->cap_users ? 2 * p->cap_users : 16;
        struct user_ledger *u = realloc(p->users, cap * sizeof(*u));
        if (!u)
            return NULL;
        p->users = u;
        p->cap_users = cap;
    }
    struct user_ledger *u = &p->users[p->n_users++];
    memset(u, 0, sizeof(*u));
    u->queue = queue;
    u->uid = uid;
    return u;
}

int ledger_add(struct pass *p, const struct sched_job *sj, const struct res_set *slots, int sign)
{
    const struct res_node *node = p->in->node;
    const struct job_resources *r = &sj->job->spec.res;
    quota_charge(node, &p->in->quotas[sj->queue], p->ledger[sj->queue], r, slots, sign);
    const struct quota *ul = &p->in->config->queues[sj->queue].user_limit;
    if (ul->n == 0)
        return 0;
    struct user_ledger *u = user_ledger(p, sj->queue, sj->job->uid, true);
    if (!u)
        return -ENOMEM;
    quota_charge(node, ul, u->used, r, slots, sign);
    return 0;
}

bool queue_fits(const struct pass *p, const struct sched_job *sj, const struct res_set *slots)
{
    return quota_fits(p->in->node, &p->in->quotas[sj->queue], p->ledger[sj->queue],
                      &sj->job->spec.res, slots);
}

bool user_fits(struct pass *p, const struct sched_job *sj)
{
    const struct quota *ul = &p->in->config->queues[sj->queue].user_limit;
    if (ul->n == 0)
        return true;
    static const uint64_t none[QUOTA_MAX];
    struct user_ledger *u = user_ledger(p, sj->queue, sj->job->uid, false);
    return quota_fits(p->in->node, ul, u ? u->used : none, &sj->job->spec.res, NULL);
}

void sched_quota_charge(const struct res_node *node, const struct quota *quota, uint64_t *used,
                        const struct job_resources *r, const struct res_set *slots)
{
    quota_charge(node, quota, used, r, slots, +1);
}
