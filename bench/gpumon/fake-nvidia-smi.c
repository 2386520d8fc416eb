/* fake-nvidia-smi: a stand-in for `nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]`
 * for the gpumon benchmark on machines without a GPU.
 *
 * The benchmark compares gpumon with the simplest exporter people write: one that runs
 * nvidia-smi on every scrape. Without a GPU there is no nvidia-smi, so this program plays its
 * part: it dlopen()s libnvidia-ml.so.1 (the fake library of the tests, chosen through
 * LD_LIBRARY_PATH), initialises it, reads the requested fields of every GPU and prints them as
 * nvidia-smi's CSV does. It links against nothing but libc, so its cost is one exec plus the NVML
 * calls -- far less than the real nvidia-smi's ~30 ms, which the benchmark says in its output.
 *
 * Exit status as nvidia-smi's: 0 success, 2 bad arguments, 9 the driver cannot be reached. */
#include <dlfcn.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* which: 0 total, 1 used, 2 free; nvidia-smi prints whole MiB, rounded down. */
static bool read_memory(nvmlDevice_t dev, int which, char *buf, size_t len)
{
    nvmlMemory_t m;
    if (!api.nvmlDeviceGetMemoryInfo || api.nvmlDeviceGetMemoryInfo(dev, &m) != NVML_SUCCESS)
        return false;
    unsigned long long bytes = which == 0 ? m.total : which == 1 ? m.used : m.free;
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

/* The version-1 memory query has no reserved figure (nvidia-smi reads it from version 2). */
static bool read_mem_reserved(nvmlDevice_t dev, unsigned index, char *buf, size_t len)
{
    return false;
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

int main(int argc, char **argv)
{
    struct options o;
    if (!parse_args(argc, argv, &o)) {
        fprintf(stderr,
                "usage: %s --query-gpu=FIELD[,FIELD...] --format=csv[,noheader]"
                "[,nounits]\n",
                argv[0]);
        return EXIT_BAD_ARGS;
    }
    void *lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib || !load_api(lib) || api.nvmlInit_v2() != NVML_SUCCESS) {
        fprintf(stderr,
                "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                "driver.%s%s\n",
                lib ? "" : " ", lib ? "" : dlerror());
        return EXIT_NO_DRIVER;
    }
    unsigned count = 0;
    if (api.nvmlDeviceGetCount_v2(&count) != NVML_SUCCESS) {
        fprintf(stderr, "Unable to determine the device count.\n");
        api.nvmlShutdown();
        return EXIT_NO_DRIVER;
    }
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
    /* The library stays loaded until exit: some NVML builds register atexit handlers. */
    return fflush(stdout) == 0 ? 0 : EXIT_FAILURE;
}
