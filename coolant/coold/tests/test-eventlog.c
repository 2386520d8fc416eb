/* The daemon's event list: order, limit, wrap-around at capacity, and the JSON a client reads. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "eventlog.h"

static void test_order_and_limit(void **state)
{
    struct eventlog *l = eventlog_new();
    json_t *fields = json_pack("{s:s}", "level", "precritical");
    eventlog_add(l, "controller", "ALARM", fields, "first");
    json_decref(fields);
    eventlog_add(l, "daemon", "safety", NULL, "second %d", 2);
    eventlog_add(l, "daemon", "shutdown", NULL, "third");

    json_t *all = eventlog_to_json(l, 0);
    assert_int_equal(json_array_size(all), 3);
    json_t *first = json_array_get(all, 0);
    assert_string_equal(json_string_value(json_object_get(first, "message")), "first");
    assert_string_equal(json_string_value(json_object_get(first, "source")), "controller");
    assert_string_equal(json_string_value(json_object_get(first, "type")), "ALARM");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(first, "fields"), "level")),
        "precritical");
    const char *time = json_string_value(json_object_get(first, "time"));
    assert_int_equal(strlen(time), strlen("2026-11-29T23:59:00.000Z"));
    assert_true(json_is_null(json_object_get(json_array_get(all, 1), "fields")));
    json_decref(all);

    json_t *last2 = eventlog_to_json(l, 2);
    assert_int_equal(json_array_size(last2), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(last2, 0), "message")),
                        "second 2");
    json_decref(last2);
    eventlog_free(l);
}

static void test_wraps_keeping_the_newest(void **state)
{
    struct eventlog *l = eventlog_new();
    for (int i = 0; i < EVENTLOG_CAPACITY + 10; i++)
        eventlog_add(l, "daemon", "link", NULL, "event %d", i);
    json_t *all = eventlog_to_json(l, 0);
    assert_int_equal(json_array_size(all), EVENTLOG_CAPACITY);
    assert_string_equal(json_string_value(json_object_get(json_array_get(all, 0), "message")),
                        "event 10");
    char last[32];
    snprintf(last, sizeof(last), "event %d", EVENTLOG_CAPACITY + 9);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(all, EVENTLOG_CAPACITY - 1), "message")),
        last);
    json_decref(all);
    eventlog_free(l);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_and_limit),
        cmocka_unit_test(test_wraps_keeping_the_newest),
    };
    return test_run_cases(tests);
}
