/* Tests for gpumon/procs.c: attribution of GPU processes to users, containers and jobs, from a
 * proc tree built in a temp directory (cgroup v1 and v2 layouts of docker, podman, containerd,
 * capsule, Slurm and gpuq), from hostile input, and from the real /proc. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pwd.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "lib/clock.h"
#include "procs.h"

#define HEX  "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define HEX8 "0123456789ab"

static char root[64];

/* ---- a directory of users the test controls ---- */

/* getpwuid_r() is replaced for the uids TEST_UID0 .. TEST_UID0 + TEST_UIDS - 1: the test names
 * them and counts the lookups, to see what the user cache asks NSS. Other uids go to the real
 * getpwuid_r(). The executable's definition wins over libc's for procs.c, linked into it. */
#define TEST_UID0 3000000000u
#define TEST_UIDS 400

static char test_user[TEST_UIDS][40]; /* "" = no such user */
static unsigned test_lookups[TEST_UIDS];

int getpwuid_r(uid_t uid, struct passwd *pw, char *buf, size_t buflen, struct passwd **result)
{
    if (uid < TEST_UID0 || uid >= TEST_UID0 + TEST_UIDS) {
        typedef int (*real_fn)(uid_t, struct passwd *, char *, size_t, struct passwd **);
        real_fn real;
        void *sym = dlsym(RTLD_NEXT, "getpwuid_r");
        memcpy(&real, &sym, sizeof(real));
        return real(uid, pw, buf, buflen, result);
    }
    const char *name = test_user[uid - TEST_UID0];
    test_lookups[uid - TEST_UID0]++;
    *result = NULL;
    if (!name[0])
        return 0;
    size_t n = strlen(name);
    if (n + 1 > buflen)
        return ERANGE;
    memcpy(buf, name, n + 1);
    *pw = (struct passwd){.pw_name = buf,
                          .pw_passwd = buf + n,
                          .pw_uid = uid,
                          .pw_gid = uid,
                          .pw_gecos = buf + n,
                          .pw_dir = buf + n,
                          .pw_shell = buf + n};
    *result = pw;
    return 0;
}

static int setup(void **state)
{
    snprintf(root, sizeof(root), "/tmp/test-procs-XXXXXX");
    return mkdtemp(root) ? 0 : -1;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    return remove(path);
}

static int teardown(void **state)
{
    return nftw(root, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static void write_file(const char *dir, const char *name, const char *data, size_t len)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, data, len), (ssize_t)len);
    close(fd);
}

/* Creates <root>/<pid> with a status naming uid, a comm, a cgroup file and an environ block (NULL:
 * no such file). */
static void make_proc(pid_t pid, unsigned uid, const char *comm, const char *cgroup,
                      const char *environ_block, size_t environ_len)
{
    char dir[128], status[256];
    snprintf(dir, sizeof(dir), "%s/%d", root, (int)pid);
    assert_true(mkdir(dir, 0700) == 0 || errno == EEXIST);
    int n = snprintf(status, sizeof(status),
                     "Name:\t%s\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t%d\nPid:\t%d\n"
                     "PPid:\t1\nUid:\t%u\t%u\t%u\t%u\nGid:\t0\t0\t0\t0\n",
                     comm, (int)pid, (int)pid, uid, uid + 1, uid + 2, uid + 3);
    write_file(dir, "status", status, (size_t)n);
    write_file(dir, "comm", comm, strlen(comm));
    if (cgroup)
        write_file(dir, "cgroup", cgroup, strlen(cgroup));
    if (environ_block)
        write_file(dir, "environ", environ_block, environ_len);
}

static struct proc_sample describe_ok(pid_t pid)
{
    struct proc_sample p = {.pid = pid, .gi_id = 7, .has_memory = true, .memory = 1234};
    assert_int_equal(procs_describe(root, pid, &p), 0);
    /* NVML's fields are the caller's. */
    assert_int_equal(p.pid, pid);
    assert_int_equal(p.gi_id, 7);
    assert_true(p.has_memory);
    assert_int_equal(p.memory, 1234);
    return p;
}

/* Runs procs_parse_cgroup on a NUL-terminated text into a fresh sample. */
static struct proc_sample parse_cgroup(const char *text, int expect_filled)
{
    struct proc_sample p = {0};
    assert_int_equal(procs_parse_cgroup(text, strlen(text), &p), expect_filled);
    return p;
}

static void test_docker_v2_and_user(void **state)
{
    make_proc(100, 0, "python3\n", "0::/system.slice/docker-" HEX ".scope\n", NULL, 0);
    struct proc_sample p = describe_ok(100);
    assert_int_equal(p.uid, 0); /* the real uid, not the effective one that follows it */
    assert_string_equal(p.user, "root");
    assert_string_equal(p.comm, "python3");
    assert_string_equal(p.container, "docker://" HEX8);
    assert_string_equal(p.job, "");
}

static void test_runtimes(void **state)
{
    /* cgroup v1: one line per hierarchy; the container shows in several, the first counts. */
    struct proc_sample p = parse_cgroup("12:pids:/\n"
                                        "11:devices:/docker/" HEX "\n"
                                        "10:memory:/docker/fedcba9876543210" HEX "\n"
                                        "1:name=systemd:/docker/" HEX "\n",
                                        1);
    assert_string_equal(p.container, "docker://" HEX8);
    p = parse_cgroup("0::/user.slice/user-1000.slice/user@1000.service/user.slice/libpod-" HEX
                     ".scope/container\n",
                     1);
    assert_string_equal(p.container, "podman://" HEX8);
    p = parse_cgroup("0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod1.slice/"
                     "cri-containerd-" HEX ".scope\n",
                     1);
    assert_string_equal(p.container, "containerd://" HEX8);
    /* conmon's scope is not the container. */
    parse_cgroup("0::/machine.slice/libpod-conmon-" HEX ".scope\n", 0);
    p = parse_cgroup("0::/capsule.slice/capsule-train_v2.1-a.scope\n", 1);
    assert_string_equal(p.container, "capsule://train_v2.1-a");
    assert_string_equal(p.job, "");
}

static void test_jobs(void **state)
{
    struct proc_sample p = parse_cgroup("0::/gpuq.slice/gpuq-job-42.scope/capsule-sim.scope\n", 2);
    assert_string_equal(p.job, "gpuq://42");
    assert_string_equal(p.container, "capsule://sim");
    p = parse_cgroup("5:cpuset:/\n4:memory:/slurm/uid_1000/job_1234/step_0/task_0\n", 1);
    assert_string_equal(p.job, "slurm://1234");
    p = parse_cgroup("0::/system.slice/slurmstepd.scope/job_99/step_batch/user/task_0\n", 1);
    assert_string_equal(p.job, "slurm://99");
    /* A job_<n> that Slurm did not make is anyone's directory name. */
    parse_cgroup("0::/user.slice/job_5\n", 0);
    parse_cgroup("0::/slurm/uid_x/job_1\n", 0);
    parse_cgroup("0::/slurm/uid_1/job_12a\n", 0);
    parse_cgroup("0::/system.slice/slurmstepd.scope/job_\n", 0);
    /* Fields already known are kept. */
    p = (struct proc_sample){.job = "gpuq://7"};
    const char *t = "0::/slurm/uid_1/job_3/capsule-c.scope";
    assert_int_equal(procs_parse_cgroup(t, strlen(t), &p), 1);
    assert_string_equal(p.job, "gpuq://7");
    assert_string_equal(p.container, "capsule://c");
}

static void test_environ_fallback(void **state)
{
    static const char env[] = "PATH=/bin\0SLURM_JOB_ID=77\0CAPSULE_NAME=demo\0GPUQ_JOB_ID=j-12\0";
    make_proc(200, 0, "train\n", "0::/user.slice/user-0.slice/session-3.scope\n", env,
              sizeof(env) - 1);
    struct proc_sample p = describe_ok(200);
    assert_string_equal(p.container, "capsule://demo");
    assert_string_equal(p.job, "gpuq://j-12"); /* gpuq's id over the Slurm job it runs in */

    static const char slurm_only[] = "SLURM_JOB_ID=77\0HOME=/root\0";
    make_proc(201, 0, "train\n", "0::/\n", slurm_only, sizeof(slurm_only) - 1);
    p = describe_ok(201);
    assert_string_equal(p.container, "");
    assert_string_equal(p.job, "slurm://77");

    /* The environment is a hint the process controls: once the kernel's cgroup names a container,
     * the environment is not consulted at all. */
    make_proc(202, 0, "train\n", "0::/system.slice/docker-" HEX ".scope\n", env, sizeof(env) - 1);
    p = describe_ok(202);
    assert_string_equal(p.container, "docker://" HEX8);
    assert_string_equal(p.job, "");

    /* No environ file (or one we may not read): no labels, no failure. */
    make_proc(203, 0, "train\n", "0::/\n", NULL, 0);
    p = describe_ok(203);
    assert_string_equal(p.container, "");
    assert_string_equal(p.job, "");
}

static void test_environ_hostile(void **state)
{
    struct proc_sample p = {0};
    /* Cut off by the read bound: the entry lacks its NUL and might be a shortened id. */
    static const char cut[] = "HOME=/\0GPUQ_JOB_ID=12345";
    assert_int_equal(procs_parse_environ(cut, sizeof(cut) - 1, &p), 0);
    assert_string_equal(p.job, "");
    /* Values outside the charset or too long are ignored, not cleaned up. */
    static const char bad[] = "CAPSULE_NAME=a\"b\0GPUQ_JOB_ID=x\ny\0SLURM_JOB_ID=12 \0";
    assert_int_equal(procs_parse_environ(bad, sizeof(bad) - 1, &p), 0);
    char long_name[200];
    int n = snprintf(long_name, sizeof(long_name), "CAPSULE_NAME=%064d", 0);
    assert_int_equal(procs_parse_environ(long_name, (size_t)n + 1, &p), 0);
    static const char dots[] = "CAPSULE_NAME=..\0GPUQ_JOB_ID=.\0";
    assert_int_equal(procs_parse_environ(dots, sizeof(dots) - 1, &p), 0);
    /* The first definition counts (as getenv sees it), even when a later one is valid; an
     * invalid gpuq id lets the Slurm id through. */
    static const char twice[] = "GPUQ_JOB_ID=no way\0GPUQ_JOB_ID=ok\0SLURM_JOB_ID=5\0";
    assert_int_equal(procs_parse_environ(twice, sizeof(twice) - 1, &p), 1);
    assert_string_equal(p.job, "slurm://5");
    /* A key is matched whole. */
    p = (struct proc_sample){0};
    static const char prefix[] = "XCAPSULE_NAME=a\0CAPSULE_NAMEX=b\0CAPSULE_NAME\0";
    assert_int_equal(procs_parse_environ(prefix, sizeof(prefix) - 1, &p), 0);
    assert_string_equal(p.container, "");
}

static void test_cgroup_hostile(void **state)
{
    parse_cgroup("0::/system.slice/docker-../../x.scope\n", 0);
    parse_cgroup("0::/docker/../" HEX "\n", 0);
    parse_cgroup("0::/system.slice/docker-" HEX "0.scope\n", 0); /* 65 hex */
    parse_cgroup("0::/system.slice/docker-0123456789ABCDEF0123456789abcdef0123456789abcdef"
                 "0123456789abcdef.scope\n",
                 0); /* upper case */
    parse_cgroup("0::/capsule-a\"b.scope\n", 0);
    parse_cgroup("0::/capsule-a\\nb.scope\n", 0);
    parse_cgroup("0::/capsule-...scope\n", 0); /* name ".." */
    parse_cgroup("0::/capsule-.scope\n", 0);   /* empty name */
    parse_cgroup("0::/gpuq-job-a b.scope\n", 0);
    parse_cgroup("docker-" HEX ".scope\n", 0); /* not a cgroup line */
    char name[128];
    snprintf(name, sizeof(name), "0::/capsule-%063d.scope", 0);
    struct proc_sample p = parse_cgroup(name, 1);
    assert_int_equal(strlen(p.container), strlen("capsule://") + 63);
    snprintf(name, sizeof(name), "0::/capsule-%064d.scope", 0);
    parse_cgroup(name, 0);
    /* Bytes after a NUL still count as text (len is what matters), and a NUL inside a
     * component spoils only that component. */
    static const char nul[] = "0::/docker-\0" HEX ".scope\n0::/capsule-ok.scope";
    p = (struct proc_sample){0};
    assert_int_equal(procs_parse_cgroup(nul, sizeof(nul) - 1, &p), 1);
    assert_string_equal(p.container, "capsule://ok");
}

/* A cgroup file bigger than the bound: a container named beyond it is not seen, one within it
 * is, however long the lines before it. */
static void test_huge_cgroup(void **state)
{
    size_t big = PROCS_CGROUP_MAX + 100;
    char *text = malloc(big + 256);
    assert_non_null(text);
    memcpy(text, "1:cpu:/", 7);
    memset(text + 7, 'a', big - 7);
    strcpy(text + big, "\n0::/system.slice/docker-" HEX ".scope\n");
    make_proc(300, 0, "x\n", text, NULL, 0);
    struct proc_sample p = describe_ok(300);
    assert_string_equal(p.container, "");
    /* The parser itself has no limit; the bound is the reader's. */
    p = parse_cgroup(text, 1);
    assert_string_equal(p.container, "docker://" HEX8);

    memset(text + 7, 'a', PROCS_CGROUP_MAX - 200);
    strcpy(text + PROCS_CGROUP_MAX - 193, "\n0::/capsule-late.scope\n");
    make_proc(301, 0, "x\n", text, NULL, 0);
    p = describe_ok(301);
    assert_string_equal(p.container, "capsule://late");
    free(text);

    size_t env_big = PROCS_ENVIRON_MAX + 10;
    char *env = calloc(1, env_big + 64);
    assert_non_null(env);
    memcpy(env, "PAD=", 4);
    memset(env + 4, 'x', env_big - 5); /* env[env_big - 1] stays NUL */
    size_t n = env_big + (size_t)sprintf(env + env_big, "CAPSULE_NAME=hidden") + 1;
    make_proc(302, 0, "x\n", "0::/\n", env, n);
    p = describe_ok(302);
    assert_string_equal(p.container, "");
    free(env);
}

static void test_comm_and_status_hostile(void **state)
{
    make_proc(400, 0, "a\"b\x01\x7f\xff\\\n", "0::/\n", NULL, 0);
    struct proc_sample p = describe_ok(400);
    assert_string_equal(p.comm, "a\"b???\\"); /* quote and backslash are prom's to escape */

    /* A comm file longer than the kernel's 15 bytes is cut to the field. */
    make_proc(401, 0, "0123456789abcdefghij\n", "0::/\n", NULL, 0);
    p = describe_ok(401);
    assert_string_equal(p.comm, "0123456789abcde");

    /* No usable Uid: line: the owner stays unknown, the rest is still read. */
    char dir[128];
    make_proc(402, 0, "x\n", "0::/capsule-c.scope\n", NULL, 0);
    snprintf(dir, sizeof(dir), "%s/402", root);
    write_file(dir, "status", "Name:\tx\nUid:\t-5\t0\t0\t0\n", 22);
    p = describe_ok(402);
    assert_int_equal(p.uid, (uid_t)-1);
    assert_string_equal(p.user, "");
    assert_string_equal(p.container, "capsule://c");
    write_file(dir, "status", "Uid:\t4294967295\n", 16); /* (uid_t)-1 is no one */
    p = describe_ok(402);
    assert_int_equal(p.uid, (uid_t)-1);
}

static void test_user_without_name(void **state)
{
    unsigned uid = 4242;
    while (getpwuid(uid))
        uid++;
    make_proc(500, uid, "x\n", "0::/\n", NULL, 0);
    struct proc_sample p = describe_ok(500);
    assert_int_equal(p.uid, uid);
    char num[16];
    snprintf(num, sizeof(num), "%u", uid);
    assert_string_equal(p.user, num);
}

/* Two processes of one user: NSS is asked once, not per process (a slow directory would stall
 * every new GPU process otherwise). */
static void test_user_cached(void **state)
{
    unsigned i = 1;
    snprintf(test_user[i], sizeof(test_user[i]), "alice");
    make_proc(600, TEST_UID0 + i, "a\n", "0::/\n", NULL, 0);
    make_proc(601, TEST_UID0 + i, "b\n", "0::/\n", NULL, 0);
    assert_string_equal(describe_ok(600).user, "alice");
    assert_string_equal(describe_ok(601).user, "alice");
    assert_string_equal(describe_ok(600).user, "alice");
    assert_int_equal(test_lookups[i], 1);

    /* A uid without a name is cached too: it is the slow case with a network directory. */
    make_proc(602, TEST_UID0 + 2, "c\n", "0::/\n", NULL, 0);
    make_proc(603, TEST_UID0 + 2, "d\n", "0::/\n", NULL, 0);
    char num[16];
    snprintf(num, sizeof(num), "%u", TEST_UID0 + 2);
    assert_string_equal(describe_ok(602).user, num);
    assert_string_equal(describe_ok(603).user, num);
    assert_int_equal(test_lookups[2], 1);
}

/* A cached name is looked up again once PROCS_USER_CACHE_TTL_S have passed (a renamed account). */
static void test_user_cache_refresh(void **state)
{
    unsigned i = 10;
    char buf[33];
    snprintf(test_user[i], sizeof(test_user[i]), "bob");
    procs_user_name(TEST_UID0 + i, 1000.0, buf, sizeof(buf));
    assert_string_equal(buf, "bob");
    snprintf(test_user[i], sizeof(test_user[i]), "robert");
    procs_user_name(TEST_UID0 + i, 1000.0 + PROCS_USER_CACHE_TTL_S - 1, buf, sizeof(buf));
    assert_string_equal(buf, "bob");
    assert_int_equal(test_lookups[i], 1);
    procs_user_name(TEST_UID0 + i, 1000.0 + PROCS_USER_CACHE_TTL_S + 1, buf, sizeof(buf));
    assert_string_equal(buf, "robert");
    assert_int_equal(test_lookups[i], 2);

    /* A name that does not fit the caller's buffer: the number instead. */
    char small[4];
    procs_user_name(TEST_UID0 + i, 1000.0 + PROCS_USER_CACHE_TTL_S + 2, small, sizeof(small));
    assert_string_equal(small, "300");
    assert_int_equal(test_lookups[i], 2);
}

/* The cache holds PROCS_USER_CACHE_MAX uids: one more pushes out the one that expires first, and
 * the others stay cached. */
static void test_user_cache_bounded(void **state)
{
    _Static_assert(PROCS_USER_CACHE_MAX + 101 < TEST_UIDS, "enough test uids");
    char buf[33];
    /* Later than every entry the other tests left, so those expire first and make room. They
     * come from two clocks: procs_describe() stamps the monotonic clock's now, and the tests above
     * pass fixed times near 1000 s. On a machine that has just booted the monotonic clock is
     * below those fixed times, so "now + a little" is not enough: go far past both. */
    double t0 = clock_now_sec() + 1e6 + 2 * PROCS_USER_CACHE_TTL_S;
    unsigned first = 100, n = PROCS_USER_CACHE_MAX;
    for (unsigned k = 0; k < n; k++) {
        snprintf(test_user[first + k], sizeof(test_user[0]), "user%u", k);
        procs_user_name(TEST_UID0 + first + k, t0 + k * 0.001, buf, sizeof(buf));
        assert_string_equal(buf, test_user[first + k]);
    }
    for (unsigned k = 0; k < n; k++)
        assert_int_equal(test_lookups[first + k], 1);
    /* All n are cached now. */
    double t1 = t0 + 1;
    procs_user_name(TEST_UID0 + first, t1, buf, sizeof(buf));
    assert_int_equal(test_lookups[first], 1);

    /* One more: the entry of `first` expires first and goes. */
    procs_user_name(TEST_UID0 + first + n, t1, buf, sizeof(buf));
    procs_user_name(TEST_UID0 + first + 1, t1, buf, sizeof(buf));
    assert_int_equal(test_lookups[first + 1], 1);
    procs_user_name(TEST_UID0 + first, t1, buf, sizeof(buf));
    assert_int_equal(test_lookups[first], 2);
}

static void assert_unknown(const struct proc_sample *p)
{
    assert_int_equal(p->uid, (uid_t)-1);
    assert_string_equal(p->user, "");
    assert_string_equal(p->comm, "");
    assert_string_equal(p->container, "");
    assert_string_equal(p->job, "");
}

static void test_vanished(void **state)
{
    struct proc_sample p = {.pid = 99999,
                            .uid = 5,
                            .user = "old",
                            .comm = "old",
                            .container = "capsule://old",
                            .job = "gpuq://old"};
    assert_int_equal(procs_describe(root, 99999, &p), -ESRCH);
    assert_unknown(&p);
    assert_int_equal(p.pid, 99999);
    assert_int_equal(procs_describe(root, 0, &p), -ESRCH);
    assert_int_equal(procs_describe(root, -3, &p), -ESRCH);

    /* A real process that exited and was reaped. */
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0)
        _exit(0);
    assert_int_equal(waitpid(child, NULL, 0), child);
    p = (struct proc_sample){.comm = "stale"};
    assert_int_equal(procs_describe(NULL, child, &p), -ESRCH);
    assert_unknown(&p);
}

static void test_real_proc_self(void **state)
{
    char old[16] = "";
    assert_int_equal(prctl(PR_GET_NAME, old), 0);
    assert_int_equal(prctl(PR_SET_NAME, "procs-\"self\""), 0);
    struct proc_sample p = {.pid = getpid()};
    int r = procs_describe("/proc", getpid(), &p);
    prctl(PR_SET_NAME, old);
    assert_int_equal(r, 0);
    assert_string_equal(p.comm, "procs-\"self\"");
    assert_int_equal(p.uid, getuid());
    struct passwd *pw = getpwuid(getuid());
    if (pw)
        assert_string_equal(p.user, pw->pw_name);
    /* Whatever container or job this runs in, labels are either empty or well-formed. */
    assert_true(p.container[0] == '\0' || strstr(p.container, "://"));
    assert_true(p.job[0] == '\0' || strstr(p.job, "://"));
}

static void test_sanitize(void **state)
{
    char s[64];
    strcpy(s, "NVIDIA H200 \"x\" \\ \xc3\xa9 \xf0\x9f\x94\xa5");
    assert_int_equal(procs_sanitize_label(s), 0);
    assert_string_equal(s, "NVIDIA H200 \"x\" \\ \xc3\xa9 \xf0\x9f\x94\xa5");
    strcpy(s, "a\nb\tc\x7f");
    assert_int_equal(procs_sanitize_label(s), 3);
    assert_string_equal(s, "a?b?c?");
    strcpy(s, "cut \xe2\x80");
    assert_int_equal(procs_sanitize_label(s), 2);
    assert_string_equal(s, "cut ??");
    strcpy(s, "\xc0\xaf|\xed\xa0\x80|\xf4\x90\x80\x80|\xff");
    procs_sanitize_label(s);
    assert_string_equal(s, "??|???|????|?");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_docker_v2_and_user),
        cmocka_unit_test(test_runtimes),
        cmocka_unit_test(test_jobs),
        cmocka_unit_test(test_environ_fallback),
        cmocka_unit_test(test_environ_hostile),
        cmocka_unit_test(test_cgroup_hostile),
        cmocka_unit_test(test_huge_cgroup),
        cmocka_unit_test(test_comm_and_status_hostile),
        cmocka_unit_test(test_user_without_name),
        cmocka_unit_test(test_user_cached),
        cmocka_unit_test(test_user_cache_refresh),
        cmocka_unit_test(test_user_cache_bounded),
        cmocka_unit_test(test_vanished),
        cmocka_unit_test(test_real_proc_self),
        cmocka_unit_test(test_sanitize),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
