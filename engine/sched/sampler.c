/*
 * sampler.c -- next-token sampler (eng_sampler.h): repetition penalty,
 * greedy, temperature, top-k, top-p, stop tokens and a seeded
 * xoshiro256** RNG.
 *
 * Candidates are ranked by descending logit (ties by ascending id) only as
 * far as needed: top-k keeps the best k in a heap filled in one pass over
 * the caller's logits (kern_scan_at_least skips, 16 at a time, what cannot
 * beat the worst kept; penalty, NaN and temperature applied on the way);
 * the other modes scale the logits into the sampler's copy in one pass over
 * them too (sampler_scaled), so the caller's row is read once.  Top-p sorts only the
 * candidates above a threshold a histogram of the probability mass finds
 * (every token within the logit gap that holds top_p of the mass, plus one
 * bucket of margin; the full order if rounding leaves the prefix short),
 * then takes the smallest best-first prefix holding top_p of the mass
 * (the normaliser summed over the whole vocabulary in id order); plain
 * temperature sampling draws from the whole vocabulary in id order with no
 * sort.  Greedy is one vectorised scan (kern_argmax; over the caller's
 * logits directly when no penalty applies).  Sorting uses one 64-bit key
 * per candidate (order-preserving bits of the logit, then the id), the
 * same order as comparing logit then id.  Over Gemma 3's 262,144 logits
 * (tests/bench/bench_sampler.c, build/tests/sched/bench_sampler) top-p 0.9 of a flat distribution took
 * 62 ms when it widened a heap selection into a full sort, 5 ms with the
 * threshold; greedy went from 0.46 to 0.13 ms.  eng_sampler_sample and eng_sampler_verify share every step
 * (penalty, argmax, the candidate distribution, the draw), so a draft is
 * judged against exactly the distribution a plain call samples from.
 * Scratch (penalised logits, candidate ids, probabilities) is allocated
 * once per sampler.
 *
 * Masks: greedy under a mask scans only the allowed ids (the set bits,
 * word by word) of the caller's or the penalised logits; sampling sets the
 * forbidden logits of the penalised copy to -inf before the distribution
 * is formed, so every mode draws from the allowed tokens only (a draw that
 * rounding would put on a zero-mass token takes the last candidate with
 * mass instead).  Logprobs come from one more pass over the decision
 * logits (penalised, masked, temperature 1): the maximum and the sum of
 * exponentials in double, and the best top_logprobs kept by insertion into
 * a sorted array of at most 20; the chosen token's value is recomputed
 * from its own logit (penalty and mask applied to it alone), so sampling's
 * in-place tempering does not disturb it.
 */
#include "eng_sampler.h"
#include "kern_ops.h"
#include "pl_err.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct eng_sampler {
    eng_sampler_params p; /* parameters (validated) */
    int n_vocab;          /* logits per call */
    uint64_t rng[4];      /* xoshiro256** state */
    float *logit;         /* scratch: penalised / tempered logits */
    int32_t *idx;         /* scratch: candidate ids (room for n_vocab 64-bit sort keys) */
    float *prob;          /* scratch: candidate probabilities */
    uint8_t *seen;        /* scratch: history membership flags */
};

void eng_sampler_params_default(eng_sampler_params *p) {
    memset(p, 0, sizeof *p);
    p->temperature = 0;
    p->top_k = 0;
    p->top_p = 1;
    p->repetition_penalty = 1;
}

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t xoshiro_next(uint64_t *s) {
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

void eng_sampler_reseed(eng_sampler *s, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&x);
}

int eng_sampler_new(const eng_sampler_params *p, int n_vocab, eng_sampler **out, char *err,
                    size_t errlen) {
    *out = NULL;
    const char *bad = NULL;
    if (n_vocab < 1) bad = "n_vocab must be >= 1";
    else if (!(p->temperature == p->temperature) || p->temperature > 1e4f)
        bad = "temperature must be a number <= 1e4";
    else if (p->top_k < 0) bad = "top_k must be >= 0";
    else if (!(p->top_p > 0)) bad = "top_p must be > 0";
    else if (!(p->repetition_penalty > 0)) bad = "repetition_penalty must be > 0";
    else if (p->n_stop < 0 || p->n_stop > ENG_SAMPLER_MAX_STOP) bad = "too many stop tokens";
    if (bad) {
        return pl_errf(err, errlen, ENG_SAMPLER_EINVAL, "sampler: %s", bad);
    }
    eng_sampler *s = calloc(1, sizeof *s);
    if (!s) goto err;
    s->p = *p;
    s->n_vocab = n_vocab;
    s->logit = malloc((size_t)n_vocab * sizeof *s->logit);
    s->idx = malloc((size_t)n_vocab * sizeof(uint64_t)); /* also the sort keys */
    s->prob = malloc((size_t)n_vocab * sizeof *s->prob);
    s->seen = calloc((size_t)n_vocab, 1);
    if (!s->logit || !s->idx || !s->prob || !s->seen) goto err;
    eng_sampler_reseed(s, p->seed);
    *out = s;
    return 0;
err:
    eng_sampler_free(s);
    return pl_errf(err, errlen, ENG_SAMPLER_ENOMEM, "sampler: out of memory");
}

void eng_sampler_free(eng_sampler *s) {
    if (!s) return;
    free(s->logit);
    free(s->idx);
    free(s->prob);
    free(s->seen);
    free(s);
}

int eng_sampler_is_stop(const eng_sampler *s, int32_t tok) {
    for (int i = 0; i < s->p.n_stop; i++)
        if (s->p.stop[i] == tok) return 1;
    return 0;
}

/* Sort key of token id with logit v: ascending key = descending logit,
 * then ascending id (v is never NaN here; -0 sorts as +0, as comparing the
 * floats does). */
static uint64_t sort_key(float v, int32_t id) {
    uint32_t u;
    v += 0.0f; /* -0 -> +0 */
    memcpy(&u, &v, sizeof u);
    u = u >> 31 ? ~u : u | 0x80000000u; /* ascending in v */
    return (uint64_t)~u << 32 | (uint32_t)id;
}

/* The logit of a sort key (-0 comes back as +0). */
static float key_value(uint64_t key) {
    uint32_t u = ~(uint32_t)(key >> 32);
    u = u >> 31 ? u & 0x7fffffffu : ~u;
    float v;
    memcpy(&v, &u, sizeof v);
    return v;
}

/* Max-heap of n sort keys (root: the worst kept): push / replace the root. */
static void heap_up(uint64_t *h, int c) {
    while (c > 0 && h[c] > h[(c - 1) / 2]) {
        uint64_t t = h[c];
        h[c] = h[(c - 1) / 2];
        h[(c - 1) / 2] = t;
        c = (c - 1) / 2;
    }
}

static void heap_down(uint64_t *h, int n) {
    for (int c = 0;;) {
        int l = 2 * c + 1, r = l + 1, w = c;
        if (l < n && h[l] > h[w]) w = l;
        if (r < n && h[r] > h[w]) w = r;
        if (w == c) return;
        uint64_t t = h[c];
        h[c] = h[w];
        h[w] = t;
        c = w;
    }
}

/* Offer (x, id) to the heap of at most k keys holding *n. */
static void heap_offer(uint64_t *h, int *n, int k, float x, int32_t id) {
    uint64_t key = sort_key(x, id);
    if (*n < k) {
        h[*n] = key;
        heap_up(h, (*n)++);
    } else if (key < h[0]) {
        h[0] = key;
        heap_down(h, k);
    }
}

static int cmp_key(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Sort the n keys at s->idx and leave their ids there, best first. */
static void sort_keys(eng_sampler *s, int n) {
    uint64_t *key = (uint64_t *)(void *)s->idx;
    qsort(key, (size_t)n, sizeof *key, cmp_key);
    for (int i = 0; i < n; i++) s->idx[i] = (int32_t)(uint32_t)key[i]; /* 4i <= 8i: in place */
}

/* The whole vocabulary into s->idx, best first.  Returns n_vocab. */
static int all_candidates(eng_sampler *s) {
    uint64_t *key = (uint64_t *)(void *)s->idx;
    for (int i = 0; i < s->n_vocab; i++) key[i] = sort_key(s->logit[i], i);
    sort_keys(s, s->n_vocab);
    return s->n_vocab;
}

#define TOPP_BUCKETS 1024 /* histogram of the logit gap below the max */
#define TOPP_PER_NAT 32   /* buckets per unit of gap: 32 nats covered, the rest in the last */

static int topp_bucket(float gap) {
    float b = gap * TOPP_PER_NAT;
    return b < TOPP_BUCKETS - 1 ? (int)b : TOPP_BUCKETS - 1;
}

/* Top-p: the sampling mass of every token (summed in id order into
 * *total), the smallest gap bucket whose tokens hold top_p of it, and the
 * tokens up to one bucket past it sorted best first into s->idx: a
 * best-first prefix of the whole order (a threshold on the logit) that
 * holds the kept set unless rounding says otherwise.  Returns its length. */
static int topp_candidates(eng_sampler *s, float mx, double *total) {
    double mass[TOPP_BUCKETS] = {0}, t = 0;
    const float *lg = s->logit;
    for (int i = 0; i < s->n_vocab; i++) {
        double p = expf(lg[i] - mx);
        t += p;
        mass[topp_bucket(mx - lg[i])] += p;
    }
    int bt = 0;
    for (double cum = 0; bt < TOPP_BUCKETS - 1; bt++)
        if ((cum += mass[bt]) >= s->p.top_p * t) break;
    bt = bt + 1 < TOPP_BUCKETS ? bt + 1 : bt; /* one bucket of margin */
    uint64_t *key = (uint64_t *)(void *)s->idx;
    int n = 0;
    for (int i = 0; i < s->n_vocab; i++)
        if (topp_bucket(mx - lg[i]) <= bt) key[n++] = sort_key(lg[i], i);
    sort_keys(s, n);
    *total = t;
    return n;
}

/* 1 when the repetition penalty changes some logit of this call. */
static int sampler_penalises(const eng_sampler *s, const int32_t *history, int n_history) {
    return s->p.repetition_penalty != 1.0f && history && n_history > 0;
}

/* The penalised value of logit v (repetition_penalty applies). */
static float sampler_pen(const eng_sampler *s, float v) {
    return v > 0 ? v / s->p.repetition_penalty : v * s->p.repetition_penalty;
}

/* Mark (1) or clear (0) the distinct tokens of the penalty window in
 * s->seen; returns the window's first history index. */
static int sampler_mark(eng_sampler *s, const int32_t *history, int n_history, int on) {
    int from = s->p.repeat_last_n > 0 && n_history > s->p.repeat_last_n
                   ? n_history - s->p.repeat_last_n
                   : 0;
    for (int i = from; i < n_history; i++)
        if (history[i] >= 0 && history[i] < s->n_vocab) s->seen[history[i]] = (uint8_t)on;
    return from;
}

/* The next distinct token of the window marked by sampler_mark (history
 * index *i onwards), its mark cleared, or -1 when none is left; *v gets
 * its logit (NaN as -inf), penalised. */
static int32_t sampler_next_marked(eng_sampler *s, const float *logits, const int32_t *history,
                                   int n_history, int *i, float *v) {
    for (; *i < n_history; (*i)++) {
        int32_t t = history[*i];
        if (t < 0 || t >= s->n_vocab || !s->seen[t]) continue;
        s->seen[t] = 0; /* once per distinct token */
        *v = sampler_pen(s, logits[t] == logits[t] ? logits[t] : -INFINITY);
        (*i)++;
        return t;
    }
    return -1;
}

/* Top-k (k < n_vocab) in one pass over the caller's logits, the only read
 * of them: every logit (NaN as -inf, penalised when it is in the window)
 * times 1 / temperature competes for a max-heap of the k best sort keys;
 * kern_scan_at_least skips, 16 at a time, the logits that cannot beat the
 * heap's worst (the window's tokens are offered after the pass, with
 * their penalised values).  The kept set and its order are exactly those
 * of scaling every logit and selecting the k best (descending logit,
 * ascending id).  Candidates go to s->idx best first, their scaled logits
 * to s->logit[id]; returns k and the largest in *mx. */
static int sampler_topk(eng_sampler *s, const float *logits, const int32_t *history, int n_history,
                        float *mx) {
    const int V = s->n_vocab, k = s->p.top_k;
    const float inv_t = 1.0f / s->p.temperature;
    uint64_t *h = (uint64_t *)(void *)s->idx;
    int n = 0, pen = sampler_penalises(s, history, n_history);
    kern_isa isa = kern_isa_best();
    int from = pen ? sampler_mark(s, history, n_history, 1) : 0;
    for (int i = 0; i < V; i++) {
        if (n == k && h[0] != 0) { /* skip what cannot beat the worst kept */
            float thr = key_value(h[0]);
            if (thr > -INFINITY) i = kern_scan_at_least(isa, logits, i, V, inv_t, thr);
            if (i >= V) break;
        }
        if (pen && s->seen[i]) continue; /* offered below, penalised */
        float v = logits[i] == logits[i] ? logits[i] : -INFINITY;
        heap_offer(h, &n, k, v * inv_t, i);
    }
    if (pen) {
        float v;
        for (int i = from, t;
             (t = sampler_next_marked(s, logits, history, n_history, &i, &v)) >= 0;)
            heap_offer(h, &n, k, v * inv_t, t);
    }
    qsort(h, (size_t)n, sizeof *h, cmp_key);
    for (int i = 0; i < n; i++) {
        int32_t id = (int32_t)(uint32_t)h[i];
        s->logit[id] = key_value(h[i]);
        s->idx[i] = id; /* 4i <= 8i: in place */
    }
    *mx = n ? s->logit[s->idx[0]] : -INFINITY;
    return n;
}

/* Repetition penalty (and NaN -> -inf) of logits into s->logit. */
static void sampler_penalise(eng_sampler *s, const float *logits, const int32_t *history,
                             int n_history) {
    int V = s->n_vocab;
    float *lg = s->logit;
    for (int i = 0; i < V; i++) lg[i] = logits[i] == logits[i] ? logits[i] : -INFINITY;
    if (s->p.repetition_penalty != 1.0f && history && n_history > 0) {
        int from = s->p.repeat_last_n > 0 && n_history > s->p.repeat_last_n
                       ? n_history - s->p.repeat_last_n
                       : 0;
        for (int i = from; i < n_history; i++) {
            int32_t t = history[i];
            if (t < 0 || t >= V || s->seen[t]) continue;
            s->seen[t] = 1;
            lg[t] = sampler_pen(s, lg[t]);
        }
        sampler_mark(s, history, n_history, 0);
    }
}

/* Greedy choice over s->logit (ties: lowest id). */
static int32_t sampler_argmax(const eng_sampler *s) {
    return kern_argmax(kern_isa_best(), s->logit, s->n_vocab);
}

/* s->logit[i] = the penalised, NaN-as--inf logit i times inv_t, in one
 * pass over the caller's logits (the window's tokens after it); returns the
 * largest. */
static float sampler_scaled(eng_sampler *s, const float *logits, const int32_t *history,
                            int n_history, float inv_t) {
    const int V = s->n_vocab;
    float *lg = s->logit, mx = -INFINITY;
    int pen = sampler_penalises(s, history, n_history);
    int from = pen ? sampler_mark(s, history, n_history, 1) : 0;
    for (int i = 0; i < V; i++) {
        float v = logits[i] == logits[i] ? logits[i] : -INFINITY;
        lg[i] = v * inv_t;
        if (lg[i] > mx && !(pen && s->seen[i])) mx = lg[i];
    }
    if (pen) {
        float v;
        for (int i = from, t;
             (t = sampler_next_marked(s, logits, history, n_history, &i, &v)) >= 0;) {
            lg[t] = v * inv_t;
            if (lg[t] > mx) mx = lg[t];
        }
    }
    return mx;
}

/* The sampling distribution of logits (temperature > 0): candidates
 * s->idx[0..n) with unnormalised probabilities s->prob[0..n), their sum in
 * *sum.  The caller's logits are read once (sampler_topk, sampler_scaled);
 * the rest works on the candidates or the sampler's scaled copy.  Returns
 * n. */
static int sampler_dist(eng_sampler *s, const float *logits, const int32_t *history, int n_history,
                        double *sum_out) {
    int V = s->n_vocab;
    float *lg = s->logit;
    float mx;
    int n;
    double sum = 0;
    if (s->p.top_k > 0 && s->p.top_k < V) {
        n = sampler_topk(s, logits, history, n_history, &mx);
        for (int i = 0; i < n; i++) sum += s->prob[i] = expf(lg[s->idx[i]] - mx);
        *sum_out = sum;
        return n;
    }
    mx = sampler_scaled(s, logits, history, n_history, 1.0f / s->p.temperature);
    if (s->p.top_p < 1.0f) {
        /* the smallest best-first prefix holding top_p of the mass, found
         * among the threshold's candidates, else in the full order */
        double total = 0;
        n = topp_candidates(s, mx, &total);
        for (int pass = 0;; pass++) {
            double acc = 0;
            int keep = 0;
            for (int i = 0; i < n && !keep; i++) {
                acc += s->prob[i] = expf(lg[s->idx[i]] - mx);
                if (acc / total >= s->p.top_p) keep = i + 1;
            }
            if (keep || n == V || pass) {
                n = keep ? keep : n;
                break;
            }
            n = all_candidates(s); /* rounding left the prefix short */
        }
        for (int i = 0; i < n; i++) sum += s->prob[i];
    } else {
        /* the whole vocabulary: no order needed, draw in id order */
        for (int i = 0; i < V; i++) {
            s->idx[i] = i;
            sum += s->prob[i] = expf(lg[i] - mx);
        }
        n = V;
    }
    *sum_out = sum;
    return n;
}

/* Uniform double in [0, 1) from the top 53 bits of the next draw. */
static double sampler_uniform(eng_sampler *s) {
    return (double)(xoshiro_next(s->rng) >> 11) * (1.0 / 9007199254740992.0);
}

/* Draw from candidates [0, n) of mass `mass`, skipping id `skip` (-1: none);
 * rounding past the end gives the last candidate of non-zero mass. */
static int32_t sampler_draw(eng_sampler *s, int n, double mass, int32_t skip) {
    double r = sampler_uniform(s) * mass, c = 0;
    int32_t last = s->idx[0];
    for (int i = 0; i < n; i++) {
        if (s->idx[i] == skip) continue;
        if (s->prob[i] > 0) last = s->idx[i];
        c += s->prob[i];
        if (r < c) return s->idx[i];
    }
    return last;
}

/* ---- masks and log-probabilities ---- */

void eng_sampler_mask_apply(float *logits, int n, const uint32_t *mask) {
    for (int w = 0; w * 32 < n; w++) {
        uint32_t m = mask[w];
        if (m == 0xFFFFFFFFu) continue;
        int end = n - w * 32 < 32 ? n - w * 32 : 32;
        for (int b = 0; b < end; b++)
            if (!(m >> b & 1u)) logits[w * 32 + b] = -INFINITY;
    }
}

/* 1 when the mask allows some token below n. */
static int mask_any(const uint32_t *mask, int n) {
    int words = (n + 31) / 32;
    for (int w = 0; w < words; w++) {
        uint32_t m = mask[w];
        if (w == words - 1 && n % 32) m &= (1u << (n % 32)) - 1;
        if (m) return 1;
    }
    return 0;
}

/* NaN counts as -inf. */
static float finite_or_ninf(float v) { return v == v ? v : -INFINITY; }

/* Best allowed token of lg (ties: lowest id; NaN as -inf; all -inf: the
 * lowest allowed id).  The mask allows some token below n.  Runs of fully
 * allowed words go to the vectorised kern_argmax (a mask inside a JSON
 * string allows nearly everything); the other words are scanned bit by
 * bit.  Runs and bits are visited in ascending id order and only a larger
 * value replaces the best, so ties keep the lowest id. */
static int32_t masked_argmax(const float *lg, int n, const uint32_t *mask) {
    int32_t best = -1;
    float bv = -INFINITY;
    int words = (n + 31) / 32;
    for (int w = 0; w < words;) {
        if (mask[w] == 0xFFFFFFFFu && (w + 1) * 32 <= n) {
            int w2 = w;
            while (w2 < words && mask[w2] == 0xFFFFFFFFu && (w2 + 1) * 32 <= n) w2++;
            int32_t i = w * 32 + kern_argmax(kern_isa_best(), lg + w * 32, (w2 - w) * 32);
            float v = finite_or_ninf(lg[i]);
            if (best < 0 || v > bv) best = i, bv = v;
            w = w2;
            continue;
        }
        uint32_t m = mask[w];
        while (m) {
            int id = w * 32 + __builtin_ctz(m);
            m &= m - 1;
            if (id >= n) break;
            float v = finite_or_ninf(lg[id]);
            if (best < 0 || v > bv) best = id, bv = v;
        }
        w++;
    }
    return best;
}

/* The logit token t is decided on at temperature 1: the caller's, NaN as
 * -inf, the repetition penalty applied when t is in the penalised history,
 * -inf when the mask forbids it. */
static float sampler_decision_logit(const eng_sampler *s, const float *logits,
                                    const int32_t *history, int n_history, const uint32_t *mask,
                                    int32_t t) {
    if (t < 0 || t >= s->n_vocab) return -INFINITY;
    if (mask && !(mask[t >> 5] >> (t & 31) & 1u)) return -INFINITY;
    float v = finite_or_ninf(logits[t]);
    if (sampler_penalises(s, history, n_history)) {
        int from = s->p.repeat_last_n > 0 && n_history > s->p.repeat_last_n
                       ? n_history - s->p.repeat_last_n
                       : 0;
        for (int i = from; i < n_history; i++)
            if (history[i] == t) {
                v = v > 0 ? v / s->p.repetition_penalty : v * s->p.repetition_penalty;
                break;
            }
    }
    return v;
}

/* Is (va, a) ranked before (vb, b): larger value, then lower id. */
static int lp_before(float va, int32_t a, float vb, int32_t b) {
    return va > vb || (va == vb && a < b);
}

/* Log-softmax facts of decision logits lg (already penalised; tokens the
 * mask forbids excluded): the normaliser into *lse, the best
 * lp->top_logprobs tokens into lp->top. */
static void sampler_lp_dist(const float *lg, int n, const uint32_t *mask, eng_sampler_logprobs *lp,
                            double *lse) {
    float mx = -INFINITY;
    for (int i = 0; i < n; i++)
        if (!mask || (mask[i >> 5] >> (i & 31) & 1u)) {
            float v = finite_or_ninf(lg[i]);
            if (v > mx) mx = v;
        }
    double sum = 0;
    int k = lp->top_logprobs < 0 ? 0 : lp->top_logprobs;
    if (k > ENG_SAMPLER_TOP_MAX) k = ENG_SAMPLER_TOP_MAX;
    float tv[ENG_SAMPLER_TOP_MAX];
    int32_t ti[ENG_SAMPLER_TOP_MAX];
    int nt = 0;
    for (int i = 0; i < n; i++) {
        if (mask && !(mask[i >> 5] >> (i & 31) & 1u)) continue;
        float v = finite_or_ninf(lg[i]);
        if (v == -INFINITY) continue;
        sum += exp((double)v - (double)mx);
        if (!k || (nt == k && !lp_before(v, i, tv[k - 1], ti[k - 1]))) continue;
        int j = nt < k ? nt++ : k - 1; /* insert, keeping the k best in order */
        while (j > 0 && lp_before(v, i, tv[j - 1], ti[j - 1])) {
            tv[j] = tv[j - 1];
            ti[j] = ti[j - 1];
            j--;
        }
        tv[j] = v;
        ti[j] = i;
    }
    *lse = mx == -INFINITY ? INFINITY : (double)mx + log(sum);
    lp->n_top = nt;
    for (int j = 0; j < nt; j++) {
        lp->top[j].token = ti[j];
        lp->top[j].logprob = (float)((double)tv[j] - *lse);
    }
}

/* lp->logprob of chosen token t, given the normaliser lse. */
static void sampler_lp_chosen(const eng_sampler *s, const float *logits, const int32_t *history,
                              int n_history, const uint32_t *mask, int32_t t, double lse,
                              eng_sampler_logprobs *lp) {
    float v = sampler_decision_logit(s, logits, history, n_history, mask, t);
    lp->logprob = v == -INFINITY ? -INFINITY : (float)((double)v - lse);
}

/* Fill lp for chosen token t (decision logits: the caller's through the
 * penalty and mask). */
static void sampler_logprobs(eng_sampler *s, const float *dec, const float *logits,
                             const int32_t *history, int n_history, const uint32_t *mask, int32_t t,
                             eng_sampler_logprobs *lp) {
    double lse;
    sampler_lp_dist(dec, s->n_vocab, mask, lp, &lse);
    sampler_lp_chosen(s, logits, history, n_history, mask, t, lse, lp);
}

int eng_sampler_needs_logits(const eng_sampler *s) {
    return s->p.temperature > 0 || s->p.repetition_penalty != 1.0f;
}

/* The sampling path's decision logits into s->logit: penalised, NaN as
 * -inf, forbidden tokens -inf; ready for sampler_dist. */
static void sampler_prepare(eng_sampler *s, const float *logits, const int32_t *history,
                            int n_history, const uint32_t *mask) {
    sampler_penalise(s, logits, history, n_history);
    if (mask) eng_sampler_mask_apply(s->logit, s->n_vocab, mask);
}

/* sampler_dist under a mask, with the log-softmax normaliser into *lse
 * and lp's alternatives when lp is wanted.  Without either, the caller's
 * logits are read once (sampler_dist's one pass); with one, they are
 * penalised and masked into s->logit first and sampler_dist reads that. */
static int sampler_dist_masked(eng_sampler *s, const float *logits, const int32_t *history,
                               int n_history, const uint32_t *mask, eng_sampler_logprobs *lp,
                               double *lse, double *sum) {
    *lse = 0;
    if (!mask && !lp) return sampler_dist(s, logits, history, n_history, sum);
    sampler_prepare(s, logits, history, n_history, mask);
    if (lp) sampler_lp_dist(s->logit, s->n_vocab, NULL, lp, lse);
    return sampler_dist(s, s->logit, NULL, 0, sum);
}

/* Greedy under a mask (penalty applied). */
static int32_t sampler_greedy_masked(eng_sampler *s, const float *logits, const int32_t *history,
                                     int n_history, const uint32_t *mask, const float **dec) {
    *dec = logits;
    if (sampler_penalises(s, history, n_history)) {
        sampler_penalise(s, logits, history, n_history);
        *dec = s->logit;
    }
    if (!mask)
        return *dec == logits ? kern_argmax(kern_isa_best(), logits, s->n_vocab)
                              : sampler_argmax(s);
    return masked_argmax(*dec, s->n_vocab, mask);
}

int32_t eng_sampler_sample_masked(eng_sampler *s, const float *logits, const int32_t *history,
                                  int n_history, const uint32_t *mask, eng_sampler_logprobs *lp) {
    if (mask && !mask_any(mask, s->n_vocab)) return -1;
    if (s->p.temperature <= 0) {
        const float *dec;
        int32_t t = sampler_greedy_masked(s, logits, history, n_history, mask, &dec);
        if (lp) sampler_logprobs(s, dec, logits, history, n_history, mask, t, lp);
        return t;
    }
    double lse, sum;
    int n = sampler_dist_masked(s, logits, history, n_history, mask, lp, &lse, &sum);
    int32_t t = sampler_draw(s, n, sum, -1);
    if (mask && !(mask[t >> 5] >> (t & 31) & 1u)) /* every allowed logit was -inf */
        t = masked_argmax(logits, s->n_vocab, mask);
    if (lp) sampler_lp_chosen(s, logits, history, n_history, mask, t, lse, lp);
    return t;
}

int32_t eng_sampler_sample(eng_sampler *s, const float *logits, const int32_t *history,
                           int n_history) {
    return eng_sampler_sample_masked(s, logits, history, n_history, NULL, NULL);
}

int32_t eng_sampler_verify_masked(eng_sampler *s, const float *logits, const int32_t *history,
                                  int n_history, const uint32_t *mask, int32_t draft, int *accepted,
                                  eng_sampler_logprobs *lp) {
    *accepted = 0;
    if (mask && !mask_any(mask, s->n_vocab)) return -1;
    if (s->p.temperature <= 0) {
        const float *dec;
        int32_t best = sampler_greedy_masked(s, logits, history, n_history, mask, &dec);
        *accepted = best == draft;
        if (lp) sampler_logprobs(s, dec, logits, history, n_history, mask, best, lp);
        return best;
    }
    double lse, sum, pd = 0;
    int n = sampler_dist_masked(s, logits, history, n_history, mask, lp, &lse, &sum);
    for (int i = 0; i < n; i++)
        if (s->idx[i] == draft) pd = s->prob[i];
    int32_t t;
    /* accept with probability p(draft) = pd / sum */
    if (pd > 0 && (sampler_uniform(s) * sum < pd || sum - pd <= 0)) {
        *accepted = 1;
        t = draft;
    } else {
        /* rejected: the residual max(p - q, 0) with q the point mass on the
         * draft is p without the draft, renormalised */
        t = sampler_draw(s, n, sum - pd, draft);
        if (mask && !(mask[t >> 5] >> (t & 31) & 1u)) t = masked_argmax(logits, s->n_vocab, mask);
    }
    if (lp) sampler_lp_chosen(s, logits, history, n_history, mask, t, lse, lp);
    return t;
}

int32_t eng_sampler_verify(eng_sampler *s, const float *logits, const int32_t *history,
                           int n_history, int32_t draft, int *accepted) {
    return eng_sampler_verify_masked(s, logits, history, n_history, NULL, draft, accepted, NULL);
}
