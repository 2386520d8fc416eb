/* gpuqd's configuration file (/etc/gpunode/gpuqd.conf; deploy/gpuq/gpuqd.conf is an annotated
 * example). INI, read through lib/config.h:
 *
 *   [gpuqd]
 *   socket = PATH              the API's Unix socket; default /run/gpuq/gpuq.sock
 *   state_dir = PATH           the queue's database; default /var/lib/gpuq
 *   metrics_listen = HOST:PORT /metrics; default 127.0.0.1:9430; "" = none
 *   admin_group = GROUP        members may administer the queue as root may; default none
 *   audit_log = PATH           default /var/log/gpunode/gpuq-audit.log
 *   capsule = PATH             the capsule program for container jobs; default: found by gpuqd
 *   drain_grace_max = DURATION a drain's cap on each job's grace; default 0 = the jobs' own
 *   cpus = N, memory = SIZE    what jobs may use of the node; default what the machine has
 *
 *   [scheduler]
 *   time_zone = ZONE           the windows' clock ("Europe/Rome"); default the host's
 *   fairshare_half_life = DURATION   default 7d
 *   starve_after = DURATION    default 1h
 *   backoff_base = DURATION    a failed job's first wait before its retry; default 10s
 *   backoff_max = DURATION     default 6m; not below backoff_base
 *   max_grace = DURATION       the longest checkpoint grace a job may ask for; default 15m
 *   max_jobs_per_user = N      a user's pending and running jobs at once; default 5000
 *   default_priority_class = NAME    a [priority-class.NAME]; default none (priority 0)
 *
 *   [priority-class.NAME]
 *   value = INTEGER            may be negative
 *
 *   [queue.NAME]               one or more; the first in the file is the default queue
 *   priority = INTEGER         default 0; higher first
 *   class = guaranteed|burstable|besteffort   default burstable
 *   gpus, gpus.MODEL, mig.PROFILE, cpus, memory, jobs = LIMIT     the queue's quota
 *   user.gpus, user.cpus, ... = LIMIT                             each user's share at most
 *   default_time, max_time, min_runtime = TIME  (queue_parse_time(): "2h", "1-12:00:00")
 *
 *   [window.NAME]              quotas that differ at some times, in the time_zone's clock
 *   queue = NAME[, NAME...]
 *   days = mon-fri | sat-sun | mon,wed,fri | fri-mon | daily
 *   dates = 2026-12-24..2026-12-26, 2027-01-01
 *   start = HH:MM, end = HH:MM   (end 24:00 allowed; both absent: whole days)
 *   gpus, gpus.MODEL, ... = LIMIT   at least one
 *
 * LIMIT: GPUs, MIG instances and jobs as integers; cpus as "8", "0.5" or "500m"; memory as
 * "64G", "512Mi". NAME: 1..63 of [A-Za-z0-9._-]. A section counts only when it sets a key.
 * Every other section or key is an error. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "gpuq/policy/queue.h"
#include "lib/errmsg.h"

#define GPUQD_DEFAULT_SOCKET         "/run/gpuq/gpuq.sock"
#define GPUQD_DEFAULT_STATE_DIR      "/var/lib/gpuq"
#define GPUQD_DEFAULT_METRICS_LISTEN "127.0.0.1:9430"
#define GPUQD_DEFAULT_AUDIT_LOG      "/var/log/gpunode/gpuq-audit.log"
#define GPUQD_DEFAULT_QUEUE          "default"

struct gpuqd_config {
    char *socket;
    char *state_dir;
    char *metrics_listen; /* "" = no metrics */
    char *admin_group;    /* NULL: root only */
    char *audit_log;
    char *capsule;            /* NULL: the caller finds it */
    double drain_grace_max_s; /* 0: the jobs' own grace */
    uint64_t node_cpu_milli;  /* 0: the machine's CPUs */
    uint64_t node_mem_bytes;  /* 0: the machine's memory */
    struct sched_config sched;
};

/* Loads the file at path, or with path NULL the defaults and one queue "default" (burstable,
 * priority 0, no limits). Returns 0 and *ret (free with gpuqd_config_done), or a negative errno
 * with a message naming file:line, section and key and saying what is wrong:
 *   -ENOENT etc. when the file cannot be read, -EINVAL / -ERANGE for a bad value, an unknown
 *   section or key, or a file without a queue, -ENOMEM.
 * *ret is written only on success. */
int gpuqd_config_load(const char *path, struct gpuqd_config *ret, struct errmsg *e);

/* The same for a text held in memory (not NUL-terminated); name stands for the file name in
 * messages. Always a file: at least one [queue.*] is needed. */
int gpuqd_config_load_string(const char *name, const char *text, size_t len,
                             struct gpuqd_config *ret, struct errmsg *e);

/* Frees what a loaded config holds and zeroes it; NULL is allowed. */
void gpuqd_config_done(struct gpuqd_config *c);
