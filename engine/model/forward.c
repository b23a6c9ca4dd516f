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
 * Every step of that is one op of the model's backend table
 * (eng_backend.h) on buffers in backend memory: the step's scratch comes
 * from the backend's alloc, the token ids and positions are uploaded, and
 * the logits land in the callers' rows: written there directly by the
 * output projection when the backend has the logits op (the CPU: no
 * n_vocab-wide buffer of its own, no copy), else downloaded.  A step that
 * asks only for its argmax (ENG_LOGITS_ARGMAX) gets it from the same GEMM,
 * which then never writes that row's logits.  The int8 and fp32 paths
 * are this same code: the backend's linear() is W8A8 on an int8 model (the
 * CPU backend quantises each input row with one scale per 32 values) and
 * fp32 on an fp32 one, and kv_store quantises (K one scale per 32 values of
 * a head, V one per token per head: eng_kv.h) or copies.  Attention always
 * reads K/V back from the blocks (after this step's tokens were written),
 * so a token's result does not depend on how the sequence was chunked.
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

#include "eng_err.h"
#include "eng_model_int.h"
#include "kern_isa.h"
#include "kern_ops.h"

#define FWD_MAX_TOKENS (1 << 20) /* tokens in one step, all sequences together */

/* Scratch of one step (one allocation of backend memory). */
typedef struct fwd_buf {
    float *x;            /* [T][E] residual stream */
    float *xn;           /* [T][E] normed input of a block */
    float *qkv;          /* [T][n_q + 2 n_kv] projections */
    float *att;          /* [T][n_q] attention output */
    float *gu;           /* [T][2 n_ff] gate | up */
    float *hff;          /* [T][n_ff] gated hidden */
    float *tmp;          /* [T][E] block output before the residual */
    float *lx;           /* [R][E] rows that produce logits */
    float *lbuf;         /* [R][n_vocab] their logits */
    int32_t *tok;        /* [T] token ids */
    int32_t *pos;        /* [T] position of every token */
    void *ws;            /* linear()'s workspace for T rows of the widest input */
    eng_attn_desc *desc; /* [n_steps] (host) */
    eng_kv_span *span;   /* [n_steps] (host) */
} fwd_buf;

/* C[T][w->rows] (row stride ldc) = A[T][w->cols] . W^T. */
static void linear(eng_model *m, fwd_buf *b, const float *A, int T, const eng_weight *w, float *C,
                   int ldc) {
    m->be.linear(m->be.ctx, T, A, w->cols, w->bw, C, ldc, b->ws);
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
    if (c->has_qk_norm) {
        be->rmsnorm_heads(be->ctx, T, c->n_head, hd, b->qkv, ld, L->q_norm, c->norm_eps);
        if (owner)
            be->rmsnorm_heads(be->ctx, T, c->n_head_kv, hd, b->qkv + nq, ld, L->k_norm,
                              c->norm_eps);
    }
    be->rope(be->ctx, T, c->n_head, hd, b->qkv, ld, b->pos, freq, c->rope_type);
    if (owner) be->rope(be->ctx, T, c->n_head_kv, hd, b->qkv + nq, ld, b->pos, freq, c->rope_type);
    for (int s = 0, t0 = 0; s < n_steps; t0 += steps[s].n_tokens, s++) {
        eng_kvseq *kv = steps[s].kv;
        b->span[s] = (eng_kv_span){.blocks = kv->blk[m->kv.layer_kind[l]],
                                   .pos0 = kv->n_tokens,
                                   .t0 = t0,
                                   .n_tok = steps[s].n_tokens};
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
    if (owner) be->kv_store(be->ctx, &m->kv, c->n_head, l, b->qkv, ld, b->span, n_steps);
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

/* Rows of logits step st asks for (ENG_LOGITS_ARGMAX: one, its last token). */
static int fwd_rows(const eng_seq_step *st) {
    return st->logits == ENG_LOGITS_ALL ? st->n_tokens : st->logits != ENG_LOGITS_NONE;
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
        if (st->logits < ENG_LOGITS_NONE || st->logits > ENG_LOGITS_ARGMAX ||
            (st->logits == ENG_LOGITS_ARGMAX ? !st->next
                                             : st->logits != ENG_LOGITS_NONE && !st->out))
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
        R += fwd_rows(st);
        if (T > FWD_MAX_TOKENS)
            return pl_errf(err, errlen, ENG_EINVAL, "forward: more than %d tokens in one step",
                           FWD_MAX_TOKENS);
    }
    *T_out = (int)T;
    *R_out = (int)R;
    return 0;
}

/* Lay the step's backend buffers out in mem (NULL: only size them); returns
 * the bytes needed.  L: rows of the logits buffer (0 when the backend
 * writes the logits into the callers' rows itself). */
static size_t fwd_layout(const eng_model *m, fwd_buf *b, int T, int R, int L, char *mem) {
    const eng_config *c = &m->cfg;
    size_t E = c->n_embd, nq = (size_t)c->n_head * c->head_dim, F = c->n_ff, V = c->n_vocab;
    size_t nqkv = nq + 2 * (size_t)c->n_head_kv * c->head_dim, kmax = E;
    if (nq > kmax) kmax = nq;
    if (F > kmax) kmax = F;
    size_t nf[] = {T * E, T * E, T * nqkv,      T * nq,       T * 2 * F,
                   T * F, T * E, (size_t)R * E, (size_t)L * V};
    float **dst[] = {&b->x, &b->xn, &b->qkv, &b->att, &b->gu, &b->hff, &b->tmp, &b->lx, &b->lbuf};
    size_t off = 0;
    for (size_t i = 0; i < sizeof nf / sizeof nf[0]; i++) {
        if (mem) *dst[i] = (float *)(mem + off);
        off += (nf[i] + 15) / 16 * 16 * sizeof(float); /* 64-byte aligned regions */
    }
    if (mem) b->tok = (int32_t *)(mem + off);
    off += ((size_t)T * sizeof(int32_t) + 63) / 64 * 64;
    if (mem) b->pos = (int32_t *)(mem + off);
    off += ((size_t)T * sizeof(int32_t) + 63) / 64 * 64;
    if (mem) b->ws = mem + off;
    size_t ws = m->be.linear_ws(m->be.ctx, T > R ? T : R, (int)kmax);
    off += (ws + 63) / 64 * 64;
    return off;
}

/* Scratch for one step: the model's cached buffer when no other call holds
 * it (grown as needed: decode steps then touch no fresh pages), else a
 * private allocation.  NULL if out of memory. */
static char *fwd_scratch_get(eng_model *m, size_t bytes, int *cached) {
    const eng_backend *be = &m->be;
    *cached = 0;
    if (pthread_mutex_trylock(&m->scratch_mu) == 0) {
        if (m->scratch_bytes < bytes) {
            if (m->scratch) be->free(be->ctx, m->scratch);
            m->scratch = be->alloc(be->ctx, bytes);
            m->scratch_bytes = m->scratch ? bytes : 0;
        }
        if (m->scratch) {
            *cached = 1;
            return m->scratch;
        }
        pthread_mutex_unlock(&m->scratch_mu);
    }
    return be->alloc(be->ctx, bytes);
}

static void fwd_scratch_put(eng_model *m, char *mem, int cached) {
    if (cached) pthread_mutex_unlock(&m->scratch_mu);
    else m->be.free(m->be.ctx, mem);
}

/* Host-side arrays of one step (one malloc). */
typedef struct fwd_host {
    int *before;         /* [n_steps] block counts before eng_kvseq_reserve */
    int32_t *tok, *pos;  /* [T] token ids and positions, uploaded to the backend */
    eng_attn_desc *desc; /* [n_steps] */
    eng_kv_span *span;   /* [n_steps] */
    float **rows;        /* [R] where each logits row goes (NULL: argmax only) */
    int32_t *amax;       /* [R] argmax of each logits row */
} fwd_host;

static void *fwd_host_alloc(fwd_host *h, int T, int R, int n_steps) {
    size_t n = (size_t)n_steps, t = (size_t)T, r = (size_t)R;
    char *p = malloc(r * sizeof(float *) + n * (sizeof(eng_attn_desc) + sizeof(eng_kv_span)) +
                     n * sizeof(int) + (2 * t + r) * sizeof(int32_t));
    if (!p) return NULL;
    h->rows = (float **)p;
    h->desc = (eng_attn_desc *)(h->rows + r);
    h->span = (eng_kv_span *)(h->desc + n);
    h->before = (int *)(h->span + n);
    h->tok = (int32_t *)(h->before + n);
    h->pos = h->tok + t;
    h->amax = h->pos + t;
    return p;
}

/* 1 when the logits go straight into the callers' rows (the backend's
 * logits op; with a soft-cap only when no step wants just its argmax: the
 * argmax of the capped values is taken after capping). */
static int fwd_direct(const eng_model *m, const eng_seq_step *steps, int n_steps) {
    if (!m->be.logits) return 0;
    if (m->cfg.final_logit_softcap <= 0) return 1;
    for (int s = 0; s < n_steps; s++)
        if (steps[s].logits == ENG_LOGITS_ARGMAX) return 0;
    return 1;
}

/* Argmax of row r of the backend logits buffer lbuf (rows V apart): the
 * backend's argmax op, else the row downloaded and scanned. */
static int fwd_argmax_row(eng_model *m, const float *lbuf, int r, int V, int32_t *out) {
    const eng_backend *be = &m->be;
    if (be->argmax) return be->argmax(be->ctx, lbuf + (size_t)r * V, 1, V, V, out);
    float *tmp = malloc((size_t)V * sizeof *tmp);
    if (!tmp) return ENG_ENOMEM;
    int rc = be->download(be->ctx, tmp, lbuf + (size_t)r * V, (size_t)V * sizeof(float));
    if (rc == 0) *out = kern_argmax(kern_isa_best(), tmp, V);
    free(tmp);
    return rc;
}

/* The logits of the R normed rows b->lx into the steps (see the file
 * comment); 0 or the backend's negative code. */
static int fwd_logits(eng_model *m, fwd_buf *b, fwd_host *h, eng_seq_step *steps, int n_steps,
                      int R, int direct) {
    const eng_backend *be = &m->be;
    int V = m->cfg.n_vocab, E = m->cfg.n_embd, rc = 0, n_amax = 0;
    float cap = m->cfg.final_logit_softcap;
    if (direct) {
        for (int s = 0, r = 0; s < n_steps; s++)
            for (int i = 0; i < fwd_rows(&steps[s]); i++, r++) {
                n_amax += steps[s].logits == ENG_LOGITS_ARGMAX;
                h->rows[r] =
                    steps[s].logits == ENG_LOGITS_ARGMAX ? NULL : steps[s].out + (size_t)i * V;
            }
        be->logits(be->ctx, R, b->lx, E, m->out.bw, h->rows, n_amax ? h->amax : NULL, b->ws);
        for (int s = 0, r = 0; s < n_steps; r += fwd_rows(&steps[s]), s++) {
            if (steps[s].logits == ENG_LOGITS_ARGMAX) *steps[s].next = h->amax[r];
            else if (cap > 0)
                for (int i = 0; i < fwd_rows(&steps[s]); i++)
                    be->softcap(be->ctx, h->rows[r + i], (size_t)V, cap);
        }
        return 0;
    }
    linear(m, b, b->lx, R, &m->out, b->lbuf, V);
    if (cap > 0) be->softcap(be->ctx, b->lbuf, (size_t)R * V, cap);
    for (int s = 0, r = 0; s < n_steps && rc == 0; r += fwd_rows(&steps[s]), s++) {
        if (steps[s].logits == ENG_LOGITS_ARGMAX)
            rc = fwd_argmax_row(m, b->lbuf, r, V, steps[s].next);
        else if (fwd_rows(&steps[s]))
            rc = be->download(be->ctx, steps[s].out, b->lbuf + (size_t)r * V,
                              (size_t)fwd_rows(&steps[s]) * V * sizeof(float));
    }
    return rc;
}

int eng_forward(eng_model *m, eng_seq_step *steps, int n_steps, char *err, size_t errlen) {
    int T = 0, R = 0;
    int rc = check_steps(m, steps, n_steps, &T, &R, err, errlen);
    if (rc) return rc;
    const eng_config *c = &m->cfg;
    const eng_backend *be = &m->be;
    int E = c->n_embd;
    fwd_host h;
    void *hmem = fwd_host_alloc(&h, T, R, n_steps);
    int direct = fwd_direct(m, steps, n_steps);
    if (!hmem) return pl_errf(err, errlen, ENG_ENOMEM, "forward: out of memory");

    /* KV blocks for every new token, all or nothing */
    for (int s = 0; s < n_steps; s++) {
        if (eng_kvseq_reserve(steps[s].kv, steps[s].n_tokens, &h.before[s]) != 0) {
            while (--s >= 0) eng_kvseq_unreserve(steps[s].kv, h.before[s]);
            free(hmem);
            return pl_errf(err, errlen, ENG_ENOMEM, "forward: out of KV blocks");
        }
    }
    fwd_buf b;
    int cached;
    char *mem = fwd_scratch_get(m, fwd_layout(m, &b, T, R, direct ? 0 : R, NULL), &cached);
    if (!mem) {
        for (int s = 0; s < n_steps; s++) eng_kvseq_unreserve(steps[s].kv, h.before[s]);
        free(hmem);
        return pl_errf(err, errlen, ENG_ENOMEM, "forward: out of memory for %d tokens", T);
    }
    fwd_layout(m, &b, T, R, direct ? 0 : R, mem);
    b.desc = h.desc;
    b.span = h.span;

    /* token ids, positions, embeddings */
    for (int s = 0, t = 0; s < n_steps; s++)
        for (int i = 0; i < steps[s].n_tokens; i++, t++) {
            h.tok[t] = steps[s].tokens[i];
            h.pos[t] = steps[s].kv->n_tokens + i;
        }
    be->upload(be->ctx, b.tok, h.tok, (size_t)T * sizeof(int32_t));
    be->upload(be->ctx, b.pos, h.pos, (size_t)T * sizeof(int32_t));
    be->embed(be->ctx, m->embd.bw, b.tok, T, c->embd_scale, b.x, E);

    eng_attn_shape shape = {.kv = &m->kv, .n_head = c->n_head, .scale = c->attn_scale};
    for (int l = 0; l < c->n_layer; l++) forward_layer(m, &b, steps, n_steps, T, l, &shape);

    /* logits for the rows asked for */
    if (R > 0) {
        int r = 0;
        for (int s = 0, t = 0; s < n_steps; t += steps[s].n_tokens, s++) {
            int n = fwd_rows(&steps[s]);
            int from = steps[s].logits == ENG_LOGITS_ALL ? t : t + steps[s].n_tokens - 1;
            if (n)
                be->copy(be->ctx, b.lx + (size_t)r * E, b.x + (size_t)from * E,
                         (size_t)n * E * sizeof(float));
            r += n;
        }
        be->rmsnorm(be->ctx, R, E, b.lx, E, m->out_norm, c->norm_eps, b.lx, E);
        rc = fwd_logits(m, &b, &h, steps, n_steps, R, direct);
    }
    if (rc == 0) {
        for (int s = 0; s < n_steps; s++)
            eng_kvseq_commit(steps[s].kv, steps[s].tokens, steps[s].n_tokens);
    } else {
        for (int s = 0; s < n_steps; s++) eng_kvseq_unreserve(steps[s].kv, h.before[s]);
        rc =
            pl_errf(err, errlen, ENG_EIO, "forward: the %s backend failed (code %d)", be->name, rc);
    }
    fwd_scratch_put(m, mem, cached);
    free(hmem);
    return rc;
}
