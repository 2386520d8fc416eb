/* Tests for lib/gpu.c: the GPU model read through the fake libnvidia-ml.so.1 (FAKE_NVML_LIB,
 * FAKE_NVML_OLD_LIB), each test with its own fixture written to a temp dir.
 *
 * Fixtures are written with ' for " to keep them readable; fake_env_fixture() swaps them back. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake-nvml-env.h"
#include "lib/gpu.h"

static struct nvml *open_lib(const char *lib_env)
{
    struct errmsg e = {""};
    struct nvml *n = NULL;
    int r = nvml_open(fake_env_get(lib_env), &n, &e);
    if (r < 0)
        fail_msg("nvml_open: %s", e.text);
    return n;
}

static struct gpu_list *load(struct nvml *n)
{
    struct errmsg e = {""};
    struct gpu_list *l = NULL;
    int r = gpu_list_load(n, &l, &e);
    if (r < 0)
        fail_msg("gpu_list_load: %s", e.text);
    return l;
}

/* The fake re-reads a changed fixture from calls at most every 100 ms. */
static void wait_for_reread(void)
{
    struct timespec ts = {0, 150 * 1000 * 1000};
    nanosleep(&ts, NULL);
}

#define PROFILES                                                                                   \
    "'mig_profiles': ["                                                                            \
    "{'index': 0, 'id': 19, 'name': 'MIG 1g.10gb', 'slices': 1, 'memory_mb': 9984},"               \
    "{'index': 2, 'id': 9, 'name': 'MIG 3g.40gb', 'slices': 3, 'memory_mb': 40448},"               \
    "{'index': 4, 'id': 0, 'name': 'MIG 7g.80gb', 'slices': 7, 'memory_mb': 81152},"               \
    "{'index': 7, 'id': 20, 'name': 'MIG 1g.10gb+me', 'slices': 1, 'memory_mb': 9984}]"

/* Writes an 8-GPU fixture: every GPU in MIG mode, its MIG devices listed out of order (two
 * compute instances share GPU instance 1), GPU 7 as one 7g.80gb instance. */
static void set_dgx_fixture(const char *gpu_extra)
{
    char *text = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&text, &size);
    assert_non_null(f);
    fprintf(f, "{'driver_version': '580.95.05', 'cuda_version': '13.0', 'gpus': [");
    for (int i = 0; i < 8; i++) {
        fprintf(f,
                "%s{'name': 'NVIDIA H100 80GB HBM3', 'uuid': 'GPU-%08x-aaaa-bbbb-cccc-%012d',"
                " 'pci_bus_id': '00000000:%02X:00.0', 'minor': %d, 'cuda_capability': [9, 0],"
                " %s, %s 'mig': {'enabled': true, 'instances': [",
                i ? ", " : "", 0x10101010u * (unsigned)(i + 1), i, 0x1b + 0x10 * i, i, PROFILES,
                gpu_extra);
        if (i == 7)
            fprintf(f, "{'gi': 0, 'ci': 0, 'profile_id': 0, 'uuid': 'MIG-7-0-0'}");
        else
            fprintf(f,
                    "{'gi': 9, 'ci': 0, 'profile_id': 19, 'uuid': 'MIG-%d-9-0'},"
                    "{'gi': 1, 'ci': 1, 'profile_id': 9, 'uuid': 'MIG-%d-1-1'},"
                    "{'gi': 1, 'ci': 0, 'profile_id': 9, 'uuid': 'MIG-%d-1-0'},"
                    "{'gi': 3, 'ci': 0, 'profile_id': 20, 'uuid': 'MIG-%d-3-0'}",
                    i, i, i, i);
        fprintf(f, "]}}");
    }
    fprintf(f, "]}");
    assert_int_equal(fclose(f), 0);
    fake_env_fixture(text);
    free(text);
}

static const char two_gpus[] =
    "{'driver_version': '550.127.08', 'cuda_version': '12.4', 'gpus': ["
    "{'name': 'NVIDIA A100-SXM4-80GB', 'uuid': 'GPU-9a8b7c6d-5e4f-3a2b-1c0d-e9f8a7b6c5d4',"
    " 'pci_bus_id': '00000000:07:00.0', 'minor': 3, 'cuda_capability': [8, 0],"
    " 'mig': {'enabled': false}},"
    "{'name': 'NVIDIA GeForce RTX 4090', 'uuid': 'GPU-5f3a2c1e-8d4b-4e6f-9a7c-2b1d0e3f4a5b',"
    " 'pci_bus_id': '00000000:0A:00.0'}]}";

static void test_identity(void **state)
{
    fake_env_fixture(two_gpus);
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_LIB");
    _cleanup_(gpu_list_freep) struct gpu_list *l = load(n);
    assert_string_equal(l->driver_version, "550.127.08");
    assert_int_equal(l->cuda_version, 12040);
    assert_int_equal(l->n, 2);

    const struct gpu *g = &l->gpus[0];
    assert_int_equal(g->index, 0);
    assert_int_equal(g->error, 0);
    assert_string_equal(g->uuid, "GPU-9a8b7c6d-5e4f-3a2b-1c0d-e9f8a7b6c5d4");
    assert_string_equal(g->name, "NVIDIA A100-SXM4-80GB");
    assert_string_equal(g->pci_bus_id, "00000000:07:00.0");
    assert_true(g->has_minor);
    assert_int_equal(g->minor, 3);
    assert_int_equal(g->cc_major, 8);
    assert_int_equal(g->cc_minor, 0);
    assert_false(g->mig_enabled);
    assert_int_equal(g->n_mig, 0);
    assert_non_null(g->handle);

    /* A GeForce: no MIG (NOT_SUPPORTED), no minor, no compute capability; still usable. */
    g = &l->gpus[1];
    assert_int_equal(g->index, 1);
    assert_int_equal(g->error, 0);
    assert_string_equal(g->name, "NVIDIA GeForce RTX 4090");
    assert_false(g->has_minor);
    assert_int_equal(g->cc_major, 0);
    assert_int_equal(g->cc_minor, 0);
    assert_false(g->mig_enabled);
    assert_null(g->mig);
}

static void test_no_versions_no_gpus(void **state)
{
    fake_env_fixture("{'gpus': []}");
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_LIB");
    _cleanup_(gpu_list_freep) struct gpu_list *l = load(n);
    assert_string_equal(l->driver_version, "");
    assert_int_equal(l->cuda_version, 0);
    assert_int_equal(l->n, 0);
    const struct gpu_mig *m = (const void *)1;
    assert_null(gpu_list_find(l, "0", &m));
    assert_null(m);
}

static void test_count_fails(void **state)
{
    fake_env_fixture("{'gpus': [], 'errors': {'nvmlDeviceGetCount_v2': 'UNKNOWN'}}");
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_LIB");
    struct errmsg e = {""};
    struct gpu_list *l = NULL;
    assert_int_equal(gpu_list_load(n, &l, &e), -EIO);
    assert_null(l);
    assert_string_equal(e.text, "nvmlDeviceGetCount_v2: Unknown Error");
}

static void check_dgx_gpu(const struct gpu *g, unsigned i, bool plus_me)
{
    char want[GPU_UUID_MAX];
    assert_int_equal(g->error, 0);
    assert_int_equal(g->index, i);
    assert_true(g->mig_enabled);
    if (i == 7) {
        assert_int_equal(g->n_mig, 1);
        assert_string_equal(g->mig[0].profile, "7g.80gb");
        assert_string_equal(g->mig[0].uuid, "MIG-7-0-0");
        return;
    }
    /* Sorted by GPU instance, then compute instance, whatever order NVML gave. */
    static const struct {
        unsigned gi, ci, index;
        const char *profile;
    } expect[] = {
        {1, 0, 2, "3g.40gb"}, {1, 1, 1, "3g.40gb"}, {3, 0, 3, "1g.10gb+me"}, {9, 0, 0, "1g.10gb"}};
    assert_int_equal(g->n_mig, ELEMENTSOF(expect));
    for (unsigned j = 0; j < ELEMENTSOF(expect); j++) {
        const struct gpu_mig *m = &g->mig[j];
        assert_int_equal(m->gi_id, expect[j].gi);
        assert_int_equal(m->ci_id, expect[j].ci);
        assert_int_equal(m->index, expect[j].index);
        /* Without the profile table "+me" cannot be told from the plain 1g.10gb. */
        assert_string_equal(m->profile,
                            plus_me || j != 2 ? expect[j].profile : (const char *)"1g.10gb");
        snprintf(want, sizeof(want), "MIG-%u-%u-%u", i, expect[j].gi, expect[j].ci);
        assert_string_equal(m->uuid, want);
        assert_non_null(m->handle);
    }
}

static void test_dgx_mig(void **state)
{
    set_dgx_fixture("");
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_LIB");
    _cleanup_(gpu_list_freep) struct gpu_list *l = load(n);
    assert_string_equal(l->driver_version, "580.95.05");
    assert_int_equal(l->cuda_version, 13000);
    assert_int_equal(l->n, 8);
    for (unsigned i = 0; i < 8; i++) {
        char bus[GPU_BUS_ID_MAX];
        snprintf(bus, sizeof(bus), "00000000:%02X:00.0", 0x1b + 0x10 * i);
        assert_string_equal(l->gpus[i].pci_bus_id, bus);
        assert_int_equal(l->gpus[i].minor, i);
        check_dgx_gpu(&l->gpus[i], i, true);
    }
}

static void test_old_driver_profile_fallback(void **state)
{
    /* No nvmlDeviceGetGpuInstanceProfileInfoV: names come from the MIG devices' sizes. */
    set_dgx_fixture("");
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_OLD_LIB");
    _cleanup_(gpu_list_freep) struct gpu_list *l = load(n);
    assert_int_equal(l->cuda_version, 0); /* no nvmlSystemGetCudaDriverVersion_v2 */
    assert_string_equal(l->driver_version, "580.95.05");
    assert_int_equal(l->n, 8);
    for (unsigned i = 0; i < 8; i++)
        check_dgx_gpu(&l->gpus[i], i, false);
}

static void test_profile_fallback_on_errors(void **state)
{
    /* GPU instance queries need privileges on real drivers; without them the sizes name the
     * profile. */
    set_dgx_fixture("'errors': {'nvmlDeviceGetGpuInstanceById': 'NO_PERMISSION'},");
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_LIB");
    _cleanup_(gpu_list_freep) struct gpu_list *l = load(n);
    for (unsigned i = 0; i < 8; i++)
        check_dgx_gpu(&l->gpus[i], i, false);
}

/* A GPU in MIG mode whose MIG devices cannot be listed is still a MIG GPU, with no devices. */
static void test_mig_devices_unreadable(void **state)
{
    set_dgx_fixture("'errors': {'nvmlDeviceGetGpuInstanceId': 'NO_PERMISSION'},");
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_LIB");
    _cleanup_(gpu_list_freep) struct gpu_list *l = load(n);
    const struct gpu *g = &l->gpus[0];
    assert_int_equal(g->error, 0);
    assert_true(g->mig_enabled);
    assert_int_equal(g->n_mig, 0);
    assert_null(g->mig);
}

static void test_profile_unknown(void **state)
{
    set_dgx_fixture("'unsupported': ['nvmlDeviceGetGpuInstanceProfileInfoV',"
                    " 'nvmlDeviceGetAttributes_v2'],");
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_LIB");
    _cleanup_(gpu_list_freep) struct gpu_list *l = load(n);
    const struct gpu *g = &l->gpus[0];
    assert_int_equal(g->error, 0);
    assert_int_equal(g->n_mig, 4);
    for (unsigned j = 0; j < g->n_mig; j++) {
        assert_string_equal(g->mig[j].profile, "");
        assert_true(strncmp(g->mig[j].uuid, "MIG-0-", 6) == 0);
    }
}

static void test_profile_lookups_cached(void **state)
{
    /* Seven 1g.10gb+me devices (profile index 7): a scan of the profiles takes 8 calls. Looked up
     * once per GPU that is 8 calls; once per device it would be 56. Past 8 the fake fails the
     * call, and the names would fall back to "1g.10gb" from the devices' sizes. */
    fake_env_fixture("{'gpus': [{'name': 'NVIDIA H100 80GB HBM3', 'uuid': 'GPU-1',"
                     " 'pci_bus_id': '00000000:1B:00.0', " PROFILES ","
                     " 'max_calls': {'nvmlDeviceGetGpuInstanceProfileInfoV': 8},"
                     " 'mig': {'enabled': true, 'instances': ["
                     "{'gi': 7, 'ci': 0, 'profile_id': 20, 'uuid': 'MIG-a'},"
                     "{'gi': 8, 'ci': 0, 'profile_id': 20, 'uuid': 'MIG-b'},"
                     "{'gi': 9, 'ci': 0, 'profile_id': 20, 'uuid': 'MIG-c'},"
                     "{'gi': 10, 'ci': 0, 'profile_id': 20, 'uuid': 'MIG-d'},"
                     "{'gi': 11, 'ci': 0, 'profile_id': 20, 'uuid': 'MIG-e'},"
                     "{'gi': 12, 'ci': 0, 'profile_id': 20, 'uuid': 'MIG-f'},"
                     "{'gi': 13, 'ci': 0, 'profile_id': 20, 'uuid': 'MIG-g'}]}}]}");
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_LIB");
    _cleanup_(gpu_list_freep) struct gpu_list *l = load(n);
    assert_int_equal(l->gpus[0].n_mig, 7);
    for (unsigned j = 0; j < 7; j++)
        assert_string_equal(l->gpus[0].mig[j].profile, "1g.10gb+me");
}

static const char three_gpus_one_lost[] =
    "{'gpus': ["
    "{'name': 'A', 'uuid': 'GPU-aaaaaaaa-0000', 'pci_bus_id': '00000000:07:00.0', 'minor': 0},"
    "{'name': 'B', 'uuid': 'GPU-bbbbbbbb-1111', 'pci_bus_id': '00000000:0F:00.0', 'minor': 1,"
    " 'lost_at': 0},"
    "{'name': 'C', 'uuid': 'GPU-cccccccc-2222', 'pci_bus_id': '00000000:47:00.0', 'minor': 2}]}";

static void test_lost_gpu(void **state)
{
    fake_env_fixture(three_gpus_one_lost);
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_LIB");
    _cleanup_(gpu_list_freep) struct gpu_list *l = load(n);
    assert_int_equal(l->n, 3);
    assert_int_equal(l->gpus[1].error, -ENODEV);
    assert_int_equal(l->gpus[1].index, 1);
    assert_string_equal(l->gpus[1].uuid, "");
    assert_int_equal(l->gpus[0].error, 0);
    assert_string_equal(l->gpus[0].uuid, "GPU-aaaaaaaa-0000");
    assert_int_equal(l->gpus[2].error, 0);
    assert_string_equal(l->gpus[2].name, "C");
    assert_int_equal(l->gpus[2].minor, 2);
    /* The lost GPU is still found by index, so its caller can report it. */
    assert_ptr_equal(gpu_list_find(l, "1", NULL), &l->gpus[1]);
}

static void test_lost_midway(void **state)
{
    /* Lost after its UUID was read (during the MIG part, or the name): error set, UUID kept. */
    fake_env_fixture("{'gpus': ["
                     "{'name': 'A', 'uuid': 'GPU-aaaaaaaa-0000', 'pci_bus_id': '00000000:07:00.0',"
                     " 'mig': {'enabled': true},"
                     " 'errors': {'nvmlDeviceGetMigMode': 'GPU_IS_LOST'}},"
                     "{'name': 'B', 'uuid': 'GPU-bbbbbbbb-1111', 'pci_bus_id': '00000000:0F:00.0',"
                     " 'errors': {'nvmlDeviceGetName': 'GPU_IS_LOST'}},"
                     "{'name': 'C', 'uuid': 'GPU-cccccccc-2222', 'pci_bus_id': '00000000:47:00.0',"
                     " 'minor': 2}]}");
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_LIB");
    _cleanup_(gpu_list_freep) struct gpu_list *l = load(n);
    assert_int_equal(l->gpus[0].error, -ENODEV);
    assert_string_equal(l->gpus[0].uuid, "GPU-aaaaaaaa-0000");
    assert_int_equal(l->gpus[1].error, -ENODEV);
    assert_string_equal(l->gpus[1].uuid, "GPU-bbbbbbbb-1111");
    assert_int_equal(l->gpus[2].error, 0);
    assert_ptr_equal(gpu_list_find(l, "GPU-aaaaaaaa-0000", NULL), &l->gpus[0]);
}

static void test_unreadable_and_flaky(void **state)
{
    fake_env_fixture("{'gpus': ["
                     "{'name': 'A', 'uuid': 'GPU-aaaaaaaa-0000', 'pci_bus_id': '00000000:07:00.0',"
                     " 'errors': {'nvmlDeviceGetHandleByIndex_v2': 'NO_PERMISSION'}},"
                     "{'name': 'B', 'uuid': 'GPU-bbbbbbbb-1111', 'pci_bus_id': '00000000:0F:00.0',"
                     " 'minor': 1, 'cuda_capability': [9, 0],"
                     " 'errors': {'nvmlDeviceGetMinorNumber': 'UNKNOWN'},"
                     " 'unsupported': ['nvmlDeviceGetName']}]}");
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_LIB");
    _cleanup_(gpu_list_freep) struct gpu_list *l = load(n);
    /* A GPU this process may not open (cgroup device rules) is listed with -EACCES. */
    assert_int_equal(l->gpus[0].error, -EACCES);
    assert_null(l->gpus[0].handle);
    /* A failing optional attribute leaves it unknown, not the GPU down. */
    const struct gpu *g = &l->gpus[1];
    assert_int_equal(g->error, 0);
    assert_false(g->has_minor);
    assert_string_equal(g->name, "");
    assert_int_equal(g->cc_major, 9);
    assert_string_equal(g->uuid, "GPU-bbbbbbbb-1111");
}

static void test_find(void **state)
{
    set_dgx_fixture("");
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_LIB");
    _cleanup_(gpu_list_freep) struct gpu_list *l = load(n);
    const struct gpu *gpus = l->gpus;
    const struct gpu_mig *m = NULL;

    /* Index. */
    assert_ptr_equal(gpu_list_find(l, "0", &m), &gpus[0]);
    assert_null(m);
    assert_ptr_equal(gpu_list_find(l, "7", NULL), &gpus[7]);
    assert_null(gpu_list_find(l, "8", NULL));
    assert_null(gpu_list_find(l, "-1", NULL));
    assert_null(gpu_list_find(l, "99999999999999999999", NULL));
    assert_null(gpu_list_find(l, "", NULL));

    /* GPU UUID: exact, any case, or a unique prefix of 8 characters or more. */
    assert_ptr_equal(gpu_list_find(l, gpus[2].uuid, &m), &gpus[2]);
    assert_null(m);
    assert_ptr_equal(gpu_list_find(l, "gpu-30303030-AAAA-bbbb-cccc-000000000002", NULL), &gpus[2]);
    assert_ptr_equal(gpu_list_find(l, "GPU-303030", NULL), &gpus[2]);
    assert_null(gpu_list_find(l, "GPU-303", NULL)); /* too short */
    assert_null(gpu_list_find(l, "GPU-", NULL));
    /* A whole UUID that is no GPU's is not taken for the GPU it shares a prefix with. */
    assert_null(gpu_list_find(l, "GPU-30303030-aaaa-bbbb-cccc-000000000009", NULL));

    /* PCI bus id as NVML, sysfs and lspci write it, any case. */
    assert_ptr_equal(gpu_list_find(l, "00000000:3B:00.0", &m), &gpus[2]);
    assert_null(m);
    assert_ptr_equal(gpu_list_find(l, "00000000:3b:00.0", NULL), &gpus[2]);
    assert_ptr_equal(gpu_list_find(l, "0000:3b:00.0", NULL), &gpus[2]);
    assert_ptr_equal(gpu_list_find(l, "3b:00.0", NULL), &gpus[2]);
    assert_null(gpu_list_find(l, "00000000:3b:00.1", NULL));
    assert_null(gpu_list_find(l, "00000001:3b:00.0", NULL));
    assert_null(gpu_list_find(l, "00000000:3b:00.0x", NULL));

    /* MIG UUID: the parent GPU and the MIG device. */
    assert_ptr_equal(gpu_list_find(l, "MIG-5-3-0", &m), &gpus[5]);
    assert_non_null(m);
    assert_int_equal(m->gi_id, 3);
    assert_int_equal(m->ci_id, 0);
    assert_ptr_equal(gpu_list_find(l, "mig-7-0-0", &m), &gpus[7]);
    assert_ptr_equal(m, &gpus[7].mig[0]);

    /* The pre-R470 MIG name "MIG-GPU-<uuid>/<gi>/<ci>". */
    char legacy[GPU_UUID_MAX + 16];
    snprintf(legacy, sizeof(legacy), "MIG-%s/1/1", gpus[4].uuid);
    assert_ptr_equal(gpu_list_find(l, legacy, &m), &gpus[4]);
    assert_ptr_equal(m, &gpus[4].mig[1]);
    snprintf(legacy, sizeof(legacy), "MIG-%s/2/0", gpus[4].uuid);
    assert_null(gpu_list_find(l, legacy, &m));
    assert_null(m);

    assert_null(gpu_list_find(l, "GPU-ffffffff", &m));
    assert_null(m);
    assert_null(gpu_list_find(l, "nonsense", NULL));
}

static void test_find_prefix_ambiguous(void **state)
{
    fake_env_fixture(
        "{'gpus': ["
        "{'name': 'A', 'uuid': 'GPU-abcdef01-0000', 'pci_bus_id': '00000000:07:00.0'},"
        "{'name': 'B', 'uuid': 'GPU-abcdef02-1111', 'pci_bus_id': '00000000:0F:00.0'}]}");
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_LIB");
    _cleanup_(gpu_list_freep) struct gpu_list *l = load(n);
    assert_null(gpu_list_find(l, "GPU-abcdef0", NULL));
    assert_ptr_equal(gpu_list_find(l, "GPU-abcdef02", NULL), &l->gpus[1]);
    assert_ptr_equal(gpu_list_find(l, "GPU-ABCDEF01-0000", NULL), &l->gpus[0]);
}

static const char mig_before[] =
    "{'gpus': [{'name': 'H', 'uuid': 'GPU-1', 'pci_bus_id': '00000000:1B:00.0', " PROFILES ","
    " 'mig': {'enabled': true, 'instances': ["
    "{'gi': 2, 'ci': 0, 'profile_id': 9, 'uuid': 'MIG-2'},"
    "{'gi': 1, 'ci': 0, 'profile_id': 9, 'uuid': 'MIG-1'}]}}]}";

static void test_reload_mig(void **state)
{
    fake_env_fixture(mig_before);
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_LIB");
    _cleanup_(gpu_list_freep) struct gpu_list *l = load(n);
    struct gpu *g = &l->gpus[0];
    struct errmsg e = {""};
    assert_int_equal(g->n_mig, 2);
    assert_string_equal(g->mig[0].uuid, "MIG-1");

    /* Reconfigured to seven 1g.10gb. */
    fake_env_fixture(
        "{'gpus': [{'name': 'H', 'uuid': 'GPU-1', 'pci_bus_id': '00000000:1B:00.0', " PROFILES
        ", 'mig': {'enabled': true, 'instances': ["
        "{'gi': 13, 'ci': 0, 'profile_id': 19, 'uuid': 'MIG-13'},"
        "{'gi': 7, 'ci': 0, 'profile_id': 19, 'uuid': 'MIG-7'},"
        "{'gi': 8, 'ci': 0, 'profile_id': 19, 'uuid': 'MIG-8'}]}}]}");
    wait_for_reread();
    assert_int_equal(gpu_reload_mig(n, g, &e), 0);
    assert_true(g->mig_enabled);
    assert_int_equal(g->n_mig, 3);
    assert_string_equal(g->mig[0].uuid, "MIG-7");
    assert_string_equal(g->mig[0].profile, "1g.10gb");
    assert_string_equal(g->mig[2].uuid, "MIG-13");
    const struct gpu_mig *m = NULL;
    assert_ptr_equal(gpu_list_find(l, "MIG-13", &m), g);
    assert_ptr_equal(m, &g->mig[2]);

    /* A failed reload keeps what was there and says why. */
    fake_env_fixture(
        "{'gpus': [{'name': 'H', 'uuid': 'GPU-1', 'pci_bus_id': '00000000:1B:00.0', " PROFILES
        ", 'mig': {'enabled': true},"
        " 'errors': {'nvmlDeviceGetMaxMigDeviceCount': 'UNKNOWN'}}]}");
    wait_for_reread();
    assert_int_equal(gpu_reload_mig(n, g, &e), -EIO);
    assert_string_equal(e.text, "GPU 0: nvmlDeviceGetMaxMigDeviceCount: Unknown Error");
    assert_int_equal(g->n_mig, 3);
    assert_string_equal(g->mig[1].uuid, "MIG-8");

    /* MIG switched off. */
    fake_env_fixture(
        "{'gpus': [{'name': 'H', 'uuid': 'GPU-1', 'pci_bus_id': '00000000:1B:00.0', " PROFILES
        ", 'mig': {'enabled': false}}]}");
    wait_for_reread();
    assert_int_equal(gpu_reload_mig(n, g, &e), 0);
    assert_false(g->mig_enabled);
    assert_int_equal(g->n_mig, 0);
    assert_null(gpu_list_find(l, "MIG-13", NULL));
}

static void test_reload_mig_lost(void **state)
{
    fake_env_fixture(three_gpus_one_lost);
    _cleanup_(nvml_closep) struct nvml *n = open_lib("FAKE_NVML_LIB");
    _cleanup_(gpu_list_freep) struct gpu_list *l = load(n);
    struct errmsg e = {""};
    assert_int_equal(gpu_reload_mig(n, &l->gpus[1], &e), -ENODEV);
    assert_string_equal(e.text, "GPU 1 cannot be read");
    /* A GPU that cannot do MIG reloads to "no MIG". */
    assert_int_equal(gpu_reload_mig(n, &l->gpus[0], &e), 0);
    assert_false(l->gpus[0].mig_enabled);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity),
        cmocka_unit_test(test_no_versions_no_gpus),
        cmocka_unit_test(test_count_fails),
        cmocka_unit_test(test_dgx_mig),
        cmocka_unit_test(test_old_driver_profile_fallback),
        cmocka_unit_test(test_profile_fallback_on_errors),
        cmocka_unit_test(test_mig_devices_unreadable),
        cmocka_unit_test(test_profile_unknown),
        cmocka_unit_test(test_profile_lookups_cached),
        cmocka_unit_test(test_lost_gpu),
        cmocka_unit_test(test_lost_midway),
        cmocka_unit_test(test_unreadable_and_flaky),
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_find_prefix_ambiguous),
        cmocka_unit_test(test_reload_mig),
        cmocka_unit_test(test_reload_mig_lost),
    };
    return cmocka_run_group_tests(tests, fake_env_setup, fake_env_teardown);
}
