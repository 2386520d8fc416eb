/* capsule-cached: the node cache's service. It owns the node store (store_open_node), pulls and
 * unpacks on users' requests with their own credentials, and answers layer directories only
 * to a requester whose credentials the registry accepted for a manifest that lists them
 * (docs/design/capsule-node-cache.md). It runs as its own system account, with no capabilities;
 * it never runs user code and never mounts anything. */
#pragma once

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "capsule/store/store.h"
#include "lib/errmsg.h"
#include "lib/http-server.h"
#include "lib/roles.h"

#define CACHED_CONFIG_PATH    "/etc/gpunode/capsule-cached.conf"
#define CACHED_DIR_DEFAULT    "/var/cache/capsule"
#define CACHED_SOCKET_DEFAULT "/run/capsule/cache.sock"

/* /etc/gpunode/capsule-cached.conf, section [cache]:
 *   dir = PATH                 the node store (default /var/cache/capsule)
 *   socket = PATH              the Unix socket (default /run/capsule/cache.sock, mode 0666)
 *   metrics = HOST:PORT        /metrics on TCP too (default none; the socket always has it)
 *   admin_group = NAME         who besides root may run gc (default none)
 *   insecure_registries = H H  hosts the service may reach over plain HTTP (loopback ones too)
 *   ca_file = PATH             extra CA bundle for registries
 *   parallel_downloads = N     layers fetched at once per request, 1..32 (default 4)
 *   max_layer_size = SIZE      as capsule.conf's (default 64G)
 *   max_unpacked_size = SIZE   as capsule.conf's (default 256G)
 *   max_size = SIZE            what the cached layers may hold (their files' bytes); past it
 *                              the least recently used images no container runs are evicted
 *                              (default 0: no limit)
 *   max_user_size = SIZE       what one user's images that nobody else uses may hold (their
 *                              compressed size, as `capsule images --node` shows it); a pull
 *                              that would fetch past it is left to the user's own cache
 *                              (default 0: no limit) */
struct cached_config {
    char *path; /* the file, for messages (the default one's name also when it is missing) */
    char *dir, *socket, *metrics, *admin_group, *ca_file;
    char **insecure; /* NULL-terminated, never NULL */
    unsigned parallel;
    uint64_t max_layer_size, max_unpacked_size, max_size, max_user_size;
};
/* Loads path (NULL: CACHED_CONFIG_PATH, which may be missing); errors name file:line. */
int cached_config_load(const char *path, struct cached_config *ret, struct errmsg *e);
void cached_config_done(struct cached_config *c);

/* Who used an image, for `capsule images --node` and least-recently-used eviction. */
struct cached_use {
    char *image;
    uid_t *uids;
    size_t n_uids;
    int64_t last_used;
};

/* What a uid's pulls under way may still fetch into its share (max_user_size). */
struct cached_reservation {
    uid_t uid;
    uint64_t bytes;
};

struct cached_stats {
    atomic_uint_fast64_t pulls_served, pulls_refused, pulls_failed;
    atomic_uint_fast64_t layers_fetched, layer_hits, bytes_fetched, evictions;
};

struct cached {
    const struct cached_config *cfg;
    struct store *store;
    struct roles roles;
    struct cached_stats stats;
    pthread_mutex_t lock;       /* guards uses and reserved */
    pthread_mutex_t save_lock;  /* one write of uses.json at a time, outside lock */
    pthread_mutex_t evict_lock; /* one eviction at a time */
    /* Views of the store (store_node_view) copy its key: taken shared by a pull from its view to
     * its answer, and to make any other view; exclusively to change the key (gc --rekey), which
     * new pulls then wait for (writers first) while pulls under way are cancelled (rekeying). */
    pthread_rwlock_t key_lock;
    atomic_bool rekeying;
    struct cached_use *uses;
    size_t n_uses;
    struct cached_reservation *reserved; /* max_user_size: pulls under way, per uid */
    size_t n_reserved;
};

int cached_init(struct cached *c, const struct cached_config *cfg, struct errmsg *e);
void cached_done(struct cached *c);

/* The HTTP handler of the socket (and of the metrics listener, which serves /metrics only). */
void cached_handle(const struct http_request *req, struct http_reply *reply, void *userdata);
void cached_handle_metrics(const struct http_request *req, struct http_reply *reply,
                           void *userdata);

/* cached-pull.c: POST /v1/pull. */
void cached_pull(struct cached *c, const struct http_request *req, struct http_reply *reply);
/* cached-uses.c: who used which image, kept across restarts in the store's uses.json. Load at
 * start (a damaged file is warned about and forgotten; -ENOMEM), done at the end. */
int cached_uses_load(struct cached *c);
void cached_uses_done(struct cached *c);
/* Notes that uid used image now. */
void cached_note_use(struct cached *c, const char *image, uid_t uid);
/* Forgets an image's uses (it was evicted). */
void cached_forget_use(struct cached *c, const char *image);
/* When r was last used: asked for through the service, else pulled. */
int64_t cached_last_use(struct cached *c, const struct image_record *r);
/* How many users asked for image. */
size_t cached_users(struct cached *c, const char *image);
/* The compressed bytes of the images that uid alone has asked for (max_user_size). */
int cached_user_bytes(struct cached *c, uid_t uid, uint64_t *ret, struct errmsg *e);
/* Reserves need bytes of uid's share for a pull under way, counting its images and its other
 * pulls under way: 0, or -EDQUOT saying what is left. Released with cached_share_release once
 * the pull has ended (its image, if any, then counts through cached_note_use). */
int cached_share_reserve(struct cached *c, uid_t uid, uint64_t need, struct errmsg *e);
void cached_share_release(struct cached *c, uid_t uid, uint64_t bytes);

/* A view of the node store for registry origin, under key_lock. */
int cached_view(struct cached *c, const char *origin, struct store **ret, struct errmsg *e);

/* cached-evict.c: keeps the cache within max_size, never evicting keep (the image just served)
 * or an image a container runs on. Returns how many images went, or -errno with a message. */
int cached_evict(struct cached *c, const char *keep, struct errmsg *e);
