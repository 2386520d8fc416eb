/* libFuzzer target: coold's reading of Docker Engine replies (coolant/coold/docker.c), the bodies
 * of GET /containers/json and GET /containers/{id}/json, without HTTP.
 *
 * Input: byte 0 picks the call (bit 0) and the HTTP status (the other bits, mostly 200), the rest
 * is the body as the engine sent it. Checked: success only for the statuses that allow it, every
 * container id is a NUL-terminated hex string shorter than DOCKER_ID_MAX and every name a
 * NUL-terminated, non-empty string; output parameters untouched and a message set on failure. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker.h"
#include "lib/fuzz-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_containers(long status, const char *body, size_t len)
{
    struct docker_container *const untouched = (struct docker_container *)(uintptr_t)0x1;
    struct docker_container *c = untouched;
    size_t n = 12345;
    struct errmsg e = {""};

    int r = docker_parse_containers(status, body, len, &c, &n, &e);
    if (r < 0) {
        CHECK(r == -EPROTO || r == -ENOMEM);
        CHECK(c == untouched && n == 12345 && e.text[0] != '\0');
        return;
    }
    CHECK(r == 0 && status == 200);
    CHECK((n == 0) == (c == NULL));
    for (size_t i = 0; i < n; i++) {
        size_t id_len = strnlen(c[i].id, sizeof(c[i].id));
        CHECK(id_len > 0 && id_len < sizeof(c[i].id));
        CHECK(strspn(c[i].id, "0123456789abcdef") == id_len);
        size_t name_len = strnlen(c[i].name, sizeof(c[i].name));
        CHECK(name_len > 0 && name_len < sizeof(c[i].name));
    }
    free(c);
}

static void check_running(long status, const char *body, size_t len)
{
    struct errmsg e = {""};
    bool running = true;

    int r = docker_parse_running(status, body, len, &running, &e);
    if (status == 404) {
        CHECK(r == 0 && !running);
        return;
    }
    if (r < 0) {
        CHECK(r == -EPROTO && running && e.text[0] != '\0');
        return;
    }
    CHECK(r == 0 && status == 200);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long statuses[] = {200, 200, 200, 200, 200, 404, 500, 304, 204, 400, 409, 0};

    if (size < 1)
        return 0;
    long status = statuses[(data[0] >> 1) % (sizeof(statuses) / sizeof(statuses[0]))];
    /* A copy of exactly the body, so that ASan sees any read past its end. */
    char *body = malloc(size - 1 ? size - 1 : 1);
    if (!body)
        return 0;
    memcpy(body, data + 1, size - 1);
    if (data[0] & 1)
        check_running(status, body, size - 1);
    else
        check_containers(status, body, size - 1);
    free(body);
    return 0;
}
