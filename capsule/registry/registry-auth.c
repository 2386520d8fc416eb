/* The registry client's credentials: Basic auth and Bearer tokens from the challenge's realm,
 * cached per scope until they expire. See registry.h. */
#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capsule/registry/auth-challenge.h"
#include "lib/clock.h"
#include "lib/macro.h"
#include "capsule/registry/registry-internal.h"

#define TOKEN_ANSWER_MAX (1024u * 1024u)
#define TOKEN_TIMEOUT_MS (60L * 1000L)

void registry_auth_done(struct registry *r)
{
    creds_done(&r->creds);
    creds_wipe_free(r->basic_header);
    creds_wipe_free(r->fixed_header);
    free(r->scope);
    for (size_t i = 0; i < r->n_tokens; i++) {
        free(r->tokens[i].scope);
        creds_wipe_free(r->tokens[i].header);
    }
    r->n_tokens = 0;
}

static const struct reg_token *token_find(const struct registry *r, const char *scope)
{
    for (size_t i = 0; i < r->n_tokens; i++)
        if (strcmp(r->tokens[i].scope, scope) == 0)
            return &r->tokens[i];
    return NULL;
}

int registry_auth_header(struct registry *r, char **ret, unsigned *ret_auth_gen)
{
    const char *h = NULL;
    pthread_mutex_lock(&r->lock);
    if (r->fixed_header)
        h = r->fixed_header;
    else if (r->basic_header)
        h = r->basic_header;
    else if (r->scope) {
        const struct reg_token *t = token_find(r, r->scope);
        if (t && (int64_t)clock_now_msec() < t->expires_ms)
            h = t->header;
    }
    *ret = h ? strdup(h) : NULL;
    *ret_auth_gen = r->auth_gen;
    pthread_mutex_unlock(&r->lock);
    return h && !*ret ? -ENOMEM : 0;
}

int registry_authorization(struct registry *r, char **ret)
{
    unsigned gen;
    return registry_auth_header(r, ret, &gen);
}

/* "FILE, FILE" for messages: where credentials were looked for. */
static void creds_files(const struct registry *r, char *buf, size_t size)
{
    if (r->netrc_path && r->docker_config_path)
        snprintf(buf, size, "%s, %s", r->netrc_path, r->docker_config_path);
    else if (r->netrc_path || r->docker_config_path)
        snprintf(buf, size, "%s", r->netrc_path ? r->netrc_path : r->docker_config_path);
    else
        snprintf(buf, size, "(no credentials file configured)");
}

/* Looks the credentials up once per client; called with the lock held. */
static int creds_load_locked(struct registry *r, struct errmsg *e)
{
    if (r->creds_loaded)
        return 0;
    int k = creds_lookup(r->netrc_path, r->docker_config_path, r->registry, r->user, &r->creds, e);
    if (k < 0)
        return k;
    r->have_creds = k > 0;
    r->creds_loaded = true;
    return 0;
}

int registry_access_denied(struct registry *r, const char *what, long status, struct errmsg *e)
{
    char files[600];
    creds_files(r, files, sizeof(files));
    pthread_mutex_lock(&r->lock);
    struct errmsg ce;
    bool have = creds_load_locked(r, &ce) >= 0 && r->have_creds;
    pthread_mutex_unlock(&r->lock);
    if (have)
        return errmsg_set(e, -EACCES,
                          "%s: access denied (HTTP %ld); the credentials for %s from %s were "
                          "rejected",
                          what, status, r->registry, files);
    return errmsg_set(e, -EACCES,
                      "%s: access denied (HTTP %ld); credentials for %s were not found in %s", what,
                      status, r->registry, files);
}

static int basic_header(const struct creds *c, char **ret)
{
    size_t ul = strlen(c->user), pl = strlen(c->password);
    size_t n = ul + 1 + pl;
    _cleanup_free_ char *plain = malloc(n + 1);
    _cleanup_free_ char *b64 = malloc(4 * ((n + 2) / 3) + 1);
    if (!plain || !b64)
        return -ENOMEM;
    snprintf(plain, n + 1, "%s:%s", c->user, c->password);
    EVP_EncodeBlock((unsigned char *)b64, (const unsigned char *)plain, (int)n);
    explicit_bzero(plain, n);
    int k = asprintf(ret, "Authorization: Basic %s", b64);
    explicit_bzero(b64, strlen(b64));
    return k < 0 ? -ENOMEM : 0;
}

/* Appends s percent-encoded (RFC 3986 unreserved characters stay) to buf. */
static int url_append_escaped(char *buf, size_t size, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t n = strlen(buf);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        bool keep = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '-' || c == '.' || c == '_' || c == '~';
        if (n + 4 >= size)
            return -E2BIG;
        if (keep)
            buf[n++] = (char)c;
        else {
            buf[n++] = '%';
            buf[n++] = hex[c >> 4];
            buf[n++] = hex[c & 15];
        }
    }
    buf[n] = '\0';
    return 0;
}

/* The host part of a URL's authority, without port: "http://a:5/x" -> "a". */
static void url_host(const char *url, char *out, size_t size, bool with_port)
{
    const char *p = strstr(url, "://");
    p = p ? p + 3 : url;
    size_t n = strcspn(p, "/?#");
    if (!with_port && p[0] != '[') {
        const char *colon = memchr(p, ':', n);
        if (colon)
            n = (size_t)(colon - p);
    }
    snprintf(out, size, "%.*s", (int)n, p);
}

/* Credentials go to the realm: only over HTTPS, unless the realm is local or was explicitly
 * allowed plain HTTP like the registry itself. */
static int realm_check(struct registry *r, const char *what, const char *realm, struct errmsg *e)
{
    if (strncmp(realm, "https://", 8) == 0)
        return 0;
    if (strncmp(realm, "http://", 7) != 0)
        return errmsg_set(e, -EPROTO,
                          "%s: the registry's token realm '%.200s' is not an http(s) "
                          "URL",
                          what, realm);
    char hostport[256], host[256], reg_host[256];
    url_host(realm, hostport, sizeof(hostport), true);
    url_host(realm, host, sizeof(host), false);
    url_host(r->api_host, reg_host, sizeof(reg_host), false);
    bool base_http = r->base_url && strncmp(r->base_url, "http://", 7) == 0;
    if (image_ref_is_loopback(hostport) || registry_host_listed(r, hostport) ||
        (base_http && strcmp(host, reg_host) == 0))
        return 0;
    return errmsg_set(e, -EPROTO,
                      "%s: the registry's token realm '%.200s' is plain HTTP; "
                      "refusing to send credentials there (list '%s' in insecure_registries "
                      "if that network is trusted)",
                      what, realm, hostport);
}

static int token_url(const struct auth_challenge *c, const char *scope, char *url, size_t size)
{
    const char *realm = auth_challenge_param(c, "realm");
    const char *service = auth_challenge_param(c, "service");
    if (snprintf(url, size, "%s", realm) >= (int)size)
        return -E2BIG;
    char sep = strchr(realm, '?') ? '&' : '?';
    size_t n = strlen(url);
    if (service) {
        if (n + 10 >= size)
            return -E2BIG;
        snprintf(url + n, size - n, "%cservice=", sep);
        sep = '&';
        if (url_append_escaped(url, size, service) < 0)
            return -E2BIG;
        n = strlen(url);
    }
    if (n + 8 >= size)
        return -E2BIG;
    snprintf(url + n, size - n, "%cscope=", sep);
    return url_append_escaped(url, size, scope);
}

/* GETs the token URL with retries for transient failures; lock held. */
static int token_request(struct registry *r, const char *url, struct http_response *resp,
                         struct errmsg *e)
{
    _cleanup_free_ char *auth = NULL;
    if (r->have_creds && basic_header(&r->creds, &auth) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    const char *headers[] = {"User-Agent: capsule/" GPUNODE_VERSION, "Accept: application/json",
                             auth, NULL};
    struct http_client_opts o = {
        .url = url,
        .headers = headers,
        .timeout_ms = TOKEN_TIMEOUT_MS,
        .connect_timeout_ms = r->connect_timeout_ms,
        .ca_file = r->ca_file,
        .max_body = TOKEN_ANSWER_MAX,
    };
    int k;
    for (unsigned attempt = 0;; attempt++) {
        http_response_done(resp);
        k = http_request_opts(&o, resp, e);
        bool transient =
            k < 0 ? registry_transient_errno(k) : registry_transient_status(resp->status);
        if (!transient || attempt >= r->retries)
            break;
        if (registry_backoff(r, attempt + 1, k < 0 ? NULL : resp) < 0) {
            k = errmsg_set(e, -ECANCELED, "cancelled");
            break;
        }
    }
    if (auth)
        explicit_bzero(auth, strlen(auth));
    return k;
}

static int token_store(struct registry *r, const char *scope, const struct auth_token *t)
{
    _cleanup_free_ char *sc = strdup(scope), *header = NULL;
    if (!sc || asprintf(&header, "Authorization: Bearer %s", t->token) < 0)
        return -ENOMEM;
    int64_t life = t->expires_in * 1000;
    int64_t margin = life / 10 < 10000 ? life / 10 : 10000;
    struct reg_token nt = {TAKE_PTR(sc), TAKE_PTR(header),
                           (int64_t)clock_now_msec() + life - margin};
    size_t slot = r->n_tokens;
    for (size_t i = 0; i < r->n_tokens; i++)
        if (strcmp(r->tokens[i].scope, scope) == 0 ||
            (slot == r->n_tokens && r->tokens[i].expires_ms <= (int64_t)clock_now_msec()))
            slot = i;
    if (slot == REG_TOKENS_MAX)
        slot = 0; /* full of live tokens for other scopes: drop the oldest */
    if (slot < r->n_tokens) {
        free(r->tokens[slot].scope);
        creds_wipe_free(r->tokens[slot].header);
    } else
        r->n_tokens++;
    r->tokens[slot] = nt;
    return 0;
}

static int token_refused(struct registry *r, const char *what, const char *realm, long status,
                         struct errmsg *e)
{
    char files[600];
    creds_files(r, files, sizeof(files));
    if (r->have_creds)
        return errmsg_set(e, -EACCES,
                          "%s: the token server %.200s rejected the credentials for "
                          "%s from %s (HTTP %ld)",
                          what, realm, r->registry, files, status);
    return errmsg_set(e, -EACCES,
                      "%s: the token server %.200s refused anonymous access (HTTP "
                      "%ld); credentials for %s were not found in %s",
                      what, realm, status, r->registry, files);
}

/* Fetches a token for the challenge and caches it; lock held. */
static int bearer_locked(struct registry *r, const char *what, const struct auth_challenge *c,
                         struct errmsg *e)
{
    const char *realm = auth_challenge_param(c, "realm");
    if (!realm || !*realm)
        return errmsg_set(e, -EACCES, "%s: the registry's Bearer challenge names no realm", what);
    int k = realm_check(r, what, realm, e);
    if (k < 0)
        return k;
    _cleanup_free_ char *def_scope = NULL;
    const char *scope = auth_challenge_param(c, "scope");
    if (!scope) {
        if (asprintf(&def_scope, "repository:%s:pull", r->repository) < 0)
            return errmsg_set(e, -ENOMEM, "out of memory");
        scope = def_scope;
    }
    if ((k = creds_load_locked(r, e)) < 0)
        return k;
    char url[4096];
    if (token_url(c, scope, url, sizeof(url)) < 0)
        return errmsg_set(e, -EINVAL, "%s: the token realm URL is too long", what);
    struct http_response resp = {0};
    k = token_request(r, url, &resp, e);
    if (k < 0)
        return errmsg_prefix(e, k, "%s: token server", what);
    if (resp.status == 401 || resp.status == 403)
        k = token_refused(r, what, realm, resp.status, e);
    else if (resp.status != 200)
        k = errmsg_set(e, -EIO, "%s: the token server %.200s answered HTTP %ld", what, realm,
                       resp.status);
    struct auth_token t = {0};
    if (k >= 0 && (k = auth_token_parse(resp.body, resp.body_len, &t, e)) < 0)
        errmsg_prefix(e, k, "%s", what);
    http_response_done(&resp);
    if (k >= 0 && (k = token_store(r, scope, &t)) < 0)
        k = errmsg_set(e, k, "out of memory");
    auth_token_done(&t);
    if (k < 0)
        return k;
    char *sc = strdup(scope);
    if (!sc)
        return errmsg_set(e, -ENOMEM, "out of memory");
    free(r->scope);
    r->scope = sc;
    return 0;
}

static int basic_locked(struct registry *r, const char *what, struct errmsg *e)
{
    int k = creds_load_locked(r, e);
    if (k < 0)
        return k;
    if (!r->have_creds)
        return 1; /* the caller words it, without the lock */
    char *h;
    if (basic_header(&r->creds, &h) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    creds_wipe_free(r->basic_header);
    r->basic_header = h;
    return 0;
}

int registry_authorize(struct registry *r, const char *what, const struct http_response *resp,
                       unsigned sent_gen, struct errmsg *e)
{
    char *header = malloc(AUTH_HEADER_MAX + 1);
    if (!header)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int k = http_response_header(resp, "WWW-Authenticate", header, AUTH_HEADER_MAX + 1);
    if (k < 0) {
        free(header);
        if (k == -ENOBUFS)
            return errmsg_set(e, -EACCES,
                              "%s: access denied (HTTP 401) with an oversized "
                              "authentication challenge",
                              what);
        return errmsg_set(e, -EACCES,
                          "%s: access denied (HTTP 401) without an authentication "
                          "challenge",
                          what);
    }
    struct auth_challenges ch = {0};
    k = auth_challenges_parse(header, &ch, e);
    free(header);
    if (k < 0)
        return errmsg_prefix(e, -EACCES, "%s: access denied (HTTP 401)", what);
    if (r->fixed_header) {
        /* Handed over by a requester: answering the challenge with anything else would lend the
         * requester credentials that are not theirs. */
        auth_challenges_done(&ch);
        /* Accepted before, refused now: a bearer token's lifetime has run out. The requester
         * can ask again with a new one (what was fetched stays). */
        if (atomic_load(&r->fixed_accepted))
            return errmsg_set(e, -EKEYEXPIRED,
                              "%s: the registry no longer accepts the requester's credentials "
                              "(HTTP 401): the token expired",
                              what);
        return errmsg_set(e, -EACCES,
                          "%s: access denied (HTTP 401) with the requester's credentials", what);
    }
    const struct auth_challenge *bearer = auth_challenges_find(&ch, "bearer");
    const struct auth_challenge *basic = auth_challenges_find(&ch, "basic");
    pthread_mutex_lock(&r->lock);
    if (r->auth_gen != sent_gen)
        k = 0; /* another thread answered a challenge meanwhile: try with what it got */
    else if (bearer)
        k = bearer_locked(r, what, bearer, e);
    else if (basic)
        k = basic_locked(r, what, e);
    else
        k = errmsg_set(e, -EACCES,
                       "%s: access denied (HTTP 401); the registry asks for '%s' "
                       "authentication, which capsule does not support",
                       what, ch.items[0].scheme);
    if (k == 0 && r->auth_gen == sent_gen)
        r->auth_gen++;
    pthread_mutex_unlock(&r->lock);
    auth_challenges_done(&ch);
    if (k == 1)
        return registry_access_denied(r, what, 401, e);
    return k;
}
