/* The end-of-run report: exit status and JSON. */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "sim-report.h"

static void nothing_sent(const char *frame, size_t len, void *userdata)
{
}

/* A controller that ran from t=1000 ms with some history. */
static void history(struct sim_ctl *c, bool halt, bool cut)
{
    static const struct sim_ctl_ops ops = {.send = nothing_sent};
    struct ctl_settings s;

    ctl_settings_defaults(&s, 2);
    sim_ctl_init(c, &s, &ops, NULL, 1000);
    c->stats.frames = 40;
    c->stats.rejected = 3;
    c->stats.requests[SIM_VERB_STATUS] = 30;
    c->stats.requests[SIM_VERB_HALT] = halt;
    c->stats.halt = halt;
    c->stats.halt_ms = 11500;
    c->stats.cut = cut;
    c->stats.cut_orderly = cut && halt;
    c->stats.cut_ms = 41000;
    c->stats.have_max_temp = true;
    c->stats.max_temp_centi = 4321;
    c->stats.max_level = SIM_LEVEL_PRECRITICAL;
}

static void test_exit_status(void **state)
{
    struct sim_ctl c;
    struct sim_report r;

    history(&c, false, false);
    sim_report_fill(&r, &c, "normal", "duration", 1000, 61000);
    assert_int_equal(sim_report_exit_status(&r), SIM_EXIT_OK);
    history(&c, true, true);
    sim_report_fill(&r, &c, "pump-failure", "power_cut", 1000, 41000);
    assert_int_equal(sim_report_exit_status(&r), SIM_EXIT_OK);
    assert_true(r.orderly);
    history(&c, false, true);
    sim_report_fill(&r, &c, "pump-failure", "power_cut", 1000, 41000);
    assert_int_equal(sim_report_exit_status(&r), SIM_EXIT_HARD_CUT);
    assert_false(r.orderly);
}

static void test_json(void **state)
{
    struct sim_ctl c;
    struct sim_report r;
    struct errmsg e;
    char path[] = "/tmp/test-sim-report.XXXXXX";
    json_error_t je;

    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    history(&c, true, true);
    sim_report_fill(&r, &c, "pump-failure", "power_cut", 1000, 41500);
    assert_int_equal(sim_report_write_json(&r, path, &e), 0);

    json_t *root = json_load_file(path, 0, &je);
    unlink(path);
    assert_non_null(root);
    assert_string_equal(json_string_value(json_object_get(root, "scenario")), "pump-failure");
    assert_string_equal(json_string_value(json_object_get(root, "end")), "power_cut");
    assert_true(json_is_true(json_object_get(root, "power_cut")));
    assert_true(json_is_true(json_object_get(root, "orderly")));
    assert_true(json_is_true(json_object_get(root, "halt_received")));
    assert_true(json_real_value(json_object_get(root, "duration_s")) == 40.5);
    assert_true(json_real_value(json_object_get(root, "cut_at_s")) == 40.0);
    assert_true(json_real_value(json_object_get(root, "halt_at_s")) == 10.5);
    assert_true(json_real_value(json_object_get(root, "max_temp_c")) == 43.21);
    assert_string_equal(json_string_value(json_object_get(root, "max_level")), "precritical");
    assert_int_equal(json_integer_value(json_object_get(root, "frames_received")), 40);
    assert_int_equal(json_integer_value(json_object_get(root, "frames_rejected")), 3);
    json_t *req = json_object_get(root, "requests");
    assert_int_equal(json_integer_value(json_object_get(req, "STATUS")), 30);
    assert_int_equal(json_integer_value(json_object_get(req, "HALT")), 1);
    assert_int_equal(json_integer_value(json_object_get(req, "HELLO")), 0);
    assert_int_equal(json_integer_value(json_object_get(root, "exit_status")), 0);
    json_decref(root);
}

static void test_json_no_cut(void **state)
{
    struct sim_ctl c;
    struct sim_report r;
    struct errmsg e;
    char path[] = "/tmp/test-sim-report.XXXXXX";
    json_error_t je;

    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    history(&c, false, false);
    sim_report_fill(&r, &c, "normal", "signal", 1000, 2000);
    assert_int_equal(sim_report_write_json(&r, path, &e), 0);
    json_t *root = json_load_file(path, 0, &je);
    unlink(path);
    assert_non_null(root);
    assert_true(json_is_false(json_object_get(root, "power_cut")));
    assert_true(json_is_null(json_object_get(root, "cut_at_s")));
    assert_true(json_is_null(json_object_get(root, "halt_at_s")));
    json_decref(root);
}

static void test_print(void **state)
{
    struct sim_ctl c;
    struct sim_report r;
    char *text = NULL;
    size_t size = 0;

    history(&c, false, true);
    sim_report_fill(&r, &c, "hot-unplug", "power_cut", 1000, 41000);
    FILE *f = open_memstream(&text, &size);
    assert_non_null(f);
    sim_report_print(&r, f);
    fclose(f);
    assert_non_null(strstr(text, "hot-unplug"));
    assert_non_null(strstr(text, "HARD"));
    assert_non_null(strstr(text, "43.21"));
    free(text);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_status),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_json_no_cut),
        cmocka_unit_test(test_print),
    };
    return test_run_cases(tests);
}
