/* coold's configuration file ([controller], [metrics], [control], [shutdown]). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "lib/errmsg.h"

struct coold_config {
    char *device;
    unsigned baud;
    double poll_interval_s;
    double stale_after_s;
    double dead_after_s;

    char *metrics_listen;

    char *control_socket;
    char *admin_group; /* NULL: root only */
    char *audit_log;

    char *shutdown_command;
    char *hooks_dir;
    char *docker_socket; /* empty: no Docker Engine on this host */
    char *gpuqd_socket;  /* empty: no GPU job queue (gpuqd) on this host */
    double container_grace_s;
    double halt_within_s;
    double halt_reserve_s;
    bool drill;
};

/* Loads and checks a config file; unknown keys and malformed values are errors naming the file,
 * line, section and key. On success *ret is filled and must be released with
 * coold_config_done(). */
int coold_config_load(const char *path, struct coold_config *ret, struct errmsg *e);

void coold_config_done(struct coold_config *c);
