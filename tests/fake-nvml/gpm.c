/* GPU Performance Monitoring: sample buffers, samples of a GPU or a MIG GPU instance, and the
 * metrics between two samples.
 *
 * The fixture gives each metric as the value the driver would compute over any interval (a
 * utilisation, a rate), so the values do not depend on when the samples were taken. What the
 * fake does check, as a real driver must, is that the two samples exist, were both filled, come
 * from the same GPU or GPU instance and were taken in order: a consumer that diffs a sample
 * against itself, or against nothing, gets an error here and not a plausible number.
 *
 * An old driver (FAKE_NVML_OLD) has none of this. */
#include <stdlib.h>
#include <string.h>

#include "fake-nvml.h"
#include "lib/macro.h"

/* The metrics a fixture can name, by NVIDIA's metric names without the prefix, lower case. */
static const struct {
    const char *name;
    unsigned id;
} metric_names[] = {
    {"graphics_util", NVML_GPM_METRIC_GRAPHICS_UTIL},
    {"sm_util", NVML_GPM_METRIC_SM_UTIL},
    {"sm_occupancy", NVML_GPM_METRIC_SM_OCCUPANCY},
    {"integer_util", NVML_GPM_METRIC_INTEGER_UTIL},
    {"any_tensor_util", NVML_GPM_METRIC_ANY_TENSOR_UTIL},
    {"dfma_tensor_util", NVML_GPM_METRIC_DFMA_TENSOR_UTIL},
    {"hmma_tensor_util", NVML_GPM_METRIC_HMMA_TENSOR_UTIL},
    {"imma_tensor_util", NVML_GPM_METRIC_IMMA_TENSOR_UTIL},
    {"dram_bw_util", NVML_GPM_METRIC_DRAM_BW_UTIL},
    {"fp64_util", NVML_GPM_METRIC_FP64_UTIL},
    {"fp32_util", NVML_GPM_METRIC_FP32_UTIL},
    {"fp16_util", NVML_GPM_METRIC_FP16_UTIL},
    {"pcie_tx_per_sec", NVML_GPM_METRIC_PCIE_TX_PER_SEC},
    {"pcie_rx_per_sec", NVML_GPM_METRIC_PCIE_RX_PER_SEC},
    {"nvdec_0_util", NVML_GPM_METRIC_NVDEC_0_UTIL},
    {"nvjpg_0_util", NVML_GPM_METRIC_NVJPG_0_UTIL},
    {"nvofa_0_util", NVML_GPM_METRIC_NVOFA_0_UTIL},
    {"nvlink_total_rx_per_sec", NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC},
    {"nvlink_total_tx_per_sec", NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC},
};

int fake_gpm_metric_from_name(const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(metric_names); i++)
        if (strcmp(metric_names[i].name, name) == 0)
            return (int)metric_names[i].id;
    return -1;
}

#ifndef FAKE_NVML_OLD

/* Whether id is one of NVIDIA's metric ids. Below 98 the header leaves gaps (8, 14..19, ...);
 * the ids from 98 to NVML_GPM_METRIC_MAX - 1 came with later drivers and are all assigned. */
static bool metric_id_valid(unsigned id)
{
    if (id == 0 || id >= NVML_GPM_METRIC_MAX)
        return false;
    if (id >= FAKE_GPM_IDS)
        return true;
    return id != 8 && !(id >= 14 && id <= 19) && !(id >= 22 && id <= 29) &&
           !(id >= 38 && id <= 39) && !(id >= 48 && id <= 49) && !(id >= 51 && id <= 59);
}

/* A sample buffer. The live ones form a list, so that a pointer NVML did not hand out (or one
 * already freed) is told apart from a real one. */
struct nvmlGpmSample_st {
    struct nvmlGpmSample_st *next;
    bool taken;
    unsigned gpu;           /* GPU index */
    unsigned gi;            /* NVML_INSTANCE_ID_NONE for the whole GPU */
    unsigned long long seq; /* order in which samples were taken */
    double at;              /* seconds since init */
};

/* Under fake_lock. */
static struct nvmlGpmSample_st *samples;
static unsigned long long last_seq;

static bool sample_live(const struct nvmlGpmSample_st *s)
{
    for (const struct nvmlGpmSample_st *p = samples; p; p = p->next)
        if (p == s)
            return true;
    return false;
}

nvmlReturn_t nvmlGpmSampleAlloc(nvmlGpmSample_t *gpmSample)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlGpmSampleAlloc, NULL, FAKE_SYSTEM, &c);
    if (r == NVML_SUCCESS && !gpmSample)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r != NVML_SUCCESS)
        return fake_end(r);
    struct nvmlGpmSample_st *s = calloc(1, sizeof(*s));
    if (!s)
        return fake_end(NVML_ERROR_MEMORY);
    s->next = samples;
    samples = s;
    *gpmSample = s;
    return fake_end(NVML_SUCCESS);
}

nvmlReturn_t nvmlGpmSampleFree(nvmlGpmSample_t gpmSample)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlGpmSampleFree, NULL, FAKE_SYSTEM, &c);
    if (r != NVML_SUCCESS)
        return fake_end(r);
    for (struct nvmlGpmSample_st **p = &samples; *p; p = &(*p)->next)
        if (*p == gpmSample) {
            *p = gpmSample->next;
            free(gpmSample);
            return fake_end(NVML_SUCCESS);
        }
    return fake_end(NVML_ERROR_INVALID_ARGUMENT);
}

static void take(struct nvmlGpmSample_st *s, const struct fake_ctx *c, unsigned gi)
{
    s->taken = true;
    s->gpu = c->index;
    s->gi = gi;
    s->seq = ++last_seq;
    s->at = c->now;
}

nvmlReturn_t nvmlGpmQueryDeviceSupport(nvmlDevice_t device, nvmlGpmSupport_t *gpmSupport)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlGpmQueryDeviceSupport, device, 0, &c);
    if (r == NVML_SUCCESS && !gpmSupport)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && gpmSupport->version != NVML_GPM_SUPPORT_VERSION)
        r = NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    /* Every GPU answers; those before Hopper with 0. */
    if (r == NVML_SUCCESS)
        gpmSupport->isSupportedDevice = c.gpu->gpm_supported;
    return fake_end(r);
}

nvmlReturn_t nvmlGpmSampleGet(nvmlDevice_t device, nvmlGpmSample_t gpmSample)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlGpmSampleGet, device, 0, &c);
    if (r == NVML_SUCCESS && !sample_live(gpmSample))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && !c.gpu->gpm_supported)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS)
        take(gpmSample, &c, NVML_INSTANCE_ID_NONE);
    return fake_end(r);
}

/* device is the parent GPU; gpuInstanceId as nvmlDeviceGetGpuInstanceById() takes it, with the
 * same answers for a GPU that is not in MIG mode or has no such instance. */
nvmlReturn_t nvmlGpmMigSampleGet(nvmlDevice_t device, unsigned int gpuInstanceId,
                                 nvmlGpmSample_t gpmSample)
{
    struct fake_ctx c;
    nvmlReturn_t r = fake_begin(FC_nvmlGpmMigSampleGet, device, 0, &c);
    if (r == NVML_SUCCESS && !sample_live(gpmSample))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && (!c.gpu->gpm_supported || !c.gpu->has_mig))
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS && !c.gpu->mig_enabled)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (r == NVML_SUCCESS && !fake_instance_by_gi(c.gpu, gpuInstanceId))
        r = NVML_ERROR_NOT_FOUND;
    if (r == NVML_SUCCESS)
        take(gpmSample, &c, gpuInstanceId);
    return fake_end(r);
}

/* The checks on the request that need no GPU. Lock held. On success *ret_gpu and *ret_gi name
 * what both samples were taken of. */
static nvmlReturn_t check_request(const nvmlGpmMetricsGet_t *mg, unsigned *ret_gpu,
                                  unsigned *ret_gi)
{
    if (!mg)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (mg->version != NVML_GPM_METRICS_GET_VERSION)
        return NVML_ERROR_ARGUMENT_VERSION_MISMATCH;
    const struct nvmlGpmSample_st *a = mg->sample1, *b = mg->sample2;
    if (mg->numMetrics > NVML_GPM_METRIC_MAX || !sample_live(a) || !sample_live(b) || a == b ||
        !a->taken || !b->taken)
        return NVML_ERROR_INVALID_ARGUMENT;
    /* Two samples of one GPU or GPU instance, the second one later. */
    if (a->gpu != b->gpu || a->gi != b->gi || a->seq >= b->seq)
        return NVML_ERROR_INVALID_ARGUMENT;
    *ret_gpu = a->gpu;
    *ret_gi = a->gi;
    return NVML_SUCCESS;
}

static void fill_metrics(nvmlGpmMetricsGet_t *mg, const struct fake_gpm *values)
{
    for (unsigned i = 0; i < mg->numMetrics; i++) {
        nvmlGpmMetric_t *m = &mg->metrics[i];
        unsigned id = m->metricId;
        m->value = 0;
        m->metricInfo.shortName = m->metricInfo.longName = m->metricInfo.unit = NULL;
        if (!metric_id_valid(id))
            m->nvmlReturn = NVML_ERROR_INVALID_ARGUMENT;
        else if (id >= FAKE_GPM_IDS || !values->set[id])
            m->nvmlReturn = NVML_ERROR_NOT_SUPPORTED;
        else {
            m->nvmlReturn = NVML_SUCCESS;
            m->value = values->v[id];
        }
    }
}

nvmlReturn_t nvmlGpmMetricsGet(nvmlGpmMetricsGet_t *metricsGet)
{
    struct fake_ctx c;
    unsigned gpu = 0, gi = 0;
    nvmlReturn_t r = fake_begin_plain(&c);
    if (r == NVML_SUCCESS)
        r = check_request(metricsGet, &gpu, &gi);
    if (r != NVML_SUCCESS)
        return fake_end(r);
    /* Then as a call on the samples' GPU, whose loss and "errors" apply. */
    pthread_mutex_unlock(&fake_lock);
    r = fake_begin(FC_nvmlGpmMetricsGet, fake_gpu_handle(gpu), 0, &c);
    if (r == NVML_SUCCESS && !c.gpu->gpm_supported)
        r = NVML_ERROR_NOT_SUPPORTED;
    const struct fake_gpm *values = &c.gpu->gpm;
    if (r == NVML_SUCCESS && gi != NVML_INSTANCE_ID_NONE) {
        const struct fake_mig_instance *in = fake_instance_by_gi(c.gpu, gi);
        if (in)
            values = &in->gpm;
        else
            r = NVML_ERROR_INVALID_ARGUMENT; /* the instance went away since the samples */
    }
    if (r == NVML_SUCCESS)
        fill_metrics(metricsGet, values);
    return fake_end(r);
}

#endif
