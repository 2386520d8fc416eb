/* GPU Performance Monitoring (GPM): the profiling metrics of one GPU or one MIG GPU instance,
 * read through NVML as dcgm-exporter's DCGM_FI_PROF_* fields.
 *
 * GPM needs Hopper or newer and a driver with the GPM API (R525 on). It works on two samples:
 * each gpm_read() takes a new one and computes the metrics over the interval since the one
 * before, so the values are averages over the sampling interval. NVIDIA asks for samples more
 * than 100 ms apart; a caller reading more often gets the driver's answer for that interval.
 *
 * A struct gpm belongs to one thread at a time; it borrows api, which must outlive it. */
#pragma once

#include "lib/errmsg.h"
#include "lib/macro.h"
#include "lib/nvml-api.h"
#include "snapshot.h" /* struct gpu_values, enum gpu_field with GF_PROF_* */

struct gpm;

/* Checks GPM support of dev (nvmlGpmQueryDeviceSupport) and allocates two samples. gi_id is
 * NVML_INSTANCE_ID_NONE for the whole GPU, else the MIG GPU instance id (dev is then the PARENT
 * GPU handle, as nvmlGpmMigSampleGet takes it). Returns 0 and *ret; -EOPNOTSUPP with the reason
 * in e when the driver lacks the API or the GPU does not support GPM (e.g. "GPM is not supported
 * on this GPU (Hopper or newer needed)"); other -errno with a message (nvml_errno()'s mapping of
 * the driver's answer, -ENOMEM). Takes no sample yet. */
int gpm_new(const struct nvml_api *api, nvmlDevice_t dev, unsigned gi_id, struct gpm **ret,
            struct errmsg *e);

/* Takes a new sample; when a previous one exists, computes the metrics between the two and sets
 * the GF_PROF_* fields of v that the GPU reports, in dcgm-exporter's units (DCGM_FI_PROF_*:
 * ratios 0..1, bytes per second). The first call after gpm_new sets nothing. A metric the driver
 * does not report, or reports as NaN, negative or (for a ratio) above 100 %, is left unset;
 * only float noise at the ends of a range is rounded to it. A MIG instance gets no PCIe or NVLink
 * rates, which DCGM shows for whole GPUs only. Returns 0, or -errno with a message (the driver
 * failed; the fields are then left unset, and the next call measures from the last sample that
 * was taken). */
int gpm_read(struct gpm *g, struct gpu_values *v, struct errmsg *e);

/* Frees the samples and g. NULL is allowed. Call before the NVML library is closed. */
void gpm_free(struct gpm *g);
DEFINE_POINTER_CLEANUP(struct gpm, gpm_free)
