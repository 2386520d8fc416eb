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

#include <stdbool.h>
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

/* Where the cgroup v2 hierarchy is mounted: "/sys/fs/cgroup" on a pure v2 host, its "unified"
 * folder on a hybrid one; NULL when there is none. A static string. */
const char *cgroup_v2_path(void);

/* Makes the cgroup name in parent, a cgroup v2 directory the caller may change (gpuqd's own
 * slice, not the caller's cgroup as cgroup_scope_enter takes), or finds it there. Returns 1 when
 * it was made, 0 when it was there already (the caller decides what to do with what it holds),
 * and the malloc'd directory in *ret_dir; -errno with a message: -EMEDIUMTYPE (parent is not on a
 * cgroup v2 hierarchy), -ENOENT (no parent), -EINVAL (name not one path component). */
int cgroup_make(const char *parent, const char *name, char **ret_dir, struct errmsg *e);

/* Whether the cgroup dir or one below it holds a process (its cgroup.events says "populated 1"):
 * 1, 0, or -errno (-ENOENT when dir is gone). */
int cgroup_populated(const char *dir);

/* Sends sig to every process of the cgroup dir and of the cgroups below it. SIGKILL goes through
 * cgroup.kill where the kernel has it (5.14 and later), which also reaches a process forked
 * meanwhile; other signals, and SIGKILL on older kernels, go to each pid its cgroup.procs files
 * list. Returns 0 when processes were signalled, -ESRCH when there were none, -ENOENT when dir
 * is gone, other -errno. */
int cgroup_signal(const char *dir, int sig);

/* Waits until the cgroup dir holds no process, at most timeout_ms milliseconds (killed processes
 * take a moment to go, and a cgroup cannot be removed before). 0 (also when dir is gone),
 * -ETIMEDOUT, or -errno. */
int cgroup_wait_empty(const char *dir, unsigned timeout_ms);

/* Whether controller ("cpu", "memory") is enabled for the cgroup dir, i.e. listed in its
 * cgroup.controllers (the parent's cgroup.subtree_control has it): 1, 0, or -errno. */
int cgroup_has_controller(const char *dir, const char *controller);

/* Writes value to the interface file name of the cgroup dir ("cpu.max", "memory.max"). 0 or
 * -errno (-ENOENT: no such file, the controller is not enabled). */
int cgroup_attr_write(const char *dir, const char *name, const char *value);

/* Reads the interface file name of the cgroup dir into a malloc'd string. 0 or -errno. */
int cgroup_attr_read(const char *dir, const char *name, char **ret);

/* Removes the cgroup dir and every cgroup below it, the deepest first. 0 (also when dir is
 * gone), -EBUSY while one of them holds processes, other -errno. */
int cgroup_remove_tree(const char *dir);

/* The caller's own cgroup v2 directory ("/sys/fs/cgroup/system.slice/gpuqd.service"), malloc'd.
 * -ENOENT without cgroup v2 or when the caller's cgroup is not in sight (a cgroup namespace). */
int cgroup_self_dir(char **ret);

/* Whether the caller may make cgroups below dir: it may write there and, on a host whose cgroups
 * systemd manages, systemd delegated dir (Delegate=yes). */
bool cgroup_ours_to_change(const char *dir);
