/* Tests for string vectors: environments are built with these, so the last-assignment and
 * replacement rules decide what a container sees. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "lib/strv.h"

static void test_split_and_push(void **state)
{
    _cleanup_strv_free_ char **v = NULL;
    assert_int_equal(strv_split_blanks("  a b\t\tc\n", &v), 0);
    assert_int_equal(strv_length(v), 3);
    assert_string_equal(v[2], "c");
    assert_int_equal(strv_push(&v, "d"), 0);
    assert_true(strv_contains(v, "d"));
    assert_false(strv_contains(v, "e"));
    assert_null(v[4]);

    _cleanup_strv_free_ char **empty = NULL;
    assert_int_equal(strv_split_blanks("   ", &empty), 0);
    assert_int_equal(strv_length(empty), 0);
}

static void test_join(void **state)
{
    char *three[] = {"a", "bc", "d", NULL}, *none[] = {NULL};
    _cleanup_free_ char *j = strv_join(three, ", "), *empty = strv_join(none, ", ");
    _cleanup_free_ char *null = strv_join(NULL, "-");
    assert_string_equal(j, "a, bc, d");
    assert_string_equal(empty, "");
    assert_string_equal(null, "");
}

static void test_env_set_replaces_every_assignment(void **state)
{
    _cleanup_strv_free_ char **env = NULL;
    char *init[] = {"PATH=/bin", "A=1", "AB=2", "A=3", NULL};
    assert_int_equal(strv_extend(&env, init), 0);
    /* getenv semantics: the last one wins. */
    assert_string_equal(strv_env_get(env, "A"), "3");
    assert_int_equal(strv_env_set(&env, "A", "new"), 0);
    assert_int_equal(strv_length(env), 3);
    assert_string_equal(strv_env_get(env, "A"), "new");
    /* A key that is a prefix of another is not touched by it. */
    assert_string_equal(strv_env_get(env, "AB"), "2");
    assert_int_equal(strv_env_put(&env, "EMPTY="), 0);
    assert_string_equal(strv_env_get(env, "EMPTY"), "");
    assert_int_equal(strv_env_put(&env, "=x"), -EINVAL);
    assert_int_equal(strv_env_put(&env, "NOEQUALS"), -EINVAL);
    strv_env_unset(env, "PATH");
    assert_null(strv_env_get(env, "PATH"));
    assert_int_equal(strv_length(env), 3);
}

static void test_copy_is_deep(void **state)
{
    char *init[] = {"x", "y", NULL};
    _cleanup_strv_free_ char **c = strv_copy(init);
    assert_non_null(c);
    assert_ptr_not_equal(c[0], init[0]);
    assert_string_equal(c[1], "y");
    _cleanup_strv_free_ char **e = strv_copy(NULL);
    assert_non_null(e);
    assert_null(e[0]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_and_push),
        cmocka_unit_test(test_join),
        cmocka_unit_test(test_env_set_replaces_every_assignment),
        cmocka_unit_test(test_copy_is_deep),
    };
    return test_run_cases(tests);
}
