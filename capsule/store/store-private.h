/* Internals shared by store.c, store-images.c and store-gc.c; not part of the store's API. */
#pragma once

#include <sys/types.h>

#include <stddef.h>

#include "lib/errmsg.h"
#include "capsule/store/store.h"

/* A node store's key (node.key): HMAC-SHA256 keys of 32 bytes. */
#define STORE_NODE_KEY_LEN 32
/* A layer's name in layers/ and locks/: a digest's hex (up to 128 digits) or a node store's
 * 64-digit HMAC, and the NUL. */
#define STORE_LAYER_NAME_MAX 129

struct store {
    char *root;  /* realpath'd */
    int root_fd; /* every access goes relative to it */
    /* Mode for files the store writes: 0666 less the umask. A cache shared by a group works
     * when its users have umask 002 and the directory is setgid to the group. */
    mode_t file_mode;
    /* A node store's (store-node.c): writes the name of digest's layer (the hex of
     * HMAC-SHA256(node_key, digest)) into name. NULL in a per-user store, whose layers are named
     * by the digest. Reached through this pointer so that a program that opens only per-user
     * stores (capsule) does not link libcrypto. */
    int (*layer_name)(const struct store *s, const char *origin, const char *digest,
                      char name[STORE_LAYER_NAME_MAX]);
    unsigned char node_key[STORE_NODE_KEY_LEN];
    /* A node store's view for one registry (store_node_view): the registry its layers come
     * from, part of every layer name. NULL otherwise. */
    char *origin;
};

/* One directory of a store's layout; mode 0: made 0777 less the umask and left as found, else
 * made and kept with exactly that mode. */
struct store_dir {
    const char *name;
    mode_t mode;
};

/* Opens (creating it and its parents) the store at root with the directories dirs: store_open
 * and store_open_node. root_mode 0 as for dirs; else parents are made 0755 and the root gets
 * root_mode. Returns 0 and *ret with file_mode 0666 less the umask and no layer_name. */
int store_open_layout(const char *root, mode_t root_mode, const struct store_dir *dirs, size_t n,
                      struct store **ret, struct errmsg *e);

/* The name of digest's layer in layers/ (per-user: within layers/<algo>/), its lock
 * (locks/<name>.lock) and its unpacks (tmp/<name>.XXXXXX). -EINVAL if digest is not
 * digest_valid(), -EIO if the HMAC fails. */
int store_layer_name(const struct store *s, const char *digest, char name[STORE_LAYER_NAME_MAX]);
/* The same for a node store's layer from registry origin (NULL: none), whatever s's own. */
int store_layer_name_from(const struct store *s, const char *origin, const char *digest,
                          char name[STORE_LAYER_NAME_MAX]);
/* The registry an image record's layers come from (its name's), as node stores name them
 * (store_node_view): malloc'd into *ret, or NULL for a name that does not parse. 0 or -ENOMEM. */
int store_record_origin(const struct image_record *r, char **ret);
/* "layers/<algo>/<hex>" (per-user) or "layers/<name>" (node) into buf; errors as above and
 * -ENAMETOOLONG. */
int store_layer_rel(const struct store *s, const char *digest, char *buf, size_t size);

/* Held exclusively by gc and shared by a pull saving its record (store_gc_block). */
#define STORE_GC_LOCK "gc.lock"
/* Held shared by every pull from start to end, exclusively by a rekey (store_pull_block). */
#define STORE_PULLS_LOCK "pulls.lock"
/* locks/<layer name> + this: held by whoever makes the layer (store_layer_make_lock), and by gc
 * for its unfinished unpacks in tmp/ (tmp/<layer name>.XXXXXX). */
#define STORE_MAKE_LOCK_SUFFIX ".unpack.lock"
/* locks/<hex> + this: a blob's, held by its download until store_download_end. */
#define STORE_BLOB_LOCK_SUFFIX ".blob.lock"
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
/* The same with the file's mode given. */
int store_write_atomic_mode(struct store *s, const char *rel, const void *data, size_t len,
                            mode_t mode, struct errmsg *e);

/* Reads the whole file rel of the directory dfd (at most max bytes, -EFBIG beyond) into a
 * malloc'd NUL-terminated buffer. */
int store_read_file(int dfd, const char *rel, size_t max, char **ret, size_t *ret_len);
