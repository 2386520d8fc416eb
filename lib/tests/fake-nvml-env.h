/* What the tests of lib/nvml.c and lib/gpu.c share to drive the fake libnvidia-ml.so.1
 * (tests/fake-nvml): a temp dir per test program, fixtures written into it, and the paths of
 * the fake's builds that meson passes in the environment (FAKE_NVML_LIB, FAKE_NVML_OLD_LIB). */
#pragma once

/* cmocka group setup and teardown: make and remove the temp dir (and the fixture in it). */
int fake_env_setup(void **state);
int fake_env_teardown(void **state);

/* The temp dir, for paths of a test's own. */
const char *fake_env_dir(void);

/* Writes text as the fixture the fake reads (renamed over the old one, so that the fake sees a
 * new file) and points FAKE_NVML_FIXTURE at it. Single quotes in text become double quotes, so
 * that fixtures read well in C strings; write \" where a text needs no translation. */
void fake_env_fixture(const char *text);

/* The value of a variable meson sets for the test; fails the test without it. */
const char *fake_env_get(const char *name);
