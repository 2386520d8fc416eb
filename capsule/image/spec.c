#include "capsule/image/spec.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "lib/macro.h"
#include "lib/names.h"
#include "lib/strv.h"

/* Host variables a containerised job step needs: the terminal and locale, and those of the
 * batch system and MPI launchers (srun inside a job, PMIx wire-up). */
static const char *const pass_exact[] = {"TERM", "TZ", "LANG", "LANGUAGE", NULL};
static const char *const pass_prefix[] = {"LC_", "SLURM_", "PMI_", "PMIX_", "OMPI_", "GPUQ_", NULL};

static bool host_var_passes(const char *assignment)
{
    const char *eq = strchr(assignment, '=');
    if (!eq)
        return false;
    size_t klen = (size_t)(eq - assignment);
    for (size_t i = 0; pass_exact[i]; i++)
        if (strlen(pass_exact[i]) == klen && strncmp(assignment, pass_exact[i], klen) == 0)
            return true;
    for (size_t i = 0; pass_prefix[i]; i++)
        if (strncmp(assignment, pass_prefix[i], strlen(pass_prefix[i])) == 0)
            return true;
    return false;
}

static int build_argv(const struct image_config *img, const struct spec_flags *f, char ***ret,
                      struct errmsg *e)
{
    _cleanup_strv_free_ char **argv = strv_new();
    if (!argv)
        return -ENOMEM;
    int r = 0;
    if (f->entrypoint) {
        if (*f->entrypoint)
            r = strv_push(&argv, f->entrypoint);
    } else {
        r = strv_extend(&argv, img->entrypoint);
    }
    if (r < 0)
        return r;
    /* An explicit entrypoint drops the image's Cmd: it was written for the old entrypoint. */
    if (f->args && f->args[0])
        r = strv_extend(&argv, f->args);
    else if (!f->entrypoint)
        r = strv_extend(&argv, img->cmd);
    if (r < 0)
        return r;
    if (!argv[0] && !f->no_command)
        return errmsg_set(e, -EINVAL,
                          "the image has no Entrypoint or Cmd: give a command after the image "
                          "name");
    *ret = TAKE_PTR(argv);
    return 0;
}

static int add_user_env(char ***env, const struct spec_flags *f, char *const *host_env,
                        struct errmsg *e)
{
    for (size_t i = 0; f->env && f->env[i]; i++) {
        const char *v = f->env[i];
        int r;
        if (strchr(v, '=')) {
            r = strv_env_put(env, v);
            if (r == -EINVAL)
                return errmsg_set(e, r, "--env '%s': the variable name is empty", v);
        } else {
            /* "--env K" takes K from the host, as docker does; unset on the host: left out. */
            const char *hv = strv_env_get(host_env, v);
            r = (*v && hv) ? strv_env_set(env, v, hv) : 0;
            if (!*v)
                return errmsg_set(e, -EINVAL, "--env '': the variable name is empty");
        }
        if (r < 0)
            return r;
    }
    return 0;
}

static int build_env(const struct image_config *img, const struct spec_flags *f,
                     char *const *host_env, char ***ret, struct errmsg *e)
{
    _cleanup_strv_free_ char **env = strv_new();
    int r = env ? 0 : -ENOMEM;
    for (size_t i = 0; r >= 0 && img->env && img->env[i]; i++)
        r = strchr(img->env[i], '=') ? strv_env_put(&env, img->env[i]) : 0;
    if (r >= 0 && !strv_env_get(env, "PATH"))
        r = strv_env_set(&env, "PATH", SPEC_DEFAULT_PATH);
    for (size_t i = 0; r >= 0 && host_env && host_env[i]; i++)
        r = host_var_passes(host_env[i]) ? strv_env_put(&env, host_env[i]) : 0;
    const char *user = f->remap_root ? "root" : (f->user_name ? f->user_name : "user");
    const char *home = f->no_home || !f->home ? (f->remap_root ? "/root" : "/") : f->home;
    if (r >= 0)
        r = strv_env_set(&env, "HOME", home);
    if (r >= 0)
        r = strv_env_set(&env, "USER", user);
    if (r >= 0)
        r = strv_env_set(&env, "LOGNAME", user);
    if (r >= 0)
        r = strv_env_set(&env, "container", "capsule");
    if (r >= 0 && f->name)
        r = strv_env_set(&env, NAMES_ENV_CAPSULE_NAME, f->name);
    for (size_t i = 0; r >= 0 && f->runtime_env && f->runtime_env[i]; i++)
        r = strv_env_put(&env, f->runtime_env[i]);
    if (r < 0)
        return r;
    if ((r = add_user_env(&env, f, host_env, e)) < 0)
        return r;
    *ret = TAKE_PTR(env);
    return 0;
}

int spec_build(const struct image_config *img, const struct spec_flags *f, char *const *host_env,
               struct spec_result *ret, struct errmsg *e)
{
    struct spec_result s = {0};
    int r = build_argv(img, f, &s.argv, e);
    if (r >= 0)
        r = build_env(img, f, host_env, &s.env, e);
    if (r >= 0) {
        const char *cwd = f->workdir ? f->workdir : img->working_dir ? img->working_dir : "/";
        if (cwd[0] != '/')
            r = errmsg_set(e, -EINVAL, "working directory '%s' is not an absolute path", cwd);
        else if (!(s.cwd = strdup(cwd)))
            r = -ENOMEM;
    }
    if (r < 0) {
        spec_result_done(&s);
        return r == -ENOMEM ? errmsg_set(e, r, "out of memory") : r;
    }
    *ret = s;
    return 0;
}

void spec_result_done(struct spec_result *r)
{
    strv_free(r->argv);
    strv_free(r->env);
    free(r->cwd);
    *r = (struct spec_result){0};
}
