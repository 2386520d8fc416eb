#include "shutdown.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "lib/clock.h"
#include "docker.h"
#include "gpuq-client.h"
#include "hooks.h"
#include "lib/macro.h"

/* Shares of the time left (until the power cut minus the reserve) that each stage may use,
 * recomputed when each stage starts so that a quick stage hands its slack to the next ones. The
 * jobs' and the containers' grace periods need the most; halt and command get the last share.
 * A host without gpuq (or without Docker) skips that stage at once, so the others get what it
 * would have used. */
#define WEIGHT_JOBS       6u
#define WEIGHT_ANNOUNCE   2u
#define WEIGHT_CONTAINERS 6u
#define WEIGHT_WAIT       1u
#define WEIGHT_FINAL      1u
/* The weights of a stage and of every stage after it. */
#define WEIGHTS_FROM_CONTAINERS (WEIGHT_CONTAINERS + WEIGHT_WAIT + WEIGHT_FINAL)
#define WEIGHTS_FROM_ANNOUNCE   (WEIGHT_ANNOUNCE + WEIGHTS_FROM_CONTAINERS)
#define WEIGHTS_FROM_JOBS       (WEIGHT_JOBS + WEIGHTS_FROM_ANNOUNCE)
/* Docker and gpuqd need time after the grace period to SIGKILL and tear down (gpuqd also to
 * reap and requeue); keep this much (plus a tenth of the stage budget) between the end of the
 * grace period and the end of the stage. */
#define STOP_MARGIN_US 1000000u
/* gpuqd's drain answers when its wait runs out; it is asked to wait this much less than the
 * stage has, so that its answer still arrives inside the stage. */
#define DRAIN_REPLY_MARGIN_US 300000u
#define WAIT_POLL_MS          200u
/* How long to wait for the shutdown command's exit status ("systemctl poweroff" returns at once).
 */
#define COMMAND_WAIT_US 10000000u

struct run {
    struct shutdown *s;
    bool drill;
    char reason[64];
    uint64_t deadline_us; /* the power cut */
    atomic_bool cancel;
    pthread_t thread;
    /* Guarded by s->lock: */
    enum shutdown_stage stage;
    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    size_t n_steps;
    bool finished;
    /* Only the run's thread uses these: stage 2 fills them for stage 3. */
    struct docker_container *containers;
    size_t n_containers;
    bool list_failed; /* the engine did not say which containers run */
};

struct shutdown {
    struct shutdown_config cfg; /* strings point at the copies below */
    char *command;
    char *hooks_dir;
    char *docker_socket;
    char *gpuqd_socket;
    pthread_mutex_t lock;
    pthread_cond_t cond; /* signalled when a run finishes */
    struct run *real;    /* set once: the latch */
    struct run *drill;   /* the latest drill */
};

static const char *const stage_names[] = {
    [SHUTDOWN_STAGE_IDLE] = "idle",         [SHUTDOWN_STAGE_JOBS] = "jobs",
    [SHUTDOWN_STAGE_ANNOUNCE] = "announce", [SHUTDOWN_STAGE_CONTAINERS] = "containers",
    [SHUTDOWN_STAGE_WAIT] = "wait",         [SHUTDOWN_STAGE_HALT] = "halt",
    [SHUTDOWN_STAGE_COMMAND] = "command",   [SHUTDOWN_STAGE_DONE] = "done",
};

const char *shutdown_stage_to_string(enum shutdown_stage s)
{
    return (unsigned)s < ELEMENTSOF(stage_names) ? stage_names[s] : NULL;
}

static void say(const struct run *run, enum log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void say(const struct run *run, enum log_level level, const char *fmt, ...)
{
    const struct shutdown_config *c = &run->s->cfg;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (c->log)
        c->log(level, msg, c->userdata);
    else
        log_debug("%s", msg);
}

static void hook_line(const char *name, const char *line, void *userdata)
{
    say(userdata, LOG_LEVEL_INFO, "hook %s: %s", name, line);
}

static void event(const struct run *run, json_t *fields, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void event(const struct run *run, json_t *fields, const char *fmt, ...)
{
    const struct shutdown_config *c = &run->s->cfg;
    if (c->event) {
        char msg[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        c->event(msg, fields, c->userdata);
    }
    json_decref(fields);
}

/* The end of the window a stage may use: its share of what is left before the power cut minus
 * the reserve. Returns 0 when nothing is left. */
static uint64_t stage_end(const struct run *run, unsigned weight, unsigned weight_left)
{
    uint64_t reserve = (uint64_t)(run->s->cfg.halt_reserve_s * 1e6);
    uint64_t end = run->deadline_us > reserve ? run->deadline_us - reserve : 0;
    uint64_t now = clock_now_usec();
    if (now >= end)
        return 0;
    return now + (end - now) * weight / weight_left;
}

/* The longest grace period (seconds) that leaves the SIGKILL and the teardown after it time to
 * finish before the stage ends; 0 when there is none. */
static double grace_allowed(uint64_t now, uint64_t end)
{
    uint64_t left = end > now ? end - now : 0;
    uint64_t margin = STOP_MARGIN_US + left / 10;
    return left > margin ? (double)(left - margin) / 1e6 : 0.0;
}

static uint64_t begin_stage(struct run *run, enum shutdown_stage stage)
{
    pthread_mutex_lock(&run->s->lock);
    run->stage = stage;
    pthread_mutex_unlock(&run->s->lock);
    return clock_now_usec();
}

/* Details quote hook and container names and error texts, which need not be UTF-8; JSON must be.
 * Also repairs a multi-byte character cut in half by truncation. */
static void make_json_safe(char *s)
{
    json_t *probe = json_string(s);
    if (probe) {
        json_decref(probe);
        return;
    }
    for (; *s; s++)
        if ((unsigned char)*s >= 0x80)
            *s = '?';
}

static void end_stage(struct run *run, enum shutdown_stage stage, uint64_t started, bool ok,
                      const char *fmt, ...) __attribute__((format(printf, 5, 6)));

static void end_stage(struct run *run, enum shutdown_stage stage, uint64_t started, bool ok,
                      const char *fmt, ...)
{
    struct shutdown_step step = {.stage = stage, .ok = ok};
    step.seconds = (double)(clock_now_usec() - started) / 1e6;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(step.detail, sizeof(step.detail), fmt, ap);
    va_end(ap);
    make_json_safe(step.detail);

    pthread_mutex_lock(&run->s->lock);
    if (run->n_steps < SHUTDOWN_N_STEPS)
        run->steps[run->n_steps++] = step;
    pthread_mutex_unlock(&run->s->lock);

    const char *name = shutdown_stage_to_string(stage);
    const char *kind = run->drill ? "drill" : "shutdown";
    say(run, ok ? LOG_LEVEL_NOTICE : LOG_LEVEL_WARNING, "%s stage %s: %s (%.2fs): %s", kind, name,
        ok ? "ok" : "FAILED", step.seconds, step.detail);
    event(run,
          json_pack("{s:s, s:b, s:f, s:b, s:s}", "stage", name, "ok", ok, "seconds", step.seconds,
                    "drill", run->drill, "detail", step.detail),
          "%s stage %s %s: %s", kind, name, ok ? "ok" : "failed", step.detail);
}

/* Earlier stages give way when the run is cancelled: a drill because a real shutdown started, a
 * real one because the daemon is going away (halt and command still follow). */
static bool cancelled(struct run *run, enum shutdown_stage stage)
{
    if (!atomic_load(&run->cancel))
        return false;
    uint64_t t = begin_stage(run, stage);
    end_stage(run, stage, t, false, "cancelled: %s",
              run->drill ? "a real shutdown started" : "the daemon is stopping");
    return true;
}

/* The log line and the event that say a run started. They come before the first stage, not in
 * the announce stage, so that the journal and the event list show the shutdown at once even
 * while the jobs stage drains gpuqd ahead of the hooks. */
static void open_run(struct run *run)
{
    uint64_t now = clock_now_usec();
    double cut_in = run->deadline_us > now ? (double)(run->deadline_us - now) / 1e6 : 0.0;
    if (run->drill)
        say(run, LOG_LEVEL_WARNING, "shutdown DRILL (%s): running every stage, stopping nothing",
            run->reason);
    else
        say(run, LOG_LEVEL_WARNING,
            "emergency shutdown (%s): power cut in %.1fs; stopping jobs and containers and "
            "halting",
            run->reason, cut_in);
    event(run,
          json_pack("{s:s, s:s, s:b, s:f}", "stage", "start", "reason", run->reason, "drill",
                    run->drill, "power_cut_in_seconds", cut_in),
          "%s started (%s), power cut in %.1fs", run->drill ? "shutdown drill" : "shutdown",
          run->reason, cut_in);
}

/* gpuqd not being there is no failure: no socket file means gpuq is not installed or not
 * started on this host, and a refused connection means no gpuqd listens on a socket left behind.
 * Either way there is no job it could stop. Returns true when that is the case (stage ended). */
static bool gpuqd_absent(struct run *run, uint64_t t, int r)
{
    const char *sock = run->s->cfg.gpuqd_socket;
    if (r == -ENOENT)
        end_stage(run, SHUTDOWN_STAGE_JOBS, t, true, "gpuqd is not running (no socket at %s)",
                  sock);
    else if (r == -ECONNREFUSED)
        end_stage(run, SHUTDOWN_STAGE_JOBS, t, true,
                  "gpuqd is not running (connection refused at %s)", sock);
    return r == -ENOENT || r == -ECONNREFUSED;
}

/* A drill stops nothing and leaves gpuqd admitting jobs: it only asks what a drain would stop. */
static void jobs_count(struct run *run, uint64_t t, uint64_t end)
{
    struct gpuqc_status st;
    struct errmsg e = {{0}};
    int r = gpuqc_get_status(run->s->cfg.gpuqd_socket, end, &st, &e);
    if (gpuqd_absent(run, t, r))
        return;
    if (r < 0)
        end_stage(run, SHUTDOWN_STAGE_JOBS, t, false, "%s", e.text);
    else
        end_stage(run, SHUTDOWN_STAGE_JOBS, t, true, "would drain gpuqd and stop %u running job%s",
                  st.running, st.running == 1 ? "" : "s");
}

static void jobs_drain(struct run *run, uint64_t t, uint64_t end)
{
    uint64_t now = clock_now_usec();
    /* gpuqd reads a grace_max of 0 as "no cap": a stage too short for any grace still asks for
     * the shortest one, so that the jobs go down at once rather than with their own grace. */
    double grace = fmax(floor(grace_allowed(now, end) * 10.0) / 10.0, 0.1);
    uint64_t wait_us = end > now + DRAIN_REPLY_MARGIN_US ? end - now - DRAIN_REPLY_MARGIN_US : 0;
    struct gpuqc_drain_result res;
    struct errmsg e = {{0}};
    int r = gpuqc_drain(run->s->cfg.gpuqd_socket, grace, (double)wait_us / 1e6, end, &res, &e);
    if (gpuqd_absent(run, t, r))
        return;
    if (r < 0)
        end_stage(run, SHUTDOWN_STAGE_JOBS, t, false, "%s", e.text);
    else if (res.running == 0)
        end_stage(run, SHUTDOWN_STAGE_JOBS, t, true,
                  "gpuqd drained: stopped %u job%s (grace up to %.1fs), 0 left running",
                  res.stopped, res.stopped == 1 ? "" : "s", grace);
    else
        end_stage(run, SHUTDOWN_STAGE_JOBS, t, false,
                  "gpuqd drained: stopped %u job%s (grace up to %.1fs), %u still running at the "
                  "end of the stage",
                  res.stopped, res.stopped == 1 ? "" : "s", grace, res.running);
}

/* The first stage, before the hooks: a GPU job's checkpoint (model and optimiser state written
 * from GPU memory) is the most expensive work a power cut can destroy and often the slowest to
 * save, so the jobs get their signal first and their grace is not shortened by hooks that may
 * use their whole share. Hooks that run after it may then rely on the jobs having stopped (for
 * instance to copy their checkpoints off the node). */
static void stage_jobs(struct run *run)
{
    const char *sock = run->s->cfg.gpuqd_socket;
    if (cancelled(run, SHUTDOWN_STAGE_JOBS))
        return;
    uint64_t t = begin_stage(run, SHUTDOWN_STAGE_JOBS);
    if (!sock || !sock[0]) {
        end_stage(run, SHUTDOWN_STAGE_JOBS, t, true, "no job queue configured");
        return;
    }
    struct stat st;
    if (stat(sock, &st) < 0 && errno == ENOENT) {
        gpuqd_absent(run, t, -ENOENT);
        return;
    }
    uint64_t end = stage_end(run, WEIGHT_JOBS, WEIGHTS_FROM_JOBS);
    if (end == 0) {
        end_stage(run, SHUTDOWN_STAGE_JOBS, t, false, "skipped: no time left");
        return;
    }
    if (run->drill)
        jobs_count(run, t, end);
    else
        jobs_drain(run, t, end);
}

static void stage_announce(struct run *run)
{
    const struct shutdown_config *c = &run->s->cfg;
    if (cancelled(run, SHUTDOWN_STAGE_ANNOUNCE))
        return;
    uint64_t t = begin_stage(run, SHUTDOWN_STAGE_ANNOUNCE);
    if (!c->hooks_dir || !c->hooks_dir[0]) {
        end_stage(run, SHUTDOWN_STAGE_ANNOUNCE, t, true, "no hooks directory configured");
        return;
    }
    uint64_t end = stage_end(run, WEIGHT_ANNOUNCE, WEIGHTS_FROM_ANNOUNCE);
    if (end == 0) {
        end_stage(run, SHUTDOWN_STAGE_ANNOUNCE, t, false, "hooks skipped: no time left");
        return;
    }
    struct hooks_event ev = {.event = run->drill ? "drill" : "precritical",
                             .reason = run->reason,
                             .power_cut_us = run->deadline_us,
                             .drill = run->drill};
    struct hooks_exec_opts o = {.deadline_us = end,
                                .kill_at_deadline = true,
                                .cancel = &run->cancel,
                                .line_fn = hook_line,
                                .userdata = run};
    struct hooks_summary sum;
    struct errmsg e = {{0}};
    if (hooks_run(c->hooks_dir, &ev, &o, &sum, &e) < 0)
        end_stage(run, SHUTDOWN_STAGE_ANNOUNCE, t, false, "%s", e.text);
    else
        end_stage(run, SHUTDOWN_STAGE_ANNOUNCE, t, sum.failed == 0 && sum.killed == 0, "%s",
                  sum.detail);
}

/* "a, b, c" into buf, cut short with "..." when it does not fit. */
static void join_names(const struct docker_container *c, size_t n, const bool *pick, char *buf,
                       size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < n; i++) {
        if (pick && !pick[i])
            continue;
        int k = snprintf(buf + used, size - used, "%s%s", used ? ", " : "", c[i].name);
        if (k < 0 || (size_t)k >= size - used) {
            if (size > 4)
                strcpy(buf + size - 4, "...");
            return;
        }
        used += (size_t)k;
    }
}

/* The grace period Docker gets: the configured one, cut down so that Docker's SIGKILL and
 * teardown still fit before the stage ends. */
static unsigned grace_for(const struct run *run, uint64_t now, uint64_t end)
{
    double grace = fmin(run->s->cfg.container_grace_s, grace_allowed(now, end));
    return grace > 0 ? (unsigned)floor(grace) : 0;
}

static void stop_containers(struct run *run, uint64_t t, uint64_t end)
{
    size_t n = run->n_containers;
    unsigned grace = grace_for(run, clock_now_usec(), end);
    _cleanup_free_ struct docker_stop_result *res = calloc(n, sizeof(*res));
    _cleanup_free_ bool *failed = calloc(n, sizeof(*failed));
    if (!res || !failed) {
        end_stage(run, SHUTDOWN_STAGE_CONTAINERS, t, false, "out of memory");
        return;
    }
    int ok = docker_stop_all(run->s->cfg.docker_socket, run->containers, n, grace, end, res);
    const char *why = "";
    for (size_t i = 0; i < n; i++) {
        failed[i] = res[i].r < 0;
        if (failed[i]) {
            say(run, LOG_LEVEL_WARNING, "stopping container %s: %s", run->containers[i].name,
                res[i].error);
            why = res[i].error;
        }
    }
    char names[160];
    if (ok == (int)n) {
        join_names(run->containers, n, NULL, names, sizeof(names));
        end_stage(run, SHUTDOWN_STAGE_CONTAINERS, t, true, "stopped %zu (grace %us): %s", n, grace,
                  names);
        return;
    }
    join_names(run->containers, n, failed, names, sizeof(names));
    end_stage(run, SHUTDOWN_STAGE_CONTAINERS, t, false,
              "stopped %d of %zu (grace %us); not stopped: %s; %s", ok < 0 ? 0 : ok, n, grace,
              names, why);
}

static void stage_containers(struct run *run)
{
    const char *sock = run->s->cfg.docker_socket;
    if (cancelled(run, SHUTDOWN_STAGE_CONTAINERS))
        return;
    uint64_t t = begin_stage(run, SHUTDOWN_STAGE_CONTAINERS);
    if (!sock || !sock[0]) {
        end_stage(run, SHUTDOWN_STAGE_CONTAINERS, t, true, "no Docker Engine configured");
        return;
    }
    /* No socket file means no engine on this host, so no container can be running: that is
     * not a failure. A socket that exists but does not answer is one. */
    struct stat st;
    if (stat(sock, &st) < 0 && errno == ENOENT) {
        end_stage(run, SHUTDOWN_STAGE_CONTAINERS, t, true,
                  "no Docker Engine on this host (no socket at %s)", sock);
        return;
    }
    uint64_t end = stage_end(run, WEIGHT_CONTAINERS, WEIGHTS_FROM_CONTAINERS);
    if (end == 0) {
        end_stage(run, SHUTDOWN_STAGE_CONTAINERS, t, false, "skipped: no time left");
        return;
    }
    struct errmsg e = {{0}};
    if (docker_list_running(sock, end, &run->containers, &run->n_containers, &e) < 0) {
        run->list_failed = true;
        end_stage(run, SHUTDOWN_STAGE_CONTAINERS, t, false, "%s", e.text);
        return;
    }
    size_t n = run->n_containers;
    char names[200];
    join_names(run->containers, n, NULL, names, sizeof(names));
    if (n == 0)
        end_stage(run, SHUTDOWN_STAGE_CONTAINERS, t, true, "no running containers");
    else if (run->drill)
        end_stage(run, SHUTDOWN_STAGE_CONTAINERS, t, true, "would stop %zu: %s", n, names);
    else
        stop_containers(run, t, end);
}

static void stage_wait(struct run *run)
{
    size_t n = run->n_containers;
    if (cancelled(run, SHUTDOWN_STAGE_WAIT))
        return;
    uint64_t t = begin_stage(run, SHUTDOWN_STAGE_WAIT);
    if (run->list_failed) {
        end_stage(run, SHUTDOWN_STAGE_WAIT, t, false,
                  "skipped: the running containers are unknown (the engine did not list them)");
        return;
    }
    if (n == 0) {
        end_stage(run, SHUTDOWN_STAGE_WAIT, t, true, "no containers to wait for");
        return;
    }
    if (run->drill) {
        end_stage(run, SHUTDOWN_STAGE_WAIT, t, true, "would confirm %zu stopped", n);
        return;
    }
    _cleanup_free_ bool *running = calloc(n, sizeof(*running));
    if (!running) {
        end_stage(run, SHUTDOWN_STAGE_WAIT, t, false, "out of memory");
        return;
    }
    uint64_t end = stage_end(run, WEIGHT_WAIT, WEIGHT_WAIT + WEIGHT_FINAL);
    struct errmsg e = {{0}};
    int left = docker_wait_stopped(run->s->cfg.docker_socket, run->containers, n, end, WAIT_POLL_MS,
                                   running, &e);
    if (left == 0) {
        end_stage(run, SHUTDOWN_STAGE_WAIT, t, true, "all %zu stopped", n);
        return;
    }
    char names[160];
    join_names(run->containers, n, running, names, sizeof(names));
    end_stage(run, SHUTDOWN_STAGE_WAIT, t, false, "%d of %zu not confirmed stopped: %s%s%s", left,
              n, names, e.text[0] ? "; " : "", e.text);
}

/* What HALT asks for: the configured time, but never less than what is left before the cut
 * already scheduled, so telling the controller never brings its cut forward. */
static unsigned halt_within_for(const struct run *run, uint64_t now)
{
    double within = run->s->cfg.halt_within_s;
    if (run->deadline_us > now) {
        double left = (double)(run->deadline_us - now) / 1e6;
        if (left > within)
            within = left;
    }
    return within > 0 ? (unsigned)ceil(within) : 0;
}

/* Errors after which HALT is worth sending again: the link is re-syncing (a controller reboot,
 * a USB re-enumeration), a reply was lost to noise, or the queue was busy. */
static bool halt_retryable(int r)
{
    return r == -ENOTCONN || r == -ETIMEDOUT || r == -EBUSY || r == -EAGAIN;
}

static void stage_halt(struct run *run)
{
    const struct shutdown_config *c = &run->s->cfg;
    /* Only a drill gives way here; a real run always goes on to HALT and the command. */
    if (run->drill && cancelled(run, SHUTDOWN_STAGE_HALT))
        return;
    uint64_t t = begin_stage(run, SHUTDOWN_STAGE_HALT);
    if (run->drill) {
        end_stage(run, SHUTDOWN_STAGE_HALT, t, true, "skipped (drill)");
        return;
    }
    if (!c->send_halt) {
        end_stage(run, SHUTDOWN_STAGE_HALT, t, false, "no way to reach the controller");
        return;
    }
    /* Tried until the time kept for the halt itself begins (at least once): a controller that
     * is re-syncing now may well answer in a second. */
    uint64_t reserve = (uint64_t)(c->halt_reserve_s * 1e6);
    uint64_t give_up = run->deadline_us > reserve ? run->deadline_us - reserve : 0;
    unsigned within, tries = 0;
    int r;
    do {
        if (tries++ > 0)
            usleep(250 * 1000);
        within = halt_within_for(run, clock_now_usec());
        r = c->send_halt(within, c->userdata);
    } while (r < 0 && halt_retryable(r) && !atomic_load(&run->cancel) &&
             clock_now_usec() + 250 * 1000 < give_up);
    if (r < 0)
        end_stage(run, SHUTDOWN_STAGE_HALT, t, false, "HALT within=%u failed after %u tries: %s",
                  within, tries, strerror(-r));
    else
        end_stage(run, SHUTDOWN_STAGE_HALT, t, true, "controller told: host off within %us%s",
                  within, tries > 1 ? " (after retries)" : "");
}

static void stage_command(struct run *run)
{
    const char *cmd = run->s->cfg.command;
    if (run->drill && cancelled(run, SHUTDOWN_STAGE_COMMAND))
        return;
    uint64_t t = begin_stage(run, SHUTDOWN_STAGE_COMMAND);
    if (!cmd || !cmd[0]) {
        end_stage(run, SHUTDOWN_STAGE_COMMAND, t, false, "no shutdown command configured");
        return;
    }
    if (run->drill) {
        end_stage(run, SHUTDOWN_STAGE_COMMAND, t, true, "skipped (drill): would run '%s'", cmd);
        return;
    }
    say(run, LOG_LEVEL_WARNING, "running shutdown command '%s'", cmd);
    char *const argv[] = {"sh", "-c", (char *)cmd, NULL};
    struct hooks_job job = {.name = "command", .path = "/bin/sh", .argv = argv};
    /* The command is never killed: waiting for it only serves to record how it went, so the wait
     * is short and ignores cancellation (a daemon stopping right now still gets its command).
     * Its output goes where the daemon's goes (the journal under systemd), so nothing breaks if
     * we stop waiting before it ends. */
    struct hooks_exec_opts o = {.deadline_us = t + COMMAND_WAIT_US, .inherit_output = true};
    struct hooks_outcome out;
    struct errmsg e = {{0}};
    if (hooks_exec(&job, 1, &o, &out, &e) < 0)
        end_stage(run, SHUTDOWN_STAGE_COMMAND, t, false, "'%s': %s", cmd, e.text);
    else if (out.spawn_error < 0)
        end_stage(run, SHUTDOWN_STAGE_COMMAND, t, false, "'%s' not started: %s", cmd,
                  strerror(-out.spawn_error));
    else if (out.running)
        end_stage(run, SHUTDOWN_STAGE_COMMAND, t, true, "'%s' started, still running after %.1fs",
                  cmd, out.seconds);
    else if (WIFEXITED(out.status))
        end_stage(run, SHUTDOWN_STAGE_COMMAND, t, WEXITSTATUS(out.status) == 0, "'%s': exit %d",
                  cmd, WEXITSTATUS(out.status));
    else
        end_stage(run, SHUTDOWN_STAGE_COMMAND, t, false, "'%s': killed by signal %d", cmd,
                  WIFSIGNALED(out.status) ? WTERMSIG(out.status) : 0);
}

static void *run_main(void *p)
{
    struct run *run = p;
    open_run(run);
    stage_jobs(run);
    stage_announce(run);
    stage_containers(run);
    stage_wait(run);
    stage_halt(run);
    stage_command(run);

    struct shutdown *s = run->s;
    pthread_mutex_lock(&s->lock);
    run->finished = true;
    /* A finished drill shows as idle again: the metric must not look like a real shutdown. */
    run->stage = run->drill ? SHUTDOWN_STAGE_IDLE : SHUTDOWN_STAGE_DONE;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->lock);
    say(run, LOG_LEVEL_NOTICE, "%s finished", run->drill ? "shutdown drill" : "shutdown");
    return NULL;
}

static void run_free(struct run *run)
{
    if (!run)
        return;
    pthread_join(run->thread, NULL);
    free(run->containers);
    free(run);
}

int shutdown_new(const struct shutdown_config *c, struct shutdown **ret)
{
    struct shutdown *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->cfg = *c;
    s->command = c->command ? strdup(c->command) : NULL;
    s->hooks_dir = c->hooks_dir ? strdup(c->hooks_dir) : NULL;
    s->docker_socket = c->docker_socket ? strdup(c->docker_socket) : NULL;
    s->gpuqd_socket = c->gpuqd_socket ? strdup(c->gpuqd_socket) : NULL;
    if ((c->command && !s->command) || (c->hooks_dir && !s->hooks_dir) ||
        (c->docker_socket && !s->docker_socket) || (c->gpuqd_socket && !s->gpuqd_socket)) {
        shutdown_free(s);
        return -ENOMEM;
    }
    s->cfg.command = s->command;
    s->cfg.hooks_dir = s->hooks_dir;
    s->cfg.docker_socket = s->docker_socket;
    s->cfg.gpuqd_socket = s->gpuqd_socket;
    pthread_mutex_init(&s->lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cond, &ca);
    pthread_condattr_destroy(&ca);
    *ret = s;
    return 0;
}

void shutdown_free(struct shutdown *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&s->lock);
    if (s->real)
        atomic_store(&s->real->cancel, true);
    if (s->drill)
        atomic_store(&s->drill->cancel, true);
    pthread_mutex_unlock(&s->lock);
    run_free(s->real);
    run_free(s->drill);
    pthread_mutex_destroy(&s->lock);
    pthread_cond_destroy(&s->cond);
    free(s->command);
    free(s->hooks_dir);
    free(s->docker_socket);
    free(s->gpuqd_socket);
    free(s);
}

int shutdown_start(struct shutdown *s, const char *reason, uint64_t deadline_us, bool drill)
{
    drill = drill || s->cfg.drill;
    struct run *run = calloc(1, sizeof(*run));
    if (!run)
        return -ENOMEM;
    run->s = s;
    run->drill = drill;
    run->deadline_us = deadline_us;
    /* Shown as started from the moment this returns, not only once the thread runs, so a caller
     * that looks at the stage right after starting never sees IDLE. */
    run->stage = SHUTDOWN_STAGE_JOBS;
    snprintf(run->reason, sizeof(run->reason), "%s", reason && reason[0] ? reason : "unknown");

    struct run *old = NULL;
    pthread_mutex_lock(&s->lock);
    int r = 0;
    if (s->real)
        r = -EALREADY;
    else if (drill && s->drill && !s->drill->finished)
        r = -EBUSY;
    else if ((r = -pthread_create(&run->thread, NULL, run_main, run)) == 0) {
        if (drill) {
            old = s->drill;
            s->drill = run;
        } else {
            /* A drill still running gives way at once; it is joined at shutdown_free(). */
            if (s->drill)
                atomic_store(&s->drill->cancel, true);
            s->real = run;
        }
    }
    pthread_mutex_unlock(&s->lock);
    if (r < 0) {
        free(run);
        return r;
    }
    run_free(old); /* a finished drill: the join returns at once */
    return 0;
}

void shutdown_cancel_drill(struct shutdown *s)
{
    pthread_mutex_lock(&s->lock);
    if (s->drill)
        atomic_store(&s->drill->cancel, true);
    pthread_mutex_unlock(&s->lock);
}

/* The run the state shows; call with the lock held. */
static const struct run *shown_run(const struct shutdown *s)
{
    if (s->real)
        return s->real;
    if (s->drill && !s->drill->finished)
        return s->drill;
    return NULL;
}

void shutdown_get_state(struct shutdown *s, struct shutdown_state *ret)
{
    memset(ret, 0, sizeof(*ret));
    pthread_mutex_lock(&s->lock);
    const struct run *run = shown_run(s);
    if (run) {
        ret->stage = run->stage;
        ret->drill = run->drill;
        snprintf(ret->reason, sizeof(ret->reason), "%s", run->reason);
    }
    ret->latched = s->real != NULL;
    pthread_mutex_unlock(&s->lock);
}

enum shutdown_stage shutdown_get_stage(struct shutdown *s)
{
    struct shutdown_state st;
    shutdown_get_state(s, &st);
    return st.stage;
}

int shutdown_wait(struct shutdown *s, bool drill, uint64_t timeout_us)
{
    uint64_t until = timeout_us ? clock_now_usec() + timeout_us : 0;
    struct timespec ts = {.tv_sec = (time_t)(until / 1000000u),
                          .tv_nsec = (long)(until % 1000000u) * 1000};
    int r = 0;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        /* Looked up again after every wakeup: a newer drill may have replaced (and freed) the
         * one we started waiting for. */
        const struct run *run = drill ? s->drill : s->real;
        if (!run) {
            r = -ENOENT;
            break;
        }
        if (run->finished)
            break;
        int k = until ? pthread_cond_timedwait(&s->cond, &s->lock, &ts)
                      : pthread_cond_wait(&s->cond, &s->lock);
        if (k == ETIMEDOUT) {
            const struct run *again = drill ? s->drill : s->real;
            r = again && again->finished ? 0 : -ETIMEDOUT;
            break;
        }
    }
    pthread_mutex_unlock(&s->lock);
    return r;
}

size_t shutdown_get_steps(struct shutdown *s, bool drill, struct shutdown_step *ret, size_t max)
{
    pthread_mutex_lock(&s->lock);
    const struct run *run = drill ? s->drill : s->real;
    size_t n = run ? run->n_steps : 0;
    if (n > max)
        n = max;
    if (n > 0)
        memcpy(ret, run->steps, n * sizeof(*ret));
    pthread_mutex_unlock(&s->lock);
    return n;
}

json_t *shutdown_steps_json(struct shutdown *s, bool drill)
{
    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    size_t n = shutdown_get_steps(s, drill, steps, ELEMENTSOF(steps));
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        json_t *o =
            json_pack("{s:s, s:b, s:f, s:s}", "name", shutdown_stage_to_string(steps[i].stage),
                      "ok", steps[i].ok, "seconds", round(steps[i].seconds * 1000.0) / 1000.0,
                      "detail", steps[i].detail);
        if (!o || json_array_append_new(a, o) < 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

json_t *shutdown_status_json(struct shutdown *s)
{
    struct shutdown_state st;
    shutdown_get_state(s, &st);
    return json_pack("{s:s, s:i, s:b}", "stage", shutdown_stage_to_string(st.stage), "stage_number",
                     (int)st.stage, "drill", st.drill);
}
