/* Tests for `gpuq submit`'s options: the request they make, Slurm's time formats, sizes as
 * Slurm and Kubernetes write them, the Job file's overrides, and messages that name the option
 * and its value. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "gpuq/spec/job-spec.h"
#include "gpuq/spec/spec-args.h"
#include "lib/macro.h"

#define ARGS(...)                                                                                  \
    (sizeof((char *[]){__VA_ARGS__}) / sizeof(char *)), ((char *[]){__VA_ARGS__, NULL})

static json_t *parse_ok(int argc, char **argv)
{
    json_t *req = NULL;
    char *path = (char *)"untouched";
    struct errmsg e = {""};
    int r = spec_args_parse(argc, argv, &req, &path, &e);
    if (r != 0)
        print_error("%s\n", e.text);
    assert_int_equal(r, 0);
    assert_null(path);
    assert_non_null(req);
    return req;
}

static void parse_fails(int argc, char **argv, const char *why)
{
    json_t *req = (json_t *)0x1;
    char *path = (char *)"untouched";
    struct errmsg e = {""};
    int r = spec_args_parse(argc, argv, &req, &path, &e);
    if (r >= 0 || !strstr(e.text, why))
        print_error("%s: %d '%s', expected '%s'\n", argv[1], r, e.text, why);
    assert_true(r < 0);
    assert_non_null(strstr(e.text, why));
    assert_ptr_equal(req, (json_t *)0x1);
    assert_string_equal(path, "untouched");
}

static const char *str(json_t *req, const char *key)
{
    return json_string_value(json_object_get(req, key));
}

static json_int_t num(json_t *req, const char *key)
{
    json_t *v = json_object_get(req, key);
    assert_true(json_is_integer(v));
    return json_integer_value(v);
}

static void test_every_option(void **state)
{
    json_auto_t *req = parse_ok(
        ARGS("submit", "-q", "batch", "-J", "train", "-G", "H100:2", "-c", "0.5", "--mem", "32Gi",
             "-t", "1-02:00:00", "--active-deadline", "3d", "--image",
             "nvcr.io/nvidia/pytorch:24.01-py3", "-e", "A=1", "--env=B=x=y", "--backoff-limit", "3",
             "--checkpoint-signal", "usr1", "--grace", "2m", "--restart-policy", "never", "--hold",
             "-I", "--priority-class", "urgent", "python", "train.py", "-c", "3", "--", "x"));
    assert_string_equal(str(req, "queue"), "batch");
    assert_string_equal(str(req, "name"), "train");
    assert_string_equal(str(req, "gpu_model"), "H100");
    assert_int_equal(num(req, "gpus"), 2);
    assert_int_equal(num(req, "cpu_milli"), 500);
    assert_int_equal(num(req, "mem_bytes"), INT64_C(34359738368));
    assert_int_equal(num(req, "time_limit"), 86400 + 2 * 3600);
    assert_int_equal(num(req, "active_deadline"), 3 * 86400);
    assert_string_equal(str(req, "image"), "nvcr.io/nvidia/pytorch:24.01-py3");
    assert_int_equal(num(req, "backoff_limit"), 3);
    assert_string_equal(str(req, "checkpoint_signal"), "SIGUSR1");
    assert_int_equal(num(req, "grace"), 120);
    assert_string_equal(str(req, "restart_policy"), "Never");
    assert_true(json_is_true(json_object_get(req, "held")));
    assert_true(json_is_true(json_object_get(req, "interactive")));
    assert_string_equal(str(req, "priority_class"), "urgent");
    json_t *env = json_object_get(req, "env");
    assert_int_equal(json_array_size(env), 2);
    assert_string_equal(json_string_value(json_array_get(env, 1)), "B=x=y");
    /* options end at the command: its own -c and -- are its own */
    json_t *cmd = json_object_get(req, "command");
    assert_int_equal(json_array_size(cmd), 6);
    assert_string_equal(json_string_value(json_array_get(cmd, 0)), "python");
    assert_string_equal(json_string_value(json_array_get(cmd, 2)), "-c");
    assert_string_equal(json_string_value(json_array_get(cmd, 4)), "--");
    /* and the request is one the API takes */
    struct job_spec s;
    bool held = false;
    assert_int_equal(job_spec_from_json(req, &s, &held, NULL), 0);
    assert_true(held);
    assert_int_equal(s.res.gpu_kind, JOB_GPU_WHOLE);
    job_spec_done(&s);
}

static void test_command_forms(void **state)
{
    json_auto_t *a = parse_ok(ARGS("submit", "--", "-weird", "--gpus", "2"));
    json_t *cmd = json_object_get(a, "command");
    assert_int_equal(json_array_size(cmd), 3);
    assert_string_equal(json_string_value(json_array_get(cmd, 0)), "-weird");
    assert_null(json_object_get(a, "gpus"));
    /* an image alone runs its own command */
    json_auto_t *b = parse_ok(ARGS("submit", "--image", "ubuntu"));
    assert_null(json_object_get(b, "command"));
    /* getopt starts over on every call */
    json_auto_t *c = parse_ok(ARGS("submit", "-G", "1", "nvidia-smi"));
    assert_int_equal(num(c, "gpus"), 1);
}

static void test_gpus_and_mig(void **state)
{
    json_auto_t *a = parse_ok(ARGS("submit", "--gpus", "any:2", "x"));
    assert_int_equal(num(a, "gpus"), 2);
    assert_null(json_object_get(a, "gpu_model"));
    json_auto_t *b = parse_ok(ARGS("submit", "--mig", "1g.10gb:3", "x"));
    assert_int_equal(num(b, "gpus"), 3);
    assert_string_equal(str(b, "mig_profile"), "1g.10gb");
    /* the last --gpus wins, model and all */
    json_auto_t *c = parse_ok(ARGS("submit", "-G", "H100:2", "-G", "4", "x"));
    assert_int_equal(num(c, "gpus"), 4);
    assert_null(json_object_get(c, "gpu_model"));
    json_auto_t *d = parse_ok(ARGS("submit", "--gpus=0", "x"));
    assert_int_equal(num(d, "gpus"), 0);
}

static void test_memory_sizes(void **state)
{
    static const struct {
        const char *v;
        json_int_t bytes;
    } sizes[] = {
        {"512M", INT64_C(536870912)}, /* as sbatch --mem: MiB */
        {"64G", INT64_C(68719476736)},
        {"64 GiB", INT64_C(68719476736)},
        {"32Gi", INT64_C(34359738368)},
        {"129e6", 129000000},
        {"1.5G", INT64_C(1610612736)},
        {"500M", INT64_C(524288000)},
        {"1048576", 1048576},
        {"512m", INT64_C(536870912)}, /* lib's sizes: any case, never Kubernetes' milli */
    };
    for (size_t i = 0; i < ELEMENTSOF(sizes); i++) {
        json_auto_t *r = parse_ok(ARGS("submit", "--mem", (char *)sizes[i].v, "x"));
        assert_int_equal(num(r, "mem_bytes"), sizes[i].bytes);
    }
}

static void test_time_formats(void **state)
{
    static const struct {
        const char *s;
        double seconds;
    } good[] = {
        {"30", 1800},
        {"30:15", 1815},
        {"90:00", 5400},
        {"1:02:03", 3723},
        {"100:00:00", 360000},
        {"2-3", 2 * 86400 + 3 * 3600},
        {"2-3:04", 2 * 86400 + 3 * 3600 + 240},
        {"2-3:04:05", 2 * 86400 + 3 * 3600 + 245},
        {"0-0:0:1", 1},
        {"30s", 30},
        {"2h", 7200},
        {"1d", 86400},
        {"1.5h", 5400},
        {"90m", 5400},
        {"0:30", 30},
    };
    for (size_t i = 0; i < ELEMENTSOF(good); i++) {
        double s = -1;
        struct errmsg e = {""};
        int r = spec_time_parse(good[i].s, &s, &e);
        if (r != 0)
            print_error("'%s': %s\n", good[i].s, e.text);
        assert_int_equal(r, 0);
        assert_true(s == good[i].seconds);
    }
    static const struct {
        const char *s;
        const char *why;
    } bad[] = {
        {"UNLIMITED", "no unlimited time limit"},
        {"infinite", "no unlimited time limit"},
        {"0", "no time"},
        {"0:00", "no time"},
        {"0s", "no time"},
        {"1:60", "below 60"},
        {"1:60:00", "below 60"},
        {"1-24", "hours below 24"},
        {"1:2:3:4", "is not a time"},
        {"1-", "is not a time"},
        {"-1", "is not a time"},
        {"1h30", "is not a time"},
        {"", "is not a time"},
        {"abc", "is not a time"},
        {"1-2-3", "is not a time"},
        {"99999999999", "is not a time"},
        {"36500000d", "more than 100 years"},
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        double s = -1;
        struct errmsg e = {""};
        int r = spec_time_parse(bad[i].s, &s, &e);
        if (r >= 0 || !strstr(e.text, bad[i].why))
            print_error("'%s': %d '%s', expected '%s'\n", bad[i].s, r, e.text, bad[i].why);
        assert_true(r < 0);
        assert_non_null(strstr(e.text, bad[i].why));
        assert_true(s == -1);
    }
}

static void test_errors_name_option_and_value(void **state)
{
    parse_fails(ARGS("submit", "--gpus", "H100:x", "x"), "--gpus 'H100:x': expected N or MODEL:N");
    parse_fails(ARGS("submit", "-G", "H100:0", "x"), "--gpus 'H100:0': a GPU model needs");
    parse_fails(ARGS("submit", "-G", "H1;00:1", "x"), "--gpus 'H1;00:1': ");
    parse_fails(ARGS("submit", "-G", "2000", "x"), "--gpus '2000'");
    parse_fails(ARGS("submit", "--mig", "1g.10gb", "x"), "--mig '1g.10gb': expected PROFILE:N");
    parse_fails(ARGS("submit", "--mig", "big:1", "x"), "--mig 'big:1': 'big' is not a MIG profile");
    parse_fails(ARGS("submit", "--mig", "1g.10gb:0", "x"), "--mig '1g.10gb:0': ");
    parse_fails(ARGS("submit", "-G", "1", "--mig", "1g.10gb:1", "x"),
                "--gpus and --mig cannot be combined");
    parse_fails(ARGS("submit", "--cpus", "0", "x"), "--cpus '0': must be more than 0 CPUs");
    /* the value is named once where the reason quotes it */
    parse_fails(ARGS("submit", "-c", "abc", "x"), "--cpus: 'abc' is not a CPU quantity");
    parse_fails(ARGS("submit", "--mem", "4096", "x"), "--mem '4096': less than 1 MiB");
    parse_fails(ARGS("submit", "--mem", "5X", "x"), "--mem: '5X' is not a memory quantity");
    parse_fails(ARGS("submit", "--time", "UNLIMITED", "x"), "--time: 'UNLIMITED': gpuq has no");
    parse_fails(ARGS("submit", "-t", "1:75", "x"), "--time: '1:75': minutes and seconds");
    parse_fails(ARGS("submit", "--backoff-limit", "101", "x"),
                "--backoff-limit '101': not a count");
    parse_fails(ARGS("submit", "--backoff-limit", "-1", "x"), "--backoff-limit '-1'");
    parse_fails(ARGS("submit", "--checkpoint-signal", "KILL", "x"),
                "--checkpoint-signal 'KILL': SIGKILL cannot be caught");
    parse_fails(ARGS("submit", "--checkpoint-signal", "NOPE", "x"),
                "--checkpoint-signal: 'NOPE' is not a signal");
    parse_fails(ARGS("submit", "--grace", "soon", "x"), "--grace 'soon': not a duration");
    parse_fails(ARGS("submit", "--restart-policy", "Always", "x"),
                "--restart-policy 'Always': must be OnFailure or Never");
    parse_fails(ARGS("submit", "-e", "1A=2", "x"), "--env '1A=2': '1A' is not a variable name");
    parse_fails(ARGS("submit", "-e", "A", "x"), "--env 'A': expected K=V");
    parse_fails(ARGS("submit", "-q", "a b", "x"), "--queue: 'a b' may hold only");
    parse_fails(ARGS("submit", "--image", "a b"), "--image: 'a b' is not an image reference");
    parse_fails(ARGS("submit", "--frobnicate", "x"), "unknown option '--frobnicate'");
    parse_fails(ARGS("submit", "-x", "y"), "unknown option '-x'");
    parse_fails(ARGS("submit", "--hold=1", "y"), "option '--hold' takes no value");
    parse_fails(ARGS("submit", "-q"), "option '--queue' needs a value");
    parse_fails(ARGS("submit", "--time"), "option '--time' needs a value");
    parse_fails(ARGS("submit", "-G", "1"), "no command given");
    parse_fails(ARGS("submit", "-J", "ok", ""), "the program must not be empty");
}

static void test_job_file(void **state)
{
    json_t *req = NULL;
    char *path = NULL;
    struct errmsg e = {""};
    assert_int_equal(spec_args_parse(ARGS("submit", "-q", "batch", "--hold", "-J", "n",
                                          "--priority-class", "low", "-f", "job.yaml"),
                                     &req, &path, &e),
                     0);
    assert_string_equal(path, "job.yaml");
    assert_int_equal(json_object_size(req), 4);
    assert_string_equal(str(req, "queue"), "batch");
    assert_string_equal(str(req, "name"), "n");
    assert_string_equal(str(req, "priority_class"), "low");
    assert_true(json_is_true(json_object_get(req, "held")));
    json_decref(req);
    free(path);

    assert_int_equal(spec_args_parse(ARGS("submit", "--file=j.yaml"), &req, &path, &e), 0);
    assert_string_equal(path, "j.yaml");
    assert_int_equal(json_object_size(req), 0);
    json_decref(req);
    free(path);

    parse_fails(ARGS("submit", "-G", "2", "-f", "job.yaml"),
                "--file: --gpus cannot be combined with a Job file");
    parse_fails(ARGS("submit", "-f", "job.yaml", "--image", "x"),
                "--file: --image cannot be combined");
    parse_fails(ARGS("submit", "-f", "job.yaml", "python"), "a Job file holds the command");
}

static void test_help(void **state)
{
    json_t *req = (json_t *)0x1;
    char *path = (char *)"untouched";
    assert_int_equal(spec_args_parse(ARGS("submit", "-G", "1", "--help"), &req, &path, NULL),
                     SPEC_ARGS_HELP);
    assert_ptr_equal(req, (json_t *)0x1);
    /* every long option is in the help */
    static const char *const names[] = {"--queue",         "--name",
                                        "--gpus",          "--mig",
                                        "--cpus",          "--mem",
                                        "--time",          "--image",
                                        "--interactive",   "--priority-class",
                                        "--backoff-limit", "--checkpoint-signal",
                                        "--grace",         "--env",
                                        "--hold",          "--restart-policy",
                                        "--file",          "--active-deadline"};
    for (size_t i = 0; i < ELEMENTSOF(names); i++)
        assert_non_null(strstr(spec_args_usage, names[i]));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_option), cmocka_unit_test(test_command_forms),
        cmocka_unit_test(test_gpus_and_mig), cmocka_unit_test(test_memory_sizes),
        cmocka_unit_test(test_time_formats), cmocka_unit_test(test_errors_name_option_and_value),
        cmocka_unit_test(test_job_file),     cmocka_unit_test(test_help),
    };
    return test_run_cases(tests);
}
