/* capsule's own state made read-only inside the container (mounts.h): wherever a bind of a host
 * directory shows the image cache or the named containers' directory (the home directory holds
 * ~/.cache/capsule; --mount /:/host holds everything), that place gets a read-only bind of it.
 * runtime.c then moves the container into a nested user namespace, which locks these mounts: a
 * root of the container can neither unmount them nor make them writable again, nor bind the
 * directory above without them (the kernel refuses a non-recursive bind over locked mounts). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "lib/macro.h"
#include "capsule/runtime/mounts.h"

/* The ancestors of path (itself first, "/" last) as (dev, ino, length of the prefix). */
struct ancestor {
    dev_t dev;
    ino_t ino;
    size_t len;
};

static size_t ancestors_of(const char *path, struct ancestor *out, size_t max)
{
    char buf[PATH_MAX];
    size_t n = 0, len = strlen(path);
    if (len >= sizeof(buf))
        return 0;
    memcpy(buf, path, len + 1);
    while (n < max) {
        struct stat st;
        if (stat(len ? buf : "/", &st) < 0)
            break;
        out[n++] = (struct ancestor){st.st_dev, st.st_ino, len};
        if (len == 0)
            break;
        while (len > 0 && buf[len] != '/')
            len--;
        buf[len] = '\0';
    }
    return n;
}

/* Binds the directory at inside onto itself (with what is mounted below it): a mount point
 * cannot be renamed or removed (EBUSY), so nobody can move it aside and put another in its place.
 */
static int pin_dir(int root_fd, const char *inside)
{
    _cleanup_close_ int t = mounts_open_in_root(root_fd, inside, O_PATH | O_DIRECTORY, 0);
    if (t < 0)
        return t;
    _cleanup_close_ int tree =
        open_tree(t, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
    if (tree < 0 ||
        move_mount(tree, "", t, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        return negative_errno();
    return 0;
}

/* Whether inside (a path in the root) is the very directory want: an image's link or a later
 * mount may have put something else at that path, and that is not ours to cover. */
static bool shows(int root_fd, const char *inside, const struct stat *want)
{
    _cleanup_close_ int t = mounts_open_in_root(root_fd, inside, O_PATH | O_DIRECTORY, 0);
    struct stat st;
    return t >= 0 && fstat(t, &st) == 0 && st.st_dev == want->st_dev && st.st_ino == want->st_ino;
}

/* Covers path where one bind shows it (at inside, below the bind's target), when it does: every
 * directory from the target down to it pinned, so that none can be renamed to swap in another
 * cache (mv ~/.cache ~/.old; cp -a ~/.old ~/.cache), then path itself read-only. Returns 1 if it
 * did, 0 if not, -errno. */
static int protect_at(int root_fd, const char *path, const struct stat *want, const char *target,
                      const char *inside)
{
    if (!shows(root_fd, inside, want))
        return 0;
    char dir[PATH_MAX];
    size_t skip = strcmp(target, "/") == 0 ? 0 : strlen(target);
    for (const char *p = inside + skip + 1; (p = strchr(p, '/')); p++) {
        snprintf(dir, sizeof(dir), "%.*s", (int)(p - inside), inside);
        int r = pin_dir(root_fd, dir);
        if (r < 0)
            return r;
    }
    /* Opened after the pins: an fd from before would lead below them, where a mount is hidden. */
    _cleanup_close_ int t = mounts_open_in_root(root_fd, inside, O_PATH | O_DIRECTORY, 0);
    if (t < 0)
        return t;
    int r = mounts_bind(path, t, true, true);
    return r < 0 ? r : 1;
}

int mounts_protect(int root_fd, char *const *paths, const struct mounts_bind_record *binds,
                   size_t n_binds, struct errmsg *e)
{
    int done = 0;
    for (size_t p = 0; paths && paths[p]; p++) {
        struct ancestor up[64];
        struct stat want;
        size_t n_up = ancestors_of(paths[p], up, ELEMENTSOF(up));
        if (n_up == 0 || stat(paths[p], &want) < 0)
            continue; /* not there (yet): nothing to show */
        for (size_t b = 0; b < n_binds; b++) {
            for (size_t a = 0; a < n_up; a++) {
                if (up[a].dev != binds[b].dev || up[a].ino != binds[b].ino)
                    continue;
                char inside[PATH_MAX];
                const char *t = binds[b].target;
                if (snprintf(inside, sizeof(inside), "%s%s", strcmp(t, "/") == 0 ? "" : t,
                             paths[p] + up[a].len) >= (int)sizeof(inside))
                    break;
                int r = protect_at(root_fd, paths[p], &want, t, inside);
                if (r < 0)
                    return errmsg_set(e, r, "keep '%s' read-only at '%s': %s", paths[p], inside,
                                      strerror(-r));
                done += r;
                break;
            }
        }
    }
    return done;
}
