/* Running capsule-pull from capsule (see cli.h for why pulls live in their own program). */
#include <errno.h>
#include <limits.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"

#ifndef CAPSULE_LIBEXECDIR
#define CAPSULE_LIBEXECDIR "/usr/local/libexec/gpunode"
#endif

/* $CAPSULE_PULL, else capsule-pull beside this program (a build tree), else the installed one. */
static void helper_path(char *buf, size_t size)
{
    const char *env = getenv("CAPSULE_PULL");
    if (env && *env) {
        snprintf(buf, size, "%s", env);
        return;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n > 0) {
        self[n] = '\0';
        if (snprintf(buf, size, "%s/capsule-pull", dirname(self)) < (int)size &&
            access(buf, X_OK) == 0)
            return;
    }
    snprintf(buf, size, "%s/capsule-pull", CAPSULE_LIBEXECDIR);
}

int cmd_pull_exec(int argc, char **argv, struct cli_ctx *ctx)
{
    char path[PATH_MAX];
    helper_path(path, sizeof(path));
    ctx->argv[0] = path;
    execv(path, ctx->argv);
    return cli_fail("cannot run %s: %s (set CAPSULE_PULL to its path)", path, strerror(errno));
}

int cli_run_pull_helper(const struct cli_ctx *ctx, const char *image)
{
    char path[PATH_MAX];
    helper_path(path, sizeof(path));
    char *argv[8];
    size_t n = 0;
    argv[n++] = path;
    if (ctx->config_path) {
        argv[n++] = "--config";
        argv[n++] = (char *)ctx->config_path;
    }
    if (ctx->quiet)
        argv[n++] = "-q";
    argv[n++] = "pull";
    argv[n++] = (char *)image;
    argv[n] = NULL;
    pid_t pid = fork();
    if (pid < 0)
        return cli_fail("fork: %s", strerror(errno));
    if (pid == 0) {
        /* What the pull prints is not the container's output: keep stdout for the command. */
        dup2(STDERR_FILENO, STDOUT_FILENO);
        execv(path, argv);
        fprintf(stderr, "capsule: cannot run %s: %s (set CAPSULE_PULL to its path)\n", path,
                strerror(errno));
        _exit(127);
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return cli_fail("waitpid: %s", strerror(errno));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
