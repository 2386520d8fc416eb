/* Unit tests: pump curves - syntax, rules and their messages, interpolation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "ctl-proto.h"

static void test_parse_format(void **state)
{
    struct ctl_curve c;
    char why[128], buf[128];

    assert_int_equal(ctl_curve_parse("30:40,45:70,55:100", &c, why, sizeof(why)), 0);
    assert_int_equal(c.n, 3);
    assert_int_equal(c.p[1].temp_centi, 4500);
    assert_int_equal(c.p[1].duty, 70);
    assert_int_equal(ctl_curve_format(&c, buf, sizeof(buf)), 18);
    assert_string_equal(buf, "30:40,45:70,55:100");

    assert_int_equal(ctl_curve_parse("30.5:40,45.25:70", &c, why, sizeof(why)), 0);
    ctl_curve_format(&c, buf, sizeof(buf));
    assert_string_equal(buf, "30.5:40,45.25:70");
    /* "30.00" is read, and written back in the shortest form. */
    assert_int_equal(ctl_curve_parse("30.00:40,45.10:70", &c, why, sizeof(why)), 0);
    ctl_curve_format(&c, buf, sizeof(buf));
    assert_string_equal(buf, "30:40,45.1:70");
    assert_int_equal(ctl_curve_format(&c, buf, 5), -CTL_E_OVERFLOW);
}

static void test_parse_errors(void **state)
{
    static const struct {
        const char *s;
        const char *why;
    } cases[] = {
        {"", "curve: empty"},
        {"30:40,", "curve point 2: expected temperature:duty"},
        {"30:40;45:70", "curve point 1: duty 40;45:70 is not a whole percent"},
        {"30;40", "curve point 1: expected temperature:duty"},
        {"x:40,45:70", "curve point 1: temperature x is not a number"},
        {"30:40,45:7.5", "curve point 2: duty 7.5 is not a whole percent"},
        {"1:1,2:2,3:3,4:4,5:5,6:6,7:7,8:8,9:9", "curve: more than 8 points"},
    };
    struct ctl_curve c = {.n = 77};
    char why[128];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        why[0] = '\0';
        assert_int_equal(ctl_curve_parse(cases[i].s, &c, why, sizeof(why)), -CTL_E_BADVALUE);
        if (strncmp(why, cases[i].why, strlen(cases[i].why)) != 0)
            fail_msg("'%s': got '%s'", cases[i].s, why);
    }
    assert_int_equal(c.n, 77); /* untouched on failure */
}

static void check_msg(const char *curve, int min_duty, long critical, const char *want)
{
    struct ctl_curve c;
    char why[160] = "";

    assert_int_equal(ctl_curve_parse(curve, &c, why, sizeof(why)), 0);
    assert_int_equal(ctl_curve_check(&c, 1, min_duty, critical, why, sizeof(why)), -CTL_E_BADVALUE);
    assert_string_equal(why, want);
}

static void test_check_rules(void **state)
{
    struct ctl_curve c;
    char why[160];

    check_msg("30:40,45:70,60:80,55:100", 20, 6000,
              "pump 1 curve point 4: 55 C after 60 C; points must rise");
    check_msg("30:40,30:70", 20, 6000, "pump 1 curve point 2: 30 C after 30 C; points must rise");
    check_msg("30:40,45:30,55:100", 20, 6000,
              "pump 1 curve point 2: duty 30% after 40%; duty must not fall");
    check_msg("30:40,55:101", 20, 6000, "pump 1 curve point 2: duty 101%; must be 0 to 100%");
    check_msg("30:-1,55:100", 0, 6000, "pump 1 curve point 1: duty -1%; must be 0 to 100%");
    check_msg("30:10,55:100", 20, 6000,
              "pump 1 curve point 1: duty 10% is below the pump's min_duty 20%");
    check_msg("30:40", 20, 6000, "pump 1 curve: needs 2 to 8 points, has 1");
    check_msg("30:40,70:100", 20, 6000,
              "pump 1 curve: duty 85% at the critical temperature 60 C; must be 100%");
    check_msg("30:40,59.5:90", 20, 5950,
              "pump 1 curve: duty 90% at the critical temperature 59.5 C; must be 100%");

    /* 100% exactly at the critical temperature is enough; the default curve passes. */
    assert_int_equal(ctl_curve_parse("30:40,60:100", &c, why, sizeof(why)), 0);
    assert_int_equal(ctl_curve_check(&c, 1, 20, 6000, why, sizeof(why)), 0);
    assert_int_equal(ctl_curve_parse("30:40,45:70,55:100", &c, why, sizeof(why)), 0);
    assert_int_equal(ctl_curve_check(&c, 2, 40, 6000, why, sizeof(why)), 0);
    assert_int_equal(ctl_curve_check(&c, 2, 41, 6000, why, sizeof(why)), -CTL_E_BADVALUE);
    assert_string_equal(why, "pump 2 curve point 1: duty 40% is below the pump's min_duty 41%");
}

static void test_duty(void **state)
{
    struct ctl_curve c;
    char why[64];

    assert_int_equal(ctl_curve_parse("30:40,45:70,55:100", &c, why, sizeof(why)), 0);
    assert_int_equal(ctl_curve_duty(&c, -1000), 40); /* held below the first point */
    assert_int_equal(ctl_curve_duty(&c, 3000), 40);
    assert_int_equal(ctl_curve_duty(&c, 3750), 55); /* midway 30..45 */
    assert_int_equal(ctl_curve_duty(&c, 4500), 70);
    assert_int_equal(ctl_curve_duty(&c, 5000), 85);
    assert_int_equal(ctl_curve_duty(&c, 5500), 100);
    assert_int_equal(ctl_curve_duty(&c, 9000), 100); /* held above the last point */
    /* 30 + 1 C on 30:40..45:70 is 42%; 31.25 C is 42.5%, rounded up to 43. */
    assert_int_equal(ctl_curve_duty(&c, 3100), 42);
    assert_int_equal(ctl_curve_duty(&c, 3125), 43);
    assert_int_equal(ctl_curve_duty(&c, 3124), 42);
    /* Monotonic along a checked curve. */
    for (long t = 2000, prev = 0; t < 7000; t++) {
        int d = ctl_curve_duty(&c, t);
        assert_true(d >= prev);
        prev = d;
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_format),
        cmocka_unit_test(test_parse_errors),
        cmocka_unit_test(test_check_rules),
        cmocka_unit_test(test_duty),
    };
    return test_run_cases(tests);
}
