/*
 * eng_constraint.h -- constrained decoding: JSON schema, JSON object,
 * regular-expression and Lark-grammar constraints on what a sequence may
 * generate, as token masks for the sampler.
 *
 * ** Purpose **
 * A client that asks for JSON must get JSON that parses and validates
 * every time, not "usually".  The only way to guarantee it is to forbid,
 * at every step, each token that cannot continue a valid output: the
 * sampler then draws only among the allowed tokens.  This module compiles
 * a request's constraint into a matcher (llguidance: the library
 * llama.cpp, vLLM and SGLang use; an Earley parser over a lexer of
 * derivative regular expressions, walking a trie of the vocabulary), keeps
 * it in step with the tokens the sequence generates, and produces the
 * mask of allowed tokens for the next position.
 *
 * ** Objects **
 *   eng_constraint_vocab  the model's vocabulary as llguidance sees it: the
 *       byte string of every token (SentencePiece "▁" as a space, byte
 *       tokens as their byte, byte-level BPE's alphabet decoded; control,
 *       unknown and unused tokens as 0xFF + their text, so generated text
 *       can never spell them, and cleared from every mask as well: a
 *       negated Lark lexeme let llguidance's mask allow <unk> where its
 *       validate refused it) and the end-of-generation ids (eng_tok_eog_ids:
 *       allowed exactly when the constraint is in an accepting state;
 *       parley clears them elsewhere, as the negated lexeme let the mask
 *       allow the end's marked bytes too).
 *       Built once per model (Gemma 3's 262,144 tokens: 1.4 s on the
 *       2-core test machine) and shared, read-only, by every constraint.
 *   eng_constraint  one sequence's matcher: compiled from an
 *       eng_constraint_spec, advanced by the tokens the sequence commits,
 *       asked for masks.  Cloned for the choices of an n > 1 request.
 *   eng_constraint_pool  worker threads that compute masks off the
 *       scheduler's critical path (see Threads).
 *
 * ** Masks **
 * A mask is ceil(n_vocab / 32) 32-bit words; token t is allowed iff bit
 * (t & 31) of word t >> 5 is set (llguidance's own layout, so masks are
 * copied, never converted).  n_vocab is the vocab's (the larger of the
 * model's output size and the tokenizer's; ids without text are never
 * allowed).  When the constraint is complete (eng_constraint_is_stopped)
 * the mask holds only end-of-generation tokens; the scheduler ends such a
 * sequence at once with finish reason stop, without generating the end
 * token.
 *
 * ** Kinds and how they compile **
 *   JSON_SCHEMA  a JSON schema (draft 2020-12 subset llguidance supports:
 *                types, properties / required / additionalProperties,
 *                items / prefixItems / minItems / maxItems, enum / const,
 *                anyOf / oneOf / allOf, $ref / $defs, string pattern /
 *                format / minLength / maxLength, numeric bounds).  Output is
 *                compact JSON with Python's separators (", " and ": ") and
 *                no other whitespace: a small model given free whitespace
 *                tends to emit newlines until max_tokens.  A schema whose
 *                top-level object carries its own "x-guidance" options
 *                (llguidance's) keeps them instead.
 *   JSON_OBJECT  any JSON object (OpenAI's json_object), same formatting;
 *                the text is ignored.
 *   REGEX        the whole output matches the regular expression (Rust
 *                regex syntax, anchored at both ends).
 *   LARK         a grammar in llguidance's Lark dialect (start rule
 *                `start`; %json { schema } embeds a JSON schema).
 * A spec's text is at most ENG_CONSTRAINT_MAX_BYTES bytes, valid UTF-8
 * without NUL bytes.  Compilation runs under llguidance's resource limits
 * (lexer fuel, grammar size ENG_CONSTRAINT_MAX_GRAMMAR symbols, lexer
 * states), so a hostile schema is refused in bounded time, never hangs;
 * and every mask computation runs under llguidance's per-step fuel.
 *
 * ** Threads **
 * A vocab is immutable after creation and thread-safe.  A constraint is
 * used by one thread at a time: eng_constraint_start hands it to a pool
 * thread, which computes the masks of its current state and, for a
 * speculative draft, of the states after each drafted token it allows
 * (consuming the draft, then rolling it back); eng_constraint_wait takes
 * it back.  Between
 * start and wait the owner must not call anything else on it (free may:
 * it cancels the job and waits for the thread).  The scheduler starts a
 * sequence's next mask right after committing its token, so the mask is
 * computed while the next forward step runs, and waits for it only when it
 * samples.
 *
 * ** Time budget **
 * A mask that takes more than budget_us of the pool thread's CPU time
 * (that thread's CPU clock, so a loaded machine does not trip it) is
 * abandoned: a waiter that sees the running computation pass the budget
 * cancels it (llguidance's cancellation handle), and a computation that
 * finished over budget counts as over too; eng_constraint_wait then
 * returns ENG_CONSTRAINT_EBUDGET and the constraint is dead (the
 * scheduler ends the request with finish reason error and that message).
 *
 * ** Ownership **
 * eng_constraint_new copies the spec's text.  Masks returned by
 * eng_constraint_wait / eng_constraint_mask belong to the constraint and
 * are valid until its next start, commit, clone or free.  A vocab must
 * outlive every constraint made from it; a pool every constraint started
 * on it.
 *
 * ** Failure behaviour **
 * Functions return 0 (or a count) or a negative ENG_CONSTRAINT_E* code
 * with a one-line message.  A spec that does not compile (syntax, a schema
 * feature llguidance rejects, an unsatisfiable schema, a limit) is
 * ENG_CONSTRAINT_ECOMPILE; over the byte limit ENG_CONSTRAINT_ETOOBIG.
 * Built without llguidance (deploy/setup.sh llguidance not run), every
 * constructor returns ENG_CONSTRAINT_EUNAVAIL saying so, and
 * eng_constraint_available() is 0: constrained requests are refused,
 * never served unconstrained.  Nothing prints, exits or aborts (llguidance
 * panics are caught at its C boundary and become errors).
 */
#ifndef ENG_CONSTRAINT_H
#define ENG_CONSTRAINT_H

#include <stddef.h>
#include <stdint.h>

#include "eng_tok.h"

#define ENG_CONSTRAINT_EINVAL (-1401)   /* bad argument or state */
#define ENG_CONSTRAINT_ENOMEM (-1402)   /* out of memory */
#define ENG_CONSTRAINT_ECOMPILE (-1410) /* the schema / grammar / regex was refused */
#define ENG_CONSTRAINT_ETOOBIG (-1411)  /* the spec is over ENG_CONSTRAINT_MAX_BYTES */
#define ENG_CONSTRAINT_EUNAVAIL (-1412) /* parley was built without llguidance */
#define ENG_CONSTRAINT_EMATCH (-1413)   /* matcher failure at run time (token refused, fuel) */
#define ENG_CONSTRAINT_EBUDGET (-1414)  /* a mask took longer than the time budget */

#define ENG_CONSTRAINT_MAX_BYTES (256 * 1024) /* longest spec text */
#define ENG_CONSTRAINT_MAX_GRAMMAR 200000     /* grammar symbols after compilation */
#define ENG_CONSTRAINT_MAX_AHEAD 64           /* draft tokens one job may look ahead */

typedef enum eng_constraint_kind {
    ENG_CONSTRAINT_NONE = 0,        /* unconstrained (no constraint object is made) */
    ENG_CONSTRAINT_JSON_OBJECT = 1, /* any JSON object; text ignored */
    ENG_CONSTRAINT_JSON_SCHEMA = 2, /* text: a JSON schema */
    ENG_CONSTRAINT_REGEX = 3,       /* text: a regular expression the whole output matches */
    ENG_CONSTRAINT_LARK = 4         /* text: a Lark grammar (llguidance dialect) */
} eng_constraint_kind;

/* What a request asks for (copied by eng_constraint_new). */
typedef struct eng_constraint_spec {
    eng_constraint_kind kind; /* NONE: no constraint */
    const char *text;         /* schema / regex / grammar (need not be NUL-terminated) */
    size_t len;               /* bytes of text */
} eng_constraint_spec;

/* "none", "json_object", "json_schema", "regex", "lark". */
const char *eng_constraint_kind_name(eng_constraint_kind k);

/* 1 when this build has llguidance, else 0. */
int eng_constraint_available(void);

/* llguidance's version string ("llguidance@1.9.1 ..."), or a sentence
 * saying it is absent. */
const char *eng_constraint_version(void);

/* ---- the vocabulary ---- */

typedef struct eng_constraint_vocab eng_constraint_vocab; /* opaque, immutable */

/* Build llguidance's tokenizer from tok for a model of n_vocab outputs.
 * Returns 0, ENG_CONSTRAINT_EINVAL, ENG_CONSTRAINT_ENOMEM or
 * ENG_CONSTRAINT_EUNAVAIL, with a message. */
int eng_constraint_vocab_new(const eng_tok *tok, int n_vocab, eng_constraint_vocab **out, char *err,
                             size_t errlen);
void eng_constraint_vocab_free(eng_constraint_vocab *v);

/* Tokens a mask covers (>= the model's n_vocab) and its 32-bit words. */
int eng_constraint_vocab_size(const eng_constraint_vocab *v);
size_t eng_constraint_mask_words(const eng_constraint_vocab *v);

/* ---- one sequence's constraint ---- */

typedef struct eng_constraint eng_constraint; /* opaque */

/* Compile spec (kind != NONE) into a fresh matcher at the start of the
 * output.  Returns 0, ENG_CONSTRAINT_EINVAL (kind, NUL or bad UTF-8 in
 * text), ENG_CONSTRAINT_ETOOBIG, ENG_CONSTRAINT_ECOMPILE (with
 * llguidance's reason), ENG_CONSTRAINT_ENOMEM or ENG_CONSTRAINT_EUNAVAIL. */
int eng_constraint_new(const eng_constraint_vocab *v, const eng_constraint_spec *spec,
                       eng_constraint **out, char *err, size_t errlen);

/* A copy of c in its current state (c idle), with its own masks.  Returns
 * 0, ENG_CONSTRAINT_ENOMEM or ENG_CONSTRAINT_EINVAL (c is dead). */
int eng_constraint_clone(const eng_constraint *c, eng_constraint **out, char *err, size_t errlen);

/* Free (NULL is fine).  A job in flight is cancelled and waited for. */
void eng_constraint_free(eng_constraint *c);

/* The kind it was compiled from. */
eng_constraint_kind eng_constraint_kind_of(const eng_constraint *c);

/* Compute the mask of the current state now, on the calling thread (c
 * idle).  *mask points at the constraint's buffer.  Returns 0,
 * ENG_CONSTRAINT_EMATCH or ENG_CONSTRAINT_EINVAL (dead). */
int eng_constraint_mask(eng_constraint *c, const uint32_t **mask, char *err, size_t errlen);

/* How many of toks[0..n) the constraint accepts in order from its current
 * state (c idle; nothing is consumed).  Returns 0..n, or < 0 on error. */
int eng_constraint_validate(eng_constraint *c, const int32_t *toks, int n);

/* Advance by toks[0..n) (c idle).  A token the constraint forbids is
 * ENG_CONSTRAINT_EMATCH (the constraint is then dead).  Returns 0 or < 0. */
int eng_constraint_commit(eng_constraint *c, const int32_t *toks, int n, char *err, size_t errlen);

/* 1 when the output so far is complete and nothing but an end token can
 * follow (finish: stop).  c idle. */
int eng_constraint_is_stopped(const eng_constraint *c);

/* 1 when the output so far is a complete match (more may still follow). */
int eng_constraint_is_accepting(eng_constraint *c);

/* ---- masks off the critical path ---- */

typedef struct eng_constraint_pool eng_constraint_pool; /* opaque */

/* n_threads (1..64) mask threads.  Returns 0, ENG_CONSTRAINT_EINVAL,
 * ENG_CONSTRAINT_ENOMEM, ENG_CONSTRAINT_EUNAVAIL (no llguidance), or
 * ENG_CONSTRAINT_EINVAL when a thread cannot start. */
int eng_constraint_pool_new(int n_threads, eng_constraint_pool **out, char *err, size_t errlen);
/* Stop the threads (every constraint started on it must be waited for or
 * freed first) and free. */
void eng_constraint_pool_free(eng_constraint_pool *p);

/* Queue the computation of masks for the current state and, with
 * n_ahead > 0, for the states after ahead[0], ahead[0..1], ... (a
 * speculative draft, at most ENG_CONSTRAINT_MAX_AHEAD): the look-ahead
 * stops at the first token the previous state's mask refuses, so it yields
 * masks for the states after the longest allowed prefix of the draft and
 * the state after it -- the draft is cut there.  Each mask under budget_us
 * of CPU time (<= 0: no budget).  A mask of the current state already
 * known (no commit since) is reused.  c must be idle; it is busy until
 * eng_constraint_wait.  Returns 0 or ENG_CONSTRAINT_EINVAL. */
int eng_constraint_start(eng_constraint *c, eng_constraint_pool *p, const int32_t *ahead,
                         int n_ahead, int64_t budget_us);

/* Give the job in flight a look-ahead (as eng_constraint_start's), without
 * waiting for it: a queued job takes it, a running one continues with it
 * after its current mask, a finished one runs again from its mask; an idle
 * constraint starts a job.  One look-ahead per job.  Returns 0 or
 * ENG_CONSTRAINT_EINVAL (the job has a look-ahead already). */
int eng_constraint_ahead(eng_constraint *c, eng_constraint_pool *p, const int32_t *ahead,
                         int n_ahead, int64_t budget_us);

/* Wait for the job eng_constraint_start queued (none started: compute the
 * current state's mask here, under the same budget as the last start).
 * On success *masks points at *n_masks masks: the current state's and one
 * per look-ahead token of the allowed prefix (so *n_masks - 1 draft
 * tokens are allowed); the matcher is back at the current state.
 * *waited_us (may be NULL) gets the time this call blocked.  Returns 0,
 * ENG_CONSTRAINT_EBUDGET (over the budget; the constraint is dead),
 * ENG_CONSTRAINT_EMATCH (llguidance's message) or ENG_CONSTRAINT_EINVAL. */
int eng_constraint_wait(eng_constraint *c, const uint32_t *const **masks, int *n_masks,
                        int64_t *waited_us, char *err, size_t errlen);

/* 1 while a started job has not been waited for. */
int eng_constraint_busy(const eng_constraint *c);

/* Counters of a pool since creation (mask computations and their CPU
 * time; budget overruns). */
typedef struct eng_constraint_pool_stats {
    uint64_t masks;         /* masks computed */
    double mask_cpu_ms;     /* CPU time spent computing them */
    double mask_cpu_max_ms; /* slowest one */
    uint64_t over_budget;   /* computations abandoned for the time budget */
} eng_constraint_pool_stats;
void eng_constraint_pool_stats_get(eng_constraint_pool *p, eng_constraint_pool_stats *out);

/* ---- helpers ---- */

/* 1 when mask allows token t. */
static inline int eng_constraint_allows(const uint32_t *mask, int32_t t) {
    return (int)((mask[(uint32_t)t >> 5] >> ((uint32_t)t & 31)) & 1u);
}

#endif
