/* coold's safety state machine: turns what the controller reports (and its silence) into one
 * decision, "start the orderly shutdown now, the power will be cut at <deadline>".
 *
 * Pure logic: no threads, no I/O, no clock of its own. The caller feeds reports with the
 * monotonic time (usec) they arrived at and calls safety_step() with the current monotonic time,
 * so tests run on a fake clock. Typical wiring:
 *
 *     link on_telemetry  -> safety_report_telemetry()  (STATUS replies and ALARM events)
 *     link state change  -> safety_link_changed()
 *     poll loop          -> safety_frame_seen(s, link_get_counters(l)->last_frame_at) (any valid
 *                           frame, HB and PING replies included, keeps the controller alive),
 *                           then safety_step(); if (d.start_shutdown) start the stages with
 *                           d.deadline; poll timeout: safety_next_step()
 *
 * Rules (defaults in safety_config_defaults()):
 * - critical: shutdown at once, deadline "now" (the controller is cutting power).
 * - precritical: confirmed by confirm_reports reports at least confirm_spacing apart, or
 *   confirm_usec after the first report, whichever comes first; a report below precritical before
 *   that cancels it (a blip). The wait never exceeds confirm_max_permille of cut_in, and a cut_in
 *   of urgent_cut_in_usec or less acts at once. Deadline: received_at + cut_in.
 * - hysteresis: a raised level is shown until the controller has reported lower levels for
 *   clear_after_usec (from the first lower report to a later one).
 * - no valid frame for dead_after_usec: if the state was hot (level >= hot_level, hysteresis
 *   included) this is a shutdown, deadline the last known cut time (never before now) or now +
 *   unknown_cut_usec; else COMM_LOST, which is no shutdown. Frames arriving again end COMM_LOST.
 * - stale: no valid frame for stale_after_usec, or the link is closed. A flag, not a state.
 * - SHUTTING_DOWN latches: once decided, the state never changes again. With config.drill the
 *   decision is made just the same, but safety_release() returns to monitoring afterwards. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "telemetry.h"

enum safety_state {
    SAFETY_NORMAL,
    SAFETY_WARNING,
    SAFETY_PRECRITICAL,
    SAFETY_CRITICAL,
    SAFETY_COMM_LOST,
    SAFETY_SHUTTING_DOWN,
    _SAFETY_STATE_MAX,
};

#define SAFETY_REASON_MAX      160
#define SAFETY_TRANSITIONS_MAX 64

struct safety_config {
    uint64_t stale_after_usec;     /* 3 s */
    uint64_t dead_after_usec;      /* 10 s */
    uint64_t confirm_usec;         /* 2 s */
    unsigned confirm_reports;      /* 2; 1 confirms on the first report */
    uint64_t confirm_spacing_usec; /* 500 ms: an ALARM and a STATUS of the same instant are one */
    unsigned confirm_max_permille; /* 100: wait at most 10 % of cut_in */
    uint64_t urgent_cut_in_usec;   /* 10 s: a cut this close is acted on at once */
    uint64_t clear_after_usec;     /* 10 s */
    enum cool_level hot_level;     /* COOL_LEVEL_WARNING */
    uint64_t unknown_cut_usec;     /* 20 s: assumed time to the cut when none is known */
    bool drill;                    /* decisions do not latch (see safety_release()) */
};

/* One level report: a STATUS reply, an ALARM event, or anything else that carries the level. */
struct safety_report {
    enum cool_level level;
    enum cool_reason reason;
    /* false with level >= precritical: the cut time is not in this report, keep the last known
     * one; false below precritical: no cut is scheduled any more. */
    bool has_cut_in;
    uint64_t cut_in_usec;
    uint64_t received_at; /* monotonic usec; reports must be fed in order */
};

/* The result of a step. */
struct safety_decision {
    enum safety_state state;
    bool start_shutdown; /* true at exactly one step per decision: the one that took it */
    bool shutting_down;  /* a decision stands (always, once latched) */
    uint64_t deadline;   /* when shutting_down: monotonic usec of the expected power cut */
    bool stale;          /* the data is older than stale_after, or the link is closed */
    bool lost;           /* no valid frame for dead_after */
    const char *reason;  /* why the current state was entered; valid until the next call */
};

struct safety_transition {
    uint64_t at; /* monotonic usec */
    enum safety_state from, to;
    char reason[SAFETY_REASON_MAX];
};

struct safety;

/* Returns "normal", "warning", "precritical", "critical", "comm-lost", "shutting-down", or NULL
 * for a value out of range. */
const char *safety_state_to_string(enum safety_state s);

/* Fills *c with the defaults listed in struct safety_config. */
void safety_config_defaults(struct safety_config *c);

/* Creates a state machine in SAFETY_NORMAL at monotonic time `now`, which also counts as the last
 * frame time (a controller never heard from is lost dead_after later). The config is copied.
 * Returns 0 and *ret, -EINVAL for an inconsistent config (stale_after > dead_after, zero
 * confirm_reports, hot_level out of range), or -ENOMEM. */
int safety_new(const struct safety_config *c, uint64_t now, struct safety **ret);

/* Frees the state machine; NULL is allowed. */
void safety_free(struct safety *s);

/* Records a level report; also counts as a valid frame at r->received_at. Takes effect at the
 * next safety_step(). */
void safety_report(struct safety *s, const struct safety_report *r);

/* Records the level fields of a telemetry update (level, reason, cut_in, level_at) as a report:
 * what link's on_telemetry callback hands over. */
void safety_report_telemetry(struct safety *s, const struct cool_telemetry *t);

/* Records a valid frame from the controller (any frame: HB events keep it alive). */
void safety_frame_seen(struct safety *s, uint64_t at);

/* Records that the serial link opened (up) or closed. A closed link makes the data stale at once;
 * the controller counts as lost only dead_after after its last frame, so a quick reconnect is no
 * event. */
void safety_link_changed(struct safety *s, bool up, uint64_t now);

/* Evaluates the rules at monotonic time `now` (never before the last report) and writes the
 * result to *ret. State changes are appended to the transition log. */
void safety_step(struct safety *s, uint64_t now, struct safety_decision *ret);

/* Returns the monotonic time at which safety_step() must run next even if no report arrives (a
 * confirmation window ends, data turns stale, the controller turns lost), or UINT64_MAX. */
uint64_t safety_next_step(const struct safety *s, uint64_t now);

/* Ends a drill decision: the state goes back to what the reports say, and the same condition
 * does not start another shutdown until it has gone away (the level dropped below precritical
 * and the controller is heard again). Returns 0, -EPERM when the decision latched (not a drill)
 * or -ENOENT when no decision stands. */
int safety_release(struct safety *s, uint64_t now);

/* Current state (as of the last step) and the monotonic time it was entered. */
enum safety_state safety_get_state(const struct safety *s);
uint64_t safety_get_since(const struct safety *s);

/* Copies up to `max` of the newest transitions, oldest first, to ret[]. Returns how many. */
size_t safety_get_transitions(const struct safety *s, struct safety_transition *ret, size_t max);
