/* gpuqd's main loop: a scheduling pass whenever something changed, the timers of running jobs,
 * the ends of runs (each supervisor's pidfd), and the signals that stop the daemon. */
#include <errno.h>
#include <math.h>
#include <poll.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpuq/gpuqd/daemon.h"
#include "gpuq/gpuqd/gpuqd.h"
#include "lib/clock.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/service.h"

/* Housekeeping at least this often (fair-share accounting, a missed wake-up). */
#define TICK_S               10.0
#define PURGE_EVERY_S        3600.0
#define PASS_MIN_INTERVAL_MS 10

struct watch {
    struct pollfd *fds;
    uint64_t *ids; /* the job of fds[i], i >= 2 */
    size_t n, cap;
};

static int watch_add(struct watch *w, int fd, uint64_t id)
{
    if (w->n == w->cap) {
        size_t cap = w->cap ? 2 * w->cap : 16;
        struct pollfd *f = realloc(w->fds, cap * sizeof(*f));
        if (!f)
            return -ENOMEM;
        w->fds = f;
        uint64_t *ids = realloc(w->ids, cap * sizeof(*ids));
        if (!ids)
            return -ENOMEM;
        w->ids = ids;
        w->cap = cap;
    }
    w->fds[w->n] = (struct pollfd){.fd = fd, .events = POLLIN};
    w->ids[w->n++] = id;
    return 0;
}

/* One round of work under the lock; returns how long the loop may sleep (ms). A burst of
 * changes (a thousand releases, a script's submits) gets one pass per PASS_MIN_INTERVAL_MS
 * rather than one each, as Slurm's sched_min_interval does. */
static int work(struct gpuqd *d, struct watch *w, int signal_fd)
{
    pthread_mutex_lock(&d->lock);
    double now = clock_wall_sec();
    uint64_t mono = clock_now_msec();
    runs_timers(d, now); /* time limits first: what they stop frees capacity for the pass */
    uint64_t since = mono - d->last_pass_msec;
    double next = now + (double)(PASS_MIN_INTERVAL_MS - since) / 1000;
    if (since >= PASS_MIN_INTERVAL_MS) {
        next = schedule_pass(d, now);
        d->last_pass_msec = mono;
    }
    /* Again, for the deadlines the pass set (the grace of the jobs it preempted). */
    double timers = runs_timers(d, now);
    jobs_prune(d);
    if (now - d->last_purge >= PURGE_EVERY_S) {
        d->last_purge = now;
        jobs_purge(d, now);
    }
    if (timers < next)
        next = timers;
    w->n = 0;
    watch_add(w, signal_fd, 0);
    watch_add(w, d->wake_fd, 0);
    for (size_t i = 0; i < d->n_jobs; i++)
        if (d->jobs[i]->pidfd >= 0)
            watch_add(w, d->jobs[i]->pidfd, d->jobs[i]->j.id);
    pthread_mutex_unlock(&d->lock);
    if (next > now + TICK_S)
        next = now + TICK_S;
    double ms = ceil((next - now) * 1000);
    return ms < 0 ? 0 : (int)ms;
}

static void reap(struct gpuqd *d, struct watch *w)
{
    pthread_mutex_lock(&d->lock);
    for (size_t i = 2; i < w->n; i++) {
        if (!(w->fds[i].revents & (POLLIN | POLLHUP | POLLERR)))
            continue;
        struct qjob *q = jobs_find(d, w->ids[i]);
        if (q && q->pidfd == w->fds[i].fd && runs_reap(d, q) < 0)
            log_error("job %llu: recording its end failed", (unsigned long long)w->ids[i]);
    }
    pthread_mutex_unlock(&d->lock);
}

static int serve(struct gpuqd *d, int signal_fd)
{
    struct watch w = {0};
    struct service_watchdog wd;
    service_watchdog_init(&wd);
    int r = 0;
    for (;;) {
        int timeout = work(d, &w, signal_fd);
        int wd_ms = service_watchdog_timeout_ms(&wd, clock_now_usec());
        if (wd_ms >= 0 && wd_ms < timeout)
            timeout = wd_ms;
        int n = poll(w.fds, w.n, timeout);
        service_watchdog_ping(&wd, clock_now_usec());
        if (n < 0 && errno != EINTR) {
            r = log_error_errno(negative_errno(), "poll failed");
            break;
        }
        if (n <= 0)
            continue;
        if (w.fds[0].revents & POLLIN) {
            enum service_signal s = service_signals_read(signal_fd);
            if (s == SERVICE_SIGNAL_STOP)
                break;
            if (s == SERVICE_SIGNAL_RELOAD)
                log_notice("SIGHUP ignored: restart gpuqd to apply a changed config (running "
                           "jobs keep running)");
        }
        if (w.fds[1].revents & POLLIN) {
            uint64_t v;
            while (read(d->wake_fd, &v, sizeof(v)) > 0)
                ;
        }
        reap(d, &w);
    }
    free(w.fds);
    free(w.ids);
    return r;
}

int gpuqd_run(struct gpuqd *d)
{
    struct errmsg e = {{0}};
    int signal_fd = service_signals_open();
    if (signal_fd < 0)
        return log_error_errno(signal_fd, "cannot make a signalfd");
    pthread_mutex_lock(&d->lock);
    int r = runs_recover(d);
    pthread_mutex_unlock(&d->lock);
    if (r < 0) {
        close(signal_fd);
        return log_error_errno(r, "recovering the jobs of the last run failed");
    }
    r = api_start(d, &e);
    if (r == 0)
        r = metrics_start(d, &e);
    if (r < 0) {
        close(signal_fd);
        log_error("%s", e.text);
        return r;
    }
    log_notice("serving on %s%s%s; %zu active job(s)%s", d->cfg.socket,
               d->metrics ? ", /metrics on " : "", d->metrics ? d->cfg.metrics_listen : "",
               d->n_jobs, d->drained ? "; DRAINED" : "");
    service_ready("serving");
    r = serve(d, signal_fd);
    service_stopping();
    log_notice("stopping; running jobs keep running");
    close(signal_fd);
    return r;
}
