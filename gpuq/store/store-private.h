/* What the store's files share: the handle, the statement cache and the error mapping. */
#pragma once

#include <sqlite3.h>
#include <stdbool.h>
#include <stdint.h>

#include "gpuq/store/store.h"

/* Every statement that is run more than once has a slot in the cache: prepared on first use
 * (SQLITE_PREPARE_PERSISTENT), reset after each use, finalized at store_close(). */
enum store_stmt {
    STORE_STMT_BEGIN,
    STORE_STMT_COMMIT,
    STORE_STMT_ROLLBACK,
    STORE_STMT_SAVEPOINT,
    STORE_STMT_RELEASE,
    STORE_STMT_ROLLBACK_TO,
    STORE_STMT_NEXT_ID,
    STORE_STMT_LAST_ID,
    STORE_STMT_JOB_INSERT,
    STORE_STMT_JOB_UPDATE,
    STORE_STMT_JOBS_ALL,
    STORE_STMT_JOBS_ACTIVE,
    STORE_STMT_JOB_GET,
    STORE_STMT_JOBS_PURGE,
    STORE_STMT_META_GET,
    STORE_STMT_META_SET,
    STORE_STMT_META_DELETE,
    STORE_STMT_USAGE_GET,
    STORE_STMT_USAGE_SET,
    STORE_STMT_USAGE_EACH,
    STORE_STMT_EVENT_ADD,
    STORE_STMT_EVENT_TRIM,
    STORE_STMT_EVENTS_EACH,
    STORE_STMT_COUNT,
    STORE_STMT_ONCE = -1, /* not cached: prepared and finalized for one use (open, pragmas) */
};

/* A statement and what it does, for error messages ("'/var/lib/gpuq/state.db': inserting a
 * job: database or disk is full"). */
struct store_sql {
    enum store_stmt id;
    const char *what;
    const char *sql;
};

struct store {
    sqlite3 *db;
    char *path;
    sqlite3_stmt *stmts[STORE_STMT_COUNT];
    bool in_txn;   /* between store_begin() and store_commit()/store_rollback() */
    int txn_error; /* the first failure inside that transaction, 0 if none */
};

/* One use of a statement. A cached statement that is already stepping (a store function called
 * from a callback of an iteration over the same statement) is not disturbed: a fresh one is
 * prepared for that use instead. */
struct store_query {
    struct store *s;
    const struct store_sql *sql;
    sqlite3_stmt *st;
    bool fresh;  /* finalize, not reset, at the end */
    int bind_rc; /* the first failed bind, reported by store_query_step() */
};

/* Maps an SQLite result code to -errno and writes "'path': what: sqlite's message" (or, for a
 * corrupt file, what to do) to *e. Inside a transaction, remembers the first failure. */
int store_sql_error(struct store *s, int rc, const char *what, struct errmsg *e);

/* Starts a use of sql (bindings cleared). 0 or -errno. */
int store_query_start(struct store *s, const struct store_sql *sql, struct store_query *ret,
                      struct errmsg *e);
/* Resets (or finalizes) q's statement; safe to call twice and on a zeroed query. */
void store_query_end(struct store_query *q);
#define _cleanup_query_ _cleanup_(store_query_end)

/* Bind by parameter name (":state"). A failure is kept in q and returned by the next step. */
void store_bind_i64(struct store_query *q, const char *name, int64_t v);
void store_bind_double(struct store_query *q, const char *name, double v);
/* len -1: v is NUL-terminated; else its first len bytes (up to a NUL). v NULL binds NULL. */
void store_bind_text(struct store_query *q, const char *name, const char *v, int len);

/* Steps q: 1 with a row, 0 when done, or -errno with a message. */
int store_query_step(struct store_query *q, struct errmsg *e);
/* Runs a statement that returns no rows needed, to its end. */
int store_query_run(struct store_query *q, struct errmsg *e);

/* A savepoint around a function's several statements, so that a failure leaves none of them
 * (and the caller's transaction, if any, as it was). */
int store_savepoint(struct store *s, struct errmsg *e);
/* what names the operation in a message ("inserting a job"). */
int store_release(struct store *s, const char *what, struct errmsg *e);
void store_rollback_to(struct store *s);
