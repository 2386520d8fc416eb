/* Layer unpacking: libarchive reads the tar (gzip, zstd or plain) and writes regular entries to
 * disk; whiteouts, opaque markers, devices and hard links are decided here, entry by entry.
 *
 * Every entry name is checked before libarchive sees it (no absolute names, no ".."), then
 * prefixed with the realpath of dest, so that libarchive's symlink check
 * (ARCHIVE_EXTRACT_SECURE_SYMLINKS) walks a prefix without symbolic links. The prefix is
 * absolute, which is why ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS cannot be set: the check it
 * would make is done on the original name instead. What this file writes itself (whiteouts,
 * opaque markers, the removal of a directory a later entry replaces) goes through directory fds
 * opened component by component with O_NOFOLLOW, never through a path that could pass a
 * symbolic link.
 *
 * In shared mode (unpack_layer_shared, for the node-wide cache) the stored modes are widened so
 * that every user can read the layer, and the image's own owner and mode go into an xattr that
 * fuse-overlayfs presents instead: set here, through the same O_NOFOLLOW directory walk. */
#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "lib/log.h"
#include "lib/macro.h"
#include "lib/rm-tree.h"
#include "capsule/store/store.h"
#include "capsule/store/unpack.h"

#define WH           ".wh."
#define WH_OPAQUE    ".wh..wh..opq"
#define WH_META      ".wh..wh."
#define OPAQUE_XATTR "user.overlay.opaque"

/* ARCHIVE_EXTRACT_OWNER, _XATTR, _ACL and _FFLAGS are left out on purpose: the files belong to
 * whoever unpacks, and nothing from the archive reaches the xattrs. */
#define EXTRACT_FLAGS                                                                              \
    (ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_SECURE_SYMLINKS |               \
     ARCHIVE_EXTRACT_SECURE_NODOTDOT)

struct unpack {
    struct archive *in, *out;
    int dest_fd;
    char *prefix;     /* realpath of dest */
    const char *name; /* the current entry's name as the archive has it, made printable */
    char shown[256];
    char rel[PATH_MAX];  /* the current entry's cleaned relative path */
    char path[PATH_MAX]; /* prefix + "/" + rel */
    char link[PATH_MAX]; /* prefix + "/" + hard link target */
    struct unpack_stats stats;
    uint64_t max_bytes, reserve_bytes; /* unpack_layer_bounded's; 0 = none */
    uint64_t checked_at;               /* stats.bytes when free space was last checked */
    bool shared;                       /* unpack_layer_shared: widened modes, override xattrs */
    char override[64];                 /* the current entry's UNPACK_OVERRIDE_XATTR value, or "" */
    struct errmsg *e;
};

/* What a directory the layer has no entry for (its root too) stands for in the container. */
#define OVERRIDE_IMPLICIT_DIR "0:0:0755:dir"

static void unpack_done(struct unpack *u)
{
    if (u->in)
        archive_read_free(u->in);
    if (u->out)
        archive_write_free(u->out);
    if (u->dest_fd >= 0)
        close(u->dest_fd);
    free(u->prefix);
}

/* Entry names are outside input: keep control characters out of messages. */
static const char *printable(const char *s, char *buf, size_t size)
{
    size_t i = 0;
    for (; s[i] && i + 1 < size; i++)
        buf[i] = iscntrl((unsigned char)s[i]) ? '?' : s[i];
    buf[i] = '\0';
    return buf;
}

static int entry_error(struct unpack *u, int r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int entry_error(struct unpack *u, int r, const char *fmt, ...)
{
    char what[ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    return errmsg_set(u->e, r, "layer entry '%s': %s", u->name, what);
}

/* Normalises name into out (PATH_MAX bytes): drops "./", empty components and trailing
 * slashes. Returns the length (0 for the layer's root itself), or -EINVAL for an absolute name
 * or one with "..", -ENAMETOOLONG. */
static int path_clean(const char *name, char *out)
{
    if (name[0] == '/')
        return -EINVAL;
    size_t n = 0;
    for (const char *p = name; *p;) {
        size_t len = strcspn(p, "/");
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return -EINVAL;
        if (len > NAME_MAX)
            return -ENAMETOOLONG;
        if (len > 0 && !(len == 1 && p[0] == '.')) {
            if (n + (n > 0) + len >= PATH_MAX)
                return -ENAMETOOLONG;
            if (n > 0)
                out[n++] = '/';
            memcpy(out + n, p, len);
            n += len;
        }
        p += len;
        p += strspn(p, "/");
    }
    out[n] = '\0';
    return (int)n;
}

static int clean_or_fail(struct unpack *u, const char *name, char *out, const char *what)
{
    int r = path_clean(name, out);
    if (r == -EINVAL && name[0] == '/')
        return entry_error(u, r, "%sabsolute paths are refused", what);
    if (r == -EINVAL)
        return entry_error(u, r, "%spath escapes the layer ('..' is refused)", what);
    if (r < 0)
        return entry_error(u, r, "%spath too long", what);
    return r;
}

/* prefix + "/" + rel into out (PATH_MAX bytes). */
static int full_path(struct unpack *u, const char *rel, char *out)
{
    if (snprintf(out, PATH_MAX, "%s/%s", u->prefix, rel) >= PATH_MAX)
        return entry_error(u, -ENAMETOOLONG, "path too long below '%s'", u->prefix);
    return 0;
}

/* Writes an UNPACK_OVERRIDE_XATTR value on fd, something this file opened with O_NOFOLLOW. */
static int set_override(struct unpack *u, int fd, const char *value)
{
    if (fsetxattr(fd, UNPACK_OVERRIDE_XATTR, value, strlen(value), 0) == 0)
        return 0;
    int r = negative_errno();
    if (r == -EOPNOTSUPP)
        return entry_error(u, r,
                           "the node cache's filesystem has no user xattrs, which its layers "
                           "need to keep their files' owners and modes");
    return entry_error(u, r, "cannot set %s: %s", UNPACK_OVERRIDE_XATTR, strerror(-r));
}

/* A directory made here because the layer names it only as a parent: in shared mode it is
 * 0755 whatever the umask, and says so in its xattr. */
static int mark_implicit_dir(struct unpack *u, int fd, const char *comp)
{
    if (!u->shared)
        return 0;
    if (fchmod(fd, 0755) < 0)
        return entry_error(u, negative_errno(), "cannot chmod directory '%s': %m", comp);
    return set_override(u, fd, OVERRIDE_IMPLICIT_DIR);
}

static int explain_open_error(struct unpack *u, int r, int dfd, const char *comp)
{
    struct stat st;
    if ((r == -ELOOP || r == -ENOTDIR) && fstatat(dfd, comp, &st, AT_SYMLINK_NOFOLLOW) == 0) {
        if (S_ISLNK(st.st_mode))
            return entry_error(u, -EINVAL, "path goes through the symbolic link '%s'", comp);
        return entry_error(u, -EINVAL, "'%s' on the path is not a directory", comp);
    }
    return entry_error(u, r, "cannot open directory '%s': %s", comp, strerror(-r));
}

/* Opens the directory rel[0..len) below dest without following any symbolic link, creating
 * missing components (0755) if create. Returns 0 and an O_RDONLY fd. */
static int open_dir_beneath(struct unpack *u, const char *rel, size_t len, bool create, int *ret_fd)
{
    _cleanup_close_ int fd = fcntl(u->dest_fd, F_DUPFD_CLOEXEC, 3);
    if (fd < 0)
        return negative_errno();
    for (size_t i = 0; i < len;) {
        char comp[NAME_MAX + 1];
        size_t n = strcspn(rel + i, "/");
        if (n > len - i)
            n = len - i;
        memcpy(comp, rel + i, n); /* path_clean bounded components to NAME_MAX */
        comp[n] = '\0';
        int next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        bool made = false;
        if (next < 0 && errno == ENOENT && create) {
            made = mkdirat(fd, comp, 0755) == 0;
            if (!made && errno != EEXIST)
                return entry_error(u, negative_errno(), "cannot create directory '%s': %m", comp);
            next = openat(fd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        }
        if (next < 0)
            return explain_open_error(u, negative_errno(), fd, comp);
        close(fd);
        fd = next;
        int r = made ? mark_implicit_dir(u, fd, comp) : 0;
        if (r < 0)
            return r;
        i += n + 1;
    }
    *ret_fd = TAKE_FD(fd);
    return 0;
}

/* Splits u->rel into its directory part (length) and last component. */
static const char *rel_base(const struct unpack *u, size_t *ret_dir_len)
{
    const char *slash = strrchr(u->rel, '/');
    *ret_dir_len = slash ? (size_t)(slash - u->rel) : 0;
    return slash ? slash + 1 : u->rel;
}

static int unpack_opaque(struct unpack *u, size_t dir_len)
{
    _cleanup_close_ int fd = -1;
    int r = open_dir_beneath(u, u->rel, dir_len, true, &fd);
    if (r < 0)
        return r;
    if (fsetxattr(fd, OPAQUE_XATTR, "y", 1, 0) < 0) {
        r = negative_errno();
        if (r == -EOPNOTSUPP)
            return entry_error(u, r,
                               "the cache's filesystem has no user xattrs, which opaque "
                               "directories need; put the cache on another filesystem (cache_dir "
                               "in capsule.conf)");
        return entry_error(u, r, "cannot mark the directory opaque: %s", strerror(-r));
    }
    u->stats.opaque_dirs++;
    return 0;
}

/* ".wh.NAME": NAME of the layers below is deleted, which overlayfs reads from a 0/0 character
 * device in its place. ".wh..wh..opq" hides the whole directory below. */
static int unpack_whiteout(struct unpack *u, const char *base, size_t dir_len)
{
    if (strcmp(base, WH_OPAQUE) == 0)
        return unpack_opaque(u, dir_len);
    if (strncmp(base, WH_META, strlen(WH_META)) == 0) {
        /* aufs' own bookkeeping (.wh..wh.plnk and friends): Docker ignores it too. */
        log_debug("layer entry '%s': aufs metadata skipped", u->name);
        return 0;
    }
    const char *target = base + strlen(WH);
    if (target[0] == '\0' || strcmp(target, ".") == 0 || strcmp(target, "..") == 0)
        return entry_error(u, -EINVAL, "whiteout of '%s' names no file", target);

    _cleanup_close_ int fd = -1;
    int r = open_dir_beneath(u, u->rel, dir_len, true, &fd);
    if (r < 0)
        return r;
    /* An earlier entry of this layer by that name goes: the whiteout is what the layer says. */
    r = rm_tree_at(fd, target, NULL);
    if (r < 0)
        return entry_error(u, r, "cannot replace '%s': %s", target, strerror(-r));
    if (mknodat(fd, target, S_IFCHR | 0000, makedev(0, 0)) < 0)
        return entry_error(u, negative_errno(), "cannot create the whiteout device: %m");
    u->stats.whiteouts++;
    return 0;
}

/* A later entry that is not a directory replaces a directory an earlier entry made; libarchive
 * only removes empty ones. */
static int make_room(struct unpack *u)
{
    struct stat st;
    if (lstat(u->path, &st) < 0 || !S_ISDIR(st.st_mode))
        return 0;
    size_t dir_len;
    const char *base = rel_base(u, &dir_len);
    _cleanup_close_ int fd = -1;
    int r = open_dir_beneath(u, u->rel, dir_len, false, &fd);
    if (r < 0)
        return r;
    r = rm_tree_at(fd, base, NULL);
    if (r < 0)
        return entry_error(u, r, "cannot replace the directory: %s", strerror(-r));
    return 0;
}

/* Hard links must name an existing non-directory of this layer, reached without symbolic
 * links (link(2) follows them in the directory part). */
static int prepare_hardlink(struct unpack *u, struct archive_entry *entry, const char *target)
{
    char rel[PATH_MAX];
    int r = clean_or_fail(u, target, rel, "hard link target: ");
    if (r < 0)
        return r;
    if (r == 0)
        return entry_error(u, -EINVAL, "hard link to the layer's root");
    const char *slash = strrchr(rel, '/');
    _cleanup_close_ int fd = -1;
    r = open_dir_beneath(u, rel, slash ? (size_t)(slash - rel) : 0, false, &fd);
    if (r < 0)
        return r;
    struct stat st;
    if (fstatat(fd, slash ? slash + 1 : rel, &st, AT_SYMLINK_NOFOLLOW) < 0)
        return entry_error(u, -EINVAL, "hard link target '%s' is not in the layer", rel);
    if (S_ISDIR(st.st_mode))
        return entry_error(u, -EINVAL, "hard link to the directory '%s'", rel);
    r = full_path(u, rel, u->link);
    if (r < 0)
        return r;
    archive_entry_set_hardlink(entry, u->link);
    return 0;
}

static int write_error(struct unpack *u)
{
    int en = archive_errno(u->out);
    /* libarchive reports refused paths with no errno (or its own negative codes). */
    int r = en > 0 ? -en : -EINVAL;
    const char *msg = archive_error_string(u->out) ?: "write failed";
    /* Its texts for failed writes ("Write failed") leave out why: a full disk, a quota. */
    if (en > 0 && !strstr(msg, strerror(en)))
        return entry_error(u, r, "%s: %s", msg, strerror(en));
    return entry_error(u, r, "%s", msg);
}

static int read_error(struct unpack *u, const char *where)
{
    int en = archive_errno(u->in);
    /* Errors of the fd itself keep their errno; anything about the data is a bad layer. */
    int r = (en == EIO || en == ENOMEM || en == EBADF || en == EISDIR) ? -en : -EINVAL;
    return errmsg_set(u->e, r, "layer %s: %s", where,
                      archive_error_string(u->in) ?: "cannot read the archive");
}

/* A size for a message, in MiB below a GiB, else in GiB. */
static double size_in(uint64_t bytes, const char **ret_unit)
{
    bool gib = bytes >= (1u << 30);
    *ret_unit = gib ? "GiB" : "MiB";
    return (double)bytes / (gib ? (1u << 30) : (1u << 20));
}

/* Every 64 MiB written: is the reserve of free space still there? */
static int check_reserve(struct unpack *u)
{
    struct statvfs v;
    if (!u->reserve_bytes || u->stats.bytes - u->checked_at < (64u << 20))
        return 0;
    u->checked_at = u->stats.bytes;
    if (fstatvfs(u->dest_fd, &v) < 0 || (uint64_t)v.f_bavail * v.f_frsize >= u->reserve_bytes)
        return 0;
    const char *unit;
    double n = size_in(u->reserve_bytes, &unit);
    return errmsg_set(u->e, -ENOSPC,
                      "layer entry '%s': %s: less than %.1f %s would be left free on the "
                      "cache's file system",
                      u->name, strerror(ENOSPC), n, unit);
}

static int copy_data(struct unpack *u)
{
    for (;;) {
        const void *buf;
        size_t size;
        la_int64_t offset;
        int r = archive_read_data_block(u->in, &buf, &size, &offset);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            char where[300];
            snprintf(where, sizeof(where), "entry '%s'", u->name);
            return read_error(u, where);
        }
        if (u->max_bytes && u->stats.bytes + size > u->max_bytes) {
            const char *unit;
            double n = size_in(u->max_bytes, &unit);
            return errmsg_set(u->e, -EFBIG,
                              "layer entry '%s': the layer unpacks to more than %.1f %s "
                              "(max_unpacked_size in capsule.conf)",
                              u->name, n, unit);
        }
        if (archive_write_data_block(u->out, buf, size, offset) != ARCHIVE_OK)
            return write_error(u);
        u->stats.bytes += size;
        int k = check_reserve(u);
        if (k < 0)
            return k;
    }
}

/* The tar header's id for the override xattr; ids no kernel can hold become the overflow id. */
static unsigned override_id(la_int64_t id)
{
    return id < 0 || id > 0xfffffffeLL ? 65534u : (unsigned)id;
}

/* Shared mode, before libarchive writes the entry: widens its mode, keeps the image's for the
 * xattr, and makes the parents the layer names no entry for (libarchive would make them with
 * the umask's mode and no xattr). */
static int shared_prepare(struct unpack *u, struct archive_entry *entry, mode_t type, bool hardlink)
{
    u->override[0] = '\0';
    size_t dir_len;
    rel_base(u, &dir_len);
    /* Only a missing parent costs the walk; one that is there (a symbolic link too) is
     * libarchive's to check. */
    struct stat st;
    char parent[PATH_MAX];
    snprintf(parent, sizeof(parent), "%.*s", (int)dir_len, u->rel);
    if (dir_len && fstatat(u->dest_fd, parent, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        _cleanup_close_ int fd = -1;
        int r = open_dir_beneath(u, u->rel, dir_len, true, &fd);
        if (r < 0)
            return r;
    }
    if (type != AE_IFREG && type != AE_IFDIR)
        return 0;
    mode_t perm = archive_entry_perm(entry) & 07777 & ~(mode_t)(S_ISUID | S_ISGID);
    /* A hard link's mode too: libarchive applies it to the inode when the link carries data. */
    archive_entry_set_perm(entry, type == AE_IFDIR || (perm & 0111) ? 0755 : 0644);
    /* A hard link is one more name of an inode that has its xattr already. */
    if (hardlink)
        return 0;
    snprintf(u->override, sizeof(u->override), "%u:%u:%04o:%s",
             override_id(archive_entry_uid(entry)), override_id(archive_entry_gid(entry)),
             (unsigned)perm, type == AE_IFDIR ? "dir" : "file");
    return 0;
}

/* Shared mode, after libarchive wrote the entry: its xattr, on what is at the entry's name now
 * (reached without following a symbolic link). */
static int shared_finish(struct unpack *u, mode_t type)
{
    if (!u->override[0])
        return 0;
    size_t dir_len;
    const char *base = rel_base(u, &dir_len);
    _cleanup_close_ int dfd = -1;
    int r = open_dir_beneath(u, u->rel, dir_len, false, &dfd);
    if (r < 0)
        return r;
    int flags = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC;
    _cleanup_close_ int fd = openat(dfd, base, flags | (type == AE_IFDIR ? O_DIRECTORY : 0));
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return entry_error(u, negative_errno(), "cannot open what was written: %m");
    if ((type == AE_IFDIR) != S_ISDIR(st.st_mode) || !(S_ISDIR(st.st_mode) || S_ISREG(st.st_mode)))
        return entry_error(u, -EINVAL, "what was written is not a %s",
                           type == AE_IFDIR ? "directory" : "regular file");
    return set_override(u, fd, u->override);
}

/* Decides what an entry that is not a whiteout becomes, then lets libarchive write it. */
static int unpack_file(struct unpack *u, struct archive_entry *entry)
{
    mode_t type = archive_entry_filetype(entry);
    const char *hardlink = archive_entry_hardlink(entry);
    if (!hardlink && (type == AE_IFCHR || type == AE_IFBLK || type == AE_IFSOCK)) {
        if (type != AE_IFSOCK)
            u->stats.skipped_devices++;
        log_debug("layer entry '%s': device node skipped", u->name);
        return 0;
    }
    mode_t perm = archive_entry_perm(entry);
    if (perm & (S_ISUID | S_ISGID)) {
        archive_entry_set_perm(entry, perm & ~(mode_t)(S_ISUID | S_ISGID));
        u->stats.dropped_setid++;
    }
    int r = u->shared ? shared_prepare(u, entry, type, hardlink != NULL) : 0;
    if (r >= 0)
        r = full_path(u, u->rel, u->path);
    if (r >= 0 && hardlink)
        r = prepare_hardlink(u, entry, hardlink);
    if (r >= 0 && (type != AE_IFDIR || hardlink))
        r = make_room(u);
    if (r < 0)
        return r;
    archive_entry_set_pathname(entry, u->path);
    r = archive_write_header(u->out, entry);
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
        return write_error(u);
    if (archive_entry_size(entry) > 0) {
        r = copy_data(u);
        if (r < 0)
            return r;
    }
    r = archive_write_finish_entry(u->out);
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
        return write_error(u);
    return u->shared ? shared_finish(u, type) : 0;
}

static int unpack_entry(struct unpack *u, struct archive_entry *entry)
{
    const char *name = archive_entry_pathname(entry);
    if (!name)
        return errmsg_set(u->e, -EINVAL, "layer entry %llu has no usable path name",
                          (unsigned long long)u->stats.entries);
    u->name = printable(name, u->shown, sizeof(u->shown));
    int r = clean_or_fail(u, name, u->rel, "");
    if (r <= 0)
        return r; /* the layer's root itself: dest keeps its own mode */
    size_t dir_len;
    const char *base = rel_base(u, &dir_len);
    /* Whiteouts are files; a directory by such a name would be a layer no tool writes. */
    for (const char *p = u->rel; p < base; p += strcspn(p, "/") + 1)
        if (strncmp(p, WH, strlen(WH)) == 0)
            return entry_error(u, -EINVAL, "a whiteout name is used as a directory");
    if (strncmp(base, WH, strlen(WH)) == 0)
        return unpack_whiteout(u, base, dir_len);
    return unpack_file(u, entry);
}

static int unpack_open(struct unpack *u, int fd)
{
    u->in = archive_read_new();
    u->out = archive_write_disk_new();
    if (!u->in || !u->out)
        return -ENOMEM;
    if (archive_read_support_filter_gzip(u->in) != ARCHIVE_OK ||
        archive_read_support_filter_zstd(u->in) != ARCHIVE_OK ||
        archive_read_support_filter_none(u->in) != ARCHIVE_OK ||
        archive_read_support_format_tar(u->in) != ARCHIVE_OK ||
        archive_read_support_format_empty(u->in) != ARCHIVE_OK)
        return errmsg_set(u->e, -ENOTSUP, "libarchive lacks gzip or zstd support: %s",
                          archive_error_string(u->in) ?: "?");
    if (archive_write_disk_set_options(u->out, EXTRACT_FLAGS) != ARCHIVE_OK)
        return errmsg_set(u->e, -ENOTSUP, "libarchive: %s", archive_error_string(u->out) ?: "?");
    if (archive_read_open_fd(u->in, fd, 128 * 1024) != ARCHIVE_OK)
        return read_error(u, "start");
    return 0;
}

static int unpack_entries(struct unpack *u)
{
    for (;;) {
        struct archive_entry *entry;
        int r = archive_read_next_header(u->in, &entry);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
            char where[64];
            snprintf(where, sizeof(where), "after entry %llu",
                     (unsigned long long)u->stats.entries);
            return read_error(u, where);
        }
        u->stats.entries++;
        r = unpack_entry(u, entry);
        if (r < 0)
            return r;
    }
}

int unpack_layer(int fd, const char *dest, struct unpack_stats *ret_stats, struct errmsg *e)
{
    return unpack_layer_bounded(fd, dest, 0, 0, ret_stats, e);
}

static int unpack_run(int fd, const char *dest, uint64_t max_bytes, uint64_t reserve_bytes,
                      bool shared, struct unpack_stats *ret_stats, struct errmsg *e)
{
    _cleanup_(unpack_done) struct unpack u = {.dest_fd = -1,
                                              .max_bytes = max_bytes,
                                              .reserve_bytes = reserve_bytes,
                                              .shared = shared,
                                              .e = e};
    u.prefix = realpath(dest, NULL);
    if (!u.prefix)
        return errmsg_set(e, negative_errno(), "layer destination '%s': %m", dest);
    u.dest_fd = open(u.prefix, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (u.dest_fd < 0)
        return errmsg_set(e, negative_errno(), "layer destination '%s': %m", u.prefix);
    u.name = u.prefix;
    int r = shared ? set_override(&u, u.dest_fd, OVERRIDE_IMPLICIT_DIR) : 0;
    if (r >= 0)
        r = unpack_open(&u, fd);
    if (r >= 0)
        r = unpack_entries(&u);
    if (r < 0)
        return r;
    /* Closing applies the modes and times of directories, deferred until their children were
     * written. */
    if (archive_write_close(u.out) != ARCHIVE_OK) {
        u.name = u.prefix;
        return write_error(&u);
    }
    if (ret_stats)
        *ret_stats = u.stats;
    return 0;
}

int unpack_layer_bounded(int fd, const char *dest, uint64_t max_bytes, uint64_t reserve_bytes,
                         struct unpack_stats *ret_stats, struct errmsg *e)
{
    return unpack_run(fd, dest, max_bytes, reserve_bytes, false, ret_stats, e);
}

int unpack_layer_shared(int fd, const char *dest, uint64_t max_bytes, uint64_t reserve_bytes,
                        struct unpack_stats *ret_stats, struct errmsg *e)
{
    return unpack_run(fd, dest, max_bytes, reserve_bytes, true, ret_stats, e);
}
