/* Running capsule-pull from capsule (see cli.h for why pulls live in their own program). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "capsule/cli/cli.h"
#include "lib/process.h"

#ifndef CAPSULE_LIBEXECDIR
#define CAPSULE_LIBEXECDIR "/usr/local/libexec/gpunode"
#endif
#ifndef CAPSULE_BINDIR
#define CAPSULE_BINDIR "/usr/local/bin"
#endif

/* This program's own path and the folder it lies in; false if /proc/self/exe cannot be read. */
static bool self_path(char *self, size_t size, char **ret_slash)
{
    ssize_t n = readlink("/proc/self/exe", self, size - 1);
    if (n <= 0)
        return false;
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (!slash)
        return false;
    *ret_slash = slash;
    return true;
}

/* Whether dir (resolved, as /proc/self/exe gives it) is CAPSULE_BINDIR, which may itself be
 * reached through a symbolic link (/usr/local -> /opt/local). */
static bool is_installed_bindir(const char *dir)
{
    if (strcmp(dir, CAPSULE_BINDIR) == 0)
        return true;
    char real[PATH_MAX];
    return realpath(CAPSULE_BINDIR, real) && strcmp(dir, real) == 0;
}

/* $CAPSULE_PULL; else, for the installed capsule (CAPSULE_BINDIR/capsule), the installed helper;
 * else the one beside this program: a build tree, a bundle or a copy runs its own helper and never
 * falls back to an installed one, which would be another build's code (and, in a test, would make
 * a broken build pass). A missing helper is then an error that names the path it should be at.
 * Returns 0, or 1 (printed) when the path does not fit or this program's own path is unknown. */
static int helper_path(char *buf, size_t size)
{
    const char *env = getenv("CAPSULE_PULL");
    char self[PATH_MAX], *slash;
    int n;
    if (env && *env)
        n = snprintf(buf, size, "%s", env);
    else if (!self_path(self, sizeof(self), &slash))
        return cli_fail("cannot tell where capsule-pull is: /proc/self/exe is unreadable (is "
                        "/proc mounted?); set CAPSULE_PULL to its path");
    else {
        *slash = '\0';
        n = snprintf(buf, size, "%s/capsule-pull",
                     is_installed_bindir(self) ? CAPSULE_LIBEXECDIR : self);
    }
    if (n < 0 || (size_t)n >= size)
        return cli_fail("the path of capsule-pull is longer than %zu bytes", size - 1);
    return 0;
}

int cmd_pull_exec(int argc, char **argv, struct cli_ctx *ctx)
{
    return cli_exec_helper(ctx);
}

int cli_exec_helper(struct cli_ctx *ctx)
{
    char path[PATH_MAX];
    if (helper_path(path, sizeof(path)) != 0)
        return 1;
    ctx->argv[0] = path;
    execv(path, ctx->argv);
    return cli_fail("cannot run %s: %s (set CAPSULE_PULL to its path)", path, strerror(errno));
}

/* Runs the helper with `args` (NULL-terminated, after the global options) and waits; its stdout
 * goes to our stderr unless keep_stdout. Returns its exit status, 127 (printed) if it could not
 * be started or executed, or 1 (printed) when its path is unknown or waiting for it failed. */
static int run_helper(const struct cli_ctx *ctx, char *const *args, bool keep_stdout)
{
    char path[PATH_MAX];
    if (helper_path(path, sizeof(path)) != 0)
        return 1;
    char *argv[8];
    size_t n = 0;
    argv[n++] = path;
    if (ctx->config_path) {
        argv[n++] = "--config";
        argv[n++] = (char *)ctx->config_path;
    }
    if (ctx->quiet)
        argv[n++] = "-q";
    for (; *args && n < sizeof(argv) / sizeof(argv[0]) - 1; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    fflush(stdout);
    struct process_opts o = {
        .in = PROCESS_KEEP, .out = keep_stdout ? PROCESS_KEEP : STDERR_FILENO, .err = PROCESS_KEEP};
    pid_t pid;
    int r = process_spawn(path, argv, &o, &pid);
    if (r < 0) {
        cli_fail("cannot run %s: %s (set CAPSULE_PULL to its path)", path, strerror(-r));
        return 127;
    }
    int status;
    while (waitpid(pid, &status, 0) < 0)
        if (errno != EINTR)
            return cli_fail("waitpid: %s", strerror(errno));
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int cli_run_pull_helper(const struct cli_ctx *ctx, const char *image, const char *file)
{
    /* What the pull prints is not the container's output: keep stdout for the command. */
    char *pull[] = {"pull", (char *)image, NULL};
    char *load[] = {"load", "-q", "--name", (char *)image, (char *)file, NULL};
    return run_helper(ctx, file ? load : pull, false);
}

int cli_print_version(const char *program)
{
    char self[PATH_MAX], *slash;
    if (self_path(self, sizeof(self), &slash))
        printf("%s %s (%s)\n", program, GPUNODE_VERSION, self);
    else
        printf("%s %s\n", program, GPUNODE_VERSION);
    return 0;
}

int cmd_version_with_helper(int argc, char **argv, struct cli_ctx *ctx)
{
    cli_print_version("capsule");
    char *args[] = {"version", NULL};
    int r = run_helper(ctx, args, true);
#ifdef CAPSULE_SPANK_SLURM
    /* The Slurm plugin of this build: the Slurm it needs is the first thing an admin asks. */
    printf("spank_capsule %s, built for Slurm %d.%02d.%d (%s)\n", GPUNODE_VERSION,
           (CAPSULE_SPANK_SLURM >> 16) & 0xff, (CAPSULE_SPANK_SLURM >> 8) & 0xff,
           CAPSULE_SPANK_SLURM & 0xff, CAPSULE_SPANK_PLUGIN);
#endif
    return r;
}
