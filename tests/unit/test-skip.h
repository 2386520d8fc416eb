/* Skipping a cmocka test, for every component's unit tests: test_skip("why") in place of
 * cmocka's skip(). A skipped test proves nothing, and cmocka counts it with the passes, so:
 *
 *  - the reason is printed ("skipped: why") next to cmocka's "[  SKIPPED ]" line, which
 *    scripts/test-results.py counts and lists;
 *  - where GPUNODE_TEST_NO_SKIP is set to anything but "" or "0" (scripts/test.sh sets it in CI,
 *    whose machine has every tool, privilege and kernel feature the tests ask for), a skip is a
 *    failure that names the reason: on such a machine the reason not holding is the bug.
 *
 * A whole program that cannot run here (no user namespaces, say) ends with
 * `return test_skip_program("why");` from main(), before cmocka runs anything: exit status 77,
 * which meson counts as a skipped test, or 1 where skips are failures. A skip() in a setup
 * function would be an error for every case instead.
 *
 * Include after <cmocka.h>. */
#pragma once

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static inline bool test_skips_fail(void)
{
    const char *v = getenv("GPUNODE_TEST_NO_SKIP");
    return v && *v && strcmp(v, "0") != 0;
}

static inline int test_skip_program(const char *why)
{
    if (test_skips_fail()) {
        fprintf(stderr, "would be skipped (%s), but GPUNODE_TEST_NO_SKIP makes a skip a failure\n",
                why);
        return 1;
    }
    fprintf(stderr, "skipped: %s\n", why);
    return 77;
}

#define test_skip(why)                                                                             \
    do {                                                                                           \
        if (test_skips_fail())                                                                     \
            fail_msg("would be skipped (%s), but GPUNODE_TEST_NO_SKIP makes a skip a failure",     \
                     (why));                                                                       \
        print_message("skipped: %s\n", (why));                                                     \
        skip();                                                                                    \
    } while (0)
