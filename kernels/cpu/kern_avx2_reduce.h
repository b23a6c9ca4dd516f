/*
 * kern_avx2_reduce.h -- internal to kernels/cpu: horizontal reductions of
 * one ymm register, shared by the AVX2 kernels (kern_ops_avx2.c,
 * kern_attn.c, kern_gemm_f32.c).  Include only inside an x86 section
 * after <immintrin.h>; the functions carry their own target attribute, so
 * they inline into any caller compiled for AVX2 or more.
 *
 * Order: the high 128-bit half is added to the low one, then lanes (0+2,
 * 1+3), then (0+1): fixed, so results are reproducible.  Pure functions,
 * no state.
 */
#ifndef KERN_AVX2_REDUCE_H
#define KERN_AVX2_REDUCE_H

#include <immintrin.h>

#define KERN_REDUCE_FN static inline __attribute__((target("avx2"), always_inline))

/* Sum of the 8 float lanes. */
KERN_REDUCE_FN float kern_hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Largest of the 8 float lanes. */
KERN_REDUCE_FN float kern_hmax_ps(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Sum of the 4 double lanes. */
KERN_REDUCE_FN double kern_hsum_pd(__m256d v) {
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
}

#undef KERN_REDUCE_FN

#endif
