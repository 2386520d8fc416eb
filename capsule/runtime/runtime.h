/* Running a container: user + mount (+ pid) namespaces, an overlay root, the usual mounts, the
 * command; signals forwarded, exit status returned. No setuid helper, no file capabilities:
 * only what an ordinary user may do (unprivileged user namespaces).
 *
 * Identity: the user namespace maps exactly one id, the caller's uid/gid, to itself or to 0
 * (remap_root). Every file of the image belongs to the caller (see unpack.h), so inside it
 * belongs to that id; other ids show as nobody. With remap_root, a seccomp filter makes
 * ownership and id changes succeed without effect (id-filter.h), so package managers work.
 *
 * Root filesystem: an overlay of the layer directories (bottom first in run_spec) with an upper
 * layer on a tmpfs private to this run (or upper_dir/work_dir for a named container), so
 * mount points and generated files can always be created; then remounted read-only unless
 * writable. Deep images: layers are given one by one through the new mount API
 * (fsconfig "lowerdir+", kernel >= 6.8), else as one option string of paths relative to the
 * common parent directory, else copied (unpack_merge_layer) when the kernel refuses overlayfs
 * in a user namespace or rootfs_mode is RUNTIME_ROOTFS_COPY. Layers of the node cache (another
 * account's files, stored widened, the image's modes in user.containers.override_stat xattrs)
 * are mounted with fuse-overlayfs instead (fuse_overlayfs), which presents those modes; it runs
 * in the container's user namespace as a child of capsule and ends with the container
 * (fuse-root.h).
 *
 * Mounts, in order: the root; /proc (a new procfs with a pid namespace, else the host's
 * recursively bound); /sys (bound read-only); /dev (a tmpfs holding null, zero, full, random,
 * urandom, tty bound from the host, pts, shm, fd/stdin/stdout/stderr links); /tmp (tmpfs);
 * /etc/hosts, /etc/resolv.conf (host's, read-only); /etc/passwd and /etc/group (the image's with
 * an entry for the user: name, home, shell); the home directory (unless no_home); then the
 * spec's mounts in order (user --mount and GPU injection). Mount targets are created in the
 * upper layer as needed (a file for a file source, a directory otherwise). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "lib/errmsg.h"

enum {
    MOUNT_RO = 1 << 0,       /* read-only bind */
    MOUNT_OPTIONAL = 1 << 1, /* skip silently when the source does not exist */
    MOUNT_REC = 1 << 2,      /* recursive bind (MS_REC) */
    MOUNT_TMPFS = 1 << 3,    /* a new tmpfs, not a bind: source holds its options ("" none) */
};

/* A bind mount from the host into the container (or a tmpfs, MOUNT_TMPFS). target is an absolute
 * path inside. Symlinks in target are resolved inside the container root, never on the host. */
struct mount_entry {
    char *source;
    char *target;
    unsigned flags;
};

/* A symlink to create inside the container (e.g. libcuda.so.1 -> libcuda.so.580.159.04). An
 * existing entry at path is replaced. */
struct link_entry {
    char *path;
    char *target;
};

enum runtime_rootfs_mode {
    RUNTIME_ROOTFS_AUTO, /* overlay, falling back to a copy */
    RUNTIME_ROOTFS_OVERLAY,
    RUNTIME_ROOTFS_COPY,
};

struct run_spec {
    /* Root filesystem. */
    char *const *layers; /* layer directories, bottom first */
    size_t n_layers;
    const char *upper_dir, *work_dir; /* both NULL: a tmpfs for this run only */
    bool writable;
    enum runtime_rootfs_mode rootfs_mode;
    const char *scratch_dir; /* for the copy fallback's merged tree; NULL = $TMPDIR or /tmp */
    /* When set, asked for that directory instead, once and only when a copy is made; its answer
     * (NULL: $TMPDIR or /tmp) stays the callee's. 0 or -errno with a message. */
    int (*make_scratch)(void *userdata, const char **ret_dir, struct errmsg *e);
    void *scratch_userdata;
    /* The fuse-overlayfs program (an absolute path) that mounts the layers, for layers of the
     * node cache; NULL: the kernel's overlay. It needs /dev/fuse open to the caller; without
     * either, runtime_run fails saying what to install or change (there is no fallback to a
     * copy, and rootfs_mode RUNTIME_ROOTFS_COPY is refused with it). Every file shows as the
     * container user's (0 with remap_root), with the modes of the image. A directory for the
     * run's tmpfs is made in scratch_dir ($TMPDIR or /tmp) and removed after. */
    const char *fuse_overlayfs;

    /* Identity and namespaces. */
    bool remap_root;       /* uid/gid 0 inside; else the caller's */
    bool pid_ns;           /* own pid namespace: the command runs under a small init */
    const char *hostname;  /* NULL: the host's (no UTS namespace) */
    const char *user_name; /* for the passwd entry; NULL: from getpwuid */
    const char *home;      /* host home directory to mount (same path inside); NULL = $HOME */
    bool no_home;

    /* What to run. argv[0] is looked up in PATH of env when it has no '/'. */
    char *const *argv;
    /* Descriptors the command keeps across its exec, each at the number given (above 2):
     * {caller's fd, number in the command}; and where its stdout and stderr go (NULL: where the
     * caller's go). For a command the caller talks to (capsule hold's run of an entrypoint). */
    const int (*keep_fds)[2];
    size_t n_keep_fds;
    const int *output_fd;
    /* Instead of a command (argv unused): the container's process stays, idle, until hold_fd
     * (above 2; the process keeps it) reads end-of-file or it is killed; host programs join it
     * meanwhile (runtime_join), as the tasks of a Slurm step do. The root's finishing steps (ld
     * cache, read-only remount) are done before on_started is called. */
    bool hold;
    int hold_fd;
    char *const *env; /* the complete environment, "K=V", NULL-terminated */
    const char *cwd;  /* NULL = "/" */
    /* A terminal of its own for the command (tty.h): where stdin, stdout, stderr are terminals,
     * or on all three with tty_all (-t); the caller's terminal is raw meanwhile. */
    bool tty, tty_all;

    const struct mount_entry *mounts;
    size_t n_mounts;
    /* Host directories that stay read-only wherever a mount shows them inside, even to a root of
     * the container (capsule's image cache and named containers); canonical paths,
     * NULL-terminated, may be NULL. */
    char *const *protect;
    const struct link_entry *links;
    size_t n_links;
    /* Refresh the container's ld cache after the mounts (GPU libraries): runs the image's
     * ldconfig if it has one; ld_library_dir is added to the cache (and to LD_LIBRARY_PATH when
     * the image has no ldconfig). */
    bool run_ldconfig;
    const char *ld_library_dir;

    /* A cgroup of its own for the container (lib/cgroup.h), named so (names.h:
     * "capsule-NAME.scope"), where the host lets the caller make one; NULL: none. The container
     * is in it before it runs anything, and it is removed when the container has ended. */
    const char *cgroup_scope;

    /* Called in the parent once the container's init is running (named containers record it);
     * may be NULL. A negative return kills the container and is returned by runtime_run. */
    int (*on_started)(pid_t pid, void *userdata);
    void *userdata;
};

/* Runs spec->argv in a new container and waits for it. SIGINT, SIGTERM, SIGHUP, SIGQUIT,
 * SIGUSR1, SIGUSR2, SIGWINCH and SIGCONT are forwarded to the command. Returns 0 with *ret_exit
 * the command's exit status (0..255; 128+N if killed by signal N), or a negative errno when the
 * container could not be set up or the command could not be started, with a message:
 * "exec 'foo': No such file or directory" (-ENOENT), "mount overlay: …" etc. Nothing is left
 * behind in either case: the mounts die with the namespace, the tmpfs with the last mount. */
int runtime_run(const struct run_spec *spec, int *ret_exit, struct errmsg *e);

/* What capsule exec runs in a container. */
struct runtime_exec_spec {
    char *const *argv;
    char *const *env;  /* the complete environment */
    const char *cwd;   /* NULL = "/" */
    bool remap_root;   /* as the container was run: the same seccomp filter (id-filter.h) */
    bool tty, tty_all; /* as run_spec's */
};

/* Moves the calling process into the running container whose process is pid, for a host
 * program that then execs a command there itself (a Slurm task joining its step's container):
 * the container's cgroup scope where it has one and the caller may enter it, its user and mount
 * namespaces, its root (the working directory is its "/"). The caller must be single-threaded
 * (setns of a user namespace demands it) and the container's owner. Nothing is filtered and no
 * environment is set: what the command needs (a --remap-root container's id filter,
 * id-filter.h; the environment) is the caller's to apply before its exec. Returns 0, or 1 when
 * the container has a pid namespace of its own: only the caller's children are in it, so the
 * caller forks before it execs. -ESRCH "container process N is not running", or another -errno
 * with a message; a failure after the first setns leaves the caller half inside, so a caller
 * does this in a process of its own that exits on failure. */
int runtime_join(pid_t pid, struct errmsg *e);

/* Runs spec->argv inside the running container whose init is pid (setns into its user, mount
 * and, if it has one, pid namespace; same root and cwd rules), for capsule exec. Same returns
 * as runtime_run. */
int runtime_exec(pid_t pid, const struct runtime_exec_spec *spec, int *ret_exit, struct errmsg *e);

/* What this kernel allows, for capsule check and for choosing a rootfs mode early. Each returns
 * 0 if it works, else a negative errno with a message saying what to change ("unprivileged
 * user namespaces are disabled: sysctl kernel.unprivileged_userns_clone=1"). */
int runtime_probe_userns(struct errmsg *e);
int runtime_probe_overlay(const char *scratch_dir, struct errmsg *e);
/* Whether program (fuse-overlayfs, an absolute path) can serve node cache layers here: it runs,
 * /dev/fuse opens, it mounts in a user namespace, and it shows a file stored widened with a 0600
 * user.containers.override_stat as 0600 (the mode check is left out where $TMPDIR or /tmp has no
 * user xattrs). 0, or -errno with what to install or change. */
int runtime_probe_fuse_overlayfs(const char *program, struct errmsg *e);

void mount_entry_done(struct mount_entry *m);
void link_entry_done(struct link_entry *l);
