/* Tests for the fake libnvidia-ml.so.1: loaded with dlopen() from FAKE_NVML_LIBRARY the way
 * lib/nvml.c loads the real one, and checked against the fixtures in FAKE_NVML_FIXTURES and
 * against fixtures written on the fly.
 *
 * Times in fixtures count from the first nvmlInit_v2 of the process, so the tests that depend
 * on it (events at 1 s and 2 s, a GPU lost at 3 s, the old library) run in a fresh copy of this
 * program: argv[1] names the scenario. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/macro.h"
#include "lib/nvml-api.h"

static struct nvml_api api;
static void *lib;
static char tmpdir[] = "/tmp/fake-nvml-test.XXXXXX";
/* CLOCK_MONOTONIC right after this process's first successful init: the fake's clock started a
 * little before it. */
static double t0 = -1;

static double mono(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* Loads the library at the path in env and fills api; optional symbols may be NULL. */
static void load_api(const char *env)
{
    const char *path = getenv(env);
    if (!path) {
        fprintf(stderr, "%s is not set (run through meson test)\n", env);
        exit(1);
    }
    lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        exit(1);
    }
#define LOAD(name, ret, params) api.name = (ret(*) params)dlsym(lib, #name);
    NVML_API_FUNCTIONS(LOAD)
#undef LOAD
}

static const char *fixture(const char *name)
{
    static char path[4096];
    snprintf(path, sizeof(path), "%s/%s", getenv("FAKE_NVML_FIXTURES"), name);
    return path;
}

/* Writes text to tmpdir/name the way tests change a running daemon's fixture: a new file
 * renamed over the old one. Returns the path (static). */
__attribute__((format(printf, 2, 3))) static const char *write_fixture(const char *name,
                                                                       const char *fmt, ...)
{
    static char path[4096];
    char tmp[4200];
    va_list ap;
    snprintf(path, sizeof(path), "%s/%s", tmpdir, name);
    snprintf(tmp, sizeof(tmp), "%s.new", path);
    FILE *f = fopen(tmp, "we");
    assert_non_null(f);
    va_start(ap, fmt);
    vfprintf(f, fmt, ap);
    va_end(ap);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, path), 0);
    return path;
}

static nvmlReturn_t init_with(const char *path)
{
    setenv("FAKE_NVML_FIXTURE", path, 1);
    nvmlReturn_t r = api.nvmlInit_v2();
    if (r == NVML_SUCCESS && t0 < 0)
        t0 = mono();
    return r;
}

/* Seconds since the fake's clock started, give or take the time init took. */
static double since_init(void)
{
    return mono() - t0;
}

static nvmlDevice_t handle(unsigned index)
{
    nvmlDevice_t d = NULL;
    assert_int_equal(api.nvmlDeviceGetHandleByIndex_v2(index, &d), NVML_SUCCESS);
    assert_non_null(d);
    return d;
}

/* Runs f with stderr sent to a file; returns what was written (static). */
static const char *capture_stderr(nvmlReturn_t (*f)(const char *), const char *arg,
                                  nvmlReturn_t *ret)
{
    static char buf[4096];
    char path[4200];
    snprintf(path, sizeof(path), "%s/stderr", tmpdir);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(saved >= 0 && fd >= 0);
    dup2(fd, 2);
    *ret = f(arg);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    close(fd);
    buf[n > 0 ? n : 0] = '\0';
    return buf;
}

static nvmlReturn_t wait_file_check(const char *unused)
{
    /* Past the 100 ms throttle, then a device call notices the new file. */
    sleep_ms(150);
    unsigned t;
    return api.nvmlDeviceGetTemperature(handle(0), NVML_TEMPERATURE_GPU, &t);
}

/* --- the library itself --- */

static void test_exports_every_entry_point(void **state)
{
#define CHECK_SYM(name, ret, params) assert_non_null(api.name);
    NVML_API_FUNCTIONS(CHECK_SYM)
#undef CHECK_SYM
    /* Only NVML's names are exported: the fake's helpers stay hidden. */
    assert_null(dlsym(lib, "fake_begin"));
    assert_null(dlsym(lib, "fake_fixture_load"));
}

static void test_uninitialized(void **state)
{
    unsigned n = 7;
    nvmlDevice_t d;
    nvmlEventSet_t set;
    assert_int_equal(api.nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(n, 7);
    assert_int_equal(api.nvmlDeviceGetHandleByIndex_v2(0, &d), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(api.nvmlEventSetCreate(&set), NVML_ERROR_UNINITIALIZED);
    assert_int_equal(api.nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
    /* nvmlErrorString needs no init. */
    assert_string_equal(api.nvmlErrorString(NVML_ERROR_UNINITIALIZED), "Uninitialized");
}

static void test_error_strings(void **state)
{
    assert_string_equal(api.nvmlErrorString(NVML_SUCCESS), "Success");
    assert_string_equal(api.nvmlErrorString(NVML_ERROR_NOT_SUPPORTED), "Not Supported");
    assert_string_equal(api.nvmlErrorString(NVML_ERROR_GPU_IS_LOST), "GPU is lost");
    assert_string_equal(api.nvmlErrorString(NVML_ERROR_DRIVER_NOT_LOADED), "Driver Not Loaded");
    assert_string_equal(api.nvmlErrorString(NVML_ERROR_INVALID_ARGUMENT), "Invalid Argument");
    assert_string_equal(api.nvmlErrorString(NVML_ERROR_INSUFFICIENT_SIZE), "Insufficient Size");
    assert_string_equal(api.nvmlErrorString(NVML_ERROR_NOT_FOUND), "Not Found");
    assert_string_equal(api.nvmlErrorString(NVML_ERROR_NO_PERMISSION), "Insufficient Permissions");
    assert_string_equal(api.nvmlErrorString(NVML_ERROR_UNKNOWN), "Unknown Error");
    assert_string_equal(api.nvmlErrorString(12345), "Unknown Error");
}

static nvmlReturn_t init_unset(const char *unused)
{
    unsetenv("FAKE_NVML_FIXTURE");
    return api.nvmlInit_v2();
}

static void test_init_failures(void **state)
{
    nvmlReturn_t r;
    const char *err = capture_stderr(init_unset, NULL, &r);
    assert_int_equal(r, NVML_ERROR_DRIVER_NOT_LOADED);
    assert_non_null(strstr(err, "fake-nvml: "));
    assert_non_null(strstr(err, "FAKE_NVML_FIXTURE"));

    err = capture_stderr(init_with, "/nonexistent/fixture.json", &r);
    assert_int_equal(r, NVML_ERROR_DRIVER_NOT_LOADED);
    assert_non_null(strstr(err, "/nonexistent/fixture.json"));

    /* A typo in a fixture fails loudly, naming the key. */
    const char *bad = write_fixture("bad.json", "{\"gpus\": [{\"name\": \"x\", \"uuid\": \"GPU-1\","
                                                "\"pci_bus_id\": \"00000000:01:00.0\","
                                                "\"temprature\": 50}]}");
    err = capture_stderr(init_with, bad, &r);
    assert_int_equal(r, NVML_ERROR_DRIVER_NOT_LOADED);
    assert_non_null(strstr(err, "fake-nvml: "));
    assert_non_null(strstr(err, "gpus[0]"));
    assert_non_null(strstr(err, "temprature"));
    /* One line. */
    assert_ptr_equal(strchr(err, '\n'), err + strlen(err) - 1);

    bad = write_fixture("bad.json", "{\"gpus\": [");
    err = capture_stderr(init_with, bad, &r);
    assert_int_equal(r, NVML_ERROR_DRIVER_NOT_LOADED);
    assert_non_null(strstr(err, "bad.json"));

    assert_int_equal(init_with(fixture("no-driver.json")), NVML_ERROR_DRIVER_NOT_LOADED);
    const char *perm = write_fixture("perm.json", "{\"init_error\": \"NO_PERMISSION\"}");
    assert_int_equal(init_with(perm), NVML_ERROR_NO_PERMISSION);
    /* A failed init leaves NVML uninitialised. */
    assert_int_equal(api.nvmlShutdown(), NVML_ERROR_UNINITIALIZED);
}

static void test_refcount(void **state)
{
    unsigned n;
    assert_int_equal(init_with(fixture("consumer-1gpu.json")), NVML_SUCCESS);
    assert_int_equal(init_with(fixture("consumer-1gpu.json")), NVML_SUCCESS);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetCount_v2(&n), NVML_ERROR_UNINITIALIZED);
}

/* --- consumer-1gpu.json --- */

static void test_consumer_identity(void **state)
{
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    unsigned n, minor;
    int major, cc_minor, cuda;
    nvmlPciInfo_t pci;
    assert_int_equal(init_with(fixture("consumer-1gpu.json")), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    assert_int_equal(n, 1);
    nvmlDevice_t d = handle(0);
    assert_ptr_equal(d, handle(0)); /* handles are stable */
    assert_int_equal(api.nvmlDeviceGetHandleByIndex_v2(1, &d), NVML_ERROR_INVALID_ARGUMENT);
    d = handle(0);
    assert_int_equal(api.nvmlDeviceGetName(d, buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "NVIDIA GeForce RTX 4090");
    assert_int_equal(api.nvmlDeviceGetUUID(d, buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "GPU-5f3a2c1e-8d4b-4e6f-9a7c-2b1d0e3f4a5b");
    assert_int_equal(api.nvmlDeviceGetIndex(d, &n), NVML_SUCCESS);
    assert_int_equal(n, 0);
    assert_int_equal(api.nvmlDeviceGetPciInfo_v3(d, &pci), NVML_SUCCESS);
    assert_string_equal(pci.busId, "00000000:01:00.0");
    assert_string_equal(pci.busIdLegacy, "0000:01:00.0");
    assert_int_equal(pci.bus, 1);
    assert_int_equal(pci.pciDeviceId, 0x268410DE);
    assert_int_equal(api.nvmlDeviceGetMinorNumber(d, &minor), NVML_SUCCESS);
    assert_int_equal(minor, 0);
    assert_int_equal(api.nvmlDeviceGetCudaComputeCapability(d, &major, &cc_minor), NVML_SUCCESS);
    assert_int_equal(major * 10 + cc_minor, 89);
    assert_int_equal(api.nvmlSystemGetDriverVersion(buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "580.95.05");
    assert_int_equal(api.nvmlSystemGetCudaDriverVersion_v2(&cuda), NVML_SUCCESS);
    assert_int_equal(cuda, 13000);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

static void test_consumer_telemetry(void **state)
{
    nvmlUtilization_t u;
    nvmlMemory_t m;
    unsigned v, period;
    unsigned long long reasons, ull;
    nvmlEnableState_t cur, pend;
    assert_int_equal(init_with(fixture("consumer-1gpu.json")), NVML_SUCCESS);
    nvmlDevice_t d = handle(0);
    assert_int_equal(api.nvmlDeviceGetUtilizationRates(d, &u), NVML_SUCCESS);
    assert_int_equal(u.gpu, 87);
    assert_int_equal(u.memory, 42);
    assert_int_equal(api.nvmlDeviceGetMemoryInfo(d, &m), NVML_SUCCESS);
    assert_int_equal(m.total, 25757220864ULL);
    assert_int_equal(m.used, 19327352832ULL);
    assert_int_equal(m.free, m.total - m.used);
    assert_int_equal(api.nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &v), NVML_SUCCESS);
    assert_int_equal(v, 64);
    assert_int_equal(api.nvmlDeviceGetTemperature(d, 5, &v), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlDeviceGetPowerUsage(d, &v), NVML_SUCCESS);
    assert_int_equal(v, 385123);
    assert_int_equal(api.nvmlDeviceGetEnforcedPowerLimit(d, &v), NVML_SUCCESS);
    assert_int_equal(v, 450000);
    assert_int_equal(api.nvmlDeviceGetClockInfo(d, NVML_CLOCK_SM, &v), NVML_SUCCESS);
    assert_int_equal(v, 2520);
    assert_int_equal(api.nvmlDeviceGetClockInfo(d, NVML_CLOCK_MEM, &v), NVML_SUCCESS);
    assert_int_equal(v, 10501);
    assert_int_equal(api.nvmlDeviceGetFanSpeed(d, &v), NVML_SUCCESS);
    assert_int_equal(v, 58);
    assert_int_equal(api.nvmlDeviceGetPcieThroughput(d, NVML_PCIE_UTIL_RX_BYTES, &v), NVML_SUCCESS);
    assert_int_equal(v, 2310455);
    assert_int_equal(api.nvmlDeviceGetDecoderUtilization(d, &v, &period), NVML_SUCCESS);
    assert_int_equal(v, 12);
    assert_true(period > 0);
    assert_int_equal(api.nvmlDeviceGetCurrentClocksEventReasons(d, &reasons), NVML_SUCCESS);
    assert_int_equal(reasons, nvmlClocksEventReasonSwPowerCap);
    assert_int_equal(api.nvmlDeviceGetCurrentClocksThrottleReasons(d, &reasons), NVML_SUCCESS);
    assert_int_equal(reasons, nvmlClocksEventReasonSwPowerCap);
    /* What a GeForce lacks. */
    assert_int_equal(api.nvmlDeviceGetEccMode(d, &cur, &pend), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlDeviceGetTotalEccErrors(d, NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                                     NVML_VOLATILE_ECC, &ull),
                     NVML_ERROR_NOT_SUPPORTED);
    unsigned a, b, c, e;
    assert_int_equal(api.nvmlDeviceGetRemappedRows(d, &a, &b, &c, &e), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlDeviceGetMigMode(d, &a, &b), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlDeviceGetMaxMigDeviceCount(d, &a), NVML_SUCCESS);
    assert_int_equal(a, 0);
    nvmlFieldValue_t fv[2] = {{.fieldId = NVML_FI_DEV_MEMORY_TEMP}, {.fieldId = 9999}};
    assert_int_equal(api.nvmlDeviceGetFieldValues(d, 2, fv), NVML_SUCCESS);
    assert_int_equal(fv[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(fv[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

static void test_consumer_processes(void **state)
{
    nvmlProcessInfo_t p[4];
    unsigned n = 4;
    assert_int_equal(init_with(fixture("consumer-1gpu.json")), NVML_SUCCESS);
    nvmlDevice_t d = handle(0);
    assert_int_equal(api.nvmlDeviceGetComputeRunningProcesses_v3(d, &n, p), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(p[0].pid, 48211);
    assert_int_equal(p[0].usedGpuMemory, 18253611008ULL);
    assert_int_equal(p[0].gpuInstanceId, NVML_INSTANCE_ID_NONE);
    assert_int_equal(p[0].computeInstanceId, NVML_INSTANCE_ID_NONE);
    n = 4;
    assert_int_equal(api.nvmlDeviceGetGraphicsRunningProcesses_v3(d, &n, p), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(p[0].pid, 1523);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

/* NVML's buffer protocols: strings and process lists. */
static void test_insufficient_size(void **state)
{
    char buf[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    nvmlProcessInfo_t p[4];
    unsigned n;
    assert_int_equal(init_with(fixture("dgx-8gpu-mig.json")), NVML_SUCCESS);
    nvmlDevice_t d = handle(0);
    /* "NVIDIA H100 80GB HBM3" is 21 characters: 22 bytes fit, 21 do not. */
    assert_int_equal(api.nvmlDeviceGetName(d, buf, 21), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(api.nvmlDeviceGetName(d, buf, 22), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetUUID(d, buf, 10), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(api.nvmlSystemGetDriverVersion(buf, 5), NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(api.nvmlDeviceGetName(d, NULL, 96), NVML_ERROR_INVALID_ARGUMENT);

    /* Asking for the count. */
    n = 0;
    assert_int_equal(api.nvmlDeviceGetComputeRunningProcesses_v3(d, &n, NULL),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 2);
    n = 1;
    assert_int_equal(api.nvmlDeviceGetComputeRunningProcesses_v3(d, &n, p),
                     NVML_ERROR_INSUFFICIENT_SIZE);
    assert_int_equal(n, 2);
    n = 4;
    assert_int_equal(api.nvmlDeviceGetComputeRunningProcesses_v3(d, &n, p), NVML_SUCCESS);
    assert_int_equal(n, 2);
    assert_int_equal(p[0].pid, 100101);
    assert_int_equal(p[1].pid, 100102);
    /* No processes: SUCCESS with 0. */
    n = 0;
    assert_int_equal(api.nvmlDeviceGetGraphicsRunningProcesses_v3(d, &n, NULL), NVML_SUCCESS);
    assert_int_equal(n, 0);
    assert_int_equal(api.nvmlDeviceGetComputeRunningProcesses_v3(d, NULL, p),
                     NVML_ERROR_INVALID_ARGUMENT);
    n = 2;
    assert_int_equal(api.nvmlDeviceGetComputeRunningProcesses_v3(d, &n, NULL),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

static void test_invalid_arguments(void **state)
{
    unsigned v;
    char buf[96];
    nvmlDevice_t d;
    int x = 0;
    assert_int_equal(init_with(fixture("consumer-1gpu.json")), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetName(NULL, buf, sizeof(buf)), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlDeviceGetName((nvmlDevice_t)&x, buf, sizeof(buf)),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlDeviceGetPowerUsage(handle(0), NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlDeviceGetCount_v2(NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlDeviceGetHandleByIndex_v2(0, NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlDeviceGetClockInfo(handle(0), 17, &v), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlDeviceGetPcieThroughput(handle(0), 2, &v),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
    /* A handle from an earlier init is accepted again after a new one (same slot). */
    assert_int_equal(init_with(fixture("consumer-1gpu.json")), NVML_SUCCESS);
    d = handle(0);
    assert_int_equal(api.nvmlDeviceGetFanSpeed(d, &v), NVML_SUCCESS);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

/* --- dgx-8gpu-mig.json --- */

static void test_dgx_datacentre(void **state)
{
    unsigned n, v, a, b, c, e;
    unsigned long long ull;
    nvmlEnableState_t cur, pend;
    char buf[96];
    assert_int_equal(init_with(fixture("dgx-8gpu-mig.json")), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    assert_int_equal(n, 8);
    for (unsigned i = 0; i < 8; i++) {
        nvmlDevice_t d = handle(i);
        assert_int_equal(api.nvmlDeviceGetName(d, buf, sizeof(buf)), NVML_SUCCESS);
        assert_string_equal(buf, "NVIDIA H100 80GB HBM3");
        assert_int_equal(api.nvmlDeviceGetMinorNumber(d, &v), NVML_SUCCESS);
        assert_int_equal(v, i);
        /* Datacentre cards have no fan NVML could read. */
        assert_int_equal(api.nvmlDeviceGetFanSpeed(d, &v), NVML_ERROR_NOT_SUPPORTED);
        assert_int_equal(api.nvmlDeviceGetEccMode(d, &cur, &pend), NVML_SUCCESS);
        assert_int_equal(cur, NVML_FEATURE_ENABLED);
        nvmlFieldValue_t fv = {.fieldId = NVML_FI_DEV_MEMORY_TEMP};
        assert_int_equal(api.nvmlDeviceGetFieldValues(d, 1, &fv), NVML_SUCCESS);
        assert_int_equal(fv.nvmlReturn, NVML_SUCCESS);
        assert_int_equal(fv.valueType, NVML_VALUE_TYPE_UNSIGNED_INT);
        assert_in_range(fv.value.uiVal, 30, 90);
        assert_true(fv.timestamp > 1600000000LL * 1000000);
    }
    nvmlDevice_t d6 = handle(6);
    assert_int_equal(api.nvmlDeviceGetTotalEccErrors(d6, NVML_MEMORY_ERROR_TYPE_CORRECTED,
                                                     NVML_VOLATILE_ECC, &ull),
                     NVML_SUCCESS);
    assert_int_equal(ull, 17);
    assert_int_equal(api.nvmlDeviceGetTotalEccErrors(d6, NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
                                                     NVML_AGGREGATE_ECC, &ull),
                     NVML_SUCCESS);
    assert_int_equal(ull, 1);
    assert_int_equal(api.nvmlDeviceGetRemappedRows(d6, &a, &b, &c, &e), NVML_SUCCESS);
    assert_int_equal(a, 2);
    assert_int_equal(b, 1);
    assert_int_equal(c, 0);
    assert_int_equal(e, 0);
    assert_int_equal(api.nvmlDeviceGetCurrentClocksEventReasons(handle(7), &ull), NVML_SUCCESS);
    assert_int_equal(ull, nvmlClocksThrottleReasonHwSlowdown);
    assert_int_equal(api.nvmlDeviceGetCurrentClocksEventReasons(handle(2), &ull), NVML_SUCCESS);
    assert_int_equal(ull, nvmlClocksEventReasonGpuIdle);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

static void test_dgx_mig(void **state)
{
    unsigned cur, pend, n, id;
    char buf[96];
    nvmlDevice_t mig[3], d;
    assert_int_equal(init_with(fixture("dgx-8gpu-mig.json")), NVML_SUCCESS);
    nvmlDevice_t g3 = handle(3);
    assert_int_equal(api.nvmlDeviceGetMigMode(g3, &cur, &pend), NVML_SUCCESS);
    assert_int_equal(cur, NVML_DEVICE_MIG_ENABLE);
    assert_int_equal(pend, NVML_DEVICE_MIG_ENABLE);
    assert_int_equal(api.nvmlDeviceGetMaxMigDeviceCount(g3, &n), NVML_SUCCESS);
    assert_int_equal(n, 7);
    for (unsigned i = 0; i < 3; i++)
        assert_int_equal(api.nvmlDeviceGetMigDeviceHandleByIndex(g3, i, &mig[i]), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetMigDeviceHandleByIndex(g3, 3, &d), NVML_ERROR_NOT_FOUND);

    /* What works on a MIG device handle. */
    assert_int_equal(api.nvmlDeviceGetUUID(mig[1], buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "MIG-1b2c3d4e-5f60-5b7c-9d8e-0f1a2b3c4d5e");
    assert_int_equal(api.nvmlDeviceGetName(mig[0], buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "NVIDIA H100 80GB HBM3 MIG 3g.40gb");
    assert_int_equal(api.nvmlDeviceGetGpuInstanceId(mig[1], &id), NVML_SUCCESS);
    assert_int_equal(id, 9);
    assert_int_equal(api.nvmlDeviceGetComputeInstanceId(mig[1], &id), NVML_SUCCESS);
    assert_int_equal(id, 0);
    assert_int_equal(api.nvmlDeviceGetIndex(mig[2], &id), NVML_SUCCESS);
    assert_int_equal(id, 2);
    nvmlMemory_t m;
    assert_int_equal(api.nvmlDeviceGetMemoryInfo(mig[1], &m), NVML_SUCCESS);
    assert_int_equal(m.total, 10468982784ULL);
    assert_int_equal(m.used, 6442450944ULL);
    nvmlDeviceAttributes_t at;
    assert_int_equal(api.nvmlDeviceGetAttributes_v2(mig[0], &at), NVML_SUCCESS);
    assert_int_equal(at.gpuInstanceSliceCount, 3);
    assert_int_equal(at.multiprocessorCount, 60);
    assert_int_equal(at.memorySizeMB, 40448);
    /* ... and what does not, as on real MIG devices. */
    nvmlUtilization_t u;
    unsigned v;
    assert_int_equal(api.nvmlDeviceGetUtilizationRates(mig[0], &u), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlDeviceGetTemperature(mig[0], NVML_TEMPERATURE_GPU, &v),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlDeviceGetPowerUsage(mig[0], &v), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlDeviceGetClockInfo(mig[0], NVML_CLOCK_SM, &v),
                     NVML_ERROR_NOT_SUPPORTED);
    /* The parent in MIG mode has no whole-GPU utilisation; its other values stay. */
    assert_int_equal(api.nvmlDeviceGetUtilizationRates(g3, &u), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlDeviceGetTemperature(g3, NVML_TEMPERATURE_GPU, &v), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetAttributes_v2(g3, &at), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlDeviceGetGpuInstanceId(g3, &id), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

static void test_dgx_gpu_instances(void **state)
{
    unsigned cur, pend, n;
    nvmlDevice_t d;
    nvmlUtilization_t u;
    assert_int_equal(init_with(fixture("dgx-8gpu-mig.json")), NVML_SUCCESS);
    nvmlDevice_t g3 = handle(3);
    nvmlGpuInstance_t gi;
    nvmlGpuInstanceInfo_t info;
    assert_int_equal(api.nvmlDeviceGetGpuInstanceById(g3, 2, &gi), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpuInstanceGetInfo(gi, &info), NVML_SUCCESS);
    assert_int_equal(info.id, 2);
    assert_int_equal(info.profileId, 9);
    assert_ptr_equal(info.device, g3);
    assert_int_equal(info.placement.size, 3);
    assert_int_equal(api.nvmlDeviceGetGpuInstanceById(g3, 10, &gi), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpuInstanceGetInfo(gi, &info), NVML_SUCCESS);
    assert_int_equal(info.profileId, 19);
    assert_int_equal(info.placement.start, 4);
    assert_int_equal(api.nvmlDeviceGetGpuInstanceById(g3, 5, &gi), NVML_ERROR_NOT_FOUND);

    nvmlGpuInstanceProfileInfo_v2_t pi = {.version = nvmlGpuInstanceProfileInfo_v2};
    assert_int_equal(api.nvmlDeviceGetGpuInstanceProfileInfoV(g3, 0, &pi), NVML_SUCCESS);
    assert_int_equal(pi.id, 19);
    assert_string_equal(pi.name, "MIG 1g.10gb");
    assert_int_equal(pi.sliceCount, 1);
    assert_int_equal(pi.memorySizeMB, 9984);
    assert_int_equal(pi.version, nvmlGpuInstanceProfileInfo_v2);
    assert_int_equal(api.nvmlDeviceGetGpuInstanceProfileInfoV(g3, 5, &pi),
                     NVML_ERROR_INVALID_ARGUMENT);
    pi.version = 1;
    assert_int_equal(api.nvmlDeviceGetGpuInstanceProfileInfoV(g3, 0, &pi),
                     NVML_ERROR_ARGUMENT_VERSION_MISMATCH);

    /* A MIG-capable GPU in normal mode. */
    nvmlDevice_t g0 = handle(0);
    assert_int_equal(api.nvmlDeviceGetMigMode(g0, &cur, &pend), NVML_SUCCESS);
    assert_int_equal(cur, NVML_DEVICE_MIG_DISABLE);
    assert_int_equal(api.nvmlDeviceGetMaxMigDeviceCount(g0, &n), NVML_SUCCESS);
    assert_int_equal(n, 0);
    assert_int_equal(api.nvmlDeviceGetMigDeviceHandleByIndex(g0, 0, &d), NVML_ERROR_NOT_FOUND);
    assert_int_equal(api.nvmlDeviceGetGpuInstanceById(g0, 2, &gi), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlDeviceGetUtilizationRates(g0, &u), NVML_SUCCESS);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

static void test_dgx_mig_processes(void **state)
{
    nvmlProcessInfo_t p[8];
    unsigned n = 8;
    nvmlDevice_t mig;
    assert_int_equal(init_with(fixture("dgx-8gpu-mig.json")), NVML_SUCCESS);
    nvmlDevice_t g3 = handle(3);
    /* The parent lists every instance's processes with their ids. */
    assert_int_equal(api.nvmlDeviceGetComputeRunningProcesses_v3(g3, &n, p), NVML_SUCCESS);
    assert_int_equal(n, 3);
    assert_int_equal(p[0].gpuInstanceId, 2);
    assert_int_equal(p[1].gpuInstanceId, 9);
    assert_int_equal(p[2].gpuInstanceId, 10);
    assert_int_equal(p[2].computeInstanceId, 0);
    assert_int_equal(p[2].usedGpuMemory, NVML_VALUE_NOT_AVAILABLE);
    /* A MIG device only its own. */
    assert_int_equal(api.nvmlDeviceGetMigDeviceHandleByIndex(g3, 1, &mig), NVML_SUCCESS);
    n = 8;
    assert_int_equal(api.nvmlDeviceGetComputeRunningProcesses_v3(mig, &n, p), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(p[0].pid, 210002);
    assert_int_equal(p[0].usedGpuMemory, 6442450944ULL);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

static void test_energy_grows(void **state)
{
    unsigned long long e1, e2;
    assert_int_equal(init_with(fixture("dgx-8gpu-mig.json")), NVML_SUCCESS);
    nvmlDevice_t d = handle(0);
    assert_int_equal(api.nvmlDeviceGetTotalEnergyConsumption(d, &e1), NVML_SUCCESS);
    assert_true(e1 >= 5000000000ULL);
    double t1 = mono();
    sleep_ms(200);
    assert_int_equal(api.nvmlDeviceGetTotalEnergyConsumption(d, &e2), NVML_SUCCESS);
    double dt = mono() - t1;
    /* 612 W for dt seconds, give or take the time between the reads and the clocks. */
    assert_true(e2 > e1);
    assert_in_range(e2 - e1, (unsigned long long)(612000 * (dt - 0.02)),
                    (unsigned long long)(612000 * (dt + 0.02)));
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

/* One GPU with a given body (JSON members) and a standard identity. */
#define GPU_JSON(idx, body)                                                                        \
    "{\"name\": \"NVIDIA A100-SXM4-80GB\", \"uuid\": "                                             \
    "\"GPU-00000000-0000-0000-0000-00000000000" idx "\", \"pci_bus_id\": \"00000000:0" idx         \
    ":00.0\", " body "}"

/* When test_events' fixture has its event on GPU 0 (seconds since init). */
static double events_at;

static void test_events(void **state)
{
    nvmlEventSet_t set;
    nvmlEventData_t ev;
    unsigned long long types;
    int bogus;
    assert_int_equal(init_with(fixture("consumer-1gpu.json")), NVML_SUCCESS);
    double at = events_at = since_init() + 0.4;
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
    const char *path = write_fixture(
        "events.json",
        "{\"gpus\": [" GPU_JSON(
            "0",
            "\"events\": [{\"at\": %.3f, \"xid\": 31, "
            "\"gi\": 1, \"ci\": 0}]") "," GPU_JSON("1", "\"events\": [{\"at\": 0, \"xid\": "
                                                        "43}]") "," GPU_JSON("2", "\"xid_events\": "
                                                                                  "false") "]}",
        at);
    assert_int_equal(init_with(path), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetSupportedEventTypes(handle(2), &types), NVML_SUCCESS);
    assert_int_equal(types & nvmlEventTypeXidCriticalError, 0);
    assert_int_equal(api.nvmlEventSetCreate(&set), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceRegisterEvents(handle(2), nvmlEventTypeXidCriticalError, set),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlDeviceRegisterEvents(handle(2), nvmlEventTypePState, set),
                     NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceRegisterEvents(handle(0), nvmlEventTypeXidCriticalError, set),
                     NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceRegisterEvents(handle(0), nvmlEventTypeXidCriticalError,
                                                  (nvmlEventSet_t)&bogus),
                     NVML_ERROR_INVALID_ARGUMENT);

    /* GPU 1's event is due but GPU 1 is not registered; GPU 0's comes at its time. */
    double start = mono();
    assert_int_equal(api.nvmlEventSetWait_v2(set, &ev, 5000), NVML_SUCCESS);
    assert_true(since_init() >= at - 0.05);
    assert_true(mono() - start < 2.0);
    assert_ptr_equal(ev.device, handle(0));
    assert_int_equal(ev.eventType, nvmlEventTypeXidCriticalError);
    assert_int_equal(ev.eventData, 31);
    assert_int_equal(ev.gpuInstanceId, 1);
    assert_int_equal(ev.computeInstanceId, 0);

    /* Delivered once: the next wait times out after its timeout. */
    start = mono();
    assert_int_equal(api.nvmlEventSetWait_v2(set, &ev, 200), NVML_ERROR_TIMEOUT);
    assert_true(mono() - start >= 0.19);
    assert_int_equal(api.nvmlEventSetWait_v2(set, &ev, 0), NVML_ERROR_TIMEOUT);

    assert_int_equal(api.nvmlEventSetFree(set), NVML_SUCCESS);
    assert_int_equal(api.nvmlEventSetFree((nvmlEventSet_t)&bogus), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

/* Continues test_events: its fixture, with the event of GPU 0 long due. */
static void test_events_per_set(void **state)
{
    nvmlEventSet_t set, set2;
    nvmlEventData_t ev;
    char path[4200];
    snprintf(path, sizeof(path), "%s/events.json", tmpdir);
    assert_int_equal(init_with(path), NVML_SUCCESS);
    assert_int_equal(api.nvmlEventSetCreate(&set), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceRegisterEvents(handle(0), nvmlEventTypeXidCriticalError, set),
                     NVML_SUCCESS);
    assert_int_equal(api.nvmlEventSetWait_v2(set, &ev, 0), NVML_SUCCESS);
    assert_int_equal(ev.eventData, 31);
    double at = events_at;

    /* A second set sees GPU 1's event, with no instance. */
    assert_int_equal(api.nvmlEventSetCreate(&set2), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceRegisterEvents(handle(1), nvmlEventTypeXidCriticalError, set2),
                     NVML_SUCCESS);
    assert_int_equal(api.nvmlEventSetWait_v2(set2, &ev, 1000), NVML_SUCCESS);
    assert_int_equal(ev.eventData, 43);
    assert_int_equal(ev.gpuInstanceId, NVML_INSTANCE_ID_NONE);
    assert_int_equal(ev.computeInstanceId, NVML_INSTANCE_ID_NONE);
    assert_int_equal(api.nvmlEventSetFree(set2), NVML_SUCCESS);

    /* An event added to the running fixture arrives; the old one does not come again. */
    write_fixture("events.json",
                  "{\"gpus\": [" GPU_JSON("0",
                                          "\"events\": [{\"at\": %.3f, \"xid\": 31, "
                                          "\"gi\": 1, \"ci\": 0}, {\"at\": 0, \"xid\": 94}]") "]}",
                  at);
    assert_int_equal(api.nvmlEventSetWait_v2(set, &ev, 1000), NVML_SUCCESS);
    assert_int_equal(ev.eventData, 94);
    assert_int_equal(api.nvmlEventSetWait_v2(set, &ev, 300), NVML_ERROR_TIMEOUT);
    assert_int_equal(api.nvmlEventSetFree(set), NVML_SUCCESS);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

/* The driver's reservation: used in version 1, apart in version 2; free the same in both. */
static void test_memory_reserved(void **state)
{
    nvmlMemory_t m1;
    nvmlMemory_v2_t m2 = {.version = nvmlMemory_v2};
    const char *path = write_fixture(
        "reserved.json",
        "{\"gpus\": [" GPU_JSON(
            "0", "\"memory\": {\"total\": 1000, \"used\": 300, \"reserved\": 50}") "]}");
    assert_int_equal(init_with(path), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetMemoryInfo(handle(0), &m1), NVML_SUCCESS);
    assert_int_equal(m1.used, 350);
    assert_int_equal(m1.free, 650);
    assert_int_equal(api.nvmlDeviceGetMemoryInfo_v2(handle(0), &m2), NVML_SUCCESS);
    assert_int_equal(m2.total, 1000);
    assert_int_equal(m2.used, 300);
    assert_int_equal(m2.reserved, 50);
    assert_int_equal(m2.free, 650);
    nvmlMemory_v2_t bad = {.version = 1};
    assert_int_equal(api.nvmlDeviceGetMemoryInfo_v2(handle(0), &bad),
                     NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

/* "max_calls": a budget per GPU and call, from the init; tests count a consumer's calls. */
static void test_max_calls(void **state)
{
    unsigned t;
    const char *path = write_fixture(
        "max-calls.json",
        "{\"gpus\": [" GPU_JSON(
            "0", "\"temperature\": 50, \"max_calls\": {\"nvmlDeviceGetTemperature\": 2}") "]}");
    for (int round = 0; round < 2; round++) {
        assert_int_equal(init_with(path), NVML_SUCCESS);
        nvmlDevice_t d = handle(0);
        for (int i = 0; i < 2; i++)
            assert_int_equal(api.nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &t),
                             NVML_SUCCESS);
        assert_int_equal(api.nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &t),
                         NVML_ERROR_UNKNOWN);
        /* Other calls are not counted against it. */
        assert_int_equal(api.nvmlDeviceGetCount_v2(&t), NVML_SUCCESS);
        /* A new init from nothing starts the count again. */
        assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
    }
}

static void test_reread(void **state)
{
    unsigned t, n;
    nvmlReturn_t r;
    const char *path = write_fixture(
        "reread.json", "{\"gpus\": [" GPU_JSON("0", "\"temperature\": 50") "," GPU_JSON(
                           "1", "\"temperature\": 51") "]}");
    assert_int_equal(init_with(path), NVML_SUCCESS);
    nvmlDevice_t d0 = handle(0), d1 = handle(1);
    assert_int_equal(api.nvmlDeviceGetTemperature(d0, NVML_TEMPERATURE_GPU, &t), NVML_SUCCESS);
    assert_int_equal(t, 50);

    /* One GPU fewer and a new value: the old handle of GPU 0 sees it. */
    write_fixture("reread.json", "{\"gpus\": [" GPU_JSON("0", "\"temperature\": 70") "]}");
    sleep_ms(150);
    assert_int_equal(api.nvmlDeviceGetTemperature(d0, NVML_TEMPERATURE_GPU, &t), NVML_SUCCESS);
    assert_int_equal(t, 70);
    assert_int_equal(api.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(api.nvmlDeviceGetTemperature(d1, NVML_TEMPERATURE_GPU, &t),
                     NVML_ERROR_INVALID_ARGUMENT);

    /* A broken version is reported and ignored. */
    write_fixture("reread.json", "{\"gpus\": [" GPU_JSON("0", "\"temperature\": \"hot\"") "]}");
    const char *err = capture_stderr(wait_file_check, NULL, &r);
    assert_int_equal(r, NVML_SUCCESS);
    assert_non_null(strstr(err, "fake-nvml: "));
    assert_non_null(strstr(err, "temperature"));
    assert_int_equal(api.nvmlDeviceGetTemperature(d0, NVML_TEMPERATURE_GPU, &t), NVML_SUCCESS);
    assert_int_equal(t, 70);

    /* GPU 1 back: its old handle works again. */
    write_fixture("reread.json", "{\"gpus\": [" GPU_JSON("0", "\"temperature\": 72") "," GPU_JSON(
                                     "1", "\"temperature\": 73") "]}");
    sleep_ms(150);
    assert_int_equal(api.nvmlDeviceGetTemperature(d1, NVML_TEMPERATURE_GPU, &t), NVML_SUCCESS);
    assert_int_equal(t, 73);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

static void test_lost_mig(void **state)
{
    assert_int_equal(init_with(fixture("consumer-1gpu.json")), NVML_SUCCESS);
    double lost_at = since_init() + 0.3;
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
    const char *path = write_fixture(
        "lost.json",
        "{\"gpus\": [" GPU_JSON(
            "0",
            "\"lost_at\": %.3f, \"temperature\": 40, \"mig\": {\"enabled\": true, "
            "\"instances\": [{\"gi\": 1, \"ci\": 0, \"profile_id\": 0, \"uuid\": \"MIG-1\"}]}, "
            "\"mig_profiles\": [{\"index\": 4, \"id\": 0, \"name\": \"MIG 7g.80gb\", "
            "\"slices\": 7, \"memory_mb\": 81152}]") "]}",
        lost_at);
    assert_int_equal(init_with(path), NVML_SUCCESS);
    nvmlDevice_t d = handle(0), mig, tmp;
    nvmlGpuInstance_t gi;
    nvmlGpuInstanceInfo_t info;
    unsigned t, n;
    char buf[96];
    assert_int_equal(api.nvmlDeviceGetMigDeviceHandleByIndex(d, 0, &mig), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetGpuInstanceById(d, 1, &gi), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetUUID(mig, buf, sizeof(buf)), NVML_SUCCESS);
    while (since_init() < lost_at + 0.05)
        sleep_ms(20);
    assert_int_equal(api.nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &t),
                     NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(api.nvmlDeviceGetUUID(mig, buf, sizeof(buf)), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(api.nvmlGpuInstanceGetInfo(gi, &info), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(api.nvmlDeviceGetHandleByIndex_v2(0, &tmp), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(api.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    assert_int_equal(n, 1);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

struct slow_call {
    nvmlDevice_t device;
    double took; /* seconds, -1 if the call failed */
};

static void *slow_energy(void *arg)
{
    struct slow_call *c = arg;
    unsigned long long e;
    double start = mono();
    nvmlReturn_t r = api.nvmlDeviceGetTotalEnergyConsumption(c->device, &e);
    c->took = r == NVML_SUCCESS ? mono() - start : -1;
    return NULL;
}

static void test_errors_and_delay(void **state)
{
    unsigned v, n;
    char buf[96];
    const char *path = write_fixture(
        "errors.json",
        "{\"driver_version\": \"550.1\", \"errors\": {\"nvmlSystemGetDriverVersion\": "
        "\"UNKNOWN\"}, \"gpus\": [" GPU_JSON(
            "0", "\"energy_mj\": 1, \"power_usage_mw\": 1000, "
                 "\"delay_us\": "
                 "{\"nvmlDeviceGetTotalEnergyConsumption\": "
                 "300000}") "," GPU_JSON("1", "\"temperature\": 30, "
                                              "\"power_usage_mw\": 1, "
                                              "\"unsupported\": "
                                              "[\"nvmlDeviceGetTemperatu"
                                              "re\"], \"errors\": "
                                              "{\"nvmlDeviceGetPowerUsag"
                                              "e\": "
                                              "\"GPU_IS_LOST\", "
                                              "\"nvmlDeviceGetHandleByIn"
                                              "dex_v2\": "
                                              "\"NO_PERMISSION\"}") "]"
                                                                    "}");
    assert_int_equal(init_with(path), NVML_SUCCESS);
    assert_int_equal(api.nvmlSystemGetDriverVersion(buf, sizeof(buf)), NVML_ERROR_UNKNOWN);
    nvmlDevice_t d1;
    assert_int_equal(api.nvmlDeviceGetHandleByIndex_v2(1, &d1), NVML_ERROR_NO_PERMISSION);
    assert_int_equal(api.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    assert_int_equal(n, 2);
    /* Absent keys: NOT_SUPPORTED. */
    assert_int_equal(api.nvmlDeviceGetFanSpeed(handle(0), &v), NVML_ERROR_NOT_SUPPORTED);

    /* The delayed call sleeps, but does not hold up other calls meanwhile. */
    struct slow_call arg = {.device = handle(0)};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, slow_energy, &arg), 0);
    sleep_ms(50);
    double start = mono();
    assert_int_equal(api.nvmlDeviceGetPowerUsage(handle(0), &v), NVML_SUCCESS);
    assert_int_equal(v, 1000);
    assert_true(mono() - start < 0.1);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_true(arg.took >= 0.29);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

static void test_forced_on_gpu(void **state)
{
    unsigned v;
    const char *path = write_fixture(
        "forced.json", "{\"gpus\": [" GPU_JSON(
                           "0", "\"temperature\": 30, \"power_usage_mw\": 1, "
                                "\"unsupported\": [\"nvmlDeviceGetTemperature\"], "
                                "\"errors\": {\"nvmlDeviceGetPowerUsage\": \"UNKNOWN\"}") "]}");
    assert_int_equal(init_with(path), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetTemperature(handle(0), NVML_TEMPERATURE_GPU, &v),
                     NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlDeviceGetPowerUsage(handle(0), &v), NVML_ERROR_UNKNOWN);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

static void *hammer(void *arg)
{
    long failures = 0;
    for (int i = 0; i < 300; i++) {
        unsigned n = 0, t;
        nvmlDevice_t d;
        nvmlProcessInfo_t p[8];
        unsigned pn = 8;
        unsigned long long e;
        failures += api.nvmlDeviceGetCount_v2(&n) != NVML_SUCCESS;
        failures += api.nvmlDeviceGetHandleByIndex_v2(i % 8, &d) != NVML_SUCCESS;
        failures += api.nvmlDeviceGetTemperature(d, NVML_TEMPERATURE_GPU, &t) != NVML_SUCCESS;
        failures += api.nvmlDeviceGetComputeRunningProcesses_v3(d, &pn, p) != NVML_SUCCESS;
        failures += api.nvmlDeviceGetTotalEnergyConsumption(d, &e) != NVML_SUCCESS;
        if (i % 50 == 0)
            sleep_ms(5);
    }
    *(long *)arg = failures;
    return NULL;
}

/* Three threads (as in gpumon) and fixture rewrites at the same time. */
static void test_threads(void **state)
{
    pthread_t th[3];
    long failures[3];
    FILE *f = fopen(fixture("dgx-8gpu-mig.json"), "re");
    assert_non_null(f);
    static char text[1 << 16];
    size_t len = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[len] = '\0';
    const char *path = write_fixture("threads.json", "%s", text);
    assert_int_equal(init_with(path), NVML_SUCCESS);
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&th[i], NULL, hammer, &failures[i]), 0);
    for (int i = 0; i < 5; i++) {
        sleep_ms(30);
        write_fixture("threads.json", "%s%*s", text, i + 1, ""); /* new size, same data */
    }
    for (int i = 0; i < 3; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        assert_int_equal(failures[i], 0);
    }
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

/* --- GPM, NVLink counters, virtualisation --- */

/* Asks for metrics ids[0..n) between samples a and b. */
static nvmlReturn_t metrics_get(nvmlGpmMetricsGet_t *mg, nvmlGpmSample_t a, nvmlGpmSample_t b,
                                const unsigned *ids, unsigned n)
{
    memset(mg, 0, sizeof(*mg));
    mg->version = NVML_GPM_METRICS_GET_VERSION;
    mg->numMetrics = n;
    mg->sample1 = a;
    mg->sample2 = b;
    for (unsigned i = 0; i < n; i++)
        mg->metrics[i].metricId = ids[i];
    return api.nvmlGpmMetricsGet(mg);
}

static void test_gpm_support_and_samples(void **state)
{
    nvmlGpmSupport_t sup = {.version = NVML_GPM_SUPPORT_VERSION};
    nvmlGpmSample_t s, t;
    nvmlDevice_t mig;
    assert_int_equal(init_with(fixture("dgx-8gpu-mig.json")), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmQueryDeviceSupport(handle(0), &sup), NVML_SUCCESS);
    assert_int_equal(sup.isSupportedDevice, 1);
    sup.version = 2;
    assert_int_equal(api.nvmlGpmQueryDeviceSupport(handle(0), &sup),
                     NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    assert_int_equal(api.nvmlGpmQueryDeviceSupport(handle(0), NULL), NVML_ERROR_INVALID_ARGUMENT);

    /* Buffers: only what SampleAlloc handed out may be used or freed, once. */
    assert_int_equal(api.nvmlGpmSampleAlloc(NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlGpmSampleAlloc(&s), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleAlloc(&t), NVML_SUCCESS);
    assert_ptr_not_equal(s, t);
    assert_int_equal(api.nvmlGpmSampleGet(handle(0), s), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleGet(handle(0), (nvmlGpmSample_t)&sup),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlGpmSampleGet(handle(0), NULL), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlGpmSampleFree((nvmlGpmSample_t)&sup), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlGpmSampleFree(t), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleFree(t), NVML_ERROR_INVALID_ARGUMENT);

    /* MIG: instances through the parent only. */
    assert_int_equal(api.nvmlGpmMigSampleGet(handle(3), 9, s), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmMigSampleGet(handle(3), 5, s), NVML_ERROR_NOT_FOUND);
    assert_int_equal(api.nvmlGpmMigSampleGet(handle(0), 9, s), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlDeviceGetMigDeviceHandleByIndex(handle(3), 1, &mig), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleGet(mig, s), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlGpmMigSampleGet(mig, 9, s), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlGpmQueryDeviceSupport(mig, &sup), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);

    /* Before Hopper: supported 0, and no samples. */
    sup.version = NVML_GPM_SUPPORT_VERSION;
    assert_int_equal(init_with(fixture("consumer-1gpu.json")), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmQueryDeviceSupport(handle(0), &sup), NVML_SUCCESS);
    assert_int_equal(sup.isSupportedDevice, 0);
    assert_int_equal(api.nvmlGpmSampleGet(handle(0), s), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlGpmMigSampleGet(handle(0), 1, s), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlGpmSampleFree(s), NVML_SUCCESS);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleAlloc(&s), NVML_ERROR_UNINITIALIZED);
}

static void test_gpm_metrics(void **state)
{
    static nvmlGpmMetricsGet_t mg;
    nvmlGpmSample_t a, b, c, m1, m2;
    const unsigned ids[] = {NVML_GPM_METRIC_SM_UTIL,
                            NVML_GPM_METRIC_PCIE_TX_PER_SEC,
                            NVML_GPM_METRIC_NVLINK_TOTAL_RX_PER_SEC,
                            NVML_GPM_METRIC_NVDEC_0_UTIL, /* valid, not in the fixture */
                            150,                          /* a newer driver's metric */
                            0,
                            8, /* unused */
                            NVML_GPM_METRIC_MAX};
    assert_int_equal(init_with(fixture("dgx-8gpu-mig.json")), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleAlloc(&a), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleAlloc(&b), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleAlloc(&c), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleAlloc(&m1), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleAlloc(&m2), NVML_SUCCESS);

    /* Nothing to compare before two samples of one GPU, in order. */
    assert_int_equal(metrics_get(&mg, a, b, ids, 1), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlGpmSampleGet(handle(0), a), NVML_SUCCESS);
    assert_int_equal(metrics_get(&mg, a, b, ids, 1), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(metrics_get(&mg, a, a, ids, 1), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlGpmSampleGet(handle(0), b), NVML_SUCCESS);
    assert_int_equal(metrics_get(&mg, b, a, ids, 1), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlGpmSampleGet(handle(1), c), NVML_SUCCESS);
    assert_int_equal(metrics_get(&mg, a, c, ids, 1), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(metrics_get(&mg, a, b, ids, 1), NVML_SUCCESS);
    mg.numMetrics = NVML_GPM_METRIC_MAX + 1;
    assert_int_equal(api.nvmlGpmMetricsGet(&mg), NVML_ERROR_INVALID_ARGUMENT);
    mg.numMetrics = 1;
    mg.version = 2;
    assert_int_equal(api.nvmlGpmMetricsGet(&mg), NVML_ERROR_ARGUMENT_VERSION_MISMATCH);
    assert_int_equal(api.nvmlGpmMetricsGet(NULL), NVML_ERROR_INVALID_ARGUMENT);

    /* The fixture's values, per metric. */
    assert_int_equal(metrics_get(&mg, a, b, ids, ELEMENTSOF(ids)), NVML_SUCCESS);
    assert_int_equal(mg.metrics[0].nvmlReturn, NVML_SUCCESS);
    assert_float_equal(mg.metrics[0].value, 91.2, 1e-9);
    assert_float_equal(mg.metrics[1].value, 1171.9, 1e-9);
    assert_float_equal(mg.metrics[2].value, 181902.25, 1e-9);
    assert_int_equal(mg.metrics[3].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(mg.metrics[4].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(mg.metrics[5].nvmlReturn, NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(mg.metrics[6].nvmlReturn, NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(mg.metrics[7].nvmlReturn, NVML_ERROR_INVALID_ARGUMENT);
    /* A sample is reused: b then a again is a new interval. */
    assert_int_equal(api.nvmlGpmSampleGet(handle(0), a), NVML_SUCCESS);
    assert_int_equal(metrics_get(&mg, b, a, ids, 1), NVML_SUCCESS);

    /* A GPU instance: its own values, no PCIe; not comparable with a whole-GPU sample. */
    assert_int_equal(api.nvmlGpmMigSampleGet(handle(3), 9, m1), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmMigSampleGet(handle(3), 10, m2), NVML_SUCCESS);
    assert_int_equal(metrics_get(&mg, m1, m2, ids, 2), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlGpmSampleGet(handle(3), m2), NVML_SUCCESS);
    assert_int_equal(metrics_get(&mg, m1, m2, ids, 2), NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlGpmMigSampleGet(handle(3), 9, m2), NVML_SUCCESS);
    assert_int_equal(metrics_get(&mg, m1, m2, ids, 2), NVML_SUCCESS);
    assert_float_equal(mg.metrics[0].value, 36.2, 1e-9);
    assert_int_equal(mg.metrics[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);

    nvmlGpmSample_t all[] = {a, b, c, m1, m2};
    for (size_t i = 0; i < ELEMENTSOF(all); i++)
        assert_int_equal(api.nvmlGpmSampleFree(all[i]), NVML_SUCCESS);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

/* The GPU's "errors" and loss apply to nvmlGpmMetricsGet, which has no device argument. */
static void test_gpm_errors(void **state)
{
    static nvmlGpmMetricsGet_t mg;
    nvmlGpmSample_t a, b;
    const unsigned id = NVML_GPM_METRIC_SM_UTIL;
    const char *path = write_fixture(
        "gpm-errors.json",
        "{\"gpus\": [" GPU_JSON("0", "\"gpm\": {\"supported\": true, \"metrics\": "
                                     "{\"sm_util\": 12.5}}, \"errors\": "
                                     "{\"nvmlGpmMetricsGet\": \"GPU_IS_LOST\"}") "]}");
    assert_int_equal(init_with(path), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleAlloc(&a), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleAlloc(&b), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleGet(handle(0), a), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleGet(handle(0), b), NVML_SUCCESS);
    assert_int_equal(metrics_get(&mg, a, b, &id, 1), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(api.nvmlGpmSampleFree(a), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleFree(b), NVML_SUCCESS);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

static unsigned long long nvlink_field(nvmlDevice_t d, unsigned field, unsigned scope,
                                       nvmlReturn_t want)
{
    nvmlFieldValue_t fv = {.fieldId = field, .scopeId = scope};
    assert_int_equal(api.nvmlDeviceGetFieldValues(d, 1, &fv), NVML_SUCCESS);
    assert_int_equal(fv.nvmlReturn, want);
    if (want != NVML_SUCCESS)
        return 0;
    assert_int_equal(fv.valueType, NVML_VALUE_TYPE_UNSIGNED_LONG_LONG);
    return fv.value.ullVal;
}

static void test_nvlink_counters(void **state)
{
    nvmlFieldValue_t fv[2] = {{.fieldId = NVML_FI_DEV_NVLINK_LINK_COUNT},
                              {.fieldId = NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX}};
    assert_int_equal(init_with(fixture("dgx-8gpu-mig.json")), NVML_SUCCESS);
    nvmlDevice_t d = handle(0);
    fv[1].scopeId = UINT_MAX;
    assert_int_equal(api.nvmlDeviceGetFieldValues(d, 2, fv), NVML_SUCCESS);
    assert_int_equal(fv[0].nvmlReturn, NVML_SUCCESS);
    assert_int_equal(fv[0].value.uiVal, 18);
    /* A counter growing at the fixture's rate (KiB/s). */
    unsigned long long tx1 = nvlink_field(d, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, UINT_MAX, 0);
    double t1 = mono();
    sleep_ms(200);
    unsigned long long tx2 = nvlink_field(d, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, UINT_MAX, 0);
    double dt = mono() - t1;
    const double rate = 182340.5 * 1024; /* KiB/s, the GPM rate's */
    assert_in_range(tx2 - tx1, (unsigned long long)(rate * (dt - 0.02)),
                    (unsigned long long)(rate * (dt + 0.02)));
    /* Raw counts the protocol's overhead too; one link an even share of all. */
    unsigned long long raw = nvlink_field(d, NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_RX, UINT_MAX, 0);
    unsigned long long rx = nvlink_field(d, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, UINT_MAX, 0);
    assert_true(raw > rx);
    unsigned long long l3 = nvlink_field(d, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, 3, 0);
    assert_in_range(l3, rx / 18 - rx / 1000, rx / 18 + rx / 1000);
    nvlink_field(d, NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_RX, 18, NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);

    /* No NVLink on a GeForce; a link past the GPU's last is not there. */
    assert_int_equal(init_with(fixture("consumer-1gpu.json")), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetFieldValues(handle(0), 2, fv), NVML_SUCCESS);
    assert_int_equal(fv[0].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(fv[1].nvmlReturn, NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
    const char *path = write_fixture(
        "nvlink.json", "{\"gpus\": [" GPU_JSON("0", "\"nvlink\": {\"links\": 4, \"data_tx_kibps\": "
                                                    "4000, \"data_rx_kibps\": 0}") "]}");
    assert_int_equal(init_with(path), NVML_SUCCESS);
    nvlink_field(handle(0), NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 3, NVML_SUCCESS);
    nvlink_field(handle(0), NVML_FI_DEV_NVLINK_THROUGHPUT_DATA_TX, 4, NVML_ERROR_NOT_SUPPORTED);
    /* Without raw rates, raw counts what data does. */
    assert_true(nvlink_field(handle(0), NVML_FI_DEV_NVLINK_THROUGHPUT_RAW_TX, UINT_MAX, 0) > 0);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

static void test_virtualization_mode(void **state)
{
    nvmlGpuVirtualizationMode_t m = -1;
    nvmlDevice_t mig;
    assert_int_equal(init_with(fixture("dgx-8gpu-mig.json")), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetVirtualizationMode(handle(0), &m), NVML_SUCCESS);
    assert_int_equal(m, NVML_GPU_VIRTUALIZATION_MODE_NONE);
    assert_int_equal(api.nvmlDeviceGetVirtualizationMode(handle(0), NULL),
                     NVML_ERROR_INVALID_ARGUMENT);
    assert_int_equal(api.nvmlDeviceGetMigDeviceHandleByIndex(handle(3), 0, &mig), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetVirtualizationMode(mig, &m), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(init_with(fixture("consumer-1gpu.json")), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetVirtualizationMode(handle(0), &m), NVML_ERROR_NOT_SUPPORTED);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
    const char *path = write_fixture(
        "vgpu.json", "{\"gpus\": [" GPU_JSON("0", "\"virtualization_mode\": \"VGPU\"") "]}");
    assert_int_equal(init_with(path), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetVirtualizationMode(handle(0), &m), NVML_SUCCESS);
    assert_int_equal(m, NVML_GPU_VIRTUALIZATION_MODE_VGPU);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

/* The new keys are checked like the old ones. */
static void test_gpm_fixture_errors(void **state)
{
    static const char *const bodies[][2] = {
        {"\"gpm\": {\"supported\": true, \"metrics\": {\"sm_utll\": 5}}", "sm_utll"},
        {"\"gpm\": {\"metrics\": {}}", "supported"},
        {"\"gpm\": {\"supported\": true, \"metrics\": {\"sm_util\": \"high\"}}", "sm_util"},
        {"\"nvlink\": {\"links\": 0, \"data_tx_kibps\": 1, \"data_rx_kibps\": 1}", "links"},
        {"\"nvlink\": {\"links\": 4}", "data_tx_kibps"},
        {"\"virtualization_mode\": \"BARE\"", "virtualization_mode"},
        {"\"mig\": {\"enabled\": true, \"instances\": [{\"gi\": 1, \"ci\": 0, \"profile_id\": 19, "
         "\"uuid\": \"MIG-1\", \"gpm_metrics\": {\"tensor\": 1}}]}, \"mig_profiles\": [{\"index\": "
         "0, \"id\": 19, \"name\": \"MIG 1g.10gb\", \"slices\": 1, \"memory_mb\": 9984}]",
         "tensor"},
    };
    for (size_t i = 0; i < ELEMENTSOF(bodies); i++) {
        nvmlReturn_t r;
        const char *bad =
            write_fixture("bad-gpm.json", "{\"gpus\": [" GPU_JSON("0", "%s") "]}", bodies[i][0]);
        const char *err = capture_stderr(init_with, bad, &r);
        assert_int_equal(r, NVML_ERROR_DRIVER_NOT_LOADED);
        if (!strstr(err, bodies[i][1]))
            fail_msg("%s: %s", bodies[i][0], err);
    }
}

/* dgx-8gpu-7mig.json: 56 MIG devices, each with its GPM values. */
static void test_dgx_7mig(void **state)
{
    static nvmlGpmMetricsGet_t mg;
    unsigned n, id, procs = 0;
    nvmlDevice_t mig;
    nvmlGpmSample_t a, b;
    const unsigned sm = NVML_GPM_METRIC_SM_UTIL;
    assert_int_equal(init_with(fixture("dgx-8gpu-7mig.json")), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    assert_int_equal(n, 8);
    assert_int_equal(api.nvmlGpmSampleAlloc(&a), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleAlloc(&b), NVML_SUCCESS);
    for (unsigned i = 0; i < 8; i++) {
        nvmlDevice_t d = handle(i);
        for (unsigned k = 0; k < 7; k++) {
            assert_int_equal(api.nvmlDeviceGetMigDeviceHandleByIndex(d, k, &mig), NVML_SUCCESS);
            assert_int_equal(api.nvmlDeviceGetGpuInstanceId(mig, &id), NVML_SUCCESS);
            assert_int_equal(id, 7 + k);
            assert_int_equal(api.nvmlGpmMigSampleGet(d, id, a), NVML_SUCCESS);
            assert_int_equal(api.nvmlGpmMigSampleGet(d, id, b), NVML_SUCCESS);
            assert_int_equal(metrics_get(&mg, a, b, &sm, 1), NVML_SUCCESS);
            assert_int_equal(mg.metrics[0].nvmlReturn, NVML_SUCCESS);
            assert_true(mg.metrics[0].value >= 0 && mg.metrics[0].value <= 100);
        }
        assert_int_equal(api.nvmlDeviceGetMigDeviceHandleByIndex(d, 7, &mig), NVML_ERROR_NOT_FOUND);
        unsigned count = 0;
        assert_int_equal(api.nvmlDeviceGetComputeRunningProcesses_v3(d, &count, NULL),
                         NVML_ERROR_INSUFFICIENT_SIZE);
        procs += count;
    }
    assert_in_range(procs, 8, 55); /* in some instances, not all */
    assert_int_equal(api.nvmlGpmSampleFree(a), NVML_SUCCESS);
    assert_int_equal(api.nvmlGpmSampleFree(b), NVML_SUCCESS);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

/* --- scenarios in a fresh process --- */

static void run_child(const char *scenario)
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl("/proc/self/exe", "test-fake-nvml", scenario, (char *)NULL);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_child_dgx_events(void **state)
{
    run_child("dgx-events");
}

static void test_child_gpu_lost(void **state)
{
    run_child("gpu-lost");
}

static void test_child_old(void **state)
{
    run_child("old");
}

/* dgx-8gpu-mig.json's XIDs arrive at 1 s and 2 s after init, in order, once. */
static void scenario_dgx_events(void **state)
{
    nvmlEventSet_t set;
    nvmlEventData_t ev;
    assert_int_equal(init_with(fixture("dgx-8gpu-mig.json")), NVML_SUCCESS);
    assert_int_equal(api.nvmlEventSetCreate(&set), NVML_SUCCESS);
    for (unsigned i = 0; i < 8; i++)
        assert_int_equal(
            api.nvmlDeviceRegisterEvents(handle(i), nvmlEventTypeXidCriticalError, set),
            NVML_SUCCESS);
    assert_int_equal(api.nvmlEventSetWait_v2(set, &ev, 50), NVML_ERROR_TIMEOUT);
    assert_int_equal(api.nvmlEventSetWait_v2(set, &ev, 5000), NVML_SUCCESS);
    assert_true(since_init() >= 0.95);
    assert_ptr_equal(ev.device, handle(5));
    assert_int_equal(ev.eventData, 13);
    assert_int_equal(api.nvmlEventSetWait_v2(set, &ev, 5000), NVML_SUCCESS);
    assert_true(since_init() >= 1.95);
    assert_ptr_equal(ev.device, handle(6));
    assert_int_equal(ev.eventData, 48);
    assert_int_equal(api.nvmlEventSetWait_v2(set, &ev, 100), NVML_ERROR_TIMEOUT);
    assert_int_equal(api.nvmlEventSetFree(set), NVML_SUCCESS);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

/* gpu-lost.json: GPU 1 works, then falls off the bus at 3 s with an XID 79. */
static void scenario_gpu_lost(void **state)
{
    nvmlEventSet_t set;
    nvmlEventData_t ev;
    char buf[96];
    unsigned n;
    assert_int_equal(init_with(fixture("gpu-lost.json")), NVML_SUCCESS);
    nvmlDevice_t g1 = handle(1), tmp;
    assert_int_equal(api.nvmlDeviceGetName(g1, buf, sizeof(buf)), NVML_SUCCESS);
    assert_string_equal(buf, "NVIDIA A100-SXM4-80GB");
    assert_int_equal(api.nvmlEventSetCreate(&set), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceRegisterEvents(handle(0), nvmlEventTypeXidCriticalError, set),
                     NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceRegisterEvents(g1, nvmlEventTypeXidCriticalError, set),
                     NVML_SUCCESS);
    assert_int_equal(api.nvmlEventSetWait_v2(set, &ev, 6000), NVML_SUCCESS);
    assert_true(since_init() >= 2.95);
    assert_ptr_equal(ev.device, g1);
    assert_int_equal(ev.eventData, 79);
    assert_int_equal(api.nvmlDeviceGetName(g1, buf, sizeof(buf)), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(api.nvmlDeviceGetHandleByIndex_v2(1, &tmp), NVML_ERROR_GPU_IS_LOST);
    assert_int_equal(api.nvmlDeviceGetCount_v2(&n), NVML_SUCCESS);
    assert_int_equal(n, 2);
    assert_int_equal(api.nvmlDeviceGetName(handle(0), buf, sizeof(buf)), NVML_SUCCESS);
    assert_int_equal(api.nvmlEventSetFree(set), NVML_SUCCESS);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

/* The old driver lacks exactly the fourteen newer entry points (eight telemetry calls, six of
 * GPM) and still works. */
static void scenario_old(void **state)
{
    unsigned t;
    unsigned long long reasons;
    nvmlGpuVirtualizationMode_t mode;
    assert_null(api.nvmlGpmQueryDeviceSupport);
    assert_null(api.nvmlGpmSampleAlloc);
    assert_null(api.nvmlGpmSampleFree);
    assert_null(api.nvmlGpmSampleGet);
    assert_null(api.nvmlGpmMigSampleGet);
    assert_null(api.nvmlGpmMetricsGet);
    assert_null(api.nvmlDeviceGetFieldValues);
    assert_null(api.nvmlDeviceGetCurrentClocksEventReasons);
    assert_null(api.nvmlDeviceGetRemappedRows);
    assert_null(api.nvmlDeviceGetComputeRunningProcesses_v3);
    assert_null(api.nvmlDeviceGetGraphicsRunningProcesses_v3);
    assert_null(api.nvmlDeviceGetGpuInstanceProfileInfoV);
    assert_null(api.nvmlSystemGetCudaDriverVersion_v2);
    assert_null(api.nvmlDeviceGetMemoryInfo_v2);
    int present = 0;
#define COUNT_SYM(name, ret, params) present += api.name != NULL;
    NVML_API_FUNCTIONS(COUNT_SYM)
#undef COUNT_SYM
    int all = 0;
#define COUNT_ALL(name, ret, params) all++;
    NVML_API_FUNCTIONS(COUNT_ALL)
#undef COUNT_ALL
    assert_int_equal(present, all - 14);
    assert_int_equal(init_with(fixture("consumer-1gpu.json")), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetTemperature(handle(0), NVML_TEMPERATURE_GPU, &t),
                     NVML_SUCCESS);
    assert_int_equal(t, 64);
    assert_int_equal(api.nvmlDeviceGetCurrentClocksThrottleReasons(handle(0), &reasons),
                     NVML_SUCCESS);
    assert_int_equal(reasons, nvmlClocksEventReasonSwPowerCap);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
    assert_int_equal(init_with(fixture("dgx-8gpu-mig.json")), NVML_SUCCESS);
    assert_int_equal(api.nvmlDeviceGetVirtualizationMode(handle(0), &mode), NVML_SUCCESS);
    assert_int_equal(api.nvmlShutdown(), NVML_SUCCESS);
}

static int cleanup_tmpdir(void **state)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf -- '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 1;
    }
    if (argc > 1) {
        const struct CMUnitTest *t;
        static const struct CMUnitTest events[] = {cmocka_unit_test(scenario_dgx_events)};
        static const struct CMUnitTest lost[] = {cmocka_unit_test(scenario_gpu_lost)};
        static const struct CMUnitTest old[] = {cmocka_unit_test(scenario_old)};
        load_api(strcmp(argv[1], "old") == 0 ? "FAKE_NVML_OLD_LIBRARY" : "FAKE_NVML_LIBRARY");
        t = strcmp(argv[1], "dgx-events") == 0 ? events
            : strcmp(argv[1], "gpu-lost") == 0 ? lost
                                               : old;
        return _cmocka_run_group_tests(argv[1], t, 1, NULL, cleanup_tmpdir);
    }
    load_api("FAKE_NVML_LIBRARY");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exports_every_entry_point),
        cmocka_unit_test(test_uninitialized),
        cmocka_unit_test(test_error_strings),
        cmocka_unit_test(test_init_failures),
        cmocka_unit_test(test_refcount),
        cmocka_unit_test(test_consumer_identity),
        cmocka_unit_test(test_consumer_telemetry),
        cmocka_unit_test(test_consumer_processes),
        cmocka_unit_test(test_insufficient_size),
        cmocka_unit_test(test_invalid_arguments),
        cmocka_unit_test(test_dgx_datacentre),
        cmocka_unit_test(test_dgx_mig),
        cmocka_unit_test(test_dgx_gpu_instances),
        cmocka_unit_test(test_dgx_mig_processes),
        cmocka_unit_test(test_memory_reserved),
        cmocka_unit_test(test_max_calls),
        cmocka_unit_test(test_energy_grows),
        cmocka_unit_test(test_events),
        cmocka_unit_test(test_events_per_set),
        cmocka_unit_test(test_reread),
        cmocka_unit_test(test_lost_mig),
        cmocka_unit_test(test_errors_and_delay),
        cmocka_unit_test(test_forced_on_gpu),
        cmocka_unit_test(test_threads),
        cmocka_unit_test(test_gpm_support_and_samples),
        cmocka_unit_test(test_gpm_metrics),
        cmocka_unit_test(test_gpm_errors),
        cmocka_unit_test(test_nvlink_counters),
        cmocka_unit_test(test_virtualization_mode),
        cmocka_unit_test(test_gpm_fixture_errors),
        cmocka_unit_test(test_dgx_7mig),
        cmocka_unit_test(test_child_dgx_events),
        cmocka_unit_test(test_child_gpu_lost),
        cmocka_unit_test(test_child_old),
    };
    return cmocka_run_group_tests(tests, NULL, cleanup_tmpdir);
}
