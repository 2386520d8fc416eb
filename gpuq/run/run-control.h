/* What gpuqd calls to start, watch, signal and hear the end of a job's run. Each run goes through
 * gpuq-run (supervise.h), a supervisor of its own, so that a job outlives a restart or a kill -9
 * of gpuqd and its exit status is not lost.
 *
 * The contract between gpuqd and gpuq-run:
 *  - gpuqd writes the run's spec (run_spec_write: root's, 0600) with paths of its own choosing
 *    for the log, the exit record and the pid file, none of them there yet, in folders of
 *    root's; then run_start. It keeps the spec until the run has ended; gpuq-run deletes
 *    nothing.
 *  - It stores the supervisor's pid and start time (job.pid, job.pid_start) with the job.
 *  - While gpuqd runs, the supervisor is its child: gpuqd reaps it on SIGCHLD (waitpid). After
 *    a restart of gpuqd a supervisor is no longer its child: gpuqd checks run_alive(pid, start)
 *    (a pid reused by another process fails the start-time check), takes pidfd_open(pid) and
 *    polls it; the fd becomes readable when the supervisor has ended.
 *  - Once the supervisor has ended, the exit record (run_exit_read) says how the job ended. The
 *    record is written only when every process of the job is gone (its GPUs are free again), or
 *    its note says which would not die. Supervisor exit statuses: 0 the record was written; 1 it
 *    could not be; 2 the spec could not be read (nothing was started).
 *  - No record after the supervisor has ended: it was killed (SIGKILL, the only signal it does
 *    not ignore) or failed. The job may still run: gpuqd kills it with run_signal(SIGKILL) and
 *    counts the run as failed.
 *  - gpuqd signals a job (checkpoint signal, SIGKILL after the grace) with run_signal, never the
 *    supervisor, which forwards nothing. With a scope, every process of the scope gets the
 *    signal; without one, the job's process group (the pid file), valid only while the
 *    supervisor is alive: it is the group leader's parent, so the pid is not reused meanwhile.
 *  - Under systemd, gpuqd's unit needs KillMode=process: with control-group, stopping gpuqd
 *    would kill the supervisors (and jobs) in its cgroup. The cgroup parent must be gpuqd's to
 *    change (Delegate=yes), with "+cpu +memory" in its cgroup.subtree_control for limits. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "gpuq/run/run-exit.h"
#include "lib/errmsg.h"

/* Starts gpuq_run_path on spec_path: stdin and stdout on /dev/null, stderr the caller's, no other
 * descriptor of the caller's, a minimal environment (PATH); gpuq-run makes its own session. Returns
 * 0, *ret_pid and its start time (run_pid_start_time), or -errno with a message (the program could
 * not be executed). The caller reaps the child. */
int run_start(const char *gpuq_run_path, const char *spec_path, pid_t *ret_pid,
              uint64_t *ret_start_time, struct errmsg *e);

/* What /proc/PID/stat says of a process that gpuq needs. */
struct run_pid_stat {
    char state; /* 'R', 'S', 'Z' (a zombie: ended, not yet reaped), ... */
    pid_t ppid;
    uint64_t start_time; /* field 22: clock ticks after boot; with the pid, names one process */
};

/* Reads /proc/PID/stat (the fields after the last ')': a command name may hold any character).
 * 0, -ESRCH when there is no such process, -EBADMSG, -errno. */
int run_pid_stat(pid_t pid, struct run_pid_stat *ret);

/* The start time of pid (run_pid_stat's). 0, -ESRCH, -errno. */
int run_pid_start_time(pid_t pid, uint64_t *ret);

/* Whether pid is still the process that had start_time, and has not ended (not a zombie). */
bool run_alive(pid_t pid, uint64_t start_time);

/* Sends sig to every process of the job. scope_dir (run_scope_path) when the run has a scope:
 * every process in it and below, SIGKILL through cgroup.kill; NULL: the process group pgid (the
 * pid file's, run_pgid_read). 0, -ESRCH when nothing is left to signal (also when the scope is
 * gone), -EINVAL for a pgid below 2 (0 and 1 would name the caller's group and every process),
 * -errno. */
int run_signal(const char *scope_dir, pid_t pgid, int sig);

/* Reads the pid file ("<pgid>\n"). 0, -ENOENT while there is none (the job has not started),
 * -EBADMSG, -EPERM (not a file of the caller's own that only it may write), -errno; with a
 * message. */
int run_pgid_read(const char *pid_path, pid_t *ret, struct errmsg *e);

/* Reads the exit record at exit_path (run-exit.h). 0 and *ret (the caller calls run_exit_done),
 * -ENOENT while there is none, -EINVAL for a malformed one, -EPERM (not a file of the caller's
 * own that only it may write: gpuq-run writes it as root), -errno; with a message. */
int run_exit_read(const char *exit_path, struct run_exit *ret, struct errmsg *e);

/* The run's scope, "<cgroup_parent>/gpuq-job-<id>.scope" (lib/names.h), into buf. 0, or
 * -ENAMETOOLONG when it does not fit in size bytes. */
int run_scope_path(const char *cgroup_parent, uint64_t job_id, char *buf, size_t size);
