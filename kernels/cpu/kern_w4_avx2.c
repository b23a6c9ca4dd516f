/*
 * kern_w4_avx2.c -- the AVX2 tile kernel of the W4A8 GEMM
 * (kern_w4_tile_avx2; interface in kern_w4_int.h, numerics in kern_w4.h).
 *
 * A 64-byte load of nibbles is two pack lines (low / high nibbles), each
 * as two ymm of 8 channels x 4 inputs (kern_gemm_avx2.c's halves); the
 * codes come out with an and / a shift.
 *
 * AFFINE.  maddubs multiplies unsigned by signed bytes, which is exactly
 * u (0..15) x a: no sign trick.  A pair sum is at most 2 * 15 * 127, so
 * the 8 quads of a block add up in int16 (16 * 15 * 127 = 30480 < 32767)
 * and widen to int32 with one madd per block instead of one per quad.
 *
 * LUT.  The codes are looked up (pshufb) as the values w and as |w|, and
 * multiplied like kern_gemm_avx2.c does: maddubs(|w|, sign(a, w)), madd
 * with ones, int32 sums.
 *
 * Paths (kern_w4_int.h).  Tiles of up to KERN_W4_FUSED_MAX_MR rows
 * (decode) unpack in registers and use each line at once (the weights
 * stream once, prefetched KERN_W4_PF blocks ahead), one group at a time.
 * Larger tiles: per pass and chunk of KERN_W4_KC blocks, each group's
 * chunk is unpacked into the kern_w4_buf
 * (LUT as int8 values in kern_wpack's line layout, AFFINE as codes, with
 * the blocks' float scales) and register blocks of up to 4 rows run over
 * it; the float accumulators live in the buffer, touched once per block.
 * Plain intrinsics: at M = 64, K = 2048 (one thread, weights in L2) the
 * LUT kind runs as fast as kern_gemm_q8's assembly kernel, AFFINE about
 * 1.5 times faster (one maddubs + one add per 32 MACs).
 */
#include "kern_w4_int.h"

#include <string.h>

#if defined(__x86_64__)
#include <immintrin.h>

#define KERN_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KERN_INLINE static inline __attribute__((always_inline))
#define KERN_W4X_UNROLL _Pragma("GCC unroll 8")

/* Sum of the 32 signed bytes at p (exact). */
KERN_AVX2 KERN_INLINE int32_t kern_w4x_bsum(const int8_t *p) {
    __m256i x =
        _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)p), _mm256_set1_epi8((char)0x80));
    __m256i s = _mm256_sad_epu8(x, _mm256_setzero_si256());
    __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h = _mm_add_epi64(h, _mm_unpackhi_epi64(h, h));
    return _mm_cvtsi128_si32(h) - 32 * 128;
}

/* The 4 activation bytes at p in every 32-bit lane. */
KERN_AVX2 KERN_INLINE __m256i kern_w4x_quad(const int8_t *p) {
    int32_t v;
    memcpy(&v, p, sizeof v);
    return _mm256_set1_epi32(v);
}

/* Scales of channels 8h..8h+7 of group g, block b: LUT s1 = block scale;
 * AFFINE s1 = ws = d * sc, s2 = wm = dmin * mn. */
KERN_AVX2 KERN_INLINE void kern_w4x_scales(const kern_w4pack *w, size_t g, int b, int h, __m256 *s1,
                                           __m256 *s2) {
    size_t nb = (size_t)w->n_blocks;
    if (w->kind != KERN_W4_AFFINE) {
        *s1 = _mm256_cvtph_ps(
            _mm_loadu_si128((const __m128i *)(w->bscale + (g * nb + b) * 16 + 8 * h)));
        *s2 = *s1;
        return;
    }
    const uint8_t *p = w->scmn + (g * nb + b) * 32 + 8 * h;
    const uint16_t *q = w->dd + (g * (nb / KERN_W4_SUPER) + b / KERN_W4_SUPER) * 32 + 8 * h;
    __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)p)));
    __m256 mn =
        _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(p + 16))));
    *s1 = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)q)), sc);
    *s2 = _mm256_mul_ps(_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(q + 16))), mn);
}

/* One block of 8 channels of one row folded into f[0..7] (kern_w4.h's
 * order): s the int32 block sums, a_sum the row's block sum, as its scale. */
KERN_AVX2 KERN_INLINE void kern_w4x_fold(int aff, float *f, __m256i s, int32_t a_sum, float as,
                                         __m256 s1, __m256 s2) {
    __m256 va = _mm256_set1_ps(as), x = _mm256_cvtepi32_ps(s);
    if (aff) { /* t = S * ws - (A * wm), then f += t * as */
        __m256 m = _mm256_mul_ps(_mm256_set1_ps((float)a_sum), s2);
        x = _mm256_fmadd_ps(_mm256_fmsub_ps(x, s1, m), va, _mm256_loadu_ps(f));
    } else { /* f += S * (bs * as) */
        x = _mm256_fmadd_ps(x, _mm256_mul_ps(s1, va), _mm256_loadu_ps(f));
    }
    _mm256_storeu_ps(f, x);
}

/* Writes the tile rows r0.. (MR of them) of group gi from f. */
KERN_AVX2 KERN_INLINE void kern_w4x_store(const int MR, const kern_w4_tile *t, int r0, int gi,
                                          float f[4][16]) {
    int cols = t->ncol - gi * KERN_PACK_NC;
    if (cols > KERN_PACK_NC) cols = KERN_PACK_NC;
    for (int r = 0; r < MR; r++)
        memcpy(t->C + (size_t)(r0 + r) * t->ldc + (size_t)gi * KERN_PACK_NC, f[r],
               (size_t)cols * sizeof(float));
}

/* Fused path: MR rows (from r0) x group gi, nibbles unpacked in registers
 * as they are loaded. */
KERN_AVX2 KERN_INLINE void kern_w4x_fused(const int MR, const int aff, const kern_w4_tile *t,
                                          int r0, int gi) {
    const kern_w4pack *w = t->w;
    const int nb = w->n_blocks;
    const size_t g = (size_t)(t->g0 + gi);
    const __m256i m4 = _mm256_set1_epi8(15), ones = _mm256_set1_epi16(1);
    const __m128i l = _mm_loadu_si128((const __m128i *)w->lut);
    const __m256i tv = _mm256_broadcastsi128_si256(l);
    const __m256i ta = _mm256_broadcastsi128_si256(_mm_abs_epi8(l));
    const uint8_t *wg = w->nib + g * nb * KERN_W4_NIB_BYTES;
    const int8_t *a[4];
    const float *as[4];
    float f[4][16];
    KERN_W4X_UNROLL
    for (int r = 0; r < MR; r++) {
        a[r] = t->A + (size_t)(r0 + r) * t->lda;
        as[r] = t->a_scale + (size_t)(r0 + r) * t->lds;
    }
    memset(f, 0, sizeof f);
    for (int b = 0; b < nb; b++) {
        __m256i acc[4][2];         /* AFFINE: int16 pair sums; LUT: int32 */
        if (b + KERN_W4_PF < nb) { /* the group's stream, KERN_W4_PF blocks ahead */
            const char *pf = (const char *)(wg + (size_t)(b + KERN_W4_PF) * KERN_W4_NIB_BYTES);
            for (int i = 0; i < 4; i++) _mm_prefetch(pf + 64 * i, _MM_HINT_T0);
        }
        KERN_W4X_UNROLL
        for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
        for (int i = 0; i < 4; i++) {
            KERN_W4X_UNROLL
            for (int h = 0; h < 2; h++) {
                __m256i x = _mm256_loadu_si256(
                    (const __m256i *)(wg + (size_t)b * KERN_W4_NIB_BYTES + 64 * i + 32 * h));
                __m256i lo = _mm256_and_si256(x, m4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
                __m256i wl = lo, wh = hi, al = lo, ah = hi;
                if (!aff) { /* the LUT kind's values and their magnitudes */
                    wl = _mm256_shuffle_epi8(tv, lo), wh = _mm256_shuffle_epi8(tv, hi);
                    al = _mm256_shuffle_epi8(ta, lo), ah = _mm256_shuffle_epi8(ta, hi);
                }
                KERN_W4X_UNROLL
                for (int r = 0; r < MR; r++) {
                    __m256i a0 = kern_w4x_quad(a[r] + 32 * b + 8 * i);
                    __m256i a1 = kern_w4x_quad(a[r] + 32 * b + 8 * i + 4);
                    if (aff) {
                        __m256i p = _mm256_add_epi16(_mm256_maddubs_epi16(lo, a0),
                                                     _mm256_maddubs_epi16(hi, a1));
                        acc[r][h] = _mm256_add_epi16(acc[r][h], p);
                        continue;
                    }
                    __m256i p0 = _mm256_maddubs_epi16(al, _mm256_sign_epi8(a0, wl));
                    __m256i p1 = _mm256_maddubs_epi16(ah, _mm256_sign_epi8(a1, wh));
                    acc[r][h] =
                        _mm256_add_epi32(acc[r][h], _mm256_add_epi32(_mm256_madd_epi16(p0, ones),
                                                                     _mm256_madd_epi16(p1, ones)));
                }
            }
        }
        int32_t asum[4] = {0};
        if (aff) {
            KERN_W4X_UNROLL
            for (int r = 0; r < MR; r++)
                asum[r] = t->a_sum ? t->a_sum[(size_t)(r0 + r) * t->lds + b]
                                   : kern_w4x_bsum(a[r] + 32 * b);
        }
        KERN_W4X_UNROLL
        for (int h = 0; h < 2; h++) {
            __m256 s1, s2;
            kern_w4x_scales(w, g, b, h, &s1, &s2);
            KERN_W4X_UNROLL
            for (int r = 0; r < MR; r++) {
                __m256i s = aff ? _mm256_madd_epi16(acc[r][h], ones) : acc[r][h];
                kern_w4x_fold(aff, f[r] + 8 * h, s, asum[r], as[r][b], s1, s2);
            }
        }
    }
    kern_w4x_store(MR, t, r0, gi, f);
}

/* Buffered path: MR rows (from r0) x one group (pass column 16p..) over
 * the chunk of kc blocks from b0 unpacked in bf (LUT: int8 values, sign
 * trick and int32 sums per quad; AFFINE: codes, int16 sums per block). */
KERN_AVX2 KERN_INLINE void kern_w4x_buf(const int MR, const kern_w4_tile *t, kern_w4_buf *bf,
                                        int r0, int p, int b0, int kc) {
    const int aff = t->w->kind == KERN_W4_AFFINE;
    const __m256i ones = _mm256_set1_epi16(1);
    const int8_t *a[4];
    const float *as[4];
    KERN_W4X_UNROLL
    for (int r = 0; r < MR; r++) {
        a[r] = t->A + (size_t)(r0 + r) * t->lda + 32 * b0;
        as[r] = t->a_scale + (size_t)(r0 + r) * t->lds + b0;
    }
    for (int b = 0; b < kc; b++) {
        __m256i acc[4][2];
        KERN_W4X_UNROLL
        for (int r = 0; r < MR; r++) acc[r][0] = acc[r][1] = _mm256_setzero_si256();
        for (int q = 0; q < 8; q++) {
            const uint8_t *lq = bf->lines[0][b] + 64 * q;
            __m256i w0 = _mm256_load_si256((const __m256i *)lq);
            __m256i w1 = _mm256_load_si256((const __m256i *)(lq + 32));
            if (aff) {
                KERN_W4X_UNROLL
                for (int r = 0; r < MR; r++) {
                    __m256i av = kern_w4x_quad(a[r] + 32 * b + 4 * q);
                    acc[r][0] = _mm256_add_epi16(acc[r][0], _mm256_maddubs_epi16(w0, av));
                    acc[r][1] = _mm256_add_epi16(acc[r][1], _mm256_maddubs_epi16(w1, av));
                }
                continue;
            }
            __m256i u0 = _mm256_abs_epi8(w0), u1 = _mm256_abs_epi8(w1);
            KERN_W4X_UNROLL
            for (int r = 0; r < MR; r++) {
                __m256i av = kern_w4x_quad(a[r] + 32 * b + 4 * q);
                __m256i p0 = _mm256_maddubs_epi16(u0, _mm256_sign_epi8(av, w0));
                __m256i p1 = _mm256_maddubs_epi16(u1, _mm256_sign_epi8(av, w1));
                acc[r][0] = _mm256_add_epi32(acc[r][0], _mm256_madd_epi16(p0, ones));
                acc[r][1] = _mm256_add_epi32(acc[r][1], _mm256_madd_epi16(p1, ones));
            }
        }
        KERN_W4X_UNROLL
        for (int h = 0; h < 2; h++) {
            __m256 s1 = _mm256_load_ps(bf->wsm[0][b] + 8 * h);
            __m256 s2 = _mm256_load_ps(bf->wsm[0][b] + 16 + 8 * h);
            KERN_W4X_UNROLL
            for (int r = 0; r < MR; r++) {
                __m256i s = aff ? _mm256_madd_epi16(acc[r][h], ones) : acc[r][h];
                kern_w4x_fold(aff, bf->f[r0 + r] + 16 * p + 8 * h, s, aff ? bf->asum[r0 + r][b] : 0,
                              as[r][b], s1, s2);
            }
        }
    }
}

/* Unpacks blocks b0 .. b0+kc-1 of group gi of the tile into bf->lines[0]
 * (LUT as int8 values, AFFINE as codes) and bf->wsm[0]. */
KERN_AVX2 static void kern_w4x_unpack(const kern_w4_tile *t, kern_w4_buf *bf, int gi, int b0,
                                      int kc) {
    const kern_w4pack *w = t->w;
    const int aff = w->kind == KERN_W4_AFFINE;
    const size_t g = (size_t)(t->g0 + gi);
    const __m256i m4 = _mm256_set1_epi8(15);
    const __m256i tv = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)w->lut));
    const uint8_t *src = w->nib + (g * w->n_blocks + b0) * KERN_W4_NIB_BYTES;
    for (int b = 0; b < kc; b++) {
        uint8_t *dst = bf->lines[0][b];
        for (int i = 0; i < 4; i++)
            for (int h = 0; h < 2; h++) {
                __m256i x = _mm256_loadu_si256(
                    (const __m256i *)(src + (size_t)b * KERN_W4_NIB_BYTES + 64 * i + 32 * h));
                __m256i lo = _mm256_and_si256(x, m4);
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(x, 4), m4);
                if (!aff) lo = _mm256_shuffle_epi8(tv, lo), hi = _mm256_shuffle_epi8(tv, hi);
                _mm256_store_si256((__m256i *)(dst + 128 * i + 32 * h), lo);
                _mm256_store_si256((__m256i *)(dst + 128 * i + 64 + 32 * h), hi);
            }
        for (int h = 0; h < 2; h++) {
            __m256 s1, s2;
            kern_w4x_scales(w, g, b0 + b, h, &s1, &s2);
            _mm256_store_ps(bf->wsm[0][b] + 8 * h, s1);
            _mm256_store_ps(bf->wsm[0][b] + 16 + 8 * h, s2);
        }
    }
}

KERN_AVX2 static void kern_w4x_buf_rows(const kern_w4_tile *t, kern_w4_buf *bf, int r0, int rows,
                                        int p, int b0, int kc) {
    if (rows == 4) kern_w4x_buf(4, t, bf, r0, p, b0, kc);
    else if (rows == 3) kern_w4x_buf(3, t, bf, r0, p, b0, kc);
    else if (rows == 2) kern_w4x_buf(2, t, bf, r0, p, b0, kc);
    else kern_w4x_buf(1, t, bf, r0, p, b0, kc);
}

/* The buffered path for the whole tile: passes of up to KERN_W4_GB groups,
 * K in chunks, one group at a time, rows in register blocks of up to 4. */
KERN_AVX2 static void kern_w4x_buffered(const kern_w4_tile *t, kern_w4_buf *bf) {
    const int nb = t->w->n_blocks, aff = t->w->kind == KERN_W4_AFFINE;
    for (int gb = 0; gb < t->ng; gb += KERN_W4_GB) {
        int ngb = t->ng - gb < KERN_W4_GB ? t->ng - gb : KERN_W4_GB;
        for (int r = 0; r < t->mr; r++) memset(bf->f[r], 0, sizeof(float) * 16 * ngb);
        for (int b0 = 0; b0 < nb; b0 += KERN_W4_KC) {
            int kc = nb - b0 < KERN_W4_KC ? nb - b0 : KERN_W4_KC;
            if (aff)
                for (int r = 0; r < t->mr; r++)
                    for (int b = 0; b < kc; b++)
                        bf->asum[r][b] =
                            t->a_sum ? t->a_sum[(size_t)r * t->lds + b0 + b]
                                     : kern_w4x_bsum(t->A + (size_t)r * t->lda + 32 * (b0 + b));
            for (int p = 0; p < ngb; p++) {
                kern_w4x_unpack(t, bf, gb + p, b0, kc);
                for (int r = 0; r < t->mr; r += 4)
                    kern_w4x_buf_rows(t, bf, r, t->mr - r < 4 ? t->mr - r : 4, p, b0, kc);
            }
        }
        for (int r = 0; r < t->mr; r++) {
            int cols = t->ncol - 16 * gb < 16 * ngb ? t->ncol - 16 * gb : 16 * ngb;
            memcpy(t->C + (size_t)r * t->ldc + 16 * (size_t)gb, bf->f[r],
                   sizeof(float) * (size_t)cols);
        }
    }
}

KERN_AVX2 static void kern_w4x_fused_rows(const kern_w4_tile *t, int rows, int gi) {
#define KERN_W4X_F(AFF)                                       \
    do {                                                      \
        if (rows == 4) kern_w4x_fused(4, AFF, t, 0, gi);      \
        else if (rows == 3) kern_w4x_fused(3, AFF, t, 0, gi); \
        else if (rows == 2) kern_w4x_fused(2, AFF, t, 0, gi); \
        else kern_w4x_fused(1, AFF, t, 0, gi);                \
    } while (0)
    if (t->w->kind == KERN_W4_AFFINE) KERN_W4X_F(1);
    else KERN_W4X_F(0);
#undef KERN_W4X_F
}

/* Decode-sized tiles: the fused path, one group at a time; larger tiles:
 * the buffered path. */
KERN_AVX2 void kern_w4_tile_avx2(const kern_w4_tile *t) {
    if (t->mr > KERN_W4_FUSED_MAX_MR) {
        kern_w4_buf bf;
        kern_w4x_buffered(t, &bf);
        return;
    }
    for (int gi = 0; gi < t->ng; gi++) kern_w4x_fused_rows(t, t->mr, gi);
}

#else /* not x86-64: never selected (kern_isa_best() is scalar) */

void kern_w4_tile_avx2(const kern_w4_tile *t) { kern_w4_tile_scalar(t); }

#endif
