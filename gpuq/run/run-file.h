/* The two file operations of a run's records (spec, pid file, exit record): a whole file written
 * so that a reader sees the old one or the new one, never half, even across a crash; and a
 * whole file read that trusts only root's own files. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "lib/errmsg.h"

/* Writes data to path through "<path>.tmp": written, fsync'd, renamed over path, and the folder
 * fsync'd, so that the new file survives a power cut once this returns. The file gets mode and
 * belongs to the caller. A symbolic link at either name is refused (O_NOFOLLOW): the folders are
 * root's. 0 or -errno with a message naming the file. */
int run_file_write_atomic(const char *path, const void *data, size_t len, mode_t mode,
                          struct errmsg *e);

/* Reads path (at most max bytes) into a malloc'd, NUL-terminated buffer. When trusted_only, a
 * file that is not a regular file owned by the caller's effective uid, or that others may write,
 * is refused with -EPERM: a root program must not act on what another user could have written.
 * 0 and *ret, *ret_len, or -errno with a message (-ENOENT when there is none, -EFBIG beyond
 * max). */
int run_file_read(const char *path, size_t max, bool trusted_only, char **ret, size_t *ret_len,
                  struct errmsg *e);
