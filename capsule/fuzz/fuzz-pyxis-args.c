/* libFuzzer target: Pyxis' options as srun and sbatch hand them to the plugin. The first byte
 * picks the option, the rest is its value; a second pass feeds the same bytes as PYXIS_CONTAINER_*
 * variables. Whatever the input: an error has a message, accepted mounts have a target, and the
 * rules hold (the same single value twice is fine; both forms of a pair never are). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/slurm/pyxis-args.h"
#include "lib/fuzz-check.h"

static const char *get(void *userdata, const char *name)
{
    return strlen(name) % 3 == 0 ? userdata : NULL;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum pyxis_opt opt = (enum pyxis_opt)(data[0] % PYXIS_OPT_COUNT);
    char *value = strndup((const char *)data + 1, size - 1);
    if (!value)
        return 0;
    struct pyxis_args a;
    struct errmsg e = {""};
    pyxis_args_init(&a);
    int r = pyxis_args_set(&a, opt, pyxis_opts[opt].arginfo ? value : NULL, &e);
    CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
    CHECK(r == 0 || r == -ENOMEM || e.text[0]);
    if (r == 0) {
        for (size_t i = 0; i < a.n_mounts; i++)
            CHECK(a.mounts[i].dst && a.mounts[i].dst[0]);
        /* Slurm calls the callback again in slurmstepd with the same value. */
        int again = pyxis_args_set(&a, opt, pyxis_opts[opt].arginfo ? value : NULL, &e);
        CHECK(again == 0 || again == -ENOMEM);
    }
    pyxis_args_done(&a);
    pyxis_args_init(&a);
    r = pyxis_args_apply_env(&a, get, value, &e);
    CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
    pyxis_args_done(&a);
    free(value);
    return 0;
}
