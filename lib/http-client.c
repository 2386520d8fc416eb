/* HTTP client on libcurl; see http-client.h. */
#include "lib/http-client.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "lib/macro.h"

/* Header blocks beyond this are a misbehaving server, not data we need. */
#define HTTP_CLIENT_MAX_HEADERS (64u * 1024u)

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_result = CURLE_FAILED_INIT;

static void curl_init_once(void)
{
    curl_init_result = curl_global_init(CURL_GLOBAL_ALL);
}

struct growbuf {
    char *data;
    size_t len;
    size_t cap;
};

static int growbuf_add(struct growbuf *b, const void *p, size_t n)
{
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *d = realloc(b->data, cap);
        if (!d)
            return -ENOMEM;
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return 0;
}

/* libcurl (7.88) creates its sockets without close-on-exec, so a program that another thread
 * starts meanwhile (a hook script, the shutdown command) would inherit the connection, to the
 * Docker Engine as root for one. The flag is set at creation: setting it afterwards would leave
 * a window for such a fork. Used for TCP and Unix sockets alike. */
static curl_socket_t open_socket(void *userdata, curlsocktype purpose, struct curl_sockaddr *addr)
{
    int fd = socket(addr->family, addr->socktype | SOCK_CLOEXEC, addr->protocol);
    return fd < 0 ? CURL_SOCKET_BAD : fd;
}

/* Everything the curl callbacks fill in during one transfer. */
struct transfer {
    struct growbuf body;
    struct growbuf headers;
    size_t max_body;
    http_sink_fn sink;
    void *sink_userdata;
    int callback_error; /* why a callback stopped the transfer, 0 if none did */
};

static size_t on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct transfer *t = userdata;
    size_t n = size * nmemb;
    int r;
    if (t->sink)
        r = t->sink(ptr, n, t->sink_userdata);
    else if (t->body.len + n > t->max_body)
        r = -EFBIG;
    else
        r = growbuf_add(&t->body, ptr, n);
    if (r < 0) {
        t->callback_error = r;
        return 0; /* anything but n makes curl abort with CURLE_WRITE_ERROR */
    }
    return n;
}

static size_t on_header(char *ptr, size_t size, size_t nmemb, void *userdata)
{
    struct transfer *t = userdata;
    size_t n = size * nmemb;
    /* A status line starts a new response (after 100 Continue or a redirect): keep only the
     * headers of the final one. */
    if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0)
        t->headers.len = 0;
    if (t->headers.len + n > HTTP_CLIENT_MAX_HEADERS) {
        t->callback_error = -EFBIG;
        return 0;
    }
    if (growbuf_add(&t->headers, ptr, n) < 0) {
        t->callback_error = -ENOMEM;
        return 0;
    }
    return n;
}

void http_response_done(struct http_response *r)
{
    if (!r)
        return;
    free(r->body);
    free(r->headers);
    *r = (struct http_response){0};
}

int http_response_header(const struct http_response *r, const char *name, char *buf,
                         size_t buf_size)
{
    size_t nlen = strlen(name);
    const char *found = NULL;
    size_t found_len = 0;
    for (const char *line = r->headers; line && *line;) {
        size_t len = strcspn(line, "\r\n");
        if (len > nlen && line[nlen] == ':' && strncasecmp(line, name, nlen) == 0) {
            found = line + nlen + 1;
            found_len = len - nlen - 1;
        }
        line += len;
        line += strspn(line, "\r\n");
    }
    if (!found)
        return -ENOENT;
    while (found_len > 0 && (*found == ' ' || *found == '\t')) {
        found++;
        found_len--;
    }
    while (found_len > 0 && (found[found_len - 1] == ' ' || found[found_len - 1] == '\t'))
        found_len--;
    if (found_len + 1 > buf_size || found_len > INT32_MAX)
        return -ENOBUFS;
    memcpy(buf, found, found_len);
    buf[found_len] = '\0';
    return (int)found_len;
}

/* Maps a failed transfer to the errno-like codes promised in http-client.h. */
static int map_curl_error(CURL *h, CURLcode c, const struct transfer *t)
{
    if (t->callback_error < 0 && (c == CURLE_WRITE_ERROR || c == CURLE_ABORTED_BY_CALLBACK))
        return t->callback_error;
    long os_errno = 0;
    switch (c) {
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    /* Closed without a word: what a server at its connection limit does, or one that died. */
    case CURLE_GOT_NOTHING:
        return -ECONNRESET;
    case CURLE_COULDNT_CONNECT:
        (void)curl_easy_getinfo(h, CURLINFO_OS_ERRNO, &os_errno);
        if (os_errno == ENOENT || os_errno == EACCES || os_errno == ECONNREFUSED ||
            os_errno == ENOTSOCK || os_errno == ETIMEDOUT)
            return (int)-os_errno;
        return -ECONNREFUSED;
    case CURLE_COULDNT_RESOLVE_HOST:
        return -EADDRNOTAVAIL;
    case CURLE_COULDNT_RESOLVE_PROXY:
        return -EHOSTUNREACH;
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_BAD_FUNCTION_ARGUMENT:
        return -EINVAL;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    case CURLE_FILESIZE_EXCEEDED:
        return -EFBIG;
    default:
        return -EIO;
    }
}

static bool method_sends_body(const char *method)
{
    return strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
           strcmp(method, "PATCH") == 0;
}

static int build_headers(const struct http_client_opts *o, struct curl_slist **ret)
{
    struct curl_slist *list = NULL, *n;
    char ct[256];
    /* curl would otherwise wait up to a second for "100 Continue" before sending a body. */
    n = curl_slist_append(list, "Expect:");
    if (!n)
        goto fail;
    list = n;
    if (o->content_type) {
        if (snprintf(ct, sizeof(ct), "Content-Type: %s", o->content_type) >= (int)sizeof(ct)) {
            curl_slist_free_all(list);
            return -EINVAL;
        }
        if (!(n = curl_slist_append(list, ct)))
            goto fail;
        list = n;
    }
    for (size_t i = 0; o->headers && o->headers[i]; i++) {
        if (strpbrk(o->headers[i], "\r\n")) {
            curl_slist_free_all(list);
            return -EINVAL;
        }
        if (!(n = curl_slist_append(list, o->headers[i])))
            goto fail;
        list = n;
    }
    *ret = list;
    return 0;
fail:
    curl_slist_free_all(list);
    return -ENOMEM;
}

/* Sets every option of one transfer; returns CURLE_OK or the first failure. */
static CURLcode setup_handle(CURL *h, const struct http_client_opts *o, struct curl_slist *hdrs,
                             struct transfer *t, char *errbuf)
{
    const char *method = o->method ? o->method : "GET";
    CURLcode c = CURLE_OK;
#define SET(opt, val)                                                                              \
    do {                                                                                           \
        if (c == CURLE_OK)                                                                         \
            c = curl_easy_setopt(h, opt, val);                                                     \
    } while (0)
    SET(CURLOPT_ERRORBUFFER, errbuf);
    SET(CURLOPT_NOSIGNAL, 1L);
    SET(CURLOPT_URL, o->url);
    SET(CURLOPT_PROTOCOLS_STR, "http,https");
    SET(CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    if (o->unix_socket)
        SET(CURLOPT_UNIX_SOCKET_PATH, o->unix_socket);
    SET(CURLOPT_OPENSOCKETFUNCTION, open_socket);
    SET(CURLOPT_HTTPHEADER, hdrs);
    SET(CURLOPT_WRITEFUNCTION, on_body);
    SET(CURLOPT_WRITEDATA, t);
    SET(CURLOPT_HEADERFUNCTION, on_header);
    SET(CURLOPT_HEADERDATA, t);
    SET(CURLOPT_TIMEOUT_MS, o->timeout_ms > 0 ? o->timeout_ms : 0L);
    if (o->connect_timeout_ms > 0)
        SET(CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms);
    /* A transfer that stalls (a dead peer behind a NAT, a stuck proxy) fails like a timeout,
     * so callers that retry and resume treat it as one; timeout_ms would cut healthy long
     * downloads short. */
    if (o->low_speed_time_s > 0) {
        SET(CURLOPT_LOW_SPEED_LIMIT, 1024L);
        SET(CURLOPT_LOW_SPEED_TIME, o->low_speed_time_s);
    }
    if (o->ca_file)
        SET(CURLOPT_CAINFO, o->ca_file);
    if (o->follow_redirects) {
        SET(CURLOPT_FOLLOWLOCATION, 1L);
        SET(CURLOPT_MAXREDIRS, 10L);
    }
    if (!o->raw)
        SET(CURLOPT_ACCEPT_ENCODING, ""); /* every encoding curl can decode */
    if (strcmp(method, "HEAD") == 0)
        SET(CURLOPT_NOBODY, 1L);
    else if (o->body || method_sends_body(method)) {
        SET(CURLOPT_POSTFIELDS, o->body ? (const char *)o->body : "");
        SET(CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)(o->body ? o->body_len : 0));
        if (strcmp(method, "POST") != 0)
            SET(CURLOPT_CUSTOMREQUEST, method);
    } else if (strcmp(method, "GET") != 0)
        SET(CURLOPT_CUSTOMREQUEST, method);
#undef SET
    return c;
}

static int perform(CURL *h, const struct http_client_opts *o, struct transfer *t,
                   const char *errbuf, long *ret_status, struct errmsg *e)
{
    const char *method = o->method ? o->method : "GET";
    CURLcode c = curl_easy_perform(h);
    if (c != CURLE_OK) {
        int r = map_curl_error(h, c, t);
        const char *why = errbuf[0] ? errbuf : curl_easy_strerror(c);
        if (r == -EFBIG && t->callback_error == -EFBIG)
            why = "response too large";
        if (o->unix_socket)
            return errmsg_set(e, r, "%s %s via %s: %s", method, o->url, o->unix_socket, why);
        return errmsg_set(e, r, "%s %s: %s", method, o->url, why);
    }
    (void)curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, ret_status);
    return 0;
}

int http_request_opts(const struct http_client_opts *o, struct http_response *ret, struct errmsg *e)
{
    if (!o->url)
        return errmsg_set(e, -EINVAL, "no URL given");
    pthread_once(&curl_once, curl_init_once);
    if (curl_init_result != CURLE_OK)
        return errmsg_set(e, -EIO, "curl_global_init: %s", curl_easy_strerror(curl_init_result));
    struct curl_slist *hdrs = NULL;
    int r = build_headers(o, &hdrs);
    if (r < 0)
        return errmsg_set(e, r, "%s: invalid request headers", o->url);
    CURL *h = curl_easy_init();
    if (!h) {
        curl_slist_free_all(hdrs);
        return errmsg_set(e, -ENOMEM, "curl_easy_init failed");
    }
    struct transfer t = {.max_body = o->max_body ? o->max_body : HTTP_CLIENT_MAX_BODY,
                         .sink = o->sink,
                         .sink_userdata = o->sink_userdata};
    char errbuf[CURL_ERROR_SIZE] = "";
    long status = 0;
    CURLcode c = setup_handle(h, o, hdrs, &t, errbuf);
    if (c != CURLE_OK)
        r = errmsg_set(e, c == CURLE_OUT_OF_MEMORY ? -ENOMEM : -EINVAL, "%s: %s", o->url,
                       curl_easy_strerror(c));
    else
        r = perform(h, o, &t, errbuf, &status, e);
    curl_easy_cleanup(h);
    curl_slist_free_all(hdrs);
    /* Callers rely on body and headers being strings even when empty. */
    if (r >= 0 && (growbuf_add(&t.body, "", 0) < 0 || growbuf_add(&t.headers, "", 0) < 0))
        r = errmsg_set(e, -ENOMEM, "out of memory");
    if (r < 0) {
        free(t.body.data);
        free(t.headers.data);
        return r;
    }
    *ret = (struct http_response){.status = status,
                                  .body = t.body.data,
                                  .body_len = t.body.len,
                                  .headers = t.headers.data,
                                  .headers_len = t.headers.len};
    return 0;
}

int http_request(const char *method, const char *url, const char *unix_socket,
                 const char *content_type, const void *body, size_t body_len, long timeout_ms,
                 struct http_response *ret, struct errmsg *e)
{
    struct http_client_opts o = {
        .method = method,
        .url = url,
        .unix_socket = unix_socket,
        .content_type = content_type,
        .body = body,
        .body_len = body_len,
        .timeout_ms = timeout_ms,
    };
    return http_request_opts(&o, ret, e);
}

int http_request_json(const char *method, const char *url, const char *unix_socket, json_t *body,
                      long timeout_ms, long *ret_status, json_t **ret_json, struct errmsg *e)
{
    _cleanup_free_ char *text = NULL;
    if (body) {
        text = json_dumps(body, JSON_COMPACT | JSON_ENCODE_ANY);
        if (!text)
            return errmsg_set(e, -ENOMEM, "cannot serialise the request body");
    }
    static const char *const accept[] = {"Accept: application/json", NULL};
    struct http_client_opts o = {
        .method = method,
        .url = url,
        .unix_socket = unix_socket,
        .content_type = text ? "application/json" : NULL,
        .headers = accept,
        .body = text,
        .body_len = text ? strlen(text) : 0,
        .timeout_ms = timeout_ms,
    };
    struct http_response resp = {0};
    int r = http_request_opts(&o, &resp, e);
    if (r < 0)
        return r;
    if (ret_status)
        *ret_status = resp.status;
    if (ret_json)
        *ret_json = resp.body_len > 0 ? json_loadb(resp.body, resp.body_len, 0, NULL) : NULL;
    http_response_done(&resp);
    return 0;
}
