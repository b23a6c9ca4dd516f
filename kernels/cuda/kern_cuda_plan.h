/*
 * kern_cuda_plan.h -- the CUDA backend's pure host-side arithmetic: launch
 * shapes (attention split along the keys, GEMM path, row-op blocks), the
 * block-table and KV-geometry math, and the padding the int8 GEMM needs.
 *
 * Purpose.  Everything here decides *how* a kernel runs or *where* its
 * bytes are, never computes results, so it is plain C compiled into
 * parley_cuda_host (built with or without a CUDA toolkit) and unit-tested
 * on the CPU (tests/backend/test_cuda_host.c).  The small inline functions
 * (KC_HD) are also compiled into the device code, so the kernels and the
 * tests use the very same formulas.
 *
 * Attention work.  One CUDA block handles one query token of one sequence
 * (an "item"), one KV head and up to KERN_CUDA_ATTN_MAX_WARPS of the query
 * heads sharing it (a head chunk), and one split of the token's key range.
 * The key range of a query at position p with window w is
 * [max(0, p - w + 1), p] (w = 0: [0, p]); it is cut into chunks of
 * `chunk` keys aligned to absolute positions (32 int8 keys, 16 fp32 keys,
 * the unit a block stages in shared memory), and split s of n gets a
 * contiguous run of ceil(chunks / n) of them.  Decode of few sequences
 * has few items, so the plan splits the keys until the grid has about
 * KERN_CUDA_ATTN_WAVES blocks per SM (flash-decoding), never below
 * KERN_CUDA_ATTN_MIN_SPLIT_KEYS keys per split; a combine pass merges the
 * splits' (max, sum, acc) partials.
 *
 * KV geometry.  A layer's arrays inside a block (eng_kv.h, restated here
 * without the engine): at layer_offset, K [B][nkv][hd] then V [B][nkv][hd]
 * (int8, or float for fp32 layouts), then (int8 only) K scales
 * [B][nkv][k_scales] and V scales [B][nkv] as floats.  kv_store stages
 * each written token's bytes for the write-back in the same order: K row,
 * V row, K scales, V scales (kern_cuda_kv_token_bytes per token).
 *
 * GEMM.  Weights are held [Np][Kp] int8 row-major: K padded to a multiple
 * of 16 (cuBLASLt's IMMA kernels want leading dimensions that are
 * multiples of 4 and 16-byte aligned rows; the GEMV reads 16 bytes at a
 * time) and N to a multiple of 4 (IMMA: m a multiple of 4), zeros in the
 * padding.  M <= KERN_CUDA_GEMV_MAX_M rows take the dp4a GEMV (one warp
 * per output channel streams the weights once: the decode path), larger M
 * cuBLASLt.  Both give exact int32 sums, so every path gives the same
 * float result for a row: C = (float)sum * x_scale[m] * w_scale[n].
 *
 * Threading.  Pure functions.  Failure: kern_cuda_attn_plan_make returns
 * KERN_CUDA_EINVAL for shapes the kernels do not take.
 */
#ifndef KERN_CUDA_PLAN_H
#define KERN_CUDA_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "kern_cuda_err.h"

#ifdef __CUDACC__
#define KC_HD __host__ __device__ static inline
#else
#define KC_HD static inline
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* ---- attention ------------------------------------------------------------------------- */

#define KERN_CUDA_ATTN_MAX_HD 256         /* largest head_dim the kernel takes */
#define KERN_CUDA_ATTN_MAX_WARPS 8        /* query heads (one warp each) per block */
#define KERN_CUDA_ATTN_WAVES 2            /* aim for this many blocks per SM */
#define KERN_CUDA_ATTN_MIN_SPLIT_KEYS 256 /* keys per split at least */
#define KERN_CUDA_ATTN_MAX_SPLIT 32       /* splits at most */

/* Keys attended by a query at position p: [*lo, *hi]. */
KC_HD void kern_cuda_key_range(int p, int window, int *lo, int *hi) {
    *lo = window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
    *hi = p;
}

/* Keys of split s of n over [lo, hi] cut into chunks of `chunk` keys
 * aligned to absolute positions: [*a, *b] (empty when *a > *b). */
KC_HD void kern_cuda_split_range(int lo, int hi, int n, int s, int chunk, int *a, int *b) {
    int c0 = lo / chunk, nch = hi / chunk - c0 + 1, per = (nch + n - 1) / n;
    int ka = (c0 + s * per) * chunk, kb = (c0 + (s + 1) * per) * chunk - 1;
    *a = ka > lo ? ka : lo;
    *b = kb < hi ? kb : hi;
}

/* Blocks any query of a sequence step (n_q tokens from pos0) attends:
 * [*first, *last] (block i holds positions [i*B, (i+1)*B)). */
KC_HD void kern_cuda_blocks_for(int pos0, int n_q, int window, int B, int *first, int *last) {
    int lo, hi;
    kern_cuda_key_range(pos0, window, &lo, &hi);
    *first = lo / B;
    *last = (pos0 + n_q - 1) / B;
}

/* Shape of one attention launch. */
typedef struct kern_cuda_attn_plan {
    int chunk;           /* keys staged per step: 32 (int8 KV) or 16 (fp32 KV) */
    int head_chunks;     /* blocks per (item, KV head) across its query heads */
    int heads_per_block; /* query heads (warps) per block */
    int n_split;         /* splits of every item's key range (1: no combine pass) */
    int k_stride;        /* bytes between staged K rows in shared memory */
    size_t smem;         /* dynamic shared memory bytes per block */
} kern_cuda_attn_plan;

/* Plan a call with n_items query tokens, of which the longest attends
 * max_keys keys, on n_sm SMs.  Returns 0, or KERN_CUDA_EINVAL when the
 * kernel does not take the shape (head_dim not a multiple of 4 or above
 * KERN_CUDA_ATTN_MAX_HD, n_head not a multiple of n_head_kv). */
int kern_cuda_attn_plan_make(kern_cuda_attn_plan *p, int n_items, int n_head, int n_head_kv,
                             int head_dim, int k_scales, int kv_f32, int max_keys, int n_sm);

/* Floats of split workspace a plan needs: (max, sum, acc[head_dim]) per
 * (item, head, split); 0 when n_split is 1. */
size_t kern_cuda_attn_ws_floats(const kern_cuda_attn_plan *p, int n_items, int n_head,
                                int head_dim);

/* Shared-memory layout of an attention block (offsets in bytes). */
typedef struct kern_cuda_attn_smem {
    int k, v, ks, vs, q, p; /* staged K rows, V rows, K scales, V scales, queries, probabilities */
    int total;              /* bytes */
} kern_cuda_attn_smem;

KC_HD kern_cuda_attn_smem kern_cuda_attn_smem_layout(int chunk, int k_stride, int hd, int kv_f32,
                                                     int k_scales, int warps) {
    kern_cuda_attn_smem s;
    int es = kv_f32 ? 4 : 1;
    s.k = 0;
    s.v = s.k + chunk * k_stride;
    s.ks = s.v + ((chunk * hd * es + 15) / 16) * 16;
    s.vs = s.ks + (kv_f32 ? 0 : chunk * k_scales * 4);
    s.q = s.vs + (kv_f32 ? 0 : chunk * 4);
    s.p = s.q + warps * hd * 4;
    s.total = s.p + warps * chunk * 4;
    return s;
}

/* ---- KV geometry ----------------------------------------------------------------------- */

/* Where one layer's arrays lie inside a block. */
typedef struct kern_cuda_kvgeo {
    int B;            /* tokens per block */
    int nkv;          /* KV heads */
    int hd;           /* head_dim */
    int f32;          /* 1: float K/V, no scales */
    int k_group;      /* K values per K scale (int8) */
    int k_scales;     /* K scales per token per KV head: hd / k_group */
    size_t k_off;     /* bytes from the block start to slot 0's K row */
    size_t v_off;     /* ... V row */
    size_t ks_off;    /* ... K scales (int8 only) */
    size_t vs_off;    /* ... V scales (int8 only) */
    size_t row_bytes; /* bytes of one slot's K (or V) row: nkv * hd * element */
} kern_cuda_kvgeo;

/* The geometry of a layer whose arrays start at layer_offset. */
kern_cuda_kvgeo kern_cuda_kvgeo_make(int B, int nkv, int hd, int f32, int k_group,
                                     size_t layer_offset);

/* Bytes kv_store stages per written token: K row, V row (+ K and V scales). */
KC_HD size_t kern_cuda_kv_token_bytes(int nkv, int hd, int f32, int k_scales) {
    return f32 ? 2 * (size_t)nkv * hd * 4 : (size_t)nkv * (2 * (size_t)hd + 4 * (k_scales + 1));
}

/* ---- GEMM ------------------------------------------------------------------------------ */

#define KERN_CUDA_GEMV_MAX_M 8 /* rows the GEMV takes in one pass */

enum { KERN_CUDA_GEMM_AUTO = 0, KERN_CUDA_GEMM_GEMV = 1, KERN_CUDA_GEMM_LT = 2 };

KC_HD int kern_cuda_pad_k(int K) { return (K + 15) / 16 * 16; }
KC_HD int kern_cuda_pad_n(int N) { return (N + 3) / 4 * 4; }

/* The path for M rows: KERN_CUDA_GEMM_GEMV or KERN_CUDA_GEMM_LT. */
int kern_cuda_gemm_pick(int M, int N, int K);

/* 1 when cuBLASLt may write its int32 sums straight into the float output
 * C (rows ldc floats apart) and the dequantisation then runs in place:
 * the padded width Np fits the row (N a multiple of 4, ldc >= Np, ldc a
 * multiple of 4) and C is 16-byte aligned. */
int kern_cuda_gemm_inplace(int N, int ldc, uintptr_t c_addr);

/* ---- row ops ----------------------------------------------------------------------------- */

/* Block shape of a per-row op over rows of n floats: one warp per row and
 * rows_per_block rows per block for rows up to 1024 floats, else one block
 * of `threads` per row. */
typedef struct kern_cuda_rows {
    int threads;        /* threads per block */
    int rows_per_block; /* rows per block */
    int warp_rows;      /* 1: each warp owns a row; 0: the whole block owns one */
} kern_cuda_rows;

kern_cuda_rows kern_cuda_rows_shape(int n);

#ifdef __cplusplus
}
#endif

#endif
