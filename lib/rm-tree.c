/* Removing trees: an image's unpacked layers hold read-only directories (0555) and unreadable
 * files (0000), and may nest deeper than a process has file descriptors; see rm-tree.h. */
#include "lib/rm-tree.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/macro.h"

/* Deeper directories are moved up to the top of the tree being removed, and removed in a later
 * pass, so that at most this many directories are open at once. */
#define REMOVE_MAX_DEPTH 64

struct remove_ctx {
    int top_fd;
    dev_t dev;
    unsigned moved;
    unsigned serial;
    uint64_t *bytes;
};

/* Opens the directory name of dfd and makes it writable and searchable for its owner, so that
 * its entries can be removed. */
static int open_dir_writable(int dfd, const char *name, int *ret_fd)
{
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == EACCES) {
        if (fchmodat(dfd, name, 0700, 0) < 0)
            return negative_errno();
        fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (fd < 0)
        return negative_errno();
    struct stat st;
    if (fstat(fd, &st) < 0 || ((st.st_mode & 0700) != 0700 && fchmod(fd, 0700) < 0)) {
        int r = negative_errno();
        close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

static int unlink_counted(int dfd, const char *name, uint64_t *bytes)
{
    struct stat st;
    /* The space comes back when the last link goes. */
    if (bytes && fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_nlink == 1)
        *bytes += (uint64_t)st.st_blocks * 512;
    if (unlinkat(dfd, name, 0) < 0 && errno != ENOENT)
        return negative_errno();
    return 0;
}

static bool entry_is_dir(int dfd, const struct dirent *de)
{
    if (de->d_type != DT_UNKNOWN)
        return de->d_type == DT_DIR;
    struct stat st;
    return fstatat(dfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* Moves a too deep directory to the top of the tree under a fresh name. */
static int move_to_top(struct remove_ctx *c, int dfd, const char *name)
{
    for (unsigned tries = 0; tries < 1000; tries++) {
        char tmp[64];
        snprintf(tmp, sizeof(tmp), ".capsule-rm-%u", c->serial++);
        if (renameat2(dfd, name, c->top_fd, tmp, RENAME_NOREPLACE) == 0) {
            c->moved++;
            return 0;
        }
        if (errno != EEXIST)
            return negative_errno();
    }
    return -EEXIST;
}

static int empty_dir(struct remove_ctx *c, int fd, unsigned depth);

static int remove_subdir(struct remove_ctx *c, int dfd, const char *name, unsigned depth)
{
    if (depth >= REMOVE_MAX_DEPTH)
        return move_to_top(c, dfd, name);
    int fd = -1;
    int r = open_dir_writable(dfd, name, &fd);
    if (r == -ENOENT)
        return 0;
    if (r < 0)
        return r;
    struct stat st;
    if (fstat(fd, &st) < 0)
        r = negative_errno();
    else if (st.st_dev != c->dev)
        r = -EXDEV; /* a mount inside: its files are not ours to delete */
    if (r < 0) {
        close(fd);
        return r;
    }
    r = empty_dir(c, fd, depth);
    if (r < 0)
        return r;
    if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return negative_errno();
    return 0;
}

/* Removes everything in the directory fd, which it takes (one fd per level of nesting). */
static int empty_dir(struct remove_ctx *c, int fd, unsigned depth)
{
    DIR *d = fdopendir(fd);
    if (!d) {
        int r = negative_errno();
        close(fd);
        return r;
    }
    int r = 0;
    struct dirent *de;
    while (r >= 0 && (errno = 0, de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if (entry_is_dir(fd, de))
            r = remove_subdir(c, fd, de->d_name, depth + 1);
        else
            r = unlink_counted(fd, de->d_name, c->bytes);
    }
    if (r >= 0 && errno != 0)
        r = negative_errno();
    closedir(d);
    return r;
}

int rm_tree_at(int dfd, const char *name, uint64_t *bytes_freed)
{
    struct stat st;
    if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return errno == ENOENT ? 0 : negative_errno();
    if (!S_ISDIR(st.st_mode))
        return unlink_counted(dfd, name, bytes_freed);

    _cleanup_close_ int fd = -1;
    int r = open_dir_writable(dfd, name, &fd);
    if (r < 0)
        return r == -ENOENT ? 0 : r;
    struct remove_ctx c = {.top_fd = fd, .dev = st.st_dev, .bytes = bytes_freed};
    /* Each pass removes what it can reach and moves deeper directories up; repeat until a pass
     * moved nothing. */
    do {
        c.moved = 0;
        /* A fresh open each pass: a directory stream does not promise to show entries that
         * were added while it was read. */
        int pass_fd = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (pass_fd < 0)
            return negative_errno();
        r = empty_dir(&c, pass_fd, 0);
        if (r < 0)
            return r;
    } while (c.moved > 0);
    if (unlinkat(dfd, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
        return negative_errno();
    return 0;
}

int rm_tree(const char *path)
{
    _cleanup_free_ char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    /* Split off the last component; a trailing slash belongs to no component. */
    size_t n = strlen(copy);
    while (n > 1 && copy[n - 1] == '/')
        copy[--n] = '\0';
    char *slash = strrchr(copy, '/');
    const char *dir = ".", *name = copy;
    if (slash) {
        *slash = '\0';
        dir = slash == copy ? "/" : copy;
        name = slash + 1;
    }
    if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0 || name[0] == '\0')
        return -EINVAL;
    _cleanup_close_ int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return errno == ENOENT ? 0 : negative_errno();
    return rm_tree_at(dfd, name, NULL);
}
