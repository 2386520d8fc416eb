/* gpuq's tables and formats. Tables are written in two passes over the reply, one to measure
 * the columns and one to print, so that no row is kept: a listing of thousands of jobs needs
 * no memory beyond one row. */
#include "gpuq/gpuq/render.h"

#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CELL_MAX  256
#define TABLE_MAX 10

/* ---- text that is appended to a fixed buffer, cut with "…" when it does not fit ---- */

struct sbuf {
    char *p;
    size_t size, len;
};

static void sb_init(struct sbuf *b, char *buf, size_t size)
{
    *b = (struct sbuf){buf, size, 0};
    if (size)
        buf[0] = '\0';
}

/* Appends n bytes of s; whatever does not fit is dropped, ending the text in "…" when there is
 * room for it. */
static void sb_putn(struct sbuf *b, const char *s, size_t n)
{
    if (b->size == 0)
        return;
    if (b->len + n < b->size) {
        memcpy(b->p + b->len, s, n);
        b->len += n;
        b->p[b->len] = '\0';
        return;
    }
    /* Cut at a character boundary, leaving room for the three bytes of the ellipsis. */
    size_t keep = b->size > 4 ? b->size - 4 : 0;
    if (keep < b->len)
        b->len = keep;
    else {
        size_t take = keep - b->len; /* < n: the text did not fit */
        memcpy(b->p + b->len, s, take);
        b->len = keep;
        b->p[keep] = s[take]; /* the first byte left out, looked at below */
    }
    /* Not in the middle of a character: back to its first byte. */
    while (b->len > 0 && ((unsigned char)b->p[b->len] & 0xC0) == 0x80)
        b->len--;
    if (b->size >= 4)
        memcpy(b->p + b->len, "\xE2\x80\xA6", 3), b->len += 3;
    b->p[b->len] = '\0';
    b->size = b->len + 1; /* full: nothing more goes in */
}

static void sb_puts(struct sbuf *b, const char *s)
{
    sb_putn(b, s, strlen(s));
}

static void sb_printf(struct sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(struct sbuf *b, const char *fmt, ...)
{
    char tmp[CELL_MAX];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n > 0)
        sb_putn(b, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* ---- user text: control characters replaced, width counted in characters ---- */

/* Columns a UTF-8 string takes: one per character (wide East Asian characters are rare in job
 * names and counted as one). */
static size_t text_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

/* Length in bytes of the UTF-8 character at s (jansson hands out valid UTF-8 only). */
static size_t char_len(const unsigned char *s)
{
    if (*s < 0x80)
        return 1;
    size_t n = *s >= 0xF0 ? 4 : *s >= 0xE0 ? 3 : 2;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80)
            return i;
    return n;
}

/* Whether the character at s is a C0 or C1 control character or DEL: terminals act on those
 * (ESC, CSI as U+009B). */
static bool is_control(const unsigned char *s)
{
    return *s < 0x20 || *s == 0x7F || (s[0] == 0xC2 && s[1] >= 0x80 && s[1] <= 0x9F);
}

/* Copies s into b with control characters as '?', at most max_cols characters: a longer text
 * keeps max_cols - 1 and ends in "…". max_cols 0: no limit. */
static void sb_put_text(struct sbuf *b, const char *s, size_t max_cols)
{
    bool cut = max_cols > 0 && text_width(s) > max_cols;
    size_t cols = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        if (cut && cols == max_cols - 1) {
            sb_puts(b, "\xE2\x80\xA6");
            return;
        }
        size_t n = char_len(p);
        if (is_control(p))
            sb_putn(b, "?", 1);
        else
            sb_putn(b, (const char *)p, n);
        p += n;
        cols++;
    }
}

static const char *str_or(json_t *j, const char *fallback)
{
    return json_is_string(j) ? json_string_value(j) : fallback;
}

/* ---- formats ---- */

char *render_duration(double seconds, char *buf, size_t size)
{
    if (!isfinite(seconds) || seconds > 1e12) {
        snprintf(buf, size, "-");
        return buf;
    }
    uint64_t t = seconds > 0 ? (uint64_t)seconds : 0;
    if (t < 60)
        snprintf(buf, size, "%" PRIu64 "s", t);
    else if (t < 3600)
        snprintf(buf, size, "%" PRIu64 "m%02" PRIu64 "s", t / 60, t % 60);
    else if (t < 86400)
        snprintf(buf, size, "%" PRIu64 "h%02" PRIu64 "m", t / 3600, t % 3600 / 60);
    else
        snprintf(buf, size, "%" PRIu64 "d%02" PRIu64 "h", t / 86400, t % 86400 / 3600);
    return buf;
}

char *render_time(double t, int with_seconds, char *buf, size_t size)
{
    struct tm tm;
    /* Checked before the conversion: a NaN or a huge number does not fit a time_t. */
    bool ok = isfinite(t) && t > 0 && t <= 1e12;
    time_t tt = ok ? (time_t)t : 0;
    if (!ok || !localtime_r(&tt, &tm) ||
        strftime(buf, size, with_seconds ? "%Y-%m-%d %H:%M:%S" : "%Y-%m-%d %H:%M", &tm) == 0)
        snprintf(buf, size, "-");
    return buf;
}

char *render_start(json_t *estimated_start, double now, char *buf, size_t size)
{
    if (json_is_null(estimated_start) || !estimated_start) {
        snprintf(buf, size, "unknown");
        return buf;
    }
    if (!json_is_number(estimated_start)) {
        snprintf(buf, size, "?");
        return buf;
    }
    double t = json_number_value(estimated_start), delta = t - now;
    if (!isfinite(delta) || delta >= 6 * 3600)
        return render_time(t, 0, buf, size);
    if (delta <= 0) {
        snprintf(buf, size, "now");
        return buf;
    }
    /* Minutes rounded up: "in 1m" for a start 20 s away, never "in 0m". */
    unsigned long min = (unsigned long)ceil(delta / 60);
    if (min < 60)
        snprintf(buf, size, "in %lum", min);
    else
        snprintf(buf, size, "in %luh%02lum", min / 60, min % 60);
    return buf;
}

char *render_gpus(json_t *gpus, char *buf, size_t size)
{
    const char *kind = str_or(json_object_get(gpus, "kind"), "");
    json_t *count = json_object_get(gpus, "count");
    long long n = json_integer_value(count);
    struct sbuf b;
    sb_init(&b, buf, size);
    if (strcmp(kind, "none") == 0)
        sb_puts(&b, "0");
    else if (!json_is_integer(count))
        sb_puts(&b, "?");
    else if (strcmp(kind, "whole") == 0) {
        const char *model = str_or(json_object_get(gpus, "model"), "");
        if (*model) {
            sb_put_text(&b, model, 0);
            sb_puts(&b, ":");
        }
        sb_printf(&b, "%lld", n);
    } else if (strcmp(kind, "mig") == 0) {
        sb_puts(&b, "mig-");
        sb_put_text(&b, str_or(json_object_get(gpus, "profile"), "?"), 0);
        sb_printf(&b, ":%lld", n);
    } else
        sb_puts(&b, "?");
    return buf;
}

/* Memory in the largest binary unit that leaves a value of at least 1, one decimal at most:
 * "512M", "1.5T", "64G", "100B". */
static void put_bytes(struct sbuf *b, double v)
{
    static const char units[] = "BKMGTPE";
    unsigned u = 0;
    while (v >= 1024 && u + 1 < sizeof(units) - 1)
        v /= 1024, u++;
    double r = round(v * 10) / 10;
    if (r == floor(r))
        sb_printf(b, "%.0f%c", r, units[u]);
    else
        sb_printf(b, "%.1f%c", r, units[u]);
}

char *render_amount(const char *key, json_t *value, char *buf, size_t size)
{
    struct sbuf b;
    sb_init(&b, buf, size);
    if (!json_is_number(value)) {
        sb_puts(&b, "?");
        return buf;
    }
    double v = json_number_value(value);
    if (strcmp(key, "cpus") == 0) {
        /* Thousandths, as quota.h counts them: 2500 is two and a half CPUs. */
        char tmp[64];
        snprintf(tmp, sizeof(tmp), "%.3f", v / 1000);
        char *end = tmp + strlen(tmp);
        while (end > tmp && end[-1] == '0')
            *--end = '\0';
        if (end > tmp && end[-1] == '.')
            *--end = '\0';
        sb_puts(&b, tmp);
    } else if (strcmp(key, "memory") == 0)
        put_bytes(&b, v);
    else
        sb_printf(&b, "%.0f", v);
    return buf;
}

char *render_quota(json_t *queue, char *buf, size_t size)
{
    json_t *quota = json_object_get(queue, "quota"), *used = json_object_get(queue, "used");
    struct sbuf b;
    sb_init(&b, buf, size);
    if (!json_is_object(quota)) {
        sb_puts(&b, "?");
        return buf;
    }
    if (json_object_size(quota) == 0) {
        sb_puts(&b, "unlimited");
        return buf;
    }
    const char *key;
    json_t *limit;
    bool first = true;
    json_object_foreach(quota, key, limit)
    {
        char u[32] = "0", l[32];
        json_t *n = json_object_get(used, key);
        if (n)
            render_amount(key, n, u, sizeof(u));
        render_amount(key, limit, l, sizeof(l));
        if (!first)
            sb_puts(&b, ", ");
        sb_put_text(&b, key, 0);
        sb_printf(&b, " %s/%s", u, l);
        first = false;
    }
    return buf;
}

char *render_borrowed(json_t *queue, char *buf, size_t size)
{
    json_t *borrowed = json_object_get(queue, "borrowed");
    struct sbuf b;
    sb_init(&b, buf, size);
    const char *key;
    json_t *n;
    json_object_foreach(borrowed, key, n)
    {
        if (!json_is_number(n) || json_number_value(n) <= 0)
            continue;
        char a[32];
        if (b.len)
            sb_puts(&b, ", ");
        sb_put_text(&b, key, 0);
        sb_printf(&b, " %s", render_amount(key, n, a, sizeof(a)));
    }
    if (b.len == 0)
        sb_puts(&b, "-");
    return buf;
}

/* Whether a word reads back from a shell as itself without quotes. */
static bool shell_plain(const char *s)
{
    if (!*s)
        return false;
    for (; *s; s++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_@%+=:,./-", *s))
            return false;
    return true;
}

char *render_command(json_t *argv, char *buf, size_t size)
{
    struct sbuf b;
    sb_init(&b, buf, size);
    size_t i;
    json_t *a;
    json_array_foreach(argv, i, a)
    {
        const char *s = str_or(a, "?");
        if (i > 0)
            sb_puts(&b, " ");
        if (shell_plain(s)) {
            sb_puts(&b, s);
            continue;
        }
        sb_puts(&b, "'");
        for (const char *q = strchr(s, '\''); q; s = q + 1, q = strchr(s, '\'')) {
            char part[CELL_MAX * 4];
            size_t n = (size_t)(q - s) < sizeof(part) - 1 ? (size_t)(q - s) : sizeof(part) - 1;
            memcpy(part, s, n);
            part[n] = '\0';
            sb_put_text(&b, part, 0);
            sb_puts(&b, "'\\''");
        }
        sb_put_text(&b, s, 0);
        sb_puts(&b, "'");
    }
    return buf;
}

void render_json(FILE *f, json_t *doc)
{
    if (!doc)
        fputs("null", f);
    else
        json_dumpf(doc, f, JSON_INDENT(2) | JSON_ENCODE_ANY);
    fputc('\n', f);
}

/* ---- tables ---- */

static double num(json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

struct column {
    const char *head;
    bool right; /* numbers line up on the right */
};

/* Fills one row's cells from an item of the reply. */
typedef void (*row_fn)(json_t *item, double now, char cells[][CELL_MAX]);

static void row_write(FILE *f, const struct column *cols, unsigned n, char cells[][CELL_MAX],
                      const size_t *width)
{
    for (unsigned i = 0; i < n; i++) {
        size_t pad = width[i] - text_width(cells[i]);
        if (i > 0)
            fputs("  ", f);
        if (cols[i].right)
            fprintf(f, "%*s%s", (int)pad, "", cells[i]);
        else if (i + 1 < n)
            fprintf(f, "%s%*s", cells[i], (int)pad, "");
        else
            fputs(cells[i], f);
    }
    fputc('\n', f);
}

/* Writes a table of the items of array: a header and one row each. Returns the row count. */
static size_t table_write(FILE *f, const struct column *cols, unsigned n, json_t *array, row_fn row,
                          double now)
{
    char cells[TABLE_MAX][CELL_MAX];
    size_t width[TABLE_MAX];
    size_t i;
    json_t *item;
    for (unsigned c = 0; c < n; c++)
        width[c] = text_width(cols[c].head);
    json_array_foreach(array, i, item)
    {
        row(item, now, cells);
        for (unsigned c = 0; c < n; c++) {
            size_t w = text_width(cells[c]);
            width[c] = w > width[c] ? w : width[c];
        }
    }
    for (unsigned c = 0; c < n; c++)
        snprintf(cells[c], CELL_MAX, "%s", cols[c].head);
    row_write(f, cols, n, cells, width);
    json_array_foreach(array, i, item)
    {
        row(item, now, cells);
        row_write(f, cols, n, cells, width);
    }
    return json_array_size(array);
}

/* A cell from a string member, control characters replaced, cut at max_cols (0: no limit). */
static void cell_text(char *cell, json_t *o, const char *key, const char *fallback, size_t max_cols)
{
    struct sbuf b;
    sb_init(&b, cell, CELL_MAX);
    json_t *v = json_object_get(o, key);
    if (json_is_string(v) && json_string_length(v) > 0)
        sb_put_text(&b, json_string_value(v), max_cols);
    else
        sb_puts(&b, fallback);
}

static void cell_int(char *cell, json_t *o, const char *key)
{
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v))
        snprintf(cell, CELL_MAX, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    else
        snprintf(cell, CELL_MAX, "-");
}

/* How long a job has been in its state that counts: a pending job's wait since submission, an
 * active one's run, an ended one's last run. */
static double job_elapsed(json_t *j, const char *state, double now)
{
    if (strcmp(state, "PENDING") == 0)
        return now - num(j, "submit_time");
    if (strcmp(state, "RUNNING") == 0 || strcmp(state, "STOPPING") == 0)
        return now - num(j, "start_time");
    return num(j, "end_time") - num(j, "start_time");
}

enum { JC_ID, JC_QUEUE, JC_NAME, JC_USER, JC_STATE, JC_GPUS, JC_TIME, JC_POS, JC_START, JC_REASON };

static void job_row(json_t *j, double now, char c[][CELL_MAX])
{
    const char *state = str_or(json_object_get(j, "state"), "?");
    bool pending = strcmp(state, "PENDING") == 0;
    cell_int(c[JC_ID], j, "id");
    cell_text(c[JC_QUEUE], j, "queue", "?", 0);
    cell_text(c[JC_NAME], j, "name", "-", RENDER_NAME_MAX);
    cell_text(c[JC_USER], j, "user", "?", 0);
    cell_text(c[JC_STATE], j, "state", "?", 0);
    render_gpus(json_object_get(j, "gpus"), c[JC_GPUS], CELL_MAX);
    render_duration(job_elapsed(j, state, now), c[JC_TIME], CELL_MAX);
    if (pending) {
        cell_int(c[JC_POS], j, "position");
        render_start(json_object_get(j, "estimated_start"), now, c[JC_START], CELL_MAX);
    } else {
        snprintf(c[JC_POS], CELL_MAX, "-");
        snprintf(c[JC_START], CELL_MAX, "-");
    }
    /* An ended job's reason is its cause ("exit 3", "preempted"); a running one has none, and
     * saying it borrows tells its user it may be preempted. */
    bool borrowing = json_is_true(json_object_get(j, "borrowing"));
    cell_text(c[JC_REASON], j, "reason", !pending && borrowing ? "Borrowing" : "-", 0);
}

size_t render_jobs(FILE *f, json_t *doc, double now)
{
    static const struct column cols[] = {
        [JC_ID] = {"ID", true},        [JC_QUEUE] = {"QUEUE", false},
        [JC_NAME] = {"NAME", false},   [JC_USER] = {"USER", false},
        [JC_STATE] = {"STATE", false}, [JC_GPUS] = {"GPUS", false},
        [JC_TIME] = {"TIME", true},    [JC_POS] = {"POS", true},
        [JC_START] = {"START", false}, [JC_REASON] = {"REASON", false},
    };
    json_t *jobs = json_object_get(doc, "jobs");
    return table_write(f, cols, sizeof(cols) / sizeof(cols[0]), json_is_array(jobs) ? jobs : NULL,
                       job_row, now);
}

enum {
    QC_QUEUE,
    QC_CLASS,
    QC_PRIO,
    QC_QUOTA,
    QC_BORROWED,
    QC_WINDOW,
    QC_NEXT,
    QC_PENDING,
    QC_RUNNING
};

static void queue_row(json_t *q, double now, char c[][CELL_MAX])
{
    cell_text(c[QC_QUEUE], q, "name", "?", 0);
    cell_text(c[QC_CLASS], q, "class", "?", 0);
    cell_int(c[QC_PRIO], q, "priority");
    render_quota(q, c[QC_QUOTA], CELL_MAX);
    render_borrowed(q, c[QC_BORROWED], CELL_MAX);
    cell_text(c[QC_WINDOW], q, "window", "-", 0);
    render_time(num(q, "next_change"), 0, c[QC_NEXT], CELL_MAX);
    cell_int(c[QC_PENDING], q, "pending");
    cell_int(c[QC_RUNNING], q, "running");
}

void render_queues(FILE *f, json_t *doc)
{
    static const struct column cols[] = {
        [QC_QUEUE] = {"QUEUE", false},       [QC_CLASS] = {"CLASS", false},
        [QC_PRIO] = {"PRIO", true},          [QC_QUOTA] = {"QUOTA", false},
        [QC_BORROWED] = {"BORROWED", false}, [QC_WINDOW] = {"WINDOW", false},
        [QC_NEXT] = {"NEXT CHANGE", false},  [QC_PENDING] = {"PENDING", true},
        [QC_RUNNING] = {"RUNNING", true},
    };
    json_t *total = json_object_get(doc, "gpus_total");
    json_t *allocated = json_object_get(doc, "gpus_allocated");
    fputs("node: ", f);
    if (json_is_integer(total) && json_is_integer(allocated))
        fprintf(f, "%" JSON_INTEGER_FORMAT "/%" JSON_INTEGER_FORMAT " GPUs allocated",
                json_integer_value(allocated), json_integer_value(total));
    else
        fputs("? GPUs", f);
    if (json_is_true(json_object_get(doc, "drained")))
        fputs(", DRAINED: nothing starts until `gpuq resume`", f);
    fputs("\n\n", f);
    json_t *queues = json_object_get(doc, "queues");
    table_write(f, cols, sizeof(cols) / sizeof(cols[0]), json_is_array(queues) ? queues : NULL,
                queue_row, 0);
}

/* ---- gpuq show ---- */

enum field_kind {
    F_TEXT,
    F_TIME,     /* local time and how long ago */
    F_START,    /* an estimated start */
    F_DURATION, /* seconds; null: none */
    F_GPUS,
    F_CPUS,   /* thousandths; 0: unlimited */
    F_MEMORY, /* bytes; 0: unlimited */
    F_BOOL,
    F_LIST, /* strings joined by ',' */
    F_COMMAND,
    F_ENV, /* shown as a count: values may be secrets, and are long */
    F_SIGNAL,
};

struct field {
    const char *key;
    enum field_kind kind;
};

/* The order a person reads a job in: who and where, what it waits for, what it asked for, its
 * history, then how it runs. */
static const struct field job_fields[] = {
    {"id", F_TEXT},
    {"name", F_TEXT},
    {"user", F_TEXT},
    {"uid", F_TEXT},
    {"queue", F_TEXT},
    {"priority_class", F_TEXT},
    {"priority", F_TEXT},
    {"state", F_TEXT},
    {"reason", F_TEXT},
    {"held", F_BOOL},
    {"interactive", F_BOOL},
    {"position", F_TEXT},
    {"estimated_start", F_START},
    {"borrowing", F_BOOL},
    {"gpus", F_GPUS},
    {"allocated", F_LIST},
    {"cpu_milli", F_CPUS},
    {"mem_bytes", F_MEMORY},
    {"time_limit", F_DURATION},
    {"submit_time", F_TIME},
    {"eligible_time", F_TIME},
    {"first_start_time", F_TIME},
    {"start_time", F_TIME},
    {"end_time", F_TIME},
    {"exit_code", F_TEXT},
    {"signal", F_SIGNAL},
    {"runs", F_TEXT},
    {"failures", F_TEXT},
    {"backoff_limit", F_TEXT},
    {"preemptions", F_TEXT},
    {"last_checkpoint", F_TIME},
    {"checkpoint_signal", F_TEXT},
    {"grace", F_DURATION},
    {"image", F_TEXT},
    {"command", F_COMMAND},
    {"cwd", F_TEXT},
    {"env", F_ENV},
    {"log", F_TEXT},
};

#define FIELD_LABEL_WIDTH 18

/* Any JSON value in one line: strings as their text, the rest compact. */
static void put_value(struct sbuf *b, json_t *v)
{
    if (!v) {
        sb_puts(b, "-");
        return;
    }
    if (json_is_string(v)) {
        sb_put_text(b, json_string_value(v), 0);
        return;
    }
    char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    sb_put_text(b, s ? s : "?", 0);
    free(s);
}

static void put_time(struct sbuf *b, double t, double now)
{
    char when[64], ago[32];
    sb_puts(b, render_time(t, 1, when, sizeof(when)));
    if (strcmp(when, "-") == 0)
        return;
    if (t <= now)
        sb_printf(b, " (%s ago)", render_duration(now - t, ago, sizeof(ago)));
    else
        sb_printf(b, " (in %s)", render_duration(t - now, ago, sizeof(ago)));
}

static void put_field(struct sbuf *b, enum field_kind kind, json_t *v, double now)
{
    char tmp[CELL_MAX];
    if (json_is_null(v) && kind != F_START) {
        sb_puts(b, kind == F_DURATION ? "none" : "-");
        return;
    }
    switch (kind) {
    case F_TIME:
        put_time(b, json_number_value(v), now);
        break;
    case F_START:
        sb_puts(b, render_start(v, now, tmp, sizeof(tmp)));
        break;
    case F_DURATION:
        sb_puts(b, render_duration(json_number_value(v), tmp, sizeof(tmp)));
        break;
    case F_GPUS:
        sb_puts(b, render_gpus(v, tmp, sizeof(tmp)));
        break;
    case F_CPUS:
    case F_MEMORY:
        if (json_is_number(v) && json_number_value(v) == 0)
            sb_puts(b, "unlimited");
        else
            sb_puts(b, render_amount(kind == F_CPUS ? "cpus" : "memory", v, tmp, sizeof(tmp)));
        break;
    case F_BOOL:
        sb_puts(b, json_is_true(v) ? "yes" : json_is_false(v) ? "no" : "?");
        break;
    case F_LIST: {
        size_t i;
        json_t *a;
        json_array_foreach(v, i, a)
        {
            if (i > 0)
                sb_puts(b, ",");
            put_value(b, a);
        }
        if (json_array_size(v) == 0)
            sb_puts(b, "-");
        break;
    }
    case F_COMMAND:
        sb_puts(b, json_array_size(v) ? render_command(v, tmp, sizeof(tmp)) : "-");
        break;
    case F_ENV:
        sb_printf(b, "%zu variables (gpuq show --json lists them)", json_array_size(v));
        break;
    case F_SIGNAL:
        put_value(b, v);
        if (json_is_integer(v) && sigabbrev_np((int)json_integer_value(v)))
            sb_printf(b, " (SIG%s)", sigabbrev_np((int)json_integer_value(v)));
        break;
    default:
        put_value(b, json_is_string(v) && json_string_length(v) == 0 ? NULL : v);
    }
}

static void field_write(FILE *f, const char *key, enum field_kind kind, json_t *v, double now)
{
    char line[CELL_MAX * 4];
    struct sbuf b;
    sb_init(&b, line, sizeof(line));
    put_field(&b, kind, v, now);
    char label[64];
    snprintf(label, sizeof(label), "%s:", key);
    fprintf(f, "%-*s %s\n", FIELD_LABEL_WIDTH, label, line);
}

static bool field_known(const char *key)
{
    for (size_t i = 0; i < sizeof(job_fields) / sizeof(job_fields[0]); i++)
        if (strcmp(job_fields[i].key, key) == 0)
            return true;
    return false;
}

void render_job(FILE *f, json_t *doc, double now)
{
    json_t *job = json_object_get(doc, "job");
    for (size_t i = 0; i < sizeof(job_fields) / sizeof(job_fields[0]); i++) {
        json_t *v = json_object_get(job, job_fields[i].key);
        if (v)
            field_write(f, job_fields[i].key, job_fields[i].kind, v, now);
    }
    /* Fields of a newer gpuqd: shown as they are rather than hidden. */
    const char *key;
    json_t *v;
    json_object_foreach(job, key, v)
    {
        if (!field_known(key)) {
            char safe[CELL_MAX];
            struct sbuf b;
            sb_init(&b, safe, sizeof(safe));
            sb_put_text(&b, key, 0);
            field_write(f, safe, F_TEXT, v, now);
        }
    }
    json_t *events = json_object_get(doc, "events");
    if (json_array_size(events) == 0)
        return;
    fputs("events:\n", f);
    size_t i;
    json_t *ev;
    json_array_foreach(events, i, ev)
    {
        char when[64], text[CELL_MAX * 4];
        struct sbuf b;
        sb_init(&b, text, sizeof(text));
        sb_put_text(&b, str_or(json_object_get(ev, "text"), "?"), 0);
        fprintf(f, "  %s  %s\n", render_time(num(ev, "time"), 1, when, sizeof(when)), text);
    }
}
