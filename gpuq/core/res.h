/* A node's resources as the scheduler hands them out: one slot per whole GPU (a GPU not in MIG
 * mode) and one per MIG instance, plus CPUs and memory. Built once from the GPU model in lib/
 * (lib/gpu.h) and immutable after. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "gpuq/core/job.h"
#include "lib/errmsg.h"

#define RES_MAX_SLOTS 128 /* 8 GPUs x 7 MIG instances fit with room; two 64-bit words */
#define RES_UUID_MAX  96

struct res_slot {
    unsigned gpu_index; /* NVML index of the GPU (of the parent, for MIG) */
    bool mig;
    char model[96];                /* the GPU's NVML name, "NVIDIA H100 80GB HBM3" */
    char profile[JOB_PROFILE_MAX]; /* MIG: "1g.10gb" */
    char uuid[RES_UUID_MAX];       /* "GPU-…" or "MIG-…": what CUDA_VISIBLE_DEVICES names */
};

struct res_node {
    unsigned n_slots;
    struct res_slot slots[RES_MAX_SLOTS];
    unsigned cpu_milli; /* CPUs online, in thousandths */
    uint64_t mem_bytes; /* physical memory */
};

/* A set of slots. */
struct res_set {
    uint64_t w[2];
};

static inline bool res_set_has(const struct res_set *s, unsigned i)
{
    return (s->w[i / 64] >> (i % 64)) & 1;
}
static inline void res_set_add(struct res_set *s, unsigned i)
{
    s->w[i / 64] |= UINT64_C(1) << (i % 64);
}
static inline void res_set_union(struct res_set *s, const struct res_set *o)
{
    s->w[0] |= o->w[0];
    s->w[1] |= o->w[1];
}
static inline void res_set_minus(struct res_set *s, const struct res_set *o)
{
    s->w[0] &= ~o->w[0];
    s->w[1] &= ~o->w[1];
}
static inline bool res_set_empty(const struct res_set *s)
{
    return !s->w[0] && !s->w[1];
}
unsigned res_set_count(const struct res_set *s);

struct gpu_list;
/* Fills node from the GPU model: GPUs in index order, each whole GPU not in MIG mode one slot,
 * each MIG instance of a GPU in MIG mode one slot (a GPU in MIG mode offers no whole slot); GPUs
 * that could not be read are left out. cpu_milli and mem_bytes are the caller's. Returns 0 or
 * -E2BIG past RES_MAX_SLOTS (message says how many). */
int res_node_from_gpus(struct res_node *node, const struct gpu_list *gpus, struct errmsg *e);

/* Whether the node could ever hold r (enough slots of that kind, CPUs, memory): a job that asks
 * for more can never start, and is refused at submit. */
bool res_node_can_hold(const struct res_node *node, const struct job_resources *r);

/* Whether slot s is of the kind r asks for (whole GPU of its model, or MIG of its profile). */
bool res_slot_matches(const struct res_slot *s, const struct job_resources *r);

/* Picks the slots for r out of free: the lowest-indexed matching ones. Returns true and *ret
 * when enough are free. CPUs and memory are not slots; the caller checks those. */
bool res_pick(const struct res_node *node, const struct res_set *free,
              const struct job_resources *r, struct res_set *ret);

/* The UUIDs of the slots in set, in slot order (NVML index, then MIG instance), joined by ',':
 * CUDA_VISIBLE_DEVICES. Returns buf, or NULL when it does not fit. */
char *res_uuids(const struct res_node *node, const struct res_set *set, char *buf, unsigned size);
