/*
 * backend_cpu.c -- the CPU backend: fills eng_backend's table with the
 * kernels/cpu GEMMs (threaded on a kern_pool, ISA chosen at run time) and
 * plain-C element-wise ops (quantise, RMSNorm, RoPE, softmax) plus a
 * threaded attention over paged int8 or fp32 KV.
 *
 * Attention splits into one task per (sequence, query token, head): scores
 * q.k for every attended key into the thread's scratch row, softmax, then
 * the weighted sum of V rows.  int8 KV is dequantised on the fly: the dot
 * with the raw int8 key row is multiplied by that token's K scale, and each
 * V row's weight is multiplied by its V scale.
 */
#include <math.h>
#include <string.h>

#include "eng_backend.h"
#include "eng_config.h"
#include "kern_gemm.h"
#include "kern_pool.h"
#include "kern_vec.h"

static void cpu_gemm_i8(void *ctx, int M, int N, int K, const int8_t *A, const float *a_scale,
                        const int8_t *W, const float *w_scale, float *C, int ldc) {
    kern_gemm_i8_scaled(ctx, kern_isa_best(), M, N, K, A, a_scale, W, w_scale, C, ldc);
}

static void cpu_gemm_i8_bs(void *ctx, int M, int N, int K, const int8_t *A, const float *a_scale,
                           const int8_t *W, const float *bscale, float *C, int ldc) {
    kern_gemm_i8_bs(ctx, kern_isa_best(), M, N, K, A, a_scale, W, bscale, C, ldc);
}

static void cpu_gemm_f32(void *ctx, int M, int N, int K, const float *A, const float *W,
                         float *C, int ldc) {
    kern_gemm_f32(ctx, kern_isa_best(), M, N, K, A, W, C, ldc);
}

static void cpu_quantize_rows(void *ctx, int M, int K, const float *x, int ldx, int8_t *q,
                              float *scale) {
    (void)ctx;
    for (int m = 0; m < M; m++) {
        const float *r = x + (size_t)m * ldx;
        int8_t *o = q + (size_t)m * K;
        float amax = 0;
        for (int k = 0; k < K; k++) {
            float a = fabsf(r[k]);
            if (a > amax) amax = a;
        }
        float s = amax / 127.0f;
        scale[m] = s;
        if (s == 0) {
            memset(o, 0, (size_t)K);
            continue;
        }
        float inv = 127.0f / amax;
        for (int k = 0; k < K; k++) {
            float v = nearbyintf(r[k] * inv);
            if (v > 127) v = 127;
            if (v < -127) v = -127;
            o[k] = (int8_t)v;
        }
    }
}

static void cpu_rmsnorm(void *ctx, int M, int n, const float *x, int ldx, const float *w,
                        float eps, float *y, int ldy) {
    (void)ctx;
    for (int m = 0; m < M; m++) {
        const float *r = x + (size_t)m * ldx;
        float *o = y + (size_t)m * ldy;
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (double)r[i] * r[i];
        float inv = 1.0f / sqrtf((float)(ss / n) + eps);
        for (int i = 0; i < n; i++) o[i] = r[i] * inv * w[i];
    }
}

static void cpu_rope(void *ctx, int n_tok, int n_head, int head_dim, float *x, int ldx,
                     const int32_t *pos, float base, int type) {
    (void)ctx;
    int half = head_dim / 2;
    for (int t = 0; t < n_tok; t++) {
        float *row = x + (size_t)t * ldx;
        for (int i = 0; i < half; i++) {
            /* as transformers: inv_freq in float, angle = pos * inv_freq in float */
            float inv_freq = (float)(1.0 / pow((double)base, (double)(2 * i) / head_dim));
            float ang = (float)pos[t] * inv_freq;
            float c = cosf(ang), s = sinf(ang);
            for (int h = 0; h < n_head; h++) {
                float *v = row + (size_t)h * head_dim;
                int a = type == ENG_ROPE_NEOX ? i : 2 * i;
                int b = type == ENG_ROPE_NEOX ? i + half : 2 * i + 1;
                float x0 = v[a], x1 = v[b];
                v[a] = x0 * c - x1 * s;
                v[b] = x0 * s + x1 * c;
            }
        }
    }
}

static void cpu_softmax(void *ctx, float *x, int n) {
    (void)ctx;
    if (n <= 0) return;
    float mx = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    float sum = 0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}

typedef struct cpu_attn_job {
    const eng_attn_shape *s; /* shared shape */
    const eng_attn_desc *d;  /* descriptors */
    int n_desc;              /* count */
} cpu_attn_job;

static void cpu_attn_task(void *arg, int task, int thread) {
    const cpu_attn_job *j = arg;
    const eng_attn_shape *s = j->s;
    const eng_kv_layout *l = s->kv;
    int nh = s->n_head, hd = l->head_dim, nkv = l->n_head_kv, B = l->block_tokens;
    int di = 0;
    while (task >= j->d[di].n_q * nh) task -= j->d[di++].n_q * nh;
    const eng_attn_desc *d = &j->d[di];
    int t = task / nh, h = task % nh, g = h / (nh / nkv);
    int p = d->pos0 + t;
    int lo = d->window > 0 && p - d->window + 1 > 0 ? p - d->window + 1 : 0;
    int n = p - lo + 1;
    const float *q = d->q + (size_t)t * d->ldq + (size_t)h * hd;
    float *out = d->out + (size_t)t * d->ldo + (size_t)h * hd;
    float *sc = s->scratch + (size_t)thread * s->scratch_len;
    for (int k = 0; k < n; k++) {
        int pos = lo + k;
        void *blk = d->blocks[pos / B];
        int slot = pos % B;
        size_t ro = ((size_t)slot * nkv + g) * hd;
        float dot;
        if (l->kv_fp32) {
            dot = kern_dot_f32(q, (const float *)eng_kv_layer_k(l, blk, d->layer) + ro, hd);
        } else {
            dot = kern_dot_f32_i8(q, (const int8_t *)eng_kv_layer_k(l, blk, d->layer) + ro, hd);
            dot *= eng_kv_layer_kscale(l, blk, d->layer)[slot * nkv + g];
        }
        sc[k] = dot * s->scale;
    }
    cpu_softmax(NULL, sc, n);
    memset(out, 0, (size_t)hd * sizeof *out);
    for (int k = 0; k < n; k++) {
        int pos = lo + k;
        void *blk = d->blocks[pos / B];
        int slot = pos % B;
        size_t ro = ((size_t)slot * nkv + g) * hd;
        if (l->kv_fp32) {
            kern_axpy_f32(out, sc[k], (const float *)eng_kv_layer_v(l, blk, d->layer) + ro, hd);
        } else {
            float w = sc[k] * eng_kv_layer_vscale(l, blk, d->layer)[slot * nkv + g];
            kern_axpy_i8(out, w, (const int8_t *)eng_kv_layer_v(l, blk, d->layer) + ro, hd);
        }
    }
}

static void cpu_attention(void *ctx, const eng_attn_shape *s, const eng_attn_desc *d,
                          int n_desc) {
    cpu_attn_job j = {s, d, n_desc};
    int n = 0;
    for (int i = 0; i < n_desc; i++) n += d[i].n_q * s->n_head;
    kern_pool_run(ctx, cpu_attn_task, &j, n);
}

void eng_backend_cpu_init(eng_backend *b, struct kern_pool *pool) {
    memset(b, 0, sizeof *b);
    b->name = "cpu";
    b->ctx = pool;
    b->n_threads = kern_pool_size(pool);
    b->gemm_i8 = cpu_gemm_i8;
    b->gemm_i8_bs = cpu_gemm_i8_bs;
    b->gemm_f32 = cpu_gemm_f32;
    b->quantize_rows = cpu_quantize_rows;
    b->rmsnorm = cpu_rmsnorm;
    b->rope = cpu_rope;
    b->softmax = cpu_softmax;
    b->attention = cpu_attention;
}
