/* What a job's process gets: its environment, its command line and its working directory, made
 * from the run spec. Pure: no I/O.
 *
 * The environment, in order (a later step replaces a name an earlier one set):
 *   1. the spec's env, in its order, the last assignment of a name winning: the user's
 *      submitted variables first, then what gpuqd appends (CUDA_VISIBLE_DEVICES and
 *      NVIDIA_VISIBLE_DEVICES with the UUIDs of the job's GPUs), so that a user's own value of
 *      those cannot stand; gpuqd appends both for every job, "" or "void" when it has none;
 *   2. HOME, USER, LOGNAME and SHELL from the passwd entry gpuqd looked up (as login and su set
 *      them: who the job runs as is not the submitter's to say);
 *   3. PATH, when the user gave none;
 *   4. GPUQ_JOB_ID (lib/names.h), and, when NVIDIA_VISIBLE_DEVICES is still unset, no GPU:
 *      NVIDIA_VISIBLE_DEVICES=void and an empty CUDA_VISIBLE_DEVICES (an image's own
 *      NVIDIA_VISIBLE_DEVICES=all must not hand a job GPUs it was not given).
 * LD_PRELOAD, LD_LIBRARY_PATH and the like stay: the job runs as its user, with nothing to gain.
 *
 * An image job runs `capsule run --rm [-w CWD] -e NAME... IMAGE [ARGV...]` as the user. capsule
 * takes the GPUs from NVIDIA_VISIBLE_DEVICES and CUDA_VISIBLE_DEVICES of its own environment
 * (and sets them inside), and passes only a few host variables into the container, so every
 * other variable of the job goes in with "-e NAME": the name alone, so that values stay out of
 * the command line that every user can read in /proc. PATH, HOME, USER, LOGNAME and SHELL stay
 * out (the image's PATH, capsule's own account of the user). */
#pragma once

#include "gpuq/run/run-spec.h"

#define RUN_ENV_DEFAULT_PATH  "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#define RUN_ENV_DEFAULT_SHELL "/bin/sh"

/* The job's environment, as above, in a new strv (*ret_env). 0 or -ENOMEM. */
int run_env_build(const struct run_spec *s, char ***ret_env);

/* The job's command line in a new strv (*ret_argv): a copy of s->argv for a plain job, capsule's
 * for an image job (env: what run_env_build made, whose names are passed). 0 or -ENOMEM. */
int run_env_argv(const struct run_spec *s, char *const *env, char ***ret_argv);

/* Where the job's process starts on the host: the spec's cwd, else the user's home; "/" for an
 * image job, whose cwd is inside the container (capsule's -w). Points into s or is static. */
const char *run_env_cwd(const struct run_spec *s);
