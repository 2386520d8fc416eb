/* Finding driver files under a driver root: capability names, symlinks resolved inside the root,
 * `ldconfig -p` output, version matching, MIG capability files, and the search on the stand-in
 * driver tree. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "capsule/gpu/driver-files.h"
#include "lib/strv.h"
#include "tests/driver-tree/driver-tree.h"

#define V "580.159.04"

static char *tmp, *tree;

static int group_setup(void **state)
{
    tmp = driver_tree_tmpdir();
    if (!tmp || !(tree = driver_tree_make(tmp, "root")))
        return -1;
    return 0;
}

static int group_teardown(void **state)
{
    if (tmp)
        driver_tree_sh("rm -rf '%s'", tmp);
    free(tmp);
    free(tree);
    return 0;
}

static void test_caps_parse(void **state)
{
    unsigned caps;
    struct errmsg e = {{0}};
    assert_int_equal(driver_caps_parse("compute,utility", &caps, &e), 0);
    assert_int_equal(caps, DRIVER_CAP_COMPUTE | DRIVER_CAP_UTILITY);
    assert_int_equal(driver_caps_parse(" video , graphics ", &caps, &e), 0);
    assert_int_equal(caps, DRIVER_CAP_VIDEO | DRIVER_CAP_GRAPHICS);
    assert_int_equal(driver_caps_parse("all", &caps, &e), 0);
    assert_int_equal(caps, DRIVER_CAP_ALL);
    assert_int_equal(driver_caps_parse("display,ngx,compat32", &caps, &e), -EINVAL);
    assert_non_null(strstr(e.text, "'compat32'"));
    assert_int_equal(driver_caps_parse("display,ngx", &caps, &e), 0);
    assert_int_equal(caps, DRIVER_CAP_DISPLAY | DRIVER_CAP_NGX);
    assert_int_equal(driver_caps_parse("", &caps, &e), 0);
    assert_int_equal(caps, 0);
    assert_int_equal(driver_caps_parse("Compute", &caps, &e), -EINVAL);
    assert_non_null(strstr(e.text, "known: all, utility, compute"));
}

static void test_classify(void **state)
{
    assert_int_equal(driver_lib_classify("libcuda.so." V, "libcuda", V), DRIVER_LIB_VERSIONED);
    assert_int_equal(driver_lib_classify("libcuda.so.470.00", "libcuda", V), DRIVER_LIB_OTHER);
    assert_int_equal(driver_lib_classify("libcuda.so.580.159.0", "libcuda", V), DRIVER_LIB_OTHER);
    assert_int_equal(driver_lib_classify("libcuda.so.1", "libcuda", V), DRIVER_LIB_UNVERSIONED);
    assert_int_equal(driver_lib_classify("libcuda.so", "libcuda", V), DRIVER_LIB_UNVERSIONED);
    assert_int_equal(driver_lib_classify("libcudadebugger.so." V, "libcuda", V), DRIVER_LIB_OTHER);
    assert_int_equal(driver_lib_classify("libcuda.so.", "libcuda", V), DRIVER_LIB_OTHER);
    assert_int_equal(driver_lib_classify("libcuda.sox", "libcuda", V), DRIVER_LIB_OTHER);
    assert_int_equal(driver_lib_classify("libnvidia-ml.so." V, "libcuda", V), DRIVER_LIB_OTHER);
}

static void resolves(const char *root, const char *path, const char *want)
{
    char *got = NULL;
    int r = driver_resolve(root, path, &got);
    if (r != 0)
        fail_msg("%s: %d", path, r);
    assert_string_equal(got, want);
    free(got);
}

static void test_resolve_inside_root(void **state)
{
    char *r;
    assert_true(asprintf(&r, "%s/links", tmp) > 0);
    assert_int_equal(driver_tree_sh("mkdir -p %s/b %s/etc && echo x > %s/b/c && "
                                    "ln -s /b %s/a && ln -s ../../../../b %s/up && "
                                    "ln -s loop2 %s/loop1 && ln -s loop1 %s/loop2 && "
                                    "ln -s /etc/passwd %s/escape && ln -s c %s/b/rel && "
                                    "ln -s /b/nothing %s/dangling",
                                    r, r, r, r, r, r, r, r, r, r),
                     0);
    resolves(r, "/", "/");
    resolves(r, "/a/c", "/b/c");
    resolves(r, "/a/./c", "/b/c");
    resolves(r, "/up/c", "/b/c"); /* ".." stops at the root */
    resolves(r, "/b/../a/rel", "/b/c");
    resolves(r, "//a//rel/", "/b/c");
    char *got = NULL;
    assert_int_equal(driver_resolve(r, "/loop1", &got), -ELOOP);
    assert_int_equal(driver_resolve(r, "/b/c/d", &got), -ENOTDIR);
    assert_int_equal(driver_resolve(r, "/nothing", &got), -ENOENT);
    /* The host's /etc/passwd is not the root's. */
    assert_int_equal(driver_resolve(r, "/escape", &got), -ENOENT);
    assert_int_equal(driver_resolve(r, "/dangling", &got), -ENOENT);
    assert_null(got);
    assert_true(driver_path_exists(r, "/dangling"));
    assert_false(driver_path_exists(r, "/nothing"));
    /* The host's own root has an empty prefix. */
    char *prefix = driver_root_prefix("/");
    assert_string_equal(prefix, "");
    resolves(prefix, "/", "/");
    free(prefix);
    prefix = driver_root_prefix("/x/y//");
    assert_string_equal(prefix, "/x/y");
    free(prefix);
    free(r);
}

static void test_ldcache_parse(void **state)
{
    static const char text[] =
        "7 libs found in cache `/etc/ld.so.cache'\n"
        "\tlibnvidia-ml.so.1 (libc6,x86-64) => /usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1\n"
        "\tlibcuda.so.1 (libc6) => /usr/lib/i386-linux-gnu/libcuda.so.1\n"
        "\tlibcuda.so.1 (libc6,x86-64, OS ABI: Linux 3.2.0) => /usr/lib64/libcuda.so.1\n"
        "\tlibc.so.6 (libc6,x86-64, hwcap: 0x0000000000000002) => /lib/x86_64-linux-gnu/libc.so.6\n"
        "\tbroken (libc6,x86-64) => relative/path\n"
        "\tno arrow (libc6,x86-64)\n"
        "libfoo.so (libc6,x86-64) => /not/indented\n"
        "Cache generated by: ldconfig (GNU libc) stable release version 2.36\n"
        "\tlibEGL_nvidia.so.0 (libc6,x86-64) => /usr/lib/libEGL_nvidia.so.0";
    struct ldcache_entry *v;
    size_t n;
    struct errmsg e;
    assert_int_equal(ldcache_parse(text, sizeof(text) - 1, &v, &n, &e), 0);
    assert_int_equal(n, 4);
    assert_string_equal(v[0].name, "libnvidia-ml.so.1");
    assert_string_equal(v[0].path, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1");
    assert_string_equal(v[1].name, "libcuda.so.1");
    assert_string_equal(v[1].path, "/usr/lib64/libcuda.so.1");
    assert_string_equal(v[2].path, "/lib/x86_64-linux-gnu/libc.so.6");
    assert_string_equal(v[3].path, "/usr/lib/libEGL_nvidia.so.0");
    ldcache_free(v, n);
    assert_int_equal(ldcache_parse("", 0, &v, &n, &e), 0);
    assert_int_equal(n, 0);
    /* A NUL inside a line makes it no entry. */
    static const char nul[] = "\tlib\0x.so (libc6,x86-64) => /a\n\tliby.so (libc6,x86-64) => /b\n";
    assert_int_equal(ldcache_parse(nul, sizeof(nul) - 1, &v, &n, &e), 0);
    assert_int_equal(n, 1);
    assert_string_equal(v[0].name, "liby.so");
    ldcache_free(v, n);
}

static void test_ldcache_load(void **state)
{
    struct ldcache_entry *v;
    size_t n;
    struct errmsg e = {{0}};
    assert_int_equal(ldcache_load(tree, &v, &n, &e), 0);
    /* The stale driver's directory is listed first in ld.so.conf. */
    bool stale = false, current = false;
    for (size_t i = 0; i < n; i++) {
        stale |= strcmp(v[i].path, "/usr/local/nvidia/lib64/libcuda.so.1") == 0;
        current |= strcmp(v[i].path, "/usr/lib/x86_64-linux-gnu/libcuda.so.1") == 0;
    }
    assert_true(stale && current);
    ldcache_free(v, n);

    char *r;
    assert_true(asprintf(&r, "%s/bad-cache", tmp) > 0);
    assert_int_equal(driver_tree_sh("mkdir -p %s/etc", r), 0);
    assert_int_equal(ldcache_load(r, &v, &n, &e), 0); /* no cache: nothing, no error */
    assert_int_equal(n, 0);
    assert_int_equal(driver_tree_sh("echo garbage > %s/etc/ld.so.cache", r), 0);
    assert_int_equal(ldcache_load(r, &v, &n, &e), -EIO);
    assert_non_null(strstr(e.text, "/etc/ld.so.cache"));
    free(r);
}

static void test_nvcaps(void **state)
{
    unsigned minor;
    struct errmsg e = {{0}};
    const char ok[] = "DeviceFileMinor: 12\nDeviceFileMode: 292\nDeviceFileModify: 1\n";
    assert_int_equal(nvcaps_parse_minor(ok, sizeof(ok) - 1, &minor, &e), 0);
    assert_int_equal(minor, 12);
    const char last[] = "DeviceFileMode: 292\nDeviceFileMinor:\t7";
    assert_int_equal(nvcaps_parse_minor(last, sizeof(last) - 1, &minor, &e), 0);
    assert_int_equal(minor, 7);
    const char *bad[] = {"DeviceFileMinor: \n",
                         "DeviceFileMinor: 12x\n",
                         "DeviceFileMinor: 99999999999999999999\n",
                         "DeviceFileMinor: 1048576\n",
                         "DeviceFileMode: 292\n",
                         ""};
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        assert_int_equal(nvcaps_parse_minor(bad[i], strlen(bad[i]), &minor, &e), -EINVAL);
    assert_int_equal(nvcaps_read_minor(tree, 1, 2, -1, &minor, &e), 0);
    assert_int_equal(minor, 21);
    assert_int_equal(nvcaps_read_minor(tree, 1, 2, 0, &minor, &e), 0);
    assert_int_equal(minor, 22);
    assert_int_equal(nvcaps_read_minor(tree, 0, 1, -1, &minor, &e), -ENOENT);
    assert_non_null(strstr(e.text, "capabilities/gpu0/mig/gi1/access"));
}

static void test_find_files(void **state)
{
    struct driver_files f;
    struct errmsg e = {{0}};
    struct ldcache_entry *cache;
    size_t n_cache;
    assert_int_equal(ldcache_load(tree, &cache, &n_cache, &e), 0);
    assert_int_equal(
        driver_files_find(tree, cache, n_cache, DRIVER_CAP_COMPUTE | DRIVER_CAP_VIDEO, V, &f, &e),
        0);
    assert_int_equal(f.n_libs, 5);
    assert_string_equal(f.libs[0].path, "/usr/lib/x86_64-linux-gnu/libcuda.so." V);
    assert_string_equal(f.libs[0].soname, "libcuda.so.1");
    assert_int_equal(f.libs[0].cap, DRIVER_CAP_COMPUTE);
    assert_string_equal(f.libs[1].name, "libnvidia-ptxjitcompiler.so." V);
    assert_string_equal(f.libs[3].name, "libnvidia-opticalflow.so.1"); /* no versioned one */
    assert_null(f.libs[3].soname);
    assert_int_equal(f.libs[3].cap, DRIVER_CAP_VIDEO);
    assert_string_equal(f.skipped[0], "/usr/local/nvidia/lib64/libcuda.so.470.00");
    assert_null(f.skipped[1]);
    assert_int_equal(f.n_bins, 0); /* no MPS in the tree */
    assert_int_equal(f.missing, 0);
    driver_files_done(&f);

    assert_int_equal(
        driver_files_find(tree, cache, n_cache, DRIVER_CAP_UTILITY | DRIVER_CAP_DISPLAY, V, &f, &e),
        0);
    assert_int_equal(f.n_bins, 1);
    assert_string_equal(f.bins[0].path, "/usr/bin/nvidia-smi");
    assert_string_equal(f.bins[0].name, "nvidia-smi");
    driver_files_done(&f);

    /* Another driver's tree: nothing of it is this version's. */
    assert_int_equal(driver_files_find(tree, cache, n_cache, DRIVER_CAP_COMPUTE, "590.1.2", &f, &e),
                     0);
    assert_int_equal(f.n_libs, 0);
    assert_int_equal(f.missing, DRIVER_CAP_COMPUTE);
    driver_files_done(&f);

    /* Without the ld cache the directories still have everything. */
    assert_int_equal(driver_files_find(tree, NULL, 0, DRIVER_CAP_COMPUTE, V, &f, &e), 0);
    assert_int_equal(f.n_libs, 2);
    assert_string_equal(f.libs[0].soname, "libcuda.so.1");
    driver_files_done(&f);
    ldcache_free(cache, n_cache);
}

static void test_find_skips_wrong_files(void **state)
{
    char *t = driver_tree_make(tmp, "odd");
    assert_non_null(t);
    /* A text file with a library's name, a 32-bit ELF one, a newer copy in a later directory:
     * none of them is taken. */
    assert_int_equal(
        driver_tree_sh(
            "cd %s/usr/lib/x86_64-linux-gnu && rm libnvidia-ptxjitcompiler.* && "
            "echo text > libnvidia-ptxjitcompiler.so." V " && "
            "printf '\\177ELF\\001\\001\\001\\000\\000\\000\\000\\000\\000\\000\\000\\000"
            "\\003\\000\\003\\000' > libnvidia-nvvm.so." V " && "
            "mkdir -p %s/usr/lib64 && cp libcuda.so." V " %s/usr/lib64/",
            t, t, t),
        0);
    struct driver_files f;
    struct errmsg e = {{0}};
    struct ldcache_entry *c;
    size_t nc;
    assert_int_equal(ldcache_load(t, &c, &nc, &e), 0);
    assert_int_equal(driver_files_find(t, c, nc, DRIVER_CAP_COMPUTE, V, &f, &e), 0);
    assert_int_equal(f.n_libs, 1);
    assert_string_equal(f.libs[0].path, "/usr/lib/x86_64-linux-gnu/libcuda.so." V);
    driver_files_done(&f);
    char *nvml = NULL;
    assert_int_equal(driver_find_nvml(t, c, nc, &nvml, &e), 0);
    assert_string_equal(nvml, "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so." V);
    free(nvml);
    ldcache_free(c, nc);
    driver_tree_sh("rm -rf '%s'", t);
    free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_caps_parse),          cmocka_unit_test(test_classify),
        cmocka_unit_test(test_resolve_inside_root), cmocka_unit_test(test_ldcache_parse),
        cmocka_unit_test(test_ldcache_load),        cmocka_unit_test(test_nvcaps),
        cmocka_unit_test(test_find_files),          cmocka_unit_test(test_find_skips_wrong_files),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
