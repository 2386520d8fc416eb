/* coold's configuration: defaults, every key, and the errors a person makes in it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "coold-config.h"
#include "lib/macro.h"

static char path[64];

static int write_config(const char *text)
{
    snprintf(path, sizeof(path), "/tmp/test-coold-config.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return 0;
}

static int load(const char *text, struct coold_config *cfg, struct errmsg *e)
{
    write_config(text);
    int r = coold_config_load(path, cfg, e);
    unlink(path);
    return r;
}

static void test_defaults(void **state)
{
    struct coold_config cfg;
    struct errmsg e = {{0}};
    assert_int_equal(load("", &cfg, &e), 0);
    assert_string_equal(cfg.device, "/dev/ttyACM0");
    assert_int_equal(cfg.baud, 115200);
    assert_true(cfg.poll_interval_s == 1.0);
    assert_true(cfg.stale_after_s == 3.0 && cfg.dead_after_s == 10.0);
    assert_string_equal(cfg.metrics_listen, "127.0.0.1:9420");
    assert_string_equal(cfg.control_socket, "/run/coold/coold.sock");
    assert_null(cfg.admin_group);
    assert_string_equal(cfg.shutdown_command, "systemctl poweroff");
    assert_string_equal(cfg.docker_socket, "/run/docker.sock");
    assert_string_equal(cfg.gpuqd_socket, "/run/gpuq/gpuq.sock");
    assert_true(cfg.container_grace_s == 20.0 && cfg.halt_within_s == 60.0);
    assert_false(cfg.drill);
    coold_config_done(&cfg);
}

/* An empty gpuqd_socket says this host has no job queue (the jobs stage is skipped). */
static void test_no_job_queue(void **state)
{
    struct coold_config cfg;
    struct errmsg e = {{0}};
    assert_int_equal(load("[shutdown]\ngpuqd_socket =\n", &cfg, &e), 0);
    assert_string_equal(cfg.gpuqd_socket, "");
    coold_config_done(&cfg);
}

static void test_every_key(void **state)
{
    struct coold_config cfg;
    struct errmsg e = {{0}};
    assert_int_equal(load("[controller]\ndevice = /dev/ttyUSB3\nbaud = 9600\n"
                          "poll_interval = 500ms\nstale_after = 2s\ndead_after = 1m\n"
                          "[metrics]\nlisten = [::1]:9000\n"
                          "[control]\nsocket = /tmp/c.sock\nadmin_group = coolant\n"
                          "audit_log = /tmp/audit.log\n"
                          "[shutdown]\ncommand = /sbin/poweroff\nhooks_dir = /tmp/h\n"
                          "docker_socket = /tmp/d.sock\ngpuqd_socket = /tmp/q.sock\n"
                          "container_grace = 45s\n"
                          "halt_within = 2m\nhalt_reserve = 5s\ndrill = yes\n",
                          &cfg, &e),
                     0);
    assert_string_equal(cfg.device, "/dev/ttyUSB3");
    assert_int_equal(cfg.baud, 9600);
    assert_true(cfg.poll_interval_s == 0.5 && cfg.stale_after_s == 2 && cfg.dead_after_s == 60);
    assert_string_equal(cfg.metrics_listen, "[::1]:9000");
    assert_string_equal(cfg.admin_group, "coolant");
    assert_string_equal(cfg.shutdown_command, "/sbin/poweroff");
    assert_string_equal(cfg.gpuqd_socket, "/tmp/q.sock");
    assert_true(cfg.container_grace_s == 45 && cfg.halt_within_s == 120);
    assert_true(cfg.halt_reserve_s == 5);
    assert_true(cfg.drill);
    coold_config_done(&cfg);
}

/* Each bad file is refused, and the message names what was wrong. */
static void test_errors_name_the_problem(void **state)
{
    static const struct {
        const char *text, *expect;
    } cases[] = {
        {"[controller]\ndevcie = /dev/x\n", "devcie"},
        {"[controller]\nbaud = 12345\n", "baud 12345"},
        {"[controller]\npoll_interval = fast\n", "poll_interval"},
        {"[controller]\nstale_after = 20s\ndead_after = 10s\n", "stale_after must be below"},
        {"[controller]\npoll_interval = 5s\n", "poll_interval must be below stale_after"},
        {"[controller]\nstale_after = 500ms\ndead_after = 1s\npoll_interval = 100ms\n",
         "dead_after must be at least 3s"},
        {"[shutdown]\ncommand =\n", "command must not be empty"},
        {"[shutdown]\ncontainer_grace = -3s\n", "container_grace"},
        {"[shutdown]\ndrill = perhaps\n", "drill"},
        {"[shutdown]\n\ngpuqd_socket = run/gpuq.sock\n",
         ":3: [shutdown] gpuqd_socket 'run/gpuq.sock' must be an absolute path"},
        {"[shutdown]\nhalt_within = 1h\n", "halt_within"},
        {"[shutdown]\nhalt_reserve = 1d\n", "halt_reserve"},
        {"[metrics]\nlisten = 1\nlisten = 2\n", "listen"},
        {"[contrl]\nsocket = /x\n", "contrl"},
        {"[metrics]\n\nlisten = 127.0.0.1:99999\n", ":3: [metrics] listen"},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        struct coold_config cfg;
        struct errmsg e = {{0}};
        int r = load(cases[i].text, &cfg, &e);
        if (r >= 0 || !strstr(e.text, cases[i].expect))
            fail_msg("case %zu: r=%d message '%s' lacks '%s'", i, r, e.text, cases[i].expect);
    }
}

static void test_missing_file(void **state)
{
    struct coold_config cfg;
    struct errmsg e = {{0}};
    assert_true(coold_config_load("/nonexistent/coold.conf", &cfg, &e) < 0);
    assert_non_null(strstr(e.text, "/nonexistent/coold.conf"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),     cmocka_unit_test(test_every_key),
        cmocka_unit_test(test_no_job_queue), cmocka_unit_test(test_errors_name_the_problem),
        cmocka_unit_test(test_missing_file),
    };
    return test_run_cases(tests);
}
