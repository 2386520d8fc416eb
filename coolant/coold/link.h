/* coold's serial link to the cooling controller (the host side of docs/protocol.md).
 *
 * A link owns the serial device: it opens it exclusively, says HELLO, polls STATUS every poll
 * interval (which also serves as the host heartbeat), sends PING when it has sent nothing for a
 * heartbeat period, runs the control API's requests one at a time with timeout and retries (each
 * retry with a new id, §4), turns STATUS replies and ALARM events into struct cool_telemetry, and
 * reopens the device by path when it goes away (a USB unplug, or coolsim re-creating its pty).
 *
 * No threads, no global state, no clock of its own: the caller passes the monotonic time in usec
 * to every call that acts, so that tests can use a fake clock. Not thread-safe: use a link from
 * one thread (the main loop). Wiring into poll():
 *
 *     for (;;) {
 *         uint64_t now = monotonic_usec();
 *         struct pollfd p = {.fd = link_fd(l), .events = link_poll_events(l)};
 *         int n = poll(&p, p.fd >= 0, link_poll_timeout_ms(l, now));   // with other fds
 *         link_process(l, monotonic_usec(), n > 0 ? p.revents : 0);
 *     }
 *
 * The fd changes across reconnects (and is -1 while closed): fetch it again every iteration.
 * Callbacks run from link_process(), link_start() and link_free(); they may call link_request()
 * and the accessors, never link_process() or link_free().
 *
 * States: CLOSED -> (device opened) HANDSHAKE -> (HELLO answered OK) UP.
 * - read error, EOF or hangup: CLOSED, reopened every reopen interval;
 * - BOOT event: HANDSHAKE (the controller forgot us, §8);
 * - a request unanswered after all retries while UP: HANDSHAKE (the controller is not answering;
 *   HELLO is retried every reopen interval until it answers);
 * - HELLO answered ERR code=proto: CLOSED with an error, retried every proto_retry.
 * Leaving UP fails the request in flight and every queued one with -ENOTCONN. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ctl-proto.h"
#include "lib/errmsg.h"
#include "telemetry.h"

enum link_state {
    LINK_CLOSED,
    LINK_HANDSHAKE,
    LINK_UP,
    _LINK_STATE_MAX,
};

struct link_config {
    const char *device;            /* path of the serial device, may be a symlink; copied */
    unsigned baud;                 /* 115200; 9600..921600, ignored by a pty */
    uint64_t poll_interval_usec;   /* 1 s: STATUS while UP */
    uint64_t heartbeat_usec;       /* 1 s: PING when nothing was sent for this long */
    uint64_t reply_timeout_usec;   /* 1 s */
    unsigned retries;              /* 2: resends after the first try, each with a new id */
    uint64_t reopen_interval_usec; /* 1 s: reopening the device, and HELLO after no answer */
    uint64_t proto_retry_usec;     /* 60 s: after HELLO was refused with code=proto */
    const char *host;              /* name sent in HELLO; NULL: gethostname(); copied */
    unsigned queue_max;            /* 16: queued requests beyond this are refused */
    unsigned events_max;           /* 256: controller events kept for link_get_event() */
};

/* What the controller said about itself in its HELLO reply. */
struct link_info {
    unsigned proto;
    char fw[32];
    char model[32];
    char serial[48];
    unsigned pumps;
    unsigned n_sensors;
    char sensors[COOL_SENSORS_MAX][32]; /* sensor n (t<n> in STATUS) is sensors[n - 1] */
    char caps[96];                      /* as sent: "curve,limits,halt" */
    unsigned hb_s;                      /* heartbeat period, 0 when not sent */
};

struct link_counters {
    unsigned long frames_ok;       /* valid frames from the controller */
    unsigned long frames_rejected; /* frames the reader rejected (bad checksum, noise, ...) */
    unsigned long reconnects;      /* successful opens after the first one */
    unsigned long timeouts;        /* requests that got no reply after all retries */
    unsigned long retries;         /* resends */
    unsigned long stray_replies;   /* replies whose id matched no request in flight */
    bool has_last_frame;
    uint64_t last_frame_at;        /* monotonic usec of the last valid frame */
    uint64_t last_frame_wall_usec; /* the same instant on the wall clock (CLOCK_REALTIME) */
};

/* A controller event (all but HB, which comes every second), as received. */
struct link_event {
    uint64_t at;        /* monotonic usec */
    uint64_t wall_usec; /* CLOCK_REALTIME */
    struct ctl_frame frame;
};

struct link;

struct link_callbacks {
    /* Every event frame (HB, ALARM, BOOT, POWER, ...), after the link has acted on it. */
    void (*on_event)(struct link *l, const struct ctl_frame *f, void *userdata);
    /* The telemetry changed: a STATUS reply was parsed or an ALARM updated the level fields. */
    void (*on_telemetry)(struct link *l, const struct cool_telemetry *t, void *userdata);
    void (*on_state_change)(struct link *l, enum link_state old_state, enum link_state new_state,
                            void *userdata);
};

/* Completion of link_request(). Exactly one call per accepted request: error 0 with the reply
 * (which may be "R <id> ERR code=..."; the frame is valid during the call only), -ETIMEDOUT when
 * no reply came after all retries, -ENOTCONN when the link left UP first, -ECANCELED from
 * link_free(). */
typedef void (*link_reply_fn)(struct link *l, int error, const struct ctl_frame *reply,
                              void *userdata);

enum link_request_flags {
    LINK_REQUEST_PRIORITY = 1 << 0, /* ahead of the queue and of the STATUS poll (HALT) */
};

/* Returns "closed", "handshake", "up", or NULL for a value out of range. */
const char *link_state_to_string(enum link_state s);

/* Fills *c with the defaults listed in struct link_config; device stays NULL. */
void link_config_defaults(struct link_config *c);

/* Creates a link in state CLOSED; nothing is opened yet (see link_start()). `cb` is copied, any of
 * its functions may be NULL. Returns 0, -EINVAL with a message for a bad config (no device, a baud
 * rate termios does not have, a host name HELLO cannot carry), or -ENOMEM. */
int link_new(const struct link_config *c, const struct link_callbacks *cb, void *userdata,
             struct link **ret, struct errmsg *e);

/* Opens the device for the first time. A device that does not exist yet is no error: the link
 * stays CLOSED and keeps trying. Returns 0, or -EBUSY ("device busy: owned by another process":
 * another coold holds it), -EACCES or -EPERM with a message: errors that waiting does not fix. */
int link_start(struct link *l, uint64_t now, struct errmsg *e);

/* Closes the device and frees the link; requests still pending complete with -ECANCELED. NULL
 * is allowed. */
void link_free(struct link *l);

/* The device fd to poll, or -1 while CLOSED. Owned by the link. */
int link_fd(const struct link *l);

/* The poll() events to wait for on link_fd(): POLLIN, plus POLLOUT while a frame is half sent. */
short link_poll_events(const struct link *l);

/* Milliseconds until link_process() has timed work to do (0: now), for poll()'s timeout. */
int link_poll_timeout_ms(const struct link *l, uint64_t now);

/* Does everything that is due at `now`: reads all available bytes (revents from poll() on
 * link_fd(), 0 after a timeout), handles replies and events, retries and fails timed-out requests,
 * reopens a closed device, sends HELLO, queued requests, STATUS polls and PINGs. */
void link_process(struct link *l, uint64_t now, short revents);

/* Queues a request (verb and n fields, copied). It is sent from link_process(); cb (not NULL) is
 * called when it completes. Returns 0, -ENOTCONN when the link is not UP, -EAGAIN when queue_max
 * requests are waiting (never for LINK_REQUEST_PRIORITY), -EINVAL when the verb or a field could
 * not be sent (bad syntax) or -E2BIG when the frame would be too long; on error cb is never called.
 */
int link_request(struct link *l, const char *verb, const struct ctl_field *fields, unsigned n,
                 unsigned flags, link_reply_fn cb, void *userdata);

enum link_state link_get_state(const struct link *l);

/* The controller's HELLO answer, or NULL before the first one. Valid until the next
 * link_process(). */
const struct link_info *link_get_info(const struct link *l);

const struct link_counters *link_get_counters(const struct link *l);

/* The latest telemetry, or NULL before the first STATUS reply. Kept across reconnects (check
 * taken_at and the safety module's stale flag). Valid until the next link_process(). */
const struct cool_telemetry *link_get_telemetry(const struct link *l);

/* Why the link is not UP (open failure, refused HELLO, no answer), or NULL when it is or when no
 * error was seen. Valid until the next call that acts. */
const char *link_get_error(const struct link *l);

/* Number of stored controller events, and event i (0: the oldest) or NULL past the end. */
size_t link_count_events(const struct link *l);
const struct link_event *link_get_event(const struct link *l, size_t i);
