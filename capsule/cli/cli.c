#include "capsule/cli/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "lib/fileio.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/strv.h"

#include "capsule/registry/registry.h"
#include "capsule/store/store.h"

int cli_fail(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("capsule: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    return 1;
}

int cli_usage(const struct cli_command *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("capsule: ", stderr);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nusage: capsule %s\n", c->usage);
    va_end(ap);
    return 2;
}

int cli_open_store(struct cli_ctx *ctx, struct store **ret)
{
    struct errmsg e = {{0}};
    int r = store_open(ctx->config.cache_dir, ret, &e);
    if (r < 0)
        cli_fail("image cache: %s", e.text);
    return r;
}

void cli_registry_opts(const struct cli_ctx *ctx, struct registry_opts *ret)
{
    *ret = (struct registry_opts){
        .insecure = ctx->config.insecure_registries,
        .netrc_path = ctx->config.credentials,
        .docker_config_path = ctx->config.docker_config,
        .ca_file = ctx->config.ca_file,
        .retries = ctx->config.retries,
    };
}

/* The running program's table, set by cli_main. */
static const struct cli_command *cli_table;
static size_t cli_table_n;

const struct cli_command *cli_command_find(const char *name)
{
    for (size_t i = 0; i < cli_table_n; i++)
        if (strcmp(cli_table[i].name, name) == 0)
            return &cli_table[i];
    return NULL;
}

static void print_help(FILE *f)
{
    fputs("usage: capsule [--config FILE] [-q] [-v] COMMAND [ARGS...]\n\n"
          "Runs Docker/OCI images as an ordinary user, with the host's GPUs.\n\ncommands:\n",
          f);
    for (size_t i = 0; i < cli_table_n; i++)
        fprintf(f, "  %-9s %s\n", cli_table[i].name, cli_table[i].summary);
    fputs("\n`capsule help COMMAND` shows a command's options.\n", f);
}

int cmd_help(int argc, char **argv, struct cli_ctx *ctx)
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
    optind = 0;
    return c->run(2, sub, ctx);
}

int cmd_version(int argc, char **argv, struct cli_ctx *ctx)
{
    return cli_print_version(program_invocation_short_name);
}

int cli_main(int argc, char **argv, const struct cli_command *table, size_t n)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'}, {"quiet", no_argument, NULL, 'q'},
        {"verbose", no_argument, NULL, 'v'},      {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},      {0},
    };
    struct cli_ctx ctx = {.argv = argv};
    enum log_level level = LOG_LEVEL_WARNING;
    int c;
    cli_table = table;
    cli_table_n = n;
    /* '+': stop at the subcommand, whose options are its own. */
    while ((c = getopt_long(argc, argv, "+c:qvh", opts, NULL)) != -1) {
        switch (c) {
        case 'c':
            ctx.config_path = optarg;
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
            return cli_command_find("version")->run(0, NULL, &ctx);
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
    int fail = cmd->fail_status;
    /* A missing default file is no error; a file named on the command line must be there. */
    if (ctx.config_path && access(ctx.config_path, F_OK) < 0)
        return cli_fail("--config '%s': %s", ctx.config_path, strerror(errno)), fail;
    /* --config replaces the user's file; /etc/capsule.conf still applies under it. */
    if (capsule_config_load(NULL, ctx.config_path, &ctx.config, &e) < 0)
        return cli_fail("%s", e.text), fail;
    int sub_argc = argc - optind;
    char **sub_argv = argv + optind;
    optind = 0; /* glibc: 0 re-initialises getopt for the subcommand's own options */
    int rc = cmd->run(sub_argc, sub_argv, &ctx);
    capsule_config_done(&ctx.config);
    return rc;
}

char **cli_read_environ(pid_t pid)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/environ", (int)pid);
    _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
    _cleanup_free_ char *data = NULL;
    size_t len = 0;
    if (fd < 0 || fd_read_all(fd, 4 << 20, &data, &len) < 0)
        return NULL;
    char **env = strv_new();
    for (size_t i = 0; env && i < len; i += strlen(data + i) + 1)
        if (strchr(data + i, '=') && data[i] != '=' && strv_push(&env, data + i) < 0) {
            strv_free(env);
            return NULL;
        }
    return env;
}
