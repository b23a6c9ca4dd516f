/*
 * test_sampler.c -- the sampler: greedy and its tie rule, seeded
 * determinism, top-k / top-p limits, repetition penalty, stop tokens,
 * parameter validation and the sampled distribution; token masks in every
 * mode, log-probabilities against a log-softmax, eng_sampler_needs_logits;
 * the one-pass top-k (penalty, NaN and temperature on the way) draws what
 * top-k over logits penalised beforehand draws.
 */
#define PTEST_MAIN
#include "ptest.h"

#include "eng_sampler.h"

static eng_sampler *mk(const eng_sampler_params *p, int V) {
    eng_sampler *s = NULL;
    char err[128];
    if (eng_sampler_new(p, V, &s, err, sizeof err) != 0) return NULL;
    return s;
}

PT_TEST(greedy_picks_argmax_lowest_id_on_ties) {
    eng_sampler_params p;
    eng_sampler_params_default(&p);
    eng_sampler *s = mk(&p, 5);
    PT_ASSERT(s);
    float l[5] = {0.1f, 2.0f, -1.0f, 2.0f, 1.9f};
    PT_EQ_INT(eng_sampler_sample(s, l, NULL, 0), 1);
    float n[5] = {NAN, 0.5f, 0.2f, 0.1f, 0.0f};
    PT_EQ_INT(eng_sampler_sample(s, n, NULL, 0), 1);
    eng_sampler_free(s);
}

static void draw(eng_sampler *s, const float *l, int n, int32_t *out) {
    for (int i = 0; i < n; i++) out[i] = eng_sampler_sample(s, l, NULL, 0);
}

PT_TEST(same_seed_same_tokens) {
    eng_sampler_params p;
    eng_sampler_params_default(&p);
    p.temperature = 1.0f;
    p.seed = 42;
    float l[64];
    for (int i = 0; i < 64; i++) l[i] = (float)((i * 37) % 64) / 16.0f;
    eng_sampler *a = mk(&p, 64), *b = mk(&p, 64);
    p.seed = 43;
    eng_sampler *c = mk(&p, 64);
    int32_t x[200], y[200], z[200];
    draw(a, l, 200, x);
    draw(b, l, 200, y);
    draw(c, l, 200, z);
    PT_EQ_MEM(x, y, sizeof x);
    PT_ASSERT(memcmp(x, z, sizeof x) != 0);
    eng_sampler_reseed(a, 42);
    draw(a, l, 200, y);
    PT_EQ_MEM(x, y, sizeof x);
    eng_sampler_free(a), eng_sampler_free(b), eng_sampler_free(c);
}

PT_TEST(top_k_and_top_p_restrict_candidates) {
    float l[10] = {1, 5, 2, 4.9f, 0, 0, 0, 0, 0, 3};
    eng_sampler_params p;
    eng_sampler_params_default(&p);
    p.temperature = 5.0f; /* flat: without limits every token would appear */
    p.top_k = 2;
    eng_sampler *s = mk(&p, 10);
    for (int i = 0; i < 300; i++) {
        int32_t t = eng_sampler_sample(s, l, NULL, 0);
        PT_ASSERT(t == 1 || t == 3);
    }
    eng_sampler_free(s);
    p.top_k = 0;
    p.top_p = 0.01f; /* only the most likely token */
    p.temperature = 1.0f;
    s = mk(&p, 10);
    for (int i = 0; i < 100; i++) PT_EQ_INT(eng_sampler_sample(s, l, NULL, 0), 1);
    eng_sampler_free(s);
}

PT_TEST(top_k_selection_matches_full_sort) {
    /* top_k = V - 1 and top_k = 3 on a shuffled vocabulary with ties: the
     * kept set must be the k best (ties by lower id) */
    enum { V = 50 };
    float l[V];
    for (int i = 0; i < V; i++) l[i] = (float)((i * 7) % 13);
    eng_sampler_params p;
    eng_sampler_params_default(&p);
    p.temperature = 100.0f;
    int ks[] = {1, 3, V - 1};
    for (int t = 0; t < 3; t++) {
        p.top_k = ks[t];
        eng_sampler *s = mk(&p, V);
        for (int i = 0; i < 400; i++) {
            int32_t tok = eng_sampler_sample(s, l, NULL, 0);
            int better = 0; /* tokens ranked above tok */
            for (int j = 0; j < V; j++) better += l[j] > l[tok] || (l[j] == l[tok] && j < tok);
            PT_ASSERT_MSG(better < ks[t], "k %d: token %d has %d better", ks[t], tok, better);
        }
        eng_sampler_free(s);
    }
}

PT_TEST(distribution_matches_softmax) {
    float l[2] = {0.0f, logf(3.0f)}; /* p = 0.25, 0.75 */
    eng_sampler_params p;
    eng_sampler_params_default(&p);
    p.temperature = 1.0f;
    p.seed = 7;
    eng_sampler *s = mk(&p, 2);
    int ones = 0, n = 8000;
    for (int i = 0; i < n; i++) ones += eng_sampler_sample(s, l, NULL, 0);
    PT_NEAR((double)ones / n, 0.75, 0.03);
    eng_sampler_free(s);
}

PT_TEST(repetition_penalty_demotes_history) {
    float l[4] = {2.0f, 1.9f, -1.0f, -1.1f};
    eng_sampler_params p;
    eng_sampler_params_default(&p);
    p.repetition_penalty = 1.5f;
    eng_sampler *s = mk(&p, 4);
    int32_t hist[3] = {0, 0, 9999};                  /* out-of-vocab ids are ignored */
    PT_EQ_INT(eng_sampler_sample(s, l, hist, 3), 1); /* 2.0/1.5 < 1.9 */
    PT_EQ_INT(eng_sampler_sample(s, l, NULL, 0), 0);
    PT_EQ_INT(l[0], 2.0f); /* input untouched */
    eng_sampler_free(s);
    float m[2] = {-1.0f, -1.2f};
    s = mk(&p, 2);
    int32_t h2[1] = {0};
    PT_EQ_INT(eng_sampler_sample(s, m, h2, 1), 1); /* -1.5 < -1.2 */
    eng_sampler_free(s);
}

PT_TEST(stop_tokens_and_validation) {
    eng_sampler_params p;
    eng_sampler_params_default(&p);
    p.n_stop = 2;
    p.stop[0] = 3;
    p.stop[1] = 7;
    eng_sampler *s = mk(&p, 10);
    PT_ASSERT(eng_sampler_is_stop(s, 7));
    PT_ASSERT(!eng_sampler_is_stop(s, 4));
    eng_sampler_free(s);
    char err[128];
    eng_sampler *bad = NULL;
    p.top_p = 0;
    PT_EQ_INT(eng_sampler_new(&p, 10, &bad, err, sizeof err), ENG_SAMPLER_EINVAL);
    PT_ASSERT(strstr(err, "top_p"));
    eng_sampler_params_default(&p);
    p.n_stop = ENG_SAMPLER_MAX_STOP + 1;
    PT_EQ_INT(eng_sampler_new(&p, 10, &bad, err, sizeof err), ENG_SAMPLER_EINVAL);
    eng_sampler_params_default(&p);
    PT_EQ_INT(eng_sampler_new(&p, 0, &bad, err, sizeof err), ENG_SAMPLER_EINVAL);
    PT_ASSERT(bad == NULL);
}

PT_TEST(top_p_prefix_wider_than_first_selection) {
    /* 2000 ids, logits falling slowly so the top_p = 0.9 prefix holds a few
     * hundred ids (more than the first best-64 selection): every sample
     * lies in the prefix computed by brute force, and the prefix's ids
     * are drawn in proportion to their probabilities */
    enum { V = 2000 };
    static float l[V], pr[V];
    for (int i = 0; i < V; i++) l[(i * 7919) % V] = -0.01f * i; /* scattered ids */
    double tot = 0;
    for (int i = 0; i < V; i++) tot += pr[i] = expf(l[i]);
    /* brute force: the smallest best-first prefix with >= 90% of the mass */
    double acc = 0, cut = 0;
    int keep = 0;
    for (int i = 0; i < V && !keep; i++) { /* rank i has logit -0.01 i */
        acc += exp(-0.01 * i) / tot;
        if (acc >= 0.9) keep = i + 1, cut = -0.01 * i;
    }
    PT_ASSERT(keep > 64 && keep < V);
    eng_sampler_params p;
    eng_sampler_params_default(&p);
    p.temperature = 1.0f;
    p.top_p = 0.9f;
    p.seed = 11;
    eng_sampler *s = mk(&p, V);
    int n = 20000, top = 0;
    for (int i = 0; i < n; i++) {
        int32_t t = eng_sampler_sample(s, l, NULL, 0);
        PT_ASSERT_MSG(l[t] >= (float)cut - 1e-6f, "id %d (logit %g) outside the top-p prefix", t,
                      l[t]);
        top += l[t] >= -0.5f; /* the 51 best ids */
    }
    double want = 0, in = 0;
    for (int i = 0; i < keep; i++) {
        in += exp(-0.01 * i);
        if (i <= 50) want += exp(-0.01 * i);
    }
    PT_NEAR((double)top / n, want / in, 0.02);
    eng_sampler_free(s);
}

/* ---- eng_sampler_verify: the rejection rule keeps the distribution ---- */

/* The sampling distribution p over V ids, written from the documented
 * order of operations (eng_sampler.h) in double precision: penalty over
 * the distinct history ids, temperature, top-k, top-p (ties by id). */
static void oracle_probs(const float *logits, int V, const eng_sampler_params *sp,
                         const int32_t *hist, int nh, double *p) {
    double lg[16], e[16];
    int order[16];
    for (int i = 0; i < V; i++) {
        lg[i] = logits[i];
        int seen = 0;
        for (int h = 0; h < nh; h++) seen |= hist[h] == i;
        if (seen && sp->repetition_penalty != 1.0f)
            lg[i] = lg[i] > 0 ? lg[i] / sp->repetition_penalty : lg[i] * sp->repetition_penalty;
        lg[i] /= sp->temperature;
        order[i] = i;
    }
    for (int i = 0; i < V; i++) /* descending logit, ascending id */
        for (int j = i + 1; j < V; j++)
            if (lg[order[j]] > lg[order[i]] ||
                (lg[order[j]] == lg[order[i]] && order[j] < order[i])) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
    double tot = 0;
    for (int i = 0; i < V; i++) tot += e[i] = exp(lg[i] - lg[order[0]]);
    int keep = V;
    if (sp->top_k > 0 && sp->top_k < V) keep = sp->top_k;
    else if (sp->top_p < 1.0f) {
        double acc = 0;
        for (int r = 0; r < V; r++) {
            acc += e[order[r]] / tot;
            if (acc >= sp->top_p) {
                keep = r + 1;
                break;
            }
        }
    }
    double z = 0;
    for (int i = 0; i < V; i++) p[i] = 0;
    for (int r = 0; r < keep; r++) z += e[order[r]];
    for (int r = 0; r < keep; r++) p[order[r]] = e[order[r]] / z;
}

/* For several sampling settings and drafts (likely, unlikely, outside
 * top-k, out of the vocabulary), N verify calls with a fixed seed: the
 * emitted ids' frequencies match p (total variation below 0.01; sampling
 * noise at N = 200000 and V = 8 is about 0.002, and the usual mistakes --
 * accepting the draft too often, or resampling from p including the draft
 * after a rejection -- are off by 0.1 or more), and the acceptance
 * frequency matches p(draft) within 0.006. */
PT_TEST(verify_keeps_the_distribution) {
    enum { V = 8, N = 200000 };
    const float l[V] = {1.0f, 2.2f, 0.3f, -0.5f, 1.9f, 0.0f, -2.0f, 1.2f};
    const int32_t hist[3] = {4, 1, 4};
    struct {
        float temp, top_p, pen;
        int top_k, nh;
    } cfg[] = {{1.0f, 1.0f, 1.0f, 0, 0},
               {0.7f, 1.0f, 1.0f, 4, 0},
               {1.3f, 0.8f, 1.0f, 0, 0},
               {0.9f, 1.0f, 1.4f, 0, 3},
               {1.1f, 0.95f, 1.2f, 5, 3}};
    const int32_t drafts[] = {1, 2, 6, 4, 99};
    double worst_tv = 0;
    for (int c = 0; c < 5; c++) {
        eng_sampler_params sp;
        eng_sampler_params_default(&sp);
        sp.temperature = cfg[c].temp;
        sp.top_p = cfg[c].top_p;
        sp.top_k = cfg[c].top_k;
        sp.repetition_penalty = cfg[c].pen;
        sp.seed = 1000 + (uint64_t)c;
        double p[V];
        oracle_probs(l, V, &sp, hist, cfg[c].nh, p);
        for (int d = 0; d < 5; d++) {
            eng_sampler *s = mk(&sp, V);
            PT_ASSERT(s);
            long cnt[V] = {0}, acc = 0;
            for (int i = 0; i < N; i++) {
                int ok = -1;
                int32_t t = eng_sampler_verify(s, l, hist, cfg[c].nh, drafts[d], &ok);
                PT_ASSERT(t >= 0 && t < V && (ok == 0 || ok == 1));
                PT_ASSERT(!ok || t == drafts[d]);
                cnt[t]++;
                acc += ok;
            }
            eng_sampler_free(s);
            double tv = 0;
            for (int v = 0; v < V; v++) tv += 0.5 * fabs((double)cnt[v] / N - p[v]);
            double pd = drafts[d] < V ? p[drafts[d]] : 0;
            PT_ASSERT_MSG(tv < 0.01, "config %d draft %d: total variation %.4f", c, drafts[d], tv);
            PT_NEAR((double)acc / N, pd, 0.006);
            worst_tv = tv > worst_tv ? tv : worst_tv;
        }
    }
    fprintf(stderr, "  worst total variation %.4f (bound 0.01)\n", worst_tv);
}

/* Greedy verification: accepted iff the draft is the (penalised) argmax,
 * which is returned either way; no RNG is consumed. */
PT_TEST(verify_greedy_is_argmax) {
    const float l[4] = {2.0f, 1.9f, -1.0f, 0.5f};
    eng_sampler_params p;
    eng_sampler_params_default(&p);
    p.repetition_penalty = 1.5f;
    eng_sampler *s = mk(&p, 4);
    int ok = -1;
    PT_EQ_INT(eng_sampler_verify(s, l, NULL, 0, 0, &ok), 0);
    PT_EQ_INT(ok, 1);
    PT_EQ_INT(eng_sampler_verify(s, l, NULL, 0, 3, &ok), 0);
    PT_EQ_INT(ok, 0);
    int32_t hist[1] = {0}; /* penalised: 2.0 / 1.5 < 1.9 */
    PT_EQ_INT(eng_sampler_verify(s, l, hist, 1, 0, &ok), 1);
    PT_EQ_INT(ok, 0);
    PT_EQ_INT(eng_sampler_verify(s, l, hist, 1, 1, &ok), 1);
    PT_EQ_INT(ok, 1);
    eng_sampler_free(s);
}

/* The kept set of top-p as the rule defines it, by brute force: a full sort
 * (descending logit, ascending id) and the smallest prefix whose mass
 * (expf of logit / T - max, the normaliser summed in id order) reaches p. */
static int topp_keep_brute(const float *l, int V, float temp, float top_p) {
    static float lg[1 << 16];
    static int32_t ord[1 << 16];
    float inv = 1.0f / temp, mx = -INFINITY;
    for (int i = 0; i < V; i++) {
        lg[i] = (l[i] == l[i] ? l[i] : -INFINITY) * inv;
        if (lg[i] > mx) mx = lg[i];
        ord[i] = i;
    }
    for (int i = 1; i < V; i++) /* insertion sort: stable, so ties keep ascending ids */
        for (int j = i; j > 0 && lg[ord[j]] > lg[ord[j - 1]]; j--) {
            int32_t t = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = t;
        }
    double total = 0, acc = 0;
    for (int i = 0; i < V; i++) total += expf(lg[i] - mx);
    for (int i = 0; i < V; i++) {
        acc += expf(lg[ord[i]] - mx);
        if (acc / total >= top_p) return i + 1;
    }
    return V;
}

PT_TEST(top_p_threshold_selection_keeps_the_rule_exactly) {
    /* logits with many ties, +0 / -0, -inf and NaN, flat and peaked: top-p
     * draws exactly what top-k of the brute-force kept size draws from the
     * same seed (same candidates in the same order, same probabilities) */
    enum { V = 3000 };
    static float l[V];
    uint64_t st = 5;
    for (int iter = 0; iter < 24; iter++) {
        float spread = iter % 3 == 0 ? 0.05f : iter % 3 == 1 ? 1.0f : 20.0f;
        for (int i = 0; i < V; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            int r = (int)(st >> 33) % 200;
            l[i] = (float)(r % 50) * spread / 50.0f;
            if (r == 190) l[i] = -0.0f;
            if (r == 191) l[i] = 0.0f;
            if (r == 192) l[i] = -INFINITY;
            if (r == 193) l[i] = NAN;
        }
        float temp = iter % 2 ? 0.7f : 1.3f, top_p = iter % 4 < 2 ? 0.9f : 0.5f;
        int keep = topp_keep_brute(l, V, temp, top_p);
        eng_sampler_params pp, pk;
        eng_sampler_params_default(&pp);
        pp.temperature = temp, pp.top_p = top_p, pp.seed = 100 + (uint64_t)iter;
        pk = pp;
        pk.top_p = 1, pk.top_k = keep;
        eng_sampler *a = mk(&pp, V), *b = mk(&pk, V);
        PT_ASSERT(a && b);
        for (int d = 0; d < 50; d++) {
            int32_t x = eng_sampler_sample(a, l, NULL, 0), y = eng_sampler_sample(b, l, NULL, 0);
            PT_ASSERT_MSG(x == y, "iter %d draw %d: top-p %d, top-k %d (keep %d)", iter, d, x, y,
                          keep);
        }
        eng_sampler_free(a);
        eng_sampler_free(b);
    }
}

/* A mask allowing the ids for which keep(i) holds. */
static void mk_mask(uint32_t *m, int V, int (*keep)(int)) {
    memset(m, 0, (size_t)((V + 31) / 32) * 4);
    for (int i = 0; i < V; i++)
        if (keep(i)) m[i >> 5] |= 1u << (i & 31);
}
static int keep_odd(int i) { return i % 2 == 1; }
static int keep_none(int i) { return (void)i, 0; }
static int keep_few(int i) { return i == 3 || i == 70 || i == 99; }

PT_TEST(mask_restricts_every_mode) {
    enum { V = 100 };
    float l[V];
    for (int i = 0; i < V; i++) l[i] = (float)((i * 37) % V) / 10.0f;
    uint32_t m[4];
    mk_mask(m, V, keep_odd);
    /* mask_apply: exactly the forbidden entries become -inf */
    float a[V];
    memcpy(a, l, sizeof a);
    eng_sampler_mask_apply(a, V, m);
    for (int i = 0; i < V; i++) PT_EQ_INT(isinf(a[i]) && a[i] < 0, !keep_odd(i));
    const struct {
        float t, top_p, pen;
        int top_k;
    } modes[] = {{0, 1, 1, 0}, {0, 1, 1.3f, 0}, {1, 1, 1, 0}, {1, 1, 1, 5}, {0.7f, 0.5f, 1.2f, 0}};
    int32_t hist[4] = {1, 3, 5, 7};
    for (size_t j = 0; j < sizeof modes / sizeof modes[0]; j++) {
        eng_sampler_params p;
        eng_sampler_params_default(&p);
        p.temperature = modes[j].t;
        p.top_p = modes[j].top_p;
        p.top_k = modes[j].top_k;
        p.repetition_penalty = modes[j].pen;
        p.seed = 11;
        eng_sampler *s = mk(&p, V);
        for (int k = 0; k < 200; k++) {
            int32_t t = eng_sampler_sample_masked(s, l, hist, 4, m, NULL);
            PT_ASSERT_MSG(t >= 0 && keep_odd(t), "mode %zu drew %d", j, t);
            int acc = -1;
            t = eng_sampler_verify_masked(s, l, hist, 4, m, 2 /* forbidden */, &acc, NULL);
            PT_ASSERT(t >= 0 && keep_odd(t) && acc == 0);
        }
        /* greedy under the mask = argmax of the masked (penalised) logits */
        if (modes[j].t == 0 && modes[j].pen == 1) {
            int32_t t = eng_sampler_sample_masked(s, l, NULL, 0, m, NULL);
            PT_EQ_INT(t, eng_sampler_sample(s, a, NULL, 0));
        }
        /* nothing allowed: -1 */
        uint32_t none[4];
        mk_mask(none, V, keep_none);
        PT_EQ_INT(eng_sampler_sample_masked(s, l, NULL, 0, none, NULL), -1);
        eng_sampler_free(s);
    }
    /* dense masks: runs of fully allowed words and single bits, ties at the
     * lowest id across both, NaN as -inf */
    {
        enum { W = 200 };
        float d[W];
        uint32_t dm[(W + 31) / 32];
        memset(dm, 0xff, sizeof dm);
        dm[1] &= ~(1u << 8); /* forbid 40 */
        eng_sampler_params gp;
        eng_sampler_params_default(&gp);
        eng_sampler *g = mk(&gp, W);
        for (int i = 0; i < W; i++) d[i] = 1.0f;
        d[0] = NAN;
        PT_EQ_INT(eng_sampler_sample_masked(g, d, NULL, 0, dm, NULL), 1);
        d[40] = 9.0f; /* forbidden */
        d[150] = d[170] = d[199] = 5.0f;
        PT_EQ_INT(eng_sampler_sample_masked(g, d, NULL, 0, dm, NULL), 150);
        dm[4] &= ~(1u << (150 - 128)); /* 150 forbidden: the next equal one */
        PT_EQ_INT(eng_sampler_sample_masked(g, d, NULL, 0, dm, NULL), 170);
        d[35] = 5.0f; /* an equal one in a partial word before them */
        dm[1] &= ~(1u << 0);
        PT_EQ_INT(eng_sampler_sample_masked(g, d, NULL, 0, dm, NULL), 35);
        eng_sampler_free(g);
    }
    /* all allowed logits -inf: still an allowed token */
    float ninf[V];
    for (int i = 0; i < V; i++) ninf[i] = i == 4 ? 5.0f : -INFINITY;
    uint32_t few[4];
    mk_mask(few, V, keep_few);
    eng_sampler_params p;
    eng_sampler_params_default(&p);
    for (int t = 0; t < 2; t++) {
        p.temperature = (float)t;
        eng_sampler *s = mk(&p, V);
        int32_t tok = eng_sampler_sample_masked(s, ninf, NULL, 0, few, NULL);
        PT_ASSERT(keep_few(tok));
        eng_sampler_free(s);
    }
}

PT_TEST(logprobs_are_log_softmax) {
    enum { V = 300 };
    float l[V];
    for (int i = 0; i < V; i++) l[i] = (float)(((i * 7919) % 1000) - 500) / 97.0f;
    l[17] = l[18]; /* a tie: the lower id first */
    uint32_t m[(V + 31) / 32];
    mk_mask(m, V, keep_odd);
    for (int masked = 0; masked < 2; masked++)
        for (int t = 0; t < 3; t++) {
            eng_sampler_params p;
            eng_sampler_params_default(&p);
            p.temperature = t == 0 ? 0 : t == 1 ? 0.5f : 2.0f; /* logprobs ignore it */
            p.top_k = t == 2 ? 10 : 0;                         /* and top-k */
            p.seed = 3;
            eng_sampler *s = mk(&p, V);
            eng_sampler_logprobs lp;
            memset(&lp, 0, sizeof lp);
            lp.top_logprobs = ENG_SAMPLER_TOP_MAX;
            const uint32_t *mk_ = masked ? m : NULL;
            int32_t tok = eng_sampler_sample_masked(s, l, NULL, 0, mk_, &lp);
            double mx = -INFINITY, sum = 0;
            for (int i = 0; i < V; i++)
                if (!masked || keep_odd(i)) mx = l[i] > mx ? l[i] : mx;
            for (int i = 0; i < V; i++)
                if (!masked || keep_odd(i)) sum += exp(l[i] - mx);
            double lse = mx + log(sum);
            PT_NEAR(lp.logprob, l[tok] - lse, 1e-5);
            PT_EQ_INT(lp.n_top, ENG_SAMPLER_TOP_MAX);
            double mass = 0;
            for (int j = 0; j < lp.n_top; j++) {
                int32_t id = lp.top[j].token;
                PT_ASSERT(!masked || keep_odd(id));
                PT_NEAR(lp.top[j].logprob, l[id] - lse, 1e-5);
                if (j) {
                    float a = l[lp.top[j - 1].token], b = l[id];
                    PT_ASSERT(a > b || (a == b && lp.top[j - 1].token < id));
                }
                mass += exp(lp.top[j].logprob);
            }
            PT_ASSERT(mass <= 1.0 + 1e-6);
            /* 0 alternatives: only the chosen token's */
            lp.top_logprobs = 0;
            tok = eng_sampler_sample_masked(s, l, NULL, 0, mk_, &lp);
            PT_EQ_INT(lp.n_top, 0);
            PT_NEAR(lp.logprob, l[tok] - lse, 1e-5);
            eng_sampler_free(s);
        }
    /* with a penalty: of the penalised logits */
    eng_sampler_params p;
    eng_sampler_params_default(&p);
    p.repetition_penalty = 2.0f;
    eng_sampler *s = mk(&p, V);
    int32_t hist[2] = {5, 6};
    eng_sampler_logprobs lp;
    memset(&lp, 0, sizeof lp);
    lp.top_logprobs = 3;
    float pl[V];
    memcpy(pl, l, sizeof pl);
    for (int i = 5; i <= 6; i++) pl[i] = pl[i] > 0 ? pl[i] / 2 : pl[i] * 2;
    int32_t tok = eng_sampler_sample_masked(s, l, hist, 2, NULL, &lp);
    double mx = -INFINITY, sum = 0;
    for (int i = 0; i < V; i++) mx = pl[i] > mx ? pl[i] : mx;
    for (int i = 0; i < V; i++) sum += exp(pl[i] - mx);
    PT_NEAR(lp.logprob, pl[tok] - (mx + log(sum)), 1e-5);
    eng_sampler_free(s);
}

PT_TEST(needs_logits) {
    eng_sampler_params p;
    eng_sampler_params_default(&p);
    eng_sampler *s = mk(&p, 10);
    PT_EQ_INT(eng_sampler_needs_logits(s), 0);
    eng_sampler_free(s);
    p.temperature = 0.5f;
    s = mk(&p, 10);
    PT_EQ_INT(eng_sampler_needs_logits(s), 1);
    eng_sampler_free(s);
    p.temperature = 0;
    p.repetition_penalty = 1.1f;
    s = mk(&p, 10);
    PT_EQ_INT(eng_sampler_needs_logits(s), 1);
    eng_sampler_free(s);
}

PT_TEST(top_k_one_pass_applies_penalty_nan_and_temperature) {
    /* top-k fills its heap in one pass over the logits with the penalty
     * applied to the window's tokens on the way: the same draws as top-k
     * over logits penalised beforehand (no history), for ties, NaN, -inf,
     * penalties that raise or lower, k below and at the number of finite
     * values, and a window shorter than the history */
    enum { V = 2000 };
    static float l[V], pl[V];
    uint64_t st = 11;
    for (int iter = 0; iter < 16; iter++) {
        for (int i = 0; i < V; i++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            int r = (int)(st >> 33) % 100;
            l[i] = (float)(r % 40) * 0.25f - 3.0f;
            if (r == 97) l[i] = NAN;
            if (r == 98) l[i] = -INFINITY;
        }
        int32_t hist[300];
        for (int i = 0; i < 300; i++) hist[i] = (int32_t)((i * 7919 + iter * 31) % V);
        hist[5] = -1, hist[6] = V; /* out of range: ignored */
        eng_sampler_params p, q;
        eng_sampler_params_default(&p);
        p.temperature = iter % 2 ? 0.6f : 1.7f;
        p.top_k = iter % 4 < 2 ? 40 : 1990;
        p.repetition_penalty = iter % 3 ? 1.3f : 0.8f;
        p.repeat_last_n = iter % 5 == 0 ? 0 : 120;
        p.seed = 7 + (uint64_t)iter;
        q = p;
        q.repetition_penalty = 1;
        int from = p.repeat_last_n > 0 ? 300 - p.repeat_last_n : 0;
        memcpy(pl, l, sizeof l);
        static uint8_t done[V];
        memset(done, 0, sizeof done);
        for (int i = from; i < 300; i++) {
            int32_t t = hist[i];
            if (t < 0 || t >= V || done[t]) continue;
            done[t] = 1;
            float v = pl[t] == pl[t] ? pl[t] : -INFINITY;
            pl[t] = v > 0 ? v / p.repetition_penalty : v * p.repetition_penalty;
        }
        eng_sampler *a = mk(&p, V), *b = mk(&q, V);
        PT_ASSERT(a && b);
        for (int d = 0; d < 40; d++) {
            int32_t x = eng_sampler_sample(a, l, hist, 300), y = eng_sampler_sample(b, pl, NULL, 0);
            PT_ASSERT_MSG(x == y, "iter %d draw %d: %d vs %d", iter, d, x, y);
        }
        eng_sampler_free(a);
        eng_sampler_free(b);
    }
}
