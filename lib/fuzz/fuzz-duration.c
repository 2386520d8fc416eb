/* libFuzzer target: parse_duration() on arbitrary text. */
#include <math.h>
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
    double d = -1;
    int r = parse_duration(s, &d);
    /* Success always yields a usable, non-negative, bounded number; failure leaves d alone. */
    if (r == 0 && (!isfinite(d) || d < 0 || d > 100.0 * 366 * 86400))
        __builtin_trap();
    if (r < 0 && d != -1)
        __builtin_trap();
    free(s);
    return 0;
}
