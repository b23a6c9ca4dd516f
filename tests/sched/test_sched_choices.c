/*
 * test_sched_choices.c -- log-probabilities and n > 1 choices in the
 * scheduler (issue 33), on sched_cons.h's fixture (a synthetic cai-tiny
 * model written at test time).  Constrained decoding alone:
 * test_sched_constraint.c.
 *
 *   logprobs_log_softmax      logprobs equal a log-softmax of the delivered
 *                             logits (masked for constrained requests), the
 *                             top list is that order, exp sums to <= 1
 *   choices_share_prompt      n = 4: prefill counted once, forks counted,
 *                             each choice equals an n = 1 run seeded
 *                             eng_sched_choice_seed (sampling, drafting
 *                             off); greedy choices are identical
 *   choices_end_independently eng_sched_stop_choice ends one choice; the
 *                             others run to max_tokens; one completion
 *   choices_constrained       n = 3 sampled JSON-schema choices all valid
 *   choices_tight_budget      n = 4 under a KV budget that forces forks to
 *                             fall back and choices to be preempted: same
 *                             tokens as alone, every block back
 *   choices_cancel            a cancelled n = 3 request completes once with
 *                             three cancelled choices
 */
#define PTEST_MAIN
#include "ptest.h"

#include "sched_cons.h"

/* Check the logprobs of r's choice c against a log-softmax of the
 * delivered logits, under mask masks[i] (NULL: none). */
static void check_lp(const sr_req *r, int c, int top, uint32_t *const *masks) {
    for (int i = 0; i < r->n[c]; i++) {
        const sr_tok *x = &r->t[c][i];
        const float *lg = r->logits[c] + (size_t)i * NV;
        const uint32_t *m = masks ? masks[i] : NULL;
        PT_ASSERT(x->has_lp);
        double mx = -INFINITY, sum = 0;
        for (int k = 0; k < NV; k++)
            if ((!m || eng_constraint_allows(m, k)) && lg[k] > mx) mx = lg[k];
        for (int k = 0; k < NV; k++)
            if (!m || eng_constraint_allows(m, k)) sum += exp(lg[k] - mx);
        double lse = mx + log(sum);
        PT_NEAR(x->lp, lg[x->tok] - lse, 1e-4);
        PT_EQ_INT(x->n_top, top);
        double mass = 0;
        for (int j = 0; j < x->n_top; j++) {
            int32_t t = x->top[j].token;
            PT_ASSERT(!m || eng_constraint_allows(m, t));
            PT_NEAR(x->top[j].logprob, lg[t] - lse, 1e-4);
            if (j) PT_ASSERT(x->top[j].logprob <= x->top[j - 1].logprob);
            mass += exp(x->top[j].logprob);
            /* nothing allowed outside the list beats its last entry */
            if (j == x->n_top - 1)
                for (int k = 0; k < NV; k++) {
                    int listed = 0;
                    for (int jj = 0; jj < x->n_top; jj++) listed |= x->top[jj].token == k;
                    if (!listed && (!m || eng_constraint_allows(m, k))) PT_ASSERT(lg[k] <= lg[t]);
                }
        }
        PT_ASSERT(mass <= 1.0 + 1e-5);
    }
}

PT_TEST(logprobs_log_softmax) {
    PT_ASSERT(model());
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.constraint_vocab = g_vocab;
    eng_sched *s = NULL;
    char err[256];
    PT_EQ_INT(eng_sched_create(model(), &cfg, NULL, &s, err, sizeof err), 0);
    for (int mode = 0; mode < 2; mode++) { /* greedy, sampled */
        int32_t p[64];
        int np = mk_prompt(p, 40 + mode);
        eng_sched_request q;
        req_init(&q, p, np, 24);
        q.logprobs = 1;
        q.top_logprobs = 5;
        if (mode) {
            q.sampling.temperature = 0.8f;
            q.sampling.top_k = 50;
            q.sampling.seed = 5;
        }
        sr_req *r = sr_new(NV);
        run1(s, &q, r);
        PT_EQ_INT(r->n[0], 24);
        check_lp(r, 0, 5, NULL);
        sr_del(r);
    }
    if (have_llg()) { /* constrained: the log-softmax over the allowed tokens */
        int32_t p[64];
        int np = mk_prompt(p, 42);
        eng_sched_request q;
        req_init(&q, p, np, 60);
        q.logprobs = 1;
        q.top_logprobs = ENG_SCHED_TOP_MAX;
        set_cons(&q, ENG_CONSTRAINT_JSON_SCHEMA, k_schemas[0]);
        sr_req *r = sr_new(NV);
        run1(s, &q, r);
        PT_EQ_INT(r->fin[0], ENG_SCHED_STOP);
        eng_constraint *c = NULL;
        eng_constraint_spec sp = {ENG_CONSTRAINT_JSON_SCHEMA, k_schemas[0], strlen(k_schemas[0])};
        PT_EQ_INT(eng_constraint_new(g_vocab, &sp, &c, err, sizeof err), 0);
        size_t words = eng_constraint_mask_words(g_vocab);
        uint32_t **masks = calloc((size_t)r->n[0], sizeof *masks);
        for (int i = 0; i < r->n[0]; i++) {
            const uint32_t *m;
            PT_EQ_INT(eng_constraint_mask(c, &m, err, sizeof err), 0);
            masks[i] = malloc(words * 4);
            memcpy(masks[i], m, words * 4);
            PT_EQ_INT(eng_constraint_commit(c, &r->t[0][i].tok, 1, err, sizeof err), 0);
        }
        /* positions with fewer allowed tokens than asked list fewer */
        for (int i = 0; i < r->n[0]; i++) {
            int allowed = 0;
            for (int k = 0; k < NV; k++) allowed += eng_constraint_allows(masks[i], k);
            PT_EQ_INT(r->t[0][i].n_top, allowed < ENG_SCHED_TOP_MAX ? allowed : ENG_SCHED_TOP_MAX);
        }
        for (int i = 0; i < r->n[0]; i++) {
            const sr_tok *x = &r->t[0][i];
            const float *lg = r->logits[0] + (size_t)i * NV;
            double mx = -INFINITY, sum = 0;
            for (int k = 0; k < NV; k++)
                if (eng_constraint_allows(masks[i], k) && lg[k] > mx) mx = lg[k];
            for (int k = 0; k < NV; k++)
                if (eng_constraint_allows(masks[i], k)) sum += exp(lg[k] - mx);
            PT_NEAR(x->lp, lg[x->tok] - (mx + log(sum)), 1e-4);
            for (int j = 0; j < x->n_top; j++)
                PT_ASSERT(eng_constraint_allows(masks[i], x->top[j].token));
        }
        for (int i = 0; i < r->n[0]; i++) free(masks[i]);
        free(masks);
        eng_constraint_free(c);
        sr_del(r);
    }
    eng_sched_free(s);
}

PT_TEST(choices_share_prompt) {
    PT_ASSERT(model());
    int32_t p[64];
    int np = mk_prompt(p, 50);
    const uint64_t seed = 1234;
    /* sampled: drafting off (a draw with drafting depends on the batch) */
    eng_sched *s = mk(ENG_SCHED_SPEC_OFF, NULL, NULL, 0, 0);
    eng_sched_request q;
    req_init(&q, p, np, 20);
    q.n = 4;
    q.sampling.temperature = 1.0f;
    q.sampling.top_k = 40;
    q.sampling.seed = seed;
    sr_req *r = sr_new(0);
    run1(s, &q, r);
    eng_sched_stats st;
    eng_sched_close(s, 1);
    eng_sched_stats_get(s, &st);
    eng_sched_free(s);
    PT_EQ_INT(r->done, 1);
    PT_EQ_INT(r->res.n_choices, 4);
    PT_EQ_INT(r->res.prompt_tokens, np);
    PT_EQ_INT(st.prefill_tokens, (uint64_t)np); /* the prompt computed once */
    PT_EQ_INT(st.prompt_tokens, (uint64_t)np);
    PT_EQ_INT(st.forks, 3);
    PT_EQ_INT(st.fork_tokens, (uint64_t)3 * np);
    PT_EQ_INT(st.submitted, 1);
    PT_EQ_INT(st.finished, 1);
    int differ = 0;
    for (int c = 0; c < 4; c++) {
        PT_EQ_INT(r->fin[c], ENG_SCHED_LENGTH);
        PT_EQ_INT(r->n[c], 20);
        PT_EQ_INT(r->rn[c], 20);
        for (int i = 0; i < 20; i++) PT_EQ_INT(r->t[c][i].tok, r->rt[c][i]);
        /* the same choice as a request of its own */
        eng_sched *s1 = mk(ENG_SCHED_SPEC_OFF, NULL, NULL, 0, 0);
        req_init(&q, p, np, 20);
        q.sampling.temperature = 1.0f;
        q.sampling.top_k = 40;
        q.sampling.seed = eng_sched_choice_seed(seed, c);
        sr_req *one = sr_new(0);
        run1(s1, &q, one);
        eng_sched_free(s1);
        PT_EQ_INT(one->rn[0], r->rn[c]);
        PT_EQ_MEM(one->rt[0], r->rt[c], (size_t)r->rn[c] * sizeof(int32_t));
        if (c && memcmp(r->rt[c], r->rt[0], 20 * sizeof(int32_t))) differ = 1;
        sr_del(one);
    }
    PT_ASSERT(differ); /* different seeds, different draws */
    PT_EQ_INT(eng_sched_choice_seed(seed, 0), seed);
    sr_del(r);
    /* greedy (drafting on): identical choices */
    s = mk(ENG_SCHED_SPEC_NGRAM, NULL, NULL, 0, 0);
    req_init(&q, p, np, 16);
    q.n = 3;
    r = sr_new(0);
    run1(s, &q, r);
    eng_sched_free(s);
    for (int c = 1; c < 3; c++) {
        PT_EQ_INT(r->rn[c], r->rn[0]);
        PT_EQ_MEM(r->rt[c], r->rt[0], (size_t)r->rn[0] * sizeof(int32_t));
    }
    sr_del(r);
}

PT_TEST(choices_end_independently) {
    PT_ASSERT(model());
    eng_sched *s = mk(ENG_SCHED_SPEC_OFF, NULL, NULL, 0, 0);
    int32_t p[64];
    int np = mk_prompt(p, 51);
    eng_sched_request q;
    req_init(&q, p, np, 24);
    q.n = 3;
    q.sampling.temperature = 1.0f;
    q.sampling.seed = 9;
    sr_req *r = sr_new(0);
    r->stop_s = s;
    r->stop_choice = 1;
    r->stop_after = 3;
    run1(s, &q, r);
    PT_EQ_INT(r->fin[1], ENG_SCHED_STOP);
    PT_EQ_INT(r->rn[1], 3);
    PT_EQ_INT(r->fin[0], ENG_SCHED_LENGTH);
    PT_EQ_INT(r->rn[0], 24);
    PT_EQ_INT(r->fin[2], ENG_SCHED_LENGTH);
    PT_EQ_INT(r->rn[2], 24);
    PT_EQ_INT(r->res.finish, ENG_SCHED_LENGTH); /* choice 0 on top */
    PT_EQ_INT(r->res.n_tokens, 24);
    PT_EQ_INT(eng_sched_stop_choice(s, r->id, 0, -1), ENG_SCHED_ENOENT); /* gone */
    eng_sched_free(s);
    sr_del(r);
}

PT_TEST(choices_constrained) {
    if (!have_llg()) return;
    eng_sched *s = mk(ENG_SCHED_SPEC_NGRAM, NULL, NULL, 0, 0);
    int32_t p[64];
    int np = mk_prompt(p, 52);
    eng_sched_request q;
    req_init(&q, p, np, 120);
    q.n = 3;
    q.sampling.temperature = 1.0f;
    q.sampling.seed = 3;
    set_cons(&q, ENG_CONSTRAINT_JSON_SCHEMA, k_schemas[0]);
    sr_req *r = sr_new(0);
    run1(s, &q, r);
    for (int c = 0; c < 3; c++) {
        char why[256] = "";
        const char *txt = text_of(r, c);
        PT_ASSERT_MSG(r->fin[c] == ENG_SCHED_STOP && schema_ok(0, txt, why, sizeof why),
                      "choice %d: %s \"%s\" %s", c, eng_sched_finish_name(r->fin[c]), txt, why);
    }
    eng_sched_free(s);
    sr_del(r);
}

PT_TEST(choices_tight_budget) {
    PT_ASSERT(model());
    const eng_kv_layout *l = eng_model_kv_layout(model());
    /* room for 6 blocks of each kind: 4 choices of 17 + 30 tokens (3
     * blocks each, the first shared) cannot all run at once */
    size_t budget = 6 * (l->block_bytes[0] + l->block_bytes[1]);
    int32_t p[64];
    int np = mk_prompt(p, 9); /* 57 tokens */
    eng_sched_request q;
    req_init(&q, p, np, 30);
    eng_sched *s1 = mk(ENG_SCHED_SPEC_OFF, NULL, NULL, 0, 0);
    sr_req *ref = sr_new(0);
    run1(s1, &q, ref);
    eng_sched_free(s1);
    eng_sched *s = mk(ENG_SCHED_SPEC_NGRAM, NULL, NULL, 0, budget);
    PT_ASSERT(s);
    req_init(&q, p, np, 30);
    q.n = 4;
    sr_req *r = sr_new(0);
    run1(s, &q, r);
    eng_sched_stats st;
    eng_sched_close(s, 1);
    eng_sched_stats_get(s, &st);
    for (int c = 0; c < 4; c++) {
        PT_EQ_INT(r->fin[c], ENG_SCHED_LENGTH);
        PT_EQ_INT(r->rn[c], ref->rn[0]);
        PT_EQ_MEM(r->rt[c], ref->rt[0], (size_t)ref->rn[0] * sizeof(int32_t));
    }
    printf("  forks %llu, preemptions %llu, prefill %llu of a %d-token prompt\n",
           (unsigned long long)st.forks, (unsigned long long)st.preemptions,
           (unsigned long long)st.prefill_tokens, np);
    PT_ASSERT(st.preemptions > 0 || st.forks < 3); /* memory pressure was real */
    for (int k = 0; k < 2; k++) {
        PT_EQ_INT(st.alloc_live[k], 0);
        PT_ASSERT(st.alloc_live_peak[k] <= st.blocks_total[k]);
    }
    eng_sched_free(s);
    sr_del(r);
    sr_del(ref);
}

PT_TEST(choices_cancel) {
    PT_ASSERT(model());
    eng_sched *s = mk(ENG_SCHED_SPEC_OFF, NULL, NULL, 0, 0);
    int32_t p[64];
    int np = mk_prompt(p, 53);
    eng_sched_request q;
    req_init(&q, p, np, 200);
    q.n = 3;
    sr_req *r = sr_new(0);
    sr_bind(r, &q);
    char err[256];
    PT_EQ_INT(eng_sched_submit(s, &q, &r->id, err, sizeof err), 0);
    PT_EQ_INT(eng_sched_cancel(s, r->id), 0);
    PT_EQ_INT(sr_wait(r, 30000), 0);
    eng_sched_free(s);
    PT_EQ_INT(r->done, 1);
    PT_EQ_INT(r->res.n_choices, 3);
    for (int c = 0; c < 3; c++) PT_EQ_INT(r->fin[c], ENG_SCHED_CANCELLED);
    sr_del(r);
}

PT_TEST(zz_cleanup) { sc_cleanup(); }
