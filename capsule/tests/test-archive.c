/* Tests for capsule/store/archive.c: a tree exported as an oci-archive is what tar, skopeo and
 * archive_import read back (files, modes, links, owners); a mount inside the tree is not
 * descended; broken and hostile archives are refused with a message and no image left behind;
 * a failed export leaves nothing at its path. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"
#include "test-ns.h"

#include "test-fs.h"
#include "test-skip.h"

#include "capsule/image/digest.h"
#include "capsule/image/manifest.h"
#include "capsule/store/archive.h"
#include "capsule/store/store.h"
#include "lib/macro.h"
#include "lib/rm-tree.h"

#define T_MTIME 1500000000
#define NAME    "localhost/saved:latest"

struct ctx {
    char base[64];
    char tree[128];
    char out[128];   /* where exports go */
    char store[128]; /* the cache */
    struct store *s;
};

static int setup(void **state)
{
    struct ctx *c = calloc(1, sizeof(*c));
    snprintf(c->base, sizeof(c->base), "/tmp/test-archive.XXXXXX");
    if (!mkdtemp(c->base) || chmod(c->base, 0755) < 0)
        return -1;
    snprintf(c->tree, sizeof(c->tree), "%s/tree", c->base);
    snprintf(c->out, sizeof(c->out), "%s/saved.tar", c->base);
    snprintf(c->store, sizeof(c->store), "%s/cache", c->base);
    struct errmsg e = {""};
    if (mkdir(c->tree, 0755) < 0 || store_open(c->store, &c->s, &e) < 0) {
        fprintf(stderr, "%s\n", e.text);
        return -1;
    }
    *state = c;
    return 0;
}

static int teardown(void **state)
{
    struct ctx *c = *state;
    store_free(c->s);
    int r = rm_tree(c->base);
    free(c);
    return r;
}

/* ---- the tree ---- */

static void in_tree(const struct ctx *c, const char *rel, char out[PATH_MAX])
{
    if (snprintf(out, PATH_MAX, "%s/%s", c->tree, rel) >= PATH_MAX)
        fail_msg("path too long: %s", rel);
}

static void make_dir(const struct ctx *c, const char *rel, mode_t mode)
{
    char p[PATH_MAX];
    in_tree(c, rel, p);
    assert_int_equal(mkdir(p, 0700), 0);
    assert_int_equal(chmod(p, mode), 0);
}

static void make_file(const struct ctx *c, const char *rel, mode_t mode, const char *data)
{
    char p[PATH_MAX];
    in_tree(c, rel, p);
    write_file(p, data);
    assert_int_equal(chmod(p, mode), 0);
}

static void set_mtime(const struct ctx *c, const char *rel)
{
    char p[PATH_MAX];
    in_tree(c, rel, p);
    struct timespec ts[2] = {{T_MTIME, 0}, {T_MTIME, 0}};
    assert_int_equal(utimensat(AT_FDCWD, p, ts, AT_SYMLINK_NOFOLLOW), 0);
}

/* What a container's root holds, one of each kind. */
static void make_tree(const struct ctx *c)
{
    char p[PATH_MAX], q[PATH_MAX];
    make_dir(c, "bin", 0755);
    make_file(c, "bin/su", 04755, "su-binary\n");
    in_tree(c, "bin/su", p);
    in_tree(c, "bin/su-again", q);
    assert_int_equal(link(p, q), 0);
    in_tree(c, "bin/sh", p);
    assert_int_equal(symlink("busybox", p), 0);
    make_dir(c, "etc", 0755);
    make_file(c, "etc/hostname", 0644, "box\n");
    make_file(c, "etc/hosts", 0644, "127.0.0.1 image\n");
    set_mtime(c, "etc/hostname");
    make_dir(c, "empty", 0700);
    make_dir(c, "a", 0755);
    make_dir(c, "a/b", 0755);
    make_dir(c, "a/b/c", 0750);
    make_file(c, "a/b/c/nested", 0600, "deep\n");
    set_mtime(c, "a/b");
    make_dir(c, "tmp", 01777);
    make_dir(c, "shared", 02775);
    make_dir(c, "mnt", 0755);
    in_tree(c, "run.fifo", p);
    assert_int_equal(mkfifo(p, 0600), 0);
    assert_int_equal(chmod(p, 0600), 0);
    /* A socket and a device node: neither belongs in an image. */
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    in_tree(c, "run.sock", p);
    assert_true(strlen(p) < sizeof(sa.sun_path));
    strcpy(sa.sun_path, p);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    close(fd);
    make_dir(c, "dev", 0755);
    in_tree(c, "dev/null", p);
    (void)mknod(p, S_IFCHR | 0666, makedev(1, 3)); /* root only; the check allows either */
}

static int export_to(const struct ctx *c, const char *out, const char *arch, struct errmsg *e)
{
    char *env[] = {"PATH=/usr/bin:/bin", "LANG=C.UTF-8", NULL};
    char *cmd[] = {"/bin/sh", "-c", "echo hi", NULL};
    char *entrypoint[] = {"/entry", NULL};
    struct archive_export_opts o = {.env = env,
                                    .entrypoint = entrypoint,
                                    .cmd = cmd,
                                    .working_dir = "/work",
                                    .ref_name = "latest",
                                    .architecture = arch};
    int fd = open(c->tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    int r = archive_export_rootfs(fd, out, &o, e);
    close(fd);
    if (r < 0 && getenv("TEST_VERBOSE"))
        fprintf(stderr, "%s\n", e->text);
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

/* ---- archives as member lists ---- */

struct member {
    char *name;
    mode_t type;
    char *data;
    size_t len;
};

struct members {
    struct member m[64];
    size_t n;
};

static void members_done(struct members *ms)
{
    for (size_t i = 0; i < ms->n; i++) {
        free(ms->m[i].name);
        free(ms->m[i].data);
    }
    ms->n = 0;
}

static void members_add(struct members *ms, const char *name, mode_t type, const void *data,
                        size_t len)
{
    assert_true(ms->n < ELEMENTSOF(ms->m));
    struct member *m = &ms->m[ms->n++];
    m->name = strdup(name);
    m->type = type;
    m->data = malloc(len + 1);
    assert_non_null(m->data);
    memcpy(m->data, data, len);
    m->data[len] = '\0';
    m->len = len;
}

static void read_members(const char *path, struct members *ms)
{
    struct archive *a = archive_read_new();
    assert_int_equal(archive_read_support_format_tar(a), ARCHIVE_OK);
    assert_int_equal(archive_read_open_filename(a, path, 10240), ARCHIVE_OK);
    struct archive_entry *entry;
    while (archive_read_next_header(a, &entry) == ARCHIVE_OK) {
        size_t len = (size_t)archive_entry_size(entry);
        char *data = malloc(len + 1);
        assert_non_null(data);
        assert_int_equal(archive_read_data(a, data, len), (la_ssize_t)len);
        members_add(ms, archive_entry_pathname(entry), archive_entry_filetype(entry), data, len);
        free(data);
    }
    archive_read_free(a);
}

static void write_members(const char *path, const struct members *ms)
{
    struct archive *a = archive_write_new();
    assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
    assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
    for (size_t i = 0; i < ms->n; i++) {
        struct archive_entry *entry = archive_entry_new();
        archive_entry_set_pathname(entry, ms->m[i].name);
        archive_entry_set_filetype(entry, ms->m[i].type);
        archive_entry_set_perm(entry, ms->m[i].type == AE_IFDIR ? 0755 : 0644);
        archive_entry_set_size(entry, (la_int64_t)ms->m[i].len);
        assert_int_equal(archive_write_header(a, entry), ARCHIVE_OK);
        if (ms->m[i].len)
            assert_int_equal(archive_write_data(a, ms->m[i].data, ms->m[i].len),
                             (la_ssize_t)ms->m[i].len);
        archive_entry_free(entry);
    }
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

static struct member *member_find(struct members *ms, const char *name)
{
    for (size_t i = 0; i < ms->n; i++)
        if (strcmp(ms->m[i].name, name) == 0)
            return &ms->m[i];
    return NULL;
}

static struct member *blob_find(struct members *ms, const char *digest)
{
    char name[PATH_MAX];
    snprintf(name, sizeof(name), "blobs/sha256/%s", digest_hex(digest));
    struct member *m = member_find(ms, name);
    assert_non_null(m);
    return m;
}

/* The image manifest of an exported archive (index.json's only entry). */
static void archive_manifest(struct members *ms, struct manifest *ret,
                             char digest[DIGEST_STRING_MAX])
{
    struct member *idx = member_find(ms, "index.json");
    assert_non_null(idx);
    struct manifest index = {0};
    struct errmsg e = {""};
    assert_int_equal(manifest_parse(idx->data, idx->len, NULL, &index, &e), 0);
    assert_int_equal(index.kind, MANIFEST_INDEX);
    assert_int_equal(index.n_manifests, 1);
    snprintf(digest, DIGEST_STRING_MAX, "%s", index.manifests[0].digest);
    struct member *m = blob_find(ms, index.manifests[0].digest);
    assert_int_equal(manifest_parse(m->data, m->len, NULL, ret, &e), 0);
    assert_int_equal(ret->kind, MANIFEST_IMAGE);
    manifest_done(&index);
}

/* ---- the layer as the archive has it ---- */

struct layer_entry {
    char name[256];
    mode_t mode; /* type and permission bits */
    int64_t uid, gid, size;
    time_t mtime;
    char symlink[256], hardlink[256];
};

struct listing {
    struct layer_entry e[64];
    size_t n;
};

static void list_layer(const char *archive_path, struct listing *l)
{
    struct members ms = {0};
    read_members(archive_path, &ms);
    struct manifest m = {0};
    char digest[DIGEST_STRING_MAX];
    archive_manifest(&ms, &m, digest);
    assert_int_equal(m.n_layers, 1);
    assert_string_equal(m.layers[0].media_type, MEDIA_OCI_LAYER_GZIP);
    struct member *blob = blob_find(&ms, m.layers[0].digest);
    assert_int_equal(blob->len, m.layers[0].size);
    struct archive *a = archive_read_new();
    assert_int_equal(archive_read_support_filter_gzip(a), ARCHIVE_OK);
    assert_int_equal(archive_read_support_format_tar(a), ARCHIVE_OK);
    assert_int_equal(archive_read_open_memory(a, blob->data, blob->len), ARCHIVE_OK);
    struct archive_entry *entry;
    l->n = 0;
    while (archive_read_next_header(a, &entry) == ARCHIVE_OK) {
        assert_true(l->n < ELEMENTSOF(l->e));
        struct layer_entry *le = &l->e[l->n++];
        snprintf(le->name, sizeof(le->name), "%s", archive_entry_pathname(entry));
        size_t n = strlen(le->name);
        if (n > 1 && le->name[n - 1] == '/')
            le->name[n - 1] = '\0';
        le->mode = archive_entry_mode(entry);
        le->uid = archive_entry_uid(entry);
        le->gid = archive_entry_gid(entry);
        le->size = archive_entry_size(entry);
        le->mtime = archive_entry_mtime(entry);
        snprintf(le->symlink, sizeof(le->symlink), "%s", archive_entry_symlink(entry) ?: "");
        snprintf(le->hardlink, sizeof(le->hardlink), "%s", archive_entry_hardlink(entry) ?: "");
    }
    assert_int_equal(archive_read_free(a), ARCHIVE_OK);
    manifest_done(&m);
    members_done(&ms);
}

static const struct layer_entry *entry_find(const struct listing *l, const char *name)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->e[i].name, name) == 0)
            return &l->e[i];
    return NULL;
}

static const struct layer_entry *entry_get(const struct listing *l, const char *name)
{
    const struct layer_entry *le = entry_find(l, name);
    if (!le)
        fail_msg("the layer has no '%s'", name);
    return le;
}

static void check_listing(const struct listing *l)
{
    for (size_t i = 0; i < l->n; i++) {
        assert_int_equal(l->e[i].uid, 0);
        assert_int_equal(l->e[i].gid, 0);
        assert_true(l->e[i].name[0] && strcmp(l->e[i].name, ".") && l->e[i].name[0] != '/');
    }
    const struct layer_entry *su = entry_get(l, "bin/su");
    assert_int_equal(su->mode, AE_IFREG | 04755);
    assert_int_equal(su->size, strlen("su-binary\n"));
    const struct layer_entry *again = entry_get(l, "bin/su-again");
    assert_string_equal(again->hardlink, "bin/su");
    assert_int_equal(again->size, 0);
    const struct layer_entry *sh = entry_get(l, "bin/sh");
    assert_int_equal(sh->mode & AE_IFMT, AE_IFLNK);
    assert_string_equal(sh->symlink, "busybox");
    assert_int_equal(entry_get(l, "empty")->mode, AE_IFDIR | 0700);
    assert_int_equal(entry_get(l, "a/b/c")->mode, AE_IFDIR | 0750);
    assert_int_equal(entry_get(l, "a/b/c/nested")->mode, AE_IFREG | 0600);
    assert_int_equal(entry_get(l, "a/b")->mtime, T_MTIME);
    assert_int_equal(entry_get(l, "etc/hostname")->mtime, T_MTIME);
    assert_int_equal(entry_get(l, "tmp")->mode, AE_IFDIR | 01777);
    assert_int_equal(entry_get(l, "shared")->mode, AE_IFDIR | 02775);
    assert_int_equal(entry_get(l, "run.fifo")->mode, AE_IFIFO | 0600);
    assert_int_equal(entry_get(l, "dev")->mode, AE_IFDIR | 0755);
    assert_null(entry_find(l, "run.sock"));
    assert_null(entry_find(l, "dev/null"));
}

/* ---- the layer as the store has it ---- */

static void path_in(char *buf, const char *dir, const char *rel)
{
    if (snprintf(buf, PATH_MAX, "%s/%s", dir, rel) >= PATH_MAX)
        fail_msg("path too long: %s/%s", dir, rel);
}

static struct stat lstat_in(const char *dir, const char *rel)
{
    char p[PATH_MAX];
    struct stat st;
    path_in(p, dir, rel);
    if (lstat(p, &st) < 0)
        fail_msg("'%s': %s", p, strerror(errno));
    return st;
}

static void assert_content(const char *dir, const char *rel, const char *want)
{
    char p[PATH_MAX], buf[256];
    path_in(p, dir, rel);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    assert_true(n >= 0);
    buf[n] = '\0';
    assert_string_equal(buf, want);
}

static void check_unpacked(const char *layer)
{
    assert_content(layer, "etc/hostname", "box\n");
    assert_content(layer, "a/b/c/nested", "deep\n");
    assert_content(layer, "bin/su", "su-binary\n");
    /* unpack.h: setuid and setgid bits are dropped when a layer is unpacked. */
    assert_int_equal(lstat_in(layer, "bin/su").st_mode, S_IFREG | 0755);
    assert_int_equal(lstat_in(layer, "bin/su").st_ino, lstat_in(layer, "bin/su-again").st_ino);
    assert_int_equal(lstat_in(layer, "bin/su").st_nlink, 2);
    assert_int_equal(lstat_in(layer, "a/b/c/nested").st_mode, S_IFREG | 0600);
    assert_int_equal(lstat_in(layer, "empty").st_mode, S_IFDIR | 0700);
    assert_int_equal(count_entries(layer) > 0, 1);
    char p[PATH_MAX], link[64];
    path_in(p, layer, "empty");
    assert_int_equal(count_entries(p), 0);
    assert_int_equal(lstat_in(layer, "tmp").st_mode, S_IFDIR | 01777);
    assert_int_equal(lstat_in(layer, "shared").st_mode, S_IFDIR | 0775);
    assert_int_equal(lstat_in(layer, "run.fifo").st_mode, S_IFIFO | 0600);
    assert_int_equal(lstat_in(layer, "etc/hostname").st_mtime, T_MTIME);
    assert_int_equal(lstat_in(layer, "a/b").st_mtime, T_MTIME);
    path_in(p, layer, "bin/sh");
    ssize_t n = readlink(p, link, sizeof(link) - 1);
    assert_int_equal(n, 7);
    link[n] = '\0';
    assert_string_equal(link, "busybox");
    path_in(p, layer, "run.sock");
    assert_false(exists(p));
    path_in(p, layer, "dev/null");
    assert_false(exists(p));
}

static void check_config(struct store *s, const struct image_record *rec)
{
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    struct errmsg e = {""};
    assert_int_equal(store_blob_read(s, rec->config_digest, 1 << 20, &data, &len, &e), 0);
    struct image_config cfg = {0};
    assert_int_equal(image_config_parse(data, len, &cfg, &e), 0);
    assert_string_equal(cfg.architecture, "amd64");
    assert_string_equal(cfg.os, "linux");
    assert_string_equal(cfg.env[0], "PATH=/usr/bin:/bin");
    assert_string_equal(cfg.env[1], "LANG=C.UTF-8");
    assert_null(cfg.env[2]);
    assert_string_equal(cfg.entrypoint[0], "/entry");
    assert_string_equal(cfg.cmd[2], "echo hi");
    assert_string_equal(cfg.working_dir, "/work");
    assert_int_equal(cfg.n_diff_ids, 1);
    image_config_done(&cfg);
}

/* No image record at all: what a failed import must leave. */
static void assert_no_image(struct store *s)
{
    struct image_record *list = NULL;
    size_t n = 99;
    struct errmsg e = {""};
    assert_int_equal(store_image_list(s, &list, &n, &e), 0);
    assert_int_equal(n, 0);
    free(list);
}

static void assert_import_fails(struct ctx *c, const char *path, int want, const char *what)
{
    struct errmsg e = {""};
    struct image_record rec = {0};
    int r = archive_import(c->s, path, NAME, NULL, &rec, &e);
    if (getenv("TEST_VERBOSE"))
        fprintf(stderr, "%s\n", e.text);
    if (r != want || !strstr(e.text, what) || !strstr(e.text, path))
        fail_msg("import of '%s': got %d '%s', want %d and '%s'", path, r, e.text, want, what);
    assert_no_image(c->s);
}

/* ---- export, then import ---- */

static void test_roundtrip(void **state)
{
    struct ctx *c = *state;
    make_tree(c);
    struct errmsg e = {""};
    mode_t old = umask(0);
    assert_int_equal(export_to(c, c->out, "amd64", &e), 0);
    umask(old);
    struct stat st;
    assert_int_equal(stat(c->out, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0600);
    /* tree, cache, the archive: no temporary file stays beside it */
    assert_int_equal(count_entries(c->base), 3);
    assert_true(st.st_size < 16384);

    struct listing l;
    list_layer(c->out, &l);
    check_listing(&l);

    struct image_record rec = {0};
    assert_int_equal(archive_import(c->s, c->out, NAME, NULL, &rec, &e), 0);
    assert_string_equal(rec.name, NAME);
    assert_int_equal(rec.n_layers, 1);
    _cleanup_free_ char *layer = NULL;
    assert_int_equal(store_layer_path(c->s, rec.layers[0], &layer), 0);
    check_unpacked(layer);
    check_config(c->s, &rec);
    assert_true(store_has_blob(c->s, rec.manifest_digest));
    assert_true(store_has_blob(c->s, rec.config_digest));
    assert_false(store_has_blob(c->s, rec.layers[0])); /* dropped once unpacked, as a pull does */

    struct image_record loaded = {0};
    assert_int_equal(store_image_load(c->s, NAME, &loaded, &e), 0);
    assert_string_equal(loaded.config_digest, rec.config_digest);
    assert_string_equal(loaded.layers[0], rec.layers[0]);
    image_record_done(&loaded);

    /* The same tree gives the same layer, which the store then has already; a container that
     * uses it (holding its lock shared) does not make the import wait (alarm: a hang fails). */
    char again[PATH_MAX];
    snprintf(again, sizeof(again), "%s/again.tar", c->base);
    assert_int_equal(export_to(c, again, "amd64", &e), 0);
    int lock_fd = -1;
    assert_int_equal(store_layer_lock(c->s, rec.layers[0], false, true, &lock_fd, &e), 0);
    alarm(60);
    struct image_record rec2 = {0};
    assert_int_equal(archive_import(c->s, again, "localhost/again:1", NULL, &rec2, &e), 0);
    alarm(0);
    close(lock_fd);
    assert_string_equal(rec2.layers[0], rec.layers[0]);
    image_record_done(&rec2);
    image_record_done(&rec);
}

/* Reads a command's whole output; returns its exit status. */
static int run_command(const char *cmd, char *out, size_t size)
{
    FILE *f = popen(cmd, "r");
    assert_non_null(f);
    size_t n = fread(out, 1, size - 1, f);
    out[n] = '\0';
    int status = pclose(f);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

static void test_tar_reads_it(void **state)
{
    struct ctx *c = *state;
    make_tree(c);
    struct errmsg e = {""};
    assert_int_equal(export_to(c, c->out, "amd64", &e), 0);
    char cmd[PATH_MAX + 64], out[8192];
    snprintf(cmd, sizeof(cmd), "tar -tf '%s' 2>&1", c->out);
    assert_int_equal(run_command(cmd, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "oci-layout\n"));
    assert_non_null(strstr(out, "index.json\n"));
    assert_non_null(strstr(out, "blobs/sha256/"));
}

static bool have_skopeo(void)
{
    return system("skopeo --version >/dev/null 2>&1") == 0;
}

/* skopeo reads what capsule writes, and capsule imports what skopeo writes. */
static void test_skopeo(void **state)
{
    struct ctx *c = *state;
    if (!have_skopeo())
        test_skip("skopeo is not installed");
    make_tree(c);
    struct errmsg e = {""};
    assert_int_equal(export_to(c, c->out, "amd64", &e), 0);
    char cmd[3 * PATH_MAX], out[16384], copy[PATH_MAX];
    snprintf(cmd, sizeof(cmd), "skopeo inspect oci-archive:'%s' 2>&1", c->out);
    int r = run_command(cmd, out, sizeof(out));
    if (r != 0)
        fail_msg("%s: %s", cmd, out);
    assert_non_null(strstr(out, "\"Architecture\": \"amd64\""));
    assert_non_null(strstr(out, "LANG=C.UTF-8"));

    snprintf(copy, sizeof(copy), "%s/by-skopeo.tar", c->base);
    snprintf(cmd, sizeof(cmd),
             "skopeo --insecure-policy copy -q oci-archive:'%s' oci-archive:'%s':v1 2>&1", c->out,
             copy);
    r = run_command(cmd, out, sizeof(out));
    if (r != 0)
        fail_msg("%s: %s", cmd, out);
    struct image_record rec = {0};
    r = archive_import(c->s, copy, NAME, NULL, &rec, &e);
    if (r != 0)
        fail_msg("%s", e.text);
    _cleanup_free_ char *layer = NULL;
    assert_int_equal(store_layer_path(c->s, rec.layers[0], &layer), 0);
    check_unpacked(layer);
    check_config(c->s, &rec);
    image_record_done(&rec);
}

/* The child: a tmpfs on mnt/ with a file in it, a file bound over etc/hosts, then the export.
 * Exits 0, 77 where mounts cannot be made, else 1. */
static int export_with_mounts(const struct ctx *c)
{
    char mnt[PATH_MAX], inside[PATH_MAX], hosts[PATH_MAX], source[PATH_MAX];
    in_tree(c, "mnt", mnt);
    in_tree(c, "mnt/inside", inside);
    in_tree(c, "etc/hosts", hosts);
    snprintf(source, sizeof(source), "%s/host-hosts", c->base);
    if (enter_mount_namespace() < 0 || mount("tmpfs", mnt, "tmpfs", 0, "mode=0751") < 0)
        return 77;
    int fd = open(source, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, "host\n", 5) != 5 || close(fd) < 0 ||
        mount(source, hosts, NULL, MS_BIND, NULL) < 0)
        return 77;
    fd = open(inside, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0 || write(fd, "tmpfs\n", 6) != 6 || close(fd) < 0)
        return 1;
    struct errmsg e = {""};
    if (export_to(c, c->out, "amd64", &e) < 0) {
        fprintf(stderr, "%s\n", e.text);
        return 1;
    }
    return 0;
}

static void test_mounts_not_descended(void **state)
{
    struct ctx *c = *state;
    make_tree(c);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0)
        _exit(export_with_mounts(c));
    int status = child_status(pid);
    if (status == 77)
        test_skip("no mount namespace here to make a mount in");
    assert_int_equal(status, 0);
    struct listing l;
    list_layer(c->out, &l);
    /* The tmpfs's root, as the container saw it, empty. */
    assert_int_equal(entry_get(&l, "mnt")->mode, AE_IFDIR | 0751);
    assert_null(entry_find(&l, "mnt/inside"));
    /* A file mounted over stays, empty, so that the runtime can mount it again. */
    const struct layer_entry *hosts = entry_get(&l, "etc/hosts");
    assert_int_equal(hosts->mode & AE_IFMT, AE_IFREG);
    assert_int_equal(hosts->size, 0);
    assert_int_equal(entry_get(&l, "etc/hostname")->size, 4);
}

/* ---- failed exports ---- */

/* A chain of directories whose path is longer than PATH_MAX. */
static void make_deep_tree(const struct ctx *c)
{
    char name[201];
    memset(name, 'd', sizeof(name) - 1);
    name[sizeof(name) - 1] = '\0';
    int fd = open(c->tree, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(fd >= 0);
    for (int i = 0; i < 24; i++) {
        assert_int_equal(mkdirat(fd, name, 0755), 0);
        int next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(next >= 0);
        close(fd);
        fd = next;
    }
    close(fd);
}

static void test_failed_export_leaves_nothing(void **state)
{
    struct ctx *c = *state;
    make_file(c, "first", 0644, "x");
    make_deep_tree(c);
    int before = count_entries(c->base);
    struct errmsg e = {""};
    assert_int_equal(export_to(c, c->out, "amd64", &e), -ENAMETOOLONG);
    assert_non_null(strstr(e.text, c->out));
    assert_non_null(strstr(e.text, "/dddd"));
    assert_false(exists(c->out));
    assert_int_equal(count_entries(c->base), before);

    /* An older archive at the path stays as it was. */
    write_file(c->out, "old");
    e.text[0] = '\0';
    assert_int_equal(export_to(c, c->out, "amd64", &e), -ENAMETOOLONG);
    char buf[8] = "";
    int fd = open(c->out, O_RDONLY | O_CLOEXEC);
    assert_int_equal(read(fd, buf, sizeof(buf)), 3);
    close(fd);
    assert_string_equal(buf, "old");
    assert_int_equal(count_entries(c->base), before + 1);

    /* Without an architecture there is no image config to write. */
    unlink(c->out);
    assert_int_equal(export_to(c, c->out, NULL, &e), -EINVAL);
    assert_false(exists(c->out));

    /* A directory that does not exist to write into. */
    char nowhere[PATH_MAX];
    snprintf(nowhere, sizeof(nowhere), "%s/no/such/dir/x.tar", c->base);
    e.text[0] = '\0';
    assert_int_equal(export_to(c, nowhere, "amd64", &e), -ENOENT);
    assert_non_null(strstr(e.text, nowhere));
}

/* ---- bad archives ---- */

static void test_import_garbage(void **state)
{
    struct ctx *c = *state;
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/garbage.tar", c->base);
    char junk[4096];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (char)(i * 7 + 3);
    int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    assert_int_equal(write(fd, junk, sizeof(junk)), (ssize_t)sizeof(junk));
    close(fd);
    assert_import_fails(c, path, -EBADMSG, "not a tar");

    write_file(path, "");
    assert_import_fails(c, path, -EBADMSG, "");

    snprintf(path, sizeof(path), "%s/absent.tar", c->base);
    assert_import_fails(c, path, -ENOENT, "");
}

/* The exported archive as members, for tests that break it. */
static void exported_members(struct ctx *c, struct members *ms)
{
    make_tree(c);
    struct errmsg e = {""};
    assert_int_equal(export_to(c, c->out, "amd64", &e), 0);
    read_members(c->out, ms);
}

static void test_import_corrupt_blobs(void **state)
{
    struct ctx *c = *state;
    struct members ms = {0};
    exported_members(c, &ms);
    struct manifest m = {0};
    char digest[DIGEST_STRING_MAX];
    archive_manifest(&ms, &m, digest);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/broken.tar", c->base);

    /* One byte of the layer changed. */
    struct member *layer = blob_find(&ms, m.layers[0].digest);
    layer->data[layer->len / 2] ^= 0x20;
    write_members(path, &ms);
    assert_import_fails(c, path, -EBADMSG, "digest mismatch");
    assert_false(store_has_layer(c->s, m.layers[0].digest));
    assert_false(store_has_blob(c->s, m.layers[0].digest));
    layer->data[layer->len / 2] ^= 0x20;

    /* The config's bytes changed, its length kept. */
    struct member *config = blob_find(&ms, m.config.digest);
    char *arch = strstr(config->data, "amd64");
    assert_non_null(arch);
    memcpy(arch, "arm64", 5);
    write_members(path, &ms);
    assert_import_fails(c, path, -EBADMSG, "config");
    memcpy(arch, "amd64", 5);

    /* A layer missing. */
    layer->name[0] = 'x';
    write_members(path, &ms);
    assert_import_fails(c, path, -EBADMSG, "not in the archive");
    layer->name[0] = 'b';

    /* No index.json. */
    member_find(&ms, "index.json")->name[0] = 'X';
    write_members(path, &ms);
    assert_import_fails(c, path, -EBADMSG, "index.json");
    manifest_done(&m);
    members_done(&ms);
}

static void test_import_hostile_names(void **state)
{
    struct ctx *c = *state;
    struct members ms = {0};
    exported_members(c, &ms);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/hostile.tar", c->base);
    const char *names[] = {"../evil", "blobs/../../evil", "/etc/evil", "./blobs/sha256/../../.."};
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        members_add(&ms, names[i], AE_IFREG, "x", 1);
        write_members(path, &ms);
        assert_import_fails(c, path, -EINVAL, names[i]);
        free(ms.m[--ms.n].name);
        free(ms.m[ms.n].data);
    }
    /* A second index.json, which tar would let win over the first. */
    struct member *idx = member_find(&ms, "index.json");
    members_add(&ms, "./index.json", AE_IFREG, idx->data, idx->len);
    write_members(path, &ms);
    assert_import_fails(c, path, -EBADMSG, "twice");
    members_done(&ms);
}

static void test_import_limits(void **state)
{
    struct ctx *c = *state;
    make_tree(c);
    struct errmsg e = {""};
    assert_int_equal(export_to(c, c->out, "amd64", &e), 0);
    struct archive_import_opts o = {.max_layer_size = 16};
    assert_int_equal(archive_import(c->s, c->out, NAME, &o, NULL, &e), -EFBIG);
    assert_non_null(strstr(e.text, "max_layer_size"));
    assert_no_image(c->s);

    o = (struct archive_import_opts){.max_unpacked_size = 8};
    assert_int_equal(archive_import(c->s, c->out, NAME, &o, NULL, &e), -EFBIG);
    assert_no_image(c->s);

    /* An image of more layers than are taken: refused before anything is read. */
    char layer_digest[DIGEST_STRING_MAX], config_digest[DIGEST_STRING_MAX];
    char manifest_digest[DIGEST_STRING_MAX];
    digest_sha256("x", 1, layer_digest);
    size_t n = ARCHIVE_LAYERS_MAX + 1, cap = 200 * n + 4096;
    char *config = malloc(cap), *manifest = malloc(cap), *index = malloc(4096);
    size_t k = (size_t)snprintf(config, cap, "{\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[");
    for (size_t i = 0; i < n; i++)
        k += (size_t)snprintf(config + k, cap - k, "%s\"%s\"", i ? "," : "", layer_digest);
    snprintf(config + k, cap - k, "]}}");
    digest_sha256(config, strlen(config), config_digest);
    k = (size_t)snprintf(manifest, cap,
                         "{\"schemaVersion\":2,\"mediaType\":\"%s\",\"config\":{\"mediaType\":"
                         "\"%s\",\"digest\":\"%s\",\"size\":%zu},\"layers\":[",
                         MEDIA_OCI_MANIFEST, MEDIA_OCI_CONFIG, config_digest, strlen(config));
    for (size_t i = 0; i < n; i++)
        k += (size_t)snprintf(manifest + k, cap - k,
                              "%s{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":1}", i ? "," : "",
                              MEDIA_OCI_LAYER_GZIP, layer_digest);
    snprintf(manifest + k, cap - k, "]}");
    digest_sha256(manifest, strlen(manifest), manifest_digest);
    snprintf(index, 4096,
             "{\"schemaVersion\":2,\"manifests\":[{\"mediaType\":\"%s\",\"digest\":\"%s\","
             "\"size\":%zu}]}",
             MEDIA_OCI_MANIFEST, manifest_digest, strlen(manifest));
    struct members ms = {0};
    char name[PATH_MAX];
    members_add(&ms, "oci-layout", AE_IFREG, "{\"imageLayoutVersion\":\"1.0.0\"}", 30);
    members_add(&ms, "index.json", AE_IFREG, index, strlen(index));
    snprintf(name, sizeof(name), "blobs/sha256/%s", digest_hex(manifest_digest));
    members_add(&ms, name, AE_IFREG, manifest, strlen(manifest));
    snprintf(name, sizeof(name), "blobs/sha256/%s", digest_hex(config_digest));
    members_add(&ms, name, AE_IFREG, config, strlen(config));
    snprintf(name, sizeof(name), "blobs/sha256/%s", digest_hex(layer_digest));
    members_add(&ms, name, AE_IFREG, "x", 1);
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/many.tar", c->base);
    write_members(path, &ms);
    assert_import_fails(c, path, -EINVAL, "257 layers");
    members_done(&ms);
    free(config);
    free(manifest);
    free(index);
}

/* Two exports of different architectures in one archive, as `skopeo copy --all` makes one. */
static void test_import_multi_platform(void **state)
{
    struct ctx *c = *state;
    make_tree(c);
    struct errmsg e = {""};
    char arm[PATH_MAX], both[PATH_MAX];
    snprintf(arm, sizeof(arm), "%s/arm.tar", c->base);
    snprintf(both, sizeof(both), "%s/both.tar", c->base);
    assert_int_equal(export_to(c, c->out, "amd64", &e), 0);
    assert_int_equal(export_to(c, arm, "arm64", &e), 0);
    struct members ms = {0}, ms_arm = {0};
    read_members(c->out, &ms);
    read_members(arm, &ms_arm);
    struct manifest m_amd = {0}, m_arm = {0};
    char d_amd[DIGEST_STRING_MAX], d_arm[DIGEST_STRING_MAX];
    archive_manifest(&ms, &m_amd, d_amd);
    archive_manifest(&ms_arm, &m_arm, d_arm);
    for (size_t i = 0; i < ms_arm.n; i++)
        if (!member_find(&ms, ms_arm.m[i].name))
            members_add(&ms, ms_arm.m[i].name, ms_arm.m[i].type, ms_arm.m[i].data, ms_arm.m[i].len);
    struct member *idx = member_find(&ms, "index.json");
    char index[2048];
    int len = snprintf(
        index, sizeof(index),
        "{\"schemaVersion\":2,\"mediaType\":\"%s\",\"manifests\":["
        "{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%zu,\"platform\":{\"os\":\"linux\","
        "\"architecture\":\"amd64\"}},"
        "{\"mediaType\":\"%s\",\"digest\":\"%s\",\"size\":%zu,\"platform\":{\"os\":\"linux\","
        "\"architecture\":\"arm64\"}}]}",
        MEDIA_OCI_INDEX, MEDIA_OCI_MANIFEST, d_amd, blob_find(&ms, d_amd)->len, MEDIA_OCI_MANIFEST,
        d_arm, blob_find(&ms, d_arm)->len);
    free(idx->data);
    idx->data = strdup(index);
    idx->len = (size_t)len;
    write_members(both, &ms);

    assert_import_fails(c, both, -ENOENT, "no architecture");
    struct archive_import_opts o = {.architecture = "s390x"};
    assert_int_equal(archive_import(c->s, both, NAME, &o, NULL, &e), -ENOENT);
    assert_non_null(strstr(e.text, "linux/arm64"));
    o.architecture = "arm64";
    struct image_record rec = {0};
    assert_int_equal(archive_import(c->s, both, NAME, &o, &rec, &e), 0);
    assert_string_equal(rec.manifest_digest, d_arm);
    assert_string_equal(rec.config_digest, m_arm.config.digest);
    image_record_done(&rec);

    /* A single-image archive of another architecture than the one asked for. */
    o.architecture = "arm64";
    assert_int_equal(archive_import(c->s, c->out, "localhost/amd:1", &o, NULL, &e), -ENOENT);
    assert_non_null(strstr(e.text, "linux/amd64"));
    manifest_done(&m_amd);
    manifest_done(&m_arm);
    members_done(&ms);
    members_done(&ms_arm);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tar_reads_it, setup, teardown),
        cmocka_unit_test_setup_teardown(test_skopeo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mounts_not_descended, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failed_export_leaves_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import_garbage, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import_corrupt_blobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import_hostile_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import_limits, setup, teardown),
        cmocka_unit_test_setup_teardown(test_import_multi_platform, setup, teardown),
    };
    return test_run_cases(tests);
}
