/* Tests of the serial link against the other end of a real pty pair: the test plays the
 * controller on the pty master with ctl_writer/ctl_reader, the link opens the slave through a
 * symlink (as coolsim --link makes one) and runs on a fake monotonic clock. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "link.h"
#include "lib/macro.h"

#define SEC 1000000ULL

struct completion {
    bool done;
    int error;
    struct ctl_frame reply;
};

struct fixture {
    char dir[64];
    char path[128]; /* symlink to the current pty slave */
    int master;
    struct ctl_reader reader; /* frames the host sent */
    struct link *l;
    struct link_config cfg;
    uint64_t now;

    unsigned state_changes;
    enum link_state last_old, last_new;
    unsigned telemetry_calls;
    struct cool_telemetry last_telemetry;
    unsigned event_calls;
    char last_event[CTL_VERB_MAX + 1];
};

static void on_event(struct link *l, const struct ctl_frame *f, void *userdata)
{
    struct fixture *fx = userdata;
    fx->event_calls++;
    snprintf(fx->last_event, sizeof(fx->last_event), "%s", f->verb);
}

static void on_telemetry(struct link *l, const struct cool_telemetry *t, void *userdata)
{
    struct fixture *fx = userdata;
    fx->telemetry_calls++;
    fx->last_telemetry = *t;
}

static void on_state_change(struct link *l, enum link_state o, enum link_state n, void *userdata)
{
    struct fixture *fx = userdata;
    fx->state_changes++;
    fx->last_old = o;
    fx->last_new = n;
}

static const struct link_callbacks callbacks = {
    .on_event = on_event,
    .on_telemetry = on_telemetry,
    .on_state_change = on_state_change,
};

static void on_reply(struct link *l, int error, const struct ctl_frame *reply, void *userdata)
{
    struct completion *c = userdata;
    assert_false(c->done); /* exactly one completion per request */
    c->done = true;
    c->error = error;
    if (reply)
        ctl_frame_copy(&c->reply, reply);
}

/* Creates a pty pair and points fx->path at its slave (atomically, like coolsim). */
static void new_pty(struct fixture *fx)
{
    int slave;
    char name[64], tmp[160];

    assert_int_equal(openpty(&fx->master, &slave, name, NULL, NULL), 0);
    /* The link opens the slave by path; the test does not need its own slave fd. */
    close(slave);
    assert_int_equal(fcntl(fx->master, F_SETFL, O_NONBLOCK), 0);
    assert_int_equal(fcntl(fx->master, F_SETFD, FD_CLOEXEC), 0);
    snprintf(tmp, sizeof(tmp), "%s/ctl.new", fx->dir);
    assert_int_equal(symlink(name, tmp), 0);
    assert_int_equal(rename(tmp, fx->path), 0);
    ctl_reader_init(&fx->reader);
}

static int setup(void **state)
{
    struct fixture *fx = calloc(1, sizeof(*fx));
    assert_non_null(fx);
    snprintf(fx->dir, sizeof(fx->dir), "/tmp/test-link-XXXXXX");
    assert_non_null(mkdtemp(fx->dir));
    snprintf(fx->path, sizeof(fx->path), "%s/ctl", fx->dir);
    new_pty(fx);
    link_config_defaults(&fx->cfg);
    fx->cfg.device = fx->path;
    fx->cfg.host = "node07";
    fx->now = 1000 * SEC;
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    struct fixture *fx = *state;
    link_free(fx->l);
    if (fx->master >= 0)
        close(fx->master);
    unlink(fx->path);
    rmdir(fx->dir);
    free(fx);
    return 0;
}

static void start_link(struct fixture *fx)
{
    struct errmsg e = {""};
    assert_int_equal(link_new(&fx->cfg, &callbacks, fx, &fx->l, &e), 0);
    assert_int_equal(link_start(fx->l, fx->now, &e), 0);
}

/* Lets the link read until it has seen n more frames (valid or rejected); the pty hands bytes
 * over asynchronously, so wait for them with a real-time bound. */
static void deliver(struct fixture *fx, unsigned long n)
{
    const struct link_counters *c = link_get_counters(fx->l);
    unsigned long target = c->frames_ok + c->frames_rejected + n;

    for (int i = 0; i < 200 && c->frames_ok + c->frames_rejected < target; i++) {
        struct pollfd p = {.fd = link_fd(fx->l), .events = POLLIN};
        assert_true(p.fd >= 0);
        int k = poll(&p, 1, 10);
        assert_true(k >= 0);
        link_process(fx->l, fx->now, k > 0 ? p.revents : 0);
    }
    assert_true(c->frames_ok + c->frames_rejected >= target);
}

/* Reads the next frame the host sent. */
static void host_read(struct fixture *fx, struct ctl_frame *f)
{
    for (int i = 0; i < 2000; i++) {
        uint8_t b;
        ssize_t n = read(fx->master, &b, 1);
        if (n == 1) {
            int r = ctl_reader_push(&fx->reader, b, f);
            assert_true(r >= 0);
            if (r == 1)
                return;
            continue;
        }
        assert_true(n < 0 && errno == EAGAIN);
        struct pollfd p = {.fd = fx->master, .events = POLLIN};
        poll(&p, 1, 1);
    }
    fail_msg("the host sent no frame");
}

/* Asserts that the host sent nothing. */
static void host_silent(struct fixture *fx)
{
    struct pollfd p = {.fd = fx->master, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 30), 0);
}

/* Sends a frame as the controller: key/value pairs, NULL-terminated. */
static void ctl_send(struct fixture *fx, char kind, uint16_t id, const char *verb, ...)
{
    struct ctl_writer w;
    va_list ap;
    const char *k;

    ctl_writer_begin(&w, kind, id, verb);
    va_start(ap, verb);
    while ((k = va_arg(ap, const char *)))
        ctl_writer_add(&w, k, va_arg(ap, const char *));
    va_end(ap);
    int n = ctl_writer_finish(&w);
    assert_true(n > 0);
    assert_int_equal(write(fx->master, w.buf, (size_t)n), n);
}

static void send_raw(struct fixture *fx, const char *s, size_t n)
{
    assert_int_equal(write(fx->master, s, n), (ssize_t)n);
}

static void expect_request(struct fixture *fx, const char *verb, struct ctl_frame *f)
{
    host_read(fx, f);
    assert_int_equal(f->kind, CTL_KIND_REQUEST);
    assert_string_equal(f->verb, verb);
}

static void answer_hello(struct fixture *fx, uint16_t id)
{
    ctl_send(fx, 'R', id, "OK", "proto", "1", "fw", "2.4.1", "model", "CT-4", "serial",
             "CT4-000123", "pumps", "2", "sensors", "inlet,outlet,tank", "caps",
             "curve,limits,halt", "hb", "1", NULL);
    deliver(fx, 1);
}

static void answer_status(struct fixture *fx, uint16_t id, const char *level, const char *cut_in)
{
    ctl_send(fx, 'R', id, "OK", "up", "5124", "level", level, "reason",
             strcmp(level, "normal") == 0 ? "none" : "pump_stopped", "cut_in", cut_in, "halt", "0",
             "host", "ok", "flow", "12.40", "t1", "31.20", "t2", "35.05", "t3", "fault", "p1",
             "2410/55", "p2", "0/55", NULL);
    deliver(fx, 1);
}

/* Opens, says HELLO, answers it and the first STATUS poll: the link is UP and idle. */
static void bring_up(struct fixture *fx)
{
    struct ctl_frame f;

    start_link(fx);
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "HELLO", &f);
    answer_hello(fx, f.id);
    assert_int_equal(link_get_state(fx->l), LINK_UP);
    expect_request(fx, "STATUS", &f);
    answer_status(fx, f.id, "normal", "-");
}

static void test_handshake(void **state)
{
    struct fixture *fx = *state;
    struct ctl_frame f;

    start_link(fx);
    assert_int_equal(link_get_state(fx->l), LINK_HANDSHAKE);
    assert_int_equal(fx->last_old, LINK_CLOSED);
    assert_int_equal(fx->last_new, LINK_HANDSHAKE);
    assert_null(link_get_info(fx->l));
    assert_int_equal(link_poll_timeout_ms(fx->l, fx->now), 0); /* HELLO is due */

    link_process(fx->l, fx->now, 0);
    expect_request(fx, "HELLO", &f);
    assert_string_equal(ctl_frame_get(&f, "proto"), "1");
    assert_string_equal(ctl_frame_get(&f, "host"), "node07");
    /* Nothing is sent before the HELLO is answered, however long it takes. */
    fx->now += SEC / 2;
    link_process(fx->l, fx->now, 0);
    host_silent(fx);

    answer_hello(fx, f.id);
    assert_int_equal(link_get_state(fx->l), LINK_UP);
    assert_int_equal(fx->last_new, LINK_UP);
    assert_null(link_get_error(fx->l));
    const struct link_info *info = link_get_info(fx->l);
    assert_non_null(info);
    assert_string_equal(info->fw, "2.4.1");
    assert_string_equal(info->model, "CT-4");
    assert_string_equal(info->serial, "CT4-000123");
    assert_int_equal(info->pumps, 2);
    assert_int_equal(info->n_sensors, 3);
    assert_string_equal(info->sensors[0], "inlet");
    assert_string_equal(info->sensors[2], "tank");
    assert_string_equal(info->caps, "curve,limits,halt");
    assert_int_equal(info->hb_s, 1);
    /* Telemetry is asked for at once. */
    expect_request(fx, "STATUS", &f);
}

static void test_status_and_alarm(void **state)
{
    struct fixture *fx = *state;
    struct ctl_frame f;

    start_link(fx);
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "HELLO", &f);
    answer_hello(fx, f.id);
    expect_request(fx, "STATUS", &f);
    assert_null(link_get_telemetry(fx->l));
    answer_status(fx, f.id, "normal", "-");

    const struct cool_telemetry *t = link_get_telemetry(fx->l);
    assert_non_null(t);
    assert_int_equal(fx->telemetry_calls, 1);
    assert_true(t->has_status);
    assert_int_equal(t->taken_at, fx->now);
    assert_int_equal(t->level, COOL_LEVEL_NORMAL);
    assert_int_equal(t->reason, COOL_REASON_NONE);
    assert_false(t->has_cut_in);
    assert_false(t->halt);
    assert_true(t->host_ok);
    assert_true(t->has_flow);
    assert_int_equal(t->flow_centi, 1240);
    assert_int_equal(t->uptime_s, 5124);
    assert_int_equal(t->n_temps, 3);
    assert_int_equal(t->temps[0].celsius_centi, 3120);
    assert_false(t->temps[1].fault);
    assert_int_equal(t->temps[1].celsius_centi, 3505);
    assert_true(t->temps[2].fault);
    assert_int_equal(t->n_pumps, 2);
    assert_int_equal(t->pumps[0].rpm, 2410);
    assert_int_equal(t->pumps[0].duty, 55);
    assert_int_equal(t->pumps[1].rpm, 0);

    /* An ALARM changes the level at once, without waiting for the next poll. */
    fx->now += SEC / 4;
    ctl_send(fx, 'E', 41, "ALARM", "level", "precritical", "reason", "pump_stopped", "pump", "2",
             "cut_in", "30", NULL);
    deliver(fx, 1);
    assert_int_equal(fx->telemetry_calls, 2);
    assert_int_equal(t->level, COOL_LEVEL_PRECRITICAL);
    assert_int_equal(t->reason, COOL_REASON_PUMP_STOPPED);
    assert_true(t->has_cut_in);
    assert_int_equal(t->cut_in_s, 30);
    assert_int_equal(t->level_at, fx->now);
    assert_int_equal(fx->event_calls, 1);
    assert_string_equal(fx->last_event, "ALARM");

    /* HB reaches on_event but is not kept among the events; ALARM and POWER are. */
    ctl_send(fx, 'E', 42, "HB", "up", "5125", "level", "precritical", NULL);
    ctl_send(fx, 'E', 43, "POWER", "action", "cut", "orderly", "0", NULL);
    deliver(fx, 2);
    assert_int_equal(fx->event_calls, 3);
    assert_int_equal(link_count_events(fx->l), 2);
    assert_string_equal(link_get_event(fx->l, 0)->frame.verb, "ALARM");
    assert_string_equal(ctl_frame_get(&link_get_event(fx->l, 0)->frame, "pump"), "2");
    assert_string_equal(link_get_event(fx->l, 1)->frame.verb, "POWER");
    assert_null(link_get_event(fx->l, 2));
    assert_true(link_get_event(fx->l, 1)->wall_usec > 0);

    /* The next poll comes one poll interval after the last. */
    uint64_t polled = fx->now - SEC / 4;
    assert_int_equal(link_poll_timeout_ms(fx->l, fx->now), 750);
    fx->now = polled + SEC - 1;
    link_process(fx->l, fx->now, 0);
    host_silent(fx);
    fx->now = polled + SEC;
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "STATUS", &f);
    answer_status(fx, f.id, "precritical", "29");
    assert_int_equal(t->level, COOL_LEVEL_PRECRITICAL);
    assert_int_equal(t->cut_in_s, 29);
    assert_int_equal(link_get_counters(fx->l)->frames_ok, 6);
    assert_int_equal(link_get_counters(fx->l)->last_frame_at, fx->now);
}

static void test_ping_when_idle(void **state)
{
    struct fixture *fx = *state;
    struct ctl_frame f;

    fx->cfg.poll_interval_usec = 5 * SEC;
    bring_up(fx);
    fx->now += SEC;
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "PING", &f);
    ctl_send(fx, 'R', f.id, "OK", "up", "5125", NULL);
    deliver(fx, 1);
    /* A request is a heartbeat too: no PING a second after the GET. */
    struct completion c = {0};
    struct ctl_field key = {"key", "limit.warning"};
    fx->now += SEC / 2;
    assert_int_equal(link_request(fx->l, "GET", &key, 1, 0, on_reply, &c), 0);
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "GET", &f);
    ctl_send(fx, 'R', f.id, "OK", "limit.warning", "45.00", NULL);
    deliver(fx, 1);
    fx->now += SEC / 2;
    link_process(fx->l, fx->now, 0);
    host_silent(fx);
    fx->now += SEC / 2;
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "PING", &f);
}

/* A request unanswered is resent twice, each time with a new id, then fails with -ETIMEDOUT and
 * the link goes back to HELLO. */
static void test_retries_then_timeout(void **state)
{
    struct fixture *fx = *state;
    struct ctl_frame f;
    struct completion c = {0};
    struct ctl_field key = {"key", "pump.1.curve"};
    uint16_t ids[3];

    bring_up(fx);
    assert_int_equal(link_request(fx->l, "GET", &key, 1, 0, on_reply, &c), 0);
    assert_int_equal(link_poll_timeout_ms(fx->l, fx->now), 0);
    link_process(fx->l, fx->now, 0);
    for (int i = 0; i < 3; i++) {
        expect_request(fx, "GET", &f);
        assert_string_equal(ctl_frame_get(&f, "key"), "pump.1.curve");
        ids[i] = f.id;
        assert_int_equal(link_poll_timeout_ms(fx->l, fx->now), 1000);
        fx->now += SEC - 1;
        link_process(fx->l, fx->now, 0);
        host_silent(fx);
        assert_false(c.done);
        fx->now += 1;
        link_process(fx->l, fx->now, 0);
    }
    assert_int_not_equal(ids[0], ids[1]);
    assert_int_not_equal(ids[1], ids[2]);
    assert_int_not_equal(ids[0], ids[2]);
    assert_true(c.done);
    assert_int_equal(c.error, -ETIMEDOUT);
    assert_int_equal(link_get_counters(fx->l)->retries, 2);
    assert_int_equal(link_get_counters(fx->l)->timeouts, 1);
    assert_int_equal(link_get_state(fx->l), LINK_HANDSHAKE);
    assert_non_null(strstr(link_get_error(fx->l), "did not answer GET after 3 tries"));
    expect_request(fx, "HELLO", &f);
    /* Meanwhile the API is told the controller is not connected. */
    assert_int_equal(link_request(fx->l, "GET", &key, 1, 0, on_reply, &c), -ENOTCONN);
}

/* A late answer to an earlier try of the same request is ignored (§4); the latest id counts. */
static void test_stale_reply_ignored(void **state)
{
    struct fixture *fx = *state;
    struct ctl_frame first, second;
    struct completion c = {0};
    struct ctl_field key = {"key", "limit.warning"};

    bring_up(fx);
    assert_int_equal(link_request(fx->l, "GET", &key, 1, 0, on_reply, &c), 0);
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "GET", &first);
    fx->now += SEC;
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "GET", &second);

    ctl_send(fx, 'R', first.id, "OK", "limit.warning", "40.00", NULL);
    ctl_send(fx, 'R', 999, "OK", NULL);
    deliver(fx, 2);
    assert_false(c.done);
    assert_int_equal(link_get_counters(fx->l)->stray_replies, 2);

    ctl_send(fx, 'R', second.id, "OK", "limit.warning", "45.00", NULL);
    deliver(fx, 1);
    assert_true(c.done);
    assert_int_equal(c.error, 0);
    assert_string_equal(ctl_frame_get(&c.reply, "limit.warning"), "45.00");
    assert_int_equal(link_get_state(fx->l), LINK_UP);
}

/* Noise, a corrupted frame, a frame cut short by a new '$' and binary bytes between frames are
 * counted and skipped; the frames around them still work. */
static void test_garbage_between_frames(void **state)
{
    struct fixture *fx = *state;
    struct ctl_frame f;
    struct completion c = {0};
    struct ctl_field key = {"key", "limit.critical"};
    struct ctl_writer w;

    bring_up(fx);
    assert_int_equal(link_request(fx->l, "GET", &key, 1, 0, on_reply, &c), 0);
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "GET", &f);

    static const char noise[] = "line noise\r\n\xff\xfe\x01";
    send_raw(fx, noise, sizeof(noise) - 1);
    ctl_writer_begin(&w, 'R', f.id, "OK");
    ctl_writer_add(&w, "limit.critical", "99.00");
    int n = ctl_writer_finish(&w);
    w.buf[n - 4] = w.buf[n - 4] == '0' ? '1' : '0'; /* a CRC digit */
    send_raw(fx, w.buf, (size_t)n);                 /* rejected: checksum */
    send_raw(fx, "$R 5 OK up=", 11);                /* cut short by the next '$' */
    ctl_send(fx, 'E', 7, "HB", "up", "5125", "level", "normal", NULL);
    send_raw(fx, "$R 1 OK \x07*0000\r\n", 16); /* rejected: control byte */
    ctl_send(fx, 'R', f.id, "OK", "limit.critical", "60.00", NULL);
    deliver(fx, 5);

    assert_true(c.done);
    assert_int_equal(c.error, 0);
    assert_string_equal(ctl_frame_get(&c.reply, "limit.critical"), "60.00");
    assert_int_equal(link_get_counters(fx->l)->frames_rejected, 3);
    assert_int_equal(link_get_state(fx->l), LINK_UP);
}

/* BOOT: the controller forgot the host; the request in flight fails and HELLO starts over. */
static void test_boot_rehello(void **state)
{
    struct fixture *fx = *state;
    struct ctl_frame f;
    struct completion c = {0}, queued = {0};
    struct ctl_field key = {"key", "limit.warning"};

    bring_up(fx);
    assert_int_equal(link_request(fx->l, "GET", &key, 1, 0, on_reply, &c), 0);
    assert_int_equal(link_request(fx->l, "GET", &key, 1, 0, on_reply, &queued), 0);
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "GET", &f);

    ctl_send(fx, 'E', 0, "BOOT", "fw", "2.4.2", "reason", "watchdog", NULL);
    deliver(fx, 1);
    assert_int_equal(link_get_state(fx->l), LINK_HANDSHAKE);
    assert_true(c.done);
    assert_int_equal(c.error, -ENOTCONN);
    assert_true(queued.done);
    assert_int_equal(queued.error, -ENOTCONN);
    assert_string_equal(fx->last_event, "BOOT");
    assert_string_equal(link_get_event(fx->l, 0)->frame.verb, "BOOT");

    expect_request(fx, "HELLO", &f);
    answer_hello(fx, f.id);
    assert_int_equal(link_get_state(fx->l), LINK_UP);
    expect_request(fx, "STATUS", &f);
}

/* The controller side goes away (pty master closed, as when coolsim unplugs): the link closes,
 * fails what was pending, and reopens the path once it points at a device again. */
static void test_unplug_and_reconnect(void **state)
{
    struct fixture *fx = *state;
    struct ctl_frame f;
    struct completion c = {0};
    struct ctl_field key = {"key", "limit.warning"};

    bring_up(fx);
    assert_int_equal(link_request(fx->l, "GET", &key, 1, 0, on_reply, &c), 0);
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "GET", &f);

    close(fx->master);
    fx->master = -1;
    unlink(fx->path);
    for (int i = 0; i < 200 && link_get_state(fx->l) != LINK_CLOSED; i++) {
        struct pollfd p = {.fd = link_fd(fx->l), .events = link_poll_events(fx->l)};
        int k = poll(&p, 1, 10);
        link_process(fx->l, fx->now, k > 0 ? p.revents : 0);
    }
    assert_int_equal(link_get_state(fx->l), LINK_CLOSED);
    assert_int_equal(link_fd(fx->l), -1);
    assert_true(c.done);
    assert_int_equal(c.error, -ENOTCONN);
    assert_non_null(link_get_error(fx->l));
    assert_int_equal(link_poll_timeout_ms(fx->l, fx->now), 1000);

    /* Still gone a second later: the error names the path, the link keeps trying. */
    fx->now += SEC;
    link_process(fx->l, fx->now, 0);
    assert_int_equal(link_get_state(fx->l), LINK_CLOSED);
    assert_non_null(strstr(link_get_error(fx->l), fx->path));

    new_pty(fx);
    fx->now += SEC / 2;
    link_process(fx->l, fx->now, 0);
    assert_int_equal(link_get_state(fx->l), LINK_CLOSED);
    fx->now += SEC / 2;
    link_process(fx->l, fx->now, 0);
    assert_int_equal(link_get_state(fx->l), LINK_HANDSHAKE);
    assert_int_equal(link_get_counters(fx->l)->reconnects, 1);
    expect_request(fx, "HELLO", &f);
    answer_hello(fx, f.id);
    assert_int_equal(link_get_state(fx->l), LINK_UP);
    /* The telemetry of before is kept until the next STATUS replaces it. */
    assert_non_null(link_get_telemetry(fx->l));
}

/* A second link on the same device (a second coold) fails clearly, and works once the first is
 * gone. */
static void test_exclusive_open(void **state)
{
    struct fixture *fx = *state;
    struct link *second = NULL;
    struct errmsg e = {""};

    start_link(fx);
    assert_int_equal(link_new(&fx->cfg, NULL, NULL, &second, &e), 0);
    assert_int_equal(link_start(second, fx->now, &e), -EBUSY);
    assert_non_null(strstr(e.text, "device busy: owned by another process"));
    assert_int_equal(link_get_state(second), LINK_CLOSED);

    link_free(fx->l);
    fx->l = NULL;
    assert_int_equal(link_start(second, fx->now, &e), 0);
    assert_int_equal(link_get_state(second), LINK_HANDSHAKE);
    link_free(second);
}

/* HELLO refused for the protocol version: closed, a clear error, retried slowly. */
static void test_hello_proto_refused(void **state)
{
    struct fixture *fx = *state;
    struct ctl_frame f;

    start_link(fx);
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "HELLO", &f);
    ctl_send(fx, 'R', f.id, "ERR", "code", "proto", "msg", "speaks 2", NULL);
    deliver(fx, 1);
    assert_int_equal(link_get_state(fx->l), LINK_CLOSED);
    assert_non_null(strstr(link_get_error(fx->l), "does not speak protocol version 1: speaks 2"));
    assert_int_equal(link_poll_timeout_ms(fx->l, fx->now), 60000);
    fx->now += 60 * SEC;
    link_process(fx->l, fx->now, 0);
    assert_int_equal(link_get_state(fx->l), LINK_HANDSHAKE);
    expect_request(fx, "HELLO", &f);
}

/* A controller that answers HELLO with a newer version than the host asked for is not trusted. */
static void test_hello_newer_version_answered(void **state)
{
    struct fixture *fx = *state;
    struct ctl_frame f;

    start_link(fx);
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "HELLO", &f);
    ctl_send(fx, 'R', f.id, "OK", "proto", "2", "pumps", "2", "sensors", "a,b", NULL);
    deliver(fx, 1);
    assert_int_equal(link_get_state(fx->l), LINK_CLOSED);
    assert_null(link_get_info(fx->l));
    assert_non_null(strstr(link_get_error(fx->l), "protocol version 2"));
}

/* Unnamed sensors still get a label, their STATUS key. */
static void test_unnamed_sensor(void **state)
{
    struct fixture *fx = *state;
    struct ctl_frame f;

    start_link(fx);
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "HELLO", &f);
    ctl_send(fx, 'R', f.id, "OK", "proto", "1", "pumps", "1", "sensors", "inlet,,tank", NULL);
    deliver(fx, 1);
    const struct link_info *info = link_get_info(fx->l);
    assert_non_null(info);
    assert_int_equal(info->n_sensors, 3);
    assert_string_equal(info->sensors[1], "t2");
    assert_string_equal(info->sensors[2], "tank");
}

struct requeue {
    struct completion first, second;
    int second_rc;
};

static void requeue_on_cancel(struct link *l, int error, const struct ctl_frame *reply,
                              void *userdata)
{
    struct requeue *q = userdata;
    on_reply(l, error, reply, &q->first);
    struct ctl_field key = {"key", "limit.critical"};
    q->second_rc = link_request(l, "GET", &key, 1, 0, on_reply, &q->second);
}

/* link_free() completes every pending request with -ECANCELED; a completion that queues a new
 * request then is refused, so no request is ever left without its one completion. */
static void test_request_queued_while_freeing_is_refused(void **state)
{
    struct fixture *fx = *state;
    struct requeue q = {.second_rc = 1};
    struct ctl_field key = {"key", "limit.warning"};

    bring_up(fx);
    assert_int_equal(link_request(fx->l, "GET", &key, 1, 0, requeue_on_cancel, &q), 0);
    link_free(fx->l);
    fx->l = NULL;
    assert_true(q.first.done);
    assert_int_equal(q.first.error, -ECANCELED);
    assert_int_equal(q.second_rc, -ENOTCONN);
    assert_false(q.second.done);
}

/* HELLO unanswered: retried, then again every reopen interval, the link never UP meanwhile. */
static void test_hello_unanswered(void **state)
{
    struct fixture *fx = *state;
    struct ctl_frame f;

    start_link(fx);
    link_process(fx->l, fx->now, 0);
    for (int i = 0; i < 3; i++) {
        expect_request(fx, "HELLO", &f);
        fx->now += SEC;
        link_process(fx->l, fx->now, 0);
    }
    host_silent(fx);
    assert_int_equal(link_get_state(fx->l), LINK_HANDSHAKE);
    assert_non_null(strstr(link_get_error(fx->l), "did not answer HELLO"));
    fx->now += SEC;
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "HELLO", &f);
    answer_hello(fx, f.id);
    assert_int_equal(link_get_state(fx->l), LINK_UP);
}

/* HALT with the priority flag goes before queued requests and before a due STATUS poll. */
static void test_priority(void **state)
{
    struct fixture *fx = *state;
    struct ctl_frame f;
    struct completion a = {0}, b = {0}, halt = {0};
    struct ctl_field key = {"key", "limit.warning"};
    struct ctl_field within = {"within", "60"};

    bring_up(fx);
    assert_int_equal(link_request(fx->l, "GET", &key, 1, 0, on_reply, &a), 0);
    link_process(fx->l, fx->now, 0);
    expect_request(fx, "GET", &f);
    assert_int_equal(link_request(fx->l, "GET", &key, 1, 0, on_reply, &b), 0);
    assert_int_equal(
        link_request(fx->l, "HALT", &within, 1, LINK_REQUEST_PRIORITY, on_reply, &halt), 0);
    fx->now += SEC; /* the STATUS poll is due as well */
    ctl_send(fx, 'R', f.id, "OK", "limit.warning", "45.00", NULL);
    deliver(fx, 1);
    assert_true(a.done);
    expect_request(fx, "HALT", &f);
    assert_string_equal(ctl_frame_get(&f, "within"), "60");
    ctl_send(fx, 'R', f.id, "OK", "cut_in", "60", NULL);
    deliver(fx, 1);
    assert_true(halt.done);
    assert_string_equal(ctl_frame_get(&halt.reply, "cut_in"), "60");
    expect_request(fx, "STATUS", &f);
    answer_status(fx, f.id, "normal", "-");
    expect_request(fx, "GET", &f);
    assert_false(b.done);
}

static void test_request_refusals(void **state)
{
    struct fixture *fx = *state;
    struct completion c[20] = {0};
    struct ctl_field key = {"key", "limit.warning"};
    struct ctl_field bad_key = {"Key", "x"};
    struct ctl_field bad_value = {"key", "a*b"};
    char big[300];

    start_link(fx);
    assert_int_equal(link_request(fx->l, "GET", &key, 1, 0, on_reply, &c[0]), -ENOTCONN);
    link_free(fx->l);
    fx->l = NULL;

    fx->cfg.queue_max = 2;
    bring_up(fx);
    assert_int_equal(link_request(fx->l, "GET", &bad_key, 1, 0, on_reply, &c[0]), -EINVAL);
    assert_int_equal(link_request(fx->l, "GET", &bad_value, 1, 0, on_reply, &c[0]), -EINVAL);
    assert_int_equal(link_request(fx->l, "get", NULL, 0, 0, on_reply, &c[0]), -EINVAL);
    memset(big, 'x', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    struct ctl_field huge = {"key", big};
    assert_int_equal(link_request(fx->l, "GET", &huge, 1, 0, on_reply, &c[0]), -E2BIG);
    assert_int_equal(link_request(fx->l, "GET", &key, 1, 0, on_reply, &c[1]), 0);
    assert_int_equal(link_request(fx->l, "GET", &key, 1, 0, on_reply, &c[2]), 0);
    assert_int_equal(link_request(fx->l, "GET", &key, 1, 0, on_reply, &c[3]), -EAGAIN);
    assert_false(c[0].done);
    /* HALT is never refused because readers filled the queue. */
    struct ctl_field within = {"within", "60"};
    assert_int_equal(
        link_request(fx->l, "HALT", &within, 1, LINK_REQUEST_PRIORITY, on_reply, &c[4]), 0);

    /* Freeing the link completes what is pending, once each. */
    link_free(fx->l);
    fx->l = NULL;
    assert_true(c[1].done);
    assert_int_equal(c[1].error, -ECANCELED);
    assert_true(c[2].done);
    assert_false(c[3].done);
    assert_true(c[4].done);
}

/* A device that does not exist yet is no error at start: the link waits for it. */
static void test_missing_device_at_start(void **state)
{
    struct fixture *fx = *state;
    struct ctl_frame f;
    struct errmsg e = {""};

    unlink(fx->path);
    assert_int_equal(link_new(&fx->cfg, &callbacks, fx, &fx->l, &e), 0);
    assert_int_equal(link_start(fx->l, fx->now, &e), 0);
    assert_int_equal(link_get_state(fx->l), LINK_CLOSED);
    assert_non_null(strstr(link_get_error(fx->l), "No such file"));
    close(fx->master);
    new_pty(fx);
    fx->now += SEC;
    link_process(fx->l, fx->now, 0);
    assert_int_equal(link_get_state(fx->l), LINK_HANDSHAKE);
    assert_int_equal(link_get_counters(fx->l)->reconnects, 0);
    expect_request(fx, "HELLO", &f);
}

static void test_bad_config(void **state)
{
    struct fixture *fx = *state;
    struct link *l = NULL;
    struct errmsg e = {""};
    struct link_config c = fx->cfg;

    c.baud = 12345;
    assert_int_equal(link_new(&c, NULL, NULL, &l, &e), -EINVAL);
    assert_non_null(strstr(e.text, "12345"));
    c = fx->cfg;
    c.host = "my node";
    assert_int_equal(link_new(&c, NULL, NULL, &l, &e), 0); /* quoted: spaces are fine */
    link_free(l);
    c.host = "bad*host";
    assert_int_equal(link_new(&c, NULL, NULL, &l, &e), -EINVAL);
    assert_non_null(strstr(e.text, "bad*host"));
    c = fx->cfg;
    c.device = NULL;
    assert_int_equal(link_new(&c, NULL, NULL, &l, &e), -EINVAL);
    assert_string_equal(link_state_to_string(LINK_HANDSHAKE), "handshake");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_handshake, setup, teardown),
        cmocka_unit_test_setup_teardown(test_status_and_alarm, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ping_when_idle, setup, teardown),
        cmocka_unit_test_setup_teardown(test_retries_then_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stale_reply_ignored, setup, teardown),
        cmocka_unit_test_setup_teardown(test_garbage_between_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_boot_rehello, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unplug_and_reconnect, setup, teardown),
        cmocka_unit_test_setup_teardown(test_exclusive_open, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hello_proto_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hello_unanswered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hello_newer_version_answered, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unnamed_sensor, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_queued_while_freeing_is_refused, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_priority, setup, teardown),
        cmocka_unit_test_setup_teardown(test_request_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_device_at_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_config, setup, teardown),
    };
    return test_run_cases(tests);
}
