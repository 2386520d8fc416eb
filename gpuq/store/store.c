/* The state file: opening it (safely, in WAL mode, at the schema this code knows), the
 * statement cache, transactions and the mapping of SQLite's errors onto errno. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gpuq/store/store-private.h"

/* PRAGMA application_id: "gpuq" (0x67707571) in decimal, so that another program's SQLite file
 * is not taken for ours. */
#define STORE_APPLICATION_ID 1735423345
/* The WAL is truncated to this after a checkpoint, not left at its largest. */
#define STORE_WAL_SIZE_LIMIT "4194304"

/* The enum values are stored as integers: reordering them changes the meaning of every stored
 * job, which needs a new schema version and a migration. */
static_assert(JOB_PENDING == 0 && JOB_RUNNING == 1 && JOB_STOPPING == 2 && JOB_COMPLETED == 3 &&
                  JOB_FAILED == 4 && JOB_CANCELLED == 5 && JOB_TIMEOUT == 6 && JOB_STATE_COUNT == 7,
              "enum job_state is part of the store's schema");
static_assert(JOB_STOP_NONE == 0 && JOB_STOP_PREEMPT == 1 && JOB_STOP_DRAIN == 2 &&
                  JOB_STOP_CANCEL == 3 && JOB_STOP_TIMEOUT == 4,
              "enum job_stop_reason is part of the store's schema");

/* schema_steps[v] takes a file from version v to v + 1; a new file runs them all. Never edit a
 * step that has shipped: add one and raise STORE_SCHEMA_VERSION. STRICT tables make SQLite
 * refuse a value of the wrong type instead of storing it. */
static const char *const schema_steps[] = {
    /* 0 -> 1 */
    "CREATE TABLE counters (name TEXT PRIMARY KEY, value INTEGER NOT NULL) STRICT;"
    "INSERT INTO counters (name, value) VALUES ('job_id', 0);"
    "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) STRICT;"
    "CREATE TABLE jobs ("
    " id INTEGER PRIMARY KEY, uid INTEGER NOT NULL, gid INTEGER NOT NULL, spec TEXT NOT NULL,"
    " state INTEGER NOT NULL CHECK (state BETWEEN 0 AND 6),"
    " stop_reason INTEGER NOT NULL CHECK (stop_reason BETWEEN 0 AND 4),"
    " held INTEGER NOT NULL CHECK (held IN (0, 1)), priority INTEGER NOT NULL,"
    " submit_time REAL NOT NULL, first_start_time REAL NOT NULL, start_time REAL NOT NULL,"
    " end_time REAL NOT NULL, stop_deadline REAL NOT NULL, last_checkpoint REAL NOT NULL,"
    " eligible_time REAL NOT NULL, requeue_time REAL NOT NULL,"
    " failures INTEGER NOT NULL, preemptions INTEGER NOT NULL, runs INTEGER NOT NULL,"
    " exit_status INTEGER NOT NULL, reason TEXT NOT NULL,"
    " slots0 INTEGER NOT NULL, slots1 INTEGER NOT NULL,"
    " pid INTEGER NOT NULL, pid_start INTEGER NOT NULL) STRICT;"
    /* gpuqd reads the active jobs at every start; purges look for old ended ones */
    "CREATE INDEX jobs_active ON jobs (id) WHERE state IN (0, 1, 2);"
    "CREATE INDEX jobs_ended ON jobs (end_time) WHERE state >= 3;"
    "CREATE TABLE usage (queue TEXT NOT NULL, uid INTEGER NOT NULL, value REAL NOT NULL,"
    " time REAL NOT NULL, PRIMARY KEY (queue, uid)) STRICT, WITHOUT ROWID;"
    "CREATE TABLE events (seq INTEGER PRIMARY KEY,"
    " job_id INTEGER NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,"
    " time REAL NOT NULL, text TEXT NOT NULL) STRICT;"
    "CREATE INDEX events_job ON events (job_id, seq);",
};
static_assert(ELEMENTSOF(schema_steps) == STORE_SCHEMA_VERSION, "one schema step per version");

static const struct store_sql sql_begin = {STORE_STMT_BEGIN, "beginning a transaction",
                                           "BEGIN IMMEDIATE"};
static const struct store_sql sql_commit = {STORE_STMT_COMMIT, "committing", "COMMIT"};
static const struct store_sql sql_rollback = {STORE_STMT_ROLLBACK, "rolling back", "ROLLBACK"};
static const struct store_sql sql_savepoint = {STORE_STMT_SAVEPOINT, "opening a savepoint",
                                               "SAVEPOINT store_op"};
static const struct store_sql sql_release = {STORE_STMT_RELEASE, "releasing a savepoint",
                                             "RELEASE store_op"};
static const struct store_sql sql_rollback_to = {STORE_STMT_ROLLBACK_TO, "rolling back a savepoint",
                                                 "ROLLBACK TO store_op"};

static int corrupt_error(struct store *s, const char *what, const char *detail, struct errmsg *e)
{
    return errmsg_set(e, -EUCLEAN,
                      "'%s' is corrupt (%s: %s): stop gpuqd and move the file, with its -wal and "
                      "-shm files, aside; gpuqd then starts with an empty queue (`sqlite3 FILE "
                      ".recover` may save the jobs of the old file)",
                      s->path, what, detail);
}

static int errno_of(struct store *s, int rc)
{
    int sys = s->db ? sqlite3_system_errno(s->db) : 0;
    switch (rc & 0xff) {
    case SQLITE_FULL:
        return -ENOSPC;
    case SQLITE_IOERR:
        return rc == SQLITE_IOERR_NOMEM ? -ENOMEM : -EIO;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return -EBUSY;
    case SQLITE_NOMEM:
        return -ENOMEM;
    case SQLITE_READONLY:
        return -EROFS;
    case SQLITE_PERM:
    case SQLITE_AUTH:
        return -EACCES;
    case SQLITE_CANTOPEN:
        return rc == SQLITE_CANTOPEN_SYMLINK ? -ELOOP : sys > 0 ? -sys : -EACCES;
    case SQLITE_CONSTRAINT:
        if (rc == SQLITE_CONSTRAINT_PRIMARYKEY || rc == SQLITE_CONSTRAINT_UNIQUE)
            return -EEXIST;
        return rc == SQLITE_CONSTRAINT_FOREIGNKEY ? -ENOENT : -EINVAL;
    case SQLITE_TOOBIG:
        return -E2BIG;
    case SQLITE_RANGE:
    case SQLITE_MISUSE:
        return -EINVAL;
    default:
        return -EIO;
    }
}

int store_sql_error(struct store *s, int rc, const char *what, struct errmsg *e)
{
    const char *detail = s->db ? sqlite3_errmsg(s->db) : sqlite3_errstr(rc);
    int r;
    if ((rc & 0xff) == SQLITE_CORRUPT || (rc & 0xff) == SQLITE_NOTADB)
        r = corrupt_error(s, what, detail, e);
    else
        r = errmsg_set(e, errno_of(s, rc), "'%s': %s: %s", s->path, what, detail);
    if (s->in_txn && s->txn_error == 0)
        s->txn_error = r;
    return r;
}

int store_query_start(struct store *s, const struct store_sql *sql, struct store_query *ret,
                      struct errmsg *e)
{
    sqlite3_stmt *st = sql->id == STORE_STMT_ONCE ? NULL : s->stmts[sql->id];
    bool fresh = !st || sqlite3_stmt_busy(st);
    if (fresh) {
        /* Only the cache's own copy is persistent; a second one for a nested use is not. */
        bool cache = !st && sql->id != STORE_STMT_ONCE;
        int rc = sqlite3_prepare_v3(s->db, sql->sql, -1, cache ? SQLITE_PREPARE_PERSISTENT : 0, &st,
                                    NULL);
        if (rc != SQLITE_OK)
            return store_sql_error(s, rc, sql->what, e);
        if (cache) {
            s->stmts[sql->id] = st;
            fresh = false;
        }
    }
    *ret = (struct store_query){.s = s, .sql = sql, .st = st, .fresh = fresh};
    return 0;
}

void store_query_end(struct store_query *q)
{
    if (!q->st)
        return;
    if (q->fresh) {
        sqlite3_finalize(q->st);
    } else {
        sqlite3_reset(q->st);
        sqlite3_clear_bindings(q->st);
    }
    q->st = NULL;
}

static int param_index(struct store_query *q, const char *name)
{
    if (q->bind_rc != SQLITE_OK)
        return 0;
    int i = sqlite3_bind_parameter_index(q->st, name);
    if (i == 0)
        q->bind_rc = SQLITE_RANGE; /* a typo in a parameter name: a bug, reported as one */
    return i;
}

void store_bind_i64(struct store_query *q, const char *name, int64_t v)
{
    int i = param_index(q, name);
    if (i > 0)
        q->bind_rc = sqlite3_bind_int64(q->st, i, v);
}

void store_bind_double(struct store_query *q, const char *name, double v)
{
    int i = param_index(q, name);
    if (i > 0)
        q->bind_rc = sqlite3_bind_double(q->st, i, v);
}

void store_bind_text(struct store_query *q, const char *name, const char *v, int len)
{
    int i = param_index(q, name);
    if (v && len >= 0)
        len = (int)strnlen(v, (size_t)len);
    /* SQLITE_STATIC: every statement is stepped before the caller's strings can go away */
    if (i > 0)
        q->bind_rc = sqlite3_bind_text(q->st, i, v, len, SQLITE_STATIC);
}

int store_query_step(struct store_query *q, struct errmsg *e)
{
    if (q->bind_rc != SQLITE_OK)
        return store_sql_error(q->s, q->bind_rc, q->sql->what, e);
    int rc = sqlite3_step(q->st);
    if (rc == SQLITE_ROW)
        return 1;
    if (rc == SQLITE_DONE)
        return 0;
    return store_sql_error(q->s, rc, q->sql->what, e);
}

int store_query_run(struct store_query *q, struct errmsg *e)
{
    int r;
    while ((r = store_query_step(q, e)) > 0)
        ;
    return r;
}

/* Runs one cached statement without parameters (BEGIN, COMMIT, ...). */
static int run_simple(struct store *s, const struct store_sql *sql, struct errmsg *e)
{
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, sql, &q, e);
    return r < 0 ? r : store_query_run(&q, e);
}

int store_savepoint(struct store *s, struct errmsg *e)
{
    return run_simple(s, &sql_savepoint, e);
}

int store_release(struct store *s, const char *what, struct errmsg *e)
{
    /* Outside a transaction this is the commit, where a full disk shows: name the operation. */
    struct store_sql sql = sql_release;
    sql.what = what;
    return run_simple(s, &sql, e);
}

void store_rollback_to(struct store *s)
{
    /* Fails when SQLite has rolled back the whole transaction already (after SQLITE_FULL, say):
     * then there is nothing left to undo. ROLLBACK TO keeps the savepoint: release it too. */
    if (run_simple(s, &sql_rollback_to, NULL) == 0)
        (void)run_simple(s, &sql_release, NULL);
}

int store_begin(struct store *s, struct errmsg *e)
{
    if (s->in_txn || !sqlite3_get_autocommit(s->db))
        return errmsg_set(e, -EINVAL, "'%s': beginning a transaction: one is open already",
                          s->path);
    /* IMMEDIATE: take the write lock now, so that a busy file fails here, not at a write in the
     * middle of a scheduling pass. */
    int r = run_simple(s, &sql_begin, e);
    if (r < 0)
        return r;
    s->in_txn = true;
    s->txn_error = 0;
    return 0;
}

int store_commit(struct store *s, struct errmsg *e)
{
    if (!s->in_txn)
        return errmsg_set(e, -EINVAL, "'%s': committing: no transaction is open", s->path);
    if (sqlite3_get_autocommit(s->db)) {
        /* SQLite rolled it back after a failure inside (a full disk, an I/O error) */
        int r = s->txn_error ? s->txn_error : -EIO;
        s->in_txn = false;
        return errmsg_set(e, r,
                          "'%s': committing: the transaction was rolled back after an "
                          "earlier error (%s)",
                          s->path, strerror(-r));
    }
    int r = run_simple(s, &sql_commit, e);
    if (r < 0) {
        if (sqlite3_get_autocommit(s->db))
            s->in_txn = false;
        return r;
    }
    s->in_txn = false;
    return 0;
}

void store_rollback(struct store *s)
{
    if (!sqlite3_get_autocommit(s->db))
        (void)run_simple(s, &sql_rollback, NULL);
    s->in_txn = false;
    s->txn_error = 0;
}

const char *store_path(const struct store *s)
{
    return s->path;
}

/* Creates an empty file for SQLite to fill: SQLite would create it 0644 (less the umask), and the
 * state holds every job's command and environment. */
static int create_file(const char *path, struct errmsg *e)
{
    _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return errno == EEXIST ? 0 : errmsg_set(e, negative_errno(), "'%s': creating: %m", path);
    if (fchmod(fd, 0600) < 0)
        return errmsg_set(e, negative_errno(), "'%s': chmod: %m", path);
    /* The new name must survive a crash as well as the first jobs written into it. */
    _cleanup_free_ char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    const char *dir = dirname(copy);
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0 || fsync(dfd) < 0)
        return errmsg_set(e, negative_errno(), "'%s': syncing the directory: %m", dir);
    return 0;
}

/* Refuses a symbolic link (SQLITE_OPEN_NOFOLLOW refuses it again at open, but says less) and
 * anything but a regular file; creates the file when absent. */
static int check_path(const char *path, struct errmsg *e)
{
    struct stat st;
    if (lstat(path, &st) < 0) {
        if (errno != ENOENT)
            return errmsg_set(e, negative_errno(), "'%s': %m", path);
        int r = create_file(path, e);
        if (r < 0)
            return r;
        if (lstat(path, &st) < 0)
            return errmsg_set(e, negative_errno(), "'%s': %m", path);
    }
    if (S_ISLNK(st.st_mode))
        return errmsg_set(e, -ELOOP, "'%s' is a symbolic link: refusing it as gpuqd's state file",
                          path);
    if (!S_ISREG(st.st_mode))
        return errmsg_set(e, -EINVAL, "'%s' is not a regular file", path);
    return 0;
}

/* Runs a one-off statement that returns one integer (or text, for *ret_text). */
static int query_once(struct store *s, const char *what, const char *sql, int64_t *ret,
                      char **ret_text, struct errmsg *e)
{
    const struct store_sql q_sql = {STORE_STMT_ONCE, what, sql};
    _cleanup_query_ struct store_query q = {0};
    int r = store_query_start(s, &q_sql, &q, e);
    if (r < 0)
        return r;
    r = store_query_step(&q, e);
    if (r < 0)
        return r;
    if (r == 0)
        return errmsg_set(e, -EIO, "'%s': %s: no result", s->path, what);
    if (ret)
        *ret = sqlite3_column_int64(q.st, 0);
    if (ret_text) {
        const char *t = (const char *)sqlite3_column_text(q.st, 0);
        if (!(*ret_text = strdup(t ? t : "")))
            return -ENOMEM;
    }
    return 0;
}

static int exec_script(struct store *s, const char *what, const char *sql, struct errmsg *e)
{
    int rc = sqlite3_exec(s->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : store_sql_error(s, rc, what, e);
}

static int set_pragmas(struct store *s, struct errmsg *e)
{
    _cleanup_free_ char *mode = NULL;
    int r = query_once(s, "switching to WAL mode", "PRAGMA journal_mode = WAL", NULL, &mode, e);
    if (r < 0)
        return r;
    if (strcmp(mode, "wal") != 0)
        return errmsg_set(e, -ENOTSUP,
                          "'%s': cannot use a write-ahead log there (journal mode '%s'): "
                          "put gpuqd's state on a local filesystem",
                          s->path, mode);
    /* FULL: a commit is fsync'd before it returns, so what gpuqd told a user survives a power
     * cut. foreign_keys: purging a job takes its events along. */
    return exec_script(s, "setting pragmas",
                       "PRAGMA synchronous = FULL; PRAGMA foreign_keys = ON;"
                       " PRAGMA journal_size_limit = " STORE_WAL_SIZE_LIMIT ";",
                       e);
}

/* Inside the open transaction: checks that the file is ours and not newer, and brings it to
 * STORE_SCHEMA_VERSION. */
static int migrate(struct store *s, struct errmsg *e)
{
    int64_t app = 0, version = 0, tables = 0;
    int r = query_once(s, "reading the application id", "PRAGMA application_id", &app, NULL, e);
    if (r >= 0)
        r = query_once(s, "reading the schema version", "PRAGMA user_version", &version, NULL, e);
    if (r >= 0)
        r = query_once(s, "reading the schema", "SELECT count(*) FROM sqlite_schema", &tables, NULL,
                       e);
    if (r < 0)
        return r;
    if ((version == 0 && tables > 0) || (version > 0 && app != STORE_APPLICATION_ID))
        return errmsg_set(e, -EINVAL,
                          "'%s' is an SQLite database but not gpuqd's state (application id "
                          "%" PRId64 ", schema version %" PRId64 "): give gpuqd another path",
                          s->path, app, version);
    if (version > STORE_SCHEMA_VERSION)
        return errmsg_set(e, -ENOTSUP,
                          "'%s' was written by a newer gpuqd (schema version %" PRId64
                          ", this one knows up to %d): run that gpuqd, or move the file aside to "
                          "start with an empty queue",
                          s->path, version, STORE_SCHEMA_VERSION);
    if (version == STORE_SCHEMA_VERSION)
        return 0;
    for (int64_t v = version; v < STORE_SCHEMA_VERSION; v++) {
        r = exec_script(s, "creating the schema", schema_steps[v], e);
        if (r < 0)
            return r;
    }
    return exec_script(
        s, "writing the schema version",
        "PRAGMA application_id = " STRINGIFY(
            STORE_APPLICATION_ID) ";"
                                  " PRAGMA user_version = " STRINGIFY(STORE_SCHEMA_VERSION) ";",
        e);
}

/* Corruption is found at open rather than in the middle of a scheduling pass. quick_check reads
 * every page (milliseconds for a queue's few megabytes) but skips the index/table cross-check. */
static int check_integrity(struct store *s, struct errmsg *e)
{
    _cleanup_free_ char *result = NULL;
    int r = query_once(s, "checking integrity", "PRAGMA quick_check(1)", NULL, &result, e);
    if (r < 0)
        return r;
    if (strcmp(result, "ok") != 0)
        return corrupt_error(s, "integrity check", result, e);
    return 0;
}

static int setup(struct store *s, struct errmsg *e)
{
    sqlite3_extended_result_codes(s->db, 1);
    sqlite3_busy_timeout(s->db, STORE_BUSY_TIMEOUT_MS);
    int r = set_pragmas(s, e);
    if (r < 0)
        return r;
    /* One transaction, so that two gpuqd starting at once do not both create the schema. */
    r = store_begin(s, e);
    if (r < 0)
        return r;
    r = migrate(s, e);
    if (r >= 0)
        r = store_commit(s, e);
    if (r < 0) {
        store_rollback(s);
        return r;
    }
    return check_integrity(s, e);
}

int store_open(const char *path, struct store **ret, struct errmsg *e)
{
    int r = check_path(path, e);
    if (r < 0)
        return r;
    _cleanup_(store_closep) struct store *s = calloc(1, sizeof(*s));
    if (!s || !(s->path = strdup(path)))
        return -ENOMEM;
    /* NOMUTEX: one thread uses a store (see store.h), so SQLite's own locking would buy nothing.
     * No SQLITE_OPEN_CREATE: the file was made above, with its mode. */
    int rc = sqlite3_open_v2(
        path, &s->db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOFOLLOW | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK)
        return store_sql_error(s, rc, "opening", e);
    r = setup(s, e);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(s);
    return 0;
}

void store_close(struct store *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < ELEMENTSOF(s->stmts); i++)
        sqlite3_finalize(s->stmts[i]);
    /* Rolls back an open transaction; the last connection also checkpoints the WAL. */
    sqlite3_close(s->db);
    free(s->path);
    free(s);
}
