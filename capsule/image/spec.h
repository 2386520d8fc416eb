/* From an image config and the user's flags to what runs: Docker's rules for Entrypoint, Cmd,
 * Env and WorkingDir, plus what an HPC user needs from the host.
 *
 *   argv: --entrypoint replaces the image's Entrypoint and drops its Cmd (as `docker run
 *         --entrypoint` does); command-line arguments after IMAGE replace Cmd; argv is
 *         Entrypoint + Cmd. Neither: an error that says so.
 *   env:  the image's Env; PATH defaults to Docker's when the image has none; then from the host
 *         TERM, TZ, LANG, LC_*, and the variables of the batch system the job runs under
 *         (SLURM_*, PMI_*, PMIX_*, OMPI_*, GPUQ_*), which a job step inside needs; HOME, USER,
 *         LOGNAME for the user inside; container=capsule (how programs tell they are in a
 *         container) and CAPSULE_NAME for a named container (gpumon attributes GPU processes by
 *         it); then runtime_env (what GPU injection sets); last the user's --env K=V (or K: the
 *         host's value), which win.
 *   cwd:  --workdir, else the image's WorkingDir, else "/".
 * The image's User is not applied: the user namespace maps only the caller (see runtime.h). */
#pragma once

#include <stdbool.h>

#include "lib/errmsg.h"
#include "capsule/image/manifest.h"

struct spec_flags {
    const char *entrypoint;   /* --entrypoint; NULL: the image's; "" : none */
    char *const *args;        /* after IMAGE; NULL or empty: the image's Cmd */
    char *const *env;         /* --env values, in order */
    char *const *runtime_env; /* "K=V" set before --env (GPU injection's); may be NULL */
    const char *workdir;      /* --workdir */
    const char *name;         /* container name, or NULL */
    bool remap_root;
    bool no_home;
    const char *user_name; /* inside (root with remap_root) */
    const char *home;      /* the host home that is mounted */
    bool no_command;       /* argv may come out empty (a held container runs nothing itself) */
};

struct spec_result {
    char **argv;
    char **env;
    char *cwd;
};

/* Builds argv, env and cwd. host_env is the caller's environment. Returns 0 and *ret (free with
 * spec_result_done), -EINVAL ("image 'x' has no Entrypoint or Cmd: give a command after the
 * image name"; "--env '=x': ..."), -ENOMEM. */
int spec_build(const struct image_config *img, const struct spec_flags *f, char *const *host_env,
               struct spec_result *ret, struct errmsg *e);
void spec_result_done(struct spec_result *r);

/* Docker's PATH for images that set none. */
#define SPEC_DEFAULT_PATH "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
