/* gpuqd's life cycle, for its main(): set up, run until SIGTERM, free. */
#pragma once

#include "lib/errmsg.h"

struct gpuqd;

struct gpuqd_options {
    const char *config_path;     /* NULL: no file, the defaults */
    const char *nvml_library;    /* NULL: libnvidia-ml.so.1 through the loader */
    const char *run_program;     /* gpuq-run */
    const char *capsule_program; /* capsule, unless the config names one */
};

/* Loads the config and the state of an earlier run, the GPUs, the cgroup for jobs. Nothing is
 * served yet. Returns 0 and *ret, or -errno with a message. */
int gpuqd_new(const struct gpuqd_options *o, struct gpuqd **ret, struct errmsg *e);

/* Serves the API and /metrics and schedules until SIGTERM or SIGINT. Running jobs keep running
 * when it returns (gpuqd's next start finds them). Returns 0 or -errno (logged). */
int gpuqd_run(struct gpuqd *d);

void gpuqd_free(struct gpuqd *d);
