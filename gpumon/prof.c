/* Profiling fields of one GPU; see prof.h. */
#include "prof.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "lib/log.h"

/* Makes the reader *slot when there is none yet. False when there is none to read now: GPM is
 * unsupported (remembered with its reason) or the driver failed (counted). */
static bool ensure(struct prof *p, const struct nvml_api *api, nvmlDevice_t dev, unsigned gi,
                   struct gpm **slot, atomic_uint_fast64_t *errors)
{
    if (*slot)
        return true;
    struct errmsg e = {""};
    int r = gpm_new(api, dev, gi, slot, &e);
    if (r == -EOPNOTSUPP) {
        p->unsupported = true;
        snprintf(p->reason, sizeof(p->reason), "%.*s", (int)sizeof(p->reason) - 1, e.text);
        return false;
    }
    if (r < 0) {
        atomic_fetch_add(errors, 1);
        log_debug("GPM: %s", e.text);
        return false;
    }
    return true;
}

/* A sample the driver refuses (NOT_SUPPORTED: it said yes to GPM but samples nothing here) is
 * a GPU without profiling fields, told by its reason, not a failing call in every pass. */
static void read_one(struct prof *p, struct gpm *g, struct gpu_values *v,
                     atomic_uint_fast64_t *errors)
{
    struct errmsg e = {""};
    int r = gpm_read(g, v, &e);
    if (r == -EOPNOTSUPP) {
        p->unsupported = true;
        snprintf(p->reason, sizeof(p->reason), "%.*s", (int)sizeof(p->reason) - 1, e.text);
    } else if (r < 0) {
        atomic_fetch_add(errors, 1);
        log_debug("GPM: %s", e.text);
    }
}

/* DCGM reads a GPU in MIG mode by GPU instance; compute instances of one share its values,
 * which go to the first of them (the one the exposition shows). */
static void read_instances(struct prof *p, const struct nvml_api *api, const struct gpu *g,
                           struct gpu_sample *out, atomic_uint_fast64_t *errors)
{
    for (unsigned j = 0; j < out->n_mig && !p->unsupported; j++) {
        unsigned gi = out->mig[j].id.gi_id;
        if (gi >= PROF_MAX_GI || (j > 0 && out->mig[j - 1].id.gi_id == gi))
            continue;
        if (ensure(p, api, g->handle, gi, &p->gi[gi], errors))
            read_one(p, p->gi[gi], &out->mig[j].values, errors);
    }
}

void prof_read(struct prof *p, const struct nvml_api *api, const struct gpu *g,
               struct gpu_sample *out, atomic_uint_fast64_t *errors)
{
    if (!p->unsupported) {
        if (out->n_mig > 0)
            read_instances(p, api, g, out, errors);
        else if (ensure(p, api, g->handle, NVML_INSTANCE_ID_NONE, &p->gpu, errors))
            read_one(p, p->gpu, &out->values, errors);
    }
    if (p->unsupported)
        memcpy(out->prof_reason, p->reason, sizeof(out->prof_reason));
}

void prof_reprobe(struct prof *p)
{
    p->unsupported = false;
}

void prof_done(struct prof *p)
{
    for (unsigned i = 0; i < PROF_MAX_GI; i++)
        gpm_free(p->gi[i]);
    gpm_free(p->gpu);
    memset(p, 0, sizeof(*p));
}
