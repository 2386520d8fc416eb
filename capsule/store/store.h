/* The content-addressed image cache, shared by all images of a user (or, when configured, of
 * a node): a blob or layer is fetched and unpacked once.
 *
 * Layout under the root (realpath'd at open):
 *   blobs/sha256/<hex>        verified blobs: manifests, configs, and layer blobs while pulling
 *   layers/sha256/<hex>/      an unpacked layer, named by its (compressed) blob digest; an
 *                             overlayfs lower directory as it stands (whiteouts are 0/0 char
 *                             devices, opaque directories carry user.overlay.opaque=y)
 *   images/<hex>.json         one record per image name (hex = sha256 of the canonical name)
 *   tmp/                      partial downloads (<hex>.partial), unpacks in progress
 *                             (<hex>.XXXXXX) and scratch directories of runs (run-XXXXXX)
 *   locks/<hex>.lock          flock(2) files, one per blob/layer
 * A node store (store_open_node) names its layers and their locks differently: see there.
 *
 * Concurrency: everything that appears in blobs/, layers/ or images/ appears by rename(2) of a
 * finished file or directory from tmp/, so a reader sees all or nothing. Two processes (two
 * users of a shared cache, two job steps) that want the same layer serialise on its lock file:
 * the second waits, then finds the layer present. A running container holds its layers' locks
 * shared; gc takes them exclusive without waiting and skips the busy ones.
 *
 * Every function returns 0 (or the documented positive value) or a negative errno with a
 * message naming the path. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/errmsg.h"
#include "lib/macro.h"

struct store;

/* Opens (creating the layout, mode 0755, if missing) the cache at root. Returns 0 and *ret,
 * -EACCES/-EROFS/... with a message naming the directory, -ENOMEM. */
int store_open(const char *root, struct store **ret, struct errmsg *e);
/* Opens (creating it if missing) a node-wide cache (docs/design/capsule-node-cache.md), written
 * only by its service's account and read by every user through paths the service hands out:
 *   <root> 0711, layers/ 0711 (traversable, not listable), blobs/ images/ tmp/ locks/ 0700 (modes
 *     set on every open), and no layers/<algo>/ level;
 *   node.key   32 random bytes (0600), made at the first open; services that start at once
 *              agree on one (it appears by link(2), which does not replace);
 *   layers/<name>/  named by the 64 hex digits of HMAC-SHA256(node key, layer digest string), so
 *              that nobody finds a layer's directory from its digest. store_layer_path, _lock,
 *              _tmpdir, _commit and store_has_layer use that name, store_layer_unpack unpacks with
 *              unpack_layer_shared (widened modes, override xattrs), store_gc sweeps by it.
 * Everything else is as in a per-user store. Returns 0 and *ret, or -errno with a message
 * naming the directory or file: -EBADMSG for a node.key of the wrong size, -EPERM for one that
 * others may read, and store_open's errors. Links libcrypto (store-node.c). */
int store_open_node(const char *root, struct store **ret, struct errmsg *e);
void store_free(struct store *s);
DEFINE_POINTER_CLEANUP(struct store, store_free)
const char *store_root(const struct store *s);
/* Whether s was opened by store_open_node (or is a view of one). */
bool store_is_node(const struct store *s);
/* The node store s as one registry's pulls see it: the same files, with layers named
 * HMAC-SHA256(node key, "ORIGIN\nDIGEST") for origin, the registry as image names spell it
 * ("127.0.0.1:5000", "docker.io"). A layer is shared only by images of one registry, so that what
 * a registry says about a layer concerns bytes it gave (capsule-cached asks it before it hands a
 * cached layer out). Image records, blobs and gc are the store's own: gc names each record's
 * layers by its registry. Free with store_free. 0, -EINVAL (not a node store), -ENOMEM,
 * -EMFILE. */
int store_node_view(const struct store *s, const char *origin, struct store **ret,
                    struct errmsg *e);
/* Gives a node store a new key and renames every layer that an image record references to its
 * name under it, so that paths handed out before lead nowhere (a running container keeps its
 * mounts: they hold the inodes). Unreferenced layers keep their old names, which no digest has
 * any more: the next store_gc removes them. Runs under the gc and pulls locks: -EBUSY while a
 * pull holds store_pull_block(). The new key is written after the renames: on failure the
 * renames are undone and the old key stays; after a crash midway the layers renamed so far are
 * orphans (unpacked again when asked for, removed by gc). Returns the number of layers renamed,
 * -EINVAL for a per-user store, or -errno with a message. */
int store_node_rekey(struct store *s, struct errmsg *e);
/* The service's own state, a file NAME (no '/') at a node store's root, 0600: written whole and
 * atomically (under the gc block, so that gc leaves its temporary file alone), read whole (at most
 * max bytes; -ENOENT when there is none, -EFBIG when larger). */
int store_node_state_write(struct store *s, const char *name, const char *data, size_t len,
                           struct errmsg *e);
int store_node_state_read(struct store *s, const char *name, size_t max, char **ret,
                          size_t *ret_len);

/* A node store's layer has a lease file beside it, "<layer>.lease" (0644, the service's). A
 * container that runs on the layer holds a read lock on it (an open file description lock,
 * F_OFD_SETLKW), which any user who may read the file may take; gc and eviction need the write
 * lock, which only the service can take, since it needs the file open for writing. So users
 * keep layers they run from going, and none of them can keep another's container from
 * starting. */
#define STORE_LEASE_SUFFIX ".lease"
/* For a container that runs on the node cache layer at path (a directory the service handed
 * out): takes the read lock on its lease, waiting for a gc that is removing the layer (then
 * finds it gone). Returns 0 and the fd (close it when the container has ended), -ENOENT when
 * path is no longer a layer, another -errno. */
int store_node_layer_hold(const char *path, int *ret_fd);
/* Whether a container holds the node cache layer at path (the write lock cannot be had now).
 * For the service. With ret_fd, the write lock is kept when it could be had (0): close the fd
 * once the layer is gone. */
int store_node_layer_busy(const char *path, int *ret_fd);
/* Makes the lease of the layer at path (the service, as it hands the layer out). */
int store_node_layer_lease(const char *path, struct errmsg *e);
/* What a node store's layer directory holds (bytes of its files), as noted when it was
 * unpacked (xattr STORE_NODE_SIZE_XATTR on its root); 0 when unknown. */
#define STORE_NODE_SIZE_XATTR "user.capsule.unpacked_bytes"
uint64_t store_node_layer_size(const char *path);
/* Notes it (store-unpack.c). */
int store_node_layer_note_size(const char *dir, uint64_t bytes, struct errmsg *e);

/* ---- blobs ---- */

/* Path of a blob (whether or not it exists), malloc'd. digest must be digest_valid(). */
int store_blob_path(const struct store *s, const char *digest, char **ret);
bool store_has_blob(const struct store *s, const char *digest);
/* Reads a whole small blob (manifest, config; at most max bytes) as it is in the cache: not
 * hashed again, since blobs/ only ever receives verified content by rename (and hashing would
 * load OpenSSL into `capsule run`). Returns 0 and a malloc'd NUL-terminated copy, -ENOENT if
 * absent, -EFBIG. */
int store_blob_read(const struct store *s, const char *digest, size_t max, char **ret_data,
                    size_t *ret_len, struct errmsg *e);
/* The same, verified against the digest (store-blobs.c, for pulls): -EBADMSG if the file no
 * longer matches (it is then removed). */
int store_blob_read_verified(const struct store *s, const char *digest, size_t max, char **ret_data,
                             size_t *ret_len, struct errmsg *e);
/* Verifies data against digest and stores it atomically. -EBADMSG on mismatch (nothing stored). */
int store_blob_write(struct store *s, const char *digest, const void *data, size_t len,
                     struct errmsg *e);
/* Removes a blob if present (layer blobs are dropped once unpacked). */
int store_blob_remove(struct store *s, const char *digest);

/* A layer's blob, as downloads and unpacks name it: in blobs/ by digest in a per-user store; in
 * a node store's view by the layer's own name (its registry is part of it), so that bytes one
 * registry served are never taken for another's. */
int store_layer_blob_path(const struct store *s, const char *digest, char **ret);
bool store_has_layer_blob(const struct store *s, const char *digest);
int store_layer_blob_remove(struct store *s, const char *digest);

/* A layer blob's download in progress: tmp/<key>.partial (key: the digest's hex, or in a node
 * store's view the layer's name), locked exclusively for its writer. */
struct store_download {
    int fd;       /* open O_RDWR, positioned at offset (the end of what is already there) */
    off_t offset; /* bytes already present from an interrupted earlier download */
    char *digest;
    char *partial_path;
    int lock_fd;
};
/* Starts (or resumes) the download of digest, waiting for another process that is downloading
 * it. Returns 1 if the blob is already complete in blobs/ (nothing to download), 0 with *ret
 * ready, or a negative errno. From 0 or 1 on, the blob's lock is the caller's and gc leaves the
 * blob alone, also after the commit, until store_download_end (or abort). */
int store_download_begin(struct store *s, const char *digest, struct store_download *ret,
                         struct errmsg *e);
/* The caller has verified the content: fsyncs and renames it into blobs/. Keeps the lock. */
int store_download_commit(struct store *s, struct store_download *d, struct errmsg *e);
/* Releases *d and its lock (once the blob is unpacked). Safe on a zeroed struct with fd and
 * lock_fd -1. */
void store_download_end(struct store_download *d);
/* Gives up: keeps the partial file for a later resume if keep_partial (a network error), else
 * removes it (a digest mismatch: those bytes are bad). Releases *d. Safe on a zeroed struct
 * with fd and lock_fd -1. */
void store_download_abort(struct store_download *d, bool keep_partial);

/* ---- layers ---- */

int store_layer_path(const struct store *s, const char *digest, char **ret);
bool store_has_layer(const struct store *s, const char *digest);
/* Takes the layer's lock: shared to use it (a container, a pull until its record is saved),
 * exclusive to delete it (gc, never waiting). wait=false fails with -EWOULDBLOCK instead of
 * waiting. Returns 0 and the lock's fd (close it to unlock). */
int store_layer_lock(struct store *s, const char *digest, bool exclusive, bool wait, int *ret_fd,
                     struct errmsg *e);
/* The lock of whoever makes the layer (a lock of its own, so that a maker never waits for the
 * users of a layer that is there): exclusive, waiting for another maker. */
int store_layer_make_lock(struct store *s, const char *digest, int *ret_fd, struct errmsg *e);
/* A fresh empty directory under tmp/ to unpack into (malloc'd path). */
int store_layer_tmpdir(struct store *s, const char *digest, char **ret, struct errmsg *e);
/* Moves a finished unpack into layers/. If the layer appeared meanwhile, tmpdir is removed and 0
 * returned. The caller holds the layer's make lock. */
int store_layer_commit(struct store *s, const char *digest, const char *tmpdir, struct errmsg *e);

/* Unpacks the layer blob digest (in blobs/) into layers/ (store_layer_tmpdir, unpack.h's
 * unpack_layer_bounded, or unpack_layer_shared in a node store, within max_unpacked bytes and
 * CAPSULE_UNPACK_RESERVE, store_layer_commit)
 * and drops the blob unless keep_blob. The caller holds the layer's make lock and the blob's
 * (store_download_begin) (a pull, an archive import). 0 or -errno with a message. */
int store_layer_unpack(struct store *s, const char *digest, uint64_t max_unpacked, bool keep_blob,
                       struct errmsg *e);

/* ---- images ---- */

struct image_record {
    char *name;            /* canonical reference, image_ref_format() */
    char *manifest_digest; /* of the platform manifest (not of the index) */
    char *config_digest;   /* the image ID; its first 12 hex digits are shown */
    char **layers;         /* layer blob digests, bottom first, NULL-terminated */
    size_t n_layers;
    int64_t size;      /* sum of the compressed layer sizes */
    int64_t pulled_at; /* Unix time */
    /* Node cache images (capsule/node): each layer's directory there, in layers' order,
     * NULL-terminated; NULL for an image whose layers are in this store. */
    char **layer_paths;
};
void image_record_done(struct image_record *r);
/* Fills *ret (pulled_at now) for image name from its manifest's digest and parsed manifest.
 * 0, or -ENOMEM (*ret then holds what was filled: image_record_done it). */
struct manifest;
int image_record_fill(const char *name, const char *manifest_digest, const struct manifest *m,
                      struct image_record *ret);
/* Saves (atomically replaces) the record of r->name. */
int store_image_save(struct store *s, const struct image_record *r, struct errmsg *e);
/* Finds an image by canonical name (image_ref_format()). -ENOENT "image 'x' is not in the
 * cache; capsule pull x", -EBADMSG for a damaged record. */
int store_image_load(struct store *s, const char *name, struct image_record *ret, struct errmsg *e);
/* Finds an image by an unambiguous prefix (>= 4 hex digits, optionally "sha256:") of its ID, the
 * config digest. -ENOENT when id is not spelled like an ID or no cached image has it, -EINVAL
 * when it matches two images. */
int store_image_load_id(struct store *s, const char *id, struct image_record *ret,
                        struct errmsg *e);
/* Finds an image as a user names it, by Docker's rule: a reference in any accepted spelling
 * ("ubuntu" is docker.io/library/ubuntu:latest) that is cached, else a cached image whose ID
 * starts with arg. Returns 0 (found by name), 1 (found by ID), or an error as above; a hex
 * string that is neither is "not in the cache" under its Hub name, for pulling. */
int store_image_find(struct store *s, const char *arg, struct image_record *ret, struct errmsg *e);
/* Every name under which the image with this config digest is cached, sorted, NULL-terminated. */
int store_image_names(struct store *s, const char *config_digest, char ***ret, struct errmsg *e);
/* Every record, sorted by name. *ret is an array of *ret_n records (free each, then the array). */
int store_image_list(struct store *s, struct image_record **ret, size_t *ret_n, struct errmsg *e);
/* Removes the record (layers stay until gc). -ENOENT if there is none. */
int store_image_remove(struct store *s, const char *name, struct errmsg *e);

/* ---- scratch space of runs ---- */

/* A private directory (0700) for one run to keep large temporary files in (the copy fallback's
 * merged root): tmp/run-XXXXXX, locked (locks/run-XXXXXX.lock) until *ret_lock_fd is closed.
 * store_scratch_remove() removes it after the run; when the run was killed, gc does (its lock
 * is then free). Returns 0 with the malloc'd path, or -errno with a message. */
int store_scratch_new(struct store *s, char **ret_dir, int *ret_lock_fd, struct errmsg *e);
/* Removes a scratch directory and its lock and closes lock_fd (may be -1). Best effort: what
 * stays is gc's. dir stays the caller's. */
void store_scratch_remove(struct store *s, const char *dir, int lock_fd);

/* ---- garbage collection ---- */

/* Keeps gc away while a pull writes its manifest, config and record (what it stored is
 * referenced by nothing until the record is there; its layers meanwhile are held by their locks,
 * its blobs by theirs): takes the cache's gc lock shared, waiting for a gc that runs. Returns 0
 * and an fd; closing it releases. */
int store_gc_block(struct store *s, int *ret_fd, struct errmsg *e);
/* Held by a pull from start to end, so that a node store's rekey (which renames the layers whose
 * names the pull has computed) never runs beside one: the pulls lock, shared, waiting for a
 * rekey that runs. */
int store_pull_block(struct store *s, int *ret_fd, struct errmsg *e);

struct store_gc_stats {
    unsigned layers_removed, blobs_removed, layers_busy, tmp_removed, tmp_busy;
    uint64_t bytes_freed;
};
/* Removes layers and blobs no image record references and that are not in keep (digests of
 * layers that containers use, NULL-terminated, may be NULL), layers whose lock is held (skipped,
 * counted busy), and what killed pulls and runs left in tmp/: partial downloads, unfinished
 * unpacks and scratch directories whose lock is free (one whose lock is held is in use: kept,
 * counted in tmp_busy). Blobs whose lock is held (a download, an unpack) stay. Pulls go on while
 * gc runs: a pull's layers are held by their locks, its blobs by theirs, and the rest of tmp/ it
 * writes only while it holds store_gc_block(), for which gc waits. Damaged image records
 * reference nothing. In a node store the names of the layers that stay are computed
 * from the digests, and every other entry of layers/ named like a layer goes. */
int store_gc(struct store *s, char *const *keep, struct store_gc_stats *ret, struct errmsg *e);
