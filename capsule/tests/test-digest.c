/* Tests for capsule/image/digest.c: digest syntax, streaming verification, known answers. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "capsule/image/digest.h"

/* sha256("") and sha256("abc"), sha512("abc") from FIPS 180-2. */
#define SHA256_EMPTY "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define SHA256_ABC   "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
#define SHA512_ABC                                                                                 \
    "sha512:"                                                                                      \
    "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c"       \
    "23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"

static void test_valid(void **state)
{
    assert_true(digest_valid(SHA256_EMPTY));
    assert_true(digest_valid(SHA512_ABC));
    assert_false(digest_valid(NULL));
    assert_false(digest_valid(""));
    assert_false(digest_valid("sha256:"));
    assert_false(digest_valid("sha256:e3b0"));
    /* Upper-case hex, one digit too many or too few, other algorithms, stray text. */
    assert_false(
        digest_valid("sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855"));
    assert_false(digest_valid(SHA256_EMPTY "0"));
    assert_false(
        digest_valid("sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85"));
    assert_false(
        digest_valid("sha384:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    assert_false(
        digest_valid("SHA256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    assert_false(
        digest_valid("sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b85g"));
    assert_false(
        digest_valid(" sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
    /* A sha256-length hex string under the sha512 name is not a sha512 digest. */
    assert_false(
        digest_valid("sha512:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"));
}

static void test_one_shot(void **state)
{
    char out[DIGEST_STRING_MAX];
    digest_sha256("", 0, out);
    assert_string_equal(out, SHA256_EMPTY);
    digest_sha256("abc", 3, out);
    assert_string_equal(out, SHA256_ABC);
    assert_string_equal(digest_hex(out), &SHA256_ABC[7]);
}

static void test_streaming_verify(void **state)
{
    struct errmsg e = {""};
    _cleanup_(digest_freep) struct digest_ctx *c = NULL;

    /* Data arriving in pieces hashes like the whole. */
    assert_int_equal(digest_begin(SHA256_ABC, &c, &e), 0);
    digest_update(c, "a", 1);
    digest_update(c, "", 0);
    digest_update(c, "bc", 2);
    assert_int_equal(digest_verify(c, &e), 0);
    digest_free(TAKE_PTR(c));

    assert_int_equal(digest_begin(SHA512_ABC, &c, &e), 0);
    digest_update(c, "abc", 3);
    assert_int_equal(digest_verify(c, &e), 0);
    digest_free(TAKE_PTR(c));
}

static void test_mismatch(void **state)
{
    struct errmsg e = {""};
    _cleanup_(digest_freep) struct digest_ctx *c = NULL;

    assert_int_equal(digest_begin(SHA256_ABC, &c, &e), 0);
    digest_update(c, "abd", 3);
    assert_int_equal(digest_verify(c, &e), -EBADMSG);
    assert_non_null(strstr(e.text, "digest mismatch: expected " SHA256_ABC ", got sha256:"));
}

static void test_begin_refuses_invalid(void **state)
{
    struct errmsg e = {""};
    struct digest_ctx *c = NULL;
    assert_int_equal(digest_begin("md5:900150983cd24fb0d6963f7d28e17f72", &c, &e), -EINVAL);
    assert_null(c);
    assert_non_null(strstr(e.text, "'md5:900150983cd24fb0d6963f7d28e17f72' is not a valid digest"));
    assert_int_equal(digest_begin(NULL, &c, NULL), -EINVAL);
}

static void test_compute_unknown(void **state)
{
    char out[DIGEST_STRING_MAX];
    _cleanup_(digest_freep) struct digest_ctx *c = NULL;
    assert_int_equal(digest_begin_sha256(&c), 0);
    digest_update(c, "ab", 2);
    digest_update(c, "c", 1);
    digest_final(c, out);
    assert_string_equal(out, SHA256_ABC);
    assert_true(digest_valid(out));
    /* Nothing to verify against. */
    struct digest_ctx *d = NULL;
    assert_int_equal(digest_begin_sha256(&d), 0);
    assert_int_equal(digest_verify(d, NULL), -EINVAL);
    digest_free(d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid),
        cmocka_unit_test(test_one_shot),
        cmocka_unit_test(test_streaming_verify),
        cmocka_unit_test(test_mismatch),
        cmocka_unit_test(test_begin_refuses_invalid),
        cmocka_unit_test(test_compute_unknown),
    };
    return test_run_cases(tests);
}
