/* Building frames. The writer refuses everything the parser would refuse, so whatever it
 * produces parses back to the same kind, id, verb and fields. */
#include <stdio.h>
#include <string.h>

#include "ctl-internal.h"
#include "ctl-proto.h"

/* "*XXXX\r\n" that finish appends. */
#define TRAILER_LEN 7

static void fail(struct ctl_writer *w, int err)
{
    if (w->err == 0)
        w->err = err;
}

void ctl_writer_begin(struct ctl_writer *w, char kind, uint16_t id, const char *verb)
{
    int n;

    w->len = 0;
    w->err = 0;
    w->buf[0] = '\0';
    if (kind != CTL_KIND_REQUEST && kind != CTL_KIND_REPLY && kind != CTL_KIND_EVENT) {
        fail(w, -CTL_E_KIND);
        return;
    }
    if (!verb || !ctl_verb_valid(verb, strlen(verb))) {
        fail(w, -CTL_E_VERB);
        return;
    }
    /* Cannot overflow: 1 + 1 + 1 + 5 + 1 + CTL_VERB_MAX bytes. */
    n = snprintf(w->buf, sizeof(w->buf), "$%c %u %s", kind, (unsigned)id, verb);
    w->len = (size_t)n;
}

/* Walks the fields already written and tells whether `key` is among them; *ret_n counts them.
 * The buffer was produced by this writer, so it is well formed. */
static bool has_key(const struct ctl_writer *w, const char *key, unsigned *ret_n)
{
    const char *p = w->buf, *end = w->buf + w->len;
    size_t klen = strlen(key);
    unsigned n = 0;
    bool found = false;

    /* Skip "$K id VERB". */
    for (int spaces = 0; p < end && spaces < 3; p++)
        if (*p == ' ')
            spaces++;
    while (p < end) {
        const char *eq = memchr(p, '=', (size_t)(end - p));
        if (!eq)
            break;
        if ((size_t)(eq - p) == klen && memcmp(p, key, klen) == 0)
            found = true;
        n++;
        p = eq + 1;
        if (p < end && *p == '"') {
            const char *close = memchr(p + 1, '"', (size_t)(end - p - 1));
            p = close ? close + 1 : end;
        }
        while (p < end && *p != ' ')
            p++;
        p++;
    }
    *ret_n = n;
    return found;
}

/* Checks one field against what the parser accepts and what still fits; *ret_quote tells whether
 * the value needs quotes. Returns 0 or -CTL_E_*. */
static int check_field(const struct ctl_writer *w, const char *key, const char *value,
                       bool *ret_quote)
{
    size_t klen, vlen;
    bool quote;
    unsigned n_fields;

    if (!key || !ctl_key_valid(key, klen = strlen(key)))
        return -CTL_E_KEY;
    if (!value)
        return -CTL_E_VALUE;
    vlen = strlen(value);
    quote = vlen == 0;
    for (size_t i = 0; i < vlen; i++) {
        if (value[i] == ' ')
            quote = true;
        else if (!ctl_is_value_byte(value[i]))
            return -CTL_E_VALUE;
    }
    if (has_key(w, key, &n_fields))
        return -CTL_E_KEY;
    if (n_fields >= CTL_FIELDS_MAX)
        return -CTL_E_TOOMANY;
    if (w->len + 1 + klen + 1 + vlen + (quote ? 2 : 0) + TRAILER_LEN > CTL_FRAME_MAX)
        return -CTL_E_OVERFLOW;
    *ret_quote = quote;
    return 0;
}

static void append(struct ctl_writer *w, const char *s, size_t n)
{
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
}

void ctl_writer_add(struct ctl_writer *w, const char *key, const char *value)
{
    bool quote = false;
    int r;

    if (w->err)
        return;
    r = check_field(w, key, value, &quote);
    if (r < 0) {
        fail(w, r);
        return;
    }
    append(w, " ", 1);
    append(w, key, strlen(key));
    append(w, quote ? "=\"" : "=", quote ? 2 : 1);
    append(w, value, strlen(value));
    if (quote)
        append(w, "\"", 1);
}

void ctl_writer_add_int(struct ctl_writer *w, const char *key, long value)
{
    char num[24];

    snprintf(num, sizeof(num), "%ld", value);
    ctl_writer_add(w, key, num);
}

void ctl_writer_add_centi(struct ctl_writer *w, const char *key, long centi)
{
    char num[32];

    if (ctl_format_centi(centi, false, num, sizeof(num)) < 0) {
        fail(w, -CTL_E_VALUE);
        return;
    }
    ctl_writer_add(w, key, num);
}

int ctl_writer_finish(struct ctl_writer *w)
{
    uint16_t crc;

    if (w->err)
        return w->err;
    if (w->len == 0)
        return -CTL_E_SYNTAX; /* begin was never called successfully */
    crc = ctl_crc16(w->buf + 1, w->len - 1);
    snprintf(w->buf + w->len, sizeof(w->buf) - w->len, "*%04X\r\n", (unsigned)crc);
    w->len += TRAILER_LEN;
    return (int)w->len;
}
