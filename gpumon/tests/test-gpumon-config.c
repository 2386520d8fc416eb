/* gpumon's settings: defaults < [gpumon] in the file < flags, and errors that name their source. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "gpumon-config.h"

static char dir[] = "/tmp/test-gpumon-config-XXXXXX";
static char path[PATH_MAX];

static const char *write_config(const char *text)
{
    snprintf(path, sizeof(path), "%s/gpumon.conf", dir);
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

/* Loads with the given flags and expects failure; returns the message. */
static const char *load_fails(const struct gpumon_flags *flags, int expect)
{
    static struct errmsg e;
    struct gpumon_config c;
    memset(&e, 0, sizeof(e));
    assert_int_equal(gpumon_config_load(flags, &c, &e), expect);
    return e.text;
}

static void test_defaults(void **state)
{
    struct gpumon_flags f = {0};
    struct gpumon_config c;
    struct errmsg e = {""};
    char host[HOST_NAME_MAX + 1] = "";
    assert_int_equal(gpumon_config_load(&f, &c, &e), 0);
    assert_string_equal(c.listen, ":9400");
    assert_true(c.interval_s == 1.0);
    assert_true(c.slow_interval_s == 10.0);
    assert_true(c.rescan_interval_s == 5.0);
    gethostname(host, sizeof(host) - 1);
    assert_string_equal(c.hostname, host);
    assert_string_equal(c.nvml_library, "");
    assert_string_equal(c.proc_root, "/proc");
    assert_string_equal(c.sysfs_root, "/sys");
    assert_true(c.process_metrics);
    assert_false(c.pcie_throughput);
    gpumon_config_done(&c);
}

static void test_file_overrides_defaults(void **state)
{
    struct gpumon_flags f = {.config_path = write_config("# all keys\n"
                                                         "[gpumon]\n"
                                                         "listen = 127.0.0.1:9500\n"
                                                         "interval = 500ms\n"
                                                         "slow_interval = 30s\n"
                                                         "rescan_interval = 2s\n"
                                                         "hostname = node17\n"
                                                         "nvml_library = /opt/nvml.so\n"
                                                         "proc_root = /host/proc\n"
                                                         "sysfs_root =\n"
                                                         "process_metrics = no\n"
                                                         "pcie_throughput = yes\n")};
    struct gpumon_config c;
    struct errmsg e = {""};
    assert_int_equal(gpumon_config_load(&f, &c, &e), 0);
    assert_string_equal(c.listen, "127.0.0.1:9500");
    assert_true(c.interval_s == 0.5);
    assert_true(c.slow_interval_s == 30.0);
    assert_true(c.rescan_interval_s == 2.0);
    assert_string_equal(c.hostname, "node17");
    assert_string_equal(c.nvml_library, "/opt/nvml.so");
    assert_string_equal(c.proc_root, "/host/proc");
    assert_string_equal(c.sysfs_root, "");
    assert_false(c.process_metrics);
    assert_true(c.pcie_throughput);
    gpumon_config_done(&c);
}

static void test_flags_override_file(void **state)
{
    struct gpumon_flags f = {
        .config_path = write_config("[gpumon]\nlisten = 127.0.0.1:9500\ninterval = 2s\n"
                                    "slow_interval = 20s\nhostname = fromfile\n"),
        .listen = "[::1]:9600",
        .interval = "3s",
        .hostname = "fromflag",
        .nvml_library = "/lib/libnvidia-ml.so.1",
        .proc_root = "/other/proc",
    };
    struct gpumon_config c;
    struct errmsg e = {""};
    assert_int_equal(gpumon_config_load(&f, &c, &e), 0);
    assert_string_equal(c.listen, "[::1]:9600");
    assert_true(c.interval_s == 3.0);
    assert_true(c.slow_interval_s == 20.0); /* not given as a flag: the file's */
    assert_string_equal(c.hostname, "fromflag");
    assert_string_equal(c.nvml_library, "/lib/libnvidia-ml.so.1");
    assert_string_equal(c.proc_root, "/other/proc");
    gpumon_config_done(&c);

    /* A flag alone also overrides the default. */
    struct gpumon_flags g = {.slow_interval = "1m"};
    assert_int_equal(gpumon_config_load(&g, &c, &e), 0);
    assert_true(c.slow_interval_s == 60.0);
    gpumon_config_done(&c);
}

static void test_unknown_key_and_section(void **state)
{
    struct gpumon_flags f = {.config_path =
                                 write_config("[gpumon]\ninterval = 2s\nintervall = 3s\n")};
    const char *msg = load_fails(&f, -EINVAL);
    assert_non_null(strstr(msg, "gpumon.conf:3"));
    assert_non_null(strstr(msg, "intervall"));

    f.config_path = write_config("[gpumon]\ninterval = 2s\n[dcgm]\ncollectors = x\n");
    msg = load_fails(&f, -EINVAL);
    assert_non_null(strstr(msg, "gpumon.conf:4"));
    assert_non_null(strstr(msg, "collectors"));

    /* The message is there even when the typo is the only key. */
    f.config_path = write_config("listen = :9400\n");
    msg = load_fails(&f, -EINVAL);
    assert_non_null(strstr(msg, "gpumon.conf:1"));
}

static void test_interval_range(void **state)
{
    struct gpumon_flags f = {.config_path = write_config("[gpumon]\n\ninterval = 50ms\n")};
    const char *msg = load_fails(&f, -ERANGE);
    assert_non_null(strstr(msg, "gpumon.conf:3"));
    assert_non_null(strstr(msg, "interval"));

    struct gpumon_flags g = {.interval = "2h", .slow_interval = "2h"};
    msg = load_fails(&g, -ERANGE);
    assert_non_null(strstr(msg, "--interval 2h"));

    /* The edges are allowed. */
    struct gpumon_flags edges = {.interval = "100ms", .slow_interval = "1h"};
    struct gpumon_config c;
    struct errmsg e = {""};
    assert_int_equal(gpumon_config_load(&edges, &c, &e), 0);
    gpumon_config_done(&c);

    f.config_path = write_config("[gpumon]\nrescan_interval = 0s\n");
    msg = load_fails(&f, -ERANGE);
    assert_non_null(strstr(msg, "rescan_interval"));
}

static void test_slow_below_fast(void **state)
{
    struct gpumon_flags f = {.config_path = write_config("[gpumon]\nslow_interval = 5s\n"),
                             .interval = "10s"};
    const char *msg = load_fails(&f, -EINVAL);
    /* Both sides are named, each with where it came from. */
    assert_non_null(strstr(msg, "gpumon.conf:2: [gpumon] slow_interval = 5s"));
    assert_non_null(strstr(msg, "--interval 10s"));

    /* The default slow interval (10 s) below a long interval is named as the default. */
    struct gpumon_flags g = {.interval = "20s"};
    msg = load_fails(&g, -EINVAL);
    assert_non_null(strstr(msg, "default slow_interval"));
}

static void test_bad_values(void **state)
{
    struct gpumon_flags f = {.interval = "fast"};
    const char *msg = load_fails(&f, -EINVAL);
    assert_non_null(strstr(msg, "--interval 'fast'"));

    struct gpumon_flags g = {.listen = "9400"};
    msg = load_fails(&g, -EINVAL);
    assert_non_null(strstr(msg, "--listen 9400"));

    struct gpumon_flags h = {.config_path = write_config("[gpumon]\nlisten = localhost:99999\n")};
    msg = load_fails(&h, -EINVAL);
    assert_non_null(strstr(msg, "gpumon.conf:2"));

    h.config_path = write_config("[gpumon]\nprocess_metrics = maybe\n");
    msg = load_fails(&h, -EINVAL);
    assert_non_null(strstr(msg, "process_metrics"));

    h.config_path = write_config("[gpumon]\nslow_interval = 1 fortnight\n");
    msg = load_fails(&h, -EINVAL);
    assert_non_null(strstr(msg, "gpumon.conf:2"));

    struct gpumon_flags p = {.proc_root = "proc"};
    msg = load_fails(&p, -EINVAL);
    assert_non_null(strstr(msg, "--proc-root proc"));

    h.config_path = write_config("[gpumon]\nsysfs_root = sys\n");
    msg = load_fails(&h, -EINVAL);
    assert_non_null(strstr(msg, "sysfs_root"));
    assert_non_null(strstr(msg, "gpumon.conf:2"));

    char longname[300];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    struct gpumon_flags n = {.hostname = longname};
    msg = load_fails(&n, -EINVAL);
    assert_non_null(strstr(msg, "hostname"));
}

static void test_missing_file(void **state)
{
    struct gpumon_flags f = {.config_path = "/nonexistent/gpumon.conf"};
    const char *msg = load_fails(&f, -ENOENT);
    assert_non_null(strstr(msg, "/nonexistent/gpumon.conf"));
}

static void test_empty_hostname_means_default(void **state)
{
    struct gpumon_flags f = {.config_path = write_config("[gpumon]\nhostname =\n")};
    struct gpumon_config c;
    struct errmsg e = {""};
    char host[HOST_NAME_MAX + 1] = "";
    gethostname(host, sizeof(host) - 1);
    assert_int_equal(gpumon_config_load(&f, &c, &e), 0);
    assert_string_equal(c.hostname, host);
    gpumon_config_done(&c);
}

/* dcgm-exporter's environment: NODE_NAME names the host unless a flag or the file does. */
static void test_node_name(void **state)
{
    struct gpumon_flags f = {0};
    struct gpumon_config c;
    struct errmsg e = {""};
    setenv("NODE_NAME", "k8s-node-7", 1);
    assert_int_equal(gpumon_config_load(&f, &c, &e), 0);
    assert_string_equal(c.hostname, "k8s-node-7");
    gpumon_config_done(&c);
    f.hostname = "flagged";
    assert_int_equal(gpumon_config_load(&f, &c, &e), 0);
    assert_string_equal(c.hostname, "flagged");
    gpumon_config_done(&c);
    unsetenv("NODE_NAME");
}

static const char *write_csv(const char *name, const char *text)
{
    static char csv[PATH_MAX];
    snprintf(csv, sizeof(csv), "%s/%s", dir, name);
    FILE *f = fopen(csv, "we");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return csv;
}

static bool selected(const struct gpumon_config *c, const char *name)
{
    const char *names[EXPOSE_DCGM_NAMES_MAX];
    size_t n = expose_dcgm_names(names);
    for (size_t i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) {
            bool one[EXPOSE_DCGM_NAMES_MAX] = {false};
            one[i] = true;
            struct expose_selection only;
            expose_select(names, one, n, &only);
            return (c->selection.fields & only.fields) ||
                   (c->selection.xid_errors && only.xid_errors) ||
                   (c->selection.driver_label && only.driver_label) ||
                   (c->selection.clock_throttle_reasons && only.clock_throttle_reasons);
        }
    fail_msg("%s is not a name gpumon offers", name);
    return false;
}

/* A collectors file from the flag, the file or $DCGM_EXPORTER_COLLECTORS selects its rows; the
 * DCGM fields gpumon lacks are listed for a warning. */
static void test_collectors(void **state)
{
    const char *csv =
        write_csv("counters.csv", "# Format\n"
                                  "DCGM_FI_DEV_GPU_TEMP, gauge, GPU temperature (in C).\n"
                                  "DCGM_FI_DEV_XID_ERRORS, gauge, Value of the last XID error.\n"
                                  "DCGM_FI_DEV_POWER_VIOLATION, counter, Throttling duration.\n"
                                  "DCGM_FI_DRIVER_VERSION, label, Driver Version\n");
    struct gpumon_flags f = {.collectors = csv};
    struct gpumon_config c;
    struct errmsg e = {""};
    assert_int_equal(gpumon_config_load(&f, &c, &e), 0);
    assert_true(selected(&c, "DCGM_FI_DEV_GPU_TEMP"));
    assert_true(selected(&c, "DCGM_FI_DEV_XID_ERRORS"));
    assert_true(selected(&c, "DCGM_FI_DRIVER_VERSION"));
    assert_false(selected(&c, "DCGM_FI_DEV_POWER_USAGE"));
    assert_false(selected(&c, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"));
    assert_non_null(c.collectors_skipped[0]);
    assert_string_equal(c.collectors_skipped[0], "DCGM_FI_DEV_POWER_VIOLATION (line 4)");
    assert_null(c.collectors_skipped[1]);
    gpumon_config_done(&c);

    /* The environment, when no flag or file names one. */
    setenv("DCGM_EXPORTER_COLLECTORS", csv, 1);
    struct gpumon_flags none = {0};
    assert_int_equal(gpumon_config_load(&none, &c, &e), 0);
    assert_false(selected(&c, "DCGM_FI_DEV_POWER_USAGE"));
    gpumon_config_done(&c);
    unsetenv("DCGM_EXPORTER_COLLECTORS");

    /* No file: everything, DCGM 3's name only when asked for. */
    assert_int_equal(gpumon_config_load(&none, &c, &e), 0);
    assert_true(selected(&c, "DCGM_FI_DEV_POWER_USAGE"));
    assert_false(selected(&c, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"));
    gpumon_config_done(&c);
    struct gpumon_flags old = {.config_path = write_config("[gpumon]\ndcgm3_names = yes\n")};
    assert_int_equal(gpumon_config_load(&old, &c, &e), 0);
    assert_true(selected(&c, "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS"));
    gpumon_config_done(&c);
}

/* A name that is no DCGM field stops the start, naming where it came from and the line. */
static void test_collectors_error(void **state)
{
    const char *csv = write_csv("bad.csv", "DCGM_FI_DEV_GPU_TEMP, gauge, t\n"
                                           "DCGM_FI_DEV_GPU_TEMPERATURE, gauge, t\n");
    struct gpumon_flags f = {.config_path = write_config("[gpumon]\ncollectors = x\n")};
    char text[PATH_MAX + 64];
    snprintf(text, sizeof(text), "[gpumon]\ncollectors = %s\n", csv);
    f.config_path = write_config(text);
    const char *msg = load_fails(&f, -EINVAL);
    assert_non_null(strstr(msg, "gpumon.conf:2: [gpumon] collectors = "));
    assert_non_null(strstr(msg, "bad.csv:2: unknown field 'DCGM_FI_DEV_GPU_TEMPERATURE'"));
    struct gpumon_flags missing = {.collectors = "/nonexistent/counters.csv"};
    msg = load_fails(&missing, -ENOENT);
    assert_non_null(strstr(msg, "--collectors /nonexistent/counters.csv"));
}

static int setup(void **state)
{
    return mkdtemp(dir) ? 0 : -1;
}

static int teardown(void **state)
{
    char csv[PATH_MAX];
    snprintf(csv, sizeof(csv), "%s/counters.csv", dir);
    unlink(csv);
    snprintf(csv, sizeof(csv), "%s/bad.csv", dir);
    unlink(csv);
    unlink(path);
    rmdir(dir);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_file_overrides_defaults),
        cmocka_unit_test(test_flags_override_file),
        cmocka_unit_test(test_unknown_key_and_section),
        cmocka_unit_test(test_interval_range),
        cmocka_unit_test(test_slow_below_fast),
        cmocka_unit_test(test_bad_values),
        cmocka_unit_test(test_missing_file),
        cmocka_unit_test(test_empty_hostname_means_default),
        cmocka_unit_test(test_node_name),
        cmocka_unit_test(test_collectors),
        cmocka_unit_test(test_collectors_error),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
