/* gpuq/run/run-control and run-exit: what gpuqd uses to start, watch and signal a run and to
 * read how it ended. What gpuqd relies on: a pid that was reused is not taken for its supervisor,
 * a zombie is not alive, a signal never reaches a process outside the job, and the exit record
 * says what wait(2) said. */
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
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "test-main.h"

#include "test-fs.h"

#include "gpuq/run/run-control.h"
#include "gpuq/run/run-file.h"
#include "lib/macro.h"

static pid_t sleeper(void)
{
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        /* A process group of its own, as a job has. */
        setpgid(0, 0);
        pause();
        _exit(0);
    }
    setpgid(pid, pid);
    return pid;
}

static void test_pid_stat_and_alive(void **state)
{
    struct run_pid_stat st;
    assert_int_equal(run_pid_stat(getpid(), &st), 0);
    assert_int_equal(st.state, 'R');
    assert_int_equal(st.ppid, getppid());
    pid_t pid = sleeper();
    uint64_t start;
    assert_int_equal(run_pid_start_time(pid, &start), 0);
    assert_true(start > 0);
    assert_true(run_alive(pid, start));
    /* The same pid with another start time is another process. */
    assert_false(run_alive(pid, start + 1));
    kill(pid, SIGKILL);
    /* Ended but not reaped: a zombie, with its start time still readable, but not alive. */
    siginfo_t si;
    assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
    assert_int_equal(run_pid_start_time(pid, &start), 0);
    assert_false(run_alive(pid, start));
    assert_int_equal(run_pid_stat(pid, &st), 0);
    assert_int_equal(st.state, 'Z');
    waitpid(pid, NULL, 0);
    assert_int_equal(run_pid_stat(pid, &st), -ESRCH);
    assert_false(run_alive(pid, start));
    assert_int_equal(run_pid_stat(0, &st), -ESRCH);
    assert_int_equal(run_pid_stat(-5, &st), -ESRCH);
}

static void test_pid_stat_odd_command_name(void **state)
{
    /* A command name may hold ") " and digits: fields are read after the last ')'. */
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        prctl(PR_SET_NAME, "a) 1 2 (b", 0, 0, 0);
        (void)!write(p[1], "", 1);
        pause();
        _exit(0);
    }
    char c;
    assert_int_equal(read(p[0], &c, 1), 1);
    close(p[0]);
    close(p[1]);
    struct run_pid_stat st;
    assert_int_equal(run_pid_stat(pid, &st), 0);
    assert_int_equal(st.ppid, getpid());
    assert_true(st.state == 'S' || st.state == 'R');
    uint64_t start;
    assert_int_equal(run_pid_start_time(pid, &start), 0);
    assert_true(run_alive(pid, start));
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

static void test_signal_process_group(void **state)
{
    /* 0 and 1 would signal our own group and every process: refused. */
    assert_int_equal(run_signal(NULL, 0, SIGTERM), -EINVAL);
    assert_int_equal(run_signal(NULL, 1, SIGTERM), -EINVAL);
    assert_int_equal(run_signal(NULL, -4, SIGTERM), -EINVAL);
    pid_t pid = sleeper();
    assert_int_equal(run_signal(NULL, pid, SIGTERM), 0);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM);
    assert_int_equal(run_signal(NULL, pid, SIGTERM), -ESRCH);
    /* A scope that is gone: nothing to signal. */
    assert_int_equal(run_signal("/sys/fs/cgroup/gpuq-no-such.slice/x.scope", pid, SIGKILL), -ESRCH);
}

static void test_scope_path(void **state)
{
    char buf[64];
    assert_int_equal(run_scope_path("/sys/fs/cgroup/gpuq.slice", UINT64_C(18446744073709551615),
                                    buf, sizeof(buf)),
                     0);
    assert_string_equal(buf, "/sys/fs/cgroup/gpuq.slice/gpuq-job-18446744073709551615.scope");
    assert_int_equal(run_scope_path("/sys/fs/cgroup/gpuq.slice", 7, buf, 20), -ENAMETOOLONG);
}

static void test_exit_record(void **state)
{
    struct run_exit x = {.started = true,
                         .start = 1718000000.25,
                         .end = 1718000042.5,
                         .oom_kills = 2,
                         .note = "limits not enforced: \"cpu\""};
    run_exit_set_status(&x, W_EXITCODE(3, 0));
    assert_true(x.exited);
    assert_int_equal(x.code, 3);
    assert_int_equal(x.signal, 0);
    char *text = NULL;
    assert_int_equal(run_exit_to_json(&x, &text), 0);
    struct run_exit back = {0};
    struct errmsg e = {{0}};
    assert_int_equal(run_exit_from_json(text, strlen(text), &back, &e), 0);
    assert_int_equal(back.status, 3 << 8);
    assert_true(back.exited);
    assert_int_equal(back.code, 3);
    assert_true(back.started);
    assert_true(back.start == 1718000000.25 && back.end == 1718000042.5);
    assert_int_equal(back.oom_kills, 2);
    assert_string_equal(back.note, x.note);
    run_exit_done(&back);
    free(text);
    /* A signal's status: the derived fields come from status, not from what the file says. */
    static const char killed[] = "{\"status\": 9, \"exited\": true, \"code\": 0, \"signal\": 1, "
                                 "\"start\": 1, \"end\": 2, \"future\": [1]}";
    assert_int_equal(run_exit_from_json(killed, strlen(killed), &back, &e), 0);
    assert_false(back.exited);
    assert_int_equal(back.signal, SIGKILL);
    assert_true(back.started); /* left out: started */
    assert_string_equal(back.note, "");
    run_exit_done(&back);
    static const struct {
        const char *text, *message;
    } bad[] = {
        {"{\"start\": 1, \"end\": 2}", "\"status\": not a wait status"},
        {"{\"status\": 70000, \"start\": 1, \"end\": 2}", "\"status\": not a wait status"},
        {"{\"status\": 0, \"end\": 2}", "\"start\" and \"end\" must be numbers"},
        {"{\"status\": 0, \"start\": 1, \"end\": 2, \"note\": 3}", "\"note\": not a string"},
        {"{\"status\": 0, \"start\": 1, \"end\": 2, \"oom_kills\": -1}", "\"oom_kills\": not"},
        {"[0]", "not a JSON object"},
        {"", "exit record: line"},
    };
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        assert_int_equal(run_exit_from_json(bad[i].text, strlen(bad[i].text), &back, &e), -EINVAL);
        assert_non_null(strstr(e.text, bad[i].message));
    }
}

static void test_read_files(void **state)
{
    char dir[] = "/tmp/gpuq-run-control-XXXXXX", path[80];
    assert_non_null(mkdtemp(dir));
    struct errmsg e = {{0}};
    struct run_exit x;
    pid_t pgid;
    snprintf(path, sizeof(path), "%s/run.exit", dir);
    assert_int_equal(run_exit_read(path, &x, &e), -ENOENT);
    static const char rec[] = "{\"status\": 256, \"start\": 1, \"end\": 2}";
    assert_int_equal(run_file_write_atomic(path, rec, strlen(rec), 0600, &e), 0);
    assert_int_equal(run_exit_read(path, &x, &e), 0);
    assert_int_equal(x.code, 1);
    run_exit_done(&x);
    /* A record others could have written decides nothing. */
    assert_int_equal(chmod(path, 0666), 0);
    assert_int_equal(run_exit_read(path, &x, &e), -EPERM);
    write_file(path, "{\"status\": 0}");
    assert_int_equal(chmod(path, 0600), 0);
    assert_int_equal(run_exit_read(path, &x, &e), -EINVAL);
    assert_non_null(strstr(e.text, path));
    snprintf(path, sizeof(path), "%s/run.pid", dir);
    assert_int_equal(run_pgid_read(path, &pgid, &e), -ENOENT);
    assert_int_equal(run_file_write_atomic(path, "4242\n", 5, 0600, &e), 0);
    assert_int_equal(run_pgid_read(path, &pgid, &e), 0);
    assert_int_equal(pgid, 4242);
    static const char *const bad[] = {"1\n", "0\n", "-5\n", "12", "12\n13\n", "x\n", ""};
    for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
        assert_int_equal(run_file_write_atomic(path, bad[i], strlen(bad[i]), 0600, &e), 0);
        assert_int_equal(run_pgid_read(path, &pgid, &e), -EBADMSG);
    }
    unlink(path);
    snprintf(path, sizeof(path), "%s/run.exit", dir);
    unlink(path);
    assert_int_equal(rmdir(dir), 0); /* no temporary file left behind */
}

static void test_start_missing_program(void **state)
{
    pid_t pid = -1;
    uint64_t start = 0;
    struct errmsg e = {{0}};
    assert_int_equal(run_start("/nonexistent/gpuq-run", "/x.json", &pid, &start, &e), -ENOENT);
    assert_non_null(strstr(e.text, "cannot run /nonexistent/gpuq-run"));
    assert_int_equal(pid, -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pid_stat_and_alive),
        cmocka_unit_test(test_pid_stat_odd_command_name),
        cmocka_unit_test(test_signal_process_group),
        cmocka_unit_test(test_scope_path),
        cmocka_unit_test(test_exit_record),
        cmocka_unit_test(test_read_files),
        cmocka_unit_test(test_start_missing_program),
    };
    return test_run_cases(tests);
}
