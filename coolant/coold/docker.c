#include "docker.h"

#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "lib/clock.h"
#include "hooks.h"
#include "lib/http-client.h"
#include "lib/macro.h"

static const char *socket_path(const char *socket)
{
    return strncmp(socket, "unix://", 7) == 0 ? socket + 7 : socket;
}

/* Container ids go into URL paths; anything but hex digits would change the request. */
static bool id_valid(const char *id)
{
    size_t len = strlen(id);
    return len > 0 && len < DOCKER_ID_MAX && strspn(id, "0123456789abcdef") == len;
}

/* One API call bounded by the deadline. The reply goes to *ret (free with http_response_done()).
 * The request is the one http_request_json() makes without a body; the reply's body is parsed
 * here (reply_json() and docker_parse_*()), so that the parsing can be fuzzed without HTTP. */
static int docker_call(const char *method, const char *path, const char *socket,
                       uint64_t deadline_us, struct http_response *ret, struct errmsg *e)
{
    uint64_t now = clock_now_usec();
    long left_ms = deadline_us > now ? (long)((deadline_us - now) / 1000u) : 0;
    if (left_ms <= 0)
        return errmsg_set(e, -ETIMEDOUT, "%s %s: no time left before the deadline", method, path);
    char url[256];
    snprintf(url, sizeof(url), "http://localhost%s", path);
    static const char *const accept[] = {"Accept: application/json", NULL};
    struct http_client_opts o = {
        .method = method,
        .url = url,
        .unix_socket = socket_path(socket),
        .headers = accept,
        .timeout_ms = left_ms,
    };
    int r = http_request_opts(&o, ret, e);
    if (r < 0)
        return errmsg_prefix(e, r, "Docker Engine at %s: %s %s", socket_path(socket), method, path);
    return 0;
}

/* The reply body as JSON (a new reference), or NULL when it is empty or not valid JSON. */
static json_t *reply_json(const char *body, size_t len)
{
    return len > 0 ? json_loadb(body, len, 0, NULL) : NULL;
}

/* Docker explains errors as {"message": "..."}. */
static const char *reply_message(json_t *j)
{
    const char *m = json_string_value(json_object_get(j, "message"));
    return m ? m : "(no message)";
}

static int parse_container(json_t *item, struct docker_container *c)
{
    const char *id = json_string_value(json_object_get(item, "Id"));
    if (!id || !id_valid(id))
        return -EPROTO;
    memset(c, 0, sizeof(*c));
    snprintf(c->id, sizeof(c->id), "%s", id);
    const char *name = json_string_value(json_array_get(json_object_get(item, "Names"), 0));
    if (name && name[0] == '/')
        name++;
    if (name && name[0])
        snprintf(c->name, sizeof(c->name), "%s", name);
    else
        snprintf(c->name, sizeof(c->name), "%.12s", id);
    return 0;
}

int docker_parse_containers(long status, const char *body, size_t len,
                            struct docker_container **ret, size_t *ret_n, struct errmsg *e)
{
    json_t *j = reply_json(body, len);
    if (status != 200 || !json_is_array(j)) {
        int r = errmsg_set(e, -EPROTO, "HTTP %ld: %s", status,
                           json_is_array(j) ? "unexpected status" : reply_message(j));
        json_decref(j);
        return r;
    }
    size_t n = json_array_size(j);
    struct docker_container *c = n ? calloc(n, sizeof(*c)) : NULL;
    if (n && !c) {
        json_decref(j);
        return errmsg_set(e, -ENOMEM, "out of memory listing %zu containers", n);
    }
    for (size_t i = 0; i < n; i++)
        if (parse_container(json_array_get(j, i), &c[i]) < 0) {
            json_decref(j);
            free(c);
            return errmsg_set(e, -EPROTO, "entry %zu has no valid Id", i);
        }
    json_decref(j);
    *ret = c;
    *ret_n = n;
    return 0;
}

int docker_list_running(const char *socket, uint64_t deadline_us, struct docker_container **ret,
                        size_t *ret_n, struct errmsg *e)
{
    struct http_response resp = {0};
    int r = docker_call("GET", "/containers/json", socket, deadline_us, &resp, e);
    if (r < 0)
        return r;
    r = docker_parse_containers(resp.status, resp.body, resp.body_len, ret, ret_n, e);
    http_response_done(&resp);
    if (r == -EPROTO)
        return errmsg_prefix(e, r, "Docker Engine at %s: GET /containers/json",
                             socket_path(socket));
    return r;
}

struct stop_job {
    const char *socket;
    const struct docker_container *c;
    unsigned grace_s;
    uint64_t deadline_us;
    struct docker_stop_result *res;
};

static void stop_one(const struct stop_job *job)
{
    struct docker_stop_result *res = job->res;
    uint64_t start = clock_now_usec();
    char path[128];
    snprintf(path, sizeof(path), "/containers/%s/stop?t=%u", job->c->id, job->grace_s);
    struct errmsg e = {{0}};
    struct http_response resp = {0};
    int r = docker_call("POST", path, job->socket, job->deadline_us, &resp, &e);
    res->seconds = (double)(clock_now_usec() - start) / 1e6;
    res->status = resp.status;
    if (r < 0) {
        res->r = r;
        snprintf(res->error, sizeof(res->error), "%.*s", (int)sizeof(res->error) - 1, e.text);
    } else if (res->status == 204) {
        res->r = 0;
    } else if (res->status == 304 || res->status == 404) {
        res->r = 0;
        res->already_stopped = true;
    } else {
        json_t *j = reply_json(resp.body, resp.body_len);
        res->r = -EPROTO;
        snprintf(res->error, sizeof(res->error), "HTTP %ld: %s", res->status, reply_message(j));
        json_decref(j);
    }
    http_response_done(&resp);
}

static void *stop_thread(void *p)
{
    stop_one(p);
    return NULL;
}

int docker_stop_all(const char *socket, const struct docker_container *c, size_t n,
                    unsigned grace_s, uint64_t deadline_us, struct docker_stop_result *ret)
{
    if (n == 0)
        return 0;
    _cleanup_free_ struct stop_job *jobs = calloc(n, sizeof(*jobs));
    _cleanup_free_ pthread_t *threads = calloc(n, sizeof(*threads));
    _cleanup_free_ bool *started = calloc(n, sizeof(*started));
    if (!jobs || !threads || !started)
        return -ENOMEM;
    memset(ret, 0, n * sizeof(*ret));
    for (size_t i = 0; i < n; i++) {
        jobs[i] = (struct stop_job){socket, &c[i], grace_s, deadline_us, &ret[i]};
        /* The stops must be in flight together: one after another, n containers would need n
         * grace periods, more than the deadline allows. */
        int r = pthread_create(&threads[i], NULL, stop_thread, &jobs[i]);
        if (r != 0) {
            ret[i].r = -r;
            snprintf(ret[i].error, sizeof(ret[i].error), "cannot start a thread: %s", strerror(r));
            continue;
        }
        started[i] = true;
    }
    int ok = 0;
    for (size_t i = 0; i < n; i++) {
        if (started[i])
            pthread_join(threads[i], NULL);
        if (ret[i].r == 0)
            ok++;
    }
    return ok;
}

int docker_parse_running(long status, const char *body, size_t len, bool *ret_running,
                         struct errmsg *e)
{
    if (status == 404) {
        *ret_running = false;
        return 0;
    }
    json_t *j = reply_json(body, len);
    json_t *running = json_object_get(json_object_get(j, "State"), "Running");
    if (status != 200 || !json_is_boolean(running)) {
        int r = errmsg_set(e, -EPROTO, "HTTP %ld: %s", status,
                           status == 200 ? "no State.Running" : reply_message(j));
        json_decref(j);
        return r;
    }
    *ret_running = json_is_true(running);
    json_decref(j);
    return 0;
}

int docker_container_running(const char *socket, const char *id, uint64_t deadline_us,
                             bool *ret_running, struct errmsg *e)
{
    if (!id_valid(id))
        return errmsg_set(e, -EINVAL, "invalid container id '%s'", id);
    char path[128];
    snprintf(path, sizeof(path), "/containers/%s/json", id);
    struct http_response resp = {0};
    int r = docker_call("GET", path, socket, deadline_us, &resp, e);
    if (r < 0)
        return r;
    r = docker_parse_running(resp.status, resp.body, resp.body_len, ret_running, e);
    http_response_done(&resp);
    if (r < 0)
        return errmsg_prefix(e, r, "Docker Engine at %s: GET %s", socket_path(socket), path);
    return 0;
}

int docker_wait_stopped(const char *socket, const struct docker_container *c, size_t n,
                        uint64_t deadline_us, unsigned poll_ms, bool *ret_running, struct errmsg *e)
{
    for (size_t i = 0; i < n; i++)
        ret_running[i] = true;
    size_t left = n;
    while (left > 0) {
        for (size_t i = 0; i < n; i++) {
            if (!ret_running[i])
                continue;
            bool running;
            if (docker_container_running(socket, c[i].id, deadline_us, &running, e) < 0)
                continue;
            if (!running) {
                ret_running[i] = false;
                left--;
            }
        }
        uint64_t now = clock_now_usec();
        if (left == 0 || now >= deadline_us)
            break;
        uint64_t nap = (uint64_t)poll_ms * 1000u;
        usleep((useconds_t)(deadline_us - now < nap ? deadline_us - now : nap));
    }
    return (int)left;
}
