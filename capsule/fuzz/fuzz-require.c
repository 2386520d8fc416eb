/* libFuzzer target: NVIDIA_REQUIRE_* values. require_check() must agree with require_parse()
 * (a value that parses is accepted or refused, never called malformed), NVIDIA_DISABLE_REQUIRE
 * must switch the check off, and the version order must be antisymmetric. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lib/fuzz-check.h"
#include "capsule/image/require.h"

static int sign(int x)
{
    return (x > 0) - (x < 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const archs[] = {"9.0", "8.6", NULL};
    static const struct require_host hosts[] = {
        {.cuda = "12.2", .driver = "535.104.05", .brand = "tesla", .archs = archs},
        {.cuda = "13.0", .driver = "580.159.04", .brand = "nvidia", .archs = NULL},
        {.cuda = "", .driver = "", .brand = "", .archs = NULL},
    };
    struct errmsg e = {""};

    char *value = strndup((const char *)data, size);
    char *entry = NULL;
    if (!value || asprintf(&entry, "NVIDIA_REQUIRE_CUDA=%s", value) < 0) {
        free(value);
        return 0;
    }
    int parsed = require_parse(value, &e);
    CHECK(parsed == 0 || parsed == -EINVAL || parsed == -ENOMEM);
    for (size_t h = 0; h < sizeof(hosts) / sizeof(hosts[0]); h++) {
        char *env[] = {(char *)"PATH=/bin", entry, NULL, NULL};
        int k = require_check(env, &hosts[h], &e);
        if (parsed == -EINVAL)
            CHECK(k == -EINVAL);
        else if (parsed == 0)
            CHECK(k == 0 || k == -EPERM || k == -ENOMEM);
        /* A host that reports nothing satisfies every well-formed requirement. */
        if (parsed == 0 && !*hosts[h].cuda)
            CHECK(k == 0 || k == -ENOMEM);
        env[2] = (char *)"NVIDIA_DISABLE_REQUIRE=true";
        CHECK(require_check(env, &hosts[h], &e) == 0);
    }
    (void)require_min_driver_for_cuda(value);

    /* The input split at its first ',' gives two versions to order. */
    char *comma = strchr(value, ',');
    const char *a = value, *b = "";
    if (comma) {
        *comma = '\0';
        b = comma + 1;
    }
    CHECK(require_version_cmp(a, a) == 0);
    CHECK(sign(require_version_cmp(a, b)) == -sign(require_version_cmp(b, a)));
    free(entry);
    free(value);
    return 0;
}
