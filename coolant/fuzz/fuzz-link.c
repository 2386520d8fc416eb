/* libFuzzer target: coold's serial link (coolant/coold/link.c) as the host, talking to a fuzzed
 * controller.
 *
 * The "device" is a pipe that the link opens through /proc/self/fd (a non-tty, which the link
 * accepts): the harness writes the controller's bytes into it and, after each link_process(),
 * reads back what the host sent. The link reads everything before it writes anything in one
 * link_process(), so after the call the pipe holds exactly the host's output. Time is a fake
 * clock, nothing sleeps.
 *
 * Input: byte 0 picks the setup (config variant, whether the harness does the handshake and the
 * first STATUS with canned replies, whether callbacks queue requests), the rest is a script of
 * operations (see run_op()): clock ticks, raw bytes, replies to the latest host request and
 * events with a correct checksum computed here, whole frames, user requests and poll events.
 *
 * Checked: the telemetry, info, counters and events stay within their bounds; the host only
 * sends valid requests, HELLO only while shaking hands and anything else only when UP, at most
 * one new frame per link_process(); every accepted request completes exactly once (the last ones
 * with -ECANCELED from link_free()), with a reply exactly when the error is 0. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl-proto.h"
#include "link.h"
#include "lib/fuzz-check.h"

#define SEC      1000000ULL
#define MSEC     1000ULL
#define REQS_MAX 64
/* Stays well below the pipe's 64 KiB, and below the link's read budget, so that a write never
 * blocks and one link_process() reads all of it. */
#define PENDING_BYTES_MAX 16384

struct harness;

struct pending {
    struct harness *h;
    unsigned completions;
    int error;
};

struct harness {
    int rfd, wfd;
    struct link *l;
    uint64_t now;
    const uint8_t *data;
    size_t size, pos;

    struct ctl_reader host; /* what the host sent */
    bool has_req;
    uint16_t req_id;
    char req_verb[CTL_VERB_MAX + 1];
    uint16_t event_seq;
    size_t unread; /* controller bytes written since the link last read */

    bool requests_from_callbacks;
    struct pending reqs[REQS_MAX];
    unsigned n_reqs;
    bool freeing;
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static bool take_byte(struct harness *h, uint8_t *ret)
{
    if (h->pos >= h->size)
        return false;
    *ret = h->data[h->pos++];
    return true;
}

/* Takes input bytes up to a '\n' (dropped) or the end, at most max - 1, as a string. */
static void take_line(struct harness *h, char *buf, size_t max)
{
    size_t n = 0;
    while (h->pos < h->size && n + 1 < max) {
        char c = (char)h->data[h->pos++];
        if (c == '\n')
            break;
        buf[n++] = c;
    }
    buf[n] = '\0';
}

static const char *const user_verbs[] = {"GET", "SET", "HALT", "CLEAR", "STATUS", "PING", "X9"};

static void on_reply(struct link *l, int error, const struct ctl_frame *reply, void *userdata);

/* Queues a user request as the control API would, and remembers it for the completion check. */
static void user_request(struct harness *h, unsigned verb, unsigned flags, const char *key,
                         const char *value)
{
    if (h->n_reqs >= REQS_MAX)
        return;
    struct ctl_field f = {key, value};
    struct pending *p = &h->reqs[h->n_reqs];
    *p = (struct pending){.h = h};
    int r = link_request(h->l, user_verbs[verb % (sizeof(user_verbs) / sizeof(user_verbs[0]))], &f,
                         key ? 1 : 0, flags, on_reply, p);
    CHECK(r == 0 || r == -ENOTCONN || r == -EAGAIN || r == -EINVAL || r == -E2BIG);
    if (r == 0)
        h->n_reqs++;
    else
        CHECK(p->completions == 0);
}

static void on_reply(struct link *l, int error, const struct ctl_frame *reply, void *userdata)
{
    struct pending *p = userdata;
    CHECK(p->completions == 0);
    CHECK(error == 0 || error == -ETIMEDOUT || error == -ENOTCONN || error == -ECANCELED);
    CHECK((error == 0) == (reply != NULL));
    CHECK(error != -ECANCELED || p->h->freeing);
    if (reply)
        CHECK(reply->kind == CTL_KIND_REPLY && reply->verb && reply->n_fields <= CTL_FIELDS_MAX);
    p->completions++;
    p->error = error;
    /* A caller that tries again when its request failed, as link.h allows from a callback (also
     * from link_free()). */
    if (p->h->requests_from_callbacks && error != 0)
        user_request(p->h, 1, 0, "limit.warning", "45");
}

static void check_telemetry(const struct cool_telemetry *t)
{
    CHECK((unsigned)t->level < _COOL_LEVEL_MAX);
    CHECK((unsigned)t->reason < _COOL_REASON_MAX);
    CHECK(memchr(t->reason_text, '\0', sizeof(t->reason_text)));
    CHECK(t->n_temps <= COOL_SENSORS_MAX);
    CHECK(t->n_pumps <= COOL_PUMPS_MAX);
    for (unsigned i = 0; i < t->n_temps; i++)
        CHECK(t->temps[i].fault
                  ? t->temps[i].celsius_centi == 0
                  : t->temps[i].celsius_centi >= -9999999 && t->temps[i].celsius_centi <= 9999999);
    for (unsigned i = 0; i < t->n_pumps; i++) {
        CHECK(t->pumps[i].rpm >= -1 && t->pumps[i].rpm <= 1000000);
        CHECK(t->pumps[i].duty >= -1 && t->pumps[i].duty <= 100);
        CHECK((t->pumps[i].rpm == -1) == (t->pumps[i].duty == -1));
    }
    if (t->has_flow)
        CHECK(t->flow_centi >= -9999999 && t->flow_centi <= 9999999);
    if (!t->has_cut_in)
        CHECK(t->cut_in_s == 0);
}

static void on_telemetry(struct link *l, const struct cool_telemetry *t, void *userdata)
{
    CHECK(!((struct harness *)userdata)->freeing);
    check_telemetry(t);
}

static void on_event(struct link *l, const struct ctl_frame *f, void *userdata)
{
    struct harness *h = userdata;
    CHECK(!h->freeing);
    CHECK(f->kind == CTL_KIND_EVENT);
    /* Callbacks may queue requests (link.h); a POWER event is where the daemon would. */
    if (h->requests_from_callbacks)
        user_request(h, 2, LINK_REQUEST_PRIORITY, NULL, NULL);
}

static void on_state_change(struct link *l, enum link_state o, enum link_state n, void *userdata)
{
    struct harness *h = userdata;
    CHECK(!h->freeing);
    CHECK(o != n && (unsigned)o < _LINK_STATE_MAX && (unsigned)n < _LINK_STATE_MAX);
    if (h->requests_from_callbacks && n == LINK_UP)
        user_request(h, 0, 0, "curve.1", NULL);
}

static const struct link_callbacks callbacks = {
    .on_event = on_event,
    .on_telemetry = on_telemetry,
    .on_state_change = on_state_change,
};

static void check_link(struct harness *h)
{
    struct link *l = h->l;
    enum link_state s = link_get_state(l);

    CHECK((unsigned)s < _LINK_STATE_MAX);
    CHECK(link_poll_timeout_ms(l, h->now) >= 0);
    CHECK((link_fd(l) < 0) == (s == LINK_CLOSED));
    if (s == LINK_UP)
        CHECK(link_get_error(l) == NULL && link_get_info(l) != NULL);
    const char *err = link_get_error(l);
    if (err)
        CHECK(strlen(err) < ERRMSG_MAX);

    const struct link_info *i = link_get_info(l);
    if (i) {
        CHECK(i->pumps <= COOL_PUMPS_MAX && i->n_sensors <= COOL_SENSORS_MAX);
        CHECK(memchr(i->fw, '\0', sizeof(i->fw)) && memchr(i->model, '\0', sizeof(i->model)));
        CHECK(memchr(i->serial, '\0', sizeof(i->serial)) && memchr(i->caps, '\0', sizeof(i->caps)));
        for (unsigned k = 0; k < i->n_sensors; k++)
            CHECK(memchr(i->sensors[k], '\0', sizeof(i->sensors[k])));
    }
    const struct cool_telemetry *t = link_get_telemetry(l);
    if (t) {
        CHECK(t->has_status);
        check_telemetry(t);
    }

    size_t n = link_count_events(l);
    CHECK(link_get_event(l, n) == NULL);
    for (size_t k = 0; k < n; k++) {
        const struct link_event *ev = link_get_event(l, k);
        CHECK(ev && ev->frame.kind == CTL_KIND_EVENT && strcmp(ev->frame.verb, "HB") != 0);
        CHECK(ev->at <= h->now);
    }
}

/* Reads what the host sent during the last link_process(). */
static void drain_host(struct harness *h)
{
    enum link_state s = link_get_state(h->l);
    unsigned frames = 0;
    uint8_t buf[512];
    ssize_t n;
    struct ctl_frame f;

    if (link_fd(h->l) < 0) {
        /* The device went away: whatever it had buffered is lost, as on an unplug. */
        while (read(h->rfd, buf, sizeof(buf)) > 0)
            ;
        ctl_reader_init(&h->host);
        h->unread = 0;
        return;
    }
    h->unread = 0;
    while ((n = read(h->rfd, buf, sizeof(buf))) > 0)
        for (ssize_t k = 0; k < n; k++) {
            int r = ctl_reader_push(&h->host, buf[k], &f);
            CHECK(r >= 0);
            if (r == 0)
                continue;
            frames++;
            CHECK(f.kind == CTL_KIND_REQUEST);
            CHECK(strcmp(f.verb, "HELLO") == 0 ? s == LINK_HANDSHAKE : s == LINK_UP);
            h->has_req = true;
            h->req_id = f.id;
            snprintf(h->req_verb, sizeof(h->req_verb), "%s", f.verb);
        }
    CHECK(n < 0 && errno == EAGAIN);
    CHECK(frames <= 1);
}

static void process(struct harness *h, short revents)
{
    const struct link_counters *c = link_get_counters(h->l);
    unsigned long ok = c->frames_ok, rejected = c->frames_rejected;

    link_process(h->l, h->now, revents);
    c = link_get_counters(h->l);
    CHECK(c->frames_ok >= ok && c->frames_rejected >= rejected);
    if (c->frames_ok > ok)
        CHECK(c->has_last_frame && c->last_frame_at == h->now);
    drain_host(h);
    check_link(h);
}

/* Writes controller bytes and lets the link read them. */
static void ctl_write(struct harness *h, const void *p, size_t n)
{
    if (n == 0 || h->unread + n > PENDING_BYTES_MAX)
        return;
    ssize_t k = write(h->wfd, p, n);
    CHECK(k == (ssize_t)n);
    h->unread += n;
    process(h, POLLIN);
}

/* Sends "$<body>*<crc>\r\n" with a correct checksum, whatever the body holds. */
static void send_body(struct harness *h, const char *body)
{
    char frame[1024];
    size_t len = strlen(body);
    int n = snprintf(frame, sizeof(frame), "$%s*%04X\r\n", body, ctl_crc16(body, len));
    if (n > 0 && (size_t)n < sizeof(frame))
        ctl_write(h, frame, (size_t)n);
}

static void send_prefixed(struct harness *h, char kind, unsigned id, const char *rest)
{
    char body[600];
    snprintf(body, sizeof(body), "%c %u %s", kind, id, rest);
    send_body(h, body);
}

static const char *const levels[] = {"normal", "warning", "precritical", "critical", "bogus"};
static const char *const reasons[] = {"none", "temp_high", "pump_stopped", "flow_low", "new_one"};

/* A well-formed answer to the latest host request, shaped by one input byte. */
static void send_canned_reply(struct harness *h, uint8_t v)
{
    char rest[256];

    if (!h->has_req)
        return;
    if (strcmp(h->req_verb, "HELLO") == 0) {
        if (v & 0x80)
            snprintf(rest, sizeof(rest), "ERR code=%s msg=\"go away\"", v & 1 ? "proto" : "busy");
        else
            snprintf(rest, sizeof(rest),
                     "OK proto=1 fw=2.1.0 model=CT-4 serial=S%u pumps=%u sensors=%s hb=%u "
                     "caps=curve,limits,halt",
                     v, v % 6, (v & 8) ? "in,out,tank" : "a,b,c,d,e,f,g,h,i,j", v % 3);
    } else if (strcmp(h->req_verb, "STATUS") == 0) {
        snprintf(rest, sizeof(rest),
                 "OK level=%s reason=%s cut_in=%s halt=%u host=%s flow=%u.%u up=%u t1=%u.5 "
                 "t2=fault t3=-4 p1=%u/%u p2=x p3=1/101",
                 levels[v % 5], reasons[(v >> 3) % 5], (v & 0x40) ? "30" : "-", v & 1,
                 (v & 2) ? "ok" : "lost", v, v % 10, v * 1000u, v, v * 10u, v % 101);
    } else {
        snprintf(rest, sizeof(rest), (v & 1) ? "OK value=%u" : "ERR code=busy", v);
    }
    send_prefixed(h, CTL_KIND_REPLY, h->req_id, rest);
}

static const char *const event_bodies[] = {
    "HB",
    "ALARM level=precritical reason=temp_high cut_in=45",
    "ALARM level=critical reason=pump_stopped cut_in=x",
    "ALARM level=normal",
    "BOOT reason=watchdog",
    "POWER state=cutting in=5",
    "ALARM reason=flow_low",
};

/* One operation of the script. Returns false at the end of the input. */
static bool run_op(struct harness *h)
{
    uint8_t op, v = 0;
    char text[400];

    if (!take_byte(h, &op))
        return false;
    switch (op % 9) {
    case 0: /* the clock moves on: 0..5.1 s */
        (void)take_byte(h, &v);
        h->now += (uint64_t)v * 20 * MSEC;
        process(h, 0);
        break;
    case 1: { /* raw bytes from the controller */
        uint8_t raw[256];
        (void)take_byte(h, &v);
        size_t n = v;
        if (n > h->size - h->pos)
            n = h->size - h->pos;
        memcpy(raw, h->data + h->pos, n);
        h->pos += n;
        ctl_write(h, raw, n);
        break;
    }
    case 2: /* a reply to the latest request: "<verb> <fields>" from the input */
        take_line(h, text, sizeof(text));
        send_prefixed(h, CTL_KIND_REPLY, h->has_req ? h->req_id : 0, text);
        break;
    case 3: /* an event: "<verb> <fields>" from the input */
        take_line(h, text, sizeof(text));
        send_prefixed(h, CTL_KIND_EVENT, h->event_seq++, text);
        break;
    case 4: /* a whole body from the input, any kind and id */
        take_line(h, text, sizeof(text));
        send_body(h, text);
        break;
    case 5: { /* a request from the control API */
        uint8_t k = 0;
        (void)take_byte(h, &v);
        (void)take_byte(h, &k);
        static const char *const keys[] = {"curve.1", "limit.warning", "bad key", NULL};
        static const char *const values[] = {"30:40,45:70", "", "a\"b", "x"};
        user_request(h, v, (v & 0x80) ? LINK_REQUEST_PRIORITY : 0, keys[k % 4],
                     values[(k / 4) % 4]);
        process(h, 0);
        break;
    }
    case 6: { /* poll events without data: hangup, error, invalid fd, writable */
        static const short events[] = {POLLHUP, POLLERR, POLLNVAL, POLLOUT, POLLIN | POLLHUP};
        (void)take_byte(h, &v);
        process(h, events[v % 5]);
        break;
    }
    case 7: /* a well-formed answer to the latest request */
        (void)take_byte(h, &v);
        send_canned_reply(h, v);
        break;
    case 8: /* a well-formed event */
        (void)take_byte(h, &v);
        send_prefixed(h, CTL_KIND_EVENT, h->event_seq++,
                      event_bodies[v % (sizeof(event_bodies) / sizeof(event_bodies[0]))]);
        break;
    }
    return true;
}

static void setup_config(struct link_config *c, uint8_t mode)
{
    link_config_defaults(c);
    c->host = "node07";
    if (mode & 0x04) {
        c->retries = 0;
        c->queue_max = 2;
        c->events_max = 3; /* the event ring wraps */
    }
    if (mode & 0x08) {
        c->events_max = 0;
        c->reply_timeout_usec = 150 * MSEC;
        c->poll_interval_usec = 300 * MSEC;
        c->proto_retry_usec = 2 * SEC;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct harness h = {.data = data, .size = size, .now = 1000 * SEC};
    struct link_config cfg;
    char path[64];
    int p[2];
    uint8_t mode = 0;

    (void)take_byte(&h, &mode);
    if (pipe2(p, O_CLOEXEC | O_NONBLOCK) < 0)
        abort();
    h.rfd = p[0];
    h.wfd = p[1];
    /* Opening the pipe by path O_RDWR gives the link one fd for both directions, like a tty. */
    snprintf(path, sizeof(path), "/proc/self/fd/%d", h.rfd);
    setup_config(&cfg, mode);
    cfg.device = path;
    h.requests_from_callbacks = mode & 0x10;
    ctl_reader_init(&h.host);

    struct errmsg e = {""};
    CHECK(link_new(&cfg, &callbacks, &h, &h.l, &e) == 0);
    CHECK(link_start(h.l, h.now, &e) == 0);
    CHECK(link_get_state(h.l) == LINK_HANDSHAKE);
    process(&h, 0);

    if (mode & 0x01) {
        /* Canned handshake, so that inputs start from UP. */
        send_canned_reply(&h, (uint8_t)(mode & 0x48));
        CHECK(link_get_state(h.l) == LINK_UP);
        if (mode & 0x02)
            send_canned_reply(&h, mode);
    }
    while (run_op(&h))
        ;

    h.freeing = true;
    link_free(h.l);
    for (unsigned i = 0; i < h.n_reqs; i++)
        CHECK(h.reqs[i].completions == 1);
    close(h.rfd);
    close(h.wfd);
    return 0;
}
