/* Internals shared by store.c, store-images.c and store-gc.c; not part of the store's API. */
#pragma once

#include <sys/types.h>

#include <stddef.h>

#include "lib/errmsg.h"
#include "capsule/store/store.h"

struct store {
    char *root;  /* realpath'd */
    int root_fd; /* every access goes relative to it */
    /* Mode for files the store writes: 0666 less the umask. A cache shared by a group works
     * when its users have umask 002 and the directory is setgid to the group. */
    mode_t file_mode;
};

#define STORE_GC_LOCK "gc.lock"
/* tmp/ entries of store_scratch_new() start with this; their lock is locks/<entry>.lock. */
#define STORE_SCRATCH_PREFIX "run-"

/* "blobs/sha256/<hex>" or "layers/sha256/<hex>" for kind "blobs" or "layers" into buf.
 * -EINVAL if digest is not digest_valid(). */
int store_rel_path(const char *kind, const char *digest, char *buf, size_t size);

/* Opens locks/<name> (creating it) and flock()s it with op (LOCK_SH/LOCK_EX, maybe LOCK_NB).
 * Returns 0 and the fd, -EWOULDBLOCK, or another negative errno. Lock files are never deleted:
 * a process could hold the old inode while another locks a new one. */
int store_lock(struct store *s, const char *name, int op, int *ret_fd);

/* Writes data to a file under tmp/, fsyncs it and renames it to rel (relative to the root). */
int store_write_atomic(struct store *s, const char *rel, const void *data, size_t len,
                       struct errmsg *e);

/* Reads the whole file rel of the directory dfd (at most max bytes, -EFBIG beyond) into a
 * malloc'd NUL-terminated buffer. */
int store_read_file(int dfd, const char *rel, size_t max, char **ret, size_t *ret_len);
