/*
 * backend_cpu_attn.c -- the CPU backend's KV store and attention over
 * paged int8 or fp32 KV (the eng_backend kv_store and attention slots;
 * contract in eng_backend.h, block layout in eng_kv.h).
 *
 * kv_store writes each new token's K and V rows into its block slot: int8
 * layouts quantise K with one scale per k_group values of a head and V
 * with one per head (kern_quantize_rows), fp32 layouts copy.
 *
 * The work of one call splits into tasks of (descriptor, KV head, a run of
 * up to qt consecutive query tokens, a subset of the query heads sharing
 * that KV head).  Each task is one kern_attn call (kernels/cpu/kern_attn.h),
 * which reads every K and V row of the task's key range once for all of the
 * task's tokens and heads.  This file only translates the engine's KV layout
 * (eng_kv.h) into the kernel's byte offsets and picks the split:
 *
 *   qt  starts at CPU_ATTN_PAIRS / (heads per KV head) tokens, so a task
 *       holds about that many (token, head) pairs (the kernel's tile), and
 *       is halved while the call has fewer than CPU_ATTN_TASKS_PER_THREAD
 *       tasks per pool thread;
 *   hs  if there are still fewer than CPU_ATTN_BALANCED tasks per thread
 *       (decode of a few sequences), each KV head's query heads are split
 *       into hs near-equal subsets, the smallest hs that makes the task
 *       count a multiple of the thread count.  Every subset re-reads and
 *       re-converts the KV rows, so hs stays as small as balance allows
 *       (single-sequence decode on 2 threads: 2 subsets).
 *
 * The split changes only which pairs share a kernel call, never the
 * arithmetic of a pair (see kern_attn.h), so outputs do not depend on the
 * batch, the prefill chunking or the thread count.  Tasks of a descriptor
 * are issued last query chunk first (the longest under the causal mask) so
 * the pool's dynamic claiming balances the tail.  The per-thread score
 * scratch of eng_attn_shape is not needed (the kernel keeps its state on
 * the stack).
 */
#include <stddef.h>
#include <string.h>

#include "backend_cpu_int.h"
#include "kern_attn.h"
#include "kern_ops.h"
#include "kern_pool.h"

#define CPU_ATTN_PAIRS 256          /* (token, head) pairs per task to aim for */
#define CPU_ATTN_TASKS_PER_THREAD 2 /* fewer tasks than this per thread: shorter query runs */
#define CPU_ATTN_BALANCED 4         /* this many tasks per thread balance well enough */

typedef struct cpu_attn_job {
    const eng_attn_shape *s; /* shared shape */
    const eng_attn_desc *d;  /* descriptors */
    int n_desc;              /* count */
    int group;               /* query heads per KV head */
    int qt;                  /* query tokens per task */
    int hs;                  /* head subsets per KV head */
} cpu_attn_job;

static long cpu_attn_count(const cpu_attn_job *j) {
    long n = 0;
    for (int i = 0; i < j->n_desc; i++)
        n += (long)((j->d[i].n_q + j->qt - 1) / j->qt) * j->s->kv->n_head_kv * j->hs;
    return n;
}

static void cpu_attn_task(void *arg, int task, int thread) {
    const cpu_attn_job *j = arg;
    const eng_kv_layout *l = j->s->kv;
    int nkv = l->n_head_kv, hd = l->head_dim, B = l->block_tokens, G = j->group;
    (void)thread;
    int di = 0, nc;
    for (;;) {
        nc = (j->d[di].n_q + j->qt - 1) / j->qt;
        if (task < nc * nkv * j->hs) break;
        task -= nc * nkv * j->hs;
        di++;
    }
    const eng_attn_desc *d = &j->d[di];
    int sub = task % j->hs, g = task / j->hs % nkv, c = nc - 1 - task / j->hs / nkv;
    int t0 = c * j->qt, nt = d->n_q - t0 < j->qt ? d->n_q - t0 : j->qt;
    int h0 = sub * G / j->hs, h1 = (sub + 1) * G / j->hs;

    /* Offsets inside a block, taken from the (live) block of the last key. */
    char *blk = d->blocks[(d->pos0 + d->n_q - 1) / B];
    size_t es = l->kv_fp32 ? sizeof(float) : 1;
    kern_attn_kv kv = {
        .blocks = d->blocks,
        .block_tokens = B,
        .f32 = l->kv_fp32,
        .k_off = (size_t)((char *)eng_kv_layer_k(l, blk, d->layer) - blk) + (size_t)g * hd * es,
        .v_off = (size_t)((char *)eng_kv_layer_v(l, blk, d->layer) - blk) + (size_t)g * hd * es,
        .row_stride = (size_t)nkv * hd * es,
    };
    if (!l->kv_fp32) {
        kv.ks_off = (size_t)((char *)eng_kv_layer_kscale(l, blk, d->layer) - blk) +
                    (size_t)g * l->k_scales * sizeof(float);
        kv.vs_off = (size_t)((char *)eng_kv_layer_vscale(l, blk, d->layer) - blk) +
                    (size_t)g * sizeof(float);
        kv.ks_stride = (size_t)nkv * l->k_scales * sizeof(float);
        kv.vs_stride = (size_t)nkv * sizeof(float);
        kv.k_group = l->k_group;
    }
    size_t hoff = (size_t)(g * G + h0) * hd;
    kern_attn_q q = {
        .q = d->q + (size_t)t0 * d->ldq + hoff,
        .q_tok = (size_t)d->ldq,
        .q_head = (size_t)hd,
        .out = d->out + (size_t)t0 * d->ldo + hoff,
        .o_tok = (size_t)d->ldo,
        .o_head = (size_t)hd,
        .n_tok = nt,
        .n_head = h1 - h0,
        .pos0 = d->pos0 + t0,
        .window = d->window,
    };
    kern_attn(&kv, &q, hd, j->s->scale);
}

void eng_cpu_kv_store(void *ctx, const eng_kv_layout *l, int n_head, int layer, const float *qkv,
                      int ld, const eng_kv_span *spans, int n_spans) {
    kern_pool *pool = ((cpu_be *)ctx)->pool;
    kern_isa isa = kern_isa_best();
    int B = l->block_tokens, nkvh = l->n_head_kv, hd = l->head_dim;
    int nq = n_head * hd, nkv = nkvh * hd;
    for (int s = 0; s < n_spans; s++) {
        const eng_kv_span *sp = &spans[s];
        for (int t = 0; t < sp->n_tok; t++) {
            int p = sp->pos0 + t, slot = p % B;
            void *blk = sp->blocks[p / B];
            const float *k = qkv + (size_t)(sp->t0 + t) * ld + nq, *v = k + nkv;
            if (l->kv_fp32) {
                memcpy((float *)eng_kv_layer_k(l, blk, layer) + (size_t)slot * nkv, k,
                       nkv * sizeof(float));
                memcpy((float *)eng_kv_layer_v(l, blk, layer) + (size_t)slot * nkv, v,
                       nkv * sizeof(float));
                continue;
            }
            int kg = l->k_group, nks = nkvh * l->k_scales; /* K: one scale per kg values */
            kern_quantize_rows(pool, isa, nks, kg, k, kg,
                               (int8_t *)eng_kv_layer_k(l, blk, layer) + (size_t)slot * nkv, kg,
                               eng_kv_layer_kscale(l, blk, layer) + (size_t)slot * nks);
            kern_quantize_rows(pool, isa, nkvh, hd, v, hd,
                               (int8_t *)eng_kv_layer_v(l, blk, layer) + (size_t)slot * nkv, hd,
                               eng_kv_layer_vscale(l, blk, layer) + (size_t)slot * nkvh);
        }
    }
}

void eng_cpu_attention(void *ctx, const eng_attn_shape *s, const eng_attn_desc *d, int n_desc) {
    if (n_desc <= 0) return;
    kern_pool *pool = ((cpu_be *)ctx)->pool;
    int G = s->n_head / s->kv->n_head_kv, nthr = kern_pool_size(pool);
    long want = nthr > 1 ? (long)CPU_ATTN_TASKS_PER_THREAD * nthr : 1;
    cpu_attn_job j = {s, d, n_desc, G, CPU_ATTN_PAIRS / G > 1 ? CPU_ATTN_PAIRS / G : 1, 1};
    long n = cpu_attn_count(&j);
    if (n <= 0) return; /* no query tokens */
    while (n < want && j.qt > 1) {
        j.qt = (j.qt + 1) / 2;
        n = cpu_attn_count(&j);
    }
    if (nthr > 1 && n < CPU_ATTN_BALANCED * nthr) {
        /* few tasks: split heads so the count is a multiple of the threads */
        j.hs = 0;
        for (int hs = 1; hs <= G && !j.hs; hs++)
            if (n * hs >= nthr && n * hs % nthr == 0) j.hs = hs;
        if (!j.hs) j.hs = (int)((want + n - 1) / n) < G ? (int)((want + n - 1) / n) : G;
        n = cpu_attn_count(&j);
    }
    kern_pool_run(pool, cpu_attn_task, &j, (int)n);
}
