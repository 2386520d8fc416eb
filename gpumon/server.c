#include "server.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lib/http-server.h"
#include "lib/macro.h"
#include "lib/prom.h"
#include "pages.h"

struct server {
    struct http_server *http;
    struct sampler *sampler;
    struct pages *pages;
    double stale_after_s;
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

static void release_snapshot(void *snap)
{
    snapshot_unref(snap);
}

/* Serves the snapshot's page for the request's format and encoding: made once per snapshot
 * (pages.h), so a scrape copies bytes and renders nothing. The reply holds a reference to the
 * snapshot until the bytes are sent. Text 0.0.4 goes to every client that takes it, since only
 * it can type dcgm's counters without _total as counters (prom_format_text_first()). */
static void handle_metrics(struct server *srv, const struct http_request *req,
                           struct http_reply *reply)
{
    _cleanup_(snapshot_unrefp) struct snapshot *snap = sampler_current(srv->sampler);
    enum prom_format format = prom_format_text_first(http_request_header(req, "Accept"));
    enum page_kind kind = page_kind_of(format, http_request_accepts_gzip(req));
    const struct page *page;
    int r = pages_get(srv->pages, snap, kind, &page);
    if (r < 0)
        return reply_text(reply, 500, "cannot render metrics: %s\n", strerror(-r));
    http_reply_shared(reply, 200, prom_content_type(format), page->body, page->len,
                      page_gzipped(kind) ? "gzip" : NULL, true, release_snapshot, snap);
    snap = NULL; /* the reply's now */
    /* The format follows Accept as the encoding follows Accept-Encoding: a cache must not hand
     * one client's OpenMetrics to another. */
    http_reply_header(reply, "Vary", "Accept");
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
        handle_metrics(srv, req, reply);
    else if (strcmp(req->path, "/health") == 0)
        handle_health(srv, reply);
    else
        reply_text(reply, 200, "%s", index_page);
}

int server_new(const char *listen, struct sampler *s, double interval_s,
               const struct expose_opts *expose, struct server **ret, struct errmsg *e)
{
    _cleanup_(server_freep) struct server *srv = calloc(1, sizeof(*srv));
    if (!srv)
        return errmsg_set(e, -ENOMEM, "out of memory");
    srv->sampler = s;
    srv->stale_after_s = SERVER_STALE_INTERVALS * interval_s + SERVER_STALE_GRACE_S;
    srv->pages = pages_new(expose);
    if (!srv->pages)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int r = http_server_new_tcp(listen, handle, srv, &srv->http, e);
    if (r < 0)
        return r;
    sampler_set_prepare(s, pages_prepare, srv->pages);
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
    if (srv->http)
        sampler_set_prepare(srv->sampler, NULL, NULL);
    http_server_free(srv->http);
    pages_free(srv->pages);
    free(srv);
}
