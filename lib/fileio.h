/* Whole reads and writes on file descriptors: the loops every caller of read(2)/write(2) needs
 * (EINTR, short transfers, growth), written once. */
#pragma once

#include <stddef.h>

#include "lib/errmsg.h"

/* Writes all len bytes of buf, retrying after EINTR and short writes. Returns 0 or -errno
 * (-EIO if write(2) makes no progress without saying why). */
int fd_write_all(int fd, const void *buf, size_t len);

/* Reads fd to its end into a new buffer (malloc'd, NUL-terminated; the length excludes the NUL),
 * at most max bytes: -EFBIG beyond that. Returns 0, -ENOMEM or the read(2) error; *ret and
 * *ret_len are written only on success. */
int fd_read_all(int fd, size_t max, char **ret, size_t *ret_len);

/* Reads into buf until the end of fd or until size bytes are there, whichever comes first,
 * retrying after EINTR and short reads; a caller tells "exactly size" from "more" by asking for
 * one byte more than it keeps. Returns 0 and *ret_len, or the read(2) error (what was read stays
 * in buf, for a caller that must wipe it). */
int fd_read_up_to(int fd, void *buf, size_t size, size_t *ret_len);

/* Reads the file at path whole (as fd_read_all(), at most max bytes), for files an
 * administrator names: configuration, a collectors list. A FIFO is refused without blocking (it
 * would wait for a writer forever); a device that never ends stops at max. Returns 0, or -errno
 * with a message naming the path: -ENOENT and open(2)'s errors, -EISDIR, -EINVAL (a FIFO or
 * socket), -EFBIG, -EAGAIN (a device with nothing to read now), -ENOMEM. */
int file_read_text(const char *path, size_t max, char **ret, size_t *ret_len, struct errmsg *e);
