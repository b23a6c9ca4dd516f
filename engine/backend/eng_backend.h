/*
 * eng_backend.h -- the table of compute operations the forward pass calls.
 *
 * Purpose.  forward.c is written once against this table; the CPU backend
 * (backend_cpu.c, always built) fills it with kernels/cpu code running on a
 * kern_pool, and a CUDA backend can fill the same slots with device
 * kernels later.  Every slot works on whole batches (all new tokens of all
 * sequences of a step) so a device backend can launch one kernel per op.
 *
 * Data layout (CPU backend: host pointers).  Activations are row-major,
 * one row per token.  int8 weights are packed at load (kern_wpack, layout
 * in kern_gemm.h); fp32 weights are [N][K] row-major.  int8 GEMM: W8A8,
 * int32 sums per 32-input block, each folded in float with its activation
 * block scale (one per token per 32 inputs) and the weight's per-32-block
 * scale, or with a per-channel weight scale applied at the end.
 * quantize_blocks makes the GEMM's input: symmetric int8 with one scale per
 * (row, 32-value block) (scale = max|x| / 127 over the block, q =
 * round(x / scale), a zero block gets scale 0 and zeros).  quantize_rows
 * is the same with one scale per row (the int8 KV store: one scale per
 * token per head).
 *
 * Attention: the backend computes softmax(scale * q.k) . v in fp32 over the
 * paged KV of one layer; for int8 KV it dequantises K and V on the fly
 * (q . (k_i8 * k_scale)), for fp32 layouts it reads floats.  Query token t
 * of a descriptor sits at position pos0 + t and attends keys
 * [max(0, p - window + 1), p] (window 0: [0, p]).  Heads map to KV heads
 * as h / (n_head / n_head_kv).
 *
 * Threading.  The ops may run on the backend's own threads; a call returns
 * when its results are complete.  Ownership: the backend owns its context
 * (the pool); callers own every buffer.  Failure: the ops cannot fail for
 * valid arguments (validated by the forward pass).
 */
#ifndef ENG_BACKEND_H
#define ENG_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "eng_kv.h"

struct kern_wpack;

enum { ENG_GLU_SILU = 0, ENG_GLU_GELU_TANH = 1 };

/* One sequence's attention for one layer. */
typedef struct eng_attn_desc {
    const float *q;      /* queries [n_q][n_head*head_dim], row stride ldq floats */
    int ldq;             /* row stride of q */
    float *out;          /* output [n_q][n_head*head_dim], row stride ldo */
    int ldo;             /* row stride of out */
    int n_q;             /* query tokens */
    int pos0;            /* position of query 0; keys 0..pos0+n_q-1 are stored */
    int window;          /* 0 = global, else attend the last window tokens */
    void *const *blocks; /* block table of the layer's KV kind */
    int layer;           /* model layer (its KV source's offsets are used) */
} eng_attn_desc;

/* Shape shared by every attention descriptor of one call. */
typedef struct eng_attn_shape {
    const eng_kv_layout *kv; /* block layout (element type, offsets) */
    int n_head;              /* query heads */
    float scale;             /* multiplier on q.k */
} eng_attn_shape;

typedef struct eng_backend {
    const char *name; /* "cpu" */
    void *ctx;        /* backend state (CPU: pool + ISA) */
    int n_threads;    /* threads the backend computes with */
    /* W8A8 on weights packed at load (kern_gemm.h: layout, numerics):
     * C[m][n] = A[m] . W[n] with the pack's per-channel or block scales and
     * the activation block scales a_scale[m * lds + b] (b < w->n_blocks);
     * A rows lda bytes apart, zero past K up to w->Kp. */
    void (*gemm_q8)(void *ctx, int M, const int8_t *A, int lda, const float *a_scale, int lds,
                    const struct kern_wpack *w, float *C, int ldc);
    void (*gemm_f32)(void *ctx, int M, int N, int K, const float *A, const float *W, float *C,
                     int ldc);
    /* x: M rows of K floats, row stride ldx -> q rows ldq bytes apart (bytes
     * K .. ldq-1 set to zero) + scale[M]. */
    void (*quantize_rows)(void *ctx, int M, int K, const float *x, int ldx, int8_t *q, int ldq,
                          float *scale);
    /* The same with one scale per 32 values: scale[m * lds + b] for
     * b < ceil(K / 32) (kern_quantize_blocks); bytes K .. ldq-1 zeroed. */
    void (*quantize_blocks)(void *ctx, int M, int K, const float *x, int ldx, int8_t *q, int ldq,
                            float *scale, int lds);
    /* y[m] = x[m] * rsqrt(mean(x[m]^2) + eps) * w, rows of n (strides ldx, ldy; y may be x). */
    void (*rmsnorm)(void *ctx, int M, int n, const float *x, int ldx, const float *w, float eps,
                    float *y, int ldy);
    /* Rotate n_head heads of head_dim in each of n_tok rows (stride ldx) in place;
     * row t at position pos[t], pair i by the angle pos[t] * inv_freq[i] (float;
     * head_dim / 2 frequencies: base^(-2i/head_dim), divided by any rope
     * scaling, made once at load); type ENG_ROPE_NORM or ENG_ROPE_NEOX. */
    void (*rope)(void *ctx, int n_tok, int n_head, int head_dim, float *x, int ldx,
                 const int32_t *pos, const float *inv_freq, int type);
    /* h[m][i] = act(gu[m][i]) * gu[m][F + i] for i < F (gate | up rows of
     * stride ldgu, h rows of stride ldh); act ENG_GLU_SILU or ENG_GLU_GELU_TANH. */
    void (*glu)(void *ctx, int M, int F, const float *gu, int ldgu, float *h, int ldh, int act);
    /* y[m][i] += x[m][i] for M rows of n (strides ldy, ldx): the residual add;
     * ldx 0 adds the one row x to every row (the Q/K/V bias). */
    void (*add)(void *ctx, int M, int n, float *y, int ldy, const float *x, int ldx);
    /* In-place softmax of n floats. */
    void (*softmax)(void *ctx, float *x, int n);
    void (*attention)(void *ctx, const eng_attn_shape *s, const eng_attn_desc *d, int n_desc);
} eng_backend;

/* Fill b with the CPU backend computing on pool (not owned; NULL: caller
 * thread only).  The pool must outlive b. */
struct kern_pool;
void eng_backend_cpu_init(eng_backend *b, struct kern_pool *pool);

#endif
