/* The launch description of one run of a job: gpuqd writes it (a file of root's, mode 0600) and
 * gpuq-run reads it. One JSON object; the keys are the fields' names, a NULL string is null or
 * left out, and an unknown key is an error (a gpuq-run older than its gpuqd must not quietly run
 * a job without something it was asked for).
 *
 *   {"job_id": 42, "run": 1, "uid": 1000, "gid": 1000, "user": "ann", "home": "/home/ann",
 *    "shell": "/bin/bash", "argv": ["python3", "train.py"], "env": ["EPOCHS=3", ...],
 *    "cwd": null, "image": null, "capsule": null,
 *    "cgroup_parent": "/sys/fs/cgroup/gpuq.slice", "cpu_milli": 4000, "mem_bytes": 17179869184,
 *    "log_path": "/var/lib/gpuq/jobs/42/run-1.log",
 *    "exit_path": "/var/lib/gpuq/jobs/42/run-1.exit", "pid_path":
 * "/var/lib/gpuq/jobs/42/run-1.pid"}
 *
 * Strings are malloc'd and owned by the struct. */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "lib/errmsg.h"

#define RUN_UMASK_DEFAULT 022

/* Larger than any spec gpuqd writes (a job's environment is bounded by the API's body limit). */
#define RUN_SPEC_MAX (4u << 20)

struct run_spec {
    uint64_t job_id;
    unsigned run; /* which run of the job (1, 2, ... over its retries and requeues) */
    uid_t uid;    /* the job's user, from the passwd entry gpuqd looked up; 0 allowed */
    gid_t gid;
    char *user;    /* the user's name (supplementary groups, USER, LOGNAME) */
    char *home;    /* absolute: HOME, and the working directory when cwd is NULL */
    char *shell;   /* SHELL; NULL: "/bin/sh" */
    char **argv;   /* the command; may be empty only for an image job (the image's own) */
    char **env;    /* "K=V", in order: the user's submitted environment, then gpuqd's own names
                      (GPU lists), the last assignment of a name winning (run-env.h) */
    char *cwd;     /* absolute; NULL: home (an image job: inside the container, the image's) */
    char *image;   /* NULL: a plain process; else run through `capsule run` */
    char *capsule; /* absolute path of the capsule program; required with image */
    char *cgroup_parent; /* absolute cgroup v2 directory in which to make the job's scope;
                            NULL: no scope (no limits, signals by process group) */
    unsigned cpu_milli;  /* CPU limit in thousandths of a CPU; 0: none */
    uint64_t mem_bytes;  /* memory limit; 0: none */
    unsigned umask;      /* the job's umask (the submitter's); absent: RUN_UMASK_DEFAULT */
    char *log_path;      /* absolute: the job's stdout and stderr, appended; the folder is root's */
    char *exit_path;     /* absolute: the exit record (run-exit.h), written when the run ended */
    char *pid_path;      /* absolute: "<pgid>\n" of the job's process group, once started */
};

/* Frees what s holds and zeroes it; s itself is the caller's. */
void run_spec_done(struct run_spec *s);

/* The spec as JSON text (malloc'd, in *ret_text). -EINVAL with a message when s would be refused
 * by run_spec_from_json (a relative path, a missing field), -ENOMEM. */
int run_spec_to_json(const struct run_spec *s, char **ret_text, struct errmsg *e);

/* Parses JSON text of len bytes (need not be NUL-terminated). 0 and *ret (the caller calls
 * run_spec_done), or -EINVAL with a message naming the field ("run spec: \"cwd\": not an
 * absolute path"), -ENOMEM. Nothing is written to *ret on failure. */
int run_spec_from_json(const char *text, size_t len, struct run_spec *ret, struct errmsg *e);

/* run_spec_to_json, written atomically to path with mode 0600 (run-file.h). 0 or -errno with a
 * message. */
int run_spec_write(const char *path, const struct run_spec *s, struct errmsg *e);

/* Reads and parses path, which must be a regular file of the caller's effective uid that no one
 * else may write (-EPERM otherwise): gpuq-run runs as root and acts on it. 0 and *ret, or -errno
 * with a message. */
int run_spec_read(const char *path, struct run_spec *ret, struct errmsg *e);
