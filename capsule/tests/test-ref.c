/* Tests for capsule/image/ref.c: image references as users type them, canonical names. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "lib/macro.h"
#include "capsule/image/ref.h"

#define D64  "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define D128 D64 D64

struct good {
    const char *in;
    const char *user, *registry, *repository, *tag, *digest;
    const char *canonical;
};

static const struct good goods[] = {
    /* Docker Hub short names and namespaces */
    {"ubuntu", NULL, "docker.io", "library/ubuntu", "latest", NULL,
     "docker.io/library/ubuntu:latest"},
    {"ubuntu:22.04", NULL, "docker.io", "library/ubuntu", "22.04", NULL,
     "docker.io/library/ubuntu:22.04"},
    {"nvidia/cuda:12.2.0-base-ubuntu22.04", NULL, "docker.io", "nvidia/cuda",
     "12.2.0-base-ubuntu22.04", NULL, "docker.io/nvidia/cuda:12.2.0-base-ubuntu22.04"},
    {"docker.io/ubuntu", NULL, "docker.io", "library/ubuntu", "latest", NULL,
     "docker.io/library/ubuntu:latest"},
    {"index.docker.io/library/busybox", NULL, "docker.io", "library/busybox", "latest", NULL,
     "docker.io/library/busybox:latest"},
    {"registry-1.docker.io/nvidia/cuda", NULL, "docker.io", "nvidia/cuda", "latest", NULL,
     "docker.io/nvidia/cuda:latest"},
    /* other registries, nested paths, ports */
    {"nvcr.io/nvidia/pytorch:24.01-py3", NULL, "nvcr.io", "nvidia/pytorch", "24.01-py3", NULL,
     "nvcr.io/nvidia/pytorch:24.01-py3"},
    {"ghcr.io/a/b/c/d:v1", NULL, "ghcr.io", "a/b/c/d", "v1", NULL, "ghcr.io/a/b/c/d:v1"},
    {"127.0.0.1:5000/test/img:1", NULL, "127.0.0.1:5000", "test/img", "1", NULL,
     "127.0.0.1:5000/test/img:1"},
    {"localhost/x", NULL, "localhost", "x", "latest", NULL, "localhost/x:latest"},
    {"localhost:5000/x", NULL, "localhost:5000", "x", "latest", NULL, "localhost:5000/x:latest"},
    {"[::1]:5000/img:tag", NULL, "[::1]:5000", "img", "tag", NULL, "[::1]:5000/img:tag"},
    {"[fe80::1]/img", NULL, "[fe80::1]", "img", "latest", NULL, "[fe80::1]/img:latest"},
    {"NVCR.io/nvidia/pytorch", NULL, "nvcr.io", "nvidia/pytorch", "latest", NULL,
     "nvcr.io/nvidia/pytorch:latest"},
    {"my-registry.example.com:443/team/app", NULL, "my-registry.example.com:443", "team/app",
     "latest", NULL, "my-registry.example.com:443/team/app:latest"},
    /* separators */
    {"foo/a.b_c__d--e-f", NULL, "docker.io", "foo/a.b_c__d--e-f", "latest", NULL,
     "docker.io/foo/a.b_c__d--e-f:latest"},
    /* Docker's rule: a first component with '.' is a registry, even if it was meant otherwise */
    {"a.b/c", NULL, "a.b", "c", "latest", NULL, "a.b/c:latest"},
    /* tags */
    {"ubuntu:_x", NULL, "docker.io", "library/ubuntu", "_x", NULL, "docker.io/library/ubuntu:_x"},
    {"ubuntu:Jammy-2024.01_a", NULL, "docker.io", "library/ubuntu", "Jammy-2024.01_a", NULL,
     "docker.io/library/ubuntu:Jammy-2024.01_a"},
    /* digests, with and without a tag */
    {"ubuntu@sha256:" D64, NULL, "docker.io", "library/ubuntu", NULL, "sha256:" D64,
     "docker.io/library/ubuntu@sha256:" D64},
    {"nvcr.io/nvidia/pytorch:24.01-py3@sha256:" D64, NULL, "nvcr.io", "nvidia/pytorch", "24.01-py3",
     "sha256:" D64, "nvcr.io/nvidia/pytorch:24.01-py3@sha256:" D64},
    {"localhost:5000/x@sha512:" D128, NULL, "localhost:5000", "x", NULL, "sha512:" D128,
     "localhost:5000/x@sha512:" D128},
    /* enroot's syntax */
    {"docker://ubuntu", NULL, "docker.io", "library/ubuntu", "latest", NULL,
     "docker.io/library/ubuntu:latest"},
    {"docker://nvcr.io#nvidia/pytorch:24.01-py3", NULL, "nvcr.io", "nvidia/pytorch", "24.01-py3",
     NULL, "nvcr.io/nvidia/pytorch:24.01-py3"},
    {"docker://nvcr.io/nvidia/pytorch:24.01-py3", NULL, "nvcr.io", "nvidia/pytorch", "24.01-py3",
     NULL, "nvcr.io/nvidia/pytorch:24.01-py3"},
    {"nvcr.io#nvidia/pytorch:24.01-py3", NULL, "nvcr.io", "nvidia/pytorch", "24.01-py3", NULL,
     "nvcr.io/nvidia/pytorch:24.01-py3"},
    {"docker://$oauthtoken@nvcr.io#nvidia/pytorch:24.01-py3", "$oauthtoken", "nvcr.io",
     "nvidia/pytorch", "24.01-py3", NULL, "nvcr.io/nvidia/pytorch:24.01-py3"},
    {"docker://alice@ubuntu:22.04", "alice", "docker.io", "library/ubuntu", "22.04", NULL,
     "docker.io/library/ubuntu:22.04"},
    {"docker://alice@example.com@registry.example.com#team/app", "alice@example.com",
     "registry.example.com", "team/app", "latest", NULL, "registry.example.com/team/app:latest"},
    {"docker://ubuntu@sha256:" D64, NULL, "docker.io", "library/ubuntu", NULL, "sha256:" D64,
     "docker.io/library/ubuntu@sha256:" D64},
    {"docker://bob@ubuntu@sha256:" D64, "bob", "docker.io", "library/ubuntu", NULL, "sha256:" D64,
     "docker.io/library/ubuntu@sha256:" D64},
    {"docker://localhost:5000#x/y:1", NULL, "localhost:5000", "x/y", "1", NULL,
     "localhost:5000/x/y:1"},
    {"docker://[::1]:5000#img", NULL, "[::1]:5000", "img", "latest", NULL, "[::1]:5000/img:latest"},
    {"docker://docker.io#ubuntu", NULL, "docker.io", "library/ubuntu", "latest", NULL,
     "docker.io/library/ubuntu:latest"},
    /* a registry Docker's rule would not see keeps enroot's form when printed */
    {"docker://gitlab#group/app:1", NULL, "gitlab", "group/app", "1", NULL,
     "docker://gitlab#group/app:1"},
};

static void assert_str_or_null(const char *got, const char *want)
{
    if (want)
        assert_string_equal(got, want);
    else
        assert_null(got);
}

static void assert_ref_equal(const struct image_ref *a, const struct image_ref *b)
{
    assert_string_equal(a->registry, b->registry);
    assert_string_equal(a->repository, b->repository);
    assert_str_or_null(a->tag, b->tag);
    assert_str_or_null(a->digest, b->digest);
}

static void test_good_references(void **state)
{
    for (size_t i = 0; i < sizeof(goods) / sizeof(goods[0]); i++) {
        const struct good *g = &goods[i];
        struct image_ref r = {}, again = {};
        struct errmsg e = {""};
        char *name = NULL;

        print_message("%s\n", g->in);
        assert_int_equal(image_ref_parse(g->in, &r, &e), 0);
        assert_str_or_null(r.user, g->user);
        assert_string_equal(r.registry, g->registry);
        assert_string_equal(r.repository, g->repository);
        assert_str_or_null(r.tag, g->tag);
        assert_str_or_null(r.digest, g->digest);

        /* The canonical name parses back to the same image. */
        assert_int_equal(image_ref_format(&r, &name), 0);
        assert_string_equal(name, g->canonical);
        assert_int_equal(image_ref_parse(name, &again, &e), 0);
        assert_ref_equal(&again, &r);
        free(name);
        image_ref_done(&again);
        image_ref_done(&r);
        image_ref_done(&r); /* twice is allowed */
    }
}

struct bad {
    const char *in;
    const char *message; /* a part the message must contain */
};

static const struct bad bads[] = {
    {"", "empty image reference"},
    {"Ubuntu", "'Ubuntu': repository names must be lower case"},
    {"nvcr.io/NVIDIA/pytorch", "must be lower case"},
    {"ubuntu:", "empty tag after ':'"},
    {"ubuntu@", "empty digest after '@'"},
    {":latest", "no repository name"},
    {"/ubuntu", "empty part in repository name"},
    {"ubuntu/", "empty part in repository name"},
    {"a//b", "empty part in repository name"},
    {"nvcr.io/", "no repository name"},
    {"ubuntu:-x", "must start with a letter, digit or '_'"},
    {"ubuntu:a+b", "may contain only letters"},
    {"ubuntu:a/b", "registry port 'a'"},
    {"ubuntu:t@g", "digest 'g' has no algorithm"},
    {"ubuntu@sha256:abc", "expected 64 lower-case hex digits"},
    {"ubuntu@sha256:"
     "0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef",
     "lower-case hex"},
    {"ubuntu@md5:0123456789abcdef0123456789abcdef", "unsupported digest algorithm 'md5'"},
    {"ubu ntu", "may contain only"},
    {"a_-b", "separators"},
    {"a...b", "separators"},
    {"_a", "start and end with a letter or digit"},
    {"a-", "start and end with a letter or digit"},
    {"localhost:0/x", "port '0'"},
    {"localhost:99999/x", "port '99999'"},
    {"localhost:/x", "port ''"},
    {"my..registry.io/x", "not a valid host name"},
    {"-bad.io/x", "not a valid host name"},
    {"bad.io./x", "not a valid host name"},
    {"[::1/x", "bad IPv6 address"},
    {"[zz::1]:5000/x", "bad IPv6 address"},
    {"[::1]x/y", "unexpected text after ']'"},
    {"docker://", "no image name after 'docker://'"},
    {"docker://#ubuntu", "empty registry name before '#'"},
    {"docker://nvcr.io#", "no image name after '#'"},
    {"docker://@ubuntu", "empty user name before '@'"},
    {"docker://a#b#c", "more than one '#'"},
    {"docker://bad_host#x", "not a valid host name"},
    {"docker://us er@nvcr.io#x", "blank or control character"},
    {"https://nvcr.io/nvidia/pytorch", "unknown scheme 'https://'"},
    {"nvcr.io#NVIDIA/x", "lower case"},
};

static void test_bad_references(void **state)
{
    for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
        struct image_ref r = {.registry = (char *)"untouched"};
        struct errmsg e = {""};
        print_message("%s\n", bads[i].in);
        assert_int_equal(image_ref_parse(bads[i].in, &r, &e), -EINVAL);
        if (!strstr(e.text, bads[i].message))
            fail_msg("'%s': message '%s' lacks '%s'", bads[i].in, e.text, bads[i].message);
        assert_string_equal(r.registry, "untouched");
    }
}

static void test_length_limits(void **state)
{
    struct image_ref r = {};
    struct errmsg e = {""};
    char name[600], tag[200];

    /* 255 characters of repository (with Docker Hub's "library/") are fine, 256 are not. */
    memset(name, 'a', 247);
    name[247] = '\0';
    assert_int_equal(image_ref_parse(name, &r, &e), 0);
    assert_int_equal(strlen(r.repository), 255);
    image_ref_done(&r);
    memset(name, 'a', 248);
    name[248] = '\0';
    assert_int_equal(image_ref_parse(name, &r, &e), -EINVAL);
    assert_non_null(strstr(e.text, "longer than 255"));
    /* The quoted input is shortened, so the message still says what is wrong. */
    assert_non_null(strstr(e.text, "...': "));

    memset(tag, 'x', 128);
    tag[128] = '\0';
    snprintf(name, sizeof(name), "ubuntu:%s", tag);
    assert_int_equal(image_ref_parse(name, &r, &e), 0);
    assert_int_equal(strlen(r.tag), 128);
    image_ref_done(&r);
    snprintf(name, sizeof(name), "ubuntu:%sx", tag);
    assert_int_equal(image_ref_parse(name, &r, &e), -EINVAL);
    assert_non_null(strstr(e.text, "tag is longer than 128"));

    char *huge = malloc(10000);
    assert_non_null(huge);
    memset(huge, 'a', 9999);
    huge[9999] = '\0';
    assert_int_equal(image_ref_parse(huge, &r, &e), -EINVAL);
    free(huge);
}

static void test_control_characters_are_not_echoed(void **state)
{
    struct image_ref r = {};
    struct errmsg e = {""};
    assert_int_equal(image_ref_parse("ubuntu\x1b[2J", &r, &e), -EINVAL);
    assert_null(strchr(e.text, '\x1b'));
    assert_non_null(strstr(e.text, "'ubuntu?[2J'"));
}

static void test_api_host(void **state)
{
    struct image_ref r = {};
    assert_int_equal(image_ref_parse("ubuntu", &r, NULL), 0);
    assert_string_equal(image_ref_api_host(&r), "registry-1.docker.io");
    image_ref_done(&r);
    assert_int_equal(image_ref_parse("nvcr.io/nvidia/cuda", &r, NULL), 0);
    assert_string_equal(image_ref_api_host(&r), "nvcr.io");
    image_ref_done(&r);
    assert_int_equal(image_ref_parse("localhost:5000/x", &r, NULL), 0);
    assert_string_equal(image_ref_api_host(&r), "localhost:5000");
    image_ref_done(&r);
}

static void test_loopback(void **state)
{
    assert_true(image_ref_is_loopback("localhost"));
    assert_true(image_ref_is_loopback("localhost:5000"));
    assert_true(image_ref_is_loopback("LOCALHOST:5000"));
    assert_true(image_ref_is_loopback("127.0.0.1:5000"));
    assert_true(image_ref_is_loopback("127.1.2.3"));
    assert_true(image_ref_is_loopback("[::1]:5000"));
    assert_true(image_ref_is_loopback("[::1]"));
    assert_true(image_ref_is_loopback("[::ffff:127.0.0.1]:80"));
    assert_false(image_ref_is_loopback("docker.io"));
    assert_false(image_ref_is_loopback("localhost.example.com"));
    assert_false(image_ref_is_loopback("128.0.0.1:5000"));
    assert_false(image_ref_is_loopback("10.0.0.1"));
    assert_false(image_ref_is_loopback("[::2]:5000"));
    assert_false(image_ref_is_loopback("127.0.0.1.nip.io"));
    assert_false(image_ref_is_loopback("[::1"));
    assert_false(image_ref_is_loopback(NULL));
}

/* Docker's isSingleReference, which decides whether `rmi ID` needs -f. */
static void test_refs_single(void **state)
{
#define D "@sha256:1111111111111111111111111111111111111111111111111111111111111111"
    static const struct {
        const char *names[4];
        bool single;
    } cases[] = {
        {{"ubuntu:22.04"}, true},
        {{"docker.io/library/ubuntu:22.04", "docker.io/library/ubuntu" D}, true},
        {{"ubuntu:22.04", "ubuntu" D, "docker.io/library/ubuntu" D}, true},
        {{"ubuntu" D, "docker.io/library/ubuntu" D}, true},
        {{"ubuntu:22.04", "ubuntu:jammy"}, false},
        {{"ubuntu:22.04", "debian" D}, false},
        {{"ubuntu" D, "debian" D}, false},
        {{"ubuntu:22.04", "reg:5000/ubuntu" D}, false},
        {{"ubuntu:22.04", "Not A Name"}, false},
        {{NULL}, false},
    };
#undef D
    for (size_t i = 0; i < ELEMENTSOF(cases); i++)
        assert_int_equal(image_refs_single((char **)cases[i].names), cases[i].single);
    assert_false(image_refs_single(NULL));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_references),
        cmocka_unit_test(test_bad_references),
        cmocka_unit_test(test_length_limits),
        cmocka_unit_test(test_control_characters_are_not_echoed),
        cmocka_unit_test(test_api_host),
        cmocka_unit_test(test_loopback),
        cmocka_unit_test(test_refs_single),
    };
    return test_run_cases(tests);
}
