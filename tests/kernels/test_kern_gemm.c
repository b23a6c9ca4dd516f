/*
 * test_kern_gemm.c -- the packed int8 GEMM (kern_gemm_q8) on every ISA path
 * this machine runs, against the scalar references:
 *   - raw int32 sums bit-exact with kern_gemm_i8_ref for random shapes
 *     including odd M, N, K (per-channel packs) and +-127 extremes;
 *   - the per-channel float result exactly as kern_gemm.h defines it (one
 *     fmaf per 32-input block with the activation block scale, then
 *     scale[n]);
 *   - per-channel and block-scaled (Q8_0) packs with per-block activation
 *     scales: every path bit-identical with the portable one, within float
 *     rounding of kern_gemm_i8_pc_ref / kern_gemm_i8_bs_ref, and a row's
 *     result independent of the batch and thread count it runs with;
 *   - fp16 scale conversion round trips;
 *   - a packed row read back (kern_wpack_row_f32) equals the row-major one;
 *   - the general form (kern_gemm_q8_run): with the quantiser's block sums,
 *     outputs into per-row pointers and a running argmax, every value bit
 *     for bit the dense call's and every argmax kern_argmax's of the dense
 *     row (ties: duplicated weight rows; split over two "runs" of columns);
 *   - argmax keys order NaN as -inf, -0 as +0, ties by lowest index.
 * Paths: scalar .. kern_isa_best() (PARLEY_ISA may lower it for a run).
 */
#define PTEST_MAIN
#include "ptest.h"

#include <math.h>

#include "kern_gemm.h"
#include "kern_gemm_int.h"
#include "kern_ops.h"
#include "kern_pool.h"

static void fill_i8(int8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (int8_t)((int)(pt_rand() % 255) - 127);
}

/* A [M][lda] with zero padding past K. */
static int8_t *make_a(int M, int K, int lda) {
    int8_t *A = calloc((size_t)M * lda, 1);
    for (int m = 0; m < M; m++) fill_i8(A + (size_t)m * lda, (size_t)K);
    return A;
}

static const int Ms[] = {1, 2, 3, 4, 5, 7, 17, 64, 65, 130};
static const int Ns[] = {1, 2, 7, 16, 17, 33, 100};
static const int Ks[] = {1, 3, 4, 31, 32, 33, 64, 100, 257};

PT_TEST(q8_int32_bit_exact_all_shapes_all_paths) {
    kern_pool *pool;
    PT_ASSERT(kern_pool_create(3, &pool) == 0);
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
            for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
                int M = Ms[a], N = Ns[b], K = Ks[c];
                int8_t *W = malloc((size_t)N * K);
                float *ws = malloc(sizeof(float) * N);
                fill_i8(W, (size_t)N * K);
                for (int n = 0; n < N; n++) ws[n] = 1;
                kern_wpack pk;
                char err[128];
                PT_EQ_INT(kern_wpack_init(&pk, N, K, W, ws, NULL, err, sizeof err), 0);
                int lda = pk.Kp + 32 * (int)(c % 2); /* also a stride wider than Kp */
                int8_t *A = make_a(M, K, lda), *Ad = malloc((size_t)M * K);
                for (int m = 0; m < M; m++)
                    memcpy(Ad + (size_t)m * K, A + (size_t)m * lda, (size_t)K);
                int32_t *R = malloc((size_t)M * N * 4), *C = malloc((size_t)M * (N + 3) * 4);
                kern_gemm_i8_ref(M, N, K, Ad, W, R);
                for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
                    memset(C, 0x55, (size_t)M * (N + 3) * 4);
                    kern_gemm_q8_i32(isa ? pool : NULL, (kern_isa)isa, M, A, lda, &pk, C, N + 3);
                    for (int m = 0; m < M; m++) {
                        PT_ASSERT_MSG(
                            !memcmp(R + (size_t)m * N, C + (size_t)m * (N + 3), (size_t)N * 4),
                            "%s M %d N %d K %d row %d differs", kern_isa_name((kern_isa)isa), M, N,
                            K, m);
                        for (int j = N; j < N + 3; j++)
                            PT_EQ_INT(C[(size_t)m * (N + 3) + j], 0x55555555);
                    }
                }
                kern_wpack_free(&pk);
                free(A), free(Ad), free(W), free(ws), free(R), free(C);
            }
    kern_pool_destroy(pool);
}

PT_TEST(q8_extremes_no_saturation) {
    /* all +-127: the largest pairwise sums the AVX2 sign trick sees */
    int M = 5, N = 19, K = 96;
    int8_t A[5 * 96], W[19 * 96];
    float ws[19];
    for (int i = 0; i < M * K; i++) A[i] = (i & 1) ? -127 : 127;
    for (int i = 0; i < N * K; i++) W[i] = (i % 3) ? -127 : 127;
    for (int n = 0; n < N; n++) ws[n] = 1;
    int32_t R[5 * 19], C[5 * 19];
    kern_wpack pk;
    char err[128];
    PT_EQ_INT(kern_wpack_init(&pk, N, K, W, ws, NULL, err, sizeof err), 0);
    kern_gemm_i8_ref(M, N, K, A, W, R);
    for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
        kern_gemm_q8_i32(NULL, (kern_isa)isa, M, A, K, &pk, C, N);
        PT_EQ_MEM(R, C, sizeof R);
    }
    kern_wpack_free(&pk);
}

PT_TEST(q8_per_channel_epilogue_exact) {
    int M = 6, N = 19, K = 70, nb = 3, lds = 4;
    int8_t *W = malloc((size_t)N * K);
    fill_i8(W, (size_t)N * K);
    float as[6 * 4], ws[19], C[6 * 24];
    for (int i = 0; i < M * lds; i++) as[i] = 0.01f * (i % 5 + 1) * (i % 3 ? 1 : 7);
    for (int i = 0; i < N; i++) ws[i] = 0.003f * (i + 2);
    kern_wpack pk;
    char err[128];
    PT_EQ_INT(kern_wpack_init(&pk, N, K, W, ws, NULL, err, sizeof err), 0);
    PT_EQ_INT(pk.n_blocks, nb);
    int8_t *A = make_a(M, K, pk.Kp);
    for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
        kern_gemm_q8(NULL, (kern_isa)isa, M, A, pk.Kp, as, lds, &pk, C, 24);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                float f = 0;
                for (int b = 0; b < nb; b++) {
                    int32_t sb = 0;
                    for (int k = 32 * b; k < 32 * b + 32 && k < K; k++)
                        sb += (int32_t)A[(size_t)m * pk.Kp + k] * W[(size_t)n * K + k];
                    f = fmaf((float)sb, as[m * lds + b], f);
                }
                float want = f * ws[n];
                PT_EQ_MEM(&want, &C[m * 24 + n], sizeof want);
            }
    }
    kern_wpack_free(&pk);
    free(A), free(W);
}

/* |p[i]| of n int8 (a copy). */
static int8_t *abs_i8(const int8_t *p, size_t n) {
    int8_t *q = malloc(n);
    for (size_t i = 0; i < n; i++) q[i] = (int8_t)(p[i] < 0 ? -p[i] : p[i]);
    return q;
}

/* Float rounding bound for C vs a reference over nb blocks: the reference
 * on |A|, |W| bounds the sum of |terms|; each term and add rounds once. */
static double block_tol(int nb, float rabs) { return 2.4e-7 * (nb + 2) * rabs + 1e-30; }

/* Activation block scales [M][lds] with a spread of magnitudes (as
 * kern_quantize_blocks gives rows with outlier channels). */
static float *make_as(int M, int lds) {
    float *as = malloc(sizeof(float) * (size_t)M * lds);
    for (int i = 0; i < M * lds; i++)
        as[i] = 0.001f * (1 + (int)(pt_rand() % 1000)) * (i % 5 ? 1 : 30);
    return as;
}

PT_TEST(q8_per_channel_paths_identical_and_close_to_reference) {
    kern_pool *p2, *p3;
    PT_ASSERT(kern_pool_create(2, &p2) == 0 && kern_pool_create(3, &p3) == 0);
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
            for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
                int M = Ms[a], N = Ns[b], K = Ks[c], nb = (K + 31) / 32;
                int8_t *W = malloc((size_t)N * K), *Ad = make_a(M, K, K);
                float *ws = malloc(sizeof(float) * N), *as = make_as(M, nb);
                float *R = malloc(sizeof(float) * M * N), *C0 = malloc(sizeof(float) * M * N);
                float *C = malloc(sizeof(float) * M * N), *C1 = malloc(sizeof(float) * N);
                fill_i8(W, (size_t)N * K);
                for (int i = 0; i < N; i++) ws[i] = 0.0005f * (1 + i % 11);
                kern_wpack pk;
                char err[128];
                PT_EQ_INT(kern_wpack_init(&pk, N, K, W, ws, NULL, err, sizeof err), 0);
                int lda = pk.Kp;
                int8_t *A = make_a(M, 0, lda); /* zero past K up to Kp */
                for (int m = 0; m < M; m++)
                    memcpy(A + (size_t)m * lda, Ad + (size_t)m * K, (size_t)K);
                kern_gemm_i8_pc_ref(M, N, K, Ad, as, W, ws, R);
                int8_t *Aa = abs_i8(Ad, (size_t)M * K), *Wa = abs_i8(W, (size_t)N * K);
                kern_gemm_i8_pc_ref(M, N, K, Aa, as, Wa, ws, C);
                kern_gemm_q8(NULL, KERN_ISA_SCALAR, M, A, lda, as, nb, &pk, C0, N);
                for (int i = 0; i < M * N; i++) PT_NEAR(C0[i], R[i], block_tol(nb, C[i]));
                free(Aa), free(Wa);
                for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
                    kern_gemm_q8(isa % 2 ? p2 : p3, (kern_isa)isa, M, A, lda, as, nb, &pk, C, N);
                    PT_ASSERT_MSG(!memcmp(C, C0, sizeof(float) * M * N),
                                  "%s M %d N %d K %d differs from scalar",
                                  kern_isa_name((kern_isa)isa), M, N, K);
                    kern_gemm_q8(NULL, (kern_isa)isa, 1, A + (size_t)(M - 1) * lda, lda,
                                 as + (size_t)(M - 1) * nb, nb, &pk, C1, N);
                    PT_EQ_MEM(C1, C0 + (size_t)(M - 1) * N, sizeof(float) * N);
                }
                kern_wpack_free(&pk);
                free(A), free(Ad), free(W), free(ws), free(as), free(R), free(C0), free(C),
                    free(C1);
            }
    kern_pool_destroy(p2);
    kern_pool_destroy(p3);
}

PT_TEST(q8_block_scaled_paths_identical_and_close_to_reference) {
    kern_pool *p2, *p3;
    PT_ASSERT(kern_pool_create(2, &p2) == 0 && kern_pool_create(3, &p3) == 0);
    static const int Ks32[] = {32, 64, 96, 256};
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
            for (size_t c = 0; c < 4; c++) {
                int M = Ms[a], N = Ns[b], K = Ks32[c], nb = K / 32;
                int8_t *W = malloc((size_t)N * K), *A = make_a(M, K, K);
                float *as = make_as(M, nb), *bs = malloc(sizeof(float) * N * nb);
                float *R = malloc(sizeof(float) * M * N), *C0 = malloc(sizeof(float) * M * N);
                float *C = malloc(sizeof(float) * M * N), *C1 = malloc(sizeof(float) * N);
                fill_i8(W, (size_t)N * K);
                /* fp16-representable scales, as Q8_0 files hold */
                for (int i = 0; i < N * nb; i++)
                    bs[i] = kern_f16_to_f32(kern_f32_to_f16(0.002f * (1 + i % 7)));
                kern_wpack pk;
                char err[128];
                PT_EQ_INT(kern_wpack_init(&pk, N, K, W, NULL, bs, err, sizeof err), 0);
                kern_gemm_i8_bs_ref(M, N, K, A, as, W, bs, R);
                int8_t *Aa = abs_i8(A, (size_t)M * K), *Wa = abs_i8(W, (size_t)N * K);
                kern_gemm_i8_bs_ref(M, N, K, Aa, as, Wa, bs, C);
                kern_gemm_q8(NULL, KERN_ISA_SCALAR, M, A, K, as, nb, &pk, C0, N);
                for (int i = 0; i < M * N; i++) PT_NEAR(C0[i], R[i], block_tol(nb, C[i]));
                free(Aa), free(Wa);
                for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
                    kern_gemm_q8(isa % 2 ? p2 : p3, (kern_isa)isa, M, A, K, as, nb, &pk, C, N);
                    PT_ASSERT_MSG(!memcmp(C, C0, sizeof(float) * M * N),
                                  "%s M %d N %d K %d differs from scalar",
                                  kern_isa_name((kern_isa)isa), M, N, K);
                    /* the last row alone, on the calling thread, gives the same bits */
                    kern_gemm_q8(NULL, (kern_isa)isa, 1, A + (size_t)(M - 1) * K, K,
                                 as + (size_t)(M - 1) * nb, nb, &pk, C1, N);
                    PT_EQ_MEM(C1, C0 + (size_t)(M - 1) * N, sizeof(float) * N);
                }
                kern_wpack_free(&pk);
                free(A), free(W), free(as), free(bs), free(R), free(C0), free(C), free(C1);
            }
    kern_pool_destroy(p2);
    kern_pool_destroy(p3);
}

PT_TEST(q8_block_scaled_int32_mode_sums_all_blocks) {
    int M = 3, N = 21, K = 128;
    int8_t *W = malloc((size_t)N * K), *A = make_a(M, K, K);
    float bs[21 * 4];
    fill_i8(W, (size_t)N * K);
    for (int i = 0; i < N * 4; i++) bs[i] = 0.5f;
    kern_wpack pk;
    char err[128];
    PT_EQ_INT(kern_wpack_init(&pk, N, K, W, NULL, bs, err, sizeof err), 0);
    int32_t R[3 * 21], C[3 * 21];
    kern_gemm_i8_ref(M, N, K, A, W, R);
    for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
        kern_gemm_q8_i32(NULL, (kern_isa)isa, M, A, K, &pk, C, N);
        PT_EQ_MEM(R, C, sizeof R);
    }
    kern_wpack_free(&pk);
    free(W), free(A);
}

PT_TEST(wpack_rejects_bad_arguments) {
    int8_t W[64] = {0};
    float s[2] = {1, 1};
    kern_wpack pk;
    char err[128];
    PT_ASSERT(kern_wpack_init(&pk, 0, 32, W, s, NULL, err, sizeof err) != 0);
    PT_ASSERT(kern_wpack_init(&pk, 2, 32, W, NULL, NULL, err, sizeof err) != 0);
    PT_ASSERT(kern_wpack_init(&pk, 2, 32, W, s, s, err, sizeof err) != 0);
    PT_ASSERT(kern_wpack_init(&pk, 1, 33, W, NULL, s, err, sizeof err) !=
              0);         /* block scales need K % 32 == 0 */
    kern_wpack_free(&pk); /* safe on an empty pack */
    PT_EQ_INT(kern_wpack_init(&pk, 2, 32, W, s, NULL, err, sizeof err), 0);
    PT_EQ_INT((int)kern_wpack_bytes(&pk), 512 + 16 * 4);
    kern_wpack_free(&pk);
}

PT_TEST(f16_conversion_round_trips) {
    for (uint32_t h = 0; h < 0x10000; h++) {
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff)) continue; /* nan payloads */
        uint16_t back = kern_f32_to_f16(kern_f16_to_f32((uint16_t)h));
        PT_ASSERT_MSG(back == h, "f16 %04x -> %04x", h, back);
    }
    PT_EQ_INT(kern_f32_to_f16(1e6f), 0x7c00);
    PT_EQ_INT(kern_f32_to_f16(1.0f + 1.0f / 4096), 0x3c00); /* rounds to even */
    PT_NEAR(kern_f16_to_f32(kern_f32_to_f16(0.1f)), 0.1f, 1e-4);
}

PT_TEST(wpack_row_equals_the_row_major_lookup) {
    /* odd N and K past a block: per-channel and block-scaled packs (block
     * scales fp16-exact, as Q8_0's), several multipliers */
    int N = 37, K = 96;
    int8_t *W = malloc((size_t)N * K);
    float ws[37], bs[37 * 3], row[96];
    fill_i8(W, (size_t)N * K);
    for (int n = 0; n < N; n++) ws[n] = 0.001f * (float)(n + 1);
    for (int i = 0; i < N * 3; i++)
        bs[i] = kern_f16_to_f32(kern_f32_to_f16(0.0007f * (float)(i + 3)));
    char err[128];
    for (int kind = 0; kind < 2; kind++) {
        kern_wpack pk;
        PT_EQ_INT(
            kern_wpack_init(&pk, N, K, W, kind ? NULL : ws, kind ? bs : NULL, err, sizeof err), 0);
        for (int n = 0; n < N; n++) {
            float mul = n % 2 ? 25.298f : 1.0f;
            kern_wpack_row_f32(&pk, n, mul, row);
            for (int k = 0; k < K; k++) {
                float q = (float)W[(size_t)n * K + k];
                float want = kind ? q * bs[n * 3 + k / 32] * mul : q * (ws[n] * mul);
                PT_ASSERT_MSG(row[k] == want, "kind %d row %d col %d: %g vs %g", kind, n, k, row[k],
                              want);
            }
        }
        kern_wpack_free(&pk);
    }
    free(W);
}

PT_TEST(amax_keys_order_like_kern_argmax) {
    float v[] = {1.0f, NAN, -INFINITY, 3.0f, 3.0f, -0.0f, 0.0f, INFINITY, -5.0f};
    int n = (int)(sizeof v / sizeof *v);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            float a = v[i] != v[i] ? -INFINITY : v[i], b = v[j] != v[j] ? -INFINITY : v[j];
            uint64_t ka = kern_amax_key(v[i], i), kb = kern_amax_key(v[j], j);
            int want = a > b || (a == b && i < j); /* a's key wins */
            if (i != j) PT_EQ_INT(ka > kb, want);
        }
    PT_EQ_INT(kern_amax_key_index(kern_amax_key(2.0f, 12345)), 12345);
    PT_EQ_INT(kern_amax_key_index(0), 0);
    PT_ASSERT(kern_amax_key(-INFINITY, 7) > 0);
    PT_ASSERT(kern_amax_key(NAN, 0) == kern_amax_key(-INFINITY, 0));
}

PT_TEST(q8_run_rows_argmax_and_sums_equal_the_dense_call) {
    kern_pool *p2;
    PT_ASSERT(kern_pool_create(2, &p2) == 0);
    for (int it = 0; it < 40; it++) {
        int M = 1 + (int)(pt_rand() % 70), N = 1 + (int)(pt_rand() % 300);
        int K = 32 * (1 + (int)(pt_rand() % 12)), nb = K / 32, bs = it % 2;
        int8_t *W = malloc((size_t)N * K);
        float *sc = malloc(sizeof(float) * (size_t)N * nb);
        fill_i8(W, (size_t)N * K);
        for (int n = 1; n < N; n++) /* duplicated rows: equal outputs, ties */
            if (pt_rand() % 4 == 0) memcpy(W + (size_t)n * K, W + (size_t)(n - 1) * K, (size_t)K);
        for (int i = 0; i < N * nb; i++) sc[i] = kern_f16_to_f32(kern_f32_to_f16(0.002f));
        kern_wpack pk;
        char err[128];
        PT_EQ_INT(kern_wpack_init(&pk, N, K, W, bs ? NULL : sc, bs ? sc : NULL, err, sizeof err),
                  0);
        /* activations from the quantiser, with their block sums */
        float *x = malloc(sizeof(float) * (size_t)M * K);
        for (int i = 0; i < M * K; i++) x[i] = (float)((int)(pt_rand() % 2001) - 1000) * 0.01f;
        int8_t *A = malloc((size_t)M * K);
        float *as = malloc(sizeof(float) * (size_t)M * nb);
        int32_t *sum = malloc(sizeof(int32_t) * (size_t)M * nb);
        kern_quantize_blocks_sum(p2, kern_isa_best(), M, K, x, K, A, K, as, sum, nb);
        for (int m = 0; m < M; m++)
            for (int b = 0; b < nb; b++) {
                int32_t t = 0;
                for (int k = 0; k < 32; k++) t += A[(size_t)m * K + 32 * b + k];
                PT_EQ_INT(sum[(size_t)m * nb + b], t);
            }
        float *C0 = malloc(sizeof(float) * (size_t)M * N),
              *R = malloc(sizeof(float) * (size_t)M * N);
        float **rows = malloc(sizeof(float *) * (size_t)M);
        uint64_t *keys = malloc(sizeof(uint64_t) * (size_t)M);
        kern_gemm_q8(NULL, KERN_ISA_SCALAR, M, A, K, as, nb, &pk, C0, N);
        for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
            kern_gemm_act a = {.M = M, .A = A, .lda = K, .a_scale = as, .lds = nb, .a_sum = sum};
            for (int m = 0; m < M; m++) rows[m] = m % 3 == 1 ? NULL : R + (size_t)m * N;
            for (size_t i = 0; i < (size_t)M * N; i++) R[i] = -1234.5f;
            memset(keys, 0, sizeof(uint64_t) * (size_t)M);
            kern_gemm_out o = {.rows = rows, .amax = keys};
            PT_EQ_INT(kern_gemm_q8_run(isa % 2 ? p2 : NULL, (kern_isa)isa, &a, &pk, &o), 0);
            for (int m = 0; m < M; m++) {
                if (rows[m]) PT_EQ_MEM(R + (size_t)m * N, C0 + (size_t)m * N, sizeof(float) * N);
                else PT_ASSERT(R[(size_t)m * N] == -1234.5f); /* not written */
                PT_EQ_INT(kern_amax_key_index(keys[m]), kern_argmax_ref(C0 + (size_t)m * N, N));
            }
            /* dense through the general form, a wider ldc */
            float *D = malloc(sizeof(float) * (size_t)M * (N + 5));
            kern_gemm_out od = {.C = D, .ldc = N + 5};
            PT_EQ_INT(kern_gemm_q8_run(p2, (kern_isa)isa, &a, &pk, &od), 0);
            for (int m = 0; m < M; m++)
                PT_EQ_MEM(D + (size_t)m * (N + 5), C0 + (size_t)m * N, sizeof(float) * N);
            free(D);
        }
        /* the argmax of two column ranges merged: a weight split in two runs */
        if (N > 20) {
            int N1 = 16 * (1 + (int)(pt_rand() % ((N - 1) / 16)));
            kern_wpack w1, w2;
            float *s1 = bs ? sc : sc, *s2 = bs ? sc + (size_t)N1 * nb : sc + N1;
            PT_EQ_INT(
                kern_wpack_init(&w1, N1, K, W, bs ? NULL : s1, bs ? s1 : NULL, err, sizeof err), 0);
            PT_EQ_INT(kern_wpack_init(&w2, N - N1, K, W + (size_t)N1 * K, bs ? NULL : s2,
                                      bs ? s2 : NULL, err, sizeof err),
                      0);
            memset(keys, 0, sizeof(uint64_t) * (size_t)M);
            kern_gemm_act a = {.M = M, .A = A, .lda = K, .a_scale = as, .lds = nb, .a_sum = sum};
            kern_gemm_out o = {.amax = keys};
            PT_EQ_INT(kern_gemm_q8_run(p2, kern_isa_best(), &a, &w2,
                                       &(kern_gemm_out){.amax = keys, .col0 = N1}),
                      0);
            PT_EQ_INT(kern_gemm_q8_run(p2, kern_isa_best(), &a, &w1, &o), 0);
            for (int m = 0; m < M; m++)
                PT_EQ_INT(kern_amax_key_index(keys[m]), kern_argmax_ref(C0 + (size_t)m * N, N));
            kern_wpack_free(&w1);
            kern_wpack_free(&w2);
        }
        kern_gemm_out none = {0};
        kern_gemm_act a = {.M = M, .A = A, .lda = K, .a_scale = as, .lds = nb};
        PT_EQ_INT(kern_gemm_q8_run(NULL, KERN_ISA_SCALAR, &a, &pk, &none), KERN_EINVAL);
        kern_wpack_free(&pk);
        free(W), free(sc), free(x), free(A), free(as), free(sum), free(C0), free(R), free(rows),
            free(keys);
    }
    kern_pool_destroy(p2);
}
