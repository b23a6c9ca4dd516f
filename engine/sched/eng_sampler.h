/*
 * eng_sampler.h -- next-token selection from logits.
 *
 * Purpose.  Turns one row of logits into a token id: greedy (temperature
 * <= 0), or temperature sampling restricted by top-k and top-p, after a
 * repetition penalty over the recent history; and recognises stop tokens.
 *
 * Order of operations (as transformers' generate): repetition penalty
 * (for every distinct token of the last repeat_last_n history tokens:
 * logit > 0 ? logit / p : logit * p), then greedy argmax if temperature <= 0
 * (ties: lowest id), else divide by temperature, keep the top_k largest
 * (0 = all), keep the smallest prefix of the descending order whose
 * probability mass reaches top_p (>= 1 = all; at least one token), sample
 * from the renormalised distribution.
 *
 * Speculative verification (eng_sampler_verify).  A drafted token d is
 * judged against the same distribution p a call to eng_sampler_sample would
 * draw from (same penalty, temperature, top-k, top-p).  Greedy: d is
 * accepted iff it is the argmax, and the argmax is returned either way.
 * Sampling: the draft is a point mass q = delta(d), so the standard
 * rejection rule of speculative sampling (accept with probability
 * min(1, p(d) / q(d)) = p(d); on rejection draw from max(p - q, 0)
 * renormalised, which is p with d removed) makes the returned token
 * distributed exactly as p, whatever d was.  It consumes one or two RNG
 * draws (eng_sampler_sample: one), so a sampled stream with drafting is a
 * different draw from the same distribution, not the same tokens.
 *
 * Determinism.  The RNG is xoshiro256** seeded through splitmix64 from the
 * seed: the same seed, logits and history give the same tokens on every
 * machine (ties in the sort are broken by token id).
 *
 * Threading / ownership.  A sampler is a small owned object with its own
 * RNG state and scratch; use one per sequence (not thread-safe).
 *
 * Failure behaviour.  eng_sampler_new validates the parameters and returns
 * ENG_SAMPLER_EINVAL with a message; eng_sampler_sample never fails for a
 * valid sampler and n_vocab logits (NaN logits are treated as -inf).
 */
#ifndef ENG_SAMPLER_H
#define ENG_SAMPLER_H

#include <stddef.h>
#include <stdint.h>

#define ENG_SAMPLER_EINVAL (-701)
#define ENG_SAMPLER_ENOMEM (-702)
#define ENG_SAMPLER_MAX_STOP 64

typedef struct eng_sampler_params {
    float temperature;        /* <= 0: greedy */
    int top_k;                /* 0: no limit */
    float top_p;              /* (0, 1]; >= 1: no limit */
    float repetition_penalty; /* 1: off; must be > 0 */
    int repeat_last_n; /* penalise tokens among the last N of the history; <= 0: whole history */
    uint64_t seed;     /* RNG seed */
    int n_stop;        /* stop tokens used (<= ENG_SAMPLER_MAX_STOP) */
    int32_t stop[ENG_SAMPLER_MAX_STOP]; /* token ids that end generation */
} eng_sampler_params;

typedef struct eng_sampler eng_sampler; /* opaque */

/* Defaults: greedy, no top-k/top-p limit, no penalty, seed 0, no stop tokens. */
void eng_sampler_params_default(eng_sampler_params *p);

int eng_sampler_new(const eng_sampler_params *p, int n_vocab, eng_sampler **out, char *err,
                    size_t errlen);
void eng_sampler_free(eng_sampler *s);

/* Restart the RNG from seed (same seed, same sequence of draws). */
void eng_sampler_reseed(eng_sampler *s, uint64_t seed);

/* Pick the next token from logits[n_vocab] (not modified) given the tokens
 * so far (history may be NULL when n_history is 0). Returns the token id. */
int32_t eng_sampler_sample(eng_sampler *s, const float *logits, const int32_t *history,
                           int n_history);

/* Judge drafted token `draft` at a position whose logits are logits (see
 * "Speculative verification" above; history as for eng_sampler_sample).
 * Returns the token to emit there and sets *accepted to 1 when it is the
 * draft (accepted), 0 when the draft was rejected and the returned token
 * is the model's own choice (greedy: the argmax; sampling: a draw from p
 * without the draft). */
int32_t eng_sampler_verify(eng_sampler *s, const float *logits, const int32_t *history,
                           int n_history, int32_t draft, int *accepted);

/* 1 when eng_sampler_sample is the argmax of the logits as given (greedy,
 * no repetition penalty): a caller may then compute only the argmax
 * (eng_forward's ENG_LOGITS_ARGMAX) and skip the logits row. */
int eng_sampler_greedy_only(const eng_sampler *s);

/* 1 if tok is one of the stop tokens. */
int eng_sampler_is_stop(const eng_sampler *s, int32_t tok);

/* n deterministic pseudo-random token ids in [0, n_vocab) (xorshift64 from
 * seed * 0x9E3779B97F4A7C15 + 1, each state mod n_vocab): the prompt of
 * `parley generate --random-prompt n --seed seed` and of the benchmarks,
 * so that other engines can be fed the same prompt (tests/bench/).
 * (random_prompt.c) */
void eng_random_prompt(int32_t *ids, int n, int n_vocab, uint64_t seed);

#endif
