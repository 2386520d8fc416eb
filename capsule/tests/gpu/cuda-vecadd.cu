// cuda-vecadd: a CUDA runtime program (nvcc, cudart linked statically) for the GPU machine check:
// on every device it adds two vectors of 16 Mi floats in a kernel and checks the sum on the host.
// It prints one `nvidia-smi -L` style line per device and one result line:
//     GPU 0: NVIDIA H200 (UUID: GPU-…)
//     device 0: vecadd 16777216 ok
// Exit status 0 when every device computed the right sum, 1 when one did not, 2 when CUDA could
// not start (no device, driver too old for this toolkit).
#include <cstdio>
#include <cstdlib>
#include <cuda_runtime.h>

__global__ void vecadd(const float *a, const float *b, float *c, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        c[i] = a[i] + b[i];
}

static int check(int dev)
{
    const int n = 16 << 20;
    const size_t bytes = n * sizeof(float);
    float *a = (float *)malloc(bytes), *b = (float *)malloc(bytes), *c = (float *)malloc(bytes);
    float *da = nullptr, *db = nullptr, *dc = nullptr;
    int rc = 1;
    cudaError_t e = cudaSetDevice(dev);
    if (!a || !b || !c) {
        printf("device %d: no host memory\n", dev);
        goto out;
    }
    for (int i = 0; i < n; i++) {
        a[i] = (float)(i % 1000);
        b[i] = (float)(2 * (i % 777));
    }
    if (e == cudaSuccess)
        e = cudaMalloc(&da, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(&db, bytes);
    if (e == cudaSuccess)
        e = cudaMalloc(&dc, bytes);
    if (e == cudaSuccess)
        e = cudaMemcpy(da, a, bytes, cudaMemcpyHostToDevice);
    if (e == cudaSuccess)
        e = cudaMemcpy(db, b, bytes, cudaMemcpyHostToDevice);
    if (e == cudaSuccess) {
        vecadd<<<(n + 255) / 256, 256>>>(da, db, dc, n);
        e = cudaGetLastError();
    }
    if (e == cudaSuccess)
        e = cudaMemcpy(c, dc, bytes, cudaMemcpyDeviceToHost);
    if (e != cudaSuccess) {
        printf("device %d: %s\n", dev, cudaGetErrorString(e));
        goto out;
    }
    for (int i = 0; i < n; i++)
        if (c[i] != a[i] + b[i]) {
            printf("device %d: wrong sum at %d: %g\n", dev, i, c[i]);
            goto out;
        }
    printf("device %d: vecadd %d ok\n", dev, n);
    rc = 0;
out:
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    free(a);
    free(b);
    free(c);
    return rc;
}

int main()
{
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) {
        fprintf(stderr, "cuda-vecadd: cudaGetDeviceCount: %s\n", cudaGetErrorString(e));
        return 2;
    }
    int driver = 0, runtime = 0;
    cudaDriverGetVersion(&driver);
    cudaRuntimeGetVersion(&runtime);
    printf("CUDA driver %d.%d, runtime %d.%d, %d device%s\n", driver / 1000, (driver % 1000) / 10,
           runtime / 1000, (runtime % 1000) / 10, count, count == 1 ? "" : "s");
    for (int i = 0; i < count; i++) {
        cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) != cudaSuccess) {
            printf("GPU %d: cannot be read\n", i);
            continue;
        }
        const unsigned char *u = (const unsigned char *)p.uuid.bytes;
        printf("GPU %d: %s (UUID: GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-"
               "%02x%02x%02x%02x%02x%02x)\n",
               i, p.name, u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
               u[12], u[13], u[14], u[15]);
    }
    int failed = 0;
    for (int i = 0; i < count; i++)
        failed |= check(i);
    return failed;
}
