/* Blob reads and writes that hash what they read or write: the pull side of the store. Kept
 * apart from store.c because hashing links OpenSSL, which `capsule run` must not load (cli.h). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capsule/image/digest.h"
#include "capsule/store/store-private.h"
#include "capsule/store/store.h"

int store_blob_read_verified(const struct store *s, const char *digest, size_t max, char **ret_data,
                             size_t *ret_len, struct errmsg *e)
{
    _cleanup_free_ char *data = NULL;
    size_t len;
    int r = store_blob_read(s, digest, max, &data, &len, e);
    if (r < 0)
        return r;
    r = digest_check(digest, data, len, e);
    if (r == -EBADMSG) {
        /* A damaged cache entry would fail every later pull too: drop it so it is refetched. */
        char rel[PATH_MAX];
        if (store_rel_path("blobs", digest, rel, sizeof(rel)) >= 0)
            (void)unlinkat(s->root_fd, rel, 0);
        return errmsg_prefix(e, r,
                             "blob %s in '%s' was damaged and is removed; pull the image "
                             "again",
                             digest, s->root);
    }
    if (r < 0)
        return r;
    *ret_data = TAKE_PTR(data);
    if (ret_len)
        *ret_len = len;
    return 0;
}

int store_blob_write(struct store *s, const char *digest, const void *data, size_t len,
                     struct errmsg *e)
{
    int r = digest_check(digest, data, len, e);
    if (r < 0)
        return r;
    char rel[PATH_MAX];
    r = store_rel_path("blobs", digest, rel, sizeof(rel));
    if (r < 0)
        return r;
    return store_write_atomic(s, rel, data, len, e);
}
