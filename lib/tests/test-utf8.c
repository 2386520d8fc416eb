/* Tests for lib/utf8: what JSON and Prometheus parsers accept, and cleaning a chunk of a log
 * without breaking a character at its edge. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "lib/utf8.h"

static void test_valid_and_invalid(void **state)
{
    assert_true(utf8_valid("plain é € 𝄞"));
    static const char *const bad[] = {
        "\xc0\x80",         /* overlong NUL */
        "\xe0\x80\xaf",     /* overlong '/' */
        "\xed\xa0\x80",     /* a surrogate */
        "\xf4\x90\x80\x80", /* above U+10FFFF */
        "\xf5\x80\x80\x80", /* lead byte F5 */
        "\x80",             /* a lone continuation */
        "\xe2\x82",         /* cut */
        "\xff",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_false(utf8_valid(bad[i]));
    assert_int_equal(utf8_char_len("\xf0\x9d\x84\x9e", 4), 4);
    assert_int_equal(utf8_char_len("\xf0\x9d\x84\x9e", 3), 0);
}

static void test_sanitize(void **state)
{
    char s[] = "a\xc0\x80"
               "b\xed\xa0\x80"
               "c\xff"
               "d€";
    size_t n = strlen(s);
    assert_int_equal(utf8_sanitize(s, n, false), n);
    assert_string_equal(s, "a??b???c?d€");
    assert_true(utf8_valid(s));
}

static void test_chunk_edge(void **state)
{
    /* "é" cut after its first byte: a chunk leaves it for the next, the end replaces it. */
    char a[] = "xyz\xc3";
    assert_int_equal(utf8_sanitize(a, 4, true), 3);
    assert_memory_equal(a, "xyz", 3);
    char b[] = "xyz\xc3";
    assert_int_equal(utf8_sanitize(b, 4, false), 4);
    assert_string_equal(b, "xyz?");
    /* A byte that no continuation could make valid is replaced even mid-text. */
    char c[] = "x\xc3z";
    assert_int_equal(utf8_sanitize(c, 3, true), 3);
    assert_string_equal(c, "x?z");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_and_invalid),
        cmocka_unit_test(test_sanitize),
        cmocka_unit_test(test_chunk_edge),
    };
    return test_run_cases(tests);
}
