/* Tests for Docker's Entrypoint/Cmd/Env/WorkingDir rules as capsule applies them: what a user
 * who moves an image from `docker run` to `capsule run` relies on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "test-main.h"

#include "capsule/image/spec.h"
#include "lib/strv.h"

static char *entry_python[] = {"/usr/bin/python3", "-u", NULL};
static char *cmd_server[] = {"server.py", "--port", "80", NULL};
static char *img_env[] = {"PATH=/opt/bin:/usr/bin", "LANG=C", "NVIDIA_VISIBLE_DEVICES=all", NULL};

static struct image_config image(void)
{
    return (struct image_config){
        .env = img_env, .entrypoint = entry_python, .cmd = cmd_server, .working_dir = "/app"};
}

static void assert_argv(char **argv, const char *const *expect)
{
    size_t i = 0;
    for (; expect[i]; i++) {
        assert_non_null(argv[i]);
        assert_string_equal(argv[i], expect[i]);
    }
    assert_null(argv[i]);
}

static void test_entrypoint_plus_cmd(void **state)
{
    struct image_config img = image();
    struct spec_flags f = {0};
    struct spec_result r;
    assert_int_equal(spec_build(&img, &f, NULL, &r, NULL), 0);
    assert_argv(r.argv,
                (const char *const[]){"/usr/bin/python3", "-u", "server.py", "--port", "80", NULL});
    assert_string_equal(r.cwd, "/app");
    spec_result_done(&r);
}

static void test_args_replace_cmd_not_entrypoint(void **state)
{
    struct image_config img = image();
    char *args[] = {"other.py", NULL};
    struct spec_flags f = {.args = args};
    struct spec_result r;
    assert_int_equal(spec_build(&img, &f, NULL, &r, NULL), 0);
    assert_argv(r.argv, (const char *const[]){"/usr/bin/python3", "-u", "other.py", NULL});
    spec_result_done(&r);
}

static void test_entrypoint_flag_drops_image_cmd(void **state)
{
    struct image_config img = image();
    struct spec_flags f = {.entrypoint = "/bin/sh"};
    struct spec_result r;
    assert_int_equal(spec_build(&img, &f, NULL, &r, NULL), 0);
    assert_argv(r.argv, (const char *const[]){"/bin/sh", NULL});
    /* An empty --entrypoint clears it: the arguments are the whole command. */
    char *args[] = {"ls", "-l", NULL};
    struct spec_flags f2 = {.entrypoint = "", .args = args};
    struct spec_result r2;
    assert_int_equal(spec_build(&img, &f2, NULL, &r2, NULL), 0);
    assert_argv(r2.argv, (const char *const[]){"ls", "-l", NULL});
    spec_result_done(&r);
    spec_result_done(&r2);
}

static void test_no_command_is_an_error(void **state)
{
    struct image_config img = {.env = img_env};
    struct spec_flags f = {0};
    struct spec_result r;
    struct errmsg e = {{0}};
    assert_int_equal(spec_build(&img, &f, NULL, &r, &e), -EINVAL);
    assert_non_null(strstr(e.text, "no Entrypoint or Cmd"));
}

static void test_env_order_and_defaults(void **state)
{
    char *no_path_env[] = {"A=image", NULL};
    struct image_config img = {.env = no_path_env, .cmd = cmd_server};
    char *host[] = {"TERM=xterm", "SLURM_JOB_ID=42", "SECRET=x", "HOSTVAR=h", "A=host", NULL};
    char *gpu_env[] = {"NVIDIA_VISIBLE_DEVICES=GPU-1", "A=gpu", NULL};
    char *user_env[] = {"A=user", "HOSTVAR", "MISSING", NULL};
    struct spec_flags f = {.env = user_env,
                           .runtime_env = gpu_env,
                           .name = "job1",
                           .user_name = "alice",
                           .home = "/home/alice"};
    struct spec_result r;
    assert_int_equal(spec_build(&img, &f, host, &r, NULL), 0);
    assert_string_equal(strv_env_get(r.env, "PATH"), SPEC_DEFAULT_PATH);
    assert_string_equal(strv_env_get(r.env, "TERM"), "xterm");
    assert_string_equal(strv_env_get(r.env, "SLURM_JOB_ID"), "42");
    /* The host's other variables stay out: an image must behave the same on every host. */
    assert_null(strv_env_get(r.env, "SECRET"));
    /* --env wins over the GPU's, which win over the image's. */
    assert_string_equal(strv_env_get(r.env, "A"), "user");
    assert_string_equal(strv_env_get(r.env, "NVIDIA_VISIBLE_DEVICES"), "GPU-1");
    assert_string_equal(strv_env_get(r.env, "HOSTVAR"), "h");
    assert_null(strv_env_get(r.env, "MISSING"));
    assert_string_equal(strv_env_get(r.env, "HOME"), "/home/alice");
    assert_string_equal(strv_env_get(r.env, "USER"), "alice");
    assert_string_equal(strv_env_get(r.env, "CAPSULE_NAME"), "job1");
    assert_string_equal(strv_env_get(r.env, "container"), "capsule");
    assert_string_equal(r.cwd, "/");
    spec_result_done(&r);
}

static void test_remap_root_identity(void **state)
{
    struct image_config img = image();
    struct spec_flags f = {.remap_root = true,
                           .no_home = true,
                           .user_name = "alice",
                           .home = "/home/alice",
                           .workdir = "/data"};
    struct spec_result r;
    assert_int_equal(spec_build(&img, &f, NULL, &r, NULL), 0);
    assert_string_equal(strv_env_get(r.env, "USER"), "root");
    assert_string_equal(strv_env_get(r.env, "HOME"), "/root");
    assert_string_equal(strv_env_get(r.env, "PATH"), "/opt/bin:/usr/bin");
    assert_string_equal(r.cwd, "/data");
    spec_result_done(&r);
}

static void test_bad_flags(void **state)
{
    struct image_config img = image();
    struct spec_result r;
    struct errmsg e = {{0}};
    char *bad_env[] = {"=x", NULL};
    struct spec_flags f = {.env = bad_env};
    assert_int_equal(spec_build(&img, &f, NULL, &r, &e), -EINVAL);
    assert_non_null(strstr(e.text, "'=x'"));
    struct spec_flags f2 = {.workdir = "relative"};
    assert_int_equal(spec_build(&img, &f2, NULL, &r, &e), -EINVAL);
    assert_non_null(strstr(e.text, "'relative'"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_entrypoint_plus_cmd),
        cmocka_unit_test(test_args_replace_cmd_not_entrypoint),
        cmocka_unit_test(test_entrypoint_flag_drops_image_cmd),
        cmocka_unit_test(test_no_command_is_an_error),
        cmocka_unit_test(test_env_order_and_defaults),
        cmocka_unit_test(test_remap_root_identity),
        cmocka_unit_test(test_bad_flags),
    };
    return test_run_cases(tests);
}
