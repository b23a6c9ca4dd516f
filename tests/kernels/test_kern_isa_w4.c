/*
 * test_kern_isa_w4.c -- part of test_kern_isa: the W4A8 tile kernels
 * (kern_w4_int.h) against kern_w4_tile_scalar, bit for bit, tile by tile:
 *   - AVX2, AVX-512 VNNI and AMX natively where the CPU has them;
 *   - the AVX-512 body (kernels/cpu/kern_w4_avx512.inc) under SIMDe and the
 *     AMX body (kern_w4_amx.inc) under SIMDe plus the tile emulation
 *     (kern_isa_emu.c) on any AVX2 host, with no faulting tile use;
 * for both kinds, random and edge shapes: rows 1..64 (up to
 * KERN_W4_FUSED_MAX_MR the register path, above it the buffered one with
 * every register-block tail), ragged last group, odd group counts, more
 * groups than a pass (KERN_W4_GB), K with a partial last chunk
 * (KERN_W4_KC), and all-extreme operands.  Columns past ncol must stay
 * untouched; activation rows end exactly at K in some cases so an
 * over-read hits the sanitizer.
 */
#include "ptest.h"

#include <math.h>

#include "kern_isa.h"
#include "kern_w4_int.h"
#if KERN_TEST_EMU
#include "kern_isa_emu.h"
#endif

static float w4_frand01(void) { return (float)((double)(pt_rand() >> 11) / 9007199254740992.0); }

/* A problem: a pack of either kind, activations [M][lda] (junk past K). */
typedef struct w4case {
    int M, N, K, lda, lds; /* shape and strides */
    kern_w4pack w;         /* packed weights */
    int8_t *A;             /* activations */
    float *a_scale;        /* [M][lds] */
    int32_t *a_sum;        /* [M][lds] block sums of A */
} w4case;

static void w4case_make(w4case *c, int M, int N, int K, int aff, int extreme) {
    char err[128];
    c->M = M, c->N = N, c->K = K;
    int nb = K / 32, ns = K / 256, rc;
    if (aff) {
        uint8_t *U = malloc((size_t)N * K), *sc = malloc((size_t)N * nb),
                *mn = malloc((size_t)N * nb);
        float *d = malloc(sizeof(float) * N * ns), *dm = malloc(sizeof(float) * N * ns);
        for (size_t i = 0; i < (size_t)N * K; i++) U[i] = extreme ? 15 : (uint8_t)(pt_rand() % 16);
        for (int i = 0; i < N * nb; i++) {
            sc[i] = extreme ? 63 : (uint8_t)(pt_rand() % 64);
            mn[i] = extreme ? 63 : (uint8_t)(pt_rand() % 64);
        }
        for (int i = 0; i < N * ns; i++) {
            d[i] = kern_f16_to_f32(kern_f32_to_f16(0.001f + 0.01f * w4_frand01()));
            dm[i] = kern_f16_to_f32(kern_f32_to_f16(0.001f + 0.01f * w4_frand01()));
        }
        rc = kern_w4pack_init_affine(&c->w, N, K, U, sc, mn, d, dm, err, sizeof err);
        free(U), free(sc), free(mn), free(d), free(dm);
    } else {
        const int8_t *lut = pt_rand() & 1 ? kern_w4_lut_iq4_nl : kern_w4_lut_q4_0;
        int8_t *W = malloc((size_t)N * K);
        float *bs = malloc(sizeof(float) * N * nb);
        for (size_t i = 0; i < (size_t)N * K; i++)
            W[i] = lut[extreme ? (pt_rand() & 1 ? 0 : 15) : pt_rand() % 16];
        for (int i = 0; i < N * nb; i++)
            bs[i] = kern_f16_to_f32(kern_f32_to_f16(0.001f + 0.05f * w4_frand01()));
        rc = kern_w4pack_init_lut(&c->w, N, K, W, bs, lut, err, sizeof err);
        free(W), free(bs);
    }
    PT_ASSERT_MSG(rc == 0, "w4 pack %d x %d: %s", N, K, err);
    static const int slack[] = {0, 4, 36}; /* 0: a row over-read hits the sanitizer */
    c->lda = K + slack[pt_rand() % 3];
    c->lds = nb + (int)(pt_rand() % 2);
    c->A = malloc((size_t)M * c->lda);
    c->a_scale = malloc(sizeof(float) * (size_t)M * c->lds);
    for (int m = 0; m < M; m++) {
        for (int k = 0; k < c->lda; k++) {
            int v = extreme ? (pt_rand() & 1 ? 127 : -127) : (int)(pt_rand() % 255) - 127;
            c->A[(size_t)m * c->lda + k] = (int8_t)(k < K ? v : (int)(pt_rand() % 256) - 128);
        }
        for (int b = 0; b < c->lds; b++) c->a_scale[(size_t)m * c->lds + b] = w4_frand01() + 0.001f;
    }
    c->a_sum = calloc((size_t)M * c->lds, sizeof(int32_t));
    for (int m = 0; m < M; m++)
        for (int k = 0; k < K; k++)
            c->a_sum[(size_t)m * c->lds + k / 32] += c->A[(size_t)m * c->lda + k];
}

static void w4case_free(w4case *c) {
    kern_w4pack_free(&c->w);
    free(c->A);
    free(c->a_scale);
    free(c->a_sum);
}

#define W4_SENTINEL 0x7fc0deadu

/* One tile through fn and the scalar kernel into sentinel-filled buffers;
 * 1 when they agree bit for bit, padding included. */
static int w4_tile_check(const w4case *c, kern_w4_tile_fn fn, int r0, int mr, int g0, int ng,
                         const char *what) {
    int ldc = 16 * ng + 3;
    size_t n = (size_t)mr * ldc;
    uint32_t *ref = malloc(4 * n), *got = malloc(4 * n);
    for (size_t i = 0; i < n; i++) ref[i] = got[i] = W4_SENTINEL;
    kern_w4_tile t = {.mr = mr,
                      .g0 = g0,
                      .ng = ng,
                      .A = c->A + (size_t)r0 * c->lda,
                      .lda = c->lda,
                      .a_scale = c->a_scale + (size_t)r0 * c->lds,
                      .lds = c->lds,
                      /* the kernels' own block sums, or the caller's */
                      .a_sum = pt_rand() % 2 ? NULL : c->a_sum + (size_t)r0 * c->lds,
                      .w = &c->w,
                      .ldc = ldc};
    t.ncol = c->N - 16 * g0 < 16 * ng ? c->N - 16 * g0 : 16 * ng;
    t.C = (float *)ref;
    kern_w4_tile_scalar(&t);
    t.C = (float *)got;
    fn(&t);
    int ok = memcmp(ref, got, 4 * n) == 0;
    for (size_t i = 0; ok && i < n; i++)
        if ((int)(i % ldc) >= t.ncol) ok = got[i] == W4_SENTINEL;
    if (!ok)
        for (size_t i = 0; i < n; i++)
            if (ref[i] != got[i]) {
                fprintf(stderr,
                        "  %s: M %d N %d K %d kind %d tile r0 %d mr %d g0 %d ng %d: "
                        "first difference row %zu col %zu: %08x vs %08x\n",
                        what, c->M, c->N, c->K, c->w.kind, r0, mr, g0, ng, i / ldc, i % ldc, ref[i],
                        got[i]);
                break;
            }
    free(ref);
    free(got);
    return ok;
}

/* Edge shapes and random tiles of both kinds through fn. */
static void w4_tiles(kern_w4_tile_fn fn, const char *what, int n_random) {
    static const int mrs[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 33, 63, 64};
    static const struct {
        int N, K, aff;
    } shapes[] = {{16, 32, 0},  {17, 64, 0},  {40, 96, 0},  {5, 288, 0}, {150, 320, 0},
                  {16, 256, 1}, {33, 512, 1}, {47, 256, 1}, {3, 768, 1}, {145, 256, 1}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++)
        for (size_t i = 0; i < sizeof mrs / sizeof *mrs; i++) {
            w4case c;
            w4case_make(&c, mrs[i], shapes[s].N, shapes[s].K, shapes[s].aff, 0);
            PT_ASSERT_MSG(w4_tile_check(&c, fn, 0, mrs[i], 0, c.w.n_groups, what), "%s differs",
                          what);
            w4case_free(&c);
        }
    for (int it = 0; it < n_random; it++) {
        int aff = it % 2, N = 1 + (int)(pt_rand() % 90);
        int K = aff ? 256 * (1 + (int)(pt_rand() % 3)) : 32 * (1 + (int)(pt_rand() % 17));
        int mr = 1 + (int)(pt_rand() % KERN_TILE_M);
        w4case c;
        w4case_make(&c, mr + 3, N, K, aff, it % 7 == 6);
        int g0 = (int)(pt_rand() % c.w.n_groups);
        int ng = 1 + (int)(pt_rand() % (c.w.n_groups - g0));
        int r0 = (int)(pt_rand() % 4);
        PT_ASSERT_MSG(w4_tile_check(&c, fn, r0, mr, g0, ng, what), "%s differs", what);
        w4case_free(&c);
    }
    for (int aff = 0; aff <= 1; aff++) { /* +-127 activations, largest codes and scales */
        w4case c;
        w4case_make(&c, 40, 24, 2048, aff, 1);
        PT_ASSERT_MSG(w4_tile_check(&c, fn, 0, 40, 0, 2, what), "%s differs", what);
        PT_ASSERT_MSG(w4_tile_check(&c, fn, 0, 3, 0, 2, what), "%s differs", what);
        w4case_free(&c);
    }
}

static int w4_native(kern_isa isa) {
    if (kern_isa_best() >= isa) return 1;
    PT_SKIP_HW("%s not available here (best %s)", kern_isa_name(isa),
               kern_isa_name(kern_isa_best()));
}

PT_TEST(w4_avx2_tiles_match_scalar) {
    if (w4_native(KERN_ISA_AVX2)) w4_tiles(kern_w4_tile_avx2, "w4 avx2", 120);
}

PT_TEST(w4_avx512vnni_native_tiles_match_scalar) {
    if (w4_native(KERN_ISA_AVX512VNNI)) w4_tiles(kern_w4_tile_avx512vnni, "w4 avx512vnni", 120);
}

PT_TEST(w4_amx_native_tiles_match_scalar) {
    if (w4_native(KERN_ISA_AMX)) w4_tiles(kern_w4_tile_amx, "w4 amx", 120);
}

#if KERN_TEST_EMU
PT_TEST(w4_avx512vnni_emulated_tiles_match_scalar) {
    if (kern_isa_detect() < KERN_ISA_AVX2) {
        PT_SKIP_HW("the emulation build needs AVX2+FMA+F16C on the host");
    }
    w4_tiles(kern_w4_tile_avx512vnni_emu, "w4 avx512vnni (SIMDe)", 80);
}

PT_TEST(w4_amx_emulated_tiles_match_scalar) {
    if (kern_isa_detect() < KERN_ISA_AVX2) {
        printf("  skipped: the emulation build needs AVX2+FMA+F16C on the host\n");
        return;
    }
    kern_amx_emu_take_faults();
    kern_amx_emu_take_ops();
    w4_tiles(kern_w4_tile_amx_emu, "w4 amx (emulated)", 60);
    PT_EQ_INT(kern_amx_emu_take_faults(), 0);
    PT_ASSERT(kern_amx_emu_take_ops() > 0); /* the tile path ran, not only the tail kernel */
}
#endif
