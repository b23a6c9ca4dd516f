/*
 * kern_gemm.c -- int8 (W8A8) and fp32 GEMM kernels and their threaded
 * drivers (see kern_gemm.h for the contracts).
 *
 * Structure: scalar references first; then the tile kernels (portable C and
 * AVX2+FMA, both computing an mr x nr block of outputs from whole K rows);
 * then the drivers that cut C into 64-row x 16-column tasks for the pool.
 *
 * AVX2 int8: the product of signed bytes uses the usual sign trick,
 * maddubs(|a|, sign(w, a)) = pairwise a*w in int16 (no saturation for
 * operands in [-127, 127]: 2*127*127 < 32767), then madd with ones widens
 * to int32.  Each 32-byte K chunk of one A row is loaded once per micro
 * tile and reused across the tile's weight rows.
 */
#include "kern_gemm.h"

#include <stddef.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KERN_X86 1
#else
#define KERN_X86 0
#endif

#define KERN_MB 64 /* rows of C per task */
#define KERN_NB 16 /* columns of C per task */

kern_isa kern_isa_best(void) {
#if KERN_X86
    static int cached = -1;
    if (cached < 0) {
        __builtin_cpu_init();
        cached = (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
                     ? KERN_ISA_AVX2 : KERN_ISA_SCALAR;
    }
    return (kern_isa)cached;
#else
    return KERN_ISA_SCALAR;
#endif
}

void kern_gemm_i8_ref(int M, int N, int K, const int8_t *A, const int8_t *W, int32_t *C) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            int32_t s = 0;
            for (int k = 0; k < K; k++) s += (int32_t)A[(size_t)m * K + k] * W[(size_t)n * K + k];
            C[(size_t)m * N + n] = s;
        }
}

void kern_gemm_f32_ref(int M, int N, int K, const float *A, const float *W, float *C) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double s = 0;
            for (int k = 0; k < K; k++) s += (double)A[(size_t)m * K + k] * W[(size_t)n * K + k];
            C[(size_t)m * N + n] = (float)s;
        }
}

void kern_gemm_i8_bs_ref(int M, int N, int K, const int8_t *A, const float *a_scale,
                         const int8_t *W, const float *bscale, float *C) {
    int nb = K / 32;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float acc = 0;
            for (int b = 0; b < nb; b++) {
                int32_t s = 0;
                for (int k = b * 32; k < b * 32 + 32; k++)
                    s += (int32_t)A[(size_t)m * K + k] * W[(size_t)n * K + k];
                acc += (float)s * bscale[(size_t)n * nb + b];
            }
            C[(size_t)m * N + n] = acc * a_scale[m];
        }
}

/* ---- tile kernels: out[i*ldo + j] for i < mr, j < nr ------------------ */

typedef void (*kern_tile_i8_fn)(int mr, int nr, int K, const int8_t *A, const int8_t *W,
                                int32_t *out, int ldo);
typedef void (*kern_tile_bs_fn)(int mr, int nr, int K, const int8_t *A, const int8_t *W,
                                const float *bs, float *out, int ldo);
typedef void (*kern_tile_f32_fn)(int mr, int nr, int K, const float *A, const float *W,
                                 float *out, int ldo);

static void kern_tile_i8_scalar(int mr, int nr, int K, const int8_t *A, const int8_t *W,
                                int32_t *out, int ldo) {
    for (int i = 0; i < mr; i++) {
        const int8_t *a = A + (size_t)i * K;
        int j = 0;
        for (; j + 4 <= nr; j += 4) {
            const int8_t *w0 = W + (size_t)j * K, *w1 = w0 + K, *w2 = w1 + K, *w3 = w2 + K;
            int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            for (int k = 0; k < K; k++) {
                int32_t x = a[k];
                s0 += x * w0[k];
                s1 += x * w1[k];
                s2 += x * w2[k];
                s3 += x * w3[k];
            }
            out[i * ldo + j] = s0;
            out[i * ldo + j + 1] = s1;
            out[i * ldo + j + 2] = s2;
            out[i * ldo + j + 3] = s3;
        }
        for (; j < nr; j++) {
            const int8_t *w = W + (size_t)j * K;
            int32_t s = 0;
            for (int k = 0; k < K; k++) s += (int32_t)a[k] * w[k];
            out[i * ldo + j] = s;
        }
    }
}

/* Portable block-scaled int8: sequential over blocks, like the reference. */
static void kern_tile_bs_scalar(int mr, int nr, int K, const int8_t *A, const int8_t *W,
                                const float *bs, float *out, int ldo) {
    int nb = K / 32;
    for (int i = 0; i < mr; i++)
        for (int j = 0; j < nr; j++) {
            const int8_t *a = A + (size_t)i * K, *w = W + (size_t)j * K;
            float acc = 0;
            for (int b = 0; b < nb; b++) {
                int32_t s = 0;
                for (int k = b * 32; k < b * 32 + 32; k++) s += (int32_t)a[k] * w[k];
                acc += (float)s * bs[(size_t)j * nb + b];
            }
            out[i * ldo + j] = acc;
        }
}

/* Portable fp32: every output is a sequential sum over k (fixed order). */
static void kern_tile_f32_scalar(int mr, int nr, int K, const float *A, const float *W,
                                 float *out, int ldo) {
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

KERN_AVX2 KERN_INLINE int32_t kern_hsum_i32(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
    return _mm_cvtsi128_si32(s);
}

KERN_AVX2 KERN_INLINE float kern_hsum_f32(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* MR x NR micro tile (constants after inlining: accumulators in registers). */
KERN_AVX2 KERN_INLINE void kern_mk_i8(const int MR, const int NR, int K, const int8_t *A,
                                      const int8_t *W, int32_t *out, int ldo) {
    __m256i acc[4][4];
    const __m256i ones = _mm256_set1_epi16(1);
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = _mm256_setzero_si256();
    int k = 0;
    for (; k + 32 <= K; k += 32) {
        __m256i w[4];
        for (int j = 0; j < NR; j++) w[j] = _mm256_loadu_si256((const __m256i *)(W + (size_t)j * K + k));
        for (int i = 0; i < MR; i++) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(A + (size_t)i * K + k));
            __m256i aa = _mm256_sign_epi8(a, a);
            for (int j = 0; j < NR; j++) {
                __m256i p = _mm256_maddubs_epi16(aa, _mm256_sign_epi8(w[j], a));
                acc[i][j] = _mm256_add_epi32(acc[i][j], _mm256_madd_epi16(p, ones));
            }
        }
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) {
            int32_t s = kern_hsum_i32(acc[i][j]);
            const int8_t *a = A + (size_t)i * K, *w = W + (size_t)j * K;
            for (int t = k; t < K; t++) s += (int32_t)a[t] * w[t];
            out[i * ldo + j] = s;
        }
}

KERN_AVX2 static void kern_tile_i8_avx2(int mr, int nr, int K, const int8_t *A, const int8_t *W,
                                        int32_t *out, int ldo) {
    int i = 0;
    for (; i + 4 <= mr; i += 4) {
        const int8_t *a = A + (size_t)i * K;
        int j = 0;
        for (; j + 2 <= nr; j += 2) kern_mk_i8(4, 2, K, a, W + (size_t)j * K, out + i * ldo + j, ldo);
        for (; j < nr; j++) kern_mk_i8(4, 1, K, a, W + (size_t)j * K, out + i * ldo + j, ldo);
    }
    for (; i < mr; i++) {
        const int8_t *a = A + (size_t)i * K;
        int j = 0;
        for (; j + 4 <= nr; j += 4) kern_mk_i8(1, 4, K, a, W + (size_t)j * K, out + i * ldo + j, ldo);
        for (; j < nr; j++) kern_mk_i8(1, 1, K, a, W + (size_t)j * K, out + i * ldo + j, ldo);
    }
}

/* Block-scaled micro tile: each 32-byte chunk is one weight block; its 8
 * int32 lane sums are converted to float and accumulated with the block's
 * scale (K is a multiple of 32). */
KERN_AVX2 KERN_INLINE void kern_mk_bs(const int MR, const int NR, int K, const int8_t *A,
                                      const int8_t *W, const float *bs, float *out, int ldo) {
    __m256 acc[4][4];
    const __m256i ones = _mm256_set1_epi16(1);
    int nb = K / 32;
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) acc[i][j] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m256i w[4];
        __m256 s[4];
        for (int j = 0; j < NR; j++) {
            w[j] = _mm256_loadu_si256((const __m256i *)(W + (size_t)j * K + b * 32));
            s[j] = _mm256_broadcast_ss(bs + (size_t)j * nb + b);
        }
        for (int i = 0; i < MR; i++) {
            __m256i a = _mm256_loadu_si256((const __m256i *)(A + (size_t)i * K + b * 32));
            __m256i aa = _mm256_sign_epi8(a, a);
            for (int j = 0; j < NR; j++) {
                __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(aa, _mm256_sign_epi8(w[j], a)), ones);
                acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(p), s[j], acc[i][j]);
            }
        }
    }
    for (int i = 0; i < MR; i++)
        for (int j = 0; j < NR; j++) out[i * ldo + j] = kern_hsum_f32(acc[i][j]);
}

KERN_AVX2 static void kern_tile_bs_avx2(int mr, int nr, int K, const int8_t *A, const int8_t *W,
                                        const float *bs, float *out, int ldo) {
    int nb = K / 32, i = 0;
    for (; i + 4 <= mr; i += 4) {
        const int8_t *a = A + (size_t)i * K;
        int j = 0;
        for (; j + 2 <= nr; j += 2)
            kern_mk_bs(4, 2, K, a, W + (size_t)j * K, bs + (size_t)j * nb, out + i * ldo + j, ldo);
        for (; j < nr; j++)
            kern_mk_bs(4, 1, K, a, W + (size_t)j * K, bs + (size_t)j * nb, out + i * ldo + j, ldo);
    }
    for (; i < mr; i++) {
        const int8_t *a = A + (size_t)i * K;
        int j = 0;
        for (; j + 4 <= nr; j += 4)
            kern_mk_bs(1, 4, K, a, W + (size_t)j * K, bs + (size_t)j * nb, out + i * ldo + j, ldo);
        for (; j < nr; j++)
            kern_mk_bs(1, 1, K, a, W + (size_t)j * K, bs + (size_t)j * nb, out + i * ldo + j, ldo);
    }
}

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
            float s = kern_hsum_f32(acc[i][j]);
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
        for (; j + 2 <= nr; j += 2) kern_mk_f32(4, 2, K, a, W + (size_t)j * K, out + i * ldo + j, ldo);
        for (; j < nr; j++) kern_mk_f32(4, 1, K, a, W + (size_t)j * K, out + i * ldo + j, ldo);
    }
    for (; i < mr; i++) {
        const float *a = A + (size_t)i * K;
        int j = 0;
        for (; j + 4 <= nr; j += 4) kern_mk_f32(1, 4, K, a, W + (size_t)j * K, out + i * ldo + j, ldo);
        for (; j < nr; j++) kern_mk_f32(1, 1, K, a, W + (size_t)j * K, out + i * ldo + j, ldo);
    }
}
#endif

static kern_tile_i8_fn kern_pick_i8(kern_isa isa) {
#if KERN_X86
    if (isa == KERN_ISA_AVX2 && kern_isa_best() == KERN_ISA_AVX2) return kern_tile_i8_avx2;
#endif
    (void)isa;
    return kern_tile_i8_scalar;
}

static kern_tile_bs_fn kern_pick_bs(kern_isa isa) {
#if KERN_X86
    if (isa == KERN_ISA_AVX2 && kern_isa_best() == KERN_ISA_AVX2) return kern_tile_bs_avx2;
#endif
    (void)isa;
    return kern_tile_bs_scalar;
}

static kern_tile_f32_fn kern_pick_f32(kern_isa isa) {
#if KERN_X86
    if (isa == KERN_ISA_AVX2 && kern_isa_best() == KERN_ISA_AVX2) return kern_tile_f32_avx2;
#endif
    (void)isa;
    return kern_tile_f32_scalar;
}

/* ---- threaded drivers --------------------------------------------------- */

typedef struct kern_gemm_job {
    int M, N, K;             /* shape */
    int n_mt, n_nt;          /* tiles along M and N */
    const void *A, *W;       /* operands (int8 or float) */
    const float *a_scale;    /* int8 scaled: per-row scales */
    const float *w_scale;    /* int8 scaled: per-channel scales; mode 3: block scales */
    void *C;                 /* output: int32 or float */
    int ldc;                 /* row stride of C */
    int mode;                /* 0 int32 out, 1 int8 scaled, 2 fp32, 3 int8 block-scaled */
    kern_tile_i8_fn ti8;     /* int8 tile kernel */
    kern_tile_f32_fn tf32;   /* fp32 tile kernel */
    kern_tile_bs_fn tbs;     /* block-scaled tile kernel */
} kern_gemm_job;

static void kern_gemm_task(void *arg, int task, int thread) {
    (void)thread;
    const kern_gemm_job *j = arg;
    /* N-major task order: consecutive tasks share weight rows across M. */
    int nt = task / j->n_mt, mt = task % j->n_mt;
    int m0 = mt * KERN_MB, n0 = nt * KERN_NB;
    int mr = j->M - m0 < KERN_MB ? j->M - m0 : KERN_MB;
    int nr = j->N - n0 < KERN_NB ? j->N - n0 : KERN_NB;
    size_t K = (size_t)j->K;
    if (j->mode == 2) {
        const float *A = (const float *)j->A + (size_t)m0 * K;
        const float *W = (const float *)j->W + (size_t)n0 * K;
        j->tf32(mr, nr, j->K, A, W, (float *)j->C + (size_t)m0 * j->ldc + n0, j->ldc);
        return;
    }
    const int8_t *A = (const int8_t *)j->A + (size_t)m0 * K;
    const int8_t *W = (const int8_t *)j->W + (size_t)n0 * K;
    if (j->mode == 3) {
        float *c = (float *)j->C + (size_t)m0 * j->ldc + n0;
        j->tbs(mr, nr, j->K, A, W, j->w_scale + (size_t)n0 * (K / 32), c, j->ldc);
        for (int i = 0; i < mr; i++)
            for (int t = 0; t < nr; t++) c[(size_t)i * j->ldc + t] *= j->a_scale[m0 + i];
        return;
    }
    if (j->mode == 0) {
        j->ti8(mr, nr, j->K, A, W, (int32_t *)j->C + (size_t)m0 * j->ldc + n0, j->ldc);
        return;
    }
    int32_t tile[KERN_MB * KERN_NB];
    j->ti8(mr, nr, j->K, A, W, tile, KERN_NB);
    for (int i = 0; i < mr; i++) {
        float *c = (float *)j->C + (size_t)(m0 + i) * j->ldc + n0;
        float as = j->a_scale[m0 + i];
        for (int t = 0; t < nr; t++) c[t] = (float)tile[i * KERN_NB + t] * as * j->w_scale[n0 + t];
    }
}

static void kern_gemm_launch(kern_pool *p, kern_gemm_job *j) {
    if (j->M <= 0 || j->N <= 0) return;
    j->n_mt = (j->M + KERN_MB - 1) / KERN_MB;
    j->n_nt = (j->N + KERN_NB - 1) / KERN_NB;
    kern_pool_run(p, kern_gemm_task, j, j->n_mt * j->n_nt);
}

void kern_gemm_i8(kern_pool *p, kern_isa isa, int M, int N, int K, const int8_t *A,
                  const int8_t *W, int32_t *C) {
    kern_gemm_job j = {.M = M, .N = N, .K = K, .A = A, .W = W, .C = C, .ldc = N,
                       .mode = 0, .ti8 = kern_pick_i8(isa)};
    kern_gemm_launch(p, &j);
}

void kern_gemm_i8_scaled(kern_pool *p, kern_isa isa, int M, int N, int K, const int8_t *A,
                         const float *a_scale, const int8_t *W, const float *w_scale,
                         float *C, int ldc) {
    kern_gemm_job j = {.M = M, .N = N, .K = K, .A = A, .W = W, .a_scale = a_scale,
                       .w_scale = w_scale, .C = C, .ldc = ldc, .mode = 1,
                       .ti8 = kern_pick_i8(isa)};
    kern_gemm_launch(p, &j);
}

void kern_gemm_i8_bs(kern_pool *p, kern_isa isa, int M, int N, int K, const int8_t *A,
                     const float *a_scale, const int8_t *W, const float *bscale, float *C,
                     int ldc) {
    kern_gemm_job j = {.M = M, .N = N, .K = K, .A = A, .W = W, .a_scale = a_scale,
                       .w_scale = bscale, .C = C, .ldc = ldc, .mode = 3,
                       .tbs = kern_pick_bs(isa)};
    kern_gemm_launch(p, &j);
}

void kern_gemm_f32(kern_pool *p, kern_isa isa, int M, int N, int K, const float *A,
                   const float *W, float *C, int ldc) {
    kern_gemm_job j = {.M = M, .N = N, .K = K, .A = A, .W = W, .C = C, .ldc = ldc,
                       .mode = 2, .tf32 = kern_pick_f32(isa)};
    kern_gemm_launch(p, &j);
}
