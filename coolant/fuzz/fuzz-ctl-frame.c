/* libFuzzer target: ctl_frame_parse on arbitrary bytes. Whatever parses must re-serialise with
 * ctl_writer and parse back to the same frame: the writer accepts all the parser accepts. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void same_frame(const struct ctl_frame *a, const struct ctl_frame *b)
{
    if (a->kind != b->kind || a->id != b->id || strcmp(a->verb, b->verb) != 0 ||
        a->n_fields != b->n_fields)
        abort();
    for (unsigned i = 0; i < a->n_fields; i++)
        if (strcmp(a->fields[i].key, b->fields[i].key) != 0 ||
            strcmp(a->fields[i].value, b->fields[i].value) != 0)
            abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ctl_frame f, g, h;
    struct ctl_writer w;
    int n;

    if (ctl_frame_parse((const char *)data, size, &f) < 0)
        return 0;
    ctl_writer_begin(&w, f.kind, f.id, f.verb);
    for (unsigned i = 0; i < f.n_fields; i++)
        ctl_writer_add(&w, f.fields[i].key, f.fields[i].value);
    n = ctl_writer_finish(&w);
    if (n < 0 || n > CTL_FRAME_MAX || (size_t)n != strlen(w.buf))
        abort();
    if (ctl_frame_parse(w.buf, (size_t)n, &g) < 0)
        abort();
    same_frame(&f, &g);
    ctl_frame_copy(&h, &g);
    memset(&g, 0, sizeof(g));
    same_frame(&f, &h);
    return 0;
}
