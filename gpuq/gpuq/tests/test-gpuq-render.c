/* Tests for render.c: what `gpuq ls`, `gpuq show` and `gpuq queues` print for gpuqd's replies.
 * The local time zone is UTC here, and "now" is 2026-12-02 20:00:00. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test-main.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpuq/gpuq/render.h"

#define NOW 1796241600.0 /* 2026-12-02 20:00:00 UTC */

static json_t *load(const char *text)
{
    json_error_t err;
    json_t *j = json_loads(text, 0, &err);
    if (!j)
        fail_msg("bad test JSON: %s (line %d)", err.text, err.line);
    return j;
}

/* Output of a render function, captured; the caller frees it. */
#define CAPTURE(call)                                                                              \
    ({                                                                                             \
        char *_buf = NULL;                                                                         \
        size_t _len = 0;                                                                           \
        FILE *f = open_memstream(&_buf, &_len);                                                    \
        assert_non_null(f);                                                                        \
        call;                                                                                      \
        fclose(f);                                                                                 \
        _buf;                                                                                      \
    })

static void test_duration(void **state)
{
    char b[32];
    assert_string_equal(render_duration(0, b, sizeof(b)), "0s");
    assert_string_equal(render_duration(59.9, b, sizeof(b)), "59s");
    assert_string_equal(render_duration(60, b, sizeof(b)), "1m00s");
    assert_string_equal(render_duration(723, b, sizeof(b)), "12m03s");
    assert_string_equal(render_duration(3720, b, sizeof(b)), "1h02m");
    assert_string_equal(render_duration(86399, b, sizeof(b)), "23h59m");
    assert_string_equal(render_duration(86400 + 4 * 3600 + 59, b, sizeof(b)), "1d04h");
    assert_string_equal(render_duration(400 * 86400.0, b, sizeof(b)), "400d00h");
    /* A clock that went back a little must not print a negative wait. */
    assert_string_equal(render_duration(-5, b, sizeof(b)), "0s");
    assert_string_equal(render_duration(NAN, b, sizeof(b)), "-");
    assert_string_equal(render_duration(INFINITY, b, sizeof(b)), "-");
}

static void test_time_and_start(void **state)
{
    char b[64];
    assert_string_equal(render_time(NOW + 3600, 0, b, sizeof(b)), "2026-12-02 21:00");
    assert_string_equal(render_time(NOW + 5, 1, b, sizeof(b)), "2026-12-02 20:00:05");
    assert_string_equal(render_time(0, 0, b, sizeof(b)), "-");
    assert_string_equal(render_time(NAN, 1, b, sizeof(b)), "-");

    json_t *t = json_real(NOW - 10);
    assert_string_equal(render_start(t, NOW, b, sizeof(b)), "now");
    json_real_set(t, NOW + 20);
    assert_string_equal(render_start(t, NOW, b, sizeof(b)), "in 1m");
    json_real_set(t, NOW + 300);
    assert_string_equal(render_start(t, NOW, b, sizeof(b)), "in 5m");
    json_real_set(t, NOW + 2 * 3600 + 600);
    assert_string_equal(render_start(t, NOW, b, sizeof(b)), "in 2h10m");
    json_real_set(t, NOW + 7 * 3600);
    assert_string_equal(render_start(t, NOW, b, sizeof(b)), "2026-12-03 03:00");
    json_decref(t);
    assert_string_equal(render_start(json_null(), NOW, b, sizeof(b)), "unknown");
    assert_string_equal(render_start(NULL, NOW, b, sizeof(b)), "unknown");
    json_t *s = json_string("soon");
    assert_string_equal(render_start(s, NOW, b, sizeof(b)), "?");
    json_decref(s);
}

static void check_gpus(const char *json, const char *want)
{
    char b[64];
    json_t *g = load(json);
    assert_string_equal(render_gpus(g, b, sizeof(b)), want);
    json_decref(g);
}

static void test_gpus(void **state)
{
    check_gpus("{\"kind\": \"whole\", \"count\": 2, \"model\": \"\", \"profile\": \"\"}", "2");
    check_gpus("{\"kind\": \"whole\", \"count\": 2, \"model\": \"H100\"}", "H100:2");
    check_gpus("{\"kind\": \"mig\", \"count\": 1, \"profile\": \"1g.10gb\"}", "mig-1g.10gb:1");
    check_gpus("{\"kind\": \"none\", \"count\": 0}", "0");
    check_gpus("{\"kind\": \"whole\"}", "?");
    check_gpus("{\"kind\": \"tpu\", \"count\": 1}", "?");
}

static void test_amounts_and_quota(void **state)
{
    char b[128];
    json_t *v = json_integer(2500);
    assert_string_equal(render_amount("cpus", v, b, sizeof(b)), "2.5");
    json_integer_set(v, 16000);
    assert_string_equal(render_amount("cpus", v, b, sizeof(b)), "16");
    json_integer_set(v, 64LL << 30);
    assert_string_equal(render_amount("memory", v, b, sizeof(b)), "64G");
    json_integer_set(v, 3LL << 39);
    assert_string_equal(render_amount("memory", v, b, sizeof(b)), "1.5T");
    json_integer_set(v, 512);
    assert_string_equal(render_amount("memory", v, b, sizeof(b)), "512B");
    json_integer_set(v, 4);
    assert_string_equal(render_amount("gpus.H100", v, b, sizeof(b)), "4");
    json_decref(v);

    json_t *q = load("{\"quota\": {\"gpus\": 8, \"memory\": 549755813888, \"cpus\": 32000},"
                     " \"used\": {\"gpus\": 4, \"memory\": 107374182400},"
                     " \"borrowed\": {\"gpus\": 2, \"cpus\": 0}}");
    /* A key that nothing uses counts 0; gpuqd's order is kept. */
    assert_string_equal(render_quota(q, b, sizeof(b)), "gpus 4/8, memory 100G/512G, cpus 0/32");
    assert_string_equal(render_borrowed(q, b, sizeof(b)), "gpus 2");
    /* Cut, not overrun, when the cell is small. */
    char small[16];
    assert_string_equal(render_quota(q, small, sizeof(small)), "gpus 4/8, me\xE2\x80\xA6");
    json_decref(q);
    q = load("{\"quota\": {}, \"used\": {\"gpus\": 3}, \"borrowed\": {}}");
    assert_string_equal(render_quota(q, b, sizeof(b)), "unlimited");
    assert_string_equal(render_borrowed(q, b, sizeof(b)), "-");
    json_decref(q);
}

static void test_command_quoting(void **state)
{
    char b[256];
    json_t *a = load("[\"python\", \"train.py\", \"--lr=0.1\", \"a b\", \"it's\", \"\"]");
    assert_string_equal(render_command(a, b, sizeof(b)),
                        "python train.py --lr=0.1 'a b' 'it'\\''s' ''");
    json_decref(a);
    a = load("[\"sh\", \"-c\", \"echo $HOME; rm *\"]");
    assert_string_equal(render_command(a, b, sizeof(b)), "sh -c 'echo $HOME; rm *'");
    json_decref(a);
    /* Cut to the buffer, never inside a character: "'é" and the ellipsis, 6 bytes of 8. */
    a = load("[\"\u00e9\u00e9\u00e9\u00e9\u00e9\"]");
    char small[8];
    assert_string_equal(render_command(a, small, sizeof(small)), "'\xC3\xA9\xE2\x80\xA6");
    json_decref(a);
}

static const char jobs_doc[] =
    "{\"jobs\": ["
    "{\"id\": 12, \"queue\": \"batch\", \"name\": \"train-resnet\", \"user\": \"alice\","
    " \"state\": \"RUNNING\", \"reason\": \"\", \"borrowing\": true,"
    " \"gpus\": {\"kind\": \"whole\", \"count\": 2, \"model\": \"H100\", \"profile\": \"\"},"
    " \"submit_time\": 1796237000.5, \"start_time\": 1796237880.0},"
    "{\"id\": 13, \"queue\": \"batch\", \"name\": \"a-very-long-job-name-that-goes-on-and-on\","
    " \"user\": \"bob\", \"state\": \"PENDING\", \"reason\": \"Resources\", \"borrowing\": false,"
    " \"gpus\": {\"kind\": \"mig\", \"count\": 1, \"model\": \"\", \"profile\": \"1g.10gb\"},"
    " \"submit_time\": 1796241300.0, \"start_time\": null, \"position\": 1,"
    " \"estimated_start\": 1796241900.0},"
    "{\"id\": 14, \"queue\": \"interactive\", \"name\": \"x\\u001b[2J\", \"user\": \"carol\","
    " \"state\": \"PENDING\", \"reason\": \"JobHeldUser\","
    " \"gpus\": {\"kind\": \"none\", \"count\": 0}, \"submit_time\": 1796241555.0,"
    " \"position\": 2, \"estimated_start\": null},"
    "{\"id\": 9, \"queue\": \"batch\", \"name\": \"\", \"user\": \"alice\","
    " \"state\": \"COMPLETED\", \"reason\": \"\","
    " \"gpus\": {\"kind\": \"whole\", \"count\": 1, \"model\": \"\"},"
    " \"submit_time\": 1796230000.0, \"start_time\": 1796234400.0, \"end_time\": 1796238000.0}"
    "]}";

static void test_jobs_table(void **state)
{
    json_t *doc = load(jobs_doc);
    size_t n = 0;
    char *out = CAPTURE(n = render_jobs(f, doc, NOW));
    assert_int_equal(n, 4);
    /* Widths fit the longest cell; the name is cut to 24 columns with an ellipsis (one column,
     * three bytes); an escape sequence in a name is defused; numbers align right; the last
     * column has no trailing blanks. */
    assert_string_equal(out,
                        "ID  QUEUE        NAME                      USER   STATE      GPUS         "
                        "   TIME  POS  START    REASON\n"
                        "12  batch        train-resnet              alice  RUNNING    H100:2       "
                        "  1h02m    -  -        Borrowing\n"
                        "13  batch        a-very-long-job-name-th\xE2\x80\xA6  bob    PENDING    "
                        "mig-1g.10gb:1  5m00s    1  in 5m    Resources\n"
                        "14  interactive  x?[2J                     carol  PENDING    0            "
                        "    45s    2  unknown  JobHeldUser\n"
                        " 9  batch        -                         alice  COMPLETED  1            "
                        "  1h00m    -  -        -\n");
    free(out);
    json_decref(doc);

    /* No jobs: the header alone. A reply without "jobs" is an empty list, not a crash. */
    doc = load("{\"jobs\": []}");
    out = CAPTURE(n = render_jobs(f, doc, NOW));
    assert_int_equal(n, 0);
    assert_string_equal(out, "ID  QUEUE  NAME  USER  STATE  GPUS  TIME  POS  START  REASON\n");
    free(out);
    json_decref(doc);
    doc = load("{}");
    out = CAPTURE(n = render_jobs(f, doc, NOW));
    assert_int_equal(n, 0);
    free(out);
    json_decref(doc);
}

static void test_queues_table(void **state)
{
    json_t *doc = load(
        "{\"queues\": ["
        "{\"name\": \"batch\", \"priority\": 10, \"class\": \"burstable\","
        " \"quota\": {\"gpus\": 4}, \"used\": {\"gpus\": 6}, \"borrowed\": {\"gpus\": 2},"
        " \"window\": \"nights\", \"next_change\": 1796284800.0, \"pending\": 3, \"running\": 4},"
        "{\"name\": \"interactive\", \"priority\": 100, \"class\": \"guaranteed\","
        " \"quota\": {\"gpus\": 2, \"jobs\": 4}, \"used\": {}, \"borrowed\": {},"
        " \"window\": null, \"next_change\": null, \"pending\": 0, \"running\": 0}],"
        " \"drained\": true, \"gpus_total\": 8, \"gpus_allocated\": 6}");
    char *out = CAPTURE(render_queues(f, doc));
    assert_string_equal(out,
                        "node: 6/8 GPUs allocated, DRAINED: nothing starts until `gpuq resume`\n"
                        "\n"
                        "QUEUE        CLASS       PRIO  QUOTA               BORROWED  WINDOW  "
                        "NEXT CHANGE       PENDING  RUNNING\n"
                        "batch        burstable     10  gpus 6/4            gpus 2    nights  "
                        "2026-12-03 08:00        3        4\n"
                        "interactive  guaranteed   100  gpus 0/2, jobs 0/4  -         -       "
                        "-                       0        0\n");
    free(out);
    json_decref(doc);
}

static void test_show(void **state)
{
    json_t *doc = load(
        "{\"job\": {\"id\": 12, \"name\": \"train\", \"user\": \"alice\", \"uid\": 1000,"
        " \"queue\": \"batch\", \"state\": \"RUNNING\", \"reason\": \"\", \"held\": false,"
        " \"gpus\": {\"kind\": \"whole\", \"count\": 2, \"model\": \"H100\"},"
        " \"allocated\": [\"GPU-aaa\", \"GPU-bbb\"], \"cpu_milli\": 0, \"mem_bytes\": 68719476736,"
        " \"time_limit\": 7200, \"submit_time\": 1796237000.0, \"start_time\": 1796237880.0,"
        " \"end_time\": null, \"exit_code\": null, \"signal\": 9, \"grace\": 30,"
        " \"command\": [\"python\", \"train.py\", \"--out\", \"a b\"],"
        " \"env\": [\"A=1\", \"B=2\", \"SECRET=x\"], \"future_field\": {\"x\": 1}},"
        " \"events\": [{\"time\": 1796237000.0, \"text\": \"submitted\"},"
        " {\"time\": 1796237880.0, \"text\": \"started on GPU-aaa,GPU-bbb\\u001b]0;\"}]}");
    char *out = CAPTURE(render_job(f, doc, NOW));
    assert_string_equal(out, "id:                12\n"
                             "name:              train\n"
                             "user:              alice\n"
                             "uid:               1000\n"
                             "queue:             batch\n"
                             "state:             RUNNING\n"
                             "reason:            -\n"
                             "held:              no\n"
                             "gpus:              H100:2\n"
                             "allocated:         GPU-aaa,GPU-bbb\n"
                             "cpu_milli:         unlimited\n"
                             "mem_bytes:         64G\n"
                             "time_limit:        2h00m\n"
                             "submit_time:       2026-12-02 18:43:20 (1h16m ago)\n"
                             "start_time:        2026-12-02 18:58:00 (1h02m ago)\n"
                             "end_time:          -\n"
                             "exit_code:         -\n"
                             "signal:            9 (SIGKILL)\n"
                             "grace:             30s\n"
                             "command:           python train.py --out 'a b'\n"
                             "env:               3 variables (gpuq show --json lists them)\n"
                             "future_field:      {\"x\":1}\n"
                             "events:\n"
                             "  2026-12-02 18:43:20  submitted\n"
                             "  2026-12-02 18:58:00  started on GPU-aaa,GPU-bbb?]0;\n");
    free(out);
    json_decref(doc);
}

static void test_json(void **state)
{
    json_t *doc = load("{\"b\": 1, \"a\": [true]}");
    char *out = CAPTURE(render_json(f, doc));
    /* gpuqd's key order, two-space indent, a final newline. */
    assert_string_equal(out, "{\n  \"b\": 1,\n  \"a\": [\n    true\n  ]\n}\n");
    free(out);
    json_decref(doc);
}

int main(void)
{
    setenv("TZ", "UTC", 1);
    tzset();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_duration),
        cmocka_unit_test(test_time_and_start),
        cmocka_unit_test(test_gpus),
        cmocka_unit_test(test_amounts_and_quota),
        cmocka_unit_test(test_command_quoting),
        cmocka_unit_test(test_jobs_table),
        cmocka_unit_test(test_queues_table),
        cmocka_unit_test(test_show),
        cmocka_unit_test(test_json),
    };
    return test_run_cases(tests);
}
