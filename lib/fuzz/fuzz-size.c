/* libFuzzer target: parse_size() on arbitrary text. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *s = strndup((const char *)data, size);
    if (!s)
        return 0;
    uint64_t v = 12345;
    int r = parse_size(s, &v);
    /* Failure leaves v alone and is one of the documented errors; success needs a digit. */
    if (r < 0 && (v != 12345 || (r != -EINVAL && r != -ERANGE)))
        __builtin_trap();
    if (r == 0 && !strpbrk(s, "0123456789"))
        __builtin_trap();
    free(s);
    return 0;
}
