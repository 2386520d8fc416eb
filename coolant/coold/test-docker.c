/* The Docker Engine client against a fake engine served on a Unix socket by lib's HTTP server:
 * listing, concurrent stops with the grace period, confirmation, errors, and an engine that
 * hangs or is not there at all.
 *
 * test-shutdown.c includes this file with FAKE_DOCKER_ONLY defined to reuse the fake engine. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "docker.h"
#include "hooks.h"
#include "http-server.h"
#include "macro.h"

/* ---- the fake engine ---- */

enum fake_mode {
    FAKE_OK,
    FAKE_FAIL,       /* every request gets 500 {"message": "engine on fire"} */
    FAKE_HANG,       /* every request waits until the fake is freed */
    FAKE_HANG_STOPS, /* lists and answers questions, but stop requests never return */
};

struct fake_container {
    char id[DOCKER_ID_MAX];
    char name[32];
    bool running;
    uint64_t stops_at_us; /* after a stop: reports running until then (0: at once) */
    unsigned linger_ms;   /* how long after its stop request it keeps running */
};

#define FAKE_MAX_CALLS 64

struct fake_docker {
    char dir[64];
    char sock[96];
    struct http_server *srv;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    enum fake_mode mode;
    bool closing;
    struct fake_container c[8];
    size_t n;
    /* Stops are answered only once this many have arrived (0: at once), or after 5 s. */
    unsigned stop_barrier;
    unsigned stops_arrived;
    bool barrier_missed;
    char calls[FAKE_MAX_CALLS][128];
    size_t n_calls;
};

static struct fake_container *fake_find(struct fake_docker *f, const char *id, size_t len)
{
    for (size_t i = 0; i < f->n; i++)
        if (strlen(f->c[i].id) == len && strncmp(f->c[i].id, id, len) == 0)
            return &f->c[i];
    return NULL;
}

static bool fake_running(const struct fake_container *c)
{
    return c->running || (c->stops_at_us && hooks_now_us() < c->stops_at_us);
}

static void fake_list(struct fake_docker *f, struct http_reply *reply)
{
    json_t *a = json_array();
    for (size_t i = 0; i < f->n; i++) {
        if (!fake_running(&f->c[i]))
            continue;
        char name[40];
        snprintf(name, sizeof(name), "/%s", f->c[i].name);
        json_array_append_new(
            a, json_pack("{s:s, s:[s], s:s}", "Id", f->c[i].id, "Names", name, "State", "running"));
    }
    http_reply_json(reply, 200, a);
}

/* Called with the lock held. */
static void fake_stop(struct fake_docker *f, struct fake_container *c, struct http_reply *reply)
{
    f->stops_arrived++;
    pthread_cond_broadcast(&f->cond);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    while (f->stops_arrived < f->stop_barrier && !f->closing)
        if (pthread_cond_timedwait(&f->cond, &f->lock, &until) == ETIMEDOUT) {
            f->barrier_missed = true;
            break;
        }
    if (!c->running) {
        http_reply_take(reply, 304, NULL, NULL, 0, false);
        return;
    }
    c->running = false;
    if (c->linger_ms)
        c->stops_at_us = hooks_now_us() + c->linger_ms * 1000u;
    http_reply_take(reply, 204, NULL, NULL, 0, false);
}

static void fake_handler(const struct http_request *req, struct http_reply *reply, void *userdata)
{
    struct fake_docker *f = userdata;
    pthread_mutex_lock(&f->lock);
    if (f->n_calls < FAKE_MAX_CALLS) {
        const char *t = http_request_query(req, "t");
        snprintf(f->calls[f->n_calls++], sizeof(f->calls[0]), "%s %s%s%s", req->method, req->path,
                 t ? " t=" : "", t ? t : "");
    }
    bool is_stop = strcmp(req->method, "POST") == 0;
    while ((f->mode == FAKE_HANG || (f->mode == FAKE_HANG_STOPS && is_stop)) && !f->closing)
        pthread_cond_wait(&f->cond, &f->lock);
    const char *p = req->path;
    const char *id = p + strlen("/containers/");
    const char *slash = strncmp(p, "/containers/", 12) == 0 ? strchr(id, '/') : NULL;
    struct fake_container *c = slash ? fake_find(f, id, (size_t)(slash - id)) : NULL;
    if (f->mode != FAKE_OK && !(f->mode == FAKE_HANG_STOPS && !is_stop))
        http_reply_json(reply, 500, json_pack("{s:s}", "message", "engine on fire"));
    else if (strcmp(req->method, "GET") == 0 && strcmp(p, "/containers/json") == 0)
        fake_list(f, reply);
    else if (slash && !c)
        http_reply_json(reply, 404, json_pack("{s:s}", "message", "No such container"));
    else if (c && strcmp(req->method, "POST") == 0 && strcmp(slash, "/stop") == 0)
        fake_stop(f, c, reply);
    else if (c && strcmp(req->method, "GET") == 0 && strcmp(slash, "/json") == 0)
        http_reply_json(
            reply, 200,
            json_pack("{s:s, s:{s:b}}", "Id", c->id, "State", "Running", fake_running(c)));
    else
        http_reply_json(reply, 404, json_pack("{s:s}", "message", "page not found"));
    pthread_mutex_unlock(&f->lock);
}

static struct fake_docker *fake_new(size_t n_containers)
{
    struct fake_docker *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    strcpy(f->dir, "/tmp/fake-docker-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->sock, sizeof(f->sock), "%s/docker.sock", f->dir);
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    static const char *const names[] = {"trainer", "notebook", "etl", "d", "e", "f", "g", "h"};
    f->n = n_containers;
    for (size_t i = 0; i < n_containers; i++) {
        /* 64 hex digits, distinct per container. */
        for (size_t k = 0; k < 64; k++)
            f->c[i].id[k] = "0123456789abcdef"[(i * 7 + k) % 16];
        snprintf(f->c[i].name, sizeof(f->c[i].name), "%s", names[i]);
        f->c[i].running = true;
    }
    struct errmsg e = {{0}};
    int r = http_server_new_unix(f->sock, 0600, fake_handler, f, &f->srv, &e);
    if (r < 0)
        fail_msg("fake engine: %s", e.text);
    return f;
}

static void fake_set_mode(struct fake_docker *f, enum fake_mode m)
{
    pthread_mutex_lock(&f->lock);
    f->mode = m;
    pthread_mutex_unlock(&f->lock);
}

static size_t fake_count_calls(struct fake_docker *f, const char *prefix)
{
    size_t k = 0;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_calls; i++)
        if (strncmp(f->calls[i], prefix, strlen(prefix)) == 0)
            k++;
    pthread_mutex_unlock(&f->lock);
    return k;
}

static void fake_free(struct fake_docker *f)
{
    pthread_mutex_lock(&f->lock);
    f->closing = true;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    http_server_free(f->srv);
    rmdir(f->dir);
    pthread_mutex_destroy(&f->lock);
    pthread_cond_destroy(&f->cond);
    free(f);
}

/* A socket that accepts connections (the kernel's backlog does) but never reads or answers: the
 * worst kind of engine, one that neither fails nor works. */
static int hung_socket(const char *path)
{
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    unlink(path);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(fd, 16), 0);
    return fd;
}

#ifndef FAKE_DOCKER_ONLY

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
    assert_int_equal(docker_list_running(url, hooks_now_us() + 2000000u, &c, &n, &e), 0);
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
    uint64_t start = hooks_now_us();
    assert_int_equal(docker_stop_all(f->sock, c, 4, 7, start + 10000000u, res), 4);
    assert_true(hooks_now_us() - start < 3000000u);
    assert_false(f->barrier_missed);
    assert_int_equal(fake_count_calls(f, "POST /containers/"), 4);
    for (size_t i = 0; i < 4; i++) {
        char expect[128];
        snprintf(expect, sizeof(expect), "POST /containers/%s/stop t=7", c[i].id);
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
        docker_container_running(f->sock, c[0].id, hooks_now_us() + 1000000u, &running, &e), 0);
    assert_true(running);
    assert_int_equal(
        docker_container_running(f->sock, "deadbeef", hooks_now_us() + 1000000u, &running, &e), 0);
    assert_false(running);
    assert_int_equal(
        docker_container_running(f->sock, "../x", hooks_now_us() + 1000000u, &running, &e),
        -EINVAL);

    /* Container 0 takes 300 ms to go down after its stop; container 1 never stops. */
    f->c[0].linger_ms = 300;
    struct docker_stop_result res[1];
    assert_int_equal(docker_stop_all(f->sock, c, 1, 5, hooks_now_us() + 2000000u, res), 1);
    bool left[3];
    uint64_t start = hooks_now_us();
    assert_int_equal(docker_wait_stopped(f->sock, c, 3, start + 800000u, 50, left, &e), 1);
    assert_false(left[0]);
    assert_true(left[1]);
    assert_false(left[2]);
    uint64_t took = hooks_now_us() - start;
    assert_true(took >= 700000u && took < 1500000u);

    /* Once all are down it returns at once. */
    c[1] = c[2];
    start = hooks_now_us();
    assert_int_equal(docker_wait_stopped(f->sock, c, 2, start + 5000000u, 50, left, &e), 0);
    assert_true(hooks_now_us() - start < 1000000u);
    fake_free(f);
}

static void test_engine_errors(void **state)
{
    struct fake_docker *f = fake_new(1);
    fake_set_mode(f, FAKE_FAIL);
    struct docker_container *list = NULL;
    size_t n = 0;
    struct errmsg e = {{0}};
    assert_int_equal(docker_list_running(f->sock, hooks_now_us() + 1000000u, &list, &n, &e),
                     -EPROTO);
    assert_non_null(strstr(e.text, "HTTP 500"));
    assert_non_null(strstr(e.text, "engine on fire"));
    struct docker_container c = {0};
    snprintf(c.id, sizeof(c.id), "%s", f->c[0].id);
    struct docker_stop_result res;
    assert_int_equal(docker_stop_all(f->sock, &c, 1, 5, hooks_now_us() + 1000000u, &res), 0);
    assert_int_equal(res.r, -EPROTO);
    assert_non_null(strstr(res.error, "engine on fire"));
    fake_free(f);

    /* No engine at all: a missing socket fails at once. */
    uint64_t start = hooks_now_us();
    int r = docker_list_running("/nonexistent/docker.sock", start + 5000000u, &list, &n, &e);
    assert_true(r == -ENOENT || r == -ECONNREFUSED);
    assert_non_null(strstr(e.text, "/nonexistent/docker.sock"));
    assert_true(hooks_now_us() - start < 1000000u);

    /* No time left: no call is made at all. */
    assert_int_equal(docker_list_running("/nonexistent/docker.sock", hooks_now_us(), &list, &n, &e),
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
    uint64_t start = hooks_now_us();
    assert_int_equal(docker_stop_all(f->sock, c, 3, 20, start + 500000u, res), 0);
    uint64_t took = hooks_now_us() - start;
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
    start = hooks_now_us();
    assert_int_equal(docker_list_running(path, start + 300000u, &list, &n, &e), -ETIMEDOUT);
    assert_true(hooks_now_us() - start < 800000u);
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
    return cmocka_run_group_tests(tests, NULL, NULL);
}

#endif
