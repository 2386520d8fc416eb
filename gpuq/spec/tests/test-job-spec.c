/* Tests for the API's job request: the defaults a submission gets, every refusal naming its key,
 * the limits, the exact round trip through job_spec_to_json(), the signal names, and the state
 * names of gpuq/core/job.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <signal.h>

#include "test-main.h"

#include "gpuq/spec/job-spec.h"
#include "lib/strv.h"

static json_t *load(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &err);
    if (!j)
        print_error("bad test JSON '%s': %s\n", text, err.text);
    assert_non_null(j);
    return j;
}

static int parse(const char *text, struct job_spec *s, bool *held, struct errmsg *e)
{
    json_auto_t *j = load(text);
    return job_spec_from_json(j, s, held, e);
}

static void test_defaults(void **state)
{
    struct job_spec s;
    bool held = true;
    struct errmsg e = {""};
    assert_int_equal(parse("{\"command\": [\"true\"]}", &s, &held, &e), 0);
    assert_string_equal(s.name, "");
    assert_null(s.queue);
    assert_null(s.priority_class);
    assert_null(s.image);
    assert_null(s.cwd);
    assert_int_equal(s.res.gpu_kind, JOB_GPU_NONE);
    assert_int_equal(s.res.gpus, 0);
    assert_int_equal(s.res.cpu_milli, 0);
    assert_true(s.res.mem_bytes == 0);
    assert_true(s.time_limit_s == 0 && s.active_deadline_s == 0);
    assert_int_equal(strv_length(s.argv), 1);
    assert_non_null(s.env);
    assert_int_equal(strv_length(s.env), 0);
    assert_false(s.interactive);
    assert_int_equal(s.backoff_limit, 6);
    assert_int_equal(s.checkpoint_signal, SIGTERM);
    assert_true(s.grace_s == 30.0);
    assert_int_equal(s.restart, JOB_RESTART_ON_FAILURE);
    assert_false(held);
    job_spec_done(&s);

    /* an image alone runs the image's own command */
    assert_int_equal(parse("{\"image\": \"ubuntu:24.04\", \"held\": true}", &s, &held, &e), 0);
    assert_null(s.argv);
    assert_string_equal(s.image, "ubuntu:24.04");
    assert_true(held);
    job_spec_done(&s);
}

static void test_gpu_kinds(void **state)
{
    struct job_spec s;
    struct errmsg e = {""};
    assert_int_equal(parse("{\"command\":[\"x\"],\"gpus\":2,\"gpu_model\":\"H100\"}", &s, NULL, &e),
                     0);
    assert_int_equal(s.res.gpu_kind, JOB_GPU_WHOLE);
    assert_int_equal(s.res.gpus, 2);
    assert_string_equal(s.res.model, "H100");
    job_spec_done(&s);
    assert_int_equal(
        parse("{\"command\":[\"x\"],\"gpus\":3,\"mig_profile\":\"1g.5gb+me\"}", &s, NULL, &e), 0);
    assert_int_equal(s.res.gpu_kind, JOB_GPU_MIG);
    assert_int_equal(s.res.gpus, 3);
    assert_string_equal(s.res.profile, "1g.5gb+me");
    job_spec_done(&s);
    /* "" is any model, and a model with spaces is NVML's spelling */
    assert_int_equal(parse("{\"command\":[\"x\"],\"gpus\":1,\"gpu_model\":\"\"}", &s, NULL, &e), 0);
    assert_int_equal(s.res.gpu_kind, JOB_GPU_WHOLE);
    job_spec_done(&s);
    assert_int_equal(
        parse("{\"command\":[\"x\"],\"gpus\":1,\"gpu_model\":\"NVIDIA H100 80GB HBM3\"}", &s, NULL,
              &e),
        0);
    job_spec_done(&s);
    static const char *const profiles[] = {"1g.10gb",    "3g.40gb",     "7g.80gb",
                                           "1c.2g.20gb", "1g.24gb+gfx", "1g.10gb+me.all",
                                           "2g.20gb-me"};
    for (size_t i = 0; i < sizeof(profiles) / sizeof(profiles[0]); i++) {
        char text[128];
        snprintf(text, sizeof(text), "{\"image\":\"x\",\"gpus\":1,\"mig_profile\":\"%s\"}",
                 profiles[i]);
        assert_int_equal(parse(text, &s, NULL, &e), 0);
        job_spec_done(&s);
    }
}

static void test_refusals_name_their_key(void **state)
{
    static const struct {
        const char *json;
        const char *why;
    } bad[] = {
        {"{\"command\":[\"x\"],\"gpu\":2}", "unknown key 'gpu'"},
        {"[]", "must be a JSON object"},
        {"{}", "command: required unless image is given"},
        {"{\"command\":[\"x\"],\"name\":\"a b\"}", "name: 'a b' may hold only"},
        {"{\"command\":[\"x\"],\"name\":"
         "\"0123456789012345678901234567890123456789012345678901234567890123\"}",
         "name: "},
        {"{\"command\":[\"x\"],\"name\":7}", "name: must be a string"},
        {"{\"command\":[\"x\"],\"queue\":\"\"}", "queue: must not be empty"},
        {"{\"command\":[\"x\"],\"queue\":\"a/b\"}", "queue: "},
        {"{\"command\":[\"x\"],\"priority_class\":\"\"}", "priority_class: "},
        {"{\"command\":[\"x\"],\"gpus\":-1}", "gpus: -1 is out of range"},
        {"{\"command\":[\"x\"],\"gpus\":1025}", "gpus: 1025 is out of range"},
        {"{\"command\":[\"x\"],\"gpus\":\"2\"}", "gpus: must be an integer"},
        {"{\"command\":[\"x\"],\"gpus\":1.5}", "gpus: must be an integer"},
        {"{\"command\":[\"x\"],\"gpu_model\":\"H100\"}", "gpu_model: needs gpus > 0"},
        {"{\"command\":[\"x\"],\"gpus\":1,\"gpu_model\":\"H100;rm\"}", "gpu_model: "},
        {"{\"command\":[\"x\"],\"gpus\":1,\"gpu_model\":\"0123456789012345678901234567890123\"}",
         "gpu_model: "},
        {"{\"command\":[\"x\"],\"mig_profile\":\"1g.10gb\"}", "mig_profile: needs gpus > 0"},
        {"{\"command\":[\"x\"],\"gpus\":1,\"mig_profile\":\"10gb\"}",
         "mig_profile: '10gb' is not a MIG profile"},
        {"{\"command\":[\"x\"],\"gpus\":1,\"mig_profile\":\"1g.10gb+\"}", "mig_profile: "},
        {"{\"command\":[\"x\"],\"gpus\":1,\"mig_profile\":\"1g.10gb\",\"gpu_model\":\"A100\"}",
         "mig_profile and gpu_model cannot be combined"},
        {"{\"command\":[\"x\"],\"cpu_milli\":-1}", "cpu_milli: "},
        {"{\"command\":[\"x\"],\"cpu_milli\":4294967296}", "cpu_milli: "},
        {"{\"command\":[\"x\"],\"mem_bytes\":-5}", "mem_bytes: "},
        {"{\"command\":[\"x\"],\"time_limit\":0}", "time_limit: 0 seconds: must be above 0"},
        {"{\"command\":[\"x\"],\"time_limit\":-5}", "time_limit: "},
        {"{\"command\":[\"x\"],\"time_limit\":1e12}", "time_limit: 1e+12 seconds is more than"},
        {"{\"command\":[\"x\"],\"active_deadline\":\"1h\"}",
         "active_deadline: must be a number of seconds"},
        {"{\"image\":\"\"}", "image: must not be empty"},
        {"{\"image\":\"ubuntu latest\"}", "image: 'ubuntu latest' is not an image reference"},
        {"{\"image\":\"ubuntu\\tx\"}", "image: "},
        {"{\"image\":\"-v\"}", "image: '-v' is not an image reference"},
        {"{\"command\":[]}", "command: must hold at least the program"},
        {"{\"command\":[\"\"]}", "command: [0]: the program must not be empty"},
        {"{\"command\":[\"a\",1]}", "command: [1]: must be a string"},
        {"{\"command\":\"ls\"}", "command: must be an array of strings"},
        {"{\"command\":[\"a\\u0000b\"]}", "command: [0]: must not contain NUL"},
        {"{\"command\":[\"x\"],\"env\":[\"1X=2\"]}", "env: [0]: '1X' is not a variable name"},
        {"{\"command\":[\"x\"],\"env\":[\"A=1\",\"NOEQ\"]}", "env: [1]: 'NOEQ' is not K=V"},
        {"{\"command\":[\"x\"],\"env\":[\"=1\"]}", "env: [0]: "},
        {"{\"command\":[\"x\"],\"cwd\":\"rel/dir\"}", "cwd: 'rel/dir' is not an absolute path"},
        {"{\"command\":[\"x\"],\"interactive\":1}", "interactive: must be true or false"},
        {"{\"command\":[\"x\"],\"backoff_limit\":101}", "backoff_limit: 101 is out of range"},
        {"{\"command\":[\"x\"],\"checkpoint_signal\":\"KILL\"}",
         "checkpoint_signal: SIGKILL cannot be caught"},
        {"{\"command\":[\"x\"],\"checkpoint_signal\":19}", "checkpoint_signal: SIGSTOP cannot"},
        {"{\"command\":[\"x\"],\"checkpoint_signal\":\"FOO\"}",
         "checkpoint_signal: 'FOO' is not a signal"},
        {"{\"command\":[\"x\"],\"checkpoint_signal\":65}",
         "checkpoint_signal: 65 is not a signal number"},
        {"{\"command\":[\"x\"],\"checkpoint_signal\":0}", "checkpoint_signal: "},
        {"{\"command\":[\"x\"],\"grace\":-1}", "grace: -1 seconds: must be at least 0"},
        {"{\"command\":[\"x\"],\"restart_policy\":\"Always\"}",
         "restart_policy: 'Always' is not OnFailure or Never"},
        {"{\"command\":[\"x\"],\"restart_policy\":\"never\"}", "restart_policy: "},
        {"{\"command\":[\"x\"],\"held\":\"yes\"}", "held: must be true or false"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct job_spec s = {.name = (char *)"untouched"};
        bool held = false;
        struct errmsg e = {""};
        int r = parse(bad[i].json, &s, &held, &e);
        if (r != -EINVAL || !strstr(e.text, bad[i].why))
            print_error("%s -> %d '%s', expected '%s'\n", bad[i].json, r, e.text, bad[i].why);
        assert_int_equal(r, -EINVAL);
        assert_non_null(strstr(e.text, bad[i].why));
        assert_string_equal(s.name, "untouched");
    }
}

static json_t *strings_array(size_t n, size_t len, const char *prefix)
{
    json_t *a = json_array();
    char *s = malloc(len + 1);
    assert_non_null(s);
    memset(s, 'x', len);
    s[len] = '\0';
    memcpy(s, prefix, strlen(prefix));
    for (size_t i = 0; i < n; i++)
        assert_int_equal(json_array_append_new(a, json_string(s)), 0);
    free(s);
    return a;
}

static void test_limits(void **state)
{
    struct job_spec s;
    struct errmsg e = {""};
    json_auto_t *j = json_object();
    json_object_set_new(j, "command", strings_array(SPEC_ARGV_MAX, 4, "a"));
    assert_int_equal(job_spec_from_json(j, &s, NULL, &e), 0);
    job_spec_done(&s);
    json_object_set_new(j, "command", strings_array(SPEC_ARGV_MAX + 1, 4, "a"));
    assert_int_equal(job_spec_from_json(j, &s, NULL, &e), -E2BIG);
    assert_non_null(strstr(e.text, "command: 4097 elements, more than 4096"));

    json_object_set_new(j, "command", strings_array(1, 4, "a"));
    json_object_set_new(j, "env", strings_array(SPEC_ENV_MAX + 1, 4, "A="));
    assert_int_equal(job_spec_from_json(j, &s, NULL, &e), -E2BIG);
    assert_non_null(strstr(e.text, "env: "));

    /* two strings of 600 KiB: each fine, together past 1 MiB */
    json_object_set_new(j, "env", strings_array(1, 600 * 1024, "A="));
    assert_int_equal(job_spec_from_json(j, &s, NULL, &e), 0);
    job_spec_done(&s);
    json_object_set_new(j, "command", strings_array(1, 600 * 1024, "a"));
    assert_int_equal(job_spec_from_json(j, &s, NULL, &e), -E2BIG);
    assert_non_null(strstr(e.text, "more than 1048576"));
}

static void assert_same_spec(const struct job_spec *a, const struct job_spec *b)
{
    assert_string_equal(a->name, b->name);
    assert_true((!a->queue && !b->queue) || strcmp(a->queue, b->queue) == 0);
    assert_true((!a->priority_class && !b->priority_class) ||
                strcmp(a->priority_class, b->priority_class) == 0);
    assert_memory_equal(&a->res, &b->res, sizeof(a->res));
    assert_true(a->time_limit_s == b->time_limit_s);
    assert_true(a->active_deadline_s == b->active_deadline_s);
    assert_true((!a->image && !b->image) || strcmp(a->image, b->image) == 0);
    assert_true((!a->cwd && !b->cwd) || strcmp(a->cwd, b->cwd) == 0);
    assert_int_equal(strv_length(a->argv), strv_length(b->argv));
    assert_true(!a->argv == !b->argv);
    for (size_t i = 0; a->argv && a->argv[i]; i++)
        assert_string_equal(a->argv[i], b->argv[i]);
    assert_int_equal(strv_length(a->env), strv_length(b->env));
    for (size_t i = 0; a->env[i]; i++)
        assert_string_equal(a->env[i], b->env[i]);
    assert_int_equal(a->interactive, b->interactive);
    assert_int_equal(a->backoff_limit, b->backoff_limit);
    assert_int_equal(a->checkpoint_signal, b->checkpoint_signal);
    assert_true(a->grace_s == b->grace_s);
    assert_int_equal(a->restart, b->restart);
}

/* from_json(to_json(s)) == s, and to_json of that is the same JSON again. */
static void round_trip(const char *text)
{
    struct job_spec a, b;
    struct errmsg e = {""};
    assert_int_equal(parse(text, &a, NULL, &e), 0);
    json_auto_t *j1 = job_spec_to_json(&a);
    assert_non_null(j1);
    /* through text, as the API sends it */
    char *dumped = json_dumps(j1, JSON_COMPACT);
    assert_non_null(dumped);
    assert_int_equal(parse(dumped, &b, NULL, &e), 0);
    free(dumped);
    assert_same_spec(&a, &b);
    json_auto_t *j2 = job_spec_to_json(&b);
    assert_true(json_equal(j1, j2));
    job_spec_done(&a);
    job_spec_done(&b);
}

static void test_round_trip(void **state)
{
    round_trip("{\"command\":[\"true\"]}");
    round_trip("{\"image\":\"nvcr.io/nvidia/pytorch:24.01-py3\"}");
    round_trip("{\"name\":\"train-1\",\"queue\":\"batch\",\"priority_class\":\"urgent\","
               "\"gpus\":2,\"gpu_model\":\"H100\",\"cpu_milli\":1500,"
               "\"mem_bytes\":34359738368,\"time_limit\":0.1,\"active_deadline\":86400.25,"
               "\"image\":\"registry.infn.it/physics/sim:v1.2\",\"command\":[\"python\","
               "\"train.py\",\"--lr\",\"3e-4\",\"\"],\"env\":[\"A=1\",\"B=x=y\",\"C=\"],"
               "\"cwd\":\"/home/u/run\",\"interactive\":true,\"backoff_limit\":0,"
               "\"checkpoint_signal\":\"USR1\",\"grace\":0,\"restart_policy\":\"Never\","
               "\"held\":true}");
    round_trip("{\"command\":[\"x\"],\"gpus\":7,\"mig_profile\":\"1g.10gb\","
               "\"checkpoint_signal\":\"RTMIN+3\",\"grace\":1e-3}");
    round_trip("{\"command\":[\"x\"],\"checkpoint_signal\":32}");
    round_trip("{\"command\":[\"x\"],\"gpus\":1,\"mem_bytes\":9223372036854775807,"
               "\"cpu_milli\":4294967295,\"time_limit\":3153600000}");
}

static void test_to_json_writes_defaults_out(void **state)
{
    struct job_spec s;
    struct errmsg e = {""};
    assert_int_equal(parse("{\"command\":[\"x\"],\"checkpoint_signal\":10}", &s, NULL, &e), 0);
    json_auto_t *j = job_spec_to_json(&s);
    assert_string_equal(json_string_value(json_object_get(j, "checkpoint_signal")), "SIGUSR1");
    assert_int_equal(json_integer_value(json_object_get(j, "backoff_limit")), 6);
    assert_true(json_real_value(json_object_get(j, "grace")) == 30.0);
    assert_string_equal(json_string_value(json_object_get(j, "restart_policy")), "OnFailure");
    assert_int_equal(json_integer_value(json_object_get(j, "gpus")), 0);
    assert_null(json_object_get(j, "queue"));
    assert_null(json_object_get(j, "time_limit"));
    assert_null(json_object_get(j, "held"));
    job_spec_done(&s);
}

static void test_check_field(void **state)
{
    struct errmsg e = {""};
    json_auto_t *bad = json_integer(-1);
    assert_int_equal(job_spec_check_field("gpus", bad, &e), -EINVAL);
    assert_string_equal(e.text, "-1 is out of range (a count 0..1024)");
    json_auto_t *good = json_string("batch");
    assert_int_equal(job_spec_check_field("queue", good, &e), 0);
    assert_int_equal(job_spec_check_field("queues", good, &e), -EINVAL);
    assert_string_equal(e.text, "unknown key 'queues'");
}

static void test_signals(void **state)
{
    static const struct {
        const char *s;
        int sig;
    } good[] = {
        {"TERM", SIGTERM}, {"SIGTERM", SIGTERM}, {"sigusr1", SIGUSR1}, {"USR2", SIGUSR2},
        {"INT", SIGINT},   {"HUP", SIGHUP},      {"QUIT", SIGQUIT},    {"10", 10},
        {"64", 64},        {"KILL", SIGKILL},    {"IOT", SIGABRT},     {"POLL", SIGIO},
        {"CLD", SIGCHLD},  {"WINCH", SIGWINCH},  {"PWR", SIGPWR},      {"SYS", SIGSYS},
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
        int sig = -1;
        assert_int_equal(spec_signal_parse(good[i].s, &sig, NULL), 0);
        assert_int_equal(sig, good[i].sig);
    }
    int sig = -1;
    assert_int_equal(spec_signal_parse("RTMIN", &sig, NULL), 0);
    assert_int_equal(sig, SIGRTMIN);
    assert_int_equal(spec_signal_parse("SIGRTMIN+2", &sig, NULL), 0);
    assert_int_equal(sig, SIGRTMIN + 2);
    assert_int_equal(spec_signal_parse("rtmax-1", &sig, NULL), 0);
    assert_int_equal(sig, SIGRTMAX - 1);
    assert_int_equal(spec_signal_parse("RTMAX", &sig, NULL), 0);
    assert_int_equal(sig, SIGRTMAX);
    static const char *const bad[] = {"0", "65",  "FOO", "RTMIN+99", "RTMIN-1", "RTMAX+1", "15x",
                                      "",  "SIG", "-15", "TERM ",    "RTMIN+",  "+15"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct errmsg e = {""};
        sig = -1;
        assert_int_equal(spec_signal_parse(bad[i], &sig, &e), -EINVAL);
        assert_true(e.text[0]);
        assert_int_equal(sig, -1);
    }
    /* every number with a name reads back from it */
    for (int n = 1; n <= SIGRTMAX; n++) {
        char buf[SPEC_SIGNAL_NAME_MAX];
        const char *name = spec_signal_name(n, buf);
        if (!name) {
            assert_true(n > 31 && n < SIGRTMIN);
            continue;
        }
        assert_int_equal(spec_signal_parse(name, &sig, NULL), 0);
        assert_int_equal(sig, n);
    }
    char buf[SPEC_SIGNAL_NAME_MAX];
    assert_string_equal(spec_signal_name(SIGTERM, buf), "SIGTERM");
    assert_string_equal(spec_signal_name(SIGABRT, buf), "SIGABRT");
    assert_null(spec_signal_name(0, buf));
    assert_null(spec_signal_name(SIGRTMAX + 1, buf));
}

static void test_state_names(void **state)
{
    for (int i = 0; i < JOB_STATE_COUNT; i++) {
        enum job_state s;
        const char *name = job_state_name((enum job_state)i);
        assert_non_null(name);
        assert_int_equal(job_state_from_name(name, &s), 0);
        assert_int_equal(s, i);
    }
    assert_string_equal(job_state_name(JOB_CANCELLED), "CANCELLED");
    assert_null(job_state_name(JOB_STATE_COUNT));
    enum job_state s = JOB_RUNNING;
    assert_int_equal(job_state_from_name("running", &s), -EINVAL);
    assert_int_equal(s, JOB_RUNNING);
    assert_false(job_state_is_final(JOB_PENDING));
    assert_false(job_state_is_final(JOB_RUNNING));
    assert_false(job_state_is_final(JOB_STOPPING));
    assert_true(job_state_is_final(JOB_COMPLETED));
    assert_true(job_state_is_final(JOB_FAILED));
    assert_true(job_state_is_final(JOB_CANCELLED));
    assert_true(job_state_is_final(JOB_TIMEOUT));
    for (int i = JOB_STOP_NONE; i <= JOB_STOP_TIMEOUT; i++) {
        enum job_stop_reason r;
        const char *name = job_stop_reason_name((enum job_stop_reason)i);
        assert_non_null(name);
        assert_int_equal(job_stop_reason_from_name(name, &r), 0);
        assert_int_equal(r, i);
    }
    assert_string_equal(job_stop_reason_name(JOB_STOP_PREEMPT), "PREEMPT");
    assert_null(job_stop_reason_name((enum job_stop_reason)(JOB_STOP_TIMEOUT + 1)));
    enum job_stop_reason r;
    assert_int_equal(job_stop_reason_from_name("nope", &r), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_gpu_kinds),
        cmocka_unit_test(test_refusals_name_their_key),
        cmocka_unit_test(test_limits),
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_to_json_writes_defaults_out),
        cmocka_unit_test(test_check_field),
        cmocka_unit_test(test_signals),
        cmocka_unit_test(test_state_names),
    };
    return test_run_cases(tests);
}
