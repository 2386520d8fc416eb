/* The container's root: a private tmpfs, the overlay of the layers on it (three ways, from the
 * fastest to the most portable), pivot_root, and the copy fallback's merged tree. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lib/macro.h"
#include "capsule/runtime/fuse-root.h"
#include "capsule/runtime/mounts.h"
#include "lib/rm-tree.h"
#include "capsule/runtime/rootfs.h"
#include "capsule/store/unpack.h"

bool rootfs_force_legacy_overlay;

struct overlay_args {
    char *const *layers; /* bottom first */
    size_t n_layers;
    const char *upper, *work;
    int base_fd;
};

/* The tmpfs that holds the upper and work directories and the root mount point. Stacked on
 * "/" (target): path lookups start at the process root, below it, so no host path that the
 * sources name is hidden, and pivot_root leaves it on the old root, which is detached with it.
 * fuse-overlayfs needs real paths: its own goes on a directory of the host made for it. */
static int base_tmpfs(const char *target, int *ret_fd, struct errmsg *e)
{
    _cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
    if (fs < 0)
        return errmsg_set(e, negative_errno(), "create the container's tmpfs: %m%s",
                          errno == ENOSYS ? " (the kernel lacks the mount API of Linux 5.2)" : "");
    if (fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 ||
        fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        return errmsg_set(e, negative_errno(), "create the container's tmpfs: %m");
    _cleanup_close_ int mnt = fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
    if (mnt < 0 || move_mount(mnt, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0)
        return errmsg_set(e, negative_errno(), "mount the container's tmpfs: %m");
    static const char *const dirs[] = {"upper", "work", "root", "empty"};
    for (size_t i = 0; i < ELEMENTSOF(dirs); i++)
        if (mkdirat(mnt, dirs[i], 0755) < 0)
            return errmsg_set(e, negative_errno(), "create %s in the container's tmpfs: %m",
                              dirs[i]);
    *ret_fd = TAKE_FD(mnt);
    return 0;
}

/* The new mount API keeps the kernel's own explanation in the context: quote it. */
static int overlay_error(int fs, int r, const char *what, struct errmsg *e)
{
    char log[256] = "";
    ssize_t n = fs >= 0 ? read(fs, log, sizeof(log) - 1) : -1;
    if (n > 2) {
        log[n] = '\0';
        log[strcspn(log, "\n")] = '\0';
        return errmsg_set(e, r, "mount overlay: %s: %s (kernel: %s)", what, strerror(-r), log + 2);
    }
    return errmsg_set(e, r, "mount overlay: %s: %s", what, strerror(-r));
}

/* Each layer its own fsconfig call ("lowerdir+", Linux 6.8): no length limit, no escaping.
 * *ret_unsupported when the kernel does not know the parameter. */
static int overlay_new_api(const struct overlay_args *a, bool *ret_unsupported, struct errmsg *e)
{
    _cleanup_close_ int fs = fsopen("overlay", FSOPEN_CLOEXEC);
    if (fs < 0) {
        *ret_unsupported = errno == ENOSYS;
        return errmsg_set(e, negative_errno(), "mount overlay: %m");
    }
    for (size_t i = a->n_layers; i-- > 0;)
        if (fsconfig(fs, FSCONFIG_SET_STRING, "lowerdir+", a->layers[i], 0) < 0) {
            *ret_unsupported = i == a->n_layers - 1 && errno == EINVAL;
            char what[256];
            snprintf(what, sizeof(what), "layer '%s'", a->layers[i]);
            return overlay_error(fs, negative_errno(), what, e);
        }
    if (fsconfig(fs, FSCONFIG_SET_STRING, "upperdir", a->upper, 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_STRING, "workdir", a->work, 0) < 0 ||
        fsconfig(fs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0)
        return overlay_error(fs, negative_errno(), "upper directory", e);
    if (fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
        return overlay_error(fs, negative_errno(), "create", e);
    _cleanup_close_ int mnt = fsmount(fs, FSMOUNT_CLOEXEC, 0);
    if (mnt < 0 || move_mount(mnt, "", a->base_fd, "root", MOVE_MOUNT_F_EMPTY_PATH) < 0)
        return overlay_error(fs, negative_errno(), "attach", e);
    return 0;
}

/* Overlay's option parser splits on ',' and lowerdir on ':'; a backslash escapes both. */
static void put_escaped(FILE *f, const char *s)
{
    for (; *s; s++) {
        if (*s == ',' || *s == ':' || *s == '\\')
            fputc('\\', f);
        fputc(*s, f);
    }
}

/* Length of the longest directory that contains every layer ("/a/b" of "/a/b/x" and
 * "/a/b/y"; 0 for "/"), or -1 when a path is relative. */
static ssize_t common_parent_len(char *const *layers, size_t n)
{
    if (n == 0 || layers[0][0] != '/')
        return -1;
    size_t len = (size_t)(strrchr(layers[0], '/') - layers[0]);
    for (size_t i = 1; i < n; i++) {
        if (layers[i][0] != '/')
            return -1;
        while (len > 0 && !(strncmp(layers[i], layers[0], len) == 0 && layers[i][len] == '/'))
            while (--len > 0 && layers[0][len] != '/')
                ;
    }
    return (ssize_t)len;
}

/* The classic mount(2) option string, limited to one page: layer paths are given relative to
 * their common parent (our working directory for the call), which fits ~60 store layers. */
static int overlay_legacy(const struct overlay_args *a, struct errmsg *e)
{
    ssize_t plen = common_parent_len(a->layers, a->n_layers);
    _cleanup_free_ char *opts = NULL;
    size_t len = 0;
    _cleanup_fclose_ FILE *f = open_memstream(&opts, &len);
    if (!f)
        return -ENOMEM;
    fputs("lowerdir=", f);
    for (size_t i = a->n_layers; i-- > 0;) {
        put_escaped(f, plen >= 0 ? a->layers[i] + plen + 1 : a->layers[i]);
        if (i > 0)
            fputc(':', f);
    }
    fputs(",upperdir=", f);
    put_escaped(f, a->upper);
    fputs(",workdir=", f);
    put_escaped(f, a->work);
    fputs(",userxattr", f);
    if (fclose(TAKE_PTR(f)) != 0)
        return -ENOMEM;
    long page = sysconf(_SC_PAGESIZE);
    if ((long)len >= page)
        return errmsg_set(e, -E2BIG,
                          "mount overlay: %zu layers need %zu bytes of mount options, more than "
                          "the %ld this kernel takes (Linux 6.8 has no limit)",
                          a->n_layers, len, page - 1);
    if (plen >= 0) {
        _cleanup_free_ char *parent = plen > 0 ? strndup(a->layers[0], (size_t)plen) : strdup("/");
        if (!parent)
            return -ENOMEM;
        if (chdir(parent) < 0)
            return errmsg_set(e, negative_errno(), "mount overlay: enter '%s': %m", parent);
    }
    char target[64];
    snprintf(target, sizeof(target), "/proc/self/fd/%d/root", a->base_fd);
    if (mount("overlay", target, "overlay", 0, opts) < 0)
        return errmsg_set(e, negative_errno(), "mount overlay: %m");
    return 0;
}

static int mount_overlay(const struct overlay_args *a, struct errmsg *e)
{
    bool unsupported = rootfs_force_legacy_overlay;
    if (!unsupported) {
        int r = overlay_new_api(a, &unsupported, e);
        if (!unsupported)
            return r;
    }
    return overlay_legacy(a, e);
}

static int bind_copy(const char *dir, int base_fd, struct errmsg *e)
{
    _cleanup_close_ int tree = open_tree(AT_FDCWD, dir, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
    if (tree < 0 || move_mount(tree, "", base_fd, "root", MOVE_MOUNT_F_EMPTY_PATH) < 0)
        return errmsg_set(e, negative_errno(), "mount the root copy '%s': %m", dir);
    return 0;
}

/* fuse-overlayfs mounts the root from a copy of this mount namespace (fuse-root.h says why),
 * on "root" of a tmpfs on fuse->dir that holds its upper and work directories: shared meanwhile,
 * so that the mount reaches this namespace too. Here the root then moves onto the tmpfs stacked
 * on "/", as the overlay's is, and the one on fuse->dir goes from this namespace (not from
 * fuse-overlayfs' copy): a recursive bind of a host directory above it (the home directory)
 * must not carry it into the container. */
static int fuse_assemble(const struct rootfs_fuse *fuse, int *ret_base, struct errmsg *e)
{
    _cleanup_close_ int staging = -1;
    int r = base_tmpfs(fuse->dir, &staging, e);
    if (r < 0)
        return r;
    struct mounts_fd_buf p;
    const char *path = mounts_fd_path(staging, &p);
    if (mount(NULL, path, NULL, MS_SHARED, NULL) < 0)
        return errmsg_set(e, negative_errno(), "share the container's tmpfs: %m");
    if ((r = fuse_root_request(fuse->sock, e)) < 0)
        return r;
    if (mount(NULL, path, NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return errmsg_set(e, negative_errno(), "make the container's tmpfs private: %m");
    if ((r = base_tmpfs("/", ret_base, e)) < 0)
        return r;
    if (move_mount(staging, "root", *ret_base, "root", 0) < 0 || umount2(fuse->dir, MNT_DETACH) < 0)
        return errmsg_set(e, negative_errno(), "move the fuse-overlayfs root: %m");
    return 0;
}

static bool overlay_refusal(int r)
{
    return r == -EPERM || r == -EINVAL || r == -ENODEV || r == -EOPNOTSUPP || r == -ENOSYS ||
           r == -E2BIG || r == -EACCES;
}

int rootfs_assemble(const struct run_spec *spec, const char *copy_dir,
                    const struct rootfs_fuse *fuse, int *ret_root_fd, bool *ret_overlay_refused,
                    struct errmsg *e)
{
    *ret_overlay_refused = false;
    /* Nothing we mount may propagate back to the host, and pivot_root needs it too. */
    if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        return errmsg_set(e, negative_errno(), "make the mount namespace private: %m");
    _cleanup_close_ int base = -1;
    int r = fuse ? fuse_assemble(fuse, &base, e) : base_tmpfs("/", &base, e);
    if (r < 0)
        return r;
    if (copy_dir)
        r = bind_copy(copy_dir, base, e);
    else if (!fuse) {
        char upper[64], work[64], empty[64];
        snprintf(upper, sizeof(upper), "/proc/self/fd/%d/upper", base);
        snprintf(work, sizeof(work), "/proc/self/fd/%d/work", base);
        snprintf(empty, sizeof(empty), "/proc/self/fd/%d/empty", base);
        char *const no_layers[] = {empty};
        bool own_upper = spec->upper_dir && spec->work_dir;
        struct overlay_args a = {
            .layers = spec->n_layers ? spec->layers : no_layers,
            .n_layers = spec->n_layers ? spec->n_layers : 1,
            .upper = own_upper ? spec->upper_dir : upper,
            .work = own_upper ? spec->work_dir : work,
            .base_fd = base,
        };
        r = mount_overlay(&a, e);
        *ret_overlay_refused = r < 0 && overlay_refusal(r);
    }
    if (r < 0)
        return r;
    int root = openat(base, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (root < 0)
        return errmsg_set(e, negative_errno(), "open the container root: %m");
    *ret_root_fd = root;
    return 0;
}

int rootfs_pivot(int root_fd, struct errmsg *e)
{
    if (fchdir(root_fd) < 0)
        return errmsg_set(e, negative_errno(), "enter the container root: %m");
    /* pivot_root(".", ".") needs no put_old directory (the root may be read-only later). */
    if (syscall(SYS_pivot_root, ".", ".") < 0)
        return errmsg_set(e, negative_errno(), "pivot_root: %m");
    /* The old root now sits on "." with our tmpfs stacked on it; detach the tmpfs, then the
     * old root with all the host's mounts. The overlay keeps its own reference to the upper. */
    for (int i = 0; i < 2; i++)
        if (umount2(".", MNT_DETACH) < 0)
            return errmsg_set(e, negative_errno(), "detach the host's mounts: %m");
    if (chdir("/") < 0)
        return errmsg_set(e, negative_errno(), "enter the container root: %m");
    return 0;
}

int rootfs_make_readonly(struct errmsg *e)
{
    _cleanup_close_ int fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
    int r = fd < 0 ? negative_errno() : mounts_remount_readonly(fd);
    if (r < 0)
        return errmsg_set(e, r, "make the root read-only: %s", strerror(-r));
    return 0;
}

int rootfs_copy_prepare(const struct run_spec *spec, const char *why, char **ret_dir,
                        struct errmsg *e)
{
    const char *scratch = spec->scratch_dir;
    if (!scratch && spec->make_scratch) {
        int r = spec->make_scratch(spec->scratch_userdata, &scratch, e);
        if (r < 0)
            return r;
    }
    if (!scratch)
        scratch = getenv("TMPDIR");
    if (!scratch || !*scratch)
        scratch = "/tmp";
    _cleanup_free_ char *dir = NULL;
    if (asprintf(&dir, "%s/capsule-root-XXXXXX", scratch) < 0)
        return -ENOMEM;
    if (!mkdtemp(dir))
        return errmsg_set(e, negative_errno(), "create the root copy in '%s': %m", scratch);
    int r = chmod(dir, 0755) < 0 ? negative_errno() : 0;
    for (size_t i = 0; r >= 0 && i < spec->n_layers; i++)
        r = unpack_merge_layer(spec->layers[i], dir, e);
    /* A named container's changes so far, in overlay format like a layer. */
    if (r >= 0 && spec->upper_dir)
        r = unpack_merge_layer(spec->upper_dir, dir, e);
    if (r < 0) {
        rm_tree(dir);
        return errmsg_prefix(e, r, "copy the image (%s)", why);
    }
    *ret_dir = TAKE_PTR(dir);
    return 0;
}
