/* Process attribution: who owns a process that uses a GPU.
 *
 * NVML names GPU processes only by pid. procs_describe() turns a pid into labels a person can act
 * on: the user (from the kernel's real uid), the command name, and the container and job the
 * process runs in, read from its cgroup path and, failing that, its environment.
 *
 * Trust: uid and user come from the kernel and cannot be forged by the process. comm is chosen by
 * the process itself (prctl, exec name), and a container or job taken from the environment is a
 * hint only: any process can set CAPSULE_NAME, GPUQ_JOB_ID or SLURM_JOB_ID to blame someone
 * else. Cgroup paths are set by the container runtime or the job manager and are trustworthy as
 * long as the process cannot move itself between cgroups (it can in a delegated subtree, e.g. a
 * systemd user session). Every value is validated (character set, length) before it becomes a
 * label, so no input reaches the exposition raw. */
#pragma once

#include <stddef.h>
#include <sys/types.h>

#include "snapshot.h"

/* Read bounds: a cgroup file or an environment beyond these is cut off there (a cut environment
 * entry is ignored rather than used shortened). */
#define PROCS_CGROUP_MAX  (64 * 1024)
#define PROCS_ENVIRON_MAX (256 * 1024)

/* Describes process pid as found under proc_root (NULL: "/proc"; tests pass a directory tree of
 * the same shape). Fills p->uid (real uid from status' "Uid:" line), p->user (login name of that
 * uid, or the number when it has none), p->comm, p->container and p->job; leaves pid, gi_id and
 * the memory fields, which come from NVML, alone.
 *
 * container: "docker://<12 hex>", "podman://<12 hex>", "containerd://<12 hex>" or
 * "capsule://<name>"; job: "slurm://<id>" or "gpuq://<id>"; "" when unknown. They come from the
 * cgroup file; only when it yields neither, from CAPSULE_NAME, GPUQ_JOB_ID and SLURM_JOB_ID in the
 * environment (readable by root or the owner only; skipped when unreadable).
 *
 * Returns 0; -ESRCH when the process does not exist or exits before its status and comm are read;
 * -ENOMEM; another -errno when its directory cannot be opened (-ENAMETOOLONG for an overlong
 * proc_root, -EACCES). On failure uid is (uid_t)-1 and all strings "", so the caller can still
 * show the memory the process uses. A file that cannot be read (another user's environ without
 * root) only leaves its fields unknown. The user comes from procs_user_name() (cached); the rest
 * reads several files, so callers should still describe a pid once and keep the result. */
int procs_describe(const char *proc_root, pid_t pid, struct proc_sample *p);

/* The user name cache: how many uids it holds, and how long (seconds) a name is kept before it is
 * looked up again, so that a renamed or added account shows within that time. */
#define PROCS_USER_CACHE_MAX   256
#define PROCS_USER_CACHE_TTL_S 600.0

/* Writes the login name of uid into buf (size bytes), or the uid's number when it has none or one
 * that does not fit. Names come from NSS (getpwuid_r), which may take long with a network
 * directory, so they are cached process-wide: up to PROCS_USER_CACHE_MAX uids (the entry that
 * expires first makes room), each kept PROCS_USER_CACHE_TTL_S seconds; a failed lookup (NSS
 * error) is kept 30 s. now is CLOCK_MONOTONIC seconds, a parameter so that tests can move time.
 * Thread-safe; no lock is held during the lookup itself. Never fails. */
void procs_user_name(uid_t uid, double now, char *buf, size_t size);

/* Reads a /proc/<pid>/cgroup text (len bytes, NUL-termination not needed; v1 lines
 * "<id>:<controllers>:<path>" and the v2 line "0::<path>") and fills p->container and p->job
 * where they are still "", each from the first line that names one:
 *   docker-<64 hex>.scope or docker/<64 hex>   -> docker://<first 12 hex>
 *   libpod-<64 hex>.scope                       -> podman://<12 hex>
 *   cri-containerd-<64 hex>.scope               -> containerd://<12 hex>
 *   capsule-<name>.scope                        -> capsule://<name>
 *   slurm/uid_<n>/job_<id>, or job_<id> below a slurmstepd* component -> slurm://<id>
 *   gpuq-job-<id>.scope                         -> gpuq://<id>
 * A name or gpuq id is 1 to 63 of [A-Za-z0-9_.-] and not "." or ".."; a Slurm id is 1 to 20
 * digits. Returns how many of the two fields it filled (0, 1 or 2). Pure; never fails. */
int procs_parse_cgroup(const char *text, size_t len, struct proc_sample *p);

/* Reads a /proc/<pid>/environ block (len bytes of NUL-terminated KEY=VALUE entries; an entry
 * without its NUL is ignored, as it may have been cut) and fills, where still "", p->container
 * from CAPSULE_NAME and p->job from GPUQ_JOB_ID, else SLURM_JOB_ID. The first entry of a key
 * counts, as for getenv(); an invalid value (same rules as procs_parse_cgroup) is ignored.
 * Returns how many of the two fields it filled. Pure; never fails. */
int procs_parse_environ(const char *block, size_t len, struct proc_sample *p);

/* Makes s safe as a label value, in place: each control character (below 0x20, 0x7f) and each
 * byte that is not part of valid UTF-8 becomes '?'. Returns how many bytes it replaced. */
size_t procs_sanitize_label(char *s);
