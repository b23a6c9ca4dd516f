/*
 * kern_vec.c -- attention's vector kernels (kern_vec.h): scalar references
 * and AVX2+FMA versions chosen at run time.
 */
#include "kern_vec.h"

#include "kern_gemm.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KERN_VEC_X86 1
#else
#define KERN_VEC_X86 0
#endif

float kern_dot_f32_i8_ref(const float *x, const int8_t *y, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += x[i] * (float)y[i];
    return s;
}

float kern_dot_f32_ref(const float *x, const float *y, int n) {
    float s = 0;
    for (int i = 0; i < n; i++) s += x[i] * y[i];
    return s;
}

void kern_axpy_i8_ref(float *y, float a, const int8_t *x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * (float)x[i];
}

void kern_axpy_f32_ref(float *y, float a, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += a * x[i];
}

#if KERN_VEC_X86
#define KV_AVX2 __attribute__((target("avx2,fma")))

KV_AVX2 static float kern_vec_hsum(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

KV_AVX2 static __m256 kern_vec_load_i8(const int8_t *p) {
    __m128i b = _mm_loadl_epi64((const __m128i *)p);
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(b));
}

KV_AVX2 static float kern_dot_f32_i8_avx2(const float *x, const int8_t *y, int n) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), kern_vec_load_i8(y + i), acc);
    float s = kern_vec_hsum(acc);
    for (; i < n; i++) s += x[i] * (float)y[i];
    return s;
}

KV_AVX2 static float kern_dot_f32_avx2(const float *x, const float *y, int n) {
    __m256 acc = _mm256_setzero_ps();
    int i = 0;
    for (; i + 8 <= n; i += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i), acc);
    float s = kern_vec_hsum(acc);
    for (; i < n; i++) s += x[i] * y[i];
    return s;
}

KV_AVX2 static void kern_axpy_i8_avx2(float *y, float a, const int8_t *x, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, kern_vec_load_i8(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * (float)x[i];
}

KV_AVX2 static void kern_axpy_f32_avx2(float *y, float a, const float *x, int n) {
    __m256 va = _mm256_set1_ps(a);
    int i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
    for (; i < n; i++) y[i] += a * x[i];
}
#endif

float kern_dot_f32_i8(const float *x, const int8_t *y, int n) {
#if KERN_VEC_X86
    if (kern_isa_best() == KERN_ISA_AVX2) return kern_dot_f32_i8_avx2(x, y, n);
#endif
    return kern_dot_f32_i8_ref(x, y, n);
}

float kern_dot_f32(const float *x, const float *y, int n) {
#if KERN_VEC_X86
    if (kern_isa_best() == KERN_ISA_AVX2) return kern_dot_f32_avx2(x, y, n);
#endif
    return kern_dot_f32_ref(x, y, n);
}

void kern_axpy_i8(float *y, float a, const int8_t *x, int n) {
#if KERN_VEC_X86
    if (kern_isa_best() == KERN_ISA_AVX2) {
        kern_axpy_i8_avx2(y, a, x, n);
        return;
    }
#endif
    kern_axpy_i8_ref(y, a, x, n);
}

void kern_axpy_f32(float *y, float a, const float *x, int n) {
#if KERN_VEC_X86
    if (kern_isa_best() == KERN_ISA_AVX2) {
        kern_axpy_f32_avx2(y, a, x, n);
        return;
    }
#endif
    kern_axpy_f32_ref(y, a, x, n);
}
