/*
 * backend_cpu.c -- the CPU backend: fills eng_backend's table with the
 * kernels/cpu GEMMs and element-wise ops (quantise, RMSNorm, RoPE, gating,
 * residual add, softmax: kern_ops.h), each threaded on the backend's
 * kern_pool (the ctx) with the ISA chosen at run time (kern_isa_best());
 * attention lives in backend_cpu_attn.c.  The wrappers only translate the
 * engine's enums and argument order to the kernels'.
 */
#include <string.h>

#include "backend_cpu_int.h"
#include "eng_config.h"
#include "kern_gemm.h"
#include "kern_ops.h"
#include "kern_pool.h"

static void cpu_gemm_q8(void *ctx, int M, const int8_t *A, int lda, const float *a_scale, int lds,
                        const struct kern_wpack *w, float *C, int ldc) {
    kern_gemm_q8(ctx, kern_isa_best(), M, A, lda, a_scale, lds, w, C, ldc);
}

static void cpu_gemm_f32(void *ctx, int M, int N, int K, const float *A, const float *W, float *C,
                         int ldc) {
    kern_gemm_f32(ctx, kern_isa_best(), M, N, K, A, W, C, ldc);
}

static void cpu_quantize_rows(void *ctx, int M, int K, const float *x, int ldx, int8_t *q, int ldq,
                              float *scale) {
    kern_quantize_rows(ctx, kern_isa_best(), M, K, x, ldx, q, ldq, scale);
}

static void cpu_quantize_blocks(void *ctx, int M, int K, const float *x, int ldx, int8_t *q,
                                int ldq, float *scale, int lds) {
    kern_quantize_blocks(ctx, kern_isa_best(), M, K, x, ldx, q, ldq, scale, lds);
}

static void cpu_rmsnorm(void *ctx, int M, int n, const float *x, int ldx, const float *w, float eps,
                        float *y, int ldy) {
    kern_rmsnorm(ctx, kern_isa_best(), M, n, x, ldx, w, eps, y, ldy);
}

static void cpu_rope(void *ctx, int n_tok, int n_head, int head_dim, float *x, int ldx,
                     const int32_t *pos, const float *inv_freq, int type) {
    kern_rope_freq(ctx, kern_isa_best(), n_tok, n_head, head_dim, x, ldx, pos, inv_freq,
                   type == ENG_ROPE_NEOX ? KERN_ROPE_NEOX : KERN_ROPE_NORM);
}

static void cpu_glu(void *ctx, int M, int F, const float *gu, int ldgu, float *h, int ldh,
                    int act) {
    kern_glu(ctx, kern_isa_best(), M, F, gu, ldgu, h, ldh,
             act == ENG_GLU_GELU_TANH ? KERN_GLU_GELU_TANH : KERN_GLU_SILU);
}

static void cpu_add(void *ctx, int M, int n, float *y, int ldy, const float *x, int ldx) {
    kern_add(ctx, kern_isa_best(), M, n, y, ldy, x, ldx);
}

/* One row, always on the calling thread (attention calls it inside its
 * own pool tasks with ctx NULL). */
void eng_cpu_softmax(void *ctx, float *x, int n) {
    (void)ctx;
    kern_softmax(kern_isa_best(), x, n);
}

void eng_backend_cpu_init(eng_backend *b, struct kern_pool *pool) {
    memset(b, 0, sizeof *b);
    b->name = "cpu";
    b->ctx = pool;
    b->n_threads = kern_pool_size(pool);
    b->gemm_q8 = cpu_gemm_q8;
    b->gemm_f32 = cpu_gemm_f32;
    b->quantize_rows = cpu_quantize_rows;
    b->quantize_blocks = cpu_quantize_blocks;
    b->rmsnorm = cpu_rmsnorm;
    b->rope = cpu_rope;
    b->glu = cpu_glu;
    b->add = cpu_add;
    b->softmax = eng_cpu_softmax;
    b->attention = eng_cpu_attention;
}
