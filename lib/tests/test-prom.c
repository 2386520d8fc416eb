/* Tests for lib/prom.c: exposition text in both formats, escaping, validation, and promtool's
 * verdict on the 0.0.4 text. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "test-skip.h"

#include "lib/prom.h"

static char *finish(struct prom_writer *w)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(prom_writer_finish(w, &text, &len), 0);
    assert_non_null(text);
    assert_int_equal(len, strlen(text));
    return text;
}

/* A small exposition with the features daemons use: labels, escaping, counters, special
 * values. */
static char *sample_exposition(enum prom_format f)
{
    struct prom_writer *w = NULL;
    assert_int_equal(prom_writer_new(f, &w), 0);
    assert_int_equal(prom_family(w, "coolant_temperature_celsius", PROM_TYPE_GAUGE,
                                 "Fluid temperature.\nMeasured at the \\ sensor."),
                     0);
    const char *const inlet[] = {"sensor", "inlet", "path", "C:\\tank\n\"A\"", NULL};
    assert_int_equal(prom_sample(w, inlet, 31.25), 0);
    const char *const outlet[] = {"sensor", "outlet", NULL};
    assert_int_equal(prom_sample(w, outlet, NAN), 0);
    assert_int_equal(
        prom_family(w, "coolant_pump_starts_total", PROM_TYPE_COUNTER, "Pump starts since boot."),
        0);
    assert_int_equal(prom_sample(w, NULL, 12), 0);
    assert_int_equal(prom_family(w, "coolant_events", PROM_TYPE_COUNTER, "Events by kind."), 0);
    const char *const kind[] = {"kind", "alarm", NULL};
    assert_int_equal(prom_sample(w, kind, 1e20), 0);
    assert_int_equal(prom_family(w, "coolant_limit", PROM_TYPE_GAUGE, "Limits."), 0);
    const char *const hi[] = {"bound", "high", NULL};
    const char *const lo[] = {"bound", "low", NULL};
    assert_int_equal(prom_sample(w, hi, INFINITY), 0);
    assert_int_equal(prom_sample(w, lo, -INFINITY), 0);
    return finish(w);
}

static void test_text_format(void **state)
{
    _cleanup_free_ char *t = sample_exposition(PROM_FORMAT_TEXT);
    assert_string_equal(
        t, "# HELP coolant_temperature_celsius Fluid temperature.\\nMeasured at the \\\\ sensor.\n"
           "# TYPE coolant_temperature_celsius gauge\n"
           "coolant_temperature_celsius{sensor=\"inlet\",path=\"C:\\\\tank\\n\\\"A\\\"\"} 31.25\n"
           "coolant_temperature_celsius{sensor=\"outlet\"} NaN\n"
           "# HELP coolant_pump_starts_total Pump starts since boot.\n"
           "# TYPE coolant_pump_starts_total counter\n"
           "coolant_pump_starts_total 12\n"
           "# HELP coolant_events_total Events by kind.\n"
           "# TYPE coolant_events_total counter\n"
           "coolant_events_total{kind=\"alarm\"} 1e+20\n"
           "# HELP coolant_limit Limits.\n"
           "# TYPE coolant_limit gauge\n"
           "coolant_limit{bound=\"high\"} +Inf\n"
           "coolant_limit{bound=\"low\"} -Inf\n");
}

static void test_openmetrics_format(void **state)
{
    _cleanup_free_ char *t = sample_exposition(PROM_FORMAT_OPENMETRICS);
    /* Structure OpenMetrics requires: counter families named without _total on TYPE/HELP, samples
     * with it; HELP escapes quotes too; the text ends with exactly one "# EOF". */
    assert_non_null(strstr(t, "# TYPE coolant_pump_starts counter\n"
                              "coolant_pump_starts_total 12\n"));
    assert_non_null(strstr(t, "# HELP coolant_events Events by kind.\n"
                              "# TYPE coolant_events counter\n"
                              "coolant_events_total{kind=\"alarm\"} 1e+20\n"));
    assert_non_null(strstr(t, "# TYPE coolant_temperature_celsius gauge\n"));
    assert_null(strstr(t, "# TYPE coolant_pump_starts_total"));
    size_t len = strlen(t);
    assert_true(len > 6);
    assert_string_equal(t + len - 6, "# EOF\n");
    assert_ptr_equal(strstr(t, "# EOF"), t + len - 6);
    /* Every line is a comment of a known kind or a sample of the family declared last. */
    char family[128] = "";
    for (char *line = t; *line;) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        *nl = '\0';
        if (strncmp(line, "# TYPE ", 7) == 0)
            assert_int_equal(sscanf(line + 7, "%127s", family), 1);
        else if (strncmp(line, "# HELP ", 7) != 0 && strcmp(line, "# EOF") != 0) {
            assert_true(family[0]);
            assert_int_equal(strncmp(line, family, strlen(family)), 0);
        }
        line = nl + 1;
    }
}

/* dcgm-exporter's counters have no _total; dashboards query those names, so they must come out
 * unchanged in both formats, and OpenMetrics must not call them counters (it would add _total). */
static char *keep_name_exposition(enum prom_format f)
{
    struct prom_writer *w = NULL;
    assert_int_equal(prom_writer_new(f, &w), 0);
    assert_int_equal(prom_family(w, "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                                 PROM_TYPE_COUNTER_KEEP_NAME, "Energy (in mJ)."),
                     0);
    const char *const gpu[] = {"gpu", "0", NULL};
    assert_int_equal(prom_sample(w, gpu, 123456), 0);
    assert_int_equal(prom_sample(w, gpu, -1), -ERANGE);
    return finish(w);
}

static void test_counter_keep_name(void **state)
{
    _cleanup_free_ char *t = keep_name_exposition(PROM_FORMAT_TEXT);
    assert_string_equal(t, "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Energy (in mJ).\n"
                           "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n"
                           "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\"} 123456\n");
    _cleanup_free_ char *o = keep_name_exposition(PROM_FORMAT_OPENMETRICS);
    assert_string_equal(o, "# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Energy (in mJ).\n"
                           "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION unknown\n"
                           "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\"} 123456\n"
                           "# EOF\n");
}

static void test_openmetrics_help_quotes(void **state)
{
    struct prom_writer *w = NULL;
    assert_int_equal(prom_writer_new(PROM_FORMAT_OPENMETRICS, &w), 0);
    assert_int_equal(prom_family(w, "x", PROM_TYPE_GAUGE, "say \"hi\""), 0);
    _cleanup_free_ char *t = finish(w);
    assert_string_equal(t, "# HELP x say \\\"hi\\\"\n# TYPE x gauge\n# EOF\n");
}

static void test_promtool_accepts_text(void **state)
{
    if (access("/usr/bin/promtool", X_OK) != 0 && system("command -v promtool >/dev/null") != 0)
        test_skip("promtool is not installed (Debian: prometheus)");
    _cleanup_free_ char *t = sample_exposition(PROM_FORMAT_TEXT);
    FILE *p = popen("promtool check metrics", "w");
    assert_non_null(p);
    assert_int_equal(fwrite(t, 1, strlen(t), p), strlen(t));
    int status = pclose(p);
    /* 0: parses and lints clean; 1: parse error; 3: lint problems. */
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_histogram(void **state)
{
    struct prom_writer *w = NULL;
    assert_int_equal(prom_writer_new(PROM_FORMAT_TEXT, &w), 0);
    assert_int_equal(prom_family(w, "wait_seconds", PROM_TYPE_HISTOGRAM, "Waits."), 0);
    const double bounds[] = {1, 2.5};
    const uint64_t counts[] = {1, 3};
    const char *const labels[] = {"queue", "q", NULL};
    assert_int_equal(prom_sample(w, labels, 1), -EINVAL); /* buckets only */
    const char *const le[] = {"le", "1", NULL};
    assert_int_equal(prom_histogram(w, le, bounds, counts, 2, 1, 1), -EINVAL);
    assert_int_equal(prom_histogram(w, labels, bounds, counts, 2, 7.5, 4), 0);
    _cleanup_free_ char *t = finish(w);
    assert_string_equal(t, "# HELP wait_seconds Waits.\n"
                           "# TYPE wait_seconds histogram\n"
                           "wait_seconds_bucket{queue=\"q\",le=\"1\"} 1\n"
                           "wait_seconds_bucket{queue=\"q\",le=\"2.5\"} 3\n"
                           "wait_seconds_bucket{queue=\"q\",le=\"+Inf\"} 4\n"
                           "wait_seconds_sum{queue=\"q\"} 7.5\n"
                           "wait_seconds_count{queue=\"q\"} 4\n");
}

static void test_values(void **state)
{
    struct prom_writer *w = NULL;
    assert_int_equal(prom_writer_new(PROM_FORMAT_TEXT, &w), 0);
    assert_int_equal(prom_family(w, "v", PROM_TYPE_GAUGE, NULL), 0);
    const double values[] = {0.0, -0.0,      1.0,   -3.0, 1234567890123.0, 9007199254740991.0,
                             0.1, 1.0 / 3.0, 2.5e-7};
    for (size_t i = 0; i < ELEMENTSOF(values); i++)
        assert_int_equal(prom_sample(w, NULL, values[i]), 0);
    _cleanup_free_ char *t = finish(w);
    assert_string_equal(t, "# TYPE v gauge\n"
                           "v 0\n"
                           "v 0\n"
                           "v 1\n"
                           "v -3\n"
                           "v 1234567890123\n"
                           "v 9007199254740991\n"
                           "v 0.1\n"
                           "v 0.33333333333333331\n"
                           "v 2.5e-07\n");
}

static void test_validation(void **state)
{
    _cleanup_(prom_writer_freep) struct prom_writer *w = NULL;
    assert_int_equal(prom_writer_new(PROM_FORMAT_TEXT, &w), 0);
    assert_int_equal(prom_sample(w, NULL, 1), -EINVAL); /* no family yet */
    assert_int_equal(prom_family(w, "1abc", PROM_TYPE_GAUGE, NULL), -EINVAL);
    assert_int_equal(prom_family(w, "a-b", PROM_TYPE_GAUGE, NULL), -EINVAL);
    assert_int_equal(prom_family(w, "", PROM_TYPE_GAUGE, NULL), -EINVAL);
    assert_int_equal(prom_family(w, "_total", PROM_TYPE_COUNTER, NULL), -EINVAL);
    assert_int_equal(prom_family(w, "x", PROM_TYPE_GAUGE, "bad \xff utf-8"), -EINVAL);
    assert_int_equal(prom_family(w, "ns:ok_name", PROM_TYPE_GAUGE, NULL), 0);

    const char *const bad_name[] = {"0x", "v", NULL};
    const char *const reserved[] = {"__name__", "v", NULL};
    const char *const dup[] = {"a", "1", "a", "2", NULL};
    const char *const odd[] = {"a", NULL};
    const char *const bad_utf8[] = {"a", "\xc3\x28", NULL};
    const char *const overlong[] = {"a", "\xc0\xaf", NULL};
    assert_int_equal(prom_sample(w, bad_name, 1), -EINVAL);
    assert_int_equal(prom_sample(w, reserved, 1), -EINVAL);
    assert_int_equal(prom_sample(w, dup, 1), -EINVAL);
    assert_int_equal(prom_sample(w, odd, 1), -EINVAL);
    assert_int_equal(prom_sample(w, bad_utf8, 1), -EINVAL);
    assert_int_equal(prom_sample(w, overlong, 1), -EINVAL);
    const char *const utf8[] = {"gpu", "NVIDIA H200 \xe2\x80\x94 \xf0\x9f\x94\xa5", NULL};
    assert_int_equal(prom_sample(w, utf8, 1), 0);

    assert_int_equal(prom_family(w, "c_total", PROM_TYPE_COUNTER, NULL), 0);
    assert_int_equal(prom_sample(w, NULL, -1), -ERANGE);
    assert_int_equal(prom_sample(w, NULL, 0), 0);

    /* Rejected calls leave no partial output behind. */
    char *t = NULL;
    assert_int_equal(prom_writer_finish(TAKE_PTR(w), &t, NULL), 0);
    assert_string_equal(t, "# TYPE ns:ok_name gauge\n"
                           "ns:ok_name{gpu=\"NVIDIA H200 \xe2\x80\x94 \xf0\x9f\x94\xa5\"} 1\n"
                           "# TYPE c_total counter\n"
                           "c_total 0\n");
    free(t);
}

static void test_duplicate_family(void **state)
{
    _cleanup_(prom_writer_freep) struct prom_writer *w = NULL;
    assert_int_equal(prom_writer_new(PROM_FORMAT_TEXT, &w), 0);
    assert_int_equal(prom_family(w, "jobs", PROM_TYPE_COUNTER, NULL), 0);
    assert_int_equal(prom_family(w, "jobs", PROM_TYPE_COUNTER, NULL), -EEXIST);
    assert_int_equal(prom_family(w, "jobs_total", PROM_TYPE_COUNTER, NULL), -EEXIST);
    /* Would clash with the counter's samples or with its OpenMetrics family name. */
    assert_int_equal(prom_family(w, "jobs_total", PROM_TYPE_GAUGE, NULL), -EEXIST);
    assert_int_equal(prom_family(w, "jobs", PROM_TYPE_GAUGE, NULL), -EEXIST);
    assert_int_equal(prom_family(w, "queue", PROM_TYPE_GAUGE, NULL), 0);
    assert_int_equal(prom_family(w, "queue", PROM_TYPE_GAUGE, NULL), -EEXIST);
    /* The failed calls did not switch the current family. */
    assert_int_equal(prom_sample(w, NULL, 3), 0);
    char *t = NULL;
    assert_int_equal(prom_writer_finish(TAKE_PTR(w), &t, NULL), 0);
    assert_string_equal(t, "# TYPE jobs_total counter\n# TYPE queue gauge\nqueue 3\n");
    free(t);
}

static void test_empty_exposition(void **state)
{
    struct prom_writer *w = NULL;
    assert_int_equal(prom_writer_new(PROM_FORMAT_TEXT, &w), 0);
    _cleanup_free_ char *t = finish(w);
    assert_string_equal(t, "");
    assert_int_equal(prom_writer_new(PROM_FORMAT_OPENMETRICS, &w), 0);
    _cleanup_free_ char *om = finish(w);
    assert_string_equal(om, "# EOF\n");
}

static void test_many_samples_grow(void **state)
{
    struct prom_writer *w = NULL;
    assert_int_equal(prom_writer_new(PROM_FORMAT_OPENMETRICS, &w), 0);
    char name[32];
    for (int f = 0; f < 100; f++) {
        snprintf(name, sizeof(name), "fam_%d", f);
        assert_int_equal(prom_family(w, name, PROM_TYPE_GAUGE, "help"), 0);
        for (int i = 0; i < 50; i++) {
            char v[16];
            snprintf(v, sizeof(v), "%d", i);
            const char *const l[] = {"i", v, NULL};
            assert_int_equal(prom_sample(w, l, i), 0);
        }
    }
    _cleanup_free_ char *t = finish(w);
    assert_non_null(strstr(t, "fam_99{i=\"49\"} 49\n# EOF\n"));
}

static void test_accept(void **state)
{
    assert_int_equal(prom_format_from_accept(NULL), PROM_FORMAT_TEXT);
    assert_int_equal(prom_format_from_accept(""), PROM_FORMAT_TEXT);
    assert_int_equal(prom_format_from_accept("*/*"), PROM_FORMAT_TEXT);
    assert_int_equal(prom_format_from_accept("text/plain"), PROM_FORMAT_TEXT);
    assert_int_equal(prom_format_from_accept("application/openmetrics-text"),
                     PROM_FORMAT_OPENMETRICS);
    /* What Prometheus 2.x sends by default. */
    assert_int_equal(prom_format_from_accept("application/openmetrics-text;version=1.0.0,"
                                             "application/openmetrics-text;version=0.0.1;q=0.75,"
                                             "text/plain;version=0.0.4;q=0.5,*/*;q=0.1"),
                     PROM_FORMAT_OPENMETRICS);
    /* Prometheus 3 with protobuf first, which we do not speak. */
    assert_int_equal(
        prom_format_from_accept("application/vnd.google.protobuf;"
                                "proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.6,"
                                "application/openmetrics-text;version=1.0.0;q=0.5,"
                                "text/plain;version=0.0.4;q=0.3,*/*;q=0.2"),
        PROM_FORMAT_OPENMETRICS);
    assert_int_equal(prom_format_from_accept("text/plain;version=0.0.4;q=0.9, "
                                             "application/openmetrics-text; q=0.5"),
                     PROM_FORMAT_TEXT);
    assert_int_equal(prom_format_from_accept("application/openmetrics-text;q=0"), PROM_FORMAT_TEXT);
    assert_int_equal(prom_format_from_accept("Application/OpenMetrics-Text ; Q=0.3"),
                     PROM_FORMAT_OPENMETRICS);
    assert_int_equal(prom_format_from_accept("application/openmetrics-text;q=junk"),
                     PROM_FORMAT_TEXT);
    assert_string_equal(prom_content_type(PROM_FORMAT_TEXT),
                        "text/plain; version=0.0.4; charset=utf-8");
    assert_non_null(strstr(prom_content_type(PROM_FORMAT_OPENMETRICS),
                           "application/openmetrics-text; version=1.0.0"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_text_format),
        cmocka_unit_test(test_openmetrics_format),
        cmocka_unit_test(test_openmetrics_help_quotes),
        cmocka_unit_test(test_counter_keep_name),
        cmocka_unit_test(test_promtool_accepts_text),
        cmocka_unit_test(test_values),
        cmocka_unit_test(test_histogram),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_duplicate_family),
        cmocka_unit_test(test_empty_exposition),
        cmocka_unit_test(test_many_samples_grow),
        cmocka_unit_test(test_accept),
    };
    return test_run_cases(tests);
}
