/* The fake gpuqd of the unit tests (fake-gpuqd.h). */
#include "fake-gpuqd.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/http-server.h"

static void fake_trace(struct fake_gpuqd *f, const char *line)
{
    if (!f->trace)
        return;
    int fd = open(f->trace, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, line, strlen(line)), (ssize_t)strlen(line));
    close(fd);
}

static double body_number(json_t *body, const char *key)
{
    json_t *v = json_object_get(body, key);
    return json_is_number(v) ? json_number_value(v) : -1;
}

/* Waits (lock held) for seconds, or until the fake is freed. */
static void fake_sleep(struct fake_gpuqd *f, double seconds)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    double whole = floor(seconds);
    until.tv_sec += (time_t)whole;
    until.tv_nsec += (long)((seconds - whole) * 1e9);
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    while (!f->closing)
        if (pthread_cond_timedwait(&f->cond, &f->lock, &until) == ETIMEDOUT)
            break;
}

/* As gpuqd: every running job gets its signal and stops after its checkpoint or at grace_max;
 * the reply comes when none runs or the wait ran out. Called with the lock held. */
static void fake_drain(struct fake_gpuqd *f, const struct http_request *req,
                       struct http_reply *reply)
{
    json_t *body = json_loadb(req->body, req->body_len, 0, NULL);
    f->grace_max = body_number(body, "grace_max");
    f->wait = body_number(body, "wait");
    json_decref(body);
    f->drained = true;
    unsigned stopped = f->running;
    double stop_s = f->grace_max > 0 ? fmin(f->job_stop_s, f->grace_max) : f->job_stop_s;
    double wait = f->wait > 0 ? f->wait : 0;
    bool stop = stopped > 0 && !f->unkillable && stop_s <= wait;
    fake_sleep(f, stopped == 0 ? 0 : stop ? stop_s : wait);
    if (stop) {
        f->pending += f->running;
        f->running = 0;
    }
    http_reply_json(reply, 200,
                    json_pack("{s:b, s:i, s:i}", "drained", true, "stopped", (int)stopped,
                              "running", (int)f->running));
}

static void fake_status(struct fake_gpuqd *f, struct http_reply *reply)
{
    http_reply_json(reply, 200,
                    json_pack("{s:s, s:b, s:{s:i, s:i, s:i}, s:i}", "version", "fake", "drained",
                              f->drained, "jobs", "PENDING", (int)f->pending, "RUNNING",
                              (int)f->running, "STOPPING", 0, "gpus_total", 8));
}

static void fake_handler(const struct http_request *req, struct http_reply *reply, void *userdata)
{
    struct fake_gpuqd *f = userdata;
    pthread_mutex_lock(&f->lock);
    if (f->n_calls < FAKE_GPUQD_MAX_CALLS)
        snprintf(f->calls[f->n_calls++], sizeof(f->calls[0]), "%s %s", req->method, req->path);
    bool drain = strcmp(req->method, "POST") == 0 && strcmp(req->path, "/v1/drain") == 0;
    bool status = strcmp(req->method, "GET") == 0 && strcmp(req->path, "/v1/status") == 0;
    if (drain || status)
        fake_trace(f, drain ? "drain\n" : "status\n");
    if (f->mode == FAKE_GPUQD_FAIL)
        http_reply_error(reply, 500, "store is read-only");
    else if (drain && f->mode == FAKE_GPUQD_DENIED)
        http_reply_error(reply, 403, "only root may drain or resume the node");
    else if (drain)
        fake_drain(f, req, reply);
    else if (status)
        fake_status(f, reply);
    else
        http_reply_error(reply, 404, "no such endpoint");
    pthread_mutex_unlock(&f->lock);
}

struct fake_gpuqd *fake_gpuqd_new(unsigned running)
{
    struct fake_gpuqd *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    strcpy(f->dir, "/tmp/fake-gpuqd-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->sock, sizeof(f->sock), "%s/gpuq.sock", f->dir);
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);
    f->running = running;
    f->grace_max = f->wait = -1;
    struct errmsg e = {{0}};
    if (http_server_new_unix(f->sock, 0600, fake_handler, f, &f->srv, &e) < 0)
        fail_msg("fake gpuqd: %s", e.text);
    return f;
}

size_t fake_gpuqd_count_calls(struct fake_gpuqd *f, const char *prefix)
{
    size_t k = 0;
    pthread_mutex_lock(&f->lock);
    for (size_t i = 0; i < f->n_calls; i++)
        k += strncmp(f->calls[i], prefix, strlen(prefix)) == 0;
    pthread_mutex_unlock(&f->lock);
    return k;
}

void fake_gpuqd_free(struct fake_gpuqd *f)
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
