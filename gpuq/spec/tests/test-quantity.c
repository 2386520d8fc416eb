/* Tests for Kubernetes quantities as Job manifests and `gpuq submit` write CPUs and memory: the
 * values Kubernetes' documentation gives as equal must come out equal, exactly. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "gpuq/spec/quantity.h"

static void test_cpu(void **state)
{
    static const struct {
        const char *s;
        unsigned milli;
    } good[] = {
        {"500m", 500},    {"2", 2000},     {"1.5", 1500},      {"0.1", 100},    {"2e-1", 200},
        {"+1", 1000},     {".5", 500},     {"5.", 5000},       {"1k", 1000000}, {"0", 0},
        {"0.001", 1},     {"1000m", 1000}, {"0.000500k", 500}, {"8", 8000},     {"3E-3", 3},
        {"1.2500", 1250}, {"64", 64000},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        unsigned m = 12345;
        struct errmsg e = {""};
        int r = quantity_parse_cpu(good[i].s, &m, &e);
        if (r != 0)
            print_error("'%s': %s\n", good[i].s, e.text);
        assert_int_equal(r, 0);
        assert_int_equal(m, good[i].milli);
    }
    static const struct {
        const char *s;
        int r;
        const char *why;
    } bad[] = {
        {"0.0005", -EINVAL, "finer than 1m"},
        {"1.5m", -EINVAL, "finer than 1m"},
        {"-1", -EINVAL, "negative"},
        {"abc", -EINVAL, "not a CPU quantity"},
        {"", -EINVAL, "not a CPU quantity"},
        {"1x", -EINVAL, "not a CPU quantity"},
        {" 1", -EINVAL, "not a CPU quantity"},
        {"1 ", -EINVAL, "not a CPU quantity"},
        {"1..5", -EINVAL, "not a CPU quantity"},
        {"1e", -EINVAL, "not a CPU quantity"},
        {"1K", -EINVAL, "not a CPU quantity"}, /* Kubernetes' kilo is 'k' */
        {"1e10", -ERANGE, "more CPUs"},
        {"1.0000000000000000001", -ERANGE, "too many digits"},
        {"1e-99999", -EINVAL, "finer than 1m"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        unsigned m = 12345;
        struct errmsg e = {""};
        assert_int_equal(quantity_parse_cpu(bad[i].s, &m, &e), bad[i].r);
        assert_non_null(strstr(e.text, bad[i].why));
        assert_int_equal(m, 12345);
    }
}

static void test_memory_kubernetes(void **state)
{
    /* Kubernetes' documentation: these are all roughly the same value. */
    static const struct {
        const char *s;
        uint64_t bytes;
    } good[] = {
        {"128974848", 128974848},
        {"129e6", 129000000},
        {"129M", 129000000},
        {"123Mi", 128974848},
        {"1Gi", 1073741824},
        {"1G", 1000000000},
        {"32Gi", UINT64_C(34359738368)},
        {"1k", 1000},
        {"1Ki", 1024},
        {"0.5Gi", 536870912},
        {"1000m", 1},
        {"1.5k", 1500},
        {"7Ei", UINT64_C(8070450532247928832)},
        {"9E", UINT64_C(9000000000000000000)},
        {"0e99999", 0},
        {"0", 0},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        uint64_t b = 12345;
        struct errmsg e = {""};
        int r = quantity_parse_memory(good[i].s, QUANTITY_LETTERS_DECIMAL, &b, &e);
        if (r != 0)
            print_error("'%s': %s\n", good[i].s, e.text);
        assert_int_equal(r, 0);
        assert_true(b == good[i].bytes);
    }
    static const struct {
        const char *s;
        int r;
        const char *why;
    } bad[] = {
        {"512m", -EINVAL, "('m' is milli)"},
        {"1.5", -EINVAL, "not a whole number of bytes"},
        {"1K", -EINVAL, "not a memory quantity"},
        {"1GB", -EINVAL, "not a memory quantity"},
        {"1gi", -EINVAL, "not a memory quantity"},
        {"-1Gi", -EINVAL, "negative"},
        {"10E", -ERANGE, "too large"},
        {"8Ei", -ERANGE, "too large"}, /* 2^63: past what a JSON integer holds */
        {"1e99999", -ERANGE, "too large"},
        {"1e-99999", -EINVAL, "not a whole number of bytes"},
        {"00000000000000000000000000000000000000000000000000000000000000001", -ERANGE,
         "too many digits"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        uint64_t b = 12345;
        struct errmsg e = {""};
        assert_int_equal(quantity_parse_memory(bad[i].s, QUANTITY_LETTERS_DECIMAL, &b, &e),
                         bad[i].r);
        assert_non_null(strstr(e.text, bad[i].why));
        assert_true(b == 12345);
    }
}

static void test_memory_binary_letters(void **state)
{
    /* `gpuq submit --mem` reads single letters as Slurm and the rest of gpunode do. */
    static const struct {
        const char *s;
        uint64_t bytes;
    } good[] = {
        {"512M", UINT64_C(536870912)},
        {"1.5G", UINT64_C(1610612736)},
        {"1K", 1024},
        {"1k", 1024},
        {"2T", UINT64_C(2199023255552)},
        {"129e6", 129000000},
        {"1Gi", UINT64_C(1073741824)},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        uint64_t b = 0;
        struct errmsg e = {""};
        assert_int_equal(quantity_parse_memory(good[i].s, QUANTITY_LETTERS_BINARY, &b, &e), 0);
        assert_true(b == good[i].bytes);
    }
    uint64_t b;
    assert_int_equal(quantity_parse_memory("1.1K", QUANTITY_LETTERS_BINARY, &b, NULL), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu),
        cmocka_unit_test(test_memory_kubernetes),
        cmocka_unit_test(test_memory_binary_letters),
    };
    return test_run_cases(tests);
}
