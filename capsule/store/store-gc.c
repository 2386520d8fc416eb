/* Garbage collection: layers and blobs that no image record references, and leftovers in tmp/.
 * A node store's layers/ holds names (HMACs) rather than digests: the names of the referenced
 * layers are computed, and every other name goes.
 *
 * A layer is first renamed into tmp/ under its exclusive lock and removed there, so that nobody
 * sees half of it in layers/. Pulls go on meanwhile: one holds the locks of its layers (shared)
 * and of its blobs until its record is saved, and saves the record under the gc lock shared
 * (store_gc_block), which gc holds exclusively. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/image/digest.h"
#include "lib/log.h"
#include "lib/rm-tree.h"
#include "capsule/store/store-private.h"

struct gc {
    struct store *s;
    char **refs; /* sorted digests that stay */
    size_t n_refs;
    char (*names)[STORE_LAYER_NAME_MAX]; /* a node store's: sorted names of the layers that stay */
    size_t n_names;
    struct image_record *images;
    size_t n_images;
    unsigned serial;
    struct store_gc_stats stats;
    struct errmsg *e;
};

static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool gc_referenced(const struct gc *g, const char *digest)
{
    return bsearch(&digest, g->refs, g->n_refs, sizeof(char *), str_cmp) != NULL;
}

/* Everything the records name and keep lists; the strings stay owned by records and keep. */
static int gc_collect_refs(struct gc *g, char *const *keep)
{
    size_t n = 0;
    for (size_t i = 0; i < g->n_images; i++)
        n += 2 + g->images[i].n_layers;
    for (size_t i = 0; keep && keep[i]; i++)
        n++;
    g->refs = calloc(n + 1, sizeof(char *));
    if (!g->refs)
        return -ENOMEM;
    for (size_t i = 0; i < g->n_images; i++) {
        const struct image_record *r = &g->images[i];
        g->refs[g->n_refs++] = r->manifest_digest;
        g->refs[g->n_refs++] = r->config_digest;
        for (size_t k = 0; k < r->n_layers; k++)
            g->refs[g->n_refs++] = r->layers[k];
    }
    for (size_t i = 0; keep && keep[i]; i++)
        g->refs[g->n_refs++] = keep[i];
    qsort(g->refs, g->n_refs, sizeof(char *), str_cmp);
    return 0;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(a, b);
}

static bool is_hex(const char *s, size_t n);

/* Adds the name of layer digest from registry origin (NULL: none) to g->names. */
static int gc_add_name(struct gc *g, const char *origin, const char *digest)
{
    int r = store_layer_name_from(g->s, origin, digest, g->names[g->n_names]);
    if (r == -EINVAL)
        return 0; /* a keep entry that is no digest names no layer */
    if (r < 0)
        return errmsg_set(g->e, r, "cannot compute the name of layer %s: %s", digest, strerror(-r));
    g->n_names++;
    return 0;
}

/* A node store: the names of the layers that records reference, each named by its record's
 * registry (store_node_view), and those keep lists: layer names as they are (the directories
 * running containers use), or digests. */
static int gc_collect_names(struct gc *g, char *const *keep)
{
    size_t n = 0;
    for (size_t i = 0; i < g->n_images; i++)
        n += g->images[i].n_layers;
    for (size_t i = 0; keep && keep[i]; i++)
        n++;
    g->names = calloc(n + 1, sizeof(*g->names));
    if (!g->names)
        return -ENOMEM;
    int r = 0;
    for (size_t i = 0; r >= 0 && i < g->n_images; i++) {
        char *origin = NULL;
        if (store_record_origin(&g->images[i], &origin) < 0)
            return -ENOMEM;
        for (size_t k = 0; r >= 0 && k < g->images[i].n_layers; k++)
            r = gc_add_name(g, origin, g->images[i].layers[k]);
        free(origin);
    }
    for (size_t i = 0; r >= 0 && keep && keep[i]; i++) {
        if (is_hex(keep[i], 64))
            snprintf(g->names[g->n_names++], STORE_LAYER_NAME_MAX, "%s", keep[i]);
        else
            r = gc_add_name(g, NULL, keep[i]);
    }
    if (r < 0)
        return r;
    qsort(g->names, g->n_names, sizeof(*g->names), name_cmp);
    return 0;
}

static bool gc_name_live(const struct gc *g, const char *name)
{
    return bsearch(name, g->names, g->n_names, sizeof(*g->names), name_cmp) != NULL;
}

static bool is_hex(const char *s, size_t n)
{
    return strlen(s) == n && strspn(s, "0123456789abcdef") == n;
}

/* Opens a directory relative to the root for listing. */
static int gc_opendir(struct gc *g, const char *rel, DIR **ret)
{
    int fd = openat(g->s->root_fd, rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        int r = negative_errno();
        if (fd >= 0)
            close(fd);
        return errmsg_set(g->e, r, "cannot read '%s/%s': %s", g->s->root, rel, strerror(-r));
    }
    *ret = d;
    return 0;
}

/* Moves the layer from (relative to the root) out of sight into tmp/, then removes it there. */
static int gc_remove_layer(struct gc *g, const char *from, const char *layer)
{
    char name[PATH_MAX], to[PATH_MAX + 8];
    snprintf(name, sizeof(name), "%s.gc-%d-%u", layer, (int)getpid(), g->serial++);
    snprintf(to, sizeof(to), "tmp/%s", name);
    int fd = g->s->root_fd;
    if (renameat(fd, from, fd, to) < 0)
        return errmsg_set(g->e, negative_errno(), "cannot move '%s/%s' away: %m", g->s->root, from);
    _cleanup_close_ int tmp = openat(fd, "tmp", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int r = tmp < 0 ? negative_errno() : rm_tree_at(tmp, name, &g->stats.bytes_freed);
    if (r < 0)
        return errmsg_set(g->e, r, "cannot remove '%s/%s': %s", g->s->root, to, strerror(-r));
    g->stats.layers_removed++;
    return 0;
}

/* Removes the unreferenced layer from, named layer, unless its lock is held. */
static int gc_layer_unless_busy(struct gc *g, const char *from, const char *layer)
{
    char lock[PATH_MAX];
    snprintf(lock, sizeof(lock), "%s.lock", layer);
    _cleanup_close_ int fd = -1;
    int r = store_lock(g->s, lock, LOCK_EX | LOCK_NB, &fd);
    if (r == -EWOULDBLOCK) {
        g->stats.layers_busy++; /* a container or an unpack uses it */
        return 0;
    }
    if (r < 0)
        return errmsg_set(g->e, r, "cannot lock '%s/locks/%s': %s", g->s->root, lock, strerror(-r));
    return gc_remove_layer(g, from, layer);
}

static int gc_layer(struct gc *g, const char *algo, const char *hex)
{
    char digest[DIGEST_STRING_MAX], from[PATH_MAX];
    snprintf(digest, sizeof(digest), "%s:%s", algo, hex);
    if (!digest_valid(digest) || gc_referenced(g, digest))
        return 0;
    snprintf(from, sizeof(from), "layers/%s/%s", algo, hex);
    return gc_layer_unless_busy(g, from, hex);
}

/* A node store's lease file whose layer is gone (a gc or a rekey that was cut short). */
static void gc_orphan_lease(struct gc *g, DIR *d, const char *name)
{
    char layer[STORE_LAYER_NAME_MAX];
    size_t n = strlen(name) - strlen(STORE_LEASE_SUFFIX);
    snprintf(layer, sizeof(layer), "%.*s", (int)n, name);
    struct stat st;
    if (fstatat(dirfd(d), layer, &st, AT_SYMLINK_NOFOLLOW) < 0 && errno == ENOENT)
        (void)unlinkat(dirfd(d), name, 0);
}

/* A node store's unreferenced layer: removed unless a pull unpacks it or a container runs on it
 * (store_node_layer_hold: the lease's write lock cannot be had), then its lease. */
static int gc_node_layer(struct gc *g, const char *name)
{
    char from[PATH_MAX], abs[PATH_MAX + 16];
    snprintf(from, sizeof(from), "layers/%s", name);
    snprintf(abs, sizeof(abs), "%s/%s", g->s->root, from);
    _cleanup_close_ int lease = -1;
    int r = store_node_layer_busy(abs, &lease);
    if (r > 0) {
        g->stats.layers_busy++;
        return 0;
    }
    if (r < 0)
        return errmsg_set(g->e, r, "cannot lock the lease of '%s': %s", abs, strerror(-r));
    unsigned before = g->stats.layers_removed;
    r = gc_layer_unless_busy(g, from, name);
    if (r >= 0 && lease >= 0 && g->stats.layers_removed > before) {
        char lease_rel[PATH_MAX + 8];
        snprintf(lease_rel, sizeof(lease_rel), "%s" STORE_LEASE_SUFFIX, from);
        (void)unlinkat(g->s->root_fd, lease_rel, 0);
    }
    return r;
}

/* A node store's layers/<name>: every name that no referenced digest has goes, unless in use. */
static int gc_node_layers(struct gc *g)
{
    DIR *d;
    int r = gc_opendir(g, "layers", &d);
    if (r < 0)
        return r;
    struct dirent *de;
    size_t suffix = strlen(STORE_LEASE_SUFFIX);
    while (r >= 0 && (de = readdir(d))) {
        size_t n = strlen(de->d_name);
        if (n == 64 + suffix && strspn(de->d_name, "0123456789abcdef") == 64 &&
            strcmp(de->d_name + 64, STORE_LEASE_SUFFIX) == 0)
            gc_orphan_lease(g, d, de->d_name);
        else if (is_hex(de->d_name, 64) && !gc_name_live(g, de->d_name))
            r = gc_node_layer(g, de->d_name);
    }
    closedir(d);
    return r;
}

static int gc_blob(struct gc *g, int dfd, const char *algo, const char *hex)
{
    char digest[DIGEST_STRING_MAX], lock[PATH_MAX];
    snprintf(digest, sizeof(digest), "%s:%s", algo, hex);
    if (!digest_valid(digest) || gc_referenced(g, digest))
        return 0;
    /* A download or an unpack holds it (store_download_begin). */
    snprintf(lock, sizeof(lock), "%s" STORE_BLOB_LOCK_SUFFIX, hex);
    _cleanup_close_ int fd = -1;
    int r = store_lock(g->s, lock, LOCK_EX | LOCK_NB, &fd);
    if (r == -EWOULDBLOCK)
        return 0;
    if (r < 0)
        return errmsg_set(g->e, r, "cannot lock '%s/locks/%s': %s", g->s->root, lock, strerror(-r));
    struct stat st;
    if (fstatat(dfd, hex, &st, AT_SYMLINK_NOFOLLOW) == 0)
        g->stats.bytes_freed += (uint64_t)st.st_blocks * 512;
    if (unlinkat(dfd, hex, 0) < 0 && errno != ENOENT)
        return errmsg_set(g->e, negative_errno(), "cannot remove '%s/blobs/%s/%s': %m", g->s->root,
                          algo, hex);
    g->stats.blobs_removed++;
    return 0;
}

/* Runs fn on every entry of <kind>/<algo> for both algorithms. */
static int gc_sweep(struct gc *g, const char *kind,
                    int (*fn)(struct gc *g, int dfd, const char *algo, const char *hex))
{
    static const char *const algos[] = {"sha256", "sha512"};
    for (size_t a = 0; a < ELEMENTSOF(algos); a++) {
        char rel[64];
        snprintf(rel, sizeof(rel), "%s/%s", kind, algos[a]);
        DIR *d;
        int r = gc_opendir(g, rel, &d);
        if (r < 0)
            return r;
        struct dirent *de;
        size_t hex_len = a == 0 ? 64 : 128;
        while (r >= 0 && (de = readdir(d)))
            if (is_hex(de->d_name, hex_len))
                r = fn(g, dirfd(d), algos[a], de->d_name);
        closedir(d);
        if (r < 0)
            return r;
    }
    return 0;
}

static int gc_layer_at(struct gc *g, int dfd, const char *algo, const char *hex)
{
    return gc_layer(g, algo, hex);
}

/* The lock that guards a tmp/ entry: "<hex>.partial" a download's, "<hex>.*" an unpack's (the
 * layer's make lock), "run-*" a run's scratch directory's (its own, removed with it). */
static bool tmp_entry_lock(const char *name, char lock[PATH_MAX], bool *ret_own)
{
    *ret_own = strncmp(name, STORE_SCRATCH_PREFIX, strlen(STORE_SCRATCH_PREFIX)) == 0;
    if (*ret_own)
        return snprintf(lock, PATH_MAX, "%s.lock", name) < PATH_MAX;
    size_t n = strspn(name, "0123456789abcdef");
    if ((n != 64 && n != 128) || name[n] != '.')
        return false;
    const char *kind =
        strcmp(name + n, ".partial") == 0 ? STORE_BLOB_LOCK_SUFFIX : STORE_MAKE_LOCK_SUFFIX;
    snprintf(lock, PATH_MAX, "%.*s%s", (int)n, name, kind);
    return true;
}

/* What is in tmp/ was left by a killed pull, unpack, gc or run, unless its lock says it is in
 * use: a pull writes its manifest, config and record (tmp/write.*) only under store_gc_block. */
static int gc_tmp_entry(struct gc *g, int dfd, const char *name)
{
    char lock[PATH_MAX];
    bool own = false;
    _cleanup_close_ int fd = -1;
    if (tmp_entry_lock(name, lock, &own)) {
        int r = store_lock(g->s, lock, LOCK_EX | LOCK_NB, &fd);
        if (r == -EWOULDBLOCK) {
            g->stats.tmp_busy++;
            return 0;
        }
        if (r < 0)
            return errmsg_set(g->e, r, "cannot lock '%s/locks/%s': %s", g->s->root, lock,
                              strerror(-r));
    }
    int r = rm_tree_at(dfd, name, &g->stats.bytes_freed);
    if (r < 0)
        return errmsg_set(g->e, r, "cannot remove '%s/tmp/%s': %s", g->s->root, name, strerror(-r));
    /* Nobody can want a dead run's lock again: its name was unique. */
    if (own) {
        _cleanup_close_ int locks =
            openat(g->s->root_fd, "locks", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (locks >= 0)
            unlinkat(locks, lock, 0);
    }
    g->stats.tmp_removed++;
    return 0;
}

static int gc_tmp(struct gc *g)
{
    DIR *d;
    int r = gc_opendir(g, "tmp", &d);
    if (r < 0)
        return r;
    struct dirent *de;
    while (r >= 0 && (de = readdir(d)))
        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
            r = gc_tmp_entry(g, dirfd(d), de->d_name);
    closedir(d);
    return r;
}

static int gc_run(struct gc *g, char *const *keep)
{
    int r = store_image_list(g->s, &g->images, &g->n_images, g->e);
    if (r < 0)
        return r;
    r = gc_collect_refs(g, keep);
    if (r >= 0 && store_is_node(g->s))
        r = gc_collect_names(g, keep);
    if (r < 0)
        return r;
    r = store_is_node(g->s) ? gc_node_layers(g) : gc_sweep(g, "layers", gc_layer_at);
    if (r >= 0)
        r = gc_sweep(g, "blobs", gc_blob);
    if (r >= 0)
        r = gc_tmp(g);
    return r;
}

int store_gc(struct store *s, char *const *keep, struct store_gc_stats *ret, struct errmsg *e)
{
    _cleanup_close_ int lock = -1;
    /* Waits for another gc, and for pulls that save their records (a moment). */
    int r = store_lock(s, STORE_GC_LOCK, LOCK_EX, &lock);
    if (r < 0)
        return errmsg_set(e, r, "cannot lock '%s/locks/%s': %s", s->root, STORE_GC_LOCK,
                          strerror(-r));
    struct gc g = {.s = s, .e = e};
    r = gc_run(&g, keep);
    for (size_t i = 0; i < g.n_images; i++)
        image_record_done(&g.images[i]);
    free(g.images);
    free(g.refs);
    free(g.names);
    if (r < 0)
        return r;
    if (ret)
        *ret = g.stats;
    log_debug("gc of '%s': %u layers, %u blobs, %u tmp entries removed, %u layers busy", s->root,
              g.stats.layers_removed, g.stats.blobs_removed, g.stats.tmp_removed,
              g.stats.layers_busy);
    return 0;
}
