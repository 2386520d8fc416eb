/* Tests for gpumon/collectors.c and gpumon/dcgm-fields.c: dcgm-exporter's collectors file as sites
 * write it, and the messages that point at what is wrong in one. */
#include <errno.h>
#include <limits.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "collectors.h"
#include "dcgm-fields.h"
#include "lib/strv.h"

/* What a gpumon might offer: a handful of numbers, one label, and one name of its own. */
static const char *const offered[] = {
    "DCGM_FI_DEV_SM_CLOCK",   "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_GPU_UTIL",   "DCGM_FI_DEV_FB_USED",  "DCGM_FI_DEV_XID_ERRORS",
    "DCGM_FI_DRIVER_VERSION", "DCGM_FI_DEV_FB_FREE",  "GPUMON_ONLY_NAME",
};
#define N_OFFERED ELEMENTSOF(offered)

static int offered_at(const char *name)
{
    for (size_t i = 0; i < N_OFFERED; i++)
        if (strcmp(offered[i], name) == 0)
            return (int)i;
    fail_msg("%s is not offered", name);
    return -1;
}

/* Parses text; expects success and returns the result (selected points to a static array). */
static struct collectors_result parse_ok(const char *text, size_t len)
{
    static bool selected[N_OFFERED];
    struct collectors_result r = {.selected = selected};
    struct errmsg e = {""};
    int ret = collectors_parse("c.csv", text, len, offered, N_OFFERED, &r, &e);
    if (ret != 0)
        fail_msg("parse failed (%d): %s", ret, e.text);
    assert_non_null(r.skipped);
    return r;
}

/* Parses text; expects failure with code, that the result was left alone, and returns the
 * message. */
static const char *parse_fails(const char *text, size_t len, int code)
{
    static struct errmsg e;
    bool selected[N_OFFERED];
    memset(selected, 0x5a, sizeof(selected));
    char *sentinel = (char *)"untouched";
    char *skipped_before[] = {sentinel, NULL};
    struct collectors_result r = {.selected = selected, .skipped = skipped_before};
    memset(&e, 0, sizeof(e));
    assert_int_equal(collectors_parse("c.csv", text, len, offered, N_OFFERED, &r, &e), code);
    assert_ptr_equal(r.skipped, skipped_before);
    for (size_t i = 0; i < sizeof(selected); i++)
        assert_int_equal(((unsigned char *)selected)[i], 0x5a);
    assert_true(e.text[0] != '\0');
    return e.text;
}

#define PARSE_OK(s)         parse_ok((s), strlen(s))
#define PARSE_FAILS(s, err) parse_fails((s), strlen(s), (err))

/* A file shaped like dcgm-exporter's default-counters.csv: header comments, sections, aligned
 * columns, a blank before a comma, commented-out rows, a label row and DCP rows. */
static const char default_shape[] =
    "# Format\n"
    "# If line starts with a '#' it is considered a comment\n"
    "# DCGM FIELD, Prometheus metric type, help message\n"
    "\n"
    "# Clocks\n"
    "DCGM_FI_DEV_SM_CLOCK,  gauge, SM clock frequency (in MHz).\n"
    "DCGM_FI_DEV_MEM_CLOCK, gauge, Memory clock frequency (in MHz).\n"
    "\n"
    "# Temperature\n"
    "DCGM_FI_DEV_GPU_TEMP,    gauge, GPU temperature (in C).\n"
    "\n"
    "# Power\n"
    "DCGM_FI_DEV_POWER_USAGE,              gauge, Power draw (in W).\n"
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION, counter, Energy since boot (in mJ).\n"
    "\n"
    "# Utilization\n"
    "DCGM_FI_DEV_GPU_UTIL,      gauge, GPU utilization (in %).\n"
    "DCGM_FI_DEV_DEC_UTIL ,     gauge, Decoder utilization (in %).\n"
    "\n"
    "# Errors and violations\n"
    "DCGM_FI_DEV_XID_ERRORS,            gauge,   Value of the last XID error encountered.\n"
    "# DCGM_FI_DEV_POWER_VIOLATION,       counter, Throttling due to power (in ns).\n"
    "# DCGM_EXP_XID_ERRORS_COUNT,         gauge,   XID errors in the window.\n"
    "\n"
    "# Memory usage\n"
    "DCGM_FI_DEV_FB_FREE, gauge, Framebuffer memory free (in MiB).\n"
    "DCGM_FI_DEV_FB_USED, gauge, Framebuffer memory used (in MiB).\n"
    "\n"
    "# Static configuration information. These appear as labels on the other metrics\n"
    "DCGM_FI_DRIVER_VERSION,        label, Driver Version\n"
    "# DCGM_FI_DEV_VBIOS_VERSION,     label, VBIOS version of the device\n"
    "\n"
    "# DCP metrics\n"
    "DCGM_FI_PROF_GR_ENGINE_ACTIVE,   gauge, Ratio of time the graphics engine is active.\n"
    "DCGM_FI_PROF_PCIE_TX_BYTES,      gauge, The rate of data transmitted over the PCIe bus.\n";

static void test_default_file_shape(void **state)
{
    struct collectors_result r = PARSE_OK(default_shape);
    for (size_t i = 0; i < N_OFFERED; i++)
        assert_int_equal(r.selected[i], strcmp(offered[i], "GPUMON_ONLY_NAME") != 0);
    const char *want[] = {
        "DCGM_FI_DEV_MEM_CLOCK (line 7)",       "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION (line 14)",
        "DCGM_FI_DEV_DEC_UTIL (line 18)",       "DCGM_FI_PROF_GR_ENGINE_ACTIVE (line 34)",
        "DCGM_FI_PROF_PCIE_TX_BYTES (line 35)",
    };
    assert_int_equal(strv_length(r.skipped), ELEMENTSOF(want));
    for (size_t i = 0; i < ELEMENTSOF(want); i++)
        assert_string_equal(r.skipped[i], want[i]);
    strv_free(r.skipped);
}

/* Unlisted offered names are written false even where the caller left true. */
static void test_selection_is_written_whole(void **state)
{
    bool selected[N_OFFERED];
    memset(selected, 1, sizeof(selected));
    struct collectors_result r = {.selected = selected};
    const char text[] = "DCGM_FI_DEV_GPU_TEMP, gauge, t\n";
    assert_int_equal(collectors_parse("c.csv", text, strlen(text), offered, N_OFFERED, &r, NULL),
                     0);
    for (size_t i = 0; i < N_OFFERED; i++)
        assert_int_equal(selected[i], (int)i == offered_at("DCGM_FI_DEV_GPU_TEMP"));
    strv_free(r.skipped);
}

static void test_comments_blanks_crlf_whitespace(void **state)
{
    struct collectors_result r = PARSE_OK("\xef\xbb\xbf# a file saved on Windows\r\n"
                                          "\r\n"
                                          "   \t \r\n"
                                          "   # an indented comment, gauge, x\r\n"
                                          "\tDCGM_FI_DEV_GPU_TEMP\t,\tgauge\t,\tGPU temp \t\r\n"
                                          "DCGM_FI_DEV_POWER_USAGE,gauge,   \n"
                                          "DCGM_FI_DEV_FB_USED , counter , used   ");
    assert_true(r.selected[offered_at("DCGM_FI_DEV_GPU_TEMP")]);
    assert_true(r.selected[offered_at("DCGM_FI_DEV_POWER_USAGE")]);
    assert_true(r.selected[offered_at("DCGM_FI_DEV_FB_USED")]);
    assert_false(r.selected[offered_at("DCGM_FI_DEV_SM_CLOCK")]);
    assert_int_equal(strv_length(r.skipped), 0);
    strv_free(r.skipped);
}

/* Everything after the second comma is help, commas, quotes and all. */
static void test_help_with_commas(void **state)
{
    struct collectors_result r =
        PARSE_OK("DCGM_FI_DEV_SM_CLOCK, gauge, SM clock, in MHz, as NVML reports it\n"
                 "DCGM_FI_DEV_GPU_TEMP,gauge,\"GPU temperature, in C\"\n"
                 "DCGM_FI_DEV_FB_USED, gauge,\n"
                 "DCGM_FI_DRIVER_VERSION, label, ,,,\n");
    assert_true(r.selected[offered_at("DCGM_FI_DEV_SM_CLOCK")]);
    assert_true(r.selected[offered_at("DCGM_FI_DEV_GPU_TEMP")]);
    assert_true(r.selected[offered_at("DCGM_FI_DEV_FB_USED")]);
    assert_true(r.selected[offered_at("DCGM_FI_DRIVER_VERSION")]);
    strv_free(r.skipped);
}

/* Real names gpumon does not show go to skipped, whichever family they come from. */
static void test_known_but_not_offered(void **state)
{
    struct collectors_result r =
        PARSE_OK("DCGM_FI_DEV_POWER_VIOLATION, counter, power throttling\n"
                 "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL, counter, flit errors\n"
                 "DCGM_EXP_XID_ERRORS_COUNT, gauge, XIDs in the window\n"
                 "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS, gauge, old name of 112\n"
                 "DCGM_FI_DEV_GPU_TEMP_CELSIUS, gauge, new name of 150\n"
                 "dcgm_gpu_temp, gauge, dcgm-exporter 1.x name\n"
                 "DCGM_FI_DEV_SERIAL, label, Device Serial Number\n"
                 "GPUMON_ONLY_NAME, gauge, offered though DCGM lacks it\n");
    const char *want[] = {
        "DCGM_FI_DEV_POWER_VIOLATION (line 1)",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL (line 2)",
        "DCGM_EXP_XID_ERRORS_COUNT (line 3)",
        "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS (line 4)",
        "DCGM_FI_DEV_GPU_TEMP_CELSIUS (line 5)",
        "dcgm_gpu_temp (line 6)",
        "DCGM_FI_DEV_SERIAL (line 7)",
    };
    assert_int_equal(strv_length(r.skipped), ELEMENTSOF(want));
    for (size_t i = 0; i < ELEMENTSOF(want); i++)
        assert_string_equal(r.skipped[i], want[i]);
    assert_true(r.selected[offered_at("GPUMON_ONLY_NAME")]);
    assert_false(r.selected[offered_at("DCGM_FI_DEV_GPU_TEMP")]);
    strv_free(r.skipped);
}

static void test_unknown_name(void **state)
{
    assert_string_equal(PARSE_FAILS("# temperatures\n"
                                    "DCGM_FI_DEV_SM_CLOCK, gauge, clock\n"
                                    "DCGM_FI_DEV_GPU_TEMPERATURE, gauge, typo\n",
                                    -EINVAL),
                        "c.csv:3: unknown field 'DCGM_FI_DEV_GPU_TEMPERATURE': neither a DCGM "
                        "field nor one of dcgm-exporter's DCGM_EXP_* fields");
    /* Names compare exactly, as dcgm-exporter's do. */
    assert_string_equal(PARSE_FAILS("dcgm_fi_dev_gpu_temp, gauge, t\n", -EINVAL),
                        "c.csv:1: unknown field 'dcgm_fi_dev_gpu_temp': neither a DCGM field nor "
                        "one of dcgm-exporter's DCGM_EXP_* fields");
    assert_string_equal(PARSE_FAILS("  , gauge, no name\n", -EINVAL),
                        "c.csv:1: missing field name");
}

static void test_duplicate(void **state)
{
    assert_string_equal(PARSE_FAILS("DCGM_FI_DEV_GPU_TEMP, gauge, t\n"
                                    "\n"
                                    "DCGM_FI_DEV_POWER_USAGE, gauge, p\n"
                                    "DCGM_FI_DEV_GPU_TEMP , counter, again\n",
                                    -EINVAL),
                        "c.csv:4: 'DCGM_FI_DEV_GPU_TEMP' is listed twice, first on line 1");
    /* Skipped names count too, and so do offered names outside the DCGM table. */
    assert_string_equal(
        PARSE_FAILS("DCGM_EXP_P2P_STATUS, gauge, a\nDCGM_EXP_P2P_STATUS, gauge, b\n", -EINVAL),
        "c.csv:2: 'DCGM_EXP_P2P_STATUS' is listed twice, first on line 1");
    assert_string_equal(
        PARSE_FAILS("GPUMON_ONLY_NAME, gauge, a\nGPUMON_ONLY_NAME, gauge, b\n", -EINVAL),
        "c.csv:2: 'GPUMON_ONLY_NAME' is listed twice, first on line 1");
}

static void test_bad_type(void **state)
{
    assert_string_equal(PARSE_FAILS("DCGM_FI_DEV_GPU_TEMP, gauges, t\n", -EINVAL),
                        "c.csv:1: unknown type 'gauges' for 'DCGM_FI_DEV_GPU_TEMP'; expected "
                        "gauge, counter, histogram, summary or label");
    assert_string_equal(PARSE_FAILS("DCGM_FI_DEV_GPU_TEMP, Gauge, t\n", -EINVAL),
                        "c.csv:1: unknown type 'Gauge' for 'DCGM_FI_DEV_GPU_TEMP'; expected "
                        "gauge, counter, histogram, summary or label");
    assert_string_equal(PARSE_FAILS("DCGM_FI_DEV_GPU_TEMP, , t\n", -EINVAL),
                        "c.csv:1: missing type for 'DCGM_FI_DEV_GPU_TEMP'");
    const char *two_columns = "c.csv:2: expected 'FIELD, TYPE, HELP' (two commas; the help may "
                              "be empty)";
    assert_string_equal(PARSE_FAILS("\nDCGM_FI_DEV_GPU_TEMP, gauge\n", -EINVAL), two_columns);
    assert_string_equal(PARSE_FAILS("\nDCGM_FI_DEV_GPU_TEMP\n", -EINVAL), two_columns);
    /* The other types dcgm-exporter knows load. */
    struct collectors_result r = PARSE_OK("DCGM_FI_DEV_GPU_TEMP, histogram, t\n"
                                          "DCGM_FI_DEV_SM_CLOCK, summary, c\n");
    assert_true(r.selected[offered_at("DCGM_FI_DEV_GPU_TEMP")]);
    strv_free(r.skipped);
}

static void test_label_type(void **state)
{
    assert_string_equal(PARSE_FAILS("DCGM_FI_DEV_GPU_TEMP, label, t\n", -EINVAL),
                        "c.csv:1: 'DCGM_FI_DEV_GPU_TEMP' is a number, not text, so it cannot be "
                        "a label; use gauge or counter");
    assert_string_equal(PARSE_FAILS("DCGM_EXP_XID_ERRORS_COUNT, label, x\n", -EINVAL),
                        "c.csv:1: 'DCGM_EXP_XID_ERRORS_COUNT' is a number, not text, so it "
                        "cannot be a label; use gauge or counter");
    assert_string_equal(PARSE_FAILS("DCGM_FI_DRIVER_VERSION, gauge, Driver Version\n", -EINVAL),
                        "c.csv:1: 'DCGM_FI_DRIVER_VERSION' is text, so it can only be a label, "
                        "not a gauge");
    assert_string_equal(PARSE_FAILS("DCGM_FI_DEV_VBIOS_VERSION, counter, VBIOS\n", -EINVAL),
                        "c.csv:1: 'DCGM_FI_DEV_VBIOS_VERSION' is text, so it can only be a "
                        "label, not a counter");
    /* Every label row of dcgm-exporter's shipped files; a structure is not checked; an offered
     * name outside the table takes any type. */
    struct collectors_result r =
        PARSE_OK("DCGM_FI_DRIVER_VERSION,        label, Driver Version\n"
                 "DCGM_FI_NVML_VERSION,          label, NVML Version\n"
                 "DCGM_FI_DEV_BRAND,             label, Device Brand\n"
                 "DCGM_FI_DEV_SERIAL,            label, Device Serial Number\n"
                 "DCGM_FI_DEV_OEM_INFOROM_VER,   label, OEM inforom version\n"
                 "DCGM_FI_DEV_ECC_INFOROM_VER,   label, ECC inforom version\n"
                 "DCGM_FI_DEV_POWER_INFOROM_VER, label, Power management object inforom\n"
                 "DCGM_FI_DEV_INFOROM_IMAGE_VER, label, Inforom image version\n"
                 "DCGM_FI_DEV_VBIOS_VERSION,     label, VBIOS version of the device\n"
                 "DCGM_FI_DEV_VGPU_VM_ID,        label, not checked\n"
                 "GPUMON_ONLY_NAME,              label, ours\n");
    assert_true(r.selected[offered_at("DCGM_FI_DRIVER_VERSION")]);
    assert_true(r.selected[offered_at("GPUMON_ONLY_NAME")]);
    assert_int_equal(strv_length(r.skipped), 9);
    strv_free(r.skipped);
}

static void test_nul(void **state)
{
    const char text[] = "DCGM_FI_DEV_GPU_TEMP, gauge, t\nDCGM_FI_DEV_SM_CLOCK, gauge, c\0lock\n";
    assert_string_equal(parse_fails(text, sizeof(text) - 1, -EINVAL), "c.csv:2: NUL byte");
    /* Even in a comment, and as the very last byte. */
    const char text2[] = "# x\0";
    assert_string_equal(parse_fails(text2, sizeof(text2) - 1, -EINVAL), "c.csv:1: NUL byte");
}

static void test_invalid_utf8(void **state)
{
    assert_string_equal(PARSE_FAILS("DCGM_FI_DEV_GPU_TEMP, gauge, t\n"
                                    "# Temp\xe9rature (Latin-1)\n",
                                    -EINVAL),
                        "c.csv:2: not valid UTF-8");
    /* An overlong form of '/' and a surrogate are refused as JSON parsers refuse them. */
    assert_string_equal(PARSE_FAILS("# \xc0\xaf\n", -EINVAL), "c.csv:1: not valid UTF-8");
    assert_string_equal(PARSE_FAILS("# \xed\xa0\x80\n", -EINVAL), "c.csv:1: not valid UTF-8");
    /* Valid UTF-8 in help and comments is fine. */
    struct collectors_result r = PARSE_OK("# Température\n"
                                          "DCGM_FI_DEV_GPU_TEMP, gauge, Température (°C)\n");
    assert_true(r.selected[offered_at("DCGM_FI_DEV_GPU_TEMP")]);
    strv_free(r.skipped);
}

static void test_control_characters(void **state)
{
    assert_string_equal(PARSE_FAILS("DCGM_FI_DEV_GPU_TEMP, gauge, t\x1b[31m\n", -EINVAL),
                        "c.csv:1: control character 0x1b in column 31");
    /* A file with CR line ends alone is one line with CRs in it. */
    assert_string_equal(PARSE_FAILS("# x\rDCGM_FI_DEV_GPU_TEMP, gauge, t\r", -EINVAL),
                        "c.csv:1: control character 0x0d in column 4");
}

static void test_overlong_line(void **state)
{
    /* COLLECTORS_LINE_MAX bytes of comment and a CRLF pass; one byte more fails. */
    char *text = malloc(COLLECTORS_LINE_MAX + 8);
    assert_non_null(text);
    memset(text, '#', COLLECTORS_LINE_MAX);
    memcpy(text + COLLECTORS_LINE_MAX, "\r\n", 3);
    struct collectors_result r = PARSE_OK(text);
    strv_free(r.skipped);

    memset(text, '#', COLLECTORS_LINE_MAX + 1);
    memcpy(text + COLLECTORS_LINE_MAX + 1, "\n", 2);
    char *two = malloc(COLLECTORS_LINE_MAX + 64);
    assert_non_null(two);
    snprintf(two, COLLECTORS_LINE_MAX + 64, "DCGM_FI_DEV_GPU_TEMP, gauge, t\n%s", text);
    assert_string_equal(PARSE_FAILS(two, -EINVAL), "c.csv:2: line is longer than 4096 bytes");
    free(two);
    free(text);
}

static void test_empty(void **state)
{
    struct collectors_result r = parse_ok("", 0);
    for (size_t i = 0; i < N_OFFERED; i++)
        assert_false(r.selected[i]);
    assert_int_equal(strv_length(r.skipped), 0);
    strv_free(r.skipped);

    r = PARSE_OK("# nothing enabled\n\n# DCGM_FI_DEV_GPU_TEMP, gauge, t\n");
    for (size_t i = 0; i < N_OFFERED; i++)
        assert_false(r.selected[i]);
    strv_free(r.skipped);

    /* Nothing offered: everything known is skipped, and no array is needed. */
    struct collectors_result none = {0};
    const char text[] = "DCGM_FI_DEV_GPU_TEMP, gauge, t\n";
    assert_int_equal(collectors_parse("c.csv", text, strlen(text), NULL, 0, &none, NULL), 0);
    assert_int_equal(strv_length(none.skipped), 1);
    strv_free(none.skipped);
}

/* A temporary directory for the file tests; removed by the caller with cleanup_dir(). */
static char *make_dir(void)
{
    static char dir[] = "/tmp/test-collectors-XXXXXX";
    assert_non_null(mkdtemp(dir));
    return dir;
}

static const char *write_file(const char *dir, const char *name, const char *text, size_t len)
{
    static char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    return path;
}

static void test_load(void **state)
{
    char *dir = make_dir();
    const char *path =
        write_file(dir, "default-counters.csv", default_shape, strlen(default_shape));
    bool selected[N_OFFERED];
    struct collectors_result r = {.selected = selected};
    struct errmsg e = {""};
    assert_int_equal(collectors_load(path, offered, N_OFFERED, &r, &e), 0);
    assert_true(selected[offered_at("DCGM_FI_DRIVER_VERSION")]);
    assert_int_equal(strv_length(r.skipped), 5);
    strv_free(r.skipped);

    /* Errors name the file. */
    path = write_file(dir, "bad.csv", "DCGM_FI_DEV_GPU_TMP, gauge, t\n", 30);
    assert_int_equal(collectors_load(path, offered, N_OFFERED, &r, &e), -EINVAL);
    char want[PATH_MAX + 200];
    snprintf(want, sizeof(want),
             "%s:1: unknown field 'DCGM_FI_DEV_GPU_TMP': neither a DCGM field nor one of "
             "dcgm-exporter's DCGM_EXP_* fields",
             path);
    assert_string_equal(e.text, want);
    unlink(path);
    snprintf(want, sizeof(want), "%s/default-counters.csv", dir);
    unlink(want);
    rmdir(dir);
}

static void test_load_missing_and_directory(void **state)
{
    char *dir = make_dir();
    char path[PATH_MAX], want[PATH_MAX + 100];
    snprintf(path, sizeof(path), "%s/absent.csv", dir);
    bool selected[N_OFFERED];
    struct collectors_result r = {.selected = selected, .skipped = NULL};
    struct errmsg e = {""};
    assert_int_equal(collectors_load(path, offered, N_OFFERED, &r, &e), -ENOENT);
    snprintf(want, sizeof(want), "%s: No such file or directory", path);
    assert_string_equal(e.text, want);
    assert_null(r.skipped);

    assert_int_equal(collectors_load(dir, offered, N_OFFERED, &r, &e), -EISDIR);
    snprintf(want, sizeof(want), "%s: is a directory", dir);
    assert_string_equal(e.text, want);
    assert_null(r.skipped);
    rmdir(dir);
}

static void test_load_too_big(void **state)
{
    /* Exactly COLLECTORS_FILE_MAX bytes of comment lines load; one byte more does not. */
    size_t n = COLLECTORS_FILE_MAX + 1;
    char *text = malloc(n);
    assert_non_null(text);
    for (size_t i = 0; i < n; i++)
        text[i] = i % 64 == 63 ? '\n' : '#';
    char *dir = make_dir();
    const char *path = write_file(dir, "max.csv", text, COLLECTORS_FILE_MAX);
    bool selected[N_OFFERED];
    struct collectors_result r = {.selected = selected};
    struct errmsg e = {""};
    assert_int_equal(collectors_load(path, offered, N_OFFERED, &r, &e), 0);
    strv_free(r.skipped);
    unlink(path);

    path = write_file(dir, "big.csv", text, n);
    r.skipped = NULL;
    assert_int_equal(collectors_load(path, offered, N_OFFERED, &r, &e), -EFBIG);
    char want[PATH_MAX + 100];
    snprintf(want, sizeof(want), "%s: larger than 1048576 bytes", path);
    assert_string_equal(e.text, want);
    assert_null(r.skipped);
    unlink(path);
    rmdir(dir);
    free(text);
}

/* dcgm_field_find() bsearches: the table must be strictly sorted, or names go missing. */
static void test_table_sorted(void **state)
{
    size_t n;
    const struct dcgm_field *t = dcgm_field_table(&n);
    assert_true(n > 900);
    for (size_t i = 1; i < n; i++)
        if (strcmp(t[i - 1].name, t[i].name) >= 0)
            fail_msg("%s before %s", t[i - 1].name, t[i].name);
    for (size_t i = 0; i < n; i++)
        assert_ptr_equal(dcgm_field_find(t[i].name), &t[i]);
    assert_null(dcgm_field_find("DCGM_FI_UNKNOWN"));
    assert_null(dcgm_field_find(""));
}

/* Every name in dcgm-exporter's shipped files (etc/default-counters.csv,
 * dcp-metrics-included.csv, 1.x-compatibility-metrics.csv), rows and commented rows. */
static void test_table_has_shipped_names(void **state)
{
    static const char *const shipped[] = {
        "DCGM_FI_DEV_SM_CLOCK",
        "DCGM_FI_DEV_MEM_CLOCK",
        "DCGM_FI_DEV_MEMORY_TEMP",
        "DCGM_FI_DEV_GPU_TEMP",
        "DCGM_FI_DEV_POWER_USAGE",
        "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
        "DCGM_FI_DEV_PCIE_TX_THROUGHPUT",
        "DCGM_FI_DEV_PCIE_RX_THROUGHPUT",
        "DCGM_FI_DEV_PCIE_REPLAY_COUNTER",
        "DCGM_FI_DEV_GPU_UTIL",
        "DCGM_FI_DEV_MEM_COPY_UTIL",
        "DCGM_FI_DEV_ENC_UTIL",
        "DCGM_FI_DEV_DEC_UTIL",
        "DCGM_FI_DEV_XID_ERRORS",
        "DCGM_FI_DEV_POWER_VIOLATION",
        "DCGM_FI_DEV_THERMAL_VIOLATION",
        "DCGM_FI_DEV_SYNC_BOOST_VIOLATION",
        "DCGM_FI_DEV_BOARD_LIMIT_VIOLATION",
        "DCGM_FI_DEV_LOW_UTIL_VIOLATION",
        "DCGM_FI_DEV_RELIABILITY_VIOLATION",
        "DCGM_FI_DEV_FB_FREE",
        "DCGM_FI_DEV_FB_USED",
        "DCGM_FI_DEV_FB_RESERVED",
        "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
        "DCGM_FI_DEV_ECC_SBE_AGG_TOTAL",
        "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL",
        "DCGM_FI_DEV_RETIRED_SBE",
        "DCGM_FI_DEV_RETIRED_DBE",
        "DCGM_FI_DEV_RETIRED_PENDING",
        "DCGM_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_TOTAL",
        "DCGM_FI_DEV_NVLINK_BANDWIDTH_L0",
        "DCGM_FI_DEV_VGPU_LICENSE_STATUS",
        "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS",
        "DCGM_FI_DEV_ROW_REMAP_FAILURE",
        "DCGM_FI_DEV_ROW_REMAP_PENDING",
        "DCGM_FI_DRIVER_VERSION",
        "DCGM_FI_NVML_VERSION",
        "DCGM_FI_DEV_BRAND",
        "DCGM_FI_DEV_SERIAL",
        "DCGM_FI_DEV_OEM_INFOROM_VER",
        "DCGM_FI_DEV_ECC_INFOROM_VER",
        "DCGM_FI_DEV_POWER_INFOROM_VER",
        "DCGM_FI_DEV_INFOROM_IMAGE_VER",
        "DCGM_FI_DEV_VBIOS_VERSION",
        "DCGM_FI_PROF_GR_ENGINE_ACTIVE",
        "DCGM_FI_PROF_SM_ACTIVE",
        "DCGM_FI_PROF_SM_OCCUPANCY",
        "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE",
        "DCGM_FI_PROF_DRAM_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP64_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP32_ACTIVE",
        "DCGM_FI_PROF_PIPE_FP16_ACTIVE",
        "DCGM_FI_PROF_PCIE_TX_BYTES",
        "DCGM_FI_PROF_PCIE_RX_BYTES",
        "DCGM_FI_PROF_SM_CYCLES_ELAPSED_TOTAL",
        "DCGM_FI_PROF_SM_CYCLES_ACTIVE_TOTAL",
        "DCGM_FI_PROF_MMA_CYCLES_ACTIVE_TOTAL",
        "DCGM_FI_PROF_DMMA_CYCLES_ACTIVE_TOTAL",
        "DCGM_FI_PROF_HMMA_CYCLES_ACTIVE_TOTAL",
        "DCGM_FI_PROF_IMMA_CYCLES_ACTIVE_TOTAL",
        "DCGM_FI_PROF_DFMA_CYCLES_ACTIVE_TOTAL",
        "DCGM_FI_PROF_PCIE_TX_BYTES_TOTAL",
        "DCGM_FI_PROF_PCIE_RX_BYTES_TOTAL",
        "DCGM_FI_PROF_INT_CYCLES_ACTIVE_TOTAL",
        "DCGM_FI_PROF_FP64_CYCLES_ACTIVE_TOTAL",
        "DCGM_FI_PROF_FP32_CYCLES_ACTIVE_TOTAL",
        "DCGM_FI_PROF_FP16_CYCLES_ACTIVE_TOTAL",
        "DCGM_EXP_CLOCK_EVENTS_COUNT",
        "DCGM_EXP_CLOCK_EVENTS_TOTAL",
        "DCGM_EXP_XID_ERRORS_COUNT",
        "DCGM_EXP_XID_ERRORS_TOTAL",
        "DCGM_EXP_GPU_HEALTH_STATUS",
        "DCGM_EXP_P2P_STATUS",
        "dcgm_sm_clock",
        "dcgm_memory_clock",
        "dcgm_memory_temp",
        "dcgm_gpu_temp",
        "dcgm_power_usage",
        "dcgm_total_energy_consumption",
        "dcgm_pcie_tx_throughput",
        "dcgm_pcie_rx_throughput",
        "dcgm_pcie_replay_counter",
        "dcgm_gpu_utilization",
        "dcgm_mem_copy_utilization",
        "dcgm_enc_utilization",
        "dcgm_dec_utilization",
        "dcgm_xid_errors",
        "dcgm_power_violation",
        "dcgm_thermal_violation",
        "dcgm_sync_boost_violation",
        "dcgm_board_limit_violation",
        "dcgm_low_util_violation",
        "dcgm_reliability_violation",
        "dcgm_fb_free",
        "dcgm_fb_used",
        "dcgm_ecc_sbe_volatile_total",
        "dcgm_ecc_dbe_volatile_total",
        "dcgm_ecc_sbe_aggregate_total",
        "dcgm_ecc_dbe_aggregate_total",
        "dcgm_retired_pages_sbe",
        "dcgm_retired_pages_dbe",
        "dcgm_retired_pages_pending",
        "dcgm_nvlink_flit_crc_error_count_total",
        "dcgm_nvlink_data_crc_error_count_total",
        "dcgm_nvlink_replay_error_count_total",
        "dcgm_nvlink_recovery_error_count_total",
        "dcgm_nvlink_bandwidth_total",
        "dcgm_fi_prof_gr_engine_active",
        "dcgm_fi_prof_sm_active",
        "dcgm_fi_prof_sm_occupancy",
        "dcgm_fi_prof_pipe_tensor_active",
        "dcgm_fi_prof_dram_active",
        "dcgm_fi_prof_pcie_tx_bytes",
        "dcgm_fi_prof_pcie_rx_bytes",
    };
    for (size_t i = 0; i < ELEMENTSOF(shipped); i++)
        if (!dcgm_field_find(shipped[i]))
            fail_msg("%s is missing from the table", shipped[i]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_file_shape),
        cmocka_unit_test(test_selection_is_written_whole),
        cmocka_unit_test(test_comments_blanks_crlf_whitespace),
        cmocka_unit_test(test_help_with_commas),
        cmocka_unit_test(test_known_but_not_offered),
        cmocka_unit_test(test_unknown_name),
        cmocka_unit_test(test_duplicate),
        cmocka_unit_test(test_bad_type),
        cmocka_unit_test(test_label_type),
        cmocka_unit_test(test_nul),
        cmocka_unit_test(test_invalid_utf8),
        cmocka_unit_test(test_control_characters),
        cmocka_unit_test(test_overlong_line),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_load),
        cmocka_unit_test(test_load_missing_and_directory),
        cmocka_unit_test(test_load_too_big),
        cmocka_unit_test(test_table_sorted),
        cmocka_unit_test(test_table_has_shipped_names),
    };
    return test_run_cases(tests);
}
