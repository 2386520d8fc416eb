#include "lib/process.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <unistd.h>

extern char **environ;

/* Makes the child's descriptor target what want says. */
static int child_fd(posix_spawn_file_actions_t *fa, int want, int target)
{
    if (want == PROCESS_KEEP)
        return 0;
    if (want == PROCESS_NULL)
        return posix_spawn_file_actions_addopen(fa, target, "/dev/null",
                                                target == STDIN_FILENO ? O_RDONLY : O_WRONLY, 0);
    return posix_spawn_file_actions_adddup2(fa, want, target);
}

static int file_actions(posix_spawn_file_actions_t *fa, const struct process_opts *o)
{
    int r = child_fd(fa, o->in, STDIN_FILENO);
    if (r == 0)
        r = child_fd(fa, o->out, STDOUT_FILENO);
    if (r == 0)
        r = child_fd(fa, o->err, STDERR_FILENO);
    if (r == 0 && o->close_others)
        r = posix_spawn_file_actions_addclosefrom_np(fa, STDERR_FILENO + 1);
    return r;
}

static int attributes(posix_spawnattr_t *attr, const struct process_opts *o)
{
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (o->new_pgroup)
        flags |= POSIX_SPAWN_SETPGROUP;
    int r = posix_spawnattr_setflags(attr, flags);
    if (r == 0)
        r = posix_spawnattr_setsigmask(attr, &none);
    if (r == 0)
        r = posix_spawnattr_setsigdefault(attr, &all);
    if (r == 0 && o->new_pgroup)
        r = posix_spawnattr_setpgroup(attr, 0);
    return r;
}

int process_spawn(const char *path, char *const *argv, const struct process_opts *o, pid_t *ret_pid)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    if (posix_spawn_file_actions_init(&fa) != 0)
        return -ENOMEM;
    if (posix_spawnattr_init(&attr) != 0) {
        posix_spawn_file_actions_destroy(&fa);
        return -ENOMEM;
    }
    pid_t pid;
    int r = file_actions(&fa, o);
    if (r == 0)
        r = attributes(&attr, o);
    if (r == 0)
        r = posix_spawn(&pid, path, &fa, &attr, argv, o->envp ? o->envp : environ);
    posix_spawnattr_destroy(&attr);
    posix_spawn_file_actions_destroy(&fa);
    if (r != 0)
        return -r;
    *ret_pid = pid;
    return 0;
}
