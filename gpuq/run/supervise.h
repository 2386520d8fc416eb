/* gpuq-run's work: one run of a job, from its spec to its exit record. What gpuqd can rely on is
 * in run-control.h; this is how the supervisor keeps it.
 *
 *  1. The log: log_path opened as root (created 0600, appended, never through a symbolic link)
 *     and handed to the user (fchown).
 *  2. The scope, when the spec names a cgroup parent: "gpuq-job-<id>.scope" in it (cgroup v2).
 *     A leftover that still holds processes can only be an earlier run of the same job whose
 *     supervisor was killed: they are killed and the scope made afresh. cpu.max and memory.max
 *     (with memory.swap.max 0 and memory.oom.group 1: a limited job does not swap, and an OOM
 *     kill ends all of it) are written when the controllers are enabled for the scope; when they
 *     are not, the job still runs, and "limits not enforced: <why>" goes to the top of the log
 *     and into the exit record's note.
 *  3. The job's process: it enters the scope, makes its own process group, takes the log as
 *     stdout and stderr and /dev/null as stdin, becomes the user (supplementary groups, gid, uid;
 *     root stays root when the job is root's), goes to its working directory as the user,
 *     starts with no signal blocked or ignored and the spec's umask, and executes the command with
 * the job's environment (run-env.h), PATH searched as the user would. A step that fails ends it
 *     with RUN_EXIT_* below, and why goes to the log and into the note.
 *  4. The supervisor waits. It forwards no signal (gpuqd signals the job directly) and, being a
 *     child subreaper, adopts what the job leaves behind.
 *  5. When the main process has ended, whatever else of the job is left (in the scope, in the
 *     process group, or adopted) is killed and reaped, the scope removed, and then the exit
 *     record written atomically: once gpuqd sees it, the job's GPUs are free. */
#pragma once

#include "gpuq/run/run-spec.h"
#include "lib/errmsg.h"

/* Exit statuses of a run that did not get as far as its command (as docker run's). */
#define RUN_EXIT_SETUP       125 /* the supervisor could not set the run up: log, scope, user */
#define RUN_EXIT_CANNOT_EXEC 126 /* the command or working directory is there but unusable */
#define RUN_EXIT_NOT_FOUND   127 /* the command or working directory does not exist */

/* What gpuq-run does to itself first: descriptors 0-2 open, a session of its own (gpuqd's
 * process group and terminal are not its), every signal that would end it by default ignored
 * but SIGKILL (gpuqd's own shutdown must not end running jobs), SIGCHLD at its default, child
 * subreaper, "/" as working directory, umask 077. 0 or -errno with a message. */
int supervise_detach(struct errmsg *e);

/* Runs the job of s to its end, as above. Returns 0 once the exit record is written, whatever
 * the job did; -errno with a message when no record could be written. Blocks for as long as the
 * job runs. The process must have called supervise_detach, be root (or the job's own user), and
 * have no other children. */
int supervise_run(const struct run_spec *s, struct errmsg *e);
