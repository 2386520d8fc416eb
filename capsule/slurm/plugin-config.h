/* spank_capsule.so's arguments in plugstack.conf, after the plugin's path:
 *
 *   required /usr/local/lib/gpunode/spank_capsule.so runtime_path=/run/capsule-slurm \
 *            container_scope=job sbatch_support=1 execute_entrypoint=0
 *
 *   runtime_path=DIR       per-user state: DIR/UID/jobs/JOBID/ (the containers of a job, removed
 *                          by the job's epilog) and DIR/UID/global/ (named containers of
 *                          container_scope=global); default /run/capsule-slurm
 *   container_scope=job|global  whether --container-name names a container of the job (removed
 *                          when the job ends) or of the user (kept); default job
 *   sbatch_support=BOOL    accept the options in sbatch and salloc (the batch script runs in the
 *                          container); default 1
 *   execute_entrypoint=BOOL  run the image's entrypoint (--[no-]container-entrypoint decide per
 *                          job); default 0
 *   capsule=PATH           the capsule program; default the installed one
 *
 * BOOL is 1/true/yes/y or 0/false/no/n. An unknown argument, or a value that does not parse, is
 * an error: the plugin then fails to load (slurmd refuses to start with a `required` plugin)
 * rather than run with a default the admin did not choose. */
#pragma once

#include <stdbool.h>

#include "lib/errmsg.h"

#define PLUGIN_RUNTIME_PATH_DEFAULT "/run/capsule-slurm"

enum plugin_scope {
    PLUGIN_SCOPE_JOB,
    PLUGIN_SCOPE_GLOBAL,
};

struct plugin_config {
    char *runtime_path;
    enum plugin_scope scope;
    bool sbatch_support;
    bool execute_entrypoint;
    char *capsule; /* NULL: the installed program */
};

/* Parses argv (plugstack.conf's arguments). 0, or -EINVAL naming the argument, or -ENOMEM. */
int plugin_config_parse(int argc, char *const *argv, struct plugin_config *ret, struct errmsg *e);
void plugin_config_done(struct plugin_config *c);
