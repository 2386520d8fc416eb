/* The serial link to the cooling controller (link.h). */
#include "link.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/macro.h"

#define USEC_PER_SEC  1000000ULL
#define USEC_PER_MSEC 1000ULL
/* How much one link_process() reads at most, so that a babbling device cannot starve the loop. */
#define READ_BUDGET 65536

enum request_kind {
    REQUEST_USER,
    REQUEST_HELLO,
    REQUEST_STATUS,
    REQUEST_PING,
};

struct request {
    struct request *next;
    enum request_kind kind;
    bool priority;
    char verb[CTL_VERB_MAX + 1];
    unsigned n_fields;
    struct ctl_field fields[CTL_FIELDS_MAX]; /* point into store */
    char store[CTL_FRAME_MAX];
    link_reply_fn cb;
    void *userdata;
    unsigned tries; /* sends so far, the first one included */
};

struct link {
    struct link_config cfg;
    char *device;
    char *host;
    speed_t speed;
    struct link_callbacks cb;
    void *userdata;

    int fd;
    enum link_state state;
    bool opened_before;
    uint64_t reopen_at;
    uint64_t hello_at;
    char error[ERRMSG_MAX];

    struct ctl_reader reader;
    char out[CTL_FRAME_MAX + 1];
    size_t out_len, out_off;

    /* The request in flight: a user request, or `internal` for HELLO, STATUS and PING. */
    struct request *current;
    uint16_t current_id;
    uint64_t current_deadline;
    struct request internal;
    struct request *queue_head;
    unsigned queue_len;
    uint16_t next_id;
    uint64_t last_sent_at;
    uint64_t next_poll_at;

    bool has_info;
    struct link_info info;
    struct link_counters counters;
    struct cool_telemetry telemetry;

    struct link_event *events;
    size_t events_start, events_n;
};

static const char *const state_names[_LINK_STATE_MAX] = {
    [LINK_CLOSED] = "closed",
    [LINK_HANDSHAKE] = "handshake",
    [LINK_UP] = "up",
};

const char *link_state_to_string(enum link_state s)
{
    return (unsigned)s < _LINK_STATE_MAX ? state_names[s] : NULL;
}

void link_config_defaults(struct link_config *c)
{
    *c = (struct link_config){
        .baud = 115200,
        .poll_interval_usec = USEC_PER_SEC,
        .heartbeat_usec = USEC_PER_SEC,
        .reply_timeout_usec = USEC_PER_SEC,
        .retries = 2,
        .reopen_interval_usec = USEC_PER_SEC,
        .proto_retry_usec = 60 * USEC_PER_SEC,
        .queue_max = 16,
        .events_max = 256,
    };
}

static int baud_to_speed(unsigned baud, speed_t *ret)
{
    static const struct {
        unsigned baud;
        speed_t speed;
    } table[] = {
        {9600, B9600},     {19200, B19200},   {38400, B38400},   {57600, B57600},
        {115200, B115200}, {230400, B230400}, {460800, B460800}, {921600, B921600},
    };
    for (size_t i = 0; i < ELEMENTSOF(table); i++)
        if (table[i].baud == baud) {
            *ret = table[i].speed;
            return 0;
        }
    return -EINVAL;
}

static uint64_t wall_usec(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * USEC_PER_SEC + (uint64_t)ts.tv_nsec / 1000;
}

static void copy_string(char *buf, size_t size, const char *s)
{
    snprintf(buf, size, "%s", s ? s : "");
}

static int check_config(const struct link_config *c, const char *host, struct errmsg *e)
{
    struct ctl_writer w;
    speed_t speed;

    if (!c->device || !c->device[0])
        return errmsg_set(e, -EINVAL, "no controller device configured");
    if (baud_to_speed(c->baud, &speed) < 0)
        return errmsg_set(e, -EINVAL,
                          "baud rate %u not supported (9600, 19200, 38400, 57600, 115200, 230400, "
                          "460800 or 921600)",
                          c->baud);
    if (c->poll_interval_usec == 0 || c->heartbeat_usec == 0 || c->reply_timeout_usec == 0 ||
        c->reopen_interval_usec == 0 || c->proto_retry_usec == 0 || c->queue_max == 0)
        return errmsg_set(e, -EINVAL, "link intervals, timeouts and queue size must not be 0");
    ctl_writer_begin(&w, CTL_KIND_REQUEST, UINT16_MAX, "HELLO");
    ctl_writer_add_int(&w, "proto", CTL_PROTO_VERSION);
    ctl_writer_add(&w, "host", host);
    if (ctl_writer_finish(&w) < 0)
        return errmsg_set(e, -EINVAL, "host name '%s' cannot be sent in HELLO: %s", host,
                          ctl_strerror(w.err));
    return 0;
}

int link_new(const struct link_config *c, const struct link_callbacks *cb, void *userdata,
             struct link **ret, struct errmsg *e)
{
    char hostname[256] = "";
    const char *host = c->host;
    int r;

    if (!host) {
        if (gethostname(hostname, sizeof(hostname) - 1) < 0)
            return errmsg_set(e, negative_errno(), "gethostname: %s", strerror(errno));
        host = hostname;
    }
    r = check_config(c, host, e);
    if (r < 0)
        return r;

    _cleanup_free_ struct link *l = calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->cfg = *c;
    l->device = strdup(c->device);
    l->host = strdup(host);
    if (c->events_max > 0)
        l->events = calloc(c->events_max, sizeof(*l->events));
    if (!l->device || !l->host || (c->events_max > 0 && !l->events)) {
        free(l->device);
        free(l->host);
        free(l->events);
        return -ENOMEM;
    }
    l->cfg.device = l->device;
    l->cfg.host = l->host;
    (void)baud_to_speed(c->baud, &l->speed);
    if (cb)
        l->cb = *cb;
    l->userdata = userdata;
    l->fd = -1;
    l->state = LINK_CLOSED;
    l->next_id = 1;
    ctl_reader_init(&l->reader);
    *ret = TAKE_PTR(l);
    return 0;
}

/* Opens the device exclusively in raw mode. Returns the fd or -errno with a message. */
static int open_device(const struct link *l, struct errmsg *e)
{
    _cleanup_close_ int fd = open(l->device, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        int r = negative_errno();
        /* TIOCEXCL held by another process refuses the open itself (for everyone but root). */
        if (r == -EBUSY)
            return errmsg_set(e, r, "%s: device busy: owned by another process", l->device);
        return errmsg_set(e, r, "open %s: %s", l->device, strerror(-r));
    }
    /* flock, unlike TIOCEXCL, also keeps out a second coold running as root. */
    if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        int r = negative_errno();
        if (r == -EWOULDBLOCK)
            return errmsg_set(e, -EBUSY, "%s: device busy: owned by another process", l->device);
        return errmsg_set(e, r, "lock %s: %s", l->device, strerror(-r));
    }

    struct termios t;
    if (tcgetattr(fd, &t) < 0) {
        /* Not a tty (a test fifo, say): nothing to configure, and TIOCEXCL does not apply. */
        if (errno != ENOTTY && errno != EINVAL)
            return errmsg_set(e, negative_errno(), "%s: tcgetattr: %s", l->device, strerror(errno));
        return TAKE_FD(fd);
    }
    if (ioctl(fd, TIOCEXCL) < 0)
        return errmsg_set(e, negative_errno(), "%s: TIOCEXCL: %s", l->device, strerror(errno));
    cfmakeraw(&t);
    t.c_cflag |= CLOCAL | CREAD;
    t.c_cflag &= ~(CSTOPB | CRTSCTS);
    t.c_cc[VMIN] = 1;
    t.c_cc[VTIME] = 0;
    cfsetispeed(&t, l->speed);
    cfsetospeed(&t, l->speed);
    if (tcsetattr(fd, TCSANOW, &t) < 0)
        return errmsg_set(e, negative_errno(), "%s: tcsetattr: %s", l->device, strerror(errno));
    /* Whatever the controller said before we listened belongs to no request of ours. */
    (void)tcflush(fd, TCIFLUSH);
    return TAKE_FD(fd);
}

static void set_state(struct link *l, enum link_state s)
{
    enum link_state old = l->state;
    if (old == s)
        return;
    l->state = s;
    log_debug("controller link %s: %s -> %s", l->device, state_names[old], state_names[s]);
    if (l->cb.on_state_change)
        l->cb.on_state_change(l, old, s, l->userdata);
}

static void set_error(struct link *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void set_error(struct link *l, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(l->error, sizeof(l->error), fmt, ap);
    va_end(ap);
    log_debug("controller link %s: %s", l->device, l->error);
}

static void complete(struct link *l, struct request *req, int error, const struct ctl_frame *f)
{
    if (req->kind != REQUEST_USER)
        return;
    req->cb(l, error, f, req->userdata);
    free(req);
}

/* Fails the request in flight and every queued one. The list is taken out first: callbacks may
 * queue new requests (refused unless UP) while it is walked. */
static void fail_all(struct link *l, int error)
{
    struct request *cur = l->current, *q = l->queue_head;

    l->current = NULL;
    l->queue_head = NULL;
    l->queue_len = 0;
    if (cur)
        complete(l, cur, error, NULL);
    while (q) {
        struct request *next = q->next;
        complete(l, q, error, NULL);
        q = next;
    }
}

static void close_device(struct link *l, uint64_t now, uint64_t retry_after)
{
    if (l->fd >= 0) {
        /* TIOCEXCL outlives our fd while someone else holds the tty open. */
        (void)ioctl(l->fd, TIOCNXCL);
        close(l->fd);
        l->fd = -1;
    }
    ctl_reader_init(&l->reader);
    l->out_len = l->out_off = 0;
    l->reopen_at = now + retry_after;
    set_state(l, LINK_CLOSED);
    fail_all(l, -ENOTCONN);
}

static void hang_up(struct link *l, uint64_t now, const char *why)
{
    set_error(l, "%s: %s", l->device, why);
    close_device(l, now, l->cfg.reopen_interval_usec);
}

static int try_open(struct link *l, uint64_t now, struct errmsg *e)
{
    struct errmsg local;
    if (!e)
        e = &local;
    int fd = open_device(l, e);
    if (fd < 0) {
        set_error(l, "%s", e->text);
        l->reopen_at = now + l->cfg.reopen_interval_usec;
        return fd;
    }
    l->fd = fd;
    ctl_reader_init(&l->reader);
    if (l->opened_before)
        l->counters.reconnects++;
    l->opened_before = true;
    l->hello_at = now;
    set_state(l, LINK_HANDSHAKE);
    return 0;
}

int link_start(struct link *l, uint64_t now, struct errmsg *e)
{
    if (l->fd >= 0)
        return 0;
    int r = try_open(l, now, e);
    if (r == -EBUSY || r == -EACCES || r == -EPERM)
        return r;
    return 0;
}

void link_free(struct link *l)
{
    if (!l)
        return;
    /* Not UP any more, so that a completion callback below that queues a new request is refused
     * (-ENOTCONN) rather than accepted and then freed without its completion. No state-change
     * callback: the link is going away. */
    l->state = LINK_CLOSED;
    fail_all(l, -ECANCELED);
    if (l->fd >= 0) {
        (void)ioctl(l->fd, TIOCNXCL);
        close(l->fd);
    }
    free(l->events);
    free(l->device);
    free(l->host);
    free(l);
}

/* Writes what is left of the output buffer. Returns 0 (all written or the device is full) or
 * -errno when the device is gone. */
static int flush_out(struct link *l)
{
    while (l->out_off < l->out_len) {
        ssize_t n = write(l->fd, l->out + l->out_off, l->out_len - l->out_off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN)
                return 0;
            return negative_errno();
        }
        l->out_off += (size_t)n;
    }
    l->out_len = l->out_off = 0;
    return 0;
}

/* Sends (or resends, with a new id) the request and makes it the one in flight. */
static void send_request(struct link *l, struct request *req, uint64_t now)
{
    struct ctl_writer w;
    uint16_t id = l->next_id++;

    ctl_writer_begin(&w, CTL_KIND_REQUEST, id, req->verb);
    for (unsigned i = 0; i < req->n_fields; i++)
        ctl_writer_add(&w, req->fields[i].key, req->fields[i].value);
    int n = ctl_writer_finish(&w);
    if (n < 0) {
        /* Checked when queued; reaching this is a bug, but fail the request, not the link. */
        l->current = NULL;
        complete(l, req, -EINVAL, NULL);
        return;
    }
    /* A half-sent frame is abandoned: the controller drops it when the next '$' arrives. */
    memcpy(l->out, w.buf, (size_t)n);
    l->out_len = (size_t)n;
    l->out_off = 0;
    req->tries++;
    l->current = req;
    l->current_id = id;
    l->current_deadline = now + l->cfg.reply_timeout_usec;
    l->last_sent_at = now;
    int r = flush_out(l);
    if (r < 0)
        hang_up(l, now, strerror(-r));
}

static void send_internal(struct link *l, enum request_kind kind, uint64_t now)
{
    struct request *req = &l->internal;
    static const char *const verbs[] = {
        [REQUEST_HELLO] = "HELLO",
        [REQUEST_STATUS] = "STATUS",
        [REQUEST_PING] = "PING",
    };

    *req = (struct request){.kind = kind};
    copy_string(req->verb, sizeof(req->verb), verbs[kind]);
    if (kind == REQUEST_HELLO) {
        snprintf(req->store, sizeof(req->store), "%d", CTL_PROTO_VERSION);
        req->fields[0] = (struct ctl_field){"proto", req->store};
        req->fields[1] = (struct ctl_field){"host", l->host};
        req->n_fields = 2;
    }
    send_request(l, req, now);
}

/* Leaves UP (or restarts the handshake) and says HELLO at `hello_at`. */
static void restart_handshake(struct link *l, uint64_t hello_at)
{
    if (l->current && l->current->kind != REQUEST_USER)
        l->current = NULL;
    set_state(l, LINK_HANDSHAKE);
    fail_all(l, -ENOTCONN);
    l->hello_at = hello_at;
}

/* Sends the next request if none is in flight: HELLO while shaking hands; when UP a priority
 * request, a due STATUS poll, the queue, or a PING when nothing was sent for a while. */
static void pump(struct link *l, uint64_t now)
{
    if (l->fd < 0 || l->current)
        return;
    if (l->state == LINK_HANDSHAKE) {
        if (now >= l->hello_at)
            send_internal(l, REQUEST_HELLO, now);
        return;
    }
    if (l->state != LINK_UP)
        return;
    struct request *head = l->queue_head;
    if (head && (head->priority || now < l->next_poll_at)) {
        l->queue_head = head->next;
        l->queue_len--;
        send_request(l, head, now);
    } else if (now >= l->next_poll_at) {
        l->next_poll_at = now + l->cfg.poll_interval_usec;
        send_internal(l, REQUEST_STATUS, now);
    } else if (now - l->last_sent_at >= l->cfg.heartbeat_usec) {
        send_internal(l, REQUEST_PING, now);
    }
}

static void handle_timeout(struct link *l, uint64_t now)
{
    struct request *req = l->current;

    if (req->tries <= l->cfg.retries) {
        l->counters.retries++;
        send_request(l, req, now);
        return;
    }
    l->counters.timeouts++;
    l->current = NULL;
    set_error(l, "controller did not answer %s after %u tries", req->verb, req->tries);
    if (req->kind == REQUEST_HELLO) {
        l->hello_at = now + l->cfg.reopen_interval_usec;
        return;
    }
    complete(l, req, -ETIMEDOUT, NULL);
    /* A controller that does not answer is not UP; HELLO finds out when it is back. Callbacks
     * above may have closed the link or left UP already. */
    if (l->state == LINK_UP)
        restart_handshake(l, now);
}

static void push_event(struct link *l, const struct ctl_frame *f, uint64_t now)
{
    struct link_event *ev;

    if (l->cfg.events_max == 0)
        return;
    if (l->events_n < l->cfg.events_max) {
        ev = &l->events[(l->events_start + l->events_n) % l->cfg.events_max];
        l->events_n++;
    } else {
        ev = &l->events[l->events_start];
        l->events_start = (l->events_start + 1) % l->cfg.events_max;
    }
    ev->at = now;
    ev->wall_usec = wall_usec();
    ctl_frame_copy(&ev->frame, f);
}

/* Takes level, reason and cut_in from a STATUS reply or an ALARM event into *t. Returns 0, or
 * -EBADMSG when the level is missing or unknown (then *t is unchanged). */
static int take_level(struct cool_telemetry *t, const struct ctl_frame *f, uint64_t now)
{
    int level = cool_level_from_string(ctl_frame_get(f, "level"));
    const char *reason = ctl_frame_get(f, "reason");
    const char *cut = ctl_frame_get(f, "cut_in");
    long cut_s = 0;

    if (level < 0)
        return -EBADMSG;
    /* A cut we cannot read is treated as "now": it is better to shut down early than late. */
    bool has_cut = cut && strcmp(cut, "-") != 0;
    if (has_cut && ctl_parse_long(cut, 0, UINT_MAX, &cut_s) < 0)
        cut_s = 0;
    t->level = (enum cool_level)level;
    t->reason = cool_reason_from_string(reason ? reason : "none");
    copy_string(t->reason_text, sizeof(t->reason_text), reason ? reason : "none");
    t->has_cut_in = has_cut;
    t->cut_in_s = (unsigned)cut_s;
    t->level_at = now;
    return 0;
}

/* Counts the fields <prefix>1<suffix>, <prefix>2<suffix>, ... up to the first one missing. */
static unsigned count_numbered(const struct ctl_frame *f, const char *prefix, const char *suffix,
                               unsigned max)
{
    char key[CTL_KEY_MAX + 1];
    unsigned n = 0;
    while (n < max) {
        snprintf(key, sizeof(key), "%s%u%s", prefix, n + 1, suffix);
        if (!ctl_frame_get(f, key))
            break;
        n++;
    }
    return n;
}

static void take_sensors(struct link *l, struct cool_telemetry *t, const struct ctl_frame *f)
{
    char key[CTL_KEY_MAX + 1];

    t->n_temps = l->has_info ? l->info.n_sensors : count_numbered(f, "t", "", COOL_SENSORS_MAX);
    for (unsigned i = 0; i < t->n_temps; i++) {
        snprintf(key, sizeof(key), "t%u", i + 1);
        const char *v = ctl_frame_get(f, key);
        long c = 0;
        /* A missing or unreadable value is a sensor we cannot trust: report it as a fault. */
        bool ok = v && strcmp(v, "fault") != 0 && ctl_parse_centi(v, &c) == 0;
        t->temps[i] = (struct cool_temperature){.celsius_centi = ok ? c : 0, .fault = !ok};
    }
    t->n_pumps = l->has_info ? l->info.pumps : count_numbered(f, "p", "", COOL_PUMPS_MAX);
    for (unsigned i = 0; i < t->n_pumps; i++) {
        long rpm = -1;
        int duty = -1;
        snprintf(key, sizeof(key), "p%u", i + 1);
        /* An unreadable reading stays -1: shown as unknown rather than as a stopped pump. */
        if (ctl_pump_parse(ctl_frame_get(f, key), &rpm, &duty) < 0)
            rpm = duty = -1;
        t->pumps[i] = (struct cool_pump){.rpm = rpm, .duty = duty};
    }
}

static void take_status(struct link *l, const struct ctl_frame *f, uint64_t now)
{
    struct cool_telemetry t = l->telemetry;
    const char *v;
    long n;

    if (take_level(&t, f, now) < 0) {
        log_debug("controller link %s: STATUS reply without a valid level, ignored", l->device);
        return;
    }
    v = ctl_frame_get(f, "halt");
    t.halt = v && strcmp(v, "1") == 0;
    v = ctl_frame_get(f, "host");
    t.host_ok = !v || strcmp(v, "lost") != 0;
    v = ctl_frame_get(f, "flow");
    t.has_flow = v && ctl_parse_centi(v, &t.flow_centi) == 0;
    v = ctl_frame_get(f, "up");
    t.uptime_s = v && ctl_parse_long(v, 0, LONG_MAX, &n) == 0 ? (unsigned long)n : 0;
    take_sensors(l, &t, f);
    t.has_status = true;
    t.taken_at = now;
    l->telemetry = t;
    if (l->cb.on_telemetry)
        l->cb.on_telemetry(l, &l->telemetry, l->userdata);
}

static void take_info(struct link *l, const struct ctl_frame *f)
{
    struct link_info *i = &l->info;
    long n;

    *i = (struct link_info){0};
    const char *v = ctl_frame_get(f, "proto");
    i->proto = v && ctl_parse_long(v, 0, UINT16_MAX, &n) == 0 ? (unsigned)n : 0;
    copy_string(i->fw, sizeof(i->fw), ctl_frame_get(f, "fw"));
    copy_string(i->model, sizeof(i->model), ctl_frame_get(f, "model"));
    copy_string(i->serial, sizeof(i->serial), ctl_frame_get(f, "serial"));
    copy_string(i->caps, sizeof(i->caps), ctl_frame_get(f, "caps"));
    v = ctl_frame_get(f, "pumps");
    i->pumps = v && ctl_parse_long(v, 0, COOL_PUMPS_MAX, &n) == 0 ? (unsigned)n : 0;
    v = ctl_frame_get(f, "hb");
    i->hb_s = v && ctl_parse_long(v, 0, UINT16_MAX, &n) == 0 ? (unsigned)n : 0;

    v = ctl_frame_get(f, "sensors");
    while (v && *v && i->n_sensors < COOL_SENSORS_MAX) {
        size_t len = strcspn(v, ",");
        /* An unnamed sensor still needs a label for the metrics: call it by its STATUS key. */
        if (len == 0)
            snprintf(i->sensors[i->n_sensors], sizeof(i->sensors[0]), "t%u", i->n_sensors + 1);
        else
            snprintf(i->sensors[i->n_sensors], sizeof(i->sensors[0]), "%.*s", (int)len, v);
        i->n_sensors++;
        v += len;
        if (*v == ',')
            v++;
    }
    l->has_info = true;
}

static void hello_answered(struct link *l, const struct ctl_frame *f, uint64_t now)
{
    if (strcmp(f->verb, "OK") == 0) {
        take_info(l, f);
        /* A controller must answer with a version the host asked for; anything newer would be
         * read with the wrong rules. */
        if (l->info.proto > CTL_PROTO_VERSION) {
            l->has_info = false;
            set_error(l, "controller answered HELLO with protocol version %u; coold speaks %d",
                      l->info.proto, CTL_PROTO_VERSION);
            close_device(l, now, l->cfg.proto_retry_usec);
            return;
        }
        l->error[0] = '\0';
        l->next_poll_at = now; /* telemetry at once */
        set_state(l, LINK_UP);
        return;
    }
    const char *code = ctl_frame_get(f, "code");
    const char *msg = ctl_frame_get(f, "msg");
    if (code && strcmp(code, "proto") == 0) {
        set_error(l, "controller does not speak protocol version %d%s%s", CTL_PROTO_VERSION,
                  msg ? ": " : "", msg ? msg : "");
        close_device(l, now, l->cfg.proto_retry_usec);
        return;
    }
    set_error(l, "controller refused HELLO: code=%s%s%s", code ? code : "?", msg ? ": " : "",
              msg ? msg : "");
    l->hello_at = now + l->cfg.reopen_interval_usec;
}

static void handle_reply(struct link *l, const struct ctl_frame *f, uint64_t now)
{
    struct request *req = l->current;

    /* Only the id of the latest try counts (§4): an answer to an earlier try is stray. */
    if (!req || f->id != l->current_id) {
        l->counters.stray_replies++;
        log_debug("controller link %s: reply id %u matches no request, ignored", l->device, f->id);
        return;
    }
    l->current = NULL;
    switch (req->kind) {
    case REQUEST_HELLO:
        hello_answered(l, f, now);
        break;
    case REQUEST_STATUS:
        if (strcmp(f->verb, "OK") == 0)
            take_status(l, f, now);
        break;
    case REQUEST_PING:
        break;
    case REQUEST_USER:
        complete(l, req, 0, f);
        break;
    }
}

static void handle_event(struct link *l, const struct ctl_frame *f, uint64_t now)
{
    if (strcmp(f->verb, "HB") != 0)
        push_event(l, f, now);
    if (strcmp(f->verb, "BOOT") == 0) {
        /* The controller forgot us and any request in flight: start over. */
        set_error(l, "controller rebooted (reason %s)",
                  ctl_frame_get(f, "reason") ? ctl_frame_get(f, "reason") : "?");
        restart_handshake(l, now);
    } else if (strcmp(f->verb, "ALARM") == 0) {
        if (take_level(&l->telemetry, f, now) == 0 && l->cb.on_telemetry)
            l->cb.on_telemetry(l, &l->telemetry, l->userdata);
    }
    if (l->cb.on_event)
        l->cb.on_event(l, f, l->userdata);
}

static void handle_frame(struct link *l, const struct ctl_frame *f, uint64_t now)
{
    l->counters.frames_ok++;
    l->counters.has_last_frame = true;
    l->counters.last_frame_at = now;
    l->counters.last_frame_wall_usec = wall_usec();

    if (f->kind == CTL_KIND_REPLY)
        handle_reply(l, f, now);
    else if (f->kind == CTL_KIND_EVENT)
        handle_event(l, f, now);
    else
        log_debug("controller link %s: request frame from the controller ignored", l->device);
}

static void read_input(struct link *l, uint64_t now, short revents)
{
    char buf[512];
    size_t budget = READ_BUDGET;
    struct ctl_frame f;

    while (l->fd >= 0 && budget > 0) {
        ssize_t n = read(l->fd, buf, sizeof(buf));
        if (n == 0) {
            hang_up(l, now, "end of file");
            return;
        }
        if (n < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                hang_up(l, now, strerror(errno));
            else if (revents & (POLLHUP | POLLERR))
                hang_up(l, now, "hangup");
            return;
        }
        budget -= (size_t)n < budget ? (size_t)n : budget;
        /* Stop at a close: the rest of the buffer belongs to a device we no longer hold. */
        for (ssize_t i = 0; i < n && l->fd >= 0; i++) {
            int r = ctl_reader_push(&l->reader, (uint8_t)buf[i], &f);
            if (r > 0)
                handle_frame(l, &f, now);
            else if (r < 0) {
                l->counters.frames_rejected++;
                log_debug("controller link %s: frame rejected: %s", l->device, ctl_strerror(r));
            }
        }
    }
}

void link_process(struct link *l, uint64_t now, short revents)
{
    if (l->fd >= 0 && (revents & POLLNVAL)) {
        hang_up(l, now, "fd no longer valid");
        revents = 0;
    }
    if (l->fd >= 0 && (revents & POLLOUT)) {
        int r = flush_out(l);
        if (r < 0)
            hang_up(l, now, strerror(-r));
    }
    if (l->fd >= 0 && (revents & (POLLIN | POLLHUP | POLLERR)))
        read_input(l, now, revents);
    if (l->fd >= 0 && l->current && now >= l->current_deadline)
        handle_timeout(l, now);
    if (l->fd < 0 && now >= l->reopen_at)
        (void)try_open(l, now, NULL);
    pump(l, now);
}

int link_fd(const struct link *l)
{
    return l->fd;
}

short link_poll_events(const struct link *l)
{
    if (l->fd < 0)
        return 0;
    return POLLIN | (l->out_off < l->out_len ? POLLOUT : 0);
}

int link_poll_timeout_ms(const struct link *l, uint64_t now)
{
    uint64_t due;

    if (l->fd < 0)
        due = l->reopen_at;
    else if (l->current)
        due = l->current_deadline;
    else if (l->state == LINK_HANDSHAKE)
        due = l->hello_at;
    else if (l->queue_head)
        due = now;
    else {
        due = l->last_sent_at + l->cfg.heartbeat_usec;
        if (l->next_poll_at < due)
            due = l->next_poll_at;
    }
    if (due <= now)
        return 0;
    uint64_t ms = (due - now + USEC_PER_MSEC - 1) / USEC_PER_MSEC;
    return ms > INT_MAX ? INT_MAX : (int)ms;
}

/* Checks that the request can be written (with the longest id). Returns 0, -EINVAL or -E2BIG. */
static int check_request(const char *verb, const struct ctl_field *fields, unsigned n)
{
    struct ctl_writer w;

    if (n > CTL_FIELDS_MAX)
        return -E2BIG;
    ctl_writer_begin(&w, CTL_KIND_REQUEST, UINT16_MAX, verb);
    for (unsigned i = 0; i < n; i++)
        ctl_writer_add(&w, fields[i].key, fields[i].value);
    int r = ctl_writer_finish(&w);
    if (r == -CTL_E_OVERFLOW || r == -CTL_E_TOOMANY)
        return -E2BIG;
    return r < 0 ? -EINVAL : 0;
}

int link_request(struct link *l, const char *verb, const struct ctl_field *fields, unsigned n,
                 unsigned flags, link_reply_fn cb, void *userdata)
{
    if (!cb)
        return -EINVAL;
    int r = check_request(verb, fields, n);
    if (r < 0)
        return r;
    if (l->state != LINK_UP)
        return -ENOTCONN;
    /* The cap protects against floods of ordinary requests; a priority request (HALT) must
     * never be refused because readers filled the queue. */
    if (l->queue_len >= l->cfg.queue_max && !(flags & LINK_REQUEST_PRIORITY))
        return -EAGAIN;

    struct request *req = calloc(1, sizeof(*req));
    if (!req)
        return -ENOMEM;
    req->kind = REQUEST_USER;
    req->priority = flags & LINK_REQUEST_PRIORITY;
    req->cb = cb;
    req->userdata = userdata;
    copy_string(req->verb, sizeof(req->verb), verb);
    /* The frame fits CTL_FRAME_MAX, so keys and values with their NULs fit the store. */
    size_t off = 0;
    for (unsigned i = 0; i < n; i++) {
        size_t kl = strlen(fields[i].key) + 1, vl = strlen(fields[i].value) + 1;
        memcpy(req->store + off, fields[i].key, kl);
        memcpy(req->store + off + kl, fields[i].value, vl);
        req->fields[i] = (struct ctl_field){req->store + off, req->store + off + kl};
        off += kl + vl;
    }
    req->n_fields = n;

    /* Priority requests go after earlier priority ones, before everything else. */
    struct request **p = &l->queue_head;
    while (*p && (!req->priority || (*p)->priority))
        p = &(*p)->next;
    req->next = *p;
    *p = req;
    l->queue_len++;
    return 0;
}

enum link_state link_get_state(const struct link *l)
{
    return l->state;
}

const struct link_info *link_get_info(const struct link *l)
{
    return l->has_info ? &l->info : NULL;
}

const struct link_counters *link_get_counters(const struct link *l)
{
    return &l->counters;
}

const struct cool_telemetry *link_get_telemetry(const struct link *l)
{
    return l->telemetry.has_status ? &l->telemetry : NULL;
}

const char *link_get_error(const struct link *l)
{
    return l->state != LINK_UP && l->error[0] ? l->error : NULL;
}

size_t link_count_events(const struct link *l)
{
    return l->events_n;
}

const struct link_event *link_get_event(const struct link *l, size_t i)
{
    if (i >= l->events_n)
        return NULL;
    return &l->events[(l->events_start + i) % l->cfg.events_max];
}
