/* gpuq/run/run-spec: the launch description gpuqd writes and gpuq-run reads. What a job relies
 * on: every field comes back as written, and a spec gpuq-run does not fully understand is
 * refused rather than run without part of it. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "test-fs.h"

#include "gpuq/run/run-spec.h"
#include "lib/strv.h"

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static char **strv_of(const char *const *v)
{
    char **out = strv_new();
    for (size_t i = 0; v[i]; i++)
        assert_int_equal(strv_push(&out, v[i]), 0);
    return out;
}

/* A full spec: every field set, values that a sloppy encoder would mangle. */
static void full_spec(struct run_spec *s)
{
    static const char *const argv[] = {"python3", "-c", "print(\"a b\\\\c\")", "", NULL};
    static const char *const env[] = {"EPOCHS=3", "EMPTY=", "UNICODE=Grüße ✓", NULL};
    *s = (struct run_spec){
        .job_id = UINT64_C(9007199254740993), /* beyond a double's integers */
        .run = 4,
        .uid = 4294967294u,
        .gid = 0,
        .user = dup_or_null("ann"),
        .home = dup_or_null("/home/ann"),
        .shell = dup_or_null("/bin/bash"),
        .argv = strv_of(argv),
        .env = strv_of(env),
        .cwd = dup_or_null("/data/run dir"),
        .image = dup_or_null("nvcr.io/nvidia/pytorch:24.01-py3"),
        .capsule = dup_or_null("/usr/bin/capsule"),
        .cgroup_parent = dup_or_null("/sys/fs/cgroup/gpuq.slice"),
        .cpu_milli = 1500,
        .mem_bytes = UINT64_C(1) << 40,
        .log_path = dup_or_null("/var/lib/gpuq/jobs/9/run-4.log"),
        .exit_path = dup_or_null("/var/lib/gpuq/jobs/9/run-4.exit"),
        .pid_path = dup_or_null("/var/lib/gpuq/jobs/9/run-4.pid"),
    };
}

/* The smallest spec: a plain job, no optional field. */
static const char minimal[] =
    "{\"job_id\": 1, \"run\": 1, \"uid\": 1000, \"gid\": 1000, \"user\": \"ann\", "
    "\"home\": \"/home/ann\", \"argv\": [\"true\"], \"env\": [], "
    "\"log_path\": \"/l\", \"exit_path\": \"/x\", \"pid_path\": \"/p\"}";

static void assert_strv_equal(char *const *a, char *const *b)
{
    assert_int_equal(strv_length(a), strv_length(b));
    for (size_t i = 0; a[i]; i++)
        assert_string_equal(a[i], b[i]);
}

static void test_round_trip(void **state)
{
    struct run_spec s, back = {0};
    struct errmsg e = {{0}};
    char *text = NULL;
    full_spec(&s);
    assert_int_equal(run_spec_to_json(&s, &text, &e), 0);
    assert_int_equal(run_spec_from_json(text, strlen(text), &back, &e), 0);
    assert_true(back.job_id == s.job_id);
    assert_int_equal(back.run, 4);
    assert_int_equal(back.uid, 4294967294u);
    assert_int_equal(back.gid, 0);
    assert_string_equal(back.user, "ann");
    assert_string_equal(back.home, "/home/ann");
    assert_string_equal(back.shell, "/bin/bash");
    assert_strv_equal(back.argv, s.argv);
    assert_strv_equal(back.env, s.env);
    assert_string_equal(back.cwd, "/data/run dir");
    assert_string_equal(back.image, s.image);
    assert_string_equal(back.capsule, "/usr/bin/capsule");
    assert_string_equal(back.cgroup_parent, "/sys/fs/cgroup/gpuq.slice");
    assert_int_equal(back.cpu_milli, 1500);
    assert_true(back.mem_bytes == UINT64_C(1) << 40);
    assert_string_equal(back.log_path, s.log_path);
    assert_string_equal(back.exit_path, s.exit_path);
    assert_string_equal(back.pid_path, s.pid_path);
    free(text);
    run_spec_done(&back);
    /* A spec without its optional fields comes back without them. */
    assert_int_equal(run_spec_from_json(minimal, strlen(minimal), &back, &e), 0);
    assert_null(back.cwd);
    assert_null(back.image);
    assert_null(back.shell);
    assert_null(back.cgroup_parent);
    assert_int_equal(back.cpu_milli, 0);
    assert_int_equal(strv_length(back.env), 0);
    assert_int_equal(run_spec_to_json(&back, &text, &e), 0);
    run_spec_done(&back);
    assert_int_equal(run_spec_from_json(text, strlen(text), &back, &e), 0);
    assert_null(back.cwd);
    free(text);
    run_spec_done(&back);
    run_spec_done(&s);
    assert_null(s.user); /* done zeroes */
}

static void expect_refused(const char *text, const char *message)
{
    struct run_spec s = {0};
    struct errmsg e = {{0}};
    assert_int_equal(run_spec_from_json(text, strlen(text), &s, &e), -EINVAL);
    if (!strstr(e.text, message))
        fail_msg("'%s': got '%s', want '%s'", text, e.text, message);
    assert_null(s.user); /* nothing written on failure */
}

/* text with its first from replaced by to. */
static char *replaced(const char *text, const char *from, const char *to)
{
    const char *at = strstr(text, from);
    assert_non_null(at);
    char *t = NULL;
    assert_true(asprintf(&t, "%.*s%s%s", (int)(at - text), text, to, at + strlen(from)) > 0);
    return t;
}

/* minimal with its last '}' replaced by tail. */
static char *minimal_with(const char *tail)
{
    char *t = NULL;
    assert_true(asprintf(&t, "%.*s%s", (int)strlen(minimal) - 1, minimal, tail) > 0);
    return t;
}

static void test_refused(void **state)
{
    static const struct {
        const char *tail, *message;
    } cases[] = {
        /* A key this gpuq-run does not know: a newer gpuqd's limit must not be dropped. */
        {", \"gpu_mem\": 5}", "run spec: unknown key \"gpu_mem\""},
        {", \"cwd\": \"data\"}", "\"cwd\": 'data': not an absolute path"},
        {", \"cwd\": \"\"}", "\"cwd\": '': empty"},
        {", \"cwd\": 5}", "\"cwd\": not a string"},
        {", \"image\": \"ubuntu\"}", "\"image\" needs \"capsule\""},
        {", \"image\": \"--privileged\", \"capsule\": \"/c\"}",
         "\"image\": '--privileged': starts"},
        {", \"cpu_milli\": -1}", "\"cpu_milli\": not an integer from 0 to 4294967295"},
        {", \"cpu_milli\": 1.5}", "\"cpu_milli\": not an integer"},
        {", \"mem_bytes\": \"1G\"}", "\"mem_bytes\": not an integer"},
        {", \"cgroup_parent\": \"gpuq.slice\"}",
         "\"cgroup_parent\": 'gpuq.slice': not an absolute"},
        {", \"user\": \"ann\"}", "run spec: line 1:"}, /* a duplicate key */
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        char *t = minimal_with(cases[i].tail);
        expect_refused(t, cases[i].message);
        free(t);
    }
    expect_refused("[]", "run spec: not a JSON object");
    expect_refused("{\"job_id\": 1", "run spec: line 1:");
    expect_refused("{\"job_id\": 1}", "run spec: \"run\" is missing");
    expect_refused("{\"job_id\": 1, \"run\": 1, \"uid\": 4294967295, \"gid\": 1}",
                   "\"uid\": not an integer from 0 to 4294967294");
    static const struct {
        const char *from, *to, *message;
    } edits[] = {
        /* No command and no image: nothing to run. */
        {"[\"true\"]", "[]", "\"argv\" is empty and there is no image"},
        {"[\"true\"]", "[\"a\", 1]", "\"argv\" entry 1: not a string"},
        {"\"env\": []", "\"env\": [\"NOEQUALS\"]", "\"env\" entry 0 'NOEQUALS': not K=V"},
        {"\"env\": []", "\"env\": [\"=x\"]", "\"env\" entry 0 '=x': not K=V"},
        {"\"env\": []", "\"env\": {}", "\"env\": not an array"},
        /* A required field null is missing. */
        {"\"/l\"", "null", "\"log_path\" is missing"},
        {"\"job_id\": 1", "\"job_id\": null", "\"job_id\" is missing (null)"},
    };
    for (size_t i = 0; i < ELEMENTSOF(edits); i++) {
        char *t = replaced(minimal, edits[i].from, edits[i].to);
        expect_refused(t, edits[i].message);
        free(t);
    }
}

static void test_to_json_refuses_what_from_json_would(void **state)
{
    struct run_spec s;
    struct errmsg e = {{0}};
    char *text = NULL;
    full_spec(&s);
    free(s.log_path);
    s.log_path = strdup("run.log");
    assert_int_equal(run_spec_to_json(&s, &text, &e), -EINVAL);
    assert_non_null(strstr(e.text, "\"log_path\": 'run.log': not an absolute path"));
    assert_null(text);
    run_spec_done(&s);
}

static void test_write_and_read_file(void **state)
{
    char dir[] = "/tmp/gpuq-run-spec-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/spec.json", dir);
    struct run_spec s, back = {0};
    struct errmsg e = {{0}};
    full_spec(&s);
    assert_int_equal(run_spec_write(path, &s, &e), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    assert_int_equal(run_spec_read(path, &back, &e), 0);
    assert_string_equal(back.cwd, s.cwd);
    run_spec_done(&back);
    /* A spec others may write is not acted on. */
    assert_int_equal(chmod(path, 0622), 0);
    assert_int_equal(run_spec_read(path, &back, &e), -EPERM);
    assert_non_null(strstr(e.text, "that no one else may write is trusted"));
    /* Nor one reached through a symbolic link. */
    char link[80];
    snprintf(link, sizeof(link), "%s/link.json", dir);
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(symlink(path, link), 0);
    assert_int_equal(run_spec_read(link, &back, &e), -ELOOP);
    /* A parse error names the file. */
    write_file(path, "{");
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(run_spec_read(path, &back, &e), -EINVAL);
    assert_non_null(strstr(e.text, path));
    unlink(link);
    unlink(path);
    rmdir(dir);
    run_spec_done(&s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_to_json_refuses_what_from_json_would),
        cmocka_unit_test(test_write_and_read_file),
    };
    return test_run_cases(tests);
}
