/* Mounts inside the container root, done from the new mount namespace before pivot_root: path
 * helpers that never leave the root, bind helpers that keep locked mount flags, and the
 * standard set (/proc, /sys, /dev, /tmp, /etc files, home, the spec's mounts and links).
 * Internal to the runtime. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/errmsg.h"
#include "capsule/runtime/runtime.h"

/* "/proc/self/fd/N", the path through which mount(2) reaches what an fd refers to. */
struct mounts_fd_buf {
    char s[32];
};
const char *mounts_fd_path(int fd, struct mounts_fd_buf *buf);

/* Opens path (absolute or relative, taken inside the root either way) below root_fd with
 * openat2(RESOLVE_IN_ROOT): symlinks, "..", absolute links all stay inside. Returns the fd
 * (O_CLOEXEC added) or -errno. */
int mounts_open_in_root(int root_fd, const char *path, int flags, mode_t mode);

/* The mounts that make up the container itself: its root and the tmpfs's capsule mounts below
 * it. Every other mount below the root is a directory of the host (the home directory, --mount
 * sources, /proc, /sys): capsule creates, replaces and rewrites nothing there of its own accord,
 * or an image's symbolic link (/usr -> /home/alice) would turn a mount point, a library link or
 * an /etc/passwd entry into a write to the user's files. */
struct mounts_own {
    struct mounts_key {
        uint64_t mnt_id; /* 0 where the kernel does not tell (before 5.8): then dev decides */
        dev_t dev;
    } keys[8];
    size_t n;
};

/* Whether fd (any kind, O_PATH too) lies on one of own's mounts. False when unknown. */
bool mounts_own_contains(const struct mounts_own *own, int fd);

/* Returns an O_PATH fd of path inside the root, creating it when missing: missing parents as
 * directories (0755), the last component as a directory or an empty file (0644). A dangling
 * symlink on the way is followed (inside the root) and its target created. Nothing is created
 * outside own's mounts, except where host_ok and the path reaches that host directory without
 * following any symbolic link (what the user typed: --mount /a:/mnt/a --mount /b:/mnt/a/b
 * creates b in /a, as Docker does); -EXDEV then. -errno on failure. */
int mounts_make_in_root(int root_fd, const struct mounts_own *own, const char *path, bool dir,
                        bool host_ok);

/* Makes the mount whose root fd refers to read-only, carrying over the flags a user namespace
 * may not drop (nosuid, nodev, noexec, atime) read with fstatvfs. 0 or -errno. */
int mounts_remount_readonly(int fd);

/* Bind-mounts source (a host path) onto target_fd. ro: read-only (recursively with recursive),
 * keeping the source's locked flags. 0 or -errno. */
int mounts_bind(const char *source, int target_fd, bool recursive, bool ro);

/* Who the user is inside, for /etc/passwd and /etc/group. */
struct mounts_identity {
    uid_t uid;
    gid_t gid;
    const char *user, *group;
    const char *home; /* home path inside (the passwd field) */
};

/* Everything mounts_setup() does, computed by the parent. */
struct mounts_plan {
    const struct run_spec *spec;
    struct mounts_identity id;
    const char *host_home; /* bound at the same path unless NULL */
};

/* The host's root for spec mounts whose source is it (--mount /:/host, or a path that leads
 * there): once the container's staging tmpfs is stacked on "/" (rootfs.c), a recursive bind of
 * "/" would carry that tmpfs along on top and show it instead. So the host's mount tree is
 * cloned before: trees[i] is a detached clone for spec mount i (taken by mounts_setup), or -1
 * for a mount of another source. */
struct mounts_host_root {
    int *trees;
    size_t n;
    dev_t root_dev; /* the host root's, for mounts_protect */
    ino_t root_ino;
};
/* Before the root is assembled: finds the spec mounts whose source is the host's root and
 * clones its tree for each. 0 or -errno with a message. */
int mounts_host_root_prepare(const struct run_spec *spec, struct mounts_host_root *ret,
                             struct errmsg *e);

/* A bind of a host directory made for the container: its source (dev, ino) and where it is. */
struct mounts_bind_record {
    dev_t dev;
    ino_t ino;
    const char *target;
};

/* Binds each of paths (host directories, canonical: capsule's cache and data directories)
 * read-only, recursively, over every place inside the root where one of binds shows it, so
 * that a container cannot change the images that other containers run. A path that does not
 * exist, or that no bind shows, is left alone. Returns how many binds it made, or -errno with
 * a message. See mounts-protect.c for how the nested user namespace then locks them. */
int mounts_protect(int root_fd, char *const *paths, const struct mounts_bind_record *binds,
                   size_t n_binds, struct errmsg *e);

/* Sets up everything below the root (see runtime.h for the list and order), keeps spec->protect
 * read-only (mounts_protect; the caller then locks the mounts, see runtime.c) and creates the
 * working directory when missing. 0 or -errno with a message naming the mount. */
int mounts_setup(int root_fd, const struct mounts_plan *p, const struct mounts_host_root *host,
                 struct errmsg *e);
