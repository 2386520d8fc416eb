/* Everything mounted or written below the container root before pivot_root. Targets are
 * resolved with openat2(RESOLVE_IN_ROOT) relative to the root, so an image's symlinks (absolute
 * or with "..") can never make us create or mount anything outside it; mounts then go through
 * "/proc/self/fd/N" of those fds. Below the root, host directories are mounted too (home,
 * --mount): what capsule creates or rewrites goes only into the container's own mounts (see
 * struct mounts_own), so that no image symlink can lead a write into them either. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "lib/fileio.h"
#include "lib/macro.h"
#include "capsule/runtime/mounts.h"

#define MAX_LINK_HOPS 16
#define MAX_DB_SIZE   (16u << 20)

const char *mounts_fd_path(int fd, struct mounts_fd_buf *buf)
{
    snprintf(buf->s, sizeof(buf->s), "/proc/self/fd/%d", fd);
    return buf->s;
}

int mounts_open_in_root(int root_fd, const char *path, int flags, mode_t mode)
{
    while (*path == '/')
        path++;
    struct open_how how = {
        .flags = (unsigned)flags | O_CLOEXEC,
        .mode = (flags & O_CREAT) ? mode : 0,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
    };
    long fd = syscall(SYS_openat2, root_fd, *path ? path : ".", &how, sizeof(how));
    return fd < 0 ? negative_errno() : (int)fd;
}

/* Splits "a/b/c" into a malloc'd parent "a/b" (or "" for the root) and the last component. */
static int split_path(const char *path, char **ret_parent, char **ret_name)
{
    while (*path == '/')
        path++;
    _cleanup_free_ char *copy = strdup(path);
    if (!copy)
        return -ENOMEM;
    size_t n = strlen(copy);
    while (n > 0 && copy[n - 1] == '/')
        copy[--n] = '\0';
    char *slash = strrchr(copy, '/');
    const char *name = slash ? slash + 1 : copy;
    if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
        return -EINVAL;
    char *parent = strndup(copy, slash ? (size_t)(slash - copy) : 0);
    char *last = strdup(name);
    if (!parent || !last) {
        free(parent);
        free(last);
        return -ENOMEM;
    }
    *ret_parent = parent;
    *ret_name = last;
    return 0;
}

static int mount_key(int fd, struct mounts_key *ret)
{
    struct statx stx;
    if (statx(fd, "", AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW, STATX_MNT_ID, &stx) < 0)
        return negative_errno();
    *ret = (struct mounts_key){
        .mnt_id = (stx.stx_mask & STATX_MNT_ID) ? stx.stx_mnt_id : 0,
        .dev = makedev(stx.stx_dev_major, stx.stx_dev_minor),
    };
    return 0;
}

static bool key_equal(const struct mounts_key *a, const struct mounts_key *b)
{
    return a->mnt_id && b->mnt_id ? a->mnt_id == b->mnt_id : a->dev == b->dev;
}

/* Adds the mount that fd lies on to own. */
static int own_add(struct mounts_own *own, int fd)
{
    if (own->n == ELEMENTSOF(own->keys))
        return -E2BIG;
    int r = mount_key(fd, &own->keys[own->n]);
    if (r < 0)
        return r;
    own->n++;
    return 0;
}

bool mounts_own_contains(const struct mounts_own *own, int fd)
{
    struct mounts_key k;
    if (mount_key(fd, &k) < 0)
        return false;
    for (size_t i = 0; i < own->n; i++)
        if (key_equal(&own->keys[i], &k))
            return true;
    return false;
}

/* Where make_path may create things, and whether it got there through a symbolic link. */
struct make_ctx {
    int root_fd;
    const struct mounts_own *own;
    bool host_ok;
};

static int make_path(const struct make_ctx *c, const char *path, bool dir, int hops, bool via_link);

/* Whether make_path may create an entry in parent_fd (the directory parent inside the root). */
static int may_create(const struct make_ctx *c, const char *parent, int parent_fd, bool via_link)
{
    if (mounts_own_contains(c->own, parent_fd))
        return 0;
    if (!c->host_ok || via_link)
        return -EXDEV;
    /* The path as typed, without any symbolic link: the user's own choice of host directory. */
    while (*parent == '/')
        parent++;
    struct open_how how = {
        .flags = O_PATH | O_CLOEXEC,
        .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS,
    };
    _cleanup_close_ int fd =
        (int)syscall(SYS_openat2, c->root_fd, *parent ? parent : ".", &how, sizeof(how));
    return fd >= 0 ? 0 : -EXDEV;
}

/* name exists in parent but does not resolve: a dangling symlink. Creates what it points to,
 * resolved inside the root like any other path. */
static int make_link_target(const struct make_ctx *c, int parent_fd, const char *parent,
                            const char *name, bool dir, int hops)
{
    char target[4096];
    ssize_t n = readlinkat(parent_fd, name, target, sizeof(target) - 1);
    if (n < 0)
        return errno == EINVAL ? -EEXIST : negative_errno();
    target[n] = '\0';
    _cleanup_free_ char *next = NULL;
    if (target[0] == '/' ? asprintf(&next, "%s", target) < 0
                         : asprintf(&next, "%s/%s", parent, target) < 0)
        return -ENOMEM;
    return make_path(c, next, dir, hops + 1, true);
}

static int make_path(const struct make_ctx *c, const char *path, bool dir, int hops, bool via_link)
{
    int fd = mounts_open_in_root(c->root_fd, path, O_PATH, 0);
    if (fd != -ENOENT)
        return fd;
    if (hops > MAX_LINK_HOPS)
        return -ELOOP;
    _cleanup_free_ char *parent = NULL, *name = NULL;
    int r = split_path(path, &parent, &name);
    if (r < 0)
        return r;
    _cleanup_close_ int parent_fd = make_path(c, parent, true, hops + 1, via_link);
    if (parent_fd < 0)
        return parent_fd;
    if ((r = may_create(c, parent, parent_fd, via_link)) < 0)
        return r;
    if (dir)
        r = mkdirat(parent_fd, name, 0755) < 0 ? negative_errno() : 0;
    else {
        int f = openat(parent_fd, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0644);
        r = f < 0 ? negative_errno() : (close(f), 0);
    }
    if (r == -EEXIST) {
        r = make_link_target(c, parent_fd, parent, name, dir, hops);
        if (r != -EEXIST)
            return r;
        /* Somebody else created it meanwhile: fine, open it below. */
    } else if (r < 0)
        return r;
    return mounts_open_in_root(c->root_fd, path, O_PATH, 0);
}

int mounts_make_in_root(int root_fd, const struct mounts_own *own, const char *path, bool dir,
                        bool host_ok)
{
    struct make_ctx c = {root_fd, own, host_ok};
    return make_path(&c, path, dir, 0, false);
}

/* strerror() for what mounts_make_in_root() returns. */
static const char *make_strerror(int r)
{
    if (r == -EXDEV)
        return "the path leads into a directory of the host mounted into the container (through "
               "a symbolic link of the image, or below a --mount); capsule creates and replaces "
               "nothing there";
    if (r == -ELOOP)
        return "too many symbolic links, or one through a process's link in /proc "
               "(/proc/self/cwd, /proc/1/root, …), which capsule never follows";
    return strerror(-r);
}

/* The symbolic link at which path stops resolving inside the root, as " (the link /tmp ->
 * /proc/self/cwd)", so that a failure to make path names what led there; "" when path resolves
 * or fails at something that is not a link. Links before it that resolve (/lib -> usr/lib) are
 * not the cause and are not named. */
static const char *link_note(int root_fd, const char *path, char *buf, size_t size)
{
    buf[0] = '\0';
    _cleanup_close_ int dir = mounts_open_in_root(root_fd, "/", O_PATH | O_DIRECTORY, 0);
    for (const char *end = path; dir >= 0;) {
        end += strspn(end, "/");
        if (!*end)
            return buf;
        const char *name = end;
        end = strchrnul(end, '/');
        _cleanup_free_ char *prefix = strndup(path, (size_t)(end - path));
        if (!prefix)
            return buf;
        int next = mounts_open_in_root(root_fd, prefix, O_PATH, 0);
        if (next >= 0) {
            close(dir);
            dir = next;
            continue;
        }
        /* The prefix does not resolve: if its last component is a link, that link is why. */
        char last[NAME_MAX + 1], target[PATH_MAX];
        snprintf(last, sizeof(last), "%.*s", (int)(end - name), name);
        ssize_t n = readlinkat(dir, last, target, sizeof(target) - 1);
        if (n > 0)
            snprintf(buf, size, " (the link /%s -> %.*s)", prefix + strspn(prefix, "/"), (int)n,
                     target);
        return buf;
    }
    return buf;
}

/* Fails making path (what: "mount tmpfs on '/tmp'"), with the reason and the link behind it. */
static int make_fail(int root_fd, int r, const char *what, const char *path, struct errmsg *e)
{
    char note[PATH_MAX + 64];
    return errmsg_set(e, r, "%s: %s%s", what, make_strerror(r),
                      link_note(root_fd, path, note, sizeof(note)));
}

int mounts_remount_readonly(int fd)
{
    struct statvfs sv;
    if (fstatvfs(fd, &sv) < 0)
        return negative_errno();
    /* A user namespace may not clear flags that the mount had when it was locked. */
    static const struct {
        unsigned long st, ms;
    } keep[] = {
        {ST_NOSUID, MS_NOSUID},   {ST_NODEV, MS_NODEV},           {ST_NOEXEC, MS_NOEXEC},
        {ST_NOATIME, MS_NOATIME}, {ST_NODIRATIME, MS_NODIRATIME}, {ST_RELATIME, MS_RELATIME},
    };
    unsigned long flags = MS_REMOUNT | MS_BIND | MS_RDONLY;
    for (size_t i = 0; i < ELEMENTSOF(keep); i++)
        if (sv.f_flag & keep[i].st)
            flags |= keep[i].ms;
    struct mounts_fd_buf p;
    return mount(NULL, mounts_fd_path(fd, &p), NULL, flags, NULL) < 0 ? negative_errno() : 0;
}

/* Read-only binds go through a detached copy: made read-only before it becomes visible, and
 * mount_setattr() only adds a flag, so locked ones stay as they are. */
static int bind_readonly(const char *source, int target_fd, bool recursive)
{
    _cleanup_close_ int tree = open_tree(
        AT_FDCWD, source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | (recursive ? AT_RECURSIVE : 0));
    if (tree < 0)
        return negative_errno();
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
    bool late = mount_setattr(tree, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &attr,
                              sizeof(attr)) < 0;
    if (move_mount(tree, "", target_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        return negative_errno();
    /* Kernels before 5.12: remount the top mount the classic way. */
    return late ? mounts_remount_readonly(tree) : 0;
}

int mounts_bind(const char *source, int target_fd, bool recursive, bool ro)
{
    if (ro)
        return bind_readonly(source, target_fd, recursive);
    struct mounts_fd_buf p;
    unsigned long flags = MS_BIND | (recursive ? MS_REC : 0);
    return mount(source, mounts_fd_path(target_fd, &p), NULL, flags, NULL) < 0 ? negative_errno()
                                                                               : 0;
}

/* What mounts_setup() works with: the root, the mounts that are the container's own, and the
 * standard mounts made so far with the mount each path showed then. */
struct setup {
    int root_fd;
    struct mounts_own own;
    struct standard_mount {
        const char *path;
        struct mounts_key key;
    } standard[8];
    size_t n_standard;
    /* Binds of host directories (home, spec mounts), for mounts_protect. */
    struct mounts_bind_record *binds;
    size_t n_binds, cap_binds;
};

static int record_bind(struct setup *s, dev_t dev, ino_t ino, const char *target)
{
    if (s->n_binds == s->cap_binds) {
        size_t cap = s->cap_binds ? 2 * s->cap_binds : 16;
        struct mounts_bind_record *v = realloc(s->binds, cap * sizeof(*v));
        if (!v)
            return -ENOMEM;
        s->binds = v;
        s->cap_binds = cap;
    }
    s->binds[s->n_binds++] = (struct mounts_bind_record){dev, ino, target};
    return 0;
}

/* Notes which mount path shows now that a standard mount was made there (see check_standard). */
static int remember(struct setup *s, const char *path, struct errmsg *e)
{
    if (s->n_standard == ELEMENTSOF(s->standard))
        return errmsg_set(e, -E2BIG, "too many standard mounts");
    _cleanup_close_ int fd = mounts_open_in_root(s->root_fd, path, O_PATH, 0);
    struct standard_mount *m = &s->standard[s->n_standard];
    int r = fd < 0 ? fd : mount_key(fd, &m->key);
    if (r < 0)
        return errmsg_set(e, r, "mount on '%s': %s", path, strerror(-r));
    m->path = path;
    s->n_standard++;
    return 0;
}

/* Every standard mount must still be what its path shows once all mounts are made. An image's
 * symbolic link (/tmp -> /home/alice/x) can lead one to a place that a later mount (the home
 * directory, a --mount) covers: the container's /tmp would then be the user's real directory. */
static int check_standard(const struct setup *s, struct errmsg *e)
{
    for (size_t i = 0; i < s->n_standard; i++) {
        const struct standard_mount *m = &s->standard[i];
        _cleanup_close_ int fd = mounts_open_in_root(s->root_fd, m->path, O_PATH, 0);
        struct mounts_key now;
        if (fd >= 0 && mount_key(fd, &now) >= 0 && key_equal(&now, &m->key))
            continue;
        char link[PATH_MAX];
        ssize_t n = readlinkat(s->root_fd, m->path + 1, link, sizeof(link) - 1);
        link[n > 0 ? n : 0] = '\0';
        return errmsg_set(e, -ELOOP,
                          "the image's %s%s%s leads where a later mount (the home directory or a "
                          "--mount) covers it, so it would be a host directory, not the "
                          "container's; change the image's link, or run with --no-home or "
                          "without that mount",
                          m->path, n > 0 ? " -> " : "", link);
    }
    return 0;
}

/* A spec mount (--mount, config, GPU), as opposed to one of the standard set. */
#define BIND_SPEC (1u << 8)
/* A host directory that may show capsule's own state (the home directory, spec mounts). */
#define BIND_RECORD (1u << 9)

/* Mounts a new filesystem (tmpfs, proc, devpts) on path inside the root. own: a tmpfs of the
 * container's, where mount points and generated files may be created later. */
static int mount_fs(struct setup *s, const char *path, const char *type, unsigned long flags,
                    const char *options, bool own, struct errmsg *e)
{
    _cleanup_close_ int t = mounts_make_in_root(s->root_fd, &s->own, path, true, true);
    if (t < 0) {
        char what[PATH_MAX + 32];
        snprintf(what, sizeof(what), "mount %s on '%s'", type, path);
        return make_fail(s->root_fd, t, what, path, e);
    }
    struct mounts_fd_buf p;
    if (mount(type, mounts_fd_path(t, &p), type, flags, options) < 0)
        return errmsg_set(e, negative_errno(), "mount %s on '%s': %m", type, path);
    if (!own)
        return 0;
    /* t is the directory below it; the path shows the new filesystem now. */
    _cleanup_close_ int fs = mounts_open_in_root(s->root_fd, path, O_PATH | O_DIRECTORY, 0);
    int r = fs < 0 ? fs : own_add(&s->own, fs);
    if (r < 0)
        return errmsg_set(e, r, "mount %s on '%s': %s", type, path, strerror(-r));
    return 0;
}

static bool same_file(int a, int b)
{
    struct stat x, y;
    return fstat(a, &x) == 0 && fstat(b, &y) == 0 && x.st_dev == y.st_dev && x.st_ino == y.st_ino;
}

/* A spec mount on "/" would sit below the root, never seen (pivot_root takes the overlay, not
 * what is mounted on it), and one on /proc takes away what the runtime itself needs: refused. */
static int check_spec_target(const struct setup *s, int t, const char *source, const char *target,
                             struct errmsg *e)
{
    if (same_file(t, s->root_fd))
        return errmsg_set(e, -EINVAL,
                          "mount '%s' on '%s': that is the container's root; mount it on a "
                          "directory below",
                          source, target);
    _cleanup_close_ int proc = mounts_open_in_root(s->root_fd, "/proc", O_PATH | O_DIRECTORY, 0);
    if (proc >= 0 && same_file(t, proc))
        return errmsg_set(e, -EINVAL,
                          "mount '%s' on '%s': the container's /proc cannot be replaced; mount "
                          "it on another directory",
                          source, target);
    return 0;
}

/* The kernel refuses a file on a directory and back with ENOTDIR/EISDIR, about neither path. */
static int check_kinds(int t, const struct stat *src, const char *source, const char *target,
                       struct errmsg *e)
{
    struct stat tst;
    if (fstat(t, &tst) < 0 || S_ISDIR(tst.st_mode) == S_ISDIR(src->st_mode))
        return 0;
    bool dir = S_ISDIR(src->st_mode);
    return errmsg_set(e, dir ? -ENOTDIR : -EISDIR,
                      "mount '%s' on '%s': the source is a %s, the target a %s in the container; "
                      "choose a target of the same kind",
                      source, target, dir ? "directory" : "file", dir ? "file" : "directory");
}

/* Fails a bind whose mount point cannot be made. */
static int mount_point_fail(const struct setup *s, int r, const char *source, const char *target,
                            struct errmsg *e)
{
    char what[2 * PATH_MAX + 32];
    snprintf(what, sizeof(what), "mount '%s' on '%s': mount point", source, target);
    return make_fail(s->root_fd, r, what, target, e);
}

/* Binds source on target; flags: MOUNT_* of runtime.h, BIND_SPEC. */
static int bind_at(struct setup *s, const char *source, const char *target, unsigned flags,
                   struct errmsg *e)
{
    struct stat st;
    if (stat(source, &st) < 0) {
        if ((flags & MOUNT_OPTIONAL) && errno == ENOENT)
            return 0;
        return errmsg_set(e, negative_errno(), "mount '%s': %m", source);
    }
    _cleanup_close_ int t =
        mounts_make_in_root(s->root_fd, &s->own, target, S_ISDIR(st.st_mode), true);
    if (t < 0)
        return mount_point_fail(s, t, source, target, e);
    int r = check_kinds(t, &st, source, target, e);
    if (r >= 0 && (flags & BIND_SPEC))
        r = check_spec_target(s, t, source, target, e);
    if (r < 0)
        return r;
    bool recursive = flags & MOUNT_REC, ro = flags & MOUNT_RO;
    r = mounts_bind(source, t, recursive, ro);
    if (r == -EINVAL && !recursive)
        /* The source has mounts below it that the kernel will not reveal one level at a time
         * in a user namespace: take them along. */
        r = mounts_bind(source, t, true, ro);
    if (r >= 0 && (flags & BIND_RECORD) && S_ISDIR(st.st_mode))
        r = record_bind(s, st.st_dev, st.st_ino, target);
    if (r < 0)
        return errmsg_set(e, r, "mount '%s' on '%s': %s", source, target, strerror(-r));
    return 0;
}

/* The host's /etc/hosts or /etc/resolv.conf, read-only, where the image has the file (or where
 * its link leads); nothing when the host has none. */
static int bind_host_file(struct setup *s, const char *path, struct errmsg *e)
{
    if (access(path, F_OK) < 0)
        return 0;
    int r = bind_at(s, path, path, MOUNT_RO, e);
    return r < 0 ? r : remember(s, path, e);
}

static int setup_proc(struct setup *s, bool pid_ns, struct errmsg *e)
{
    if (pid_ns) {
        int r = mount_fs(s, "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, NULL, false, e);
        /* A host whose /proc has parts hidden by other mounts refuses a new procfs. */
        if (r != -EPERM)
            return r;
    }
    return bind_at(s, "/proc", "/proc", MOUNT_REC, e);
}

static int dev_bind(int dev_fd, const char *name, struct errmsg *e)
{
    char source[64];
    snprintf(source, sizeof(source), "/dev/%s", name);
    if (access(source, F_OK) < 0)
        return 0;
    _cleanup_close_ int t =
        openat(dev_fd, name, O_CREAT | O_EXCL | O_RDONLY | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (t < 0)
        return errmsg_set(e, negative_errno(), "mount point /dev/%s: %m", name);
    int r = mounts_bind(source, t, false, false);
    if (r < 0)
        return errmsg_set(e, r, "mount %s: %s", source, strerror(-r));
    return 0;
}

static int dev_links(int dev_fd, struct errmsg *e)
{
    static const char *const links[][2] = {
        {"fd", "/proc/self/fd"},       {"stdin", "/proc/self/fd/0"}, {"stdout", "/proc/self/fd/1"},
        {"stderr", "/proc/self/fd/2"}, {"ptmx", "pts/ptmx"},
    };
    for (size_t i = 0; i < ELEMENTSOF(links); i++)
        if (symlinkat(links[i][1], dev_fd, links[i][0]) < 0)
            return errmsg_set(e, negative_errno(), "symlink /dev/%s: %m", links[i][0]);
    return 0;
}

static int setup_dev(struct setup *s, struct errmsg *e)
{
    static const char *const devices[] = {"null", "zero", "full", "random", "urandom", "tty"};
    int r = mount_fs(s, "/dev", "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755,size=1m", true, e);
    if (r < 0)
        return r;
    _cleanup_close_ int dev = mounts_open_in_root(s->root_fd, "/dev", O_PATH | O_DIRECTORY, 0);
    if (dev < 0)
        return errmsg_set(e, dev, "open /dev: %s", strerror(-dev));
    for (size_t i = 0; i < ELEMENTSOF(devices); i++)
        if ((r = dev_bind(dev, devices[i], e)) < 0)
            return r;
    if ((r = mount_fs(s, "/dev/pts", "devpts", MS_NOSUID | MS_NOEXEC,
                      "newinstance,ptmxmode=0666,mode=0620", false, e)) < 0 ||
        (r = mount_fs(s, "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", true, e)) < 0)
        return r;
    return dev_links(dev, e);
}

/* True when a passwd/group line names `name` (field 1) or the id (field 3). */
static bool db_line_matches(const char *line, size_t len, const char *name, unsigned id)
{
    const char *colon = memchr(line, ':', len);
    if (!colon)
        return false;
    size_t name_len = (size_t)(colon - line);
    if (name_len == strlen(name) && memcmp(line, name, name_len) == 0)
        return true;
    const char *f2 = memchr(colon + 1, ':', len - name_len - 1);
    if (!f2)
        return false;
    char idbuf[16];
    int n = snprintf(idbuf, sizeof(idbuf), "%u", id);
    size_t rest = len - (size_t)(f2 + 1 - line);
    return rest > (size_t)n && memcmp(f2 + 1, idbuf, (size_t)n) == 0 && f2[1 + n] == ':';
}

/* Opens the image's /etc/passwd or /etc/group for rewriting (made when missing), or returns 0
 * with *ret_fd -1 to leave it alone: when it is not a regular file (a directory; a fifo or a
 * device, which would block the start or never end), or is not the container's own (an image's
 * symlink to a file of the host). Such an image runs without the entry, as under Docker. The
 * file is checked through an O_PATH fd and only then opened, so nothing odd is ever opened. */
static int open_user_db(struct setup *s, const char *file, int *ret_fd)
{
    *ret_fd = -1;
    _cleanup_close_ int path_fd = mounts_open_in_root(s->root_fd, file, O_PATH, 0);
    if (path_fd == -ENOENT)
        path_fd = mounts_make_in_root(s->root_fd, &s->own, file, false, false);
    if (path_fd == -EXDEV || path_fd == -ENOTDIR || path_fd == -ELOOP)
        return 0;
    if (path_fd < 0)
        return path_fd;
    struct stat st;
    if (fstat(path_fd, &st) < 0)
        return negative_errno();
    if (!S_ISREG(st.st_mode) || !mounts_own_contains(&s->own, path_fd))
        return 0;
    struct mounts_fd_buf p;
    int fd = open(mounts_fd_path(path_fd, &p), O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    *ret_fd = fd;
    return 0;
}

/* Rewrites /etc/passwd or /etc/group of the image: every line kept except an earlier entry for
 * our name or id, then ours. The write lands in the upper layer (or the private copy). */
static int write_user_db(struct setup *s, const char *file, const char *name, unsigned id,
                         const char *entry, struct errmsg *e)
{
    _cleanup_free_ char *old = NULL, *out = NULL;
    size_t old_len = 0, out_len = 0;
    _cleanup_close_ int fd = -1;
    int r = open_user_db(s, file, &fd);
    if (r >= 0 && fd >= 0)
        r = fd_read_all(fd, MAX_DB_SIZE, &old, &old_len);
    if (r < 0)
        return errmsg_set(e, r, "read the image's %s: %s", file, strerror(-r));
    if (fd < 0)
        return 0;
    _cleanup_fclose_ FILE *f = open_memstream(&out, &out_len);
    if (!f)
        return -ENOMEM;
    for (const char *p = old; p && *p;) {
        const char *nl = strchrnul(p, '\n');
        size_t len = (size_t)(nl - p);
        if (len > 0 && !db_line_matches(p, len, name, id))
            fprintf(f, "%.*s\n", (int)len, p);
        p = *nl ? nl + 1 : nl;
    }
    fprintf(f, "%s\n", entry);
    if (fclose(TAKE_PTR(f)) != 0)
        return -ENOMEM;
    if (ftruncate(fd, 0) < 0 || lseek(fd, 0, SEEK_SET) < 0)
        r = negative_errno();
    if (r < 0 || (r = fd_write_all(fd, out, out_len)) < 0)
        return errmsg_set(e, r, "write %s: %s", file, strerror(-r));
    return 0;
}

static int setup_users(struct setup *s, const struct mounts_identity *id, struct errmsg *e)
{
    _cleanup_close_ int bash = mounts_open_in_root(s->root_fd, "/bin/bash", O_PATH, 0);
    const char *shell = bash >= 0 ? "/bin/bash" : "/bin/sh";
    char entry[1024];
    snprintf(entry, sizeof(entry), "%s:x:%u:%u::%s:%s", id->user, (unsigned)id->uid,
             (unsigned)id->gid, id->home, shell);
    int r = write_user_db(s, "/etc/passwd", id->user, id->uid, entry, e);
    if (r < 0)
        return r;
    snprintf(entry, sizeof(entry), "%s:x:%u:", id->group, (unsigned)id->gid);
    return write_user_db(s, "/etc/group", id->group, id->gid, entry, e);
}

/* apt drops to its _apt user to download, then checks that its ids changed; under the filter of
 * --remap-root they never do, and every download fails ("Could not switch group"). As enroot's
 * root mode does, an image with apt (a Debian-family one with /etc/apt/apt.conf.d) is told to
 * download as root. Only in the container's own files, only into a regular file or a new one
 * (a fifo there would block the start); an image where that cannot be written runs as it is. */
#define APT_CONF     "/etc/apt/apt.conf.d"
#define APT_CONF_FIX "00capsule-remap-root"

static int setup_apt(struct setup *s, const struct run_spec *spec, struct errmsg *e)
{
    static const char text[] = "// capsule --remap-root: apt cannot change ids here\n"
                               "APT::Sandbox::User \"root\";\n";
    if (!spec->remap_root)
        return 0;
    _cleanup_close_ int debian = mounts_open_in_root(s->root_fd, "/etc/debian_version", O_PATH, 0);
    _cleanup_close_ int dir =
        debian < 0 ? -1 : mounts_open_in_root(s->root_fd, APT_CONF, O_PATH | O_DIRECTORY, 0);
    if (dir < 0 || !mounts_own_contains(&s->own, dir))
        return 0;
    struct mounts_fd_buf p;
    _cleanup_close_ int real = open(mounts_fd_path(dir, &p), O_DIRECTORY | O_RDONLY | O_CLOEXEC);
    _cleanup_close_ int fd =
        real < 0
            ? -1
            : openat(real, APT_CONF_FIX,
                     O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0644);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
        return 0;
    int r = ftruncate(fd, 0) < 0 ? negative_errno() : fd_write_all(fd, text, sizeof(text) - 1);
    return r < 0 ? errmsg_set(e, r, "write " APT_CONF "/" APT_CONF_FIX ": %s", strerror(-r)) : 0;
}

/* Links replace what the image has at their path: only ever in the container's own files. */
static int setup_link(struct setup *s, const struct link_entry *l, struct errmsg *e)
{
    _cleanup_free_ char *parent = NULL, *name = NULL;
    int r = split_path(l->path, &parent, &name);
    if (r < 0)
        return errmsg_set(e, r, "link '%s': invalid path", l->path);
    _cleanup_close_ int dir = mounts_make_in_root(s->root_fd, &s->own, parent, true, false);
    r = dir < 0 ? dir : mounts_own_contains(&s->own, dir) ? 0 : -EXDEV;
    if (r < 0) {
        char what[PATH_MAX + 16];
        snprintf(what, sizeof(what), "link '%s'", l->path);
        return make_fail(s->root_fd, r, what, parent, e);
    }
    if (unlinkat(dir, name, 0) < 0 && errno != ENOENT &&
        !(errno == EISDIR && unlinkat(dir, name, AT_REMOVEDIR) == 0))
        return errmsg_set(e, negative_errno(), "link '%s': replace: %m", l->path);
    if (symlinkat(l->target, dir, name) < 0)
        return errmsg_set(e, negative_errno(), "link '%s' -> '%s': %m", l->path, l->target);
    return 0;
}

int mounts_host_root_prepare(const struct run_spec *spec, struct mounts_host_root *ret,
                             struct errmsg *e)
{
    *ret = (struct mounts_host_root){0};
    struct stat root, st;
    if (stat("/", &root) < 0)
        return errmsg_set(e, negative_errno(), "stat /: %m");
    for (size_t i = 0; i < spec->n_mounts; i++) {
        const struct mount_entry *m = &spec->mounts[i];
        if (!m->source || (m->flags & MOUNT_TMPFS) || stat(m->source, &st) < 0 ||
            st.st_dev != root.st_dev || st.st_ino != root.st_ino)
            continue;
        if (!ret->trees) {
            if (!(ret->trees = malloc(spec->n_mounts * sizeof(int))))
                return errmsg_set(e, -ENOMEM, "out of memory");
            ret->n = spec->n_mounts;
            for (size_t k = 0; k < ret->n; k++)
                ret->trees[k] = -1;
        }
        unsigned rec = m->flags & MOUNT_REC ? AT_RECURSIVE : 0;
        ret->trees[i] = open_tree(AT_FDCWD, "/", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | rec);
        ret->root_dev = root.st_dev;
        ret->root_ino = root.st_ino;
        if (ret->trees[i] < 0)
            return errmsg_set(e, negative_errno(), "mount '%s': clone the host's root: %m",
                              m->source);
    }
    return 0;
}

/* Attaches a clone of the host's root (mounts_host_root_prepare) on target, read-only if asked. */
static int bind_host_root(struct setup *s, int tree, const struct mount_entry *m, struct errmsg *e)
{
    _cleanup_close_ int t = mounts_make_in_root(s->root_fd, &s->own, m->target, true, true);
    if (t < 0)
        return mount_point_fail(s, t, m->source, m->target, e);
    int r = check_spec_target(s, t, m->source, m->target, e);
    if (r < 0)
        return r;
    unsigned rec = m->flags & MOUNT_REC ? AT_RECURSIVE : 0;
    struct mount_attr attr = {.attr_set = MOUNT_ATTR_RDONLY};
    if ((m->flags & MOUNT_RO) &&
        mount_setattr(tree, "", AT_EMPTY_PATH | rec, &attr, sizeof(attr)) < 0)
        return errmsg_set(e, negative_errno(), "mount '%s' on '%s' read-only: %m", m->source,
                          m->target);
    if (move_mount(tree, "", t, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
        return errmsg_set(e, negative_errno(), "mount '%s' on '%s': %m", m->source, m->target);
    return 0;
}

/* A spec's tmpfs (--mount tmpfs:/x:size=1G). */
static int mount_tmpfs(struct setup *s, const struct mount_entry *m, struct errmsg *e)
{
    _cleanup_close_ int t = mounts_make_in_root(s->root_fd, &s->own, m->target, true, true);
    if (t < 0)
        return mount_point_fail(s, t, "tmpfs", m->target, e);
    int r = check_spec_target(s, t, "tmpfs", m->target, e);
    if (r < 0)
        return r;
    unsigned long flags = MS_NOSUID | MS_NODEV | ((m->flags & MOUNT_RO) ? MS_RDONLY : 0);
    struct mounts_fd_buf p;
    if (mount("tmpfs", mounts_fd_path(t, &p), "tmpfs", flags, m->source[0] ? m->source : NULL) < 0)
        return errmsg_set(e, negative_errno(), "mount tmpfs on '%s'%s%s: %m", m->target,
                          m->source[0] ? " with " : "", m->source);
    return 0;
}

static int setup_spec(struct setup *s, const struct run_spec *spec,
                      const struct mounts_host_root *host, struct errmsg *e)
{
    for (size_t i = 0; i < spec->n_mounts; i++) {
        const struct mount_entry *m = &spec->mounts[i];
        if (!m->source || !m->target || m->target[0] != '/')
            return errmsg_set(e, -EINVAL, "mount '%s': the target must be an absolute path",
                              m->source ? m->source : "(no source)");
        int tree = host && i < host->n ? host->trees[i] : -1;
        int r = (m->flags & MOUNT_TMPFS) ? mount_tmpfs(s, m, e)
                : tree >= 0
                    ? bind_host_root(s, tree, m, e)
                    : bind_at(s, m->source, m->target, m->flags | BIND_SPEC | BIND_RECORD, e);
        if (r >= 0 && tree >= 0 &&
            (r = record_bind(s, host->root_dev, host->root_ino, m->target)) < 0)
            return errmsg_set(e, r, "out of memory");
        if (r < 0)
            return r;
    }
    for (size_t i = 0; i < spec->n_links; i++) {
        int r = setup_link(s, &spec->links[i], e);
        if (r < 0)
            return r;
    }
    return 0;
}

int mounts_setup(int root_fd, const struct mounts_plan *p, const struct mounts_host_root *host,
                 struct errmsg *e)
{
    const struct run_spec *spec = p->spec;
    struct setup s = {.root_fd = root_fd};
    int r = own_add(&s.own, root_fd);
    if (r < 0)
        return errmsg_set(e, r, "the container root: %s", strerror(-r));
    if ((r = setup_proc(&s, spec->pid_ns, e)) < 0 || (r = remember(&s, "/proc", e)) < 0 ||
        (r = bind_at(&s, "/sys", "/sys", MOUNT_REC | MOUNT_RO, e)) < 0 ||
        (r = remember(&s, "/sys", e)) < 0 || (r = setup_dev(&s, e)) < 0 ||
        (r = remember(&s, "/dev", e)) < 0 ||
        (r = mount_fs(&s, "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777", true, e)) < 0 ||
        (r = remember(&s, "/tmp", e)) < 0 || (r = bind_host_file(&s, "/etc/hosts", e)) < 0 ||
        (r = bind_host_file(&s, "/etc/resolv.conf", e)) < 0 ||
        (r = setup_users(&s, &p->id, e)) < 0 || (r = setup_apt(&s, spec, e)) < 0)
        goto out;
    if (p->host_home && (r = bind_at(&s, p->host_home, p->host_home,
                                     MOUNT_REC | MOUNT_OPTIONAL | BIND_RECORD, e)) < 0)
        goto out;
    if ((r = setup_spec(&s, spec, host, e)) < 0 || (r = check_standard(&s, e)) < 0)
        goto out;
    if ((r = mounts_protect(root_fd, spec->protect, s.binds, s.n_binds, e)) < 0)
        goto out;
    if (spec->cwd && strcmp(spec->cwd, "/") != 0) {
        /* Docker creates a missing WorkingDir; a failure shows later as a chdir error. */
        int fd = mounts_make_in_root(root_fd, &s.own, spec->cwd, true, true);
        if (fd >= 0)
            close(fd);
    }
    r = 0;
out:
    free(s.binds);
    return r;
}
