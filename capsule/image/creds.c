/* Registry credentials from netrc-style files and Docker's config.json. */
#include "capsule/image/creds.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include <jansson.h>
#include <openssl/evp.h>

#include "lib/fileio.h"
#include "lib/macro.h"

#define CREDS_FILE_MAX (1u << 20)
/* A base64 "auth" value longer than this is not a user name and a token. */
#define AUTH_B64_MAX 16384

/* How well a name in a credentials file matches the registry host. */
enum match {
    MATCH_NONE,
    MATCH_DEFAULT,   /* netrc's "default" */
    MATCH_HOST_ONLY, /* "localhost" for "localhost:5000": curl's netrc ignores ports */
    MATCH_EXACT,
};

void creds_wipe_free(char *s)
{
    if (s) {
        explicit_bzero(s, strlen(s));
        free(s);
    }
}

static inline void wipe_freep(char **s)
{
    creds_wipe_free(*s);
}
#define _cleanup_wipe_ _cleanup_(wipe_freep)

void creds_done(struct creds *c)
{
    if (!c)
        return;
    creds_wipe_free(c->user);
    creds_wipe_free(c->password);
    c->user = c->password = NULL;
}

/* A name from a file as messages show it: bounded, control characters replaced. */
static const char *quote(const char *s, size_t n, char out[128])
{
    size_t i = 0;
    for (; i < n && s[i] && i < 100; i++)
        out[i] = ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) ? '?' : s[i];
    if (i < n && s[i]) {
        memcpy(out + i, "...", 3);
        i += 3;
    }
    out[i] = '\0';
    return out;
}

/* Docker Hub answers to several names; credentials stored under any of them apply to all. */
static bool is_docker_hub(const char *name, size_t n)
{
    static const char *const names[] = {"docker.io", "index.docker.io", "registry-1.docker.io",
                                        "auth.docker.io", "registry.hub.docker.com"};
    for (size_t i = 0; i < ELEMENTSOF(names); i++)
        if (strlen(names[i]) == n && strncasecmp(name, names[i], n) == 0)
            return true;
    return false;
}

static enum match host_match(const char *name, size_t n, const char *host)
{
    size_t hn = strlen(host);
    if (n == hn && strncasecmp(name, host, n) == 0)
        return MATCH_EXACT;
    if (is_docker_hub(name, n) && is_docker_hub(host, hn))
        return MATCH_EXACT;
    /* A port-less name covers every port of that host ("[::1]:5000" has its port after ']'). */
    const char *bracket = host[0] == '[' ? strchr(host, ']') : NULL;
    const char *port = bracket ? (bracket[1] == ':' ? bracket + 1 : NULL) : strrchr(host, ':');
    if (port && !memchr(name, ':', n) && (size_t)(port - host) == n &&
        strncasecmp(name, host, n) == 0)
        return MATCH_HOST_ONLY;
    return MATCH_NONE;
}

/* --- netrc --- */

struct token {
    const char *s;
    size_t n;
    unsigned line;
};

/* The next blank-separated token; '#' at the start of a line comments out the line. Returns
 * false at the end of the text. */
static bool next_token(const char *text, size_t len, size_t *pos, unsigned *line, struct token *t)
{
    size_t i = *pos;
    bool line_start = i == 0 || text[i - 1] == '\n';

    for (;;) {
        while (i < len && strchr(" \t\r\n\f\v", text[i]) && text[i]) {
            if (text[i] == '\n') {
                (*line)++;
                line_start = true;
            }
            i++;
        }
        if (i < len && line_start && text[i] == '#') {
            while (i < len && text[i] != '\n')
                i++;
            continue;
        }
        break;
    }
    if (i >= len) {
        *pos = i;
        return false;
    }
    t->s = text + i;
    t->line = *line;
    while (i < len && !(strchr(" \t\r\n\f\v", text[i]) && text[i]))
        i++;
    t->n = (size_t)(text + i - t->s);
    *pos = i;
    return true;
}

static bool token_is(const struct token *t, const char *word)
{
    return t->n == strlen(word) && memcmp(t->s, word, t->n) == 0;
}

struct netrc_entry {
    enum match match;
    unsigned line;
    struct token name, login, password;
    bool open, has_login, has_password;
};

struct netrc_parse {
    const char *name, *text, *host, *user;
    size_t len, pos;
    unsigned line;
    struct netrc_entry cur, best;
};

static void netrc_finish_entry(struct netrc_parse *p)
{
    struct netrc_entry *c = &p->cur;
    if (c->match == MATCH_NONE)
        return;
    if (p->user && (!c->has_login || c->login.n != strlen(p->user) ||
                    memcmp(c->login.s, p->user, c->login.n) != 0))
        return;
    /* The first of equally good entries wins, as in every netrc reader. */
    if (c->match > p->best.match)
        p->best = *c;
}

static int netrc_value(struct netrc_parse *p, const struct token *key, struct token *ret,
                       struct errmsg *e)
{
    if (!next_token(p->text, p->len, &p->pos, &p->line, ret))
        return errmsg_set(e, -EINVAL, "%s:%u: '%.*s' without a value", p->name, key->line,
                          (int)key->n, key->s);
    if (memchr(ret->s, '\0', ret->n))
        return errmsg_set(e, -EINVAL, "%s:%u: NUL byte in a value", p->name, ret->line);
    return 0;
}

static int netrc_keyword(struct netrc_parse *p, const struct token *t, struct errmsg *e)
{
    struct token v;
    int r;

    if (token_is(t, "machine") || token_is(t, "default")) {
        netrc_finish_entry(p);
        p->cur = (struct netrc_entry){.open = true, .match = MATCH_DEFAULT, .line = t->line};
        if (token_is(t, "default"))
            return 0;
        if ((r = netrc_value(p, t, &v, e)) < 0)
            return r;
        p->cur.name = v;
        p->cur.match = host_match(v.s, v.n, p->host);
        return 0;
    }
    if (token_is(t, "macdef"))
        return errmsg_set(e, -EINVAL,
                          "%s:%u: 'macdef' (FTP macros) has no place in a "
                          "credentials file",
                          p->name, t->line);
    bool login = token_is(t, "login"), password = token_is(t, "password");
    if (!login && !password && !token_is(t, "account"))
        /* The word is not shown: it may be a password that lost its keyword. netrc has no
         * quoting, so a password with blanks cannot be written in this format. */
        return errmsg_set(e, -EINVAL,
                          "%s:%u: unexpected word; expected machine, default, login, "
                          "password or account (netrc has no quoting: values cannot contain "
                          "blanks)",
                          p->name, t->line);
    if (!p->cur.open)
        return errmsg_set(e, -EINVAL, "%s:%u: '%.*s' before any 'machine' or 'default'", p->name,
                          t->line, (int)t->n, t->s);
    if ((r = netrc_value(p, t, &v, e)) < 0)
        return r;
    if (login) {
        p->cur.login = v;
        p->cur.has_login = true;
    } else if (password) {
        p->cur.password = v;
        p->cur.has_password = true;
    }
    return 0;
}

int creds_from_netrc(const char *name, const char *text, size_t len, const char *host,
                     const char *user, struct creds *ret, struct errmsg *e)
{
    struct netrc_parse p = {
        .name = name, .text = text, .host = host, .user = user, .len = len, .line = 1};
    struct token t;
    char q[128];
    int r;

    while (next_token(text, len, &p.pos, &p.line, &t))
        if ((r = netrc_keyword(&p, &t, e)) < 0)
            return r;
    netrc_finish_entry(&p);
    if (p.best.match == MATCH_NONE)
        return 0;
    if (!p.best.has_login || !p.best.has_password)
        return errmsg_set(e, -EINVAL, "%s:%u: '%s' has no %s", name, p.best.line,
                          p.best.name.s ? quote(p.best.name.s, p.best.name.n, q) : "default",
                          p.best.has_login ? "password" : "login");
    struct creds c = {strndup(p.best.login.s, p.best.login.n),
                      strndup(p.best.password.s, p.best.password.n)};
    if (!c.user || !c.password) {
        creds_done(&c);
        return -ENOMEM;
    }
    *ret = c;
    return 1;
}

/* --- Docker's config.json --- */

/* "https://index.docker.io/v1/" -> "index.docker.io": the host part of an auths key. */
static void key_host(const char *key, const char **ret, size_t *ret_n)
{
    if (strncasecmp(key, "https://", 8) == 0)
        key += 8;
    else if (strncasecmp(key, "http://", 7) == 0)
        key += 7;
    *ret = key;
    *ret_n = strcspn(key, "/");
}

static bool key_matches(const char *key, const char *host)
{
    const char *h;
    size_t n;
    key_host(key, &h, &n);
    return host_match(h, n, host) == MATCH_EXACT;
}

/* Standard base64 with padding, as Docker writes it, into "user" and "password" split at the
 * first ':' (passwords may contain ':', user names may not). */
static int decode_auth(const char *b64, struct creds *ret)
{
    size_t n = strlen(b64);
    if (n == 0 || n % 4 != 0 || n > AUTH_B64_MAX)
        return -EINVAL;
    size_t pad = b64[n - 1] == '=' ? (b64[n - 2] == '=' ? 2 : 1) : 0;
    if (strspn(b64, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") != n - pad)
        return -EINVAL;
    _cleanup_wipe_ char *out = calloc(1, n / 4 * 3 + 1);
    if (!out)
        return -ENOMEM;
    int k = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)b64, (int)n);
    if (k < (int)pad)
        return -EINVAL;
    size_t len = (size_t)k - pad;
    out[len] = '\0';
    char *colon = memchr(out, ':', len);
    if (memchr(out, '\0', len) || !colon)
        return -EBADMSG;
    struct creds c = {strndup(out, (size_t)(colon - out)), strdup(colon + 1)};
    if (!c.user || !c.password) {
        creds_done(&c);
        return -ENOMEM;
    }
    *ret = c;
    return 0;
}

static int entry_string(const char *name, const char *key, const json_t *entry, const char *field,
                        const char **ret, struct errmsg *e)
{
    char q[128];
    json_t *v = json_object_get(entry, field);
    *ret = NULL;
    if (!v || json_is_null(v))
        return 0;
    if (!json_is_string(v))
        return errmsg_set(e, -EINVAL, "%s: auths.\"%s\".%s: expected a string", name,
                          quote(key, SIZE_MAX, q), field);
    *ret = json_string_value(v);
    return 0;
}

/* One auths entry: 1 and *ret if it holds credentials, 0 if it holds none (Docker leaves "{}"
 * behind when a credential store has them), -EINVAL if it is malformed. */
static int parse_auth_entry(const char *name, const char *key, const json_t *entry,
                            struct creds *ret, struct errmsg *e)
{
    const char *auth, *user, *password;
    char q[128];
    int r;

    if (!json_is_object(entry))
        return errmsg_set(e, -EINVAL, "%s: auths.\"%s\": expected an object", name,
                          quote(key, SIZE_MAX, q));
    if ((r = entry_string(name, key, entry, "auth", &auth, e)) < 0 ||
        (r = entry_string(name, key, entry, "username", &user, e)) < 0 ||
        (r = entry_string(name, key, entry, "password", &password, e)) < 0)
        return r;
    if (auth && *auth) {
        r = decode_auth(auth, ret);
        if (r == -ENOMEM)
            return r;
        if (r == -EBADMSG)
            return errmsg_set(e, -EINVAL,
                              "%s: auths.\"%s\".auth: the decoded value is not "
                              "\"user:password\"",
                              name, quote(key, SIZE_MAX, q));
        if (r < 0)
            return errmsg_set(e, -EINVAL, "%s: auths.\"%s\".auth: not valid base64", name,
                              quote(key, SIZE_MAX, q));
        return 1;
    }
    if (user && *user && password) {
        struct creds c = {strdup(user), strdup(password)};
        if (!c.user || !c.password) {
            creds_done(&c);
            return -ENOMEM;
        }
        *ret = c;
        return 1;
    }
    return 0;
}

/* Why nothing was found although Docker would find something: a credential helper holds it. */
static void note_helper(const char *name, const json_t *root, const char *host, struct errmsg *e)
{
    const char *helper = NULL, *where = NULL, *k;
    json_t *v;

    json_t *helpers = json_object_get(root, "credHelpers");
    if (json_is_object(helpers))
        json_object_foreach(helpers, k, v) if (key_matches(k, host) && json_is_string(v))
        {
            helper = json_string_value(v);
            where = "credHelpers";
            break;
        }
    json_t *store = json_object_get(root, "credsStore");
    if (!helper && json_is_string(store) && *json_string_value(store)) {
        helper = json_string_value(store);
        where = "credsStore";
    }
    if (!helper)
        return;
    char qh[128], qhost[128];
    errmsg_set(e, 0,
               "%s: credentials for %s are kept by docker-credential-%s (%s), which capsule "
               "does not run; put them in a netrc-style file such as "
               "~/.config/capsule/credentials: machine %s login USER password SECRET",
               name, quote(host, SIZE_MAX, qhost), quote(helper, SIZE_MAX, qh), where, qhost);
}

int creds_from_docker_config(const char *name, const char *text, size_t len, const char *host,
                             const char *user, struct creds *ret, struct errmsg *e)
{
    json_error_t err;
    const char *key;
    json_t *entry;
    int r;

    json_auto_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!root) {
        /* jansson quotes the token it stopped at ("':' expected near '\"hunter2\"'"): in this
         * file that can be a password or a token, which must not reach a terminal or a log. */
        char *near = strstr(err.text, " near ");
        if (near)
            *near = '\0';
        return errmsg_set(e, -EINVAL, "%s: not valid JSON: %s (line %d, column %d)", name, err.text,
                          err.line, err.column);
    }
    if (!json_is_object(root))
        return errmsg_set(e, -EINVAL, "%s: expected a JSON object", name);
    json_t *auths = json_object_get(root, "auths");
    if (auths && !json_is_object(auths) && !json_is_null(auths))
        return errmsg_set(e, -EINVAL, "%s: auths: expected an object", name);
    if (json_is_object(auths))
        json_object_foreach(auths, key, entry)
        {
            struct creds c = {};
            if (!key_matches(key, host))
                continue;
            if ((r = parse_auth_entry(name, key, entry, &c, e)) < 0)
                return r;
            if (r == 0)
                continue;
            if (user && strcmp(c.user, user) != 0) {
                creds_done(&c);
                continue;
            }
            *ret = c;
            return 1;
        }
    note_helper(name, root, host, e);
    return 0;
}

/* --- files --- */

/* Reads a whole credentials file: 1 and *ret (NUL-terminated), 0 if it does not exist. */
static int read_file(const char *path, char **ret, size_t *ret_len, struct errmsg *e)
{
    struct stat st;

    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR)
            return 0;
        int r = negative_errno();
        return errmsg_set(e, r, "cannot open %s: %s", path, strerror(-r));
    }
    if (fstat(fd, &st) < 0) {
        int r = negative_errno();
        return errmsg_set(e, r, "cannot read %s: %s", path, strerror(-r));
    }
    if (!S_ISREG(st.st_mode))
        return errmsg_set(e, -EINVAL, "%s is not a regular file", path);
    if (st.st_size > (off_t)CREDS_FILE_MAX)
        return errmsg_set(e, -EFBIG,
                          "%s: %lld bytes is too large for a credentials file "
                          "(1 MiB at most)",
                          path, (long long)st.st_size);
    size_t size = (size_t)st.st_size, len = 0;
    char *buf = malloc(size + 1);
    if (!buf)
        return -ENOMEM;
    /* The file may change while it is read: stop at the size fstat() saw. */
    int r = fd_read_up_to(fd, buf, size, &len);
    if (r < 0) {
        explicit_bzero(buf, size);
        free(buf);
        return errmsg_set(e, r, "cannot read %s: %s", path, strerror(-r));
    }
    buf[len] = '\0';
    *ret = buf;
    *ret_len = len;
    return 1;
}

static int lookup_file(const char *path, bool netrc, const char *host, const char *user,
                       struct creds *ret, struct errmsg *e)
{
    char *text = NULL;
    size_t len = 0;

    if (!path)
        return 0;
    int r = read_file(path, &text, &len, e);
    if (r <= 0)
        return r;
    r = netrc ? creds_from_netrc(path, text, len, host, user, ret, e)
              : creds_from_docker_config(path, text, len, host, user, ret, e);
    explicit_bzero(text, len);
    free(text);
    return r;
}

int creds_lookup(const char *netrc_path, const char *docker_config_path, const char *host,
                 const char *user, struct creds *ret, struct errmsg *e)
{
    int r;

    if (e)
        e->text[0] = '\0';
    if ((r = lookup_file(netrc_path, true, host, user, ret, e)) != 0)
        return r;
    return lookup_file(docker_config_path, false, host, user, ret, e);
}
