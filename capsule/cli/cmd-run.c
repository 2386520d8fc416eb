/* capsule run / capsule create: options, image lookup (pulling when missing), then launch. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "capsule/cli/cli.h"
#include "capsule/cli/run-opts.h"
#include "lib/fileio.h"
#include "capsule/launch.h"
#include "lib/log.h"
#include "capsule/store/store.h"
#include "lib/strv.h"

extern char **environ;

static const char run_help[] =
    "options:\n"
    "  --name NAME            name the container (capsule exec/ps see it)\n"
    "  --gpus all|none|ID,... GPUs to inject (index, UUID, MIG UUID, PCI bus id)\n"
    "  --driver-root DIR      where the NVIDIA driver lives (default /)\n"
    "  -e, --env K=V|K        set a variable (K alone: the host's value)\n"
    "  -m, --mount SRC:DST[:ro]  bind a host path\n"
    "  -w, --workdir DIR      working directory inside\n"
    "  --entrypoint CMD       replace the image's entrypoint (and drop its Cmd)\n"
    "  --writable             allow writes to the root filesystem (kept only by named\n"
    "                         containers made with `create`)\n"
    "  --remap-root           be root inside (your own uid outside)\n"
    "  --no-remap-root        be yourself inside (the default unless the config says so)\n"
    "  --pid                  own pid namespace\n"
    "  --no-home              do not mount the home directory\n"
    "  --pull missing|never|always  when to pull the image (default missing)\n"
    "  -d, --detach           run in the background and print the container's name (given\n"
    "                         with --name, else made up); its output goes to `capsule logs`\n"
    "  -t, --tty              a terminal for the command on stdin, stdout and stderr (without\n"
    "                         -t: when stdin and stdout are terminals, on those that are)\n"
    "Docker's habits: -i and --interactive are accepted (stdin is always the command's), so\n"
    "-it works; --rm is what `run` does anyway (a container of `run`, named or not, goes when\n"
    "it ends).\n";

static const char run_help_hold[] =
    "hold:\n"
    "  --fd N                 required: once the container is held, one line of JSON goes to\n"
    "                         this socket (pid, argv, env, cwd, remap_root); the container\n"
    "                         stays until its other end is closed\n"
    "  --name NAME            a named container, kept after the hold (created from IMAGE when\n"
    "                         it does not exist; IMAGE may then be left out)\n"
    "  --create-only          with --name: fail when NAME exists\n"
    "  --join                 with --name: when NAME is held already, say so with the holder's\n"
    "                         line (\"joined\": true) and stay until the socket closes\n"
    "  --join-only            with --name: join NAME, and fail when it is not held\n"
    "  --data-dir DIR         where named containers live (default: the config's data_dir)\n"
    "  --run-entrypoint       run the image's entrypoint first: the line comes once it has run\n"
    "                         its command (a shell of capsule's; the image needs /bin/sh), with\n"
    "                         the environment the entrypoint gave it\n"
    "  --entrypoint-output F  where the entrypoint's output goes (default: nowhere)\n";

static int set_string(char **dst, const char *v)
{
    free(*dst);
    *dst = strdup(v);
    return *dst ? 0 : -ENOMEM;
}

static int parse_fd(const char *arg, int *ret, struct errmsg *e)
{
    char *end;
    errno = 0;
    long v = strtol(arg, &end, 10);
    if (errno || end == arg || *end || v <= STDERR_FILENO || v > 65535 ||
        fcntl((int)v, F_GETFD) < 0)
        return errmsg_set(e, -EINVAL, "--fd '%s': not an open file descriptor above 2", arg);
    *ret = (int)v;
    return 0;
}

/* One option; returns 0, -ENOMEM, or -EINVAL with the message already in e. */
static int apply_option(int c, const char *arg, struct run_opts *o, struct errmsg *e)
{
    struct mount_entry m = {0};
    int r;
    switch (c) {
    case 'n':
        return container_name_check(arg, e) < 0 ? -EINVAL : set_string(&o->c.name, arg);
    case 'g':
        return set_string(&o->c.gpus, arg);
    case 'r':
        return set_string(&o->c.driver_root, arg);
    case 'e':
        return strv_push(&o->c.user_env, arg);
    case 'm':
        /* Checked now so that a typo fails before anything is pulled. */
        r = capsule_parse_mount(arg, &m, e);
        mount_entry_done(&m);
        return r < 0 ? r : strv_push(&o->c.mounts, arg);
    case 'w':
        return set_string(&o->c.workdir, arg);
    case 'E':
        return set_string(&o->c.entrypoint, arg);
    case 'W':
        o->c.writable = true;
        return 0;
    case 'R':
        o->c.remap_root = true;
        return 0;
    case 'U':
        o->c.remap_root = false;
        return 0;
    case 'P':
        o->c.pid_ns = true;
        return 0;
    case 'H':
        o->c.no_home = true;
        return 0;
    case 'p':
        if (launch_pull_policy_parse(arg, &o->pull) < 0)
            return errmsg_set(e, -EINVAL, "--pull '%s': use missing, never or always", arg);
        return 0;
    case 'h':
        o->help = true;
        return 0;
    case 'd':
        o->detach = true;
        return 0;
    case 'X': /* --rm: a run's container always goes when it ends */
        o->rm = true;
        return 0;
    case 'i': /* -i: stdin is always the command's */
        return 0;
    case 't':
        o->tty = true;
        return 0;
    case 'F':
        return parse_fd(arg, &o->hold_fd, e);
    case 'C':
        o->create_only = true;
        return 0;
    case 'J':
        o->join = true;
        return 0;
    case 'O':
        o->join = o->join_only = true;
        return 0;
    case 'D':
        return set_string(&o->data_dir, arg);
    case 'Y':
        o->run_entrypoint = true;
        return 0;
    case 'L':
        return set_string(&o->entrypoint_output, arg);
    default:
        return errmsg_set(e, -EINVAL, "unknown option");
    }
}

int run_parse_options(int argc, char **argv, const struct cli_command *cmd, struct cli_ctx *ctx,
                      struct run_opts *o)
{
    *o = (struct run_opts){.c = {.remap_root = ctx->config.remap_root}, .hold_fd = -1};
    o->c.user_env = strv_new();
    o->c.mounts = strv_new();
    static const struct option opts[] = {
        {"name", required_argument, NULL, 'n'},
        {"gpus", required_argument, NULL, 'g'},
        {"driver-root", required_argument, NULL, 'r'},
        {"env", required_argument, NULL, 'e'},
        {"mount", required_argument, NULL, 'm'},
        {"workdir", required_argument, NULL, 'w'},
        {"entrypoint", required_argument, NULL, 'E'},
        {"writable", no_argument, NULL, 'W'},
        {"remap-root", no_argument, NULL, 'R'},
        {"no-remap-root", no_argument, NULL, 'U'},
        {"pid", no_argument, NULL, 'P'},
        {"no-home", no_argument, NULL, 'H'},
        {"pull", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},
        {"detach", no_argument, NULL, 'd'},
        {"interactive", no_argument, NULL, 'i'},
        {"tty", no_argument, NULL, 't'},
        {"rm", no_argument, NULL, 'X'},
        {"fd", required_argument, NULL, 'F'},
        {"create-only", no_argument, NULL, 'C'},
        {"join", no_argument, NULL, 'J'},
        {"join-only", no_argument, NULL, 'O'},
        {"data-dir", required_argument, NULL, 'D'},
        {"run-entrypoint", no_argument, NULL, 'Y'},
        {"entrypoint-output", required_argument, NULL, 'L'},
        {0},
    };
    int c;
    /* '+': options end at the image name; what follows belongs to the command. */
    while ((c = getopt_long(argc, argv, "+de:im:tw:h", opts, NULL)) != -1) {
        struct errmsg e = {{0}};
        if (c == '?')
            return -cli_usage(cmd, "bad option");
        int r = apply_option(c, optarg, o, &e);
        if (r == -ENOMEM)
            return -cli_fail("out of memory");
        if (r < 0)
            return -cli_usage(cmd, "%s", e.text);
    }
    bool hold = strcmp(cmd->name, "hold") == 0;
    if (!hold && (o->hold_fd >= 0 || o->create_only || o->join || o->data_dir ||
                  o->run_entrypoint || o->entrypoint_output))
        return -cli_usage(cmd, "--fd, --create-only, --join, --data-dir, --run-entrypoint and "
                               "--entrypoint-output are for `capsule hold`");
    if (o->help) {
        printf("usage: capsule %s\n\n%s%s", cmd->usage, run_help, hold ? run_help_hold : "");
        return 0; /* exit status 0; IMAGE's index is always >= 1 */
    }
    if (optind >= argc && !(hold && o->c.name))
        return -cli_usage(cmd, "no image given");
    return optind;
}

void run_opts_done(struct run_opts *o)
{
    container_done(&o->c);
    free(o->data_dir);
    free(o->entrypoint_output);
    o->data_dir = o->entrypoint_output = NULL;
}

int run_pull_with_helper(void *userdata, const char *name, const char *file)
{
    return cli_run_pull_helper(userdata, name, file);
}

int run_take_image(struct container *c, const struct image_record *img)
{
    c->image = strdup(img->name);
    c->config_digest = strdup(img->config_digest);
    c->layers = strv_copy(img->layers);
    c->layer_paths = img->layer_paths ? strv_copy(img->layer_paths) : NULL;
    return c->image && c->config_digest && c->layers && (c->layer_paths || !img->layer_paths)
               ? 0
               : -ENOMEM;
}

struct run_ctx {
    const char *data_dir;
    const char *name;
    int started_fd; /* run -d: where to say "started" (one NUL byte), else -1 */
    bool tty;       /* -t */
};

static int record_pid(pid_t pid, void *userdata)
{
    struct run_ctx *rc = userdata;
    int r = rc->name ? container_set_pid(rc->data_dir, rc->name, pid) : 0;
    if (rc->started_fd >= 0) {
        (void)fd_write_all(rc->started_fd, "", 1);
        closep(&rc->started_fd);
    }
    return r;
}

/* Launches the registered container and removes its record when it ends. With started_fd (run
 * -d), a failure before the command started is written there instead of printed. */
static int launch_and_remove(struct cli_ctx *ctx, struct store *st, struct container *c,
                             struct run_ctx *rc)
{
    struct errmsg e = {{0}};
    int code;
    struct launch_request req = {
        .c = c,
        .config = &ctx->config,
        .host_env = environ,
        .on_started = record_pid,
        .userdata = rc,
        .tty_force = rc->tty,
    };
    int r = launch_container(st, &req, &code, &e);
    if (c->name) {
        struct errmsg ignored;
        container_remove(ctx->config.data_dir, c->name, &ignored);
    }
    if (r < 0 && rc->started_fd >= 0)
        (void)fd_write_all(rc->started_fd, e.text, strlen(e.text));
    else if (r < 0)
        cli_fail("%s", e.text);
    return code;
}

/* A name for `run -d` without --name, as Docker makes one up: "capsule-" and 8 hex digits. */
static int invent_name(char **ret)
{
    uint32_t x;
    if (getrandom(&x, sizeof(x), 0) != (ssize_t)sizeof(x))
        x = (uint32_t)getpid() ^ (uint32_t)time(NULL);
    return asprintf(ret, "capsule-%08x", (unsigned)x) < 0 ? -ENOMEM : 0;
}

/* run -d: the runner goes on in a child of its own session, its output (and the container's)
 * in the container's log; this process waits until the command has started, prints the name and
 * returns 0, or prints why it did not start and returns 125. */
static int run_detached(struct cli_ctx *ctx, struct store *st, struct container *c,
                        struct run_ctx *rc)
{
    struct errmsg e = {{0}};
    _cleanup_close_ int log_fd = container_log_open(ctx->config.data_dir, c->name, &e);
    int p[2];
    if (log_fd < 0)
        return cli_fail("%s", e.text), LAUNCH_EXIT_FAILED;
    if (pipe2(p, O_CLOEXEC) < 0)
        return cli_fail("pipe: %s", strerror(errno)), LAUNCH_EXIT_FAILED;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0)
        return cli_fail("fork: %s", strerror(errno)), LAUNCH_EXIT_FAILED;
    if (pid == 0) {
        close(p[0]);
        rc->started_fd = p[1];
        int null_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (setsid() < 0 || null_fd < 0 || dup2(null_fd, STDIN_FILENO) < 0 ||
            dup2(log_fd, STDOUT_FILENO) < 0 || dup2(log_fd, STDERR_FILENO) < 0)
            _exit(LAUNCH_EXIT_FAILED);
        _exit(launch_and_remove(ctx, st, c, rc));
    }
    close(p[1]);
    _cleanup_free_ char *said = NULL;
    size_t n = 0;
    int r = fd_read_all(p[0], 4096, &said, &n);
    close(p[0]);
    if (r >= 0 && n > 0 && said[0] == '\0') {
        printf("%s\n", c->name);
        return 0;
    }
    /* It did not start: the runner is ending (or has), and its status says how (126 not
     * executable, 127 not found, 125 otherwise), as in the foreground. */
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    int code = WIFEXITED(status) && WEXITSTATUS(status) >= LAUNCH_EXIT_FAILED ? WEXITSTATUS(status)
                                                                              : LAUNCH_EXIT_FAILED;
    if (r >= 0 && n > 0)
        return cli_fail("%s", said), code;
    _cleanup_free_ char *log = container_log_path(ctx->config.data_dir, c->name);
    return cli_fail("the container did not start; see %s", log ? log : "its log"),
           LAUNCH_EXIT_FAILED;
}

/* Registers a `run --name` container (ephemeral, locked while it runs), launches (in the
 * background with -d), cleans up. */
static int run_container(struct cli_ctx *ctx, struct store *st, struct container *c, bool detach,
                         bool tty)
{
    struct errmsg e = {{0}};
    _cleanup_close_ int lock_fd = -1;
    if (detach && !c->name && invent_name(&c->name) < 0)
        return cli_fail("out of memory"), LAUNCH_EXIT_FAILED;
    struct run_ctx rc = {ctx->config.data_dir, c->name, -1, tty};
    if (c->name) {
        containers_sweep(ctx->config.data_dir);
        c->ephemeral = true;
        c->created_at = time(NULL);
        if (container_create(ctx->config.data_dir, c, &lock_fd, &e) < 0)
            return cli_fail("%s", e.text), LAUNCH_EXIT_FAILED;
    }
    /* With -d the child holds the lock (an flock belongs to the open file, shared by fork) for as
     * long as the container runs; ours is closed on return. */
    return detach ? run_detached(ctx, st, c, &rc) : launch_and_remove(ctx, st, c, &rc);
}

static int run_or_create(int argc, char **argv, struct cli_ctx *ctx, bool create)
{
    const struct cli_command *cmd = cli_command_find(create ? "create" : "run");
    struct run_opts o;
    struct image_record img = {0};
    _cleanup_(store_freep) struct store *st = NULL;
    struct errmsg e = {{0}};
    int rc = LAUNCH_EXIT_FAILED;
    int i = run_parse_options(argc, argv, cmd, ctx, &o);
    if (i <= 0) {
        rc = -i;
        goto out;
    }
    if (create && !o.c.name) {
        rc = cli_usage(cmd, "a container made with create needs --name");
        goto out;
    }
    if (create && (o.detach || o.rm || o.tty)) {
        rc = cli_usage(cmd,
                       "%s is for run: `capsule start` runs a created container, and it "
                       "stays until `capsule rm`",
                       o.detach ? "--detach"
                       : o.rm   ? "--rm"
                                : "--tty");
        goto out;
    }
    if (!(o.c.args = strv_copy(argv + i + 1)) || cli_open_store(ctx, &st) < 0)
        goto out;
    if (launch_resolve_image(st, argv[i], o.pull, run_pull_with_helper, ctx, &img, &e) < 0 ||
        run_take_image(&o.c, &img) < 0) {
        cli_fail("%s", e.text[0] ? e.text : "out of memory");
        goto out;
    }
    if (create) {
        o.c.created_at = time(NULL);
        rc =
            container_create(ctx->config.data_dir, &o.c, NULL, &e) < 0 ? cli_fail("%s", e.text) : 0;
        if (rc == 0)
            printf("%s\n", o.c.name);
    } else {
        rc = run_container(ctx, st, &o.c, o.detach, o.tty);
    }
out:
    image_record_done(&img);
    run_opts_done(&o);
    return rc;
}

int cmd_run(int argc, char **argv, struct cli_ctx *ctx)
{
    return run_or_create(argc, argv, ctx, false);
}

int cmd_create(int argc, char **argv, struct cli_ctx *ctx)
{
    return run_or_create(argc, argv, ctx, true);
}
