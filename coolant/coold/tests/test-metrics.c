/* coold's /metrics: the families and series a dashboard relies on, in both formats, and an
 * exposition that promtool accepts. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "test-skip.h"

#include "lib/macro.h"
#include "metrics.h"

static void sample_view(struct coold_view *v)
{
    memset(v, 0, sizeof(*v));
    v->link_state = "up";
    v->controller_up = true;
    v->last_success_unix_s = 1795996027.5;
    v->frames_rejected = 7;
    v->reconnects = 2;
    v->has_info = true;
    v->n_pumps = 2;
    v->n_sensors = 3;
    strcpy(v->sensors[0], "inlet");
    strcpy(v->sensors[1], "outlet");
    strcpy(v->sensors[2], "tank \"B\"");
    v->tel.has_status = true;
    v->tel.level = COOL_LEVEL_PRECRITICAL;
    v->tel.n_temps = 3;
    v->tel.temps[0].celsius_centi = 3125;
    v->tel.temps[1].celsius_centi = 4010;
    v->tel.temps[2].fault = true;
    v->tel.n_pumps = 2;
    v->tel.pumps[0] = (struct cool_pump){.rpm = 2410, .duty = 55};
    v->tel.pumps[1] = (struct cool_pump){.rpm = 0, .duty = 100};
    v->tel.has_flow = true;
    v->tel.flow_centi = 1240;
    v->cut_in_s = 27;
    v->safety = SAFETY_SHUTTING_DOWN;
    v->shutdown_stage = 2;
}

static char *render(const struct coold_view *v, enum prom_format f)
{
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(metrics_render(v, f, &text, &len), 0);
    assert_int_equal(strlen(text), len);
    return text;
}

static void assert_line(const char *text, const char *line)
{
    const char *p = text;
    size_t n = strlen(line);
    while ((p = strstr(p, line))) {
        if ((p == text || p[-1] == '\n') && (p[n] == '\n' || p[n] == '\0'))
            return;
        p += n;
    }
    fail_msg("line '%s' missing from:\n%s", line, text);
}

static void test_series(void **state)
{
    struct coold_view v;
    sample_view(&v);
    _cleanup_free_ char *t = render(&v, PROM_FORMAT_TEXT);
    assert_line(t, "coold_controller_up 1");
    assert_line(t, "coold_coolant_temperature_celsius{sensor=\"inlet\"} 31.25");
    assert_line(t, "coold_coolant_temperature_celsius{sensor=\"outlet\"} 40.1");
    /* A faulty sensor has no temperature, but its fault is a series of its own. */
    assert_null(strstr(t, "coold_coolant_temperature_celsius{sensor=\"tank"));
    assert_line(t, "coold_sensor_fault{sensor=\"tank \\\"B\\\"\"} 1");
    assert_line(t, "coold_pump_speed_rpm{pump=\"2\"} 0");
    assert_line(t, "coold_pump_duty_ratio{pump=\"1\"} 0.55");
    assert_line(t, "coold_pump_duty_ratio{pump=\"2\"} 1");
    assert_line(t, "coold_coolant_flow_liters_per_minute 12.4");
    assert_line(t, "coold_frames_rejected_total 7");
    assert_line(t, "coold_reconnects_total 2");
    assert_line(t, "coold_safety_state{state=\"shutting-down\"} 1");
    assert_line(t, "coold_safety_state{state=\"normal\"} 0");
    assert_line(t, "coold_controller_level{level=\"precritical\"} 1");
    assert_line(t, "coold_power_cut_in_seconds 27");
    assert_line(t, "coold_shutdown_stage 2");
    assert_line(t, "coold_build_info{version=\"" GPUNODE_VERSION "\"} 1");
    assert_line(t, "# TYPE coold_reconnects_total counter");
    assert_null(strstr(t, "# EOF"));
}

/* Before the first STATUS there is nothing to report but the daemon's own state. */
static void test_no_telemetry(void **state)
{
    struct coold_view v = {.link_state = "closed", .cut_in_s = -1};
    _cleanup_free_ char *t = render(&v, PROM_FORMAT_TEXT);
    assert_line(t, "coold_controller_up 0");
    assert_line(t, "coold_power_cut_in_seconds -1");
    assert_null(strstr(t, "coold_pump_speed_rpm{"));
    assert_null(strstr(t, "coold_coolant_flow_liters_per_minute "));
}

static void test_openmetrics(void **state)
{
    struct coold_view v;
    sample_view(&v);
    _cleanup_free_ char *t = render(&v, PROM_FORMAT_OPENMETRICS);
    assert_line(t, "# TYPE coold_reconnects counter");
    assert_line(t, "coold_reconnects_total 2");
    size_t n = strlen(t);
    assert_true(n > 6 && strcmp(t + n - 6, "# EOF\n") == 0);
}

static void test_promtool_accepts(void **state)
{
    if (access("/usr/bin/promtool", X_OK) != 0)
        test_skip("promtool is not installed (Debian: prometheus)");
    struct coold_view v;
    sample_view(&v);
    _cleanup_free_ char *t = render(&v, PROM_FORMAT_TEXT);
    FILE *p = popen("/usr/bin/promtool check metrics >/dev/null 2>&1", "w");
    assert_non_null(p);
    fputs(t, p);
    assert_int_equal(pclose(p), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_series),
        cmocka_unit_test(test_no_telemetry),
        cmocka_unit_test(test_openmetrics),
        cmocka_unit_test(test_promtool_accepts),
    };
    return test_run_cases(tests);
}
