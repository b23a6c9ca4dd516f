/*
 * test_spec.c -- the speculative-decoding module without a model
 * (eng_spec.h): prompt lookup against a brute-force reference, its corner
 * cases, eng_spec_max_draft against a simulation of the KV's release and
 * truncation rules, and eng_spec_verify's acceptance on made-up logits.
 *
 *   matches_and_misses      hand-made sequences: no match, the latest
 *                           occurrence wins, a longer n-gram beats a
 *                           later shorter one, k caps the draft
 *   overlapping             a repeating pattern: the draft continues it
 *                           past the end of the sequence
 *   equals_brute_force      every prefix of random sequences (small and
 *                           larger alphabets, several n ranges), grown one
 *                           token at a time, drafts what an O(n^2) scan
 *                           finds; a shorter sequence re-indexes
 *   long_context            200k tokens index in linear time and bounded
 *                           memory, and still find the right continuation
 *   max_draft_simulated     eng_spec_max_draft = the longest draft whose
 *                           chunk the KV rules let truncate, for many B, W
 *   next_k                  the draft-length limit: +2 on a fully accepted
 *                           draft, -1 on a rejection, within 1..k_max
 *   verify_greedy           accepts while the argmax agrees, emits the
 *                           argmax at the first mismatch or after the
 *                           last draft; stops at a stop token and at
 *                           max_emit
 */
#define PTEST_MAIN
#include "ptest.h"

#include <time.h>

#include "eng_sched.h"
#include "eng_spec.h"

static eng_ngram *mk(int lo, int hi) {
    eng_ngram *g = NULL;
    char err[128];
    if (eng_ngram_new(lo, hi, &g, err, sizeof err) != 0) return NULL;
    return g;
}

PT_TEST(matches_and_misses) {
    eng_ngram *g = mk(2, 4);
    PT_ASSERT(g);
    int32_t out[8];
    int32_t none[] = {1, 2, 3, 4, 5, 6};
    PT_EQ_INT(eng_ngram_draft(g, none, 6, 4, out), 0);
    eng_ngram_free(g);
    /* "1 2" occurs twice before the suffix: the latest (followed by 8) wins */
    g = mk(2, 4);
    int32_t latest[] = {1, 2, 7, 9, 1, 2, 8, 6, 5, 1, 2};
    PT_EQ_INT(eng_ngram_draft(g, latest, 11, 3, out), 3);
    PT_EQ_INT(out[0], 8);
    PT_EQ_INT(out[1], 6);
    PT_EQ_INT(out[2], 5);
    eng_ngram_free(g);
    /* "5 1 2" (3 tokens) beats the later "1 2" */
    g = mk(2, 4);
    int32_t longer[] = {5, 1, 2, 40, 41, 7, 1, 2, 50, 51, 5, 1, 2};
    PT_EQ_INT(eng_ngram_draft(g, longer, 13, 2, out), 2);
    PT_EQ_INT(out[0], 40);
    PT_EQ_INT(out[1], 41);
    /* k = 0 and a too short sequence: nothing */
    PT_EQ_INT(eng_ngram_draft(g, longer, 13, 0, out), 0);
    eng_ngram_free(g);
    g = mk(2, 4);
    PT_EQ_INT(eng_ngram_draft(g, longer, 1, 4, out), 0);
    /* n_min 2 ignores a single-token match; n_min 1 takes it */
    int32_t uni[] = {3, 9, 4, 5, 9};
    PT_EQ_INT(eng_ngram_draft(g, uni, 5, 2, out), 0);
    eng_ngram_free(g);
    g = mk(1, 4);
    PT_EQ_INT(eng_ngram_draft(g, uni, 5, 2, out), 2);
    PT_EQ_INT(out[0], 4);
    PT_EQ_INT(out[1], 5);
    eng_ngram_free(g);
    /* bad sizes */
    char err[128] = "";
    PT_EQ_INT(eng_ngram_new(0, 2, &g, err, sizeof err), ENG_SCHED_EINVAL);
    PT_EQ_INT(eng_ngram_new(3, 2, &g, err, sizeof err), ENG_SCHED_EINVAL);
    PT_EQ_INT(eng_ngram_new(1, ENG_SPEC_NGRAM_MAX + 1, &g, err, sizeof err), ENG_SCHED_EINVAL);
}

PT_TEST(overlapping) {
    eng_ngram *g = mk(2, 4);
    int32_t out[8];
    int32_t same[] = {7, 7, 7};
    PT_EQ_INT(eng_ngram_draft(g, same, 3, 5, out), 5);
    for (int i = 0; i < 5; i++) PT_EQ_INT(out[i], 7);
    eng_ngram_free(g);
    g = mk(2, 4);
    int32_t cyc[] = {9, 1, 2, 3, 1, 2, 3, 1};
    /* suffix "2 3 1" last seen ending at 4 -> 2 3 1 2 3 1 (runs past the end) */
    PT_EQ_INT(eng_ngram_draft(g, cyc, 8, 6, out), 6);
    int32_t want[] = {2, 3, 1, 2, 3, 1};
    PT_EQ_MEM(out, want, sizeof want);
    eng_ngram_free(g);
}

/* The reference: the longest suffix n-gram (n_max..n_min) with an earlier
 * occurrence, its latest one, continued (into the draft itself). */
static int brute(const int32_t *t, int n, int lo, int hi, int k, int32_t *out) {
    for (int len = hi; len >= lo; len--) {
        if (len > n - 1) continue;
        for (int j = n - 1; j >= len; j--) {
            if (memcmp(t + j - len, t + n - len, (size_t)len * sizeof *t)) continue;
            for (int i = 0; i < k; i++) out[i] = j + i < n ? t[j + i] : out[j + i - n];
            return k;
        }
    }
    return 0;
}

PT_TEST(equals_brute_force) {
    enum { N = 1500, K = 6 };
    static int32_t t[N];
    const int alpha[] = {2, 5, 40};
    const int range[][2] = {{1, 1}, {2, 4}, {1, 8}, {3, 3}};
    uint64_t x = 12345;
    for (int a = 0; a < 3; a++)
        for (int r = 0; r < 4; r++) {
            for (int i = 0; i < N; i++) {
                x ^= x << 13, x ^= x >> 7, x ^= x << 17;
                t[i] = (int32_t)(x % (uint64_t)alpha[a]);
            }
            eng_ngram *g = mk(range[r][0], range[r][1]);
            PT_ASSERT(g);
            int hits = 0;
            for (int n = 1; n <= N; n++) {
                int32_t o1[K], o2[K];
                int d1 = eng_ngram_draft(g, t, n, K, o1);
                int d2 = brute(t, n, range[r][0], range[r][1], K, o2);
                PT_EQ_INT(d1, d2);
                if (d1) PT_EQ_MEM(o1, o2, (size_t)d1 * sizeof *o1);
                hits += d1 > 0;
            }
            PT_EQ_INT(eng_ngram_indexed(g), N);
            /* a shorter (different) sequence starts over */
            int32_t o1[K], o2[K];
            int32_t u[6] = {5, 6, 7, 5, 6, 7};
            PT_EQ_INT(eng_ngram_draft(g, u, 6, K, o1),
                      brute(u, 6, range[r][0], range[r][1], K, o2));
            PT_ASSERT(hits > 0);
            eng_ngram_free(g);
        }
}

PT_TEST(long_context) {
    enum { N = 200000, K = 8 };
    int32_t *t = malloc((size_t)N * sizeof *t);
    uint64_t x = 99;
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        t[i] = (int32_t)(x % 50000);
    }
    /* a quoted passage: tokens [1000, 1020) again at the end */
    memcpy(t + N - 20, t + 1000, 20 * sizeof *t);
    eng_ngram *g = mk(2, 4);
    int32_t out[K];
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    for (int n = 2; n <= N - 10; n += 97) eng_ngram_draft(g, t, n, K, out); /* grow */
    PT_EQ_INT(eng_ngram_draft(g, t, N - 10, K, out), K);
    clock_gettime(CLOCK_MONOTONIC, &b);
    PT_EQ_MEM(out, t + 1010, K * sizeof *out);
    double s = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) * 1e-9;
    size_t bytes = eng_ngram_bytes(g);
    fprintf(stderr, "  %d tokens indexed in %.3f s, %.1f MiB\n", N, s, (double)bytes / 1048576.0);
    PT_ASSERT(s < 5.0); /* linear: ~0.05 s; O(n^2) would take minutes */
    PT_ASSERT(bytes <= (size_t)N * 3 * 2 * 2 * 8 + 4096); /* <= 2x the slots' n-grams x 2 */
    eng_ngram_free(g);
    free(t);
}

/* Simulation of eng_kv.h: after a chunk to N tokens the forward pass has
 * released local block i iff (i + 1) * B <= N - W; truncating to T needs
 * every block i < ceil(T / B) with (i + 1) * B > T - W. */
static int trunc_ok(int B, int W, int n_kv, int k) {
    int N = n_kv + 1 + k, T = n_kv + 1;
    int nb = (T + B - 1) / B;
    for (int i = 0; i < nb; i++)
        if ((i + 1) * B > T - W && (i + 1) * B <= N - W) return 0;
    return 1;
}

PT_TEST(max_draft_simulated) {
    eng_kv_layout l;
    memset(&l, 0, sizeof l);
    l.n_layers[0] = 1;
    PT_EQ_INT(eng_spec_max_draft(&l, 1000, 7), 7); /* no local layers: no limit */
    l.n_layers[1] = 1;
    const int Bs[] = {1, 4, 16, 32}, Ws[] = {1, 5, 32, 512};
    for (int b = 0; b < 4; b++)
        for (int w = 0; w < 4; w++)
            for (int n_kv = 0; n_kv < 700; n_kv++) {
                l.block_tokens = Bs[b];
                l.max_window = Ws[w];
                int want = 0;
                while (want < 40 && trunc_ok(Bs[b], Ws[w], n_kv, want + 1)) want++;
                PT_EQ_INT(eng_spec_max_draft(&l, n_kv, 40), want);
                PT_EQ_INT(eng_spec_max_draft(&l, n_kv, 3), want < 3 ? want : 3);
            }
}

PT_TEST(next_k) {
    PT_EQ_INT(eng_spec_next_k(6, 6, 6, 6), 6); /* capped */
    PT_EQ_INT(eng_spec_next_k(3, 3, 3, 6), 5);
    PT_EQ_INT(eng_spec_next_k(5, 2, 2, 6), 6); /* a short draft fully accepted still grows */
    PT_EQ_INT(eng_spec_next_k(6, 6, 5, 6), 5);
    PT_EQ_INT(eng_spec_next_k(1, 1, 0, 6), 1); /* floor */
    PT_EQ_INT(eng_spec_next_k(4, 0, 0, 6), 4); /* nothing drafted: unchanged */
    PT_EQ_INT(eng_spec_next_k(9, 0, 0, 6), 6);
    int k = 6; /* a run of misses shrinks to one token, a run of hits regrows */
    for (int i = 0; i < 8; i++) k = eng_spec_next_k(k, k, 0, 6);
    PT_EQ_INT(k, 1);
    for (int i = 0; i < 3; i++) k = eng_spec_next_k(k, k, k, 6);
    PT_EQ_INT(k, 6);
}

/* Logits rows whose argmax is best[i]. */
static void rows_for(float *rows, int V, const int32_t *best, int n) {
    for (int i = 0; i < n; i++)
        for (int v = 0; v < V; v++) rows[i * V + v] = v == best[i] ? 3.0f : (float)(v % 3) * 0.5f;
}

PT_TEST(verify_greedy) {
    enum { V = 16 };
    eng_sampler_params p;
    eng_sampler_params_default(&p);
    p.n_stop = 1;
    p.stop[0] = 15;
    eng_sampler *s = NULL;
    char err[128];
    PT_EQ_INT(eng_sampler_new(&p, V, &s, err, sizeof err), 0);
    float rows[5 * V];
    int32_t toks[32] = {1, 2, 3}, acc;
    /* model says 4 5 6 7 8; draft 4 5 9 9: accept two, emit 6 */
    int32_t best[] = {4, 5, 6, 7, 8}, d1[] = {4, 5, 9, 9};
    rows_for(rows, V, best, 5);
    memcpy(toks + 3, d1, sizeof d1); /* the scheduler's layout: draft after the tokens */
    PT_EQ_INT(eng_spec_verify(s, rows, V, toks, 3, toks + 3, 4, 100, &acc), 3);
    PT_EQ_INT(acc, 2);
    int32_t w1[] = {4, 5, 6};
    PT_EQ_MEM(toks + 3, w1, sizeof w1);
    /* all four right: five tokens */
    int32_t d2[] = {4, 5, 6, 7};
    PT_EQ_INT(eng_spec_verify(s, rows, V, toks, 3, d2, 4, 100, &acc), 5);
    PT_EQ_INT(acc, 4);
    PT_EQ_MEM(toks + 3, best, sizeof best);
    /* first wrong: one token, the model's */
    int32_t d3[] = {9, 5, 6, 7};
    PT_EQ_INT(eng_spec_verify(s, rows, V, toks, 3, d3, 4, 100, &acc), 1);
    PT_EQ_INT(acc, 0);
    PT_EQ_INT(toks[3], 4);
    /* max_emit 2 */
    PT_EQ_INT(eng_spec_verify(s, rows, V, toks, 3, d2, 4, 2, &acc), 2);
    PT_EQ_INT(acc, 2);
    /* a stop token among the accepted drafts ends there */
    int32_t best2[] = {4, 15, 6, 7, 8}, d4[] = {4, 15, 6, 7};
    rows_for(rows, V, best2, 5);
    PT_EQ_INT(eng_spec_verify(s, rows, V, toks, 3, d4, 4, 100, &acc), 2);
    PT_EQ_INT(acc, 2);
    PT_EQ_INT(toks[4], 15);
    /* k = 0: a plain sample of row 0 */
    PT_EQ_INT(eng_spec_verify(s, rows, V, toks, 3, d4, 0, 100, &acc), 1);
    PT_EQ_INT(toks[3], 4);
    PT_EQ_INT(acc, 0);
    eng_sampler_free(s);
}
