/* libFuzzer target: an arbitrary byte stream through ctl_reader_push. Checks the counters and
 * that every frame the reader hands out is a valid one. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ctl-proto.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ctl_reader r;
    struct ctl_frame f;
    struct ctl_writer w;

    ctl_reader_init(&r);
    for (size_t i = 0; i < size; i++) {
        unsigned long frames = r.frames, rejected = r.rejected;
        int k = ctl_reader_push(&r, data[i], &f);

        if (r.len > CTL_FRAME_MAX)
            abort();
        if (k == 1) {
            if (r.frames != frames + 1 || r.rejected != rejected)
                abort();
            /* A frame handed out must be one the writer can send again. */
            ctl_writer_begin(&w, f.kind, f.id, f.verb);
            for (unsigned j = 0; j < f.n_fields; j++)
                ctl_writer_add(&w, f.fields[j].key, f.fields[j].value);
            if (ctl_writer_finish(&w) < 0)
                abort();
        } else if (k < 0) {
            if (r.rejected != rejected + 1 || r.frames != frames || k <= -_CTL_E_MAX)
                abort();
        } else if (k != 0 || r.frames != frames || r.rejected != rejected) {
            abort();
        }
    }
    return 0;
}
