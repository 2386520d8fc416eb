#include "gpuq-client.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "lib/clock.h"
#include "lib/http-client.h"

/* One API call bounded by the deadline. *ret_json gets the reply (a new reference, NULL when it
 * is not JSON); the reply is interpreted by gpuqc_parse_*(), which can be fuzzed without HTTP. */
static int gpuqc_call(const char *method, const char *path, const char *socket, json_t *body,
                      uint64_t deadline_us, long *ret_status, json_t **ret_json, struct errmsg *e)
{
    uint64_t now = clock_now_usec();
    long left_ms = deadline_us > now ? (long)((deadline_us - now) / 1000u) : 0;
    if (left_ms <= 0)
        return errmsg_set(e, -ETIMEDOUT, "%s %s: no time left before the deadline", method, path);
    char url[128];
    snprintf(url, sizeof(url), "http://localhost%s", path);
    int r = http_request_json(method, url, socket, body, left_ms, ret_status, ret_json, e);
    if (r < 0)
        return errmsg_prefix(e, r, "gpuqd at %s: %s %s", socket, method, path);
    return 0;
}

/* gpuqd explains errors as {"error": "..."}. */
static int http_error(long status, json_t *reply, struct errmsg *e)
{
    const char *m = json_string_value(json_object_get(reply, "error"));
    return errmsg_set(e, -EPROTO, "HTTP %ld: %s", status, m ? m : "(no message)");
}

/* A count: a JSON integer from 0 to UINT_MAX. */
static bool get_count(json_t *o, const char *key, unsigned *ret)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > UINT_MAX)
        return false;
    *ret = (unsigned)json_integer_value(v);
    return true;
}

/* A count that may be absent (0): gpuqd leaves out states it has no name for. */
static bool get_count_opt(json_t *o, const char *key, unsigned *ret)
{
    if (!json_object_get(o, key)) {
        *ret = 0;
        return true;
    }
    return get_count(o, key, ret);
}

int gpuqc_parse_drain(long status, json_t *reply, struct gpuqc_drain_result *ret, struct errmsg *e)
{
    if (status != 200)
        return http_error(status, reply, e);
    struct gpuqc_drain_result res;
    if (!json_is_object(reply))
        return errmsg_set(e, -EPROTO, "HTTP 200: the reply is not a JSON object");
    if (!get_count(reply, "stopped", &res.stopped))
        return errmsg_set(e, -EPROTO, "HTTP 200: no \"stopped\" count");
    if (!get_count(reply, "running", &res.running))
        return errmsg_set(e, -EPROTO, "HTTP 200: no \"running\" count");
    *ret = res;
    return 0;
}

int gpuqc_drain(const char *socket, double grace_max_s, double wait_s, uint64_t deadline_us,
                struct gpuqc_drain_result *ret, struct errmsg *e)
{
    if (!(grace_max_s > 0) || !(wait_s >= 0) || !isfinite(grace_max_s) || !isfinite(wait_s))
        return errmsg_set(e, -EINVAL, "drain: grace_max %g and wait %g must be positive seconds",
                          grace_max_s, wait_s);
    json_t *body = json_pack("{s:f, s:f}", "grace_max", grace_max_s, "wait", wait_s);
    if (!body)
        return errmsg_set(e, -ENOMEM, "out of memory");
    long status = 0;
    json_t *reply = NULL;
    int r = gpuqc_call("POST", "/v1/drain", socket, body, deadline_us, &status, &reply, e);
    json_decref(body);
    if (r < 0)
        return r;
    r = gpuqc_parse_drain(status, reply, ret, e);
    json_decref(reply);
    return r < 0 ? errmsg_prefix(e, r, "gpuqd at %s: POST /v1/drain", socket) : 0;
}

int gpuqc_parse_status(long status, json_t *reply, struct gpuqc_status *ret, struct errmsg *e)
{
    if (status != 200)
        return http_error(status, reply, e);
    json_t *jobs = json_object_get(reply, "jobs");
    json_t *drained = json_object_get(reply, "drained");
    if (!json_is_object(jobs))
        return errmsg_set(e, -EPROTO, "HTTP 200: no \"jobs\" object");
    if (!json_is_boolean(drained))
        return errmsg_set(e, -EPROTO, "HTTP 200: no boolean \"drained\"");
    unsigned running, stopping, pending;
    if (!get_count_opt(jobs, "RUNNING", &running) || !get_count_opt(jobs, "STOPPING", &stopping) ||
        !get_count_opt(jobs, "PENDING", &pending) || running > UINT_MAX - stopping)
        return errmsg_set(e, -EPROTO,
                          "HTTP 200: a count in \"jobs\" is not an integer from 0 to %u", UINT_MAX);
    struct gpuqc_status st = {
        .running = running + stopping, .pending = pending, .drained = json_is_true(drained)};
    *ret = st;
    return 0;
}

int gpuqc_get_status(const char *socket, uint64_t deadline_us, struct gpuqc_status *ret,
                     struct errmsg *e)
{
    long status = 0;
    json_t *reply = NULL;
    int r = gpuqc_call("GET", "/v1/status", socket, NULL, deadline_us, &status, &reply, e);
    if (r < 0)
        return r;
    r = gpuqc_parse_status(status, reply, ret, e);
    json_decref(reply);
    return r < 0 ? errmsg_prefix(e, r, "gpuqd at %s: GET /v1/status", socket) : 0;
}
