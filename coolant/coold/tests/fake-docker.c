/* The fake Docker Engine of the unit tests (fake-docker.h). */
#include "fake-docker.h"

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

#include "lib/clock.h"
#include "docker.h"
#include "hooks.h"
#include "lib/http-server.h"
#include "lib/macro.h"

struct fake_container *fake_find(struct fake_docker *f, const char *id, size_t len)
{
    for (size_t i = 0; i < f->n; i++)
        if (strlen(f->c[i].id) == len && strncmp(f->c[i].id, id, len) == 0)
            return &f->c[i];
    return NULL;
}

static bool fake_running(const struct fake_container *c)
{
    return c->running || (c->stops_at_us && clock_now_usec() < c->stops_at_us);
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
        c->stops_at_us = clock_now_usec() + c->linger_ms * 1000u;
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

struct fake_docker *fake_new(size_t n_containers)
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

void fake_set_mode(struct fake_docker *f, enum fake_mode m)
{
    pthread_mutex_lock(&f->lock);
    f->mode = m;
    pthread_mutex_unlock(&f->lock);
}

size_t fake_count_calls(struct fake_docker *f, const char *prefix)
{
    size_t k = 0;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_calls; i++)
        if (strncmp(f->calls[i], prefix, strlen(prefix)) == 0)
            k++;
    pthread_mutex_unlock(&f->lock);
    return k;
}

void fake_free(struct fake_docker *f)
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
int hung_socket(const char *path)
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
