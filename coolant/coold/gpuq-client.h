/* The two calls of gpuqd's control API (docs/gpuq.md) that coold's shutdown needs, over gpuqd's
 * Unix socket: drain the node (every running job gets its checkpoint signal, then SIGKILL after
 * its grace, and is requeued; nothing starts until an admin resumes), and ask how many jobs run
 * (for drills). coold runs as root, which gpuqd lets drain.
 *
 * Every call is bounded by a deadline (CLOCK_MONOTONIC microseconds, see clock_now_usec()): a
 * gpuqd that accepts connections but never answers costs at most the time left to the deadline,
 * and a call made with no time left fails at once with -ETIMEDOUT. All functions are
 * thread-safe. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "lib/errmsg.h"

struct gpuqc_drain_result {
    unsigned stopped; /* jobs the drain sent their checkpoint signal */
    unsigned running; /* jobs still running or stopping when gpuqd replied */
};

/* POST /v1/drain {"grace_max": grace_max_s, "wait": wait_s}. gpuqd caps each job's grace at
 * grace_max_s (which must be > 0: gpuqd reads 0 as "no cap") and replies when every job has
 * stopped or wait_s ran out (0: at once). The deadline should leave room for wait_s and the
 * reply. Returns 0 and *ret, or -errno with e set: transport errors as http_request() gives them
 * (-ENOENT: no socket, -ECONNREFUSED: nothing listens on it, -ETIMEDOUT, -EACCES), -EINVAL for
 * grace_max_s <= 0 or wait_s < 0, -EPROTO for an HTTP error status (e holds gpuqd's "error") or
 * a reply that is not the expected JSON, -ENOMEM. *ret is written only on success. */
int gpuqc_drain(const char *socket, double grace_max_s, double wait_s, uint64_t deadline_us,
                struct gpuqc_drain_result *ret, struct errmsg *e);

/* Interprets a reply to POST /v1/drain: status 200 with non-negative integers "stopped" and
 * "running". reply is borrowed and may be NULL (no body, or not JSON). Returns 0 and *ret
 * (written only then), or -EPROTO with e set ("HTTP 403: only root may drain or resume the
 * node", "HTTP 200: no \"stopped\" count"). Separate from gpuqc_drain() so that it can be tested
 * and fuzzed without gpuqd. */
int gpuqc_parse_drain(long status, json_t *reply, struct gpuqc_drain_result *ret, struct errmsg *e);

/* What GET /v1/status says about the jobs. */
struct gpuqc_status {
    unsigned running; /* RUNNING and STOPPING jobs: those a drain would stop or wait for */
    unsigned pending;
    bool drained;
};

/* GET /v1/status. Returns 0 and *ret, or -errno with e set (as gpuqc_drain()). */
int gpuqc_get_status(const char *socket, uint64_t deadline_us, struct gpuqc_status *ret,
                     struct errmsg *e);

/* Interprets a reply to GET /v1/status: status 200 with an object "jobs" of state names and
 * non-negative integer counts (states coold does not know are ignored) and a boolean "drained".
 * reply is borrowed and may be NULL. Returns 0 and *ret (written only then), or -EPROTO with e
 * set. */
int gpuqc_parse_status(long status, json_t *reply, struct gpuqc_status *ret, struct errmsg *e);
