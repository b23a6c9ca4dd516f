/*
 * forward.c -- the transformer forward pass (eng_forward), one batch step.
 *
 * Reads top to bottom like llama2.c's run.c: embed every new token of every
 * sequence into one activation matrix, then for each layer: RMSNorm, fused
 * QKV projection, (qwen2) Q/K/V biases, (gemma3, qwen3) Q/K norms, RoPE with
 * the layer kind's frequency table (scaling applied at load), store K/V
 * into the paged KV,
 * attention over the stored KV, output projection, (gemma3) post-norm,
 * residual; RMSNorm, fused gate/up, SiLU or GELU-tanh gating, down
 * projection, (gemma3) post-norm, residual; finally the output norm and
 * projection for the rows whose logits were asked for.
 *
 * The int8 and fp32 paths are this same code: only linear() picks the
 * backend's gemm_q8 (after quantising the input rows with one scale per
 * 32-value block) or gemm_f32, and the KV store quantises (K one scale per
 * 32 values of a head, V one per token per head: eng_kv.h) or copies.
 * Attention always reads K/V back from the blocks (after this step's tokens
 * were written), so a token's result does not depend on how the sequence
 * was chunked.
 *
 * KV-sharing layers (kv_src[l] != l) have no K/V rows in their QKV matrix:
 * they compute Q only and attend over their source layer's KV, which the
 * source (an earlier layer) has already written for this step's tokens.
 */
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_model_int.h"
#include "eng_err.h"

#define FWD_MAX_TOKENS (1 << 20) /* tokens in one step, all sequences together */

/* Scratch of one step (one allocation). */
typedef struct fwd_buf {
    float *x;            /* [T][E] residual stream */
    float *xn;           /* [T][E] normed input of a block */
    float *qkv;          /* [T][n_q + 2 n_kv] projections */
    float *att;          /* [T][n_q] attention output */
    float *gu;           /* [T][2 n_ff] gate | up */
    float *hff;          /* [T][n_ff] gated hidden */
    float *tmp;          /* [T][E] block output before the residual */
    int8_t *xq;          /* [T][max Kp] quantised GEMM input, rows padded to the pack's Kp */
    float *xs;           /* [T][max Kp / 32] its block scales, rows max Kp / 32 apart */
    int lds;             /* row stride of xs (max Kp / 32) */
    int32_t *pos;        /* [T] position of every token */
    float *lx;           /* [R][E] rows that produce logits */
    float *lbuf;         /* [R][n_vocab] their logits */
    eng_attn_desc *desc; /* [n_steps] */
} fwd_buf;

/* C[T][w->rows] (row stride ldc) = A[T][w->cols] . W^T, int8 or fp32. */
static void linear(eng_model *m, fwd_buf *b, const float *A, int T, const eng_weight *w, float *C,
                   int ldc) {
    const eng_backend *be = &m->be;
    if (m->prec == ENG_PREC_INT8) {
        be->quantize_blocks(be->ctx, T, w->cols, A, w->cols, b->xq, w->pk.Kp, b->xs, b->lds);
        be->gemm_q8(be->ctx, T, b->xq, w->pk.Kp, b->xs, b->lds, &w->pk, C, ldc);
    } else {
        be->gemm_f32(be->ctx, T, w->rows, w->cols, A, w->f, C, ldc);
    }
}

/* Write the K and V rows of this step's tokens of one sequence into its blocks. */
static void store_kv(eng_model *m, const eng_kvseq *kv, int layer, const float *qkv, int ld,
                     int n_tok) {
    const eng_kv_layout *l = &m->kv;
    const eng_config *c = &m->cfg;
    int B = l->block_tokens, nkvh = c->n_head_kv, hd = c->head_dim;
    int nq = c->n_head * hd, nkv = nkvh * hd;
    void **tab = kv->blk[l->layer_kind[layer]];
    for (int t = 0; t < n_tok; t++) {
        int p = kv->n_tokens + t, slot = p % B;
        void *blk = tab[p / B];
        const float *k = qkv + (size_t)t * ld + nq, *v = k + nkv;
        if (l->kv_fp32) {
            memcpy((float *)eng_kv_layer_k(l, blk, layer) + (size_t)slot * nkv, k,
                   nkv * sizeof(float));
            memcpy((float *)eng_kv_layer_v(l, blk, layer) + (size_t)slot * nkv, v,
                   nkv * sizeof(float));
        } else {
            int kg = l->k_group, nks = nkvh * l->k_scales; /* K: one scale per kg values */
            m->be.quantize_rows(m->be.ctx, nks, kg, k, kg,
                                (int8_t *)eng_kv_layer_k(l, blk, layer) + (size_t)slot * nkv, kg,
                                eng_kv_layer_kscale(l, blk, layer) + (size_t)slot * nks);
            m->be.quantize_rows(m->be.ctx, nkvh, hd, v, hd,
                                (int8_t *)eng_kv_layer_v(l, blk, layer) + (size_t)slot * nkv, hd,
                                eng_kv_layer_vscale(l, blk, layer) + (size_t)slot * nkvh);
        }
    }
}

static void forward_layer(eng_model *m, fwd_buf *b, eng_seq_step *steps, int n_steps, int T, int l,
                          const eng_attn_shape *shape) {
    const eng_config *c = &m->cfg;
    const eng_backend *be = &m->be;
    const eng_layer *L = &m->layers[l];
    int E = c->n_embd, hd = c->head_dim, nq = c->n_head * hd, F = c->n_ff;
    int owner = c->kv_src[l] == l, ld = L->wqkv.rows;
    const float *freq = c->window[l] > 0 ? m->rope_freq_local : m->rope_freq;

    /* attention block */
    be->rmsnorm(be->ctx, T, E, b->x, E, L->attn_norm, c->norm_eps, b->xn, E);
    linear(m, b, b->xn, T, &L->wqkv, b->qkv, ld);
    if (L->bqkv) be->add(be->ctx, T, ld, b->qkv, ld, L->bqkv, 0); /* bias: one row, stride 0 */
    if (c->has_qk_norm)
        for (int t = 0; t < T; t++) {
            float *q = b->qkv + (size_t)t * ld;
            be->rmsnorm(be->ctx, c->n_head, hd, q, hd, L->q_norm, c->norm_eps, q, hd);
            if (owner)
                be->rmsnorm(be->ctx, c->n_head_kv, hd, q + nq, hd, L->k_norm, c->norm_eps, q + nq,
                            hd);
        }
    be->rope(be->ctx, T, c->n_head, hd, b->qkv, ld, b->pos, freq, c->rope_type);
    if (owner) be->rope(be->ctx, T, c->n_head_kv, hd, b->qkv + nq, ld, b->pos, freq, c->rope_type);
    for (int s = 0, t0 = 0; s < n_steps; t0 += steps[s].n_tokens, s++) {
        eng_kvseq *kv = steps[s].kv;
        if (owner) store_kv(m, kv, l, b->qkv + (size_t)t0 * ld, ld, steps[s].n_tokens);
        b->desc[s] = (eng_attn_desc){.q = b->qkv + (size_t)t0 * ld,
                                     .ldq = ld,
                                     .out = b->att + (size_t)t0 * nq,
                                     .ldo = nq,
                                     .n_q = steps[s].n_tokens,
                                     .pos0 = kv->n_tokens,
                                     .window = c->window[l],
                                     .blocks = kv->blk[m->kv.layer_kind[l]],
                                     .layer = l};
    }
    be->attention(be->ctx, shape, b->desc, n_steps);
    linear(m, b, b->att, T, &L->wo, b->tmp, E);
    if (L->post_attn_norm)
        be->rmsnorm(be->ctx, T, E, b->tmp, E, L->post_attn_norm, c->norm_eps, b->tmp, E);
    be->add(be->ctx, T, E, b->x, E, b->tmp, E);

    /* feed-forward block */
    be->rmsnorm(be->ctx, T, E, b->x, E, L->ffn_norm, c->norm_eps, b->xn, E);
    linear(m, b, b->xn, T, &L->wgu, b->gu, 2 * F);
    be->glu(be->ctx, T, F, b->gu, 2 * F, b->hff, F, c->ffn_gelu ? ENG_GLU_GELU_TANH : ENG_GLU_SILU);
    linear(m, b, b->hff, T, &L->wdown, b->tmp, E);
    if (L->post_ffn_norm)
        be->rmsnorm(be->ctx, T, E, b->tmp, E, L->post_ffn_norm, c->norm_eps, b->tmp, E);
    be->add(be->ctx, T, E, b->x, E, b->tmp, E);
}

static int check_steps(const eng_model *m, const eng_seq_step *steps, int n_steps, int *T_out,
                       int *R_out, char *err, size_t errlen) {
    long T = 0, R = 0;
    if (!steps || n_steps < 1) return pl_errf(err, errlen, ENG_EINVAL, "forward: no steps");
    for (int s = 0; s < n_steps; s++) {
        const eng_seq_step *st = &steps[s];
        if (!st->kv || !st->kv->layout || !st->tokens || st->n_tokens < 1 ||
            st->n_tokens > FWD_MAX_TOKENS)
            return pl_errf(err, errlen, ENG_EINVAL, "forward: step %d has no KV state or no tokens",
                           s);
        if (st->kv->layout != &m->kv && memcmp(st->kv->layout, &m->kv, sizeof m->kv) != 0)
            return pl_errf(err, errlen, ENG_EINVAL,
                           "forward: step %d uses another model's KV layout", s);
        if (st->logits < ENG_LOGITS_NONE || st->logits > ENG_LOGITS_ALL ||
            (st->logits != ENG_LOGITS_NONE && !st->out))
            return pl_errf(err, errlen, ENG_EINVAL, "forward: step %d: bad logits request", s);
        for (int i = 0; i < st->n_tokens; i++)
            if (st->tokens[i] < 0 || st->tokens[i] >= m->cfg.n_vocab)
                return pl_errf(err, errlen, ENG_EINVAL,
                               "forward: step %d: token %d = %d outside vocab [0, %d)", s, i,
                               (int)st->tokens[i], m->cfg.n_vocab);
        for (int r = 0; r < s; r++)
            if (steps[r].kv == st->kv)
                return pl_errf(err, errlen, ENG_EINVAL, "forward: steps %d and %d share a sequence",
                               r, s);
        if (st->kv->n_tokens > (1 << 30) - st->n_tokens)
            return pl_errf(err, errlen, ENG_EINVAL, "forward: step %d: sequence too long", s);
        T += st->n_tokens;
        R += st->logits == ENG_LOGITS_ALL ? st->n_tokens : st->logits == ENG_LOGITS_LAST;
        if (T > FWD_MAX_TOKENS)
            return pl_errf(err, errlen, ENG_EINVAL, "forward: more than %d tokens in one step",
                           FWD_MAX_TOKENS);
    }
    *T_out = (int)T;
    *R_out = (int)R;
    return 0;
}

/* Lay the scratch buffers out in mem (NULL: only size them); returns the bytes needed. */
static size_t fwd_layout(const eng_model *m, fwd_buf *b, int T, int R, int n_steps, char *mem) {
    const eng_config *c = &m->cfg;
    size_t E = c->n_embd, nq = (size_t)c->n_head * c->head_dim, F = c->n_ff, V = c->n_vocab;
    size_t nqkv = nq + 2 * (size_t)c->n_head_kv * c->head_dim, kmax = E;
    if (nq > kmax) kmax = nq;
    if (F > kmax) kmax = F;
    kmax = (kmax + 31) / 32 * 32; /* quantised rows are padded to the packs' Kp */
    b->lds = (int)(kmax / 32);
    size_t nf[] = {T * E, T * E, T * nqkv,        T * nq,        T * 2 * F,
                   T * F, T * E, T * (kmax / 32), (size_t)R * E, (size_t)R * V};
    float **dst[] = {&b->x,   &b->xn,  &b->qkv, &b->att, &b->gu,
                     &b->hff, &b->tmp, &b->xs,  &b->lx,  &b->lbuf};
    size_t off = 0;
    for (size_t i = 0; i < sizeof nf / sizeof nf[0]; i++) {
        if (mem) *dst[i] = (float *)(mem + off);
        off += (nf[i] + 15) / 16 * 16 * sizeof(float); /* 64-byte aligned regions */
    }
    if (mem) b->desc = (eng_attn_desc *)(mem + off);
    off += ((size_t)n_steps * sizeof(eng_attn_desc) + 63) / 64 * 64;
    if (mem) b->pos = (int32_t *)(mem + off);
    off += ((size_t)T * sizeof(int32_t) + 63) / 64 * 64;
    if (mem) b->xq = (int8_t *)(mem + off);
    off += ((size_t)T * kmax + 63) / 64 * 64;
    return off;
}

/* Scratch for one step: the model's cached buffer when no other call holds
 * it (grown as needed: decode steps then touch no fresh pages), else a
 * private allocation.  NULL if out of memory. */
static char *fwd_scratch_get(eng_model *m, size_t bytes, int *cached) {
    *cached = 0;
    if (pthread_mutex_trylock(&m->scratch_mu) == 0) {
        if (m->scratch_bytes < bytes) {
            free(m->scratch);
            m->scratch = aligned_alloc(64, (bytes + 63) / 64 * 64);
            m->scratch_bytes = m->scratch ? bytes : 0;
        }
        if (m->scratch) {
            *cached = 1;
            return m->scratch;
        }
        pthread_mutex_unlock(&m->scratch_mu);
    }
    return aligned_alloc(64, (bytes + 63) / 64 * 64);
}

static void fwd_scratch_put(eng_model *m, char *mem, int cached) {
    if (cached) pthread_mutex_unlock(&m->scratch_mu);
    else free(mem);
}

int eng_forward(eng_model *m, eng_seq_step *steps, int n_steps, char *err, size_t errlen) {
    int T = 0, R = 0;
    int rc = check_steps(m, steps, n_steps, &T, &R, err, errlen);
    if (rc) return rc;
    const eng_config *c = &m->cfg;
    const eng_backend *be = &m->be;
    int E = c->n_embd, V = c->n_vocab;

    /* KV blocks for every new token, all or nothing */
    int *before = malloc((size_t)n_steps * sizeof *before);
    if (!before) return pl_errf(err, errlen, ENG_ENOMEM, "forward: out of memory");
    for (int s = 0; s < n_steps; s++) {
        if (eng_kvseq_reserve(steps[s].kv, steps[s].n_tokens, &before[s]) != 0) {
            while (--s >= 0) eng_kvseq_unreserve(steps[s].kv, before[s]);
            free(before);
            return pl_errf(err, errlen, ENG_ENOMEM, "forward: out of KV blocks");
        }
    }
    fwd_buf b;
    int cached;
    char *mem = fwd_scratch_get(m, fwd_layout(m, &b, T, R, n_steps, NULL), &cached);
    if (!mem) {
        for (int s = 0; s < n_steps; s++) eng_kvseq_unreserve(steps[s].kv, before[s]);
        free(before);
        return pl_errf(err, errlen, ENG_ENOMEM, "forward: out of memory for %d tokens", T);
    }
    fwd_layout(m, &b, T, R, n_steps, mem);

    /* embeddings and positions */
    for (int s = 0, t = 0; s < n_steps; s++)
        for (int i = 0; i < steps[s].n_tokens; i++, t++) {
            int32_t tok = steps[s].tokens[i];
            float *x = b.x + (size_t)t * E;
            b.pos[t] = steps[s].kv->n_tokens + i;
            if (m->out_tied && m->prec == ENG_PREC_INT8) {
                kern_wpack_row_f32(&m->out.pk, tok, c->embd_scale,
                                   x); /* the table is the output's pack */
            } else if (m->embd.bscale) {
                const int8_t *q = m->embd.q + (size_t)tok * E;
                const float *bs = m->embd.bscale + (size_t)tok * (E / 32);
                for (int k = 0; k < E; k++) x[k] = (float)q[k] * bs[k / 32] * c->embd_scale;
            } else if (m->prec == ENG_PREC_INT8) {
                const int8_t *q = m->embd.q + (size_t)tok * E;
                float sc = m->embd.scale[tok] * c->embd_scale;
                for (int k = 0; k < E; k++) x[k] = (float)q[k] * sc;
            } else {
                const float *f = m->embd.f + (size_t)tok * E;
                for (int k = 0; k < E; k++) x[k] = f[k] * c->embd_scale;
            }
        }

    eng_attn_shape shape = {.kv = &m->kv, .n_head = c->n_head, .scale = c->attn_scale};
    for (int l = 0; l < c->n_layer; l++) forward_layer(m, &b, steps, n_steps, T, l, &shape);

    /* logits for the rows asked for */
    if (R > 0) {
        int r = 0;
        for (int s = 0, t = 0; s < n_steps; t += steps[s].n_tokens, s++) {
            if (steps[s].logits == ENG_LOGITS_ALL)
                for (int i = 0; i < steps[s].n_tokens; i++)
                    memcpy(b.lx + (size_t)r++ * E, b.x + (size_t)(t + i) * E, E * sizeof(float));
            else if (steps[s].logits == ENG_LOGITS_LAST)
                memcpy(b.lx + (size_t)r++ * E, b.x + (size_t)(t + steps[s].n_tokens - 1) * E,
                       E * sizeof(float));
        }
        be->rmsnorm(be->ctx, R, E, b.lx, E, m->out_norm, c->norm_eps, b.lx, E);
        linear(m, &b, b.lx, R, &m->out, b.lbuf, V);
        if (c->final_logit_softcap > 0) {
            float cap = c->final_logit_softcap;
            for (size_t i = 0; i < (size_t)R * V; i++) b.lbuf[i] = tanhf(b.lbuf[i] / cap) * cap;
        }
        r = 0;
        for (int s = 0; s < n_steps; s++) {
            int n = steps[s].logits == ENG_LOGITS_ALL ? steps[s].n_tokens
                                                      : steps[s].logits == ENG_LOGITS_LAST;
            if (n) memcpy(steps[s].out, b.lbuf + (size_t)r * V, (size_t)n * V * sizeof(float));
            r += n;
        }
    }
    for (int s = 0; s < n_steps; s++)
        eng_kvseq_commit(steps[s].kv, steps[s].tokens, steps[s].n_tokens);
    fwd_scratch_put(m, mem, cached);
    free(before);
    return 0;
}
