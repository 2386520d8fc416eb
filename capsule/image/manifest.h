/* Image manifests, indexes and configs: Docker schema 2 and OCI, parsed with jansson.
 *
 * Everything here is outside input (a registry, a file): the parsers check types, digests,
 * sizes and media types, and say which field of which document was wrong. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "lib/errmsg.h"

#define MEDIA_DOCKER_MANIFEST "application/vnd.docker.distribution.manifest.v2+json"
#define MEDIA_DOCKER_LIST     "application/vnd.docker.distribution.manifest.list.v2+json"
#define MEDIA_DOCKER_CONFIG   "application/vnd.docker.container.image.v1+json"
#define MEDIA_DOCKER_LAYER    "application/vnd.docker.image.rootfs.diff.tar.gzip"
#define MEDIA_OCI_MANIFEST    "application/vnd.oci.image.manifest.v1+json"
#define MEDIA_OCI_INDEX       "application/vnd.oci.image.index.v1+json"
#define MEDIA_OCI_CONFIG      "application/vnd.oci.image.config.v1+json"
#define MEDIA_OCI_LAYER       "application/vnd.oci.image.layer.v1.tar"
#define MEDIA_OCI_LAYER_GZIP  "application/vnd.oci.image.layer.v1.tar+gzip"
#define MEDIA_OCI_LAYER_ZSTD  "application/vnd.oci.image.layer.v1.tar+zstd"

/* The Accept header value a registry client sends for manifests: all four kinds above. */
#define MANIFEST_ACCEPT                                                                            \
    MEDIA_OCI_INDEX ", " MEDIA_OCI_MANIFEST ", " MEDIA_DOCKER_LIST ", " MEDIA_DOCKER_MANIFEST

enum layer_compression {
    LAYER_UNCOMPRESSED,
    LAYER_GZIP,
    LAYER_ZSTD,
};

struct descriptor {
    char *media_type;
    char *digest; /* valid per digest_valid() */
    int64_t size; /* >= 0 */
    /* Index entries only ("" when absent): */
    char *os, *architecture, *variant;
};

enum manifest_kind {
    MANIFEST_IMAGE, /* an image manifest: config + layers */
    MANIFEST_INDEX, /* a manifest list / OCI index: manifests per platform */
};

struct manifest {
    enum manifest_kind kind;
    char *media_type;
    struct descriptor config; /* MANIFEST_IMAGE */
    size_t n_layers;
    struct descriptor *layers; /* bottom layer first */
    size_t n_manifests;
    struct descriptor *manifests; /* MANIFEST_INDEX */
};

/* Parses a manifest or index. content_type is the registry's Content-Type (may be NULL or
 * generic, e.g. "application/json"): the document's own "mediaType" decides when present, else
 * content_type, else the shape (an object with "manifests" is an index). Schema 1 manifests are
 * refused with a message that says so. Layer media types other than the tar/gzip/zstd ones above
 * (foreign layers, encrypted layers) are refused naming the type. Returns 0 and *ret (free with
 * manifest_done), -EINVAL / -ENOTSUP with a message ("manifest: layers[3].digest: 'sha256:12'
 * is not a valid digest"), or -ENOMEM. */
int manifest_parse(const void *data, size_t len, const char *content_type, struct manifest *ret,
                   struct errmsg *e);
void manifest_done(struct manifest *m);

/* The compression of a layer, from its media type. Returns 0..2 (enum layer_compression) or
 * -ENOTSUP for anything else. */
int layer_compression_from_media_type(const char *media_type);

/* Picks the entry of an index for os/architecture (e.g. "linux", "amd64"); variant may be NULL
 * (any; the first entry wins). Entries with an unknown platform are skipped; attestation
 * manifests ("unknown/unknown") never match. Returns the entry or NULL with a message that lists
 * the platforms the index does have ("no linux/amd64 image; the index has linux/arm64,
 * linux/ppc64le"). */
const struct descriptor *manifest_index_select(const struct manifest *m, const char *os,
                                               const char *architecture, const char *variant,
                                               struct errmsg *e);

/* The parts of an image config (OCI image spec "config" + "rootfs") that running needs. */
struct image_config {
    char *architecture, *os;
    char **env;        /* "K=V", NULL-terminated; never NULL */
    char **entrypoint; /* NULL-terminated, or NULL when absent */
    char **cmd;        /* NULL-terminated, or NULL when absent */
    char *working_dir; /* NULL when absent or "" */
    char *user;        /* NULL when absent or "" */
    char **diff_ids;   /* NULL-terminated; never NULL */
    size_t n_diff_ids;
};

/* Parses an image config blob. Returns 0 and *ret (free with image_config_done), -EINVAL with a
 * message naming the field ("config: config.Env[2]: not a string"), or -ENOMEM. */
int image_config_parse(const void *data, size_t len, struct image_config *ret, struct errmsg *e);
void image_config_done(struct image_config *c);
