/* Hook scripts: which files run, in what order, with what arguments and environment, that they
 * run at the same time, that a hung hook (and its children) is killed at the budget, and that
 * children inherit no fd of the daemon but stdin, stdout and stderr. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "test-main.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "lib/clock.h"
#include "hooks.h"
#include "lib/macro.h"

struct tmp {
    char dir[64];
    char out[80]; /* where scripts leave their traces */
};

static void write_file(const char *dir, const char *name, mode_t mode, const char *text)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "we");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    assert_int_equal(chmod(path, mode), 0);
}

static char *read_trace(const struct tmp *t, const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/%s", t->out, name);
    FILE *f = fopen(path, "re");
    if (!f)
        return NULL;
    static char buf[4][512];
    static int slot;
    char *b = buf[slot++ % 4];
    size_t k = fread(b, 1, 511, f);
    b[k] = '\0';
    fclose(f);
    if (k > 0 && b[k - 1] == '\n')
        b[k - 1] = '\0';
    return b;
}

static int setup(void **state)
{
    struct tmp *t = calloc(1, sizeof(*t));
    strcpy(t->dir, "/tmp/test-hooks-XXXXXX");
    assert_non_null(mkdtemp(t->dir));
    snprintf(t->out, sizeof(t->out), "%s.out", t->dir);
    assert_int_equal(mkdir(t->out, 0700), 0);
    *state = t;
    return 0;
}

static int teardown(void **state)
{
    struct tmp *t = *state;
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", t->dir, t->out);
    assert_int_equal(system(cmd), 0);
    free(t);
    return 0;
}

/* A hook that records its argv and the environment it was given. */
static void write_recorder(const struct tmp *t, const char *name)
{
    char text[512];
    snprintf(text, sizeof(text),
             "#!/bin/sh\n"
             "echo \"$(basename \"$0\") $# $1 $COOLD_EVENT $COOLD_REASON $COOLD_DEADLINE_SECONDS "
             "$COOLD_DRILL\" > %s/%s\n",
             t->out, name);
    write_file(t->dir, name, 0755, text);
}

static void test_list_order_and_skip_rules(void **state)
{
    struct tmp *t = *state;
    const char *runnable[] = {"10-first", "2-second", "Zebra", "a-last"};
    for (size_t i = 0; i < ELEMENTSOF(runnable); i++)
        write_recorder(t, runnable[i]);
    write_recorder(t, ".hidden");
    write_recorder(t, "backup~");
    write_recorder(t, "hook.dpkg-old");
    write_recorder(t, "hook.dpkg-dist");
    write_file(t->dir, "notes", 0644, "#!/bin/sh\ntouch should-not-run\n");
    char sub[128], link[128];
    snprintf(sub, sizeof(sub), "%s/subdir", t->dir);
    assert_int_equal(mkdir(sub, 0755), 0);
    /* A symlink to an executable is a hook (run-parts does the same). */
    snprintf(link, sizeof(link), "%s/5-link", t->dir);
    assert_int_equal(symlink("2-second", link), 0);

    char **names;
    size_t n;
    struct errmsg e = {{0}};
    assert_int_equal(hooks_list(t->dir, &names, &n, &e), 0);
    /* Byte order, as with LC_ALL=C: "10" < "2" < "5" < "Z" < "a". */
    const char *expect[] = {"10-first", "2-second", "5-link", "Zebra", "a-last"};
    assert_int_equal(n, ELEMENTSOF(expect));
    for (size_t i = 0; i < n; i++)
        assert_string_equal(names[i], expect[i]);
    hooks_names_free(names, n);

    assert_true(hooks_name_ignored(".x"));
    assert_true(hooks_name_ignored("x~"));
    assert_true(hooks_name_ignored("x.dpkg-new"));
    assert_false(hooks_name_ignored("50-stop-jobs"));
}

static void test_run_passes_event_and_env(void **state)
{
    struct tmp *t = *state;
    write_recorder(t, "10-a");
    write_recorder(t, "20-b");
    write_recorder(t, ".skipped");
    write_file(t->dir, "30-plain", 0644, "#!/bin/sh\necho ran > ran-plain\n");
    /* A stale COOLD_* variable of the daemon's own environment must not leak through. */
    setenv("COOLD_EVENT", "stale", 1);
    uint64_t now = clock_now_usec();
    struct hooks_event ev = {.event = "precritical",
                             .reason = "pump_stopped",
                             .power_cut_us = now + 27500000u,
                             .drill = false};
    struct hooks_exec_opts o = {.deadline_us = now + 5000000u, .kill_at_deadline = true};
    struct hooks_summary sum;
    struct errmsg e = {{0}};
    assert_int_equal(hooks_run(t->dir, &ev, &o, &sum, &e), 0);
    unsetenv("COOLD_EVENT");
    assert_int_equal(sum.total, 2);
    assert_int_equal(sum.ok, 2);
    assert_string_equal(read_trace(t, "10-a"), "10-a 1 precritical precritical pump_stopped 27 0");
    assert_string_equal(read_trace(t, "20-b"), "20-b 1 precritical precritical pump_stopped 27 0");
    assert_null(read_trace(t, ".skipped"));

    ev.event = "drill";
    ev.drill = true;
    ev.power_cut_us = 0; /* already past: the countdown stops at 0 */
    o.deadline_us = clock_now_usec() + 5000000u;
    assert_int_equal(hooks_run(t->dir, &ev, &o, &sum, &e), 0);
    assert_string_equal(read_trace(t, "10-a"), "10-a 1 drill drill pump_stopped 0 1");
}

struct lines {
    char text[16][128];
    size_t n;
};

static void collect_line(const char *name, const char *line, void *userdata)
{
    struct lines *l = userdata;
    if (l->n < ELEMENTSOF(l->text))
        snprintf(l->text[l->n++], sizeof(l->text[0]), "%s: %s", name, line);
}

static bool has_line(const struct lines *l, const char *s)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->text[i], s) == 0)
            return true;
    return false;
}

static void test_output_stdin_and_failures(void **state)
{
    struct tmp *t = *state;
    /* stdin is /dev/null, so read hits EOF at once instead of waiting on the daemon's stdin. */
    write_file(t->dir, "10-talk", 0755,
               "#!/bin/sh\necho hello\nread x; echo \"read=$?\"\necho oops >&2\nprintf tail\n");
    write_file(t->dir, "20-fail", 0755, "#!/bin/sh\nexit 3\n");
    write_file(t->dir, "30-noexec", 0755, "not a script, no shebang\n");
    struct hooks_event ev = {.event = "precritical", .reason = "temp_high"};
    struct lines l = {0};
    struct hooks_exec_opts o = {.deadline_us = clock_now_usec() + 5000000u,
                                .kill_at_deadline = true,
                                .line_fn = collect_line,
                                .userdata = &l};
    struct hooks_summary sum;
    assert_int_equal(hooks_run(t->dir, &ev, &o, &sum, NULL), 0);
    assert_true(has_line(&l, "10-talk: hello"));
    assert_true(has_line(&l, "10-talk: read=1"));
    assert_true(has_line(&l, "10-talk: oops"));
    assert_true(has_line(&l, "10-talk: tail"));
    assert_int_equal(sum.total, 3);
    assert_int_equal(sum.ok, 1);
    assert_int_equal(sum.failed, 2);
    assert_non_null(strstr(sum.detail, "20-fail: exit 3"));
    assert_non_null(strstr(sum.detail, "30-noexec: not started"));
}

static void test_hooks_run_concurrently(void **state)
{
    struct tmp *t = *state;
    write_file(t->dir, "a", 0755, "#!/bin/sh\nsleep 1\n");
    write_file(t->dir, "b", 0755, "#!/bin/sh\nsleep 1\n");
    write_file(t->dir, "c", 0755, "#!/bin/sh\nsleep 1\n");
    struct hooks_event ev = {.event = "precritical", .reason = "pump_stopped"};
    uint64_t start = clock_now_usec();
    struct hooks_exec_opts o = {.deadline_us = start + 10000000u, .kill_at_deadline = true};
    struct hooks_summary sum;
    assert_int_equal(hooks_run(t->dir, &ev, &o, &sum, NULL), 0);
    uint64_t took = clock_now_usec() - start;
    assert_int_equal(sum.ok, 3);
    assert_true(took >= 1000000u);
    assert_true(took < 2000000u); /* one after the other would take 3 s */
}

static bool process_gone(pid_t pid)
{
    /* A killed grandchild is a zombie until init reaps it; that counts as gone. */
    for (int i = 0; i < 200; i++) {
        char path[64], stat[256] = "";
        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        FILE *f = fopen(path, "re");
        if (!f)
            return true;
        size_t k = fread(stat, 1, sizeof(stat) - 1, f);
        fclose(f);
        stat[k] = '\0';
        char *p = strrchr(stat, ')');
        if (p && p[1] == ' ' && p[2] == 'Z')
            return true;
        usleep(10000);
    }
    return false;
}

static void test_hung_hook_killed_at_budget(void **state)
{
    struct tmp *t = *state;
    char text[256];
    /* The hook starts a child of its own and hangs; the whole process group must die. */
    snprintf(text, sizeof(text), "#!/bin/sh\nsleep 300 &\necho $! > %s/grandchild\nsleep 300\n",
             t->out);
    write_file(t->dir, "50-hang", 0755, text);
    write_file(t->dir, "10-quick", 0755, "#!/bin/sh\ntrue\n");
    struct hooks_event ev = {.event = "precritical", .reason = "pump_stopped"};
    uint64_t start = clock_now_usec();
    struct hooks_exec_opts o = {.deadline_us = start + 500000u, .kill_at_deadline = true};
    struct hooks_summary sum;
    assert_int_equal(hooks_run(t->dir, &ev, &o, &sum, NULL), 0);
    uint64_t took = clock_now_usec() - start;
    assert_true(took >= 500000u);
    assert_true(took < 1500000u);
    assert_int_equal(sum.ok, 1);
    assert_int_equal(sum.killed, 1);
    assert_non_null(strstr(sum.detail, "50-hang: killed"));
    char *gc = read_trace(t, "grandchild");
    assert_non_null(gc);
    assert_true(process_gone((pid_t)atoi(gc)));
}

static void test_missing_dir_is_fine(void **state)
{
    struct hooks_event ev = {.event = "precritical", .reason = "pump_stopped"};
    struct hooks_exec_opts o = {.deadline_us = clock_now_usec() + 1000000u};
    struct hooks_summary sum;
    assert_int_equal(hooks_run("/nonexistent/hooks.d", &ev, &o, &sum, NULL), 0);
    assert_int_equal(sum.total, 0);

    /* A file where the directory should be is a configuration error worth reporting. */
    struct errmsg e = {{0}};
    char **names;
    size_t n;
    assert_int_equal(hooks_list("/etc/hostname", &names, &n, &e), -ENOTDIR);
    assert_non_null(strstr(e.text, "/etc/hostname"));
}

static void test_exec_cancel_and_leave_running(void **state)
{
    char *const argv[] = {"sh", "-c", "sleep 30", NULL};
    struct hooks_job job = {.name = "cmd", .path = "/bin/sh", .argv = argv};
    struct hooks_outcome out;

    /* A set cancel flag ends the wait at once, like a deadline. */
    atomic_bool cancel = true;
    uint64_t start = clock_now_usec();
    struct hooks_exec_opts o = {.kill_at_deadline = true, .cancel = &cancel};
    assert_int_equal(hooks_exec(&job, 1, &o, &out, NULL), 0);
    assert_true(clock_now_usec() - start < 1000000u);
    assert_true(out.killed);

    /* Without kill_at_deadline the child is left alone: the shutdown command must never be
     * killed by us. */
    o = (struct hooks_exec_opts){.deadline_us = clock_now_usec() + 200000u, .inherit_output = true};
    assert_int_equal(hooks_exec(&job, 1, &o, &out, NULL), 0);
    assert_true(out.running);
    assert_false(out.killed);
    assert_true(out.pid > 0);
    int status;
    assert_int_equal(waitpid(out.pid, &status, WNOHANG), 0); /* still running */
    assert_int_equal(killpg(out.pid, SIGKILL), 0);           /* sh and its sleep */
    assert_int_equal(waitpid(out.pid, &status, 0), out.pid);
}

/* The lines collected, joined with spaces and without the "name: " prefixes. */
static void join_lines(const struct lines *l, char *buf, size_t size)
{
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < l->n && used < size; i++) {
        const char *colon = strstr(l->text[i], ": ");
        int k = snprintf(buf + used, size - used, "%s%s", i ? " " : "", colon ? colon + 2 : "");
        used += k > 0 ? (size_t)k : 0;
    }
}

static void test_children_get_only_stdio(void **state)
{
    struct tmp *t = *state;
    /* Deliberately without close-on-exec, as libcurl creates its sockets: another thread may be
     * in the middle of a Docker API call when a hook or the shutdown command starts. */
    int leak[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, leak), 0);
    assert_int_equal(fcntl(leak[0], F_GETFD) & FD_CLOEXEC, 0);
    char got[128];

    /* A program with its output captured. "3" is the directory ls itself opens. */
    char *const ls_argv[] = {"ls", "/proc/self/fd", NULL};
    struct hooks_job job = {.name = "ls", .path = "/bin/ls", .argv = ls_argv};
    struct lines l = {0};
    struct hooks_exec_opts o = {.deadline_us = clock_now_usec() + 5000000u,
                                .kill_at_deadline = true,
                                .line_fn = collect_line,
                                .userdata = &l};
    struct hooks_outcome out;
    assert_int_equal(hooks_exec(&job, 1, &o, &out, NULL), 0);
    assert_true(out.exited && WIFEXITED(out.status) && WEXITSTATUS(out.status) == 0);
    join_lines(&l, got, sizeof(got));
    assert_string_equal(got, "0 1 2 3");

    /* The shutdown command's way: output goes to the daemon's own stdout and stderr. */
    char trace[128];
    snprintf(trace, sizeof(trace), "%s/fds", t->out);
    char *const sh_argv[] = {"sh", "-c", "exec ls /proc/self/fd > \"$0\"", trace, NULL};
    job = (struct hooks_job){.name = "cmd", .path = "/bin/sh", .argv = sh_argv};
    o = (struct hooks_exec_opts){.deadline_us = clock_now_usec() + 5000000u,
                                 .kill_at_deadline = true,
                                 .inherit_output = true};
    assert_int_equal(hooks_exec(&job, 1, &o, &out, NULL), 0);
    assert_true(out.exited && WIFEXITED(out.status) && WEXITSTATUS(out.status) == 0);
    char *fds = read_trace(t, "fds");
    assert_non_null(fds);
    assert_string_equal(fds, "0\n1\n2\n3");

    /* A hook script run by hooks_run(). */
    write_file(t->dir, "10-fds", 0755, "#!/bin/sh\nexec ls /proc/self/fd\n");
    struct hooks_event ev = {.event = "precritical", .reason = "pump_stopped"};
    l = (struct lines){0};
    o = (struct hooks_exec_opts){.deadline_us = clock_now_usec() + 5000000u,
                                 .kill_at_deadline = true,
                                 .line_fn = collect_line,
                                 .userdata = &l};
    struct hooks_summary sum;
    assert_int_equal(hooks_run(t->dir, &ev, &o, &sum, NULL), 0);
    assert_int_equal(sum.ok, 1);
    join_lines(&l, got, sizeof(got));
    assert_string_equal(got, "0 1 2 3");
    close(leak[0]);
    close(leak[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_list_order_and_skip_rules, setup, teardown),
        cmocka_unit_test_setup_teardown(test_run_passes_event_and_env, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_stdin_and_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hooks_run_concurrently, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hung_hook_killed_at_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_dir_is_fine, setup, teardown),
        cmocka_unit_test(test_exec_cancel_and_leave_running),
        cmocka_unit_test_setup_teardown(test_children_get_only_stdio, setup, teardown),
    };
    return test_run_cases(tests);
}
