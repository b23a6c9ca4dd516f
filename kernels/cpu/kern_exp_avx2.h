/*
 * kern_exp_avx2.h -- internal to kernels/cpu: the one home of e^x on 8
 * float lanes, shared by the AVX2 kernels (kern_ops_avx2.c: glu, gelu,
 * softmax; kern_attn.c: the online softmax of attention).  Include only
 * inside an x86 section after <immintrin.h>; the functions carry their own
 * target attribute and inline into any AVX2+FMA caller.
 *
 * Method.  Cephes-style range reduction: n = round(x log2 e), r = x - n ln2
 * (ln2 in two parts), e^r by a degree-6 polynomial (about 1 ulp), then
 * times 2^n.  kern_exp_core_ps is that reduction and polynomial; the two
 * variants below differ only in their clamps and edges.
 *
 * Two variants, on purpose.
 *   kern_exp_ps       full float range: inputs below -87.33654 give 0, above
 *                     88.72283 give inf, NaN propagates; 2^n applied as two
 *                     exact power-of-two factors so n = -126..128 needs no
 *                     special case.  The element-wise ops use it.
 *   kern_exp_attn_ps  attention's: inputs are score - running max (<= 0, or
 *                     -inf for masked keys); lanes below -87 (and -inf) give
 *                     exactly 0, inputs are clamped to [-87, 88] and 2^n is
 *                     one factor (n stays in -126..127 there).
 * On [-87, 88] both return the same bits (same reduction, and splitting 2^n
 * into two exact factors rounds once, like one factor).  They differ for
 * x in [-87.34, -87): attention gives 0, the ops a tiny positive value.
 * Moving attention onto kern_exp_ps would change its output bits whenever a
 * score trails the max by 87..87.34 (and turn a NaN gap into NaN instead of
 * e^-87), and every stored attention result and bit-exact invariance test
 * was made with the attention variant, so both stay, here, side by side.
 */
#ifndef KERN_EXP_AVX2_H
#define KERN_EXP_AVX2_H

#include <immintrin.h>
#include <math.h>

#define KERN_EXP_FN static inline __attribute__((target("avx2,fma"), always_inline))

/* e^r by the polynomial, for xc already clamped; *n gets round(xc log2 e). */
KERN_EXP_FN __m256 kern_exp_core_ps(__m256 xc, __m256 *n) {
    __m256 fx = _mm256_round_ps(_mm256_mul_ps(xc, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), xc);
    r = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    *n = fx;
    return _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
}

/* e^x per lane over the whole float range (see the file comment). */
KERN_EXP_FN __m256 kern_exp_ps(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.72283f), lo = _mm256_set1_ps(-87.33654f);
    /* second operand returned for NaN: x's NaN propagates */
    __m256 xc = _mm256_max_ps(lo, _mm256_min_ps(hi, x));
    __m256 n;
    __m256 p = kern_exp_core_ps(xc, &n);
    /* 2^n = 2^e1 * 2^e2 with e1 = n >> 1, e2 = n - e1, both normal */
    __m256i ni = _mm256_cvtps_epi32(n);
    __m256i e1 = _mm256_srai_epi32(ni, 1), e2 = _mm256_sub_epi32(ni, e1);
    const __m256i bias = _mm256_set1_epi32(127);
    __m256 s1 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e1, bias), 23));
    __m256 s2 = _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(e2, bias), 23));
    p = _mm256_mul_ps(_mm256_mul_ps(p, s1), s2);
    p = _mm256_andnot_ps(_mm256_cmp_ps(x, lo, _CMP_LT_OQ), p);
    return _mm256_blendv_ps(p, _mm256_set1_ps(INFINITY), _mm256_cmp_ps(x, hi, _CMP_GT_OQ));
}

/* Attention's e^x: lanes below -87 (and -inf) give exactly 0 (file comment). */
KERN_EXP_FN __m256 kern_exp_attn_ps(__m256 x) {
    __m256 under = _mm256_cmp_ps(x, _mm256_set1_ps(-87.0f), _CMP_LT_OQ);
    x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.0f)), _mm256_set1_ps(88.0f));
    __m256 n;
    __m256 y = kern_exp_core_ps(x, &n);
    __m256i e =
        _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    return _mm256_andnot_ps(under, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}

#endif
