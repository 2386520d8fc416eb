/* Tests for named containers' state: atomic creation, name clashes, running detection by lock,
 * and the sweep that removes what crashed runs left. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "capsule/containers.h"
#include "lib/macro.h"
#include "lib/strv.h"

static char data[] = "/tmp/capsule-containers-test-XXXXXX";

static int setup(void **state)
{
    return mkdtemp(data) ? 0 : -1;
}

static int teardown(void **state)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", data);
    return system(cmd);
}

static char *layers[] = {"sha256:1111111111111111111111111111111111111111111111111111111111111111",
                         NULL};
static char *args[] = {"sleep", "1", NULL};
static char *no_strings[] = {NULL};

static struct container sample(const char *name, bool ephemeral)
{
    return (struct container){
        .name = (char *)name,
        .image = "docker.io/library/busybox:latest",
        .config_digest = "sha256:2222222222222222222222222222222222222222222222222222222222222222",
        .layers = layers,
        .args = args,
        .user_env = no_strings,
        .mounts = no_strings,
        .gpus = "0",
        .writable = true,
        .ephemeral = ephemeral,
        .created_at = 1700000000,
    };
}

static void test_create_load_roundtrip(void **state)
{
    struct container c = sample("web", false);
    struct errmsg e = {{0}};
    assert_int_equal(container_create(data, &c, NULL, &e), 0);
    struct container l;
    assert_int_equal(container_load(data, "web", &l, &e), 0);
    assert_string_equal(l.image, c.image);
    assert_string_equal(l.layers[0], layers[0]);
    assert_string_equal(l.args[1], "1");
    assert_string_equal(l.gpus, "0");
    assert_null(l.entrypoint);
    assert_null(l.driver_root);
    assert_true(l.writable);
    assert_false(l.running);
    assert_int_equal(l.last_exit, -1);
    container_done(&l);
    /* A writable container has its own upper layer. */
    char path[512];
    struct stat st;
    snprintf(path, sizeof(path), "%s/containers/web/upper", data);
    assert_int_equal(stat(path, &st), 0);

    assert_int_equal(container_create(data, &c, NULL, &e), -EEXIST);
    assert_non_null(strstr(e.text, "'web' already exists"));
    /* Nothing half-made stays behind from the failed attempt. */
    size_t n;
    struct container *list;
    assert_int_equal(container_list(data, &list, &n, &e), 0);
    assert_int_equal(n, 1);
    container_done(&list[0]);
    free(list);
}

static void test_lock_means_running(void **state)
{
    struct container c = sample("job", false);
    struct errmsg e = {{0}};
    assert_int_equal(container_create(data, &c, NULL, &e), 0);
    int fd;
    assert_int_equal(container_lock(data, "job", &fd, &e), 0);
    assert_int_equal(container_set_pid(data, "job", 4242), 0);
    struct container l;
    assert_int_equal(container_load(data, "job", &l, &e), 0);
    assert_true(l.running);
    assert_int_equal(l.pid, 4242);
    container_done(&l);
    int fd2;
    assert_int_equal(container_lock(data, "job", &fd2, &e), -EBUSY);
    assert_non_null(strstr(e.text, "already running (pid 4242)"));
    assert_int_equal(container_remove(data, "job", &e), -EBUSY);
    close(fd);
    assert_int_equal(container_set_exit(data, "job", 3), 0);
    assert_int_equal(container_load(data, "job", &l, &e), 0);
    assert_false(l.running);
    assert_int_equal(l.last_exit, 3);
    container_done(&l);
    /* A second start: until it records its pid, the first run's (maybe reused by now) is not
     * shown, so rm -f cannot kill it and exec cannot enter it. */
    assert_int_equal(container_lock(data, "job", &fd, &e), 0);
    assert_int_equal(container_load(data, "job", &l, &e), 0);
    assert_true(l.running);
    assert_int_equal(l.pid, 0);
    container_done(&l);
    close(fd);
    assert_int_equal(container_remove(data, "job", &e), 0);
    assert_int_equal(container_load(data, "job", &l, &e), -ENOENT);
    assert_int_equal(container_remove(data, "job", &e), -ENOENT);
}

static void test_sweep_removes_dead_ephemeral(void **state)
{
    struct container c = sample("tmp1", true);
    struct errmsg e = {{0}};
    int fd = -1;
    assert_int_equal(container_create(data, &c, &fd, &e), 0);
    /* Held by its runner: the sweep leaves it. */
    containers_sweep(data);
    struct container l;
    assert_int_equal(container_load(data, "tmp1", &l, &e), 0);
    assert_true(l.running);
    container_done(&l);
    /* The runner dies (its lock goes with it): the next sweep removes it. */
    close(fd);
    containers_sweep(data);
    assert_int_equal(container_load(data, "tmp1", &l, &e), -ENOENT);
}

static void test_in_use_and_names(void **state)
{
    struct container c = sample("keep", false);
    struct errmsg e = {{0}};
    assert_int_equal(container_create(data, &c, NULL, &e), 0);
    _cleanup_strv_free_ char **keep = NULL;
    assert_int_equal(containers_digests_in_use(data, &keep, &e), 0);
    assert_true(strv_contains(keep, layers[0]));
    assert_true(strv_contains(keep, c.config_digest));
    assert_int_equal(container_name_check("ok-name_1.2", &e), 0);
    assert_int_equal(container_name_check("../x", &e), -EINVAL);
    assert_int_equal(container_name_check("", &e), -EINVAL);
    assert_int_equal(container_name_check("-x", &e), -EINVAL);
    assert_int_equal(container_name_check("a/b", &e), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_create_load_roundtrip),
        cmocka_unit_test(test_lock_means_running),
        cmocka_unit_test(test_sweep_removes_dead_ephemeral),
        cmocka_unit_test(test_in_use_and_names),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
