/* libFuzzer target: image_config_parse() on arbitrary bytes. A parsed config must give the
 * runtime well-formed lists: NULL-terminated, "K=V" environment entries, valid diff_ids, and
 * Entrypoint/Cmd that are either NULL or non-empty. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/image/capsule-limits.h"
#include "capsule/image/digest.h"
#include "lib/fuzz-check.h"
#include "capsule/image/manifest.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct image_config c = {};
    struct errmsg e = {""};

    int k = image_config_parse(data, size, &c, &e);
    CHECK(k == 0 || k == -EINVAL || k == -ENOTSUP || k == -ENOMEM);
    if (k < 0) {
        CHECK(strncmp(e.text, "config: ", 8) == 0);
        CHECK(!c.env && !c.diff_ids);
        return 0;
    }
    CHECK(c.architecture && c.os && c.env && c.diff_ids);
    for (char **p = c.env; *p; p++)
        CHECK(strchr(*p, '=') && (*p)[0] != '=');
    CHECK(!c.entrypoint || c.entrypoint[0]);
    CHECK(!c.cmd || c.cmd[0]);
    CHECK(!c.working_dir || *c.working_dir);
    CHECK(!c.user || *c.user);
    size_t n = 0;
    for (char **p = c.diff_ids; *p; p++, n++)
        CHECK(digest_valid(*p));
    CHECK(n == c.n_diff_ids && n <= CAPSULE_LAYERS_MAX);
    image_config_done(&c);
    return 0;
}
