/* Tests for the quota calendar and tz.c: windows in Europe/Rome and America/New_York across
 * both of 2026's DST changes, as a queue's users see them: when the night quota starts and
 * ends, what a Saturday morning gets, what holidays get, and the exact moment the next change
 * comes. Times in the tables are UTC. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "gpuq/policy/calendar.h"
#include "gpuq/policy/tz.h"
#include "lib/macro.h"

#define SAT      0x20u
#define SUN      0x40u
#define WEEKDAYS 0x1fu
#define WEEKEND  (SAT | SUN)
#define DAILY    0x7fu
#define HM(h, m) ((h)*60u + (m))
#define GPUS(v)                                                                                    \
    {                                                                                              \
        .n = 1, .l = { {.kind = QUOTA_GPUS, .limit = (v)} }                                        \
    }
#define BASE_GPUS 2

/* "2026-03-27 19:00" (UTC) as UNIX time. */
static time_t utc(const char *s)
{
    struct tm tm = {0};
    int n = sscanf(s, "%d-%d-%d %d:%d:%d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
                   &tm.tm_min, &tm.tm_sec);
    assert_true(n >= 5);
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return timegm(&tm);
}

static char *fmt_utc(time_t t, char buf[32])
{
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(buf, 32, "%Y-%m-%d %H:%M:%S", &tm);
    return buf;
}

struct at {
    const char *utc;
    uint64_t gpus; /* the quota in effect: BASE_GPUS when no window is open */
};

struct next {
    const char *from, *to; /* to NULL: -ENOENT */
};

struct cal_case {
    const char *name;
    const char *zone;
    unsigned n_windows;
    struct window windows[3];
    struct at at[12];
    struct next next[8];
};

static const struct cal_case cases[] = {
    {
        "Rome: weekday nights 20:00-08:00 across the spring change",
        "Europe/Rome",
        1,
        {{.name = "nights",
          .days = WEEKDAYS,
          .start_min = HM(20, 0),
          .end_min = HM(8, 0),
          .quota = GPUS(8)}},
        {
            {"2026-03-27 18:59:59", BASE_GPUS}, /* Friday 19:59:59 CET */
            {"2026-03-27 19:00", 8},            /* Friday 20:00 CET */
            {"2026-03-28 06:59:59", 8},         /* Saturday 07:59 CET: Friday's night */
            {"2026-03-28 07:00", BASE_GPUS},    /* Saturday 08:00 */
            {"2026-03-29 19:00", BASE_GPUS},    /* Sunday 21:00 CEST: no night starts */
            {"2026-03-30 17:59:59", BASE_GPUS}, /* Monday 19:59:59 CEST */
            {"2026-03-30 18:00", 8},            /* Monday 20:00 CEST */
            {"2026-03-31 05:59:59", 8},         /* Tuesday 07:59 CEST */
            {"2026-03-31 06:00", BASE_GPUS},
        },
        {
            {"2026-03-27 12:00", "2026-03-27 19:00"},
            {"2026-03-27 19:00", "2026-03-28 07:00"},
            {"2026-03-28 07:00", "2026-03-30 18:00"}, /* over the weekend and the change */
            {"2026-03-30 18:00", "2026-03-31 06:00"},
        },
    },
    {
        "Rome: weekday nights across the autumn change",
        "Europe/Rome",
        1,
        {{.name = "nights",
          .days = WEEKDAYS,
          .start_min = HM(20, 0),
          .end_min = HM(8, 0),
          .quota = GPUS(8)}},
        {
            {"2026-10-23 18:00", 8},         /* Friday 20:00 CEST */
            {"2026-10-24 05:59", 8},         /* Saturday 07:59 CEST */
            {"2026-10-24 06:00", BASE_GPUS}, /* Saturday 08:00 CEST */
            {"2026-10-26 18:59", BASE_GPUS}, /* Monday 19:59 CET */
            {"2026-10-26 19:00", 8},         /* Monday 20:00 CET */
            {"2026-10-27 07:00", BASE_GPUS}, /* Tuesday 08:00 CET */
        },
        {
            {"2026-10-23 12:00", "2026-10-23 18:00"},
            {"2026-10-24 06:00", "2026-10-26 19:00"},
            {"2026-10-26 19:00", "2026-10-27 07:00"},
        },
    },
    {
        "Rome: weekends, whole days, 23 and 25 hours long",
        "Europe/Rome",
        1,
        {{.name = "weekend", .days = WEEKEND, .quota = GPUS(16)}},
        {
            {"2026-03-27 22:59:59", BASE_GPUS},
            {"2026-03-27 23:00", 16}, /* Saturday 00:00 CET */
            {"2026-03-29 21:59:59", 16},
            {"2026-03-29 22:00", BASE_GPUS}, /* Monday 00:00 CEST */
            {"2026-10-23 22:00", 16},        /* Saturday 00:00 CEST */
            {"2026-10-25 22:59:59", 16},     /* Sunday 23:59:59 CET */
            {"2026-10-25 23:00", BASE_GPUS}, /* Monday 00:00 CET */
        },
        {
            {"2026-03-27 12:00", "2026-03-27 23:00"},
            /* Saturday's end is Sunday's start: the set of open windows does not change */
            {"2026-03-28 00:00", "2026-03-29 22:00"},
            {"2026-03-29 22:00", "2026-04-03 22:00"},
            {"2026-10-24 12:00", "2026-10-25 23:00"},
        },
    },
    {
        "Rome: a start the spring change skips, an end the autumn change repeats",
        "Europe/Rome",
        2,
        {
            /* 02:30 does not exist on 29 March: opens at the change, 03:00 CEST */
            {.name = "gap",
             .n_dates = 1,
             .from = {{2026, 3, 29}},
             .to = {{2026, 3, 29}},
             .start_min = HM(2, 30),
             .end_min = HM(4, 0),
             .quota = GPUS(5)},
            /* 02:30 comes twice on 25 October: ends at the first, 00:30 UTC */
            {.name = "repeat",
             .n_dates = 1,
             .from = {{2026, 10, 25}},
             .to = {{2026, 10, 25}},
             .start_min = HM(0, 0),
             .end_min = HM(2, 30),
             .quota = GPUS(6)},
        },
        {
            {"2026-03-29 00:59:59", BASE_GPUS},
            {"2026-03-29 01:00", 5},
            {"2026-03-29 01:59:59", 5},
            {"2026-03-29 02:00", BASE_GPUS}, /* 04:00 CEST */
            {"2026-10-24 21:59:59", BASE_GPUS},
            {"2026-10-24 22:00", 6}, /* 00:00 CEST */
            {"2026-10-25 00:29:59", 6},
            {"2026-10-25 00:30", BASE_GPUS},
            {"2026-10-25 01:15", BASE_GPUS}, /* 02:15 CET, the second time round */
        },
        {
            {"2026-03-29 00:00", "2026-03-29 01:00"},
            {"2026-03-29 01:00", "2026-03-29 02:00"},
            {"2026-03-29 02:00", "2026-10-24 22:00"},
            {"2026-10-24 22:00", "2026-10-25 00:30"},
            {"2026-10-25 00:30", NULL},
        },
    },
    {
        "New York: weekday nights across both changes",
        "America/New_York",
        1,
        {{.name = "nights",
          .days = WEEKDAYS,
          .start_min = HM(20, 0),
          .end_min = HM(8, 0),
          .quota = GPUS(8)}},
        {
            {"2026-03-07 01:00", 8},         /* Friday 20:00 EST */
            {"2026-03-07 12:59", 8},         /* Saturday 07:59 EST */
            {"2026-03-07 13:00", BASE_GPUS}, /* Saturday 08:00 EST */
            {"2026-03-09 23:59", BASE_GPUS}, /* Monday 19:59 EDT */
            {"2026-03-10 00:00", 8},         /* Monday 20:00 EDT */
            {"2026-03-10 12:00", BASE_GPUS}, /* Tuesday 08:00 EDT */
            {"2026-10-31 00:00", 8},         /* Friday 20:00 EDT */
            {"2026-10-31 12:00", BASE_GPUS}, /* Saturday 08:00 EDT */
            {"2026-11-03 01:00", 8},         /* Monday 20:00 EST */
        },
        {
            {"2026-03-06 12:00", "2026-03-06 13:00"}, /* Thursday's night ends, 08:00 EST */
            {"2026-03-06 13:00", "2026-03-07 01:00"},
            {"2026-03-07 13:00", "2026-03-10 00:00"},
            {"2026-03-10 00:00", "2026-03-10 12:00"},
            {"2026-10-31 12:00", "2026-11-03 01:00"},
            {"2026-11-03 01:00", "2026-11-03 13:00"},
        },
    },
    {
        "New York: a skipped start and a repeated start",
        "America/New_York",
        2,
        {
            /* 02:15 does not exist on 8 March: opens at 03:00 EDT, 07:00 UTC */
            {.name = "gap",
             .n_dates = 1,
             .from = {{2026, 3, 8}},
             .to = {{2026, 3, 8}},
             .start_min = HM(2, 15),
             .end_min = HM(5, 0),
             .quota = GPUS(5)},
            /* 01:30 comes twice on 1 November: starts at the first (EDT); 02:30 is EST */
            {.name = "repeat",
             .n_dates = 1,
             .from = {{2026, 11, 1}},
             .to = {{2026, 11, 1}},
             .start_min = HM(1, 30),
             .end_min = HM(2, 30),
             .quota = GPUS(6)},
        },
        {
            {"2026-03-08 06:59:59", BASE_GPUS},
            {"2026-03-08 07:00", 5},
            {"2026-03-08 08:59:59", 5},
            {"2026-03-08 09:00", BASE_GPUS}, /* 05:00 EDT */
            {"2026-11-01 05:29:59", BASE_GPUS},
            {"2026-11-01 05:30", 6}, /* 01:30 EDT */
            {"2026-11-01 06:45", 6}, /* 01:45 EST */
            {"2026-11-01 07:29:59", 6},
            {"2026-11-01 07:30", BASE_GPUS}, /* 02:30 EST */
        },
        {
            {"2026-03-08 00:00", "2026-03-08 07:00"},
            {"2026-03-08 07:00", "2026-03-08 09:00"},
            {"2026-11-01 05:30", "2026-11-01 07:30"},
        },
    },
    {
        "Rome: Christmas, a range of whole days, over nights",
        "Europe/Rome",
        2,
        {
            {.name = "nights",
             .days = DAILY,
             .start_min = HM(20, 0),
             .end_min = HM(8, 0),
             .quota = GPUS(8)},
            {.name = "christmas",
             .n_dates = 1,
             .from = {{2026, 12, 24}},
             .to = {{2026, 12, 26}},
             .quota = GPUS(0)},
        },
        {
            {"2026-12-23 21:00", 8},         /* 22:00 CET: nights */
            {"2026-12-23 23:00", 0},         /* 24 December 00:00: Christmas, over nights */
            {"2026-12-25 12:00", 0},         /* Christmas Day noon */
            {"2026-12-26 22:59:59", 0},      /* 26 December 23:59:59 */
            {"2026-12-26 23:00", 8},         /* 27 December 00:00: the 26th's night */
            {"2026-12-27 07:00", BASE_GPUS}, /* 08:00 */
        },
        {
            {"2026-12-23 12:00", "2026-12-23 19:00"},
            /* nights closes and reopens in the holiday; the set changes each time */
            {"2026-12-23 23:00", "2026-12-24 07:00"},
            {"2026-12-24 07:00", "2026-12-24 19:00"},
            {"2026-12-26 20:00", "2026-12-26 23:00"},
            {"2026-12-26 23:00", "2026-12-27 07:00"},
        },
    },
    {
        "UTC: weekends in December only (days and dates both)",
        "UTC",
        1,
        {{.name = "dec-weekends",
          .days = WEEKEND,
          .n_dates = 1,
          .from = {{2026, 12, 1}},
          .to = {{2026, 12, 31}},
          .quota = GPUS(4)}},
        {
            {"2026-11-28 12:00", BASE_GPUS}, /* a Saturday in November */
            {"2026-12-04 12:00", BASE_GPUS}, /* a Friday in December */
            {"2026-12-05 00:00", 4},         /* Saturday */
            {"2026-12-06 23:59:59", 4},
            {"2026-12-07 00:00", BASE_GPUS},
        },
        {
            {"2026-11-20 00:00", "2026-12-05 00:00"},
            {"2026-12-05 00:00", "2026-12-07 00:00"},
            {"2026-12-26 00:00", "2026-12-28 00:00"},
            {"2026-12-28 00:00", NULL}, /* no December weekend left */
        },
    },
};

static void check_case(const struct cal_case *c)
{
    struct queue q = {.name = "batch", .n_windows = c->n_windows};
    q.windows = (struct window *)c->windows;
    assert_int_equal(quota_set(&q.quota, QUOTA_GPUS, "", BASE_GPUS), 0);
    char buf[32];
    for (size_t i = 0; i < ELEMENTSOF(c->at) && c->at[i].utc; i++) {
        struct quota got;
        const struct window *w = (const void *)1;
        assert_int_equal(calendar_quota_at(&q, c->zone, utc(c->at[i].utc), &got, &w), 0);
        if (quota_get(&got, QUOTA_GPUS, "") != c->at[i].gpus)
            fail_msg("%s: at %s: gpus %" PRIu64 ", expected %" PRIu64, c->name, c->at[i].utc,
                     quota_get(&got, QUOTA_GPUS, ""), c->at[i].gpus);
        assert_true((w == NULL) == (c->at[i].gpus == BASE_GPUS));
    }
    for (size_t i = 0; i < ELEMENTSOF(c->next) && c->next[i].from; i++) {
        time_t got = 0;
        int r = calendar_next_change(&q, c->zone, utc(c->next[i].from), &got);
        if (!c->next[i].to) {
            if (r != -ENOENT)
                fail_msg("%s: after %s: %d %s, expected no change", c->name, c->next[i].from, r,
                         fmt_utc(got, buf));
            continue;
        }
        if (r != 0 || got != utc(c->next[i].to))
            fail_msg("%s: after %s: %d %s, expected %s", c->name, c->next[i].from, r,
                     fmt_utc(got, buf), c->next[i].to);
    }
}

static void test_table(void **state)
{
    for (size_t i = 0; i < ELEMENTSOF(cases); i++)
        check_case(&cases[i]);
}

/* Later windows win key by key; the last open one is reported. */
static void test_overlap_order(void **state)
{
    struct window w[2] = {
        {.name = "nights", .days = WEEKDAYS, .start_min = HM(20, 0), .end_min = HM(8, 0)},
        {.name = "weekend", .days = WEEKEND},
    };
    assert_int_equal(quota_set(&w[0].quota, QUOTA_GPUS, "", 8), 0);
    assert_int_equal(quota_set(&w[0].quota, QUOTA_CPUS, "", 64000), 0);
    assert_int_equal(quota_set(&w[1].quota, QUOTA_GPUS, "", 16), 0);
    struct queue q = {.name = "batch", .n_windows = 2, .windows = w};
    assert_int_equal(quota_set(&q.quota, QUOTA_GPUS, "", 2), 0);
    assert_int_equal(quota_set(&q.quota, QUOTA_MEMORY, "", 1 << 30), 0);

    /* Saturday 07:00 in Rome: Friday's night and the weekend are both open */
    time_t sat = utc("2026-03-28 06:00");
    struct quota got;
    const struct window *last;
    assert_int_equal(calendar_quota_at(&q, "Europe/Rome", sat, &got, &last), 0);
    assert_int_equal(quota_get(&got, QUOTA_GPUS, ""), 16);
    assert_int_equal(quota_get(&got, QUOTA_CPUS, ""), 64000);
    assert_int_equal(quota_get(&got, QUOTA_MEMORY, ""), 1 << 30);
    assert_ptr_equal(last, &w[1]);

    /* the other order: the night's 8 GPUs win */
    struct window swapped[2] = {w[1], w[0]};
    q.windows = swapped;
    assert_int_equal(calendar_quota_at(&q, "Europe/Rome", sat, &got, &last), 0);
    assert_int_equal(quota_get(&got, QUOTA_GPUS, ""), 8);
    assert_ptr_equal(last, &swapped[1]);
    /* Saturday 08:00: the night is over, the weekend goes on */
    time_t t;
    assert_int_equal(calendar_next_change(&q, "Europe/Rome", sat, &t), 0);
    assert_int_equal(t, utc("2026-03-28 07:00"));
    assert_int_equal(calendar_quota_at(&q, "Europe/Rome", t, &got, &last), 0);
    assert_int_equal(quota_get(&got, QUOTA_GPUS, ""), 16);
}

static void test_nothing_changes(void **state)
{
    struct queue q = {.name = "q"};
    time_t t = 0, now = utc("2026-06-01 00:00");
    assert_int_equal(calendar_next_change(&q, "UTC", now, &t), -ENOENT);
    struct quota got;
    const struct window *last = (const void *)1;
    assert_int_equal(calendar_quota_at(&q, "UTC", now, &got, &last), 0);
    assert_null(last);
    assert_int_equal(got.n, 0);

    /* open every day, all day: it never closes */
    struct window always = {.name = "always", .days = DAILY, .quota = GPUS(1)};
    q = (struct queue){.name = "q", .n_windows = 1, .windows = &always};
    assert_int_equal(calendar_next_change(&q, "Europe/Rome", now, &t), -ENOENT);
    assert_int_equal(calendar_quota_at(&q, "Europe/Rome", now, &got, NULL), 0);
    assert_int_equal(quota_get(&got, QUOTA_GPUS, ""), 1);

    /* a date more than 400 days ahead is past the search */
    struct window later = {.name = "later",
                           .n_dates = 1,
                           .from = {{2027, 12, 1}},
                           .to = {{2027, 12, 1}},
                           .quota = GPUS(1)};
    q.windows = &later;
    assert_int_equal(calendar_next_change(&q, "UTC", now, &t), -ENOENT);
    assert_int_equal(calendar_next_change(&q, "UTC", utc("2026-11-01 00:00"), &t), 0);
    assert_int_equal(t, utc("2027-12-01 00:00"));

    /* days 0 and no dates: never open */
    struct window never = {.name = "never", .quota = GPUS(1)};
    q.windows = &never;
    assert_int_equal(calendar_next_change(&q, "UTC", now, &t), -ENOENT);
}

/* The host's zone (zone NULL) is TZ as the process has it, and a named zone leaves TZ as it
 * was. */
static void test_host_zone_and_tz_restored(void **state)
{
    struct window nights = {.name = "nights",
                            .days = DAILY,
                            .start_min = HM(20, 0),
                            .end_min = HM(8, 0),
                            .quota = GPUS(8)};
    struct queue q = {.name = "q", .n_windows = 1, .windows = &nights};
    time_t t;
    assert_int_equal(setenv("TZ", "America/New_York", 1), 0);
    tzset();
    assert_int_equal(calendar_next_change(&q, NULL, utc("2026-07-01 12:00"), &t), 0);
    assert_int_equal(t, utc("2026-07-02 00:00")); /* 20:00 EDT */
    assert_int_equal(calendar_next_change(&q, "Europe/Rome", utc("2026-07-01 12:00"), &t), 0);
    assert_int_equal(t, utc("2026-07-01 18:00")); /* 20:00 CEST */
    assert_string_equal(getenv("TZ"), "America/New_York");
    struct tm tm;
    time_t noon = utc("2026-07-01 16:00");
    localtime_r(&noon, &tm);
    assert_int_equal(tm.tm_hour, 12);

    assert_int_equal(unsetenv("TZ"), 0);
    assert_int_equal(tz_local("Asia/Tokyo", noon, &tm), 0);
    assert_int_equal(tm.tm_hour, 1);
    assert_null(getenv("TZ"));
}

static void test_tz_make(void **state)
{
    static const struct {
        const char *zone;
        int y, mon, d, h, m;
        const char *utc;
    } conv[] = {
        {"Europe/Rome", 2026, 3, 29, 1, 59, "2026-03-29 00:59"},
        {"Europe/Rome", 2026, 3, 29, 2, 0, "2026-03-29 01:00"},  /* skipped: the change */
        {"Europe/Rome", 2026, 3, 29, 2, 59, "2026-03-29 01:00"}, /* skipped */
        {"Europe/Rome", 2026, 3, 29, 3, 0, "2026-03-29 01:00"},
        {"Europe/Rome", 2026, 10, 25, 2, 0, "2026-10-25 00:00"}, /* repeated: the first */
        {"Europe/Rome", 2026, 10, 25, 2, 59, "2026-10-25 00:59"},
        {"Europe/Rome", 2026, 10, 25, 3, 0, "2026-10-25 02:00"},
        {"Europe/Rome", 2026, 3, 32, 12, 0, "2026-04-01 10:00"}, /* normalised */
        {"America/New_York", 2026, 3, 8, 2, 30, "2026-03-08 07:00"},
        {"America/New_York", 2026, 11, 1, 1, 0, "2026-11-01 05:00"},
        {"UTC", 2026, 6, 1, 0, 0, "2026-06-01 00:00"},
    };
    for (size_t i = 0; i < ELEMENTSOF(conv); i++) {
        struct tm tm = {.tm_year = conv[i].y - 1900,
                        .tm_mon = conv[i].mon - 1,
                        .tm_mday = conv[i].d,
                        .tm_hour = conv[i].h,
                        .tm_min = conv[i].m};
        time_t t;
        char buf[32];
        assert_int_equal(tz_make(conv[i].zone, &tm, &t), 0);
        if (t != utc(conv[i].utc))
            fail_msg("%s %d-%d-%d %d:%d: %s, expected %s", conv[i].zone, conv[i].y, conv[i].mon,
                     conv[i].d, conv[i].h, conv[i].m, fmt_utc(t, buf), conv[i].utc);
    }
}

static void test_zone_valid(void **state)
{
    assert_true(calendar_zone_valid("Europe/Rome"));
    assert_true(calendar_zone_valid("America/New_York"));
    assert_true(calendar_zone_valid("UTC"));
    static const char *const bad[] = {
        NULL,
        "",
        "Mars/Olympus_Mons",
        "Europe",
        "Europe/",
        "/usr/share/zoneinfo/UTC",
        "../../../etc/passwd",
        "Europe/../UTC",
        "EST5EDT,M3.2.0,M11.1.0",
        ":Europe/Rome",
        "Europe//Rome",
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++)
        if (calendar_zone_valid(bad[i]))
            fail_msg("'%s' taken for a zone", bad[i] ? bad[i] : "(null)");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_table),           cmocka_unit_test(test_overlap_order),
        cmocka_unit_test(test_nothing_changes), cmocka_unit_test(test_host_zone_and_tz_restored),
        cmocka_unit_test(test_tz_make),         cmocka_unit_test(test_zone_valid),
    };
    return test_run_cases(tests);
}
