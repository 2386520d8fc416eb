/* The sampler's cache of process attributions (procs.h).
 *
 * Describing a process reads several /proc files and looks its user up through NSS, so each pid is
 * described once and the result kept while NVML keeps listing it. A pid names a process only
 * together with its start time: every lookup of a cached pid compares the start time first, so a
 * pid reused by a new process gets its own labels at once. Used by one thread (no locking). */
#pragma once

#include <sys/types.h>

#include "lib/macro.h"
#include "snapshot.h"

struct proc_cache;

/* Allocates an empty cache that reads processes under proc_root (NULL: "/proc"; copied).
 * Returns 0 and *ret (free with proc_cache_free), or -ENOMEM. */
int proc_cache_new(const char *proc_root, struct proc_cache **ret);

/* Frees the cache; NULL is allowed. */
void proc_cache_free(struct proc_cache *c);
DEFINE_POINTER_CLEANUP(struct proc_cache, proc_cache_free)

/* Fills p->uid, user, comm, container and job for p->pid (the other fields are the caller's) and
 * marks the pid as listed in this pass. A pid not cached is described now; a cached one is
 * described again when its start time (field 22 of <proc_root>/<pid>/stat) changed. A cached
 * process whose stat is gone keeps its description: NVML still lists it, and blank labels would
 * split its series for nothing. A process that cannot be described gets uid (uid_t)-1 and empty
 * strings, and is tried again in the next passes (a few times: a /proc that never answers, as
 * under hidepid, costs no more than that). Returns 0, or -ENOMEM (p then unchanged). */
int proc_cache_fill(struct proc_cache *c, struct proc_sample *p);

/* Forgets the pids not filled since the previous sweep (NVML no longer lists them), so a pid that
 * comes back is described afresh. */
void proc_cache_sweep(struct proc_cache *c);
