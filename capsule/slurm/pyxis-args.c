#include "capsule/slurm/pyxis-args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/containers.h"
#include "capsule/image/ref.h"
#include "capsule/launch.h"
#include "lib/macro.h"
#include "lib/strv.h"

const struct pyxis_opt_info pyxis_opts[PYXIS_OPT_COUNT] = {
    [PYXIS_OPT_IMAGE] = {"container-image", "[USER@][REGISTRY#]IMAGE[:TAG]",
                         "[capsule] the image to run the step's tasks in"},
    [PYXIS_OPT_MOUNTS] = {"container-mounts", "SRC[:DST[:FLAGS]][,...]",
                          "[capsule] bind mounts (FLAGS: ro, rw, '+'-joined; SRC tmpfs: a tmpfs)"},
    [PYXIS_OPT_WORKDIR] = {"container-workdir", "PATH",
                           "[capsule] working directory inside the container"},
    [PYXIS_OPT_NAME] = {"container-name", "NAME[:auto|create|exec|no_exec]",
                        "[capsule] name the container, to use it again in later steps"},
    [PYXIS_OPT_SAVE] = {"container-save", "PATH",
                        "[capsule] save the container's files as an image archive when the step "
                        "ends"},
    [PYXIS_OPT_MOUNT_HOME] = {"container-mount-home", NULL,
                              "[capsule] bind-mount the user's home directory (the default)"},
    [PYXIS_OPT_NO_MOUNT_HOME] = {"no-container-mount-home", NULL,
                                 "[capsule] do not bind-mount the user's home directory"},
    [PYXIS_OPT_REMAP_ROOT] = {"container-remap-root", NULL,
                              "[capsule] be root inside the container (yourself outside)"},
    [PYXIS_OPT_NO_REMAP_ROOT] = {"no-container-remap-root", NULL,
                                 "[capsule] be yourself inside the container"},
    [PYXIS_OPT_ENTRYPOINT] = {"container-entrypoint", NULL, "[capsule] run the image's entrypoint"},
    [PYXIS_OPT_NO_ENTRYPOINT] = {"no-container-entrypoint", NULL,
                                 "[capsule] do not run the image's entrypoint"},
    [PYXIS_OPT_ENTRYPOINT_LOG] = {"container-entrypoint-log", NULL,
                                  "[capsule] print the entrypoint's output"},
    [PYXIS_OPT_WRITABLE] = {"container-writable", NULL,
                            "[capsule] make the container's filesystem writable"},
    [PYXIS_OPT_READONLY] = {"container-readonly", NULL,
                            "[capsule] make the container's filesystem read-only"},
    [PYXIS_OPT_ENV] = {"container-env", "NAME[,NAME...]",
                       "[capsule] variables whose job values win over the image's"},
};

void pyxis_args_init(struct pyxis_args *a)
{
    *a = (struct pyxis_args){
        .mount_home = -1, .remap_root = -1, .entrypoint = -1, .entrypoint_log = -1, .writable = -1};
}

static void mount_done(struct pyxis_mount *m)
{
    free(m->src);
    free(m->dst);
    free(m->tmpfs_options);
}

void pyxis_args_done(struct pyxis_args *a)
{
    free(a->image);
    free(a->workdir);
    free(a->name);
    free(a->save);
    for (size_t i = 0; i < a->n_mounts; i++)
        mount_done(&a->mounts[i]);
    free(a->mounts);
    strv_free(a->env_names);
    pyxis_args_init(a);
}

static const char *opt_name(enum pyxis_opt o)
{
    return pyxis_opts[o].name;
}

/* A single-valued option: the same value again is fine (srun, then slurmstepd). */
static int set_once(char **dst, enum pyxis_opt o, const char *v, struct errmsg *e)
{
    if (*dst)
        return strcmp(*dst, v) == 0
                   ? 0
                   : errmsg_set(e, -EINVAL, "--%s specified multiple times", opt_name(o));
    *dst = strdup(v);
    return *dst ? 0 : -ENOMEM;
}

/* One of a pair of flags: its other form given before is an error. */
static int set_flag(int *dst, int value, enum pyxis_opt yes, enum pyxis_opt no, struct errmsg *e)
{
    if (*dst >= 0 && *dst != value)
        return errmsg_set(e, -EINVAL, "both --%s and --%s were specified", opt_name(yes),
                          opt_name(no));
    *dst = value;
    return 0;
}

static int check_image(const char *v, struct errmsg *e)
{
    if (strncmp(v, "dockerd://", 10) == 0 || strncmp(v, "podman://", 9) == 0)
        return errmsg_set(e, -EINVAL,
                          "--container-image '%s': images from a local Docker or Podman are "
                          "not supported; push it to a registry",
                          v);
    /* An image file (a --container-save archive): found when the step starts. */
    if (v[0] == '/' || v[0] == '.')
        return launch_image_file_check(v, e) < 0 ? -EINVAL : 0;
    struct image_ref ref = {0};
    struct errmsg why = {{0}};
    int r = image_ref_parse(v, &ref, &why);
    image_ref_done(&ref);
    if (r == -ENOMEM)
        return r;
    return r < 0 ? errmsg_set(e, r, "--container-image: %s", why.text) : 0;
}

static int set_name(struct pyxis_args *a, const char *v, struct errmsg *e)
{
    static const char *const flags[] = {
        [PYXIS_NAME_AUTO] = "auto",
        [PYXIS_NAME_CREATE] = "create",
        [PYXIS_NAME_EXEC] = "exec",
        [PYXIS_NAME_NO_EXEC] = "no_exec",
    };
    const char *colon = strchr(v, ':');
    _cleanup_free_ char *name = strndup(v, colon ? (size_t)(colon - v) : strlen(v));
    if (!name)
        return -ENOMEM;
    if (!*name)
        return errmsg_set(e, -EINVAL, "--container-name: empty name");
    enum pyxis_name_flag flag = PYXIS_NAME_AUTO;
    if (colon) {
        size_t i = 0;
        while (i < ELEMENTSOF(flags) && strcmp(colon + 1, flags[i]) != 0)
            i++;
        if (i == ELEMENTSOF(flags))
            return errmsg_set(e, -EINVAL,
                              "--container-name: flag must be \"auto\", \"create\", \"exec\" or "
                              "\"no_exec\"");
        flag = (enum pyxis_name_flag)i;
    }
    struct errmsg why = {{0}};
    if (container_name_check(name, &why) < 0)
        return errmsg_set(e, -EINVAL, "--container-name: %s", why.text);
    if (a->name && (strcmp(a->name, name) != 0 || a->name_flag != flag))
        return errmsg_set(e, -EINVAL, "--container-name specified multiple times");
    a->name_flag = flag;
    if (!a->name)
        a->name = TAKE_PTR(name);
    return 0;
}

static bool is_path(const char *s)
{
    return s[0] == '/' || s[0] == '.';
}

/* The flags of one mount ("ro+rprivate"), into m. */
static int mount_flags(struct pyxis_mount *m, const char *entry, char *flags, struct errmsg *e)
{
    static const char *const accepted[] = {"rw", "rbind", "private", "rprivate", NULL};
    _cleanup_strv_free_ char **opts = strv_new();
    if (!opts)
        return -ENOMEM;
    for (char *save = NULL, *f = strtok_r(flags, "+", &save); f; f = strtok_r(NULL, "+", &save)) {
        if (strcmp(f, "ro") == 0)
            m->ro = true;
        else if (!m->src) {
            if (strv_push(&opts, f) < 0)
                return -ENOMEM;
        } else if (!strv_contains((char *const *)accepted, f))
            return errmsg_set(e, -EINVAL,
                              "--container-mounts: %s: mount flag '%s' is not supported (ro, "
                              "rw, rbind, private, rprivate are)",
                              entry, f);
    }
    if (!m->src && opts[0] && !(m->tmpfs_options = strv_join(opts, ",")))
        return -ENOMEM;
    return 0;
}

static int parse_mount(const char *entry, struct pyxis_mount *m, struct errmsg *e)
{
    _cleanup_free_ char *copy = strdup(entry);
    if (!copy)
        return -ENOMEM;
    char *src = copy, *dst = NULL, *flags = NULL;
    if ((dst = strchr(src, ':'))) {
        *dst++ = '\0';
        if ((flags = strchr(dst, ':')))
            *flags++ = '\0';
    }
    if (!*src || (dst && !*dst))
        return errmsg_set(e, -EINVAL, "--container-mounts: invalid format: %s", entry);
    bool tmpfs = strcmp(src, "tmpfs") == 0;
    if (!tmpfs && !is_path(src))
        return errmsg_set(e, -EINVAL,
                          "--container-mounts: %s: mount source must be a relative path, an "
                          "absolute path or \"tmpfs\"",
                          entry);
    if (tmpfs && !dst)
        return errmsg_set(e, -EINVAL, "--container-mounts: %s: a tmpfs needs a target", entry);
    if (dst && !is_path(dst))
        return errmsg_set(e, -EINVAL,
                          "--container-mounts: %s: mount target must be a relative path or an "
                          "absolute path",
                          entry);
    m->src = tmpfs ? NULL : strdup(src);
    m->dst = strdup(dst ? dst : src);
    if ((!tmpfs && !m->src) || !m->dst)
        return -ENOMEM;
    return flags && *flags ? mount_flags(m, entry, flags, e) : 0;
}

static bool same_mount(const struct pyxis_mount *a, const struct pyxis_mount *b)
{
    return !a->src == !b->src && (!a->src || strcmp(a->src, b->src) == 0) &&
           strcmp(a->dst, b->dst) == 0 && a->ro == b->ro &&
           !a->tmpfs_options == !b->tmpfs_options &&
           (!a->tmpfs_options || strcmp(a->tmpfs_options, b->tmpfs_options) == 0);
}

static int add_mounts(struct pyxis_args *a, const char *v, struct errmsg *e)
{
    _cleanup_free_ char *copy = strdup(v);
    if (!copy)
        return -ENOMEM;
    char *rest = copy, *entry;
    while ((entry = strsep(&rest, ","))) {
        struct pyxis_mount m = {0};
        int r = parse_mount(entry, &m, e);
        bool dup = false;
        for (size_t i = 0; r >= 0 && i < a->n_mounts && !dup; i++)
            dup = same_mount(&a->mounts[i], &m);
        struct pyxis_mount *n = NULL;
        if (r >= 0 && !dup && !(n = realloc(a->mounts, (a->n_mounts + 1) * sizeof(*n))))
            r = -ENOMEM;
        if (r < 0 || dup) {
            mount_done(&m);
            if (r < 0)
                return r;
            continue;
        }
        a->mounts = n;
        a->mounts[a->n_mounts++] = m;
    }
    return 0;
}

static int add_env_names(struct pyxis_args *a, const char *v, struct errmsg *e)
{
    _cleanup_free_ char *copy = strdup(v);
    if (!copy || (!a->env_names && !(a->env_names = strv_new())))
        return -ENOMEM;
    char *rest = copy, *name;
    while ((name = strsep(&rest, ","))) {
        if (!*name)
            return errmsg_set(e, -EINVAL, "--container-env: invalid format: %s", v);
        if (!strv_contains(a->env_names, name) && strv_push(&a->env_names, name) < 0)
            return -ENOMEM;
    }
    return 0;
}

int pyxis_args_set(struct pyxis_args *a, enum pyxis_opt opt, const char *v, struct errmsg *e)
{
    if ((unsigned)opt >= PYXIS_OPT_COUNT)
        return errmsg_set(e, -EINVAL, "unknown option %d", (int)opt);
    if (pyxis_opts[opt].arginfo && (!v || !*v))
        return errmsg_set(e, -EINVAL, "--%s: argument required", opt_name(opt));
    switch (opt) {
    case PYXIS_OPT_IMAGE: {
        int r = check_image(v, e);
        return r < 0 ? r : set_once(&a->image, opt, v, e);
    }
    case PYXIS_OPT_MOUNTS:
        return add_mounts(a, v, e);
    case PYXIS_OPT_WORKDIR:
        return set_once(&a->workdir, opt, v, e);
    case PYXIS_OPT_NAME:
        return set_name(a, v, e);
    case PYXIS_OPT_SAVE:
        if (v[strlen(v) - 1] == '/')
            return errmsg_set(e, -EINVAL, "--container-save: target is a directory");
        return set_once(&a->save, opt, v, e);
    case PYXIS_OPT_MOUNT_HOME:
    case PYXIS_OPT_NO_MOUNT_HOME:
        return set_flag(&a->mount_home, opt == PYXIS_OPT_MOUNT_HOME, PYXIS_OPT_MOUNT_HOME,
                        PYXIS_OPT_NO_MOUNT_HOME, e);
    case PYXIS_OPT_REMAP_ROOT:
    case PYXIS_OPT_NO_REMAP_ROOT:
        return set_flag(&a->remap_root, opt == PYXIS_OPT_REMAP_ROOT, PYXIS_OPT_REMAP_ROOT,
                        PYXIS_OPT_NO_REMAP_ROOT, e);
    case PYXIS_OPT_ENTRYPOINT:
    case PYXIS_OPT_NO_ENTRYPOINT:
        return set_flag(&a->entrypoint, opt == PYXIS_OPT_ENTRYPOINT, PYXIS_OPT_ENTRYPOINT,
                        PYXIS_OPT_NO_ENTRYPOINT, e);
    case PYXIS_OPT_ENTRYPOINT_LOG:
        a->entrypoint_log = 1;
        return 0;
    case PYXIS_OPT_WRITABLE:
    case PYXIS_OPT_READONLY:
        return set_flag(&a->writable, opt == PYXIS_OPT_WRITABLE, PYXIS_OPT_WRITABLE,
                        PYXIS_OPT_READONLY, e);
    case PYXIS_OPT_ENV:
        return add_env_names(a, v, e);
    case PYXIS_OPT_COUNT:
        break;
    }
    return -EINVAL;
}

/* Pyxis' booleans: 1/true/yes/y, 0/false/no/n. */
static int parse_bool(const char *s)
{
    static const char *const yes[] = {"1", "true", "yes", "y", NULL};
    static const char *const no[] = {"0", "false", "no", "n", NULL};
    if (strv_contains((char *const *)yes, s))
        return 1;
    if (strv_contains((char *const *)no, s))
        return 0;
    return -1;
}

struct env_default {
    const char *var;
    enum pyxis_opt opt, opt_no; /* opt_no: the flag for a false value (booleans) */
    bool boolean;
};

static const struct env_default env_defaults[] = {
    {"PYXIS_CONTAINER_IMAGE", PYXIS_OPT_IMAGE, PYXIS_OPT_IMAGE, false},
    {"PYXIS_CONTAINER_MOUNTS", PYXIS_OPT_MOUNTS, PYXIS_OPT_MOUNTS, false},
    {"PYXIS_CONTAINER_WORKDIR", PYXIS_OPT_WORKDIR, PYXIS_OPT_WORKDIR, false},
    {"PYXIS_CONTAINER_NAME", PYXIS_OPT_NAME, PYXIS_OPT_NAME, false},
    {"PYXIS_CONTAINER_SAVE", PYXIS_OPT_SAVE, PYXIS_OPT_SAVE, false},
    {"PYXIS_CONTAINER_ENV", PYXIS_OPT_ENV, PYXIS_OPT_ENV, false},
    {"PYXIS_CONTAINER_MOUNT_HOME", PYXIS_OPT_MOUNT_HOME, PYXIS_OPT_NO_MOUNT_HOME, true},
    {"PYXIS_CONTAINER_REMAP_ROOT", PYXIS_OPT_REMAP_ROOT, PYXIS_OPT_NO_REMAP_ROOT, true},
    {"PYXIS_CONTAINER_ENTRYPOINT", PYXIS_OPT_ENTRYPOINT, PYXIS_OPT_NO_ENTRYPOINT, true},
    {"PYXIS_CONTAINER_ENTRYPOINT_LOG", PYXIS_OPT_ENTRYPOINT_LOG, PYXIS_OPT_ENTRYPOINT_LOG, true},
    {"PYXIS_CONTAINER_WRITABLE", PYXIS_OPT_WRITABLE, PYXIS_OPT_READONLY, true},
    {"PYXIS_CONTAINER_READONLY", PYXIS_OPT_READONLY, PYXIS_OPT_WRITABLE, true},
};

/* Whether the option (or its pair) was given. Booleans read their field. */
static bool given(const struct pyxis_args *a, enum pyxis_opt o)
{
    switch (o) {
    case PYXIS_OPT_IMAGE:
        return a->image;
    case PYXIS_OPT_MOUNTS:
        return a->n_mounts > 0;
    case PYXIS_OPT_WORKDIR:
        return a->workdir;
    case PYXIS_OPT_NAME:
        return a->name;
    case PYXIS_OPT_SAVE:
        return a->save;
    case PYXIS_OPT_ENV:
        return a->env_names && a->env_names[0];
    case PYXIS_OPT_MOUNT_HOME:
    case PYXIS_OPT_NO_MOUNT_HOME:
        return a->mount_home >= 0;
    case PYXIS_OPT_REMAP_ROOT:
    case PYXIS_OPT_NO_REMAP_ROOT:
        return a->remap_root >= 0;
    case PYXIS_OPT_ENTRYPOINT:
    case PYXIS_OPT_NO_ENTRYPOINT:
        return a->entrypoint >= 0;
    case PYXIS_OPT_ENTRYPOINT_LOG:
        return a->entrypoint_log >= 0;
    case PYXIS_OPT_WRITABLE:
    case PYXIS_OPT_READONLY:
        return a->writable >= 0;
    case PYXIS_OPT_COUNT:
        break;
    }
    return false;
}

int pyxis_args_apply_env(struct pyxis_args *a, const char *(*get)(void *userdata, const char *name),
                         void *userdata, struct errmsg *e)
{
    /* Pyxis 0.24's namespaces of its own: refused rather than ignored, or the step would share
     * the host's network while its owner asked it not to. */
    if (get(userdata, "PYXIS_CONTAINER_UNSHARE"))
        return errmsg_set(e, -EINVAL,
                          "PYXIS_CONTAINER_UNSHARE: namespaces of the container's own "
                          "(--container-unshare) are not supported");
    for (size_t i = 0; i < ELEMENTSOF(env_defaults); i++) {
        const struct env_default *d = &env_defaults[i];
        const char *v = get(userdata, d->var);
        if (!v || given(a, d->opt))
            continue;
        struct errmsg why = {{0}};
        int r, b = d->boolean ? parse_bool(v) : 0;
        if (b < 0)
            r = errmsg_set(&why, -EINVAL, "'%s' is not one of 1, true, yes, y, 0, false, no, n", v);
        else if (d->opt == PYXIS_OPT_ENTRYPOINT_LOG)
            r = (a->entrypoint_log = b, 0);
        else
            r = pyxis_args_set(a, b || !d->boolean ? d->opt : d->opt_no, d->boolean ? NULL : v,
                               &why);
        if (r == -ENOMEM)
            return r;
        if (r < 0)
            return errmsg_set(e, r, "%s: %s", d->var, why.text);
    }
    return 0;
}

bool pyxis_args_enabled(const struct pyxis_args *a)
{
    return a->image || a->name;
}

void pyxis_args_say_ignored(const struct pyxis_args *a,
                            void (*say)(void *userdata, const char *msg), void *userdata)
{
    static const enum pyxis_opt reported[] = {
        PYXIS_OPT_MOUNTS,     PYXIS_OPT_WORKDIR,    PYXIS_OPT_SAVE,     PYXIS_OPT_MOUNT_HOME,
        PYXIS_OPT_REMAP_ROOT, PYXIS_OPT_ENTRYPOINT, PYXIS_OPT_WRITABLE, PYXIS_OPT_ENV,
    };
    if (pyxis_args_enabled(a))
        return;
    for (size_t i = 0; i < ELEMENTSOF(reported); i++) {
        if (!given(a, reported[i]))
            continue;
        char msg[256];
        snprintf(msg, sizeof(msg),
                 "ignoring --%s because neither --container-image nor --container-name is set",
                 opt_name(reported[i]));
        say(userdata, msg);
    }
}
