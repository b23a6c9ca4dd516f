/*
 * kern_gemm_f32.c -- the fp32 GEMM of the reference-precision path
 * (eng precision fp32): C = A . W^T with W row-major [N][K], threaded over
 * tiles of 64 rows x 16 columns (contract in kern_gemm.h).
 *
 * Both tile kernels (portable C and AVX2+FMA) sum each output in a fixed
 * order that does not depend on M or the tiling, so a row's result is the
 * same whatever batch it is computed in.
 */
#include <stddef.h>

#include "kern_gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "kern_avx2_reduce.h"
#define KERN_X86 1
#else
#define KERN_X86 0
#endif

#define KERN_F32_MB 64 /* rows of C per task */
#define KERN_F32_NB 16 /* columns of C per task */

typedef void (*kern_tile_f32_fn)(int mr, int nr, int K, const float *A, const float *W, float *out,
                                 int ldo);

void kern_gemm_f32_ref(int M, int N, int K, const float *A, const float *W, float *C) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)A[(size_t)m * K + k] * W[(size_t)n * K + k];
            C[(size_t)m * N + n] = (float)s;
        }
}

/* Portable fp32: every output is a sequential sum over k (fixed order). */
static void kern_tile_f32_scalar(int mr, int nr, int K, const float *A, const float *W, float *out,
                                 int ldo) {
    for (int i = 0; i < mr; i++) {
        const float *a = A + (size_t)i * K;
        for (int j = 0; j < nr; j++) {
            const float *w = W + (size_t)j * K;
            float s = 0;
            for (int k = 0; k < K; k++) s += a[k] * w[k];
            out[i * ldo + j] = s;
        }
    }
}

#if KERN_X86
#define KERN_AVX2 __attribute__((target("avx2,fma")))
#define KERN_INLINE static inline __attribute__((always_inline))

/* fp32 micro tile: each output = hsum of 8 FMA lanes over k in chunks of 8,
 * then the tail added in order; identical for every MR/NR. */
KERN_AVX2 KERN_INLINE void kern_mk_f32(const int MR, const int NR, int K, const float *A,
                                       const float *W, float *out, int ldo) {
    __m256 acc[4][4];
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = _mm256_setzero_ps();
    int k = 0;
    for (; k + 8 <= K; k += 8) {
        __m256 w[4];
        for (int j = 0; j < NR; j++) w[j] = _mm256_loadu_ps(W + (size_t)j * K + k);
        for (int i = 0; i < MR; i++) {
            __m256 a = _mm256_loadu_ps(A + (size_t)i * K + k);
            for (int j = 0; j < NR; j++) acc[i][j] = _mm256_fmadd_ps(a, w[j], acc[i][j]);
        }
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) {
            float s = kern_hsum_ps(acc[i][j]);
            const float *a = A + (size_t)i * K, *w = W + (size_t)j * K;
            for (int t = k; t < K; t++) s += a[t] * w[t];
            out[i * ldo + j] = s;
        }
}

KERN_AVX2 static void kern_tile_f32_avx2(int mr, int nr, int K, const float *A, const float *W,
                                         float *out, int ldo) {
    int i = 0;
    for (; i + 4 <= mr; i += 4) {
        const float *a = A + (size_t)i * K;
        int j = 0;
        for (; j + 2 <= nr; j += 2)
            kern_mk_f32(4, 2, K, a, W + (size_t)j * K, out + i * ldo + j, ldo);
        for (; j < nr; j++) kern_mk_f32(4, 1, K, a, W + (size_t)j * K, out + i * ldo + j, ldo);
    }
    for (; i < mr; i++) {
        const float *a = A + (size_t)i * K;
        int j = 0;
        for (; j + 4 <= nr; j += 4)
            kern_mk_f32(1, 4, K, a, W + (size_t)j * K, out + i * ldo + j, ldo);
        for (; j < nr; j++) kern_mk_f32(1, 1, K, a, W + (size_t)j * K, out + i * ldo + j, ldo);
    }
}
#endif

typedef struct kern_f32_job {
    int M, N, K;           /* shape */
    int n_mt;              /* tiles along M */
    const float *A, *W;    /* operands */
    float *C;              /* output */
    int ldc;               /* row stride of C */
    kern_tile_f32_fn tile; /* tile kernel */
} kern_f32_job;

static void kern_f32_task(void *arg, int task, int thread) {
    (void)thread;
    const kern_f32_job *j = arg;
    int nt = task / j->n_mt, mt = task % j->n_mt;
    int m0 = mt * KERN_F32_MB, n0 = nt * KERN_F32_NB;
    int mr = j->M - m0 < KERN_F32_MB ? j->M - m0 : KERN_F32_MB;
    int nr = j->N - n0 < KERN_F32_NB ? j->N - n0 : KERN_F32_NB;
    j->tile(mr, nr, j->K, j->A + (size_t)m0 * j->K, j->W + (size_t)n0 * j->K,
            j->C + (size_t)m0 * j->ldc + n0, j->ldc);
}

void kern_gemm_f32(kern_pool *p, kern_isa isa, int M, int N, int K, const float *A, const float *W,
                   float *C, int ldc) {
    if (M <= 0 || N <= 0) return;
    kern_f32_job j = {
        .M = M, .N = N, .K = K, .A = A, .W = W, .C = C, .ldc = ldc, .tile = kern_tile_f32_scalar};
#if KERN_X86
    if (isa >= KERN_ISA_AVX2 && kern_isa_best() >= KERN_ISA_AVX2) j.tile = kern_tile_f32_avx2;
#endif
    (void)isa;
    j.n_mt = (M + KERN_F32_MB - 1) / KERN_F32_MB;
    kern_pool_run(p, kern_f32_task, &j, j.n_mt * ((N + KERN_F32_NB - 1) / KERN_F32_NB));
}
