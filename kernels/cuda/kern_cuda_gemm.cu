/*
 * kern_cuda_gemm.cu -- the int8 GEMM (W8A8) and the fp32 GEMM on the
 * device (kern_cuda.h; shapes and padding in kern_cuda_plan.h).
 *
 * int8.  The sums S[m][n] = sum_k xq[m][k] w[n][k] are exact int32 on both
 * paths, so the float result C = (float)S * x_scale[m] * w_scale[n] is the
 * same bit for bit whichever path ran (and whatever the batch: a row's
 * result depends on its own inputs only):
 *   GEMV (M <= KERN_CUDA_GEMV_MAX_M: decode)  one warp per output channel
 *     streams the channel's Kp weight bytes once, 16 bytes per lane per
 *     load, four loads in flight, dp4a against every row of x (L1-cached),
 *     then a warp reduction per row and the scaled store;
 *   cuBLASLt (larger M)  the IMMA "TN" form: the weights are the
 *     transposed operand A (stored Kp x Np column-major = our [Np][Kp]
 *     rows), the activations B (Kp x M column-major = our [M][Kp] rows),
 *     int32 D (Np x M column-major = rows of ldd); compute type 32I with
 *     int32 alpha = 1, beta = 0; m = Np and k = Kp multiples of 4 (they
 *     are padded), rows 16-byte aligned.  D goes straight into C's memory
 *     when kern_cuda_gemm_inplace allows, else into the context's int32
 *     scratch, and one elementwise kernel applies the scales.  The plan
 *     (descriptors, layouts, algorithm from cublasLtMatmulAlgoGetHeuristic
 *     with KC_LT_WS of workspace) is cached per shape; the first candidates
 *     are tried in order, then algo NULL, and a shape cuBLASLt refuses
 *     runs on the GEMV in passes of KERN_CUDA_GEMV_MAX_M rows (counted in
 *     kern_cuda_stats.lt_fallback).
 * fp32.  cublasSgemm (pedantic math: no TF32), C^T = W^T-as-stored x^T.
 */
#include <string.h>

#include "kern_cuda_int.cuh"

#define KC_GEMV_WARPS 4 /* output channels per block */

/* One warp per output channel n; rows m < M <= KERN_CUDA_GEMV_MAX_M of xq. */
__global__ void kc_gemv_kernel(int M, int N, int Kp, const int8_t *__restrict__ W,
                               const float *__restrict__ ws, const int8_t *__restrict__ xq,
                               const float *__restrict__ xs, float *C, int ldc, int32_t *D,
                               int ldd) {
    int lane = threadIdx.x & 31;
    int n = blockIdx.x * KC_GEMV_WARPS + (threadIdx.x >> 5);
    if (n >= N) return;
    const int4 *w4 = (const int4 *)(W + (size_t)n * Kp);
    int k16 = Kp / 16, acc[KERN_CUDA_GEMV_MAX_M];
#pragma unroll
    for (int m = 0; m < KERN_CUDA_GEMV_MAX_M; m++) acc[m] = 0;
    int i = lane;
    for (; i + 96 < k16; i += 128) { /* four 16-byte loads in flight per lane */
        int4 w[4];
#pragma unroll
        for (int u = 0; u < 4; u++) w[u] = __ldg(w4 + i + 32 * u);
#pragma unroll
        for (int m = 0; m < KERN_CUDA_GEMV_MAX_M; m++) {
            if (m >= M) break;
            const int4 *x4 = (const int4 *)(xq + (size_t)m * Kp);
#pragma unroll
            for (int u = 0; u < 4; u++) {
                int4 x = __ldg(x4 + i + 32 * u);
                acc[m] = __dp4a(w[u].x, x.x, acc[m]);
                acc[m] = __dp4a(w[u].y, x.y, acc[m]);
                acc[m] = __dp4a(w[u].z, x.z, acc[m]);
                acc[m] = __dp4a(w[u].w, x.w, acc[m]);
            }
        }
    }
    for (; i < k16; i += 32) {
        int4 w = __ldg(w4 + i);
#pragma unroll
        for (int m = 0; m < KERN_CUDA_GEMV_MAX_M; m++) {
            if (m >= M) break;
            int4 x = __ldg((const int4 *)(xq + (size_t)m * Kp) + i);
            acc[m] = __dp4a(w.x, x.x, acc[m]);
            acc[m] = __dp4a(w.y, x.y, acc[m]);
            acc[m] = __dp4a(w.z, x.z, acc[m]);
            acc[m] = __dp4a(w.w, x.w, acc[m]);
        }
    }
#pragma unroll
    for (int m = 0; m < KERN_CUDA_GEMV_MAX_M; m++) {
        if (m >= M) break;
        int s = kc_warp_isum(acc[m]);
        if (lane == 0) {
            if (C) C[(size_t)m * ldc + n] = (float)s * xs[m] * ws[n];
            else D[(size_t)m * ldd + n] = s;
        }
    }
}

/* C[m][n] = (float)D[m][n] * xs[m] * ws[n]; D may alias C (same element, same thread). */
__global__ void kc_dequant_kernel(int M, int N, const int32_t *D, int ldd, const float *xs,
                                  const float *ws, float *C, int ldc) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)M * N) return;
    int m = (int)(idx / N), n = (int)(idx % N);
    int32_t s = D[(size_t)m * ldd + n];
    C[(size_t)m * ldc + n] = (float)s * xs[m] * ws[n];
}

/* Run the GEMV over all M rows in passes of at most KERN_CUDA_GEMV_MAX_M. */
static void gemv_all(kern_cuda *c, int M, const int8_t *xq, const float *xs, const kern_cuda_w8 *w,
                     float *C, int ldc, int32_t *D, int ldd) {
    int N = C ? w->N : w->Np;
    for (int m0 = 0; m0 < M; m0 += KERN_CUDA_GEMV_MAX_M) {
        int mm = M - m0 < KERN_CUDA_GEMV_MAX_M ? M - m0 : KERN_CUDA_GEMV_MAX_M;
        kc_gemv_kernel<<<kc_blocks((size_t)N, KC_GEMV_WARPS), 32 * KC_GEMV_WARPS, 0, c->stream>>>(
            mm, N, w->Kp, w->q, w->scale, xq + (size_t)m0 * w->Kp, xs ? xs + m0 : NULL,
            C ? C + (size_t)m0 * ldc : NULL, ldc, D ? D + (size_t)m0 * ldd : NULL, ldd);
        kc_launched(c, "int8 GEMV");
    }
}

static void plan_free(kc_lt_plan *p) {
    if (p->desc) cublasLtMatmulDescDestroy(p->desc);
    if (p->a) cublasLtMatrixLayoutDestroy(p->a);
    if (p->b) cublasLtMatrixLayoutDestroy(p->b);
    if (p->d) cublasLtMatrixLayoutDestroy(p->d);
    memset(p, 0, sizeof *p);
}

/* Descriptors and layouts of a shape; 0 or -1. */
static int plan_describe(kc_lt_plan *p) {
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    if (cublasLtMatmulDescCreate(&p->desc, CUBLAS_COMPUTE_32I, CUDA_R_32I) != CUBLAS_STATUS_SUCCESS)
        return -1;
    if (cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulDescSetAttribute(p->desc, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) !=
            CUBLAS_STATUS_SUCCESS)
        return -1;
    if (cublasLtMatrixLayoutCreate(&p->a, CUDA_R_8I, (uint64_t)p->Kp, (uint64_t)p->Np, p->Kp) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&p->b, CUDA_R_8I, (uint64_t)p->Kp, (uint64_t)p->M, p->Kp) !=
            CUBLAS_STATUS_SUCCESS ||
        cublasLtMatrixLayoutCreate(&p->d, CUDA_R_32I, (uint64_t)p->Np, (uint64_t)p->M, p->ldd) !=
            CUBLAS_STATUS_SUCCESS)
        return -1;
    return 0;
}

/* Find or make the plan of a shape (NULL only when descriptors cannot be made). */
static kc_lt_plan *plan_get(kern_cuda *c, int M, int Np, int Kp, int ldd) {
    for (int i = 0; i < KC_LT_PLANS; i++) {
        kc_lt_plan *p = &c->plans[i];
        if (p->used && p->M == M && p->Np == Np && p->Kp == Kp && p->ldd == ldd) return p;
    }
    kc_lt_plan *p = &c->plans[c->plan_next];
    c->plan_next = (c->plan_next + 1) % KC_LT_PLANS;
    plan_free(p);
    p->used = 1;
    p->M = M, p->Np = Np, p->Kp = Kp, p->ldd = ldd;
    c->st.lt_plans++;
    if (plan_describe(p) != 0) {
        plan_free(p);
        return NULL;
    }
    p->ok = 1; /* until every candidate has failed */
    return p;
}

/* Try cuBLASLt: D (Np x M, ldd) = int32 sums.  Returns 0 when enqueued. */
static int lt_run(kern_cuda *c, int M, const int8_t *xq, const kern_cuda_w8 *w, int32_t *D,
                  int ldd) {
    kc_lt_plan *p = plan_get(c, M, w->Np, w->Kp, ldd);
    if (!p || !p->ok) return -1;
    int32_t one = 1, zero = 0;
    if (p->chosen) /* a choice that enqueued before */
        return cublasLtMatmul(c->lt, p->desc, &one, w->q, p->a, xq, p->b, &zero, D, p->d, D, p->d,
                              p->has_algo ? &p->algo : NULL, p->ws ? c->lt_ws : NULL, p->ws,
                              c->stream) == CUBLAS_STATUS_SUCCESS
                   ? 0
                   : -1;
    /* first use: the heuristic's candidates in order, then the library's default.
     * Alignment the callers guarantee: 16 bytes for every operand (the
     * heuristic would otherwise assume 256). */
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res[KC_LT_ALGOS];
    int n = 0;
    size_t wsb = KC_LT_WS;
    uint32_t al = 16;
    if (cublasLtMatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb,
                                             sizeof wsb) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al,
                                             sizeof al) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al,
                                             sizeof al) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al,
                                             sizeof al) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al,
                                             sizeof al) != CUBLAS_STATUS_SUCCESS ||
        cublasLtMatmulAlgoGetHeuristic(c->lt, p->desc, p->a, p->b, p->d, p->d, pref, KC_LT_ALGOS,
                                       res, &n) != CUBLAS_STATUS_SUCCESS)
        n = 0;
    if (pref) cublasLtMatmulPreferenceDestroy(pref);
    for (int i = 0; i < n; i++) {
        if (res[i].state != CUBLAS_STATUS_SUCCESS || res[i].workspaceSize > KC_LT_WS) continue;
        if (cublasLtMatmul(c->lt, p->desc, &one, w->q, p->a, xq, p->b, &zero, D, p->d, D, p->d,
                           &res[i].algo, c->lt_ws, res[i].workspaceSize,
                           c->stream) == CUBLAS_STATUS_SUCCESS) {
            p->algo = res[i].algo;
            p->has_algo = 1;
            p->ws = res[i].workspaceSize;
            p->chosen = 1;
            return 0;
        }
    }
    if (cublasLtMatmul(c->lt, p->desc, &one, w->q, p->a, xq, p->b, &zero, D, p->d, D, p->d, NULL,
                       NULL, 0, c->stream) == CUBLAS_STATUS_SUCCESS) {
        p->has_algo = 0;
        p->ws = 0;
        p->chosen = 1;
        return 0;
    }
    p->ok = 0;
    return -1;
}

/* The context's int32 scratch, at least bytes (NULL on failure, recorded). */
static int32_t *i32_scratch(kern_cuda *c, size_t bytes) {
    if (c->i32_bytes >= bytes) return c->i32;
    if (c->i32) {
        kc_cuda_err(c, cudaStreamSynchronize(c->stream), "int32 scratch");
        cudaFree(c->i32);
    }
    c->i32 = NULL;
    c->i32_bytes = 0;
    if (cudaMalloc((void **)&c->i32, bytes) != cudaSuccess) {
        c->i32 = NULL;
        cudaGetLastError();
        kern_cuda_fail(c, KERN_CUDA_ENOMEM, "int8 GEMM: no device memory for %zu bytes of sums",
                       bytes);
        return NULL;
    }
    c->i32_bytes = bytes;
    return c->i32;
}

extern "C" int kern_cuda_gemm_i32(kern_cuda *c, int M, const int8_t *xq, const kern_cuda_w8 *w,
                                  int32_t *D, int ldd, int path) {
    if (M <= 0 || c->status) return KERN_CUDA_GEMM_GEMV;
    kern_cuda_bind(c);
    if (path == KERN_CUDA_GEMM_AUTO) path = kern_cuda_gemm_pick(M, w->N, w->K);
    if (path == KERN_CUDA_GEMM_LT) {
        if (lt_run(c, M, xq, w, D, ldd) == 0) {
            c->st.lt++;
            return KERN_CUDA_GEMM_LT;
        }
        c->st.lt_fallback++;
    }
    c->st.gemv++;
    gemv_all(c, M, xq, NULL, w, NULL, 0, D, ldd);
    return KERN_CUDA_GEMM_GEMV;
}

extern "C" int kern_cuda_linear_i8(kern_cuda *c, int M, const int8_t *xq, const float *xs,
                                   const kern_cuda_w8 *w, float *C, int ldc, int path) {
    if (M <= 0 || c->status) return KERN_CUDA_GEMM_GEMV;
    kern_cuda_bind(c);
    if (path == KERN_CUDA_GEMM_AUTO) path = kern_cuda_gemm_pick(M, w->N, w->K);
    if (path == KERN_CUDA_GEMM_LT) {
        int inplace = kern_cuda_gemm_inplace(w->N, ldc, (uintptr_t)C) && w->Np == w->N;
        int ldd = inplace ? ldc : w->Np;
        int32_t *D = inplace ? (int32_t *)C : i32_scratch(c, (size_t)M * w->Np * sizeof(int32_t));
        if (!D) return KERN_CUDA_GEMM_LT;
        if (lt_run(c, M, xq, w, D, ldd) == 0) {
            c->st.lt++;
            size_t n = (size_t)M * w->N;
            kc_dequant_kernel<<<kc_blocks(n, 256), 256, 0, c->stream>>>(M, w->N, D, ldd, xs,
                                                                        w->scale, C, ldc);
            kc_launched(c, "int8 GEMM dequantisation");
            return KERN_CUDA_GEMM_LT;
        }
        c->st.lt_fallback++;
    }
    c->st.gemv++;
    gemv_all(c, M, xq, xs, w, C, ldc, NULL, 0);
    return KERN_CUDA_GEMM_GEMV;
}

/* ---- the CPU's form: 32-value blocks ------------------------------------------------------ */

/* One warp per output channel; per pass 32 lanes x 16 bytes = 16 blocks,
 * whose sums lanes 2j, 2j+1 hold; every lane then folds them into f in
 * block order (the CPU's fmaf sequence, so the result is bit for bit). */
__global__ void kc_gemv_b32_kernel(int M, int N, int Kp, const int8_t *__restrict__ W,
                                   const float *__restrict__ bscale,
                                   const float *__restrict__ scale, const int8_t *__restrict__ xq,
                                   const float *__restrict__ xs, float *C, int ldc) {
    int lane = threadIdx.x & 31;
    int n = blockIdx.x * KC_GEMV_WARPS + (threadIdx.x >> 5);
    if (n >= N) return;
    int nb = Kp / 32, k16 = Kp / 16;
    const int4 *w4 = (const int4 *)(W + (size_t)n * Kp);
    const float *wb = bscale ? bscale + (size_t)n * nb : NULL;
    float f[KERN_CUDA_GEMV_MAX_M];
#pragma unroll
    for (int m = 0; m < KERN_CUDA_GEMV_MAX_M; m++) f[m] = 0;
    for (int i0 = 0; i0 < k16; i0 += 32) {
        int i = i0 + lane, b0 = i0 / 2, nbi = nb - b0 < 16 ? nb - b0 : 16;
        int4 w = i < k16 ? __ldg(w4 + i) : make_int4(0, 0, 0, 0);
        float ws = lane < nbi && wb ? wb[b0 + lane] : 1.0f;
#pragma unroll
        for (int m = 0; m < KERN_CUDA_GEMV_MAX_M; m++) {
            if (m >= M) break;
            int s = 0;
            if (i < k16) {
                int4 x = __ldg((const int4 *)(xq + (size_t)m * Kp) + i);
                s = __dp4a(w.x, x.x, s);
                s = __dp4a(w.y, x.y, s);
                s = __dp4a(w.z, x.z, s);
                s = __dp4a(w.w, x.w, s);
            }
            s += __shfl_xor_sync(0xffffffffu, s, 1); /* lanes 2j, 2j+1: block b0 + j */
            float sc = lane < nbi ? xs[(size_t)m * nb + b0 + lane] : 0.0f;
            if (wb) sc = ws * sc;
            for (int j = 0; j < nbi; j++)
                f[m] = fmaf((float)__shfl_sync(0xffffffffu, s, 2 * j),
                            __shfl_sync(0xffffffffu, sc, j), f[m]);
        }
    }
#pragma unroll
    for (int m = 0; m < KERN_CUDA_GEMV_MAX_M; m++) {
        if (m >= M) break;
        if (lane == 0) C[(size_t)m * ldc + n] = wb ? f[m] : f[m] * scale[n];
    }
}

#define KC_T 64 /* the tiled kernel's output tile: KC_T x KC_T, 4 x 4 per thread */

/* Tiled: each thread owns 4 x 4 outputs and sums every block in order. */
__global__ void kc_gemm_b32_kernel(int M, int N, int Kp, const int8_t *__restrict__ W,
                                   const float *__restrict__ bscale,
                                   const float *__restrict__ scale, const int8_t *__restrict__ xq,
                                   const float *__restrict__ xs, float *C, int ldc) {
    __shared__ int As[KC_T][9], Ws[KC_T][9]; /* a block's 32 bytes per row, padded */
    __shared__ float Asc[KC_T], Wsc[KC_T];
    int tid = threadIdx.x, tx = tid % 16, ty = tid / 16;
    int m0 = blockIdx.y * KC_T, n0 = blockIdx.x * KC_T, nb = Kp / 32;
    float f[4][4];
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) f[i][j] = 0;
    for (int b = 0; b < nb; b++) {
        for (int t = tid; t < KC_T * 8; t += 256) {
            int r = t / 8, w = t % 8, m = m0 + r, n = n0 + r;
            As[r][w] = m < M ? ((const int *)(xq + (size_t)m * Kp + (size_t)b * 32))[w] : 0;
            Ws[r][w] = n < N ? ((const int *)(W + (size_t)n * Kp + (size_t)b * 32))[w] : 0;
        }
        if (tid < KC_T) Asc[tid] = m0 + tid < M ? xs[(size_t)(m0 + tid) * nb + b] : 0.0f;
        else if (tid < 2 * KC_T)
            Wsc[tid - KC_T] =
                bscale && n0 + tid - KC_T < N ? bscale[(size_t)(n0 + tid - KC_T) * nb + b] : 1.0f;
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 4; i++)
#pragma unroll
            for (int j = 0; j < 4; j++) {
                const int *a = As[ty * 4 + i], *w = Ws[tx * 4 + j];
                int s = 0;
#pragma unroll
                for (int k = 0; k < 8; k++) s = __dp4a(a[k], w[k], s);
                float sc = bscale ? Wsc[tx * 4 + j] * Asc[ty * 4 + i] : Asc[ty * 4 + i];
                f[i][j] = fmaf((float)s, sc, f[i][j]);
            }
        __syncthreads();
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
#pragma unroll
        for (int j = 0; j < 4; j++) {
            int m = m0 + ty * 4 + i, n = n0 + tx * 4 + j;
            if (m < M && n < N) C[(size_t)m * ldc + n] = bscale ? f[i][j] : f[i][j] * scale[n];
        }
}

extern "C" void kern_cuda_linear_b32(kern_cuda *c, int M, const int8_t *xq, const float *xs,
                                     const kern_cuda_w8b *w, float *C, int ldc) {
    if (M <= 0 || c->status) return;
    kern_cuda_bind(c);
    if (M <= KERN_CUDA_GEMV_MAX_M) {
        c->st.gemv++;
        kc_gemv_b32_kernel<<<kc_blocks((size_t)w->N, KC_GEMV_WARPS), 32 * KC_GEMV_WARPS, 0,
                             c->stream>>>(M, w->N, w->Kp, w->q, w->bscale, w->scale, xq, xs, C,
                                          ldc);
        kc_launched(c, "int8 GEMV (blocks)");
        return;
    }
    c->st.tiled++;
    dim3 grid((unsigned)((w->N + KC_T - 1) / KC_T), (unsigned)((M + KC_T - 1) / KC_T));
    kc_gemm_b32_kernel<<<grid, 256, 0, c->stream>>>(M, w->N, w->Kp, w->q, w->bscale, w->scale, xq,
                                                    xs, C, ldc);
    kc_launched(c, "int8 GEMM (blocks)");
}

extern "C" void kern_cuda_gemm_f32(kern_cuda *c, int M, int N, int K, const float *x, int ldx,
                                   const float *W, float *C, int ldc) {
    if (M <= 0 || N <= 0 || c->status) return;
    kern_cuda_bind(c);
    const float one = 1.0f, zero = 0.0f;
    cublasStatus_t s =
        cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, N, M, K, &one, W, K, x, ldx, &zero, C, ldc);
    if (s != CUBLAS_STATUS_SUCCESS)
        kern_cuda_fail(c, KERN_CUDA_EFAIL, "cublasSgemm (M %d, N %d, K %d): status %d", M, N, K,
                       (int)s);
}
