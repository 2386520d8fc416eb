/* The pull's progress display: one line per layer, redrawn in place on a terminal; on anything
 * else (a log file, a pipe) one line per layer when it is finished, so logs stay readable.
 *
 * Thread-safe: download threads report through one struct progress. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "lib/macro.h"

enum progress_state {
    PROGRESS_WAITING,
    PROGRESS_DOWNLOADING,
    PROGRESS_UNPACKING,
    PROGRESS_DONE,   /* fetched and unpacked now */
    PROGRESS_EXISTS, /* was in the cache already */
    PROGRESS_FAILED,
};

struct progress;

/* A display of n items on fd (not owned; a terminal is detected with isatty). Returns 0 and
 * *ret, or -ENOMEM. */
int progress_new(int fd, size_t n, struct progress **ret);
/* Draws the last state once more (a terminal shows every layer's final line) and frees. */
void progress_free(struct progress *p);
DEFINE_POINTER_CLEANUP(struct progress, progress_free)

/* Names item i (copied; shown as given, e.g. the first 12 hex digits of a digest) and sets its
 * total size in bytes. */
void progress_set_label(struct progress *p, size_t i, const char *label, int64_t total);
/* Bytes of item i so far (a redraw happens at most ten times a second). */
void progress_update(struct progress *p, size_t i, int64_t done, int64_t total);
void progress_set_state(struct progress *p, size_t i, enum progress_state state);

/* Formats a byte count as people read sizes ("0 B", "532 B", "12.3 MB", "1.05 GB"; decimal
 * units, as Docker shows them) into buf. Returns buf. */
char *progress_format_bytes(int64_t bytes, char buf[static 16]);
/* The same in powers of 1024 ("64.0 GiB"), for sizes that settings give in those units. */
char *progress_format_binary(int64_t bytes, char buf[static 16]);
