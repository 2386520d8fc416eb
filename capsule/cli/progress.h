/* capsule pull's display: one line per layer, redrawn in place on a terminal; on anything else
 * (a log file, a pipe) one line per layer when it is finished, so logs stay readable. It draws
 * what the pull tells it through its events (registry/pull.h), from the download threads. */
#pragma once

#include "capsule/registry/pull.h"
#include "lib/macro.h"

struct progress;

/* A display on fd (not owned; a terminal is detected with isatty), which learns the layers from
 * the pull's first event. Returns 0 and *ret, or -ENOMEM. */
int progress_new(int fd, struct progress **ret);
/* Draws the last state once more (a terminal shows every layer's final line) and frees. */
void progress_free(struct progress *p);
DEFINE_POINTER_CLEANUP(struct progress, progress_free)

/* The events that draw on p, for pull_opts.events; p must outlive the pull. */
struct pull_events progress_events(struct progress *p);
