/* Unit tests: decimal and fixed-point numbers in field values. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test-main.h"

#include "ctl-proto.h"

static void test_parse_centi(void **state)
{
    static const struct {
        const char *s;
        long v;
    } ok[] = {
        {"31.25", 3125}, {"31.2", 3120}, {"12", 1200},          {"-4.5", -450},
        {"-0.05", -5},   {"0", 0},       {"99999.99", 9999999}, {"-99999.99", -9999999},
    };
    static const char *const bad[] = {"",   "-",  "1.",  ".5",     "1.234", "1,5", "+1",
                                      " 1", "1 ", "1e3", "100000", "abc",   "1.-2"};
    long v;

    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        assert_int_equal(ctl_parse_centi(ok[i].s, &v), 0);
        assert_int_equal(v, ok[i].v);
    }
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = 42;
        if (ctl_parse_centi(bad[i], &v) != -CTL_E_NUMBER)
            fail_msg("'%s' accepted", bad[i]);
        assert_int_equal(v, 42);
    }
}

static void test_parse_long(void **state)
{
    long v;

    assert_int_equal(ctl_parse_long("600", 5, 600, &v), 0);
    assert_int_equal(v, 600);
    assert_int_equal(ctl_parse_long("-3", -5, 5, &v), 0);
    assert_int_equal(v, -3);
    assert_int_equal(ctl_parse_long("601", 5, 600, &v), -CTL_E_NUMBER);
    assert_int_equal(ctl_parse_long("4", 5, 600, &v), -CTL_E_NUMBER);
    assert_int_equal(ctl_parse_long("1.0", 0, 9, &v), -CTL_E_NUMBER);
    assert_int_equal(ctl_parse_long("", 0, 9, &v), -CTL_E_NUMBER);
    assert_int_equal(ctl_parse_long("99999999999999999999999", 0, 9, &v), -CTL_E_NUMBER);
    assert_int_equal(ctl_parse_long(NULL, 0, 9, &v), -CTL_E_NUMBER);
}

static void test_format_centi(void **state)
{
    char buf[32];

    assert_int_equal(ctl_format_centi(4200, false, buf, sizeof(buf)), 5);
    assert_string_equal(buf, "42.00");
    ctl_format_centi(-450, false, buf, sizeof(buf));
    assert_string_equal(buf, "-4.50");
    ctl_format_centi(-5, false, buf, sizeof(buf));
    assert_string_equal(buf, "-0.05");
    ctl_format_centi(4200, true, buf, sizeof(buf));
    assert_string_equal(buf, "42");
    ctl_format_centi(3050, true, buf, sizeof(buf));
    assert_string_equal(buf, "30.5");
    ctl_format_centi(3125, true, buf, sizeof(buf));
    assert_string_equal(buf, "31.25");
    ctl_format_centi(-450, true, buf, sizeof(buf));
    assert_string_equal(buf, "-4.5");
    assert_int_equal(ctl_format_centi(4200, false, buf, 5), -CTL_E_OVERFLOW);

    /* Formatting and parsing agree in both forms. */
    for (long c = -20000; c <= 20000; c += 7) {
        long back;
        ctl_format_centi(c, true, buf, sizeof(buf));
        assert_int_equal(ctl_parse_centi(buf, &back), 0);
        assert_int_equal(back, c);
        ctl_format_centi(c, false, buf, sizeof(buf));
        assert_int_equal(ctl_parse_centi(buf, &back), 0);
        assert_int_equal(back, c);
    }
}

static void test_pump_reading(void **state)
{
    long rpm;
    int duty;
    char buf[16];
    assert_int_equal(ctl_pump_parse("2410/55", &rpm, &duty), 0);
    assert_int_equal(rpm, 2410);
    assert_int_equal(duty, 55);
    assert_int_equal(ctl_pump_parse("0/100", &rpm, &duty), 0);
    assert_int_equal(rpm, 0);
    assert_int_equal(duty, 100);
    static const char *const bad[] = {"2410",  "/55",   "2410/", "2410/101",           "-1/50",
                                      "24x/5", "1/2/3", "",      "12345678901234567/1"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rpm = 7;
        if (ctl_pump_parse(bad[i], &rpm, &duty) != -CTL_E_NUMBER || rpm != 7)
            fail_msg("'%s' accepted or output written", bad[i]);
    }
    assert_int_equal(ctl_pump_format(2410, 55, buf, sizeof(buf)), 7);
    assert_string_equal(buf, "2410/55");
    assert_int_equal(ctl_pump_format(2410, 101, buf, sizeof(buf)), -CTL_E_NUMBER);
    assert_int_equal(ctl_pump_format(1000000, 100, buf, 8), -CTL_E_OVERFLOW);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_centi),
        cmocka_unit_test(test_parse_long),
        cmocka_unit_test(test_format_centi),
        cmocka_unit_test(test_pump_reading),
    };
    return test_run_cases(tests);
}
