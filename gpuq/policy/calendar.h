/* Quota calendars: which windows of a queue are open at a moment, the quota in effect, and when
 * that next changes. Wall-clock times (UNIX seconds) in, local time of the configured zone
 * inside, so a window "mon-fri 20:00-08:00" opens at 20:00 on both sides of a DST change, and a
 * start time that a spring-forward skips opens the window at the first minute that exists.
 *
 * Pure apart from reading the zone's rules (tzdata through the C library); thread-safe against
 * each other, with tz.h's caveat about TZ for the rest of the process. */
#pragma once

#include <stdbool.h>
#include <time.h>

#include "gpuq/policy/queue.h"

/* The quota of q at now in zone (NULL: local time): q->quota with every open window laid over it
 * in file order. *ret_window (may be NULL) is the last open window, NULL when none is open.
 * A window is open at now when it starts on a day D (queue.h) and now lies in [start, end) of
 * D's span. Returns 0, -E2BIG (quota_overlay), -ENOMEM or -EOVERFLOW (tz.h); *ret is written
 * only on success. */
int calendar_quota_at(const struct queue *q, const char *zone, time_t now, struct quota *ret,
                      const struct window **ret_window);

/* The first moment after now at which the set of open windows of q changes (a window opens or
 * closes; one that closes and opens again at the same moment does not count), searched up to
 * 400 days ahead. Returns 0 and *ret, -ENOENT when nothing changes in that time (no windows, or
 * only past dates), -ENOMEM or -EOVERFLOW. */
int calendar_next_change(const struct queue *q, const char *zone, time_t now, time_t *ret);

/* Whether zone names a time zone the system knows ("Europe/Rome", "UTC"): a name of
 * [A-Za-z0-9/_+.-] without "..", not absolute, whose tzfile under /usr/share/zoneinfo is a
 * regular file. POSIX rules ("EST5EDT,M3.2.0,M11.1.0") are refused. */
bool calendar_zone_valid(const char *zone);
