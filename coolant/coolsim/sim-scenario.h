/* Named scenarios: each is a table entry with a description and a timeline of actions at fixed
 * real-time offsets from the start of the run. Adding a scenario means adding rows, not code. */
#pragma once

#include <stddef.h>
#include <stdint.h>

enum sim_action_kind {
    SIM_ACT_PUMP_FAIL,      /* arg: pump from 1; SIM_ARG_LAST_PUMP for the last one */
    SIM_ACT_PUMP_RECOVER,   /* arg: as for PUMP_FAIL */
    SIM_ACT_FLOW_RESTRICT,  /* arg: primary flow factor in % (100 = clean filter) */
    SIM_ACT_SENSOR_FAULT,   /* arg: sensor from 1 */
    SIM_ACT_SENSOR_RECOVER, /* arg: sensor from 1 */
    SIM_ACT_AMBIENT,        /* arg: ambient air temperature the dry cooler drifts to, C */
    SIM_ACT_UNPLUG,         /* the USB device disappears: pty closed, link removed */
    SIM_ACT_REPLUG,         /* it comes back as a new tty behind the same link */
    SIM_ACT_REBOOT,         /* arg: ms of silence before BOOT reason=watchdog */
    SIM_ACT_GARBAGE,        /* arg: mean ms between noise bursts sent to the host; 0 = off */
    SIM_ACT_RX_CORRUPT,     /* arg: corrupt one in arg frames from the host; 0 = off */
    SIM_ACT_EEPROM_SLOW,    /* arg: ms each EEPROM write keeps SET busy */
    _SIM_ACT_MAX,
};

#define SIM_ARG_LAST_PUMP 0

struct sim_action {
    unsigned at_ms; /* real milliseconds from the start of the run */
    enum sim_action_kind kind;
    int arg;
};

struct sim_scenario {
    const char *name;
    const char *description;           /* one line */
    const struct sim_action *timeline; /* sorted by at_ms */
    size_t n_actions;
};

/* Returns the scenario table and its length through ret_n. */
const struct sim_scenario *sim_scenarios(size_t *ret_n);

/* Returns the scenario called name, or NULL. */
const struct sim_scenario *sim_scenario_find(const char *name);

/* Name of an action kind, for logs: "pump-fail", "unplug", ... */
const char *sim_action_name(enum sim_action_kind kind);

/* Walks a scenario's timeline as time passes. */
struct sim_timeline {
    const struct sim_scenario *scenario;
    size_t next;
};

void sim_timeline_start(struct sim_timeline *t, const struct sim_scenario *scenario);

/* Returns the next action due at elapsed_ms (at_ms <= elapsed_ms) and steps past it, or NULL
 * when none is due yet. Call it in a loop: several actions may fall due in one tick. */
const struct sim_action *sim_timeline_next(struct sim_timeline *t, uint64_t elapsed_ms);
