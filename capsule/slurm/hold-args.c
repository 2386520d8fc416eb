#include "capsule/slurm/hold-args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/launch.h"
#include "capsule/slurm/held.h"
#include "lib/macro.h"
#include "lib/strv.h"

bool hold_args_entrypoint(const struct pyxis_args *a, const struct plugin_config *c)
{
    return a->entrypoint == 1 || (a->entrypoint < 0 && c->execute_entrypoint);
}

char *hold_entrypoint_log(const char *runtime_path, const struct hold_step *st)
{
    char *p;
    return asprintf(&p, "%s/%u/entrypoint.%u.%u.log", runtime_path, (unsigned)st->uid, st->job_id,
                    st->step_id) < 0
               ? NULL
               : p;
}

char *hold_job_dir(const char *runtime_path, uid_t uid, uint32_t job_id)
{
    char *p;
    return asprintf(&p, "%s/%u/jobs/%u", runtime_path, (unsigned)uid, job_id) < 0 ? NULL : p;
}

char *hold_global_dir(const char *runtime_path, uid_t uid)
{
    char *p;
    return asprintf(&p, "%s/%u/global", runtime_path, (unsigned)uid) < 0 ? NULL : p;
}

bool hold_env_is_the_jobs(const char *name)
{
    return strncmp(name, "SLURM_", 6) == 0 || strncmp(name, "PMI_", 4) == 0 ||
           strncmp(name, "PMIX_", 5) == 0;
}

static int push2(char ***argv, const char *a, const char *b)
{
    return strv_push(argv, a) < 0 || strv_push(argv, b) < 0 ? -ENOMEM : 0;
}

/* A host path as the mount needs it: relative ones from the job's working directory. */
static char *host_path(const char *src, char *const *job_env)
{
    const char *pwd = strv_env_get(job_env, "PWD");
    char *p;
    if (src[0] == '/')
        return strdup(src);
    return asprintf(&p, "%s/%s", pwd ? pwd : "/", src) < 0 ? NULL : p;
}

static int add_mount(char ***argv, const struct pyxis_mount *m, char *const *job_env,
                     struct errmsg *e)
{
    _cleanup_free_ char *dst = NULL, *value = NULL, *src = NULL;
    if (asprintf(&dst, "%s%s", m->dst[0] == '/' ? "" : "/", m->dst) < 0)
        return -ENOMEM;
    if (!m->src) {
        if (asprintf(&value, "tmpfs:%s:%s%s%s", dst, m->tmpfs_options ? m->tmpfs_options : "",
                     m->tmpfs_options && m->ro ? "," : "", m->ro ? "ro" : "") < 0)
            return -ENOMEM;
        return push2(argv, "--mount", value);
    }
    if (!(src = host_path(m->src, job_env)))
        return -ENOMEM;
    struct stat s;
    if (stat(src, &s) < 0 && (errno == ENOENT || errno == ENOTDIR))
        return errmsg_set(e, -ENOENT, "--container-mounts: source path does not exist: %s", m->src);
    if (asprintf(&value, "%s:%s%s", src, dst, m->ro ? ":ro" : "") < 0)
        return -ENOMEM;
    return push2(argv, "--mount", value);
}

/* The batch step's script and the step's PMIx directory, where Slurm has them. */
static int add_slurm_mounts(char ***argv, const struct hold_step *st)
{
    _cleanup_free_ char *script = NULL, *pmix = NULL;
    if (st->batch_script &&
        (asprintf(&script, "%s:%s:ro", st->batch_script, st->batch_script) < 0 ||
         push2(argv, "--mount", script) < 0))
        return -ENOMEM;
    if (st->pmix_dir && (asprintf(&pmix, "%s:%s", st->pmix_dir, st->pmix_dir) < 0 ||
                         push2(argv, "--mount", pmix) < 0))
        return -ENOMEM;
    return 0;
}

char *hold_pmix_dir(const char *maps, uint32_t job_id, uint32_t step_id)
{
    char mark[64];
    snprintf(mark, sizeof(mark), "/pmix.%u.%u/", job_id, step_id);
    for (const char *line = maps; line && *line;) {
        const char *end = strchrnul(line, '\n');
        const char *path = memchr(line, '/', (size_t)(end - line));
        const char *hit = path ? strstr(path, mark) : NULL;
        if (hit && hit < end)
            return strndup(path, (size_t)(hit - path) + strlen(mark) - 1);
        line = *end ? end + 1 : end;
    }
    return NULL;
}

/* The step's GPUs, as Slurm's indexes: the step's allocation (the batch step's is the job's on
 * this node); not CUDA_VISIBLE_DEVICES, which anyone may set. NULL: none. */
static const char *step_gpus(const struct hold_step *st)
{
    const char *v = strv_env_get(st->job_env, st->batch ? "SLURM_JOB_GPUS" : "SLURM_STEP_GPUS");
    return v && *v ? v : NULL;
}

/* --gpus from the step's allocation; none without one. */
static int add_gpus(char ***argv, const struct hold_step *st)
{
    const char *gpus = step_gpus(st);
    return push2(argv, "--gpus", gpus ? gpus : "none");
}

int hold_task_gpus(const char *step, const char *task, char **ret)
{
    _cleanup_free_ char *s = step ? strdup(step) : NULL, *t = task ? strdup(task) : NULL;
    if (!s || !t || !*t)
        return 1;
    _cleanup_strv_free_ char **all = NULL, **mine = NULL;
    for (char *c = s; *c; c++)
        *c = *c == ',' ? ' ' : *c;
    for (char *c = t; *c; c++)
        *c = *c == ',' ? ' ' : *c;
    if (strv_split_blanks(s, &all) < 0 || strv_split_blanks(t, &mine) < 0)
        return -ENOMEM;
    _cleanup_free_ char *out = calloc(strv_length(mine) * 12 + 1, 1);
    if (!out)
        return -ENOMEM;
    for (size_t i = 0; mine[i]; i++) {
        size_t k = 0;
        while (all[k] && strcmp(all[k], mine[i]) != 0)
            k++;
        if (!all[k])
            return 1;
        sprintf(out + strlen(out), "%s%zu", i ? "," : "", k);
    }
    *ret = TAKE_PTR(out);
    return 0;
}

char *hold_step_gpus(const struct hold_step *st)
{
    const char *v = step_gpus(st);
    return v ? strdup(v) : NULL;
}

static int add_name(char ***argv, const struct pyxis_args *a)
{
    static const char *const flag[] = {
        [PYXIS_NAME_AUTO] = "--join",
        [PYXIS_NAME_CREATE] = "--create-only",
        [PYXIS_NAME_EXEC] = "--join-only",
        [PYXIS_NAME_NO_EXEC] = NULL,
    };
    if (push2(argv, "--name", a->name) < 0)
        return -ENOMEM;
    return flag[a->name_flag] && strv_push(argv, flag[a->name_flag]) < 0 ? -ENOMEM : 0;
}

static int build_argv(const struct pyxis_args *a, const struct plugin_config *c,
                      const struct hold_step *st, char ***argv, struct errmsg *e)
{
    _cleanup_free_ char *data = a->name && c->scope == PLUGIN_SCOPE_GLOBAL
                                    ? hold_global_dir(c->runtime_path, st->uid)
                                    : hold_job_dir(c->runtime_path, st->uid, st->job_id);
    if (!data || strv_push(argv, "-q") < 0 || strv_push(argv, "hold") < 0 ||
        push2(argv, "--fd", "3") < 0 || push2(argv, "--data-dir", data) < 0)
        return -ENOMEM;
    int r = a->name ? add_name(argv, a) : 0;
    if (r >= 0 && a->mount_home == 0)
        r = strv_push(argv, "--no-home");
    if (r >= 0 && a->remap_root >= 0)
        r = strv_push(argv, a->remap_root ? "--remap-root" : "--no-remap-root");
    if (r >= 0 && a->writable == 1)
        r = strv_push(argv, "--writable");
    if (r >= 0 && hold_args_entrypoint(a, c)) {
        _cleanup_free_ char *log = hold_entrypoint_log(c->runtime_path, st);
        r = log && strv_push(argv, "--run-entrypoint") >= 0
                ? push2(argv, "--entrypoint-output", log)
                : -ENOMEM;
    }
    for (size_t i = 0; r >= 0 && i < a->n_mounts; i++)
        r = add_mount(argv, &a->mounts[i], st->job_env, e);
    if (r >= 0)
        r = add_slurm_mounts(argv, st);
    if (r >= 0)
        r = add_gpus(argv, st);
    if (r >= 0 && a->image) {
        _cleanup_free_ char *file =
            launch_is_image_file(a->image) ? host_path(a->image, st->job_env) : NULL;
        r = launch_is_image_file(a->image) && !file ? -ENOMEM
                                                    : strv_push(argv, file ? file : a->image);
    }
    return r;
}

static int build_env(const struct pyxis_args *a, char *const *job_env, char ***ret)
{
    static const char *const dropped[] = {"PATH", "LD_LIBRARY_PATH", "LD_PRELOAD", NULL};
    static const char *const locale[] = {"LANG", "LANGUAGE", "LC_ALL", NULL};
    _cleanup_strv_free_ char **env = strv_new();
    if (!env)
        return -ENOMEM;
    for (char *const *kv = job_env; kv && *kv; kv++) {
        const char *eq = strchr(*kv, '=');
        _cleanup_free_ char *name = eq ? strndup(*kv, (size_t)(eq - *kv)) : NULL;
        if (!eq)
            continue;
        if (!name)
            return -ENOMEM;
        if (strv_contains((char *const *)dropped, name) ||
            (strv_contains((char *const *)locale, name) && !strv_contains(a->env_names, name)))
            continue;
        if (strv_push(&env, *kv) < 0)
            return -ENOMEM;
    }
    if (strv_env_set(&env, "PATH", "/usr/local/bin:/usr/bin:/bin") < 0)
        return -ENOMEM;
    *ret = TAKE_PTR(env);
    return 0;
}

/* --container-save's folder must take the file: said before the step runs, not after. Run
 * as the user (effective ids). */
static int check_save(const struct pyxis_args *a, char *const *job_env, struct errmsg *e)
{
    _cleanup_free_ char *path = a->save ? hold_save_path(a, job_env) : NULL;
    if (!a->save)
        return 0;
    if (!path)
        return -ENOMEM;
    char *slash = strrchr(path, '/');
    *slash = '\0';
    if (faccessat(AT_FDCWD, *path ? path : "/", W_OK | X_OK, AT_EACCESS) < 0)
        return errmsg_set(e, negative_errno(), "--container-save: cannot write to %s: %m",
                          *path ? path : "/");
    return 0;
}

int hold_args_build(const struct pyxis_args *a, const struct plugin_config *c,
                    const struct hold_step *st, const char *program, struct hold_request *ret,
                    struct errmsg *e)
{
    struct hold_request req = {.program = strdup(program), .argv = strv_new()};
    int r = req.program && req.argv && strv_push(&req.argv, program) >= 0 ? 0 : -ENOMEM;
    if (r >= 0)
        r = check_save(a, st->job_env, e);
    if (r >= 0)
        r = build_argv(a, c, st, &req.argv, e);
    if (r >= 0)
        r = build_env(a, st->job_env, &req.env);
    if (r < 0) {
        hold_request_done(&req);
        return r == -ENOMEM ? errmsg_set(e, r, "out of memory") : r;
    }
    *ret = req;
    return 0;
}

void hold_request_done(struct hold_request *r)
{
    free(r->program);
    strv_free(r->argv);
    strv_free(r->env);
    *r = (struct hold_request){0};
}

char *hold_save_path(const struct pyxis_args *a, char *const *job_env)
{
    return a->save ? host_path(a->save, job_env) : NULL;
}

int hold_args_save(const struct pyxis_args *a, const struct hold_step *st, const char *program,
                   const struct held *h, struct hold_request *ret, struct errmsg *e)
{
    char pid[16];
    snprintf(pid, sizeof(pid), "%d", (int)h->pid);
    _cleanup_free_ char *path = hold_save_path(a, st->job_env);
    struct hold_request req = {.program = strdup(program), .argv = strv_new()};
    int r = req.program && req.argv && path ? 0 : -ENOMEM;
    if (r >= 0 &&
        (strv_push(&req.argv, program) < 0 || strv_push(&req.argv, "-q") < 0 ||
         strv_push(&req.argv, "save") < 0 || push2(&req.argv, "--pid", pid) < 0 ||
         (h->image && push2(&req.argv, "--image", h->image) < 0) || strv_push(&req.argv, path) < 0))
        r = -ENOMEM;
    if (r >= 0)
        r = build_env(a, st->job_env, &req.env);
    if (r < 0) {
        hold_request_done(&req);
        return errmsg_set(e, r, "out of memory");
    }
    *ret = req;
    return 0;
}
