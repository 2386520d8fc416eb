/* The container root through fuse-overlayfs (run_spec.fuse_overlayfs), for layers of the node
 * cache: another account's files, stored widened, the image's own modes kept in
 * user.containers.override_stat xattrs that fuse-overlayfs presents. Internal to the runtime.
 *
 * fuse-overlayfs runs in the container's user namespace (it opens /dev/fuse and mounts as a
 * process with CAP_SYS_ADMIN there) and in a copy of its mount namespace, taken once the
 * container's first process has its private tmpfs in place (shared, so that the mount reaches
 * the container), but is the parent's child, not the container's: the parent starts it in the
 * foreground, waits until the root is mounted, kills and reaps it when the container has ended,
 * and it dies with the parent (PR_SET_PDEATHSIG). It is in its own session, out of the
 * terminal's reach (a Ctrl-C that the command traps must not take its root away), and never in
 * the container's pid namespace.
 *
 * Its upper and work directories (unless the container has its own) are on a tmpfs on a new,
 * empty directory of the host (dir), not on one stacked on "/" as the kernel overlay's are:
 * fuse-overlayfs resolves its paths (realpath) and takes statfs from its upper directory's path
 * all along, so they must be real ones in its view, and an empty directory of our own hides
 * nothing there. The container's first process then moves the root onto its tmpfs on "/" and
 * takes the one on dir out of its own namespace (rootfs.c). dir is removed after the run; a
 * capsule killed with SIGKILL leaves it, empty.
 *
 * Protocol on the parent's socket: the child sends 'f' when its tmpfs is on dir; the parent
 * answers 'r' once the root is mounted on dir/root, or kills the child. */
#pragma once

#include <signal.h>
#include <sys/types.h>

#include "lib/errmsg.h"
#include "capsule/runtime/runtime.h"

/* How long fuse-overlayfs may take to mount the root (it opens every layer first); tests
 * shorten it. */
#define FUSE_ROOT_TIMEOUT_MS 10000
extern unsigned fuse_root_timeout_ms;

struct fuse_root {
    char *dir;   /* the host directory for the tmpfs; removed by fuse_root_done */
    char **argv; /* fuse-overlayfs' command line */
    pid_t pid;   /* fuse-overlayfs while it runs, else 0 */
    int log_fd;  /* its stdout and stderr (a memfd), -1 before the start */
};

/* Checks that program (an absolute path) can run and that /dev/fuse opens for the caller.
 * 0, or -errno with what to install or change: -ENOENT "node cache layers need fuse-overlayfs:
 * no '/usr/bin/fuse-overlayfs' (apt install fuse-overlayfs)", -EACCES for /dev/fuse "chmod 0666
 * /dev/fuse", -EINVAL for a relative path. */
int fuse_root_check(const char *program, struct errmsg *e);

/* In the parent, before the container's namespaces exist: checks as fuse_root_check, makes dir
 * (in spec->scratch_dir, else $TMPDIR or /tmp) and the command line: spec's layers (top first),
 * upper and work directories (spec's, else dir/upper and dir/work on the tmpfs), ids presented
 * for every file (uid, gid: the container user's inside). A layer whose path has a ':' is
 * refused (-EINVAL naming it: fuse-overlayfs 1.10 splits lowerdir on ':' and knows no escape);
 * ',' and '\' are escaped. 0 or -errno with a message; *ret is then empty (fuse_root_done). */
int fuse_root_prepare(const struct run_spec *spec, uid_t uid, gid_t gid, struct fuse_root *ret,
                      struct errmsg *e);

/* In the parent, once the container's first process child runs: waits for its request on sock,
 * starts fuse-overlayfs in its namespaces (in the cgroup of scope_dir too, when not NULL, with
 * the signal mask mask), waits until the root is mounted and answers. 0 also when the child
 * ended before it asked (its report says why); -errno with a message (fuse-overlayfs' own words
 * included) when fuse-overlayfs failed (-EIO) or did not mount in fuse_root_timeout_ms
 * (-ETIMEDOUT): the caller then kills the child. fuse-overlayfs runs on until fuse_root_stop. */
int fuse_root_serve(struct fuse_root *f, int sock, pid_t child, const char *scope_dir,
                    const sigset_t *mask, struct errmsg *e);

/* In the parent: kills fuse-overlayfs (if it runs) and reaps it. For when the container has
 * ended or its start failed; again harmless. */
void fuse_root_stop(struct fuse_root *f);

/* Stops, removes dir, frees. f may be zeroed or half prepared. */
void fuse_root_done(struct fuse_root *f);

/* In the container's first process, its tmpfs on dir: asks the parent for the root and waits.
 * 0, or -EIO when the parent did not answer (it reports why itself). */
int fuse_root_request(int sock, struct errmsg *e);

/* capsule check's test in a scratch directory dir (made and removed by the caller), called in
 * new user and mount namespaces where the caller's ids map to themselves: a layer stored as the
 * node cache stores it, mounted with program; its 0600 file must show as 0600. 0 or -errno with
 * a message. */
int fuse_root_probe_mount(const char *program, const char *dir, struct errmsg *e);
