/* gzip encoding; see gzip.h. */
#include "lib/gzip.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <zlib.h>

#include "lib/macro.h"

int gzip_compress(const char *in, size_t in_len, char **ret, size_t *ret_len)
{
    if (in_len > UINT32_MAX)
        return -E2BIG;
    z_stream z = {0};
    /* windowBits 15 + 16 asks zlib for a gzip header and trailer instead of zlib's own. */
    if (deflateInit2(&z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return -ENOMEM;
    size_t cap = deflateBound(&z, in_len) + 32;
    _cleanup_free_ char *out = malloc(cap);
    if (!out) {
        deflateEnd(&z);
        return -ENOMEM;
    }
    z.next_in = (Bytef *)in;
    z.avail_in = (uInt)in_len;
    z.next_out = (Bytef *)out;
    z.avail_out = (uInt)cap;
    int zr = deflate(&z, Z_FINISH);
    size_t len = z.total_out;
    deflateEnd(&z);
    if (zr != Z_STREAM_END)
        return -EIO;
    *ret = TAKE_PTR(out);
    *ret_len = len;
    return 0;
}
