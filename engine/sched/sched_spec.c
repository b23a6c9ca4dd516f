/*
 * sched_spec.c -- speculative decoding inside the scheduler's step: the
 * draft a decoding sequence feeds with its last token, and what happens to
 * the verify chunk's logits after the forward pass (eng_spec.h has the
 * method, eng_sched.h the rule of when a step drafts).
 *
 * A draft is written into the request's token array just past n_toks, so
 * the step's tokens [last, d1..dk] are contiguous without a copy;
 * verification then overwrites those entries with the tokens it emits, and
 * n_toks grows by their number.  The KV is cut back to n_toks - 1 tokens
 * (every emitted token but the last is stored; the last is fed next step,
 * as after a plain decode step), so the sequence, the prefix cache's view
 * of it and preemption never see a rejected token.
 *
 * A constrained sequence (eng_spec.h "Constraints") hands its draft to
 * its constraint's mask job (eng_constraint_ahead: the job already in
 * flight for the current state continues over the draft, so drafting never
 * waits), which computes the masks of the draft positions while the verify
 * chunk runs and stops at the first token the constraint refuses: only the
 * allowed prefix is verified, the rest of the chunk's rows are dropped
 * with the KV cut.  After verification the emitted tokens are committed in
 * order, and a constraint that completes inside them ends the sequence
 * there.
 */
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

/* Room for n tokens in r->toks.  Returns 0 or -1. */
static int toks_reserve(sched_req *r, int n) {
    if (n <= r->cap_toks) return 0;
    int cap = r->cap_toks;
    while (cap < n) cap *= 2;
    int32_t *t = realloc(r->toks, (size_t)cap * sizeof *t);
    if (!t) return -1;
    r->toks = t;
    r->cap_toks = cap;
    return 0;
}

int sched_spec_draft(eng_sched *s, sched_req *r, int k) {
    if (r->spec_k < 1) r->spec_k = s->cfg.spec_tokens; /* a new request starts at the max */
    if (k > r->spec_k) k = r->spec_k;
    /* a verify step emits up to k + 1 tokens: stay within max_tokens */
    int left = r->max_tokens - r->n_gen - 1;
    if (k > left) k = left;
    k = eng_spec_max_draft(s->layout, r->kv.n_tokens, k);
    if (k <= 0 || toks_reserve(r, r->n_toks + k + 1) != 0) return 0;
    int32_t *out = r->toks + r->n_toks;
    int got;
    if (s->cfg.draft_fn) {
        got = s->cfg.draft_fn(s->cfg.draft_ctx, r->toks, r->n_toks, r->n_prompt, out, k);
    } else {
        if (!r->ngram &&
            eng_ngram_new(s->cfg.spec_ngram_min, s->cfg.spec_ngram_max, &r->ngram, NULL, 0) != 0)
            return 0;
        got = eng_ngram_draft(r->ngram, r->toks, r->n_toks, k, out);
    }
    if (got > k) got = k;
    /* eng_forward refuses ids outside the vocabulary (for the whole batch) */
    for (int i = 0; i < got; i++)
        if (out[i] < 0 || out[i] >= s->n_vocab) got = i;
    if (got > ENG_CONSTRAINT_MAX_AHEAD) got = ENG_CONSTRAINT_MAX_AHEAD;
    /* the constraint looks ahead over the draft while the chunk runs (its
     * job in flight takes it over: no wait here); a refused token cuts it */
    if (got > 0 && r->cons &&
        eng_constraint_ahead(r->cons, s->pool, out, got, s->cfg.mask_budget_us) == 0) {
        memcpy(r->cons_ahead, out, (size_t)got * sizeof *out);
        r->n_cons_ahead = got;
    }
    return got > 0 ? got : 0;
}

void sched_spec_commit(eng_sched *s, sched_req *r, int k, const float *rows, int64_t now,
                       uint64_t *emitted) {
    int acc, n0 = r->n_toks;
    const uint32_t *const *masks = NULL;
    int n_masks = 0;
    int kv = k; /* drafts verified: a constraint cut the draft at a refused token */
    if (r->cons) {
        if (sched_cons_wait(s, r, &masks, &n_masks) != 0) return;
        if (kv > n_masks - 1) kv = n_masks - 1;
        /* the masks are of the draft the job looked ahead over: should the
         * step have been rebuilt with another, only the common part holds */
        int same = 0;
        while (same < kv && same < r->n_cons_ahead && r->cons_ahead[same] == r->toks[n0 + same])
            same++;
        kv = same;
        r->n_cons_ahead = 0;
    }
    eng_sampler_logprobs *lp = r->logprobs ? r->lp : NULL;
    int e = eng_spec_verify_ex(r->sampler, rows, s->n_vocab, r->toks, n0, r->toks + n0, kv,
                               r->max_tokens - r->n_gen, masks, lp, &acc);
    if (e < 1) {
        sched_end_running(s, r, ENG_SCHED_ERROR, "constraint: the mask allows no token");
        return;
    }
    int cons_end = 0; /* 1: the constraint completed inside the emitted tokens */
    char err[PL_ERR_LEN] = "";
    if (r->cons) {
        for (int i = 0; i < e; i++) {
            int32_t t = r->toks[n0 + i];
            if (eng_sampler_is_stop(r->sampler, t)) break; /* ends the sequence anyway */
            if (eng_constraint_commit(r->cons, &t, 1, err, sizeof err) != 0) {
                e = i; /* keep what was valid; the error ends it below */
                cons_end = -1;
                break;
            }
            if (eng_constraint_is_stopped(r->cons)) {
                e = i + 1;
                cons_end = 1;
                break;
            }
        }
        if (acc > e) acc = e;
    }
    r->n_toks += e;
    r->n_gen += e;
    *emitted += (uint64_t)e;
    pthread_mutex_lock(&s->mu);
    s->st.spec_steps++;
    s->st.spec_drafted += (uint64_t)k;
    s->st.spec_accepted += (uint64_t)acc;
    pthread_mutex_unlock(&s->mu);
    r->spec_k = eng_spec_next_k(r->spec_k, k, acc, s->cfg.spec_tokens);
    if (!r->first_tok_us) r->first_tok_us = now;
    for (int i = 0; i < e; i++)
        sched_token_event(s, r, r->n_gen - e + i, rows + (size_t)i * s->n_vocab,
                          lp ? lp + i : NULL);
    if (eng_kvseq_truncate(&r->kv, r->n_toks - 1) != 0) {
        /* eng_spec_max_draft keeps this from happening; should it anyway,
         * drop the KV and let the sequence recompute it as a prefill */
        char kerr[PL_ERR_LEN];
        eng_kvseq_free(&r->kv);
        r->kv_live = 0;
        r->n_shared = 0;
        if (eng_kvseq_init(&r->kv, s->layout, &s->alloc, kerr, sizeof kerr) != 0) {
            sched_end_running(s, r, ENG_SCHED_ERROR, kerr);
            return;
        }
        r->kv_live = 1;
    }
    if (cons_end < 0) sched_end_running(s, r, ENG_SCHED_ERROR, err);
    else if (cons_end > 0 || (e > 0 && eng_sampler_is_stop(r->sampler, r->toks[r->n_toks - 1])))
        sched_end_running(s, r, ENG_SCHED_STOP, NULL);
    else if (r->n_gen >= r->max_tokens) sched_end_running(s, r, ENG_SCHED_LENGTH, NULL);
    else if (r->cons) (void)sched_cons_next(s, r);
}
