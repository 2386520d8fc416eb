/* coold's staged shutdown: turns a controller's pre-critical alarm into an orderly stop before
 * the controller cuts host power.
 *
 * A run opens with a log line and an event ("shutdown started (reason), power cut in N s"), then
 * runs its stages in order, each bounded by a share of the time left until the power cut minus a
 * reserve for the OS halt itself:
 *   1 jobs        drain the GPU job queue (gpuq-client.h): gpuqd sends every running job its
 *                 checkpoint signal with a grace of min(the job's grace, what the budget allows),
 *                 SIGKILLs after it, requeues the jobs and starts nothing more; skipped (ok) when
 *                 gpuqd is not configured or not running
 *   2 announce    hook scripts (hooks.h), killed at the stage budget
 *   3 containers  list the running containers and stop them all at once (docker.h), with a grace
 *                 of min(container_grace, what the budget allows)
 *   4 wait        confirm every container stopped
 *   5 halt        tell the controller the host is halting (the daemon's send_halt callback)
 *   6 command     run the shutdown command with /bin/sh -c, exactly once, even if earlier stages
 *                 failed
 * A failing stage is reported and logged; the next one runs anyway.
 *
 * A real shutdown runs at most once per object (latch). A drill runs every stage without stopping
 * anything: gpuqd is only asked how many jobs run, hooks get the event "drill", containers are
 * only listed, no HALT is sent and the command is not run; it does not latch, and a real shutdown
 * that starts meanwhile cancels it.
 * Runs happen on a thread of their own, so the daemon's main loop keeps talking to the
 * controller. Every function here is thread-safe. Times are CLOCK_MONOTONIC microseconds
 * (clock_now_usec()). */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/log.h"

/* Numbers as in the coold_shutdown_stage metric. */
enum shutdown_stage {
    SHUTDOWN_STAGE_IDLE = 0,
    SHUTDOWN_STAGE_JOBS = 1,
    SHUTDOWN_STAGE_ANNOUNCE = 2,
    SHUTDOWN_STAGE_CONTAINERS = 3,
    SHUTDOWN_STAGE_WAIT = 4,
    SHUTDOWN_STAGE_HALT = 5,
    SHUTDOWN_STAGE_COMMAND = 6,
    SHUTDOWN_STAGE_DONE = 7,
};

#define SHUTDOWN_N_STEPS 6 /* jobs .. command */

/* "idle", "jobs", "announce", "containers", "wait", "halt", "command", "done"; NULL if out of
 * range. */
const char *shutdown_stage_to_string(enum shutdown_stage s);

/* Asks the controller to note that the host halts within within_s seconds (protocol HALT). Called
 * on the shutdown thread; blocks until the controller answered or a short timeout. Returns >= 0 or
 * -errno (e.g. -ETIMEDOUT, -ENOTCONN). */
typedef int (*shutdown_halt_fn)(unsigned within_s, void *userdata);

/* The daemon's logger: messages about the shutdown and the lines hooks print. */
typedef void (*shutdown_log_fn)(enum log_level level, const char *message, void *userdata);

/* One line for the daemon's event list (source "daemon", type "shutdown"). fields is borrowed:
 * take a reference to keep it. */
typedef void (*shutdown_event_fn)(const char *message, json_t *fields, void *userdata);

struct shutdown_config {
    const char *command;       /* run with /bin/sh -c; NULL or "": the command stage fails */
    const char *hooks_dir;     /* NULL or "": no hooks */
    const char *docker_socket; /* NULL or "": no Docker Engine on this host */
    const char *gpuqd_socket;  /* NULL or "": no GPU job queue on this host */
    double container_grace_s;
    double halt_within_s;  /* what HALT tells the controller */
    double halt_reserve_s; /* time kept free before the power cut for the OS to halt */
    bool drill;            /* every start is a drill */
    shutdown_halt_fn send_halt;
    shutdown_log_fn log;     /* NULL: log_debug() */
    shutdown_event_fn event; /* NULL: no events */
    void *userdata;          /* passed to the three callbacks */
};

/* How one stage went, for the API and the event list. */
struct shutdown_step {
    enum shutdown_stage stage;
    bool ok;
    double seconds;
    char detail[256];
};

/* A snapshot of the current state. */
struct shutdown_state {
    enum shutdown_stage stage; /* of the run shown: a real one once started, else a running
                                  drill, else IDLE (a finished drill goes back to IDLE) */
    bool drill;                /* the run shown is a drill */
    bool latched;              /* a real shutdown has started */
    char reason[64];
};

struct shutdown;

/* Copies the configuration (strings included). Returns 0 and *ret, or -ENOMEM. */
int shutdown_new(const struct shutdown_config *c, struct shutdown **ret);

/* Cancels a running drill, makes a running real shutdown skip to its halt and command stages, and
 * waits for the run threads to end (bounded by their deadlines; Docker calls already in flight
 * finish or time out first). NULL is allowed. */
void shutdown_free(struct shutdown *s);

/* Makes a running drill skip its remaining stages, so that whoever waits for it (POST /v1/drill)
 * returns soon. A real run is not affected. */
void shutdown_cancel_drill(struct shutdown *s);

/* Starts a run on its own thread. reason names why (e.g. "pump_stopped"); deadline_us is the
 * monotonic time the controller will cut power (a time in the past means "now": the stages that
 * need time are skipped, HALT and the command still happen). drill (or config drill) makes it a
 * drill. Returns 0 when started; -EALREADY when a real shutdown has already started (the latch;
 * for drills too); -EBUSY for a drill while another drill runs; -errno if the thread could not be
 * created. */
int shutdown_start(struct shutdown *s, const char *reason, uint64_t deadline_us, bool drill);

/* The stage of the run shown (see struct shutdown_state), for metrics. */
enum shutdown_stage shutdown_get_stage(struct shutdown *s);

void shutdown_get_state(struct shutdown *s, struct shutdown_state *ret);

/* Waits until the latest run of the given kind has finished, at most timeout_us (0: no limit).
 * Returns 0, -ETIMEDOUT, or -ENOENT when no such run was ever started. */
int shutdown_wait(struct shutdown *s, bool drill, uint64_t timeout_us);

/* Copies the steps the latest run of the given kind has finished so far (at most max, in stage
 * order) into ret. Returns their number; 0 when no such run was started. */
size_t shutdown_get_steps(struct shutdown *s, bool drill, struct shutdown_step *ret, size_t max);

/* The steps as the API shows them: a new array of {"name", "ok", "seconds", "detail"}, or NULL
 * when out of memory. */
json_t *shutdown_steps_json(struct shutdown *s, bool drill);

/* {"stage": "idle", "stage_number": 0, "drill": false} for GET /v1/status; NULL when out of
 * memory. */
json_t *shutdown_status_json(struct shutdown *s);
