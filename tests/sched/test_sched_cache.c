/*
 * test_sched_cache.c -- the scheduler over the real KV cache (kv_cache via
 * cache/kv_sched_ops.c, no Redis), on a synthetic cai-tiny model (local
 * window shortened to 32 tokens) written at test time.
 *
 *   turn_reuse            turn N+1 of a conversation reuses turn N's KV
 *                         including the reply (cached tokens >= previous
 *                         prompt + reply - one block) and gives the same
 *                         tokens as a scheduler without a cache; another
 *                         namespace gets no hit
 *   cache_preemption      a pool smaller than the concurrent requests:
 *                         all complete with the uncached tokens, the
 *                         victims' KV is parked in the cache and reused
 *                         on resume, no block stays pinned
 *   ordering_fairness     requests with hot prefixes overtake a cold one
 *                         (cache-aware order: all of them with an unbounded
 *                         fairness, none with bound 0) but never once the
 *                         cold one has waited the bound (plus one step)
 *   stop_keeps_n          eng_sched_stop(n_keep) after the loop ran past
 *                         the stop: the result has n_keep tokens and the
 *                         cache holds the KV of the prompt and n_keep - 1
 *                         of them, down to the token, nothing after
 *   choices_over_cache    n = 4 over the pool's reference counts: each
 *                         choice equals the request alone, the prompt
 *                         prefilled once, nothing left pinned; also in a
 *                         pool too small for every choice at once
 */
#define PTEST_MAIN
#include "ptest.h"

#include "kv_cache.h"
#include "kv_sched_ops.h"
#include "sched_rec.h"
#include "sched_util.h"

#define NV 768
#define B 16

static eng_model *g_model;

static eng_model *model(void) {
    if (!g_model) g_model = su_model("cai-tiny", 32, 2);
    return g_model;
}

static kv_cache *mk_cache_on(eng_model *m, size_t budget) {
    kv_cache_config cfg;
    kv_cache_config_default(&cfg);
    cfg.budget_bytes = budget;
    cfg.local_share = 1.0;
    kv_fp_inputs fi = {"llama", eng_model_digest(m), "test", 1, B};
    kv_cache *c = NULL;
    char err[256];
    if (kv_cache_create(&cfg, eng_model_kv_layout(m), kv_fingerprint(&fi), &c, err, sizeof err) !=
        0)
        fprintf(stderr, "  cache: %s\n", err);
    return c;
}

static kv_cache *mk_cache(size_t budget) { return mk_cache_on(model(), budget); }

static eng_sched *mk_sched_on(eng_model *m, kv_cache *kc, int max_running, int step_tokens,
                              int fairness_ms) {
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.max_running = max_running;
    cfg.step_tokens = step_tokens;
    cfg.fairness_ms = fairness_ms;
    eng_sched_cache_ops ops;
    if (kc && kv_sched_ops_init(&ops, kc) != 0) return NULL;
    eng_sched *s = NULL;
    char err[256];
    if (eng_sched_create(m, &cfg, kc ? &ops : NULL, &s, err, sizeof err) != 0)
        fprintf(stderr, "  create: %s\n", err);
    return s;
}

static eng_sched *mk_sched(kv_cache *kc, int max_running, int step_tokens, int fairness_ms) {
    return mk_sched_on(model(), kc, max_running, step_tokens, fairness_ms);
}

PT_TEST(turn_reuse) {
    PT_ASSERT(model());
    kv_cache *kc = mk_cache((size_t)8 << 20);
    PT_ASSERT(kc);
    eng_sched *on = mk_sched(kc, 8, 512, 200), *off = mk_sched(NULL, 8, 512, 200);
    PT_ASSERT(on && off);
    static int32_t conv[2048];
    int n = 40;
    su_tokens(conv, n, NV, 11);
    const int reply_max[] = {20, 13, 31, 9};
    const int user_len[] = {25, 7, 40, 0};
    static su_req a, b;
    int prev_total = 0;
    for (int t = 0; t < 4; t++) {
        PT_EQ_INT(su_run_one(on, conv, n, reply_max[t], "alice", &a), 0);
        PT_EQ_INT(su_run_one(off, conv, n, reply_max[t], "alice", &b), 0);
        PT_EQ_INT(a.res.finish, ENG_SCHED_LENGTH);
        PT_EQ_INT(a.n_tokens, reply_max[t]);
        PT_EQ_MEM(a.tokens, b.tokens, (size_t)reply_max[t] * sizeof(int32_t));
        PT_EQ_INT(b.res.cached_tokens, 0);
        if (t > 0) {
            PT_ASSERT_MSG(a.res.cached_tokens >= prev_total - B,
                          "turn %d: %d cached, previous prompt + reply %d", t, a.res.cached_tokens,
                          prev_total);
        }
        /* next turn: the conversation so far + the reply + a user message */
        memcpy(conv + n, a.tokens, (size_t)a.n_tokens * sizeof(int32_t));
        n += a.n_tokens;
        prev_total = n;
        su_tokens(conv + n, user_len[t], NV, 50 + (uint64_t)t);
        n += user_len[t];
    }
    /* another namespace never hits alice's blocks */
    PT_EQ_INT(su_run_one(on, conv, n, 2, "bob", &a), 0);
    PT_EQ_INT(a.res.cached_tokens, 0);
    eng_sched_free(on);
    eng_sched_free(off);
    kv_stats ks;
    kv_cache_stats(kc, &ks);
    PT_EQ_INT(ks.blocks_used[0], ks.blocks_cached[0]); /* nothing pinned */
    kv_cache_destroy(kc);
}

PT_TEST(cache_preemption) {
    PT_ASSERT(model());
    enum { N = 10, P = 20, G = 60 };
    static int32_t prompts[N][P];
    for (int i = 0; i < N; i++) su_tokens(prompts[i], P, NV, 700 + (uint64_t)i);
    char err[256];
    su_coll ref, c;
    su_coll_init(&ref, N, 0);
    su_coll_init(&c, N, 0);
    eng_sched *s = mk_sched(NULL, 16, 512, 50);
    PT_ASSERT(s);
    for (int i = 0; i < N; i++) {
        eng_sched_request r;
        su_request(&ref, i, &r, prompts[i], P, G);
        PT_EQ_INT(eng_sched_submit(s, &r, &ref.reqs[i].id, err, sizeof err), 0);
    }
    PT_EQ_INT(su_wait(&ref, N, 60000), 0);
    eng_sched_free(s);
    const eng_kv_layout *l = eng_model_kv_layout(model());
    kv_cache *kc = mk_cache((l->block_bytes[0] + l->block_bytes[1]) * 14);
    PT_ASSERT(kc);
    s = mk_sched(kc, 16, 64, 50);
    PT_ASSERT(s);
    for (int i = 0; i < N; i++) {
        eng_sched_request r;
        su_request(&c, i, &r, prompts[i], P, G);
        r.ns = "t";
        r.ns_len = 1;
        PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[i].id, err, sizeof err), 0);
    }
    PT_EQ_INT(su_wait(&c, N, 60000), 0);
    eng_sched_stats st;
    eng_sched_stats_get(s, &st);
    eng_sched_free(s);
    PT_ASSERT(st.preemptions > 0);
    PT_ASSERT(st.blocks_held_peak[0] <= st.blocks_total[0]);
    for (int i = 0; i < N; i++) {
        PT_EQ_INT(c.reqs[i].res.finish, ENG_SCHED_LENGTH);
        PT_EQ_MEM(c.reqs[i].tokens, ref.reqs[i].tokens, G * sizeof(int32_t));
    }
    /* resumed sequences found their parked KV: less was prefilled than
     * the recomputation of every preempted token would need */
    kv_stats ks;
    kv_cache_stats(kc, &ks);
    PT_ASSERT(ks.host.hit_tokens > 0);
    PT_EQ_INT(ks.blocks_used[0], ks.blocks_cached[0]);
    PT_ASSERT(ks.blocks_used[0] <= ks.blocks_total[0]);
    kv_cache_destroy(kc);
    su_coll_free(&ref);
    su_coll_free(&c);
}

/* One ordering phase: a blocker occupies the only slot; meanwhile a cold
 * request and then NH hot ones (cached 64-token prefix) queue up.  Returns
 * how many hot requests were admitted before the cold one, and checks the
 * fairness bound: none of them was admitted later than fairness_ms (plus
 * the longest step and 5 ms of slack) after the cold request's submit. */
enum { NH = 12, H = 64 };
static int order_phase(kv_cache *kc, int fairness_ms, int32_t (*hot)[H + 4], uint64_t cold_seed,
                       double *cold_queue_ms) {
    int32_t cold[H + 4]; /* a fresh cold prompt per phase (earlier ones are cached) */
    su_tokens(cold, H + 4, NV, cold_seed);
    eng_sched *s = mk_sched(kc, 1, 32, fairness_ms);
    PT_ASSERT(s);
    su_coll c;
    su_coll_init(&c, NH + 2, 0);
    char err[256];
    eng_sched_request r;
    int32_t blocker[8] = {5, 6, 7, 8, 9, 10, 11, 12};
    su_request(&c, NH + 1, &r, blocker, 8, 40);
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[NH + 1].id, err, sizeof err), 0);
    for (int i = 0; i < 20000; i++) { /* the blocker runs */
        pthread_mutex_lock(&c.mu);
        int n = c.reqs[NH + 1].n_tokens;
        pthread_mutex_unlock(&c.mu);
        if (n >= 1) break;
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    for (int i = 0; i <= NH; i++) { /* cold first, then hot */
        su_request(&c, i, &r, i ? hot[i] : cold, H + 4, 4);
        r.ns = "n";
        r.ns_len = 1;
        PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[i].id, err, sizeof err), 0);
    }
    PT_EQ_INT(su_wait(&c, NH + 2, 60000), 0);
    eng_sched_stats st;
    eng_sched_stats_get(s, &st);
    eng_sched_free(s);
    const eng_sched_result *rc = &c.reqs[0].res;
    PT_EQ_INT(rc->cached_tokens, 0);
    int overtook = 0;
    int64_t bound = (int64_t)fairness_ms * 1000 + (int64_t)(st.step_ms_max * 1000) + 5000;
    for (int i = 1; i <= NH; i++) {
        const eng_sched_result *rh = &c.reqs[i].res;
        PT_ASSERT(rh->cached_tokens >= H);
        if (rh->admit_seq < rc->admit_seq) {
            overtook++;
            PT_ASSERT_MSG(rh->admit_us - rc->submit_us <= bound,
                          "hot %d admitted %.1f ms after the cold request's submit (bound %d ms)",
                          i, (rh->admit_us - rc->submit_us) / 1e3, fairness_ms);
        }
    }
    fprintf(stderr,
            "  fairness %d ms: %d of %d hot requests overtook the cold one (queue %.1f ms)\n",
            fairness_ms, overtook, NH, rc->queue_ms);
    *cold_queue_ms = rc->queue_ms;
    su_coll_free(&c);
    return overtook;
}

PT_TEST(ordering_fairness) {
    PT_ASSERT(model());
    kv_cache *kc = mk_cache((size_t)8 << 20);
    PT_ASSERT(kc);
    static int32_t hot[NH + 1][H + 4];
    su_tokens(hot[0], H, NV, 31);
    eng_sched *s = mk_sched(kc, 2, 32, 200);
    PT_ASSERT(s);
    su_req warm;
    PT_EQ_INT(su_run_one(s, hot[0], H, 1, "n", &warm), 0); /* caches the hot prefix */
    eng_sched_free(s);
    for (int i = 1; i <= NH; i++) {
        memcpy(hot[i], hot[0], H * sizeof(int32_t));
        su_tokens(hot[i] + H, 4, NV, 1000 + (uint64_t)i);
    }
    double q_all, q_none, q;
    /* no effective bound: pure cache-aware order, the cold one goes last */
    PT_EQ_INT(order_phase(kc, 1000000, hot, 97, &q_all), NH);
    /* bound 0: everyone is overdue at once, submit order */
    PT_EQ_INT(order_phase(kc, 0, hot, 98, &q_none), 0);
    /* a bound that expires after about 3 hot requests went first: they may
     * overtake only within it (checked inside) */
    int f = (int)(q_none + 3 * (q_all - q_none) / NH);
    order_phase(kc, f, hot, 99, &q);
    kv_cache_destroy(kc);
    eng_model_free(g_model);
    g_model = NULL;
}

PT_TEST(stop_keeps_n) {
    /* the preset's 1024-token window: no local block is released within
     * this request, so the cut back to n_keep always applies */
    eng_model *m = su_model("cai-tiny", 0, 2);
    PT_ASSERT(m);
    kv_cache *kc = mk_cache_on(m, (size_t)8 << 20);
    PT_ASSERT(kc);
    eng_sched *s = mk_sched_on(m, kc, 4, 512, 200);
    PT_ASSERT(s);
    enum { P = 40, KEEP = 6, SEEN = 12 };
    int32_t prompt[P];
    su_tokens(prompt, P, NV, 4242);
    su_coll c;
    su_coll_init(&c, 1, 0);
    eng_sched_request r;
    su_request(&c, 0, &r, prompt, P, 400);
    char err[256];
    PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[0].id, err, sizeof err), 0);
    int seen = 0;
    for (int i = 0; i < 30000 && seen < SEEN; i++) { /* the loop is past KEEP */
        pthread_mutex_lock(&c.mu);
        seen = c.reqs[0].n_tokens;
        pthread_mutex_unlock(&c.mu);
        struct timespec ts = {0, 1000000};
        if (seen < SEEN) nanosleep(&ts, NULL);
    }
    PT_ASSERT(seen >= SEEN);
    PT_EQ_INT(eng_sched_stop(s, c.reqs[0].id, KEEP), 0);
    PT_EQ_INT(su_wait(&c, 1, 30000), 0);
    const su_req *q = &c.reqs[0];
    PT_EQ_INT(q->res.finish, ENG_SCHED_STOP);
    PT_EQ_INT(q->res.n_tokens, KEEP);
    PT_EQ_MEM(q->res_tokens, q->tokens, (size_t)KEEP * sizeof(int32_t));
    /* the cache serves the prompt and KEEP - 1 generated tokens (the last
     * kept one was never fed), however far the loop had run */
    int32_t query[P + SEEN];
    memcpy(query, prompt, sizeof prompt);
    memcpy(query + P, q->tokens, (size_t)SEEN * sizeof(int32_t));
    void *arr[2 * (P + SEEN)];
    kv_match km = {arr, arr + P + SEEN, P + SEEN, 0, 0, 0, 1, 0};
    PT_EQ_INT(kv_cache_lookup(kc, "", 0, query, P + SEEN, -1, &km), 0);
    PT_EQ_INT(km.n_tokens, P + KEEP - 1);
    kv_match_release(kc, &km);
    eng_sched_free(s);
    su_coll_free(&c);
    kv_cache_destroy(kc);
    eng_model_free(m);
}

/* n > 1 over the cache's allocator: the pool's reference counts carry the
 * shared prompt blocks (retain), each choice equals the request alone, the
 * prompt is prefilled once, nothing stays pinned; in a pool too small for
 * all choices at once the choices still finish with the same tokens. */
PT_TEST(choices_over_cache) {
    PT_ASSERT(model());
    enum { P = 40, G = 24 };
    int32_t prompt[P];
    su_tokens(prompt, P, NV, 4242);
    su_req one;
    eng_sched *s = mk_sched(NULL, 16, 512, 50);
    PT_EQ_INT(su_run_one(s, prompt, P, G, "", &one), 0);
    eng_sched_free(s);
    const eng_kv_layout *l = eng_model_kv_layout(model());
    size_t blk = l->block_bytes[0] + l->block_bytes[1];
    for (int tight = 0; tight < 2; tight++) {
        kv_cache *kc = mk_cache(tight ? blk * 7 : (size_t)8 << 20);
        PT_ASSERT(kc);
        s = mk_sched(kc, 16, 64, 50);
        PT_ASSERT(s);
        eng_sched_request q;
        memset(&q, 0, sizeof q);
        q.prompt = prompt;
        q.n_prompt = P;
        eng_sampler_params_default(&q.sampling);
        q.max_tokens = G;
        q.n = 4;
        q.ns = "c";
        q.ns_len = 1;
        sr_req *r = malloc(sizeof *r);
        sr_init(r, 0);
        sr_bind(r, &q);
        char err[256];
        PT_EQ_INT(eng_sched_submit(s, &q, &r->id, err, sizeof err), 0);
        PT_EQ_INT(sr_wait(r, 60000), 0);
        eng_sched_stats st;
        eng_sched_close(s, 1);
        eng_sched_stats_get(s, &st);
        eng_sched_free(s);
        PT_EQ_INT(r->res.n_choices, 4);
        for (int c = 0; c < 4; c++) {
            PT_EQ_INT(r->fin[c], ENG_SCHED_LENGTH);
            PT_EQ_MEM(r->rt[c], one.res_tokens, G * sizeof(int32_t));
        }
        if (!tight) {
            PT_EQ_INT(st.prefill_tokens, P);
            PT_EQ_INT(st.forks, 3);
        } else {
            PT_ASSERT(st.preemptions > 0 || st.forks < 3);
        }
        kv_stats ks;
        kv_cache_stats(kc, &ks);
        PT_EQ_INT(ks.blocks_used[0], ks.blocks_cached[0]); /* nothing pinned */
        PT_EQ_INT(ks.blocks_used[1], ks.blocks_cached[1]);
        kv_cache_destroy(kc);
        sr_free(r);
        free(r);
    }
}
