/* Profiling fields of one GPU (DCGM_FI_PROF_*): its GPM reader (gpm.h), or, in MIG mode, one per
 * GPU instance, as DCGM reads them; and why there are none where the GPU cannot give them.
 *
 * Used by the fast thread only; a MIG re-partition (slow thread, under the model's write lock)
 * calls prof_done(), so that no reader computes over an interval that spans the change. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpm.h"
#include "lib/gpu.h"
#include "snapshot.h"

/* GPU instance ids NVML hands out are small (at most 7 instances, ids below 15). */
#define PROF_MAX_GI 16

struct prof {
    bool unsupported; /* GPM said no (or the driver lacks it): not asked again until a reprobe */
    char reason[PROF_REASON_MAX];
    struct gpm *gpu;
    struct gpm *gi[PROF_MAX_GI];
};

/* Reads the profiling fields of g into out (its values, or those of out->mig[], which
 * must be filled already), or puts the reason there are none into out->prof_reason. A failed
 * read (not "unsupported") counts in *errors and shows nothing this pass. */
void prof_read(struct prof *p, const struct nvml_api *api, const struct gpu *g,
               struct gpu_sample *out, atomic_uint_fast64_t *errors);

/* Asks again, from the next read, whether the GPU gives profiling fields (every rescan, as for
 * the fields a GPU answered NOT_SUPPORTED). */
void prof_reprobe(struct prof *p);

/* Frees everything p holds (before NVML closes) and zeroes it. */
void prof_done(struct prof *p);
