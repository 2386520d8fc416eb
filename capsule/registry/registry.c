/* OCI distribution client: transport choice, auth, retries, manifests and blobs; see
 * registry.h. The credentials and token side lives in registry-auth.c. */
#include "capsule/registry/registry.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capsule/image/capsule-limits.h"
#include "lib/http-client.h"
#include "lib/macro.h"
#include "capsule/image/manifest.h"
#include "capsule/registry/registry-internal.h"

/* Small exchanges (ping, manifests, configs, tokens) must finish within this. */
#define REG_SMALL_TIMEOUT_MS (300L * 1000L)
/* Bytes of a blob response held back until it is clear they are blob bytes (see blob_sink). */
#define BLOB_STAGE (64u * 1024u)

static int strdup_or_null(const char *s, char **ret)
{
    *ret = NULL;
    if (s && !(*ret = strdup(s)))
        return -ENOMEM;
    return 0;
}

int registry_open(const struct image_ref *ref, const struct registry_opts *o, struct registry **ret,
                  struct errmsg *e)
{
    static const struct registry_opts defaults = {0};
    if (!o)
        o = &defaults;
    if (!ref || !ref->registry || !ref->repository)
        return errmsg_set(e, -EINVAL, "registry_open: incomplete image reference");
    _cleanup_(registry_freep) struct registry *r = calloc(1, sizeof(*r));
    if (!r)
        return errmsg_set(e, -ENOMEM, "out of memory");
    pthread_mutex_init(&r->lock, NULL);
    r->lock_init = true;
    const char *host = image_ref_api_host(ref);
    _cleanup_free_ char *mirror_host = NULL;
    if (o->mirror) {
        const char *h = strstr(o->mirror, "://");
        if (!h || !(mirror_host = strndup(h + 3, strcspn(h + 3, "/"))) ||
            asprintf(&r->base_url, "%.*s://%s", (int)(h - o->mirror), o->mirror, mirror_host) < 0)
            return errmsg_set(e, h ? -ENOMEM : -EINVAL, "registry mirror '%s'", o->mirror);
        host = mirror_host;
    }
    int q = 0;
    /* Credentials go to whom the requests go to: the mirror's host when there is one. */
    q |= strdup_or_null(o->mirror ? mirror_host : ref->registry, &r->registry);
    q |= strdup_or_null(host, &r->api_host);
    q |= strdup_or_null(ref->repository, &r->repository);
    q |= strdup_or_null(ref->user, &r->user);
    q |= strdup_or_null(o->netrc_path, &r->netrc_path);
    q |= strdup_or_null(o->docker_config_path, &r->docker_config_path);
    q |= strdup_or_null(o->ca_file, &r->ca_file);
    r->cancel = o->cancel;
    q |= strdup_or_null(o->config_name ? o->config_name : "capsule.conf", &r->config_name);
    q |= strdup_or_null(o->authorization, &r->fixed_header);
    if (q < 0 || asprintf(&r->name, "%s/%s", ref->registry, ref->repository) < 0) {
        r->name = NULL;
        return errmsg_set(e, -ENOMEM, "out of memory");
    }
    r->insecure = strv_copy(o->insecure);
    if (!r->insecure)
        return errmsg_set(e, -ENOMEM, "out of memory");
    r->retries = o->retries ? o->retries : 4;
    r->connect_timeout_ms = o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 15000;
    r->stall_timeout_s = o->stall_timeout_s > 0 ? o->stall_timeout_s : 60;
    r->http_allowed = (image_ref_is_loopback(ref->registry) && !o->loopback_needs_listing) ||
                      registry_host_listed(r, host) || registry_host_listed(r, ref->registry);
    *ret = TAKE_PTR(r);
    return 0;
}

void registry_free(struct registry *r)
{
    if (!r)
        return;
    registry_auth_done(r);
    free(r->registry);
    free(r->api_host);
    free(r->repository);
    free(r->user);
    free(r->name);
    free(r->netrc_path);
    free(r->docker_config_path);
    free(r->ca_file);
    free(r->config_name);
    free(r->base_url);
    strv_free(r->insecure);
    if (r->lock_init)
        pthread_mutex_destroy(&r->lock);
    free(r);
}

void registry_cancel(struct registry *r)
{
    atomic_store(&r->cancelled, true);
}

bool registry_host_listed(const struct registry *r, const char *hostport)
{
    return hostport && strv_contains(r->insecure, hostport);
}

void registry_manifest_done(struct registry_manifest *m)
{
    if (!m)
        return;
    free(m->data);
    free(m->content_type);
    *m = (struct registry_manifest){0};
}

/* ---- retries ---- */

bool registry_transient_errno(int r)
{
    /* A name that does not resolve may be a resolver's hiccup in the middle of a pull (a
     * blob's CDN host); at the first contact it is final (-ENXIO from registry_ensure_base). */
    return r == -ECONNREFUSED || r == -ETIMEDOUT || r == -EIO || r == -ECONNRESET || r == -EAGAIN ||
           r == -EADDRNOTAVAIL;
}

bool registry_transient_status(long status)
{
    return status == 408 || status == 429 || (status >= 500 && status <= 599);
}

/* Waits before attempt number `attempt` (1 for the first retry): Retry-After when the server
 * gave one in seconds (at most a minute), else 0.5 s doubling to 8 s. Returns -ECANCELED if the
 * client is cancelled meanwhile. */
int registry_backoff(struct registry *r, unsigned attempt, const struct http_response *resp)
{
    long ms = 500L << (attempt > 5 ? 4 : attempt - 1);
    if (ms > 8000)
        ms = 8000;
    char v[32];
    if (resp && http_response_header(resp, "Retry-After", v, sizeof(v)) > 0) {
        char *end;
        long s = strtol(v, &end, 10);
        if (*end == '\0' && s >= 0)
            ms = (s > 60 ? 60 : s) * 1000L;
    }
    for (long slept = 0; slept < ms; slept += 50) {
        if (registry_cancelled(r))
            return -ECANCELED;
        usleep(50 * 1000);
    }
    return registry_cancelled(r) ? -ECANCELED : 0;
}

/* ---- transport: HTTPS, or plain HTTP where allowed ---- */

static int ping(struct registry *r, const char *scheme, struct errmsg *e)
{
    _cleanup_free_ char *url = NULL;
    if (asprintf(&url, "%s://%s/v2/", scheme, r->api_host) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    struct http_client_opts o = {
        .url = url,
        .timeout_ms = REG_SMALL_TIMEOUT_MS,
        .connect_timeout_ms = r->connect_timeout_ms,
        .ca_file = r->ca_file,
        .max_body = 1024 * 1024,
        .raw = true,
    };
    struct http_response resp = {0};
    int q = http_request_opts(&o, &resp, e);
    http_response_done(&resp);
    /* Any HTTP answer, even a large one, shows the server speaks this scheme. */
    return q == -EFBIG ? 0 : q;
}

/* A registry whose host name does not resolve: neither TLS nor plain HTTP is to blame. -ENXIO,
 * which no retry loop takes for transient: a misspelt name is said at once, as Docker does. */
static int unresolved(const struct registry *r, struct errmsg *e)
{
    const char *colon = strrchr(r->api_host, ':');
    size_t n = colon ? (size_t)(colon - r->api_host) : strlen(r->api_host);
    return errmsg_set(e, -ENXIO,
                      "cannot reach registry %s: the host name '%.*s' does not resolve (is it "
                      "spelled right, and does this machine's DNS answer?)",
                      r->api_host, (int)n, r->api_host);
}

static int ping_attempt(struct registry *r, struct errmsg *e)
{
    struct errmsg tls_err = {{0}};
    int q = ping(r, "https", &tls_err);
    if (q == 0) {
        r->base_url = NULL;
        return asprintf(&r->base_url, "https://%s", r->api_host) < 0 ? -ENOMEM : 0;
    }
    if (q == -ECANCELED || q == -ENOMEM)
        return errmsg_set(e, q, "%s", tls_err.text);
    if (q == -EADDRNOTAVAIL)
        return unresolved(r, e);
    if (!r->http_allowed) {
        if (q == -EIO)
            return errmsg_set(e, -EPROTO,
                              "%s: TLS connection failed (%s); if this registry serves plain "
                              "HTTP and the network is trusted, add '%s' to "
                              "insecure_registries in %s",
                              r->api_host, tls_err.text, r->api_host, r->config_name);
        return errmsg_set(e, q, "cannot reach registry %s: %s", r->api_host, tls_err.text);
    }
    /* Docker's rule for insecure and loopback registries: HTTPS first, then plain HTTP. */
    struct errmsg http_err = {{0}};
    q = ping(r, "http", &http_err);
    if (q == 0) {
        r->base_url = NULL;
        return asprintf(&r->base_url, "http://%s", r->api_host) < 0 ? -ENOMEM : 0;
    }
    return errmsg_set(e, q, "cannot reach registry %s: %s", r->api_host, http_err.text);
}

/* Settles the scheme on the first request; later calls return at once. */
int registry_ensure_base(struct registry *r, struct errmsg *e)
{
    pthread_mutex_lock(&r->lock);
    int q = 0;
    for (unsigned attempt = 0; !r->base_url; attempt++) {
        q = ping_attempt(r, e);
        if (q >= 0)
            break;
        r->base_url = NULL;
        if (!registry_transient_errno(q) || q == -EPROTO || attempt >= r->retries)
            break;
        int b = registry_backoff(r, attempt + 1, NULL);
        if (b < 0) {
            q = errmsg_set(e, b, "cancelled");
            break;
        }
    }
    pthread_mutex_unlock(&r->lock);
    return q < 0 ? q : 0;
}

/* ---- one exchange ---- */

int registry_attempt(struct registry *r, const struct reg_request *q, struct http_response *resp,
                     unsigned *ret_auth_gen, struct errmsg *e)
{
    if (registry_cancelled(r))
        return errmsg_set(e, -ECANCELED, "cancelled");
    int k = registry_ensure_base(r, e);
    if (k < 0)
        return k;
    _cleanup_free_ char *url = NULL, *accept = NULL, *auth = NULL;
    if (asprintf(&url, "%s%s", r->base_url, q->path) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    if (q->accept && asprintf(&accept, "Accept: %s", q->accept) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    k = registry_auth_header(r, &auth, ret_auth_gen);
    if (k < 0)
        return errmsg_set(e, k, "out of memory");
    const char *headers[5];
    size_t n = 0;
    headers[n++] = "User-Agent: capsule/" GPUNODE_VERSION;
    if (accept)
        headers[n++] = accept;
    if (q->range)
        headers[n++] = q->range;
    /* curl drops this header when a redirect leaves for another host, port or scheme (blob
     * storage), so the registry's credentials never reach a third party. */
    if (auth)
        headers[n++] = auth;
    headers[n] = NULL;
    struct http_client_opts o = {
        .method = q->method,
        .url = url,
        .headers = headers,
        .timeout_ms = q->timeout_ms,
        .connect_timeout_ms = r->connect_timeout_ms,
        .low_speed_time_s = r->stall_timeout_s,
        .ca_file = r->ca_file,
        .follow_redirects = q->follow_redirects,
        .max_body = q->max_body,
        .raw = true,
        .sink = q->sink,
        .sink_userdata = q->sink_userdata,
    };
    http_response_done(resp);
    k = http_request_opts(&o, resp, e);
    if (k >= 0 && r->fixed_header && resp->status >= 200 && resp->status < 300)
        atomic_store(&r->fixed_accepted, true);
    return k;
}

/* ---- errors from HTTP statuses ---- */

/* The first entry of the registry's {"errors":[{"code":..,"message":..}]} body, if any. */
static void registry_error_text(const struct http_response *resp, char *code, size_t code_size,
                                char *msg, size_t msg_size)
{
    code[0] = msg[0] = '\0';
    json_t *root = resp->body_len ? json_loadb(resp->body, resp->body_len, 0, NULL) : NULL;
    json_t *first = json_array_get(json_object_get(root, "errors"), 0);
    const char *c = json_string_value(json_object_get(first, "code"));
    const char *m = json_string_value(json_object_get(first, "message"));
    if (c)
        snprintf(code, code_size, "%s", c);
    if (m)
        snprintf(msg, msg_size, "%s", m);
    json_decref(root);
    /* Bound what a server can make us print, and keep control characters off the terminal. */
    for (char *p = code; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f)
            *p = '?';
}

int registry_status_error(struct registry *r, const char *what, const struct http_response *resp,
                          struct errmsg *e)
{
    char code[64], msg[160];
    registry_error_text(resp, code, sizeof(code), msg, sizeof(msg));
    long st = resp->status;
    if (st == 401 || st == 403)
        return registry_access_denied(r, what, st, e);
    if (st == 404) {
        const char *why = msg[0] ? msg : "not found";
        if (strcmp(code, "NAME_UNKNOWN") == 0)
            why = "repository name not known to registry";
        else if (strcmp(code, "MANIFEST_UNKNOWN") == 0)
            why = "manifest unknown";
        else if (strcmp(code, "BLOB_UNKNOWN") == 0)
            why = "blob unknown";
        return errmsg_set(e, -ENOENT, "%s: %s", what, why);
    }
    if (code[0] || msg[0])
        return errmsg_set(e, -EIO, "%s: HTTP %ld from the registry: %s%s%s", what, st, code,
                          code[0] && msg[0] ? ": " : "", msg);
    return errmsg_set(e, -EIO, "%s: HTTP %ld from the registry", what, st);
}

/* ---- buffered requests ---- */

/* The loop behind registry_fetch(); may leave a response in *resp when it fails. */
static int registry_fetch_loop(struct registry *r, const struct reg_request *q,
                               struct http_response *resp, struct errmsg *e)
{
    bool authorized = false;
    unsigned failures = 0;
    for (;;) {
        unsigned gen;
        int k = registry_attempt(r, q, resp, &gen, e);
        bool transient =
            k < 0 ? registry_transient_errno(k) : registry_transient_status(resp->status);
        if (k < 0 && !transient)
            return k;
        if (!transient && resp->status == 401) {
            if (authorized)
                return registry_access_denied(r, q->what, 401, e);
            k = registry_authorize(r, q->what, resp, gen, e);
            if (k < 0)
                return k;
            authorized = true;
            continue;
        }
        if (!transient)
            return 0;
        if (failures++ >= r->retries) {
            if (k < 0)
                return errmsg_prefix(e, k, "%s: giving up after %u attempts", q->what, failures);
            return registry_status_error(r, q->what, resp, e);
        }
        k = registry_backoff(r, failures, k < 0 ? NULL : resp);
        if (k < 0)
            return errmsg_set(e, k, "%s: cancelled", q->what);
    }
}

/* Performs q with auth and retries until a final status; returns 0 with *resp for any status
 * the caller must judge (2xx, 4xx other than 401/408/429) or a negative errno (*resp empty). */
static int registry_fetch(struct registry *r, const struct reg_request *q,
                          struct http_response *resp, struct errmsg *e)
{
    int k = registry_fetch_loop(r, q, resp, e);
    if (k < 0)
        http_response_done(resp);
    return k;
}

static void content_type_base(const struct http_response *resp, char **ret)
{
    char ct[256];
    *ret = NULL;
    if (http_response_header(resp, "Content-Type", ct, sizeof(ct)) < 0)
        ct[0] = '\0';
    ct[strcspn(ct, "; \t")] = '\0';
    *ret = strdup(ct);
}

int registry_get_manifest(struct registry *r, const char *reference, struct registry_manifest *ret,
                          struct errmsg *e)
{
    bool by_digest = strchr(reference, ':') != NULL;
    if (by_digest && !digest_valid(reference))
        return errmsg_set(e, -EINVAL, "'%s' is not a valid digest", reference);
    _cleanup_free_ char *what = NULL, *path = NULL;
    if (asprintf(&what, "%s%s%s", r->name, by_digest ? "@" : ":", reference) < 0 ||
        asprintf(&path, "/v2/%s/manifests/%s", r->repository, reference) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    struct reg_request q = {
        .what = what,
        .path = path,
        .accept = MANIFEST_ACCEPT,
        .timeout_ms = REG_SMALL_TIMEOUT_MS,
        .max_body = CAPSULE_MANIFEST_MAX,
        /* Registries behind a CDN answer manifests with 307 as well as blobs. */
        .follow_redirects = true,
    };
    struct http_response resp = {0};
    int k = registry_fetch(r, &q, &resp, e);
    if (k == -EFBIG)
        k = errmsg_set(e, -EFBIG, "%s: manifest larger than %u bytes", what, CAPSULE_MANIFEST_MAX);
    if (k < 0)
        return k;
    if (resp.status != 200) {
        k = registry_status_error(r, what, &resp, e);
        http_response_done(&resp);
        return k;
    }
    if (by_digest) {
        k = digest_check(reference, resp.body, resp.body_len, e);
        if (k < 0) {
            http_response_done(&resp);
            return errmsg_prefix(e, k, "%s", what);
        }
    }
    struct registry_manifest m = {.data = resp.body, .len = resp.body_len};
    content_type_base(&resp, &m.content_type);
    resp.body = NULL;
    http_response_done(&resp);
    if (!m.content_type) {
        registry_manifest_done(&m);
        return errmsg_set(e, -ENOMEM, "out of memory");
    }
    digest_sha256(m.data, m.len, m.digest);
    *ret = m;
    return 0;
}

/* A blob's name for messages ("registry/repo@digest") and its API path, malloc'd. */
static int blob_names(const struct registry *r, const char *digest, char **ret_what,
                      char **ret_path, struct errmsg *e)
{
    if (!digest_valid(digest))
        return errmsg_set(e, -EINVAL, "'%s' is not a valid digest", digest);
    if (asprintf(ret_what, "%s@%s", r->name, digest) < 0) {
        *ret_what = NULL;
        return errmsg_set(e, -ENOMEM, "out of memory");
    }
    if (asprintf(ret_path, "/v2/%s/blobs/%s", r->repository, digest) < 0) {
        *ret_path = NULL;
        return errmsg_set(e, -ENOMEM, "out of memory");
    }
    return 0;
}

int registry_get_blob_mem(struct registry *r, const char *digest, size_t max, char **ret_data,
                          size_t *ret_len, struct errmsg *e)
{
    _cleanup_free_ char *what = NULL, *path = NULL;
    int k = blob_names(r, digest, &what, &path, e);
    if (k < 0)
        return k;
    struct reg_request q = {
        .what = what,
        .path = path,
        .timeout_ms = REG_SMALL_TIMEOUT_MS,
        .max_body = max ? max : 1,
        .follow_redirects = true,
    };
    struct http_response resp = {0};
    k = registry_fetch(r, &q, &resp, e);
    if (k == -EFBIG)
        return errmsg_set(e, -EFBIG, "%s: blob larger than %zu bytes", what, max);
    if (k < 0)
        return k;
    if (resp.status != 200) {
        k = registry_status_error(r, what, &resp, e);
        http_response_done(&resp);
        return k;
    }
    k = digest_check(digest, resp.body, resp.body_len, e);
    if (k < 0) {
        http_response_done(&resp);
        return errmsg_prefix(e, k, "%s", what);
    }
    *ret_data = TAKE_PTR(resp.body);
    *ret_len = resp.body_len;
    http_response_done(&resp);
    return 0;
}

int registry_check_blob(struct registry *r, const char *digest, struct errmsg *e)
{
    _cleanup_free_ char *what = NULL, *path = NULL;
    int k = blob_names(r, digest, &what, &path, e);
    if (k < 0)
        return k;
    /* Redirects are not followed: the registry's own answer is the one that vouches. */
    struct reg_request q = {
        .method = "HEAD",
        .what = what,
        .path = path,
        .timeout_ms = REG_SMALL_TIMEOUT_MS,
    };
    struct http_response resp = {0};
    k = registry_fetch(r, &q, &resp, e);
    if (k < 0)
        return k;
    if (resp.status != 200 && resp.status != 307 && resp.status != 302)
        k = registry_status_error(r, what, &resp, e);
    http_response_done(&resp);
    return k;
}

/* ---- streamed blobs ---- */

/* One blob download. A response body is staged in memory until BLOB_STAGE bytes have come or
 * the response ends, because the sink learns the HTTP status only afterwards: an error page or
 * a 401 body must not reach the file, and a server that ignores Range answers 200 with the
 * whole blob, which belongs at offset 0, not at the resume offset. Bytes are hashed as they are
 * written, so the digest context always covers exactly [0, written) of the file. */
struct blob_fetch {
    struct registry *reg;
    const char *what;
    const char *digest;
    int64_t size;
    int fd;
    struct digest_ctx *dc;
    int64_t written; /* bytes in the file and hashed */
    int64_t start;   /* written when this attempt began */
    bool streaming;  /* stage flushed: the body goes straight to the file */
    char *stage;
    size_t staged;
    registry_progress_fn progress;
    void *userdata;
    int sink_error; /* a write error, with its message in sink_msg */
    struct errmsg sink_msg;
};

static int blob_write(struct blob_fetch *f, const void *data, size_t len)
{
    const char *p = data;
    while (len > 0) {
        ssize_t n = pwrite(f->fd, p, len, (off_t)f->written);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            f->sink_error = n < 0 ? negative_errno() : -EIO;
            return errmsg_set(&f->sink_msg, f->sink_error, "%s: writing the download: %s", f->what,
                              strerror(-f->sink_error));
        }
        digest_update(f->dc, p, (size_t)n);
        f->written += n;
        p += n;
        len -= (size_t)n;
    }
    if (f->progress)
        f->progress(f->userdata, f->written, f->size);
    return 0;
}

/* Truncates the file to off and hashes [0, off) again: the start of a resume, or a rollback of
 * bytes that turned out not to be the blob's. */
static int blob_reset(struct blob_fetch *f, int64_t off, struct errmsg *e)
{
    if (ftruncate(f->fd, (off_t)off) < 0)
        return errmsg_set(e, negative_errno(), "%s: truncating the download: %m", f->what);
    digest_free(f->dc);
    f->dc = NULL;
    int k = digest_begin(f->digest, &f->dc, e);
    if (k < 0)
        return k;
    char buf[64 * 1024];
    for (int64_t pos = 0; pos < off;) {
        size_t want = off - pos < (int64_t)sizeof(buf) ? (size_t)(off - pos) : sizeof(buf);
        ssize_t n = pread(f->fd, buf, want, (off_t)pos);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return errmsg_set(e, n < 0 ? negative_errno() : -EIO,
                              "%s: reading back the partial download: %s", f->what,
                              n < 0 ? strerror(errno) : "file shorter than expected");
        digest_update(f->dc, buf, (size_t)n);
        pos += n;
    }
    f->written = off;
    return 0;
}

/* The stage is full and the status still unknown: a body longer than what is left of the blob
 * can only be the whole blob (the server ignored Range) or garbage, which the digest catches. */
static int blob_flush_stage(struct blob_fetch *f)
{
    if ((int64_t)f->staged > f->size - f->start) {
        if (f->start == 0)
            return -EMSGSIZE;
        struct errmsg e;
        int k = blob_reset(f, 0, &e);
        if (k < 0) {
            f->sink_error = k;
            f->sink_msg = e;
            return k;
        }
        f->start = 0;
    }
    f->streaming = true;
    int k = blob_write(f, f->stage, f->staged);
    f->staged = 0;
    return k;
}

static int blob_sink(const void *data, size_t len, void *userdata)
{
    struct blob_fetch *f = userdata;
    if (registry_cancelled(f->reg))
        return -ECANCELED;
    if (!f->streaming) {
        size_t take = len < BLOB_STAGE - f->staged ? len : BLOB_STAGE - f->staged;
        memcpy(f->stage + f->staged, data, take);
        f->staged += take;
        data = (const char *)data + take;
        len -= take;
        if (f->staged < BLOB_STAGE)
            return 0;
        int k = blob_flush_stage(f);
        if (k < 0)
            return k;
    }
    if (f->written + (int64_t)len > f->size)
        return -EMSGSIZE;
    return blob_write(f, data, len);
}

/* Where the server says a 206 body starts ("Content-Range: bytes 100-199/200"), or -1. */
static int64_t content_range_start(const struct http_response *resp)
{
    char v[128];
    long long s;
    if (http_response_header(resp, "Content-Range", v, sizeof(v)) < 0 ||
        sscanf(v, "bytes %lld-", &s) != 1)
        return -1;
    return s;
}

/* The attempt ended with a 2xx status: puts a staged body where it belongs. Returns 0, 1 to
 * try again from offset 0 at once, or a negative errno. */
static int blob_finish_2xx(struct blob_fetch *f, const struct http_response *resp, struct errmsg *e)
{
    if (f->streaming)
        return 0;
    if (resp->status == 206 && content_range_start(resp) != f->start) {
        int k = blob_reset(f, 0, e);
        return k < 0 ? k : 1;
    }
    if (resp->status != 206 && f->start > 0) {
        int k = blob_reset(f, 0, e);
        if (k < 0)
            return k;
        f->start = 0;
    }
    if (f->written + (int64_t)f->staged > f->size)
        return errmsg_set(e, -EBADMSG,
                          "%s: the registry sent more than the %lld bytes the "
                          "manifest lists",
                          f->what, (long long)f->size);
    f->streaming = true;
    int k = blob_write(f, f->stage, f->staged);
    f->staged = 0;
    return k < 0 ? errmsg_set(e, k, "%s", f->sink_msg.text) : 0;
}

/* Builds the request of the next attempt, resuming at f->written. */
static int blob_request(struct blob_fetch *f, char path[], char range[], struct reg_request *q)
{
    f->start = f->written;
    f->staged = 0;
    f->streaming = false;
    if (f->start > 0)
        snprintf(range, 64, "Range: bytes=%lld-", (long long)f->start);
    *q = (struct reg_request){
        .what = f->what,
        .path = path,
        .range = f->start > 0 ? range : NULL,
        .follow_redirects = true,
        .sink = blob_sink,
        .sink_userdata = f,
    };
    return 0;
}

/* Judges one attempt. Returns 0 when the blob is complete, 1 to try again at once, 2 to try
 * again after a backoff, or a negative errno. */
static int blob_judge(struct blob_fetch *f, int k, const struct http_response *resp, unsigned gen,
                      bool *authorized, struct errmsg *e)
{
    if (k == -EMSGSIZE) {
        if (f->start == 0)
            return errmsg_set(e, -EBADMSG,
                              "%s: the registry sent more than the %lld bytes the "
                              "manifest lists",
                              f->what, (long long)f->size);
        /* Resumed data went to the wrong place: the server sent the whole blob. */
        k = blob_reset(f, 0, e);
        return k < 0 ? k : 1;
    }
    if (f->sink_error)
        return errmsg_set(e, f->sink_error, "%s", f->sink_msg.text);
    if (k < 0)
        return registry_transient_errno(k) ? 2 : k;
    if (resp->status == 200 || resp->status == 206) {
        k = blob_finish_2xx(f, resp, e);
        if (k != 0)
            return k;
        return f->written == f->size ? 0 : 2; /* a short body: resume */
    }
    /* Not the blob: whatever went to the file in this attempt is an error page. */
    if (f->streaming && (k = blob_reset(f, f->start, e)) < 0)
        return k;
    if (resp->status == 401 && !*authorized) {
        k = registry_authorize(f->reg, f->what, resp, gen, e);
        *authorized = true;
        return k < 0 ? k : 1;
    }
    if (resp->status == 416 && f->start > 0) {
        k = blob_reset(f, 0, e);
        return k < 0 ? k : 1;
    }
    if (registry_transient_status(resp->status))
        return 2;
    return registry_status_error(f->reg, f->what, resp, e);
}

static int blob_loop(struct blob_fetch *f, struct errmsg *e)
{
    char path[512], range[64];
    if (snprintf(path, sizeof(path), "/v2/%s/blobs/%s", f->reg->repository, f->digest) >=
        (int)sizeof(path))
        return errmsg_set(e, -EINVAL, "%s: repository name too long", f->what);
    bool authorized = false;
    unsigned failures = 0, restarts = 0;
    for (;;) {
        struct reg_request q;
        struct http_response resp = {0};
        unsigned gen;
        int64_t before = f->written;
        blob_request(f, path, range, &q);
        f->sink_error = 0;
        int k = registry_attempt(f->reg, &q, &resp, &gen, e);
        if (k == -ECANCELED || registry_cancelled(f->reg)) {
            http_response_done(&resp);
            return errmsg_set(e, -ECANCELED, "%s: cancelled", f->what);
        }
        k = blob_judge(f, k, &resp, gen, &authorized, e);
        if (k == 0 || k < 0) {
            http_response_done(&resp);
            return k;
        }
        /* A restart (from 0, or with new credentials) is immediate, but only a few times. */
        if (k == 1 && restarts++ < 4) {
            http_response_done(&resp);
            continue;
        }
        /* A connection that broke after some progress is resumed at once, with a fresh set
         * of retries; one that brings nothing backs off. */
        if (f->written > before) {
            failures = 0;
            http_response_done(&resp);
            continue;
        }
        if (failures++ >= f->reg->retries) {
            int q2 =
                resp.status && registry_transient_status(resp.status)
                    ? registry_status_error(f->reg, f->what, &resp, e)
                    : errmsg_prefix(e, -EIO, "%s: giving up after %u attempts", f->what, failures);
            http_response_done(&resp);
            return q2;
        }
        k = registry_backoff(f->reg, failures, resp.status ? &resp : NULL);
        http_response_done(&resp);
        if (k < 0)
            return errmsg_set(e, k, "%s: cancelled", f->what);
    }
}

int registry_get_blob(struct registry *r, const char *digest, int64_t size, int fd, off_t offset,
                      registry_progress_fn progress, void *userdata, struct errmsg *e)
{
    if (!digest_valid(digest))
        return errmsg_set(e, -EINVAL, "'%s' is not a valid digest", digest);
    if (size < 0 || offset < 0)
        return errmsg_set(e, -EINVAL, "%s: invalid size or offset", digest);
    _cleanup_free_ char *what = NULL, *stage = malloc(BLOB_STAGE);
    if (!stage || asprintf(&what, "%s@%s", r->name, digest) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    struct blob_fetch f = {
        .reg = r,
        .what = what,
        .digest = digest,
        .size = size,
        .fd = fd,
        .stage = stage,
        .progress = progress,
        .userdata = userdata,
    };
    /* A partial file longer than the blob is not a prefix of it. */
    int k = blob_reset(&f, offset <= size ? offset : 0, e);
    if (k >= 0 && f.written < size)
        k = blob_loop(&f, e);
    if (k >= 0 && (k = digest_verify(f.dc, e)) < 0)
        errmsg_prefix(e, k, "%s", what);
    digest_free(f.dc);
    return k;
}
