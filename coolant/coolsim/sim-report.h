/* How a run ended: printed for a person at the end and written as JSON for tests. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "lib/errmsg.h"
#include "sim-controller.h"

/* Exit statuses of coolsim. */
enum {
    SIM_EXIT_OK = 0,       /* no power cut, or a cut the host had asked for with HALT */
    SIM_EXIT_ERROR = 1,    /* usage or internal error */
    SIM_EXIT_HARD_CUT = 2, /* power was cut under a host that never said HALT */
};

struct sim_report {
    const char *scenario;
    const char *end; /* "duration", "signal", "power_cut" or "error" */
    double duration_s;
    bool power_cut;
    double cut_at_s; /* from the start of the run; meaningful when power_cut */
    bool orderly;    /* the host had sent HALT before the cut */
    bool halt;
    double halt_at_s;
    bool have_max_temp;
    double max_temp_c;
    const char *max_level;
    unsigned long frames;
    unsigned long rejected;
    unsigned long requests[_SIM_VERB_MAX];
    unsigned long errors;
    unsigned long alarms;
    unsigned boots;
    unsigned host_lost;
    unsigned long bytes_dropped;
};

/* Fills a report from the controller's statistics. start_ms and end_ms are the run's bounds on
 * the same clock the controller was driven with; scenario and end must outlive the report. */
void sim_report_fill(struct sim_report *r, const struct sim_ctl *c, const char *scenario,
                     const char *end, uint64_t start_ms, uint64_t end_ms);

/* The exit status the run earns: SIM_EXIT_HARD_CUT for a cut without HALT, else SIM_EXIT_OK. */
int sim_report_exit_status(const struct sim_report *r);

/* Prints a few lines for a person. */
void sim_report_print(const struct sim_report *r, FILE *f);

/* Writes the report as one JSON object to path (replacing it atomically). Returns 0 or -errno
 * with e filled. */
int sim_report_write_json(const struct sim_report *r, const char *path, struct errmsg *e);
