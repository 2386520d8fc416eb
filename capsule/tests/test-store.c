/* Tests for capsule/store/store*.c: the cache's layout, blobs, resumable downloads, layers and
 * their locks (with real concurrent processes), image records and gc. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include <cmocka.h>

#include "test-main.h"

#include "lib/rm-tree.h"
#include "test-fs.h"
#include "test-skip.h"

#include "capsule/image/digest.h"
#include "capsule/store/store.h"
#include "lib/strv.h"
#include "capsule/store/unpack.h"

#define NOBODY 65534

struct ctx {
    char base[64];
    char root[128]; /* the cache, not yet created */
    struct store *s;
    char node_root[128]; /* a node cache, opened by the tests that use one */
    struct store *node;
};

static int setup(void **state)
{
    struct ctx *c = calloc(1, sizeof(*c));
    snprintf(c->base, sizeof(c->base), "/tmp/test-store.XXXXXX");
    if (!mkdtemp(c->base) || chmod(c->base, 0755) < 0)
        return -1;
    /* Two levels that do not exist yet, like ~/.cache/capsule on a fresh account. */
    snprintf(c->root, sizeof(c->root), "%s/home/.cache/capsule", c->base);
    snprintf(c->node_root, sizeof(c->node_root), "%s/var/cache/capsule", c->base);
    struct errmsg e = {""};
    if (store_open(c->root, &c->s, &e) < 0) {
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
    store_free(c->node);
    int r = rm_tree(c->base);
    free(c);
    return r;
}

static void sha(const char *data, char out[DIGEST_STRING_MAX])
{
    digest_sha256(data, strlen(data), out);
}

/* ---- layout and blobs ---- */

static void test_open_layout(void **state)
{
    struct ctx *c = *state;
    const char *dirs[] = {"blobs/sha256", "layers/sha256", "images", "tmp", "locks"};
    for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s/%s", c->root, dirs[i]);
        struct stat st;
        assert_int_equal(stat(p, &st), 0);
        assert_true(S_ISDIR(st.st_mode));
    }
    /* The root is realpath'd: a symlinked path gives the real one. */
    char link[PATH_MAX];
    snprintf(link, sizeof(link), "%s/link", c->base);
    assert_int_equal(symlink(c->root, link), 0);
    struct store *s2 = NULL;
    struct errmsg e = {""};
    assert_int_equal(store_open(link, &s2, &e), 0);
    assert_string_equal(store_root(s2), c->root);
    store_free(s2);

    /* A root that cannot be made names the directory. */
    snprintf(link, sizeof(link), "%s/file", c->base);
    write_file(link, "x");
    snprintf(link, sizeof(link), "%s/file/cache", c->base);
    assert_int_equal(store_open(link, &s2, &e), -ENOTDIR);
    assert_non_null(strstr(e.text, link));
}

static void test_blobs(void **state)
{
    struct ctx *c = *state;
    char d[DIGEST_STRING_MAX];
    sha("{\"config\":1}", d);
    struct errmsg e = {""};
    assert_false(store_has_blob(c->s, d));
    char *data = NULL;
    size_t len = 0;
    assert_int_equal(store_blob_read(c->s, d, 1024, &data, &len, &e), -ENOENT);

    /* Data that does not match its digest is refused and not stored. */
    assert_int_equal(store_blob_write(c->s, d, "{\"config\":2}", 12, &e), -EBADMSG);
    assert_false(store_has_blob(c->s, d));
    assert_int_equal(store_blob_write(c->s, "sha256:nothex", "x", 1, &e), -EINVAL);

    assert_int_equal(store_blob_write(c->s, d, "{\"config\":1}", 12, &e), 0);
    assert_true(store_has_blob(c->s, d));
    assert_int_equal(store_blob_read(c->s, d, 1024, &data, &len, &e), 0);
    assert_int_equal(len, 12);
    assert_string_equal(data, "{\"config\":1}");
    free(data);
    assert_int_equal(store_blob_read(c->s, d, 11, &data, &len, &e), -EFBIG);

    char *path = NULL;
    assert_int_equal(store_blob_path(c->s, d, &path), 0);
    char want[PATH_MAX];
    snprintf(want, sizeof(want), "%s/blobs/sha256/%s", c->root, digest_hex(d));
    assert_string_equal(path, want);

    /* A blob damaged on disk is detected on read and dropped, so that a pull fetches it. */
    write_file(path, "{\"config\":9}");
    assert_int_equal(store_blob_read_verified(c->s, d, 1024, &data, &len, &e), -EBADMSG);
    assert_non_null(strstr(e.text, "pull"));
    assert_false(exists(path));
    free(path);

    assert_int_equal(store_blob_write(c->s, d, "{\"config\":1}", 12, &e), 0);
    assert_int_equal(store_blob_remove(c->s, d), 0);
    assert_false(store_has_blob(c->s, d));
    assert_int_equal(store_blob_remove(c->s, d), 0);
}

static void test_download_resume(void **state)
{
    struct ctx *c = *state;
    const char *content = "0123456789abcdefghij";
    char d[DIGEST_STRING_MAX];
    sha(content, d);
    struct errmsg e = {""};
    struct store_download dl;
    assert_int_equal(store_download_begin(c->s, d, &dl, &e), 0);
    assert_int_equal(dl.offset, 0);
    assert_int_equal(write(dl.fd, content, 8), 8);
    char *partial = strdup(dl.partial_path);
    store_download_abort(&dl, true); /* a network error: keep what came */
    assert_int_equal(dl.fd, -1);
    assert_true(exists(partial));

    assert_int_equal(store_download_begin(c->s, d, &dl, &e), 0);
    assert_int_equal(dl.offset, 8);
    assert_int_equal(write(dl.fd, content + 8, 12), 12);
    assert_int_equal(store_download_commit(c->s, &dl, &e), 0);
    assert_true(store_has_blob(c->s, d));
    assert_false(exists(partial));
    /* Held until the end, for the unpack: another process waits meanwhile. */
    assert_true(dl.lock_fd >= 0);
    store_download_end(&dl);
    assert_int_equal(dl.lock_fd, -1);
    assert_int_equal(store_download_begin(c->s, d, &dl, &e), 1);
    assert_true(dl.lock_fd >= 0);
    store_download_end(&dl);

    /* A digest mismatch throws the bytes away. */
    char d2[DIGEST_STRING_MAX];
    sha("other", d2);
    assert_int_equal(store_download_begin(c->s, d2, &dl, &e), 0);
    assert_int_equal(write(dl.fd, "junk", 4), 4);
    free(partial);
    partial = strdup(dl.partial_path);
    store_download_abort(&dl, false);
    assert_false(exists(partial));
    free(partial);

    struct store_download zero = {.fd = -1, .lock_fd = -1};
    store_download_abort(&zero, false);
}

/* A second process that wants a blob being downloaded waits, then finds it complete. */
static void test_download_waits_for_other(void **state)
{
    struct ctx *c = *state;
    const char *content = "shared blob";
    char d[DIGEST_STRING_MAX];
    sha(content, d);
    int ready[2];
    assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct store_download dl;
        if (store_download_begin(c->s, d, &dl, NULL) != 0)
            _exit(1);
        (void)write(ready[1], "x", 1);
        usleep(300 * 1000);
        if (write(dl.fd, content, strlen(content)) < 0 || store_download_commit(c->s, &dl, NULL))
            _exit(2);
        _exit(0);
    }
    close(ready[1]);
    char x;
    assert_int_equal(read(ready[0], &x, 1), 1);
    close(ready[0]);
    struct store_download dl;
    struct errmsg e = {""};
    assert_int_equal(store_download_begin(c->s, d, &dl, &e), 1);
    store_download_end(&dl);
    assert_int_equal(child_status(pid), 0);
}

/* ---- layers ---- */

static char layer_file[PATH_MAX];

/* A gzip'd layer file on disk, built once. */
static void make_layer_file(const char *where)
{
    snprintf(layer_file, sizeof(layer_file), "%s/layer.tar.gz", where);
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_add_filter_gzip(a);
    assert_int_equal(archive_write_open_filename(a, layer_file), ARCHIVE_OK);
    const char *names[] = {"etc/", "etc/os-release", "usr/", "usr/lib/", "usr/lib/big"};
    char big[64 * 1024];
    memset(big, 'b', sizeof(big));
    for (size_t i = 0; i < ELEMENTSOF(names); i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, names[i]);
        bool dir = names[i][strlen(names[i]) - 1] == '/';
        archive_entry_set_filetype(e, dir ? AE_IFDIR : AE_IFREG);
        archive_entry_set_perm(e, dir ? 0555 : 0644);
        size_t len = dir ? 0 : strstr(names[i], "big") ? sizeof(big) : 6;
        archive_entry_set_size(e, len);
        assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
        if (len)
            assert_int_equal(archive_write_data(a, len == 6 ? "ID=x\n\n" : big, len), len);
        archive_entry_free(e);
    }
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
}

/* What a pull does for one layer: lock, check, unpack, commit. Returns 1 if this call unpacked,
 * 0 if it found the layer, negative on error. */
static int ensure_layer(struct store *s, const char *digest, const char *count_file)
{
    int lock = -1;
    struct errmsg e = {""};
    int r = store_layer_make_lock(s, digest, &lock, &e);
    if (r < 0)
        return r;
    if (store_has_layer(s, digest)) {
        close(lock);
        return 0;
    }
    char *tmp = NULL;
    r = store_layer_tmpdir(s, digest, &tmp, &e);
    int fd = r < 0 ? -1 : open(layer_file, O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        r = unpack_layer(fd, tmp, NULL, &e);
    if (r >= 0 && count_file) {
        int cf = open(count_file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        r = cf >= 0 && write(cf, "u\n", 2) == 2 ? 0 : -EIO;
        if (cf >= 0)
            close(cf);
    }
    if (r >= 0)
        r = store_layer_commit(s, digest, tmp, &e);
    if (fd >= 0)
        close(fd);
    free(tmp);
    close(lock);
    return r < 0 ? r : 1;
}

/* The layer is complete to whoever sees it. */
static bool layer_complete(struct store *s, const char *digest)
{
    char *dir = NULL;
    if (!store_has_layer(s, digest) || store_layer_path(s, digest, &dir) < 0)
        return false;
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/usr/lib/big", dir);
    struct stat st;
    bool ok = stat(p, &st) == 0 && st.st_size == 64 * 1024;
    snprintf(p, sizeof(p), "%s/usr", dir);
    ok = ok && stat(p, &st) == 0 && (st.st_mode & 07777) == 0555;
    free(dir);
    return ok;
}

static void test_layer_commit(void **state)
{
    struct ctx *c = *state;
    make_layer_file(c->base);
    char d[DIGEST_STRING_MAX];
    sha("layer-1", d);
    assert_false(store_has_layer(c->s, d));
    assert_int_equal(ensure_layer(c->s, d, NULL), 1);
    assert_true(layer_complete(c->s, d));
    assert_int_equal(ensure_layer(c->s, d, NULL), 0);

    /* Committing over an existing layer keeps it and drops the second copy. */
    struct errmsg e = {""};
    char *tmp = NULL;
    assert_int_equal(store_layer_tmpdir(c->s, d, &tmp, &e), 0);
    assert_int_equal(store_layer_commit(c->s, d, tmp, &e), 0);
    assert_false(exists(tmp));
    free(tmp);
    assert_true(layer_complete(c->s, d));
    char tmpdir[PATH_MAX];
    snprintf(tmpdir, sizeof(tmpdir), "%s/tmp", c->root);
    DIR *dir = opendir(tmpdir);
    int n = 0;
    for (struct dirent *de; (de = readdir(dir));)
        n += de->d_name[0] != '.';
    closedir(dir);
    assert_int_equal(n, 0);
}

static void test_layer_lock_modes(void **state)
{
    struct ctx *c = *state;
    char d[DIGEST_STRING_MAX];
    sha("layer-lock", d);
    struct errmsg e = {""};
    int sh1 = -1, sh2 = -1, ex = -1;
    assert_int_equal(store_layer_lock(c->s, d, false, false, &sh1, &e), 0);
    assert_int_equal(store_layer_lock(c->s, d, false, false, &sh2, &e), 0);
    assert_int_equal(store_layer_lock(c->s, d, true, false, &ex, &e), -EWOULDBLOCK);
    assert_non_null(strstr(e.text, d));
    close(sh1);
    close(sh2);
    assert_int_equal(store_layer_lock(c->s, d, true, false, &ex, &e), 0);
    assert_true(fcntl(ex, F_GETFD) & FD_CLOEXEC);
    assert_int_equal(store_layer_lock(c->s, d, false, false, &sh1, &e), -EWOULDBLOCK);
    close(ex);
    assert_int_equal(store_layer_lock(c->s, "md5:abc", true, false, &ex, &e), -EINVAL);
}

/* Several processes want the same layer at once: one unpacks, all see it complete. */
static void test_concurrent_unpack_once(void **state)
{
    struct ctx *c = *state;
    make_layer_file(c->base);
    char d[DIGEST_STRING_MAX], count[PATH_MAX];
    sha("layer-concurrent", d);
    snprintf(count, sizeof(count), "%s/unpacked", c->base);
    int go[2];
    assert_int_equal(pipe2(go, O_CLOEXEC), 0);
    enum { N = 6 };
    pid_t pids[N];
    for (int i = 0; i < N; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            close(go[1]);
            char x;
            (void)read(go[0], &x, 1); /* all start together when the parent closes the pipe */
            struct store *s = NULL;
            if (store_open(c->root, &s, NULL) < 0)
                _exit(10);
            int r = ensure_layer(s, d, count);
            int sh = -1;
            bool ok = r >= 0 && store_layer_lock(s, d, false, true, &sh, NULL) == 0 &&
                      layer_complete(s, d);
            store_free(s);
            _exit(ok ? 0 : 11);
        }
    }
    close(go[0]);
    close(go[1]);
    for (int i = 0; i < N; i++)
        assert_int_equal(child_status(pids[i]), 0);
    int fd = open(count, O_RDONLY | O_CLOEXEC);
    char buf[64];
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    assert_int_equal(n, 2); /* exactly one "u\n" */
}

/* ---- image records ---- */

static void record_init(struct image_record *r, const char *name, const char *config,
                        const char *const *layers)
{
    char d[DIGEST_STRING_MAX];
    *r = (struct image_record){.name = strdup(name), .size = 1234, .pulled_at = 1700000000};
    sha(name, d);
    r->manifest_digest = strdup(d);
    r->config_digest = strdup(config);
    size_t n = 0;
    while (layers && layers[n])
        n++;
    r->layers = calloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        sha(layers[i], d);
        r->layers[i] = strdup(d);
    }
    r->n_layers = n;
}

static void save(struct store *s, const char *name, const char *config, const char *const *layers)
{
    struct image_record r;
    record_init(&r, name, config, layers);
    struct errmsg e = {""};
    assert_int_equal(store_image_save(s, &r, &e), 0);
    image_record_done(&r);
}

static const char *config_a = "sha256:abcd1111000000000000000000000000000000000000000000000000"
                              "00000000";
static const char *config_b = "sha256:abcd2222000000000000000000000000000000000000000000000000"
                              "00000000";

static void test_images(void **state)
{
    struct ctx *c = *state;
    const char *layers[] = {"l1", "l2", NULL};
    save(c->s, "docker.io/library/ubuntu:22.04", config_a, layers);
    save(c->s, "docker.io/library/ubuntu:jammy", config_a, layers);
    save(c->s, "nvcr.io/nvidia/pytorch:24.01-py3", config_b, NULL);

    struct image_record r = {0};
    struct errmsg e = {""};
    assert_int_equal(store_image_load(c->s, "nvcr.io/nvidia/pytorch:24.01-py3", &r, &e), 0);
    assert_string_equal(r.config_digest, config_b);
    assert_int_equal(r.n_layers, 0);
    assert_non_null(r.layers);
    assert_null(r.layers[0]);
    image_record_done(&r);

    assert_int_equal(store_image_load(c->s, "docker.io/library/ubuntu:22.04", &r, &e), 0);
    char d[DIGEST_STRING_MAX];
    sha("l2", d);
    assert_int_equal(r.n_layers, 2);
    assert_string_equal(r.layers[1], d);
    assert_null(r.layers[2]);
    assert_int_equal(r.size, 1234);
    assert_int_equal(r.pulled_at, 1700000000);
    image_record_done(&r);

    /* By ID prefix: two names of one image are one image; two images are ambiguous. */
    assert_int_equal(store_image_load_id(c->s, "abcd1", &r, &e), 0);
    assert_string_equal(r.name, "docker.io/library/ubuntu:22.04");
    image_record_done(&r);
    assert_int_equal(store_image_load_id(c->s, "sha256:abcd2222", &r, &e), 0);
    assert_string_equal(r.name, "nvcr.io/nvidia/pytorch:24.01-py3");
    image_record_done(&r);
    assert_int_equal(store_image_load_id(c->s, "abcd", &r, &e), -EINVAL);
    assert_non_null(strstr(e.text, "ambiguous"));
    assert_int_equal(store_image_load_id(c->s, "abc", &r, &e), -ENOENT); /* too short */
    /* An exact name is only a name. */
    assert_int_equal(store_image_load(c->s, "abcd1", &r, &e), -ENOENT);
    assert_int_equal(store_image_load(c->s, "docker.io/library/debian:12", &r, &e), -ENOENT);
    assert_string_equal(e.text, "image 'docker.io/library/debian:12' is not in the cache; "
                                "capsule pull docker.io/library/debian:12");

    _cleanup_strv_free_ char **names = NULL;
    assert_int_equal(store_image_names(c->s, config_a, &names, &e), 0);
    assert_int_equal(strv_length(names), 2);
    assert_string_equal(names[0], "docker.io/library/ubuntu:22.04");
    assert_string_equal(names[1], "docker.io/library/ubuntu:jammy");

    struct image_record *v = NULL;
    size_t n = 0;
    assert_int_equal(store_image_list(c->s, &v, &n, &e), 0);
    assert_int_equal(n, 3);
    assert_string_equal(v[0].name, "docker.io/library/ubuntu:22.04");
    assert_string_equal(v[2].name, "nvcr.io/nvidia/pytorch:24.01-py3");
    for (size_t i = 0; i < n; i++)
        image_record_done(&v[i]);
    free(v);

    assert_int_equal(store_image_remove(c->s, "docker.io/library/ubuntu:jammy", &e), 0);
    assert_int_equal(store_image_remove(c->s, "docker.io/library/ubuntu:jammy", &e), -ENOENT);
    assert_int_equal(store_image_load(c->s, "docker.io/library/ubuntu:jammy", &r, &e), -ENOENT);
}

/* What users type: any spelling of a cached name first, then an ID prefix (Docker's order: a
 * local tag "abcd1" beats the image whose ID starts with abcd1), then "not in the cache". */
static void test_image_find(void **state)
{
    struct ctx *c = *state;
    save(c->s, "docker.io/library/ubuntu:22.04", config_a, NULL);
    save(c->s, "docker.io/library/abcd2:latest", config_a, NULL);
    save(c->s, "nvcr.io/nvidia/pytorch:24.01-py3", config_b, NULL);
    struct image_record r = {0};
    struct errmsg e = {""};
    assert_int_equal(store_image_find(c->s, "ubuntu:22.04", &r, &e), 0);
    assert_string_equal(r.name, "docker.io/library/ubuntu:22.04");
    image_record_done(&r);
    assert_int_equal(store_image_find(c->s, "abcd2", &r, &e), 0);
    assert_string_equal(r.name, "docker.io/library/abcd2:latest");
    image_record_done(&r);
    assert_int_equal(store_image_find(c->s, "sha256:abcd2", &r, &e), 1);
    assert_string_equal(r.name, "nvcr.io/nvidia/pytorch:24.01-py3");
    image_record_done(&r);
    assert_int_equal(store_image_find(c->s, "abcd22", &r, &e), 1);
    assert_string_equal(r.config_digest, config_b);
    image_record_done(&r);
    assert_int_equal(store_image_find(c->s, "abcd", &r, &e), -EINVAL);
    assert_non_null(strstr(e.text, "ambiguous"));
    assert_int_equal(store_image_find(c->s, "abcd3", &r, &e), -ENOENT);
    assert_string_equal(e.text, "image 'docker.io/library/abcd3:latest' is not in the cache; "
                                "capsule pull docker.io/library/abcd3:latest");
    assert_int_equal(store_image_find(c->s, "Bad//Name", &r, &e), -EINVAL);
    assert_null(strstr(e.text, "cache"));
}

static void test_image_invalid_and_damaged(void **state)
{
    struct ctx *c = *state;
    struct image_record r;
    record_init(&r, "x.io/a:1", "sha256:short", NULL);
    struct errmsg e = {""};
    assert_int_equal(store_image_save(c->s, &r, &e), -EINVAL);
    image_record_done(&r);

    save(c->s, "x.io/a:1", config_a, NULL);
    save(c->s, "x.io/b:1", config_b, NULL);
    /* Damage a's record in place (records are named by the escaped image name). */
    char p[PATH_MAX], q[PATH_MAX];
    snprintf(p, sizeof(p), "%s/images/x.io%%2Fa%%3A1.json", c->root);
    assert_true(exists(p));
    write_file(p, "{\"schema\":1,\"name\":");
    assert_int_equal(store_image_load(c->s, "x.io/a:1", &r, &e), -EBADMSG);
    assert_non_null(strstr(e.text, "x.io/a:1"));
    struct image_record *v = NULL;
    size_t n = 0;
    assert_int_equal(store_image_list(c->s, &v, &n, &e), 0);
    assert_int_equal(n, 1);
    image_record_done(&v[0]);
    free(v);
    /* A record that names another image under a's file is damaged too. */
    snprintf(q, sizeof(q), "%s/images/x.io%%2Fb%%3A1.json", c->root);
    assert_int_equal(rename(q, p), 0);
    assert_int_equal(store_image_load(c->s, "x.io/a:1", &r, &e), -EBADMSG);
}

/* Names too long for a file name of their own share an escaped prefix and still get one record
 * each. */
static void test_image_long_names(void **state)
{
    struct ctx *c = *state;
    char a[300], b[300];
    snprintf(a, sizeof(a), "x.io/%0250d:1", 0);
    snprintf(b, sizeof(b), "x.io/%0250d:2", 0);
    save(c->s, a, config_a, NULL);
    save(c->s, b, config_b, NULL);
    struct image_record r;
    struct errmsg e = {""};
    assert_int_equal(store_image_load(c->s, a, &r, &e), 0);
    assert_string_equal(r.config_digest, config_a);
    image_record_done(&r);
    assert_int_equal(store_image_load(c->s, b, &r, &e), 0);
    assert_string_equal(r.config_digest, config_b);
    image_record_done(&r);
    assert_int_equal(store_image_remove(c->s, a, &e), 0);
    assert_int_equal(store_image_load(c->s, a, &r, &e), -ENOENT);
    assert_int_equal(store_image_load(c->s, b, &r, &e), 0);
    image_record_done(&r);
}

/* ---- gc ---- */

static void add_layer_dir(struct ctx *c, const char *name, char out[DIGEST_STRING_MAX])
{
    sha(name, out);
    assert_int_equal(ensure_layer(c->s, out, NULL), 1);
}

static void test_gc(void **state)
{
    struct ctx *c = *state;
    make_layer_file(c->base);
    char used[DIGEST_STRING_MAX], unused[DIGEST_STRING_MAX], kept[DIGEST_STRING_MAX],
        busy[DIGEST_STRING_MAX];
    add_layer_dir(c, "used", used);
    add_layer_dir(c, "unused", unused);
    add_layer_dir(c, "kept", kept);
    add_layer_dir(c, "busy", busy);
    const char *layers[] = {"used", NULL};
    save(c->s, "x.io/app:1", config_a, layers);
    struct errmsg e = {""};
    char stray[DIGEST_STRING_MAX];
    sha("stray", stray);
    assert_int_equal(store_blob_write(c->s, stray, "stray", 5, &e), 0);

    /* A container (another process) uses "busy". */
    int ready[2], release[2];
    assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
    assert_int_equal(pipe2(release, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(release[1]); /* so that the parent's close is the end of the pipe */
        int fd = -1;
        if (store_layer_lock(c->s, busy, false, true, &fd, NULL) < 0)
            _exit(1);
        (void)write(ready[1], "x", 1);
        char x;
        (void)read(release[0], &x, 1);
        _exit(0);
    }
    close(ready[1]);
    close(release[0]);
    char x;
    assert_int_equal(read(ready[0], &x, 1), 1);

    char *keep[] = {kept, NULL};
    struct store_gc_stats st = {0};
    assert_int_equal(store_gc(c->s, keep, &st, &e), 0);
    assert_true(layer_complete(c->s, used));
    assert_true(layer_complete(c->s, kept));
    assert_true(layer_complete(c->s, busy));
    assert_false(store_has_layer(c->s, unused));
    assert_false(store_has_blob(c->s, stray));
    assert_int_equal(st.layers_removed, 1);
    assert_int_equal(st.layers_busy, 1);
    assert_int_equal(st.blobs_removed, 1);
    assert_true(st.bytes_freed >= 64 * 1024);

    close(release[1]);
    assert_int_equal(child_status(pid), 0);
    close(ready[0]);
    assert_int_equal(store_gc(c->s, NULL, &st, &e), 0);
    assert_false(store_has_layer(c->s, busy));
    assert_false(store_has_layer(c->s, kept));
    assert_true(store_has_layer(c->s, used));
    assert_int_equal(st.layers_removed, 2);
    assert_int_equal(st.layers_busy, 0);
}

/* gc removes what killed pulls left in tmp/ at once, whatever its age, and keeps only what a lock
 * says is in use: an unpack's directory, a blob a pull holds. It waits for a pull that saves its
 * record (the gc block) instead of refusing. */
static void test_gc_tmp_and_pull_block(void **state)
{
    struct ctx *c = *state;
    char d1[DIGEST_STRING_MAX], d2[DIGEST_STRING_MAX], d3[DIGEST_STRING_MAX];
    sha("killed-partial", d1);
    sha("unpack-locked", d2);
    sha("killed-just-now", d3);
    char p1[PATH_MAX], p2[PATH_MAX], p3[PATH_MAX], p4[PATH_MAX];
    snprintf(p1, sizeof(p1), "%s/tmp/%s.partial", c->root, digest_hex(d1));
    snprintf(p2, sizeof(p2), "%s/tmp/%s.Ab12Cd", c->root, digest_hex(d2));
    snprintf(p3, sizeof(p3), "%s/tmp/%s.Xy34Zw", c->root, digest_hex(d3));
    snprintf(p4, sizeof(p4), "%s/tmp/write.123456", c->root);
    write_file(p1, "part");
    assert_int_equal(mkdir(p2, 0555), 0);
    assert_int_equal(mkdir(p3, 0555), 0);
    write_file(p4, "w");
    struct errmsg e = {""};
    int lock = -1;
    assert_int_equal(store_layer_make_lock(c->s, d2, &lock, &e), 0);
    /* A blob a pull has downloaded and not yet unpacked. */
    char held[DIGEST_STRING_MAX];
    sha("held", held);
    assert_int_equal(store_blob_write(c->s, held, "held", 4, &e), 0);
    struct store_download dl = {.fd = -1, .lock_fd = -1};
    assert_int_equal(store_download_begin(c->s, held, &dl, &e), 1);

    /* Another process saves a record: gc waits for it. */
    char saved[PATH_MAX];
    snprintf(saved, sizeof(saved), "%s/saved", c->base);
    int ready[2];
    assert_int_equal(pipe2(ready, O_CLOEXEC), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int block = -1;
        if (store_gc_block(c->s, &block, NULL) < 0)
            _exit(1);
        (void)write(ready[1], "x", 1);
        usleep(200 * 1000);
        write_file(saved, "record");
        _exit(0);
    }
    close(ready[1]);
    char x;
    assert_int_equal(read(ready[0], &x, 1), 1);
    close(ready[0]);
    struct store_gc_stats st = {0};
    assert_int_equal(store_gc(c->s, NULL, &st, &e), 0);
    assert_true(exists(saved));
    assert_int_equal(child_status(pid), 0);

    assert_false(exists(p1));
    assert_true(exists(p2));  /* its unpack still runs */
    assert_false(exists(p3)); /* a second old or not: nobody holds it */
    assert_false(exists(p4));
    assert_true(store_has_blob(c->s, held));
    assert_int_equal(st.tmp_removed, 3);
    assert_int_equal(st.tmp_busy, 1);
    assert_int_equal(st.blobs_removed, 0);
    close(lock);
    store_download_end(&dl);
    assert_int_equal(store_gc(c->s, NULL, &st, &e), 0);
    assert_false(exists(p2));
    assert_false(store_has_blob(c->s, held));
    assert_int_equal(st.tmp_busy, 0);
    assert_int_equal(st.blobs_removed, 1);
}

/* A run's scratch directory is private, survives gc while its run holds it, and goes with its
 * lock: after store_scratch_remove(), or at the next gc once the run was killed. */
static void test_scratch_dirs(void **state)
{
    struct ctx *c = *state;
    struct errmsg e = {""};
    char *dir = NULL, lock[PATH_MAX], file[PATH_MAX];
    int fd = -1;
    assert_int_equal(store_scratch_new(c->s, &dir, &fd, &e), 0);
    struct stat sb;
    assert_int_equal(stat(dir, &sb), 0);
    assert_int_equal(sb.st_mode & 07777, 0700);
    snprintf(lock, sizeof(lock), "%s/locks/%s.lock", c->root, strrchr(dir, '/') + 1);
    assert_true(exists(lock));
    snprintf(file, sizeof(file), "%s/big", dir);
    write_file(file, "copy of an image");

    struct store_gc_stats st = {0};
    assert_int_equal(store_gc(c->s, NULL, &st, &e), 0);
    assert_true(exists(file));
    assert_int_equal(st.tmp_busy, 1);
    store_scratch_remove(c->s, dir, fd);
    assert_false(exists(dir));
    assert_false(exists(lock));
    free(dir);

    /* A run killed with its scratch in place: the lock is free once its process is gone. */
    pid_t pid = fork();
    if (pid == 0) {
        char *d = NULL;
        int f = -1;
        _exit(store_scratch_new(c->s, &d, &f, NULL) == 0 ? 0 : 1);
    }
    assert_int_equal(child_status(pid), 0);
    assert_int_equal(store_gc(c->s, NULL, &st, &e), 0);
    assert_int_equal(st.tmp_busy, 0);
    assert_int_equal(st.tmp_removed, 1);
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s/tmp", c->root);
    DIR *d = opendir(tmp);
    assert_non_null(d);
    struct dirent *de;
    int left = 0;
    while ((de = readdir(d)))
        left += strncmp(de->d_name, "run-", 4) == 0;
    closedir(d);
    assert_int_equal(left, 0);
}

/* ---- a node store ---- */

static void open_node(struct ctx *c)
{
    struct errmsg e = {""};
    if (store_open_node(c->node_root, &c->node, &e) < 0)
        fail_msg("store_open_node: %s", e.text);
}

static void assert_dir_mode(const char *root, const char *rel, mode_t want)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    if (st.st_mode != want)
        fail_msg("'%s': mode %o, want %o", p, (unsigned)st.st_mode, (unsigned)want);
}

/* The layout's modes are exact, whatever the umask and whatever they were before. */
static void test_node_layout(void **state)
{
    struct ctx *c = *state;
    umask(0);
    open_node(c);
    assert_true(store_is_node(c->node));
    assert_false(store_is_node(c->s));
    assert_dir_mode(c->node_root, ".", S_IFDIR | 0711);
    assert_dir_mode(c->node_root, "layers", S_IFDIR | 0711);
    const char *private[] = {"blobs", "blobs/sha256", "images", "tmp", "locks"};
    for (size_t i = 0; i < ELEMENTSOF(private); i++)
        assert_dir_mode(c->node_root, private[i], S_IFDIR | 0700);
    assert_dir_mode(c->node_root, "node.key", S_IFREG | 0600);
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/layers/sha256", c->node_root);
    assert_false(exists(p));
    struct stat st;
    snprintf(p, sizeof(p), "%s/node.key", c->node_root);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, 32);

    /* Opened again after someone made layers/ listable: it is not any more. */
    store_free(TAKE_PTR(c->node));
    snprintf(p, sizeof(p), "%s/layers", c->node_root);
    assert_int_equal(chmod(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/images", c->node_root);
    assert_int_equal(chmod(p, 0755), 0);
    open_node(c);
    assert_dir_mode(c->node_root, "layers", S_IFDIR | 0711);
    assert_dir_mode(c->node_root, "images", S_IFDIR | 0700);
}

static void read_key(const struct ctx *c, unsigned char key[32])
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/node.key", c->node_root);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(read(fd, key, 32), 32);
    close(fd);
}

/* HMAC-SHA256(key, digest) in hex, computed here with OpenSSL's EVP_MAC, not the store's code. */
static void expected_name(const unsigned char key[32], const char *digest, char out[65])
{
    unsigned char mac[32];
    size_t len = 0;
    assert_non_null(EVP_Q_mac(NULL, "HMAC", NULL, "SHA256", NULL, key, 32,
                              (const unsigned char *)digest, strlen(digest), mac, sizeof(mac),
                              &len));
    assert_int_equal(len, 32);
    for (size_t i = 0; i < 32; i++)
        snprintf(out + 2 * i, 3, "%02x", mac[i]);
}

static void test_node_layer_names(void **state)
{
    struct ctx *c = *state;
    open_node(c);
    char d[DIGEST_STRING_MAX], want[PATH_MAX], name[65];
    sha("layer-1", d);
    unsigned char key[32];
    read_key(c, key);
    expected_name(key, d, name);
    snprintf(want, sizeof(want), "%s/layers/%s", c->node_root, name);
    char *path = NULL;
    assert_int_equal(store_layer_path(c->node, d, &path), 0);
    assert_string_equal(path, want);
    assert_null(strstr(path, digest_hex(d)));
    free(path);

    /* The key is made once and read back: another open (another service) finds the same. */
    struct store *again = NULL;
    struct errmsg e = {""};
    assert_int_equal(store_open_node(c->node_root, &again, &e), 0);
    assert_int_equal(store_layer_path(again, d, &path), 0);
    assert_string_equal(path, want);
    free(path);
    store_free(again);
    unsigned char key2[32];
    read_key(c, key2);
    assert_memory_equal(key, key2, 32);

    /* The name is what the locks, tmpdir, commit and has_layer use. */
    int lock = -1, use = -1;
    assert_int_equal(store_layer_make_lock(c->node, d, &lock, &e), 0);
    snprintf(want, sizeof(want), "%s/locks/%s.unpack.lock", c->node_root, name);
    assert_true(exists(want));
    assert_int_equal(store_layer_lock(c->node, d, false, false, &use, &e), 0);
    snprintf(want, sizeof(want), "%s/locks/%s.lock", c->node_root, name);
    assert_true(exists(want));
    close(use);
    char *tmp = NULL;
    assert_int_equal(store_layer_tmpdir(c->node, d, &tmp, &e), 0);
    snprintf(want, sizeof(want), "%s/tmp/%s.", c->node_root, name);
    assert_int_equal(strncmp(tmp, want, strlen(want)), 0);
    assert_false(store_has_layer(c->node, d));
    assert_int_equal(store_layer_commit(c->node, d, tmp, &e), 0);
    assert_true(store_has_layer(c->node, d));
    snprintf(want, sizeof(want), "%s/layers/%s", c->node_root, name);
    assert_dir_mode(c->node_root, want + strlen(c->node_root) + 1, S_IFDIR | 0755);
    free(tmp);
    close(lock);
    assert_int_equal(store_layer_path(c->node, "sha256:nothex", &path), -EINVAL);

    /* A per-user store beside it still names layers by digest. */
    assert_int_equal(store_layer_path(c->s, d, &path), 0);
    snprintf(want, sizeof(want), "%s/layers/sha256/%s", c->root, digest_hex(d));
    assert_string_equal(path, want);
    free(path);
}

/* Services that start at once on a fresh cache agree on one key. */
static void test_node_key_race(void **state)
{
    struct ctx *c = *state;
    enum { N = 6 };
    int go[2], out[2];
    assert_int_equal(pipe2(go, O_CLOEXEC), 0);
    assert_int_equal(pipe2(out, O_CLOEXEC), 0);
    char d[DIGEST_STRING_MAX];
    sha("layer-1", d);
    pid_t pids[N];
    for (int i = 0; i < N; i++) {
        pids[i] = fork();
        assert_true(pids[i] >= 0);
        if (pids[i] == 0) {
            close(go[1]);
            char x;
            (void)read(go[0], &x, 1); /* all start together */
            struct store *s = NULL;
            char *path = NULL, line[PATH_MAX];
            if (store_open_node(c->node_root, &s, NULL) < 0 || store_layer_path(s, d, &path) < 0)
                _exit(1);
            int n = snprintf(line, sizeof(line), "%-200s", path);
            _exit(write(out[1], line, n) == n ? 0 : 2);
        }
    }
    close(go[0]);
    close(go[1]);
    close(out[1]);
    for (int i = 0; i < N; i++)
        assert_int_equal(child_status(pids[i]), 0);
    char first[201] = "", line[201];
    for (int i = 0; i < N; i++) {
        assert_int_equal(read(out[0], line, 200), 200);
        line[200] = '\0';
        if (i == 0)
            memcpy(first, line, sizeof(first));
        assert_string_equal(line, first);
    }
    close(out[0]);
    /* No leftovers of the losers' keys. */
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof(tmp), "%s/tmp", c->node_root);
    DIR *dir = opendir(tmp);
    assert_non_null(dir);
    int n = 0;
    for (struct dirent *de; (de = readdir(dir));)
        n += de->d_name[0] != '.';
    closedir(dir);
    assert_int_equal(n, 0);
}

static void test_node_bad_key(void **state)
{
    struct ctx *c = *state;
    open_node(c);
    store_free(TAKE_PTR(c->node));
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/node.key", c->node_root);
    struct errmsg e = {""};
    struct store *s = NULL;
    const char *bad[] = {"", "short", "0123456789012345678901234567890123"};
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        write_file(p, bad[i]);
        assert_int_equal(chmod(p, 0600), 0);
        assert_int_equal(store_open_node(c->node_root, &s, &e), -EBADMSG);
        assert_non_null(strstr(e.text, p));
        assert_non_null(strstr(e.text, "not 32"));
    }
    write_file(p, "0123456789abcdef0123456789abcdef");
    assert_int_equal(chmod(p, 0644), 0);
    assert_int_equal(store_open_node(c->node_root, &s, &e), -EPERM);
    assert_non_null(strstr(e.text, p));
    assert_int_equal(chmod(p, 0600), 0);
    assert_int_equal(store_open_node(c->node_root, &s, &e), 0);
    store_free(s);
}

/* A layer blob in the store's blobs/, as a pull leaves it. */
static void node_layer_blob(struct ctx *c, char digest[DIGEST_STRING_MAX])
{
    char file[PATH_MAX];
    snprintf(file, sizeof(file), "%s/node-layer.tar.gz", c->base);
    struct archive *a = archive_write_new();
    archive_write_set_format_pax_restricted(a);
    archive_write_add_filter_gzip(a);
    assert_int_equal(archive_write_open_filename(a, file), ARCHIVE_OK);
    struct {
        const char *name;
        mode_t type, perm;
        int uid;
    } entries[] = {
        {"etc", AE_IFDIR, 0755, 0},         {"etc/shadow", AE_IFREG, 0600, 0},
        {"root", AE_IFDIR, 0700, 0},        {"usr/bin/tool", AE_IFREG, 0711, 0},
        {"home/u/f", AE_IFREG, 0640, 1000},
    };
    for (size_t i = 0; i < ELEMENTSOF(entries); i++) {
        struct archive_entry *e = archive_entry_new();
        archive_entry_set_pathname(e, entries[i].name);
        archive_entry_set_filetype(e, entries[i].type);
        archive_entry_set_perm(e, entries[i].perm);
        archive_entry_set_uid(e, entries[i].uid);
        archive_entry_set_gid(e, entries[i].uid);
        archive_entry_set_size(e, entries[i].type == AE_IFREG ? 2 : 0);
        assert_int_equal(archive_write_header(a, e), ARCHIVE_OK);
        if (entries[i].type == AE_IFREG)
            assert_int_equal(archive_write_data(a, "x\n", 2), 2);
        archive_entry_free(e);
    }
    assert_int_equal(archive_write_close(a), ARCHIVE_OK);
    archive_write_free(a);
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    char buf[8192];
    ssize_t n = read(fd, buf, sizeof(buf));
    close(fd);
    assert_true(n > 0 && n < (ssize_t)sizeof(buf));
    digest_sha256(buf, (size_t)n, digest);
    /* As a download puts it: under the layer's name in a node store. */
    struct errmsg e = {""};
    struct store_download dl = {.fd = -1, .lock_fd = -1};
    assert_int_equal(store_download_begin(c->node, digest, &dl, &e), 0);
    assert_int_equal(write(dl.fd, buf, (size_t)n), n);
    assert_int_equal(store_download_commit(c->node, &dl, &e), 0);
    store_download_end(&dl);
    assert_true(store_has_layer_blob(c->node, digest));
    assert_false(store_has_blob(c->node, digest));
}

static const char *xattr_at(const char *dir, const char *rel)
{
    static char v[128];
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    ssize_t n = lgetxattr(p, UNPACK_OVERRIDE_XATTR, v, sizeof(v) - 1);
    v[n < 0 ? 0 : n] = '\0';
    return v;
}

/* store_layer_unpack in a node store: readable by all, the image's modes in the xattrs. */
static void test_node_layer_unpack(void **state)
{
    struct ctx *c = *state;
    umask(077);
    open_node(c);
    char d[DIGEST_STRING_MAX];
    node_layer_blob(c, d);
    struct errmsg e = {""};
    int lock = -1;
    assert_int_equal(store_layer_make_lock(c->node, d, &lock, &e), 0);
    int r = store_layer_unpack(c->node, d, 0, false, &e);
    if (r == -EOPNOTSUPP)
        test_skip("no user xattrs on /tmp here");
    assert_int_equal(r, 0);
    close(lock);
    assert_true(store_has_layer(c->node, d));
    assert_false(store_has_layer_blob(c->node, d));
    char *dir = NULL;
    assert_int_equal(store_layer_path(c->node, d, &dir), 0);
    assert_dir_mode(dir, ".", S_IFDIR | 0755);
    assert_string_equal(xattr_at(dir, "."), "0:0:0755:dir");
    assert_dir_mode(dir, "etc/shadow", S_IFREG | 0644);
    assert_string_equal(xattr_at(dir, "etc/shadow"), "0:0:0600:file");
    assert_dir_mode(dir, "root", S_IFDIR | 0755);
    assert_string_equal(xattr_at(dir, "root"), "0:0:0700:dir");
    assert_dir_mode(dir, "usr", S_IFDIR | 0755);
    assert_string_equal(xattr_at(dir, "usr"), "0:0:0755:dir");
    assert_dir_mode(dir, "usr/bin/tool", S_IFREG | 0755);
    assert_string_equal(xattr_at(dir, "usr/bin/tool"), "0:0:0711:file");
    assert_string_equal(xattr_at(dir, "home/u/f"), "1000:1000:0640:file");
    free(dir);
}

static void node_layer(struct store *s, const char *name, char out[DIGEST_STRING_MAX])
{
    sha(name, out);
    assert_int_equal(ensure_layer(s, out, NULL), 1);
}

/* The node store as pulls from registry x.io see it (the registry of the records below). */
static struct store *x_io(struct ctx *c)
{
    struct store *v = NULL;
    struct errmsg e = {""};
    if (store_node_view(c->node, "x.io", &v, &e) < 0)
        fail_msg("store_node_view: %s", e.text);
    return v;
}

/* A layer blob, downloaded in part or whole, is its registry's too: bytes x.io served (left by
 * an unpack that failed, or a download cut short) are never what a pull from y.io finds, which
 * downloads its own. gc removes them once nothing holds them. */
static void test_node_blobs_per_registry(void **state)
{
    struct ctx *c = *state;
    open_node(c);
    struct store *x = x_io(c), *y = NULL;
    struct errmsg e = {""};
    assert_int_equal(store_node_view(c->node, "y.io", &y, &e), 0);
    char d[DIGEST_STRING_MAX];
    sha("private bytes", d);
    struct store_download dx = {.fd = -1, .lock_fd = -1}, dy = dx;
    assert_int_equal(store_download_begin(x, d, &dx, &e), 0);
    assert_int_equal(write(dx.fd, "private", 7), 7);
    char *partial_x = strdup(dx.partial_path);
    store_download_abort(&dx, true); /* cut short: kept to resume */
    /* y.io's download neither waits for x.io's lock nor resumes its bytes. */
    assert_int_equal(store_download_begin(y, d, &dy, &e), 0);
    assert_int_equal(dy.offset, 0);
    assert_string_not_equal(dy.partial_path, partial_x);
    store_download_abort(&dy, false);
    /* x.io's resumes, and once whole it is x.io's alone. */
    assert_int_equal(store_download_begin(x, d, &dx, &e), 0);
    assert_int_equal(dx.offset, 7);
    assert_int_equal(write(dx.fd, " bytes", 6), 6);
    assert_int_equal(store_download_commit(x, &dx, &e), 0);
    store_download_end(&dx);
    assert_true(store_has_layer_blob(x, d));
    assert_false(store_has_layer_blob(y, d));
    assert_false(store_has_blob(c->node, d));
    assert_int_equal(store_download_begin(y, d, &dy, &e), 0);
    store_download_abort(&dy, false);
    struct store_gc_stats st = {0};
    assert_int_equal(store_gc(c->node, NULL, &st, &e), 0);
    assert_int_equal(st.blobs_removed, 1);
    assert_false(store_has_layer_blob(x, d));
    free(partial_x);
    store_free(x);
    store_free(y);
}

/* One digest from two registries is two layers, each named HMAC(key, "REGISTRY\nDIGEST"): what
 * one registry says about a layer cannot reach the other's. */
static void test_node_view_names(void **state)
{
    struct ctx *c = *state;
    make_layer_file(c->base);
    open_node(c);
    struct store *x = x_io(c), *y = NULL, *bad = NULL;
    struct errmsg e = {""};
    assert_int_equal(store_node_view(c->node, "y.io:5000", &y, &e), 0);
    assert_int_equal(store_node_view(c->s, "x.io", &bad, &e), -EINVAL);
    char d[DIGEST_STRING_MAX];
    sha("shared bytes", d);
    char *px = NULL, *py = NULL, *pn = NULL;
    assert_int_equal(store_layer_path(x, d, &px), 0);
    assert_int_equal(store_layer_path(y, d, &py), 0);
    assert_int_equal(store_layer_path(c->node, d, &pn), 0);
    assert_string_not_equal(px, py);
    assert_string_not_equal(px, pn);
    unsigned char key[32];
    read_key(c, key);
    char scoped[160], name[65], want[PATH_MAX];
    snprintf(scoped, sizeof(scoped), "x.io\n%s", d);
    expected_name(key, scoped, name);
    snprintf(want, sizeof(want), "%s/layers/%s", c->node_root, name);
    assert_string_equal(px, want);
    /* A view's layer is the store's: made through the view, seen by another view of x.io. */
    node_layer(x, "shared bytes", d);
    struct store *x2 = x_io(c);
    assert_true(store_has_layer(x2, d));
    assert_false(store_has_layer(y, d));
    assert_false(store_has_layer(c->node, d));
    free(px);
    free(py);
    free(pn);
    store_free(x);
    store_free(x2);
    store_free(y);
}

/* gc in a node store finds the live layers through their names. */
static void test_node_gc(void **state)
{
    struct ctx *c = *state;
    make_layer_file(c->base);
    open_node(c);
    char used[DIGEST_STRING_MAX], unused[DIGEST_STRING_MAX], kept[DIGEST_STRING_MAX],
        busy[DIGEST_STRING_MAX], elsewhere[DIGEST_STRING_MAX];
    struct store *x = x_io(c);
    node_layer(x, "used", used);
    node_layer(c->node, "unused", unused);
    node_layer(c->node, "kept", kept);
    node_layer(c->node, "busy", busy);
    /* The record's layer as another registry's: a layer of its own, which no record names. */
    struct store *other = NULL;
    struct errmsg ve = {""};
    assert_int_equal(store_node_view(c->node, "other.io", &other, &ve), 0);
    node_layer(other, "used", elsewhere);
    const char *layers[] = {"used", NULL};
    save(c->node, "x.io/app:1", config_a, layers);
    /* Something in layers/ that is no layer's name is not gc's to judge. */
    char odd[PATH_MAX];
    snprintf(odd, sizeof(odd), "%s/layers/lost+found", c->node_root);
    assert_int_equal(mkdir(odd, 0700), 0);

    struct errmsg e = {""};
    int lock = -1;
    assert_int_equal(store_layer_lock(c->node, busy, false, true, &lock, &e), 0);
    /* gc opens the lock file anew: flock(2) locks on two open files conflict in one process
     * too, so this stands for a service's unpack that runs. */
    char *keep[] = {kept, "not-a-digest", NULL};
    struct store_gc_stats st = {0};
    assert_int_equal(store_gc(c->node, keep, &st, &e), 0);
    assert_true(layer_complete(x, used));
    assert_true(layer_complete(c->node, kept));
    assert_true(layer_complete(c->node, busy));
    assert_false(store_has_layer(c->node, unused));
    assert_false(store_has_layer(other, elsewhere));
    assert_int_equal(st.layers_removed, 2);
    assert_int_equal(st.layers_busy, 1);
    assert_true(exists(odd));
    close(lock);

    assert_int_equal(store_gc(c->node, NULL, &st, &e), 0);
    assert_true(store_has_layer(x, used));
    assert_false(store_has_layer(c->node, kept));
    assert_false(store_has_layer(c->node, busy));
    assert_int_equal(st.layers_removed, 2);
    char layers_dir[PATH_MAX];
    snprintf(layers_dir, sizeof(layers_dir), "%s/layers", c->node_root);
    DIR *dir = opendir(layers_dir);
    assert_non_null(dir);
    int n = 0;
    for (struct dirent *de; (de = readdir(dir));)
        n += de->d_name[0] != '.';
    closedir(dir);
    assert_int_equal(n, 2); /* used, lost+found */
    store_free(x);
    store_free(other);
}

/* A new key: the referenced layers move to their new names, old paths lead nowhere, and what
 * nothing references stays under its old name for gc. */
static void test_node_rekey(void **state)
{
    struct ctx *c = *state;
    make_layer_file(c->base);
    open_node(c);
    char used[DIGEST_STRING_MAX], unused[DIGEST_STRING_MAX];
    struct store *x = x_io(c);
    node_layer(x, "used", used);
    node_layer(c->node, "unused", unused);
    const char *layers[] = {"used", NULL};
    save(c->node, "x.io/app:1", config_a, layers);
    save(c->node, "x.io/app:2", config_b, layers); /* one layer, two records: renamed once */
    char *old_used = NULL, *old_unused = NULL, *path = NULL;
    assert_int_equal(store_layer_path(x, used, &old_used), 0);
    assert_int_equal(store_layer_path(c->node, unused, &old_unused), 0);
    unsigned char old_key[32], key[32];
    read_key(c, old_key);

    struct errmsg e = {""};
    int block = -1;
    assert_int_equal(store_pull_block(c->node, &block, &e), 0);
    assert_int_equal(store_node_rekey(c->node, &e), -EBUSY);
    close(block);
    assert_int_equal(store_node_rekey(c->s, &e), -EINVAL);

    assert_int_equal(store_node_rekey(c->node, &e), 1);
    read_key(c, key);
    assert_memory_not_equal(key, old_key, 32);
    assert_false(exists(old_used));
    assert_true(exists(old_unused));
    /* A view made before the new key names by the old one: take a new one. */
    store_free(x);
    x = x_io(c);
    assert_true(layer_complete(x, used));
    char name[65], want[PATH_MAX], scoped[160];
    snprintf(scoped, sizeof(scoped), "x.io\n%s", used);
    expected_name(key, scoped, name);
    snprintf(want, sizeof(want), "%s/layers/%s", c->node_root, name);
    assert_int_equal(store_layer_path(x, used, &path), 0);
    assert_string_equal(path, want);
    free(path);

    /* Another open reads the new key. */
    struct store *again = NULL;
    assert_int_equal(store_open_node(c->node_root, &again, &e), 0);
    struct store *again_x = NULL;
    assert_int_equal(store_node_view(again, "x.io", &again_x, &e), 0);
    assert_true(layer_complete(again_x, used));
    store_free(again_x);
    store_free(again);

    struct store_gc_stats st = {0};
    assert_int_equal(store_gc(c->node, NULL, &st, &e), 0);
    assert_int_equal(st.layers_removed, 1);
    assert_false(exists(old_unused));
    assert_true(layer_complete(x, used));
    store_free(x);
    free(old_used);
    free(old_unused);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_open_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_blobs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_download_resume, setup, teardown),
        cmocka_unit_test_setup_teardown(test_download_waits_for_other, setup, teardown),
        cmocka_unit_test_setup_teardown(test_layer_commit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_layer_lock_modes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_concurrent_unpack_once, setup, teardown),
        cmocka_unit_test_setup_teardown(test_images, setup, teardown),
        cmocka_unit_test_setup_teardown(test_image_find, setup, teardown),
        cmocka_unit_test_setup_teardown(test_image_invalid_and_damaged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_image_long_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gc_tmp_and_pull_block, setup, teardown),
        cmocka_unit_test_setup_teardown(test_scratch_dirs, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_layout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_layer_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_view_names, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_key_race, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_bad_key, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_layer_unpack, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_blobs_per_registry, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_gc, setup, teardown),
        cmocka_unit_test_setup_teardown(test_node_rekey, setup, teardown),
    };
    return test_run_cases(tests);
}
