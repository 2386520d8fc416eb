/* capsule images / rmi / gc: the image cache as users see it. */
#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "capsule/cli/cli.h"
#include "capsule/containers.h"
#include "capsule/image/digest.h"
#include "lib/strv-json.h"
#include "lib/units.h"
#include "capsule/image/ref.h"
#include "capsule/store/store.h"
#include "lib/strv.h"

static void records_free(struct image_record *recs, size_t n)
{
    for (size_t i = 0; i < n; i++)
        image_record_done(&recs[i]);
    free(recs);
}

void cli_format_age(int64_t then, char *buf, size_t size)
{
    int64_t d = (int64_t)time(NULL) - then;
    static const struct {
        int64_t secs;
        const char *unit;
    } units[] = {
        {365 * 86400, "year"}, {30 * 86400, "month"}, {7 * 86400, "week"},
        {86400, "day"},        {3600, "hour"},        {60, "minute"},
    };
    for (size_t i = 0; i < ELEMENTSOF(units); i++) {
        int64_t n = d / units[i].secs;
        if (n >= 1) {
            snprintf(buf, size, "%lld %s%s ago", (long long)n, units[i].unit, n == 1 ? "" : "s");
            return;
        }
    }
    snprintf(buf, size, "just now");
}

static int print_json(const struct image_record *recs, size_t n)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < n; i++) {
        const struct image_record *r = &recs[i];
        json_t *layers = json_array();
        for (size_t j = 0; layers && j < r->n_layers; j++)
            json_array_append_new(layers, json_string(r->layers[j]));
        json_t *j =
            json_pack("{s:s, s:s, s:s, s:o, s:I, s:I, s:b}", "name", r->name, "id",
                      r->config_digest, "digest", r->manifest_digest, "layers",
                      layers ? layers : json_null(), "size", (json_int_t)r->size, "pulled_at",
                      (json_int_t)r->pulled_at, "node_cache", r->layer_paths != NULL);
        if (j && r->layer_paths)
            json_object_set_new(j, "layer_paths", strv_to_json(r->layer_paths));
        json_array_append_new(arr, j);
    }
    char *text = arr ? json_dumps(arr, JSON_INDENT(2)) : NULL;
    json_decref(arr);
    if (!text)
        return cli_fail("out of memory");
    puts(text);
    free(text);
    return 0;
}

static void print_table(const struct image_record *recs, size_t n, bool digests)
{
    int w = 4;
    for (size_t i = 0; i < n; i++)
        if ((int)strlen(recs[i].name) > w)
            w = (int)strlen(recs[i].name);
    printf("%-*s  ", w, "NAME");
    if (digests)
        printf("%-71s  ", "DIGEST");
    printf("%-12s  %6s  %9s  %s\n", "ID", "LAYERS", "SIZE", "PULLED");
    for (size_t i = 0; i < n; i++) {
        const struct image_record *r = &recs[i];
        char size[16], age[48];
        cli_format_age(r->pulled_at, age, sizeof(age));
        printf("%-*s  ", w, r->name);
        if (digests)
            printf("%-71s  ", r->manifest_digest);
        printf("%-12.12s  %6zu  %9s  %s\n", digest_hex(r->config_digest), r->n_layers,
               units_format_bytes(r->size, size), age);
    }
}

int cmd_images(int argc, char **argv, struct cli_ctx *ctx)
{
    static const struct option opts[] = {
        {"digests", no_argument, NULL, 'd'},
        {"format", required_argument, NULL, 'f'},
        {"node", no_argument, NULL, 'n'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    const struct cli_command *cmd = cli_command_find("images");
    bool digests = false, json = false;
    int c;
    while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        switch (c) {
        case 'n':
            return cli_exec_helper(ctx); /* the service is asked over HTTP: libcurl's */
        case 'd':
            digests = true;
            break;
        case 'f':
            if (strcmp(optarg, "json") == 0)
                json = true;
            else if (strcmp(optarg, "table") != 0)
                return cli_usage(cmd, "--format '%s': expected json or table", optarg);
            break;
        case 'h':
            printf("usage: capsule %s\n\nLists the cached images: NAME, ID (the config "
                   "digest), LAYERS, SIZE (compressed), PULLED.\n\n"
                   "      --digests      show the manifest digest too\n"
                   "      --node         the node cache's images instead (NAME, LAYERS, SIZE, "
                   "USERS, LAST USED)\n"
                   "      --format json  one JSON array of {name, id, digest, layers, size, "
                   "pulled_at, node_cache[, layer_paths]}\n",
                   cmd->usage);
            return 0;
        default:
            return cli_usage(cmd, "unknown option");
        }
    }
    if (optind != argc)
        return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    _cleanup_(store_freep) struct store *s = NULL;
    if (cli_open_store(ctx, &s) < 0)
        return 1;
    struct image_record *recs = NULL;
    size_t n = 0;
    struct errmsg e = {{0}};
    if (store_image_list(s, &recs, &n, &e) < 0)
        return cli_fail("%s", e.text);
    int rc = 0;
    if (json)
        rc = print_json(recs, n);
    else
        print_table(recs, n, digests);
    records_free(recs, n);
    return rc;
}

/* rmi -a: every record goes. */
static int remove_all_images(struct store *s)
{
    struct image_record *v = NULL;
    size_t n = 0;
    struct errmsg e = {{0}};
    if (store_image_list(s, &v, &n, &e) < 0)
        return cli_fail("%s", e.text);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (store_image_remove(s, v[i].name, &e) < 0)
            rc = cli_fail("%s", e.text);
        else
            printf("Deleted %s\n", v[i].name);
        image_record_done(&v[i]);
    }
    free(v);
    return rc;
}

/* Removes the record of every name in v, printing each. */
static int remove_names(struct store *s, char **v)
{
    int rc = 0;
    for (size_t i = 0; v[i]; i++) {
        struct errmsg e = {{0}};
        if (store_image_remove(s, v[i], &e) < 0)
            rc = cli_fail("%s", e.text);
        else
            printf("Deleted %s\n", v[i]);
    }
    return rc;
}

/* One argument of rmi. A name removes that name; an ID removes the image, which with names that
 * are more than one reference needs -f (Docker: "image is referenced in multiple repositories";
 * a tag and digests of its repository are one). */
static int remove_image(struct store *s, const char *arg, bool force)
{
    struct image_record rec = {0};
    struct errmsg e = {{0}};
    _cleanup_strv_free_ char **names = NULL;
    int r = store_image_find(s, arg, &rec, &e);
    if (r == 0)
        r = strv_push(&names, rec.name) < 0 ? errmsg_set(&e, -ENOMEM, "out of memory") : 0;
    else if (r == 1)
        r = store_image_names(s, rec.config_digest, &names, &e);
    if (r >= 0 && !force && strv_length(names) > 1 && !image_refs_single(names)) {
        _cleanup_free_ char *list = strv_join(names, ", ");
        r = errmsg_set(&e, -EBUSY,
                       "image %s has %zu names (%s); name the one to remove, or remove them "
                       "all with rmi -f %s",
                       arg, strv_length(names), list ? list : "?", arg);
    }
    image_record_done(&rec);
    if (r < 0)
        return cli_fail("%s", e.text);
    return remove_names(s, names);
}

int cmd_rmi(int argc, char **argv, struct cli_ctx *ctx)
{
    static const struct option opts[] = {{"all", no_argument, NULL, 'a'},
                                         {"force", no_argument, NULL, 'f'},
                                         {"help", no_argument, NULL, 'h'},
                                         {0}};
    const struct cli_command *cmd = cli_command_find("rmi");
    bool all = false, force = false;
    int c;
    while ((c = getopt_long(argc, argv, "+afh", opts, NULL)) != -1) {
        if (c == 'a' || c == 'f') {
            *(c == 'a' ? &all : &force) = true;
            continue;
        }
        if (c != 'h')
            return cli_usage(cmd, "unknown option");
        printf("usage: capsule %s\n\nRemoves images from the cache; their layers are freed by "
               "the next `capsule gc`. A name removes that name of the image; an ID prefix "
               "removes the image, and when it has several names only with -f. -a removes "
               "every image. To empty the cache: capsule rmi -a && capsule gc (layers keep "
               "their images' read-only directories, which a plain rm -rf cannot empty).\n",
               cmd->usage);
        return 0;
    }
    if (all == (optind < argc))
        return cli_usage(cmd, all ? "-a takes no image names" : "no image given");
    _cleanup_(store_freep) struct store *s = NULL;
    if (cli_open_store(ctx, &s) < 0)
        return 1;
    if (all)
        return remove_all_images(s);
    int rc = 0;
    /* Like docker rmi: every argument is tried, and any failure makes the exit status 1. */
    for (int i = optind; i < argc; i++)
        rc |= remove_image(s, argv[i], force);
    return rc;
}

int cmd_gc(int argc, char **argv, struct cli_ctx *ctx)
{
    static const struct option opts[] = {{"node", no_argument, NULL, 'n'},
                                         {"rekey", no_argument, NULL, 'r'},
                                         {"help", no_argument, NULL, 'h'},
                                         {0}};
    const struct cli_command *cmd = cli_command_find("gc");
    int c;
    while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        if (c == 'n' || c == 'r')
            return cli_exec_helper(ctx); /* --rekey is the node cache's (capsule-pull checks) */
        if (c != 'h')
            return cli_usage(cmd, "unknown option");
        printf("usage: capsule %s\n\nRemoves layers and blobs that no cached image and no "
               "container uses, and what killed pulls and runs left behind (partial downloads, "
               "unfinished unpacks, copies of images).\n\n"
               "      --node   the node cache's instead (root and its admin_group)\n"
               "      --rekey  with --node: a new node key first, so that no path handed out "
               "before leads anywhere (running containers keep theirs)\n",
               cmd->usage);
        return 0;
    }
    if (optind != argc)
        return cli_usage(cmd, "unexpected argument '%s'", argv[optind]);
    _cleanup_(store_freep) struct store *s = NULL;
    if (cli_open_store(ctx, &s) < 0)
        return 1;
    struct errmsg e = {{0}};
    _cleanup_strv_free_ char **keep = NULL;
    /* Without knowing what containers use, deleting would be a guess: fail instead. */
    if (containers_digests_in_use(ctx->config.data_dir, &keep, &e) < 0)
        return cli_fail("%s", e.text);
    struct store_gc_stats st = {0};
    if (store_gc(s, keep, &st, &e) < 0)
        return cli_fail("%s", e.text);
    char freed[16];
    printf("removed %u layer%s, %u blob%s, %u temporary entr%s; freed %s\n", st.layers_removed,
           st.layers_removed == 1 ? "" : "s", st.blobs_removed, st.blobs_removed == 1 ? "" : "s",
           st.tmp_removed, st.tmp_removed == 1 ? "y" : "ies",
           units_format_bytes((int64_t)st.bytes_freed, freed));
    if (st.layers_busy)
        printf("kept %u layer%s in use by running containers\n", st.layers_busy,
               st.layers_busy == 1 ? "" : "s");
    if (st.tmp_busy)
        printf("kept %u temporary entr%s in use by a running container or unpack\n", st.tmp_busy,
               st.tmp_busy == 1 ? "y" : "ies");
    return 0;
}
