/* The scheduler: one pass over the active jobs decides which pending jobs start now, on which
 * slots, and which running jobs are preempted to make room. Pure: the time, the node, the
 * quotas in effect (the calendar's, computed by the caller) and each user's fair-share usage
 * come in; decisions and a reason for every job left waiting go out. Nothing is changed in the
 * jobs themselves: the caller applies the decisions (and persists them) and runs another pass
 * when something changes.
 *
 * The rules, in order of precedence:
 * - Order: interactive jobs first, then by queue priority, job priority (its priority class),
 *   jobs requeued by a preemption at the front of their priority, the user's fair-share usage
 *   in the queue (less first), submit time, id.
 * - A Guaranteed queue's job starts only within its queue's quota. A Burstable queue's job
 *   starts within quota, or beyond it on idle capacity ("borrowing"). A BestEffort queue's job
 *   is always borrowing. Per-user limits hold for every class. A running job is a borrower when
 *   its queue's quota is exceeded counting it and every job of that queue that started before
 *   it; BestEffort jobs always are.
 * - A job that fits within its quota but not on the free slots may preempt: borrowers of any
 *   queue, and lower-priority jobs of its own queue; never a Guaranteed queue's job, never one
 *   that has run less than its queue's min_runtime. Victims are the fewest needed, chosen
 *   BestEffort first, then other borrowers, then lowest priority, then those that lose least
 *   work since their last checkpoint. Capacity already being freed by stopping jobs is used
 *   before anyone else is preempted. A borrowing job may preempt only BestEffort jobs of
 *   lower-priority queues; BestEffort jobs preempt nothing.
 * - No job starves: a job pending longer than starve_after that cannot start gets slots
 *   reserved, at the earliest time the running jobs' time limits free them. Later jobs start on
 *   reserved slots only when their own time limit ends before that (backfill).
 * - While the node is drained nothing starts. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "gpuq/core/job.h"
#include "gpuq/core/res.h"
#include "gpuq/policy/queue.h"

/* One active job (PENDING, RUNNING or STOPPING) as the scheduler sees it. */
struct sched_job {
    const struct job *job;
    unsigned queue; /* index into config->queues */
    double usage;   /* the user's decayed fair-share usage in that queue */
};

struct sched_input {
    const struct res_node *node;
    const struct sched_config *config;
    const struct quota *quotas; /* config->n_queues quotas in effect now */
    const struct sched_job *jobs;
    size_t n_jobs;
    double now;
    bool drained;
};

enum sched_action_kind {
    SCHED_START,   /* start jobs[job] on slots */
    SCHED_PREEMPT, /* stop jobs[job] (with its checkpoint signal) so that jobs[for_job] fits */
};

struct sched_action {
    enum sched_action_kind kind;
    size_t job;
    size_t for_job;
    struct res_set slots;
};

/* What one pass decided. reasons[i] is a static string for each input job: "" for running and
 * started ones, else why it waits ("Priority", "Resources", "QuotaExceeded", "UserLimit",
 * "JobHeldUser", "BackOff", "Drained", "Preempting", "Reserved", "NeverFits"). */
struct sched_result {
    struct sched_action *actions;
    size_t n_actions;
    const char **reasons;
    /* The reservation times (0: none) of starving jobs, by input index. */
    double *reserved_at;
};

/* Runs one pass. Returns 0 and fills *ret (free with sched_result_done), or -ENOMEM. */
int sched_pass(const struct sched_input *in, struct sched_result *ret);
void sched_result_done(struct sched_result *r);

/* Whether jobs[i] runs beyond its queue's quota (a borrower), for the API and metrics; by the
 * rule above. borrowing must hold n_jobs entries. Returns 0 or -ENOMEM. */
int sched_borrowers(const struct sched_input *in, bool *borrowing);

/* The order pending jobs are considered in: indices of in->jobs, pending ones only, first
 * first. *ret malloc'd with *ret_n entries. Returns 0 or -ENOMEM. */
int sched_order(const struct sched_input *in, size_t **ret, size_t *ret_n);

/* Estimated start times of pending jobs, by input index (0 for others; INFINITY when unknown: a
 * job ahead of it has no time limit). Jobs are laid out in order on the slots as the running
 * jobs' time limits free them; quotas, CPUs and memory are not simulated, so it is a lower
 * bound. At most max_jobs pending jobs are estimated, the rest INFINITY. Returns 0 or
 * -ENOMEM. */
int sched_estimate(const struct sched_input *in, size_t max_jobs, double *ret_start);

/* Adds what a job with resources r holds on slots to used, which runs parallel to quota's
 * limits: how much of each limit a set of jobs holds, for the API and metrics. */
void sched_quota_charge(const struct res_node *node, const struct quota *quota, uint64_t *used,
                        const struct job_resources *r, const struct res_set *slots);

/* A job's time limit in seconds: its own, else its queue's default; capped by the queue's max;
 * 0 = none. */
double sched_time_limit(const struct job *j, const struct queue *q);
