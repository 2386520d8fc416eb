/* Tests for what spank_capsule.so makes of Pyxis' options, its plugstack.conf arguments and the
 * holder's line: the rules sbatch scripts written for Pyxis rely on, and what reaches capsule. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "capsule/slurm/held.h"
#include "capsule/slurm/hold-args.h"
#include "capsule/slurm/plugin-config.h"
#include "capsule/slurm/pyxis-args.h"
#include "lib/strv.h"

static int set(struct pyxis_args *a, enum pyxis_opt o, const char *v, struct errmsg *e)
{
    return pyxis_args_set(a, o, v, e);
}

static void test_single_values_and_pairs(void **state)
{
    struct pyxis_args a;
    struct errmsg e = {""};
    pyxis_args_init(&a);
    assert_false(pyxis_args_enabled(&a));
    assert_int_equal(set(&a, PYXIS_OPT_IMAGE, "nvcr.io#nvidia/pytorch:24.01-py3", &e), 0);
    /* srun, then slurmstepd: the same value twice is one option */
    assert_int_equal(set(&a, PYXIS_OPT_IMAGE, "nvcr.io#nvidia/pytorch:24.01-py3", &e), 0);
    assert_int_equal(set(&a, PYXIS_OPT_IMAGE, "ubuntu", &e), -EINVAL);
    assert_string_equal(e.text, "--container-image specified multiple times");
    assert_true(pyxis_args_enabled(&a));
    assert_int_equal(set(&a, PYXIS_OPT_WRITABLE, NULL, &e), 0);
    assert_int_equal(set(&a, PYXIS_OPT_READONLY, NULL, &e), -EINVAL);
    assert_string_equal(e.text,
                        "both --container-writable and --container-readonly were specified");
    assert_int_equal(set(&a, PYXIS_OPT_WORKDIR, "", &e), -EINVAL);
    assert_string_equal(e.text, "--container-workdir: argument required");
    assert_int_equal(set(&a, PYXIS_OPT_SAVE, "/out/", &e), -EINVAL);
    assert_string_equal(e.text, "--container-save: target is a directory");
    pyxis_args_done(&a);
}

static void test_images_and_names(void **state)
{
    struct pyxis_args a;
    struct errmsg e = {""};
    pyxis_args_init(&a);
    assert_int_equal(set(&a, PYXIS_OPT_IMAGE, "Ubuntu", &e), -EINVAL);
    assert_non_null(strstr(e.text, "--container-image"));
    assert_int_equal(set(&a, PYXIS_OPT_IMAGE, "dockerd://img", &e), -EINVAL);
    assert_int_equal(set(&a, PYXIS_OPT_IMAGE, "podman://img", &e), -EINVAL);
    assert_int_equal(set(&a, PYXIS_OPT_IMAGE, "docker://user@nvcr.io#nvidia/cuda:12.4", &e), 0);
    pyxis_args_done(&a);
    pyxis_args_init(&a);
    /* an image archive (--container-save's), found when the step starts */
    assert_int_equal(set(&a, PYXIS_OPT_IMAGE, "./ubuntu.sqsh", &e), -EINVAL);
    assert_non_null(strstr(e.text, "squashfs images (enroot's) cannot be run"));
    assert_int_equal(set(&a, PYXIS_OPT_IMAGE, "./env.tar", &e), 0);
    assert_int_equal(set(&a, PYXIS_OPT_NAME, "dev:exec", &e), 0);
    assert_string_equal(a.name, "dev");
    assert_int_equal(a.name_flag, PYXIS_NAME_EXEC);
    assert_int_equal(set(&a, PYXIS_OPT_NAME, "dev", &e), -EINVAL);
    pyxis_args_done(&a);
    pyxis_args_init(&a);
    assert_int_equal(set(&a, PYXIS_OPT_NAME, "dev:later", &e), -EINVAL);
    assert_string_equal(e.text, "--container-name: flag must be \"auto\", \"create\", \"exec\" or "
                                "\"no_exec\"");
    assert_int_equal(set(&a, PYXIS_OPT_NAME, ":create", &e), -EINVAL);
    assert_string_equal(e.text, "--container-name: empty name");
    assert_int_equal(set(&a, PYXIS_OPT_NAME, "/tmp/foo", &e), -EINVAL);
    pyxis_args_done(&a);
}

static void test_mounts(void **state)
{
    struct pyxis_args a;
    struct errmsg e = {""};
    pyxis_args_init(&a);
    assert_int_equal(set(&a, PYXIS_OPT_MOUNTS,
                         "/data:/in:ro+rprivate,/var/lib,tmpfs:/scratch:size=1G+ro,/a b:/c d", &e),
                     0);
    /* accumulates; an exact repeat is dropped */
    assert_int_equal(set(&a, PYXIS_OPT_MOUNTS, "/var/lib", &e), 0);
    assert_int_equal(a.n_mounts, 4);
    assert_string_equal(a.mounts[0].src, "/data");
    assert_string_equal(a.mounts[0].dst, "/in");
    assert_true(a.mounts[0].ro);
    assert_string_equal(a.mounts[1].dst, "/var/lib");
    assert_null(a.mounts[2].src);
    assert_string_equal(a.mounts[2].tmpfs_options, "size=1G");
    assert_true(a.mounts[2].ro);
    assert_string_equal(a.mounts[3].dst, "/c d");
    static const char *const bad[][2] = {
        {":", "--container-mounts: invalid format: :"},
        {"/tmp:", "--container-mounts: invalid format: /tmp:"},
        {"/tmp:mnt", "mount target must be a relative path or an absolute path"},
        {"devpts:/dev/pts", "mount source must be a relative path"},
        {"/a:/b:slave", "mount flag 'slave' is not supported"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(set(&a, PYXIS_OPT_MOUNTS, bad[i][0], &e), -EINVAL);
        assert_non_null(strstr(e.text, bad[i][1]));
    }
    pyxis_args_done(&a);
}

static const char *env_of(void *userdata, const char *name)
{
    return strv_env_get(userdata, name);
}

static void test_environment_defaults(void **state)
{
    char *env[] = {"PYXIS_CONTAINER_IMAGE=ubuntu:22.04",
                   "PYXIS_CONTAINER_MOUNTS=/x:/y",
                   "PYXIS_CONTAINER_READONLY=1",
                   "PYXIS_CONTAINER_WRITABLE=yes",
                   "PYXIS_CONTAINER_ENV=A,B",
                   NULL};
    struct pyxis_args a;
    struct errmsg e = {""};
    pyxis_args_init(&a);
    assert_int_equal(set(&a, PYXIS_OPT_MOUNTS, "/cli:/cli", &e), 0);
    assert_int_equal(pyxis_args_apply_env(&a, env_of, env, &e), 0);
    assert_string_equal(a.image, "ubuntu:22.04");
    /* the command line's mounts win, whole: lists are not merged */
    assert_int_equal(a.n_mounts, 1);
    assert_string_equal(a.mounts[0].src, "/cli");
    /* _WRITABLE is read before _READONLY */
    assert_int_equal(a.writable, 1);
    assert_true(strv_contains(a.env_names, "B"));
    pyxis_args_done(&a);
    char *unshare[] = {"PYXIS_CONTAINER_UNSHARE=net", NULL};
    pyxis_args_init(&a);
    assert_int_equal(pyxis_args_apply_env(&a, env_of, unshare, &e), -EINVAL);
    assert_non_null(strstr(e.text, "PYXIS_CONTAINER_UNSHARE"));
    pyxis_args_done(&a);
    char *bad[] = {"PYXIS_CONTAINER_REMAP_ROOT=maybe", NULL};
    pyxis_args_init(&a);
    assert_int_equal(pyxis_args_apply_env(&a, env_of, bad, &e), -EINVAL);
    assert_non_null(strstr(e.text, "PYXIS_CONTAINER_REMAP_ROOT"));
    pyxis_args_done(&a);
}

static void test_plugin_config(void **state)
{
    struct plugin_config c;
    struct errmsg e = {""};
    char *none[] = {NULL};
    assert_int_equal(plugin_config_parse(0, none, &c, &e), 0);
    assert_string_equal(c.runtime_path, PLUGIN_RUNTIME_PATH_DEFAULT);
    assert_int_equal(c.scope, PLUGIN_SCOPE_JOB);
    assert_true(c.sbatch_support);
    assert_false(c.execute_entrypoint);
    plugin_config_done(&c);
    char *args[] = {"runtime_path=/var/lib/cs", "container_scope=global", "sbatch_support=no",
                    NULL};
    assert_int_equal(plugin_config_parse(3, args, &c, &e), 0);
    assert_string_equal(c.runtime_path, "/var/lib/cs");
    assert_int_equal(c.scope, PLUGIN_SCOPE_GLOBAL);
    assert_false(c.sbatch_support);
    plugin_config_done(&c);
    char *unknown[] = {"use_enroot_load=1", NULL};
    assert_int_equal(plugin_config_parse(1, unknown, &c, &e), -EINVAL);
    assert_non_null(strstr(e.text, "unknown configuration option: use_enroot_load"));
    char *badscope[] = {"container_scope=node", NULL};
    assert_int_equal(plugin_config_parse(1, badscope, &c, &e), -EINVAL);
    char *relative[] = {"runtime_path=run", NULL};
    assert_int_equal(plugin_config_parse(1, relative, &c, &e), -EINVAL);
}

static void test_hold_arguments(void **state)
{
    struct pyxis_args a;
    struct plugin_config c = {.runtime_path = "/run/cs", .scope = PLUGIN_SCOPE_JOB};
    struct errmsg e = {""};
    pyxis_args_init(&a);
    assert_int_equal(set(&a, PYXIS_OPT_IMAGE, "ubuntu", &e), 0);
    assert_int_equal(set(&a, PYXIS_OPT_NAME, "dev:create", &e), 0);
    assert_int_equal(set(&a, PYXIS_OPT_MOUNTS, "/tmp:/t:ro,tmpfs:/s:size=1M", &e), 0);
    assert_int_equal(set(&a, PYXIS_OPT_NO_MOUNT_HOME, NULL, &e), 0);
    char *job_env[] = {"PATH=/home/u/bin",
                       "LANG=de_DE.UTF-8",
                       "SLURM_STEP_GPUS=2,3",
                       "CUDA_VISIBLE_DEVICES=0,1",
                       "LD_PRELOAD=/x.so",
                       "PWD=/home/u",
                       NULL};
    struct hold_step st = {.uid = 1000, .gid = 100, .job_id = 7, .step_id = 0, .job_env = job_env};
    struct hold_request req = {0};
    assert_int_equal(hold_args_build(&a, &c, &st, "/usr/bin/capsule", &req, &e), 0);
    _cleanup_free_ char *line = strv_join(req.argv, " ");
    assert_string_equal(line, "/usr/bin/capsule -q hold --fd 3 --data-dir /run/cs/1000/jobs/7 "
                              "--name dev --create-only --no-home --mount /tmp:/t:ro "
                              "--mount tmpfs:/s:size=1M --gpus 2,3 ubuntu");
    assert_string_equal(strv_env_get(req.env, "PATH"), "/usr/local/bin:/usr/bin:/bin");
    assert_null(strv_env_get(req.env, "LANG"));
    assert_null(strv_env_get(req.env, "LD_PRELOAD"));
    hold_request_done(&req);
    /* a missing source is refused by name; relative sources start at the job's directory */
    assert_int_equal(set(&a, PYXIS_OPT_MOUNTS, "./no-such-thing:/x", &e), 0);
    assert_int_equal(hold_args_build(&a, &c, &st, "/usr/bin/capsule", &req, &e), -ENOENT);
    assert_string_equal(e.text, "--container-mounts: source path does not exist: ./no-such-thing");
    pyxis_args_done(&a);
    /* a step without GPUs gets none; global scope keeps named containers per user */
    pyxis_args_init(&a);
    c.scope = PLUGIN_SCOPE_GLOBAL;
    assert_int_equal(set(&a, PYXIS_OPT_NAME, "dev", &e), 0);
    char *plain[] = {NULL};
    st.job_env = plain;
    assert_int_equal(hold_args_build(&a, &c, &st, "capsule", &req, &e), 0);
    _cleanup_free_ char *line2 = strv_join(req.argv, " ");
    assert_string_equal(line2, "capsule -q hold --fd 3 --data-dir /run/cs/1000/global --name dev "
                               "--join --gpus none");
    hold_request_done(&req);
    pyxis_args_done(&a);
    /* the step's PMIx directory, from slurmstepd's maps */
    static const char maps[] =
        "7f65662ff000-7f6566300000 rw-s 00000000 fe:00 1   /usr/lib/libpmix.so.2\n"
        "7f65662ff000-7f6566300000 rw-s 00000000 fe:00 2   "
        "/var/spool/slurmd/pmix.12.3/pmix_dstor_ds21_612/initial-pmix_shared-segment-0\n"
        "7f65662ff000-7f6566300000 rw-s 00000000 fe:00 3   "
        "/var/spool/slurmd/pmix.12.4/pmix_dstor_ds21_613/initial-pmix_shared-segment-0\n";
    char *dir = hold_pmix_dir(maps, 12, 4);
    assert_string_equal(dir, "/var/spool/slurmd/pmix.12.4");
    free(dir);
    assert_null(hold_pmix_dir(maps, 12, 5));
    assert_null(hold_pmix_dir("", 1, 0));
    /* a task's own GPUs, renumbered as the container numbers the step's */
    char *mine = NULL;
    assert_int_equal(hold_task_gpus("2,3", "3", &mine), 0);
    assert_string_equal(mine, "1");
    free(mine);
    assert_int_equal(hold_task_gpus("0,2,5", "5,0", &mine), 0);
    assert_string_equal(mine, "2,0");
    free(mine);
    assert_int_equal(hold_task_gpus("2,3", "7", &mine), 1);
    assert_int_equal(hold_task_gpus("2,3", NULL, &mine), 1);
    assert_int_equal(hold_task_gpus(NULL, "0", &mine), 1);
    assert_true(hold_env_is_the_jobs("SLURM_PROCID"));
    assert_true(hold_env_is_the_jobs("PMIX_RANK"));
    assert_false(hold_env_is_the_jobs("OMPI_MCA_pml"));
}

static void test_held_line(void **state)
{
    static const char good[] = "{\"pid\":42,\"argv\":[],\"env\":[\"A=1\"],\"cwd\":\"/w\","
                               "\"remap_root\":true,\"joined\":false}\n";
    struct held h;
    struct errmsg e = {""};
    assert_int_equal(held_parse(good, strlen(good), &h, &e), 0);
    assert_int_equal(h.pid, 42);
    assert_string_equal(h.env[0], "A=1");
    assert_string_equal(h.cwd, "/w");
    assert_true(h.remap_root);
    held_done(&h);
#define REST "\"remap_root\":false,\"joined\":false}"
    static const char *const bad[] = {
        "",
        "{}",
        "{\"pid\":1,\"argv\":[],\"env\":[],\"cwd\":\"/\"," REST,
        "{\"pid\":42,\"argv\":[],\"env\":[\"=x\"],\"cwd\":\"/\"," REST,
        "{\"pid\":42,\"argv\":[],\"env\":[],\"cwd\":\"rel\"," REST,
    };
#undef REST
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_int_equal(held_parse(bad[i], strlen(bad[i]), &h, &e), -EBADMSG);
        assert_true(e.text[0]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_single_values_and_pairs),
        cmocka_unit_test(test_images_and_names),
        cmocka_unit_test(test_mounts),
        cmocka_unit_test(test_environment_defaults),
        cmocka_unit_test(test_plugin_config),
        cmocka_unit_test(test_hold_arguments),
        cmocka_unit_test(test_held_line),
    };
    return test_run_cases(tests);
}
