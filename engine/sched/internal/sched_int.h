/*
 * sched_int.h -- internals of the continuous-batching scheduler shared by
 * sched.c (public API, delivery thread), sched_loop.c (the step loop),
 * sched_fork.c (the choices of an n > 1 request), sched_spec.c
 * (speculative decoding), sched_class.c (service classes: parking and
 * resuming), sched_tenant.c (round-robin between namespaces), sched_req.c
 * (one request's lists, events, sampling and end, which all of them use)
 * and sched_alloc.c (the plain budget allocator used without a cache).
 * The files call one way: sched.c -> sched_loop.c -> the parts -> sched_req.c.
 *
 * Locking: s->mu guards the inbox, the live list, every request's `cancel`
 * flag, the closing flags and the statistics.  The waiting, running and
 * parked lists, the tenants and every other field of a request belong to the loop thread alone once
 * the loop has taken the request from the inbox.  s->dmu guards the delivery
 * queue.  Lock order: mu before dmu (never the reverse).
 */
#ifndef SCHED_INT_H
#define SCHED_INT_H

#include <pthread.h>

#include "eng_sched.h"
#include "pl_err.h"

enum { SCHED_INBOX = 0, SCHED_WAITING = 1, SCHED_RUNNING = 2, SCHED_PARKED = 3 };
enum { SCHED_END_CANCEL = 1, SCHED_END_STOP = 2 }; /* values of sched_req.cancel */

/* The choices of an n > 1 request: how each ended, kept until the last
 * one ends (then the completion event takes the group over). */
typedef struct sched_group {
    int n;                   /* choices */
    int n_done;              /* choices ended */
    eng_sched_choice *res;   /* n results (tokens / error point into the arrays below) */
    int32_t **tok;           /* n owned token copies (NULL when none) */
    char (*err)[PL_ERR_LEN]; /* n error texts */
    uint64_t held_epoch;     /* running_held pass that last counted the shared blocks */
} sched_group;

/* One sequence in flight: a request, or one choice of an n > 1 request
 * (choices share id, user and callbacks, and point at one group). */
typedef struct sched_req {
    uint64_t id;                 /* public id (>= 1) */
    struct sched_req *next;      /* link in inbox / waiting / running list */
    struct sched_req *live_next; /* link in the live list (under mu) */
    int state;                   /* SCHED_INBOX / WAITING / RUNNING */
    int cancel;                  /* 0, or SCHED_END_* set by eng_sched_cancel / _stop (under mu) */
    int stop_keep;               /* generated tokens eng_sched_stop keeps, -1 all (under mu) */
    int32_t *toks;               /* prompt followed by generated tokens */
    int n_toks, cap_toks;        /* used / allocated entries of toks */
    int n_prompt;                /* prompt length */
    int n_gen;                   /* generated tokens (= n_toks - n_prompt) */
    int max_tokens;              /* generation limit */
    eng_sampler *sampler;        /* per-request sampler (RNG state survives preemption) */
    char ns[ENG_SCHED_NS_MAX];   /* namespace bytes */
    size_t ns_len;               /* namespace length */
    int64_t deadline_us;         /* absolute deadline, 0 = none */
    int cls;                     /* ENG_SCHED_INTERACTIVE / ENG_SCHED_BULK */
    int tenant;                  /* index in s->tenants during an admission pass */
    int64_t submit_us;           /* submit time */
    int64_t admit_us;            /* first admission, 0 before */
    int64_t first_tok_us;        /* first token, 0 before */
    uint64_t admit_seq;          /* global first-admission order, 0 before */
    uint64_t run_seq;            /* order of the latest admission (youngest = largest) */
    int ticket;                  /* prefetch ticket, -1 none */
    int ready;                   /* 1 once admissible (prefetch done or timed out) */
    int hint;                    /* cached-prefix probe for ordering, valid when ready */
    int cached_tokens;           /* tokens adopted from the cache at first admission */
    int preemptions;             /* times preempted */
    int want_logits;             /* copy logits into token events */
    void (*on_token)(void *, uint64_t, const eng_sched_token *); /* token callback */
    void (*on_done)(void *, uint64_t, const eng_sched_result *); /* completion callback */
    void *user;                                                  /* callback argument */
    int kv_live;                                                 /* kv is initialised */
    eng_kvseq kv;          /* the sequence's KV (running only) */
    float *logits;         /* n_vocab floats (running only) */
    eng_ngram *ngram;      /* prompt-lookup index of toks, made at the first draft (NULL before) */
    int spec_k;            /* the next draft's length limit (eng_spec_next_k), 1..spec_tokens */
    eng_sampler_params sp; /* its sampler's parameters (choices derive theirs) */
    int choice;            /* choice index, 0..n-1 */
    sched_group *grp;      /* the request's choices (NULL when n == 1) */
    int n_fork;            /* choices to fork at the first sample (n - 1 until then, then 0) */
    int n_shared;          /* leading KV blocks shared with other choices (forked), else 0 */
    eng_constraint *cons;  /* constraint (NULL: none); its next mask may be in flight */
    int32_t cons_ahead[ENG_CONSTRAINT_MAX_AHEAD]; /* the draft its mask job looks ahead over */
    int n_cons_ahead;                             /* its length (0: none) */
    int logprobs;                                 /* token events carry log-probabilities */
    eng_sampler_logprobs *lp;                     /* logprobs: room for spec_tokens + 1 positions */
    int32_t argmax; /* the greedy token of an ENG_LOGITS_ARGMAX step (sched_argmax_only) */
} sched_req;

/* 1 when r's sampling needs its whole logits row, not just the argmax: a
 * constraint, logprobs, logits in its token events, choices still to fork
 * from it, temperature or a penalty (the steps of the others ask for
 * ENG_LOGITS_ARGMAX: the output projection never writes their rows). */
static inline int sched_req_needs_logits(const sched_req *r) {
    return r->cons || r->logprobs || r->want_logits || r->n_fork > 0 ||
           eng_sampler_needs_logits(r->sampler);
}

/* A callback event on the delivery queue. */
typedef struct sched_event {
    struct sched_event *next;                                    /* queue link */
    int is_done;                                                 /* 0 token, 1 completion */
    uint64_t id;                                                 /* request id */
    void *user;                                                  /* callback argument */
    void (*on_token)(void *, uint64_t, const eng_sched_token *); /* token callback */
    void (*on_done)(void *, uint64_t, const eng_sched_result *); /* completion callback */
    eng_sched_token tok; /* token event (its logits / top point into this event) */
    eng_sampler_lp top[ENG_SAMPLER_TOP_MAX]; /* token event: logprob alternatives */
    float *logits;                           /* token event: logits copy or NULL (owned) */
    eng_sched_result res;   /* completion: result (tokens / error point into this event) */
    int32_t *res_tokens;    /* completion: owned copy of the tokens (n == 1) */
    char error[PL_ERR_LEN]; /* completion: error text (n == 1) */
    eng_sched_choice one;   /* completion: the one choice of an n == 1 request */
    sched_group *grp;       /* completion: the choices of an n > 1 request (owned) */
} sched_event;

/* A namespace with work in the scheduler (sched_tenant.c). */
typedef struct sched_tenant {
    char ns[ENG_SCHED_NS_MAX]; /* namespace bytes */
    size_t ns_len;             /* its length */
    double vt;                 /* virtual time: admissions / weight */
    double weight;             /* its weight (tenant_weights, else 1) */
    int seen;                  /* has a request in the scheduler (refresh scratch) */
} sched_tenant;

/* The plain allocator used without a cache: malloc blocks, capped per kind. */
typedef struct sched_budget {
    eng_kv_allocator inner; /* malloc allocator doing the work */
    pthread_mutex_t mu;     /* guards the counters */
    long cap[2];            /* blocks allowed per kind */
    long live[2];           /* blocks allocated now */
    long peak[2];           /* highest live */
    /* extra references of shared blocks (forks): open addressing on the
     * block pointer, linear probing; a block absent has one reference */
    void **ref_key;  /* block pointers, NULL = empty slot */
    int *ref_extra;  /* references beyond the first */
    size_t ref_cap;  /* slots (a power of two, 0 before the first fork) */
    size_t ref_used; /* slots in use */
} sched_budget;

struct eng_sched {
    eng_model *model;            /* the model (caller's) */
    const eng_kv_layout *layout; /* its KV layout */
    int n_vocab;                 /* vocabulary size */
    eng_sched_config cfg;        /* configuration (defaults applied) */
    int has_cache;               /* ops given */
    eng_sched_cache_ops ops;     /* cache functions (has_cache) */
    eng_kv_allocator alloc;      /* where sequences get blocks */
    sched_budget *budget;        /* plain allocator state (no cache) */
    long blocks_total[2];        /* usable blocks per kind */
    int wb; /* blocks a local window spans (ceil(W/B)), 0 without local layers */

    pthread_mutex_t mu;            /* see the locking note */
    pthread_cond_t cv;             /* loop wake-up: inbox, cancel, close */
    sched_req *inbox, *inbox_tail; /* submitted, not yet seen by the loop */
    sched_req *live;               /* every request not yet finished */
    int n_live;                    /* length of live */
    uint64_t next_id;              /* next request id */
    int closing;                   /* close requested */
    int drain;                     /* close lets requests finish */
    int held;                      /* eng_sched_hold: no step runs while set */
    eng_sched_stats st;            /* counters (under mu) */
    int64_t step_us_ema;           /* recent step duration, us (EMA 1/4; 0 before a step; mu) */
    int64_t eta_us;                /* earliest expected finish of a live request (mu) */
    int done_pending;              /* completions queued, on_done not yet returned (mu) */

    sched_req *waiting;         /* loop: waiting requests (unordered) */
    sched_req *running;         /* loop: running requests, admission order */
    sched_req *parked;          /* loop: out of the batch with their KV kept, park order */
    double bulk_share;          /* loop: EMA (1/16) of steps carrying a bulk sequence */
    unsigned bulk_turn;         /* loop: where the next capped step's bulk decodes begin */
    sched_tenant *tenants;      /* loop: namespaces with work (sched_tenant.c) */
    int n_tenants, cap_tenants; /* loop: entries used / allocated */
    uint64_t admit_counter;     /* loop: first-admission sequence */
    uint64_t run_counter;       /* loop: admission sequence (incl. resumes) */
    eng_seq_step *steps;        /* loop: batch under construction (max_running) */
    float *spec_logits;         /* loop: verify chunks' logits, spec_rows rows of n_vocab */
    int spec_rows;              /* rows of spec_logits (0: drafting never fits a step) */
    sched_req **step_req;       /* loop: request of each step */
    uint64_t held_epoch;        /* loop: running_held passes (shared blocks counted once) */
    eng_constraint_pool *pool;  /* mask threads (constraint_vocab given), else NULL */

    pthread_mutex_t dmu;       /* guards the delivery queue */
    pthread_cond_t dcv;        /* delivery wake-up */
    sched_event *dq, *dq_tail; /* delivery queue */
    int dstop;                 /* delivery thread: exit once the queue is empty */

    pthread_t loop_th, deliv_th;     /* threads */
    int loop_started, deliv_started; /* which threads run */
    int closed;                      /* eng_sched_close finished */
};

/* sched_req.c: append r to / remove r from a waiting / running / parked list. */
void sched_list_append(sched_req **head, sched_req *r);
void sched_list_remove(sched_req **head, sched_req *r);
/* sched_req.c: length of a list. */
int sched_list_len(const sched_req *h);
/* sched_req.c: move r (running or parked) back to the waiting list, its
 * KV inserted in the cache or dropped (memory preemption). */
void sched_preempt(eng_sched *s, sched_req *r);
/* sched_class.c: before admission, park the youngest running bulk
 * sequences so that the ready interactive requests get running slots
 * (class_preempt), or, bulk being starved (bulk_min_share), park the
 * youngest interactive one to give bulk a slot. */
void sched_class_balance(eng_sched *s);
/* sched_class.c: 1 when the admission should take bulk candidates ahead
 * of interactive ones this iteration (bulk starved). */
int sched_class_bulk_first(const eng_sched *s);
/* sched_class.c: with bulk_decode_seqs set and an interactive sequence
 * running or waiting (bulk not starved), the index among the *nb decoding
 * bulk sequences (in running order) of the first of the bulk_decode_seqs
 * this step decodes, wrapping around; the next call starts after them.
 * -1: no cap this step. */
int sched_class_bulk_decode_cap(eng_sched *s, int *nb);
/* sched_class.c: put parked sequences back into the batch while running
 * slots are free: interactive ones, then bulk ones unless a ready
 * interactive request waits (or bulk is starved).  *n_run counts running
 * slots.  Returns the number resumed. */
int sched_class_resume(eng_sched *s, int *n_run);
/* sched_tenant.c: before an admission pass, give every waiting, running
 * and parked request its tenant (r->tenant), dropping namespaces without
 * work and starting new ones at the lowest virtual time.  Returns the
 * number of tenants (< 0: out of memory; then every r->tenant is -1). */
int sched_tenant_refresh(eng_sched *s);
/* sched_tenant.c: the virtual time of r's tenant (0 without one). */
double sched_tenant_vt(const eng_sched *s, const sched_req *r);
/* sched_tenant.c: charge r's tenant for n admitted sequences. */
void sched_tenant_charge(eng_sched *s, const sched_req *r, int n);
/* sched_class.c: after a step of n sequences (s->step_req), update the
 * bulk share and the counters. */
void sched_class_step(eng_sched *s, int n);

/* sched_req.c: when request r is expected to finish (eng_sched_next_finish_us):
 * now plus its steps left (prefill chunks of step_tokens, or of
 * bulk_step_tokens for a bulk request, then one step per token up to
 * max_tokens) times s->step_us_ema, plus the batching
 * window when idle (nothing running) and r is not running.  Called with
 * s->mu held by the thread that owns r (the loop; a submitter for a
 * request in the inbox). */
int64_t sched_eta(const eng_sched *s, const sched_req *r, int64_t now, int idle);

/* sched_loop.c: the loop thread's body. */
void *sched_loop_main(void *arg);

/* sched_req.c: end request r, already taken off the waiting / running /
 * parked lists: its KV inserted in the cache (unless it ended in error)
 * and dropped, its completion delivered (an n > 1 request's when its last
 * choice ends), r freed. */
void sched_finish(eng_sched *s, sched_req *r, eng_sched_finish why, const char *msg);
/* sched_req.c: end running request r (taken off the running list first). */
void sched_end_running(eng_sched *s, sched_req *r, eng_sched_finish why, const char *msg);

/* sched_req.c: queue the token event of generated token `index` of r
 * (r->toks[n_prompt + index]) with its logits row (copied with
 * want_logits) and its log-probabilities (NULL: none). */
void sched_token_event(eng_sched *s, sched_req *r, int index, const float *logits,
                       const eng_sampler_logprobs *lp);

/* sched_req.c: sample r's next token from r->logits (under its
 * constraint's mask), or take r->argmax when use_argmax (an
 * ENG_LOGITS_ARGMAX step), report it, and end r when it is done.  The
 * caller forks r's other choices first when it has any (sched_fork).
 * Returns 1 when r ended (freed). */
int sched_sample_one(eng_sched *s, sched_req *r, int use_argmax, int64_t now);

/* sched_req.c: wait for r's constraint masks (counting the wait in the
 * statistics).  Returns 0 with *masks / *n_masks set, or ends r with
 * finish reason error and returns -1 (r is freed). */
int sched_cons_wait(eng_sched *s, sched_req *r, const uint32_t *const **masks, int *n_masks);

/* sched_req.c: after r committed tokens, end it if its constraint is
 * complete (stop) or failed, else start its next mask.  Returns 1 when r
 * ended (freed). */
int sched_cons_next(eng_sched *s, sched_req *r);

/* sched_req.c: a group for n choices, or NULL without memory. */
sched_group *sched_group_new(int n);
void sched_group_free(sched_group *g);
/* sched_fork.c: fork running request r (its prompt's logits in
 * r->logits, before its first sample) into its n_fork other choices:
 * running ones sharing its KV, stored in made[] (room for
 * ENG_SCHED_N_MAX), which the caller then samples from those logits; or,
 * short of KV, waiting ones that will recompute the prompt.  Returns the
 * number of running choices made. */
int sched_fork(eng_sched *s, sched_req *r, sched_req **made);

/* sched_spec.c: draft up to k tokens (the step's limit) for decoding
 * sequence r into r->toks[n_toks..] (not counted in n_toks), within r's
 * own draft length, its token limit and what the KV can be truncated back
 * from.  Returns how many (0: none). */
int sched_spec_draft(eng_sched *s, sched_req *r, int k);

/* sched_spec.c: after the forward pass, judge r's verify chunk of 1 + k
 * tokens (logits in rows), emit the tokens, truncate the KV to what was
 * kept, count, and end r on a stop token or its limit.  *emitted gets the
 * tokens emitted. */
void sched_spec_commit(eng_sched *s, sched_req *r, int k, const float *rows, int64_t now,
                       uint64_t *emitted);

/* sched_req.c: queue an event for the delivery thread (takes ownership). */
void sched_deliver(eng_sched *s, sched_event *e);

/* sched_alloc.c: create / free the plain allocator for layout l and a byte
 * budget split local_share local blocks per global block.  Returns 0,
 * ENG_SCHED_EINVAL (budget below one block of a needed kind) or ENOMEM. */
int sched_budget_create(const eng_kv_layout *l, size_t budget, double local_share,
                        sched_budget **out, char *err, size_t errlen);
void sched_budget_free(sched_budget *b);
eng_kv_allocator sched_budget_allocator(sched_budget *b);
void sched_budget_peak(sched_budget *b, long live[2], long peak[2]);

/* Blocks (per kind) a sequence holding n_before tokens needs in all while
 * growing to n_after tokens: global blocks for every token, local blocks
 * for the live window plus the new ones (the forward pass allocates new
 * blocks before releasing dead ones). */
void sched_blocks_for(const eng_sched *s, int n_before, int n_after, long need[2]);

#endif
