/* capsule pull: parses the options and hands over to pull_image(). */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capsule/cli/cli.h"
#include "capsule/image/digest.h"
#include "capsule/cli/progress.h"
#include "lib/units.h"
#include "capsule/node/node-client.h"
#include "capsule/registry/pull.h"
#include "capsule/image/ref.h"
#include "capsule/store/store.h"

/* Splits "OS/ARCH[/VARIANT]" in place. Returns 0 or -EINVAL. */
static int parse_platform(char *s, const char **os, const char **arch, const char **variant)
{
    char *a = strchr(s, '/');
    if (!a)
        return -EINVAL;
    *a++ = '\0';
    char *v = strchr(a, '/');
    if (v)
        *v++ = '\0';
    if (!*s || !*a || (v && (!*v || strchr(v, '/'))))
        return -EINVAL;
    *os = s;
    *arch = a;
    *variant = v;
    return 0;
}

static void print_help(const struct cli_command *cmd)
{
    printf("usage: capsule %s\n\n"
           "Fetches IMAGE (docker.io/library/ubuntu:24.04, nvcr.io/nvidia/pytorch:24.01-py3,\n"
           "docker://nvcr.io#nvidia/pytorch:24.01-py3, NAME@sha256:...) into the image cache.\n\n"
           "  --platform OS/ARCH[/VARIANT]  pick this entry of a multi-platform image\n"
           "                                (default linux/%s)\n"
           "  -q, --quiet                   no progress; print only the image's name\n"
           "      --keep-blobs              keep the compressed layers after unpacking\n"
           "  -h, --help                    this text\n",
           cmd->usage, pull_host_architecture());
}

int cmd_pull(int argc, char **argv, struct cli_ctx *ctx)
{
    static const struct option opts[] = {
        {"platform", required_argument, NULL, 'p'},
        {"quiet", no_argument, NULL, 'q'},
        {"keep-blobs", no_argument, NULL, 'k'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    const struct cli_command *cmd = cli_command_find("pull");
    struct pull_opts o = {0};
    bool quiet = ctx->quiet;
    _cleanup_free_ char *platform = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "+qh", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            free(platform);
            platform = strdup(optarg);
            if (!platform || parse_platform(platform, &o.os, &o.architecture, &o.variant) < 0)
                return cli_usage(cmd, "--platform '%s': expected OS/ARCH or OS/ARCH/VARIANT",
                                 optarg);
            break;
        case 'q':
            quiet = true;
            break;
        case 'k':
            o.keep_blobs = true;
            break;
        case 'h':
            print_help(cmd);
            return 0;
        default:
            return cli_usage(cmd, "unknown option");
        }
    }
    if (optind + 1 != argc)
        return cli_usage(cmd, optind >= argc ? "no image given" : "give one image");
    _cleanup_(progress_freep) struct progress *display = NULL;
    struct pull_events events;
    if (!quiet) {
        if (progress_new(STDERR_FILENO, &display) < 0)
            return cli_fail("out of memory");
        events = progress_events(display);
        o.events = &events;
    }
    cli_registry_opts(ctx, &o.registry);
    o.mirrors = ctx->config.registry_mirrors;
    o.parallel = ctx->config.parallel_downloads;
    o.max_layer_size = ctx->config.max_layer_size;
    o.max_unpacked_size = ctx->config.max_unpacked_size;
    if (ctx->config.node_cache) {
        /* The service pulls from the registry itself, with the credentials this pull settled. */
        o.layer_source = node_layer_source;
        o.layer_source_userdata = ctx->config.node_cache;
        o.mirrors = NULL;
    }

    struct errmsg e = {{0}};
    struct image_ref ref = {0};
    if (image_ref_parse(argv[optind], &ref, &e) < 0)
        return cli_fail("%s", e.text);
    _cleanup_(store_freep) struct store *s = NULL;
    if (cli_open_store(ctx, &s) < 0) {
        image_ref_done(&ref);
        return 1;
    }
    struct image_record rec = {0};
    int r = pull_image(s, &ref, &o, &rec, &e);
    image_ref_done(&ref);
    if ((r == -ENOSPC || r == -EDQUOT) && ctx->config.node_cache)
        return cli_fail("%s; the node's administrator makes room (capsule gc --node)", e.text);
    /* What was downloaded so far stays for the next attempt; what to do is make room. */
    if (r == -ENOSPC || r == -EDQUOT)
        return cli_fail("%s; make room in the cache %s (capsule rmi and capsule gc remove unused "
                        "images) or set cache_dir in capsule.conf",
                        e.text, store_root(s));
    if (r < 0)
        return cli_fail("%s", e.text);
    if (quiet)
        printf("%s\n", rec.name);
    else {
        char size[16];
        printf("%s: id %.12s, %zu layer%s, %s\n", rec.name, digest_hex(rec.config_digest),
               rec.n_layers, rec.n_layers == 1 ? "" : "s", units_format_bytes(rec.size, size));
    }
    image_record_done(&rec);
    return 0;
}
