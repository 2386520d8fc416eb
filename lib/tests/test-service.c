/* lib/service: signals read from the signalfd (a stop wins over a reload), and the watchdog's
 * pacing (a ping every half interval, the loop's sleep bounded by the next one). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "lib/service.h"

static void test_signals(void **state)
{
    int fd = service_signals_open();
    assert_true(fd >= 0);
    assert_int_equal(service_signals_read(fd), SERVICE_SIGNAL_NONE);
    /* Blocked, so they wait in the signalfd instead of killing the test. */
    raise(SIGHUP);
    assert_int_equal(service_signals_read(fd), SERVICE_SIGNAL_RELOAD);
    raise(SIGHUP);
    raise(SIGTERM);
    assert_int_equal(service_signals_read(fd), SERVICE_SIGNAL_STOP);
    raise(SIGINT);
    assert_int_equal(service_signals_read(fd), SERVICE_SIGNAL_STOP);
    assert_int_equal(service_signals_read(fd), SERVICE_SIGNAL_NONE);
    /* A peer that hangs up does not kill a daemon. */
    assert_ptr_equal(signal(SIGPIPE, SIG_IGN), SIG_IGN);
    close(fd);
}

static void test_watchdog_pacing(void **state)
{
    struct service_watchdog w;
    unsetenv("WATCHDOG_USEC");
    service_watchdog_init(&w);
    assert_int_equal(w.interval_usec, 0);
    assert_int_equal(service_watchdog_timeout_ms(&w, 123456), -1);
    setenv("WATCHDOG_USEC", "2000000", 1);
    unsetenv("WATCHDOG_PID");
    service_watchdog_init(&w);
    assert_int_equal(w.interval_usec, 2000000);
    /* Never pinged: due at once; after a ping at t, due at t + 1 s (half the interval). */
    assert_int_equal(service_watchdog_timeout_ms(&w, 5000000), 0);
    service_watchdog_ping(&w, 5000000);
    assert_int_equal(w.last_ping_usec, 5000000);
    assert_int_equal(service_watchdog_timeout_ms(&w, 5000000), 1000);
    assert_int_equal(service_watchdog_timeout_ms(&w, 5999500), 1);
    service_watchdog_ping(&w, 5500000); /* too early: no ping */
    assert_int_equal(w.last_ping_usec, 5000000);
    service_watchdog_ping(&w, 6000000);
    assert_int_equal(w.last_ping_usec, 6000000);
    unsetenv("WATCHDOG_USEC");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signals),
        cmocka_unit_test(test_watchdog_pacing),
    };
    return test_run_cases(tests);
}
