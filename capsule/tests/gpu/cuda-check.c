/* cuda-check: proves a container can compute on its GPUs through the injected driver, with no
 * CUDA toolkit and no CUDA headers: libcuda.so.1 is dlopen()ed (found through the container's
 * ld cache, as any CUDA program finds it) and the few driver API calls are declared here from
 * NVIDIA's documented API.
 *
 * For every device it prints one line in `nvidia-smi -L` form, so that the caller can compare
 *     GPU 0: NVIDIA H200 (UUID: GPU-…)
 * then on each device: allocates 16 MiB, copies a pattern there and back, runs a small kernel
 * given as PTX (so the driver's JIT, libnvidia-ptxjitcompiler, is exercised too) that adds 1 to
 * every word, and checks the result:
 *     device 0: memcpy 16 MiB ok, kernel ok
 * Exit status 0 when everything worked, 1 when a check failed, 2 when CUDA could not start. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int cu_result;
typedef int cu_device;
typedef struct cu_ctx *cu_context;
typedef struct cu_mod *cu_module;
typedef struct cu_fn *cu_function;
typedef unsigned long long cu_deviceptr;
typedef struct {
    unsigned char bytes[16];
} cu_uuid;

#define WORDS                              (4u << 20) /* 16 MiB of 32-bit words */
#define CU_JIT_ERROR_LOG_BUFFER            5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

static const char ptx[] = ".version 7.0\n"
                          ".target sm_75\n"
                          ".address_size 64\n"
                          ".visible .entry add_one(.param .u64 data, .param .u32 n)\n"
                          "{\n"
                          "  .reg .pred %p<2>;\n"
                          "  .reg .b32 %r<8>;\n"
                          "  .reg .b64 %rd<5>;\n"
                          "  ld.param.u64 %rd1, [data];\n"
                          "  ld.param.u32 %r1, [n];\n"
                          "  mov.u32 %r2, %ctaid.x;\n"
                          "  mov.u32 %r3, %ntid.x;\n"
                          "  mov.u32 %r4, %tid.x;\n"
                          "  mad.lo.s32 %r5, %r2, %r3, %r4;\n"
                          "  setp.ge.u32 %p1, %r5, %r1;\n"
                          "  @%p1 bra DONE;\n"
                          "  cvta.to.global.u64 %rd2, %rd1;\n"
                          "  mul.wide.u32 %rd3, %r5, 4;\n"
                          "  add.s64 %rd4, %rd2, %rd3;\n"
                          "  ld.global.u32 %r6, [%rd4];\n"
                          "  add.s32 %r7, %r6, 1;\n"
                          "  st.global.u32 [%rd4], %r7;\n"
                          "DONE:\n"
                          "  ret;\n"
                          "}\n";

static struct {
    cu_result (*init)(unsigned);
    cu_result (*driver_version)(int *);
    cu_result (*count)(int *);
    cu_result (*get)(cu_device *, int);
    cu_result (*name)(char *, int, cu_device);
    cu_result (*uuid)(cu_uuid *, cu_device);
    cu_result (*ctx_create)(cu_context *, unsigned, cu_device);
    cu_result (*ctx_destroy)(cu_context);
    cu_result (*mem_alloc)(cu_deviceptr *, size_t);
    cu_result (*mem_free)(cu_deviceptr);
    cu_result (*htod)(cu_deviceptr, const void *, size_t);
    cu_result (*dtoh)(void *, cu_deviceptr, size_t);
    cu_result (*module_load)(cu_module *, const void *, unsigned, int *, void **);
    cu_result (*module_unload)(cu_module);
    cu_result (*get_function)(cu_function *, cu_module, const char *);
    cu_result (*launch)(cu_function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, void *, void **, void **);
    cu_result (*synchronize)(void);
    cu_result (*error_string)(cu_result, const char **);
} cu;

static const char *err(cu_result r)
{
    const char *s = NULL;
    if (cu.error_string && cu.error_string(r, &s) == 0 && s)
        return s;
    return "unknown error";
}

static int load(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW);
    if (!h) {
        fprintf(stderr, "cuda-check: %s\n", dlerror());
        return -1;
    }
    static const struct {
        void **slot;
        const char *name;
    } syms[] = {
        {(void **)&cu.init, "cuInit"},
        {(void **)&cu.driver_version, "cuDriverGetVersion"},
        {(void **)&cu.count, "cuDeviceGetCount"},
        {(void **)&cu.get, "cuDeviceGet"},
        {(void **)&cu.name, "cuDeviceGetName"},
        {(void **)&cu.uuid, "cuDeviceGetUuid_v2"},
        {(void **)&cu.ctx_create, "cuCtxCreate_v2"},
        {(void **)&cu.ctx_destroy, "cuCtxDestroy_v2"},
        {(void **)&cu.mem_alloc, "cuMemAlloc_v2"},
        {(void **)&cu.mem_free, "cuMemFree_v2"},
        {(void **)&cu.htod, "cuMemcpyHtoD_v2"},
        {(void **)&cu.dtoh, "cuMemcpyDtoH_v2"},
        {(void **)&cu.module_load, "cuModuleLoadDataEx"},
        {(void **)&cu.module_unload, "cuModuleUnload"},
        {(void **)&cu.get_function, "cuModuleGetFunction"},
        {(void **)&cu.launch, "cuLaunchKernel"},
        {(void **)&cu.synchronize, "cuCtxSynchronize"},
        {(void **)&cu.error_string, "cuGetErrorString"},
    };
    for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
        *syms[i].slot = dlsym(h, syms[i].name);
        if (!*syms[i].slot) {
            fprintf(stderr, "cuda-check: libcuda.so.1 has no %s\n", syms[i].name);
            return -1;
        }
    }
    return 0;
}

/* Runs the PTX kernel over the buffer; returns 0 or prints why not. */
static int run_kernel(int dev, cu_deviceptr d, unsigned n)
{
    char log[4096] = "";
    int opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *vals[] = {log, (void *)(uintptr_t)sizeof(log)};
    cu_module mod;
    cu_function fn;
    cu_result r = cu.module_load(&mod, ptx, 2, opts, vals);
    if (r != 0) {
        printf("device %d: loading the PTX kernel failed: %s %s\n", dev, err(r), log);
        return -1;
    }
    r = cu.get_function(&fn, mod, "add_one");
    void *args[] = {&d, &n};
    if (r == 0)
        r = cu.launch(fn, (n + 255) / 256, 1, 1, 256, 1, 1, 0, NULL, args, NULL);
    if (r == 0)
        r = cu.synchronize();
    cu.module_unload(mod);
    if (r != 0) {
        printf("device %d: kernel failed: %s\n", dev, err(r));
        return -1;
    }
    return 0;
}

/* The memory and kernel checks on one device; returns 0 when both held. */
static int exercise(int dev, cu_device d)
{
    cu_context ctx;
    cu_result r = cu.ctx_create(&ctx, 0, d);
    if (r != 0) {
        printf("device %d: cuCtxCreate failed: %s\n", dev, err(r));
        return -1;
    }
    uint32_t *host = malloc(WORDS * sizeof(uint32_t));
    cu_deviceptr buf = 0;
    int rc = -1;
    if (!host || (r = cu.mem_alloc(&buf, WORDS * sizeof(uint32_t))) != 0) {
        printf("device %d: cuMemAlloc failed: %s\n", dev, host ? err(r) : "no host memory");
        goto out;
    }
    for (uint32_t i = 0; i < WORDS; i++)
        host[i] = i * 2654435761u;
    if ((r = cu.htod(buf, host, WORDS * sizeof(uint32_t))) != 0 ||
        (r = cu.dtoh(host, buf, WORDS * sizeof(uint32_t))) != 0) {
        printf("device %d: cuMemcpy failed: %s\n", dev, err(r));
        goto out;
    }
    for (uint32_t i = 0; i < WORDS; i++)
        if (host[i] != i * 2654435761u) {
            printf("device %d: memcpy round trip differs at word %u\n", dev, i);
            goto out;
        }
    if (run_kernel(dev, buf, WORDS) < 0 || (r = cu.dtoh(host, buf, WORDS * sizeof(uint32_t))) != 0)
        goto out;
    for (uint32_t i = 0; i < WORDS; i++)
        if (host[i] != i * 2654435761u + 1) {
            printf("device %d: kernel result wrong at word %u\n", dev, i);
            goto out;
        }
    printf("device %d: memcpy 16 MiB ok, kernel ok\n", dev);
    rc = 0;
out:
    if (buf)
        cu.mem_free(buf);
    free(host);
    cu.ctx_destroy(ctx);
    return rc;
}

int main(void)
{
    if (load() < 0)
        return 2;
    int version = 0, count = 0;
    cu_result r = cu.init(0);
    if (r != 0) {
        fprintf(stderr, "cuda-check: cuInit failed: %s (%d)\n", err(r), r);
        return 2;
    }
    cu.driver_version(&version);
    if ((r = cu.count(&count)) != 0) {
        fprintf(stderr, "cuda-check: cuDeviceGetCount failed: %s\n", err(r));
        return 2;
    }
    printf("CUDA driver %d.%d, %d device%s\n", version / 1000, (version % 1000) / 10, count,
           count == 1 ? "" : "s");
    int failed = 0;
    for (int i = 0; i < count; i++) {
        cu_device d;
        char name[256] = "";
        cu_uuid u;
        if (cu.get(&d, i) != 0 || cu.name(name, sizeof(name), d) != 0 || cu.uuid(&u, d) != 0) {
            printf("GPU %d: cannot be read\n", i);
            failed = 1;
            continue;
        }
        const unsigned char *b = u.bytes;
        printf("GPU %d: %s (UUID: GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
               "%02x%02x%02x%02x%02x%02x)\n",
               i, name, b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
               b[12], b[13], b[14], b[15]);
    }
    for (int i = 0; i < count; i++) {
        cu_device d;
        if (cu.get(&d, i) != 0 || exercise(i, d) < 0)
            failed = 1;
    }
    return failed;
}
