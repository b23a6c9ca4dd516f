/*
 * spec.c -- prompt-lookup drafting and draft verification (eng_spec.h).
 *
 * The index is one open-addressing table for every n-gram size.  A slot
 * holds the n-gram's 32-bit hash (the size mixed in) and `pos`, the
 * position right after its latest occurrence; the n-gram's tokens are not
 * stored but read back from the caller's sequence (toks[pos - n .. pos))
 * when a probe hits.  A hash collision between sizes is harmless: a slot
 * only counts when those tokens equal the probe's, which is then a genuine
 * earlier occurrence.  Position j is indexed (its n-grams ending at j - 1
 * recorded with pos = j) once the sequence has grown past it, so a probe of
 * the suffix never finds the suffix itself.
 */
#include "eng_spec.h"

#include <stdlib.h>
#include <string.h>

#include "eng_sched.h"
#include "pl_err.h"

/* One table slot. */
typedef struct ngram_slot {
    uint32_t hash; /* n-gram hash (size mixed in) */
    int32_t pos;   /* position after its latest occurrence; -1 = empty */
} ngram_slot;

struct eng_ngram {
    int n_min, n_max;   /* n-gram sizes indexed */
    int next;           /* next position to index (positions < next are) */
    uint32_t mask;      /* slots - 1 (a power of two), 0 before the first index */
    uint32_t used;      /* slots in use */
    ngram_slot *slot;   /* the table */
    const int32_t *seq; /* the sequence of the last call (compared on hits) */
};

int eng_ngram_new(int n_min, int n_max, eng_ngram **out, char *err, size_t errlen) {
    *out = NULL;
    if (n_min < 1 || n_max < n_min || n_max > ENG_SPEC_NGRAM_MAX) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL, "spec: n-gram sizes %d..%d not in 1..%d",
                       n_min, n_max, ENG_SPEC_NGRAM_MAX);
    }
    eng_ngram *g = calloc(1, sizeof *g);
    if (!g) return pl_errf(err, errlen, ENG_SCHED_ENOMEM, "spec: out of memory");
    g->n_min = n_min;
    g->n_max = n_max;
    *out = g;
    return 0;
}

void eng_ngram_free(eng_ngram *g) {
    if (!g) return;
    free(g->slot);
    free(g);
}

int eng_ngram_indexed(const eng_ngram *g) { return g->next; }

size_t eng_ngram_bytes(const eng_ngram *g) {
    return sizeof *g + (g->slot ? ((size_t)g->mask + 1) * sizeof(ngram_slot) : 0);
}

/* Hash of t[0..n) with the size mixed in (never used as an empty marker:
 * emptiness is pos < 0). */
static uint32_t ngram_hash(const int32_t *t, int n) {
    uint64_t h = 0x9E3779B97F4A7C15ull * (uint64_t)(n + 1);
    for (int i = 0; i < n; i++) {
        h ^= (uint32_t)t[i];
        h *= 0xBF58476D1CE4E5B9ull;
        h ^= h >> 29;
    }
    return (uint32_t)(h ^ (h >> 32));
}

/* Resize to `slots` (a power of two) and re-insert.  Returns 0 or -1. */
static int ngram_rehash(eng_ngram *g, uint32_t slots) {
    ngram_slot *t = malloc((size_t)slots * sizeof *t);
    if (!t) return -1;
    for (uint32_t i = 0; i < slots; i++) t[i].pos = -1;
    if (g->slot)
        for (uint32_t i = 0; i <= g->mask; i++) {
            if (g->slot[i].pos < 0) continue;
            uint32_t j = g->slot[i].hash & (slots - 1);
            while (t[j].pos >= 0) j = (j + 1) & (slots - 1);
            t[j] = g->slot[i];
        }
    free(g->slot);
    g->slot = t;
    g->mask = slots - 1;
    return 0;
}

/* Record toks[j - n .. j) -> j for every indexed size n <= j. */
static int ngram_index_pos(eng_ngram *g, const int32_t *toks, int j) {
    for (int n = g->n_min; n <= g->n_max && n <= j; n++) {
        if (!g->slot || (g->used + 1) * 2 > g->mask + 1) {
            uint32_t slots = g->slot ? (g->mask + 1) * 2 : 256;
            if (slots == 0 || ngram_rehash(g, slots) != 0) return -1;
        }
        const int32_t *ng = toks + j - n;
        uint32_t h = ngram_hash(ng, n), i = h & g->mask;
        for (;; i = (i + 1) & g->mask) {
            ngram_slot *sl = &g->slot[i];
            if (sl->pos < 0) {
                sl->hash = h;
                sl->pos = j;
                g->used++;
                break;
            }
            if (sl->hash == h && sl->pos >= n &&
                !memcmp(toks + sl->pos - n, ng, (size_t)n * sizeof *ng)) {
                sl->pos = j; /* a later occurrence replaces the earlier one */
                break;
            }
        }
    }
    return 0;
}

/* Position after the latest earlier occurrence of toks[n - len .. n), or -1. */
static int ngram_find(const eng_ngram *g, const int32_t *toks, int n, int len) {
    const int32_t *ng = toks + n - len;
    uint32_t h = ngram_hash(ng, len);
    for (uint32_t i = h & g->mask;; i = (i + 1) & g->mask) {
        const ngram_slot *sl = &g->slot[i];
        if (sl->pos < 0) return -1;
        if (sl->hash == h && sl->pos >= len &&
            !memcmp(toks + sl->pos - len, ng, (size_t)len * sizeof *ng))
            return sl->pos;
    }
}

int eng_ngram_draft(eng_ngram *g, const int32_t *toks, int n, int k, int32_t *out) {
    if (k <= 0 || n < 2) return 0;
    if (n < g->next) { /* not the sequence indexed: start over */
        g->next = 0;
        g->used = 0;
        if (g->slot)
            for (uint32_t i = 0; i <= g->mask; i++) g->slot[i].pos = -1;
    }
    /* index positions up to n - 1: n-grams ending before the last token */
    for (; g->next < n; g->next++)
        if (g->next >= 1 && ngram_index_pos(g, toks, g->next) != 0) return 0;
    if (!g->slot) return 0;
    int pos = -1;
    for (int len = g->n_max < n - 1 ? g->n_max : n - 1; len >= g->n_min && pos < 0; len--)
        pos = ngram_find(g, toks, n, len);
    if (pos < 0) return 0;
    /* continue from pos; past the end, the draft continues itself */
    for (int i = 0; i < k; i++) out[i] = pos + i < n ? toks[pos + i] : out[pos + i - n];
    return k;
}

int eng_spec_max_draft(const eng_kv_layout *l, int n_kv, int k) {
    if (k <= 0) return 0;
    if (!l->n_layers[1] || l->max_window <= 0) return k;
    long B = l->block_tokens, W = l->max_window, T = (long)n_kv + 1;
    /* Truncating to T fails iff the forward pass released a local block
     * i with T - W < (i + 1) * B; it releases those with (i + 1) * B <=
     * n_kv + 1 + k - W.  m = the smallest such boundary: the draft must
     * keep the chunk's end below m + W. */
    long lo = T - W, m = lo < 0 ? B : (lo / B + 1) * B;
    if (m < B) m = B;
    long kmax = m + W - T - 1;
    if (kmax < 0) kmax = 0;
    return kmax < k ? (int)kmax : k;
}

int eng_spec_verify_ex(eng_sampler *s, const float *logits, int n_vocab, int32_t *toks, int n_toks,
                       const int32_t *draft, int k, int max_emit, const uint32_t *const *masks,
                       eng_sampler_logprobs *lp, int *n_accepted) {
    int e = 0;
    *n_accepted = 0;
    if (max_emit < 1) max_emit = 1;
    for (; e < k && e < max_emit; e++) {
        int ok = 0;
        int32_t d = draft[e]; /* read before toks[n_toks + e] (may alias) is written */
        int32_t t = eng_sampler_verify_masked(s, logits + (size_t)e * n_vocab, toks, n_toks + e,
                                              masks ? masks[e] : NULL, d, &ok, lp ? lp + e : NULL);
        if (t < 0) return e; /* the mask allows nothing */
        toks[n_toks + e] = t;
        if (!ok) return e + 1;
        ++*n_accepted;
        if (eng_sampler_is_stop(s, t)) return e + 1;
    }
    if (e == max_emit) return e;
    int32_t t = eng_sampler_sample_masked(s, logits + (size_t)e * n_vocab, toks, n_toks + e,
                                          masks ? masks[e] : NULL, lp ? lp + e : NULL);
    if (t < 0) return e;
    toks[n_toks + e] = t;
    return e + 1;
}

int eng_spec_verify(eng_sampler *s, const float *logits, int n_vocab, int32_t *toks, int n_toks,
                    const int32_t *draft, int k, int max_emit, int *n_accepted) {
    return eng_spec_verify_ex(s, logits, n_vocab, toks, n_toks, draft, k, max_emit, NULL, NULL,
                              n_accepted);
}

int eng_spec_next_k(int k, int drafted, int accepted, int k_max) {
    if (drafted > 0) k = accepted >= drafted ? k + 2 : k - 1;
    if (k > k_max) k = k_max;
    return k < 1 ? 1 : k;
}
