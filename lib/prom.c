/* Prometheus exposition writer; see prom.h. */
#include "lib/prom.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "lib/utf8.h"

/* Both spellings of a family's name, so that a clash is refused whatever the format. */
struct prom_family_names {
    char *base;        /* counters without _total; OpenMetrics' TYPE/HELP name */
    char *sample_name; /* as on sample lines; text 0.0.4's TYPE/HELP name */
};

struct prom_writer {
    enum prom_format format;
    char *buf;
    size_t len;
    size_t cap;
    struct prom_family_names *families;
    size_t n_families;
    size_t cap_families;
    enum prom_type type; /* of the current family, the last in families[] */
};

const char *prom_content_type(enum prom_format f)
{
    if (f == PROM_FORMAT_OPENMETRICS)
        return "application/openmetrics-text; version=1.0.0; charset=utf-8";
    return "text/plain; version=0.0.4; charset=utf-8";
}

int prom_writer_new(enum prom_format f, struct prom_writer **ret)
{
    if (f != PROM_FORMAT_TEXT && f != PROM_FORMAT_OPENMETRICS)
        return -EINVAL;
    struct prom_writer *w = calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->format = f;
    *ret = w;
    return 0;
}

void prom_writer_free(struct prom_writer *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->n_families; i++) {
        free(w->families[i].sample_name);
        free(w->families[i].base);
    }
    free(w->families);
    free(w->buf);
    free(w);
}

static int buf_reserve(struct prom_writer *w, size_t extra)
{
    if (w->len + extra + 1 <= w->cap)
        return 0;
    size_t cap = w->cap ? w->cap : 4096;
    while (cap < w->len + extra + 1) {
        if (cap > SIZE_MAX / 2)
            return -ENOMEM;
        cap *= 2;
    }
    char *b = realloc(w->buf, cap);
    if (!b)
        return -ENOMEM;
    w->buf = b;
    w->cap = cap;
    return 0;
}

static int buf_add(struct prom_writer *w, const char *s, size_t n)
{
    int r = buf_reserve(w, n);
    if (r < 0)
        return r;
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->buf[w->len] = '\0';
    return 0;
}

static int buf_puts(struct prom_writer *w, const char *s)
{
    return buf_add(w, s, strlen(s));
}

/* Appends s with backslash, newline and (when quote is set) double quote escaped. */
static int buf_escaped(struct prom_writer *w, const char *s, bool quote)
{
    for (const char *p = s; *p; p++) {
        const char *esc = NULL;
        if (*p == '\\')
            esc = "\\\\";
        else if (*p == '\n')
            esc = "\\n";
        else if (*p == '"' && quote)
            esc = "\\\"";
        int r = esc ? buf_puts(w, esc) : buf_add(w, p, 1);
        if (r < 0)
            return r;
    }
    return 0;
}

static bool valid_metric_name(const char *s)
{
    if (!s || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
        return false;
    for (const char *p = s + 1; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_' || *p == ':'))
            return false;
    return true;
}

static bool valid_label_name(const char *s)
{
    if (!s || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return false;
    if (s[0] == '_' && s[1] == '_') /* reserved for Prometheus' internal labels */
        return false;
    for (const char *p = s + 1; *p; p++)
        if (!(isalnum((unsigned char)*p) || *p == '_'))
            return false;
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t n = strlen(s), m = strlen(suffix);
    return n >= m && strcmp(s + n - m, suffix) == 0;
}

static bool family_exists(const struct prom_writer *w, const char *base, const char *sample)
{
    for (size_t i = 0; i < w->n_families; i++) {
        const struct prom_family_names *f = &w->families[i];
        if (strcmp(f->base, base) == 0 || strcmp(f->sample_name, sample) == 0 ||
            strcmp(f->base, sample) == 0 || strcmp(f->sample_name, base) == 0)
            return true;
    }
    return false;
}

static int family_names_make(const char *name, enum prom_type type, struct prom_family_names *ret)
{
    size_t n = strlen(name);
    if (type == PROM_TYPE_COUNTER && ends_with(name, "_total"))
        n -= strlen("_total");
    struct prom_family_names f = {.base = strndup(name, n)};
    if (f.base && type == PROM_TYPE_COUNTER) {
        if (asprintf(&f.sample_name, "%s_total", f.base) < 0)
            f.sample_name = NULL;
    } else if (f.base)
        f.sample_name = strdup(f.base);
    if (!f.base || !f.sample_name) {
        free(f.base);
        free(f.sample_name);
        return -ENOMEM;
    }
    *ret = f;
    return 0;
}

static const char *type_word(enum prom_format format, enum prom_type type)
{
    switch (type) {
    case PROM_TYPE_COUNTER:
        return " counter\n";
    case PROM_TYPE_COUNTER_KEEP_NAME:
        return format == PROM_FORMAT_OPENMETRICS ? " unknown\n" : " counter\n";
    case PROM_TYPE_HISTOGRAM:
        return " histogram\n";
    case PROM_TYPE_GAUGE:
    default:
        return " gauge\n";
    }
}

static int family_header(struct prom_writer *w, const struct prom_family_names *f,
                         enum prom_type type, const char *help)
{
    const char *type_name = w->format == PROM_FORMAT_OPENMETRICS ? f->base : f->sample_name;
    int r = 0;
    if (help) {
        r = buf_puts(w, "# HELP ");
        if (r >= 0)
            r = buf_puts(w, type_name);
        if (r >= 0)
            r = buf_puts(w, " ");
        if (r >= 0)
            r = buf_escaped(w, help, w->format == PROM_FORMAT_OPENMETRICS);
        if (r >= 0)
            r = buf_puts(w, "\n");
    }
    if (r >= 0)
        r = buf_puts(w, "# TYPE ");
    if (r >= 0)
        r = buf_puts(w, type_name);
    if (r >= 0)
        r = buf_puts(w, type_word(w->format, type));
    return r;
}

int prom_family(struct prom_writer *w, const char *name, enum prom_type type, const char *help)
{
    if (!valid_metric_name(name) ||
        (type != PROM_TYPE_GAUGE && type != PROM_TYPE_COUNTER &&
         type != PROM_TYPE_COUNTER_KEEP_NAME && type != PROM_TYPE_HISTOGRAM))
        return -EINVAL;
    if (type == PROM_TYPE_COUNTER && strcmp(name, "_total") == 0)
        return -EINVAL;
    if (help && !utf8_valid(help))
        return -EINVAL;
    struct prom_family_names f;
    int r = family_names_make(name, type, &f);
    if (r < 0)
        return r;
    if (family_exists(w, f.base, f.sample_name))
        r = -EEXIST;
    if (r >= 0 && w->n_families == w->cap_families) {
        size_t n = w->cap_families ? w->cap_families * 2 : 32;
        struct prom_family_names *a = reallocarray(w->families, n, sizeof(*a));
        if (a) {
            w->families = a;
            w->cap_families = n;
        } else
            r = -ENOMEM;
    }
    size_t old_len = w->len;
    if (r >= 0)
        r = family_header(w, &f, type, help);
    if (r < 0) {
        if (w->buf)
            w->buf[w->len = old_len] = '\0';
        free(f.base);
        free(f.sample_name);
        return r;
    }
    w->families[w->n_families++] = f;
    w->type = type;
    return 0;
}

/* Formats a sample value the way Prometheus' parsers read it back exactly. */
static void format_value(double v, char *buf, size_t size)
{
    if (isnan(v))
        snprintf(buf, size, "NaN");
    else if (isinf(v))
        snprintf(buf, size, v > 0 ? "+Inf" : "-Inf");
    else if (v == 0)
        snprintf(buf, size, "0"); /* also for -0, which would print as "-0" */
    else if (v == trunc(v) && fabs(v) < 9007199254740992.0)
        snprintf(buf, size, "%.0f", v);
    else {
        /* The shortest of the usual precisions that survives the round trip. */
        snprintf(buf, size, "%.15g", v);
        if (strtod(buf, NULL) != v)
            snprintf(buf, size, "%.17g", v);
    }
}

static int check_labels(const char *const *labels)
{
    if (!labels)
        return 0;
    for (size_t i = 0; labels[i]; i += 2) {
        if (!valid_label_name(labels[i]) || !labels[i + 1] || !utf8_valid(labels[i + 1]))
            return -EINVAL;
        for (size_t j = 0; j < i; j += 2)
            if (strcmp(labels[j], labels[i]) == 0)
                return -EINVAL;
    }
    return 0;
}

static int sample_line(struct prom_writer *w, const char *name, const char *const *labels,
                       const char *value)
{
    int r = buf_puts(w, name);
    for (size_t i = 0; r >= 0 && labels && labels[i]; i += 2) {
        r = buf_puts(w, i == 0 ? "{" : ",");
        if (r >= 0)
            r = buf_puts(w, labels[i]);
        if (r >= 0)
            r = buf_puts(w, "=\"");
        if (r >= 0)
            r = buf_escaped(w, labels[i + 1], true);
        if (r >= 0)
            r = buf_puts(w, "\"");
    }
    if (r >= 0 && labels && labels[0])
        r = buf_puts(w, "}");
    if (r >= 0)
        r = buf_puts(w, " ");
    if (r >= 0)
        r = buf_puts(w, value);
    if (r >= 0)
        r = buf_puts(w, "\n");
    return r;
}

int prom_sample(struct prom_writer *w, const char *const *labels, double value)
{
    if (w->n_families == 0 || w->type == PROM_TYPE_HISTOGRAM)
        return -EINVAL;
    int r = check_labels(labels);
    if (r < 0)
        return r;
    if ((w->type == PROM_TYPE_COUNTER || w->type == PROM_TYPE_COUNTER_KEEP_NAME) && value < 0)
        return -ERANGE;
    char v[64];
    format_value(value, v, sizeof(v));
    size_t old_len = w->len;
    r = sample_line(w, w->families[w->n_families - 1].sample_name, labels, v);
    if (r < 0 && w->buf)
        w->buf[w->len = old_len] = '\0'; /* never leave half a line behind */
    return r;
}

/* One sample of the current histogram family: <base><suffix>, with le="<le>" after labels when
 * le is not NULL. */
static int histogram_line(struct prom_writer *w, const char *suffix, const char *const *labels,
                          const char *le, double value)
{
    const char *all[2 * 16 + 3];
    size_t n = 0;
    for (; labels && labels[n] && n < 2 * 16; n += 2) {
        all[n] = labels[n];
        all[n + 1] = labels[n + 1];
    }
    if (labels && labels[n])
        return -EINVAL;
    if (le) {
        all[n++] = "le";
        all[n++] = le;
    }
    all[n] = NULL;
    char name[256], v[64];
    if (snprintf(name, sizeof(name), "%s%s", w->families[w->n_families - 1].base, suffix) >=
        (int)sizeof(name))
        return -EINVAL;
    format_value(value, v, sizeof(v));
    return sample_line(w, name, all, v);
}

int prom_histogram(struct prom_writer *w, const char *const *labels, const double *bounds,
                   const uint64_t *cumulative, size_t n, double sum, uint64_t count)
{
    if (w->n_families == 0 || w->type != PROM_TYPE_HISTOGRAM)
        return -EINVAL;
    int r = check_labels(labels);
    for (size_t i = 0; r >= 0 && labels && labels[i]; i += 2)
        if (strcmp(labels[i], "le") == 0)
            r = -EINVAL;
    size_t old_len = w->len;
    bool has_inf = n > 0 && isinf(bounds[n - 1]);
    for (size_t i = 0; r >= 0 && i < n; i++) {
        char le[64];
        format_value(bounds[i], le, sizeof(le));
        r = histogram_line(w, "_bucket", labels, le, (double)cumulative[i]);
    }
    if (r >= 0 && !has_inf)
        r = histogram_line(w, "_bucket", labels, "+Inf", (double)count);
    if (r >= 0)
        r = histogram_line(w, "_sum", labels, NULL, sum);
    if (r >= 0)
        r = histogram_line(w, "_count", labels, NULL, (double)count);
    if (r < 0 && w->buf)
        w->buf[w->len = old_len] = '\0';
    return r;
}

int prom_writer_finish(struct prom_writer *w, char **ret_text, size_t *ret_len)
{
    int r = w->format == PROM_FORMAT_OPENMETRICS ? buf_puts(w, "# EOF\n") : buf_reserve(w, 0);
    if (r >= 0) {
        w->buf[w->len] = '\0'; /* an exposition without families never wrote a byte */
        if (ret_len)
            *ret_len = w->len;
        *ret_text = TAKE_PTR(w->buf);
    }
    prom_writer_free(w);
    return r;
}

/* Parses the q parameter of one media range ("0", "0.5", "1.000"); -1 if malformed. */
static double parse_q(const char *s, size_t n)
{
    if (n == 0 || n > 5 || (s[0] != '0' && s[0] != '1'))
        return -1;
    double q = s[0] - '0';
    if (n == 1)
        return q;
    if (s[1] != '.')
        return -1;
    double scale = 0.1;
    for (size_t i = 2; i < n; i++, scale /= 10) {
        if (!isdigit((unsigned char)s[i]))
            return -1;
        q += (s[i] - '0') * scale;
    }
    return q > 1 ? -1 : q;
}

static size_t trim(const char **s, size_t n)
{
    while (n > 0 && (**s == ' ' || **s == '\t')) {
        (*s)++;
        n--;
    }
    while (n > 0 && ((*s)[n - 1] == ' ' || (*s)[n - 1] == '\t'))
        n--;
    return n;
}

/* Reads one media range "type/subtype;param=value;..." (n bytes at s): returns its q value
 * (1 without a q parameter, -1 if malformed) and the trimmed type in *type / *type_len. */
static double media_range(const char *s, size_t n, const char **type, size_t *type_len)
{
    const char *semi = memchr(s, ';', n);
    size_t tn = semi ? (size_t)(semi - s) : n;
    const char *t = s;
    *type_len = trim(&t, tn);
    *type = t;
    double q = 1;
    while (semi) {
        const char *p = semi + 1;
        size_t left = n - (size_t)(p - s);
        semi = memchr(p, ';', left);
        size_t pn = trim(&p, semi ? (size_t)(semi - p) : left);
        if (pn >= 2 && (p[0] == 'q' || p[0] == 'Q') && p[1] == '=') {
            const char *qv = p + 2;
            q = parse_q(qv, trim(&qv, pn - 2));
        }
    }
    return q;
}

static bool token_is(const char *t, size_t n, const char *what)
{
    return strlen(what) == n && strncasecmp(t, what, n) == 0;
}

/* The highest q the Accept value gives OpenMetrics and text 0.0.4 (or a wildcard covering it). */
static void accept_qualities(const char *accept, double *ret_om, double *ret_text)
{
    double q_om = 0, q_text = 0;
    const char *s = accept;
    for (;;) {
        const char *comma = strchr(s, ',');
        size_t n = comma ? (size_t)(comma - s) : strlen(s);
        const char *type;
        size_t type_len;
        double q = media_range(s, n, &type, &type_len);
        if (token_is(type, type_len, "application/openmetrics-text"))
            q_om = fmax(q_om, q);
        else if (token_is(type, type_len, "text/plain") || token_is(type, type_len, "text/*") ||
                 token_is(type, type_len, "*/*"))
            q_text = fmax(q_text, q);
        if (!comma)
            break;
        s = comma + 1;
    }
    *ret_om = q_om;
    *ret_text = q_text;
}

enum prom_format prom_format_from_accept(const char *accept)
{
    if (!accept)
        return PROM_FORMAT_TEXT;
    double q_om, q_text;
    accept_qualities(accept, &q_om, &q_text);
    return q_om > 0 && q_om >= q_text ? PROM_FORMAT_OPENMETRICS : PROM_FORMAT_TEXT;
}

enum prom_format prom_format_text_first(const char *accept)
{
    if (!accept)
        return PROM_FORMAT_TEXT;
    double q_om, q_text;
    accept_qualities(accept, &q_om, &q_text);
    return q_text == 0 && q_om > 0 ? PROM_FORMAT_OPENMETRICS : PROM_FORMAT_TEXT;
}
