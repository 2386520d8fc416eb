#include "collectors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dcgm-fields.h"
#include "lib/fileio.h"
#include "lib/macro.h"
#include "lib/strv.h"
#include "lib/utf8.h"

/* The types dcgm-exporter accepts in the second column. */
static const char *const prom_types[] = {"gauge", "counter", "histogram", "summary", "label"};
#define TYPE_LABEL 4

/* Everything one parse builds before it hands its result over; all of it is freed on failure, so
 * that the caller's result is written only on success. */
struct parse {
    const char *path;
    const char *const *offered;
    size_t n_offered;
    const struct dcgm_field *table;
    size_t n_table;
    bool *selected;       /* n_offered: listed in the file */
    size_t *table_line;   /* per table entry: the line that listed it, 0 = none yet */
    size_t *offered_line; /* the same for offered names outside the table */
    char **skipped;
    struct errmsg *e;
};

static void parse_done(struct parse *p)
{
    free(p->selected);
    free(p->table_line);
    free(p->offered_line);
    strv_free(p->skipped);
}

static int parse_init(struct parse *p)
{
    p->table = dcgm_field_table(&p->n_table);
    /* One element more than needed, so that no count of zero meets calloc's NULL-or-not. */
    p->selected = calloc(p->n_offered + 1, sizeof(*p->selected));
    p->table_line = calloc(p->n_table + 1, sizeof(*p->table_line));
    p->offered_line = calloc(p->n_offered + 1, sizeof(*p->offered_line));
    p->skipped = strv_new();
    if (!p->selected || !p->table_line || !p->offered_line || !p->skipped)
        return errmsg_set(p->e, -ENOMEM, "%s: out of memory", p->path);
    return 0;
}

static bool is_blank(char c)
{
    return c == ' ' || c == '\t';
}

/* Trims blanks from both ends of s in place; returns the first non-blank character. */
static char *trim(char *s)
{
    while (is_blank(*s))
        s++;
    size_t n = strlen(s);
    while (n > 0 && is_blank(s[n - 1]))
        s[--n] = '\0';
    return s;
}

/* Checks the raw bytes of one line (its line end already cut off) and copies it, NUL-terminated,
 * into buf of COLLECTORS_LINE_MAX + 1 bytes. */
static int check_line(const struct parse *p, size_t line, const char *s, size_t n, char *buf)
{
    if (n > COLLECTORS_LINE_MAX)
        return errmsg_set(p->e, -EINVAL, "%s:%zu: line is longer than %d bytes", p->path, line,
                          COLLECTORS_LINE_MAX);
    if (memchr(s, '\0', n))
        return errmsg_set(p->e, -EINVAL, "%s:%zu: NUL byte", p->path, line);
    memcpy(buf, s, n);
    buf[n] = '\0';
    if (!utf8_valid(buf))
        return errmsg_set(p->e, -EINVAL, "%s:%zu: not valid UTF-8", p->path, line);
    /* Control characters would end up in messages and logs; a lone CR means a file with old
     * Mac line ends, which would otherwise read as one long line. */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)buf[i];
        if ((c < 0x20 && c != '\t') || c == 0x7f)
            return errmsg_set(p->e, -EINVAL, "%s:%zu: control character 0x%02x in column %zu",
                              p->path, line, c, i + 1);
    }
    return 0;
}

static ssize_t offered_index(const struct parse *p, const char *name)
{
    for (size_t i = 0; i < p->n_offered; i++)
        if (strcmp(p->offered[i], name) == 0)
            return (ssize_t)i;
    return -1;
}

static int type_index(const char *type)
{
    for (size_t i = 0; i < ELEMENTSOF(prom_types); i++)
        if (strcmp(prom_types[i], type) == 0)
            return (int)i;
    return -1;
}

/* Whether the type column fits what DCGM says the field's value is. */
static int check_kind(const struct parse *p, size_t line, const struct dcgm_field *f, int type)
{
    if (!f)
        return 0;
    if (type == TYPE_LABEL && f->kind == DCGM_FIELD_NUMBER)
        return errmsg_set(p->e, -EINVAL,
                          "%s:%zu: '%s' is a number, not text, so it cannot be a label; use gauge "
                          "or counter",
                          p->path, line, f->name);
    if (type != TYPE_LABEL && f->kind == DCGM_FIELD_STRING)
        return errmsg_set(p->e, -EINVAL,
                          "%s:%zu: '%s' is text, so it can only be a label, not a %s", p->path,
                          line, f->name, prom_types[type]);
    return 0;
}

/* Records that line lists the field (f, else the offered name at index off); a second listing is
 * an error naming the first. */
static int note_listed(struct parse *p, size_t line, const char *name, const struct dcgm_field *f,
                       ssize_t off)
{
    size_t *first = f ? &p->table_line[f - p->table] : &p->offered_line[off];
    if (*first)
        return errmsg_set(p->e, -EINVAL, "%s:%zu: '%s' is listed twice, first on line %zu", p->path,
                          line, name, *first);
    *first = line;
    if (off >= 0) {
        p->selected[off] = true;
        return 0;
    }
    char *s;
    if (asprintf(&s, "%s (line %zu)", name, line) < 0)
        return errmsg_set(p->e, -ENOMEM, "%s: out of memory", p->path);
    if (strv_consume(&p->skipped, s) < 0)
        return errmsg_set(p->e, -ENOMEM, "%s: out of memory", p->path);
    return 0;
}

/* One checked, NUL-terminated line: `FIELD, TYPE, HELP`, a comment or blank. */
static int parse_fields(struct parse *p, size_t line, char *buf)
{
    char *s = trim(buf);
    if (*s == '\0' || *s == '#')
        return 0;
    char *comma1 = strchr(s, ',');
    char *comma2 = comma1 ? strchr(comma1 + 1, ',') : NULL;
    if (!comma2)
        return errmsg_set(p->e, -EINVAL,
                          "%s:%zu: expected 'FIELD, TYPE, HELP' (two commas; the help may be "
                          "empty)",
                          p->path, line);
    *comma1 = *comma2 = '\0';
    const char *name = trim(s), *type = trim(comma1 + 1);
    if (*name == '\0')
        return errmsg_set(p->e, -EINVAL, "%s:%zu: missing field name", p->path, line);

    const struct dcgm_field *f = dcgm_field_find(name);
    ssize_t off = offered_index(p, name);
    if (!f && off < 0)
        return errmsg_set(p->e, -EINVAL,
                          "%s:%zu: unknown field '%s': neither a DCGM field nor one of "
                          "dcgm-exporter's DCGM_EXP_* fields",
                          p->path, line, name);
    if (*type == '\0')
        return errmsg_set(p->e, -EINVAL, "%s:%zu: missing type for '%s'", p->path, line, name);
    int t = type_index(type);
    if (t < 0)
        return errmsg_set(p->e, -EINVAL,
                          "%s:%zu: unknown type '%s' for '%s'; expected gauge, counter, "
                          "histogram, summary or label",
                          p->path, line, type, name);
    int r = check_kind(p, line, f, t);
    if (r < 0)
        return r;
    return note_listed(p, line, name, f, off);
}

static int parse_text(struct parse *p, const char *text, size_t len)
{
    static const char bom[] = "\xef\xbb\xbf";
    const char *s = text, *end = text + len;
    if (len >= 3 && memcmp(text, bom, 3) == 0)
        s += 3;
    char buf[COLLECTORS_LINE_MAX + 1];
    for (size_t line = 1; s < end; line++) {
        const char *nl = memchr(s, '\n', (size_t)(end - s));
        size_t n = (size_t)((nl ? nl : end) - s);
        size_t cut = n > 0 && s[n - 1] == '\r' ? n - 1 : n;
        int r = check_line(p, line, s, cut, buf);
        if (r < 0)
            return r;
        r = parse_fields(p, line, buf);
        if (r < 0)
            return r;
        s += n + (nl ? 1 : 0);
    }
    return 0;
}

int collectors_parse(const char *path, const char *text, size_t len, const char *const *offered,
                     size_t n_offered, struct collectors_result *r, struct errmsg *e)
{
    if (n_offered > 0 && !r->selected)
        return errmsg_set(e, -EINVAL, "%s: no array for the selection", path);
    struct parse p = {.path = path, .offered = offered, .n_offered = n_offered, .e = e};
    int ret = parse_init(&p);
    if (ret >= 0)
        ret = parse_text(&p, text, len);
    if (ret >= 0) {
        for (size_t i = 0; i < n_offered; i++)
            r->selected[i] = p.selected[i];
        r->skipped = TAKE_PTR(p.skipped);
        ret = 0;
    }
    parse_done(&p);
    return ret;
}

int collectors_load(const char *path, const char *const *offered, size_t n_offered,
                    struct collectors_result *r, struct errmsg *e)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int ret = file_read_text(path, COLLECTORS_FILE_MAX, &text, &len, e);
    if (ret < 0)
        return ret;
    return collectors_parse(path, text, len, offered, n_offered, r, e);
}
