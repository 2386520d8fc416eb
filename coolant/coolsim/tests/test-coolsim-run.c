/* The coolsim program end to end: started as the daemon's tests start it, talked to over its
 * pty link with the protocol module, judged by its exit status and JSON report. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "lib/clock.h"
#include "ctl-proto.h"

extern char **environ;

static const char *coolsim_path;
static char dir[64], link_path[128], eeprom_path[128], report_path[128];
static pid_t child = -1;
static int fd = -1;
static struct ctl_reader reader;
static uint16_t next_id = 1;

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/test-coolsim-run.XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(link_path, sizeof(link_path), "%s/ttyCOOL", dir);
    snprintf(eeprom_path, sizeof(eeprom_path), "%s/eeprom", dir);
    snprintf(report_path, sizeof(report_path), "%s/report.json", dir);
    ctl_reader_init(&reader);
    return 0;
}

static int teardown(void **state)
{
    if (fd >= 0)
        close(fd);
    fd = -1;
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    child = -1;
    unlink(eeprom_path);
    unlink(report_path);
    unlink(link_path);
    rmdir(dir);
    return 0;
}

/* Writes an EEPROM image with a short cut delay, so that a run takes seconds. */
static void short_cut_delay(void)
{
    char body[] = "pumps=2\nlimit.cut_delay=5\n";
    FILE *f = fopen(eeprom_path, "we");
    assert_non_null(f);
    fprintf(f, "%scrc=%04X\n", body, ctl_crc16(body, strlen(body)));
    fclose(f);
}

static void start(const char *scenario, const char *duration)
{
    char *argv[] = {
        (char *)coolsim_path, "--scenario",  (char *)scenario, "--link",    link_path,
        "--eeprom",           eeprom_path,   "--report",       report_path, "--duration",
        (char *)duration,     "--log-level", "warning",        NULL};
    posix_spawn_file_actions_t fa;

    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
    assert_int_equal(posix_spawn(&child, coolsim_path, &fa, NULL, argv, environ), 0);
    posix_spawn_file_actions_destroy(&fa);
    for (int i = 0; i < 100 && fd < 0; i++) {
        fd = open(link_path, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
            usleep(50000);
    }
    assert_true(fd >= 0);
    struct termios t;
    assert_int_equal(tcgetattr(fd, &t), 0);
    cfmakeraw(&t);
    assert_int_equal(tcsetattr(fd, TCSANOW, &t), 0);
}

/* Waits up to timeout_ms for a frame of kind/verb (and id for replies); returns 1 when found,
 * 0 on timeout or when the line hung up. */
static int wait_frame(char kind, const char *verb, int id, unsigned timeout_ms,
                      struct ctl_frame *ret)
{
    uint64_t end = clock_now_msec() + timeout_ms;
    uint8_t buf[256];

    while (clock_now_msec() < end) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(end - clock_now_msec())) <= 0)
            continue;
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n <= 0)
            return 0;
        for (ssize_t i = 0; i < n; i++)
            if (ctl_reader_push(&reader, buf[i], ret) == 1 && ret->kind == kind &&
                strcmp(ret->verb, verb) == 0 && (id < 0 || ret->id == id))
                return 1;
    }
    return 0;
}

static void request(const char *verb, const char *key, const char *value, struct ctl_frame *ret)
{
    struct ctl_writer w;
    uint16_t id = next_id++;

    ctl_writer_begin(&w, CTL_KIND_REQUEST, id, verb);
    if (key)
        ctl_writer_add(&w, key, value);
    int n = ctl_writer_finish(&w);
    assert_true(n > 0);
    assert_int_equal(write(fd, w.buf, (size_t)n), n);
    assert_int_equal(wait_frame(CTL_KIND_REPLY, "OK", id, 2000, ret), 1);
}

static int finish(void)
{
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    child = -1;
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

static json_t *report(void)
{
    json_error_t je;
    json_t *root = json_load_file(report_path, 0, &je);
    assert_non_null(root);
    return root;
}

static void test_halt_makes_an_orderly_cut(void **state)
{
    struct ctl_frame f;

    short_cut_delay();
    start("pump-failure", "60");
    request("HELLO", "proto", "1", &f);
    assert_string_equal(ctl_frame_get(&f, "pumps"), "2");
    /* The pump stops 5 s in; the alarm follows within a few seconds, with the cut delay. */
    assert_int_equal(wait_frame(CTL_KIND_EVENT, "ALARM", -1, 12000, &f), 1);
    assert_string_equal(ctl_frame_get(&f, "level"), "precritical");
    assert_string_equal(ctl_frame_get(&f, "reason"), "pump_stopped");
    assert_string_equal(ctl_frame_get(&f, "cut_in"), "5");
    request("HALT", "within", "3", &f);
    assert_string_equal(ctl_frame_get(&f, "cut_in"), "3");
    assert_int_equal(wait_frame(CTL_KIND_EVENT, "POWER", -1, 5000, &f), 1);
    assert_string_equal(ctl_frame_get(&f, "orderly"), "1");
    assert_int_equal(finish(), 0);

    json_t *r = report();
    assert_string_equal(json_string_value(json_object_get(r, "end")), "power_cut");
    assert_true(json_is_true(json_object_get(r, "orderly")));
    assert_int_equal(json_integer_value(json_object_get(json_object_get(r, "requests"), "HALT")),
                     1);
    json_decref(r);
}

static void test_cut_without_halt_exits_2(void **state)
{
    struct ctl_frame f;

    short_cut_delay();
    start("pump-failure", "60");
    assert_int_equal(wait_frame(CTL_KIND_EVENT, "POWER", -1, 20000, &f), 1);
    assert_string_equal(ctl_frame_get(&f, "orderly"), "0");
    assert_int_equal(finish(), 2);
    /* The link goes with the simulator. */
    assert_int_equal(access(link_path, F_OK), -1);
}

static void test_settings_survive_restart(void **state)
{
    struct ctl_frame f;

    start("normal", "3");
    request("SET", "limit.warning", "41.5", &f);
    assert_string_equal(ctl_frame_get(&f, "limit.warning"), "41.50");
    assert_int_equal(finish(), 0);
    close(fd);
    fd = -1;
    ctl_reader_init(&reader);

    start("normal", "2");
    request("GET", "key", "limit.warning", &f);
    assert_string_equal(ctl_frame_get(&f, "limit.warning"), "41.50");
    request("STATUS", NULL, NULL, &f);
    assert_string_equal(ctl_frame_get(&f, "level"), "normal");
    assert_int_equal(finish(), 0);
}

int main(int argc, char **argv)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_halt_makes_an_orderly_cut, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cut_without_halt_exits_2, setup, teardown),
        cmocka_unit_test_setup_teardown(test_settings_survive_restart, setup, teardown),
    };
    if (argc != 2) {
        fprintf(stderr, "usage: %s PATH-TO-COOLSIM\n", argv[0]);
        return 1;
    }
    coolsim_path = argv[1];
    return test_run_cases(tests);
}
