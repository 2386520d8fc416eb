/* gpuqd's configuration file; see gpuq-config.h. lib/config reads the INI and marks the keys
 * asked for; this file turns sections into queues, classes and windows and says what is wrong
 * with which key on which line. */
#include "gpuq/policy/gpuq-config.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/types.h>

#include "gpuq/policy/calendar.h"
#include "lib/config.h"
#include "lib/macro.h"

#define SEC_GPUQD     "gpuqd"
#define SEC_SCHEDULER "scheduler"
#define PFX_CLASS     "priority-class."
#define PFX_QUEUE     "queue."
#define PFX_WINDOW    "window."
#define PFX_USER      "user."

/* GPUs, MIG instances and jobs a quota may count. */
#define COUNT_MAX 1000000UL
/* Priorities and priority-class values. */
#define PRIORITY_ABS_MAX 1000000000L

static int vfail(const struct config *c, const char *sec, const char *key, struct errmsg *e, int r,
                 const char *fmt, va_list ap) __attribute__((format(printf, 6, 0)));
static int vfail(const struct config *c, const char *sec, const char *key, struct errmsg *e, int r,
                 const char *fmt, va_list ap)
{
    if (!e)
        return r;
    char what[ERRMSG_MAX];
    vsnprintf(what, sizeof(what), fmt, ap);
    if (key)
        return errmsg_set(e, r, "%s:%u: [%s] %s: %s", config_path(c), config_line(c, sec, key), sec,
                          key, what);
    /* About the section as a whole: its first key's line stands for it (lib/config keeps no
     * line for section headers). */
    const char *first = config_next_key(c, sec, NULL);
    return errmsg_set(e, r, "%s:%u: [%s]: %s", config_path(c),
                      first ? config_line(c, sec, first) : 0, sec, what);
}

/* Fails with "file:line: [section] key: <what>", or "file:line: [section]: <what>" for key NULL. */
static int fail(const struct config *c, const char *sec, const char *key, struct errmsg *e, int r,
                const char *fmt, ...) __attribute__((format(printf, 6, 7)));
static int fail(const struct config *c, const char *sec, const char *key, struct errmsg *e, int r,
                const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    r = vfail(c, sec, key, e, r, fmt, ap);
    va_end(ap);
    return r;
}

static int oom(struct errmsg *e)
{
    return errmsg_set(e, -ENOMEM, "out of memory");
}

/* Grows *array by one zeroed element of size bytes; returns the new element or NULL. */
static void *grow(void *array_ptr, unsigned *n, size_t size)
{
    void **array = array_ptr;
    char *a = realloc(*array, ((size_t)*n + 1) * size);
    if (!a)
        return NULL;
    *array = a;
    memset(a + (size_t)*n * size, 0, size);
    return a + (size_t)(*n)++ * size;
}

/* ---- values ---- */

/* A decimal integer with an optional '-', within +-PRIORITY_ABS_MAX. */
static int parse_int(const char *s, int *ret)
{
    const char *p = s + (s[0] == '-');
    if (!isdigit((unsigned char)*p))
        return -EINVAL;
    long v = 0;
    for (; isdigit((unsigned char)*p); p++)
        if ((v = v * 10 + (*p - '0')) > PRIORITY_ABS_MAX)
            return -ERANGE;
    if (*p)
        return -EINVAL;
    *ret = (int)(s[0] == '-' ? -v : v);
    return 0;
}

static int get_int(struct config *c, const char *sec, const char *key, int def, int *ret,
                   struct errmsg *e)
{
    const char *v = config_get(c, sec, key);
    *ret = def;
    if (!v)
        return 0;
    int r = parse_int(v, ret);
    if (r == -ERANGE)
        return fail(c, sec, key, e, r, "%s is out of range -%ld..%ld", v, PRIORITY_ABS_MAX,
                    PRIORITY_ABS_MAX);
    if (r < 0)
        return fail(c, sec, key, e, r, "'%s' is not an integer", v);
    return 1;
}

/* A string setting into *ret (malloc'd; def copied when absent, NULL def stays NULL). An
 * absolute path when want_path. */
static int get_string(struct config *c, const char *sec, const char *key, const char *def,
                      bool want_path, char **ret, struct errmsg *e)
{
    const char *v;
    config_get_string(c, sec, key, def, &v);
    if (v && want_path && v[0] != '/')
        return fail(c, sec, key, e, -EINVAL, "'%s' is not an absolute path", v);
    free(*ret);
    *ret = NULL;
    if (v && !(*ret = strdup(v)))
        return oom(e);
    return 0;
}

static int get_time(struct config *c, const char *sec, const char *key, double *ret,
                    struct errmsg *e)
{
    const char *v = config_get(c, sec, key);
    if (!v)
        return 0;
    int r = queue_parse_time(v, ret);
    if (r == -ERANGE)
        return fail(c, sec, key, e, r, "'%s' is too long", v);
    if (r < 0)
        return fail(c, sec, key, e, r,
                    "'%s' is not a time (like 30m, 2h, 1.5d, or Slurm's HH:MM:SS, D-HH:MM:SS)", v);
    return 1;
}

/* A quota key's value: integers for counts, CPUs and memory in their own forms. */
static int parse_limit(enum quota_kind kind, const char *v, uint64_t *ret, const char **ret_like)
{
    switch (kind) {
    case QUOTA_CPUS:
        *ret_like = "a number of CPUs (like 8, 0.5, 500m)";
        return quota_parse_cpus(v, ret);
    case QUOTA_MEMORY:
        *ret_like = "an amount of memory (like 64G, 512M, 32Gi)";
        return quota_parse_memory(v, ret);
    default:
        *ret_like = "a count 0..1000000";
        if (!isdigit((unsigned char)v[0]) || strlen(v) > 7)
            return -EINVAL;
        char *end;
        unsigned long n = strtoul(v, &end, 10);
        if (*end || n > COUNT_MAX)
            return -EINVAL;
        *ret = n;
        return 0;
    }
}

/* Reads key into q if, less prefix ("" or "user."), it is a quota key. Returns 1 when it was
 * one, 0 when it is no quota key (left for config_check_unused), or an error. */
static int get_limit(struct config *c, const char *sec, const char *key, const char *prefix,
                     struct quota *q, struct errmsg *e)
{
    enum quota_kind kind;
    char what[QUOTA_WHAT_MAX];
    size_t n = strlen(prefix);
    if (strncmp(key, prefix, n) != 0 || quota_parse_key(key + n, &kind, what) < 0)
        return 0;
    const char *v = config_get(c, sec, key);
    for (unsigned i = 0; i < q->n; i++)
        if (q->l[i].kind == kind && strcasecmp(q->l[i].what, what) == 0) {
            /* "gpus.h100" after "gpus.H100": model names are matched whatever their case. */
            char other_key[QUOTA_WHAT_MAX + 8], other[sizeof(other_key) + 8];
            snprintf(other, sizeof(other), "%s%s", prefix,
                     quota_key(&q->l[i], other_key, sizeof(other_key)));
            return fail(c, sec, key, e, -EINVAL, "sets the same limit as '%s' on line %u", other,
                        config_line(c, sec, other));
        }
    uint64_t limit;
    const char *like;
    int r = parse_limit(kind, v, &limit, &like);
    if (r < 0)
        return fail(c, sec, key, e, r, "'%s' is not %s", v, like);
    r = quota_set(q, kind, what, limit);
    if (r == -E2BIG)
        return fail(c, sec, key, e, r, "more than %d limits", QUOTA_MAX);
    if (r < 0)
        return fail(c, sec, key, e, r, "not a limit");
    return 1;
}

/* ---- [gpuqd] and [scheduler] ---- */

/* What the node offers to jobs, where the admin says so (CPUs and memory kept for the system,
 * or a node's declared size); 0 = what the machine has. */
static int load_node(struct config *c, struct gpuqd_config *g, struct errmsg *e)
{
    const char *s = SEC_GPUQD, *v;
    if ((v = config_get(c, s, "cpus")) &&
        (quota_parse_cpus(v, &g->node_cpu_milli) < 0 || g->node_cpu_milli == 0 ||
         g->node_cpu_milli > QUOTA_CPUS_MAX_MILLI))
        return fail(c, s, "cpus", e, -EINVAL, "'%s' is not a number of CPUs (\"32\", \"7.5\")", v);
    if ((v = config_get(c, s, "memory")) &&
        (quota_parse_memory(v, &g->node_mem_bytes) < 0 || g->node_mem_bytes == 0))
        return fail(c, s, "memory", e, -EINVAL, "'%s' is not a size (\"256G\", \"512Gi\")", v);
    return 0;
}

static int load_gpuqd(struct config *c, struct gpuqd_config *g, struct errmsg *e)
{
    const char *s = SEC_GPUQD;
    int r;
    if ((r = get_string(c, s, "socket", GPUQD_DEFAULT_SOCKET, true, &g->socket, e)) < 0 ||
        (r = get_string(c, s, "state_dir", GPUQD_DEFAULT_STATE_DIR, true, &g->state_dir, e)) < 0 ||
        (r = get_string(c, s, "metrics_listen", GPUQD_DEFAULT_METRICS_LISTEN, false,
                        &g->metrics_listen, e)) < 0 ||
        (r = get_string(c, s, "admin_group", NULL, false, &g->admin_group, e)) < 0 ||
        (r = get_string(c, s, "audit_log", GPUQD_DEFAULT_AUDIT_LOG, true, &g->audit_log, e)) < 0 ||
        (r = get_string(c, s, "capsule", NULL, true, &g->capsule, e)) < 0)
        return r;
    if (g->metrics_listen[0]) {
        char host[256];
        uint16_t port;
        struct errmsg why = {""};
        if (parse_listen_address(g->metrics_listen, host, sizeof(host), &port, &why) < 0)
            return fail(c, s, "metrics_listen", e, -EINVAL, "%s", why.text);
    }
    if (g->admin_group) {
        const char *a = g->admin_group;
        bool ok = a[0] && a[0] != '-' && strlen(a) <= 32;
        for (size_t i = 0; ok && a[i]; i++)
            ok = isalnum((unsigned char)a[i]) || strchr("._-", a[i]);
        if (!ok)
            return fail(c, s, "admin_group", e, -EINVAL, "'%s' is not a group name", a);
    }
    r = config_get_duration(c, s, "drain_grace_max", 0.0, &g->drain_grace_max_s, e);
    return r < 0 ? r : load_node(c, g, e);
}

static int load_scheduler(struct config *c, struct sched_config *sc, struct errmsg *e)
{
    const char *s = SEC_SCHEDULER;
    int r = get_string(c, s, "time_zone", NULL, false, &sc->time_zone, e);
    if (r < 0)
        return r;
    if (sc->time_zone && !calendar_zone_valid(sc->time_zone))
        return fail(c, s, "time_zone", e, -EINVAL,
                    "'%s' is not a time zone known here (like Europe/Rome, UTC)", sc->time_zone);
    if ((r = config_get_duration(c, s, "fairshare_half_life", 7 * 86400.0,
                                 &sc->fairshare_half_life_s, e)) < 0 ||
        (r = config_get_duration(c, s, "starve_after", 3600.0, &sc->starve_after_s, e)) < 0 ||
        (r = config_get_duration(c, s, "backoff_base", 10.0, &sc->backoff_base_s, e)) < 0 ||
        (r = config_get_duration(c, s, "backoff_max", 360.0, &sc->backoff_max_s, e)) < 0 ||
        (r = config_get_duration(c, s, "max_grace", 900.0, &sc->max_grace_s, e)) < 0 ||
        (r = config_get_uint(c, s, "max_jobs_per_user", 5000, 1, 1000000, &sc->max_jobs_per_user,
                             e)) < 0)
        return r;
    if (sc->fairshare_half_life_s <= 0)
        return fail(c, s, "fairshare_half_life", e, -EINVAL, "must be longer than 0");
    if (sc->backoff_max_s < sc->backoff_base_s)
        return fail(c, s, config_line(c, s, "backoff_max") ? "backoff_max" : "backoff_base", e,
                    -EINVAL, "backoff_max (%gs) is shorter than backoff_base (%gs)",
                    sc->backoff_max_s, sc->backoff_base_s);
    return get_string(c, s, "default_priority_class", NULL, false, &sc->default_class, e);
}

/* ---- [priority-class.NAME] and [queue.NAME] ---- */

static int load_class(struct config *c, const char *sec, struct sched_config *sc, struct errmsg *e)
{
    struct priority_class *pc = grow(&sc->classes, &sc->n_classes, sizeof(*pc));
    if (!pc)
        return oom(e);
    strcpy(pc->name, sec + strlen(PFX_CLASS));
    int r = get_int(c, sec, "value", 0, &pc->value, e);
    if (r == 0)
        return fail(c, sec, NULL, e, -EINVAL, "value = INTEGER is missing");
    return r < 0 ? r : 0;
}

/* The keys of a queue section that are not quota keys. */
static int load_queue_settings(struct config *c, const char *sec, struct queue *q, struct errmsg *e)
{
    int r = get_int(c, sec, "priority", 0, &q->priority, e);
    if (r < 0)
        return r;
    const char *cls = config_get(c, sec, "class");
    q->class = SERVICE_BURSTABLE;
    if (cls && service_class_from_name(cls, &q->class) < 0)
        return fail(c, sec, "class", e, -EINVAL,
                    "'%s' is not a service class (guaranteed, burstable, besteffort)", cls);
    if ((r = get_time(c, sec, "default_time", &q->default_time_s, e)) < 0 ||
        (r = get_time(c, sec, "max_time", &q->max_time_s, e)) < 0 ||
        (r = get_time(c, sec, "min_runtime", &q->min_runtime_s, e)) < 0)
        return r;
    if (q->max_time_s > 0 && q->default_time_s > q->max_time_s)
        return fail(c, sec, "default_time", e, -EINVAL, "longer than max_time (%s)",
                    config_get(c, sec, "max_time"));
    return 0;
}

static int load_queue(struct config *c, const char *sec, struct sched_config *sc, struct errmsg *e)
{
    struct queue *q = grow(&sc->queues, &sc->n_queues, sizeof(*q));
    if (!q)
        return oom(e);
    strcpy(q->name, sec + strlen(PFX_QUEUE));
    int r = load_queue_settings(c, sec, q, e);
    if (r < 0)
        return r;
    for (const char *k = config_next_key(c, sec, NULL); k; k = config_next_key(c, sec, k)) {
        bool user = strncmp(k, PFX_USER, strlen(PFX_USER)) == 0;
        r = get_limit(c, sec, k, user ? PFX_USER : "", user ? &q->user_limit : &q->quota, e);
        if (r < 0)
            return r;
    }
    return 0;
}

/* ---- [window.NAME] ---- */

static const char *const day_names[] = {"mon", "tue", "wed", "thu", "fri", "sat", "sun"};

static int day_index(const char *s, size_t n)
{
    for (size_t i = 0; i < ELEMENTSOF(day_names); i++)
        if (n == 3 && strncasecmp(s, day_names[i], 3) == 0)
            return (int)i;
    return -1;
}

/* The next comma-separated item of *p, blanks around it trimmed: returns its length and sets
 * *ret to its start, or -1 past the end. Moves *p past the comma. */
static ssize_t next_item(const char **p, const char **ret)
{
    if (!*p)
        return -1;
    const char *s = *p, *comma = strchr(s, ',');
    const char *end = comma ? comma : s + strlen(s);
    *p = comma ? comma + 1 : NULL;
    while (s < end && isblank((unsigned char)*s))
        s++;
    while (end > s && isblank((unsigned char)end[-1]))
        end--;
    *ret = s;
    return end - s;
}

/* "mon-fri", "sat-sun", "mon,wed,fri", "fri-mon" (wraps), "daily"; case-insensitive. */
static int parse_days(const char *v, unsigned *ret, char *why, size_t why_size)
{
    unsigned days = 0;
    const char *p = v, *item;
    ssize_t n;
    while ((n = next_item(&p, &item)) >= 0) {
        unsigned add = 0;
        const char *dash = memchr(item, '-', (size_t)n);
        int a, b;
        if (n == 5 && strncasecmp(item, "daily", 5) == 0)
            add = 0x7f;
        else if (!dash && (a = day_index(item, (size_t)n)) >= 0)
            add = 1u << a;
        else if (dash && (a = day_index(item, (size_t)(dash - item))) >= 0 &&
                 (b = day_index(dash + 1, (size_t)(item + n - dash - 1))) >= 0) {
            for (int d = a;; d = (d + 1) % 7) {
                add |= 1u << d;
                if (d == b)
                    break;
            }
        } else {
            snprintf(why, why_size, "'%.*s' is not a day or a range of days", (int)n, item);
            return -EINVAL;
        }
        if (days & add) {
            snprintf(why, why_size, "'%.*s' names a day a second time", (int)n, item);
            return -EINVAL;
        }
        days |= add;
    }
    *ret = days;
    return 0;
}

static bool leap_year(int y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* "YYYY-MM-DD", a date that exists, years 1970..9999. */
static bool parse_date(const char *s, size_t n, struct cal_date *ret)
{
    static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (n != 10 || s[4] != '-' || s[7] != '-')
        return false;
    for (size_t i = 0; i < n; i++)
        if (i != 4 && i != 7 && !isdigit((unsigned char)s[i]))
            return false;
    int y = atoi(s), m = (s[5] - '0') * 10 + (s[6] - '0'), d = (s[8] - '0') * 10 + (s[9] - '0');
    if (y < 1970 || m < 1 || m > 12 || d < 1)
        return false;
    if (d > mdays[m - 1] + (m == 2 && leap_year(y)))
        return false;
    *ret = (struct cal_date){y, m, d};
    return true;
}

static int date_cmp(const struct cal_date *a, const struct cal_date *b)
{
    int x = a->year * 10000 + a->month * 100 + a->day,
        y = b->year * 10000 + b->month * 100 + b->day;
    return (x > y) - (x < y);
}

/* "2026-12-24..2026-12-26, 2027-01-01": ranges that do not overlap, at most WINDOW_MAX_DATES. */
static int parse_dates(const char *v, struct window *w, char *why, size_t why_size)
{
    const char *p = v, *item;
    ssize_t n;
    w->n_dates = 0;
    while ((n = next_item(&p, &item)) >= 0) {
        const char *dots = n > 2 ? strstr(item, "..") : NULL;
        if (dots && dots >= item + n)
            dots = NULL;
        struct cal_date from, to;
        bool ok = parse_date(item, dots ? (size_t)(dots - item) : (size_t)n, &from);
        if (ok && dots)
            ok = parse_date(dots + 2, (size_t)(item + n - dots - 2), &to);
        else if (ok)
            to = from;
        if (!ok) {
            snprintf(why, why_size, "'%.*s' is not a date (YYYY-MM-DD) or a range of dates", (int)n,
                     item);
            return -EINVAL;
        }
        if (date_cmp(&from, &to) > 0) {
            snprintf(why, why_size, "'%.*s' ends before it starts", (int)n, item);
            return -EINVAL;
        }
        for (unsigned i = 0; i < w->n_dates; i++)
            if (date_cmp(&from, &w->to[i]) <= 0 && date_cmp(&w->from[i], &to) <= 0) {
                snprintf(why, why_size, "'%.*s' repeats dates named before it", (int)n, item);
                return -EINVAL;
            }
        if (w->n_dates == WINDOW_MAX_DATES) {
            snprintf(why, why_size, "more than %d dates or ranges", WINDOW_MAX_DATES);
            return -E2BIG;
        }
        w->from[w->n_dates] = from;
        w->to[w->n_dates++] = to;
    }
    return 0;
}

/* "HH:MM", 00:00..23:59, or 24:00 when allow_24. Minutes after midnight. */
static bool parse_time_of_day(const char *s, bool allow_24, unsigned *ret)
{
    size_t h_len = 0;
    while (isdigit((unsigned char)s[h_len]))
        h_len++;
    if (h_len < 1 || h_len > 2 || s[h_len] != ':' || !isdigit((unsigned char)s[h_len + 1]) ||
        !isdigit((unsigned char)s[h_len + 2]) || s[h_len + 3])
        return false;
    unsigned h = (unsigned)atoi(s), m = (unsigned)atoi(s + h_len + 1);
    if (m > 59 || h > 24 || (h == 24 && (!allow_24 || m != 0)))
        return false;
    *ret = h * 60 + m;
    return true;
}

static int load_window_times(struct config *c, const char *sec, struct window *w, struct errmsg *e)
{
    const char *start = config_get(c, sec, "start"), *end = config_get(c, sec, "end");
    if (!start != !end)
        return fail(c, sec, start ? "start" : "end", e, -EINVAL,
                    "needs %s as well (or neither, for whole days)", start ? "end" : "start");
    if (!start)
        return 0; /* 00:00 to 00:00: the whole day */
    if (!parse_time_of_day(start, false, &w->start_min))
        return fail(c, sec, "start", e, -EINVAL, "'%s' is not a time of day (HH:MM)", start);
    if (!parse_time_of_day(end, true, &w->end_min))
        return fail(c, sec, "end", e, -EINVAL, "'%s' is not a time of day (HH:MM, or 24:00)", end);
    return 0;
}

static int load_window_days(struct config *c, const char *sec, struct window *w, struct errmsg *e)
{
    char why[ERRMSG_MAX / 2];
    const char *days = config_get(c, sec, "days"), *dates = config_get(c, sec, "dates");
    if (!days && !dates)
        return fail(c, sec, NULL, e, -EINVAL, "needs days, dates or both");
    if (days && parse_days(days, &w->days, why, sizeof(why)) < 0)
        return fail(c, sec, "days", e, -EINVAL,
                    "%s (like mon-fri, sat-sun, mon,wed,fri, fri-mon, daily)", why);
    int r;
    if (dates && (r = parse_dates(dates, w, why, sizeof(why))) < 0)
        return fail(c, sec, "dates", e, r, "%s", why);
    return 0;
}

/* The queues a window names, as indexes into sc->queues. */
static int load_window_queues(struct config *c, const char *sec, const struct sched_config *sc,
                              bool *ret_in, struct errmsg *e)
{
    const char *v = config_get(c, sec, "queue");
    if (!v)
        return fail(c, sec, NULL, e, -EINVAL, "queue = NAME is missing");
    const char *p = v, *item;
    ssize_t n;
    while ((n = next_item(&p, &item)) >= 0) {
        char name[QUEUE_NAME_MAX];
        snprintf(name, sizeof(name), "%.*s", (int)n, item);
        const struct queue *q = (size_t)n < sizeof(name) ? sched_config_queue(sc, name) : NULL;
        if (!q)
            return fail(c, sec, "queue", e, -EINVAL, "'%.*s' is not a queue (no [queue.%.*s])",
                        (int)n, item, (int)n, item);
        if (ret_in[q - sc->queues])
            return fail(c, sec, "queue", e, -EINVAL, "'%s' is named twice", name);
        ret_in[q - sc->queues] = true;
    }
    return 0;
}

static int add_window(struct queue *q, const struct window *w)
{
    struct window *nw = grow(&q->windows, &q->n_windows, sizeof(*nw));
    if (!nw)
        return -ENOMEM;
    *nw = *w;
    return 0;
}

static int load_window(struct config *c, const char *sec, struct sched_config *sc, struct errmsg *e)
{
    struct window w = {0};
    snprintf(w.name, sizeof(w.name), "%s", sec + strlen(PFX_WINDOW));
    _cleanup_free_ bool *in = calloc(sc->n_queues ? sc->n_queues : 1, sizeof(*in));
    if (!in)
        return oom(e);
    int r;
    if ((r = load_window_queues(c, sec, sc, in, e)) < 0 ||
        (r = load_window_days(c, sec, &w, e)) < 0 || (r = load_window_times(c, sec, &w, e)) < 0)
        return r;
    for (const char *k = config_next_key(c, sec, NULL); k; k = config_next_key(c, sec, k))
        if ((r = get_limit(c, sec, k, "", &w.quota, e)) < 0)
            return r;
    if (w.quota.n == 0)
        return fail(c, sec, NULL, e, -EINVAL,
                    "sets no limit (gpus, gpus.MODEL, mig.PROFILE, cpus, memory, jobs)");
    for (unsigned i = 0; i < sc->n_queues; i++)
        if (in[i] && add_window(&sc->queues[i], &w) < 0)
            return oom(e);
    return 0;
}

/* ---- sections ---- */

enum section_kind { SECTION_OTHER, SECTION_CLASS, SECTION_QUEUE, SECTION_WINDOW };

/* What a section is; an error for one that is nothing gpuqd knows or whose name is malformed. */
static int section_kind(const struct config *c, const char *sec, enum section_kind *ret,
                        struct errmsg *e)
{
    static const struct {
        const char *prefix;
        enum section_kind kind;
        const char *what;
    } named[] = {
        {PFX_CLASS, SECTION_CLASS, "priority class"},
        {PFX_QUEUE, SECTION_QUEUE, "queue"},
        {PFX_WINDOW, SECTION_WINDOW, "window"},
    };
    *ret = SECTION_OTHER;
    if (strcmp(sec, SEC_GPUQD) == 0 || strcmp(sec, SEC_SCHEDULER) == 0)
        return 0;
    if (!sec[0]) {
        const char *k = config_next_key(c, sec, NULL);
        return errmsg_set(e, -EINVAL, "%s:%u: '%s' is set before any [section]", config_path(c),
                          config_line(c, sec, k), k);
    }
    for (size_t i = 0; i < ELEMENTSOF(named); i++) {
        size_t n = strlen(named[i].prefix);
        if (strncmp(sec, named[i].prefix, n) != 0)
            continue;
        if (!queue_name_valid(sec + n))
            return fail(c, sec, NULL, e, -EINVAL,
                        "'%s' is not a %s name (1..63 of A-Z a-z 0-9 . _ -)", sec + n,
                        named[i].what);
        *ret = named[i].kind;
        return 0;
    }
    return fail(c, sec, NULL, e, -EINVAL,
                "unknown section (gpuqd, scheduler, priority-class.NAME, queue.NAME, "
                "window.NAME)");
}

/* Fails on the first section, in file order, that gpuqd does not know. */
static int check_sections(const struct config *c, struct errmsg *e)
{
    for (const char *s = config_next_section(c, NULL); s; s = config_next_section(c, s)) {
        enum section_kind k;
        int r = section_kind(c, s, &k, e);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Every section of one kind (not SECTION_OTHER), in file order. */
static int load_sections(struct config *c, enum section_kind kind, struct sched_config *sc,
                         struct errmsg *e)
{
    for (const char *s = config_next_section(c, NULL); s; s = config_next_section(c, s)) {
        enum section_kind k;
        if (section_kind(c, s, &k, NULL) < 0 || k != kind)
            continue;
        int r = kind == SECTION_CLASS   ? load_class(c, s, sc, e)
                : kind == SECTION_QUEUE ? load_queue(c, s, sc, e)
                                        : load_window(c, s, sc, e);
        if (r < 0)
            return r;
    }
    return 0;
}

static int load_all(struct config *c, struct gpuqd_config *g, struct errmsg *e)
{
    int r;
    if ((r = check_sections(c, e)) < 0 || (r = load_gpuqd(c, g, e)) < 0 ||
        (r = load_scheduler(c, &g->sched, e)) < 0 ||
        (r = load_sections(c, SECTION_CLASS, &g->sched, e)) < 0 ||
        (r = load_sections(c, SECTION_QUEUE, &g->sched, e)) < 0)
        return r;
    if (g->sched.n_queues == 0)
        return errmsg_set(e, -EINVAL,
                          "%s: no [queue.NAME] section: at least one queue is needed "
                          "(a section counts once it sets a key)",
                          config_path(c));
    if ((r = load_sections(c, SECTION_WINDOW, &g->sched, e)) < 0)
        return r;
    if (g->sched.default_class && !sched_config_class(&g->sched, g->sched.default_class))
        return fail(c, SEC_SCHEDULER, "default_priority_class", e, -EINVAL,
                    "'%s' is not a priority class (no [priority-class.%s])", g->sched.default_class,
                    g->sched.default_class);
    return config_check_unused(c, e);
}

void gpuqd_config_done(struct gpuqd_config *c)
{
    if (!c)
        return;
    free(c->socket);
    free(c->state_dir);
    free(c->metrics_listen);
    free(c->admin_group);
    free(c->audit_log);
    free(c->capsule);
    sched_config_done(&c->sched);
    *c = (struct gpuqd_config){0};
}

static int load_config(struct config *c, struct gpuqd_config *ret, struct errmsg *e)
{
    struct gpuqd_config g = {0};
    int r = load_all(c, &g, e);
    if (r < 0) {
        gpuqd_config_done(&g);
        return r;
    }
    *ret = g;
    return 0;
}

/* No file: every default, and the one queue that jobs without a queue go to. */
static int load_defaults(struct gpuqd_config *ret, struct errmsg *e)
{
    _cleanup_(config_freep) struct config *c = NULL;
    int r = config_load_string("(defaults)", "", 0, &c, e);
    if (r < 0)
        return r;
    struct gpuqd_config g = {0};
    struct queue *q;
    if ((r = load_gpuqd(c, &g, e)) < 0 || (r = load_scheduler(c, &g.sched, e)) < 0) {
        gpuqd_config_done(&g);
        return r;
    }
    if (!(q = grow(&g.sched.queues, &g.sched.n_queues, sizeof(*q)))) {
        gpuqd_config_done(&g);
        return oom(e);
    }
    strcpy(q->name, GPUQD_DEFAULT_QUEUE);
    q->class = SERVICE_BURSTABLE;
    *ret = g;
    return 0;
}

int gpuqd_config_load(const char *path, struct gpuqd_config *ret, struct errmsg *e)
{
    if (!path)
        return load_defaults(ret, e);
    _cleanup_(config_freep) struct config *c = NULL;
    int r = config_load(path, &c, e);
    if (r < 0)
        return r;
    return load_config(c, ret, e);
}

int gpuqd_config_load_string(const char *name, const char *text, size_t len,
                             struct gpuqd_config *ret, struct errmsg *e)
{
    _cleanup_(config_freep) struct config *c = NULL;
    int r = config_load_string(name, text, len, &c, e);
    if (r < 0)
        return r;
    return load_config(c, ret, e);
}
