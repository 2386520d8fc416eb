/* Who used each cached image and when: for `capsule images --node` (last use, how many users)
 * and least-recently-used eviction. Kept in memory and in the store's uses.json, rewritten after
 * each change, so that a restarted service still knows: {"IMAGE": {"last_used": T, "uids": [..]}}.
 * A damaged file costs only what it knew (a warning, and the pulls' own times stand in). */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capsule/cached/cached.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/units.h"

#define USES_FILE "uses.json"
#define USES_MAX  (16u << 20)

static struct cached_use *use_find(const struct cached *c, const char *image)
{
    for (size_t i = 0; i < c->n_uses; i++)
        if (strcmp(c->uses[i].image, image) == 0)
            return &c->uses[i];
    return NULL;
}

static struct cached_use *use_add(struct cached *c, const char *image)
{
    struct cached_use *grown = realloc(c->uses, (c->n_uses + 1) * sizeof(*grown));
    if (!grown)
        return NULL;
    c->uses = grown;
    struct cached_use *u = &c->uses[c->n_uses];
    *u = (struct cached_use){.image = strdup(image)};
    if (!u->image)
        return NULL;
    c->n_uses++;
    return u;
}

static bool use_add_uid(struct cached_use *u, uid_t uid)
{
    for (size_t i = 0; i < u->n_uids; i++)
        if (u->uids[i] == uid)
            return true;
    uid_t *grown = realloc(u->uids, (u->n_uids + 1) * sizeof(*grown));
    if (!grown)
        return false;
    grown[u->n_uids++] = uid;
    u->uids = grown;
    return true;
}

static json_t *uses_to_json(const struct cached *c)
{
    json_t *all = json_object();
    for (size_t i = 0; all && i < c->n_uses; i++) {
        const struct cached_use *u = &c->uses[i];
        json_t *uids = json_array();
        for (size_t k = 0; uids && k < u->n_uids; k++)
            json_array_append_new(uids, json_integer((json_int_t)u->uids[k]));
        json_t *one =
            uids ? json_pack("{s:I, s:o}", "last_used", (json_int_t)u->last_used, "uids", uids)
                 : NULL;
        if (!one || json_object_set_new(all, u->image, one) < 0) {
            json_decref(all);
            return NULL;
        }
    }
    return all;
}

/* Writes the table as it is now; called without c->lock, so that nobody waits for the disk (or
 * for a gc, whose lock the write takes) to look a use up. Writes come one at a time, each of the
 * table as it was when it began, so the last one written is the newest. A failure is logged:
 * the table in memory is still right. */
static void uses_save(struct cached *c)
{
    pthread_mutex_lock(&c->save_lock);
    pthread_mutex_lock(&c->lock);
    json_t *j = uses_to_json(c);
    pthread_mutex_unlock(&c->lock);
    char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    struct errmsg e = {{0}};
    if (!text)
        log_warning("cannot record image uses: out of memory");
    else if (store_node_state_write(c->store, USES_FILE, text, strlen(text), &e) < 0)
        log_warning("cannot record image uses: %s", e.text);
    free(text);
    pthread_mutex_unlock(&c->save_lock);
}

static int use_from_json(struct cached *c, const char *image, json_t *one)
{
    json_t *t = json_object_get(one, "last_used"), *uids = json_object_get(one, "uids");
    if (!json_is_integer(t) || !json_is_array(uids))
        return -EBADMSG;
    struct cached_use *u = use_find(c, image);
    if (!u && !(u = use_add(c, image)))
        return -ENOMEM;
    u->last_used = (int64_t)json_integer_value(t);
    size_t i;
    json_t *v;
    json_array_foreach(uids, i, v)
    {
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > (json_int_t)(uid_t)-1)
            return -EBADMSG;
        if (!use_add_uid(u, (uid_t)json_integer_value(v)))
            return -ENOMEM;
    }
    return 0;
}

int cached_uses_load(struct cached *c)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = store_node_state_read(c->store, USES_FILE, USES_MAX, &text, &len);
    if (r == -ENOENT)
        return 0;
    json_t *all = r >= 0 ? json_loadb(text, len, 0, NULL) : NULL;
    if (r >= 0 && !json_is_object(all))
        r = -EBADMSG;
    const char *image;
    json_t *one;
    json_object_foreach(all, image, one)
    {
        if (r < 0)
            break;
        r = use_from_json(c, image, one);
    }
    json_decref(all);
    if (r == -ENOMEM)
        return r;
    if (r < 0) {
        cached_uses_done(c); /* all of it, not the part before the damage */
        log_warning("%s/" USES_FILE " is damaged (%s): who used which image is forgotten",
                    c->cfg->dir, strerror(-r));
    }
    return 0;
}

void cached_uses_done(struct cached *c)
{
    for (size_t i = 0; i < c->n_uses; i++) {
        free(c->uses[i].image);
        free(c->uses[i].uids);
    }
    free(c->uses);
    c->uses = NULL;
    c->n_uses = 0;
    free(c->reserved);
    c->reserved = NULL;
    c->n_reserved = 0;
}

void cached_note_use(struct cached *c, const char *image, uid_t uid)
{
    pthread_mutex_lock(&c->lock);
    struct cached_use *u = use_find(c, image);
    if (!u)
        u = use_add(c, image);
    if (u) {
        u->last_used = (int64_t)time(NULL);
        (void)use_add_uid(u, uid);
    }
    pthread_mutex_unlock(&c->lock);
    if (u)
        uses_save(c);
}

void cached_forget_use(struct cached *c, const char *image)
{
    pthread_mutex_lock(&c->lock);
    struct cached_use *u = use_find(c, image);
    if (u) {
        free(u->image);
        free(u->uids);
        *u = c->uses[--c->n_uses];
    }
    pthread_mutex_unlock(&c->lock);
    if (u)
        uses_save(c);
}

int64_t cached_last_use(struct cached *c, const struct image_record *r)
{
    pthread_mutex_lock(&c->lock);
    const struct cached_use *u = use_find(c, r->name);
    int64_t t = u && u->last_used > r->pulled_at ? u->last_used : r->pulled_at;
    pthread_mutex_unlock(&c->lock);
    return t;
}

/* Whether uid is the image's only user. */
static bool sole_user(struct cached *c, const char *image, uid_t uid)
{
    pthread_mutex_lock(&c->lock);
    const struct cached_use *u = use_find(c, image);
    bool sole = u && u->n_uids == 1 && u->uids[0] == uid;
    pthread_mutex_unlock(&c->lock);
    return sole;
}

int cached_user_bytes(struct cached *c, uid_t uid, uint64_t *ret, struct errmsg *e)
{
    struct image_record *recs = NULL;
    size_t n = 0;
    int r = store_image_list(c->store, &recs, &n, e);
    if (r < 0)
        return r;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (sole_user(c, recs[i].name, uid))
            total += (uint64_t)recs[i].size;
        image_record_done(&recs[i]);
    }
    free(recs);
    *ret = total;
    return 0;
}

static struct cached_reservation *reservation(struct cached *c, uid_t uid)
{
    for (size_t i = 0; i < c->n_reserved; i++)
        if (c->reserved[i].uid == uid)
            return &c->reserved[i];
    struct cached_reservation *grown = realloc(c->reserved, (c->n_reserved + 1) * sizeof(*grown));
    if (!grown)
        return NULL;
    c->reserved = grown;
    grown[c->n_reserved] = (struct cached_reservation){.uid = uid};
    return &grown[c->n_reserved++];
}

int cached_share_reserve(struct cached *c, uid_t uid, uint64_t need, struct errmsg *e)
{
    uint64_t used = 0, max = c->cfg->max_user_size;
    int r = cached_user_bytes(c, uid, &used, e);
    if (r < 0)
        return r;
    pthread_mutex_lock(&c->lock);
    struct cached_reservation *v = reservation(c, uid);
    uint64_t taken = v ? used + v->bytes : 0;
    char a[16], b[16];
    if (!v)
        r = errmsg_set(e, -ENOMEM, "out of memory");
    else if (need > 0 && taken + need > max)
        r = errmsg_set(e, -EDQUOT, "the layers to fetch declare %s, and %s of the share is left",
                       units_format_bytes((int64_t)need, a),
                       units_format_bytes(taken < max ? (int64_t)(max - taken) : 0, b));
    else
        v->bytes += need;
    pthread_mutex_unlock(&c->lock);
    return r;
}

void cached_share_release(struct cached *c, uid_t uid, uint64_t bytes)
{
    pthread_mutex_lock(&c->lock);
    for (size_t i = 0; i < c->n_reserved; i++)
        if (c->reserved[i].uid == uid)
            c->reserved[i].bytes -= bytes < c->reserved[i].bytes ? bytes : c->reserved[i].bytes;
    pthread_mutex_unlock(&c->lock);
}

size_t cached_users(struct cached *c, const char *image)
{
    pthread_mutex_lock(&c->lock);
    const struct cached_use *u = use_find(c, image);
    size_t n = u ? u->n_uids : 0;
    pthread_mutex_unlock(&c->lock);
    return n;
}
