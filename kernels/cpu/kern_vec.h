/*
 * kern_vec.h -- small vector kernels for attention: dot products of a float
 * query with int8 or float keys, and accumulation of scaled int8 or float
 * value rows.
 *
 * Each has a scalar reference (_ref) and a dispatched version that uses
 * AVX2+FMA when the CPU has it (runtime check).  The dispatched versions
 * sum in a fixed order (8 lanes, then a fixed horizontal reduction, then
 * the tail), so results do not depend on the caller's batching; they differ
 * from the references by float rounding only.  No failure modes; n >= 0.
 */
#ifndef KERN_VEC_H
#define KERN_VEC_H

#include <stdint.h>

float kern_dot_f32_i8_ref(const float *x, const int8_t *y, int n);
float kern_dot_f32_ref(const float *x, const float *y, int n);
void kern_axpy_i8_ref(float *y, float a, const int8_t *x, int n);  /* y += a * x */
void kern_axpy_f32_ref(float *y, float a, const float *x, int n);

float kern_dot_f32_i8(const float *x, const int8_t *y, int n);
float kern_dot_f32(const float *x, const float *y, int n);
void kern_axpy_i8(float *y, float a, const int8_t *x, int n);
void kern_axpy_f32(float *y, float a, const float *x, int n);

#endif
