/* capsule: run Docker/OCI images with GPUs, unprivileged. This file only dispatches: global
 * options, the config, then one subcommand from the table. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "log.h"
#include "macro.h"

static int cmd_version(int argc, char **argv, struct cli_ctx *ctx);
static int cmd_help(int argc, char **argv, struct cli_ctx *ctx);

static const struct cli_command commands[] = {
    {"pull", cmd_pull, "pull [-q] [--platform OS/ARCH[/VARIANT]] [--keep-blobs] IMAGE",
     "fetch an image into the cache"},
    {"run", cmd_run, "run [OPTIONS] IMAGE [COMMAND [ARG...]]", "run a command in a new container"},
    {"create", cmd_create, "create --name NAME [OPTIONS] IMAGE [COMMAND [ARG...]]",
     "create a named container (started with `start`)"},
    {"start", cmd_start, "start [-a] NAME", "run a created container's command"},
    {"exec", cmd_exec, "exec [-e K=V] [-w DIR] NAME COMMAND [ARG...]",
     "run a command in a running container"},
    {"ps", cmd_ps, "ps [-a] [--format json]", "list running (with -a: all) containers"},
    {"rm", cmd_rm, "rm [-f] NAME...", "remove containers"},
    {"images", cmd_images, "images [--digests] [--format json]", "list cached images"},
    {"rmi", cmd_rmi, "rmi IMAGE...", "remove images from the cache (layers go at the next gc)"},
    {"gc", cmd_gc, "gc", "remove layers and blobs no image or container uses"},
    {"check", cmd_check, "check [--driver-root DIR]", "diagnose this host"},
    {"version", cmd_version, "version", "print versions"},
    {"help", cmd_help, "help [COMMAND]", "show help"},
};

const struct cli_command *cli_command_find(const char *name)
{
    for (size_t i = 0; i < ELEMENTSOF(commands); i++)
        if (strcmp(commands[i].name, name) == 0)
            return &commands[i];
    return NULL;
}

static void print_help(FILE *f)
{
    fputs("usage: capsule [--config FILE] [-q] [-v] COMMAND [ARGS...]\n\n"
          "Runs Docker/OCI images as an ordinary user, with the host's GPUs.\n\ncommands:\n",
          f);
    for (size_t i = 0; i < ELEMENTSOF(commands); i++)
        fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
    fputs("\n`capsule help COMMAND` shows a command's options.\n", f);
}

static int cmd_help(int argc, char **argv, struct cli_ctx *ctx)
{
    if (argc < 2) {
        print_help(stdout);
        return 0;
    }
    const struct cli_command *c = cli_command_find(argv[1]);
    if (!c)
        return cli_fail("no command '%s'; see `capsule help`", argv[1]);
    /* Every subcommand prints its full option list for --help. */
    char *sub[] = {(char *)c->name, "--help", NULL};
    return c->run(2, sub, ctx);
}

static int cmd_version(int argc, char **argv, struct cli_ctx *ctx)
{
    printf("capsule %s\n", GPUNODE_VERSION);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'}, {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},      {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},      {0},
    };
    const char *config_path = NULL;
    struct cli_ctx ctx = {0};
    enum log_level level = LOG_LEVEL_WARNING;
    int c;
    /* '+': stop at the subcommand, whose options are its own. */
    while ((c = getopt_long(argc, argv, "+c:qvh", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            config_path = optarg;
            break;
        case 'q':
            ctx.quiet = true;
            break;
        case 'v':
            level = LOG_LEVEL_DEBUG;
            break;
        case 'h':
            print_help(stdout);
            return 0;
        case 'V':
            return cmd_version(0, NULL, &ctx);
        default:
            print_help(stderr);
            return 2;
        }
    }
    log_setup("capsule", level);
    if (optind >= argc) {
        print_help(stderr);
        return 2;
    }
    const struct cli_command *cmd = cli_command_find(argv[optind]);
    if (!cmd) {
        cli_fail("no command '%s'; see `capsule help`", argv[optind]);
        return 2;
    }
    struct errmsg e = {{0}};
    /* --config replaces the user's file; /etc/capsule.conf still applies under it. */
    if (capsule_config_load(NULL, config_path, &ctx.config, &e) < 0)
        return cli_fail("%s", e.text);
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    optind = 0; /* glibc: 0 re-initialises getopt for the subcommand's own options */
    int rc = cmd->run(sub_argc, sub_argv, &ctx);
    capsule_config_done(&ctx.config);
    return rc;
}
