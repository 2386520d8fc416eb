/* gpumon's HTTP endpoints on TCP:
 *   GET /metrics  the current snapshot in the format the Accept header prefers (text 0.0.4 or
 *                 OpenMetrics), gzip-compressed when Accept-Encoding allows;
 *   GET /health   200 "ok" while NVML is up and samples are fresh, else 503 with the reason;
 *   GET /         a short page naming the endpoints.
 * HEAD works like GET; other methods get 405, other paths 404. A request never calls NVML and
 * never waits for the sampler beyond taking a reference to its current snapshot. */
#pragma once

#include <stdint.h>

#include "expose.h"
#include "lib/errmsg.h"
#include "sampler.h"

struct server;

/* A snapshot older than this many sampling intervals, plus SERVER_STALE_GRACE_S, makes /health
 * answer 503: the sampler is stuck (typically in a driver call that does not return). */
#define SERVER_STALE_INTERVALS 5
#define SERVER_STALE_GRACE_S   10.0

/* Starts serving s on listen ("host:port" as parse_listen_address() takes it; ":0" picks a free
 * port). interval_s is the sampling interval, for /health's staleness check; expose says how
 * pages are rendered (its format is chosen per request; its strings must outlive the server).
 * Returns 0 and *ret, or the errors of http_server_new_tcp() (-EADDRINUSE, -EINVAL, -EIO,
 * -ENOMEM) with a message. */
int server_new(const char *listen, struct sampler *s, double interval_s,
               const struct expose_opts *expose, struct server **ret, struct errmsg *e);

/* The bound TCP port. */
uint16_t server_port(const struct server *srv);

/* Stops accepting, waits for running requests and frees. NULL is allowed. */
void server_free(struct server *srv);
DEFINE_POINTER_CLEANUP(struct server, server_free)
