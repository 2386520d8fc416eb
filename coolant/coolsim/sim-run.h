/* One simulator run: the event loop that ties the model, the controller, the line and the
 * scenario's timeline to the real clock. Program code: it logs at info level. */
#pragma once

#include "lib/errmsg.h"
#include "sim-model.h"
#include "sim-report.h"
#include "sim-scenario.h"

struct sim_run_config {
    const struct sim_scenario *scenario;
    const char *link;   /* the path the daemon opens */
    const char *eeprom; /* settings file, or NULL to keep settings in memory */
    double speed;       /* thermal time per real second (sim-model.h) */
    double duration_s;  /* 0: until SIGTERM/SIGINT or the power cut */
    struct sim_model_params model;
};

/* Runs the scenario until its end and fills *ret. Returns 0 when the run ended normally (its
 * outcome is in the report) or -errno with e filled when it could not start or continue. */
int sim_run(const struct sim_run_config *cfg, struct sim_report *ret, struct errmsg *e);
