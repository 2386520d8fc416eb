#include "gpumon-config.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "collectors.h"
#include "lib/config.h"
#include "lib/macro.h"
#include "lib/strv.h"

#define SECTION "gpumon"

/* The settings that can come from three places; each remembers where its value came from, so
 * that a check failing after all three were merged can still name the flag or file:line. */
enum setting {
    SET_LISTEN,
    SET_INTERVAL,
    SET_SLOW_INTERVAL,
    SET_RESCAN_INTERVAL,
    SET_HOSTNAME,
    SET_NVML_LIBRARY,
    SET_PROC_ROOT,
    SET_SYSFS_ROOT,
    SET_COLLECTORS,
    _SET_MAX,
};

static const char *const setting_key[_SET_MAX] = {
    [SET_LISTEN] = "listen",
    [SET_INTERVAL] = "interval",
    [SET_SLOW_INTERVAL] = "slow_interval",
    [SET_RESCAN_INTERVAL] = "rescan_interval",
    [SET_HOSTNAME] = "hostname",
    [SET_NVML_LIBRARY] = "nvml_library",
    [SET_PROC_ROOT] = "proc_root",
    [SET_SYSFS_ROOT] = "sysfs_root",
    [SET_COLLECTORS] = "collectors",
};

/* NULL: the setting has no flag. */
static const char *const setting_flag[_SET_MAX] = {
    [SET_LISTEN] = "--listen",
    [SET_INTERVAL] = "--interval",
    [SET_SLOW_INTERVAL] = "--slow-interval",
    [SET_HOSTNAME] = "--hostname",
    [SET_NVML_LIBRARY] = "--nvml-library",
    [SET_PROC_ROOT] = "--proc-root",
    [SET_COLLECTORS] = "--collectors",
};

#define ORIGIN_MAX 320

struct loader {
    struct gpumon_config cfg;
    char origin[_SET_MAX][ORIGIN_MAX]; /* "--interval 50ms", "f.conf:3: [gpumon] interval = 50ms" */
};

static char **string_member(struct gpumon_config *c, enum setting s)
{
    switch (s) {
    case SET_LISTEN:
        return &c->listen;
    case SET_HOSTNAME:
        return &c->hostname;
    case SET_NVML_LIBRARY:
        return &c->nvml_library;
    case SET_PROC_ROOT:
        return &c->proc_root;
    case SET_SYSFS_ROOT:
        return &c->sysfs_root;
    case SET_COLLECTORS:
        return &c->collectors;
    default:
        return NULL;
    }
}

static double *duration_member(struct gpumon_config *c, enum setting s)
{
    switch (s) {
    case SET_INTERVAL:
        return &c->interval_s;
    case SET_SLOW_INTERVAL:
        return &c->slow_interval_s;
    case SET_RESCAN_INTERVAL:
        return &c->rescan_interval_s;
    default:
        return NULL;
    }
}

static int set_string(struct loader *l, enum setting s, const char *value)
{
    char **m = string_member(&l->cfg, s);
    char *copy = strdup(value);
    if (!copy)
        return -ENOMEM;
    free(*m);
    *m = copy;
    return 0;
}

static int load_defaults(struct loader *l)
{
    static const char *const defaults[_SET_MAX] = {
        [SET_LISTEN] = GPUMON_DEFAULT_LISTEN,
        [SET_HOSTNAME] = "",
        [SET_NVML_LIBRARY] = "",
        [SET_PROC_ROOT] = GPUMON_DEFAULT_PROC_ROOT,
        [SET_SYSFS_ROOT] = GPUMON_DEFAULT_SYSFS_ROOT,
        [SET_COLLECTORS] = "",
    };
    l->cfg.interval_s = GPUMON_DEFAULT_INTERVAL;
    l->cfg.slow_interval_s = GPUMON_DEFAULT_SLOW_INTERVAL;
    l->cfg.rescan_interval_s = GPUMON_DEFAULT_RESCAN_INTERVAL;
    l->cfg.process_metrics = true;
    l->cfg.pcie_throughput = false;
    for (enum setting s = 0; s < _SET_MAX; s++) {
        if (string_member(&l->cfg, s) && set_string(l, s, defaults[s]) < 0)
            return -ENOMEM;
        double *d = duration_member(&l->cfg, s);
        if (d)
            snprintf(l->origin[s], ORIGIN_MAX, "the default %s = %gs", setting_key[s], *d);
        else
            snprintf(l->origin[s], ORIGIN_MAX, "the default %s = '%s'", setting_key[s],
                     defaults[s]);
    }
    return 0;
}

static int load_file_setting(struct loader *l, struct config *c, enum setting s, struct errmsg *e)
{
    const char *key = setting_key[s];
    const char *raw = config_get(c, SECTION, key);
    if (!raw)
        return 0;
    snprintf(l->origin[s], ORIGIN_MAX, "%s:%u: [" SECTION "] %s = %s", config_path(c),
             config_line(c, SECTION, key), key, raw);
    double *d = duration_member(&l->cfg, s);
    if (d)
        return config_get_duration(c, SECTION, key, *d, d, e);
    return set_string(l, s, raw);
}

static int load_file(struct loader *l, const char *path, struct errmsg *e)
{
    _cleanup_(config_freep) struct config *c = NULL;
    int r = config_load(path, &c, e);
    if (r < 0)
        return r;
    for (enum setting s = 0; s < _SET_MAX; s++)
        if ((r = load_file_setting(l, c, s, e)) < 0)
            return r;
    if ((r = config_get_bool(c, SECTION, "process_metrics", l->cfg.process_metrics,
                             &l->cfg.process_metrics, e)) < 0 ||
        (r = config_get_bool(c, SECTION, "pcie_throughput", l->cfg.pcie_throughput,
                             &l->cfg.pcie_throughput, e)) < 0 ||
        (r = config_get_bool(c, SECTION, "dcgm3_names", l->cfg.dcgm3_names, &l->cfg.dcgm3_names,
                             e)) < 0)
        return r;
    /* Last, so that a typo in a key is reported even when every other key is fine. */
    return config_check_unused(c, e);
}

static int load_flag(struct loader *l, enum setting s, const char *value, struct errmsg *e)
{
    if (!value)
        return 0;
    snprintf(l->origin[s], ORIGIN_MAX, "%s %s", setting_flag[s], value);
    double *d = duration_member(&l->cfg, s);
    if (!d)
        return set_string(l, s, value);
    int r = parse_duration(value, d);
    if (r < 0)
        return errmsg_set(e, r, "%s '%s': not a duration (like 500ms, 1s, 2m)", setting_flag[s],
                          value);
    return 0;
}

static int load_flags(struct loader *l, const struct gpumon_flags *f, struct errmsg *e)
{
    const char *values[_SET_MAX] = {
        [SET_LISTEN] = f->listen,
        [SET_INTERVAL] = f->interval,
        [SET_SLOW_INTERVAL] = f->slow_interval,
        [SET_HOSTNAME] = f->hostname,
        [SET_NVML_LIBRARY] = f->nvml_library,
        [SET_PROC_ROOT] = f->proc_root,
        [SET_COLLECTORS] = f->collectors,
    };
    int r;
    for (enum setting s = 0; s < _SET_MAX; s++)
        if ((r = load_flag(l, s, values[s], e)) < 0)
            return r;
    return 0;
}

/* dcgm-exporter's environment, for settings neither the file nor a flag gave: a pod spec written
 * for it keeps working. */
static int load_environment(struct loader *l)
{
    static const struct {
        enum setting s;
        const char *var;
    } vars[] = {
        {SET_HOSTNAME, "NODE_NAME"},
        {SET_COLLECTORS, "DCGM_EXPORTER_COLLECTORS"},
    };
    for (size_t i = 0; i < ELEMENTSOF(vars); i++) {
        const char *v = getenv(vars[i].var);
        if (!v || !v[0] || (*string_member(&l->cfg, vars[i].s))[0])
            continue;
        snprintf(l->origin[vars[i].s], ORIGIN_MAX, "$%s '%s'", vars[i].var, v);
        if (set_string(l, vars[i].s, v) < 0)
            return -ENOMEM;
    }
    return 0;
}

/* The selection: the collectors file's rows, or everything gpumon has. */
static int load_collectors(struct loader *l, struct errmsg *e)
{
    struct gpumon_config *c = &l->cfg;
    if (!c->collectors[0]) {
        expose_select_all(&c->selection, c->dcgm3_names);
        c->collectors_skipped = strv_new();
        return c->collectors_skipped ? 0 : -ENOMEM;
    }
    const char *names[EXPOSE_DCGM_NAMES_MAX];
    size_t n = expose_dcgm_names(names);
    bool selected[EXPOSE_DCGM_NAMES_MAX] = {false};
    struct collectors_result res = {.selected = selected};
    int r = collectors_load(c->collectors, names, n, &res, e);
    if (r < 0)
        return errmsg_prefix(e, r, "%s", l->origin[SET_COLLECTORS]);
    expose_select(names, selected, n, &c->selection);
    c->collectors_skipped = res.skipped;
    return 0;
}

static int check_intervals(const struct loader *l, struct errmsg *e)
{
    const struct gpumon_config *c = &l->cfg;
    if (c->interval_s < GPUMON_INTERVAL_MIN || c->interval_s > GPUMON_INTERVAL_MAX)
        return errmsg_set(e, -ERANGE, "%s: interval must be between 100ms and 1h",
                          l->origin[SET_INTERVAL]);
    if (c->rescan_interval_s < GPUMON_INTERVAL_MIN || c->rescan_interval_s > GPUMON_INTERVAL_MAX)
        return errmsg_set(e, -ERANGE, "%s: rescan_interval must be between 100ms and 1h",
                          l->origin[SET_RESCAN_INTERVAL]);
    if (c->slow_interval_s > GPUMON_INTERVAL_MAX)
        return errmsg_set(e, -ERANGE, "%s: slow_interval must be at most 1h",
                          l->origin[SET_SLOW_INTERVAL]);
    /* The fast pass merges the slow values; reading them more often than it would be wasted. */
    if (c->slow_interval_s < c->interval_s)
        return errmsg_set(e, -EINVAL, "%s: slow_interval must not be shorter than interval (%s)",
                          l->origin[SET_SLOW_INTERVAL], l->origin[SET_INTERVAL]);
    return 0;
}

static int check_strings(struct loader *l, struct errmsg *e)
{
    struct gpumon_config *c = &l->cfg;
    char host[256];
    uint16_t port;
    int r = parse_listen_address(c->listen, host, sizeof(host), &port, e);
    if (r < 0)
        return errmsg_prefix(e, r, "%s", l->origin[SET_LISTEN]);
    if (c->proc_root[0] != '/')
        return errmsg_set(e, -EINVAL, "%s: proc_root must be an absolute path",
                          l->origin[SET_PROC_ROOT]);
    if (c->sysfs_root[0] && c->sysfs_root[0] != '/')
        return errmsg_set(e, -EINVAL, "%s: sysfs_root must be an absolute path or empty",
                          l->origin[SET_SYSFS_ROOT]);
    if (!c->hostname[0]) {
        char name[HOST_NAME_MAX + 1] = "";
        /* gethostname() may leave a truncated name unterminated. */
        if (gethostname(name, sizeof(name) - 1) < 0 || !name[0])
            snprintf(name, sizeof(name), "localhost");
        if (set_string(l, SET_HOSTNAME, name) < 0)
            return -ENOMEM;
    }
    if (strlen(c->hostname) > 255)
        return errmsg_set(e, -EINVAL, "%s: hostname must be at most 255 bytes",
                          l->origin[SET_HOSTNAME]);
    return 0;
}

int gpumon_config_load(const struct gpumon_flags *flags, struct gpumon_config *ret,
                       struct errmsg *e)
{
    struct loader *l = calloc(1, sizeof(*l));
    if (!l)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int r = load_defaults(l);
    if (r >= 0 && flags->config_path)
        r = load_file(l, flags->config_path, e);
    if (r >= 0)
        r = load_flags(l, flags, e);
    if (r >= 0)
        r = load_environment(l);
    if (r >= 0)
        r = check_intervals(l, e);
    if (r >= 0)
        r = check_strings(l, e);
    if (r >= 0)
        r = load_collectors(l, e);
    if (r < 0) {
        gpumon_config_done(&l->cfg);
        free(l);
        return r == -ENOMEM ? errmsg_set(e, r, "out of memory") : r;
    }
    *ret = l->cfg;
    free(l);
    return 0;
}

void gpumon_config_done(struct gpumon_config *c)
{
    free(c->listen);
    free(c->hostname);
    free(c->nvml_library);
    free(c->proc_root);
    free(c->sysfs_root);
    free(c->collectors);
    strv_free(c->collectors_skipped);
    memset(c, 0, sizeof(*c));
}
