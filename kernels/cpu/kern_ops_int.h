/*
 * kern_ops_int.h -- internal to kern_ops.c / kern_ops_avx2.c: the per-row
 * kernels one ISA provides.  kern_ops.c picks a table by ISA and runs it
 * over rows (threaded); the table is the only thing that differs between
 * paths, which is what keeps a row's result independent of the batch.
 */
#ifndef KERN_OPS_INT_H
#define KERN_OPS_INT_H

#include <stdint.h>

#include "kern_ops.h"

/* Largest head_dim kern_rope handles with its per-token tables (the
 * engine's config allows up to 4096); larger heads use the reference. */
#define KERN_ROPE_MAX_DIM 4096

typedef struct kern_ops_rowfns {
    /* One row of K floats -> K int8 + pad zero bytes; *scale as kern_quantize_rows. */
    void (*quant)(const float *x, int K, int8_t *q, int pad, float *scale);
    /* One row of K floats -> K int8 + pad zero bytes, one scale per
     * KERN_QBLOCK values (scale[ceil(K / 32)]) as kern_quantize_blocks;
     * sum (NULL: none) gets each block's sum of its int8 values. */
    void (*quant_blocks)(const float *x, int K, int8_t *q, int pad, float *scale, int32_t *sum);
    /* One row of n floats; y may equal x. */
    void (*rmsnorm)(const float *x, int n, const float *w, float eps, float *y);
    /* n_head heads of head_dim at row, in place, with cos/sin c[i], s[i]
     * (i < head_dim / 2) of this row's position. */
    void (*rotate)(float *row, int n_head, int head_dim, const float *c, const float *s,
                   kern_rope_type type);
    /* h[i] = act(g[i]) * u[i], i < F. */
    void (*glu)(const float *g, const float *u, int F, float *h, kern_glu_act act);
    /* y[i] += x[i], i < n. */
    void (*add)(float *y, const float *x, int n);
    /* In-place softmax of n floats. */
    void (*softmax)(float *x, int n);
    /* kern_argmax of n >= 1 floats. */
    int (*argmax)(const float *x, int n);
    /* kern_scan_at_least. */
    int (*scan_at_least)(const float *x, int from, int n, float mul, float thr);
} kern_ops_rowfns;

/* The portable rows (kern_ops.c): the references' arithmetic. */
extern const kern_ops_rowfns kern_ops_rows_scalar;
#if defined(__x86_64__) || defined(__i386__)
#define KERN_OPS_X86 1
/* AVX2 + FMA rows (kern_ops_avx2.c); only called when the CPU has them. */
extern const kern_ops_rowfns kern_ops_rows_avx2;
#else
#define KERN_OPS_X86 0
#endif

#endif
