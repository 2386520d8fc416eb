/* NVML, loaded at run time, and the GPU model shared by gpumon, capsule and gpuq.
 *
 * Nothing links against libnvidia-ml: nvml_open() dlopen()s it, looks up every entry point of
 * NVML_API_FUNCTIONS (lib/nvml-api.h) on its own and calls nvmlInit_v2(). A required symbol
 * missing fails the open; an optional one missing leaves a NULL in the table and only the
 * feature that needs it is lost, so an older driver still works.
 *
 * NVML itself is thread-safe: one struct nvml may be used by several threads at once, as long as
 * nvml_close() runs after all of them are done with it. */
#pragma once

#include "lib/errmsg.h"
#include "lib/macro.h"
#include "lib/nvml-api.h"

/* The library name looked up through the dynamic loader (LD_LIBRARY_PATH, the ld cache). */
#define NVML_LIBRARY "libnvidia-ml.so.1"

struct nvml;

/* Loads the library at path (NULL: NVML_LIBRARY) and initialises NVML. Returns 0 and *ret, or
 *   -ENOENT  the library cannot be loaded (no driver installed); message has dlerror()'s text;
 *   -ENOSYS  a required entry point is missing (message names it);
 *   -ENODEV  nvmlInit_v2 failed with DRIVER_NOT_LOADED, NO_PERMISSION or another error;
 *            message has NVML's error string ("nvmlInit_v2: Driver Not Loaded");
 *   -ENOMEM.
 * On failure nothing stays loaded. */
int nvml_open(const char *path, struct nvml **ret, struct errmsg *e);

/* Shuts NVML down (nvmlShutdown) and unloads the library. NULL is allowed. */
void nvml_close(struct nvml *n);
DEFINE_POINTER_CLEANUP(struct nvml, nvml_close)

/* The function table; optional entries are NULL when the library lacks them. Valid until
 * nvml_close(). */
const struct nvml_api *nvml_api(const struct nvml *n);

/* NVML's text for a return code ("GPU is lost"); never NULL, also for unknown codes. */
const char *nvml_error_string(const struct nvml *n, nvmlReturn_t r);

/* The same, for code that holds only the function table (api may be NULL). */
const char *nvml_api_error_string(const struct nvml_api *api, nvmlReturn_t r);

/* Maps an NVML return code to a negative errno: SUCCESS 0, NOT_SUPPORTED and
 * FUNCTION_NOT_FOUND -EOPNOTSUPP, GPU_IS_LOST, GPU_NOT_FOUND and
 * RESET_REQUIRED -ENODEV (the GPU is gone until a reset), NO_PERMISSION -EACCES,
 * NOT_FOUND -ENOENT, INSUFFICIENT_SIZE -ENOBUFS, TIMEOUT -ETIMEDOUT, DRIVER_NOT_LOADED -ENXIO,
 * UNINITIALIZED -EPIPE, everything else -EIO. */
int nvml_errno(nvmlReturn_t r);

/* The text of a driver-side failure, for messages: "nvmlDeviceGetUUID: GPU is lost". */
int nvml_fail(const struct nvml *n, struct errmsg *e, const char *call, nvmlReturn_t r);
