/* The Docker Engine client against a fake engine served on a Unix socket by lib's HTTP server:
 * listing, concurrent stops with the grace period, confirmation, errors, and an engine that
 * hangs or is not there at all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test-main.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "lib/clock.h"
#include "docker.h"
#include "hooks.h"
#include "lib/http-server.h"
#include "lib/macro.h"
#include "fake-docker.h"

/* ---- the tests ---- */

static void test_list_running(void **state)
{
    struct fake_docker *f = fake_new(3);
    f->c[1].running = false;
    struct docker_container *c = NULL;
    size_t n = 0;
    struct errmsg e = {{0}};
    /* The "unix://" form of the socket works too. */
    char url[128];
    snprintf(url, sizeof(url), "unix://%s", f->sock);
    assert_int_equal(docker_list_running(url, clock_now_usec() + 2000000u, &c, &n, &e), 0);
    assert_int_equal(n, 2);
    assert_string_equal(c[0].name, "trainer");
    assert_string_equal(c[0].id, f->c[0].id);
    assert_string_equal(c[1].name, "etl");
    free(c);
    fake_free(f);
}

static void test_stops_are_concurrent_with_grace(void **state)
{
    struct fake_docker *f = fake_new(4);
    f->stop_barrier = 4; /* nobody gets an answer before all four stops are in */
    struct docker_container c[4];
    for (size_t i = 0; i < 4; i++) {
        snprintf(c[i].id, sizeof(c[i].id), "%s", f->c[i].id);
        snprintf(c[i].name, sizeof(c[i].name), "%s", f->c[i].name);
    }
    f->c[3].running = false; /* already stopped: 304 */
    struct docker_stop_result res[4];
    uint64_t start = clock_now_usec();
    assert_int_equal(docker_stop_all(f->sock, c, 4, 7, start + 10000000u, res), 4);
    assert_true(clock_now_usec() - start < 3000000u);
    assert_false(f->barrier_missed);
    assert_int_equal(fake_count_calls(f, "POST /containers/"), 4);
    for (size_t i = 0; i < 4; i++) {
        char expect[160];
        assert_true(snprintf(expect, sizeof(expect), "POST /containers/%s/stop t=7", c[i].id) <
                    (int)sizeof(expect));
        assert_int_equal(fake_count_calls(f, expect), 1);
        assert_int_equal(res[i].r, 0);
    }
    assert_int_equal(res[0].status, 204);
    assert_false(res[0].already_stopped);
    assert_int_equal(res[3].status, 304);
    assert_true(res[3].already_stopped);
    fake_free(f);
}

static void test_running_and_wait(void **state)
{
    struct fake_docker *f = fake_new(2);
    struct docker_container c[3] = {0};
    for (size_t i = 0; i < 2; i++)
        snprintf(c[i].id, sizeof(c[i].id), "%s", f->c[i].id);
    snprintf(c[2].id, sizeof(c[2].id), "%s", "deadbeef"); /* unknown: 404, counts as stopped */
    bool running = false;
    struct errmsg e = {{0}};
    assert_int_equal(
        docker_container_running(f->sock, c[0].id, clock_now_usec() + 1000000u, &running, &e), 0);
    assert_true(running);
    assert_int_equal(
        docker_container_running(f->sock, "deadbeef", clock_now_usec() + 1000000u, &running, &e),
        0);
    assert_false(running);
    assert_int_equal(
        docker_container_running(f->sock, "../x", clock_now_usec() + 1000000u, &running, &e),
        -EINVAL);

    /* Container 0 takes 300 ms to go down after its stop; container 1 never stops. */
    f->c[0].linger_ms = 300;
    struct docker_stop_result res[1];
    assert_int_equal(docker_stop_all(f->sock, c, 1, 5, clock_now_usec() + 2000000u, res), 1);
    bool left[3];
    uint64_t start = clock_now_usec();
    assert_int_equal(docker_wait_stopped(f->sock, c, 3, start + 800000u, 50, left, &e), 1);
    assert_false(left[0]);
    assert_true(left[1]);
    assert_false(left[2]);
    uint64_t took = clock_now_usec() - start;
    assert_true(took >= 700000u && took < 1500000u);

    /* Once all are down it returns at once. */
    c[1] = c[2];
    start = clock_now_usec();
    assert_int_equal(docker_wait_stopped(f->sock, c, 2, start + 5000000u, 50, left, &e), 0);
    assert_true(clock_now_usec() - start < 1000000u);
    fake_free(f);
}

static void test_engine_errors(void **state)
{
    struct fake_docker *f = fake_new(1);
    fake_set_mode(f, FAKE_FAIL);
    struct docker_container *list = NULL;
    size_t n = 0;
    struct errmsg e = {{0}};
    assert_int_equal(docker_list_running(f->sock, clock_now_usec() + 1000000u, &list, &n, &e),
                     -EPROTO);
    assert_non_null(strstr(e.text, "HTTP 500"));
    assert_non_null(strstr(e.text, "engine on fire"));
    struct docker_container c = {0};
    snprintf(c.id, sizeof(c.id), "%s", f->c[0].id);
    struct docker_stop_result res;
    assert_int_equal(docker_stop_all(f->sock, &c, 1, 5, clock_now_usec() + 1000000u, &res), 0);
    assert_int_equal(res.r, -EPROTO);
    assert_non_null(strstr(res.error, "engine on fire"));
    fake_free(f);

    /* No engine at all: a missing socket fails at once. */
    uint64_t start = clock_now_usec();
    int r = docker_list_running("/nonexistent/docker.sock", start + 5000000u, &list, &n, &e);
    assert_true(r == -ENOENT || r == -ECONNREFUSED);
    assert_non_null(strstr(e.text, "/nonexistent/docker.sock"));
    assert_true(clock_now_usec() - start < 1000000u);

    /* No time left: no call is made at all. */
    assert_int_equal(
        docker_list_running("/nonexistent/docker.sock", clock_now_usec(), &list, &n, &e),
        -ETIMEDOUT);
}

static void test_hanging_engine_bounded_by_deadline(void **state)
{
    /* An engine whose handlers never answer... */
    struct fake_docker *f = fake_new(3);
    fake_set_mode(f, FAKE_HANG);
    struct docker_container c[3] = {0};
    for (size_t i = 0; i < 3; i++)
        snprintf(c[i].id, sizeof(c[i].id), "%s", f->c[i].id);
    struct docker_stop_result res[3];
    uint64_t start = clock_now_usec();
    assert_int_equal(docker_stop_all(f->sock, c, 3, 20, start + 500000u, res), 0);
    uint64_t took = clock_now_usec() - start;
    assert_true(took < 1000000u);
    for (size_t i = 0; i < 3; i++)
        assert_int_equal(res[i].r, -ETIMEDOUT);
    fake_free(f);

    /* ...and one that accepts connections but never even reads them. */
    char dir[] = "/tmp/hung-docker-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/docker.sock", dir);
    int fd = hung_socket(path);
    struct docker_container *list = NULL;
    size_t n = 0;
    struct errmsg e = {{0}};
    start = clock_now_usec();
    assert_int_equal(docker_list_running(path, start + 300000u, &list, &n, &e), -ETIMEDOUT);
    assert_true(clock_now_usec() - start < 800000u);
    close(fd);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_list_running),
        cmocka_unit_test(test_stops_are_concurrent_with_grace),
        cmocka_unit_test(test_running_and_wait),
        cmocka_unit_test(test_engine_errors),
        cmocka_unit_test(test_hanging_engine_bounded_by_deadline),
    };
    return test_run_cases(tests);
}
