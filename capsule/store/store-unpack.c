/* A layer blob into layers/: in a file of its own, so that only the programs that unpack
 * (capsule-pull) link libarchive, not capsule, which only reads the store (meson.build, cli.h). */
#include "capsule/store/store.h"

#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "capsule/image/capsule-limits.h"
#include "capsule/store/unpack.h"
#include "lib/macro.h"
#include "lib/rm-tree.h"

int store_layer_unpack(struct store *s, const char *digest, uint64_t max_unpacked, bool keep_blob,
                       struct errmsg *e)
{
    _cleanup_free_ char *blob = NULL, *tmp = NULL;
    int r = store_layer_blob_path(s, digest, &blob);
    if (r < 0)
        return errmsg_set(e, r, "out of memory");
    _cleanup_close_ int fd = open(blob, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errmsg_set(e, negative_errno(), "%s: %m", blob);
    r = store_layer_tmpdir(s, digest, &tmp, e);
    if (r < 0)
        return r;
    /* A node store's layers are read by other users: widened, with the image's modes kept aside,
     * and their size noted for the service's size limit. */
    struct unpack_stats st = {0};
    if (store_is_node(s))
        r = unpack_layer_shared(fd, tmp, max_unpacked, CAPSULE_UNPACK_RESERVE, &st, e);
    else
        r = unpack_layer_bounded(fd, tmp, max_unpacked, CAPSULE_UNPACK_RESERVE, NULL, e);
    if (r >= 0 && store_is_node(s))
        r = store_node_layer_note_size(tmp, st.bytes, e);
    if (r >= 0)
        r = store_layer_commit(s, digest, tmp, e);
    if (r < 0) {
        rm_tree(tmp);
        return r;
    }
    if (!keep_blob)
        store_layer_blob_remove(s, digest);
    return 0;
}
