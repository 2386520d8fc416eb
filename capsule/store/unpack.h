/* Layer unpacking with libarchive, into the overlayfs lower-directory format.
 *
 * A layer is a tar (uncompressed, gzip or zstd: detected from the data) holding files to add and
 * whiteouts: ".wh.NAME" deletes NAME of the layers below, ".wh..wh..opq" hides the whole
 * directory below. They become what overlayfs reads in a user namespace (mount option
 * userxattr): a 0/0 character device named NAME, and the xattr user.overlay.opaque="y" on the
 * directory. Both can be made by an ordinary user (kernel >= 5.8).
 *
 * Safety, since layers are outside input: no entry is written outside dest (absolute paths,
 * "..", paths through symlinks and hard links that point outside are refused with an error that
 * names the entry), device nodes other than whiteouts are skipped, setuid/setgid bits are
 * dropped, ownership is not applied (every file belongs to the user who unpacks; the runtime maps
 * that user to the container's root or to itself), xattrs other than the overlay ones are not
 * applied. Directories are created writable by their owner during the unpack and get their own
 * mode at the end. */
#pragma once

#include <stdint.h>

#include "lib/errmsg.h"

struct unpack_stats {
    uint64_t entries, bytes;
    unsigned whiteouts, opaque_dirs, skipped_devices, dropped_setid;
};

/* Unpacks the layer read from fd (at its current offset) into dest, an existing empty
 * directory. Returns 0 and fills *ret_stats (may be NULL), or -EINVAL for a malformed or hostile
 * archive (message: "layer entry 'etc/../../x': path escapes the layer"), -ENOSPC/-EIO and other
 * write errors naming the entry. On failure dest holds a partial tree: the caller removes it. */
int unpack_layer(int fd, const char *dest, struct unpack_stats *ret_stats, struct errmsg *e);

/* The same, bounded: a layer whose files hold more than max_bytes (0: no bound) is refused with
 * -EFBIG, and so is going on once dest's file system has less than reserve_bytes free (-ENOSPC):
 * a few KiB of compressed zeros can expand to fill any disk. */
int unpack_layer_bounded(int fd, const char *dest, uint64_t max_bytes, uint64_t reserve_bytes,
                         struct unpack_stats *ret_stats, struct errmsg *e);

/* The xattr in which a layer of a node-wide cache keeps an entry's own owner and mode:
 * "UID:GID:MODE:TYPE", uid and gid in decimal, MODE in four octal digits, TYPE "file" or "dir"
 * (containers/storage's format, which fuse-overlayfs reads). */
#define UNPACK_OVERRIDE_XATTR "user.containers.override_stat"

/* unpack_layer_bounded for a node-wide cache (store_open_node), whose layers the cache's owner
 * writes and every user who was handed their path reads, through fuse-overlayfs:
 * - regular files are stored 0644, or 0755 if the image gives them any x bit; directories 0755
 *   (owner-writable while they are filled, as above). Exactly these modes: group and others never
 *   get write permission on the cache, and setuid, setgid and sticky bits are not stored;
 * - every regular file and directory carries UNPACK_OVERRIDE_XATTR with the tar header's uid and
 *   gid and the image's mode less setuid and setgid (the sticky bit is kept, so that /tmp reads
 *   1777 in the container). Hard links share their inode's. Symbolic links, fifos and whiteouts
 *   carry none: Linux allows user xattrs only on regular files and directories;
 * - dest itself, and directories the layer names no entry for (parents of deeper entries), get
 *   "0:0:0755:dir". fuse-overlayfs applies a layer's override xattrs only if the layer's root
 *   carries one.
 * uids and gids outside 0..4294967294 are recorded as 65534 (the kernel's overflow id). Errors
 * as unpack_layer_bounded; -EOPNOTSUPP if dest's file system has no user xattrs. */
int unpack_layer_shared(int fd, const char *dest, uint64_t max_bytes, uint64_t reserve_bytes,
                        struct unpack_stats *ret_stats, struct errmsg *e);

/* Applies one unpacked layer (overlay format, as unpack_layer writes it) on top of target, the
 * way overlayfs would show it: a whiteout deletes target's entry, an opaque directory replaces
 * target's directory, everything else is copied (regular files by copy_file_range or a reflink
 * where the filesystem can; modes and times kept). This is the copy-up fallback for kernels that
 * refuse overlayfs in a user namespace. Returns 0 or a negative errno naming the path. */
int unpack_merge_layer(const char *layer_dir, const char *target, struct errmsg *e);
