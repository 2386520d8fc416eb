/* The simulated controller firmware: frames in, frames out, protection in between. */
#include "sim-controller.h"

#include <stdio.h>
#include <string.h>

#include "lib/log.h"
#include "lib/macro.h"

#define HB_PERIOD_MS    1000
#define ALARM_REPEAT_MS 1000
#define WHY_MAX         200

static const char *const verb_names[_SIM_VERB_MAX] = {
    [SIM_VERB_HELLO] = "HELLO", [SIM_VERB_PING] = "PING", [SIM_VERB_STATUS] = "STATUS",
    [SIM_VERB_GET] = "GET",     [SIM_VERB_SET] = "SET",   [SIM_VERB_HALT] = "HALT",
    [SIM_VERB_OTHER] = "other",
};

const char *sim_verb_name(enum sim_verb v)
{
    return (unsigned)v < _SIM_VERB_MAX ? verb_names[v] : "other";
}

static void send_frame(struct sim_ctl *c, struct ctl_writer *w)
{
    int n = ctl_writer_finish(w);
    if (n < 0) {
        /* Every frame built here fits by construction; a failure is a bug, not a condition. */
        log_debug("coolsim: dropping a frame that does not build: %s", ctl_strerror(n));
        return;
    }
    log_debug("coolsim: -> %.*s", n > 2 ? n - 2 : n, w->buf);
    c->ops.send(w->buf, (size_t)n, c->userdata);
}

static void begin_event(struct sim_ctl *c, struct ctl_writer *w, const char *verb)
{
    /* uint16_t arithmetic makes the sequence wrap from 65535 to 0, as §2 asks. */
    ctl_writer_begin(w, CTL_KIND_EVENT, c->event_seq++, verb);
}

static void add_cut_in(struct ctl_writer *w, long cut_in)
{
    if (cut_in < 0)
        ctl_writer_add(w, "cut_in", "-");
    else
        ctl_writer_add_int(w, "cut_in", cut_in);
}

unsigned long sim_ctl_uptime(const struct sim_ctl *c, uint64_t now_ms)
{
    return (unsigned long)((now_ms - c->boot_ms) / 1000);
}

static void boot(struct sim_ctl *c, const char *reason, uint64_t now_ms)
{
    struct ctl_writer w;

    sim_protect_init(&c->protect);
    ctl_reader_init(&c->reader);
    c->rebooting = false;
    c->boot_ms = now_ms;
    c->next_hb_ms = now_ms + HB_PERIOD_MS;
    c->next_alarm_ms = now_ms;
    c->event_seq = 0;
    c->host_seen_ms = now_ms;
    c->host_lost = false;
    c->eeprom_busy_until_ms = now_ms;
    c->stats.boots++;

    begin_event(c, &w, "BOOT");
    ctl_writer_add(&w, "fw", SIM_FW_VERSION);
    ctl_writer_add(&w, "reason", reason);
    send_frame(c, &w);
}

void sim_ctl_init(struct sim_ctl *c, const struct ctl_settings *s, const struct sim_ctl_ops *ops,
                  void *userdata, uint64_t now_ms)
{
    memset(c, 0, sizeof(*c));
    c->settings = *s;
    c->ops = *ops;
    c->userdata = userdata;
    c->reading.n_pumps = s->n_pumps;
    boot(c, "power", now_ms);
}

void sim_ctl_reboot(struct sim_ctl *c, unsigned silent_ms, uint64_t now_ms)
{
    if (c->stats.cut)
        return;
    c->rebooting = true;
    c->reboot_until_ms = now_ms + silent_ms;
}

void sim_ctl_set_eeprom_write_ms(struct sim_ctl *c, unsigned ms)
{
    c->eeprom_write_ms = ms;
}

int sim_ctl_duty(const struct sim_ctl *c, unsigned pump)
{
    if (c->rebooting)
        return pump < c->settings.n_pumps ? 100 : 0;
    return sim_protect_duty(&c->protect, &c->settings, pump);
}

/* ---- requests ---- */

/* Copies a message for a person into a protocol value: quotes, '$' and '*' cannot be carried
 * (there are no escapes), so they become apostrophes. */
static void add_msg(struct ctl_writer *w, const char *msg)
{
    char buf[WHY_MAX];
    size_t i;

    for (i = 0; msg[i] && i < sizeof(buf) - 1; i++) {
        unsigned char ch = (unsigned char)msg[i];
        buf[i] = (ch == '"' || ch == '$' || ch == '*' || ch < 0x20 || ch > 0x7e) ? '\'' : msg[i];
    }
    buf[i] = '\0';
    ctl_writer_add(w, "msg", buf);
}

static void reply_err(struct sim_ctl *c, struct ctl_writer *w, uint16_t id, const char *code,
                      const char *msg)
{
    ctl_writer_begin(w, CTL_KIND_REPLY, id, "ERR");
    ctl_writer_add(w, "code", code);
    if (msg)
        add_msg(w, msg);
    c->stats.errors++;
}

static void do_hello(struct sim_ctl *c, const struct ctl_frame *f, struct ctl_writer *w,
                     uint64_t now_ms)
{
    const char *proto = ctl_frame_get(f, "proto");
    long v;

    if (!proto || ctl_parse_long(proto, 0, 65535, &v) < 0) {
        reply_err(c, w, f->id, "badframe", "HELLO needs proto=<version>");
        return;
    }
    if (v < CTL_PROTO_VERSION) {
        reply_err(c, w, f->id, "proto", "this controller speaks protocol 1 only");
        return;
    }

    ctl_writer_begin(w, CTL_KIND_REPLY, f->id, "OK");
    ctl_writer_add_int(w, "proto", CTL_PROTO_VERSION);
    ctl_writer_add(w, "fw", SIM_FW_VERSION);
    ctl_writer_add(w, "model", SIM_FW_MODEL);
    ctl_writer_add(w, "serial", SIM_FW_SERIAL);
    ctl_writer_add_int(w, "pumps", (long)c->settings.n_pumps);
    ctl_writer_add(w, "sensors", SIM_SENSOR_NAMES);
    ctl_writer_add(w, "caps", SIM_FW_CAPS);
    ctl_writer_add_int(w, "hb", HB_PERIOD_MS / 1000);
}

static void do_ping(struct sim_ctl *c, const struct ctl_frame *f, struct ctl_writer *w,
                    uint64_t now_ms)
{
    ctl_writer_begin(w, CTL_KIND_REPLY, f->id, "OK");
    ctl_writer_add_int(w, "up", (long)sim_ctl_uptime(c, now_ms));
}

static void do_status(struct sim_ctl *c, const struct ctl_frame *f, struct ctl_writer *w,
                      uint64_t now_ms)
{
    const struct sim_reading *r = &c->reading;
    const struct sim_protect *p = &c->protect;
    char key[24];

    ctl_writer_begin(w, CTL_KIND_REPLY, f->id, "OK");
    ctl_writer_add_int(w, "up", (long)sim_ctl_uptime(c, now_ms));
    ctl_writer_add(w, "level", sim_level_name(p->level));
    ctl_writer_add(w, "reason", sim_reason_name(p->reason));
    add_cut_in(w, sim_protect_cut_in(p, now_ms));
    ctl_writer_add_int(w, "halt", p->halt);
    ctl_writer_add(w, "host", c->host_lost ? "lost" : "ok");
    ctl_writer_add_centi(w, "flow", r->flow_centi);
    for (unsigned i = 0; i < r->n_sensors; i++) {
        snprintf(key, sizeof(key), "t%u", i + 1);
        if (r->sensor_ok[i])
            ctl_writer_add_centi(w, key, r->temp_centi[i]);
        else
            ctl_writer_add(w, key, "fault");
    }
    for (unsigned i = 0; i < c->settings.n_pumps; i++) {
        char reading[24];
        snprintf(key, sizeof(key), "p%u", i + 1);
        if (ctl_pump_format(i < r->n_pumps ? r->rpm[i] : 0, sim_ctl_duty(c, i), reading,
                            sizeof(reading)) < 0)
            snprintf(reading, sizeof(reading), "0/0");
        ctl_writer_add(w, key, reading);
    }
}

static void do_get(struct sim_ctl *c, const struct ctl_frame *f, struct ctl_writer *w,
                   uint64_t now_ms)
{
    const char *key = ctl_frame_get(f, "key");
    char value[CTL_FRAME_MAX], why[WHY_MAX];

    if (!key) {
        reply_err(c, w, f->id, "badframe", "GET needs key=<setting>");
        return;
    }
    int r = ctl_settings_get(&c->settings, key, value, sizeof(value));
    if (r == -CTL_E_BADKEY) {
        snprintf(why, sizeof(why), "no setting '%s'", key);
        reply_err(c, w, f->id, "badkey", why);
        return;
    }
    if (r < 0) {
        reply_err(c, w, f->id, "badframe", ctl_strerror(r));
        return;
    }
    ctl_writer_begin(w, CTL_KIND_REPLY, f->id, "OK");
    ctl_writer_add(w, key, value);
}

/* Builds the SET reply: every written setting as stored. Returns 0 or -CTL_E_OVERFLOW when the
 * echo would not fit one frame, which the caller checks before storing anything. */
static int set_reply(struct ctl_writer *w, const struct ctl_settings *s, const struct ctl_frame *f)
{
    char value[CTL_FRAME_MAX];

    ctl_writer_begin(w, CTL_KIND_REPLY, f->id, "OK");
    for (unsigned i = 0; i < f->n_fields; i++) {
        int r = ctl_settings_get(s, f->fields[i].key, value, sizeof(value));
        if (r < 0)
            return r;
        ctl_writer_add(w, f->fields[i].key, value);
    }
    /* A dry run of the finish tells whether the frame fits, without losing the writer. */
    struct ctl_writer probe = *w;
    int n = ctl_writer_finish(&probe);
    return n < 0 ? n : 0;
}

static void do_set(struct sim_ctl *c, const struct ctl_frame *f, struct ctl_writer *w,
                   uint64_t now_ms)
{
    struct ctl_settings next = c->settings;
    char why[WHY_MAX] = "";
    struct errmsg e = {""};

    if (f->n_fields == 0) {
        reply_err(c, w, f->id, "badframe", "SET needs at least one <setting>=<value>");
        return;
    }
    if (now_ms < c->eeprom_busy_until_ms) {
        reply_err(c, w, f->id, "busy", "EEPROM write in progress");
        return;
    }
    int r = ctl_settings_apply(&next, f->fields, f->n_fields, why, sizeof(why));
    if (r == -CTL_E_BADKEY) {
        reply_err(c, w, f->id, "badkey", why);
        return;
    }
    if (r < 0) {
        reply_err(c, w, f->id, "badvalue", why[0] ? why : ctl_strerror(r));
        return;
    }
    if (set_reply(w, &next, f) < 0) {
        reply_err(c, w, f->id, "badvalue",
                  "the reply would not fit one frame; set fewer settings at once");
        return;
    }
    if (c->ops.save) {
        r = c->ops.save(&next, c->userdata, &e);
        if (r < 0) {
            snprintf(why, sizeof(why), "EEPROM write failed: %.150s", e.text);
            reply_err(c, w, f->id, "busy", why);
            return;
        }
    }
    c->settings = next;
    c->eeprom_busy_until_ms = now_ms + c->eeprom_write_ms;
}

static void do_halt(struct sim_ctl *c, const struct ctl_frame *f, struct ctl_writer *w,
                    uint64_t now_ms)
{
    const char *within = ctl_frame_get(f, "within");
    long v;

    if (!within || ctl_parse_long(within, 0, 65535, &v) < 0) {
        reply_err(c, w, f->id, "badframe", "HALT needs within=<seconds>");
        return;
    }
    if (!c->stats.halt) {
        c->stats.halt = true;
        c->stats.halt_ms = now_ms;
    }
    long cut_in = sim_protect_halt(&c->protect, &c->settings.limits, (unsigned long)v, now_ms);
    ctl_writer_begin(w, CTL_KIND_REPLY, f->id, "OK");
    add_cut_in(w, cut_in);
}

static const struct {
    enum sim_verb verb;
    void (*handle)(struct sim_ctl *c, const struct ctl_frame *f, struct ctl_writer *w,
                   uint64_t now_ms);
} handlers[] = {
    {SIM_VERB_HELLO, do_hello}, {SIM_VERB_PING, do_ping}, {SIM_VERB_STATUS, do_status},
    {SIM_VERB_GET, do_get},     {SIM_VERB_SET, do_set},   {SIM_VERB_HALT, do_halt},
};

static void handle_request(struct sim_ctl *c, const struct ctl_frame *f, uint64_t now_ms)
{
    struct ctl_writer w;
    char why[64];

    size_t i;

    for (i = 0; i < ELEMENTSOF(handlers); i++)
        if (strcmp(f->verb, verb_names[handlers[i].verb]) == 0)
            break;
    if (i < ELEMENTSOF(handlers)) {
        c->stats.requests[handlers[i].verb]++;
        handlers[i].handle(c, f, &w, now_ms);
    } else {
        c->stats.requests[SIM_VERB_OTHER]++;
        snprintf(why, sizeof(why), "unknown verb '%.40s'", f->verb);
        reply_err(c, &w, f->id, "badverb", why);
    }
    send_frame(c, &w);
    /* Marked seen only after the reply, so that the first request of a host that was counted
     * lost learns so from STATUS (host=lost). */
    c->host_seen_ms = now_ms;
    c->host_lost = false;
}

void sim_ctl_feed(struct sim_ctl *c, const void *data, size_t n, uint64_t now_ms)
{
    const uint8_t *bytes = data;
    struct ctl_frame f;

    /* A rebooting controller's UART is not listening, and a cut ends the conversation. */
    if (c->rebooting || c->stats.cut)
        return;
    for (size_t i = 0; i < n; i++) {
        int r = ctl_reader_push(&c->reader, bytes[i], &f);
        if (r < 0) {
            c->stats.rejected++;
            log_debug("coolsim: rejected a frame: %s", ctl_strerror(r));
        } else if (r > 0) {
            c->stats.frames++;
            /* Replies and events are not for the controller; only requests get answers. */
            if (f.kind == CTL_KIND_REQUEST)
                handle_request(c, &f, now_ms);
        }
    }
}

/* ---- periodic work ---- */

static void send_alarm(struct sim_ctl *c, uint64_t now_ms)
{
    const struct sim_protect *p = &c->protect;
    struct ctl_writer w;

    begin_event(c, &w, "ALARM");
    ctl_writer_add(&w, "level", sim_level_name(p->level));
    ctl_writer_add(&w, "reason", sim_reason_name(p->reason));
    if (p->pump)
        ctl_writer_add_int(&w, "pump", p->pump);
    if (p->sensor)
        ctl_writer_add_int(&w, "sensor", p->sensor);
    if (p->have_temp)
        ctl_writer_add_centi(&w, "temp", p->temp_centi);
    add_cut_in(&w, sim_protect_cut_in(p, now_ms));
    send_frame(c, &w);
    c->stats.alarms++;
    c->next_alarm_ms = now_ms + ALARM_REPEAT_MS;
}

static void send_hb(struct sim_ctl *c, uint64_t now_ms)
{
    struct ctl_writer w;

    begin_event(c, &w, "HB");
    ctl_writer_add_int(&w, "up", (long)sim_ctl_uptime(c, now_ms));
    ctl_writer_add(&w, "level", sim_level_name(c->protect.level));
    send_frame(c, &w);
    /* Catch up without a burst if the caller was late (a stopped process, a slow tick). */
    c->next_hb_ms += HB_PERIOD_MS;
    if (c->next_hb_ms <= now_ms)
        c->next_hb_ms = now_ms + HB_PERIOD_MS;
}

static void cut_power(struct sim_ctl *c, uint64_t now_ms)
{
    struct ctl_writer w;

    begin_event(c, &w, "POWER");
    ctl_writer_add(&w, "action", "cut");
    ctl_writer_add_int(&w, "orderly", c->protect.halt);
    send_frame(c, &w);
    c->stats.cut = true;
    c->stats.cut_orderly = c->protect.halt;
    c->stats.cut_ms = now_ms;
}

static void track_host(struct sim_ctl *c, uint64_t now_ms)
{
    uint64_t timeout_ms = (uint64_t)c->settings.host_timeout_s * 1000;

    if (!c->host_lost && now_ms - c->host_seen_ms >= timeout_ms) {
        c->host_lost = true;
        c->stats.host_lost++;
    }
}

static void note_extremes(struct sim_ctl *c)
{
    const struct sim_protect *p = &c->protect;

    if (p->level > c->stats.max_level)
        c->stats.max_level = p->level;
    if (p->have_temp && (!c->stats.have_max_temp || p->temp_centi > c->stats.max_temp_centi)) {
        c->stats.max_temp_centi = p->temp_centi;
        c->stats.have_max_temp = true;
    }
}

static void finish_reboot(struct sim_ctl *c, uint64_t now_ms)
{
    struct ctl_settings s;
    struct errmsg e = {""};

    /* A controller that cannot read its EEPROM keeps running on what it has; the host sees the
     * settings through GET either way. */
    if (c->ops.load && c->ops.load(&s, c->userdata, &e) >= 0 && s.n_pumps == c->settings.n_pumps)
        c->settings = s;
    boot(c, "watchdog", now_ms);
}

int sim_ctl_tick(struct sim_ctl *c, const struct sim_reading *r, uint64_t now_ms)
{
    if (c->stats.cut)
        return 0;
    c->reading = *r;
    if (c->rebooting) {
        if (now_ms < c->reboot_until_ms)
            return 0;
        finish_reboot(c, now_ms);
    }
    track_host(c, now_ms);

    int flags = sim_protect_update(&c->protect, &c->settings.limits, r, now_ms);
    note_extremes(c);
    if ((flags & SIM_PROTECT_CHANGED) ||
        (c->protect.level >= SIM_LEVEL_PRECRITICAL && now_ms >= c->next_alarm_ms))
        send_alarm(c, now_ms);
    if (now_ms >= c->next_hb_ms)
        send_hb(c, now_ms);
    if (flags & SIM_PROTECT_CUT) {
        cut_power(c, now_ms);
        return 1;
    }
    return 0;
}
