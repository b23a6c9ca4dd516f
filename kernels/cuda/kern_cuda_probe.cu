/*
 * kern_cuda_probe.cu -- the CUDA toolchain probe: one int8 dot-product
 * kernel (dp4a, int32 products accumulated in int64) with its scalar
 * reference, and a host entry point that also opens cuBLAS and cuBLASLt.
 *
 * Built for sm_90a (cubin) and compute_80 (PTX), see
 * kernels/cuda/CMakeLists.txt.  When the build asks for sm_90a,
 * PARLEY_CUDA_EXPECT_SM90A is defined and the compute_90 device pass
 * refuses to compile without the arch-specific features, so a successful
 * build is itself the proof that the Hopper object is sm_90a code.
 */
#include "kern_cuda_probe.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>

#if defined(PARLEY_CUDA_EXPECT_SM90A) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && \
    !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "kern_cuda_probe.cu must be compiled for sm_90a (arch-specific Hopper features)"
#endif

#define PROBE_MAX_N ((size_t)1 << 24)
#define PROBE_THREADS 256

/* Each thread sums dp4a over its 4-byte words; the block reduces in shared
 * memory and adds its total to *out.  Trailing n % 4 bytes are thread 0's. */
__global__ void kern_cuda_dot_i8_kernel(const int *a4, const int *b4, size_t nwords,
                                        const int8_t *a, const int8_t *b, size_t n,
                                        unsigned long long *out) {
    __shared__ long long part[PROBE_THREADS];
    long long acc = 0;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < nwords; i += stride)
        acc += __dp4a(a4[i], b4[i], 0);
    if (blockIdx.x == 0 && threadIdx.x == 0)
        for (size_t i = nwords * 4; i < n; i++) acc += (int)a[i] * (int)b[i];
    part[threadIdx.x] = acc;
    __syncthreads();
    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
        if (threadIdx.x < s) part[threadIdx.x] += part[threadIdx.x + s];
        __syncthreads();
    }
    /* Two's-complement addition: the unsigned atomic sums signed values. */
    if (threadIdx.x == 0) atomicAdd(out, (unsigned long long)part[0]);
}

extern "C" int64_t kern_cuda_dot_i8_ref(const int8_t *a, const int8_t *b, size_t n) {
    int64_t acc = 0;
    for (size_t i = 0; i < n; i++) acc += (int32_t)a[i] * (int32_t)b[i];
    return acc;
}

static void probe_msg(char *err, size_t errlen, const char *what, const char *detail) {
    if (err && errlen) snprintf(err, errlen, "%s: %s", what, detail);
}

extern "C" int kern_cuda_probe_run(const int8_t *a, const int8_t *b, size_t n,
                                   kern_cuda_probe_info *info, char *err, size_t errlen) {
    kern_cuda_probe_info local = {};
    int rc = KERN_CUDA_EFAIL, ndev = 0, dev = 0, cublas_ver = 0;
    int8_t *da = NULL, *db = NULL;
    unsigned long long *dout = NULL, hout = 0;
    cublasHandle_t blas = NULL;
    cublasLtHandle_t lt = NULL;
    cudaError_t ce;
    cudaDeviceProp prop;
    unsigned blocks;

    if (err && errlen) err[0] = '\0';
    if (!a || !b || n == 0 || n > PROBE_MAX_N) {
        probe_msg(err, errlen, "kern_cuda_probe_run", "need 0 < n <= 2^24 and non-NULL vectors");
        rc = KERN_CUDA_EINVAL;
        goto err;
    }
    cudaRuntimeGetVersion(&local.runtime_version);
    ce = cudaGetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev == 0) {
        probe_msg(err, errlen, "no CUDA device",
                  ce != cudaSuccess ? cudaGetErrorString(ce) : "device count is 0");
        rc = KERN_CUDA_ENODEV;
        goto err;
    }
#define PROBE_CUDA(call)                                           \
    do {                                                           \
        ce = (call);                                               \
        if (ce != cudaSuccess) {                                   \
            probe_msg(err, errlen, #call, cudaGetErrorString(ce)); \
            goto err;                                              \
        }                                                          \
    } while (0)
    PROBE_CUDA(cudaGetDevice(&dev));
    PROBE_CUDA(cudaGetDeviceProperties(&prop, dev));
    local.device_cc_major = prop.major;
    local.device_cc_minor = prop.minor;
    PROBE_CUDA(cudaMalloc((void **)&da, n));
    PROBE_CUDA(cudaMalloc((void **)&db, n));
    PROBE_CUDA(cudaMalloc((void **)&dout, sizeof *dout));
    PROBE_CUDA(cudaMemcpy(da, a, n, cudaMemcpyHostToDevice));
    PROBE_CUDA(cudaMemcpy(db, b, n, cudaMemcpyHostToDevice));
    PROBE_CUDA(cudaMemset(dout, 0, sizeof *dout));
    blocks = (unsigned)((n / 4 + PROBE_THREADS - 1) / PROBE_THREADS);
    if (blocks == 0) blocks = 1;
    if (blocks > 1024) blocks = 1024;
    /* cudaMalloc memory is 256-byte aligned, so the int views are aligned. */
    kern_cuda_dot_i8_kernel<<<blocks, PROBE_THREADS>>>((const int *)da, (const int *)db, n / 4, da,
                                                       db, n, dout);
    PROBE_CUDA(cudaGetLastError());
    PROBE_CUDA(cudaMemcpy(&hout, dout, sizeof hout, cudaMemcpyDeviceToHost));
    local.dot_device = (int64_t)hout;
    local.dot_reference = kern_cuda_dot_i8_ref(a, b, n);
    if (local.dot_device != local.dot_reference) {
        probe_msg(err, errlen, "int8 dot kernel", "result differs from the scalar reference");
        goto err;
    }
    if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) {
        probe_msg(err, errlen, "cublasCreate", "failed");
        goto err;
    }
    if (cublasGetVersion(blas, &cublas_ver) != CUBLAS_STATUS_SUCCESS) {
        probe_msg(err, errlen, "cublasGetVersion", "failed");
        goto err;
    }
    local.cublas_version = (size_t)cublas_ver;
    if (cublasLtCreate(&lt) != CUBLAS_STATUS_SUCCESS) {
        probe_msg(err, errlen, "cublasLtCreate", "failed");
        goto err;
    }
    local.cublaslt_version = cublasLtGetVersion();
    rc = 0;
err:
    if (lt) cublasLtDestroy(lt);
    if (blas) cublasDestroy(blas);
    cudaFree(dout);
    cudaFree(db);
    cudaFree(da);
    if (info) *info = local;
    return rc;
#undef PROBE_CUDA
}
