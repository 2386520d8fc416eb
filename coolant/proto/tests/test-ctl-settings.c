/* Unit tests: the settings table - defaults, GET formats, SET all-or-none and its reasons. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "ctl-proto.h"

static void expect_get(const struct ctl_settings *s, const char *key, const char *want)
{
    char buf[128];
    int n = ctl_settings_get(s, key, buf, sizeof(buf));

    if (n < 0)
        fail_msg("%s: %s", key, ctl_strerror(n));
    assert_string_equal(buf, want);
    assert_int_equal(n, strlen(want));
}

static void test_defaults_and_get(void **state)
{
    struct ctl_settings s;
    char why[160], buf[8];

    ctl_settings_defaults(&s, 2);
    assert_int_equal(ctl_settings_check(&s, why, sizeof(why)), 0);
    expect_get(&s, "pump.1.curve", "30:40,45:70,55:100");
    expect_get(&s, "pump.2.curve", "30:40,45:70,55:100");
    expect_get(&s, "pump.2.min_duty", "20");
    expect_get(&s, "limit.warning", "45.00");
    expect_get(&s, "limit.precritical", "55.00");
    expect_get(&s, "limit.critical", "60.00");
    expect_get(&s, "limit.flow_min", "4.00");
    expect_get(&s, "limit.cut_delay", "30");
    expect_get(&s, "limit.halt_max", "120");
    expect_get(&s, "host.timeout", "10");
    assert_int_equal(ctl_settings_get(&s, "pump.3.curve", buf, sizeof(buf)), -CTL_E_BADKEY);
    assert_int_equal(ctl_settings_get(&s, "pump.0.curve", buf, sizeof(buf)), -CTL_E_BADKEY);
    assert_int_equal(ctl_settings_get(&s, "pump.01.curve", buf, sizeof(buf)), -CTL_E_BADKEY);
    assert_int_equal(ctl_settings_get(&s, "pump.1.speed", buf, sizeof(buf)), -CTL_E_BADKEY);
    assert_int_equal(ctl_settings_get(&s, "limit", buf, sizeof(buf)), -CTL_E_BADKEY);
    assert_int_equal(ctl_settings_get(&s, "pump.1.curve", buf, sizeof(buf)), -CTL_E_OVERFLOW);
}

static void collect(const char *key, void *userdata)
{
    char *out = userdata;
    strcat(out, key);
    strcat(out, " ");
}

static void test_keys(void **state)
{
    struct ctl_settings s;
    char out[512] = "";

    ctl_settings_defaults(&s, 2);
    assert_int_equal(ctl_settings_keys(&s, collect, out), 11);
    assert_string_equal(out, "pump.1.curve pump.1.min_duty pump.2.curve pump.2.min_duty "
                             "limit.warning limit.precritical limit.critical limit.flow_min "
                             "limit.cut_delay limit.halt_max host.timeout ");
    ctl_settings_defaults(&s, 1);
    assert_int_equal(ctl_settings_keys(&s, NULL, NULL), 9);
}

static void test_apply_ok(void **state)
{
    const struct ctl_field set[] = {
        {"limit.warning", "42"},   {"limit.precritical", "50"},
        {"limit.critical", "58"},  {"pump.2.curve", "30:30,40:60,50.5:100"},
        {"pump.2.min_duty", "30"}, {"host.timeout", "20"},
    };
    struct ctl_settings s;
    char why[160] = "";

    ctl_settings_defaults(&s, 2);
    assert_int_equal(ctl_settings_apply(&s, set, 6, why, sizeof(why)), 0);
    expect_get(&s, "limit.warning", "42.00");
    expect_get(&s, "limit.precritical", "50.00");
    expect_get(&s, "limit.critical", "58.00");
    expect_get(&s, "pump.2.curve", "30:30,40:60,50.5:100");
    expect_get(&s, "pump.2.min_duty", "30");
    expect_get(&s, "pump.1.curve", "30:40,45:70,55:100");
    expect_get(&s, "host.timeout", "20");
}

/* Applies `set` to defaults for 2 pumps, expects refusal `err` with reason `want`, and checks
 * that nothing changed. */
static void expect_refused(const struct ctl_field *set, unsigned n, int err, const char *want)
{
    struct ctl_settings s, before;
    char why[200] = "";

    ctl_settings_defaults(&s, 2);
    before = s;
    assert_int_equal(ctl_settings_apply(&s, set, n, why, sizeof(why)), err);
    assert_memory_equal(&s, &before, sizeof(s));
    assert_string_equal(why, want);
    /* Reasons travel in msg="..." fields. */
    assert_null(strpbrk(why, "\"$*"));
}

static void test_apply_all_or_none(void **state)
{
    /* The first two would be fine alone; the last one spoils the whole SET. */
    const struct ctl_field set1[] = {
        {"limit.cut_delay", "60"}, {"pump.1.min_duty", "30"}, {"limit.warning", "58"}};
    expect_refused(set1, 3, -CTL_E_BADVALUE,
                   "limit.warning 58 C must be below limit.precritical 55 C");

    const struct ctl_field set2[] = {{"limit.cut_delay", "60"}, {"pump.9.curve", "1:1,2:2"}};
    expect_refused(set2, 2, -CTL_E_BADKEY, "pump.9.curve: no such setting");
    const struct ctl_field set3[] = {{"limit.cut_delay", "60"}, {"pump.3.curve", "1:1,2:2"}};
    expect_refused(set3, 2, -CTL_E_BADKEY, "pump.3.curve: no such setting");

    /* Lowering the critical limit below the curve's 100% point is refused for the curve. */
    const struct ctl_field set4[] = {{"limit.precritical", "50"}, {"limit.critical", "52"}};
    expect_refused(set4, 2, -CTL_E_BADVALUE,
                   "pump 1 curve: duty 91% at the critical temperature 52 C; must be 100%");
    const struct ctl_field set5[] = {{"pump.2.curve", "30:40,45:70,70:90"}};
    expect_refused(set5, 1, -CTL_E_BADVALUE,
                   "pump 2 curve: duty 82% at the critical temperature 60 C; must be 100%");
    const struct ctl_field set6[] = {{"pump.1.curve", "30:40,60:70,55:100"}};
    expect_refused(set6, 1, -CTL_E_BADVALUE,
                   "pump 1 curve point 3: 55 C after 60 C; points must rise");
    /* Raising min_duty above the curve's first point is refused too. */
    const struct ctl_field set7[] = {{"pump.1.min_duty", "50"}};
    expect_refused(set7, 1, -CTL_E_BADVALUE,
                   "pump 1 curve point 1: duty 40% is below the pump's min_duty 50%");
}

static void test_apply_value_rules(void **state)
{
    const struct ctl_field f1[] = {{"limit.critical", "95"}, {"limit.precritical", "90"}};
    expect_refused(f1, 2, -CTL_E_BADVALUE, "limit.critical 95 C must be at most 90 C");
    const struct ctl_field f2[] = {{"limit.precritical", "61"}};
    expect_refused(f2, 1, -CTL_E_BADVALUE,
                   "limit.precritical 61 C must be below limit.critical 60 C");
    const struct ctl_field f3[] = {{"limit.flow_min", "-0.5"}};
    expect_refused(f3, 1, -CTL_E_BADVALUE, "limit.flow_min -0.5 L/min must not be negative");
    const struct ctl_field f4[] = {{"limit.cut_delay", "4"}};
    expect_refused(f4, 1, -CTL_E_BADVALUE, "limit.cut_delay 4 s must be 5 to 600 s");
    const struct ctl_field f5[] = {{"limit.halt_max", "901"}};
    expect_refused(f5, 1, -CTL_E_BADVALUE, "limit.halt_max 901 s must be 10 to 900 s");
    const struct ctl_field f6[] = {{"host.timeout", "1"}};
    expect_refused(f6, 1, -CTL_E_BADVALUE, "host.timeout 1 s must be 2 to 600 s");
    const struct ctl_field f7[] = {{"pump.1.min_duty", "101"}};
    expect_refused(f7, 1, -CTL_E_BADVALUE,
                   "pump.1.min_duty 101 must be a whole percent from 0 to 100");
    const struct ctl_field f8[] = {{"limit.warning", "warm"}};
    expect_refused(f8, 1, -CTL_E_BADVALUE,
                   "limit.warning warm is not a number with at most two decimals");
    const struct ctl_field f9[] = {{"limit.cut_delay", "1.5"}};
    expect_refused(f9, 1, -CTL_E_BADVALUE, "limit.cut_delay 1.5 is not a whole number of seconds");
    const struct ctl_field f10[] = {{"pump.2.curve", "30:40,x:70"}};
    expect_refused(f10, 1, -CTL_E_BADVALUE,
                   "pump 2 curve point 2: temperature x is not a number with at most two decimals");
    /* Echoed input that could not travel in msg="..." is masked. */
    const struct ctl_field f11[] = {{"limit.warning", "4\"$*"}};
    expect_refused(f11, 1, -CTL_E_BADVALUE,
                   "limit.warning 4??? is not a number with at most two decimals");
}

static void test_apply_from_frame(void **state)
{
    struct ctl_writer w;
    struct ctl_frame f;
    struct ctl_settings s;
    char why[160];
    int n;

    /* The path a controller takes: a SET frame's fields straight into apply. */
    ctl_writer_begin(&w, CTL_KIND_REQUEST, 5, "SET");
    ctl_writer_add(&w, "limit.warning", "42");
    ctl_writer_add(&w, "pump.1.curve", "25:30,50:100");
    n = ctl_writer_finish(&w);
    assert_int_equal(ctl_frame_parse(w.buf, (size_t)n, &f), 0);
    ctl_settings_defaults(&s, 1);
    assert_int_equal(ctl_settings_apply(&s, f.fields, f.n_fields, why, sizeof(why)), 0);
    expect_get(&s, "limit.warning", "42.00");
    expect_get(&s, "pump.1.curve", "25:30,50:100");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_and_get),  cmocka_unit_test(test_keys),
        cmocka_unit_test(test_apply_ok),          cmocka_unit_test(test_apply_all_or_none),
        cmocka_unit_test(test_apply_value_rules), cmocka_unit_test(test_apply_from_frame),
    };
    return test_run_cases(tests);
}
