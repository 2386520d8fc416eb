/* gpm-load SECONDS [DEVICE]: a known load for the GPM comparison of check-gpu.sh.
 *
 * For SECONDS it runs, round after round, three kernels one after the other, each for about a
 * third of a ~300 ms round, so that every one-second GPM interval sees all three:
 *   tensor  warps repeating WMMA mma_sync on 16x16x16 half tiles into float accumulators
 *           (HMMA: tensor-pipe activity, DCGM_FI_PROF_PIPE_TENSOR_ACTIVE);
 *   fp32    threads running eight independent FMA chains (DCGM_FI_PROF_PIPE_FP32_ACTIVE);
 *   copy    a grid-stride 16-byte copy between two 256 MiB buffers (DCGM_FI_PROF_DRAM_ACTIVE).
 * Each kernel fills every SM, so SM activity is near 100 % for the whole run. The launches per
 * round come from timing one launch of each first, which keeps the shares even on any Hopper
 * part. No host<->device copies happen while it runs, so PCIe traffic stays low.
 *
 * Prints "gpm-load: running" (flushed) once the timed rounds start -- check-gpu.sh waits for it
 * before it samples -- and at the end what ran. Exit status: 0 done, 1 a CUDA error, 2 usage.
 * Built by make-bundle.sh with -arch=sm_90 -cudart static: it needs only the driver's libcuda. */
#include <cuda_fp16.h>
#include <mma.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

using namespace nvcuda;

#define CHECK(call)                                                                                \
    do {                                                                                           \
        cudaError_t err_ = (call);                                                                 \
        if (err_ != cudaSuccess) {                                                                 \
            fprintf(stderr, "gpm-load: %s: %s\n", #call, cudaGetErrorString(err_));                \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

static const int THREADS = 256;             /* 8 warps a block */
static const int TENSOR_ITERS = 1 << 14;    /* x4 mma_sync per warp and launch */
static const int FP32_ITERS = 1 << 16;      /* x8 FMA per thread and launch */
static const size_t COPY_BYTES = 256 << 20; /* per buffer */
static const double ROUND_S = 0.3;

/* Four independent accumulators, so the tensor pipe has work in flight while one mma waits.
 * The tiles are read from memory (the compiler cannot fold them); the sums are stored so the
 * loop is not dead code. */
__global__ void tensor_kernel(const half *a, const half *b, float *out, int iters)
{
    wmma::fragment<wmma::matrix_a, 16, 16, 16, half, wmma::row_major> fa;
    wmma::fragment<wmma::matrix_b, 16, 16, 16, half, wmma::col_major> fb;
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> c0, c1, c2, c3;
    wmma::load_matrix_sync(fa, a, 16);
    wmma::load_matrix_sync(fb, b, 16);
    wmma::fill_fragment(c0, 0.0f);
    wmma::fill_fragment(c1, 0.0f);
    wmma::fill_fragment(c2, 0.0f);
    wmma::fill_fragment(c3, 0.0f);
    for (int i = 0; i < iters; i++) {
        wmma::mma_sync(c0, fa, fb, c0);
        wmma::mma_sync(c1, fa, fb, c1);
        wmma::mma_sync(c2, fa, fb, c2);
        wmma::mma_sync(c3, fa, fb, c3);
    }
    for (int k = 0; k < c0.num_elements; k++)
        c0.x[k] += c1.x[k] + c2.x[k] + c3.x[k];
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) / 32;
    wmma::store_matrix_sync(out + (size_t)warp * 256, c0, 16, wmma::mem_row_major);
}

/* m and c come from the host so the chains cannot be computed at compile time. */
__global__ void fp32_kernel(float *out, float m, float c, int iters)
{
    float x[8];
    int tid = blockIdx.x * blockDim.x + threadIdx.x;
#pragma unroll
    for (int k = 0; k < 8; k++)
        x[k] = tid * 1e-7f + k;
    for (int i = 0; i < iters; i++) {
#pragma unroll
        for (int k = 0; k < 8; k++)
            x[k] = fmaf(x[k], m, c);
    }
    float s = 0.0f;
#pragma unroll
    for (int k = 0; k < 8; k++)
        s += x[k];
    out[tid] = s;
}

__global__ void copy_kernel(const float4 *in, float4 *out, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = in[i];
}

struct load {
    const char *name;
    long launches; /* per round */
    long total;
    double ms_one; /* one launch, timed */
    double work;   /* per launch: FLOP, or bytes moved */
    const char *unit;
};

struct buffers {
    half *a, *b;
    float *tensor_out, *fp32_out;
    float4 *src, *dst;
    int blocks;
};

static void launch(const buffers &m, int which)
{
    switch (which) {
    case 0:
        tensor_kernel<<<m.blocks, THREADS>>>(m.a, m.b, m.tensor_out, TENSOR_ITERS);
        break;
    case 1:
        fp32_kernel<<<m.blocks, THREADS>>>(m.fp32_out, 0.999999f, 1e-6f, FP32_ITERS);
        break;
    default:
        copy_kernel<<<m.blocks, THREADS>>>(m.src, m.dst, COPY_BYTES / sizeof(float4));
    }
    CHECK(cudaGetLastError());
}

static double time_one(const buffers &m, int which)
{
    cudaEvent_t start, stop;
    float ms;
    CHECK(cudaEventCreate(&start));
    CHECK(cudaEventCreate(&stop));
    launch(m, which); /* warm-up: the first launch loads the module */
    CHECK(cudaEventRecord(start));
    launch(m, which);
    CHECK(cudaEventRecord(stop));
    CHECK(cudaEventSynchronize(stop));
    CHECK(cudaEventElapsedTime(&ms, start, stop));
    CHECK(cudaEventDestroy(start));
    CHECK(cudaEventDestroy(stop));
    return ms;
}

static void setup(buffers &m, const cudaDeviceProp &p)
{
    m.blocks = p.multiProcessorCount * 8;
    size_t warps = (size_t)m.blocks * THREADS / 32;
    CHECK(cudaMalloc(&m.a, 256 * sizeof(half)));
    CHECK(cudaMalloc(&m.b, 256 * sizeof(half)));
    /* 0x10 bytes: halves of about 5e-4, so four sums of 16 Ki products stay finite. */
    CHECK(cudaMemset(m.a, 0x10, 256 * sizeof(half)));
    CHECK(cudaMemset(m.b, 0x10, 256 * sizeof(half)));
    CHECK(cudaMalloc(&m.tensor_out, warps * 256 * sizeof(float)));
    CHECK(cudaMalloc(&m.fp32_out, (size_t)m.blocks * THREADS * sizeof(float)));
    CHECK(cudaMalloc(&m.src, COPY_BYTES));
    CHECK(cudaMalloc(&m.dst, COPY_BYTES));
    CHECK(cudaMemset(m.src, 0, COPY_BYTES));
}

int main(int argc, char **argv)
{
    char *end = NULL;
    double seconds = argc >= 2 ? strtod(argv[1], &end) : 0;
    int device = argc >= 3 ? atoi(argv[2]) : 0;
    if (argc < 2 || argc > 3 || *end || seconds <= 0 || seconds > 3600) {
        fprintf(stderr, "usage: gpm-load SECONDS [DEVICE]  (SECONDS in (0, 3600])\n");
        return 2;
    }
    cudaDeviceProp p;
    CHECK(cudaSetDevice(device));
    CHECK(cudaGetDeviceProperties(&p, device));
    printf("gpm-load: device %d, %s, compute capability %d.%d, %d SMs\n", device, p.name, p.major,
           p.minor, p.multiProcessorCount);

    buffers m;
    setup(m, p);
    size_t warps = (size_t)m.blocks * THREADS / 32;
    load loads[3] = {
        {"tensor (WMMA f16->f32 mma_sync)", 0, 0, 0,
         (double)warps * TENSOR_ITERS * 4 * 2 * 16 * 16 * 16, "TFLOP/s"},
        {"fp32 (FMA chains)", 0, 0, 0, (double)m.blocks * THREADS * FP32_ITERS * 8 * 2, "TFLOP/s"},
        {"copy (DRAM, 256 MiB)", 0, 0, 0, 2.0 * COPY_BYTES, "TB/s"},
    };
    for (int k = 0; k < 3; k++) {
        loads[k].ms_one = time_one(m, k);
        loads[k].launches = (long)(ROUND_S / 3 * 1000 / loads[k].ms_one);
        if (loads[k].launches < 1)
            loads[k].launches = 1;
    }
    printf("gpm-load: running %.0f s of rounds of", seconds);
    for (int k = 0; k < 3; k++)
        printf("%s %ld x %s (%.2f ms each)", k ? "," : "", loads[k].launches, loads[k].name,
               loads[k].ms_one);
    printf("\n");
    fflush(stdout);

    auto t0 = std::chrono::steady_clock::now();
    double elapsed = 0;
    long rounds = 0;
    while (elapsed < seconds) {
        for (int k = 0; k < 3; k++) {
            for (long i = 0; i < loads[k].launches; i++)
                launch(m, k);
            loads[k].total += loads[k].launches;
        }
        /* One sync a round: the queue stays short, so the run ends close to SECONDS. */
        CHECK(cudaDeviceSynchronize());
        rounds++;
        elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    printf("gpm-load: done: %ld rounds in %.1f s\n", rounds, elapsed);
    for (int k = 0; k < 3; k++)
        printf("gpm-load:   %-32s %6ld launches, %.1f %s while it ran\n", loads[k].name,
               loads[k].total, loads[k].work / (loads[k].ms_one * 1e-3) / 1e12, loads[k].unit);
    return 0;
}
