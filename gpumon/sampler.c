#include "sampler.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "events.h"
#include "lib/gpu.h"
#include "lib/macro.h"
#include "lib/nvml.h"
#include "pci-gpus.h"
#include "proc-cache.h"
#include "prof.h"

/* What the sampler asks of a GPU. A probe answered with NOT_SUPPORTED is not asked again until
 * the next rescan interval (or a re-load, or a change of the GPU's MIG mode): on 8 GPUs the failed
 * calls would otherwise cost every pass, and one call per rescan is cheap. */
enum probe {
    P_UTIL,
    P_MEMORY_V2,
    P_MEMORY,
    P_TEMP,
    P_MEM_TEMP,
    P_POWER,
    P_POWER_LIMIT,
    P_SM_CLOCK,
    P_MEM_CLOCK,
    P_FAN,
    P_PCIE_REPLAY,
    P_ENC,
    P_DEC,
    P_CLOCK_EVENTS,
    P_THROTTLE,
    P_ECC_MODE,
    /* One bit per counter: a GPU may keep volatile counts but not aggregate ones. */
    P_ECC_SBE_VOL,
    P_ECC_DBE_VOL,
    P_ECC_SBE_AGG,
    P_ECC_DBE_AGG,
    P_COMPUTE_PROCS,
    P_GRAPHICS_PROCS,
    P_MIG_MEMORY_V2,
    P_MIG_MEMORY,
    P_NVLINK,
    /* slow thread */
    P_ENERGY,
    P_REMAP,
    P_PCIE_TX,
    P_PCIE_RX,
    P_MIG_MODE,
    P_MIG_DEVICES,
    P_VIRT_MODE,
    _P_MAX,
};
_Static_assert(_P_MAX <= 64, "probe masks are 64-bit");

/* The sampler's knowledge of one GPU of the current model. */
struct gpu_state {
    atomic_bool lost; /* answered GPU_IS_LOST, GPU_NOT_FOUND or RESET_REQUIRED (or was lost when
                       * loaded): not asked again; NVML is re-opened for it, with back-off */
    bool broken;      /* could not be read when loaded, for another reason */
    /* Consecutive fast passes in which every call made failed (with an error other than
     * NOT_SUPPORTED); from FAILING_PASSES on the GPU is shown lost but still read, so that it
     * comes back with its first success. Fast thread only. */
    unsigned failed_passes;
    /* Bits of enum probe. Each is touched by its own thread, and by a MIG re-read (slow thread)
     * under the model's write lock. */
    uint64_t fast_unsupported;
    uint64_t slow_unsupported;
    struct gpu_values slow;   /* latest slow values, under sampler.slow_lock */
    double slow_at[GF_COUNT]; /* CLOCK_MONOTONIC seconds each slow value was read */
    /* NVLink payload KiB (both directions, all links) at nvlink_at, for the rate; fast thread. */
    double nvlink_kib, nvlink_at;
    struct prof prof; /* fast thread; MIG re-reads under the write lock */
};

/* NVML and what was loaded from it, replaced whole when it is re-loaded. */
struct model {
    struct nvml *nvml; /* NULL: down, reason says why */
    struct gpu_list *list;
    struct gpu_state *state; /* list->n entries */
    char reason[256];
    unsigned generation; /* counts re-loads, so a pass can tell the model changed under it */
    /* The GPUs the kernel had bound to the nvidia driver when NVML was opened. */
    bool pci_known;
    struct pci_gpus pci;
};

struct sampler {
    char *nvml_library; /* NULL: NVML_LIBRARY */
    char *hostname;
    char *sysfs_root; /* "": no check of the GPUs bound to the nvidia driver */
    double interval, slow_interval, rescan_interval;
    bool process_metrics, pcie_throughput, profiling;

    /* Fast and slow passes read the model under the read lock; a re-load (fast thread) and a
     * MIG re-read (slow thread) change it under the write lock. */
    pthread_rwlock_t model_lock;
    struct model m;
    pthread_mutex_t slow_lock; /* gpu_state.slow and slow_at */
    struct events *events;
    atomic_uint_fast64_t errors;

    /* Owned by the fast thread (and by sampler_new before it starts). */
    struct gpu *ghosts; /* GPUs seen before that the current model lacks: shown as lost */
    unsigned n_ghosts;
    struct proc_cache *procs;
    nvmlProcessInfo_t *pbuf;
    unsigned pbuf_cap;

    pthread_mutex_t snap_lock;
    struct snapshot *current;
    /* Held while prepare runs, so that clearing it waits for a call in progress. */
    pthread_mutex_t prepare_lock;
    void (*prepare)(struct snapshot *snap, void *userdata);
    void *prepare_userdata;

    pthread_mutex_t lock; /* stop, slow_kick and slow_done, signalled by wake */
    pthread_cond_t wake;
    bool stop, slow_kick;
    unsigned slow_done; /* the model generation the last finished slow pass read */
    pthread_t fast_thread, slow_thread;
    bool fast_started, slow_started;
};

/* How long a re-load waits for the slow fields of the new model before it publishes without
 * them; a driver stuck in a slow call must not stop the fast snapshots. */
#define RELOAD_SLOW_WAIT_S 2
/* A lost GPU usually stays lost until a reset or a reboot, and every re-open pauses sampling and
 * XID events for a moment; so re-opens for a lost GPU back off, doubling up to this. */
#define LOST_RETRY_MAX_S 300.0
/* A GPU all of whose calls fail for this many fast passes in a row is shown lost: one bad pass may
 * be a hiccup, but a GPU that answers nothing must not look healthy with its series missing. */
#define FAILING_PASSES 3

/* ---- time ---- */

static double clock_now(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* The next tick of a schedule of fixed steps. After a pass longer than a step, or a suspend,
 * the missed ticks are skipped rather than run back to back; the phase stays, so no drift. */
static double next_tick(double prev, double step, double now)
{
    double next = prev + step;
    if (next <= now)
        next = prev + step * (floor((now - prev) / step) + 1);
    return next;
}

/* Sleeps until the monotonic deadline, a stop or (with kicked) a slow-pass kick. Returns true
 * when stopping. */
static bool wait_until(struct sampler *s, double deadline, bool *kicked)
{
    struct timespec ts = {.tv_sec = (time_t)deadline};
    ts.tv_nsec = (long)((deadline - (double)ts.tv_sec) * 1e9);
    if (ts.tv_nsec >= 1000000000L)
        ts.tv_nsec = 999999999L;
    pthread_mutex_lock(&s->lock);
    while (!s->stop && !(kicked && s->slow_kick))
        if (pthread_cond_timedwait(&s->wake, &s->lock, &ts) != 0)
            break;
    bool stop = s->stop;
    if (kicked) {
        *kicked = s->slow_kick;
        s->slow_kick = false;
    }
    pthread_mutex_unlock(&s->lock);
    return stop;
}

/* ---- NVML calls ---- */

/* One GPU being read by one thread: where its outcomes are booked. */
struct reader {
    struct sampler *s;
    const struct nvml_api *api;
    struct gpu_state *st;
    uint64_t *unsupported; /* the mask of the reading thread */
    unsigned ok, failed;   /* calls that succeeded and that failed (NOT_SUPPORTED is neither) */
};

static bool want(const struct reader *rd, enum probe p)
{
    return !atomic_load(&rd->st->lost) && !(*rd->unsupported & (UINT64_C(1) << p));
}

/* Books the outcome of one call; true on success. */
static bool check(struct reader *rd, enum probe p, nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS:
        rd->ok++;
        return true;
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        *rd->unsupported |= UINT64_C(1) << p;
        return false;
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_GPU_NOT_FOUND:
    case NVML_ERROR_RESET_REQUIRED:
        /* The GPU will not answer again before a reset, and only a re-open of NVML sees a reset
         * GPU: treat it as fallen off the bus. */
        atomic_store(&rd->st->lost, true);
        break;
    default:
        break;
    }
    rd->failed++;
    atomic_fetch_add(&rd->s->errors, 1);
    return false;
}

/* Calls an optional entry point if the probe is still wanted; a driver without the entry point
 * is treated as one that does not support the field. True on success. */
#define CALL(rd, probe, fn, ...)                                                                   \
    (want(rd, probe) &&                                                                            \
     check(rd, probe, (rd)->api->fn ? (rd)->api->fn(__VA_ARGS__) : NVML_ERROR_FUNCTION_NOT_FOUND))

static void set_memory(struct gpu_values *v, unsigned long long used, unsigned long long free,
                       unsigned long long total)
{
    /* dcgm-exporter reports whole MiB. */
    gpu_values_set(v, GF_FB_USED, (double)(used >> 20));
    gpu_values_set(v, GF_FB_FREE, (double)(free >> 20));
    gpu_values_set(v, GF_FB_TOTAL, (double)(total >> 20));
}

/* Framebuffer use of a GPU or MIG device. Version 2 leaves the driver's own reservation out of
 * "used", as nvidia-smi does; older drivers without it count the reservation as used. */
static void read_memory(struct reader *rd, enum probe v2, enum probe v1, nvmlDevice_t h,
                        struct gpu_values *v)
{
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    nvmlMemory_t m;
    if (CALL(rd, v2, nvmlDeviceGetMemoryInfo_v2, h, &m2)) {
        set_memory(v, m2.used, m2.free, m2.total);
        gpu_values_set(v, GF_FB_RESERVED, (double)(m2.reserved >> 20));
    } else if ((*rd->unsupported & (UINT64_C(1) << v2)) &&
               CALL(rd, v1, nvmlDeviceGetMemoryInfo, h, &m))
        set_memory(v, m.used, m.free, m.total);
}

static bool field_value(const nvmlFieldValue_t *f, double *ret)
{
    switch (f->valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
        *ret = f->value.dVal;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
        *ret = f->value.uiVal;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
        *ret = (double)f->value.ulVal;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        *ret = (double)f->value.ullVal;
        return true;
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        *ret = (double)f->value.sllVal;
        return true;
    case NVML_VALUE_TYPE_SIGNED_INT:
        *ret = f->value.siVal;
        return true;
    case NVML_VALUE_TYPE_UNSIGNED_SHORT:
        *ret = f->value.usVal;
        return true;
    default:
        return false;
    }
}

/* Reads n field values as one probe; true when the call and every field succeeded. The call
 * succeeds even when a field cannot be read: the fields' own answers are the outcome, so a GPU
 * that answers nothing else does not count as answering. */
static bool read_fields(struct reader *rd, enum probe p, nvmlDevice_t h, int n, nvmlFieldValue_t *f)
{
    if (!want(rd, p))
        return false;
    nvmlReturn_t r = rd->api->nvmlDeviceGetFieldValues ? rd->api->nvmlDeviceGetFieldValues(h, n, f)
                                                       : NVML_ERROR_FUNCTION_NOT_FOUND;
    for (int i = 0; r == NVML_SUCCESS && i < n; i++)
        r = f[i].nvmlReturn;
    return check(rd, p, r);
}

/* Memory temperature has no getter of its own; it is a field value. */
static void read_memory_temp(struct reader *rd, nvmlDevice_t h, struct gpu_values *v)
{
    nvmlFieldValue_t f = {.fieldId = NVML_FI_DEV_MEMORY_TEMP};
    double t;
    if (read_fields(rd, P_MEM_TEMP, h, 1, &f) && field_value(&f, &t))
        gpu_values_set(v, GF_MEMORY_TEMP, t);
}

static void read_basic(struct reader *rd, nvmlDevice_t h, struct gpu_values *v)
{
    nvmlUtilization_t u;
    unsigned x, period;
    if (CALL(rd, P_UTIL, nvmlDeviceGetUtilizationRates, h, &u)) {
        gpu_values_set(v, GF_GPU_UTIL, u.gpu);
        gpu_values_set(v, GF_MEM_COPY_UTIL, u.memory);
    }
    read_memory(rd, P_MEMORY_V2, P_MEMORY, h, v);
    if (CALL(rd, P_TEMP, nvmlDeviceGetTemperature, h, NVML_TEMPERATURE_GPU, &x))
        gpu_values_set(v, GF_GPU_TEMP, x);
    read_memory_temp(rd, h, v);
    if (CALL(rd, P_POWER, nvmlDeviceGetPowerUsage, h, &x))
        gpu_values_set(v, GF_POWER_USAGE, x / 1000.0); /* mW */
    if (CALL(rd, P_POWER_LIMIT, nvmlDeviceGetEnforcedPowerLimit, h, &x))
        gpu_values_set(v, GF_POWER_LIMIT, x / 1000.0);
    if (CALL(rd, P_SM_CLOCK, nvmlDeviceGetClockInfo, h, NVML_CLOCK_SM, &x))
        gpu_values_set(v, GF_SM_CLOCK, x);
    if (CALL(rd, P_MEM_CLOCK, nvmlDeviceGetClockInfo, h, NVML_CLOCK_MEM, &x))
        gpu_values_set(v, GF_MEM_CLOCK, x);
    if (CALL(rd, P_FAN, nvmlDeviceGetFanSpeed, h, &x))
        gpu_values_set(v, GF_FAN_SPEED, x);
    if (CALL(rd, P_PCIE_REPLAY, nvmlDeviceGetPcieReplayCounter, h, &x))
        gpu_values_set(v, GF_PCIE_REPLAY, x);
    if (CALL(rd, P_ENC, nvmlDeviceGetEncoderUtilization, h, &x, &period))
        gpu_values_set(v, GF_ENC_UTIL, x);
    if (CALL(rd, P_DEC, nvmlDeviceGetDecoderUtilization, h, &x, &period))
        gpu_values_set(v, GF_DEC_UTIL, x);
}

/* ECC counters, when ECC is on. */
static void read_ecc(struct reader *rd, nvmlDevice_t h, struct gpu_values *v)
{
    nvmlEnableState_t current, pending;
    unsigned long long n;
    if (!CALL(rd, P_ECC_MODE, nvmlDeviceGetEccMode, h, &current, &pending) ||
        current != NVML_FEATURE_ENABLED)
        return;
    static const struct {
        enum gpu_field field;
        enum probe probe;
        nvmlMemoryErrorType_t type;
        nvmlEccCounterType_t counter;
    } ecc[] = {
        {GF_ECC_SBE_VOL, P_ECC_SBE_VOL, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_VOLATILE_ECC},
        {GF_ECC_DBE_VOL, P_ECC_DBE_VOL, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_VOLATILE_ECC},
        {GF_ECC_SBE_AGG, P_ECC_SBE_AGG, NVML_MEMORY_ERROR_TYPE_CORRECTED, NVML_AGGREGATE_ECC},
        {GF_ECC_DBE_AGG, P_ECC_DBE_AGG, NVML_MEMORY_ERROR_TYPE_UNCORRECTED, NVML_AGGREGATE_ECC},
    };
    for (size_t i = 0; i < ELEMENTSOF(ecc); i++)
        if (CALL(rd, ecc[i].probe, nvmlDeviceGetTotalEccErrors, h, ecc[i].type, ecc[i].counter, &n))
            gpu_values_set(v, ecc[i].field, (double)n);
}

/* DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL: DCGM's rate of NVLink payload over all links, both
 * directions, in MiB/s, from NVML's cumulative KiB counters. The first pass only takes the
 * baseline; a counter that went back (a driver reload) starts a new one. */
static void read_nvlink(struct reader *rd, nvmlDevice_t h, struct gpu_values *v, double now)
{
    nvmlFieldValue_t f[2] = {
        {.fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, .scopeId = UINT32_MAX},
        {.fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, .scopeId = UINT32_MAX},
    };
    double tx, rx;
    if (!read_fields(rd, P_NVLINK, h, 2, f) || !field_value(&f[0], &tx) || !field_value(&f[1], &rx))
        return;
    struct gpu_state *st = rd->st;
    double kib = tx + rx, dt = now - st->nvlink_at;
    if (st->nvlink_at > 0 && dt > 0 && kib >= st->nvlink_kib)
        gpu_values_set(v, GF_NVLINK_BANDWIDTH, (kib - st->nvlink_kib) / 1024.0 / dt);
    st->nvlink_kib = kib;
    st->nvlink_at = now;
}

static void read_health(struct reader *rd, nvmlDevice_t h, struct gpu_values *v)
{
    unsigned long long mask;
    bool have_mask = CALL(rd, P_CLOCK_EVENTS, nvmlDeviceGetCurrentClocksEventReasons, h, &mask);
    /* Drivers before 535 only know the older name of the same call. */
    if (!have_mask && (*rd->unsupported & (UINT64_C(1) << P_CLOCK_EVENTS)))
        have_mask = CALL(rd, P_THROTTLE, nvmlDeviceGetCurrentClocksThrottleReasons, h, &mask);
    if (have_mask)
        gpu_values_set(v, GF_CLOCK_EVENTS, (double)mask);
    read_ecc(rd, h, v);
}

/* ---- processes ---- */

/* Adds NVML's list to out's processes. A pid in both the compute and the graphics list (what
 * nvidia-smi shows as "C+G") is one process, and NVML reports the process's whole usage in each
 * list: summing would count it twice, so the larger of the two is kept. */
static int merge_procs(struct gpu_sample *out, unsigned *cap, const nvmlProcessInfo_t *p,
                       unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        bool known = p[i].usedGpuMemory != NVML_VALUE_NOT_AVAILABLE;
        struct proc_sample *ps = NULL;
        for (unsigned j = 0; j < out->n_proc && !ps; j++)
            if (out->proc[j].pid == (pid_t)p[i].pid)
                ps = &out->proc[j];
        if (!ps) {
            if (out->n_proc == *cap) {
                unsigned c = *cap ? 2 * *cap : 8;
                struct proc_sample *np = reallocarray(out->proc, c, sizeof(*np));
                if (!np)
                    return -ENOMEM;
                out->proc = np;
                *cap = c;
            }
            ps = &out->proc[out->n_proc++];
            *ps = (struct proc_sample){.pid = (pid_t)p[i].pid, .gi_id = p[i].gpuInstanceId};
        }
        if (known && (!ps->has_memory || p[i].usedGpuMemory > ps->memory)) {
            ps->memory = p[i].usedGpuMemory;
            ps->has_memory = true;
        }
    }
    return 0;
}

typedef nvmlReturn_t (*procs_fn)(nvmlDevice_t, unsigned *, nvmlProcessInfo_t *);

/* One process list into the sampler's scratch buffer. Returns the count, or -1 if unavailable. */
static int query_procs(struct reader *rd, enum probe p, procs_fn fn, nvmlDevice_t h)
{
    struct sampler *s = rd->s;
    if (!fn) {
        check(rd, p, NVML_ERROR_FUNCTION_NOT_FOUND);
        return -1;
    }
    /* Processes may start between the size query and the read: retry a few times. */
    for (int attempt = 0; attempt < 4 && want(rd, p); attempt++) {
        unsigned n = s->pbuf_cap;
        nvmlReturn_t r = fn(h, &n, s->pbuf);
        if (r == NVML_ERROR_INSUFFICIENT_SIZE) {
            unsigned cap = n + 16;
            nvmlProcessInfo_t *b = reallocarray(s->pbuf, cap, sizeof(*b));
            if (!b)
                return -1;
            s->pbuf = b;
            s->pbuf_cap = cap;
            continue;
        }
        if (!check(rd, p, r))
            return -1;
        return (int)(n <= s->pbuf_cap ? n : s->pbuf_cap);
    }
    return -1;
}

static int read_procs(struct reader *rd, nvmlDevice_t h, struct gpu_sample *out)
{
    struct sampler *s = rd->s;
    unsigned cap = 0;
    if (!s->pbuf) {
        s->pbuf = calloc(16, sizeof(*s->pbuf));
        if (!s->pbuf)
            return -ENOMEM;
        s->pbuf_cap = 16;
    }
    int n = query_procs(rd, P_COMPUTE_PROCS, rd->api->nvmlDeviceGetComputeRunningProcesses_v3, h);
    if (n > 0 && merge_procs(out, &cap, s->pbuf, (unsigned)n) < 0)
        return -ENOMEM;
    n = query_procs(rd, P_GRAPHICS_PROCS, rd->api->nvmlDeviceGetGraphicsRunningProcesses_v3, h);
    if (n > 0 && merge_procs(out, &cap, s->pbuf, (unsigned)n) < 0)
        return -ENOMEM;
    for (unsigned i = 0; i < out->n_proc; i++)
        if (proc_cache_fill(s->procs, &out->proc[i]) < 0)
            return -ENOMEM;
    return 0;
}

/* ---- one GPU in a fast pass ---- */

static int read_migs(struct reader *rd, const struct gpu *g, struct gpu_sample *out)
{
    if (!g->mig_enabled || g->n_mig == 0)
        return 0;
    out->mig = calloc(g->n_mig, sizeof(*out->mig));
    if (!out->mig)
        return -ENOMEM;
    out->n_mig = g->n_mig;
    for (unsigned i = 0; i < g->n_mig; i++) {
        out->mig[i].id = g->mig[i];
        read_memory(rd, P_MIG_MEMORY_V2, P_MIG_MEMORY, g->mig[i].handle, &out->mig[i].values);
    }
    return 0;
}

/* Copies the slow values that are fresh enough: one older than three slow intervals means the
 * slow thread is stuck in a call, and a stale energy counter is worse than none. */
static void merge_slow(struct sampler *s, struct gpu_state *st, struct gpu_values *v, double now)
{
    double max_age = 3 * s->slow_interval;
    pthread_mutex_lock(&s->slow_lock);
    for (int f = 0; f < GF_COUNT; f++)
        if (gpu_values_has(&st->slow, f) && now - st->slow_at[f] <= max_age)
            gpu_values_set(v, f, st->slow.v[f]);
    pthread_mutex_unlock(&s->slow_lock);
}

static void clear_lost(struct gpu_sample *out)
{
    memset(&out->values, 0, sizeof(out->values));
    free(out->mig);
    free(out->proc);
    out->mig = NULL;
    out->proc = NULL;
    out->n_mig = out->n_proc = 0;
    out->lost = true;
}

/* Books one fast pass over a GPU: a pass with a success ends a failing streak; one in which every
 * call made failed extends it. A pass of NOT_SUPPORTED answers only does neither. */
static void book_pass(struct gpu_state *st, const struct reader *rd)
{
    if (rd->ok > 0)
        st->failed_passes = 0;
    else if (rd->failed > 0 && st->failed_passes < FAILING_PASSES)
        st->failed_passes++;
}

static int sample_gpu(struct sampler *s, const struct gpu *g, struct gpu_state *st,
                      struct gpu_sample *out, double now)
{
    struct reader rd = {
        .s = s, .api = nvml_api(s->m.nvml), .st = st, .unsupported = &st->fast_unsupported};
    int r = 0;
    out->id = *g;
    out->id.mig = NULL;
    out->id.n_mig = 0;
    if (!g->error && !st->broken && !atomic_load(&st->lost)) {
        read_basic(&rd, g->handle, &out->values);
        read_health(&rd, g->handle, &out->values);
        read_nvlink(&rd, g->handle, &out->values, now);
        merge_slow(s, st, &out->values, now);
        if (s->process_metrics)
            r = read_procs(&rd, g->handle, out);
        if (r >= 0)
            r = read_migs(&rd, g, out);
        out->id.n_mig = out->n_mig;
        if (r >= 0 && s->profiling)
            prof_read(&st->prof, rd.api, g, out, &s->errors);
        if (r >= 0)
            book_pass(st, &rd);
    }
    /* A failing GPU is still read every pass (above), so that it is shown again with its first
     * success; it does not make NVML re-open, which would not help a GPU that answers. */
    if (g->error || st->broken || atomic_load(&st->lost) || st->failed_passes >= FAILING_PASSES)
        clear_lost(out);
    if (r >= 0)
        r = events_fill(s->events, g->uuid, out);
    return r;
}

/* ---- snapshots ---- */

static int fill_up(struct sampler *s, struct snapshot *snap, double now)
{
    const struct gpu_list *l = s->m.list;
    snap->up = true;
    snprintf(snap->driver_version, sizeof(snap->driver_version), "%s", l->driver_version);
    snap->cuda_version = l->cuda_version;
    unsigned n = l->n + s->n_ghosts;
    snap->gpu = calloc(n ? n : 1, sizeof(*snap->gpu));
    if (!snap->gpu)
        return -ENOMEM;
    snap->n_gpu = n; /* from here on snapshot_unref() frees what the samples hold */
    snap->n_nvml_gpu = l->n;
    for (unsigned i = 0; i < l->n; i++) {
        int r = sample_gpu(s, &l->gpus[i], &s->m.state[i], &snap->gpu[i], now);
        if (r < 0)
            return r;
    }
    for (unsigned i = 0; i < s->n_ghosts; i++) {
        struct gpu_sample *out = &snap->gpu[l->n + i];
        out->id = s->ghosts[i];
        out->lost = true;
        int r = events_fill(s->events, out->id.uuid, out);
        if (r < 0)
            return r;
    }
    return 0;
}

static void publish(struct sampler *s, struct snapshot *snap)
{
    pthread_mutex_lock(&s->prepare_lock);
    if (s->prepare)
        s->prepare(snap, s->prepare_userdata);
    pthread_mutex_unlock(&s->prepare_lock);
    pthread_mutex_lock(&s->snap_lock);
    struct snapshot *old = s->current;
    s->current = snap;
    pthread_mutex_unlock(&s->snap_lock);
    snapshot_unref(old);
}

/* Builds and publishes one snapshot. Out of memory keeps the previous one; the sample age
 * shows it. */
static int fast_pass(struct sampler *s)
{
    double start = clock_now_sec();
    _cleanup_(snapshot_unrefp) struct snapshot *snap = snapshot_new();
    if (!snap)
        return -ENOMEM;
    snap->taken_at = clock_now(CLOCK_REALTIME);
    snprintf(snap->hostname, sizeof(snap->hostname), "%s", s->hostname);
    int r = 0;
    pthread_rwlock_rdlock(&s->model_lock);
    bool up = s->m.nvml != NULL;
    if (up)
        r = fill_up(s, snap, start);
    else
        snprintf(snap->reason, sizeof(snap->reason), "%s", s->m.reason);
    pthread_rwlock_unlock(&s->model_lock);
    if (up)
        proc_cache_sweep(s->procs);
    if (r < 0)
        return r;
    snap->nvml_errors = atomic_load(&s->errors) + events_errors(s->events);
    snap->sample_duration = clock_now_sec() - start;
    publish(s, TAKE_PTR(snap));
    return 0;
}

/* ---- slow pass ---- */

static void read_slow(struct reader *rd, nvmlDevice_t h)
{
    struct sampler *s = rd->s;
    struct gpu_values v = {0};
    unsigned long long energy;
    unsigned corr, unc, pending, failure, x;
    if (CALL(rd, P_ENERGY, nvmlDeviceGetTotalEnergyConsumption, h, &energy))
        gpu_values_set(&v, GF_TOTAL_ENERGY, (double)energy); /* mJ */
    if (CALL(rd, P_REMAP, nvmlDeviceGetRemappedRows, h, &corr, &unc, &pending, &failure)) {
        gpu_values_set(&v, GF_ROWS_CORRECTABLE, corr);
        gpu_values_set(&v, GF_ROWS_UNCORRECTABLE, unc);
        gpu_values_set(&v, GF_ROW_REMAP_PENDING, pending ? 1 : 0);
        gpu_values_set(&v, GF_ROW_REMAP_FAILURE, failure ? 1 : 0);
    }
    nvmlGpuVirtualizationMode_t mode;
    /* DCGM's vGPU licence status is about vGPU guests; a GPU that is not one needs no licence
     * and reads 0, as dcgm-exporter shows on bare metal. gpumon cannot read a guest's licence
     * yet, so a guest shows nothing rather than a guess. */
    if (CALL(rd, P_VIRT_MODE, nvmlDeviceGetVirtualizationMode, h, &mode) &&
        mode != NVML_GPU_VIRTUALIZATION_MODE_VGPU)
        gpu_values_set(&v, GF_VGPU_LICENSE, 0);
    if (s->pcie_throughput) {
        /* NVML samples for 20 ms and answers in KB/s. */
        if (CALL(rd, P_PCIE_TX, nvmlDeviceGetPcieThroughput, h, NVML_PCIE_UTIL_TX_BYTES, &x))
            gpu_values_set(&v, GF_PCIE_TX, x * 1024.0);
        if (CALL(rd, P_PCIE_RX, nvmlDeviceGetPcieThroughput, h, NVML_PCIE_UTIL_RX_BYTES, &x))
            gpu_values_set(&v, GF_PCIE_RX, x * 1024.0);
    }
    double now = clock_now_sec();
    pthread_mutex_lock(&s->slow_lock);
    for (int f = 0; f < GF_COUNT; f++)
        if (gpu_values_has(&v, f)) {
            gpu_values_set(&rd->st->slow, f, v.v[f]);
            rd->st->slow_at[f] = now;
        }
    pthread_mutex_unlock(&s->slow_lock);
}

static const struct gpu_mig *mig_by_index(const struct gpu *g, unsigned index)
{
    for (unsigned i = 0; i < g->n_mig; i++)
        if (g->mig[i].index == index)
            return &g->mig[i];
    return NULL;
}

/* True if the GPU's MIG mode or MIG devices (by slot, GPU instance and compute instance) differ
 * from the model's, i.e. someone re-partitioned it since it was loaded. */
static bool mig_differs(struct reader *rd, const struct gpu *g)
{
    const struct nvml_api *api = rd->api;
    unsigned current, pending, max, found = 0;
    if (!CALL(rd, P_MIG_MODE, nvmlDeviceGetMigMode, g->handle, &current, &pending))
        return false;
    bool enabled = current == NVML_DEVICE_MIG_ENABLE;
    if (enabled != g->mig_enabled)
        return true;
    if (!enabled || !api->nvmlDeviceGetMigDeviceHandleByIndex || !api->nvmlDeviceGetGpuInstanceId ||
        !api->nvmlDeviceGetComputeInstanceId ||
        !CALL(rd, P_MIG_DEVICES, nvmlDeviceGetMaxMigDeviceCount, g->handle, &max))
        return false;
    for (unsigned i = 0; i < max; i++) {
        nvmlDevice_t md;
        unsigned gi, ci;
        nvmlReturn_t r = api->nvmlDeviceGetMigDeviceHandleByIndex(g->handle, i, &md);
        if (r == NVML_ERROR_NOT_FOUND || r == NVML_ERROR_INVALID_ARGUMENT)
            continue; /* an empty slot */
        if (!check(rd, P_MIG_DEVICES, r))
            return false;
        const struct gpu_mig *known = mig_by_index(g, i);
        if (!known)
            return true;
        if (!check(rd, P_MIG_DEVICES, api->nvmlDeviceGetGpuInstanceId(md, &gi)) ||
            !check(rd, P_MIG_DEVICES, api->nvmlDeviceGetComputeInstanceId(md, &ci)))
            return false;
        if (gi != known->gi_id || ci != known->ci_id)
            return true;
        found++;
    }
    return found != g->n_mig;
}

/* Re-reads the MIG layout of the GPUs whose layout changed, unless the whole model was re-loaded
 * since the slow pass noticed (generation). Fast passes wait meanwhile: their MIG handles may be
 * gone. A GPU whose MIG mode changed forgets what it did not support: in MIG mode the parent
 * answers NOT_SUPPORTED for utilisation and encoder/decoder use, out of it they answer again. */
static void reload_migs(struct sampler *s, unsigned generation)
{
    pthread_rwlock_wrlock(&s->model_lock);
    for (unsigned i = 0; s->m.nvml && s->m.generation == generation && i < s->m.list->n; i++) {
        struct gpu *g = &s->m.list->gpus[i];
        struct gpu_state *st = &s->m.state[i];
        struct reader rd = {
            .s = s, .api = nvml_api(s->m.nvml), .st = st, .unsupported = &st->slow_unsupported};
        if (g->error || st->broken || !mig_differs(&rd, g))
            continue;
        bool was_enabled = g->mig_enabled;
        if (gpu_reload_mig(s->m.nvml, g, NULL) < 0)
            atomic_fetch_add(&s->errors, 1);
        else if (g->mig_enabled != was_enabled)
            st->fast_unsupported = st->slow_unsupported = 0;
        /* Samples from before the change would span it: every reader starts again. */
        prof_done(&st->prof);
    }
    pthread_rwlock_unlock(&s->model_lock);
}

/* Reads the slow fields; with reprobe, asks again what the GPUs did not support. Returns the model
 * generation it read. */
static unsigned slow_pass(struct sampler *s, bool reprobe)
{
    bool mig_changed = false;
    pthread_rwlock_rdlock(&s->model_lock);
    unsigned generation = s->m.generation;
    for (unsigned i = 0; s->m.nvml && i < s->m.list->n; i++) {
        const struct gpu *g = &s->m.list->gpus[i];
        struct gpu_state *st = &s->m.state[i];
        struct reader rd = {
            .s = s, .api = nvml_api(s->m.nvml), .st = st, .unsupported = &st->slow_unsupported};
        if (reprobe)
            st->slow_unsupported = 0;
        if (g->error || st->broken)
            continue;
        read_slow(&rd, g->handle);
        if (mig_differs(&rd, g))
            mig_changed = true;
    }
    pthread_rwlock_unlock(&s->model_lock);
    if (mig_changed)
        reload_migs(s, generation);
    return generation;
}

/* ---- the model ---- */

/* Opens NVML and loads the GPUs into s->m; on failure s->m is down with the reason. Called with
 * the model write-locked (or before the threads exist). */
static void model_open(struct sampler *s)
{
    struct model *m = &s->m;
    struct errmsg e = {""};
    /* Read before NVML enumerates, so that a GPU bound meanwhile shows as a change later. */
    m->pci_known = s->sysfs_root[0] && pci_gpus_read(s->sysfs_root, &m->pci) == 0;
    int r = nvml_open(s->nvml_library, &m->nvml, &e);
    if (r >= 0)
        r = gpu_list_load(m->nvml, &m->list, &e);
    if (r >= 0) {
        m->state = calloc(m->list->n ? m->list->n : 1, sizeof(*m->state));
        if (!m->state)
            r = errmsg_set(&e, -ENOMEM, "out of memory");
    }
    if (r < 0) {
        if (m->list)
            gpu_list_free(m->list);
        nvml_close(m->nvml);
        m->list = NULL;
        m->nvml = NULL;
        snprintf(m->reason, sizeof(m->reason), "%.*s", (int)sizeof(m->reason) - 1,
                 e.text[0] ? e.text : strerror(-r));
        return;
    }
    m->reason[0] = '\0';
    for (unsigned i = 0; i < m->list->n; i++) {
        int err = m->list->gpus[i].error;
        atomic_init(&m->state[i].lost, err == -ENODEV);
        /* Unreadable for another reason (permissions): re-loading would not help. */
        m->state[i].broken = err != 0 && err != -ENODEV;
    }
}

static void model_close(struct model *m)
{
    for (unsigned i = 0; m->state && m->list && i < m->list->n; i++)
        prof_done(&m->state[i].prof);
    free(m->state);
    if (m->list)
        gpu_list_free(m->list);
    nvml_close(m->nvml);
    m->state = NULL;
    m->list = NULL;
    m->nvml = NULL;
}

/* Remembers a GPU of the model being replaced, so that one the new model lacks (it fell off the
 * bus and NVML no longer counts it) is still shown as lost instead of silently vanishing. */
static void ghosts_add(struct sampler *s, const struct gpu *g)
{
    if (!g->uuid[0])
        return;
    for (unsigned i = 0; i < s->n_ghosts; i++)
        if (strcmp(s->ghosts[i].uuid, g->uuid) == 0)
            return;
    struct gpu *n = reallocarray(s->ghosts, s->n_ghosts + 1, sizeof(*n));
    if (!n)
        return; /* the GPU is then just not shown */
    s->ghosts = n;
    n[s->n_ghosts] = *g;
    n[s->n_ghosts].error = -ENODEV;
    n[s->n_ghosts].n_mig = 0;
    n[s->n_ghosts].mig = NULL;
    n[s->n_ghosts].handle = NULL;
    s->n_ghosts++;
}

/* A GPU lost before the load is listed without its UUID (NVML gives no handle for it): it takes
 * the identity the ghost of the same index had, so its series keep their labels. The list is
 * ours and write-locked here. */
static void ghosts_adopt(struct sampler *s, struct gpu_list *l)
{
    for (unsigned i = 0; i < l->n; i++) {
        struct gpu *g = &l->gpus[i];
        if (!g->error || g->uuid[0])
            continue;
        for (unsigned j = 0; j < s->n_ghosts; j++)
            if (s->ghosts[j].index == g->index) {
                const struct gpu *old = &s->ghosts[j];
                memcpy(g->uuid, old->uuid, sizeof(g->uuid));
                memcpy(g->name, old->name, sizeof(g->name));
                memcpy(g->pci_bus_id, old->pci_bus_id, sizeof(g->pci_bus_id));
                g->minor = old->minor;
                g->has_minor = old->has_minor;
                g->cc_major = old->cc_major;
                g->cc_minor = old->cc_minor;
                break;
            }
    }
}

/* Forgets the ghosts the new model has again. */
static void ghosts_prune(struct sampler *s, const struct gpu_list *l)
{
    unsigned kept = 0;
    for (unsigned i = 0; i < s->n_ghosts; i++) {
        bool back = false;
        for (unsigned j = 0; j < l->n && !back; j++)
            back = strcmp(s->ghosts[i].uuid, l->gpus[j].uuid) == 0;
        if (!back)
            s->ghosts[kept++] = s->ghosts[i];
    }
    s->n_ghosts = kept;
}

static void start_events(struct sampler *s)
{
    pthread_rwlock_rdlock(&s->model_lock);
    if (s->m.nvml && events_start(s->events, s->m.nvml, s->m.list, NULL) < 0)
        atomic_fetch_add(&s->errors, 1);
    pthread_rwlock_unlock(&s->model_lock);
}

enum reload_why {
    RELOAD_NO,
    RELOAD_DOWN,  /* NVML is not open */
    RELOAD_LOST,  /* a GPU was lost */
    RELOAD_COUNT, /* NVML's GPU count changed */
    RELOAD_PCI,   /* the kernel's GPUs changed since NVML was opened: hot-plugged, removed, or
                   * back after a reset */
};

/* Whether NVML should be opened again, and why. */
static enum reload_why reload_why(struct sampler *s)
{
    /* Outside the lock: sysfs reads take a moment, and only the fast thread re-loads. */
    struct pci_gpus pci;
    bool pci_known = s->sysfs_root[0] && pci_gpus_read(s->sysfs_root, &pci) == 0;
    pthread_rwlock_rdlock(&s->model_lock);
    const struct model *m = &s->m;
    enum reload_why why = m->nvml ? RELOAD_NO : RELOAD_DOWN;
    for (unsigned i = 0; why == RELOAD_NO && i < m->list->n; i++)
        if (atomic_load(&m->state[i].lost))
            why = RELOAD_LOST;
    /* A lost GPU may have come back under a new count: look at the count in any case. */
    if (why != RELOAD_DOWN) {
        unsigned count = 0;
        nvmlReturn_t r = nvml_api(m->nvml)->nvmlDeviceGetCount_v2(&count);
        if (r != NVML_SUCCESS)
            atomic_fetch_add(&s->errors, 1);
        if (r != NVML_SUCCESS || count != m->list->n)
            why = RELOAD_COUNT;
    }
    if (why == RELOAD_NO && pci_known && m->pci_known && !pci_gpus_equal(&pci, &m->pci))
        why = RELOAD_PCI;
    pthread_rwlock_unlock(&s->model_lock);
    return why;
}

/* Replaces the model. The events thread holds NVML handles, so it is stopped first and
 * restarted on the new model; its counts survive. */
static void reload(struct sampler *s)
{
    events_stop(s->events);
    pthread_rwlock_wrlock(&s->model_lock);
    for (unsigned i = 0; s->m.list && i < s->m.list->n; i++)
        ghosts_add(s, &s->m.list->gpus[i]);
    model_close(&s->m);
    /* NVML enumerates GPUs once per nvmlInit, so only a full shutdown and init sees a change. */
    model_open(s);
    s->m.generation++;
    if (s->m.list) {
        ghosts_adopt(s, s->m.list);
        ghosts_prune(s, s->m.list);
    }
    pthread_rwlock_unlock(&s->model_lock);
    start_events(s);
    /* The new model has no slow values yet: have them read now rather than a slow interval
     * later, and wait (a little) for them, so the next snapshot is complete again. */
    unsigned generation = s->m.generation;
    struct timespec until = clock_deadline_msec(RELOAD_SLOW_WAIT_S * 1000u);
    pthread_mutex_lock(&s->lock);
    s->slow_kick = true;
    pthread_cond_broadcast(&s->wake);
    while (s->m.nvml && !s->stop && s->slow_done != generation)
        if (pthread_cond_timedwait(&s->wake, &s->lock, &until) != 0)
            break;
    pthread_mutex_unlock(&s->lock);
}

/* ---- threads ---- */

/* When to re-open NVML for a lost GPU (or changed PCI GPUs) next, and how long to wait after
 * that. */
struct lost_retry {
    double at;
    double wait;
};

/* Reasons that may persist across re-opens (a GPU stays lost; the kernel's GPUs keep changing),
 * so that re-opening at every rescan would pause sampling for nothing. */
static bool backs_off(enum reload_why why)
{
    return why == RELOAD_LOST || why == RELOAD_PCI;
}

/* Asks the GPUs again for what they did not support. The fast thread's masks are its own. */
static void reprobe_fast(struct sampler *s)
{
    pthread_rwlock_rdlock(&s->model_lock);
    for (unsigned i = 0; s->m.nvml && i < s->m.list->n; i++) {
        s->m.state[i].fast_unsupported = 0;
        prof_reprobe(&s->m.state[i].prof);
    }
    pthread_rwlock_unlock(&s->model_lock);
}

static void rescan(struct sampler *s, double now, struct lost_retry *lr)
{
    enum reload_why why = reload_why(s);
    if (!backs_off(why))
        *lr = (struct lost_retry){.at = 0, .wait = s->rescan_interval};
    if (why == RELOAD_NO || (backs_off(why) && now < lr->at)) {
        reprobe_fast(s);
        return;
    }
    reload(s);
    if (backs_off(why)) {
        lr->at = now + lr->wait;
        lr->wait = fmin(lr->wait * 2, fmax(LOST_RETRY_MAX_S, s->rescan_interval));
    }
}

static void *fast_main(void *userdata)
{
    struct sampler *s = userdata;
    double tick = clock_now_sec(), next_rescan = tick + s->rescan_interval;
    struct lost_retry lr = {.at = 0, .wait = s->rescan_interval};
    for (;;) {
        tick = next_tick(tick, s->interval, clock_now_sec());
        if (wait_until(s, tick, NULL))
            return NULL;
        double now = clock_now_sec();
        if (now >= next_rescan) {
            next_rescan = next_tick(next_rescan, s->rescan_interval, now);
            rescan(s, now, &lr);
        }
        (void)fast_pass(s);
    }
}

static void *slow_main(void *userdata)
{
    struct sampler *s = userdata;
    double tick = clock_now_sec(), next_reprobe = tick + s->rescan_interval;
    for (;;) {
        bool kicked;
        tick = next_tick(tick, s->slow_interval, clock_now_sec());
        if (wait_until(s, tick, &kicked))
            return NULL;
        double now = clock_now_sec();
        if (kicked)
            tick = now;
        bool reprobe = now >= next_reprobe;
        if (reprobe)
            next_reprobe = next_tick(next_reprobe, s->rescan_interval, now);
        unsigned generation = slow_pass(s, reprobe);
        pthread_mutex_lock(&s->lock);
        s->slow_done = generation;
        pthread_cond_broadcast(&s->wake);
        pthread_mutex_unlock(&s->lock);
    }
}

static int copy_strings(struct sampler *s, const struct sampler_config *c)
{
    char host[256] = "";
    if (c->nvml_library && *c->nvml_library && !(s->nvml_library = strdup(c->nvml_library)))
        return -ENOMEM;
    if (!c->hostname && (gethostname(host, sizeof(host) - 1) < 0 || !host[0]))
        snprintf(host, sizeof(host), "localhost");
    s->hostname = strdup(c->hostname ? c->hostname : host);
    s->sysfs_root = strdup(c->sysfs_root ? c->sysfs_root : "/sys");
    if (!s->hostname || !s->sysfs_root)
        return -ENOMEM;
    return proc_cache_new(c->proc_root, &s->procs);
}

int sampler_new(const struct sampler_config *c, struct sampler **ret, struct errmsg *e)
{
    if (!(c->interval_s > 0) || !(c->slow_interval_s > 0) || !(c->rescan_interval_s > 0))
        return errmsg_set(e, -EINVAL, "sampling intervals must be above 0");
    _cleanup_(sampler_freep) struct sampler *s = calloc(1, sizeof(*s));
    if (!s)
        return errmsg_set(e, -ENOMEM, "out of memory");
    pthread_rwlock_init(&s->model_lock, NULL);
    pthread_mutex_init(&s->slow_lock, NULL);
    pthread_mutex_init(&s->snap_lock, NULL);
    pthread_mutex_init(&s->prepare_lock, NULL);
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&s->wake, &attr);
    pthread_condattr_destroy(&attr);
    s->interval = c->interval_s;
    s->slow_interval = c->slow_interval_s;
    s->rescan_interval = c->rescan_interval_s;
    s->process_metrics = c->process_metrics;
    s->pcie_throughput = c->pcie_throughput;
    s->profiling = c->profiling;
    if (copy_strings(s, c) < 0 || events_new(&s->events) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");

    /* The first snapshot is complete, slow fields included, before anyone can scrape. */
    model_open(s);
    start_events(s);
    slow_pass(s, false);
    if (fast_pass(s) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");

    int r = -pthread_create(&s->fast_thread, NULL, fast_main, s);
    if (r < 0)
        return errmsg_set(e, r, "cannot start the sampler thread: %s", strerror(-r));
    s->fast_started = true;
    r = -pthread_create(&s->slow_thread, NULL, slow_main, s);
    if (r < 0)
        return errmsg_set(e, r, "cannot start the slow sampler thread: %s", strerror(-r));
    s->slow_started = true;
    *ret = TAKE_PTR(s);
    return 0;
}

void sampler_free(struct sampler *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    s->stop = true;
    pthread_cond_broadcast(&s->wake);
    pthread_mutex_unlock(&s->lock);
    if (s->fast_started)
        pthread_join(s->fast_thread, NULL);
    if (s->slow_started)
        pthread_join(s->slow_thread, NULL);
    events_free(s->events);
    model_close(&s->m);
    snapshot_unref(s->current);
    free(s->ghosts);
    proc_cache_free(s->procs);
    free(s->pbuf);
    free(s->nvml_library);
    free(s->hostname);
    free(s->sysfs_root);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->snap_lock);
    pthread_mutex_destroy(&s->prepare_lock);
    pthread_mutex_destroy(&s->slow_lock);
    pthread_rwlock_destroy(&s->model_lock);
    free(s);
}

void sampler_set_prepare(struct sampler *s, void (*fn)(struct snapshot *snap, void *userdata),
                         void *userdata)
{
    pthread_mutex_lock(&s->prepare_lock);
    s->prepare = fn;
    s->prepare_userdata = userdata;
    pthread_mutex_unlock(&s->prepare_lock);
}

struct snapshot *sampler_current(struct sampler *s)
{
    pthread_mutex_lock(&s->snap_lock);
    struct snapshot *snap = snapshot_ref(s->current);
    pthread_mutex_unlock(&s->snap_lock);
    return snap;
}
