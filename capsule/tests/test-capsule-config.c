/* Tests for capsule's config files: defaults, the user file over the system file, and errors
 * that name file, line and key. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-skip.h"

#include "capsule/capsule-config.h"
#include "lib/strv.h"

static char dir[] = "/tmp/capsule-config-test-XXXXXX";

static int setup(void **state)
{
    if (!mkdtemp(dir))
        return -1;
    setenv("HOME", "/home/tester", 1);
    setenv("XDG_CACHE_HOME", "/xdg/cache", 1);
    unsetenv("XDG_DATA_HOME");
    setenv("XDG_CONFIG_HOME", "relative/ignored", 1);
    return 0;
}

static int teardown(void **state)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    return system(cmd);
}

static const char *write_file(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_defaults_follow_xdg(void **state)
{
    struct capsule_config c;
    char missing[600];
    snprintf(missing, sizeof(missing), "%s/none.conf", dir);
    assert_int_equal(capsule_config_load(missing, missing, &c, NULL), 0);
    assert_string_equal(c.cache_dir, "/xdg/cache/capsule");
    /* Unset XDG_DATA_HOME and a relative XDG_CONFIG_HOME fall back to the home directory. */
    assert_string_equal(c.data_dir, "/home/tester/.local/share/capsule");
    assert_string_equal(c.credentials, "/home/tester/.config/capsule/credentials");
    assert_string_equal(c.docker_config, "/home/tester/.docker/config.json");
    assert_string_equal(c.driver_root, "/");
    assert_int_equal(c.parallel_downloads, 4);
    assert_true(c.max_layer_size == 64ull << 30);
    assert_int_equal(strv_length(c.insecure_registries), 0);
    assert_null(c.loaded_from[0]);
    capsule_config_done(&c);
}

static void test_user_file_overrides_system_file(void **state)
{
    char sys[600];
    snprintf(sys, sizeof(sys), "%s",
             write_file("sys.conf", "[capsule]\n"
                                    "cache_dir = /var/cache/capsule\n"
                                    "insecure_registries = reg:5000\n"
                                    "mounts = /data:/data:ro\n"
                                    "rootfs = copy\n"));
    const char *user = write_file("user.conf", "[capsule]\n"
                                               "cache_dir = ~/fast/cache\n"
                                               "parallel_downloads = 8\n"
                                               "max_layer_size = 0\n"
                                               "remap_root = yes\n");
    struct capsule_config c;
    assert_int_equal(capsule_config_load(sys, user, &c, NULL), 0);
    assert_string_equal(c.cache_dir, "/home/tester/fast/cache");
    assert_true(strv_contains(c.insecure_registries, "reg:5000"));
    assert_string_equal(c.mounts[0], "/data:/data:ro");
    assert_int_equal(c.rootfs_mode, RUNTIME_ROOTFS_COPY);
    assert_int_equal(c.parallel_downloads, 8);
    assert_true(c.max_layer_size == 0);
    assert_true(c.remap_root);
    assert_string_equal(c.loaded_from[0], sys);
    capsule_config_done(&c);
}

/* node_cache and fuse_overlayfs; $CAPSULE_SYSTEM_CONFIG takes the place of /etc/capsule.conf. */
static void test_node_cache_and_system_file_override(void **state)
{
    char sys[600];
    snprintf(sys, sizeof(sys), "%s",
             write_file("node.conf", "[capsule]\n"
                                     "node_cache = /run/capsule/cache.sock\n"
                                     "fuse_overlayfs = /opt/bin/fuse-overlayfs\n"));
    setenv("CAPSULE_SYSTEM_CONFIG", sys, 1);
    struct capsule_config c;
    assert_int_equal(capsule_config_load(NULL, "/nonexistent/user.conf", &c, NULL), 0);
    unsetenv("CAPSULE_SYSTEM_CONFIG");
    assert_string_equal(c.node_cache, "/run/capsule/cache.sock");
    assert_string_equal(c.fuse_overlayfs, "/opt/bin/fuse-overlayfs");
    assert_string_equal(c.loaded_from[0], sys);
    capsule_config_done(&c);
    const char *user = write_file("relative.conf", "[capsule]\nnode_cache = cache.sock\n");
    struct errmsg e = {{0}};
    assert_int_equal(capsule_config_load("/nonexistent/capsule.conf", user, &c, &e), -EINVAL);
    assert_non_null(strstr(e.text, "node_cache: 'cache.sock' is not an absolute path"));
}

static void expect_error(const char *text, const char *needle)
{
    const char *path = write_file("bad.conf", text);
    struct capsule_config c;
    struct errmsg e = {{0}};
    int r = capsule_config_load("/nonexistent/capsule.conf", path, &c, &e);
    /* Out-of-range numbers are -ERANGE, everything else -EINVAL. */
    assert_true(r == -EINVAL || r == -ERANGE);
    if (!strstr(e.text, needle))
        fail_msg("message '%s' lacks '%s'", e.text, needle);
}

static void test_errors_name_file_line_key(void **state)
{
    expect_error("[capsule]\ncache_dir = relative\n", "bad.conf:2: [capsule] cache_dir");
    expect_error("[capsule]\nrootfs = fuse\n", "'fuse' is not auto, overlay or copy");
    expect_error("[capsule]\nparallel_downloads = 0\n", "parallel_downloads");
    expect_error("[capsule]\ncahce_dir = /x\n", "unknown key 'cahce_dir'");
    expect_error("[capsule]\nmounts = /a:/b /c\n", "bad.conf:2: [capsule] mounts");
    expect_error("[capsule]\nmax_layer_size = 1.5G\n", "'1.5G' is not a size");
}

/* The shipped example must load: users start from it. */
static void test_deploy_example_loads(void **state)
{
    const char *src = getenv("CAPSULE_TEST_SOURCE_DIR");
    if (!src)
        test_skip("CAPSULE_TEST_SOURCE_DIR is not set (meson test sets it)");
    char path[1024];
    snprintf(path, sizeof(path), "%s/../../deploy/capsule.conf.example", src);
    struct capsule_config c;
    struct errmsg e = {{0}};
    if (capsule_config_load(path, "/nonexistent/capsule.conf", &c, &e) < 0)
        fail_msg("%s", e.text);
    assert_string_equal(c.loaded_from[0], path);
    capsule_config_done(&c);
}

static void test_parse_mount(void **state)
{
    struct mount_entry m;
    struct errmsg e = {{0}};
    assert_int_equal(capsule_parse_mount("/scratch:/scratch", &m, &e), 0);
    assert_string_equal(m.source, "/scratch");
    assert_string_equal(m.target, "/scratch");
    assert_false(m.flags & MOUNT_RO);
    mount_entry_done(&m);
    assert_int_equal(capsule_parse_mount("/ds:/data:ro", &m, &e), 0);
    assert_true(m.flags & MOUNT_RO);
    mount_entry_done(&m);
    assert_int_equal(capsule_parse_mount("/a", &m, &e), -EINVAL);
    assert_int_equal(capsule_parse_mount("rel:/b", &m, &e), -EINVAL);
    assert_non_null(strstr(e.text, "source 'rel'"));
    assert_int_equal(capsule_parse_mount("/a:b", &m, &e), -EINVAL);
    assert_int_equal(capsule_parse_mount("/a:/b:rx", &m, &e), -EINVAL);
    assert_non_null(strstr(e.text, "'rx' is not ro or rw"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_follow_xdg),
        cmocka_unit_test(test_user_file_overrides_system_file),
        cmocka_unit_test(test_node_cache_and_system_file_override),
        cmocka_unit_test(test_errors_name_file_line_key),
        cmocka_unit_test(test_deploy_example_loads),
        cmocka_unit_test(test_parse_mount),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
