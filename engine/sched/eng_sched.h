/*
 * eng_sched.h -- the continuous-batching scheduler: many requests, one
 * forward pass per step.
 *
 * ** Purpose **
 * A worker holds hundreds of conversations at once.  The scheduler takes
 * requests (a prompt as token ids, sampling parameters, a namespace, a
 * deadline, a token limit, callbacks), runs them together and reports each
 * token and each completion.  Every step it builds one batch for
 * eng_forward from (a) one decode token per running sequence and (b)
 * prefill chunks of admitted sequences, under a per-step token budget, so a
 * long prompt is split into chunks and never stalls decoding (chunked
 * prefill).  When the scheduler is idle, a new request waits at most the
 * batching window (default 10 ms, 0 = none) so that requests arriving
 * together start together.
 *
 * ** Prefix cache (optional) **
 * The engine does not depend on the cache module, so the scheduler talks to
 * a prefix cache through eng_sched_cache_ops, a small table of functions
 * (cache/kv_sched_ops.h implements it over kv_cache).  With a cache:
 *   - at submit the scheduler starts a prefetch (Redis -> host RAM) so the
 *     fetch overlaps queueing; a request becomes admissible when its
 *     prefetch finished or prefetch_wait_ms passed;
 *   - on admission it looks up the longest cached prefix, adopts its blocks
 *     (eng_kvseq_adopt_prefix) and prefills only the rest;
 *   - on completion (and on cancel / expiry / preemption) it inserts the
 *     sequence's KV -- prompt AND generated tokens -- with turn_boundary
 *     set, so turn N+1 of a conversation resumes from turn N's KV including
 *     the reply (the last sampled token is never fed back, so at most one
 *     block less than prompt + reply is reused).
 * Without a cache (ops == NULL) sequences draw blocks from a plain
 * allocator limited to kv_budget_bytes and nothing is reused.
 *
 * ** Memory-aware admission and preemption **
 * The scheduler counts the blocks its running sequences hold, per block
 * kind, against the total the allocator offers (cache: the pool, whose
 * unpinned blocks are evictable; plain: the budget).  Policy:
 *   - submit refuses (ENG_SCHED_EINVAL, no callback) a request that could
 *     not run even alone: more than the total of global blocks for
 *     prompt + max_tokens, or of local blocks for its live window.  Every
 *     admitted request can therefore finish once it is the oldest running.
 *   - admission: a waiting request is admitted only if the blocks of its
 *     whole prompt (cached blocks included: adopting pins them; local
 *     blocks capped at the live window plus one chunk), plus one growth
 *     block per running sequence, fit next to what running sequences hold.
 *     With nothing running the best candidate is always admitted.
 *   - before every step the blocks the step will allocate are counted; if
 *     they do not fit (decode growth), the most recently admitted running
 *     sequence is preempted, again until they fit.  Preemption with a cache
 *     inserts the victim's KV into the cache (its blocks become unpinned,
 *     evictable LRU, and go to Redis if evicted: "park down a tier") and
 *     re-queues it; its resume looks the KV up again and recomputes only
 *     what was evicted.  Without a cache the KV is dropped and recomputed.
 *     The victim is the youngest because the oldest running sequence then
 *     always progresses: no deadlock, no livelock.  An allocation failure
 *     inside eng_forward (pool pinned by someone else) is handled the same
 *     way (preempt youngest, retry); only a lone sequence that cannot get a
 *     block fails, with finish reason error.
 *   The allocator itself enforces the budget, so it is never exceeded.
 *
 * ** Cache-aware ordering with a fairness bound **
 * Waiting requests are ordered by the cached prefix a host-RAM probe found
 * when they became admissible (longest first: their blocks are hot, they
 * cost the least prefill), ties by submit order.  A request that has
 * waited fairness_ms (default 200 ms) or longer is "overdue": overdue
 * requests go first, in submit order, and while an overdue request does
 * not fit in memory nothing else is admitted.  Bound: once a request has
 * waited fairness_ms, no request submitted after it is admitted before it;
 * the extra wait reordering can cost a request is at most fairness_ms plus
 * one step.
 *
 * ** Service classes (docs/service-classes.md) **
 * A request is ENG_SCHED_INTERACTIVE (the default: a person waits for the
 * first token) or ENG_SCHED_BULK (throughput only).  Admission takes every
 * ready interactive request before any bulk one (the cache-aware order and
 * the fairness bound apply within a class), so bulk sequences fill the
 * capacity interactive ones leave.  When a ready interactive request waits
 * for a running slot (max_running reached) and class_preempt is on, the
 * youngest running bulk sequences are parked before the next step -- one
 * per slot needed: a parked sequence leaves the batch but keeps its KV
 * blocks, its logits row, its sampler and constraint state, so when slots
 * free up (parked interactive first, then parked bulk, before any new bulk
 * request) it continues exactly where it stopped: the same tokens as if it
 * had never paused, greedy or seeded (its KV is not recomputed).  Parked
 * blocks count as held; under memory pressure (a step or an interactive
 * admission that does not fit) the youngest parked sequence is preempted
 * the ordinary way (KV to the cache or dropped, recomputed on resume).
 * Bulk is never starved: while bulk work is pending and fewer than
 * bulk_min_share of recent steps (an exponential average, weight 1/16)
 * carried a bulk sequence, nothing bulk is parked, and when the batch is
 * full of interactive sequences the youngest is parked (KV kept) to give a
 * bulk one a slot.  Within a step, interactive sequences' prefill chunks
 * take the step's token budget first, and bulk prefill chunks take at most
 * bulk_step_tokens of it: an interactive turn that arrives waits at most
 * for the step in progress, so bulk keeps every step short (its decode
 * tokens are not capped; a bulk backlog of short prompts needs little
 * prefill per step, a long bulk prompt takes more steps).  With
 * bulk_decode_seqs set, a step decodes at most that many bulk sequences
 * while an interactive one runs or waits (the bulk ones take turns, their
 * KV kept), so the interactive turn's tokens come at the pace of a smaller
 * batch, at the cost of bulk throughput meanwhile.  eng_sched_stats
 * counts parkings (class_preemptions), steps with bulk (bulk_steps) and
 * per-class gauges.
 *
 * ** Tenants **
 * Within a class, namespaces (tenants) share admissions by weighted
 * round-robin (tenant_weights, default 1 each): every namespace with work
 * in the scheduler has a virtual time that grows by 1 / weight per
 * sequence admitted, and a candidate of the namespace with the lowest
 * virtual time goes first; a namespace that comes back after having no
 * work starts at the lowest virtual time of the others (no saved credit).
 * Overdue requests (fairness_ms) still go first, in submit order; among
 * one namespace's requests the cache-aware order applies as before.  So
 * one tenant's backlog delays another tenant's request by about one
 * admission per other active tenant (weighted), not by the backlog.
 *
 * ** Speculative decoding (scheduler.speculative = ngram) **
 * A decoding sequence may feed, after its last token, up to spec_tokens
 * tokens drafted by prompt lookup (eng_spec.h: the longest suffix n-gram
 * of prompt + generated tokens that occurred before, continued), as one
 * verify chunk through the chunked-prefill path with ENG_LOGITS_ALL.  The
 * sampler accepts the drafts that agree with the model (greedy: the
 * argmax; sampling: the rejection rule of eng_sampler_verify, which keeps
 * the output distribution) and adds the model's own next token, so a step
 * yields 1..spec_tokens + 1 tokens of the same text drafting off would
 * give (greedy: token for token).  Then the KV is cut back to the kept
 * tokens (eng_kvseq_truncate), so the cache, preemption and every later
 * step see exactly the sequence of a run without drafts.
 * When: only while the step is memory-bound.  A step's decode rows (each
 * decoding sequence's last token plus its draft) share
 * spec_max_batch_tokens: with n decoding sequences each drafts at most
 * min(spec_tokens, spec_max_batch_tokens / n - 1) tokens, so one sequence
 * gets full drafts, a few get shorter ones, and once n exceeds
 * spec_max_batch_tokens / 2 nobody drafts: the step is then
 * compute-bound, where every drafted token costs its full compute --
 * rejected ones too -- while a batch of real sequences already fills the
 * arithmetic units.  Within that, a sequence drafts only when prompt lookup
 * finds a match, no longer than its own limit (eng_spec_next_k), never
 * past max_tokens, and never so far that a sliding window could not be cut
 * back (eng_spec_max_draft).  Drafted tokens count against step_tokens;
 * under memory pressure a step first drops its drafts, then preempts.
 * Stop tokens among accepted drafts end the request there; every emitted
 * token gets its on_token (with the logits of its own position).
 * Basis: `parley bench --workload spec --cost` (Gemma 3 270M Q4_K_M, 2
 * threads, the project's 2-core test machine, 2026-12-05, load average
 * about 2 from other work; medians of 15, each against a decode step
 * timed beside it): a chunk of n tokens costs 1.19 / 1.41 / 1.73 / 1.85 /
 * 2.28 / 2.26 decode steps at n = 2 / 4 / 6 / 8 / 10 / 16, a batch of n
 * sequences 1.23 / 1.45 / 1.77 / 2.01 / 2.30 / 2.63.  Each extra row costs
 * about 0.12 of a decode step, so up to about 8 rows the weight pass the
 * step pays anyway is still half or more of its time; beyond that the
 * step is mostly arithmetic.  Hence spec_max_batch_tokens = 8 and
 * spec_tokens = 6 (one sequence: a 7-token chunk at 1.86x, which pays off
 * from about one accepted token per step).  A machine with more arithmetic
 * per byte of bandwidth stays memory-bound to more rows: measure and raise
 * it.  Drafting is on by default: it changes no greedy token and no
 * sampling distribution, and single-stream decode on that machine went
 * from 71.9 to 172.0 tok/s on prompts that quote their context (79%
 * of drafts accepted) and from 76.6 to 115.1 tok/s on open-ended ones
 * (tests/bench/bench_spec.py; the small model repeats itself).
 *
 * ** Constrained decoding (eng_constraint.h) **
 * A request may carry a constraint (JSON schema, JSON object, regex, Lark
 * grammar).  submit compiles it against the vocabulary given in the
 * configuration (constraint_vocab), unless the caller compiled it already
 * (eng_sched_request.compiled: the worker compiles each turn's once, at
 * admission, to refuse a bad one with its record); a spec that does not compile, that
 * llguidance rejects or that is over a size limit is refused there with
 * ENG_SCHED_ECONSTRAINT and llguidance's reason -- no callback, nothing
 * queued -- and a constraint asked of a scheduler without a vocabulary (or
 * a build without llguidance) with ENG_SCHED_ENOTSUP: never generated
 * unconstrained.  The sampler draws each token under the mask of the
 * sequence's constraint state.  Masks come from a pool of mask threads
 * (mask_threads): the loop starts a sequence's next mask as soon as it has
 * committed the token (and a new request's first mask when it takes it
 * from the inbox), so the mask is computed while the next forward step
 * runs, and waits for it only when it samples that sequence; the time the
 * loop spends blocked there is eng_sched_stats.mask_wait_ms (the
 * constraint's cost on the critical path), the pool's own CPU time
 * mask_cpu_ms.  A mask that needs more than mask_budget_us of CPU time is
 * cancelled and the request ends with finish reason error and a message
 * saying so.  When the constraint is complete (only an end token could
 * follow) the request ends with finish reason stop at once, without an
 * end token; max_tokens still ends it with length (the output is then
 * incomplete).  With speculative decoding a constrained sequence's draft
 * goes to its mask job, which computes the masks of the draft positions
 * while the verify chunk runs and cuts the draft at the first token the
 * constraint refuses; the emitted tokens are committed in order (eng_spec.h
 * "Constraints"): greedy output is token for token that of constrained
 * decoding without drafts.
 * The prefix cache is unaffected: a constraint changes sampling only,
 * never the KV.
 *
 * ** Log-probabilities **
 * With logprobs set, every token event carries the chosen token's
 * log-probability and the top_logprobs (0..20) best alternatives with
 * theirs, computed from the logits the sampler used: after the repetition
 * penalty and the constraint mask, at temperature 1, before top-k / top-p
 * (eng_sampler.h "Log-probabilities": the distribution over what the
 * request could actually produce; a forbidden token is never listed).
 *
 * ** Several choices (n > 1) **
 * A request with n = 2..16 choices is prefilled once; when its prompt's
 * last logits arrive, the sequence is forked into n (eng_kvseq_fork: full
 * KV blocks shared by reference, the partial last block copied; the
 * constraint cloned) and each choice samples its first token from those
 * same logits with its own sampler, seeded eng_sched_choice_seed(seed, i)
 * (choice 0 keeps the request's seed, so it is the n = 1 run).  From then
 * on the choices are separate sequences in the batch: each ends on its own
 * (stop, length, error), may be preempted and resumed on its own
 * (a resumed choice recomputes its KV like any sequence), and reports its
 * tokens with its choice index.  on_done is called once, after the last
 * choice ended, with every choice's result; cancel, deadlines and
 * eng_sched_stop apply to all choices, eng_sched_stop_choice to one.
 * Admission reserves n running slots (n <= max_running); submit counts n
 * against max_queue and checks that one choice fits the KV budget alone
 * (prompt plus max_tokens, as for n = 1: the choices need not all fit at
 * once -- under memory pressure the youngest are preempted, and a fork
 * that finds no block for its copy waits and recomputes the prompt).  eng_sched_stats.forks counts forked choices and
 * fork_tokens the prompt tokens they received without computing them:
 * prefill_tokens grows by the prompt once per request.

 * ** Completion estimate (eng_sched_next_finish_us) **
 * A caller that batches work around completions (the worker commits the
 * replies of finished turns in one Kafka transaction) asks when the next
 * request is expected to finish.  The estimate of a request is its steps
 * left -- the prefill chunks of step_tokens still to feed, then one step
 * per token up to max_tokens -- times the recent step duration (an
 * exponential average, weight 1/4, of the time inside eng_forward plus
 * sampling), plus the batching window for a request that waits while
 * nothing runs.  It is an upper bound on the tokens, not on the time: a
 * stop token or a stop string ends a request earlier, drafted tokens
 * make it faster, and a prefill chunk costs more than a decode step.  The
 * loop publishes the earliest estimate of the requests in flight after
 * every step and before every idle wait; submit lowers it for a new
 * request.  A completion already queued for delivery whose on_done has not
 * returned counts as due now.  The query also gives the step duration:
 * requests end only at the end of a step, so while steps are long every
 * request ending in the step under way is "soon" for a caller batching
 * around completions.
 *
 * ** Data layout **
 * A request owns one token array (prompt, then generated tokens), an
 * eng_kvseq while running (n_tokens = tokens whose KV is stored; the rest
 * of the array is fed next: a prefill chunk, or the one decode token), a
 * logits row of n_vocab floats while running, and its sampler (whose RNG
 * state survives preemption, so a resumed request continues its stream);
 * a constrained one its constraint (whose matcher state survives
 * preemption too: it follows the generated tokens, not the KV).  The
 * choices of an n > 1 request are sequences of their own that share an
 * id and a group recording how each ended.
 * Deadlines are checked every iteration: a request whose deadline passes
 * while queued or running ends as expired with the tokens it has.
 *
 * ** Threads **
 * eng_sched_create starts two threads -- and, with a constraint
 * vocabulary, mask_threads mask threads (eng_constraint_pool) -- the loop
 * (admission, batching, eng_forward, sampling; the model's worker pool
 * runs underneath it) and a delivery thread that calls the callbacks
 * from a queue, in order per request (every token callback of a request
 * before its completion callback).  Callbacks therefore never block the
 * loop, but they are run one at a time: keep them short.  Callbacks may
 * call eng_sched_submit, eng_sched_cancel, eng_sched_stop and
 * eng_sched_stop_choice but must not call eng_sched_close or
 * eng_sched_free.  submit / cancel / stop / stats may be called from any
 * thread.
 *
 * ** Ownership **
 * submit copies the prompt, the namespace and the parameters.  Buffers
 * passed to callbacks (the token's logits, the result's token array and
 * error text) are owned by the scheduler and valid during the callback only.
 * The model, the cache behind the ops and `user` pointers belong to the
 * caller and must outlive the scheduler.
 *
 * ** Failure behaviour **
 * Functions return 0 or a negative ENG_SCHED_E* code and write a message to
 * (err, errlen) where they take one.  Failures inside the loop never stop
 * it: they end the affected requests with finish reason error and a
 * message.  Nothing here prints or exits.
 */
#ifndef ENG_SCHED_H
#define ENG_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "eng_constraint.h"
#include "eng_kv.h"
#include "eng_model.h"
#include "eng_sampler.h"
#include "eng_spec.h"

#define ENG_SCHED_EINVAL (-801)  /* bad argument */
#define ENG_SCHED_ENOMEM (-802)  /* host memory */
#define ENG_SCHED_ECLOSED (-807) /* the scheduler is closing or closed */
#define ENG_SCHED_ENOENT (-805)  /* no such request (already finished) */
#define ENG_SCHED_ETHREAD (-810) /* a thread could not be started */
/* the request's constraint does not compile, is over a limit or was
 * refused by llguidance (message says why) */
#define ENG_SCHED_ECONSTRAINT (-811)
/* the request asks for a constraint this scheduler cannot apply (no
 * constraint_vocab configured, or a build without llguidance) */
#define ENG_SCHED_ENOTSUP (-812)

#define ENG_SCHED_N_MAX 16                    /* most choices of one request */
#define ENG_SCHED_TOP_MAX ENG_SAMPLER_TOP_MAX /* most logprob alternatives per token */

#define ENG_SCHED_NS_MAX 64 /* longest namespace in bytes */

/* Why a request ended. */
typedef enum eng_sched_finish {
    /* a stop token was generated (it is included in the tokens), the
     * constraint completed, or eng_sched_stop */
    ENG_SCHED_STOP = 0,
    ENG_SCHED_LENGTH = 1,    /* max_tokens generated */
    ENG_SCHED_EXPIRED = 2,   /* the deadline passed before completion */
    ENG_SCHED_CANCELLED = 3, /* eng_sched_cancel, or close without drain */
    ENG_SCHED_ERROR = 4      /* refused or failed; see eng_sched_result.error */
} eng_sched_finish;

/* "stop", "length", "expired", "cancelled", "error". */
const char *eng_sched_finish_name(eng_sched_finish f);

/* A matched cached prefix (lookup result).  The scheduler provides the
 * arrays; every non-NULL block pointer is one reference owned by the match
 * until it is adopted by a sequence or released. */
typedef struct eng_sched_match {
    void **gblk;  /* scheduler array, cap entries: global blocks */
    void **lblk;  /* scheduler array, cap entries: local blocks (NULL where no resume needs them) */
    int cap;      /* entries in gblk / lblk */
    int n_blocks; /* blocks matched */
    int n_tokens; /* tokens matched (the last block may be a partial copy: <= n_blocks * B) */
    int n_remote; /* of which came from a lower tier (Redis) */
} eng_sched_match;

/* The prefix cache as the scheduler sees it.  Every function may be called
 * from the scheduler's loop thread; prefetch also from submitters.  ns is
 * the request's namespace (ns_len <= ENG_SCHED_NS_MAX bytes). */
typedef struct eng_sched_cache_ops {
    void *ctx;              /* the cache, passed back to every function */
    eng_kv_allocator alloc; /* blocks for sequences (same pool the cache indexes) */
    /* Total blocks of a kind the allocator can ever hand out (pool size). */
    long (*blocks_total)(void *ctx, int kind);
    /* Longest resumable cached prefix of tokens[0..n), at most n - 1 tokens
     * and m->cap blocks; fills m.  Returns 0 (a miss is n_tokens 0) or < 0. */
    int (*lookup)(void *ctx, const char *ns, size_t ns_len, const int32_t *tokens, int n,
                  eng_sched_match *m);
    /* Drop a match's references (blocks not adopted). */
    void (*release)(void *ctx, eng_sched_match *m);
    /* Cached prefix length of tokens[0..n) without pinning anything (for
     * ordering).  Returns tokens (>= 0). */
    int (*probe)(void *ctx, const char *ns, size_t ns_len, const int32_t *tokens, int n);
    /* Index the full blocks of seq (allocated from alloc) under ns. */
    int (*insert)(void *ctx, const char *ns, size_t ns_len, const eng_kvseq *seq,
                  int turn_boundary);
    /* Start fetching tokens' blocks from a lower tier.  Returns a ticket
     * >= 0, or < 0 when there is no lower tier / no free ticket (the
     * request then proceeds without waiting).  May be NULL. */
    int (*prefetch)(void *ctx, const char *ns, size_t ns_len, const int32_t *tokens, int n);
    /* 1 if the ticket finished, 0 if still running. */
    int (*prefetch_done)(void *ctx, int ticket);
    /* Give a ticket back. */
    void (*prefetch_release)(void *ctx, int ticket);
} eng_sched_cache_ops;

/* scheduler.speculative: how decode steps draft tokens (eng_spec.h). */
enum { ENG_SCHED_SPEC_OFF = 0, ENG_SCHED_SPEC_NGRAM = 1 };

/* A drafter replacing prompt lookup (tests; a draft model some day): write
 * up to k guesses continuing toks[0..n_toks) (the first n_prompt are the
 * prompt) into out and return how many (0 = none).  Called on the loop
 * thread. */
typedef int (*eng_sched_draft_fn)(void *ctx, const int32_t *toks, int n_toks, int n_prompt,
                                  int32_t *out, int k);

/* A tenant's weight in its class's share of admissions ("Tenants"). */
typedef struct eng_sched_tenant_weight {
    const char *ns; /* namespace (NUL-terminated) */
    double weight;  /* relative share, > 0 (unlisted namespaces: 1) */
} eng_sched_tenant_weight;

/* Scheduler configuration. */
typedef struct eng_sched_config {
    int max_running; /* sequences in a batch at most (default 64) */
    int step_tokens; /* token budget of one step: decode tokens + prefill chunks (default 512) */
    int batch_window_us; /* wait for more arrivals when idle (default 10000; 0 = none) */
    int fairness_ms;     /* a request waiting this long is served in submit order (default 200) */
    int prefetch_wait_ms; /* longest wait for a request's prefetch before admitting it (default 50) */
    size_t kv_budget_bytes; /* no cache: KV bytes for all sequences (default 256 MiB) */
    double local_share; /* no cache: local blocks per global block of the budget (default 0.5) */
    int max_queue;   /* waiting + running requests at most; submit refuses beyond (default 4096) */
    int speculative; /* ENG_SCHED_SPEC_OFF or _NGRAM: draft and verify (default NGRAM) */
    int spec_tokens; /* drafted tokens per sequence and step at most, k (default 6; 1..64) */
    int spec_ngram_min, spec_ngram_max; /* n-gram sizes prompt lookup matches (default 2..4) */
    /* decode rows (last tokens + drafts) of a drafting step at most: each of
     * n decoding sequences drafts <= this / n - 1 tokens (default 8) */
    int spec_max_batch_tokens;
    eng_sched_draft_fn draft_fn; /* NULL: prompt lookup; else this drafter */
    void *draft_ctx;             /* passed to draft_fn */
    /* the model's vocabulary for constraints (eng_constraint_vocab_new;
     * the caller's, outliving the scheduler); NULL: constrained requests
     * are refused with ENG_SCHED_ENOTSUP */
    const eng_constraint_vocab *constraint_vocab;
    int mask_threads;       /* threads computing constraint masks (default 1; 1..64) */
    int64_t mask_budget_us; /* CPU time one mask may take (default 100000 = 100 ms; 0 = none) */
    int class_preempt;      /* 1: park running bulk sequences for waiting interactive (default 1) */
    double bulk_min_share; /* share of steps bulk gets at least while pending (default 0.1; 0..1) */
    /* prefill tokens bulk sequences take of one step at most (default 128;
     * 0 = step_tokens): bounds the step an interactive arrival waits on */
    int bulk_step_tokens;
    /* bulk sequences one step decodes at most while an interactive sequence
     * runs or waits (default 0 = no cap; the bulk ones take turns): the
     * step an interactive token waits on is then that many bulk decodes */
    int bulk_decode_seqs;
    /* tenants' weights (the caller's, outliving the scheduler; NULL: all 1) */
    const eng_sched_tenant_weight *tenant_weights;
    int n_tenant_weights; /* entries of tenant_weights */
} eng_sched_config;

/* Fill c with the defaults above. */
void eng_sched_config_default(eng_sched_config *c);

struct eng_sched_result; /* below */

/* One generated token as on_token sees it (valid during the callback). */
typedef struct eng_sched_token {
    int32_t token;             /* the token id */
    int index;                 /* its position in its choice's output, from 0 */
    int choice;                /* choice index (0 unless the request asked for n > 1) */
    const float *logits;       /* n_vocab raw logits of its position with want_logits, else NULL */
    int has_logprobs;          /* 1 when the request asked for logprobs */
    float logprob;             /* the token's log-probability (has_logprobs) */
    int n_top;                 /* alternatives in top (0..top_logprobs) */
    const eng_sampler_lp *top; /* the most likely tokens, best first (n_top entries) */
} eng_sched_token;

/* eng_sched_request.service_class: how the request is scheduled. */
enum { ENG_SCHED_INTERACTIVE = 0, ENG_SCHED_BULK = 1, ENG_SCHED_CLASSES = 2 };

/* One request's description (copied by submit). */
typedef struct eng_sched_request {
    const int32_t *prompt;       /* prompt token ids (n_prompt >= 1, each in [0, n_vocab)) */
    int n_prompt;                /* prompt length */
    eng_sampler_params sampling; /* sampler parameters, including stop token ids */
    int max_tokens;              /* tokens to generate at most (>= 1) */
    const char *ns;              /* cache namespace (NULL = ""); tenant isolation */
    size_t ns_len;               /* bytes of ns (<= ENG_SCHED_NS_MAX) */
    int64_t deadline_us;         /* absolute eng_sched_now_us() deadline; 0 = none */
    int want_logits;             /* 1: pass each sampled position's logits to on_token */
    /* constraint on the output (kind ENG_CONSTRAINT_NONE, as a zeroed
     * request has: none); the text is copied (compiled) by submit */
    eng_constraint_spec constraint;
    /* or the constraint already compiled by the caller over the
     * scheduler's constraint_vocab (eng_constraint_new), so a caller that
     * compiles it to check it never compiles it twice; NULL: submit
     * compiles `constraint`.  Submit takes it over whatever it returns
     * (used by the request, or freed with the refusal). */
    eng_constraint *compiled;
    int logprobs;      /* 1: token events carry log-probabilities */
    int top_logprobs;  /* alternatives per token, 0..ENG_SCHED_TOP_MAX (with logprobs) */
    int n;             /* choices: 0 or 1 = one, up to ENG_SCHED_N_MAX (see "Several choices") */
    int service_class; /* ENG_SCHED_INTERACTIVE (0, a zeroed request) or ENG_SCHED_BULK */
    /* Called on the delivery thread for every generated token, in order
     * per choice (choices interleave); may be NULL. */
    void (*on_token)(void *user, uint64_t id, const eng_sched_token *t);
    /* Called exactly once on the delivery thread when the request ends. */
    void (*on_done)(void *user, uint64_t id, const struct eng_sched_result *r);
    void *user; /* passed back to the callbacks */
} eng_sched_request;

/* How one choice of a request ended (valid during on_done only). */
typedef struct eng_sched_choice {
    eng_sched_finish finish; /* why it ended */
    const int32_t *tokens;   /* its generated tokens */
    int n_tokens;            /* how many */
    int preemptions;         /* times it was preempted */
    double ttft_ms;          /* submit -> its first token (0 if none) */
    const char *error;       /* message when finish is ERROR, else "" */
} eng_sched_choice;

/* A finished request (valid during on_done only).  finish, tokens,
 * n_tokens, preemptions and error are choice 0's. */
typedef struct eng_sched_result {
    eng_sched_finish finish;         /* why it ended */
    const int32_t *tokens;           /* generated tokens */
    int n_tokens;                    /* completion tokens */
    int n_choices;                   /* choices (1 unless n > 1 was asked) */
    const eng_sched_choice *choices; /* n_choices entries, by index */
    int prompt_tokens;               /* prompt length */
    int cached_tokens;               /* prompt tokens served from the cache at first admission */
    int preemptions;                 /* times the request was preempted */
    double queue_ms;                 /* submit -> first admission */
    double ttft_ms;                  /* submit -> first token (0 if none) */
    double total_ms;                 /* submit -> end */
    int64_t submit_us;               /* eng_sched_now_us() at submit */
    int64_t admit_us;                /* at first admission (0 if never admitted) */
    uint64_t admit_seq;              /* global order of first admission (1, 2, ...; 0 if never) */
    const char *error;               /* message when finish is ERROR, else "" */
} eng_sched_result;

#define ENG_SCHED_HIST 16 /* histogram buckets */

/* Counters since creation (eng_sched_stats). */
typedef struct eng_sched_stats {
    uint64_t submitted, finished; /* requests */
    uint64_t finish[5];           /* finished requests per eng_sched_finish */
    uint64_t steps;               /* forward calls */
    uint64_t prompt_tokens;       /* prompt tokens of admitted requests (first admission) */
    uint64_t cached_tokens;       /* of which served from the cache */
    uint64_t prefill_tokens;      /* tokens prefilled (incl. recomputation after preemption) */
    uint64_t decode_tokens;       /* decode tokens fed */
    uint64_t generated_tokens;    /* tokens sampled (accepted drafts included) */
    uint64_t spec_steps;          /* verify chunks run (a sequence's decode step with a draft) */
    uint64_t spec_drafted;        /* drafted tokens fed for verification */
    uint64_t spec_accepted;       /* of which accepted (acceptance rate = accepted / drafted) */
    uint64_t preemptions;         /* sequences preempted */
    uint64_t oom_retries;         /* eng_forward ENOMEM retries */
    uint64_t constrained;         /* constrained requests submitted */
    uint64_t masks;               /* constraint masks computed (pool) */
    double mask_cpu_ms;           /* CPU time the mask threads spent on them */
    double mask_wait_ms;          /* step time the loop spent blocked waiting for masks */
    uint64_t mask_over_budget;    /* masks abandoned for mask_budget_us (request ended: error) */
    uint64_t forks;               /* choices forked from a prefilled prompt (n - 1 per request) */
    uint64_t fork_tokens;         /* prompt tokens those choices got without computing them */
    double step_ms_total;         /* time inside eng_forward + sampling */
    double step_ms_max;           /* slowest step */
    /* steps by sequences in the batch: bucket i = [2^i, 2^(i+1)) */
    uint64_t batch_hist[ENG_SCHED_HIST];
    /* steps by duration: bucket i = [2^(i+6), 2^(i+7)) us, 0 also shorter */
    uint64_t step_us_hist[ENG_SCHED_HIST];
    long blocks_total[2];     /* blocks per kind the scheduler may use */
    long blocks_held[2];      /* blocks held by running sequences now (gauge) */
    long blocks_held_peak[2]; /* highest blocks_held seen */
    long alloc_live[2];       /* no cache: blocks allocated now */
    long alloc_live_peak[2];  /* no cache: highest blocks allocated at once (budget check) */
    int running, waiting;     /* requests now (gauges) */
    /* service classes (index ENG_SCHED_INTERACTIVE / ENG_SCHED_BULK) */
    uint64_t submitted_class[ENG_SCHED_CLASSES]; /* requests submitted per class */
    uint64_t class_preemptions; /* sequences parked (KV kept) to make room for the other class */
    uint64_t resumes;           /* parked sequences that went back into the batch */
    uint64_t bulk_steps;        /* steps whose batch held a bulk sequence */
    int running_class[ENG_SCHED_CLASSES]; /* sequences in the batch per class (gauges) */
    int waiting_class[ENG_SCHED_CLASSES]; /* queued sequences per class (gauges) */
    int parked;                           /* sequences parked with their KV (gauge) */
} eng_sched_stats;

typedef struct eng_sched eng_sched; /* opaque */

/* Monotonic clock in microseconds (the clock of deadlines and timings). */
int64_t eng_sched_now_us(void);

/* Create a scheduler over model m.  ops == NULL: no cache, plain allocator
 * limited to cfg->kv_budget_bytes.  cfg == NULL: defaults.  Starts the loop
 * and delivery threads.  Returns 0, ENG_SCHED_EINVAL (bad config),
 * ENG_SCHED_ENOMEM or ENG_SCHED_ETHREAD, with a message. */
int eng_sched_create(eng_model *m, const eng_sched_config *cfg, const eng_sched_cache_ops *ops,
                     eng_sched **out, char *err, size_t errlen);

/* Queue a request; *id (may be NULL) gets its id (>= 1).  Validation
 * failures (bad tokens, parameters, too large for the KV budget) return
 * ENG_SCHED_EINVAL with a message and no callback is made; so do a
 * constraint that does not compile (ENG_SCHED_ECONSTRAINT) and one this
 * scheduler cannot apply (ENG_SCHED_ENOTSUP).  Returns 0, those,
 * ENG_SCHED_ENOMEM or ENG_SCHED_ECLOSED (also when max_queue requests are
 * in flight).  Compiling a constraint runs on the calling thread (bounded
 * by llguidance's limits: milliseconds for ordinary schemas). */
int eng_sched_submit(eng_sched *s, const eng_sched_request *r, uint64_t *id, char *err,
                     size_t errlen);

/* Cancel a request: it ends with ENG_SCHED_CANCELLED at the next step and
 * its blocks are released (inserted in the cache first).  Returns 0 or
 * ENG_SCHED_ENOENT (unknown or already finishing). */
int eng_sched_cancel(eng_sched *s, uint64_t id);

/* End a request with finish reason stop at the next step: for stop
 * conditions found outside the scheduler (e.g. the worker's detokenizer
 * sees a stop string in on_token).  n_keep >= 0 keeps the first n_keep
 * generated tokens -- the ones up to and including the token that met the
 * condition -- and drops what the loop generated after them before it saw
 * the flag (a step or, with speculative decoding, a verified draft): they
 * leave the result and their KV is cut before the sequence goes into the
 * cache, so what a stopped turn leaves behind does not depend on timing.
 * n_keep < 0 keeps every token generated so far.  Returns 0 or
 * ENG_SCHED_ENOENT (unknown or already finishing). */
int eng_sched_stop(eng_sched *s, uint64_t id, int n_keep);

/* eng_sched_stop for one choice of a request (choice < 0: all, as
 * eng_sched_stop).  Returns 0 or ENG_SCHED_ENOENT (unknown request or
 * choice, or that choice already finishing). */
int eng_sched_stop_choice(eng_sched *s, uint64_t id, int choice, int n_keep);

/* The seed of choice i of a request seeded `seed`: seed itself for choice
 * 0, a splitmix64 derivation for the others (so a client can rerun one
 * choice as a request of its own). */
uint64_t eng_sched_choice_seed(uint64_t seed, int choice);

/* Hold (hold != 0) or release the scheduler: while held no step runs, so
 * running sequences keep their KV blocks and their place and waiting ones
 * stay waiting; requests are still accepted, cancels and deadlines still
 * end requests, and closing ends a hold.  At most the step in progress
 * when the hold is set still runs.  For tests that need the KV pool held
 * until they release it (the worker's PARLEY_TEST_KV_HOLD_FILE) and for
 * callers that must stop the engine for a while.  Any thread. */
void eng_sched_hold(eng_sched *s, int hold);

/* When the earliest request in flight is expected to finish (eng_sched_now_us
 * clock; see "Completion estimate"): 0 when a completion is queued for
 * delivery and its on_done has not returned, INT64_MAX when no request is
 * in flight.  An estimate may be in the past (a request running late).
 * *step_us (may be NULL) gets the recent step duration the estimate uses
 * (0 before the first step): requests end only at the end of a step, so a
 * caller asking "does one end soon" should not look closer than that.
 * Any thread; takes the scheduler's lock briefly. */
int64_t eng_sched_next_finish_us(eng_sched *s, int64_t *step_us);

/* Snapshot of the counters. */
void eng_sched_stats_get(eng_sched *s, eng_sched_stats *out);

/* Stop accepting requests and end every in-flight one: drain = 1 lets them
 * finish (deadlines still apply), drain = 0 cancels them.  Returns when
 * every completion callback has been delivered and both threads exited.
 * Idempotent. */
void eng_sched_close(eng_sched *s, int drain);

/* Close (drain = 0) if needed and free. */
void eng_sched_free(eng_sched *s);

#endif
