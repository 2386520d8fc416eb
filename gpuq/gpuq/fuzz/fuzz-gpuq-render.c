/* Fuzz target for render.c: whatever a gpuqd (a newer one, a broken one, a socket that someone
 * else answers on) replies, gpuq prints tables without crashing, overrunning a cell or letting a
 * control character through to the terminal. The input is one JSON document, rendered as each
 * reply it could be. */
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq/gpuq/render.h"
#include "lib/fuzz-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* No byte of the output is an ESC, CSI (U+009B) or other control character but '\n'. */
static void check_clean(const char *s, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        CHECK(c >= 0x20 || c == '\n');
        CHECK(c != 0x7f);
        if (c == 0xC2 && i + 1 < len)
            CHECK((unsigned char)s[i + 1] < 0x80 || (unsigned char)s[i + 1] > 0x9F);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *doc = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!doc)
        return 0;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f);
    const double now = 1796241600.0;
    render_jobs(f, doc, now);
    render_job(f, doc, now);
    render_queues(f, doc);
    char cell[32];
    json_t *first = json_is_array(doc) ? json_array_get(doc, 0) : doc;
    render_gpus(first, cell, sizeof(cell));
    CHECK(strlen(cell) < sizeof(cell));
    render_quota(first, cell, sizeof(cell));
    CHECK(strlen(cell) < sizeof(cell));
    render_start(first, now, cell, sizeof(cell));
    render_command(first, cell, sizeof(cell));
    CHECK(strlen(cell) < sizeof(cell));
    fclose(f);
    check_clean(buf, len);
    free(buf);
    json_decref(doc);
    return 0;
}
