/* GPU injection: what libnvidia-container gives a container, planned on the host and carried out
 * by the runtime as bind mounts, symlinks and environment.
 *
 * Which GPUs: opts->gpus ("all", "none", "0,1", "GPU-uuid", "MIG-uuid", any gpu_list_find form,
 * comma-separated), else NVIDIA_VISIBLE_DEVICES of the caller's environment, else the allocation
 * Slurm or gpuq made (CUDA_VISIBLE_DEVICES of the caller's environment), else
 * NVIDIA_VISIBLE_DEVICES of the image ("all" in NVIDIA's images), else none. "void" and "" mean
 * none. An id that matches no GPU is an error naming it and listing the GPUs there are.
 *
 * What is injected for them (paths under driver_root on the host, same paths inside):
 *   - /dev/nvidiaN of each selected GPU, /dev/nvidiactl, /dev/nvidia-uvm, /dev/nvidia-uvm-tools,
 *     /dev/nvidia-modeset (graphics/display); for MIG devices /dev/nvidia-caps/nvidia-capN of
 *     their GPU and compute instances (minor from
 *     /proc/driver/nvidia/capabilities/gpuM/mig/giG[/ciC]/access, "DeviceFileMinor: N");
 *   - the driver libraries of each capability in NVIDIA_DRIVER_CAPABILITIES (caller's, else the
 *     image's, else "utility,compute"; "all" = every one) found through the host's ld cache
 *     (`ldconfig -p -C DRIVER_ROOT/etc/ld.so.cache`) and the usual driver directories, and only
 *     those whose file name carries the running driver's version (a library of another driver
 *     left on the host is skipped, with a debug log); each bound into the image's library
 *     directory (/usr/lib/x86_64-linux-gnu, else /usr/lib64, else /usr/lib: the first the image
 *     has), with its soname link (libcuda.so.1 -> libcuda.so.580.159.04) and, for compute,
 *     libcuda.so;
 *   - the utility binaries (nvidia-smi, nvidia-debugdump, nvidia-persistenced) and compute ones
 *     (nvidia-cuda-mps-control, nvidia-cuda-mps-server) into /usr/bin;
 *   - /proc/driver/nvidia (read-only), the firmware directory /lib/firmware/nvidia/<version>;
 *   - environment: NVIDIA_VISIBLE_DEVICES = the selected UUIDs; CUDA_VISIBLE_DEVICES renumbered
 *     0..n-1 when the caller's held indices (UUIDs are kept), since only the selected devices
 *     exist inside.
 * The image's NVIDIA_REQUIRE_* constraints are checked (require.h) against the driver's version
 * and CUDA version read through NVML (libnvidia-ml.so.1 from driver_root's library directories),
 * the brand, and the selected GPUs' compute capabilities.
 *
 * Details (gpu-select.c, driver-files.c): ids may also be "G:M" (MIG device M of GPU G, NVIDIA's
 * form); a whole GPU in MIG mode comes with the capability nodes of all its MIG devices; "all"
 * leaves out a GPU NVML cannot read, naming one is -ENODEV. The caller's CUDA_VISIBLE_DEVICES set
 * to "", "-1" or "NoDevFiles" means no GPU (it does not fall through to the image's "all"). When
 * only the image asks and the host has no usable driver (NVML missing or not loaded), the plan
 * is empty, not an error, so NVIDIA's images run on CPU hosts. /proc/driver/nvidia is bound
 * only when the running kernel has it (the container's /proc is this kernel's). With compute
 * asked for, a missing libcuda is -ENOENT like a missing libnvidia-ml. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "lib/errmsg.h"
#include "capsule/runtime/runtime.h"

struct gpu_inject_opts {
    const char *driver_root;   /* NULL = "/" */
    const char *gpus;          /* --gpus, or NULL */
    char *const *host_env;     /* the caller's environment (NULL-terminated) */
    char *const *image_env;    /* the image config's Env (NULL-terminated) */
    char *const *image_layers; /* the image's layer directories, bottom first, for the lib dir */
    size_t n_image_layers;
    const char *nvml_library; /* NULL: "libnvidia-ml.so.1" searched as described above */
};

struct gpu_inject {
    unsigned n_gpus;      /* selected GPUs (MIG devices count one each); 0: nothing to inject */
    char **uuids;         /* NULL-terminated, n_gpus entries */
    char *driver_version; /* "580.159.04" */
    char *cuda_version;   /* "13.0" */
    struct mount_entry *mounts;
    size_t n_mounts;
    struct link_entry *links;
    size_t n_links;
    char **env;    /* "K=V" to set (override) inside, NULL-terminated; never NULL */
    char *lib_dir; /* where the libraries go inside; NULL when none */
};

/* Plans the injection. Returns 0 and fills *ret (free with gpu_inject_done); with no GPU
 * selected n_gpus is 0, nothing is mounted and NVML is not even loaded. Errors: -ENOENT naming a
 * GPU id that does not exist or a driver part that is missing ("libnvidia-ml.so.1 not found
 * under DRIVER_ROOT: is the NVIDIA driver installed?"), -EPERM from require_check, -ENODEV from
 * NVML (driver not loaded), -ENOMEM. */
int gpu_inject_plan(const struct gpu_inject_opts *opts, struct gpu_inject *ret, struct errmsg *e);
void gpu_inject_done(struct gpu_inject *g);

/* One line of `capsule check` about GPUs. */
struct gpu_check_line {
    bool ok;
    char text[256]; /* "driver 580.159.04, CUDA 13.0, 1 GPU: NVIDIA H200" or what to fix */
};
/* Diagnoses the driver under driver_root: NVML loads and answers, driver and CUDA versions,
 * device node permissions (the caller can open them read-write), libraries found for each
 * capability. Calls report once per line; never fails (a missing driver is a line). */
void gpu_inject_check(const char *driver_root,
                      void (*report)(const struct gpu_check_line *l, void *userdata),
                      void *userdata);
