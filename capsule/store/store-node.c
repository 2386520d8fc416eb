/* What is particular to a node store (store_open_node): its layout's modes, its key, and layer
 * names that are HMACs of the digests under that key. In a file of its own because it links
 * libcrypto, which capsule, opening per-user stores only, must not load (cli.h); store.c reaches
 * the HMAC through struct store's layer_name. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "lib/fileio.h"
#include "lib/macro.h"
#include "capsule/store/store-private.h"

#define NODE_KEY_FILE "node.key"

/* Users traverse the root and layers/ to reach a layer whose path they were given, and can list
 * neither; everything else is the service's alone. */
static const struct store_dir node_dirs[] = {
    {"blobs", 0700},  {"blobs/sha256", 0700}, {"blobs/sha512", 0700}, {"layers", 0711},
    {"images", 0700}, {"tmp", 0700},          {"locks", 0700},
};

/* HMAC-SHA256(key, digest), or HMAC-SHA256(key, origin "\n" digest) for a layer from registry
 * origin: the same bytes from two registries are two layers, so that a registry can vouch only
 * for what came from it (a HEAD answered by another registry proves nothing about this one's). */
static int node_layer_name(const struct store *s, const char *origin, const char *digest,
                           char name[STORE_LAYER_NAME_MAX])
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned len = 0;
    _cleanup_free_ char *scoped = NULL;
    if (origin && asprintf(&scoped, "%s\n%s", origin, digest) < 0)
        return -ENOMEM;
    const char *input = scoped ? scoped : digest;
    if (!HMAC(EVP_sha256(), s->node_key, sizeof(s->node_key), (const unsigned char *)input,
              strlen(input), mac, &len) ||
        len != 32)
        return -EIO;
    for (unsigned i = 0; i < len; i++)
        snprintf(name + 2 * i, 3, "%02x", mac[i]);
    return 0;
}

/* Reads node.key into s->node_key. -ENOENT if there is none yet. */
static int node_key_read(struct store *s, struct errmsg *e)
{
    _cleanup_close_ int fd = openat(s->root_fd, NODE_KEY_FILE, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return -ENOENT;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0)
        return errmsg_set(e, negative_errno(), "node cache key '%s/%s': %m", s->root,
                          NODE_KEY_FILE);
    if (!S_ISREG(st.st_mode))
        return errmsg_set(e, -EBADMSG, "node cache key '%s/%s' is not a regular file", s->root,
                          NODE_KEY_FILE);
    /* Whoever reads the key finds every layer: a key others could read is no key. */
    if (st.st_mode & 077)
        return errmsg_set(e, -EPERM,
                          "node cache key '%s/%s' may be read by others (mode %04o); make it "
                          "0600, then rename the layers under a new key",
                          s->root, NODE_KEY_FILE, (unsigned)(st.st_mode & 07777));
    unsigned char buf[STORE_NODE_KEY_LEN + 1];
    size_t len = 0;
    int r = fd_read_up_to(fd, buf, sizeof(buf), &len);
    if (r >= 0 && len == STORE_NODE_KEY_LEN)
        memcpy(s->node_key, buf, STORE_NODE_KEY_LEN);
    explicit_bzero(buf, sizeof(buf));
    if (r < 0)
        return errmsg_set(e, r, "node cache key '%s/%s': %s", s->root, NODE_KEY_FILE, strerror(-r));
    if (len != STORE_NODE_KEY_LEN)
        return errmsg_set(e, -EBADMSG,
                          "node cache key '%s/%s' holds %s%zu bytes, not %d; remove it to make a "
                          "new one (every layer is then unpacked again)",
                          s->root, NODE_KEY_FILE, len > STORE_NODE_KEY_LEN ? "more than " : "",
                          len > STORE_NODE_KEY_LEN ? (size_t)STORE_NODE_KEY_LEN : len,
                          STORE_NODE_KEY_LEN);
    return 0;
}

static int random_bytes(unsigned char *buf, size_t len)
{
    for (size_t done = 0; done < len;) {
        ssize_t n = getrandom(buf + done, len - done, 0);
        if (n < 0 && errno != EINTR)
            return negative_errno();
        done += n > 0 ? (size_t)n : 0;
    }
    return 0;
}

/* Writes key under tmp/ and links it to node.key unless that appeared meanwhile (link(2) never
 * replaces, so of services starting at once one key wins and all read that one), or renames it
 * over node.key if replace. */
static int node_key_write(struct store *s, const unsigned char key[STORE_NODE_KEY_LEN],
                          bool replace, struct errmsg *e)
{
    const char *name = NODE_KEY_FILE;
    _cleanup_free_ char *tmp = NULL;
    if (asprintf(&tmp, "%s/tmp/node.key.XXXXXX", s->root) < 0)
        return -ENOMEM;
    _cleanup_close_ int fd = mkostemp(tmp, O_CLOEXEC); /* 0600 */
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "cannot create a file in '%s/tmp': %m", s->root);
    int r = fd_write_all(fd, key, STORE_NODE_KEY_LEN);
    if (r >= 0 && fsync(fd) < 0)
        r = negative_errno();
    if (r >= 0 && replace && renameat(AT_FDCWD, tmp, s->root_fd, name) < 0)
        r = negative_errno();
    if (r >= 0 && !replace && linkat(AT_FDCWD, tmp, s->root_fd, name, 0) < 0 && errno != EEXIST)
        r = negative_errno();
    (void)unlink(tmp);
    if (r >= 0)
        (void)fsync(s->root_fd);
    if (r < 0)
        return errmsg_set(e, r, "cannot write the node cache key '%s/%s': %s", s->root, name,
                          strerror(-r));
    return 0;
}

int store_node_state_write(struct store *s, const char *name, const char *data, size_t len,
                           struct errmsg *e)
{
    if (!store_is_node(s) || strchr(name, '/'))
        return errmsg_set(e, -EINVAL, "'%s' is no state file of a node cache", name);
    _cleanup_close_ int block = -1;
    int r = store_gc_block(s, &block, e);
    return r < 0 ? r : store_write_atomic_mode(s, name, data, len, 0600, e);
}

int store_node_state_read(struct store *s, const char *name, size_t max, char **ret,
                          size_t *ret_len)
{
    if (!store_is_node(s) || strchr(name, '/'))
        return -EINVAL;
    return store_read_file(s->root_fd, name, max, ret, ret_len);
}

int store_node_view(const struct store *s, const char *origin, struct store **ret, struct errmsg *e)
{
    if (!s->layer_name)
        return errmsg_set(e, -EINVAL, "'%s' is not a node cache", s->root);
    _cleanup_(store_freep) struct store *v = calloc(1, sizeof(*v));
    if (!v)
        return errmsg_set(e, -ENOMEM, "out of memory");
    v->root_fd = fcntl(s->root_fd, F_DUPFD_CLOEXEC, 3);
    if (v->root_fd < 0)
        return errmsg_set(e, negative_errno(), "cache directory '%s': %m", s->root);
    if (!(v->root = strdup(s->root)) || !(v->origin = strdup(origin)))
        return errmsg_set(e, -ENOMEM, "out of memory");
    v->file_mode = s->file_mode;
    v->layer_name = s->layer_name;
    memcpy(v->node_key, s->node_key, sizeof(v->node_key));
    *ret = TAKE_PTR(v);
    return 0;
}

int store_open_node(const char *root, struct store **ret, struct errmsg *e)
{
    _cleanup_(store_freep) struct store *s = NULL;
    int r = store_open_layout(root, 0711, node_dirs, ELEMENTSOF(node_dirs), &s, e);
    if (r < 0)
        return r;
    /* Records and blobs are the service's; nobody else reads them. */
    s->file_mode = 0600;
    r = node_key_read(s, e);
    if (r == -ENOENT) {
        unsigned char key[STORE_NODE_KEY_LEN];
        r = random_bytes(key, sizeof(key));
        if (r < 0)
            return errmsg_set(e, r, "cannot make a node cache key: getrandom: %s", strerror(-r));
        r = node_key_write(s, key, false, e);
        explicit_bzero(key, sizeof(key));
        if (r >= 0)
            r = node_key_read(s, e);
    }
    if (r < 0)
        return r;
    s->layer_name = node_layer_name;
    *ret = TAKE_PTR(s);
    return 0;
}

/* ---- rekeying ---- */

/* One referenced layer's names under the old and the new key. */
struct rekey_move {
    char from[STORE_LAYER_NAME_MAX], to[STORE_LAYER_NAME_MAX];
};

/* The layers that image records reference, each once, with their names under both keys. */
static int rekey_plan(struct store *s, const struct store *next, struct rekey_move **ret,
                      size_t *ret_n, struct errmsg *e)
{
    struct image_record *images = NULL;
    size_t n_images = 0, n = 0, max = 0;
    int r = store_image_list(s, &images, &n_images, e);
    if (r < 0)
        return r;
    for (size_t i = 0; i < n_images; i++)
        max += images[i].n_layers;
    struct rekey_move *moves = calloc(max + 1, sizeof(*moves));
    if (!moves)
        r = -ENOMEM;
    for (size_t i = 0; r >= 0 && i < n_images; i++) {
        char *origin = NULL;
        if ((r = store_record_origin(&images[i], &origin)) < 0)
            break;
        for (size_t k = 0; r >= 0 && k < images[i].n_layers; k++) {
            const char *d = images[i].layers[k];
            if ((r = store_layer_name_from(s, origin, d, moves[n].from)) < 0 ||
                (r = store_layer_name_from(next, origin, d, moves[n].to)) < 0)
                break;
            bool seen = false;
            for (size_t j = 0; j < n && !seen; j++)
                seen = strcmp(moves[j].from, moves[n].from) == 0;
            n += !seen;
        }
        free(origin);
    }
    for (size_t i = 0; i < n_images; i++)
        image_record_done(&images[i]);
    free(images);
    if (r < 0) {
        free(moves);
        return r == -ENOMEM ? r : errmsg_set(e, r, "cannot compute layer names: %s", strerror(-r));
    }
    *ret = moves;
    *ret_n = n;
    return 0;
}

/* Renames layers/<from> to layers/<to> (or back); 1 if it was there, 0 if not. */
static int rekey_rename(struct store *s, const char *from, const char *to)
{
    char a[PATH_MAX], b[PATH_MAX];
    snprintf(a, sizeof(a), "layers/%s", from);
    snprintf(b, sizeof(b), "layers/%s", to);
    if (renameat(s->root_fd, a, s->root_fd, b) < 0)
        return errno == ENOENT ? 0 : negative_errno();
    /* Its lease goes with it: containers that run on it keep their locks, on the same inode. */
    snprintf(a, sizeof(a), "layers/%s" STORE_LEASE_SUFFIX, from);
    snprintf(b, sizeof(b), "layers/%s" STORE_LEASE_SUFFIX, to);
    if (renameat(s->root_fd, a, s->root_fd, b) < 0 && errno != ENOENT)
        return negative_errno();
    return 1;
}

static int rekey_apply(struct store *s, const unsigned char key[STORE_NODE_KEY_LEN],
                       const struct rekey_move *moves, size_t n, struct errmsg *e)
{
    size_t done = 0;
    int r = 0, renamed = 0;
    for (; done < n; done++) {
        r = rekey_rename(s, moves[done].from, moves[done].to);
        if (r < 0)
            break;
        renamed += r;
    }
    if (r >= 0)
        r = node_key_write(s, key, true, e);
    else
        r = errmsg_set(e, r, "cannot rename '%s/layers/%s': %s", s->root, moves[done].from,
                       strerror(-r));
    if (r < 0) {
        /* Back under the old key, which stays: nothing changed for anyone. */
        while (done-- > 0)
            (void)rekey_rename(s, moves[done].to, moves[done].from);
        return r;
    }
    memcpy(s->node_key, key, STORE_NODE_KEY_LEN);
    return renamed;
}

int store_node_rekey(struct store *s, struct errmsg *e)
{
    if (!store_is_node(s))
        return errmsg_set(e, -EINVAL, "'%s' is not a node cache: it has no key", s->root);
    _cleanup_close_ int pulls = -1, gc = -1;
    int r = store_lock(s, STORE_PULLS_LOCK, LOCK_EX | LOCK_NB, &pulls);
    if (r == -EWOULDBLOCK)
        return errmsg_set(e, -EBUSY, "a pull into '%s' is in progress; rekey when it is done",
                          s->root);
    if (r < 0)
        return errmsg_set(e, r, "cannot lock '%s/locks/%s': %s", s->root, STORE_PULLS_LOCK,
                          strerror(-r));
    /* And no gc: it computes names with the key. */
    r = store_lock(s, STORE_GC_LOCK, LOCK_EX, &gc);
    if (r < 0)
        return errmsg_set(e, r, "cannot lock '%s/locks/%s': %s", s->root, STORE_GC_LOCK,
                          strerror(-r));
    /* A second store value carries the new key, so that names under both can be computed. */
    struct store next = *s;
    r = random_bytes(next.node_key, sizeof(next.node_key));
    if (r < 0)
        return errmsg_set(e, r, "cannot make a node cache key: getrandom: %s", strerror(-r));
    _cleanup_free_ struct rekey_move *moves = NULL;
    size_t n = 0;
    r = rekey_plan(s, &next, &moves, &n, e);
    if (r >= 0)
        r = rekey_apply(s, next.node_key, moves, n, e);
    explicit_bzero(next.node_key, sizeof(next.node_key));
    return r;
}
