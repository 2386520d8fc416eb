/* A consistent copy of everything the daemon reports, taken under the daemon's lock, so that
 * /metrics and the control API render without holding it. Plain data. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "safety.h"
#include "telemetry.h"

#define VIEW_NAME_MAX 48

struct coold_view {
    /* The serial link. */
    const char *link_state; /* "up", "handshake" or "closed" (static strings) */
    bool controller_up;     /* link up and the controller not lost */
    bool stale;
    double last_frame_age_s;    /* < 0 when no frame was ever seen */
    double last_success_unix_s; /* wall-clock time of the last STATUS reply; 0 if none */
    unsigned long frames_rejected;
    unsigned long reconnects;

    /* From HELLO. */
    bool has_info;
    char fw[VIEW_NAME_MAX], model[VIEW_NAME_MAX], serial[VIEW_NAME_MAX];
    unsigned n_pumps, n_sensors;
    char sensors[COOL_SENSORS_MAX][VIEW_NAME_MAX];

    /* From STATUS and ALARM. has_status false: no STATUS yet. */
    struct cool_telemetry tel;
    double cut_in_s; /* seconds left now; < 0 when no cut is scheduled */

    /* The daemon. */
    enum safety_state safety;
    double safety_since_unix_s;
    int shutdown_stage; /* 0 idle .. 6 done */
    const char *shutdown_stage_name;
    bool drill;
};
