/* static-server: the floor of the gpumon benchmark (see README.md). Serves GET /metrics with the
 * bytes of a file, read once at start, through the same HTTP server gpumon uses
 * (lib/http-server.h) and the same way gpumon serves a page it has already rendered:
 * http_reply_shared() with the plain bytes, or with the gzip file's bytes when the request
 * accepts gzip, and "Vary: Accept-Encoding". Nothing else happens per request, so the time a
 * scrape of it takes is what the server, the kernel and the client cost, and whatever gpumon
 * takes beyond that is gpumon's own. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/fileio.h"
#include "lib/http-server.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/service.h"

/* Far above any exposition: gpumon's for 8 GPUs x 7 MIG instances is ~130 kB. */
#define BODY_MAX (256u * 1024u * 1024u)

struct page {
    char *plain;
    size_t plain_len;
    char *gzip; /* NULL without --gzip-body: gzip clients then get the plain bytes */
    size_t gzip_len;
    const char *content_type;
};

static void usage(FILE *out)
{
    fprintf(out,
            "Usage: static-server --listen HOST:PORT --body FILE --content-type TYPE\n"
            "                     [--gzip-body FILE.gz]\n"
            "\n"
            "Serves GET /metrics with FILE's bytes (FILE.gz's, with Content-Encoding: gzip, to\n"
            "clients that accept gzip) as gpumon serves a pre-rendered page: the floor the\n"
            "gpumon benchmark measures gpumon against. Port 0 picks a free one. Prints the port\n"
            "on stdout once it serves; SIGTERM or SIGINT stops it.\n");
}

/* Returns -1 to go on, else the exit status. */
static int parse_args(int argc, char **argv, const char **listen, const char **body,
                      const char **gzip_body, const char **content_type)
{
    static const struct option options[] = {
        {"listen", required_argument, NULL, 'l'},
        {"body", required_argument, NULL, 'b'},
        {"gzip-body", required_argument, NULL, 'z'},
        {"content-type", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "h", options, NULL)) != -1) {
        switch (opt) {
        case 'l':
            *listen = optarg;
            break;
        case 'b':
            *body = optarg;
            break;
        case 'z':
            *gzip_body = optarg;
            break;
        case 't':
            *content_type = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc || !*listen || !*body || !*content_type) {
        usage(stderr);
        return 2;
    }
    return -1;
}

static int read_whole(const char *path, char **ret, size_t *ret_len)
{
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return log_error_errno(-errno, "cannot open '%s'", path);
    int r = fd_read_all(fd, BODY_MAX, ret, ret_len);
    if (r < 0)
        return log_error_errno(r, "cannot read '%s'", path);
    return 0;
}

/* The per-request work: the same choice and call gpumon's handle_metrics() makes once its page
 * is there. The bytes live until main() returns, so there is nothing to release. */
static void handle(const struct http_request *req, struct http_reply *reply, void *userdata)
{
    const struct page *pg = userdata;
    if (strcmp(req->path, "/metrics") != 0) {
        http_reply_error(reply, 404, "no such resource; metrics are at /metrics");
        return;
    }
    if (strcmp(req->method, "GET") != 0) {
        http_reply_error(reply, 405, "use GET");
        return;
    }
    if (pg->gzip && http_request_accepts_gzip(req))
        http_reply_shared(reply, 200, pg->content_type, pg->gzip, pg->gzip_len, "gzip", true, NULL,
                          NULL);
    else
        http_reply_shared(reply, 200, pg->content_type, pg->plain, pg->plain_len, NULL, true, NULL,
                          NULL);
}

static int wait_for_stop(int signal_fd)
{
    for (;;) {
        struct pollfd p = {.fd = signal_fd, .events = POLLIN};
        if (poll(&p, 1, -1) < 0 && errno != EINTR)
            return log_error_errno(-errno, "poll");
        if (service_signals_read(signal_fd) == SERVICE_SIGNAL_STOP)
            return 0;
    }
}

static int serve(const char *listen, struct page *pg, int signal_fd)
{
    struct errmsg e = {""};
    _cleanup_(http_server_freep) struct http_server *http = NULL;
    int r = http_server_new_tcp(listen, handle, pg, &http, &e);
    if (r < 0)
        return log_error_errno(r, "%s", e.text);
    printf("%u\n", http_server_port(http));
    fflush(stdout);
    log_info("serving %zu bytes (gzip: %zu) as '%s' on port %u", pg->plain_len, pg->gzip_len,
             pg->content_type, http_server_port(http));
    return wait_for_stop(signal_fd);
}

int main(int argc, char **argv)
{
    const char *listen = NULL, *body = NULL, *gzip_body = NULL;
    struct page pg = {0};
    int status = parse_args(argc, argv, &listen, &body, &gzip_body, &pg.content_type);
    if (status >= 0)
        return status;
    log_setup("static-server", LOG_LEVEL_INFO);

    _cleanup_free_ char *plain = NULL;
    _cleanup_free_ char *gzip = NULL;
    if (read_whole(body, &plain, &pg.plain_len) < 0 ||
        (gzip_body && read_whole(gzip_body, &gzip, &pg.gzip_len) < 0))
        return 1;
    pg.plain = plain;
    pg.gzip = gzip;
    /* Before the server's threads start: only the signalfd sees SIGTERM and SIGINT. */
    _cleanup_close_ int signal_fd = service_signals_open();
    if (signal_fd < 0) {
        log_error_errno(signal_fd, "cannot create a signalfd");
        return 1;
    }
    /* serve() frees the server before returning, so the bytes outlive every reply. */
    return serve(listen, &pg, signal_fd) < 0 ? 1 : 0;
}
