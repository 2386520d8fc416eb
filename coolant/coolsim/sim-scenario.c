/* The scenario table. Times are real seconds from the start, because what the daemon must react
 * to (a pump that stops, a line that goes away) happens on the wall clock; --speed only makes
 * the tank heat and cool faster. */
#include "sim-scenario.h"

#include <string.h>

#include "lib/macro.h"

#define S(sec) ((unsigned)((sec)*1000))

static const struct sim_action normal[] = {};

static const struct sim_action pump_failure[] = {
    {S(5), SIM_ACT_PUMP_FAIL, SIM_ARG_LAST_PUMP},
};

static const struct sim_action pump_glitch[] = {
    {S(5), SIM_ACT_PUMP_FAIL, SIM_ARG_LAST_PUMP},
    {S(15), SIM_ACT_PUMP_RECOVER, SIM_ARG_LAST_PUMP},
};

static const struct sim_action flow_loss[] = {
    {S(5), SIM_ACT_FLOW_RESTRICT, 12},
};

static const struct sim_action sensor_failure[] = {
    {S(5), SIM_ACT_SENSOR_FAULT, 3},
    {S(20), SIM_ACT_SENSOR_FAULT, 1},
};

static const struct sim_action sensors_lost[] = {
    {S(5), SIM_ACT_SENSOR_FAULT, 3},
    {S(10), SIM_ACT_SENSOR_FAULT, 1},
    {S(15), SIM_ACT_SENSOR_FAULT, 2},
};

static const struct sim_action overheat[] = {
    {S(5), SIM_ACT_AMBIENT, 46},
};

static const struct sim_action unplug[] = {
    {S(10), SIM_ACT_UNPLUG, 0},
    {S(14), SIM_ACT_REPLUG, 0},
    {S(30), SIM_ACT_UNPLUG, 0},
    {S(34), SIM_ACT_REPLUG, 0},
};

static const struct sim_action hot_unplug[] = {
    {S(5), SIM_ACT_PUMP_FAIL, SIM_ARG_LAST_PUMP},
    {S(12), SIM_ACT_UNPLUG, 0},
};

static const struct sim_action garbage[] = {
    {0, SIM_ACT_GARBAGE, 150},
    {0, SIM_ACT_RX_CORRUPT, 40},
};

static const struct sim_action controller_reboot[] = {
    {S(10), SIM_ACT_REBOOT, 3000},
};

static const struct sim_action eeprom_slow[] = {
    {0, SIM_ACT_EEPROM_SLOW, 2000},
};

#define SCENARIO(n, d, t)                                                                          \
    {                                                                                              \
        n, d, t, ELEMENTSOF(t)                                                                     \
    }

static const struct sim_scenario scenarios[] = {
    SCENARIO("normal", "steady state: 4 GPUs at full load, both pumps healthy", normal),
    SCENARIO("pump-failure",
             "the last pump stops at 5 s: precritical pump_stopped, power cut 30 s later "
             "unless HALT defers it",
             pump_failure),
    SCENARIO("pump-glitch",
             "the last pump stops at 5 s and restarts at 15 s: the scheduled cut is cancelled",
             pump_glitch),
    SCENARIO("flow-loss",
             "a clogged filter at 5 s: flow falls below limit.flow_min while the pumps run",
             flow_loss),
    SCENARIO("sensor-failure", "sensor 3 (tank) reads fault at 5 s, sensor 1 (inlet) at 20 s",
             sensor_failure),
    SCENARIO("sensors-lost",
             "sensors 3, 1 and 2 fault at 5, 10 and 15 s: warning, then precritical "
             "sensors_lost",
             sensors_lost),
    SCENARIO("overheat",
             "ambient air rises to 46 C from 5 s (model time): a slow climb through warning "
             "to precritical temp_high",
             overheat),
    SCENARIO("unplug",
             "the USB line goes away at 10 s and 30 s and comes back 4 s later as a new tty; "
             "the controller keeps running",
             unplug),
    SCENARIO("hot-unplug",
             "the last pump stops at 5 s and the line dies for good at 12 s: controller lost "
             "while hot",
             hot_unplug),
    SCENARIO("garbage",
             "noise, bad CRCs, truncated and over-long frames between valid traffic all run; "
             "1 in 40 host frames corrupted",
             garbage),
    SCENARIO("controller-reboot",
             "the controller's watchdog fires at 10 s: 3 s silent, then BOOT reason=watchdog "
             "with settings from EEPROM",
             controller_reboot),
    SCENARIO("eeprom-slow", "each EEPROM write keeps SET busy for 2 s (ERR code=busy)",
             eeprom_slow),
};

const struct sim_scenario *sim_scenarios(size_t *ret_n)
{
    *ret_n = ELEMENTSOF(scenarios);
    return scenarios;
}

const struct sim_scenario *sim_scenario_find(const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(scenarios); i++)
        if (strcmp(scenarios[i].name, name) == 0)
            return &scenarios[i];
    return NULL;
}

const char *sim_action_name(enum sim_action_kind kind)
{
    static const char *const names[_SIM_ACT_MAX] = {
        [SIM_ACT_PUMP_FAIL] = "pump-fail",
        [SIM_ACT_PUMP_RECOVER] = "pump-recover",
        [SIM_ACT_FLOW_RESTRICT] = "flow-restrict",
        [SIM_ACT_SENSOR_FAULT] = "sensor-fault",
        [SIM_ACT_SENSOR_RECOVER] = "sensor-recover",
        [SIM_ACT_AMBIENT] = "ambient",
        [SIM_ACT_UNPLUG] = "unplug",
        [SIM_ACT_REPLUG] = "replug",
        [SIM_ACT_REBOOT] = "reboot",
        [SIM_ACT_GARBAGE] = "garbage",
        [SIM_ACT_RX_CORRUPT] = "rx-corrupt",
        [SIM_ACT_EEPROM_SLOW] = "eeprom-slow",
    };
    return (unsigned)kind < _SIM_ACT_MAX ? names[kind] : "unknown";
}

void sim_timeline_start(struct sim_timeline *t, const struct sim_scenario *scenario)
{
    t->scenario = scenario;
    t->next = 0;
}

const struct sim_action *sim_timeline_next(struct sim_timeline *t, uint64_t elapsed_ms)
{
    if (!t->scenario || t->next >= t->scenario->n_actions)
        return NULL;
    const struct sim_action *a = &t->scenario->timeline[t->next];
    if (a->at_ms > elapsed_ms)
        return NULL;
    t->next++;
    return a;
}
