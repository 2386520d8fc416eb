/* gpuq's job model: what a user asks for (struct job_spec) and what the queue knows about a job
 * (struct job). Slurm-shaped on purpose (states, time limit, exit code, requeue), so that the
 * step that hands jobs to Slurm can map one to an sbatch script without a second model.
 *
 * Pure data: nothing here does I/O. Strings in a job_spec are malloc'd and owned by it. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/macro.h"

#define JOB_NAME_MAX      64 /* also a Kubernetes generateName prefix plus its suffix */
#define JOB_QUEUE_MAX     64
#define JOB_MODEL_MAX     32 /* "H100", "A100-80GB": matched against the GPU's NVML name */
#define JOB_PROFILE_MAX   32 /* a MIG profile, "1g.10gb" */
#define JOB_PRIOCLASS_MAX 64

/* Every job asks for one kind of GPU: whole GPUs (of any model, or of one), or MIG instances of
 * one profile. */
enum job_gpu_kind {
    JOB_GPU_NONE,
    JOB_GPU_WHOLE, /* count whole GPUs; model "" = any model */
    JOB_GPU_MIG,   /* count MIG instances of profile */
};

/* The resources a job holds while it runs. */
struct job_resources {
    enum job_gpu_kind gpu_kind;
    unsigned gpus;                 /* whole GPUs or MIG instances */
    char model[JOB_MODEL_MAX];     /* JOB_GPU_WHOLE: "" or a model ("H100") */
    char profile[JOB_PROFILE_MAX]; /* JOB_GPU_MIG: "1g.10gb" */
    unsigned cpu_milli; /* CPUs in thousandths (Kubernetes "500m" = 500); 0 = unlimited */
    uint64_t mem_bytes; /* 0 = unlimited */
};

/* What a job's process does when it has ended with a failure. */
enum job_restart {
    JOB_RESTART_ON_FAILURE, /* retry up to backoff_limit (Kubernetes' OnFailure, gpuq's default) */
    JOB_RESTART_NEVER,      /* Kubernetes' Never: the Job's backoffLimit still retries it as a
                               new pod; gpuq treats both alike, the field is kept for show */
};

/* A submission, validated (job-spec.h makes one from the API's JSON; the CLI and the Kubernetes
 * Job reader make that JSON). */
struct job_spec {
    char *name;           /* "" allowed: the job's id names it */
    char *queue;          /* NULL: the default queue */
    char *priority_class; /* NULL: the queue's default priority */
    struct job_resources res;
    double time_limit_s;      /* 0: the queue's limit (or none); one run's wall time */
    double active_deadline_s; /* 0: none; wall time since the first start, over every retry
                                 (Kubernetes' activeDeadlineSeconds) */
    char *image;              /* NULL: a plain process; else run through `capsule run` */
    char **argv;              /* the command (the image's own with an image and no argv) */
    char **env;               /* "K=V" the job gets on top of the base environment */
    char *cwd;                /* NULL: the user's home */
    bool interactive;
    unsigned backoff_limit; /* failed runs retried; preemptions do not count */
    int checkpoint_signal;  /* SIGTERM unless asked */
    double grace_s;         /* checkpoint signal to SIGKILL */
    enum job_restart restart;
    int umask; /* the submitter's (sbatch passes it as SLURM_UMASK); -1: 022 */
};

void job_spec_done(struct job_spec *s);

/* Where a job stands. Terminal states never change again. */
enum job_state {
    JOB_PENDING, /* waiting: for capacity, a hold, its backoff, a drain */
    JOB_RUNNING,
    JOB_STOPPING,  /* signalled (preemption, cancel, time limit, drain); its grace runs */
    JOB_COMPLETED, /* exit status 0 */
    JOB_FAILED,    /* failed its last allowed run, or could not start */
    JOB_CANCELLED,
    JOB_TIMEOUT, /* passed its time limit or active deadline */
};
#define JOB_STATE_COUNT (JOB_TIMEOUT + 1)

/* "PENDING", "RUNNING", "STOPPING", "COMPLETED", "FAILED", "CANCELLED", "TIMEOUT" (Slurm's
 * spelling); NULL out of range. */
const char *job_state_name(enum job_state s);
/* -EINVAL for an unknown name. */
int job_state_from_name(const char *name, enum job_state *ret);
bool job_state_is_final(enum job_state s);

/* Why a job is stopping, so that its end is recorded right. */
enum job_stop_reason {
    JOB_STOP_NONE,
    JOB_STOP_PREEMPT, /* requeued at the front when it has ended */
    JOB_STOP_DRAIN,   /* requeued, like a preemption */
    JOB_STOP_CANCEL,
    JOB_STOP_TIMEOUT,
};
const char *job_stop_reason_name(enum job_stop_reason r);
int job_stop_reason_from_name(const char *name, enum job_stop_reason *ret);

/* Times are seconds of the wall clock (UNIX time), as a user reads them and as they survive a
 * restart of gpuqd; 0 = never. */
struct job {
    uint64_t id;
    uid_t uid;
    gid_t gid;
    struct job_spec spec;
    enum job_state state;
    enum job_stop_reason stop_reason; /* JOB_STOPPING: why */
    bool held;                        /* a user's hold: never started until released */
    int priority;                     /* from the priority class */
    double submit_time;
    double first_start_time; /* the first run's start, for the active deadline */
    double start_time;       /* this run's */
    double end_time;
    double stop_deadline;   /* JOB_STOPPING: when SIGKILL comes */
    double last_checkpoint; /* 0: never reported (the run's start counts) */
    double eligible_time;   /* a retry's backoff: not started before */
    double requeue_time;    /* last preemption's requeue: at the front of its
                               priority */
    unsigned failures;      /* counted against backoff_limit */
    unsigned preemptions;
    unsigned runs;
    int exit_status; /* wait(2) status of the last run, -1 none */
    char reason[64]; /* a pending job's reason; an ended one's cause */
    /* While it runs: what it holds, by slot index of the node (res.h), as a bitmap. */
    uint64_t slots[2];
    pid_t pid;          /* the run's supervisor (gpuq-run) */
    uint64_t pid_start; /* its start time in /proc/PID/stat, against pid reuse */
};
