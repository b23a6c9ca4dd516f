/*
 * kern_gemm.h -- int8 and fp32 matrix products for the forward pass.
 *
 * Purpose.  Every linear layer of the engine is C = A . W^T with A the
 * activations [M][K] (one row per token) and W the weights [N][K] (one row
 * per output channel), both row-major and contiguous.
 *
 *   int8:  C_int32[m][n] = sum_k A[m][k] * W[n][k]   (exact int32)
 *          the scaled form applies the W8A8 epilogue
 *          C[m][n] = C_int32[m][n] * a_scale[m] * w_scale[n]   (float)
 *   fp32:  C[m][n] = sum_k A[m][k] * W[n][k]
 *
 * Variants.  kern_gemm_i8_ref / kern_gemm_f32_ref are the plain scalar
 * references.  The threaded drivers split the output into tiles of 16
 * output channels x 64 rows (so an M = 1 decode GEMM still gives every
 * worker of the pool a share of N) and run a tile kernel chosen by ISA:
 * KERN_ISA_SCALAR (portable blocked C) or KERN_ISA_AVX2 (AVX2+FMA, compiled
 * per function with target attributes and chosen at run time).
 *
 * Contracts.  int8 operands must lie in [-127, 127] (symmetric
 * quantisation never produces -128; the AVX2 kernel's sign trick needs it);
 * with that, every int8 variant is bit-exact with the reference.  K may be
 * any size >= 1 (tails are handled).  The fp32 kernels sum each output in a
 * fixed order that does not depend on M or on the tiling, so a row's result
 * is the same whatever batch it is computed in (differences from the scalar
 * reference are float rounding only).
 *
 * Threading.  Drivers run on the given pool (NULL: the calling thread).
 * Buffers must not overlap.  No failure modes.
 */
#ifndef KERN_GEMM_H
#define KERN_GEMM_H

#include <stdint.h>

#include "kern_pool.h"

typedef enum { KERN_ISA_SCALAR = 0, KERN_ISA_AVX2 = 1 } kern_isa;

/* Best ISA this CPU supports (cached). */
kern_isa kern_isa_best(void);

void kern_gemm_i8_ref(int M, int N, int K, const int8_t *A, const int8_t *W, int32_t *C);
void kern_gemm_f32_ref(int M, int N, int K, const float *A, const float *W, float *C);

/* Threaded int32 result (for testing the tile kernels bit-exactly). */
void kern_gemm_i8(kern_pool *p, kern_isa isa, int M, int N, int K, const int8_t *A,
                  const int8_t *W, int32_t *C);
/* Threaded W8A8 with the scale epilogue; C has row stride ldc (>= N). */
void kern_gemm_i8_scaled(kern_pool *p, kern_isa isa, int M, int N, int K, const int8_t *A,
                         const float *a_scale, const int8_t *W, const float *w_scale,
                         float *C, int ldc);
/* Block-scaled int8 weights (kept from Q8_0 files): W has one scale per 32
 * consecutive values of a row, bscale[n][K/32]; K must be a multiple of 32.
 *   C[m][n] = a_scale[m] * sum_b bscale[n][b] * (sum_{k in block b} A[m][k] W[n][k])
 * The int32 block sums are exact; their float accumulation order is fixed
 * per output (independent of M and tiling) but differs between the
 * reference (sequential over b) and the AVX2 kernel (8 lanes), so they
 * agree to float rounding. */
void kern_gemm_i8_bs_ref(int M, int N, int K, const int8_t *A, const float *a_scale,
                         const int8_t *W, const float *bscale, float *C);
void kern_gemm_i8_bs(kern_pool *p, kern_isa isa, int M, int N, int K, const int8_t *A,
                     const float *a_scale, const int8_t *W, const float *bscale, float *C,
                     int ldc);
/* Threaded fp32; C has row stride ldc (>= N). */
void kern_gemm_f32(kern_pool *p, kern_isa isa, int M, int N, int K, const float *A,
                   const float *W, float *C, int ldc);

#endif
