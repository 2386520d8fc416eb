/* Quota calendars: windows of local time turned into spans of UNIX time; see calendar.h.
 *
 * Days are counted as day numbers (days since 1970-01-01 of the proleptic Gregorian calendar,
 * the date alone, no zone). A window's span for day D runs from D's local start time to its end
 * time (on D or D + 1), each converted by tz_make_here(), which settles DST gaps and repeats.
 * Every conversion of one call runs inside one tz_enter(), so TZ switches twice per call. */
#include "gpuq/policy/calendar.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "gpuq/policy/tz.h"
#include "lib/macro.h"

#define DAY_S           86400
#define CAL_SEARCH_DAYS 400
/* Local times lie within this much of UTC (tz.c says why 26 h). */
#define CAL_MAX_OFFSET_S (26 * 3600)
/* The days looked at before a moment's local date: a window that starts on D ends on D + 1 at
 * the latest, so D - 1 suffices; D - 2 covers a fall-back that repeats local midnight. */
#define CAL_DAYS_BEFORE   2
#define CAL_ZONEINFO      "/usr/share/zoneinfo"
#define CAL_ZONE_NAME_MAX 255

struct span {
    time_t start, end;
};

/* The UTC calendar fields of day number day (the date itself, no zone involved). */
static void day_fields(long day, struct tm *ret)
{
    time_t t = (time_t)day * DAY_S;
    gmtime_r(&t, ret);
}

/* The day number of a local date (struct tm's year and month conventions). */
static long day_number(const struct tm *local)
{
    struct tm d = {.tm_year = local->tm_year, .tm_mon = local->tm_mon, .tm_mday = local->tm_mday};
    time_t t = timegm(&d);
    return (long)(t >= 0 ? t / DAY_S : (t - DAY_S + 1) / DAY_S);
}

static int date_key(int year, int month, int day)
{
    return year * 10000 + month * 100 + day;
}

/* Whether window w starts on the day whose fields are tm. */
static bool window_on_day(const struct window *w, const struct tm *tm)
{
    if (w->days) {
        unsigned weekday = (unsigned)(tm->tm_wday + 6) % 7; /* Monday 0 */
        if (!(w->days & (1u << weekday)))
            return false;
    } else if (w->n_dates == 0)
        return false;
    if (w->n_dates == 0)
        return true;
    int k = date_key(tm->tm_year + 1900, tm->tm_mon + 1, tm->tm_mday);
    for (unsigned i = 0; i < w->n_dates && i < WINDOW_MAX_DATES; i++)
        if (date_key(w->from[i].year, w->from[i].month, w->from[i].day) <= k &&
            k <= date_key(w->to[i].year, w->to[i].month, w->to[i].day))
            return true;
    return false;
}

/* The span of w that starts on day: returns 1 and *ret, 0 when w does not start that day, or a
 * negative errno. Inside tz_enter(). */
static int window_span(const struct window *w, long day, struct span *ret)
{
    struct tm tm;
    day_fields(day, &tm);
    if (!window_on_day(w, &tm))
        return 0;
    struct tm at = {.tm_year = tm.tm_year, .tm_mon = tm.tm_mon, .tm_mday = tm.tm_mday};
    at.tm_min = (int)w->start_min;
    struct span s;
    int r = tz_make_here(&at, &s.start);
    if (r < 0)
        return r;
    at.tm_min = (int)w->end_min;
    if (w->end_min <= w->start_min)
        at.tm_mday++;
    r = tz_make_here(&at, &s.end);
    if (r < 0)
        return r;
    *ret = s;
    return 1;
}

/* The day number of t's local date. Inside tz_enter(). */
static int local_day(time_t t, long *ret)
{
    struct tm tm;
    int r = tz_local_here(t, &tm);
    if (r < 0)
        return r;
    *ret = day_number(&tm);
    return 0;
}

/* Whether w is open at t, whose local date is day. Inside tz_enter(). */
static int window_open(const struct window *w, time_t t, long day, bool *ret)
{
    for (long d = day - CAL_DAYS_BEFORE; d <= day + 1; d++) {
        struct span s;
        int r = window_span(w, d, &s);
        if (r < 0)
            return r;
        if (r > 0 && s.start <= t && t < s.end) {
            *ret = true;
            return 0;
        }
    }
    *ret = false;
    return 0;
}

int calendar_quota_at(const struct queue *q, const char *zone, time_t now, struct quota *ret,
                      const struct window **ret_window)
{
    int r = tz_enter(zone);
    if (r < 0)
        return r;
    struct quota out = q->quota;
    const struct window *last = NULL;
    long day;
    r = local_day(now, &day);
    for (unsigned i = 0; r >= 0 && i < q->n_windows; i++) {
        bool open;
        r = window_open(&q->windows[i], now, day, &open);
        if (r >= 0 && open) {
            r = quota_overlay(&out, &q->windows[i].quota);
            last = &q->windows[i];
        }
    }
    tz_leave();
    if (r < 0)
        return r;
    *ret = out;
    if (ret_window)
        *ret_window = last;
    return 0;
}

/* What calendar_next_change() builds: each window's spans in order of their start (a window's
 * spans never overlap: one ends at the latest where the next starts), and the boundaries not yet
 * looked at. */
struct cal_search {
    const struct queue *q;
    unsigned cap;       /* spans per window */
    struct span *spans; /* window i's at spans[i * cap] */
    unsigned *n_spans;
    time_t *pending; /* boundaries after now not yet looked at, unsorted */
    size_t n_pending;
    bool *open, *was; /* per window: at the boundary looked at, and before it */
};

static void cal_search_done(struct cal_search *s)
{
    free(s->spans);
    free(s->n_spans);
    free(s->pending);
    free(s->open);
    free(s->was);
}

static int cal_search_init(struct cal_search *s, const struct queue *q)
{
    unsigned n = q->n_windows;
    *s = (struct cal_search){.q = q, .cap = CAL_SEARCH_DAYS + 8};
    s->spans = calloc((size_t)n * s->cap, sizeof(*s->spans));
    s->n_spans = calloc(n, sizeof(*s->n_spans));
    s->pending = calloc((size_t)n * s->cap * 2, sizeof(*s->pending));
    s->open = calloc(n, sizeof(*s->open));
    s->was = calloc(n, sizeof(*s->was));
    if (!s->spans || !s->n_spans || !s->pending || !s->open || !s->was) {
        cal_search_done(s);
        return -ENOMEM;
    }
    return 0;
}

/* Adds every window's span of day, and its boundaries after now to the pending ones. */
static int cal_search_add_day(struct cal_search *s, long day, time_t now)
{
    for (unsigned i = 0; i < s->q->n_windows; i++) {
        struct span sp;
        int r = window_span(&s->q->windows[i], day, &sp);
        if (r < 0)
            return r;
        if (r == 0 || s->n_spans[i] >= s->cap)
            continue;
        s->spans[(size_t)i * s->cap + s->n_spans[i]++] = sp;
        if (sp.start > now)
            s->pending[s->n_pending++] = sp.start;
        if (sp.end > now)
            s->pending[s->n_pending++] = sp.end;
    }
    return 0;
}

/* Fills s->open with the windows open at t, from the spans built so far. */
static void cal_search_open_at(struct cal_search *s, time_t t)
{
    for (unsigned i = 0; i < s->q->n_windows; i++) {
        const struct span *sp = &s->spans[(size_t)i * s->cap];
        /* The last span that starts at or before t is the only one that can hold it. */
        unsigned lo = 0, hi = s->n_spans[i];
        while (lo < hi) {
            unsigned mid = lo + (hi - lo) / 2;
            if (sp[mid].start <= t)
                lo = mid + 1;
            else
                hi = mid;
        }
        s->open[i] = lo > 0 && t < sp[lo - 1].end;
    }
}

static int cmp_time(const void *a, const void *b)
{
    time_t x = *(const time_t *)a, y = *(const time_t *)b;
    return (x > y) - (x < y);
}

/* Looks at the pending boundaries before cut, in order: returns 1 and *ret at the first where
 * the open windows differ from before it, else 0 and keeps those at or after cut. */
static int cal_search_step(struct cal_search *s, time_t cut, time_t *ret)
{
    qsort(s->pending, s->n_pending, sizeof(*s->pending), cmp_time);
    size_t i = 0;
    for (; i < s->n_pending && s->pending[i] < cut; i++) {
        cal_search_open_at(s, s->pending[i]);
        if (memcmp(s->open, s->was, s->q->n_windows * sizeof(*s->open)) != 0) {
            *ret = s->pending[i];
            return 1;
        }
    }
    memmove(s->pending, s->pending + i, (s->n_pending - i) * sizeof(*s->pending));
    s->n_pending -= i;
    return 0;
}

/* calendar_next_change() inside tz_enter(). The spans are built day by day; after day D, no
 * span of a later day can start before D + 1's local midnight, so the boundaries before that
 * (less the widest UTC offset) are final and are looked at in order. */
static int next_change(struct cal_search *s, time_t now, time_t *ret)
{
    long today;
    int r = local_day(now, &today);
    if (r < 0)
        return r;
    time_t horizon = now + (time_t)CAL_SEARCH_DAYS * DAY_S;
    for (long d = today - CAL_DAYS_BEFORE; d <= today + CAL_SEARCH_DAYS + 3; d++) {
        r = cal_search_add_day(s, d, now);
        if (r < 0)
            return r;
        if (d < today + 1)
            continue;
        if (d == today + 1) {
            cal_search_open_at(s, now);
            memcpy(s->was, s->open, s->q->n_windows * sizeof(*s->open));
        }
        time_t cut = (time_t)(d + 1) * DAY_S - CAL_MAX_OFFSET_S;
        if (cut > horizon)
            cut = horizon + 1;
        r = cal_search_step(s, cut, ret);
        if (r != 0)
            return r > 0 ? 0 : r;
        if (cut > horizon)
            break;
    }
    return -ENOENT;
}

int calendar_next_change(const struct queue *q, const char *zone, time_t now, time_t *ret)
{
    if (q->n_windows == 0)
        return -ENOENT;
    struct cal_search s;
    int r = cal_search_init(&s, q);
    if (r < 0)
        return r;
    r = tz_enter(zone);
    if (r >= 0) {
        r = next_change(&s, now, ret);
        tz_leave();
    }
    cal_search_done(&s);
    return r;
}

bool calendar_zone_valid(const char *zone)
{
    if (!zone || !zone[0] || strlen(zone) > CAL_ZONE_NAME_MAX || zone[0] == '/')
        return false;
    if (strcmp(zone, "UTC") == 0)
        return true;
    /* A name, not a path out of the zone folder, and nothing glibc would read as a POSIX TZ
     * rule ("EST5EDT,M3.2.0,M11.1.0") or a file (":/etc/localtime"). */
    for (const char *p = zone; *p; p++)
        if (!(*p >= 'A' && *p <= 'Z') && !(*p >= 'a' && *p <= 'z') && !(*p >= '0' && *p <= '9') &&
            !strchr("/_+-.", *p))
            return false;
    if (strstr(zone, "..") || strstr(zone, "//") || zone[strlen(zone) - 1] == '/')
        return false;
    char path[sizeof(CAL_ZONEINFO) + CAL_ZONE_NAME_MAX + 1];
    snprintf(path, sizeof(path), "%s/%s", CAL_ZONEINFO, zone);
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}
