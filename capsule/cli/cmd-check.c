/* capsule check: diagnoses this host, one line per check, "ok" or what to fix. */
#include <errno.h>
#include <getopt.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <limits.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "capsule/cli/cli.h"
#include "capsule/gpu/gpu-inject.h"
#include "capsule/launch.h"
#include "lib/socket-probe.h"
#include "capsule/runtime/runtime.h"
#include "capsule/store/store.h"

struct check_ctx {
    unsigned failed;
    unsigned gpu_lines;
    bool no_driver; /* the first GPU line failed: there is no driver to check further */
};

static void line(struct check_ctx *c, bool ok, const char *what, const char *detail)
{
    printf("%-4s %-22s %s\n", ok ? "ok" : "FAIL", what, detail);
    c->failed += !ok;
}

static void check_probe(struct check_ctx *c, const char *what, int r, const struct errmsg *e,
                        const char *ok_text)
{
    line(c, r >= 0, what, r >= 0 ? ok_text : e->text);
}

/* The directory is usable by this user and how much room it has. */
static void check_dir(struct check_ctx *c, const char *what, const char *dir)
{
    char text[512];
    struct statvfs vfs;
    if (access(dir, W_OK | X_OK) < 0 || statvfs(dir, &vfs) < 0) {
        snprintf(text, sizeof(text), "%s: %s", dir, strerror(errno));
        line(c, false, what, text);
        return;
    }
    double free_gib = (double)vfs.f_bavail * (double)vfs.f_frsize / (1024.0 * 1024 * 1024);
    /* NGC framework images are 10-20 GiB unpacked: less than that will not hold one. */
    bool ok = free_gib >= 20;
    snprintf(text, sizeof(text), "%s: %.1f GiB free%s", dir, free_gib,
             ok ? "" : " (NGC framework images need 10-20 GiB: free space or set cache_dir)");
    line(c, ok, what, text);
}

/* A cache that others write to (group-writable, or another user's) works, within limits that
 * its users should know before they meet them. */
static void check_shared(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) < 0 || (st.st_uid == geteuid() && !(st.st_mode & S_IWGRP)))
        return;
    struct group *g = getgrgid(st.st_gid);
    /* A user's own private group (umask 002 makes directories group-writable) shares nothing. */
    struct passwd *pw = getpwuid(geteuid());
    if (st.st_uid == geteuid() && g && pw && strcmp(g->gr_name, pw->pw_name) == 0 &&
        (!g->gr_mem[0] || (strcmp(g->gr_mem[0], pw->pw_name) == 0 && !g->gr_mem[1])))
        return;
    printf("%-4s %-22s %s is shared (group %s): images another member pulled run from a copy "
           "(a slower start), and not at all if they hold files only that member may read; "
           "every member can change what the others run; gc is for its owner or root\n",
           "warn", "shared cache", dir, g ? g->gr_name : "?");
}

static void gpu_line(const struct gpu_check_line *l, void *userdata)
{
    struct check_ctx *c = userdata;
    if (c->gpu_lines++ == 0 && !l->ok) {
        /* No driver is normal on a CPU node: say so without failing the check. */
        c->no_driver = true;
        printf("%-4s %-22s %s\n", "warn", "gpu", l->text);
        return;
    }
    if (!c->no_driver)
        line(c, l->ok, "gpu", l->text);
}

/* 0 when capsule-cached accepts connections at path (nothing is sent: capsule speaks no HTTP,
 * capsule-pull does), else -errno with a message. */
static int socket_answers(const char *path, struct errmsg *e)
{
    int r = socket_probe(path);
    if (r < 0)
        return errmsg_set(e, r, "%s: %s (is capsule-cached running?)", path, strerror(-r));
    return 0;
}

/* The node cache: its service answers on the socket, and this host mounts its layers. */
static void check_node_cache(struct check_ctx *c, const struct capsule_config *config)
{
    char detail[PATH_MAX + 64];
    struct errmsg e = {{0}};
    snprintf(detail, sizeof(detail), "%s: capsule-cached answers", config->node_cache);
    check_probe(c, "node cache", socket_answers(config->node_cache, &e), &e, detail);
    char buf[PATH_MAX];
    const char *program = launch_fuse_program(config, buf, sizeof(buf));
    e.text[0] = '\0';
    snprintf(detail, sizeof(detail), "%s mounts node cache layers with the images' modes", program);
    check_probe(c, "fuse-overlayfs", runtime_probe_fuse_overlayfs(program, &e), &e, detail);
}

int cmd_check(int argc, char **argv, struct cli_ctx *ctx)
{
    static const struct option opts[] = {
        {"driver-root", required_argument, NULL, 'd'}, {"help", no_argument, NULL, 'h'}, {0}};
    const struct cli_command *cmd = cli_command_find("check");
    const char *driver_root = ctx->config.driver_root;
    int o;
    while ((o = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (o == 'd')
            driver_root = optarg;
        else if (o == 'h')
            return printf("usage: capsule %s\n", cmd->usage), 0;
        else
            return cli_usage(cmd, "bad option");
    }
    struct check_ctx c = {0};
    struct errmsg e = {{0}};
    printf("%-4s %-22s %s\n", "ok", "capsule", GPUNODE_VERSION);
    for (int i = 0; i < 2; i++)
        if (ctx->config.loaded_from[i])
            printf("%-4s %-22s %s\n", "ok", "config", ctx->config.loaded_from[i]);
    check_probe(&c, "user namespaces", runtime_probe_userns(&e), &e, "unprivileged, allowed");
    _cleanup_(store_freep) struct store *st = NULL;
    int r = store_open(ctx->config.cache_dir, &st, &e);
    check_probe(&c, "image cache", r, &e, ctx->config.cache_dir);
    if (r >= 0) {
        check_dir(&c, "cache space", store_root(st));
        check_shared(store_root(st));
        char scratch[4096];
        snprintf(scratch, sizeof(scratch), "%s/tmp", store_root(st));
        e.text[0] = '\0';
        check_probe(&c, "overlayfs in userns", runtime_probe_overlay(scratch, &e), &e,
                    "works (layers are mounted, not copied)");
    }
    if (ctx->config.node_cache)
        check_node_cache(&c, &ctx->config);
    gpu_inject_check(driver_root, gpu_line, &c);
    printf("\n%s\n", c.failed ? "some checks failed: see above" : "this host can run capsule");
    return c.failed ? 1 : 0;
}
