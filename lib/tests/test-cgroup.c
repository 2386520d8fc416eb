/* lib/cgroup: a scope below the caller's cgroup, a process moved into it and another joining it,
 * and a scope that cannot go while it holds a process. Needs root (or a delegated cgroup) for
 * the real moves. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "test-skip.h"

#include "lib/cgroup.h"
#include "lib/fileio.h"
#include "lib/macro.h"

static void test_names_are_one_component(void **state)
{
    char *dir = NULL;
    struct errmsg e = {{0}};
    static const char *const bad[] = {"", ".", "..", "a/b", "/x"};
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        assert_int_equal(cgroup_scope_enter(bad[i], getpid(), &dir, &e), -EINVAL);
        assert_null(dir);
    }
}

/* The "0::" line of /proc/PID/cgroup. */
static char *v2_line(pid_t pid)
{
    char path[64], *text = NULL;
    size_t len;
    snprintf(path, sizeof(path), "/proc/%ld/cgroup", (long)pid);
    FILE *f = fopen(path, "re");
    assert_non_null(f);
    assert_int_equal(fd_read_all(fileno(f), 65536, &text, &len), 0);
    fclose(f);
    char *line = strstr(text, "0::/");
    assert_non_null(line);
    char *out = strndup(line, strcspn(line, "\n"));
    free(text);
    return out;
}

static pid_t sleeper(void)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        pause();
        _exit(0);
    }
    return pid;
}

static void end(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void test_scope_enter_join_remove(void **state)
{
    if (geteuid() != 0)
        test_skip("needs root to make a cgroup below its own");
    char name[64], *dir = NULL;
    snprintf(name, sizeof(name), "capsule-gn-test-%ld.scope", (long)getpid());
    pid_t a = sleeper(), b = sleeper();
    struct errmsg e = {{0}};
    int r = cgroup_scope_enter(name, a, &dir, &e);
    if (r == -ENOENT)
        test_skip("no cgroup v2 hierarchy in sight here");
    assert_int_equal(r, 0);
    char *line = v2_line(a);
    assert_non_null(strstr(line, name));
    free(line);
    /* Another process finds the scope through the first one's /proc and joins it. */
    char proc[32], *procs = NULL;
    snprintf(proc, sizeof(proc), "/proc/%ld", (long)a);
    int dirfd = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(cgroup_scope_procs_of(dirfd, &procs), 0);
    pid_t c = fork();
    if (c == 0)
        _exit(cgroup_enter(procs) == 0 ? 0 : 1);
    int status;
    assert_int_equal(waitpid(c, &status, 0), c);
    assert_int_equal(WEXITSTATUS(status), 0);
    /* A second run of the name while the first's processes live: refused, not merged. */
    char *again = NULL;
    assert_int_equal(cgroup_scope_enter(name, b, &again, &e), -EBUSY);
    assert_non_null(strstr(e.text, "still holds processes"));
    /* Not removable while it holds processes. */
    assert_int_equal(cgroup_scope_remove(dir), -EBUSY);
    end(a);
    assert_int_equal(cgroup_scope_remove(dir), 0);
    assert_int_equal(access(dir, F_OK), -1);
    assert_int_equal(cgroup_scope_remove(dir), 0); /* gone: fine */
    /* The process is gone: nothing to find through its /proc. */
    assert_int_equal(cgroup_scope_procs_of(dirfd, &again), -ESRCH);
    close(dirfd);
    /* A process in no capsule scope has none to join. */
    snprintf(proc, sizeof(proc), "/proc/%ld", (long)b);
    dirfd = open(proc, O_PATH | O_DIRECTORY | O_CLOEXEC);
    assert_int_equal(cgroup_scope_procs_of(dirfd, &again), -ENOENT);
    close(dirfd);
    end(b);
    free(procs);
    free(dir);
}

/* A child that moves itself into the cgroup of procs and waits there to be signalled. */
static pid_t sleeper_in(const char *procs)
{
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        char ok = cgroup_enter(procs) == 0 ? 'y' : 'n';
        (void)!write(p[1], &ok, 1);
        pause();
        _exit(0);
    }
    char ok = 0;
    close(p[1]);
    assert_int_equal(read(p[0], &ok, 1), 1);
    close(p[0]);
    assert_int_equal(ok, 'y');
    return pid;
}

/* A parent cgroup of the test's own below the v2 root, as gpuqd has its slice. */
static char *test_parent(void)
{
    const char *root = cgroup_v2_path();
    if (!root)
        return NULL;
    char *parent = NULL;
    assert_true(asprintf(&parent, "%s/gn-test-cgroup-%ld", root, (long)getpid()) > 0);
    if (mkdir(parent, 0755) < 0) {
        free(parent);
        return NULL;
    }
    return parent;
}

static void test_make_signal_wait_remove(void **state)
{
    if (geteuid() != 0)
        test_skip("needs root to make cgroups");
    char *parent = test_parent();
    if (!parent)
        test_skip("no cgroup v2 hierarchy to make cgroups in here");
    struct errmsg e = {{0}};
    char *dir = NULL, *again = NULL, *nested = NULL, *text = NULL;
    /* Only on a cgroup v2 file system, and only one path component. */
    assert_int_equal(cgroup_make("/tmp", "x.scope", &dir, &e), -EMEDIUMTYPE);
    assert_non_null(strstr(e.text, "/tmp is not on a cgroup v2 hierarchy"));
    assert_int_equal(cgroup_make(parent, "a/b", &dir, &e), -EINVAL);
    assert_null(dir);
    /* Made once, found the second time. */
    assert_int_equal(cgroup_make(parent, "job.scope", &dir, &e), 1);
    assert_int_equal(cgroup_make(parent, "job.scope", &again, &e), 0);
    assert_string_equal(dir, again);
    assert_int_equal(cgroup_populated(dir), 0);
    assert_int_equal(cgroup_signal(dir, SIGTERM), -ESRCH);
    assert_int_equal(cgroup_attr_read(dir, "cgroup.type", &text), 0);
    assert_string_equal(text, "domain");
    free(text);
    /* A process in the cgroup and one in a cgroup below it: both reached by one signal, as a
     * job's processes are wherever they are in its scope. */
    assert_int_equal(cgroup_make(dir, "inner", &nested, &e), 1);
    char procs[PATH_MAX];
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
    pid_t a = sleeper_in(procs);
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", nested);
    pid_t b = sleeper_in(procs);
    assert_int_equal(cgroup_populated(dir), 1);
    assert_int_equal(cgroup_remove_tree(dir), -EBUSY);
    assert_int_equal(cgroup_signal(dir, SIGTERM), 0);
    int status;
    assert_int_equal(waitpid(a, &status, 0), a);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    assert_int_equal(waitpid(b, &status, 0), b);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    assert_int_equal(cgroup_wait_empty(dir, 5000), 0);
    assert_int_equal(cgroup_populated(dir), 0);
    /* SIGKILL, through cgroup.kill where there is one. */
    a = sleeper_in(procs);
    assert_int_equal(cgroup_signal(dir, SIGKILL), 0);
    assert_int_equal(waitpid(a, &status, 0), a);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    assert_int_equal(cgroup_wait_empty(dir, 5000), 0);
    /* Whole tree removed, the deepest first; gone is fine. */
    assert_int_equal(cgroup_remove_tree(dir), 0);
    assert_int_equal(access(dir, F_OK), -1);
    assert_int_equal(cgroup_remove_tree(dir), 0);
    assert_int_equal(cgroup_populated(dir), -ENOENT);
    assert_int_equal(cgroup_signal(dir, SIGTERM), -ENOENT);
    assert_int_equal(cgroup_wait_empty(dir, 10), 0);
    assert_int_equal(rmdir(parent), 0);
    free(nested);
    free(again);
    free(dir);
    free(parent);
}

static void test_controllers_and_attributes(void **state)
{
    if (geteuid() != 0)
        test_skip("needs root to make cgroups");
    char *parent = test_parent();
    if (!parent)
        test_skip("no cgroup v2 hierarchy to make cgroups in here");
    struct errmsg e = {{0}};
    char *dir = NULL, *text = NULL;
    assert_int_equal(cgroup_make(parent, "limits.scope", &dir, &e), 1);
    /* Only what the parent enables reaches the child: none yet. */
    assert_int_equal(cgroup_has_controller(dir, "memory"), 0);
    assert_int_equal(cgroup_attr_write(dir, "memory.max", "1048576"), -ENOENT);
    if (cgroup_has_controller(parent, "memory") == 1 &&
        cgroup_attr_write(parent, "cgroup.subtree_control", "+memory") == 0) {
        assert_int_equal(cgroup_has_controller(dir, "memory"), 1);
        assert_int_equal(cgroup_attr_write(dir, "memory.max", "1048576"), 0);
        assert_int_equal(cgroup_attr_read(dir, "memory.max", &text), 0);
        assert_string_equal(text, "1048576");
        free(text);
        assert_int_equal(cgroup_attr_write(dir, "memory.max", "lots"), -EINVAL);
    }
    assert_int_equal(cgroup_has_controller(dir, "memor"), 0);
    assert_int_equal(cgroup_remove_tree(dir), 0);
    assert_int_equal(cgroup_has_controller(dir, "memory"), -ENOENT);
    assert_int_equal(rmdir(parent), 0);
    free(dir);
    free(parent);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_are_one_component),
        cmocka_unit_test(test_scope_enter_join_remove),
        cmocka_unit_test(test_make_signal_wait_remove),
        cmocka_unit_test(test_controllers_and_attributes),
    };
    return test_run_cases(tests);
}
