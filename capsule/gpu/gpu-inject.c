/* GPU injection: the plan of mounts, links and environment that gives a container its GPUs, and
 * the `capsule check` lines about the driver (see gpu-inject.h). Which GPUs: gpu-select.c; which
 * driver files: driver-files.c. */
#include "capsule/gpu/gpu-inject.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/gpu/driver-files.h"
#include "capsule/gpu/gpu-select.h"
#include "lib/gpu.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/nvml.h"
#include "capsule/image/require.h"
#include "lib/strv.h"

/* Where the image's libraries live, most specific first (Debian/Ubuntu, Red Hat, others). */
static const char *const image_lib_dirs[] = {"/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"};

static int oom(struct errmsg *e)
{
    return errmsg_set(e, -ENOMEM, "out of memory planning GPU injection");
}

/* Adds a bind mount; a target planned already is not planned twice (two MIG devices of one GPU
 * share its device node). */
static int plan_mount(struct gpu_inject *g, const char *source, const char *target, unsigned flags)
{
    for (size_t i = 0; i < g->n_mounts; i++)
        if (strcmp(g->mounts[i].target, target) == 0)
            return 0;
    struct mount_entry *nv = realloc(g->mounts, (g->n_mounts + 1) * sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    g->mounts = nv;
    struct mount_entry *m = &g->mounts[g->n_mounts];
    *m = (struct mount_entry){strdup(source), strdup(target), flags};
    g->n_mounts++;
    return m->source && m->target ? 0 : -ENOMEM;
}

static int plan_link(struct gpu_inject *g, const char *path, const char *target)
{
    struct link_entry *nv = realloc(g->links, (g->n_links + 1) * sizeof(*nv));
    if (!nv)
        return -ENOMEM;
    g->links = nv;
    struct link_entry *l = &g->links[g->n_links];
    *l = (struct link_entry){strdup(path), strdup(target)};
    g->n_links++;
    return l->path && l->target ? 0 : -ENOMEM;
}

void gpu_inject_done(struct gpu_inject *g)
{
    if (!g)
        return;
    strv_free(g->uuids);
    free(g->driver_version);
    free(g->cuda_version);
    for (size_t i = 0; i < g->n_mounts; i++) {
        free(g->mounts[i].source);
        free(g->mounts[i].target);
    }
    free(g->mounts);
    for (size_t i = 0; i < g->n_links; i++) {
        free(g->links[i].path);
        free(g->links[i].target);
    }
    free(g->links);
    strv_free(g->env);
    free(g->lib_dir);
    *g = (struct gpu_inject){0};
}

/* Binds PREFIX+path on path inside when it exists under the root. required: a missing one is an
 * -ENOENT error whose message ends in hint. */
static int plan_same_path(struct gpu_inject *g, const char *prefix, const char *path,
                          unsigned flags, const char *hint, struct errmsg *e)
{
    _cleanup_free_ char *source = NULL;
    if (asprintf(&source, "%s%s", prefix, path) < 0)
        return oom(e);
    struct stat st;
    if (stat(source, &st) < 0) {
        int r = negative_errno();
        if (!hint) {
            log_debug("%s: %s, not injected", source, strerror(-r));
            return 0;
        }
        return errmsg_set(e, r, "%s: %s%s", source, strerror(-r), hint);
    }
    return plan_mount(g, source, path, flags) < 0 ? oom(e) : 0;
}

/* The MIG capability device nodes of one MIG device: its GPU instance's and compute
 * instance's. */
static int plan_mig_caps(struct gpu_inject *g, const char *prefix, const struct gpu *gpu,
                         const struct gpu_mig *mig, struct errmsg *e)
{
    for (int level = 0; level < 2; level++) {
        unsigned minor;
        int r = nvcaps_read_minor(prefix, gpu->minor, mig->gi_id, level ? (int)mig->ci_id : -1,
                                  &minor, e);
        if (r < 0)
            return errmsg_prefix(e, r, "MIG device %s", mig->uuid);
        char path[64];
        snprintf(path, sizeof(path), "/dev/nvidia-caps/nvidia-cap%u", minor);
        r = plan_same_path(g, prefix, path, 0,
                           " (the MIG device nodes are made by nvidia-modprobe, as root)", e);
        if (r < 0)
            return r;
    }
    return 0;
}

static int plan_devices(struct gpu_inject *g, const char *prefix, const struct gpu_pick *picks,
                        size_t n, unsigned caps, struct errmsg *e)
{
    int r = plan_same_path(g, prefix, "/dev/nvidiactl", 0, ": is the NVIDIA driver loaded?", e);
    for (size_t i = 0; r >= 0 && i < n; i++) {
        const struct gpu *gpu = picks[i].gpu;
        /* The minor is the device's number; NVML's index matches it on most hosts. */
        unsigned minor = gpu->has_minor ? gpu->minor : gpu->index;
        char path[64];
        snprintf(path, sizeof(path), "/dev/nvidia%u", minor);
        r = plan_same_path(g, prefix, path, 0, ": is the NVIDIA driver loaded?", e);
        if (picks[i].mig)
            r = r < 0 ? r : plan_mig_caps(g, prefix, gpu, picks[i].mig, e);
        else if (gpu->mig_enabled)
            for (unsigned m = 0; r >= 0 && m < gpu->n_mig; m++)
                r = plan_mig_caps(g, prefix, gpu, &gpu->mig[m], e);
    }
    /* nvidia-uvm appears on first CUDA use on some hosts; without it CUDA fails inside, which
     * `capsule check` reports. */
    if (r >= 0)
        r = plan_same_path(g, prefix, "/dev/nvidia-uvm", 0, NULL, e);
    if (r >= 0)
        r = plan_same_path(g, prefix, "/dev/nvidia-uvm-tools", 0, NULL, e);
    if (r >= 0 && (caps & (DRIVER_CAP_GRAPHICS | DRIVER_CAP_DISPLAY)))
        r = plan_same_path(g, prefix, "/dev/nvidia-modeset", 0, NULL, e);
    return r;
}

/* Whether name is STEM.so or STEM.so.SOMETHING. */
static bool is_stem(const char *name, const char *stem)
{
    size_t sl = strlen(stem);
    return strncmp(name, stem, sl) == 0 && strncmp(name + sl, ".so", 3) == 0 &&
           (name[sl + 3] == '\0' || name[sl + 3] == '.');
}

static bool has_lib(const struct driver_files *f, const char *stem)
{
    for (size_t i = 0; i < f->n_libs; i++)
        if (is_stem(f->libs[i].name, stem))
            return true;
    return false;
}

static int plan_libraries(struct gpu_inject *g, const char *prefix, const struct driver_files *f,
                          struct errmsg *e)
{
    for (size_t i = 0; i < f->n_libs; i++) {
        const struct driver_lib *l = &f->libs[i];
        _cleanup_free_ char *source = NULL, *target = NULL, *link = NULL;
        if (asprintf(&source, "%s%s", prefix, l->path) < 0 ||
            asprintf(&target, "%s/%s", g->lib_dir, l->name) < 0)
            return oom(e);
        if (plan_mount(g, source, target, MOUNT_RO) < 0)
            return oom(e);
        if (l->soname) {
            if (asprintf(&link, "%s/%s", g->lib_dir, l->soname) < 0 ||
                plan_link(g, link, l->name) < 0)
                return oom(e);
        }
        /* What programs built against CUDA's driver API link with -lcuda need at run time of
         * tools that dlopen("libcuda.so"). */
        if (is_stem(l->name, "libcuda")) {
            free(link);
            link = NULL;
            if (asprintf(&link, "%s/libcuda.so", g->lib_dir) < 0 ||
                plan_link(g, link, l->soname ? l->soname : l->name) < 0)
                return oom(e);
        }
    }
    for (size_t i = 0; i < f->n_bins; i++) {
        _cleanup_free_ char *source = NULL, *target = NULL;
        if (asprintf(&source, "%s%s", prefix, f->bins[i].path) < 0 ||
            asprintf(&target, "/usr/bin/%s", f->bins[i].name) < 0 ||
            plan_mount(g, source, target, MOUNT_RO) < 0)
            return oom(e);
    }
    return 0;
}

/* The image's library directory: the first of image_lib_dirs that is a directory in some
 * layer. */
static int pick_lib_dir(const struct gpu_inject_opts *opts, char **ret)
{
    for (size_t d = 0; d < ELEMENTSOF(image_lib_dirs); d++)
        for (size_t i = 0; i < opts->n_image_layers; i++) {
            _cleanup_free_ char *p = NULL;
            if (asprintf(&p, "%s%s", opts->image_layers[i], image_lib_dirs[d]) < 0)
                return -ENOMEM;
            struct stat st;
            if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
                *ret = strdup(image_lib_dirs[d]);
                return *ret ? 0 : -ENOMEM;
            }
        }
    *ret = strdup("/usr/lib");
    return *ret ? 0 : -ENOMEM;
}

/* "13.0" from NVML's 13000; "" when unknown. */
static char *cuda_string(int v)
{
    char *s;
    if (v <= 0)
        return strdup("");
    if (asprintf(&s, "%d.%d", v / 1000, (v % 1000) / 10) < 0)
        return NULL;
    return s;
}

/* NVIDIA_DRIVER_CAPABILITIES: the caller's, else the image's, else utility and compute. */
static int pick_caps(const struct gpu_inject_opts *opts, unsigned *ret, struct errmsg *e)
{
    const char *v = strv_env_get(opts->host_env, "NVIDIA_DRIVER_CAPABILITIES");
    const char *what = "NVIDIA_DRIVER_CAPABILITIES";
    if (!v) {
        v = strv_env_get(opts->image_env, "NVIDIA_DRIVER_CAPABILITIES");
        what = "the image's NVIDIA_DRIVER_CAPABILITIES";
    }
    if (!v)
        v = "utility,compute";
    int r = driver_caps_parse(v, ret, e);
    if (r < 0)
        return errmsg_prefix(e, r, "%s", what);
    if (*ret & DRIVER_CAP_NGX)
        log_debug("driver capability ngx asked for: nothing to inject for it");
    return 0;
}

/* The image's NVIDIA_REQUIRE_* against the driver and the selected GPUs. The caller's
 * NVIDIA_DISABLE_REQUIRE counts as well as the image's. */
static int check_require(const struct gpu_inject_opts *opts, const struct gpu_inject *g,
                         const struct gpu_pick *picks, size_t n, struct errmsg *e)
{
    _cleanup_strv_free_ char **env = strv_copy(opts->image_env);
    _cleanup_strv_free_ char **archs = strv_new();
    if (!env || !archs)
        return oom(e);
    const char *disable = strv_env_get(opts->host_env, "NVIDIA_DISABLE_REQUIRE");
    if (disable && strv_env_set(&env, "NVIDIA_DISABLE_REQUIRE", disable) < 0)
        return oom(e);
    for (size_t i = 0; i < n; i++) {
        char cc[24];
        if (picks[i].gpu->cc_major <= 0)
            continue;
        snprintf(cc, sizeof(cc), "%d.%d", picks[i].gpu->cc_major, picks[i].gpu->cc_minor);
        if (!strv_contains(archs, cc) && strv_push(&archs, cc) < 0)
            return oom(e);
    }
    struct require_host host = {
        .cuda = g->cuda_version,
        .driver = g->driver_version,
        .brand = "",
        .archs = (const char *const *)archs,
    };
    return require_check(env, &host, e);
}

static int plan_env(struct gpu_inject *g, const struct gpu_inject_opts *opts,
                    const struct gpu_pick *picks, size_t n, struct errmsg *e)
{
    size_t size = 1;
    for (size_t i = 0; i < n; i++)
        size += strlen(gpu_pick_uuid(&picks[i])) + 1;
    _cleanup_free_ char *list = calloc(1, size);
    if (!list)
        return oom(e);
    for (size_t i = 0; i < n; i++) {
        if (i)
            strcat(list, ",");
        strcat(list, gpu_pick_uuid(&picks[i]));
        if (strv_push(&g->uuids, gpu_pick_uuid(&picks[i])) < 0)
            return oom(e);
    }
    if (strv_env_set(&g->env, "NVIDIA_VISIBLE_DEVICES", list) < 0)
        return oom(e);
    _cleanup_free_ char *cuda = NULL;
    if (gpu_select_cuda_visible(strv_env_get(opts->host_env, "CUDA_VISIBLE_DEVICES"), picks, n,
                                &cuda) < 0)
        return oom(e);
    if (cuda && strv_env_set(&g->env, "CUDA_VISIBLE_DEVICES", cuda) < 0)
        return oom(e);
    return 0;
}

/* A driver version goes into file names: only digits and dots are believed. */
static bool version_ok(const char *v)
{
    return v[0] && strspn(v, "0123456789.") == strlen(v) && !strstr(v, "..");
}

/* The driver root and its ld cache, read once per plan. */
struct root {
    char *prefix;
    struct ldcache_entry *cache;
    size_t n_cache;
};

static void root_done(struct root *r)
{
    free(r->prefix);
    ldcache_free(r->cache, r->n_cache);
}

static int plan_files(struct gpu_inject *g, const struct root *rt, unsigned caps, struct errmsg *e)
{
    const char *prefix = rt->prefix;
    struct driver_files f;
    int r = driver_files_find(prefix, rt->cache, rt->n_cache, caps, g->driver_version, &f, e);
    if (r < 0)
        return r;
    const char *root = *prefix ? prefix : "/";
    if ((caps & DRIVER_CAP_UTILITY) && !has_lib(&f, "libnvidia-ml"))
        r = errmsg_set(e, -ENOENT,
                       "libnvidia-ml.so.%s not found under %s: is the NVIDIA driver installed?",
                       g->driver_version, root);
    else if ((caps & DRIVER_CAP_COMPUTE) && !has_lib(&f, "libcuda"))
        r = errmsg_set(e, -ENOENT,
                       "libcuda.so.%s not found under %s (NVIDIA_DRIVER_CAPABILITIES has "
                       "compute): is the driver's CUDA library installed?",
                       g->driver_version, root);
    else
        r = plan_libraries(g, prefix, &f, e);
    driver_files_done(&f);
    if (r < 0)
        return r;
    /* The container's /proc is a procfs of the running kernel (or the host's /proc bound): the
     * driver's directory exists there, to be covered read-only, only when this kernel has the
     * driver loaded. A stand-in tree's proc/ on a machine without one has nothing to go on. */
    if (access("/proc/driver/nvidia", F_OK) == 0)
        r = plan_same_path(g, prefix, "/proc/driver/nvidia", MOUNT_RO | MOUNT_REC, NULL, e);
    else
        log_debug("no /proc/driver/nvidia on this kernel: not mounted");
    if (r < 0)
        return r;
    char firmware[128];
    snprintf(firmware, sizeof(firmware), "/lib/firmware/nvidia/%s", g->driver_version);
    return plan_same_path(g, prefix, firmware, MOUNT_RO, NULL, e);
}

/* Opens NVML: opts->nvml_library, else the root's libnvidia-ml.so.1 by its full path, so that
 * a stand-in tree's library is the one asked. */
static int open_nvml(const struct gpu_inject_opts *opts, const struct root *rt, struct nvml **ret,
                     struct errmsg *e)
{
    _cleanup_free_ char *found = NULL, *path = NULL;
    if (!opts->nvml_library) {
        int r = driver_find_nvml(rt->prefix, rt->cache, rt->n_cache, &found, e);
        if (r < 0)
            return r;
        if (asprintf(&path, "%s%s", rt->prefix, found) < 0)
            return oom(e);
    }
    const char *lib = opts->nvml_library ? opts->nvml_library : path;
    log_debug("NVML from %s", lib);
    return nvml_open(lib, ret, e);
}

/* The part of the plan that needs the driver, once GPUs are asked for. */
static int plan_with_driver(const struct gpu_inject_opts *opts, enum gpu_source source,
                            const struct gpu_request *req, struct gpu_inject *g, struct errmsg *e)
{
    _cleanup_(root_done) struct root rt = {.prefix = driver_root_prefix(opts->driver_root)};
    if (!rt.prefix)
        return oom(e);
    int r = ldcache_load(rt.prefix, &rt.cache, &rt.n_cache, e);
    if (r < 0)
        return r;
    _cleanup_(nvml_closep) struct nvml *nvml = NULL;
    r = open_nvml(opts, &rt, &nvml, e);
    if (r < 0 && source == GPU_SOURCE_IMAGE && (r == -ENOENT || r == -ENODEV)) {
        /* NVIDIA's images say "all" everywhere; on a host without a driver they run without. */
        log_debug("image asks for GPUs, but there is no usable driver: %s", e ? e->text : "");
        return 0;
    }
    if (r < 0)
        return r;
    _cleanup_(gpu_list_freep) struct gpu_list *list = NULL;
    r = gpu_list_load(nvml, &list, e);
    if (r < 0)
        return errmsg_prefix(e, r, "reading the GPUs through NVML");
    _cleanup_free_ struct gpu_pick *picks = NULL;
    size_t n = 0;
    r = gpu_select_resolve(list, source, req, &picks, &n, e);
    if (r < 0 || n == 0)
        return r;
    if (!version_ok(list->driver_version))
        return errmsg_set(e, -EIO, "NVML reports driver version '%s', which is not a version",
                          list->driver_version);
    unsigned caps;
    g->driver_version = strdup(list->driver_version);
    g->cuda_version = cuda_string(list->cuda_version);
    g->uuids = strv_new();
    if (!g->driver_version || !g->cuda_version || !g->uuids)
        return oom(e);
    r = pick_caps(opts, &caps, e);
    if (r >= 0)
        r = check_require(opts, g, picks, n, e);
    if (r >= 0)
        r = pick_lib_dir(opts, &g->lib_dir) < 0 ? oom(e) : 0;
    if (r >= 0)
        r = plan_devices(g, rt.prefix, picks, n, caps, e);
    if (r >= 0)
        r = plan_files(g, &rt, caps, e);
    if (r >= 0)
        r = plan_env(g, opts, picks, n, e);
    if (r >= 0)
        g->n_gpus = (unsigned)n;
    return r;
}

int gpu_inject_plan(const struct gpu_inject_opts *opts, struct gpu_inject *ret, struct errmsg *e)
{
    struct gpu_inject g = {.env = strv_new()};
    if (!g.env)
        return oom(e);
    const char *value;
    enum gpu_source source = gpu_source_pick(opts->gpus, opts->host_env, opts->image_env, &value);
    struct gpu_request req;
    int r = gpu_request_parse(source, value, &req, e);
    if (r < 0) {
        gpu_inject_done(&g);
        return r;
    }
    if (req.all || req.ids[0])
        r = plan_with_driver(opts, source, &req, &g, e);
    gpu_request_done(&req);
    if (r >= 0 && g.n_gpus == 0) {
        /* Nothing to inject: an empty plan, whatever was found on the way. */
        gpu_inject_done(&g);
        g.env = strv_new();
        if (!g.env)
            return oom(e);
    }
    if (r < 0) {
        gpu_inject_done(&g);
        return r;
    }
    *ret = g;
    return 0;
}
