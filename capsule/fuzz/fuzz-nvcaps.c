/* Fuzzes the reader of /proc/driver/nvidia/capabilities/.../access files, whose minor names the
 * /dev/nvidia-caps node a MIG device's container gets. */
#include <errno.h>
#include <stdint.h>

#include "capsule/gpu/driver-files.h"
#include "lib/fuzz-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned minor = 0xdeadbeef;
    struct errmsg e;
    int r = nvcaps_parse_minor((const char *)data, size, &minor, &e);
    CHECK(r == 0 || r == -EINVAL);
    if (r == 0)
        CHECK(minor < (1u << 20));
    else
        CHECK(minor == 0xdeadbeef && e.text[0]);
    return 0;
}
