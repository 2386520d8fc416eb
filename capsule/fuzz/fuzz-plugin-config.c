/* libFuzzer target: plugstack.conf's arguments for spank_capsule.so, split at blanks as Slurm
 * splits them. Parsed or refused with a message; a parsed config has an absolute runtime_path. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/slurm/plugin-config.h"
#include "lib/fuzz-check.h"
#include "lib/strv.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = strndup((const char *)data, size);
    char **argv = NULL;
    if (!text || strv_split_blanks(text, &argv) < 0) {
        free(text);
        return 0;
    }
    struct plugin_config c;
    struct errmsg e = {""};
    int r = plugin_config_parse((int)strv_length(argv), argv, &c, &e);
    CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
    if (r == 0) {
        CHECK(c.runtime_path && c.runtime_path[0] == '/');
        plugin_config_done(&c);
    } else
        CHECK(e.text[0]);
    strv_free(argv);
    free(text);
    return 0;
}
