/* The line `capsule hold` writes once a step's container is held (cmd-hold.c says what is in
 * it), as the plugin reads it: outside input to slurmstepd, so parsed with care (fuzz-held). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "lib/errmsg.h"

#define HELD_LINE_MAX (1 << 20)

struct held {
    pid_t pid;
    char **argv; /* the image's entrypoint and command under the step's flags */
    char **env;  /* "K=V" */
    char *cwd;
    char *image; /* the canonical name of the image it runs */
    bool remap_root, joined;
};

/* Parses one line (JSON, without or with its newline). 0, or -EBADMSG with a message saying
 * what is wrong ("no pid", "env entry 3 is not K=V"), or -ENOMEM. */
int held_parse(const char *text, size_t len, struct held *ret, struct errmsg *e);
void held_done(struct held *h);
