/* Jobs in the state file: one row per job, every field of struct job in a column of its own (so
 * that an admin can query the file with sqlite3), the spec as the caller's JSON. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "gpuq/store/store-private.h"

/* The columns every SELECT of jobs returns, in the order of enum job_column. */
#define JOB_COLUMNS                                                                                \
    "id, uid, gid, spec, state, stop_reason, held, priority, submit_time, first_start_time,"       \
    " start_time, end_time, stop_deadline, last_checkpoint, eligible_time, requeue_time,"          \
    " failures, preemptions, runs, exit_status, reason, slots0, slots1, pid, pid_start"

enum job_column {
    COL_ID,
    COL_UID,
    COL_GID,
    COL_SPEC,
    COL_STATE,
    COL_STOP_REASON,
    COL_HELD,
    COL_PRIORITY,
    COL_SUBMIT_TIME,
    COL_FIRST_START_TIME,
    COL_START_TIME,
    COL_END_TIME,
    COL_STOP_DEADLINE,
    COL_LAST_CHECKPOINT,
    COL_ELIGIBLE_TIME,
    COL_REQUEUE_TIME,
    COL_FAILURES,
    COL_PREEMPTIONS,
    COL_RUNS,
    COL_EXIT_STATUS,
    COL_REASON,
    COL_SLOTS0,
    COL_SLOTS1,
    COL_PID,
    COL_PID_START,
};

/* The id counter only ever goes up, so a purged job's id is not handed out again (a rowid alone
 * would reuse the largest one once its row is gone). */
static const struct store_sql sql_next_id = {
    STORE_STMT_NEXT_ID, "taking a job id",
    "UPDATE counters SET value = value + 1 WHERE name = 'job_id' RETURNING value"};
static const struct store_sql sql_last_id = {STORE_STMT_LAST_ID, "reading the last job id",
                                             "SELECT value FROM counters WHERE name = 'job_id'"};
static const struct store_sql sql_insert = {
    STORE_STMT_JOB_INSERT, "inserting a job",
    "INSERT INTO jobs (" JOB_COLUMNS ") VALUES (:id, :uid, :gid, :spec, :state, :stop_reason,"
    " :held, :priority, :submit_time, :first_start_time, :start_time, :end_time,"
    " :stop_deadline, :last_checkpoint, :eligible_time, :requeue_time, :failures,"
    " :preemptions, :runs, :exit_status, :reason, :slots0, :slots1, :pid, :pid_start)"};
static const struct store_sql sql_update = {
    STORE_STMT_JOB_UPDATE, "updating a job",
    "UPDATE jobs SET state = :state, stop_reason = :stop_reason, held = :held,"
    " priority = :priority, submit_time = :submit_time, first_start_time = :first_start_time,"
    " start_time = :start_time, end_time = :end_time, stop_deadline = :stop_deadline,"
    " last_checkpoint = :last_checkpoint, eligible_time = :eligible_time,"
    " requeue_time = :requeue_time, failures = :failures, preemptions = :preemptions,"
    " runs = :runs, exit_status = :exit_status, reason = :reason, slots0 = :slots0,"
    " slots1 = :slots1, pid = :pid, pid_start = :pid_start WHERE id = :id"};
/* The active filter repeats the jobs_active index's condition word for word, so SQLite uses it. */
static const struct store_sql sql_all = {STORE_STMT_JOBS_ALL, "reading jobs",
                                         "SELECT " JOB_COLUMNS
                                         " FROM jobs WHERE id > :after ORDER BY id LIMIT :limit"};
static const struct store_sql sql_active = {STORE_STMT_JOBS_ACTIVE, "reading active jobs",
                                            "SELECT " JOB_COLUMNS " FROM jobs WHERE id > :after"
                                            " AND state IN (0, 1, 2) ORDER BY id LIMIT :limit"};
static const struct store_sql sql_get = {STORE_STMT_JOB_GET, "reading a job",
                                         "SELECT " JOB_COLUMNS " FROM jobs WHERE id = :id"};
static const struct store_sql sql_purge = {
    STORE_STMT_JOBS_PURGE, "purging ended jobs",
    "DELETE FROM jobs WHERE state >= 3 AND end_time < :before"};

/* The fields store_job_update() writes, insert writes them too. Unsigned 64-bit values (slots,
 * pid_start) are stored as the signed integers of the same bits. */
static void bind_mutable(struct store_query *q, const struct job *j)
{
    store_bind_i64(q, ":state", j->state);
    store_bind_i64(q, ":stop_reason", j->stop_reason);
    store_bind_i64(q, ":held", j->held);
    store_bind_i64(q, ":priority", j->priority);
    store_bind_double(q, ":submit_time", j->submit_time);
    store_bind_double(q, ":first_start_time", j->first_start_time);
    store_bind_double(q, ":start_time", j->start_time);
    store_bind_double(q, ":end_time", j->end_time);
    store_bind_double(q, ":stop_deadline", j->stop_deadline);
    store_bind_double(q, ":last_checkpoint", j->last_checkpoint);
    store_bind_double(q, ":eligible_time", j->eligible_time);
    store_bind_double(q, ":requeue_time", j->requeue_time);
    store_bind_i64(q, ":failures", j->failures);
    store_bind_i64(q, ":preemptions", j->preemptions);
    store_bind_i64(q, ":runs", j->runs);
    store_bind_i64(q, ":exit_status", j->exit_status);
    store_bind_text(q, ":reason", j->reason, (int)sizeof(j->reason));
    store_bind_i64(q, ":slots0", (int64_t)j->slots[0]);
    store_bind_i64(q, ":slots1", (int64_t)j->slots[1]);
    store_bind_i64(q, ":pid", j->pid);
    store_bind_i64(q, ":pid_start", (int64_t)j->pid_start);
}

/* What job_from_row() would refuse is refused here too, so that no write makes the file
 * unreadable. The enums are held in range by the schema's CHECKs. */
static int check_job(struct store *s, const struct job *j, struct errmsg *e)
{
    if (j->pid < 0)
        return errmsg_set(e, -EINVAL, "'%s': job %" PRIu64 ": pid %d out of range", s->path, j->id,
                          (int)j->pid);
    return 0;
}

static int take_id(struct store *s, uint64_t *ret, struct errmsg *e)
{
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, &sql_next_id, &q, e);
    if (r >= 0)
        r = store_query_step(&q, e);
    if (r < 0)
        return r;
    if (r == 0)
        return errmsg_set(e, -EUCLEAN, "'%s': the job id counter is missing: move the file aside",
                          s->path);
    *ret = (uint64_t)sqlite3_column_int64(q.st, 0);
    return store_query_run(&q, e); /* RETURNING: the update is complete at the end */
}

static int insert_row(struct store *s, uint64_t id, const struct job *j, const char *spec_json,
                      struct errmsg *e)
{
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, &sql_insert, &q, e);
    if (r < 0)
        return r;
    store_bind_i64(&q, ":id", (int64_t)id);
    store_bind_i64(&q, ":uid", j->uid);
    store_bind_i64(&q, ":gid", j->gid);
    store_bind_text(&q, ":spec", spec_json, -1);
    bind_mutable(&q, j);
    return store_query_run(&q, e);
}

int store_job_insert(struct store *s, struct job *j, const char *spec_json, struct errmsg *e)
{
    if (!spec_json)
        return errmsg_set(e, -EINVAL, "'%s': inserting a job: no spec", s->path);
    uint64_t id = 0;
    int r = check_job(s, j, e);
    if (r < 0)
        return r;
    r = store_savepoint(s, e);
    if (r < 0)
        return r;
    r = take_id(s, &id, e);
    if (r >= 0)
        r = insert_row(s, id, j, spec_json, e);
    if (r >= 0)
        r = store_release(s, sql_insert.what, e);
    if (r < 0) {
        store_rollback_to(s);
        return r;
    }
    j->id = id;
    return 0;
}

int store_job_update(struct store *s, const struct job *j, struct errmsg *e)
{
    if (j->id > INT64_MAX)
        return errmsg_set(e, -ENOENT, "'%s': job %" PRIu64 " does not exist", s->path, j->id);
    int r = check_job(s, j, e);
    if (r < 0)
        return r;
    _cleanup_query_ struct store_query q = {0};
    r = store_query_start(s, &sql_update, &q, e);
    if (r < 0)
        return r;
    store_bind_i64(&q, ":id", (int64_t)j->id);
    bind_mutable(&q, j);
    r = store_query_run(&q, e);
    if (r < 0)
        return r;
    if (sqlite3_changes(s->db) == 0)
        return errmsg_set(e, -ENOENT, "'%s': job %" PRIu64 " does not exist", s->path, j->id);
    return 0;
}

/* Fills *j from the current row. The values gpuqd would act on as root (whom to run a job as,
 * which process to signal) are checked; the schema's CHECKs hold the enums in range. */
static int job_from_row(struct store *s, sqlite3_stmt *st, struct job *j, const char **ret_spec,
                        struct errmsg *e)
{
    int64_t uid = sqlite3_column_int64(st, COL_UID), gid = sqlite3_column_int64(st, COL_GID);
    int64_t pid = sqlite3_column_int64(st, COL_PID), state = sqlite3_column_int64(st, COL_STATE);
    int64_t stop = sqlite3_column_int64(st, COL_STOP_REASON);
    int64_t id = sqlite3_column_int64(st, COL_ID);
    if (uid < 0 || uid > UINT32_MAX || gid < 0 || gid > UINT32_MAX || pid < 0 || pid > INT_MAX ||
        state < 0 || state >= JOB_STATE_COUNT || stop < 0 || stop > JOB_STOP_TIMEOUT)
        return errmsg_set(e, -EUCLEAN,
                          "'%s': job %" PRId64 " has a value out of range (uid, gid, pid, state "
                          "or stop reason): the file was changed by hand",
                          s->path, id);
    *j = (struct job){
        .id = (uint64_t)id,
        .uid = (uid_t)uid,
        .gid = (gid_t)gid,
        .state = (enum job_state)state,
        .stop_reason = (enum job_stop_reason)stop,
        .held = sqlite3_column_int64(st, COL_HELD) != 0,
        .priority = sqlite3_column_int(st, COL_PRIORITY),
        .submit_time = sqlite3_column_double(st, COL_SUBMIT_TIME),
        .first_start_time = sqlite3_column_double(st, COL_FIRST_START_TIME),
        .start_time = sqlite3_column_double(st, COL_START_TIME),
        .end_time = sqlite3_column_double(st, COL_END_TIME),
        .stop_deadline = sqlite3_column_double(st, COL_STOP_DEADLINE),
        .last_checkpoint = sqlite3_column_double(st, COL_LAST_CHECKPOINT),
        .eligible_time = sqlite3_column_double(st, COL_ELIGIBLE_TIME),
        .requeue_time = sqlite3_column_double(st, COL_REQUEUE_TIME),
        .failures = (unsigned)sqlite3_column_int64(st, COL_FAILURES),
        .preemptions = (unsigned)sqlite3_column_int64(st, COL_PREEMPTIONS),
        .runs = (unsigned)sqlite3_column_int64(st, COL_RUNS),
        .exit_status = sqlite3_column_int(st, COL_EXIT_STATUS),
        .slots = {(uint64_t)sqlite3_column_int64(st, COL_SLOTS0),
                  (uint64_t)sqlite3_column_int64(st, COL_SLOTS1)},
        .pid = (pid_t)pid,
        .pid_start = (uint64_t)sqlite3_column_int64(st, COL_PID_START),
    };
    const char *reason = (const char *)sqlite3_column_text(st, COL_REASON);
    snprintf(j->reason, sizeof(j->reason), "%s", reason ? reason : "");
    const char *spec = (const char *)sqlite3_column_text(st, COL_SPEC);
    if (!spec && sqlite3_errcode(s->db) == SQLITE_NOMEM)
        return -ENOMEM;
    *ret_spec = spec ? spec : "";
    return 0;
}

/* Steps q to its end (or fn's stop), calling fn for each row; returns how many rows, or -errno. */
static int each_row(struct store_query *q, store_job_fn fn, void *userdata, struct errmsg *e)
{
    int n = 0, r;
    while ((r = store_query_step(q, e)) > 0) {
        struct job j;
        const char *spec = NULL;
        r = job_from_row(q->s, q->st, &j, &spec, e);
        if (r < 0)
            return r;
        r = fn(&j, spec, userdata);
        if (r < 0)
            return r;
        n++;
    }
    return r < 0 ? r : n;
}

int store_jobs_each(struct store *s, bool active_only, uint64_t after_id, unsigned limit,
                    store_job_fn fn, void *userdata, struct errmsg *e)
{
    if (after_id >= INT64_MAX)
        return 0; /* no id is that large */
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, active_only ? &sql_active : &sql_all, &q, e);
    if (r < 0)
        return r;
    store_bind_i64(&q, ":after", (int64_t)after_id);
    store_bind_i64(&q, ":limit", limit ? (int64_t)limit : -1); /* SQLite: negative = no limit */
    r = each_row(&q, fn, userdata, e);
    return r < 0 ? r : 0;
}

int store_job_get(struct store *s, uint64_t id, store_job_fn fn, void *userdata, struct errmsg *e)
{
    int r = 0;
    if (id <= INT64_MAX) {
        _cleanup_query_ struct store_query q = {0};
        r = store_query_start(s, &sql_get, &q, e);
        if (r < 0)
            return r;
        store_bind_i64(&q, ":id", (int64_t)id);
        r = each_row(&q, fn, userdata, e);
        if (r < 0)
            return r;
    }
    if (r == 0)
        return errmsg_set(e, -ENOENT, "'%s': job %" PRIu64 " does not exist", s->path, id);
    return 0;
}

int store_jobs_purge(struct store *s, double ended_before, unsigned *ret_n, struct errmsg *e)
{
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, &sql_purge, &q, e);
    if (r < 0)
        return r;
    store_bind_double(&q, ":before", ended_before);
    r = store_query_run(&q, e);
    if (r < 0)
        return r;
    if (ret_n)
        *ret_n = (unsigned)sqlite3_changes(s->db);
    return 0;
}

int store_last_job_id(struct store *s, uint64_t *ret, struct errmsg *e)
{
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, &sql_last_id, &q, e);
    if (r < 0)
        return r;
    r = store_query_step(&q, e);
    if (r < 0)
        return r;
    *ret = r == 0 ? 0 : (uint64_t)sqlite3_column_int64(q.st, 0);
    return 0;
}
