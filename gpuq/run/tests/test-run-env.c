/* gpuq/run/run-env: the environment, command line and working directory of a job. What a job
 * relies on: the GPUs gpuqd gave it are the ones it sees whatever the user put in his
 * environment, it knows its id, and it runs as the account gpuqd looked up. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "gpuq/run/run-env.h"
#include "lib/strv.h"

static char *const user_env[] = {
    "CUDA_VISIBLE_DEVICES=0,1,2,3", /* the user's own: must not stand */
    "NVIDIA_VISIBLE_DEVICES=all",
    "GPUQ_JOB_ID=1",
    "HOME=/elsewhere",
    "USER=root",
    "LD_LIBRARY_PATH=/opt/lib",
    "EPOCHS=3",
    "EPOCHS=5", /* the later one wins, as in a shell */
    /* what gpuqd appends: the job's GPUs */
    "CUDA_VISIBLE_DEVICES=GPU-aaaa",
    "NVIDIA_VISIBLE_DEVICES=GPU-aaaa",
    NULL,
};

static char *const job_argv[] = {"python3", "train.py", NULL};

static struct run_spec spec(char **env)
{
    return (struct run_spec){
        .job_id = 77,
        .uid = 1000,
        .gid = 1000,
        .user = "ann",
        .home = "/home/ann",
        .shell = "/bin/zsh",
        .argv = (char **)job_argv,
        .env = env,
    };
}

static void test_forced_names_win(void **state)
{
    struct run_spec s = spec((char **)user_env);
    char **env = NULL;
    assert_int_equal(run_env_build(&s, &env), 0);
    assert_string_equal(strv_env_get(env, "CUDA_VISIBLE_DEVICES"), "GPU-aaaa");
    assert_string_equal(strv_env_get(env, "NVIDIA_VISIBLE_DEVICES"), "GPU-aaaa");
    assert_string_equal(strv_env_get(env, "GPUQ_JOB_ID"), "77");
    assert_string_equal(strv_env_get(env, "EPOCHS"), "5");
    /* Each name once: a program that reads the first of two would see the user's. */
    size_t cuda = 0;
    for (size_t i = 0; env[i]; i++)
        cuda += strncmp(env[i], "CUDA_VISIBLE_DEVICES=", 21) == 0;
    assert_int_equal(cuda, 1);
    /* The job runs as its user: what he could set himself stays. */
    assert_string_equal(strv_env_get(env, "LD_LIBRARY_PATH"), "/opt/lib");
    strv_free(env);
}

static void test_passwd_values_and_defaults(void **state)
{
    struct run_spec s = spec((char **)user_env);
    char **env = NULL;
    assert_int_equal(run_env_build(&s, &env), 0);
    assert_string_equal(strv_env_get(env, "HOME"), "/home/ann");
    assert_string_equal(strv_env_get(env, "USER"), "ann");
    assert_string_equal(strv_env_get(env, "LOGNAME"), "ann");
    assert_string_equal(strv_env_get(env, "SHELL"), "/bin/zsh");
    assert_string_equal(strv_env_get(env, "PATH"), RUN_ENV_DEFAULT_PATH);
    strv_free(env);
    /* The user's PATH is his; no shell in passwd is /bin/sh. */
    s.env = (char *[]){"PATH=/opt/bin:/usr/bin", "CUDA_VISIBLE_DEVICES=0", NULL};
    s.shell = NULL;
    assert_int_equal(run_env_build(&s, &env), 0);
    assert_string_equal(strv_env_get(env, "PATH"), "/opt/bin:/usr/bin");
    assert_string_equal(strv_env_get(env, "SHELL"), "/bin/sh");
    /* No GPU list from gpuqd: no GPU, not the user's own list, and not through an image's
     * NVIDIA_VISIBLE_DEVICES. */
    assert_string_equal(strv_env_get(env, "NVIDIA_VISIBLE_DEVICES"), "void");
    assert_string_equal(strv_env_get(env, "CUDA_VISIBLE_DEVICES"), "");
    strv_free(env);
}

static void test_plain_argv_and_cwd(void **state)
{
    struct run_spec s = spec((char **)user_env);
    char **argv = NULL;
    assert_int_equal(run_env_argv(&s, NULL, &argv), 0);
    assert_int_equal(strv_length(argv), 2);
    assert_string_equal(argv[0], "python3");
    assert_string_equal(argv[1], "train.py");
    strv_free(argv);
    assert_string_equal(run_env_cwd(&s), "/home/ann");
    s.cwd = "/data";
    assert_string_equal(run_env_cwd(&s), "/data");
}

static void test_image_argv(void **state)
{
    struct run_spec s = spec((char **)user_env);
    s.image = "nvcr.io/nvidia/pytorch:24.01-py3";
    s.capsule = "/usr/bin/capsule";
    s.cwd = "/workspace";
    char **env = NULL, **argv = NULL;
    assert_int_equal(run_env_build(&s, &env), 0);
    assert_int_equal(run_env_argv(&s, env, &argv), 0);
    char *line = strv_join(argv, " ");
    /* Names only (values stay out of /proc/PID/cmdline); the GPU lists, PATH and the account's
     * names are capsule's to set; the job's id goes in. */
    assert_string_equal(line, "/usr/bin/capsule run --rm -w /workspace -e LD_LIBRARY_PATH "
                              "-e EPOCHS -e GPUQ_JOB_ID nvcr.io/nvidia/pytorch:24.01-py3 "
                              "python3 train.py");
    free(line);
    strv_free(argv);
    /* The working directory is inside the container: the host process starts at "/". */
    assert_string_equal(run_env_cwd(&s), "/");
    /* No command: the image's own, and no -w: the image's WORKDIR. */
    s.argv = (char *[]){NULL};
    s.cwd = NULL;
    assert_int_equal(run_env_argv(&s, env, &argv), 0);
    line = strv_join(argv, " ");
    assert_string_equal(line, "/usr/bin/capsule run --rm -e LD_LIBRARY_PATH -e EPOCHS "
                              "-e GPUQ_JOB_ID nvcr.io/nvidia/pytorch:24.01-py3");
    free(line);
    strv_free(argv);
    strv_free(env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forced_names_win),
        cmocka_unit_test(test_passwd_values_and_defaults),
        cmocka_unit_test(test_plain_argv_and_cwd),
        cmocka_unit_test(test_image_argv),
    };
    return test_run_cases(tests);
}
