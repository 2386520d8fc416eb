/* The command table: one file per command (cmd-*.c), dispatched by coolctl.c. */
#pragma once

#include "coolctl.h"

/* A command gets argv with argv[0] = its own name and returns an exit code (COOLCTL_EXIT_*) or a
 * negative error with the reason in e, which coolctl_run() prints once. */
typedef int (*coolctl_command_fn)(struct coolctl *c, int argc, char *argv[], struct errmsg *e);

struct coolctl_command {
    const char *name;
    coolctl_command_fn run;
    const char *summary; /* one line for `coolctl --help` */
    const char *help;    /* the whole text for `coolctl NAME --help` */
};

int cmd_status(struct coolctl *c, int argc, char *argv[], struct errmsg *e);
int cmd_get(struct coolctl *c, int argc, char *argv[], struct errmsg *e);
int cmd_set(struct coolctl *c, int argc, char *argv[], struct errmsg *e);
int cmd_curve(struct coolctl *c, int argc, char *argv[], struct errmsg *e);
int cmd_limits(struct coolctl *c, int argc, char *argv[], struct errmsg *e);
int cmd_events(struct coolctl *c, int argc, char *argv[], struct errmsg *e);
int cmd_drill(struct coolctl *c, int argc, char *argv[], struct errmsg *e);
