/* Local time in a named time zone, through the C library's tz rules (tzdata).
 *
 * The C library converts in one zone per process, the one TZ names. These functions switch TZ
 * to the zone asked for under a process-wide lock and put it back before they return, so a
 * conversion in "Europe/Rome" never sees another thread's "America/New_York". Other code of the
 * process that calls localtime() while a conversion runs may see the zone for that moment:
 * gpunode's own code only formats UTC or monotonic times, and setenv() itself is not safe
 * against a concurrent getenv() in another thread, so call these from threads that own the
 * environment (the daemon's main loop), as glibc's docs ask for setenv().
 *
 * zone NULL everywhere means the host's local time (TZ as the process found it). */
#pragma once

#include <stdbool.h>
#include <time.h>

/* Begins a run of conversions in zone: takes the lock and switches TZ. Until tz_leave(),
 * tz_local_here() and tz_make_here() convert in that zone. Not reentrant. Returns 0, or -ENOMEM
 * (the lock is then not held). */
int tz_enter(const char *zone);
/* Puts TZ back as it was and releases the lock. */
void tz_leave(void);

/* Between tz_enter() and tz_leave(): the local time of t (localtime_r, tm_gmtoff set). Returns 0
 * or -EOVERFLOW for a t the C library cannot represent. */
int tz_local_here(time_t t, struct tm *ret);

/* Between tz_enter() and tz_leave(): the instant the local wall time tm names. tm's fields are
 * normalised as mktime() does ("March 32" is April 1; tm_wday, tm_yday and tm_isdst are ignored).
 * When a fall-back repeats that time, the first of the two instants; when a spring-forward skips
 * it, the instant of the change (the first time that exists after it). Returns 0 and *ret, or
 * -EOVERFLOW. tm is not changed. */
int tz_make_here(const struct tm *tm, time_t *ret);

/* tz_local_here() and tz_make_here() in zone, each in a tz_enter()/tz_leave() of its own.
 * Returns 0, -ENOMEM, -EOVERFLOW. */
int tz_local(const char *zone, time_t t, struct tm *ret);
int tz_make(const char *zone, const struct tm *tm, time_t *ret);
