/* Parsing one frame (docs/protocol.md §1-§2). */
#include <string.h>

#include "ctl-internal.h"
#include "ctl-proto.h"

bool ctl_key_valid(const char *s, size_t n)
{
    if (n < 1 || n > CTL_KEY_MAX || !(s[0] >= 'a' && s[0] <= 'z'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || ctl_is_digit(c) || c == '_' || c == '.'))
            return false;
    }
    return true;
}

bool ctl_verb_valid(const char *s, size_t n)
{
    if (n < 1 || n > CTL_VERB_MAX || !(s[0] >= 'A' && s[0] <= 'Z'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || ctl_is_digit(c) || c == '_'))
            return false;
    }
    return true;
}

void ctl_strlcpy(char *buf, const char *src, size_t size)
{
    size_t n;

    if (size == 0)
        return;
    n = strlen(src);
    if (n >= size)
        n = size - 1;
    memcpy(buf, src, n);
    buf[n] = '\0';
}

static int hex_value(char c)
{
    if (ctl_is_digit(c))
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Length of the token at p: up to the next space or the end of the string. */
static size_t token_len(const char *p)
{
    size_t n = 0;

    while (p[n] && p[n] != ' ')
        n++;
    return n;
}

/* Ends the token of length n at *p with a NUL and moves *p past the spaces that follow.
 * Returns false when the token is followed by something other than spaces or the end. */
static bool end_token(char **p, size_t n)
{
    char *q = *p + n;

    if (*q == '\0') {
        *p = q;
        return true;
    }
    if (*q != ' ')
        return false;
    *q++ = '\0';
    while (*q == ' ')
        q++;
    *p = q;
    return true;
}

static int parse_id(const char *s, size_t n, uint16_t *ret)
{
    unsigned long v = 0;

    /* No sign and no leading zeros: one spelling per id keeps logs and replies comparable. */
    if (n < 1 || n > 5 || (n > 1 && s[0] == '0'))
        return -CTL_E_ID;
    for (size_t i = 0; i < n; i++) {
        if (!ctl_is_digit(s[i]))
            return -CTL_E_ID;
        v = v * 10 + (unsigned long)(s[i] - '0');
    }
    if (v > 65535)
        return -CTL_E_ID;
    *ret = (uint16_t)v;
    return 0;
}

/* Parses one key=value field at *p (the frame's store) into f->fields[f->n_fields]. */
static int parse_field(char **p, struct ctl_frame *f)
{
    char *key = *p, *eq, *value;
    size_t n;

    if (f->n_fields >= CTL_FIELDS_MAX)
        return -CTL_E_TOOMANY;
    eq = key;
    while (*eq && *eq != '=' && *eq != ' ')
        eq++;
    if (*eq != '=')
        return -CTL_E_SYNTAX;
    if (!ctl_key_valid(key, (size_t)(eq - key)))
        return -CTL_E_KEY;
    *eq = '\0';
    for (unsigned i = 0; i < f->n_fields; i++)
        if (strcmp(f->fields[i].key, key) == 0)
            return -CTL_E_KEY;

    value = eq + 1;
    if (*value == '"') {
        char *close = strchr(++value, '"');
        if (!close)
            return -CTL_E_VALUE;
        *close = '\0';
        *p = close + 1;
        /* The closing quote was overwritten; what follows must be a separator or the end. */
        if (**p != '\0' && !end_token(p, 0))
            return -CTL_E_SYNTAX;
    } else {
        n = token_len(value);
        if (n == 0)
            return -CTL_E_VALUE;
        for (size_t i = 0; i < n; i++)
            if (!ctl_is_value_byte(value[i]))
                return -CTL_E_VALUE;
        *p = value;
        end_token(p, n);
    }
    f->fields[f->n_fields].key = key;
    f->fields[f->n_fields].value = value;
    f->n_fields++;
    return 0;
}

/* Splits the body (NUL-terminated, in f->store) into kind, id, verb and fields in place. */
static int parse_body(struct ctl_frame *f, size_t n)
{
    char *p = f->store;
    size_t tl;
    int r;

    if (n == 0 || p[0] == ' ' || p[n - 1] == ' ')
        return -CTL_E_SYNTAX;

    tl = token_len(p);
    if (tl != 1 || (p[0] != CTL_KIND_REQUEST && p[0] != CTL_KIND_REPLY && p[0] != CTL_KIND_EVENT))
        return -CTL_E_KIND;
    f->kind = p[0];
    end_token(&p, tl);
    if (*p == '\0')
        return -CTL_E_SYNTAX;

    tl = token_len(p);
    r = parse_id(p, tl, &f->id);
    if (r < 0)
        return r;
    end_token(&p, tl);
    if (*p == '\0')
        return -CTL_E_SYNTAX;

    tl = token_len(p);
    if (!ctl_verb_valid(p, tl))
        return -CTL_E_VERB;
    f->verb = p;
    end_token(&p, tl);

    f->n_fields = 0;
    while (*p != '\0') {
        r = parse_field(&p, f);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Checks the framing and the checksum; on success *ret_body_len is the body length. */
static int check_envelope(const char *line, size_t len, size_t *ret_body_len)
{
    const char *star;
    size_t body_len;
    unsigned crc = 0;

    if (len == 0 || line[0] != '$')
        return -CTL_E_SYNTAX;
    if (len > CTL_FRAME_MAX - 2)
        return -CTL_E_TOOLONG;
    for (size_t i = 1; i < len; i++)
        if (!ctl_is_print(line[i]))
            return -CTL_E_CHARACTER;

    star = memchr(line, '*', len);
    if (!star || (size_t)(line + len - star) != 5)
        return -CTL_E_NOCHECKSUM;
    for (int i = 1; i <= 4; i++) {
        int h = hex_value(star[i]);
        if (h < 0)
            return -CTL_E_NOCHECKSUM;
        crc = crc << 4 | (unsigned)h;
    }
    body_len = (size_t)(star - line - 1);
    if (ctl_crc16(line + 1, body_len) != crc)
        return -CTL_E_CHECKSUM;
    if (memchr(line + 1, '$', body_len))
        return -CTL_E_SYNTAX;
    *ret_body_len = body_len;
    return 0;
}

int ctl_frame_parse(const char *line, size_t len, struct ctl_frame *ret)
{
    struct ctl_frame f;
    size_t body_len;
    int r;

    /* The line end is optional, and its '\r' too; a lone '\r' is an ordinary bad byte. */
    if (len > 0 && line[len - 1] == '\n') {
        len--;
        if (len > 0 && line[len - 1] == '\r')
            len--;
    }
    r = check_envelope(line, len, &body_len);
    if (r < 0)
        return r;

    memcpy(f.store, line + 1, body_len);
    f.store[body_len] = '\0';
    r = parse_body(&f, body_len);
    if (r < 0)
        return r;
    ctl_frame_copy(ret, &f);
    return 0;
}

const char *ctl_frame_get(const struct ctl_frame *f, const char *key)
{
    for (unsigned i = 0; i < f->n_fields; i++)
        if (strcmp(f->fields[i].key, key) == 0)
            return f->fields[i].value;
    return NULL;
}

/* Moves a pointer from src's store to the same offset in dst's store. A pointer elsewhere (a
 * frame filled in by hand) is kept as it is. */
static const char *rebase(const struct ctl_frame *src, struct ctl_frame *dst, const char *p)
{
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)src->store;

    if (!p || a < lo || a >= lo + sizeof(src->store))
        return p;
    return dst->store + (a - lo);
}

void ctl_frame_copy(struct ctl_frame *dst, const struct ctl_frame *src)
{
    if (dst == src)
        return;
    memcpy(dst->store, src->store, sizeof(dst->store));
    dst->kind = src->kind;
    dst->id = src->id;
    dst->verb = rebase(src, dst, src->verb);
    dst->n_fields = src->n_fields;
    for (unsigned i = 0; i < src->n_fields; i++) {
        dst->fields[i].key = rebase(src, dst, src->fields[i].key);
        dst->fields[i].value = rebase(src, dst, src->fields[i].value);
    }
}
