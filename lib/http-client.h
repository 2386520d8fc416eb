/* HTTP client on libcurl, for Unix-socket APIs (Docker Engine, our daemons) and plain HTTP(S).
 *
 * Thread-safe: curl's global state is set up once (pthread_once) and every call uses its own
 * easy handle, so any number of threads may call at once. Signals are never used for timeouts
 * (CURLOPT_NOSIGNAL). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "lib/errmsg.h"

/* The response body is limited to this unless a caller streams it (http_client_opts.sink). */
#define HTTP_CLIENT_MAX_BODY (16u * 1024u * 1024u)

/* A completed exchange. body is malloc'd and NUL-terminated (body_len excludes the NUL), never
 * NULL after success. headers holds the final response's header lines, "Name: value\r\n"
 * each, NUL-terminated; read them with http_response_header(). */
struct http_response {
    long status;
    char *body;
    size_t body_len;
    char *headers;
    size_t headers_len;
};

/* Frees body and headers and clears the struct; safe to call twice and on a zeroed struct. */
void http_response_done(struct http_response *r);

/* Value of a response header (case-insensitive name; the last one if repeated) copied into buf
 * without surrounding blanks. Returns the length, -ENOENT if absent, -ENOBUFS if it does not
 * fit. */
int http_response_header(const struct http_response *r, const char *name, char *buf,
                         size_t buf_size);

/* Performs one request and waits for the complete response. method: "GET", "POST", "HEAD", ...;
 * url: "http://host:port/path" (with unix_socket set, the host part only goes into the Host
 * header, e.g. "http://localhost/v1.43/containers/json"); content_type may be NULL; body may be
 * NULL with body_len 0. timeout_ms covers the whole exchange (0 = no limit). Any HTTP status is
 * success (check ret->status). Returns 0 and fills *ret (free with http_response_done), or:
 *   -ETIMEDOUT, -ECONNREFUSED, -ENOENT (Unix socket path missing), -EACCES, -EADDRNOTAVAIL (the
 *   host name does not resolve, now or for good: the resolver does not say which),
 *   -EHOSTUNREACH (the proxy's name does not resolve), -EFBIG (response body over
 *   HTTP_CLIENT_MAX_BODY), -EINVAL (bad URL/method), -ENOMEM, -ECONNRESET (the server closed
 *   the connection without a reply: at its connection limit, or dying), else -EIO;
 * with curl's message in e. *ret is untouched on failure. */
int http_request(const char *method, const char *url, const char *unix_socket,
                 const char *content_type, const void *body, size_t body_len, long timeout_ms,
                 struct http_response *ret, struct errmsg *e);

/* JSON convenience: sends body (may be NULL: no body) serialised as application/json, with
 * "Accept: application/json". *ret_status gets the HTTP status; *ret_json the parsed reply (a new
 * reference) or NULL when the reply has no body or it is not valid JSON. ret_json may be NULL.
 * Returns 0 or the transport errors of http_request(). Does not steal body. */
int http_request_json(const char *method, const char *url, const char *unix_socket, json_t *body,
                      long timeout_ms, long *ret_status, json_t **ret_json, struct errmsg *e);

/* Streams the response body instead of buffering it: called for each chunk as it arrives.
 * Return 0 to continue or a negative errno to abort the transfer (http_request_opts() then
 * returns that errno). */
typedef int (*http_sink_fn)(const void *data, size_t len, void *userdata);

/* Everything http_request() takes, plus extra request headers, redirects and streaming, for
 * callers such as an OCI registry client. Zero-initialise and set what you need. */
struct http_client_opts {
    const char *method;      /* NULL = "GET" */
    const char *url;         /* required */
    const char *unix_socket; /* NULL = TCP */
    const char *content_type;
    const char *const *headers; /* NULL or NULL-terminated "Name: value" strings */
    const void *body;
    size_t body_len;
    long timeout_ms;         /* whole exchange; 0 = no limit */
    long connect_timeout_ms; /* 0 = curl's default */
    bool follow_redirects;   /* up to 10 */
    long low_speed_time_s;   /* abort with -ETIMEDOUT after this long under 1 KiB/s; 0 = never */
    const char *ca_file;     /* PEM bundle to verify TLS peers with; NULL = the system's */
    size_t max_body;         /* 0 = HTTP_CLIENT_MAX_BODY; ignored with sink */
    bool raw;                /* true: no Accept-Encoding, body as received (no gunzip) */
    http_sink_fn sink;       /* non-NULL: body goes here and ret->body stays "" */
    void *sink_userdata;
};

/* Performs the request described by o; same results and errors as http_request(). Unless
 * o->raw is set, compressed responses (Content-Encoding gzip/deflate/...) are decoded, and the
 * body limit applies to the decoded size. A sink's negative return aborts the transfer and is
 * returned. */
int http_request_opts(const struct http_client_opts *o, struct http_response *ret,
                      struct errmsg *e);
