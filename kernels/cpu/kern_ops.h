/*
 * kern_ops.h -- the forward pass's element-wise operations: per-row and
 * per-32-value-block int8 quantisation, RMSNorm, rotary embedding (RoPE), gated activations (GLU),
 * residual add and softmax.
 *
 * Purpose.  Between two GEMMs every token row goes through one or more of
 * these; in a prefill chunk that is T rows of 2048..16384 floats per op per
 * layer, so they are vectorised (AVX2 + FMA, chosen at run time) and split
 * over the thread pool; for a decode step (a handful of rows) they stay on
 * the calling thread, since waking the pool would cost more than the work.
 *
 * Variants.  Each op has a plain scalar reference (_ref, the definition the
 * other paths are tested against) and a dispatched version taking a pool
 * (NULL: calling thread) and an ISA (kern_isa.h; a level above
 * kern_isa_best() is lowered to it; every level from AVX2 up runs the AVX2
 * code, KERN_ISA_SCALAR the portable C).
 *
 * Data layout.  Matrices are row-major float rows with a row stride in
 * elements (ld*); quantised rows are ldq bytes apart.
 *
 * Numerics (per op, dispatched vs _ref):
 *   quantize  bit-identical on every path (inv = 127 / amax once per row,
 *             or per block of 32 for the block quantiser, q =
 *             round-half-even(x * inv) clamped to [-127, 127]).
 *   rmsnorm   sum of squares in double in a fixed lane order; the scaling
 *             y = (x * inv) * w is the reference's; differs only by the
 *             rounding of that sum.
 *   rope      same inv_freq, angle and libm sinf/cosf values as the
 *             reference (inv_freq tabled once per call, cos/sin once per
 *             token and shared by the heads); the rotation uses the same
 *             operations, so results match to the last bit with GCC.
 *   glu/softmax  exp from a vectorised polynomial (0 below e^-87.3, inf
 *             above e^88.7); SiLU measured within 4 ulp of the exact value
 *             (the libm reference: 3 ulp).  GELU-tanh is computed as
 *             x * sigmoid(2y), the same function as 0.5 x (1 + tanh(y))
 *             without the reference's cancellation for negative x.
 *   add       bit-identical.
 * INVARIANCE: a row's result depends only on that row's inputs and the ISA,
 * never on how many rows are in the call, how they are split into tasks or
 * the thread count (the per-row code is chosen by ISA only; threads take
 * whole rows).  The engine relies on this (batching and chunking tests
 * compare bits).
 *
 * Threading and ownership.  The ops keep no state; callers own every
 * buffer.  The matrix ops run on the pool when the call has at least two
 * rows and KERN_OPS_POOL_MIN floats of work, else on the caller.  Buffers
 * must not overlap except where an op says in place.  Inputs are assumed
 * finite.  No failure modes; M <= 0 or a row length <= 0 does nothing
 * (except K = 0 for quantisation: zeroed rows, scale 0, as the reference).
 */
#ifndef KERN_OPS_H
#define KERN_OPS_H

#include <stdint.h>

#include "kern_isa.h"
#include "kern_pool.h"

/* Calls with less work than this (rows x row length in floats, GLU
 * weighted x4 for its exp and division, RoPE plus its sin/cos) stay on the
 * caller thread.  Measured on Zen 3 with a 2-thread pool (idle round trip
 * about 1-2 us): the pool breaks even near 16K floats (2-3 us of AVX2
 * work) and wins clearly from 32K; a busy machine, where waking a worker
 * can take far longer, argues for the higher end. */
#define KERN_OPS_POOL_MIN 32768

/* Rotary layouts: pairs (x[2i], x[2i+1]) (llama.cpp "normal") or halves
 * (x[i], x[i + head_dim/2]) (NeoX, gemma). */
typedef enum { KERN_ROPE_NORM = 0, KERN_ROPE_NEOX = 1 } kern_rope_type;

/* Gate activations of kern_glu. */
typedef enum { KERN_GLU_SILU = 0, KERN_GLU_GELU_TANH = 1 } kern_glu_act;

/* x: M rows of K floats (stride ldx) -> q rows ldq >= K bytes apart (bytes
 * K..ldq-1 zeroed) and scale[m] = max|x[m]| / 127; q = x * (127 / max|x|)
 * rounded half to even, clamped to [-127, 127].  A row whose 127 / max|x|
 * overflows (all zeros, or max|x| < ~3.7e-37) gets scale 0 and zeros.  A NaN
 * element is skipped by the max and quantised to -127 (defined, same on
 * every path). */
void kern_quantize_rows_ref(int M, int K, const float *x, int ldx, int8_t *q, int ldq,
                            float *scale);
void kern_quantize_rows(kern_pool *p, kern_isa isa, int M, int K, const float *x, int ldx,
                        int8_t *q, int ldq, float *scale);

/* The int8 GEMM's activation quantiser (kern_gemm.h): each row is cut into
 * blocks of KERN_QBLOCK values (the last one shorter when K % 32 != 0) and
 * every block is quantised exactly as kern_quantize_rows quantises a row of
 * those values: scale[m * lds + b] = max|x[m][32b .. 32b+31]| / 127 for
 * b < ceil(K / 32) (lds >= that), q rounded half to even into [-127, 127],
 * a zero block gets scale 0 and zeros.  q rows are ldq >= K bytes apart,
 * bytes K..ldq-1 zeroed.  One scale per block keeps an outlier channel from
 * crushing the rest of the row (Gemma 3's activations have them). */
#define KERN_QBLOCK 32
void kern_quantize_blocks_ref(int M, int K, const float *x, int ldx, int8_t *q, int ldq,
                              float *scale, int lds);
void kern_quantize_blocks(kern_pool *p, kern_isa isa, int M, int K, const float *x, int ldx,
                          int8_t *q, int ldq, float *scale, int lds);
/* The same, and sum[m * lds + b] = the sum of the int8 values of block b
 * (exact; the packed GEMMs take them as kern_gemm_act.a_sum so that no tile
 * recomputes them). */
void kern_quantize_blocks_sum(kern_pool *p, kern_isa isa, int M, int K, const float *x, int ldx,
                              int8_t *q, int ldq, float *scale, int32_t *sum, int lds);

/* y[m] = x[m] * (1 / sqrt(mean(x[m]^2) + eps)) * w over n floats per row;
 * y may equal x (in place), otherwise they must not overlap. */
void kern_rmsnorm_ref(int M, int n, const float *x, int ldx, const float *w, float eps, float *y,
                      int ldy);
void kern_rmsnorm(kern_pool *p, kern_isa isa, int M, int n, const float *x, int ldx, const float *w,
                  float eps, float *y, int ldy);

/* Rotate, in place, n_head heads of head_dim (even) floats at the start of
 * each of n_tok rows (stride ldx); row t is at position pos[t]; frequency i
 * is base^(-2i/head_dim) (in double, rounded to float), angle pos * freq in
 * float. */
void kern_rope_ref(int n_tok, int n_head, int head_dim, float *x, int ldx, const int32_t *pos,
                   float base, kern_rope_type type);
void kern_rope(kern_pool *p, kern_isa isa, int n_tok, int n_head, int head_dim, float *x, int ldx,
               const int32_t *pos, float base, kern_rope_type type);
/* The same rotation with the head_dim / 2 frequencies given (angle
 * pos * inv_freq[i] in float): rope scaling (linear, Llama 3 frequency
 * factors) is a different table.  kern_rope is this with the table
 * above, so the two agree bit for bit for that table. */
void kern_rope_freq(kern_pool *p, kern_isa isa, int n_tok, int n_head, int head_dim, float *x,
                    int ldx, const int32_t *pos, const float *inv_freq, kern_rope_type type);

/* h[m][i] = act(gu[m][i]) * gu[m][F + i], i < F: gate | up halves of rows of
 * stride ldgu, h rows of stride ldh (h must not overlap gu). */
void kern_glu_ref(int M, int F, const float *gu, int ldgu, float *h, int ldh, kern_glu_act act);
void kern_glu(kern_pool *p, kern_isa isa, int M, int F, const float *gu, int ldgu, float *h,
              int ldh, kern_glu_act act);

/* y[m][i] += x[m][i] for M rows of n. */
void kern_add_ref(int M, int n, float *y, int ldy, const float *x, int ldx);
void kern_add(kern_pool *p, kern_isa isa, int M, int n, float *y, int ldy, const float *x, int ldx);

/* In-place softmax of one row of n floats (always on the caller thread:
 * attention calls it from its own pool tasks). */
void kern_softmax_ref(float *x, int n);
void kern_softmax(kern_isa isa, float *x, int n);

/* Index of the largest of n >= 1 floats, NaN counted as -inf, the lowest
 * index among equals (0 when every value is NaN or -inf): the greedy
 * sampler's pick over a vocabulary of logits.  Exact, so every ISA path
 * returns the reference's index (calling thread). */
int kern_argmax_ref(const float *x, int n);
int kern_argmax(kern_isa isa, const float *x, int n);

/* The first index i in [from, n) with x[i] * mul >= thr (the product
 * rounded to float; NaN never qualifies), or n when none does: the
 * sampler's one-pass top-k skips the logits that cannot enter its heap
 * with it.  Exact, so every ISA path returns the reference's index
 * (calling thread). */
int kern_scan_at_least_ref(const float *x, int from, int n, float mul, float thr);
int kern_scan_at_least(kern_isa isa, const float *x, int from, int n, float mul, float thr);

#endif
