/* Fuzzes the GPU lists users and batch systems write (--gpus, NVIDIA_VISIBLE_DEVICES,
 * CUDA_VISIBLE_DEVICES) and NVIDIA_DRIVER_CAPABILITIES: parsed, resolved against a host with a
 * MIG GPU and an unreadable one, and turned into CUDA_VISIBLE_DEVICES for inside. The first byte
 * picks the source; the rest is the value. */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "capsule/gpu/driver-files.h"
#include "lib/fuzz-check.h"
#include "capsule/gpu/gpu-select.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct gpu_mig migs[2] = {
    {.index = 0, .gi_id = 1, .ci_id = 0, .uuid = "MIG-5a4b3c2d-1e0f-5a6b-9c8d-7e6f5a4b3c2d"},
    {.index = 1, .gi_id = 2, .ci_id = 0, .uuid = "MIG-0c1d2e3f-4a5b-5c6d-8e7f-8091a2b3c4d5"},
};
static struct gpu gpus[3] = {
    {.index = 0,
     .uuid = "GPU-3f2a9c10-7d4e-4b1a-9c8e-0a1b2c3d4e5f",
     .name = "NVIDIA H200",
     .pci_bus_id = "00000000:19:00.0"},
    {.index = 1,
     .uuid = "GPU-8b7c6d5e-1a2b-4c3d-8e9f-112233445566",
     .name = "NVIDIA H200",
     .pci_bus_id = "00000000:3B:00.0",
     .mig_enabled = true,
     .n_mig = 2,
     .mig = migs},
    {.index = 2, .error = -ENODEV, .uuid = "GPU-00112233-4455-6677-8899-aabbccddeeff"},
};
static const struct gpu_list host = {.n = 3, .gpus = gpus};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    enum gpu_source source = (enum gpu_source)(1 + data[0] % 4);
    char *value = strndup((const char *)data + 1, size - 1);
    if (!value)
        return 0;
    struct errmsg e;
    unsigned caps = 0;
    int r = driver_caps_parse(value, &caps, &e);
    CHECK(r == 0 || r == -EINVAL);
    CHECK((caps & ~(unsigned)DRIVER_CAP_ALL) == 0);

    struct gpu_request req;
    r = gpu_request_parse(source, value, &req, &e);
    CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
    if (r == 0) {
        CHECK(!(req.all && req.ids[0]));
        struct gpu_pick *picks = NULL;
        size_t n = 0;
        r = gpu_select_resolve(&host, source, &req, &picks, &n, &e);
        CHECK(r == 0 || r == -ENOENT || r == -ENODEV || r == -ENOMEM);
        if (r == 0) {
            CHECK(n <= 2 + 2);
            for (size_t i = 0; i < n; i++) {
                CHECK(picks[i].gpu && !picks[i].gpu->error);
                CHECK(gpu_pick_uuid(&picks[i])[0]);
                for (size_t j = 0; j < i; j++)
                    CHECK(picks[j].gpu != picks[i].gpu || picks[j].mig != picks[i].mig);
            }
            char *cuda = NULL;
            CHECK(gpu_select_cuda_visible(value, picks, n, &cuda) == 0);
            CHECK(n == 0 || cuda);
            free(cuda);
        }
        free(picks);
        gpu_request_done(&req);
    }
    free(value);
    return 0;
}
