/* From a container description (an image in the store plus the user's run flags) to a running
 * command: the one path that `run`, `start` and the Slurm plugin share.
 *
 * It takes each layer's lock shared for the whole run (so gc leaves them alone), reads and
 * parses the image config, plans GPU injection, works out argv/env/cwd (spec.h), joins the
 * config's default mounts, the container's --mount values and the GPU mounts, and hands it all
 * to runtime_run(). */
#pragma once

#include <stdbool.h>
#include <sys/types.h>

#include "capsule/capsule-config.h"
#include "capsule/containers.h"
#include "lib/errmsg.h"
#include "capsule/store/store.h"

struct launch_request {
    const struct container *c; /* name may be NULL: an anonymous run */
    const struct capsule_config *config;
    char *const *host_env;
    const char *upper_dir, *work_dir; /* a named container's own upper layer, or NULL */
    bool tty_force; /* -t: a terminal on all of stdin, stdout, stderr; else when both are ttys */
    int (*on_started)(pid_t pid, void *userdata);
    void *userdata;
    /* A container held for host processes to join (run_spec.hold) rather than one that runs a
     * command: hold_fd > 2 holds it until that fd reads end-of-file. on_held (instead of
     * on_started) is then told the container's process and what a joining process needs: the
     * environment and working directory the command would have had (spec.h), and argv, the
     * image's entrypoint and command as the container's flags make them (may be empty). No
     * cgroup of its own is made: the joining processes stay in their caller's (a Slurm step's). */
    int hold_fd;
    /* run_spec's: descriptors the command keeps, and where its output goes (NULL: ours). */
    const int (*keep_fds)[2];
    size_t n_keep_fds;
    const int *output_fd;
    int (*on_held)(pid_t pid, char *const *argv, char *const *env, const char *cwd, void *userdata);
};

/* When an image is pulled before a run (Docker's --pull, Pyxis' enroot import). */
enum launch_pull_policy {
    LAUNCH_PULL_MISSING, /* only when it is not in the store */
    LAUNCH_PULL_NEVER,
    LAUNCH_PULL_ALWAYS,
};
/* Parses "missing", "never" or "always". 0 or -EINVAL. */
int launch_pull_policy_parse(const char *s, enum launch_pull_policy *ret);

/* Pulls the image of canonical name into the store, or with file set, loads that image archive
 * (store/archive.h) under name; the caller's way (capsule runs capsule-pull, which says its own
 * errors). Returns 0 once it is there, or non-zero. */
typedef int (*launch_pull_fn)(void *userdata, const char *name, const char *file);

/* Whether arg names an image file rather than a reference: it starts with '/' or '.' (Pyxis'
 * rule for --container-image). */
bool launch_is_image_file(const char *arg);

/* The name an image file is cached under: "localhost/file/BASE:pHASH", BASE the file's name
 * without its extension, lower case, other characters than [a-z0-9_-] as '-', HASH 8 hex digits
 * of its absolute path (two files of one name in different folders are two images, also when
 * two jobs load them at once). malloc'd into *ret; 0, -EINVAL (no usable name: "/", "..") or
 * -ENOMEM. */
int launch_file_image_name(const char *path, char **ret);

/* Refuses what capsule cannot run as an image file before anything starts: enroot's squashfs
 * images (*.sqsh, *.squashfs, *.sqfs), with what to do instead. 0 or -ENOTSUP with a message. */
int launch_image_file_check(const char *path, struct errmsg *e);

/* Finds the image a user named (store_image_find: a cached name in any spelling, else an ID
 * prefix; an image file is loaded every time, whatever the policy, under
 * launch_file_image_name()), pulling it first as the policy says: with "missing" only when it is
 * not cached (or its node cache layers are gone: evicted, or renamed by a new key), with
 * "always" by its name every time, with "never" not at all. Returns 0 and *ret, or
 * -ENOENT
 * ("image 'x' is not in the cache; capsule pull x", "cannot run 'x': the pull failed"), -EINVAL
 * (not an image reference, an ambiguous ID), with a message. */
int launch_resolve_image(struct store *st, const char *arg, enum launch_pull_policy policy,
                         launch_pull_fn pull, void *userdata, struct image_record *ret,
                         struct errmsg *e);

/* Exit codes of a container that could not start, as Docker uses them. */
#define LAUNCH_EXIT_FAILED         125
#define LAUNCH_EXIT_NOT_EXECUTABLE 126
#define LAUNCH_EXIT_NOT_FOUND      127

/* The exit code for a failed launch or exec: 126/127 when the command itself could not be
 * executed (the runtime's "exec '…'" errors), else 125. */
int launch_exit_code(int r, const struct errmsg *e);

/* The program that mounts node cache images: capsule.conf's fuse_overlayfs, else the first
 * fuse-overlayfs on PATH, else "fuse-overlayfs" (which the runtime then refuses, saying what to
 * install). buf holds a path found on PATH. */
const char *launch_fuse_program(const struct capsule_config *config, char *buf, size_t size);

/* Runs the container and waits. Returns 0 with *ret_exit the command's status, or a negative
 * errno with a message; *ret_exit is then the exit code the CLI should use (125, or 126/127 when
 * the command itself could not be executed). */
int launch_container(struct store *s, const struct launch_request *req, int *ret_exit,
                     struct errmsg *e);
