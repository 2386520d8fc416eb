/* The scheduler's working state during one pass, shared by its files (sched.c: order and
 * placement; sched-quota.c: quota ledgers; sched-preempt.c: victims; sched-reserve.c: starving
 * jobs' reservations and backfill). Not part of the API. */
#pragma once

#include <stdint.h>

#include "gpuq/core/sched.h"

struct user_ledger {
    unsigned queue;
    uid_t uid;
    uint64_t used[QUOTA_MAX]; /* against the queue's user_limit */
};

struct reservation {
    struct res_set slots;
    double at; /* INFINITY: unknown (a job ahead has no time limit) */
};

struct release {
    double at;
    size_t job;
};

struct pass {
    const struct sched_input *in;
    struct res_set free; /* slots no running, stopping or just started job holds */
    int64_t cpu_free, mem_free;
    uint64_t (*ledger)[QUOTA_MAX]; /* per queue, against in->quotas[queue] */
    struct user_ledger *users;
    size_t n_users, cap_users;
    bool *stopping;  /* by job: JOB_STOPPING (its slots come free soon) */
    bool *borrowing; /* by job: runs beyond its queue's quota */
    bool *victim;    /* by job: chosen for preemption in this pass */
    bool *claimed;   /* by job: a stopping or victim job whose slots an earlier job waits for */
    size_t *running; /* indices of the RUNNING and STOPPING jobs: what preemption and
                        reservations look at, so that a pass costs pending x running, not
                        pending x all */
    size_t n_running;
    size_t *scratch;     /* n_running entries for preemption's candidates */
    struct release *rel; /* n_running entries for reservations */
    struct reservation *resv;
    size_t n_resv, cap_resv;
    struct sched_action *actions;
    size_t n_actions, cap_actions;
    const char **reasons;
    double *reserved_at;
    bool blocked; /* a job earlier in the order waits for capacity */
};

/* sched.c */
/* Appends a decision. 0 or -ENOMEM. */
int add_action(struct pass *p, enum sched_action_kind kind, size_t job, size_t for_job,
               const struct res_set *slots);

/* sched-quota.c */
/* How much of limit l a job with resources r holds on slots (NULL: not placed yet, so model
 * limits count only a request of that very model). */
uint64_t quota_amount(const struct res_node *node, const struct quota_limit *l,
                      const struct job_resources *r, const struct res_set *slots);
/* Whether used + the job stays within every limit of quota. used is parallel to quota->l. */
bool quota_fits(const struct res_node *node, const struct quota *quota, const uint64_t *used,
                const struct job_resources *r, const struct res_set *slots);
void quota_charge(const struct res_node *node, const struct quota *quota, uint64_t *used,
                  const struct job_resources *r, const struct res_set *slots, int sign);
/* Charges (sign +1) or releases (-1) a job in its queue's and its user's ledgers. */
int ledger_add(struct pass *p, const struct sched_job *sj, const struct res_set *slots, int sign);
bool queue_fits(const struct pass *p, const struct sched_job *sj, const struct res_set *slots);
bool user_fits(struct pass *p, const struct sched_job *sj);

/* sched-reserve.c */
/* Picks slots for a job among the free ones it may use now (reserved slots only when it ends
 * before the reservation), with CPUs and memory free. */
bool pick_now(const struct pass *p, const struct sched_job *sj, struct res_set *ret);
/* Reserves capacity for jobs[i] when it has waited past starve_after. 0 or -ENOMEM. */
int reserve_if_starving(struct pass *p, size_t i);

/* sched-preempt.c */
/* Chooses victims so that jobs[i] fits. Returns 1 when it waits for capacity being freed (its
 * reason set), 0 when preemption cannot help, -ENOMEM. */
int preempt_for(struct pass *p, size_t i, bool within_quota);
