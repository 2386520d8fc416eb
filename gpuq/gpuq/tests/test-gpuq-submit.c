/* Tests for gpuq submit's own parts: which arguments are gpuq's and which the job's, the
 * environment a command job takes along, and the exit status of --wait. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test-main.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq/gpuq/submit.h"
#include "gpuq/spec/spec-args.h"

struct parsed {
    int r;
    struct gpuq_submit_opts o;
    json_t *req;
    char *yaml;
    struct errmsg e;
};

/* Parses the NULL-terminated arguments after "submit". */
static struct parsed parse(const char *first, ...)
{
    char *argv[32] = {"submit"};
    int argc = 1;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 31; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    struct parsed p = {.e = {""}};
    p.r = gpuq_submit_parse(argc, argv, &p.o, &p.req, &p.yaml, &p.e);
    return p;
}

static void parsed_done(struct parsed *p)
{
    json_decref(p->req);
    free(p->yaml);
}

static void assert_command(json_t *req, const char *want_json)
{
    json_t *want = json_loads(want_json, 0, NULL);
    assert_non_null(want);
    assert_true(json_equal(json_object_get(req, "command"), want));
    json_decref(want);
}

static void test_own_options_among_the_jobs(void **state)
{
    struct parsed p = parse("--wait", "-G", "2", "--parsable", "python", "train.py", NULL);
    assert_int_equal(p.r, 0);
    assert_true(p.o.wait);
    assert_true(p.o.parsable);
    assert_false(p.o.json);
    assert_null(p.o.socket);
    assert_null(p.yaml);
    assert_int_equal(json_integer_value(json_object_get(p.req, "gpus")), 2);
    assert_command(p.req, "[\"python\", \"train.py\"]");
    parsed_done(&p);

    p = parse("--socket", "/tmp/q.sock", "--json", "-q", "batch", "--", "echo", "hi", NULL);
    assert_int_equal(p.r, 0);
    assert_true(p.o.json);
    assert_string_equal(p.o.socket, "/tmp/q.sock");
    assert_string_equal(json_string_value(json_object_get(p.req, "queue")), "batch");
    assert_command(p.req, "[\"echo\", \"hi\"]");
    parsed_done(&p);
}

static void test_command_keeps_its_arguments(void **state)
{
    /* After the command's first word, --json and --wait are the command's: a script's own
     * options must reach it, as with sbatch. */
    struct parsed p = parse("--wait", "./run.sh", "--json", "--wait", "--socket", "x", NULL);
    assert_int_equal(p.r, 0);
    assert_true(p.o.wait);
    assert_false(p.o.json);
    assert_null(p.o.socket);
    assert_command(p.req, "[\"./run.sh\", \"--json\", \"--wait\", \"--socket\", \"x\"]");
    parsed_done(&p);

    /* After "--" too, whatever the words are. */
    p = parse("-J", "t", "--", "--json", NULL);
    assert_int_equal(p.r, 0);
    assert_false(p.o.json);
    assert_command(p.req, "[\"--json\"]");
    parsed_done(&p);

    /* A value that looks like a command word does not end the options early. */
    p = parse("-t", "30", "--json", "sleep", "5", NULL);
    assert_int_equal(p.r, 0);
    assert_true(p.o.json);
    assert_command(p.req, "[\"sleep\", \"5\"]");
    parsed_done(&p);
}

static void test_job_file_and_errors(void **state)
{
    struct parsed p = parse("-f", "job.yaml", "--queue", "q", "--hold", "--wait", NULL);
    assert_int_equal(p.r, 0);
    assert_true(p.o.wait);
    assert_string_equal(p.yaml, "job.yaml");
    assert_string_equal(json_string_value(json_object_get(p.req, "queue")), "q");
    assert_true(json_is_true(json_object_get(p.req, "held")));
    parsed_done(&p);

    /* spec-args' message, as a usage error (exit status 2). */
    p = parse("--gpus", "x", "true", NULL);
    assert_int_equal(p.r, -GPUQ_E_USAGE);
    assert_non_null(strstr(p.e.text, "--gpus"));

    p = parse("--wait", NULL);
    assert_int_equal(p.r, -GPUQ_E_USAGE);
    assert_non_null(strstr(p.e.text, "no command"));

    p = parse("--socket", NULL);
    assert_int_equal(p.r, -GPUQ_E_USAGE);

    p = parse("--wait", "--help", NULL);
    assert_int_equal(p.r, SPEC_ARGS_HELP);
}

static void test_environment(void **state)
{
    char *environ_[] = {
        "PATH=/usr/bin",
        "GPUQ_JOB_ID=3",
        "BASH_FUNC_f%%=() {  :\n}",
        "CUDA_VISIBLE_DEVICES=GPU-aaa",
        "HOME=/home/alice",
        "PATH=/second",
        "NOEQUALS",
        "LANG=C.UTF-8",
        NULL,
    };
    json_t *extra =
        json_loads("[\"HOME=/scratch\", \"NEW=1\", \"CUDA_VISIBLE_DEVICES=0\"]", 0, NULL);
    json_t *env = NULL;
    struct errmsg e = {""};
    assert_int_equal(gpuq_submit_env(environ_, extra, &env, &e), 0);
    /* The caller's own job and GPUs stay behind, and names no job spec accepts; -e wins. */
    json_t *want = json_loads("[\"PATH=/usr/bin\", \"HOME=/scratch\", \"LANG=C.UTF-8\","
                              " \"NEW=1\", \"CUDA_VISIBLE_DEVICES=0\"]",
                              0, NULL);
    char *got = json_dumps(env, JSON_COMPACT);
    if (!json_equal(env, want))
        fail_msg("got %s", got);
    free(got);
    json_decref(want);
    json_decref(env);
    json_decref(extra);

    assert_int_equal(gpuq_submit_env(NULL, NULL, &env, &e), 0);
    assert_int_equal(json_array_size(env), 0);
    json_decref(env);
}

static int exit_of(const char *job_json)
{
    json_t *j = json_loads(job_json, 0, NULL);
    assert_non_null(j);
    int r = gpuq_job_exit_status(j);
    json_decref(j);
    return r;
}

static void test_wait_exit_status(void **state)
{
    assert_int_equal(exit_of("{\"state\": \"COMPLETED\", \"exit_code\": 0, \"signal\": null}"), 0);
    assert_int_equal(exit_of("{\"state\": \"FAILED\", \"exit_code\": 3, \"signal\": null}"), 3);
    /* As a shell reports a command a signal ended. */
    assert_int_equal(exit_of("{\"state\": \"TIMEOUT\", \"exit_code\": null, \"signal\": 9}"), 137);
    assert_int_equal(exit_of("{\"state\": \"CANCELLED\", \"exit_code\": null, \"signal\": 15}"),
                     143);
    /* Cancelled while pending: it never ran, and that is no success. */
    assert_int_equal(exit_of("{\"state\": \"CANCELLED\", \"exit_code\": null, \"signal\": null}"),
                     1);
    assert_int_equal(exit_of("{\"state\": \"COMPLETED\"}"), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_own_options_among_the_jobs),
        cmocka_unit_test(test_command_keeps_its_arguments),
        cmocka_unit_test(test_job_file_and_errors),
        cmocka_unit_test(test_environment),
        cmocka_unit_test(test_wait_exit_status),
    };
    return test_run_cases(tests);
}
