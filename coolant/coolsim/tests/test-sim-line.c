/* The pty behind a symlink: data both ways, hangups, unplug and replug. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "sim-line.h"

static char dir[64];
static char link_path[128];

static int setup(void **state)
{
    snprintf(dir, sizeof(dir), "/tmp/test-sim-line.XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(link_path, sizeof(link_path), "%s/ttyCOOL", dir);
    return 0;
}

static int teardown(void **state)
{
    unlink(link_path);
    rmdir(dir);
    return 0;
}

static int open_host(void)
{
    int fd = open(link_path, O_RDWR | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
    assert_true(fd >= 0);
    return fd;
}

/* Reads what is available on fd within timeout_ms; returns the count (0 at EOF or nothing). */
static ssize_t read_wait(int fd, char *buf, size_t size, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) <= 0)
        return 0;
    ssize_t n = read(fd, buf, size);
    return n < 0 ? -errno : n;
}

static ssize_t line_read_wait(struct sim_line *l, char *buf, size_t size)
{
    for (int i = 0; i < 100; i++) {
        ssize_t n = sim_line_read(l, buf, size);
        if (n != 0)
            return n;
        usleep(10000);
    }
    return 0;
}

static void test_link_and_both_directions(void **state)
{
    struct sim_line l;
    struct errmsg e;
    char target[64], buf[64];

    assert_int_equal(sim_line_open(&l, link_path, &e), 0);
    ssize_t n = readlink(link_path, target, sizeof(target) - 1);
    assert_true(n > 0);
    target[n] = '\0';
    assert_string_equal(target, l.slave);
    assert_false(sim_line_check(&l)); /* nobody has it open yet */

    int host = open_host();
    assert_true(sim_line_check(&l));
    sim_line_write(&l, "$E 1 HB*0000\r\n", 14);
    assert_int_equal(read_wait(host, buf, sizeof(buf), 1000), 14);
    assert_memory_equal(buf, "$E 1 HB*0000\r\n", 14);
    /* Raw mode: the host's bytes arrive unchanged, no echo back to the host. */
    assert_int_equal(write(host, "$Q 1 PING\r\n", 11), 11);
    assert_int_equal(line_read_wait(&l, buf, sizeof(buf)), 11);
    assert_memory_equal(buf, "$Q 1 PING\r\n", 11);
    assert_int_equal(read_wait(host, buf, sizeof(buf), 50), 0);
    close(host);
    sim_line_close(&l);
    assert_int_equal(access(link_path, F_OK), -1);
}

static void test_output_dropped_while_nobody_listens(void **state)
{
    struct sim_line l;
    struct errmsg e;
    char buf[64];

    assert_int_equal(sim_line_open(&l, link_path, &e), 0);
    sim_line_check(&l);
    sim_line_write(&l, "stale\n", 6);
    assert_int_equal(l.bytes_dropped, 6);
    int host = open_host();
    sim_line_check(&l);
    sim_line_write(&l, "fresh\n", 6);
    /* The host sees only what was sent while it listened, as with a real USB device. */
    assert_int_equal(read_wait(host, buf, sizeof(buf), 1000), 6);
    assert_memory_equal(buf, "fresh\n", 6);
    close(host);
    assert_false(sim_line_check(&l));
    sim_line_close(&l);
}

static void test_unplug_and_replug(void **state)
{
    struct sim_line l;
    struct errmsg e;
    char buf[64], first[64];

    assert_int_equal(sim_line_open(&l, link_path, &e), 0);
    snprintf(first, sizeof(first), "%s", l.slave);
    int host = open_host();
    assert_true(sim_line_check(&l));

    sim_line_unplug(&l);
    /* The daemon's fd hangs up and the device node is gone. */
    ssize_t n = read_wait(host, buf, sizeof(buf), 1000);
    assert_true(n == 0 || n == -EIO);
    struct pollfd p = {.fd = host, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 1);
    assert_true(p.revents & POLLHUP);
    assert_int_equal(access(link_path, F_OK), -1);
    assert_false(sim_line_check(&l));
    sim_line_write(&l, "x", 1);
    assert_int_equal(sim_line_read(&l, buf, sizeof(buf)), 0);
    close(host);

    assert_int_equal(sim_line_replug(&l, &e), 0);
    assert_int_equal(access(link_path, F_OK), 0);
    host = open_host();
    assert_true(sim_line_check(&l));
    sim_line_write(&l, "back\n", 5);
    assert_int_equal(read_wait(host, buf, sizeof(buf), 1000), 5);
    close(host);
    sim_line_close(&l);
}

static void test_replaces_stale_link_only(void **state)
{
    struct sim_line l;
    struct errmsg e;

    assert_int_equal(symlink("/dev/pts/nonexistent", link_path), 0);
    assert_int_equal(sim_line_open(&l, link_path, &e), 0);
    sim_line_close(&l);

    FILE *f = fopen(link_path, "we");
    assert_non_null(f);
    fclose(f);
    assert_int_equal(sim_line_open(&l, link_path, &e), -EEXIST);
    assert_non_null(strstr(e.text, link_path));
    sim_line_close(&l); /* safe after a failed open */
    struct stat st;
    assert_int_equal(lstat(link_path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
}

static void test_close_leaves_foreign_link(void **state)
{
    struct sim_line l;
    struct errmsg e;
    char target[64];

    assert_int_equal(sim_line_open(&l, link_path, &e), 0);
    /* Another simulator took the path over: ours must not delete its link. */
    unlink(link_path);
    assert_int_equal(symlink("/dev/null", link_path), 0);
    sim_line_close(&l);
    ssize_t n = readlink(link_path, target, sizeof(target) - 1);
    assert_true(n > 0);
    target[n] = '\0';
    assert_string_equal(target, "/dev/null");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_link_and_both_directions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_dropped_while_nobody_listens, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unplug_and_replug, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replaces_stale_link_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_close_leaves_foreign_link, setup, teardown),
    };
    return test_run_cases(tests);
}
