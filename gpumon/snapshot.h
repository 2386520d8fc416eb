/* A snapshot: everything one scrape shows, taken by the sampler at one moment.
 *
 * The sampler builds a new snapshot each pass and publishes it (sampler.h); a scrape takes a
 * reference to the current one and renders it (expose.h) without ever calling NVML, so a scrape
 * never waits for the driver and never sees half of one pass and half of the next.
 * A published snapshot is immutable; it is freed when its last reference goes. */
#pragma once

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/gpu.h"

/* The numeric fields of a GPU (or MIG device). A field the device does not support, or whose
 * read failed, has its bit clear in `have` and is left out of the exposition. */
enum gpu_field {
    GF_GPU_UTIL,         /* % */
    GF_MEM_COPY_UTIL,    /* % */
    GF_ENC_UTIL,         /* % */
    GF_DEC_UTIL,         /* % */
    GF_FB_USED,          /* MiB */
    GF_FB_FREE,          /* MiB */
    GF_FB_TOTAL,         /* MiB */
    GF_GPU_TEMP,         /* °C */
    GF_MEMORY_TEMP,      /* °C */
    GF_POWER_USAGE,      /* W */
    GF_POWER_LIMIT,      /* W (enforced limit) */
    GF_TOTAL_ENERGY,     /* mJ since driver load; slow field */
    GF_SM_CLOCK,         /* MHz */
    GF_MEM_CLOCK,        /* MHz */
    GF_FAN_SPEED,        /* % */
    GF_PCIE_REPLAY,      /* count */
    GF_PCIE_TX,          /* bytes/s; slow field, off by default */
    GF_PCIE_RX,          /* bytes/s; slow field, off by default */
    GF_CLOCK_EVENTS,     /* bit mask of nvmlClocksEventReason* */
    GF_ECC_SBE_VOL,      /* corrected, since driver load */
    GF_ECC_DBE_VOL,      /* uncorrected, since driver load */
    GF_ECC_SBE_AGG,      /* corrected, lifetime */
    GF_ECC_DBE_AGG,      /* uncorrected, lifetime */
    GF_ROWS_CORRECTABLE, /* remapped rows; slow field */
    GF_ROWS_UNCORRECTABLE,
    GF_ROW_REMAP_PENDING, /* 0/1 */
    GF_ROW_REMAP_FAILURE, /* 0/1 */
    GF_FB_RESERVED,       /* MiB the driver keeps for itself */
    GF_NVLINK_BANDWIDTH,  /* MiB/s of NVLink payload, all links, both directions */
    GF_VGPU_LICENSE,      /* vGPU licence status; 0 on bare metal */
    /* Profiling fields from NVML's GPU Performance Monitoring (gpm.h): ratios 0..1 over the last
     * sampling interval, rates in bytes/s. */
    GF_PROF_GR_ENGINE_ACTIVE,
    GF_PROF_SM_ACTIVE,
    GF_PROF_SM_OCCUPANCY,
    GF_PROF_PIPE_TENSOR_ACTIVE,
    GF_PROF_PIPE_TENSOR_DFMA_ACTIVE,
    GF_PROF_PIPE_TENSOR_HMMA_ACTIVE,
    GF_PROF_PIPE_TENSOR_IMMA_ACTIVE,
    GF_PROF_DRAM_ACTIVE,
    GF_PROF_PIPE_FP64_ACTIVE,
    GF_PROF_PIPE_FP32_ACTIVE,
    GF_PROF_PIPE_FP16_ACTIVE,
    GF_PROF_PIPE_INT_ACTIVE,
    GF_PROF_PCIE_TX_BYTES,
    GF_PROF_PCIE_RX_BYTES,
    GF_PROF_NVLINK_TX_BYTES,
    GF_PROF_NVLINK_RX_BYTES,
    GF_COUNT,
};
_Static_assert(GF_COUNT <= 64, "gpu_values.have is a 64-bit mask");

struct gpu_values {
    uint64_t have; /* bit (1 << field) set when v[field] is valid */
    double v[GF_COUNT];
};

static inline void gpu_values_set(struct gpu_values *g, enum gpu_field f, double value)
{
    g->v[f] = value;
    g->have |= UINT64_C(1) << f;
}

static inline bool gpu_values_has(const struct gpu_values *g, enum gpu_field f)
{
    return g->have & (UINT64_C(1) << f);
}

/* Who owns a GPU process, as far as the host can tell (procs.h). Strings are "" when unknown. */
struct proc_sample {
    pid_t pid;
    unsigned gi_id;     /* NVML_INSTANCE_ID_NONE outside MIG */
    bool has_memory;    /* NVML may not know a process's memory */
    uint64_t memory;    /* bytes */
    uid_t uid;          /* (uid_t)-1 when the process is gone */
    char user[33];      /* login name of uid, or its number */
    char comm[16];      /* /proc/<pid>/comm */
    char container[80]; /* "docker://<12 hex>", "podman://…", "capsule://<name>" */
    char job[80];       /* "gpuq://<id>", "slurm://<id>" */
};

/* XIDs seen on one GPU since gpumon started (events.h). */
struct xid_count {
    unsigned xid;
    uint64_t count;
    double last_seen; /* Unix time, seconds */
};

#define PROF_REASON_MAX 128

struct mig_sample {
    struct gpu_mig id; /* copied from the model; handle not to be used by readers */
    struct gpu_values values;
};

struct gpu_sample {
    struct gpu id; /* copied from the model (mig pointer NULL here; see mig below) */
    bool lost;     /* the GPU stopped answering (GPU_IS_LOST); only id and xids are shown */
    struct gpu_values values;
    unsigned n_mig;
    struct mig_sample *mig;
    unsigned n_proc;
    struct proc_sample *proc;
    /* Why the GPU shows no DCGM_FI_PROF_* fields ("" when it does, or may from the next pass):
     * "GPM is not supported on this GPU (Hopper or newer needed)". */
    char prof_reason[PROF_REASON_MAX];
    bool xid_supported; /* events registered: DCGM_FI_DEV_XID_ERRORS is shown (0 until one) */
    unsigned last_xid;  /* 0 if none yet */
    unsigned n_xid;
    struct xid_count *xid;
};

/* The exposition of a snapshot in one format and encoding (pages.h). */
enum page_kind {
    PAGE_TEXT,
    PAGE_TEXT_GZIP,
    PAGE_OPENMETRICS,
    PAGE_OPENMETRICS_GZIP,
    PAGE_KINDS,
};

struct page {
    char *body;
    size_t len;
};

struct snapshot {
    atomic_uint refs;
    /* Each made at most once, by whoever needs it first (pages.h), and freed with the snapshot:
     * the one part of a published snapshot that is written after publication. */
    _Atomic(struct page *) pages[PAGE_KINDS];
    double taken_at;        /* Unix time the pass started */
    double sample_duration; /* seconds the pass took */
    bool up;                /* NVML loaded and initialised */
    char reason[256];       /* why not up (or ""): "libnvidia-ml.so.1: cannot open shared ..." */
    char hostname[256];
    char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE];
    int cuda_version;
    unsigned n_gpu; /* GPUs shown: those NVML reports, then those it stopped reporting (lost) */
    unsigned n_nvml_gpu; /* GPUs NVML reports: gpu[0..n_nvml_gpu) */
    struct gpu_sample *gpu;
    uint64_t nvml_errors; /* failed NVML calls since start, other than NOT_SUPPORTED */
};

/* Allocates an empty snapshot with one reference. NULL on ENOMEM. */
struct snapshot *snapshot_new(void);

/* Takes another reference; returns s. */
struct snapshot *snapshot_ref(struct snapshot *s);

/* Drops a reference; the last one frees the snapshot and all it holds. NULL is allowed. */
void snapshot_unref(struct snapshot *s);
DEFINE_POINTER_CLEANUP(struct snapshot, snapshot_unref)
