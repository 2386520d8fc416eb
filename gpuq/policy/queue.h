/* Queues as the configuration defines them: priority, service class, quotas, per-user limits,
 * a calendar of windows that change the quotas, and the global settings of the scheduler.
 * Pure data, filled by gpuq/policy/gpuq-config.c and read by the scheduler. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "gpuq/policy/quota.h"

#define QUEUE_NAME_MAX 64

/* Kueue's and Kubernetes' three classes of service. */
enum service_class {
    SERVICE_GUARANTEED, /* runs only within its queue's quota; never preempted */
    SERVICE_BURSTABLE,  /* within quota, or borrowing idle capacity; preempted to give it back */
    SERVICE_BESTEFFORT, /* only on idle capacity; preempted before anything else */
};
/* "guaranteed", "burstable", "besteffort"; NULL out of range. */
const char *service_class_name(enum service_class c);
/* Case-insensitive ("Guaranteed", "BestEffort" too). -EINVAL otherwise. */
int service_class_from_name(const char *name, enum service_class *ret);

#define WINDOW_MAX_DATES 16

/* A calendar date, as the configured time zone counts it. */
struct cal_date {
    int year, month, day; /* 2026, 12, 24 */
};

/* A time of the week or of some dates when a queue's quota differs. In the calendar's time zone:
 * a window from 20:00 to 08:00 on mon-fri starts at 20:00 local time every weekday evening and
 * ends at 08:00 the next morning, whatever the UTC offset is on that day. */
struct window {
    char name[QUEUE_NAME_MAX];
    /* Days it starts on: bit 0 Monday ... bit 6 Sunday. 0 with dates set: only the dates. */
    unsigned days;
    /* Date ranges it starts on (inclusive). With days set as well, a day must match both. */
    unsigned n_dates;
    struct cal_date from[WINDOW_MAX_DATES], to[WINDOW_MAX_DATES];
    /* Minutes after local midnight; start 0..1439, end 0..1440 (24:00). A window starting on
     * day D is open from D at start to D at end, or to the next day at end when end <= start:
     * start == end is 24 hours (00:00-00:00 the whole day D). A start that a spring-forward
     * skips opens at the change; an end that a fall-back repeats ends at its first time. */
    unsigned start_min, end_min;
    struct quota quota; /* the queue's limits while the window is open */
};

/* Whether name is a queue's, window's or priority class's name: 1..63 of [A-Za-z0-9._-]. */
bool queue_name_valid(const char *name);

/* Parses a job's or a queue's time limit into seconds: parse_duration()'s forms ("90", "30m",
 * "2h", "1.5d"; a bare number is seconds) or Slurm's "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM",
 * "D-HH:MM:SS" (the leading field may run over: "90:00" is 90 minutes). Returns 0, -EINVAL, or
 * -ERANGE past 100 years. *ret_s is written only on success. */
int queue_parse_time(const char *s, double *ret_s);

struct queue {
    char name[QUEUE_NAME_MAX];
    int priority; /* higher first */
    enum service_class class;
    struct quota quota;      /* outside every window */
    struct quota user_limit; /* each user's share of it at most */
    double default_time_s;   /* a job's limit when it gives none; 0 = none */
    double max_time_s;       /* 0 = none */
    double min_runtime_s;    /* not preempted before it ran this long */
    unsigned n_windows;
    struct window *windows; /* in file order; a later open window wins key by key */
};

struct priority_class {
    char name[QUEUE_NAME_MAX];
    int value;
};

/* The whole scheduling configuration. */
struct sched_config {
    char *time_zone;              /* "Europe/Rome"; NULL = the host's local time */
    double fairshare_half_life_s; /* usage decays by half in this time */
    double starve_after_s;        /* a job waiting longer gets capacity reserved */
    double backoff_base_s;        /* first retry after this; doubles each failure */
    double backoff_max_s;
    unsigned long max_jobs_per_user; /* pending and running at once: one user cannot make the
                                        root daemon hold more */
    double max_grace_s;              /* the longest grace a job may ask for (and gets): a stop, a
                                        preemption, a time limit end within it */
    unsigned n_queues;
    struct queue *queues; /* the first is the default queue */
    unsigned n_classes;
    struct priority_class *classes;
    char *default_class; /* NULL: priority 0 */
};

/* Frees the queues (with their windows), the classes and the strings, and zeroes c; NULL is
 * allowed. */
void sched_config_done(struct sched_config *c);

/* The queue of that name, or NULL. */
const struct queue *sched_config_queue(const struct sched_config *c, const char *name);
/* The priority class of that name, or NULL. */
const struct priority_class *sched_config_class(const struct sched_config *c, const char *name);
