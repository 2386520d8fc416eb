/* The GPM reader: two NVML sample buffers used in turn, and the conversion of NVML's GPM metrics
 * (percent, MiB/s) to dcgm-exporter's DCGM_FI_PROF_* fields (ratios, bytes/s). */
#include "gpm.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>

#include "lib/log.h"
#include "lib/nvml.h"

#define MIB 1048576.0
/* How far past the end of its range a value may be and still count as that end: rounding in the
 * driver's arithmetic, far below anything a metric shows. In the metric's unit (% or MiB/s). */
#define NOISE 1e-6

enum unit {
    U_PERCENT,   /* 0..100 -> ratio 0..1 */
    U_MIB_PER_S, /* -> bytes/s */
};

/* DCGM's mapping of its profiling fields to GPM metrics. gpu_only: DCGM shows the field for
 * whole GPUs only (the interconnect rates have no meaning for a MIG instance). */
static const struct metric {
    unsigned id;
    enum gpu_field field;
    enum unit unit;
    bool gpu_only;
} metrics[] = {
    {NVML_GPM_METRIC_GRAPHICS_UTIL, GF_PROF_GR_ENGINE_ACTIVE, U_PERCENT, false},
    {NVML_GPM_METRIC_SM_UTIL, GF_PROF_SM_ACTIVE, U_PERCENT, false},
    {NVML_GPM_METRIC_SM_OCCUPANCY, GF_PROF_SM_OCCUPANCY, U_PERCENT, false},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, GF_PROF_PIPE_TENSOR_ACTIVE, U_PERCENT, false},
    {NVML_GPM_METRIC_DFMA_TENSOR_UTIL, GF_PROF_PIPE_TENSOR_DFMA_ACTIVE, U_PERCENT, false},
    {NVML_GPM_METRIC_HMMA_TENSOR_UTIL, GF_PROF_PIPE_TENSOR_HMMA_ACTIVE, U_PERCENT, false},
    {NVML_GPM_METRIC_IMMA_TENSOR_UTIL, GF_PROF_PIPE_TENSOR_IMMA_ACTIVE, U_PERCENT, false},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, GF_PROF_DRAM_ACTIVE, U_PERCENT, false},
    {NVML_GPM_METRIC_FP64_UTIL, GF_PROF_PIPE_FP64_ACTIVE, U_PERCENT, false},
    {NVML_GPM_METRIC_FP32_UTIL, GF_PROF_PIPE_FP32_ACTIVE, U_PERCENT, false},
    {NVML_GPM_METRIC_FP16_UTIL, GF_PROF_PIPE_FP16_ACTIVE, U_PERCENT, false},
    {NVML_GPM_METRIC_INTEGER_UTIL, GF_PROF_PIPE_INT_ACTIVE, U_PERCENT, false},
    {NVML_GPM_METRIC_PCIE_TX_PER_SEC, GF_PROF_PCIE_TX_BYTES, U_MIB_PER_S, true},
    {NVML_GPM_METRIC_PCIE_RX_PER_SEC, GF_PROF_PCIE_RX_BYTES, U_MIB_PER_S, true},
    {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, GF_PROF_NVLINK_TX_BYTES, U_MIB_PER_S, true},
    {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, GF_PROF_NVLINK_RX_BYTES, U_MIB_PER_S, true},
};
#define N_METRICS ELEMENTSOF(metrics)

struct gpm {
    const struct nvml_api *api;
    nvmlDevice_t dev;
    unsigned gi_id;
    nvmlGpmSample_t sample[2];
    int last; /* index into sample[] of the last sample taken, -1 before the first */
    /* What is asked of the driver: indexes into metrics[]. */
    unsigned n_asked;
    unsigned asked[N_METRICS];
    /* The request, some 13 KiB: kept here rather than on a sampler thread's stack. */
    nvmlGpmMetricsGet_t req;
};

static int fail(const struct gpm *g, struct errmsg *e, const char *call, nvmlReturn_t r)
{
    return errmsg_set(e, nvml_errno(r), "%s: %s", call, nvml_api_error_string(g->api, r));
}

/* Whether the driver has what reading dev (or an instance of it) needs. */
static bool have_api(const struct nvml_api *api, unsigned gi_id)
{
    return api->nvmlGpmQueryDeviceSupport && api->nvmlGpmSampleAlloc && api->nvmlGpmSampleFree &&
           api->nvmlGpmMetricsGet &&
           (gi_id == NVML_INSTANCE_ID_NONE ? api->nvmlGpmSampleGet != NULL
                                           : api->nvmlGpmMigSampleGet != NULL);
}

static int check_support(const struct gpm *g, struct errmsg *e)
{
    nvmlGpmSupport_t support = {.version = NVML_GPM_SUPPORT_VERSION};
    nvmlReturn_t r = g->api->nvmlGpmQueryDeviceSupport(g->dev, &support);
    if (r == NVML_ERROR_NOT_SUPPORTED || (r == NVML_SUCCESS && !support.isSupportedDevice))
        return errmsg_set(e, -EOPNOTSUPP,
                          "GPM is not supported on this GPU (Hopper or newer needed)");
    if (r != NVML_SUCCESS)
        return fail(g, e, "nvmlGpmQueryDeviceSupport", r);
    return 0;
}

int gpm_new(const struct nvml_api *api, nvmlDevice_t dev, unsigned gi_id, struct gpm **ret,
            struct errmsg *e)
{
    if (!have_api(api, gi_id))
        return errmsg_set(e, -EOPNOTSUPP, "this NVML has no GPM API (driver R525 or newer needed)");
    _cleanup_(gpm_freep) struct gpm *g = calloc(1, sizeof(*g));
    if (!g)
        return errmsg_set(e, -ENOMEM, "out of memory");
    g->api = api;
    g->dev = dev;
    g->gi_id = gi_id;
    g->last = -1;
    int r = check_support(g, e);
    if (r < 0)
        return r;
    for (unsigned i = 0; i < 2; i++) {
        nvmlReturn_t nr = api->nvmlGpmSampleAlloc(&g->sample[i]);
        if (nr != NVML_SUCCESS) {
            g->sample[i] = NULL;
            return fail(g, e, "nvmlGpmSampleAlloc", nr);
        }
    }
    for (unsigned i = 0; i < N_METRICS; i++)
        if (gi_id == NVML_INSTANCE_ID_NONE || !metrics[i].gpu_only)
            g->asked[g->n_asked++] = i;
    *ret = TAKE_PTR(g);
    return 0;
}

void gpm_free(struct gpm *g)
{
    if (!g)
        return;
    for (unsigned i = 0; i < 2; i++)
        if (g->sample[i]) {
            nvmlReturn_t r = g->api->nvmlGpmSampleFree(g->sample[i]);
            if (r != NVML_SUCCESS)
                log_debug("nvmlGpmSampleFree: %s", nvml_api_error_string(g->api, r));
        }
    free(g);
}

static int take_sample(struct gpm *g, nvmlGpmSample_t s, struct errmsg *e)
{
    nvmlReturn_t r;
    if (g->gi_id == NVML_INSTANCE_ID_NONE) {
        r = g->api->nvmlGpmSampleGet(g->dev, s);
        return r == NVML_SUCCESS ? 0 : fail(g, e, "nvmlGpmSampleGet", r);
    }
    r = g->api->nvmlGpmMigSampleGet(g->dev, g->gi_id, s);
    if (r != NVML_SUCCESS)
        return errmsg_set(e, nvml_errno(r), "nvmlGpmMigSampleGet (GPU instance %u): %s", g->gi_id,
                          nvml_api_error_string(g->api, r));
    return 0;
}

/* The value of one metric in dcgm-exporter's unit; false when there is none to show: not
 * reported, or a value outside the metric's range by more than float noise. */
static bool convert(const struct metric *m, const nvmlGpmMetric_t *got, double *ret)
{
    double x = got->value;
    double top = m->unit == U_PERCENT ? 100.0 : INFINITY;
    if (got->nvmlReturn != NVML_SUCCESS)
        return false;
    if (isnan(x) || x < -NOISE || x > top + NOISE) {
        log_debug("GPM metric %u: %g is out of range; left out", m->id, x);
        return false;
    }
    x = fmin(fmax(x, 0.0), top);
    *ret = m->unit == U_PERCENT ? x / 100.0 : x * MIB;
    return true;
}

int gpm_read(struct gpm *g, struct gpu_values *v, struct errmsg *e)
{
    int next = g->last == 0 ? 1 : 0;
    int r = take_sample(g, g->sample[next], e);
    if (r < 0)
        return r; /* the last good sample stays the start of the next interval */
    int prev = g->last;
    g->last = next;
    if (prev < 0)
        return 0;

    nvmlGpmMetricsGet_t *q = &g->req;
    q->version = NVML_GPM_METRICS_GET_VERSION;
    q->numMetrics = g->n_asked;
    q->sample1 = g->sample[prev];
    q->sample2 = g->sample[next];
    for (unsigned i = 0; i < g->n_asked; i++)
        q->metrics[i] = (nvmlGpmMetric_t){.metricId = metrics[g->asked[i]].id};
    nvmlReturn_t nr = g->api->nvmlGpmMetricsGet(q);
    if (nr != NVML_SUCCESS)
        return fail(g, e, "nvmlGpmMetricsGet", nr);
    for (unsigned i = 0; i < g->n_asked; i++) {
        const struct metric *m = &metrics[g->asked[i]];
        double x;
        if (convert(m, &q->metrics[i], &x))
            gpu_values_set(v, m->field, x);
    }
    return 0;
}
