/* The GPU model: which GPUs and MIG instances a host has, read once from NVML.
 *
 * A struct gpu_list is immutable after gpu_list_load() and may be shared between threads. The
 * nvmlDevice_t handles in it belong to the struct nvml it was loaded from and are valid until
 * that is closed. */
#pragma once

#include <stdbool.h>

#include "lib/errmsg.h"
#include "lib/macro.h"
#include "lib/nvml.h"

#define GPU_UUID_MAX    NVML_DEVICE_UUID_V2_BUFFER_SIZE
#define GPU_NAME_MAX    NVML_DEVICE_NAME_V2_BUFFER_SIZE
#define GPU_BUS_ID_MAX  NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
#define GPU_PROFILE_MAX 32

/* One MIG device (a compute instance inside a GPU instance). */
struct gpu_mig {
    unsigned index; /* position under its parent, for nvmlDeviceGetMigDeviceHandleByIndex */
    unsigned gi_id; /* GPU instance id */
    unsigned ci_id; /* compute instance id */
    char profile[GPU_PROFILE_MAX]; /* "1g.10gb" (NVML's "MIG " prefix removed); "" if unknown */
    char uuid[GPU_UUID_MAX];       /* "MIG-…" */
    nvmlDevice_t handle;
};

struct gpu {
    unsigned index; /* NVML index, the `gpu` label */
    /* 0 when the GPU could be read; else the -errno of the failure (-ENODEV: fell off the bus).
     * When non-zero only index, error and, if it was readable, uuid are meaningful. */
    int error;
    char uuid[GPU_UUID_MAX];         /* "GPU-…" */
    char name[GPU_NAME_MAX];         /* "NVIDIA H200" */
    char pci_bus_id[GPU_BUS_ID_MAX]; /* "00000000:07:00.0" */
    unsigned minor;                  /* /dev/nvidia<minor>; valid if has_minor */
    bool has_minor;
    int cc_major, cc_minor; /* CUDA compute capability; 0.0 if unknown */
    bool mig_enabled;       /* current MIG mode */
    unsigned n_mig;
    struct gpu_mig *mig; /* n_mig entries, ordered by gi_id then ci_id */
    nvmlDevice_t handle;
};

struct gpu_list {
    char driver_version[NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE]; /* "" if unknown */
    int cuda_version; /* 13000 for CUDA 13.0; 0 if unknown */
    unsigned n;
    struct gpu *gpus; /* n entries, by index */
};

/* Reads every GPU of the host and its MIG devices. A GPU that cannot be read (lost, no
 * permission) is still listed, with its error set, so the caller can report it; the load itself
 * fails only if the device count cannot be read or memory runs out.
 * Returns 0 and *ret (free with gpu_list_free), -ENOMEM, or an nvml_errno() code with a
 * message naming the call. */
int gpu_list_load(struct nvml *n, struct gpu_list **ret, struct errmsg *e);

/* Re-reads the MIG mode and MIG devices of one GPU in place (after a MIG reconfiguration).
 * On failure the GPU keeps its old MIG data. Returns 0, -ENOMEM or an nvml_errno() code. The
 * caller makes sure no other thread reads g meanwhile. */
int gpu_reload_mig(struct nvml *n, struct gpu *g, struct errmsg *e);

void gpu_list_free(struct gpu_list *l);
DEFINE_POINTER_CLEANUP(struct gpu_list, gpu_list_free)

/* Finds a GPU by index ("0"), GPU UUID ("GPU-…", or an unambiguous prefix of at least 8
 * characters) or PCI bus id; NULL if none. For a MIG UUID it returns the parent GPU and sets
 * *ret_mig (may be NULL) to the MIG device; else *ret_mig is set to NULL. */
const struct gpu *gpu_list_find(const struct gpu_list *l, const char *id,
                                const struct gpu_mig **ret_mig);
