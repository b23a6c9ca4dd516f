/*
 * kern_cuda_int.cuh -- internal to kernels/cuda's .cu files: the context
 * struct behind kern_cuda.h, the sticky-error helpers every launcher uses,
 * and small device helpers (warp reductions).
 *
 * Context.  One device, one non-blocking stream every op is enqueued on,
 * a cuBLAS handle (fp32 GEMM) and a cuBLASLt handle (int8 GEMM) bound to
 * that stream, cuBLASLt's workspace, an int32 scratch for GEMM sums that
 * cannot be written in place, and a small cache of cuBLASLt matmul plans
 * (descriptors, layouts and the chosen algorithm) per GEMM shape.
 *
 * Errors.  KC_CHECK / kc_launched turn a CUDA error into the sticky status
 * (first error wins, message "what: cudaGetErrorString"); launchers return
 * early when the context has already failed (a lost device stays lost).
 */
#ifndef KERN_CUDA_INT_CUH
#define KERN_CUDA_INT_CUH

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>

#include "kern_cuda.h"

#define KC_ERR_LEN 256      /* bytes of the sticky message */
#define KC_LT_PLANS 32      /* cached cuBLASLt plans */
#define KC_LT_ALGOS 4       /* heuristic candidates tried per shape */
#define KC_LT_WS (32 << 20) /* cuBLASLt workspace bytes */

/* One cached cuBLASLt plan: a GEMM shape and how to run it. */
typedef struct kc_lt_plan {
    int used;                       /* 1 when filled */
    int M, Np, Kp, ldd;             /* the shape (cuBLAS m = Np, n = M, k = Kp) */
    int ok;                         /* 0: cuBLASLt refused every choice (use the GEMV) */
    int chosen;                     /* 1: the choice below enqueued before */
    int has_algo;                   /* 0: run with algo NULL (library's own choice) */
    cublasLtMatmulAlgo_t algo;      /* the chosen algorithm */
    size_t ws;                      /* workspace bytes it needs */
    cublasLtMatmulDesc_t desc;      /* compute 32I, A transposed */
    cublasLtMatrixLayout_t a, b, d; /* weights, activations, int32 output */
} kc_lt_plan;

struct kern_cuda {
    int device;                    /* CUDA device index */
    cudaStream_t stream;           /* every op's stream */
    cublasHandle_t blas;           /* fp32 GEMM */
    cublasLtHandle_t lt;           /* int8 GEMM */
    void *lt_ws;                   /* cuBLASLt workspace, KC_LT_WS bytes */
    int32_t *i32;                  /* int32 GEMM scratch */
    size_t i32_bytes;              /* its size */
    kc_lt_plan plans[KC_LT_PLANS]; /* plan cache */
    int plan_next;                 /* next entry to replace */
    kern_cuda_info info;           /* device facts */
    kern_cuda_stats st;            /* path counters */
    int status;                    /* sticky: 0 or the first error's code */
    char msg[KC_ERR_LEN];          /* its message */
};

/* Record err (if an error) as the sticky status; returns 1 when it was one. */
int kc_cuda_err(kern_cuda *c, cudaError_t e, const char *what);
/* After a launch: record cudaGetLastError(). */
static inline void kc_launched(kern_cuda *c, const char *what) {
    kc_cuda_err(c, cudaGetLastError(), what);
}
/* Blocks for n items of `threads` each, at least 1. */
static inline unsigned kc_blocks(size_t n, unsigned threads) {
    size_t b = (n + threads - 1) / threads;
    return (unsigned)(b ? b : 1);
}

__device__ __forceinline__ float kc_warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float kc_warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}
__device__ __forceinline__ int kc_warp_isum(int v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

#endif
