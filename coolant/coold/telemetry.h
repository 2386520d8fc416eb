/* What coold knows about the cooling controller's state: protection level, temperatures, pumps,
 * flow. Filled by the link (link.h) from STATUS replies and ALARM events, read by the safety
 * state machine (safety.h), the metrics and the control API. Plain data, no allocation. */
#pragma once

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ctl-proto.h"

#define COOL_SENSORS_MAX     CTL_SENSORS_MAX
#define COOL_PUMPS_MAX       CTL_PUMPS_MAX
#define COOL_REASON_TEXT_MAX 32

/* The controller's protection level (docs/protocol.md §7), ordered by severity so that levels can
 * be compared with < and >=. */
enum cool_level {
    COOL_LEVEL_NORMAL,
    COOL_LEVEL_WARNING,
    COOL_LEVEL_PRECRITICAL,
    COOL_LEVEL_CRITICAL,
    _COOL_LEVEL_MAX,
};

/* Why the level is raised. COOL_REASON_UNKNOWN is a reason a newer firmware sent that this
 * daemon does not know; the raw text is kept in cool_telemetry.reason_text. */
enum cool_reason {
    COOL_REASON_NONE,
    COOL_REASON_TEMP_HIGH,
    COOL_REASON_PUMP_STOPPED,
    COOL_REASON_FLOW_LOW,
    COOL_REASON_SENSOR_FAULT,
    COOL_REASON_SENSORS_LOST,
    COOL_REASON_UNKNOWN,
    _COOL_REASON_MAX,
};

struct cool_temperature {
    long celsius_centi; /* °C * 100; meaningless when fault */
    bool fault;         /* the controller reported "fault", or the field was missing */
};

struct cool_pump {
    long rpm;
    int duty; /* commanded duty, whole percent */
};

struct cool_telemetry {
    /* Set once a complete STATUS reply has been parsed. Before that only the level fields below
     * may be valid (an ALARM can arrive before the first STATUS). */
    bool has_status;
    uint64_t taken_at; /* monotonic usec at which the last STATUS reply arrived */

    /* Updated by STATUS replies and, at once, by ALARM events. */
    enum cool_level level;
    enum cool_reason reason;
    char reason_text[COOL_REASON_TEXT_MAX]; /* as sent: "pump_stopped" */
    bool has_cut_in;                        /* false: no power cut scheduled ("cut_in=-") */
    unsigned cut_in_s;                      /* seconds from level_at to the power cut */
    uint64_t level_at;                      /* monotonic usec at which level/cut_in were taken */

    bool halt;    /* the controller recorded our HALT */
    bool host_ok; /* false: the controller counts this host as lost */
    bool has_flow;
    long flow_centi; /* L/min * 100 */
    unsigned long uptime_s;

    unsigned n_temps; /* the sensor count from HELLO; names are in link_info */
    struct cool_temperature temps[COOL_SENSORS_MAX];
    unsigned n_pumps;
    struct cool_pump pumps[COOL_PUMPS_MAX];
};

/* Returns the protocol name of a level ("normal", "warning", "precritical", "critical"), or NULL
 * for a value out of range. */
static inline const char *cool_level_to_string(enum cool_level l)
{
    static const char *const names[_COOL_LEVEL_MAX] = {
        [COOL_LEVEL_NORMAL] = "normal",
        [COOL_LEVEL_WARNING] = "warning",
        [COOL_LEVEL_PRECRITICAL] = "precritical",
        [COOL_LEVEL_CRITICAL] = "critical",
    };
    return (unsigned)l < _COOL_LEVEL_MAX ? names[l] : NULL;
}

/* Parses a level name. Returns the level (>= 0) or -EINVAL for anything else. */
static inline int cool_level_from_string(const char *s)
{
    for (int l = 0; l < _COOL_LEVEL_MAX; l++)
        if (s && strcmp(s, cool_level_to_string((enum cool_level)l)) == 0)
            return l;
    return -EINVAL;
}

/* Returns the protocol name of a reason ("none", "temp_high", ...; "unknown" for
 * COOL_REASON_UNKNOWN), or NULL for a value out of range. */
static inline const char *cool_reason_to_string(enum cool_reason r)
{
    static const char *const names[_COOL_REASON_MAX] = {
        [COOL_REASON_NONE] = "none",
        [COOL_REASON_TEMP_HIGH] = "temp_high",
        [COOL_REASON_PUMP_STOPPED] = "pump_stopped",
        [COOL_REASON_FLOW_LOW] = "flow_low",
        [COOL_REASON_SENSOR_FAULT] = "sensor_fault",
        [COOL_REASON_SENSORS_LOST] = "sensors_lost",
        [COOL_REASON_UNKNOWN] = "unknown",
    };
    return (unsigned)r < _COOL_REASON_MAX ? names[r] : NULL;
}

/* Maps a reason name to its value; names this daemon does not know map to COOL_REASON_UNKNOWN
 * (a newer firmware may add reasons, and the level still says how serious it is). */
static inline enum cool_reason cool_reason_from_string(const char *s)
{
    for (int r = 0; r < COOL_REASON_UNKNOWN; r++)
        if (s && strcmp(s, cool_reason_to_string((enum cool_reason)r)) == 0)
            return (enum cool_reason)r;
    return COOL_REASON_UNKNOWN;
}
