/*
 * test_kv.c -- paged KV bookkeeping: layout offsets and sizes with local,
 * global and KV-sharing layers; block allocation as tokens arrive; release
 * of local blocks that left every window; all-or-nothing reservation when
 * the allocator runs dry; adopting a cached prefix; truncation; forks
 * (full blocks shared through retain, the partial one copied; copies
 * without retain; all-or-nothing when blocks run out); the budget split
 * (eng_kv_layout_split).
 */
#define PTEST_MAIN
#include "ptest.h"

#include "eng_config.h"
#include "eng_kv.h"
#include "kv_budget.h"

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

static int32_t toks[256];

/* eng_kv_layout_split: the one budget rule of the cache and the scheduler:
 * within the budget always, local_share local blocks per global one, and
 * all of it to the one kind of a model without the other. */
PT_TEST(budget_split) {
    eng_config c;
    cfg6(&c);
    eng_kv_layout l;
    PT_EQ_INT(eng_kv_layout_init(&l, &c, 4, NULL, 0), 0);
    size_t gb = l.block_bytes[ENG_KV_GLOBAL], lb = l.block_bytes[ENG_KV_LOCAL];
    static const double shares[] = {0.25, 0.5, 1.0, 3.0, 64.0};
    for (size_t i = 0; i < sizeof shares / sizeof *shares; i++)
        for (size_t budget = 0; budget < 40 * (gb + lb); budget += 37) {
            long n[2];
            eng_kv_layout_split(&l, budget, shares[i], n);
            PT_ASSERT(n[0] >= 0 && n[1] >= 0);
            PT_ASSERT((size_t)n[0] * gb + (size_t)n[1] * lb <= budget);
            PT_ASSERT(n[1] <= (long)((double)n[0] * shares[i])); /* the share, never above */
            /* the global count is the most that leaves room for its share */
            PT_ASSERT((double)(n[0] + 1) * ((double)gb + shares[i] * (double)lb) > (double)budget);
        }
    int g[6] = {0, 0, 0, 0, 0, 0}, src[6] = {0, 1, 2, 3, 4, 5};
    memcpy(c.window, g, sizeof g); /* all global */
    memcpy(c.kv_src, src, sizeof src);
    PT_EQ_INT(eng_kv_layout_init(&l, &c, 4, NULL, 0), 0);
    long n[2];
    eng_kv_layout_split(&l, 10 * l.block_bytes[ENG_KV_GLOBAL] + 1, 0.5, n);
    PT_EQ_INT(n[ENG_KV_GLOBAL], 10);
    PT_EQ_INT(n[ENG_KV_LOCAL], 0);
}

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
    kv_budget b = {.left = 5};
    PT_EQ_INT(eng_kv_allocator_malloc(&b.inner, &l), 0);
    eng_kv_allocator a = kv_budget_allocator(&b);
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

/* A refcounting allocator over malloc (a header before each block), for
 * forks: retain adds a reference, release frees at the last one. */
typedef struct rc_alloc {
    size_t bytes[2]; /* block bytes per kind */
    long live[2];    /* blocks allocated */
    int refuse;      /* retain fails (the fork must copy) */
} rc_alloc;

static void *rc_a(void *ctx, int kind) {
    rc_alloc *r = ctx;
    long *p = malloc(16 + r->bytes[kind]);
    if (!p) return NULL;
    p[0] = 1;
    r->live[kind]++;
    memset((char *)p + 16, 0x5A, r->bytes[kind]);
    return (char *)p + 16;
}

static void rc_r(void *ctx, int kind, void *blk) {
    rc_alloc *r = ctx;
    long *p = (long *)((char *)blk - 16);
    if (--p[0] == 0) {
        r->live[kind]--;
        free(p);
    }
}

static int rc_ret(void *ctx, int kind, void *blk) {
    rc_alloc *r = ctx;
    (void)kind;
    if (r->refuse) return -1;
    ((long *)((char *)blk - 16))[0]++;
    return 0;
}

static long rc_refs(void *blk) { return ((long *)((char *)blk - 16))[0]; }

PT_TEST(fork_shares_full_blocks_copies_the_partial_one) {
    eng_config c;
    cfg6(&c);
    eng_kv_layout l;
    PT_EQ_INT(eng_kv_layout_init(&l, &c, 4, NULL, 0), 0);
    for (int refuse = 0; refuse < 2; refuse++) {
        rc_alloc ra = {{l.block_bytes[0], l.block_bytes[1]}, {0, 0}, refuse};
        eng_kv_allocator a = {&ra, rc_a, rc_r, rc_ret};
        eng_kvseq s, f, e;
        PT_EQ_INT(eng_kvseq_init(&s, &l, &a, NULL, 0), 0);
        int before;
        /* 14 tokens: blocks 0..2 full (block 0's local part dead: W 8), 3 partial */
        PT_EQ_INT(eng_kvseq_reserve(&s, 14, &before), 0);
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < s.n_blocks; i++) memset(s.blk[k][i], 10 * k + i, l.block_bytes[k]);
        eng_kvseq_commit(&s, toks, 14);
        PT_ASSERT(s.blk[ENG_KV_LOCAL][0] == NULL);
        PT_EQ_INT(eng_kvseq_init(&f, &l, &a, NULL, 0), 0);
        int shared = -1;
        PT_EQ_INT(eng_kvseq_fork(&f, &s, &shared), 0);
        PT_EQ_INT(shared, refuse ? 0 : 3);
        PT_EQ_INT(f.n_tokens, 14);
        PT_EQ_INT(f.n_blocks, 4);
        PT_EQ_MEM(f.tokens, s.tokens, 14 * sizeof(int32_t));
        PT_ASSERT(f.blk[ENG_KV_LOCAL][0] == NULL);
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < 4; i++) {
                if (!s.blk[k][i]) continue;
                int same = f.blk[k][i] == s.blk[k][i];
                PT_EQ_INT(same, !refuse && i < 3); /* the partial block 3 is a copy */
                if (same) PT_EQ_INT(rc_refs(s.blk[k][i]), 2);
                PT_EQ_MEM(f.blk[k][i], s.blk[k][i], l.block_bytes[k]);
            }
        /* a fork into a non-empty sequence is refused */
        PT_EQ_INT(eng_kvseq_fork(&f, &s, NULL), ENG_KV_EINVAL);
        /* both grow on their own; the shared blocks live until both let go */
        PT_EQ_INT(eng_kvseq_reserve(&f, 6, &before), 0);
        eng_kvseq_commit(&f, toks + 14, 6);
        eng_kvseq_free(&s);
        for (int k = 0; k < 2; k++)
            for (int i = 0; i < 3; i++)
                if (f.blk[k][i]) PT_EQ_INT(rc_refs(f.blk[k][i]), 1);
        PT_EQ_INT(eng_kvseq_init(&e, &l, &a, NULL, 0), 0);
        PT_EQ_INT(eng_kvseq_fork(&e, &f, NULL), 0); /* fork of a fork */
        eng_kvseq_free(&f);
        eng_kvseq_free(&e);
        PT_EQ_INT(ra.live[0], 0);
        PT_EQ_INT(ra.live[1], 0);
    }
    /* without retain (the malloc allocator): copies */
    eng_kv_allocator m;
    PT_EQ_INT(eng_kv_allocator_malloc(&m, &l), 0);
    eng_kvseq s, f;
    PT_EQ_INT(eng_kvseq_init(&s, &l, &m, NULL, 0), 0);
    int before, shared = -1;
    PT_EQ_INT(eng_kvseq_reserve(&s, 9, &before), 0);
    eng_kvseq_commit(&s, toks, 9);
    PT_EQ_INT(eng_kvseq_init(&f, &l, &m, NULL, 0), 0);
    PT_EQ_INT(eng_kvseq_fork(&f, &s, &shared), 0);
    PT_EQ_INT(shared, 0);
    PT_ASSERT(f.blk[ENG_KV_GLOBAL][0] != s.blk[ENG_KV_GLOBAL][0]);
    PT_EQ_INT(eng_kv_allocator_malloc_live(&m, ENG_KV_GLOBAL), 6);
    eng_kvseq_free(&s);
    eng_kvseq_free(&f);
    PT_EQ_INT(eng_kv_allocator_malloc_live(&m, ENG_KV_GLOBAL), 0);
    eng_kv_allocator_malloc_free(&m);
    /* out of blocks mid-fork: nothing kept */
    kv_budget b = {.left = 6};
    PT_EQ_INT(eng_kv_allocator_malloc(&b.inner, &l), 0);
    eng_kv_allocator ba = kv_budget_allocator(&b);
    PT_EQ_INT(eng_kvseq_init(&s, &l, &ba, NULL, 0), 0);
    PT_EQ_INT(eng_kvseq_reserve(&s, 9, &before), 0); /* 3 blocks x 2 kinds */
    eng_kvseq_commit(&s, toks, 9);
    PT_EQ_INT(eng_kvseq_init(&f, &l, &ba, NULL, 0), 0);
    b.left = 3;
    PT_EQ_INT(eng_kvseq_fork(&f, &s, NULL), ENG_KV_ENOMEM);
    PT_EQ_INT(f.n_tokens, 0);
    PT_EQ_INT(f.n_blocks, 0);
    PT_EQ_INT(b.left, 3);
    eng_kvseq_free(&f);
    eng_kvseq_free(&s);
    PT_EQ_INT(b.left, 9);
    eng_kv_allocator_malloc_free(&b.inner);
}
