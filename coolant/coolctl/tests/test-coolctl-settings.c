/* Unit tests for settings.c: what coolctl accepts on its command line and what it refuses
 * locally before anything is written. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test-main.h"
#include <errno.h>
#include <string.h>

#include "coolctl.h"

/* A controller with two pumps and the factory settings: curves 30:40,45:70,55:100, min duty 20,
 * limits 45/55/60. */
static struct ctl_settings defaults(void)
{
    struct ctl_settings s;
    ctl_settings_defaults(&s, 2);
    return s;
}

static void test_points_plain_and_units(void **state)
{
    struct ctl_curve c;
    struct errmsg e = {""};
    assert_int_equal(coolctl_points_parse("30:40,45:70,55:100", &c, &e), 0);
    assert_int_equal(c.n, 3);
    assert_int_equal(c.p[0].temp_centi, 3000);
    assert_int_equal(c.p[0].duty, 40);
    assert_int_equal(c.p[2].temp_centi, 5500);
    assert_int_equal(c.p[2].duty, 100);

    assert_int_equal(coolctl_points_parse("30C:40%, 45.5 \xc2\xb0"
                                          "C : 70 %,55c:100%",
                                          &c, &e),
                     0);
    assert_int_equal(c.n, 3);
    assert_int_equal(c.p[1].temp_centi, 4550);
    assert_int_equal(c.p[1].duty, 70);
    assert_int_equal(c.p[2].duty, 100);
}

static void test_points_syntax_errors(void **state)
{
    struct ctl_curve c;
    struct errmsg e = {""};
    assert_int_equal(coolctl_points_parse("30:40,45-70", &c, &e), -EINVAL);
    assert_non_null(strstr(e.text, "curve point 2"));
    assert_int_equal(coolctl_points_parse("30:40,:70", &c, &e), -EINVAL);
    assert_non_null(strstr(e.text, "curve point 2"));
    assert_int_equal(coolctl_points_parse("", &c, &e), -EINVAL);
    assert_int_equal(coolctl_points_parse("thirty:40,45:70", &c, &e), -EINVAL);
    assert_int_equal(coolctl_points_parse("30:40%%,45:70", &c, &e), -EINVAL);
}

static void test_pump_number(void **state)
{
    struct ctl_settings s = defaults();
    struct errmsg e = {""};
    unsigned pump = 0;
    assert_int_equal(coolctl_pump_parse("2", &s, &pump, &e), 0);
    assert_int_equal(pump, 2);
    assert_int_equal(coolctl_pump_parse("3", &s, &pump, &e), -EINVAL);
    assert_string_equal(e.text, "no pump 3: the controller has 2 pumps");
    assert_int_equal(coolctl_pump_parse("0", &s, &pump, &e), -EINVAL);
    assert_int_equal(coolctl_pump_parse("-1", &s, &pump, &e), -EINVAL);
    assert_int_equal(coolctl_pump_parse("one", &s, &pump, &e), -EINVAL);
    assert_int_equal(pump, 2);
}

static int check_points(const char *points, unsigned pump, struct errmsg *e)
{
    struct ctl_settings s = defaults();
    struct ctl_curve c;
    assert_int_equal(coolctl_points_parse(points, &c, e), 0);
    return coolctl_curve_check(&s, pump, &c, e);
}

static void test_curve_rules(void **state)
{
    struct errmsg e = {""};
    assert_int_equal(check_points("30:40,45:70,55:100", 1, &e), 0);
    assert_int_equal(check_points("25:20,60:100", 2, &e), 0);

    assert_int_equal(check_points("30:40,60:70,55:100", 1, &e), -COOLCTL_E_REFUSED);
    assert_string_equal(e.text, "pump 1 curve point 3: 55 C after 60 C; points must rise");

    assert_int_equal(check_points("30:40,45:30,55:100", 2, &e), -COOLCTL_E_REFUSED);
    assert_non_null(strstr(e.text, "pump 2 curve point 2"));
    assert_non_null(strstr(e.text, "must not fall"));

    /* 100 % only at 65 C: at the critical 60 C the pump would run slower. */
    assert_int_equal(check_points("30:40,45:70,65:100", 1, &e), -COOLCTL_E_REFUSED);
    assert_non_null(strstr(e.text, "critical"));

    assert_int_equal(check_points("30:10,45:70,55:100", 1, &e), -COOLCTL_E_REFUSED);
    assert_non_null(strstr(e.text, "min_duty"));
}

static void test_limits_parse(void **state)
{
    struct coolctl_assign a[6];
    struct errmsg e = {""};
    char *args[] = {"warning=42C", "limit.critical=58", "flow_min=3.5 L/min", "cut_delay=20s"};
    assert_int_equal(coolctl_limits_parse(4, args, a, 6, &e), 4);
    assert_string_equal(a[0].key, "limit.warning");
    assert_string_equal(a[0].value, "42");
    assert_string_equal(a[1].key, "limit.critical");
    assert_string_equal(a[1].value, "58");
    assert_string_equal(a[2].key, "limit.flow_min");
    assert_string_equal(a[2].value, "3.5");
    assert_string_equal(a[3].key, "limit.cut_delay");
    assert_string_equal(a[3].value, "20");

    char *unknown[] = {"warn=40"};
    assert_int_equal(coolctl_limits_parse(1, unknown, a, 6, &e), -EINVAL);
    assert_non_null(strstr(e.text, "unknown limit 'warn'"));
    char *twice[] = {"warning=40", "limit.warning=41"};
    assert_int_equal(coolctl_limits_parse(2, twice, a, 6, &e), -EINVAL);
    char *novalue[] = {"critical= C"};
    assert_int_equal(coolctl_limits_parse(1, novalue, a, 6, &e), -EINVAL);
    assert_int_equal(coolctl_limits_parse(0, NULL, a, 6, &e), -EINVAL);
}

static void test_limits_check(void **state)
{
    struct ctl_settings s = defaults();
    struct coolctl_assign a[6];
    struct errmsg e = {""};

    char *ok[] = {"warning=42", "precritical=50", "critical=58"};
    assert_int_equal(coolctl_limits_parse(3, ok, a, 6, &e), 3);
    assert_int_equal(coolctl_assign_check(&s, a, 3, &e), 0);

    char *order[] = {"warning=56"};
    assert_int_equal(coolctl_limits_parse(1, order, a, 6, &e), 1);
    assert_int_equal(coolctl_assign_check(&s, a, 1, &e), -COOLCTL_E_REFUSED);
    assert_non_null(strstr(e.text, "limit.warning"));

    /* The default curves reach 100 % at 55 C; a critical limit of 54 C would leave them short. */
    char *curve[] = {"precritical=50", "critical=54"};
    assert_int_equal(coolctl_limits_parse(2, curve, a, 6, &e), 2);
    assert_int_equal(coolctl_assign_check(&s, a, 2, &e), -COOLCTL_E_REFUSED);
    assert_non_null(strstr(e.text, "curve"));
}

static void test_assign(void **state)
{
    struct ctl_settings s = defaults();
    struct coolctl_assign a[2];
    struct errmsg e = {""};
    assert_int_equal(coolctl_assign_parse("pump.1.min_duty=30", &a[0], &e), 0);
    assert_string_equal(a[0].key, "pump.1.min_duty");
    assert_string_equal(a[0].value, "30");
    assert_int_equal(coolctl_assign_check(&s, a, 1, &e), 0);

    assert_int_equal(coolctl_assign_parse("pump.1.min_duty", &a[1], &e), -EINVAL);
    assert_int_equal(coolctl_assign_parse("=3", &a[1], &e), -EINVAL);
    assert_int_equal(coolctl_assign_parse("x=", &a[1], &e), -EINVAL);

    /* min duty 50 is above the curve's 40 % point. */
    assert_int_equal(coolctl_assign_parse("pump.1.min_duty=50", &a[0], &e), 0);
    assert_int_equal(coolctl_assign_check(&s, a, 1, &e), -COOLCTL_E_REFUSED);
    assert_int_equal(coolctl_assign_parse("no.such=1", &a[0], &e), 0);
    assert_int_equal(coolctl_assign_check(&s, a, 1, &e), -COOLCTL_E_REFUSED);
    assert_non_null(strstr(e.text, "no.such"));
    assert_int_equal(coolctl_assign_parse("no.such=2", &a[1], &e), 0);
    assert_int_equal(coolctl_assign_check(&s, a, 2, &e), -COOLCTL_E_REFUSED);
    assert_non_null(strstr(e.text, "twice"));

    json_t *o = coolctl_assign_to_json(a, 1);
    assert_string_equal(json_string_value(json_object_get(o, "no.such")), "1");
    assert_int_equal(json_object_size(o), 1);
    json_decref(o);
}

static void test_settings_decode(void **state)
{
    struct errmsg e = {""};
    struct ctl_settings s;
    json_t *j = json_pack("{ss ss ss ss ss ss ss ss ss ss}", "pump.1.curve", "20:30,50:100",
                          "pump.1.min_duty", "25", "pump.2.curve", "30:40,45:70,55:100",
                          "pump.2.min_duty", "20", "limit.warning", "42.00", "limit.precritical",
                          "50.00", "limit.critical", "58.50", "limit.flow_min", "3.25",
                          "limit.cut_delay", "25", "future.key", "ignored");
    assert_int_equal(coolctl_settings_decode(j, &s, &e), 0);
    assert_int_equal(s.n_pumps, 2);
    assert_int_equal(s.curve[0].n, 2);
    assert_int_equal(s.curve[0].p[1].temp_centi, 5000);
    assert_int_equal(s.min_duty[0], 25);
    assert_int_equal(s.limits.warning_centi, 4200);
    assert_int_equal(s.limits.critical_centi, 5850);
    assert_int_equal(s.limits.flow_min_centi, 325);
    assert_int_equal(s.limits.cut_delay_s, 25);
    assert_int_equal(s.limits.halt_max_s, 120); /* absent: the default */

    json_object_set_new(j, "limit.critical", json_integer(60));
    assert_int_equal(coolctl_settings_decode(j, &s, &e), -EINVAL);
    assert_non_null(strstr(e.text, "limit.critical"));
    json_decref(j);

    j = json_pack("{ss}", "limit.warning", "45");
    assert_int_equal(coolctl_settings_decode(j, &s, &e), -EINVAL);
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_points_plain_and_units),
        cmocka_unit_test(test_points_syntax_errors),
        cmocka_unit_test(test_pump_number),
        cmocka_unit_test(test_curve_rules),
        cmocka_unit_test(test_limits_parse),
        cmocka_unit_test(test_limits_check),
        cmocka_unit_test(test_assign),
        cmocka_unit_test(test_settings_decode),
    };
    return test_run_cases(tests);
}
