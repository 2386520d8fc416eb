/* lib/audit: one JSON line a record, appended; refused attempts limited to 10 a second with the
 * count of those left out carried by the next one recorded. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "lib/audit.h"
#include "lib/fileio.h"
#include "lib/macro.h"

/* The log's lines as JSON objects (a new array reference). */
static json_t *read_log(const char *path)
{
    FILE *f = fopen(path, "re");
    assert_non_null(f);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(fd_read_all(fileno(f), 1 << 20, &text, &len), 0);
    fclose(f);
    json_t *all = json_array();
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        json_t *rec = json_loads(line, 0, NULL);
        assert_non_null(rec);
        json_array_append_new(all, rec);
    }
    free(text);
    return all;
}

static void test_records(void **state)
{
    char path[] = "/tmp/test-audit.XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    unlink(path); /* audit_open creates it, 0640 */
    struct audit *a = NULL;
    struct errmsg e = {{0}};
    assert_int_equal(audit_open(path, &a, &e), 0);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0640);
    json_t *body = json_pack("{s:i}", "limit.warning", 42);
    assert_int_equal(audit_record(a, 0, 0, 1234, "PUT", "/v1/settings", body, 200, "applied"), 0);
    json_decref(body);
    /* A burst of refusals: ten recorded, the rest counted and named by the next record (once the
     * second has turned, when the limit opens again). */
    time_t start = time(NULL);
    for (int i = 0; i < 25; i++)
        assert_int_equal(audit_record(a, 4242, 4242, 99, "POST", "/v1/drill", NULL, 403, "denied"),
                         0);
    while (time(NULL) == start)
        usleep(10000);
    assert_int_equal(audit_record(a, 4242, 4242, 99, "POST", "/v1/drill", NULL, 403, "denied"), 0);
    audit_close(a);

    json_t *log = read_log(path);
    unlink(path);
    json_t *first = json_array_get(log, 0);
    assert_string_equal(json_string_value(json_object_get(first, "user")), "root");
    assert_string_equal(json_string_value(json_object_get(first, "outcome")), "applied");
    assert_int_equal(json_integer_value(json_object_get(first, "pid")), 1234);
    assert_int_equal(
        json_integer_value(json_object_get(json_object_get(first, "request"), "limit.warning")),
        42);
    /* Every refusal is either a record or counted in a later one's denied_not_recorded (the
     * last came in a new second, so it is recorded and carries what was left). */
    size_t n = json_array_size(log);
    json_int_t left_out = 0;
    for (size_t i = 1; i < n; i++) {
        json_t *rec = json_array_get(log, i);
        assert_string_equal(json_string_value(json_object_get(rec, "outcome")), "denied");
        assert_true(json_is_null(json_object_get(rec, "request")));
        left_out += json_integer_value(json_object_get(rec, "denied_not_recorded"));
    }
    assert_true(n - 1 < 26 && left_out > 0);
    assert_int_equal((json_int_t)(n - 1) + left_out, 26);
    json_t *last = json_array_get(log, n - 1);
    assert_string_equal(json_string_value(json_object_get(last, "user")), "4242");
    json_decref(log);
}

static void test_big_and_refused_requests_are_bounded(void **state)
{
    char dir[] = "/tmp/test-audit-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof(path), "%s/audit.log", dir);
    struct audit *a = NULL;
    assert_int_equal(audit_open(path, &a, NULL), 0);
    _cleanup_free_ char *big = malloc(40000);
    memset(big, 'x', 39999);
    big[39999] = '\0';
    json_t *req = json_pack("{s:s}", "env", big);
    assert_int_equal(audit_record(a, 0, 0, 1, "POST", "/v1/jobs", req, 0, "requested"), 0);
    /* A flood of refused submits is limited like denied ones. */
    for (int i = 0; i < 200; i++)
        assert_int_equal(audit_record(a, 4242, 4242, 9, "POST", "/v1/jobs", req, 400, "refused"),
                         0);
    json_decref(req);
    audit_close(a);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    char line[1024];
    unsigned n = 0;
    assert_non_null(fgets(line, sizeof(line), f));
    assert_non_null(strstr(line, "\"omitted_bytes\":40009"));
    while (fgets(line, sizeof(line), f))
        n++;
    fclose(f);
    assert_true(n >= 10 && n <= 20);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_big_and_refused_requests_are_bounded),
        cmocka_unit_test(test_records),
    };
    return test_run_cases(tests);
}
