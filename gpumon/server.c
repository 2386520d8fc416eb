#include "server.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "expose.h"
#include "lib/http-server.h"
#include "lib/macro.h"
#include "lib/prom.h"

struct server {
    struct http_server *http;
    struct sampler *sampler;
    double stale_after_s;
    const char *version;
};

static const char index_page[] =
    "gpumon: GPU telemetry for Prometheus, dcgm-exporter compatible\n"
    "\n"
    "  /metrics  the metrics (text 0.0.4 or OpenMetrics by Accept, gzip by Accept-Encoding)\n"
    "  /health   200 while NVML is up and samples are fresh, 503 with the reason otherwise\n";

static void reply_text(struct http_reply *reply, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void reply_text(struct http_reply *reply, unsigned status, const char *fmt, ...)
{
    char *text = NULL;
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(&text, fmt, ap);
    va_end(ap);
    if (n < 0) {
        reply->status = 500; /* an empty 500 is all that is left without memory */
        return;
    }
    http_reply_take(reply, status, "text/plain; charset=utf-8", text, (size_t)n, false);
}

static double unix_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void handle_metrics(struct server *srv, const struct http_request *req,
                           struct http_reply *reply, const struct timespec *started)
{
    _cleanup_(snapshot_unrefp) struct snapshot *snap = sampler_current(srv->sampler);
    struct expose_opts o = {
        .format = prom_format_from_accept(http_request_header(req, "Accept")),
        .now = unix_now(),
        .started = *started,
        .version = srv->version,
    };
    char *text = NULL;
    size_t len = 0;
    int r = expose_render(snap, &o, &text, &len);
    if (r < 0)
        return reply_text(reply, 500, "cannot render metrics: %s\n", strerror(-r));
    http_reply_take(reply, 200, prom_content_type(o.format), text, len, true);
}

static void handle_health(struct server *srv, struct http_reply *reply)
{
    _cleanup_(snapshot_unrefp) struct snapshot *snap = sampler_current(srv->sampler);
    double age = unix_now() - snap->taken_at;
    if (!snap->up)
        return reply_text(reply, 503, "NVML is not available: %s\n", snap->reason);
    if (age > srv->stale_after_s)
        return reply_text(reply, 503, "the last sample is %.0f s old: the sampler is stuck\n", age);
    reply_text(reply, 200, "ok\n");
}

static void handle(const struct http_request *req, struct http_reply *reply, void *userdata)
{
    struct server *srv = userdata;
    struct timespec started;
    clock_gettime(CLOCK_MONOTONIC, &started);
    bool known = strcmp(req->path, "/metrics") == 0 || strcmp(req->path, "/health") == 0 ||
                 strcmp(req->path, "/") == 0;
    if (!known)
        return reply_text(reply, 404, "no such resource '%s'; metrics are at /metrics\n",
                          req->path);
    if (strcmp(req->method, "GET") != 0) {
        reply_text(reply, 405, "%s is not allowed here; use GET\n", req->method);
        http_reply_header(reply, "Allow", "GET, HEAD");
        return;
    }
    if (strcmp(req->path, "/metrics") == 0)
        handle_metrics(srv, req, reply, &started);
    else if (strcmp(req->path, "/health") == 0)
        handle_health(srv, reply);
    else
        reply_text(reply, 200, "%s", index_page);
}

int server_new(const char *listen, struct sampler *s, double interval_s, const char *version,
               struct server **ret, struct errmsg *e)
{
    _cleanup_free_ struct server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return errmsg_set(e, -ENOMEM, "out of memory");
    srv->sampler = s;
    srv->version = version;
    srv->stale_after_s = SERVER_STALE_INTERVALS * interval_s + SERVER_STALE_GRACE_S;
    int r = http_server_new_tcp(listen, handle, srv, &srv->http, e);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(srv);
    return 0;
}

uint16_t server_port(const struct server *srv)
{
    return http_server_port(srv->http);
}

void server_free(struct server *srv)
{
    if (!srv)
        return;
    http_server_free(srv->http);
    free(srv);
}
