/* Tests for the registry client (registry.c, registry-auth.c) and pull.c against a fake
 * registry on 127.0.0.1 (lib's HTTP server): auth (Basic, Bearer with a token cache that honours
 * expires_in), retries, Range resume, servers that ignore Range or cut bodies short, redirects
 * that must not carry our Authorization to another host, digest checks, plain HTTP rules, and
 * whole pulls into a store (parallel layers, index selection, a tampered layer). */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "capsule/image/digest.h"
#include "lib/http-server.h"
#include "capsule/image/manifest.h"
#include "capsule/registry/pull.h"
#include "capsule/registry/registry.h"
#include "capsule/store/store.h"

#define REPO "team/app"

/* ---- the fake registry ---- */

enum fake_auth { AUTH_NONE, AUTH_BASIC, AUTH_BEARER };

struct fake_object {
    char key[DIGEST_STRING_MAX + 64]; /* digest, or a tag for manifests */
    char *data;
    size_t len;
    const char *content_type;
};

struct fake {
    struct http_server *srv, *storage;
    uint16_t port, storage_port;
    pthread_mutex_t lock;
    struct fake_object manifests[8], blobs[16];
    size_t n_manifests, n_blobs;
    /* behaviour */
    enum fake_auth auth;
    const char *user, *password;
    int expires_in;
    unsigned fail_next;      /* answer 503 to this many blob and manifest requests */
    bool retry_after;        /* with "Retry-After: 0" */
    bool ignore_range;       /* answer 200 with the whole blob */
    size_t chunk;            /* at most this many bytes per blob response, then "drop" */
    bool redirect;           /* blobs: 307 to the storage server */
    bool redirect_manifests; /* manifests too (a registry behind a CDN) */
    bool corrupt;            /* flip a byte of every blob served */
    /* what happened */
    unsigned token_requests, blob_requests, manifest_requests, storage_requests;
    unsigned token_serial;
    char last_range[64];
    char registry_auth_seen[256];
    char storage_auth_seen[256];
    char token_auth_seen[256];
};

static void put_object(struct fake_object *o, const char *key, const void *data, size_t len,
                       const char *ct)
{
    snprintf(o->key, sizeof(o->key), "%s", key);
    o->data = malloc(len + 1);
    assert_non_null(o->data);
    memcpy(o->data, data, len);
    o->len = len;
    o->content_type = ct;
}

/* Adds a blob; its digest is written into digest_out. */
static void fake_blob(struct fake *f, const void *data, size_t len, char digest_out[])
{
    char d[DIGEST_STRING_MAX];
    digest_sha256(data, len, d);
    put_object(&f->blobs[f->n_blobs++], d, data, len, NULL);
    if (digest_out)
        strcpy(digest_out, d);
}

/* Adds a manifest under its digest and, if tag is set, under the tag. */
static void fake_manifest(struct fake *f, const char *tag, const char *json, const char *ct,
                          char digest_out[])
{
    char d[DIGEST_STRING_MAX];
    digest_sha256(json, strlen(json), d);
    put_object(&f->manifests[f->n_manifests++], d, json, strlen(json), ct);
    if (tag)
        put_object(&f->manifests[f->n_manifests++], tag, json, strlen(json), ct);
    if (digest_out)
        strcpy(digest_out, d);
}

static const struct fake_object *find(const struct fake_object *objs, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(objs[i].key, key) == 0)
            return &objs[i];
    return NULL;
}

static void reply_text(struct http_reply *reply, unsigned status, const char *ct, const char *s)
{
    http_reply_take(reply, status, ct, strdup(s), strlen(s), false);
}

static void copy_header(const struct http_request *req, const char *name, char *out, size_t n)
{
    const char *v = http_request_header(req, name);
    snprintf(out, n, "%s", v ? v : "");
}

static bool basic_ok(const struct fake *f, const char *auth)
{
    char plain[128], expect[256];
    snprintf(plain, sizeof(plain), "%s:%s", f->user, f->password);
    strcpy(expect, "Basic ");
    EVP_EncodeBlock((unsigned char *)expect + 6, (unsigned char *)plain, (int)strlen(plain));
    return auth && strcmp(auth, expect) == 0;
}

/* Checks the request's credentials; answers 401 with a challenge and returns false if wrong. */
static bool authorized(struct fake *f, const struct http_request *req, struct http_reply *reply)
{
    const char *auth = http_request_header(req, "Authorization");
    char want[64], challenge[256];
    if (f->auth == AUTH_NONE)
        return true;
    if (f->auth == AUTH_BASIC) {
        if (basic_ok(f, auth))
            return true;
        snprintf(challenge, sizeof(challenge), "Basic realm=\"fake\"");
    } else {
        snprintf(want, sizeof(want), "Bearer tok-%u", f->token_serial);
        if (auth && f->token_serial && strcmp(auth, want) == 0)
            return true;
        snprintf(challenge, sizeof(challenge),
                 "Bearer realm=\"http://127.0.0.1:%u/token\",service=\"fake\","
                 "scope=\"repository:" REPO ":pull\"",
                 f->port);
    }
    reply_text(reply, 401, "application/json",
               "{\"errors\":[{\"code\":\"UNAUTHORIZED\",\"message\":\"authentication "
               "required\"}]}");
    http_reply_header(reply, "WWW-Authenticate", challenge);
    return false;
}

static void serve_token(struct fake *f, const struct http_request *req, struct http_reply *reply)
{
    f->token_requests++;
    copy_header(req, "Authorization", f->token_auth_seen, sizeof(f->token_auth_seen));
    const char *scope = http_request_query(req, "scope");
    const char *service = http_request_query(req, "service");
    if (!scope || strcmp(scope, "repository:" REPO ":pull") || !service ||
        strcmp(service, "fake")) {
        reply_text(reply, 400, "application/json", "{\"details\":\"bad scope or service\"}");
        return;
    }
    if (f->user && !basic_ok(f, http_request_header(req, "Authorization"))) {
        reply_text(reply, 401, "application/json", "{\"details\":\"wrong credentials\"}");
        return;
    }
    char body[128];
    snprintf(body, sizeof(body), "{\"token\":\"tok-%u\",\"expires_in\":%d}", ++f->token_serial,
             f->expires_in);
    reply_text(reply, 200, "application/json", body);
}

static void serve_manifest(struct fake *f, const char *ref, struct http_reply *reply)
{
    const struct fake_object *o = find(f->manifests, f->n_manifests, ref);
    if (o && f->redirect_manifests) {
        char loc[256];
        snprintf(loc, sizeof(loc), "http://127.0.0.1:%u/storage-manifest/%s", f->storage_port, ref);
        reply_text(reply, 307, "text/plain", "");
        http_reply_header(reply, "Location", loc);
        return;
    }
    if (!o) {
        reply_text(reply, 404, "application/json",
                   "{\"errors\":[{\"code\":\"MANIFEST_UNKNOWN\",\"message\":\"manifest "
                   "unknown\"}]}");
        return;
    }
    char *copy = malloc(o->len);
    memcpy(copy, o->data, o->len);
    http_reply_take(reply, 200, o->content_type, copy, o->len, false);
}

/* Serves a blob's bytes from the Range start, at most f->chunk of them. */
static void serve_blob_bytes(struct fake *f, const struct fake_object *o, const char *range,
                             struct http_reply *reply)
{
    size_t start = 0;
    if (range && !f->ignore_range && sscanf(range, "bytes=%zu-", &start) != 1)
        start = 0;
    if (start > o->len) {
        reply_text(reply, 416, "text/plain", "range not satisfiable");
        return;
    }
    size_t n = o->len - start;
    if (f->chunk && n > f->chunk)
        n = f->chunk;
    char *copy = malloc(n ? n : 1);
    memcpy(copy, o->data + start, n);
    if (f->corrupt && n > 0)
        copy[n / 2] ^= 0x55;
    bool partial = range && !f->ignore_range && start > 0;
    http_reply_take(reply, partial ? 206 : 200, "application/octet-stream", copy, n, false);
    if (partial) {
        char cr[96];
        snprintf(cr, sizeof(cr), "bytes %zu-%zu/%zu", start, start + n - 1, o->len);
        http_reply_header(reply, "Content-Range", cr);
    }
}

static void serve_blob(struct fake *f, const struct http_request *req, const char *digest,
                       struct http_reply *reply)
{
    f->blob_requests++;
    copy_header(req, "Range", f->last_range, sizeof(f->last_range));
    const struct fake_object *o = find(f->blobs, f->n_blobs, digest);
    if (!o) {
        reply_text(reply, 404, "application/json",
                   "{\"errors\":[{\"code\":\"BLOB_UNKNOWN\",\"message\":\"blob unknown\"}]}");
        return;
    }
    if (f->redirect) {
        char loc[256];
        snprintf(loc, sizeof(loc), "http://127.0.0.1:%u/storage/%s", f->storage_port, digest);
        reply_text(reply, 307, "text/plain", "");
        http_reply_header(reply, "Location", loc);
        return;
    }
    serve_blob_bytes(f, o, http_request_header(req, "Range"), reply);
}

static void handler(const struct http_request *req, struct http_reply *reply, void *userdata)
{
    struct fake *f = userdata;
    const char *p = req->path;
    const char *prefix = "/v2/" REPO "/";
    pthread_mutex_lock(&f->lock);
    if (strcmp(p, "/token") == 0) {
        serve_token(f, req, reply);
        goto out;
    }
    if (strcmp(p, "/v2/") == 0) {
        if (authorized(f, req, reply))
            reply_text(reply, 200, "application/json", "{}");
        goto out;
    }
    bool manifest = strncmp(p, prefix, strlen(prefix)) == 0 &&
                    strncmp(p + strlen(prefix), "manifests/", 10) == 0;
    bool blob =
        strncmp(p, prefix, strlen(prefix)) == 0 && strncmp(p + strlen(prefix), "blobs/", 6) == 0;
    if (!manifest && !blob) {
        reply_text(reply, 404, "application/json",
                   "{\"errors\":[{\"code\":\"NAME_UNKNOWN\",\"message\":\"repository name not "
                   "known to registry\"}]}");
        goto out;
    }
    if (manifest)
        f->manifest_requests++;
    if (f->fail_next > 0) {
        f->fail_next--;
        if (blob)
            f->blob_requests++;
        reply_text(reply, 503, "text/plain", "try later");
        if (f->retry_after)
            http_reply_header(reply, "Retry-After", "0");
        goto out;
    }
    copy_header(req, "Authorization", f->registry_auth_seen, sizeof(f->registry_auth_seen));
    if (!authorized(f, req, reply)) {
        if (blob)
            f->blob_requests++;
        goto out;
    }
    if (manifest)
        serve_manifest(f, p + strlen(prefix) + 10, reply);
    else
        serve_blob(f, req, p + strlen(prefix) + 6, reply);
out:
    pthread_mutex_unlock(&f->lock);
}

/* The "blob storage" a registry redirects to: another port, so another origin. */
static void storage_handler(const struct http_request *req, struct http_reply *reply,
                            void *userdata)
{
    struct fake *f = userdata;
    pthread_mutex_lock(&f->lock);
    f->storage_requests++;
    copy_header(req, "Authorization", f->storage_auth_seen, sizeof(f->storage_auth_seen));
    const char *m = "/storage-manifest/";
    const struct fake_object *o =
        strncmp(req->path, "/storage/", 9) == 0 ? find(f->blobs, f->n_blobs, req->path + 9) : NULL;
    if (o)
        serve_blob_bytes(f, o, http_request_header(req, "Range"), reply);
    else if (strncmp(req->path, m, strlen(m)) == 0) {
        f->redirect_manifests = false;
        serve_manifest(f, req->path + strlen(m), reply);
        f->redirect_manifests = true;
    } else
        reply_text(reply, 404, "text/plain", "no such object");
    pthread_mutex_unlock(&f->lock);
}

static struct fake *fake_new(void)
{
    struct fake *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    pthread_mutex_init(&f->lock, NULL);
    f->expires_in = 300;
    struct errmsg e = {{0}};
    assert_int_equal(http_server_new_tcp("127.0.0.1:0", handler, f, &f->srv, &e), 0);
    assert_int_equal(http_server_new_tcp("127.0.0.1:0", storage_handler, f, &f->storage, &e), 0);
    f->port = http_server_port(f->srv);
    f->storage_port = http_server_port(f->storage);
    return f;
}

static void fake_free(struct fake *f)
{
    http_server_free(f->srv);
    http_server_free(f->storage);
    for (size_t i = 0; i < f->n_manifests; i++)
        free(f->manifests[i].data);
    for (size_t i = 0; i < f->n_blobs; i++)
        free(f->blobs[i].data);
    pthread_mutex_destroy(&f->lock);
    free(f);
}

/* ---- helpers ---- */

struct tctx {
    struct fake *f;
    char dir[64];
    struct image_ref ref;
    struct registry_opts o;
};

static int setup(void **state)
{
    struct tctx *t = calloc(1, sizeof(*t));
    t->f = fake_new();
    strcpy(t->dir, "/tmp/test-pull-XXXXXX");
    if (!mkdtemp(t->dir))
        return -1;
    char name[128];
    snprintf(name, sizeof(name), "127.0.0.1:%u/" REPO ":v1", t->f->port);
    struct errmsg e = {{0}};
    if (image_ref_parse(name, &t->ref, &e) < 0)
        return -1;
    t->o.retries = 2;
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    struct tctx *t = *state;
    fake_free(t->f);
    image_ref_done(&t->ref);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "chmod -R u+w %s 2>/dev/null; rm -rf %s", t->dir, t->dir);
    (void)!system(cmd);
    free(t);
    return 0;
}

static struct registry *open_reg(struct tctx *t)
{
    struct registry *r = NULL;
    struct errmsg e = {{0}};
    int k = registry_open(&t->ref, &t->o, &r, &e);
    if (k < 0)
        fail_msg("registry_open: %d %s", k, e.text);
    return r;
}

static void write_file(const char *path, const char *text)
{
    FILE *fp = fopen(path, "we");
    assert_non_null(fp);
    fputs(text, fp);
    fclose(fp);
}

static void fill(char *buf, size_t n, unsigned seed)
{
    for (size_t i = 0; i < n; i++) {
        seed = seed * 1103515245u + 12345u;
        buf[i] = (char)(seed >> 16);
    }
}

static int tmpfile_fd(void)
{
    int fd = memfd_create("blob", MFD_CLOEXEC);
    assert_true(fd >= 0);
    return fd;
}

static void assert_fd_content(int fd, const char *data, size_t len)
{
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(st.st_size, len);
    char *buf = malloc(len + 1);
    assert_int_equal(pread(fd, buf, len, 0), (ssize_t)len);
    assert_memory_equal(buf, data, len);
    free(buf);
}

struct progress_seen {
    int64_t last_done, total;
    unsigned calls;
};

static void progress_cb(void *userdata, int64_t done, int64_t total)
{
    struct progress_seen *p = userdata;
    assert_true(done >= 0 && done <= total);
    p->last_done = done;
    p->total = total;
    p->calls++;
}

/* ---- registry client ---- */

static const char *MANIFEST_JSON =
    "{\"schemaVersion\":2,\"mediaType\":\"" MEDIA_OCI_MANIFEST "\",\"config\":{\"mediaType\":"
    "\"" MEDIA_OCI_CONFIG "\",\"digest\":\"sha256:"
    "0000000000000000000000000000000000000000000000000000000000000000\",\"size\":2},"
    "\"layers\":[]}";

static void test_manifest_by_tag_and_digest(void **state)
{
    struct tctx *t = *state;
    char d[DIGEST_STRING_MAX];
    fake_manifest(t->f, "v1", MANIFEST_JSON, MEDIA_OCI_MANIFEST "; charset=utf-8", d);
    _cleanup_(registry_freep) struct registry *r = open_reg(t);
    struct registry_manifest m = {0};
    struct errmsg e = {{0}};
    assert_int_equal(registry_get_manifest(r, "v1", &m, &e), 0);
    assert_int_equal(m.len, strlen(MANIFEST_JSON));
    assert_memory_equal(m.data, MANIFEST_JSON, m.len);
    assert_string_equal(m.content_type, MEDIA_OCI_MANIFEST); /* parameters dropped */
    assert_string_equal(m.digest, d);
    registry_manifest_done(&m);
    assert_int_equal(registry_get_manifest(r, d, &m, &e), 0);
    assert_string_equal(m.digest, d);
    registry_manifest_done(&m);

    /* A registry that serves other bytes under a digest is caught. */
    char other[DIGEST_STRING_MAX];
    digest_sha256("x", 1, other);
    put_object(&t->f->manifests[t->f->n_manifests++], other, MANIFEST_JSON, strlen(MANIFEST_JSON),
               MEDIA_OCI_MANIFEST);
    assert_int_equal(registry_get_manifest(r, other, &m, &e), -EBADMSG);
    assert_non_null(strstr(e.text, other));
    assert_null(m.data);

    assert_int_equal(registry_get_manifest(r, "nope", &m, &e), -ENOENT);
    assert_non_null(strstr(e.text, REPO ":nope: manifest unknown"));
}

/* A manifest behind a 307 (a registry fronted by a CDN) is followed like a blob, by tag and by
 * digest, and the registry's credentials stay with the registry. */
static void test_manifest_redirect(void **state)
{
    struct tctx *t = *state;
    char d[DIGEST_STRING_MAX];
    fake_manifest(t->f, "v1", MANIFEST_JSON, MEDIA_OCI_MANIFEST, d);
    t->f->redirect_manifests = true;
    t->f->auth = AUTH_BEARER;
    _cleanup_(registry_freep) struct registry *r = open_reg(t);
    struct registry_manifest m = {0};
    struct errmsg e = {{0}};
    assert_int_equal(registry_get_manifest(r, "v1", &m, &e), 0);
    assert_memory_equal(m.data, MANIFEST_JSON, m.len);
    assert_string_equal(m.digest, d);
    assert_string_equal(m.content_type, MEDIA_OCI_MANIFEST);
    registry_manifest_done(&m);
    assert_int_equal(registry_get_manifest(r, d, &m, &e), 0);
    registry_manifest_done(&m);
    assert_int_equal(t->f->storage_requests, 2);
    assert_true(strncmp(t->f->registry_auth_seen, "Bearer tok-", 11) == 0);
    assert_string_equal(t->f->storage_auth_seen, "");
}

static void test_bearer_token_cached_and_expiring(void **state)
{
    struct tctx *t = *state;
    char blob[5000], d[DIGEST_STRING_MAX];
    fill(blob, sizeof(blob), 1);
    fake_blob(t->f, blob, sizeof(blob), d);
    fake_manifest(t->f, "v1", MANIFEST_JSON, MEDIA_OCI_MANIFEST, NULL);
    t->f->auth = AUTH_BEARER;
    t->f->expires_in = 1;
    _cleanup_(registry_freep) struct registry *r = open_reg(t);
    struct registry_manifest m = {0};
    struct errmsg e = {{0}};
    /* The 401's body must not end up in the file: the retry with a token writes the blob. */
    _cleanup_close_ int fd = tmpfile_fd();
    assert_int_equal(registry_get_blob(r, d, sizeof(blob), fd, 0, NULL, NULL, &e), 0);
    assert_fd_content(fd, blob, sizeof(blob));
    assert_int_equal(t->f->blob_requests, 2);
    assert_int_equal(registry_get_manifest(r, "v1", &m, &e), 0);
    registry_manifest_done(&m);
    assert_int_equal(t->f->token_requests, 1);      /* one token served both */
    assert_string_equal(t->f->token_auth_seen, ""); /* no credentials: anonymous */
    usleep(1200 * 1000);
    assert_int_equal(registry_get_manifest(r, "v1", &m, &e), 0);
    registry_manifest_done(&m);
    assert_int_equal(t->f->token_requests, 2); /* the first one expired */
}

static void test_bearer_with_credentials(void **state)
{
    struct tctx *t = *state;
    char netrc[128];
    snprintf(netrc, sizeof(netrc), "%s/netrc", t->dir);
    char text[256];
    snprintf(text, sizeof(text), "machine 127.0.0.1:%u login alice password s3cret\n", t->f->port);
    write_file(netrc, text);
    t->o.netrc_path = netrc;
    fake_manifest(t->f, "v1", MANIFEST_JSON, MEDIA_OCI_MANIFEST, NULL);
    t->f->auth = AUTH_BEARER;
    t->f->user = "alice";
    t->f->password = "s3cret";
    struct registry_manifest m = {0};
    struct errmsg e = {{0}};
    struct registry *r = open_reg(t);
    assert_int_equal(registry_get_manifest(r, "v1", &m, &e), 0);
    registry_manifest_done(&m);
    assert_true(strncmp(t->f->token_auth_seen, "Basic ", 6) == 0);
    registry_free(r);

    t->f->password = "other";
    r = open_reg(t);
    assert_int_equal(registry_get_manifest(r, "v1", &m, &e), -EACCES);
    assert_non_null(strstr(e.text, "rejected"));
    assert_non_null(strstr(e.text, netrc));
    registry_free(r);
}

static void test_basic_auth(void **state)
{
    struct tctx *t = *state;
    char cfg[128], text[256];
    snprintf(cfg, sizeof(cfg), "%s/config.json", t->dir);
    /* "bob:pw" */
    snprintf(text, sizeof(text), "{\"auths\":{\"127.0.0.1:%u\":{\"auth\":\"Ym9iOnB3\"}}}",
             t->f->port);
    write_file(cfg, text);
    fake_manifest(t->f, "v1", MANIFEST_JSON, MEDIA_OCI_MANIFEST, NULL);
    t->f->auth = AUTH_BASIC;
    t->f->user = "bob";
    t->f->password = "pw";
    struct registry_manifest m = {0};
    struct errmsg e = {{0}};

    struct registry *r = open_reg(t); /* no credentials files */
    assert_int_equal(registry_get_manifest(r, "v1", &m, &e), -EACCES);
    assert_non_null(strstr(e.text, "not found"));
    registry_free(r);

    t->o.docker_config_path = cfg;
    r = open_reg(t);
    assert_int_equal(registry_get_manifest(r, "v1", &m, &e), 0);
    registry_manifest_done(&m);
    registry_free(r);

    t->f->password = "changed";
    r = open_reg(t);
    assert_int_equal(registry_get_manifest(r, "v1", &m, &e), -EACCES);
    assert_non_null(strstr(e.text, "rejected"));
    assert_non_null(strstr(e.text, "HTTP 401"));
    registry_free(r);
}

/* The node cache's service sends the requester's own header: a 401 is a refusal, or, once the
 * registry had taken that header, its expiry (the requester then asks again with a new one). */
static void test_fixed_authorization(void **state)
{
    struct tctx *t = *state;
    char blob[64], d[DIGEST_STRING_MAX];
    fill(blob, sizeof(blob), 3);
    fake_blob(t->f, blob, sizeof(blob), d);
    fake_manifest(t->f, "v1", MANIFEST_JSON, MEDIA_OCI_MANIFEST, NULL);
    t->f->auth = AUTH_BASIC;
    t->f->user = "bob";
    t->f->password = "pw";
    struct registry_manifest m = {0};
    struct errmsg e = {{0}};
    t->o.authorization = "Authorization: Basic Ym9iOnB3"; /* bob:pw */
    struct registry *r = open_reg(t);
    assert_int_equal(registry_get_manifest(r, "v1", &m, &e), 0);
    registry_manifest_done(&m);
    t->f->password = "changed";
    assert_int_equal(registry_check_blob(r, d, &e), -EKEYEXPIRED);
    assert_non_null(strstr(e.text, "the token expired"));
    registry_free(r);
    /* Never taken: refused. */
    r = open_reg(t);
    assert_int_equal(registry_get_manifest(r, "v1", &m, &e), -EACCES);
    assert_non_null(strstr(e.text, "with the requester's credentials"));
    registry_free(r);
}

static void test_blob_resume_with_range(void **state)
{
    struct tctx *t = *state;
    static char blob[300000];
    char d[DIGEST_STRING_MAX];
    fill(blob, sizeof(blob), 2);
    fake_blob(t->f, blob, sizeof(blob), d);
    _cleanup_(registry_freep) struct registry *r = open_reg(t);
    _cleanup_close_ int fd = tmpfile_fd();
    assert_int_equal(pwrite(fd, blob, 100000, 0), 100000);
    struct progress_seen p = {0};
    struct errmsg e = {{0}};
    assert_int_equal(registry_get_blob(r, d, sizeof(blob), fd, 100000, progress_cb, &p, &e), 0);
    assert_string_equal(t->f->last_range, "bytes=100000-");
    assert_int_equal(t->f->blob_requests, 1);
    assert_fd_content(fd, blob, sizeof(blob));
    assert_int_equal(p.last_done, sizeof(blob));
    assert_int_equal(p.total, sizeof(blob));

    /* A partial file whose bytes are wrong fails the digest check as a whole. */
    _cleanup_close_ int fd2 = tmpfile_fd();
    char junk[1000];
    memset(junk, 'x', sizeof(junk));
    assert_int_equal(pwrite(fd2, junk, sizeof(junk), 0), (ssize_t)sizeof(junk));
    assert_int_equal(registry_get_blob(r, d, sizeof(blob), fd2, 1000, NULL, NULL, &e), -EBADMSG);
    assert_non_null(strstr(e.text, d));
}

/* A server that ignores Range sends the whole blob with 200: it must land at offset 0. */
static void test_blob_server_ignores_range(void **state)
{
    struct tctx *t = *state;
    static char big[200000], small[3000];
    char dbig[DIGEST_STRING_MAX], dsmall[DIGEST_STRING_MAX];
    fill(big, sizeof(big), 3);
    fill(small, sizeof(small), 4);
    fake_blob(t->f, big, sizeof(big), dbig);
    fake_blob(t->f, small, sizeof(small), dsmall);
    t->f->ignore_range = true;
    _cleanup_(registry_freep) struct registry *r = open_reg(t);
    struct errmsg e = {{0}};
    _cleanup_close_ int fd = tmpfile_fd();
    assert_int_equal(pwrite(fd, big, 150000, 0), 150000);
    assert_int_equal(registry_get_blob(r, dbig, sizeof(big), fd, 150000, NULL, NULL, &e), 0);
    assert_fd_content(fd, big, sizeof(big));
    _cleanup_close_ int fd2 = tmpfile_fd();
    assert_int_equal(pwrite(fd2, small, 1000, 0), 1000);
    assert_int_equal(registry_get_blob(r, dsmall, sizeof(small), fd2, 1000, NULL, NULL, &e), 0);
    assert_fd_content(fd2, small, sizeof(small));
}

/* Bodies cut short (a dropped connection) are resumed from where they stopped. */
static void test_blob_short_bodies_resume(void **state)
{
    struct tctx *t = *state;
    static char blob[250000];
    char d[DIGEST_STRING_MAX];
    fill(blob, sizeof(blob), 5);
    fake_blob(t->f, blob, sizeof(blob), d);
    t->f->chunk = 70000;
    t->o.retries = 1; /* progress resets the count: four attempts are still fine */
    _cleanup_(registry_freep) struct registry *r = open_reg(t);
    struct errmsg e = {{0}};
    _cleanup_close_ int fd = tmpfile_fd();
    assert_int_equal(registry_get_blob(r, d, sizeof(blob), fd, 0, NULL, NULL, &e), 0);
    assert_int_equal(t->f->blob_requests, 4);
    assert_string_equal(t->f->last_range, "bytes=210000-");
    assert_fd_content(fd, blob, sizeof(blob));
}

static void test_blob_digest_mismatch(void **state)
{
    struct tctx *t = *state;
    static char blob[100000];
    char d[DIGEST_STRING_MAX];
    fill(blob, sizeof(blob), 6);
    fake_blob(t->f, blob, sizeof(blob), d);
    t->f->corrupt = true;
    _cleanup_(registry_freep) struct registry *r = open_reg(t);
    struct errmsg e = {{0}};
    _cleanup_close_ int fd = tmpfile_fd();
    assert_int_equal(registry_get_blob(r, d, sizeof(blob), fd, 0, NULL, NULL, &e), -EBADMSG);
    assert_non_null(strstr(e.text, d));
    assert_non_null(strstr(e.text, "mismatch"));

    /* More bytes than the manifest's size are refused too. */
    t->f->corrupt = false;
    _cleanup_close_ int fd2 = tmpfile_fd();
    assert_int_equal(registry_get_blob(r, d, sizeof(blob) - 10, fd2, 0, NULL, NULL, &e), -EBADMSG);
    char *mem = NULL;
    size_t len = 0;
    assert_int_equal(registry_get_blob_mem(r, d, 1000, &mem, &len, &e), -EFBIG);
    assert_null(mem);
}

static void test_transient_errors_retried(void **state)
{
    struct tctx *t = *state;
    char blob[1000], d[DIGEST_STRING_MAX];
    fill(blob, sizeof(blob), 7);
    fake_blob(t->f, blob, sizeof(blob), d);
    t->f->fail_next = 2;
    t->f->retry_after = true;
    _cleanup_(registry_freep) struct registry *r = open_reg(t);
    struct errmsg e = {{0}};
    char *mem = NULL;
    size_t len = 0;
    assert_int_equal(registry_get_blob_mem(r, d, 4096, &mem, &len, &e), 0);
    assert_int_equal(len, sizeof(blob));
    assert_memory_equal(mem, blob, len);
    free(mem);
    assert_int_equal(t->f->blob_requests, 3);

    /* Past the retries, the status is reported. */
    t->f->fail_next = 10;
    _cleanup_close_ int fd = tmpfile_fd();
    assert_int_equal(registry_get_blob(r, d, sizeof(blob), fd, 0, NULL, NULL, &e), -EIO);
    assert_non_null(strstr(e.text, "503"));
}

/* Blob storage behind a redirect is another origin: our registry credentials stay with us. */
static void test_redirect_keeps_credentials_home(void **state)
{
    struct tctx *t = *state;
    static char blob[90000];
    char d[DIGEST_STRING_MAX];
    fill(blob, sizeof(blob), 8);
    fake_blob(t->f, blob, sizeof(blob), d);
    t->f->auth = AUTH_BEARER;
    t->f->redirect = true;
    _cleanup_(registry_freep) struct registry *r = open_reg(t);
    struct errmsg e = {{0}};
    _cleanup_close_ int fd = tmpfile_fd();
    assert_int_equal(registry_get_blob(r, d, sizeof(blob), fd, 0, NULL, NULL, &e), 0);
    assert_fd_content(fd, blob, sizeof(blob));
    assert_int_equal(t->f->storage_requests, 1);
    assert_true(strncmp(t->f->registry_auth_seen, "Bearer tok-", 11) == 0);
    assert_string_equal(t->f->storage_auth_seen, "");

    /* Basic credentials too, and a resumed download keeps its Range through the redirect. */
    t->f->auth = AUTH_BASIC;
    t->f->user = "u";
    t->f->password = "p";
    char netrc[128], text[128];
    snprintf(netrc, sizeof(netrc), "%s/netrc", t->dir);
    snprintf(text, sizeof(text), "machine 127.0.0.1:%u login u password p\n", t->f->port);
    write_file(netrc, text);
    t->o.netrc_path = netrc;
    struct registry *r2 = open_reg(t);
    _cleanup_close_ int fd2 = tmpfile_fd();
    assert_int_equal(pwrite(fd2, blob, 1000, 0), 1000);
    assert_int_equal(registry_get_blob(r2, d, sizeof(blob), fd2, 1000, NULL, NULL, &e), 0);
    assert_fd_content(fd2, blob, sizeof(blob));
    assert_true(strncmp(t->f->registry_auth_seen, "Basic ", 6) == 0);
    assert_string_equal(t->f->storage_auth_seen, "");
    registry_free(r2);
}

/* 0.0.0.0 reaches the local server but is not a loopback name: plain HTTP needs the config. */
static void test_plain_http_needs_config(void **state)
{
    struct tctx *t = *state;
    fake_manifest(t->f, "v1", MANIFEST_JSON, MEDIA_OCI_MANIFEST, NULL);
    char name[128], host[64];
    snprintf(host, sizeof(host), "0.0.0.0:%u", t->f->port);
    snprintf(name, sizeof(name), "%s/" REPO ":v1", host);
    struct image_ref ref = {0};
    struct errmsg e = {{0}};
    assert_int_equal(image_ref_parse(name, &ref, &e), 0);
    struct registry *r = NULL;
    struct registry_manifest m = {0};
    assert_int_equal(registry_open(&ref, &t->o, &r, &e), 0);
    assert_int_equal(registry_get_manifest(r, "v1", &m, &e), -EPROTO);
    assert_non_null(strstr(e.text, "insecure_registries"));
    assert_int_equal(t->f->manifest_requests, 0);
    registry_free(r);

    char *insecure[] = {host, NULL};
    t->o.insecure = insecure;
    assert_int_equal(registry_open(&ref, &t->o, &r, &e), 0);
    assert_int_equal(registry_get_manifest(r, "v1", &m, &e), 0);
    registry_manifest_done(&m);
    registry_free(r);
    image_ref_done(&ref);

    /* The node cache's service: a loopback registry too only when listed. */
    t->o.insecure = NULL;
    t->o.loopback_needs_listing = true;
    unsigned before = t->f->manifest_requests;
    assert_int_equal(registry_open(&t->ref, &t->o, &r, &e), 0);
    assert_int_equal(registry_get_manifest(r, "v1", &m, &e), -EPROTO);
    assert_int_equal(t->f->manifest_requests, before);
    registry_free(r);
    snprintf(host, sizeof(host), "%s", t->ref.registry);
    t->o.insecure = insecure;
    assert_int_equal(registry_open(&t->ref, &t->o, &r, &e), 0);
    assert_int_equal(registry_get_manifest(r, "v1", &m, &e), 0);
    registry_manifest_done(&m);
    registry_free(r);
}

static void test_registry_down(void **state)
{
    struct tctx *t = *state;
    uint16_t port = t->f->port;
    http_server_free(t->f->srv);
    t->f->srv = NULL;
    t->o.retries = 1;
    _cleanup_(registry_freep) struct registry *r = open_reg(t);
    struct registry_manifest m = {0};
    struct errmsg e = {{0}};
    int k = registry_get_manifest(r, "v1", &m, &e);
    assert_int_equal(k, -ECONNREFUSED);
    char want[64];
    snprintf(want, sizeof(want), "cannot reach registry 127.0.0.1:%u", port);
    assert_non_null(strstr(e.text, want));
}

static void test_cancel(void **state)
{
    struct tctx *t = *state;
    char blob[100], d[DIGEST_STRING_MAX];
    fill(blob, sizeof(blob), 9);
    fake_blob(t->f, blob, sizeof(blob), d);
    _cleanup_(registry_freep) struct registry *r = open_reg(t);
    registry_cancel(r);
    struct errmsg e = {{0}};
    _cleanup_close_ int fd = tmpfile_fd();
    assert_int_equal(registry_get_blob(r, d, sizeof(blob), fd, 0, NULL, NULL, &e), -ECANCELED);
    assert_int_equal(t->f->blob_requests, 0);
}

/* ---- whole pulls ---- */

/* A gzip tar layer with one file (path, content), in memory. */
static size_t make_layer(const char *path, const char *content, char *out, size_t cap)
{
    struct archive *a = archive_write_new();
    size_t used = 0;
    assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    assert_int_equal(archive_write_add_filter_gzip(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_memory(a, out, cap, &used), ARCHIVE_OK);
    struct archive_entry *en = archive_entry_new();
    archive_entry_set_pathname(en, path);
    archive_entry_set_filetype(en, AE_IFREG);
    archive_entry_set_perm(en, 0644);
    archive_entry_set_size(en, (la_int64_t)strlen(content));
    assert_int_equal(archive_write_header(a, en), ARCHIVE_OK);
    assert_int_equal(archive_write_data(a, content, strlen(content)), (la_ssize_t)strlen(content));
    archive_entry_free(en);
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
    return used;
}

/* An image of n layers ("fileN" holding "layer N"), for arch, under tag (may be NULL). */
static void fake_image(struct fake *f, const char *tag, const char *arch, int n,
                       char manifest_digest[], char layer_digests[][DIGEST_STRING_MAX])
{
    char layers[2048] = "", diff_ids[2048] = "";
    for (int i = 0; i < n; i++) {
        char path[32], content[64], tarbuf[4096], d[DIGEST_STRING_MAX], entry[256];
        snprintf(path, sizeof(path), "file%d", i);
        snprintf(content, sizeof(content), "layer %d of %s\n", i, arch);
        size_t len = make_layer(path, content, tarbuf, sizeof(tarbuf));
        fake_blob(f, tarbuf, len, d);
        if (layer_digests)
            strcpy(layer_digests[i], d);
        snprintf(entry, sizeof(entry),
                 "%s{\"mediaType\":\"" MEDIA_OCI_LAYER_GZIP "\",\"digest\":\"%s\",\"size\":%zu}",
                 i ? "," : "", d, len);
        strcat(layers, entry);
        snprintf(entry, sizeof(entry), "%s\"%s\"", i ? "," : "", d); /* stand-in diff ids */
        strcat(diff_ids, entry);
    }
    char config[4096], cd[DIGEST_STRING_MAX], manifest[8192];
    snprintf(config, sizeof(config),
             "{\"architecture\":\"%s\",\"os\":\"linux\",\"config\":{\"Env\":[\"A=1\"]},"
             "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[%s]}}",
             arch, diff_ids);
    fake_blob(f, config, strlen(config), cd);
    snprintf(manifest, sizeof(manifest),
             "{\"schemaVersion\":2,\"mediaType\":\"" MEDIA_OCI_MANIFEST "\",\"config\":{"
             "\"mediaType\":\"" MEDIA_OCI_CONFIG "\",\"digest\":\"%s\",\"size\":%zu},"
             "\"layers\":[%s]}",
             cd, strlen(config), layers);
    fake_manifest(f, tag, manifest, MEDIA_OCI_MANIFEST, manifest_digest);
}

static struct store *open_store(struct tctx *t)
{
    char root[128];
    snprintf(root, sizeof(root), "%s/cache", t->dir);
    struct store *s = NULL;
    struct errmsg e = {{0}};
    assert_int_equal(store_open(root, &s, &e), 0);
    return s;
}

static void assert_layer_file(struct store *s, const char *digest, const char *path,
                              const char *content)
{
    _cleanup_free_ char *dir = NULL, *full = NULL;
    assert_int_equal(store_layer_path(s, digest, &dir), 0);
    assert_true(asprintf(&full, "%s/%s", dir, path) > 0);
    char buf[128] = "";
    FILE *fp = fopen(full, "re");
    if (!fp)
        fail_msg("%s: %m", full);
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    assert_string_equal(buf, content);
}

/* What a pull's events told, for a display of the caller's. */
struct told {
    pthread_mutex_t lock;
    size_t layers_calls, n;
    char ids[8][13];
    int64_t bytes[8];
    enum pull_layer_state state[8];
};

static void told_layers(void *userdata, size_t n, const char *const *ids, const int64_t *sizes)
{
    struct told *t = userdata;
    t->layers_calls++;
    t->n = n;
    for (size_t i = 0; i < n && i < 8; i++)
        snprintf(t->ids[i], sizeof(t->ids[i]), "%s", ids[i]);
    assert_true(sizes[0] > 0);
}

static void told_bytes(void *userdata, size_t i, int64_t done, int64_t total)
{
    struct told *t = userdata;
    pthread_mutex_lock(&t->lock);
    assert_true(i < t->n && done <= total);
    t->bytes[i] = done;
    pthread_mutex_unlock(&t->lock);
}

static void told_state(void *userdata, size_t i, enum pull_layer_state state)
{
    struct told *t = userdata;
    pthread_mutex_lock(&t->lock);
    assert_true(i < t->n);
    t->state[i] = state;
    pthread_mutex_unlock(&t->lock);
}

static void test_pull_image(void **state)
{
    struct tctx *t = *state;
    char md[DIGEST_STRING_MAX], ld[5][DIGEST_STRING_MAX];
    fake_image(t->f, "v1", pull_host_architecture(), 5, md, ld);
    _cleanup_(store_freep) struct store *s = open_store(t);
    struct told told = {.lock = PTHREAD_MUTEX_INITIALIZER};
    struct pull_events ev = {told_layers, told_bytes, told_state, &told};
    struct pull_opts o = {.registry = t->o, .parallel = 3, .events = &ev};
    struct image_record rec = {0};
    struct errmsg e = {{0}};
    int k = pull_image(s, &t->ref, &o, &rec, &e);
    if (k < 0)
        fail_msg("pull: %d %s", k, e.text);
    /* The caller heard of the five layers once, by their short ids, and of each one's bytes
     * and its end. */
    assert_int_equal(told.layers_calls, 1);
    assert_int_equal(told.n, 5);
    for (int i = 0; i < 5; i++) {
        assert_memory_equal(told.ids[i], ld[i] + strlen("sha256:"), 12);
        assert_true(told.bytes[i] > 0);
        assert_int_equal(told.state[i], PULL_LAYER_DONE);
    }
    assert_string_equal(rec.manifest_digest, md);
    assert_int_equal(rec.n_layers, 5);
    char want[64];
    for (int i = 0; i < 5; i++) {
        assert_string_equal(rec.layers[i], ld[i]);
        assert_true(store_has_layer(s, ld[i]));
        assert_false(store_has_blob(s, ld[i])); /* dropped once unpacked */
        char path[16];
        snprintf(path, sizeof(path), "file%d", i);
        snprintf(want, sizeof(want), "layer %d of %s\n", i, pull_host_architecture());
        assert_layer_file(s, ld[i], path, want);
    }
    assert_true(store_has_blob(s, md));
    struct image_record loaded = {0};
    assert_int_equal(store_image_load(s, rec.name, &loaded, &e), 0);
    assert_string_equal(loaded.config_digest, rec.config_digest);
    image_record_done(&loaded);
    image_record_done(&rec);

    /* A second pull fetches no layer again, and says so. */
    unsigned before = t->f->blob_requests;
    assert_int_equal(pull_image(s, &t->ref, &o, NULL, &e), 0);
    assert_int_equal(t->f->blob_requests, before);
    assert_int_equal(told.layers_calls, 2);
    for (int i = 0; i < 5; i++)
        assert_int_equal(told.state[i], PULL_LAYER_EXISTS);
}

static void test_pull_index_picks_platform(void **state)
{
    struct tctx *t = *state;
    char amd[DIGEST_STRING_MAX], arm[DIGEST_STRING_MAX], idx[1024];
    char amd_layer[1][DIGEST_STRING_MAX], arm_layer[1][DIGEST_STRING_MAX];
    fake_image(t->f, NULL, "amd64", 1, amd, amd_layer);
    fake_image(t->f, NULL, "arm64", 1, arm, arm_layer);
    size_t amd_len = find(t->f->manifests, t->f->n_manifests, amd)->len;
    size_t arm_len = find(t->f->manifests, t->f->n_manifests, arm)->len;
    snprintf(idx, sizeof(idx),
             "{\"schemaVersion\":2,\"mediaType\":\"" MEDIA_OCI_INDEX "\",\"manifests\":["
             "{\"mediaType\":\"" MEDIA_OCI_MANIFEST "\",\"digest\":\"%s\",\"size\":%zu,"
             "\"platform\":{\"os\":\"linux\",\"architecture\":\"arm64\",\"variant\":\"v8\"}},"
             "{\"mediaType\":\"" MEDIA_OCI_MANIFEST "\",\"digest\":\"%s\",\"size\":%zu,"
             "\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}}]}",
             arm, arm_len, amd, amd_len);
    fake_manifest(t->f, "v1", idx, MEDIA_OCI_INDEX, NULL);
    _cleanup_(store_freep) struct store *s = open_store(t);
    struct pull_opts o = {.registry = t->o, .architecture = "amd64"};
    struct image_record rec = {0};
    struct errmsg e = {{0}};
    assert_int_equal(pull_image(s, &t->ref, &o, &rec, &e), 0);
    assert_string_equal(rec.manifest_digest, amd);
    assert_layer_file(s, amd_layer[0], "file0", "layer 0 of amd64\n");
    image_record_done(&rec);
    o.architecture = "arm64";
    assert_int_equal(pull_image(s, &t->ref, &o, &rec, &e), 0);
    assert_string_equal(rec.manifest_digest, arm);
    assert_layer_file(s, arm_layer[0], "file0", "layer 0 of arm64\n");
    image_record_done(&rec);
    o.architecture = "s390x";
    assert_int_equal(pull_image(s, &t->ref, &o, &rec, &e), -ENOENT);
    assert_non_null(strstr(e.text, "linux/arm64"));
}

static bool dir_empty(const char *root, const char *sub)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "test -z \"$(find %s/%s -mindepth 1 -not -type d)\"", root, sub);
    return system(cmd) == 0;
}

static void test_pull_tampered_layer_leaves_nothing(void **state)
{
    struct tctx *t = *state;
    char md[DIGEST_STRING_MAX], ld[3][DIGEST_STRING_MAX];
    fake_image(t->f, "v1", pull_host_architecture(), 3, md, ld);
    /* The registry's copy of layer 2 changes after the manifest was made. */
    struct fake_object *o = (struct fake_object *)find(t->f->blobs, t->f->n_blobs, ld[1]);
    o->data[o->len / 2] ^= 0x01;
    _cleanup_(store_freep) struct store *s = open_store(t);
    struct pull_opts o2 = {.registry = t->o, .parallel = 1};
    struct errmsg e = {{0}};
    assert_int_equal(pull_image(s, &t->ref, &o2, NULL, &e), -EBADMSG);
    assert_non_null(strstr(e.text, ld[1]));
    assert_false(store_has_layer(s, ld[1]));
    assert_false(store_has_blob(s, ld[1]));
    char root[128];
    snprintf(root, sizeof(root), "%s/cache", t->dir);
    assert_true(dir_empty(root, "tmp"));
    assert_true(dir_empty(root, "images"));
    /* The layer after it was not even started: a failure stops the pull. */
    assert_false(store_has_layer(s, ld[2]));
    struct image_record rec = {0};
    char *name = NULL;
    assert_int_equal(image_ref_format(&t->ref, &name), 0);
    assert_int_equal(store_image_load(s, name, &rec, &e), -ENOENT);
    free(name);
}

/* gc runs while a pull is between layers: it removes what nothing uses (an old stray layer) and
 * nothing the pull has stored, and the pull ends with its record and every layer. */
struct gc_meanwhile {
    struct store *s;
    const char *stray;
    int runs;
    struct store_gc_stats st;
    bool stray_gone;
};

static void gc_on_done(void *userdata, size_t i, enum pull_layer_state state)
{
    struct gc_meanwhile *g = userdata;
    if (state != PULL_LAYER_DONE || i != 0)
        return;
    struct errmsg e = {{0}};
    if (store_gc(g->s, NULL, &g->st, &e) == 0)
        g->runs++;
    g->stray_gone = !store_has_layer(g->s, g->stray);
}

static void test_pull_gc_meanwhile(void **state)
{
    struct tctx *t = *state;
    char md[DIGEST_STRING_MAX], ld[3][DIGEST_STRING_MAX], stray[DIGEST_STRING_MAX];
    fake_image(t->f, "v1", pull_host_architecture(), 3, md, ld);
    _cleanup_(store_freep) struct store *s = open_store(t);
    /* A layer left by an image since removed. */
    char tarbuf[4096];
    size_t len = make_layer("old", "old\n", tarbuf, sizeof(tarbuf));
    digest_sha256(tarbuf, len, stray);
    struct errmsg e = {{0}};
    assert_int_equal(store_blob_write(s, stray, tarbuf, len, &e), 0);
    int make = -1;
    assert_int_equal(store_layer_make_lock(s, stray, &make, &e), 0);
    assert_int_equal(store_layer_unpack(s, stray, 0, false, &e), 0);
    close(make);
    assert_true(store_has_layer(s, stray));

    struct gc_meanwhile g = {.s = s, .stray = stray};
    struct pull_events ev = {.layer_state = gc_on_done, .userdata = &g};
    struct pull_opts o = {.registry = t->o, .parallel = 1, .events = &ev};
    struct image_record rec = {0};
    int k = pull_image(s, &t->ref, &o, &rec, &e);
    if (k < 0)
        fail_msg("pull: %d %s", k, e.text);
    assert_int_equal(g.runs, 1);
    assert_true(g.stray_gone);
    assert_int_equal(g.st.layers_removed, 1);
    assert_int_equal(g.st.layers_busy, 1); /* the pull's first layer */
    for (int i = 0; i < 3; i++)
        assert_true(store_has_layer(s, ld[i]));
    assert_true(store_has_blob(s, md));
    assert_true(store_has_blob(s, rec.config_digest));
    struct image_record loaded = {0};
    assert_int_equal(store_image_load(s, rec.name, &loaded, &e), 0);
    image_record_done(&loaded);
    image_record_done(&rec);
    /* And the next gc keeps it all: the record references it. */
    assert_int_equal(store_gc(s, NULL, &g.st, &e), 0);
    assert_int_equal(g.st.layers_removed, 0);
    for (int i = 0; i < 3; i++)
        assert_true(store_has_layer(s, ld[i]));
}

/* In a store of others' downloads (check_cached: the node cache's), bytes an unfinished pull
 * left, a whole blob or a whole partial download, count only once the registry vouches for
 * them to these credentials: a registry that no longer has the blob for them refuses, and
 * nothing is unpacked. */
static void pull_over_leftover(void **state, bool committed)
{
    struct tctx *t = *state;
    char md[DIGEST_STRING_MAX], ld[1][DIGEST_STRING_MAX];
    fake_image(t->f, "v1", pull_host_architecture(), 1, md, ld);
    _cleanup_(store_freep) struct store *s = open_store(t);
    struct fake_object *o = (struct fake_object *)find(t->f->blobs, t->f->n_blobs, ld[0]);
    struct errmsg e = {{0}};
    struct store_download dl = {.fd = -1, .lock_fd = -1};
    assert_int_equal(store_download_begin(s, ld[0], &dl, &e), 0);
    assert_int_equal(write(dl.fd, o->data, o->len), (ssize_t)o->len);
    if (committed) {
        assert_int_equal(store_download_commit(s, &dl, &e), 0);
        store_download_end(&dl);
    } else
        store_download_abort(&dl, true);
    strcpy(o->key, "gone");
    struct pull_opts po = {.registry = t->o, .parallel = 1, .check_cached = true};
    assert_int_equal(pull_image(s, &t->ref, &po, NULL, &e), -ENOENT);
    assert_false(store_has_layer(s, ld[0]));
    /* The registry has it for them: the bytes here are used. */
    strcpy(o->key, ld[0]);
    assert_int_equal(pull_image(s, &t->ref, &po, NULL, &e), 0);
    assert_true(store_has_layer(s, ld[0]));
}

static void test_leftover_blob_needs_vouching(void **state)
{
    pull_over_leftover(state, true);
}

static void test_leftover_partial_needs_vouching(void **state)
{
    pull_over_leftover(state, false);
}

/* Open descriptors of this process, for the test below. */
static int open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    while (d && readdir(d))
        n++;
    if (d)
        closedir(d);
    return n;
}

static int most_fds;

static void count_fds(void *userdata, size_t i, enum pull_layer_state state)
{
    (void)userdata;
    (void)i;
    int n = open_fds();
    if (state == PULL_LAYER_DONE || state == PULL_LAYER_EXISTS)
        most_fds = n > most_fds ? n : most_fds;
}

/* A pull holds each distinct layer once until its record: an image that lists one layer 600
 * times (the layer limit allows 1024) costs one descriptor for it, not 600. */
static void test_repeated_layer_held_once(void **state)
{
    struct tctx *t = *state;
    enum { N = 600 };
    char tarbuf[4096], d[DIGEST_STRING_MAX], cd[DIGEST_STRING_MAX];
    size_t len = make_layer("f", "x\n", tarbuf, sizeof(tarbuf));
    fake_blob(t->f, tarbuf, len, d);
    char *layers = calloc(N, 200), *diff = calloc(N, 80), *config = NULL, *manifest = NULL;
    assert_non_null(layers);
    assert_non_null(diff);
    for (int i = 0; i < N; i++) {
        char entry[256];
        snprintf(entry, sizeof(entry),
                 "%s{\"mediaType\":\"" MEDIA_OCI_LAYER_GZIP "\",\"digest\":\"%s\",\"size\":%zu}",
                 i ? "," : "", d, len);
        strcat(layers, entry);
        snprintf(entry, sizeof(entry), "%s\"%s\"", i ? "," : "", d);
        strcat(diff, entry);
    }
    assert_true(asprintf(&config,
                         "{\"architecture\":\"%s\",\"os\":\"linux\",\"rootfs\":{\"type\":"
                         "\"layers\",\"diff_ids\":[%s]}}",
                         pull_host_architecture(), diff) > 0);
    fake_blob(t->f, config, strlen(config), cd);
    assert_true(asprintf(&manifest,
                         "{\"schemaVersion\":2,\"mediaType\":\"" MEDIA_OCI_MANIFEST
                         "\",\"config\":{\"mediaType\":\"" MEDIA_OCI_CONFIG
                         "\",\"digest\":\"%s\",\"size\":%zu},\"layers\":[%s]}",
                         cd, strlen(config), layers) > 0);
    fake_manifest(t->f, "v1", manifest, MEDIA_OCI_MANIFEST, NULL);
    _cleanup_(store_freep) struct store *s = open_store(t);
    struct pull_events ev = {.layer_state = count_fds};
    struct pull_opts o = {.registry = t->o, .parallel = 4, .events = &ev};
    struct errmsg e = {{0}};
    int before = open_fds();
    most_fds = 0;
    int k = pull_image(s, &t->ref, &o, NULL, &e);
    if (k < 0)
        fail_msg("pull: %s", e.text);
    /* The four workers' own descriptors (connections, locks, the layer held): a few dozen. */
    assert_true(most_fds - before < 64);
    free(layers);
    free(diff);
    free(config);
    free(manifest);
}

int main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
    const struct CMUnitTest tests[] = {
        T(test_manifest_by_tag_and_digest),
        T(test_bearer_token_cached_and_expiring),
        T(test_bearer_with_credentials),
        T(test_basic_auth),
        T(test_fixed_authorization),
        T(test_blob_resume_with_range),
        T(test_blob_server_ignores_range),
        T(test_blob_short_bodies_resume),
        T(test_blob_digest_mismatch),
        T(test_transient_errors_retried),
        T(test_redirect_keeps_credentials_home),
        T(test_manifest_redirect),
        T(test_plain_http_needs_config),
        T(test_registry_down),
        T(test_cancel),
        T(test_pull_image),
        T(test_pull_index_picks_platform),
        T(test_pull_tampered_layer_leaves_nothing),
        T(test_pull_gc_meanwhile),
        T(test_leftover_blob_needs_vouching),
        T(test_leftover_partial_needs_vouching),
        T(test_repeated_layer_held_once),
    };
#undef T
    return test_run_cases(tests);
}
