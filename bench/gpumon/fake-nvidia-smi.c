/* fake-nvidia-smi: a stand-in for `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`
 * for the gpumon benchmark on machines without a GPU, and for `nvidia-smi dmon` with GPM metrics
 * for the dry run of the GPU-machine check (gpumon/tests/gpu/check-gpu.sh).
 *
 * The benchmark compares gpumon with the simplest exporter people write: one that runs
 * nvidia-smi on every scrape. Without a GPU there is no nvidia-smi, so this program plays its
 * part: it dlopen()s libnvidia-ml.so.1 (the fake library of the tests, chosen through
 * LD_LIBRARY_PATH), initialises it, reads the requested fields of every GPU and prints them as
 * nvidia-smi's CSV does. It links against nothing but libc, so its cost is one exec plus the NVML
 * calls -- far less than the real nvidia-smi's ~30 ms, which the benchmark says in its output.
 *
 * `dmon [-c COUNT] [-d SECONDS] [--gpm-metrics ID,...] [--gpm-options d]` prints, every SECONDS,
 * one line per GPU: a few of dmon's default columns and then the requested GPM metrics, computed
 * through the library's nvmlGpmSampleGet/nvmlGpmMetricsGet between this sample and the one
 * before, after a '#' line of column names and a '# Idx' line of units. The column names of the
 * GPM metrics are this program's own: NVIDIA's are not documented, and the check must find its
 * columns without them (it compares the header with and without --gpm-metrics).
 *
 * Exit status as nvidia-smi's: 0 success, 2 bad arguments, 9 the driver cannot be reached. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/nvml-api.h"

#define EXIT_BAD_ARGS  2
#define EXIT_NO_DRIVER 9
#define MAX_FIELDS     32
#define VALUE_MAX      128

static struct nvml_api api;

/* Every entry point of the contract list, looked up by name into `api`; missing ones stay NULL
 * and the fields that need them print "[N/A]", as nvidia-smi does on an old driver. */
static const struct {
    const char *name;
    size_t offset;
} symbols[] = {
#define SYMBOL_ENTRY(name, ret, params) {#name, offsetof(struct nvml_api, name)},
    NVML_API_FUNCTIONS(SYMBOL_ENTRY)
#undef SYMBOL_ENTRY
};

/* One --query-gpu field: its name, the unit nvidia-smi puts in the header and after the value
 * ("" for none), and how to read it. */
struct field {
    const char *name;
    const char *unit;
    bool (*read)(nvmlDevice_t dev, unsigned index, char *buf, size_t len);
};

static bool read_index(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    unsigned i = index;
    if (api.nvmlDeviceGetIndex && api.nvmlDeviceGetIndex(dev, &i) != NVML_SUCCESS)
        i = index;
    snprintf(buf, len, "%u", i);
    return true;
}

static bool read_uuid(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    return api.nvmlDeviceGetUUID && api.nvmlDeviceGetUUID(dev, buf, len) == NVML_SUCCESS;
}

static bool read_name(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    return api.nvmlDeviceGetName && api.nvmlDeviceGetName(dev, buf, len) == NVML_SUCCESS;
}

static bool read_bus_id(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    nvmlPciInfo_t pci;
    if (!api.nvmlDeviceGetPciInfo_v3 || api.nvmlDeviceGetPciInfo_v3(dev, &pci) != NVML_SUCCESS)
        return false;
    snprintf(buf, len, "%.*s", (int)sizeof(pci.busId), pci.busId);
    return true;
}

static bool read_utilization(nvmlDevice_t dev, bool memory, char *buf, size_t len)
{
    nvmlUtilization_t u;
    if (!api.nvmlDeviceGetUtilizationRates ||
        api.nvmlDeviceGetUtilizationRates(dev, &u) != NVML_SUCCESS)
        return false;
    snprintf(buf, len, "%u", memory ? u.memory : u.gpu);
    return true;
}

static bool read_util_gpu(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    return read_utilization(dev, false, buf, len);
}

static bool read_util_mem(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    return read_utilization(dev, true, buf, len);
}

/* which: 0 total, 1 used, 2 free, 3 reserved; nvidia-smi prints whole MiB, rounded down. Like
 * nvidia-smi since the driver has it, the version-2 query first: its "used" leaves out what the
 * driver reserves, which it reports apart. The version-1 query (older drivers) counts that as
 * used and has no reserved figure. */
static bool read_memory(nvmlDevice_t dev, int which, char *buf, size_t len)
{
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    nvmlMemory_t m;
    unsigned long long bytes;
    if (api.nvmlDeviceGetMemoryInfo_v2 && api.nvmlDeviceGetMemoryInfo_v2(dev, &m2) == NVML_SUCCESS)
        bytes = which == 0 ? m2.total : which == 1 ? m2.used : which == 2 ? m2.free : m2.reserved;
    else if (which < 3 && api.nvmlDeviceGetMemoryInfo &&
             api.nvmlDeviceGetMemoryInfo(dev, &m) == NVML_SUCCESS)
        bytes = which == 0 ? m.total : which == 1 ? m.used : m.free;
    else
        return false;
    snprintf(buf, len, "%llu", bytes >> 20);
    return true;
}

static bool read_mem_total(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    return read_memory(dev, 0, buf, len);
}

static bool read_mem_used(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    return read_memory(dev, 1, buf, len);
}

static bool read_mem_free(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    return read_memory(dev, 2, buf, len);
}

static bool read_temperature(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    unsigned t;
    if (!api.nvmlDeviceGetTemperature ||
        api.nvmlDeviceGetTemperature(dev, NVML_TEMPERATURE_GPU, &t) != NVML_SUCCESS)
        return false;
    snprintf(buf, len, "%u", t);
    return true;
}

static bool read_power(nvmlDevice_t dev, bool limit, char *buf, size_t len)
{
    unsigned mw;
    nvmlReturn_t r;
    if (limit)
        r = api.nvmlDeviceGetEnforcedPowerLimit ? api.nvmlDeviceGetEnforcedPowerLimit(dev, &mw)
                                                : NVML_ERROR_FUNCTION_NOT_FOUND;
    else
        r = api.nvmlDeviceGetPowerUsage ? api.nvmlDeviceGetPowerUsage(dev, &mw)
                                        : NVML_ERROR_FUNCTION_NOT_FOUND;
    if (r != NVML_SUCCESS)
        return false;
    snprintf(buf, len, "%.2f", mw / 1000.0);
    return true;
}

static bool read_power_draw(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    return read_power(dev, false, buf, len);
}

static bool read_power_limit(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    return read_power(dev, true, buf, len);
}

static bool read_clock(nvmlDevice_t dev, nvmlClockType_t type, char *buf, size_t len)
{
    unsigned mhz;
    if (!api.nvmlDeviceGetClockInfo || api.nvmlDeviceGetClockInfo(dev, type, &mhz) != NVML_SUCCESS)
        return false;
    snprintf(buf, len, "%u", mhz);
    return true;
}

static bool read_clock_sm(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    return read_clock(dev, NVML_CLOCK_SM, buf, len);
}

static bool read_clock_mem(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    return read_clock(dev, NVML_CLOCK_MEM, buf, len);
}

static bool read_fan(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    unsigned pct;
    if (!api.nvmlDeviceGetFanSpeed || api.nvmlDeviceGetFanSpeed(dev, &pct) != NVML_SUCCESS)
        return false;
    snprintf(buf, len, "%u", pct);
    return true;
}

static bool read_driver_version(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    return api.nvmlSystemGetDriverVersion &&
           api.nvmlSystemGetDriverVersion(buf, (unsigned)len) == NVML_SUCCESS;
}

static bool read_mig_mode(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    unsigned current, pending;
    if (!api.nvmlDeviceGetMigMode ||
        api.nvmlDeviceGetMigMode(dev, &current, &pending) != NVML_SUCCESS)
        return false;
    snprintf(buf, len, "%s", current == NVML_DEVICE_MIG_ENABLE ? "Enabled" : "Disabled");
    return true;
}

static bool read_mem_reserved(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    return read_memory(dev, 3, buf, len);
}

static const struct field fields[] = {
    {"index", "", read_index},
    {"uuid", "", read_uuid},
    {"name", "", read_name},
    {"pci.bus_id", "", read_bus_id},
    {"utilization.gpu", "%", read_util_gpu},
    {"utilization.memory", "%", read_util_mem},
    {"memory.total", "MiB", read_mem_total},
    {"memory.used", "MiB", read_mem_used},
    {"memory.free", "MiB", read_mem_free},
    {"temperature.gpu", "", read_temperature},
    {"power.draw", "W", read_power_draw},
    {"power.limit", "W", read_power_limit},
    {"clocks.sm", "MHz", read_clock_sm},
    {"clocks.mem", "MHz", read_clock_mem},
    {"fan.speed", "%", read_fan},
    {"driver_version", "", read_driver_version},
    {"mig.mode.current", "", read_mig_mode},
    {"memory.reserved", "MiB", read_mem_reserved},
};

static const struct field *field_find(const char *name, size_t len)
{
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++)
        if (strlen(fields[i].name) == len && strncmp(fields[i].name, name, len) == 0)
            return &fields[i];
    return NULL;
}

struct options {
    const struct field *query[MAX_FIELDS];
    size_t n_query;
    bool header;
    bool units;
};

/* Splits "a,b,c" into fields; returns false (with a message on stderr) for an unknown one. */
static bool parse_query(const char *list, struct options *o)
{
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        const struct field *f = field_find(p, len);
        if (!f) {
            fprintf(stderr, "Field \"%.*s\" is not a valid field to query.\n", (int)len, p);
            return false;
        }
        if (o->n_query == MAX_FIELDS) {
            fprintf(stderr, "Too many fields to query.\n");
            return false;
        }
        o->query[o->n_query++] = f;
        p += len;
        if (*p == ',')
            p++;
    }
    return o->n_query > 0;
}

static bool parse_format(const char *list, struct options *o)
{
    bool csv = false;
    for (const char *p = list; *p;) {
        size_t len = strcspn(p, ",");
        if (len == 3 && strncmp(p, "csv", 3) == 0)
            csv = true;
        else if (len == 8 && strncmp(p, "noheader", 8) == 0)
            o->header = false;
        else if (len == 7 && strncmp(p, "nounits", 7) == 0)
            o->units = false;
        else {
            fprintf(stderr, "\"%.*s\" is not a valid format option.\n", (int)len, p);
            return false;
        }
        p += len;
        if (*p == ',')
            p++;
    }
    return csv;
}

static bool parse_args(int argc, char **argv, struct options *o)
{
    bool have_format = false;
    *o = (struct options){.header = true, .units = true};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--query-gpu=", 12) == 0) {
            if (!parse_query(a + 12, o))
                return false;
        } else if (strncmp(a, "--format=", 9) == 0) {
            if (!parse_format(a + 9, o))
                return false;
            have_format = true;
        } else {
            fprintf(stderr, "Unknown argument '%s'.\n", a);
            return false;
        }
    }
    return o->n_query > 0 && have_format;
}

static void print_header(const struct options *o)
{
    for (size_t i = 0; i < o->n_query; i++) {
        const struct field *f = o->query[i];
        printf("%s%s", i ? ", " : "", f->name);
        if (o->units && f->unit[0])
            printf(" [%s]", f->unit);
    }
    putchar('\n');
}

static void print_gpu(const struct options *o, nvmlDevice_t dev, unsigned index)
{
    for (size_t i = 0; i < o->n_query; i++) {
        const struct field *f = o->query[i];
        char value[VALUE_MAX] = "";
        fputs(i ? ", " : "", stdout);
        if (!f->read(dev, index, value, sizeof(value)))
            fputs("[N/A]", stdout);
        else if (o->units && f->unit[0])
            printf("%s %s", value, f->unit);
        else
            fputs(value, stdout);
    }
    putchar('\n');
}

static bool load_api(void *lib)
{
    for (size_t i = 0; i < sizeof(symbols) / sizeof(symbols[0]); i++)
        *(void **)((char *)&api + symbols[i].offset) = dlsym(lib, symbols[i].name);
    return api.nvmlInit_v2 && api.nvmlShutdown && api.nvmlDeviceGetCount_v2 &&
           api.nvmlDeviceGetHandleByIndex_v2;
}

/* Loads and initialises the library and counts its GPUs; false, with nvidia-smi's message on
 * stderr, when the "driver" cannot be reached. */
static bool open_nvml(unsigned *ret_count)
{
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib || !load_api(lib) || api.nvmlInit_v2() != NVML_SUCCESS) {
        fprintf(stderr,
                "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                "driver.%s%s\n",
                lib ? "" : " ", lib ? "" : dlerror());
        return false;
    }
    if (api.nvmlDeviceGetCount_v2(ret_count) != NVML_SUCCESS) {
        fprintf(stderr, "Unable to determine the device count.\n");
        api.nvmlShutdown();
        return false;
    }
    /* The library stays loaded until exit: some NVML builds register atexit handlers. */
    return true;
}

/* ---- dmon ---- */

#define DMON_MAX_GPUS    64
#define DMON_MAX_METRICS 32

/* The GPM metrics dmon can show here, with this program's own column names (see the top). */
static const struct gpm_column {
    unsigned id;
    const char *name;
    const char *unit;
} gpm_columns[] = {
    {NVML_GPM_METRIC_GRAPHICS_UTIL, "gract", "%"},
    {NVML_GPM_METRIC_SM_UTIL, "smact", "%"},
    {NVML_GPM_METRIC_SM_OCCUPANCY, "smocc", "%"},
    {NVML_GPM_METRIC_INTEGER_UTIL, "intac", "%"},
    {NVML_GPM_METRIC_ANY_TENSOR_UTIL, "tenso", "%"},
    {NVML_GPM_METRIC_DFMA_TENSOR_UTIL, "dfmat", "%"},
    {NVML_GPM_METRIC_HMMA_TENSOR_UTIL, "hmmat", "%"},
    {NVML_GPM_METRIC_IMMA_TENSOR_UTIL, "immat", "%"},
    {NVML_GPM_METRIC_DRAM_BW_UTIL, "drama", "%"},
    {NVML_GPM_METRIC_FP64_UTIL, "fp64a", "%"},
    {NVML_GPM_METRIC_FP32_UTIL, "fp32a", "%"},
    {NVML_GPM_METRIC_FP16_UTIL, "fp16a", "%"},
    {NVML_GPM_METRIC_PCIE_TX_PER_SEC, "pcitx", "MiB/s"},
    {NVML_GPM_METRIC_PCIE_RX_PER_SEC, "pcirx", "MiB/s"},
    {NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC, "nvlrx", "MiB/s"},
    {NVML_GPM_METRIC_NVLINK_TOTAL_TX_PER_SEC, "nvltx", "MiB/s"},
};

struct dmon_options {
    long count; /* samples to print; 0: until killed, as dmon without -c */
    unsigned delay_s;
    const struct gpm_column *gpm[DMON_MAX_METRICS];
    size_t n_gpm;
};

/* One GPU's GPM state: two sample buffers used in turn. */
struct dmon_gpu {
    nvmlDevice_t dev;
    bool gpm; /* supported, and both buffers allocated */
    nvmlGpmSample_t sample[2];
    int last; /* the buffer of the last sample, -1 before the first */
};

static const struct gpm_column *gpm_column_find(unsigned long id)
{
    for (size_t i = 0; i < sizeof(gpm_columns) / sizeof(gpm_columns[0]); i++)
        if (gpm_columns[i].id == id)
            return &gpm_columns[i];
    return NULL;
}

static bool parse_gpm_metrics(const char *list, struct dmon_options *o)
{
    for (const char *p = list; *p;) {
        char *end;
        unsigned long id = strtoul(p, &end, 10);
        const struct gpm_column *c = end != p ? gpm_column_find(id) : NULL;
        if (!c || (*end && *end != ',')) {
            fprintf(stderr, "Invalid GPM metric '%.*s'.\n", (int)strcspn(p, ","), p);
            return false;
        }
        if (o->n_gpm == DMON_MAX_METRICS) {
            fprintf(stderr, "Too many GPM metrics.\n");
            return false;
        }
        o->gpm[o->n_gpm++] = c;
        p = *end ? end + 1 : end;
    }
    return o->n_gpm > 0;
}

static bool parse_count(const char *s, long max, long *ret)
{
    char *end;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || *end || end == s || v < 1 || v > max)
        return false;
    *ret = v;
    return true;
}

/* argv[0] is "dmon". Options take their value as the next word, or after '=' for the long ones,
 * as nvidia-smi accepts them. */
static bool parse_dmon_args(int argc, char **argv, struct dmon_options *o)
{
    long delay = 1;
    *o = (struct dmon_options){0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        size_t name_len = eq && a[1] == '-' ? (size_t)(eq - a) : strlen(a);
        const char *value = eq && a[1] == '-' ? eq + 1 : i + 1 < argc ? argv[++i] : NULL;
        bool ok;
        if (name_len == 2 && strncmp(a, "-c", 2) == 0)
            ok = parse_count(value, 1000000, &o->count);
        else if (name_len == 2 && strncmp(a, "-d", 2) == 0)
            ok = parse_count(value, 10, &delay);
        else if (name_len == 13 && strncmp(a, "--gpm-metrics", 13) == 0)
            ok = value && parse_gpm_metrics(value, o);
        else if (name_len == 13 && strncmp(a, "--gpm-options", 13) == 0)
            ok = value && strcmp(value, "d") == 0; /* device level: the only one here */
        else
            ok = false;
        if (!ok) {
            fprintf(stderr, "Invalid combination of input arguments near '%s'.\n", a);
            return false;
        }
    }
    o->delay_s = (unsigned)delay;
    return true;
}

/* dmon's default columns that this stand-in shows: power, temperatures and utilisations are the
 * ones gpumon's check does not use here, so a few suffice to make the GPM columns come last. */
static const struct {
    const char *name;
    const char *unit;
} dmon_defaults[] = {
    {"pwr", "W"}, {"gtemp", "C"}, {"sm", "%"}, {"mem", "%"}, {"mclk", "MHz"}, {"pclk", "MHz"},
};
#define N_DMON_DEFAULTS (sizeof(dmon_defaults) / sizeof(dmon_defaults[0]))

static void dmon_print_header(const struct dmon_options *o)
{
    printf("# gpu");
    for (size_t i = 0; i < N_DMON_DEFAULTS; i++)
        printf(" %6s", dmon_defaults[i].name);
    for (size_t i = 0; i < o->n_gpm; i++)
        printf(" %6s", o->gpm[i]->name);
    printf("\n# Idx");
    for (size_t i = 0; i < N_DMON_DEFAULTS; i++)
        printf(" %6s", dmon_defaults[i].unit);
    for (size_t i = 0; i < o->n_gpm; i++)
        printf(" %6s", o->gpm[i]->unit);
    printf("\n");
}

/* The default columns of one GPU, "-" for what the library does not answer. */
static void dmon_print_defaults(nvmlDevice_t dev)
{
    char v[N_DMON_DEFAULTS][VALUE_MAX];
    unsigned mw = 0;
    nvmlUtilization_t u;
    bool have_util = api.nvmlDeviceGetUtilizationRates &&
                     api.nvmlDeviceGetUtilizationRates(dev, &u) == NVML_SUCCESS;
    if (api.nvmlDeviceGetPowerUsage && api.nvmlDeviceGetPowerUsage(dev, &mw) == NVML_SUCCESS)
        snprintf(v[0], VALUE_MAX, "%u", mw / 1000);
    else
        strcpy(v[0], "-");
    if (!read_temperature(dev, 0, v[1], VALUE_MAX))
        strcpy(v[1], "-");
    if (have_util) {
        snprintf(v[2], VALUE_MAX, "%u", u.gpu);
        snprintf(v[3], VALUE_MAX, "%u", u.memory);
    } else {
        strcpy(v[2], "-");
        strcpy(v[3], "-");
    }
    if (!read_clock_mem(dev, 0, v[4], VALUE_MAX))
        strcpy(v[4], "-");
    if (!read_clock_sm(dev, 0, v[5], VALUE_MAX))
        strcpy(v[5], "-");
    for (size_t i = 0; i < N_DMON_DEFAULTS; i++)
        printf(" %6s", v[i]);
}

static void dmon_gpu_open(struct dmon_gpu *g, nvmlDevice_t dev)
{
    nvmlGpmSupport_t support = {.version = NVML_GPM_SUPPORT_VERSION};
    *g = (struct dmon_gpu){.dev = dev, .last = -1};
    if (!api.nvmlGpmQueryDeviceSupport || !api.nvmlGpmSampleAlloc || !api.nvmlGpmSampleGet ||
        !api.nvmlGpmMetricsGet || api.nvmlGpmQueryDeviceSupport(dev, &support) != NVML_SUCCESS ||
        !support.isSupportedDevice)
        return;
    g->gpm = api.nvmlGpmSampleAlloc(&g->sample[0]) == NVML_SUCCESS &&
             api.nvmlGpmSampleAlloc(&g->sample[1]) == NVML_SUCCESS;
}

/* Takes a sample; with one before it, fills q's values for the interval between the two. False
 * when there is nothing to show (no GPM, the first sample, a failed call). */
static bool dmon_gpu_sample(struct dmon_gpu *g, const struct dmon_options *o,
                            nvmlGpmMetricsGet_t *q)
{
    int next = g->last == 0 ? 1 : 0;
    if (!g->gpm || api.nvmlGpmSampleGet(g->dev, g->sample[next]) != NVML_SUCCESS)
        return false;
    int prev = g->last;
    g->last = next;
    if (prev < 0)
        return false;
    q->version = NVML_GPM_METRICS_GET_VERSION;
    q->numMetrics = (unsigned)o->n_gpm;
    q->sample1 = g->sample[prev];
    q->sample2 = g->sample[next];
    for (size_t i = 0; i < o->n_gpm; i++)
        q->metrics[i] = (nvmlGpmMetric_t){.metricId = o->gpm[i]->id};
    return api.nvmlGpmMetricsGet(q) == NVML_SUCCESS;
}

static void dmon_print_gpu(struct dmon_gpu *g, unsigned index, const struct dmon_options *o)
{
    static nvmlGpmMetricsGet_t q; /* some 13 KiB */
    bool have = o->n_gpm > 0 && dmon_gpu_sample(g, o, &q);
    printf("%5u", index);
    dmon_print_defaults(g->dev);
    for (size_t i = 0; i < o->n_gpm; i++) {
        if (have && q.metrics[i].nvmlReturn == NVML_SUCCESS)
            printf(" %6.1f", q.metrics[i].value);
        else
            printf(" %6s", "-");
    }
    printf("\n");
}

static void sleep_s(unsigned s)
{
    struct timespec t = {.tv_sec = s};
    while (nanosleep(&t, &t) != 0)
        ;
}

static int dmon_main(int argc, char **argv)
{
    static struct dmon_gpu gpus[DMON_MAX_GPUS];
    struct dmon_options o;
    unsigned count;
    if (!parse_dmon_args(argc, argv, &o)) {
        fprintf(stderr, "usage: nvidia-smi dmon [-c COUNT] [-d SECONDS] [--gpm-metrics ID,...] "
                        "[--gpm-options d]\n");
        return EXIT_BAD_ARGS;
    }
    if (!open_nvml(&count))
        return EXIT_NO_DRIVER;
    if (count > DMON_MAX_GPUS)
        count = DMON_MAX_GPUS;
    for (unsigned i = 0; i < count; i++) {
        nvmlDevice_t dev = NULL;
        if (api.nvmlDeviceGetHandleByIndex_v2(i, &dev) == NVML_SUCCESS)
            dmon_gpu_open(&gpus[i], dev);
        /* The first sample starts the first interval (it computes nothing, so q is not needed);
         * the first line comes one delay later. */
        if (o.n_gpm)
            dmon_gpu_sample(&gpus[i], &o, NULL);
    }
    dmon_print_header(&o);
    for (long n = 0; o.count == 0 || n < o.count; n++) {
        sleep_s(o.delay_s);
        for (unsigned i = 0; i < count; i++)
            if (gpus[i].dev)
                dmon_print_gpu(&gpus[i], i, &o);
        if (fflush(stdout) != 0)
            return EXIT_FAILURE;
    }
    api.nvmlShutdown();
    return 0;
}

int main(int argc, char **argv)
{
    struct options o;
    unsigned count = 0;
    if (argc >= 2 && strcmp(argv[1], "dmon") == 0)
        return dmon_main(argc - 1, argv + 1);
    if (!parse_args(argc, argv, &o)) {
        fprintf(stderr,
                "usage: %s --query-gpu=FIELD[,FIELD...] --format=csv[,noheader]"
                "[,nounits]\n"
                "       %s dmon [-c COUNT] [-d SECONDS] [--gpm-metrics ID,...]\n",
                argv[0], argv[0]);
        return EXIT_BAD_ARGS;
    }
    if (!open_nvml(&count))
        return EXIT_NO_DRIVER;
    if (o.header)
        print_header(&o);
    for (unsigned i = 0; i < count; i++) {
        nvmlDevice_t dev;
        if (api.nvmlDeviceGetHandleByIndex_v2(i, &dev) != NVML_SUCCESS) {
            printf("Unable to determine the device handle for GPU %u: Unknown Error\n", i);
            continue;
        }
        print_gpu(&o, dev, i);
    }
    api.nvmlShutdown();
    return fflush(stdout) == 0 ? 0 : EXIT_FAILURE;
}
