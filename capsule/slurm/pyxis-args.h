/* Pyxis' --container-* options (NVIDIA/pyxis args.c is the reference), their PYXIS_CONTAINER_*
 * environment defaults, and what they become for `capsule hold`. Pure parsing: the SPANK plugin
 * (spank-capsule.c) feeds it srun's, sbatch's and slurmstepd's values.
 *
 * Rules, as Pyxis has them:
 *   - a string option given twice with the same value is fine (Slurm calls the callback in srun
 *     and again in slurmstepd); with another value it is an error;
 *   - of a pair (--container-mount-home / --no-container-mount-home, remap-root, entrypoint,
 *     writable / readonly) both forms together are an error;
 *   - --container-mounts and --container-env accumulate over repeats;
 *   - an environment default applies only when its option was not given (PYXIS_CONTAINER_IMAGE,
 *     _MOUNTS, _WORKDIR, _NAME, _SAVE, _ENV; booleans _MOUNT_HOME, _REMAP_ROOT, _ENTRYPOINT,
 *     _ENTRYPOINT_LOG, _WRITABLE, _READONLY as 1/true/yes/y or 0/false/no/n); a value that does
 *     not parse is an error naming the variable (Pyxis ignores it silently; a job that then runs
 *     without the mounts its owner asked for is worse than one that stops);
 *   - without --container-image and --container-name the plugin does nothing for the step.
 *
 * Images: a reference in Docker's or enroot's spelling (checked here), or a path (starting with
 * '.' or '/': an image archive, as --container-save writes them; relative to the job's working
 * directory). Mounts: SRC[:DST[:FLAGS]] separated by ',', FLAGS joined by '+'. SRC alone mounts it
 * at the same path. SRC is an absolute or relative host path, or "tmpfs" (FLAGS then are tmpfs
 * options such as size=1G, plus ro). Flags of a bind: ro, rw, rbind, and the propagation flags
 * private and rprivate (what every mount of a container has anyway); others are refused by name.
 * DST must be absolute or relative (to the container's /). Spaces in paths are fine. */
#pragma once

#include <stdbool.h>
#include <stddef.h>

#include "lib/errmsg.h"

enum pyxis_opt {
    PYXIS_OPT_IMAGE,
    PYXIS_OPT_MOUNTS,
    PYXIS_OPT_WORKDIR,
    PYXIS_OPT_NAME,
    PYXIS_OPT_SAVE,
    PYXIS_OPT_MOUNT_HOME,
    PYXIS_OPT_NO_MOUNT_HOME,
    PYXIS_OPT_REMAP_ROOT,
    PYXIS_OPT_NO_REMAP_ROOT,
    PYXIS_OPT_ENTRYPOINT,
    PYXIS_OPT_NO_ENTRYPOINT,
    PYXIS_OPT_ENTRYPOINT_LOG,
    PYXIS_OPT_WRITABLE,
    PYXIS_OPT_READONLY,
    PYXIS_OPT_ENV,
    PYXIS_OPT_COUNT,
};

/* An option as SPANK registers it: "container-image", whether it takes a value, its help. */
struct pyxis_opt_info {
    const char *name;
    const char *arginfo; /* NULL: a flag */
    const char *usage;
};
extern const struct pyxis_opt_info pyxis_opts[PYXIS_OPT_COUNT];

enum pyxis_name_flag {
    PYXIS_NAME_AUTO,    /* held already: join it; kept: use it; else create it */
    PYXIS_NAME_CREATE,  /* create it; an error when it exists */
    PYXIS_NAME_EXEC,    /* join it; an error when it is not held */
    PYXIS_NAME_NO_EXEC, /* never join: a new hold of its filesystem */
};

struct pyxis_mount {
    char *src; /* host path, or NULL for a tmpfs */
    char *dst;
    bool ro;
    char *tmpfs_options; /* tmpfs: "size=1G,mode=1777" or NULL */
};

struct pyxis_args {
    char *image, *workdir, *name, *save;
    enum pyxis_name_flag name_flag;
    struct pyxis_mount *mounts;
    size_t n_mounts;
    char **env_names; /* --container-env: the job's value wins for these */
    /* -1: not given, else 0/1 */
    int mount_home, remap_root, entrypoint, entrypoint_log, writable;
};

/* A fresh set: nothing given. */
void pyxis_args_init(struct pyxis_args *a);
void pyxis_args_done(struct pyxis_args *a);

/* Applies one option (value NULL for flags). 0, or -EINVAL with a message that names the option
 * and the value ("--container-mounts: invalid format: /tmp:"), or -ENOMEM. */
int pyxis_args_set(struct pyxis_args *a, enum pyxis_opt opt, const char *value, struct errmsg *e);

/* Applies the PYXIS_CONTAINER_* defaults of the options not given; get(userdata, NAME) returns a
 * variable's value or NULL. 0, or -EINVAL naming the variable. */
int pyxis_args_apply_env(struct pyxis_args *a, const char *(*get)(void *userdata, const char *name),
                         void *userdata, struct errmsg *e);

/* Whether the step runs in a container: an image or a name was given. */
bool pyxis_args_enabled(const struct pyxis_args *a);

/* Without an image or a name, each option given is ignored: says so once per option, through
 * say(userdata, "ignoring --container-mounts because neither --container-image nor
 * --container-name is set"). */
void pyxis_args_say_ignored(const struct pyxis_args *a,
                            void (*say)(void *userdata, const char *msg), void *userdata);
