/* Tests for lib/http-server.c and lib/http-client.c together: TCP on port 0 and a Unix socket
 * in a temp dir, peer credentials, gzip negotiation, body limits, HEAD, concurrency, the
 * client's error codes and close-on-exec sockets, and the per-uid connection limits that keep
 * other local users from locking root out of a Unix-socket server. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include <cmocka.h>

#include "test-skip.h"

#include "lib/http-client.h"
#include "lib/http-server.h"

struct fixture {
    struct http_server *tcp;
    struct http_server *unix_srv;
    char dir[64];
    char sock[128];
    char base[64]; /* "http://127.0.0.1:PORT" */
};

static atomic_int handler_calls;

/* The fixture's servers, for the handler that looks for the client's end of a connection. */
static char fixture_sock[128];
static unsigned fixture_port;

/* The /slow handler waits until the test says a second request got through meanwhile. */
static pthread_mutex_t slow_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t slow_cond = PTHREAD_COND_INITIALIZER;
static bool slow_entered, fast_done;

static char *pattern(size_t n)
{
    char *b = malloc(n + 1);
    assert_non_null(b);
    for (size_t i = 0; i < n; i++)
        b[i] = "metric_line 12345\n"[i % 18];
    b[n] = '\0';
    return b;
}

static void reply_echo(const struct http_request *req, struct http_reply *reply)
{
    const char *q = http_request_query(req, "q");
    const char *flag = http_request_query(req, "flag");
    const char *hdr = http_request_header(req, "x-test");
    json_t *j = json_pack(
        "{s:s, s:s, s:s%, s:b, s:b, s:I, s:I, s:I, s:s, s:o, s:o, s:o}", "method", req->method,
        "path", req->path, "body", req->body, req->body_len, "head", req->head, "is_unix",
        req->peer.is_unix, "uid", (json_int_t)(int)req->peer.uid, "gid",
        (json_int_t)(int)req->peer.gid, "pid", (json_int_t)req->peer.pid, "addr", req->peer.addr,
        "q", q ? json_string(q) : json_null(), "flag", flag ? json_string(flag) : json_null(),
        "hdr", hdr ? json_string(hdr) : json_null());
    http_reply_json(reply, 200, j);
}

static void reply_slow(struct http_reply *reply)
{
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += 5;
    pthread_mutex_lock(&slow_lock);
    slow_entered = true;
    pthread_cond_broadcast(&slow_cond);
    int r = 0;
    while (!fast_done && r == 0)
        r = pthread_cond_timedwait(&slow_cond, &slow_lock, &deadline);
    bool released = fast_done;
    pthread_mutex_unlock(&slow_lock);
    http_reply_json(reply, 200, json_pack("{s:b}", "released", released));
}

/* True if the socket fd is connected to one of the fixture's servers (the client's end: the
 * server's end of a Unix connection has an unnamed peer, of a TCP one an ephemeral port). */
static bool connected_to_fixture(int fd)
{
    struct sockaddr_storage ss;
    socklen_t len = sizeof(ss);
    if (getpeername(fd, (struct sockaddr *)&ss, &len) < 0)
        return false;
    if (ss.ss_family == AF_UNIX) {
        const struct sockaddr_un *sun = (const struct sockaddr_un *)&ss;
        return len > offsetof(struct sockaddr_un, sun_path) &&
               strncmp(sun->sun_path, fixture_sock, sizeof(sun->sun_path)) == 0;
    }
    return ss.ss_family == AF_INET &&
           ntohs(((const struct sockaddr_in *)&ss)->sin_port) == fixture_port;
}

/* Counts the client sockets of this process that are connected to the fixture's servers (the
 * one of the request being answered), and how many of them a spawned program would inherit. */
static void reply_client_fds(struct http_reply *reply)
{
    int found = 0, inheritable = 0;
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;
    while (d && (de = readdir(d))) {
        int fd = atoi(de->d_name);
        if (de->d_name[0] == '.' || fd == dirfd(d) || !connected_to_fixture(fd))
            continue;
        found++;
        if (!(fcntl(fd, F_GETFD) & FD_CLOEXEC))
            inheritable++;
    }
    if (d)
        closedir(d);
    http_reply_json(reply, 200,
                    json_pack("{s:i, s:i}", "found", found, "inheritable", inheritable));
}

static void handler(const struct http_request *req, struct http_reply *reply, void *userdata)
{
    atomic_fetch_add(&handler_calls, 1);
    const char *n = http_request_query(req, "n");
    if (strcmp(req->path, "/echo") == 0)
        reply_echo(req, reply);
    else if (strcmp(req->path, "/big") == 0 || strcmp(req->path, "/big-plain") == 0) {
        size_t len = n ? strtoul(n, NULL, 10) : 10000;
        if (req->head && strcmp(req->method, "GET") == 0)
            (void)http_reply_header(reply, "X-Saw-Head", "1");
        http_reply_take(reply, 200, "text/plain", pattern(len), len,
                        strcmp(req->path, "/big") == 0);
    } else if (strcmp(req->path, "/slow") == 0)
        reply_slow(reply);
    else if (strcmp(req->path, "/sleep") == 0) {
        usleep(1000 * 1000);
        http_reply_json(reply, 200, json_object());
    } else if (strcmp(req->path, "/client-fds") == 0)
        reply_client_fds(reply);
    else if (strcmp(req->path, "/none") == 0)
        ; /* no reply at all */
    else if (strcmp(req->path, "/notjson") == 0)
        http_reply_take(reply, 200, "text/plain", strdup("hello"), 5, false);
    else if (strcmp(req->path, "/header") == 0) {
        /* No cmocka asserts here: this runs on a server thread. */
        bool ok = http_reply_header(reply, "X-Thing", "42") == 0 &&
                  http_reply_header(reply, "Bad", "a\r\nInjected: 1") == -EINVAL;
        http_reply_error(reply, ok ? 201 : 500, "made %d", 1);
    } else
        http_reply_error(reply, 404, "no such path '%s'", req->path);
}

static int setup(void **state)
{
    struct fixture *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    strcpy(f->dir, "/tmp/test-http-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->sock, sizeof(f->sock), "%s/api.sock", f->dir);
    struct errmsg e = {""};
    assert_int_equal(http_server_new_tcp("127.0.0.1:0", handler, NULL, &f->tcp, &e), 0);
    assert_true(http_server_port(f->tcp) > 0);
    snprintf(f->base, sizeof(f->base), "http://127.0.0.1:%u", http_server_port(f->tcp));
    assert_int_equal(http_server_new_unix(f->sock, 0666, handler, NULL, &f->unix_srv, &e), 0);
    snprintf(fixture_sock, sizeof(fixture_sock), "%s", f->sock);
    fixture_port = http_server_port(f->tcp);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *f = *state;
    http_server_free(f->tcp);
    http_server_free(f->unix_srv);
    rmdir(f->dir);
    free(f);
    return 0;
}

static void url(char *buf, size_t size, const struct fixture *f, const char *path)
{
    snprintf(buf, size, "%s%s", f->base, path);
}

static void test_tcp_json_roundtrip(void **state)
{
    struct fixture *f = *state;
    char u[256];
    url(u, sizeof(u), f, "/echo?q=a%20b&flag");
    json_t *body = json_pack("{s:i}", "x", 1);
    json_t *reply = NULL;
    long status = 0;
    struct errmsg e = {""};
    assert_int_equal(http_request_json("POST", u, NULL, body, 5000, &status, &reply, &e), 0);
    json_decref(body);
    assert_int_equal(status, 200);
    assert_non_null(reply);
    assert_string_equal(json_string_value(json_object_get(reply, "method")), "POST");
    assert_string_equal(json_string_value(json_object_get(reply, "path")), "/echo");
    assert_string_equal(json_string_value(json_object_get(reply, "body")), "{\"x\":1}");
    assert_string_equal(json_string_value(json_object_get(reply, "q")), "a b");
    assert_string_equal(json_string_value(json_object_get(reply, "flag")), "");
    assert_false(json_is_true(json_object_get(reply, "is_unix")));
    assert_int_equal(json_integer_value(json_object_get(reply, "uid")), -1);
    assert_int_equal(json_integer_value(json_object_get(reply, "gid")), -1);
    assert_string_equal(json_string_value(json_object_get(reply, "addr")), "127.0.0.1");
    json_decref(reply);
}

static void test_unix_peer_credentials(void **state)
{
    struct fixture *f = *state;
    struct stat st;
    assert_int_equal(stat(f->sock, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0666);

    const char *const hdrs[] = {"X-Test: yes", NULL};
    struct http_client_opts o = {.method = "DELETE",
                                 .url = "http://localhost/echo",
                                 .unix_socket = f->sock,
                                 .headers = hdrs,
                                 .timeout_ms = 5000};
    struct http_response resp = {0};
    struct errmsg e = {""};
    assert_int_equal(http_request_opts(&o, &resp, &e), 0);
    assert_int_equal(resp.status, 200);
    json_t *j = json_loadb(resp.body, resp.body_len, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "method")), "DELETE");
    assert_true(json_is_true(json_object_get(j, "is_unix")));
    assert_int_equal(json_integer_value(json_object_get(j, "uid")), (json_int_t)getuid());
    assert_int_equal(json_integer_value(json_object_get(j, "gid")), (json_int_t)getgid());
    assert_int_equal(json_integer_value(json_object_get(j, "pid")), (json_int_t)getpid());
    assert_string_equal(json_string_value(json_object_get(j, "hdr")), "yes");
    assert_true(json_is_null(json_object_get(j, "q")));
    json_decref(j);
    http_response_done(&resp);
    http_response_done(&resp); /* safe twice */
}

static int inflate_gzip(const char *in, size_t in_len, char *out, size_t out_size, size_t *ret_len)
{
    z_stream z = {0};
    if (inflateInit2(&z, 16 + 15) != Z_OK)
        return -1;
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)in_len;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)out_size;
    int r = inflate(&z, Z_FINISH);
    *ret_len = z.total_out;
    inflateEnd(&z);
    return r == Z_STREAM_END ? 0 : -1;
}

/* Fetches path with the given Accept-Encoding, curl's own decoding off. */
static void fetch_raw(const struct fixture *f, const char *path, const char *accept_encoding,
                      struct http_response *resp)
{
    char u[256], ae[128];
    url(u, sizeof(u), f, path);
    snprintf(ae, sizeof(ae), "Accept-Encoding: %s", accept_encoding);
    const char *const hdrs[] = {ae, NULL};
    struct http_client_opts o = {.url = u, .headers = hdrs, .raw = true, .timeout_ms = 5000};
    struct errmsg e = {""};
    assert_int_equal(http_request_opts(&o, resp, &e), 0);
    assert_int_equal(resp->status, 200);
}

static void test_gzip_negotiation(void **state)
{
    struct fixture *f = *state;
    _cleanup_free_ char *want = pattern(10000);
    char buf[64], out[20000];
    size_t out_len;
    struct http_response resp = {0};

    fetch_raw(f, "/big", "deflate, gzip;q=0.5", &resp);
    assert_int_equal(http_response_header(&resp, "content-encoding", buf, sizeof(buf)), 4);
    assert_string_equal(buf, "gzip");
    assert_true(http_response_header(&resp, "Vary", buf, sizeof(buf)) > 0);
    assert_string_equal(buf, "Accept-Encoding");
    assert_true(resp.body_len < 1000);
    assert_int_equal(inflate_gzip(resp.body, resp.body_len, out, sizeof(out), &out_len), 0);
    assert_int_equal(out_len, 10000);
    assert_memory_equal(out, want, 10000);
    http_response_done(&resp);

    /* Explicitly refused, not offered, only via a wildcard refused by name. */
    static const char *const no_gzip[] = {"gzip;q=0", "identity", "*;q=1, gzip;q=0.000", "br"};
    for (size_t i = 0; i < ELEMENTSOF(no_gzip); i++) {
        fetch_raw(f, "/big", no_gzip[i], &resp);
        assert_int_equal(http_response_header(&resp, "Content-Encoding", buf, sizeof(buf)),
                         -ENOENT);
        assert_int_equal(resp.body_len, 10000);
        assert_memory_equal(resp.body, want, 10000);
        http_response_done(&resp);
    }

    fetch_raw(f, "/big", "*", &resp);
    assert_int_equal(http_response_header(&resp, "Content-Encoding", buf, sizeof(buf)), 4);
    http_response_done(&resp);

    /* A reply not marked compressible is sent as is. */
    fetch_raw(f, "/big-plain", "gzip", &resp);
    assert_int_equal(http_response_header(&resp, "Content-Encoding", buf, sizeof(buf)), -ENOENT);
    assert_int_equal(resp.body_len, 10000);
    http_response_done(&resp);

    /* The default client asks for compression and decodes it. */
    char u[256];
    url(u, sizeof(u), f, "/big");
    struct errmsg e = {""};
    assert_int_equal(http_request("GET", u, NULL, NULL, NULL, 0, 5000, &resp, &e), 0);
    assert_int_equal(http_response_header(&resp, "Content-Encoding", buf, sizeof(buf)), 4);
    assert_int_equal(resp.body_len, 10000);
    assert_memory_equal(resp.body, want, 10000);
    http_response_done(&resp);
}

static void test_body_limit(void **state)
{
    struct fixture *f = *state;
    char u[256];
    url(u, sizeof(u), f, "/echo");
    size_t n = HTTP_SERVER_MAX_BODY + 1;
    _cleanup_free_ char *body = pattern(n);
    struct http_response resp = {0};
    struct errmsg e = {""};

    int before = atomic_load(&handler_calls);
    assert_int_equal(http_request("POST", u, NULL, "text/plain", body, n, 5000, &resp, &e), 0);
    assert_int_equal(resp.status, 413);
    assert_non_null(strstr(resp.body, "\"error\""));
    http_response_done(&resp);
    assert_int_equal(atomic_load(&handler_calls), before);

    /* The same without a Content-Length up front (chunked upload). */
    const char *const chunked[] = {"Transfer-Encoding: chunked", NULL};
    struct http_client_opts o = {.method = "POST",
                                 .url = u,
                                 .headers = chunked,
                                 .body = body,
                                 .body_len = n,
                                 .timeout_ms = 5000};
    assert_int_equal(http_request_opts(&o, &resp, &e), 0);
    assert_int_equal(resp.status, 413);
    http_response_done(&resp);
    assert_int_equal(atomic_load(&handler_calls), before);

    /* Exactly at the limit is fine. */
    assert_int_equal(http_request("PUT", u, NULL, "text/plain", body, n - 1, 5000, &resp, &e), 0);
    assert_int_equal(resp.status, 200);
    json_t *j = json_loadb(resp.body, resp.body_len, 0, NULL);
    assert_int_equal(json_string_length(json_object_get(j, "body")), n - 1);
    json_decref(j);
    http_response_done(&resp);

    /* A server that takes more (gpuqd's submit) takes it; and less is refused again. */
    http_server_set_max_body(f->tcp, 4 * n);
    assert_int_equal(http_request("POST", u, NULL, "text/plain", body, n, 5000, &resp, &e), 0);
    assert_int_equal(resp.status, 200);
    http_response_done(&resp);
    http_server_set_max_body(f->tcp, 10);
    assert_int_equal(http_request("POST", u, NULL, "text/plain", body, 11, 5000, &resp, &e), 0);
    assert_int_equal(resp.status, 413);
    http_response_done(&resp);
}

static void test_head(void **state)
{
    struct fixture *f = *state;
    char u[256], buf[32];
    url(u, sizeof(u), f, "/big-plain?n=4321");
    struct http_response resp = {0};
    struct errmsg e = {""};
    assert_int_equal(http_request("HEAD", u, NULL, NULL, NULL, 0, 5000, &resp, &e), 0);
    assert_int_equal(resp.status, 200);
    assert_int_equal(resp.body_len, 0);
    assert_string_equal(resp.body, "");
    assert_true(http_response_header(&resp, "Content-Length", buf, sizeof(buf)) > 0);
    assert_string_equal(buf, "4321");
    assert_int_equal(http_response_header(&resp, "X-Saw-Head", buf, sizeof(buf)), 1);
    http_response_done(&resp);

    url(u, sizeof(u), f, "/echo");
    assert_int_equal(http_request("HEAD", u, NULL, NULL, NULL, 0, 5000, &resp, &e), 0);
    assert_int_equal(resp.status, 200);
    http_response_done(&resp);
}

static void *slow_request(void *arg)
{
    const struct fixture *f = arg;
    json_t *reply = NULL;
    long status = 0;
    struct errmsg e = {""};
    int r = http_request_json("POST", "http://localhost/slow", f->sock, NULL, 10000, &status,
                              &reply, &e);
    bool released = r == 0 && status == 200 && json_is_true(json_object_get(reply, "released"));
    json_decref(reply);
    return released ? (void *)1 : NULL;
}

static void test_slow_handler_does_not_block(void **state)
{
    struct fixture *f = *state;
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_request, f), 0);
    pthread_mutex_lock(&slow_lock);
    while (!slow_entered)
        pthread_cond_wait(&slow_cond, &slow_lock);
    pthread_mutex_unlock(&slow_lock);

    /* The slow handler is now blocked; a scrape on the other server and a second control
     * request on the same one must both get through. */
    char u[256];
    url(u, sizeof(u), f, "/echo");
    struct http_response resp = {0};
    struct errmsg e = {""};
    assert_int_equal(http_request("GET", u, NULL, NULL, NULL, 0, 2000, &resp, &e), 0);
    assert_int_equal(resp.status, 200);
    http_response_done(&resp);
    assert_int_equal(
        http_request("GET", "http://localhost/echo", f->sock, NULL, NULL, 0, 2000, &resp, &e), 0);
    assert_int_equal(resp.status, 200);
    http_response_done(&resp);

    pthread_mutex_lock(&slow_lock);
    fast_done = true;
    pthread_cond_broadcast(&slow_cond);
    pthread_mutex_unlock(&slow_lock);
    void *released = NULL;
    assert_int_equal(pthread_join(t, &released), 0);
    assert_non_null(released);
}

static void test_replies(void **state)
{
    struct fixture *f = *state;
    char u[256], buf[32];
    struct http_response resp = {0};
    struct errmsg e = {""};

    url(u, sizeof(u), f, "/none");
    assert_int_equal(http_request("GET", u, NULL, NULL, NULL, 0, 5000, &resp, &e), 0);
    assert_int_equal(resp.status, 500);
    http_response_done(&resp);

    url(u, sizeof(u), f, "/header");
    assert_int_equal(http_request("GET", u, NULL, NULL, NULL, 0, 5000, &resp, &e), 0);
    assert_int_equal(resp.status, 201);
    assert_string_equal(resp.body, "{\"error\":\"made 1\"}");
    assert_int_equal(http_response_header(&resp, "x-thing", buf, sizeof(buf)), 2);
    assert_string_equal(buf, "42");
    assert_int_equal(http_response_header(&resp, "Injected", buf, sizeof(buf)), -ENOENT);
    assert_int_equal(http_response_header(&resp, "Content-Type", buf, 4), -ENOBUFS);
    http_response_done(&resp);

    json_t *j = (json_t *)1;
    long status = 0;
    url(u, sizeof(u), f, "/notjson");
    assert_int_equal(http_request_json("GET", u, NULL, NULL, 5000, &status, &j, &e), 0);
    assert_int_equal(status, 200);
    assert_null(j);
    url(u, sizeof(u), f, "/nothere");
    assert_int_equal(http_request_json("GET", u, NULL, NULL, 5000, &status, &j, &e), 0);
    assert_int_equal(status, 404);
    assert_string_equal(json_string_value(json_object_get(j, "error")), "no such path '/nothere'");
    json_decref(j);
}

static void test_client_errors(void **state)
{
    struct fixture *f = *state;
    char u[256];
    struct http_response resp = {.status = 77};
    struct errmsg e = {""};

    /* A port nobody listens on: bind one, close it, connect. */
    struct http_server *gone = NULL;
    assert_int_equal(http_server_new_tcp("127.0.0.1:0", handler, NULL, &gone, &e), 0);
    snprintf(u, sizeof(u), "http://127.0.0.1:%u/", http_server_port(gone));
    http_server_free(gone);
    assert_int_equal(http_request("GET", u, NULL, NULL, NULL, 0, 5000, &resp, &e), -ECONNREFUSED);
    assert_non_null(strstr(e.text, u));
    assert_int_equal(resp.status, 77); /* untouched */

    char missing[160];
    snprintf(missing, sizeof(missing), "%s/missing.sock", f->dir);
    assert_int_equal(
        http_request("GET", "http://localhost/", missing, NULL, NULL, 0, 5000, &resp, &e), -ENOENT);
    assert_non_null(strstr(e.text, "missing.sock"));

    url(u, sizeof(u), f, "/sleep");
    assert_int_equal(http_request("GET", u, NULL, NULL, NULL, 0, 200, &resp, &e), -ETIMEDOUT);

    url(u, sizeof(u), f, "/big-plain?n=5000");
    struct http_client_opts o = {.url = u, .max_body = 1000, .timeout_ms = 5000};
    assert_int_equal(http_request_opts(&o, &resp, &e), -EFBIG);
    snprintf(u, sizeof(u), "%s/big-plain?n=%u", f->base, HTTP_CLIENT_MAX_BODY + 1);
    assert_int_equal(http_request("GET", u, NULL, NULL, NULL, 0, 20000, &resp, &e), -EFBIG);
    snprintf(u, sizeof(u), "%s/big-plain?n=%u", f->base, HTTP_CLIENT_MAX_BODY);
    assert_int_equal(http_request("GET", u, NULL, NULL, NULL, 0, 20000, &resp, &e), 0);
    assert_int_equal(resp.body_len, HTTP_CLIENT_MAX_BODY);
    http_response_done(&resp);

    assert_int_equal(http_request("GET", "ftp://example/", NULL, NULL, NULL, 0, 1000, &resp, &e),
                     -EINVAL);
}

struct sink_state {
    size_t total;
    size_t stop_after;
};

static int count_sink(const void *data, size_t len, void *userdata)
{
    struct sink_state *s = userdata;
    s->total += len;
    return s->stop_after && s->total >= s->stop_after ? -ECANCELED : 0;
}

static void test_client_sink(void **state)
{
    struct fixture *f = *state;
    char u[256];
    snprintf(u, sizeof(u), "%s/big-plain?n=%u", f->base, 3 * HTTP_CLIENT_MAX_BODY / 2);
    struct sink_state s = {0};
    struct http_client_opts o = {
        .url = u, .timeout_ms = 20000, .sink = count_sink, .sink_userdata = &s};
    struct http_response resp = {0};
    struct errmsg e = {""};
    /* Streaming is not bound by the buffering limit. */
    assert_int_equal(http_request_opts(&o, &resp, &e), 0);
    assert_int_equal(s.total, 3 * HTTP_CLIENT_MAX_BODY / 2);
    assert_int_equal(resp.body_len, 0);
    http_response_done(&resp);

    s = (struct sink_state){.stop_after = 1};
    assert_int_equal(http_request_opts(&o, &resp, &e), -ECANCELED);
}

struct hammer {
    const struct fixture *f;
    int ok;
};

static void *hammer_thread(void *arg)
{
    struct hammer *h = arg;
    for (int i = 0; i < 20; i++) {
        char u[256];
        snprintf(u, sizeof(u), "%s/echo?q=%d", h->f->base, i);
        json_t *j = NULL;
        long status = 0;
        if (http_request_json("GET", u, NULL, NULL, 5000, &status, &j, NULL) == 0 &&
            status == 200 && j && atoi(json_string_value(json_object_get(j, "q"))) == i)
            h->ok++;
        json_decref(j);
    }
    return NULL;
}

static void test_concurrent_clients(void **state)
{
    struct hammer h[8];
    pthread_t t[8];
    for (size_t i = 0; i < ELEMENTSOF(t); i++) {
        h[i] = (struct hammer){.f = *state};
        assert_int_equal(pthread_create(&t[i], NULL, hammer_thread, &h[i]), 0);
    }
    for (size_t i = 0; i < ELEMENTSOF(t); i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(h[i].ok, 20);
    }
}

static void test_tcp_all_addresses(void **state)
{
    struct errmsg e = {""};
    _cleanup_(http_server_freep) struct http_server *s = NULL;
    assert_int_equal(http_server_new_tcp(":0", handler, NULL, &s, &e), 0);
    char u[128];
    snprintf(u, sizeof(u), "http://127.0.0.1:%u/echo", http_server_port(s));
    struct http_response resp = {0};
    assert_int_equal(http_request("GET", u, NULL, NULL, NULL, 0, 5000, &resp, &e), 0);
    assert_int_equal(resp.status, 200);
    http_response_done(&resp);

    /* The port is taken now. */
    char taken[32];
    snprintf(taken, sizeof(taken), "127.0.0.1:%u", http_server_port(s));
    struct http_server *s2 = NULL;
    assert_int_equal(http_server_new_tcp(taken, handler, NULL, &s2, &e), -EADDRINUSE);
    assert_non_null(strstr(e.text, taken));
}

static void test_unix_socket_file_handling(void **state)
{
    struct fixture *f = *state;
    struct errmsg e = {""};
    struct http_server *s = NULL;

    /* A live server keeps its socket. */
    assert_int_equal(http_server_new_unix(f->sock, 0600, handler, NULL, &s, &e), -EADDRINUSE);

    /* A stale socket file (nobody listening) is replaced. */
    char stale[160];
    snprintf(stale, sizeof(stale), "%s/stale.sock", f->dir);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    strcpy(sun.sun_path, stale);
    assert_int_equal(bind(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
    close(fd);
    assert_int_equal(http_server_new_unix(stale, 0600, handler, NULL, &s, &e), 0);
    struct stat st;
    assert_int_equal(stat(stale, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    struct http_response resp = {0};
    assert_int_equal(
        http_request("GET", "http://localhost/echo", stale, NULL, NULL, 0, 5000, &resp, &e), 0);
    assert_int_equal(resp.status, 200);
    http_response_done(&resp);
    http_server_free(s);
    assert_int_equal(stat(stale, &st), -1); /* unlinked on free */
    assert_int_equal(errno, ENOENT);

    /* Something that is not a socket is never removed. */
    char regular[160];
    snprintf(regular, sizeof(regular), "%s/regular", f->dir);
    fd = open(regular, O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(http_server_new_unix(regular, 0600, handler, NULL, &s, &e), -EEXIST);
    assert_int_equal(stat(regular, &st), 0);
    unlink(regular);

    assert_int_equal(http_server_new_tcp("nonsense", handler, NULL, &s, &e), -EINVAL);
}

/* A hook script or the shutdown command started while a request is in flight must not inherit
 * the connection (to the Docker Engine, as root): curl's sockets are close-on-exec. */
static void test_client_sockets_close_on_exec(void **state)
{
    struct fixture *f = *state;
    char u[256];
    url(u, sizeof(u), f, "/client-fds");
    const char *via[] = {NULL, f->sock}; /* TCP, then the Unix socket */
    for (size_t i = 0; i < ELEMENTSOF(via); i++) {
        json_t *j = NULL;
        long status = 0;
        struct errmsg e = {""};
        assert_int_equal(http_request_json("GET", via[i] ? "http://localhost/client-fds" : u,
                                           via[i], NULL, 5000, &status, &j, &e),
                         0);
        assert_int_equal(status, 200);
        assert_int_equal(json_integer_value(json_object_get(j, "found")), 1);
        assert_int_equal(json_integer_value(json_object_get(j, "inheritable")), 0);
        json_decref(j);
    }
}

/* One local user attacking the control socket: a process of its own uid that opens connections
 * and sends only the start of a request on each, as a slowloris does. */
struct slow_user {
    pid_t pid;
    int cmd;    /* to the process: 'o' open more, 'n' count, 'f' full request, 'c' close all, 'q' */
    int result; /* from it: one byte per command */
};

#define SLOW_BATCH (HTTP_SERVER_MAX_PER_UID + 2)

static int slow_connect(const char *path)
{
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof(sun.sun_path))
        return -1;
    memcpy(sun.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    if (connect(fd, (struct sockaddr *)&sun, sizeof(sun)) < 0) {
        close(fd);
        return -1;
    }
    /* This fails when the server has refused the connection already; keep_open() sees that. */
    static const char start[] = "GET /echo HTTP/1.1\r\nHost: localhost\r\n";
    (void)send(fd, start, sizeof(start) - 1, MSG_NOSIGNAL);
    return fd;
}

/* Keeps the fds the server has not closed (nothing arrives on those: the request is unfinished)
 * and returns how many. */
static unsigned keep_open(int *fds, unsigned n)
{
    unsigned k = 0;
    for (unsigned i = 0; i < n; i++) {
        char b;
        if (recv(fds[i], &b, 1, MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            fds[k++] = fds[i];
        else
            close(fds[i]);
    }
    return k;
}

/* Sends a whole request on a new connection; 1 if any answer came, 0 if closed without one. */
static unsigned char full_request(const char *path)
{
    int fd = slow_connect(path);
    if (fd < 0)
        return 0;
    char buf[64];
    struct pollfd p = {.fd = fd, .events = POLLIN};
    bool answered = send(fd, "\r\n", 2, MSG_NOSIGNAL) == 2 && poll(&p, 1, 5000) == 1 &&
                    recv(fd, buf, sizeof(buf), 0) > 0;
    close(fd);
    return answered;
}

static void slow_user_main(uid_t uid, const char *path, pid_t parent, int cmd, int result)
{
    int fds[4 * SLOW_BATCH];
    unsigned n = 0;
    unsigned char ok =
        setgroups(0, NULL) == 0 && setresgid(uid, uid, uid) == 0 && setresuid(uid, uid, uid) == 0;
    /* Die with the test, also when it fails half-way (set after setresuid(), which clears it). */
    if (write(result, &ok, 1) != 1 || !ok || prctl(PR_SET_PDEATHSIG, SIGKILL) < 0 ||
        getppid() != parent)
        _exit(1);
    char c;
    while (read(cmd, &c, 1) == 1 && c != 'q') {
        unsigned char reply = 0;
        if (c == 'o')
            for (unsigned i = 0; i < SLOW_BATCH && n < ELEMENTSOF(fds); i++) {
                int fd = slow_connect(path);
                if (fd >= 0) {
                    fds[n++] = fd;
                    reply++;
                }
            }
        else if (c == 'n')
            reply = (unsigned char)(n = keep_open(fds, n));
        else if (c == 'f')
            reply = full_request(path);
        else
            for (; n > 0; n--)
                close(fds[n - 1]);
        if (write(result, &reply, 1) != 1)
            break;
    }
    _exit(0);
}

/* Starts a process with uid (and gid) uid. False if it could not take that uid, e.g. in a user
 * namespace that maps only root. */
static bool slow_user_start(struct slow_user *u, uid_t uid, const char *path)
{
    int to[2], from[2];
    assert_int_equal(pipe2(to, O_CLOEXEC), 0);
    assert_int_equal(pipe2(from, O_CLOEXEC), 0);
    pid_t parent = getpid(), pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(to[1]);
        close(from[0]);
        slow_user_main(uid, path, parent, to[0], from[1]);
    }
    close(to[0]);
    close(from[1]);
    *u = (struct slow_user){.pid = pid, .cmd = to[1], .result = from[0]};
    unsigned char ok = 0;
    return read(u->result, &ok, 1) == 1 && ok;
}

static int slow_user_do(struct slow_user *u, char c)
{
    unsigned char r;
    if (write(u->cmd, &c, 1) != 1 || read(u->result, &r, 1) != 1)
        return -1;
    return r;
}

static void slow_user_stop(struct slow_user *u)
{
    /* Explicitly: the processes forked later hold copies of this pipe, so no EOF would come. */
    (void)!write(u->cmd, "q", 1);
    close(u->cmd);
    close(u->result);
    int status;
    waitpid(u->pid, &status, 0);
}

/* A request as root. It also orders things: MHD accepts connections in the order they arrived,
 * so once it is answered, every connection opened before it has been counted (or refused). */
static bool root_request_ok(const char *path)
{
    struct http_response resp = {0};
    int r = http_request("GET", "http://localhost/echo", path, NULL, NULL, 0, 5000, &resp, NULL);
    bool ok = r == 0 && resp.status == 200;
    http_response_done(&resp);
    return ok;
}

static void test_unix_slow_users_cannot_lock_out_root(void **state)
{
    if (geteuid() != 0)
        test_skip("needs root to connect as other uids");
    enum { USERS = HTTP_SERVER_MAX_UNPRIVILEGED / HTTP_SERVER_MAX_PER_UID + 1 };
    char dir[64] = "/tmp/test-http-uid-XXXXXX", path[128];
    assert_non_null(mkdtemp(dir));
    assert_int_equal(chmod(dir, 0755), 0); /* the other uids must reach the socket */
    snprintf(path, sizeof(path), "%s/api.sock", dir);
    struct errmsg e = {""};
    _cleanup_(http_server_freep) struct http_server *s = NULL;
    assert_int_equal(http_server_new_unix(path, 0666, handler, NULL, &s, &e), 0);

    struct slow_user u[USERS];
    size_t started = 0;
    bool have_uids = true;
    for (; started < USERS && have_uids; started++)
        have_uids = slow_user_start(&u[started], (uid_t)(64000 + started), path);
    if (!have_uids) {
        for (size_t i = 0; i < started; i++)
            slow_user_stop(&u[i]);
        http_server_free(TAKE_PTR(s));
        rmdir(dir);
        test_skip("cannot switch to the uids 64000 and up here");
    }

    /* Each uid opens more than its share, one uid after the other: every uid keeps exactly its
     * share until all of them together hold theirs; the last uid gets nothing. */
    for (size_t i = 0; i < USERS; i++) {
        assert_int_equal(slow_user_do(&u[i], 'o'), SLOW_BATCH);
        assert_true(root_request_ok(path));
        unsigned left = HTTP_SERVER_MAX_UNPRIVILEGED - (unsigned)i * HTTP_SERVER_MAX_PER_UID;
        int want = (int)(left < HTTP_SERVER_MAX_PER_UID ? left : HTTP_SERVER_MAX_PER_UID);
        assert_int_equal(slow_user_do(&u[i], 'n'), want);
    }
    /* A whole request on a connection over the share is closed unanswered. */
    assert_int_equal(slow_user_do(&u[0], 'f'), 0);

    /* Root is not limited by the per-uid share, and its requests still get through. The
     * connections refused above hold their places in MHD's table until their threads have
     * ended, which on a loaded machine takes a moment: root tries again meanwhile. */
    int mine[HTTP_SERVER_MAX_PER_UID + 2];
    bool through = false;
    for (int tries = 0; tries < 40 && !through; tries++) {
        if (tries)
            usleep(50000);
        for (size_t i = 0; i < ELEMENTSOF(mine); i++)
            assert_true((mine[i] = slow_connect(path)) >= 0);
        through = root_request_ok(path) && keep_open(mine, ELEMENTSOF(mine)) == ELEMENTSOF(mine);
        for (size_t i = 0; i < ELEMENTSOF(mine); i++)
            close(mine[i]);
    }
    assert_true(through);

    /* Closed connections give their slots back (the server notices the closes a moment later):
     * once the first uid lets go, it is served again, and the last uid gets its full share. */
    assert_int_equal(slow_user_do(&u[0], 'c'), 0);
    int got = 0;
    for (int tries = 0; tries < 50 && got != 1; tries++) {
        usleep(50000);
        got = slow_user_do(&u[0], 'f');
    }
    assert_int_equal(got, 1);
    for (int tries = 0; tries < 50 && got != (int)HTTP_SERVER_MAX_PER_UID; tries++) {
        usleep(50000);
        assert_int_equal(slow_user_do(&u[USERS - 1], 'c'), 0);
        assert_int_equal(slow_user_do(&u[USERS - 1], 'o'), SLOW_BATCH);
        assert_true(root_request_ok(path));
        got = slow_user_do(&u[USERS - 1], 'n');
    }
    assert_int_equal(got, HTTP_SERVER_MAX_PER_UID);

    for (size_t i = 0; i < USERS; i++)
        slow_user_stop(&u[i]);
    http_server_free(TAKE_PTR(s));
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tcp_json_roundtrip),
        cmocka_unit_test(test_unix_peer_credentials),
        cmocka_unit_test(test_gzip_negotiation),
        cmocka_unit_test(test_body_limit),
        cmocka_unit_test(test_head),
        cmocka_unit_test(test_slow_handler_does_not_block),
        cmocka_unit_test(test_replies),
        cmocka_unit_test(test_client_errors),
        cmocka_unit_test(test_client_sink),
        cmocka_unit_test(test_concurrent_clients),
        cmocka_unit_test(test_tcp_all_addresses),
        cmocka_unit_test(test_unix_socket_file_handling),
        cmocka_unit_test(test_client_sockets_close_on_exec),
        cmocka_unit_test(test_unix_slow_users_cannot_lock_out_root),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
