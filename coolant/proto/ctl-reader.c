/* Assembling frames from a byte stream (docs/protocol.md §1: resynchronisation on '$'). */
#include <string.h>

#include "ctl-internal.h"
#include "ctl-proto.h"

void ctl_reader_init(struct ctl_reader *r)
{
    memset(r, 0, sizeof(*r));
}

/* Counts the current frame as rejected and skips bytes up to the next '$'. */
static int reject(struct ctl_reader *r, int err)
{
    r->rejected++;
    r->in_frame = false;
    r->discarding = true;
    r->len = 0;
    return err;
}

int ctl_reader_push(struct ctl_reader *r, uint8_t byte, struct ctl_frame *ret)
{
    int k;

    if (byte == '$') {
        bool abandoned = r->in_frame;

        r->in_frame = true;
        r->discarding = false;
        r->buf[0] = '$';
        r->len = 1;
        if (abandoned) {
            /* The old frame is counted; the new one that this '$' starts is kept. */
            r->rejected++;
            return -CTL_E_TRUNCATED;
        }
        return 0;
    }
    if (!r->in_frame)
        return 0; /* noise between frames, or the rest of a rejected frame */

    if (byte == '\n') {
        /* Room for the '\n' is always left, see the length check below. */
        r->buf[r->len++] = '\n';
        k = ctl_frame_parse(r->buf, r->len, ret);
        r->in_frame = false;
        r->len = 0;
        if (k < 0) {
            r->rejected++;
            return k;
        }
        r->frames++;
        return 1;
    }
    /* Reject early rather than at the line end: a binary burst would otherwise fill the buffer
     * and be reported as too long, which hides what happened. */
    if (byte != '\r' && !ctl_is_print((char)byte))
        return reject(r, -CTL_E_CHARACTER);
    if (r->len >= CTL_FRAME_MAX - 1)
        return reject(r, -CTL_E_TOOLONG);
    r->buf[r->len++] = (char)byte;
    return 0;
}
