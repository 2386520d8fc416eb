/* capsule hold: a container that runs nothing itself, held for host processes to join with
 * runtime_join (the tasks of a Slurm step: spank_capsule.so runs this as the job's user).
 *
 * The caller gives a socket (--fd). Once the container is held, one line of JSON goes there:
 *   {"pid": N, "argv": [...], "env": [...], "cwd": "/x", "remap_root": false, "joined": false,
 *    "image": "docker.io/library/ubuntu:24.04"}
 * pid is the process to join; image the one it runs (`capsule save --image` takes it); argv the
 * image's entrypoint and command under the given flags (the caller decides whether to run it); env
 * and cwd what the command would have had. The container stays until the socket's other end is
 * closed; then this process cleans up and exits 0. On failure nothing is written to the socket; the
 * error goes to stderr ("capsule: ...") and the exit status is 125.
 *
 * With --name the container is a named one (containers.h) in --data-dir: created from IMAGE when
 * it does not exist (with a writable layer of its own, kept after the hold), else started again
 * with this hold's flags (only the image comes from its record). A named container that is held
 * already is joined with --join: its holder's line is written again, with "joined": true, and
 * this process stays, as a user of the container, until the socket's other end is closed; the
 * container is not started again (a new overlay on its writable layer) while such a user is
 * in its old one. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "capsule/cli/cli.h"
#include "capsule/cli/run-opts.h"
#include "lib/fileio.h"
#include "lib/macro.h"
#include "lib/strv.h"
#include "lib/strv-json.h"

extern char **environ;

#define HOLD_FILE "hold.json"

struct hold_ctx {
    int fd;
    const char *data_dir, *name; /* name NULL: an anonymous container */
    bool remap_root;
    const char *image; /* the canonical name of the image it runs, once known */
};

/* The holder's line, newline-terminated, malloc'd; NULL: out of memory. */
static char *hold_line(pid_t pid, char *const *argv, char *const *env, const char *cwd,
                       bool remap_root, const char *image)
{
    json_t *o = json_pack("{s:i, s:o?, s:o?, s:s, s:b, s:b, s:s}", "pid", (json_int_t)pid, "argv",
                          strv_to_json(argv), "env", strv_to_json(env), "cwd", cwd ? cwd : "/",
                          "remap_root", remap_root, "joined", false, "image", image);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    char *line = NULL;
    if (text && asprintf(&line, "%s\n", text) < 0)
        line = NULL;
    free(text);
    return line;
}

/* DATA/containers/NAME/hold.json, written whole (a temporary file renamed into place). */
static int save_line(const struct hold_ctx *h, const char *line)
{
    _cleanup_free_ char *dir = container_dir(h->data_dir, h->name), *tmp = NULL, *path = NULL;
    if (!dir || asprintf(&tmp, "%s/." HOLD_FILE, dir) < 0 ||
        asprintf(&path, "%s/" HOLD_FILE, dir) < 0)
        return -ENOMEM;
    _cleanup_close_ int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return negative_errno();
    int r = fd_write_all(fd, line, strlen(line));
    if (r >= 0 && rename(tmp, path) < 0)
        r = negative_errno();
    return r;
}

/* The line for the holder pid: recorded for --join (named containers), then sent. */
static int announce(const struct hold_ctx *h, pid_t pid, char *const *argv, char *const *env,
                    const char *cwd)
{
    _cleanup_free_ char *line = hold_line(pid, argv, env, cwd, h->remap_root, h->image);
    if (!line)
        return -ENOMEM;
    int r = 0;
    if (h->name &&
        ((r = container_set_pid(h->data_dir, h->name, pid)) < 0 || (r = save_line(h, line)) < 0))
        return r;
    if ((r = fd_write_all(h->fd, line, strlen(line))) < 0)
        return r;
    /* The caller stops listening once it has the line (spank_capsule closes its end of our
     * stderr): what the cleanup says later must not end this process with SIGPIPE. */
    _cleanup_close_ int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0)
        (void)dup2(null, STDERR_FILENO);
    return 0;
}

static int on_held(pid_t pid, char *const *argv, char *const *env, const char *cwd, void *userdata)
{
    return announce(userdata, pid, argv, env, cwd);
}

/* --run-entrypoint: the image's entrypoint runs with this as its command. The shell says its
 * pid and working directory on fd 4, then keeps the container until fd 3 (the caller's socket)
 * reads end-of-file: the entrypoint's setup is done and its environment is the shell's. */
#define ENTRYPOINT_SHELL      "printf '%s %s\\n' \"$$\" \"$(pwd)\" >&4; exec 4>&-; read _ <&3; exit 0"
#define ENTRYPOINT_TIMEOUT_MS (300 * 1000)

struct entrypoint_ctx {
    struct hold_ctx *h;
    int ready_r, ready_w;
    const char *output;
};

/* Waits for the shell's "PID CWD" line; 0, or an error that points at the entrypoint. */
static int read_ready(struct entrypoint_ctx *x, pid_t *ret_pid, char **ret_cwd)
{
    char buf[4200];
    size_t n = 0;
    while (n < sizeof(buf) - 1 && !memchr(buf, '\n', n)) {
        struct pollfd p = {.fd = x->ready_r, .events = POLLIN};
        int k = poll(&p, 1, ENTRYPOINT_TIMEOUT_MS);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return cli_fail("the image's entrypoint did not run its command within %d s; try "
                            "without running the entrypoint",
                            ENTRYPOINT_TIMEOUT_MS / 1000),
                   -ETIMEDOUT;
        ssize_t got = read(x->ready_r, buf + n, sizeof(buf) - 1 - n);
        if (got <= 0)
            return cli_fail("the image's entrypoint ended without running its command%s%s; try "
                            "without running the entrypoint",
                            x->output ? " (its output: " : "", x->output ? x->output : ""),
                   -ECHILD;
        n += (size_t)got;
    }
    buf[n] = '\0';
    char *space = strchr(buf, ' '), *nl = strchr(buf, '\n');
    long pid = strtol(buf, NULL, 10);
    if (!space || !nl || pid <= 1 || space[1] != '/')
        return cli_fail("the entrypoint's shell said '%.100s', not its pid and directory", buf),
               -EBADMSG;
    *nl = '\0';
    *ret_pid = (pid_t)pid;
    *ret_cwd = strdup(space + 1);
    return *ret_cwd ? 0 : -ENOMEM;
}

static int entrypoint_started(pid_t pid, void *userdata)
{
    struct entrypoint_ctx *x = userdata;
    /* The command has its copy: ours would keep the pipe open after it is gone. */
    closep(&x->ready_w);
    pid_t shell;
    _cleanup_free_ char *cwd = NULL;
    int r = read_ready(x, &shell, &cwd);
    if (r < 0)
        return r;
    _cleanup_strv_free_ char **env = cli_read_environ(shell);
    if (!env)
        return cli_fail("cannot read the environment of the entrypoint's command"), -EIO;
    char *none[] = {NULL};
    return announce(x->h, shell, none, env, cwd);
}

/* Sets up the run of the image's entrypoint with the shell as its command. */
static int prepare_entrypoint(struct run_opts *o, struct entrypoint_ctx *x, int *ret_output)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return cli_fail("pipe: %s", strerror(errno)), -1;
    x->ready_r = p[0];
    x->ready_w = p[1];
    x->output = o->entrypoint_output;
    *ret_output = open(x->output ? x->output : "/dev/null",
                       O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (*ret_output < 0)
        return cli_fail("%s: %s", x->output, strerror(errno)), -1;
    char *shell[] = {"/bin/sh", "-c", ENTRYPOINT_SHELL, NULL};
    strv_free(o->c.args);
    return (o->c.args = strv_copy(shell)) ? 0 : (cli_fail("out of memory"), -1);
}

/* DATA/containers/NAME/users, flock(2)ed shared by every hold that joined the container for as
 * long as its step runs: a new start of the container (a new overlay on its writable layer)
 * must wait until no step is in the old one. 0 and *ret_fd, or -errno (-EWOULDBLOCK: taken). */
static int users_lock(const struct hold_ctx *h, int op, int *ret_fd)
{
    _cleanup_free_ char *dir = container_dir(h->data_dir, h->name), *path = NULL;
    if (!dir || asprintf(&path, "%s/users", dir) < 0)
        return -ENOMEM;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
        return negative_errno();
    if (flock(fd, op | LOCK_NB) < 0) {
        int r = negative_errno();
        close(fd);
        return r;
    }
    *ret_fd = fd;
    return 0;
}

/* A joining hold stays until its caller is done with the container (the socket's end). */
static void wait_released(int fd)
{
    char buf[64];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) != 0)
        if (n < 0 && errno != EINTR)
            break;
}

/* --join of a held container: its holder's line again, marked as joined; then, as a user of
 * the container (users_lock), until the caller closes the socket. 0 when written. */
static int join_held(const struct hold_ctx *h, const struct container *c)
{
    _cleanup_close_ int users = -1;
    if (users_lock(h, LOCK_SH, &users) < 0)
        return cli_fail("container '%s' is just starting; try again", h->name);
    _cleanup_free_ char *dir = container_dir(h->data_dir, h->name), *path = NULL, *text = NULL;
    size_t len;
    json_t *o = NULL;
    int r = -ENOMEM;
    if (dir && asprintf(&path, "%s/" HOLD_FILE, dir) >= 0) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        r = fd < 0 ? negative_errno() : fd_read_all(fd, 1 << 20, &text, &len);
    }
    json_int_t pid = 0;
    if (r >= 0 && (!(o = json_loadb(text, len, 0, NULL)) ||
                   json_unpack(o, "{s:I}", "pid", &pid) < 0 || pid != c->pid))
        r = -ESTALE;
    char *line = NULL;
    if (r >= 0 && (json_object_set_new(o, "joined", json_true()) < 0 ||
                   !(line = json_dumps(o, JSON_COMPACT))))
        r = -ENOMEM;
    json_decref(o);
    if (r >= 0 && ((r = fd_write_all(h->fd, line, strlen(line))) >= 0))
        r = fd_write_all(h->fd, "\n", 1);
    free(line);
    if (r == -ENOENT || r == -ESTALE)
        return cli_fail("container '%s' runs (pid %d) but is not held for joining (started by "
                        "`capsule start`?), or is just starting; try again",
                        h->name, (int)c->pid);
    if (r < 0)
        return cli_fail("container '%s': %s", h->name, strerror(-r));
    wait_released(h->fd);
    return 0;
}

/* Before a new start of a kept container: no step that joined its last run is still in it
 * (two overlays on one writable layer are undefined). */
static int no_users(const struct hold_ctx *h, struct errmsg *e)
{
    _cleanup_close_ int fd = -1;
    int r = users_lock(h, LOCK_EX, &fd);
    if (r == -EWOULDBLOCK)
        return errmsg_set(e, -EBUSY,
                          "container '%s' is still used by a step that joined it; start it again "
                          "once that step has ended",
                          h->name);
    return r < 0 ? errmsg_set(e, r, "container '%s': users lock: %s", h->name, strerror(-r)) : 0;
}

static void drop_image(struct container *c)
{
    free(c->image);
    free(c->config_digest);
    strv_free(c->layers);
    strv_free(c->layer_paths);
    c->image = c->config_digest = NULL;
    c->layers = c->layer_paths = NULL;
}

/* An existing container for this hold: its image, with this hold's flags. */
static int take_record(struct container *c, const struct container *rec)
{
    struct image_record img = {
        .name = rec->image,
        .config_digest = rec->config_digest,
        .layers = rec->layers,
        .layer_paths = rec->layer_paths,
    };
    return run_take_image(c, &img);
}

/* Finds or creates the named container and locks it. Returns 0 (locked: *ret_lock), 1 when it
 * was held already and --join wrote its line, or a CLI failure (printed) as a negative number. */
static int claim_named(struct cli_ctx *ctx, struct run_opts *o, const char *image,
                       struct hold_ctx *h, int *ret_lock)
{
    struct errmsg e = {{0}};
    const char *data = h->data_dir;
    for (int attempt = 0; attempt < 2; attempt++) {
        struct container rec = {0};
        int r = container_load(data, h->name, &rec, &e);
        if (r == 0) {
            if (o->create_only)
                r = errmsg_set(&e, -EEXIST, "container '%s' already exists", h->name);
            else if (!rec.running && o->join_only)
                r = errmsg_set(&e, -ESRCH, "container '%s' is not running", h->name);
            else if (rec.running && o->join)
                r = join_held(h, &rec) == 0 ? 1 : -1;
            else if ((r = container_lock(data, h->name, ret_lock, &e)) >= 0 &&
                     (r = no_users(h, &e)) >= 0 && take_record(&o->c, &rec) < 0)
                r = errmsg_set(&e, -ENOMEM, "out of memory");
            container_done(&rec);
            if (r == 1 || r == -1)
                return r == 1 ? 1 : -1;
            return r < 0 ? -cli_fail("%s", e.text) : 0;
        }
        if (r != -ENOENT)
            return -cli_fail("%s", e.text);
        if (o->join_only)
            return -cli_fail("container '%s' is not running", h->name);
        if (!image)
            return -cli_fail("no container '%s' and no image to create it from", h->name);
        struct image_record img = {0};
        _cleanup_(store_freep) struct store *st = NULL;
        if (cli_open_store(ctx, &st) < 0)
            return -1;
        r = launch_resolve_image(st, image, o->pull, run_pull_with_helper, ctx, &img, &e);
        if (r >= 0 && (r = run_take_image(&o->c, &img)) < 0)
            errmsg_set(&e, r, "out of memory");
        image_record_done(&img);
        if (r < 0)
            return -cli_fail("%s", e.text);
        /* Its own layer always, so that a later hold may make it writable; this hold's
         * --writable decides whether the root is remounted read-only. */
        bool writable = o->c.writable;
        o->c.writable = true;
        o->c.created_at = time(NULL);
        r = container_create(data, &o->c, ret_lock, &e);
        o->c.writable = writable;
        if (r >= 0)
            return 0;
        /* Another hold made it meanwhile: take it as an existing one. */
        if (r != -EEXIST || o->create_only)
            return -cli_fail("%s", e.text);
        drop_image(&o->c);
    }
    return -cli_fail("container '%s' keeps changing; try again", h->name);
}

/* The container's upper and work directories: a named container's own layer. */
static int named_layer(const char *data_dir, const char *name, char **ret_upper, char **ret_work)
{
    _cleanup_free_ char *dir = container_dir(data_dir, name);
    if (!dir || asprintf(ret_upper, "%s/upper", dir) < 0)
        return -ENOMEM;
    if (asprintf(ret_work, "%s/work", dir) < 0) {
        free(*ret_upper);
        *ret_upper = NULL;
        return -ENOMEM;
    }
    return 0;
}

static int hold_container(struct cli_ctx *ctx, struct run_opts *o, const char *image,
                          struct hold_ctx *h)
{
    struct errmsg e = {{0}};
    _cleanup_close_ int lock_fd = -1;
    _cleanup_free_ char *upper = NULL, *work = NULL;
    _cleanup_(store_freep) struct store *st = NULL;
    if (h->name) {
        int r = containers_dir_ensure(h->data_dir, &e);
        if (r < 0)
            return cli_fail("%s", e.text), LAUNCH_EXIT_FAILED;
        containers_sweep(h->data_dir);
        if ((r = claim_named(ctx, o, image, h, &lock_fd)) != 0)
            return r > 0 ? 0 : LAUNCH_EXIT_FAILED;
        if (named_layer(h->data_dir, h->name, &upper, &work) < 0)
            return cli_fail("out of memory"), LAUNCH_EXIT_FAILED;
    }
    if (cli_open_store(ctx, &st) < 0)
        return LAUNCH_EXIT_FAILED;
    if (!h->name) {
        struct image_record img = {0};
        int r = launch_resolve_image(st, image, o->pull, run_pull_with_helper, ctx, &img, &e);
        if (r >= 0 && run_take_image(&o->c, &img) < 0)
            r = errmsg_set(&e, -ENOMEM, "out of memory");
        image_record_done(&img);
        if (r < 0)
            return cli_fail("%s", e.text), LAUNCH_EXIT_FAILED;
    }
    h->image = o->c.image;
    struct launch_request req = {
        .c = &o->c,
        .config = &ctx->config,
        .host_env = environ,
        .upper_dir = upper,
        .work_dir = work,
        .hold_fd = h->fd,
        .on_held = on_held,
        .userdata = h,
    };
    struct entrypoint_ctx x = {.h = h, .ready_r = -1, .ready_w = -1};
    _cleanup_close_ int output = -1;
    int keep[2][2];
    if (o->run_entrypoint) {
        if (prepare_entrypoint(o, &x, &output) < 0) {
            closep(&x.ready_r);
            closep(&x.ready_w);
            return LAUNCH_EXIT_FAILED;
        }
        keep[0][0] = h->fd, keep[0][1] = 3;
        keep[1][0] = x.ready_w, keep[1][1] = 4;
        req.hold_fd = -1;
        req.keep_fds = keep;
        req.n_keep_fds = 2;
        req.output_fd = &output;
        req.on_started = entrypoint_started;
        req.userdata = &x;
    }
    int code;
    int r = launch_container(st, &req, &code, &e);
    closep(&x.ready_r);
    closep(&x.ready_w);
    if (h->name) {
        _cleanup_free_ char *dir = container_dir(h->data_dir, h->name), *path = NULL;
        if (dir && asprintf(&path, "%s/" HOLD_FILE, dir) >= 0)
            (void)unlink(path);
    }
    /* A failure that entrypoint_started said itself needs no second line. */
    if (r < 0 && !(o->run_entrypoint && strstr(e.text, "container start hook")))
        return cli_fail("%s", e.text), code;
    return r < 0 ? code : 0;
}

int cmd_hold(int argc, char **argv, struct cli_ctx *ctx)
{
    const struct cli_command *cmd = cli_command_find("hold");
    struct run_opts o;
    int rc = LAUNCH_EXIT_FAILED;
    int i = run_parse_options(argc, argv, cmd, ctx, &o);
    if (i <= 0) {
        rc = -i;
        goto out;
    }
    if (o.hold_fd < 0) {
        rc = cli_usage(cmd, "--fd is required");
        goto out;
    }
    if ((o.create_only || o.join) && !o.c.name) {
        rc = cli_usage(cmd, "--create-only, --join and --join-only go with --name");
        goto out;
    }
    if (i < argc && !(o.c.args = strv_copy(argv + i + 1))) {
        rc = cli_fail("out of memory");
        goto out;
    }
    /* Not a child's stdin or stdout: the line would go astray. */
    (void)fcntl(o.hold_fd, F_SETFD, FD_CLOEXEC);
    /* --data-dir is this hold's data_dir throughout (launch protects it like the config's). */
    if (o.data_dir) {
        free(ctx->config.data_dir);
        ctx->config.data_dir = TAKE_PTR(o.data_dir);
    }
    struct hold_ctx h = {
        .fd = o.hold_fd,
        .data_dir = ctx->config.data_dir,
        .name = o.c.name,
        .remap_root = o.c.remap_root,
    };
    rc = hold_container(ctx, &o, i < argc ? argv[i] : NULL, &h);
out:
    run_opts_done(&o);
    return rc;
}
