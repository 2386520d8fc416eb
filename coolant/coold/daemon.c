/* coold's life cycle and main loop: one thread owns the serial link and the safety state machine;
 * HTTP threads and the shutdown thread reach them through daemon_call() under the lock. */
#include "daemon-run.h"

#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>

#include "api.h"
#include "lib/clock.h"
#include "daemon-internal.h"
#include "lib/log.h"
#include "lib/macro.h"

#include "lib/service.h"

/* Creates the parent directory of path (one level, like /run/coold) if it is missing. */
static int ensure_parent_dir(const char *path, mode_t mode, struct errmsg *e)
{
    _cleanup_free_ char *copy = strdup(path);
    if (!copy)
        return errmsg_set(e, -ENOMEM, "out of memory");
    const char *dir = dirname(copy);
    if (mkdir(dir, mode) < 0 && errno != EEXIST)
        return errmsg_set(e, negative_errno(), "cannot create directory '%s': %m", dir);
    return 0;
}

static int setup_admin_group(struct daemon *d, struct errmsg *e)
{
    int r = roles_init(&d->roles, d->cfg.admin_group, e);
    if (r == 1)
        /* Not fatal: writes stay root-only, which is the safe side. */
        log_warning("[control] admin_group '%s' does not exist; only root may change settings",
                    d->cfg.admin_group);
    return r < 0 ? r : 0;
}

static int setup_signals(struct daemon *d, struct errmsg *e)
{
    d->signal_fd = service_signals_open();
    if (d->signal_fd < 0)
        return errmsg_set(e, d->signal_fd, "cannot create a signalfd: %s", strerror(-d->signal_fd));
    d->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (d->wake_fd < 0)
        return errmsg_set(e, negative_errno(), "cannot create an eventfd: %m");
    return 0;
}

static int setup_link(struct daemon *d, struct errmsg *e)
{
    struct link_config lc;
    link_config_defaults(&lc);
    lc.device = d->cfg.device;
    lc.baud = d->cfg.baud;
    lc.poll_interval_usec = (uint64_t)(d->cfg.poll_interval_s * 1e6);
    int r = link_new(&lc, &daemon_link_callbacks, d, &d->link, e);
    if (r < 0)
        return r;

    struct safety_config sc;
    safety_config_defaults(&sc);
    sc.stale_after_usec = (uint64_t)(d->cfg.stale_after_s * 1e6);
    sc.dead_after_usec = (uint64_t)(d->cfg.dead_after_s * 1e6);
    sc.drill = d->cfg.drill;
    uint64_t now = clock_now_usec();
    r = safety_new(&sc, now, &d->safety);
    if (r < 0)
        return errmsg_set(e, r, "cannot create the safety state machine");
    return link_start(d->link, now, e);
}

static int setup_shutdown(struct daemon *d, struct errmsg *e)
{
    struct shutdown_config sc = {
        .command = d->cfg.shutdown_command,
        .hooks_dir = d->cfg.hooks_dir,
        .docker_socket = d->cfg.docker_socket,
        .gpuqd_socket = d->cfg.gpuqd_socket,
        .container_grace_s = d->cfg.container_grace_s,
        .halt_within_s = d->cfg.halt_within_s,
        .halt_reserve_s = d->cfg.halt_reserve_s,
        .drill = d->cfg.drill,
        .send_halt = daemon_send_halt,
        .log = daemon_shutdown_log,
        .event = daemon_shutdown_event,
        .userdata = d,
    };
    int r = shutdown_new(&sc, &d->shutdown);
    return r < 0 ? errmsg_set(e, r, "cannot set up the shutdown stages") : 0;
}

static int setup_servers(struct daemon *d, struct errmsg *e)
{
    /* Watching the coolant matters more than auditing: without a writable audit log coold
     * still runs, and refuses every change (api.c) until it is restarted with one. */
    int r = ensure_parent_dir(d->cfg.audit_log, 0750, e);
    if (r >= 0)
        r = audit_open(d->cfg.audit_log, &d->audit, e);
    if (r < 0)
        log_error("%s; settings changes and drills are refused", e->text);
    if ((r = ensure_parent_dir(d->cfg.control_socket, 0755, e)) < 0)
        return r;
    /* Mode 0666: every local user may connect; what each may do is decided by its uid. */
    r = http_server_new_unix(d->cfg.control_socket, 0666, api_handle, d, &d->api_server, e);
    if (r < 0)
        return errmsg_prefix(e, r, "[control] socket");
    r = http_server_new_tcp(d->cfg.metrics_listen, api_handle_metrics, d, &d->metrics_server, e);
    return r < 0 ? errmsg_prefix(e, r, "[metrics] listen") : 0;
}

int daemon_new(const struct coold_config *cfg, struct daemon **ret, struct errmsg *e)
{
    struct daemon *d = calloc(1, sizeof(*d));
    if (!d)
        return errmsg_set(e, -ENOMEM, "out of memory");
    d->cfg = *cfg;
    d->signal_fd = d->wake_fd = -1;
    pthread_mutex_init(&d->lock, NULL);
    pthread_cond_init(&d->call_done, NULL);
    d->events = eventlog_new();
    int r = d->events ? 0 : errmsg_set(e, -ENOMEM, "out of memory");
    if (r < 0 || (r = setup_signals(d, e)) < 0 || (r = setup_admin_group(d, e)) < 0 ||
        (r = setup_link(d, e)) < 0 || (r = setup_shutdown(d, e)) < 0 ||
        (r = setup_servers(d, e)) < 0) {
        daemon_free(d);
        return r;
    }
    *ret = d;
    return 0;
}

void daemon_free(struct daemon *d)
{
    if (!d)
        return;
    /* The link goes first: freeing it completes every pending daemon_call(), so HTTP handlers
     * waiting on the controller return and the servers can stop. */
    pthread_mutex_lock(&d->lock);
    link_free(TAKE_PTR(d->link));
    pthread_mutex_unlock(&d->lock);
    http_server_free(d->api_server);
    http_server_free(d->metrics_server);
    shutdown_free(d->shutdown);
    safety_free(d->safety);
    audit_close(d->audit);
    roles_done(&d->roles);
    eventlog_free(d->events);
    closep(&d->signal_fd);
    closep(&d->wake_fd);
    pthread_cond_destroy(&d->call_done);
    pthread_mutex_destroy(&d->lock);
    coold_config_done(&d->cfg);
    free(d);
}

void daemon_view(struct daemon *d, struct coold_view *v)
{
    memset(v, 0, sizeof(*v));
    struct timespec wall;
    clock_gettime(CLOCK_REALTIME, &wall);
    pthread_mutex_lock(&d->lock);
    uint64_t now = clock_now_usec();
    v->link_state = d->link ? link_state_to_string(link_get_state(d->link)) : "closed";
    v->controller_up = d->link && link_get_state(d->link) == LINK_UP && !d->decision.lost;
    v->stale = d->decision.stale;
    v->last_success_unix_s = d->last_success_unix_s;
    v->last_frame_age_s = -1;
    if (d->link) {
        const struct link_counters *c = link_get_counters(d->link);
        v->frames_rejected = c->frames_rejected;
        v->reconnects = c->reconnects;
        if (c->has_last_frame)
            v->last_frame_age_s = (double)(now - c->last_frame_at) / 1e6;
        const struct link_info *info = link_get_info(d->link);
        if (info) {
            v->has_info = true;
            snprintf(v->fw, sizeof(v->fw), "%s", info->fw);
            snprintf(v->model, sizeof(v->model), "%s", info->model);
            snprintf(v->serial, sizeof(v->serial), "%s", info->serial);
            v->n_pumps = info->pumps;
            v->n_sensors = info->n_sensors;
            for (unsigned i = 0; i < info->n_sensors && i < COOL_SENSORS_MAX; i++)
                snprintf(v->sensors[i], sizeof(v->sensors[i]), "%s", info->sensors[i]);
        }
        const struct cool_telemetry *t = link_get_telemetry(d->link);
        if (t)
            v->tel = *t;
    }
    v->cut_in_s = -1;
    if (v->tel.has_cut_in && v->tel.level >= COOL_LEVEL_PRECRITICAL) {
        double left = v->tel.cut_in_s - (double)(now - v->tel.level_at) / 1e6;
        v->cut_in_s = left > 0 ? left : 0;
    }
    v->safety = safety_get_state(d->safety);
    double since_ago = (double)(now - safety_get_since(d->safety)) / 1e6;
    v->safety_since_unix_s = (double)wall.tv_sec + wall.tv_nsec / 1e9 - since_ago;
    pthread_mutex_unlock(&d->lock);

    struct shutdown_state st;
    shutdown_get_state(d->shutdown, &st);
    v->shutdown_stage = (int)st.stage;
    v->shutdown_stage_name = shutdown_stage_to_string(st.stage);
    v->drill = st.drill || d->cfg.drill;
}

/* Builds the poll set and timeout for the next sleep; called with the lock held. */
static int prepare_poll(struct daemon *d, struct pollfd fds[3], uint64_t now)
{
    fds[0] = (struct pollfd){.fd = d->signal_fd, .events = POLLIN};
    fds[1] = (struct pollfd){.fd = d->wake_fd, .events = POLLIN};
    fds[2] = (struct pollfd){.fd = link_fd(d->link), .events = link_poll_events(d->link)};
    /* At most a second, so the watchdog is fed; sooner when the link or the safety state
     * machine has timed work (UINT64_MAX: the state machine has none). */
    uint64_t timeout = 1000;
    int link_ms = link_poll_timeout_ms(d->link, now);
    if (link_ms >= 0 && (uint64_t)link_ms < timeout)
        timeout = (uint64_t)link_ms;
    uint64_t next = safety_next_step(d->safety, now);
    if (next != UINT64_MAX) {
        uint64_t safety_ms = next <= now ? 0 : (next - now + 999) / 1000;
        if (safety_ms < timeout)
            timeout = safety_ms;
    }
    return (int)timeout;
}

/* Returns true when a terminating signal arrived. */
static bool read_signals(struct daemon *d)
{
    enum service_signal sig = service_signals_read(d->signal_fd);
    if (sig == SERVICE_SIGNAL_RELOAD)
        log_info("SIGHUP ignored: restart coold to reload its configuration");
    return sig == SERVICE_SIGNAL_STOP;
}

/* How long a stop request waits for an emergency shutdown under way: its HALT and command need
 * the main loop to drive the serial line. The controller cuts power well within this anyway. */
#define FINISH_SHUTDOWN_USEC (120 * 1000000ull)

/* After SIGTERM: true once nothing needs the main loop any more. */
static bool may_stop(struct daemon *d, uint64_t stop_by)
{
    struct shutdown_state st;
    shutdown_get_state(d->shutdown, &st);
    if (!st.latched || st.stage == SHUTDOWN_STAGE_DONE)
        return true;
    if (!d->stop_noted)
        log_warning("Stop requested during an emergency shutdown: finishing it first");
    d->stop_noted = true;
    return clock_now_usec() >= stop_by;
}

int daemon_run(struct daemon *d)
{
    uint64_t stop_by = 0;
    struct service_watchdog wd;
    service_watchdog_init(&wd);
    service_ready("Watching the cooling controller");
    log_info("coold %s running: controller %s, metrics %s, control %s%s", GPUNODE_VERSION,
             d->cfg.device, d->cfg.metrics_listen, d->cfg.control_socket,
             d->cfg.drill ? " (drill mode: nothing will be stopped)" : "");
    for (;;) {
        struct pollfd fds[3];
        pthread_mutex_lock(&d->lock);
        uint64_t before = clock_now_usec();
        int timeout = prepare_poll(d, fds, before);
        pthread_mutex_unlock(&d->lock);
        int wd_ms = service_watchdog_timeout_ms(&wd, before);
        if (wd_ms >= 0 && (timeout < 0 || wd_ms < timeout))
            timeout = wd_ms;
        if (poll(fds, fds[2].fd >= 0 ? 3 : 2, timeout) < 0 && errno != EINTR)
            return log_error_errno(negative_errno(), "poll failed");
        if ((fds[0].revents & POLLIN) && read_signals(d) && !stop_by) {
            stop_by = clock_now_usec() + FINISH_SHUTDOWN_USEC;
            shutdown_cancel_drill(d->shutdown);
        }
        if (stop_by && may_stop(d, stop_by))
            break;
        uint64_t drain;
        while (read(d->wake_fd, &drain, sizeof(drain)) > 0)
            ;
        pthread_mutex_lock(&d->lock);
        uint64_t now = clock_now_usec();
        link_process(d->link, now, fds[2].fd >= 0 ? fds[2].revents : 0);
        daemon_step_safety(d, now);
        pthread_mutex_unlock(&d->lock);
        service_watchdog_ping(&wd, now);
    }
    service_stopping();
    return 0;
}
