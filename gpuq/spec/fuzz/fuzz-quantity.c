/* libFuzzer target: Kubernetes quantities as CPUs and memory (a Job's resources, `gpuq submit
 * --cpus/--mem`). The first byte picks how to read the rest. A value taken must read back the
 * same when written plainly ("1500m", "1073741824"). */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpuq/spec/quantity.h"
#include "lib/fuzz-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    char *s = strndup((const char *)data + 1, size - 1);
    if (!s)
        return 0;
    struct errmsg e = {""};
    char again[32];
    if (data[0] & 1) {
        unsigned m = 7, m2 = 0;
        int r = quantity_parse_cpu(s, &m, &e);
        CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
        CHECK(r == 0 || (m == 7 && e.text[0]));
        if (r == 0) {
            snprintf(again, sizeof(again), "%um", m);
            CHECK(quantity_parse_cpu(again, &m2, &e) == 0 && m2 == m);
        }
    } else {
        enum quantity_letters l = data[0] & 2 ? QUANTITY_LETTERS_BINARY : QUANTITY_LETTERS_DECIMAL;
        uint64_t b = 7, b2 = 0;
        int r = quantity_parse_memory(s, l, &b, &e);
        CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
        CHECK(r == 0 || (b == 7 && e.text[0]));
        if (r == 0) {
            CHECK(b <= QUANTITY_MEMORY_MAX);
            snprintf(again, sizeof(again), "%" PRIu64, b);
            CHECK(quantity_parse_memory(again, l, &b2, &e) == 0 && b2 == b);
        }
    }
    free(s);
    return 0;
}
