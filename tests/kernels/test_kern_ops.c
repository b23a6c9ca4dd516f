/*
 * test_kern_ops.c -- the element-wise kernels (kern_ops.h) against their
 * scalar references on every ISA path the machine has: quantisation (per
 * row and per 32-value block) and the residual add bit for bit, RMSNorm / RoPE / GLU / softmax within tight
 * tolerances, the forced-scalar path bit for bit with the references, and
 * the invariance the engine needs: a row computed alone on the caller gives
 * the same bits as inside a batch split over a 3-thread pool; the block
 * sums of kern_quantize_blocks_sum and kern_scan_at_least (the sampler's
 * top-k skip) exact on every path.
 */
#define PTEST_MAIN
#include "ptest.h"

#include "kern_ops.h"

static const int Ns[] = {1, 7, 8, 9, 31, 64, 100, 2048 + 3};
#define N_NS ((int)(sizeof Ns / sizeof *Ns))
static const int Ms[] = {1, 2, 3, 5, 8, 17, 33, 64, 70};
#define N_MS ((int)(sizeof Ms / sizeof *Ms))

static float frand(float a) {
    return (float)((double)(pt_rand() >> 11) / 9007199254740992.0 * 2 - 1) * a;
}

/* Random rows with a spread of magnitudes per row (some rows tiny, some large). */
static float *rand_rows(int M, int ld, float a) {
    float *x = malloc(sizeof(float) * (size_t)M * ld + 1);
    for (int m = 0; m < M; m++) {
        float s = a * (float)(1 + m % 5) / 3;
        for (int i = 0; i < ld; i++) x[(size_t)m * ld + i] = frand(s);
    }
    return x;
}

static float *dup(const float *x, size_t n) {
    float *y = malloc(sizeof(float) * n + 1);
    memcpy(y, x, sizeof(float) * n);
    return y;
}

static kern_pool *pool3(void) {
    kern_pool *p = NULL;
    PT_ASSERT(kern_pool_create(3, &p) == 0);
    return p;
}

/* |a - r| <= rel * |r| + abs for n floats. */
static void near_all(const float *a, const float *r, int n, double rel, double abs_) {
    for (int i = 0; i < n; i++)
        if (!(fabs((double)a[i] - r[i]) <= rel * fabs((double)r[i]) + abs_))
            PT_FAIL("element %d: %.9g vs reference %.9g", i, (double)a[i], (double)r[i]);
}

PT_TEST(quantize_bit_exact_on_every_path) {
    kern_pool *p = pool3();
    for (int a = 0; a < N_NS; a++)
        for (int b = 0; b < N_MS; b++) {
            int K = Ns[a], M = Ms[b], ldx = K + 3, ldq = K + 5;
            float *x = rand_rows(M, ldx, 10);
            for (int k = 0; k < K; k++) x[k] = 0; /* row 0: all zero */
            int8_t *qr = malloc((size_t)M * ldq), *q = malloc((size_t)M * ldq);
            float *sr = malloc(sizeof(float) * M), *s = malloc(sizeof(float) * M);
            memset(qr, 0x55, (size_t)M * ldq);
            kern_quantize_rows_ref(M, K, x, ldx, qr, ldq, sr);
            PT_EQ_INT(sr[0], 0);
            for (int m = 0; m < M; m++)
                for (int k = K; k < ldq; k++) PT_EQ_INT(qr[(size_t)m * ldq + k], 0);
            for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
                memset(q, 0x55, (size_t)M * ldq);
                kern_quantize_rows(p, (kern_isa)isa, M, K, x, ldx, q, ldq, s);
                PT_EQ_MEM(q, qr, (size_t)M * ldq);
                PT_EQ_MEM(s, sr, sizeof(float) * M);
            }
            free(x), free(qr), free(q), free(sr), free(s);
        }
    kern_pool_destroy(p);
}

PT_TEST(quantize_rounds_half_to_even_and_handles_edges) {
    /* amax 127: inv = 1 exactly, so x itself is rounded */
    float x[3][40];
    for (int i = 0; i < 40; i++) x[0][i] = (float)(i % 8) - 3.5f; /* .5 everywhere */
    x[0][39] = 127;
    for (int i = 0; i < 40; i++) x[1][i] = i == 5 ? 1e-38f : 0; /* 127/amax overflows */
    for (int i = 0; i < 40; i++) x[2][i] = i == 3 ? NAN : (float)i;
    for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
        int8_t q[3][40];
        float s[3];
        kern_quantize_rows(NULL, (kern_isa)isa, 3, 40, &x[0][0], 40, &q[0][0], 40, s);
        for (int i = 0; i < 39; i++) PT_EQ_INT(q[0][i], nearbyint((double)x[0][i]));
        PT_EQ_INT(q[0][0], -4);
        PT_EQ_INT(q[0][1], -2);
        PT_EQ_INT(q[0][4], 0);
        PT_EQ_INT(q[0][5], 2);
        PT_EQ_INT(q[0][39], 127);
        PT_NEAR(s[0], 1.0, 0);
        PT_EQ_INT(s[1], 0);
        for (int i = 0; i < 40; i++) PT_EQ_INT(q[1][i], 0);
        PT_NEAR(s[2], 39.0 / 127, 1e-7);
        PT_EQ_INT(q[2][3], -127);
        PT_EQ_INT(q[2][39], 127);
        /* K = 0: the padding is still zeroed, scale 0 */
        memset(q, 0x55, sizeof q);
        kern_quantize_rows(NULL, (kern_isa)isa, 2, 0, &x[0][0], 40, &q[0][0], 40, s);
        for (int i = 0; i < 40; i++) PT_EQ_INT(q[0][i] | q[1][i], 0);
        PT_EQ_INT(s[0], 0);
        PT_EQ_INT(s[1], 0);
    }
}

PT_TEST(quantize_blocks_bit_exact_on_every_path) {
    kern_pool *p = pool3();
    for (int a = 0; a < N_NS; a++)
        for (int b = 0; b < N_MS; b++) {
            int K = Ns[a], M = Ms[b], ldx = K + 3, ldq = (K + 31) / 32 * 32 + 8;
            int nb = (K + 31) / 32, lds = nb + 2;
            float *x = rand_rows(M, ldx, 10);
            for (int k = 0; k < K && k < 32; k++) x[k] = 0; /* row 0: block 0 all zero */
            for (int m = 1; m < M; m++)
                x[(size_t)m * ldx + (m * 7) % K] = 300.0f * m; /* outliers */
            int8_t *qr = malloc((size_t)M * ldq), *q = malloc((size_t)M * ldq);
            float *sr = malloc(sizeof(float) * M * lds), *s = malloc(sizeof(float) * M * lds);
            memset(qr, 0x55, (size_t)M * ldq);
            kern_quantize_blocks_ref(M, K, x, ldx, qr, ldq, sr, lds);
            PT_EQ_INT(sr[0], 0);
            /* the definition: every block quantised as a row of its own */
            for (int m = 0; m < M; m++) {
                for (int k = K; k < ldq; k++) PT_EQ_INT(qr[(size_t)m * ldq + k], 0);
                for (int bb = 0; bb < nb; bb++) {
                    int len = K - 32 * bb < 32 ? K - 32 * bb : 32;
                    int8_t qb[32];
                    float sb;
                    kern_quantize_rows_ref(1, len, x + (size_t)m * ldx + 32 * bb, len, qb, len,
                                           &sb);
                    PT_EQ_MEM(qb, qr + (size_t)m * ldq + 32 * bb, (size_t)len);
                    PT_EQ_MEM(&sb, sr + (size_t)m * lds + bb, sizeof sb);
                }
            }
            for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
                memset(q, 0x55, (size_t)M * ldq);
                kern_quantize_blocks(p, (kern_isa)isa, M, K, x, ldx, q, ldq, s, lds);
                PT_EQ_MEM(q, qr, (size_t)M * ldq);
                for (int m = 0; m < M; m++)
                    PT_EQ_MEM(s + (size_t)m * lds, sr + (size_t)m * lds, sizeof(float) * nb);
            }
            free(x), free(qr), free(q), free(sr), free(s);
        }
    kern_pool_destroy(p);
}

PT_TEST(quantize_blocks_edges) {
    /* block 0 exact halves, block 1 tiny (127/amax overflows), block 2 a NaN,
     * block 3 the 8-value tail */
    float x[104];
    for (int i = 0; i < 32; i++) x[i] = (float)(i % 8) - 3.5f;
    x[31] = 127;
    for (int i = 32; i < 64; i++) x[i] = i == 40 ? 1e-38f : 0;
    for (int i = 64; i < 96; i++) x[i] = i == 67 ? NAN : (float)(i - 64);
    for (int i = 96; i < 104; i++) x[i] = -(float)(i - 95);
    for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
        int8_t q[128];
        float s[4];
        memset(q, 0x55, sizeof q);
        kern_quantize_blocks(NULL, (kern_isa)isa, 1, 104, x, 104, q, 128, s, 4);
        for (int i = 0; i < 31; i++) PT_EQ_INT(q[i], nearbyint((double)x[i]));
        PT_EQ_INT(q[31], 127);
        PT_NEAR(s[0], 1.0, 0);
        PT_EQ_INT(s[1], 0);
        for (int i = 32; i < 64; i++) PT_EQ_INT(q[i], 0);
        PT_NEAR(s[2], 31.0 / 127, 1e-7);
        PT_EQ_INT(q[67], -127);
        PT_EQ_INT(q[95], 127);
        PT_NEAR(s[3], 8.0 / 127, 1e-7);
        PT_EQ_INT(q[96], -16); /* -1 * 127 / 8 = -15.875 */
        PT_EQ_INT(q[103], -127);
        for (int i = 104; i < 128; i++) PT_EQ_INT(q[i], 0);
        /* K = 0: only the padding, no scales */
        memset(q, 0x55, sizeof q);
        kern_quantize_blocks(NULL, (kern_isa)isa, 1, 0, x, 104, q, 64, s, 4);
        for (int i = 0; i < 64; i++) PT_EQ_INT(q[i], 0);
    }
}

PT_TEST(rmsnorm_close_to_reference_in_place_too) {
    kern_pool *p = pool3();
    for (int a = 0; a < N_NS; a++)
        for (int b = 0; b < N_MS; b++) {
            int n = Ns[a], M = Ms[b], ld = n + 2;
            float *x = rand_rows(M, ld, 4), *w = rand_rows(1, n, 2);
            float *r = malloc(sizeof(float) * (size_t)M * ld),
                  *y = malloc(sizeof(float) * (size_t)M * ld);
            kern_rmsnorm_ref(M, n, x, ld, w, 1e-6f, r, ld);
            for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
                kern_rmsnorm(p, (kern_isa)isa, M, n, x, ld, w, 1e-6f, y, ld);
                for (int m = 0; m < M; m++)
                    if (isa == KERN_ISA_SCALAR)
                        PT_EQ_MEM(y + (size_t)m * ld, r + (size_t)m * ld, sizeof(float) * n);
                    else near_all(y + (size_t)m * ld, r + (size_t)m * ld, n, 1e-6, 0);
                float *xi = dup(x, (size_t)M * ld);
                kern_rmsnorm(p, (kern_isa)isa, M, n, xi, ld, w, 1e-6f, xi, ld);
                for (int m = 0; m < M; m++)
                    PT_EQ_MEM(xi + (size_t)m * ld, y + (size_t)m * ld, sizeof(float) * n);
                free(xi);
            }
            free(x), free(w), free(r), free(y);
        }
    kern_pool_destroy(p);
}

PT_TEST(rope_matches_reference_both_layouts) {
    kern_pool *p = pool3();
    static const int hds[] = {2, 6, 8, 16, 18, 64, 72, 128, 256};
    for (int type = 0; type < 2; type++)
        for (size_t a = 0; a < sizeof hds / sizeof *hds; a++)
            for (int b = 0; b < N_MS; b++) {
                int hd = hds[a], M = Ms[b], nh = 1 + (int)(a % 4), ld = nh * hd + 3;
                float *x = rand_rows(M, ld, 3);
                int32_t *pos = malloc(sizeof(int32_t) * M);
                for (int t = 0; t < M; t++) pos[t] = t < 3 ? t : (int32_t)(pt_rand() % 200000);
                float *r = dup(x, (size_t)M * ld);
                kern_rope_ref(M, nh, hd, r, ld, pos, 10000.0f, (kern_rope_type)type);
                for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
                    float *y = dup(x, (size_t)M * ld);
                    kern_rope(p, (kern_isa)isa, M, nh, hd, y, ld, pos, 10000.0f,
                              (kern_rope_type)type);
                    if (isa == KERN_ISA_SCALAR) PT_EQ_MEM(y, r, sizeof(float) * (size_t)M * ld);
                    else near_all(y, r, M * ld, 1e-6, 1e-6);
                    for (int t = 0; t < M; t++) /* the stride's gap untouched */
                        PT_EQ_MEM(y + (size_t)t * ld + nh * hd, x + (size_t)t * ld + nh * hd,
                                  3 * sizeof(float));
                    free(y);
                }
                free(x), free(pos), free(r);
            }
    kern_pool_destroy(p);
}

/* kern_rope_freq with a scaled table (linear factor 4 and Llama 3 style
 * per-pair divisors) against the same rotation written out here; with the
 * default table it is kern_rope bit for bit. */
PT_TEST(rope_freq_table) {
    kern_pool *p = pool3();
    for (int type = 0; type < 2; type++) {
        int hd = 16, nh = 3, M = 37, ld = nh * hd + 1, half = hd / 2;
        float inv[8], def[8];
        for (int i = 0; i < half; i++) {
            def[i] = (float)(1.0 / pow(100.0, (double)(2 * i) / hd));
            inv[i] = def[i] / (i < 2 ? 1.0f : i < 4 ? 3.3f : 8.0f) * 0.25f;
        }
        float *x = rand_rows(M, ld, 3);
        int32_t *pos = malloc(sizeof(int32_t) * M);
        for (int t = 0; t < M; t++) pos[t] = t * 7;
        float *r = dup(x, (size_t)M * ld);
        for (int t = 0; t < M; t++)
            for (int i = 0; i < half; i++) {
                float ang = (float)pos[t] * inv[i], c = cosf(ang), sn = sinf(ang);
                for (int h = 0; h < nh; h++) {
                    float *v = r + (size_t)t * ld + (size_t)h * hd;
                    int a = type ? i : 2 * i, b = type ? i + half : 2 * i + 1;
                    float x0 = v[a], x1 = v[b];
                    v[a] = x0 * c - x1 * sn;
                    v[b] = x0 * sn + x1 * c;
                }
            }
        for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
            float *y = dup(x, (size_t)M * ld), *z = dup(x, (size_t)M * ld),
                  *u = dup(x, (size_t)M * ld);
            kern_rope_freq(p, (kern_isa)isa, M, nh, hd, y, ld, pos, inv, (kern_rope_type)type);
            if (isa == KERN_ISA_SCALAR) PT_EQ_MEM(y, r, sizeof(float) * (size_t)M * ld);
            else near_all(y, r, M * ld, 1e-6, 1e-6);
            kern_rope_freq(p, (kern_isa)isa, M, nh, hd, z, ld, pos, def, (kern_rope_type)type);
            kern_rope(p, (kern_isa)isa, M, nh, hd, u, ld, pos, 100.0f, (kern_rope_type)type);
            PT_EQ_MEM(z, u, sizeof(float) * (size_t)M * ld);
            free(y), free(z), free(u);
        }
        free(x), free(pos), free(r);
    }
    kern_pool_destroy(p);
}

PT_TEST(rope_position_zero_is_identity) {
    float x[2 * 64], y[2 * 64];
    int32_t pos = 0;
    for (int i = 0; i < 128; i++) x[i] = y[i] = frand(2);
    for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
        kern_rope(NULL, (kern_isa)isa, 1, 2, 64, y, 128, &pos, 500000.0f, KERN_ROPE_NORM);
        PT_EQ_MEM(y, x, sizeof x);
    }
}

PT_TEST(glu_close_to_reference) {
    kern_pool *p = pool3();
    for (int act = 0; act < 2; act++)
        for (int a = 0; a < N_NS; a++)
            for (int b = 0; b < N_MS; b++) {
                int F = Ns[a], M = Ms[b], ldgu = 2 * F + 1, ldh = F + 2;
                float *gu = rand_rows(M, ldgu, 8);
                gu[0] = -100, gu[F > 1 ? 1 : 0] = 100; /* exp overflow and underflow */
                float *r = malloc(sizeof(float) * (size_t)M * ldh),
                      *h = malloc(sizeof(float) * (size_t)M * ldh);
                kern_glu_ref(M, F, gu, ldgu, r, ldh, (kern_glu_act)act);
                for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
                    kern_glu(p, (kern_isa)isa, M, F, gu, ldgu, h, ldh, (kern_glu_act)act);
                    for (int m = 0; m < M; m++) {
                        const float *g = gu + (size_t)m * ldgu, *u = g + F;
                        const float *hr = r + (size_t)m * ldh, *hv = h + (size_t)m * ldh;
                        if (isa == KERN_ISA_SCALAR) {
                            PT_EQ_MEM(hv, hr, sizeof(float) * F);
                            continue;
                        }
                        /* both within ~4 ulp of the exact value (10 allowed);
                         * GELU: the reference's 1 + tanh cancels for negative
                         * x, so allow its rounding, a few ulp of x * u */
                        double ab = act == KERN_GLU_GELU_TANH ? 4e-7 : 0;
                        for (int i = 0; i < F; i++)
                            PT_NEAR(hv[i], hr[i],
                                    6e-7 * fabs((double)hr[i]) + ab * fabs((double)g[i] * u[i]));
                    }
                }
                free(gu), free(r), free(h);
            }
    kern_pool_destroy(p);
}

PT_TEST(add_bit_exact) {
    kern_pool *p = pool3();
    for (int a = 0; a < N_NS; a++)
        for (int b = 0; b < N_MS; b++) {
            int n = Ns[a], M = Ms[b], ldy = n + 1, ldx = n + 4;
            float *y0 = rand_rows(M, ldy, 5), *x = rand_rows(M, ldx, 5);
            float *r = dup(y0, (size_t)M * ldy);
            kern_add_ref(M, n, r, ldy, x, ldx);
            for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
                float *y = dup(y0, (size_t)M * ldy);
                kern_add(p, (kern_isa)isa, M, n, y, ldy, x, ldx);
                PT_EQ_MEM(y, r, sizeof(float) * (size_t)M * ldy);
                free(y);
            }
            free(y0), free(x), free(r);
        }
    kern_pool_destroy(p);
}

PT_TEST(softmax_close_to_reference) {
    for (int a = 0; a < N_NS; a++)
        for (int rep = 0; rep < 4; rep++) {
            int n = Ns[a];
            float *x = rand_rows(1, n, rep == 3 ? 60.0f : 4.0f);
            float *r = dup(x, n);
            kern_softmax_ref(r, n);
            for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
                float *y = dup(x, n);
                kern_softmax((kern_isa)isa, y, n);
                if (isa == KERN_ISA_SCALAR) PT_EQ_MEM(y, r, sizeof(float) * n);
                else near_all(y, r, n, 4e-6, 1e-30);
                double sum = 0;
                for (int i = 0; i < n; i++) sum += y[i];
                PT_NEAR(sum, 1.0, 1e-5);
                free(y);
            }
            free(x), free(r);
        }
}

/* One op of the invariance test, on pool p with the given ISA. */
static void run_ops(kern_pool *p, kern_isa isa, int M, int n, float *x, int ld, const float *w,
                    const int32_t *pos, int8_t *q, float *qs, float *y, float *h, int8_t *qb,
                    float *qbs) {
    kern_quantize_rows(p, isa, M, n, x, ld, q, n + 4, qs);
    kern_quantize_blocks(p, isa, M, n, x, ld, qb, n + 4, qbs, (n + 31) / 32);
    kern_rmsnorm(p, isa, M, n, x, ld, w, 1e-5f, y, n);
    kern_glu(p, isa, M, n / 2, x, ld, h, n / 2, KERN_GLU_SILU);
    kern_glu(p, isa, M, n / 2, x, ld, h + (size_t)M * (n / 2), n / 2, KERN_GLU_GELU_TANH);
    kern_add(p, isa, M, n, y, n, x, ld);
    kern_rope(p, isa, M, n / 64, 64, x, ld, pos, 10000.0f, KERN_ROPE_NORM);
    kern_rope(p, isa, M, (n - 32) / 64, 64, x + 32, ld, pos, 10000.0f, KERN_ROPE_NEOX);
}

PT_TEST(rows_identical_alone_or_in_a_threaded_batch) {
    kern_pool *p = pool3();
    static const int ns[] = {64 + 7, 2048 + 3, 8192};
    for (size_t a = 0; a < sizeof ns / sizeof *ns; a++)
        for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
            int n = ns[a], M = 70, ld = n + 1, ldq = n + 4, F = n / 2;
            float *x = rand_rows(M, ld, 3), *w = rand_rows(1, n, 1);
            int32_t *pos = malloc(sizeof(int32_t) * M);
            for (int t = 0; t < M; t++) pos[t] = 7 * t + 1;
            int8_t *q = malloc((size_t)M * ldq), q1[8192 + 4];
            float *qs = malloc(sizeof(float) * M), qs1;
            int nb = (n + 31) / 32;
            int8_t *qb = malloc((size_t)M * ldq), qb1[8192 + 4];
            float *qbs = malloc(sizeof(float) * M * nb), qbs1[256];
            float *y = malloc(sizeof(float) * (size_t)M * n),
                  *h = malloc(sizeof(float) * (size_t)M * n);
            float *y1 = malloc(sizeof(float) * n), *h1 = malloc(sizeof(float) * 2 * F);
            float *xb = dup(x, (size_t)M * ld);
            run_ops(p, (kern_isa)isa, M, n, xb, ld, w, pos, q, qs, y, h, qb, qbs);
            for (int m = 0; m < M; m += 13) {
                float *xm = dup(x + (size_t)m * ld, ld);
                /* alone, on the caller: h1 holds silu then gelu halves */
                kern_quantize_rows(NULL, (kern_isa)isa, 1, n, xm, ld, q1, ldq, &qs1);
                kern_quantize_blocks(NULL, (kern_isa)isa, 1, n, xm, ld, qb1, ldq, qbs1, nb);
                kern_rmsnorm(NULL, (kern_isa)isa, 1, n, xm, ld, w, 1e-5f, y1, n);
                kern_glu(NULL, (kern_isa)isa, 1, F, xm, ld, h1, F, KERN_GLU_SILU);
                kern_glu(NULL, (kern_isa)isa, 1, F, xm, ld, h1 + F, F, KERN_GLU_GELU_TANH);
                kern_add(NULL, (kern_isa)isa, 1, n, y1, n, xm, ld);
                kern_rope(NULL, (kern_isa)isa, 1, n / 64, 64, xm, ld, pos + m, 10000.0f,
                          KERN_ROPE_NORM);
                kern_rope(NULL, (kern_isa)isa, 1, (n - 32) / 64, 64, xm + 32, ld, pos + m, 10000.0f,
                          KERN_ROPE_NEOX);
                PT_EQ_MEM(q1, q + (size_t)m * ldq, (size_t)ldq);
                PT_EQ_MEM(&qs1, qs + m, sizeof(float));
                PT_EQ_MEM(qb1, qb + (size_t)m * ldq, (size_t)ldq);
                PT_EQ_MEM(qbs1, qbs + (size_t)m * nb, sizeof(float) * nb);
                PT_EQ_MEM(y1, y + (size_t)m * n, sizeof(float) * n);
                PT_EQ_MEM(h1, h + (size_t)m * F, sizeof(float) * F);
                PT_EQ_MEM(h1 + F, h + (size_t)M * F + (size_t)m * F, sizeof(float) * F);
                PT_EQ_MEM(xm, xb + (size_t)m * ld, sizeof(float) * n);
                free(xm);
            }
            free(qb), free(qbs);
            free(x), free(w), free(pos), free(q), free(qs), free(y), free(h), free(y1), free(h1),
                free(xb);
        }
    kern_pool_destroy(p);
}

/* argmax: every ISA returns the reference's index, on ties, NaN, -inf and tails. */
PT_TEST(argmax_every_isa_equals_reference) {
    enum { MAXN = 300 };
    static float x[MAXN];
    uint64_t st = 77;
    for (int iter = 0; iter < 400; iter++) {
        int n = 1 + (int)(iter * 7 % MAXN);
        for (int i = 0; i < n; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            int r = (int)(st >> 33) % 64; /* few distinct values: many ties */
            x[i] = (float)(r % 16) - 8.0f;
            if (r == 60) x[i] = NAN;
            if (r == 61) x[i] = -INFINITY;
            if (iter % 5 == 0) x[i] = (r & 1) ? NAN : -INFINITY; /* nothing finite */
        }
        int ref = kern_argmax_ref(x, n);
        PT_ASSERT(ref >= 0 && ref < n);
        for (int i = 0; i < n; i++) { /* the first of the largest, NaN as -inf */
            float v = x[i] == x[i] ? x[i] : -INFINITY, b = x[ref] == x[ref] ? x[ref] : -INFINITY;
            PT_ASSERT(v <= b);
            if (i < ref) PT_ASSERT(v < b);
        }
        for (int isa = 0; isa <= (int)kern_isa_best(); isa++)
            PT_ASSERT_MSG(kern_argmax((kern_isa)isa, x, n) == ref, "isa %d n %d", isa, n);
    }
}

PT_TEST(scan_at_least_every_isa_equals_reference) {
    enum { MAXN = 300 };
    static float x[MAXN];
    uint64_t st = 99;
    for (int iter = 0; iter < 400; iter++) {
        int n = 1 + (int)(iter * 13 % MAXN), from = (int)(iter % 7);
        for (int i = 0; i < n; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            int r = (int)(st >> 33) % 64;
            x[i] = (float)(r % 32) * 0.37f - 6.0f;
            if (r == 60) x[i] = NAN;
            if (r == 61) x[i] = -INFINITY;
            if (r == 62) x[i] = INFINITY;
        }
        float mul = iter % 3 ? 1.0f / 0.7f : 1.3f, thr = (float)(iter % 11) - 3.0f;
        if (iter % 17 == 0) thr = -INFINITY; /* every finite and -inf passes, NaN never */
        int ref = kern_scan_at_least_ref(x, from, n, mul, thr);
        PT_ASSERT(ref >= (from < n ? from : n) && ref <= n);
        for (int i = from; i < ref; i++) PT_ASSERT(!(x[i] * mul >= thr));
        if (ref < n) PT_ASSERT(x[ref] * mul >= thr);
        for (int isa = 0; isa <= (int)kern_isa_best(); isa++)
            PT_ASSERT_MSG(kern_scan_at_least((kern_isa)isa, x, from, n, mul, thr) == ref,
                          "isa %d n %d from %d", isa, n, from);
    }
}

PT_TEST(quantize_blocks_sum_every_isa) {
    /* the block sums equal the sums of the int8 values written, on every
     * path, ragged last blocks and zero blocks included; q and scales are
     * kern_quantize_blocks's */
    static const int Ks[] = {1, 31, 32, 33, 100, 640, 2048 + 7};
    for (int k = 0; k < 7; k++) {
        int K = Ks[k], M = 5, nb = (K + 31) / 32, ldq = nb * 32;
        float *x = malloc(sizeof(float) * (size_t)M * K);
        for (int i = 0; i < M * K; i++) x[i] = frand(3.0f) * (i % 97 == 0 ? 40.0f : 1.0f);
        for (int i = 0; i < K && i < 32; i++) x[2 * K + i] = 0; /* a zero block */
        int8_t *q0 = malloc((size_t)M * ldq), *q = malloc((size_t)M * ldq);
        float *s0 = malloc(sizeof(float) * (size_t)M * nb),
              *s = malloc(sizeof(float) * (size_t)M * nb);
        int32_t *sum = malloc(sizeof(int32_t) * (size_t)M * nb);
        kern_quantize_blocks_ref(M, K, x, K, q0, ldq, s0, nb);
        for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
            kern_quantize_blocks_sum(NULL, (kern_isa)isa, M, K, x, K, q, ldq, s, sum, nb);
            PT_EQ_MEM(q, q0, (size_t)M * ldq);
            PT_EQ_MEM(s, s0, sizeof(float) * (size_t)M * nb);
            for (int m = 0; m < M; m++)
                for (int b = 0; b < nb; b++) {
                    int32_t t = 0;
                    for (int i = 32 * b; i < 32 * b + 32 && i < K; i++) t += q[(size_t)m * ldq + i];
                    PT_EQ_INT(sum[(size_t)m * nb + b], t);
                }
        }
        free(x), free(q0), free(q), free(s0), free(s), free(sum);
    }
}
