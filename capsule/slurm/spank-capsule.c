/* spank_capsule.so: Docker/OCI images in Slurm jobs with Pyxis' --container-* flags.
 *
 * Where things happen (spank.h has Slurm's order):
 *   slurmd start (init, S_CTX_SLURMD)  say which Slurm it was built for, make runtime_path,
 *                                      sweep job folders a node crash left (sweep.h)
 *   srun/sbatch/salloc (init, init_post_opt)  options and PYXIS_CONTAINER_* defaults, refused
 *                                      there when they do not parse, before anything starts
 *   slurmstepd init_post_opt (root)    the user's folder under runtime_path
 *   slurmstepd user_init (the user)    `capsule hold` for the step: image resolved and pulled
 *                                      once per node, the container held (step.h)
 *   task_init (each task, the user)    the task's environment, then it joins the container
 *   task_exit (the step's last task)   --container-save: `capsule save` as the user
 *   slurmstepd exit                    the hold released: unnamed containers go, named ones stay
 *   job epilog (root)                  the job's folder removed: what a crashed, cancelled or
 *                                      requeued job left
 * A failure in user_init is kept and reported by task_init, which then fails the task, so that
 * no task ever runs outside its container and the error reaches the job's output. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <slurm/slurm.h>
#include <slurm/spank.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capsule/slurm/hold-args.h"
#include "capsule/slurm/plugin-config.h"
#include "capsule/slurm/pyxis-args.h"
#include "capsule/slurm/step.h"
#include "capsule/slurm/sweep.h"
#include "lib/fileio.h"
#include "lib/log.h"
#include "lib/macro.h"
#include "lib/strv.h"

#ifndef CAPSULE_BINDIR
#define CAPSULE_BINDIR "/usr/local/bin"
#endif

SPANK_PLUGIN(capsule, 1)

#define RELEASE_TIMEOUT_MS 30000

static struct plugin_config config;
static struct pyxis_args args;
static struct spank_option options[PYXIS_OPT_COUNT + 1];
static struct step_holder holder = STEP_HOLDER_NULL;
static struct errmsg start_error;
static bool start_failed, enabled;
static uint32_t tasks_exited;
static char *container_gpus; /* the step's GPUs the container was given (Slurm's indexes) */

/* libgpunode's log lines go to Slurm's log. */
static void log_to_slurm(enum log_level level, const char *file, int line, const char *msg,
                         void *userdata)
{
    if (level <= LOG_LEVEL_ERR)
        slurm_error("capsule: %s", msg);
    else if (level <= LOG_LEVEL_INFO)
        slurm_info("capsule: %s", msg);
    else
        slurm_debug("capsule: %s", msg);
}

static const char *capsule_program(void)
{
    return config.capsule ? config.capsule : CAPSULE_BINDIR "/capsule";
}

static int fail(const char *what, const struct errmsg *e)
{
    slurm_error("capsule: %s%s%s", what ? what : "", what ? ": " : "", e->text);
    return -1;
}

static int option_cb(int val, const char *value, int remote)
{
    struct errmsg e = {{0}};
    return pyxis_args_set(&args, (enum pyxis_opt)val, value, &e) < 0 ? fail(NULL, &e) : 0;
}

static int register_options(spank_t sp)
{
    for (int i = 0; i < PYXIS_OPT_COUNT; i++) {
        options[i] = (struct spank_option){
            .name = (char *)pyxis_opts[i].name,
            .arginfo = (char *)pyxis_opts[i].arginfo,
            .usage = (char *)pyxis_opts[i].usage,
            .has_arg = pyxis_opts[i].arginfo != NULL,
            .val = i,
            .cb = option_cb,
        };
        spank_err_t r = spank_option_register(sp, &options[i]);
        if (r != ESPANK_SUCCESS) {
            slurm_error("capsule: couldn't register option %s: %s", options[i].name,
                        spank_strerror(r));
            return -1;
        }
    }
    return 0;
}

static int on_slurmd_start(void)
{
    slurm_info("capsule: spank_capsule %s, built for Slurm %d.%02d.%d", GPUNODE_VERSION,
               SLURM_VERSION_MAJOR(SLURM_VERSION_NUMBER), SLURM_VERSION_MINOR(SLURM_VERSION_NUMBER),
               SLURM_VERSION_MICRO(SLURM_VERSION_NUMBER));
    if (mkdir(config.runtime_path, 0755) < 0 && errno != EEXIST) {
        slurm_error("capsule: couldn't mkdir %s: %m", config.runtime_path);
        return -1;
    }
    /* Root makes users' folders in it and cleans them: it must be root's alone (not one a user
     * made in /tmp beforehand). */
    struct stat s;
    if (lstat(config.runtime_path, &s) < 0 || !S_ISDIR(s.st_mode) || s.st_uid != 0 ||
        (s.st_mode & 022)) {
        slurm_error("capsule: runtime_path %s must be a directory of root's that no one else may "
                    "write to",
                    config.runtime_path);
        return -1;
    }
    sweep_after_boot(config.runtime_path);
    return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    struct errmsg e = {{0}};
    spank_context_t ctx = spank_context();
    log_setup("capsule", LOG_LEVEL_INFO);
    log_set_sink(log_to_slurm, NULL);
    pyxis_args_init(&args);
    if (plugin_config_parse(ac, av, &config, &e) < 0)
        return fail("plugstack.conf", &e);
    switch (ctx) {
    case S_CTX_SLURMD:
        return on_slurmd_start();
    case S_CTX_ALLOCATOR:
        return config.sbatch_support ? register_options(sp) : 0;
    case S_CTX_LOCAL:
    case S_CTX_REMOTE:
        return register_options(sp);
    default:
        return 0;
    }
}

static const char *getenv_local(void *userdata, const char *name)
{
    return getenv(name);
}

/* A job variable from the step's environment; the buffer is the caller's. */
static const char *getenv_job(void *userdata, const char *name)
{
    static char buf[PATH_MAX * 4];
    spank_t sp = userdata;
    return spank_getenv(sp, name, buf, sizeof(buf)) == ESPANK_SUCCESS ? buf : NULL;
}

static void say_error(void *userdata, const char *msg)
{
    slurm_error("capsule: %s", msg);
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
    struct errmsg e = {{0}};
    bool remote = spank_context() == S_CTX_REMOTE;
    if (spank_context() != S_CTX_LOCAL && spank_context() != S_CTX_ALLOCATOR && !remote)
        return 0;
    if (pyxis_args_apply_env(&args, remote ? getenv_job : getenv_local, sp, &e) < 0)
        return fail(NULL, &e);
    enabled = pyxis_args_enabled(&args);
    if (!remote) {
        pyxis_args_say_ignored(&args, say_error, NULL);
        return 0;
    }
    uint32_t step = 0;
    uid_t uid;
    gid_t gid;
    if (spank_get_item(sp, S_JOB_STEPID, &step) != ESPANK_SUCCESS || step == SLURM_EXTERN_CONT)
        enabled = false;
    if (!enabled)
        return 0;
    if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_GID, &gid) != ESPANK_SUCCESS) {
        slurm_error("capsule: couldn't get the job's uid and gid");
        return -1;
    }
    /* As root: the user's own folder, which only they may enter. */
    if (sweep_user_dir(config.runtime_path, uid, gid, &e) < 0)
        return fail(NULL, &e);
    return 0;
}

/* What hold-args.h needs to know of the step. */
static int step_facts(spank_t sp, struct hold_step *st, struct errmsg *e)
{
    char **env = NULL, **argv = NULL;
    int argc = 0;
    if (spank_get_item(sp, S_JOB_UID, &st->uid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_GID, &st->gid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_ID, &st->job_id) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_STEPID, &st->step_id) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_ENV, &env) != ESPANK_SUCCESS)
        return errmsg_set(e, -EIO, "couldn't get the job's ids and environment");
    st->job_env = env;
    st->batch = st->step_id == SLURM_BATCH_SCRIPT;
    if (st->batch && (spank_get_item(sp, S_JOB_ARGV, &argc, &argv) != ESPANK_SUCCESS || argc < 1))
        return errmsg_set(e, -EIO, "couldn't get the batch script");
    st->batch_script = st->batch ? argv[0] : NULL;
    return 0;
}

/* hold_pmix_dir() of this slurmstepd; NULL when it has none. */
static char *find_pmix_dir(const struct hold_step *st)
{
    _cleanup_close_ int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    _cleanup_free_ char *maps = NULL;
    size_t len;
    if (fd < 0 || fd_read_all(fd, 16 << 20, &maps, &len) < 0)
        return NULL;
    return hold_pmix_dir(maps, st->job_id, st->step_id);
}

/* The entrypoint's output, to the job's output when wanted (Pyxis' --container-entrypoint-log,
 * or when the start failed); then gone. The file lies in the user's folder: only a regular file
 * of theirs is read, never blocking and at most ENTRYPOINT_LOG_MAX bytes (slurmstepd waits here,
 * and a fifo put in its place must not hold it). */
#define ENTRYPOINT_LOG_MAX (64 * 1024)
static void show_entrypoint_log(const struct hold_step *st, bool show)
{
    _cleanup_free_ char *path = hold_entrypoint_log(config.runtime_path, st);
    _cleanup_free_ char *text = malloc(ENTRYPOINT_LOG_MAX + 1);
    size_t len = 0;
    if (!path || !text)
        return;
    _cleanup_close_ int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    struct stat s;
    if (show && fd >= 0 && fstat(fd, &s) == 0 && S_ISREG(s.st_mode) && s.st_uid == st->uid &&
        fd_read_up_to(fd, text, ENTRYPOINT_LOG_MAX, &len) >= 0 && ((text[len] = '\0'), true))
        for (char *save = NULL, *line = strtok_r(text, "\n", &save); line;
             line = strtok_r(NULL, "\n", &save))
            slurm_spank_log("capsule: entrypoint: %s", line);
    (void)unlink(path);
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    if (!enabled || spank_context() != S_CTX_REMOTE)
        return 0;
    struct hold_step st = {0};
    struct hold_request req = {0};
    _cleanup_free_ char *pmix = NULL;
    int r = step_facts(sp, &st, &start_error);
    if (r >= 0)
        st.pmix_dir = pmix = find_pmix_dir(&st);
    if (r >= 0)
        r = hold_args_build(&args, &config, &st, capsule_program(), &req, &start_error);
    if (r >= 0) {
        struct step_spawn s = {
            .program = req.program, .argv = req.argv, .env = req.env, .uid = st.uid, .gid = st.gid};
        r = step_hold(&s, &holder, &start_error);
        /* Kept: in a task, Slurm's variable may hold that task's share only. */
        container_gpus = hold_step_gpus(&st);
    }
    hold_request_done(&req);
    if (st.job_env && hold_args_entrypoint(&args, &config))
        show_entrypoint_log(&st, r < 0 || args.entrypoint_log == 1);
    start_failed = r < 0;
    if (start_failed)
        slurm_info("capsule: job %u step %u: %s", st.job_id, st.step_id, start_error.text);
    return 0;
}

/* The task's own GPUs (--gpus-per-task), which Slurm set before this: renumbered as the
 * container numbers the step's, in place of the container's whole list. */
static void renumber_task_gpus(spank_t sp, const char *task_cvd)
{
    _cleanup_free_ char *mine = NULL;
    if (hold_task_gpus(container_gpus, task_cvd, &mine) == 0)
        spank_setenv(sp, "CUDA_VISIBLE_DEVICES", mine, 1);
}

/* The task's environment: the container's, except what the job's must keep. */
static int set_task_env(spank_t sp)
{
    char cvd[256];
    bool had_cvd = spank_getenv(sp, "CUDA_VISIBLE_DEVICES", cvd, sizeof(cvd)) == ESPANK_SUCCESS;
    static const char *const dropped[] = {"LANG", "LANGUAGE", "LC_ALL"};
    for (size_t i = 0; i < ELEMENTSOF(dropped); i++)
        if (!strv_contains(args.env_names, dropped[i]))
            spank_unsetenv(sp, dropped[i]);
    for (char **kv = holder.held.env; kv && *kv; kv++) {
        _cleanup_free_ char *name = strndup(*kv, (size_t)(strchr(*kv, '=') - *kv));
        if (!name)
            return -ENOMEM;
        if (hold_env_is_the_jobs(name))
            continue;
        bool keep = strv_contains(args.env_names, name);
        spank_err_t r = spank_setenv(sp, name, strchr(*kv, '=') + 1, !keep);
        if (r != ESPANK_SUCCESS && r != ESPANK_ENV_EXISTS) {
            slurm_error("capsule: couldn't set %s: %s", name, spank_strerror(r));
            return -1;
        }
    }
    if (!strv_contains(args.env_names, "CUDA_VISIBLE_DEVICES"))
        renumber_task_gpus(sp, had_cvd ? cvd : NULL);
    return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    if (!enabled)
        return 0;
    struct errmsg e = {{0}};
    /* This is the task's own process, just before its exec: a task that cannot be in its
     * container ends here, also where plugstack.conf says `optional` (where Slurm would run it
     * outside after a failed task_init). */
    if (start_failed) {
        fail(NULL, &start_error);
        _exit(1);
    }
    if (set_task_env(sp) < 0)
        _exit(1);
    if (step_join(&holder.held, args.workdir, &e) < 0) {
        fail(NULL, &e);
        _exit(1);
    }
    return 0;
}

/* --container-save, once: the step's files as an image archive, written as the user while the
 * container is still held, before srun returns. */
static int save_container(spank_t sp)
{
    struct hold_step st = {0};
    struct hold_request req = {0};
    struct errmsg e = {{0}};
    int r = step_facts(sp, &st, &e);
    if (r >= 0)
        r = hold_args_save(&args, &st, capsule_program(), &holder.held, &req, &e);
    if (r >= 0) {
        struct step_spawn s = {
            .program = req.program, .argv = req.argv, .env = req.env, .uid = st.uid, .gid = st.gid};
        r = step_run(&s, &e);
    }
    if (r >= 0)
        slurm_spank_log("capsule: saved the container to %s", req.argv[strv_length(req.argv) - 1]);
    hold_request_done(&req);
    return r < 0 ? fail("--container-save", &e) : 0;
}

int slurm_spank_task_exit(spank_t sp, int ac, char **av)
{
    uint32_t n = 0, node = 0;
    /* Once per step: on its first node (every node would write the same path), after its last
     * task there. */
    if (!enabled || start_failed || !args.save || spank_context() != S_CTX_REMOTE ||
        spank_get_item(sp, S_JOB_LOCAL_TASK_COUNT, &n) != ESPANK_SUCCESS || ++tasks_exited != n ||
        spank_get_item(sp, S_JOB_NODEID, &node) != ESPANK_SUCCESS || node != 0)
        return 0;
    return save_container(sp);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    if (spank_context() == S_CTX_REMOTE && holder.pid > 0 &&
        step_release(&holder, RELEASE_TIMEOUT_MS) == -ETIMEDOUT)
        slurm_error("capsule: the container's holder did not end in %d s; killed it",
                    RELEASE_TIMEOUT_MS / 1000);
    pyxis_args_done(&args);
    free(container_gpus);
    container_gpus = NULL;
    plugin_config_done(&config);
    return 0;
}

int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
    uid_t uid;
    uint32_t job;
    struct errmsg e = {{0}};
    /* The epilog's process may not have been through init. */
    if (!config.runtime_path && plugin_config_parse(ac, av, &config, &e) < 0) {
        slurm_error("capsule: epilog: plugstack.conf: %s", e.text);
        return 0;
    }
    if (spank_get_item(sp, S_JOB_UID, &uid) != ESPANK_SUCCESS ||
        spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS) {
        slurm_error("capsule: epilog: couldn't get the job's uid and id");
        return 0;
    }
    /* A leftover is logged, never a reason to drain the node (Pyxis' epilog drained nodes). */
    if (sweep_job(config.runtime_path, uid, job, &e) < 0)
        slurm_error("capsule: epilog: job %u: %s", job, e.text);
    return 0;
}
