/* capsule pull: resolves a reference to a platform manifest, fetches config and layers (several
 * at once, each verified while it streams, resumed after an interruption), unpacks each layer
 * into the store once, and records the image last, so an interrupted pull never leaves an image
 * that looks complete. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "lib/errmsg.h"
#include "capsule/image/manifest.h"
#include "capsule/image/ref.h"
#include "capsule/registry/registry.h"
#include "capsule/store/store.h"

/* Where a layer's pull is. */
enum pull_layer_state {
    PULL_LAYER_WAITING,
    PULL_LAYER_DOWNLOADING,
    PULL_LAYER_UNPACKING,
    PULL_LAYER_DONE,   /* fetched and unpacked now */
    PULL_LAYER_EXISTS, /* was in the cache already */
    PULL_LAYER_FAILED,
};

/* What a pull tells as it goes, for a display of the caller's (capsule's terminal lines, a
 * Slurm job's log, gpuqd's job state). Every member may be NULL. layers comes once, before any
 * other, from the pulling thread; layer_bytes and layer_state come from the download threads,
 * several at once: they must be thread-safe and quick. */
struct pull_events {
    /* n layers, bottom first: their ids as shown (the first 12 hex digits of the digest) and
     * their sizes as the manifest declares them. */
    void (*layers)(void *userdata, size_t n, const char *const *ids, const int64_t *sizes);
    void (*layer_bytes)(void *userdata, size_t i, int64_t done, int64_t total);
    void (*layer_state)(void *userdata, size_t i, enum pull_layer_state state);
    void *userdata;
};

struct pull_opts {
    struct registry_opts registry; /* its mirror is ignored: mirrors below choose it */
    /* capsule.conf's registry_mirrors (image/mirror.h): the image's registry's mirror is tried
     * first, the registry itself when the mirror cannot give the manifest. May be NULL. */
    char *const *mirrors;
    unsigned parallel;        /* layers fetched at once; 0 = 4 */
    const char *os;           /* NULL = "linux" */
    const char *architecture; /* NULL = this machine's, in GOARCH terms ("amd64", "arm64") */
    const char *variant;      /* NULL = any */
    /* Who hears how the pull goes; NULL: nobody. */
    const struct pull_events *events;
    bool keep_blobs; /* keep layer blobs after unpacking (default: drop them) */
    /* The largest layer to take, as the manifest declares it (bytes; 0 = no limit). A download
     * never grows past the declared size, so this bounds what a registry can make us write. */
    uint64_t max_layer_size;
    /* Called before anything is fetched with what the layers to fetch declare together; a
     * negative return (with a message) stops the pull there: the node cache's max_user_size
     * reserves that much of the requester's share. NULL: nothing. */
    int (*reserve)(void *userdata, uint64_t need, struct errmsg *e);
    void *reserve_userdata;
    /* What one layer's files may hold once unpacked (bytes; 0 = no limit); an unpack also stops
     * short of the cache's last CAPSULE_UNPACK_RESERVE of free space. */
    uint64_t max_unpacked_size;
    /* Layers already in the store count only once the registry says these credentials may have
     * them (registry_check_blob): for the node cache's service, whose store holds what others
     * pulled. */
    bool check_cached;
    /* Where the layers come from instead of this store: the node cache (capsule/node). Called
     * once manifest and config are fetched, with the registry client holding the
     * requester's credentials; answers each layer's directory (manifest order, NULL-terminated,
     * malloc'd), which the image record then keeps; or 1 with a notice (the source does not
     * take this image), and the layers are pulled into the store after all. NULL: layers are
     * pulled into the store. */
    int (*layer_source)(void *userdata, struct registry *reg, const char *image_name,
                        const char *manifest_digest, const struct manifest *m, char ***ret_paths,
                        struct errmsg *e);
    void *layer_source_userdata;
    /* Called once the record is saved, while the pull still holds its layers' locks (gc and
     * eviction leave them): the node cache's service hands their directories out there. A
     * failure fails the pull (the record stays). NULL: nothing. */
    int (*saved)(void *userdata, const struct image_record *rec, struct errmsg *e);
    void *saved_userdata;
};

/* Pulls ref into s. Layers already in the store are neither fetched nor unpacked again. Before
 * any layer is fetched, each declared size is checked against max_layer_size and their sum
 * (those not in the store yet) against the cache's free space: -EFBIG / -ENOSPC saying what to
 * do, and nothing is fetched. On
 * success the image record is saved and copied into *ret (may be NULL; free with
 * image_record_done). On failure nothing half-done is visible: no record, no partial layer; a
 * partial download stays in tmp/ for the next attempt unless its bytes were wrong. */
int pull_image(struct store *s, const struct image_ref *ref, const struct pull_opts *o,
               struct image_record *ret, struct errmsg *e);

/* This machine's architecture in OCI/GOARCH terms ("amd64" for x86_64, "arm64" for aarch64, ...).
 */
const char *pull_host_architecture(void);
