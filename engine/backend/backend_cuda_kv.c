/*
 * backend_cuda_kv.c -- the CUDA backend's device KV tier, kv_store and
 * attention (eng_backend.h slots; design in backend_cuda_int.h).
 *
 * The tier is an inclusive, write-through cache of host blocks: every op
 * asks the tier of the block's kind for the device copy of each block it
 * touches (kern_cuda_tier_get: a hit is used as is, a miss takes a free or
 * the least recently used slot and the host bytes are uploaded into it);
 * eviction just forgets a copy.  kv_store writes the new rows into the
 * device copy and stages them for the host block (written back at the next
 * flush; the copy is dirty until then and is not evicted before).  Blocks
 * a call needs are pinned for the call; a call whose blocks do not all fit
 * is cut into several launches, and a single sequence that cannot fit is
 * an error (raise PARLEY_CUDA_KV_MIB).
 *
 * Attention builds one device table of block addresses per call: for each
 * descriptor the blocks its queries attend (kern_cuda_blocks_for), then
 * the descriptors (kern_cuda_attn_seq) go up through the staging arena and
 * one launch (plus a combine launch when the keys are split) runs them.
 * The layers of one kind in one step attend the very same blocks, so the
 * last table is remembered (cuda_attn_memo) and reused while the
 * descriptors name the same blocks, nothing was dropped from the tier and
 * the staging holding it was not reset.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda_int.h"
#include "eng_err.h"

/* ---- the tier ---------------------------------------------------------------------------- */

/* Make the tiers at the first KV op; 0, or -1 (recorded in the context).
 * A model has one layout; another one (a test driving the backend with
 * several) writes the pending rows back and starts the tiers afresh. */
static int kv_ensure(cuda_be *be, const eng_kv_layout *l) {
    if (be->have_kv) {
        if (!memcmp(l, &be->kvl, sizeof *l)) return 0;
        cuda_flush(be);
        cuda_kv_free(be);
        be->have_kv = 0;
    }
    be->kvl = *l;
    be->have_kv = 1;
    size_t budget = be->kv_budget, per = 0;
    if (!budget) {
        kern_cuda_info i;
        kern_cuda_get_info(be->kc, &i);
        budget = (size_t)((double)i.mem_free * CUDA_KV_SHARE);
    }
    for (int k = 0; k < 2; k++) per += (l->block_bytes[k] + 255) / 256 * 256;
    long cap = per ? (long)(budget / per) : 0;
    if (cap < 16) cap = 16;
    for (int k = 0; k < 2; k++) {
        cuda_tier *T = &be->tier[k];
        if (!l->block_bytes[k]) continue;
        T->bytes = l->block_bytes[k];
        T->stride = (T->bytes + 255) / 256 * 256;
        T->capacity = cap;
        T->per_chunk = (long)(CUDA_TIER_CHUNK / T->stride);
        if (T->per_chunk < 1) T->per_chunk = 1;
        T->n_chunk = (cap + T->per_chunk - 1) / T->per_chunk;
        T->chunk = calloc((size_t)T->n_chunk, sizeof *T->chunk);
        if (!T->chunk || kern_cuda_tier_create(&T->t, cap) != 0) {
            kern_cuda_fail(be->kc, KERN_CUDA_ENOMEM, "device KV tier: out of host memory");
            return -1;
        }
    }
    return 0;
}

void cuda_kv_free(cuda_be *be) {
    for (int k = 0; k < 2; k++) {
        cuda_tier *T = &be->tier[k];
        for (long c = 0; c < T->n_chunk; c++) kern_cuda_free(be->kc, T->chunk[c]);
        free(T->chunk);
        kern_cuda_tier_destroy(T->t);
        memset(T, 0, sizeof *T);
    }
    cuda_attn_memo *m = &be->memo;
    free(m->blocks);
    free(m->first);
    free(m->last);
    free(m->kind);
    free(m->tab);
    free(m->hblk);
    memset(m, 0, sizeof *m);
}

/* Device address of a slot, allocating its chunk on first use (NULL: failed, recorded). */
static uint8_t *slot_dev(cuda_be *be, cuda_tier *T, long slot) {
    long c = slot / T->per_chunk;
    if (!T->chunk[c]) {
        long n = T->capacity - c * T->per_chunk;
        if (n > T->per_chunk) n = T->per_chunk;
        T->chunk[c] = kern_cuda_malloc(be->kc, (size_t)n * T->stride);
        if (!T->chunk[c]) {
            kern_cuda_fail(be->kc, KERN_CUDA_ENOMEM,
                           "device KV tier: out of device memory at %ld blocks (lower "
                           "PARLEY_CUDA_KV_MIB)",
                           c * T->per_chunk);
            return NULL;
        }
    }
    return T->chunk[c] + (size_t)(slot % T->per_chunk) * T->stride;
}

/* The device copy of host block blk of kind k for the current call,
 * uploaded on a miss; *slot its slot.  NULL with *full = 1 when every slot
 * is pinned by this call, NULL with *full = 0 when the context failed. */
static uint8_t *kv_block(cuda_be *be, int k, void *blk, int count, long *slot, int *full) {
    cuda_tier *T = &be->tier[k];
    kern_cuda_tier_ref r;
    int rc;
    *full = 0;
    if (!T->t || !blk) {
        kern_cuda_fail(be->kc, KERN_CUDA_EINVAL, "KV op on a missing block (kind %d)", k);
        return NULL;
    }
    while ((rc = kern_cuda_tier_get(T->t, blk, count, &r)) == KERN_CUDA_TIER_DIRTY)
        cuda_flush(be); /* the victim's rows reach its host block first */
    if (rc == KERN_CUDA_TIER_FULL) {
        *full = 1;
        return NULL;
    }
    uint8_t *dev = slot_dev(be, T, r.slot);
    if (dev && !r.hit) {
        cuda_put(be, dev, blk, T->bytes);
        be->upload_bytes += T->bytes;
    }
    *slot = r.slot;
    return dev;
}

static void end_calls(cuda_be *be) {
    for (int k = 0; k < 2; k++)
        if (be->tier[k].t) kern_cuda_tier_end_call(be->tier[k].t);
}

void cuda_wb_scatter(cuda_be *be) {
    const eng_kv_layout *l = &be->kvl;
    int nkv = l->n_head_kv, ks = l->k_scales;
    size_t row = (size_t)nkv * l->head_dim * (l->kv_fp32 ? sizeof(float) : 1);
    size_t tb = kern_cuda_kv_token_bytes(nkv, l->head_dim, l->kv_fp32, ks);
    for (size_t i = 0; i < be->n_wbr; i++) {
        const cuda_wb_rec *r = &be->wbr[i];
        if (!r->blk) continue; /* cancelled */
        const uint8_t *st = be->wb.host + r->off;
        memcpy((char *)eng_kv_layer_k(l, r->blk, r->layer) + (size_t)r->slot * row, st, row);
        memcpy((char *)eng_kv_layer_v(l, r->blk, r->layer) + (size_t)r->slot * row, st + row, row);
        if (!l->kv_fp32) {
            memcpy(eng_kv_layer_kscale(l, r->blk, r->layer) + (size_t)r->slot * nkv * ks,
                   st + 2 * row, (size_t)nkv * ks * sizeof(float));
            memcpy(eng_kv_layer_vscale(l, r->blk, r->layer) + (size_t)r->slot * nkv,
                   st + 2 * row + (size_t)nkv * ks * sizeof(float), (size_t)nkv * sizeof(float));
        }
        be->writeback_bytes += tb;
    }
    be->n_wbr = 0;
}

/* ---- kv_store ------------------------------------------------------------------------------ */

/* Host scratch of a kv_store batch. */
typedef struct kvst_batch {
    kern_cuda_kvst_tok *tok; /* device addresses, slots, qkv rows */
    void **hblk;             /* host blocks */
    long *slot;              /* tier slots */
    int cap;                 /* entries allocated */
} kvst_batch;

static int batch_grow(kvst_batch *b, int n) {
    if (n <= b->cap) return 0;
    int cap = n > 2 * b->cap ? n : 2 * b->cap;
    kern_cuda_kvst_tok *t = realloc(b->tok, (size_t)cap * sizeof *t);
    if (t) b->tok = t;
    void **h = realloc(b->hblk, (size_t)cap * sizeof *h);
    if (h) b->hblk = h;
    long *s = realloc(b->slot, (size_t)cap * sizeof *s);
    if (s) b->slot = s;
    if (!t || !h || !s) return -1;
    b->cap = cap;
    return 0;
}

/* Stage, record and launch the n tokens of b. */
static void kvst_launch(cuda_be *be, const kvst_batch *b, int n, int kind, int layer,
                        const float *qkv, int ld, int col0, const kern_cuda_kvgeo *g) {
    size_t tb = kern_cuda_kv_token_bytes(g->nkv, g->hd, g->f32, g->k_scales);
    size_t upn = ((size_t)n * sizeof(kern_cuda_kvst_tok) + 255) / 256 * 256;
    size_t wbn = ((size_t)n * tb + 255) / 256 * 256;
    if (be->up.used + upn > be->up.cap || be->wb.used + wbn > be->wb.cap) cuda_flush(be);
    if (be->n_wbr + (size_t)n > be->cap_wbr) {
        size_t cap = be->n_wbr + (size_t)n > 2 * be->cap_wbr ? be->n_wbr + n : 2 * be->cap_wbr;
        cuda_wb_rec *r = realloc(be->wbr, cap * sizeof *r);
        if (!r) {
            kern_cuda_fail(be->kc, KERN_CUDA_ENOMEM, "kv_store: out of host memory");
            return;
        }
        be->wbr = r;
        be->cap_wbr = cap;
    }
    uint8_t *dtok;
    uint8_t *htok = cuda_stage(be, upn, &dtok); /* fits: flushed above if needed */
    size_t woff = be->wb.used;
    be->wb.used += wbn;
    memcpy(htok, b->tok, (size_t)n * sizeof(kern_cuda_kvst_tok));
    kern_cuda_copy_async(be->kc, dtok, htok, (size_t)n * sizeof(kern_cuda_kvst_tok));
    for (int i = 0; i < n; i++) {
        be->wbr[be->n_wbr++] = (cuda_wb_rec){
            .blk = b->hblk[i], .slot = b->tok[i].slot, .layer = layer, .off = woff + i * tb};
        kern_cuda_tier_mark_dirty(be->tier[kind].t, b->slot[i]);
    }
    kern_cuda_kvst k = {.tok = (const kern_cuda_kvst_tok *)dtok,
                        .n_tok = n,
                        .qkv = qkv,
                        .ld = ld,
                        .col0 = col0,
                        .g = *g,
                        .stage = be->wb.dev + woff};
    kern_cuda_kv_store(be->kc, &k);
}

void eng_cuda_kv_store(void *ctx, const eng_kv_layout *l, int n_head, int layer, const float *qkv,
                       int ld, const eng_kv_span *spans, int n_spans) {
    cuda_be *be = ctx;
    kvst_batch b = {0};
    cuda_lock(be);
    if (kv_ensure(be, l) != 0) goto out;
    int B = l->block_tokens, kind = l->layer_kind[layer];
    kern_cuda_kvgeo g = kern_cuda_kvgeo_make(B, l->n_head_kv, l->head_dim, l->kv_fp32, l->k_group,
                                             l->layer_offset[layer]);
    size_t tb = kern_cuda_kv_token_bytes(g.nkv, g.hd, g.f32, g.k_scales);
    long max_n = (long)((be->wb.cap / 2) / tb);
    long up_n = (long)((be->up.cap / 2) / sizeof(kern_cuda_kvst_tok));
    if (up_n < max_n) max_n = up_n;
    if (max_n < 1) {
        kern_cuda_fail(be->kc, KERN_CUDA_EINVAL, "kv_store: %zu bytes per token do not fit", tb);
        goto out;
    }
    int s = 0, t = 0;
    while (s < n_spans) {
        int n = 0;
        while (s < n_spans && n < max_n) { /* gather tokens while their blocks fit */
            const eng_kv_span *sp = &spans[s];
            if (t >= sp->n_tok) {
                s++, t = 0;
                continue;
            }
            int p = sp->pos0 + t, full;
            long slot;
            if (batch_grow(&b, n + 1) != 0) {
                kern_cuda_fail(be->kc, KERN_CUDA_ENOMEM, "kv_store: out of host memory");
                goto out;
            }
            uint8_t *dev = kv_block(be, kind, sp->blocks[p / B], 0, &slot, &full);
            if (!dev) {
                if (full && n > 0) break; /* launch what we have, then go on */
                if (full)
                    kern_cuda_fail(be->kc, KERN_CUDA_EINVAL,
                                   "device KV tier too small for kv_store (%ld blocks)",
                                   be->tier[kind].capacity);
                goto out;
            }
            b.tok[n] = (kern_cuda_kvst_tok){.blk = dev, .slot = p % B, .row = sp->t0 + t};
            b.hblk[n] = sp->blocks[p / B];
            b.slot[n] = slot;
            n++, t++;
        }
        if (n) kvst_launch(be, &b, n, kind, layer, qkv, ld, n_head * l->head_dim, &g);
        end_calls(be);
    }
out:
    end_calls(be);
    cuda_unlock(be);
    free(b.tok);
    free(b.hblk);
    free(b.slot);
}

/* ---- attention ----------------------------------------------------------------------------- */

static int tabbuf_grow(cuda_be *be, long n) {
    if (n <= be->tabbuf_cap) return 0;
    long cap = n > 2 * be->tabbuf_cap ? n : 2 * be->tabbuf_cap;
    const uint8_t **t = realloc(be->tabbuf, (size_t)cap * sizeof *t);
    if (!t) return -1;
    be->tabbuf = t;
    be->tabbuf_cap = cap;
    return 0;
}

/* Launch descriptors d[0..n) whose blocks are tabbuf[toff[i] ..] (block
 * first[i] first), or, with dtab, an already uploaded table.  Returns the
 * device table used (NULL on failure). */
static const uint8_t **attn_launch(cuda_be *be, const eng_attn_shape *s, const eng_attn_desc *d,
                                   int n, const int *first, const int *toff, long ne,
                                   const uint8_t **dtab) {
    const eng_kv_layout *l = s->kv;
    int n_items = 0, max_keys = 1;
    for (int i = 0; i < n; i++) {
        int lo, hi;
        kern_cuda_key_range(d[i].pos0 + d[i].n_q - 1, d[i].window, &lo, &hi);
        if (hi - lo + 1 > max_keys) max_keys = hi - lo + 1;
        n_items += d[i].n_q;
    }
    kern_cuda_attn a = {.n_seq = n,
                        .n_items = n_items,
                        .B = l->block_tokens,
                        .nkv = l->n_head_kv,
                        .hd = l->head_dim,
                        .n_head = s->n_head,
                        .f32 = l->kv_fp32,
                        .k_group = l->k_group,
                        .k_scales = l->k_scales,
                        .scale = s->scale};
    if (kern_cuda_attn_plan_make(&a.plan, n_items, s->n_head, l->n_head_kv, l->head_dim,
                                 l->k_scales, l->kv_fp32, max_keys, be->info.n_sm) != 0) {
        kern_cuda_fail(be->kc, KERN_CUDA_EINVAL,
                       "attention: %d heads over %d KV heads of %d not supported by the CUDA "
                       "kernel (head_dim a multiple of 4, at most %d)",
                       s->n_head, l->n_head_kv, l->head_dim, KERN_CUDA_ATTN_MAX_HD);
        return NULL;
    }
    size_t wsb = kern_cuda_attn_ws_floats(&a.plan, n_items, s->n_head, l->head_dim) * sizeof(float);
    if (wsb > be->attn_ws_bytes) {
        kern_cuda_free(be->kc, be->attn_ws);
        be->attn_ws = kern_cuda_malloc(be->kc, wsb);
        be->attn_ws_bytes = be->attn_ws ? wsb : 0;
        if (!be->attn_ws) {
            kern_cuda_fail(be->kc, KERN_CUDA_ENOMEM, "attention: no device memory for %zu bytes",
                           wsb);
            return NULL;
        }
    }
    a.ws = be->attn_ws;
    size_t sb = (size_t)n * sizeof(kern_cuda_attn_seq), tb = dtab ? 0 : (size_t)ne * sizeof(void *);
    uint8_t *dev, *h = cuda_stage(be, (sb + 255) / 256 * 256 + tb, &dev);
    if (!h) {
        kern_cuda_fail(be->kc, KERN_CUDA_ENOMEM, "attention: %d sequences' tables exceed staging",
                       n);
        return NULL;
    }
    kern_cuda_attn_seq *seq = (kern_cuda_attn_seq *)h;
    for (int i = 0, item = 0; i < n; item += d[i].n_q, i++) {
        kern_cuda_kvgeo g =
            kern_cuda_kvgeo_make(l->block_tokens, l->n_head_kv, l->head_dim, l->kv_fp32, l->k_group,
                                 l->layer_offset[d[i].layer]);
        seq[i] = (kern_cuda_attn_seq){.q = d[i].q,
                                      .out = d[i].out,
                                      .ldq = d[i].ldq,
                                      .ldo = d[i].ldo,
                                      .n_q = d[i].n_q,
                                      .pos0 = d[i].pos0,
                                      .window = d[i].window,
                                      .item0 = item,
                                      .first_blk = first[i],
                                      .tab = toff[i],
                                      .k_off = g.k_off,
                                      .v_off = g.v_off,
                                      .ks_off = g.ks_off,
                                      .vs_off = g.vs_off};
    }
    if (!dtab) {
        memcpy(h + (sb + 255) / 256 * 256, be->tabbuf, tb);
        dtab = (const uint8_t **)(dev + (sb + 255) / 256 * 256);
    }
    kern_cuda_copy_async(be->kc, dev, h, (sb + 255) / 256 * 256 + tb);
    a.seq = (const kern_cuda_attn_seq *)dev;
    a.tab = (const uint8_t *const *)dtab;
    kern_cuda_attention(be->kc, &a);
    return dtab;
}

static int memo_grow(cuda_attn_memo *m, int n, long ne) {
    if (n > m->cap) {
        int cap = n > 2 * m->cap ? n : 2 * m->cap;
        void *const **b = realloc(m->blocks, (size_t)cap * sizeof *b);
        if (b) m->blocks = b;
        int *f = realloc(m->first, (size_t)cap * sizeof *f);
        if (f) m->first = f;
        int *la = realloc(m->last, (size_t)cap * sizeof *la);
        if (la) m->last = la;
        int *k = realloc(m->kind, (size_t)cap * sizeof *k);
        if (k) m->kind = k;
        int *t = realloc(m->tab, (size_t)cap * sizeof *t);
        if (t) m->tab = t;
        if (!b || !f || !la || !k || !t) return -1;
        m->cap = cap;
    }
    if (ne > m->hcap) {
        long cap = ne > 2 * m->hcap ? ne : 2 * m->hcap;
        void **h = realloc(m->hblk, (size_t)cap * sizeof *h);
        if (!h) return -1;
        m->hblk = h;
        m->hcap = cap;
    }
    return 0;
}

/* 1 when d names exactly the blocks of the remembered table, still valid. */
static int memo_match(cuda_be *be, const eng_attn_desc *d, int n_desc) {
    const cuda_attn_memo *m = &be->memo;
    const eng_kv_layout *l = &be->kvl;
    if (!m->valid || m->epoch != be->epoch || m->n_desc != n_desc) return 0;
    for (int k = 0; k < 2; k++)
        if (be->tier[k].t && kern_cuda_tier_generation(be->tier[k].t) != m->gen[k]) return 0;
    for (int i = 0; i < n_desc; i++) {
        int first, last;
        kern_cuda_blocks_for(d[i].pos0, d[i].n_q, d[i].window, l->block_tokens, &first, &last);
        if (d[i].blocks != m->blocks[i] || first != m->first[i] || last != m->last[i] ||
            l->layer_kind[d[i].layer] != m->kind[i] ||
            memcmp(d[i].blocks + first, m->hblk + m->tab[i],
                   (size_t)(last - first + 1) * sizeof(void *)) != 0)
            return 0;
    }
    return 1;
}

static void memo_save(cuda_be *be, const eng_attn_desc *d, int n_desc, const int *first,
                      const int *toff, long ne, const uint8_t **dtab) {
    cuda_attn_memo *m = &be->memo;
    const eng_kv_layout *l = &be->kvl;
    m->valid = 0;
    if (!dtab || memo_grow(m, n_desc, ne) != 0) return;
    for (int i = 0; i < n_desc; i++) {
        m->blocks[i] = d[i].blocks;
        m->first[i] = first[i];
        m->last[i] = first[i] + (i + 1 < n_desc ? toff[i + 1] : ne) - toff[i] - 1;
        m->kind[i] = l->layer_kind[d[i].layer];
        m->tab[i] = toff[i];
        memcpy(m->hblk + toff[i], d[i].blocks + first[i],
               (size_t)(m->last[i] - first[i] + 1) * sizeof(void *));
    }
    for (int k = 0; k < 2; k++)
        m->gen[k] = be->tier[k].t ? kern_cuda_tier_generation(be->tier[k].t) : 0;
    m->epoch = be->epoch;
    m->n_desc = n_desc;
    m->n_entries = ne;
    m->dtab = dtab;
    m->valid = 1;
}

void eng_cuda_attention(void *ctx, const eng_attn_shape *s, const eng_attn_desc *d, int n_desc) {
    cuda_be *be = ctx;
    const eng_kv_layout *l = s->kv;
    int *first = NULL, *toff = NULL;
    if (n_desc <= 0) return;
    cuda_lock(be);
    if (kv_ensure(be, l) != 0) goto out;
    size_t seq_bytes = ((size_t)n_desc * sizeof(kern_cuda_attn_seq) + 255) / 256 * 256;
    if (be->up.used + seq_bytes <= be->up.cap && memo_match(be, d, n_desc)) {
        /* the previous layer's table (staging the descriptors cannot flush it away) */
        be->memo_reads += (uint64_t)be->memo.n_entries;
        attn_launch(be, s, d, n_desc, be->memo.first, be->memo.tab, be->memo.n_entries,
                    be->memo.dtab);
        goto out;
    }
    first = malloc((size_t)n_desc * sizeof *first);
    toff = malloc((size_t)n_desc * sizeof *toff);
    if (!first || !toff) {
        kern_cuda_fail(be->kc, KERN_CUDA_ENOMEM, "attention: out of host memory");
        goto out;
    }
    int B = l->block_tokens;
    for (int i0 = 0; i0 < n_desc;) {
        long ne = 0;
        int i = i0;
        for (; i < n_desc; i++) { /* take descriptors while their blocks fit */
            int f, la, kind = l->layer_kind[d[i].layer], full = 0;
            kern_cuda_blocks_for(d[i].pos0, d[i].n_q, d[i].window, B, &f, &la);
            if (tabbuf_grow(be, ne + la - f + 1) != 0) {
                kern_cuda_fail(be->kc, KERN_CUDA_ENOMEM, "attention: out of host memory");
                goto out;
            }
            for (int b = f; b <= la && !full; b++) {
                long slot;
                const uint8_t *dev = kv_block(be, kind, d[i].blocks[b], 1, &slot, &full);
                if (!dev && !full) goto out; /* failed (recorded) */
                be->tabbuf[ne + b - f] = dev;
            }
            if (full) {
                if (i == i0) {
                    kern_cuda_fail(be->kc, KERN_CUDA_EINVAL,
                                   "device KV tier holds %ld blocks: too few for one sequence's "
                                   "%d (raise PARLEY_CUDA_KV_MIB)",
                                   be->tier[kind].capacity, la - f + 1);
                    goto out;
                }
                break;
            }
            first[i] = f;
            toff[i] = (int)ne;
            ne += la - f + 1;
        }
        const uint8_t **dtab = attn_launch(be, s, d + i0, i - i0, first + i0, toff + i0, ne, NULL);
        if (i0 == 0 && i == n_desc) memo_save(be, d, n_desc, first, toff, ne, dtab);
        end_calls(be);
        i0 = i;
    }
out:
    end_calls(be);
    cuda_unlock(be);
    free(first);
    free(toff);
}

/* ---- invalidation and counters --------------------------------------------------------------- */

void eng_cuda_kv_invalidate(void *ctx, const void *blk) {
    cuda_be *be = ctx;
    cuda_lock(be);
    for (int k = 0; k < 2; k++) {
        int dirty = 0;
        if (!be->tier[k].t || !kern_cuda_tier_invalidate(be->tier[k].t, blk, &dirty) || !dirty)
            continue;
        for (size_t i = 0; i < be->n_wbr; i++) /* its rows must not land in the new content */
            if (be->wbr[i].blk == blk) be->wbr[i].blk = NULL;
    }
    cuda_unlock(be);
}

void eng_cuda_kv_tier(void *ctx, eng_backend_kv_tier *out) {
    cuda_be *be = ctx;
    memset(out, 0, sizeof *out);
    cuda_lock(be);
    for (int k = 0; k < 2; k++) {
        kern_cuda_tier_stats st;
        if (!be->tier[k].t) continue;
        kern_cuda_tier_stats_get(be->tier[k].t, &st);
        out->lookups += st.lookups;
        out->hits += st.hits;
        out->uploads += st.misses;
        out->evictions += st.evictions;
        out->invalidations += st.invalidations;
        out->resident += st.resident;
        out->capacity += st.capacity;
    }
    out->lookups += be->memo_reads;
    out->hits += be->memo_reads;
    out->upload_bytes = be->upload_bytes;
    out->writeback_bytes = be->writeback_bytes;
    cuda_unlock(be);
}
