/* The container's root filesystem: a private tmpfs stacked on the mount namespace's "/" (it
 * holds the overlay's upper and work directories and the root mount point, and shadows nothing
 * that path lookups from the process root see), the overlay of the layers on it (or a bind of
 * a merged copy, or fuse-overlayfs' mount), then pivot_root. Internal to the runtime. */
#pragma once

#include <stdbool.h>

#include "lib/errmsg.h"
#include "capsule/runtime/runtime.h"

/* Tests set this to exercise the mount(2) option-string path on kernels that have
 * "lowerdir+". */
extern bool rootfs_force_legacy_overlay;

/* A root that fuse-overlayfs mounts (fuse-root.h): its tmpfs goes on dir, and the parent is
 * asked through sock to mount the root on that tmpfs' "root" directory. */
struct rootfs_fuse {
    const char *dir;
    int sock;
};

/* In the child, inside the new user and mount namespaces: makes "/" private, mounts the
 * private tmpfs and the root (the overlay; copy_dir bound when copy_dir is not NULL; the
 * parent's fuse-overlayfs when fuse is not NULL). Returns 0 and an O_PATH fd of the root in
 * *ret_root_fd, or -errno with a message; *ret_overlay_refused tells that the kernel refused the
 * overlay itself. */
int rootfs_assemble(const struct run_spec *spec, const char *copy_dir,
                    const struct rootfs_fuse *fuse, int *ret_root_fd, bool *ret_overlay_refused,
                    struct errmsg *e);

/* pivot_root into root_fd and detach everything else (the host's mounts, the private tmpfs). */
int rootfs_pivot(int root_fd, struct errmsg *e);

/* Remounts "/" read-only (after pivot), keeping locked flags. */
int rootfs_make_readonly(struct errmsg *e);

/* In the parent, for the copy fallback: merges the layers (and upper_dir, when set) into a new
 * directory under scratch_dir ($TMPDIR or /tmp when NULL). why says why a copy is made, for the
 * error message ("rootfs = copy", or the overlay's refusal). Returns 0 and the malloc'd path. */
int rootfs_copy_prepare(const struct run_spec *spec, const char *why, char **ret_dir,
                        struct errmsg *e);
