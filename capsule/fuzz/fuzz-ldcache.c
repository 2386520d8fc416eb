/* Fuzzes the reader of `ldconfig -p` output, which comes from the driver root's ld cache (a
 * file any driver installation, or a stand-in tree, provides). Every entry it keeps must have
 * the shape the library search relies on. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "capsule/gpu/driver-files.h"
#include "lib/fuzz-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ldcache_entry *v = NULL;
    size_t n = 0;
    struct errmsg e;
    int r = ldcache_parse((const char *)data, size, &v, &n, &e);
    CHECK(r == 0 || r == -ENOMEM);
    for (size_t i = 0; i < n; i++) {
        CHECK(v[i].name[0] && !strchr(v[i].name, '/') && !strchr(v[i].name, ' '));
        CHECK(v[i].path[0] == '/');
        CHECK(!strchr(v[i].path, '\n'));
        CHECK(strlen(v[i].name) + strlen(v[i].path) < size);
    }
    ldcache_free(v, n);
    return 0;
}
