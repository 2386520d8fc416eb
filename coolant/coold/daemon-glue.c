/* The callbacks that tie the link, the safety state machine, the shutdown and the event list
 * together, and the thread-safe entry points of daemon.h. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "lib/clock.h"
#include "daemon-internal.h"
#include "lib/log.h"
#include "lib/macro.h"

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static json_t *frame_fields_json(const struct ctl_frame *f)
{
    json_t *o = json_object();
    for (unsigned i = 0; i < f->n_fields; i++)
        json_object_set_new(o, f->fields[i].key, json_string(f->fields[i].value));
    return o;
}

/* The level in a heartbeat is a report like any other: it corroborates an alarm, or shows that
 * a lone alarm was a blip, every second whatever the poll interval. It carries no cut time. */
static void report_heartbeat(struct daemon *d, struct link *l, const struct ctl_frame *f)
{
    int level = cool_level_from_string(ctl_frame_get(f, "level"));
    if (level < 0)
        return;
    const struct cool_telemetry *t = link_get_telemetry(l);
    struct safety_report rep = {
        .level = (enum cool_level)level,
        .reason = t && level != COOL_LEVEL_NORMAL ? t->reason : COOL_REASON_NONE,
        .has_cut_in = false,
        .received_at = clock_now_usec(),
    };
    safety_report(d->safety, &rep);
}

static void on_event(struct link *l, const struct ctl_frame *f, void *userdata)
{
    struct daemon *d = userdata;
    if (strcmp(f->verb, "HB") == 0) {
        report_heartbeat(d, l, f);
        return;
    }
    /* ALARM repeats every second while pre-critical; only changes of level are worth a line. */
    if (strcmp(f->verb, "ALARM") == 0) {
        const char *level = ctl_frame_get(f, "level");
        if (level && strcmp(level, d->last_alarm_level) == 0)
            return;
        snprintf(d->last_alarm_level, sizeof(d->last_alarm_level), "%s", level ? level : "");
    }
    json_t *fields = frame_fields_json(f);
    char *text = json_dumps(fields, JSON_COMPACT);
    eventlog_add(d->events, "controller", f->verb, fields, "%s %s", f->verb, text ? text : "");
    log_notice("Controller event %s %s", f->verb, text ? text : "");
    free(text);
    json_decref(fields);
}

static void on_telemetry(struct link *l, const struct cool_telemetry *t, void *userdata)
{
    struct daemon *d = userdata;
    if (t->has_status && t->taken_at != d->last_status_at) {
        d->last_status_at = t->taken_at;
        d->last_success_unix_s = wall_now();
    }
    safety_report_telemetry(d->safety, t);
}

static void on_state_change(struct link *l, enum link_state old_state, enum link_state new_state,
                            void *userdata)
{
    struct daemon *d = userdata;
    const char *why = link_get_error(l);
    safety_link_changed(d->safety, new_state == LINK_UP, clock_now_usec());
    eventlog_add(d->events, "daemon", "link", NULL, "serial link %s -> %s%s%s",
                 link_state_to_string(old_state), link_state_to_string(new_state), why ? ": " : "",
                 why ? why : "");
    if (new_state == LINK_UP) {
        const struct link_info *info = link_get_info(l);
        log_info("Controller %s fw %s serial %s connected on %s", info ? info->model : "?",
                 info ? info->fw : "?", info ? info->serial : "?", d->cfg.device);
    } else if (old_state == LINK_UP) {
        log_warning("Lost the controller on %s%s%s", d->cfg.device, why ? ": " : "",
                    why ? why : "");
    }
}

const struct link_callbacks daemon_link_callbacks = {
    .on_event = on_event,
    .on_telemetry = on_telemetry,
    .on_state_change = on_state_change,
};

/* True when the decision to shut down stands but no real shutdown runs: starting it failed
 * (no memory, no thread), and it is tried again on every step until it starts. */
static bool shutdown_start_failed(struct daemon *d, const struct safety_decision *dec)
{
    if (!dec->shutting_down || dec->start_shutdown || d->cfg.drill)
        return false;
    struct shutdown_state st;
    shutdown_get_state(d->shutdown, &st);
    return !st.latched;
}

void daemon_step_safety(struct daemon *d, uint64_t now)
{
    const struct link_counters *c = link_get_counters(d->link);
    if (c->has_last_frame)
        safety_frame_seen(d->safety, c->last_frame_at);
    struct safety_decision dec;
    safety_step(d->safety, now, &dec);
    if (dec.state != d->last_state) {
        log_warning("Safety state %s -> %s: %s", safety_state_to_string(d->last_state),
                    safety_state_to_string(dec.state), dec.reason ? dec.reason : "");
        eventlog_add(d->events, "daemon", "safety", NULL, "%s -> %s: %s",
                     safety_state_to_string(d->last_state), safety_state_to_string(dec.state),
                     dec.reason ? dec.reason : "");
        d->last_state = dec.state;
    }
    if (dec.start_shutdown || shutdown_start_failed(d, &dec)) {
        const struct cool_telemetry *t = link_get_telemetry(d->link);
        const char *reason =
            t ? (t->reason == COOL_REASON_UNKNOWN ? t->reason_text
                                                  : cool_reason_to_string(t->reason))
              : "controller lost";
        if (dec.lost)
            reason = "controller lost while hot";
        int r = shutdown_start(d->shutdown, reason, dec.deadline, d->cfg.drill);
        if (r < 0 && r != -EALREADY)
            log_error_errno(r, "Cannot start the shutdown, trying again");
    }
    /* In drill mode an alarm is rehearsed, not obeyed: once the rehearsal has run, the state
     * follows the controller again (and the same alarm is not rehearsed twice). */
    if (d->cfg.drill && dec.shutting_down && !dec.start_shutdown &&
        shutdown_get_stage(d->shutdown) == SHUTDOWN_STAGE_IDLE &&
        safety_release(d->safety, now) == 0)
        eventlog_add(d->events, "daemon", "safety", NULL,
                     "drill finished; following the controller");
    d->decision = dec;
    d->decision.reason = NULL;
}

/* ---- daemon_call: a request from another thread, sent by the main loop. ---- */

struct call {
    bool done;
    int error;
    struct ctl_frame reply;
    struct daemon *d;
};

static void call_finished(struct link *l, int error, const struct ctl_frame *reply, void *userdata)
{
    struct call *c = userdata;
    c->error = error;
    if (error == 0 && reply)
        ctl_frame_copy(&c->reply, reply);
    c->done = true;
    pthread_cond_broadcast(&c->d->call_done);
}

static int call_flags(struct daemon *d, const char *verb, const struct ctl_field *fields,
                      unsigned n_fields, unsigned flags, struct ctl_frame *ret_reply,
                      struct errmsg *e)
{
    struct call c = {.d = d};
    pthread_mutex_lock(&d->lock);
    if (!d->link || link_get_state(d->link) != LINK_UP) {
        pthread_mutex_unlock(&d->lock);
        return errmsg_set(e, -ENOTCONN, "the controller is not connected");
    }
    int r = link_request(d->link, verb, fields, n_fields, flags, call_finished, &c);
    if (r < 0) {
        pthread_mutex_unlock(&d->lock);
        if (r == -E2BIG)
            return errmsg_set(e, -EMSGSIZE, "the request does not fit in one frame");
        if (r == -EINVAL)
            return errmsg_set(e, -EMSGSIZE, "the request holds a malformed name or value");
        if (r == -EAGAIN)
            return errmsg_set(e, -EBUSY, "too many requests are waiting for the controller");
        return errmsg_set(e, r, "cannot queue the request: %s", strerror(-r));
    }
    uint64_t one = 1;
    if (write(d->wake_fd, &one, sizeof(one)) < 0)
        log_debug("Cannot wake the main loop: %m");
    /* The link completes every accepted request exactly once, at the latest after its timeout
     * and retries or when it is freed, so this wait ends. */
    while (!c.done)
        pthread_cond_wait(&d->call_done, &d->lock);
    pthread_mutex_unlock(&d->lock);
    if (c.error == -ETIMEDOUT)
        return errmsg_set(e, -ETIMEDOUT, "the controller did not answer");
    if (c.error < 0)
        return errmsg_set(e, -ENOTCONN, "the controller connection dropped: %s",
                          strerror(-c.error));
    ctl_frame_copy(ret_reply, &c.reply);
    return 0;
}

int daemon_call(struct daemon *d, const char *verb, const struct ctl_field *fields,
                unsigned n_fields, struct ctl_frame *ret_reply, struct errmsg *e)
{
    return call_flags(d, verb, fields, n_fields, 0, ret_reply, e);
}

int daemon_send_halt(unsigned within_s, void *userdata)
{
    struct daemon *d = userdata;
    char within[16];
    snprintf(within, sizeof(within), "%u", within_s);
    struct ctl_field f = {"within", within};
    struct ctl_frame reply;
    struct errmsg e = {{0}};
    int r = call_flags(d, "HALT", &f, 1, LINK_REQUEST_PRIORITY, &reply, &e);
    if (r < 0) {
        log_error("HALT not delivered: %s", e.text);
        return r;
    }
    if (strcmp(reply.verb, "OK") != 0) {
        log_error("The controller refused HALT: %s", ctl_frame_get(&reply, "msg") ?: "?");
        return -EPROTO;
    }
    log_notice("Controller acknowledged HALT, cut_in=%s", ctl_frame_get(&reply, "cut_in") ?: "-");
    return 0;
}

void daemon_shutdown_log(enum log_level level, const char *message, void *userdata)
{
    log_emit(level, __FILE__, __LINE__, "%s", message);
}

void daemon_shutdown_event(const char *message, json_t *fields, void *userdata)
{
    struct daemon *d = userdata;
    eventlog_add(d->events, "daemon", "shutdown", fields, "%s", message);
}

int daemon_drill(struct daemon *d, json_t **ret_stages, struct errmsg *e)
{
    /* A drill pretends the controller cuts power as its default cut delay would. */
    int r = shutdown_start(d->shutdown, "drill", clock_now_usec() + 30 * 1000000ull, true);
    if (r == -EALREADY)
        return errmsg_set(e, -EBUSY, "a real shutdown is under way");
    if (r == -EBUSY)
        return errmsg_set(e, -EBUSY, "a drill is already running");
    if (r < 0)
        return errmsg_set(e, r, "cannot start the drill: %s", strerror(-r));
    r = shutdown_wait(d->shutdown, true, 120 * 1000000ull);
    if (r < 0)
        return errmsg_set(e, r, "the drill did not finish: %s", strerror(-r));
    *ret_stages = shutdown_steps_json(d->shutdown, true);
    return *ret_stages ? 0 : errmsg_set(e, -ENOMEM, "out of memory");
}

bool daemon_may_write(struct daemon *d, uid_t uid, gid_t gid)
{
    return roles_is_admin(&d->roles, uid, gid);
}

struct eventlog *daemon_events(struct daemon *d)
{
    return d->events;
}

struct audit *daemon_audit(struct daemon *d)
{
    return d->audit;
}

const char *daemon_admin_group(struct daemon *d)
{
    return roles_admin_group(&d->roles);
}
