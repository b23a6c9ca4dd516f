/*
 * test_kv.c -- paged KV bookkeeping: layout offsets and sizes with local,
 * global and KV-sharing layers; block allocation as tokens arrive; release
 * of local blocks that left every window; all-or-nothing reservation when
 * the allocator runs dry; adopting a cached prefix; truncation.
 */
#define PTEST_MAIN
#include "ptest.h"

#include "eng_kv.h"

/* 6 layers: 0 local owner, 1 shares 0, 2 global owner, 3 local owner,
 * 4 shares 3, 5 global owner.  Window 8. */
static void cfg6(eng_config *c) {
    memset(c, 0, sizeof *c);
    c->n_layer = 6;
    c->n_head = 4;
    c->n_head_kv = 2;
    c->head_dim = 8;
    int win[6] = {8, 8, 0, 8, 8, 0}, src[6] = {0, 0, 2, 3, 3, 5};
    memcpy(c->window, win, sizeof win);
    memcpy(c->kv_src, src, sizeof src);
}

PT_TEST(layout_offsets_and_sizes) {
    eng_config c;
    cfg6(&c);
    eng_kv_layout l;
    char err[128];
    PT_EQ_INT(eng_kv_layout_init(&l, &c, 4, err, sizeof err), 0);
    size_t per = 2 * 4 * 2 * 8 + 2 * 4 * 2 * 4; /* K,V int8 + K,V scales */
    PT_EQ_INT(l.layer_bytes, per);
    PT_EQ_INT(l.n_layers[ENG_KV_LOCAL], 2);
    PT_EQ_INT(l.n_layers[ENG_KV_GLOBAL], 2);
    PT_EQ_INT(l.block_bytes[ENG_KV_LOCAL], 2 * per);
    PT_EQ_INT(l.max_window, 8);
    PT_EQ_INT(l.layer_kind[1], ENG_KV_LOCAL);
    PT_EQ_INT(l.layer_offset[1], 0);
    PT_EQ_INT(l.layer_offset[4], per);
    PT_EQ_INT(l.layer_offset[5], per);
    PT_EQ_INT(l.layer_kind[5], ENG_KV_GLOBAL);
    char blk[4096];
    PT_ASSERT((char *)eng_kv_layer_v(&l, blk, 3) == blk + per + 4 * 2 * 8);
    PT_ASSERT((char *)eng_kv_layer_kscale(&l, blk, 3) == blk + per + 2 * 4 * 2 * 8);
    PT_ASSERT((char *)eng_kv_layer_vscale(&l, blk, 3) == blk + per + 2 * 4 * 2 * 8 + 4 * 2 * 4);
    /* head_dim 64: K gets one scale per 32 values (2 per head), V one per head */
    c.head_dim = 64;
    PT_EQ_INT(eng_kv_layout_init(&l, &c, 4, err, sizeof err), 0);
    PT_EQ_INT(l.k_group, 32);
    PT_EQ_INT(l.k_scales, 2);
    size_t per64 = 2 * 4 * 2 * 64 + 4 * 2 * (2 + 1) * 4;
    PT_EQ_INT(l.layer_bytes, per64);
    PT_ASSERT((char *)eng_kv_layer_kscale(&l, blk, 3) == blk + per64 + 2 * 4 * 2 * 64);
    PT_ASSERT((char *)eng_kv_layer_vscale(&l, blk, 3) ==
              blk + per64 + 2 * 4 * 2 * 64 + 4 * 2 * 2 * 4);
    c.head_dim = 8;
    eng_kv_layout lf;
    PT_EQ_INT(eng_kv_layout_init_ex(&lf, &c, 4, 1, err, sizeof err), 0);
    PT_EQ_INT(lf.layer_bytes, 2 * 4 * 2 * 8 * 4);
    PT_ASSERT(eng_kv_layer_kscale(&lf, blk, 0) == NULL);
    /* invalid: sharing a non-owner, mismatched window, bad block size */
    c.kv_src[4] = 1;
    PT_EQ_INT(eng_kv_layout_init(&l, &c, 4, err, sizeof err), ENG_KV_EINVAL);
    PT_ASSERT(strstr(err, "layer 4"));
    cfg6(&c);
    c.window[4] = 0;
    PT_EQ_INT(eng_kv_layout_init(&l, &c, 4, err, sizeof err), ENG_KV_EINVAL);
    cfg6(&c);
    PT_EQ_INT(eng_kv_layout_init(&l, &c, 0, err, sizeof err), ENG_KV_EINVAL);
}

/* Allocator with a block budget over the malloc one. */
typedef struct budget {
    eng_kv_allocator inner; /* malloc allocator */
    int left;               /* blocks still allowed */
} budget;

static void *b_alloc(void *ctx, int kind) {
    budget *b = ctx;
    if (b->left <= 0) return NULL;
    b->left--;
    return b->inner.alloc(b->inner.ctx, kind);
}

static void b_release(void *ctx, int kind, void *blk) {
    budget *b = ctx;
    b->left++;
    b->inner.release(b->inner.ctx, kind, blk);
}

static int32_t toks[256];

PT_TEST(sequence_grows_and_drops_dead_local_blocks) {
    eng_config c;
    cfg6(&c);
    eng_kv_layout l;
    PT_EQ_INT(eng_kv_layout_init(&l, &c, 4, NULL, 0), 0);
    eng_kv_allocator a;
    PT_EQ_INT(eng_kv_allocator_malloc(&a, &l), 0);
    eng_kvseq s;
    PT_EQ_INT(eng_kvseq_init(&s, &l, &a, NULL, 0), 0);
    for (int i = 0; i < 256; i++) toks[i] = i * 3;
    int before;
    for (int n = 0; n < 40;) {
        int step = n < 10 ? 5 : 1;
        PT_EQ_INT(eng_kvseq_reserve(&s, step, &before), 0);
        PT_EQ_INT(s.n_blocks, (n + step + 3) / 4);
        eng_kvseq_commit(&s, toks + n, step);
        n += step;
        PT_EQ_INT(s.n_tokens, n);
        for (int i = 0; i < s.n_blocks; i++) {
            PT_ASSERT(s.blk[ENG_KV_GLOBAL][i] != NULL);
            int dead = (i + 1) * 4 <= n - 8;
            PT_EQ_INT(s.blk[ENG_KV_LOCAL][i] == NULL, dead);
        }
    }
    PT_EQ_INT(eng_kv_allocator_malloc_live(&a, ENG_KV_GLOBAL), 10);
    PT_ASSERT(eng_kv_allocator_malloc_live(&a, ENG_KV_LOCAL) <= 3);
    PT_EQ_MEM(s.tokens, toks, 40 * sizeof(int32_t));
    /* truncating into released local blocks is refused, within the window is fine */
    PT_EQ_INT(eng_kvseq_truncate(&s, 20), ENG_KV_EINVAL);
    PT_EQ_INT(eng_kvseq_truncate(&s, 41), ENG_KV_EINVAL);
    PT_EQ_INT(eng_kvseq_truncate(&s, 40), 0);
    eng_kvseq_free(&s);
    PT_EQ_INT(eng_kvseq_init(&s, &l, &a, NULL, 0), 0);
    PT_EQ_INT(eng_kvseq_reserve(&s, 10, &before), 0);
    eng_kvseq_commit(&s, toks, 10);
    PT_EQ_INT(eng_kvseq_truncate(&s, 5), 0); /* nothing released yet: fine */
    PT_EQ_INT(s.n_tokens, 5);
    PT_EQ_INT(s.n_blocks, 2);
    PT_EQ_INT(eng_kv_allocator_malloc_live(&a, ENG_KV_LOCAL), 2);
    eng_kvseq_free(&s);
    PT_EQ_INT(eng_kv_allocator_malloc_live(&a, ENG_KV_GLOBAL), 0);
    PT_EQ_INT(eng_kv_allocator_malloc_live(&a, ENG_KV_LOCAL), 0);
    eng_kv_allocator_malloc_free(&a);
}

PT_TEST(reserve_is_all_or_nothing) {
    eng_config c;
    cfg6(&c);
    eng_kv_layout l;
    PT_EQ_INT(eng_kv_layout_init(&l, &c, 4, NULL, 0), 0);
    budget b = {.left = 5};
    PT_EQ_INT(eng_kv_allocator_malloc(&b.inner, &l), 0);
    eng_kv_allocator a = {&b, b_alloc, b_release, NULL};
    eng_kvseq s;
    PT_EQ_INT(eng_kvseq_init(&s, &l, &a, NULL, 0), 0);
    int before;
    PT_EQ_INT(eng_kvseq_reserve(&s, 8, &before), 0); /* 2 blocks x 2 kinds */
    eng_kvseq_commit(&s, toks, 8);
    PT_EQ_INT(b.left, 1);
    PT_EQ_INT(eng_kvseq_reserve(&s, 8, &before), ENG_KV_ENOMEM);
    PT_EQ_INT(b.left, 1);
    PT_EQ_INT(s.n_blocks, 2);
    PT_EQ_INT(s.n_tokens, 8);
    eng_kvseq_free(&s);
    PT_EQ_INT(b.left, 5);
    eng_kv_allocator_malloc_free(&b.inner);
}

PT_TEST(adopt_prefix_checks_live_blocks) {
    eng_config c;
    cfg6(&c);
    eng_kv_layout l;
    PT_EQ_INT(eng_kv_layout_init(&l, &c, 4, NULL, 0), 0);
    eng_kv_allocator a;
    PT_EQ_INT(eng_kv_allocator_malloc(&a, &l), 0);
    void *g[4], *lo[4];
    for (int i = 0; i < 4; i++) {
        g[i] = a.alloc(a.ctx, ENG_KV_GLOBAL);
        lo[i] = i >= 1 ? a.alloc(a.ctx, ENG_KV_LOCAL) : NULL; /* block 0 dead at 16 tokens, W 8 */
    }
    eng_kvseq s;
    PT_EQ_INT(eng_kvseq_init(&s, &l, &a, NULL, 0), 0);
    void *lo_nolast[4] = {lo[0], lo[1], lo[2], NULL};
    PT_EQ_INT(eng_kvseq_adopt_prefix(&s, 15, g, lo_nolast, toks),
              ENG_KV_EINVAL); /* a partial last block is live */
    void *lo_bad[4] = {lo[0], lo[1], NULL, lo[3]};
    PT_EQ_INT(eng_kvseq_adopt_prefix(&s, 16, g, lo_bad, toks),
              ENG_KV_EINVAL); /* live block missing */
    PT_EQ_INT(eng_kvseq_adopt_prefix(&s, 16, g, lo, toks), 0);
    PT_EQ_INT(s.n_tokens, 16);
    PT_EQ_INT(eng_kvseq_adopt_prefix(&s, 16, g, lo, toks), ENG_KV_EINVAL); /* not empty */
    eng_kvseq_free(&s);
    PT_EQ_INT(eng_kv_allocator_malloc_live(&a, ENG_KV_GLOBAL), 0);
    PT_EQ_INT(eng_kv_allocator_malloc_live(&a, ENG_KV_LOCAL), 0);
    eng_kv_allocator_malloc_free(&a);
}
