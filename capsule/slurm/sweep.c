#include "capsule/slurm/sweep.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <grp.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/slurm/hold-args.h"
#include "lib/fileio.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/rm-tree.h"

DEFINE_POINTER_CLEANUP(DIR, closedir)

int sweep_user_dir(const char *runtime_path, uid_t uid, gid_t gid, struct errmsg *e)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%u", runtime_path, (unsigned)uid);
    if (mkdir(path, 0700) == 0) {
        if (chown(path, uid, gid) < 0)
            return errmsg_set(e, negative_errno(), "couldn't chown %s: %m", path);
        return 0;
    }
    if (errno != EEXIST)
        return errmsg_set(e, negative_errno(), "couldn't mkdir %s: %m", path);
    struct stat s;
    if (lstat(path, &s) < 0)
        return errmsg_set(e, negative_errno(), "%s: %m", path);
    if (!S_ISDIR(s.st_mode) || s.st_uid != uid)
        return errmsg_set(e, -EPERM, "%s is not a directory of uid %u; remove it", path,
                          (unsigned)uid);
    return 0;
}

/* Runs fn in a child process with the ids of the owner of dir_fd (a user's folder: everything
 * below it is theirs), so that no removal there runs as root, whatever a user planted.
 * Returns fn's result; its message comes back through a pipe. */
static int as_owner(int dir_fd, int (*fn)(int dir_fd, void *arg, struct errmsg *e), void *arg,
                    struct errmsg *e)
{
    struct stat st;
    int p[2];
    if (fstat(dir_fd, &st) < 0 || pipe2(p, O_CLOEXEC) < 0)
        return errmsg_set(e, negative_errno(), "%m");
    pid_t pid = fork();
    if (pid < 0) {
        close(p[0]);
        close(p[1]);
        return errmsg_set(e, negative_errno(), "fork: %m");
    }
    if (pid == 0) {
        close(p[0]);
        struct errmsg ce = {{0}};
        int r = 0;
        if (st.st_uid != 0 &&
            (setgroups(0, NULL) < 0 || setresgid(st.st_gid, st.st_gid, st.st_gid) < 0 ||
             setresuid(st.st_uid, st.st_uid, st.st_uid) < 0))
            r = errmsg_set(&ce, negative_errno(), "become uid %u: %m", (unsigned)st.st_uid);
        if (r >= 0)
            r = fn(dir_fd, arg, &ce);
        if (r < 0)
            (void)fd_write_all(p[1], ce.text, strlen(ce.text));
        _exit(r < 0 ? 1 : 0);
    }
    close(p[1]);
    char msg[ERRMSG_MAX] = "";
    size_t n = 0;
    (void)fd_read_up_to(p[0], msg, sizeof(msg) - 1, &n);
    msg[n] = '\0';
    close(p[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    return errmsg_set(e, -EIO, "%s", msg[0] ? msg : "the cleanup process failed");
}

static int remove_job(int user_fd, void *arg, struct errmsg *e)
{
    const char *job = arg;
    _cleanup_close_ int jobs =
        openat(user_fd, "jobs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (jobs < 0)
        return errno == ENOENT ? 0 : errmsg_set(e, negative_errno(), "open jobs/: %m");
    int r = rm_tree_at(jobs, job, NULL);
    return r < 0 ? errmsg_set(e, r, "remove jobs/%s: %s", job, strerror(-r)) : 0;
}

/* runtime_path/UID, opened without following a link; -1 with errno when it is not there. */
static int open_user_dir(const char *runtime_path, uid_t uid)
{
    char uid_s[16];
    snprintf(uid_s, sizeof(uid_s), "%u", (unsigned)uid);
    _cleanup_close_ int top = open(runtime_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    return top < 0 ? -1 : openat(top, uid_s, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
}

int sweep_job(const char *runtime_path, uid_t uid, uint32_t job_id, struct errmsg *e)
{
    _cleanup_free_ char *dir = hold_job_dir(runtime_path, uid, job_id);
    if (!dir)
        return errmsg_set(e, -ENOMEM, "out of memory");
    char job_s[16];
    snprintf(job_s, sizeof(job_s), "%u", job_id);
    _cleanup_close_ int user = open_user_dir(runtime_path, uid);
    if (user < 0)
        return errno == ENOENT ? 0 : errmsg_set(e, negative_errno(), "couldn't open %s: %m", dir);
    struct errmsg why = {{0}};
    int r = as_owner(user, remove_job, job_s, &why);
    return r < 0 ? errmsg_set(e, r, "couldn't remove %s: %s", dir, why.text) : 0;
}

static int64_t boot_time(void)
{
    _cleanup_fclose_ FILE *f = fopen("/proc/stat", "re");
    char line[256];
    long long t;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "btime %lld", &t) == 1)
            return t;
    return -1;
}

/* The job folders of one user's jobs/ directory made before boot (run as the user). */
static int sweep_jobs(int user_fd, void *arg, struct errmsg *e)
{
    const int64_t *boot = arg;
    int jobs_fd = openat(user_fd, "jobs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_(closedirp) DIR *d = jobs_fd < 0 ? NULL : fdopendir(jobs_fd);
    if (!d) {
        if (jobs_fd >= 0)
            close(jobs_fd);
        return 0;
    }
    struct dirent *de;
    int result = 0;
    while ((de = readdir(d))) {
        struct stat s;
        if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &s, AT_SYMLINK_NOFOLLOW) < 0 ||
            s.st_ctime >= *boot)
            continue;
        int r = rm_tree_at(dirfd(d), de->d_name, NULL);
        if (r < 0)
            result = errmsg_set(e, r, "jobs/%s: %s", de->d_name, strerror(-r));
    }
    return result;
}

void sweep_before(const char *runtime_path, int64_t boot)
{
    _cleanup_(closedirp) DIR *d = opendir(runtime_path);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        _cleanup_close_ int user =
            openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct errmsg e = {{0}};
        if (user >= 0 && as_owner(user, sweep_jobs, &boot, &e) < 0)
            log_error("couldn't remove what jobs left in %s/%s before the node restarted: %s",
                      runtime_path, de->d_name, e.text);
    }
}

void sweep_after_boot(const char *runtime_path)
{
    int64_t boot = boot_time();
    if (boot > 0)
        sweep_before(runtime_path, boot);
}
