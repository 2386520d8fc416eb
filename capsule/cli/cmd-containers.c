/* capsule start / exec / ps / rm / logs: named containers (containers.h). */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "capsule/image/capsule-limits.h"
#include "capsule/cli/cli.h"
#include "lib/fileio.h"
#include "capsule/launch.h"
#include "capsule/image/manifest.h"
#include "capsule/runtime/runtime.h"
#include "capsule/store/store.h"
#include "lib/strv.h"
#include "capsule/runtime/tty.h"

extern char **environ;

/* getopt loop for the commands whose only options are flags without arguments and --help. */
static int parse_flags(int argc, char **argv, const char *cmd_name, const char *shortopts,
                       const struct option *opts, bool *flags, int *ret_optind)
{
    const struct cli_command *cmd = cli_command_find(cmd_name);
    int c;
    while ((c = getopt_long(argc, argv, shortopts, opts, NULL)) != -1) {
        if (c == 'h') {
            printf("usage: capsule %s\n", cmd->usage);
            return 0;
        }
        const char *p = c == '?' ? NULL : strchr(shortopts, c);
        if (!p)
            return cli_usage(cmd, "bad option");
        flags[p - shortopts] = true;
    }
    *ret_optind = optind;
    return -1;
}

struct start_ctx {
    const char *data_dir, *name;
};

static int record_pid(pid_t pid, void *userdata)
{
    const struct start_ctx *sc = userdata;
    return container_set_pid(sc->data_dir, sc->name, pid);
}

int cmd_start(int argc, char **argv, struct cli_ctx *ctx)
{
    static const struct option opts[] = {
        {"attach", no_argument, NULL, 'a'}, {"help", no_argument, NULL, 'h'}, {0}};
    bool flags[8] = {0};
    int idx = 0, rc = parse_flags(argc, argv, "start", "+ah", opts, flags, &idx);
    if (rc >= 0)
        return rc;
    if (idx + 1 != argc)
        return cli_usage(cli_command_find("start"), "give one container name");
    const char *name = argv[idx], *data = ctx->config.data_dir;
    struct container c = {0};
    struct errmsg e = {{0}};
    _cleanup_(store_freep) struct store *st = NULL;
    _cleanup_close_ int lock_fd = -1;
    _cleanup_free_ char *dir = container_dir(data, name), *upper = NULL, *work = NULL;
    /* Failures of capsule itself are 125, never a status the command could have returned. */
    if (container_load(data, name, &c, &e) < 0 || container_lock(data, name, &lock_fd, &e) < 0) {
        container_done(&c);
        return cli_fail("%s", e.text), LAUNCH_EXIT_FAILED;
    }
    if (c.writable &&
        (asprintf(&upper, "%s/upper", dir) < 0 || asprintf(&work, "%s/work", dir) < 0))
        upper = work = NULL;
    struct start_ctx sc = {data, name};
    struct launch_request req = {
        .c = &c,
        .config = &ctx->config,
        .host_env = environ,
        .upper_dir = upper,
        .work_dir = work,
        .on_started = record_pid,
        .userdata = &sc,
    };
    int code = LAUNCH_EXIT_FAILED;
    if (cli_open_store(ctx, &st) >= 0) {
        if (launch_container(st, &req, &code, &e) < 0)
            cli_fail("%s", e.text);
        else
            container_set_exit(data, name, code);
    }
    container_done(&c);
    return code;
}

/* Where `exec` starts without -w: as `docker exec`, the container's working directory
 * (--workdir at create/run, else the image's WorkingDir, else "/"). Best effort: an image
 * config that cannot be read leaves "/". */
static char *container_cwd(struct cli_ctx *ctx, const struct container *ct)
{
    if (ct->workdir)
        return strdup(ct->workdir);
    _cleanup_(store_freep) struct store *st = NULL;
    _cleanup_free_ char *data = NULL;
    size_t len;
    struct image_config img = {0};
    char *cwd = NULL;
    if (store_open(ctx->config.cache_dir, &st, NULL) >= 0 &&
        store_blob_read(st, ct->config_digest, CAPSULE_CONFIG_MAX, &data, &len, NULL) >= 0 &&
        image_config_parse(data, len, &img, NULL) >= 0 && img.working_dir)
        cwd = strdup(img.working_dir);
    image_config_done(&img);
    return cwd ? cwd : strdup("/");
}

int cmd_exec(int argc, char **argv, struct cli_ctx *ctx)
{
    static const struct option opts[] = {
        {"env", required_argument, NULL, 'e'},   {"workdir", required_argument, NULL, 'w'},
        {"interactive", no_argument, NULL, 'i'}, {"tty", no_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},        {0}};
    const struct cli_command *cmd = cli_command_find("exec");
    _cleanup_strv_free_ char **set = strv_new();
    const char *workdir = NULL;
    int c;
    bool tty = false;
    while ((c = getopt_long(argc, argv, "+e:itw:h", opts, NULL)) != -1) {
        if (c == 'i')
            continue; /* stdin is always the command's */
        if (c == 't') {
            tty = true;
            continue;
        }
        if (c == 'e' && strv_push(&set, optarg) < 0)
            return cli_fail("out of memory"), LAUNCH_EXIT_FAILED;
        else if (c == 'w')
            workdir = optarg;
        else if (c == 'h')
            return printf("usage: capsule %s\n", cmd->usage), 0;
        else if (c != 'e')
            return cli_usage(cmd, "bad option");
    }
    if (optind + 2 > argc)
        return cli_usage(cmd, "give a container name and a command");
    struct container ct = {0};
    struct errmsg e = {{0}};
    /* As for start: capsule's own failures must not look like the command's exit status. */
    if (container_load(ctx->config.data_dir, argv[optind], &ct, &e) < 0)
        return cli_fail("%s", e.text), LAUNCH_EXIT_FAILED;
    bool running = ct.running, remap_root = ct.remap_root;
    pid_t pid = ct.pid;
    _cleanup_free_ char *cwd = workdir ? strdup(workdir) : container_cwd(ctx, &ct);
    container_done(&ct);
    if (!cwd)
        return cli_fail("out of memory"), LAUNCH_EXIT_FAILED;
    if (!running || pid <= 0)
        return cli_fail("container '%s' is not running; start it with capsule start %s",
                        argv[optind], argv[optind]),
               LAUNCH_EXIT_FAILED;
    /* A process whose environment cannot be read: an empty one, plus -e. */
    _cleanup_strv_free_ char **env = cli_read_environ(pid);
    if (!env && !(env = strv_new()))
        return cli_fail("out of memory"), LAUNCH_EXIT_FAILED;
    for (size_t i = 0; set[i]; i++)
        if (strv_env_put(&env, set[i]) < 0)
            return cli_fail("--env '%s': expected K=V", set[i]), LAUNCH_EXIT_FAILED;
    int code = LAUNCH_EXIT_FAILED;
    struct runtime_exec_spec spec = {
        .argv = argv + optind + 1,
        .env = env,
        .cwd = cwd,
        .remap_root = remap_root,
        .tty = tty_wanted(tty),
        .tty_all = tty,
    };
    int r = runtime_exec(pid, &spec, &code, &e);
    if (r < 0) {
        cli_fail("%s", e.text);
        return launch_exit_code(r, &e);
    }
    return code;
}

static void status_text(const struct container *c, char *buf, size_t size)
{
    if (c->running)
        snprintf(buf, size, "running (pid %d)", (int)c->pid);
    else if (c->last_exit >= 0)
        snprintf(buf, size, "exited (%d)", c->last_exit);
    else
        snprintf(buf, size, "created");
}

static json_t *container_json(const struct container *c)
{
    char status[64];
    status_text(c, status, sizeof(status));
    json_t *args = json_array();
    for (size_t i = 0; args && c->args && c->args[i]; i++)
        json_array_append_new(args, json_string(c->args[i]));
    return json_pack("{s:s, s:s, s:s, s:s, s:b, s:i, s:o, s:I}", "name", c->name, "image", c->image,
                     "id", c->config_digest, "status", status, "running", c->running, "pid",
                     c->running ? (int)c->pid : 0, "args", args, "created_at",
                     (json_int_t)c->created_at);
}

static void print_table(const struct container *list, size_t n, bool all)
{
    printf("%-20s %-40s %-22s %s\n", "NAME", "IMAGE", "STATUS", "CREATED");
    for (size_t i = 0; i < n; i++) {
        if (!all && !list[i].running)
            continue;
        char status[64], created[32];
        time_t t = (time_t)list[i].created_at;
        status_text(&list[i], status, sizeof(status));
        strftime(created, sizeof(created), "%Y-%m-%d %H:%M:%S", localtime(&t));
        printf("%-20s %-40s %-22s %s\n", list[i].name, list[i].image, status, created);
    }
}

int cmd_ps(int argc, char **argv, struct cli_ctx *ctx)
{
    static const struct option opts[] = {{"all", no_argument, NULL, 'a'},
                                         {"format", required_argument, NULL, 'f'},
                                         {"help", no_argument, NULL, 'h'},
                                         {0}};
    const struct cli_command *cmd = cli_command_find("ps");
    bool all = false, json = false;
    int c;
    while ((c = getopt_long(argc, argv, "ah", opts, NULL)) != -1) {
        if (c == 'a')
            all = true;
        else if (c == 'f' && strcmp(optarg, "json") == 0)
            json = true;
        else if (c == 'h')
            return printf("usage: capsule %s\n", cmd->usage), 0;
        else
            return cli_usage(cmd, c == 'f' ? "--format: only json is known" : "bad option");
    }
    struct container *list = NULL;
    size_t n = 0;
    struct errmsg e = {{0}};
    container_list(ctx->config.data_dir, &list, &n, &e);
    if (json) {
        json_t *a = json_array();
        for (size_t i = 0; i < n; i++)
            if (all || list[i].running)
                json_array_append_new(a, container_json(&list[i]));
        json_dumpf(a, stdout, JSON_INDENT(2));
        putchar('\n');
        json_decref(a);
    } else {
        print_table(list, n, all);
    }
    for (size_t i = 0; i < n; i++)
        container_done(&list[i]);
    free(list);
    return 0;
}

/* Kills a running container and waits (up to 5 s) for its runner to let go of the lock. */
static int stop_container(const char *data, const char *name, struct errmsg *e)
{
    struct container c = {0};
    int r = container_load(data, name, &c, e);
    pid_t pid = c.pid;
    bool running = c.running;
    container_done(&c);
    if (r < 0 || !running)
        return r;
    if (pid > 0)
        kill(pid, SIGKILL);
    for (int i = 0; i < 500; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        if (container_load(data, name, &c, NULL) < 0 || !c.running) {
            container_done(&c);
            return 0;
        }
        container_done(&c);
        nanosleep(&ts, NULL);
    }
    return errmsg_set(e, -EBUSY, "container '%s' did not stop", name);
}

int cmd_rm(int argc, char **argv, struct cli_ctx *ctx)
{
    static const struct option opts[] = {
        {"force", no_argument, NULL, 'f'}, {"help", no_argument, NULL, 'h'}, {0}};
    bool flags[8] = {0};
    int idx = 0, rc = parse_flags(argc, argv, "rm", "fh", opts, flags, &idx);
    if (rc >= 0)
        return rc;
    if (idx >= argc)
        return cli_usage(cli_command_find("rm"), "give at least one container name");
    rc = 0;
    for (int i = idx; i < argc; i++) {
        struct errmsg e = {{0}};
        int r = flags[0] ? stop_container(ctx->config.data_dir, argv[i], &e) : 0;
        if (r >= 0)
            r = container_remove(ctx->config.data_dir, argv[i], &e);
        if (r == -EBUSY && !flags[0])
            cli_fail("%s; stop it first or use rm -f", e.text);
        else if (r < 0)
            cli_fail("%s", e.text);
        else
            printf("%s\n", argv[i]);
        rc = r < 0 ? 1 : rc;
    }
    return rc;
}

int cmd_logs(int argc, char **argv, struct cli_ctx *ctx)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {0}};
    bool flags[8] = {0};
    int idx = 0, rc = parse_flags(argc, argv, "logs", "+h", opts, flags, &idx);
    if (rc >= 0)
        return rc;
    if (idx + 1 != argc)
        return cli_usage(cli_command_find("logs"), "give one container name");
    const char *name = argv[idx];
    struct errmsg e = {{0}};
    if (container_name_check(name, &e) < 0)
        return cli_usage(cli_command_find("logs"), "%s", e.text);
    _cleanup_free_ char *path = container_log_path(ctx->config.data_dir, name);
    if (!path)
        return cli_fail("out of memory");
    _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return cli_fail("no log of a container '%s' (only `run -d` keeps one)", name);
    if (fd < 0)
        return cli_fail("cannot open %s: %s", path, strerror(errno));
    char buf[65536];
    for (;;) {
        ssize_t n = read(fd, buf, sizeof(buf));
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return cli_fail("cannot read %s: %s", path, strerror(errno));
        if (n == 0)
            return 0;
        if (fd_write_all(STDOUT_FILENO, buf, (size_t)n) < 0)
            return 1; /* stdout closed: nobody to tell */
    }
}
