/* Reading the fixture: a JSON file (schema in README.md) turned into struct fake_fixture.
 *
 * The parser is strict on purpose: an unknown key, a wrong type or an out-of-range number fails
 * the load with a message that names the key, because a silently ignored typo in a fixture makes
 * a test pass for the wrong reason. Keys starting with "_" are comments and ignored. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "fake-nvml.h"
#include "lib/macro.h"

static const char *const call_names[] = {
#define FAKE_CALL_NAME(name, ret, params) #name,
    NVML_API_FUNCTIONS(FAKE_CALL_NAME)
#undef FAKE_CALL_NAME
};

static const struct {
    const char *name;
    nvmlReturn_t code;
} error_names[] = {
    {"SUCCESS", NVML_SUCCESS},
    {"UNINITIALIZED", NVML_ERROR_UNINITIALIZED},
    {"INVALID_ARGUMENT", NVML_ERROR_INVALID_ARGUMENT},
    {"NOT_SUPPORTED", NVML_ERROR_NOT_SUPPORTED},
    {"NO_PERMISSION", NVML_ERROR_NO_PERMISSION},
    {"ALREADY_INITIALIZED", NVML_ERROR_ALREADY_INITIALIZED},
    {"NOT_FOUND", NVML_ERROR_NOT_FOUND},
    {"INSUFFICIENT_SIZE", NVML_ERROR_INSUFFICIENT_SIZE},
    {"INSUFFICIENT_POWER", NVML_ERROR_INSUFFICIENT_POWER},
    {"DRIVER_NOT_LOADED", NVML_ERROR_DRIVER_NOT_LOADED},
    {"TIMEOUT", NVML_ERROR_TIMEOUT},
    {"IRQ_ISSUE", NVML_ERROR_IRQ_ISSUE},
    {"LIBRARY_NOT_FOUND", NVML_ERROR_LIBRARY_NOT_FOUND},
    {"FUNCTION_NOT_FOUND", NVML_ERROR_FUNCTION_NOT_FOUND},
    {"CORRUPTED_INFOROM", NVML_ERROR_CORRUPTED_INFOROM},
    {"GPU_IS_LOST", NVML_ERROR_GPU_IS_LOST},
    {"RESET_REQUIRED", NVML_ERROR_RESET_REQUIRED},
    {"OPERATING_SYSTEM", NVML_ERROR_OPERATING_SYSTEM},
    {"LIB_RM_VERSION_MISMATCH", NVML_ERROR_LIB_RM_VERSION_MISMATCH},
    {"IN_USE", NVML_ERROR_IN_USE},
    {"MEMORY", NVML_ERROR_MEMORY},
    {"NO_DATA", NVML_ERROR_NO_DATA},
    {"VGPU_ECC_NOT_ENABLED", NVML_ERROR_VGPU_ECC_NOT_ENABLED},
    {"INSUFFICIENT_RESOURCES", NVML_ERROR_INSUFFICIENT_RESOURCES},
    {"FREQ_NOT_SUPPORTED", NVML_ERROR_FREQ_NOT_SUPPORTED},
    {"ARGUMENT_VERSION_MISMATCH", NVML_ERROR_ARGUMENT_VERSION_MISMATCH},
    {"DEPRECATED", NVML_ERROR_DEPRECATED},
    {"NOT_READY", NVML_ERROR_NOT_READY},
    {"GPU_NOT_FOUND", NVML_ERROR_GPU_NOT_FOUND},
    {"INVALID_STATE", NVML_ERROR_INVALID_STATE},
    {"UNKNOWN", NVML_ERROR_UNKNOWN},
};

static const struct {
    const char *name;
    unsigned long long bit;
} reason_names[] = {
    {"GpuIdle", nvmlClocksEventReasonGpuIdle},
    {"ApplicationsClocksSetting", nvmlClocksEventReasonApplicationsClocksSetting},
    {"SwPowerCap", nvmlClocksEventReasonSwPowerCap},
    {"HwSlowdown", nvmlClocksThrottleReasonHwSlowdown},
    {"SyncBoost", nvmlClocksEventReasonSyncBoost},
    {"SwThermalSlowdown", nvmlClocksEventReasonSwThermalSlowdown},
    {"HwThermalSlowdown", nvmlClocksThrottleReasonHwThermalSlowdown},
    {"HwPowerBrakeSlowdown", nvmlClocksThrottleReasonHwPowerBrakeSlowdown},
    {"DisplayClockSetting", nvmlClocksEventReasonDisplayClockSetting},
};

int fake_error_from_name(const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(error_names); i++)
        if (strcmp(error_names[i].name, name) == 0)
            return error_names[i].code;
    return -1;
}

int fake_call_from_name(const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(call_names); i++)
        if (strcmp(call_names[i], name) == 0)
            return (int)i;
    return -1;
}

/* Where the parser is and where its message goes. */
struct parse {
    char *err;
    size_t errlen;
};

static int __attribute__((format(printf, 3, 4)))
fail(struct parse *p, const char *where, const char *fmt, ...)
{
    char msg[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    snprintf(p->err, p->errlen, "%s%s%s", where, *where ? ": " : "", msg);
    return -EINVAL;
}

/* Fails on a key not in allowed (NULL-terminated); "_comment" keys are allowed everywhere. */
static int check_keys(struct parse *p, const char *where, json_t *obj, const char *const *allowed)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        if (key[0] == '_')
            continue;
        bool ok = false;
        for (size_t i = 0; allowed[i] && !ok; i++)
            ok = strcmp(allowed[i], key) == 0;
        if (!ok)
            return fail(p, where, "unknown key \"%s\"", key);
    }
    return 0;
}

static int expect_object(struct parse *p, const char *where, json_t *v)
{
    return json_is_object(v) ? 0 : fail(p, where, "expected an object");
}

/* An optional non-negative integer no larger than max; absent or null leaves n->set false. */
static int get_num(struct parse *p, const char *where, json_t *obj, const char *key,
                   unsigned long long max, struct fake_num *n)
{
    json_t *v = json_object_get(obj, key);
    n->set = false;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        (unsigned long long)json_integer_value(v) > max)
        return fail(p, where, "\"%s\" must be an integer from 0 to %llu", key, max);
    n->set = true;
    n->v = (unsigned long long)json_integer_value(v);
    return 0;
}

/* A required non-negative integer. */
static int get_uint(struct parse *p, const char *where, json_t *obj, const char *key,
                    unsigned long long max, unsigned *ret)
{
    struct fake_num n = {0};
    int r = get_num(p, where, obj, key, max, &n);
    if (r < 0)
        return r;
    if (!n.set)
        return fail(p, where, "\"%s\" is required", key);
    *ret = (unsigned)n.v;
    return 0;
}

/* An optional instance id (gi, ci): absent means NVML_INSTANCE_ID_NONE. */
static int get_instance_id(struct parse *p, const char *where, json_t *obj, const char *key,
                           unsigned *ret)
{
    struct fake_num n = {0};
    int r = get_num(p, where, obj, key, FAKE_MAX_GI - 1, &n);
    if (r < 0)
        return r;
    *ret = n.set ? (unsigned)n.v : NVML_INSTANCE_ID_NONE;
    return 0;
}

/* An optional number of seconds >= 0; absent leaves *ret as it was. */
static int get_seconds(struct parse *p, const char *where, json_t *obj, const char *key,
                       double *ret)
{
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_number(v) || json_number_value(v) < 0)
        return fail(p, where, "\"%s\" must be a number of seconds >= 0", key);
    *ret = json_number_value(v);
    return 0;
}

static int get_bool(struct parse *p, const char *where, json_t *obj, const char *key, bool *ret)
{
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    if (!json_is_boolean(v))
        return fail(p, where, "\"%s\" must be true or false", key);
    *ret = json_is_true(v);
    return 0;
}

/* An optional string; *ret_set tells whether it was there. */
static int get_string(struct parse *p, const char *where, json_t *obj, const char *key, char *buf,
                      size_t size, bool *ret_set)
{
    json_t *v = json_object_get(obj, key);
    *ret_set = false;
    if (!v)
        return 0;
    if (!json_is_string(v) || json_string_length(v) >= size)
        return fail(p, where, "\"%s\" must be a string shorter than %zu bytes", key, size);
    memcpy(buf, json_string_value(v), json_string_length(v) + 1);
    *ret_set = true;
    return 0;
}

static int parse_error_name(struct parse *p, const char *where, json_t *v, nvmlReturn_t *ret)
{
    int code = json_is_string(v) ? fake_error_from_name(json_string_value(v)) : -1;
    if (code <= 0)
        return fail(p, where, "expected an NVML error name without NVML_ERROR_ (\"GPU_IS_LOST\")");
    *ret = code;
    return 0;
}

/* A per-GPU object {call: number from 0 to max} ("delay_us", "max_calls") into out[call]. */
static int parse_call_numbers(struct parse *p, const char *where, json_t *obj, const char *key,
                              json_int_t max, unsigned *out)
{
    char w[128];
    json_t *v;
    const char *call;
    json_t *numbers = json_object_get(obj, key);
    if (numbers && !out)
        return fail(p, where, "\"%s\" is only allowed on a GPU", key);
    if (numbers && !json_is_object(numbers))
        return fail(p, where, "\"%s\" must be an object {call: number}", key);
    json_object_foreach(numbers, call, v)
    {
        int c = fake_call_from_name(call);
        snprintf(w, sizeof(w), "%s: %s.%s", where, key, call);
        if (c < 0)
            return fail(p, w, "not an entry point of lib/nvml-api.h");
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > max)
            return fail(p, w, "must be an integer from 0 to %lld", (long long)max);
        out[c] = (unsigned)json_integer_value(v);
    }
    return 0;
}

/* "errors", "unsupported", "delay_us" and "max_calls": per-call settings keyed by entry point
 * name (the last two only on a GPU: delay_us and max_calls are NULL at the top level). */
static int parse_calls(struct parse *p, const char *where, json_t *obj, nvmlReturn_t *forced,
                       unsigned *delay_us, unsigned *max_calls)
{
    char w[128];
    json_t *v;
    const char *key;
    size_t i;

    json_t *unsupported = json_object_get(obj, "unsupported");
    if (unsupported && !json_is_array(unsupported))
        return fail(p, where, "\"unsupported\" must be an array of call names");
    json_array_foreach(unsupported, i, v)
    {
        int c = json_is_string(v) ? fake_call_from_name(json_string_value(v)) : -1;
        if (c < 0)
            return fail(p, where, "unsupported[%zu]: not an entry point of lib/nvml-api.h", i);
        forced[c] = NVML_ERROR_NOT_SUPPORTED;
    }

    json_t *errors = json_object_get(obj, "errors");
    if (errors && expect_object(p, "errors", errors) < 0)
        return fail(p, where, "\"errors\" must be an object {call: error name}");
    json_object_foreach(errors, key, v)
    {
        int c = fake_call_from_name(key);
        snprintf(w, sizeof(w), "%s: errors.%s", where, key);
        if (c < 0)
            return fail(p, w, "not an entry point of lib/nvml-api.h");
        int r = parse_error_name(p, w, v, &forced[c]);
        if (r < 0)
            return r;
    }

    int r = parse_call_numbers(p, where, obj, "delay_us", 10 * 1000 * 1000, delay_us);
    if (r >= 0)
        r = parse_call_numbers(p, where, obj, "max_calls", 1000 * 1000 * 1000, max_calls);
    return r;
}

static int parse_processes(struct parse *p, const char *where, json_t *arr, struct fake_gpu *g)
{
    static const char *const keys[] = {"pid", "used_memory", "type", "gi", "ci", NULL};
    char w[128];
    json_t *v;
    size_t i;

    if (!arr)
        return 0;
    if (!json_is_array(arr))
        return fail(p, where, "\"processes\" must be an array");
    g->procs = calloc(json_array_size(arr) + 1, sizeof(*g->procs));
    if (!g->procs)
        return fail(p, where, "out of memory");
    json_array_foreach(arr, i, v)
    {
        struct fake_proc *pr = &g->procs[i];
        struct fake_num mem = {0};
        snprintf(w, sizeof(w), "%s: processes[%zu]", where, i);
        int r = expect_object(p, w, v);
        if (r >= 0)
            r = check_keys(p, w, v, keys);
        if (r >= 0)
            r = get_uint(p, w, v, "pid", 0x7fffffff, &pr->pid);
        if (r >= 0)
            r = get_num(p, w, v, "used_memory", NVML_VALUE_NOT_AVAILABLE - 1, &mem);
        if (r >= 0)
            r = get_instance_id(p, w, v, "gi", &pr->gi);
        if (r >= 0)
            r = get_instance_id(p, w, v, "ci", &pr->ci);
        if (r < 0)
            return r;
        pr->used_memory = mem.set ? mem.v : NVML_VALUE_NOT_AVAILABLE;
        json_t *type = json_object_get(v, "type");
        const char *t = type ? json_string_value(type) : "compute";
        if (!t ||
            !(strcmp(t, "compute") == 0 || strcmp(t, "graphics") == 0 || strcmp(t, "both") == 0))
            return fail(p, w, "\"type\" must be \"compute\", \"graphics\" or \"both\"");
        pr->compute = strcmp(t, "graphics") != 0;
        pr->graphics = strcmp(t, "compute") != 0;
        g->n_procs++;
    }
    return 0;
}

static int parse_events(struct parse *p, const char *where, json_t *arr, struct fake_gpu *g)
{
    static const char *const keys[] = {"at", "xid", "gi", "ci", NULL};
    char w[128];
    json_t *v;
    size_t i;

    if (!arr)
        return 0;
    if (!json_is_array(arr))
        return fail(p, where, "\"events\" must be an array");
    g->events = calloc(json_array_size(arr) + 1, sizeof(*g->events));
    if (!g->events)
        return fail(p, where, "out of memory");
    json_array_foreach(arr, i, v)
    {
        struct fake_event *ev = &g->events[i];
        unsigned xid = 0;
        snprintf(w, sizeof(w), "%s: events[%zu]", where, i);
        int r = expect_object(p, w, v);
        if (r >= 0)
            r = check_keys(p, w, v, keys);
        if (r >= 0 && !json_object_get(v, "at"))
            r = fail(p, w, "\"at\" is required");
        if (r >= 0)
            r = get_seconds(p, w, v, "at", &ev->at);
        if (r >= 0)
            r = get_uint(p, w, v, "xid", 0xffffffffu, &xid);
        if (r >= 0)
            r = get_instance_id(p, w, v, "gi", &ev->gi);
        if (r >= 0)
            r = get_instance_id(p, w, v, "ci", &ev->ci);
        if (r < 0)
            return r;
        ev->xid = xid;
        g->n_events++;
    }
    return 0;
}

static int parse_profiles(struct parse *p, const char *where, json_t *arr, struct fake_gpu *g)
{
    static const char *const keys[] = {
        "index", "id", "name", "slices", "memory_mb", "instances", "multiprocessors", NULL};
    char w[128];
    json_t *v;
    size_t i;

    if (!arr)
        return 0;
    if (!json_is_array(arr) || json_array_size(arr) > FAKE_MAX_PROFILES)
        return fail(p, where, "\"mig_profiles\" must be an array of at most %d profiles",
                    FAKE_MAX_PROFILES);
    json_array_foreach(arr, i, v)
    {
        struct fake_mig_profile *pf = &g->profiles[i];
        struct fake_num n = {0};
        bool set;
        snprintf(w, sizeof(w), "%s: mig_profiles[%zu]", where, i);
        int r = expect_object(p, w, v);
        if (r >= 0)
            r = check_keys(p, w, v, keys);
        if (r >= 0)
            r = get_uint(p, w, v, "index", NVML_GPU_INSTANCE_PROFILE_MAX_INDEX - 1, &pf->index);
        if (r >= 0)
            r = get_uint(p, w, v, "id", 0xffff, &pf->id);
        if (r >= 0)
            r = get_uint(p, w, v, "slices", 8, &pf->slices);
        if (r >= 0)
            r = get_num(p, w, v, "memory_mb", 1ULL << 32, &n);
        if (r >= 0 && !n.set)
            r = fail(p, w, "\"memory_mb\" is required");
        if (r >= 0)
            r = get_string(p, w, v, "name", pf->name, sizeof(pf->name), &set);
        if (r >= 0 && !set)
            r = fail(p, w, "\"name\" is required (\"MIG 1g.10gb\")");
        if (r < 0)
            return r;
        pf->memory_mb = n.v;
        pf->instances = pf->slices ? 7 / pf->slices : 0;
        pf->multiprocessors = 0;
        struct fake_num inst = {0}, sm = {0};
        if (get_num(p, w, v, "instances", 8, &inst) < 0 ||
            get_num(p, w, v, "multiprocessors", 1024, &sm) < 0)
            return -EINVAL;
        if (inst.set)
            pf->instances = (unsigned)inst.v;
        if (sm.set)
            pf->multiprocessors = (unsigned)sm.v;
        g->n_profiles++;
    }
    return 0;
}

/* {metric name: number} into m. Values are not range-checked: a test may feed what a confused
 * driver would give (a negative rate, a utilisation above 100). */
static int parse_gpm_metrics(struct parse *p, const char *where, json_t *obj, const char *key,
                             struct fake_gpm *m)
{
    char w[160];
    const char *name;
    json_t *v, *metrics = json_object_get(obj, key);
    if (!metrics)
        return 0;
    snprintf(w, sizeof(w), "%s: %s", where, key);
    if (expect_object(p, w, metrics) < 0)
        return -EINVAL;
    json_object_foreach(metrics, name, v)
    {
        if (name[0] == '_')
            continue;
        int id = fake_gpm_metric_from_name(name);
        if (id < 0)
            return fail(p, w, "unknown GPM metric \"%s\" (\"sm_util\", \"pcie_tx_per_sec\", ...)",
                        name);
        if (!json_is_number(v))
            return fail(p, w, "\"%s\" must be a number", name);
        m->set[id] = true;
        m->v[id] = json_number_value(v);
    }
    return 0;
}

/* "gpm": {"supported": bool, "metrics": {...}}; absent: no GPM (pre-Hopper). */
static int parse_gpm(struct parse *p, const char *where, json_t *obj, struct fake_gpu *g)
{
    static const char *const keys[] = {"supported", "metrics", NULL};
    char w[128];
    json_t *gpm = json_object_get(obj, "gpm");
    if (!gpm)
        return 0;
    snprintf(w, sizeof(w), "%s: gpm", where);
    if (expect_object(p, w, gpm) < 0 || check_keys(p, w, gpm, keys) < 0)
        return -EINVAL;
    if (!json_object_get(gpm, "supported"))
        return fail(p, w, "\"supported\" is required");
    if (get_bool(p, w, gpm, "supported", &g->gpm_supported) < 0)
        return -EINVAL;
    return parse_gpm_metrics(p, w, gpm, "metrics", &g->gpm);
}

/* "nvlink": {"links", "data_tx_kibps", "data_rx_kibps", "raw_tx_kibps", "raw_rx_kibps"}. */
static int parse_nvlink(struct parse *p, const char *where, json_t *obj, struct fake_gpu *g)
{
    static const char *const keys[] = {"links",        "data_tx_kibps", "data_rx_kibps",
                                       "raw_tx_kibps", "raw_rx_kibps",  NULL};
    char w[128];
    json_t *nv = json_object_get(obj, "nvlink");
    struct fake_num rate[4] = {{0}};
    if (!nv)
        return 0;
    snprintf(w, sizeof(w), "%s: nvlink", where);
    if (expect_object(p, w, nv) < 0 || check_keys(p, w, nv, keys) < 0 ||
        get_uint(p, w, nv, "links", NVML_NVLINK_MAX_LINKS, &g->nvlink_links) < 0)
        return -EINVAL;
    if (g->nvlink_links == 0)
        return fail(p, w, "\"links\" must be 1 to %d (leave \"nvlink\" out for none)",
                    NVML_NVLINK_MAX_LINKS);
    for (size_t i = 0; i < 4; i++)
        if (get_num(p, w, nv, keys[1 + i], 1ULL << 40, &rate[i]) < 0)
            return -EINVAL;
    if (!rate[0].set || !rate[1].set)
        return fail(p, w, "\"data_tx_kibps\" and \"data_rx_kibps\" are required (KiB/s)");
    /* Without raw rates the protocol overhead is taken as none. */
    for (size_t i = 0; i < 4; i++)
        g->nvlink_kibps[i] = rate[i].set ? rate[i].v : rate[i % 2].v;
    return 0;
}

static const struct {
    const char *name;
    int mode;
} virt_modes[] = {
    {"NONE", NVML_GPU_VIRTUALIZATION_MODE_NONE},
    {"PASSTHROUGH", NVML_GPU_VIRTUALIZATION_MODE_PASSTHROUGH},
    {"VGPU", NVML_GPU_VIRTUALIZATION_MODE_VGPU},
    {"HOST_VGPU", NVML_GPU_VIRTUALIZATION_MODE_HOST_VGPU},
    {"HOST_VSGA", NVML_GPU_VIRTUALIZATION_MODE_HOST_VSGA},
};

static int parse_virt_mode(struct parse *p, const char *w, json_t *obj, struct fake_gpu *g)
{
    json_t *v = json_object_get(obj, "virtualization_mode");
    if (!v || json_is_null(v))
        return 0;
    for (size_t i = 0; json_is_string(v) && i < ELEMENTSOF(virt_modes); i++)
        if (strcmp(json_string_value(v), virt_modes[i].name) == 0) {
            g->virt_mode = (struct fake_num){true, (unsigned long long)virt_modes[i].mode};
            return 0;
        }
    return fail(p, w,
                "\"virtualization_mode\" must be \"NONE\", \"PASSTHROUGH\", \"VGPU\", "
                "\"HOST_VGPU\" or \"HOST_VSGA\"");
}

static int parse_instance(struct parse *p, const char *w, json_t *v, struct fake_gpu *g,
                          struct fake_mig_instance *in)
{
    static const char *const keys[] = {"gi",     "ci",          "profile_id", "uuid",
                                       "memory", "gpm_metrics", NULL};
    static const char *const mem_keys[] = {"total", "used", NULL};
    bool set;
    int r = expect_object(p, w, v);
    if (r >= 0)
        r = check_keys(p, w, v, keys);
    if (r >= 0)
        r = get_uint(p, w, v, "gi", FAKE_MAX_GI - 1, &in->gi);
    if (r >= 0)
        r = get_uint(p, w, v, "ci", FAKE_MAX_GI - 1, &in->ci);
    if (r >= 0)
        r = get_uint(p, w, v, "profile_id", 0xffff, &in->profile_id);
    if (r >= 0)
        r = get_string(p, w, v, "uuid", in->uuid, sizeof(in->uuid), &set);
    if (r >= 0 && !set)
        r = fail(p, w, "\"uuid\" is required (\"MIG-…\")");
    if (r < 0)
        return r;
    if (!fake_profile_by_id(g, in->profile_id))
        return fail(p, w, "profile_id %u is not in mig_profiles", in->profile_id);
    json_t *mem = json_object_get(v, "memory");
    if (mem) {
        if (expect_object(p, w, mem) < 0 || check_keys(p, w, mem, mem_keys) < 0 ||
            get_num(p, w, mem, "total", 1ULL << 50, &in->mem_total) < 0 ||
            get_num(p, w, mem, "used", 1ULL << 50, &in->mem_used) < 0)
            return -EINVAL;
        if (!in->mem_total.set || !in->mem_used.set || in->mem_used.v > in->mem_total.v)
            return fail(p, w, "memory needs \"total\" and \"used\" <= total (bytes)");
    }
    return parse_gpm_metrics(p, w, v, "gpm_metrics", &in->gpm);
}

static int parse_mig(struct parse *p, const char *where, json_t *mig, struct fake_gpu *g)
{
    static const char *const keys[] = {"enabled", "pending", "max_devices", "instances", NULL};
    char w[128];
    json_t *v;
    size_t i;

    if (!mig)
        return 0;
    snprintf(w, sizeof(w), "%s: mig", where);
    int r = expect_object(p, w, mig);
    if (r >= 0)
        r = check_keys(p, w, mig, keys);
    if (r < 0)
        return r;
    g->has_mig = true;
    if (!json_object_get(mig, "enabled"))
        return fail(p, w, "\"enabled\" is required");
    struct fake_num max = {0};
    r = get_bool(p, w, mig, "enabled", &g->mig_enabled);
    g->mig_pending = g->mig_enabled;
    if (r >= 0)
        r = get_bool(p, w, mig, "pending", &g->mig_pending);
    if (r >= 0)
        r = get_num(p, w, mig, "max_devices", FAKE_MAX_MIG - 1, &max);
    if (r < 0)
        return r;
    g->mig_max_devices = max.set ? (unsigned)max.v : 7;
    json_t *arr = json_object_get(mig, "instances");
    if (!arr)
        return 0;
    if (!json_is_array(arr) || json_array_size(arr) > g->mig_max_devices)
        return fail(p, w, "\"instances\" must be an array of at most max_devices (%u)",
                    g->mig_max_devices);
    json_array_foreach(arr, i, v)
    {
        char wi[160];
        snprintf(wi, sizeof(wi), "%s.instances[%zu]", w, i);
        r = parse_instance(p, wi, v, g, &g->instances[i]);
        if (r < 0)
            return r;
        g->n_instances++;
    }
    return 0;
}

static int parse_identity(struct parse *p, const char *w, json_t *v, struct fake_gpu *g)
{
    bool set;
    struct fake_num n = {0};
    int r = get_string(p, w, v, "name", g->name, sizeof(g->name), &set);
    if (r >= 0 && !set)
        r = fail(p, w, "\"name\" is required");
    if (r >= 0)
        r = get_string(p, w, v, "uuid", g->uuid, sizeof(g->uuid), &set);
    if (r >= 0 && !set)
        r = fail(p, w, "\"uuid\" is required");
    if (r >= 0)
        r = get_string(p, w, v, "pci_bus_id", g->pci_bus_id, sizeof(g->pci_bus_id), &set);
    if (r >= 0 && !set)
        r = fail(p, w, "\"pci_bus_id\" is required");
    if (r < 0)
        return r;
    char tail;
    if (sscanf(g->pci_bus_id, "%8x:%2x:%2x.%1x%c", &g->pci_domain, &g->pci_bus, &g->pci_device,
               &(unsigned){0}, &tail) != 4)
        return fail(p, w, "\"pci_bus_id\" must look like \"00000000:17:00.0\"");
    if (get_num(p, w, v, "pci_device_id", 0xffffffffu, &n) < 0)
        return -EINVAL;
    g->pci_device_id = n.set ? (unsigned)n.v : 0;
    if (get_num(p, w, v, "pci_subsystem_id", 0xffffffffu, &n) < 0)
        return -EINVAL;
    g->pci_subsystem_id = n.set ? (unsigned)n.v : 0;
    if (get_num(p, w, v, "minor", 255, &g->minor) < 0)
        return -EINVAL;

    json_t *cc = json_object_get(v, "cuda_capability");
    if (cc) {
        if (!json_is_array(cc) || json_array_size(cc) != 2 ||
            !json_is_integer(json_array_get(cc, 0)) || !json_is_integer(json_array_get(cc, 1)))
            return fail(p, w, "\"cuda_capability\" must be [major, minor]");
        g->has_cc = true;
        g->cc_major = (int)json_integer_value(json_array_get(cc, 0));
        g->cc_minor = (int)json_integer_value(json_array_get(cc, 1));
    }
    return 0;
}

/* A sub-object of optional numbers: {"gpu": 97, "memory": 41}. keys[i] goes to out[i]. */
static int parse_group(struct parse *p, const char *where, json_t *obj, const char *key,
                       const char *const *keys, unsigned long long max, struct fake_num **out,
                       bool all_required)
{
    char w[128];
    json_t *v = json_object_get(obj, key);
    if (!v)
        return 0;
    snprintf(w, sizeof(w), "%s: %s", where, key);
    if (expect_object(p, w, v) < 0 || check_keys(p, w, v, keys) < 0)
        return -EINVAL;
    for (size_t i = 0; keys[i]; i++) {
        if (get_num(p, w, v, keys[i], max, out[i]) < 0)
            return -EINVAL;
        if (all_required && !out[i]->set)
            return fail(p, w, "\"%s\" is required", keys[i]);
    }
    return 0;
}

static int parse_reasons(struct parse *p, const char *w, json_t *v, struct fake_gpu *g)
{
    json_t *r = json_object_get(v, "clock_event_reasons");
    json_t *e;
    size_t i;
    if (!r || json_is_integer(r))
        return get_num(p, w, v, "clock_event_reasons", ~0ULL >> 1, &g->clock_event_reasons);
    if (!json_is_array(r))
        return fail(p, w, "\"clock_event_reasons\" must be a bit mask or an array of names");
    g->clock_event_reasons.set = true;
    g->clock_event_reasons.v = 0;
    json_array_foreach(r, i, e)
    {
        bool found = false;
        for (size_t k = 0; k < ELEMENTSOF(reason_names) && !found; k++)
            if (json_is_string(e) && strcmp(json_string_value(e), reason_names[k].name) == 0) {
                g->clock_event_reasons.v |= reason_names[k].bit;
                found = true;
            }
        if (!found)
            return fail(p, w, "clock_event_reasons[%zu]: unknown reason (\"HwSlowdown\", ...)", i);
    }
    return 0;
}

static int parse_telemetry(struct parse *p, const char *w, json_t *v, struct fake_gpu *g)
{
    static const char *const util_keys[] = {"gpu", "memory", NULL};
    static const char *const mem_keys[] = {"total", "used", "reserved", NULL};
    static const char *const clock_keys[] = {"graphics", "sm", "mem", "video", NULL};
    static const char *const ecc_keys[] = {"sbe_volatile",  "dbe_volatile", "sbe_aggregate",
                                           "dbe_aggregate", "enabled",      NULL};
    const unsigned long long u32 = 0xffffffffu, u64 = ~0ULL >> 1;
    struct {
        const char *key;
        unsigned long long max;
        struct fake_num *n;
    } plain[] = {
        {"temperature", 200, &g->temperature},
        {"memory_temperature", 200, &g->memory_temperature},
        {"power_usage_mw", u32, &g->power_usage_mw},
        {"power_limit_mw", u32, &g->power_limit_mw},
        {"energy_mj", u64, &g->energy_mj},
        {"fan_speed", 100, &g->fan_speed},
        {"pcie_replay", u32, &g->pcie_replay},
        {"pcie_tx_kbps", u32, &g->pcie_tx_kbps},
        {"pcie_rx_kbps", u32, &g->pcie_rx_kbps},
        {"encoder_util", 100, &g->encoder_util},
        {"decoder_util", 100, &g->decoder_util},
    };
    for (size_t i = 0; i < ELEMENTSOF(plain); i++)
        if (get_num(p, w, v, plain[i].key, plain[i].max, plain[i].n) < 0)
            return -EINVAL;
    struct fake_num *util[] = {&g->util_gpu, &g->util_mem};
    struct fake_num *mem[] = {&g->mem_total, &g->mem_used, &g->mem_reserved};
    struct fake_num *clk[] = {&g->clocks[0], &g->clocks[1], &g->clocks[2], &g->clocks[3]};
    struct fake_num *ecc[] = {&g->ecc_sbe_vol, &g->ecc_dbe_vol, &g->ecc_sbe_agg, &g->ecc_dbe_agg};
    if (parse_group(p, w, v, "utilization", util_keys, 100, util, true) < 0 ||
        parse_group(p, w, v, "memory", mem_keys, 1ULL << 50, mem, false) < 0 ||
        parse_group(p, w, v, "clocks", clock_keys, 100000, clk, false) < 0 ||
        parse_reasons(p, w, v, g) < 0)
        return -EINVAL;
    if (json_object_get(v, "memory") && (!g->mem_total.set || !g->mem_used.set))
        return fail(p, w, "memory needs \"total\" and \"used\" (bytes)");
    if (g->mem_total.set && g->mem_used.v + g->mem_reserved.v > g->mem_total.v)
        return fail(p, w, "memory.used + memory.reserved is larger than memory.total");

    json_t *e = json_object_get(v, "ecc");
    char we[128];
    snprintf(we, sizeof(we), "%s: ecc", w);
    if (!e)
        return 0;
    g->has_ecc = true;
    g->ecc_enabled = true;
    if (expect_object(p, we, e) < 0 || check_keys(p, we, e, ecc_keys) < 0 ||
        get_bool(p, we, e, "enabled", &g->ecc_enabled) < 0)
        return -EINVAL;
    for (size_t i = 0; i < ELEMENTSOF(ecc); i++)
        if (get_num(p, we, e, ecc_keys[i], u64, ecc[i]) < 0)
            return -EINVAL;
    return 0;
}

static int parse_remapped(struct parse *p, const char *w, json_t *v, struct fake_gpu *g)
{
    static const char *const keys[] = {"correctable", "uncorrectable", "pending", "failure", NULL};
    json_t *rr = json_object_get(v, "remapped_rows");
    char wr[128];
    struct fake_num corr = {0}, unc = {0};
    bool pending = false, failure = false;
    if (!rr)
        return 0;
    snprintf(wr, sizeof(wr), "%s: remapped_rows", w);
    if (expect_object(p, wr, rr) < 0 || check_keys(p, wr, rr, keys) < 0 ||
        get_num(p, wr, rr, "correctable", 0xffffffffu, &corr) < 0 ||
        get_num(p, wr, rr, "uncorrectable", 0xffffffffu, &unc) < 0 ||
        get_bool(p, wr, rr, "pending", &pending) < 0 ||
        get_bool(p, wr, rr, "failure", &failure) < 0)
        return -EINVAL;
    g->has_remapped = true;
    g->remap_corr = corr.set ? (unsigned)corr.v : 0;
    g->remap_unc = unc.set ? (unsigned)unc.v : 0;
    g->remap_pending = pending;
    g->remap_failure = failure;
    return 0;
}

static int parse_gpu(struct parse *p, size_t index, json_t *v, struct fake_gpu *g)
{
    static const char *const keys[] = {"name",
                                       "uuid",
                                       "pci_bus_id",
                                       "pci_device_id",
                                       "pci_subsystem_id",
                                       "minor",
                                       "cuda_capability",
                                       "utilization",
                                       "memory",
                                       "temperature",
                                       "memory_temperature",
                                       "power_usage_mw",
                                       "power_limit_mw",
                                       "energy_mj",
                                       "clocks",
                                       "fan_speed",
                                       "pcie_replay",
                                       "pcie_tx_kbps",
                                       "pcie_rx_kbps",
                                       "encoder_util",
                                       "decoder_util",
                                       "clock_event_reasons",
                                       "ecc",
                                       "remapped_rows",
                                       "xid_events",
                                       "events",
                                       "lost_at",
                                       "mig",
                                       "mig_profiles",
                                       "processes",
                                       "unsupported",
                                       "errors",
                                       "delay_us",
                                       "max_calls",
                                       "gpm",
                                       "nvlink",
                                       "virtualization_mode",
                                       NULL};
    char w[32];
    snprintf(w, sizeof(w), "gpus[%zu]", index);
    g->lost_at = -1;
    g->xid_events = true;
    if (expect_object(p, w, v) < 0 || check_keys(p, w, v, keys) < 0 ||
        parse_identity(p, w, v, g) < 0 || parse_telemetry(p, w, v, g) < 0 ||
        parse_remapped(p, w, v, g) < 0 || get_bool(p, w, v, "xid_events", &g->xid_events) < 0 ||
        get_seconds(p, w, v, "lost_at", &g->lost_at) < 0 ||
        parse_profiles(p, w, json_object_get(v, "mig_profiles"), g) < 0 ||
        parse_mig(p, w, json_object_get(v, "mig"), g) < 0 ||
        parse_processes(p, w, json_object_get(v, "processes"), g) < 0 ||
        parse_events(p, w, json_object_get(v, "events"), g) < 0 || parse_gpm(p, w, v, g) < 0 ||
        parse_nvlink(p, w, v, g) < 0 || parse_virt_mode(p, w, v, g) < 0 ||
        parse_calls(p, w, v, g->forced, g->delay_us, g->max_calls) < 0)
        return -EINVAL;
    return 0;
}

static int parse_cuda_version(struct parse *p, json_t *root, struct fake_fixture *fx)
{
    json_t *v = json_object_get(root, "cuda_version");
    unsigned major, minor;
    char tail;
    if (!v)
        return 0;
    fx->has_cuda_version = true;
    if (json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) < 1000000) {
        fx->cuda_version = (int)json_integer_value(v);
        return 0;
    }
    if (json_is_string(v) && sscanf(json_string_value(v), "%u.%u%c", &major, &minor, &tail) == 2 &&
        major < 1000 && minor < 100) {
        fx->cuda_version = (int)(major * 1000 + minor * 10);
        return 0;
    }
    return fail(p, "", "\"cuda_version\" must be \"13.0\" or 13000");
}

static int parse_root(struct parse *p, json_t *root, struct fake_fixture *fx)
{
    static const char *const keys[] = {"driver_version", "cuda_version", "init_error", "gpus",
                                       "errors",         "unsupported",  NULL};
    json_t *v;
    size_t i;
    if (expect_object(p, "", root) < 0 || check_keys(p, "", root, keys) < 0 ||
        get_string(p, "", root, "driver_version", fx->driver_version, sizeof(fx->driver_version),
                   &fx->has_driver_version) < 0 ||
        parse_cuda_version(p, root, fx) < 0 || parse_calls(p, "", root, fx->forced, NULL, NULL) < 0)
        return -EINVAL;
    v = json_object_get(root, "init_error");
    if (v && parse_error_name(p, "init_error", v, &fx->init_error) < 0)
        return -EINVAL;
    json_t *gpus = json_object_get(root, "gpus");
    if (gpus && (!json_is_array(gpus) || json_array_size(gpus) > FAKE_MAX_GPUS))
        return fail(p, "", "\"gpus\" must be an array of at most %d GPUs", FAKE_MAX_GPUS);
    fx->gpus = calloc(json_array_size(gpus) + 1, sizeof(*fx->gpus));
    if (!fx->gpus)
        return fail(p, "", "out of memory");
    json_array_foreach(gpus, i, v)
    {
        fx->n_gpus++;
        if (parse_gpu(p, i, v, &fx->gpus[i]) < 0)
            return -EINVAL;
    }
    return 0;
}

void fake_fixture_free(struct fake_fixture *fx)
{
    if (!fx)
        return;
    for (unsigned i = 0; i < fx->n_gpus; i++) {
        free(fx->gpus[i].procs);
        free(fx->gpus[i].events);
    }
    free(fx->gpus);
    free(fx);
}

int fake_fixture_load(const char *path, struct fake_fixture **ret, char *err, size_t errlen)
{
    struct parse p = {.err = err, .errlen = errlen};
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (!root) {
        snprintf(err, errlen, "%s: line %d: %s", path, jerr.line, jerr.text);
        return -EINVAL;
    }
    struct fake_fixture *fx = calloc(1, sizeof(*fx));
    int r = fx ? parse_root(&p, root, fx) : -ENOMEM;
    json_decref(root);
    if (r < 0) {
        char msg[256];
        snprintf(msg, sizeof(msg), "%s", fx ? err : "out of memory");
        snprintf(err, errlen, "%s: %s", path, msg);
        fake_fixture_free(fx);
        return r;
    }
    *ret = fx;
    return 0;
}
