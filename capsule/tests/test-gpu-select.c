/* Which GPUs a container gets: the order of the sources, the device list syntax, ids resolved
 * against a host's GPUs (built here, no NVML needed), and CUDA_VISIBLE_DEVICES inside. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "capsule/gpu/gpu-select.h"
#include "lib/strv.h"

static struct gpu_mig migs[2] = {
    {.index = 0, .gi_id = 1, .ci_id = 0, .profile = "3g.71gb", .uuid = "MIG-aaaa1111-0000-0000"},
    {.index = 1, .gi_id = 2, .ci_id = 0, .profile = "1g.18gb", .uuid = "MIG-bbbb2222-0000-0000"},
};
static struct gpu gpus[3] = {
    {.index = 0,
     .uuid = "GPU-00000000-1111",
     .name = "NVIDIA H200",
     .pci_bus_id = "00000000:19:00.0",
     .minor = 0,
     .has_minor = true},
    {.index = 1,
     .uuid = "GPU-11111111-2222",
     .name = "NVIDIA H200",
     .pci_bus_id = "00000000:3B:00.0",
     .minor = 1,
     .has_minor = true,
     .mig_enabled = true,
     .n_mig = 2,
     .mig = migs},
    {.index = 2, .error = -ENODEV, .uuid = "GPU-22222222-3333"},
};
static const struct gpu_list host = {
    .driver_version = "580.159.04", .cuda_version = 13000, .n = 3, .gpus = gpus};

static void test_source_order(void **state)
{
    char *host_env[] = {"CUDA_VISIBLE_DEVICES=2", "NVIDIA_VISIBLE_DEVICES=1", NULL};
    char *cuda_only[] = {"CUDA_VISIBLE_DEVICES=2", NULL};
    char *image_env[] = {"NVIDIA_VISIBLE_DEVICES=all", NULL};
    const char *v;
    assert_int_equal(gpu_source_pick("0", host_env, image_env, &v), GPU_SOURCE_FLAG);
    assert_string_equal(v, "0");
    assert_int_equal(gpu_source_pick(NULL, host_env, image_env, &v), GPU_SOURCE_HOST_NVIDIA);
    assert_string_equal(v, "1");
    assert_int_equal(gpu_source_pick(NULL, cuda_only, image_env, &v), GPU_SOURCE_HOST_CUDA);
    assert_string_equal(v, "2");
    assert_int_equal(gpu_source_pick(NULL, NULL, image_env, &v), GPU_SOURCE_IMAGE);
    assert_string_equal(v, "all");
    assert_int_equal(gpu_source_pick(NULL, NULL, NULL, &v), GPU_SOURCE_NONE);
    assert_string_equal(v, "");
}

static void parses(enum gpu_source s, const char *value, bool all, const char *ids)
{
    struct gpu_request r;
    struct errmsg e = {{0}};
    int rc = gpu_request_parse(s, value, &r, &e);
    if (rc != 0)
        fail_msg("'%s': %d %s", value, rc, e.text);
    assert_int_equal(r.all, all);
    char joined[256] = "";
    for (char **id = r.ids; *id; id++)
        snprintf(joined + strlen(joined), sizeof(joined) - strlen(joined), "%s%s",
                 id == r.ids ? "" : "|", *id);
    assert_string_equal(joined, ids);
    gpu_request_done(&r);
}

static void refused(enum gpu_source s, const char *value, const char *why)
{
    struct gpu_request r;
    struct errmsg e = {{0}};
    assert_int_equal(gpu_request_parse(s, value, &r, &e), -EINVAL);
    if (!strstr(e.text, why))
        fail_msg("'%s': message '%s' lacks '%s'", value, e.text, why);
}

static void test_request_parse(void **state)
{
    parses(GPU_SOURCE_FLAG, "all", true, "");
    parses(GPU_SOURCE_FLAG, " all\n", true, "");
    parses(GPU_SOURCE_FLAG, "none", false, "");
    parses(GPU_SOURCE_IMAGE, "void", false, "");
    parses(GPU_SOURCE_FLAG, "", false, "");
    parses(GPU_SOURCE_FLAG, " 0 , 1 ", false, "0|1");
    parses(GPU_SOURCE_FLAG, "1,0,1", false, "1|0");
    parses(GPU_SOURCE_HOST_NVIDIA, "GPU-11111111,MIG-GPU-1/1/0,00000000:19:00.0", false,
           "GPU-11111111|MIG-GPU-1/1/0|00000000:19:00.0");
    parses(GPU_SOURCE_HOST_CUDA, "-1", false, "");
    parses(GPU_SOURCE_HOST_CUDA, "NoDevFiles", false, "");
    refused(GPU_SOURCE_FLAG, "0,,1", "empty entry");
    refused(GPU_SOURCE_FLAG, "0,", "empty entry");
    refused(GPU_SOURCE_FLAG, "all,0", "'all' cannot be combined");
    refused(GPU_SOURCE_HOST_NVIDIA, "0,none", "NVIDIA_VISIBLE_DEVICES");
    refused(GPU_SOURCE_FLAG, "0 1", "'0 1' is not a GPU id");
    refused(GPU_SOURCE_FLAG, "\"0\"", "is not a GPU id");
    char longid[200];
    memset(longid, 'a', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    refused(GPU_SOURCE_FLAG, longid, "too long");
}

static void resolved(const char *value, const char *uuids)
{
    struct gpu_request r;
    struct errmsg e = {{0}};
    assert_int_equal(gpu_request_parse(GPU_SOURCE_FLAG, value, &r, &e), 0);
    struct gpu_pick *p;
    size_t n;
    int rc = gpu_select_resolve(&host, GPU_SOURCE_FLAG, &r, &p, &n, &e);
    gpu_request_done(&r);
    if (rc != 0)
        fail_msg("'%s': %d %s", value, rc, e.text);
    char joined[256] = "";
    for (size_t i = 0; i < n; i++)
        snprintf(joined + strlen(joined), sizeof(joined) - strlen(joined), "%s%s", i ? "|" : "",
                 gpu_pick_uuid(&p[i]));
    assert_string_equal(joined, uuids);
    free(p);
}

static int resolve_error(enum gpu_source s, const char *value, struct errmsg *e)
{
    struct gpu_request r;
    assert_int_equal(gpu_request_parse(s, value, &r, e), 0);
    struct gpu_pick *p = NULL;
    size_t n;
    int rc = gpu_select_resolve(&host, s, &r, &p, &n, e);
    gpu_request_done(&r);
    assert_null(p);
    return rc;
}

static void test_resolve(void **state)
{
    /* "all": the GPU that cannot be read is left out. */
    resolved("all", "GPU-00000000-1111|GPU-11111111-2222");
    resolved("1", "GPU-11111111-2222");
    resolved("0,GPU-00000000-1111", "GPU-00000000-1111");
    resolved("MIG-bbbb2222-0000-0000,1:0", "MIG-bbbb2222-0000-0000|MIG-aaaa1111-0000-0000");
    resolved("00000000:3B:00.0", "GPU-11111111-2222");
    struct errmsg e = {{0}};
    assert_int_equal(resolve_error(GPU_SOURCE_FLAG, "2", &e), -ENODEV);
    assert_non_null(strstr(e.text, "GPU 2 (GPU-22222222-3333) cannot be used"));
    assert_int_equal(resolve_error(GPU_SOURCE_HOST_CUDA, "3", &e), -ENOENT);
    assert_string_equal(e.text,
                        "CUDA_VISIBLE_DEVICES: no GPU '3' (see nvidia-smi -L); GPUs: "
                        "0 GPU-00000000-1111 (NVIDIA H200), 1 GPU-11111111-2222 (NVIDIA H200; "
                        "MIG-aaaa1111-0000-0000, MIG-bbbb2222-0000-0000), 2 GPU-22222222-3333 "
                        "(unreadable)");
    assert_int_equal(resolve_error(GPU_SOURCE_FLAG, "1:2", &e), -ENOENT);
    assert_int_equal(resolve_error(GPU_SOURCE_FLAG, "0:0", &e), -ENOENT);
    assert_int_equal(resolve_error(GPU_SOURCE_FLAG, "GPU-1", &e), -ENOENT); /* prefix too short */

    struct gpu_list none = {.n = 0};
    struct gpu_request r = {.all = false};
    assert_int_equal(gpu_request_parse(GPU_SOURCE_FLAG, "0", &r, &e), 0);
    struct gpu_pick *p;
    size_t n;
    assert_int_equal(gpu_select_resolve(&none, GPU_SOURCE_FLAG, &r, &p, &n, &e), -ENOENT);
    assert_non_null(strstr(e.text, "there are none on this host"));
    gpu_request_done(&r);
    r.all = true;
    r.ids = strv_new();
    assert_int_equal(gpu_select_resolve(&none, GPU_SOURCE_FLAG, &r, &p, &n, &e), 0);
    assert_int_equal(n, 0);
    free(p);
    gpu_request_done(&r);
}

static void cuda_visible(const char *held, const char *const *picked_ids, const char *want)
{
    struct gpu_pick picks[4];
    size_t n = 0;
    for (; picked_ids[n]; n++) {
        const struct gpu_mig *m;
        picks[n].gpu = gpu_list_find(&host, picked_ids[n], &m);
        picks[n].mig = m;
        assert_non_null(picks[n].gpu);
    }
    char *got;
    assert_int_equal(gpu_select_cuda_visible(held, picks, n, &got), 0);
    if (!want)
        assert_null(got);
    else
        assert_string_equal(got ? got : "(null)", want);
    free(got);
}

static void test_cuda_visible(void **state)
{
    const char *one[] = {"1", NULL};
    const char *both[] = {"0", "1", NULL};
    const char *rev[] = {"1", "0", NULL};
    const char *mig[] = {"MIG-bbbb2222-0000-0000", NULL};
    cuda_visible(NULL, one, NULL);
    cuda_visible("1", one, "0");
    cuda_visible("1", both, "1");
    cuda_visible("0,1", rev, "1,0");
    cuda_visible("1, 0", both, "1,0");
    cuda_visible("0", one, "0"); /* held GPU not given: every one inside */
    cuda_visible("1", mig, "0"); /* a MIG device is not its whole GPU */
    cuda_visible("-1", both, "0,1");
    cuda_visible("", one, "0");
    cuda_visible("GPU-11111111-2222", one, "GPU-11111111-2222");
    cuda_visible("MIG-bbbb2222-0000-0000,GPU-0", mig, "MIG-bbbb2222-0000-0000,GPU-0");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_source_order),
        cmocka_unit_test(test_request_parse),
        cmocka_unit_test(test_resolve),
        cmocka_unit_test(test_cuda_visible),
    };
    return test_run_cases(tests);
}
