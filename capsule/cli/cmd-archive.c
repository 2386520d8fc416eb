/* capsule save / capsule load (in capsule-pull, the program that links libarchive): a
 * container's files as an image archive, and an image archive into the cache (store/archive.h).
 * Pyxis' --container-save and --container-image=FILE are these. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capsule/cli/cli.h"
#include "capsule/image/capsule-limits.h"
#include "capsule/image/manifest.h"
#include "capsule/image/ref.h"
#include "capsule/launch.h"
#include "capsule/registry/pull.h"
#include "capsule/store/archive.h"
#include "capsule/store/store.h"
#include "lib/macro.h"

/* The run settings of image name, for the saved image to start as its source did. */
static int source_config(struct cli_ctx *ctx, const char *name, struct image_config *ret,
                         struct errmsg *e)
{
    _cleanup_(store_freep) struct store *st = NULL;
    struct image_record rec = {0};
    _cleanup_free_ char *data = NULL;
    size_t len;
    int r = store_open(ctx->config.cache_dir, &st, e);
    if (r >= 0)
        r = store_image_find(st, name, &rec, e);
    if (r >= 0)
        r = store_blob_read(st, rec.config_digest, CAPSULE_CONFIG_MAX, &data, &len, e);
    if (r >= 0)
        r = image_config_parse(data, len, ret, e);
    image_record_done(&rec);
    return r;
}

int cmd_save(int argc, char **argv, struct cli_ctx *ctx)
{
    static const struct option opts[] = {
        {"pid", required_argument, NULL, 'p'},
        {"image", required_argument, NULL, 'i'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    const struct cli_command *cmd = cli_command_find("save");
    const char *image = NULL;
    long pid = 0;
    int c;
    while ((c = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        if (c == 'p')
            pid = strtol(optarg, NULL, 10);
        else if (c == 'i')
            image = optarg;
        else if (c == 'h')
            return printf("usage: capsule %s\n\nWrites the files of the container whose process "
                          "is PID to FILE, an OCI image archive (oci-archive) that `capsule run "
                          "FILE`, skopeo and podman read; --image: the image it was started "
                          "from, whose settings (Env, Entrypoint, Cmd, WorkingDir) it keeps.\n",
                          cmd->usage),
                   0;
        else
            return cli_usage(cmd, "unknown option");
    }
    if (pid <= 1 || optind + 1 != argc)
        return cli_usage(cmd, pid <= 1 ? "--pid N is required" : "give one file");
    struct errmsg e = {{0}};
    struct image_config img = {0};
    if (image && source_config(ctx, image, &img, &e) < 0)
        return cli_fail("%s", e.text);
    char root[64];
    snprintf(root, sizeof(root), "/proc/%ld/root", pid);
    _cleanup_close_ int fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        image_config_done(&img);
        return cli_fail("container process %ld: %s", pid, strerror(errno));
    }
    struct archive_export_opts o = {
        .env = img.env,
        .entrypoint = img.entrypoint,
        .cmd = img.cmd,
        .working_dir = img.working_dir,
        .ref_name = "latest",
        .architecture = img.architecture ? img.architecture : pull_host_architecture(),
        .os = img.os,
    };
    int r = archive_export_rootfs(fd, argv[optind], &o, &e);
    image_config_done(&img);
    return r < 0 ? cli_fail("%s", e.text) : 0;
}

int cmd_load(int argc, char **argv, struct cli_ctx *ctx)
{
    static const struct option opts[] = {
        {"name", required_argument, NULL, 'n'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {0},
    };
    const struct cli_command *cmd = cli_command_find("load");
    _cleanup_free_ char *name = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "+qh", opts, NULL)) != -1) {
        if (c == 'n') {
            free(name);
            if (!(name = strdup(optarg)))
                return cli_fail("out of memory");
        } else if (c == 'h')
            return printf("usage: capsule %s\n\nPuts the image of FILE, an OCI image archive "
                          "(oci-archive: from `capsule save`, skopeo or podman), into the cache "
                          "as NAME (default localhost/file/BASE:pHASH, HASH of its path) and "
                          "prints the name.\n",
                          cmd->usage),
                   0;
        else if (c != 'q')
            return cli_usage(cmd, "unknown option");
    }
    if (optind + 1 != argc)
        return cli_usage(cmd, optind >= argc ? "no file given" : "give one file");
    const char *file = argv[optind];
    if (!name && launch_file_image_name(file, &name) < 0)
        return cli_fail("%s: no image name can be made of this file name; give --name", file);
    struct errmsg e = {{0}};
    struct image_ref ref = {0};
    _cleanup_free_ char *canonical = NULL;
    int r = image_ref_parse(name, &ref, &e);
    if (r >= 0)
        r = image_ref_format(&ref, &canonical);
    image_ref_done(&ref);
    if (r < 0)
        return cli_fail("--name: %s", e.text[0] ? e.text : "out of memory");
    _cleanup_(store_freep) struct store *st = NULL;
    if (cli_open_store(ctx, &st) < 0)
        return 1;
    struct archive_import_opts o = {
        .architecture = pull_host_architecture(),
        .max_layer_size = ctx->config.max_layer_size,
        .max_unpacked_size = ctx->config.max_unpacked_size,
    };
    if (archive_import(st, file, canonical, &o, NULL, &e) < 0)
        return cli_fail("%s", e.text);
    printf("%s\n", canonical);
    return 0;
}
