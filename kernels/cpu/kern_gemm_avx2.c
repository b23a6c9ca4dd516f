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
 * reductions).  A block-scaled pack converts the 8-lane block sums to float
 * once per 32 inputs and adds them with fma (the scalar kernel's order);
 * a per-channel pack keeps int32 totals and scales once at the end.
 *
 * Register blocking: 4 rows of A x 16 channels = 8 int32 accumulators; the
 * float accumulators of block-scaled packs live in a small array (touched
 * once per block).  Rows past a multiple of 4 run one at a time.
 */
#include "kern_gemm_int.h"

#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#define KERN_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KERN_INLINE static inline __attribute__((always_inline))

/* Broadcast the 4 activation bytes at p to every 32-bit lane. */
KERN_AVX2 KERN_INLINE __m256i kern_bcast4(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* MR rows x one group: block sums of block b into acc (zeroed by the caller). */
KERN_AVX2 KERN_INLINE void kern_avx2_block(const int MR, const int8_t *A, int lda, int b,
                                           const int8_t *wb, __m256i acc[][2]) {
    const __m256i ones = _mm256_set1_epi16(1);
    for (int q = 0; q < 8; q++) {
        __m256i w0 = _mm256_load_si256((const __m256i *)(wb + q * 64));
        __m256i w1 = _mm256_load_si256((const __m256i *)(wb + q * 64 + 32));
        for (int i = 0; i < MR; i++) {
            __m256i a = kern_bcast4(A + (size_t)i * lda + b * 32 + q * 4);
            __m256i aa = _mm256_sign_epi8(a, a);
            __m256i p0 = _mm256_madd_epi16(_mm256_maddubs_epi16(aa, _mm256_sign_epi8(w0, a)), ones);
            __m256i p1 = _mm256_madd_epi16(_mm256_maddubs_epi16(aa, _mm256_sign_epi8(w1, a)), ones);
            acc[i][0] = _mm256_add_epi32(acc[i][0], p0);
            acc[i][1] = _mm256_add_epi32(acc[i][1], p1);
        }
    }
}

/* Block-scaled: out[i][0..15] = sum_b fma order of (float)S_b * scale_b (before a_scale). */
KERN_AVX2 KERN_INLINE void kern_avx2_mk_bs(const int MR, const int8_t *A, int lda,
                                           const int8_t *wg, const uint16_t *bsg, int nb,
                                           float out[][16]) {
    __m256 f[4][2];
    for (int i = 0; i < MR; i++) f[i][0] = f[i][1] = _mm256_setzero_ps();
    for (int b = 0; b < nb; b++) {
        __m256i acc[4][2];
        for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
        kern_avx2_block(MR, A, lda, b, wg + (size_t)b * KERN_PACK_BLOCK_BYTES, acc);
        __m256 s0 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(bsg + (size_t)b * 16)));
        __m256 s1 = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(bsg + (size_t)b * 16 + 8)));
        for (int i = 0; i < MR; i++) {
            f[i][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i][0]), s0, f[i][0]);
            f[i][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(acc[i][1]), s1, f[i][1]);
        }
    }
    for (int i = 0; i < MR; i++) {
        _mm256_storeu_ps(out[i], f[i][0]);
        _mm256_storeu_ps(out[i] + 8, f[i][1]);
    }
}

/* int32 totals over every block. */
KERN_AVX2 KERN_INLINE void kern_avx2_mk_i32(const int MR, const int8_t *A, int lda,
                                            const int8_t *wg, int nb, int32_t out[][16]) {
    __m256i acc[4][2];
    for (int i = 0; i < MR; i++) acc[i][0] = acc[i][1] = _mm256_setzero_si256();
    for (int b = 0; b < nb; b++) kern_avx2_block(MR, A, lda, b, wg + (size_t)b * KERN_PACK_BLOCK_BYTES, acc);
    for (int i = 0; i < MR; i++) {
        _mm256_storeu_si256((__m256i *)out[i], acc[i][0]);
        _mm256_storeu_si256((__m256i *)(out[i] + 8), acc[i][1]);
    }
}

/* Rows r .. r+MR-1 of the tile for group gi: compute and write the epilogue. */
KERN_AVX2 KERN_INLINE void kern_avx2_rows(const int MR, const kern_q8_tile *t, int r, int gi) {
    const kern_wpack *w = t->w;
    int nb = w->n_blocks, g = t->g0 + gi;
    int cols = t->ncol - gi * KERN_PACK_NC;
    if (cols > KERN_PACK_NC) cols = KERN_PACK_NC;
    const int8_t *A = t->A + (size_t)r * t->lda;
    const int8_t *wg = w->q8 + (size_t)g * nb * KERN_PACK_BLOCK_BYTES;
    size_t o = (size_t)r * t->ldc + (size_t)gi * KERN_PACK_NC;
    if (w->bscale && !t->C32) {
        float f[4][16];
        kern_avx2_mk_bs(MR, A, t->lda, wg, w->bscale + (size_t)g * nb * KERN_PACK_NC, nb, f);
        for (int i = 0; i < MR; i++) {
            float as = t->a_scale[r + i];
            float *c = t->C + o + (size_t)i * t->ldc;
            if (cols == KERN_PACK_NC) {
                __m256 va = _mm256_set1_ps(as);
                _mm256_storeu_ps(c, _mm256_mul_ps(_mm256_loadu_ps(f[i]), va));
                _mm256_storeu_ps(c + 8, _mm256_mul_ps(_mm256_loadu_ps(f[i] + 8), va));
            } else {
                for (int j = 0; j < cols; j++) c[j] = f[i][j] * as;
            }
        }
        return;
    }
    int32_t s[4][16];
    kern_avx2_mk_i32(MR, A, t->lda, wg, nb, s);
    for (int i = 0; i < MR; i++) {
        if (t->C32) {
            memcpy(t->C32 + o + (size_t)i * t->ldc, s[i], (size_t)cols * sizeof(int32_t));
            continue;
        }
        float as = t->a_scale[r + i];
        const float *sc = w->scale + (size_t)g * KERN_PACK_NC;
        float *c = t->C + o + (size_t)i * t->ldc;
        for (int j = 0; j < cols; j++) c[j] = ((float)s[i][j] * sc[j]) * as;
    }
}

KERN_AVX2 void kern_q8_tile_avx2(const kern_q8_tile *t) {
    for (int gi = 0; gi < t->ng; gi++) {
        int r = 0;
        for (; r + 4 <= t->mr; r += 4) kern_avx2_rows(4, t, r, gi);
        for (; r < t->mr; r++) kern_avx2_rows(1, t, r, gi);
    }
}

#else /* not x86: never selected (kern_isa_best() is scalar) */

void kern_q8_tile_avx2(const kern_q8_tile *t) { kern_q8_tile_scalar(t); }

#endif
