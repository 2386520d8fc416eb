/* libFuzzer target: gpu_list_find() on arbitrary ids, as users type them (an index, a UUID or a
 * prefix of one, a PCI bus id in NVML's, sysfs' or lspci's form, a MIG UUID), against a fixed
 * model of two GPUs, one of them with MIG devices. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/gpu.h"

static struct gpu_mig migs[] = {
    {.index = 0,
     .gi_id = 1,
     .ci_id = 0,
     .profile = "3g.40gb",
     .uuid = "MIG-5b4f1c2d-0e9a-5a7b-8c6d-1e2f3a4b5c6d"},
    {.index = 1,
     .gi_id = 2,
     .ci_id = 0,
     .profile = "1g.10gb",
     .uuid = "MIG-6c5a2d3e-1f0b-5b8c-9d7e-2f3a4b5c6d7e"},
};

static struct gpu gpus[] = {
    {.index = 0,
     .uuid = "GPU-1c2f8e4a-3b5d-7f90-a1b2-c3d4e5f60718",
     .pci_bus_id = "00000000:1B:00.0",
     .name = "NVIDIA H100 80GB HBM3"},
    {.index = 1,
     .uuid = "GPU-1c2f9e4a-3b5d-7f90-a1b2-c3d4e5f60719",
     .pci_bus_id = "00000000:3B:00.0",
     .name = "NVIDIA H100 80GB HBM3",
     .mig_enabled = true,
     .n_mig = 2,
     .mig = migs},
};

static const struct gpu_list list = {.n = 2, .gpus = gpus};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *id = strndup((const char *)data, size);
    if (!id)
        return 0;
    const struct gpu_mig *mig = (const struct gpu_mig *)1;
    const struct gpu *g = gpu_list_find(&list, id, &mig);
    /* An answer is one of the model's GPUs, and a MIG device only ever one of that GPU's. */
    if (g && g != &gpus[0] && g != &gpus[1])
        __builtin_trap();
    if (mig == (const struct gpu_mig *)1 ||
        (mig && (!g || mig < g->mig || mig >= g->mig + g->n_mig)))
        __builtin_trap();
    free(id);
    return 0;
}
