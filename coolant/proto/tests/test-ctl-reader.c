/* Unit tests: assembling frames from a byte stream, resynchronisation, counters. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "ctl-proto.h"

/* Feeds n bytes; collects accepted frames' ids into ids[] and the last error into *last_err. */
static unsigned feed(struct ctl_reader *r, const char *s, size_t n, unsigned *ids, int *last_err)
{
    struct ctl_frame f;
    unsigned count = 0;

    for (size_t i = 0; i < n; i++) {
        int k = ctl_reader_push(r, (uint8_t)s[i], &f);
        if (k == 1)
            ids[count++] = f.id;
        else if (k < 0 && last_err)
            *last_err = k;
        else
            assert_int_equal(k >= 0, 1);
    }
    return count;
}

static size_t frame(char *buf, size_t size, const char *body)
{
    int n = snprintf(buf, size, "$%s*%04X\r\n", body, ctl_crc16(body, strlen(body)));
    return (size_t)n;
}

static void test_stream(void **state)
{
    struct ctl_reader r;
    char buf[512];
    unsigned ids[8];
    size_t n = 0;

    ctl_reader_init(&r);
    n += (size_t)snprintf(buf, sizeof(buf), "noise\r\n\x01\xff");
    n += frame(buf + n, sizeof(buf) - n, "E 1 HB up=1");
    n += frame(buf + n, sizeof(buf) - n, "E 2 HB up=2");
    assert_int_equal(feed(&r, buf, n, ids, NULL), 2);
    assert_int_equal(ids[0], 1);
    assert_int_equal(ids[1], 2);
    assert_int_equal(r.frames, 2);
    assert_int_equal(r.rejected, 0); /* noise outside frames is not a frame */
}

static void test_resync_after_dollar_mid_frame(void **state)
{
    struct ctl_reader r;
    char buf[512];
    unsigned ids[8];
    int err = 0;
    size_t n;

    ctl_reader_init(&r);
    /* A frame cut off by a reboot, then a whole one. */
    n = (size_t)snprintf(buf, sizeof(buf), "$E 3 HB up=");
    n += frame(buf + n, sizeof(buf) - n, "E 0 BOOT fw=2.4.1 reason=power");
    assert_int_equal(feed(&r, buf, n, ids, &err), 1);
    assert_int_equal(ids[0], 0);
    assert_int_equal(err, -CTL_E_TRUNCATED);
    assert_int_equal(r.rejected, 1);
    assert_int_equal(r.frames, 1);
}

static void test_rejections_counted(void **state)
{
    struct ctl_reader r;
    char buf[1024];
    unsigned ids[8];
    int err = 0;
    size_t n;

    ctl_reader_init(&r);
    n = frame(buf, sizeof(buf), "E 4 HB up=4");
    buf[2] = '5'; /* corrupt: checksum no longer matches */
    assert_int_equal(feed(&r, buf, n, ids, &err), 0);
    assert_int_equal(err, -CTL_E_CHECKSUM);

    n = frame(buf, sizeof(buf), "E 5 HB up=\x02");
    assert_int_equal(feed(&r, buf, n, ids, &err), 0);
    assert_int_equal(err, -CTL_E_CHARACTER);

    n = frame(buf, sizeof(buf), "E 6 HB up=6");
    assert_int_equal(feed(&r, buf, n, ids, &err), 1);
    assert_int_equal(ids[0], 6);
    assert_int_equal(r.rejected, 2);
    assert_int_equal(r.frames, 1);
}

static void test_too_long_then_resync(void **state)
{
    struct ctl_reader r;
    char buf[2048];
    unsigned ids[8];
    int err = 0;
    size_t n;

    ctl_reader_init(&r);
    /* 1000 bytes without a line end: one rejection, the buffer never overflows (ASan). */
    buf[0] = '$';
    memset(buf + 1, 'A', 999);
    n = 1000;
    n += frame(buf + n, sizeof(buf) - n, "R 7 OK");
    assert_int_equal(feed(&r, buf, n, ids, &err), 1);
    assert_int_equal(err, -CTL_E_TOOLONG);
    assert_int_equal(ids[0], 7);
    assert_int_equal(r.rejected, 1);

    /* The longest valid frame passes; one byte more is rejected. */
    char body[300];
    memset(body, 'x', sizeof(body));
    memcpy(body, "R 8 OK a=", 9);
    body[248] = '\0';
    n = frame(buf, sizeof(buf), body);
    assert_int_equal(n, CTL_FRAME_MAX);
    assert_int_equal(feed(&r, buf, n, ids, &err), 1);
    body[248] = 'x';
    body[249] = '\0';
    n = frame(buf, sizeof(buf), body);
    err = 0;
    assert_int_equal(feed(&r, buf, n, ids, &err), 0);
    assert_int_equal(err, -CTL_E_TOOLONG);
    assert_int_equal(r.rejected, 2);
}

static void test_bare_newline(void **state)
{
    struct ctl_reader r;
    char buf[64];
    unsigned ids[2];
    size_t n;

    ctl_reader_init(&r);
    n = frame(buf, sizeof(buf), "E 9 HB");
    buf[n - 2] = '\n'; /* "\r\n" -> "\n" */
    assert_int_equal(feed(&r, buf, n - 1, ids, NULL), 1);
    assert_int_equal(ids[0], 9);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream),
        cmocka_unit_test(test_resync_after_dollar_mid_frame),
        cmocka_unit_test(test_rejections_counted),
        cmocka_unit_test(test_too_long_then_resync),
        cmocka_unit_test(test_bare_newline),
    };
    return test_run_cases(tests);
}
