/* Fixtures and paths for the tests that run against the fake NVML; see fake-nvml-env.h. */
#include "fake-nvml-env.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cmocka.h>

static char tmpdir[64];

int fake_env_setup(void **state)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-fake-nvml-XXXXXX");
    return mkdtemp(tmpdir) ? 0 : -1;
}

int fake_env_teardown(void **state)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/fixture.json", tmpdir);
    unlink(path);
    return rmdir(tmpdir);
}

const char *fake_env_dir(void)
{
    return tmpdir;
}

void fake_env_fixture(const char *text)
{
    char path[128], tmp[128];
    snprintf(path, sizeof(path), "%s/fixture.json", tmpdir);
    snprintf(tmp, sizeof(tmp), "%s/fixture.json.new", tmpdir);
    FILE *f = fopen(tmp, "we");
    assert_non_null(f);
    for (const char *p = text; *p; p++)
        fputc(*p == '\'' ? '"' : *p, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(rename(tmp, path), 0);
    assert_int_equal(setenv("FAKE_NVML_FIXTURE", path, 1), 0);
}

const char *fake_env_get(const char *name)
{
    const char *v = getenv(name);
    if (!v)
        fail_msg("%s is not set; run through meson test", name);
    return v;
}
