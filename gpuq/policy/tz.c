/* Conversions in a named time zone through TZ and tzset(); see tz.h. */
#include "gpuq/policy/tz.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* UTC offsets of real zones lie within -12 h..+14 h (local mean times of the 19th century a
 * little past that); a span of this many seconds each side of a wall time holds its instant. */
#define TZ_MAX_OFFSET_S (26 * 3600)

static pthread_mutex_t tz_lock = PTHREAD_MUTEX_INITIALIZER;
/* Under tz_lock while entered: TZ as it was, and whether it was set at all. */
static char *tz_saved;
static bool tz_was_set;
static bool tz_switched;

int tz_enter(const char *zone)
{
    pthread_mutex_lock(&tz_lock);
    tz_switched = false;
    if (zone) {
        const char *old = getenv("TZ");
        tz_was_set = old != NULL;
        tz_saved = old ? strdup(old) : NULL;
        if ((old && !tz_saved) || setenv("TZ", zone, 1) < 0) {
            free(tz_saved);
            tz_saved = NULL;
            pthread_mutex_unlock(&tz_lock);
            return -ENOMEM;
        }
        tz_switched = true;
    }
    /* localtime_r() need not read TZ again (glibc's does not); tzset() makes it. */
    tzset();
    return 0;
}

void tz_leave(void)
{
    if (tz_switched) {
        if (tz_was_set)
            setenv("TZ", tz_saved, 1);
        else
            unsetenv("TZ");
        free(tz_saved);
        tz_saved = NULL;
        tz_switched = false;
        tzset();
    }
    pthread_mutex_unlock(&tz_lock);
}

int tz_local_here(time_t t, struct tm *ret)
{
    if (!localtime_r(&t, ret))
        return -EOVERFLOW;
    return 0;
}

/* The wall time of instant t, counted as seconds the way timegm() counts a UTC time. */
static int wall_of(time_t t, time_t *ret)
{
    struct tm tm;
    if (!localtime_r(&t, &tm))
        return -EOVERFLOW;
    *ret = t + tm.tm_gmtoff;
    return 0;
}

/* The first instant in [lo, hi] whose wall time is past wall: the moment of a spring-forward
 * that skips wall. Wall time only rises within the span (one change at most). */
static int first_after(time_t wall, time_t lo, time_t hi, time_t *ret)
{
    while (lo < hi) {
        time_t mid = lo + (hi - lo) / 2, w;
        int r = wall_of(mid, &w);
        if (r < 0)
            return r;
        if (w > wall)
            hi = mid;
        else
            lo = mid + 1;
    }
    *ret = lo;
    return 0;
}

int tz_make_here(const struct tm *tm, time_t *ret)
{
    struct tm w = *tm;
    w.tm_isdst = 0;
    time_t wall = timegm(&w);
    if (wall == (time_t)-1 && !(w.tm_year == 69 && w.tm_yday == 364))
        return -EOVERFLOW;

    /* mktime() picks one instant when a fall-back repeats the time and an unspecified one when
     * a spring-forward skips it; the offsets in force a day either side give every instant
     * that can carry this wall time, and the earliest that does is the answer. */
    struct tm guess_tm = *tm;
    guess_tm.tm_isdst = -1;
    time_t cand[4] = {mktime(&guess_tm), 0, 0, 0};
    static const time_t probes[] = {-86400, 0, 86400};
    for (size_t i = 0; i < 3; i++) {
        time_t pw;
        if (wall_of(wall + probes[i], &pw) < 0)
            return -EOVERFLOW;
        cand[i + 1] = wall - (pw - (wall + probes[i]));
    }
    bool found = false;
    time_t best = 0;
    for (size_t i = 0; i < 4; i++) {
        time_t cw;
        if (wall_of(cand[i], &cw) < 0 || cw != wall)
            continue;
        if (!found || cand[i] < best)
            best = cand[i];
        found = true;
    }
    if (!found) {
        int r = first_after(wall, wall - TZ_MAX_OFFSET_S, wall + TZ_MAX_OFFSET_S, &best);
        if (r < 0)
            return r;
    }
    *ret = best;
    return 0;
}

int tz_local(const char *zone, time_t t, struct tm *ret)
{
    int r = tz_enter(zone);
    if (r < 0)
        return r;
    r = tz_local_here(t, ret);
    tz_leave();
    return r;
}

int tz_make(const char *zone, const struct tm *tm, time_t *ret)
{
    int r = tz_enter(zone);
    if (r < 0)
        return r;
    r = tz_make_here(tm, ret);
    tz_leave();
    return r;
}
