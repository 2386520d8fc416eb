/* The exit record of one run: what gpuq-run writes to the spec's exit_path once the job has
 * ended and every process of it is gone, and gpuqd reads (run_exit_read in run-control.h), also
 * after a restart of its own. One JSON object:
 *
 *   {"status": 768, "exited": true, "code": 3, "signal": 0, "started": true,
 *    "start": 1718000000.25, "end": 1718000042.5, "oom_kills": 0, "note": ""}
 *
 * status is the wait(2) status of the job's main process and the one field that counts: exited,
 * code and signal are read from it again (they are there for people). A run that could not be
 * started records status 125, 126 or 127 as exited (supervise.h), started false and why in
 * note. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/errmsg.h"

/* Larger than any record gpuq-run writes; the note is bounded. */
#define RUN_EXIT_RECORD_MAX (64u * 1024)

struct run_exit {
    int status;         /* wait(2) status */
    bool exited;        /* WIFEXITED(status) */
    int code;           /* WEXITSTATUS(status) when exited, else 0 */
    int signal;         /* WTERMSIG(status) when killed by a signal, else 0 */
    bool started;       /* the command was executed (false: the run failed before) */
    double start, end;  /* wall-clock (UNIX) times of the start and of the main process's end */
    uint64_t oom_kills; /* processes of the job the kernel's OOM killer ended in its scope */
    char *note;         /* malloc'd, "" when nothing to say: limits not enforced, why it did not
                           start, processes that would not die */
};

/* Frees the note and zeroes x. */
void run_exit_done(struct run_exit *x);

/* Sets status and what is read from it (exited, code, signal). */
void run_exit_set_status(struct run_exit *x, int status);

/* The record as JSON text (malloc'd, in *ret_text). 0 or -ENOMEM. */
int run_exit_to_json(const struct run_exit *x, char **ret_text);

/* Parses a record of len bytes. Keys it does not know are skipped (a record of a newer gpuq-run
 * still tells status and times); status, start and end are required. 0 and *ret (the caller
 * calls run_exit_done), or -EINVAL with a message, -ENOMEM. */
int run_exit_from_json(const char *text, size_t len, struct run_exit *ret, struct errmsg *e);
