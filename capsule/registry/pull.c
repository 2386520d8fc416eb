/* capsule pull: manifest, config and layers into the store; see pull.h. */
#include "capsule/registry/pull.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "capsule/image/capsule-limits.h"
#include "capsule/image/digest.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "capsule/image/manifest.h"
#include "capsule/image/mirror.h"
#include "lib/units.h"

/* Layers fetched at once at the most (parallel_downloads). */
#define PULL_PARALLEL_MAX 32u

const char *pull_host_architecture(void)
{
#if defined(__x86_64__)
    return "amd64";
#elif defined(__aarch64__)
    return "arm64";
#elif defined(__i386__)
    return "386";
#elif defined(__arm__)
    return "arm";
#elif defined(__powerpc64__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return "ppc64le";
#elif defined(__s390x__)
    return "s390x";
#elif defined(__riscv) && __riscv_xlen == 64
    return "riscv64";
#else
    return "unknown";
#endif
}

/* Fetches and parses a manifest; by_digest's size (if >= 0) must match what came. */
static int fetch_manifest(struct registry *reg, const char *what, const char *reference,
                          int64_t size, struct registry_manifest *ret_raw, struct manifest *ret,
                          struct errmsg *e)
{
    struct registry_manifest raw = {0};
    int r = registry_get_manifest(reg, reference, &raw, e);
    if (r < 0)
        return r;
    if (size >= 0 && (int64_t)raw.len != size) {
        registry_manifest_done(&raw);
        return errmsg_set(e, -EBADMSG, "%s: manifest %s has %zu bytes, the index says %lld", what,
                          reference, raw.len, (long long)size);
    }
    r = manifest_parse(raw.data, raw.len, raw.content_type, ret, e);
    if (r < 0) {
        registry_manifest_done(&raw);
        return errmsg_prefix(e, r, "%s", what);
    }
    *ret_raw = raw;
    return 0;
}

/* Resolves the reference to one image manifest, through an index when there is one. */
static int resolve_manifest(struct registry *reg, const struct image_ref *ref, const char *what,
                            const struct pull_opts *o, struct registry_manifest *ret_raw,
                            struct manifest *ret, struct errmsg *e)
{
    const char *reference = ref->digest ? ref->digest : ref->tag;
    struct registry_manifest raw = {0};
    struct manifest m = {0};
    int r = fetch_manifest(reg, what, reference, -1, &raw, &m, e);
    if (r < 0)
        return r;
    if (m.kind == MANIFEST_INDEX) {
        const char *os = o->os ? o->os : "linux";
        const char *arch = o->architecture ? o->architecture : pull_host_architecture();
        const struct descriptor *d = manifest_index_select(&m, os, arch, o->variant, e);
        if (!d) {
            manifest_done(&m);
            registry_manifest_done(&raw);
            return errmsg_prefix(e, -ENOENT, "%s", what);
        }
        _cleanup_free_ char *digest = strdup(d->digest);
        int64_t size = d->size;
        manifest_done(&m);
        registry_manifest_done(&raw);
        if (!digest)
            return errmsg_set(e, -ENOMEM, "out of memory");
        r = fetch_manifest(reg, what, digest, size, &raw, &m, e);
        if (r < 0)
            return r;
        if (m.kind != MANIFEST_IMAGE) {
            manifest_done(&m);
            registry_manifest_done(&raw);
            return errmsg_set(e, -EINVAL, "%s: the index entry %s is itself an index", what,
                              digest);
        }
    }
    *ret_raw = raw;
    *ret = m;
    return 0;
}

/* The config blob: fetched (unless the store has it), parsed, checked against the manifest. Its
 * bytes into *ret_data, for save_record to store. */
static int fetch_config(struct store *s, struct registry *reg, const char *what,
                        const struct manifest *m, const struct pull_opts *o, char **ret_data,
                        struct errmsg *e)
{
    const struct descriptor *d = &m->config;
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    bool cached =
        store_blob_read_verified(s, d->digest, CAPSULE_CONFIG_MAX, &data, &len, NULL) >= 0;
    if (!cached) {
        if (d->size > (int64_t)CAPSULE_CONFIG_MAX)
            return errmsg_set(e, -EFBIG,
                              "%s: the image config is %lld bytes, more than the %u MiB capsule "
                              "takes",
                              what, (long long)d->size, CAPSULE_CONFIG_MAX >> 20);
        int r = registry_get_blob_mem(reg, d->digest, CAPSULE_CONFIG_MAX, &data, &len, e);
        if (r < 0)
            return r;
    }
    if ((int64_t)len != d->size)
        return errmsg_set(e, -EBADMSG, "%s: the config has %zu bytes, the manifest says %lld", what,
                          len, (long long)d->size);
    struct image_config cfg = {0};
    int r = image_config_parse(data, len, &cfg, e);
    if (r < 0)
        return errmsg_prefix(e, r, "%s", what);
    if (cfg.n_diff_ids != m->n_layers)
        r = errmsg_set(e, -EINVAL, "%s: the config lists %zu layers, the manifest %zu", what,
                       cfg.n_diff_ids, m->n_layers);
    /* A platform asked for by name must be what the image is, also without an index. */
    else if (o->architecture && cfg.architecture && strcmp(cfg.architecture, o->architecture))
        r = errmsg_set(e, -ENOENT, "%s: the image is for %s/%s, not %s/%s", what,
                       cfg.os ? cfg.os : "?", cfg.architecture, o->os ? o->os : "linux",
                       o->architecture);
    image_config_done(&cfg);
    if (r >= 0)
        *ret_data = TAKE_PTR(data);
    return r;
}

/* ---- layers, several at once ---- */

struct pull_ctx {
    struct store *s;
    struct registry *reg;
    const struct manifest *m;
    const struct pull_opts *o;
    const struct pull_events *ev; /* never NULL: a quiet pull has an empty one */
    int *holds;                   /* per layer: its lock, shared, once it is there */
    atomic_size_t next;
    pthread_mutex_t lock;
    int error; /* the first failure; later ones are its consequences */
    struct errmsg msg;
};

struct layer_progress {
    struct pull_ctx *c;
    size_t i;
};

static void on_progress(void *userdata, int64_t done, int64_t total)
{
    struct layer_progress *lp = userdata;
    if (lp->c->ev->layer_bytes)
        lp->c->ev->layer_bytes(lp->c->ev->userdata, lp->i, done, total);
}

static void tell_state(const struct pull_ctx *c, size_t i, enum pull_layer_state state)
{
    if (c->ev->layer_state)
        c->ev->layer_state(c->ev->userdata, i, state);
}

/* 1 when layer i is in the store and may be used (told as EXISTS), 0 when it must be fetched.
 * With check_cached, the registry must vouch that these credentials may have it first: the
 * bytes were fetched for someone else. */
static int layer_present(struct pull_ctx *c, size_t i, struct errmsg *e)
{
    const struct descriptor *d = &c->m->layers[i];
    if (!store_has_layer(c->s, d->digest))
        return 0;
    if (c->o->check_cached) {
        int r = registry_check_blob(c->reg, d->digest, e);
        if (r < 0)
            return r;
    }
    tell_state(c, i, PULL_LAYER_EXISTS);
    return 1;
}

/* Downloads (or finds) and unpacks layer i, under its make lock. */
static int layer_make(struct pull_ctx *c, size_t i, struct errmsg *e)
{
    const struct descriptor *d = &c->m->layers[i];
    tell_state(c, i, PULL_LAYER_DOWNLOADING);
    struct store_download dl = {.fd = -1, .lock_fd = -1};
    int r = store_download_begin(c->s, d->digest, &dl, e);
    if (r < 0)
        return r;
    /* A blob or partial download already here is what a pull that did not finish fetched (from
     * this registry: in a node store its name says so); like a layer, it counts for these
     * credentials only once the registry vouches. A whole partial would otherwise be taken
     * without a request. */
    bool found = r == 1 || dl.offset > 0;
    if (found && c->o->check_cached) {
        int k = registry_check_blob(c->reg, d->digest, e);
        if (k < 0) {
            store_download_abort(&dl, true);
            return k;
        }
    }
    if (r == 0) {
        struct layer_progress lp = {c, i};
        r = registry_get_blob(c->reg, d->digest, d->size, dl.fd, dl.offset, on_progress, &lp, e);
        if (r < 0) {
            /* Wrong bytes are thrown away; a broken connection's bytes are kept to resume. */
            store_download_abort(&dl, r != -EBADMSG);
            return r;
        }
        r = store_download_commit(c->s, &dl, e);
    }
    if (r >= 0) {
        tell_state(c, i, PULL_LAYER_UNPACKING);
        r = store_layer_unpack(c->s, d->digest, c->o->max_unpacked_size, c->o->keep_blobs, e);
    }
    store_download_end(&dl);
    if (r >= 0)
        tell_state(c, i, PULL_LAYER_DONE);
    return r;
}

static int layer_pull_held(struct pull_ctx *c, size_t i, struct errmsg *e)
{
    const struct descriptor *d = &c->m->layers[i];
    /* From here until the record is saved, the layer is in use: gc leaves a layer whose lock is
     * held. Only gc takes it exclusively, and never waits for it. */
    int r = store_layer_lock(c->s, d->digest, false, true, &c->holds[i], e);
    if (r >= 0)
        r = layer_present(c, i, e);
    if (r != 0)
        return r < 0 ? r : 0;
    /* Another process making the same layer holds this lock; once it is ours, the layer is
     * either there or ours to make. */
    _cleanup_close_ int make = -1;
    r = store_layer_make_lock(c->s, d->digest, &make, e);
    if (r >= 0)
        r = layer_present(c, i, e);
    if (r == 0)
        r = layer_make(c, i, e);
    return r < 0 ? r : 0;
}

/* Whether layer i is the first of the manifest's entries with its digest (an image may list one
 * layer several times: it is held once). */
static bool first_of_digest(const struct manifest *m, size_t i)
{
    for (size_t j = 0; j < i; j++)
        if (strcmp(m->layers[j].digest, m->layers[i].digest) == 0)
            return false;
    return true;
}

static int layer_pull(struct pull_ctx *c, size_t i, struct errmsg *e)
{
    int r = layer_pull_held(c, i, e);
    if (!first_of_digest(c->m, i) && c->holds[i] >= 0) {
        close(c->holds[i]);
        c->holds[i] = -1;
    }
    return r;
}

static void *layer_worker(void *userdata)
{
    struct pull_ctx *c = userdata;
    for (;;) {
        size_t i = atomic_fetch_add(&c->next, 1);
        if (i >= c->m->n_layers)
            break;
        pthread_mutex_lock(&c->lock);
        bool failed = c->error < 0;
        pthread_mutex_unlock(&c->lock);
        if (failed)
            break;
        struct errmsg e = {{0}};
        int r = layer_pull(c, i, &e);
        if (r >= 0)
            continue;
        tell_state(c, i, PULL_LAYER_FAILED);
        pthread_mutex_lock(&c->lock);
        if (c->error == 0) {
            c->error = r;
            errmsg_set(&c->msg, r, "layer %zu of %zu: %s", i + 1, c->m->n_layers, e.text);
            /* Stops the other downloads; their partial files stay for the next attempt. */
            registry_cancel(c->reg);
        }
        pthread_mutex_unlock(&c->lock);
        break;
    }
    return NULL;
}

static int fetch_layers(struct pull_ctx *c, struct errmsg *e)
{
    size_t n = c->o->parallel ? c->o->parallel : 4;
    if (n > PULL_PARALLEL_MAX)
        n = PULL_PARALLEL_MAX;
    if (n > c->m->n_layers)
        n = c->m->n_layers;
    pthread_t threads[PULL_PARALLEL_MAX];
    size_t started = 0;
    /* The calling thread is a worker too, so a failed pthread_create only costs parallelism. */
    for (size_t t = 1; t < n; t++) {
        if (pthread_create(&threads[started], NULL, layer_worker, c) != 0)
            break;
        started++;
    }
    layer_worker(c);
    for (size_t t = 0; t < started; t++)
        pthread_join(threads[t], NULL);
    if (c->error < 0)
        return errmsg_set(e, c->error, "%s", c->msg.text);
    return 0;
}

/* Before anything is fetched: every layer within max_layer_size, and what is to be fetched
 * within the cache's free space, both by the sizes the manifest declares (a download never
 * grows past its declared size). The unpacked layers need more room still; this catches the
 * pull that cannot fit, and the registry that declares terabytes, before they fill the disk. */
static int check_layer_sizes(struct store *s, const struct manifest *m, const struct pull_opts *o,
                             struct errmsg *e)
{
    uint64_t need = 0;
    char a[16], b[16];
    for (size_t i = 0; i < m->n_layers; i++) {
        const struct descriptor *d = &m->layers[i];
        if (o->max_layer_size && (uint64_t)d->size > o->max_layer_size)
            return errmsg_set(e, -EFBIG,
                              "layer %zu of %zu (%s) declares %s, more than max_layer_size (%s) "
                              "in %s allows",
                              i + 1, m->n_layers, d->digest, units_format_binary(d->size, a),
                              units_format_binary((int64_t)o->max_layer_size, b),
                              o->registry.config_name ? o->registry.config_name : "capsule.conf");
        if (!store_has_layer(s, d->digest))
            need += (uint64_t)d->size;
    }
    int r = o->reserve ? o->reserve(o->reserve_userdata, need, e) : 0;
    if (r < 0)
        return r;
    struct statvfs v;
    if (statvfs(store_root(s), &v) < 0)
        return 0; /* no figure to check against: the download's own ENOSPC will tell */
    uint64_t avail = (uint64_t)v.f_bavail * v.f_frsize;
    if (need > avail)
        return errmsg_set(e, -ENOSPC,
                          "%s: the layers to fetch declare %s and the cache has %s free",
                          strerror(ENOSPC), units_format_bytes((int64_t)need, a),
                          units_format_bytes((int64_t)avail, b));
    return 0;
}

/* holds: one fd per layer, -1 each; each layer's lock, shared, comes back in it. */
static int pull_layers(struct store *s, struct registry *reg, const struct manifest *m,
                       const struct pull_opts *o, int *holds, struct errmsg *e)
{
    static const struct pull_events quiet = {0};
    struct pull_ctx c = {
        .s = s, .reg = reg, .m = m, .o = o, .ev = o->events ? o->events : &quiet, .holds = holds};
    if (c.ev->layers && m->n_layers > 0) {
        char(*ids)[13] = calloc(m->n_layers, sizeof(*ids));
        const char **idv = calloc(m->n_layers, sizeof(*idv));
        int64_t *sizes = calloc(m->n_layers, sizeof(*sizes));
        bool ok = ids && idv && sizes;
        for (size_t i = 0; ok && i < m->n_layers; i++) {
            snprintf(ids[i], sizeof(ids[i]), "%s", digest_hex(m->layers[i].digest));
            idv[i] = ids[i];
            sizes[i] = m->layers[i].size;
        }
        if (ok)
            c.ev->layers(c.ev->userdata, m->n_layers, idv, sizes);
        free(ids);
        free(idv);
        free(sizes);
        if (!ok)
            return errmsg_set(e, -ENOMEM, "out of memory");
    }
    pthread_mutex_init(&c.lock, NULL);
    int r = fetch_layers(&c, e);
    pthread_mutex_destroy(&c.lock);
    return r;
}

/* The registry (or mirror) the image comes from, with its manifest resolved: the mirror of the
 * image's registry when it has the manifest, else the registry. */
static int open_source(const struct image_ref *ref, const char *name, const struct pull_opts *o,
                       struct registry **ret, struct registry_manifest *raw, struct manifest *m,
                       struct errmsg *e)
{
    struct registry_opts ro = o->registry;
    struct errmsg mirror_err = {{0}};
    const char *mirror = ro.mirror = mirror_find(o->mirrors, ref->registry);
    if (ro.mirror) {
        int r = registry_open(ref, &ro, ret, e);
        if (r >= 0 && (r = resolve_manifest(*ret, ref, name, o, raw, m, &mirror_err)) >= 0)
            return 0;
        registry_free(*ret);
        *ret = NULL;
        if (r == -ENOMEM || r == -ECANCELED)
            return errmsg_set(e, r, "%s", mirror_err.text);
        log_debug("mirror %s: %s; trying %s", ro.mirror, mirror_err.text, ref->registry);
    }
    ro.mirror = NULL;
    int r = registry_open(ref, &ro, ret, e);
    if (r >= 0)
        r = resolve_manifest(*ret, ref, name, o, raw, m, e);
    if (r < 0 && mirror_err.text[0]) {
        struct errmsg origin = *e;
        errmsg_set(e, r, "%s (the mirror %s failed too: %s)", origin.text, mirror, mirror_err.text);
    }
    return r;
}

/* Last, under the gc block (a moment): the manifest, the config and the record, so that a pull
 * leaves a record only when every layer is in place, and gc meanwhile removes nothing it stored
 * (its layers are held by their locks until then). */
static int save_record(struct store *s, const struct registry_manifest *raw, const char *config,
                       const struct manifest *m, struct image_record *rec, struct errmsg *e)
{
    _cleanup_close_ int gc_block = -1;
    int r = store_gc_block(s, &gc_block, e);
    if (r >= 0 && !store_has_blob(s, raw->digest))
        r = store_blob_write(s, raw->digest, raw->data, raw->len, e);
    if (r >= 0 && !store_has_blob(s, m->config.digest))
        r = store_blob_write(s, m->config.digest, config, (size_t)m->config.size, e);
    return r < 0 ? r : store_image_save(s, rec, e);
}

static void holds_close(int *holds, size_t n)
{
    for (size_t i = 0; holds && i < n; i++)
        if (holds[i] >= 0)
            close(holds[i]);
    free(holds);
}

int pull_image(struct store *s, const struct image_ref *ref, const struct pull_opts *o,
               struct image_record *ret, struct errmsg *e)
{
    static const struct pull_opts defaults = {0};
    if (!o)
        o = &defaults;
    _cleanup_free_ char *name = NULL, *config = NULL;
    if (image_ref_format(ref, &name) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    /* A node store's rekey waits for no pull (store_pull_block). */
    _cleanup_close_ int pull_block = -1;
    int r = store_pull_block(s, &pull_block, e);
    if (r < 0)
        return r;
    _cleanup_(registry_freep) struct registry *reg = NULL;
    struct registry_manifest raw = {0};
    struct manifest m = {0};
    r = open_source(ref, name, o, &reg, &raw, &m, e);
    if (r < 0)
        return r;
    struct image_record rec = {0};
    int *holds = malloc((m.n_layers ? m.n_layers : 1) * sizeof(int));
    for (size_t i = 0; holds && i < m.n_layers; i++)
        holds[i] = -1;
    r = holds ? fetch_config(s, reg, name, &m, o, &config, e)
              : errmsg_set(e, -ENOMEM, "out of memory");
    char **paths = NULL;
    bool here = !o->layer_source;
    if (r >= 0 && o->layer_source &&
        (r = o->layer_source(o->layer_source_userdata, reg, name, raw.digest, &m, &paths, e)) > 0)
        here = true; /* the node cache does not take this image: into the user's own store */
    if (r >= 0 && here && (r = check_layer_sizes(s, &m, o, e)) >= 0)
        r = pull_layers(s, reg, &m, o, holds, e);
    if (r >= 0 && image_record_fill(name, raw.digest, &m, &rec) < 0)
        r = errmsg_set(e, -ENOMEM, "out of memory");
    rec.layer_paths = paths;
    if (r >= 0)
        r = save_record(s, &raw, config, &m, &rec, e);
    if (r >= 0 && o->saved)
        r = o->saved(o->saved_userdata, &rec, e);
    holds_close(holds, m.n_layers);
    manifest_done(&m);
    registry_manifest_done(&raw);
    if (r >= 0 && ret)
        *ret = rec;
    else
        image_record_done(&rec);
    return r;
}
