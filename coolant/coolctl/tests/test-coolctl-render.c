/* Unit tests for render.c: the tables a person reads and the exit codes scripts read. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test-main.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "coolctl.h"

static const char status_doc[] =
    "{\"controller\": {\"link\": \"up\", \"stale\": false, \"fw\": \"2.4.1\", \"model\": \"CT-4\","
    " \"serial\": \"CT4-000123\", \"pumps\": 2, \"sensors\": [\"inlet\",\"outlet\",\"tank\"],"
    " \"last_frame_age_seconds\": 0.4, \"reconnects\": 1, \"frames_rejected\": 0},"
    " \"telemetry\": {\"level\": \"precritical\", \"reason\": \"pump_stopped\","
    " \"cut_in_seconds\": 27, \"halt\": false, \"host\": \"ok\", \"flow_lpm\": 12.4,"
    " \"uptime_seconds\": 5124, \"temperatures\": [{\"sensor\": \"inlet\", \"celsius\": 31.2,"
    " \"fault\": false}, {\"sensor\": \"outlet\", \"celsius\": 35.05, \"fault\": false},"
    " {\"sensor\": \"tank\", \"celsius\": null, \"fault\": true}],"
    " \"pumps\": [{\"pump\": 1, \"rpm\": 2410, \"duty\": 100}, {\"pump\": 2, \"rpm\": 0,"
    " \"duty\": 100}]},"
    " \"safety\": {\"state\": \"shutdown\", \"since\": \"2026-11-29T23:59:00Z\"},"
    " \"shutdown\": {\"stage\": \"containers\", \"stage_number\": 3, \"drill\": false}}";

static json_t *load(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    assert_non_null(j);
    return j;
}

/* Renders into memory and returns the text (caller frees) and the function's result. */
static char *render_status(json_t *doc, bool color, int *ret)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    *ret = coolctl_render_status(f, doc, color);
    fclose(f);
    return buf;
}

static void test_status_table(void **state)
{
    json_t *doc = load(status_doc);
    int r;
    char *out = render_status(doc, false, &r);
    assert_int_equal(r, COOLCTL_EXIT_OK);
    assert_non_null(strstr(out, "CT-4  fw 2.4.1  serial CT4-000123"));
    assert_non_null(strstr(out, "Link         up  (last frame 0.4 s ago"));
    assert_null(strstr(out, "STALE"));
    assert_non_null(strstr(out, "Protection   precritical  (reason: pump_stopped)"));
    assert_non_null(strstr(out, "Power cut    in 27 s"));
    assert_non_null(strstr(out, "Safety       shutdown since 2026-11-29 23:59:00"));
    assert_non_null(strstr(out, "Shutdown     containers (stage 3 of 7)"));
    assert_non_null(strstr(out, "Flow         12.4 L/min"));
    assert_non_null(strstr(out, "inlet        31.2"));
    assert_non_null(strstr(out, "outlet      35.05"));
    assert_non_null(strstr(out, "tank       FAULT"));
    assert_non_null(strstr(out, "Pump 1         2410 rpm  100 % duty"));
    assert_non_null(strstr(out, "Pump 2            0 rpm  100 % duty"));
    assert_null(strchr(out, '\033')); /* no colour unless asked */
    free(out);

    out = render_status(doc, true, &r);
    assert_non_null(strstr(out, "\033[31mFAULT\033[0m"));
    assert_non_null(strstr(out, "\033[32mup\033[0m"));
    free(out);
    json_decref(doc);
}

static void test_status_stale_and_down(void **state)
{
    json_t *doc = load(status_doc);
    int r;
    json_object_set_new(json_object_get(doc, "controller"), "stale", json_true());
    char *out = render_status(doc, false, &r);
    assert_int_equal(r, COOLCTL_EXIT_STALE);
    assert_non_null(strstr(out, "up  STALE"));
    free(out);

    json_object_set_new(json_object_get(doc, "controller"), "stale", json_false());
    json_object_set_new(json_object_get(doc, "controller"), "link", json_string("closed"));
    assert_int_equal(coolctl_status_exit(doc), COOLCTL_EXIT_STALE);

    /* Before the first STATUS there is no telemetry: nothing to trust yet. */
    json_object_set_new(json_object_get(doc, "controller"), "link", json_string("up"));
    assert_int_equal(coolctl_status_exit(doc), COOLCTL_EXIT_OK);
    json_object_set_new(doc, "telemetry", json_null());
    out = render_status(doc, false, &r);
    assert_int_equal(r, COOLCTL_EXIT_STALE);
    assert_non_null(strstr(out, "Telemetry    none yet"));
    assert_null(strstr(out, "Pump 1"));
    free(out);
    json_decref(doc);
}

static void test_format_centi_and_time(void **state)
{
    char b[32];
    coolctl_format_centi(4500, b, sizeof(b));
    assert_string_equal(b, "45");
    coolctl_format_centi(4550, b, sizeof(b));
    assert_string_equal(b, "45.5");
    coolctl_format_centi(-425, b, sizeof(b));
    assert_string_equal(b, "-4.25");
    coolctl_format_centi(-5, b, sizeof(b));
    assert_string_equal(b, "-0.05");

    coolctl_format_time("2026-11-29T23:59:00.123Z", b, sizeof(b));
    assert_string_equal(b, "2026-11-29 23:59:00");
    setenv("TZ", "CET-1", 1); /* POSIX form: needs no tzdata */
    tzset();
    coolctl_format_time("2026-11-29T23:59:00Z", b, sizeof(b));
    assert_string_equal(b, "2026-11-30 00:59:00");
    setenv("TZ", "UTC", 1);
    tzset();
    coolctl_format_time("yesterday", b, sizeof(b));
    assert_string_equal(b, "yesterday");
}

static char *render_with(void (*fn)(FILE *, json_t *), json_t *doc)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    fn(f, doc);
    fclose(f);
    return buf;
}

static void test_events_and_settings(void **state)
{
    json_t *doc = load("{\"events\": [{\"time\": \"2026-11-29T23:59:00Z\", \"source\": "
                       "\"controller\", \"type\": \"ALARM\", \"message\": \"pump 2 stopped\", "
                       "\"fields\": {}}, {\"time\": \"2026-11-30T00:00:01Z\", \"source\": "
                       "\"daemon\", \"type\": \"shutdown\", \"message\": \"stage announce\"}]}");
    char *out = render_with(coolctl_render_events, doc);
    assert_string_equal(out, "2026-11-29 23:59:00  controller  ALARM      pump 2 stopped\n"
                             "2026-11-30 00:00:01  daemon      shutdown   stage announce\n");
    free(out);
    json_decref(doc);

    doc = load("{\"pump.1.curve\": \"30:40,55:100\", \"limit.warning\": \"45.00\"}");
    out = render_with(coolctl_render_settings, doc);
    assert_string_equal(out, "pump.1.curve = 30:40,55:100\nlimit.warning = 45.00\n");
    free(out);
    json_decref(doc);
}

static void test_drill(void **state)
{
    json_t *doc = load("{\"stages\": [{\"name\": \"announce\", \"ok\": true, \"seconds\": 0.12,"
                       " \"detail\": \"2 hooks\"}, {\"name\": \"containers\", \"ok\": false,"
                       " \"seconds\": 20, \"detail\": \"docker: connection refused\"}]}");
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(coolctl_render_drill(f, doc, false), 1);
    fclose(f);
    assert_non_null(strstr(buf, "announce    ok         0.12 s  2 hooks\n"));
    assert_non_null(strstr(buf, "containers  FAILED       20 s  docker: connection refused\n"));
    free(buf);
    assert_int_equal(coolctl_render_drill(NULL, doc, false), 1);
    json_decref(doc);

    doc = load("{\"error\": \"x\"}");
    assert_int_equal(coolctl_render_drill(NULL, doc, false), -EBADMSG);
    json_decref(doc);
}

static void test_curve_and_limits(void **state)
{
    struct ctl_settings s;
    ctl_settings_defaults(&s, 1);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    coolctl_render_curve(f, 1, &s.curve[0], s.min_duty[0]);
    coolctl_render_limits(f, &s.limits);
    fclose(f);
    assert_non_null(strstr(buf, "pump 1: 30:40,45:70,55:100  (minimum duty 20 %)\n"));
    assert_non_null(strstr(buf, "      55   100 %\n"));
    assert_non_null(strstr(buf, "warning          45 \xc2\xb0"
                                "C\n"));
    assert_non_null(strstr(buf, "critical         60 \xc2\xb0"
                                "C\n"));
    assert_non_null(strstr(buf, "flow_min          4 L/min\n"));
    assert_non_null(strstr(buf, "halt_max        120 s\n"));
    free(buf);
}

int main(void)
{
    /* Times print in local time; pin the zone so the expected text does not depend on the host. */
    setenv("TZ", "UTC", 1);
    tzset();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_status_table),
        cmocka_unit_test(test_status_stale_and_down),
        cmocka_unit_test(test_format_centi_and_time),
        cmocka_unit_test(test_events_and_settings),
        cmocka_unit_test(test_drill),
        cmocka_unit_test(test_curve_and_limits),
    };
    return test_run_cases(tests);
}
