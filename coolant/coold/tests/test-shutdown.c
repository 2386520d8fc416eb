/* The staged shutdown end to end against a fake gpuqd, a fake Docker Engine, real hook scripts and
 * a real shell command: stage order, the grace periods, the latch, drills, a gpuqd or an engine
 * that fails, hangs or is not there, a deadline already past, and a drill giving way to a real
 * shutdown. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test-main.h"

#include "lib/clock.h"
#include "fake-docker.h"
#include "fake-gpuqd.h"
#include "hooks.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "shutdown.h"

struct harness {
    struct fake_docker *f;
    struct fake_gpuqd *q; /* NULL: no gpuqd (the config names none) */
    char dir[64];
    char hooks[96];
    char trace[96]; /* hooks, the HALT callback and the command append a line each */
    char command[256];
    struct shutdown_config cfg;
    pthread_mutex_t lock;
    unsigned halts;
    unsigned halt_within;
    uint64_t halt_at_us;
    size_t stops_at_halt;
    int halt_result;
    unsigned halt_failures; /* the first this many HALTs fail with halt_result, then succeed */
    char events[32][256];
    size_t n_events;
    char logs[64][256];
    size_t n_logs;
};

static void append_trace(struct harness *h, const char *line)
{
    int fd = open(h->trace, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, line, strlen(line)), (ssize_t)strlen(line));
    close(fd);
}

static char *read_all(const char *path)
{
    static char buf[1024];
    buf[0] = '\0';
    FILE *f = fopen(path, "re");
    if (!f)
        return buf;
    size_t k = fread(buf, 1, sizeof(buf) - 1, f);
    buf[k] = '\0';
    fclose(f);
    return buf;
}

static int send_halt(unsigned within_s, void *userdata)
{
    struct harness *h = userdata;
    pthread_mutex_lock(&h->lock);
    h->halts++;
    h->halt_within = within_s;
    h->halt_at_us = clock_now_usec();
    h->stops_at_halt = h->f ? fake_count_calls(h->f, "POST") : 0;
    int r = h->halt_failures == 0 || h->halts <= h->halt_failures ? h->halt_result : 0;
    pthread_mutex_unlock(&h->lock);
    char line[32];
    snprintf(line, sizeof(line), "halt %u\n", within_s);
    append_trace(h, line);
    return r;
}

static void on_log(enum log_level level, const char *message, void *userdata)
{
    struct harness *h = userdata;
    pthread_mutex_lock(&h->lock);
    if (h->n_logs < ELEMENTSOF(h->logs))
        snprintf(h->logs[h->n_logs++], sizeof(h->logs[0]), "%s", message);
    pthread_mutex_unlock(&h->lock);
}

static void on_event(const char *message, json_t *fields, void *userdata)
{
    struct harness *h = userdata;
    assert_true(json_is_object(fields));
    pthread_mutex_lock(&h->lock);
    if (h->n_events < ELEMENTSOF(h->events))
        snprintf(h->events[h->n_events++], sizeof(h->events[0]), "%s", message);
    pthread_mutex_unlock(&h->lock);
}

static bool saw(struct harness *h, const char (*lines)[256], size_t n, const char *needle)
{
    bool found = false;
    pthread_mutex_lock(&h->lock);
    for (size_t i = 0; i < n && !found; i++)
        found = strstr(lines[i], needle) != NULL;
    pthread_mutex_unlock(&h->lock);
    return found;
}

static void write_hook(struct harness *h, const char *name, const char *body)
{
    char path[160];
    snprintf(path, sizeof(path), "%s/%s", h->hooks, name);
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    fprintf(f, "#!/bin/sh\n%s\n", body);
    fclose(f);
    assert_int_equal(chmod(path, 0755), 0);
}

static int setup(void **state)
{
    struct harness *h = calloc(1, sizeof(*h));
    strcpy(h->dir, "/tmp/test-shutdown-XXXXXX");
    assert_non_null(mkdtemp(h->dir));
    snprintf(h->hooks, sizeof(h->hooks), "%s/hooks.d", h->dir);
    assert_int_equal(mkdir(h->hooks, 0755), 0);
    snprintf(h->trace, sizeof(h->trace), "%s/trace", h->dir);
    snprintf(h->command, sizeof(h->command), "echo command >> %s", h->trace);
    pthread_mutex_init(&h->lock, NULL);
    h->f = fake_new(2);
    char body[256];
    snprintf(body, sizeof(body), "echo saving\necho \"hook $1\" >> %s", h->trace);
    write_hook(h, "10-note", body);
    h->cfg = (struct shutdown_config){
        .command = h->command,
        .hooks_dir = h->hooks,
        .docker_socket = h->f->sock,
        .container_grace_s = 20,
        .halt_within_s = 60,
        .halt_reserve_s = 1,
        .send_halt = send_halt,
        .log = on_log,
        .event = on_event,
        .userdata = h,
    };
    *state = h;
    return 0;
}

static int teardown(void **state)
{
    struct harness *h = *state;
    if (h->f)
        fake_free(h->f);
    if (h->q)
        fake_gpuqd_free(h->q);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", h->dir);
    assert_int_equal(system(cmd), 0);
    pthread_mutex_destroy(&h->lock);
    free(h);
    return 0;
}

static struct shutdown *new_shutdown(struct harness *h)
{
    struct shutdown *s = NULL;
    assert_int_equal(shutdown_new(&h->cfg, &s), 0);
    return s;
}

static size_t get_steps(struct shutdown *s, bool drill, struct shutdown_step *steps)
{
    return shutdown_get_steps(s, drill, steps, SHUTDOWN_N_STEPS);
}

static void test_real_shutdown_runs_every_stage_once(void **state)
{
    struct harness *h = *state;
    struct shutdown *s = new_shutdown(h);
    assert_int_equal(shutdown_get_stage(s), SHUTDOWN_STAGE_IDLE);
    uint64_t deadline = clock_now_usec() + 10000000u;
    assert_int_equal(shutdown_start(s, "pump_stopped", deadline, false), 0);
    assert_int_equal(shutdown_wait(s, false, 15000000u), 0);
    assert_true(clock_now_usec() < deadline);

    /* In order: hooks, then every stop before HALT, then the command, once each. */
    assert_string_equal(read_all(h->trace), "hook precritical\nhalt 60\ncommand\n");
    assert_int_equal(h->stops_at_halt, 2);
    assert_int_equal(h->halts, 1);
    assert_int_equal(h->halt_within, 60);

    /* The grace period is capped by the time left (about 10 s), not the configured 20 s. */
    unsigned grace = 0;
    for (size_t i = 0; i < h->f->n_calls; i++) {
        const char *t = strstr(h->f->calls[i], "/stop t=");
        if (t)
            grace = (unsigned)atoi(t + strlen("/stop t="));
    }
    assert_true(grace >= 3 && grace < 9);

    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, false, steps), 6);
    for (size_t i = 0; i < 6; i++) {
        assert_int_equal(steps[i].stage, SHUTDOWN_STAGE_JOBS + i);
        assert_true(steps[i].ok);
    }
    assert_non_null(strstr(steps[2].detail, "stopped 2"));
    assert_non_null(strstr(steps[2].detail, "trainer, notebook"));
    assert_non_null(strstr(steps[3].detail, "all 2 stopped"));
    assert_non_null(strstr(steps[5].detail, "exit 0"));

    struct shutdown_state st;
    shutdown_get_state(s, &st);
    assert_int_equal(st.stage, SHUTDOWN_STAGE_DONE);
    assert_true(st.latched);
    assert_false(st.drill);
    assert_string_equal(st.reason, "pump_stopped");

    /* The latch: neither another shutdown nor a drill runs again. */
    assert_int_equal(shutdown_start(s, "pump_stopped", clock_now_usec() + 10000000u, false),
                     -EALREADY);
    assert_int_equal(shutdown_start(s, "drill", clock_now_usec() + 10000000u, true), -EALREADY);

    assert_true(saw(h, h->logs, h->n_logs, "hook 10-note: saving"));
    assert_true(saw(h, h->events, h->n_events, "shutdown started (pump_stopped)"));
    assert_true(saw(h, h->events, h->n_events, "shutdown stage command ok"));

    json_t *j = shutdown_steps_json(s, false);
    assert_int_equal(json_array_size(j), 6);
    assert_string_equal(json_string_value(json_object_get(json_array_get(j, 0), "name")), "jobs");
    assert_string_equal(json_string_value(json_object_get(json_array_get(j, 2), "name")),
                        "containers");
    assert_true(json_is_true(json_object_get(json_array_get(j, 2), "ok")));
    assert_true(json_is_real(json_object_get(json_array_get(j, 2), "seconds")));
    json_decref(j);
    j = shutdown_status_json(s);
    assert_string_equal(json_string_value(json_object_get(j, "stage")), "done");
    assert_int_equal(json_integer_value(json_object_get(j, "stage_number")), 7);
    json_decref(j);
    shutdown_free(s);
    assert_string_equal(read_all(h->trace), "hook precritical\nhalt 60\ncommand\n");
}

static void test_grace_is_configured_value_when_time_allows(void **state)
{
    struct harness *h = *state;
    h->cfg.container_grace_s = 2;
    struct shutdown *s = new_shutdown(h);
    assert_int_equal(shutdown_start(s, "temp_high", clock_now_usec() + 60000000u, false), 0);
    assert_int_equal(shutdown_wait(s, false, 10000000u), 0);
    char expect[128];
    snprintf(expect, sizeof(expect), "POST /containers/%s/stop t=2", h->f->c[0].id);
    assert_int_equal(fake_count_calls(h->f, expect), 1);
    shutdown_free(s);
}

static void test_hanging_docker_does_not_delay_command(void **state)
{
    struct harness *h = *state;
    /* The engine lists its containers but never answers a stop. */
    fake_set_mode(h->f, FAKE_HANG_STOPS);
    h->cfg.halt_reserve_s = 0.5;
    struct shutdown *s = new_shutdown(h);
    uint64_t start = clock_now_usec();
    uint64_t deadline = start + 3000000u;
    assert_int_equal(shutdown_start(s, "pump_stopped", deadline, false), 0);
    assert_int_equal(shutdown_wait(s, false, 10000000u), 0);
    uint64_t end = clock_now_usec();

    /* HALT and the command came before the reserve kept for the OS halt. */
    assert_true(h->halt_at_us > start);
    assert_true(h->halt_at_us < deadline - 500000u);
    assert_true(end < deadline);
    assert_string_equal(read_all(h->trace), "hook precritical\nhalt 60\ncommand\n");
    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, false, steps), 6);
    assert_false(steps[2].ok);
    assert_non_null(strstr(steps[2].detail, "stopped 0 of 2"));
    assert_false(steps[3].ok);
    assert_true(steps[4].ok);
    assert_true(steps[5].ok);
    shutdown_free(s);
}

static void test_engine_that_never_answers(void **state)
{
    struct harness *h = *state;
    char path[128];
    snprintf(path, sizeof(path), "%s/hung.sock", h->dir);
    int fd = hung_socket(path);
    h->cfg.docker_socket = path;
    h->cfg.halt_reserve_s = 0.5;
    struct shutdown *s = new_shutdown(h);
    uint64_t deadline = clock_now_usec() + 2000000u;
    assert_int_equal(shutdown_start(s, "flow_low", deadline, false), 0);
    assert_int_equal(shutdown_wait(s, false, 10000000u), 0);
    assert_true(clock_now_usec() < deadline);
    assert_string_equal(read_all(h->trace), "hook precritical\nhalt 60\ncommand\n");
    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, false, steps), 6);
    assert_false(steps[2].ok);
    assert_non_null(strstr(steps[2].detail, path));
    shutdown_free(s);
    close(fd);
}

static void test_drill_stops_nothing(void **state)
{
    struct harness *h = *state;
    struct shutdown *s = new_shutdown(h);
    assert_int_equal(shutdown_start(s, "drill", clock_now_usec() + 30000000u, true), 0);
    /* One drill at a time. */
    assert_int_equal(shutdown_start(s, "drill", clock_now_usec() + 30000000u, true), -EBUSY);
    assert_int_equal(shutdown_wait(s, true, 10000000u), 0);

    assert_string_equal(read_all(h->trace), "hook drill\n");
    assert_int_equal(h->halts, 0);
    assert_int_equal(fake_count_calls(h->f, "POST"), 0);
    assert_true(h->f->c[0].running && h->f->c[1].running);
    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, true, steps), 6);
    for (size_t i = 0; i < 6; i++)
        assert_true(steps[i].ok);
    assert_string_equal(steps[2].detail, "would stop 2: trainer, notebook");
    assert_string_equal(steps[4].detail, "skipped (drill)");
    assert_non_null(strstr(steps[5].detail, "skipped (drill)"));

    /* A drill does not latch: the state is idle again, and both drills and a real shutdown can
     * follow. */
    struct shutdown_state st;
    shutdown_get_state(s, &st);
    assert_int_equal(st.stage, SHUTDOWN_STAGE_IDLE);
    assert_false(st.latched);
    assert_int_equal(shutdown_wait(s, false, 1000u), -ENOENT);
    assert_int_equal(get_steps(s, false, steps), 0);
    assert_int_equal(shutdown_start(s, "drill", clock_now_usec() + 30000000u, true), 0);
    assert_int_equal(shutdown_wait(s, true, 10000000u), 0);
    assert_int_equal(shutdown_start(s, "pump_stopped", clock_now_usec() + 30000000u, false), 0);
    assert_int_equal(shutdown_wait(s, false, 20000000u), 0);
    assert_string_equal(read_all(h->trace),
                        "hook drill\nhook drill\nhook precritical\nhalt 60\ncommand\n");
    shutdown_free(s);
}

static void test_config_drill_makes_every_start_a_drill(void **state)
{
    struct harness *h = *state;
    h->cfg.drill = true;
    struct shutdown *s = new_shutdown(h);
    assert_int_equal(shutdown_start(s, "pump_stopped", clock_now_usec() + 30000000u, false), 0);
    assert_int_equal(shutdown_wait(s, true, 10000000u), 0);
    struct shutdown_state st;
    shutdown_get_state(s, &st);
    assert_false(st.latched);
    assert_string_equal(read_all(h->trace), "hook drill\n");
    assert_int_equal(fake_count_calls(h->f, "POST"), 0);
    shutdown_free(s);
}

static void test_stage_visible_while_running(void **state)
{
    struct harness *h = *state;
    write_hook(h, "20-slow", "sleep 0.6");
    struct shutdown *s = new_shutdown(h);
    assert_int_equal(shutdown_start(s, "drill", clock_now_usec() + 30000000u, true), 0);
    usleep(200000);
    struct shutdown_state st;
    shutdown_get_state(s, &st);
    assert_int_equal(st.stage, SHUTDOWN_STAGE_ANNOUNCE);
    assert_true(st.drill);
    json_t *j = shutdown_status_json(s);
    assert_string_equal(json_string_value(json_object_get(j, "stage")), "announce");
    assert_int_equal(json_integer_value(json_object_get(j, "stage_number")), 2);
    assert_true(json_is_true(json_object_get(j, "drill")));
    json_decref(j);
    /* Until it is over, waiting with a short timeout times out. */
    assert_int_equal(shutdown_wait(s, true, 10000u), -ETIMEDOUT);
    assert_int_equal(shutdown_wait(s, true, 10000000u), 0);
    assert_int_equal(shutdown_get_stage(s), SHUTDOWN_STAGE_IDLE);
    shutdown_free(s);
}

static void test_deadline_passed_still_halts_and_runs_command(void **state)
{
    struct harness *h = *state;
    struct shutdown *s = new_shutdown(h);
    uint64_t start = clock_now_usec();
    assert_int_equal(shutdown_start(s, "temp_high", start, false), 0);
    assert_int_equal(shutdown_wait(s, false, 10000000u), 0);
    assert_true(clock_now_usec() - start < 1000000u);
    /* No time for hooks or containers; HALT and the command still happen. */
    assert_string_equal(read_all(h->trace), "halt 60\ncommand\n");
    assert_int_equal(fake_count_calls(h->f, "POST"), 0);
    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, false, steps), 6);
    assert_false(steps[1].ok);
    assert_false(steps[2].ok);
    assert_true(steps[4].ok);
    assert_true(steps[5].ok);
    shutdown_free(s);
}

/* A controller that is re-syncing (reboot, USB re-enumeration) when the HALT is due still gets
 * it: retried until it answers, within the time before the reserve. */
static void test_halt_retried_while_the_link_resyncs(void **state)
{
    struct harness *h = *state;
    h->halt_result = -ENOTCONN;
    h->halt_failures = 3;
    struct shutdown *s = new_shutdown(h);
    assert_int_equal(shutdown_start(s, "pump_stopped", clock_now_usec() + 10000000u, false), 0);
    assert_int_equal(shutdown_wait(s, false, 15000000u), 0);
    assert_int_equal(h->halts, 4);
    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, false, steps), 6);
    assert_true(steps[4].ok);
    assert_non_null(strstr(steps[4].detail, "after retries"));
    assert_non_null(strstr(read_all(h->trace), "halt 60\nhalt 60\nhalt 60\nhalt 60\ncommand\n"));
    shutdown_free(s);
}

/* A controller that never answers: HALT is retried only until the reserve begins, then the
 * command runs anyway, before the cut. */
static void test_halt_gives_up_before_the_reserve(void **state)
{
    struct harness *h = *state;
    h->halt_result = -ETIMEDOUT;
    struct shutdown *s = new_shutdown(h);
    uint64_t deadline = clock_now_usec() + 6000000u;
    assert_int_equal(shutdown_start(s, "pump_stopped", deadline, false), 0);
    assert_int_equal(shutdown_wait(s, false, 15000000u), 0);
    assert_true(h->halts > 1);
    uint64_t reserve = (uint64_t)(h->cfg.halt_reserve_s * 1e6);
    assert_true(h->halt_at_us < deadline - reserve);
    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, false, steps), 6);
    assert_false(steps[4].ok);
    assert_true(steps[5].ok);
    shutdown_free(s);
}

/* HALT asks for no less than the time the controller already gives: it never brings the cut
 * forward. */
static void test_halt_never_shortens_the_cut(void **state)
{
    struct harness *h = *state;
    h->cfg.halt_within_s = 5;
    struct shutdown *s = new_shutdown(h);
    assert_int_equal(shutdown_start(s, "pump_stopped", clock_now_usec() + 300000000u, false), 0);
    assert_int_equal(shutdown_wait(s, false, 400000000u), 0);
    assert_true(h->halt_within > 250);
    shutdown_free(s);
}

/* A host without Docker at all (no socket file) has no containers to stop: not a failure. */
static void test_no_engine_on_the_host(void **state)
{
    struct harness *h = *state;
    h->cfg.docker_socket = "/nonexistent/docker.sock";
    struct shutdown *s = new_shutdown(h);
    assert_int_equal(shutdown_start(s, "drill", clock_now_usec() + 10000000u, true), 0);
    assert_int_equal(shutdown_wait(s, true, 15000000u), 0);
    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, true, steps), 6);
    assert_true(steps[2].ok);
    assert_non_null(strstr(steps[2].detail, "no Docker Engine on this host"));
    assert_true(steps[3].ok);
    shutdown_free(s);
}

static void test_failures_do_not_stop_the_command(void **state)
{
    struct harness *h = *state;
    write_hook(h, "20-broken", "exit 1");
    /* A socket path that exists but where nothing listens: an engine that is down. */
    char dead[128];
    snprintf(dead, sizeof(dead), "%s/dead-docker.sock", h->dir);
    close(open(dead, O_WRONLY | O_CREAT | O_CLOEXEC, 0600));
    h->cfg.docker_socket = dead;
    h->halt_result = -EPROTO; /* refused: not worth repeating */
    snprintf(h->command, sizeof(h->command), "echo command >> %s; exit 3", h->trace);
    struct shutdown *s = new_shutdown(h);
    assert_int_equal(shutdown_start(s, "sensors_lost", clock_now_usec() + 10000000u, false), 0);
    assert_int_equal(shutdown_wait(s, false, 15000000u), 0);
    assert_string_equal(read_all(h->trace), "hook precritical\nhalt 60\ncommand\n");
    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, false, steps), 6);
    assert_false(steps[1].ok);
    assert_non_null(strstr(steps[1].detail, "20-broken: exit 1"));
    assert_false(steps[2].ok);
    assert_non_null(strstr(steps[2].detail, "dead-docker.sock"));
    assert_false(steps[3].ok); /* nothing can be confirmed when nothing was listed */
    assert_false(steps[4].ok);
    assert_non_null(strstr(steps[4].detail, strerror(EPROTO)));
    assert_false(steps[5].ok);
    assert_non_null(strstr(steps[5].detail, "exit 3"));
    assert_true(saw(h, h->logs, h->n_logs, "FAILED"));
    shutdown_free(s);
}

static void test_real_shutdown_cancels_drill(void **state)
{
    struct harness *h = *state;
    char body[256];
    snprintf(body, sizeof(body), "[ \"$1\" = drill ] && sleep 30\necho \"slow $1\" >> %s",
             h->trace);
    write_hook(h, "20-slow-in-drills", body);
    struct shutdown *s = new_shutdown(h);
    assert_int_equal(shutdown_start(s, "drill", clock_now_usec() + 60000000u, true), 0);
    usleep(200000);
    assert_int_equal(shutdown_get_stage(s), SHUTDOWN_STAGE_ANNOUNCE);
    uint64_t start = clock_now_usec();
    assert_int_equal(shutdown_start(s, "pump_stopped", start + 10000000u, false), 0);
    assert_int_equal(shutdown_wait(s, false, 15000000u), 0);
    assert_int_equal(shutdown_wait(s, true, 5000000u), 0);
    assert_true(clock_now_usec() - start < 5000000u);

    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, true, steps), 6);
    assert_false(steps[1].ok); /* its hook was killed */
    assert_non_null(strstr(steps[2].detail, "cancelled"));
    assert_non_null(strstr(steps[5].detail, "cancelled"));
    assert_int_equal(get_steps(s, false, steps), 6);
    assert_true(steps[5].ok);
    assert_non_null(strstr(read_all(h->trace), "halt 60\ncommand\n"));
    assert_int_equal(h->halts, 1);
    shutdown_free(s);
}

static void test_free_during_shutdown_still_halts(void **state)
{
    struct harness *h = *state;
    write_hook(h, "20-slow", "sleep 30");
    struct shutdown *s = new_shutdown(h);
    assert_int_equal(shutdown_start(s, "pump_stopped", clock_now_usec() + 60000000u, false), 0);
    usleep(200000);
    uint64_t start = clock_now_usec();
    shutdown_free(s);
    assert_true(clock_now_usec() - start < 3000000u);
    assert_int_equal(h->halts, 1);
    assert_non_null(strstr(read_all(h->trace), "command\n"));
    assert_int_equal(fake_count_calls(h->f, "POST"), 0);
}

/* A fake gpuqd with n running jobs, named in the config. */
static struct fake_gpuqd *with_gpuqd(struct harness *h, unsigned n)
{
    h->q = fake_gpuqd_new(n);
    h->cfg.gpuqd_socket = h->q->sock;
    return h->q;
}

/* The jobs come first, before the hooks: gpuqd is drained with a grace that leaves its SIGKILL
 * and requeue room inside the stage's share, and waits no longer than the stage lasts. */
static void test_jobs_drained_first_with_a_grace_that_fits(void **state)
{
    struct harness *h = *state;
    struct fake_gpuqd *q = with_gpuqd(h, 2);
    q->job_stop_s = 0.5;
    q->trace = h->trace;
    struct shutdown *s = new_shutdown(h);
    /* 16 s before the 1 s reserve; the jobs' share of it is 6/16: 6 s. */
    uint64_t deadline = clock_now_usec() + 17000000u;
    const double share = 6.0;
    assert_int_equal(shutdown_start(s, "pump_stopped", deadline, false), 0);
    usleep(200000);
    json_t *j = shutdown_status_json(s);
    assert_string_equal(json_string_value(json_object_get(j, "stage")), "jobs");
    assert_int_equal(json_integer_value(json_object_get(j, "stage_number")), 1);
    json_decref(j);
    assert_int_equal(shutdown_wait(s, false, 20000000u), 0);

    assert_string_equal(read_all(h->trace), "drain\nhook precritical\nhalt 60\ncommand\n");
    assert_int_equal(fake_gpuqd_count_calls(q, "POST /v1/drain"), 1);
    assert_true(q->grace_max <= share - 1.0 - share / 10 + 0.05);
    assert_true(q->grace_max >= share - 1.0 - share / 10 - 0.5);
    assert_true(q->wait > q->grace_max && q->wait <= share);
    assert_true(q->drained);
    assert_int_equal(q->running, 0);
    assert_int_equal(q->pending, 2);

    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, false, steps), 6);
    assert_int_equal(steps[0].stage, SHUTDOWN_STAGE_JOBS);
    assert_true(steps[0].ok);
    assert_non_null(strstr(steps[0].detail, "gpuqd drained: stopped 2 jobs (grace up to "));
    assert_non_null(strstr(steps[0].detail, "0 left running"));
    assert_true(steps[0].seconds >= 0.4 && steps[0].seconds < 2.0);
    for (size_t i = 1; i < 6; i++)
        assert_true(steps[i].ok);
    assert_true(saw(h, h->events, h->n_events, "shutdown stage jobs ok: gpuqd drained"));
    shutdown_free(s);
}

/* No gpuqd on the host (no socket file, or nothing listening on one left behind, or none
 * configured): the stage notes it and passes, and the shutdown goes on. */
static void test_jobs_skipped_without_gpuqd(void **state)
{
    struct harness *h = *state;
    h->cfg.gpuqd_socket = "/nonexistent/gpuq.sock";
    struct shutdown *s = new_shutdown(h);
    assert_int_equal(shutdown_start(s, "pump_stopped", clock_now_usec() + 10000000u, false), 0);
    assert_int_equal(shutdown_wait(s, false, 15000000u), 0);
    assert_string_equal(read_all(h->trace), "hook precritical\nhalt 60\ncommand\n");
    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, false, steps), 6);
    assert_true(steps[0].ok);
    assert_string_equal(steps[0].detail,
                        "gpuqd is not running (no socket at /nonexistent/gpuq.sock)");
    assert_true(steps[2].ok && steps[5].ok);
    shutdown_free(s);

    char stale[128];
    snprintf(stale, sizeof(stale), "%s/stale-gpuq.sock", h->dir);
    close(hung_socket(stale)); /* the file stays, nothing listens */
    h->cfg.gpuqd_socket = stale;
    s = new_shutdown(h);
    assert_int_equal(shutdown_start(s, "drill", clock_now_usec() + 10000000u, true), 0);
    assert_int_equal(shutdown_wait(s, true, 15000000u), 0);
    assert_int_equal(get_steps(s, true, steps), 6);
    assert_true(steps[0].ok);
    char expect[200];
    snprintf(expect, sizeof(expect), "gpuqd is not running (connection refused at %s)", stale);
    assert_string_equal(steps[0].detail, expect);
    shutdown_free(s);

    h->cfg.gpuqd_socket = "";
    s = new_shutdown(h);
    assert_int_equal(shutdown_start(s, "drill", clock_now_usec() + 10000000u, true), 0);
    assert_int_equal(shutdown_wait(s, true, 15000000u), 0);
    assert_int_equal(get_steps(s, true, steps), 6);
    assert_true(steps[0].ok);
    assert_string_equal(steps[0].detail, "no job queue configured");
    shutdown_free(s);
}

/* A drill stops no job and leaves gpuqd admitting jobs: it only asks how many run. */
static void test_drill_only_asks_gpuqd(void **state)
{
    struct harness *h = *state;
    struct fake_gpuqd *q = with_gpuqd(h, 3);
    struct shutdown *s = new_shutdown(h);
    assert_int_equal(shutdown_start(s, "drill", clock_now_usec() + 30000000u, true), 0);
    assert_int_equal(shutdown_wait(s, true, 10000000u), 0);
    assert_int_equal(fake_gpuqd_count_calls(q, "POST"), 0);
    assert_int_equal(fake_gpuqd_count_calls(q, "GET /v1/status"), 1);
    assert_false(q->drained);
    assert_int_equal(q->running, 3);
    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, true, steps), 6);
    assert_true(steps[0].ok);
    assert_string_equal(steps[0].detail, "would drain gpuqd and stop 3 running jobs");
    shutdown_free(s);
}

/* gpuqd answering with an error fails the stage, and every later stage still runs. */
static void test_gpuqd_failure_does_not_stop_later_stages(void **state)
{
    struct harness *h = *state;
    with_gpuqd(h, 2)->mode = FAKE_GPUQD_FAIL;
    struct shutdown *s = new_shutdown(h);
    assert_int_equal(shutdown_start(s, "pump_stopped", clock_now_usec() + 10000000u, false), 0);
    assert_int_equal(shutdown_wait(s, false, 15000000u), 0);
    assert_string_equal(read_all(h->trace), "hook precritical\nhalt 60\ncommand\n");
    assert_int_equal(fake_count_calls(h->f, "POST"), 2); /* both containers stopped */
    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, false, steps), 6);
    assert_false(steps[0].ok);
    assert_non_null(strstr(steps[0].detail, "POST /v1/drain: HTTP 500: store is read-only"));
    for (size_t i = 1; i < 6; i++)
        assert_true(steps[i].ok);
    assert_true(saw(h, h->logs, h->n_logs, "shutdown stage jobs: FAILED"));
    shutdown_free(s);
}

/* A gpuqd that accepts and never answers costs its stage's share, no more: the later stages
 * still finish before the cut. */
static void test_gpuqd_that_hangs_costs_only_its_share(void **state)
{
    struct harness *h = *state;
    char path[128];
    snprintf(path, sizeof(path), "%s/hung-gpuq.sock", h->dir);
    int fd = hung_socket(path);
    h->cfg.gpuqd_socket = path;
    h->cfg.halt_reserve_s = 0.5;
    struct shutdown *s = new_shutdown(h);
    uint64_t deadline = clock_now_usec() + 4000000u;
    assert_int_equal(shutdown_start(s, "flow_low", deadline, false), 0);
    assert_int_equal(shutdown_wait(s, false, 10000000u), 0);
    assert_true(clock_now_usec() < deadline);
    assert_string_equal(read_all(h->trace), "hook precritical\nhalt 60\ncommand\n");
    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, false, steps), 6);
    assert_false(steps[0].ok);
    assert_non_null(strstr(steps[0].detail, path));
    /* Its share: 6/16 of the 3.5 s before the reserve. */
    assert_true(steps[0].seconds > 1.0 && steps[0].seconds < 1.6);
    assert_true(steps[2].ok && steps[4].ok && steps[5].ok);
    shutdown_free(s);
    close(fd);
}

/* Jobs that do not go down within the stage (stuck even for SIGKILL) fail it with their count;
 * the shutdown goes on. */
static void test_jobs_left_running_fail_the_stage(void **state)
{
    struct harness *h = *state;
    with_gpuqd(h, 2)->unkillable = true;
    struct shutdown *s = new_shutdown(h);
    /* 8 s before the reserve: the jobs' share is 3 s. */
    assert_int_equal(shutdown_start(s, "pump_stopped", clock_now_usec() + 9000000u, false), 0);
    assert_int_equal(shutdown_wait(s, false, 15000000u), 0);
    struct shutdown_step steps[SHUTDOWN_N_STEPS];
    assert_int_equal(get_steps(s, false, steps), 6);
    assert_false(steps[0].ok);
    assert_non_null(strstr(steps[0].detail, "stopped 2 jobs"));
    assert_non_null(strstr(steps[0].detail, "2 still running at the end of the stage"));
    assert_true(steps[0].seconds > 2.0 && steps[0].seconds <= 3.1);
    assert_non_null(strstr(read_all(h->trace), "halt 60\ncommand\n"));
    shutdown_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_real_shutdown_runs_every_stage_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_grace_is_configured_value_when_time_allows, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_hanging_docker_does_not_delay_command, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_engine_that_never_answers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drill_stops_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_drill_makes_every_start_a_drill, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_stage_visible_while_running, setup, teardown),
        cmocka_unit_test_setup_teardown(test_deadline_passed_still_halts_and_runs_command, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_no_engine_on_the_host, setup, teardown),
        cmocka_unit_test_setup_teardown(test_halt_retried_while_the_link_resyncs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_halt_gives_up_before_the_reserve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_halt_never_shortens_the_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failures_do_not_stop_the_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_real_shutdown_cancels_drill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_free_during_shutdown_still_halts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_jobs_drained_first_with_a_grace_that_fits, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_jobs_skipped_without_gpuqd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drill_only_asks_gpuqd, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gpuqd_failure_does_not_stop_later_stages, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_gpuqd_that_hangs_costs_only_its_share, setup,
                                        teardown),
        cmocka_unit_test_setup_teardown(test_jobs_left_running_fail_the_stage, setup, teardown),
    };
    return test_run_cases(tests);
}
