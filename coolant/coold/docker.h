/* The few Docker Engine API calls coold's shutdown needs, over the engine's Unix socket:
 * list the running containers, stop them all at once with a grace period (so that their SIGTERM
 * handlers checkpoint in parallel), and confirm they stopped.
 *
 * Every call is bounded by a deadline (CLOCK_MONOTONIC microseconds, see clock_now_usec()): an
 * engine that accepts connections but never answers costs at most the time left to the deadline,
 * and a call made with no time left fails at once with -ETIMEDOUT. Unversioned API paths are used,
 * so any engine version answers. All functions are thread-safe. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/errmsg.h"

#define DOCKER_ID_MAX   65 /* 64 hex digits and the NUL */
#define DOCKER_NAME_MAX 128

struct docker_container {
    char id[DOCKER_ID_MAX];
    char name[DOCKER_NAME_MAX]; /* first name without the leading '/', else the short id */
};

/* GET /containers/json: the running (and paused) containers. socket is a path, optionally with
 * a "unix://" prefix. Returns 0 with a malloc'd array in *ret (NULL when *ret_n is 0; free()),
 * or -errno with e set: transport errors as http_request() gives them (-ENOENT: no socket,
 * -ECONNREFUSED, -ETIMEDOUT), -EPROTO for an HTTP error status or a reply that is not the
 * expected JSON. */
int docker_list_running(const char *socket, uint64_t deadline_us, struct docker_container **ret,
                        size_t *ret_n, struct errmsg *e);

/* Interprets a reply to GET /containers/json: HTTP status and body as received (len bytes, no
 * NUL needed). docker_list_running() calls it; it is separate so that the parsing can be tested
 * and fuzzed without an engine. Returns 0 with a malloc'd array in *ret (NULL when *ret_n is 0;
 * free()), -EPROTO with e set ("HTTP 500: engine on fire", "entry 2 has no valid Id") for a
 * status other than 200, a body that is not a JSON array, or an entry without a hex Id shorter
 * than DOCKER_ID_MAX, or -ENOMEM. *ret and *ret_n are written only on success. */
int docker_parse_containers(long status, const char *body, size_t len,
                            struct docker_container **ret, size_t *ret_n, struct errmsg *e);

struct docker_stop_result {
    int r;                /* 0: stopped, already stopped or gone; else -errno (as above) */
    long status;          /* HTTP status; 0 when none came */
    bool already_stopped; /* 304, or 404: the container was gone */
    double seconds;       /* how long the request took */
    char error[160];      /* why r < 0 */
};

/* POST /containers/{id}/stop?t=grace_s for every container at the same time, one thread each,
 * and waits for all answers or the deadline. Docker sends SIGTERM, waits grace_s seconds, then
 * SIGKILLs, and answers only when the container is down, so the caller picks grace_s to leave
 * room before the deadline. ret must have room for n results. Returns the number of containers
 * that are confirmed stopped (r == 0), or -ENOMEM. */
int docker_stop_all(const char *socket, const struct docker_container *c, size_t n,
                    unsigned grace_s, uint64_t deadline_us, struct docker_stop_result *ret);

/* GET /containers/{id}/json, State.Running. A container that no longer exists (404) is reported
 * as not running. Returns 0 and *ret_running, or -errno with e set (as docker_list_running()). */
int docker_container_running(const char *socket, const char *id, uint64_t deadline_us,
                             bool *ret_running, struct errmsg *e);

/* Interprets a reply to GET /containers/{id}/json: 404 means not running, 200 needs a boolean
 * State.Running. Returns 0 and *ret_running (written only then), or -EPROTO with e set ("HTTP
 * 500: ...", "HTTP 200: no State.Running"). Separate from docker_container_running() so that it
 * can be fuzzed without an engine. */
int docker_parse_running(long status, const char *body, size_t len, bool *ret_running,
                         struct errmsg *e);

/* Asks about each container until none is running or the deadline comes, every poll_ms.
 * ret_running (room for n) ends up true for each container not confirmed stopped (still running,
 * or the engine did not answer about it). Returns how many those are (0: all stopped); e holds
 * the last error met, if any. */
int docker_wait_stopped(const char *socket, const struct docker_container *c, size_t n,
                        uint64_t deadline_us, unsigned poll_ms, bool *ret_running,
                        struct errmsg *e);
