/* Tests for lib/config.c: INI loading, typed getters, typo detection, durations, addresses. */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "lib/config.h"

static struct config *load(const char *text, struct errmsg *e)
{
    struct config *c = NULL;
    int r = config_load_string("coold.conf", text, strlen(text), &c, e);
    if (r < 0)
        return NULL;
    return c;
}

static void test_load_and_get(void **state)
{
    struct errmsg e = {""};
    _cleanup_(config_freep) struct config *c = load("; comment\n"
                                                    "# other comment\n"
                                                    "top = 1\n"
                                                    "[controller]\n"
                                                    "device = /dev/ttyUSB0\r\n"
                                                    "  baud = 115200 ; inline comment\n"
                                                    "empty =\n"
                                                    "[metrics]\n"
                                                    "listen = :9420\n",
                                                    &e);
    assert_non_null(c);
    assert_string_equal(config_get(c, "controller", "device"), "/dev/ttyUSB0");
    assert_string_equal(config_get(c, "controller", "baud"), "115200");
    assert_string_equal(config_get(c, "controller", "empty"), "");
    assert_string_equal(config_get(c, "", "top"), "1");
    assert_null(config_get(c, "controller", "listen"));
    assert_null(config_get(c, "nosuch", "device"));
    assert_int_equal(config_line(c, "metrics", "listen"), 9);
    assert_true(config_has_section(c, "metrics"));
    assert_false(config_has_section(c, "nosuch"));

    const char *s = NULL;
    assert_int_equal(config_get_string(c, "metrics", "listen", "x", &s), 1);
    assert_string_equal(s, ":9420");
    assert_int_equal(config_get_string(c, "metrics", "missing", "dflt", &s), 0);
    assert_string_equal(s, "dflt");
    assert_string_equal(config_path(c), "coold.conf");
}

static void test_sections_iterate(void **state)
{
    _cleanup_(config_freep) struct config *c =
        load("[a]\nx=1\n[hook.b]\ny=2\n[a]\nz=3\n[hook.c]\nw=4\n", NULL);
    assert_non_null(c);
    const char *s = config_next_section(c, NULL);
    assert_string_equal(s, "a");
    s = config_next_section(c, s);
    assert_string_equal(s, "hook.b");
    s = config_next_section(c, s);
    assert_string_equal(s, "hook.c");
    assert_null(config_next_section(c, s));
}

static void test_keys_iterate(void **state)
{
    _cleanup_(config_freep) struct config *c =
        load("[q]\ngpus.H100 = 1\n[r]\nx = 1\n[q]\nmig.1g.10gb = 2\n", NULL);
    assert_non_null(c);
    const char *k = config_next_key(c, "q", NULL);
    assert_string_equal(k, "gpus.H100");
    k = config_next_key(c, "q", k);
    assert_string_equal(k, "mig.1g.10gb");
    assert_null(config_next_key(c, "q", k));
    assert_null(config_next_key(c, "none", NULL));
    assert_null(config_next_key(c, "q", "x"));
    /* iterating marks nothing as used */
    struct errmsg e = {""};
    assert_int_equal(config_check_unused(c, &e), -EINVAL);
    assert_string_equal(e.text, "coold.conf:2: unknown key 'gpus.H100' in [q]");
}

static void test_unused_key_is_reported(void **state)
{
    struct errmsg e = {""};
    _cleanup_(config_freep) struct config *c =
        load("[controller]\ndevice = /dev/ttyS0\ndevcie = /dev/ttyS1\n", &e);
    assert_non_null(c);
    assert_non_null(config_get(c, "controller", "device"));
    assert_int_equal(config_check_unused(c, &e), -EINVAL);
    assert_string_equal(e.text, "coold.conf:3: unknown key 'devcie' in [controller]");

    /* Asking for it (even through a typed getter) marks it used. */
    bool b;
    assert_int_equal(config_get_bool(c, "controller", "devcie", false, &b, &e), -EINVAL);
    assert_int_equal(config_check_unused(c, &e), 0);
}

static void test_unused_key_outside_section(void **state)
{
    struct errmsg e = {""};
    _cleanup_(config_freep) struct config *c = load("loglevel = debug\n", &e);
    assert_non_null(c);
    assert_int_equal(config_check_unused(c, &e), -EINVAL);
    assert_non_null(strstr(e.text, "coold.conf:1: unknown key 'loglevel'"));
}

static void test_duplicate_key(void **state)
{
    struct errmsg e = {""};
    struct config *c =
        load("[metrics]\nlisten = :1\n\n[other]\nlisten = :2\n[metrics]\nlisten = :3\n", &e);
    assert_null(c);
    assert_string_equal(e.text,
                        "coold.conf:7: duplicate key 'listen' in [metrics], first set on line 2");
}

static void test_syntax_error(void **state)
{
    struct errmsg e = {""};
    assert_null(load("[a]\nx = 1\nthis line has no equals sign\n", &e));
    assert_string_equal(e.text, "coold.conf:3: syntax error");
    assert_null(load("[unterminated\nx = 1\n", &e));
    assert_string_equal(e.text, "coold.conf:1: syntax error");
}

static void test_first_error_wins(void **state)
{
    /* A duplicate on line 3 comes before the syntax error on line 4. */
    struct errmsg e = {""};
    assert_null(load("[a]\nx=1\nx=2\nbroken\n", &e));
    assert_non_null(strstr(e.text, "coold.conf:3: duplicate key 'x'"));
    assert_null(load("[a]\nbroken\nx=1\nx=2\n", &e));
    assert_string_equal(e.text, "coold.conf:2: syntax error");
}

static void test_long_line_and_nul(void **state)
{
    struct errmsg e = {""};
    char text[2048];
    memset(text, 'a', sizeof(text));
    memcpy(text, "[s]\nk = ", 8);
    text[sizeof(text) - 2] = '\n';
    text[sizeof(text) - 1] = '\0';
    assert_null(load(text, &e));
    assert_non_null(strstr(e.text, "coold.conf:2: line too long"));

    struct config *c = NULL;
    assert_int_equal(config_load_string("x.conf", "[s]\nk = a\0b\n", 12, &c, &e), -EINVAL);
    assert_string_equal(e.text, "x.conf:2: NUL byte in line");
}

static void test_missing_file(void **state)
{
    struct errmsg e = {""};
    struct config *c = NULL;
    assert_int_equal(config_load("/nonexistent/coold.conf", &c, &e), -ENOENT);
    assert_null(c);
    assert_non_null(strstr(e.text, "/nonexistent/coold.conf"));
}

static void test_load_file(void **state)
{
    char path[] = "/tmp/test-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char text[] = "[serial]\nbaud = 9600\n";
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    struct errmsg e = {""};
    _cleanup_(config_freep) struct config *c = NULL;
    assert_int_equal(config_load(path, &c, &e), 0);
    unlink(path);
    unsigned long baud = 0;
    assert_int_equal(config_get_uint(c, "serial", "baud", 1, 1, 1000000, &baud, &e), 1);
    assert_int_equal(baud, 9600);
    assert_int_equal(config_check_unused(c, &e), 0);
}

static void test_file_too_big(void **state)
{
    char path[] = "/tmp/test-config-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 1024 * 1024 + 1), 0);
    close(fd);
    struct errmsg e = {""};
    struct config *c = NULL;
    assert_int_equal(config_load(path, &c, &e), -EFBIG);
    unlink(path);
    assert_null(c);
    assert_non_null(strstr(e.text, path));
    assert_int_equal(config_load("/tmp", &c, &e), -EISDIR);
}

static void test_get_uint(void **state)
{
    struct errmsg e = {""};
    _cleanup_(config_freep) struct config *c = load("[serial]\n"
                                                    "baud = 96OO\n"
                                                    "neg = -1\n"
                                                    "big = 99999999999999999999999\n"
                                                    "hex = 0x10\n"
                                                    "oct = 010\n"
                                                    "space = 1 2\n"
                                                    "high = 70000\n",
                                                    &e);
    assert_non_null(c);
    unsigned long v = 42;
    assert_int_equal(config_get_uint(c, "serial", "baud", 0, 0, ULONG_MAX, &v, &e), -EINVAL);
    assert_string_equal(e.text,
                        "coold.conf:2: [serial] baud: '96OO' is not a non-negative integer");
    assert_int_equal(v, 42);
    assert_int_equal(config_get_uint(c, "serial", "neg", 0, 0, ULONG_MAX, &v, &e), -EINVAL);
    assert_int_equal(config_get_uint(c, "serial", "big", 0, 0, ULONG_MAX, &v, &e), -ERANGE);
    assert_int_equal(config_get_uint(c, "serial", "space", 0, 0, ULONG_MAX, &v, &e), -EINVAL);
    assert_int_equal(config_get_uint(c, "serial", "hex", 0, 0, ULONG_MAX, &v, &e), 1);
    assert_int_equal(v, 16);
    /* A leading zero is decimal, not octal. */
    assert_int_equal(config_get_uint(c, "serial", "oct", 0, 0, ULONG_MAX, &v, &e), 1);
    assert_int_equal(v, 10);
    assert_int_equal(config_get_uint(c, "serial", "high", 0, 1, 65535, &v, &e), -ERANGE);
    assert_string_equal(e.text, "coold.conf:8: [serial] high: 70000 is out of range 1..65535");
    assert_int_equal(config_get_uint(c, "serial", "absent", 7, 1, 65535, &v, &e), 0);
    assert_int_equal(v, 7);
}

static void test_get_bool(void **state)
{
    struct errmsg e = {""};
    _cleanup_(config_freep) struct config *c =
        load("[x]\na = yes\nb = OFF\nc = True\nd = 0\nf = maybe\n", &e);
    assert_non_null(c);
    bool v = false;
    assert_int_equal(config_get_bool(c, "x", "a", false, &v, &e), 1);
    assert_true(v);
    assert_int_equal(config_get_bool(c, "x", "b", true, &v, &e), 1);
    assert_false(v);
    assert_int_equal(config_get_bool(c, "x", "c", false, &v, &e), 1);
    assert_true(v);
    assert_int_equal(config_get_bool(c, "x", "d", true, &v, &e), 1);
    assert_false(v);
    assert_int_equal(config_get_bool(c, "x", "e", true, &v, &e), 0);
    assert_true(v);
    assert_int_equal(config_get_bool(c, "x", "f", true, &v, &e), -EINVAL);
    assert_non_null(strstr(e.text, "coold.conf:6: [x] f: 'maybe' is not a boolean"));
}

static void test_get_duration(void **state)
{
    struct errmsg e = {""};
    _cleanup_(config_freep) struct config *c =
        load("[shutdown]\ngrace = 1.5m\nbad = 10 parsecs\nneg = -5s\n", &e);
    assert_non_null(c);
    double d = 0;
    assert_int_equal(config_get_duration(c, "shutdown", "grace", 30, &d, &e), 1);
    assert_true(d == 90.0);
    assert_int_equal(config_get_duration(c, "shutdown", "absent", 30, &d, &e), 0);
    assert_true(d == 30.0);
    assert_int_equal(config_get_duration(c, "shutdown", "bad", 30, &d, &e), -EINVAL);
    assert_non_null(strstr(e.text, "coold.conf:3: [shutdown] bad: '10 parsecs'"));
    assert_int_equal(config_get_duration(c, "shutdown", "neg", 30, &d, &e), -EINVAL);
    assert_true(d == 30.0);
}

static void test_parse_duration(void **state)
{
    static const struct {
        const char *s;
        double want;
    } good[] = {
        {"30", 30}, {"30s", 30},  {"1.5s", 1.5},  {"2m", 120},  {"500ms", 0.5}, {"1h", 3600},
        {"0", 0},   {" 7 s ", 7}, {"2d", 172800}, {"0.3", 0.3}, {"5min", 300},  {"10sec", 10},
    };
    for (size_t i = 0; i < ELEMENTSOF(good); i++) {
        double d = -1;
        assert_int_equal(parse_duration(good[i].s, &d), 0);
        assert_true(d == good[i].want);
    }
    static const char *const bad[] = {
        "",     " ",   "-1",  "-1s", "s",   "1x", "1.s", ".5", "1e3",
        "0x10", "nan", "inf", "1 2", "1ss", "+1", "1,5", "ms",
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        double d = 99;
        assert_int_equal(parse_duration(bad[i], &d), -EINVAL);
        assert_true(d == 99); /* untouched on failure */
    }
    double d;
    assert_int_equal(parse_duration("999999999999999999999999999999h", &d), -ERANGE);
    assert_int_equal(parse_duration("101000000d", &d), -ERANGE);
    assert_int_equal(parse_duration(NULL, &d), -EINVAL);
}

static void test_parse_size(void **state)
{
    static const struct {
        const char *s;
        uint64_t want;
    } good[] = {
        {"0", 0},
        {"4096", 4096},
        {"1K", 1024},
        {"1k", 1024},
        {"512M", 512ull << 20},
        {"64G", 64ull << 30},
        {" 64 GiB ", 64ull << 30},
        {"2GB", 2ull << 30},
        {"1T", 1ull << 40},
        {"3P", 3ull << 50},
        {"100B", 100},
        {"18446744073709551615", UINT64_MAX},
        {"15P", 15ull << 50},
    };
    for (size_t i = 0; i < ELEMENTSOF(good); i++) {
        uint64_t v = 1;
        assert_int_equal(parse_size(good[i].s, &v), 0);
        assert_true(v == good[i].want);
    }
    static const char *const bad[] = {
        "", " ", "-1", "+1", "G", "1.5G", "1x", "1GG", "1Gi", "1iB", "0x10", "1 2", "1 G B", "1E",
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        uint64_t v = 99;
        assert_int_equal(parse_size(bad[i], &v), -EINVAL);
        assert_true(v == 99); /* untouched on failure */
    }
    uint64_t v = 7;
    assert_int_equal(parse_size("18446744073709551616", &v), -ERANGE);
    assert_int_equal(parse_size("16384P", &v), -ERANGE);
    assert_int_equal(parse_size(NULL, &v), -EINVAL);
    assert_true(v == 7);

    struct config *c = NULL;
    struct errmsg e = {""};
    const char *text = "[pull]\nmax = 64G\nbad = lots\nhuge = 99999999P\n";
    assert_int_equal(config_load_string("t.conf", text, strlen(text), &c, &e), 0);
    assert_int_equal(config_get_size(c, "pull", "max", 5, &v, &e), 1);
    assert_true(v == 64ull << 30);
    assert_int_equal(config_get_size(c, "pull", "absent", 5, &v, &e), 0);
    assert_true(v == 5);
    assert_int_equal(config_get_size(c, "pull", "bad", 5, &v, &e), -EINVAL);
    assert_non_null(strstr(e.text, "t.conf:3: [pull] bad: 'lots' is not a size"));
    assert_int_equal(config_get_size(c, "pull", "huge", 5, &v, &e), -ERANGE);
    assert_non_null(strstr(e.text, "too large"));
    config_free(c);
}

static void test_parse_listen_address(void **state)
{
    char host[64];
    uint16_t port = 1;
    struct errmsg e = {""};
    assert_int_equal(parse_listen_address("127.0.0.1:9420", host, sizeof(host), &port, &e), 0);
    assert_string_equal(host, "127.0.0.1");
    assert_int_equal(port, 9420);
    assert_int_equal(parse_listen_address("[::1]:9420", host, sizeof(host), &port, &e), 0);
    assert_string_equal(host, "::1");
    assert_int_equal(parse_listen_address(":9420", host, sizeof(host), &port, &e), 0);
    assert_string_equal(host, "");
    assert_int_equal(port, 9420);
    assert_int_equal(parse_listen_address("*:80", host, sizeof(host), &port, &e), 0);
    assert_string_equal(host, "");
    assert_int_equal(parse_listen_address("localhost:0", host, sizeof(host), &port, &e), 0);
    assert_string_equal(host, "localhost");
    assert_int_equal(port, 0);
    assert_int_equal(parse_listen_address("[fe80::1%eth0]:65535", host, sizeof(host), &port, &e),
                     0);
    assert_string_equal(host, "fe80::1%eth0");
    assert_int_equal(port, 65535);

    static const char *const bad[] = {
        "",        "9420", "::1:9420", "[::1]9420", "[::1]",   "[]:1", "host:", "h:-1",
        "h:65536", "h:1x", "h:123456", "a b:1",     "[::1:80", "h:+1", "h: 80", "[::1]:80:90",
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        port = 7;
        e.text[0] = '\0';
        assert_int_equal(parse_listen_address(bad[i], host, sizeof(host), &port, &e), -EINVAL);
        assert_int_equal(port, 7);
        assert_non_null(strstr(e.text, "listen address"));
    }
    char tiny[4];
    assert_int_equal(parse_listen_address("example.org:80", tiny, sizeof(tiny), &port, &e),
                     -ENAMETOOLONG);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_and_get),
        cmocka_unit_test(test_sections_iterate),
        cmocka_unit_test(test_keys_iterate),
        cmocka_unit_test(test_unused_key_is_reported),
        cmocka_unit_test(test_unused_key_outside_section),
        cmocka_unit_test(test_duplicate_key),
        cmocka_unit_test(test_syntax_error),
        cmocka_unit_test(test_first_error_wins),
        cmocka_unit_test(test_long_line_and_nul),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_load_file),
        cmocka_unit_test(test_file_too_big),
        cmocka_unit_test(test_get_uint),
        cmocka_unit_test(test_get_bool),
        cmocka_unit_test(test_get_duration),
        cmocka_unit_test(test_parse_duration),
        cmocka_unit_test(test_parse_size),
        cmocka_unit_test(test_parse_listen_address),
    };
    return test_run_cases(tests);
}
