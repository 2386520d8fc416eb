/* Embedded HTTP server on libmicrohttpd, for the JSON control API (Unix socket, authorised by
 * the peer's SO_PEERCRED) and /metrics (TCP).
 *
 * Each connection gets its own thread (MHD_USE_THREAD_PER_CONNECTION), so a handler that blocks
 * for seconds (a control request waiting on a serial line) never delays another request such as
 * a Prometheus scrape. The handler is called once per request, after the whole body has
 * arrived, on that connection's thread: it must be thread-safe with respect to its userdata.
 *
 * Limits: request bodies over HTTP_SERVER_MAX_BODY (or http_server_set_max_body's) get 413 without
 * calling the handler; at most HTTP_SERVER_MAX_CONNECTIONS connections at once; idle connections
 * close after HTTP_SERVER_TIMEOUT_S seconds (HTTP_SERVER_UNIX_TIMEOUT_S on a Unix socket).
 *
 * A Unix-socket server is open to every local user, so one user must not be able to take all
 * connections (a slowloris that trickles a header byte before each timeout would otherwise lock
 * root out of its own daemon). There, connections are counted by the peer's uid as soon as they
 * are accepted: one non-root uid may hold HTTP_SERVER_MAX_PER_UID at once, all non-root uids
 * together HTTP_SERVER_MAX_UNPRIVILEGED, and a connection beyond either is shut down before any
 * byte of it is read. uid 0 is not counted, so the remaining slots always stay free for root. */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/errmsg.h"
#include "lib/macro.h"

#define HTTP_SERVER_MAX_BODY         (64u * 1024u)
#define HTTP_SERVER_MAX_CONNECTIONS  64u
#define HTTP_SERVER_TIMEOUT_S        30u
#define HTTP_SERVER_UNIX_TIMEOUT_S   10u /* local clients send a request at once */
#define HTTP_SERVER_MAX_PER_UID      8u  /* Unix socket: connections of one non-root uid */
#define HTTP_SERVER_MAX_UNPRIVILEGED 48u /* Unix socket: connections of all non-root uids */
#define HTTP_REPLY_MAX_HEADERS       8u

_Static_assert(HTTP_SERVER_MAX_UNPRIVILEGED < HTTP_SERVER_MAX_CONNECTIONS,
               "root needs connection slots that other users cannot take");

/* Who is on the other end. Unix socket: from SO_PEERCRED. TCP: is_unix false, uid and gid are
 * (uid_t)-1 / (gid_t)-1, pid 0, and addr holds the remote address ("127.0.0.1", "::1"). */
struct http_peer {
    bool is_unix;
    uid_t uid;
    gid_t gid;
    pid_t pid;
    char addr[64];
};

/* One request, valid only during the handler call. Strings are NUL-terminated; body is
 * NUL-terminated too (body_len excludes the NUL) and is "" when there is no body.
 * A HEAD request reaches the handler with method "GET" and head set: the handler answers as for
 * GET and the server sends only the headers (with the GET body's Content-Length). */
struct http_request {
    const char *method;
    const char *path; /* without the query string, not percent-decoded beyond what MHD does */
    const char *body;
    size_t body_len;
    bool head;
    struct http_peer peer;
    void *mhd_connection; /* struct MHD_Connection *, for what this API does not cover */
};

/* What the handler fills in. Starts zeroed; a handler that leaves status 0 produces 500.
 * content_type must stay valid until the handler returns (a string literal is typical); body is
 * malloc'd and owned by the server after the handler returns (also on error paths). Use
 * http_reply_header() for extra headers. If compressible is set and the client accepts gzip, the
 * body is sent gzip-compressed. */
struct http_reply {
    unsigned status;
    const char *content_type;
    char *body;
    size_t body_len;
    bool compressible;
    /* A body the server borrows instead (http_reply_shared()): sent as it is, then handed back
     * through release(release_cls). encoded names its Content-Encoding ("gzip") or is NULL. */
    const char *shared;
    void (*release)(void *cls);
    void *release_cls;
    const char *encoded;
    /* Extra headers, name/value pairs, owned by the server; filled by http_reply_header(). */
    char *headers[2 * HTTP_REPLY_MAX_HEADERS];
    unsigned n_headers;
};

typedef void (*http_handler_fn)(const struct http_request *req, struct http_reply *reply,
                                void *userdata);

struct http_server;

/* Starts a server on TCP. listen is "host:port" as parse_listen_address() takes it; ":0" picks
 * a free port (see http_server_port()); an empty host listens on all addresses (IPv6 dual-stack
 * where available). Returns 0 and *ret, or -errno with a message (-EADDRINUSE, -EINVAL for a
 * bad address, -EIO if MHD fails to start). fn and userdata must outlive the server. */
int http_server_new_tcp(const char *listen, http_handler_fn fn, void *userdata,
                        struct http_server **ret, struct errmsg *e);

/* Starts a server on a Unix stream socket at path with file mode `mode` (e.g. 0666: access is
 * decided by peer credentials, not by the file mode). A stale socket file left at path is
 * removed first; a path held by something that is not a socket is refused with -EEXIST, and a
 * socket some live server still answers on with -EADDRINUSE. Returns 0 and *ret, or -errno. */
int http_server_new_unix(const char *path, mode_t mode, http_handler_fn fn, void *userdata,
                         struct http_server **ret, struct errmsg *e);

/* Raises (or lowers) the request body limit of s from HTTP_SERVER_MAX_BODY: for an API whose
 * requests carry more (gpuqd's submit carries the user's environment). Safe while serving. */
void http_server_set_max_body(struct http_server *s, size_t max);

/* Raises (or lowers) how many connections one non-root uid may hold on a Unix socket, from
 * HTTP_SERVER_MAX_PER_UID, up to HTTP_SERVER_MAX_UNPRIVILEGED: for an API whose requests last
 * (the node cache's pulls, each as long as its download). */
void http_server_set_max_per_uid(struct http_server *s, unsigned max);

/* The bound TCP port (useful after listening on port 0); 0 for a Unix-socket server. */
uint16_t http_server_port(const struct http_server *s);

/* Stops the server: no new connections, waits for running handlers to return, closes the
 * listening socket and, for a Unix socket, unlinks the socket file. NULL is allowed. */
void http_server_free(struct http_server *s);
DEFINE_POINTER_CLEANUP(struct http_server, http_server_free)

/* Value of a request header (case-insensitive name), or NULL. Valid during the handler call. */
const char *http_request_header(const struct http_request *req, const char *name);

/* Value of a query-string argument (percent-decoded), or NULL; "" for "?flag" without '='. */
const char *http_request_query(const struct http_request *req, const char *name);

/* Replies with json serialised compactly as application/json (compressible). Steals the
 * reference to json (NULL becomes a 500 error reply). Replaces any body set before. */
void http_reply_json(struct http_reply *reply, unsigned status, json_t *json);

/* Replies with the JSON body {"error":"<formatted message>"} and the given status. */
void http_reply_error(struct http_reply *reply, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Replies with the given malloc'd body, whose ownership passes to the reply (body may be NULL
 * for an empty body). Replaces any body set before. */
void http_reply_take(struct http_reply *reply, unsigned status, const char *content_type,
                     char *body, size_t body_len, bool compressible);

/* Replies with body_len bytes the caller keeps, without copying them (a pre-rendered page):
 * the server calls release(cls) exactly once when it no longer needs them, after the reply has
 * been sent or dropped, or when the reply is replaced or done (release may be NULL). encoding is
 * "gzip" for bytes that are already gzip-encoded (the caller checked http_request_accepts_gzip())
 * or NULL; the server compresses nothing here. vary_encoding adds "Vary: Accept-Encoding" for
 * replies whose encoding depends on the request. */
void http_reply_shared(struct http_reply *reply, unsigned status, const char *content_type,
                       const char *body, size_t body_len, const char *encoding, bool vary_encoding,
                       void (*release)(void *cls), void *cls);

/* Whether the request's Accept-Encoding allows gzip ("gzip;q=0" refuses it). */
bool http_request_accepts_gzip(const struct http_request *req);

/* Adds a response header (copied), e.g. "Retry-After" or "Location". Returns 0, -E2BIG past
 * HTTP_REPLY_MAX_HEADERS, -EINVAL for a name or value with CR/LF, -ENOMEM. */
int http_reply_header(struct http_reply *reply, const char *name, const char *value);

/* Frees what a reply owns (body, headers) and zeroes it. The server calls this itself; handlers
 * and tests that build replies by hand may too. */
void http_reply_done(struct http_reply *reply);
