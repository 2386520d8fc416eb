/* lib/cgroup: a scope below the caller's cgroup, a process moved into it and another joining it,
 * and a scope that cannot go while it holds a process. Needs root (or a delegated cgroup) for
 * the real moves. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_are_one_component),
        cmocka_unit_test(test_scope_enter_join_remove),
    };
    return test_run_cases(tests);
}
