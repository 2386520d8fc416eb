/* Unit tests: CRC and frame parsing (docs/protocol.md §1-§2). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "ctl-proto.h"

/* Wraps a body as a frame with a correct CRC: "$<body>*XXXX<end>". */
static size_t mk(char *buf, size_t size, const char *body, const char *end)
{
    int n = snprintf(buf, size, "$%s*%04X%s", body, ctl_crc16(body, strlen(body)), end);
    assert_true(n > 0 && (size_t)n < size);
    return (size_t)n;
}

static int parse_body(const char *body, struct ctl_frame *f)
{
    char buf[1024];
    size_t n = mk(buf, sizeof(buf), body, "\r\n");
    return ctl_frame_parse(buf, n, f);
}

static void test_crc_check_value(void **state)
{
    assert_int_equal(ctl_crc16("123456789", 9), 0x29b1);
    assert_int_equal(ctl_crc16("", 0), 0xffff);
    /* One flipped bit changes the CRC. */
    assert_int_not_equal(ctl_crc16("123456788", 9), 0x29b1);
}

static void test_parse_fields(void **state)
{
    struct ctl_frame f;

    assert_int_equal(parse_body("R 1 OK proto=1 fw=2.4.1 msg=\"a b\" e=\"\" x=a=b", &f), 0);
    assert_int_equal(f.kind, CTL_KIND_REPLY);
    assert_int_equal(f.id, 1);
    assert_string_equal(f.verb, "OK");
    assert_int_equal(f.n_fields, 5);
    assert_string_equal(ctl_frame_get(&f, "proto"), "1");
    assert_string_equal(ctl_frame_get(&f, "fw"), "2.4.1");
    assert_string_equal(ctl_frame_get(&f, "msg"), "a b");
    assert_string_equal(ctl_frame_get(&f, "e"), "");
    assert_string_equal(ctl_frame_get(&f, "x"), "a=b");
    assert_null(ctl_frame_get(&f, "missing"));

    assert_int_equal(parse_body("E 65535 HB", &f), 0);
    assert_int_equal(f.id, 65535);
    assert_int_equal(f.n_fields, 0);
    /* Several spaces separate tokens, also around a quoted value. */
    assert_int_equal(parse_body("Q  0   SET   a=\"1 2\"   b=3", &f), 0);
    assert_int_equal(f.id, 0);
    assert_string_equal(ctl_frame_get(&f, "a"), "1 2");
    assert_string_equal(ctl_frame_get(&f, "b"), "3");
}

static void test_parse_line_ends(void **state)
{
    const char *ends[] = {"\r\n", "\n", ""};
    struct ctl_frame f;
    char buf[64];

    for (size_t i = 0; i < 3; i++) {
        size_t n = mk(buf, sizeof(buf), "Q 2 PING", ends[i]);
        assert_int_equal(ctl_frame_parse(buf, n, &f), 0);
        assert_string_equal(f.verb, "PING");
    }
    /* A lone '\r' is not a line end. */
    mk(buf, sizeof(buf), "Q 2 PING", "\r");
    assert_int_equal(ctl_frame_parse(buf, strlen(buf), &f), -CTL_E_CHARACTER);
}

static void test_parse_hex_case(void **state)
{
    struct ctl_frame f;
    char buf[64];
    size_t n = mk(buf, sizeof(buf), "Q 2 STATUS", "\r\n"); /* CRC 4B3A */

    assert_true(strpbrk(buf + n - 6, "ABCDEF") != NULL);
    for (size_t i = n - 6; i < n - 2; i++)
        if (buf[i] >= 'A' && buf[i] <= 'F')
            buf[i] = (char)(buf[i] - 'A' + 'a');
    assert_memory_equal(buf + n - 6, "4b3a", 4);
    assert_int_equal(ctl_frame_parse(buf, n, &f), 0);
}

static void test_reject_envelope(void **state)
{
    struct ctl_frame f;
    char buf[600];
    size_t n;

    assert_int_equal(ctl_frame_parse("Q 1 PING*0000\r\n", 15, &f), -CTL_E_SYNTAX);
    assert_int_equal(ctl_frame_parse("$Q 1 PING\r\n", 11, &f), -CTL_E_NOCHECKSUM);
    assert_int_equal(ctl_frame_parse("$Q 1 PING*12\r\n", 14, &f), -CTL_E_NOCHECKSUM);
    assert_int_equal(ctl_frame_parse("$Q 1 PING*12345\r\n", 17, &f), -CTL_E_NOCHECKSUM);
    assert_int_equal(ctl_frame_parse("$Q 1 PING*12G4\r\n", 16, &f), -CTL_E_NOCHECKSUM);

    n = mk(buf, sizeof(buf), "Q 1 PING", "\r\n");
    buf[n - 3] = buf[n - 3] == '0' ? '1' : '0';
    assert_int_equal(ctl_frame_parse(buf, n, &f), -CTL_E_CHECKSUM);
    n = mk(buf, sizeof(buf), "Q 1 PING", "\r\n");
    buf[3] = '2'; /* the body changed after the CRC was computed */
    assert_int_equal(ctl_frame_parse(buf, n, &f), -CTL_E_CHECKSUM);

    n = mk(buf, sizeof(buf), "Q 1 PING a=\x01", "\r\n");
    assert_int_equal(ctl_frame_parse(buf, n, &f), -CTL_E_CHARACTER);
    n = mk(buf, sizeof(buf), "Q 1 PING a=\xc3\xa9", "\r\n");
    assert_int_equal(ctl_frame_parse(buf, n, &f), -CTL_E_CHARACTER);
    n = mk(buf, sizeof(buf), "Q 1 PING a=$", "\r\n");
    assert_int_equal(ctl_frame_parse(buf, n, &f), -CTL_E_SYNTAX);
}

static void test_length_limit(void **state)
{
    struct ctl_frame f;
    char body[300], buf[600];
    size_t n;

    /* "$" + body + "*XXXX\r\n" = 256 bytes exactly: the body may be 248 bytes. */
    memset(body, 'x', sizeof(body));
    memcpy(body, "Q 1 PING a=", 11);
    body[248] = '\0';
    n = mk(buf, sizeof(buf), body, "\r\n");
    assert_int_equal(n, CTL_FRAME_MAX);
    assert_int_equal(ctl_frame_parse(buf, n, &f), 0);
    assert_int_equal(strlen(ctl_frame_get(&f, "a")), 248 - 11);
    /* Without its line end the same frame is still fine, with "\n" only too. */
    assert_int_equal(ctl_frame_parse(buf, n - 2, &f), 0);
    n = mk(buf, sizeof(buf), body, "\n");
    assert_int_equal(ctl_frame_parse(buf, n, &f), 0);

    body[248] = 'x';
    body[249] = '\0';
    n = mk(buf, sizeof(buf), body, "\r\n");
    assert_int_equal(ctl_frame_parse(buf, n, &f), -CTL_E_TOOLONG);
    assert_int_equal(ctl_frame_parse(buf, n - 2, &f), -CTL_E_TOOLONG);
    /* 256 bytes with a bare "\n" would be 257 as sent with "\r\n": too long as well. */
    n = mk(buf, sizeof(buf), body, "\n");
    assert_int_equal(n, CTL_FRAME_MAX);
    assert_int_equal(ctl_frame_parse(buf, n, &f), -CTL_E_TOOLONG);
}

static void test_reject_body(void **state)
{
    static const struct {
        const char *body;
        int err;
    } cases[] = {
        {"", -CTL_E_SYNTAX},
        {" Q 1 PING", -CTL_E_SYNTAX},
        {"Q 1 PING ", -CTL_E_SYNTAX},
        {"Q 1", -CTL_E_SYNTAX},
        {"Q", -CTL_E_SYNTAX},
        {"X 1 PING", -CTL_E_KIND},
        {"QQ 1 PING", -CTL_E_KIND},
        {"q 1 PING", -CTL_E_KIND},
        {"Q 01 PING", -CTL_E_ID},
        {"Q -1 PING", -CTL_E_ID},
        {"Q 65536 PING", -CTL_E_ID},
        {"Q 1x PING", -CTL_E_ID},
        {"Q 1 ping", -CTL_E_VERB},
        {"Q 1 1PING", -CTL_E_VERB},
        {"Q 1 ABCDEFGHIJKLMNOP", -CTL_E_VERB},
        {"Q 1 PING novalue", -CTL_E_SYNTAX},
        {"Q 1 PING Key=1", -CTL_E_KEY},
        {"Q 1 PING 1k=1", -CTL_E_KEY},
        {"Q 1 PING =1", -CTL_E_KEY},
        {"Q 1 PING abcdefghijabcdefghijabcdefghij12=1", -CTL_E_KEY},
        {"Q 1 PING a=1 a=2", -CTL_E_KEY},
        {"Q 1 PING a=", -CTL_E_VALUE},
        {"Q 1 PING a= b=1", -CTL_E_VALUE},
        {"Q 1 PING a=\"x", -CTL_E_VALUE},
        {"Q 1 PING a=x\"y", -CTL_E_VALUE},
        {"Q 1 PING a=\"x\"y", -CTL_E_SYNTAX},
    };
    struct ctl_frame f;

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int r = parse_body(cases[i].body, &f);
        if (r != cases[i].err)
            fail_msg("'%s': got %d (%s), want %d", cases[i].body, r, ctl_strerror(r), cases[i].err);
    }
}

static void test_field_count(void **state)
{
    struct ctl_frame f;
    char body[256];
    size_t len = (size_t)snprintf(body, sizeof(body), "R 1 OK");

    for (int i = 0; i < CTL_FIELDS_MAX; i++)
        len += (size_t)snprintf(body + len, sizeof(body) - len, " k%d=%d", i, i);
    assert_int_equal(parse_body(body, &f), 0);
    assert_int_equal(f.n_fields, CTL_FIELDS_MAX);
    snprintf(body + len, sizeof(body) - len, " k99=1");
    assert_int_equal(parse_body(body, &f), -CTL_E_TOOMANY);
}

static void test_failure_leaves_output(void **state)
{
    struct ctl_frame f;

    assert_int_equal(parse_body("E 7 HB up=5", &f), 0);
    assert_int_equal(parse_body("E 8 HB up=5 up=6", &f), -CTL_E_KEY);
    /* Output parameters are written only on success. */
    assert_int_equal(f.id, 7);
    assert_string_equal(ctl_frame_get(&f, "up"), "5");
}

static void test_copy(void **state)
{
    struct ctl_frame a, b;

    assert_int_equal(parse_body("R 3 OK level=normal msg=\"x y\"", &a), 0);
    ctl_frame_copy(&b, &a);
    memset(&a, 'Z', sizeof(a)); /* the copy must not point into the original */
    assert_int_equal(b.id, 3);
    assert_string_equal(b.verb, "OK");
    assert_string_equal(ctl_frame_get(&b, "level"), "normal");
    assert_string_equal(ctl_frame_get(&b, "msg"), "x y");
}

static void test_strerror(void **state)
{
    assert_string_equal(ctl_strerror(-CTL_E_CHECKSUM), ctl_strerror(CTL_E_CHECKSUM));
    assert_string_not_equal(ctl_strerror(-CTL_E_CHECKSUM), ctl_strerror(-CTL_E_TOOLONG));
    assert_string_equal(ctl_strerror(-1000), "unknown error");
    assert_string_equal(ctl_strerror(-2147483647 - 1), "unknown error");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc_check_value),
        cmocka_unit_test(test_parse_fields),
        cmocka_unit_test(test_parse_line_ends),
        cmocka_unit_test(test_parse_hex_case),
        cmocka_unit_test(test_reject_envelope),
        cmocka_unit_test(test_length_limit),
        cmocka_unit_test(test_reject_body),
        cmocka_unit_test(test_field_count),
        cmocka_unit_test(test_failure_leaves_output),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_strerror),
    };
    return test_run_cases(tests);
}
