#include "gpuq/run/run-env.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lib/macro.h"
#include "lib/names.h"
#include "lib/strv.h"

/* Names an image job does not pass into its container: capsule sets them (from its own
 * environment or the image's), or they describe the host. */
static const char *const host_only[] = {
    "PATH", "HOME", "USER", "LOGNAME", "SHELL", "NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
};

int run_env_build(const struct run_spec *s, char ***ret_env)
{
    _cleanup_strv_free_ char **env = strv_new();
    int r = env ? 0 : -ENOMEM;
    for (size_t i = 0; r >= 0 && s->env && s->env[i]; i++)
        r = strv_env_put(&env, s->env[i]);
    if (r >= 0)
        r = strv_env_set(&env, "HOME", s->home);
    if (r >= 0)
        r = strv_env_set(&env, "USER", s->user);
    if (r >= 0)
        r = strv_env_set(&env, "LOGNAME", s->user);
    if (r >= 0)
        r = strv_env_set(&env, "SHELL", s->shell ? s->shell : RUN_ENV_DEFAULT_SHELL);
    if (r >= 0 && !strv_env_get(env, "PATH"))
        r = strv_env_set(&env, "PATH", RUN_ENV_DEFAULT_PATH);
    char id[24];
    snprintf(id, sizeof(id), "%" PRIu64, s->job_id);
    if (r >= 0)
        r = strv_env_set(&env, NAMES_ENV_GPUQ_JOB_ID, id);
    if (r >= 0 && !strv_env_get(env, "NVIDIA_VISIBLE_DEVICES")) {
        r = strv_env_set(&env, "NVIDIA_VISIBLE_DEVICES", "void");
        if (r >= 0)
            r = strv_env_set(&env, "CUDA_VISIBLE_DEVICES", "");
    }
    if (r < 0)
        return r;
    *ret_env = TAKE_PTR(env);
    return 0;
}

static bool passes_into_container(const char *assignment)
{
    size_t klen = strcspn(assignment, "=");
    for (size_t i = 0; i < ELEMENTSOF(host_only); i++)
        if (strlen(host_only[i]) == klen && strncmp(assignment, host_only[i], klen) == 0)
            return false;
    return true;
}

static int image_argv(const struct run_spec *s, char *const *env, char ***ret)
{
    _cleanup_strv_free_ char **argv = strv_new();
    int r = argv ? 0 : -ENOMEM;
    static const char *const head[] = {"run", "--rm"};
    if (r >= 0)
        r = strv_push(&argv, s->capsule);
    for (size_t i = 0; r >= 0 && i < ELEMENTSOF(head); i++)
        r = strv_push(&argv, head[i]);
    if (r >= 0 && s->cwd && (r = strv_push(&argv, "-w")) >= 0)
        r = strv_push(&argv, s->cwd);
    for (size_t i = 0; r >= 0 && env && env[i]; i++) {
        if (!passes_into_container(env[i]))
            continue;
        char *name = strndup(env[i], strcspn(env[i], "="));
        r = name ? strv_push(&argv, "-e") : -ENOMEM;
        if (r >= 0)
            r = strv_consume(&argv, name);
        else
            free(name);
    }
    if (r >= 0)
        r = strv_push(&argv, s->image);
    if (r >= 0)
        r = strv_extend(&argv, s->argv);
    if (r < 0)
        return r;
    *ret = TAKE_PTR(argv);
    return 0;
}

int run_env_argv(const struct run_spec *s, char *const *env, char ***ret_argv)
{
    if (s->image)
        return image_argv(s, env, ret_argv);
    char **argv = strv_copy(s->argv);
    if (!argv)
        return -ENOMEM;
    *ret_argv = argv;
    return 0;
}

const char *run_env_cwd(const struct run_spec *s)
{
    return s->image ? "/" : s->cwd ? s->cwd : s->home;
}
