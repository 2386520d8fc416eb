/* The names that tie gpunode's components together, spelled once: what capsule and gpuq put on
 * a process and gpumon reads back to say whose GPU memory it is.
 *
 * A container's processes cannot leave their scope, and no other user can move a process into
 * or out of a user's cgroups; an environment variable can be set by any process. So gpumon
 * trusts the scope first and the variable only as a hint (docs/capsule.md says what the label
 * is worth). */
#pragma once

/* Environment variables of a container's and a job's processes. */
#define NAMES_ENV_CAPSULE_NAME "CAPSULE_NAME"
#define NAMES_ENV_GPUQ_JOB_ID  "GPUQ_JOB_ID"
/* Slurm's own, read by gpumon. */
#define NAMES_ENV_SLURM_JOB_ID "SLURM_JOB_ID"

/* cgroup scopes: "capsule-<container name>.scope", "gpuq-job-<job id>.scope". */
#define NAMES_SCOPE_CAPSULE  "capsule-"
#define NAMES_SCOPE_GPUQ_JOB "gpuq-job-"
#define NAMES_SCOPE_SUFFIX   ".scope"
