/* The GPM reader against the fake NVML (FAKE_NVML_LIB, FAKE_NVML_OLD_LIB) with the shipped
 * fixtures (FAKE_NVML_FIXTURES) and a few written for the odd cases. The expected numbers are
 * the fixtures' GPM values in dcgm-exporter's units: percent / 100, MiB/s * 2^20. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpm.h"
#include "lib/nvml.h"

#define MIB 1048576.0

static char dir[] = "/tmp/test-gpm-XXXXXX";

/* NVML from the library named by env, on the fixture at path. */
static struct nvml *open_nvml(const char *env, const char *path)
{
    struct nvml *n = NULL;
    struct errmsg e = {""};
    setenv("FAKE_NVML_FIXTURE", path, 1);
    int r = nvml_open(getenv(env), &n, &e);
    if (r < 0)
        fail_msg("nvml_open: %s", e.text);
    return n;
}

static const char *shipped(const char *name)
{
    static char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", getenv("FAKE_NVML_FIXTURES"), name);
    return path;
}

/* Writes a fixture of GPUs (JSON objects, comma-separated) into the test's folder. */
static const char *written(const char *name, const char *gpus)
{
    static char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    fprintf(f, "{\"driver_version\": \"580.95.05\", \"gpus\": [%s]}\n", gpus);
    assert_int_equal(fclose(f), 0);
    return path;
}

/* An H100 with the given extra members (starting with a comma). */
#define H100(n, extra)                                                                             \
    "{\"name\": \"NVIDIA H100 80GB HBM3\", \"uuid\": \"GPU-00000000-0000-0000-0000-00000000000" n  \
    "\", \"pci_bus_id\": \"00000000:0" n ":00.0\"" extra "}"

static nvmlDevice_t gpu(struct nvml *n, unsigned index)
{
    nvmlDevice_t d = NULL;
    assert_int_equal(nvml_api(n)->nvmlDeviceGetHandleByIndex_v2(index, &d), NVML_SUCCESS);
    return d;
}

static struct gpm *new_ok(struct nvml *n, nvmlDevice_t dev, unsigned gi)
{
    struct gpm *g = NULL;
    struct errmsg e = {""};
    int r = gpm_new(nvml_api(n), dev, gi, &g, &e);
    if (r < 0)
        fail_msg("gpm_new: %s", e.text);
    assert_non_null(g);
    return g;
}

/* The first read only takes a sample; returns what the second one set. */
static struct gpu_values two_reads(struct gpm *g)
{
    struct gpu_values v = {0};
    struct errmsg e = {""};
    assert_int_equal(gpm_read(g, &v, &e), 0);
    assert_int_equal(v.have, 0);
    if (gpm_read(g, &v, &e) < 0)
        fail_msg("gpm_read: %s", e.text);
    return v;
}

static void expect(const struct gpu_values *v, enum gpu_field f, double want)
{
    if (!gpu_values_has(v, f))
        fail_msg("field %d is not set (want %g)", (int)f, want);
    assert_float_equal(v->v[f], want, 1e-9 * (want > 1 ? want : 1));
}

/* A Hopper GPU: every profiling field, converted. */
static void test_whole_gpu(void **state)
{
    _cleanup_(nvml_closep) struct nvml *n =
        open_nvml("FAKE_NVML_LIB", shipped("dgx-8gpu-mig.json"));
    _cleanup_(gpm_freep) struct gpm *g = new_ok(n, gpu(n, 0), NVML_INSTANCE_ID_NONE);
    struct gpu_values v = two_reads(g);
    expect(&v, GF_PROF_GR_ENGINE_ACTIVE, 0.973);
    expect(&v, GF_PROF_SM_ACTIVE, 0.912);
    expect(&v, GF_PROF_SM_OCCUPANCY, 0.468);
    expect(&v, GF_PROF_PIPE_INT_ACTIVE, 0.074);
    expect(&v, GF_PROF_PIPE_TENSOR_ACTIVE, 0.625);
    expect(&v, GF_PROF_PIPE_TENSOR_DFMA_ACTIVE, 0.0);
    expect(&v, GF_PROF_PIPE_TENSOR_HMMA_ACTIVE, 0.619);
    expect(&v, GF_PROF_PIPE_TENSOR_IMMA_ACTIVE, 0.006);
    expect(&v, GF_PROF_DRAM_ACTIVE, 0.714);
    expect(&v, GF_PROF_PIPE_FP64_ACTIVE, 0.0);
    expect(&v, GF_PROF_PIPE_FP32_ACTIVE, 0.183);
    expect(&v, GF_PROF_PIPE_FP16_ACTIVE, 0.041);
    expect(&v, GF_PROF_PCIE_TX_BYTES, 1171.9 * MIB);
    expect(&v, GF_PROF_PCIE_RX_BYTES, 4687.5 * MIB);
    expect(&v, GF_PROF_NVLINK_TX_BYTES, 182340.5 * MIB);
    expect(&v, GF_PROF_NVLINK_RX_BYTES, 181902.25 * MIB);
    /* Only profiling fields. */
    assert_false(gpu_values_has(&v, GF_GPU_UTIL));

    /* Each further read measures from the one before. */
    struct gpu_values w = {0};
    struct errmsg e = {""};
    assert_int_equal(gpm_read(g, &w, &e), 0);
    assert_int_equal(w.have, v.have);
}

/* A MIG GPU instance, read through its parent; no interconnect rates, as in DCGM. */
static void test_mig_instance(void **state)
{
    _cleanup_(nvml_closep) struct nvml *n =
        open_nvml("FAKE_NVML_LIB", shipped("dgx-8gpu-mig.json"));
    _cleanup_(gpm_freep) struct gpm *g = new_ok(n, gpu(n, 3), 9);
    struct gpu_values v = two_reads(g);
    expect(&v, GF_PROF_GR_ENGINE_ACTIVE, 0.41);
    expect(&v, GF_PROF_SM_ACTIVE, 0.362);
    expect(&v, GF_PROF_PIPE_TENSOR_HMMA_ACTIVE, 0.201);
    expect(&v, GF_PROF_DRAM_ACTIVE, 0.336);
    assert_false(gpu_values_has(&v, GF_PROF_PCIE_TX_BYTES));
    assert_false(gpu_values_has(&v, GF_PROF_NVLINK_RX_BYTES));

    /* The parent in MIG mode still has its whole-GPU metrics. */
    _cleanup_(gpm_freep) struct gpm *whole = new_ok(n, gpu(n, 3), NVML_INSTANCE_ID_NONE);
    v = two_reads(whole);
    expect(&v, GF_PROF_SM_ACTIVE, 0.279);
    expect(&v, GF_PROF_PCIE_RX_BYTES, 1.2 * MIB);
}

/* Even where the driver gives an instance interconnect rates, they are left out, as DCGM does:
 * PCIe and NVLink belong to the whole GPU. */
#define MIG_WITH_RATES                                                                             \
    H100("0", ", \"gpm\": {\"supported\": true}, \"mig\": {\"enabled\": true, \"instances\": "     \
              "[{\"gi\": 7, \"ci\": 0, \"profile_id\": 19, \"uuid\": \"MIG-7\", \"gpm_metrics\": " \
              "{\"sm_util\": 20, \"pcie_tx_per_sec\": 100, \"nvlink_total_rx_per_sec\": 200}}]}, " \
              "\"mig_profiles\": [{\"index\": 0, \"id\": 19, \"name\": \"MIG 1g.10gb\", "          \
              "\"slices\": 1, \"memory_mb\": 9984}]")

static void test_mig_no_interconnect(void **state)
{
    _cleanup_(nvml_closep) struct nvml *n =
        open_nvml("FAKE_NVML_LIB", written("mig-rates.json", MIG_WITH_RATES));
    _cleanup_(gpm_freep) struct gpm *g = new_ok(n, gpu(n, 0), 7);
    struct gpu_values v = two_reads(g);
    expect(&v, GF_PROF_SM_ACTIVE, 0.2);
    assert_int_equal(v.have, UINT64_C(1) << GF_PROF_SM_ACTIVE);
}

/* An instance id the GPU does not have, and a GPU not in MIG mode: the read fails. */
static void test_mig_instance_missing(void **state)
{
    _cleanup_(nvml_closep) struct nvml *n =
        open_nvml("FAKE_NVML_LIB", shipped("dgx-8gpu-mig.json"));
    struct gpu_values v = {0};
    struct errmsg e = {""};
    _cleanup_(gpm_freep) struct gpm *g = new_ok(n, gpu(n, 3), 5);
    assert_int_equal(gpm_read(g, &v, &e), -ENOENT);
    assert_string_equal(e.text, "nvmlGpmMigSampleGet (GPU instance 5): Not Found");
    _cleanup_(gpm_freep) struct gpm *h = new_ok(n, gpu(n, 0), 2);
    assert_int_equal(gpm_read(h, &v, &e), -EIO);
    assert_int_equal(v.have, 0);
}

static void expect_unsupported(const char *lib, const char *fixture, const char *why)
{
    _cleanup_(nvml_closep) struct nvml *n = open_nvml(lib, fixture);
    struct gpm *g = NULL;
    struct errmsg e = {""};
    assert_int_equal(gpm_new(nvml_api(n), gpu(n, 0), NVML_INSTANCE_ID_NONE, &g, &e), -EOPNOTSUPP);
    assert_null(g);
    assert_string_equal(e.text, why);
}

static void test_unsupported(void **state)
{
    const char *gpu_lacks = "GPM is not supported on this GPU (Hopper or newer needed)";
    expect_unsupported("FAKE_NVML_LIB", shipped("consumer-1gpu.json"), gpu_lacks); /* Ada */
    expect_unsupported("FAKE_NVML_LIB", shipped("gpu-lost.json"), gpu_lacks);      /* Ampere */
    /* A Hopper GPU on a driver before GPM. */
    expect_unsupported("FAKE_NVML_OLD_LIB", shipped("dgx-8gpu-mig.json"),
                       "this NVML has no GPM API (driver R525 or newer needed)");
}

/* Values a confused driver might give: float noise is rounded into range, the rest left out. */
static void test_odd_values(void **state)
{
    const char *path = written(
        "odd.json",
        H100("0", ", \"gpm\": {\"supported\": true, \"metrics\": {\"graphics_util\": "
                  "100.0000000001, \"dram_bw_util\": -1e-9, \"sm_util\": -0.5, \"sm_occupancy\": "
                  "150, \"pcie_tx_per_sec\": -3, \"pcie_rx_per_sec\": 1e7, \"fp32_util\": 55}}"));
    _cleanup_(nvml_closep) struct nvml *n = open_nvml("FAKE_NVML_LIB", path);
    _cleanup_(gpm_freep) struct gpm *g = new_ok(n, gpu(n, 0), NVML_INSTANCE_ID_NONE);
    struct gpu_values v = two_reads(g);
    expect(&v, GF_PROF_GR_ENGINE_ACTIVE, 1.0);
    expect(&v, GF_PROF_DRAM_ACTIVE, 0.0);
    expect(&v, GF_PROF_PIPE_FP32_ACTIVE, 0.55);
    expect(&v, GF_PROF_PCIE_RX_BYTES, 1e7 * MIB); /* rates have no upper bound */
    assert_false(gpu_values_has(&v, GF_PROF_SM_ACTIVE));
    assert_false(gpu_values_has(&v, GF_PROF_SM_OCCUPANCY));
    assert_false(gpu_values_has(&v, GF_PROF_PCIE_TX_BYTES));
    /* Metrics the GPU does not report. */
    assert_false(gpu_values_has(&v, GF_PROF_PIPE_FP64_ACTIVE));
    assert_false(gpu_values_has(&v, GF_PROF_NVLINK_TX_BYTES));
}

/* GPUs whose driver fails: in nvmlGpmMetricsGet, from the third nvmlGpmSampleGet on, and in the
 * support query. */
#define SM_50 ", \"gpm\": {\"supported\": true, \"metrics\": {\"sm_util\": 50}}"
#define FAILING_GPUS                                                                               \
    H100("0", SM_50 ", \"errors\": {\"nvmlGpmMetricsGet\": \"UNKNOWN\"}")                          \
    "," H100("1", SM_50 ", \"max_calls\": {\"nvmlGpmSampleGet\": 2}") "," H100(                    \
        "2", SM_50 ", \"errors\": {\"nvmlGpmQueryDeviceSupport\": \"GPU_IS_LOST\"}")

/* The driver fails: an error with NVML's text, and nothing set. */
static void test_driver_fails(void **state)
{
    _cleanup_(nvml_closep) struct nvml *n =
        open_nvml("FAKE_NVML_LIB", written("fails.json", FAILING_GPUS));
    struct gpu_values v = {0};
    struct errmsg e = {""};

    _cleanup_(gpm_freep) struct gpm *g0 = new_ok(n, gpu(n, 0), NVML_INSTANCE_ID_NONE);
    assert_int_equal(gpm_read(g0, &v, &e), 0);
    assert_int_equal(gpm_read(g0, &v, &e), -EIO);
    assert_string_equal(e.text, "nvmlGpmMetricsGet: Unknown Error");
    assert_int_equal(v.have, 0);

    _cleanup_(gpm_freep) struct gpm *g1 = new_ok(n, gpu(n, 1), NVML_INSTANCE_ID_NONE);
    v = two_reads(g1);
    expect(&v, GF_PROF_SM_ACTIVE, 0.5);
    v = (struct gpu_values){0};
    assert_int_equal(gpm_read(g1, &v, &e), -EIO);
    assert_string_equal(e.text, "nvmlGpmSampleGet: Unknown Error");
    assert_int_equal(v.have, 0);

    struct gpm *g2 = NULL;
    assert_int_equal(gpm_new(nvml_api(n), gpu(n, 2), NVML_INSTANCE_ID_NONE, &g2, &e), -ENODEV);
    assert_null(g2);
    assert_string_equal(e.text, "nvmlGpmQueryDeviceSupport: GPU is lost");
}

static int cleanup(void **state)
{
    char path[PATH_MAX];
    const char *names[] = {"odd.json", "fails.json", "mig-rates.json"};
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        snprintf(path, sizeof(path), "%s/%s", dir, names[i]);
        unlink(path);
    }
    return rmdir(dir);
}

int main(void)
{
    if (!getenv("FAKE_NVML_LIB") || !getenv("FAKE_NVML_OLD_LIB") || !getenv("FAKE_NVML_FIXTURES")) {
        fprintf(stderr, "FAKE_NVML_LIB / FAKE_NVML_OLD_LIB / FAKE_NVML_FIXTURES are not set: run "
                        "through meson test\n");
        return 1;
    }
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_gpu),           cmocka_unit_test(test_mig_instance),
        cmocka_unit_test(test_mig_no_interconnect), cmocka_unit_test(test_mig_instance_missing),
        cmocka_unit_test(test_unsupported),         cmocka_unit_test(test_odd_values),
        cmocka_unit_test(test_driver_fails),
    };
    return cmocka_run_group_tests(tests, NULL, cleanup);
}
