/* The controller's protection logic (docs/protocol.md §7), free of I/O and of any clock:
 * every call takes the current monotonic time in milliseconds, so tests drive it with a fake
 * clock and the simulator with CLOCK_MONOTONIC. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "ctl-proto.h"
#include "sim-model.h"

#define SIM_HYSTERESIS_CENTI 200 /* a temperature level clears 2 C below its threshold */
#define SIM_PUMP_STOPPED_RPM 200 /* a pump with duty > 0 turning slower than this has stopped */
/* Hysteresis the protocol leaves to the firmware: a tachometer or flow meter reading that
 * hovers at its threshold must not make the level, and the cut schedule, flap. */
#define SIM_PUMP_RUNNING_RPM 300 /* a stopped pump counts as running again from here */
#define SIM_FLOW_CLEAR_CENTI 50  /* flow_low clears at limit.flow_min + 0.5 L/min */

enum sim_level {
    SIM_LEVEL_NORMAL,
    SIM_LEVEL_WARNING,
    SIM_LEVEL_PRECRITICAL,
    SIM_LEVEL_CRITICAL,
};

enum sim_reason {
    SIM_REASON_NONE,
    SIM_REASON_TEMP_HIGH,
    SIM_REASON_PUMP_STOPPED,
    SIM_REASON_FLOW_LOW,
    SIM_REASON_SENSOR_FAULT,
    SIM_REASON_SENSORS_LOST,
};

struct sim_protect {
    enum sim_level level;
    enum sim_reason reason;
    unsigned pump;                    /* pump named by the reason, from 1; 0 when none */
    unsigned sensor;                  /* sensor named by the reason, from 1; 0 when none */
    bool have_temp;                   /* at least one sensor works */
    long temp_centi;                  /* hottest working sensor */
    enum sim_level temp_level;        /* the temperature's own level, with hysteresis */
    bool pump_stopped[CTL_PUMPS_MAX]; /* with hysteresis, as above */
    bool flow_low;
    bool cut_scheduled;
    uint64_t cut_at_ms;
    bool halt; /* the host sent HALT */
    bool cut;  /* power has been cut; nothing changes after this */
};

/* Bits returned by sim_protect_update(). */
enum {
    SIM_PROTECT_CHANGED = 1 << 0, /* level, reason or the named pump/sensor changed */
    SIM_PROTECT_CUT = 1 << 1,     /* cut power now (p->cut is set) */
};

/* Starts at level normal with no cut scheduled and no HALT. */
void sim_protect_init(struct sim_protect *p);

/* Derives the level from a reading against the limits, schedules a cut limit.cut_delay seconds
 * after entering precritical, cancels it when the level drops below precritical, and cuts at
 * once at critical or when the scheduled time has come. Once p->cut is set it returns 0 and
 * changes nothing. Returns a mask of SIM_PROTECT_* bits. */
int sim_protect_update(struct sim_protect *p, const struct ctl_limits *l,
                       const struct sim_reading *r, uint64_t now_ms);

/* Records a HALT from the host ("off within `within_s` seconds"). When a cut is scheduled it is
 * moved to now + min(within_s, limit.halt_max). Returns the resulting cut_in (seconds, see
 * sim_protect_cut_in()). */
long sim_protect_halt(struct sim_protect *p, const struct ctl_limits *l, unsigned long within_s,
                      uint64_t now_ms);

/* Seconds until the scheduled cut, rounded up, or -1 when none is scheduled. */
long sim_protect_cut_in(const struct sim_protect *p, uint64_t now_ms);

/* The duty (%) for pump `pump` (from 0): 100 from warning up or without any working sensor, else
 * the pump's curve at the hottest working sensor (§6). */
int sim_protect_duty(const struct sim_protect *p, const struct ctl_settings *s, unsigned pump);

/* The hottest working sensor of a reading. Returns false when every sensor has faulted. */
bool sim_reading_hottest(const struct sim_reading *r, long *ret_centi);

/* Protocol names: "normal", "warning", ...; "none", "temp_high", ... */
const char *sim_level_name(enum sim_level level);
const char *sim_reason_name(enum sim_reason reason);
