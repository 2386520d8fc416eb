/* capsule-cached's state and its API's routing: who may call what (peer credentials), the image
 * list, gc and /metrics. The pull itself is cached-pull.c. */
#include "capsule/cached/cached.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capsule/node/node-protocol.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/prom.h"

int cached_init(struct cached *c, const struct cached_config *cfg, struct errmsg *e)
{
    *c = (struct cached){.cfg = cfg};
    pthread_mutex_init(&c->lock, NULL);
    pthread_mutex_init(&c->evict_lock, NULL);
    pthread_mutex_init(&c->save_lock, NULL);
    /* Writers first: a rekey waiting for the pulls under way holds new ones off. */
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&c->key_lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    int r = roles_init(&c->roles, cfg->admin_group, e);
    if (r < 0)
        return r;
    if (r == 1)
        log_warning("admin_group '%s' does not exist: only root may run gc", cfg->admin_group);
    r = store_open_node(cfg->dir, &c->store, e);
    if (r >= 0 && (r = cached_uses_load(c)) < 0)
        errmsg_set(e, r, "out of memory");
    return r;
}

void cached_done(struct cached *c)
{
    store_free(c->store);
    roles_done(&c->roles);
    cached_uses_done(c);
    pthread_mutex_destroy(&c->lock);
    pthread_mutex_destroy(&c->evict_lock);
    pthread_mutex_destroy(&c->save_lock);
    pthread_rwlock_destroy(&c->key_lock);
}

int cached_view(struct cached *c, const char *origin, struct store **ret, struct errmsg *e)
{
    pthread_rwlock_rdlock(&c->key_lock);
    int r = store_node_view(c->store, origin, ret, e);
    pthread_rwlock_unlock(&c->key_lock);
    return r;
}

/* GET /v1/images: what is cached, for everyone. Names only and sizes: the node's users can see
 * which images the node holds (as `docker images` on a shared host shows), never their files. */
static void list_images(struct cached *c, struct http_reply *reply)
{
    struct image_record *recs = NULL;
    size_t n = 0;
    struct errmsg e = {{0}};
    int r = store_image_list(c->store, &recs, &n, &e);
    if (r < 0) {
        http_reply_error(reply, 500, "%s", e.text);
        return;
    }
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++)
        json_array_append_new(list, json_pack("{s:s, s:I, s:I, s:I, s:I, s:I}", "image",
                                              recs[i].name, "size", (json_int_t)recs[i].size,
                                              "layers", (json_int_t)recs[i].n_layers, "pulled_at",
                                              (json_int_t)recs[i].pulled_at, "last_used",
                                              (json_int_t)cached_last_use(c, &recs[i]), "users",
                                              (json_int_t)cached_users(c, recs[i].name)));
    for (size_t i = 0; i < n; i++)
        image_record_done(&recs[i]);
    free(recs);
    http_reply_json(reply, 200, list);
}

/* A new node key. Pulls under way are cancelled (their requesters ask again: 503) and new ones
 * wait, so that no pull computes a name under the old key after it; a pull that does not stop
 * within REKEY_WAIT_S (blocked on a registry that sends nothing) makes it a 409. */
#define REKEY_WAIT_S 90

static int rekey(struct cached *c, struct errmsg *e)
{
    atomic_store(&c->rekeying, true);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += REKEY_WAIT_S;
    int r = -pthread_rwlock_timedwrlock(&c->key_lock, &until);
    if (r == 0) {
        r = store_node_rekey(c->store, e);
        pthread_rwlock_unlock(&c->key_lock);
    } else
        r = errmsg_set(e, -EBUSY, "pulls under way did not stop within %d s; rekey again",
                       REKEY_WAIT_S);
    atomic_store(&c->rekeying, false);
    return r;
}

/* POST /v1/gc: root and the admin group. */
static void run_gc(struct cached *c, const struct http_request *req, struct http_reply *reply)
{
    if (!roles_is_admin(&c->roles, req->peer.uid, req->peer.gid)) {
        http_reply_error(reply, 403, "only root%s%s%s may collect the node cache's garbage",
                         roles_admin_group(&c->roles) ? " and members of group '" : "",
                         roles_admin_group(&c->roles) ? roles_admin_group(&c->roles) : "",
                         roles_admin_group(&c->roles) ? "'" : "");
        return;
    }
    struct store_gc_stats st = {0};
    struct errmsg e = {{0}};
    int renamed = 0, r = 0;
    /* A new key first: the old names then belong to nothing, and this gc removes them. */
    if (http_request_query(req, "rekey")) {
        r = renamed = rekey(c, &e);
        if (r >= 0)
            log_notice("new node key by uid %u: %d layers renamed", (unsigned)req->peer.uid,
                       renamed);
    }
    if (r >= 0)
        r = store_gc(c->store, NULL, &st, &e);
    if (r < 0) {
        http_reply_error(reply, r == -EBUSY ? 409 : 500, "%s", e.text);
        return;
    }
    log_info("gc by uid %u: %u layers, %u blobs removed, %u busy", (unsigned)req->peer.uid,
             st.layers_removed, st.blobs_removed, st.layers_busy);
    http_reply_json(reply, 200,
                    json_pack("{s:I, s:I, s:I, s:I, s:I}", "removed_layers",
                              (json_int_t)st.layers_removed, "removed_blobs",
                              (json_int_t)st.blobs_removed, "busy_layers",
                              (json_int_t)st.layers_busy, "freed_bytes", (json_int_t)st.bytes_freed,
                              "renamed_layers", (json_int_t)renamed));
}

static int metric(struct prom_writer *w, const char *name, enum prom_type type, const char *help,
                  double value)
{
    int r = prom_family(w, name, type, help);
    return r < 0 ? r : prom_sample(w, NULL, value);
}

static int render_metrics(struct cached *c, struct prom_writer *w)
{
    const struct cached_stats *s = &c->stats;
    int r = prom_family(w, "capsule_cached_pulls", PROM_TYPE_COUNTER,
                        "Pull requests by outcome: served, refused (the request or the registry "
                        "said no), failed.");
    const char *served[] = {"outcome", "served", NULL}, *refused[] = {"outcome", "refused", NULL},
               *failed[] = {"outcome", "failed", NULL};
    if (r >= 0)
        r = prom_sample(w, served, (double)atomic_load(&s->pulls_served));
    if (r >= 0)
        r = prom_sample(w, refused, (double)atomic_load(&s->pulls_refused));
    if (r >= 0)
        r = prom_sample(w, failed, (double)atomic_load(&s->pulls_failed));
    if (r >= 0)
        r = metric(w, "capsule_cached_layers_fetched", PROM_TYPE_COUNTER,
                   "Layers downloaded and unpacked.", (double)atomic_load(&s->layers_fetched));
    if (r >= 0)
        r = metric(w, "capsule_cached_layer_hits", PROM_TYPE_COUNTER,
                   "Layers a request found in the cache.", (double)atomic_load(&s->layer_hits));
    if (r >= 0)
        r = metric(w, "capsule_cached_fetched_bytes", PROM_TYPE_COUNTER,
                   "Compressed bytes downloaded from registries.",
                   (double)atomic_load(&s->bytes_fetched));
    if (r >= 0)
        r = metric(w, "capsule_cached_evictions", PROM_TYPE_COUNTER,
                   "Images evicted to stay within max_size.", (double)atomic_load(&s->evictions));
    return r;
}

static int render_images(struct cached *c, struct prom_writer *w)
{
    struct image_record *recs = NULL;
    size_t n = 0;
    struct errmsg e = {{0}};
    int r = store_image_list(c->store, &recs, &n, &e);
    if (r < 0)
        return r;
    int64_t size = 0;
    for (size_t i = 0; i < n; i++) {
        size += recs[i].size;
        image_record_done(&recs[i]);
    }
    free(recs);
    r = metric(w, "capsule_cached_images", PROM_TYPE_GAUGE, "Images in the node cache.", (double)n);
    if (r >= 0)
        r = metric(w, "capsule_cached_images_bytes", PROM_TYPE_GAUGE,
                   "Compressed size of the cached images' layers, each image counted whole.",
                   (double)size);
    return r;
}

void cached_handle_metrics(const struct http_request *req, struct http_reply *reply, void *userdata)
{
    struct cached *c = userdata;
    if (strcmp(req->path, "/metrics") != 0 || strcmp(req->method, "GET") != 0) {
        http_reply_error(reply, 404, "no such resource: %s %s", req->method, req->path);
        return;
    }
    struct prom_writer *w = NULL;
    char *text = NULL;
    size_t len = 0;
    int r = prom_writer_new(PROM_FORMAT_TEXT, &w);
    if (r >= 0 && (r = render_metrics(c, w)) >= 0 && (r = render_images(c, w)) >= 0) {
        r = prom_writer_finish(w, &text, &len); /* frees w, also when it fails */
        w = NULL;
    }
    prom_writer_free(w);
    if (r >= 0)
        http_reply_take(reply, 200, prom_content_type(PROM_FORMAT_TEXT), text, len, true);
    else
        http_reply_error(reply, 500, "metrics: %s", strerror(-r));
}

void cached_handle(const struct http_request *req, struct http_reply *reply, void *userdata)
{
    struct cached *c = userdata;
    bool post = strcmp(req->method, "POST") == 0, get = strcmp(req->method, "GET") == 0;
    if (post && strcmp(req->path, NODE_PULL_PATH) == 0)
        cached_pull(c, req, reply);
    else if (get && strcmp(req->path, NODE_IMAGES_PATH) == 0)
        list_images(c, reply);
    else if (post && strcmp(req->path, NODE_GC_PATH) == 0)
        run_gc(c, req, reply);
    else
        cached_handle_metrics(req, reply, userdata);
}
