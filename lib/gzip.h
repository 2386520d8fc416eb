/* gzip encoding of a buffer in memory, for HTTP bodies (Content-Encoding: gzip). */
#pragma once

#include <stddef.h>

/* Compresses in (in_len bytes) at zlib level 6 into a new malloc'd gzip stream. Returns 0 with
 * *ret and *ret_len, -ENOMEM, -E2BIG for an input over 4 GiB (one zlib call), or -EIO. */
int gzip_compress(const char *in, size_t in_len, char **ret, size_t *ret_len);
