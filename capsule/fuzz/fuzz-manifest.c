/* libFuzzer target: manifest_parse() on arbitrary bytes, with the Content-Types a registry may
 * send. A parsed manifest must hold only what later stages rely on: valid digests, sizes >= 0,
 * layers whose compression is known, and a platform choice from the index's own entries. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/image/capsule-limits.h"
#include "capsule/image/digest.h"
#include "lib/fuzz-check.h"
#include "capsule/image/manifest.h"

static void check_descriptor(const struct descriptor *d)
{
    CHECK(d->media_type && d->os && d->architecture && d->variant);
    CHECK(digest_valid(d->digest));
    CHECK(d->size >= 0);
}

static void check_manifest(const struct manifest *m)
{
    CHECK(m->media_type);
    if (m->kind == MANIFEST_IMAGE) {
        CHECK(m->n_manifests == 0);
        CHECK(m->n_layers <= CAPSULE_LAYERS_MAX);
        check_descriptor(&m->config);
        CHECK(strcmp(m->config.media_type, MEDIA_DOCKER_CONFIG) == 0 ||
              strcmp(m->config.media_type, MEDIA_OCI_CONFIG) == 0);
        for (size_t i = 0; i < m->n_layers; i++) {
            check_descriptor(&m->layers[i]);
            CHECK(layer_compression_from_media_type(m->layers[i].media_type) >= 0);
        }
        return;
    }
    CHECK(m->kind == MANIFEST_INDEX);
    CHECK(m->n_layers == 0 && m->n_manifests <= CAPSULE_LAYERS_MAX);
    for (size_t i = 0; i < m->n_manifests; i++)
        check_descriptor(&m->manifests[i]);
    struct errmsg e = {""};
    const struct descriptor *d = manifest_index_select(m, "linux", "amd64", NULL, &e);
    if (d) {
        CHECK(d >= m->manifests && d < m->manifests + m->n_manifests);
        CHECK(strcmp(d->os, "linux") == 0 && strcmp(d->architecture, "amd64") == 0);
    } else
        CHECK(strncmp(e.text, "no linux/amd64 image; ", 22) == 0);
    d = manifest_index_select(m, "linux", "arm64", "v8", &e);
    CHECK(!d || strcmp(d->architecture, "arm64") == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const types[] = {
        NULL,
        "application/json",
        MEDIA_OCI_INDEX,
        MEDIA_OCI_MANIFEST,
        MEDIA_DOCKER_LIST,
        MEDIA_DOCKER_MANIFEST "; charset=utf-8",
    };
    for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
        struct manifest m = {};
        struct errmsg e = {""};
        int k = manifest_parse(data, size, types[t], &m, &e);
        CHECK(k == 0 || k == -EINVAL || k == -ENOTSUP || k == -ENOMEM);
        if (k < 0) {
            CHECK(strncmp(e.text, "manifest: ", 10) == 0);
            CHECK(!m.media_type);
            continue;
        }
        check_manifest(&m);
        manifest_done(&m);
    }
    return 0;
}
