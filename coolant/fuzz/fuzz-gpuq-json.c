/* libFuzzer target: coold's reading of gpuqd's replies (coolant/coold/gpuq-client.c), the bodies
 * of POST /v1/drain and GET /v1/status, without HTTP.
 *
 * Input: byte 0 picks the call (bit 0) and the HTTP status (the other bits, mostly 200), the rest
 * is the body as gpuqd sent it, parsed as http_request_json() does. Checked: success only for
 * status 200, counts that add up without wrapping, output parameters untouched and a message set
 * on failure. */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq-client.h"
#include "lib/fuzz-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_drain(long status, json_t *reply)
{
    struct gpuqc_drain_result res = {.stopped = 12345, .running = 12345};
    struct errmsg e = {""};
    int r = gpuqc_parse_drain(status, reply, &res, &e);
    if (r < 0) {
        CHECK(r == -EPROTO && e.text[0] != '\0');
        CHECK(res.stopped == 12345 && res.running == 12345);
        return;
    }
    CHECK(r == 0 && status == 200 && json_is_object(reply));
}

static void check_status(long status, json_t *reply)
{
    struct gpuqc_status st = {.running = 12345, .pending = 12345, .drained = true};
    struct errmsg e = {""};
    int r = gpuqc_parse_status(status, reply, &st, &e);
    if (r < 0) {
        CHECK(r == -EPROTO && e.text[0] != '\0');
        CHECK(st.running == 12345 && st.pending == 12345 && st.drained);
        return;
    }
    CHECK(r == 0 && status == 200);
    json_t *jobs = json_object_get(reply, "jobs");
    json_int_t running = json_integer_value(json_object_get(jobs, "RUNNING"));
    json_int_t stopping = json_integer_value(json_object_get(jobs, "STOPPING"));
    CHECK((json_int_t)st.running == running + stopping);
    CHECK(st.drained == json_is_true(json_object_get(reply, "drained")));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long statuses[] = {200, 200, 200, 200, 200, 403, 500, 400, 404, 503, 0};

    if (size < 1)
        return 0;
    long status = statuses[(data[0] >> 1) % (sizeof(statuses) / sizeof(statuses[0]))];
    /* As http_request_json(): NULL when the body is empty or not JSON. */
    json_t *reply = size > 1 ? json_loadb((const char *)data + 1, size - 1, 0, NULL) : NULL;
    if (data[0] & 1)
        check_status(status, reply);
    else
        check_drain(status, reply);
    json_decref(reply);
    return 0;
}
