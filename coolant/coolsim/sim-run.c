/* The simulator's event loop: one thread, poll() on the pty master and a signalfd, and a tick
 * every TICK_MS that advances the model, runs the controller and plays the timeline.
 *
 * Everything the daemon sees on the line (heartbeats, cut delays, timeouts, the timeline) runs
 * on the real monotonic clock, pumps spinning up and down included; --speed only makes the
 * tank's temperatures move faster (sim-model.h). */
#include "lib/clock.h"
#include "sim-run.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/macro.h"
#include "sim-controller.h"
#include "sim-eeprom.h"
#include "sim-line.h"
#include "sim-noise.h"

#define TICK_MS    50
#define SETTLE_S   7200 /* simulated seconds to reach the steady state before the run */
#define LINGER_MS  300  /* after the cut, let the daemon read POWER before the line dies */
#define READ_CHUNK 512

struct run {
    const struct sim_run_config *cfg;
    struct sim_model model;
    struct sim_ctl ctl;
    struct sim_line line;
    struct sim_timeline timeline;
    struct sim_rng line_rng; /* garbage, kept apart from the sensor noise */
    struct sim_rx_noise rx_noise;
    unsigned garbage_ms;
    uint64_t next_garbage_ms;
    uint64_t start_ms;
    uint64_t last_tick_ms;
    bool host_listening;
    const char *end; /* set when the run is over */
};

static void send_to_line(const char *frame, size_t len, void *userdata)
{
    struct run *run = userdata;
    sim_line_write(&run->line, frame, len);
}

static int save_settings(const struct ctl_settings *s, void *userdata, struct errmsg *e)
{
    struct run *run = userdata;
    int r = sim_eeprom_save(run->cfg->eeprom, s, e);
    if (r >= 0)
        log_info("settings written to '%s'", run->cfg->eeprom);
    return r;
}

static int load_settings(struct ctl_settings *ret, void *userdata, struct errmsg *e)
{
    struct run *run = userdata;
    return sim_eeprom_load(run->cfg->eeprom, run->model.params.n_pumps, ret, e);
}

/* The tank has been running before coolsim starts: settle it under the pump curves first. */
static int settle_duty(const struct sim_reading *r, unsigned pump, void *userdata)
{
    const struct ctl_settings *s = userdata;
    long t;

    if (!sim_reading_hottest(r, &t) || t >= s->limits.warning_centi)
        return 100;
    return ctl_curve_duty(&s->curve[pump], t);
}

static int load_initial_settings(const struct sim_run_config *cfg, struct ctl_settings *ret,
                                 struct errmsg *e)
{
    if (!cfg->eeprom) {
        ctl_settings_defaults(ret, cfg->model.n_pumps);
        return 0;
    }
    int r = sim_eeprom_open(cfg->eeprom, cfg->model.n_pumps, ret, e);
    if (r == SIM_EEPROM_RESET)
        log_warning("EEPROM image corrupt, factory defaults written over it: %s", e->text);
    else if (r == SIM_EEPROM_DEFAULTS)
        log_info("no EEPROM image at '%s' yet: factory defaults", cfg->eeprom);
    else if (r == SIM_EEPROM_LOADED)
        log_info("settings loaded from '%s'", cfg->eeprom);
    return r < 0 ? r : 0;
}

static unsigned action_pump(const struct run *run, int arg)
{
    return arg == SIM_ARG_LAST_PUMP ? run->model.params.n_pumps - 1 : (unsigned)(arg - 1);
}

static int apply_action(struct run *run, const struct sim_action *a, uint64_t now, struct errmsg *e)
{
    bool pump = a->kind == SIM_ACT_PUMP_FAIL || a->kind == SIM_ACT_PUMP_RECOVER;

    log_info("scenario %s: %s %d", run->cfg->scenario->name, sim_action_name(a->kind),
             pump ? (int)action_pump(run, a->arg) + 1 : a->arg);
    switch (a->kind) {
    case SIM_ACT_PUMP_FAIL:
    case SIM_ACT_PUMP_RECOVER:
        sim_model_fail_pump(&run->model, action_pump(run, a->arg), a->kind == SIM_ACT_PUMP_FAIL);
        break;
    case SIM_ACT_FLOW_RESTRICT:
        sim_model_restrict_flow(&run->model, a->arg / 100.0);
        break;
    case SIM_ACT_SENSOR_FAULT:
    case SIM_ACT_SENSOR_RECOVER:
        sim_model_fail_sensor(&run->model, (unsigned)(a->arg - 1), a->kind == SIM_ACT_SENSOR_FAULT);
        break;
    case SIM_ACT_AMBIENT:
        sim_model_set_ambient(&run->model, a->arg);
        break;
    case SIM_ACT_UNPLUG:
        sim_line_unplug(&run->line);
        break;
    case SIM_ACT_REPLUG: {
        int r = sim_line_replug(&run->line, e);
        if (r >= 0)
            log_info("line back as %s", run->line.slave);
        return r;
    }
    case SIM_ACT_REBOOT:
        sim_ctl_reboot(&run->ctl, (unsigned)a->arg, now);
        break;
    case SIM_ACT_GARBAGE:
        run->garbage_ms = (unsigned)a->arg;
        run->next_garbage_ms = now + run->garbage_ms;
        break;
    case SIM_ACT_RX_CORRUPT:
        run->rx_noise.every = (unsigned)a->arg;
        break;
    case SIM_ACT_EEPROM_SLOW:
        sim_ctl_set_eeprom_write_ms(&run->ctl, (unsigned)a->arg);
        break;
    default:
        break;
    }
    return 0;
}

static void inject_garbage(struct run *run, uint64_t now)
{
    char burst[SIM_NOISE_MAX];

    if (run->garbage_ms == 0 || now < run->next_garbage_ms)
        return;
    size_t n = sim_noise_burst(&run->line_rng, burst, NULL);
    sim_line_write(&run->line, burst, n);
    /* Irregular spacing: between half and one and a half times the mean. */
    run->next_garbage_ms =
        now + run->garbage_ms / 2 + sim_rng_below(&run->line_rng, run->garbage_ms + 1);
}

static void note_changes(struct run *run, enum sim_level level, enum sim_reason reason,
                         bool listening, unsigned boots)
{
    const struct sim_protect *p = &run->ctl.protect;

    if (run->ctl.stats.boots != boots)
        log_info("controller rebooted: BOOT reason=watchdog, uptime from 0");
    if (p->level != level || p->reason != reason)
        log_info("level %s reason %s%s", sim_level_name(p->level), sim_reason_name(p->reason),
                 p->cut_scheduled ? " (power cut scheduled)" : "");
    if (listening != run->host_listening)
        log_info("host %s the line", run->host_listening ? "opened" : "closed");
}

/* One tick: the model advances by the real time since the last one. */
static void tick(struct run *run, uint64_t now)
{
    struct sim_reading r;
    enum sim_level level = run->ctl.protect.level;
    enum sim_reason reason = run->ctl.protect.reason;
    bool listening = run->host_listening;
    unsigned boots = run->ctl.stats.boots;

    run->host_listening = sim_line_check(&run->line);
    sim_model_step(&run->model, (double)(now - run->last_tick_ms) / 1000.0);
    run->last_tick_ms = now;
    sim_model_read(&run->model, &r);
    int cut = sim_ctl_tick(&run->ctl, &r, now);
    for (unsigned i = 0; i < run->model.params.n_pumps; i++)
        sim_model_set_duty(&run->model, i, sim_ctl_duty(&run->ctl, i));
    note_changes(run, level, reason, listening, boots);
    if (cut) {
        log_notice("power cut (%s)",
                   run->ctl.stats.cut_orderly ? "orderly, after HALT" : "the host never said HALT");
        run->end = "power_cut";
        return;
    }
    inject_garbage(run, now);
}

static void receive(struct run *run, uint64_t now)
{
    uint8_t buf[READ_CHUNK];

    for (;;) {
        ssize_t n = sim_line_read(&run->line, buf, sizeof(buf));
        if (n <= 0) {
            if (n < 0)
                log_warning_errno((int)n, "reading the line failed");
            return;
        }
        sim_rx_noise_apply(&run->rx_noise, &run->line_rng, buf, (size_t)n);
        sim_ctl_feed(&run->ctl, buf, (size_t)n, now);
    }
}

static int wait_events(struct run *run, int sfd, uint64_t now)
{
    struct pollfd p[2] = {{.fd = sfd, .events = POLLIN}, {.fd = -1}};
    uint64_t next = run->last_tick_ms + TICK_MS;
    int timeout = next > now ? (int)(next - now) : 0;

    /* A hung-up master reports POLLHUP at once, every time: leave it out and look again at the
     * next tick, or the loop would spin until the daemon opens the line. */
    if (run->line.fd >= 0 && !run->line.hup)
        p[1] = (struct pollfd){.fd = run->line.fd, .events = POLLIN};
    if (poll(p, 2, timeout) < 0 && errno != EINTR)
        return negative_errno();
    if (p[0].revents & POLLIN) {
        struct signalfd_siginfo si;
        if (read(sfd, &si, sizeof(si)) == sizeof(si))
            log_info("signal %s: ending the run", strsignal((int)si.ssi_signo));
        run->end = "signal";
    }
    if (p[1].revents & POLLIN)
        receive(run, clock_now_msec());
    if (p[1].revents & POLLHUP)
        run->line.hup = true;
    return 0;
}

static int loop(struct run *run, int sfd, struct errmsg *e)
{
    const struct sim_action *a;

    while (!run->end) {
        uint64_t now = clock_now_msec();
        uint64_t elapsed = now - run->start_ms;
        if (run->cfg->duration_s > 0 && (double)elapsed >= run->cfg->duration_s * 1000.0) {
            run->end = "duration";
            break;
        }
        while ((a = sim_timeline_next(&run->timeline, elapsed))) {
            int r = apply_action(run, a, now, e);
            if (r < 0)
                return r;
        }
        if (now >= run->last_tick_ms + TICK_MS) {
            tick(run, now);
            continue;
        }
        int r = wait_events(run, sfd, now);
        if (r < 0)
            return errmsg_set(e, r, "poll failed");
    }
    return 0;
}

static int open_signals(struct errmsg *e)
{
    sigset_t mask;

    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
        return errmsg_set(e, negative_errno(), "cannot block signals: %m");
    int fd = signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "cannot create a signalfd: %m");
    return fd;
}

static int run_setup(struct run *run, struct errmsg *e)
{
    struct ctl_settings s;
    const struct sim_ctl_ops ops = {
        .send = send_to_line,
        .save = run->cfg->eeprom ? save_settings : NULL,
        .load = run->cfg->eeprom ? load_settings : NULL,
    };

    int r = load_initial_settings(run->cfg, &s, e);
    if (r < 0)
        return r;
    sim_model_init(&run->model, &run->cfg->model);
    run->model.params.speed = run->cfg->speed;
    sim_model_settle(&run->model, SETTLE_S, settle_duty, &s);
    sim_rng_seed(&run->line_rng, run->cfg->model.seed ^ 0x6c696e65ULL);
    r = sim_line_open(&run->line, run->cfg->link, e);
    if (r < 0)
        return r;
    run->start_ms = run->last_tick_ms = clock_now_msec();
    sim_ctl_init(&run->ctl, &s, &ops, run, run->start_ms);
    sim_timeline_start(&run->timeline, run->cfg->scenario);
    log_info("scenario %s on '%s' (%s), speed %g", run->cfg->scenario->name, run->cfg->link,
             run->line.slave, run->cfg->speed);
    return 0;
}

int sim_run(const struct sim_run_config *cfg, struct sim_report *ret, struct errmsg *e)
{
    struct run run = {.cfg = cfg};

    _cleanup_close_ int sfd = open_signals(e);
    if (sfd < 0)
        return sfd;
    int r = run_setup(&run, e);
    if (r >= 0)
        r = loop(&run, sfd, e);
    if (r >= 0 && strcmp(run.end, "power_cut") == 0)
        (void)poll(NULL, 0, LINGER_MS);
    uint64_t end = clock_now_msec();
    if (r >= 0) {
        sim_report_fill(ret, &run.ctl, cfg->scenario->name, run.end, run.start_ms, end);
        ret->bytes_dropped = run.line.bytes_dropped;
    }
    sim_line_close(&run.line);
    return r;
}
