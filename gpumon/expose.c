/* Exposition of a snapshot; see expose.h. */
#include "expose.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/macro.h"
#include "procs.h"
#include "xid-names.h"

#ifndef GPUNODE_VERSION
#define GPUNODE_VERSION "unknown"
#endif

/* Where a field's series go on a GPU in MIG mode. dcgm-exporter shows such a GPU only through
 * its GPU instances (its default device mode watches the instances as entities): no series
 * without GPU_I_* labels, one per GPU instance instead. */
enum field_scope {
    SCOPE_DEVICE,   /* the GPU's value, repeated on each instance (temperature, power, ...) */
    SCOPE_INSTANCE, /* each instance's own value (memory, GPM activity) */
    SCOPE_WHOLE,    /* no value for an instance (DCGM: N/A), so none on a GPU in MIG mode */
};

/* How each field is shown. dcgm-exporter's names, types and help texts (its 4.x
 * etc/default-counters.csv and dcp-metrics-included.csv) where it has the field. */
struct field_desc {
    enum gpu_field field;
    const char *name;
    enum prom_type type;
    const char *help;
    enum field_scope scope;
};

#define GAUGE   PROM_TYPE_GAUGE
#define COUNTER PROM_TYPE_COUNTER_KEEP_NAME /* dcgm's counters carry no _total */

static const struct field_desc fields[] = {
    /* NVML has no utilisation for a GPU in MIG mode; DCGM none for its instances. */
    {GF_GPU_UTIL, "DCGM_FI_DEV_GPU_UTIL", GAUGE, "GPU utilization (in %).", SCOPE_WHOLE},
    {GF_MEM_COPY_UTIL, "DCGM_FI_DEV_MEM_COPY_UTIL", GAUGE, "Memory utilization (in %).",
     SCOPE_WHOLE},
    {GF_ENC_UTIL, "DCGM_FI_DEV_ENC_UTIL", GAUGE, "Encoder utilization (in %).", SCOPE_WHOLE},
    {GF_DEC_UTIL, "DCGM_FI_DEV_DEC_UTIL", GAUGE, "Decoder utilization (in %).", SCOPE_WHOLE},
    {GF_FB_USED, "DCGM_FI_DEV_FB_USED", GAUGE, "Framebuffer memory used (in MiB).", SCOPE_INSTANCE},
    {GF_FB_FREE, "DCGM_FI_DEV_FB_FREE", GAUGE, "Framebuffer memory free (in MiB).", SCOPE_INSTANCE},
    {GF_FB_TOTAL, "DCGM_FI_DEV_FB_TOTAL", GAUGE, "Total framebuffer memory (in MiB).",
     SCOPE_INSTANCE},
    {GF_GPU_TEMP, "DCGM_FI_DEV_GPU_TEMP", GAUGE, "GPU temperature (in C).", SCOPE_DEVICE},
    {GF_MEMORY_TEMP, "DCGM_FI_DEV_MEMORY_TEMP", GAUGE, "Memory temperature (in C).", SCOPE_DEVICE},
    {GF_POWER_USAGE, "DCGM_FI_DEV_POWER_USAGE", GAUGE, "Power draw (in W).", SCOPE_DEVICE},
    {GF_POWER_LIMIT, "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", GAUGE,
     "Current power limit enforced on the device (in W).", SCOPE_DEVICE},
    {GF_TOTAL_ENERGY, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", COUNTER,
     "Total energy consumption since boot (in mJ).", SCOPE_DEVICE},
    {GF_SM_CLOCK, "DCGM_FI_DEV_SM_CLOCK", GAUGE, "SM clock frequency (in MHz).", SCOPE_DEVICE},
    {GF_MEM_CLOCK, "DCGM_FI_DEV_MEM_CLOCK", GAUGE, "Memory clock frequency (in MHz).",
     SCOPE_DEVICE},
    {GF_FAN_SPEED, "DCGM_FI_DEV_FAN_SPEED", GAUGE, "Fan speed (in %).", SCOPE_DEVICE},
    {GF_PCIE_REPLAY, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", COUNTER, "Total number of PCIe retries.",
     SCOPE_DEVICE},
    {GF_PCIE_TX, "gpumon_pcie_tx_bytes_per_second", GAUGE, "PCIe transmit throughput (in bytes/s).",
     SCOPE_DEVICE},
    {GF_PCIE_RX, "gpumon_pcie_rx_bytes_per_second", GAUGE, "PCIe receive throughput (in bytes/s).",
     SCOPE_DEVICE},
    {GF_CLOCK_EVENTS, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", GAUGE,
     "Current clock event reasons (bit mask of nvmlClocksEventReason*).", SCOPE_DEVICE},
    {GF_ECC_SBE_VOL, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", COUNTER,
     "Total number of single-bit volatile ECC errors.", SCOPE_DEVICE},
    {GF_ECC_DBE_VOL, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", COUNTER,
     "Total number of double-bit volatile ECC errors.", SCOPE_DEVICE},
    {GF_ECC_SBE_AGG, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", COUNTER,
     "Total number of single-bit persistent ECC errors.", SCOPE_DEVICE},
    {GF_ECC_DBE_AGG, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", COUNTER,
     "Total number of double-bit persistent ECC errors.", SCOPE_DEVICE},
    {GF_ROWS_CORRECTABLE, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", COUNTER,
     "Number of remapped rows for correctable errors", SCOPE_DEVICE},
    {GF_ROWS_UNCORRECTABLE, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", COUNTER,
     "Number of remapped rows for uncorrectable errors", SCOPE_DEVICE},
    {GF_ROW_REMAP_PENDING, "DCGM_FI_DEV_ROW_REMAP_PENDING", GAUGE,
     "Whether remapping of rows is pending", SCOPE_DEVICE},
    {GF_ROW_REMAP_FAILURE, "DCGM_FI_DEV_ROW_REMAP_FAILURE", GAUGE,
     "Whether remapping of rows has failed", SCOPE_DEVICE},
    {GF_FB_RESERVED, "DCGM_FI_DEV_FB_RESERVED", GAUGE, "Framebuffer memory reserved (in MiB).",
     SCOPE_INSTANCE},
    /* A rate (MiB/s), as DCGM computes it, typed counter as dcgm-exporter's CSV types it. */
    {GF_NVLINK_BANDWIDTH, "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL", COUNTER,
     "Total number of NVLink bandwidth counters for all lanes.", SCOPE_DEVICE},
    {GF_VGPU_LICENSE, "DCGM_FI_DEV_VGPU_LICENSE_STATUS", GAUGE, "vGPU License status",
     SCOPE_DEVICE},
    {GF_PROF_GR_ENGINE_ACTIVE, "DCGM_FI_PROF_GR_ENGINE_ACTIVE", GAUGE,
     "Ratio of time the graphics engine is active.", SCOPE_INSTANCE},
    {GF_PROF_SM_ACTIVE, "DCGM_FI_PROF_SM_ACTIVE", GAUGE,
     "The ratio of cycles an SM has at least 1 warp assigned.", SCOPE_INSTANCE},
    {GF_PROF_SM_OCCUPANCY, "DCGM_FI_PROF_SM_OCCUPANCY", GAUGE,
     "The ratio of number of warps resident on an SM.", SCOPE_INSTANCE},
    {GF_PROF_PIPE_TENSOR_ACTIVE, "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", GAUGE,
     "Ratio of cycles the tensor (HMMA) pipe is active.", SCOPE_INSTANCE},
    {GF_PROF_PIPE_TENSOR_DFMA_ACTIVE, "DCGM_FI_PROF_PIPE_TENSOR_DFMA_ACTIVE", GAUGE,
     "Ratio of cycles the tensor (DFMA) pipe is active.", SCOPE_INSTANCE},
    {GF_PROF_PIPE_TENSOR_HMMA_ACTIVE, "DCGM_FI_PROF_PIPE_TENSOR_HMMA_ACTIVE", GAUGE,
     "Ratio of cycles the tensor (HMMA) pipe is active.", SCOPE_INSTANCE},
    {GF_PROF_PIPE_TENSOR_IMMA_ACTIVE, "DCGM_FI_PROF_PIPE_TENSOR_IMMA_ACTIVE", GAUGE,
     "Ratio of cycles the tensor (IMMA) pipe is active.", SCOPE_INSTANCE},
    {GF_PROF_DRAM_ACTIVE, "DCGM_FI_PROF_DRAM_ACTIVE", GAUGE,
     "Ratio of cycles the device memory interface is active sending or receiving data.",
     SCOPE_INSTANCE},
    {GF_PROF_PIPE_FP64_ACTIVE, "DCGM_FI_PROF_PIPE_FP64_ACTIVE", GAUGE,
     "Ratio of cycles the fp64 pipes are active.", SCOPE_INSTANCE},
    {GF_PROF_PIPE_FP32_ACTIVE, "DCGM_FI_PROF_PIPE_FP32_ACTIVE", GAUGE,
     "Ratio of cycles the fp32 pipes are active.", SCOPE_INSTANCE},
    {GF_PROF_PIPE_FP16_ACTIVE, "DCGM_FI_PROF_PIPE_FP16_ACTIVE", GAUGE,
     "Ratio of cycles the fp16 pipes are active.", SCOPE_INSTANCE},
    {GF_PROF_PIPE_INT_ACTIVE, "DCGM_FI_PROF_PIPE_INT_ACTIVE", GAUGE,
     "Ratio of cycles the integer pipe is active.", SCOPE_INSTANCE},
    /* DCGM has no PCIe or NVLink traffic for a MIG instance. */
    {GF_PROF_PCIE_TX_BYTES, "DCGM_FI_PROF_PCIE_TX_BYTES", GAUGE,
     "The rate of data transmitted over the PCIe bus - including both protocol headers and data "
     "payloads - in bytes per second.",
     SCOPE_WHOLE},
    {GF_PROF_PCIE_RX_BYTES, "DCGM_FI_PROF_PCIE_RX_BYTES", GAUGE,
     "The rate of data received over the PCIe bus - including both protocol headers and data "
     "payloads - in bytes per second.",
     SCOPE_WHOLE},
    {GF_PROF_NVLINK_TX_BYTES, "DCGM_FI_PROF_NVLINK_TX_BYTES", GAUGE,
     "The rate of data transmitted over NVLink, not including protocol headers, in bytes per "
     "second.",
     SCOPE_WHOLE},
    {GF_PROF_NVLINK_RX_BYTES, "DCGM_FI_PROF_NVLINK_RX_BYTES", GAUGE,
     "The rate of data received over NVLink, not including protocol headers, in bytes per "
     "second.",
     SCOPE_WHOLE},
};
_Static_assert(ELEMENTSOF(fields) == GF_COUNT, "one description per field");

/* DCGM 3's name of the clock event reasons, shown beside DCGM 4's only when asked for. */
static const struct field_desc clock_throttle_desc = {
    GF_CLOCK_EVENTS, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", GAUGE,
    "Current clock throttle reasons (bit mask of nvmlClocksEventReason*).", SCOPE_DEVICE};

/* nvmlClocksEventReason* bits by the names gpumon_clock_event_active shows. */
static const struct {
    uint64_t bit;
    const char *reason;
} clock_reasons[] = {
    {nvmlClocksEventReasonGpuIdle, "gpu_idle"},
    {nvmlClocksEventReasonApplicationsClocksSetting, "applications_clocks"},
    {nvmlClocksEventReasonSwPowerCap, "sw_power_cap"},
    {nvmlClocksThrottleReasonHwSlowdown, "hw_slowdown"},
    {nvmlClocksEventReasonSyncBoost, "sync_boost"},
    {nvmlClocksEventReasonSwThermalSlowdown, "sw_thermal_slowdown"},
    {nvmlClocksThrottleReasonHwThermalSlowdown, "hw_thermal_slowdown"},
    {nvmlClocksThrottleReasonHwPowerBrakeSlowdown, "hw_power_brake_slowdown"},
    {nvmlClocksEventReasonDisplayClockSetting, "display_clock"},
};

/* Label arrays: name, value, ..., NULL. A GPU's seven pairs; MIG series put two more after
 * modelName, where dcgm-exporter has them. */
#define GPU_PAIRS  7
#define MODEL_END  10 /* entries up to and including modelName's value */
#define LABELS_MAX 40 /* entries of the longest composed array, NULL included */

struct mig_labels {
    char gi_id[12];
    char profile[GPU_PROFILE_MAX];
    bool first_of_instance; /* compute instances share their GPU instance's memory */
    const char *ins[5];     /* GPU_I_PROFILE, GPU_I_ID and their values, NULL */
    const char *kv[2 * (GPU_PAIRS + 2) + 1];
};

struct gpu_labels {
    char index[12];
    char device[24];
    char uuid[GPU_UUID_MAX];
    char name[GPU_NAME_MAX];
    char bus_id[GPU_BUS_ID_MAX];
    const char *kv[2 * GPU_PAIRS + 1];
    struct mig_labels *mig; /* n_mig entries, inside render.mig_labels */
};

struct render {
    const struct snapshot *s;
    const struct expose_selection *sel;
    struct prom_writer *w;
    struct gpu_labels *gpu_labels;
    struct mig_labels *mig_labels;
    char hostname[sizeof(((struct snapshot *)0)->hostname)];
    char driver[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
};

/* A family that writes its HELP and TYPE lines with its first sample, so that a family without
 * samples leaves nothing behind. */
struct family {
    const char *name;
    enum prom_type type;
    const char *help;
    bool open;
};

static int emit(struct render *r, struct family *f, const char *const *labels, double value)
{
    /* A negative counter is a reading we cannot show (prom refuses it); the rest of the scrape
     * can still go out, and the family must not be opened for it alone. */
    if (f->type != PROM_TYPE_GAUGE && value < 0)
        return 0;
    if (!f->open) {
        int k = prom_family(r->w, f->name, f->type, f->help);
        if (k < 0)
            return k;
        f->open = true;
    }
    return prom_sample(r->w, labels, value);
}

/* Copies a snapshot string (bounded: it may lack its NUL) and makes it a safe label value. */
static const char *label_copy(char *buf, size_t size, const char *s)
{
    snprintf(buf, size, "%.*s", (int)(size - 1), s);
    procs_sanitize_label(buf);
    return buf;
}

/* out = gpu's labels with ins inserted after modelName and tail appended (either may be NULL). */
static void labels_compose(const char **out, const char *const *gpu, const char *const *ins,
                           const char *const *tail)
{
    size_t n = 0;
    for (size_t i = 0; i < MODEL_END; i++)
        out[n++] = gpu[i];
    for (size_t i = 0; ins && ins[i]; i++)
        out[n++] = ins[i];
    for (size_t i = MODEL_END; gpu[i]; i++)
        out[n++] = gpu[i];
    for (size_t i = 0; tail && tail[i]; i++)
        out[n++] = tail[i];
    out[n] = NULL;
}

static void gpu_labels_fill(struct render *r, const struct gpu_sample *g, struct gpu_labels *l)
{
    snprintf(l->index, sizeof(l->index), "%u", g->id.index);
    /* dcgm-exporter names the device after the GPU's index, not its /dev/nvidia<minor> (they
     * differ on some hosts); dashboards join on it, so gpumon does the same. */
    snprintf(l->device, sizeof(l->device), "nvidia%u", g->id.index);
    const char *kv[] = {
        "gpu",
        l->index,
        "UUID",
        label_copy(l->uuid, sizeof(l->uuid), g->id.uuid),
        "pci_bus_id",
        label_copy(l->bus_id, sizeof(l->bus_id), g->id.pci_bus_id),
        "device",
        l->device,
        "modelName",
        label_copy(l->name, sizeof(l->name), g->id.name),
        "Hostname",
        r->hostname,
        "DCGM_FI_DRIVER_VERSION",
        r->driver,
        NULL,
    };
    _Static_assert(sizeof(kv) == sizeof(l->kv), "label array size");
    memcpy(l->kv, kv, sizeof(kv));
    /* A collectors file without the driver's label row shows no such label, as dcgm-exporter. */
    if (!r->sel->driver_label)
        l->kv[2 * GPU_PAIRS - 2] = NULL;
}

static void mig_labels_fill(const struct gpu_labels *gl, const struct mig_sample *m,
                            const struct mig_sample *prev, struct mig_labels *l)
{
    snprintf(l->gi_id, sizeof(l->gi_id), "%u", m->id.gi_id);
    const char *ins[] = {"GPU_I_PROFILE", label_copy(l->profile, sizeof(l->profile), m->id.profile),
                         "GPU_I_ID", l->gi_id, NULL};
    _Static_assert(sizeof(ins) == sizeof(l->ins), "label array size");
    memcpy(l->ins, ins, sizeof(ins));
    labels_compose(l->kv, gl->kv, l->ins, NULL);
    /* The model orders MIG devices by GPU instance, so a repeat follows its first. */
    l->first_of_instance = !prev || prev->id.gi_id != m->id.gi_id;
}

/* Builds every GPU's and MIG device's label array once, for all families of this render. */
static int render_labels(struct render *r)
{
    const struct snapshot *s = r->s;
    label_copy(r->hostname, sizeof(r->hostname), s->hostname);
    label_copy(r->driver, sizeof(r->driver), s->driver_version);
    size_t n_mig = 0;
    for (unsigned i = 0; i < s->n_gpu; i++)
        n_mig += s->gpu[i].n_mig;
    r->gpu_labels = calloc(s->n_gpu ? s->n_gpu : 1, sizeof(*r->gpu_labels));
    r->mig_labels = calloc(n_mig ? n_mig : 1, sizeof(*r->mig_labels));
    if (!r->gpu_labels || !r->mig_labels)
        return -ENOMEM;
    struct mig_labels *next = r->mig_labels;
    for (unsigned i = 0; i < s->n_gpu; i++) {
        const struct gpu_sample *g = &s->gpu[i];
        struct gpu_labels *gl = &r->gpu_labels[i];
        gpu_labels_fill(r, g, gl);
        gl->mig = next;
        for (unsigned j = 0; j < g->n_mig; j++)
            mig_labels_fill(gl, &g->mig[j], j ? &g->mig[j - 1] : NULL, &gl->mig[j]);
        next += g->n_mig;
    }
    return 0;
}

static bool gpu_readable(const struct gpu_sample *g)
{
    return !g->lost && g->id.error == 0;
}

/* Why a GPU shows no DCGM_FI_PROF_* fields: they are left out, not shown as 0, and a dashboard's
 * empty Tensor Core panel should be explainable from the exposition itself. */
static int render_prof_reasons(struct render *r)
{
    const struct snapshot *s = r->s;
    struct family f = {"gpumon_profiling_unavailable_info", GAUGE,
                       "Why the GPU shows no DCGM_FI_PROF_* fields (NVML GPM unavailable).", false};
    int k = 0;
    for (unsigned i = 0; k >= 0 && i < s->n_gpu; i++) {
        const struct gpu_sample *g = &s->gpu[i];
        if (!gpu_readable(g) || !g->prof_reason[0])
            continue;
        char reason[sizeof(g->prof_reason)];
        const char *labels[LABELS_MAX];
        const char *const tail[] = {"reason", label_copy(reason, sizeof(reason), g->prof_reason),
                                    NULL};
        labels_compose(labels, r->gpu_labels[i].kv, NULL, tail);
        k = emit(r, &f, labels, 1);
    }
    return k;
}

static int render_health(struct render *r, const struct expose_opts *o)
{
    const struct snapshot *s = r->s;
    struct family up = {"gpumon_up", GAUGE,
                        "Whether NVML is loaded and initialised (1) or not (0).", false};
    struct family err = {"gpumon_last_error_info", GAUGE,
                         "Why NVML is not up; present only while gpumon_up is 0.", false};
    struct family info = {"gpumon_info", GAUGE,
                          "Versions of gpumon, of the NVIDIA driver and of the CUDA it supports.",
                          false};
    struct family gpus = {"gpumon_gpus", GAUGE, "Number of GPUs NVML reports.", false};
    struct family gpu_up = {"gpumon_gpu_up", GAUGE,
                            "Whether the GPU answers NVML (1) or is lost or unreadable (0).",
                            false};

    int k = emit(r, &up, NULL, s->up);
    if (k >= 0 && !s->up) {
        char reason[sizeof(s->reason)];
        const char *const kv[] = {
            "reason", s->reason[0] ? label_copy(reason, sizeof(reason), s->reason) : "unknown",
            NULL};
        k = emit(r, &err, kv, 1);
    }
    char cuda[24] = "";
    if (s->cuda_version > 0)
        snprintf(cuda, sizeof(cuda), "%d.%d", s->cuda_version / 1000, s->cuda_version % 1000 / 10);
    const char *const info_kv[] = {"version",
                                   o->version ? o->version : GPUNODE_VERSION,
                                   "driver_version",
                                   r->driver,
                                   "cuda_version",
                                   cuda,
                                   NULL};
    if (k >= 0)
        k = emit(r, &info, info_kv, 1);
    if (k >= 0)
        k = emit(r, &gpus, NULL, s->n_nvml_gpu);
    for (unsigned i = 0; k >= 0 && i < s->n_gpu; i++)
        k = emit(r, &gpu_up, r->gpu_labels[i].kv, gpu_readable(&s->gpu[i]));
    return k >= 0 ? render_prof_reasons(r) : k;
}

/* The values a series of scope sc takes for GPU instance j of g, NULL for none. */
static const struct gpu_values *instance_values(const struct gpu_sample *g, unsigned j,
                                                enum field_scope sc)
{
    if (sc == SCOPE_DEVICE)
        return &g->values;
    return sc == SCOPE_INSTANCE ? &g->mig[j].values : NULL;
}

static bool gpumon_own(const struct field_desc *d)
{
    return strncmp(d->name, "gpumon_", 7) == 0;
}

static bool field_selected(const struct render *r, const struct field_desc *d)
{
    return gpumon_own(d) || (r->sel->fields & (UINT64_C(1) << d->field));
}

/* One family of dcgm's per-GPU layout: a series per GPU, or per GPU instance of a GPU in MIG
 * mode (enum field_scope). gpumon's own families stay per GPU. */
static int render_field(struct render *r, const struct field_desc *d)
{
    const struct snapshot *s = r->s;
    struct family f = {d->name, d->type, d->help, false};
    int k = 0;
    for (unsigned i = 0; k >= 0 && i < s->n_gpu; i++) {
        const struct gpu_sample *g = &s->gpu[i];
        if (!gpu_readable(g))
            continue;
        bool whole = g->n_mig == 0 || gpumon_own(d);
        if (whole && gpu_values_has(&g->values, d->field))
            k = emit(r, &f, r->gpu_labels[i].kv, g->values.v[d->field]);
        for (unsigned j = 0; k >= 0 && !whole && j < g->n_mig; j++) {
            const struct mig_labels *ml = &r->gpu_labels[i].mig[j];
            const struct gpu_values *v = instance_values(g, j, d->scope);
            if (ml->first_of_instance && v && gpu_values_has(v, d->field))
                k = emit(r, &f, ml->kv, v->v[d->field]);
        }
    }
    return k;
}

static int render_fields(struct render *r)
{
    int k = 0;
    for (size_t i = 0; k >= 0 && i < ELEMENTSOF(fields); i++) {
        if (field_selected(r, &fields[i]))
            k = render_field(r, &fields[i]);
        if (k >= 0 && fields[i].field == GF_CLOCK_EVENTS && r->sel->clock_throttle_reasons)
            k = render_field(r, &clock_throttle_desc);
    }
    return k;
}

static int render_clock_events(struct render *r)
{
    const struct snapshot *s = r->s;
    struct family f = {"gpumon_clock_event_active", GAUGE,
                       "Whether a clock event (throttle) reason is active (1) or not (0).", false};
    int k = 0;
    for (unsigned i = 0; k >= 0 && i < s->n_gpu; i++) {
        const struct gpu_sample *g = &s->gpu[i];
        if (!gpu_readable(g) || !gpu_values_has(&g->values, GF_CLOCK_EVENTS))
            continue;
        uint64_t mask = (uint64_t)g->values.v[GF_CLOCK_EVENTS];
        for (size_t c = 0; k >= 0 && c < ELEMENTSOF(clock_reasons); c++) {
            const char *labels[LABELS_MAX];
            const char *const tail[] = {"reason", clock_reasons[c].reason, NULL};
            labels_compose(labels, r->gpu_labels[i].kv, NULL, tail);
            k = emit(r, &f, labels, (mask & clock_reasons[c].bit) != 0);
        }
    }
    return k;
}

/* dcgm-exporter's DCGM_FI_DEV_XID_ERRORS: the last XID, with its number and name as labels
 * after all others, on each GPU instance of a GPU in MIG mode as a device-wide field. */
static int render_last_xid(struct render *r, struct family *f, unsigned i)
{
    const struct gpu_sample *g = &r->s->gpu[i];
    char code[12];
    snprintf(code, sizeof(code), "%u", g->last_xid);
    const char *const tail[] = {"err_code", code, "err_msg", xid_name(g->last_xid), NULL};
    const char *labels[LABELS_MAX];
    if (g->n_mig == 0 || g->lost) {
        labels_compose(labels, r->gpu_labels[i].kv, NULL, tail);
        return emit(r, f, labels, g->last_xid);
    }
    int k = 0;
    for (unsigned j = 0; k >= 0 && j < g->n_mig; j++) {
        const struct mig_labels *ml = &r->gpu_labels[i].mig[j];
        if (!ml->first_of_instance)
            continue;
        labels_compose(labels, r->gpu_labels[i].kv, ml->ins, tail);
        k = emit(r, f, labels, g->last_xid);
    }
    return k;
}

/* XIDs are shown for lost GPUs too: the XID that lost them (79, fallen off the bus) is the one
 * thing left to say about them. */
static int render_xids(struct render *r)
{
    const struct snapshot *s = r->s;
    struct family last = {"DCGM_FI_DEV_XID_ERRORS", GAUGE,
                          "Value of the last XID error encountered.", false};
    struct family count = {"gpumon_xid_errors_total", PROM_TYPE_COUNTER,
                           "XID errors seen since gpumon started, by XID.", false};
    struct family seen = {"gpumon_xid_last_seen_timestamp_seconds", GAUGE,
                          "Unix time an XID was last seen on the GPU.", false};
    int k = 0;
    for (unsigned i = 0; k >= 0 && r->sel->xid_errors && i < s->n_gpu; i++)
        if (s->gpu[i].xid_supported)
            k = render_last_xid(r, &last, i);
    for (int pass = 0; pass < 2; pass++) {
        for (unsigned i = 0; k >= 0 && i < s->n_gpu; i++) {
            const struct gpu_sample *g = &s->gpu[i];
            for (unsigned x = 0; k >= 0 && x < g->n_xid; x++) {
                char xid[12];
                snprintf(xid, sizeof(xid), "%u", g->xid[x].xid);
                const char *labels[LABELS_MAX];
                const char *const tail[] = {"xid", xid, NULL};
                labels_compose(labels, r->gpu_labels[i].kv, NULL, tail);
                k = pass == 0 ? emit(r, &count, labels, (double)g->xid[x].count)
                              : emit(r, &seen, labels, g->xid[x].last_seen);
            }
        }
    }
    return k;
}

static int render_process(struct render *r, struct family *f, unsigned gpu,
                          const struct proc_sample *p)
{
    char pid[16], gi_id[12], comm[sizeof(p->comm)], user[sizeof(p->user)];
    char container[sizeof(p->container)], job[sizeof(p->job)];
    snprintf(pid, sizeof(pid), "%d", (int)p->pid);
    snprintf(gi_id, sizeof(gi_id), "%u", p->gi_id);
    const char *const ins[] = {"GPU_I_ID", gi_id, NULL};
    const char *const tail[] = {
        "pid",       pid,
        "process",   label_copy(comm, sizeof(comm), p->comm),
        "user",      label_copy(user, sizeof(user), p->user),
        "container", label_copy(container, sizeof(container), p->container),
        "hpc_job",   label_copy(job, sizeof(job), p->job),
        NULL,
    };
    const char *labels[LABELS_MAX];
    labels_compose(labels, r->gpu_labels[gpu].kv, p->gi_id != NVML_INSTANCE_ID_NONE ? ins : NULL,
                   tail);
    return emit(r, f, labels, (double)p->memory);
}

static int render_processes(struct render *r)
{
    const struct snapshot *s = r->s;
    struct family f = {"gpumon_process_memory_bytes", GAUGE,
                       "GPU memory used by a process (in bytes).", false};
    int k = 0;
    for (unsigned i = 0; k >= 0 && i < s->n_gpu; i++) {
        const struct gpu_sample *g = &s->gpu[i];
        if (!gpu_readable(g))
            continue;
        for (unsigned j = 0; k >= 0 && j < g->n_proc; j++)
            if (g->proc[j].has_memory)
                k = render_process(r, &f, i, &g->proc[j]);
    }
    return k;
}

static int render_self(struct render *r)
{
    const struct snapshot *s = r->s;
    struct family taken = {"gpumon_sample_timestamp_seconds", GAUGE,
                           "Unix time the sampling pass shown here started.", false};
    struct family took = {"gpumon_sample_duration_seconds", GAUGE,
                          "Seconds the sampling pass shown here took.", false};
    struct family errors = {"gpumon_nvml_errors_total", PROM_TYPE_COUNTER,
                            "NVML calls that failed since gpumon started, other than for "
                            "unsupported fields.",
                            false};
    int k = 0;
    if (s->taken_at > 0)
        k = emit(r, &taken, NULL, s->taken_at);
    if (k >= 0)
        k = emit(r, &took, NULL, s->sample_duration);
    if (k >= 0)
        k = emit(r, &errors, NULL, (double)s->nvml_errors);
    return k;
}

static int render_all(struct render *r, const struct expose_opts *o)
{
    int k = render_labels(r);
    if (k >= 0)
        k = render_health(r, o);
    if (k >= 0)
        k = render_fields(r);
    if (k >= 0)
        k = render_xids(r);
    if (k >= 0)
        k = render_clock_events(r);
    if (k >= 0)
        k = render_processes(r);
    if (k >= 0)
        k = render_self(r);
    return k;
}

int expose_render(const struct snapshot *s, const struct expose_opts *o, char **ret_text,
                  size_t *ret_len)
{
    struct expose_selection all;
    if (!o->sel)
        expose_select_all(&all, false);
    struct render r = {.s = s, .sel = o->sel ? o->sel : &all};
    int k = prom_writer_new(o->format, &r.w);
    if (k >= 0)
        k = render_all(&r, o);
    free(r.gpu_labels);
    free(r.mig_labels);
    if (k < 0) {
        prom_writer_free(r.w);
        return k;
    }
    return prom_writer_finish(r.w, ret_text, ret_len);
}

bool expose_wants_profiling(const struct expose_selection *sel)
{
    for (size_t i = 0; i < ELEMENTSOF(fields); i++)
        if (strncmp(fields[i].name, "DCGM_FI_PROF_", 13) == 0 &&
            (sel->fields & (UINT64_C(1) << fields[i].field)))
            return true;
    return false;
}

void expose_select_all(struct expose_selection *ret, bool dcgm3_names)
{
    *ret = (struct expose_selection){
        .fields = ~UINT64_C(0),
        .xid_errors = true,
        .driver_label = true,
        .clock_throttle_reasons = dcgm3_names,
    };
}

/* The names a collectors file may list that are not fields of enum gpu_field. */
#define NAME_XID          "DCGM_FI_DEV_XID_ERRORS"
#define NAME_DRIVER_LABEL "DCGM_FI_DRIVER_VERSION"

size_t expose_dcgm_names(const char **names)
{
    size_t n = 0;
    for (size_t i = 0; i < ELEMENTSOF(fields); i++)
        if (strncmp(fields[i].name, "gpumon_", 7) != 0)
            names[n++] = fields[i].name;
    names[n++] = clock_throttle_desc.name;
    names[n++] = NAME_XID;
    names[n++] = NAME_DRIVER_LABEL;
    return n;
}

void expose_select(const char *const *names, const bool *selected, size_t n,
                   struct expose_selection *ret)
{
    *ret = (struct expose_selection){0};
    for (size_t i = 0; i < n; i++) {
        if (!selected[i])
            continue;
        if (strcmp(names[i], NAME_XID) == 0)
            ret->xid_errors = true;
        else if (strcmp(names[i], NAME_DRIVER_LABEL) == 0)
            ret->driver_label = true;
        else if (strcmp(names[i], clock_throttle_desc.name) == 0)
            ret->clock_throttle_reasons = true;
        for (size_t f = 0; f < ELEMENTSOF(fields); f++)
            if (strcmp(names[i], fields[f].name) == 0)
                ret->fields |= UINT64_C(1) << fields[f].field;
    }
}
