/* Tests for lib/rm-tree: the trees it must remove (read-only directories, unreadable files,
 * symlinks it must not follow, nesting deeper than the fds a process has) and the mount it must
 * not cross. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "test-fs.h"
#include "test-skip.h"

#include "lib/rm-tree.h"

#define NOBODY 65534

struct ctx {
    char base[64];
};

static int setup(void **state)
{
    struct ctx *c = calloc(1, sizeof(*c));
    snprintf(c->base, sizeof(c->base), "/tmp/test-rm-tree.XXXXXX");
    if (!mkdtemp(c->base) || chmod(c->base, 0755) < 0)
        return -1;
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

static void make_hostile_tree(const char *top)
{
    char p[PATH_MAX];
    assert_int_equal(mkdir(top, 0755), 0);
    snprintf(p, sizeof(p), "%s/ro", top);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/ro/secret", top);
    write_file(p, "s");
    assert_int_equal(chmod(p, 0000), 0);
    snprintf(p, sizeof(p), "%s/ro/closed", top);
    assert_int_equal(mkdir(p, 0000), 0);
    snprintf(p, sizeof(p), "%s/ro", top);
    assert_int_equal(chmod(p, 0555), 0);
}

static int remove_as_user(void *arg)
{
    return rm_tree(arg) == 0 ? 0 : 1;
}

static void test_remove_tree_permissions(void **state)
{
    struct ctx *c = *state;
    char top[256], outside[256], p[PATH_MAX];
    snprintf(outside, sizeof(outside), "%s/outside", c->base);
    assert_int_equal(mkdir(outside, 0755), 0);
    snprintf(p, sizeof(p), "%s/keep", outside);
    write_file(p, "k");
    snprintf(top, sizeof(top), "%s/user", c->base);
    assert_int_equal(mkdir(top, 0755), 0);
    snprintf(top, sizeof(top), "%s/user/tree", c->base);
    if (geteuid() == 0) {
        /* Build and remove as an ordinary user: root would not notice the modes. */
        char parent[256];
        snprintf(parent, sizeof(parent), "%s/user", c->base);
        assert_int_equal(chown(parent, NOBODY, NOBODY), 0);
        pid_t pid = fork();
        if (pid == 0) {
            if (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
                setresuid(NOBODY, NOBODY, NOBODY) < 0)
                _exit(99);
            make_hostile_tree(top);
            snprintf(p, sizeof(p), "%s/link", top);
            if (symlink(outside, p) < 0)
                _exit(98);
            _exit(remove_as_user(top));
        }
        assert_int_equal(child_status(pid), 0);
    } else {
        make_hostile_tree(top);
        snprintf(p, sizeof(p), "%s/link", top);
        assert_int_equal(symlink(outside, p), 0);
        assert_int_equal(rm_tree(top), 0);
    }
    assert_false(exists(top));
    snprintf(p, sizeof(p), "%s/keep", outside);
    assert_true(exists(p));            /* the symlink was removed, not followed */
    assert_int_equal(rm_tree(top), 0); /* absent: fine */
}

static void test_remove_tree_deep(void **state)
{
    struct ctx *c = *state;
    char top[PATH_MAX];
    snprintf(top, sizeof(top), "%s/deep", c->base);
    assert_int_equal(mkdir(top, 0755), 0);
    int fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(mkdirat(fd, "d", 0555 | 0200), 0);
        int next = openat(fd, "d", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(next >= 0);
        if (i % 100 == 0)
            assert_int_equal(fchmod(fd, 0555), 0);
        close(fd);
        fd = next;
    }
    close(fd);
    /* Far fewer fds than levels. */
    pid_t pid = fork();
    if (pid == 0) {
        struct rlimit rl = {.rlim_cur = 100, .rlim_max = 100};
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
            _exit(2);
        int r = rm_tree(top);
        if (r < 0)
            fprintf(stderr, "rm_tree: %s\n", strerror(-r));
        _exit(r == 0 ? 0 : 1);
    }
    assert_int_equal(child_status(pid), 0);
    assert_false(exists(top));
}

static int remove_across_mount(const char *top)
{
    char m[PATH_MAX];
    snprintf(m, sizeof(m), "%s/mnt", top);
    if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
        mount("tmpfs", m, "tmpfs", 0, "size=64k") < 0)
        return 2;
    snprintf(m, sizeof(m), "%s/mnt/precious", top);
    write_file(m, "p");
    int r = rm_tree(top);
    return r == -EXDEV && exists(m) ? 0 : 1;
}

static void test_remove_tree_stops_at_mounts(void **state)
{
    struct ctx *c = *state;
    if (geteuid() != 0)
        test_skip("needs root to mount a tmpfs");
    char top[256], m[PATH_MAX];
    snprintf(top, sizeof(top), "%s/mounted", c->base);
    snprintf(m, sizeof(m), "%s/mnt", top);
    assert_int_equal(mkdir(top, 0755), 0);
    assert_int_equal(mkdir(m, 0755), 0);
    pid_t pid = fork();
    if (pid == 0)
        _exit(remove_across_mount(top));
    int status = child_status(pid);
    if (status == 2)
        test_skip("cannot mount a tmpfs in a private mount namespace here");
    assert_int_equal(status, 0);
}

static void test_rm_tree_at_counts_and_takes_files(void **state)
{
    struct ctx *c = *state;
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s/f", c->base);
    write_file(p, "x");
    int dfd = open(c->base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    assert_true(dfd >= 0);
    uint64_t freed = 0;
    /* A plain file, not only a directory; a missing name is fine. */
    assert_int_equal(rm_tree_at(dfd, "f", &freed), 0);
    assert_false(exists(p));
    assert_true(freed > 0); /* its block(s), counted as the last link went */
    assert_int_equal(rm_tree_at(dfd, "f", &freed), 0);
    close(dfd);
    assert_int_equal(rm_tree("/tmp/.."), -EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_remove_tree_permissions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_tree_deep, setup, teardown),
        cmocka_unit_test_setup_teardown(test_remove_tree_stops_at_mounts, setup, teardown),
        cmocka_unit_test_setup_teardown(test_rm_tree_at_counts_and_takes_files, setup, teardown),
    };
    return test_run_cases(tests);
}
