/* The content-addressed cache: layout, locks, blobs, downloads and layers. Image records are in
 * store-images.c, garbage collection in store-gc.c, tree removal in store-remove.c, what is
 * particular to a node store (its key and layer names) in store-node.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "capsule/image/digest.h"
#include "capsule/image/ref.h"
#include "lib/fileio.h"
#include "lib/rm-tree.h"
#include "capsule/store/store-private.h"

/* A per-user store's directories: 0777 less the umask, as found if they exist. */
static const struct store_dir store_dirs[] = {
    {"blobs", 0},  {"blobs/sha256", 0},  {"blobs/sha512", 0},
    {"layers", 0}, {"layers/sha256", 0}, {"layers/sha512", 0},
    {"images", 0}, {"tmp", 0},           {"locks", 0},
};

/* mkdir -p: the cache usually sits in ~/.cache, which a fresh account may not have yet. */
static int mkdir_parents(const char *path, mode_t mode)
{
    _cleanup_free_ char *p = strdup(path);
    if (!p)
        return -ENOMEM;
    for (char *slash = p + 1;; slash++) {
        slash = strchr(slash, '/');
        if (slash)
            *slash = '\0';
        if (p[0] && mkdir(p, mode) < 0 && errno != EEXIST)
            return negative_errno();
        if (!slash)
            return 0;
        *slash = '/';
    }
}

/* The umask, read from /proc: umask(2) can only be read by setting it, which would race with
 * threads that create files meanwhile. */
static mode_t current_umask(void)
{
    _cleanup_fclose_ FILE *f = fopen("/proc/self/status", "re");
    char line[256];
    unsigned m;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "Umask: %o", &m) == 1)
            return (mode_t)m & 0777;
    return 022;
}

/* Gives the directory dfd mode unless it has it already (so that a store opened by someone
 * who may not chmod it, but finds it right, still opens). */
static int enforce_mode(int dfd, mode_t mode)
{
    struct stat st;
    if (fstat(dfd, &st) < 0)
        return negative_errno();
    if ((st.st_mode & 07777) != mode && fchmod(dfd, mode) < 0)
        return negative_errno();
    return 0;
}

static int make_dir(struct store *s, const struct store_dir *d, struct errmsg *e)
{
    if (mkdirat(s->root_fd, d->name, d->mode ? d->mode : 0777) < 0 && errno != EEXIST)
        return errmsg_set(e, negative_errno(), "cache directory '%s/%s': %m", s->root, d->name);
    if (!d->mode)
        return 0;
    _cleanup_close_ int fd =
        openat(s->root_fd, d->name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int r = fd < 0 ? negative_errno() : enforce_mode(fd, d->mode);
    if (r < 0)
        return errmsg_set(e, r, "cache directory '%s/%s': %s", s->root, d->name, strerror(-r));
    return 0;
}

int store_open_layout(const char *root, mode_t root_mode, const struct store_dir *dirs, size_t n,
                      struct store **ret, struct errmsg *e)
{
    if (!root || !root[0])
        return errmsg_set(e, -EINVAL, "no cache directory configured");
    int r = mkdir_parents(root, root_mode ? 0755 : 0777);
    if (r < 0)
        return errmsg_set(e, r, "cache directory '%s': %s", root, strerror(-r));
    struct store *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->root_fd = -1;
    s->file_mode = 0666 & ~current_umask();
    _cleanup_(store_freep) struct store *guard = s;
    s->root = realpath(root, NULL);
    if (!s->root)
        return errmsg_set(e, negative_errno(), "cache directory '%s': %m", root);
    s->root_fd = open(s->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (s->root_fd < 0)
        return errmsg_set(e, negative_errno(), "cache directory '%s': %m", s->root);
    if (root_mode && (r = enforce_mode(s->root_fd, root_mode)) < 0)
        return errmsg_set(e, r, "cache directory '%s': %s", s->root, strerror(-r));
    for (size_t i = 0; i < n; i++)
        if ((r = make_dir(s, &dirs[i], e)) < 0)
            return r;
    *ret = TAKE_PTR(guard);
    return 0;
}

int store_open(const char *root, struct store **ret, struct errmsg *e)
{
    /* Directories and files get 0777/0666 less the umask, so a group can share a cache. */
    return store_open_layout(root, 0, store_dirs, ELEMENTSOF(store_dirs), ret, e);
}

void store_free(struct store *s)
{
    if (!s)
        return;
    if (s->root_fd >= 0)
        close(s->root_fd);
    free(s->origin);
    free(s->root);
    explicit_bzero(s->node_key, sizeof(s->node_key));
    free(s);
}

const char *store_root(const struct store *s)
{
    return s->root;
}

bool store_is_node(const struct store *s)
{
    return s->layer_name != NULL;
}

static int lease_lock(int fd, short type, bool wait)
{
    struct flock l = {.l_type = type, .l_whence = SEEK_SET};
    while (fcntl(fd, wait ? F_OFD_SETLKW : F_OFD_SETLK, &l) < 0)
        if (errno != EINTR)
            return negative_errno();
    return 0;
}

static int lease_open(const char *path, int flags)
{
    char lease[PATH_MAX];
    if (snprintf(lease, sizeof(lease), "%s" STORE_LEASE_SUFFIX, path) >= (int)sizeof(lease))
        return -ENAMETOOLONG;
    int fd = open(lease, flags | O_NOFOLLOW | O_CLOEXEC, 0644);
    return fd < 0 ? negative_errno() : fd;
}

int store_node_layer_hold(const char *path, int *ret_fd)
{
    _cleanup_close_ int fd = lease_open(path, O_RDONLY);
    if (fd < 0)
        return fd;
    int r = lease_lock(fd, F_RDLCK, true);
    if (r < 0)
        return r;
    /* gc removes the layer, then its lease, under the write lock: the lock may be on one that
     * is gone. */
    struct stat lease, dir;
    if (fstat(fd, &lease) < 0 || stat(path, &dir) < 0)
        return errno == ENOENT ? -ENOENT : negative_errno();
    if (lease.st_nlink == 0 || !S_ISDIR(dir.st_mode))
        return -ENOENT;
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int store_node_layer_busy(const char *path, int *ret_fd)
{
    _cleanup_close_ int fd = lease_open(path, O_RDWR);
    if (fd == -ENOENT)
        return 0; /* handed out to nobody yet */
    if (fd < 0)
        return fd;
    int r = lease_lock(fd, F_WRLCK, false);
    if (r == -EAGAIN || r == -EACCES)
        return 1;
    if (r < 0)
        return r;
    if (ret_fd)
        *ret_fd = TAKE_FD(fd);
    return 0;
}

int store_node_layer_lease(const char *path, struct errmsg *e)
{
    int fd = lease_open(path, O_RDONLY | O_CREAT);
    if (fd < 0)
        return errmsg_set(e, fd, "%s" STORE_LEASE_SUFFIX ": %s", path, strerror(-fd));
    /* Readable by all, whatever the umask: the users who run the layer lock it. */
    int r = fchmod(fd, 0644) < 0 ? negative_errno() : 0;
    close(fd);
    return r < 0 ? errmsg_set(e, r, "%s" STORE_LEASE_SUFFIX ": %s", path, strerror(-r)) : 0;
}

uint64_t store_node_layer_size(const char *path)
{
    char buf[32];
    ssize_t n = getxattr(path, STORE_NODE_SIZE_XATTR, buf, sizeof(buf) - 1);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return strtoull(buf, NULL, 10);
}

int store_node_layer_note_size(const char *dir, uint64_t bytes, struct errmsg *e)
{
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%llu", (unsigned long long)bytes);
    if (setxattr(dir, STORE_NODE_SIZE_XATTR, buf, (size_t)n, 0) < 0)
        return errmsg_set(e, negative_errno(), "%s: cannot note its size: %m", dir);
    return 0;
}

int store_layer_name_from(const struct store *s, const char *origin, const char *digest,
                          char name[STORE_LAYER_NAME_MAX])
{
    if (!digest_valid(digest))
        return -EINVAL;
    if (s->layer_name)
        return s->layer_name(s, origin, digest, name);
    snprintf(name, STORE_LAYER_NAME_MAX, "%s", digest_hex(digest));
    return 0;
}

int store_layer_name(const struct store *s, const char *digest, char name[STORE_LAYER_NAME_MAX])
{
    return store_layer_name_from(s, s->origin, digest, name);
}

int store_record_origin(const struct image_record *r, char **ret)
{
    struct image_ref ref = {0};
    struct errmsg e;
    *ret = NULL;
    if (image_ref_parse(r->name, &ref, &e) < 0)
        return 0;
    *ret = TAKE_PTR(ref.registry);
    image_ref_done(&ref);
    return *ret ? 0 : -ENOMEM;
}

/* A layer's entry: kind/ALGO/HEX in a per-user store; in a node store keyed_dir/NAME, the
 * layer's own name (keyed by its registry). */
static int keyed_rel(const struct store *s, const char *kind, const char *keyed_dir,
                     const char *digest, char *buf, size_t size)
{
    if (!s->layer_name)
        return store_rel_path(kind, digest, buf, size);
    char name[STORE_LAYER_NAME_MAX];
    int r = store_layer_name(s, digest, name);
    if (r < 0)
        return r;
    return snprintf(buf, size, "%s/%s", keyed_dir, name) >= (int)size ? -ENAMETOOLONG : 0;
}

int store_layer_rel(const struct store *s, const char *digest, char *buf, size_t size)
{
    return keyed_rel(s, "layers", "layers", digest, buf, size);
}

int store_rel_path(const char *kind, const char *digest, char *buf, size_t size)
{
    if (!digest_valid(digest))
        return -EINVAL;
    int algo_len = (int)(strchr(digest, ':') - digest);
    int n = snprintf(buf, size, "%s/%.*s/%s", kind, algo_len, digest, digest_hex(digest));
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}

/* A layer's blob as its download and unpack name it. Keyed by the layer's name in a node
 * store, so that bytes one registry served never count for another (a blob left by an unpack
 * that failed, a partial download). */
static int layer_blob_rel(const struct store *s, const char *digest, char *rel, size_t size)
{
    return keyed_rel(s, "blobs", "blobs/sha256", digest, rel, size);
}

static int entry_rel(const struct store *s, const char *kind, const char *digest, char *rel,
                     size_t size)
{
    if (strcmp(kind, "layers") == 0)
        return store_layer_rel(s, digest, rel, size);
    if (strcmp(kind, "layer-blobs") == 0)
        return layer_blob_rel(s, digest, rel, size);
    return store_rel_path(kind, digest, rel, size);
}

static int abs_path(const struct store *s, const char *kind, const char *digest, char **ret)
{
    char rel[PATH_MAX];
    int r = entry_rel(s, kind, digest, rel, sizeof(rel));
    if (r < 0)
        return r;
    char *p;
    if (asprintf(&p, "%s/%s", s->root, rel) < 0)
        return -ENOMEM;
    *ret = p;
    return 0;
}

static bool has_entry(const struct store *s, const char *kind, const char *digest, mode_t type)
{
    char rel[PATH_MAX];
    struct stat st;
    int r = entry_rel(s, kind, digest, rel, sizeof(rel));
    return r >= 0 && fstatat(s->root_fd, rel, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           (st.st_mode & S_IFMT) == type;
}

int store_lock(struct store *s, const char *name, int op, int *ret_fd)
{
    char rel[PATH_MAX];
    if (snprintf(rel, sizeof(rel), "locks/%s", name) >= (int)sizeof(rel))
        return -ENAMETOOLONG;
    /* Read-only is enough for flock(2), and lets users of a shared cache lock files that
     * another user created. */
    _cleanup_close_ int fd =
        openat(s->root_fd, rel, O_RDONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0)
        return negative_errno();
    while (flock(fd, op) < 0)
        if (errno != EINTR)
            return negative_errno();
    *ret_fd = TAKE_FD(fd);
    return 0;
}

int store_read_file(int dfd, const char *rel, size_t max, char **ret, size_t *ret_len)
{
    _cleanup_close_ int fd = openat(dfd, rel, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return negative_errno();
    struct stat st;
    if (fstat(fd, &st) < 0)
        return negative_errno();
    if (!S_ISREG(st.st_mode))
        return -EBADMSG;
    if ((uint64_t)st.st_size > max)
        return -EFBIG;
    /* The size limit holds even if the file grows while it is read. */
    return fd_read_all(fd, max, ret, ret_len);
}

int store_write_atomic(struct store *s, const char *rel, const void *data, size_t len,
                       struct errmsg *e)
{
    return store_write_atomic_mode(s, rel, data, len, s->file_mode, e);
}

int store_write_atomic_mode(struct store *s, const char *rel, const void *data, size_t len,
                            mode_t mode, struct errmsg *e)
{
    _cleanup_free_ char *tmp = NULL;
    if (asprintf(&tmp, "%s/tmp/write.XXXXXX", s->root) < 0)
        return -ENOMEM;
    _cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "cannot create a file in '%s/tmp': %m", s->root);
    int r = fd_write_all(fd, data, len);
    if (r >= 0 && (fchmod(fd, mode) < 0 || fsync(fd) < 0))
        r = negative_errno();
    if (r >= 0 && renameat(AT_FDCWD, tmp, s->root_fd, rel) < 0)
        r = negative_errno();
    if (r < 0) {
        unlink(tmp);
        return errmsg_set(e, r, "cannot write '%s/%s': %s", s->root, rel, strerror(-r));
    }
    return 0;
}

/* ---- blobs ---- */

int store_blob_path(const struct store *s, const char *digest, char **ret)
{
    return abs_path(s, "blobs", digest, ret);
}

bool store_has_blob(const struct store *s, const char *digest)
{
    return has_entry(s, "blobs", digest, S_IFREG);
}

int store_blob_read(const struct store *s, const char *digest, size_t max, char **ret_data,
                    size_t *ret_len, struct errmsg *e)
{
    char rel[PATH_MAX];
    if (store_rel_path("blobs", digest, rel, sizeof(rel)) < 0)
        return errmsg_set(e, -EINVAL, "'%.80s' is not a valid digest", digest);
    size_t len;
    int r = store_read_file(s->root_fd, rel, max, ret_data, &len);
    if (r == -ENOENT)
        return errmsg_set(e, r, "blob %s is not in the cache", digest);
    if (r == -EFBIG)
        return errmsg_set(e, r, "blob %s is larger than %zu bytes", digest, max);
    if (r < 0)
        return errmsg_set(e, r, "blob '%s/%s': %s", s->root, rel, strerror(-r));
    if (ret_len)
        *ret_len = len;
    return 0;
}

static int remove_entry(struct store *s, const char *kind, const char *digest)
{
    char rel[PATH_MAX];
    int r = entry_rel(s, kind, digest, rel, sizeof(rel));
    if (r < 0)
        return r;
    if (unlinkat(s->root_fd, rel, 0) < 0 && errno != ENOENT)
        return negative_errno();
    return 0;
}

int store_blob_remove(struct store *s, const char *digest)
{
    return remove_entry(s, "blobs", digest);
}

int store_layer_blob_path(const struct store *s, const char *digest, char **ret)
{
    return abs_path(s, "layer-blobs", digest, ret);
}

bool store_has_layer_blob(const struct store *s, const char *digest)
{
    return has_entry(s, "layer-blobs", digest, S_IFREG);
}

int store_layer_blob_remove(struct store *s, const char *digest)
{
    return remove_entry(s, "layer-blobs", digest);
}

/* ---- downloads ---- */

static void download_release(struct store_download *d)
{
    if (d->fd >= 0)
        close(d->fd);
    if (d->lock_fd >= 0)
        close(d->lock_fd);
    free(d->digest);
    free(d->partial_path);
    *d = (struct store_download){.fd = -1, .lock_fd = -1};
}

/* Locks and opens tmp/<hex>.partial; the lock has its own file so that the partial can be
 * renamed or deleted while someone waits for it. */
static int download_open(struct store *s, const char *digest, struct store_download *d,
                         struct errmsg *e)
{
    char key[STORE_LAYER_NAME_MAX], name[PATH_MAX];
    int r = store_layer_name(s, digest, key);
    if (r < 0)
        return errmsg_set(e, r, "layer %s: cannot compute its name: %s", digest, strerror(-r));
    snprintf(name, sizeof(name), "%s" STORE_BLOB_LOCK_SUFFIX, key);
    r = store_lock(s, name, LOCK_EX, &d->lock_fd);
    if (r < 0)
        return errmsg_set(e, r, "cannot lock '%s/locks/%s': %s", s->root, name, strerror(-r));
    if (store_has_layer_blob(s, digest))
        return 1; /* there already, or the process we waited for finished it */
    if (asprintf(&d->partial_path, "%s/tmp/%s.partial", s->root, key) < 0 ||
        !(d->digest = strdup(digest)))
        return -ENOMEM;
    d->fd = open(d->partial_path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (d->fd < 0)
        return errmsg_set(e, negative_errno(), "cannot open '%s': %m", d->partial_path);
    d->offset = lseek(d->fd, 0, SEEK_END);
    if (d->offset < 0)
        return errmsg_set(e, negative_errno(), "cannot seek in '%s': %m", d->partial_path);
    return 0;
}

int store_download_begin(struct store *s, const char *digest, struct store_download *ret,
                         struct errmsg *e)
{
    if (!digest_valid(digest))
        return errmsg_set(e, -EINVAL, "'%.80s' is not a valid digest", digest);
    struct store_download d = {.fd = -1, .lock_fd = -1};
    int r = download_open(s, digest, &d, e);
    if (r < 0) {
        download_release(&d);
        return r;
    }
    /* Complete or not, the blob is the caller's until store_download_end: gc leaves it. */
    *ret = d;
    return r;
}

int store_download_commit(struct store *s, struct store_download *d, struct errmsg *e)
{
    char rel[PATH_MAX], dir[PATH_MAX];
    int r = layer_blob_rel(s, d->digest, rel, sizeof(rel));
    if (r >= 0 && fsync(d->fd) < 0)
        r = errmsg_set(e, negative_errno(), "cannot write '%s': %m", d->partial_path);
    else if (r >= 0 && renameat(AT_FDCWD, d->partial_path, s->root_fd, rel) < 0)
        r = errmsg_set(e, negative_errno(), "cannot move '%s' into the cache: %m", d->partial_path);
    if (r >= 0) {
        /* The rename itself must survive a crash, or the blob is fetched again. */
        snprintf(dir, sizeof(dir), "%.*s", (int)(strrchr(rel, '/') - rel), rel);
        int dfd = openat(s->root_fd, dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
            (void)fsync(dfd);
            close(dfd);
        }
    }
    /* The lock stays: the blob is still to be unpacked, and gc must leave it till then. */
    close(d->fd);
    d->fd = -1;
    return r;
}

void store_download_end(struct store_download *d)
{
    download_release(d);
}

void store_download_abort(struct store_download *d, bool keep_partial)
{
    /* Only the holder of the lock may touch the partial file. */
    if (!keep_partial && d->partial_path && d->lock_fd >= 0)
        (void)unlink(d->partial_path);
    download_release(d);
}

/* ---- layers ---- */

int store_layer_path(const struct store *s, const char *digest, char **ret)
{
    return abs_path(s, "layers", digest, ret);
}

bool store_has_layer(const struct store *s, const char *digest)
{
    return has_entry(s, "layers", digest, S_IFDIR);
}

/* Locks locks/<layer name><suffix> with op. */
static int layer_lock(struct store *s, const char *digest, const char *suffix, int op, int *ret_fd,
                      struct errmsg *e)
{
    char layer[STORE_LAYER_NAME_MAX], name[PATH_MAX];
    int r = store_layer_name(s, digest, layer);
    if (r == -EINVAL)
        return errmsg_set(e, -EINVAL, "'%.80s' is not a valid digest", digest);
    if (r < 0)
        return errmsg_set(e, r, "layer %s: cannot compute its name: %s", digest, strerror(-r));
    snprintf(name, sizeof(name), "%s%s", layer, suffix);
    r = store_lock(s, name, op, ret_fd);
    if (r == -EWOULDBLOCK)
        return errmsg_set(e, r, "layer %s is in use by another process", digest);
    if (r < 0)
        return errmsg_set(e, r, "cannot lock '%s/locks/%s': %s", s->root, name, strerror(-r));
    return 0;
}

int store_layer_lock(struct store *s, const char *digest, bool exclusive, bool wait, int *ret_fd,
                     struct errmsg *e)
{
    return layer_lock(s, digest, ".lock", (exclusive ? LOCK_EX : LOCK_SH) | (wait ? 0 : LOCK_NB),
                      ret_fd, e);
}

int store_layer_make_lock(struct store *s, const char *digest, int *ret_fd, struct errmsg *e)
{
    return layer_lock(s, digest, STORE_MAKE_LOCK_SUFFIX, LOCK_EX, ret_fd, e);
}

int store_layer_tmpdir(struct store *s, const char *digest, char **ret, struct errmsg *e)
{
    /* Named like the layer's lock, which gc finds through the name. */
    char layer[STORE_LAYER_NAME_MAX];
    int r = store_layer_name(s, digest, layer);
    if (r == -EINVAL)
        return errmsg_set(e, -EINVAL, "'%.80s' is not a valid digest", digest);
    if (r < 0)
        return errmsg_set(e, r, "layer %s: cannot compute its name: %s", digest, strerror(-r));
    _cleanup_free_ char *p = NULL;
    if (asprintf(&p, "%s/tmp/%s.XXXXXX", s->root, layer) < 0)
        return -ENOMEM;
    if (!mkdtemp(p))
        return errmsg_set(e, negative_errno(), "cannot create a directory in '%s/tmp': %m",
                          s->root);
    /* The layer's root becomes a lower directory's root: readable like any other. */
    if (chmod(p, 0755) < 0) {
        r = negative_errno();
        rmdir(p);
        return errmsg_set(e, r, "cannot chmod '%s': %s", p, strerror(-r));
    }
    *ret = TAKE_PTR(p);
    return 0;
}

int store_layer_commit(struct store *s, const char *digest, const char *tmpdir, struct errmsg *e)
{
    char rel[PATH_MAX];
    if (store_layer_rel(s, digest, rel, sizeof(rel)) < 0)
        return errmsg_set(e, -EINVAL, "'%.80s' is not a valid digest", digest);
    if (renameat2(AT_FDCWD, tmpdir, s->root_fd, rel, RENAME_NOREPLACE) == 0)
        return 0;
    int r = negative_errno();
    if (r == -EINVAL) {
        /* A filesystem without RENAME_NOREPLACE; the lock keeps others out meanwhile. */
        if (store_has_layer(s, digest))
            r = -EEXIST;
        else if (renameat(AT_FDCWD, tmpdir, s->root_fd, rel) == 0)
            return 0;
        else
            r = negative_errno();
    }
    if (r == -EEXIST || r == -ENOTEMPTY) {
        /* Another unpack won (only possible without the lock); its result is as good. */
        r = rm_tree(tmpdir);
        return r < 0 ? errmsg_set(e, r, "cannot remove '%s': %s", tmpdir, strerror(-r)) : 0;
    }
    return errmsg_set(e, r, "cannot move '%s' into the cache: %s", tmpdir, strerror(-r));
}

int store_gc_block(struct store *s, int *ret_fd, struct errmsg *e)
{
    int r = store_lock(s, STORE_GC_LOCK, LOCK_SH, ret_fd);
    if (r < 0)
        return errmsg_set(e, r, "cannot lock '%s/locks/%s': %s", s->root, STORE_GC_LOCK,
                          strerror(-r));
    return 0;
}

int store_pull_block(struct store *s, int *ret_fd, struct errmsg *e)
{
    int r = store_lock(s, STORE_PULLS_LOCK, LOCK_SH, ret_fd);
    if (r < 0)
        return errmsg_set(e, r, "cannot lock '%s/locks/%s': %s", s->root, STORE_PULLS_LOCK,
                          strerror(-r));
    return 0;
}
