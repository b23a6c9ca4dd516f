/*
 * test_sched_spec.c -- speculative decoding in the scheduler, on a
 * synthetic cai-tiny model (MQA, local window shortened to 32 tokens, so
 * verify chunks cross window and block boundaries) written at test time.
 * Every test compares against the same requests run with drafting off.
 *
 *   greedy_identical_ngram   prompt lookup on prompts that repeat
 *                            themselves: identical tokens and logits (bit
 *                            for bit) alone and batched; drafts were made
 *                            and some accepted
 *   oracle_stop_and_limit    a drafter that guesses the reference exactly:
 *                            every draft accepted, a stop token inside an
 *                            accepted draft ends the request there,
 *                            max_tokens is never exceeded
 *   rejects_every_draft      a drafter that is always wrong: same tokens,
 *                            nothing accepted, one token per verify step
 *   rule_turns_drafting_off  n decoding sequences draft at most
 *                            spec_max_batch_tokens / n - 1 tokens each;
 *                            none once that is 0
 *   preemption_tiny_budget   drafting under a KV budget that forces
 *                            preemption: same tokens, budget never
 *                            exceeded, every block back
 *   window_truncation        eng_spec_max_draft on the real KV: a chunk of
 *                            1 + max_draft tokens can always be cut back,
 *                            one more sometimes cannot
 *   sampling_runs            temperature / top-k / penalty requests with
 *                            drafting finish with max_tokens tokens
 */
#define PTEST_MAIN
#include "ptest.h"

#include "eng_sampler.h"
#include "eng_spec.h"
#include "sched_util.h"

#define NV 768 /* cai-tiny vocabulary */

static eng_model *g_model;

static eng_model *model(void) {
    if (!g_model) g_model = su_model("cai-tiny", 32, 2);
    return g_model;
}

/* A scheduler; spec = ENG_SCHED_SPEC_OFF / _NGRAM; fn = custom drafter. */
static eng_sched *mk(int spec, int k, int max_batch_tokens, size_t budget, eng_sched_draft_fn fn,
                     void *ctx) {
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.max_running = 8;
    cfg.speculative = spec;
    cfg.spec_tokens = k;
    cfg.spec_max_batch_tokens = max_batch_tokens;
    cfg.draft_fn = fn;
    cfg.draft_ctx = ctx;
    cfg.batch_window_us = 20000; /* requests submitted together start together */
    if (budget) {
        cfg.kv_budget_bytes = budget;
        cfg.local_share = 1.0;
        cfg.step_tokens = 64;
        cfg.fairness_ms = 50;
        cfg.max_running = 16;
    }
    eng_sched *s = NULL;
    char err[256];
    if (eng_sched_create(model(), &cfg, NULL, &s, err, sizeof err) != 0)
        fprintf(stderr, "  create: %s\n", err);
    return s;
}

/* Prompt i of the tests: a random head, a random phrase repeated, the head
 * again -- so prompt lookup finds n-grams to continue. */
static int mk_prompt(int32_t *p, int i) {
    int head = 5 + 7 * i, phrase = 6 + (i % 3);
    int n = 0;
    su_tokens(p, head, NV, 300 + (uint64_t)i);
    n = head;
    int32_t ph[16];
    su_tokens(ph, phrase, NV, 700 + (uint64_t)i);
    for (int r = 0; r < 3; r++)
        for (int j = 0; j < phrase; j++) p[n++] = ph[j];
    for (int j = 0; j < head; j++) p[n++] = p[j];
    return n;
}

/* Submit n requests (prompts from mk_prompt, max_tokens g, stop token
 * `stop` when >= 0) together; wait; stats into st. */
static void run(eng_sched *s, su_coll *c, int n, int g, int32_t stop, eng_sched_stats *st) {
    char err[256];
    static int32_t prompts[16][256];
    for (int i = 0; i < n; i++) {
        int np = mk_prompt(prompts[i], i);
        eng_sched_request r;
        su_request(c, i, &r, prompts[i], np, g);
        if (stop >= 0) {
            r.sampling.n_stop = 1;
            r.sampling.stop[0] = stop;
        }
        PT_EQ_INT(eng_sched_submit(s, &r, &c->reqs[i].id, err, sizeof err), 0);
    }
    PT_EQ_INT(su_wait(c, n, 60000), 0);
    eng_sched_close(s, 1); /* the loop has counted its last step */
    eng_sched_stats_get(s, st);
    eng_sched_free(s);
    for (int i = 0; i < n; i++) PT_ASSERT(c->reqs[i].order_ok && !c->reqs[i].tokens_after_done);
}

/* Same tokens (and logits bit for bit when both kept them). */
static void same(const su_req *a, const su_req *b, int n_vocab) {
    PT_EQ_INT(a->n_tokens, b->n_tokens);
    PT_EQ_INT(a->res.n_tokens, b->res.n_tokens);
    PT_EQ_INT(a->res.finish, b->res.finish);
    PT_EQ_MEM(a->tokens, b->tokens, (size_t)a->n_tokens * sizeof(int32_t));
    PT_EQ_MEM(a->res_tokens, b->res_tokens, (size_t)a->res.n_tokens * sizeof(int32_t));
    if (n_vocab) PT_EQ_MEM(a->logits, b->logits, (size_t)a->n_tokens * n_vocab * sizeof(float));
}

enum { NREQ = 4, GEN = 48 };

PT_TEST(greedy_identical_ngram) {
    PT_ASSERT(model());
    su_coll off, batch;
    eng_sched_stats st;
    su_coll_init(&off, NREQ, NV);
    run(mk(ENG_SCHED_SPEC_OFF, 6, 64, 0, NULL, NULL), &off, NREQ, GEN, -1, &st);
    PT_EQ_INT(st.spec_drafted, 0);
    /* alone: one request per scheduler */
    uint64_t drafted = 0, accepted = 0, steps = 0;
    for (int i = 0; i < NREQ; i++) {
        su_coll one;
        su_coll_init(&one, 1, NV);
        eng_sched *s = mk(ENG_SCHED_SPEC_NGRAM, 6, 64, 0, NULL, NULL);
        char err[256];
        int32_t p[256];
        int np = mk_prompt(p, i);
        eng_sched_request r;
        su_request(&one, 0, &r, p, np, GEN);
        PT_EQ_INT(eng_sched_submit(s, &r, &one.reqs[0].id, err, sizeof err), 0);
        PT_EQ_INT(su_wait(&one, 1, 60000), 0);
        eng_sched_close(s, 1);
        eng_sched_stats_get(s, &st);
        eng_sched_free(s);
        drafted += st.spec_drafted;
        accepted += st.spec_accepted;
        PT_ASSERT(st.steps <= GEN); /* prefill + at most one decode step per token */
        steps += st.steps;
        same(&off.reqs[i], &one.reqs[0], NV);
        su_coll_free(&one);
    }
    fprintf(stderr, "  alone: drafted %llu accepted %llu\n", (unsigned long long)drafted,
            (unsigned long long)accepted);
    PT_ASSERT(drafted > 0 && accepted > 0 && accepted <= drafted);
    /* fewer steps than tokens over the four (whether one request's output
     * repeats its prompt, so that prompt lookup finds drafts, depends on the
     * ISA's rounding of the synthetic model) */
    PT_ASSERT(steps < (uint64_t)NREQ * GEN);
    /* batched: all together, the rule lets every sequence draft */
    su_coll_init(&batch, NREQ, NV);
    run(mk(ENG_SCHED_SPEC_NGRAM, 6, 64, 0, NULL, NULL), &batch, NREQ, GEN, -1, &st);
    PT_ASSERT(st.spec_drafted > 0 && st.spec_accepted > 0);
    PT_ASSERT(st.generated_tokens == (uint64_t)NREQ * GEN);
    for (int i = 0; i < NREQ; i++) same(&off.reqs[i], &batch.reqs[i], NV);
    su_coll_free(&off);
    su_coll_free(&batch);
}

/* Drafters that know the reference tokens (from a run with drafting off). */
typedef struct oracle {
    su_coll *ref; /* reference run */
    int wrong;    /* 1: guess a token other than the reference's */
} oracle;

static int oracle_draft(void *ctx, const int32_t *toks, int n, int n_prompt, int32_t *out, int k) {
    oracle *o = ctx;
    for (int i = 0; i < o->ref->n; i++) {
        int32_t p[256];
        int np = mk_prompt(p, i);
        if (np != n_prompt || memcmp(p, toks, (size_t)np * sizeof *p)) continue;
        const su_req *q = &o->ref->reqs[i];
        int at = n - n_prompt, got = 0;
        for (; got < k && at + got < q->n_tokens; got++) {
            int32_t t = q->tokens[at + got];
            out[got] = o->wrong ? (t + 1 + got) % NV : t;
        }
        return got;
    }
    return 0;
}

PT_TEST(oracle_stop_and_limit) {
    PT_ASSERT(model());
    su_coll ref, c;
    eng_sched_stats st;
    su_coll_init(&ref, NREQ, 0);
    run(mk(ENG_SCHED_SPEC_OFF, 6, 64, 0, NULL, NULL), &ref, NREQ, GEN, -1, &st);
    oracle o = {&ref, 0};
    /* every guess is right: each verify step emits k + 1 tokens */
    su_coll_init(&c, NREQ, 0);
    run(mk(ENG_SCHED_SPEC_NGRAM, 6, 64, 0, oracle_draft, &o), &c, NREQ, GEN, -1, &st);
    PT_ASSERT(st.spec_drafted > 0);
    PT_EQ_INT(st.spec_accepted, st.spec_drafted);
    PT_EQ_INT(st.generated_tokens, (uint64_t)NREQ * GEN);
    for (int i = 0; i < NREQ; i++) same(&ref.reqs[i], &c.reqs[i], 0);
    su_coll_free(&c);
    /* max_tokens not a multiple of k + 1: never exceeded */
    for (int g = 1; g <= 9; g++) {
        su_coll_init(&c, NREQ, 0);
        run(mk(ENG_SCHED_SPEC_NGRAM, 6, 64, 0, oracle_draft, &o), &c, NREQ, g, -1, &st);
        for (int i = 0; i < NREQ; i++) {
            PT_EQ_INT(c.reqs[i].res.finish, ENG_SCHED_LENGTH);
            PT_EQ_INT(c.reqs[i].n_tokens, g);
            PT_EQ_MEM(c.reqs[i].tokens, ref.reqs[i].tokens, (size_t)g * sizeof(int32_t));
        }
        su_coll_free(&c);
    }
    /* a stop token: request 0's token 9 (inside an accepted draft: the
     * first verify step emits tokens 1..7, the second 8..14) */
    int32_t stop = ref.reqs[0].tokens[9];
    int first[NREQ];
    for (int i = 0; i < NREQ; i++) {
        first[i] = GEN;
        for (int t = 0; t < GEN; t++)
            if (ref.reqs[i].tokens[t] == stop) {
                first[i] = t;
                break;
            }
    }
    su_coll_init(&c, NREQ, 0);
    run(mk(ENG_SCHED_SPEC_NGRAM, 6, 64, 0, oracle_draft, &o), &c, NREQ, GEN, stop, &st);
    for (int i = 0; i < NREQ; i++) {
        const su_req *q = &c.reqs[i];
        int want = first[i] < GEN ? first[i] + 1 : GEN;
        PT_EQ_INT(q->res.finish, first[i] < GEN ? ENG_SCHED_STOP : ENG_SCHED_LENGTH);
        PT_EQ_INT(q->n_tokens, want);
        PT_EQ_INT(q->res.n_tokens, want);
        PT_EQ_MEM(q->tokens, ref.reqs[i].tokens, (size_t)want * sizeof(int32_t));
    }
    PT_EQ_INT(st.alloc_live[0], 0);
    su_coll_free(&c);
    su_coll_free(&ref);
}

PT_TEST(rejects_every_draft) {
    PT_ASSERT(model());
    su_coll ref, c;
    eng_sched_stats st;
    su_coll_init(&ref, NREQ, NV);
    run(mk(ENG_SCHED_SPEC_OFF, 6, 64, 0, NULL, NULL), &ref, NREQ, GEN, -1, &st);
    uint64_t steps_off = st.steps;
    oracle o = {&ref, 1};
    su_coll_init(&c, NREQ, NV);
    run(mk(ENG_SCHED_SPEC_NGRAM, 6, 64, 0, oracle_draft, &o), &c, NREQ, GEN, -1, &st);
    PT_ASSERT(st.spec_steps > 0 && st.spec_drafted > 0);
    PT_EQ_INT(st.spec_accepted, 0);
    PT_EQ_INT(st.generated_tokens, (uint64_t)NREQ * GEN);
    PT_EQ_INT(st.steps, steps_off); /* one token per step, as without drafting */
    for (int i = 0; i < NREQ; i++) same(&ref.reqs[i], &c.reqs[i], NV);
    PT_EQ_INT(st.alloc_live[0], 0);
    PT_EQ_INT(st.alloc_live[1], 0);
    su_coll_free(&c);
    su_coll_free(&ref);
}

PT_TEST(rule_turns_drafting_off) {
    PT_ASSERT(model());
    su_coll ref, c;
    eng_sched_stats st;
    su_coll_init(&ref, NREQ, 0);
    run(mk(ENG_SCHED_SPEC_OFF, 6, 64, 0, NULL, NULL), &ref, NREQ, GEN, -1, &st);
    oracle o = {&ref, 0};
    /* the four start together (the batching window) and, drafting the
     * reference, finish together: every decode step has four sequences */
    const int thr[] = {28, 14, 8, 7, 1}, per[] = {6, 2, 1, 0, 0};
    for (int t = 0; t < 5; t++) {
        su_coll_init(&c, NREQ, 0);
        run(mk(ENG_SCHED_SPEC_NGRAM, 6, thr[t], 0, oracle_draft, &o), &c, NREQ, GEN, -1, &st);
        for (int i = 0; i < NREQ; i++) same(&ref.reqs[i], &c.reqs[i], 0);
        fprintf(stderr, "  spec_max_batch_tokens %d: %llu drafted in %llu verify steps\n", thr[t],
                (unsigned long long)st.spec_drafted, (unsigned long long)st.spec_steps);
        /* 4 sequences share thr rows: thr / 4 - 1 drafted tokens each */
        PT_ASSERT(st.spec_drafted <= (uint64_t)per[t] * st.spec_steps);
        if (per[t]) PT_ASSERT(st.spec_drafted > 0);
        else PT_EQ_INT(st.spec_drafted, 0);
        su_coll_free(&c);
    }
    su_coll_free(&ref);
}

PT_TEST(preemption_tiny_budget) {
    PT_ASSERT(model());
    enum { N = 8, G = 60 };
    su_coll ref, c;
    eng_sched_stats st;
    su_coll_init(&ref, N, 0);
    run(mk(ENG_SCHED_SPEC_OFF, 6, 256, 0, NULL, NULL), &ref, N, G, -1, &st);
    const eng_kv_layout *l = eng_model_kv_layout(model());
    size_t budget = (l->block_bytes[0] + l->block_bytes[1]) * 16;
    for (int fn = 0; fn < 2; fn++) {
        oracle o = {&ref, 0};
        su_coll_init(&c, N, 0);
        run(mk(ENG_SCHED_SPEC_NGRAM, 6, 256, budget, fn ? oracle_draft : NULL, &o), &c, N, G, -1,
            &st);
        fprintf(stderr, "  %s: %llu preemptions, drafted %llu accepted %llu, peak %ld/%ld\n",
                fn ? "oracle" : "ngram", (unsigned long long)st.preemptions,
                (unsigned long long)st.spec_drafted, (unsigned long long)st.spec_accepted,
                st.alloc_live_peak[0], st.blocks_total[0]);
        PT_ASSERT(st.preemptions > 0 && st.spec_accepted > 0);
        for (int k = 0; k < 2; k++) {
            PT_ASSERT(st.alloc_live_peak[k] <= st.blocks_total[k]);
            PT_EQ_INT(st.alloc_live[k], 0);
        }
        for (int i = 0; i < N; i++) same(&ref.reqs[i], &c.reqs[i], 0);
        su_coll_free(&c);
    }
    su_coll_free(&ref);
}

PT_TEST(window_truncation) {
    PT_ASSERT(model());
    const eng_kv_layout *l = eng_model_kv_layout(model());
    PT_ASSERT(l->n_layers[1] > 0 && l->max_window == 32);
    eng_kv_allocator a;
    PT_EQ_INT(eng_kv_allocator_malloc(&a, l), 0);
    enum { K = 12, LEN = 120 };
    int32_t toks[LEN + K + 1];
    su_tokens(toks, LEN + K + 1, NV, 5);
    float *out = malloc((size_t)(K + 1) * NV * sizeof(float));
    char err[256];
    int tight = 0;
    for (int n_kv = 0; n_kv < LEN; n_kv += 3) {
        int k = eng_spec_max_draft(l, n_kv, K);
        for (int extra = 0; extra < 2; extra++) {
            int kk = k + extra;
            if (extra && kk > K) break;
            eng_kvseq kv;
            PT_EQ_INT(eng_kvseq_init(&kv, l, &a, err, sizeof err), 0);
            eng_seq_step st = {.kv = &kv,
                               .tokens = toks,
                               .n_tokens = n_kv,
                               .logits = ENG_LOGITS_NONE,
                               .out = NULL};
            if (n_kv) PT_EQ_INT(eng_forward(model(), &st, 1, err, sizeof err), 0);
            eng_seq_step v = {.kv = &kv,
                              .tokens = toks + n_kv,
                              .n_tokens = 1 + kk,
                              .logits = ENG_LOGITS_ALL,
                              .out = out};
            PT_EQ_INT(eng_forward(model(), &v, 1, err, sizeof err), 0);
            int rc = eng_kvseq_truncate(&kv, n_kv + 1);
            if (!extra) PT_EQ_INT(rc, 0);
            else tight += rc != 0;
            eng_kvseq_free(&kv);
        }
    }
    PT_ASSERT(tight > 0);                      /* the bound is not loose */
    PT_EQ_INT(eng_spec_max_draft(l, 0, K), K); /* short sequences: no limit */
    PT_EQ_INT(eng_kv_allocator_malloc_live(&a, 0), 0);
    free(out);
    eng_kv_allocator_malloc_free(&a);
}

PT_TEST(sampling_runs) {
    PT_ASSERT(model());
    su_coll c;
    su_coll_init(&c, NREQ, 0);
    eng_sched *s = mk(ENG_SCHED_SPEC_NGRAM, 6, 64, 0, NULL, NULL);
    PT_ASSERT(s);
    char err[256];
    static int32_t p[NREQ][256];
    for (int i = 0; i < NREQ; i++) {
        int np = mk_prompt(p[i], i);
        eng_sched_request r;
        su_request(&c, i, &r, p[i], np, GEN);
        r.sampling.temperature = 0.3f + 0.3f * (float)i;
        r.sampling.top_k = i == 1 ? 5 : 0;
        r.sampling.top_p = i == 2 ? 0.9f : 1.0f;
        r.sampling.repetition_penalty = i == 3 ? 1.2f : 1.0f;
        r.sampling.seed = 11 + (uint64_t)i;
        PT_EQ_INT(eng_sched_submit(s, &r, &c.reqs[i].id, err, sizeof err), 0);
    }
    PT_EQ_INT(su_wait(&c, NREQ, 60000), 0);
    eng_sched_close(s, 1);
    eng_sched_stats st;
    eng_sched_stats_get(s, &st);
    eng_sched_free(s);
    PT_ASSERT(st.spec_drafted > 0);
    for (int i = 0; i < NREQ; i++) {
        PT_EQ_INT(c.reqs[i].res.finish, ENG_SCHED_LENGTH);
        PT_EQ_INT(c.reqs[i].n_tokens, GEN);
        PT_ASSERT(c.reqs[i].order_ok);
    }
    PT_EQ_INT(st.alloc_live[0], 0);
    su_coll_free(&c);
    eng_model_free(g_model); /* last test */
    g_model = NULL;
}
