/* Loading NVML at run time: dlopen(), one dlsym() per entry point, nvmlInit_v2(). */
#include "nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"

struct nvml {
    void *dl;
    struct nvml_api api;
};

/* What NVIDIA's nvmlErrorString() says, for when the library is not at hand (nvml == NULL) or
 * returns nothing; indexed by the return code. */
static const char *const builtin_error_strings[] = {
    [NVML_SUCCESS] = "Success",
    [NVML_ERROR_UNINITIALIZED] = "Uninitialized",
    [NVML_ERROR_INVALID_ARGUMENT] = "Invalid Argument",
    [NVML_ERROR_NOT_SUPPORTED] = "Not Supported",
    [NVML_ERROR_NO_PERMISSION] = "Insufficient Permissions",
    [NVML_ERROR_ALREADY_INITIALIZED] = "Already Initialized",
    [NVML_ERROR_NOT_FOUND] = "Not Found",
    [NVML_ERROR_INSUFFICIENT_SIZE] = "Insufficient Size",
    [NVML_ERROR_INSUFFICIENT_POWER] = "Insufficient External Power",
    [NVML_ERROR_DRIVER_NOT_LOADED] = "Driver Not Loaded",
    [NVML_ERROR_TIMEOUT] = "Timeout",
    [NVML_ERROR_IRQ_ISSUE] = "Interrupt Request Issue",
    [NVML_ERROR_LIBRARY_NOT_FOUND] = "NVML Shared Library Not Found",
    [NVML_ERROR_FUNCTION_NOT_FOUND] = "Function Not Found",
    [NVML_ERROR_CORRUPTED_INFOROM] = "Corrupted infoROM",
    [NVML_ERROR_GPU_IS_LOST] = "GPU is lost",
    [NVML_ERROR_RESET_REQUIRED] = "GPU requires reset",
    [NVML_ERROR_OPERATING_SYSTEM] = "GPU access blocked by the operating system",
    [NVML_ERROR_LIB_RM_VERSION_MISMATCH] = "Driver/library version mismatch",
    [NVML_ERROR_IN_USE] = "In use by another client",
    [NVML_ERROR_MEMORY] = "Insufficient Memory",
    [NVML_ERROR_NO_DATA] = "No data",
    [NVML_ERROR_VGPU_ECC_NOT_ENABLED] = "ECC is not enabled",
    [NVML_ERROR_INSUFFICIENT_RESOURCES] = "Insufficient resources",
    [NVML_ERROR_FREQ_NOT_SUPPORTED] = "Frequency not supported",
    [NVML_ERROR_ARGUMENT_VERSION_MISMATCH] = "Argument version mismatch",
    [NVML_ERROR_DEPRECATED] = "Deprecated",
    [NVML_ERROR_NOT_READY] = "Not ready",
    [NVML_ERROR_GPU_NOT_FOUND] = "GPU not found",
    [NVML_ERROR_INVALID_STATE] = "Invalid state",
};

static const char *builtin_error_string(nvmlReturn_t r)
{
    if (r >= 0 && (size_t)r < ELEMENTSOF(builtin_error_strings) && builtin_error_strings[r])
        return builtin_error_strings[r];
    return "Unknown Error";
}

/* Looks up one entry point. dlsym() returns a data pointer; copying its bytes into the function
 * pointer is the conversion POSIX guarantees, without a cast that ISO C leaves undefined. */
static void *lookup(void *dl, const char *name)
{
    dlerror();
    return dlsym(dl, name);
}

static int load_symbols(void *dl, struct nvml_api *api, const char *libname, struct errmsg *e)
{
    void *sym;
#define NVML_LOAD_REQUIRED(name, ret, params)                                                      \
    sym = lookup(dl, #name);                                                                       \
    if (!sym)                                                                                      \
        return errmsg_set(e, -ENOSYS, "%s: no NVML entry point '%s' (not an NVML library?)",       \
                          libname, #name);                                                         \
    memcpy(&api->name, &sym, sizeof(sym));
#define NVML_LOAD_OPTIONAL(name, ret, params)                                                      \
    sym = lookup(dl, #name);                                                                       \
    if (!sym)                                                                                      \
        log_debug("%s: no '%s', an older driver; what needs it is left out", libname, #name);      \
    memcpy(&api->name, &sym, sizeof(sym));

    NVML_API_REQUIRED(NVML_LOAD_REQUIRED)
    NVML_API_OPTIONAL(NVML_LOAD_OPTIONAL)
#undef NVML_LOAD_REQUIRED
#undef NVML_LOAD_OPTIONAL
    return 0;
}

/* dlerror() usually begins with the file name already ("libnvidia-ml.so.1: cannot open shared
 * object file: ..."); the message names the library once either way. */
static int open_failed(const char *libname, struct errmsg *e)
{
    const char *why = dlerror();
    size_t len = strlen(libname);
    if (!why)
        why = "cannot be loaded";
    if (strncmp(why, libname, len) == 0 && strncmp(why + len, ": ", 2) == 0)
        return errmsg_set(e, -ENOENT, "%s", why);
    return errmsg_set(e, -ENOENT, "%s: %s", libname, why);
}

int nvml_open(const char *path, struct nvml **ret, struct errmsg *e)
{
    const char *libname = path ? path : NVML_LIBRARY;

    _cleanup_free_ struct nvml *n = calloc(1, sizeof(*n));
    if (!n)
        return errmsg_set(e, -ENOMEM, "out of memory");

    n->dl = dlopen(libname, RTLD_NOW | RTLD_LOCAL);
    if (!n->dl)
        return open_failed(libname, e);

    int r = load_symbols(n->dl, &n->api, libname, e);
    if (r < 0) {
        dlclose(n->dl);
        return r;
    }

    nvmlReturn_t nr = n->api.nvmlInit_v2();
    if (nr != NVML_SUCCESS) {
        /* Every init failure means "no usable driver" to a caller; the text says which. */
        errmsg_set(e, -ENODEV, "nvmlInit_v2: %s", nvml_error_string(n, nr));
        dlclose(n->dl);
        return -ENODEV;
    }

    *ret = TAKE_PTR(n);
    return 0;
}

void nvml_close(struct nvml *n)
{
    if (!n)
        return;
    nvmlReturn_t r = n->api.nvmlShutdown();
    if (r != NVML_SUCCESS)
        log_debug("nvmlShutdown: %s", nvml_error_string(n, r));
    dlclose(n->dl);
    free(n);
}

const struct nvml_api *nvml_api(const struct nvml *n)
{
    return &n->api;
}

const char *nvml_error_string(const struct nvml *n, nvmlReturn_t r)
{
    if (n && n->api.nvmlErrorString) {
        const char *s = n->api.nvmlErrorString(r);
        if (s)
            return s;
    }
    return builtin_error_string(r);
}

int nvml_errno(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS:
        return 0;
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
        return -EOPNOTSUPP;
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_GPU_NOT_FOUND:
    case NVML_ERROR_RESET_REQUIRED:
        return -ENODEV;
    case NVML_ERROR_NO_PERMISSION:
        return -EACCES;
    case NVML_ERROR_NOT_FOUND:
        return -ENOENT;
    case NVML_ERROR_INSUFFICIENT_SIZE:
        return -ENOBUFS;
    case NVML_ERROR_TIMEOUT:
        return -ETIMEDOUT;
    case NVML_ERROR_DRIVER_NOT_LOADED:
        return -ENXIO;
    case NVML_ERROR_UNINITIALIZED:
        return -EPIPE;
    default:
        return -EIO;
    }
}

int nvml_fail(const struct nvml *n, struct errmsg *e, const char *call, nvmlReturn_t r)
{
    int err = nvml_errno(r);
    if (err == 0)
        return 0;
    return errmsg_set(e, err, "%s: %s", call, nvml_error_string(n, r));
}
