/* `capsule check`'s lines about the GPU driver (gpu_inject_check in gpu-inject.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capsule/gpu/driver-files.h"
#include "capsule/gpu/gpu-inject.h"
#include "lib/gpu.h"
#include "lib/macro.h"
#include "lib/nvml.h"

struct checker {
    const char *prefix;
    struct ldcache_entry *cache;
    size_t n_cache;
    void (*report)(const struct gpu_check_line *l, void *userdata);
    void *userdata;
    struct gpu_check_line line;
};

static void line_start(struct checker *c, bool ok)
{
    c->line.ok = ok;
    c->line.text[0] = '\0';
}

/* Appends to the line; a text that does not fit ends in "…" rather than mid-word garbage. */
__attribute__((format(printf, 2, 3))) static void line_add(struct checker *c, const char *fmt, ...)
{
    size_t len = strlen(c->line.text), size = sizeof(c->line.text);
    if (len + 4 >= size)
        return;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(c->line.text + len, size - len, fmt, ap);
    va_end(ap);
    if (k >= 0 && len + (size_t)k >= size)
        strcpy(c->line.text + size - 4, "…");
}

static void line_emit(struct checker *c)
{
    c->report(&c->line, c->userdata);
}

static void check_driver(struct checker *c, const struct gpu_list *l)
{
    line_start(c, true);
    line_add(c, "driver %s", l->driver_version[0] ? l->driver_version : "(version unknown)");
    if (l->cuda_version > 0)
        line_add(c, ", CUDA %d.%d", l->cuda_version / 1000, (l->cuda_version % 1000) / 10);
    line_add(c, ", %u GPU%s", l->n, l->n == 1 ? "" : "s");
    for (unsigned i = 0; i < l->n; i++) {
        const struct gpu *g = &l->gpus[i];
        if (g->error) {
            c->line.ok = false;
            line_add(c, "%s GPU %u unreadable (%s)", i ? "," : ":", i, strerror(-g->error));
        } else {
            line_add(c, "%s %s", i ? "," : ":", g->name);
            if (g->mig_enabled)
                line_add(c, " (MIG, %u device%s)", g->n_mig, g->n_mig == 1 ? "" : "s");
        }
    }
    line_emit(c);
}

/* Whether the caller may open path read-write; says why not on the line. */
static bool check_node(struct checker *c, const char *path, const char *missing_hint)
{
    _cleanup_free_ char *host = NULL;
    if (asprintf(&host, "%s%s", c->prefix, path) < 0)
        return false;
    if (access(host, R_OK | W_OK) == 0)
        return true;
    int err = errno;
    line_add(c, "%s %s: %s%s", c->line.ok ? "" : ";", host, strerror(err),
             err == ENOENT ? missing_hint
                           : " (the node's group or mode keeps you out: ask for the GPU group)");
    c->line.ok = false;
    return false;
}

static void check_nodes(struct checker *c, const struct gpu_list *l)
{
    static const char *const common[] = {"/dev/nvidiactl", "/dev/nvidia-uvm",
                                         "/dev/nvidia-uvm-tools"};
    const char *hint = " (made by nvidia-modprobe, as root)";
    line_start(c, true);
    line_add(c, "device nodes:");
    for (size_t i = 0; i < ELEMENTSOF(common); i++)
        check_node(c, common[i], hint);
    for (unsigned i = 0; l && i < l->n; i++) {
        const struct gpu *g = &l->gpus[i];
        char path[64];
        snprintf(path, sizeof(path), "/dev/nvidia%u", g->has_minor ? g->minor : g->index);
        check_node(c, path, hint);
    }
    if (c->line.ok)
        line_add(c, " %s/dev/nvidia* can be opened read-write", c->prefix);
    line_emit(c);
}

/* One line per capability: what was found, or what is missing. */
static void check_capability(struct checker *c, unsigned cap, const char *version)
{
    struct driver_files f;
    struct errmsg e = {{0}};
    line_start(c, true);
    if (driver_files_find(c->prefix, c->cache, c->n_cache, cap, version, &f, &e) < 0) {
        c->line.ok = false;
        line_add(c, "%s: %s", driver_cap_name(cap), e.text);
        line_emit(c);
        return;
    }
    /* The library without which the capability is useless; injection refuses to go on
     * without it. */
    const char *key = cap == DRIVER_CAP_UTILITY   ? "libnvidia-ml"
                      : cap == DRIVER_CAP_COMPUTE ? "libcuda"
                                                  : NULL;
    bool has_key = false;
    for (size_t i = 0; key && i < f.n_libs; i++)
        has_key = has_key || driver_lib_classify(f.libs[i].name, key, version) != DRIVER_LIB_OTHER;
    const char *root = *c->prefix ? c->prefix : "/";
    line_add(c, "%s:", driver_cap_name(cap));
    if (key && !has_key) {
        c->line.ok = false;
        line_add(c, " no %s.so.%s under %s: is the driver installed?%s", key, version, root,
                 f.n_libs ? " (found:" : "");
    } else if (f.missing & cap) {
        line_add(c, " no libraries of driver %s under %s (only images that ask for it need them)",
                 version, root);
    }
    for (size_t i = 0; i < f.n_libs; i++)
        line_add(c, "%s %s", i ? "," : "", f.libs[i].name);
    for (size_t i = 0; i < f.n_bins; i++)
        line_add(c, "%s %s", i ? "," : (f.n_libs ? " +" : ""), f.bins[i].name);
    if (key && !has_key && f.n_libs)
        line_add(c, ")");
    size_t n_skipped = 0;
    while (f.skipped[n_skipped])
        n_skipped++;
    if (n_skipped)
        line_add(c, " (ignored %zu file%s of another driver, e.g. %s)", n_skipped,
                 n_skipped == 1 ? "" : "s", f.skipped[0]);
    driver_files_done(&f);
    line_emit(c);
}

void gpu_inject_check(const char *driver_root,
                      void (*report)(const struct gpu_check_line *l, void *userdata),
                      void *userdata)
{
    _cleanup_free_ char *prefix = driver_root_prefix(driver_root);
    struct checker c = {.prefix = prefix ? prefix : "", .report = report, .userdata = userdata};
    struct errmsg e = {{0}};
    _cleanup_free_ char *found = NULL, *path = NULL;
    struct nvml *nvml = NULL;
    struct gpu_list *list = NULL;
    if (ldcache_load(c.prefix, &c.cache, &c.n_cache, &e) < 0) {
        /* The directories are still searched: the line says why the cache was not. */
        line_start(&c, false);
        line_add(&c, "ld cache: %s", e.text);
        line_emit(&c);
    }
    int r = driver_find_nvml(c.prefix, c.cache, c.n_cache, &found, &e);
    if (r >= 0 && asprintf(&path, "%s%s", c.prefix, found) < 0)
        r = errmsg_set(&e, -ENOMEM, "out of memory");
    if (r >= 0)
        r = nvml_open(path, &nvml, &e);
    if (r >= 0)
        r = gpu_list_load(nvml, &list, &e);
    if (r < 0) {
        line_start(&c, false);
        line_add(&c, "NVIDIA driver: %s", e.text);
        line_emit(&c);
        check_nodes(&c, NULL);
    } else {
        check_driver(&c, list);
        check_nodes(&c, list);
        for (size_t i = 0; i < 4; i++)
            check_capability(&c, driver_caps_ordered[i], list->driver_version);
    }
    gpu_list_free(list);
    nvml_close(nvml);
    ldcache_free(c.cache, c.n_cache);
}
