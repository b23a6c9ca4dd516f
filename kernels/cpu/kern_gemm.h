/*
 * kern_gemm.h -- int8 and fp32 matrix products for the forward pass.
 *
 * Purpose.  Every linear layer of the engine is C = A . W^T with A the
 * activations [M][K] (one row per token) and W the weights [N][K] (one row
 * per output channel), both row-major and contiguous.
 *
 *   int8:  C_int32[m][n] = sum_k A[m][k] * W[n][k]   (exact int32)
 *          the scaled form is W8A8 with one activation scale per (row,
 *          32-value block), a_scale[m][b] (kern_quantize_blocks, kern_ops.h):
 *          C[m][n] = sum_b S_b[m][n] * a_scale[m][b] * w_scale   (float)
 *          S_b the exact int32 sum over inputs 32b .. 32b+31, w_scale the
 *          weight's per-channel scale[n] or per-block bscale[n][b]
 *   fp32:  C[m][n] = sum_k A[m][k] * W[n][k]
 *
 * Why per block.  One scale per token row lets an outlier channel (Gemma 3
 * has them) set the step for every other value of the row.  Measured on
 * Gemma 3 270M Q4_K_M against the fp32 path (1022 teacher-forced tokens,
 * tests/bench/int8_fidelity.py): per-row scales gave the int8 path mean KL
 * 0.039 nats, top-1 89.6%; per-32-block scales 0.009, 95.0%.
 *
 * Variants.  The _ref functions are the plain scalar references.  The
 * int8 GEMM the engine runs (kern_gemm_q8) works on weights repacked at load
 * (kern_wpack, layout below) and splits the output into tasks of up to 64
 * rows x a few 16-channel groups (so an M = 1 decode GEMM still gives every
 * thread of the pool a share of N); each task runs the tile kernel of the
 * chosen ISA (kern_isa.h): portable C, AVX2, AVX-512 VNNI or AMX.
 *
 * Contracts.  int8 operands must lie in [-127, 127] (symmetric
 * quantisation never produces -128; the AVX2 sign trick needs it).  Every
 * path computes each output in the same fixed order, blocks b = 0, 1, ..
 * n_blocks-1 (the last block of a per-channel pack with K % 32 != 0 is
 * zero past K), a_scale[m][b] the activation block scale:
 *   per-channel:  f = 0; for b: f = fmaf((float)S_b, a_scale[m][b], f);  C = f * scale[n]
 *   block-scaled: f = 0; for b: f = fmaf((float)S_b, bscale[n][b] * a_scale[m][b], f);  C = f
 * (the product bscale * a_scale rounded to float first), so all paths agree
 * bit for bit, whatever M, the tiling or the thread
 * count.  The fp32 kernels likewise sum each output in a fixed order that
 * does not depend on M or on the tiling.
 *
 * Threading.  Drivers run on the given pool (NULL: the calling thread).
 * Buffers must not overlap.  No failure modes.
 */
#ifndef KERN_GEMM_H
#define KERN_GEMM_H

#include <stdint.h>

#include <stddef.h>

#include "kern_isa.h"
#include "kern_pool.h"

/* ---- references (plain loops; the definition every kernel is tested against) ---- */

void kern_gemm_i8_ref(int M, int N, int K, const int8_t *A, const int8_t *W, int32_t *C);
void kern_gemm_f32_ref(int M, int N, int K, const float *A, const float *W, float *C);
/* Block-scaled int8 weights (Q8_0): W has one scale per 32 consecutive
 * values of a row, bscale[n][K/32]; K a multiple of 32; activations one
 * scale per 32 values too, a_scale[m][K/32].
 *   C[m][n] = sum_b (bscale[n][b] * a_scale[m][b]) * (sum_{k in block b} A[m][k] W[n][k])
 * (blocks summed in order b = 0, 1, ..., plain multiply and add). */
void kern_gemm_i8_bs_ref(int M, int N, int K, const int8_t *A, const float *a_scale,
                         const int8_t *W, const float *bscale, float *C);
/* Per-channel int8 weights, scale[n]; activations a_scale[m][ceil(K/32)]:
 *   C[m][n] = scale[n] * sum_b a_scale[m][b] * (sum_{k in block b} A[m][k] W[n][k])
 * (the last block shorter when K % 32 != 0; plain multiply and add). */
void kern_gemm_i8_pc_ref(int M, int N, int K, const int8_t *A, const float *a_scale,
                         const int8_t *W, const float *scale, float *C);

/* ---- packed int8 weights ----------------------------------------------------------
 *
 * Weights are repacked once at load into one layout shared by every ISA
 * path ("VNNI-4 in groups of 16 columns"), so that forcing another ISA
 * needs no repacking and every path reads the same bytes:
 *
 *   group g = output channels 16g .. 16g+15, block b = inputs 32b .. 32b+31,
 *   quad  q = inputs 32b+4q .. 32b+4q+3 (q = 0..7);
 *   q8[((g * n_blocks + b) * 8 + q) * 64 + c * 4 + j] = W[16g + c][32b + 4q + j]
 *
 * i.e. each 64-byte line holds 4 consecutive inputs of 16 channels: one
 * zmm for vpdpbusd, one AMX B-tile row, two ymm for AVX2 maddubs; a
 * group's weights are one contiguous stream (decode reads them once,
 * front to back).  Channels past N and inputs past K are zero.
 *
 * Scales: a block-scaled pack (from Q8_0) keeps one fp16 scale per
 * (group, block, channel), bscale[(g * n_blocks + b) * 16 + c] (Q8_0 scales
 * are fp16, so this is exact; 1.0625 bytes per weight in all); a
 * per-channel pack keeps scale[n] (float, 0 past N).
 */
typedef struct kern_wpack {
    int N, K;         /* logical shape: N output channels x K inputs */
    int Kp;           /* K rounded up to 32; activation rows must be zero past K up to Kp */
    int n_groups;     /* ceil(N / 16) */
    int n_blocks;     /* Kp / 32 */
    int8_t *q8;       /* packed values, n_groups * n_blocks * 512 bytes, 64-byte aligned */
    uint16_t *bscale; /* block-scaled: fp16 bits [n_groups][n_blocks][16]; NULL for per-channel */
    float *scale;     /* per-channel: [n_groups * 16] (0 past N); NULL for block-scaled */
} kern_wpack;

/* Pack W [N][K] (row-major int8 in [-127, 127]) with either per-channel
 * scales scale[N] or block scales bscale[N][K/32] (K a multiple of 32; each
 * rounded to fp16 -- exact for Q8_0 scales); exactly one of them non-NULL.
 * Returns 0, or KERN_EINVAL / KERN_ENOMEM with a message in err (bad shape, out of memory); on
 * failure *w is left empty (kern_wpack_free is safe). */
int kern_wpack_init(kern_wpack *w, int N, int K, const int8_t *W, const float *scale,
                    const float *bscale, char *err, size_t errlen);
void kern_wpack_free(kern_wpack *w);

/* The allocation behind packed values (free with free()): 64-byte aligned;
 * from 2 MiB up, 2 MiB aligned and advised into transparent huge pages, as
 * decode streams every weight byte once per step and huge pages take the
 * page walks out of that stream (measured +4-6% decode tok/s on llama-1b).
 * The advice may be refused (THP "never"): the memory is ordinary then.
 * kern_membw allocates its buffer the same way so the roofline compares
 * like with like.  NULL when out of memory. */
void *kern_huge_alloc(size_t bytes);
/* Row n of the packed weights as floats, times mul: block-scaled
 * out[k] = (float)q * bscale * mul, per-channel out[k] = (float)q *
 * (scale[n] * mul), in that order (so a tied int8 embedding looked up from
 * the output projection's pack equals the row-major lookup bit for bit).
 * out holds K floats; 0 <= n < N. */
void kern_wpack_row_f32(const kern_wpack *w, int n, float mul, float *out);
/* Bytes the pack holds (values + scales). */
size_t kern_wpack_bytes(const kern_wpack *w);

/* C[m][n] (row stride ldc >= N) for m < M, n < N:
 *   per-channel:  scale[n] * sum_b a_scale[m][b] * (int32 sum over block b)
 *   block-scaled: sum_b (bscale[n][b] * a_scale[m][b]) * (int32 sum over block b)
 * in the order given at the top of this file (bit-identical on every ISA
 * path; within float rounding of kern_gemm_i8_pc_ref / kern_gemm_i8_bs_ref,
 * which sum blocks without fma).  A is [M][lda] int8 in [-127, 127],
 * lda >= w->Kp, bytes K..Kp-1 of each row zero; a_scale[m * lds + b] the
 * scale of row m's block b (b < w->n_blocks, lds >= w->n_blocks), as
 * kern_quantize_blocks writes them.  isa above kern_isa_best() is lowered
 * to it.  Runs on pool p (NULL: calling thread). */
void kern_gemm_q8(kern_pool *p, kern_isa isa, int M, const int8_t *A, int lda, const float *a_scale,
                  int lds, const kern_wpack *w, float *C, int ldc);
/* ---- the general form: activations with their block sums, outputs anywhere ----
 *
 * kern_gemm_q8 and kern_gemm_w4 (kern_w4.h) are kern_gemm_q8_run /
 * kern_gemm_w4_run with a dense output and no block sums.  The general form
 * takes the activations' block sums (kern_quantize_blocks_sum writes them
 * as it quantises; the AVX-512 kernels would otherwise recompute them per
 * tile) and puts each output row where the caller wants it: rows of one
 * matrix, or rows[m] anywhere (the logits of a batch go straight into each
 * request's own row), or nowhere but a running argmax (greedy decode needs
 * only the next token, not 262,144 logits).  Every value is the one
 * kern_gemm_q8 computes; only where it is written changes.  The tile
 * kernels write into a tile-sized buffer on the task's stack when rows or
 * amax are given, and the task copies / reduces it from there. */
typedef struct kern_gemm_act {
    int M;                /* rows */
    const int8_t *A;      /* [M][lda] int8 in [-127, 127], zero past K up to the pack's Kp */
    int lda;              /* row stride of A in bytes */
    const float *a_scale; /* [M][lds] block scales */
    int lds;              /* row stride of a_scale and a_sum */
    const int32_t *a_sum; /* optional [M][lds]: block sums of A (kern_quantize_blocks_sum) */
} kern_gemm_act;

typedef struct kern_gemm_out {
    float *C;           /* dense: output (m, n) at C[m * ldc + n] (when rows is NULL) */
    int ldc;            /* row stride of C */
    float *const *rows; /* or: output (m, n) at rows[m][col0 + n]; rows[m] NULL: not written */
    uint64_t *amax;     /* optional [M]: amax[m] = max(amax[m], kern_amax_key(output (m, n),
                           * col0 + n)) over the row's outputs */
    int col0;           /* column of output 0 in rows[m] and in the argmax index */
} kern_gemm_out;

/* Argmax keys: the largest key belongs to the largest value (NaN counts as
 * -inf, -0 as +0) and among equal values to the lowest index, so max-merging
 * keys over any split of a row gives kern_argmax's answer.  A zeroed key is
 * below every real one; kern_amax_key_index(0) is 0 (kern_argmax of a row
 * of NaN / -inf is index 0 too). */
uint64_t kern_amax_key(float v, int32_t idx);
int32_t kern_amax_key_index(uint64_t key);

/* C = A . W^T as kern_gemm_q8, outputs as *out says.  Returns 0, or -1 when
 * out is inconsistent (neither C nor rows nor amax). */
int kern_gemm_q8_run(kern_pool *p, kern_isa isa, const kern_gemm_act *a, const kern_wpack *w,
                     const kern_gemm_out *out);

/* Raw int32 sums C[m][n] = sum_k A[m][k] W[n][k] of a per-channel pack
 * (bit-exact with kern_gemm_i8_ref on every path); a block-scaled pack gives
 * the sums with every block scale taken as 1. */
void kern_gemm_q8_i32(kern_pool *p, kern_isa isa, int M, const int8_t *A, int lda,
                      const kern_wpack *w, int32_t *C, int ldc);

/* ---- fp32 (the reference-precision path) ---- */

/* Threaded fp32; C has row stride ldc (>= N). */
void kern_gemm_f32(kern_pool *p, kern_isa isa, int M, int N, int K, const float *A, const float *W,
                   float *C, int ldc);

#endif
