/*
 * eng_spec.h -- lossless speculative decoding by prompt lookup: the n-gram
 * drafter and the verification step shared by the scheduler (eng_sched.h)
 * and `parley generate --speculative ngram`.
 *
 * ** Why **
 * A decode step of one sequence streams every weight once to produce one
 * token: it is bound by memory bandwidth, and the arithmetic units idle.
 * Feeding k guessed tokens after the last one in the same step costs about
 * one weight pass too (eng_forward is batch-first; a chunk's rows share the
 * weight reads), and with ENG_LOGITS_ALL it returns the logits of every
 * position: if the guesses are what the model would have produced, one step
 * yields up to k + 1 tokens.  Chat replies often quote their context
 * (summaries, edits, code, names), so the guesses come from the
 * conversation itself -- no second model.
 *
 * ** Drafting (eng_ngram) **
 * Prompt lookup: for n from n_max down to n_min, take the last n tokens of
 * the sequence (prompt + generated); if they occurred earlier, draft the up
 * to k tokens that followed their most recent earlier occurrence.  The
 * continuation may run into the suffix itself (a repeating pattern): the
 * draft then continues the pattern with its own earlier tokens.  An index
 * maps every n-gram (n in [n_min, n_max]) to the position after its latest
 * occurrence: an open-addressing table of (32-bit hash, position) slots,
 * the tokens themselves compared on a hit, filled incrementally as the
 * sequence grows (each position once: O(n_max^2) per token, O(n_max) per
 * probe), never an O(n^2) scan.  Memory: 8 bytes a slot, at most
 * 2 * (n_max - n_min + 1) * 2 slots per token.
 *
 * ** Verification (eng_spec_verify) **
 * The chunk [t, d1..dk] (t = last token, whose KV is not stored yet) is
 * run with ENG_LOGITS_ALL: row i holds the logits after d_i (row 0 after
 * t).  For i = 1..k the sampler judges d_i against row i-1
 * (eng_sampler_verify, the history including the tokens accepted so far):
 * accepted drafts are emitted; at the first rejection the sampler's own
 * token is emitted and the rest is dropped; when all k are accepted a
 * k+1-th token is sampled from row k.  Every verify step therefore emits at
 * least one token.  Greedy: the emitted tokens are those plain decoding
 * gives, token for token (eng_forward's result for a token does not depend
 * on batching or chunking, bit for bit).  Sampling: the rejection rule of
 * eng_sampler_verify keeps each position's distribution exactly the
 * sampler's.  Emission stops after a stop token or max_emit tokens.
 *
 * ** Constraints **
 * A constrained sequence (eng_constraint.h) has its draft cut at the first
 * token its constraint refuses: the constraint's mask job looks ahead over
 * the draft while the verify chunk runs (so drafting does not wait for the
 * matcher), computing the mask of each position up to that token, and
 * only the allowed prefix is verified (a refused token can never be
 * accepted anyway: its masked probability is 0).  Position i is judged
 * under the mask of the constraint's state after the drafts before it
 * (masks[i]), exactly the mask plain decoding would use there: greedy
 * output is token for token that of constrained decoding without drafts.
 * The caller commits the emitted tokens to the matcher in order
 * afterwards.
 *
 * ** Draft length **
 * A verify chunk of 1 + k tokens is not free where the forward pass is not
 * purely bandwidth-bound (a small model on few cores: on the 2-core test
 * machine each drafted token of Gemma 3 270M adds roughly a tenth of a
 * decode step, `parley bench --workload spec --cost`), and a rejected
 * draft buys nothing.  So each sequence keeps its own limit, adapted like
 * transformers' heuristic schedule (eng_spec_next_k): start at the
 * configured k_max, +2 after a fully accepted draft, -1 after a rejection,
 * within 1..k_max.  A quoted passage keeps drafts long; a stretch of
 * misses shrinks them to one token, which costs little and still pays off
 * whenever about one in ten is accepted.  On the report's prompts (Gemma
 * 3 270M, greedy, 128 tokens) this estimated the same speed-up as a fixed
 * k on quoting prompts (within 2%) and on open-ended ones, and bounds the
 * loss where drafts keep failing.
 *
 * ** KV after verification **
 * The chunk wrote KV for all k+1 positions; the caller keeps the first
 * e of them (t and the accepted drafts before the last emitted token) with
 * eng_kvseq_truncate.  A sliding-window layout complicates that: the
 * forward pass releases local blocks that fall out of the window of the
 * chunk's LAST position, and truncation refuses to go back to a position
 * whose window needs a released block.  eng_spec_max_draft returns the
 * longest draft whose chunk can always be truncated back to t's position
 * (it is shorter only when the chunk would carry the window's tail across
 * a block boundary: on average about k (k + 1) / (2B) fewer drafted tokens
 * per step once a sequence is longer than the window, none before).
 *
 * Threading / ownership: an eng_ngram belongs to one sequence; functions
 * are not thread-safe on the same object.  Failures return
 * ENG_SCHED_EINVAL / ENG_SCHED_ENOMEM (eng_sched.h) with a message; nothing
 * prints or exits.
 */
#ifndef ENG_SPEC_H
#define ENG_SPEC_H

#include <stddef.h>
#include <stdint.h>

#include "eng_kv.h"
#include "eng_sampler.h"

#define ENG_SPEC_NGRAM_MAX 8 /* longest n-gram the index accepts */

typedef struct eng_ngram eng_ngram; /* opaque prompt-lookup index */

/* New empty index over n-grams of n_min..n_max tokens (1 <= n_min <= n_max
 * <= ENG_SPEC_NGRAM_MAX).  Returns 0, ENG_SCHED_EINVAL or ENG_SCHED_ENOMEM. */
int eng_ngram_new(int n_min, int n_max, eng_ngram **out, char *err, size_t errlen);
void eng_ngram_free(eng_ngram *g);

/* Draft up to k tokens continuing toks[0..n) into out[0..k); returns how
 * many (0: no n-gram of the suffix occurred before, or k <= 0, or no
 * memory to index).  Successive calls must pass the same sequence grown
 * by appending (the index covers the first positions seen); a shorter n
 * re-indexes from scratch. */
int eng_ngram_draft(eng_ngram *g, const int32_t *toks, int n, int k, int32_t *out);

/* Positions indexed so far and slots in use (tests, memory figures). */
int eng_ngram_indexed(const eng_ngram *g);
size_t eng_ngram_bytes(const eng_ngram *g);

/* Longest draft (<= k) whose verify chunk of 1 + draft tokens, fed to a
 * sequence holding n_kv tokens of layout l, can be truncated back to
 * n_kv + 1 tokens after the forward pass (see "KV after verification"). */
int eng_spec_max_draft(const eng_kv_layout *l, int n_kv, int k);

/* Judge draft[0..k) from the verify chunk's logits (k + 1 rows of n_vocab
 * floats: row i after the chunk's i-th token).  toks[0..n_toks) is the
 * sequence up to and including the chunk's first token; the emitted tokens
 * are written to toks[n_toks..] (room for k + 1 more; draft may point at
 * toks + n_toks).  Returns the number emitted, 1..min(k + 1, max_emit);
 * *n_accepted gets how many of them are accepted drafts.  Stops after a
 * stop token of the sampler.  k = 0 is a plain eng_sampler_sample of row
 * 0. */
int eng_spec_verify(eng_sampler *s, const float *logits, int n_vocab, int32_t *toks, int n_toks,
                    const int32_t *draft, int k, int max_emit, int *n_accepted);

/* eng_spec_verify with, per chunk position i (0..k), the token mask to
 * sample under (masks NULL, or masks[i] NULL: unconstrained) and the
 * log-probabilities of the token emitted there (lp NULL: not wanted; else
 * k + 1 entries, their top_logprobs set by the caller).  A position whose
 * mask allows no token ends emission before it, so the count returned may
 * then be 0 (the caller treats that as a constraint failure). */
int eng_spec_verify_ex(eng_sampler *s, const float *logits, int n_vocab, int32_t *toks, int n_toks,
                       const int32_t *draft, int k, int max_emit, const uint32_t *const *masks,
                       eng_sampler_logprobs *lp, int *n_accepted);

/* A sequence's next draft-length limit after a verify step that drafted
 * `drafted` tokens and accepted `accepted` of them, from its limit k (see
 * "Draft length"): k + 2 when every draft was accepted, k - 1 otherwise,
 * within 1..k_max; unchanged when nothing was drafted. */
int eng_spec_next_k(int k, int drafted, int accepted, int k_max);

#endif
