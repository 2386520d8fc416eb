/* gpuq-run, the real program (GPUQ_RUN_PATH), run as root for a user of the test's own: what a
 * job and gpuqd rely on. The job runs as its user with his groups, in its scope, its output in a
 * log of his; the exit record says how it ended, also when it was killed or could not start; a
 * signal from gpuqd reaches it; gpuqd's end does not end it; and nothing of it outlives it. */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <pwd.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
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

#include "gpuq/run/run-control.h"
#include "gpuq/run/run-spec.h"
#include "gpuq/run/supervise.h"
#include "lib/cgroup.h"
#include "lib/fileio.h"
#include "lib/macro.h"
#include "lib/strv.h"

/* Set up once in main(), before the cases fork. */
static const char *gpuq_run;
static char user[32], extra_group[40];
static uid_t uid;
static gid_t gid, extra_gid;
static char top[64], home[96], state_dir[96];
static char cgroup_parent[PATH_MAX]; /* "" when there is no cgroup v2 to make scopes in */

struct job {
    struct run_spec s;
    char spec_path[PATH_MAX];
    char scope[PATH_MAX]; /* "" without one */
    pid_t sup;
    uint64_t sup_start;
};

static char *dup_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *dup_printf(const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    assert_true(vasprintf(&s, fmt, ap) >= 0);
    va_end(ap);
    return s;
}

/* A job of the test user running sh -c script; with_scope: in a scope of the test's parent. */
static void job_init(struct job *j, const char *tag, const char *script, bool with_scope)
{
    static unsigned counter;
    *j = (struct job){.sup = -1};
    struct run_spec *s = &j->s;
    s->job_id = (uint64_t)getpid() * 100 + counter++;
    s->run = 1;
    s->uid = uid;
    s->gid = gid;
    s->user = strdup(user);
    s->home = strdup(home);
    s->shell = strdup("/bin/sh");
    s->argv = strv_new();
    assert_int_equal(strv_push(&s->argv, "/bin/sh"), 0);
    assert_int_equal(strv_push(&s->argv, "-c"), 0);
    assert_int_equal(strv_push(&s->argv, script), 0);
    s->env = strv_new();
    assert_int_equal(strv_push(&s->env, "GREETING=hello"), 0);
    s->log_path = dup_printf("%s/%s.log", state_dir, tag);
    s->exit_path = dup_printf("%s/%s.exit", state_dir, tag);
    s->pid_path = dup_printf("%s/%s.pid", state_dir, tag);
    snprintf(j->spec_path, sizeof(j->spec_path), "%s/%s.json", state_dir, tag);
    if (with_scope) {
        s->cgroup_parent = strdup(cgroup_parent);
        assert_int_equal(run_scope_path(cgroup_parent, s->job_id, j->scope, sizeof(j->scope)), 0);
    }
}

static void job_start(struct job *j)
{
    struct errmsg e = {{0}};
    if (run_spec_write(j->spec_path, &j->s, &e) < 0)
        fail_msg("%s", e.text);
    if (run_start(gpuq_run, j->spec_path, &j->sup, &j->sup_start, &e) < 0)
        fail_msg("%s", e.text);
}

/* Waits for the supervisor (our child) and reads the exit record. */
static void job_wait(struct job *j, struct run_exit *x)
{
    int status;
    struct errmsg e = {{0}};
    assert_int_equal(waitpid(j->sup, &status, 0), j->sup);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    if (run_exit_read(j->s.exit_path, x, &e) < 0)
        fail_msg("%s", e.text);
}

/* noinline: gcc 12 at -O3 takes the returned buffer for the address of the local 'text' once
 * this is inlined (a false -Wdangling-pointer). */
__attribute__((noinline)) static char *job_log(const struct job *j)
{
    char *text = NULL;
    size_t len = 0;
    int fd = open(j->s.log_path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(fd_read_all(fd, 1 << 20, &text, &len), 0);
    close(fd);
    return text;
}

static void sleep_ms(unsigned ms)
{
    usleep(ms * 1000);
}

/* Waits (at most 10 s) until the log holds text. */
static void job_wait_log(const struct job *j, const char *text)
{
    for (int i = 0; i < 1000; i++) {
        char *log = job_log(j);
        bool found = strstr(log, text) != NULL;
        free(log);
        if (found)
            return;
        sleep_ms(10);
    }
    fail_msg("'%s' did not appear in %s", text, j->s.log_path);
}

/* The job's process group from the pid file, once there (at most 10 s). */
static pid_t job_pgid(const struct job *j)
{
    struct errmsg e = {{0}};
    pid_t pgid;
    for (int i = 0; i < 1000; i++) {
        if (run_pgid_read(j->s.pid_path, &pgid, &e) == 0)
            return pgid;
        sleep_ms(10);
    }
    fail_msg("no pid file %s", j->s.pid_path);
    return -1;
}

/* The line of /proc/PID/FILE that starts with key, without the key; malloc'd. */
static char *proc_line(pid_t pid, const char *file, const char *key)
{
    char path[64], *text = NULL;
    size_t len = 0;
    snprintf(path, sizeof(path), "/proc/%ld/%s", (long)pid, file);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(fd >= 0);
    assert_int_equal(fd_read_all(fd, 65536, &text, &len), 0);
    close(fd);
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strncmp(line, key, strlen(key)) == 0) {
            char *out = strdup(line + strlen(key));
            free(text);
            return out;
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    fail_msg("no '%s' in %s", key, path);
    return NULL;
}

/* Waits until the job's main process has become `sleep` (the script's exec). */
static void wait_comm(pid_t pid, const char *comm)
{
    char path[64], buf[32];
    snprintf(path, sizeof(path), "/proc/%ld/comm", (long)pid);
    for (int i = 0; i < 1000; i++) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t n = 0;
        if (fd >= 0 && fd_read_up_to(fd, buf, sizeof(buf) - 1, &n) == 0) {
            buf[n] = '\0';
            buf[strcspn(buf, "\n")] = '\0';
        }
        if (fd >= 0)
            close(fd);
        if (fd >= 0 && strcmp(buf, comm) == 0)
            return;
        sleep_ms(10);
    }
    fail_msg("pid %ld did not become %s", (long)pid, comm);
}

static void job_done(struct job *j)
{
    unlink(j->spec_path);
    unlink(j->s.log_path);
    unlink(j->s.exit_path);
    unlink(j->s.pid_path);
    run_spec_done(&j->s);
}

static bool have_scope(void)
{
    return cgroup_parent[0] != '\0';
}

static void test_identity_scope_and_log(void **state)
{
    if (!have_scope())
        test_skip("no cgroup v2 hierarchy to make the job's scope in");
    struct job j;
    job_init(&j, "identity", "echo out $GREETING; echo err >&2; exec sleep 30", true);
    j.s.cpu_milli = 1500;
    j.s.mem_bytes = 256u << 20;
    job_start(&j);
    pid_t pid = job_pgid(&j);
    wait_comm(pid, "sleep");
    /* Its user, group and supplementary groups, every id of each. */
    char want[128];
    char *ids = proc_line(pid, "status", "Uid:\t");
    snprintf(want, sizeof(want), "%lu\t%lu\t%lu\t%lu", (unsigned long)uid, (unsigned long)uid,
             (unsigned long)uid, (unsigned long)uid);
    assert_string_equal(ids, want);
    free(ids);
    ids = proc_line(pid, "status", "Gid:\t");
    snprintf(want, sizeof(want), "%lu\t%lu\t%lu\t%lu", (unsigned long)gid, (unsigned long)gid,
             (unsigned long)gid, (unsigned long)gid);
    assert_string_equal(ids, want);
    free(ids);
    char *groups = proc_line(pid, "status", "Groups:\t");
    bool has_extra = false, has_root = false;
    for (char *g = strtok(groups, " "); g; g = strtok(NULL, " ")) {
        has_extra = has_extra || strtoul(g, NULL, 10) == extra_gid;
        has_root = has_root || strtoul(g, NULL, 10) == 0; /* root's groups are gone */
    }
    assert_true(has_extra);
    assert_false(has_root);
    free(groups);
    /* In its scope, its own process group, its own session's. */
    char *cg = proc_line(pid, "cgroup", "0::");
    char *slash = strrchr(j.scope, '/');
    assert_non_null(strstr(cg, slash));
    free(cg);
    struct run_pid_stat st;
    assert_int_equal(run_pid_stat(pid, &st), 0);
    assert_int_equal(st.ppid, j.sup);
    assert_int_equal(getpgid(pid), pid);
    assert_int_equal(getsid(pid), j.sup);
    /* Limits where the controllers are enabled; else the log says they are not enforced. */
    char *text = NULL;
    if (cgroup_has_controller(j.scope, "cpu") == 1) {
        assert_int_equal(cgroup_attr_read(j.scope, "cpu.max", &text), 0);
        assert_string_equal(text, "150000 100000");
        free(text);
    }
    if (cgroup_has_controller(j.scope, "memory") == 1) {
        assert_int_equal(cgroup_attr_read(j.scope, "memory.max", &text), 0);
        assert_string_equal(text, "268435456");
        free(text);
    }
    bool enforced =
        cgroup_has_controller(j.scope, "cpu") == 1 && cgroup_has_controller(j.scope, "memory") == 1;
    job_wait_log(&j, "err");
    /* gpuqd's SIGKILL through the scope. */
    assert_int_equal(run_signal(j.scope, pid, SIGKILL), 0);
    struct run_exit x;
    job_wait(&j, &x);
    assert_false(x.exited);
    assert_int_equal(x.signal, SIGKILL);
    assert_true(x.started);
    assert_true(x.end >= x.start && x.start > 1e9);
    char *log = job_log(&j);
    assert_non_null(strstr(log, "out hello\n"));
    assert_non_null(strstr(log, "err\n"));
    if (!enforced) {
        assert_int_equal(strncmp(log, "gpuq-run: limits not enforced: ", 31), 0);
        assert_non_null(strstr(x.note, "limits not enforced: "));
    } else {
        assert_string_equal(x.note, "");
    }
    free(log);
    run_exit_done(&x);
    /* The log is the user's, and no one else's to read. */
    struct stat sb;
    assert_int_equal(stat(j.s.log_path, &sb), 0);
    assert_int_equal(sb.st_uid, uid);
    assert_int_equal(sb.st_gid, gid);
    assert_int_equal(sb.st_mode & 07777, 0600);
    /* The scope went with the job; the pid file stays for gpuqd. */
    assert_int_equal(access(j.scope, F_OK), -1);
    assert_int_equal(access(j.s.pid_path, F_OK), 0);
    job_done(&j);
}

static void test_exit_code(void **state)
{
    for (int scoped = 0; scoped <= (int)have_scope(); scoped++) {
        struct job j;
        job_init(&j, scoped ? "code-scope" : "code", "echo $GPUQ_JOB_ID; exit 3", scoped);
        job_start(&j);
        struct run_exit x;
        job_wait(&j, &x);
        assert_true(x.exited);
        assert_int_equal(x.code, 3);
        assert_true(x.started);
        assert_string_equal(x.note, ""); /* no limit asked for: nothing to say */
        char *log = job_log(&j), id[32];
        snprintf(id, sizeof(id), "%llu\n", (unsigned long long)j.s.job_id);
        assert_string_equal(log, id);
        free(log);
        run_exit_done(&x);
        job_done(&j);
    }
}

static void test_sigterm_reaches_trap(void **state)
{
    for (int scoped = 0; scoped <= (int)have_scope(); scoped++) {
        struct job j;
        job_init(&j, scoped ? "term-scope" : "term",
                 "trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.05; done",
                 scoped);
        job_start(&j);
        pid_t pgid = job_pgid(&j);
        job_wait_log(&j, "ready");
        assert_int_equal(run_signal(scoped ? j.scope : NULL, pgid, SIGTERM), 0);
        struct run_exit x;
        job_wait(&j, &x);
        assert_true(x.exited);
        assert_int_equal(x.code, 7);
        char *log = job_log(&j);
        assert_non_null(strstr(log, "got-term\n"));
        free(log);
        run_exit_done(&x);
        /* Ended: nothing left to signal. */
        assert_int_equal(run_signal(scoped ? j.scope : NULL, pgid, SIGTERM), -ESRCH);
        job_done(&j);
    }
}

static void expect_not_started(struct job *j, int code, const char *note)
{
    job_start(j);
    struct run_exit x;
    job_wait(j, &x);
    assert_true(x.exited);
    assert_false(x.started);
    assert_int_equal(x.code, code);
    if (!strstr(x.note, note))
        fail_msg("note '%s' lacks '%s'", x.note, note);
    run_exit_done(&x);
}

static void test_start_failures(void **state)
{
    struct job j;
    char want[256];
    /* A working directory that is not there: said in the record and in the user's log. */
    job_init(&j, "nocwd", "echo never", false);
    j.s.cwd = strdup("/nonexistent-gpuq-dir");
    snprintf(want, sizeof(want),
             "cannot enter the working directory '/nonexistent-gpuq-dir' as uid %lu: No such file "
             "or directory",
             (unsigned long)uid);
    expect_not_started(&j, RUN_EXIT_NOT_FOUND, want);
    char *log = job_log(&j);
    assert_non_null(strstr(log, want));
    assert_null(strstr(log, "never"));
    free(log);
    job_done(&j);
    /* One that root could enter but the user cannot: entered as the user. */
    job_init(&j, "rootcwd", "echo never", false);
    j.s.cwd = strdup(state_dir);
    expect_not_started(&j, RUN_EXIT_CANNOT_EXEC, "Permission denied");
    job_done(&j);
    /* A command that is not there. */
    job_init(&j, "nocmd", "", false);
    free(j.s.argv[0]);
    j.s.argv[0] = strdup("no-such-command-gpuq");
    expect_not_started(&j, RUN_EXIT_NOT_FOUND,
                       "cannot execute 'no-such-command-gpuq': No such file or directory");
    job_done(&j);
    /* A log path that is a symbolic link is not followed, and no job runs without its log. */
    job_init(&j, "loglink", "echo never", false);
    assert_int_equal(symlink("/etc/passwd", j.s.log_path), 0);
    expect_not_started(&j, RUN_EXIT_SETUP, "cannot open the log");
    job_done(&j);
    /* A cgroup parent that is not a cgroup v2 directory. */
    job_init(&j, "nocgroup", "echo never", false);
    j.s.cgroup_parent = strdup(top);
    snprintf(want, sizeof(want), "%s is not on a cgroup v2 hierarchy", top);
    expect_not_started(&j, RUN_EXIT_SETUP, want);
    job_done(&j);
}

/* Whether pid is gone (not even a zombie): reaped by the supervisor. */
static bool gone(pid_t pid)
{
    return kill(pid, 0) < 0 && errno == ESRCH;
}

static void test_background_processes_killed(void **state)
{
    for (int scoped = 0; scoped <= (int)have_scope(); scoped++) {
        struct job j;
        /* One in the job's process group, one that left it (setsid). */
        job_init(&j, scoped ? "bg-scope" : "bg",
                 "sleep 300 & echo a=$!; setsid sleep 301 & echo b=$!; sleep 0.3; exit 0", scoped);
        job_start(&j);
        struct run_exit x;
        job_wait(&j, &x);
        assert_int_equal(x.code, 0);
        char *log = job_log(&j);
        long a = 0, b = 0;
        assert_int_equal(sscanf(strstr(log, "a="), "a=%ld", &a), 1);
        assert_int_equal(sscanf(strstr(log, "b="), "b=%ld", &b), 1);
        assert_true(gone((pid_t)a));
        assert_true(gone((pid_t)b));
        free(log);
        run_exit_done(&x);
        job_done(&j);
    }
}

static void test_survives_its_parent(void **state)
{
    struct job j;
    job_init(&j, "orphan", "sleep 1; echo survived", have_scope());
    struct errmsg e = {{0}};
    assert_int_equal(run_spec_write(j.spec_path, &j.s, &e), 0);
    int p[2];
    assert_int_equal(pipe(p), 0);
    /* gpuqd, which starts the run and is then killed. */
    pid_t daemon = fork();
    assert_true(daemon >= 0);
    if (daemon == 0) {
        pid_t sup;
        uint64_t start;
        if (run_start(gpuq_run, j.spec_path, &sup, &start, &e) < 0)
            _exit(1);
        (void)!write(p[1], &sup, sizeof(sup));
        (void)!write(p[1], &start, sizeof(start));
        pause();
        _exit(0);
    }
    close(p[1]);
    assert_int_equal(read(p[0], &j.sup, sizeof(j.sup)), sizeof(j.sup));
    assert_int_equal(read(p[0], &j.sup_start, sizeof(j.sup_start)), sizeof(j.sup_start));
    close(p[0]);
    job_pgid(&j);
    assert_int_equal(kill(daemon, SIGKILL), 0);
    waitpid(daemon, NULL, 0);
    /* What a stopping gpuqd (or a terminal) might send it: ignored. */
    assert_int_equal(kill(j.sup, SIGTERM), 0);
    assert_int_equal(kill(j.sup, SIGHUP), 0);
    assert_int_equal(kill(j.sup, SIGINT), 0);
    /* gpuqd after its restart: the supervisor is no longer its child; it watches its pid and
     * start time. */
    int i;
    for (i = 0; i < 1500 && run_alive(j.sup, j.sup_start); i++)
        sleep_ms(10);
    assert_false(run_alive(j.sup, j.sup_start));
    struct run_exit x;
    assert_int_equal(run_exit_read(j.s.exit_path, &x, &e), 0);
    assert_true(x.exited);
    assert_int_equal(x.code, 0);
    assert_true(x.end - x.start >= 1.0);
    char *log = job_log(&j);
    assert_string_equal(log, "survived\n");
    free(log);
    run_exit_done(&x);
    job_done(&j);
}

static void test_leftover_scope_killed(void **state)
{
    if (!have_scope())
        test_skip("no cgroup v2 hierarchy to make the job's scope in");
    struct job j;
    job_init(&j, "leftover", "exit 0", true);
    /* A run whose supervisor was killed left a process in the scope. */
    char *dir = NULL, procs[PATH_MAX];
    struct errmsg e = {{0}};
    assert_int_equal(cgroup_make(cgroup_parent, strrchr(j.scope, '/') + 1, &dir, &e), 1);
    snprintf(procs, sizeof(procs), "%s/cgroup.procs", dir);
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t old = fork();
    assert_true(old >= 0);
    if (old == 0) {
        char ok = cgroup_enter(procs) == 0 ? 'y' : 'n';
        (void)!write(p[1], &ok, 1);
        pause();
        _exit(0);
    }
    char ok = 0;
    assert_int_equal(read(p[0], &ok, 1), 1);
    assert_int_equal(ok, 'y');
    close(p[0]);
    close(p[1]);
    job_start(&j);
    struct run_exit x;
    job_wait(&j, &x);
    assert_int_equal(x.code, 0);
    assert_true(x.started);
    assert_non_null(strstr(x.note, "killed the processes an earlier run left in"));
    int status;
    assert_int_equal(waitpid(old, &status, 0), old);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    run_exit_done(&x);
    free(dir);
    job_done(&j);
}

/* Runs a command, which must succeed. */
static int run_cmd(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run_cmd(const char *fmt, ...)
{
    char cmd[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    int r = system(cmd);
    return WIFEXITED(r) ? WEXITSTATUS(r) : 128;
}

/* A cgroup of the test's below the v2 root, with the cpu and memory controllers for the scopes
 * where the host has them; "" when there is no v2 hierarchy. */
static void make_cgroup_parent(void)
{
    const char *root = cgroup_v2_path();
    if (!root)
        return;
    snprintf(cgroup_parent, sizeof(cgroup_parent), "%s/gpuq-test-run-%ld", root, (long)getpid());
    if (mkdir(cgroup_parent, 0755) < 0) {
        cgroup_parent[0] = '\0';
        return;
    }
    static const char *const ctl[] = {"cpu", "memory"};
    for (size_t i = 0; i < ELEMENTSOF(ctl); i++) {
        char plus[16];
        snprintf(plus, sizeof(plus), "+%s", ctl[i]);
        if (cgroup_has_controller(cgroup_parent, ctl[i]) == 1)
            (void)cgroup_attr_write(cgroup_parent, "cgroup.subtree_control", plus);
    }
}

/* The test user: a user group and a supplementary group, a home of his own. */
static int make_user(void)
{
    snprintf(user, sizeof(user), "gpuqrun-%ld", (long)getpid());
    snprintf(extra_group, sizeof(extra_group), "gpuqrun-%ldx", (long)getpid());
    if (run_cmd("groupadd %s", extra_group) != 0)
        return -1;
    if (run_cmd("useradd -M -U -G %s -d %s -s /bin/sh %s", extra_group, home, user) != 0)
        return -1;
    struct passwd *pw = getpwnam(user);
    struct group *gr = getgrnam(extra_group);
    if (!pw || !gr)
        return -1;
    uid = pw->pw_uid;
    gid = pw->pw_gid;
    extra_gid = gr->gr_gid;
    return mkdir(home, 0700) == 0 && chown(home, uid, gid) == 0 ? 0 : -1;
}

static void cleanup(void)
{
    /* What a failed case left running in the test's cgroup goes first. */
    if (cgroup_parent[0] && cgroup_signal(cgroup_parent, SIGKILL) == 0)
        (void)cgroup_wait_empty(cgroup_parent, 5000);
    /* -f: also when a failed case left a process of the user's running elsewhere. */
    if (user[0])
        (void)run_cmd("userdel -f %s 2>/dev/null", user);
    if (extra_group[0])
        (void)run_cmd("groupdel %s 2>/dev/null", extra_group);
    if (top[0])
        (void)run_cmd("rm -rf '%s'", top);
    if (cgroup_parent[0])
        (void)cgroup_remove_tree(cgroup_parent);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_identity_scope_and_log),
        cmocka_unit_test(test_exit_code),
        cmocka_unit_test(test_sigterm_reaches_trap),
        cmocka_unit_test(test_start_failures),
        cmocka_unit_test(test_background_processes_killed),
        cmocka_unit_test(test_survives_its_parent),
        cmocka_unit_test(test_leftover_scope_killed),
    };
    gpuq_run = getenv("GPUQ_RUN_PATH");
    if (!gpuq_run)
        return test_skip_program("GPUQ_RUN_PATH is not set (meson test sets it)");
    if (geteuid() != 0)
        return test_skip_program("gpuq-run runs jobs as root; this test needs root");
    snprintf(top, sizeof(top), "/tmp/gpuq-supervise-XXXXXX");
    if (!mkdtemp(top) || chmod(top, 0755) < 0) {
        top[0] = '\0';
        return 1;
    }
    snprintf(home, sizeof(home), "%s/home", top);
    snprintf(state_dir, sizeof(state_dir), "%s/state", top);
    int r = mkdir(state_dir, 0700) < 0 ? -1 : make_user();
    if (r < 0) {
        fprintf(stderr, "cannot make the test user %s (useradd)\n", user);
        cleanup();
        return 1;
    }
    make_cgroup_parent();
    r = test_run_cases(tests);
    cleanup();
    return r;
}
