/* A node's slots (see res.h). */
#include "gpuq/core/res.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "gpuq/policy/quota.h"
#include "lib/gpu.h"

unsigned res_set_count(const struct res_set *s)
{
    return (unsigned)(__builtin_popcountll(s->w[0]) + __builtin_popcountll(s->w[1]));
}

static int add_slot(struct res_node *node, const struct gpu *g, const struct gpu_mig *m,
                    struct errmsg *e)
{
    if (node->n_slots >= RES_MAX_SLOTS)
        return errmsg_set(e, -E2BIG, "more than %u GPUs and MIG instances on this node",
                          RES_MAX_SLOTS);
    struct res_slot *s = &node->slots[node->n_slots++];
    memset(s, 0, sizeof(*s));
    s->gpu_index = g->index;
    s->mig = m != NULL;
    snprintf(s->model, sizeof(s->model), "%s", g->name);
    snprintf(s->uuid, sizeof(s->uuid), "%s", m ? m->uuid : g->uuid);
    if (m)
        snprintf(s->profile, sizeof(s->profile), "%s", m->profile);
    return 0;
}

int res_node_from_gpus(struct res_node *node, const struct gpu_list *gpus, struct errmsg *e)
{
    node->n_slots = 0;
    for (unsigned i = 0; i < gpus->n; i++) {
        const struct gpu *g = &gpus->gpus[i];
        if (g->error)
            continue;
        int r = 0;
        if (!g->mig_enabled)
            r = add_slot(node, g, NULL, e);
        for (unsigned k = 0; r == 0 && g->mig_enabled && k < g->n_mig; k++)
            r = add_slot(node, g, &g->mig[k], e);
        if (r < 0)
            return r;
    }
    return 0;
}

bool res_slot_matches(const struct res_slot *s, const struct job_resources *r)
{
    switch (r->gpu_kind) {
    case JOB_GPU_WHOLE:
        return !s->mig && (!r->model[0] || quota_model_matches(s->model, r->model));
    case JOB_GPU_MIG:
        return s->mig && strcmp(s->profile, r->profile) == 0;
    case JOB_GPU_NONE:
        break;
    }
    return false;
}

bool res_node_can_hold(const struct res_node *node, const struct job_resources *r)
{
    if ((node->cpu_milli && r->cpu_milli > node->cpu_milli) ||
        (node->mem_bytes && r->mem_bytes > node->mem_bytes))
        return false;
    if (r->gpu_kind == JOB_GPU_NONE || r->gpus == 0)
        return true;
    unsigned n = 0;
    for (unsigned i = 0; i < node->n_slots; i++)
        n += res_slot_matches(&node->slots[i], r);
    return n >= r->gpus;
}

bool res_pick(const struct res_node *node, const struct res_set *free,
              const struct job_resources *r, struct res_set *ret)
{
    struct res_set got = {{0, 0}};
    unsigned n = 0, want = r->gpu_kind == JOB_GPU_NONE ? 0 : r->gpus;
    for (unsigned i = 0; i < node->n_slots && n < want; i++)
        if (res_set_has(free, i) && res_slot_matches(&node->slots[i], r)) {
            res_set_add(&got, i);
            n++;
        }
    if (n < want)
        return false;
    *ret = got;
    return true;
}

char *res_uuids(const struct res_node *node, const struct res_set *set, char *buf, unsigned size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < node->n_slots; i++) {
        if (!res_set_has(set, i))
            continue;
        int n = snprintf(buf + used, size - used, "%s%s", used ? "," : "", node->slots[i].uuid);
        if (n < 0 || (size_t)n >= size - used)
            return NULL;
        used += (size_t)n;
    }
    return buf;
}
