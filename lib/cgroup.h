/* A cgroup (v2) of its own for a process, so that what runs in it can be told apart by anyone who
 * reads /proc/PID/cgroup (gpumon attributes GPU memory by it), and a way for a later process to
 * join it (capsule exec).
 *
 * The scope is made below the caller's own cgroup, and only where that cgroup is the caller's to
 * change: its directory writable by the caller and, on a host whose cgroups systemd manages,
 * delegated (systemd marks a Delegate=yes unit's cgroup with the user.delegate or
 * trusted.delegate xattr; elsewhere systemd owns the tree, and a foreign cgroup in it breaks its
 * single-writer rule). Elsewhere it fails and the caller goes on without one. Only cgroup v2 (a
 * pure v2 host, or the v2 hierarchy of a hybrid one) is used: v1 has no safe delegation. */
#pragma once

#include <sys/types.h>

#include "lib/errmsg.h"

/* Makes (or reuses an empty leftover of a killed run) the cgroup NAME below the caller's own and
 * moves pid into it. Returns 0 and the malloc'd directory in *ret_dir, or -errno with a message:
 * -ENOENT (no cgroup v2 here, or the caller's cgroup is not in sight: a cgroup namespace),
 * -EPERM (systemd manages the caller's cgroup and did not delegate it), -EACCES/-EROFS (not the
 * caller's to change), -EBUSY (a cgroup of that name still holds processes), -EINVAL (a name
 * that is not one path component). */
int cgroup_scope_enter(const char *name, pid_t pid, char **ret_dir, struct errmsg *e);

/* Removes the scope once what ran in it has ended. -EBUSY while processes are left in it (a
 * daemon the command started outside a pid namespace): the scope then stays, still naming them. */
int cgroup_scope_remove(const char *dir);

/* The cgroup.procs file of the capsule scope (names.h) that the process of proc_dirfd (an open
 * /proc/PID) is in, malloc'd; -ENOENT when it is in none, -ESRCH when it is gone. */
int cgroup_scope_procs_of(int proc_dirfd, char **ret_path);

/* Moves the caller into the cgroup of that cgroup.procs file. Allocates nothing, so a child may
 * call it between fork and exec. 0 or -errno. */
int cgroup_enter(const char *procs_path);
