/* gpuqd's state and the functions its files share. One lock guards everything below it: the
 * API's handlers (each on its connection's thread) and the scheduling loop (the main thread)
 * take it for every read or change, and every change a user is told about is in the store
 * before the lock is let go. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include <jansson.h>

#include "gpuq/core/job.h"
#include "gpuq/core/res.h"
#include "gpuq/core/sched.h"
#include "gpuq/policy/gpuq-config.h"
#include "lib/errmsg.h"

struct store;
struct audit;
struct http_server;
struct gpu_list;
struct nvml;

/* One active job (PENDING, RUNNING or STOPPING) and what the daemon tracks beside it. */
struct qjob {
    struct job j;
    unsigned queue; /* index into cfg.sched.queues */
    int pidfd;      /* the run's gpuq-run, -1 when none is tracked */
    /* From the last scheduling pass, for the API. */
    const char *why;
    bool borrowing;
    unsigned position;
    double estimated_start;
    double accounted; /* fair-share usage counted up to here */
};

/* Fair-share usage of one user in one queue: GPU-seconds, decayed. */
struct usage {
    unsigned queue;
    uid_t uid;
    double value;
    double time; /* when value was last brought up to date */
};

#define WAIT_BUCKETS 12

struct gpuqd_stats {
    uint64_t *preemptions;  /* by queue */
    uint64_t *retries;      /* by queue */
    uint64_t *wait_buckets; /* by queue, WAIT_BUCKETS each (cumulative at render) */
    double *wait_sum;
    uint64_t *wait_count;
};

struct gpuqd {
    struct gpuqd_config cfg;
    const char *run_program;     /* gpuq-run */
    const char *capsule_program; /* capsule, for image jobs */
    char *cgroup_parent;         /* where job scopes go; NULL: no cgroup */
    struct store *store;
    struct audit *audit;
    struct roles *roles;
    struct res_node node;
    unsigned gpus_total; /* GPUs (whole or partitioned) */

    pthread_mutex_t lock;
    pthread_cond_t changed; /* broadcast whenever a job's state changed */
    int wake_fd;            /* eventfd: ask the loop for a scheduling pass */

    struct qjob **jobs;
    size_t n_jobs, cap_jobs;
    uint64_t last_id; /* the newest job's id */
    struct usage *usage;
    size_t n_usage;
    bool drained;
    double drain_grace_max;
    double last_usage_save;
    double last_purge;
    uint64_t last_pass_msec; /* CLOCK_MONOTONIC of the last scheduling pass */
    struct quota *quotas;    /* in effect, by queue, as of the last pass */
    struct gpuqd_stats stats;

    struct http_server *api;
    struct http_server *metrics;
};

/* jobs.c */
struct qjob *jobs_find(struct gpuqd *d, uint64_t id);
int jobs_add(struct gpuqd *d, struct qjob *q);
/* Removes jobs that reached a final state from the active table (they stay in the store). */
void jobs_prune(struct gpuqd *d);
/* Ended jobs are kept (`gpuq ls -a`, `gpuq show`, their logs) this long. */
#define JOBS_KEEP_S (30 * 86400.0)
/* Deletes the jobs that ended more than JOBS_KEEP_S ago, with their logs. */
void jobs_purge(struct gpuqd *d, double now);
/* Writes the job's state to the store and records an event (text may be NULL), then wakes
 * every waiter. Returns 0 or the store's error. */
int jobs_save(struct gpuqd *d, struct qjob *q, const char *event, struct errmsg *e);
/* What of a job the API shows beyond its public fields: its command and working directory
 * (to its owner and admins), and its environment (the same, in `show` only: a list of many
 * jobs with every environment would be megabytes). */
enum {
    JOBS_JSON_PRIVATE = 1 << 0,
    JOBS_JSON_ENV = 1 << 1,
};
/* The job as the API shows it; what (JOBS_JSON_*) says how much. NULL on ENOMEM. */
json_t *jobs_to_json(const struct gpuqd *d, const struct job *j, unsigned queue,
                     const struct qjob *active, unsigned what);
const char *jobs_user_name(uid_t uid, char *buf, size_t size);
/* GPUs and MIG instances held by running and stopping jobs. */
unsigned jobs_gpus_allocated(const struct gpuqd *d);
void qjob_free(struct qjob *q);

/* runs.c */
/* Starts a run of a pending job on slots. On failure the job is failed (or retried) and saved;
 * returns 0 either way unless the store failed. */
int runs_start(struct gpuqd *d, struct qjob *q, const struct res_set *slots);
/* Sends the job's checkpoint signal (SIGTERM for a cancel) and gives it its grace. */
int runs_stop(struct gpuqd *d, struct qjob *q, enum job_stop_reason why, double grace_max);
/* Handles a run whose supervisor has ended: records how, requeues, retries or ends the job. */
int runs_reap(struct gpuqd *d, struct qjob *q);
/* Time limits, active deadlines, SIGKILL after the grace. Returns the next time it needs to
 * look again (INFINITY: none). */
double runs_timers(struct gpuqd *d, double now);
/* After a restart: re-attaches to running supervisors, reaps those that ended meanwhile. */
int runs_recover(struct gpuqd *d);
/* The log file of a job. */
int runs_log_path(const struct gpuqd *d, uint64_t id, char *buf, size_t size);

/* schedule.c */
/* One pass: quotas in effect, decisions applied. Returns when it next wants to run (a calendar
 * change or a backoff ending; INFINITY when nothing is due). */
double schedule_pass(struct gpuqd *d, double now);
/* Brings fair-share usage up to now. */
void schedule_account(struct gpuqd *d, double now);
double *schedule_usage(struct gpuqd *d, unsigned queue, uid_t uid, bool add);
void schedule_wake(struct gpuqd *d);
/* Counts a job's wait (since submit, backoff or requeue) in the wait-time histogram. */
void schedule_record_wait(struct gpuqd *d, const struct qjob *q, double now);
/* The scheduler's view of the active jobs at now, in *ret: the returned array (malloc'd, the
 * caller frees it; NULL on ENOMEM) is ret->jobs, parallel to d->jobs. */
struct sched_job *schedule_input(struct gpuqd *d, double now, struct sched_input *ret);

/* api*.c, metrics.c */
int api_start(struct gpuqd *d, struct errmsg *e);
int metrics_start(struct gpuqd *d, struct errmsg *e);
