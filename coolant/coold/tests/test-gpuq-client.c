/* The gpuqd client: its reading of gpuqd's replies (table-driven), and the calls against a fake
 * gpuqd, one that is not there, one that refuses, and one that never answers. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test-main.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fake-docker.h"
#include "fake-gpuqd.h"
#include "gpuq-client.h"
#include "lib/clock.h"
#include "lib/macro.h"

static void test_parse_drain(void **state)
{
    static const struct {
        long status;
        const char *body;
        int r;
        unsigned stopped, running;
        const char *message;
    } cases[] = {
        {200, "{\"drained\": true, \"stopped\": 3, \"running\": 1}", 0, 3, 1, NULL},
        {200, "{\"drained\": true, \"stopped\": 0, \"running\": 0}", 0, 0, 0, NULL},
        {403, "{\"error\": \"only root may drain or resume the node\"}", -EPROTO, 0, 0,
         "HTTP 403: only root may drain or resume the node"},
        {500, NULL, -EPROTO, 0, 0, "HTTP 500: (no message)"},
        {200, NULL, -EPROTO, 0, 0, "not a JSON object"},
        {200, "[1, 2]", -EPROTO, 0, 0, "not a JSON object"},
        {200, "{\"running\": 0}", -EPROTO, 0, 0, "no \"stopped\" count"},
        {200, "{\"stopped\": -1, \"running\": 0}", -EPROTO, 0, 0, "no \"stopped\" count"},
        {200, "{\"stopped\": 1, \"running\": 1.5}", -EPROTO, 0, 0, "no \"running\" count"},
        {200, "{\"stopped\": 1, \"running\": 4294967296}", -EPROTO, 0, 0, "no \"running\""},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        json_t *j = cases[i].body ? json_loads(cases[i].body, 0, NULL) : NULL;
        struct gpuqc_drain_result res = {.stopped = 77, .running = 77};
        struct errmsg e = {{0}};
        int r = gpuqc_parse_drain(cases[i].status, j, &res, &e);
        json_decref(j);
        if (r != cases[i].r)
            fail_msg("case %zu: r=%d, expected %d (%s)", i, r, cases[i].r, e.text);
        if (r == 0 && (res.stopped != cases[i].stopped || res.running != cases[i].running))
            fail_msg("case %zu: stopped %u running %u", i, res.stopped, res.running);
        if (r < 0 && (res.stopped != 77 || !strstr(e.text, cases[i].message)))
            fail_msg("case %zu: message '%s' lacks '%s', or the result was written", i, e.text,
                     cases[i].message);
    }
}

static void test_parse_status(void **state)
{
    static const struct {
        long status;
        const char *body;
        int r;
        unsigned running, pending;
        bool drained;
    } cases[] = {
        {200,
         "{\"version\": \"1\", \"drained\": false, \"jobs\": {\"PENDING\": 4, \"RUNNING\": 2, "
         "\"STOPPING\": 1}, \"gpus_total\": 8}",
         0, 3, 4, false},
        /* States gpuqd has no job in may be left out; states coold does not know are ignored. */
        {200, "{\"drained\": true, \"jobs\": {\"SUSPENDED\": 9}}", 0, 0, 0, true},
        {200, "{\"drained\": false, \"jobs\": {\"RUNNING\": \"2\"}}", -EPROTO, 0, 0, false},
        {200, "{\"drained\": false, \"jobs\": {\"RUNNING\": 4294967295, \"STOPPING\": 1}}", -EPROTO,
         0, 0, false},
        {200, "{\"drained\": false}", -EPROTO, 0, 0, false},
        {200, "{\"jobs\": {}}", -EPROTO, 0, 0, false},
        {200, NULL, -EPROTO, 0, 0, false},
        {404, "{\"error\": \"no such endpoint\"}", -EPROTO, 0, 0, false},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        json_t *j = cases[i].body ? json_loads(cases[i].body, 0, NULL) : NULL;
        struct gpuqc_status st = {.running = 77};
        struct errmsg e = {{0}};
        int r = gpuqc_parse_status(cases[i].status, j, &st, &e);
        json_decref(j);
        if (r != cases[i].r)
            fail_msg("case %zu: r=%d, expected %d (%s)", i, r, cases[i].r, e.text);
        if (r == 0 && (st.running != cases[i].running || st.pending != cases[i].pending ||
                       st.drained != cases[i].drained))
            fail_msg("case %zu: running %u pending %u drained %d", i, st.running, st.pending,
                     st.drained);
        if (r < 0 && (st.running != 77 || !e.text[0]))
            fail_msg("case %zu: no message, or the result was written", i);
    }
}

static void test_drain_against_fake(void **state)
{
    struct fake_gpuqd *f = fake_gpuqd_new(2);
    f->job_stop_s = 0.2;
    struct gpuqc_drain_result res;
    struct errmsg e = {{0}};
    assert_int_equal(gpuqc_drain(f->sock, 7.5, 3.25, clock_now_usec() + 5000000u, &res, &e), 0);
    assert_int_equal(res.stopped, 2);
    assert_int_equal(res.running, 0);
    assert_true(f->grace_max == 7.5 && f->wait == 3.25);
    assert_int_equal(fake_gpuqd_count_calls(f, "POST /v1/drain"), 1);

    struct gpuqc_status st;
    assert_int_equal(gpuqc_get_status(f->sock, clock_now_usec() + 2000000u, &st, &e), 0);
    assert_true(st.drained);
    assert_int_equal(st.running, 0);
    assert_int_equal(st.pending, 2);
    fake_gpuqd_free(f);
}

static void test_errors(void **state)
{
    struct gpuqc_drain_result res;
    struct gpuqc_status st;
    struct errmsg e = {{0}};
    uint64_t later = clock_now_usec() + 2000000u;

    /* gpuqd reads a grace_max of 0 as "no cap": never sent. */
    assert_int_equal(gpuqc_drain("/nonexistent/gpuq.sock", 0, 1, later, &res, &e), -EINVAL);

    assert_int_equal(gpuqc_drain("/nonexistent/gpuq.sock", 1, 1, later, &res, &e), -ENOENT);
    assert_non_null(strstr(e.text, "gpuqd at /nonexistent/gpuq.sock: POST /v1/drain"));

    /* A socket file left behind by a gpuqd that is gone: nothing listens on it. */
    char dir[] = "/tmp/test-gpuq-client-XXXXXX";
    assert_non_null(mkdtemp(dir));
    char stale[64];
    snprintf(stale, sizeof(stale), "%s/stale.sock", dir);
    int fd = hung_socket(stale);
    close(fd);
    assert_int_equal(gpuqc_get_status(stale, later, &st, &e), -ECONNREFUSED);
    unlink(stale);

    /* One that accepts and never answers costs the time to the deadline, no more. */
    fd = hung_socket(stale);
    uint64_t t = clock_now_usec();
    e.text[0] = '\0';
    assert_int_equal(gpuqc_drain(stale, 1, 5, t + 500000u, &res, &e), -ETIMEDOUT);
    assert_true(clock_now_usec() - t < 1500000u);
    assert_non_null(strstr(e.text, stale));
    /* And a call with no time left is not even tried. */
    assert_int_equal(gpuqc_get_status(stale, clock_now_usec(), &st, &e), -ETIMEDOUT);
    close(fd);
    unlink(stale);
    rmdir(dir);

    struct fake_gpuqd *f = fake_gpuqd_new(1);
    f->mode = FAKE_GPUQD_DENIED;
    assert_int_equal(gpuqc_drain(f->sock, 1, 1, later, &res, &e), -EPROTO);
    assert_non_null(strstr(e.text, "HTTP 403: only root may drain"));
    fake_gpuqd_free(f);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_drain),
        cmocka_unit_test(test_parse_status),
        cmocka_unit_test(test_drain_against_fake),
        cmocka_unit_test(test_errors),
    };
    return test_run_cases(tests);
}
