/*
 * backend_cpu.c -- the CPU backend: fills eng_backend's table with the
 * kernels/cpu code (element-wise ops of kern_ops.h here; weights, linear
 * and embed in backend_cpu_weight.c; kv_store and attention in
 * backend_cpu_attn.c), each threaded on the borrowed kern_pool with the ISA
 * chosen at run time (kern_isa_best()).  Backend memory is host memory:
 * alloc is a 64-byte aligned allocation and upload / download / copy are
 * memcpy.  The wrappers only translate the engine's enums and argument
 * order to the kernels'.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu_int.h"
#include "eng_err.h"
#include "kern_ops.h"

static void *cpu_alloc(void *ctx, size_t bytes) {
    (void)ctx;
    return aligned_alloc(64, (bytes + 63) / 64 * 64 + (bytes == 0 ? 64 : 0));
}

static void cpu_free(void *ctx, void *p) {
    (void)ctx;
    free(p);
}

static void cpu_upload(void *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    if (bytes) memcpy(dst, src, bytes);
}

static int cpu_download(void *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    if (bytes) memcpy(dst, src, bytes);
    return 0;
}

static void cpu_copy(void *ctx, void *dst, const void *src, size_t bytes) {
    (void)ctx;
    if (bytes) memmove(dst, src, bytes);
}

static kern_pool *cpu_pool(void *ctx) { return ((cpu_be *)ctx)->pool; }

static void cpu_rmsnorm(void *ctx, int M, int n, const float *x, int ldx, const float *w, float eps,
                        float *y, int ldy) {
    kern_rmsnorm(cpu_pool(ctx), kern_isa_best(), M, n, x, ldx, w, eps, y, ldy);
}

/* Per token: its n_head heads are n_head consecutive rows of hd. */
static void cpu_rmsnorm_heads(void *ctx, int T, int n_head, int hd, float *x, int ld,
                              const float *w, float eps) {
    for (int t = 0; t < T; t++) {
        float *r = x + (size_t)t * ld;
        kern_rmsnorm(cpu_pool(ctx), kern_isa_best(), n_head, hd, r, hd, w, eps, r, hd);
    }
}

static void cpu_rope(void *ctx, int n_tok, int n_head, int head_dim, float *x, int ldx,
                     const int32_t *pos, const float *inv_freq, int type) {
    kern_rope_freq(cpu_pool(ctx), kern_isa_best(), n_tok, n_head, head_dim, x, ldx, pos, inv_freq,
                   type == ENG_ROPE_NEOX ? KERN_ROPE_NEOX : KERN_ROPE_NORM);
}

static void cpu_glu(void *ctx, int M, int F, const float *gu, int ldgu, float *h, int ldh,
                    int act) {
    kern_glu(cpu_pool(ctx), kern_isa_best(), M, F, gu, ldgu, h, ldh,
             act == ENG_GLU_GELU_TANH ? KERN_GLU_GELU_TANH : KERN_GLU_SILU);
}

static void cpu_add(void *ctx, int M, int n, float *y, int ldy, const float *x, int ldx) {
    kern_add(cpu_pool(ctx), kern_isa_best(), M, n, y, ldy, x, ldx);
}

static void cpu_softcap(void *ctx, float *x, size_t n, float cap) {
    (void)ctx;
    for (size_t i = 0; i < n; i++) x[i] = tanhf(x[i] / cap) * cap;
}

/* One row, always on the calling thread (attention calls it inside its
 * own pool tasks). */
void eng_cpu_softmax(void *ctx, float *x, int n) {
    (void)ctx;
    kern_softmax(kern_isa_best(), x, n);
}

static int cpu_argmax(void *ctx, const float *logits, int R, int V, int ld, int32_t *out) {
    (void)ctx;
    for (int r = 0; r < R; r++) {
        const float *l = logits + (size_t)r * ld;
        int best = 0;
        for (int i = 1; i < V; i++) /* NaN counts as -inf, as in the sampler */
            if (l[i] > l[best] || (isnan(l[best]) && !isnan(l[i]))) best = i;
        out[r] = best;
    }
    return 0;
}

static void cpu_destroy(void *ctx) { free(ctx); }

int eng_backend_cpu_create(eng_backend *b, struct kern_pool *pool, char *err, size_t errlen) {
    memset(b, 0, sizeof *b);
    cpu_be *c = calloc(1, sizeof *c);
    if (!c) return pl_errf(err, errlen, ENG_ENOMEM, "cpu backend: out of memory");
    c->pool = pool;
    b->name = "cpu";
    b->ctx = c;
    b->n_threads = pool ? kern_pool_size(pool) : 1;
    b->caps = ENG_BE_CAP_HOSTMEM | ENG_BE_CAP_ARGMAX | ENG_BE_CAP_W4;
    b->alloc = cpu_alloc;
    b->free = cpu_free;
    b->upload = cpu_upload;
    b->download = cpu_download;
    b->copy = cpu_copy;
    b->weight_upload = eng_cpu_weight_upload;
    b->weight_free = eng_cpu_weight_free;
    b->weight_bytes = eng_cpu_weight_bytes;
    b->weight_read_bytes = eng_cpu_weight_read_bytes;
    b->linear_ws = eng_cpu_linear_ws;
    b->linear = eng_cpu_linear;
    b->logits = eng_cpu_logits;
    b->embed = eng_cpu_embed;
    b->rmsnorm = cpu_rmsnorm;
    b->rmsnorm_heads = cpu_rmsnorm_heads;
    b->rope = cpu_rope;
    b->glu = cpu_glu;
    b->add = cpu_add;
    b->softcap = cpu_softcap;
    b->kv_store = eng_cpu_kv_store;
    b->attention = eng_cpu_attention;
    b->argmax = cpu_argmax;
    b->destroy = cpu_destroy;
    return 0;
}
