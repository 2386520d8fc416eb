/* WWW-Authenticate and token answers; see auth-challenge.h. */
#include "capsule/registry/auth-challenge.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "lib/macro.h"

/* Tokens longer than this are not something a registry hands out; JWTs are a few KiB. */
#define AUTH_TOKEN_MAX (64u * 1024u)
/* A year: an expiry beyond it is treated as this, so arithmetic on it cannot overflow. */
#define AUTH_EXPIRES_MAX     (366 * 24 * 3600)
#define AUTH_EXPIRES_DEFAULT 60

static bool is_tchar(char c)
{
    return isalnum((unsigned char)c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

static bool is_token68_char(char c)
{
    return isalnum((unsigned char)c) || (c && strchr("-._~+/", c));
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

struct parser {
    const char *s;
    size_t p;
    struct errmsg *e;
};

static void skip_ows(struct parser *ps)
{
    while (is_ows(ps->s[ps->p]))
        ps->p++;
}

static int parse_fail(struct parser *ps, const char *what)
{
    return errmsg_set(ps->e, -EINVAL, "WWW-Authenticate '%.80s%s': at offset %zu: %s", ps->s,
                      strlen(ps->s) > 80 ? "..." : "", ps->p, what);
}

/* Reads a token at the current position into a new string (lower-cased when asked). */
static int read_token(struct parser *ps, bool lower, char **ret)
{
    size_t start = ps->p;
    while (is_tchar(ps->s[ps->p]))
        ps->p++;
    if (ps->p == start)
        return -EINVAL;
    char *t = strndup(ps->s + start, ps->p - start);
    if (!t)
        return -ENOMEM;
    if (lower)
        for (char *c = t; *c; c++)
            *c = (char)tolower((unsigned char)*c);
    *ret = t;
    return 0;
}

/* Reads a quoted-string (the opening quote is at the current position), resolving escapes. */
static int read_quoted(struct parser *ps, char **ret)
{
    const char *s = ps->s;
    size_t p = ps->p + 1, n = 0;
    _cleanup_free_ char *out = malloc(strlen(s + p) + 1);
    if (!out)
        return -ENOMEM;
    for (;;) {
        char c = s[p];
        if (c == '\0') {
            ps->p = p;
            return parse_fail(ps, "unterminated quoted string");
        }
        if (c == '"')
            break;
        if (c == '\\') {
            c = s[++p];
            if (c == '\0')
                continue; /* reported as unterminated above */
        }
        if ((unsigned char)c < 0x20 && c != '\t') {
            ps->p = p;
            return parse_fail(ps, "control character in quoted string");
        }
        if (c == 0x7f) {
            ps->p = p;
            return parse_fail(ps, "control character in quoted string");
        }
        out[n++] = c;
        p++;
    }
    out[n] = '\0';
    ps->p = p + 1;
    *ret = TAKE_PTR(out);
    return 0;
}

/* True if a token68 starts at p: token68 characters, then '=' padding, then the end of the
 * challenge (end of input or a comma). "realm=x" is a parameter, "abc==" a token68. */
static bool token68_at(const char *s, size_t p)
{
    size_t start = p;
    while (is_token68_char(s[p]))
        p++;
    if (p == start)
        return false;
    while (s[p] == '=')
        p++;
    while (is_ows(s[p]))
        p++;
    return s[p] == '\0' || s[p] == ',';
}

/* True if an auth-param ("name BWS =") starts at p, rather than the next challenge's scheme. */
static bool param_at(const char *s, size_t p)
{
    size_t start = p;
    while (is_tchar(s[p]))
        p++;
    if (p == start)
        return false;
    while (is_ows(s[p]))
        p++;
    return s[p] == '=';
}

static void challenge_done(struct auth_challenge *c)
{
    for (size_t i = 0; i < c->n_params; i++) {
        free(c->params[i].name);
        free(c->params[i].value);
    }
    free(c->params);
    free(c->scheme);
    free(c->token68);
    *c = (struct auth_challenge){0};
}

static int parse_param(struct parser *ps, struct auth_challenge *c)
{
    _cleanup_free_ char *name = NULL, *value = NULL;
    int r;
    if (c->n_params >= AUTH_PARAMS_MAX)
        return errmsg_set(ps->e, -E2BIG, "WWW-Authenticate: more than %d parameters",
                          AUTH_PARAMS_MAX);
    r = read_token(ps, true, &name);
    if (r == -EINVAL)
        return parse_fail(ps, "expected a parameter name");
    if (r < 0)
        return r;
    skip_ows(ps);
    if (ps->s[ps->p] != '=')
        return parse_fail(ps, "expected '=' after a parameter name");
    ps->p++;
    skip_ows(ps);
    if (ps->s[ps->p] == '"')
        r = read_quoted(ps, &value);
    else if ((r = read_token(ps, false, &value)) == -EINVAL)
        return parse_fail(ps, "expected a token or a quoted string as parameter value");
    if (r < 0)
        return r;
    for (size_t i = 0; i < c->n_params; i++)
        if (strcmp(c->params[i].name, name) == 0)
            return parse_fail(ps, "parameter given twice");
    struct auth_param *np = realloc(c->params, (c->n_params + 1) * sizeof(*np));
    if (!np)
        return -ENOMEM;
    c->params = np;
    c->params[c->n_params++] = (struct auth_param){TAKE_PTR(name), TAKE_PTR(value)};
    return 0;
}

/* Parses the token68 or the parameter list after a scheme and its blank. */
static int parse_challenge_body(struct parser *ps, struct auth_challenge *c)
{
    const char *s = ps->s;
    if (token68_at(s, ps->p)) {
        size_t start = ps->p;
        while (is_token68_char(s[ps->p]) || s[ps->p] == '=')
            ps->p++;
        c->token68 = strndup(s + start, ps->p - start);
        return c->token68 ? 0 : -ENOMEM;
    }
    for (;;) {
        int r = parse_param(ps, c);
        if (r < 0)
            return r;
        skip_ows(ps);
        if (s[ps->p] != ',')
            return 0;
        /* A comma separates parameters and challenges alike: look past it to tell which. */
        size_t q = ps->p;
        while (s[q] == ',' || is_ows(s[q]))
            q++;
        if (!param_at(s, q))
            return 0;
        ps->p = q;
    }
}

static int parse_challenge(struct parser *ps, struct auth_challenge *ret)
{
    _cleanup_(challenge_done) struct auth_challenge c = {0};
    int r = read_token(ps, true, &c.scheme);
    if (r == -EINVAL)
        return parse_fail(ps, "expected an authentication scheme");
    if (r < 0)
        return r;
    char next = ps->s[ps->p];
    if (next != '\0' && next != ',' && !is_ows(next))
        return parse_fail(ps, "unexpected character after the scheme");
    skip_ows(ps);
    next = ps->s[ps->p];
    if (next != '\0' && next != ',') {
        r = parse_challenge_body(ps, &c);
        if (r < 0)
            return r;
    }
    *ret = c;
    c = (struct auth_challenge){0};
    return 0;
}

void auth_challenges_done(struct auth_challenges *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n; i++)
        challenge_done(&c->items[i]);
    free(c->items);
    *c = (struct auth_challenges){0};
}

int auth_challenges_parse(const char *header, struct auth_challenges *ret, struct errmsg *e)
{
    if (strlen(header) > AUTH_HEADER_MAX)
        return errmsg_set(e, -E2BIG, "WWW-Authenticate: longer than %d bytes", AUTH_HEADER_MAX);
    _cleanup_(auth_challenges_done) struct auth_challenges all = {0};
    struct parser ps = {.s = header, .e = e};
    for (;;) {
        while (header[ps.p] == ',' || is_ows(header[ps.p]))
            ps.p++;
        if (header[ps.p] == '\0')
            break;
        if (all.n >= AUTH_CHALLENGES_MAX)
            return errmsg_set(e, -E2BIG, "WWW-Authenticate: more than %d challenges",
                              AUTH_CHALLENGES_MAX);
        struct auth_challenge c;
        int r = parse_challenge(&ps, &c);
        if (r == -ENOMEM)
            return errmsg_set(e, r, "out of memory");
        if (r < 0)
            return r;
        struct auth_challenge *ni = realloc(all.items, (all.n + 1) * sizeof(*ni));
        if (!ni) {
            challenge_done(&c);
            return errmsg_set(e, -ENOMEM, "out of memory");
        }
        all.items = ni;
        all.items[all.n++] = c;
        skip_ows(&ps);
        if (header[ps.p] != '\0' && header[ps.p] != ',')
            return parse_fail(&ps, "expected ',' between challenges");
    }
    if (all.n == 0)
        return errmsg_set(e, -EINVAL, "WWW-Authenticate: no challenge given");
    *ret = all;
    all = (struct auth_challenges){0};
    return 0;
}

const struct auth_challenge *auth_challenges_find(const struct auth_challenges *c,
                                                  const char *scheme)
{
    for (size_t i = 0; i < c->n; i++)
        if (strcasecmp(c->items[i].scheme, scheme) == 0)
            return &c->items[i];
    return NULL;
}

const char *auth_challenge_param(const struct auth_challenge *c, const char *name)
{
    for (size_t i = 0; i < c->n_params; i++)
        if (strcasecmp(c->params[i].name, name) == 0)
            return c->params[i].value;
    return NULL;
}

/* A token goes into an Authorization header: printable ASCII without blanks only. */
static bool token_usable(const char *t)
{
    if (!*t || strlen(t) > AUTH_TOKEN_MAX)
        return false;
    for (const char *c = t; *c; c++)
        if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f)
            return false;
    return true;
}

static int token_expiry(json_t *v, int64_t *ret, struct errmsg *e)
{
    double d;
    if (!v || json_is_null(v)) {
        *ret = AUTH_EXPIRES_DEFAULT;
        return 0;
    }
    if (json_is_integer(v))
        d = (double)json_integer_value(v);
    else if (json_is_real(v))
        d = json_real_value(v);
    else
        return errmsg_set(e, -EINVAL, "token server answer: 'expires_in' is not a number");
    /* A token that claims no lifetime gets the spec's default rather than none at all. */
    if (!(d > 0))
        *ret = AUTH_EXPIRES_DEFAULT;
    else if (d > AUTH_EXPIRES_MAX)
        *ret = AUTH_EXPIRES_MAX;
    else
        *ret = (int64_t)d;
    if (*ret == 0)
        *ret = 1;
    return 0;
}

int auth_token_parse(const void *body, size_t len, struct auth_token *ret, struct errmsg *e)
{
    json_error_t jerr;
    json_t *root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return errmsg_set(e, -EINVAL, "token server answer: not JSON: %s (offset %d)", jerr.text,
                          jerr.position);
    int r;
    int64_t expires = 0;
    const char *tok = NULL;
    if (!json_is_object(root)) {
        r = errmsg_set(e, -EINVAL, "token server answer: not a JSON object");
        goto out;
    }
    tok = json_string_value(json_object_get(root, "token"));
    if (!tok || !*tok)
        tok = json_string_value(json_object_get(root, "access_token"));
    if (!tok || !*tok) {
        r = errmsg_set(e, -EINVAL, "token server answer: no 'token' or 'access_token'");
        goto out;
    }
    if (!token_usable(tok)) {
        r = errmsg_set(e, -EINVAL,
                       "token server answer: the token is empty, too long or not printable");
        goto out;
    }
    r = token_expiry(json_object_get(root, "expires_in"), &expires, e);
    if (r < 0)
        goto out;
    char *copy = strdup(tok);
    if (!copy) {
        r = errmsg_set(e, -ENOMEM, "out of memory");
        goto out;
    }
    *ret = (struct auth_token){.token = copy, .expires_in = expires};
    r = 0;
out:
    json_decref(root);
    return r;
}

void auth_token_done(struct auth_token *t)
{
    if (!t)
        return;
    if (t->token) {
        explicit_bzero(t->token, strlen(t->token));
        free(t->token);
    }
    *t = (struct auth_token){0};
}
