#include "capsule/slurm/sweep.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/slurm/hold-args.h"
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

int sweep_job(const char *runtime_path, uid_t uid, uint32_t job_id, struct errmsg *e)
{
    _cleanup_free_ char *dir = hold_job_dir(runtime_path, uid, job_id);
    if (!dir)
        return errmsg_set(e, -ENOMEM, "out of memory");
    /* runtime_path is root's; below it the user's folder is theirs, so "jobs" could be a link
     * to anywhere: each step is opened without following one. */
    char uid_s[16], job_s[16];
    snprintf(uid_s, sizeof(uid_s), "%u", (unsigned)uid);
    snprintf(job_s, sizeof(job_s), "%u", job_id);
    _cleanup_close_ int top = open(runtime_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    _cleanup_close_ int user =
        top < 0 ? -1 : openat(top, uid_s, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    _cleanup_close_ int jobs =
        user < 0 ? -1 : openat(user, "jobs", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (jobs < 0)
        return errno == ENOENT ? 0 : errmsg_set(e, negative_errno(), "couldn't open %s: %m", dir);
    int r = rm_tree_at(jobs, job_s, NULL);
    return r < 0 ? errmsg_set(e, r, "couldn't remove %s: %s", dir, strerror(-r)) : 0;
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

/* The job folders of one user's jobs/ directory. */
static void sweep_jobs(int jobs_fd, const char *where, int64_t boot)
{
    _cleanup_(closedirp) DIR *d = fdopendir(jobs_fd);
    if (!d) {
        close(jobs_fd);
        return;
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        struct stat s;
        if (de->d_name[0] == '.' || fstatat(dirfd(d), de->d_name, &s, AT_SYMLINK_NOFOLLOW) < 0 ||
            s.st_ctime >= boot)
            continue;
        int r = rm_tree_at(dirfd(d), de->d_name, NULL);
        if (r < 0)
            log_error("couldn't remove %s/%s, left by a job before the node restarted: %s", where,
                      de->d_name, strerror(-r));
        else
            log_info("removed %s/%s, left by a job before the node restarted", where, de->d_name);
    }
}

void sweep_before(const char *runtime_path, int64_t boot)
{
    _cleanup_(closedirp) DIR *d = opendir(runtime_path);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char where[4096];
        snprintf(where, sizeof(where), "%s/%s/jobs", runtime_path, de->d_name);
        int fd = openat(dirfd(d), where + strlen(runtime_path) + 1,
                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd >= 0)
            sweep_jobs(fd, where, boot);
    }
}

void sweep_after_boot(const char *runtime_path)
{
    int64_t boot = boot_time();
    if (boot > 0)
        sweep_before(runtime_path, boot);
}
