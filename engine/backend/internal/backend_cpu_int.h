/*
 * backend_cpu_int.h -- internal to the CPU backend: its context, its form
 * of a weight, and the slots that live in their own files.
 *
 *   backend_cpu.c         memory, element-wise ops, the table (eng_backend_cpu_create)
 *   backend_cpu_weight.c  weight_upload / free / bytes, linear, embed
 *   backend_cpu_attn.c    kv_store and attention
 *
 * A weight (struct eng_bweight) is held in the form its uses need:
 *   - linear on an int8 model: one packed run per stretch of rows that
 *     share a format (kern_gemm.h's kern_wpack; on native loads a Q4_K part
 *     or a part whose codes fit a 16-value code book is a 4-bit run,
 *     kern_w4.h), so that linear() quantises the input once and runs one
 *     GEMM per run into its columns of C.  Adjacent parts in the same
 *     format are one run (a fused Q|K|V is one pack unless its parts
 *     differ, e.g. Q4_K q and k beside a Q6_K v in Q4_K_M files);
 *   - fp32 models: the values [rows][cols] (linear and embed);
 *   - an embedding that is not also a linear weight (untied): its int8
 *     rows and scales row-major, looked up by row;
 *   - a tied int8 embedding: rows are read back from the linear runs
 *     (kern_wpack_row_f32: bit-identical to the row-major lookup), so the
 *     table is held once.
 */
#ifndef BACKEND_CPU_INT_H
#define BACKEND_CPU_INT_H

#include "eng_backend.h"
#include "kern_gemm.h"
#include "kern_pool.h"
#include "kern_w4.h"

/* The CPU backend's context. */
typedef struct cpu_be {
    kern_pool *pool; /* compute threads (borrowed; NULL: calling thread) */
} cpu_be;

/* Formats of a packed run. */
enum {
    CPU_RUN_I8 = 0, /* kern_wpack: per-channel or 32-block scales */
    CPU_RUN_W4 = 1  /* kern_w4pack: 4-bit LUT (Q4_0, IQ4_NL) or affine (Q4_K) */
};

/* One packed stretch of rows of a linear weight. */
typedef struct cpu_wrun {
    int row0, rows; /* rows of the weight it holds */
    int kind;       /* CPU_RUN_* */
    kern_wpack pk;  /* CPU_RUN_I8: the packed values */
    kern_w4pack w4; /* CPU_RUN_W4: the packed 4-bit values */
} cpu_wrun;

struct eng_bweight {
    int rows, cols; /* output channels x input dim */
    int use;        /* ENG_WUSE_* */
    int n_runs;     /* packed runs (int8 linear weights), 0 otherwise */
    cpu_wrun *runs; /* [n_runs], rows in order */
    float *f;       /* fp32 weights: values [rows][cols], else NULL */
    int8_t *q;      /* untied int8 embedding: values [rows][cols], else NULL */
    float *scale;   /* ... its per-row scales (I8_ROW), else NULL */
    float *bscale;  /* ... its 32-block scales [rows][cols / 32] (I8_B32), else NULL */
};

void eng_cpu_softmax(void *ctx, float *x, int n);

/* backend_cpu_weight.c */
int eng_cpu_weight_upload(void *ctx, const eng_wdesc *d, int native, eng_bweight **out, char *err,
                          size_t errlen);
void eng_cpu_weight_free(void *ctx, eng_bweight *w);
size_t eng_cpu_weight_bytes(void *ctx, const eng_bweight *w);
size_t eng_cpu_weight_read_bytes(void *ctx, const eng_bweight *w);
size_t eng_cpu_linear_ws(void *ctx, int M, int K);
void eng_cpu_linear(void *ctx, int M, const float *x, int ldx, const eng_bweight *w, float *C,
                    int ldc, void *ws);
void eng_cpu_logits(void *ctx, int R, const float *x, int ldx, const eng_bweight *w,
                    float *const *rows, int32_t *amax, void *ws);
void eng_cpu_embed(void *ctx, const eng_bweight *w, const int32_t *tok, int T, float mul, float *x,
                   int ldx);

/* backend_cpu_attn.c */
void eng_cpu_kv_store(void *ctx, const eng_kv_layout *l, int n_head, int layer, const float *qkv,
                      int ld, const eng_kv_span *spans, int n_spans);
void eng_cpu_attention(void *ctx, const eng_attn_shape *s, const eng_attn_desc *d, int n_desc);

#endif
