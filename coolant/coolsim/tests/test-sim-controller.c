/* The controller firmware: requests and replies (§3, §5), events (§7, §8), host tracking (§4),
 * reboots, on a fake clock with the frames it sends captured and parsed. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "sim-controller.h"

#define SENT_MAX 256

static struct {
    struct ctl_frame sent[SENT_MAX];
    unsigned n_sent;
    unsigned n_saved;
    int save_result;
    struct ctl_settings saved;
    bool have_saved;
    struct sim_ctl c;
    struct sim_reading r;
    uint16_t next_id;
} t;

static void capture(const char *frame, size_t len, void *userdata)
{
    assert_true(len <= CTL_FRAME_MAX);
    assert_true(t.n_sent < SENT_MAX);
    /* Every frame the controller sends must parse: the daemon uses the same parser. */
    assert_int_equal(ctl_frame_parse(frame, len, &t.sent[t.n_sent]), 0);
    t.n_sent++;
}

static int save(const struct ctl_settings *s, void *userdata, struct errmsg *e)
{
    t.n_saved++;
    if (t.save_result < 0)
        return errmsg_set(e, t.save_result, "disk full");
    t.saved = *s;
    t.have_saved = true;
    return 0;
}

static int load(struct ctl_settings *ret, void *userdata, struct errmsg *e)
{
    if (!t.have_saved)
        return errmsg_set(e, -ENOENT, "no image");
    *ret = t.saved;
    return 0;
}

static void healthy_reading(void)
{
    t.r = (struct sim_reading){.n_sensors = 3, .n_pumps = 2, .flow_centi = 1240};
    long temps[3] = {3120, 3505, 3310};
    for (unsigned i = 0; i < 3; i++) {
        t.r.sensor_ok[i] = true;
        t.r.temp_centi[i] = temps[i];
    }
    for (unsigned i = 0; i < 2; i++) {
        t.r.duty[i] = 55;
        t.r.rpm[i] = 2410;
    }
}

static int setup(void **state)
{
    static const struct sim_ctl_ops ops = {.send = capture, .save = save, .load = load};
    struct ctl_settings s;

    memset(&t, 0, sizeof(t));
    t.next_id = 1;
    ctl_settings_defaults(&s, 2);
    healthy_reading();
    sim_ctl_init(&t.c, &s, &ops, NULL, 100000);
    return 0;
}

static const struct ctl_frame *last(void)
{
    assert_true(t.n_sent > 0);
    return &t.sent[t.n_sent - 1];
}

static const char *field(const struct ctl_frame *f, const char *key)
{
    const char *v = ctl_frame_get(f, key);
    if (!v)
        fail_msg("frame %s has no field '%s'", f->verb, key);
    return v;
}

/* Sends a request with the given fields ("k=v" strings split at '='); returns its id. */
static uint16_t request(uint64_t now, const char *verb, const char *k1, const char *v1,
                        const char *k2, const char *v2)
{
    struct ctl_writer w;
    uint16_t id = t.next_id++;

    ctl_writer_begin(&w, CTL_KIND_REQUEST, id, verb);
    if (k1)
        ctl_writer_add(&w, k1, v1);
    if (k2)
        ctl_writer_add(&w, k2, v2);
    int n = ctl_writer_finish(&w);
    assert_true(n > 0);
    sim_ctl_feed(&t.c, w.buf, (size_t)n, now);
    return id;
}

/* Sends a request and checks that exactly one reply with its id came back. */
static const struct ctl_frame *ask(uint64_t now, const char *verb, const char *k1, const char *v1,
                                   const char *k2, const char *v2)
{
    unsigned before = t.n_sent;
    uint16_t id = request(now, verb, k1, v1, k2, v2);
    assert_int_equal(t.n_sent, before + 1);
    assert_int_equal(last()->kind, CTL_KIND_REPLY);
    assert_int_equal(last()->id, id);
    return last();
}

static void assert_err(const struct ctl_frame *f, const char *code)
{
    assert_string_equal(f->verb, "ERR");
    assert_string_equal(field(f, "code"), code);
}

/* Ticks every 50 ms from `from` up to and including `to`; returns 1 once power was cut. */
static int run(uint64_t from, uint64_t to)
{
    for (uint64_t now = from; now <= to; now += 50)
        if (sim_ctl_tick(&t.c, &t.r, now))
            return 1;
    return 0;
}

static unsigned count_events(unsigned from, const char *verb)
{
    unsigned n = 0;
    for (unsigned i = from; i < t.n_sent; i++)
        n += t.sent[i].kind == CTL_KIND_EVENT && strcmp(t.sent[i].verb, verb) == 0;
    return n;
}

static void test_boot_event_first(void **state)
{
    assert_int_equal(t.n_sent, 1);
    assert_int_equal(t.sent[0].kind, CTL_KIND_EVENT);
    assert_int_equal(t.sent[0].id, 0);
    assert_string_equal(t.sent[0].verb, "BOOT");
    assert_string_equal(field(&t.sent[0], "reason"), "power");
    assert_string_equal(field(&t.sent[0], "fw"), SIM_FW_VERSION);
}

static void test_hello(void **state)
{
    const struct ctl_frame *f = ask(100000, "HELLO", "proto", "1", "host", "node07");
    assert_string_equal(f->verb, "OK");
    assert_string_equal(field(f, "proto"), "1");
    assert_string_equal(field(f, "pumps"), "2");
    assert_string_equal(field(f, "sensors"), "inlet,outlet,tank");
    assert_string_equal(field(f, "caps"), "curve,limits,halt");
    assert_string_equal(field(f, "hb"), "1");
    /* A host that speaks a newer version too gets version 1. */
    assert_string_equal(field(ask(100000, "HELLO", "proto", "3", NULL, NULL), "proto"), "1");
    assert_err(ask(100000, "HELLO", "proto", "0", NULL, NULL), "proto");
    assert_err(ask(100000, "HELLO", NULL, NULL, NULL, NULL), "badframe");
    assert_err(ask(100000, "HELLO", "proto", "x1", NULL, NULL), "badframe");
    assert_int_equal(t.c.stats.requests[SIM_VERB_HELLO], 5);
}

static void test_ping_uptime(void **state)
{
    assert_string_equal(field(ask(100000, "PING", NULL, NULL, NULL, NULL), "up"), "0");
    assert_string_equal(field(ask(105400, "PING", NULL, NULL, NULL, NULL), "up"), "5");
}

static void test_status(void **state)
{
    t.r.sensor_ok[2] = false;
    run(100000, 102000);
    const struct ctl_frame *f = ask(102000, "STATUS", NULL, NULL, NULL, NULL);
    assert_string_equal(field(f, "up"), "2");
    assert_string_equal(field(f, "level"), "warning");
    assert_string_equal(field(f, "reason"), "sensor_fault");
    assert_string_equal(field(f, "cut_in"), "-");
    assert_string_equal(field(f, "halt"), "0");
    assert_string_equal(field(f, "host"), "ok");
    assert_string_equal(field(f, "flow"), "12.40");
    assert_string_equal(field(f, "t1"), "31.20");
    assert_string_equal(field(f, "t2"), "35.05");
    assert_string_equal(field(f, "t3"), "fault");
    /* Warning runs the pumps at 100 %, whatever the reading said was commanded before. */
    assert_string_equal(field(f, "p1"), "2410/100");
    assert_string_equal(field(f, "p2"), "2410/100");
}

static void test_get(void **state)
{
    const struct ctl_frame *f = ask(100000, "GET", "key", "pump.1.curve", NULL, NULL);
    assert_string_equal(f->verb, "OK");
    assert_string_equal(field(f, "pump.1.curve"), "30:40,45:70,55:100");
    assert_string_equal(
        field(ask(100000, "GET", "key", "limit.cut_delay", NULL, NULL), "limit.cut_delay"), "30");
    assert_err(ask(100000, "GET", "key", "pump.3.curve", NULL, NULL), "badkey");
    assert_err(ask(100000, "GET", "key", "nonsense", NULL, NULL), "badkey");
    assert_err(ask(100000, "GET", NULL, NULL, NULL, NULL), "badframe");
}

static void test_set_stores_and_echoes(void **state)
{
    const struct ctl_frame *f =
        ask(100000, "SET", "limit.warning", "42", "pump.2.curve", "30:50,50:100");
    assert_string_equal(f->verb, "OK");
    assert_string_equal(field(f, "limit.warning"), "42.00");
    assert_string_equal(field(f, "pump.2.curve"), "30:50,50:100");
    assert_int_equal(t.n_saved, 1);
    assert_int_equal(t.saved.limits.warning_centi, 4200);
    assert_int_equal(t.c.settings.limits.warning_centi, 4200);
    assert_string_equal(
        field(ask(100000, "GET", "key", "limit.warning", NULL, NULL), "limit.warning"), "42.00");
}

static void test_set_refused_changes_nothing(void **state)
{
    struct ctl_settings before = t.c.settings;

    /* One good and one bad setting: all or none. */
    const struct ctl_frame *f =
        ask(100000, "SET", "limit.warning", "40", "pump.1.curve", "30:40,60:70,55:100");
    assert_err(f, "badvalue");
    assert_non_null(strstr(field(f, "msg"), "pump 1"));
    assert_memory_equal(&t.c.settings, &before, sizeof(before));
    assert_err(ask(100000, "SET", "limit.warning", "40", "fan.speed", "3"), "badkey");
    assert_err(ask(100000, "SET", "limit.warning", "70", NULL, NULL), "badvalue");
    assert_err(ask(100000, "SET", NULL, NULL, NULL, NULL), "badframe");
    assert_memory_equal(&t.c.settings, &before, sizeof(before));
    assert_int_equal(t.n_saved, 0);
}

static void test_set_eeprom_failure(void **state)
{
    t.save_result = -ENOSPC;
    const struct ctl_frame *f = ask(100000, "SET", "limit.warning", "40", NULL, NULL);
    assert_err(f, "busy");
    assert_int_equal(t.c.settings.limits.warning_centi, 4500);
}

static void test_set_busy_while_writing(void **state)
{
    sim_ctl_set_eeprom_write_ms(&t.c, 2000);
    assert_string_equal(ask(100000, "SET", "limit.warning", "40", NULL, NULL)->verb, "OK");
    assert_err(ask(101000, "SET", "limit.warning", "41", NULL, NULL), "busy");
    assert_int_equal(t.c.settings.limits.warning_centi, 4000);
    /* Reads are not blocked by a write, and the write ends. */
    assert_string_equal(ask(101000, "GET", "key", "limit.warning", NULL, NULL)->verb, "OK");
    assert_string_equal(ask(102000, "SET", "limit.warning", "41", NULL, NULL)->verb, "OK");
}

static void test_unknown_verb(void **state)
{
    assert_err(ask(100000, "REBOOT", NULL, NULL, NULL, NULL), "badverb");
    assert_int_equal(t.c.stats.requests[SIM_VERB_OTHER], 1);
}

static void test_rejected_frames_get_no_reply(void **state)
{
    static const char bad_crc[] = "$Q 7 PING*0000\r\n";
    static const char noise[] = "\x01\xff garbage $Q 8 PI$";
    unsigned before = t.n_sent;

    sim_ctl_feed(&t.c, bad_crc, strlen(bad_crc), 100000);
    sim_ctl_feed(&t.c, noise, strlen(noise), 100000);
    assert_int_equal(t.n_sent, before);
    assert_true(t.c.stats.rejected >= 2);
    /* The reader recovers: the next good request is answered. */
    assert_string_equal(ask(100000, "PING", NULL, NULL, NULL, NULL)->verb, "OK");
}

static void test_replies_and_events_are_not_answered(void **state)
{
    struct ctl_writer w;
    unsigned before = t.n_sent;

    ctl_writer_begin(&w, CTL_KIND_REPLY, 3, "OK");
    int n = ctl_writer_finish(&w);
    sim_ctl_feed(&t.c, w.buf, (size_t)n, 100000);
    assert_int_equal(t.n_sent, before);
    assert_int_equal(t.c.stats.frames, 1);
}

static void test_heartbeat_every_second(void **state)
{
    unsigned before = t.n_sent;
    run(100000, 105000);
    assert_int_equal(count_events(before, "HB"), 5);
    /* Event sequence numbers count up from BOOT's 0. */
    for (unsigned i = before; i < t.n_sent; i++)
        assert_int_equal(t.sent[i].id, i);
    assert_string_equal(field(last(), "up"), "5");
    assert_string_equal(field(last(), "level"), "normal");
}

static void test_event_sequence_wraps(void **state)
{
    t.c.event_seq = 65535;
    run(100000, 102000);
    assert_int_equal(t.sent[t.n_sent - 2].id, 65535);
    assert_int_equal(t.sent[t.n_sent - 1].id, 0);
}

static void test_alarm_repeats_and_cut(void **state)
{
    t.r.rpm[1] = 0;
    unsigned before = t.n_sent;
    int cut = run(100000, 129950);
    assert_int_equal(cut, 0);
    const struct ctl_frame *first = &t.sent[before];
    assert_string_equal(first->verb, "ALARM");
    assert_string_equal(field(first, "level"), "precritical");
    assert_string_equal(field(first, "reason"), "pump_stopped");
    assert_string_equal(field(first, "pump"), "2");
    assert_string_equal(field(first, "cut_in"), "30");
    /* Repeated every second with the time left: 30, 29, ..., 1. */
    assert_int_equal(count_events(before, "ALARM"), 30);
    assert_string_equal(field(&t.sent[t.n_sent - 2], "cut_in"), "1");
    assert_int_equal(run(130000, 130000), 1);
    assert_string_equal(last()->verb, "POWER");
    assert_string_equal(field(last(), "action"), "cut");
    assert_string_equal(field(last(), "orderly"), "0");
    assert_true(t.c.stats.cut);
    assert_false(t.c.stats.cut_orderly);
    /* The host is dead: nothing more is sent or answered. */
    before = t.n_sent;
    assert_int_equal(run(130050, 135000), 0);
    request(135000, "PING", NULL, NULL, NULL, NULL);
    assert_int_equal(t.n_sent, before);
}

static void test_halt_defers_and_cut_is_orderly(void **state)
{
    t.r.rpm[1] = 0;
    run(100000, 110000);
    const struct ctl_frame *f = ask(110000, "HALT", "within", "90", NULL, NULL);
    assert_string_equal(f->verb, "OK");
    assert_string_equal(field(f, "cut_in"), "90");
    assert_string_equal(field(ask(111000, "STATUS", NULL, NULL, NULL, NULL), "halt"), "1");
    assert_int_equal(run(110050, 199950), 0);
    assert_int_equal(run(200000, 200000), 1);
    assert_string_equal(field(last(), "orderly"), "1");
    assert_true(t.c.stats.cut_orderly);
    assert_true(t.c.stats.halt);
    assert_int_equal(t.c.stats.halt_ms, 110000);
}

static void test_halt_without_alarm(void **state)
{
    const struct ctl_frame *f = ask(100000, "HALT", "within", "60", NULL, NULL);
    assert_string_equal(field(f, "cut_in"), "-");
    assert_err(ask(100000, "HALT", NULL, NULL, NULL, NULL), "badframe");
    assert_err(ask(100000, "HALT", "within", "-5", NULL, NULL), "badframe");
}

static void test_alarm_clears_to_normal(void **state)
{
    t.r.rpm[1] = 0;
    run(100000, 105000);
    t.r.rpm[1] = 2400;
    unsigned before = t.n_sent;
    run(105050, 110000);
    assert_int_equal(count_events(before, "ALARM"), 1);
    for (unsigned i = before; i < t.n_sent; i++)
        if (strcmp(t.sent[i].verb, "ALARM") == 0) {
            assert_string_equal(field(&t.sent[i], "level"), "normal");
            assert_string_equal(field(&t.sent[i], "reason"), "none");
            assert_string_equal(field(&t.sent[i], "cut_in"), "-");
        }
    assert_int_equal(run(110050, 140000), 0);
}

static void test_critical_cuts_at_once(void **state)
{
    for (unsigned i = 0; i < 3; i++)
        t.r.temp_centi[i] = 6100;
    unsigned before = t.n_sent;
    assert_int_equal(run(100000, 100000), 1);
    assert_string_equal(t.sent[before].verb, "ALARM");
    assert_string_equal(field(&t.sent[before], "level"), "critical");
    assert_string_equal(field(&t.sent[before], "temp"), "61.00");
    assert_string_equal(last()->verb, "POWER");
}

static void test_host_lost(void **state)
{
    ask(100000, "PING", NULL, NULL, NULL, NULL);
    run(100000, 109950);
    assert_false(t.c.host_lost);
    run(110000, 112000);
    assert_true(t.c.host_lost);
    assert_int_equal(t.c.stats.host_lost, 1);
    /* The first request back learns it was counted lost; the next one sees it found again. */
    assert_string_equal(field(ask(112000, "STATUS", NULL, NULL, NULL, NULL), "host"), "lost");
    assert_string_equal(field(ask(112100, "STATUS", NULL, NULL, NULL, NULL), "host"), "ok");
    assert_false(t.c.host_lost);
}

static void test_host_timeout_setting(void **state)
{
    ask(100000, "SET", "host.timeout", "2", NULL, NULL);
    run(100000, 101950);
    assert_false(t.c.host_lost);
    run(102000, 102000);
    assert_true(t.c.host_lost);
}

static void test_reboot(void **state)
{
    ask(100000, "SET", "limit.cut_delay", "60", NULL, NULL);
    t.r.rpm[1] = 0;
    run(100000, 105000);
    ask(105000, "HALT", "within", "100", NULL, NULL);
    sim_ctl_reboot(&t.c, 3000, 105000);
    /* Silent: no events, no replies, the pumps forced to full speed. */
    unsigned before = t.n_sent;
    run(105050, 107950);
    request(106000, "PING", NULL, NULL, NULL, NULL);
    assert_int_equal(t.n_sent, before);
    assert_int_equal(sim_ctl_duty(&t.c, 0), 100);
    /* Back: BOOT first, sequence from 0, settings from EEPROM, no memory of the HALT. */
    run(108000, 108000);
    assert_string_equal(t.sent[before].verb, "BOOT");
    assert_int_equal(t.sent[before].id, 0);
    assert_string_equal(field(&t.sent[before], "reason"), "watchdog");
    assert_int_equal(t.c.settings.limits.cut_delay_s, 60);
    assert_false(t.c.protect.halt);
    assert_string_equal(field(ask(108000, "PING", NULL, NULL, NULL, NULL), "up"), "0");
    /* The pump is still stopped: a fresh alarm with a full delay from the new boot. */
    assert_string_equal(field(&t.sent[before + 1], "cut_in"), "60");
    assert_int_equal(t.c.stats.boots, 2);
}

static void test_stats_max_temperature(void **state)
{
    run(100000, 100000);
    t.r.temp_centi[1] = 4210;
    run(100050, 100050);
    t.r.temp_centi[1] = 3600;
    run(100100, 100100);
    assert_true(t.c.stats.have_max_temp);
    assert_int_equal(t.c.stats.max_temp_centi, 4210);
    assert_int_equal(t.c.stats.max_level, SIM_LEVEL_NORMAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_boot_event_first, setup),
        cmocka_unit_test_setup(test_hello, setup),
        cmocka_unit_test_setup(test_ping_uptime, setup),
        cmocka_unit_test_setup(test_status, setup),
        cmocka_unit_test_setup(test_get, setup),
        cmocka_unit_test_setup(test_set_stores_and_echoes, setup),
        cmocka_unit_test_setup(test_set_refused_changes_nothing, setup),
        cmocka_unit_test_setup(test_set_eeprom_failure, setup),
        cmocka_unit_test_setup(test_set_busy_while_writing, setup),
        cmocka_unit_test_setup(test_unknown_verb, setup),
        cmocka_unit_test_setup(test_rejected_frames_get_no_reply, setup),
        cmocka_unit_test_setup(test_replies_and_events_are_not_answered, setup),
        cmocka_unit_test_setup(test_heartbeat_every_second, setup),
        cmocka_unit_test_setup(test_event_sequence_wraps, setup),
        cmocka_unit_test_setup(test_alarm_repeats_and_cut, setup),
        cmocka_unit_test_setup(test_halt_defers_and_cut_is_orderly, setup),
        cmocka_unit_test_setup(test_halt_without_alarm, setup),
        cmocka_unit_test_setup(test_alarm_clears_to_normal, setup),
        cmocka_unit_test_setup(test_critical_cuts_at_once, setup),
        cmocka_unit_test_setup(test_host_lost, setup),
        cmocka_unit_test_setup(test_host_timeout_setting, setup),
        cmocka_unit_test_setup(test_reboot, setup),
        cmocka_unit_test_setup(test_stats_max_temperature, setup),
    };
    return test_run_cases(tests);
}
