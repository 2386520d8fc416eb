/* From Pyxis' options and the step to `capsule hold`'s command line and environment: what
 * capsule is asked for a step (step.h runs it). Pure: tested without Slurm.
 *
 *   data dir   runtime_path/UID/jobs/JOBID (unnamed containers, and named ones with
 *              container_scope=job), runtime_path/UID/global (named, container_scope=global)
 *   name       auto: --join (a held one is joined, a kept one used, else created);
 *              create: --create-only; exec: --join-only; no_exec: neither (a held one is
 *              refused: two overlays cannot share one writable layer)
 *   mounts     binds as --mount SRC:DST[:ro] (SRC relative to the job's working directory, DST
 *              relative to /), tmpfs as --mount tmpfs:DST:OPTS; a source that does not exist is an
 *              error naming it; the batch step's script and the step's PMIx server directory
 *              are bound where Slurm has them (the script runs inside; MPI there finds its
 *              server's store)
 *   save       --container-save's folder must be writable by the user (checked before the step
 *              runs); the file is written by `capsule save` after the last task (hold_args_save)
 *   entrypoint --run-entrypoint when it is to run, its output to a file of the step that the
 *              plugin shows with --container-entrypoint-log or when the start fails
 *   GPUs       --gpus from the step's allocation (SLURM_STEP_GPUS; the batch step's
 *              SLURM_JOB_GPUS), as indexes; none when the step has none (CUDA_VISIBLE_DEVICES,
 *              which a user may set, decides nothing); a task's own share (--gpus-per-task)
 *              is renumbered into the container's numbering (hold_task_gpus)
 *   env        the job's, less PATH, LD_LIBRARY_PATH, LD_PRELOAD (capsule is the admin's
 *              program, run with a plain PATH) and LANG, LANGUAGE, LC_ALL unless
 *              --container-env names them (Pyxis' rule: the host's locale is rarely in the
 *              image) */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "capsule/slurm/plugin-config.h"
#include "capsule/slurm/pyxis-args.h"
#include "lib/errmsg.h"

struct hold_step {
    uid_t uid;
    gid_t gid;
    uint32_t job_id, step_id;
    char *const *job_env;
    bool batch;
    const char *batch_script; /* the batch step's script, on the host */
    const char *pmix_dir;     /* the step's PMIx server directory, or NULL (hold_pmix_dir) */
};

struct hold_request {
    char *program;
    char **argv;
    char **env;
};

/* Whether the image's entrypoint runs first (--[no-]container-entrypoint, else
 * execute_entrypoint): capsule hold --run-entrypoint, its output in hold_entrypoint_log(). */
bool hold_args_entrypoint(const struct pyxis_args *a, const struct plugin_config *c);
/* runtime_path/UID/entrypoint.JOB.STEP.log, malloc'd; NULL: out of memory. */
char *hold_entrypoint_log(const char *runtime_path, const struct hold_step *st);

/* The hold for the step, worked out as the job's user (it checks paths). 0, -ENOENT
 * ("--container-mounts: source path does not exist: /x"), -EACCES (--container-save's folder),
 * -EINVAL, -ENOMEM. */
int hold_args_build(const struct pyxis_args *a, const struct plugin_config *c,
                    const struct hold_step *st, const char *program, struct hold_request *ret,
                    struct errmsg *e);
void hold_request_done(struct hold_request *r);

/* Where --container-save writes (relative to the job's working directory), malloc'd; NULL when
 * not asked or out of memory. */
char *hold_save_path(const struct pyxis_args *a, char *const *job_env);

/* `capsule save --pid HOLDER --image IMAGE PATH` for --container-save once the step's tasks
 * have ended, with the environment of the hold. 0 or -ENOMEM. */
struct held;
int hold_args_save(const struct pyxis_args *a, const struct hold_step *st, const char *program,
                   const struct held *h, struct hold_request *ret, struct errmsg *e);

/* The step's PMIx server directory (PMIX_SERVER_TMPDIR, "SPOOL/pmix.JOB.STEP"), found in maps,
 * the text of slurmstepd's /proc/self/maps: Slurm's mpi/pmix has mapped its shared-memory store
 * there before the tasks start, while the variable itself is set only in each task's
 * environment, after the container has started. malloc'd; NULL when the step has none. */
char *hold_pmix_dir(const char *maps, uint32_t job_id, uint32_t step_id);

/* A task's CUDA_VISIBLE_DEVICES in the container's numbering: the step's GPUs are 0..n-1
 * inside in the order of step ("2,3"), so the task's "3" is "1". 0 and *ret (malloc'd), 1 when
 * there is nothing to renumber (no task value, or one that names a GPU not in step: left as the
 * container has it), -ENOMEM. */
int hold_task_gpus(const char *step, const char *task, char **ret);
/* The step's GPU list as Slurm gave it (malloc'd), NULL when it has none. */
char *hold_step_gpus(const struct hold_step *st);

/* The step's own variables, which a task keeps whatever the container's environment says
 * (SLURM_*, PMI_*, PMIX_*: per task or per step, the image cannot know them). */
bool hold_env_is_the_jobs(const char *name);

/* runtime_path/UID/jobs/JOBID and runtime_path/UID/global, malloc'd; NULL: out of memory. */
char *hold_job_dir(const char *runtime_path, uid_t uid, uint32_t job_id);
char *hold_global_dir(const char *runtime_path, uid_t uid);
