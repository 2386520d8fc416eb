/* Protection logic (docs/protocol.md §7) on a fake clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test-main.h"

#include "sim-protect.h"

struct fixture {
    struct ctl_settings s;
    struct sim_protect p;
    struct sim_reading r;
};

static struct fixture fx;

/* A healthy two-pump tank at temperature t (centi) on every sensor. */
static void healthy(long t)
{
    fx.r = (struct sim_reading){.n_sensors = 3, .n_pumps = 2, .flow_centi = 1200};
    for (unsigned i = 0; i < 3; i++) {
        fx.r.sensor_ok[i] = true;
        fx.r.temp_centi[i] = t;
    }
    for (unsigned i = 0; i < 2; i++) {
        fx.r.duty[i] = 60;
        fx.r.rpm[i] = 2600;
    }
}

static int setup(void **state)
{
    ctl_settings_defaults(&fx.s, 2);
    sim_protect_init(&fx.p);
    healthy(3800);
    return 0;
}

static int update(uint64_t now_ms)
{
    return sim_protect_update(&fx.p, &fx.s.limits, &fx.r, now_ms);
}

static void set_temp(long t)
{
    for (unsigned i = 0; i < 3; i++)
        fx.r.temp_centi[i] = t;
}

static void test_normal(void **state)
{
    assert_int_equal(update(0), 0);
    assert_int_equal(fx.p.level, SIM_LEVEL_NORMAL);
    assert_int_equal(fx.p.reason, SIM_REASON_NONE);
    assert_int_equal(sim_protect_cut_in(&fx.p, 0), -1);
    /* Below the curve's first point the duty is held at it; between points it interpolates. */
    assert_int_equal(sim_protect_duty(&fx.p, &fx.s, 0), 56);
}

static void test_hottest_sensor_decides(void **state)
{
    fx.r.temp_centi[1] = 4600; /* only the outlet is hot */
    update(0);
    assert_int_equal(fx.p.level, SIM_LEVEL_WARNING);
    assert_int_equal(fx.p.reason, SIM_REASON_TEMP_HIGH);
    assert_int_equal(fx.p.temp_centi, 4600);
    assert_int_equal(sim_protect_duty(&fx.p, &fx.s, 1), 100);
}

static void test_warning_hysteresis(void **state)
{
    set_temp(4500); /* exactly at limit.warning */
    assert_true(update(0) & SIM_PROTECT_CHANGED);
    assert_int_equal(fx.p.level, SIM_LEVEL_WARNING);
    set_temp(4400); /* below the threshold, not 2 C below: stays */
    assert_false(update(1000) & SIM_PROTECT_CHANGED);
    assert_int_equal(fx.p.level, SIM_LEVEL_WARNING);
    set_temp(4301);
    update(2000);
    assert_int_equal(fx.p.level, SIM_LEVEL_WARNING);
    set_temp(4300); /* 2 C below: clears */
    assert_true(update(3000) & SIM_PROTECT_CHANGED);
    assert_int_equal(fx.p.level, SIM_LEVEL_NORMAL);
}

static void test_precritical_schedules_cut(void **state)
{
    set_temp(5500);
    int f = update(10000);
    assert_true(f & SIM_PROTECT_CHANGED);
    assert_false(f & SIM_PROTECT_CUT);
    assert_int_equal(fx.p.level, SIM_LEVEL_PRECRITICAL);
    assert_int_equal(fx.p.reason, SIM_REASON_TEMP_HIGH);
    assert_int_equal(sim_protect_cut_in(&fx.p, 10000), 30);
    assert_int_equal(sim_protect_cut_in(&fx.p, 10001), 29); /* rounded down */
    assert_int_equal(sim_protect_cut_in(&fx.p, 11000), 29);
    /* Still precritical: the schedule does not move. */
    assert_false(update(39999) & SIM_PROTECT_CUT);
    assert_true(update(40000) & SIM_PROTECT_CUT);
    assert_true(fx.p.cut);
    assert_false(fx.p.halt);
    /* After the cut nothing changes any more. */
    set_temp(3000);
    assert_int_equal(update(41000), 0);
    assert_int_equal(fx.p.level, SIM_LEVEL_PRECRITICAL);
}

static void test_cut_delay_setting(void **state)
{
    fx.s.limits.cut_delay_s = 5;
    set_temp(5600);
    update(0);
    assert_int_equal(sim_protect_cut_in(&fx.p, 0), 5);
    assert_true(update(5000) & SIM_PROTECT_CUT);
}

static void test_cut_cancelled_when_cause_goes(void **state)
{
    set_temp(5600);
    update(0);
    assert_int_equal(sim_protect_cut_in(&fx.p, 0), 30);
    set_temp(5400); /* under the threshold but within hysteresis: still precritical */
    update(5000);
    assert_int_equal(fx.p.level, SIM_LEVEL_PRECRITICAL);
    assert_int_equal(sim_protect_cut_in(&fx.p, 5000), 25);
    set_temp(5300); /* 2 C below: back to warning, the cut is cancelled */
    assert_true(update(6000) & SIM_PROTECT_CHANGED);
    assert_int_equal(fx.p.level, SIM_LEVEL_WARNING);
    assert_int_equal(sim_protect_cut_in(&fx.p, 6000), -1);
    assert_false(update(40000) & SIM_PROTECT_CUT);
    assert_false(fx.p.cut);
    /* A new precritical episode gets a full delay again. */
    set_temp(5500);
    update(50000);
    assert_int_equal(sim_protect_cut_in(&fx.p, 50000), 30);
}

static void test_halt_defers_cut(void **state)
{
    set_temp(5600);
    update(0);
    assert_int_equal(sim_protect_halt(&fx.p, &fx.s.limits, 90, 10000), 90);
    assert_true(fx.p.halt);
    assert_false(update(30000) & SIM_PROTECT_CUT); /* the original time has passed */
    assert_false(update(99999) & SIM_PROTECT_CUT);
    assert_true(update(100000) & SIM_PROTECT_CUT);
}

static void test_halt_capped_by_halt_max(void **state)
{
    set_temp(5600);
    update(0);
    assert_int_equal(sim_protect_halt(&fx.p, &fx.s.limits, 500, 1000), 120);
    fx.s.limits.halt_max_s = 10;
    assert_int_equal(sim_protect_halt(&fx.p, &fx.s.limits, 500, 2000), 10);
    /* A shorter within than what is left brings the cut forward: the host is off by then. */
    assert_int_equal(sim_protect_halt(&fx.p, &fx.s.limits, 3, 3000), 3);
    assert_true(update(6000) & SIM_PROTECT_CUT);
}

static void test_halt_without_schedule(void **state)
{
    update(0);
    assert_int_equal(sim_protect_halt(&fx.p, &fx.s.limits, 60, 0), -1);
    assert_true(fx.p.halt);
    /* A later precritical alarm still schedules its cut, and the cut is an orderly one. */
    set_temp(5600);
    update(1000);
    assert_int_equal(sim_protect_cut_in(&fx.p, 1000), 30);
    assert_true(update(31000) & SIM_PROTECT_CUT);
    assert_true(fx.p.halt);
}

static void test_critical_cuts_at_once(void **state)
{
    set_temp(5600);
    update(0);
    sim_protect_halt(&fx.p, &fx.s.limits, 120, 1000);
    set_temp(6000);
    int f = update(2000);
    assert_true(f & SIM_PROTECT_CUT);
    assert_true(f & SIM_PROTECT_CHANGED);
    assert_int_equal(fx.p.level, SIM_LEVEL_CRITICAL);
    assert_true(fx.p.cut);
}

static void test_critical_from_normal(void **state)
{
    set_temp(7000);
    assert_true(update(0) & SIM_PROTECT_CUT);
    assert_int_equal(fx.p.level, SIM_LEVEL_CRITICAL);
}

static void test_pump_stopped(void **state)
{
    fx.r.rpm[1] = 150;
    update(0);
    assert_int_equal(fx.p.level, SIM_LEVEL_PRECRITICAL);
    assert_int_equal(fx.p.reason, SIM_REASON_PUMP_STOPPED);
    assert_int_equal(fx.p.pump, 2);
    assert_int_equal(sim_protect_cut_in(&fx.p, 0), 30);
    /* A tachometer hovering just above 200 rpm does not clear it ... */
    fx.r.rpm[1] = 250;
    assert_false(update(1000) & SIM_PROTECT_CHANGED);
    assert_int_equal(sim_protect_cut_in(&fx.p, 1000), 29);
    /* ... a pump really turning again does, and the cut is cancelled. */
    fx.r.rpm[1] = 1500;
    assert_true(update(2000) & SIM_PROTECT_CHANGED);
    assert_int_equal(fx.p.level, SIM_LEVEL_NORMAL);
    assert_int_equal(sim_protect_cut_in(&fx.p, 2000), -1);
}

static void test_pump_off_by_duty_is_not_stopped(void **state)
{
    fx.r.duty[0] = 0;
    fx.r.rpm[0] = 0;
    update(0);
    assert_int_equal(fx.p.level, SIM_LEVEL_NORMAL);
}

static void test_flow_low(void **state)
{
    fx.r.flow_centi = 399;
    update(0);
    assert_int_equal(fx.p.level, SIM_LEVEL_PRECRITICAL);
    assert_int_equal(fx.p.reason, SIM_REASON_FLOW_LOW);
    fx.r.flow_centi = 420; /* inside the flow hysteresis */
    update(1000);
    assert_int_equal(fx.p.reason, SIM_REASON_FLOW_LOW);
    fx.r.flow_centi = 450;
    update(2000);
    assert_int_equal(fx.p.level, SIM_LEVEL_NORMAL);
}

static void test_sensor_faults(void **state)
{
    fx.r.sensor_ok[2] = false;
    update(0);
    assert_int_equal(fx.p.level, SIM_LEVEL_WARNING);
    assert_int_equal(fx.p.reason, SIM_REASON_SENSOR_FAULT);
    assert_int_equal(fx.p.sensor, 3);
    assert_int_equal(sim_protect_duty(&fx.p, &fx.s, 0), 100);
    fx.r.sensor_ok[0] = false;
    update(1000);
    assert_int_equal(fx.p.level, SIM_LEVEL_WARNING);
    assert_int_equal(fx.p.sensor, 1);
    fx.r.sensor_ok[1] = false;
    update(2000);
    assert_int_equal(fx.p.level, SIM_LEVEL_PRECRITICAL);
    assert_int_equal(fx.p.reason, SIM_REASON_SENSORS_LOST);
    assert_false(fx.p.have_temp);
    assert_int_equal(sim_protect_cut_in(&fx.p, 2000), 30);
    assert_int_equal(sim_protect_duty(&fx.p, &fx.s, 1), 100);
}

static void test_hardware_reason_wins_a_tie(void **state)
{
    set_temp(5600);
    fx.r.rpm[0] = 0;
    update(0);
    assert_int_equal(fx.p.level, SIM_LEVEL_PRECRITICAL);
    assert_int_equal(fx.p.reason, SIM_REASON_PUMP_STOPPED);
    assert_int_equal(fx.p.pump, 1);
    /* The pump comes back while the fluid is still hot: same level, new reason, same cut. */
    fx.r.rpm[0] = 2000;
    assert_true(update(4000) & SIM_PROTECT_CHANGED);
    assert_int_equal(fx.p.reason, SIM_REASON_TEMP_HIGH);
    assert_int_equal(sim_protect_cut_in(&fx.p, 4000), 26);
}

static void test_names(void **state)
{
    assert_string_equal(sim_level_name(SIM_LEVEL_PRECRITICAL), "precritical");
    assert_string_equal(sim_reason_name(SIM_REASON_SENSORS_LOST), "sensors_lost");
    assert_string_equal(sim_reason_name(SIM_REASON_PUMP_STOPPED), "pump_stopped");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_normal, setup),
        cmocka_unit_test_setup(test_hottest_sensor_decides, setup),
        cmocka_unit_test_setup(test_warning_hysteresis, setup),
        cmocka_unit_test_setup(test_precritical_schedules_cut, setup),
        cmocka_unit_test_setup(test_cut_delay_setting, setup),
        cmocka_unit_test_setup(test_cut_cancelled_when_cause_goes, setup),
        cmocka_unit_test_setup(test_halt_defers_cut, setup),
        cmocka_unit_test_setup(test_halt_capped_by_halt_max, setup),
        cmocka_unit_test_setup(test_halt_without_schedule, setup),
        cmocka_unit_test_setup(test_critical_cuts_at_once, setup),
        cmocka_unit_test_setup(test_critical_from_normal, setup),
        cmocka_unit_test_setup(test_pump_stopped, setup),
        cmocka_unit_test_setup(test_pump_off_by_duty_is_not_stopped, setup),
        cmocka_unit_test_setup(test_flow_low, setup),
        cmocka_unit_test_setup(test_sensor_faults, setup),
        cmocka_unit_test_setup(test_hardware_reason_wins_a_tie, setup),
        cmocka_unit_test_setup(test_names, setup),
    };
    return test_run_cases(tests);
}
