/* GPU injection planned against a stand-in driver tree (capsule/tests/driver-tree) and the fake
 * NVML with two H200s, GPU 1 in MIG mode (tests/fixtures/nvml/capsule-h200-mig.json): which
 * GPUs, which device nodes, libraries, links and environment, and what is refused. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cmocka.h>

#include "capsule/gpu/gpu-inject.h"
#include "tests/driver-tree/driver-tree.h"

#define GPU0   "GPU-3f2a9c10-7d4e-4b1a-9c8e-0a1b2c3d4e5f"
#define GPU1   "GPU-8b7c6d5e-1a2b-4c3d-8e9f-112233445566"
#define MIG1   "MIG-5a4b3c2d-1e0f-5a6b-9c8d-7e6f5a4b3c2d"
#define MIG2   "MIG-0c1d2e3f-4a5b-5c6d-8e7f-8091a2b3c4d5"
#define LIBDIR "/usr/lib/x86_64-linux-gnu"
#define V      "580.159.04"

static char *tmp, *tree, *layer_deb, *layer_rh;
static bool host_has_driver;

static int group_setup(void **state)
{
    tmp = driver_tree_tmpdir();
    if (!tmp || !(tree = driver_tree_make(tmp, "root")))
        return -1;
    if (asprintf(&layer_deb, "%s/layer-deb", tmp) < 0 ||
        asprintf(&layer_rh, "%s/layer-rh", tmp) < 0)
        return -1;
    if (driver_tree_sh("mkdir -p '%s/usr/lib/x86_64-linux-gnu' '%s/usr/lib64' '%s/usr/lib'",
                       layer_deb, layer_rh, layer_rh) != 0)
        return -1;
    setenv("FAKE_NVML_FIXTURE", DRIVER_TREE_FIXTURE, 1);
    host_has_driver = access("/proc/driver/nvidia", F_OK) == 0;
    return 0;
}

static int group_teardown(void **state)
{
    if (tmp)
        driver_tree_sh("rm -rf '%s'", tmp);
    free(tmp);
    free(tree);
    free(layer_deb);
    free(layer_rh);
    return 0;
}

/* What a test changes from the usual options: --gpus, the two environments. */
struct run {
    const char *gpus;
    char *host_env[6];
    char *image_env[6];
    const char *root; /* NULL: the shared tree */
    const char *nvml; /* nvml_library */
    int layers;       /* 0: Debian-like image, 1: Red Hat-like, 2: none */
};

static int plan(const struct run *r, struct gpu_inject *g, struct errmsg *e)
{
    char *layers[2] = {r->layers == 1 ? layer_rh : layer_deb, NULL};
    struct gpu_inject_opts o = {
        .driver_root = r->root ? r->root : tree,
        .gpus = r->gpus,
        .host_env = r->host_env,
        .image_env = r->image_env,
        .image_layers = layers,
        .n_image_layers = r->layers == 2 ? 0 : 1,
        .nvml_library = r->nvml,
    };
    memset(e, 0, sizeof(*e));
    return gpu_inject_plan(&o, g, e);
}

static void plan_ok(const struct run *r, struct gpu_inject *g)
{
    struct errmsg e;
    int rc = plan(r, g, &e);
    if (rc != 0)
        fail_msg("gpu_inject_plan: %d %s", rc, e.text);
    assert_non_null(g->env);
}

/* /proc/driver/nvidia is bound only where the running kernel has it (a GPU machine). */
#define PROC_MOUNT "@PROC@"

/* The expected text with PROC_MOUNT filled in. */
static char *expand(const char *text)
{
    const char *with = host_has_driver ? "/proc/driver/nvidia <- = ro rec\n" : "";
    char *s = calloc(1, strlen(text) + strlen(with) + 1);
    const char *at = strstr(text, PROC_MOUNT);
    if (!at)
        return strcpy(s, text);
    memcpy(s, text, (size_t)(at - text));
    strcat(s, with);
    strcat(s, at + strlen(PROC_MOUNT));
    return s;
}

/* The mounts as lines "TARGET <- SOURCE flags", SOURCE relative to the tree ("=" when it is the
 * same path as the target), for exact comparison. */
static char *mounts_text(const struct gpu_inject *g)
{
    size_t size = 1;
    for (size_t i = 0; i < g->n_mounts; i++)
        size += strlen(g->mounts[i].source) + strlen(g->mounts[i].target) + 16;
    char *s = calloc(1, size);
    size_t tl = strlen(tree);
    for (size_t i = 0; i < g->n_mounts; i++) {
        const struct mount_entry *m = &g->mounts[i];
        assert_true(strncmp(m->source, tree, tl) == 0);
        const char *src = m->source + tl;
        sprintf(s + strlen(s), "%s <- %s%s%s\n", m->target, strcmp(src, m->target) ? src : "=",
                m->flags & MOUNT_RO ? " ro" : "", m->flags & MOUNT_REC ? " rec" : "");
    }
    return s;
}

static char *links_text(const struct gpu_inject *g)
{
    size_t size = 1;
    for (size_t i = 0; i < g->n_links; i++)
        size += strlen(g->links[i].path) + strlen(g->links[i].target) + 8;
    char *s = calloc(1, size);
    for (size_t i = 0; i < g->n_links; i++)
        sprintf(s + strlen(s), "%s -> %s\n", g->links[i].path, g->links[i].target);
    return s;
}

static char *env_text(const struct gpu_inject *g)
{
    size_t size = 1;
    for (char **e = g->env; *e; e++)
        size += strlen(*e) + 1;
    char *s = calloc(1, size);
    for (char **e = g->env; *e; e++)
        sprintf(s + strlen(s), "%s\n", *e);
    return s;
}

#define assert_text(fn, g, expected)                                                               \
    do {                                                                                           \
        char *_t = fn(g), *_x = expand(expected);                                                  \
        if (strcmp(_t, _x) != 0)                                                                   \
            fail_msg("%s:\n--- got\n%s--- expected\n%s", #fn, _t, _x);                             \
        free(_t);                                                                                  \
        free(_x);                                                                                  \
    } while (0)

static bool has_target(const struct gpu_inject *g, const char *target)
{
    for (size_t i = 0; i < g->n_mounts; i++)
        if (strcmp(g->mounts[i].target, target) == 0)
            return true;
    return false;
}

/* No plan may ever bind the stale driver's library or firmware. */
static void assert_no_stale(const struct gpu_inject *g)
{
    for (size_t i = 0; i < g->n_mounts; i++)
        if (strstr(g->mounts[i].source, "470"))
            fail_msg("stale driver file mounted: %s", g->mounts[i].source);
}

/* The default capabilities (utility, compute) of the usual driver files. */
#define DRIVER_FILES                                                                               \
    LIBDIR "/libnvidia-ml.so." V " <- = ro\n" LIBDIR "/libnvidia-cfg.so." V " <- = ro\n" LIBDIR    \
           "/libcuda.so." V " <- = ro\n" LIBDIR "/libnvidia-ptxjitcompiler.so." V " <- = ro\n"     \
           "/usr/bin/nvidia-smi <- = ro\n" PROC_MOUNT "/lib/firmware/nvidia/" V " <- = ro\n"
#define DRIVER_LINKS                                                                               \
    LIBDIR "/libnvidia-ml.so.1 -> libnvidia-ml.so." V "\n" LIBDIR                                  \
           "/libnvidia-cfg.so.1 -> libnvidia-cfg.so." V "\n" LIBDIR                                \
           "/libcuda.so.1 -> libcuda.so." V "\n" LIBDIR "/libcuda.so -> libcuda.so.1\n" LIBDIR     \
           "/libnvidia-ptxjitcompiler.so.1 -> libnvidia-ptxjitcompiler.so." V "\n"

static void test_gpu_0_exact(void **state)
{
    struct gpu_inject g;
    plan_ok(&(struct run){.gpus = "0"}, &g);
    assert_int_equal(g.n_gpus, 1);
    assert_string_equal(g.uuids[0], GPU0);
    assert_null(g.uuids[1]);
    assert_string_equal(g.driver_version, V);
    assert_string_equal(g.cuda_version, "13.0");
    assert_string_equal(g.lib_dir, LIBDIR);
    assert_text(mounts_text, &g,
                "/dev/nvidiactl <- =\n/dev/nvidia0 <- =\n/dev/nvidia-uvm <- =\n"
                "/dev/nvidia-uvm-tools <- =\n" DRIVER_FILES);
    assert_text(links_text, &g, DRIVER_LINKS);
    assert_text(env_text, &g, "NVIDIA_VISIBLE_DEVICES=" GPU0 "\n");
    gpu_inject_done(&g);
}

static void test_gpus_all(void **state)
{
    struct gpu_inject g;
    plan_ok(&(struct run){.gpus = "all"}, &g);
    assert_int_equal(g.n_gpus, 2);
    assert_string_equal(g.uuids[0], GPU0);
    assert_string_equal(g.uuids[1], GPU1);
    /* GPU 1 is in MIG mode: all of it means its MIG devices' capabilities too. */
    assert_text(mounts_text, &g,
                "/dev/nvidiactl <- =\n/dev/nvidia0 <- =\n/dev/nvidia1 <- =\n"
                "/dev/nvidia-caps/nvidia-cap12 <- =\n/dev/nvidia-caps/nvidia-cap13 <- =\n"
                "/dev/nvidia-caps/nvidia-cap21 <- =\n/dev/nvidia-caps/nvidia-cap22 <- =\n"
                "/dev/nvidia-uvm <- =\n/dev/nvidia-uvm-tools <- =\n" DRIVER_FILES);
    assert_text(env_text, &g, "NVIDIA_VISIBLE_DEVICES=" GPU0 "," GPU1 "\n");
    assert_no_stale(&g);
    gpu_inject_done(&g);
}

static void test_gpu_1_and_uuid_prefix(void **state)
{
    const char *ids[] = {"1", "GPU-8b7c6d5e", "00000000:3B:00.0", "1,GPU-8b7c6d5e"};
    for (size_t i = 0; i < 4; i++) {
        struct gpu_inject g;
        plan_ok(&(struct run){.gpus = ids[i]}, &g);
        assert_int_equal(g.n_gpus, 1);
        assert_string_equal(g.uuids[0], GPU1);
        assert_true(has_target(&g, "/dev/nvidia1"));
        assert_false(has_target(&g, "/dev/nvidia0"));
        assert_true(has_target(&g, "/dev/nvidia-caps/nvidia-cap12"));
        assert_true(has_target(&g, "/dev/nvidia-caps/nvidia-cap22"));
        assert_text(env_text, &g, "NVIDIA_VISIBLE_DEVICES=" GPU1 "\n");
        gpu_inject_done(&g);
    }
}

static void test_mig_uuid(void **state)
{
    /* The second MIG device, by UUID and by NVIDIA's "GPU:MIG" index form. */
    const char *ids[] = {MIG2, "1:1"};
    for (size_t i = 0; i < 2; i++) {
        struct gpu_inject g;
        plan_ok(&(struct run){.gpus = ids[i]}, &g);
        assert_int_equal(g.n_gpus, 1);
        assert_string_equal(g.uuids[0], MIG2);
        /* Its parent's node and the caps of gi 2 and its ci 0; not those of the other one. */
        assert_text(mounts_text, &g,
                    "/dev/nvidiactl <- =\n/dev/nvidia1 <- =\n"
                    "/dev/nvidia-caps/nvidia-cap21 <- =\n/dev/nvidia-caps/nvidia-cap22 <- =\n"
                    "/dev/nvidia-uvm <- =\n/dev/nvidia-uvm-tools <- =\n" DRIVER_FILES);
        assert_text(env_text, &g, "NVIDIA_VISIBLE_DEVICES=" MIG2 "\n");
        gpu_inject_done(&g);
    }
}

static void assert_nothing(const struct run *r)
{
    struct gpu_inject g;
    plan_ok(r, &g);
    assert_int_equal(g.n_gpus, 0);
    assert_int_equal(g.n_mounts, 0);
    assert_int_equal(g.n_links, 0);
    assert_null(g.env[0]);
    assert_null(g.lib_dir);
    gpu_inject_done(&g);
}

static void test_none(void **state)
{
    /* No driver needed: the root does not even exist. */
    const char *nowhere = "/nonexistent/driver/root";
    assert_nothing(&(struct run){.gpus = "none", .root = nowhere});
    assert_nothing(&(struct run){.gpus = "", .root = nowhere});
    assert_nothing(&(struct run){.root = nowhere});
    assert_nothing(&(struct run){.host_env = {"NVIDIA_VISIBLE_DEVICES=void"},
                                 .image_env = {"NVIDIA_VISIBLE_DEVICES=all"},
                                 .root = nowhere});
    /* An empty allocation is no GPU, not "fall back to the image's all". */
    assert_nothing(&(struct run){.host_env = {"CUDA_VISIBLE_DEVICES="},
                                 .image_env = {"NVIDIA_VISIBLE_DEVICES=all"},
                                 .root = nowhere});
}

static void test_unknown_id(void **state)
{
    struct gpu_inject g;
    struct errmsg e;
    assert_int_equal(plan(&(struct run){.gpus = "0,7"}, &g, &e), -ENOENT);
    assert_non_null(strstr(e.text, "--gpus"));
    assert_non_null(strstr(e.text, "'7'"));
    assert_non_null(strstr(e.text, GPU0));
    assert_non_null(strstr(e.text, GPU1));
    assert_non_null(strstr(e.text, MIG2));
    assert_int_equal(
        plan(&(struct run){.host_env = {"NVIDIA_VISIBLE_DEVICES=GPU-ffff0000"}}, &g, &e), -ENOENT);
    assert_non_null(strstr(e.text, "NVIDIA_VISIBLE_DEVICES"));
    assert_non_null(strstr(e.text, "'GPU-ffff0000'"));
    assert_int_equal(plan(&(struct run){.gpus = "0,,1"}, &g, &e), -EINVAL);
    assert_non_null(strstr(e.text, "empty entry"));
    assert_int_equal(plan(&(struct run){.gpus = "all,0"}, &g, &e), -EINVAL);
}

static void test_env_sources(void **state)
{
    struct gpu_inject g;
    /* The caller's NVIDIA_VISIBLE_DEVICES wins over CUDA_VISIBLE_DEVICES and the image. */
    plan_ok(&(struct run){.host_env = {"CUDA_VISIBLE_DEVICES=0", "NVIDIA_VISIBLE_DEVICES=1"},
                          .image_env = {"NVIDIA_VISIBLE_DEVICES=all"}},
            &g);
    assert_int_equal(g.n_gpus, 1);
    assert_string_equal(g.uuids[0], GPU1);
    gpu_inject_done(&g);
    /* The image's value applies when the caller says nothing. */
    plan_ok(&(struct run){.image_env = {"PATH=/bin", "NVIDIA_VISIBLE_DEVICES=all"}}, &g);
    assert_int_equal(g.n_gpus, 2);
    gpu_inject_done(&g);
    /* --gpus wins over everything. */
    plan_ok(&(struct run){.gpus = "0", .host_env = {"NVIDIA_VISIBLE_DEVICES=1"}}, &g);
    assert_string_equal(g.uuids[0], GPU0);
    gpu_inject_done(&g);
}

static void test_cuda_visible_devices(void **state)
{
    struct gpu_inject g;
    /* Slurm's allocation of GPU 1: inside it is the only one, device 0. */
    plan_ok(&(struct run){.host_env = {"CUDA_VISIBLE_DEVICES=1"},
                          .image_env = {"NVIDIA_VISIBLE_DEVICES=all"}},
            &g);
    assert_int_equal(g.n_gpus, 1);
    assert_string_equal(g.uuids[0], GPU1);
    assert_text(env_text, &g, "NVIDIA_VISIBLE_DEVICES=" GPU1 "\nCUDA_VISIBLE_DEVICES=0\n");
    gpu_inject_done(&g);
    /* Both GPUs given, the caller holding GPU 1: its position inside. */
    plan_ok(&(struct run){.gpus = "all", .host_env = {"CUDA_VISIBLE_DEVICES=1"}}, &g);
    assert_text(env_text, &g, "NVIDIA_VISIBLE_DEVICES=" GPU0 "," GPU1 "\nCUDA_VISIBLE_DEVICES=1\n");
    gpu_inject_done(&g);
    /* UUIDs are the same inside: kept. */
    plan_ok(&(struct run){.host_env = {"CUDA_VISIBLE_DEVICES=" GPU0}}, &g);
    assert_string_equal(g.uuids[0], GPU0);
    assert_text(env_text, &g, "NVIDIA_VISIBLE_DEVICES=" GPU0 "\nCUDA_VISIBLE_DEVICES=" GPU0 "\n");
    gpu_inject_done(&g);
}

static void test_capabilities_utility(void **state)
{
    struct gpu_inject g;
    plan_ok(&(struct run){.gpus = "0", .host_env = {"NVIDIA_DRIVER_CAPABILITIES=utility"}}, &g);
    assert_text(mounts_text, &g,
                "/dev/nvidiactl <- =\n/dev/nvidia0 <- =\n/dev/nvidia-uvm <- =\n"
                "/dev/nvidia-uvm-tools <- =\n" LIBDIR "/libnvidia-ml.so." V " <- = ro\n" LIBDIR
                "/libnvidia-cfg.so." V " <- = ro\n/usr/bin/nvidia-smi <- = ro\n" PROC_MOUNT
                "/lib/firmware/nvidia/" V " <- = ro\n");
    assert_text(links_text, &g,
                LIBDIR "/libnvidia-ml.so.1 -> libnvidia-ml.so." V "\n" LIBDIR
                       "/libnvidia-cfg.so.1 -> libnvidia-cfg.so." V "\n");
    gpu_inject_done(&g);
}

static void test_capabilities_all(void **state)
{
    struct gpu_inject g;
    /* The caller's value wins over the image's. */
    plan_ok(&(struct run){.gpus = "0",
                          .host_env = {"NVIDIA_DRIVER_CAPABILITIES=all"},
                          .image_env = {"NVIDIA_DRIVER_CAPABILITIES=utility"}},
            &g);
    assert_text(mounts_text, &g,
                "/dev/nvidiactl <- =\n/dev/nvidia0 <- =\n/dev/nvidia-uvm <- =\n"
                "/dev/nvidia-uvm-tools <- =\n/dev/nvidia-modeset <- =\n" LIBDIR
                "/libnvidia-ml.so." V " <- = ro\n" LIBDIR "/libnvidia-cfg.so." V " <- = ro\n" LIBDIR
                "/libcuda.so." V " <- = ro\n" LIBDIR "/libnvidia-ptxjitcompiler.so." V
                " <- = ro\n" LIBDIR "/libnvidia-encode.so." V " <- = ro\n" LIBDIR
                "/libnvidia-opticalflow.so.1 <- = ro\n" LIBDIR "/libnvcuvid.so." V
                " <- = ro\n" LIBDIR "/libnvidia-eglcore.so." V " <- = ro\n" LIBDIR
                "/libEGL_nvidia.so." V " <- = ro\n/usr/bin/nvidia-smi <- = ro\n" PROC_MOUNT
                "/lib/firmware/nvidia/" V " <- = ro\n");
    /* eglcore's soname is its file name and opticalflow has no other: no link for them. */
    assert_text(links_text, &g,
                DRIVER_LINKS LIBDIR "/libnvidia-encode.so.1 -> libnvidia-encode.so." V "\n" LIBDIR
                                    "/libnvcuvid.so.1 -> libnvcuvid.so." V "\n" LIBDIR
                                    "/libEGL_nvidia.so.0 -> libEGL_nvidia.so." V "\n");
    assert_no_stale(&g);
    gpu_inject_done(&g);
}

static void test_capabilities_video_from_image(void **state)
{
    struct gpu_inject g;
    plan_ok(&(struct run){.gpus = "0", .image_env = {"NVIDIA_DRIVER_CAPABILITIES=video"}}, &g);
    assert_text(links_text, &g,
                LIBDIR "/libnvidia-encode.so.1 -> libnvidia-encode.so." V "\n" LIBDIR
                       "/libnvcuvid.so.1 -> libnvcuvid.so." V "\n");
    assert_true(has_target(&g, LIBDIR "/libnvidia-opticalflow.so.1"));
    assert_false(has_target(&g, LIBDIR "/libcuda.so." V));
    assert_false(has_target(&g, LIBDIR "/libnvidia-ml.so." V));
    assert_false(has_target(&g, "/usr/bin/nvidia-smi"));
    gpu_inject_done(&g);

    struct errmsg e;
    assert_int_equal(
        plan(&(struct run){.gpus = "0", .image_env = {"NVIDIA_DRIVER_CAPABILITIES=compute,vidoe"}},
             &g, &e),
        -EINVAL);
    assert_non_null(strstr(e.text, "'vidoe'"));
    assert_non_null(strstr(e.text, "the image's NVIDIA_DRIVER_CAPABILITIES"));
}

static void test_require(void **state)
{
    struct gpu_inject g;
    struct errmsg e;
    assert_int_equal(
        plan(&(struct run){.gpus = "0", .image_env = {"NVIDIA_REQUIRE_CUDA=cuda>=13.1"}}, &g, &e),
        -EPERM);
    assert_non_null(strstr(e.text, "cuda>=13.1"));
    assert_non_null(strstr(e.text, "NVIDIA_REQUIRE_CUDA"));
    assert_non_null(strstr(e.text, V)); /* names the driver there is */
    assert_non_null(strstr(e.text, "13.0"));
    /* An older CUDA: the table names the driver it needs, and the check passes. */
    plan_ok(&(struct run){.gpus = "0", .image_env = {"NVIDIA_REQUIRE_CUDA=cuda>=12.0"}}, &g);
    assert_int_equal(g.n_gpus, 1);
    gpu_inject_done(&g);
    /* The H200 is compute capability 9.0. */
    assert_int_equal(
        plan(&(struct run){.gpus = "0", .image_env = {"NVIDIA_REQUIRE_ARCH=arch>=10.0"}}, &g, &e),
        -EPERM);
    /* Switched off by the user or by the image. */
    plan_ok(&(struct run){.gpus = "0",
                          .host_env = {"NVIDIA_DISABLE_REQUIRE=1"},
                          .image_env = {"NVIDIA_REQUIRE_CUDA=cuda>=13.1"}},
            &g);
    assert_int_equal(g.n_gpus, 1);
    gpu_inject_done(&g);
    plan_ok(&(struct run){.gpus = "0",
                          .image_env = {"NVIDIA_REQUIRE_CUDA=cuda>=13.1",
                                        "NVIDIA_DISABLE_REQUIRE=true"}},
            &g);
    gpu_inject_done(&g);
}

static void test_no_nvml(void **state)
{
    char *bare = driver_tree_make(tmp, "no-nvml");
    if (!bare) {
        fail_msg("cannot make a driver tree");
        return;
    }
    assert_int_equal(driver_tree_sh("rm -f '%s'/usr/lib/x86_64-linux-gnu/libnvidia-ml.*", bare), 0);
    struct gpu_inject g;
    struct errmsg e;
    assert_int_equal(plan(&(struct run){.gpus = "0", .root = bare}, &g, &e), -ENOENT);
    char want[512];
    snprintf(want, sizeof(want),
             "libnvidia-ml.so.1 not found under %s: is the NVIDIA driver installed?", bare);
    assert_string_equal(e.text, want);
    /* NVML named explicitly: a compute-only container needs no libnvidia-ml in the tree. */
    plan_ok(&(struct run){.gpus = "0",
                          .root = bare,
                          .nvml = DRIVER_TREE_FAKE_NVML,
                          .host_env = {"NVIDIA_DRIVER_CAPABILITIES=compute"}},
            &g);
    assert_int_equal(g.n_gpus, 1);
    assert_true(has_target(&g, LIBDIR "/libcuda.so." V));
    gpu_inject_done(&g);
    /* An image that merely says "all" runs without GPUs on such a host. */
    assert_nothing(&(struct run){.image_env = {"NVIDIA_VISIBLE_DEVICES=all"}, .root = bare});
    driver_tree_sh("rm -rf '%s'", bare);
    free(bare);
}

static void test_driver_not_loaded(void **state)
{
    char *fixture;
    assert_true(asprintf(&fixture, "%s/no-driver.json", DRIVER_TREE_FIXTURES) > 0);
    setenv("FAKE_NVML_FIXTURE", fixture, 1);
    struct gpu_inject g;
    struct errmsg e;
    int rc = plan(&(struct run){.gpus = "all"}, &g, &e);
    assert_non_null(strstr(e.text, "Driver Not Loaded"));
    assert_non_null(strstr(e.text, "nvmlInit"));
    assert_nothing(&(struct run){.image_env = {"NVIDIA_VISIBLE_DEVICES=all"}});
    setenv("FAKE_NVML_FIXTURE", DRIVER_TREE_FIXTURE, 1);
    free(fixture);
    assert_int_equal(rc, -ENODEV);
}

static void test_missing_device_node(void **state)
{
    char *t = driver_tree_make(tmp, "no-nodes");
    if (!t) {
        fail_msg("cannot make a driver tree");
        return;
    }
    assert_int_equal(
        driver_tree_sh("rm -f '%s/dev/nvidia1' '%s/dev/nvidia-caps/nvidia-cap22'", t, t), 0);
    struct gpu_inject g;
    struct errmsg e;
    assert_int_equal(plan(&(struct run){.gpus = "1", .root = t}, &g, &e), -ENOENT);
    assert_non_null(strstr(e.text, "/dev/nvidia1"));
    assert_int_equal(driver_tree_sh("touch '%s/dev/nvidia1'", t), 0);
    assert_int_equal(plan(&(struct run){.gpus = MIG2, .root = t}, &g, &e), -ENOENT);
    assert_non_null(strstr(e.text, "nvidia-cap22"));
    /* A MIG device whose capability file is gone. */
    assert_int_equal(driver_tree_sh("rm -rf '%s/proc/driver/nvidia/capabilities/gpu1/mig/gi1'", t),
                     0);
    assert_int_equal(plan(&(struct run){.gpus = MIG1, .root = t}, &g, &e), -ENOENT);
    assert_non_null(strstr(e.text, MIG1));
    assert_non_null(strstr(e.text, "gpu1/mig/gi1/access"));
    driver_tree_sh("rm -rf '%s'", t);
    free(t);
}

static void test_lib_dir(void **state)
{
    struct gpu_inject g;
    plan_ok(&(struct run){.gpus = "0", .layers = 1}, &g);
    assert_string_equal(g.lib_dir, "/usr/lib64");
    assert_true(has_target(&g, "/usr/lib64/libcuda.so." V));
    assert_text(env_text, &g, "NVIDIA_VISIBLE_DEVICES=" GPU0 "\n");
    gpu_inject_done(&g);
    plan_ok(&(struct run){.gpus = "0", .layers = 2}, &g);
    assert_string_equal(g.lib_dir, "/usr/lib");
    gpu_inject_done(&g);
}

struct lines {
    int n, bad;
    char text[8][256];
};

static void collect(const struct gpu_check_line *l, void *userdata)
{
    struct lines *c = userdata;
    if (c->n < 8)
        memcpy(c->text[c->n], l->text, sizeof(l->text));
    c->n++;
    c->bad += !l->ok;
}

static void test_check(void **state)
{
    struct lines c = {0};
    gpu_inject_check(tree, collect, &c);
    for (int i = 0; i < c.n && i < 8; i++)
        print_message("%s\n", c.text[i]);
    assert_int_equal(c.n, 6);
    assert_int_equal(c.bad, 0);
    assert_string_equal(c.text[0], "driver " V ", CUDA 13.0, 2 GPUs: NVIDIA H200, NVIDIA H200 "
                                   "(MIG, 2 devices)");
    assert_non_null(strstr(c.text[2], "utility: libnvidia-ml.so." V));
    assert_non_null(strstr(c.text[2], "nvidia-smi"));
    assert_non_null(strstr(c.text[3], "compute: libcuda.so." V));
    assert_non_null(strstr(c.text[3], "ignored 1 file of another driver"));

    char *t = driver_tree_make(tmp, "check-broken");
    assert_non_null(t);
    assert_int_equal(
        driver_tree_sh("rm -f '%s/dev/nvidia-uvm' '%s'/usr/lib/x86_64-linux-gnu/libcuda.*", t, t),
        0);
    memset(&c, 0, sizeof(c));
    gpu_inject_check(t, collect, &c);
    assert_int_equal(c.n, 6);
    assert_int_equal(c.bad, 2);
    assert_non_null(strstr(c.text[1], "/dev/nvidia-uvm: No such file"));
    assert_non_null(strstr(c.text[3], "compute: no libcuda.so." V " under "));
    assert_non_null(strstr(c.text[3], "(found: libnvidia-ptxjitcompiler.so." V ")"));
    assert_int_equal(driver_tree_sh("rm -f '%s'/usr/lib/x86_64-linux-gnu/libnvidia-ml.*", t), 0);
    memset(&c, 0, sizeof(c));
    gpu_inject_check(t, collect, &c);
    assert_int_equal(c.n, 2);
    assert_non_null(strstr(c.text[0], "libnvidia-ml.so.1 not found under"));
    driver_tree_sh("rm -rf '%s'", t);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gpu_0_exact),
        cmocka_unit_test(test_gpus_all),
        cmocka_unit_test(test_gpu_1_and_uuid_prefix),
        cmocka_unit_test(test_mig_uuid),
        cmocka_unit_test(test_none),
        cmocka_unit_test(test_unknown_id),
        cmocka_unit_test(test_env_sources),
        cmocka_unit_test(test_cuda_visible_devices),
        cmocka_unit_test(test_capabilities_utility),
        cmocka_unit_test(test_capabilities_all),
        cmocka_unit_test(test_capabilities_video_from_image),
        cmocka_unit_test(test_require),
        cmocka_unit_test(test_no_nvml),
        cmocka_unit_test(test_driver_not_loaded),
        cmocka_unit_test(test_missing_device_node),
        cmocka_unit_test(test_lib_dir),
        cmocka_unit_test(test_check),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
