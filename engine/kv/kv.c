/*
 * kv.c -- paged KV layout, the malloc block allocator and per-sequence
 * block tables (eng_kv.h).
 *
 * The layout is computed once per model (from its configuration, by
 * engine/model/kv_layout.c): every KV-owning layer gets a fixed byte range
 * inside the blocks of its kind; sharing layers point at their source's
 * range.  Sequences grow their tables by doubling, allocate
 * blocks ahead of a forward step (eng_kvseq_reserve, all-or-nothing) and
 * drop local blocks that no future query can attend (eng_kvseq_commit).
 */
#include "eng_kv.h"
#include "eng_err.h"
#include "pl_err.h"

#include <assert.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void *eng_kv_layer_k(const eng_kv_layout *l, void *blk, int layer) {
    return (char *)blk + l->layer_offset[layer];
}

void *eng_kv_layer_v(const eng_kv_layout *l, void *blk, int layer) {
    size_t es = l->kv_fp32 ? sizeof(float) : 1;
    return (char *)blk + l->layer_offset[layer] +
           (size_t)l->block_tokens * l->n_head_kv * l->head_dim * es;
}

float *eng_kv_layer_kscale(const eng_kv_layout *l, void *blk, int layer) {
    if (l->kv_fp32) return NULL;
    return (float *)((char *)blk + l->layer_offset[layer] +
                     2 * (size_t)l->block_tokens * l->n_head_kv * l->head_dim);
}

float *eng_kv_layer_vscale(const eng_kv_layout *l, void *blk, int layer) {
    if (l->kv_fp32) return NULL;
    return eng_kv_layer_kscale(l, blk, layer) +
           (size_t)l->block_tokens * l->n_head_kv * l->k_scales;
}

/* ---- malloc allocator --------------------------------------------------- */

typedef struct kv_malloc_ctx {
    size_t bytes[2]; /* block size per kind */
    long live[2];    /* blocks currently allocated per kind */
} kv_malloc_ctx;

static void *kv_malloc_alloc(void *ctx, int kind) {
    kv_malloc_ctx *c = ctx;
    if (kind < 0 || kind > 1 || c->bytes[kind] == 0) return NULL;
    void *p = malloc(c->bytes[kind]);
    if (p) c->live[kind]++;
    return p;
}

static void kv_malloc_release(void *ctx, int kind, void *blk) {
    kv_malloc_ctx *c = ctx;
    if (!blk) return;
    c->live[kind]--;
    free(blk);
}

int eng_kv_allocator_malloc(eng_kv_allocator *a, const eng_kv_layout *l) {
    kv_malloc_ctx *c = calloc(1, sizeof *c);
    if (!c) return ENG_KV_ENOMEM;
    c->bytes[0] = l->block_bytes[0];
    c->bytes[1] = l->block_bytes[1];
    a->ctx = c;
    a->alloc = kv_malloc_alloc;
    a->release = kv_malloc_release;
    a->retain = NULL; /* no reference counts: forks copy */
    return 0;
}

void eng_kv_allocator_malloc_free(eng_kv_allocator *a) {
    if (!a) return;
    free(a->ctx);
    a->ctx = NULL;
}

long eng_kv_allocator_malloc_live(const eng_kv_allocator *a, int kind) {
    const kv_malloc_ctx *c = a->ctx;
    return c && kind >= 0 && kind < 2 ? c->live[kind] : 0;
}

/* ---- sequences ------------------------------------------------------------ */

int eng_kvseq_init(eng_kvseq *s, const eng_kv_layout *l, const eng_kv_allocator *a, char *err,
                   size_t errlen) {
    if (!s || !l || !a || !a->alloc || !a->release)
        return pl_errf(err, errlen, ENG_KV_EINVAL, "kvseq: NULL layout or allocator");
    memset(s, 0, sizeof *s);
    s->layout = l;
    s->alloc = *a;
    return 0;
}

static void kv_release_from(eng_kvseq *s, int from) {
    for (int i = from; i < s->n_blocks; i++)
        for (int k = 0; k < 2; k++)
            if (s->blk[k] && s->blk[k][i]) {
                s->alloc.release(s->alloc.ctx, k, s->blk[k][i]);
                s->blk[k][i] = NULL;
            }
}

void eng_kvseq_free(eng_kvseq *s) {
    if (!s) return;
    kv_release_from(s, 0);
    free(s->blk[0]);
    free(s->blk[1]);
    free(s->tokens);
    memset(s, 0, sizeof *s);
}

static int kv_grow(eng_kvseq *s, int need_blocks) {
    if (need_blocks <= s->cap_blocks) return 0;
    int cap = s->cap_blocks ? s->cap_blocks : 4;
    while (cap < need_blocks) {
        if (cap > (1 << 24)) return ENG_KV_ENOMEM;
        cap *= 2;
    }
    size_t B = (size_t)s->layout->block_tokens;
    for (int k = 0; k < 2; k++) {
        void **t = realloc(s->blk[k], (size_t)cap * sizeof *t);
        if (!t) return ENG_KV_ENOMEM;
        memset(t + s->cap_blocks, 0, (size_t)(cap - s->cap_blocks) * sizeof *t);
        s->blk[k] = t;
    }
    int32_t *tok = realloc(s->tokens, (size_t)cap * B * sizeof *tok);
    if (!tok) return ENG_KV_ENOMEM;
    s->tokens = tok;
    s->cap_blocks = cap;
    return 0;
}

int eng_kvseq_adopt_prefix(eng_kvseq *s, int n_tokens, void *const *gblk, void *const *lblk,
                           const int32_t *tokens) {
    const eng_kv_layout *l = s->layout;
    int B = l->block_tokens;
    if (s->n_tokens != 0 || n_tokens < 0 || (n_tokens > 0 && !tokens)) return ENG_KV_EINVAL;
    int nb = (n_tokens + B - 1) / B;
    if ((l->n_layers[0] && !gblk && nb) || (l->n_layers[1] && !lblk && nb)) return ENG_KV_EINVAL;
    for (int i = 0; i < nb; i++) {
        if (l->n_layers[0] && !gblk[i]) return ENG_KV_EINVAL;
        /* a query at position n_tokens attends (n_tokens - W, n_tokens] */
        int live = (i + 1) * B > n_tokens - l->max_window;
        if (l->n_layers[1] && live && !lblk[i]) return ENG_KV_EINVAL;
    }
    if (kv_grow(s, nb) != 0) return ENG_KV_ENOMEM;
    for (int i = 0; i < nb; i++) {
        s->blk[0][i] = l->n_layers[0] ? gblk[i] : NULL;
        s->blk[1][i] = l->n_layers[1] ? lblk[i] : NULL;
    }
    if (n_tokens) memcpy(s->tokens, tokens, (size_t)n_tokens * sizeof *tokens);
    s->n_blocks = nb;
    s->n_tokens = n_tokens;
    return 0;
}

int eng_kvseq_fork(eng_kvseq *dst, const eng_kvseq *src, int *n_shared) {
    if (n_shared) *n_shared = 0;
    if (!dst || !src || dst->n_tokens || dst->n_blocks || dst->layout != src->layout ||
        dst->alloc.ctx != src->alloc.ctx || dst->alloc.alloc != src->alloc.alloc)
        return ENG_KV_EINVAL;
    const eng_kv_layout *l = src->layout;
    int B = l->block_tokens, nb = src->n_blocks, full = src->n_tokens / B;
    if (full > nb) return ENG_KV_EINVAL;
    if (kv_grow(dst, nb) != 0) return ENG_KV_ENOMEM;
    int shared = 0;
    for (int i = 0; i < nb; i++) {
        /* a block past the stored tokens (reserved, never written) is not forked */
        if ((long)i * B >= src->n_tokens) break;
        int share = i < full && dst->alloc.retain;
        for (int k = 0; k < 2; k++) {
            void *b = src->blk[k] ? src->blk[k][i] : NULL;
            if (!b || !l->n_layers[k]) continue;
            if (share && dst->alloc.retain(dst->alloc.ctx, k, b) == 0) {
                dst->blk[k][i] = b;
                continue;
            }
            share = 0;
            void *c = dst->alloc.alloc(dst->alloc.ctx, k);
            if (!c) {
                dst->n_blocks = i + 1;
                kv_release_from(dst, 0);
                dst->n_blocks = 0;
                return ENG_KV_ENOMEM;
            }
            memcpy(c, b, l->block_bytes[k]);
            dst->blk[k][i] = c;
        }
        dst->n_blocks = i + 1;
        if (share && shared == i) shared = i + 1; /* leading blocks only */
    }
    if (src->n_tokens) memcpy(dst->tokens, src->tokens, (size_t)src->n_tokens * sizeof(int32_t));
    dst->n_tokens = src->n_tokens;
    if (n_shared) *n_shared = shared;
    return 0;
}

int eng_kvseq_truncate(eng_kvseq *s, int n_tokens) {
    const eng_kv_layout *l = s->layout;
    int B = l->block_tokens;
    if (n_tokens < 0 || n_tokens > s->n_tokens) return ENG_KV_EINVAL;
    int nb = (n_tokens + B - 1) / B;
    if (l->n_layers[1])
        for (int i = 0; i < nb; i++)
            if ((i + 1) * B > n_tokens - l->max_window && !s->blk[1][i]) return ENG_KV_EINVAL;
    kv_release_from(s, nb);
    s->n_blocks = nb;
    s->n_tokens = n_tokens;
    return 0;
}

int eng_kvseq_reserve(eng_kvseq *s, int n_new, int *n_blocks_before) {
    const eng_kv_layout *l = s->layout;
    int B = l->block_tokens;
    *n_blocks_before = s->n_blocks;
    if (n_new < 0 || s->n_tokens > (1 << 30) - n_new) return ENG_KV_EINVAL;
    int need = (s->n_tokens + n_new + B - 1) / B;
    if (kv_grow(s, need) != 0) return ENG_KV_ENOMEM;
    for (int i = s->n_blocks; i < need; i++) {
        for (int k = 0; k < 2; k++) {
            if (!l->n_layers[k]) continue;
            void *b = s->alloc.alloc(s->alloc.ctx, k);
            if (!b) {
                int before = *n_blocks_before;
                s->n_blocks = i + 1; /* release what this call allocated */
                eng_kvseq_unreserve(s, before);
                return ENG_KV_ENOMEM;
            }
            s->blk[k][i] = b;
        }
    }
    s->n_blocks = need;
    return 0;
}

void eng_kvseq_unreserve(eng_kvseq *s, int n_blocks_before) {
    kv_release_from(s, n_blocks_before);
    s->n_blocks = n_blocks_before;
}

void eng_kvseq_commit(eng_kvseq *s, const int32_t *tok, int n_new) {
    const eng_kv_layout *l = s->layout;
    int B = l->block_tokens;
    memcpy(s->tokens + s->n_tokens, tok, (size_t)n_new * sizeof *tok);
    s->n_tokens += n_new;
    if (!l->n_layers[1]) return;
    for (int i = 0; i < s->n_blocks && (i + 1) * B <= s->n_tokens - l->max_window; i++)
        if (s->blk[1][i]) {
            s->alloc.release(s->alloc.ctx, ENG_KV_LOCAL, s->blk[1][i]);
            s->blk[1][i] = NULL;
        }
}

void eng_kv_layout_split(const eng_kv_layout *l, size_t budget, double local_share, long n[2]) {
    size_t gb = l->n_layers[0] ? l->block_bytes[0] : 0;
    size_t lb = l->n_layers[1] ? l->block_bytes[1] : 0;
    n[0] = n[1] = 0;
    if (gb && lb) {
        double per = (double)gb + local_share * (double)lb;
        n[0] = (long)((double)budget / per);
        n[1] = (long)((double)n[0] * local_share);
        while (n[1] > 0 && (size_t)n[0] * gb + (size_t)n[1] * lb > budget) n[1]--;
    } else if (gb) {
        n[0] = (long)(budget / gb);
    } else if (lb) {
        n[1] = (long)(budget / lb);
    }
    assert((size_t)n[0] * gb + (size_t)n[1] * lb <= budget);
}
