/* gpuq end to end, in-process, against a fake gpuqd on a Unix socket in a temp dir: what reaches
 * the daemon, what is printed, and the exit statuses scripts rely on. The real daemon is the
 * system tests' (gpuq/tests/system/). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test-main.h"
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gpuq/gpuq/cli.h"
#include "lib/http-server.h"

struct fake {
    char dir[64];
    char socket[128];
    struct http_server *srv;
    pthread_mutex_t lock;
    unsigned requests;
    char method[8];
    char path[128];
    char query[256]; /* the arguments gpuq sends, as "all=1 user=alice ..." */
    json_t *body;
    unsigned job_polls, log_polls;
};

static void record(struct fake *f, const struct http_request *req)
{
    static const char *const args[] = {"all", "user", "state", "queue", "offset"};
    f->requests++;
    snprintf(f->method, sizeof(f->method), "%s", req->method);
    snprintf(f->path, sizeof(f->path), "%s", req->path);
    f->query[0] = '\0';
    for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++) {
        const char *v = http_request_query(req, args[i]);
        if (v)
            snprintf(f->query + strlen(f->query), sizeof(f->query) - strlen(f->query), "%s%s=%s",
                     f->query[0] ? " " : "", args[i], v);
    }
    json_decref(f->body);
    f->body = req->body_len ? json_loadb(req->body, req->body_len, 0, NULL) : NULL;
}

/* The log of job 3 arrives in two pieces, with a poll between that finds nothing new; the job
 * has ended when the second piece is there. */
static json_t *log_piece(struct fake *f, const char *offset)
{
    f->log_polls++;
    if (strcmp(offset, "0") == 0)
        return json_pack("{s:s, s:i, s:b, s:s}", "data", "hello ", "offset", 6, "eof", 1, "state",
                         "RUNNING");
    if (strcmp(offset, "6") == 0 && f->log_polls < 3)
        return json_pack("{s:s, s:i, s:b, s:s}", "data", "", "offset", 6, "eof", 1, "state",
                         "RUNNING");
    if (strcmp(offset, "6") == 0)
        return json_pack("{s:s, s:i, s:b, s:s}", "data", "world\n", "offset", 12, "eof", 1, "state",
                         "COMPLETED");
    return json_pack("{s:s, s:i, s:b, s:s}", "data", "", "offset", 12, "eof", 1, "state",
                     "COMPLETED");
}

static void route(struct fake *f, const struct http_request *req, struct http_reply *reply)
{
    const char *p = req->path;
    bool post = strcmp(req->method, "POST") == 0;
    if (post && strcmp(p, "/v1/jobs") == 0) {
        if (json_integer_value(json_object_get(f->body, "gpus")) == 9)
            return http_reply_error(reply, 422, "asks for 9 GPUs; this node has 8 whole GPUs");
        return http_reply_json(reply, 201,
                               json_pack("{s:i, s:{s:i, s:s, s:s}}", "id", 7, "job", "id", 7,
                                         "queue", "batch", "state", "PENDING"));
    }
    if (!post && strcmp(p, "/v1/jobs/7") == 0) {
        bool done = ++f->job_polls >= 2;
        return http_reply_json(reply, 200,
                               json_pack("{s:{s:i, s:s, s:o}, s:[]}", "job", "id", 7, "state",
                                         done ? "FAILED" : "RUNNING", "exit_code",
                                         done ? json_integer(3) : json_null(), "events"));
    }
    if (!post && strcmp(p, "/v1/jobs") == 0)
        return http_reply_json(reply, 200, json_pack("{s:[]}", "jobs"));
    if (post && strcmp(p, "/v1/jobs/1/cancel") == 0)
        return http_reply_json(reply, 200,
                               json_pack("{s:{s:i, s:s}}", "job", "id", 1, "state", "CANCELLED"));
    if (post && strcmp(p, "/v1/jobs/2/cancel") == 0)
        return http_reply_error(reply, 403, "job 2 is not yours");
    if (post && strcmp(p, "/v1/jobs/3/cancel") == 0)
        return http_reply_json(
            reply, 200,
            json_pack("{s:{s:i, s:s, s:f}}", "job", "id", 3, "state", "STOPPING", "grace", 30.0));
    if (post && strcmp(p, "/v1/checkpoint") == 0)
        return http_reply_json(reply, 200, json_pack("{s:{s:i}}", "job", "id", 5));
    if (!post && strcmp(p, "/v1/jobs/3/log") == 0)
        return http_reply_json(reply, 200, log_piece(f, http_request_query(req, "offset")));
    if (post && strcmp(p, "/v1/drain") == 0)
        return http_reply_json(
            reply, 200, json_pack("{s:b, s:i, s:i}", "drained", 1, "running", 1, "stopped", 3));
    if (!post && strcmp(p, "/v1/queues") == 0)
        return http_reply_json(reply, 200,
                               json_pack("{s:[], s:b, s:i, s:i}", "queues", "drained", 0,
                                         "gpus_total", 8, "gpus_allocated", 2));
    http_reply_error(reply, 404, "no such job 99");
}

static void handler(const struct http_request *req, struct http_reply *reply, void *userdata)
{
    struct fake *f = userdata;
    pthread_mutex_lock(&f->lock);
    record(f, req);
    route(f, req, reply);
    pthread_mutex_unlock(&f->lock);
}

static int setup(void **state)
{
    struct fake *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/test-gpuq-cli-XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    snprintf(f->socket, sizeof(f->socket), "%s/gpuq.sock", f->dir);
    pthread_mutex_init(&f->lock, NULL);
    struct errmsg e = {""};
    assert_int_equal(http_server_new_unix(f->socket, 0600, handler, f, &f->srv, &e), 0);
    unsetenv("GPUQ_SOCKET");
    unsetenv("GPUQ_JOB_ID");
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    struct fake *f = *state;
    http_server_free(f->srv);
    json_decref(f->body);
    rmdir(f->dir);
    free(f);
    return 0;
}

struct result {
    int code;
    char *out;
    char *err;
};

static void result_done(struct result *r)
{
    free(r->out);
    free(r->err);
}

/* Runs gpuq with the NULL-terminated arguments (no --socket added). */
static struct result run_args(const char *first, ...)
{
    char *argv[32] = {"gpuq"};
    int argc = 1;
    va_list ap;
    va_start(ap, first);
    for (const char *a = first; a && argc < 31; a = va_arg(ap, const char *))
        argv[argc++] = (char *)a;
    va_end(ap);
    argv[argc] = NULL;
    struct result r = {0};
    size_t olen, elen;
    FILE *out = open_memstream(&r.out, &olen), *err = open_memstream(&r.err, &elen);
    assert_non_null(out);
    assert_non_null(err);
    r.code = gpuq_cli_run(argc, argv, out, err);
    fclose(out);
    fclose(err);
    return r;
}

#define RUN(f, ...) run_args("--socket", (f)->socket, __VA_ARGS__, NULL)

/* The env array of the last request has an assignment of name, and its value. */
static const char *env_of(struct fake *f, const char *name)
{
    size_t i, n = strlen(name);
    json_t *v;
    json_array_foreach(json_object_get(f->body, "env"), i, v)
    {
        const char *s = json_string_value(v);
        if (strncmp(s, name, n) == 0 && s[n] == '=')
            return s + n + 1;
    }
    return NULL;
}

static void test_submit_sends_the_callers_world(void **state)
{
    struct fake *f = *state;
    setenv("GPUQ_TEST_VAR", "a b", 1);
    setenv("GPUQ_JOB_ID", "99", 1); /* submitted from inside job 99 */
    struct result r = RUN(f, "submit", "-G", "1", "-e", "EXTRA=1", "python", "train.py", "--json");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "Submitted job 7 to queue batch\n");
    assert_string_equal(r.err, "");
    assert_string_equal(f->method, "POST");
    assert_string_equal(f->path, "/v1/jobs");
    char cwd[4096];
    assert_non_null(getcwd(cwd, sizeof(cwd)));
    assert_string_equal(json_string_value(json_object_get(f->body, "cwd")), cwd);
    assert_string_equal(env_of(f, "GPUQ_TEST_VAR"), "a b");
    assert_string_equal(env_of(f, "EXTRA"), "1");
    assert_null(env_of(f, "GPUQ_JOB_ID"));
    json_t *cmd = json_object_get(f->body, "command");
    assert_int_equal(json_array_size(cmd), 3);
    assert_string_equal(json_string_value(json_array_get(cmd, 2)), "--json");
    result_done(&r);

    r = RUN(f, "submit", "--parsable", "true");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "7\n");
    result_done(&r);
}

static void test_submit_wait_and_refusal(void **state)
{
    struct fake *f = *state;
    struct result r = RUN(f, "submit", "--wait", "false");
    /* The job's exit status, after it was polled until it ended. */
    assert_int_equal(r.code, 3);
    assert_string_equal(r.out,
                        "Submitted job 7 to queue batch\nJob 7 ended: FAILED, exit status 3\n");
    assert_int_equal(f->job_polls, 2);
    result_done(&r);

    unsigned before = f->requests;
    r = RUN(f, "submit", "-G", "9", "true");
    assert_int_equal(r.code, 1);
    assert_string_equal(r.out, "");
    assert_string_equal(r.err, "gpuq: asks for 9 GPUs; this node has 8 whole GPUs\n");
    assert_int_equal(f->requests, before + 1);
    result_done(&r);

    /* A request over what gpuqd reads: the message says the environment is what is large. */
    char *big = malloc(100 * 1024);
    assert_non_null(big);
    memset(big, 'x', 100 * 1024 - 1);
    big[100 * 1024 - 1] = '\0';
    setenv("GPUQ_TEST_BIG", big, 1);
    free(big);
    r = RUN(f, "submit", "true");
    unsetenv("GPUQ_TEST_BIG");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "gpuq: the job is too large for gpuqd"));
    assert_non_null(strstr(r.err, "KiB of them the environment"));
    result_done(&r);
    before = f->requests;

    /* A bad option is found before anything is sent. */
    r = RUN(f, "submit", "--gpus", "lots", "true");
    assert_int_equal(r.code, 2);
    assert_int_equal(f->requests, before);
    assert_non_null(strstr(r.err, "--gpus"));
    result_done(&r);
}

static void test_ls_filters(void **state)
{
    struct fake *f = *state;
    struct result r =
        RUN(f, "ls", "-a", "-u", "alice smith", "-t", "pending,running", "--queue", "batch");
    assert_int_equal(r.code, 0);
    assert_string_equal(f->path, "/v1/jobs");
    assert_string_equal(f->query, "all=1 user=alice smith state=PENDING,RUNNING queue=batch");
    assert_non_null(strstr(r.out, "ID  QUEUE"));
    result_done(&r);

    r = RUN(f, "ls", "extra");
    assert_int_equal(r.code, 2);
    assert_string_equal(r.err, "gpuq: ls: unexpected argument 'extra'\n");
    result_done(&r);
}

static void test_cancel_reports_each_id(void **state)
{
    struct fake *f = *state;
    struct result r = RUN(f, "cancel", "1", "2", "3");
    assert_int_equal(r.code, 1);
    assert_string_equal(r.out,
                        "Cancelled job 1\nCancelling job 3: SIGTERM sent, SIGKILL after 30s\n");
    assert_string_equal(r.err, "gpuq: job 2: job 2 is not yours\n");
    result_done(&r);

    /* Every id is checked before any is cancelled. */
    unsigned before = f->requests;
    r = RUN(f, "cancel", "1", "x2");
    assert_int_equal(r.code, 2);
    assert_string_equal(r.err, "gpuq: cancel: 'x2' is not a job id\n");
    assert_int_equal(f->requests, before);
    result_done(&r);
}

static void test_checkpoint_from_inside_a_job(void **state)
{
    struct fake *f = *state;
    setenv("GPUQ_JOB_ID", "5", 1);
    struct result r = RUN(f, "checkpoint");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "Checkpoint recorded for job 5\n");
    assert_string_equal(f->path, "/v1/checkpoint");
    assert_int_equal(json_integer_value(json_object_get(f->body, "id")), 5);
    result_done(&r);

    setenv("GPUQ_JOB_ID", "5x", 1);
    r = RUN(f, "checkpoint");
    assert_int_equal(r.code, 1);
    assert_string_equal(r.err, "gpuq: checkpoint: $GPUQ_JOB_ID is '5x', not a job id\n");
    result_done(&r);
    unsetenv("GPUQ_JOB_ID");
}

static void test_logs(void **state)
{
    struct fake *f = *state;
    struct result r = RUN(f, "logs", "3");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "hello ");
    result_done(&r);

    /* -f follows until the job has ended and everything is out. */
    f->log_polls = 0;
    r = RUN(f, "logs", "-f", "3");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "hello world\n");
    assert_true(f->log_polls >= 3);
    result_done(&r);
}

static void test_drain_and_queues(void **state)
{
    struct fake *f = *state;
    struct result r = RUN(f, "drain", "--wait", "5", "--grace-max", "1m");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "Node drained: 3 jobs preempted and requeued, 1 still stopping. "
                               "Nothing starts until `gpuq resume`.\n");
    json_t *want = json_pack("{s:f, s:f}", "wait", 5.0, "grace_max", 60.0);
    assert_true(json_equal(f->body, want));
    json_decref(want);
    result_done(&r);

    r = RUN(f, "drain", "--wait", "soon");
    assert_int_equal(r.code, 2);
    result_done(&r);

    r = RUN(f, "queues", "--json");
    assert_int_equal(r.code, 0);
    json_t *doc = json_loads(r.out, 0, NULL);
    assert_non_null(doc);
    assert_int_equal(json_integer_value(json_object_get(doc, "gpus_total")), 8);
    json_decref(doc);
    result_done(&r);
}

static void test_errors_and_usage(void **state)
{
    struct fake *f = *state;
    struct result r = RUN(f, "show", "99");
    assert_int_equal(r.code, 1);
    assert_string_equal(r.err, "gpuq: no such job 99\n");
    result_done(&r);

    r = RUN(f, "show", "abc");
    assert_int_equal(r.code, 2);
    assert_string_equal(r.err, "gpuq: show: 'abc' is not a job id\n");
    result_done(&r);

    r = run_args(NULL);
    assert_int_equal(r.code, 2);
    assert_string_equal(r.err, "gpuq: no command given (see gpuq --help)\n");
    result_done(&r);

    r = run_args("frobnicate", NULL);
    assert_int_equal(r.code, 2);
    result_done(&r);

    r = run_args("version", NULL);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "gpuq " GPUNODE_VERSION "\n");
    result_done(&r);

    r = run_args("ls", "--help", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "Usage: gpuq ls"));
    result_done(&r);

    r = run_args("submit", "--help", NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "--gpus"));
    assert_non_null(strstr(r.out, "--wait"));
    result_done(&r);
}

static void test_unreachable(void **state)
{
    struct fake *f = *state;
    char path[192];
    snprintf(path, sizeof(path), "%s/missing.sock", f->dir);
    setenv("GPUQ_SOCKET", path, 1);
    struct result r = run_args("ls", NULL);
    assert_int_equal(r.code, 1);
    char want[512];
    snprintf(want, sizeof(want),
             "gpuq: cannot reach gpuqd at %s: No such file or directory (is gpuqd running?)\n",
             path);
    assert_string_equal(r.err, want);
    result_done(&r);
    /* --socket wins over the variable, also after the command. */
    r = run_args("queues", "--socket", f->socket, NULL);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "node: 2/8 GPUs allocated"));
    result_done(&r);
    unsetenv("GPUQ_SOCKET");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_submit_sends_the_callers_world, setup, teardown),
        cmocka_unit_test_setup_teardown(test_submit_wait_and_refusal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ls_filters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_reports_each_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_checkpoint_from_inside_a_job, setup, teardown),
        cmocka_unit_test_setup_teardown(test_logs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_drain_and_queues, setup, teardown),
        cmocka_unit_test_setup_teardown(test_errors_and_usage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unreachable, setup, teardown),
    };
    return test_run_cases(tests);
}
