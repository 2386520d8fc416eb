/* Skipping a cmocka test, for every component's unit tests: test_skip("why") in place of
 * cmocka's skip(). A skipped test proves nothing, and cmocka counts it with the passes, so:
 *
 *  - the reason is printed ("skipped: why") next to cmocka's "[  SKIPPED ]" line, which
 *    scripts/test-results.py counts and lists;
 *  - where GPUNODE_TEST_NO_SKIP is set to anything but "" or "0" (scripts/test.sh sets it in CI,
 *    whose machine has every tool, privilege and kernel feature the tests ask for), a skip is a
 *    failure that names the reason: on such a machine the reason not holding is the bug.
 *
 * Include after <cmocka.h>. */
#pragma once

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static inline bool test_skips_fail(void)
{
    const char *v = getenv("GPUNODE_TEST_NO_SKIP");
    return v && *v && strcmp(v, "0") != 0;
}

#define test_skip(why)                                                                             \
    do {                                                                                           \
        if (test_skips_fail())                                                                     \
            fail_msg("would be skipped (%s), but GPUNODE_TEST_NO_SKIP makes a skip a failure",     \
                     (why));                                                                       \
        print_message("skipped: %s\n", (why));                                                     \
        skip();                                                                                    \
    } while (0)
