/* The thermal model: steady state under the default curves, and what failures do to it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test-main.h"

#include "sim-model.h"
#include "sim-protect.h"

/* The controller's pump logic without the alarms: curve below warning, 100 % from it. */
static int curve_duty(const struct sim_reading *r, unsigned pump, void *userdata)
{
    const struct ctl_settings *s = userdata;
    long t;

    if (!sim_reading_hottest(r, &t) || t >= s->limits.warning_centi)
        return 100;
    return ctl_curve_duty(&s->curve[pump], t);
}

/* Runs the model for seconds with the controller commanding the pumps once a second. */
static void run(struct sim_model *m, const struct ctl_settings *s, unsigned seconds)
{
    struct sim_reading r;

    for (unsigned t = 0; t < seconds; t++) {
        sim_model_read(m, &r);
        for (unsigned i = 0; i < m->params.n_pumps; i++)
            sim_model_set_duty(m, i, curve_duty(&r, i, (void *)s));
        sim_model_step(m, 1.0);
    }
}

static void settled(struct sim_model *m, struct ctl_settings *s, unsigned n_pumps)
{
    struct sim_model_params p;

    sim_model_params_default(&p);
    p.n_pumps = n_pumps;
    p.noise = false;
    ctl_settings_defaults(s, n_pumps);
    sim_model_init(m, &p);
    sim_model_settle(m, 7200, curve_duty, s);
}

static double hottest_c(struct sim_model *m)
{
    struct sim_reading r;
    long t;

    sim_model_read(m, &r);
    assert_true(sim_reading_hottest(&r, &t));
    return t / 100.0;
}

static void test_defaults(void **state)
{
    struct sim_model_params p;
    struct sim_model m;

    sim_model_params_default(&p);
    assert_int_equal(p.n_pumps, 2);
    sim_model_init(&m, &p);
    /* 4 GPUs x 450 W plus a 300 W host, as in the node this simulates. */
    assert_true(sim_model_heat_watts(&m) == 2100.0);
}

static void test_steady_state_band(void **state)
{
    struct ctl_settings s;
    struct sim_model m;
    struct sim_reading r;

    settled(&m, &s, 2);
    sim_model_read(&m, &r);
    for (unsigned i = 0; i < SIM_SENSORS; i++) {
        assert_true(r.sensor_ok[i]);
        assert_in_range(r.temp_centi[i], 3000, 4000);
    }
    /* The outlet carries the GPUs' heat and reads hottest; the inlet returns cooled. */
    assert_true(r.temp_centi[SIM_SENSOR_OUTLET] > r.temp_centi[SIM_SENSOR_TANK]);
    assert_true(r.temp_centi[SIM_SENSOR_TANK] > r.temp_centi[SIM_SENSOR_INLET]);
    assert_in_range(r.temp_centi[SIM_SENSOR_OUTLET], 3500, 4000);
    assert_in_range(r.flow_centi, 800, 1800);
    for (unsigned i = 0; i < 2; i++) {
        assert_in_range(r.duty[i], 45, 70);
        assert_in_range(r.rpm[i], SIM_RPM_MAX * 0.45 - 50, SIM_RPM_MAX * 0.70 + 50);
    }
    /* Settled means settled: ten more minutes move it by less than half a degree. */
    double before = hottest_c(&m);
    run(&m, &s, 600);
    assert_true(hottest_c(&m) - before < 0.5 && before - hottest_c(&m) < 0.5);
}

static void test_single_pump_band(void **state)
{
    struct ctl_settings s;
    struct sim_model m;

    settled(&m, &s, 1);
    double t = hottest_c(&m);
    assert_true(t >= 35 && t <= 40);
}

static void test_stopped_pump_heats_tank(void **state)
{
    struct ctl_settings s;
    struct sim_model m;
    struct sim_reading r;

    settled(&m, &s, 2);
    double before = hottest_c(&m);
    sim_model_fail_pump(&m, 1, true);
    run(&m, &s, 5);
    sim_model_read(&m, &r);
    /* The controller must see the stop within seconds (§7: < 200 rpm). */
    assert_true(r.rpm[1] < SIM_PUMP_STOPPED_RPM);
    assert_true(r.duty[1] > 0);
    run(&m, &s, 55);
    assert_true(hottest_c(&m) - before > 3); /* degrees a minute */
    run(&m, &s, 240);
    assert_true(hottest_c(&m) - before > 20); /* tens of degrees in five minutes */
}

static void test_primary_pump_stop_heats_too(void **state)
{
    struct ctl_settings s;
    struct sim_model m;
    struct sim_reading r;

    settled(&m, &s, 2);
    double before = hottest_c(&m);
    sim_model_fail_pump(&m, 0, true);
    run(&m, &s, 300);
    sim_model_read(&m, &r);
    assert_true(r.flow_centi < 100);
    assert_true(hottest_c(&m) - before > 20);
}

static void test_pump_recovers(void **state)
{
    struct ctl_settings s;
    struct sim_model m;
    struct sim_reading r;

    settled(&m, &s, 2);
    sim_model_fail_pump(&m, 1, true);
    run(&m, &s, 30);
    sim_model_fail_pump(&m, 1, false);
    run(&m, &s, 5);
    sim_model_read(&m, &r);
    assert_true(r.rpm[1] > 1000);
}

static void test_flow_restriction(void **state)
{
    struct ctl_settings s;
    struct sim_model m;
    struct sim_reading r;

    settled(&m, &s, 2);
    sim_model_restrict_flow(&m, 0.12);
    /* The controller raises flow_low and the pumps run flat out; the flow still stays under
     * limit.flow_min. */
    for (unsigned i = 0; i < 2; i++)
        sim_model_set_duty(&m, i, 100);
    sim_model_step(&m, 30);
    sim_model_read(&m, &r);
    assert_true(r.rpm[0] > 4000);
    assert_true(r.flow_centi < s.limits.flow_min_centi);
}

static void test_sensor_fault(void **state)
{
    struct ctl_settings s;
    struct sim_model m;
    struct sim_reading r;

    settled(&m, &s, 2);
    sim_model_fail_sensor(&m, SIM_SENSOR_TANK, true);
    sim_model_read(&m, &r);
    assert_false(r.sensor_ok[SIM_SENSOR_TANK]);
    assert_true(r.sensor_ok[SIM_SENSOR_INLET]);
    sim_model_fail_sensor(&m, SIM_SENSOR_TANK, false);
    sim_model_read(&m, &r);
    assert_true(r.sensor_ok[SIM_SENSOR_TANK]);
}

static void test_ambient_rise(void **state)
{
    struct ctl_settings s;
    struct sim_model m;

    settled(&m, &s, 2);
    sim_model_set_ambient(&m, 46);
    run(&m, &s, 900);
    /* Hot air outside drives the tank to pre-critical temperatures even at full pump speed. */
    assert_true(hottest_c(&m) * 100 >= s.limits.precritical_centi);
}

static void test_no_heat_stays_near_ambient(void **state)
{
    struct ctl_settings s;
    struct sim_model_params p;
    struct sim_model m;

    sim_model_params_default(&p);
    p.n_gpus = 0;
    p.host_watts = 0;
    p.noise = false;
    ctl_settings_defaults(&s, 2);
    sim_model_init(&m, &p);
    sim_model_settle(&m, 3600, curve_duty, &s);
    double t = hottest_c(&m);
    assert_true(t > 24.9 && t < 25.1);
}

static void test_speed_scales_heat_only(void **state)
{
    struct ctl_settings s;
    struct sim_model slow, fast;
    struct sim_reading r;

    settled(&slow, &s, 2);
    settled(&fast, &s, 2);
    fast.params.speed = 10;
    double start = hottest_c(&slow);
    sim_model_fail_pump(&slow, 1, true);
    sim_model_fail_pump(&fast, 1, true);
    /* The pump spins down on the real clock whatever the speed ... */
    run(&fast, &s, 1);
    sim_model_read(&fast, &r);
    assert_true(r.rpm[1] > SIM_PUMP_STOPPED_RPM);
    /* ... while the tank heats ten times as fast. */
    run(&fast, &s, 29);
    run(&slow, &s, 300);
    double rise_fast = hottest_c(&fast) - start, rise_slow = hottest_c(&slow) - start;
    assert_true(rise_fast > 15);
    assert_true(rise_fast > rise_slow * 0.8 && rise_fast < rise_slow * 1.2);
}

static void test_noise_is_seeded(void **state)
{
    struct sim_model_params p;
    struct sim_model a, b, c;
    struct sim_reading ra, rb, rc;
    int differ = 0;

    sim_model_params_default(&p);
    sim_model_init(&a, &p);
    sim_model_init(&b, &p);
    p.seed = 2;
    sim_model_init(&c, &p);
    for (int i = 0; i < 20; i++) {
        sim_model_read(&a, &ra);
        sim_model_read(&b, &rb);
        sim_model_read(&c, &rc);
        assert_memory_equal(ra.temp_centi, rb.temp_centi, sizeof(ra.temp_centi));
        differ += ra.temp_centi[0] != rc.temp_centi[0];
        /* Small noise: a few hundredths around the true 25 C. */
        assert_in_range(ra.temp_centi[0], 2480, 2520);
    }
    assert_true(differ > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_steady_state_band),
        cmocka_unit_test(test_single_pump_band),
        cmocka_unit_test(test_stopped_pump_heats_tank),
        cmocka_unit_test(test_primary_pump_stop_heats_too),
        cmocka_unit_test(test_pump_recovers),
        cmocka_unit_test(test_flow_restriction),
        cmocka_unit_test(test_sensor_fault),
        cmocka_unit_test(test_ambient_rise),
        cmocka_unit_test(test_no_heat_stays_near_ambient),
        cmocka_unit_test(test_speed_scales_heat_only),
        cmocka_unit_test(test_noise_is_seeded),
    };
    return test_run_cases(tests);
}
