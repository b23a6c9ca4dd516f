/*
 * fuzz_constraint.c -- libFuzzer target for constraint compilation and
 * matching (eng_constraint.h): what a request's response_format reaches.
 *
 * Input: byte 0 picks the kind (JSON schema, JSON object, regex, Lark) and
 * the vocabulary (BPE or SPM), byte 1 how many tokens to generate, then
 * the spec text up to a NUL byte, then bytes steering the choice among the
 * allowed tokens.  A spec that compiles is walked: each step's mask (from
 * the pool or computed here) must allow some token unless the constraint
 * is complete, the chosen allowed token must commit, validate must count
 * a committed prefix whole, a clone must produce the same masks, and a
 * look-ahead job must leave the state where it was.  Nothing may crash,
 * hang or leak; refusals are fine.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_constraint.h"
#include "vocab_util.h"

static eng_constraint_vocab *voc[2];
static eng_constraint_pool *pool;

static void init(void) {
    if (pool || !eng_constraint_available()) return;
    eng_tok *t[2] = {vu_bpe(), vu_spm()};
    for (int i = 0; i < 2; i++)
        if (!t[i] || eng_constraint_vocab_new(t[i], eng_tok_n_vocab(t[i]) + 5, &voc[i], NULL, 0))
            abort();
    if (eng_constraint_pool_new(2, &pool, NULL, 0) != 0) abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init();
    if (!pool || size < 2) return 0;
    eng_constraint_kind kinds[4] = {ENG_CONSTRAINT_JSON_SCHEMA, ENG_CONSTRAINT_JSON_OBJECT,
                                    ENG_CONSTRAINT_REGEX, ENG_CONSTRAINT_LARK};
    eng_constraint_kind k = kinds[data[0] & 3];
    eng_constraint_vocab *v = voc[(data[0] >> 2) & 1];
    int steps = data[1] % 24;
    const char *text = (const char *)data + 2;
    size_t len = 0, rest = size - 2;
    while (len < rest && text[len]) len++;
    const uint8_t *steer = data + 2 + len + (len < rest);
    size_t n_steer = size - (size_t)(steer - data);
    if (len > 4096) return 0; /* keep runs short */
    eng_constraint_spec sp = {k, text, len};
    eng_constraint *c = NULL;
    char err[256];
    if (eng_constraint_new(v, &sp, &c, err, sizeof err) != 0) {
        if (!err[0] || strchr(err, '\n')) abort(); /* a refusal says why, on one line */
        return 0;
    }
    int V = eng_constraint_vocab_size(v);
    size_t words = eng_constraint_mask_words(v);
    uint32_t *copy = malloc(words * 4);
    int32_t hist[32];
    int n_hist = 0;
    for (int s = 0; s < steps && !eng_constraint_is_stopped(c); s++) {
        const uint32_t *const *ms;
        int nm;
        int via_pool = s < (int)n_steer ? steer[s] & 1 : 0;
        if (via_pool && eng_constraint_start(c, pool, NULL, 0, 0) != 0) abort();
        if (eng_constraint_wait(c, &ms, &nm, NULL, err, sizeof err) != 0) break; /* fuel */
        memcpy(copy, ms[0], words * 4);
        int n_allowed = 0;
        for (int t = 0; t < V; t++) n_allowed += eng_constraint_allows(copy, t);
        if (!n_allowed) abort(); /* not complete, so something must be allowed */
        int pick = (s < (int)n_steer ? steer[s] : 0) % n_allowed, tok = -1;
        for (int t = 0; t < V && tok < 0; t++)
            if (eng_constraint_allows(copy, t) && pick-- == 0) tok = t;
        if (eng_constraint_validate(c, &tok, 1) != 1) abort();
        if (s == 3) { /* a clone sees the same state */
            eng_constraint *d = NULL;
            if (eng_constraint_clone(c, &d, NULL, 0) == 0) {
                const uint32_t *m2;
                if (eng_constraint_mask(d, &m2, NULL, 0) == 0 && memcmp(m2, copy, words * 4))
                    abort();
                eng_constraint_free(d);
            }
        }
        if (eng_constraint_commit(c, &tok, 1, err, sizeof err) != 0) break;
        if (n_hist < 32) hist[n_hist++] = tok;
    }
    /* a look-ahead over a few arbitrary tokens that validate */
    if (!eng_constraint_is_stopped(c) && n_steer > 4) {
        int32_t ahead[4];
        for (int i = 0; i < 4; i++) ahead[i] = steer[n_steer - 1 - i] % V;
        int ok = eng_constraint_validate(c, ahead, 4);
        if (ok > 0 && eng_constraint_start(c, pool, ahead, ok, 0) == 0) {
            const uint32_t *const *ms;
            int nm;
            (void)eng_constraint_wait(c, &ms, &nm, NULL, 0, 0);
        }
    }
    (void)hist;
    free(copy);
    eng_constraint_free(c);
    return 0;
}
