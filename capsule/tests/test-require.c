/* Tests for capsule/image/require.c: NVIDIA_REQUIRE_* grammar, version order, the driver table and
 * the messages users see when their driver is too old. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "capsule/image/require.h"

/* A real CUDA 11.0 image's value: the plain requirement, then Tesla forward-compatibility. */
#define CUDA11 "cuda>=11.0 brand=tesla,driver>=418,driver<419 brand=tesla,driver>=440,driver<441"

static void test_version_cmp(void **state)
{
    assert_true(require_version_cmp("12.10", "12.9") > 0);
    assert_true(require_version_cmp("12.9", "12.10") < 0);
    assert_int_equal(require_version_cmp("1.0", "1"), 0);
    assert_int_equal(require_version_cmp("1", "1.0.0"), 0);
    assert_int_equal(require_version_cmp("08", "8"), 0);
    assert_true(require_version_cmp("535.104.05", "535.54.03") > 0);
    assert_true(require_version_cmp("470", "470.57.02") < 0);
    assert_true(require_version_cmp("470.57.02", "471") < 0);
    assert_true(require_version_cmp("99999999999999999999999", "99999999999999999999998") > 0);
    assert_true(require_version_cmp("100000000000000000000000", "99999999999999999999999") > 0);
    assert_true(require_version_cmp("12.a", "12.b") < 0);
    assert_true(require_version_cmp("12.rc1", "12.rc10") < 0);
    assert_int_equal(require_version_cmp("", ""), 0);
}

static void test_driver_table(void **state)
{
    assert_string_equal(require_min_driver_for_cuda("12.4"), "550.54.14");
    assert_string_equal(require_min_driver_for_cuda("12.4.1"), "550.54.14");
    assert_string_equal(require_min_driver_for_cuda("10.0"), "410.48");
    assert_string_equal(require_min_driver_for_cuda("11.0"), "450.36.06");
    assert_string_equal(require_min_driver_for_cuda("12.8"), "570.26");
    assert_string_equal(require_min_driver_for_cuda("13.0"), "580.65.06");
    assert_null(require_min_driver_for_cuda("12.7")); /* there was no CUDA 12.7 */
    assert_null(require_min_driver_for_cuda("12.40"));
    assert_null(require_min_driver_for_cuda("9.2"));
    assert_null(require_min_driver_for_cuda("12"));
    assert_null(require_min_driver_for_cuda(NULL));
}

static void expect_parse_error(const char *value, const char *want)
{
    struct errmsg e = {""};
    assert_int_equal(require_parse(value, &e), -EINVAL);
    if (!strstr(e.text, want))
        fail_msg("'%s': message '%s' lacks '%s'", value, e.text, want);
}

static void test_parse(void **state)
{
    assert_int_equal(require_parse("", NULL), 0);
    assert_int_equal(require_parse("   ", NULL), 0);
    assert_int_equal(require_parse("cuda>=12.2", NULL), 0);
    assert_int_equal(require_parse(CUDA11, NULL), 0);
    assert_int_equal(require_parse("  cuda>=12.2   brand=tesla,driver>=535\t", NULL), 0);
    assert_int_equal(require_parse("arch>=7.0,arch!=7.2 arch=9.0,cuda==12.0 driver<=550", NULL), 0);
    assert_int_equal(require_parse("brand!=geforce_rtx-x", NULL), 0);

    expect_parse_error("cuda>>12.0", "condition 'cuda>>12.0': '>12.0' is not a version");
    expect_parse_error("cudaa>=12", "unknown key 'cudaa' (cuda, driver, arch and brand are known)");
    expect_parse_error("cuda", "expected one of =, !=, <, <=, >, >= after 'cuda'");
    expect_parse_error("cuda>=", "'' is not a version");
    expect_parse_error("cuda>=12.", "'12.' is not a version");
    expect_parse_error("cuda>=.12", "is not a version");
    expect_parse_error("cuda>=12..1", "is not a version");
    expect_parse_error("driver>=abc", "'abc' is not a version");
    expect_parse_error("brand>tesla", "brands compare only with = and !=");
    expect_parse_error("brand=", "'' is not a brand name");
    expect_parse_error("cuda>=12,", "alternative 1 has an empty condition");
    expect_parse_error("cuda>=11 ,cuda>=12", "alternative 2 has an empty condition");
    expect_parse_error("cuda>=12,,driver>1", "empty condition");
    expect_parse_error("=12", "unknown key ''");

    char *huge = malloc(5000);
    assert_non_null(huge);
    memset(huge, ' ', 4999);
    huge[4999] = '\0';
    expect_parse_error(huge, "longer than 4096 characters");
    free(huge);
}

static const struct require_host h535 = {
    .cuda = "12.2", .driver = "535.104.05", .brand = "geforce", .archs = NULL};

static int check1(const char *entry, const struct require_host *h, struct errmsg *e)
{
    char *env[] = {(char *)"PATH=/bin", (char *)entry, NULL};
    return require_check(env, h, e);
}

static void test_message_for_old_driver(void **state)
{
    struct errmsg e = {""};
    assert_int_equal(check1("NVIDIA_REQUIRE_CUDA=cuda>=12.4", &h535, &e), -EPERM);
    assert_string_equal(e.text, "image requires cuda>=12.4 (NVIDIA_REQUIRE_CUDA); this host's "
                                "driver 535.104.05 supports CUDA 12.2: install driver 550 or "
                                "newer");
    /* A version between releases points at the next release's driver. */
    assert_int_equal(check1("NVIDIA_REQUIRE_CUDA=cuda>=12.7", &h535, &e), -EPERM);
    assert_non_null(strstr(e.text, "install driver 570 or newer"));
    assert_int_equal(check1("NVIDIA_REQUIRE_CUDA=cuda>=14.0", &h535, &e), -EPERM);
    assert_non_null(strstr(e.text, "install a driver that supports CUDA 14.0"));
    assert_int_equal(check1("NVIDIA_REQUIRE_CUDA=cuda<12", &h535, &e), -EPERM);
    assert_non_null(strstr(e.text, "built for an older CUDA"));

    assert_int_equal(check1("NVIDIA_REQUIRE_CUDA=cuda>=12.2", &h535, &e), 0);
    assert_int_equal(check1("NVIDIA_REQUIRE_CUDA=cuda>=9.0", &h535, &e), 0);
    assert_int_equal(check1("NVIDIA_REQUIRE_CUDA=", &h535, &e), 0);
}

static void test_alternatives(void **state)
{
    struct errmsg e = {""};
    const struct require_host tesla = {.cuda = "10.2", .driver = "440.33.01", .brand = "tesla"};
    const struct require_host geforce = {.cuda = "10.2", .driver = "440.33.01", .brand = "geforce"};
    const struct require_host unknown = {.cuda = "10.2", .driver = "440.33.01", .brand = ""};
    const struct require_host tesla_old = {.cuda = "10.1", .driver = "418.40", .brand = "tesla"};

    /* A Tesla on the 440 branch runs a CUDA 11 image through the compatibility package. */
    assert_int_equal(check1("NVIDIA_REQUIRE_CUDA=" CUDA11, &tesla, &e), 0);
    assert_int_equal(check1("NVIDIA_REQUIRE_CUDA=" CUDA11, &tesla_old, &e), 0);
    /* A GeForce does not, and the message explains the first alternative. */
    assert_int_equal(check1("NVIDIA_REQUIRE_CUDA=" CUDA11, &geforce, &e), -EPERM);
    assert_string_equal(e.text, "image requires cuda>=11.0 (NVIDIA_REQUIRE_CUDA); this host's "
                                "driver 440.33.01 supports CUDA 10.2: install driver 450 or "
                                "newer");
    /* A brand the host does not report does not count against the image. */
    assert_int_equal(check1("NVIDIA_REQUIRE_CUDA=" CUDA11, &unknown, &e), 0);
}

static void test_other_conditions(void **state)
{
    struct errmsg e = {""};
    const char *const archs[] = {"9.0", "7.0", NULL};
    const struct require_host h = {
        .cuda = "12.2", .driver = "535.104.05", .brand = "tesla", .archs = archs};
    const struct require_host none = {.cuda = "", .driver = "", .brand = "", .archs = NULL};

    /* Every selected GPU must satisfy an arch condition. */
    assert_int_equal(check1("NVIDIA_REQUIRE_ARCH=arch>=8.0", &h, &e), -EPERM);
    assert_string_equal(e.text, "image requires arch>=8.0 (NVIDIA_REQUIRE_ARCH); a selected GPU "
                                "has compute capability 7.0: select GPUs that satisfy it");
    assert_int_equal(check1("NVIDIA_REQUIRE_ARCH=arch>=7.0", &h, &e), 0);
    assert_int_equal(check1("NVIDIA_REQUIRE_DRIVER=driver>=550", &h, &e), -EPERM);
    assert_string_equal(e.text, "image requires driver>=550 (NVIDIA_REQUIRE_DRIVER); this "
                                "host's driver is 535.104.05");
    assert_int_equal(check1("NVIDIA_REQUIRE_DRIVER=driver>=535.104.05", &h, &e), 0);
    assert_int_equal(check1("NVIDIA_REQUIRE_BRAND=brand!=tesla", &h, &e), -EPERM);
    assert_non_null(strstr(e.text, "this host's GPUs are of brand 'tesla'"));
    assert_int_equal(check1("NVIDIA_REQUIRE_BRAND=brand=TESLA", &h, &e), 0);

    /* Facts the host does not report hold. */
    assert_int_equal(
        check1("NVIDIA_REQUIRE_X=cuda>=99,driver>=999,arch>=10.0,brand=tesla", &none, &e), 0);
}

static void test_disable_and_overrides(void **state)
{
    struct errmsg e = {""};
    char *off[] = {(char *)"NVIDIA_REQUIRE_CUDA=cuda>=13.0", (char *)"NVIDIA_DISABLE_REQUIRE=1",
                   NULL};
    assert_int_equal(require_check(off, &h535, &e), 0);
    off[1] = (char *)"NVIDIA_DISABLE_REQUIRE=true";
    assert_int_equal(require_check(off, &h535, &e), 0);
    off[1] = (char *)"NVIDIA_DISABLE_REQUIRE=0";
    assert_int_equal(require_check(off, &h535, &e), -EPERM);

    /* The user's setting comes after the image's and wins. */
    char *user_on[] = {(char *)"NVIDIA_DISABLE_REQUIRE=true",
                       (char *)"NVIDIA_REQUIRE_CUDA=cuda>=13.0",
                       (char *)"NVIDIA_DISABLE_REQUIRE=false", NULL};
    assert_int_equal(require_check(user_on, &h535, &e), -EPERM);
    char *relaxed[] = {(char *)"NVIDIA_REQUIRE_CUDA=cuda>=13.0",
                       (char *)"NVIDIA_REQUIRE_CUDA=cuda>=12.0", NULL};
    assert_int_equal(require_check(relaxed, &h535, &e), 0);
    char *stricter[] = {(char *)"NVIDIA_REQUIRE_CUDA=cuda>=12.0",
                        (char *)"NVIDIA_REQUIRE_CUDA=cuda>=13.0", NULL};
    assert_int_equal(require_check(stricter, &h535, &e), -EPERM);

    /* Every NVIDIA_REQUIRE_ variable must hold, not just one. */
    char *two[] = {(char *)"NVIDIA_REQUIRE_CUDA=cuda>=12.0",
                   (char *)"NVIDIA_REQUIRE_DRIVER=driver>=550", NULL};
    assert_int_equal(require_check(two, &h535, &e), -EPERM);
    assert_non_null(strstr(e.text, "(NVIDIA_REQUIRE_DRIVER)"));

    char *nothing[] = {NULL};
    assert_int_equal(require_check(nothing, &h535, &e), 0);
    assert_int_equal(require_check(NULL, &h535, &e), 0);
    /* "NVIDIA_REQUIRE_" alone and look-alikes are not requirements. */
    char *odd[] = {(char *)"NVIDIA_REQUIRE_=cuda>=99", (char *)"NVIDIA_REQUIREMENTS=x",
                   (char *)"NVIDIA_REQUIRE_CUDA", NULL};
    assert_int_equal(require_check(odd, &h535, &e), 0);
}

static void test_invalid_value(void **state)
{
    struct errmsg e = {""};
    assert_int_equal(check1("NVIDIA_REQUIRE_CUDA=cuda>=12.2 brand=tesla,drvier>=470", &h535, &e),
                     -EINVAL);
    assert_non_null(strstr(e.text, "NVIDIA_REQUIRE_CUDA: 'cuda>=12.2 brand=tesla,drvier>=470': "
                                   "condition 'drvier>=470': unknown key 'drvier'"));
}

static void test_legacy_cuda_version(void **state)
{
    struct errmsg e = {""};
    /* Old images name only CUDA_VERSION; it is a requirement then. */
    assert_int_equal(check1("CUDA_VERSION=12.3.2", &h535, &e), -EPERM);
    assert_string_equal(e.text, "image requires cuda>=12.3 (CUDA_VERSION); this host's driver "
                                "535.104.05 supports CUDA 12.2: install driver 545 or newer");
    assert_int_equal(check1("CUDA_VERSION=12.2.2", &h535, &e), 0);
    assert_int_equal(check1("CUDA_VERSION=garbage", &h535, &e), 0);
    /* With NVIDIA_REQUIRE_CUDA present (NGC images set "cuda>=9.0"), CUDA_VERSION is not one. */
    char *ngc[] = {(char *)"CUDA_VERSION=12.3.2.001", (char *)"NVIDIA_REQUIRE_CUDA=cuda>=9.0",
                   NULL};
    assert_int_equal(require_check(ngc, &h535, &e), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_cmp),
        cmocka_unit_test(test_driver_table),
        cmocka_unit_test(test_parse),
        cmocka_unit_test(test_message_for_old_driver),
        cmocka_unit_test(test_alternatives),
        cmocka_unit_test(test_other_conditions),
        cmocka_unit_test(test_disable_and_overrides),
        cmocka_unit_test(test_invalid_value),
        cmocka_unit_test(test_legacy_cuda_version),
    };
    return test_run_cases(tests);
}
