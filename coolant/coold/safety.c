/* The safety state machine (safety.h). */
#include "safety.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define USEC_PER_SEC 1000000ULL

/* Hysteresis of one level: raised since a report at or above it, clearing since the first report
 * below it that followed. */
struct level_hold {
    bool raised;
    bool clearing;
    uint64_t below_since;
};

struct safety {
    struct safety_config cfg;
    enum safety_state state;
    uint64_t since;
    char reason[SAFETY_REASON_MAX];

    bool link_up;
    uint64_t last_frame_at;
    bool have_report;
    enum cool_level last_level;
    enum cool_reason last_reason;

    struct level_hold hold[_COOL_LEVEL_MAX]; /* index 0 (normal) unused */

    bool cut_known; /* a power cut is scheduled, at cut_at */
    uint64_t cut_at;

    /* A precritical report waiting for confirmation. */
    bool pending;
    unsigned pending_count;
    uint64_t pending_first;
    uint64_t pending_last; /* the last report that counted */
    uint64_t confirm_at;

    bool decided;
    uint64_t deadline;
    /* False after a drill decision was released, until its condition has gone away; keeps one
     * condition from starting drill after drill. */
    bool armed;
    uint64_t released_at;

    struct safety_transition log[SAFETY_TRANSITIONS_MAX];
    size_t log_start, log_n;
};

static const char *const state_names[_SAFETY_STATE_MAX] = {
    [SAFETY_NORMAL] = "normal",           [SAFETY_WARNING] = "warning",
    [SAFETY_PRECRITICAL] = "precritical", [SAFETY_CRITICAL] = "critical",
    [SAFETY_COMM_LOST] = "comm-lost",     [SAFETY_SHUTTING_DOWN] = "shutting-down",
};

const char *safety_state_to_string(enum safety_state s)
{
    return (unsigned)s < _SAFETY_STATE_MAX ? state_names[s] : NULL;
}

void safety_config_defaults(struct safety_config *c)
{
    *c = (struct safety_config){
        .stale_after_usec = 3 * USEC_PER_SEC,
        .dead_after_usec = 10 * USEC_PER_SEC,
        .confirm_usec = 2 * USEC_PER_SEC,
        .confirm_reports = 2,
        .confirm_spacing_usec = USEC_PER_SEC / 2,
        .confirm_max_permille = 100,
        .urgent_cut_in_usec = 10 * USEC_PER_SEC,
        .clear_after_usec = 10 * USEC_PER_SEC,
        .hot_level = COOL_LEVEL_WARNING,
        .unknown_cut_usec = 20 * USEC_PER_SEC,
        .drill = false,
    };
}

int safety_new(const struct safety_config *c, uint64_t now, struct safety **ret)
{
    if (c->stale_after_usec > c->dead_after_usec || c->dead_after_usec == 0 ||
        c->confirm_reports == 0 || (unsigned)c->hot_level >= _COOL_LEVEL_MAX ||
        c->hot_level == COOL_LEVEL_NORMAL || c->confirm_max_permille > 1000)
        return -EINVAL;

    struct safety *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->cfg = *c;
    s->state = SAFETY_NORMAL;
    s->since = now;
    snprintf(s->reason, sizeof(s->reason), "started");
    s->last_frame_at = now;
    s->last_level = COOL_LEVEL_NORMAL;
    s->armed = true;
    *ret = s;
    return 0;
}

void safety_free(struct safety *s)
{
    free(s);
}

static uint64_t elapsed(uint64_t now, uint64_t then)
{
    return now > then ? now - then : 0;
}

static double seconds(uint64_t usec)
{
    return (double)usec / (double)USEC_PER_SEC;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static const char *reason_name(enum cool_reason r)
{
    const char *n = cool_reason_to_string(r);
    return n ? n : "unknown";
}

/* How long a precritical report may wait for confirmation, given the time left to the cut. */
static uint64_t confirm_window(const struct safety_config *c, const struct safety_report *r)
{
    uint64_t w = c->confirm_usec;
    if (r->has_cut_in) {
        if (r->cut_in_usec <= c->urgent_cut_in_usec)
            return 0;
        w = min_u64(w, r->cut_in_usec / 1000 * c->confirm_max_permille);
    }
    return w;
}

static void update_holds(struct safety *s, const struct safety_report *r)
{
    for (int l = COOL_LEVEL_WARNING; l < _COOL_LEVEL_MAX; l++) {
        struct level_hold *h = &s->hold[l];
        if ((int)r->level >= l) {
            h->raised = true;
            h->clearing = false;
        } else if (h->raised && !h->clearing) {
            h->clearing = true;
            h->below_since = r->received_at;
        } else if (h->raised &&
                   elapsed(r->received_at, h->below_since) >= s->cfg.clear_after_usec) {
            h->raised = false;
            h->clearing = false;
        }
    }
}

static void update_pending(struct safety *s, const struct safety_report *r)
{
    if (r->level != COOL_LEVEL_PRECRITICAL) {
        /* Below: the blip is over. Critical: decided without confirmation. */
        s->pending = false;
        return;
    }
    uint64_t until = r->received_at + confirm_window(&s->cfg, r);
    if (!s->pending) {
        s->pending = true;
        s->pending_count = 1;
        s->pending_first = r->received_at;
        s->pending_last = r->received_at;
        s->confirm_at = until;
        return;
    }
    if (elapsed(r->received_at, s->pending_last) >= s->cfg.confirm_spacing_usec) {
        s->pending_count++;
        s->pending_last = r->received_at;
    }
    /* The cut may have come closer (or been rescheduled sooner): never wait past its fraction. */
    s->confirm_at = min_u64(s->confirm_at, until);
}

void safety_report(struct safety *s, const struct safety_report *r)
{
    safety_frame_seen(s, r->received_at);
    s->have_report = true;
    s->last_level = r->level;
    s->last_reason = r->reason;
    update_holds(s, r);

    if (r->level == COOL_LEVEL_CRITICAL) {
        s->cut_known = true;
        s->cut_at = r->received_at;
    } else if (r->level == COOL_LEVEL_PRECRITICAL) {
        if (r->has_cut_in) {
            s->cut_known = true;
            s->cut_at = r->received_at + r->cut_in_usec;
        }
    } else {
        s->cut_known = false;
    }
    /* A standing decision follows the controller's cut time, which a HALT may have deferred. */
    if (s->decided && r->level >= COOL_LEVEL_PRECRITICAL && s->cut_known)
        s->deadline = s->cut_at;

    update_pending(s, r);
}

void safety_report_telemetry(struct safety *s, const struct cool_telemetry *t)
{
    struct safety_report r = {
        .level = t->level,
        .reason = t->reason,
        .has_cut_in = t->has_cut_in,
        .cut_in_usec = (uint64_t)t->cut_in_s * USEC_PER_SEC,
        .received_at = t->level_at,
    };
    safety_report(s, &r);
}

void safety_frame_seen(struct safety *s, uint64_t at)
{
    if (at > s->last_frame_at)
        s->last_frame_at = at;
}

void safety_link_changed(struct safety *s, bool up, uint64_t now)
{
    s->link_up = up;
}

/* The level the reports call for, with hysteresis. */
static enum cool_level held_level(const struct safety *s)
{
    for (int l = _COOL_LEVEL_MAX - 1; l > COOL_LEVEL_NORMAL; l--)
        if (s->hold[l].raised)
            return (enum cool_level)l;
    return COOL_LEVEL_NORMAL;
}

static void log_transition(struct safety *s, uint64_t now, enum safety_state to)
{
    struct safety_transition *t;
    if (s->log_n < SAFETY_TRANSITIONS_MAX) {
        t = &s->log[(s->log_start + s->log_n) % SAFETY_TRANSITIONS_MAX];
        s->log_n++;
    } else {
        t = &s->log[s->log_start];
        s->log_start = (s->log_start + 1) % SAFETY_TRANSITIONS_MAX;
    }
    t->at = now;
    t->from = s->state;
    t->to = to;
    memcpy(t->reason, s->reason, sizeof(t->reason));
}

static void set_state(struct safety *s, uint64_t now, enum safety_state to, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void set_state(struct safety *s, uint64_t now, enum safety_state to, const char *fmt, ...)
{
    if (s->state == to)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(s->reason, sizeof(s->reason), fmt, ap);
    va_end(ap);
    log_transition(s, now, to);
    s->state = to;
    s->since = now;
}

static void decide(struct safety *s, uint64_t now, uint64_t deadline, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void decide(struct safety *s, uint64_t now, uint64_t deadline, const char *fmt, ...)
{
    char what[SAFETY_REASON_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);

    s->decided = true;
    s->deadline = deadline < now ? now : deadline;
    set_state(s, now, SAFETY_SHUTTING_DOWN, "%s; power cut in %.1f s%s", what,
              seconds(s->deadline - now), s->cfg.drill ? " (drill)" : "");
}

static uint64_t known_or_assumed_cut(const struct safety *s, uint64_t now)
{
    return s->cut_known ? s->cut_at : now + s->cfg.unknown_cut_usec;
}

/* Sets the state the reports call for when no decision is due. */
static void follow_level(struct safety *s, uint64_t now)
{
    static const enum safety_state by_level[_COOL_LEVEL_MAX] = {
        [COOL_LEVEL_NORMAL] = SAFETY_NORMAL,
        [COOL_LEVEL_WARNING] = SAFETY_WARNING,
        [COOL_LEVEL_PRECRITICAL] = SAFETY_PRECRITICAL,
        [COOL_LEVEL_CRITICAL] = SAFETY_CRITICAL,
    };
    enum cool_level level = held_level(s);
    enum safety_state to = by_level[level];

    if (s->state == SAFETY_COMM_LOST)
        set_state(s, now, to, "controller heard again, level %s", cool_level_to_string(level));
    else if (s->state == SAFETY_SHUTTING_DOWN)
        set_state(s, now, to, "drill released, level %s", cool_level_to_string(level));
    else if (to < s->state)
        set_state(s, now, to, "controller reported levels below %s for %.1f s",
                  safety_state_to_string(s->state), seconds(s->cfg.clear_after_usec));
    else
        set_state(s, now, to, "controller reports %s (%s)", cool_level_to_string(level),
                  reason_name(s->last_reason));
}

static void evaluate(struct safety *s, uint64_t now, bool lost)
{
    if (!s->armed && !lost && !s->pending && s->last_level < COOL_LEVEL_PRECRITICAL &&
        s->last_frame_at > s->released_at)
        s->armed = true;

    if (lost) {
        enum cool_level held = held_level(s);
        if (held >= s->cfg.hot_level && s->armed)
            decide(s, now, known_or_assumed_cut(s, now),
                   "controller lost while %s: no valid frame for %.1f s",
                   cool_level_to_string(held), seconds(elapsed(now, s->last_frame_at)));
        else
            set_state(s, now, SAFETY_COMM_LOST,
                      "no valid frame from the controller for %.1f s, last level %s",
                      seconds(elapsed(now, s->last_frame_at)), cool_level_to_string(held));
        return;
    }
    if (s->armed && s->last_level == COOL_LEVEL_CRITICAL) {
        decide(s, now, now, "controller reports critical (%s)", reason_name(s->last_reason));
        return;
    }
    if (s->armed && s->pending &&
        (s->pending_count >= s->cfg.confirm_reports || now >= s->confirm_at)) {
        decide(s, now, known_or_assumed_cut(s, now),
               "controller reports precritical (%s), confirmed by %u report%s in %.1f s",
               reason_name(s->last_reason), s->pending_count, s->pending_count == 1 ? "" : "s",
               seconds(elapsed(now, s->pending_first)));
        return;
    }
    follow_level(s, now);
}

void safety_step(struct safety *s, uint64_t now, struct safety_decision *ret)
{
    uint64_t age = elapsed(now, s->last_frame_at);
    bool lost = age >= s->cfg.dead_after_usec;
    bool was_decided = s->decided;

    if (!s->decided)
        evaluate(s, now, lost);

    *ret = (struct safety_decision){
        .state = s->state,
        .start_shutdown = s->decided && !was_decided,
        .shutting_down = s->decided,
        .deadline = s->decided ? s->deadline : 0,
        .stale = !s->link_up || age >= s->cfg.stale_after_usec,
        .lost = lost,
        .reason = s->reason,
    };
}

uint64_t safety_next_step(const struct safety *s, uint64_t now)
{
    uint64_t t = UINT64_MAX;
    if (s->decided)
        return t;
    if (s->pending && s->armed)
        t = min_u64(t, s->confirm_at);
    uint64_t stale_at = s->last_frame_at + s->cfg.stale_after_usec;
    if (stale_at > now)
        t = min_u64(t, stale_at);
    uint64_t dead_at = s->last_frame_at + s->cfg.dead_after_usec;
    if (dead_at > now)
        t = min_u64(t, dead_at);
    return t;
}

int safety_release(struct safety *s, uint64_t now)
{
    if (!s->decided)
        return -ENOENT;
    if (!s->cfg.drill)
        return -EPERM;
    s->decided = false;
    s->armed = false;
    s->released_at = now;
    /* Leave SHUTTING_DOWN at once, so that the state is right before the next step. */
    evaluate(s, now, elapsed(now, s->last_frame_at) >= s->cfg.dead_after_usec);
    return 0;
}

enum safety_state safety_get_state(const struct safety *s)
{
    return s->state;
}

uint64_t safety_get_since(const struct safety *s)
{
    return s->since;
}

size_t safety_get_transitions(const struct safety *s, struct safety_transition *ret, size_t max)
{
    size_t n = s->log_n < max ? s->log_n : max;
    size_t skip = s->log_n - n;
    for (size_t i = 0; i < n; i++)
        ret[i] = s->log[(s->log_start + skip + i) % SAFETY_TRANSITIONS_MAX];
    return n;
}
