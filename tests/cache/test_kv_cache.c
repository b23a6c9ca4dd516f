/*
 * test_kv_cache.c -- the pool and prefix index without Redis: random
 * insert/lookup/pin/evict sequences against a naive reference model (the
 * list of inserted sequences), budget and pin invariants, the weakened-hash
 * collision hook, namespace isolation and sliding-window trimming.
 * Blocks are filled through the engine's eng_kvseq path with bytes that
 * are a pure function of their token prefix (kvt_util.h), so every block a
 * lookup returns is checked to be exactly the KV of its prefix.  After
 * every operation kv_cache_check verifies the structural invariants of
 * kv_cache.h (free lists, block owners, child counts, the LRU heap).
 * Turns resume into cached partial blocks (kv_match.partial) and lookups
 * check partial matches too: slices of a block are a function of the
 * tokens up to their position (kvt_util.h), so a copy-on-write mistake --
 * two sequences diverging inside a block seeing each other's writes --
 * fails the byte checks.
 */
#define PTEST_MAIN
#include "ptest.h"

#include "kvt_util.h"
#include "pl_err.h"

#define MAXS 600 /* reference sequences */
#define MAXT 160 /* tokens per sequence */

/* Fail the test with kv_cache_check's message when an invariant broke. */
#define KV_CHECK(c)                                                   \
    do {                                                              \
        char ce_[PL_ERR_LEN] = "";                                    \
        int cr_ = kv_cache_check((c), ce_, sizeof ce_);               \
        PT_ASSERT_MSG(cr_ == 0, "kv_cache_check: %s (%d)", ce_, cr_); \
    } while (0)

typedef struct ref_seq {
    int ns;            /* namespace index */
    int n;             /* tokens */
    int32_t tok[MAXT]; /* ids */
} ref_seq;

static ref_seq refs[MAXS];
static int n_refs;
static const char *NS[2] = {"alpha", "beta"};

static kv_cache *mk(const eng_kv_layout *l, size_t budget, int mask_bits) {
    kv_cache_config cfg;
    kv_cache_config_default(&cfg);
    cfg.budget_bytes = budget;
    cfg.max_tokens = 4096;
    cfg.hash_mask_bits = mask_bits;
    kv_cache *c = NULL;
    char err[256];
    if (kv_cache_create(&cfg, l, 0xfeedull, &c, err, sizeof err)) return NULL;
    return c;
}

/* Longest common prefix (tokens, at most n - 1) of q with any reference
 * sequence in ns: what a lookup into partial blocks can serve at most. */
static int ref_expect_tokens(int ns, const int32_t *q, int n) {
    int best = 0;
    for (int s = 0; s < n_refs; s++) {
        if (refs[s].ns != ns) continue;
        int k = 0;
        while (k < n - 1 && k < refs[s].n && refs[s].tok[k] == q[k]) k++;
        if (k > best) best = k;
    }
    return best;
}

/* Longest common prefix (blocks) of q with any reference sequence in ns. */
static int ref_expect(int ns, const int32_t *q, int n, int B) {
    int nb = n > 0 ? (n - 1) / B : 0, best = 0;
    for (int s = 0; s < n_refs; s++) {
        if (refs[s].ns != ns) continue;
        int k = 0;
        while (k < nb && (k + 1) * B <= refs[s].n &&
               !memcmp(refs[s].tok + k * B, q + k * B, sizeof(int32_t) * B))
            k++;
        if (k > best) best = k;
    }
    return best;
}

static void rand_tokens(int32_t *t, int n, int alphabet) {
    for (int i = 0; i < n; i++) t[i] = (int32_t)(pt_rand() % (uint64_t)alphabet);
}

/* Prefill tokens into a fresh sequence, resuming from the cache when it
 * can; inserts with a turn boundary.  Returns 0, or 1 when out of blocks. */
static int run_turn(kv_cache *c, const eng_kv_layout *l, int ns, const int32_t *tok, int n,
                    int *resumed) {
    eng_kv_allocator a = kv_cache_allocator(c);
    eng_kvseq s;
    char err[128];
    PT_EQ_INT(eng_kvseq_init(&s, l, &a, err, sizeof err), 0);
    void *g[MAXT], *lb[MAXT];
    kv_match m = {g, lb, MAXT, 0, 0, 0, 1, 0}; /* into partial blocks too */
    PT_EQ_INT(kv_cache_lookup(c, NS[ns], strlen(NS[ns]), tok, n, -1, &m), 0);
    *resumed = m.n_tokens;
    if (m.n_tokens) PT_EQ_INT(eng_kvseq_adopt_prefix(&s, m.n_tokens, g, lb, tok), 0);
    int rc = kvt_prefill(&s, tok + m.n_tokens, n - m.n_tokens);
    if (rc == 0) PT_EQ_INT(kv_cache_insert(c, NS[ns], strlen(NS[ns]), &s, 1), 0);
    eng_kvseq_free(&s);
    KV_CHECK(c);
    return rc ? 1 : 0;
}

/* Block i of a match holds the KV of q: whole, or its first n_partial
 * positions when it is the partial last one. */
static int match_block_ok(const eng_kv_layout *l, const kv_match *m, int kind, int i,
                          const int32_t *q) {
    void *b = kind ? m->lblk[i] : m->gblk[i];
    int upto = m->n_partial && i == m->n_blocks - 1 ? m->n_partial : l->block_tokens;
    return kvt_check_upto(l, kind, b, q, i, upto);
}

/* Look q up (into partial blocks when partial), check the result against
 * the reference and the block bytes. */
static int check_lookup(kv_cache *c, const eng_kv_layout *l, int ns, const int32_t *q, int n,
                        int exact, int partial, kv_match *keep) {
    void *g[MAXT], *lb[MAXT];
    kv_match m = {g, lb, MAXT, 0, 0, 0, partial, 0};
    if (keep) m = *keep, m.partial = partial;
    PT_EQ_INT(kv_cache_lookup(c, NS[ns], strlen(NS[ns]), q, n, -1, &m), 0);
    int B = l->block_tokens, want = ref_expect(ns, q, n, B);
    int full = m.n_blocks - (m.n_partial > 0);
    if (exact) PT_EQ_INT(full, want);
    else PT_ASSERT_MSG(full <= want, "match %d blocks > reference %d", full, want);
    PT_ASSERT(partial || m.n_partial == 0);
    PT_ASSERT(m.n_partial >= 0 && m.n_partial < B);
    PT_EQ_INT(m.n_tokens, full * B + m.n_partial);
    PT_ASSERT_MSG(m.n_tokens <= ref_expect_tokens(ns, q, n), "match %d tokens > reference %d",
                  m.n_tokens, ref_expect_tokens(ns, q, n));
    for (int i = 0; i < m.n_blocks; i++) {
        if (l->n_layers[0])
            PT_ASSERT_MSG(match_block_ok(l, &m, 0, i, q), "global block %d bytes", i);
        int live = (i + 1) * B > m.n_tokens - l->max_window;
        if (l->n_layers[1] && live) {
            PT_ASSERT_MSG(m.lblk[i] != NULL, "local block %d missing at resume %d", i, m.n_tokens);
            PT_ASSERT(match_block_ok(l, &m, 1, i, q));
        }
    }
    int got = m.n_blocks;
    if (keep) *keep = m;
    else kv_match_release(c, &m);
    KV_CHECK(c);
    return got;
}

/* A query: a prefix of a reference sequence, perhaps changed after a point. */
static int make_query(int32_t *q, int *ns) {
    int n = 1 + (int)(pt_rand() % MAXT);
    *ns = (int)(pt_rand() % 2);
    rand_tokens(q, n, 3);
    if (n_refs && pt_rand() % 4) {
        ref_seq *r = &refs[pt_rand() % (uint64_t)n_refs];
        *ns = pt_rand() % 8 ? r->ns : 1 - r->ns;
        /* Half the time a continuation of the whole sequence (the next turn). */
        int keep = pt_rand() % 2 ? r->n : (int)(pt_rand() % (uint64_t)(r->n + 1));
        if (keep > n) keep = n;
        memcpy(q, r->tok, sizeof(int32_t) * (size_t)keep);
    }
    return n;
}

PT_TEST(exact_against_reference_no_eviction) {
    eng_kv_layout l;
    PT_EQ_INT(kvt_layout(&l, 4, 2, 0), 0);
    kv_cache *c = mk(&l, 64u << 20, 0);
    PT_ASSERT(c);
    n_refs = 0;
    int32_t q[MAXT];
    for (int step = 0; step < 3000; step++) {
        int ns, n = make_query(q, &ns);
        if (pt_rand() % 3 == 0 && n_refs < MAXS) {
            int resumed;
            PT_EQ_INT(run_turn(c, &l, ns, q, n, &resumed), 0);
            PT_EQ_INT(resumed / 4, ref_expect(ns, q, n, 4));
            refs[n_refs].ns = ns;
            refs[n_refs].n = n;
            memcpy(refs[n_refs].tok, q, sizeof(int32_t) * (size_t)n);
            n_refs++;
        } else {
            check_lookup(c, &l, ns, q, n, 1, step % 2, NULL);
        }
    }
    kv_stats st;
    kv_cache_stats(c, &st);
    PT_EQ_INT(st.host.evictions, 0);
    PT_ASSERT(st.partial_hits > 20);
    PT_EQ_INT(st.blocks_used[0], st.blocks_cached[0]); /* no leaked references */
    PT_ASSERT(st.host.hits > 100);
    kv_cache_destroy(c);
}

PT_TEST(random_pin_evict_budget_window) {
    /* 6 layers (5 local window 8 + 1 global), B = 4, a pool of ~160 global
     * blocks: constant eviction pressure. */
    eng_kv_layout l;
    PT_EQ_INT(kvt_layout(&l, 4, 6, 8), 0);
    size_t budget = 160 * (l.block_bytes[0] + l.block_bytes[1]);
    kv_cache *c = mk(&l, budget, 0);
    PT_ASSERT(c);
    n_refs = 0;
    int32_t q[MAXT], hq[4][MAXT];
    int hns[4], hn[4];
    void *hg[4][MAXT], *hl[4][MAXT];
    kv_match held[4];
    for (int i = 0; i < 4; i++) held[i] = (kv_match){hg[i], hl[i], MAXT, 0, 0, 0, 0, 0};
    int full = 0;
    for (int step = 0; step < 4000; step++) {
        int ns, n = make_query(q, &ns), op = (int)(pt_rand() % 10);
        if (op < 3 && n_refs < MAXS) {
            int resumed;
            full += run_turn(c, &l, ns, q, n, &resumed);
            refs[n_refs].ns = ns;
            refs[n_refs].n = n;
            memcpy(refs[n_refs].tok, q, sizeof(int32_t) * (size_t)n);
            n_refs++;
        } else if (op < 5) {
            int h = (int)(pt_rand() % 4);
            if (held[h].n_blocks) kv_match_release(c, &held[h]);
            memcpy(hq[h], q, sizeof q);
            hns[h] = ns;
            hn[h] = n;
            check_lookup(c, &l, ns, q, n, 0, (int)(pt_rand() % 2), &held[h]);
        } else if (op < 6) {
            kv_cache_evict(c, 1 + (int)(pt_rand() % 8));
            KV_CHECK(c);
        } else {
            check_lookup(c, &l, ns, q, n, 0, (int)(pt_rand() % 2), NULL);
        }
        /* Pinned blocks keep their bytes whatever was evicted or reused. */
        for (int h = 0; h < 4; h++)
            for (int i = 0; i < held[h].n_blocks; i++)
                PT_ASSERT_MSG(match_block_ok(&l, &held[h], 0, i, hq[h]),
                              "pinned block changed (step %d, ns %d, n %d)", step, hns[h], hn[h]);
        kv_stats st;
        kv_cache_stats(c, &st);
        PT_ASSERT(st.pool_bytes <= st.budget_bytes);
        PT_ASSERT(st.blocks_used[0] <= st.blocks_total[0] &&
                  st.blocks_used[1] <= st.blocks_total[1]);
    }
    for (int h = 0; h < 4; h++) kv_match_release(c, &held[h]);
    KV_CHECK(c);
    PT_ASSERT(full < 4000); /* most turns found room */
    kv_stats st;
    kv_cache_stats(c, &st);
    PT_ASSERT_MSG(st.host.evictions > 100, "evictions %llu", (unsigned long long)st.host.evictions);
    PT_ASSERT_MSG(st.host.hits > 50, "hits %llu", (unsigned long long)st.host.hits);
    PT_EQ_INT(st.blocks_used[0], st.blocks_cached[0]);
    PT_EQ_INT(st.blocks_used[1], st.blocks_cached[1]);
    kv_cache_destroy(c);
}

PT_TEST(weakened_hash_collisions_are_misses) {
    eng_kv_layout l;
    PT_EQ_INT(kvt_layout(&l, 4, 2, 0), 0);
    kv_cache *c = mk(&l, 64u << 20, 4); /* only 16 distinct keys */
    PT_ASSERT(c);
    n_refs = 0;
    int32_t q[MAXT];
    for (int step = 0; step < 1500; step++) {
        int ns, n = make_query(q, &ns);
        if (step % 3 == 0 && n_refs < MAXS) {
            int resumed;
            PT_EQ_INT(run_turn(c, &l, ns, q, n, &resumed), 0);
            refs[n_refs].ns = ns;
            refs[n_refs].n = n;
            memcpy(refs[n_refs].tok, q, sizeof(int32_t) * (size_t)n);
            n_refs++;
        } else {
            check_lookup(c, &l, ns, q, n, 1, 0, NULL); /* exact and byte-checked */
        }
    }
    kv_stats st;
    kv_cache_stats(c, &st);
    PT_ASSERT_MSG(st.host.misses[KV_MISS_COLLISION] > 0, "the weakened hash produced no collision");
    kv_cache_destroy(c);
}

PT_TEST(namespaces_never_share) {
    for (int bits = 0; bits <= 4; bits += 4) {
        eng_kv_layout l;
        PT_EQ_INT(kvt_layout(&l, 4, 2, 0), 0);
        kv_cache *c = mk(&l, 8u << 20, bits);
        PT_ASSERT(c);
        int32_t t[41];
        rand_tokens(t, 41, 1000);
        int resumed;
        PT_EQ_INT(run_turn(c, &l, 0, t, 41, &resumed), 0);
        void *g[MAXT], *lb[MAXT];
        kv_match m = {g, lb, MAXT, 0, 0, 0, 0, 0};
        PT_EQ_INT(kv_cache_lookup(c, "alpha", 5, t, 41, -1, &m), 0);
        PT_EQ_INT(m.n_tokens, 40);
        kv_match_release(c, &m);
        PT_EQ_INT(kv_cache_lookup(c, "beta", 4, t, 41, -1, &m), 0);
        PT_EQ_INT(m.n_tokens, 0);
        PT_EQ_INT(kv_cache_lookup(c, "alph", 4, t, 41, -1, &m), 0);
        PT_EQ_INT(m.n_tokens, 0);
        PT_EQ_INT(kv_cache_lookup(c, "bad:ns", 6, t, 41, -1, &m), KV_EINVAL);
        kv_cache_destroy(c);
    }
}

PT_TEST(sliding_window_keeps_only_resume_windows) {
    /* B = 16, W = 32: a resume needs local KV of the last 2 blocks. */
    eng_kv_layout l;
    PT_EQ_INT(kvt_layout(&l, 16, 6, 32), 0);
    kv_cache *c = mk(&l, 16u << 20, 0);
    PT_ASSERT(c);
    n_refs = 0;
    int32_t t[400];
    rand_tokens(t, 400, 50000);
    int resumed;
    PT_EQ_INT(run_turn(c, &l, 0, t, 161, &resumed), 0); /* 10 full blocks and a tail of 1 */
    refs[0] = (ref_seq){0};
    kv_stats st;
    kv_cache_stats(c, &st);
    PT_EQ_INT(st.blocks_cached[0], 11);
    /* the engine already dropped dead ones; the tree keeps 2 and the tail's */
    PT_EQ_INT(st.blocks_cached[1], 3);
    PT_EQ_INT(st.inserted_tails, 1);
    /* Resume at the turn boundary works, mid-path resumes cannot. */
    void *g[64], *lb[64];
    kv_match m = {g, lb, 64, 0, 0, 0, 0, 0};
    PT_EQ_INT(kv_cache_lookup(c, "alpha", 5, t, 170, -1, &m), 0);
    PT_EQ_INT(m.n_tokens, 160);
    kv_match_release(c, &m);
    PT_EQ_INT(kv_cache_lookup(c, "alpha", 5, t, 120, -1, &m), 0);
    PT_EQ_INT(m.n_tokens, 0);
    kv_cache_stats(c, &st);
    PT_ASSERT(st.host.misses[KV_MISS_NOLOCAL] >= 1);
    /* Turn 2 extends the path: the old end is superseded and its window
     * dropped (those local blocks are not needed by any resume). */
    uint64_t before = st.local_blocks_dropped;
    PT_EQ_INT(run_turn(c, &l, 0, t, 321, &resumed), 0);
    PT_EQ_INT(resumed, 161); /* into the tail */
    kv_cache_stats(c, &st);
    /* 20 full blocks, the new tail, and the old tail (an LRU leaf now) */
    PT_EQ_INT(st.blocks_cached[0], 22);
    PT_EQ_INT(st.blocks_cached[1], 4);
    PT_EQ_INT(st.partial_hits, 1);
    PT_ASSERT(st.local_blocks_dropped >= before + 2);
    PT_EQ_INT(kv_cache_lookup(c, "alpha", 5, t, 330, -1, &m), 0);
    PT_EQ_INT(m.n_tokens, 320);
    kv_match_release(c, &m);
    m.partial = 1;
    PT_EQ_INT(kv_cache_lookup(c, "alpha", 5, t, 330, -1, &m), 0);
    PT_EQ_INT(m.n_tokens, 321);
    PT_EQ_INT(m.n_partial, 1);
    PT_ASSERT(kvt_check_upto(&l, 0, m.gblk[20], t, 20, 1) &&
              kvt_check_upto(&l, 1, m.lblk[20], t, 20, 1));
    kv_match_release(c, &m);
    kv_cache_destroy(c);
}

PT_TEST(allocator_null_when_everything_pinned) {
    eng_kv_layout l;
    PT_EQ_INT(kvt_layout(&l, 4, 2, 0), 0);
    kv_cache *c = mk(&l, 8 * l.block_bytes[0], 0);
    PT_ASSERT(c);
    eng_kv_allocator a = kv_cache_allocator(c);
    void *b[9];
    for (int i = 0; i < 8; i++) PT_ASSERT((b[i] = a.alloc(a.ctx, ENG_KV_GLOBAL)) != NULL);
    PT_ASSERT(a.alloc(a.ctx, ENG_KV_GLOBAL) == NULL);
    PT_ASSERT(a.alloc(a.ctx, ENG_KV_LOCAL) == NULL); /* no local layers */
    a.release(a.ctx, ENG_KV_GLOBAL, b[3]);
    PT_ASSERT((b[8] = a.alloc(a.ctx, ENG_KV_GLOBAL)) == b[3]);
    kv_stats st;
    kv_cache_stats(c, &st);
    PT_EQ_INT(st.alloc_fail, 1);
    for (int i = 0; i < 8; i++) a.release(a.ctx, ENG_KV_GLOBAL, b[i]);
    kv_cache_stats(c, &st);
    PT_EQ_INT(st.blocks_used[0], 0);
    kv_cache_destroy(c);
}

/* The alloc hook sees every block the pool hands out, reused ones included. */
typedef struct hook_log {
    int n;            /* calls */
    const void *last; /* last block */
} hook_log;

static void hook_fn(void *user, const void *blk) {
    hook_log *h = user;
    h->n++;
    h->last = blk;
}

PT_TEST(alloc_hook_sees_every_handout) {
    eng_kv_layout l;
    PT_EQ_INT(kvt_layout(&l, 4, 2, 0), 0);
    kv_cache *c = mk(&l, 4 * l.block_bytes[0], 0);
    PT_ASSERT(c);
    hook_log h = {0, NULL};
    kv_cache_set_alloc_hook(c, hook_fn, &h);
    eng_kv_allocator a = kv_cache_allocator(c);
    void *b0 = a.alloc(a.ctx, ENG_KV_GLOBAL), *b1 = a.alloc(a.ctx, ENG_KV_GLOBAL);
    PT_ASSERT(b0 && b1);
    PT_EQ_INT(h.n, 2);
    PT_ASSERT(h.last == b1);
    a.release(a.ctx, ENG_KV_GLOBAL, b0);
    void *b2 = a.alloc(a.ctx, ENG_KV_GLOBAL); /* the freed block, handed out anew */
    PT_EQ_INT(h.n, 3);
    PT_ASSERT(h.last == b2);
    PT_ASSERT(a.alloc(a.ctx, ENG_KV_LOCAL) == NULL); /* nothing handed out: no call */
    PT_EQ_INT(h.n, 3);
    kv_cache_set_alloc_hook(c, NULL, NULL);
    void *b3 = a.alloc(a.ctx, ENG_KV_GLOBAL);
    PT_EQ_INT(h.n, 3);
    a.release(a.ctx, ENG_KV_GLOBAL, b1);
    a.release(a.ctx, ENG_KV_GLOBAL, b2);
    a.release(a.ctx, ENG_KV_GLOBAL, b3);
    kv_cache_destroy(c);
}

PT_TEST(create_rejects_bad_config) {
    eng_kv_layout l;
    PT_EQ_INT(kvt_layout(&l, 4, 2, 0), 0);
    kv_cache_config cfg;
    kv_cache_config_default(&cfg);
    kv_cache *c = NULL;
    char err[256];
    cfg.budget_bytes = 10;
    PT_EQ_INT(kv_cache_create(&cfg, &l, 1, &c, err, sizeof err), KV_EINVAL);
    PT_ASSERT(strstr(err, "budget"));
    kv_cache_config_default(&cfg);
    cfg.hash_mask_bits = 65;
    PT_EQ_INT(kv_cache_create(&cfg, &l, 1, &c, err, sizeof err), KV_EINVAL);
    PT_ASSERT(c == NULL);
}

PT_TEST(sequences_diverging_inside_a_tail_never_share_its_block) {
    /* B = 4: a sequence of 22 tokens leaves 5 full blocks and a tail of 2.
     * Two next turns resume into that tail at once, one keeping both of its
     * tokens, one diverging after the first: each gets its own copy. */
    eng_kv_layout l;
    PT_EQ_INT(kvt_layout(&l, 4, 6, 8), 0);
    kv_cache *c = mk(&l, 16u << 20, 0);
    PT_ASSERT(c);
    int32_t a[40], x[40], y[40];
    rand_tokens(a, 40, 1000);
    memcpy(x, a, sizeof a);
    memcpy(y, a, sizeof a);
    for (int i = 22; i < 40; i++) x[i] = 2000 + i; /* continues a after its 22 tokens */
    for (int i = 21; i < 40; i++) y[i] = 3000 + i; /* diverges inside the tail, at 21 */
    int resumed;
    PT_EQ_INT(run_turn(c, &l, 0, a, 22, &resumed), 0);
    eng_kv_allocator al = kv_cache_allocator(c);
    eng_kvseq sx, sy;
    PT_EQ_INT(eng_kvseq_init(&sx, &l, &al, NULL, 0), 0);
    PT_EQ_INT(eng_kvseq_init(&sy, &l, &al, NULL, 0), 0);
    void *gx[16], *lx[16], *gy[16], *ly[16];
    kv_match mx = {gx, lx, 16, 0, 0, 0, 1, 0}, my = {gy, ly, 16, 0, 0, 0, 1, 0};
    PT_EQ_INT(kv_cache_lookup(c, "alpha", 5, x, 30, -1, &mx), 0);
    PT_EQ_INT(kv_cache_lookup(c, "alpha", 5, y, 30, -1, &my), 0);
    PT_EQ_INT(mx.n_tokens, 22);
    PT_EQ_INT(mx.n_partial, 2);
    PT_EQ_INT(my.n_tokens, 21);
    PT_EQ_INT(my.n_partial, 1);
    PT_ASSERT(gx[5] != gy[5] && lx[5] != ly[5]); /* two copies */
    PT_EQ_INT(eng_kvseq_adopt_prefix(&sx, mx.n_tokens, gx, lx, x), 0);
    PT_EQ_INT(eng_kvseq_adopt_prefix(&sy, my.n_tokens, gy, ly, y), 0);
    /* both write into their block 5 */
    PT_EQ_INT(kvt_prefill(&sx, x + 22, 8), 0);
    PT_EQ_INT(kvt_prefill(&sy, y + 21, 9), 0);
    for (int k = 0; k < 2; k++) {
        PT_ASSERT(kvt_check(&l, k, sx.blk[k][5], x, 5));
        PT_ASSERT(kvt_check(&l, k, sy.blk[k][5], y, 5));
    }
    /* the cached tail still holds a's two tokens */
    void *g[16], *lb[16];
    kv_match m = {g, lb, 16, 0, 0, 0, 1, 0};
    PT_EQ_INT(kv_cache_lookup(c, "alpha", 5, a, 30, -1, &m), 0);
    PT_EQ_INT(m.n_tokens, 22);
    PT_ASSERT(kvt_check_upto(&l, 0, g[5], a, 5, 2) && kvt_check_upto(&l, 1, lb[5], a, 5, 2));
    kv_match_release(c, &m);
    PT_EQ_INT(kv_cache_insert(c, "alpha", 5, &sx, 1), 0);
    PT_EQ_INT(kv_cache_insert(c, "alpha", 5, &sy, 1), 0);
    eng_kvseq_free(&sx);
    eng_kvseq_free(&sy);
    KV_CHECK(c);
    /* each continuation is cached with its own bytes: x's 30 tokens and y's */
    PT_EQ_INT(kv_cache_lookup(c, "alpha", 5, x, 31, -1, &m), 0);
    PT_EQ_INT(m.n_tokens, 30);
    for (int i = 0; i < m.n_blocks; i++)
        PT_ASSERT(kvt_check_upto(&l, 0, g[i], x, i, i == m.n_blocks - 1 ? m.n_partial : 4));
    kv_match_release(c, &m);
    PT_EQ_INT(kv_cache_lookup(c, "alpha", 5, y, 31, -1, &m), 0);
    PT_EQ_INT(m.n_tokens, 30);
    for (int i = 0; i < m.n_blocks; i++)
        PT_ASSERT(kvt_check_upto(&l, 0, g[i], y, i, i == m.n_blocks - 1 ? m.n_partial : 4));
    kv_match_release(c, &m);
    KV_CHECK(c);
    kv_cache_destroy(c);
}
