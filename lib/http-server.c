/* Embedded HTTP server on libmicrohttpd; see http-server.h. */
#include "lib/http-server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "lib/config.h"
#include "lib/gzip.h"
#include "lib/log.h"

/* Compressing a few hundred bytes saves nothing worth the CPU and the gzip header. */
#define GZIP_MIN_BODY  256u
#define LISTEN_BACKLOG 64

/* The connections one non-root uid holds on a Unix-socket server; count 0 marks a free entry. */
struct uid_slot {
    uid_t uid;
    unsigned count;
};

struct http_server {
    struct MHD_Daemon *mhd;
    http_handler_fn fn;
    void *userdata;
    bool is_unix;
    size_t max_body;
    unsigned max_per_uid; /* connections one non-root uid may hold (HTTP_SERVER_MAX_PER_UID) */
    uint16_t port;
    char *unix_path;
    /* Identity of the socket file we created, so that free() never unlinks a file that a
     * newer server put at the same path. */
    dev_t unix_dev;
    ino_t unix_ino;
    /* Per-uid connection counts (Unix socket only). Every uid in the table holds at least one
     * connection, so HTTP_SERVER_MAX_UNPRIVILEGED entries are always enough. */
    pthread_mutex_t lock;
    struct uid_slot slots[HTTP_SERVER_MAX_UNPRIVILEGED];
    unsigned unprivileged;
};

/* The socket context of a connection turned away at accept time. The address is all that
 * matters: a counted connection's context points into slots[], root's stays NULL. */
static char refused_marker;

/* Per-request state kept by MHD between calls of the access handler. */
struct request_ctx {
    char *body;
    size_t len;
    size_t cap;
    bool too_big;
};

static void mhd_logger(void *cls, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    char buf[512];
    vsnprintf(buf, sizeof(buf), fmt, ap);
    buf[strcspn(buf, "\n")] = '\0';
    log_debug("microhttpd: %s", buf);
}

/* Hands a borrowed body back to its owner, once. */
static void reply_release_shared(struct http_reply *reply)
{
    if (reply->release)
        reply->release(reply->release_cls);
    reply->shared = NULL;
    reply->release = NULL;
    reply->release_cls = NULL;
    reply->encoded = NULL;
}

void http_reply_done(struct http_reply *reply)
{
    reply_release_shared(reply);
    free(reply->body);
    for (unsigned i = 0; i < 2 * reply->n_headers; i++)
        free(reply->headers[i]);
    *reply = (struct http_reply){0};
}

void http_reply_take(struct http_reply *reply, unsigned status, const char *content_type,
                     char *body, size_t body_len, bool compressible)
{
    reply_release_shared(reply);
    free(reply->body);
    reply->status = status;
    reply->content_type = content_type;
    reply->body = body;
    reply->body_len = body ? body_len : 0;
    reply->compressible = compressible;
}

void http_reply_shared(struct http_reply *reply, unsigned status, const char *content_type,
                       const char *body, size_t body_len, const char *encoding, bool vary_encoding,
                       void (*release)(void *cls), void *cls)
{
    http_reply_take(reply, status, content_type, NULL, 0, vary_encoding);
    reply->shared = body;
    reply->body_len = body_len;
    reply->encoded = encoding;
    reply->release = release;
    reply->release_cls = cls;
}

void http_reply_json(struct http_reply *reply, unsigned status, json_t *json)
{
    /* Fifteen significant digits print 1.39 rather than 1.3899999999999999 (the seventeen a
     * double needs to round-trip) and still keep ten microseconds on a UNIX time (gpuq's job
     * times; ten digits would round those to the second). */
    size_t flags = JSON_COMPACT | JSON_ENCODE_ANY | JSON_REAL_PRECISION(15);
    char *text = json ? json_dumps(json, flags) : NULL;
    json_decref(json);
    if (!text) {
        http_reply_error(reply, 500, "cannot serialise the reply");
        return;
    }
    http_reply_take(reply, status, "application/json", text, strlen(text), true);
}

void http_reply_error(struct http_reply *reply, unsigned status, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *j = json_pack("{s:s}", "error", msg);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    /* Out of memory: still answer with the status, without a body. */
    http_reply_take(reply, status, "application/json", text, text ? strlen(text) : 0, false);
}

int http_reply_header(struct http_reply *reply, const char *name, const char *value)
{
    if (reply->n_headers >= HTTP_REPLY_MAX_HEADERS)
        return -E2BIG;
    if (!name[0] || strpbrk(name, "\r\n: ") || strpbrk(value, "\r\n"))
        return -EINVAL;
    char *n = strdup(name), *v = strdup(value);
    if (!n || !v) {
        free(n);
        free(v);
        return -ENOMEM;
    }
    reply->headers[2 * reply->n_headers] = n;
    reply->headers[2 * reply->n_headers + 1] = v;
    reply->n_headers++;
    return 0;
}

const char *http_request_header(const struct http_request *req, const char *name)
{
    return MHD_lookup_connection_value(req->mhd_connection, MHD_HEADER_KIND, name);
}

const char *http_request_query(const struct http_request *req, const char *name)
{
    const char *v = NULL;
    size_t len;
    if (MHD_lookup_connection_value_n(req->mhd_connection, MHD_GET_ARGUMENT_KIND, name,
                                      strlen(name), &v, &len) != MHD_YES)
        return NULL;
    return v ? v : "";
}

/* True if an Accept-Encoding value allows gzip: listed with q > 0, or not listed and "*" with
 * q > 0. "gzip;q=0" refuses it explicitly. */
static bool accepts_gzip(const char *ae)
{
    if (!ae)
        return false;
    int gzip = -1, star = -1; /* -1 not listed, 0 refused, 1 accepted */
    while (*ae) {
        size_t n = strcspn(ae, ",");
        const char *tok = ae;
        while (n > 0 && (*tok == ' ' || *tok == '\t')) {
            tok++;
            n--;
        }
        size_t tn = strcspn(tok, ",; \t");
        if (tn > n)
            tn = n;
        bool ok = true;
        const char *q = memchr(tok, ';', n);
        if (q) {
            q++;
            while (*q == ' ' || *q == '\t')
                q++;
            if ((*q == 'q' || *q == 'Q') && q[1] == '=')
                ok = strtod(q + 2, NULL) > 0; /* "q=0", "q=0.0", "q=0.000" refuse */
        }
        if ((tn == 4 && strncasecmp(tok, "gzip", 4) == 0) ||
            (tn == 6 && strncasecmp(tok, "x-gzip", 6) == 0))
            gzip = ok;
        else if (tn == 1 && tok[0] == '*')
            star = ok;
        ae = tok + n;
        if (*ae == ',')
            ae++;
    }
    return gzip == 1 || (gzip == -1 && star == 1);
}

bool http_request_accepts_gzip(const struct http_request *req)
{
    return accepts_gzip(http_request_header(req, "Accept-Encoding"));
}

static void maybe_compress(struct MHD_Connection *conn, struct http_reply *reply, bool *gzipped)
{
    *gzipped = false;
    if (!reply->compressible || reply->body_len < GZIP_MIN_BODY || reply->body_len > UINT32_MAX)
        return;
    if (!accepts_gzip(MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Accept-Encoding")))
        return;
    char *z;
    size_t zlen;
    if (gzip_compress(reply->body, reply->body_len, &z, &zlen) < 0)
        return; /* sending it uncompressed is still correct */
    free(reply->body);
    reply->body = z;
    reply->body_len = zlen;
    *gzipped = true;
}

/* Turns reply into an MHD response and queues it; the reply's body passes to MHD. */
static enum MHD_Result queue_reply(struct MHD_Connection *conn, struct http_reply *reply)
{
    if (reply->status < 100 || reply->status > 999)
        http_reply_error(reply, 500, "internal error: the handler gave no reply");
    bool gzipped = false;
    const char *encoding = reply->encoded;
    if (!reply->shared) {
        maybe_compress(conn, reply, &gzipped);
        encoding = gzipped ? "gzip" : NULL;
    }

    struct MHD_Response *resp;
    if (reply->shared) {
        /* MHD keeps the bytes until the last connection using this response is done, then calls
         * the release callback; from then on the reply no longer owns it. */
        resp = MHD_create_response_from_buffer_with_free_callback_cls(
            reply->body_len, (void *)reply->shared, reply->release, reply->release_cls);
        if (resp)
            reply->release = NULL;
    } else if (reply->body) {
        resp =
            MHD_create_response_from_buffer_with_free_callback(reply->body_len, reply->body, free);
        if (resp)
            reply->body = NULL; /* MHD frees it once sent */
    } else
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    bool ok = true;
    if (reply->content_type)
        ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, reply->content_type);
    for (unsigned i = 0; ok && i < reply->n_headers; i++)
        ok = MHD_add_response_header(resp, reply->headers[2 * i], reply->headers[2 * i + 1]);
    if (ok && reply->compressible)
        ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_VARY, "Accept-Encoding");
    if (ok && encoding)
        ok = MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_ENCODING, encoding);
    enum MHD_Result r = ok ? MHD_queue_response(conn, reply->status, resp) : MHD_NO;
    MHD_destroy_response(resp);
    return r;
}

static enum MHD_Result queue_error(struct MHD_Connection *conn, unsigned status, const char *msg)
{
    struct http_reply reply = {0};
    http_reply_error(&reply, status, "%s", msg);
    enum MHD_Result r = queue_reply(conn, &reply);
    http_reply_done(&reply);
    return r;
}

static void fill_peer(const struct http_server *s, struct MHD_Connection *conn,
                      struct http_peer *peer)
{
    /* Unknown credentials are -1, which no role mapping may grant anything to. */
    *peer = (struct http_peer){.is_unix = s->is_unix, .uid = (uid_t)-1, .gid = (gid_t)-1};
    if (s->is_unix) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct ucred cred;
        socklen_t len = sizeof(cred);
        if (ci && getsockopt(ci->connect_fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0) {
            peer->uid = cred.uid;
            peer->gid = cred.gid;
            peer->pid = cred.pid;
        }
        snprintf(peer->addr, sizeof(peer->addr), "unix");
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    const struct sockaddr *sa = ci ? ci->client_addr : NULL;
    if (sa && sa->sa_family == AF_INET)
        inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, peer->addr,
                  sizeof(peer->addr));
    else if (sa && sa->sa_family == AF_INET6)
        inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, peer->addr,
                  sizeof(peer->addr));
}

static bool content_length_too_big(const struct http_server *s, struct MHD_Connection *conn)
{
    const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Content-Length");
    return cl && strtoull(cl, NULL, 10) > __atomic_load_n(&s->max_body, __ATOMIC_RELAXED);
}

/* Collects an upload chunk; bodies over the limit are read and dropped, then answered 413. */
static int append_body(const struct http_server *s, struct request_ctx *ctx, const char *data,
                       size_t n)
{
    if (ctx->too_big || ctx->len + n > __atomic_load_n(&s->max_body, __ATOMIC_RELAXED)) {
        ctx->too_big = true;
        return 0;
    }
    if (ctx->len + n + 1 > ctx->cap) {
        size_t cap = ctx->cap ? ctx->cap : 1024;
        while (cap < ctx->len + n + 1)
            cap *= 2;
        char *b = realloc(ctx->body, cap);
        if (!b)
            return -ENOMEM;
        ctx->body = b;
        ctx->cap = cap;
    }
    memcpy(ctx->body + ctx->len, data, n);
    ctx->len += n;
    ctx->body[ctx->len] = '\0';
    return 0;
}

static enum MHD_Result run_handler(struct http_server *s, struct MHD_Connection *conn,
                                   const char *url, const char *method, struct request_ctx *ctx)
{
    bool head = strcmp(method, "HEAD") == 0;
    struct http_request req = {
        /* Handlers answer HEAD like GET; MHD sends the headers and drops the body. */
        .method = head ? "GET" : method,
        .path = url,
        .body = ctx->body ? ctx->body : "",
        .body_len = ctx->len,
        .head = head,
        .mhd_connection = conn,
    };
    fill_peer(s, conn, &req.peer);
    struct http_reply reply = {0};
    s->fn(&req, &reply, s->userdata);
    enum MHD_Result r = queue_reply(conn, &reply);
    http_reply_done(&reply);
    return r;
}

/* Counts a new connection of a non-root uid. Returns its table entry, or NULL when the uid or all
 * non-root uids together already hold their share. */
static struct uid_slot *slot_take(struct http_server *s, uid_t uid)
{
    struct uid_slot *slot = NULL, *unused = NULL;
    pthread_mutex_lock(&s->lock);
    for (size_t i = 0; i < ELEMENTSOF(s->slots); i++) {
        if (s->slots[i].count > 0 && s->slots[i].uid == uid)
            slot = &s->slots[i];
        else if (s->slots[i].count == 0 && !unused)
            unused = &s->slots[i];
    }
    if (s->unprivileged >= HTTP_SERVER_MAX_UNPRIVILEGED ||
        (slot && slot->count >= __atomic_load_n(&s->max_per_uid, __ATOMIC_RELAXED)) ||
        (!slot && !unused))
        slot = NULL;
    else {
        if (!slot) {
            slot = unused;
            slot->uid = uid;
        }
        slot->count++;
        s->unprivileged++;
    }
    pthread_mutex_unlock(&s->lock);
    return slot;
}

static void slot_release(struct http_server *s, struct uid_slot *slot)
{
    pthread_mutex_lock(&s->lock);
    slot->count--;
    s->unprivileged--;
    pthread_mutex_unlock(&s->lock);
}

/* MHD calls this for a Unix-socket server when it has accepted a connection (before the
 * connection's thread reads anything) and when the connection is gone. A connection over its
 * uid's share is shut down here: its thread then reads EOF and MHD closes it, and on_request()
 * refuses whatever request it may have sent before the shutdown. */
static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode toe)
{
    struct http_server *s = cls;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (*socket_context && *socket_context != &refused_marker)
            slot_release(s, *socket_context);
        *socket_context = NULL;
        return;
    }
    if (toe != MHD_CONNECTION_NOTIFY_STARTED)
        return;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    int fd = ci ? ci->connect_fd : -1;
    struct ucred cred;
    socklen_t len = sizeof(cred);
    /* Unknown credentials count as one more unprivileged uid. */
    uid_t uid = (uid_t)-1;
    if (fd >= 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0)
        uid = cred.uid;
    if (uid == 0)
        return; /* root is never counted: what the others cannot take stays free for it */
    struct uid_slot *slot = slot_take(s, uid);
    if (slot) {
        *socket_context = slot;
        return;
    }
    *socket_context = &refused_marker;
    log_debug("http: refusing a connection of uid %d: too many connections", (int)uid);
    if (fd >= 0)
        (void)shutdown(fd, SHUT_RDWR);
}

static bool connection_refused(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci && ci->socket_context == &refused_marker;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct http_server *s = cls;
    struct request_ctx *ctx = *con_cls;
    if (!ctx) {
        if (connection_refused(conn))
            return MHD_NO; /* closes the connection without an answer */
        /* First call: only headers are in. Refusing an announced oversized body now spares
         * reading it (and the client's "Expect: 100-continue" gets the answer at once). */
        if (content_length_too_big(s, conn))
            return queue_error(conn, 413, "request body too large");
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
            return MHD_NO;
        *con_cls = ctx;
        return MHD_YES;
    }
    if (*upload_data_size > 0) {
        int r = append_body(s, ctx, upload_data, *upload_data_size);
        *upload_data_size = 0;
        return r < 0 ? MHD_NO : MHD_YES;
    }
    if (ctx->too_big)
        return queue_error(conn, 413, "request body too large");
    return run_handler(s, conn, url, method, ctx);
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    struct request_ctx *ctx = *con_cls;
    if (!ctx)
        return;
    free(ctx->body);
    free(ctx);
    *con_cls = NULL;
}

/* Starts MHD on an already listening socket. On success MHD owns fd. */
static int server_start(struct http_server *s, int fd, struct errmsg *e)
{
    struct stat st_before;
    if (fstat(fd, &st_before) < 0)
        return errmsg_set(e, negative_errno(), "fstat: %s", strerror(errno));
    unsigned flags =
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ERROR_LOG;
    /* Peer credentials exist only on a Unix socket; a TCP server does not count connections. */
    MHD_NotifyConnectionCallback notify = s->is_unix ? on_connection : NULL;
    unsigned timeout_s = s->is_unix ? HTTP_SERVER_UNIX_TIMEOUT_S : HTTP_SERVER_TIMEOUT_S;
    s->mhd = MHD_start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET, fd,
                              MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                              MHD_OPTION_NOTIFY_CONNECTION, notify, s, MHD_OPTION_CONNECTION_LIMIT,
                              (unsigned)HTTP_SERVER_MAX_CONNECTIONS, MHD_OPTION_CONNECTION_TIMEOUT,
                              timeout_s, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, s, MHD_OPTION_END);
    if (s->mhd)
        return 0;
    /* Whether MHD closed fd on failure differs between its error paths; close it only if the
     * descriptor still refers to our socket (a socket's inode is unique while it is open). */
    struct stat st_after;
    if (fstat(fd, &st_after) == 0 && st_after.st_ino == st_before.st_ino &&
        st_after.st_dev == st_before.st_dev)
        close(fd);
    return errmsg_set(e, -EIO, "cannot start the HTTP server (libmicrohttpd failed)");
}

static int bind_tcp_one(const struct sockaddr *sa, socklen_t len, int *ret_fd)
{
    _cleanup_close_ int fd = socket(sa->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return negative_errno();
    int one = 1, zero = 0;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    /* An IPv6 wildcard should also take IPv4 clients, whatever the sysctl default says. */
    if (sa->sa_family == AF_INET6)
        (void)setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
    if (bind(fd, sa, len) < 0 || listen(fd, LISTEN_BACKLOG) < 0)
        return negative_errno();
    *ret_fd = TAKE_FD(fd);
    return 0;
}

static int listen_tcp(const char *listen_addr, int *ret_fd, uint16_t *ret_port, struct errmsg *e)
{
    char host[256], port_str[8];
    uint16_t port;
    int r = parse_listen_address(listen_addr, host, sizeof(host), &port, e);
    if (r < 0)
        return r;
    snprintf(port_str, sizeof(port_str), "%u", port);
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *ai = NULL;
    int g = getaddrinfo(host[0] ? host : "::", port_str, &hints, &ai);
    if (g != 0 && !host[0])
        g = getaddrinfo("0.0.0.0", port_str, &hints, &ai); /* a kernel without IPv6 */
    if (g != 0)
        return errmsg_set(e, -EADDRNOTAVAIL, "listen address '%s': %s", listen_addr,
                          gai_strerror(g));
    int fd = -1;
    r = -EADDRNOTAVAIL;
    for (struct addrinfo *a = ai; a && fd < 0; a = a->ai_next)
        r = bind_tcp_one(a->ai_addr, a->ai_addrlen, &fd);
    freeaddrinfo(ai);
    if (r < 0 && !host[0] && r == -EAFNOSUPPORT) {
        struct sockaddr_in any = {.sin_family = AF_INET, .sin_port = htons(port)};
        r = bind_tcp_one((struct sockaddr *)&any, sizeof(any), &fd);
    }
    if (r < 0)
        return errmsg_set(e, r, "cannot listen on %s: %s", listen_addr, strerror(-r));
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0) {
        r = negative_errno();
        close(fd);
        return errmsg_set(e, r, "getsockname: %s", strerror(-r));
    }
    *ret_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port
                                               : ((struct sockaddr_in *)&ss)->sin_port);
    *ret_fd = fd;
    return 0;
}

int http_server_new_tcp(const char *listen_addr, http_handler_fn fn, void *userdata,
                        struct http_server **ret, struct errmsg *e)
{
    _cleanup_free_ struct http_server *s = calloc(1, sizeof(*s));
    if (s)
        s->max_body = HTTP_SERVER_MAX_BODY;
    s->max_per_uid = HTTP_SERVER_MAX_PER_UID;
    if (!s)
        return errmsg_set(e, -ENOMEM, "out of memory");
    pthread_mutex_init(&s->lock, NULL);
    s->fn = fn;
    s->userdata = userdata;
    int fd;
    int r = listen_tcp(listen_addr, &fd, &s->port, e);
    if (r < 0)
        return r;
    r = server_start(s, fd, e);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(s);
    return 0;
}

/* Removes a socket file that no server answers on any more; refuses anything else. */
static int remove_stale_socket(const char *path, const struct sockaddr_un *sun, struct errmsg *e)
{
    struct stat st;
    if (lstat(path, &st) < 0)
        return errno == ENOENT ? 0 : errmsg_set(e, negative_errno(), "%s: %m", path);
    if (!S_ISSOCK(st.st_mode))
        return errmsg_set(e, -EEXIST, "%s exists and is not a socket", path);
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "socket: %m");
    if (connect(fd, (const struct sockaddr *)sun, sizeof(*sun)) == 0)
        return errmsg_set(e, -EADDRINUSE, "%s: another server is listening there", path);
    if (errno != ECONNREFUSED)
        return errmsg_set(e, negative_errno(), "%s: %m", path);
    if (unlink(path) < 0 && errno != ENOENT)
        return errmsg_set(e, negative_errno(), "cannot remove stale socket %s: %m", path);
    return 0;
}

static int listen_unix(const char *path, mode_t mode, int *ret_fd, struct stat *ret_st,
                       struct errmsg *e)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sun.sun_path))
        return errmsg_set(e, -ENAMETOOLONG, "socket path too long: %s", path);
    strcpy(sun.sun_path, path);
    int r = remove_stale_socket(path, &sun, e);
    if (r < 0)
        return r;
    _cleanup_close_ int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "socket: %m");
    if (bind(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0)
        return errmsg_set(e, negative_errno(), "cannot bind %s: %m", path);
    /* The file mode comes from the umask at bind(); set it explicitly (fchmod() on a socket
     * does not reach the file). */
    if (chmod(path, mode) < 0 || lstat(path, ret_st) < 0 || listen(fd, LISTEN_BACKLOG) < 0) {
        r = errmsg_set(e, negative_errno(), "%s: %m", path);
        unlink(path);
        return r;
    }
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int http_server_new_unix(const char *path, mode_t mode, http_handler_fn fn, void *userdata,
                         struct http_server **ret, struct errmsg *e)
{
    _cleanup_free_ struct http_server *s = calloc(1, sizeof(*s));
    if (s)
        s->max_body = HTTP_SERVER_MAX_BODY;
    s->max_per_uid = HTTP_SERVER_MAX_PER_UID;
    if (!s)
        return errmsg_set(e, -ENOMEM, "out of memory");
    _cleanup_free_ char *p = strdup(path);
    if (!p)
        return errmsg_set(e, -ENOMEM, "out of memory");
    pthread_mutex_init(&s->lock, NULL);
    s->fn = fn;
    s->userdata = userdata;
    s->is_unix = true;
    int fd = -1;
    struct stat st;
    int r = listen_unix(path, mode, &fd, &st, e);
    if (r < 0)
        return r;
    r = server_start(s, fd, e);
    if (r < 0) {
        unlink(path);
        return r;
    }
    s->unix_path = TAKE_PTR(p);
    s->unix_dev = st.st_dev;
    s->unix_ino = st.st_ino;
    *ret = TAKE_PTR(s);
    return 0;
}

uint16_t http_server_port(const struct http_server *s)
{
    return s->is_unix ? 0 : s->port;
}

void http_server_free(struct http_server *s)
{
    if (!s)
        return;
    /* With a thread per connection, MHD_stop_daemon() joins every connection thread, so no
     * handler runs after this returns. */
    if (s->mhd)
        MHD_stop_daemon(s->mhd);
    struct stat st;
    if (s->unix_path && lstat(s->unix_path, &st) == 0 && st.st_dev == s->unix_dev &&
        st.st_ino == s->unix_ino)
        unlink(s->unix_path);
    free(s->unix_path);
    pthread_mutex_destroy(&s->lock);
    free(s);
}

void http_server_set_max_per_uid(struct http_server *s, unsigned max)
{
    if (max > HTTP_SERVER_MAX_UNPRIVILEGED)
        max = HTTP_SERVER_MAX_UNPRIVILEGED;
    __atomic_store_n(&s->max_per_uid, max ? max : 1, __ATOMIC_RELAXED);
}

void http_server_set_max_body(struct http_server *s, size_t max)
{
    __atomic_store_n(&s->max_body, max, __ATOMIC_RELAXED);
}
