/* capsule pull: resolves a reference to a platform manifest, fetches config and layers (several
 * at once, each verified while it streams, resumed after an interruption), unpacks each layer
 * into the store once, and records the image last, so an interrupted pull never leaves an image
 * that looks complete. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "lib/errmsg.h"
#include "capsule/image/ref.h"
#include "capsule/registry/registry.h"
#include "capsule/store/store.h"

struct pull_opts {
    struct registry_opts registry;
    unsigned parallel;        /* layers fetched at once; 0 = 4 */
    const char *os;           /* NULL = "linux" */
    const char *architecture; /* NULL = this machine's, in GOARCH terms ("amd64", "arm64") */
    const char *variant;      /* NULL = any */
    /* Progress display: -1 = none; else an fd (a terminal: one redrawn line per layer; not a
     * terminal: one line per finished layer). */
    int progress_fd;
    bool keep_blobs; /* keep layer blobs after unpacking (default: drop them) */
    /* The largest layer to take, as the manifest declares it (bytes; 0 = no limit). A download
     * never grows past the declared size, so this bounds what a registry can make us write. */
    uint64_t max_layer_size;
    /* What one layer's files may hold once unpacked (bytes; 0 = no limit); an unpack also stops
     * short of the cache's last CAPSULE_UNPACK_RESERVE of free space. */
    uint64_t max_unpacked_size;
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
