/* Tests for the Slurm plugin's folders under runtime_path: a job's removed by its epilog, what
 * a node crash left removed at slurmd's start (and nothing of a job that still runs), and a
 * user's folder that is not theirs refused. Removals never follow a planted link. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "test-fs.h"
#include "test-main.h"

#include "capsule/slurm/sweep.h"
#include "lib/rm-tree.h"

static char root[64];

static void path(char *buf, size_t n, const char *rel)
{
    snprintf(buf, n, "%s/%s", root, rel);
}

static void mkdirs(const char *rel)
{
    char p[256], cmd[300];
    path(p, sizeof(p), rel);
    snprintf(cmd, sizeof(cmd), "mkdir -p '%s'", p);
    assert_int_equal(system(cmd), 0);
}

static int setup(void **state)
{
    snprintf(root, sizeof(root), "/tmp/test-sweep-XXXXXX");
    assert_non_null(mkdtemp(root));
    return 0;
}

static int teardown(void **state)
{
    rm_tree(root);
    return 0;
}

static void test_epilog_removes_the_jobs_folder_only(void **state)
{
    char p[256], outside[256];
    mkdirs("1000/jobs/7/containers/dev/upper");
    mkdirs("1000/jobs/8");
    mkdirs("1000/global/containers/keep");
    mkdirs("elsewhere");
    path(outside, sizeof(outside), "elsewhere/precious");
    write_file(outside, "x");
    /* A link the user planted in the job's folder points elsewhere: never followed. */
    path(p, sizeof(p), "1000/jobs/7/link");
    assert_int_equal(symlink(outside, p), 0);
    struct errmsg e = {""};
    assert_int_equal(sweep_job(root, 1000, 7, &e), 0);
    path(p, sizeof(p), "1000/jobs/7");
    assert_false(exists(p));
    assert_true(exists(outside));
    path(p, sizeof(p), "1000/jobs/8");
    assert_true(exists(p));
    path(p, sizeof(p), "1000/global/containers/keep");
    assert_true(exists(p));
    /* Removed as the folder's owner: files of theirs go, a file of root's they may not touch
     * stays (a root-run removal would have taken it). */
    if (getuid() == 0) {
        char keep[256];
        mkdirs("3000/jobs/5/sub");
        path(p, sizeof(p), "3000");
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "chown -R nobody:nogroup '%s'", p);
        assert_int_equal(system(cmd), 0);
        mkdirs("rootonly");
        path(keep, sizeof(keep), "rootonly");
        assert_int_equal(chmod(keep, 0755), 0);
        path(p, sizeof(p), "3000/jobs/5/sub/link");
        assert_int_equal(symlink(keep, p), 0);
        assert_int_equal(sweep_job(root, 3000, 5, &e), 0);
        path(p, sizeof(p), "3000/jobs/5");
        assert_false(exists(p));
        assert_true(exists(keep));
    }
    /* a job that left nothing */
    assert_int_equal(sweep_job(root, 1000, 99, &e), 0);
    /* The user's "jobs" made a link to another folder with a 7 in it: not followed. */
    mkdirs("2000");
    mkdirs("elsewhere/7");
    path(p, sizeof(p), "2000/jobs");
    char target[256];
    path(target, sizeof(target), "elsewhere");
    assert_int_equal(symlink(target, p), 0);
    assert_true(sweep_job(root, 2000, 7, &e) < 0);
    path(p, sizeof(p), "elsewhere/7");
    assert_true(exists(p));
}

static void test_after_a_crash_only_older_jobs_go(void **state)
{
    char p[256];
    mkdirs("1000/jobs/1/containers/a");
    mkdirs("2000/jobs/2");
    mkdirs("2000/global/containers/kept");
    /* Booted before they were made: a slurmd restart while they run. */
    sweep_before(root, (int64_t)time(NULL) - 3600);
    path(p, sizeof(p), "1000/jobs/1");
    assert_true(exists(p));
    /* Booted after: they are a crash's leftovers. */
    sweep_before(root, (int64_t)time(NULL) + 5);
    assert_false(exists(p));
    path(p, sizeof(p), "2000/jobs/2");
    assert_false(exists(p));
    path(p, sizeof(p), "2000/global/containers/kept");
    assert_true(exists(p));
}

static void test_user_folder(void **state)
{
    char p[256];
    struct errmsg e = {""};
    uid_t me = getuid();
    assert_int_equal(sweep_user_dir(root, me, getgid(), &e), 0);
    snprintf(p, sizeof(p), "%s/%u", root, (unsigned)me);
    struct stat st;
    assert_int_equal(lstat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0700);
    assert_int_equal(sweep_user_dir(root, me, getgid(), &e), 0);
    /* Someone else's, or a link: refused. */
    snprintf(p, sizeof(p), "%s/%u", root, (unsigned)me + 1);
    assert_int_equal(symlink("/tmp", p), 0);
    assert_int_equal(sweep_user_dir(root, me + 1, getgid(), &e), -EPERM);
    assert_non_null(strstr(e.text, "is not a directory of uid"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_epilog_removes_the_jobs_folder_only, setup, teardown),
        cmocka_unit_test_setup_teardown(test_after_a_crash_only_older_jobs_go, setup, teardown),
        cmocka_unit_test_setup_teardown(test_user_folder, setup, teardown),
    };
    return test_run_cases(tests);
}
