/* Tests for capsule/store/unpack.c and unpack-merge.c: layers built in memory with libarchive's
 * writer, unpacked into a temp dir. Hostile layers must fail and leave nothing outside dest; the
 * merge fallback must show what an overlay mount of the same layers shows. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"
#include "test-ns.h"

#include "lib/rm-tree.h"
#include "test-fs.h"
#include "test-skip.h"

#include "capsule/store/store.h"
#include "capsule/store/unpack.h"

#define T_MTIME  1500000000
#define NOBODY   65534
#define SENTINEL "keep"

struct ctx {
    char base[64];
    char dest[128];
    char outside[128];
    char sentinel[160];
};

struct layer {
    struct archive *a;
    int fd;
};

/* ---- building layers ---- */

static void layer_begin(struct layer *l, const char *filter)
{
    l->fd = memfd_create("layer", MFD_CLOEXEC);
    assert_true(l->fd >= 0);
    l->a = archive_write_new();
    assert_non_null(l->a);
    assert_int_equal(archive_write_set_format_pax_restricted(l->a), ARCHIVE_OK);
    if (strcmp(filter, "gzip") == 0)
        assert_int_equal(archive_write_add_filter_gzip(l->a), ARCHIVE_OK);
    else if (strcmp(filter, "zstd") == 0)
        assert_int_equal(archive_write_add_filter_zstd(l->a), ARCHIVE_OK);
    else
        assert_int_equal(archive_write_add_filter_none(l->a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_fd(l->a, l->fd), ARCHIVE_OK);
}

static void layer_entry(struct layer *l, const char *name, mode_t type, mode_t perm,
                        const char *data, const char *symlink, const char *hardlink, dev_t rdev)
{
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, perm);
    archive_entry_set_mtime(e, T_MTIME, 0);
    archive_entry_set_uid(e, 1234);
    archive_entry_set_gid(e, 1234);
    if (symlink)
        archive_entry_set_symlink(e, symlink);
    if (hardlink)
        archive_entry_set_hardlink(e, hardlink);
    if (rdev)
        archive_entry_set_rdev(e, rdev);
    size_t len = data ? strlen(data) : 0;
    archive_entry_set_size(e, len);
    assert_int_equal(archive_write_header(l->a, e), ARCHIVE_OK);
    if (len)
        assert_int_equal(archive_write_data(l->a, data, len), (la_ssize_t)len);
    archive_entry_free(e);
}

static void add_file(struct layer *l, const char *name, mode_t perm, const char *data)
{
    layer_entry(l, name, AE_IFREG, perm, data, NULL, NULL, 0);
}

static void add_dir(struct layer *l, const char *name, mode_t perm)
{
    layer_entry(l, name, AE_IFDIR, perm, NULL, NULL, NULL, 0);
}

static void add_symlink(struct layer *l, const char *name, const char *target)
{
    layer_entry(l, name, AE_IFLNK, 0777, NULL, target, NULL, 0);
}

static void add_hardlink(struct layer *l, const char *name, const char *target)
{
    layer_entry(l, name, AE_IFREG, 0644, NULL, NULL, target, 0);
}

/* A file or directory with its owner, as images have them. */
static void add_owned(struct layer *l, const char *name, mode_t type, mode_t perm, const char *data,
                      int64_t uid, int64_t gid)
{
    struct archive_entry *e = archive_entry_new();
    archive_entry_set_pathname(e, name);
    archive_entry_set_filetype(e, type);
    archive_entry_set_perm(e, perm);
    archive_entry_set_mtime(e, T_MTIME, 0);
    archive_entry_set_uid(e, uid);
    archive_entry_set_gid(e, gid);
    size_t len = data ? strlen(data) : 0;
    archive_entry_set_size(e, len);
    assert_int_equal(archive_write_header(l->a, e), ARCHIVE_OK);
    if (len)
        assert_int_equal(archive_write_data(l->a, data, len), (la_ssize_t)len);
    archive_entry_free(e);
}

/* Finishes the archive and returns its fd positioned at the start. */
static int layer_end(struct layer *l)
{
    assert_int_equal(archive_write_close(l->a), ARCHIVE_OK);
    archive_write_free(l->a);
    assert_int_equal(lseek(l->fd, 0, SEEK_SET), 0);
    return l->fd;
}

/* Set by the cases that run the hostile layers again in unpack_layer_shared's mode. */
static bool shared_mode;

static int unpack_into(const char *dest, struct layer *l, struct unpack_stats *st, struct errmsg *e)
{
    int fd = layer_end(l);
    int r =
        shared_mode ? unpack_layer_shared(fd, dest, 0, 0, st, e) : unpack_layer(fd, dest, st, e);
    close(fd);
    return r;
}

/* ---- fixtures and checks ---- */

static char *read_file(const char *path)
{
    static char buf[4096];
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n < 0 ? 0 : n] = '\0';
    return buf;
}

static int setup(void **state)
{
    struct ctx *c = calloc(1, sizeof(*c));
    snprintf(c->base, sizeof(c->base), "/tmp/test-unpack.XXXXXX");
    if (!mkdtemp(c->base) || chmod(c->base, 0755) < 0)
        return -1;
    snprintf(c->dest, sizeof(c->dest), "%s/dest", c->base);
    snprintf(c->outside, sizeof(c->outside), "%s/outside", c->base);
    snprintf(c->sentinel, sizeof(c->sentinel), "%s/sentinel", c->outside);
    if (mkdir(c->dest, 0755) < 0 || mkdir(c->outside, 0755) < 0)
        return -1;
    write_file(c->sentinel, SENTINEL);
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    struct ctx *c = *state;
    int r = rm_tree(c->base);
    free(c);
    return r;
}

static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *de; (de = readdir(d));)
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, ".."))
            n++;
    closedir(d);
    return n;
}

/* Nothing was written beside dest, and the file outside is as it was. */
static void assert_contained(const struct ctx *c)
{
    assert_int_equal(count_entries(c->base), 2);
    assert_int_equal(count_entries(c->outside), 1);
    struct stat st;
    assert_int_equal(lstat(c->sentinel, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    assert_int_equal(st.st_nlink, 1);
    assert_int_equal(st.st_mode & 07777, 0644);
    assert_string_equal(read_file(c->sentinel), SENTINEL);
    char v[64];
    assert_true(getxattr(c->sentinel, "user.overlay.opaque", v, sizeof(v)) < 0);
    assert_true(getxattr(c->outside, "user.overlay.opaque", v, sizeof(v)) < 0);
    assert_true(getxattr(c->sentinel, UNPACK_OVERRIDE_XATTR, v, sizeof(v)) < 0);
    assert_true(getxattr(c->outside, UNPACK_OVERRIDE_XATTR, v, sizeof(v)) < 0);
    assert_int_equal(lstat(c->outside, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
}

static void path_in(char *buf, size_t size, const char *dir, const char *rel)
{
    if (snprintf(buf, size, "%s/%s", dir, rel) >= (int)size)
        fail_msg("path too long: %s/%s", dir, rel);
}

static void assert_mode(const char *dir, const char *rel, mode_t want)
{
    char p[PATH_MAX];
    struct stat st;
    path_in(p, sizeof(p), dir, rel);
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_mode, want);
}

static void assert_absent(const char *dir, const char *rel)
{
    char p[PATH_MAX];
    struct stat st;
    path_in(p, sizeof(p), dir, rel);
    assert_int_equal(lstat(p, &st), -1);
}

static void assert_content(const char *dir, const char *rel, const char *want)
{
    char p[PATH_MAX];
    path_in(p, sizeof(p), dir, rel);
    const char *got = read_file(p);
    assert_non_null(got);
    assert_string_equal(got, want);
}

static void assert_whiteout(const char *dir, const char *rel)
{
    char p[PATH_MAX];
    struct stat st;
    path_in(p, sizeof(p), dir, rel);
    assert_int_equal(lstat(p, &st), 0);
    assert_true(S_ISCHR(st.st_mode));
    assert_int_equal(st.st_rdev, makedev(0, 0));
}

static bool has_opaque(const char *dir, const char *rel)
{
    char p[PATH_MAX], v[4];
    path_in(p, sizeof(p), dir, rel);
    ssize_t n = lgetxattr(p, "user.overlay.opaque", v, sizeof(v));
    return n == 1 && v[0] == 'y';
}

/* Runs fn in a child process as nobody (with dir handed to nobody first); returns its exit
 * status. Ordinary users are who unpacks layers: permissions bite only them. */
static int run_as_nobody(const char *dir, int (*fn)(void *), void *arg)
{
    assert_int_equal(chown(dir, NOBODY, NOBODY), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
            setresuid(NOBODY, NOBODY, NOBODY) < 0)
            _exit(99);
        _exit(fn(arg));
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* ---- ordinary layers ---- */

static void build_ordinary(struct layer *l, const char *filter)
{
    layer_begin(l, filter);
    add_dir(l, "etc", 0755);
    add_file(l, "etc/hostname", 0644, "box\n");
    add_file(l, "./etc/shadow", 0000, "secret\n");
    add_dir(l, "usr/", 0755);
    add_dir(l, "usr/bin", 0755);
    add_file(l, "usr/bin/tool", 0755, "#!/bin/sh\n");
    add_hardlink(l, "usr/bin/tool2", "usr/bin/tool");
    add_symlink(l, "bin", "usr/bin");
    add_symlink(l, "etc/abs", "/etc/hostname");
    layer_entry(l, "run.fifo", AE_IFIFO, 0600, NULL, NULL, NULL, 0);
    add_dir(l, "tmp", 01777);
}

static void check_ordinary(const char *dest, const struct unpack_stats *st)
{
    assert_content(dest, "etc/hostname", "box\n");
    assert_mode(dest, "etc/hostname", S_IFREG | 0644);
    assert_mode(dest, "etc/shadow", S_IFREG | 0000);
    assert_mode(dest, "usr/bin/tool", S_IFREG | 0755);
    assert_mode(dest, "tmp", S_IFDIR | 01777);
    assert_mode(dest, "run.fifo", S_IFIFO | 0600);
    char p[PATH_MAX], q[PATH_MAX], link[PATH_MAX];
    struct stat a, b;
    path_in(p, sizeof(p), dest, "usr/bin/tool");
    path_in(q, sizeof(q), dest, "usr/bin/tool2");
    assert_int_equal(stat(p, &a), 0);
    assert_int_equal(stat(q, &b), 0);
    assert_int_equal(a.st_ino, b.st_ino);
    assert_int_equal(a.st_mtime, T_MTIME);
    path_in(p, sizeof(p), dest, "bin");
    ssize_t n = readlink(p, link, sizeof(link) - 1);
    assert_int_equal(n, 7);
    link[n] = '\0';
    assert_string_equal(link, "usr/bin");
    /* Symlinks may point anywhere: they resolve inside the container's root. */
    path_in(p, sizeof(p), dest, "etc/abs");
    n = readlink(p, link, sizeof(link) - 1);
    assert_true(n > 0);
    /* Times of directories survive the files written into them later. */
    path_in(p, sizeof(p), dest, "usr/bin");
    assert_int_equal(stat(p, &a), 0);
    assert_int_equal(a.st_mtime, T_MTIME);
    /* Ownership is not applied: the files belong to whoever unpacked. */
    assert_int_equal(a.st_uid, geteuid());
    assert_int_equal(st->entries, 11);
    assert_int_equal(st->bytes, strlen("box\n") + strlen("secret\n") + strlen("#!/bin/sh\n"));
}

static void test_ordinary_layers(void **state)
{
    struct ctx *c = *state;
    const char *filters[] = {"gzip", "zstd", "none"};
    for (size_t i = 0; i < ELEMENTSOF(filters); i++) {
        char dest[PATH_MAX];
        snprintf(dest, sizeof(dest), "%s/%s", c->dest, filters[i]);
        assert_int_equal(mkdir(dest, 0755), 0);
        struct layer l;
        build_ordinary(&l, filters[i]);
        struct unpack_stats st = {0};
        struct errmsg e = {""};
        assert_int_equal(unpack_into(dest, &l, &st, &e), 0);
        check_ordinary(dest, &st);
    }
    assert_contained(c);
}

static void test_empty_layer(void **state)
{
    struct ctx *c = *state;
    /* A zero-byte blob and an empty gzip'd tar (Docker's "empty layer") both unpack to nothing. */
    int fd = memfd_create("empty", MFD_CLOEXEC);
    struct errmsg e = {""};
    assert_int_equal(unpack_layer(fd, c->dest, NULL, &e), 0);
    close(fd);
    struct layer l;
    layer_begin(&l, "gzip");
    assert_int_equal(unpack_into(c->dest, &l, NULL, &e), 0);
    assert_int_equal(count_entries(c->dest), 0);
}

static void test_whiteouts(void **state)
{
    struct ctx *c = *state;
    struct layer l;
    layer_begin(&l, "gzip");
    add_file(&l, ".wh.gone", 0644, NULL);
    add_dir(&l, "opq", 0755);
    add_file(&l, "opq/.wh..wh..opq", 0644, NULL);
    add_file(&l, "opq/new", 0644, "n");
    add_file(&l, "lib/.wh.libold.so", 0644, NULL); /* parent without its own entry */
    add_file(&l, ".wh..wh.plnk", 0644, NULL);      /* aufs bookkeeping: skipped */
    add_file(&l, "redo", 0644, "first");
    add_file(&l, ".wh.redo", 0644, NULL); /* the later entry wins */
    struct unpack_stats st = {0};
    struct errmsg e = {""};
    assert_int_equal(unpack_into(c->dest, &l, &st, &e), 0);
    assert_whiteout(c->dest, "gone");
    assert_whiteout(c->dest, "lib/libold.so");
    assert_whiteout(c->dest, "redo");
    assert_absent(c->dest, ".wh.gone");
    assert_absent(c->dest, ".wh..wh.plnk");
    assert_absent(c->dest, "opq/.wh..wh..opq");
    assert_true(has_opaque(c->dest, "opq"));
    assert_false(has_opaque(c->dest, "lib"));
    assert_content(c->dest, "opq/new", "n");
    assert_int_equal(st.whiteouts, 3);
    assert_int_equal(st.opaque_dirs, 1);
    assert_contained(c);
}

static void test_replacements(void **state)
{
    struct ctx *c = *state;
    struct layer l;
    layer_begin(&l, "none");
    add_file(&l, "x", 0644, "file");
    add_dir(&l, "x", 0755);
    add_file(&l, "x/y", 0644, "y");
    add_dir(&l, "d", 0555);
    add_file(&l, "d/f", 0644, "f");
    add_dir(&l, "d/sub", 0555);
    add_file(&l, "d", 0600, "now a file");
    add_symlink(&l, "s", "x");
    add_file(&l, "s", 0644, "not a link");
    struct errmsg e = {""};
    assert_int_equal(unpack_into(c->dest, &l, NULL, &e), 0);
    assert_content(c->dest, "x/y", "y");
    assert_mode(c->dest, "d", S_IFREG | 0600);
    assert_content(c->dest, "d", "now a file");
    assert_mode(c->dest, "s", S_IFREG | 0644);
    assert_contained(c);
}

static void test_devices_skipped_setid_dropped(void **state)
{
    struct ctx *c = *state;
    struct layer l;
    layer_begin(&l, "gzip");
    layer_entry(&l, "dev/null", AE_IFCHR, 0666, NULL, NULL, NULL, makedev(1, 3));
    layer_entry(&l, "dev/sda", AE_IFBLK, 0660, NULL, NULL, NULL, makedev(8, 0));
    add_file(&l, "bin/su", 04755, "su");
    add_file(&l, "bin/wall", 02755, "wall");
    add_dir(&l, "shared", 02775);
    struct unpack_stats st = {0};
    struct errmsg e = {""};
    assert_int_equal(unpack_into(c->dest, &l, &st, &e), 0);
    assert_absent(c->dest, "dev/null");
    assert_absent(c->dest, "dev/sda");
    assert_int_equal(st.skipped_devices, 2);
    assert_mode(c->dest, "bin/su", S_IFREG | 0755);
    assert_mode(c->dest, "bin/wall", S_IFREG | 0755);
    assert_mode(c->dest, "shared", S_IFDIR | 0775);
    assert_int_equal(st.dropped_setid, 3);
    assert_contained(c);
}

/* ---- the shared mode of a node cache ---- */

/* The override xattr of dir/rel ("" when it has none; symbolic links are not followed). */
static const char *override_of(const char *dir, const char *rel)
{
    static char v[128];
    char p[PATH_MAX];
    path_in(p, sizeof(p), dir, rel);
    ssize_t n = lgetxattr(p, UNPACK_OVERRIDE_XATTR, v, sizeof(v) - 1);
    if (n < 0)
        assert_int_equal(errno, ENODATA);
    v[n < 0 ? 0 : n] = '\0';
    return v;
}

static void build_shared(struct layer *l)
{
    layer_begin(l, "gzip");
    add_owned(l, "etc", AE_IFDIR, 0755, NULL, 0, 0);
    add_owned(l, "etc/shadow", AE_IFREG, 0600, "secret\n", 0, 42);
    add_hardlink(l, "etc/shadow-", "etc/shadow");
    add_owned(l, "etc/world", AE_IFREG, 0666, "w", 0, 0);
    add_owned(l, "root", AE_IFDIR, 0700, NULL, 0, 0);
    add_owned(l, "root/.profile", AE_IFREG, 0400, "p", 0, 0);
    add_owned(l, "usr/bin/tool", AE_IFREG, 0755, "#!/bin/sh\n", 0, 0); /* parents implicit */
    add_owned(l, "usr/bin/su", AE_IFREG, 04750, "su", 0, 0);
    add_owned(l, "opt/x/run", AE_IFREG, 0710, "x", 0, 0);
    add_owned(l, "home/user", AE_IFDIR, 0750, NULL, 1000, 1000);
    add_owned(l, "home/user/notes", AE_IFREG, 0640, "n", 1000, 1000);
    add_owned(l, "tmp", AE_IFDIR, 01777, NULL, 0, 0);
    add_owned(l, "weird", AE_IFREG, 0644, "w", 4294967295LL, 5000000000LL);
    add_symlink(l, "etc/link", "shadow");
    add_file(l, ".wh.gone", 0644, NULL);
    add_file(l, "var/.wh.old", 0644, NULL);
    add_owned(l, "opq", AE_IFDIR, 0700, NULL, 0, 0);
    add_file(l, "opq/.wh..wh..opq", 0644, NULL);
    add_owned(l, "opq/in", AE_IFREG, 0600, "i", 7, 8);
    layer_entry(l, "fifo", AE_IFIFO, 0600, NULL, NULL, NULL, 0);
}

/* Real modes say only readable or executable by all; the xattrs keep the image's. */
static void test_shared_modes_and_xattrs(void **state)
{
    struct ctx *c = *state;
    /* Not the umask of the service: what every user reads must not depend on it. */
    umask(077);
    struct layer l;
    build_shared(&l);
    struct unpack_stats st = {0};
    struct errmsg e = {""};
    int fd = layer_end(&l);
    int r = unpack_layer_shared(fd, c->dest, 0, 0, &st, &e);
    close(fd);
    if (r == -EOPNOTSUPP)
        test_skip("no user xattrs on /tmp here");
    assert_int_equal(r, 0);

    assert_string_equal(override_of(c->dest, "."), "0:0:0755:dir");
    assert_mode(c->dest, "etc", S_IFDIR | 0755);
    assert_string_equal(override_of(c->dest, "etc"), "0:0:0755:dir");
    assert_mode(c->dest, "etc/shadow", S_IFREG | 0644);
    assert_string_equal(override_of(c->dest, "etc/shadow"), "0:42:0600:file");
    assert_content(c->dest, "etc/shadow", "secret\n");
    assert_mode(c->dest, "etc/shadow-", S_IFREG | 0644); /* one inode, one xattr */
    assert_string_equal(override_of(c->dest, "etc/shadow-"), "0:42:0600:file");
    /* Nobody but the cache's owner may write to it, whatever the image says. */
    assert_mode(c->dest, "etc/world", S_IFREG | 0644);
    assert_string_equal(override_of(c->dest, "etc/world"), "0:0:0666:file");
    assert_mode(c->dest, "root", S_IFDIR | 0755);
    assert_string_equal(override_of(c->dest, "root"), "0:0:0700:dir");
    assert_mode(c->dest, "root/.profile", S_IFREG | 0644);
    assert_string_equal(override_of(c->dest, "root/.profile"), "0:0:0400:file");
    assert_mode(c->dest, "usr/bin/tool", S_IFREG | 0755);
    assert_string_equal(override_of(c->dest, "usr/bin/tool"), "0:0:0755:file");
    assert_mode(c->dest, "usr/bin/su", S_IFREG | 0755);
    assert_string_equal(override_of(c->dest, "usr/bin/su"), "0:0:0750:file");
    assert_mode(c->dest, "opt/x/run", S_IFREG | 0755);
    assert_string_equal(override_of(c->dest, "opt/x/run"), "0:0:0710:file");
    /* Parents the layer has no entry for, made here and not by libarchive. */
    const char *implicit[] = {"usr", "usr/bin", "opt", "opt/x", "home", "var"};
    for (size_t i = 0; i < ELEMENTSOF(implicit); i++) {
        assert_mode(c->dest, implicit[i], S_IFDIR | 0755);
        assert_string_equal(override_of(c->dest, implicit[i]), "0:0:0755:dir");
    }
    assert_mode(c->dest, "home/user", S_IFDIR | 0755);
    assert_string_equal(override_of(c->dest, "home/user"), "1000:1000:0750:dir");
    assert_mode(c->dest, "home/user/notes", S_IFREG | 0644);
    assert_string_equal(override_of(c->dest, "home/user/notes"), "1000:1000:0640:file");
    assert_mode(c->dest, "tmp", S_IFDIR | 0755);
    assert_string_equal(override_of(c->dest, "tmp"), "0:0:1777:dir");
    assert_string_equal(override_of(c->dest, "weird"), "65534:65534:0644:file");
    /* Symbolic links, fifos and whiteouts cannot carry user xattrs and get none. */
    assert_mode(c->dest, "etc/link", S_IFLNK | 0777);
    assert_string_equal(override_of(c->dest, "etc/link"), "");
    assert_mode(c->dest, "fifo", S_IFIFO | 0600);
    assert_string_equal(override_of(c->dest, "fifo"), "");
    assert_whiteout(c->dest, "gone");
    assert_string_equal(override_of(c->dest, "gone"), "");
    assert_whiteout(c->dest, "var/old");
    assert_true(has_opaque(c->dest, "opq"));
    assert_mode(c->dest, "opq", S_IFDIR | 0755);
    assert_string_equal(override_of(c->dest, "opq"), "0:0:0700:dir");
    assert_string_equal(override_of(c->dest, "opq/in"), "7:8:0600:file");
    assert_int_equal(st.whiteouts, 2);
    assert_int_equal(st.opaque_dirs, 1);
    assert_int_equal(st.dropped_setid, 1);
    /* Times survive the xattrs. */
    char p[PATH_MAX];
    struct stat sb;
    path_in(p, sizeof(p), c->dest, "root");
    assert_int_equal(stat(p, &sb), 0);
    assert_int_equal(sb.st_mtime, T_MTIME);
    assert_contained(c);
}

/* Turns the ustar header of the entry name in the plain tar fd into a hard link to target that
 * keeps its data: pax allows that, and libarchive's writer cannot make one. */
static void make_hardlink_with_data(int fd, const char *name, const char *target)
{
    unsigned char h[512];
    for (off_t off = 0; pread(fd, h, sizeof(h), off) == (ssize_t)sizeof(h); off += 512) {
        if (strcmp((char *)h, name) != 0)
            continue;
        h[156] = '1';
        memset(h + 157, 0, 100);
        memcpy(h + 157, target, strlen(target));
        memset(h + 148, ' ', 8);
        unsigned sum = 0;
        for (size_t i = 0; i < sizeof(h); i++)
            sum += h[i];
        snprintf((char *)h + 148, 8, "%06o", sum);
        assert_int_equal(pwrite(fd, h, sizeof(h), off), (ssize_t)sizeof(h));
        return;
    }
    fail_msg("no header for '%s'", name);
}

/* A hard link that carries data gets libarchive to apply its mode to the inode it shares: that
 * mode is widened too, or the file would be readable by nobody but the cache's owner. */
static void test_shared_hardlink_with_data(void **state)
{
    struct ctx *c = *state;
    struct layer l;
    layer_begin(&l, "none");
    add_owned(&l, "data", AE_IFREG, 0600, "d", 0, 0);
    /* An id beyond ustar's puts a pax header before it, and libarchive reads a hard link's data
     * only in pax. */
    add_owned(&l, "data-", AE_IFREG, 0600, "d", 3000000, 0);
    int fd = layer_end(&l);
    make_hardlink_with_data(fd, "data-", "data");
    struct errmsg e = {""};
    int r = unpack_layer_shared(fd, c->dest, 0, 0, NULL, &e);
    close(fd);
    if (r < 0)
        fprintf(stderr, "%s\n", e.text);
    if (r == -EOPNOTSUPP)
        test_skip("no user xattrs on /tmp here");
    assert_int_equal(r, 0);
    char a[PATH_MAX], b[PATH_MAX];
    struct stat sa, sb;
    path_in(a, sizeof(a), c->dest, "data");
    path_in(b, sizeof(b), c->dest, "data-");
    assert_int_equal(stat(a, &sa), 0);
    assert_int_equal(stat(b, &sb), 0);
    assert_int_equal(sa.st_ino, sb.st_ino);
    assert_mode(c->dest, "data", S_IFREG | 0644);
    assert_string_equal(override_of(c->dest, "data-"), "0:0:0600:file");
}

/* A per-user unpack writes no override xattr at all. */
static void test_private_has_no_override(void **state)
{
    struct ctx *c = *state;
    struct layer l;
    build_shared(&l);
    struct errmsg e = {""};
    assert_int_equal(unpack_into(c->dest, &l, NULL, &e), 0);
    assert_string_equal(override_of(c->dest, "."), "");
    assert_string_equal(override_of(c->dest, "etc/shadow"), "");
    assert_string_equal(override_of(c->dest, "usr"), "");
    assert_mode(c->dest, "etc/shadow", S_IFREG | 0600);
    assert_mode(c->dest, "root", S_IFDIR | 0700);
}

/* ---- hostile layers ---- */

/* Unpacks a layer that must be refused with -EINVAL and a message naming the entry. */
static void assert_refused(struct ctx *c, struct layer *l, const char *entry)
{
    struct errmsg e = {""};
    int r = unpack_into(c->dest, l, NULL, &e);
    if (getenv("TEST_VERBOSE"))
        fprintf(stderr, "%s\n", e.text);
    if (r != -EINVAL || !strstr(e.text, entry))
        fail_msg("entry '%s': got %d '%s'", entry, r, e.text);
    assert_contained(c);
}

static void test_hostile_paths(void **state)
{
    struct ctx *c = *state;
    char abs[PATH_MAX];
    snprintf(abs, sizeof(abs), "%s/x", c->outside);
    const char *names[] = {abs, "../x", "a/../../x", "./../outside/x", "a/b/../../../x"};
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        struct layer l;
        layer_begin(&l, "gzip");
        add_file(&l, "ok", 0644, "ok");
        add_file(&l, names[i], 0644, "escaped");
        assert_refused(c, &l, names[i]);
    }
}

static void test_hostile_symlink_escape(void **state)
{
    struct ctx *c = *state;
    /* A symlink out of the layer, then an entry through it. */
    struct layer l;
    layer_begin(&l, "gzip");
    add_symlink(&l, "a", c->outside);
    add_file(&l, "a/sentinel", 0644, "overwritten");
    assert_refused(c, &l, "a/sentinel");

    layer_begin(&l, "none");
    add_symlink(&l, "etc", "/etc");
    add_file(&l, "etc/capsule-test-escape", 0644, "x");
    assert_refused(c, &l, "etc/capsule-test-escape");
    assert_int_equal(access("/etc/capsule-test-escape", F_OK), -1);

    /* Relative, climbing out of dest: "a -> ../../" then "a/x". */
    layer_begin(&l, "zstd");
    add_symlink(&l, "up", "../../");
    /* A name nobody else uses: the check below looks at the shared /tmp. */
    add_file(&l, "up/capsule-test-escape-up", 0644, "x");
    assert_refused(c, &l, "up/capsule-test-escape-up");
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/../capsule-test-escape-up", c->base);
    assert_int_equal(access(p, F_OK), -1);

    /* A directory entry through the link, and a deeper file. */
    layer_begin(&l, "none");
    add_symlink(&l, "d", c->outside);
    add_dir(&l, "d/sub", 0755);
    assert_refused(c, &l, "d/sub");
}

static void test_hostile_hardlinks(void **state)
{
    struct ctx *c = *state;
    struct stat before, after;
    assert_int_equal(stat("/etc/passwd", &before), 0);
    struct layer l;
    layer_begin(&l, "gzip");
    add_hardlink(&l, "passwd", "/etc/passwd");
    assert_refused(c, &l, "passwd");
    assert_int_equal(stat("/etc/passwd", &after), 0);
    assert_int_equal(after.st_nlink, before.st_nlink);

    layer_begin(&l, "gzip");
    add_hardlink(&l, "s", "../outside/sentinel");
    assert_refused(c, &l, "s");

    /* Through a symlink of the layer. */
    layer_begin(&l, "none");
    add_symlink(&l, "o", c->outside);
    add_hardlink(&l, "s", "o/sentinel");
    assert_refused(c, &l, "s");

    /* To a directory, and to something the layer does not have. */
    layer_begin(&l, "none");
    add_dir(&l, "d", 0755);
    add_hardlink(&l, "h", "d");
    assert_refused(c, &l, "h");
    layer_begin(&l, "none");
    add_hardlink(&l, "h2", "missing");
    assert_refused(c, &l, "h2");
}

static void test_hostile_whiteouts(void **state)
{
    struct ctx *c = *state;
    const char *odd[] = {".wh..", ".wh...", ".wh.", "a/.wh..", ".wh..wh..opq/x", "a/.wh.b/c"};
    for (size_t i = 0; i < ELEMENTSOF(odd); i++) {
        struct layer l;
        layer_begin(&l, "none");
        add_dir(&l, "a", 0755);
        add_file(&l, odd[i], 0644, NULL);
        assert_refused(c, &l, odd[i]);
    }
    /* Whiteouts and opaque markers through a symlink must not touch what it points to. */
    struct layer l;
    layer_begin(&l, "none");
    add_symlink(&l, "o", c->outside);
    add_file(&l, "o/.wh.sentinel", 0644, NULL);
    assert_refused(c, &l, "o/.wh.sentinel");
    layer_begin(&l, "none");
    add_symlink(&l, "o", c->outside);
    add_file(&l, "o/.wh..wh..opq", 0644, NULL);
    assert_refused(c, &l, "o/.wh..wh..opq");
}

static void test_dir_fixup_not_through_symlink(void **state)
{
    struct ctx *c = *state;
    /* libarchive fixes directory modes at the end; a later symlink by the same name must not
     * redirect that chmod outside. */
    struct layer l;
    layer_begin(&l, "none");
    add_dir(&l, "d", 0700);
    add_file(&l, "d/f", 0644, "f");
    add_symlink(&l, "d", c->outside);
    struct errmsg e = {""};
    assert_int_equal(unpack_into(c->dest, &l, NULL, &e), 0);
    assert_mode(c->dest, "d", S_IFLNK | 0777);
    assert_contained(c);
}

static int unpack_readonly_dirs(void *arg)
{
    const char *dest = arg;
    struct layer l;
    layer_begin(&l, "gzip");
    add_dir(&l, "ro", 0555);
    add_file(&l, "ro/child", 0644, "c");
    add_dir(&l, "ro/sub", 0500);
    add_file(&l, "ro/sub/deep", 0400, "d");
    add_file(&l, "ro/.wh.old", 0644, NULL);
    add_file(&l, "ro/sub/.wh..wh..opq", 0644, NULL);
    struct errmsg e = {""};
    int r = unpack_into(dest, &l, NULL, &e);
    if (r < 0) {
        fprintf(stderr, "unpack as nobody: %s\n", e.text);
        return 1;
    }
    return 0;
}

static int remove_tree(void *arg)
{
    return rm_tree(arg) < 0;
}

static void test_readonly_dirs_get_children(void **state)
{
    struct ctx *c = *state;
    int status = geteuid() == 0 ? run_as_nobody(c->dest, unpack_readonly_dirs, c->dest)
                                : unpack_readonly_dirs(c->dest);
    assert_int_equal(status, 0);
    assert_content(c->dest, "ro/child", "c");
    assert_content(c->dest, "ro/sub/deep", "d");
    assert_mode(c->dest, "ro", S_IFDIR | 0555);
    assert_mode(c->dest, "ro/sub", S_IFDIR | 0500);
    assert_whiteout(c->dest, "ro/old");
    assert_true(has_opaque(c->dest, "ro/sub"));
    /* And such a tree can be removed again (by its owner). */
    char ro[PATH_MAX];
    path_in(ro, sizeof(ro), c->dest, "ro");
    if (geteuid() == 0)
        assert_int_equal(run_as_nobody(c->dest, remove_tree, ro), 0);
    else
        assert_int_equal(rm_tree(ro), 0);
    assert_int_equal(access(ro, F_OK), -1);
    assert_int_equal(count_entries(c->dest), 0);
}

static void test_truncated_and_garbage(void **state)
{
    struct ctx *c = *state;
    struct layer l;
    layer_begin(&l, "gzip");
    char big[8192];
    /* Incompressible-ish content, so that the gzip stream is long enough to cut. */
    for (size_t i = 0; i < sizeof(big) - 1; i++)
        big[i] = (char)('a' + (i * 7919 + i / 13) % 26);
    big[sizeof(big) - 1] = '\0';
    add_file(&l, "a", 0644, big);
    add_file(&l, "b", 0644, big);
    int fd = layer_end(&l);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_int_equal(ftruncate(fd, st.st_size / 2), 0);
    struct errmsg e = {""};
    int r = unpack_layer(fd, c->dest, NULL, &e);
    close(fd);
    assert_int_equal(r, -EINVAL);
    assert_non_null(strstr(e.text, "layer"));

    fd = memfd_create("garbage", MFD_CLOEXEC);
    assert_int_equal(write(fd, big, 3000), 3000);
    assert_int_equal(lseek(fd, 0, SEEK_SET), 0);
    assert_int_equal(unpack_layer(fd, c->dest, NULL, &e), -EINVAL);
    close(fd);
    assert_contained(c);
}

/* In a private mount namespace: a 64 KiB tmpfs, and a layer with a 1 MiB file. Exit status 0
 * if unpack failed with -ENOSPC naming the entry, 2 to skip (no namespaces here). */
static int unpack_into_small_tmpfs(void *arg)
{
    const char *dest = arg;
    if (enter_mount_namespace() < 0 || mount("tmpfs", dest, "tmpfs", 0, "size=64k") < 0)
        return 2;
    struct layer l;
    layer_begin(&l, "gzip");
    size_t n = 1 << 20;
    char *data = malloc(n + 1);
    memset(data, 'z', n);
    data[n] = '\0';
    add_file(&l, "big/file", 0644, data);
    free(data);
    struct errmsg e = {""};
    int r = unpack_into(dest, &l, NULL, &e);
    if (r == -ENOSPC && strstr(e.text, "big/file"))
        return 0;
    fprintf(stderr, "expected -ENOSPC: %d %s\n", r, e.text);
    return 1;
}

/* A layer bomb: its files may hold max_bytes at most, and an unpack stops short of the reserve
 * of free space (checked every 64 MiB). */
static void test_bounded(void **state)
{
    struct ctx *c = *state;
    struct layer l;
    layer_begin(&l, "gzip");
    char small[2001];
    memset(small, 'b', 2000);
    small[2000] = '\0';
    add_file(&l, "bomb/small", 0644, small);
    int fd = layer_end(&l);
    struct errmsg e = {""};
    assert_int_equal(unpack_layer_bounded(fd, c->dest, 1000, 0, NULL, &e), -EFBIG);
    assert_non_null(strstr(e.text, "layer entry 'bomb/small': the layer unpacks to more than"));
    assert_non_null(strstr(e.text, "max_unpacked_size"));
    close(fd);

    char dest2[PATH_MAX];
    snprintf(dest2, sizeof(dest2), "%s/second", c->dest);
    assert_int_equal(mkdir(dest2, 0755), 0);
    layer_begin(&l, "gzip");
    size_t n = 65u << 20;
    char *zeros = malloc(n + 1);
    assert_non_null(zeros);
    memset(zeros, '0', n);
    zeros[n] = '\0';
    add_file(&l, "bomb/big", 0644, zeros);
    free(zeros);
    fd = layer_end(&l);
    /* No file system has that much free: the first check past 64 MiB stops it. */
    assert_int_equal(unpack_layer_bounded(fd, dest2, 0, UINT64_MAX, NULL, &e), -ENOSPC);
    assert_non_null(strstr(e.text, "would be left free on the cache's file system"));
    close(fd);
}

static void test_no_space(void **state)
{
    struct ctx *c = *state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(unpack_into_small_tmpfs(c->dest));
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 2)
        test_skip("cannot mount a tmpfs in a private mount namespace here");
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- the merge fallback against overlayfs ---- */

static void build_merge_layers(struct layer l[3])
{
    layer_begin(&l[0], "gzip");
    add_dir(&l[0], "a", 0755);
    add_file(&l[0], "a/f1", 0644, "1");
    add_file(&l[0], "a/f2", 0644, "2");
    add_dir(&l[0], "b", 0755);
    add_file(&l[0], "b/x", 0644, "x");
    add_file(&l[0], "c", 0644, "c-file");
    add_symlink(&l[0], "d", "a");
    add_file(&l[0], "e/deep/file", 0644, "deep");
    add_file(&l[0], "h1", 0644, "hard");
    add_hardlink(&l[0], "h2", "h1");
    add_dir(&l[0], "ro", 0555);
    add_file(&l[0], "ro/in", 0644, "in");
    add_file(&l[0], "secret", 0000, "s");
    layer_entry(&l[0], "p", AE_IFIFO, 0640, NULL, NULL, NULL, 0);

    layer_begin(&l[1], "zstd");
    add_dir(&l[1], "a", 0700);
    add_file(&l[1], "a/.wh.f1", 0644, NULL);
    add_dir(&l[1], "b", 0750);
    add_file(&l[1], "b/.wh..wh..opq", 0644, NULL);
    add_file(&l[1], "b/y", 0644, "y");
    add_dir(&l[1], "c", 0755);
    add_file(&l[1], "c/z", 0644, "z");
    add_file(&l[1], "e/.wh.deep", 0644, NULL);
    add_file(&l[1], ".wh.d", 0644, NULL);
    add_dir(&l[1], "ro", 0555);
    add_file(&l[1], "ro/new", 0600, "new");

    layer_begin(&l[2], "none");
    add_file(&l[2], "a/f1", 0644, "1-again"); /* "a" itself comes implicitly */
    add_file(&l[2], "d", 0644, "now a file");
    add_dir(&l[2], "e/deep", 0711);
    add_file(&l[2], "e/deep/other", 0644, "other");
    add_file(&l[2], "c/z2", 0644, "z2");
    add_file(&l[2], "p", 0644, "no longer a fifo");
}

/* Unpacks the three layers into dest/l1..l3 and merges them into dest/merged; exit status. */
static int unpack_and_merge(void *arg)
{
    const char *dest = arg;
    struct layer l[3];
    build_merge_layers(l);
    char dir[PATH_MAX], merged[PATH_MAX];
    path_in(merged, sizeof(merged), dest, "merged");
    if (mkdir(merged, 0755) < 0)
        return 1;
    for (int i = 0; i < 3; i++) {
        snprintf(dir, sizeof(dir), "%s/l%d", dest, i + 1);
        struct errmsg e = {""};
        if (mkdir(dir, 0755) < 0 || unpack_into(dir, &l[i], NULL, &e) < 0 ||
            unpack_merge_layer(dir, merged, &e) < 0) {
            fprintf(stderr, "layer %d: %s\n", i + 1, e.text);
            return 1;
        }
    }
    return 0;
}

static bool same_entry(const char *a, const char *b, const char *rel)
{
    struct stat x, y;
    if (lstat(a, &x) < 0 || lstat(b, &y) < 0) {
        fprintf(stderr, "%s: missing on one side\n", rel);
        return false;
    }
    if (x.st_mode != y.st_mode || x.st_mtim.tv_sec != y.st_mtim.tv_sec ||
        x.st_mtim.tv_nsec != y.st_mtim.tv_nsec || (!S_ISDIR(x.st_mode) && x.st_size != y.st_size)) {
        fprintf(stderr, "%s: mode %o/%o mtime %ld/%ld size %ld/%ld\n", rel, x.st_mode, y.st_mode,
                (long)x.st_mtime, (long)y.st_mtime, (long)x.st_size, (long)y.st_size);
        return false;
    }
    char p[PATH_MAX] = "", q[PATH_MAX] = "";
    if (S_ISLNK(x.st_mode) &&
        (readlink(a, p, sizeof(p) - 1) < 0 || readlink(b, q, sizeof(q) - 1) < 0 || strcmp(p, q)))
        return false;
    if (S_ISREG(x.st_mode)) {
        snprintf(p, sizeof(p), "%s", read_file(a) ?: "(unreadable)");
        if (strcmp(p, read_file(b) ?: "(unreadable)") != 0) {
            fprintf(stderr, "%s: contents differ\n", rel);
            return false;
        }
    }
    return true;
}

/* True if the trees under a and b hold the same names, types, modes, times and contents. */
static bool trees_equal(const char *a, const char *b, const char *rel)
{
    DIR *d = opendir(a);
    if (!d)
        return false;
    bool ok = true;
    int n = 0;
    for (struct dirent *de; ok && (de = readdir(d));) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char pa[PATH_MAX], pb[PATH_MAX], r[PATH_MAX];
        path_in(pa, sizeof(pa), a, de->d_name);
        path_in(pb, sizeof(pb), b, de->d_name);
        path_in(r, sizeof(r), rel, de->d_name);
        ok = same_entry(pa, pb, r);
        struct stat st;
        if (ok && lstat(pa, &st) == 0 && S_ISDIR(st.st_mode))
            ok = trees_equal(pa, pb, r);
        n++;
    }
    closedir(d);
    if (ok && n != count_entries(b)) {
        fprintf(stderr, "%s: %d entries against %d\n", rel, n, count_entries(b));
        return false;
    }
    return ok;
}

/* In a private mount namespace, mounts the layers as overlayfs does for a container and
 * compares with the merged copy. Exit status 0 equal, 1 different, 2 no overlay here. */
static int compare_with_overlay(const char *dest)
{
    char mnt[PATH_MAX], merged[PATH_MAX], opts[3 * PATH_MAX];
    path_in(mnt, sizeof(mnt), dest, "mnt");
    path_in(merged, sizeof(merged), dest, "merged");
    snprintf(opts, sizeof(opts), "lowerdir=%s/l3:%s/l2:%s/l1,userxattr", dest, dest, dest);
    if (mkdir(mnt, 0755) < 0 || enter_mount_namespace() < 0)
        return 2;
    if (mount("overlay", mnt, "overlay", MS_RDONLY, opts) < 0) {
        fprintf(stderr, "overlay mount: %m\n");
        return 2;
    }
    return trees_equal(mnt, merged, ".") ? 0 : 1;
}

/* The hostile layers again, unpacked in shared mode: the xattrs go nowhere outside either. */
static void test_shared_hostile(void **state)
{
    shared_mode = true;
    test_hostile_paths(state);
    test_hostile_symlink_escape(state);
    test_hostile_hardlinks(state);
    test_hostile_whiteouts(state);
    test_dir_fixup_not_through_symlink(state);
}

static void test_merge_matches_overlay(void **state)
{
    struct ctx *c = *state;
    int status = geteuid() == 0 ? run_as_nobody(c->dest, unpack_and_merge, c->dest)
                                : unpack_and_merge(c->dest);
    assert_int_equal(status, 0);

    /* What overlayfs would show, by hand. */
    char m[PATH_MAX];
    path_in(m, sizeof(m), c->dest, "merged");
    assert_content(m, "a/f1", "1-again");
    assert_content(m, "a/f2", "2");
    assert_content(m, "b/y", "y");
    assert_absent(m, "b/x");
    assert_mode(m, "b", S_IFDIR | 0750);
    assert_content(m, "c/z", "z");
    assert_content(m, "c/z2", "z2");
    assert_content(m, "d", "now a file");
    assert_absent(m, "e/deep/file");
    assert_content(m, "e/deep/other", "other");
    assert_mode(m, "e/deep", S_IFDIR | 0711);
    assert_content(m, "ro/in", "in");
    assert_content(m, "ro/new", "new");
    assert_mode(m, "ro", S_IFDIR | 0555);
    assert_mode(m, "secret", S_IFREG | 0000);
    assert_mode(m, "p", S_IFREG | 0644);
    assert_mode(c->dest, "l1/secret", S_IFREG | 0000); /* the layer is left as it was */
    struct stat h1, h2;
    path_in(m, sizeof(m), c->dest, "merged/h1");
    assert_int_equal(stat(m, &h1), 0);
    path_in(m, sizeof(m), c->dest, "merged/h2");
    assert_int_equal(stat(m, &h2), 0);
    assert_int_equal(h1.st_ino, h2.st_ino);

    /* And what overlayfs does show. */
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(compare_with_overlay(c->dest));
    int status2;
    assert_int_equal(waitpid(pid, &status2, 0), pid);
    assert_true(WIFEXITED(status2));
    if (WEXITSTATUS(status2) == 2)
        test_skip("cannot mount overlayfs in a private mount namespace here");
    assert_int_equal(WEXITSTATUS(status2), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_ordinary_layers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_empty_layer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_whiteouts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_replacements, setup, teardown),
        cmocka_unit_test_setup_teardown(test_devices_skipped_setid_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_symlink_escape, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_hardlinks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hostile_whiteouts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dir_fixup_not_through_symlink, setup, teardown),
        cmocka_unit_test_setup_teardown(test_readonly_dirs_get_children, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_and_garbage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_space, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(test_merge_matches_overlay, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_modes_and_xattrs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_hardlink_with_data, setup, teardown),
        cmocka_unit_test_setup_teardown(test_private_has_no_override, setup, teardown),
        cmocka_unit_test_setup_teardown(test_shared_hostile, setup, teardown),
    };
    return test_run_cases(tests);
}
