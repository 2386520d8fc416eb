/* lib/clock: the three units read one clock, it does not go back, and deadlines are normalised
 * timespecs that pthread_cond_timedwait() accepts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test-main.h"
#include <time.h>

#include "lib/clock.h"

static void test_units_agree_and_never_go_back(void **state)
{
    uint64_t us = clock_now_usec(), ms = clock_now_msec();
    double s = clock_now_sec();
    /* Read in that order, each is at or after the one before, within a second. */
    assert_true(ms * 1000u + 1000u >= us);
    assert_true(ms * 1000u < us + 1000000u);
    assert_true(s * 1e3 + 1.0 >= (double)ms);
    assert_true(s * 1e3 < (double)ms + 1000.0);
    struct timespec ts;
    assert_int_equal(clock_gettime(CLOCK_MONOTONIC, &ts), 0);
    assert_true((uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u >= us);
    uint64_t last = clock_now_usec();
    for (int i = 0; i < 10000; i++) {
        uint64_t now = clock_now_usec();
        assert_true(now >= last);
        last = now;
    }
}

static void test_deadline_is_normalised(void **state)
{
    for (uint64_t ms = 0; ms < 3000; ms += 7) {
        uint64_t before = clock_now_usec();
        struct timespec d = clock_deadline_msec(ms);
        uint64_t after = clock_now_usec();
        assert_true(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
        uint64_t at = (uint64_t)d.tv_sec * 1000000u + (uint64_t)d.tv_nsec / 1000u;
        assert_true(at >= before + ms * 1000u);
        assert_true(at <= after + ms * 1000u);
    }
    struct timespec far = clock_deadline_msec(86400000u);
    assert_true(far.tv_sec >= 86400);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units_agree_and_never_go_back),
        cmocka_unit_test(test_deadline_is_normalised),
    };
    return test_run_cases(tests);
}
