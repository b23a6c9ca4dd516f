/*
 * test_kern_w4.c -- the W4A8 GEMM (kern_gemm_w4, kern_w4.h) on every ISA
 * path this machine runs (scalar .. kern_isa_best(); PARLEY_ISA may lower
 * it), through the driver on 1, 2 and 3 threads:
 *   - LUT kind (Q4_0 and IQ4_NL code books): bit-identical with
 *     kern_gemm_q8 on the kern_wpack of the same int8 codes and block
 *     scales, for M = 1..130 (decode tiles, prefill tiles, a partial last
 *     tile), N not a multiple of 16 and K = 32 .. 544, and +-127 extremes;
 *   - AFFINE kind (Q4_K): every path bit-identical with the scalar one, a
 *     row alone gives the bits it gives in a batch, the scalar within float
 *     rounding of kern_gemm_w4_affine_ref, and the result within a small
 *     tolerance of the float GEMM of the dequantised weights;
 *   - kern_w4pack_row_f32: LUT equal to kern_wpack_row_f32 of the int8
 *     pack; AFFINE equal to ggml's Q4_K dequantisation (the engine's
 *     eng_gguf_quant_to_f32 of Q4_K blocks built from the same codes);
 *   - bad inputs refused with a message and an empty pack; pack sizes.
 * The tile kernels alone (with and without the unpack buffer, and the
 * AVX-512 kernel under SIMDe) are checked in test_kern_isa_w4.c.
 */
#define PTEST_MAIN
#include "ptest.h"

#include <math.h>

#include "eng_gguf.h"
#include "kern_gemm.h"
#include "kern_gemm_int.h"
#include "kern_pool.h"
#include "kern_w4.h"

static float frand01(void) { return (float)((double)(pt_rand() >> 11) / 9007199254740992.0); }
static float f16_exact(float x) { return kern_f16_to_f32(kern_f32_to_f16(x)); }

/* Activations [M][lda], junk past K (no kernel may read it), scales [M][lds]. */
typedef struct acts {
    int M, K, lda, lds; /* shape and strides */
    int8_t *A;          /* int8 in [-127, 127] (only +-127 when extreme) */
    float *as;          /* block scales */
} acts;

static void acts_make(acts *x, int M, int K, int extreme) {
    x->M = M, x->K = K, x->lda = K + (int)(pt_rand() % 3) * 16,
    x->lds = K / 32 + (int)(pt_rand() % 2);
    x->A = malloc((size_t)M * x->lda);
    x->as = malloc(sizeof(float) * (size_t)M * x->lds);
    for (size_t i = 0; i < (size_t)M * x->lda; i++) {
        int v = extreme ? (pt_rand() & 1 ? 127 : -127) : (int)(pt_rand() % 255) - 127;
        x->A[i] = (int8_t)((int)(i % x->lda) < K ? v : (int)(pt_rand() % 256) - 128);
    }
    for (int i = 0; i < M * x->lds; i++)
        x->as[i] = 0.001f * (1 + (int)(pt_rand() % 1000)) * (i % 5 ? 1 : 30);
}

static void acts_free(acts *x) { free(x->A), free(x->as); }

/* A copy of the activations with row stride K (the references' layout). */
static int8_t *acts_dense(const acts *x) {
    int8_t *d = malloc((size_t)x->M * x->K);
    for (int m = 0; m < x->M; m++) memcpy(d + (size_t)m * x->K, x->A + (size_t)m * x->lda, x->K);
    return d;
}

static float *acts_dense_scales(const acts *x) {
    int nb = x->K / 32;
    float *s = malloc(sizeof(float) * (size_t)x->M * nb);
    for (int m = 0; m < x->M; m++) memcpy(s + (size_t)m * nb, x->as + (size_t)m * x->lds, 4 * nb);
    return s;
}

/* LUT weights: codes W[N][K] from lut, fp16-exact block scales. */
static void lut_weights(int N, int K, const int8_t *lut, int extreme, int8_t **W, float **bs) {
    *W = malloc((size_t)N * K);
    *bs = malloc(sizeof(float) * (size_t)N * (K / 32));
    for (size_t i = 0; i < (size_t)N * K; i++)
        (*W)[i] = lut[extreme ? (pt_rand() & 1 ? 0 : 15) : pt_rand() % 16];
    for (int i = 0; i < N * (K / 32); i++) (*bs)[i] = f16_exact(0.0005f + 0.01f * frand01());
}

/* AFFINE weights: Q4_K-like codes, 6-bit scales and mins, fp16 d / dmin. */
typedef struct affw {
    uint8_t *U, *sc, *mn; /* [N][K], [N][K/32], [N][K/32] */
    float *d, *dmin;      /* [N][K/256] */
} affw;

static void affw_make(affw *a, int N, int K, int extreme) {
    a->U = malloc((size_t)N * K);
    a->sc = malloc((size_t)N * K / 32), a->mn = malloc((size_t)N * K / 32);
    a->d = malloc(sizeof(float) * N * (K / 256)), a->dmin = malloc(sizeof(float) * N * (K / 256));
    for (size_t i = 0; i < (size_t)N * K; i++) a->U[i] = extreme ? 15 : (uint8_t)(pt_rand() % 16);
    for (int i = 0; i < N * K / 32; i++) {
        a->sc[i] = extreme ? 63 : (uint8_t)(pt_rand() % 64);
        a->mn[i] = extreme ? 63 : (uint8_t)(pt_rand() % 64);
    }
    for (int i = 0; i < N * (K / 256); i++) {
        a->d[i] = f16_exact(0.0002f + 0.002f * frand01());
        a->dmin[i] = f16_exact(0.0001f + 0.001f * frand01());
    }
}

static void affw_free(affw *a) { free(a->U), free(a->sc), free(a->mn), free(a->d), free(a->dmin); }

static const int Ms[] = {1, 2, 3, 4, 5, 7, 17, 64, 65, 70, 130};
static const int Ns[] = {1, 7, 16, 17, 33, 100};

/* C [M][N + 3] with sentinels past N, which no path may write. */
static float *make_c(int M, int N) {
    float *C = malloc(sizeof(float) * (size_t)M * (N + 3));
    memset(C, 0x55, sizeof(float) * (size_t)M * (N + 3));
    return C;
}

static int sentinels_intact(const float *C, int M, int N) {
    uint32_t v;
    for (int m = 0; m < M; m++)
        for (int j = N; j < N + 3; j++) {
            memcpy(&v, C + (size_t)m * (N + 3) + j, 4);
            if (v != 0x55555555u) return 0;
        }
    return 1;
}

PT_TEST(w4_lut_bit_exact_with_q8_all_paths_all_threads) {
    static const int Ks[] = {32, 64, 96, 160, 288, 544};
    kern_pool *pools[3] = {NULL};
    PT_ASSERT(kern_pool_create(2, &pools[1]) == 0 && kern_pool_create(3, &pools[2]) == 0);
    char err[128];
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
            for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
                int M = Ms[a], N = Ns[b], K = Ks[c], ext = (a + b + c) % 7 == 3;
                const int8_t *lut = (a + c) % 2 ? kern_w4_lut_iq4_nl : kern_w4_lut_q4_0;
                int8_t *W;
                float *bs;
                lut_weights(N, K, lut, ext, &W, &bs);
                acts x;
                acts_make(&x, M, K, ext);
                kern_wpack q8;
                kern_w4pack w4;
                PT_EQ_INT(kern_wpack_init(&q8, N, K, W, NULL, bs, err, sizeof err), 0);
                PT_ASSERT_MSG(kern_w4pack_init_lut(&w4, N, K, W, bs, lut, err, sizeof err) == 0,
                              "%s", err);
                float *R = malloc(sizeof(float) * (size_t)M * (N + 3)), *C = make_c(M, N);
                kern_gemm_q8(NULL, KERN_ISA_SCALAR, M, x.A, x.lda, x.as, x.lds, &q8, R, N + 3);
                for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
                    kern_pool *p = pools[(isa + a) % 3];
                    kern_gemm_w4(p, (kern_isa)isa, M, x.A, x.lda, x.as, x.lds, &w4, C, N + 3);
                    for (int m = 0; m < M; m++)
                        PT_ASSERT_MSG(!memcmp(C + (size_t)m * (N + 3), R + (size_t)m * (N + 3),
                                              sizeof(float) * N),
                                      "%s threads %d M %d N %d K %d row %d differs from q8",
                                      kern_isa_name((kern_isa)isa), kern_pool_size(p), M, N, K, m);
                    PT_ASSERT(sentinels_intact(C, M, N));
                }
                kern_wpack_free(&q8), kern_w4pack_free(&w4);
                acts_free(&x), free(W), free(bs), free(R), free(C);
            }
    kern_pool_destroy(pools[1]), kern_pool_destroy(pools[2]);
}

/* Bound on the float rounding of an AFFINE output: eps * (nb + 4) times
 * the sum of the magnitudes of both terms of every block. */
static double affine_tol(const int8_t *a, const float *as, const affw *w, int n, int K) {
    int nb = K / 32;
    double mag = 0;
    for (int b = 0; b < nb; b++) {
        double s = 0, sa = 0;
        for (int k = 32 * b; k < 32 * b + 32; k++) {
            s += fabs((double)a[k]) * w->U[(size_t)n * K + k];
            sa += fabs((double)a[k]);
        }
        double ws = (double)w->d[(size_t)n * (K / 256) + b / 8] * w->sc[(size_t)n * nb + b];
        double wm = (double)w->dmin[(size_t)n * (K / 256) + b / 8] * w->mn[(size_t)n * nb + b];
        mag += (s * ws + sa * wm) * as[b];
    }
    return 1.2e-7 * (nb + 4) * mag + 1e-30;
}

PT_TEST(w4_affine_paths_identical_and_close_to_reference) {
    static const int Ks[] = {256, 512, 768};
    kern_pool *pools[3] = {NULL};
    PT_ASSERT(kern_pool_create(2, &pools[1]) == 0 && kern_pool_create(3, &pools[2]) == 0);
    char err[128];
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
            for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
                int M = Ms[a], N = Ns[b], K = Ks[c], nb = K / 32, ext = (a + b + c) % 7 == 3;
                affw aw;
                affw_make(&aw, N, K, ext);
                acts x;
                acts_make(&x, M, K, ext);
                kern_w4pack w4;
                PT_ASSERT_MSG(kern_w4pack_init_affine(&w4, N, K, aw.U, aw.sc, aw.mn, aw.d, aw.dmin,
                                                      err, sizeof err) == 0,
                              "%s", err);
                int8_t *Ad = acts_dense(&x);
                float *asd = acts_dense_scales(&x);
                float *R = malloc(sizeof(float) * (size_t)M * N), *C0 = make_c(M, N);
                float *C = make_c(M, N), *C1 = malloc(sizeof(float) * N);
                kern_gemm_w4_affine_ref(M, N, K, Ad, asd, aw.U, aw.sc, aw.mn, aw.d, aw.dmin, R);
                kern_gemm_w4(NULL, KERN_ISA_SCALAR, M, x.A, x.lda, x.as, x.lds, &w4, C0, N + 3);
                for (int m = 0; m < M; m++)
                    for (int n = 0; n < N; n++)
                        PT_NEAR(C0[(size_t)m * (N + 3) + n], R[(size_t)m * N + n],
                                affine_tol(Ad + (size_t)m * K, asd + (size_t)m * nb, &aw, n, K));
                for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
                    kern_pool *p = pools[(isa + a) % 3];
                    kern_gemm_w4(p, (kern_isa)isa, M, x.A, x.lda, x.as, x.lds, &w4, C, N + 3);
                    PT_ASSERT_MSG(!memcmp(C, C0, sizeof(float) * (size_t)M * (N + 3)),
                                  "%s threads %d M %d N %d K %d differs from scalar",
                                  kern_isa_name((kern_isa)isa), kern_pool_size(p), M, N, K);
                    /* the last row alone, on the calling thread, gives the same bits */
                    kern_gemm_w4(NULL, (kern_isa)isa, 1, x.A + (size_t)(M - 1) * x.lda, x.lda,
                                 x.as + (size_t)(M - 1) * x.lds, x.lds, &w4, C1, N);
                    PT_EQ_MEM(C1, C0 + (size_t)(M - 1) * (N + 3), sizeof(float) * N);
                }
                kern_w4pack_free(&w4), affw_free(&aw), acts_free(&x);
                free(Ad), free(asd), free(R), free(C0), free(C), free(C1);
            }
    kern_pool_destroy(pools[1]), kern_pool_destroy(pools[2]);
}

PT_TEST(w4_affine_matches_dequantised_float_gemm) {
    /* C vs sum_k (a * as) * W (double), W = kern_w4pack_row_f32 (ggml's
     * dequantised Q4_K values): the regrouped fold loses little */
    int M = 9, N = 40, K = 1024, nb = K / 32;
    affw aw;
    affw_make(&aw, N, K, 0);
    acts x;
    acts_make(&x, M, K, 0);
    kern_w4pack w4;
    char err[128];
    PT_EQ_INT(
        kern_w4pack_init_affine(&w4, N, K, aw.U, aw.sc, aw.mn, aw.d, aw.dmin, err, sizeof err), 0);
    float *Wf = malloc(sizeof(float) * (size_t)N * K), *C = malloc(sizeof(float) * M * N);
    for (int n = 0; n < N; n++) kern_w4pack_row_f32(&w4, n, 1.0f, Wf + (size_t)n * K);
    for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
        kern_gemm_w4(NULL, (kern_isa)isa, M, x.A, x.lda, x.as, x.lds, &w4, C, N);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < N; n++) {
                double want = 0, mag = 0;
                for (int k = 0; k < K; k++) {
                    double xv =
                        (double)x.A[(size_t)m * x.lda + k] * x.as[(size_t)m * x.lds + k / 32];
                    want += xv * Wf[(size_t)n * K + k];
                    mag += fabs(xv * Wf[(size_t)n * K + k]);
                }
                PT_NEAR(C[m * N + n], want, 1e-6 * nb * mag + 1e-6 * fabs(want));
            }
    }
    kern_w4pack_free(&w4), affw_free(&aw), acts_free(&x), free(Wf), free(C);
}

PT_TEST(w4_lut_row_equals_int8_pack_row) {
    int N = 37, K = 96;
    char err[128];
    float *r4 = malloc(sizeof(float) * K), *r8 = malloc(sizeof(float) * K);
    for (int l = 0; l < 2; l++) {
        const int8_t *lut = l ? kern_w4_lut_iq4_nl : kern_w4_lut_q4_0;
        int8_t *W;
        float *bs;
        lut_weights(N, K, lut, 0, &W, &bs);
        kern_wpack q8;
        kern_w4pack w4;
        PT_EQ_INT(kern_wpack_init(&q8, N, K, W, NULL, bs, err, sizeof err), 0);
        PT_EQ_INT(kern_w4pack_init_lut(&w4, N, K, W, bs, lut, err, sizeof err), 0);
        for (int n = 0; n < N; n++) {
            float mul = n % 2 ? 25.298f : 1.0f;
            kern_w4pack_row_f32(&w4, n, mul, r4);
            kern_wpack_row_f32(&q8, n, mul, r8);
            PT_EQ_MEM(r4, r8, sizeof(float) * K);
        }
        kern_wpack_free(&q8), kern_w4pack_free(&w4), free(W), free(bs);
    }
    free(r4), free(r8);
}

/* ggml's Q4_K block (144 bytes) holding super-block s of row n. */
static void q4k_block(const affw *a, int n, int K, int s, uint8_t *p) {
    int nb = K / 32;
    uint16_t d = kern_f32_to_f16(a->d[(size_t)n * (K / 256) + s]);
    uint16_t dm = kern_f32_to_f16(a->dmin[(size_t)n * (K / 256) + s]);
    p[0] = (uint8_t)d, p[1] = (uint8_t)(d >> 8), p[2] = (uint8_t)dm, p[3] = (uint8_t)(dm >> 8);
    uint8_t *q = p + 4;
    memset(q, 0, 12);
    for (int j = 0; j < 8; j++) { /* ggml get_scale_min_k4, inverted */
        int sc = a->sc[(size_t)n * nb + 8 * s + j], mn = a->mn[(size_t)n * nb + 8 * s + j];
        if (j < 4) {
            q[j] |= (uint8_t)sc, q[j + 4] |= (uint8_t)mn;
        } else {
            q[j + 4] = (uint8_t)((sc & 15) | (mn & 15) << 4);
            q[j - 4] |= (uint8_t)((sc >> 4) << 6), q[j] |= (uint8_t)((mn >> 4) << 6);
        }
    }
    for (int i = 0; i < 256; i++) { /* qs[32 * (i / 64) + i % 32], nibble (i / 32) % 2 */
        int u = a->U[(size_t)n * K + 256 * s + i];
        p[16 + 32 * (i / 64) + i % 32] |= (uint8_t)(u << (4 * ((i / 32) % 2)));
    }
}

PT_TEST(w4_affine_row_equals_ggml_q4_k_dequantisation) {
    int N = 21, K = 512;
    affw aw;
    affw_make(&aw, N, K, 0);
    kern_w4pack w4;
    char err[128];
    PT_EQ_INT(
        kern_w4pack_init_affine(&w4, N, K, aw.U, aw.sc, aw.mn, aw.d, aw.dmin, err, sizeof err), 0);
    uint8_t blk[144];
    float want[256], row[512];
    for (int n = 0; n < N; n++) {
        kern_w4pack_row_f32(&w4, n, 1.0f, row);
        for (int s = 0; s < K / 256; s++) {
            memset(blk, 0, sizeof blk);
            q4k_block(&aw, n, K, s, blk);
            PT_EQ_INT(eng_gguf_quant_to_f32(ENG_GGML_TYPE_Q4_K, blk, 256, want), 0);
            PT_ASSERT_MSG(!memcmp(want, row + 256 * s, sizeof want), "row %d super %d", n, s);
        }
        float mul = 3.7f;
        kern_w4pack_row_f32(&w4, n, mul, row);
        for (int k = 0; k < K; k++) {
            int b = k / 32;
            float ws = aw.d[n * 2 + b / 8] * (float)aw.sc[n * 16 + b];
            float wm = aw.dmin[n * 2 + b / 8] * (float)aw.mn[n * 16 + b];
            float t = ws * (float)aw.U[(size_t)n * K + k];
            float y = t - wm;
            PT_ASSERT(row[k] == y * mul);
        }
    }
    kern_w4pack_free(&w4), affw_free(&aw);
}

PT_TEST(w4_rejects_bad_input_with_a_message) {
    int8_t W[64 * 2] = {0};
    uint8_t U[256 * 2] = {0}, sc[16] = {0};
    float bs[4] = {1, 1, 1, 1}, d[2] = {1, 1}, bad[2] = {1, NAN};
    int8_t lut[16];
    memcpy(lut, kern_w4_lut_q4_0, 16);
    kern_w4pack w;
    char err[128];
#define REFUSED(call)                                        \
    do {                                                     \
        err[0] = 0;                                          \
        PT_EQ_INT(call, KERN_EINVAL);                        \
        PT_ASSERT_MSG(err[0] != 0, "no message: %s", #call); \
        PT_ASSERT(w.nib == NULL && w.kind == KERN_W4_NONE);  \
        kern_w4pack_free(&w); /* safe on an empty pack */    \
    } while (0)
    REFUSED(kern_w4pack_init_lut(&w, 0, 32, W, bs, lut, err, sizeof err));
    REFUSED(kern_w4pack_init_lut(&w, 2, 33, W, bs, lut, err, sizeof err));
    REFUSED(kern_w4pack_init_lut(&w, 2, 0, W, bs, lut, err, sizeof err));
    REFUSED(kern_w4pack_init_lut(&w, 2, 32, W, NULL, lut, err, sizeof err));
    REFUSED(kern_w4pack_init_lut(&w, 1, 32, W, bad + 1, lut, err, sizeof err));
    W[40] = 9; /* not in -8..7 */
    REFUSED(kern_w4pack_init_lut(&w, 2, 32, W, bs, lut, err, sizeof err));
    PT_ASSERT(strstr(err, "[1][8]") != NULL);
    W[40] = 0;
    lut[3] = -128;
    REFUSED(kern_w4pack_init_lut(&w, 2, 32, W, bs, lut, err, sizeof err));
    lut[3] = -5;
    REFUSED(kern_w4pack_init_affine(&w, 1, 128, U, sc, sc, d, d, err, sizeof err));
    REFUSED(kern_w4pack_init_affine(&w, 0, 256, U, sc, sc, d, d, err, sizeof err));
    REFUSED(kern_w4pack_init_affine(&w, 1, 256, U, sc, NULL, d, d, err, sizeof err));
    REFUSED(kern_w4pack_init_affine(&w, 1, 256, U, sc, sc, d, bad + 1, err, sizeof err));
    U[300] = 16;
    REFUSED(kern_w4pack_init_affine(&w, 2, 256, U, sc, sc, d, d, err, sizeof err));
    U[300] = 15;
#undef REFUSED
    /* sizes: 4.5 and 4.625 bits per weight (for whole groups) */
    PT_EQ_INT(kern_w4pack_init_lut(&w, 2, 64, W, bs, lut, err, sizeof err), 0);
    PT_EQ_INT((int)kern_w4pack_bytes(&w), 2 * (256 + 32));
    kern_w4pack_free(&w);
    uint8_t U16[16 * 256] = {0}, sc16[16 * 8] = {0};
    float d16[16] = {0};
    PT_EQ_INT(kern_w4pack_init_affine(&w, 16, 256, U16, sc16, sc16, d16, d16, err, sizeof err), 0);
    PT_EQ_INT((int)kern_w4pack_bytes(&w), 2368);
    PT_EQ_INT((int)(kern_w4pack_bytes(&w) * 8 * 1000 / (16 * 256)), 4625);
    kern_w4pack_free(&w);
}
