/* What `run`, `create` and `hold` share: their options (cmd-run.c) and the image lookup. */
#pragma once

#include <stdbool.h>

#include "capsule/cli/cli.h"
#include "capsule/containers.h"
#include "capsule/launch.h"
#include "capsule/store/store.h"

struct run_opts {
    struct container c; /* the request: flags, mounts, env; image and layers filled later */
    enum launch_pull_policy pull;
    bool help, detach, rm, tty;
    /* hold only (cmd-hold.c) */
    int hold_fd; /* -1: not given */
    bool create_only, join, join_only;
    char *data_dir; /* NULL: the config's */
    bool run_entrypoint;
    char *entrypoint_output; /* NULL: /dev/null */
};

/* Sets *o up (the config's remap_root, no lists yet; free with run_opts_done whatever the
 * outcome) and parses options up to the image name; returns the index of IMAGE in argv (argc
 * when there is none: only `hold --name` of an existing container may leave it out), 0 after
 * --help, or a CLI exit code (as a negative number) after printing the error. */
int run_parse_options(int argc, char **argv, const struct cli_command *cmd, struct cli_ctx *ctx,
                      struct run_opts *o);

/* Frees what the options hold. */
void run_opts_done(struct run_opts *o);

/* launch_resolve_image's pull: capsule-pull, which prints its own errors; userdata is the
 * struct cli_ctx. */
int run_pull_with_helper(void *userdata, const char *name, const char *file);

/* Fills the container's image fields from the record; 0 or -ENOMEM. */
int run_take_image(struct container *c, const struct image_record *img);
