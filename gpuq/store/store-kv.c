/* The small tables beside the jobs: settings, fair-share usage and job events. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "gpuq/store/store-private.h"

static const struct store_sql sql_meta_get = {STORE_STMT_META_GET, "reading a setting",
                                              "SELECT value FROM meta WHERE key = :key"};
static const struct store_sql sql_meta_set = {
    STORE_STMT_META_SET, "writing a setting",
    "INSERT INTO meta (key, value) VALUES (:key, :value)"
    " ON CONFLICT (key) DO UPDATE SET value = excluded.value"};
static const struct store_sql sql_meta_delete = {STORE_STMT_META_DELETE, "removing a setting",
                                                 "DELETE FROM meta WHERE key = :key"};
static const struct store_sql sql_usage_get = {
    STORE_STMT_USAGE_GET, "reading usage",
    "SELECT value, time FROM usage WHERE queue = :queue AND uid = :uid"};
static const struct store_sql sql_usage_set = {
    STORE_STMT_USAGE_SET, "writing usage",
    "INSERT INTO usage (queue, uid, value, time) VALUES (:queue, :uid, :value, :time)"
    " ON CONFLICT (queue, uid) DO UPDATE SET value = excluded.value, time = excluded.time"};
static const struct store_sql sql_usage_each = {
    STORE_STMT_USAGE_EACH, "reading usage",
    "SELECT queue, uid, value, time FROM usage ORDER BY queue, uid"};
static const struct store_sql sql_event_add = {
    STORE_STMT_EVENT_ADD, "adding a job event",
    "INSERT INTO events (job_id, time, text) VALUES (:job, :time, :text)"};
/* Keeps the newest STORE_EVENTS_MAX: deletes from the first one beyond them down. */
static const struct store_sql sql_event_trim = {
    STORE_STMT_EVENT_TRIM, "dropping old job events",
    "DELETE FROM events WHERE job_id = :job AND seq <= (SELECT seq FROM events"
    " WHERE job_id = :job ORDER BY seq DESC LIMIT 1 OFFSET :keep)"};
static const struct store_sql sql_events_each = {
    STORE_STMT_EVENTS_EACH, "reading job events",
    "SELECT time, text FROM events WHERE job_id = :job ORDER BY seq"};

int store_meta_get(struct store *s, const char *key, char **ret, struct errmsg *e)
{
    if (!key)
        return errmsg_set(e, -EINVAL, "'%s': reading a setting: no key", s->path);
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, &sql_meta_get, &q, e);
    if (r < 0)
        return r;
    store_bind_text(&q, ":key", key, -1);
    r = store_query_step(&q, e);
    if (r < 0)
        return r;
    if (r == 0)
        return errmsg_set(e, -ENOENT, "'%s': setting '%s' is not set", s->path, key);
    const char *v = (const char *)sqlite3_column_text(q.st, 0);
    char *copy = strdup(v ? v : "");
    if (!copy)
        return -ENOMEM;
    *ret = copy;
    return 0;
}

int store_meta_set(struct store *s, const char *key, const char *value, struct errmsg *e)
{
    if (!key || !value)
        return errmsg_set(e, -EINVAL, "'%s': writing a setting: no key or value", s->path);
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, &sql_meta_set, &q, e);
    if (r < 0)
        return r;
    store_bind_text(&q, ":key", key, -1);
    store_bind_text(&q, ":value", value, -1);
    return store_query_run(&q, e);
}

int store_meta_delete(struct store *s, const char *key, struct errmsg *e)
{
    if (!key)
        return errmsg_set(e, -EINVAL, "'%s': removing a setting: no key", s->path);
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, &sql_meta_delete, &q, e);
    if (r < 0)
        return r;
    store_bind_text(&q, ":key", key, -1);
    return store_query_run(&q, e);
}

int store_usage_get(struct store *s, const char *queue, uid_t uid, double *ret_value,
                    double *ret_time, struct errmsg *e)
{
    if (!queue)
        return errmsg_set(e, -EINVAL, "'%s': reading usage: no queue", s->path);
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, &sql_usage_get, &q, e);
    if (r < 0)
        return r;
    store_bind_text(&q, ":queue", queue, -1);
    store_bind_i64(&q, ":uid", uid);
    r = store_query_step(&q, e);
    if (r < 0)
        return r;
    if (ret_value)
        *ret_value = r ? sqlite3_column_double(q.st, 0) : 0;
    if (ret_time)
        *ret_time = r ? sqlite3_column_double(q.st, 1) : 0;
    return 0;
}

int store_usage_set(struct store *s, const char *queue, uid_t uid, double value, double time,
                    struct errmsg *e)
{
    if (!queue)
        return errmsg_set(e, -EINVAL, "'%s': writing usage: no queue", s->path);
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, &sql_usage_set, &q, e);
    if (r < 0)
        return r;
    store_bind_text(&q, ":queue", queue, -1);
    store_bind_i64(&q, ":uid", uid);
    store_bind_double(&q, ":value", value);
    store_bind_double(&q, ":time", time);
    return store_query_run(&q, e);
}

int store_usage_each(struct store *s, store_usage_fn fn, void *userdata, struct errmsg *e)
{
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, &sql_usage_each, &q, e);
    if (r < 0)
        return r;
    while ((r = store_query_step(&q, e)) > 0) {
        const char *queue = (const char *)sqlite3_column_text(q.st, 0);
        int64_t uid = sqlite3_column_int64(q.st, 1);
        if (!queue || uid < 0 || uid > UINT32_MAX)
            return errmsg_set(e, -EUCLEAN, "'%s': a usage row is out of range", s->path);
        r = fn(queue, (uid_t)uid, sqlite3_column_double(q.st, 2), sqlite3_column_double(q.st, 3),
               userdata);
        if (r < 0)
            return r;
    }
    return r;
}

static int event_insert(struct store *s, uint64_t job_id, double time, const char *text,
                        struct errmsg *e)
{
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, &sql_event_add, &q, e);
    if (r < 0)
        return r;
    store_bind_i64(&q, ":job", (int64_t)job_id);
    store_bind_double(&q, ":time", time);
    store_bind_text(&q, ":text", text, -1);
    r = store_query_run(&q, e);
    if (r == -ENOENT) /* the foreign key: say which job, not which constraint */
        return errmsg_set(e, r, "'%s': adding an event: job %" PRIu64 " does not exist", s->path,
                          job_id);
    return r;
}

static int event_trim(struct store *s, uint64_t job_id, struct errmsg *e)
{
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, &sql_event_trim, &q, e);
    if (r < 0)
        return r;
    store_bind_i64(&q, ":job", (int64_t)job_id);
    store_bind_i64(&q, ":keep", STORE_EVENTS_MAX);
    return store_query_run(&q, e);
}

int store_event_add(struct store *s, uint64_t job_id, double time, const char *text,
                    struct errmsg *e)
{
    if (!text)
        return errmsg_set(e, -EINVAL, "'%s': adding an event: no text", s->path);
    if (job_id > INT64_MAX)
        return errmsg_set(e, -ENOENT, "'%s': adding an event: job %" PRIu64 " does not exist",
                          s->path, job_id);
    int r = store_savepoint(s, e);
    if (r < 0)
        return r;
    r = event_insert(s, job_id, time, text, e);
    if (r >= 0)
        r = event_trim(s, job_id, e);
    if (r >= 0)
        r = store_release(s, sql_event_add.what, e);
    if (r < 0)
        store_rollback_to(s);
    return r;
}

int store_events_each(struct store *s, uint64_t job_id, store_event_fn fn, void *userdata,
                      struct errmsg *e)
{
    if (job_id > INT64_MAX)
        return 0;
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, &sql_events_each, &q, e);
    if (r < 0)
        return r;
    store_bind_i64(&q, ":job", (int64_t)job_id);
    while ((r = store_query_step(&q, e)) > 0) {
        const char *text = (const char *)sqlite3_column_text(q.st, 1);
        r = fn(sqlite3_column_double(q.st, 0), text ? text : "", userdata);
        if (r < 0)
            return r;
    }
    return r;
}
