/* A stand-in for nvidia-smi in the test driver tree. Linked against nothing but libc: it finds
 * libnvidia-ml.so.1 through the dynamic loader (LD_LIBRARY_PATH, the ld cache), as the real one
 * does, so that running it inside a container proves the library injection and the container's
 * ld cache work. `nvidia-smi -L` prints what the real one prints:
 *     GPU 0: NVIDIA H200 (UUID: GPU-…)
 *       MIG 3g.71gb     Device  0: (UUID: MIG-…)
 * Without arguments it prints the driver and CUDA versions. */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

/* The few NVML declarations needed, from NVIDIA's documented API (no header in Debian). */
typedef int nvml_return;
typedef struct nvml_device *nvml_device;

struct nvml {
    nvml_return (*init)(void);
    nvml_return (*shutdown)(void);
    nvml_return (*count)(unsigned *);
    nvml_return (*handle)(unsigned, nvml_device *);
    nvml_return (*name)(nvml_device, char *, unsigned);
    nvml_return (*uuid)(nvml_device, char *, unsigned);
    nvml_return (*driver)(char *, unsigned);
    nvml_return (*cuda)(int *);
    nvml_return (*mig_mode)(nvml_device, unsigned *, unsigned *);
    nvml_return (*mig_max)(nvml_device, unsigned *);
    nvml_return (*mig_handle)(nvml_device, unsigned, nvml_device *);
};

static int load(struct nvml *n)
{
    void *h = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!h) {
        fprintf(stderr,
                "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA "
                "driver: %s\n",
                dlerror());
        return -1;
    }
    *(void **)&n->init = dlsym(h, "nvmlInit_v2");
    *(void **)&n->shutdown = dlsym(h, "nvmlShutdown");
    *(void **)&n->count = dlsym(h, "nvmlDeviceGetCount_v2");
    *(void **)&n->handle = dlsym(h, "nvmlDeviceGetHandleByIndex_v2");
    *(void **)&n->name = dlsym(h, "nvmlDeviceGetName");
    *(void **)&n->uuid = dlsym(h, "nvmlDeviceGetUUID");
    *(void **)&n->driver = dlsym(h, "nvmlSystemGetDriverVersion");
    *(void **)&n->cuda = dlsym(h, "nvmlSystemGetCudaDriverVersion_v2");
    *(void **)&n->mig_mode = dlsym(h, "nvmlDeviceGetMigMode");
    *(void **)&n->mig_max = dlsym(h, "nvmlDeviceGetMaxMigDeviceCount");
    *(void **)&n->mig_handle = dlsym(h, "nvmlDeviceGetMigDeviceHandleByIndex");
    if (!n->init || !n->shutdown || !n->count || !n->handle || !n->name || !n->uuid || !n->driver ||
        !n->cuda || !n->mig_mode || !n->mig_max || !n->mig_handle) {
        fprintf(stderr, "libnvidia-ml.so.1 lacks an entry point\n");
        return -1;
    }
    if (n->init() != 0) {
        fprintf(stderr, "NVIDIA-SMI has failed: nvmlInit_v2 failed\n");
        return -1;
    }
    return 0;
}

static void list_mig(const struct nvml *n, nvml_device gpu)
{
    unsigned current = 0, pending = 0, max = 0;
    if (n->mig_mode(gpu, &current, &pending) != 0 || !current || n->mig_max(gpu, &max) != 0)
        return;
    for (unsigned m = 0; m < max; m++) {
        nvml_device d;
        char name[96] = "", uuid[96] = "";
        if (n->mig_handle(gpu, m, &d) != 0)
            continue;
        n->name(d, name, sizeof(name));
        n->uuid(d, uuid, sizeof(uuid));
        /* NVML names a MIG device "<GPU name> MIG 3g.71gb"; nvidia-smi shows the profile. */
        const char *profile = strstr(name, "MIG ");
        printf("  %-16s Device %2u: (UUID: %s)\n", profile ? profile : "MIG", m, uuid);
    }
}

static int list(const struct nvml *n)
{
    unsigned count = 0;
    if (n->count(&count) != 0)
        return 1;
    for (unsigned i = 0; i < count; i++) {
        nvml_device d;
        char name[96] = "", uuid[96] = "";
        if (n->handle(i, &d) != 0) {
            printf("GPU %u: Unable to determine the device handle\n", i);
            continue;
        }
        n->name(d, name, sizeof(name));
        n->uuid(d, uuid, sizeof(uuid));
        printf("GPU %u: %s (UUID: %s)\n", i, name, uuid);
        list_mig(n, d);
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct nvml n;
    if (load(&n) < 0)
        return 9; /* what the real one returns when it cannot talk to the driver */
    int rc = 0;
    if (argc > 1 && strcmp(argv[1], "-L") == 0) {
        rc = list(&n);
    } else {
        char driver[96] = "";
        int cuda = 0;
        n.driver(driver, sizeof(driver));
        n.cuda(&cuda);
        printf("NVIDIA-SMI stand-in    Driver Version: %s    CUDA Version: %d.%d\n", driver,
               cuda / 1000, (cuda % 1000) / 10);
    }
    n.shutdown();
    return rc;
}
