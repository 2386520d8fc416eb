/* The scenario table and the timeline cursor. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "sim-scenario.h"

static const struct sim_action *find_action(const struct sim_scenario *s, enum sim_action_kind kind,
                                            unsigned nth)
{
    for (size_t i = 0; i < s->n_actions; i++)
        if (s->timeline[i].kind == kind && nth-- == 0)
            return &s->timeline[i];
    return NULL;
}

static void test_required_scenarios_exist(void **state)
{
    static const char *const required[] = {
        "normal", "pump-failure", "flow-loss",         "sensor-failure",
        "unplug", "garbage",      "controller-reboot",
    };
    for (size_t i = 0; i < sizeof(required) / sizeof(required[0]); i++) {
        const struct sim_scenario *s = sim_scenario_find(required[i]);
        assert_non_null(s);
        assert_string_equal(s->name, required[i]);
    }
    assert_null(sim_scenario_find("no-such-scenario"));
    assert_null(sim_scenario_find(""));
}

static void test_table_well_formed(void **state)
{
    size_t n;
    const struct sim_scenario *s = sim_scenarios(&n);

    assert_true(n >= 7);
    for (size_t i = 0; i < n; i++) {
        assert_non_null(s[i].description);
        assert_true(strlen(s[i].description) > 10);
        assert_null(strchr(s[i].description, '\n'));
        assert_ptr_equal(sim_scenario_find(s[i].name), &s[i]); /* names are unique */
        for (size_t j = 0; j < s[i].n_actions; j++) {
            assert_in_range(s[i].timeline[j].kind, 0, _SIM_ACT_MAX - 1);
            if (j > 0)
                assert_true(s[i].timeline[j - 1].at_ms <= s[i].timeline[j].at_ms);
        }
    }
}

static void test_pump_failure_early(void **state)
{
    const struct sim_scenario *s = sim_scenario_find("pump-failure");
    const struct sim_action *a = find_action(s, SIM_ACT_PUMP_FAIL, 0);

    assert_non_null(a);
    assert_true(a->at_ms < 10000);
    assert_int_equal(a->arg, SIM_ARG_LAST_PUMP);
    assert_null(find_action(s, SIM_ACT_PUMP_RECOVER, 0));
}

static void test_unplug_twice(void **state)
{
    const struct sim_scenario *s = sim_scenario_find("unplug");

    for (unsigned i = 0; i < 2; i++) {
        const struct sim_action *out = find_action(s, SIM_ACT_UNPLUG, i);
        const struct sim_action *in = find_action(s, SIM_ACT_REPLUG, i);
        assert_non_null(out);
        assert_non_null(in);
        /* Gone for a few seconds, like a USB re-enumeration. */
        assert_in_range(in->at_ms - out->at_ms, 1000, 10000);
    }
    assert_null(find_action(s, SIM_ACT_REBOOT, 0));
}

static void test_sensor_failure_two_sensors(void **state)
{
    const struct sim_scenario *s = sim_scenario_find("sensor-failure");
    const struct sim_action *a = find_action(s, SIM_ACT_SENSOR_FAULT, 0);
    const struct sim_action *b = find_action(s, SIM_ACT_SENSOR_FAULT, 1);

    assert_non_null(a);
    assert_non_null(b);
    assert_int_not_equal(a->arg, b->arg);
    assert_true(b->at_ms > a->at_ms);
    assert_null(find_action(s, SIM_ACT_SENSOR_FAULT, 2)); /* one sensor keeps working */
}

static void test_garbage_whole_run(void **state)
{
    const struct sim_action *a = find_action(sim_scenario_find("garbage"), SIM_ACT_GARBAGE, 0);
    assert_non_null(a);
    assert_int_equal(a->at_ms, 0);
    assert_true(a->arg > 0);
}

static void test_reboot_silence(void **state)
{
    const struct sim_action *a =
        find_action(sim_scenario_find("controller-reboot"), SIM_ACT_REBOOT, 0);
    assert_non_null(a);
    assert_in_range(a->arg, 1000, 10000);
}

static void test_timeline_cursor(void **state)
{
    const struct sim_scenario *s = sim_scenario_find("unplug");
    struct sim_timeline t;
    const struct sim_action *a;

    sim_timeline_start(&t, s);
    assert_null(sim_timeline_next(&t, 0));
    assert_null(sim_timeline_next(&t, s->timeline[0].at_ms - 1));
    a = sim_timeline_next(&t, s->timeline[0].at_ms);
    assert_ptr_equal(a, &s->timeline[0]);
    assert_null(sim_timeline_next(&t, s->timeline[0].at_ms));
    /* A late tick gets every action that fell due, in order, one per call. */
    for (size_t i = 1; i < s->n_actions; i++)
        assert_ptr_equal(sim_timeline_next(&t, UINT64_MAX / 2), &s->timeline[i]);
    assert_null(sim_timeline_next(&t, UINT64_MAX / 2));
}

static void test_empty_timeline(void **state)
{
    struct sim_timeline t;

    sim_timeline_start(&t, sim_scenario_find("normal"));
    assert_null(sim_timeline_next(&t, 1000000));
}

static void test_action_names(void **state)
{
    assert_string_equal(sim_action_name(SIM_ACT_UNPLUG), "unplug");
    assert_string_equal(sim_action_name(SIM_ACT_PUMP_FAIL), "pump-fail");
    assert_string_equal(sim_action_name(_SIM_ACT_MAX), "unknown");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_required_scenarios_exist),
        cmocka_unit_test(test_table_well_formed),
        cmocka_unit_test(test_pump_failure_early),
        cmocka_unit_test(test_unplug_twice),
        cmocka_unit_test(test_sensor_failure_two_sensors),
        cmocka_unit_test(test_garbage_whole_run),
        cmocka_unit_test(test_reboot_silence),
        cmocka_unit_test(test_timeline_cursor),
        cmocka_unit_test(test_empty_timeline),
        cmocka_unit_test(test_action_names),
    };
    return test_run_cases(tests);
}
