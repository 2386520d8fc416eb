/* The CLI's subcommands: capsule.c dispatches argv[1] to one of these by a table. Each lives in
 * its own cmd-*.c, parses its own options with getopt_long (argv[0] is the subcommand name),
 * prints its own output, and returns the process exit status: 0 success, 1 an error (printed
 * once, as "capsule: <message>"), 2 a usage error; `run`/`start`/`exec` return the command's
 * status (125 capsule failed, 126 command not executable, 127 command not found, as Docker). */
#pragma once

#include <stdint.h>
#include <sys/types.h>

#include "capsule/capsule-config.h"

struct cli_ctx {
    struct capsule_config config; /* loaded before dispatch */
    bool quiet;                   /* global -q: no progress */
    const char *config_path;      /* global --config, or NULL */
    char **argv;                  /* the program's whole command line, for handing on */
};

struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv, struct cli_ctx *ctx);
    const char *usage;   /* one line: "pull [--platform OS/ARCH] IMAGE" */
    const char *summary; /* one line for `capsule --help` */
    /* The exit status when capsule fails before the command runs (its config): 1, or for the
     * commands whose status is the container command's LAUNCH_EXIT_FAILED (125), as Docker
     * does, so that it cannot be taken for the command's own. */
    int fail_status;
};

/* The whole of a program's main(): global options (--config, -q, -v, --help, --version), the
 * config, then the subcommand named by the first operand, looked up in table. Returns the exit
 * status. capsule and capsule-pull share it. */
int cli_main(int argc, char **argv, const struct cli_command *table, size_t n);

/* Pulls are done by a second program, capsule-pull, so that capsule itself does not load
 * libcurl, libarchive and their 40 dependencies: that alone costs more than starting a container.
 * Runs `capsule-pull [--config F] [-q] pull IMAGE` (with file: `load -q --name IMAGE FILE`) and
 * waits. Returns its exit status (0: the image is in the store), or 1 after printing why it
 * could not be started. */
int cli_run_pull_helper(const struct cli_ctx *ctx, const char *image, const char *file);
/* The `pull` entry of capsule's table: replaces this process with capsule-pull. */
int cmd_pull_exec(int argc, char **argv, struct cli_ctx *ctx);
/* Which capsule-pull that is: $CAPSULE_PULL; for the installed capsule the installed helper;
 * otherwise (a build tree, a bundle, a copy) the one beside this program, never an installed one.
 * capsule's `version` prints its own line, then runs the helper's `version`, so the output names
 * both programs by path: "capsule 0.1.0 (/usr/local/bin/capsule)", "capsule-pull 0.1.0 (...)".
 * Returns 0, or the helper's failure (printed). */
int cmd_version_with_helper(int argc, char **argv, struct cli_ctx *ctx);
/* Prints "<program> <version> (<path of this executable>)"; returns 0. */
int cli_print_version(const char *program);

/* The environment process pid was started with ("K=V" entries; `exec` starts from the
 * container's, `hold --run-entrypoint` reports its command's); NULL when it cannot be read. */
char **cli_read_environ(pid_t pid);

/* "just now", "5 minutes ago", "3 days ago" for a Unix time, as Docker words ages. */
void cli_format_age(int64_t then, char *buf, size_t size);

/* Runs this command line in capsule-pull instead (replacing this process): for what needs
 * libcurl, such as asking the node cache's service. Returns only on failure (printed), 1. */
int cli_exec_helper(struct cli_ctx *ctx);

/* Prints "capsule: <text>" to stderr and returns 1; for `return cli_fail(e.text)`. */
int cli_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Prints a usage error and the command's usage line; returns 2. */
int cli_usage(const struct cli_command *c, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Opens the store at ctx's cache_dir; prints the error and returns -errno on failure. */
struct store;
int cli_open_store(struct cli_ctx *ctx, struct store **ret);
/* Fills registry options from the config (insecure list, credential files, retries). */
struct registry_opts;
void cli_registry_opts(const struct cli_ctx *ctx, struct registry_opts *ret);

/* Subcommands, one per cmd-*.c. */
int cmd_pull(int argc, char **argv, struct cli_ctx *ctx); /* cmd-pull.c */
int cmd_save(int argc, char **argv, struct cli_ctx *ctx); /* cmd-archive.c: save, load */
int cmd_load(int argc, char **argv, struct cli_ctx *ctx);
int cmd_images(int argc, char **argv, struct cli_ctx *ctx); /* cmd-images.c: images, rmi, gc */
int cmd_rmi(int argc, char **argv, struct cli_ctx *ctx);
int cmd_gc(int argc, char **argv, struct cli_ctx *ctx);
/* cmd-node.c, in capsule-pull: `images --node` and `gc --node`, answered by capsule-cached. */
int cmd_node_images(int argc, char **argv, struct cli_ctx *ctx);
int cmd_node_gc(int argc, char **argv, struct cli_ctx *ctx);
int cmd_run(int argc, char **argv, struct cli_ctx *ctx); /* cmd-run.c: run, create */
int cmd_create(int argc, char **argv, struct cli_ctx *ctx);
int cmd_hold(int argc, char **argv, struct cli_ctx *ctx); /* cmd-hold.c */
/* cmd-containers.c: start, exec, ps, rm, logs */
int cmd_start(int argc, char **argv, struct cli_ctx *ctx);
int cmd_exec(int argc, char **argv, struct cli_ctx *ctx);
int cmd_ps(int argc, char **argv, struct cli_ctx *ctx);
int cmd_rm(int argc, char **argv, struct cli_ctx *ctx);
int cmd_logs(int argc, char **argv, struct cli_ctx *ctx);
int cmd_check(int argc, char **argv, struct cli_ctx *ctx); /* cmd-check.c */
/* cli.c */
int cmd_version(int argc, char **argv, struct cli_ctx *ctx);
int cmd_help(int argc, char **argv, struct cli_ctx *ctx);

/* Finds a command by name in the running program's table (for usage lines), NULL if none. */
const struct cli_command *cli_command_find(const char *name);
