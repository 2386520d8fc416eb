#include "capsule/launch.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "capsule/image/capsule-limits.h"
#include "capsule/gpu/gpu-inject.h"
#include "lib/macro.h"
#include "capsule/image/manifest.h"
#include "capsule/image/ref.h"
#include "lib/names.h"
#include "capsule/runtime/runtime.h"
#include "capsule/image/spec.h"
#include "lib/strv.h"
#include "capsule/runtime/tty.h"

/* What one launch holds until the container exits. */
struct launch_state {
    char **layer_dirs;
    int *lock_fds; /* NULL for a node cache image */
    size_t n_layers;
    bool node; /* the layers are the node cache's: fuse-overlayfs mounts them */
    struct image_config img;
    struct gpu_inject gpu;
    struct spec_result spec;
    struct mount_entry *mounts;
    size_t n_mounts;
    char **protect;       /* canonical cache, data and config directories, for run_spec.protect */
    size_t n_user_mounts; /* mounts[0..n): the config's and the user's (the GPU's follow) */
};

static void launch_state_done(struct launch_state *s)
{
    for (size_t i = 0; s->lock_fds && i < s->n_layers; i++)
        closep(&s->lock_fds[i]);
    free(s->lock_fds);
    strv_free(s->layer_dirs);
    image_config_done(&s->img);
    gpu_inject_done(&s->gpu);
    spec_result_done(&s->spec);
    for (size_t i = 0; i < s->n_mounts; i++)
        mount_entry_done(&s->mounts[i]);
    free(s->mounts);
    strv_free(s->protect);
}

/* Whether path is dir or lies below it (both canonical). */
static bool path_within(const char *path, const char *dir)
{
    size_t n = strlen(dir);
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/' || n == 1);
}

/* What no container may change: the image cache (every container's layers and the records
 * naming them), the named containers' directory (their settings and writable layers) and the
 * user's capsule settings (which name the cache, and hold credentials). The latter two are made
 * when missing, or a container could plant them. A --mount (or config mount) of something in
 * them is made read-only. */
static int protect_capsule_state(struct store *st, const struct launch_request *req,
                                 struct launch_state *s, struct errmsg *e)
{
    const struct capsule_config *cfg = req->config;
    const char *dirs[] = {store_root(st), cfg->data_dir, cfg->user_config_dir};
    if (!(s->protect = strv_new()))
        return errmsg_set(e, -ENOMEM, "out of memory");
    int r = cfg->data_dir ? containers_dir_ensure(cfg->data_dir, e) : 0;
    if (r >= 0 && cfg->user_config_dir)
        r = containers_mkdir_p(cfg->user_config_dir, e);
    if (r < 0)
        return r;
    for (size_t i = 0; i < ELEMENTSOF(dirs); i++) {
        char real[PATH_MAX];
        if (dirs[i] && realpath(dirs[i], real) && strv_push(&s->protect, real) < 0)
            return errmsg_set(e, -ENOMEM, "out of memory");
    }
    for (size_t i = 0; i < s->n_user_mounts; i++) {
        char real[PATH_MAX];
        if ((s->mounts[i].flags & MOUNT_TMPFS) || !realpath(s->mounts[i].source, real))
            continue;
        for (size_t k = 0; s->protect[k]; k++)
            if (path_within(real, s->protect[k]))
                s->mounts[i].flags |= MOUNT_RO;
    }
    return 0;
}

/* A node cache image's layers: the service's directories as its pull answered them. They are
 * not this user's store's to lock; one that is gone was collected (capsule gc --node). */
static int node_layers(const struct container *c, struct launch_state *s, struct errmsg *e)
{
    size_t n = strv_length(c->layers);
    s->lock_fds = malloc((n ? n : 1) * sizeof(int));
    if (!s->lock_fds || !(s->layer_dirs = strv_copy(c->layer_paths)))
        return errmsg_set(e, -ENOMEM, "out of memory");
    s->node = true;
    for (size_t i = 0; i < n; i++) {
        /* Held until the container has ended: the node's gc skips it meanwhile. */
        int r = store_node_layer_hold(c->layer_paths[i], &s->lock_fds[i]);
        if (r == -ENOENT)
            return errmsg_set(e, r,
                              "layer %s of image '%s' is no longer in the node cache; pull the "
                              "image again",
                              c->layers[i], c->image);
        if (r < 0)
            return errmsg_set(e, r, "node cache layer %s: %s", c->layer_paths[i], strerror(-r));
        s->n_layers = i + 1;
    }
    return 0;
}

/* Locks each layer shared and collects its directory. A layer missing from the cache (removed
 * by hand, or a damaged cache) is named, with the way out. */
static int hold_layers(struct store *st, const struct container *c, struct launch_state *s,
                       struct errmsg *e)
{
    if (c->layer_paths)
        return node_layers(c, s, e);
    size_t n = strv_length(c->layers);
    s->lock_fds = malloc((n ? n : 1) * sizeof(int));
    s->layer_dirs = strv_new();
    if (!s->lock_fds || !s->layer_dirs)
        return errmsg_set(e, -ENOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char *dir = NULL;
        int r = store_layer_lock(st, c->layers[i], false, true, &s->lock_fds[i], e);
        if (r < 0)
            return r;
        s->n_layers = i + 1;
        if ((r = store_layer_path(st, c->layers[i], &dir)) < 0 ||
            (r = strv_consume(&s->layer_dirs, dir)) < 0)
            return errmsg_set(e, r, "out of memory");
        if (!store_has_layer(st, c->layers[i]))
            return errmsg_set(e, -ENOENT,
                              "layer %s of image '%s' is missing from the cache; pull the image "
                              "again",
                              c->layers[i], c->image);
    }
    return 0;
}

static int read_image_config(struct store *st, const struct container *c, struct image_config *ret,
                             struct errmsg *e)
{
    _cleanup_free_ char *data = NULL;
    size_t len;
    int r = store_blob_read(st, c->config_digest, CAPSULE_CONFIG_MAX, &data, &len, e);
    if (r == -ENOENT)
        return errmsg_set(e, r, "the config of image '%s' is missing from the cache; pull it again",
                          c->image);
    if (r < 0)
        return r;
    return image_config_parse(data, len, ret, e);
}

static int add_mount(struct launch_state *s, const struct mount_entry *m)
{
    struct mount_entry *n = realloc(s->mounts, (s->n_mounts + 1) * sizeof(*n));
    if (!n)
        return -ENOMEM;
    s->mounts = n;
    char *src = strdup(m->source), *dst = strdup(m->target);
    if (!src || !dst) {
        free(src);
        free(dst);
        return -ENOMEM;
    }
    s->mounts[s->n_mounts++] = (struct mount_entry){src, dst, m->flags};
    return 0;
}

static int add_mount_strings(struct launch_state *s, char *const *list, struct errmsg *e)
{
    for (size_t i = 0; list && list[i]; i++) {
        struct mount_entry m = {0};
        int r = capsule_parse_mount(list[i], &m, e);
        if (r >= 0)
            r = add_mount(s, &m);
        mount_entry_done(&m);
        if (r < 0)
            return r;
    }
    return 0;
}

/* Default mounts first, then the user's, then the GPU's: later mounts cover earlier ones, and
 * the driver's files must not be hidden by a user mount of the same directory. */
static int collect_mounts(struct launch_state *s, const struct launch_request *req,
                          struct errmsg *e)
{
    int r = add_mount_strings(s, req->config->mounts, e);
    if (r >= 0)
        r = add_mount_strings(s, req->c->mounts, e);
    s->n_user_mounts = s->n_mounts;
    for (size_t i = 0; r >= 0 && i < s->gpu.n_mounts; i++)
        r = add_mount(s, &s->gpu.mounts[i]);
    return r;
}

static int plan_gpus(struct launch_state *s, const struct launch_request *req, struct errmsg *e)
{
    const struct container *c = req->c;
    struct gpu_inject_opts o = {
        .driver_root = c->driver_root ? c->driver_root : req->config->driver_root,
        .gpus = c->gpus,
        .host_env = req->host_env,
        .image_env = s->img.env,
        .image_layers = s->layer_dirs,
        .n_image_layers = s->n_layers,
    };
    return gpu_inject_plan(&o, &s->gpu, e);
}

static int build_spec(struct launch_state *s, const struct launch_request *req, struct errmsg *e)
{
    const struct container *c = req->c;
    const char *user = getenv("USER");
    struct spec_flags f = {
        .entrypoint = c->entrypoint,
        .args = c->args,
        .env = c->user_env,
        .runtime_env = s->gpu.env,
        .workdir = c->workdir,
        .name = c->name,
        .remap_root = c->remap_root,
        .no_home = c->no_home,
        .user_name = user,
        .home = getenv("HOME"),
        .no_command = req->hold_fd > 2,
    };
    return spec_build(&s->img, &f, req->host_env, &s->spec, e);
}

int launch_pull_policy_parse(const char *s, enum launch_pull_policy *ret)
{
    static const char *const names[] = {
        [LAUNCH_PULL_MISSING] = "missing",
        [LAUNCH_PULL_NEVER] = "never",
        [LAUNCH_PULL_ALWAYS] = "always",
    };
    for (size_t i = 0; i < ELEMENTSOF(names); i++)
        if (strcmp(s, names[i]) == 0) {
            *ret = (enum launch_pull_policy)i;
            return 0;
        }
    return -EINVAL;
}

bool launch_is_image_file(const char *arg)
{
    return arg[0] == '/' || arg[0] == '.';
}

int launch_file_image_name(const char *path, char **ret)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    const char *dot = strchr(base + (base[0] == '.'), '.');
    size_t n = dot ? (size_t)(dot - base) : strlen(base);
    _cleanup_free_ char *clean = strndup(base, n);
    if (!clean)
        return -ENOMEM;
    for (char *c = clean; *c; c++) {
        *c = (char)tolower((unsigned char)*c);
        if (!isalnum((unsigned char)*c) && *c != '_' && *c != '-')
            *c = '-';
    }
    /* A repository component starts and ends with an alphanumeric. */
    char *start = clean;
    while (*start == '-' || *start == '_')
        start++;
    size_t len = strlen(start);
    while (len && (start[len - 1] == '-' || start[len - 1] == '_'))
        start[--len] = '\0';
    if (!len)
        return -EINVAL;
    char abs[PATH_MAX];
    const char *key = realpath(path, abs) ? abs : path;
    uint32_t h = 2166136261u; /* FNV-1a */
    for (const char *c = key; *c; c++)
        h = (h ^ (unsigned char)*c) * 16777619u;
    return asprintf(ret, "localhost/file/%s:p%08x", start, (unsigned)h) < 0 ? -ENOMEM : 0;
}

int launch_image_file_check(const char *path, struct errmsg *e)
{
    static const char *const squashfs[] = {".sqsh", ".squashfs", ".sqfs"};
    size_t n = strlen(path);
    for (size_t i = 0; i < ELEMENTSOF(squashfs); i++) {
        size_t k = strlen(squashfs[i]);
        if (n >= k && strcasecmp(path + n - k, squashfs[i]) == 0)
            return errmsg_set(e, -ENOTSUP,
                              "'%s': squashfs images (enroot's) cannot be run; use the image's "
                              "registry name, or an image archive (--container-save, capsule "
                              "save)",
                              path);
    }
    return 0;
}

/* An image file: loaded (again) under its name, then found by it. */
static int resolve_file(struct store *st, const char *path, launch_pull_fn pull, void *userdata,
                        struct image_record *ret, struct errmsg *e)
{
    _cleanup_free_ char *name = NULL;
    int r = launch_image_file_check(path, e);
    if (r < 0)
        return r;
    r = launch_file_image_name(path, &name);
    if (r < 0)
        return errmsg_set(e, r, "image file '%s': %s", path,
                          r == -ENOMEM ? "out of memory" : "no name can be made of it");
    if (pull(userdata, name, path) != 0)
        return errmsg_set(e, -ENOENT, "cannot run '%s': it could not be loaded", path);
    return store_image_load(st, name, ret, e);
}

/* A node cache's image whose layers are gone from it (evicted under max_size, or renamed by a
 * new key): the user's record leads nowhere, and the image must be asked for again. Only when
 * the user named it (as docker run pulls a tag it no longer has): an ID prefix names one image,
 * which a pull of the name might not bring back. */
static bool node_layers_gone(const char *arg, const struct image_record *r)
{
    bool gone = false;
    for (size_t i = 0; !gone && r->layer_paths && r->layer_paths[i]; i++)
        gone = access(r->layer_paths[i], F_OK) < 0 && errno == ENOENT;
    if (!gone)
        return false;
    struct image_ref ref = {0};
    struct errmsg e;
    _cleanup_free_ char *name = NULL;
    bool named = image_ref_parse(arg, &ref, &e) >= 0 && image_ref_format(&ref, &name) >= 0 &&
                 strcmp(name, r->name) == 0;
    image_ref_done(&ref);
    return named;
}

static int pull_and_load(struct store *st, const char *name, launch_pull_fn pull, void *userdata,
                         struct image_record *ret, struct errmsg *e)
{
    if (pull(userdata, name, NULL) != 0)
        return errmsg_set(e, -ENOENT, "cannot run '%s': the pull failed", name);
    return store_image_load(st, name, ret, e);
}

int launch_resolve_image(struct store *st, const char *arg, enum launch_pull_policy policy,
                         launch_pull_fn pull, void *userdata, struct image_record *ret,
                         struct errmsg *e)
{
    if (launch_is_image_file(arg))
        return resolve_file(st, arg, pull, userdata, ret, e);
    int r = policy == LAUNCH_PULL_ALWAYS ? -ENOENT : store_image_find(st, arg, ret, e);
    if (r >= 0 && policy == LAUNCH_PULL_MISSING && node_layers_gone(arg, ret)) {
        _cleanup_free_ char *again = strdup(ret->name);
        image_record_done(ret);
        return again ? pull_and_load(st, again, pull, userdata, ret, e)
                     : errmsg_set(e, -ENOMEM, "out of memory");
    }
    if (r != -ENOENT || policy == LAUNCH_PULL_NEVER)
        return r < 0 ? r : 0;
    /* What is pulled is a name: an ID prefix of nothing cached is taken as Docker Hub's. */
    struct image_ref ref = {0};
    _cleanup_free_ char *name = NULL;
    if ((r = image_ref_parse(arg, &ref, e)) < 0)
        return r;
    r = image_ref_format(&ref, &name);
    image_ref_done(&ref);
    if (r < 0)
        return errmsg_set(e, r, "out of memory");
    return pull_and_load(st, name, pull, userdata, ret, e);
}

int launch_exit_code(int r, const struct errmsg *e)
{
    if (strncmp(e->text, "exec ", 5) != 0)
        return LAUNCH_EXIT_FAILED;
    if (r == -ENOENT)
        return LAUNCH_EXIT_NOT_FOUND;
    if (r == -EACCES || r == -ENOEXEC || r == -EISDIR)
        return LAUNCH_EXIT_NOT_EXECUTABLE;
    return LAUNCH_EXIT_FAILED;
}

/* Where a copy of the image goes, made only when one is (rootfs = copy, or auto when overlayfs is
 * refused): in the cache, under a lock, so that gc removes what a killed run leaves there. */
struct scratch {
    struct store *st;
    char *dir;
    int lock;
};

static int make_scratch(void *userdata, const char **ret_dir, struct errmsg *e)
{
    struct scratch *sc = userdata;
    int r = store_scratch_new(sc->st, &sc->dir, &sc->lock, e);
    /* A cache this user may only read (a node's, kept by an admin): $TMPDIR, as before. */
    if (r == -EACCES || r == -EROFS || r == -EPERM) {
        *ret_dir = NULL;
        return 0;
    }
    *ret_dir = sc->dir;
    return r;
}

/* on_started of a held container: on_held with what a joining process needs. */
struct held {
    const struct launch_request *req;
    const struct launch_state *s;
};

static int on_held(pid_t pid, void *userdata)
{
    const struct held *h = userdata;
    const struct spec_result *sp = &h->s->spec;
    return h->req->on_held(pid, sp->argv, sp->env, sp->cwd, h->req->userdata);
}

const char *launch_fuse_program(const struct capsule_config *config, char *buf, size_t size)
{
    if (config->fuse_overlayfs)
        return config->fuse_overlayfs;
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        size_t n = strcspn(p, ":");
        if (n > 0 && p[0] == '/' &&
            snprintf(buf, size, "%.*s/fuse-overlayfs", (int)n, p) < (int)size &&
            access(buf, X_OK) == 0)
            return buf;
        p += n + (p[n] == ':');
    }
    return "fuse-overlayfs";
}

static int run(struct store *st, struct launch_state *s, const struct launch_request *req,
               int *ret_exit, struct errmsg *e)
{
    char fuse[PATH_MAX];
    const struct container *c = req->c;
    struct scratch scratch = {.st = st, .lock = -1};
    bool hold = req->hold_fd > 2;
    struct held held = {req, s};
    /* A named container gets a cgroup that gpumon reads its name from (names are at most 64
     * characters, container_name_check). */
    char scope[128] = "";
    if (c->name && !hold)
        snprintf(scope, sizeof(scope), NAMES_SCOPE_CAPSULE "%s" NAMES_SCOPE_SUFFIX, c->name);
    struct run_spec spec = {
        .layers = s->layer_dirs,
        .n_layers = s->n_layers,
        .upper_dir = req->upper_dir,
        .work_dir = req->work_dir,
        .writable = c->writable,
        .rootfs_mode = req->config->rootfs_mode,
        .remap_root = c->remap_root,
        .pid_ns = c->pid_ns,
        .user_name = getenv("USER"),
        .home = getenv("HOME"),
        .no_home = c->no_home,
        .argv = s->spec.argv,
        .hold = hold,
        .hold_fd = req->hold_fd,
        .keep_fds = req->keep_fds,
        .n_keep_fds = req->n_keep_fds,
        .output_fd = req->output_fd,
        .env = s->spec.env,
        .cwd = s->spec.cwd,
        .tty = tty_wanted(req->tty_force),
        .tty_all = req->tty_force,
        .mounts = s->mounts,
        .n_mounts = s->n_mounts,
        .links = s->gpu.links,
        .n_links = s->gpu.n_links,
        .run_ldconfig = s->gpu.n_gpus > 0,
        .ld_library_dir = s->gpu.lib_dir,
        .make_scratch = make_scratch,
        .scratch_userdata = &scratch,
        .protect = s->protect,
        .on_started = hold ? on_held : req->on_started,
        .userdata = hold ? (void *)&held : req->userdata,
        .cgroup_scope = scope[0] ? scope : NULL,
        .fuse_overlayfs = s->node ? launch_fuse_program(req->config, fuse, sizeof(fuse)) : NULL,
    };
    int r = runtime_run(&spec, ret_exit, e);
    if (scratch.dir)
        store_scratch_remove(st, scratch.dir, scratch.lock);
    free(scratch.dir);
    return r;
}

int launch_container(struct store *st, const struct launch_request *req, int *ret_exit,
                     struct errmsg *e)
{
    struct launch_state s = {0};
    int r;
    if ((r = hold_layers(st, req->c, &s, e)) < 0 ||
        (r = read_image_config(st, req->c, &s.img, e)) < 0 || (r = plan_gpus(&s, req, e)) < 0 ||
        (r = build_spec(&s, req, e)) < 0 || (r = collect_mounts(&s, req, e)) < 0 ||
        (r = protect_capsule_state(st, req, &s, e)) < 0 || (r = run(st, &s, req, ret_exit, e)) < 0)
        *ret_exit = launch_exit_code(r, e);
    launch_state_done(&s);
    return r;
}
