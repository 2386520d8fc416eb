/* coolctl end to end, in-process, against a fake coold on a Unix socket: what it prints, what it
 * exits with, and above all which writes reach the daemon. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test-main.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "coolctl.h"
#include "fake-coold.h"

struct result {
    int code;
    char *out;
    char *err;
};

static void result_done(struct result *r)
{
    free(r->out);
    free(r->err);
    *r = (struct result){0};
}

/* Runs coolctl with "--socket SOCKET" and the NULL-terminated arguments. */
static struct result run_at(const char *socket, ...)
{
    char *argv[32] = {"coolctl", "--socket", (char *)socket};
    int argc = 3;
    va_list ap;
    va_start(ap, socket);
    for (char *a; (a = va_arg(ap, char *)) && argc < 31;)
        argv[argc++] = a;
    va_end(ap);

    struct result r = {0};
    size_t olen, elen;
    FILE *out = open_memstream(&r.out, &olen), *err = open_memstream(&r.err, &elen);
    assert_non_null(out);
    assert_non_null(err);
    r.code = coolctl_run(argc, argv, out, err);
    fclose(out);
    fclose(err);
    return r;
}

#define RUN(f, ...) run_at((f)->socket, __VA_ARGS__, NULL)

static int setup(void **state)
{
    struct fake_coold *f = calloc(1, sizeof(*f));
    assert_int_equal(fake_coold_start(f), 0);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fake_coold_stop(*state);
    free(*state);
    return 0;
}

static void test_status(void **state)
{
    struct fake_coold *f = *state;
    struct result r = RUN(f, "status");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    assert_non_null(strstr(r.out, "CT-4  fw 2.4.1  serial CT4-000123"));
    assert_non_null(strstr(r.out, "Protection   normal  (reason: none)"));
    assert_non_null(strstr(r.out, "tank       FAULT"));
    assert_non_null(strstr(r.out, "Pump 2         2398 rpm   55 % duty"));
    assert_null(strchr(r.out, '\033'));
    result_done(&r);

    /* --json prints the API's document itself. */
    r = RUN(f, "--json", "status");
    assert_int_equal(r.code, 0);
    json_t *doc = json_loads(r.out, 0, NULL);
    assert_true(json_equal(doc, f->status));
    json_decref(doc);
    result_done(&r);

    /* Global options after the command, as people type them (docker ps --format json). */
    static const char *const forms[][5] = {
        {"status", "--json"},
        {"status", "--timeout=5", "--json"},
        {"status", "--timeout", "5", "--json"},
    };
    for (size_t i = 0; i < sizeof(forms) / sizeof(forms[0]); i++) {
        const char *const *a = forms[i];
        r = run_at(f->socket, a[0], a[1], a[2], a[3], a[4]);
        assert_int_equal(r.code, 0);
        doc = json_loads(r.out, 0, NULL);
        assert_true(json_equal(doc, f->status));
        json_decref(doc);
        result_done(&r);
    }
    r = RUN(f, "status", "--timeout");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_string_equal(r.err, "coolctl: option '--timeout' needs a value\n");
    result_done(&r);
    r = RUN(f, "status", "--timeout=x");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_non_null(strstr(r.err, "--timeout wants seconds"));
    result_done(&r);
    /* Other options still belong to the command; after "--" nothing is taken. */
    r = RUN(f, "status", "--jsonx");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_string_equal(r.err, "coolctl: status: unexpected argument '--jsonx'\n");
    result_done(&r);
    r = RUN(f, "status", "--", "--json");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_string_equal(r.err, "coolctl: status: unexpected argument '--json'\n");
    result_done(&r);
    r = RUN(f, "status", "--");
    assert_int_equal(r.code, 0);
    assert_null(strchr(r.out, '{'));
    result_done(&r);

    json_object_set_new(json_object_get(f->status, "controller"), "stale", json_true());
    r = RUN(f, "status");
    assert_int_equal(r.code, COOLCTL_EXIT_STALE);
    assert_non_null(strstr(r.out, "STALE"));
    result_done(&r);
    r = RUN(f, "--json", "status");
    assert_int_equal(r.code, COOLCTL_EXIT_STALE);
    result_done(&r);
}

static void test_unreachable(void **state)
{
    struct fake_coold *f = *state;
    char missing[256], text[512];
    snprintf(missing, sizeof(missing), "%s/nothing.sock", f->dir);
    struct result r = run_at(missing, "status", NULL);
    assert_int_equal(r.code, COOLCTL_EXIT_UNREACHABLE);
    snprintf(text, sizeof(text),
             "coolctl: cannot reach coold at %s: No such file or directory (is coold running?)\n",
             missing);
    assert_string_equal(r.err, text);
    assert_string_equal(r.out, "");
    result_done(&r);

    /* A socket file nobody listens on: a daemon that died without cleaning up. */
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    assert_true(strlen(missing) < sizeof(sa.sun_path));
    memcpy(sa.sun_path, missing, strlen(missing) + 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(fd);
    r = run_at(missing, "get", NULL);
    assert_int_equal(r.code, COOLCTL_EXIT_UNREACHABLE);
    assert_non_null(strstr(r.err, "Connection refused (is coold running?)"));
    result_done(&r);
    unlink(missing);

    /* $COOLD_SOCKET is the default when --socket is not given. */
    setenv("COOLD_SOCKET", missing, 1);
    char *argv[] = {"coolctl", "status", NULL};
    char *out = NULL, *err = NULL;
    size_t ol, el;
    FILE *fo = open_memstream(&out, &ol), *fe = open_memstream(&err, &el);
    assert_int_equal(coolctl_run(2, argv, fo, fe), COOLCTL_EXIT_UNREACHABLE);
    fclose(fo);
    fclose(fe);
    assert_non_null(strstr(err, missing));
    free(out);
    free(err);
    unsetenv("COOLD_SOCKET");
}

/* Each rule of §6 refuses the curve locally: exit 1, the reason, and no PUT at all. */
static void test_curve_set_refused(void **state)
{
    struct fake_coold *f = *state;
    static const struct {
        const char *pump, *points, *reason;
    } cases[] = {
        {"1", "30:40,60:70,55:100",
         "coolctl: pump 1 curve point 3: 55 C after 60 C; points must "
         "rise\n"},
        {"2", "30:40,45:30,55:100", "pump 2 curve point 2: duty 30% after 40%"},
        {"1", "30:40,45:70,65:100", "at the critical temperature 60 C; must be 100%"},
        {"1", "30:10,45:70,55:100", "below the pump's min_duty 20%"},
        {"3", "30:40,45:70,55:100", "coolctl: no pump 3: the controller has 2 pumps\n"},
        {"0", "30:40,45:70,55:100", "pumps are numbered from 1"},
        {"1", "30:40;45:70", "curve point 1"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct result r = RUN(f, "curve", "set", cases[i].pump, cases[i].points);
        assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
        if (!strstr(r.err, cases[i].reason))
            fail_msg("case %zu: '%s' lacks '%s'", i, r.err, cases[i].reason);
        assert_int_equal(strncmp(r.err, "coolctl: ", 9), 0);
        assert_ptr_equal(strchr(r.err, '\n'), r.err + strlen(r.err) - 1); /* one line */
        assert_string_equal(r.out, "");
        result_done(&r);
    }
    assert_int_equal(f->n_puts, 0);
    assert_int_equal(f->settings.curve[0].n, 3); /* still the factory curve */
}

static void test_curve_set_accepted(void **state)
{
    struct fake_coold *f = *state;
    struct result r = RUN(f, "curve", "set", "1", "25C:35%, 40C:60%, 50C:100%");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    assert_int_equal(f->n_puts, 1);
    json_t *want = json_pack("{s{ss}}", "settings", "pump.1.curve", "25:35,40:60,50:100");
    assert_true(json_equal(f->last_put, want));
    json_decref(want);
    /* What is printed is what the controller read back. */
    assert_non_null(strstr(r.out, "pump 1: 25:35,40:60,50:100  (minimum duty 20 %)"));
    assert_non_null(strstr(r.out, "      50   100 %\n"));
    result_done(&r);

    r = RUN(f, "curve", "show", "1");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "pump 1: 25:35,40:60,50:100"));
    assert_null(strstr(r.out, "pump 2"));
    result_done(&r);
    r = RUN(f, "curve");
    assert_non_null(strstr(r.out, "pump 2: 30:40,45:70,55:100"));
    result_done(&r);
    r = RUN(f, "curve", "show", "5");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    result_done(&r);
    assert_int_equal(f->n_puts, 1);
}

static void test_limits(void **state)
{
    struct fake_coold *f = *state;
    struct result r = RUN(f, "limits");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "precritical      55 \xc2\xb0"
                                  "C\n"));
    result_done(&r);

    r = RUN(f, "limits", "set", "warning=42", "critical=58C", "halt_max=90");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    assert_int_equal(f->n_puts, 1);
    json_t *want = json_pack("{s{ss ss ss}}", "settings", "limit.warning", "42", "limit.critical",
                             "58", "limit.halt_max", "90");
    assert_true(json_equal(f->last_put, want));
    json_decref(want);
    assert_non_null(strstr(r.out, "warning          42 \xc2\xb0"
                                  "C\n"));
    assert_non_null(strstr(r.out, "precritical      55 \xc2\xb0"
                                  "C\n"));
    assert_non_null(strstr(r.out, "halt_max         90 s\n"));
    result_done(&r);

    /* Out of order, and a critical limit below where the curves reach 100 %: nothing sent. */
    r = RUN(f, "limits", "set", "precritical=41");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_non_null(strstr(r.err, "limit.warning 42 C must be below limit.precritical 41 C"));
    result_done(&r);
    r = RUN(f, "limits", "set", "precritical=50", "critical=52");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_non_null(strstr(r.err, "must be 100%"));
    result_done(&r);
    r = RUN(f, "limits", "set", "hot=99");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    result_done(&r);
    assert_int_equal(f->n_puts, 1);
    assert_int_equal(f->settings.limits.precritical_centi, 5500);
}

static void test_get_set(void **state)
{
    struct fake_coold *f = *state;
    struct result r = RUN(f, "get", "limit.warning", "pump.2.min_duty");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "limit.warning = 45.00\npump.2.min_duty = 20\n");
    result_done(&r);

    r = RUN(f, "get");
    assert_non_null(strstr(r.out, "pump.1.curve = 30:40,45:70,55:100\n"));
    assert_non_null(strstr(r.out, "host.timeout = 10\n"));
    result_done(&r);

    r = RUN(f, "get", "limit.nothing");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_string_equal(r.err, "coolctl: not found: no such setting 'limit.nothing'\n");
    result_done(&r);

    r = RUN(f, "set", "pump.1.min_duty=30", "host.timeout=20");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "pump.1.min_duty = 30\nhost.timeout = 20\n");
    result_done(&r);
    r = RUN(f, "set", "pump.1.min_duty=50");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_non_null(strstr(r.err, "min_duty 50%"));
    result_done(&r);
    assert_int_equal(f->n_puts, 1);
}

static void test_daemon_errors(void **state)
{
    struct fake_coold *f = *state;
    f->write_status = 403;
    snprintf(f->message, sizeof(f->message), "uid 1000 may not write");
    struct result r = RUN(f, "curve", "set", "1", "30:50,55:100");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_non_null(strstr(r.err, "coolctl: permission denied: uid 1000 may not write"));
    assert_non_null(strstr(r.err, "admin group"));
    result_done(&r);
    snprintf(f->group, sizeof(f->group), "tankops");
    r = RUN(f, "drill");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_non_null(strstr(r.err, "permission denied"));
    assert_non_null(strstr(r.err, "members of the group 'tankops'"));
    result_done(&r);
    /* coold's own wording names the group already: said once, not twice. */
    f->group[0] = '\0';
    snprintf(f->message, sizeof(f->message),
             "uid 1000 may not change the controller; members of group 'tankops' and root may");
    r = RUN(f, "set", "host.timeout=20");
    assert_string_equal(r.err, "coolctl: permission denied: uid 1000 may not change the "
                               "controller; members of group 'tankops' and root may\n");
    result_done(&r);
    assert_int_equal(f->n_puts + f->n_posts, 0);

    /* The daemon refusing what passed the local checks still says why. */
    f->write_status = 400;
    snprintf(f->message, sizeof(f->message), "controller busy writing EEPROM");
    r = RUN(f, "set", "host.timeout=30");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_string_equal(r.err, "coolctl: refused: controller busy writing EEPROM\n");
    result_done(&r);

    f->write_status = 0;
    f->all_status = 503;
    snprintf(f->message, sizeof(f->message), "controller link is closed");
    r = RUN(f, "get");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_string_equal(r.err, "coolctl: coold is not connected to the controller: controller "
                               "link is closed\n");
    result_done(&r);
    f->all_status = 504;
    r = RUN(f, "limits");
    assert_non_null(strstr(r.err, "the controller did not answer"));
    result_done(&r);
    f->all_status = 0;
}

static void test_timeout(void **state)
{
    struct fake_coold *f = *state;
    f->delay_ms = 1500;
    struct result r = RUN(f, "--timeout", "0.3", "status");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_non_null(strstr(r.err, "did not answer within 0.3 s"));
    result_done(&r);
    f->delay_ms = 0;
}

static void test_events_and_drill(void **state)
{
    struct fake_coold *f = *state;
    struct result r = RUN(f, "events", "--limit", "2");
    assert_int_equal(r.code, 0);
    assert_string_equal(f->last_query_limit, "2");
    assert_string_equal(
        r.out, "2026-11-29 23:59:00  daemon      link       controller link up\n"
               "2026-11-30 00:00:05  controller  ALARM      precritical: pump 2 stopped\n");
    result_done(&r);
    r = RUN(f, "events", "--limit", "zero");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    result_done(&r);

    r = RUN(f, "drill");
    assert_int_equal(r.code, 0);
    assert_int_equal(f->n_posts, 1);
    assert_non_null(strstr(r.out, "containers  ok          0.5 s  3 containers\n"));
    result_done(&r);

    json_object_set_new(json_array_get(json_object_get(f->drill, "stages"), 1), "ok", json_false());
    r = RUN(f, "drill");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_non_null(strstr(r.out, "containers  FAILED"));
    assert_string_equal(r.err, "coolctl: drill: 1 stage FAILED\n");
    result_done(&r);
}

static void test_usage(void **state)
{
    struct fake_coold *f = *state;
    struct result r = RUN(f, "--help");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "Commands:"));
    result_done(&r);
    r = RUN(f, "curve", "--help");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "coolctl curve set PUMP POINTS"));
    result_done(&r);
    r = RUN(f, "frobnicate");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_string_equal(r.err, "coolctl: unknown command 'frobnicate' (see coolctl --help)\n");
    result_done(&r);
    r = RUN(f, "--timeout", "-1", "status");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    result_done(&r);
    r = RUN(f, "--timeout");
    assert_int_equal(r.code, COOLCTL_EXIT_FAILURE);
    assert_non_null(strstr(r.err, "needs a value"));
    result_done(&r);
    assert_int_equal(f->n_requests, 0);
}

int main(void)
{
    /* Event times print in local time; pin the zone so the expected text is the host's too. */
    setenv("TZ", "UTC", 1);
    tzset();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_status, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreachable, setup, teardown),
        cmocka_unit_test_setup_teardown(test_curve_set_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_curve_set_accepted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get_set, setup, teardown),
        cmocka_unit_test_setup_teardown(test_daemon_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_events_and_drill, setup, teardown),
        cmocka_unit_test_setup_teardown(test_usage, setup, teardown),
    };
    return test_run_cases(tests);
}
