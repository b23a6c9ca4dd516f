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
 * Token masks (constrained decoding, eng_constraint.h).  The _masked
 * calls take a mask of ceil(n_vocab / 32) words (token t allowed iff bit
 * t & 31 of word t >> 5 is set; NULL = every token): every disallowed
 * token's logit counts as -inf before anything else happens, so greedy
 * takes the best allowed token (ties: lowest id) and sampling draws from
 * the distribution above renormalised over the allowed tokens.  A mask
 * allowing no token makes them return -1.  eng_sampler_mask_apply is the
 * same operation on a caller's array (tests compare it bit for bit with
 * llguidance's mask).
 *
 * Log-probabilities (eng_sampler_logprobs).  When asked, a call also
 * reports the chosen token's log-probability and the top_logprobs
 * (0..ENG_SAMPLER_TOP_MAX) most likely tokens with theirs, best first
 * (ties: lowest id).  They are the log-softmax of the logits the sampler
 * decided on -- after the repetition penalty and the mask (a forbidden
 * token has -inf and is never listed), at temperature 1 and before top-k
 * / top-p: the model's distribution over what this request could actually
 * produce, the same whatever the temperature (OpenAI reports logprobs that
 * do not change with temperature; a greedy request would otherwise get
 * 0 and -inf).  So exp of the listed values sums to <= 1, and the chosen
 * token's value may be below the listed ones (sampling).
 *
 * Full logits.  eng_sampler_needs_logits says whether a sampler can pick
 * from the argmax alone (greedy without a penalty): a forward pass may then
 * skip writing the row (a fused argmax); masks and logprobs need the row
 * too, which the caller knows (eng_sched.h).
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
#define ENG_SAMPLER_TOP_MAX 20 /* most alternatives eng_sampler_logprobs reports */

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

/* One token and its log-probability. */
typedef struct eng_sampler_lp {
    int32_t token; /* token id */
    float logprob; /* natural log of its probability (<= 0) */
} eng_sampler_lp;

/* Log-probabilities of one sampled position (see "Log-probabilities"). */
typedef struct eng_sampler_logprobs {
    int top_logprobs;                        /* in: alternatives wanted, 0..ENG_SAMPLER_TOP_MAX */
    float logprob;                           /* out: the chosen token's */
    int n_top;                               /* out: alternatives written (<= top_logprobs) */
    eng_sampler_lp top[ENG_SAMPLER_TOP_MAX]; /* out: best first */
} eng_sampler_logprobs;

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

/* eng_sampler_sample under a token mask (NULL: none), filling *lp (NULL:
 * not wanted).  Returns the token, or -1 when the mask allows none. */
int32_t eng_sampler_sample_masked(eng_sampler *s, const float *logits, const int32_t *history,
                                  int n_history, const uint32_t *mask, eng_sampler_logprobs *lp);

/* eng_sampler_verify under a token mask (the draft must be allowed by it,
 * else it is rejected), filling *lp for the returned token.  Returns the
 * token, or -1 when the mask allows none. */
int32_t eng_sampler_verify_masked(eng_sampler *s, const float *logits, const int32_t *history,
                                  int n_history, const uint32_t *mask, int32_t draft, int *accepted,
                                  eng_sampler_logprobs *lp);

/* Set logits[t] = -inf for every t < n the mask forbids. */
void eng_sampler_mask_apply(float *logits, int n, const uint32_t *mask);

/* 1 when the sampler needs the full logits row (temperature > 0 or a
 * repetition penalty), 0 when the argmax alone decides (see "Full
 * logits"). */
int eng_sampler_needs_logits(const eng_sampler *s);

/* 1 if tok is one of the stop tokens. */
int eng_sampler_is_stop(const eng_sampler *s, int32_t tok);

/* n deterministic pseudo-random token ids in [0, n_vocab) (xorshift64 from
 * seed * 0x9E3779B97F4A7C15 + 1, each state mod n_vocab): the prompt of
 * `parley generate --random-prompt n --seed seed` and of the benchmarks,
 * so that other engines can be fed the same prompt (tests/bench/).
 * (random_prompt.c) */
void eng_random_prompt(int32_t *ids, int n, int n_vocab, uint64_t seed);

#endif
