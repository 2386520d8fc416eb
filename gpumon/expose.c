/* Exposition of a snapshot; see expose.h. */
#include "expose.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/macro.h"
#include "procs.h"

#ifndef GPUNODE_VERSION
#define GPUNODE_VERSION "unknown"
#endif

/* How each field is shown. dcgm-exporter's names and help texts where it has the field. */
struct field_desc {
    enum gpu_field field;
    const char *name;
    enum prom_type type;
    const char *help;
    bool per_instance; /* also shown for each MIG GPU instance */
};

#define GAUGE   PROM_TYPE_GAUGE
#define COUNTER PROM_TYPE_COUNTER_KEEP_NAME /* dcgm's counters carry no _total */

static const struct field_desc fields[] = {
    {GF_GPU_UTIL, "DCGM_FI_DEV_GPU_UTIL", GAUGE, "GPU utilization (in %).", false},
    {GF_MEM_COPY_UTIL, "DCGM_FI_DEV_MEM_COPY_UTIL", GAUGE, "Memory utilization (in %).", false},
    {GF_ENC_UTIL, "DCGM_FI_DEV_ENC_UTIL", GAUGE, "Encoder utilization (in %).", false},
    {GF_DEC_UTIL, "DCGM_FI_DEV_DEC_UTIL", GAUGE, "Decoder utilization (in %).", false},
    {GF_FB_USED, "DCGM_FI_DEV_FB_USED", GAUGE, "Framebuffer memory used (in MiB).", true},
    {GF_FB_FREE, "DCGM_FI_DEV_FB_FREE", GAUGE, "Framebuffer memory free (in MiB).", true},
    {GF_FB_TOTAL, "DCGM_FI_DEV_FB_TOTAL", GAUGE, "Total framebuffer memory (in MiB).", true},
    {GF_GPU_TEMP, "DCGM_FI_DEV_GPU_TEMP", GAUGE, "GPU temperature (in C).", false},
    {GF_MEMORY_TEMP, "DCGM_FI_DEV_MEMORY_TEMP", GAUGE, "Memory temperature (in C).", false},
    {GF_POWER_USAGE, "DCGM_FI_DEV_POWER_USAGE", GAUGE, "Power draw (in W).", false},
    {GF_POWER_LIMIT, "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", GAUGE,
     "Current power limit enforced on the device (in W).", false},
    {GF_TOTAL_ENERGY, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", COUNTER,
     "Total energy consumption since boot (in mJ).", false},
    {GF_SM_CLOCK, "DCGM_FI_DEV_SM_CLOCK", GAUGE, "SM clock frequency (in MHz).", false},
    {GF_MEM_CLOCK, "DCGM_FI_DEV_MEM_CLOCK", GAUGE, "Memory clock frequency (in MHz).", false},
    {GF_FAN_SPEED, "DCGM_FI_DEV_FAN_SPEED", GAUGE, "Fan speed (in %).", false},
    {GF_PCIE_REPLAY, "DCGM_FI_DEV_PCIE_REPLAY_COUNTER", COUNTER, "Total number of PCIe retries.",
     false},
    {GF_PCIE_TX, "gpumon_pcie_tx_bytes_per_second", GAUGE, "PCIe transmit throughput (in bytes/s).",
     false},
    {GF_PCIE_RX, "gpumon_pcie_rx_bytes_per_second", GAUGE, "PCIe receive throughput (in bytes/s).",
     false},
    {GF_CLOCK_EVENTS, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", GAUGE,
     "Current clock throttle reasons (bit mask of nvmlClocksEventReason*).", false},
    {GF_ECC_SBE_VOL, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", COUNTER,
     "Total number of single-bit volatile ECC errors.", false},
    {GF_ECC_DBE_VOL, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", COUNTER,
     "Total number of double-bit volatile ECC errors.", false},
    {GF_ECC_SBE_AGG, "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL", COUNTER,
     "Total number of single-bit persistent ECC errors.", false},
    {GF_ECC_DBE_AGG, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", COUNTER,
     "Total number of double-bit persistent ECC errors.", false},
    {GF_ROWS_CORRECTABLE, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", COUNTER,
     "Number of remapped rows for correctable errors.", false},
    {GF_ROWS_UNCORRECTABLE, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", COUNTER,
     "Number of remapped rows for uncorrectable errors.", false},
    {GF_ROW_REMAP_PENDING, "DCGM_FI_DEV_ROW_REMAP_PENDING", GAUGE,
     "Whether a row remapping is pending until the next GPU reset (1) or not (0).", false},
    {GF_ROW_REMAP_FAILURE, "DCGM_FI_DEV_ROW_REMAP_FAILURE", GAUGE,
     "Whether remapping of rows has failed (1) or not (0).", false},
};
_Static_assert(ELEMENTSOF(fields) == GF_COUNT, "one description per field");

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
}

static void mig_labels_fill(const struct gpu_labels *gl, const struct mig_sample *m,
                            const struct mig_sample *prev, struct mig_labels *l)
{
    snprintf(l->gi_id, sizeof(l->gi_id), "%u", m->id.gi_id);
    const char *ins[] = {"GPU_I_PROFILE", label_copy(l->profile, sizeof(l->profile), m->id.profile),
                         "GPU_I_ID", l->gi_id, NULL};
    labels_compose(l->kv, gl->kv, ins, NULL);
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
    return k;
}

static int render_field(struct render *r, const struct field_desc *d)
{
    const struct snapshot *s = r->s;
    struct family f = {d->name, d->type, d->help, false};
    int k = 0;
    for (unsigned i = 0; k >= 0 && i < s->n_gpu; i++) {
        const struct gpu_sample *g = &s->gpu[i];
        if (!gpu_readable(g))
            continue;
        if (gpu_values_has(&g->values, d->field))
            k = emit(r, &f, r->gpu_labels[i].kv, g->values.v[d->field]);
        for (unsigned j = 0; k >= 0 && d->per_instance && j < g->n_mig; j++) {
            const struct mig_labels *ml = &r->gpu_labels[i].mig[j];
            if (ml->first_of_instance && gpu_values_has(&g->mig[j].values, d->field))
                k = emit(r, &f, ml->kv, g->mig[j].values.v[d->field]);
        }
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
    for (unsigned i = 0; k >= 0 && i < s->n_gpu; i++)
        if (s->gpu[i].xid_supported)
            k = emit(r, &last, r->gpu_labels[i].kv, s->gpu[i].last_xid);
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

static double timespec_seconds(const struct timespec *t)
{
    return (double)t->tv_sec + (double)t->tv_nsec / 1e9;
}

static int render_self(struct render *r, const struct expose_opts *o, const struct timespec *t0)
{
    const struct snapshot *s = r->s;
    struct family age = {"gpumon_sample_age_seconds", GAUGE,
                         "Seconds since the sampling pass shown here started.", false};
    struct family took = {"gpumon_sample_duration_seconds", GAUGE,
                          "Seconds the sampling pass shown here took.", false};
    struct family errors = {"gpumon_nvml_errors_total", PROM_TYPE_COUNTER,
                            "NVML calls that failed since gpumon started, other than for "
                            "unsupported fields.",
                            false};
    struct family scrape = {"gpumon_scrape_duration_seconds", GAUGE,
                            "Seconds this scrape took until its last family.", false};
    int k = 0;
    if (s->taken_at > 0) {
        double now = o->now;
        if (now <= 0) {
            struct timespec rt;
            clock_gettime(CLOCK_REALTIME, &rt);
            now = timespec_seconds(&rt);
        }
        k = emit(r, &age, NULL, now - s->taken_at);
    }
    if (k >= 0)
        k = emit(r, &took, NULL, s->sample_duration);
    if (k >= 0)
        k = emit(r, &errors, NULL, (double)s->nvml_errors);
    if (k < 0)
        return k;
    double duration = o->scrape_duration;
    if (!o->fixed_scrape_duration) {
        struct timespec end;
        clock_gettime(CLOCK_MONOTONIC, &end);
        bool have_start = o->started.tv_sec != 0 || o->started.tv_nsec != 0;
        duration = timespec_seconds(&end) - timespec_seconds(have_start ? &o->started : t0);
    }
    return emit(r, &scrape, NULL, duration);
}

static int render_all(struct render *r, const struct expose_opts *o, const struct timespec *t0)
{
    int k = render_labels(r);
    if (k >= 0)
        k = render_health(r, o);
    for (size_t i = 0; k >= 0 && i < ELEMENTSOF(fields); i++)
        k = render_field(r, &fields[i]);
    if (k >= 0)
        k = render_xids(r);
    if (k >= 0)
        k = render_clock_events(r);
    if (k >= 0)
        k = render_processes(r);
    if (k >= 0)
        k = render_self(r, o, t0);
    return k;
}

int expose_render(const struct snapshot *s, const struct expose_opts *o, char **ret_text,
                  size_t *ret_len)
{
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    struct render r = {.s = s};
    int k = prom_writer_new(o->format, &r.w);
    if (k >= 0)
        k = render_all(&r, o, &t0);
    free(r.gpu_labels);
    free(r.mig_labels);
    if (k < 0) {
        prom_writer_free(r.w);
        return k;
    }
    return prom_writer_finish(r.w, ret_text, ret_len);
}
