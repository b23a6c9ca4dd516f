/*
 * kern_gemm_avx2.c -- the AVX2 tile kernel of the packed int8 GEMM
 * (kern_q8_tile_avx2; interface in kern_gemm_int.h, numerics in kern_gemm.h).
 *
 * One 64-byte line of a packed group holds 4 consecutive inputs of 16
 * channels, i.e. two ymm of 8 channels x 4 bytes.  For each row of A the 4
 * activation bytes of the quad are broadcast to every lane, and the signed
 * x signed product uses the sign trick:
 *   maddubs(|a|, sign(w, a))  -> int16 pairs (no saturation: 2*127*127 < 32767)
 *   madd(., 1)                -> int32: the 4-term dot of one channel
 * so the accumulators hold per-channel sums directly (no horizontal
 * reductions).  In float mode every pack converts the 8-lane block sums to
 * float once per 32 inputs and adds them with fma, multiplied by the
 * activation block scale (times the fp16 weight block scale of a
 * block-scaled pack; the scalar kernel's order); a per-channel pack then
 * multiplies by scale[n] once at the end.  int32 mode keeps int32 totals.
 *
 * Register blocking: 4 rows of A x 16 channels = 8 int32 accumulators; the
 * float accumulators of float mode live in a small array (touched
 * once per block).  Rows past a multiple of 4 run one at a time.
 *
 * The 4-row inner step is inline assembly: with intrinsics GCC spilled
 * accumulators to the stack (a store-forwarding chain per quad) and ran at
 * 59 GMAC/s on one core; the assembly runs at 73 (int32) / 64 (block-scaled)
 * GMAC/s here (Zen 3 at about 3.2 GHz, whose two multiply pipes cap
 * maddubs + madd at about 100).  It computes maddubs(|w|, sign(a, w)) -- |w|
 * once per quad for all four rows, then one sign per row per ymm -- which
 * equals maddubs(|a|, sign(w, a)) (both are |a||w| with the sign of a*w),
 * and broadcasts with vbroadcastss (same bits; measured cheaper than
 * vpbroadcastd on Zen 3).  The one-row (decode) path is bound by memory
 * and stays in intrinsics.
 */
#include "kern_gemm_int.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define KERN_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KERN_INLINE static inline __attribute__((always_inline))
#define KERN_W4X_UNROLL_ALL _Pragma("GCC unroll 8")

/* Broadcast the 4 activation bytes at p to every 32-bit lane. */
KERN_AVX2 KERN_INLINE __m256i kern_bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* One row x one group, block b: the block's sums added to c0 / c1. */
KERN_AVX2 KERN_INLINE void kern_avx2_block1(const int8_t *a, const int8_t *wb, __m256i *c0,
                                            __m256i *c1) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int q = 0; q < 8; q++) {
        __m256i w0 = _mm256_load_si256((const __m256i *)(wb + q * 64));
        __m256i w1 = _mm256_load_si256((const __m256i *)(wb + q * 64 + 32));
        __m256i x = kern_bcast4(a + q * 4), ax = _mm256_sign_epi8(x, x);
        *c0 = _mm256_add_epi32(
            *c0, _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(w0, x)), ones));
        *c1 = _mm256_add_epi32(
            *c1, _mm256_madd_epi16(_mm256_maddubs_epi16(ax, _mm256_sign_epi8(w1, x)), ones));
    }
}

/* The 16 fold multipliers of one row's block: the weights' fp16 block
 * scales (bsg, block b) times the activation block scale as, or as alone
 * for a per-channel pack (bsg NULL). */
KERN_AVX2 KERN_INLINE void kern_avx2_mult(const uint16_t *bsg, int b, float as, __m256 *u0,
                                          __m256 *u1) {
    __m256 va = _mm256_set1_ps(as);
    if (!bsg) {
        *u0 = *u1 = va;
        return;
    }
    *u0 = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(bsg + (size_t)b * 16))),
                        va);
    *u1 = _mm256_mul_ps(
        _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(bsg + (size_t)b * 16 + 8))), va);
}

/* One row x one group (the decode shape, bound by reading the weights):
 * float mode (as: the row's block scales) folds each block into f,
 * int32 mode (as NULL) leaves the totals in s. */
KERN_AVX2 static void kern_avx2_mk1(const int8_t *a, const int8_t *wg, const uint16_t *bsg,
                                    const float *as, int nb, float f[16], int32_t s[16]) {
    __m256 f0 = _mm256_setzero_ps(), f1 = f0;
    __m256i c0 = _mm256_setzero_si256(), c1 = c0;
    for (int b = 0; b < nb; b++) {
        kern_avx2_block1(a + b * 32, wg + (size_t)b * KERN_PACK_BLOCK_BYTES, &c0, &c1);
        if (!as) continue;
        __m256 u0, u1;
        kern_avx2_mult(bsg, b, as[b], &u0, &u1);
        f0 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(c0), u0, f0);
        f1 = _mm256_fmadd_ps(_mm256_cvtepi32_ps(c1), u1, f1);
        c0 = c1 = _mm256_setzero_si256();
    }
    if (as) {
        _mm256_storeu_ps(f, f0), _mm256_storeu_ps(f + 8, f1);
    } else {
        _mm256_storeu_si256((__m256i *)s, c0), _mm256_storeu_si256((__m256i *)(s + 8), c1);
    }
}

/* Two rows' share of a quad in assembly (see the file comment): u0/u1 =
 * |w0|/|w1| (the quad's two ymm at w), t/v = maddubs(|w|, sign(a, w)) of
 * rows p/q, widened by madd with ones and added to c (row p), d (row q). */
#define KERN_AVX2_QROW2(p, q, c0, c1, d0, d1) \
    "vbroadcastss (%[" p "]), %[a]\n\t"       \
    "vbroadcastss (%[" q "]), %[b]\n\t"       \
    "vpsignb (%[w]), %[a], %[t]\n\t"          \
    "vpsignb (%[w]), %[b], %[v]\n\t"          \
    "vpmaddubsw %[t], %[u0], %[t]\n\t"        \
    "vpmaddubsw %[v], %[u0], %[v]\n\t"        \
    "vpmaddwd %[ones], %[t], %[t]\n\t"        \
    "vpmaddwd %[ones], %[v], %[v]\n\t"        \
    "vpaddd %[t], %[" c0 "], %[" c0 "]\n\t"   \
    "vpaddd %[v], %[" d0 "], %[" d0 "]\n\t"   \
    "vpsignb 32(%[w]), %[a], %[t]\n\t"        \
    "vpsignb 32(%[w]), %[b], %[v]\n\t"        \
    "vpmaddubsw %[t], %[u1], %[t]\n\t"        \
    "vpmaddubsw %[v], %[u1], %[v]\n\t"        \
    "vpmaddwd %[ones], %[t], %[t]\n\t"        \
    "vpmaddwd %[ones], %[v], %[v]\n\t"        \
    "vpaddd %[t], %[" c1 "], %[" c1 "]\n\t"   \
    "vpaddd %[v], %[" d1 "], %[" d1 "]\n\t"

/* Four rows of A x one group, every accumulator in a register (8 ymm).
 * Float mode (as: row 0's block scales, rows lds apart) folds each block
 * into f (in memory: touched once per block); int32 mode (as NULL) leaves
 * the totals in s. */
KERN_AVX2 static void kern_avx2_mk4(const int8_t *A, int lda, const int8_t *wg, const uint16_t *bsg,
                                    const float *as, int lds, int nb, float f[4][16],
                                    int32_t s[4][16]) {
    const __m256i ones = _mm256_set1_epi16(1);
    const int8_t *a0 = A, *a1 = A + lda, *a2 = A + 2 * (size_t)lda, *a3 = A + 3 * (size_t)lda;
    __m256i c00 = _mm256_setzero_si256(), c01 = c00, c10 = c00, c11 = c00;
    __m256i c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    if (as) memset(f, 0, 4 * 16 * sizeof(float));
    for (int b = 0; b < nb; b++) {
        const int8_t *wb = wg + (size_t)b * KERN_PACK_BLOCK_BYTES;
        for (int q = 0; q < 8; q++) {
            __m256i u0, u1, ta, tb, tt, tv;
            size_t k = (size_t)b * 32 + (size_t)q * 4;
            __asm__(
                "vpabsb (%[w]), %[u0]\n\t"
                "vpabsb 32(%[w]), %[u1]\n\t" KERN_AVX2_QROW2("p0", "p1", "c00", "c01", "c10", "c11")
                    KERN_AVX2_QROW2("p2", "p3", "c20", "c21", "c30", "c31")
                : [c00] "+x"(c00), [c01] "+x"(c01), [c10] "+x"(c10), [c11] "+x"(c11),
                  [c20] "+x"(c20), [c21] "+x"(c21), [c30] "+x"(c30), [c31] "+x"(c31),
                  [u0] "=&x"(u0), [u1] "=&x"(u1), [a] "=&x"(ta), [b] "=&x"(tb), [t] "=&x"(tt),
                  [v] "=&x"(tv)
                : [w] "r"(wb + q * 64), [p0] "r"(a0 + k), [p1] "r"(a1 + k), [p2] "r"(a2 + k),
                  [p3] "r"(a3 + k), [ones] "x"(ones)
                : "memory");
        }
        if (!as) continue;
#define KERN_AVX2_FOLD(i, c0, c1)                                                                 \
    do {                                                                                          \
        __m256 u0, u1;                                                                            \
        kern_avx2_mult(bsg, b, as[(size_t)(i)*lds + b], &u0, &u1);                                \
        _mm256_storeu_ps(f[i],                                                                    \
                         _mm256_fmadd_ps(_mm256_cvtepi32_ps(c0), u0, _mm256_loadu_ps(f[i])));     \
        _mm256_storeu_ps(f[i] + 8,                                                                \
                         _mm256_fmadd_ps(_mm256_cvtepi32_ps(c1), u1, _mm256_loadu_ps(f[i] + 8))); \
        c0 = c1 = _mm256_setzero_si256();                                                         \
    } while (0)
        KERN_AVX2_FOLD(0, c00, c01);
        KERN_AVX2_FOLD(1, c10, c11);
        KERN_AVX2_FOLD(2, c20, c21);
        KERN_AVX2_FOLD(3, c30, c31);
#undef KERN_AVX2_FOLD
    }
    if (as) return;
    _mm256_storeu_si256((__m256i *)s[0], c00), _mm256_storeu_si256((__m256i *)(s[0] + 8), c01);
    _mm256_storeu_si256((__m256i *)s[1], c10), _mm256_storeu_si256((__m256i *)(s[1] + 8), c11);
    _mm256_storeu_si256((__m256i *)s[2], c20), _mm256_storeu_si256((__m256i *)(s[2] + 8), c21);
    _mm256_storeu_si256((__m256i *)s[3], c30), _mm256_storeu_si256((__m256i *)(s[3] + 8), c31);
}

/* Rows r .. r+MR-1 (MR 1 or 4) of the tile for group gi: compute and write the epilogue. */
KERN_AVX2 KERN_INLINE void kern_avx2_rows(const int MR, const kern_q8_tile *t, int r, int gi) {
    const kern_wpack *w = t->w;
    int nb = w->n_blocks, g = t->g0 + gi;
    int cols = t->ncol - gi * KERN_PACK_NC;
    if (cols > KERN_PACK_NC) cols = KERN_PACK_NC;
    const int8_t *A = t->A + (size_t)r * t->lda;
    const int8_t *wg = w->q8 + (size_t)g * nb * KERN_PACK_BLOCK_BYTES;
    const uint16_t *bsg = w->bscale && !t->C32 ? w->bscale + (size_t)g * nb * KERN_PACK_NC : NULL;
    const float *as = t->C32 ? NULL : t->a_scale + (size_t)r * t->lds;
    size_t o = (size_t)r * t->ldc + (size_t)gi * KERN_PACK_NC;
    float f[4][16];
    int32_t s[4][16];
    if (MR == 4) kern_avx2_mk4(A, t->lda, wg, bsg, as, t->lds, nb, f, s);
    else kern_avx2_mk1(A, wg, bsg, as, nb, f[0], s[0]);
    for (int i = 0; i < MR; i++) {
        if (t->C32) {
            memcpy(t->C32 + o + (size_t)i * t->ldc, s[i], (size_t)cols * sizeof(int32_t));
            continue;
        }
        float *c = t->C + o + (size_t)i * t->ldc;
        if (bsg) { /* C = f */
            memcpy(c, f[i], (size_t)cols * sizeof(float));
        } else { /* C = f * scale[n] */
            const float *sc = w->scale + (size_t)g * KERN_PACK_NC;
            if (cols == KERN_PACK_NC) {
                _mm256_storeu_ps(c, _mm256_mul_ps(_mm256_loadu_ps(f[i]), _mm256_loadu_ps(sc)));
                _mm256_storeu_ps(c + 8,
                                 _mm256_mul_ps(_mm256_loadu_ps(f[i] + 8), _mm256_loadu_ps(sc + 8)));
            } else {
                for (int j = 0; j < cols; j++) c[j] = f[i][j] * sc[j];
            }
        }
    }
}

/* Decode-sized tiles (up to 2 rows): NG groups at once, so each thread
 * streams NG weight regions side by side (prefetched KERN_AVX2_PF blocks
 * ahead) instead of one after the other; float accumulators in memory
 * (touched once per block).  Same per-output arithmetic as kern_avx2_mk1:
 * int32 block sums via the sign trick, f = fma((float)S, u, f) per block. */
#define KERN_AVX2_PF 4 /* blocks ahead the decode path prefetches each group's weights */
KERN_AVX2 KERN_INLINE void kern_avx2_dec(const int MR, const int NG, const kern_q8_tile *t,
                                         int gi) {
    const kern_wpack *w = t->w;
    const int nb = w->n_blocks;
    const __m256i ones = _mm256_set1_epi16(1);
    const int8_t *wg[3];
    const uint16_t *bsg[3];
    float f[2][3][16];
    KERN_W4X_UNROLL_ALL
    for (int g = 0; g < NG; g++) {
        size_t gg = (size_t)(t->g0 + gi + g);
        wg[g] = w->q8 + gg * nb * KERN_PACK_BLOCK_BYTES;
        bsg[g] = w->bscale ? w->bscale + gg * nb * KERN_PACK_NC : NULL;
    }
    memset(f, 0, sizeof f);
    for (int b = 0; b < nb; b++) {
        if (b + KERN_AVX2_PF < nb) {
            KERN_W4X_UNROLL_ALL
            for (int g = 0; g < NG; g++) {
                const char *pf =
                    (const char *)(wg[g] + (size_t)(b + KERN_AVX2_PF) * KERN_PACK_BLOCK_BYTES);
                for (int i = 0; i < 8; i++) _mm_prefetch(pf + 64 * i, _MM_HINT_T0);
            }
        }
        __m256i c[2][3][2];
        KERN_W4X_UNROLL_ALL
        for (int r = 0; r < MR; r++) KERN_W4X_UNROLL_ALL
        for (int g = 0; g < NG; g++) c[r][g][0] = c[r][g][1] = _mm256_setzero_si256();
        KERN_W4X_UNROLL_ALL
        for (int q = 0; q < 8; q++) {
            __m256i x[2], ax[2];
            KERN_W4X_UNROLL_ALL
            for (int r = 0; r < MR; r++) {
                x[r] = kern_bcast4(t->A + (size_t)r * t->lda + b * 32 + q * 4);
                ax[r] = _mm256_sign_epi8(x[r], x[r]);
            }
            KERN_W4X_UNROLL_ALL
            for (int g = 0; g < NG; g++) {
                const int8_t *wq = wg[g] + (size_t)b * KERN_PACK_BLOCK_BYTES + q * 64;
                __m256i w0 = _mm256_load_si256((const __m256i *)wq);
                __m256i w1 = _mm256_load_si256((const __m256i *)(wq + 32));
                KERN_W4X_UNROLL_ALL
                for (int r = 0; r < MR; r++) {
                    c[r][g][0] = _mm256_add_epi32(
                        c[r][g][0],
                        _mm256_madd_epi16(_mm256_maddubs_epi16(ax[r], _mm256_sign_epi8(w0, x[r])),
                                          ones));
                    c[r][g][1] = _mm256_add_epi32(
                        c[r][g][1],
                        _mm256_madd_epi16(_mm256_maddubs_epi16(ax[r], _mm256_sign_epi8(w1, x[r])),
                                          ones));
                }
            }
        }
        KERN_W4X_UNROLL_ALL
        for (int r = 0; r < MR; r++) {
            float as = t->a_scale[(size_t)r * t->lds + b];
            KERN_W4X_UNROLL_ALL
            for (int g = 0; g < NG; g++) {
                __m256 u0, u1;
                kern_avx2_mult(bsg[g], b, as, &u0, &u1);
                _mm256_storeu_ps(f[r][g], _mm256_fmadd_ps(_mm256_cvtepi32_ps(c[r][g][0]), u0,
                                                          _mm256_loadu_ps(f[r][g])));
                _mm256_storeu_ps(f[r][g] + 8, _mm256_fmadd_ps(_mm256_cvtepi32_ps(c[r][g][1]), u1,
                                                              _mm256_loadu_ps(f[r][g] + 8)));
            }
        }
    }
    for (int g = 0; g < NG; g++) {
        int cols = t->ncol - (gi + g) * KERN_PACK_NC;
        if (cols > KERN_PACK_NC) cols = KERN_PACK_NC;
        const float *sc = w->bscale ? NULL : w->scale + (size_t)(t->g0 + gi + g) * KERN_PACK_NC;
        for (int r = 0; r < MR; r++) {
            float *cp = t->C + (size_t)r * t->ldc + (size_t)(gi + g) * KERN_PACK_NC;
            for (int j = 0; j < cols; j++) cp[j] = sc ? f[r][g][j] * sc[j] : f[r][g][j];
        }
    }
}

KERN_AVX2 static void kern_avx2_dec_rows(const kern_q8_tile *t, int gi, int ng) {
#define KERN_AVX2_D(MR)                                \
    do {                                               \
        if (ng == 3) kern_avx2_dec(MR, 3, t, gi);      \
        else if (ng == 2) kern_avx2_dec(MR, 2, t, gi); \
        else kern_avx2_dec(MR, 1, t, gi);              \
    } while (0)
    if (t->mr == 2) KERN_AVX2_D(2);
    else KERN_AVX2_D(1);
#undef KERN_AVX2_D
}

KERN_AVX2 void kern_q8_tile_avx2(const kern_q8_tile *t) {
    if (!t->C32 && t->mr <= 2) { /* decode: several groups' streams at once */
        for (int gi = 0; gi < t->ng; gi += 3)
            kern_avx2_dec_rows(t, gi, t->ng - gi < 3 ? t->ng - gi : 3);
        return;
    }
    for (int gi = 0; gi < t->ng; gi++) {
        int r = 0;
        for (; r + 4 <= t->mr; r += 4) kern_avx2_rows(4, t, r, gi);
        for (; r < t->mr; r++) kern_avx2_rows(1, t, r, gi);
    }
}

#else /* not x86-64: never selected (kern_isa_best() is scalar) */

void kern_q8_tile_avx2(const kern_q8_tile *t) { kern_q8_tile_scalar(t); }

#endif
