/* rm -rf, bounded and kept to one filesystem: what every component that removes a tree it made
 * (an unpacked layer, a copy of an image, a container's directory) needs, written once. */
#pragma once

#include <stdint.h>

/* Removes the entry name of the directory dfd and, if it is a directory, everything below it,
 * first making directories writable and searchable for their owner (image layers hold 0555
 * directories). Never follows a symbolic link and never crosses into another mounted
 * filesystem (-EXDEV: a mount inside is not ours to empty). Holds a bounded number of fds
 * however deep the tree is. Adds the disk space freed to *bytes_freed (may be NULL). Returns 0
 * (also when name is absent) or the first error. */
int rm_tree_at(int dfd, const char *name, uint64_t *bytes_freed);

/* rm_tree_at() for a path. -EINVAL for a path ending in "." or "..". */
int rm_tree(const char *path);
