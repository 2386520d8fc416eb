/* Named containers, under DATA/containers/NAME/:
 *   state.json   what `create` was asked: image, layers, and the run flags (entrypoint,
 *                arguments, --env, workdir, mounts, GPUs, options); written once. The
 *                command and environment are worked out again at every start from these and
 *                the image config, so a start sees the GPUs and host environment of its time.
 *   upper/ work/ the container's own writable layer (kept across starts)
 *   lock         flock(2)ed exclusively by the process that runs it (start, or run --name)
 *   pid          the running container's init pid; meaningful only while lock is held
 *   exit         the last exit status
 * A container directory appears by rename(2) of a finished DATA/containers/.new-* directory, so
 * a crash during create leaves only a .new-* directory, which the next sweep removes. `run
 * --name` containers are ephemeral: removed when they exit, and by the next sweep when their
 * runner died (lock free). Names: [A-Za-z0-9][A-Za-z0-9_.-]{0,63}. */
#pragma once

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "lib/errmsg.h"

struct container {
    char *name;
    char *image;         /* canonical image name */
    char *config_digest; /* the image ID at create time */
    char **layers;       /* layer digests, bottom first */
    char **layer_paths;  /* a node cache image's layer directories there; NULL: in the store */
    char *entrypoint;    /* --entrypoint; NULL: the image's */
    char **args;         /* the command after the image name; empty: the image's Cmd */
    char **user_env;     /* --env values */
    char *workdir;       /* --workdir or NULL */
    char **mounts;       /* --mount values "SRC:DST[:ro|rw]", in order */
    char *gpus;          /* --gpus as given, or NULL: GPUs are chosen again at every start */
    char *driver_root;   /* NULL = the config's */
    bool writable, remap_root, pid_ns, no_home, ephemeral;
    int64_t created_at;
    /* Filled by container_load/list: */
    bool running;
    pid_t pid;     /* when running */
    int last_exit; /* -1 if it never exited */
};

void container_done(struct container *c);

/* 0 if name is a valid container name, else -EINVAL with a message quoting it. */
int container_name_check(const char *name, struct errmsg *e);

/* Creates DATA and DATA/containers (0700) when missing: before any container has been named, a
 * container could otherwise plant one there for a later `capsule start`. 0 or -errno with a
 * message. */
int containers_dir_ensure(const char *data_dir, struct errmsg *e);

/* mkdir -p path, new directories 0700. 0 or -errno with a message. */
int containers_mkdir_p(const char *path, struct errmsg *e);

/* DATA/containers/NAME, malloc'd. */
char *container_dir(const char *data_dir, const char *name);

/* Creates the container's directory with state.json (and upper/, work/ when writable and not
 * ephemeral). With ret_lock_fd (may be NULL) the container is created locked, as
 * container_lock() would, for a run that starts at once. Returns 0, -EEXIST ("container 'x'
 * already exists"), or an I/O error. */
int container_create(const char *data_dir, const struct container *c, int *ret_lock_fd,
                     struct errmsg *e);

/* Reads a container and whether it runs. -ENOENT "no container 'x'", -EBADMSG (damaged). */
int container_load(const char *data_dir, const char *name, struct container *ret, struct errmsg *e);

/* Every container, sorted by name (after a sweep). *ret: array of *ret_n; free each then it. */
int container_list(const char *data_dir, struct container **ret, size_t *ret_n, struct errmsg *e);

/* Marks the container as running by this process: takes its lock (held until *ret_fd is
 * closed) and forgets the pid of an earlier run (container_set_pid() records the new one).
 * -EBUSY ("container 'x' is already running (pid N)"). */
int container_lock(const char *data_dir, const char *name, int *ret_fd, struct errmsg *e);
/* Records the init pid / the exit status of the run that holds the lock. */
int container_set_pid(const char *data_dir, const char *name, pid_t pid);
int container_set_exit(const char *data_dir, const char *name, int status);

/* The output of a container run in the background (`run -d`): DATA/logs/NAME.log, kept after
 * the container is gone (until `capsule rm NAME`) and replaced by the next detached run of that
 * name. container_log_path
 * returns it malloc'd (NULL: out of memory); container_log_open creates it (0600, truncated) and
 * returns an O_CLOEXEC fd, or -errno with a message. */
char *container_log_path(const char *data_dir, const char *name);
int container_log_open(const char *data_dir, const char *name, struct errmsg *e);

/* Removes a stopped container and its log (the log alone once a `run -d` has ended). -EBUSY
 * if it runs, -ENOENT if there is neither. */
int container_remove(const char *data_dir, const char *name, struct errmsg *e);

/* Removes what crashed runs left: .new-* directories and ephemeral containers whose lock is
 * free. Never fails (best effort; a debug log says what could not be removed). */
void containers_sweep(const char *data_dir);

/* The layer and config digests that any container uses (for gc to keep), NULL-terminated. */
int containers_digests_in_use(const char *data_dir, char ***ret, struct errmsg *e);
