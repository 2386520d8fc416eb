/* A cgroup (v2) of its own for a process, so that what runs in it can be told apart by anyone who
 * reads /proc/PID/cgroup (gpumon attributes GPU memory by it) and cannot step out of it.
 *
 * The scope is made below the caller's own cgroup, which works where that cgroup is the caller's
 * to change: root, or a delegated subtree (systemd's Delegate=yes, a batch system's job cgroup
 * handed to the user). Elsewhere (a login session's scope, owned by root) it fails with -EACCES
 * and the caller goes on without one. Only cgroup v2 (a pure v2 host, or the v2 hierarchy of a
 * hybrid one) is used: v1 has no safe delegation. Not thread-safe against itself for one name. */
#pragma once

#include <sys/types.h>

#include "lib/errmsg.h"

/* Makes (or reuses, after a killed run) the cgroup NAME below the caller's own and moves pid into
 * it. Returns 0 and the malloc'd directory in *ret_dir, or -errno with a message: -ENOENT (no
 * cgroup v2 here), -EACCES/-EPERM/-EROFS (not the caller's to change), -EINVAL (a name that is
 * not one path component). */
int cgroup_scope_enter(const char *name, pid_t pid, char **ret_dir, struct errmsg *e);

/* Moves pid (0: the caller) into the v2 cgroup that target is in, as a process that joins a
 * container must (capsule exec). 0, or -errno as above; -ESRCH when target is gone. */
int cgroup_join(pid_t target, pid_t pid);

/* Removes the scope once what ran in it has ended. -EBUSY while processes are left in it (a
 * daemon the command started outside a pid namespace): the scope then stays, still naming them. */
int cgroup_scope_remove(const char *dir);
