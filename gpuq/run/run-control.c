#include "gpuq/run/run-control.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "gpuq/run/run-file.h"
#include "lib/cgroup.h"
#include "lib/fileio.h"
#include "lib/macro.h"
#include "lib/names.h"
#include "lib/process.h"

int run_start(const char *gpuq_run_path, const char *spec_path, pid_t *ret_pid,
              uint64_t *ret_start_time, struct errmsg *e)
{
    /* gpuqd's own environment (NOTIFY_SOCKET, its config's paths) is none of the supervisor's
     * business; the job's comes from the spec. Its stderr is gpuqd's (the journal), so that what
     * it cannot put in the exit record still reaches the admin. */
    static char *const envp[] = {(char *)"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    char *const argv[] = {(char *)gpuq_run_path, (char *)spec_path, NULL};
    struct process_opts o = {
        .in = PROCESS_NULL,
        .out = PROCESS_NULL,
        .err = PROCESS_KEEP,
        .close_others = true,
        .envp = envp,
    };
    pid_t pid;
    int r = process_spawn(gpuq_run_path, argv, &o, &pid);
    if (r < 0)
        return errmsg_set(e, r, "cannot run %s: %s", gpuq_run_path, strerror(-r));
    uint64_t start;
    /* Our unreaped child has a /proc entry even once it has ended. */
    r = run_pid_start_time(pid, &start);
    if (r < 0) {
        (void)kill(pid, SIGKILL);
        (void)waitpid(pid, NULL, 0);
        return errmsg_set(e, r, "%s started as pid %ld, but its start time is unreadable: %s",
                          gpuq_run_path, (long)pid, strerror(-r));
    }
    *ret_pid = pid;
    *ret_start_time = start;
    return 0;
}

int run_pid_stat(pid_t pid, struct run_pid_stat *ret)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/stat", (long)pid);
    if (pid <= 0)
        return -ESRCH;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? -ESRCH : negative_errno();
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = fd_read_all(fd, 64 * 1024, &text, &len);
    if (r < 0)
        return r;
    const char *p = strrchr(text, ')');
    if (!p)
        return -EBADMSG;
    /* After ')': field 3 (state), 4 (ppid), ... 22 (starttime). */
    char state;
    long ppid;
    unsigned long long start;
    int n = sscanf(p + 1,
                   " %c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d "
                   "%llu",
                   &state, &ppid, &start);
    if (n != 3)
        return -EBADMSG;
    *ret = (struct run_pid_stat){state, (pid_t)ppid, start};
    return 0;
}

int run_pid_start_time(pid_t pid, uint64_t *ret)
{
    struct run_pid_stat st;
    int r = run_pid_stat(pid, &st);
    if (r < 0)
        return r;
    *ret = st.start_time;
    return 0;
}

bool run_alive(pid_t pid, uint64_t start_time)
{
    struct run_pid_stat st;
    return run_pid_stat(pid, &st) == 0 && st.start_time == start_time && st.state != 'Z' &&
           st.state != 'X';
}

int run_signal(const char *scope_dir, pid_t pgid, int sig)
{
    if (scope_dir) {
        int r = cgroup_signal(scope_dir, sig);
        return r == -ENOENT ? -ESRCH : r;
    }
    if (pgid < 2)
        return -EINVAL;
    return killpg(pgid, sig) < 0 ? negative_errno() : 0;
}

int run_pgid_read(const char *pid_path, pid_t *ret, struct errmsg *e)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = run_file_read(pid_path, 64, true, &text, &len, e);
    if (r < 0)
        return r;
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || strcmp(end, "\n") != 0 || v < 2 || v > INT32_MAX)
        return errmsg_set(e, -EBADMSG, "%s: not a process group id", pid_path);
    *ret = (pid_t)v;
    return 0;
}

int run_exit_read(const char *exit_path, struct run_exit *ret, struct errmsg *e)
{
    _cleanup_free_ char *text = NULL;
    size_t len = 0;
    int r = run_file_read(exit_path, RUN_EXIT_RECORD_MAX, true, &text, &len, e);
    if (r < 0)
        return r;
    r = run_exit_from_json(text, len, ret, e);
    return r < 0 ? errmsg_prefix(e, r, "%s", exit_path) : 0;
}

int run_scope_path(const char *cgroup_parent, uint64_t job_id, char *buf, size_t size)
{
    int n = snprintf(buf, size, "%s/" NAMES_SCOPE_GPUQ_JOB "%" PRIu64 NAMES_SCOPE_SUFFIX,
                     cgroup_parent, job_id);
    return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}
