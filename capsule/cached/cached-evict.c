/* The node cache's size limit (max_size): after a pull, the least recently used images that no
 * container runs go until the layers left fit, then gc removes their files.
 *
 * Sizes are what the layers' files hold, noted at unpack (store_node_layer_size), each layer
 * counted once however many images share it. "Used" is a pull through the service (every start
 * of an image a user has not pulled is one); an image a container runs on now is never evicted:
 * its capsule holds its layer directories locked (store_node_layer_hold). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/cached/cached.h"
#include "capsule/image/ref.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/strv.h"

struct candidate {
    struct image_record *rec;
    char **paths; /* its layers' directories */
    int64_t last_used;
    bool in_use, evicted;
};

/* Whether a container runs on one of the layers (store_node_layer_busy). */
static bool held(char *const *paths)
{
    for (size_t i = 0; paths[i]; i++)
        if (store_node_layer_busy(paths[i], NULL) > 0)
            return true;
    return false;
}

static int layer_paths(struct cached *c, const struct image_record *r, char ***ret,
                       struct errmsg *e)
{
    struct image_ref ref = {0};
    int k = image_ref_parse(r->name, &ref, e);
    if (k < 0)
        return k;
    _cleanup_(store_freep) struct store *view = NULL;
    k = cached_view(c, ref.registry, &view, e);
    image_ref_done(&ref);
    _cleanup_strv_free_ char **paths = strv_new();
    for (size_t i = 0; k >= 0 && paths && i < r->n_layers; i++) {
        char *p = NULL;
        if ((k = store_layer_path(view, r->layers[i], &p)) >= 0)
            k = strv_consume(&paths, p);
    }
    if (k < 0 || !paths)
        return k < 0 ? k : -ENOMEM;
    *ret = TAKE_PTR(paths);
    return 0;
}

/* What the images not evicted hold, each layer once. */
static uint64_t kept_bytes(const struct candidate *v, size_t n)
{
    _cleanup_strv_free_ char **seen = strv_new();
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; !v[i].evicted && v[i].paths[k]; k++) {
            if (strv_contains(seen, v[i].paths[k]))
                continue;
            total += store_node_layer_size(v[i].paths[k]);
            (void)strv_push(&seen, v[i].paths[k]);
        }
    return total;
}

static int by_last_use(const void *a, const void *b)
{
    const struct candidate *x = a, *y = b;
    return x->last_used < y->last_used ? -1 : x->last_used > y->last_used;
}

/* Evicts in least-recently-used order until what is kept fits; keep (the image just served) and
 * images in use stay. Returns how many were evicted. */
static int evict_over(struct cached *c, struct candidate *v, size_t n, const char *keep,
                      struct errmsg *e)
{
    qsort(v, n, sizeof(*v), by_last_use);
    int evicted = 0;
    uint64_t total = kept_bytes(v, n);
    for (size_t i = 0; i < n && total > c->cfg->max_size; i++) {
        if (v[i].in_use || strcmp(v[i].rec->name, keep) == 0)
            continue;
        int r = store_image_remove(c->store, v[i].rec->name, e);
        if (r < 0 && r != -ENOENT)
            return r;
        cached_forget_use(c, v[i].rec->name);
        v[i].evicted = true;
        evicted++;
        log_info("evicted %s (last used %lld) to stay within max_size", v[i].rec->name,
                 (long long)v[i].last_used);
        total = kept_bytes(v, n);
    }
    if (total > c->cfg->max_size)
        log_warning("the node cache holds more than max_size: what is left is in use");
    return evicted;
}

int cached_evict(struct cached *c, const char *keep, struct errmsg *e)
{
    if (!c->cfg->max_size)
        return 0;
    pthread_mutex_lock(&c->evict_lock);
    struct image_record *recs = NULL;
    size_t n = 0;
    int r = store_image_list(c->store, &recs, &n, e);
    struct candidate *v = r >= 0 ? calloc(n + 1, sizeof(*v)) : NULL;
    if (r >= 0 && !v)
        r = errmsg_set(e, -ENOMEM, "out of memory");
    for (size_t i = 0; r >= 0 && i < n; i++) {
        v[i].rec = &recs[i];
        v[i].last_used = cached_last_use(c, &recs[i]);
        if ((r = layer_paths(c, &recs[i], &v[i].paths, e)) >= 0)
            v[i].in_use = held(v[i].paths);
    }
    if (r >= 0 && (r = evict_over(c, v, n, keep, e)) > 0) {
        atomic_fetch_add(&c->stats.evictions, (uint64_t)r);
        struct store_gc_stats st = {0};
        /* Pulls in progress go on: gc leaves what they hold. */
        r = store_gc(c->store, NULL, &st, e);
    }
    for (size_t i = 0; v && i < n; i++)
        strv_free(v[i].paths);
    free(v);
    for (size_t i = 0; i < n; i++)
        image_record_done(&recs[i]);
    free(recs);
    pthread_mutex_unlock(&c->evict_lock);
    return r;
}
