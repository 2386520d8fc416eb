/* OCI image archives: a container's root exported as an image of one gzip'd layer, and any
 * single-image oci-archive imported into the store; see archive.h.
 *
 * Export streams the tree through two libarchive writers: a pax tar whose bytes are hashed
 * (the layer's diff_id) and handed to a "raw" writer with the gzip filter, whose output is
 * hashed (the layer's digest) into an unlinked temporary file. The config, manifest and index
 * are then made, and everything goes into the outer tar.
 *
 * Import reads the outer tar several times over (it is a file, and libarchive skips a member's
 * data by seeking), once for each thing it needs in the order it needs it: index.json, the
 * manifest, the config, the layers. Member names are checked on the first pass; nothing is
 * ever written to disk under a member's name, blobs go to the store under their digest. */
#include "capsule/store/archive.h"

#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <search.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "capsule/image/capsule-limits.h"
#include "capsule/image/digest.h"
#include "capsule/image/manifest.h"
#include "capsule/store/unpack.h"
#include "lib/fileio.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/rm-tree.h"

#define OCI_LAYOUT_NAME    "oci-layout"
#define OCI_INDEX_NAME     "index.json"
#define OCI_LAYOUT_DOC     "{\"imageLayoutVersion\":\"1.0.0\"}"
#define OCI_REF_NAME       "org.opencontainers.image.ref.name"
#define OCI_LAYOUT_MAX     4096
#define COPY_BUF_SIZE      (128 * 1024)
#define HISTORY_CREATED_BY "capsule: container saved"

static void archive_writep(struct archive **a)
{
    if (*a)
        archive_write_free(*a);
}

#define _cleanup_write_ _cleanup_(archive_writep)
#define _cleanup_json_  _cleanup_(json_decrefp) /* jansson's own */
DEFINE_POINTER_CLEANUP(struct archive_entry, archive_entry_free)

/* "blobs/sha256/<hex>" for a valid digest, into buf (PATH_MAX bytes). */
static void blob_member_name(const char *digest, char *buf)
{
    snprintf(buf, PATH_MAX, "blobs/%.*s/%s", (int)(strchr(digest, ':') - digest), digest,
             digest_hex(digest));
}

/* ================================ export ================================ */

/* The layer being written: tar -> hash -> gzip -> hash -> file. */
struct layer_writer {
    struct archive *tar;        /* pax tar, uncompressed: the layer's content */
    struct archive *gz;         /* the tar's bytes gzip'd (format "raw": no container) */
    struct digest_ctx *diff_id; /* of the tar's bytes */
    struct digest_ctx *digest;  /* of the gzip'd bytes */
    int fd;                     /* an unlinked temporary file the gzip'd bytes go to */
    uint64_t size;              /* gzip'd bytes written */
    int error;                  /* the first error of a callback: a negative errno */
};

/* A file with several links met before: later links become tar hard links to it. */
struct seen_inode {
    dev_t dev;
    ino_t ino;
    char *path;
};

struct exporter {
    struct layer_writer w;
    uint64_t root_mnt_id; /* the root's mount (STATX_MNT_ID), when the kernel tells */
    bool have_mnt_id;
    dev_t root_dev;
    void *inodes;        /* tsearch tree of struct seen_inode */
    char path[PATH_MAX]; /* the current entry, relative to the root ("" for the root) */
    size_t path_len;
    char *buf; /* COPY_BUF_SIZE bytes for file data */
    unsigned skipped;
    struct errmsg *e;
};

static int export_error(struct exporter *x, int r, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* A message naming the entry as the container shows it ("'/etc/shadow': ..."). */
static int export_error(struct exporter *x, int r, const char *fmt, ...)
{
    char what[ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    /* A path too long to show whole keeps its start and its end. */
    if (x->path_len > 160)
        return errmsg_set(x->e, r, "'/%.100s...%s': %s", x->path, x->path + x->path_len - 50, what);
    return errmsg_set(x->e, r, "'/%s': %s", x->path, what);
}

static la_ssize_t gz_write(struct archive *a, void *userdata, const void *buf, size_t len)
{
    struct layer_writer *w = userdata;
    int r = fd_write_all(w->fd, buf, len);
    if (r < 0) {
        if (!w->error)
            w->error = r;
        archive_set_error(a, -r, "%s", strerror(-r));
        return -1;
    }
    digest_update(w->digest, buf, len);
    w->size += len;
    return (la_ssize_t)len;
}

static la_ssize_t tar_write(struct archive *a, void *userdata, const void *buf, size_t len)
{
    struct layer_writer *w = userdata;
    digest_update(w->diff_id, buf, len);
    if (archive_write_data(w->gz, buf, len) != (la_ssize_t)len) {
        if (!w->error)
            w->error = archive_errno(w->gz) > 0 ? -archive_errno(w->gz) : -EIO;
        archive_set_error(a, -w->error, "%s", archive_error_string(w->gz) ?: "gzip failed");
        return -1;
    }
    return (la_ssize_t)len;
}

/* The errno of a failed write of the layer: the callback's, else libarchive's own. */
static int writer_errno(struct layer_writer *w, struct archive *a)
{
    if (w->error < 0)
        return w->error;
    return archive_errno(a) > 0 ? -archive_errno(a) : -EIO;
}

static int layer_writer_open(struct layer_writer *w, int fd, struct errmsg *e)
{
    *w = (struct layer_writer){.fd = fd};
    if (digest_begin_sha256(&w->diff_id) < 0 || digest_begin_sha256(&w->digest) < 0 ||
        !(w->tar = archive_write_new()) || !(w->gz = archive_write_new()))
        return errmsg_set(e, -ENOMEM, "out of memory");
    _cleanup_(archive_entry_freep) struct archive_entry *raw = archive_entry_new();
    if (!raw)
        return errmsg_set(e, -ENOMEM, "out of memory");
    archive_entry_set_pathname(raw, "layer");
    archive_entry_set_filetype(raw, AE_IFREG);
    if (archive_write_set_format_raw(w->gz) != ARCHIVE_OK ||
        archive_write_add_filter_gzip(w->gz) != ARCHIVE_OK)
        return errmsg_set(e, -ENOTSUP, "libarchive lacks gzip support: %s",
                          archive_error_string(w->gz) ?: "?");
    /* Nothing after the gzip stream (no padding to a block), and no time in its header: the
     * same tree gives the same blob. An older libarchive without the option stamps the time. */
    (void)archive_write_set_filter_option(w->gz, "gzip", "timestamp", NULL);
    if (archive_write_set_bytes_in_last_block(w->gz, 1) != ARCHIVE_OK ||
        archive_write_open2(w->gz, w, NULL, gz_write, NULL, NULL) != ARCHIVE_OK ||
        archive_write_header(w->gz, raw) != ARCHIVE_OK)
        return errmsg_set(e, writer_errno(w, w->gz), "cannot start the layer's gzip stream: %s",
                          archive_error_string(w->gz) ?: "?");
    if (archive_write_set_format_pax_restricted(w->tar) != ARCHIVE_OK ||
        archive_write_add_filter_none(w->tar) != ARCHIVE_OK ||
        archive_write_open2(w->tar, w, NULL, tar_write, NULL, NULL) != ARCHIVE_OK)
        return errmsg_set(e, writer_errno(w, w->tar), "cannot start the layer's tar: %s",
                          archive_error_string(w->tar) ?: "?");
    return 0;
}

static void layer_writer_done(struct layer_writer *w)
{
    if (w->tar)
        archive_write_free(w->tar);
    if (w->gz)
        archive_write_free(w->gz);
    digest_free(w->diff_id);
    digest_free(w->digest);
    *w = (struct layer_writer){.fd = -1};
}

/* Ends the tar and the gzip stream; the digests are final only then. */
static int layer_writer_close(struct layer_writer *w, char diff_id[DIGEST_STRING_MAX],
                              char digest[DIGEST_STRING_MAX], struct errmsg *e)
{
    if (archive_write_close(w->tar) != ARCHIVE_OK)
        return errmsg_set(e, writer_errno(w, w->tar), "cannot end the layer's tar: %s",
                          archive_error_string(w->tar) ?: "?");
    if (archive_write_close(w->gz) != ARCHIVE_OK)
        return errmsg_set(e, writer_errno(w, w->gz), "cannot end the layer's gzip stream: %s",
                          archive_error_string(w->gz) ?: "?");
    digest_final(w->diff_id, diff_id);
    digest_final(w->digest, digest);
    return 0;
}

static int seen_compare(const void *a, const void *b)
{
    const struct seen_inode *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->ino != y->ino)
        return x->ino < y->ino ? -1 : 1;
    return 0;
}

static void seen_free(void *p)
{
    struct seen_inode *s = p;
    free(s->path);
    free(s);
}

static void export_done(struct exporter *x)
{
    layer_writer_done(&x->w);
    tdestroy(x->inodes, seen_free);
    free(x->buf);
}

/* The path of an earlier link of st's inode, or NULL (then this one is remembered). */
static int seen_before(struct exporter *x, const struct stat *st, const char **ret)
{
    *ret = NULL;
    if (st->st_nlink < 2)
        return 0;
    struct seen_inode key = {.dev = st->st_dev, .ino = st->st_ino};
    struct seen_inode **found = tfind(&key, &x->inodes, seen_compare);
    if (found) {
        *ret = (*found)->path;
        return 0;
    }
    struct seen_inode *s = calloc(1, sizeof(*s));
    if (!s || !(s->path = strdup(x->path))) {
        free(s);
        return -ENOMEM;
    }
    s->dev = st->st_dev;
    s->ino = st->st_ino;
    if (!tsearch(s, &x->inodes, seen_compare)) {
        seen_free(s);
        return -ENOMEM;
    }
    return 0;
}

/* Whether an entry is on another mount than the root: mount ids tell (Linux >= 5.8). Without
 * them only directories can be told by their device, since overlayfs gives a non-directory the
 * device of the layer it comes from. */
static bool on_other_mount(const struct exporter *x, const struct statx *stx)
{
    if (x->have_mnt_id && (stx->stx_mask & STATX_MNT_ID))
        return stx->stx_mnt_id != x->root_mnt_id;
    return S_ISDIR(stx->stx_mode) && makedev(stx->stx_dev_major, stx->stx_dev_minor) != x->root_dev;
}

/* An entry for the current path: owned by 0:0, with mode (type and permission bits) and mtime
 * in whole seconds. */
static struct archive_entry *entry_new(const struct exporter *x, mode_t mode, time_t mtime)
{
    struct archive_entry *entry = archive_entry_new();
    if (!entry)
        return NULL;
    archive_entry_set_pathname(entry, x->path);
    archive_entry_set_filetype(entry, mode & S_IFMT);
    archive_entry_set_perm(entry, mode & 07777);
    archive_entry_set_uid(entry, 0);
    archive_entry_set_gid(entry, 0);
    archive_entry_set_mtime(entry, mtime, 0);
    archive_entry_set_size(entry, 0);
    return entry;
}

static int write_header(struct exporter *x, struct archive_entry *entry)
{
    /* ARCHIVE_WARN: a name not in the locale's charset, written as its bytes (hdrcharset). */
    int r = archive_write_header(x->w.tar, entry);
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
        return export_error(x, writer_errno(&x->w, x->w.tar), "cannot write the layer: %s",
                            archive_error_string(x->w.tar) ?: "?");
    return 0;
}

/* An entry without data: a directory, a fifo, a symbolic link. */
static int write_plain(struct exporter *x, mode_t mode, time_t mtime, const char *symlink)
{
    _cleanup_(archive_entry_freep) struct archive_entry *entry = entry_new(x, mode, mtime);
    if (!entry)
        return export_error(x, -ENOMEM, "out of memory");
    if (symlink)
        archive_entry_set_symlink(entry, symlink);
    return write_header(x, entry);
}

/* Copies size bytes of fd into the layer. A file that grows meanwhile is cut where it was
 * stat'd; one that shrinks is padded with zeros, as tar does: the size is in the header
 * already. */
static int copy_file_data(struct exporter *x, int fd, uint64_t size)
{
    for (uint64_t done = 0; done < size;) {
        size_t want = size - done < COPY_BUF_SIZE ? (size_t)(size - done) : COPY_BUF_SIZE;
        size_t got = 0;
        int r = fd_read_up_to(fd, x->buf, want, &got);
        if (r < 0)
            return export_error(x, r, "cannot read: %s", strerror(-r));
        if (got == 0) {
            log_debug("'/%s' shrank while it was read; padded with zeros", x->path);
            got = want;
            memset(x->buf, 0, got);
        }
        if (archive_write_data(x->w.tar, x->buf, got) != (la_ssize_t)got)
            return export_error(x, writer_errno(&x->w, x->w.tar), "cannot write the layer: %s",
                                archive_error_string(x->w.tar) ?: "?");
        done += got;
    }
    return 0;
}

static int export_regular(struct exporter *x, int dfd, const char *name)
{
    /* O_NONBLOCK: should a fifo have taken the file's place since it was stat'd, opening it
     * must not wait for a writer. */
    _cleanup_close_ int fd =
        openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NOCTTY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0; /* removed meanwhile: a running container's files come and go */
    if (fd < 0)
        return export_error(x, negative_errno(), "cannot open: %m");
    struct stat st;
    if (fstat(fd, &st) < 0)
        return export_error(x, negative_errno(), "cannot stat: %m");
    if (!S_ISREG(st.st_mode))
        return 0; /* replaced by something else meanwhile: that is not what was listed */
    const char *earlier = NULL;
    if (seen_before(x, &st, &earlier) < 0)
        return export_error(x, -ENOMEM, "out of memory");
    _cleanup_(archive_entry_freep) struct archive_entry *entry =
        entry_new(x, st.st_mode, st.st_mtim.tv_sec);
    if (!entry)
        return export_error(x, -ENOMEM, "out of memory");
    if (earlier) {
        archive_entry_set_hardlink(entry, earlier);
        return write_header(x, entry);
    }
    archive_entry_set_size(entry, st.st_size);
    int r = write_header(x, entry);
    if (r < 0)
        return r;
    return copy_file_data(x, fd, (uint64_t)st.st_size);
}

static int export_symlink(struct exporter *x, int dfd, const char *name, const struct statx *stx)
{
    char target[PATH_MAX];
    ssize_t n = readlinkat(dfd, name, target, sizeof(target));
    if (n < 0 && errno == ENOENT)
        return 0;
    if (n < 0)
        return export_error(x, negative_errno(), "cannot read the symbolic link: %m");
    if ((size_t)n >= sizeof(target))
        return export_error(x, -ENAMETOOLONG, "the symbolic link's target is too long");
    target[n] = '\0';
    return write_plain(x, stx->stx_mode, stx->stx_mtime.tv_sec, target);
}

static int name_compare(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void names_free(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Appends a copy of name to *names (n entries, room for *cap). */
static int names_add(char ***names, size_t *n, size_t *cap, const char *name)
{
    if (*n == *cap) {
        size_t bigger = *cap ? 2 * *cap : 32;
        char **v = realloc(*names, bigger * sizeof(*v));
        if (!v)
            return -ENOMEM;
        *names = v;
        *cap = bigger;
    }
    if (!((*names)[*n] = strdup(name)))
        return -ENOMEM;
    (*n)++;
    return 0;
}

/* The names in a directory, sorted (so that the same tree gives the same layer). */
static int list_dir(int dfd, char ***ret, size_t *ret_n)
{
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    DIR *d = fdopendir(fd);
    if (!d) {
        int r = negative_errno();
        close(fd);
        return r;
    }
    char **names = NULL;
    size_t n = 0, cap = 0;
    int r = 0;
    for (;;) {
        errno = 0;
        struct dirent *de = readdir(d);
        if (!de) {
            r = errno ? negative_errno() : 0;
            break;
        }
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        if ((r = names_add(&names, &n, &cap, de->d_name)) < 0)
            break;
    }
    closedir(d);
    if (r < 0) {
        names_free(names, n);
        return r;
    }
    if (n)
        qsort(names, n, sizeof(*names), name_compare);
    *ret = names;
    *ret_n = n;
    return 0;
}

static int export_tree(struct exporter *x, int dfd);

static int export_dir(struct exporter *x, int dfd, const char *name, const struct statx *stx)
{
    int r = write_plain(x, stx->stx_mode, stx->stx_mtime.tv_sec, NULL);
    if (r < 0 || on_other_mount(x, stx))
        return r; /* a mount point: the mount itself is not the container's image */
    _cleanup_close_ int fd = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 0;
    if (fd < 0)
        return export_error(x, negative_errno(), "cannot open the directory: %m");
    return export_tree(x, fd);
}

static int export_entry(struct exporter *x, int dfd, const char *name)
{
    struct statx stx;
    if (statx(dfd, name, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT, STATX_BASIC_STATS | STATX_MNT_ID,
              &stx) < 0) {
        if (errno == ENOENT)
            return 0;
        return export_error(x, negative_errno(), "cannot stat: %m");
    }
    mode_t type = stx.stx_mode & S_IFMT;
    if (type == S_IFDIR)
        return export_dir(x, dfd, name, &stx);
    if (on_other_mount(x, &stx)) {
        /* A file mounted over (the runtime's /etc/hosts) stays an empty file: the runtime
         * mounts those only where the image has the file. */
        if (type == S_IFREG)
            return write_plain(x, stx.stx_mode, stx.stx_mtime.tv_sec, NULL);
        log_debug("'/%s' is a mount point, left out", x->path);
        return 0;
    }
    if (type == S_IFREG)
        return export_regular(x, dfd, name);
    if (type == S_IFLNK)
        return export_symlink(x, dfd, name, &stx);
    if (type == S_IFIFO)
        return write_plain(x, stx.stx_mode, stx.stx_mtime.tv_sec, NULL);
    /* Devices and sockets: the runtime makes the devices a container gets, and a socket is
     * nothing without its process. */
    x->skipped++;
    return 0;
}

/* Exports the entries of the directory dfd, whose path is x->path. */
static int export_tree(struct exporter *x, int dfd)
{
    char **names = NULL;
    size_t n = 0;
    int r = list_dir(dfd, &names, &n);
    if (r < 0)
        return export_error(x, r, "cannot list the directory: %s", strerror(-r));
    size_t len = x->path_len;
    for (size_t i = 0; i < n; i++) {
        int k = snprintf(x->path + len, sizeof(x->path) - len, "%s%s", len ? "/" : "", names[i]);
        if (k < 0 || (size_t)k >= sizeof(x->path) - len) {
            x->path[len] = '\0';
            r = export_error(x, -ENAMETOOLONG, "'%s' inside makes a path too long", names[i]);
        }
        if (r >= 0) {
            x->path_len = len + (size_t)k;
            r = export_entry(x, dfd, names[i]);
            x->path_len = len;
        }
        if (r < 0)
            break;
        x->path[len] = '\0';
    }
    names_free(names, n);
    return r;
}

/* Writes the layer of the tree below root_fd into fd; returns its digests and size. */
static int write_layer(int root_fd, int fd, char diff_id[DIGEST_STRING_MAX],
                       char digest[DIGEST_STRING_MAX], uint64_t *ret_size, struct errmsg *e)
{
    _cleanup_(export_done) struct exporter x = {.e = e};
    struct statx stx;
    if (statx(root_fd, "", AT_EMPTY_PATH, STATX_BASIC_STATS | STATX_MNT_ID, &stx) < 0)
        return errmsg_set(e, negative_errno(), "the container's root: %m");
    if (!S_ISDIR(stx.stx_mode))
        return errmsg_set(e, -ENOTDIR, "the container's root is not a directory");
    x.have_mnt_id = stx.stx_mask & STATX_MNT_ID;
    x.root_mnt_id = stx.stx_mnt_id;
    x.root_dev = makedev(stx.stx_dev_major, stx.stx_dev_minor);
    if (!(x.buf = malloc(COPY_BUF_SIZE)))
        return errmsg_set(e, -ENOMEM, "out of memory");
    int r = layer_writer_open(&x.w, fd, e);
    if (r >= 0)
        r = export_tree(&x, root_fd);
    if (r >= 0)
        r = layer_writer_close(&x.w, diff_id, digest, e);
    if (r < 0)
        return r;
    if (x.skipped)
        log_debug("%u device nodes and sockets left out of the layer", x.skipped);
    *ret_size = x.w.size;
    return 0;
}

/* ---- the image's documents ---- */

struct doc {
    char *data;
    size_t len;
    char digest[DIGEST_STRING_MAX];
};

static void doc_done(struct doc *d)
{
    free(d->data);
}

/* Serialises j (consuming it) into d and hashes it. */
static int doc_make(json_t *j, struct doc *d, struct errmsg *e)
{
    d->data = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!d->data)
        return errmsg_set(e, -ENOMEM, "out of memory");
    d->len = strlen(d->data);
    digest_sha256(d->data, d->len, d->digest);
    return 0;
}

/* A NULL-terminated string list as a JSON array. */
static int set_strv(json_t *obj, const char *key, char *const *v)
{
    if (!v)
        return 0;
    json_t *arr = json_array();
    for (size_t i = 0; arr && v[i]; i++)
        if (json_array_append_new(arr, json_string(v[i])) < 0) {
            json_decref(arr);
            return -ENOMEM;
        }
    return arr && json_object_set_new(obj, key, arr) == 0 ? 0 : -ENOMEM;
}

static json_t *run_config_json(const struct archive_export_opts *o)
{
    json_t *cfg = json_object();
    if (!cfg || set_strv(cfg, "Env", o->env) < 0 ||
        set_strv(cfg, "Entrypoint", o->entrypoint) < 0 || set_strv(cfg, "Cmd", o->cmd) < 0 ||
        (o->working_dir && json_object_set_new(cfg, "WorkingDir", json_string(o->working_dir)))) {
        json_decref(cfg);
        return NULL;
    }
    return cfg;
}

static int config_make(const struct archive_export_opts *o, const char *diff_id, struct doc *d,
                       struct errmsg *e)
{
    char created[32];
    struct tm tm;
    time_t now = time(NULL);
    strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tm));
    json_t *cfg = run_config_json(o);
    if (!cfg)
        return errmsg_set(e, -ENOMEM, "out of memory");
    return doc_make(json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:[s]}, s:[{s:s, s:s}]}", "created",
                              created, "architecture", o->architecture, "os",
                              o->os ? o->os : "linux", "config", cfg, "rootfs", "type", "layers",
                              "diff_ids", diff_id, "history", "created", created, "created_by",
                              HISTORY_CREATED_BY),
                    d, e);
}

static int manifest_make(const struct doc *config, const char *layer_digest, uint64_t layer_size,
                         struct doc *d, struct errmsg *e)
{
    return doc_make(json_pack("{s:i, s:s, s:{s:s, s:s, s:I}, s:[{s:s, s:s, s:I}]}", "schemaVersion",
                              2, "mediaType", MEDIA_OCI_MANIFEST, "config", "mediaType",
                              MEDIA_OCI_CONFIG, "digest", config->digest, "size",
                              (json_int_t)config->len, "layers", "mediaType", MEDIA_OCI_LAYER_GZIP,
                              "digest", layer_digest, "size", (json_int_t)layer_size),
                    d, e);
}

static int index_make(const struct archive_export_opts *o, const struct doc *manifest,
                      struct doc *d, struct errmsg *e)
{
    json_t *entry =
        json_pack("{s:s, s:s, s:I, s:{s:s, s:s}}", "mediaType", MEDIA_OCI_MANIFEST, "digest",
                  manifest->digest, "size", (json_int_t)manifest->len, "platform", "architecture",
                  o->architecture, "os", o->os ? o->os : "linux");
    if (entry && o->ref_name &&
        json_object_set_new(entry, "annotations", json_pack("{s:s}", OCI_REF_NAME, o->ref_name))) {
        json_decref(entry);
        entry = NULL;
    }
    if (!entry)
        return errmsg_set(e, -ENOMEM, "out of memory");
    return doc_make(json_pack("{s:i, s:s, s:[o]}", "schemaVersion", 2, "mediaType", MEDIA_OCI_INDEX,
                              "manifests", entry),
                    d, e);
}

/* ---- the outer tar ---- */

struct outer {
    struct archive *a;
    time_t now;
    struct errmsg *e;
};

static int outer_error(struct outer *t, const char *member)
{
    int en = archive_errno(t->a);
    return errmsg_set(t->e, en > 0 ? -en : -EIO, "cannot write '%s' into the archive: %s", member,
                      archive_error_string(t->a) ?: "?");
}

static int outer_header(struct outer *t, const char *name, mode_t mode, uint64_t size)
{
    _cleanup_(archive_entry_freep) struct archive_entry *entry = archive_entry_new();
    if (!entry)
        return errmsg_set(t->e, -ENOMEM, "out of memory");
    archive_entry_set_pathname(entry, name);
    archive_entry_set_filetype(entry, mode & S_IFMT);
    archive_entry_set_perm(entry, mode & 07777);
    archive_entry_set_mtime(entry, t->now, 0);
    archive_entry_set_size(entry, (la_int64_t)size);
    if (archive_write_header(t->a, entry) != ARCHIVE_OK)
        return outer_error(t, name);
    return 0;
}

static int outer_add(struct outer *t, const char *name, const void *data, size_t len)
{
    int r = outer_header(t, name, S_IFREG | 0644, len);
    if (r >= 0 && len && archive_write_data(t->a, data, len) != (la_ssize_t)len)
        r = outer_error(t, name);
    return r;
}

static int outer_add_doc(struct outer *t, const struct doc *d)
{
    char name[PATH_MAX];
    blob_member_name(d->digest, name);
    return outer_add(t, name, d->data, d->len);
}

/* The layer blob, from its temporary file. */
static int outer_add_layer(struct outer *t, const char *digest, int fd, uint64_t size)
{
    char name[PATH_MAX];
    blob_member_name(digest, name);
    int r = outer_header(t, name, S_IFREG | 0644, size);
    if (r < 0)
        return r;
    if (lseek(fd, 0, SEEK_SET) < 0)
        return errmsg_set(t->e, negative_errno(), "cannot read the layer back: %m");
    _cleanup_free_ char *buf = malloc(COPY_BUF_SIZE);
    if (!buf)
        return errmsg_set(t->e, -ENOMEM, "out of memory");
    for (uint64_t done = 0; done < size;) {
        size_t got = 0;
        size_t want = size - done < COPY_BUF_SIZE ? (size_t)(size - done) : COPY_BUF_SIZE;
        r = fd_read_up_to(fd, buf, want, &got);
        if (r < 0 || got == 0)
            return errmsg_set(t->e, r < 0 ? r : -EIO, "cannot read the layer back: %s",
                              r < 0 ? strerror(-r) : "it is shorter than written");
        if (archive_write_data(t->a, buf, got) != (la_ssize_t)got)
            return outer_error(t, name);
        done += got;
    }
    return 0;
}

struct layer_info {
    char diff_id[DIGEST_STRING_MAX];
    char digest[DIGEST_STRING_MAX];
    uint64_t size;
};

/* The oci-archive: oci-layout, the blobs, index.json, into out_fd. */
static int write_outer(int out_fd, int layer_fd, const struct layer_info *l,
                       const struct archive_export_opts *o, struct errmsg *e)
{
    _cleanup_(doc_done) struct doc config = {0}, manifest = {0}, index = {0};
    int r = config_make(o, l->diff_id, &config, e);
    if (r >= 0)
        r = manifest_make(&config, l->digest, l->size, &manifest, e);
    if (r >= 0)
        r = index_make(o, &manifest, &index, e);
    if (r < 0)
        return r;
    _cleanup_write_ struct archive *a = archive_write_new();
    struct outer t = {.a = a, .now = time(NULL), .e = e};
    if (!a)
        return errmsg_set(e, -ENOMEM, "out of memory");
    /* No padding to tar's 10 KiB blocks after the end marker: readers do not need it. */
    if (archive_write_set_format_pax_restricted(a) != ARCHIVE_OK ||
        archive_write_add_filter_none(a) != ARCHIVE_OK ||
        archive_write_set_bytes_in_last_block(a, 1) != ARCHIVE_OK ||
        archive_write_open_fd(a, out_fd) != ARCHIVE_OK)
        return outer_error(&t, OCI_LAYOUT_NAME);
    if ((r = outer_add(&t, OCI_LAYOUT_NAME, OCI_LAYOUT_DOC, strlen(OCI_LAYOUT_DOC))) < 0 ||
        (r = outer_header(&t, "blobs/", S_IFDIR | 0755, 0)) < 0 ||
        (r = outer_header(&t, "blobs/sha256/", S_IFDIR | 0755, 0)) < 0 ||
        (r = outer_add_layer(&t, l->digest, layer_fd, l->size)) < 0 ||
        (r = outer_add_doc(&t, &config)) < 0 || (r = outer_add_doc(&t, &manifest)) < 0 ||
        (r = outer_add(&t, OCI_INDEX_NAME, index.data, index.len)) < 0)
        return r;
    if (archive_write_close(a) != ARCHIVE_OK)
        return outer_error(&t, OCI_INDEX_NAME);
    return 0;
}

/* An unlinked temporary file beside path, for the layer while it is written. */
static int open_scratch(const char *path, struct errmsg *e)
{
    _cleanup_free_ char *tmp = NULL;
    if (asprintf(&tmp, "%s.layer-XXXXXX", path) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "cannot create '%s': %m", tmp);
    (void)unlink(tmp);
    return fd;
}

static int export_into(int root_fd, int out_fd, const char *out_path,
                       const struct archive_export_opts *o, struct errmsg *e)
{
    _cleanup_close_ int layer_fd = open_scratch(out_path, e);
    if (layer_fd < 0)
        return layer_fd;
    struct layer_info l = {0};
    int r = write_layer(root_fd, layer_fd, l.diff_id, l.digest, &l.size, e);
    if (r < 0)
        return r;
    r = write_outer(out_fd, layer_fd, &l, o, e);
    if (r < 0)
        return r;
    if (fsync(out_fd) < 0)
        return errmsg_set(e, negative_errno(), "cannot write: %m");
    return 0;
}

int archive_export_rootfs(int root_fd, const char *out_path, const struct archive_export_opts *o,
                          struct errmsg *e)
{
    if (!out_path || !out_path[0])
        return errmsg_set(e, -EINVAL, "no path to save the container to");
    if (!o || !o->architecture || !o->architecture[0])
        return errmsg_set(e, -EINVAL, "saving '%s': the image's architecture is not known",
                          out_path);
    _cleanup_free_ char *tmp = NULL;
    if (asprintf(&tmp, "%s.XXXXXX", out_path) < 0)
        return errmsg_set(e, -ENOMEM, "out of memory");
    _cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "saving '%s': cannot create '%s': %m", out_path,
                          tmp);
    /* 0600 whatever the umask: the archive holds the user's files. */
    int r =
        fchmod(fd, 0600) < 0 ? errmsg_set(e, negative_errno(), "cannot chmod '%s': %m", tmp) : 0;
    if (r >= 0)
        r = export_into(root_fd, fd, out_path, o, e);
    if (r >= 0 && rename(tmp, out_path) < 0)
        r = errmsg_set(e, negative_errno(), "cannot rename '%s' to it: %m", tmp);
    if (r < 0) {
        (void)unlink(tmp);
        return errmsg_prefix(e, r, "saving '%s'", out_path);
    }
    return 0;
}

/* ================================ import ================================ */

struct import {
    struct store *s;
    const char *path; /* the archive */
    const struct archive_import_opts *o;
    char *index; /* index.json */
    size_t index_len;
    char buf[COPY_BUF_SIZE];
    struct errmsg *e;
};

/* One pass over the archive's members. */
struct reader {
    struct archive *a;
    struct archive_entry *entry;
    char name[PATH_MAX]; /* the current member's name, cleaned */
    struct import *im;
};

static void reader_done(struct reader *rd)
{
    if (rd->a)
        archive_read_free(rd->a);
    rd->a = NULL;
}

/* Whether libarchive's error is one of the file itself rather than of the data in it. */
static bool file_errno(int en)
{
    return en == EIO || en == ENOMEM || en == EACCES || en == ENOENT || en == EISDIR ||
           en == ENOTDIR || en == ELOOP || en == EPERM || en == ENAMETOOLONG;
}

/* A read error: errors of the file itself keep their errno, anything about the data makes
 * the archive a bad one. */
static int reader_error(struct reader *rd, const char *where)
{
    int en = archive_errno(rd->a);
    return errmsg_set(rd->im->e, file_errno(en) ? -en : -EBADMSG, "%s: %s", where,
                      archive_error_string(rd->a) ?: "cannot read the archive");
}

static int reader_open(struct reader *rd, struct import *im)
{
    *rd = (struct reader){.im = im, .a = archive_read_new()};
    if (!rd->a)
        return errmsg_set(im->e, -ENOMEM, "out of memory");
    if (archive_read_support_format_tar(rd->a) != ARCHIVE_OK ||
        archive_read_support_filter_none(rd->a) != ARCHIVE_OK ||
        archive_read_support_filter_gzip(rd->a) != ARCHIVE_OK ||
        archive_read_support_filter_zstd(rd->a) != ARCHIVE_OK)
        return errmsg_set(im->e, -ENOTSUP, "libarchive lacks tar, gzip or zstd support: %s",
                          archive_error_string(rd->a) ?: "?");
    /* Opening reads the start already, to tell the format. */
    if (archive_read_open_filename(rd->a, im->path, 64 * 1024) != ARCHIVE_OK) {
        int en = archive_errno(rd->a);
        if (file_errno(en))
            return errmsg_set(im->e, -en, "%s", strerror(en));
        return reader_error(rd, "not a tar archive");
    }
    return 0;
}

/* Normalises a member name into out: no "./", no empty components, no trailing slash.
 * -EINVAL for an absolute name or one with "..": no tool writes those into an image layout,
 * and a member that could land outside where the archive is extracted marks a hostile one. */
static int member_name_clean(const char *name, char out[PATH_MAX])
{
    if (name[0] == '/')
        return -EINVAL;
    size_t n = 0;
    for (const char *p = name; *p;) {
        size_t len = strcspn(p, "/");
        if (len == 2 && p[0] == '.' && p[1] == '.')
            return -EINVAL;
        if (len > 0 && !(len == 1 && p[0] == '.')) {
            if (n + 1 + len >= PATH_MAX)
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
    return 0;
}

/* Entry names are outside input: keep control characters out of messages. */
static const char *printable(const char *s, char *buf, size_t size)
{
    size_t i = 0;
    for (; s[i] && i + 1 < size; i++)
        buf[i] = (unsigned char)s[i] < 0x20 || s[i] == 0x7f ? '?' : s[i];
    buf[i] = '\0';
    return buf;
}

/* The next member: 1 with rd->entry and rd->name, 0 at the end of the archive. */
static int reader_next(struct reader *rd)
{
    int r = archive_read_next_header(rd->a, &rd->entry);
    if (r == ARCHIVE_EOF)
        return 0;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
        return reader_error(rd, "not a tar archive, or a damaged one");
    const char *name = archive_entry_pathname(rd->entry);
    if (!name)
        return errmsg_set(rd->im->e, -EBADMSG, "a member has no usable name");
    r = member_name_clean(name, rd->name);
    if (r < 0) {
        char shown[256];
        return errmsg_set(rd->im->e, r == -EINVAL ? -EINVAL : -EBADMSG, "member '%s': %s",
                          printable(name, shown, sizeof(shown)),
                          r == -EINVAL ? "absolute names and '..' are refused" : "name too long");
    }
    return 1;
}

/* Reads the current member, which must be a regular file of at most max bytes, into memory. */
static int reader_read_all(struct reader *rd, size_t max, char **ret, size_t *ret_len)
{
    struct errmsg *e = rd->im->e;
    if (archive_entry_filetype(rd->entry) != AE_IFREG || archive_entry_hardlink(rd->entry))
        return errmsg_set(e, -EBADMSG, "member '%s' is not a regular file", rd->name);
    la_int64_t size = archive_entry_size(rd->entry);
    if (size < 0 || (uint64_t)size > max)
        return errmsg_set(e, -EFBIG, "member '%s' has %lld bytes, more than the %zu taken",
                          rd->name, (long long)size, max);
    _cleanup_free_ char *data = malloc((size_t)size + 1);
    if (!data)
        return errmsg_set(e, -ENOMEM, "out of memory");
    for (la_int64_t done = 0; done < size;) {
        la_ssize_t n = archive_read_data(rd->a, data + done, (size_t)(size - done));
        if (n < 0)
            return reader_error(rd, rd->name);
        if (n == 0)
            return errmsg_set(e, -EBADMSG, "member '%s' is cut short", rd->name);
        done += n;
    }
    data[size] = '\0';
    *ret = TAKE_PTR(data);
    *ret_len = (size_t)size;
    return 0;
}

static int check_layout(struct import *im, const char *data, size_t len)
{
    json_error_t err;
    _cleanup_json_ json_t *j = json_loadb(data, len, 0, &err);
    if (!j || !json_is_string(json_object_get(j, "imageLayoutVersion")))
        return errmsg_set(im->e, -EBADMSG, "%s: not an OCI layout file", OCI_LAYOUT_NAME);
    return 0;
}

/* The first pass: every member's name is checked, index.json is read, oci-layout checked. */
static int scan_members(struct import *im)
{
    _cleanup_(reader_done) struct reader rd = {0};
    int r = reader_open(&rd, im);
    bool layout = false;
    while (r >= 0 && (r = reader_next(&rd)) > 0) {
        bool is_index = strcmp(rd.name, OCI_INDEX_NAME) == 0;
        bool is_layout = strcmp(rd.name, OCI_LAYOUT_NAME) == 0;
        if ((is_index && im->index) || (is_layout && layout))
            return errmsg_set(im->e, -EBADMSG, "member '%s' is in the archive twice", rd.name);
        if (is_index)
            r = reader_read_all(&rd, CAPSULE_MANIFEST_MAX, &im->index, &im->index_len);
        if (is_layout) {
            _cleanup_free_ char *data = NULL;
            size_t len = 0;
            r = reader_read_all(&rd, OCI_LAYOUT_MAX, &data, &len);
            if (r >= 0)
                r = check_layout(im, data, len);
            layout = true;
        }
    }
    if (r < 0)
        return r;
    if (!layout)
        return errmsg_set(im->e, -EBADMSG, "no %s: not an OCI image archive", OCI_LAYOUT_NAME);
    if (!im->index)
        return errmsg_set(im->e, -EBADMSG, "no %s: not an OCI image archive", OCI_INDEX_NAME);
    return 0;
}

/* Reads the blob d names (what: "manifest", "config") into memory, checked against its size and
 * digest. */
static int read_blob(struct import *im, const struct descriptor *d, size_t max, const char *what,
                     char **ret, size_t *ret_len)
{
    if (d->size > (int64_t)max)
        return errmsg_set(im->e, -EFBIG, "the %s %s is %lld bytes, more than the %zu MiB taken",
                          what, d->digest, (long long)d->size, max >> 20);
    char want[PATH_MAX];
    blob_member_name(d->digest, want);
    _cleanup_(reader_done) struct reader rd = {0};
    int r = reader_open(&rd, im);
    while (r >= 0 && (r = reader_next(&rd)) > 0)
        if (strcmp(rd.name, want) == 0)
            break;
    if (r == 0)
        return errmsg_set(im->e, -EBADMSG, "the %s %s is not in the archive", what, d->digest);
    if (r < 0)
        return r;
    if (archive_entry_size(rd.entry) != d->size)
        return errmsg_set(im->e, -EBADMSG, "the %s %s has %lld bytes, its descriptor says %lld",
                          what, d->digest, (long long)archive_entry_size(rd.entry),
                          (long long)d->size);
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    r = reader_read_all(&rd, max, &data, &len);
    if (r >= 0)
        r = digest_check(d->digest, data, len, im->e);
    if (r < 0)
        return errmsg_prefix(im->e, r, "the %s", what);
    *ret = TAKE_PTR(data);
    *ret_len = len;
    return 0;
}

/* The image of an index to take: its only one, else the one for o->architecture. */
static int pick_image(struct import *im, const struct manifest *idx, const char *what,
                      const struct descriptor **ret)
{
    if (idx->n_manifests == 0)
        return errmsg_set(im->e, -EBADMSG, "%s names no image", what);
    if (idx->n_manifests == 1) {
        *ret = &idx->manifests[0];
        return 0;
    }
    if (!im->o->architecture)
        return errmsg_set(im->e, -ENOENT, "%s names %zu images and no architecture was given", what,
                          idx->n_manifests);
    *ret = manifest_index_select(idx, "linux", im->o->architecture, NULL, im->e);
    return *ret ? 0 : errmsg_prefix(im->e, -ENOENT, "%s", what);
}

struct image_manifest {
    struct manifest m;
    char *raw;
    size_t len;
    char digest[DIGEST_STRING_MAX];
};

static void image_manifest_done(struct image_manifest *im)
{
    manifest_done(&im->m);
    free(im->raw);
}

/* Reads and parses the manifest d names. */
static int load_manifest(struct import *im, const struct descriptor *d, struct image_manifest *ret)
{
    image_manifest_done(ret);
    *ret = (struct image_manifest){0};
    int r = read_blob(im, d, CAPSULE_MANIFEST_MAX, "manifest", &ret->raw, &ret->len);
    if (r < 0)
        return r;
    snprintf(ret->digest, sizeof(ret->digest), "%s", d->digest);
    r = manifest_parse(ret->raw, ret->len, d->media_type, &ret->m, im->e);
    return r < 0 ? errmsg_prefix(im->e, r, "%s", d->digest) : 0;
}

/* index.json to an image manifest, through one image index below it at the most (as `skopeo
 * copy --all` writes a multi-platform image). */
static int resolve_manifest(struct import *im, struct image_manifest *ret)
{
    struct manifest idx = {0};
    int r = manifest_parse(im->index, im->index_len, MEDIA_OCI_INDEX, &idx, im->e);
    if (r < 0)
        return errmsg_prefix(im->e, r, "%s", OCI_INDEX_NAME);
    const struct descriptor *d = NULL;
    if (idx.kind != MANIFEST_INDEX)
        r = errmsg_set(im->e, -EINVAL, "%s is not an image index", OCI_INDEX_NAME);
    else
        r = pick_image(im, &idx, OCI_INDEX_NAME, &d);
    if (r >= 0)
        r = load_manifest(im, d, ret);
    manifest_done(&idx);
    if (r < 0 || ret->m.kind == MANIFEST_IMAGE)
        return r;
    _cleanup_free_ char *what = NULL;
    if (asprintf(&what, "the image index %s", ret->digest) < 0)
        return errmsg_set(im->e, -ENOMEM, "out of memory");
    idx = ret->m;
    ret->m = (struct manifest){0};
    r = pick_image(im, &idx, what, &d);
    if (r >= 0)
        r = load_manifest(im, d, ret);
    manifest_done(&idx);
    if (r >= 0 && ret->m.kind != MANIFEST_IMAGE)
        r = errmsg_set(im->e, -EINVAL, "%s: its entry %s is an index too", what, ret->digest);
    return r;
}

/* Before anything is stored: the number of layers, and each one's declared size. */
static int check_layers(struct import *im, const struct manifest *m)
{
    if (m->n_layers > ARCHIVE_LAYERS_MAX)
        return errmsg_set(im->e, -EINVAL, "the image has %zu layers; more than %d are refused",
                          m->n_layers, ARCHIVE_LAYERS_MAX);
    for (size_t i = 0; i < m->n_layers; i++)
        if (im->o->max_layer_size && (uint64_t)m->layers[i].size > im->o->max_layer_size)
            return errmsg_set(im->e, -EFBIG,
                              "layer %zu of %zu (%s) has %lld bytes, more than max_layer_size "
                              "(%llu) allows",
                              i + 1, m->n_layers, m->layers[i].digest, (long long)m->layers[i].size,
                              (unsigned long long)im->o->max_layer_size);
    return 0;
}

/* The config: read, checked against the manifest (and the architecture asked for), stored. */
static int import_config(struct import *im, const struct manifest *m)
{
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    int r = read_blob(im, &m->config, CAPSULE_CONFIG_MAX, "config", &data, &len);
    if (r < 0)
        return r;
    struct image_config cfg = {0};
    r = image_config_parse(data, len, &cfg, im->e);
    if (r < 0)
        return errmsg_prefix(im->e, r, "%s", m->config.digest);
    if (cfg.n_diff_ids != m->n_layers)
        r = errmsg_set(im->e, -EINVAL, "the config lists %zu layers, the manifest %zu",
                       cfg.n_diff_ids, m->n_layers);
    else if (im->o->architecture && cfg.architecture && *cfg.architecture &&
             strcmp(cfg.architecture, im->o->architecture) != 0)
        r = errmsg_set(im->e, -ENOENT, "the image is for %s/%s, not linux/%s",
                       cfg.os && *cfg.os ? cfg.os : "?", cfg.architecture, im->o->architecture);
    image_config_done(&cfg);
    if (r < 0)
        return r;
    return store_blob_write(im->s, m->config.digest, data, len, im->e);
}

/* Copies the current member into the download, hashing it: -EBADMSG if the bytes are not the
 * digest's. */
static int copy_blob(struct reader *rd, struct store_download *dl, const struct descriptor *d)
{
    struct import *im = rd->im;
    _cleanup_(digest_freep) struct digest_ctx *c = NULL;
    int r = digest_begin(d->digest, &c, im->e);
    if (r < 0)
        return r;
    /* A pull that was interrupted may have left a partial file: the archive has it all. */
    if (ftruncate(dl->fd, 0) < 0 || lseek(dl->fd, 0, SEEK_SET) < 0)
        return errmsg_set(im->e, negative_errno(), "'%s': %m", dl->partial_path);
    for (;;) {
        la_ssize_t n = archive_read_data(rd->a, im->buf, sizeof(im->buf));
        if (n < 0)
            return reader_error(rd, rd->name);
        if (n == 0)
            break;
        digest_update(c, im->buf, (size_t)n);
        r = fd_write_all(dl->fd, im->buf, (size_t)n);
        if (r < 0)
            return errmsg_set(im->e, r, "cannot write '%s': %s", dl->partial_path, strerror(-r));
    }
    r = digest_verify(c, im->e);
    return r < 0 ? errmsg_prefix(im->e, r, "a layer") : 0;
}

/* The current member is the layer d: into the store, unless it is there already. */
static int import_layer(struct reader *rd, const struct descriptor *d)
{
    struct import *im = rd->im;
    /* A layer appears in layers/ whole (by rename), and gc waits for this import (it holds the
     * gc block throughout), so one that is there needs no lock. One that is not is made under
     * its make lock, and may appear while we wait for it. */
    if (store_has_layer(im->s, d->digest))
        return 0;
    _cleanup_close_ int lock_fd = -1;
    int r = store_layer_make_lock(im->s, d->digest, &lock_fd, im->e);
    if (r < 0 || store_has_layer(im->s, d->digest))
        return r;
    if (archive_entry_filetype(rd->entry) != AE_IFREG || archive_entry_hardlink(rd->entry))
        return errmsg_set(im->e, -EBADMSG, "member '%s' is not a regular file", rd->name);
    if (archive_entry_size(rd->entry) != d->size)
        return errmsg_set(im->e, -EBADMSG, "layer %s has %lld bytes, the manifest says %lld",
                          d->digest, (long long)archive_entry_size(rd->entry), (long long)d->size);
    struct store_download dl = {.fd = -1, .lock_fd = -1};
    r = store_download_begin(im->s, d->digest, &dl, im->e);
    if (r == 0) {
        r = copy_blob(rd, &dl, d);
        if (r < 0)
            store_download_abort(&dl, false);
        else
            r = store_download_commit(im->s, &dl, im->e);
    }
    if (r >= 0)
        r = store_layer_unpack(im->s, d->digest, im->o->max_unpacked_size, false, im->e);
    store_download_end(&dl);
    return r;
}

/* The layer of m that a member name is the blob of, or NULL. */
static const struct descriptor *member_layer(const struct manifest *m, const char *name)
{
    char digest[DIGEST_STRING_MAX];
    const char *rest = strncmp(name, "blobs/", 6) == 0 ? name + 6 : NULL;
    const char *slash = rest ? strchr(rest, '/') : NULL;
    if (!slash || snprintf(digest, sizeof(digest), "%.*s:%s", (int)(slash - rest), rest,
                           slash + 1) >= (int)sizeof(digest))
        return NULL;
    for (size_t i = 0; i < m->n_layers; i++)
        if (strcmp(m->layers[i].digest, digest) == 0)
            return &m->layers[i];
    return NULL;
}

/* The last pass: each layer not in the store yet is copied in and unpacked, in the order the
 * archive has them. */
static int import_layers(struct import *im, const struct manifest *m)
{
    _cleanup_(reader_done) struct reader rd = {0};
    int r = reader_open(&rd, im);
    while (r >= 0 && (r = reader_next(&rd)) > 0) {
        const struct descriptor *d = member_layer(m, rd.name);
        if (d && (r = import_layer(&rd, d)) < 0)
            return r;
    }
    if (r < 0)
        return r;
    for (size_t i = 0; i < m->n_layers; i++)
        if (!store_has_layer(im->s, m->layers[i].digest))
            return errmsg_set(im->e, -EBADMSG, "layer %zu of %zu (%s) is not in the archive", i + 1,
                              m->n_layers, m->layers[i].digest);
    return 0;
}

static int import_image(struct import *im, const char *name, struct image_record *rec)
{
    _cleanup_(image_manifest_done) struct image_manifest man = {0};
    int r = scan_members(im);
    if (r >= 0)
        r = resolve_manifest(im, &man);
    if (r >= 0)
        r = check_layers(im, &man.m);
    if (r < 0)
        return r;
    /* Until the record is saved, nothing references what this import stores: keep gc away. */
    _cleanup_close_ int gc_block = -1;
    r = store_gc_block(im->s, &gc_block, im->e);
    if (r >= 0)
        r = import_config(im, &man.m);
    if (r >= 0)
        r = store_blob_write(im->s, man.digest, man.raw, man.len, im->e);
    if (r >= 0)
        r = import_layers(im, &man.m);
    if (r >= 0 && image_record_fill(name, man.digest, &man.m, rec) < 0)
        r = errmsg_set(im->e, -ENOMEM, "out of memory");
    /* Last: only an import whose every layer is in place leaves a record behind. */
    if (r >= 0)
        r = store_image_save(im->s, rec, im->e);
    return r;
}

int archive_import(struct store *st, const char *archive_path, const char *name,
                   const struct archive_import_opts *o, struct image_record *ret, struct errmsg *e)
{
    static const struct archive_import_opts defaults = {0};
    if (!archive_path || !archive_path[0] || !name || !name[0])
        return errmsg_set(e, -EINVAL, "no image archive or no name to import it as");
    struct import *im = calloc(1, sizeof(*im));
    if (!im)
        return errmsg_set(e, -ENOMEM, "out of memory");
    *im = (struct import){.s = st, .path = archive_path, .o = o ? o : &defaults, .e = e};
    struct image_record rec = {0};
    int r = import_image(im, name, &rec);
    free(im->index);
    free(im);
    if (r < 0) {
        image_record_done(&rec);
        return errmsg_prefix(e, r, "image archive '%s'", archive_path);
    }
    if (ret)
        *ret = rec;
    else
        image_record_done(&rec);
    return 0;
}
