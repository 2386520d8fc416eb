/* Daemon configuration files on inih; see config.h. */
#include "lib/config.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ini.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "lib/fileio.h"

#define CONFIG_MAX_FILE (1024u * 1024u)
/* A duration longer than this is a mistake in units, not a real setting. */
#define DURATION_MAX_S (100.0 * 365.0 * 86400.0)

struct config_entry {
    char *section;
    char *key;
    char *value;
    unsigned line;
    bool used;
};

struct config {
    char *path;
    struct config_entry *entries;
    size_t n_entries;
    size_t allocated;
};

/* State shared by the line reader and the inih handler while one text is parsed. */
struct config_parse {
    struct config *config;
    const char *text;
    size_t len;
    size_t pos;
    unsigned line;     /* number of the line most recently handed to inih */
    unsigned err_line; /* first line our own checks rejected, 0 if none */
    int err;
    struct errmsg msg;
};

void config_free(struct config *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_entries; i++) {
        free(c->entries[i].section);
        free(c->entries[i].key);
        free(c->entries[i].value);
    }
    free(c->entries);
    free(c->path);
    free(c);
}

const char *config_path(const struct config *c)
{
    return c->path;
}

static struct config_entry *config_find(const struct config *c, const char *section,
                                        const char *key)
{
    for (size_t i = 0; i < c->n_entries; i++)
        if (strcmp(c->entries[i].section, section) == 0 && strcmp(c->entries[i].key, key) == 0)
            return &c->entries[i];
    return NULL;
}

/* Records the first error of a parse; later ones are consequences or less useful. */
static int parse_fail(struct config_parse *p, int r, unsigned line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int parse_fail(struct config_parse *p, int r, unsigned line, const char *fmt, ...)
{
    if (p->err < 0)
        return 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->msg.text, sizeof(p->msg.text), fmt, ap);
    va_end(ap);
    p->err = r;
    p->err_line = line;
    return 0;
}

static const char *section_label(const char *section, char *buf, size_t size)
{
    if (section[0] == '\0')
        return "(before any section)";
    snprintf(buf, size, "in [%s]", section);
    return buf;
}

static int config_add(struct config_parse *p, const char *section, const char *key,
                      const char *value)
{
    struct config *c = p->config;
    struct config_entry *old = config_find(c, section, key);
    if (old) {
        char label[96];
        return parse_fail(p, -EINVAL, p->line, "%s:%u: duplicate key '%s' %s, first set on line %u",
                          c->path, p->line, key, section_label(section, label, sizeof(label)),
                          old->line);
    }
    if (c->n_entries == c->allocated) {
        size_t n = c->allocated ? c->allocated * 2 : 16;
        struct config_entry *a = reallocarray(c->entries, n, sizeof(*a));
        if (!a)
            return parse_fail(p, -ENOMEM, p->line, "out of memory");
        c->entries = a;
        c->allocated = n;
    }
    struct config_entry *en = &c->entries[c->n_entries];
    *en = (struct config_entry){
        .section = strdup(section), .key = strdup(key), .value = strdup(value), .line = p->line};
    if (!en->section || !en->key || !en->value) {
        free(en->section);
        free(en->key);
        free(en->value);
        return parse_fail(p, -ENOMEM, p->line, "out of memory");
    }
    c->n_entries++;
    return 1;
}

static int config_ini_handler(void *user, const char *section, const char *name, const char *value)
{
    struct config_parse *p = user;
    if (p->err < 0)
        return 1; /* already failed; let inih run to the end quietly */
    /* inih passes value NULL only with INI_ALLOW_NO_VALUE, which Debian's build leaves off. */
    return config_add(p, section, name, value ? value : "");
}

/* fgets-style reader for inih over an in-memory text. It also counts lines (Debian's inih does
 * not pass line numbers to the handler), strips leading blanks so that indented keys are keys
 * rather than inih's continuation lines, and rejects lines inih would silently split. */
static char *config_ini_reader(char *buf, int num, void *stream)
{
    struct config_parse *p = stream;
    if (p->err < 0 || p->pos >= p->len || num < 3)
        return NULL;
    const char *start = p->text + p->pos;
    const char *nl = memchr(start, '\n', p->len - p->pos);
    size_t n = nl ? (size_t)(nl - start) : p->len - p->pos;
    p->pos += n + (nl ? 1 : 0);
    p->line++;

    if (memchr(start, '\0', n)) {
        parse_fail(p, -EINVAL, p->line, "%s:%u: NUL byte in line", p->config->path, p->line);
        return NULL;
    }
    while (n > 0 && (*start == ' ' || *start == '\t')) {
        start++;
        n--;
    }
    if (n > 0 && start[n - 1] == '\r')
        n--;
    if (n + 2 > (size_t)num) {
        parse_fail(p, -EINVAL, p->line, "%s:%u: line too long (at most %d bytes)", p->config->path,
                   p->line, num - 2);
        return NULL;
    }
    memcpy(buf, start, n);
    buf[n] = '\n';
    buf[n + 1] = '\0';
    return buf;
}

int config_load_string(const char *name, const char *text, size_t len, struct config **ret,
                       struct errmsg *e)
{
    _cleanup_(config_freep) struct config *c = calloc(1, sizeof(*c));
    if (!c)
        return errmsg_set(e, -ENOMEM, "out of memory");
    c->path = strdup(name);
    if (!c->path)
        return errmsg_set(e, -ENOMEM, "out of memory");

    struct config_parse p = {.config = c, .text = text, .len = len};
    int syntax_line = ini_parse_stream(config_ini_reader, &p, config_ini_handler, &p);
    if (syntax_line == -2)
        return errmsg_set(e, -ENOMEM, "out of memory");
    /* inih reports a line our handler refused as an error line too; report whichever problem
     * comes first in the file, with our more specific message when both name the same line. */
    if (p.err < 0 && (syntax_line <= 0 || p.err_line <= (unsigned)syntax_line))
        return errmsg_set(e, p.err, "%s", p.msg.text);
    if (syntax_line > 0)
        return errmsg_set(e, -EINVAL, "%s:%d: syntax error", c->path, syntax_line);

    *ret = TAKE_PTR(c);
    return 0;
}

int config_load(const char *path, struct config **ret, struct errmsg *e)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = file_read_text(path, CONFIG_MAX_FILE, &text, &len, e);
    if (r < 0)
        return r;
    return config_load_string(path, text, len, ret, e);
}

bool config_has_section(const struct config *c, const char *section)
{
    for (size_t i = 0; i < c->n_entries; i++)
        if (strcmp(c->entries[i].section, section) == 0)
            return true;
    return false;
}

const char *config_next_section(const struct config *c, const char *prev)
{
    size_t i = 0;
    if (prev) {
        /* Skip to the first entry of prev's section, then past every entry of sections that
         * appeared before or at it. */
        size_t first = c->n_entries;
        for (size_t j = 0; j < c->n_entries; j++)
            if (strcmp(c->entries[j].section, prev) == 0) {
                first = j;
                break;
            }
        i = first + 1;
    }
    for (; i < c->n_entries; i++) {
        const char *s = c->entries[i].section;
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = strcmp(c->entries[j].section, s) == 0;
        if (!seen)
            return s;
    }
    return NULL;
}

const char *config_next_key(const struct config *c, const char *section, const char *prev)
{
    size_t i = 0;
    if (prev) {
        const struct config_entry *en = config_find(c, section, prev);
        if (!en)
            return NULL;
        i = (size_t)(en - c->entries) + 1;
    }
    for (; i < c->n_entries; i++)
        if (strcmp(c->entries[i].section, section) == 0)
            return c->entries[i].key;
    return NULL;
}

const char *config_get(struct config *c, const char *section, const char *key)
{
    struct config_entry *en = config_find(c, section, key);
    if (!en)
        return NULL;
    en->used = true;
    return en->value;
}

unsigned config_line(const struct config *c, const char *section, const char *key)
{
    const struct config_entry *en = config_find(c, section, key);
    return en ? en->line : 0;
}

int config_get_string(struct config *c, const char *sec, const char *key, const char *def,
                      const char **ret)
{
    const char *v = config_get(c, sec, key);
    *ret = v ? v : def;
    return v ? 1 : 0;
}

/* Fails with "file:line: [section] key: <message>". */
static int value_error(const struct config *c, const char *sec, const char *key, struct errmsg *e,
                       int r, const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int value_error(const struct config *c, const char *sec, const char *key, struct errmsg *e,
                       int r, const char *fmt, ...)
{
    if (!e)
        return r;
    char what[ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    unsigned line = config_line(c, sec, key);
    if (sec[0])
        return errmsg_set(e, r, "%s:%u: [%s] %s: %s", c->path, line, sec, key, what);
    return errmsg_set(e, r, "%s:%u: %s: %s", c->path, line, key, what);
}

/* strtoul() accepts blanks, signs and octal; a config value must be plain decimal or 0x hex. */
static int parse_ulong(const char *s, unsigned long *ret)
{
    int base = 10;
    const char *digits = s;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        digits = s + 2;
    }
    if (!isxdigit((unsigned char)digits[0]) || (base == 10 && !isdigit((unsigned char)digits[0])))
        return -EINVAL;
    char *end;
    errno = 0;
    unsigned long v = strtoul(digits, &end, base);
    if (*end != '\0')
        return -EINVAL;
    if (errno == ERANGE)
        return -ERANGE;
    *ret = v;
    return 0;
}

int config_get_uint(struct config *c, const char *sec, const char *key, unsigned long def,
                    unsigned long min, unsigned long max, unsigned long *ret, struct errmsg *e)
{
    const char *v = config_get(c, sec, key);
    if (!v) {
        *ret = def;
        return 0;
    }
    unsigned long n;
    int r = parse_ulong(v, &n);
    if (r == -EINVAL)
        return value_error(c, sec, key, e, r, "'%s' is not a non-negative integer", v);
    if (r < 0 || n < min || n > max)
        return value_error(c, sec, key, e, -ERANGE, "%s is out of range %lu..%lu", v, min, max);
    *ret = n;
    return 1;
}

int config_get_bool(struct config *c, const char *sec, const char *key, bool def, bool *ret,
                    struct errmsg *e)
{
    static const char *const yes[] = {"yes", "true", "1", "on"};
    static const char *const no[] = {"no", "false", "0", "off"};
    const char *v = config_get(c, sec, key);
    if (!v) {
        *ret = def;
        return 0;
    }
    for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
        if (strcasecmp(v, yes[i]) == 0) {
            *ret = true;
            return 1;
        }
        if (strcasecmp(v, no[i]) == 0) {
            *ret = false;
            return 1;
        }
    }
    return value_error(c, sec, key, e, -EINVAL,
                       "'%s' is not a boolean (yes/no, true/false, on/off, 1/0)", v);
}

int config_get_duration(struct config *c, const char *sec, const char *key, double def_s,
                        double *ret_s, struct errmsg *e)
{
    const char *v = config_get(c, sec, key);
    if (!v) {
        *ret_s = def_s;
        return 0;
    }
    double d;
    int r = parse_duration(v, &d);
    if (r == -ERANGE)
        return value_error(c, sec, key, e, r, "duration '%s' is too long", v);
    if (r < 0)
        return value_error(c, sec, key, e, r,
                           "'%s' is not a duration (like 30, 1.5s, 500ms, 2m, 1h)", v);
    *ret_s = d;
    return 1;
}

int config_get_size(struct config *c, const char *sec, const char *key, uint64_t def, uint64_t *ret,
                    struct errmsg *e)
{
    const char *v = config_get(c, sec, key);
    if (!v) {
        *ret = def;
        return 0;
    }
    uint64_t n;
    int r = parse_size(v, &n);
    if (r == -ERANGE)
        return value_error(c, sec, key, e, r, "size '%s' is too large", v);
    if (r < 0)
        return value_error(c, sec, key, e, r,
                           "'%s' is not a size (like 4096, 512M, 64G, 1T: powers of 1024)", v);
    *ret = n;
    return 1;
}

int config_check_unused(struct config *c, struct errmsg *e)
{
    for (size_t i = 0; i < c->n_entries; i++) {
        const struct config_entry *en = &c->entries[i];
        if (en->used)
            continue;
        char label[96];
        return errmsg_set(e, -EINVAL, "%s:%u: unknown key '%s' %s", c->path, en->line, en->key,
                          section_label(en->section, label, sizeof(label)));
    }
    return 0;
}

static const char *skip_blanks(const char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    return s;
}

int parse_duration(const char *s, double *ret_s)
{
    static const struct {
        const char *name;
        double seconds;
    } units[] = {
        {"", 1.0},   {"ms", 1e-3},  {"s", 1.0},    {"sec", 1.0},
        {"m", 60.0}, {"min", 60.0}, {"h", 3600.0}, {"d", 86400.0},
    };
    if (!s)
        return -EINVAL;
    s = skip_blanks(s);
    /* Digits are collected by hand: strtod() would also take signs, hex, exponents, "inf",
     * "nan" and a locale's decimal comma. */
    double mantissa = 0.0, scale = 1.0;
    size_t n_int = 0, n_frac = 0;
    for (; isdigit((unsigned char)*s); s++, n_int++)
        mantissa = mantissa * 10.0 + (*s - '0');
    if (n_int == 0)
        return -EINVAL;
    if (*s == '.') {
        /* One division at the end rounds once, so "0.3" is the double nearest 0.3; digits past
         * the ninth (below a nanosecond) are dropped. */
        for (s++; isdigit((unsigned char)*s); s++, n_frac++)
            if (n_frac < 9) {
                mantissa = mantissa * 10.0 + (*s - '0');
                scale *= 10.0;
            }
        if (n_frac == 0)
            return -EINVAL;
    }
    double v = mantissa / scale;
    s = skip_blanks(s);
    size_t ulen = 0;
    while (isalpha((unsigned char)s[ulen]))
        ulen++;
    if (*skip_blanks(s + ulen) != '\0')
        return -EINVAL;
    for (size_t i = 0; i < ELEMENTSOF(units); i++) {
        if (strlen(units[i].name) != ulen || strncmp(units[i].name, s, ulen) != 0)
            continue;
        double r = v * units[i].seconds;
        if (!isfinite(r) || r > DURATION_MAX_S)
            return -ERANGE;
        *ret_s = r;
        return 0;
    }
    return -EINVAL;
}

/* The power of 1024 a size unit stands for ("" and "B": 0, "K": 1, ... "P": 5), or -1. */
static int size_unit(const char *u, size_t len)
{
    static const char prefixes[] = "KMGTP";
    if (len == 0 || (len == 1 && (*u == 'B' || *u == 'b')))
        return 0;
    const char *p = strchr(prefixes, toupper((unsigned char)*u));
    if (!p || *u == '\0')
        return -1;
    /* "G", "GB", "GiB" (any case): all powers of 1024, as memory and disk tools mean them. */
    const char *rest = u + 1;
    size_t n = len - 1;
    if (n == 0 || (n == 1 && toupper((unsigned char)rest[0]) == 'B') ||
        (n == 2 && tolower((unsigned char)rest[0]) == 'i' &&
         toupper((unsigned char)rest[1]) == 'B'))
        return (int)(p - prefixes) + 1;
    return -1;
}

int parse_size(const char *s, uint64_t *ret)
{
    if (!s)
        return -EINVAL;
    s = skip_blanks(s);
    uint64_t v = 0;
    size_t digits = 0;
    bool overflow = false;
    for (; isdigit((unsigned char)*s); s++, digits++) {
        unsigned d = (unsigned)(*s - '0');
        if (v > (UINT64_MAX - d) / 10)
            overflow = true;
        v = v * 10 + d;
    }
    if (digits == 0)
        return -EINVAL;
    s = skip_blanks(s);
    size_t ulen = 0;
    while (isalpha((unsigned char)s[ulen]))
        ulen++;
    int power = size_unit(s, ulen);
    if (power < 0 || *skip_blanks(s + ulen) != '\0')
        return -EINVAL;
    for (int i = 0; i < power && !overflow; i++) {
        if (v > UINT64_MAX / 1024)
            overflow = true;
        v *= 1024;
    }
    if (overflow)
        return -ERANGE;
    *ret = v;
    return 0;
}

static bool valid_host_char(char ch, bool bracketed)
{
    if (isalnum((unsigned char)ch) || ch == '.' || ch == '-')
        return true;
    if (bracketed)
        return ch == ':' || ch == '%';
    return ch == '_';
}

static int parse_port(const char *s, const char *whole, uint16_t *ret, struct errmsg *e)
{
    if (*s == '\0')
        return errmsg_set(e, -EINVAL, "listen address '%s': missing port", whole);
    unsigned long port = 0;
    for (const char *p = s; *p; p++) {
        if (!isdigit((unsigned char)*p) || p - s >= 5)
            return errmsg_set(e, -EINVAL, "listen address '%s': port '%s' is not a number 0..65535",
                              whole, s);
        port = port * 10 + (unsigned long)(*p - '0');
    }
    if (port > 65535)
        return errmsg_set(e, -EINVAL, "listen address '%s': port %lu is above 65535", whole, port);
    *ret = (uint16_t)port;
    return 0;
}

int parse_listen_address(const char *s, char *host, size_t host_size, uint16_t *ret_port,
                         struct errmsg *e)
{
    if (!s)
        return errmsg_set(e, -EINVAL, "missing listen address");
    const char *h = s, *h_end, *colon;
    bool bracketed = s[0] == '[';
    if (bracketed) {
        h = s + 1;
        h_end = strchr(h, ']');
        if (!h_end || h_end == h)
            return errmsg_set(e, -EINVAL, "listen address '%s': unterminated or empty [address]",
                              s);
        colon = h_end + 1;
    } else {
        colon = strrchr(s, ':');
        if (!colon)
            return errmsg_set(e, -EINVAL, "listen address '%s': expected host:port", s);
        h_end = colon;
        if (memchr(s, ':', (size_t)(colon - s)))
            return errmsg_set(e, -EINVAL,
                              "listen address '%s': put an IPv6 address in brackets, "
                              "like [::1]:9420",
                              s);
    }
    if (*colon != ':')
        return errmsg_set(e, -EINVAL, "listen address '%s': expected ':' and a port after ']'", s);
    size_t hlen = (size_t)(h_end - h);
    /* "*" is the spelling many daemons use for "all addresses"; treat it like an empty host. */
    if (!bracketed && hlen == 1 && h[0] == '*')
        hlen = 0;
    for (size_t i = 0; i < hlen; i++)
        if (!valid_host_char(h[i], bracketed))
            return errmsg_set(e, -EINVAL, "listen address '%s': invalid character in host", s);
    uint16_t port = 0;
    int r = parse_port(colon + 1, s, &port, e);
    if (r < 0)
        return r;
    if (hlen + 1 > host_size)
        return errmsg_set(e, -ENAMETOOLONG, "listen address '%s': host name too long", s);
    memcpy(host, h, hlen);
    host[hlen] = '\0';
    *ret_port = port;
    return 0;
}
