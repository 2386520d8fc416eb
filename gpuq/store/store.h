/* gpuqd's state in one SQLite file, so that a restart or a kill -9 of gpuqd loses no job: the
 * jobs (every field of struct job, the spec as the caller's JSON), a job id counter, settings
 * that must survive restarts ("drained"), fair-share usage per (queue, uid) and a short history
 * of events per job. This folder is the only SQLite user of the project.
 *
 * Durability: the file is in WAL mode with synchronous=FULL, so a change is on disk (fsync'd)
 * when the call that made it returns 0, or, inside store_begin()..store_commit(), when
 * store_commit() returns 0. gpuqd replies to a user only after that. A killed writer's
 * committed changes are recovered from the WAL by the next store_open().
 *
 * Threads: a store is used from one thread at a time (gpuqd's scheduler thread); nothing in it
 * is locked. Another process may read the file meanwhile (an admin's sqlite3): WAL readers do
 * not block the writer, and a writer waits up to STORE_BUSY_TIMEOUT_MS for a lock.
 *
 * Errors: every fallible function returns 0 or a negative errno, with a message in *e (may be
 * NULL) that names the file and what was being done:
 *   -ENOSPC     the disk is full (SQLITE_FULL), "database or disk is full"
 *   -EIO        an I/O error (SQLITE_IOERR), or an SQLite error that fits nothing below
 *   -EBUSY      the file is locked by another process past the busy timeout (SQLITE_BUSY)
 *   -EUCLEAN    the file is corrupt or not a database (SQLITE_CORRUPT, SQLITE_NOTADB; "Structure
 *               needs cleaning"): the message says to stop gpuqd and move the file aside
 *   -EROFS      the file or its filesystem is read-only
 *   -ENOMEM
 *   -EINVAL     a bad argument or a value the schema refuses (a NaN time, NULL text)
 *   -ENOENT     no such job (or meta key), where a function says so
 * A function that fails inside a transaction leaves the transaction to be rolled back: call
 * store_rollback() (SQLite may already have rolled it back after -ENOSPC or -EIO).
 *
 * The file is root's and written only by gpuqd, so it is not outside input: no fuzz target
 * reads it. Values read back are still range-checked where a wrong one would be dangerous.
 *
 * Note: capsule/store/store.h has a `struct store` and a store_open() of its own; the two
 * headers must not meet in one file, and no program links both libraries. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpuq/core/job.h"
#include "lib/errmsg.h"
#include "lib/macro.h"

/* The schema this code writes (PRAGMA user_version); older files are migrated at open. */
#define STORE_SCHEMA_VERSION 1
/* How long a statement waits for another process's lock before -EBUSY. */
#define STORE_BUSY_TIMEOUT_MS 5000
/* Events kept per job: adding one more drops the oldest. */
#define STORE_EVENTS_MAX 100

struct store;

/* Opens the state file at path, creating it (mode 0600, whatever the umask) and its schema when
 * it does not exist; its directory must exist (and be root's: the -wal and -shm files appear
 * beside it). Migrates an older schema. Returns 0 and *ret, or:
 *   -ELOOP      path is a symbolic link (refused, as O_NOFOLLOW would)
 *   -EINVAL     path is not a regular file, or an SQLite file that is not gpuqd's
 *   -ENOTSUP    written by a newer gpuqd (a schema version above STORE_SCHEMA_VERSION), or the
 *               filesystem cannot hold a WAL (a network filesystem)
 *   -EUCLEAN    corrupt (PRAGMA quick_check is run at open), with what to do
 *   -EACCES, -ENOSPC, -EIO, -EBUSY, -ENOMEM
 * Free with store_close(). Do not carry a store across fork(): open it in the child. */
int store_open(const char *path, struct store **ret, struct errmsg *e);
/* Closes s (NULL allowed); a transaction still open is rolled back. */
void store_close(struct store *s);
DEFINE_POINTER_CLEANUP(struct store, store_close)
/* The path s was opened with (owned by s). */
const char *store_path(const struct store *s);

/* ---- transactions ---- */

/* Opens a write transaction, so that a scheduling pass that changes many jobs writes once (one
 * fsync, at store_commit()). Not nested: -EINVAL if one is open. -EBUSY if another process holds
 * the write lock past the busy timeout. */
int store_begin(struct store *s, struct errmsg *e);
/* Commits: the changes are on disk when it returns 0. -EINVAL when none is open. When a failure
 * inside made SQLite roll the transaction back already (-ENOSPC, -EIO), nothing is written and
 * that failure's error is returned. On failure call store_rollback(), which is harmless when the
 * transaction is already over. */
int store_commit(struct store *s, struct errmsg *e);
/* Rolls back the open transaction, if any (also one SQLite rolled back itself). Cannot fail. */
void store_rollback(struct store *s);

/* ---- jobs ---- */

/* Stores a new job: every field of *j but id (assigned) and spec (spec_json instead, the
 * caller's serialisation, kept as opaque text). j->id is set, on success only, from a counter
 * that starts at 1 and never goes back: an id is never used twice, even after a purge (unless
 * the transaction that took it is rolled back). -EINVAL for a NULL spec_json. */
int store_job_insert(struct store *s, struct job *j, const char *spec_json, struct errmsg *e);
/* Writes every mutable field of job j->id: state, stop_reason, held, priority, the times,
 * failures, preemptions, runs, exit_status, reason, slots, pid, pid_start (uid, gid and the
 * spec never change). -ENOENT when there is no such job. */
int store_job_update(struct store *s, const struct job *j, struct errmsg *e);

/* Called for each job read: *j is filled, with j->spec zeroed; spec_json is the text given to
 * store_job_insert(). Both are valid during the call only and owned by the store: copy what you
 * keep. A negative return stops the iteration and is returned as it is (*e untouched); 0 or
 * positive goes on. The callback may call other store functions, writes included: a job it
 * updates is not visited twice, but one it inserts may or may not be visited. */
typedef int (*store_job_fn)(struct job *j, const char *spec_json, void *userdata);

/* Calls fn for jobs with an id above after_id, in id order, at most limit of them (0: all);
 * active_only: those PENDING, RUNNING or STOPPING only. Returns 0, fn's negative return, or an
 * error (-EUCLEAN also for a row whose state or stop reason this code does not know). */
int store_jobs_each(struct store *s, bool active_only, uint64_t after_id, unsigned limit,
                    store_job_fn fn, void *userdata, struct errmsg *e);
/* Calls fn once for job id. -ENOENT when there is no such job (fn not called). */
int store_job_get(struct store *s, uint64_t id, store_job_fn fn, void *userdata, struct errmsg *e);
/* The id the newest job got (0 before the first), also after its job was purged. */
int store_last_job_id(struct store *s, uint64_t *ret, struct errmsg *e);
/* Deletes the jobs in a final state (COMPLETED, FAILED, CANCELLED, TIMEOUT) whose end_time is
 * before ended_before, with their events. Returns 0 and the number deleted in *ret_n (may be
 * NULL). */
int store_jobs_purge(struct store *s, double ended_before, unsigned *ret_n, struct errmsg *e);

/* ---- settings that must survive restarts ---- */

/* Returns 0 and a malloc'd copy of key's value in *ret, or -ENOENT when key is not set. */
int store_meta_get(struct store *s, const char *key, char **ret, struct errmsg *e);
/* Sets key to value (both non-NULL, else -EINVAL), replacing a previous value. */
int store_meta_set(struct store *s, const char *key, const char *value, struct errmsg *e);
/* Removes key; 0 also when it was not set. */
int store_meta_delete(struct store *s, const char *key, struct errmsg *e);

/* ---- fair-share usage: decayed GPU-seconds per (queue, uid) ---- */

/* Returns 0 and the value with the time it was computed at, both 0 when none was stored. */
int store_usage_get(struct store *s, const char *queue, uid_t uid, double *ret_value,
                    double *ret_time, struct errmsg *e);
/* Stores (replaces) the usage of (queue, uid). */
int store_usage_set(struct store *s, const char *queue, uid_t uid, double value, double time,
                    struct errmsg *e);
/* queue is valid during the call only. A negative return stops and is returned. */
typedef int (*store_usage_fn)(const char *queue, uid_t uid, double value, double time,
                              void *userdata);
/* Calls fn for every stored (queue, uid), ordered by queue then uid. */
int store_usage_each(struct store *s, store_usage_fn fn, void *userdata, struct errmsg *e);

/* ---- job events: a short history for `gpuq show` ---- */

/* Adds an event to job job_id (the STORE_EVENTS_MAX newest are kept). -ENOENT when there is no
 * such job; -EINVAL for NULL text. Purging a job removes its events. */
int store_event_add(struct store *s, uint64_t job_id, double time, const char *text,
                    struct errmsg *e);
/* text is valid during the call only. A negative return stops and is returned. */
typedef int (*store_event_fn)(double time, const char *text, void *userdata);
/* Calls fn for job_id's events in the order they were added (none: 0, fn not called). */
int store_events_each(struct store *s, uint64_t job_id, store_event_fn fn, void *userdata,
                      struct errmsg *e);
