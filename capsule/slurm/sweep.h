/* The plugin's folders under runtime_path, as root: made for a user, removed for a job, swept
 * after a node crash. Every removal goes through rm_tree (lib/rm-tree.h): it never follows a
 * link a user planted and never crosses a mount.
 *
 *   runtime_path/UID/          0700, the user's (made by slurmstepd as root before the step)
 *   runtime_path/UID/jobs/JOB  the job's containers: removed by the job's epilog
 *   runtime_path/UID/global    named containers of container_scope=global: kept */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "lib/errmsg.h"

/* Makes runtime_path/UID (0700, the user's) unless it is there; refuses one that is not a
 * directory of that user. 0 or -errno with a message. */
int sweep_user_dir(const char *runtime_path, uid_t uid, gid_t gid, struct errmsg *e);

/* Removes runtime_path/UID/jobs/JOB. 0 (also when absent) or -errno with a message. */
int sweep_job(const char *runtime_path, uid_t uid, uint32_t job_id, struct errmsg *e);

/* At slurmd's start: removes the job folders last changed before this boot (no job survives a
 * reboot; a slurmd restart while jobs run leaves theirs alone). Best effort, logged. */
void sweep_after_boot(const char *runtime_path);

/* The same with the boot time given (seconds since the epoch), for tests. */
void sweep_before(const char *runtime_path, int64_t boot_time);
