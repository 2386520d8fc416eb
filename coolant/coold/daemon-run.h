/* Creating, running and freeing the daemon (for coold.c). */
#pragma once

#include "coold-config.h"
#include "daemon.h"
#include "lib/errmsg.h"

/* Sets everything up from a loaded config, whose strings the daemon takes over (on failure too):
 * link, safety, shutdown, audit log, control and metrics servers. Returns 0 or -errno with e. */
int daemon_new(const struct coold_config *cfg, struct daemon **ret, struct errmsg *e);

/* Runs the main loop until SIGTERM or SIGINT. Returns 0 or -errno. */
int daemon_run(struct daemon *d);

/* Stops everything and frees. NULL is allowed. */
void daemon_free(struct daemon *d);
