/* Unit tests: building frames, and writer -> parser round trips. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "ctl-proto.h"

static void test_write_exact(void **state)
{
    struct ctl_writer w;
    int n;

    ctl_writer_begin(&w, CTL_KIND_REQUEST, 2, "STATUS");
    n = ctl_writer_finish(&w);
    /* The CRC is recomputed here, independently of the writer's buffer. */
    char want[32];
    snprintf(want, sizeof(want), "$Q 2 STATUS*%04X\r\n", ctl_crc16("Q 2 STATUS", 10));
    assert_string_equal(w.buf, want);
    assert_int_equal(n, strlen(want));

    ctl_writer_begin(&w, CTL_KIND_REPLY, 9, "ERR");
    ctl_writer_add(&w, "code", "badvalue");
    ctl_writer_add(&w, "msg", "pump 1 curve point 3: 55 C after 60 C; points must rise");
    ctl_writer_add(&w, "empty", "");
    ctl_writer_add_int(&w, "neg", -12);
    ctl_writer_add_centi(&w, "t", -450);
    ctl_writer_add_centi(&w, "u", 3125);
    ctl_writer_add_centi(&w, "v", -5);
    assert_true(ctl_writer_finish(&w) > 0);
    assert_non_null(strstr(w.buf,
                           " code=badvalue msg=\"pump 1 curve point 3: 55 C after 60 C; "
                           "points must rise\" empty=\"\" neg=-12 t=-4.50 u=31.25 v=-0.05*"));
    /* Senders write the CRC in upper case. */
    const char *star = strchr(w.buf, '*');
    for (int i = 1; i <= 4; i++)
        assert_true((star[i] >= '0' && star[i] <= '9') || (star[i] >= 'A' && star[i] <= 'F'));
}

static void test_round_trip(void **state)
{
    static const char *const values[] = {"1", "a b", "", "2.4.1", "x=y", "  ", "~!#%&()"};
    struct ctl_writer w;
    struct ctl_frame f;
    char key[24];
    int n;

    ctl_writer_begin(&w, CTL_KIND_EVENT, 65535, "ALARM_2");
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        snprintf(key, sizeof(key), "k.%zu", i);
        ctl_writer_add(&w, key, values[i]);
    }
    n = ctl_writer_finish(&w);
    assert_true(n > 0);
    assert_int_equal(ctl_frame_parse(w.buf, (size_t)n, &f), 0);
    assert_int_equal(f.kind, CTL_KIND_EVENT);
    assert_int_equal(f.id, 65535);
    assert_string_equal(f.verb, "ALARM_2");
    assert_int_equal(f.n_fields, sizeof(values) / sizeof(values[0]));
    for (size_t i = 0; i < f.n_fields; i++) {
        snprintf(key, sizeof(key), "k.%zu", i);
        assert_string_equal(f.fields[i].key, key);
        assert_string_equal(f.fields[i].value, values[i]);
    }
}

/* Returns the error a writer ends with after begin + one add. */
static int add_error(char kind, const char *verb, const char *key, const char *value)
{
    struct ctl_writer w;

    ctl_writer_begin(&w, kind, 1, verb);
    ctl_writer_add(&w, key, value);
    return ctl_writer_finish(&w);
}

static void test_refuses_what_parser_refuses(void **state)
{
    assert_int_equal(add_error('X', "PING", "a", "1"), -CTL_E_KIND);
    assert_int_equal(add_error('Q', "ping", "a", "1"), -CTL_E_VERB);
    assert_int_equal(add_error('Q', "ABCDEFGHIJKLMNOP", "a", "1"), -CTL_E_VERB);
    assert_int_equal(add_error('Q', NULL, "a", "1"), -CTL_E_VERB);
    assert_int_equal(add_error('Q', "PING", "A", "1"), -CTL_E_KEY);
    assert_int_equal(add_error('Q', "PING", "", "1"), -CTL_E_KEY);
    assert_int_equal(add_error('Q', "PING", "a b", "1"), -CTL_E_KEY);
    assert_int_equal(add_error('Q', "PING", "a", "say \"hi\""), -CTL_E_VALUE);
    assert_int_equal(add_error('Q', "PING", "a", "$"), -CTL_E_VALUE);
    assert_int_equal(add_error('Q', "PING", "a", "2*3"), -CTL_E_VALUE);
    assert_int_equal(add_error('Q', "PING", "a", "tab\there"), -CTL_E_VALUE);
    assert_int_equal(add_error('Q', "PING", "a", "\xc3\xa9"), -CTL_E_VALUE);
    assert_int_equal(add_error('Q', "PING", "a", NULL), -CTL_E_VALUE);
}

static void test_sticky_and_duplicates(void **state)
{
    struct ctl_writer w;

    ctl_writer_begin(&w, 'R', 1, "OK");
    ctl_writer_add(&w, "a", "1");
    ctl_writer_add(&w, "b", "x a=1");
    ctl_writer_add(&w, "a", "2");
    ctl_writer_add(&w, "c", "3"); /* after an error, nothing more is added */
    assert_int_equal(ctl_writer_finish(&w), -CTL_E_KEY);
    assert_null(strstr(w.buf, "c=3"));

    /* "a=1" inside a quoted value is not a field: adding key "a" once is fine. */
    ctl_writer_begin(&w, 'R', 1, "OK");
    ctl_writer_add(&w, "b", "x a=1");
    ctl_writer_add(&w, "a", "2");
    assert_true(ctl_writer_finish(&w) > 0);
}

static void test_limits(void **state)
{
    struct ctl_writer w;
    struct ctl_frame f;
    char key[24], big[300];
    int n;

    ctl_writer_begin(&w, 'R', 1, "OK");
    for (int i = 0; i < CTL_FIELDS_MAX; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        ctl_writer_add_int(&w, key, i);
    }
    n = ctl_writer_finish(&w);
    assert_true(n > 0);
    assert_int_equal(ctl_frame_parse(w.buf, (size_t)n, &f), 0);
    ctl_writer_begin(&w, 'R', 1, "OK");
    for (int i = 0; i <= CTL_FIELDS_MAX; i++) {
        snprintf(key, sizeof(key), "k%d", i);
        ctl_writer_add_int(&w, key, i);
    }
    assert_int_equal(ctl_writer_finish(&w), -CTL_E_TOOMANY);

    /* "$R 1 OK a=" is 10 bytes, the trailer 7: a 239-byte value fills 256 exactly. */
    memset(big, 'v', sizeof(big));
    big[239] = '\0';
    ctl_writer_begin(&w, 'R', 1, "OK");
    ctl_writer_add(&w, "a", big);
    n = ctl_writer_finish(&w);
    assert_int_equal(n, CTL_FRAME_MAX);
    assert_int_equal(strlen(w.buf), CTL_FRAME_MAX);
    assert_int_equal(ctl_frame_parse(w.buf, (size_t)n, &f), 0);
    big[239] = 'v';
    big[240] = '\0';
    ctl_writer_begin(&w, 'R', 1, "OK");
    ctl_writer_add(&w, "a", big);
    assert_int_equal(ctl_writer_finish(&w), -CTL_E_OVERFLOW);
}

/* The widest STATUS reply the protocol allows (8 sensors, 4 pumps, every value at its widest)
 * fits in one frame, so a controller never has to drop a reading. */
static void test_largest_status_fits(void **state)
{
    struct ctl_writer w;
    char key[8], reading[24];
    ctl_writer_begin(&w, CTL_KIND_REPLY, 65535, "OK");
    ctl_writer_add_int(&w, "up", 4294967295L);
    ctl_writer_add(&w, "level", "precritical");
    ctl_writer_add(&w, "reason", "sensors_lost");
    ctl_writer_add_int(&w, "cut_in", 900);
    ctl_writer_add_int(&w, "halt", 1);
    ctl_writer_add(&w, "host", "lost");
    ctl_writer_add_centi(&w, "flow", 99999);
    for (unsigned i = 0; i < CTL_SENSORS_MAX; i++) {
        snprintf(key, sizeof(key), "t%u", i + 1);
        ctl_writer_add_centi(&w, key, -1234);
    }
    for (unsigned i = 0; i < CTL_PUMPS_MAX; i++) {
        snprintf(key, sizeof(key), "p%u", i + 1);
        assert_true(ctl_pump_format(99999, 100, reading, sizeof(reading)) > 0);
        ctl_writer_add(&w, key, reading);
    }
    int n = ctl_writer_finish(&w);
    if (n < 0)
        fail_msg("largest STATUS does not fit: %s", ctl_strerror(n));
    struct ctl_frame f;
    assert_int_equal(ctl_frame_parse(w.buf, (size_t)n, &f), 0);
    assert_int_equal(f.n_fields, 7 + CTL_SENSORS_MAX + CTL_PUMPS_MAX);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_write_exact),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refuses_what_parser_refuses),
        cmocka_unit_test(test_sticky_and_duplicates),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_largest_status_fits),
    };
    return test_run_cases(tests);
}
