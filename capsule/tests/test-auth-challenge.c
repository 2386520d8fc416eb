/* WWW-Authenticate parsing and token answers, as registries and token servers send them. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "capsule/registry/auth-challenge.h"

static void parse_ok(const char *h, struct auth_challenges *c)
{
    struct errmsg e = {{0}};
    int r = auth_challenges_parse(h, c, &e);
    if (r != 0)
        fail_msg("'%s': %d %s", h, r, e.text);
}

static void test_docker_hub_bearer(void **state)
{
    struct auth_challenges c = {0};
    parse_ok("Bearer realm=\"https://auth.docker.io/token\",service=\"registry.docker.io\","
             "scope=\"repository:library/ubuntu:pull\"",
             &c);
    assert_int_equal(c.n, 1);
    const struct auth_challenge *b = auth_challenges_find(&c, "Bearer");
    assert_non_null(b);
    assert_string_equal(b->scheme, "bearer");
    assert_string_equal(auth_challenge_param(b, "realm"), "https://auth.docker.io/token");
    assert_string_equal(auth_challenge_param(b, "SERVICE"), "registry.docker.io");
    assert_string_equal(auth_challenge_param(b, "scope"), "repository:library/ubuntu:pull");
    assert_null(auth_challenge_param(b, "error"));
    assert_null(b->token68);
    auth_challenges_done(&c);
    auth_challenges_done(&c); /* twice is allowed */
}

static void test_basic_and_case(void **state)
{
    struct auth_challenges c = {0};
    parse_ok("basic REALM=\"Registry Realm\"", &c);
    const struct auth_challenge *b = auth_challenges_find(&c, "Basic");
    assert_non_null(b);
    assert_string_equal(auth_challenge_param(b, "realm"), "Registry Realm");
    assert_null(auth_challenges_find(&c, "bearer"));
    auth_challenges_done(&c);
}

/* Commas separate parameters and challenges alike; a scheme after a comma starts a new one. */
static void test_several_challenges(void **state)
{
    struct auth_challenges c = {0};
    parse_ok("Newauth realm=\"apps\", type=1,  title=\"Login to \\\"apps\\\"\", Basic realm=simple,"
             " Negotiate abc+/==",
             &c);
    assert_int_equal(c.n, 3);
    assert_string_equal(c.items[0].scheme, "newauth");
    assert_int_equal(c.items[0].n_params, 3);
    assert_string_equal(auth_challenge_param(&c.items[0], "type"), "1");
    assert_string_equal(auth_challenge_param(&c.items[0], "title"), "Login to \"apps\"");
    assert_string_equal(auth_challenge_param(auth_challenges_find(&c, "basic"), "realm"), "simple");
    const struct auth_challenge *n = auth_challenges_find(&c, "negotiate");
    assert_non_null(n);
    assert_string_equal(n->token68, "abc+/==");
    assert_int_equal(n->n_params, 0);
    auth_challenges_done(&c);
}

/* The registry's answer to a token that lacks a permission carries an error parameter. */
static void test_error_param_and_blanks(void **state)
{
    struct auth_challenges c = {0};
    parse_ok("  Bearer realm = \"http://127.0.0.1:5001/token\" , service=reg ,"
             "error=\"insufficient_scope\"  ",
             &c);
    assert_int_equal(c.n, 1);
    assert_string_equal(auth_challenge_param(&c.items[0], "realm"), "http://127.0.0.1:5001/token");
    assert_string_equal(auth_challenge_param(&c.items[0], "service"), "reg");
    assert_string_equal(auth_challenge_param(&c.items[0], "error"), "insufficient_scope");
    auth_challenges_done(&c);

    parse_ok("Bearer", &c);
    assert_int_equal(c.n, 1);
    assert_int_equal(c.items[0].n_params, 0);
    auth_challenges_done(&c);
}

static void expect_error(const char *h, int code, const char *needle)
{
    struct auth_challenges c = {.n = 77};
    struct errmsg e = {{0}};
    int r = auth_challenges_parse(h, &c, &e);
    if (r != code)
        fail_msg("'%s': expected %d, got %d (%s)", h, code, r, e.text);
    assert_int_equal(c.n, 77); /* untouched on failure */
    if (!strstr(e.text, needle))
        fail_msg("'%s': message '%s' lacks '%s'", h, e.text, needle);
}

static void test_malformed(void **state)
{
    expect_error("", -EINVAL, "no challenge");
    expect_error(" , ,", -EINVAL, "no challenge");
    expect_error("Bearer realm=\"https://x", -EINVAL, "unterminated");
    expect_error("Bearer realm=\"a\\", -EINVAL, "unterminated");
    expect_error("Bearer a=b, realm=", -EINVAL, "parameter value");
    expect_error("Bearer realm=\"a\", realm=\"b\"", -EINVAL, "twice");
    expect_error("Bearer realm \"a\"", -EINVAL, "'='");
    expect_error("Bearer realm=\"a\"\"b\"", -EINVAL, "','");
    expect_error("Bear(er realm=a", -EINVAL, "after the scheme");
    expect_error("=x", -EINVAL, "scheme");
    expect_error("Bearer realm=\"a\x01\"", -EINVAL, "control character");
}

static void test_limits(void **state)
{
    char big[AUTH_HEADER_MAX + 16];
    memset(big, 'a', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    expect_error(big, -E2BIG, "longer than");

    char many[2048] = "Bearer ";
    for (int i = 0; i <= AUTH_PARAMS_MAX; i++) {
        char p[32];
        snprintf(p, sizeof(p), "%sp%d=v", i ? "," : "", i);
        strcat(many, p);
    }
    expect_error(many, -E2BIG, "parameters");

    char schemes[2048] = "";
    for (int i = 0; i <= AUTH_CHALLENGES_MAX; i++) {
        char p[32];
        snprintf(p, sizeof(p), "%sS%d", i ? ", " : "", i);
        strcat(schemes, p);
    }
    expect_error(schemes, -E2BIG, "challenges");
}

static void token_ok(const char *json, const char *tok, int64_t expires)
{
    struct auth_token t = {0};
    struct errmsg e = {{0}};
    int r = auth_token_parse(json, strlen(json), &t, &e);
    if (r != 0)
        fail_msg("%s: %d %s", json, r, e.text);
    assert_string_equal(t.token, tok);
    assert_int_equal(t.expires_in, expires);
    auth_token_done(&t);
    assert_null(t.token);
}

static void test_token_answers(void **state)
{
    token_ok(
        "{\"token\":\"abc.def.ghi\",\"expires_in\":300,\"issued_at\":\"2024-01-01T00:00:00Z\"}",
        "abc.def.ghi", 300);
    /* OAuth2-style servers only send access_token. */
    token_ok("{\"access_token\":\"xyz\"}", "xyz", 60);
    token_ok("{\"token\":\"\",\"access_token\":\"xyz\",\"expires_in\":null}", "xyz", 60);
    token_ok("{\"token\":\"t\",\"expires_in\":0}", "t", 60);
    token_ok("{\"token\":\"t\",\"expires_in\":-5}", "t", 60);
    token_ok("{\"token\":\"t\",\"expires_in\":2.5}", "t", 2);
    token_ok("{\"token\":\"t\",\"expires_in\":1e300}", "t", 366 * 24 * 3600);
}

static void token_bad(const char *json, const char *needle)
{
    struct auth_token t = {0};
    struct errmsg e = {{0}};
    assert_int_equal(auth_token_parse(json, strlen(json), &t, &e), -EINVAL);
    assert_null(t.token);
    if (!strstr(e.text, needle))
        fail_msg("%s: message '%s' lacks '%s'", json, e.text, needle);
}

static void test_token_bad(void **state)
{
    token_bad("", "not JSON");
    token_bad("[]", "not a JSON object");
    token_bad("{}", "no 'token'");
    token_bad("{\"token\":5}", "no 'token'");
    /* A token is sent in a header line: blanks and line breaks would split or forge headers. */
    token_bad("{\"token\":\"a b\"}", "not printable");
    token_bad("{\"token\":\"a\\r\\nX-Evil: 1\"}", "not printable");
    token_bad("{\"token\":\"t\",\"expires_in\":\"300\"}", "expires_in");
    token_bad("{\"token\":\"a\",\"token\":\"b\"}", "not JSON");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docker_hub_bearer),  cmocka_unit_test(test_basic_and_case),
        cmocka_unit_test(test_several_challenges), cmocka_unit_test(test_error_param_and_blanks),
        cmocka_unit_test(test_malformed),          cmocka_unit_test(test_limits),
        cmocka_unit_test(test_token_answers),      cmocka_unit_test(test_token_bad),
    };
    return test_run_cases(tests);
}
