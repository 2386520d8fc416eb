/* Which GPUs a container gets: where the list comes from (--gpus, the caller's
 * NVIDIA_VISIBLE_DEVICES or CUDA_VISIBLE_DEVICES, the image's NVIDIA_VISIBLE_DEVICES), what it
 * says, and the GPUs and MIG devices of the host it names. Internal to capsule; see gpu-inject.h
 * for the rules. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "lib/errmsg.h"
#include "lib/gpu.h"

enum gpu_source {
    GPU_SOURCE_NONE,        /* nothing asked for GPUs */
    GPU_SOURCE_FLAG,        /* --gpus */
    GPU_SOURCE_HOST_NVIDIA, /* the caller's NVIDIA_VISIBLE_DEVICES */
    GPU_SOURCE_HOST_CUDA,   /* the caller's CUDA_VISIBLE_DEVICES (Slurm's or gpuq's allocation) */
    GPU_SOURCE_IMAGE,       /* the image's NVIDIA_VISIBLE_DEVICES */
};

/* How a source is named in messages ("--gpus", "NVIDIA_VISIBLE_DEVICES", ...). */
const char *gpu_source_name(enum gpu_source s);

/* The first source that is set, in the order above, and its value (pointing into the
 * arguments; "" when none). A variable set to "" counts as set: it means no GPUs. */
enum gpu_source gpu_source_pick(const char *gpus_flag, char *const *host_env,
                                char *const *image_env, const char **ret_value);

/* A parsed device list. */
struct gpu_request {
    bool all;   /* "all" */
    char **ids; /* the ids in order, without duplicates; NULL-terminated, never NULL; empty
                 * for "all" and for none ("", "none", "void"; for CUDA_VISIBLE_DEVICES also
                 * "-1" and "NoDevFiles") */
};

/* Parses a device list: "all", a none word, or comma-separated ids (blanks around each are
 * dropped). Returns 0 and *ret (free with gpu_request_done), or -EINVAL naming the source and
 * what is wrong (an empty entry, "all" mixed with ids, a character no id has), or -ENOMEM. */
int gpu_request_parse(enum gpu_source source, const char *value, struct gpu_request *ret,
                      struct errmsg *e);
void gpu_request_done(struct gpu_request *r);

/* One selected device: a whole GPU (mig NULL; if the GPU is in MIG mode all its MIG devices come
 * with it) or one MIG device of gpu. */
struct gpu_pick {
    const struct gpu *gpu;
    const struct gpu_mig *mig;
};

/* Resolves a request against the host's GPUs. Ids are any form gpu_list_find takes, plus "G:M"
 * (MIG device M of GPU G, NVIDIA's form). "all" takes every GPU that could be read; a GPU that
 * cannot be read and is named explicitly is an error. Returns 0 and *ret (free()), *ret_n (0
 * possible for "all" on a host without GPUs); -ENOENT naming an id that matches nothing and
 * listing the GPUs there are; -ENODEV for an unreadable GPU; -ENOMEM. */
int gpu_select_resolve(const struct gpu_list *l, enum gpu_source source,
                       const struct gpu_request *req, struct gpu_pick **ret, size_t *ret_n,
                       struct errmsg *e);

/* The UUID of a pick ("GPU-…" or "MIG-…"). */
const char *gpu_pick_uuid(const struct gpu_pick *p);

/* CUDA_VISIBLE_DEVICES for inside, from the caller's value (NULL: unset) and the picks. Indices
 * name host GPUs, and inside only the picks exist, numbered 0..n-1 in order: each held index
 * becomes the position of that GPU among the picks (those not picked are dropped; if none is
 * left, 0..n-1). A value of UUIDs is kept as it is. Returns 0 with *ret (NULL: set nothing),
 * or -ENOMEM. */
int gpu_select_cuda_visible(const char *host_value, const struct gpu_pick *picks, size_t n,
                            char **ret);
