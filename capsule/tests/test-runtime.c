/* The runtime against real namespaces: layers built from busybox in a temp dir (one with a
 * whiteout and an opaque directory, 45 more for a deep image, two stored as the node cache
 * stores them for fuse-overlayfs), containers run in every rootfs mode. Runs as root and as an
 * ordinary user; skipped where user namespaces are refused. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/rm-tree.h"
#include "test-skip.h"

#include "lib/macro.h"
#include "capsule/runtime/fuse-root.h"
#include "capsule/runtime/rootfs.h"
#include "capsule/runtime/runtime.h"
#include "capsule/runtime/tty.h"

#define N_DEEP 45

static char tmp[256];
static char base_layer[300], top_layer[300], odd_layer[300], out_dir[300], home_dir[300],
    data_dir[300], scratch_dir[300], host_dir[300], nc_base[300], nc_top[300];
static char *deep_layers[N_DEEP];

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0;
    ssize_t n = getdelim(&buf, &cap, '\0', f);
    fclose(f);
    if (n < 0) {
        free(buf);
        return strdup("");
    }
    return buf;
}

static void put_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
}

static void mkdirs(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void mkdirs(const char *fmt, ...)
{
    char path[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof(path), fmt, ap);
    va_end(ap);
    for (char *p = path + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            mkdir(path, 0755);
            *p = '/';
        }
    if (mkdir(path, 0755) < 0)
        assert_int_equal(errno, EEXIST);
}

static void copy_busybox(const char *dest)
{
    int in = open("/bin/busybox", O_RDONLY | O_CLOEXEC);
    int out = open(dest, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    assert_true(in >= 0 && out >= 0);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof(buf))) > 0)
        assert_int_equal(write(out, buf, (size_t)n), n);
    close(in);
    close(out);
}

/* bin/busybox plus a relative symlink per applet, as an image would have them. */
static void make_busybox_layer(void)
{
    char path[4096];
    mkdirs("%s/bin", base_layer);
    snprintf(path, sizeof(path), "%s/bin/busybox", base_layer);
    copy_busybox(path);
    FILE *list = popen("/bin/busybox --list", "re");
    assert_non_null(list);
    char name[128];
    while (fgets(name, sizeof(name), list)) {
        name[strcspn(name, "\n")] = '\0';
        if (!*name || strcmp(name, "busybox") == 0)
            continue;
        snprintf(path, sizeof(path), "%s/bin/%s", base_layer, name);
        assert_int_equal(symlink("busybox", path), 0);
    }
    pclose(list);
    mkdirs("%s/etc", base_layer);
    mkdirs("%s/opq", base_layer);
    mkdirs("%s/mnt", base_layer);
    snprintf(path, sizeof(path), "%s/etc/passwd", base_layer);
    put_file(path, "root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/false\n");
    snprintf(path, sizeof(path), "%s/etc/group", base_layer);
    put_file(path, "root:x:0:\nnogroup:x:65534:\n");
    snprintf(path, sizeof(path), "%s/etc/gone", base_layer);
    put_file(path, "base\n");
    snprintf(path, sizeof(path), "%s/etc/kept", base_layer);
    put_file(path, "base\n");
    snprintf(path, sizeof(path), "%s/opq/a", base_layer);
    put_file(path, "a\n");
    /* An image symlink that points at a host directory: mount targets through it must stay
     * inside the container. */
    snprintf(path, sizeof(path), "%s/mnt/escape", base_layer);
    char target[1024];
    snprintf(target, sizeof(target), "../../../../../../../../..%s", host_dir);
    assert_int_equal(symlink(target, path), 0);
    /* One that points into the home directory, which is the host's inside the container too. */
    snprintf(path, sizeof(path), "%s/mnt/tohome", base_layer);
    assert_int_equal(symlink(home_dir, path), 0);
}

/* A layer with what no image should have, but one may: /etc/passwd a fifo (opening it for
 * reading blocks), /etc/group a directory. */
static void make_odd_layer(void)
{
    char path[4096];
    mkdirs("%s/etc/group", odd_layer);
    snprintf(path, sizeof(path), "%s/etc/passwd", odd_layer);
    assert_int_equal(mkfifo(path, 0644), 0);
}

/* The second layer in overlay format: a whiteout, an opaque directory, a changed file. */
static void make_top_layer(void)
{
    char path[4096];
    mkdirs("%s/etc", top_layer);
    mkdirs("%s/opq", top_layer);
    snprintf(path, sizeof(path), "%s/etc/gone", top_layer);
    assert_int_equal(mknod(path, S_IFCHR | 0600, makedev(0, 0)), 0);
    snprintf(path, sizeof(path), "%s/opq", top_layer);
    assert_int_equal(setxattr(path, "user.overlay.opaque", "y", 1, 0), 0);
    snprintf(path, sizeof(path), "%s/opq/b", top_layer);
    put_file(path, "b\n");
    snprintf(path, sizeof(path), "%s/etc/kept", top_layer);
    put_file(path, "top\n");
}

static void set_override(const char *layer, const char *path, const char *value)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/%s", layer, path);
    assert_int_equal(lsetxattr(p, "user.containers.override_stat", value, strlen(value), 0), 0);
}

/* Every regular file and directory of a node cache layer has its override_stat: fuse-overlayfs
 * (1.10) fails a directory with ENODATA where one of them lacks it. */
static int override_one(const char *path, const struct stat *st, int type, struct FTW *f)
{
    char value[64];
    if (type != FTW_F && type != FTW_D)
        return 0;
    if (!S_ISREG(st->st_mode) && !S_ISDIR(st->st_mode))
        return 0;
    snprintf(value, sizeof(value), "0:0:%04o:%s", (unsigned)(st->st_mode & 07777),
             S_ISDIR(st->st_mode) ? "dir" : "file");
    return lsetxattr(path, "user.containers.override_stat", value, strlen(value), 0);
}

/* Two layers as the node cache stores them: the base's files (busybox, etc) plus an image's
 * /etc/shadow (0600) and /root (0700), widened on disk to 0644 and 0755, the image's modes in
 * override_stat xattrs (the one on each layer root is what makes fuse-overlayfs read them);
 * the top one with a whiteout and a changed file, in a directory whose name has a ',' (escaped
 * in fuse-overlayfs' options). Owned by nobody where we may give them away. */
static void make_node_cache_layers(void)
{
    char cmd[4096], path[4096];
    snprintf(cmd, sizeof(cmd), "cp -a %s %s", base_layer, nc_base);
    assert_int_equal(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/etc/shadow", nc_base);
    put_file(path, "secret\n");
    assert_int_equal(chmod(path, 0644), 0);
    mkdirs("%s/root", nc_base);
    assert_int_equal(nftw(nc_base, override_one, 16, FTW_PHYS), 0);
    set_override(nc_base, "etc/shadow", "0:0:0600:file");
    set_override(nc_base, "root", "0:0:0700:dir");
    mkdirs("%s/etc", nc_top);
    snprintf(path, sizeof(path), "%s/etc/gone", nc_top);
    assert_int_equal(mknod(path, S_IFCHR | 0600, makedev(0, 0)), 0);
    snprintf(path, sizeof(path), "%s/etc/kept", nc_top);
    put_file(path, "top\n");
    assert_int_equal(nftw(nc_top, override_one, 16, FTW_PHYS), 0);
    if (getuid() == 0) {
        snprintf(cmd, sizeof(cmd), "chown -R 65534:65534 '%s' '%s'", nc_base, nc_top);
        assert_int_equal(system(cmd), 0);
    }
}

static void make_deep_layers(void)
{
    for (int i = 0; i < N_DEEP; i++) {
        char path[4096], text[16];
        assert_true(asprintf(&deep_layers[i], "%s/d%02d", tmp, i) > 0);
        mkdirs("%s/deep", deep_layers[i]);
        snprintf(path, sizeof(path), "%s/deep/%02d", deep_layers[i], i);
        put_file(path, "x\n");
        snprintf(path, sizeof(path), "%s/deep/top", deep_layers[i]);
        snprintf(text, sizeof(text), "%d\n", i);
        put_file(path, text);
    }
}

/* Why containers cannot run here, or NULL. */
static const char *runtime_unavailable(void)
{
    if (access("/bin/busybox", X_OK) < 0)
        return "no /bin/busybox (busybox-static)";
    struct errmsg e = {{0}};
    if (runtime_probe_userns(&e) < 0) {
        fprintf(stderr, "user namespaces unavailable: %s\n", e.text);
        return "user namespaces unavailable";
    }
    return NULL;
}

static int group_setup(void **state)
{
    const char *t = getenv("TMPDIR");
    snprintf(tmp, sizeof(tmp), "%s/test-runtime-XXXXXX", t && *t ? t : "/tmp");
    assert_non_null(mkdtemp(tmp));
    snprintf(base_layer, sizeof(base_layer), "%s/base", tmp);
    snprintf(top_layer, sizeof(top_layer), "%s/top", tmp);
    snprintf(odd_layer, sizeof(odd_layer), "%s/odd", tmp);
    snprintf(out_dir, sizeof(out_dir), "%s/out", tmp);
    snprintf(home_dir, sizeof(home_dir), "%s/home/user", tmp);
    snprintf(data_dir, sizeof(data_dir), "%s/data", tmp);
    snprintf(scratch_dir, sizeof(scratch_dir), "%s/scratch", tmp);
    snprintf(host_dir, sizeof(host_dir), "%s/host", tmp);
    snprintf(nc_base, sizeof(nc_base), "%s/nc-base", tmp);
    snprintf(nc_top, sizeof(nc_top), "%s/nc,top", tmp);
    mkdirs("%s", out_dir);
    mkdirs("%s", home_dir);
    mkdirs("%s", data_dir);
    mkdirs("%s", scratch_dir);
    mkdirs("%s", host_dir);
    char path[4096];
    snprintf(path, sizeof(path), "%s/marker", home_dir);
    put_file(path, "home\n");
    snprintf(path, sizeof(path), "%s/file", data_dir);
    put_file(path, "data\n");
    make_busybox_layer();
    make_top_layer();
    make_odd_layer();
    make_deep_layers();
    make_node_cache_layers();
    return 0;
}

static int group_teardown(void **state)
{
    if (tmp[0])
        rm_tree(tmp);
    for (int i = 0; i < N_DEEP; i++)
        free(deep_layers[i]);
    return 0;
}

/* One container run: a spec with the two test layers, /out bound, and a shell script. */
struct job {
    char *argv[5];
    char *env[6];
    char *layers[N_DEEP + 2];
    struct mount_entry mounts[4];
    struct run_spec spec;
};

static void job_init(struct job *j, const char *script)
{
    memset(j, 0, sizeof(*j));
    j->argv[0] = (char *)"sh";
    j->argv[1] = (char *)"-c";
    j->argv[2] = (char *)script;
    j->env[0] = (char *)"PATH=/usr/bin:/bin";
    j->layers[0] = base_layer;
    j->layers[1] = top_layer;
    j->mounts[0] = (struct mount_entry){.source = out_dir, .target = (char *)"/out"};
    j->spec = (struct run_spec){
        .layers = j->layers,
        .n_layers = 2,
        .argv = j->argv,
        .env = j->env,
        .home = home_dir,
        .user_name = "tester",
        .scratch_dir = scratch_dir,
        .mounts = j->mounts,
        .n_mounts = 1,
    };
}

static int job_run(struct job *j)
{
    struct errmsg e = {{0}};
    int code = -1;
    int r = runtime_run(&j->spec, &code, &e);
    if (r < 0)
        fail_msg("runtime_run: %s (%d)", e.text, r);
    return code;
}

static int run_sh(const char *script)
{
    struct job j;
    job_init(&j, script);
    return job_run(&j);
}

static char *out_file(const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", out_dir, name);
    char *s = slurp(path);
    unlink(path);
    return s;
}

static void test_exit_status(void **state)
{
    struct job j;
    job_init(&j, "exit 7");
    j.argv[0] = (char *)"true";
    j.argv[1] = NULL;
    assert_int_equal(job_run(&j), 0);
    j.argv[0] = (char *)"/bin/false";
    assert_int_equal(job_run(&j), 1);
    assert_int_equal(run_sh("exit 7"), 7);
    assert_int_equal(run_sh("kill -TERM $$; sleep 5"), 143);
    job_init(&j, "kill -TERM $$; sleep 5");
    j.spec.pid_ns = true;
    assert_int_equal(job_run(&j), 143);
}

static void test_exec_failures(void **state)
{
    bool pid_ns_modes[] = {false, true};
    for (size_t i = 0; i < ELEMENTSOF(pid_ns_modes); i++) {
        struct job j;
        job_init(&j, "");
        j.spec.pid_ns = pid_ns_modes[i];
        j.argv[0] = (char *)"no-such-command";
        j.argv[1] = NULL;
        struct errmsg e = {{0}};
        int code = -1;
        assert_int_equal(runtime_run(&j.spec, &code, &e), -ENOENT);
        assert_string_equal(e.text, "exec 'no-such-command': not found in PATH=/usr/bin:/bin");
        j.argv[0] = (char *)"/etc/kept";
        assert_int_equal(runtime_run(&j.spec, &code, &e), -EACCES);
        assert_string_equal(e.text, "exec '/etc/kept': Permission denied");
    }
}

static void test_env_and_cwd(void **state)
{
    struct job j;
    char script[4096];
    snprintf(script, sizeof(script),
             "test \"$FOO\" = 'a b' && test \"$(pwd)\" = /work/dir && test \"$HOME\" = %s && "
             "test -d /work/dir",
             home_dir);
    job_init(&j, script);
    j.env[1] = (char *)"FOO=a b";
    j.spec.cwd = "/work/dir";
    assert_int_equal(job_run(&j), 0);
    /* The spec's HOME wins over ours. */
    job_init(&j, "test \"$HOME\" = /elsewhere");
    j.env[1] = (char *)"HOME=/elsewhere";
    assert_int_equal(job_run(&j), 0);
    /* PATH of the container's env, not ours: only /bin has the applets. */
    job_init(&j, "");
    j.argv[0] = (char *)"true";
    j.argv[1] = NULL;
    j.env[0] = (char *)"PATH=/nowhere";
    struct errmsg e = {{0}};
    int code;
    assert_int_equal(runtime_run(&j.spec, &code, &e), -ENOENT);
}

static void test_readonly_and_writable(void **state)
{
    assert_int_not_equal(run_sh("touch /newfile 2>/dev/null"), 0);
    assert_int_not_equal(run_sh("(echo x > /etc/kept) 2>/dev/null"), 0);
    /* /tmp and /out stay writable in a read-only root. */
    assert_int_equal(run_sh("touch /tmp/x && touch /out/w && rm /out/w"), 0);
    struct job j;
    job_init(&j, "touch /newfile && echo changed > /etc/kept && rm /opq/b");
    j.spec.writable = true;
    assert_int_equal(job_run(&j), 0);
    assert_int_equal(run_sh("test ! -e /newfile && test \"$(cat /etc/kept)\" = top && "
                            "test -e /opq/b"),
                     0);
    char path[4096];
    snprintf(path, sizeof(path), "%s/etc/kept", top_layer);
    _cleanup_free_ char *kept = slurp(path);
    assert_string_equal(kept, "top\n");
}

static const char *view_script = "test ! -e /etc/gone && test \"$(cat /etc/kept)\" = top && "
                                 "test ! -e /opq/a && test \"$(cat /opq/b)\" = b && "
                                 "test -x /bin/busybox";

static void test_whiteout_and_opaque(void **state)
{
    assert_int_equal(run_sh(view_script), 0);
    /* This kernel has "lowerdir+": the layers went in one by one. */
    assert_int_equal(run_sh("grep ' / / ' /proc/self/mountinfo | grep -q 'lowerdir+='"), 0);
}

static void test_standard_mounts(void **state)
{
    assert_int_equal(
        run_sh("test -c /dev/null && echo x > /dev/null && test -c /dev/zero && "
               "test \"$(head -c 4 /dev/urandom | wc -c)\" = 4 && test -c /dev/full && "
               "test -L /dev/fd && test -e /dev/fd/0 && test -c /dev/pts/ptmx && "
               "test \"$(readlink /dev/ptmx)\" = pts/ptmx && touch /dev/shm/x && test -k /tmp && "
               "test -d /sys/class && ! touch /sys/x 2>/dev/null && test -r /etc/hosts && "
               "! (echo >> /etc/hosts) 2>/dev/null && test -d /proc/self"),
        0);
}

/* A read-only root on a file system mounted nosuid,nodev: in a user namespace those flags are
 * locked, and the remount must keep them or the kernel refuses it. */
static void test_locked_flags(void **state)
{
    if (getuid() != 0)
        test_skip("needs root to mount a nosuid,nodev scratch file system");
    char dir[1024];
    snprintf(dir, sizeof(dir), "%s/locked", tmp);
    mkdirs("%s", dir);
    assert_int_equal(mount("tmpfs", dir, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755"), 0);
    struct job j;
    job_init(&j, "test -x /bin/sh && ! touch /x 2>/dev/null && grep -q ' / ro,nosuid,nodev,' "
                 "/proc/self/mountinfo");
    j.spec.rootfs_mode = RUNTIME_ROOTFS_COPY;
    j.spec.scratch_dir = dir;
    struct errmsg e = {{0}};
    int code = -1;
    int r = runtime_run(&j.spec, &code, &e);
    assert_int_equal(umount(dir), 0);
    if (r < 0)
        fail_msg("runtime_run: %s", e.text);
    assert_int_equal(code, 0);
}

static void test_copy_mode(void **state)
{
    struct job j;
    job_init(&j, view_script);
    j.spec.rootfs_mode = RUNTIME_ROOTFS_COPY;
    assert_int_equal(job_run(&j), 0);
    /* Writable copies are private to the run too. */
    job_init(&j, "touch /newfile && rm /etc/kept");
    j.spec.rootfs_mode = RUNTIME_ROOTFS_COPY;
    j.spec.writable = true;
    assert_int_equal(job_run(&j), 0);
    job_init(&j, "test ! -e /newfile && test -e /etc/kept && ! touch /x 2>/dev/null");
    j.spec.rootfs_mode = RUNTIME_ROOTFS_COPY;
    assert_int_equal(job_run(&j), 0);
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "ls -A %s", scratch_dir);
    FILE *p = popen(cmd, "re");
    char line[256] = "";
    assert_null(fgets(line, sizeof(line), p));
    pclose(p);
}

static void test_passwd(void **state)
{
    char script[4096];
    snprintf(script, sizeof(script),
             "grep -qxF 'tester:x:%u:%u::%s:/bin/sh' /etc/passwd && "
             "grep -q '^%s:' /etc/passwd && test \"$(id -u)\" = %u && "
             "test \"$(grep -c ':x:%u:' /etc/passwd)\" = 1 && grep -q ':x:%u:$' /etc/group",
             getuid(), getgid(), home_dir, getuid() == 0 ? "nobody" : "root", getuid(), getuid(),
             getgid());
    assert_int_equal(run_sh(script), 0);
    struct job j;
    snprintf(script, sizeof(script),
             "test \"$(id -u)\" = 0 && test \"$(id -un)\" = root && "
             "grep -qxF 'root:x:0:0::%s:/bin/sh' /etc/passwd && touch /out/byroot",
             home_dir);
    job_init(&j, script);
    j.spec.remap_root = true;
    assert_int_equal(job_run(&j), 0);
    /* root inside is the caller outside. */
    char path[4096];
    struct stat st;
    snprintf(path, sizeof(path), "%s/byroot", out_dir);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_uid, getuid());
    unlink(path);
}

static void test_home(void **state)
{
    char script[4096];
    snprintf(script, sizeof(script), "test -e %s/marker && touch %s/written", home_dir, home_dir);
    assert_int_equal(run_sh(script), 0);
    char path[4096];
    snprintf(path, sizeof(path), "%s/written", home_dir);
    assert_int_equal(unlink(path), 0);
    struct job j;
    snprintf(script, sizeof(script), "test ! -e %s/marker && grep -q '::/:/bin/sh$' /etc/passwd",
             home_dir);
    job_init(&j, script);
    j.spec.no_home = true;
    assert_int_equal(job_run(&j), 0);
}

static void test_spec_mounts_and_links(void **state)
{
    struct job j;
    job_init(&j, "test \"$(cat /data/ro/file)\" = data && ! touch /data/ro/new 2>/dev/null && "
                 "touch /data/rw/new && test \"$(cat /single)\" = data && "
                 "test \"$(readlink /usr/lib/libfoo.so.1)\" = libfoo.so.1.2 && "
                 "test \"$(readlink /etc/kept)\" = elsewhere && test -d /mnt/escape/inside");
    char file[4096];
    snprintf(file, sizeof(file), "%s/file", data_dir);
    j.mounts[1] = (struct mount_entry){.source = data_dir, .target = "/data/ro", .flags = MOUNT_RO};
    j.mounts[2] = (struct mount_entry){.source = data_dir, .target = "/data/rw"};
    j.mounts[3] = (struct mount_entry){.source = file, .target = "/single", .flags = MOUNT_RO};
    j.spec.n_mounts = 4;
    struct link_entry links[] = {
        {.path = "/usr/lib/libfoo.so.1", .target = "libfoo.so.1.2"},
        {.path = "/etc/kept", .target = "elsewhere"},
        {.path = "/mnt/escape/inside/link", .target = "x"},
    };
    j.spec.links = links;
    j.spec.n_links = ELEMENTSOF(links);
    assert_int_equal(job_run(&j), 0);
    char path[4096];
    snprintf(path, sizeof(path), "%s/new", data_dir);
    assert_int_equal(unlink(path), 0);
    /* The image's symlink to a host directory did not let us create anything there. */
    snprintf(path, sizeof(path), "%s/inside", host_dir);
    assert_int_equal(access(path, F_OK), -1);

    job_init(&j, "true");
    j.mounts[1] = (struct mount_entry){.source = "/no/such/dir", .target = "/x"};
    j.spec.n_mounts = 2;
    struct errmsg e = {{0}};
    int code;
    assert_int_equal(runtime_run(&j.spec, &code, &e), -ENOENT);
    assert_non_null(strstr(e.text, "/no/such/dir"));
    j.mounts[1].flags = MOUNT_OPTIONAL;
    assert_int_equal(job_run(&j), 0);
}

/* Mounts and links are made in the container's own files only: an image's symlink into a host
 * directory mounted inside (the home here) must not turn them into writes to the user's files. */
static void test_no_writes_through_image_links(void **state)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/libcuda.so.1", home_dir);
    put_file(path, "precious\n");
    static const char *const links[] = {"/mnt/tohome/lib/libx.so.1", "/mnt/tohome/libcuda.so.1"};
    for (size_t i = 0; i < ELEMENTSOF(links); i++) {
        struct job j;
        job_init(&j, "true");
        struct link_entry l = {.path = (char *)links[i], .target = "elsewhere"};
        j.spec.links = &l;
        j.spec.n_links = 1;
        struct errmsg e = {{0}};
        int code;
        assert_int_equal(runtime_run(&j.spec, &code, &e), -EXDEV);
        assert_non_null(strstr(e.text, links[i]));
    }
    _cleanup_free_ char *kept = slurp(path);
    assert_string_equal(kept, "precious\n");
    assert_int_equal(unlink(path), 0);

    struct job j;
    job_init(&j, "true");
    j.mounts[1] = (struct mount_entry){.source = data_dir, .target = "/mnt/tohome/bin/tool"};
    j.spec.n_mounts = 2;
    struct errmsg e = {{0}};
    int code;
    assert_int_equal(runtime_run(&j.spec, &code, &e), -EXDEV);
    assert_non_null(strstr(e.text, "/mnt/tohome/bin/tool"));
    /* A missing working directory is not made there either. */
    job_init(&j, "true");
    j.spec.cwd = "/mnt/tohome/newdir";
    assert_true(runtime_run(&j.spec, &code, &e) < 0);
    const char *absent[] = {"lib", "bin", "newdir"};
    for (size_t i = 0; i < ELEMENTSOF(absent); i++) {
        snprintf(path, sizeof(path), "%s/%s", home_dir, absent[i]);
        assert_int_equal(access(path, F_OK), -1);
    }

    /* A path typed without symlinks still gets its mount point below another mount of the
     * host, as Docker does it (--mount /a:/mnt/a --mount /b:/mnt/a/b). */
    job_init(&j, "test -e /out/sub/file");
    j.mounts[1] = (struct mount_entry){.source = data_dir, .target = "/out/sub"};
    j.spec.n_mounts = 2;
    assert_int_equal(job_run(&j), 0);
    snprintf(path, sizeof(path), "%s/sub", out_dir);
    assert_int_equal(rmdir(path), 0);
}

/* Spec mounts that cannot work say so, naming both paths. */
static void test_spec_mount_refusals(void **state)
{
    char file[4096];
    snprintf(file, sizeof(file), "%s/file", data_dir);
    const struct {
        const char *source, *target;
        int r;
        const char *text;
    } cases[] = {
        {data_dir, "/", -EINVAL, "the container's root"},
        {data_dir, "/proc", -EINVAL, "/proc cannot be replaced"},
        {file, "/etc", -EISDIR, "the source is a file, the target a directory"},
        {data_dir, "/etc/kept", -ENOTDIR, "the source is a directory, the target a file"},
    };
    for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
        struct job j;
        job_init(&j, "true");
        j.mounts[1] = (struct mount_entry){.source = (char *)cases[i].source,
                                           .target = (char *)cases[i].target};
        j.spec.n_mounts = 2;
        struct errmsg e = {{0}};
        int code;
        assert_int_equal(runtime_run(&j.spec, &code, &e), cases[i].r);
        if (!strstr(e.text, cases[i].text) || !strstr(e.text, cases[i].target))
            fail_msg("'%s' on '%s': %s", cases[i].source, cases[i].target, e.text);
    }
}

/* An image whose /etc/passwd is a fifo and /etc/group a directory runs (without the entries);
 * it used to hang in the open of the fifo, before the command ever started. */
static void test_odd_user_db(void **state)
{
    struct job j;
    job_init(&j, "test -p /etc/passwd && test -d /etc/group");
    j.layers[2] = odd_layer;
    j.spec.n_layers = 3;
    alarm(60);
    assert_int_equal(job_run(&j), 0);
    alarm(0);
}

static void test_pid_namespace(void **state)
{
    struct job j;
    job_init(&j, "test $$ = 2 && test \"$(cat /proc/1/comm)\" != sh && ps -o pid > /out/ps");
    j.spec.pid_ns = true;
    assert_int_equal(job_run(&j), 0);
    _cleanup_free_ char *ps = out_file("ps");
    assert_non_null(ps);
    int lines = 0;
    for (char *line = strtok(ps, "\n"); line; line = strtok(NULL, "\n")) {
        if (strstr(line, "PID"))
            continue;
        lines++;
        assert_in_range(atoi(line), 1, 10);
    }
    assert_in_range(lines, 2, 5);
    /* Without a pid namespace the host's processes are visible. */
    char script[64];
    snprintf(script, sizeof(script), "test -d /proc/%d", (int)getpid());
    assert_int_equal(run_sh(script), 0);
}

static void test_hostname(void **state)
{
    struct job j;
    job_init(&j, "test \"$(hostname)\" = capsule-test");
    j.spec.hostname = "capsule-test";
    assert_int_equal(job_run(&j), 0);
}

static void test_deep_image(void **state)
{
    bool legacy_modes[] = {false, true};
    for (size_t m = 0; m < 3; m++) {
        struct job j;
        job_init(&j, "test \"$(cat /deep/top)\" = 44 && test -e /deep/00 && test -e /deep/44 && "
                     "test -x /bin/sh");
        for (int i = 0; i < N_DEEP; i++)
            j.layers[i + 1] = deep_layers[i];
        j.spec.n_layers = N_DEEP + 1;
        if (m < 2)
            rootfs_force_legacy_overlay = legacy_modes[m];
        else
            j.spec.rootfs_mode = RUNTIME_ROOTFS_COPY;
        assert_int_equal(job_run(&j), 0);
        rootfs_force_legacy_overlay = false;
    }
}

/* Docker's limit: 127 layers named like the store names them (64 hex digits). Too long for
 * one page of mount options: the legacy path refuses, AUTO falls back to a copy. */
static void test_max_layers(void **state)
{
    enum { N = 127 };
    static char *layers[N];
    layers[0] = base_layer;
    layers[N - 1] = top_layer;
    for (int i = 1; i < N - 1; i++) {
        assert_true(asprintf(&layers[i], "%s/layers/%064x", tmp, i) > 0);
        mkdirs("%s", layers[i]);
    }
    struct job j;
    job_init(&j, view_script);
    j.spec.layers = layers;
    j.spec.n_layers = N;
    assert_int_equal(job_run(&j), 0);
    rootfs_force_legacy_overlay = true;
    j.spec.rootfs_mode = RUNTIME_ROOTFS_OVERLAY;
    struct errmsg e = {{0}};
    int code = -1;
    int r = runtime_run(&j.spec, &code, &e);
    j.spec.rootfs_mode = RUNTIME_ROOTFS_AUTO;
    int fallback = job_run(&j);
    rootfs_force_legacy_overlay = false;
    assert_int_equal(r, -E2BIG);
    assert_non_null(strstr(e.text, "127 layers"));
    assert_int_equal(fallback, 0);
    for (int i = 1; i < N - 1; i++)
        free(layers[i]);
}

/* A cache shared by the users of a node: the layers belong to somebody else, whose id is not
 * mapped. The overlay cannot create anything in their directories; AUTO copies instead. */
static void test_foreign_layers(void **state)
{
    if (getuid() != 0)
        test_skip("needs root to give layers to another user");
    char layer[1024], cmd[4096];
    snprintf(layer, sizeof(layer), "%s/foreign", tmp);
    snprintf(cmd, sizeof(cmd), "cp -a %s %s && chown -R 65534:65534 %s", base_layer, layer, layer);
    assert_int_equal(system(cmd), 0);
    struct job j;
    job_init(&j, "test -x /bin/sh && grep -q '^tester:' /etc/passwd");
    j.layers[0] = layer;
    j.spec.n_layers = 1;
    j.spec.rootfs_mode = RUNTIME_ROOTFS_OVERLAY;
    struct errmsg e = {{0}};
    int code = -1;
    assert_int_equal(runtime_run(&j.spec, &code, &e), -EACCES);
    j.spec.rootfs_mode = RUNTIME_ROOTFS_AUTO;
    assert_int_equal(job_run(&j), 0);
}

static void test_legacy_overlay_view(void **state)
{
    rootfs_force_legacy_overlay = true;
    int code = run_sh(view_script);
    int legacy = run_sh("grep ' / / ' /proc/self/mountinfo | grep -v 'lowerdir+=' | "
                        "grep -q 'lowerdir='");
    rootfs_force_legacy_overlay = false;
    assert_int_equal(code, 0);
    assert_int_equal(legacy, 0);
}

static bool wait_for_file(const char *path)
{
    for (int i = 0; i < 500; i++) {
        if (access(path, F_OK) == 0)
            return true;
        usleep(10000);
    }
    return false;
}

/* The capsule parent is a forked process here, so that the test can signal it. */
static void signal_forwarding(bool pid_ns)
{
    char ready[4096];
    snprintf(ready, sizeof(ready), "%s/ready", out_dir);
    unlink(ready);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct job j;
        job_init(&j, "trap 'exit 42' USR1; touch /out/ready; while :; do sleep 0.05; done");
        j.spec.pid_ns = pid_ns;
        struct errmsg e = {{0}};
        int code = -1;
        _exit(runtime_run(&j.spec, &code, &e) < 0 ? 99 : code);
    }
    assert_true(wait_for_file(ready));
    assert_int_equal(kill(pid, SIGUSR1), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 42);
    unlink(ready);
}

static void test_signal_forwarding(void **state)
{
    signal_forwarding(false);
    signal_forwarding(true);
}

static void fuse_job(struct job *j, const char *script);

/* Ctrl-C on a terminal reaches every process of the foreground group, capsule included:
 * capsule survives it, returns the command's status, and the command sees it once; a command
 * that left the terminal's process group (setsid) gets it forwarded. fuse: the root through
 * fuse-overlayfs, which the terminal's signal must not reach. */
static void terminal_interrupt(bool pid_ns, bool own_session, bool fuse)
{
    int master = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    assert_true(master >= 0);
    assert_int_equal(grantpt(master), 0);
    assert_int_equal(unlockpt(master), 0);
    char ready[4096], ints[4096];
    snprintf(ready, sizeof(ready), "%s/ready", out_dir);
    snprintf(ints, sizeof(ints), "%s/ints", out_dir);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* A new session whose controlling terminal is the pty: we are its foreground group. */
        setsid();
        int slave = open(ptsname(master), O_RDWR | O_CLOEXEC);
        if (slave < 0)
            _exit(98);
        struct job j;
        const char *script = "trap 'echo INT >> /out/ints' INT; touch /out/ready; "
                             "for i in 1 2 3 4 5 6 7 8 9 10; do sleep 0.1; done; exit 3";
        if (fuse)
            fuse_job(&j, script);
        else
            job_init(&j, script);
        if (own_session) {
            j.argv[0] = "setsid";
            j.argv[1] = "sh";
            j.argv[2] = "-c";
            j.argv[3] = (char *)script;
        }
        j.spec.pid_ns = pid_ns;
        struct errmsg e = {{0}};
        int code = -1;
        if (runtime_run(&j.spec, &code, &e) < 0) {
            fprintf(stderr, "runtime_run: %s\n", e.text);
            _exit(99);
        }
        _exit(code);
    }
    assert_true(wait_for_file(ready));
    assert_int_equal(write(master, "\x03", 1), 1);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(master);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 3);
    _cleanup_free_ char *got = slurp(ints);
    assert_non_null(got);
    assert_string_equal(got, "INT\n");
    unlink(ints);
    unlink(ready);
}

/* The command's own terminal has the caller's window size before the command runs: a first
 * `stty size` must not depend on when capsule, on the other end, gets round to copying it. */
static void test_terminal_size_before_start(void **state)
{
    int caller = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    assert_true(caller >= 0);
    assert_int_equal(grantpt(caller), 0);
    assert_int_equal(unlockpt(caller), 0);
    struct winsize ws = {.ws_row = 33, .ws_col = 77};
    assert_int_equal(ioctl(caller, TIOCSWINSZ, &ws), 0);
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int slave = open(ptsname(caller), O_RDWR | O_NOCTTY);
        if (slave < 0 || dup2(slave, 0) < 0 || dup2(slave, 1) < 0)
            _exit(98);
        struct errmsg e = {{0}};
        if (tty_child_attach(sv[1], false, &e) < 0) {
            fprintf(stderr, "tty_child_attach: %s\n", e.text);
            _exit(99);
        }
        /* Nobody has touched the new terminal from the other end: sv[0] is never read. */
        struct winsize got = {0};
        if (ioctl(0, TIOCGWINSZ, &got) < 0)
            _exit(97);
        _exit(got.ws_row == 33 && got.ws_col == 77 ? 0 : 1);
    }
    close(sv[1]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    close(sv[0]);
    close(caller);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

static void test_terminal_interrupt(void **state)
{
    terminal_interrupt(false, false, false);
    terminal_interrupt(true, false, false);
    terminal_interrupt(false, true, false);
    terminal_interrupt(true, true, false);
}

/* A named container's own upper layer: changes persist from one run to the next. */
static void test_named_upper(void **state)
{
    char upper[1024], work[1024], path[4096];
    snprintf(upper, sizeof(upper), "%s/named/upper", tmp);
    snprintf(work, sizeof(work), "%s/named/work", tmp);
    mkdirs("%s", upper);
    mkdirs("%s", work);
    struct job j;
    job_init(&j, "touch /persist && rm /etc/kept");
    j.spec.upper_dir = upper;
    j.spec.work_dir = work;
    j.spec.writable = true;
    assert_int_equal(job_run(&j), 0);
    snprintf(path, sizeof(path), "%s/persist", upper);
    assert_int_equal(access(path, F_OK), 0);
    job_init(&j, "test -e /persist && test ! -e /etc/kept && ! touch /x 2>/dev/null");
    j.spec.upper_dir = upper;
    j.spec.work_dir = work;
    assert_int_equal(job_run(&j), 0);
    /* The copy fallback shows the same view. */
    j.spec.rootfs_mode = RUNTIME_ROOTFS_COPY;
    assert_int_equal(job_run(&j), 0);
}

static void test_ldconfig(void **state)
{
    char layer[1024], path[4096];
    snprintf(layer, sizeof(layer), "%s/ldconfig", tmp);
    mkdirs("%s/sbin", layer);
    snprintf(path, sizeof(path), "%s/sbin/ldconfig", layer);
    put_file(path, "#!/bin/sh\necho \"$@\" > /etc/ldconfig-args\n");
    assert_int_equal(chmod(path, 0755), 0);
    struct job j;
    job_init(&j, "test \"$(cat /etc/ldconfig-args)\" = /usr/lib/gpu && "
                 "test -z \"$LD_LIBRARY_PATH\" && test $$ = 2 && ! touch /x 2>/dev/null");
    j.layers[2] = layer;
    j.spec.n_layers = 3;
    j.spec.pid_ns = true;
    j.spec.run_ldconfig = true;
    j.spec.ld_library_dir = "/usr/lib/gpu";
    assert_int_equal(job_run(&j), 0);
    /* An image without ldconfig: the loader finds the libraries through LD_LIBRARY_PATH. */
    job_init(&j, "test \"$LD_LIBRARY_PATH\" = /usr/lib/gpu:/opt/lib");
    j.env[1] = "LD_LIBRARY_PATH=/opt/lib";
    j.spec.run_ldconfig = true;
    j.spec.ld_library_dir = "/usr/lib/gpu";
    assert_int_equal(job_run(&j), 0);
}

struct started {
    int fd;
    int ret;
};

static int on_started(pid_t pid, void *userdata)
{
    struct started *s = userdata;
    if (s->fd >= 0)
        assert_int_equal(write(s->fd, &pid, sizeof(pid)), sizeof(pid));
    return s->ret;
}

/* runtime_join in a child that then runs the exec test's check there; returns its exit status. */
static int join_and_run(pid_t init, bool pid_ns)
{
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        struct errmsg e = {{0}};
        int r = runtime_join(init, &e);
        if (r < 0 || r != (pid_ns ? 1 : 0))
            _exit(90);
        if (r == 1) {
            pid_t inner = fork();
            if (inner > 0) {
                int st;
                _exit(waitpid(inner, &st, 0) == inner && WIFEXITED(st) ? WEXITSTATUS(st) : 91);
            }
        }
        char *argv[] = {"/bin/sh", "-c",
                        "test -e /tmp/only-here && test \"$(cat /etc/kept)\" = top && "
                        "test \"$(pwd)\" = / && exit 5",
                        NULL};
        char *env[] = {"PATH=/bin", NULL};
        execve(argv[0], argv, env);
        _exit(92);
    }
    int status;
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    return WEXITSTATUS(status);
}

/* Runs j (whose command touches /out/ready, then waits) in a child process standing for capsule;
 * returns that process once the container is ready, with its init's pid in *ret_init. */
static pid_t start_container(struct job *j, pid_t *ret_init)
{
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    pid_t capsule = fork();
    assert_true(capsule >= 0);
    if (capsule == 0) {
        close(p[0]);
        struct started s = {.fd = p[1]};
        j->spec.on_started = on_started;
        j->spec.userdata = &s;
        struct errmsg e = {{0}};
        int code = -1;
        _exit(runtime_run(&j->spec, &code, &e) < 0 ? 99 : code);
    }
    close(p[1]);
    *ret_init = 0;
    assert_int_equal(read(p[0], ret_init, sizeof(*ret_init)), sizeof(*ret_init));
    close(p[0]);
    char ready[4096];
    snprintf(ready, sizeof(ready), "%s/ready", out_dir);
    assert_true(wait_for_file(ready));
    unlink(ready);
    return capsule;
}

static void exec_into_container(bool pid_ns)
{
    struct job j;
    job_init(&j, "touch /tmp/only-here; touch /out/ready; exec sleep 30");
    j.spec.pid_ns = pid_ns;
    pid_t init;
    pid_t capsule = start_container(&j, &init);

    char *argv[] = {"sh", "-c",
                    "test -e /tmp/only-here && test \"$(cat /etc/kept)\" = top && "
                    "test \"$(pwd)\" = /opq && test $$ -gt 2 && exit 5",
                    NULL};
    char *env[] = {"PATH=/bin", NULL};
    struct errmsg e = {{0}};
    int code = -1;
    struct runtime_exec_spec x = {.argv = argv, .env = env, .cwd = "/opq"};
    int r = runtime_exec(init, &x, &code, &e);
    assert_int_equal(r, 0);
    assert_int_equal(code, 5);
    char *missing[] = {"no-such-command", NULL};
    struct runtime_exec_spec y = {.argv = missing, .env = env};
    assert_int_equal(runtime_exec(init, &y, &code, &e), -ENOENT);
    assert_string_equal(e.text, "exec 'no-such-command': not found in PATH=/bin");
    /* A process of its own joins the container and execs there itself, as a Slurm task does:
     * forking first when the container has a pid namespace of its own. */
    assert_int_equal(join_and_run(init, pid_ns), 5);

    assert_int_equal(kill(capsule, SIGTERM), 0);
    int status;
    assert_int_equal(waitpid(capsule, &status, 0), capsule);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 143);
    struct runtime_exec_spec z = {.argv = argv, .env = env};
    assert_int_equal(runtime_exec(init, &z, &code, &e), -ESRCH);
}

static void test_exec_into_container(void **state)
{
    exec_into_container(true);
    exec_into_container(false);
}

static void test_on_started_failure(void **state)
{
    struct started s = {.fd = -1, .ret = -ECANCELED};
    struct job j;
    job_init(&j, "exec sleep 30");
    j.spec.on_started = on_started;
    j.spec.userdata = &s;
    struct errmsg e = {{0}};
    int code = -1;
    time_t t0 = time(NULL);
    assert_int_equal(runtime_run(&j.spec, &code, &e), -ECANCELED);
    assert_true(time(NULL) - t0 < 10);
}

static void test_probes(void **state)
{
    struct errmsg e = {{0}};
    assert_int_equal(runtime_probe_userns(&e), 0);
    int r = runtime_probe_overlay(scratch_dir, &e);
    if (r < 0)
        fail_msg("probe_overlay: %s", e.text);
    assert_int_equal(r, 0);
}

/* ---- node cache layers through fuse-overlayfs ---- */

#define FUSE_OVERLAYFS "/usr/bin/fuse-overlayfs"

static void fuse_skip_unless_usable(void)
{
    struct errmsg e = {{0}};
    if (runtime_probe_fuse_overlayfs(FUSE_OVERLAYFS, &e) < 0) {
        print_message("fuse-overlayfs unusable: %s\n", e.text);
        test_skip("fuse-overlayfs unusable here");
    }
}

static void fuse_job(struct job *j, const char *script)
{
    job_init(j, script);
    j->layers[0] = nc_base;
    j->layers[1] = nc_top;
    j->spec.fuse_overlayfs = FUSE_OVERLAYFS;
}

/* fuse-overlayfs processes of this test's runs (their mount point is in our temp dir). */
static int count_fuse_processes(void)
{
    DIR *d = opendir("/proc");
    assert_non_null(d);
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        char path[300], buf[8192];
        if (de->d_name[0] < '0' || de->d_name[0] > '9')
            continue;
        snprintf(path, sizeof(path), "/proc/%s/cmdline", de->d_name);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t len = fd < 0 ? -1 : read(fd, buf, sizeof(buf) - 1);
        if (fd >= 0)
            close(fd);
        if (len <= 0)
            continue;
        buf[len] = '\0';
        bool ours = false, paths = false;
        for (char *a = buf; a < buf + len; a += strlen(a) + 1) {
            ours |= strstr(a, tmp) != NULL;
            paths |= strstr(a, nc_base) || strstr(a, nc_top);
        }
        if (!ours || !strstr(buf, "fuse-overlayfs"))
            continue;
        /* Everyone may read a command line: a node cache layer's path, its secret, is not on
         * it. */
        assert_false(paths);
        n++;
    }
    closedir(d);
    return n;
}

static bool wait_no_fuse_processes(void)
{
    for (int i = 0; i < 500; i++) {
        if (count_fuse_processes() == 0)
            return true;
        usleep(10000);
    }
    return false;
}

/* The image's modes and owners as the container user sees them, a copy-up that keeps them, new
 * files under the umask, the top layer's whiteout; the layers on disk untouched. */
static void test_fuse_root_modes(void **state)
{
    fuse_skip_unless_usable();
    struct job j;
    fuse_job(&j, "test \"$(stat -c '%a %u' /etc/shadow)\" = '600 0' && "
                 "test \"$(stat -c '%a %u' /root)\" = '700 0' && "
                 "test \"$(stat -c '%a %u' /etc)\" = '755 0' && "
                 "test \"$(cat /etc/shadow)\" = secret && echo more >> /etc/shadow && "
                 "test \"$(stat -c '%a %u' /etc/shadow)\" = '600 0' && "
                 "test \"$(tail -n 1 /etc/shadow)\" = more && umask 022 && touch /newfile && "
                 "test \"$(stat -c '%a %u' /newfile)\" = '644 0' && test ! -e /etc/gone && "
                 "test \"$(cat /etc/kept)\" = top && test -x /bin/busybox && "
                 "grep ' / / ' /proc/self/mountinfo | grep -q ' - fuse.fuse-overlayfs '");
    j.spec.remap_root = true;
    j.spec.writable = true;
    assert_int_equal(job_run(&j), 0);
    assert_int_equal(count_fuse_processes(), 0);
    /* Without remap_root the files are the caller's inside; the root is read-only, and the
     * changes of the run before are gone (a tmpfs upper). */
    char script[4096];
    snprintf(script, sizeof(script),
             "test \"$(stat -c '%%a %%u' /etc/shadow)\" = '600 %u' && "
             "test \"$(cat /etc/shadow)\" = secret && ! touch /x 2>/dev/null && "
             "! (echo x >> /etc/shadow) 2>/dev/null && test ! -e /newfile && "
             "grep ' / / ' /proc/self/mountinfo | grep -q ' / / ro,.* - fuse.fuse-overlayfs '",
             getuid());
    fuse_job(&j, script);
    assert_int_equal(job_run(&j), 0);
    /* fuse-overlayfs' tmpfs in a directory that the home directory's recursive bind shows:
     * it stays out of the container. */
    char scratch[1024];
    snprintf(scratch, sizeof(scratch), "%s/scratch", home_dir);
    mkdirs("%s", scratch);
    fuse_job(&j,
             "test \"$(cat /etc/shadow)\" = secret && ! grep -q capsule-fuse /proc/self/mountinfo");
    j.spec.scratch_dir = scratch;
    assert_int_equal(job_run(&j), 0);
    assert_int_equal(rmdir(scratch), 0);
    char path[4096];
    struct stat st;
    snprintf(path, sizeof(path), "%s/etc/shadow", nc_base);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0644);
    _cleanup_free_ char *shadow = slurp(path);
    assert_string_equal(shadow, "secret\n");
    assert_int_equal(count_fuse_processes(), 0);
}

/* fuse-overlayfs ends with the container, however it ends. */
static void test_fuse_root_lifetime(void **state)
{
    fuse_skip_unless_usable();
    struct job j;
    fuse_job(&j, "exit 3");
    assert_int_equal(job_run(&j), 3);
    assert_int_equal(count_fuse_processes(), 0);
    fuse_job(&j, "kill -KILL $$");
    assert_int_equal(job_run(&j), 137);
    assert_int_equal(count_fuse_processes(), 0);
    fuse_job(&j, "test $$ = 2 && exit 4");
    j.spec.pid_ns = true;
    assert_int_equal(job_run(&j), 4);
    assert_int_equal(count_fuse_processes(), 0);
    /* A command that cannot start, and a setup that fails after the root is mounted. */
    fuse_job(&j, "");
    j.argv[0] = (char *)"no-such-command";
    j.argv[1] = NULL;
    struct errmsg e = {{0}};
    int code = -1;
    assert_int_equal(runtime_run(&j.spec, &code, &e), -ENOENT);
    assert_int_equal(count_fuse_processes(), 0);
    fuse_job(&j, "true");
    j.mounts[1] = (struct mount_entry){.source = "/no/such/dir", .target = "/x"};
    j.spec.n_mounts = 2;
    assert_int_equal(runtime_run(&j.spec, &code, &e), -ENOENT);
    assert_int_equal(count_fuse_processes(), 0);

    /* capsule itself killed while the container runs: fuse-overlayfs dies with it. */
    char ready[4096];
    snprintf(ready, sizeof(ready), "%s/ready", out_dir);
    unlink(ready);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        fuse_job(&j, "touch /out/ready; exec sleep 30");
        _exit(runtime_run(&j.spec, &code, &e) < 0 ? 99 : code);
    }
    assert_true(wait_for_file(ready));
    assert_int_equal(count_fuse_processes(), 1);
    assert_int_equal(kill(pid, SIGKILL), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(wait_no_fuse_processes());
    unlink(ready);
    /* All it leaves is the empty directory its tmpfs was on (in namespaces now gone). */
    DIR *d = opendir(scratch_dir);
    assert_non_null(d);
    int left = 0;
    for (struct dirent *de; (de = readdir(d));)
        if (strncmp(de->d_name, "capsule-fuse-", 13) == 0) {
            assert_int_equal(unlinkat(dirfd(d), de->d_name, AT_REMOVEDIR), 0);
            left++;
        }
    closedir(d);
    assert_int_equal(left, 1);
}

/* Ctrl-C on the terminal reaches the command, which traps it and goes on reading its root. */
static void test_fuse_root_terminal_interrupt(void **state)
{
    fuse_skip_unless_usable();
    terminal_interrupt(false, false, true);
    terminal_interrupt(true, false, true);
    assert_int_equal(count_fuse_processes(), 0);
}

/* capsule exec into a container on fuse-overlayfs sees what its command sees. */
static void test_fuse_root_exec(void **state)
{
    fuse_skip_unless_usable();
    struct job j;
    fuse_job(&j, "touch /out/ready; exec sleep 30");
    j.spec.pid_ns = true;
    j.spec.remap_root = true;
    pid_t init;
    pid_t capsule = start_container(&j, &init);
    char *argv[] = {"sh", "-c",
                    "test \"$(stat -c '%a %u' /etc/shadow)\" = '600 0' && "
                    "test \"$(cat /etc/shadow)\" = secret && exit 5",
                    NULL};
    char *env[] = {"PATH=/bin", NULL};
    struct errmsg e = {{0}};
    int code = -1;
    struct runtime_exec_spec x = {.argv = argv, .env = env, .remap_root = true};
    assert_int_equal(runtime_exec(init, &x, &code, &e), 0);
    assert_int_equal(code, 5);
    assert_int_equal(kill(capsule, SIGTERM), 0);
    int status;
    assert_int_equal(waitpid(capsule, &status, 0), capsule);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 143);
    assert_int_equal(count_fuse_processes(), 0);
}

/* A named container's upper directory: changes through fuse-overlayfs stay, with their modes. */
static void test_fuse_root_named(void **state)
{
    fuse_skip_unless_usable();
    char upper[1024], work[1024], path[4096];
    snprintf(upper, sizeof(upper), "%s/fnamed/upper", tmp);
    snprintf(work, sizeof(work), "%s/fnamed/work", tmp);
    mkdirs("%s", upper);
    mkdirs("%s", work);
    struct job j;
    fuse_job(&j, "echo kept >> /etc/shadow && touch /persist && rm /etc/kept");
    j.spec.upper_dir = upper;
    j.spec.work_dir = work;
    j.spec.writable = true;
    j.spec.remap_root = true;
    assert_int_equal(job_run(&j), 0);
    snprintf(path, sizeof(path), "%s/persist", upper);
    assert_int_equal(access(path, F_OK), 0);
    fuse_job(&j, "test -e /persist && test ! -e /etc/kept && "
                 "test \"$(stat -c '%a %u' /etc/shadow)\" = '600 0' && "
                 "test \"$(tail -n 1 /etc/shadow)\" = kept && ! touch /x 2>/dev/null");
    j.spec.upper_dir = upper;
    j.spec.work_dir = work;
    j.spec.remap_root = true;
    assert_int_equal(job_run(&j), 0);
    assert_int_equal(count_fuse_processes(), 0);
}

/* What cannot work says so, and why; nothing stays behind. */
static void test_fuse_root_errors(void **state)
{
    fuse_skip_unless_usable();
    struct job j;
    struct errmsg e = {{0}};
    int code = -1;
    fuse_job(&j, "true");
    j.spec.fuse_overlayfs = "/no/such/fuse-overlayfs";
    assert_int_equal(runtime_run(&j.spec, &code, &e), -ENOENT);
    assert_non_null(strstr(e.text, "apt install fuse-overlayfs"));
    assert_int_equal(runtime_probe_fuse_overlayfs("/no/such/fuse-overlayfs", &e), -ENOENT);
    fuse_job(&j, "true");
    j.spec.fuse_overlayfs = "fuse-overlayfs";
    assert_int_equal(runtime_run(&j.spec, &code, &e), -EINVAL);
    /* A layer path fuse-overlayfs would split goes to it as a link of the run's. */
    char odd[1024];
    snprintf(odd, sizeof(odd), "%s/a:b", tmp);
    mkdirs("%s", odd);
    fuse_job(&j, "true");
    j.layers[1] = odd;
    assert_int_equal(runtime_run(&j.spec, &code, &e), 0);
    assert_int_equal(code, 0);
    /* A copy would lose the image's modes. */
    fuse_job(&j, "true");
    j.spec.rootfs_mode = RUNTIME_ROOTFS_COPY;
    assert_int_equal(runtime_run(&j.spec, &code, &e), -EINVAL);
    /* fuse-overlayfs failing: its own words in the message. */
    char bad[1024];
    snprintf(bad, sizeof(bad), "%s/bad-fuse", tmp);
    put_file(bad, "#!/bin/sh\necho 'unknown option frobnicate' >&2\nexit 2\n");
    assert_int_equal(chmod(bad, 0755), 0);
    fuse_job(&j, "true");
    j.spec.fuse_overlayfs = bad;
    assert_int_equal(runtime_run(&j.spec, &code, &e), -EIO);
    assert_non_null(strstr(e.text, "unknown option frobnicate"));
    assert_non_null(strstr(e.text, "exit status 2"));
    assert_int_equal(count_fuse_processes(), 0);
    /* One that never mounts is given up on, and killed. */
    char slow[1024];
    snprintf(slow, sizeof(slow), "%s/slow-fuse-overlayfs", tmp);
    put_file(slow, "#!/bin/sh\necho 'still reading layers' >&2\nwhile :; do sleep 1; done\n");
    assert_int_equal(chmod(slow, 0755), 0);
    fuse_job(&j, "true");
    j.spec.fuse_overlayfs = slow;
    fuse_root_timeout_ms = 300;
    int r = runtime_run(&j.spec, &code, &e);
    fuse_root_timeout_ms = FUSE_ROOT_TIMEOUT_MS;
    assert_int_equal(r, -ETIMEDOUT);
    assert_non_null(strstr(e.text, "still reading layers"));
    assert_true(wait_no_fuse_processes());
}

/* Last: no run before left a mount in our namespace, files in scratch or in /out. */
static void test_nothing_left(void **state)
{
    /* Other programs may mount things meanwhile: look for ours only. */
    _cleanup_free_ char *now = slurp("/proc/self/mountinfo");
    assert_null(strstr(now, tmp));
    assert_null(strstr(now, "/proc/self/fd/"));
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "ls -A %s %s", scratch_dir, out_dir);
    FILE *p = popen(cmd, "re");
    char line[256];
    int entries = 0;
    while (fgets(line, sizeof(line), p))
        if (line[0] != '\n' && !strchr(line, ':'))
            entries++;
    pclose(p);
    assert_int_equal(entries, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exit_status),
        cmocka_unit_test(test_exec_failures),
        cmocka_unit_test(test_env_and_cwd),
        cmocka_unit_test(test_readonly_and_writable),
        cmocka_unit_test(test_whiteout_and_opaque),
        cmocka_unit_test(test_standard_mounts),
        cmocka_unit_test(test_copy_mode),
        cmocka_unit_test(test_locked_flags),
        cmocka_unit_test(test_passwd),
        cmocka_unit_test(test_home),
        cmocka_unit_test(test_spec_mounts_and_links),
        cmocka_unit_test(test_no_writes_through_image_links),
        cmocka_unit_test(test_spec_mount_refusals),
        cmocka_unit_test(test_odd_user_db),
        cmocka_unit_test(test_pid_namespace),
        cmocka_unit_test(test_hostname),
        cmocka_unit_test(test_deep_image),
        cmocka_unit_test(test_max_layers),
        cmocka_unit_test(test_foreign_layers),
        cmocka_unit_test(test_legacy_overlay_view),
        cmocka_unit_test(test_signal_forwarding),
        cmocka_unit_test(test_terminal_interrupt),
        cmocka_unit_test(test_terminal_size_before_start),
        cmocka_unit_test(test_named_upper),
        cmocka_unit_test(test_ldconfig),
        cmocka_unit_test(test_exec_into_container),
        cmocka_unit_test(test_on_started_failure),
        cmocka_unit_test(test_probes),
        cmocka_unit_test(test_fuse_root_modes),
        cmocka_unit_test(test_fuse_root_lifetime),
        cmocka_unit_test(test_fuse_root_terminal_interrupt),
        cmocka_unit_test(test_fuse_root_exec),
        cmocka_unit_test(test_fuse_root_named),
        cmocka_unit_test(test_fuse_root_errors),
        cmocka_unit_test(test_nothing_left),
    };
    const char *why = runtime_unavailable();
    if (why)
        return test_skip_program(why);
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
