/* Tests of the safety state machine on a fake monotonic clock. Each scenario is a table of
 * inputs at given times; after each input the machine is stepped and its state, the "start the
 * shutdown" edge and the deadline are compared with what the row expects. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "lib/macro.h"
#include "safety.h"

#define MS(x) ((uint64_t)(x)*1000ULL)

enum op {
    OP_STEP,    /* only step */
    OP_REPORT,  /* level report (cut_in < 0: none) */
    OP_FRAME,   /* a frame without a level, such as HB */
    OP_RELEASE, /* safety_release(); expect_rc is checked */
};

struct row {
    unsigned t_ms;
    enum op op;
    enum cool_level level;
    int cut_in_s;
    enum safety_state expect;
    bool start;       /* the step must (true) or must not (false) start the shutdown */
    long deadline_ms; /* checked when > 0 (the deadline of a standing decision) */
    int expect_rc;    /* OP_RELEASE */
};

#define END_ROWS                                                                                   \
    {                                                                                              \
        .t_ms = UINT32_MAX                                                                         \
    }

/* Shorthands: report at t, step only at t, HB frame at t. */
#define REP(t, lvl, cut, st, ...)                                                                  \
    {                                                                                              \
        .t_ms = (t), .op = OP_REPORT, .level = COOL_LEVEL_##lvl, .cut_in_s = (cut),                \
        .expect = SAFETY_##st, __VA_ARGS__                                                         \
    }
#define STEP(t, st, ...)                                                                           \
    {                                                                                              \
        .t_ms = (t), .op = OP_STEP, .expect = SAFETY_##st, __VA_ARGS__                             \
    }
#define HB(t, st, ...)                                                                             \
    {                                                                                              \
        .t_ms = (t), .op = OP_FRAME, .expect = SAFETY_##st, __VA_ARGS__                            \
    }

static void run_rows(const char *name, const struct safety_config *c, const struct row *rows)
{
    struct safety *s = NULL;
    assert_int_equal(safety_new(c, 0, &s), 0);
    safety_link_changed(s, true, 0);

    for (size_t i = 0; rows[i].t_ms != UINT32_MAX; i++) {
        const struct row *r = &rows[i];
        uint64_t now = MS(r->t_ms);
        struct safety_decision d;

        switch (r->op) {
        case OP_REPORT: {
            struct safety_report rep = {
                .level = r->level,
                .reason = r->level == COOL_LEVEL_NORMAL ? COOL_REASON_NONE : COOL_REASON_TEMP_HIGH,
                .has_cut_in = r->cut_in_s >= 0,
                .cut_in_usec = r->cut_in_s >= 0 ? MS(r->cut_in_s * 1000) : 0,
                .received_at = now,
            };
            safety_report(s, &rep);
            break;
        }
        case OP_FRAME:
            safety_frame_seen(s, now);
            break;
        case OP_RELEASE: {
            int rc = safety_release(s, now);
            if (rc != r->expect_rc)
                fail_msg("%s row %zu (t=%u ms): release returned %d, expected %d", name, i, r->t_ms,
                         rc, r->expect_rc);
            break;
        }
        case OP_STEP:
            break;
        }
        safety_step(s, now, &d);
        if (d.state != r->expect || d.start_shutdown != r->start)
            fail_msg("%s row %zu (t=%u ms): state %s start %d, expected %s start %d (%s)", name, i,
                     r->t_ms, safety_state_to_string(d.state), d.start_shutdown,
                     safety_state_to_string(r->expect), r->start, d.reason);
        if (r->deadline_ms > 0 && (!d.shutting_down || d.deadline != MS(r->deadline_ms)))
            fail_msg("%s row %zu (t=%u ms): deadline %llu ms, expected %ld ms", name, i, r->t_ms,
                     (unsigned long long)(d.deadline / 1000), r->deadline_ms);
    }
    safety_free(s);
}

static void run_default(const char *name, const struct row *rows)
{
    struct safety_config c;
    safety_config_defaults(&c);
    run_rows(name, &c, rows);
}

/* A single precritical report followed by normal ones is a blip: no shutdown, ever; the raised
 * state is held until normal has been reported for 10 s. */
static void test_blip(void **state)
{
    static const struct row rows[] = {
        REP(0, NORMAL, -1, NORMAL),
        REP(1000, PRECRITICAL, 30, PRECRITICAL),
        STEP(1400, PRECRITICAL),
        REP(2000, NORMAL, -1, PRECRITICAL),
        STEP(3500, PRECRITICAL), /* past the 2 s confirm window of the cancelled report */
        REP(4000, NORMAL, -1, PRECRITICAL),
        REP(8000, NORMAL, -1, PRECRITICAL),
        REP(11000, NORMAL, -1, PRECRITICAL),
        REP(12000, NORMAL, -1, NORMAL), /* 10 s after the first normal report */
        STEP(21999, NORMAL),
        STEP(22000, COMM_LOST), /* cleared: losing the controller now is no shutdown */
        END_ROWS,
    };
    run_default("blip", rows);
}

/* Two reports at least 0.5 s apart confirm; an ALARM and a STATUS of the same instant do not. */
static void test_confirm_by_reports(void **state)
{
    static const struct row rows[] = {
        REP(0, NORMAL, -1, NORMAL),
        REP(1000, PRECRITICAL, 30, PRECRITICAL),
        REP(1100, PRECRITICAL, 30, PRECRITICAL),
        REP(1800, PRECRITICAL, 29, SHUTTING_DOWN, .start = true, .deadline_ms = 30800),
        STEP(1900, SHUTTING_DOWN, .deadline_ms = 30800),
        END_ROWS,
    };
    run_default("confirm-by-reports", rows);
}

/* One report and then silence (heartbeats only): confirmed 2 s after the report. */
static void test_confirm_by_time(void **state)
{
    static const struct row rows[] = {
        REP(0, NORMAL, -1, NORMAL),
        REP(1000, PRECRITICAL, 30, PRECRITICAL),
        HB(2000, PRECRITICAL),
        STEP(2999, PRECRITICAL),
        STEP(3000, SHUTTING_DOWN, .start = true, .deadline_ms = 31000),
        END_ROWS,
    };
    run_default("confirm-by-time", rows);
}

/* The wait is at most 10 % of cut_in (1.5 s of 15 s), and a cut 10 s away or closer is acted on at
 * the first report. */
static void test_short_cut_in(void **state)
{
    static const struct row fraction[] = {
        REP(0, NORMAL, -1, NORMAL),
        REP(1000, PRECRITICAL, 15, PRECRITICAL),
        STEP(2499, PRECRITICAL),
        STEP(2500, SHUTTING_DOWN, .start = true, .deadline_ms = 16000),
        END_ROWS,
    };
    static const struct row urgent[] = {
        REP(0, NORMAL, -1, NORMAL),
        REP(1000, PRECRITICAL, 8, SHUTTING_DOWN, .start = true, .deadline_ms = 9000),
        END_ROWS,
    };
    /* The repeated ALARM counts down: once it is within 10 s, no more waiting. */
    static const struct row closing[] = {
        REP(0, PRECRITICAL, 100, PRECRITICAL),
        REP(100, PRECRITICAL, 10, SHUTTING_DOWN, .start = true, .deadline_ms = 10100),
        END_ROWS,
    };
    run_default("short-cut-in fraction", fraction);
    run_default("short-cut-in urgent", urgent);
    run_default("short-cut-in closing", closing);
}

/* Critical is never confirmed: the controller is cutting power now. */
static void test_critical(void **state)
{
    static const struct row rows[] = {
        REP(0, WARNING, -1, WARNING),
        REP(500, CRITICAL, 0, SHUTTING_DOWN, .start = true, .deadline_ms = 500),
        END_ROWS,
    };
    run_default("critical", rows);
}

/* Lost while hot: a shutdown with the assumed deadline (now + 20 s) when no cut was known. */
static void test_lost_while_hot(void **state)
{
    static const struct row rows[] = {
        REP(0, WARNING, -1, WARNING),
        HB(1000, WARNING),
        STEP(10999, WARNING),
        STEP(11000, SHUTTING_DOWN, .start = true, .deadline_ms = 31000),
        END_ROWS,
    };
    run_default("lost-while-hot", rows);

    /* Warning, then a single normal report: still held hot by the hysteresis. */
    static const struct row held[] = {
        REP(0, WARNING, -1, WARNING),
        REP(1000, NORMAL, -1, WARNING),
        STEP(11000, SHUTTING_DOWN, .start = true),
        END_ROWS,
    };
    run_default("lost-while-hot held", held);
}

/* Lost with a known cut: the deadline is the controller's cut time. Confirmation is made slow
 * here so that the loss, not the confirmation, takes the decision. */
static void test_lost_with_known_cut(void **state)
{
    struct safety_config c;
    safety_config_defaults(&c);
    c.confirm_usec = MS(60000);
    c.confirm_reports = 100;
    c.confirm_max_permille = 1000;
    c.urgent_cut_in_usec = 0;
    static const struct row rows[] = {
        REP(0, PRECRITICAL, 30, PRECRITICAL),
        STEP(9999, PRECRITICAL),
        STEP(10000, SHUTTING_DOWN, .start = true, .deadline_ms = 30000),
        END_ROWS,
    };
    run_rows("lost-with-known-cut", &c, rows);

    /* A cut that is already due is "now", never in the past (here the 5 s window has passed
     * too: whichever rule fires, the deadline is the same). */
    static const struct row past[] = {
        REP(0, PRECRITICAL, 5, PRECRITICAL),
        STEP(10000, SHUTTING_DOWN, .start = true, .deadline_ms = 10000),
        END_ROWS,
    };
    run_rows("lost-with-past-cut", &c, past);
}

/* Lost while cool is COMM_LOST (metrics and alerts, no shutdown); frames coming back end it. */
static void test_lost_while_cool_and_recovery(void **state)
{
    static const struct row rows[] = {
        REP(0, NORMAL, -1, NORMAL),
        STEP(9999, NORMAL),
        STEP(10000, COMM_LOST),
        STEP(60000, COMM_LOST),
        HB(61000, NORMAL),
        REP(62000, PRECRITICAL, 30, PRECRITICAL),
        END_ROWS,
    };
    run_default("lost-while-cool", rows);

    /* Warning that has cleared (normal for 10 s) does not count as hot any more. */
    static const struct row cleared[] = {
        REP(0, WARNING, -1, WARNING),
        REP(1000, NORMAL, -1, WARNING),
        REP(11000, NORMAL, -1, NORMAL),
        STEP(21000, COMM_LOST),
        END_ROWS,
    };
    run_default("lost-after-clear", cleared);

    /* A controller never heard from is lost, not hot. */
    static const struct row never[] = {
        STEP(10000, COMM_LOST),
        END_ROWS,
    };
    run_default("never-heard", never);
}

/* Hysteresis steps down one level at a time, each after 10 s of lower reports. */
static void test_hysteresis(void **state)
{
    static const struct row rows[] = {
        REP(0, WARNING, -1, WARNING),
        REP(1000, PRECRITICAL, -1, PRECRITICAL),
        REP(1100, WARNING, -1, PRECRITICAL), /* blip over before confirmation */
        REP(6000, WARNING, -1, PRECRITICAL),
        REP(11100, WARNING, -1, WARNING),
        REP(12000, NORMAL, -1, WARNING),
        REP(15000, WARNING, -1, WARNING), /* warning again: the clearing restarts */
        REP(16000, NORMAL, -1, WARNING),
        REP(25000, NORMAL, -1, WARNING),
        REP(26000, NORMAL, -1, NORMAL),
        END_ROWS,
    };
    run_default("hysteresis", rows);
}

/* SHUTTING_DOWN latches: nothing brings it back, and release is refused. */
static void test_latch(void **state)
{
    static const struct row rows[] = {
        REP(0, CRITICAL, -1, SHUTTING_DOWN, .start = true, .deadline_ms = 0),
        REP(1000, NORMAL, -1, SHUTTING_DOWN),
        REP(30000, NORMAL, -1, SHUTTING_DOWN),
        STEP(100000, SHUTTING_DOWN),
        {.t_ms = 100001, .op = OP_RELEASE, .expect = SAFETY_SHUTTING_DOWN, .expect_rc = -EPERM},
        END_ROWS,
    };
    run_default("latch", rows);
}

/* A drill takes the same decision but can be released; the same condition does not start a
 * second drill, a new one after it went away does. */
static void test_drill(void **state)
{
    struct safety_config c;
    safety_config_defaults(&c);
    c.drill = true;
    static const struct row rows[] = {
        {.t_ms = 0, .op = OP_RELEASE, .expect = SAFETY_NORMAL, .expect_rc = -ENOENT},
        REP(1000, PRECRITICAL, 8, SHUTTING_DOWN, .start = true, .deadline_ms = 9000),
        REP(2000, PRECRITICAL, 7, SHUTTING_DOWN, .deadline_ms = 9000),
        {.t_ms = 2500, .op = OP_RELEASE, .expect = SAFETY_PRECRITICAL},
        REP(3000, PRECRITICAL, 6, PRECRITICAL),
        REP(4000, NORMAL, -1, PRECRITICAL),
        REP(5000, PRECRITICAL, 8, SHUTTING_DOWN, .start = true, .deadline_ms = 13000),
        END_ROWS,
    };
    run_rows("drill", &c, rows);
}

/* A standing decision follows the controller's cut time (a HALT defers it). */
static void test_deadline_follows_controller(void **state)
{
    static const struct row rows[] = {
        REP(0, PRECRITICAL, 8, SHUTTING_DOWN, .start = true, .deadline_ms = 8000),
        REP(1000, PRECRITICAL, 60, SHUTTING_DOWN, .deadline_ms = 61000),
        REP(2000, NORMAL, -1, SHUTTING_DOWN, .deadline_ms = 61000),
        END_ROWS,
    };
    run_default("deadline", rows);
}

/* The link's telemetry feeds the machine directly: cut_in seconds from the time it was taken. */
static void test_report_telemetry(void **state)
{
    struct safety_config c;
    safety_config_defaults(&c);
    struct safety *s = NULL;
    struct safety_decision d;
    assert_int_equal(safety_new(&c, 0, &s), 0);

    struct cool_telemetry t = {.level = COOL_LEVEL_PRECRITICAL,
                               .reason = COOL_REASON_FLOW_LOW,
                               .has_cut_in = true,
                               .cut_in_s = 8,
                               .level_at = MS(1500)};
    safety_report_telemetry(s, &t);
    safety_step(s, MS(1600), &d);
    assert_true(d.start_shutdown);
    assert_int_equal(d.deadline, MS(9500));
    assert_non_null(strstr(d.reason, "flow_low"));
    safety_free(s);
}

static void test_stale_and_next_step(void **state)
{
    struct safety_config c;
    safety_config_defaults(&c);
    struct safety *s = NULL;
    struct safety_decision d;
    assert_int_equal(safety_new(&c, 0, &s), 0);

    /* The link has not come up: stale from the start. */
    safety_step(s, 0, &d);
    assert_true(d.stale);
    safety_link_changed(s, true, 0);
    safety_report(s, &(struct safety_report){.level = COOL_LEVEL_NORMAL, .received_at = MS(1000)});
    safety_step(s, MS(1000), &d);
    assert_false(d.stale);
    assert_int_equal(safety_next_step(s, MS(1000)), MS(4000));
    safety_step(s, MS(3999), &d);
    assert_false(d.stale);
    safety_step(s, MS(4000), &d);
    assert_true(d.stale);
    assert_false(d.lost);
    assert_int_equal(safety_next_step(s, MS(4000)), MS(11000));
    safety_link_changed(s, false, MS(4500));
    safety_step(s, MS(4500), &d);
    assert_true(d.stale);

    /* A pending confirmation wakes the caller when its window ends. */
    safety_link_changed(s, true, MS(5000));
    safety_report(s, &(struct safety_report){.level = COOL_LEVEL_PRECRITICAL,
                                             .has_cut_in = true,
                                             .cut_in_usec = MS(30000),
                                             .received_at = MS(5000)});
    safety_step(s, MS(5000), &d);
    assert_int_equal(d.state, SAFETY_PRECRITICAL);
    assert_int_equal(safety_next_step(s, MS(5000)), MS(7000));
    safety_free(s);
}

static void test_transition_log(void **state)
{
    struct safety_config c;
    safety_config_defaults(&c);
    struct safety *s = NULL;
    struct safety_decision d;
    assert_int_equal(safety_new(&c, 0, &s), 0);
    safety_link_changed(s, true, 0);

    safety_report(s, &(struct safety_report){.level = COOL_LEVEL_WARNING,
                                             .reason = COOL_REASON_TEMP_HIGH,
                                             .received_at = MS(1000)});
    safety_step(s, MS(1000), &d);
    safety_report(s, &(struct safety_report){.level = COOL_LEVEL_PRECRITICAL,
                                             .reason = COOL_REASON_PUMP_STOPPED,
                                             .has_cut_in = true,
                                             .cut_in_usec = MS(30000),
                                             .received_at = MS(2000)});
    safety_step(s, MS(2000), &d);
    safety_step(s, MS(4000), &d);
    assert_true(d.start_shutdown);
    assert_int_equal(safety_get_state(s), SAFETY_SHUTTING_DOWN);
    assert_int_equal(safety_get_since(s), MS(4000));

    struct safety_transition t[8];
    assert_int_equal(safety_get_transitions(s, t, 8), 3);
    assert_int_equal(t[0].from, SAFETY_NORMAL);
    assert_int_equal(t[0].to, SAFETY_WARNING);
    assert_non_null(strstr(t[0].reason, "temp_high"));
    assert_int_equal(t[2].to, SAFETY_SHUTTING_DOWN);
    assert_int_equal(t[2].at, MS(4000));
    assert_non_null(strstr(t[2].reason, "pump_stopped"));
    assert_non_null(strstr(t[2].reason, "power cut in 28.0 s"));

    /* Only the newest when asked for fewer. */
    assert_int_equal(safety_get_transitions(s, t, 1), 1);
    assert_int_equal(t[0].to, SAFETY_SHUTTING_DOWN);
    safety_free(s);
}

static void test_log_ring_and_names(void **state)
{
    struct safety_config c;
    safety_config_defaults(&c);
    struct safety *s = NULL;
    struct safety_decision d;
    assert_int_equal(safety_new(&c, 0, &s), 0);
    safety_link_changed(s, true, 0);
    /* Alternate lost and heard again, more often than the log holds. */
    uint64_t now = 0;
    for (int i = 0; i < SAFETY_TRANSITIONS_MAX; i++) {
        now += MS(10000);
        safety_step(s, now, &d);
        assert_int_equal(d.state, SAFETY_COMM_LOST);
        safety_frame_seen(s, now);
        safety_step(s, now, &d);
        assert_int_equal(d.state, SAFETY_NORMAL);
    }
    struct safety_transition t[SAFETY_TRANSITIONS_MAX + 4];
    assert_int_equal(safety_get_transitions(s, t, ELEMENTSOF(t)), SAFETY_TRANSITIONS_MAX);
    assert_int_equal(t[SAFETY_TRANSITIONS_MAX - 1].at, now);
    assert_int_equal(t[SAFETY_TRANSITIONS_MAX - 1].to, SAFETY_NORMAL);
    safety_free(s);

    assert_string_equal(safety_state_to_string(SAFETY_COMM_LOST), "comm-lost");
    assert_string_equal(safety_state_to_string(SAFETY_SHUTTING_DOWN), "shutting-down");
    assert_null(safety_state_to_string(_SAFETY_STATE_MAX));

    c.stale_after_usec = c.dead_after_usec + 1;
    assert_int_equal(safety_new(&c, 0, &s), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blip),
        cmocka_unit_test(test_confirm_by_reports),
        cmocka_unit_test(test_confirm_by_time),
        cmocka_unit_test(test_short_cut_in),
        cmocka_unit_test(test_critical),
        cmocka_unit_test(test_lost_while_hot),
        cmocka_unit_test(test_lost_with_known_cut),
        cmocka_unit_test(test_lost_while_cool_and_recovery),
        cmocka_unit_test(test_hysteresis),
        cmocka_unit_test(test_latch),
        cmocka_unit_test(test_drill),
        cmocka_unit_test(test_deadline_follows_controller),
        cmocka_unit_test(test_report_telemetry),
        cmocka_unit_test(test_stale_and_next_step),
        cmocka_unit_test(test_transition_log),
        cmocka_unit_test(test_log_ring_and_names),
    };
    return test_run_cases(tests);
}
