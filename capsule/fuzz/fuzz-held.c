/* libFuzzer target: the line `capsule hold` writes to slurmstepd. Whatever it holds, the parse
 * either fails with a message or gives a process above 1, an absolute cwd and K=V entries. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "capsule/slurm/held.h"
#include "lib/fuzz-check.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct held h = {0};
    struct errmsg e = {""};
    int r = held_parse((const char *)data, size, &h, &e);
    CHECK(r == 0 || r == -EBADMSG || r == -ENOMEM);
    if (r < 0) {
        CHECK(e.text[0]);
        return 0;
    }
    CHECK(h.pid > 1 && h.cwd && h.cwd[0] == '/' && h.env && h.argv);
    for (char **kv = h.env; *kv; kv++)
        CHECK(strchr(*kv, '=') && (*kv)[0] != '=');
    held_done(&h);
    return 0;
}
