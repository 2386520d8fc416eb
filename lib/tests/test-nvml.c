/* Tests for lib/nvml.c: loading NVML, what each way of failing reports, error mapping.
 *
 * Runs against the fake libnvidia-ml.so.1 of tests/fake-nvml (FAKE_NVML_LIB, FAKE_NVML_OLD_LIB),
 * each test with a fixture of its own written to a temp dir and named by FAKE_NVML_FIXTURE. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake-nvml-env.h"
#include "lib/nvml.h"

static const char one_gpu[] = "{\"driver_version\": \"580.95.05\", \"cuda_version\": \"13.0\","
                              " \"gpus\": [{\"name\": \"NVIDIA H200\","
                              " \"uuid\": \"GPU-11111111-2222-3333-4444-555555555555\","
                              " \"pci_bus_id\": \"00000000:07:00.0\"}]}";

static void test_no_library(void **state)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/nothing-here/libnvidia-ml.so.1", fake_env_dir());
    struct errmsg e = {""};
    struct nvml *n = NULL;
    assert_int_equal(nvml_open(path, &n, &e), -ENOENT);
    assert_null(n);
    /* The path once, then the loader's reason, so a user reads that no driver is there. */
    char want[256];
    snprintf(want, sizeof(want), "%s: cannot open shared object file: No such file or directory",
             path);
    assert_string_equal(e.text, want);
}

static void test_not_nvml(void **state)
{
    /* libc is a real shared library without any NVML entry point. */
    struct errmsg e = {""};
    struct nvml *n = NULL;
    assert_int_equal(nvml_open("libc.so.6", &n, &e), -ENOSYS);
    assert_null(n);
    assert_non_null(strstr(e.text, "libc.so.6"));
    assert_non_null(strstr(e.text, "'nvmlInit_v2'"));
}

static void test_driver_not_loaded(void **state)
{
    fake_env_fixture("{\"init_error\": \"DRIVER_NOT_LOADED\"}");
    struct errmsg e = {""};
    struct nvml *n = NULL;
    assert_int_equal(nvml_open(fake_env_get("FAKE_NVML_LIB"), &n, &e), -ENODEV);
    assert_null(n);
    assert_string_equal(e.text, "nvmlInit_v2: Driver Not Loaded");

    fake_env_fixture("{\"init_error\": \"NO_PERMISSION\"}");
    assert_int_equal(nvml_open(fake_env_get("FAKE_NVML_LIB"), &n, &e), -ENODEV);
    assert_string_equal(e.text, "nvmlInit_v2: Insufficient Permissions");
}

static void test_open_full_table(void **state)
{
    fake_env_fixture(one_gpu);
    struct errmsg e = {""};
    _cleanup_(nvml_closep) struct nvml *n = NULL;
    assert_int_equal(nvml_open(fake_env_get("FAKE_NVML_LIB"), &n, &e), 0);
    assert_non_null(n);
    const struct nvml_api *a = nvml_api(n);
    /* The current fake has every entry point of the list. */
#define CHECK_PRESENT(name, ret, params) assert_non_null(a->name);
    NVML_API_FUNCTIONS(CHECK_PRESENT)
#undef CHECK_PRESENT
    unsigned count = 0;
    assert_int_equal(a->nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
    assert_int_equal(count, 1);
    assert_string_equal(nvml_error_string(n, NVML_ERROR_GPU_IS_LOST), "GPU is lost");
}

static void test_close_shuts_down(void **state)
{
    /* After nvml_close a new open initialises again and reads the fixture afresh. */
    fake_env_fixture(one_gpu);
    struct nvml *n = NULL;
    assert_int_equal(nvml_open(fake_env_get("FAKE_NVML_LIB"), &n, NULL), 0);
    nvml_close(n);
    fake_env_fixture("{\"gpus\": []}");
    assert_int_equal(nvml_open(fake_env_get("FAKE_NVML_LIB"), &n, NULL), 0);
    unsigned count = 99;
    assert_int_equal(nvml_api(n)->nvmlDeviceGetCount_v2(&count), NVML_SUCCESS);
    assert_int_equal(count, 0);
    nvml_close(n);
    nvml_close(NULL);
}

static void test_old_driver_optional_null(void **state)
{
    fake_env_fixture(one_gpu);
    struct errmsg e = {""};
    _cleanup_(nvml_closep) struct nvml *n = NULL;
    assert_int_equal(nvml_open(fake_env_get("FAKE_NVML_OLD_LIB"), &n, &e), 0);
    const struct nvml_api *a = nvml_api(n);
    /* What drivers before ~535 lack is NULL; the rest is there. */
    assert_null(a->nvmlDeviceGetGpuInstanceProfileInfoV);
    assert_null(a->nvmlSystemGetCudaDriverVersion_v2);
    assert_null(a->nvmlDeviceGetFieldValues);
    assert_null(a->nvmlDeviceGetComputeRunningProcesses_v3);
    assert_non_null(a->nvmlInit_v2);
    assert_non_null(a->nvmlDeviceGetHandleByIndex_v2);
    assert_non_null(a->nvmlDeviceGetUUID);
    assert_non_null(a->nvmlDeviceGetAttributes_v2);
    assert_non_null(a->nvmlDeviceGetMigMode);
}

static void test_errno_mapping(void **state)
{
    static const struct {
        nvmlReturn_t r;
        int err;
    } cases[] = {
        {NVML_SUCCESS, 0},
        {NVML_ERROR_NOT_SUPPORTED, -EOPNOTSUPP},
        {NVML_ERROR_FUNCTION_NOT_FOUND, -EOPNOTSUPP},
        {NVML_ERROR_GPU_IS_LOST, -ENODEV},
        {NVML_ERROR_GPU_NOT_FOUND, -ENODEV},
        {NVML_ERROR_NO_PERMISSION, -EACCES},
        {NVML_ERROR_NOT_FOUND, -ENOENT},
        {NVML_ERROR_INSUFFICIENT_SIZE, -ENOBUFS},
        {NVML_ERROR_TIMEOUT, -ETIMEDOUT},
        {NVML_ERROR_DRIVER_NOT_LOADED, -ENXIO},
        {NVML_ERROR_UNINITIALIZED, -EPIPE},
        {NVML_ERROR_INVALID_ARGUMENT, -EIO},
        {NVML_ERROR_RESET_REQUIRED, -ENODEV},
        {NVML_ERROR_UNKNOWN, -EIO},
        {12345, -EIO},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++)
        assert_int_equal(nvml_errno(cases[i].r), cases[i].err);
}

static void test_error_strings_without_library(void **state)
{
    assert_string_equal(nvml_error_string(NULL, NVML_ERROR_GPU_IS_LOST), "GPU is lost");
    assert_string_equal(nvml_error_string(NULL, NVML_ERROR_DRIVER_NOT_LOADED), "Driver Not Loaded");
    assert_string_equal(nvml_error_string(NULL, 777), "Unknown Error");
    assert_string_equal(nvml_error_string(NULL, -3), "Unknown Error");
}

static void test_fail_message(void **state)
{
    struct errmsg e = {""};
    assert_int_equal(nvml_fail(NULL, &e, "nvmlDeviceGetUUID", NVML_ERROR_GPU_IS_LOST), -ENODEV);
    assert_string_equal(e.text, "nvmlDeviceGetUUID: GPU is lost");
    assert_int_equal(nvml_fail(NULL, NULL, "x", NVML_ERROR_TIMEOUT), -ETIMEDOUT);
    /* Success is no failure: 0 and the message untouched. */
    assert_int_equal(nvml_fail(NULL, &e, "nvmlDeviceGetName", NVML_SUCCESS), 0);
    assert_string_equal(e.text, "nvmlDeviceGetUUID: GPU is lost");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_library),
        cmocka_unit_test(test_not_nvml),
        cmocka_unit_test(test_driver_not_loaded),
        cmocka_unit_test(test_open_full_table),
        cmocka_unit_test(test_close_shuts_down),
        cmocka_unit_test(test_old_driver_optional_null),
        cmocka_unit_test(test_errno_mapping),
        cmocka_unit_test(test_error_strings_without_library),
        cmocka_unit_test(test_fail_message),
    };
    return cmocka_run_group_tests(tests, fake_env_setup, fake_env_teardown);
}
