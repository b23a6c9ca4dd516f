/*
 * kern_ops_avx2.c -- AVX2 + FMA row kernels of the element-wise ops
 * (kern_ops_rows_avx2; table in kern_ops_int.h, numerics in kern_ops.h).
 *
 * Each kernel walks its row in 8-float vectors (32 for quantisation) and
 * finishes a tail shorter than a vector with the scalar arithmetic; the
 * split depends only on the row length, so a row always takes the same
 * path.  Reductions (max, sums) keep fixed lanes and a fixed horizontal
 * order.  exp is kern_exp_ps (kern_exp_avx2.h): a Cephes-style range
 * reduction with a degree-6 polynomial, about 1 ulp; inputs below -87.34
 * give 0 and above 88.72 give inf.
 * Everything is compiled per function for AVX2 (the build is baseline
 * x86-64) and called only when kern_isa_best() reports AVX2.
 */
#include "kern_ops_int.h"

#if KERN_OPS_X86
#include <immintrin.h>
#include <float.h>
#include <math.h>
#include <string.h>

#include "kern_avx2_reduce.h"
#include "kern_exp_avx2.h"

#define KERN_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KERN_INLINE static inline __attribute__((always_inline))

/* ---- quantisation ---- */

/* 8 floats * inv -> 8 int32, round-half-even, clamped to [-127, 127]. */
KERN_AVX2 KERN_INLINE __m256i kern_q8_lanes(const float *x, __m256 inv) {
    __m256 v = _mm256_round_ps(_mm256_mul_ps(_mm256_loadu_ps(x), inv),
                               _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256i i = _mm256_cvtps_epi32(v);
    i = _mm256_min_epi32(i, _mm256_set1_epi32(127));
    return _mm256_max_epi32(i, _mm256_set1_epi32(-127));
}

KERN_AVX2 static void kern_quant_row_avx2(const float *x, int K, int8_t *q, int pad, float *scale) {
    memset(q + K, 0, (size_t)pad);
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m0 = _mm256_setzero_ps(), m1 = m0, m2 = m0, m3 = m0;
    int k = 0;
    for (; k + 32 <= K; k += 32) {
        m0 = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)), m0);
        m1 = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + k + 8)), m1);
        m2 = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + k + 16)), m2);
        m3 = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + k + 24)), m3);
    }
    for (; k + 8 <= K; k += 8)
        m0 = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + k)), m0);
    float amax = kern_hmax_ps(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
    for (; k < K; k++) {
        float a = fabsf(x[k]);
        if (a > amax) amax = a;
    }
    /* amax 0, or so small that inv overflows: a zero row */
    float inv = 127.0f / amax;
    if (!(inv <= FLT_MAX)) {
        *scale = 0;
        memset(q, 0, (size_t)K);
        return;
    }
    *scale = amax / 127.0f;
    __m256 vi = _mm256_set1_ps(inv);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    k = 0;
    for (; k + 32 <= K; k += 32) {
        __m256i a = _mm256_packs_epi32(kern_q8_lanes(x + k, vi), kern_q8_lanes(x + k + 8, vi));
        __m256i b =
            _mm256_packs_epi32(kern_q8_lanes(x + k + 16, vi), kern_q8_lanes(x + k + 24, vi));
        __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(a, b), order);
        _mm256_storeu_si256((__m256i *)(q + k), bytes);
    }
    for (; k + 8 <= K; k += 8) {
        __m256i i = kern_q8_lanes(x + k, vi);
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(i), _mm256_extracti128_si256(i, 1));
        _mm_storel_epi64((__m128i *)(q + k), _mm_packs_epi16(w, w));
    }
    for (; k < K; k++) {
        float v = nearbyintf(x[k] * inv);
        if (v > 127) v = 127;
        else if (!(v >= -127)) v = -127; /* NaN too, as the vector path */
        q[k] = (int8_t)v;
    }
}

/* One full block of 32 floats (kern_quantize_blocks): the row kernel's
 * arithmetic for K = 32, with the max chained so that a NaN lane is skipped
 * exactly as there. */
KERN_AVX2 KERN_INLINE void kern_quant_block32_avx2(const float *x, int8_t *q, float *scale,
                                                   int32_t *sum) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x)), _mm256_setzero_ps());
    m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 8)), m);
    m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 16)), m);
    m = _mm256_max_ps(_mm256_andnot_ps(sign, _mm256_loadu_ps(x + 24)), m);
    float amax = kern_hmax_ps(m);
    float inv = 127.0f / amax;
    if (!(inv <= FLT_MAX)) { /* amax 0, or so small that inv overflows: a zero block */
        *scale = 0;
        memset(q, 0, 32);
        if (sum) *sum = 0;
        return;
    }
    *scale = amax / 127.0f;
    __m256 vi = _mm256_set1_ps(inv);
    __m256i a = _mm256_packs_epi32(kern_q8_lanes(x, vi), kern_q8_lanes(x + 8, vi));
    __m256i b = _mm256_packs_epi32(kern_q8_lanes(x + 16, vi), kern_q8_lanes(x + 24, vi));
    __m256i bytes = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(a, b),
                                                _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)q, bytes);
    if (!sum) return;
    /* sum of the signed bytes: sad of the bytes + 128 against zero, minus 32 * 128 */
    __m256i s = _mm256_sad_epu8(_mm256_xor_si256(bytes, _mm256_set1_epi8((char)0x80)),
                                _mm256_setzero_si256());
    __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    h = _mm_add_epi64(h, _mm_unpackhi_epi64(h, h));
    *sum = _mm_cvtsi128_si32(h) - 32 * 128;
}

KERN_AVX2 static void kern_quant_blocks_avx2(const float *x, int K, int8_t *q, int pad,
                                             float *scale, int32_t *sum) {
    int k = 0, b = 0;
    for (; k + 32 <= K; k += 32, b++)
        kern_quant_block32_avx2(x + k, q + k, scale + b, sum ? sum + b : NULL);
    if (k < K) {
        kern_quant_row_avx2(x + k, K - k, q + k, 0, scale + b);
        if (sum) {
            int32_t s = 0;
            for (int i = k; i < K; i++) s += q[i];
            sum[b] = s;
        }
    }
    memset(q + K, 0, (size_t)pad);
}

/* ---- RMSNorm ---- */

KERN_AVX2 static void kern_rmsnorm_row_avx2(const float *x, int n, const float *w, float eps,
                                            float *y) {
    __m256d a0 = _mm256_setzero_pd(), a1 = a0, a2 = a0, a3 = a0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 u = _mm256_loadu_ps(x + i), v = _mm256_loadu_ps(x + i + 8);
        __m256d u0 = _mm256_cvtps_pd(_mm256_castps256_ps128(u));
        __m256d u1 = _mm256_cvtps_pd(_mm256_extractf128_ps(u, 1));
        __m256d v0 = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
        __m256d v1 = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
        a0 = _mm256_fmadd_pd(u0, u0, a0);
        a1 = _mm256_fmadd_pd(u1, u1, a1);
        a2 = _mm256_fmadd_pd(v0, v0, a2);
        a3 = _mm256_fmadd_pd(v1, v1, a3);
    }
    double ss = kern_hsum_pd(_mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3)));
    for (; i < n; i++) ss += (double)x[i] * x[i];
    float inv = 1.0f / sqrtf((float)(ss / n) + eps);
    __m256 vi = _mm256_set1_ps(inv);
    i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vi),
                                              _mm256_loadu_ps(w + i)));
    for (; i < n; i++) y[i] = x[i] * inv * w[i];
}

/* ---- RoPE ---- */

KERN_AVX2 static void kern_rotate_row_avx2(float *row, int n_head, int head_dim, const float *c,
                                           const float *s, kern_rope_type type) {
    int half = head_dim / 2;
    if (type == KERN_ROPE_NEOX) {
        for (int h = 0; h < n_head; h++) {
            float *v = row + (size_t)h * head_dim;
            int i = 0;
            for (; i + 8 <= half; i += 8) {
                __m256 a = _mm256_loadu_ps(v + i), b = _mm256_loadu_ps(v + half + i);
                __m256 vc = _mm256_loadu_ps(c + i), vs = _mm256_loadu_ps(s + i);
                _mm256_storeu_ps(v + i, _mm256_sub_ps(_mm256_mul_ps(a, vc), _mm256_mul_ps(b, vs)));
                _mm256_storeu_ps(v + half + i,
                                 _mm256_add_ps(_mm256_mul_ps(a, vs), _mm256_mul_ps(b, vc)));
            }
            for (; i < half; i++) {
                float x0 = v[i], x1 = v[i + half];
                v[i] = x0 * c[i] - x1 * s[i];
                v[i + half] = x0 * s[i] + x1 * c[i];
            }
        }
        return;
    }
    /* pairs: cos/sin duplicated per pair, then x*c -+ swap(x)*s with addsub */
    float cd[KERN_ROPE_MAX_DIM], sd[KERN_ROPE_MAX_DIM];
    int body = half & ~3; /* pairs covered by whole vectors (4 pairs each) */
    for (int i = 0; i < body; i++) {
        cd[2 * i] = cd[2 * i + 1] = c[i];
        sd[2 * i] = sd[2 * i + 1] = s[i];
    }
    for (int h = 0; h < n_head; h++) {
        float *v = row + (size_t)h * head_dim;
        for (int i = 0; i < 2 * body; i += 8) {
            __m256 xv = _mm256_loadu_ps(v + i);
            __m256 sw = _mm256_permute_ps(xv, 0xB1);
            __m256 xc = _mm256_mul_ps(xv, _mm256_loadu_ps(cd + i));
            __m256 ss = _mm256_mul_ps(sw, _mm256_loadu_ps(sd + i));
            _mm256_storeu_ps(v + i, _mm256_addsub_ps(xc, ss));
        }
        for (int i = body; i < half; i++) {
            float x0 = v[2 * i], x1 = v[2 * i + 1];
            v[2 * i] = x0 * c[i] - x1 * s[i];
            v[2 * i + 1] = x0 * s[i] + x1 * c[i];
        }
    }
}

/* ---- gated activations ---- */

KERN_AVX2 static void kern_glu_row_avx2(const float *g, const float *u, int F, float *h,
                                        kern_glu_act act) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int i = 0;
    if (act == KERN_GLU_GELU_TANH) {
        /* 0.5 x (1 + tanh(y)) = x / (1 + e^(-2y)), y = sqrt(2/pi) (x + 0.044715 x^3) */
        const __m256 k2 = _mm256_set1_ps(-2.0f * 0.7978845608028654f);
        const __m256 c3 = _mm256_set1_ps(0.044715f);
        for (; i + 8 <= F; i += 8) {
            __m256 x = _mm256_loadu_ps(g + i);
            __m256 x3 = _mm256_mul_ps(_mm256_mul_ps(x, x), x);
            __m256 e = kern_exp_ps(_mm256_mul_ps(k2, _mm256_fmadd_ps(c3, x3, x)));
            __m256 a = _mm256_div_ps(x, _mm256_add_ps(one, e));
            _mm256_storeu_ps(h + i, _mm256_mul_ps(a, _mm256_loadu_ps(u + i)));
        }
        for (; i < F; i++) {
            float x = g[i];
            float y = 0.7978845608028654f * (x + 0.044715f * x * x * x);
            h[i] = 0.5f * x * (1.0f + tanhf(y)) * u[i];
        }
        return;
    }
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (; i + 8 <= F; i += 8) {
        __m256 x = _mm256_loadu_ps(g + i);
        __m256 e = kern_exp_ps(_mm256_xor_ps(x, sign));
        __m256 a = _mm256_div_ps(x, _mm256_add_ps(one, e));
        _mm256_storeu_ps(h + i, _mm256_mul_ps(a, _mm256_loadu_ps(u + i)));
    }
    for (; i < F; i++) h[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

/* ---- residual add ---- */

KERN_AVX2 static void kern_add_row_avx2(float *y, const float *x, int n) {
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(y + i), _mm256_loadu_ps(x + i)));
    for (; i < n; i++) y[i] += x[i];
}

/* ---- softmax ---- */

KERN_AVX2 static void kern_softmax_avx2(float *x, int n) {
    if (n <= 0) return;
    int i = 0;
    float mx = x[0];
    if (n >= 8) {
        __m256 m = _mm256_loadu_ps(x);
        for (i = 8; i + 8 <= n; i += 8) m = _mm256_max_ps(m, _mm256_loadu_ps(x + i));
        mx = kern_hmax_ps(m);
    }
    for (; i < n; i++)
        if (x[i] > mx) mx = x[i];
    __m256 vm = _mm256_set1_ps(mx), acc = _mm256_setzero_ps();
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 e = kern_exp_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), vm));
        _mm256_storeu_ps(x + i, e);
        acc = _mm256_add_ps(acc, e);
    }
    float sum = kern_hsum_ps(acc);
    for (; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    __m256 vi = _mm256_set1_ps(inv);
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vi));
    for (; i < n; i++) x[i] *= inv;
}

/* ---- scan ---- */

/* 16 products per step, compared with thr (ordered: NaN never passes). */
KERN_AVX2 static int kern_scan_at_least_avx2(const float *x, int from, int n, float mul,
                                             float thr) {
    const __m256 vm = _mm256_set1_ps(mul), vt = _mm256_set1_ps(thr);
    int i = from;
    for (; i + 16 <= n; i += 16) {
        __m256 a = _mm256_cmp_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vm), vt, _CMP_GE_OQ);
        __m256 b = _mm256_cmp_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i + 8), vm), vt, _CMP_GE_OQ);
        int ma = _mm256_movemask_ps(a), mb = _mm256_movemask_ps(b);
        if (ma | mb)
            return i + (ma ? __builtin_ctz((unsigned)ma) : 8 + __builtin_ctz((unsigned)mb));
    }
    for (; i < n; i++)
        if (x[i] * mul >= thr) return i;
    return n;
}

/* ---- argmax ---- */

/* Per lane the first index of the lane's largest value (NaN made -inf, so
 * the comparison is strict and never true for NaN), then across lanes the
 * largest value and, among lanes holding it, the lowest index: the first
 * occurrence of the maximum, as the scalar scan finds it. */
KERN_AVX2 static int kern_argmax_avx2(const float *x, int n) {
    if (n < 16) {
        int best = 0;
        float bv = x[0] == x[0] ? x[0] : -INFINITY;
        for (int i = 1; i < n; i++)
            if (x[i] > bv) bv = x[i], best = i;
        return best;
    }
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 v0 = _mm256_loadu_ps(x);
    __m256 bv = _mm256_blendv_ps(v0, ninf, _mm256_cmp_ps(v0, v0, _CMP_UNORD_Q));
    __m256i bi = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7), idx = bi;
    const __m256i eight = _mm256_set1_epi32(8);
    int i = 8;
    for (; i + 8 <= n; i += 8) {
        idx = _mm256_add_epi32(idx, eight);
        __m256 v = _mm256_loadu_ps(x + i);
        __m256 gt = _mm256_cmp_ps(v, bv, _CMP_GT_OQ); /* false for NaN */
        bv = _mm256_blendv_ps(bv, v, gt);
        bi = _mm256_castps_si256(
            _mm256_blendv_ps(_mm256_castsi256_ps(bi), _mm256_castsi256_ps(idx), gt));
    }
    float val[8];
    int32_t at[8];
    _mm256_storeu_ps(val, bv);
    _mm256_storeu_si256((__m256i *)at, bi);
    int best = at[0];
    float bestv = val[0];
    for (int l = 1; l < 8; l++)
        if (val[l] > bestv || (val[l] == bestv && at[l] < best)) bestv = val[l], best = at[l];
    for (; i < n; i++)
        if (x[i] > bestv) bestv = x[i], best = i;
    return best;
}

const kern_ops_rowfns kern_ops_rows_avx2 = {
    .quant = kern_quant_row_avx2,
    .quant_blocks = kern_quant_blocks_avx2,
    .rmsnorm = kern_rmsnorm_row_avx2,
    .rotate = kern_rotate_row_avx2,
    .glu = kern_glu_row_avx2,
    .add = kern_add_row_avx2,
    .softmax = kern_softmax_avx2,
    .argmax = kern_argmax_avx2,
    .scan_at_least = kern_scan_at_least_avx2,
};
#endif
