/* lib/log: the threshold, the errno suffix, and a host program's own sink in place of stderr. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "lib/log.h"

struct seen {
    int n;
    enum log_level level;
    char text[256];
    char file[64];
};

static void collect(enum log_level level, const char *file, int line, const char *text,
                    void *userdata)
{
    struct seen *s = userdata;
    s->n++;
    s->level = level;
    snprintf(s->text, sizeof(s->text), "%s", text);
    snprintf(s->file, sizeof(s->file), "%s", file);
    assert_true(line > 0);
}

static void test_host_sink(void **state)
{
    struct seen s = {0};
    log_setup("test", LOG_LEVEL_INFO);
    log_set_sink(collect, &s);
    log_info("ready after %d tries", 3);
    assert_int_equal(s.n, 1);
    assert_int_equal(s.level, LOG_LEVEL_INFO);
    assert_string_equal(s.text, "ready after 3 tries");
    assert_non_null(strstr(s.file, "test-log.c"));
    log_debug("not shown at info"); /* above the threshold: dropped */
    assert_int_equal(s.n, 1);
    assert_int_equal(log_error_errno(-ENOENT, "open %s", "x.conf"), -ENOENT);
    assert_int_equal(s.n, 2);
    assert_int_equal(s.level, LOG_LEVEL_ERR);
    assert_string_equal(s.text, "open x.conf: No such file or directory");
    /* Back to stderr: the sink sees nothing more. */
    log_set_sink(NULL, NULL);
    log_warning("to stderr");
    assert_int_equal(s.n, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_sink),
    };
    return test_run_cases(tests);
}
