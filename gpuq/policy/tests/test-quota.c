/* Tests for quotas (quota.c) and the queue helpers (queue.c): the config keys, the limits a
 * window lays over a queue's, how GPU model names match, CPU and memory amounts in Kubernetes'
 * forms, service classes and time limits. */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "gpuq/policy/queue.h"
#include "gpuq/policy/quota.h"
#include "lib/macro.h"

static void test_set_get_overlay(void **state)
{
    struct quota q = {0};
    assert_int_equal(quota_get(&q, QUOTA_GPUS, NULL), UINT64_MAX);
    assert_int_equal(quota_set(&q, QUOTA_GPUS, NULL, 4), 0);
    assert_int_equal(quota_set(&q, QUOTA_GPU_MODEL, "H100", 2), 0);
    assert_int_equal(quota_set(&q, QUOTA_MIG, "1g.10gb", 7), 0);
    assert_int_equal(quota_get(&q, QUOTA_GPUS, ""), 4);
    /* model names and profiles are one key whatever their case */
    assert_int_equal(quota_get(&q, QUOTA_GPU_MODEL, "h100"), 2);
    assert_int_equal(quota_set(&q, QUOTA_GPU_MODEL, "h100", 3), 0);
    assert_int_equal(q.n, 3);
    assert_int_equal(quota_get(&q, QUOTA_GPU_MODEL, "H100"), 3);
    assert_int_equal(quota_get(&q, QUOTA_GPU_MODEL, "A100"), UINT64_MAX);
    assert_int_equal(quota_get(&q, QUOTA_MIG, "2g.20gb"), UINT64_MAX);
    assert_int_equal(quota_set(&q, QUOTA_MIG, "", 1), -EINVAL);
    assert_int_equal(quota_set(&q, QUOTA_GPU_MODEL, "a-model-name-longer-than-31-bytes", 1),
                     -ENAMETOOLONG);

    struct quota night = {0};
    assert_int_equal(quota_set(&night, QUOTA_GPUS, "", 8), 0);
    assert_int_equal(quota_set(&night, QUOTA_CPUS, "", 64000), 0);
    assert_int_equal(quota_overlay(&q, &night), 0);
    assert_int_equal(quota_get(&q, QUOTA_GPUS, ""), 8);
    assert_int_equal(quota_get(&q, QUOTA_CPUS, ""), 64000);
    assert_int_equal(quota_get(&q, QUOTA_GPU_MODEL, "H100"), 3);

    /* full: a failed overlay leaves the base as it was */
    struct quota full = {0}, many = {0};
    char what[16];
    for (unsigned i = 0; i < QUOTA_MAX; i++) {
        snprintf(what, sizeof(what), "m%u", i);
        assert_int_equal(quota_set(&full, QUOTA_GPU_MODEL, what, i), 0);
        snprintf(what, sizeof(what), "x%u", i);
        assert_int_equal(quota_set(&many, QUOTA_GPU_MODEL, what, i), 0);
    }
    assert_int_equal(quota_set(&full, QUOTA_JOBS, "", 1), -E2BIG);
    assert_int_equal(quota_set(&full, QUOTA_GPU_MODEL, "m3", 99), 0);
    struct quota before = full;
    assert_int_equal(quota_overlay(&full, &many), -E2BIG);
    assert_memory_equal(&full, &before, sizeof(full));
}

static void test_keys(void **state)
{
    static const struct {
        const char *key;
        enum quota_kind kind;
        const char *what;
    } good[] = {
        {"gpus", QUOTA_GPUS, ""},
        {"gpus.H100", QUOTA_GPU_MODEL, "H100"},
        {"gpus.A100-80GB", QUOTA_GPU_MODEL, "A100-80GB"},
        {"mig.1g.10gb", QUOTA_MIG, "1g.10gb"},
        {"mig.1g.10gb+me", QUOTA_MIG, "1g.10gb+me"},
        {"cpus", QUOTA_CPUS, ""},
        {"memory", QUOTA_MEMORY, ""},
        {"jobs", QUOTA_JOBS, ""},
    };
    for (size_t i = 0; i < ELEMENTSOF(good); i++) {
        enum quota_kind kind;
        char what[QUOTA_WHAT_MAX];
        assert_int_equal(quota_parse_key(good[i].key, &kind, what), 0);
        assert_int_equal(kind, good[i].kind);
        assert_string_equal(what, good[i].what);
        struct quota_limit l = {.kind = kind, .limit = 1};
        strcpy(l.what, what);
        char buf[64];
        assert_string_equal(quota_key(&l, buf, sizeof(buf)), good[i].key);
    }
    static const char *const bad[] = {"",
                                      "gpu",
                                      "GPUS",
                                      "gpus.",
                                      "mig.",
                                      "mig",
                                      "cpu",
                                      "gpus.H 100",
                                      "gpus.a/b",
                                      "user.gpus",
                                      "gpus.0123456789012345678901234567890123"};
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        enum quota_kind kind;
        char what[QUOTA_WHAT_MAX];
        if (quota_parse_key(bad[i], &kind, what) != -EINVAL)
            fail_msg("'%s' taken for a quota key", bad[i]);
    }
}

static void test_model_matches(void **state)
{
    static const struct {
        const char *name, *model;
        bool match;
    } cases[] = {
        {"NVIDIA H100 80GB HBM3", "H100", true},
        {"NVIDIA H100 80GB HBM3", "h100", true},
        {"NVIDIA H100 80GB HBM3", "h100-80gb", true},
        {"NVIDIA H100 80GB HBM3", "H100_80GB", true},
        {"NVIDIA H100 80GB HBM3", "H10", false},
        {"NVIDIA H100 80GB HBM3", "80GB-H100", false}, /* words in order */
        {"NVIDIA H100 80GB HBM3", "H100 94GB", false},
        {"NVIDIA A100-SXM4-80GB", "A100-80GB", true},
        {"NVIDIA A100-SXM4-40GB", "A100-80GB", false},
        {"NVIDIA GeForce RTX 4090", "RTX 4090", true},
        {"NVIDIA GeForce RTX 4090", "4090", true},
        {"NVIDIA GeForce RTX 4090 D", "4090", true},
        {"NVIDIA GeForce RTX 4080", "4090", false},
        {"NVIDIA H200", "H200", true},
        {"NVIDIA H200", "H100", false},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++)
        if (quota_model_matches(cases[i].name, cases[i].model) != cases[i].match)
            fail_msg("'%s' vs '%s': expected %s", cases[i].name, cases[i].model,
                     cases[i].match ? "a match" : "none");
}

static void test_cpus_and_memory(void **state)
{
    static const struct {
        const char *s;
        int r;
        uint64_t milli;
    } cpus[] = {
        {"2", 0, 2000},          {"0.5", 0, 500},
        {"0.125", 0, 125},       {"1.05", 0, 1050},
        {"500m", 0, 500},        {"1000000", 0, 1000000000},
        {"1000001", -ERANGE, 0}, {"0.0005", -EINVAL, 0},
        {"-1", -EINVAL, 0},      {"1.", -EINVAL, 0},
        {".5", -EINVAL, 0},      {"", -EINVAL, 0},
        {"2 ", -EINVAL, 0},      {"1e3", -EINVAL, 0},
        {"0.5m", -EINVAL, 0},    {"99999999999999999999", -ERANGE, 0},
    };
    for (size_t i = 0; i < ELEMENTSOF(cpus); i++) {
        uint64_t v = 7;
        int r = quota_parse_cpus(cpus[i].s, &v);
        if (r != cpus[i].r || (r == 0 && v != cpus[i].milli) || (r < 0 && v != 7))
            fail_msg("cpus '%s': %d %" PRIu64, cpus[i].s, r, v);
    }
    static const struct {
        const char *s;
        int r;
        uint64_t bytes;
    } mem[] = {
        {"4096", 0, 4096},          {"512M", 0, 512ull << 20},  {"32Gi", 0, 32ull << 30},
        {"32G", 0, 32ull << 30},    {"64 GiB", 0, 64ull << 30}, {"1Ti", 0, 1ull << 40},
        {"512Mi", 0, 512ull << 20}, {"1.5Gi", -EINVAL, 0},      {"32Xi", -EINVAL, 0},
        {"i", -EINVAL, 0},          {"-1G", -EINVAL, 0},        {"99999999Pi", -ERANGE, 0},
    };
    for (size_t i = 0; i < ELEMENTSOF(mem); i++) {
        uint64_t v = 7;
        int r = quota_parse_memory(mem[i].s, &v);
        if (r != mem[i].r || (r == 0 && v != mem[i].bytes))
            fail_msg("memory '%s': %d %" PRIu64, mem[i].s, r, v);
    }
}

static void test_service_class(void **state)
{
    enum service_class c;
    assert_string_equal(service_class_name(SERVICE_GUARANTEED), "guaranteed");
    assert_string_equal(service_class_name(SERVICE_BURSTABLE), "burstable");
    assert_string_equal(service_class_name(SERVICE_BESTEFFORT), "besteffort");
    assert_null(service_class_name((enum service_class)3));
    assert_int_equal(service_class_from_name("BestEffort", &c), 0);
    assert_int_equal(c, SERVICE_BESTEFFORT);
    assert_int_equal(service_class_from_name("Guaranteed", &c), 0);
    assert_int_equal(c, SERVICE_GUARANTEED);
    assert_int_equal(service_class_from_name("best-effort", &c), -EINVAL);
    assert_int_equal(service_class_from_name("", &c), -EINVAL);
    assert_int_equal(c, SERVICE_GUARANTEED);
}

static void test_time_limits(void **state)
{
    static const struct {
        const char *s;
        int r;
        double secs;
    } cases[] = {
        {"90", 0, 90},
        {"30m", 0, 1800},
        {"2h", 0, 7200},
        {"1.5d", 0, 129600},
        {"01:30:00", 0, 5400},
        {"90:00", 0, 5400},
        {"1:02:03", 0, 3723},
        {"2-00", 0, 172800},
        {"1-12:30", 0, 131400},
        {"1-00:00:01", 0, 86401},
        {"100:00:00", 0, 360000},
        {"1:60:00", -EINVAL, 0},
        {"1:00:60", -EINVAL, 0},
        {"1-24:00", -EINVAL, 0},
        {"1:2:3:4", -EINVAL, 0},
        {":30", -EINVAL, 0},
        {"1-", -EINVAL, 0},
        {"-1", -EINVAL, 0},
        {"10:", -EINVAL, 0},
        {"2 h", 0, 7200},
        {"99999-00", -ERANGE, 0},
        {"", -EINVAL, 0},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        double v = -1;
        int r = queue_parse_time(cases[i].s, &v);
        if (r != cases[i].r || (r == 0 && v != cases[i].secs) || (r < 0 && v != -1))
            fail_msg("'%s': %d %g", cases[i].s, r, v);
    }
}

static void test_names_and_lookups(void **state)
{
    assert_true(queue_name_valid("batch"));
    assert_true(queue_name_valid("gpu.big_jobs-2"));
    assert_false(queue_name_valid(""));
    assert_false(queue_name_valid("a b"));
    assert_false(queue_name_valid("a/b"));
    char long_name[80];
    memset(long_name, 'q', sizeof(long_name));
    long_name[64] = '\0';
    assert_false(queue_name_valid(long_name));
    long_name[63] = '\0';
    assert_true(queue_name_valid(long_name));

    struct sched_config c = {0};
    c.n_queues = 2;
    c.queues = calloc(2, sizeof(*c.queues));
    assert_non_null(c.queues);
    strcpy(c.queues[0].name, "interactive");
    strcpy(c.queues[1].name, "batch");
    c.queues[1].n_windows = 1;
    c.queues[1].windows = calloc(1, sizeof(struct window));
    c.n_classes = 1;
    c.classes = calloc(1, sizeof(*c.classes));
    strcpy(c.classes[0].name, "high");
    c.classes[0].value = 1000;
    assert_ptr_equal(sched_config_queue(&c, "batch"), &c.queues[1]);
    assert_null(sched_config_queue(&c, "Batch"));
    assert_null(sched_config_queue(&c, NULL));
    assert_int_equal(sched_config_class(&c, "high")->value, 1000);
    assert_null(sched_config_class(&c, "low"));
    sched_config_done(&c);
    assert_int_equal(c.n_queues, 0);
    assert_null(c.queues);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_set_get_overlay),   cmocka_unit_test(test_keys),
        cmocka_unit_test(test_model_matches),     cmocka_unit_test(test_cpus_and_memory),
        cmocka_unit_test(test_service_class),     cmocka_unit_test(test_time_limits),
        cmocka_unit_test(test_names_and_lookups),
    };
    return test_run_cases(tests);
}
