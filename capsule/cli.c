#include "cli.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "registry.h"
#include "store.h"

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
        .retries = ctx->config.retries,
    };
}
