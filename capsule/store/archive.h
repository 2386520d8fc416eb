/* OCI image archives ("oci-archive", as skopeo and podman read and write them): one tar that
 * holds an OCI image layout (oci-layout, index.json, blobs/sha256/<hex>). This is how a
 * container's files leave capsule as an image and come back: Pyxis' --container-save=PATH
 * writes one with archive_export_rootfs(), --container-image=PATH runs one after
 * archive_import() put it into the store.
 *
 * An exported archive holds one image of one gzip'd layer: the container's whole root. An
 * imported one is outside input, handled like a registry's answer: every blob is checked
 * against its digest, and each layer is unpacked as a pull unpacks it (unpack.h: no entry
 * outside the layer, no device, no setuid/setgid bit). */
#pragma once

#include <stdint.h>

#include "capsule/store/store.h"
#include "lib/errmsg.h"

/* More layers than this in an imported image are refused. */
#define ARCHIVE_LAYERS_MAX 256

/* What the exported image's config says about running it (the OCI image config's "config"
 * object) and which platform it is for. Everything is borrowed and may be NULL unless said. */
struct archive_export_opts {
    char *const *env;        /* Env ("K=V"), NULL-terminated */
    char *const *entrypoint; /* Entrypoint, NULL-terminated */
    char *const *cmd;        /* Cmd, NULL-terminated */
    const char *working_dir; /* WorkingDir */
    /* The annotation org.opencontainers.image.ref.name of index.json's entry ("latest"), which
     * `skopeo copy oci-archive:F:REF` and `podman load` read as the image's tag. */
    const char *ref_name;
    /* The platform, in GOARCH terms ("amd64", "arm64"): that of the image the container was
     * started from. architecture is required (an OCI config must name it); os NULL = "linux". */
    const char *architecture;
    const char *os;
};

/* Writes the tree below root_fd (a directory: a container's "/" as seen through /proc/PID/root)
 * to out_path as an oci-archive with one gzip'd layer. root_fd stays the caller's.
 *
 * The layer holds what the container shows, as the container's root user sees it:
 *  - every entry owned by 0:0 (all files of a capsule container belong to its one user, whom
 *    the container sees as root); permission bits including setuid, setgid and sticky, mtimes
 *    (whole seconds), symbolic links, fifos, and hard links (regular files of one inode become
 *    one file and tar hard link entries to it);
 *  - device nodes and sockets are left out, and so are xattrs (file capabilities too);
 *  - it never leaves the root's mount: a directory on which something is mounted (/proc, /sys,
 *    /dev, /tmp, bind mounts) is written as an empty directory, a regular file that is a mount
 *    point (the host's /etc/hosts bound over the image's) as an empty file (the runtime binds
 *    those only where the image has the file), any other mount point is left out.
 * Directory entries are written in name order, so the same tree gives the same layer.
 *
 * The caller must be able to read every file: a file that cannot be opened fails the export
 * (-EACCES naming it), since an image silently short of a file is worse than none. Exporting a
 * container's root from outside its user namespace fails on files of mode 0000, for instance;
 * from inside it, as the container's root, it does not. A file that grows while it is read is
 * cut at the size it had when it was reached; one that shrinks is padded with zeros (as tar
 * does).
 *
 * The archive is written to a temporary file beside out_path (so out_path's directory must be
 * writable and have room for it, and the layer's compressed bytes once more while it is
 * written), mode 0600 whatever the umask (it holds the user's files), fsync'd and renamed over
 * out_path at the end: a failure leaves out_path as it was (absent or the old file) and no
 * temporary file behind. Returns 0, or -errno with a message naming the path that failed
 * ("'/usr/lib/x': Permission denied"), -EINVAL for missing options, -ENOMEM. */
int archive_export_rootfs(int root_fd, const char *out_path, const struct archive_export_opts *o,
                          struct errmsg *e);

struct archive_import_opts {
    /* Which image of a multi-platform archive to take (GOARCH terms; the os is "linux"). NULL:
     * the archive's index must name exactly one image (as one that archive_export_rootfs or
     * `skopeo copy docker://X oci-archive:F` writes does), which is taken whatever its
     * platform. */
    const char *architecture;
    /* The largest compressed layer to take (bytes; 0 = no limit), as pull_opts'. */
    uint64_t max_layer_size;
    /* What one layer's files may hold once unpacked (bytes; 0 = no limit); an unpack also stops
     * short of the cache's last CAPSULE_UNPACK_RESERVE of free space. */
    uint64_t max_unpacked_size;
};

/* Reads the oci-archive at archive_path (an uncompressed tar as archive_export_rootfs, skopeo
 * or podman write it; a gzip'd or zstd'd one is read too) into st as the image `name` (a
 * canonical name the caller chose; an existing record of that name is replaced). o may be NULL
 * (defaults as above).
 *
 * The archive's index.json (or, one level down, an image index it points to) names the image
 * manifest; the manifest and its config are checked against their digests and sizes, parsed
 * (manifest_parse, image_config_parse) and stored as blobs; each layer not in the store yet is
 * copied into blobs/ while its digest is checked, unpacked as a pull unpacks it (under its
 * exclusive layer lock, into store_layer_tmpdir, unpack_layer_bounded, store_layer_commit) and
 * its blob dropped. A layer the store has already is neither read nor locked (so a container
 * that uses it does not make the import wait). As with a pull, the unpacked layer is not
 * checked against the config's diff_ids. The record is saved last, so a failed import leaves
 * no image; verified blobs and layers it stored before failing stay for gc (store_gc removes
 * what no record references), as a failed pull's do.
 *
 * Limits: at most ARCHIVE_LAYERS_MAX layers, index.json and manifests at most
 * CAPSULE_MANIFEST_MAX bytes and configs CAPSULE_CONFIG_MAX (what a pull takes), layers within
 * o->max_layer_size and o->max_unpacked_size.
 *
 * Returns 0 and, if ret is not NULL, the saved record (free with image_record_done). Errors,
 * with a message that names the archive and what was wrong with it:
 *  -EBADMSG  not a tar, no index.json or oci-layout, a blob missing or not matching its digest
 *            or its declared size, index.json or oci-layout in it twice;
 *  -EINVAL   a member name that is absolute or has "..", an unusable index, manifest or config
 *            (manifest.h's messages), more than ARCHIVE_LAYERS_MAX layers, a hostile layer
 *            (unpack.h's messages);
 *  -ENOENT   no image for o->architecture in a multi-platform archive, no architecture given
 *            for one, or a single image whose config names another architecture than the one
 *            given;
 *  -ENOTSUP  a manifest or layer type capsule cannot run (manifest.h);
 *  -EFBIG    a layer over max_layer_size or max_unpacked_size, a manifest or config over its
 *            limit;
 *  and the errors of opening and reading archive_path, and of writing the store. */
int archive_import(struct store *st, const char *archive_path, const char *name,
                   const struct archive_import_opts *o, struct image_record *ret, struct errmsg *e);
