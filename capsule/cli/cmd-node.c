/* capsule images --node and capsule gc --node: what the node cache's service (capsule-cached)
 * holds, and its garbage collection. In capsule-pull, which links libcurl; capsule hands these
 * command lines over (cli_exec_helper). */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/cli/cli.h"
#include "capsule/node/node-protocol.h"
#include "lib/http-client.h"
#include "lib/units.h"

/* One request to the service; 0 and its JSON answer, or 1 after printing why not. */
static int ask(const struct cli_ctx *ctx, const char *method, const char *path, long timeout_ms,
               json_t **ret)
{
    const char *socket = ctx->config.node_cache;
    if (!socket)
        return cli_fail("no node cache is configured (node_cache in capsule.conf)");
    struct errmsg e = {{0}};
    long status = 0;
    json_t *answer = NULL;
    char url[128];
    snprintf(url, sizeof(url), "http://localhost%s", path);
    if (http_request_json(method, url, socket, NULL, timeout_ms, &status, &answer, &e) < 0)
        return cli_fail("node cache at %s: %s", socket, e.text);
    if (status != 200) {
        const char *why = json_string_value(json_object_get(answer, "error"));
        int r = cli_fail("node cache: %s", why ? why : "the service answered without a reason");
        json_decref(answer);
        return r;
    }
    *ret = answer;
    return 0;
}

static void print_images(json_t *list)
{
    int w = 4;
    size_t i;
    json_t *img;
    json_array_foreach(list, i, img)
    {
        int n = (int)strlen(json_string_value(json_object_get(img, "image")) ?: "");
        if (n > w)
            w = n;
    }
    printf("%-*s  %6s  %9s  %5s  %s\n", w, "NAME", "LAYERS", "SIZE", "USERS", "LAST USED");
    json_array_foreach(list, i, img)
    {
        char size[16], age[48];
        cli_format_age(json_integer_value(json_object_get(img, "last_used")), age, sizeof(age));
        printf("%-*s  %6lld  %9s  %5lld  %s\n", w,
               json_string_value(json_object_get(img, "image")) ?: "?",
               (long long)json_integer_value(json_object_get(img, "layers")),
               units_format_bytes(json_integer_value(json_object_get(img, "size")), size),
               (long long)json_integer_value(json_object_get(img, "users")), age);
    }
}

int cmd_node_images(int argc, char **argv, struct cli_ctx *ctx)
{
    static const struct option opts[] = {
        {"node", no_argument, NULL, 'n'},
        {"format", required_argument, NULL, 'f'},
        {0},
    };
    const struct cli_command *cmd = cli_command_find("images");
    bool json = false, node = false;
    int c;
    while ((c = getopt_long(argc, argv, "+", opts, NULL)) != -1) {
        if (c == 'n')
            node = true;
        else if (c == 'f' && (strcmp(optarg, "json") == 0 || strcmp(optarg, "table") == 0))
            json = strcmp(optarg, "json") == 0;
        else
            return cli_usage(cmd, "unknown option");
    }
    if (!node || optind != argc)
        return cli_usage(cmd, "capsule-pull lists the node cache only (--node)");
    json_t *list = NULL;
    if (ask(ctx, "GET", NODE_IMAGES_PATH, 30000, &list) != 0)
        return 1;
    if (json) {
        char *text = json_dumps(list, JSON_INDENT(2));
        if (text)
            puts(text);
        free(text);
    } else
        print_images(list);
    json_decref(list);
    return 0;
}

int cmd_node_gc(int argc, char **argv, struct cli_ctx *ctx)
{
    const struct cli_command *cmd = cli_command_find("gc");
    bool node = false, rekey = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--node") == 0)
            node = true;
        else if (strcmp(argv[i], "--rekey") == 0)
            rekey = true;
        else
            return cli_usage(cmd, "unexpected argument '%s'", argv[i]);
    }
    if (!node)
        return cli_usage(cmd, "capsule-pull collects the node cache only (--node)");
    json_t *st = NULL;
    /* A gc of a large cache removes many files: give it time. */
    if (ask(ctx, "POST", rekey ? NODE_GC_PATH "?rekey" : NODE_GC_PATH, 0, &st) != 0)
        return 1;
    if (rekey)
        printf("node cache: new key, %lld layers renamed\n",
               (long long)json_integer_value(json_object_get(st, "renamed_layers")));
    long long layers = json_integer_value(json_object_get(st, "removed_layers"));
    long long busy = json_integer_value(json_object_get(st, "busy_layers"));
    char freed[16];
    printf("node cache: removed %lld layer%s; freed %s\n", layers, layers == 1 ? "" : "s",
           units_format_bytes(json_integer_value(json_object_get(st, "freed_bytes")), freed));
    if (busy)
        printf("kept %lld layer%s in use by running containers or unpacks\n", busy,
               busy == 1 ? "" : "s");
    json_decref(st);
    return 0;
}
