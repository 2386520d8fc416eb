/* Line noise: never a valid frame, never breaks the frame after it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "ctl-proto.h"
#include "sim-noise.h"

/* Feeds bytes to a reader; returns the number of valid frames it produced. */
static unsigned feed(struct ctl_reader *r, const void *data, size_t n, struct ctl_frame *last)
{
    const uint8_t *b = data;
    unsigned frames = 0;

    for (size_t i = 0; i < n; i++)
        if (ctl_reader_push(r, b[i], last) == 1)
            frames++;
    return frames;
}

static int valid_frame(char *buf, uint16_t seq)
{
    struct ctl_writer w;
    ctl_writer_begin(&w, CTL_KIND_EVENT, seq, "HB");
    ctl_writer_add_int(&w, "up", seq);
    ctl_writer_add(&w, "level", "normal");
    int n = ctl_writer_finish(&w);
    assert_true(n > 0);
    memcpy(buf, w.buf, (size_t)n);
    return n;
}

static void test_bursts_are_rejected_and_harmless(void **state)
{
    struct sim_rng rng;
    struct ctl_reader r;
    struct ctl_frame f;
    char burst[SIM_NOISE_MAX], good[CTL_FRAME_MAX];
    unsigned seen[_SIM_NOISE_MAX] = {0};

    sim_rng_seed(&rng, 42);
    ctl_reader_init(&r);
    for (unsigned i = 0; i < 5000; i++) {
        enum sim_noise_kind kind;
        size_t n = sim_noise_burst(&rng, burst, &kind);
        assert_in_range(n, 1, SIM_NOISE_MAX);
        seen[kind]++;
        assert_int_equal(feed(&r, burst, n, &f), 0);
        /* The valid frame right after the noise comes through intact. */
        int g = valid_frame(good, (uint16_t)i);
        assert_int_equal(feed(&r, good, (size_t)g, &f), 1);
        assert_string_equal(f.verb, "HB");
        assert_int_equal(f.id, (uint16_t)i);
    }
    for (unsigned k = 0; k < _SIM_NOISE_MAX; k++)
        assert_true(seen[k] > 0);
    /* Everything except plain random bytes is a rejected frame on the host side. */
    assert_true(r.rejected >= 5000 - seen[SIM_NOISE_RANDOM]);
}

static void test_bursts_follow_seed(void **state)
{
    struct sim_rng a, b;
    char x[SIM_NOISE_MAX], y[SIM_NOISE_MAX];

    sim_rng_seed(&a, 7);
    sim_rng_seed(&b, 7);
    for (int i = 0; i < 100; i++) {
        size_t n = sim_noise_burst(&a, x, NULL);
        assert_int_equal(sim_noise_burst(&b, y, NULL), n);
        assert_memory_equal(x, y, n);
    }
}

static void test_rx_corruption(void **state)
{
    struct sim_rng rng;
    struct ctl_reader r;
    struct ctl_frame f;
    char frame[CTL_FRAME_MAX];
    struct sim_rx_noise every = {.every = 1}, never = {.every = 0}, some = {.every = 4};
    unsigned ok = 0;

    sim_rng_seed(&rng, 1);
    ctl_reader_init(&r);
    for (int i = 0; i < 200; i++) {
        int n = valid_frame(frame, (uint16_t)i);
        sim_rx_noise_apply(&every, &rng, (uint8_t *)frame, (size_t)n);
        assert_int_equal(feed(&r, frame, (size_t)n, &f), 0);
    }
    assert_int_equal(every.corrupted, 200);
    assert_int_equal(r.rejected, 200);
    for (int i = 0; i < 200; i++) {
        int n = valid_frame(frame, (uint16_t)i);
        sim_rx_noise_apply(&never, &rng, (uint8_t *)frame, (size_t)n);
        assert_int_equal(feed(&r, frame, (size_t)n, &f), 1);
    }
    for (int i = 0; i < 400; i++) {
        int n = valid_frame(frame, (uint16_t)i);
        sim_rx_noise_apply(&some, &rng, (uint8_t *)frame, (size_t)n);
        ok += feed(&r, frame, (size_t)n, &f);
    }
    assert_int_equal(ok + some.corrupted, 400);
    assert_in_range(some.corrupted, 50, 150);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bursts_are_rejected_and_harmless),
        cmocka_unit_test(test_bursts_follow_seed),
        cmocka_unit_test(test_rx_corruption),
    };
    return test_run_cases(tests);
}
