/* Loading NVML at run time: dlopen(), one dlsym() per entry point, nvmlInit_v2(). */
#include "lib/nvml.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/log.h"
#include "lib/nvml-errors.h"

struct nvml {
    void *dl;
    struct nvml_api api;
};

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

const char *nvml_api_error_string(const struct nvml_api *api, nvmlReturn_t r)
{
    if (api && api->nvmlErrorString) {
        const char *s = api->nvmlErrorString(r);
        if (s)
            return s;
    }
    return nvml_api_error_text(r);
}

const char *nvml_error_string(const struct nvml *n, nvmlReturn_t r)
{
    return nvml_api_error_string(n ? &n->api : NULL, r);
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
