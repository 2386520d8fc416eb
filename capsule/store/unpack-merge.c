/* The copy-up fallback: applies an unpacked layer (overlay lower-directory format) to a plain
 * directory tree, so that the tree shows what an overlay mount of the layers would show.
 *
 * Everything goes through directory fds and O_NOFOLLOW, on both sides: neither the layer nor the
 * target can redirect a write through a symbolic link. Directories of the target are kept
 * writable by their owner while they are filled and get the layer's mode and times after their
 * children, since writing a child changes the parent's mtime. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fs.h>
#include <search.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/macro.h"
#include "lib/rm-tree.h"
#include "capsule/store/store.h"
#include "capsule/store/unpack.h"

/* Each level holds two fds (the layer's directory and the target's). */
#define MERGE_MAX_DEPTH 256

struct merge_link {
    dev_t dev;
    ino_t ino;
    char *rel; /* where its first copy went, relative to the target's root */
};

struct merge {
    const char *layer_dir, *target;
    int layer_fd; /* the layer's root */
    int root_fd;  /* the target's root */
    char rel[PATH_MAX];
    size_t rel_len;
    void *links; /* tsearch tree of struct merge_link, for files with several links */
    struct errmsg *e;
};

static int merge_error(struct merge *m, int r, const char *what)
{
    struct stat st;
    const char *rel = m->rel_len ? m->rel : ".";
    /* A cache shared by a group: a file that only the user who pulled the layer may read (an
     * image's 0600 /etc/.pwd.lock) cannot be copied by anybody else. Say so, and what to do. */
    if (r == -EACCES && fstatat(m->layer_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        st.st_uid != geteuid())
        return errmsg_set(m->e, r,
                          "layer '%s': '%s' belongs to uid %u, who pulled the image into this "
                          "shared cache, and only they may read it: such an image runs only for "
                          "them; pull it into a cache of your own (cache_dir)",
                          m->layer_dir, rel, (unsigned)st.st_uid);
    return errmsg_set(m->e, r, "merging layer '%s' into '%s': '%s': %s: %s", m->layer_dir,
                      m->target, rel, what, strerror(-r));
}

static int link_compare(const void *a, const void *b)
{
    const struct merge_link *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return 0;
}

static void link_free(void *p)
{
    struct merge_link *l = p;
    free(l->rel);
    free(l);
}

/* Appends name to m->rel for the duration of one entry; returns the old length to restore. */
static size_t rel_push(struct merge *m, const char *name)
{
    size_t old = m->rel_len;
    int n = snprintf(m->rel + old, sizeof(m->rel) - old, "%s%s", old ? "/" : "", name);
    m->rel_len = n < 0 || (size_t)n >= sizeof(m->rel) - old ? sizeof(m->rel) - 1 : old + n;
    return old;
}

static void rel_pop(struct merge *m, size_t old)
{
    m->rel_len = old;
    m->rel[old] = '\0';
}

static bool is_opaque(int fd)
{
    char v[2];
    ssize_t n = fgetxattr(fd, "user.overlay.opaque", v, sizeof(v));
    return n == 1 && v[0] == 'y';
}

static int set_times(int dfd, const char *name, const struct stat *st)
{
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    return utimensat(dfd, name, ts, AT_SYMLINK_NOFOLLOW) < 0 ? negative_errno() : 0;
}

/* Opens a layer file for reading. A 0000 file of ours (/etc/shadow in some images) cannot be
 * opened by an ordinary user: lend it read permission for the moment of the open. */
static int open_source(int sfd, const char *name, const struct stat *st)
{
    int fd = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 || errno != EACCES || st->st_uid != geteuid())
        return fd >= 0 ? fd : negative_errno();
    if (fchmodat(sfd, name, (st->st_mode & 07777) | 0400, 0) < 0)
        return negative_errno();
    fd = openat(sfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int r = fd >= 0 ? 0 : negative_errno();
    (void)fchmodat(sfd, name, st->st_mode & 07777, 0);
    return r < 0 ? r : fd;
}

static int copy_bytes(int in, int out)
{
    if (ioctl(out, FICLONE, in) == 0)
        return 0;
    for (;;) {
        ssize_t n = copy_file_range(in, NULL, out, NULL, 1 << 30, 0);
        if (n == 0)
            return 0;
        if (n > 0)
            continue;
        if (errno == EINTR)
            continue;
        if (errno != EXDEV && errno != ENOSYS && errno != EINVAL && errno != EOPNOTSUPP)
            return negative_errno();
        break;
    }
    /* Filesystems without copy_file_range: plain reads and writes from where it stopped. */
    char buf[64 * 1024];
    for (;;) {
        ssize_t n = read(in, buf, sizeof(buf));
        if (n == 0)
            return 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return negative_errno();
        for (ssize_t done = 0; done < n;) {
            ssize_t w = write(out, buf + done, n - done);
            if (w < 0 && errno != EINTR)
                return negative_errno();
            done += w > 0 ? w : 0;
        }
    }
}

/* Files with several links in the layer keep them in the target. Returns 1 if name was linked
 * to an earlier copy, 0 if it must be copied (and is remembered). */
static int link_earlier_copy(struct merge *m, int dfd, const char *name, const struct stat *st)
{
    if (st->st_nlink < 2)
        return 0;
    struct merge_link key = {.dev = st->st_dev, .ino = st->st_ino};
    struct merge_link **found = tfind(&key, &m->links, link_compare);
    if (found && linkat(m->root_fd, (*found)->rel, dfd, name, 0) == 0)
        return 1;
    if (found)
        return 0;
    struct merge_link *l = calloc(1, sizeof(*l));
    if (!l || !(l->rel = strdup(m->rel))) {
        free(l);
        return -ENOMEM;
    }
    l->dev = st->st_dev;
    l->ino = st->st_ino;
    if (!tsearch(l, &m->links, link_compare)) {
        link_free(l);
        return -ENOMEM;
    }
    return 0;
}

static int merge_regular(struct merge *m, int sfd, int dfd, const char *name, const struct stat *st)
{
    int r = link_earlier_copy(m, dfd, name, st);
    if (r != 0)
        return r < 0 ? merge_error(m, r, "cannot remember a hard link") : 0;
    _cleanup_close_ int in = open_source(sfd, name, st);
    if (in < 0)
        return merge_error(m, in, "cannot open the layer's file");
    _cleanup_close_ int out =
        openat(dfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (out < 0)
        return merge_error(m, negative_errno(), "cannot create");
    r = copy_bytes(in, out);
    if (r < 0)
        return merge_error(m, r, "cannot copy");
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    if (fchmod(out, st->st_mode & 07777) < 0 || futimens(out, ts) < 0)
        return merge_error(m, negative_errno(), "cannot set mode and times");
    return 0;
}

static int merge_symlink(struct merge *m, int sfd, int dfd, const char *name, const struct stat *st)
{
    char target[PATH_MAX];
    ssize_t n = readlinkat(sfd, name, target, sizeof(target) - 1);
    if (n < 0)
        return merge_error(m, negative_errno(), "cannot read the symbolic link");
    target[n] = '\0';
    if (symlinkat(target, dfd, name) < 0)
        return merge_error(m, negative_errno(), "cannot create the symbolic link");
    int r = set_times(dfd, name, st);
    return r < 0 ? merge_error(m, r, "cannot set times") : 0;
}

static int merge_fifo(struct merge *m, int dfd, const char *name, const struct stat *st)
{
    if (mknodat(dfd, name, S_IFIFO | 0600, 0) < 0 || fchmodat(dfd, name, st->st_mode & 07777, 0))
        return merge_error(m, negative_errno(), "cannot create the fifo");
    int r = set_times(dfd, name, st);
    return r < 0 ? merge_error(m, r, "cannot set times") : 0;
}

static int merge_dir(struct merge *m, int sfd, int dfd, unsigned depth);

/* Opens (making if needed) the target's directory for a layer directory, writable for now. */
static int open_target_dir(struct merge *m, int dfd, const char *name, bool opaque, int *ret_fd)
{
    struct stat dst;
    bool exists = fstatat(dfd, name, &dst, AT_SYMLINK_NOFOLLOW) == 0;
    if (exists && (opaque || !S_ISDIR(dst.st_mode))) {
        int r = rm_tree_at(dfd, name, NULL);
        if (r < 0)
            return merge_error(m, r, "cannot replace");
        exists = false;
    }
    if (!exists && mkdirat(dfd, name, 0700) < 0)
        return merge_error(m, negative_errno(), "cannot create the directory");
    int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == EACCES && fchmodat(dfd, name, 0700, 0) == 0)
        fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || fchmod(fd, 0700) < 0) {
        int r = negative_errno();
        if (fd >= 0)
            close(fd);
        return merge_error(m, r, "cannot open the directory");
    }
    *ret_fd = fd;
    return 0;
}

static int merge_subdir(struct merge *m, int sfd, int dfd, const char *name, const struct stat *st,
                        unsigned depth)
{
    if (depth >= MERGE_MAX_DEPTH)
        return merge_error(m, -ELOOP, "directories nest too deeply");
    int src = openat(sfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (src < 0)
        return merge_error(m, negative_errno(), "cannot open the layer's directory");
    _cleanup_close_ int dst = -1;
    int r = open_target_dir(m, dfd, name, is_opaque(src), &dst);
    if (r < 0) {
        close(src);
        return r;
    }
    r = merge_dir(m, src, dst, depth + 1); /* takes src */
    if (r < 0)
        return r;
    struct timespec ts[2] = {st->st_atim, st->st_mtim};
    if (fchmod(dst, st->st_mode & 07777) < 0 || futimens(dst, ts) < 0)
        return merge_error(m, negative_errno(), "cannot set mode and times");
    return 0;
}

static int merge_entry(struct merge *m, int sfd, int dfd, const char *name, unsigned depth)
{
    struct stat st;
    if (fstatat(sfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return merge_error(m, negative_errno(), "cannot stat the layer's entry");
    if (S_ISDIR(st.st_mode))
        return merge_subdir(m, sfd, dfd, name, &st, depth);
    /* Whatever the target has by that name is hidden by this layer's entry. */
    int r = rm_tree_at(dfd, name, NULL);
    if (r < 0)
        return merge_error(m, r, "cannot replace");
    if (S_ISCHR(st.st_mode) && st.st_rdev == 0)
        return 0; /* a whiteout: the removal was all */
    if (S_ISREG(st.st_mode))
        return merge_regular(m, sfd, dfd, name, &st);
    if (S_ISLNK(st.st_mode))
        return merge_symlink(m, sfd, dfd, name, &st);
    if (S_ISFIFO(st.st_mode))
        return merge_fifo(m, dfd, name, &st);
    return 0; /* devices and sockets: unpack_layer never writes them */
}

/* Applies the layer directory sfd (taken, closed here) to the target directory dfd. */
static int merge_dir(struct merge *m, int sfd, int dfd, unsigned depth)
{
    DIR *d = fdopendir(sfd);
    if (!d) {
        int r = negative_errno();
        close(sfd);
        return merge_error(m, r, "cannot read the layer's directory");
    }
    int r = 0;
    struct dirent *de;
    while (r >= 0 && (errno = 0, de = readdir(d))) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        size_t old = rel_push(m, de->d_name);
        r = merge_entry(m, sfd, dfd, de->d_name, depth);
        rel_pop(m, old);
    }
    if (r >= 0 && errno != 0)
        r = merge_error(m, negative_errno(), "cannot read the layer's directory");
    closedir(d);
    return r;
}

int unpack_merge_layer(const char *layer_dir, const char *target, struct errmsg *e)
{
    struct merge m = {.layer_dir = layer_dir, .target = target, .e = e};
    int src = open(layer_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (src < 0)
        return errmsg_set(e, negative_errno(), "layer '%s': %m", layer_dir);
    m.layer_fd = src;
    m.root_fd = open(target, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (m.root_fd < 0) {
        int r = errmsg_set(e, negative_errno(), "merge target '%s': %m", target);
        close(src);
        return r;
    }
    int r = merge_dir(&m, src, m.root_fd, 0);
    tdestroy(m.links, link_free);
    close(m.root_fd);
    return r;
}
