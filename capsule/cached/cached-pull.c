/* POST /v1/pull: fetch (or find) an image's layers for a requester, with the requester's own
 * credentials, and answer their directories.
 *
 * What makes the answer safe to give: the service fetches the manifest itself, by digest, with
 * the requester's credentials (pull_image), so the registry has accepted them for this image;
 * every layer it fetches is fetched with them too; and a layer that is already here (someone
 * else's download) counts only after the registry answers a HEAD of it in this repository with
 * those credentials (pull_opts.check_cached). The layer's directory name is keyed by the node's
 * secret, so a path is learnt only from such an answer. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/cached/cached.h"
#include "capsule/node/node-protocol.h"
#include "capsule/registry/pull.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/units.h"

/* What one request's pull did, from its events (several download threads). */
struct pull_tally {
    struct cached *c;
    size_t n;
    _Atomic int64_t *bytes; /* per layer, the last count heard */
};

static void tally_layers(void *userdata, size_t n, const char *const *ids, const int64_t *sizes)
{
    (void)ids;
    (void)sizes;
    struct pull_tally *t = userdata;
    t->bytes = calloc(n, sizeof(*t->bytes));
    t->n = t->bytes ? n : 0;
}

static void tally_bytes(void *userdata, size_t i, int64_t done, int64_t total)
{
    (void)total;
    struct pull_tally *t = userdata;
    if (i < t->n)
        atomic_store(&t->bytes[i], done);
}

static void tally_state(void *userdata, size_t i, enum pull_layer_state state)
{
    struct pull_tally *t = userdata;
    if (state == PULL_LAYER_EXISTS)
        atomic_fetch_add(&t->c->stats.layer_hits, 1);
    else if (state == PULL_LAYER_DONE) {
        atomic_fetch_add(&t->c->stats.layers_fetched, 1);
        if (i < t->n)
            atomic_fetch_add(&t->c->stats.bytes_fetched, (uint64_t)atomic_load(&t->bytes[i]));
    }
}

/* The HTTP status for a failed pull: the requester's fault, the registry's, or ours. */
static unsigned status_of(int r)
{
    switch (r) {
    case -EINVAL:
        return 400;
    case -EACCES:
        return 403;
    case -EKEYEXPIRED:
        return NODE_STATUS_EXPIRED;
    case -EPROTO:
    case -EDQUOT:
        return NODE_STATUS_NOT_TAKEN;
    case -ECANCELED:
        return NODE_STATUS_AGAIN;
    case -ENOENT:
        return 404;
    case -EFBIG:
        return 413;
    case -ENOSPC:
        return 507;
    case -ENOMEM:
        return 500;
    default:
        return 502;
    }
}

/* The answer: each layer's directory, its lease made (store_node_layer_hold). */
struct answer {
    struct store *view;
    json_t *json;
};

static int answer(void *userdata, const struct image_record *rec, struct errmsg *e)
{
    struct answer *a = userdata;
    struct store *view = a->view;
    json_t **ret = &a->json;
    json_t *layers = json_array();
    int r = layers ? 0 : -ENOMEM;
    for (size_t i = 0; r >= 0 && i < rec->n_layers; i++) {
        _cleanup_free_ char *path = NULL;
        if ((r = store_layer_path(view, rec->layers[i], &path)) >= 0 &&
            (r = store_node_layer_lease(path, e)) >= 0)
            r = json_array_append_new(
                    layers, json_pack("{s:s, s:s}", "digest", rec->layers[i], "path", path)) < 0
                    ? -ENOMEM
                    : 0;
    }
    *ret = r >= 0 ? json_pack("{s:s, s:s, s:s, s:O}", "image", rec->name, "manifest_digest",
                              rec->manifest_digest, "config_digest", rec->config_digest, "layers",
                              layers)
                  : NULL;
    json_decref(layers);
    if (r >= 0 && !*ret)
        r = -ENOMEM;
    if (r == -ENOMEM)
        errmsg_set(e, r, "out of memory");
    return r;
}

/* With max_user_size: a pull's part of its requester's share, reserved before it fetches
 * (pull_opts.reserve) and given back when it ends, when its image counts as the uid's. */
struct share {
    struct cached *c;
    uid_t uid;
    uint64_t reserved;
};

static int reserve_share(void *userdata, uint64_t need, struct errmsg *e)
{
    struct share *sh = userdata;
    int r = cached_share_reserve(sh->c, sh->uid, need, e);
    if (r >= 0)
        sh->reserved = need;
    return r;
}

/* Pulls ref into view for uid with the requester's credentials; a->json is the answer, made
 * while the pull still holds the layers. */
static int pull_for(struct cached *c, struct answer *a, const struct image_ref *ref, uid_t uid,
                    const char *auth, struct image_record *rec, struct errmsg *e)
{
    struct pull_tally tally = {.c = c};
    const struct pull_events events = {
        .layers = tally_layers,
        .layer_bytes = tally_bytes,
        .layer_state = tally_state,
        .userdata = &tally,
    };
    struct pull_opts o = {
        .registry = {.insecure = c->cfg->insecure,
                     .loopback_needs_listing = true,
                     .cancel = &c->rekeying,
                     .config_name = c->cfg->path,
                     .ca_file = c->cfg->ca_file,
                     .authorization = auth},
        .parallel = c->cfg->parallel,
        .events = &events,
        .max_layer_size = c->cfg->max_layer_size,
        .max_unpacked_size = c->cfg->max_unpacked_size,
        .check_cached = true,
        .saved = answer,
        .saved_userdata = a,
    };
    struct share sh = {.c = c, .uid = uid};
    if (c->cfg->max_user_size) {
        o.reserve = reserve_share;
        o.reserve_userdata = &sh;
    }
    int r = pull_image(a->view, ref, &o, rec, e);
    /* A pull that succeeded counts as the uid's from here on (cached_note_use, before this
     * returns to the request); one that failed took nothing. */
    if (r >= 0)
        cached_note_use(c, rec->name, uid);
    cached_share_release(c, uid, sh.reserved);
    free(tally.bytes);
    /* Plain HTTP, or TLS the service cannot check: whoever answers on that address could vouch
     * for any layer there, so the service shares nothing from it unless its administrator lists
     * the address (insecure_registries, loopback ones too). */
    if (r == -EPROTO) {
        struct errmsg why = *e;
        r = errmsg_set(e, r, "the node cache does not take images from %s: %s", ref->registry,
                       why.text);
    }
    if (r == -ECANCELED)
        r = errmsg_set(e, r, "the node cache is changing its key; ask again");
    if (r == -EDQUOT) {
        struct errmsg why = *e;
        char max[16];
        r = errmsg_set(e, r,
                       "the node cache does not take more images that only uid %u uses "
                       "(max_user_size %s): %s",
                       (unsigned)uid, units_format_bytes((int64_t)c->cfg->max_user_size, max),
                       why.text);
    }
    return r;
}

void cached_pull(struct cached *c, const struct http_request *req, struct http_reply *reply)
{
    struct errmsg e = {{0}};
    struct image_ref ref = {0};
    char *auth = NULL;
    struct image_record rec = {0};
    struct answer a = {0};
    int r = node_pull_request_parse(req->body, req->body_len, &ref, &auth, &e);
    /* From the view (whose names are under the current key) to the answer, no rekey: the key
     * lock, which a rekey takes exclusively (cached.c). */
    pthread_rwlock_rdlock(&c->key_lock);
    /* The registry's own layers: see store_node_view. */
    if (r >= 0)
        r = store_node_view(c->store, ref.registry, &a.view, &e);
    if (r >= 0)
        r = pull_for(c, &a, &ref, req->peer.uid, auth, &rec, &e);
    pthread_rwlock_unlock(&c->key_lock);
    store_free(a.view);
    if (auth) {
        explicit_bzero(auth, strlen(auth));
        free(auth);
    }
    json_t *j = a.json;
    if (r >= 0) {
        atomic_fetch_add(&c->stats.pulls_served, 1);
        log_info("uid %u: %s (%zu layers)", (unsigned)req->peer.uid, rec.name, rec.n_layers);
        http_reply_json(reply, 200, j);
        /* Room for what comes next; the answer stands either way (this image is never
         * evicted here). */
        struct errmsg ee = {{0}};
        if (cached_evict(c, rec.name, &ee) < 0)
            log_warning("eviction: %s", ee.text);
    } else {
        unsigned status = status_of(r);
        atomic_fetch_add(status < 500 ? &c->stats.pulls_refused : &c->stats.pulls_failed, 1);
        log_notice("uid %u: %s", (unsigned)req->peer.uid, e.text);
        http_reply_error(reply, status, "%s", e.text);
        json_decref(j);
    }
    image_record_done(&rec);
    image_ref_done(&ref);
}
