/* The GPU model: GPUs, their identity and MIG devices, read from NVML. */
#include "lib/gpu.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/log.h"

/* No GPU has more MIG devices than this; a larger count from the driver is not believed. */
#define GPU_MIG_SLOTS_MAX 128
/* More distinct GPU instance profiles than any GPU offers; past it lookups go uncached. */
#define PROFILE_CACHE_MAX 32
/* A UUID prefix shorter than this would match by accident too easily. */
#define UUID_PREFIX_MIN 8

static bool is_lost(nvmlReturn_t r)
{
    return r == NVML_ERROR_GPU_IS_LOST || r == NVML_ERROR_GPU_NOT_FOUND ||
           r == NVML_ERROR_RESET_REQUIRED;
}

static bool is_unsupported(nvmlReturn_t r)
{
    return r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND;
}

/* Sorts the outcome of reading one attribute of a GPU: 0 read, 1 unknown (the GPU does not
 * have it, or the read failed in a way that leaves the rest of the GPU usable), -ENODEV the GPU
 * is gone. Unknown attributes are left at their zero value. */
static int judge(const struct nvml *n, unsigned index, const char *call, nvmlReturn_t r)
{
    if (r == NVML_SUCCESS)
        return 0;
    if (is_lost(r))
        return -ENODEV;
    if (!is_unsupported(r))
        log_debug("GPU %u: %s: %s", index, call, nvml_error_string(n, r));
    return 1;
}

/* Calls one of NVML's (device, buffer, length) string getters; a missing entry point reads as
 * FUNCTION_NOT_FOUND. The buffer is always terminated, and empty unless the call succeeded. */
static nvmlReturn_t read_string(nvmlReturn_t (*fn)(nvmlDevice_t, char *, unsigned int),
                                nvmlDevice_t d, char *buf, size_t size)
{
    buf[0] = '\0';
    if (!fn)
        return NVML_ERROR_FUNCTION_NOT_FOUND;
    nvmlReturn_t r = fn(d, buf, (unsigned int)size);
    if (r != NVML_SUCCESS)
        buf[0] = '\0';
    buf[size - 1] = '\0';
    return r;
}

/* Copies src into a buffer of size bytes; false (and dst empty) if it does not fit, since a cut
 * identifier would be a wrong one. */
static bool copy_string(char *dst, size_t size, const char *src)
{
    size_t len = strnlen(src, size);
    if (len >= size) {
        dst[0] = '\0';
        return false;
    }
    memcpy(dst, src, len + 1);
    return true;
}

/* ---- MIG profiles ------------------------------------------------------------------------ */

struct profile_entry {
    unsigned id;
    bool found; /* false: the scan did not find it, use the fallback without scanning again */
    char name[GPU_PROFILE_MAX];
};

/* Profile names already looked up on one GPU during one read of its MIG devices: the scan
 * costs up to NVML_GPU_INSTANCE_PROFILE_MAX_INDEX calls, and all MIG devices of a GPU usually
 * share two or three profiles. */
struct profile_cache {
    unsigned n;
    struct profile_entry entries[PROFILE_CACHE_MAX];
};

static struct profile_entry *cache_find(struct profile_cache *c, unsigned id)
{
    for (unsigned i = 0; i < c->n; i++)
        if (c->entries[i].id == id)
            return &c->entries[i];
    return NULL;
}

static void cache_add(struct profile_cache *c, unsigned id, bool found, const char *name)
{
    if (c->n >= ELEMENTSOF(c->entries))
        return;
    struct profile_entry *p = &c->entries[c->n++];
    p->id = id;
    p->found = found;
    copy_string(p->name, sizeof(p->name), found ? name : "");
}

/* The profile id of GPU instance gi_id: 0, -ENODEV, or another negative code (fall back). */
static int profile_id_of(const struct nvml_api *a, nvmlDevice_t gpu, unsigned gi_id,
                         unsigned *ret_id)
{
    if (!a->nvmlDeviceGetGpuInstanceById || !a->nvmlGpuInstanceGetInfo)
        return -EOPNOTSUPP;
    nvmlGpuInstance_t gi = NULL;
    nvmlReturn_t r = a->nvmlDeviceGetGpuInstanceById(gpu, gi_id, &gi);
    if (r != NVML_SUCCESS)
        return nvml_errno(r);
    nvmlGpuInstanceInfo_t info = {0};
    r = a->nvmlGpuInstanceGetInfo(gi, &info);
    if (r != NVML_SUCCESS)
        return nvml_errno(r);
    *ret_id = info.profileId;
    return 0;
}

/* Scans the GPU's profile table for profile_id and writes its name without "MIG ". Returns 0,
 * -ENODEV, or -ENOENT when no entry matches (or the entry point is missing). */
static int profile_name_scan(const struct nvml_api *a, nvmlDevice_t gpu, unsigned profile_id,
                             char name[GPU_PROFILE_MAX])
{
    if (!a->nvmlDeviceGetGpuInstanceProfileInfoV)
        return -ENOENT;
    for (unsigned i = 0; i < NVML_GPU_INSTANCE_PROFILE_MAX_INDEX; i++) {
        nvmlGpuInstanceProfileInfo_v2_t p = {.version = nvmlGpuInstanceProfileInfo_v2};
        nvmlReturn_t r = a->nvmlDeviceGetGpuInstanceProfileInfoV(gpu, i, &p);
        if (is_lost(r))
            return -ENODEV;
        /* Indexes a GPU does not offer answer NOT_SUPPORTED or INVALID_ARGUMENT; go on. */
        if (r != NVML_SUCCESS || p.id != profile_id)
            continue;
        p.name[sizeof(p.name) - 1] = '\0';
        const char *s = p.name;
        if (strncmp(s, "MIG ", 4) == 0)
            s += 4;
        return copy_string(name, GPU_PROFILE_MAX, s) && s[0] ? 0 : -ENOENT;
    }
    return -ENOENT;
}

/* The profile name made up from the MIG device's size, as NVIDIA names profiles:
 * "<slices>g.<GiB>gb". NVIDIA's names round the usable size up (A100/H100: 9.75 GiB is
 * "1g.10gb", 39.5 "3g.40gb", 79.25 "7g.80gb"), so this rounds up too; to nearest would give
 * "7g.79gb". Returns 0, -ENODEV or another negative code (unknown). */
static int profile_name_from_attributes(const struct nvml_api *a, nvmlDevice_t mig,
                                        char name[GPU_PROFILE_MAX])
{
    if (!a->nvmlDeviceGetAttributes_v2)
        return -EOPNOTSUPP;
    nvmlDeviceAttributes_t at = {0};
    nvmlReturn_t r = a->nvmlDeviceGetAttributes_v2(mig, &at);
    if (r != NVML_SUCCESS)
        return nvml_errno(r);
    if (at.gpuInstanceSliceCount == 0)
        return -EIO;
    snprintf(name, GPU_PROFILE_MAX, "%ug.%llugb", at.gpuInstanceSliceCount,
             (at.memorySizeMB + 1023) / 1024);
    return 0;
}

/* Finds the profile name of a MIG device: from the profile table of its GPU instance (cached),
 * else from its attributes, else "". Returns 0 or -ENODEV. */
static int mig_profile(const struct nvml_api *a, nvmlDevice_t gpu, struct gpu_mig *m,
                       struct profile_cache *cache)
{
    unsigned profile_id = 0;
    int r = profile_id_of(a, gpu, m->gi_id, &profile_id);
    if (r == -ENODEV)
        return r;
    if (r == 0) {
        struct profile_entry *p = cache_find(cache, profile_id);
        if (p && p->found) {
            copy_string(m->profile, sizeof(m->profile), p->name);
            return 0;
        }
        if (!p) {
            r = profile_name_scan(a, gpu, profile_id, m->profile);
            if (r == -ENODEV)
                return r;
            cache_add(cache, profile_id, r == 0, m->profile);
            if (r == 0)
                return 0;
        }
    }
    r = profile_name_from_attributes(a, m->handle, m->profile);
    if (r == -ENODEV)
        return r;
    if (r < 0)
        m->profile[0] = '\0';
    return 0;
}

/* ---- MIG devices ------------------------------------------------------------------------- */

/* Reads MIG device slot idx of a GPU into *m. Returns 1 if the slot holds a device, 0 if it is
 * empty, or a negative nvml_errno() code with a message. */
static int mig_read_one(const struct nvml *n, nvmlDevice_t gpu, unsigned idx,
                        struct profile_cache *cache, struct gpu_mig *m, struct errmsg *e)
{
    const struct nvml_api *a = nvml_api(n);
    nvmlDevice_t h = NULL;
    nvmlReturn_t r = a->nvmlDeviceGetMigDeviceHandleByIndex(gpu, idx, &h);
    if (r == NVML_ERROR_NOT_FOUND || r == NVML_ERROR_INVALID_ARGUMENT)
        return 0;
    if (r != NVML_SUCCESS)
        return nvml_fail(n, e, "nvmlDeviceGetMigDeviceHandleByIndex", r);

    *m = (struct gpu_mig){.index = idx, .handle = h};
    r = a->nvmlDeviceGetGpuInstanceId(h, &m->gi_id);
    if (r != NVML_SUCCESS)
        return nvml_fail(n, e, "nvmlDeviceGetGpuInstanceId", r);
    r = a->nvmlDeviceGetComputeInstanceId(h, &m->ci_id);
    if (r != NVML_SUCCESS)
        return nvml_fail(n, e, "nvmlDeviceGetComputeInstanceId", r);
    r = read_string(a->nvmlDeviceGetUUID, h, m->uuid, sizeof(m->uuid));
    if (is_lost(r))
        return nvml_fail(n, e, "nvmlDeviceGetUUID", r);
    if (mig_profile(a, gpu, m, cache) < 0)
        return errmsg_set(e, -ENODEV, "MIG profile lookup: %s",
                          nvml_error_string(n, NVML_ERROR_GPU_IS_LOST));
    return 1;
}

static int mig_compare(const void *x, const void *y)
{
    const struct gpu_mig *a = x, *b = y;
    if (a->gi_id != b->gi_id)
        return a->gi_id < b->gi_id ? -1 : 1;
    if (a->ci_id != b->ci_id)
        return a->ci_id < b->ci_id ? -1 : 1;
    return 0;
}

/* Reads the MIG devices of a GPU whose MIG mode is on. The entry points for MIG devices came
 * with MIG itself, so a driver without one of them has MIG on and shows no devices. */
static int mig_read_devices(const struct nvml *n, nvmlDevice_t gpu, struct gpu_mig **ret_mig,
                            unsigned *ret_n, struct errmsg *e)
{
    const struct nvml_api *a = nvml_api(n);
    if (!a->nvmlDeviceGetMaxMigDeviceCount || !a->nvmlDeviceGetMigDeviceHandleByIndex ||
        !a->nvmlDeviceGetGpuInstanceId || !a->nvmlDeviceGetComputeInstanceId) {
        log_debug("MIG is on but the library cannot list MIG devices");
        *ret_mig = NULL;
        *ret_n = 0;
        return 0;
    }
    unsigned max = 0;
    nvmlReturn_t nr = a->nvmlDeviceGetMaxMigDeviceCount(gpu, &max);
    if (nr != NVML_SUCCESS)
        return nvml_fail(n, e, "nvmlDeviceGetMaxMigDeviceCount", nr);
    if (max > GPU_MIG_SLOTS_MAX)
        max = GPU_MIG_SLOTS_MAX;

    _cleanup_free_ struct gpu_mig *v = calloc(max ? max : 1, sizeof(*v));
    if (!v)
        return errmsg_set(e, -ENOMEM, "out of memory");
    struct profile_cache cache = {0};
    unsigned k = 0;
    for (unsigned idx = 0; idx < max; idx++) {
        int r = mig_read_one(n, gpu, idx, &cache, &v[k], e);
        if (r < 0)
            return errmsg_prefix(e, r, "MIG device %u", idx);
        k += (unsigned)r;
    }
    qsort(v, k, sizeof(*v), mig_compare);
    *ret_mig = k > 0 ? TAKE_PTR(v) : NULL;
    *ret_n = k;
    return 0;
}

/* Reads MIG mode and devices of a GPU. Writes the outputs only on success, but *ret_enabled
 * as soon as the mode is known. */
static int mig_read(const struct nvml *n, nvmlDevice_t gpu, bool *ret_enabled,
                    struct gpu_mig **ret_mig, unsigned *ret_n, struct errmsg *e)
{
    const struct nvml_api *a = nvml_api(n);
    unsigned current = NVML_DEVICE_MIG_DISABLE, pending = NVML_DEVICE_MIG_DISABLE;
    nvmlReturn_t nr = a->nvmlDeviceGetMigMode ? a->nvmlDeviceGetMigMode(gpu, &current, &pending)
                                              : NVML_ERROR_FUNCTION_NOT_FOUND;
    /* NOT_SUPPORTED is how NVML says "this GPU cannot do MIG". */
    if (is_unsupported(nr) || (nr == NVML_SUCCESS && current != NVML_DEVICE_MIG_ENABLE)) {
        *ret_enabled = false;
        *ret_mig = NULL;
        *ret_n = 0;
        return 0;
    }
    if (nr != NVML_SUCCESS)
        return nvml_fail(n, e, "nvmlDeviceGetMigMode", nr);
    /* The mode is known even when its devices cannot be listed (GetGpuInstanceId needs
     * privileges on some drivers): a GPU in MIG mode must not pass for one without. */
    *ret_enabled = true;
    return mig_read_devices(n, gpu, ret_mig, ret_n, e);
}

/* ---- GPUs -------------------------------------------------------------------------------- */

/* Reads what identifies a GPU. Returns 0, or the negative code that makes it unusable. */
static int gpu_read_identity(const struct nvml *n, struct gpu *g)
{
    const struct nvml_api *a = nvml_api(n);
    nvmlReturn_t nr = read_string(a->nvmlDeviceGetUUID, g->handle, g->uuid, sizeof(g->uuid));
    /* Without its UUID a GPU cannot be told apart from the others across reloads. */
    if (nr != NVML_SUCCESS && !is_unsupported(nr))
        return nvml_errno(nr);

    nr = read_string(a->nvmlDeviceGetName, g->handle, g->name, sizeof(g->name));
    int r = judge(n, g->index, "nvmlDeviceGetName", nr);
    if (r < 0)
        return r;

    nvmlPciInfo_t pci = {0};
    nr = a->nvmlDeviceGetPciInfo_v3 ? a->nvmlDeviceGetPciInfo_v3(g->handle, &pci)
                                    : NVML_ERROR_FUNCTION_NOT_FOUND;
    r = judge(n, g->index, "nvmlDeviceGetPciInfo_v3", nr);
    if (r < 0)
        return r;
    if (r == 0)
        copy_string(g->pci_bus_id, sizeof(g->pci_bus_id), pci.busId);

    nr = a->nvmlDeviceGetMinorNumber ? a->nvmlDeviceGetMinorNumber(g->handle, &g->minor)
                                     : NVML_ERROR_FUNCTION_NOT_FOUND;
    r = judge(n, g->index, "nvmlDeviceGetMinorNumber", nr);
    if (r < 0)
        return r;
    g->has_minor = r == 0;

    int major = 0, minor = 0;
    nr = a->nvmlDeviceGetCudaComputeCapability
             ? a->nvmlDeviceGetCudaComputeCapability(g->handle, &major, &minor)
             : NVML_ERROR_FUNCTION_NOT_FOUND;
    r = judge(n, g->index, "nvmlDeviceGetCudaComputeCapability", nr);
    if (r < 0)
        return r;
    if (r == 0) {
        g->cc_major = major;
        g->cc_minor = minor;
    }
    return 0;
}

/* Reads GPU index into *g (zeroed by the caller). A GPU that cannot be read gets its error set;
 * the return value is negative only for -ENOMEM. */
static int gpu_read(const struct nvml *n, unsigned index, struct gpu *g)
{
    const struct nvml_api *a = nvml_api(n);
    g->index = index;
    nvmlReturn_t nr = a->nvmlDeviceGetHandleByIndex_v2(index, &g->handle);
    if (nr != NVML_SUCCESS) {
        g->handle = NULL;
        g->error = nvml_errno(nr);
        log_debug("GPU %u: nvmlDeviceGetHandleByIndex_v2: %s", index, nvml_error_string(n, nr));
        return 0;
    }
    int r = gpu_read_identity(n, g);
    if (r < 0) {
        g->error = r;
        log_debug("GPU %u cannot be read: %s", index, strerror(-r));
        return 0;
    }
    struct errmsg e = {""};
    r = mig_read(n, g->handle, &g->mig_enabled, &g->mig, &g->n_mig, &e);
    if (r == -ENOMEM)
        return r;
    if (r == -ENODEV)
        g->error = r;
    if (r < 0)
        log_debug("GPU %u: MIG devices left out: %s", index, e.text);
    return 0;
}

int gpu_list_load(struct nvml *n, struct gpu_list **ret, struct errmsg *e)
{
    const struct nvml_api *a = nvml_api(n);
    _cleanup_(gpu_list_freep) struct gpu_list *l = calloc(1, sizeof(*l));
    if (!l)
        return errmsg_set(e, -ENOMEM, "out of memory");

    if (a->nvmlSystemGetDriverVersion &&
        a->nvmlSystemGetDriverVersion(l->driver_version, sizeof(l->driver_version)) != NVML_SUCCESS)
        l->driver_version[0] = '\0';
    l->driver_version[sizeof(l->driver_version) - 1] = '\0';
    if (a->nvmlSystemGetCudaDriverVersion_v2 &&
        a->nvmlSystemGetCudaDriverVersion_v2(&l->cuda_version) != NVML_SUCCESS)
        l->cuda_version = 0;

    unsigned count = 0;
    nvmlReturn_t nr = a->nvmlDeviceGetCount_v2(&count);
    if (nr != NVML_SUCCESS)
        return nvml_fail(n, e, "nvmlDeviceGetCount_v2", nr);

    l->gpus = calloc(count ? count : 1, sizeof(*l->gpus));
    if (!l->gpus)
        return errmsg_set(e, -ENOMEM, "out of memory");
    l->n = count;
    for (unsigned i = 0; i < count; i++)
        if (gpu_read(n, i, &l->gpus[i]) < 0)
            return errmsg_set(e, -ENOMEM, "out of memory");

    *ret = TAKE_PTR(l);
    return 0;
}

int gpu_reload_mig(struct nvml *n, struct gpu *g, struct errmsg *e)
{
    if (g->error < 0 || !g->handle)
        return errmsg_set(e, g->error < 0 ? g->error : -ENODEV, "GPU %u cannot be read", g->index);
    bool enabled = false;
    struct gpu_mig *mig = NULL;
    unsigned n_mig = 0;
    int r = mig_read(n, g->handle, &enabled, &mig, &n_mig, e);
    if (r < 0)
        return errmsg_prefix(e, r, "GPU %u", g->index);
    free(g->mig);
    g->mig = mig;
    g->n_mig = n_mig;
    g->mig_enabled = enabled;
    return 0;
}

void gpu_list_free(struct gpu_list *l)
{
    if (!l)
        return;
    for (unsigned i = 0; i < l->n; i++)
        free(l->gpus[i].mig);
    free(l->gpus);
    free(l);
}

/* ---- Lookup ------------------------------------------------------------------------------ */

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    return tolower((unsigned char)c) - 'a' + 10;
}

/* Reads 1..max_digits hex digits; returns the rest of the string or NULL. */
static const char *parse_hex(const char *s, unsigned max_digits, unsigned *ret)
{
    unsigned v = 0, k = 0;
    for (; k < max_digits && isxdigit((unsigned char)s[k]); k++)
        v = v * 16 + (unsigned)hex_value(s[k]);
    if (k == 0)
        return NULL;
    *ret = v;
    return s + k;
}

/* Parses a PCI address as NVML ("00000000:07:00.0"), sysfs ("0000:07:00.0") or lspci
 * ("07:00.0") writes it, into domain, bus, device, function. */
static bool parse_bus_id(const char *s, unsigned v[4])
{
    unsigned first, second;
    const char *p = parse_hex(s, 8, &first);
    if (!p || *p != ':')
        return false;
    p = parse_hex(p + 1, 8, &second);
    if (!p)
        return false;
    if (*p == ':') {
        v[0] = first;
        v[1] = second;
        p = parse_hex(p + 1, 2, &v[2]);
        if (!p)
            return false;
    } else {
        v[0] = 0;
        v[1] = first;
        v[2] = second;
    }
    if (*p != '.')
        return false;
    p = parse_hex(p + 1, 1, &v[3]);
    return p && *p == '\0';
}

static const struct gpu *find_by_bus_id(const struct gpu_list *l, const char *id)
{
    unsigned want[4], have[4];
    if (!parse_bus_id(id, want))
        return NULL;
    for (unsigned i = 0; i < l->n; i++)
        if (parse_bus_id(l->gpus[i].pci_bus_id, have) && memcmp(want, have, sizeof(want)) == 0)
            return &l->gpus[i];
    return NULL;
}

static bool uuid_matches(const char *uuid, const char *id, size_t len, bool prefix)
{
    if (!uuid[0])
        return false;
    return prefix ? strncasecmp(uuid, id, len) == 0 : strcasecmp(uuid, id) == 0;
}

/* Finds a GPU or MIG UUID: exact, or a prefix that only one device has. */
static const struct gpu *find_by_uuid(const struct gpu_list *l, const char *id,
                                      const struct gpu_mig **ret_mig)
{
    size_t len = strlen(id);
    for (int prefix = 0; prefix <= 1; prefix++) {
        const struct gpu *found = NULL;
        const struct gpu_mig *found_mig = NULL;
        unsigned hits = 0;
        if (prefix && len < UUID_PREFIX_MIN)
            break;
        for (unsigned i = 0; i < l->n; i++) {
            const struct gpu *g = &l->gpus[i];
            if (uuid_matches(g->uuid, id, len, prefix)) {
                found = g;
                found_mig = NULL;
                hits++;
            }
            for (unsigned j = 0; j < g->n_mig; j++) {
                if (uuid_matches(g->mig[j].uuid, id, len, prefix)) {
                    found = g;
                    found_mig = &g->mig[j];
                    hits++;
                }
            }
        }
        if (hits == 1) {
            *ret_mig = found_mig;
            return found;
        }
        if (hits > 1)
            break;
    }
    return NULL;
}

/* Drivers before R470 named MIG devices "MIG-GPU-<GPU UUID>/<gi>/<ci>"; such names still sit
 * in old job scripts and CUDA_VISIBLE_DEVICES settings. */
static const struct gpu *find_by_legacy_mig(const struct gpu_list *l, const char *id,
                                            const struct gpu_mig **ret_mig)
{
    if (strncasecmp(id, "MIG-GPU-", 8) != 0)
        return NULL;
    const char *slash = strchr(id, '/');
    unsigned gi, ci;
    int end = 0;
    if (!slash || sscanf(slash, "/%u/%u%n", &gi, &ci, &end) != 2 || slash[end] != '\0')
        return NULL;
    size_t len = (size_t)(slash - (id + 4));
    for (unsigned i = 0; i < l->n; i++) {
        const struct gpu *g = &l->gpus[i];
        if (strlen(g->uuid) != len || strncasecmp(g->uuid, id + 4, len) != 0)
            continue;
        for (unsigned j = 0; j < g->n_mig; j++)
            if (g->mig[j].gi_id == gi && g->mig[j].ci_id == ci) {
                *ret_mig = &g->mig[j];
                return g;
            }
    }
    return NULL;
}

static bool all_digits(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

const struct gpu *gpu_list_find(const struct gpu_list *l, const char *id,
                                const struct gpu_mig **ret_mig)
{
    const struct gpu_mig *dummy;
    if (!ret_mig)
        ret_mig = &dummy;
    *ret_mig = NULL;
    if (!l || !id || !*id)
        return NULL;

    if (all_digits(id)) {
        errno = 0;
        char *end;
        unsigned long idx = strtoul(id, &end, 10);
        if (errno != 0 || idx >= l->n)
            return NULL;
        return &l->gpus[idx];
    }
    const struct gpu *g = find_by_legacy_mig(l, id, ret_mig);
    if (g)
        return g;
    g = find_by_uuid(l, id, ret_mig);
    if (g)
        return g;
    return find_by_bus_id(l, id);
}
