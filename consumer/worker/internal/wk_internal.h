/*
 * wk_internal.h -- the worker's private structures and the functions its
 * files share.  Not a public header (wk_worker.h is).  The files:
 *   wk_cmd_worker.c  `parley worker`: configuration in, run until a signal
 *   wk_config.c  the property table (every setting), its cross-key checks
 *                and the reference document (consumer/CONFIG.md)
 *   wk_worker.c  create and free: model, tokenizer, template, cache,
 *                scheduler, then the Kafka handles and the HTTP endpoint
 *   wk_kafka.c   the Kafka handles, kafka.* scoping, refusals, and the
 *                turn path's Kafka boundary (wk_record_from_kafka)
 *   wk_turn.c    a wk_record -> a validated wk_turn, or a DeadLetter
 *                (and the turn's error TurnResult) or an `expired` one
 *   wk_log.c     the structured log (wk_log)
 *   wk_history.c a conversation's remembered last turn (wk_history),
 *                which the next turn's prompt splices in (eng_template.h)
 *   wk_gen.c     submission to the scheduler and its delivery-thread
 *                callbacks: TokenChunks, the TurnResult, the done list
 *   wk_loop.c    the poll loop: conversation queues, rebalances, lag,
 *                shutdown
 *   wk_pause.c   every pause and resume: backpressure, producer rebuild,
 *                shutdown; the tests' engine hold (PARLEY_TEST_ENGINE_HOLD)
 *   wk_batch.c   the exactly-once state logic, no Kafka calls: partition
 *                ownership, offsets, the batch
 *   wk_offsets.c ring windows of (offset, done) per partition, under
 *                wk_batch.c's commit positions (wk_offsets.h)
 *   wk_txn_state.c  the producer-rebuild decision and stages, no Kafka calls
 *   wk_txn.c     the transactions and the producer rebuild (Kafka calls)
 *   wk_http.c    /metrics, /healthz, /readyz
 *   wk_reply.c   per-token logprobs in their wire form (texts looked up
 *                when a chunk or result is encoded); a TurnResult's
 *                encoding and its fallbacks
 *   wk_tools.c   tool calls: tools shown in the template's format, calls
 *                read back from replies (wk_tools.h)
 *
 * Life of a turn: the poll thread copies a consumed message into a
 * wk_record, which wk_turn_from_record turns into a wk_turn (or a wk_out
 * DeadLetter, with the turn's error result chained, or an expired result,
 * straight for the batch); the turn is queued
 * on its conversation (wk_conv) and submitted when the conversation is
 * idle.  The scheduler's delivery thread runs wk_gen.c's callbacks
 * (wk_on_token / wk_on_done): they stream chunks, build the TurnResult
 * into turn->result and move the turn to the done list (w->convs, under
 * its mu).  The poll thread takes it from there into the transaction
 * batch (a wk_out in w->batch) and submits the conversation's next turn.
 *
 * The worker's state is split by concern: wk_engine (model side),
 * wk_topics, wk_convs (conversations, turns in flight, done list),
 * wk_batch (outputs of the next transaction, offsets, ownership),
 * wk_pause (backpressure), wk_txn_state (open transaction, rebuild),
 * wk_producers, wk_halt (stop requests, fatal errors), wk_metrics.
 */
#ifndef WK_INTERNAL_H
#define WK_INTERNAL_H

#include <librdkafka/rdkafka.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#include "eng_constraint.h"
#include "eng_model.h"
#include "eng_sched.h"
#include "eng_template.h"
#include "eng_tok.h"
#include "kv_cache.h"
#include "pl_err.h"
#include "sch.h"
#include "wk_config.h"
#include "wk_offsets.h"
#include "wk_tools.h"
#include "wk_worker.h"

#define WK_TRACEPARENT_MAX 128 /* longest traceparent header carried */
#define WK_MAX_EOG 64          /* end-of-generation token ids used as stops */
#define WK_LAT_N 12            /* latency histogram buckets */
#define WK_TURN_N 6      /* turn-index buckets of the TTFT histogram: 1, 2, 3-4, 5-8, 9-16, 17+ */
#define WK_MAX_IDLE 4096 /* idle conversations remembered for the handoff */
#define WK_OVH_N 14      /* pipeline overhead histogram buckets */
#define WK_OVH_RING 8192 /* latest overheads kept for the exact median */
#define WK_HEADER_NAMESPACE "parley-namespace" /* namespace_from=header reads this */

/* worker.namespace_from: who names a turn's cache namespace. */
typedef enum wk_ns_from {
    WK_NS_FIELD = 0, /* the record's `namespace` field (trusted producers) */
    WK_NS_HEADER,    /* the parley-namespace header (a trusted gateway sets it) */
    WK_NS_TOPIC,     /* the turns topic's name (one topic per tenant) */
    WK_NS_FIXED      /* worker.namespace for every turn */
} wk_ns_from;

/* Where a turn's time went (eng_sched_now_us clock; 0 = not reached). */
typedef struct wk_timing {
    int64_t ready_us;  /* consumed, or its predecessor in the conversation finished */
    int64_t submit_us; /* handed to the scheduler */
    int64_t admit_us;  /* first admitted to a batch (scheduler) */
    int64_t end_us;    /* the scheduler finished it */
} wk_timing;

/* One header of an input record, as librdkafka holds it. */
typedef struct wk_header {
    const char *name;  /* NUL-terminated name */
    const void *value; /* value bytes (NULL for a null value) */
    size_t size;       /* value bytes (0 for a null value) */
} wk_header;

/* An input record as the turn path sees it: what the Kafka boundary
 * (wk_record_from_kafka, called by wk_loop.c) copied out of an
 * rd_kafka_message_t, so the turn path runs and is tested without a
 * broker.  Every pointer is borrowed from the message and valid while it
 * lives; every byte is the producer's and is treated as hostile. */
typedef struct wk_record {
    const char *topic;        /* topic name */
    int32_t partition;        /* partition */
    int64_t offset;           /* offset */
    const void *key;          /* key bytes (NULL = no key) */
    size_t key_len;           /* key bytes (0 when key is NULL) */
    const void *value;        /* value bytes (NULL = null value) */
    size_t len;               /* value bytes (0 when value is NULL) */
    const wk_header *headers; /* headers in record order */
    size_t n_headers;         /* entries */
    int64_t timestamp_ms;     /* record timestamp (unix ms); -1 none */
} wk_record;

/* One output record of the next transaction (TurnResult or DeadLetter). */
typedef struct wk_out {
    struct wk_out *next;         /* batch list link (before: the next output
                                  * of the same input offset, or NULL) */
    int dlq;                     /* 1: DLQ topic, 0: responses topic */
    int json;                    /* val is JSON (content-type application/json): the turn's
                                 * accept header asked for it; DeadLetters never are */
    char *key;                   /* record key (malloc'd; NULL = none) */
    size_t key_len;              /* key bytes */
    sch_buf val;                 /* encoded record */
    char tp[WK_TRACEPARENT_MAX]; /* traceparent to carry ("" = none) */
    int32_t partition;           /* input partition it finishes */
    int64_t offset;              /* input offset it finishes */
    uint32_t gen;                /* partition generation at consumption */
    int ready;                   /* below the commit position: goes in this transaction */
    wk_timing tm;                /* the turn's timing (TurnResults of served turns only) */
} wk_out;

struct wk_conv;

/*
 * A conversation's remembered last turn: what eng_tmpl_render_turn needs to
 * splice its ids into the next turn's prompt (eng_template.h, "Splicing a
 * conversation's ids") -- its prompt's render (flat text and special
 * tokens), the prompt ids it ran, the ids it generated, the reply text it
 * returned -- and the namespace it ran in (a prior applies only in the
 * same namespace).  One allocation; the poll thread owns it (built on the
 * delivery thread in wk_on_done, handed over with the turn).  Bounded in
 * total by worker.history_mib: the least recently used idle conversations
 * are forgotten first, with their history.
 */
typedef struct wk_history {
    eng_tmpl_prior p;              /* views of the storage after the struct */
    char ns[ENG_SCHED_NS_MAX + 1]; /* namespace of the turn */
    size_t bytes;                  /* the allocation's size */
} wk_history;

/* A wk_history of a finished turn (rt: its render; prompt/gen: its ids;
 * reply: the text returned); NULL when out of memory. */
wk_history *wk_history_new(const eng_tmpl_turn *rt, int n_msgs, const char *ns,
                           const int32_t *prompt, int n_prompt, const int32_t *gen, int n_gen,
                           const char *reply, size_t n_reply);
/* The prior for a turn in namespace ns, or NULL (no history, another
 * namespace). */
const eng_tmpl_prior *wk_history_prior(const wk_history *h, const char *ns, size_t ns_len);

/* One generated token's log-probabilities as the delivery thread keeps
 * them (texts are looked up when a record is encoded). */
typedef struct wk_lp {
    int32_t id;    /* the token */
    float logprob; /* its log-probability */
    int top_from;  /* its alternatives: wk_choice.tops[top_from .. + n_top) */
    int n_top;     /* how many */
} wk_lp;

/* Delivery-thread state of one choice of a turn (n > 1 turns have n). */
typedef struct wk_choice {
    eng_tok_stream ts;         /* streaming detokenizer */
    char *text;                /* reply text so far */
    size_t text_len, text_cap; /* bytes used / allocated */
    size_t chunk_from;         /* text offset where the open chunk starts */
    int32_t *ctoks;            /* token ids of the open chunk */
    int n_ctoks, cap_ctoks;    /* used / allocated */
    int n_toks;                /* tokens delivered so far (the open chunk's end) */
    int stopped;               /* a stop string was seen */
    int stop_keep;             /* generated ids up to the one completing the stop string */
    wk_lp *lp;                 /* log-probabilities per delivered token (logprobs turns) */
    int n_lp, cap_lp;          /* used / allocated */
    eng_sampler_lp *tops;      /* their alternatives, flat */
    int n_tops, cap_tops;      /* used / allocated */
    wk_calls calls;            /* tool calls read from the reply (text is then the rest) */
} wk_choice;

/* A turn being served. */
typedef struct wk_turn {
    struct wk_worker *w;          /* owner */
    struct wk_conv *conv;         /* its conversation queue */
    struct wk_turn *next;         /* conversation queue link */
    struct wk_turn *dnext;        /* done list link */
    int32_t partition;            /* input partition */
    int64_t offset;               /* input offset */
    uint32_t gen;                 /* partition generation at consumption */
    int orphan;                   /* partition revoked: drop the outcome (conv is NULL) */
    char tp[WK_TRACEPARENT_MAX];  /* traceparent ("" = none) */
    char *conv_id, *turn_id, *ns; /* copies (NUL-terminated) */
    int32_t *prompt;              /* prompt ids */
    int n_prompt;                 /* prompt length */
    eng_tmpl_turn rt;             /* the prompt's render: text and specials (ids: prompt) */
    int n_msgs;                   /* messages rendered (0: raw prompt_tokens, no history) */
    int turn_index;               /* user messages in the turn: 1 for a first turn */
    wk_history *hist;             /* built in wk_on_done: the conversation's next history */
    eng_sampler_params sampling;  /* sampling parameters incl. stop ids */
    int max_tokens;               /* generation limit */
    int64_t deadline_us;          /* eng_sched_now_us deadline; 0 none */
    int service_class;            /* ENG_SCHED_INTERACTIVE / _BULK (the turn's service_class) */
    int64_t queued_unix_ms;       /* created_ms or record timestamp */
    int64_t submit_unix_ms;       /* wall clock at submit */
    bool stream;                  /* publish TokenChunks */
    bool json_out;                /* accept: application/json: chunks and result as JSON */
    char **stop;                  /* stop strings (NUL-terminated copies) */
    int n_stop;                   /* entries */
    /* the constraint (response_format, or a forced tool call's schema),
     * compiled once at admission and handed to the scheduler at submit
     * (which takes it); NULL = none */
    eng_constraint *cons;
    int logprobs;      /* 1: per-token logprobs asked for */
    int top_logprobs;  /* alternatives per token (0..20) */
    int n_choices;     /* choices (params.n, 1..16) */
    wk_tools tools;    /* tools and tool_choice (mode OFF: none) */
    uint64_t attempt;  /* this attempt's id */
    uint64_t sched_id; /* scheduler request id (0 before submit) */
    int cancel_req;    /* atomic: a CancelTurn asked to stop it (wk_cancel.c) */
    /* Delivery-thread state: */
    wk_choice *ch;       /* n_choices entries */
    uint64_t seq;        /* next chunk seq (over all choices) */
    int32_t *final_toks; /* prompt + reply ids (for the Redis handoff) */
    int n_final;         /* entries */
    sch_buf result;      /* encoded TurnResult once done */
    int result_rc;       /* 0, or the encode error */
    wk_timing tm;        /* where its time went (for the overhead histogram) */
} wk_turn;

/* Turns of one conversation (record key) on one partition, oldest first. */
typedef struct wk_conv {
    struct wk_conv *hnext;               /* hash chain */
    int32_t partition;                   /* input partition of its turns */
    char *key;                           /* conversation id (= record key) */
    size_t key_len;                      /* bytes */
    wk_turn *head, *tail;                /* queued turns; head runs when running */
    int running;                         /* head was submitted */
    int32_t *last_toks;                  /* ids of its latest finished turn (prompt + reply) */
    wk_history *hist;                    /* its latest finished turn, for splicing (or NULL) */
    int n_last;                          /* entries */
    char ns[ENG_SCHED_NS_MAX + 1];       /* namespace of that turn */
    struct wk_conv *lru_prev, *lru_next; /* idle list (no turns queued) */
    int idle;                            /* on the idle list */
} wk_conv;

/* Counters for logs and /metrics (updated with __atomic builtins). */
typedef struct wk_counters {
    uint64_t consumed;          /* records consumed */
    uint64_t turns_done;        /* TurnResults committed */
    uint64_t dlq;               /* DeadLetters committed */
    uint64_t chunks;            /* TokenChunks produced */
    uint64_t tokens;            /* completion tokens */
    uint64_t cached_tokens;     /* prompt tokens served from cache */
    uint64_t prompt_tokens;     /* prompt tokens */
    uint64_t txn_commits;       /* committed transactions */
    uint64_t txn_aborts;        /* aborted transactions */
    uint64_t dropped;           /* outcomes dropped after revocation */
    uint64_t pauses;            /* backpressure pauses (any reason) */
    uint64_t pauses_kv;         /* of which because KV memory passed its high-water mark */
    uint64_t producer_rebuilds; /* transactional producers rebuilt after a fatal error */
    uint64_t chunk_rebuilds;    /* chunk producers rebuilt after a fatal error */
    int64_t kv_permille; /* gauge: KV blocks held by running sequences, per mille of the pool */
    int64_t pause_why;   /* gauge: WK_PAUSE_* bits holding the backpressure pause */
    uint64_t ovh_hist[WK_OVH_N];   /* overhead histogram, bucket i <= wk_ovh_bounds_ms[i] */
    uint64_t ovh_n;                /* turns measured */
    uint64_t ovh_sum_us;           /* sum of overheads (pre + post) */
    uint64_t pre_sum_us;           /* sum of ready -> submit */
    uint64_t squeue_sum_us;        /* sum of submit -> admit (scheduler queue) */
    uint64_t engine_sum_us;        /* sum of admit -> end (in a running batch) */
    uint64_t post_sum_us;          /* sum of end -> transaction committed */
    uint64_t handoff_blocks;       /* KV blocks queued to Redis on revocation */
    uint64_t ttft_hist[WK_LAT_N];  /* TTFT histogram, bucket i <= wk_lat_bounds_ms[i] */
    uint64_t total_hist[WK_LAT_N]; /* total latency histogram, same buckets */
    uint64_t ttft_sum_us;          /* sum of TTFTs in microseconds */
    uint64_t total_sum_us;         /* sum of total latencies in microseconds */
    uint64_t prefix_splice;        /* prompt tokens spliced from conversations' histories */
    uint64_t turns_spliced;        /* turns whose prompt spliced a history in */
    uint64_t retok_mismatch;       /* of which re-tokenising would have given other ids */
    uint64_t ttft_turn_hist[WK_TURN_N][WK_LAT_N]; /* TTFT histogram by turn-index bucket */
    uint64_t ttft_turn_sum_us[WK_TURN_N];         /* sums of those TTFTs (us) */
    uint64_t class_turns[ENG_SCHED_CLASSES];      /* turns the engine ended, per service class */
    uint64_t ttft_class_hist[ENG_SCHED_CLASSES][WK_LAT_N]; /* TTFT histogram per class */
    uint64_t ttft_class_sum_us[ENG_SCHED_CLASSES];         /* sums of those TTFTs (us) */
    uint64_t cancelled;       /* TurnResults written with finish_reason cancelled */
    uint64_t cancels;         /* CancelTurn records consumed */
    uint64_t cancels_ignored; /* of which named no queued or running turn (finished,
                               * unknown, or remembered for a turn still to come) */
    int64_t inflight;         /* gauge copy of wk_convs.inflight for readers */
    int64_t assigned;         /* gauge: partitions assigned */
} wk_counters;

/* Add n to a counter of wk_counters (relaxed: readers only need totals). */
#define WK_ADD(field, n) __atomic_add_fetch(&(field), (n), __ATOMIC_RELAXED)

/* Upper bounds (ms) of the latency buckets; the last bucket is +Inf. */
extern const double wk_lat_bounds_ms[WK_LAT_N - 1];
/* Upper bounds (ms) of the overhead buckets; the last bucket is +Inf. */
extern const double wk_ovh_bounds_ms[WK_OVH_N - 1];

/* The model side: what turns are validated, tokenized and generated
 * with (set up by wk_worker.c, read-only afterwards except the scratch). */
typedef struct wk_engine {
    char model_name[256];         /* name turns may use in `model` */
    eng_model *model;             /* loaded model */
    eng_tok *tok;                 /* its tokenizer */
    eng_tmpl_format fmt;          /* chat template: a built-in format or ENG_TMPL_FILE */
    eng_tmpl_format family;       /* built-in format of its family (tool format); NONE: unknown */
    eng_tmpl_file *tfile;         /* the file's own compiled template when fmt == ENG_TMPL_FILE */
    int n_vocab;                  /* vocabulary size */
    int n_ctx;                    /* longest prompt + max_tokens */
    int32_t eog[WK_MAX_EOG];      /* end-of-generation ids (the template's end-of-turn token too) */
    int n_eog;                    /* entries */
    const char *turn_stop;        /* the template's end-of-turn text (eng_tmpl_end_of_turn), a
                                   * stop string of every turn; NULL when it ends with a token */
    kv_cache *cache;              /* prefix cache (NULL = off) */
    eng_sched_cache_ops ops;      /* scheduler view of the cache */
    eng_sched *sched;             /* scheduler */
    sch_limits lim;               /* decoder limits */
    eng_constraint_vocab *cvocab; /* vocabulary of the constraint engine (NULL: constrained
                                   * turns are refused with E_UNSUPPORTED) */
    char cvocab_why[256];         /* why cvocab is NULL (config, build), for the refusal */
    int max_running;              /* scheduler.max_running: most choices of one turn */
    eng_sched_tenant_weight *tw;  /* scheduler.tenant_weights parsed (names point into tw_text) */
    int n_tw;                     /* entries of tw */
    char *tw_text;                /* a copy of the value, NULs at the separators */
    char *dscratch;               /* delivery-thread detokenizer buffer */
    size_t dscratch_cap;          /* its size (eng_tok_stream_cap) */
} wk_engine;

/* Topic names (worker.topic.*; the configuration's strings). */
typedef struct wk_topics {
    const char *turns;  /* ChatTurns in (subscribed) */
    const char *tokens; /* TokenChunks out (chunk producer) */
    const char *resp;   /* TurnResults out (transactional producer) */
    const char *dlq;    /* DeadLetters out (transactional producer) */
} wk_topics;

/* The conversation table and the turns in it (wk_loop.c; poll thread,
 * except the done list, which the delivery thread fills under mu). */
typedef struct wk_convs {
    wk_conv **tab;                  /* hash table of (partition, key) queues */
    size_t cap;                     /* buckets (power of two) */
    size_t n;                       /* conversations */
    wk_conv *idle_head, *idle_tail; /* idle conversations, least recent first */
    size_t n_idle;                  /* entries */
    int handoff;                    /* keep idle conversations' tokens for the Redis handoff */
    size_t hist_bytes;              /* bytes of every conversation's wk_history */
    size_t hist_max;                /* worker.history_mib in bytes (0: no history) */
    int64_t inflight;               /* consumed turns not yet in the batch */
    pthread_mutex_t mu;             /* guards the done list and wake */
    wk_turn *done_head, *done_tail; /* finished turns for the poll thread */
    rd_kafka_queue_t *wake;         /* the consumer's queue while the poll loop runs (else
                                     * NULL): a finished turn yields it, so the loop's
                                     * consumer_poll returns and takes the turn at once */
    uint64_t attempt_base;          /* per-process attempt id base */
    uint64_t attempt_ctr;           /* attempts made */
    struct wk_cancel_memo *memo;    /* CancelTurns for turns not seen yet (wk_cancel.c) */
} wk_convs;

/* The outputs of the next transaction and the input positions they
 * finish (poll thread; wk_batch.c holds the state logic). */
typedef struct wk_batch {
    wk_offsets *offs;    /* unfinished input offsets */
    uint32_t *gen;       /* generation per partition (bumped on assign/revoke) */
    bool *owned;         /* partition currently assigned */
    int32_t n_parts;     /* entries in gen/owned */
    wk_out *head, *tail; /* outputs of the next transaction, consumption order */
    int n;               /* entries */
    int64_t since_us;    /* when the oldest entry was added (or the last commit try) */
} wk_batch;

/* Backpressure (wk_loop.c; poll thread). */
typedef struct wk_pause {
    bool paused;          /* partitions paused (backpressure or shutdown) */
    int why;              /* WK_PAUSE_* reasons holding the pause (bit set) */
    int64_t kv_hi, kv_lo; /* KV pause / resume marks (per mille of the pool) */
} wk_pause;

/* PARLEY_TEST_ENGINE_HOLD=TRIGGER:PATH (tests only; wk_pause.c): from the
 * moment TRIGGER happens while PATH exists, the engine is held
 * (eng_sched_hold) until PATH is removed. */
enum {
    WK_HOLD_NONE,     /* no hook */
    WK_HOLD_KV_PAUSE, /* the worker pauses its partitions for KV memory */
    WK_HOLD_CHUNK     /* a non-final chunk of a turn is produced (or would be: not streaming) */
};
typedef struct wk_test_hold {
    int trigger;    /* WK_HOLD_*: what starts the hold */
    char path[512]; /* the hold lasts while this file exists */
    int held;       /* the engine is held (atomic: set by the trigger's thread) */
} wk_test_hold;

/* The open transaction and a producer rebuild in progress (wk_txn.c;
 * poll thread). */
typedef struct wk_txn_state {
    int recovering;        /* WK_REC_* stage of a producer rebuild; 0 = none */
    int abort_pending;     /* an abort failed retriably: retried before the next begin */
    int after_abort;       /* the rebuild in progress follows an aborted transaction
                            * (epoch bump), not a fatal error */
    int64_t begin_us;      /* when the open transaction began; 0 = none open */
    int64_t timeout_us;    /* the transactional producer's transaction.timeout.ms */
    int64_t rec_since_us;  /* when the current producer rebuild started */
    long test_fatal_at;    /* PARLEY_TEST_TXN_FATAL_AFTER: commits before an injected
                                 * fatal error on txp (0: never) */
    int test_fatal_landed; /* 1: inject after that transaction committed, 0: before */
    const char
        *test_rebuild_hold_file; /* PARLEY_TEST_REBUILD_HOLD_FILE: hold a rebuild while it exists */
    long test_hold_after;        /* PARLEY_TEST_TXN_HOLD=AFTER:MS: commits before the hold */
    int64_t test_hold_ms;        /* ... how long that transaction stays open (0: done/none) */
} wk_txn_state;

/* The two producers (made in wk_kafka.c). */
typedef struct wk_producers {
    rd_kafka_t *txp;        /* transactional producer (poll thread) */
    rd_kafka_t *chp;        /* idempotent chunk producer (chp_mu while running) */
    pthread_mutex_t chp_mu; /* guards chp: the delivery thread produces on it and
                                 * rebuilds it, the poll thread polls it */
    long test_fatal_at;     /* PARLEY_TEST_CHUNK_FATAL_AFTER: chunks before an injected
                                 * fatal error on chp (0: never; delivery thread) */
} wk_producers;

/* Why and whether the poll loop ends. */
typedef struct wk_halt {
    volatile sig_atomic_t stop_req, stop_fast; /* wk_worker_stop */
    int fatal;                      /* a fatal error happened (Kafka, or out of memory) */
    char fatal_msg[PL_ERR_LEN * 2]; /* its message: what (100 bytes) and why (400) */
    int refused_claim;              /* atomic: a client callback is writing refused_msg */
    int refused;                    /* atomic (release after refused_msg): the cluster refused us */
    char refused_msg[PL_ERR_LEN * 2]; /* why: kind and librdkafka's reason (300 bytes) */
} wk_halt;

/* What /metrics and the log lines report. */
typedef struct wk_metrics {
    wk_counters ctr;             /* counters */
    float ovh_ring[WK_OVH_RING]; /* latest per-turn overheads in ms (poll thread) */
    uint64_t ovh_next;           /* overheads recorded (next ring slot = ovh_next % WK_OVH_RING) */
    struct wk_http *http;        /* metrics endpoint (NULL = off) */
    struct wk_status *status;    /* status record publisher (wk_status.h; NULL = off) */
    pthread_mutex_t lag_mu;      /* guards lag / n_lag (poll thread writes, HTTP reads) */
    int64_t *lag;  /* per partition: high watermark - commit position; -1 unknown/not owned */
    int32_t n_lag; /* entries */
    int64_t loop_beat_us; /* start of the poll loop's latest pass (eng_sched_now_us; atomic;
                           * 0 = not running): /healthz fails when it is too old */
    int64_t stall_us;     /* worker.stall_ms in us: the silence that fails /healthz */
    int stall_logged;     /* the current stall was logged (HTTP thread only) */
} wk_metrics;

struct wk_worker {
    const cm_config *cfg; /* configuration (caller's) */
    char id[128];         /* worker id */
    wk_ns_from ns_from;   /* worker.namespace_from */
    const char *ns_fixed; /* worker.namespace (WK_NS_FIXED) */
    int chunk_tokens;     /* tokens per chunk */
    wk_topics topics;     /* topic names */
    wk_engine eng;        /* model, tokenizer, cache, scheduler */
    rd_kafka_t *cons;     /* consumer (group member; poll thread) */
    wk_producers prod;    /* transactional and chunk producers */
    wk_convs convs;       /* conversation table, turns in flight, done list */
    wk_batch batch;       /* next transaction's outputs, offsets, partition ownership */
    wk_pause pause;       /* backpressure */
    wk_test_hold thold;   /* PARLEY_TEST_ENGINE_HOLD */
    wk_txn_state txn;     /* open transaction, producer rebuild */
    wk_halt halt;         /* stop requests and fatal errors */
    wk_metrics met;       /* counters, overhead ring, lag, HTTP endpoint */
};

#define WK_PAUSE_INFLIGHT 1 /* worker.max_inflight reached */
#define WK_PAUSE_KV 2       /* KV memory above worker.pause_kv_pct */

#define WK_REC_PRODUCER 1  /* recovery: make a new transactional producer */
#define WK_REC_INIT 2      /* recovery: init_transactions until it succeeds */
#define WK_REC_RECONCILE 3 /* recovery: drop batch outputs below the committed offsets */

/* wk_log.c: structured log line on stderr: event + printf-style
 * key=value text. */
void wk_log(const char *level, const char *event, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The last header of r named `name` (names compare exactly, as
 * librdkafka's rd_kafka_header_get_last), or NULL. */
const wk_header *wk_record_header(const wk_record *r, const char *name);

/* Decode and validate record r (consumed at partition generation gen) into
 * a new turn (*turn) or, for bad input, a DeadLetter or an `expired`
 * TurnResult (*out).  A refused turn whose ids could be read gets both: the
 * DeadLetter, and its `error` TurnResult chained after it (*out)->next
 * (schemas/README.md 7), unless its key names another conversation
 * (E_KEY_MISMATCH).  Exactly one of *turn / *out is set on 0; < 0 (a
 * SCH_E_NOMEM code) only for out-of-memory, with neither set.  Reads the
 * worker's engine limits, id, namespace mode and topic names only.  hist
 * (may be NULL) is the conversation's remembered last turn: a message
 * turn's prompt splices its ids in where the rules allow. */
int wk_turn_from_record(struct wk_worker *w, const wk_record *r, uint32_t gen,
                        const wk_history *hist, wk_turn **turn, wk_out **out);

/* wk_gen.c: submit a prepared turn to the scheduler.  On failure the turn
 * gets an error TurnResult and is queued on the done list as if it had
 * run. */
void wk_turn_submit(wk_turn *t);

/* Build the output record of a finished turn (takes turn->result); NULL
 * when it has none (encoding failed) or out of memory. */
wk_out *wk_turn_take_out(wk_turn *t);

/* wk_reply.c: the logprob entries of tokens [from, to) of a choice as
 * the wire writes them (token texts from the tokenizer, valid UTF-8 with
 * U+FFFD for a partial character and the raw bytes beside; -inf as
 * -9999), in storage the set owns.  0, or -1 out of memory (set empty). */
typedef struct wk_lp_set {
    sch_logprob *lp;   /* to - from entries (NULL when empty) */
    sch_logprob *tops; /* their alternatives */
    char *arena;       /* their texts and bytes */
} wk_lp_set;
int wk_lp_set_build(const struct wk_worker *w, const wk_choice *c, int from, int to,
                    wk_lp_set *out);
void wk_lp_set_free(wk_lp_set *s);

/* wk_reply.c: encode s (JSON when json, else msgpack) into out.  A reply
 * over max_bytes becomes an E_INTERNAL error result (sch_result_fail: no
 * choices, logprobs or tool calls), and one the schema refuses (an engine
 * message it cannot carry) gets a fixed message instead; s is changed to
 * what was written.  0, or the sch_err of the last encode (err says). */
int wk_result_encode(sch_result *s, bool json, size_t max_bytes, sch_buf *out, char *err,
                     size_t errlen);

/* wk_turn.c: free a turn (NULL is fine). */
void wk_turn_free(wk_turn *t);

/* wk_turn.c: the DeadLetter of rec (code, reason; t's ids when given). */
wk_out *wk_dead(wk_worker *w, const wk_record *rec, uint32_t gen, const char *tp, int code,
                const char *reason, const sch_turn *t);

/* wk_gen.c: end a turn that never reached the engine as cancelled: its
 * TurnResult (finish_reason cancelled, nothing generated) and, streaming,
 * its last chunk; the caller takes the output (wk_turn_take_out). */
void wk_turn_cancel_unrun(wk_turn *t);

/*
 * wk_cancel.c: CancelTurn records (spec 1.4) on the turns topic (poll
 * thread).  wk_cancel_record_is: the record's content-type names a cancel.
 * wk_cancel_apply: decode it and stop the turn it names in c (the record's
 * conversation queue, or NULL): a running turn is cancelled in the engine
 * (its result then says cancelled, wk_gen.c), a queued one is answered at
 * once; a cancel for no such turn is remembered (bounded) for a turn still
 * to come.  The cancel's own offset is finished here (no output) unless it
 * is undecodable, when *out is its DeadLetter.  Returns 0 or SCH_E_NOMEM.
 * wk_cancel_take: when a remembered cancel names t (just consumed, not
 * queued yet), answer t cancelled, put its result in the batch, free it and
 * return true (the entry is used up); else false.  wk_cancel_free: forget
 * every remembered cancel.
 */
bool wk_cancel_record_is(const wk_record *rec);
int wk_cancel_apply(wk_worker *w, const wk_record *rec, uint32_t gen, wk_conv *c, wk_out **out);
bool wk_cancel_take(wk_worker *w, wk_turn *t);
void wk_cancel_free(wk_worker *w);

/* wk_http.c: metrics endpoint on addr ("host:port", ":port" or "port";
 * no host = 127.0.0.1): a thread serving /metrics (Prometheus text),
 * /healthz and /readyz.  Returns 0, or WK_EINVAL (a message naming
 * worker.http) / WK_ENOMEM. */
int wk_http_start(struct wk_worker *w, const char *addr, struct wk_http **out, char *err,
                  size_t errlen);
void wk_http_stop(struct wk_http *h);

/* wk_kafka.c: the three Kafka handles (consumer subscribed, transactional
 * producer initialised), every wait within the start-up deadline
 * (cm_startup.h; a missing topic is logged with the command that creates
 * it, and start-up goes on).  Returns 0, WK_EKAFKA (a handle that cannot be
 * made, a kafka.* property librdkafka refuses, init_transactions or
 * subscribe failing), WK_EREFUSED (the cluster refuses the worker) or
 * WK_ETIMEDOUT (the deadline passed), with a message. */
int wk_kafka_setup(struct wk_worker *w, char *err, size_t errlen);
/* Log that topic does not exist (reason: Kafka's words), with the
 * `parley topics` command that creates the worker's topics.  Any thread. */
void wk_kafka_topic_missing(const struct wk_worker *w, const char *topic, const char *reason);
/* A new transactional producer (transactional.id parley-<worker id>), not
 * yet initialised.  Returns 0 or WK_EKAFKA with a message. */
int wk_kafka_txp_new(struct wk_worker *w, rd_kafka_t **out, char *err, size_t errlen);
/* A new idempotent chunk producer.  Returns 0 or WK_EKAFKA with a message. */
int wk_kafka_chp_new(struct wk_worker *w, rd_kafka_t **out, char *err, size_t errlen);
/* Note that the cluster refuses the worker (authentication, TLS or
 * authorization error code e; other codes are ignored): the first call
 * writes w->halt.refused_msg and sets w->halt.refused, logs one
 * kafka_refused line.  Any thread. */
void wk_kafka_note_refusal(struct wk_worker *w, rd_kafka_resp_err_t e, const char *reason);
/* The Kafka boundary of the turn path: fill *r from m (borrowing m's
 * bytes).  Headers go to buf[cap] when they fit, else to a malloc'd array
 * returned in *heap (the caller frees it; NULL when buf sufficed).
 * Returns 0, or -1 out of memory. */
int wk_record_from_kafka(const rd_kafka_message_t *m, wk_record *r, wk_header *buf, size_t cap,
                         wk_header **heap);

/* wk_txn.c: produce the ready batch entries and the commit positions in
 * one transaction.  Returns 0 committed (or nothing to do, or a rebuild
 * in progress), -1 not committed: the batch is kept, for the next
 * transaction or for the reconcile of the producer rebuild a fatal error
 * started (w->halt.fatal set instead when fenced). */
int wk_txn_commit(struct wk_worker *w);
/* One step of a producer rebuild (w->txn.recovering != 0; the stages are
 * WK_REC_*, wk_txn_rec_next); never blocks more than a few seconds. */
void wk_txn_recover_step(struct wk_worker *w);

/* wk_batch.c: the state logic of exactly-once, no Kafka calls (unit
 * tested by tests/worker/test_wk_batch.c).  Poll thread only. */

/* Make room for partition p in gen/owned.  0, or -1 (p out of range or
 * out of memory). */
int wk_batch_parts_grow(wk_batch *b, int32_t p);
/* Partition p assigned: owned, a new generation, no offsets tracked.  0 or
 * -1 as wk_batch_parts_grow. */
int wk_batch_assign(wk_batch *b, int32_t p);
/* Partition p revoked or lost: not owned, a new generation (outcomes of
 * the old one are stale), its offsets forgotten. */
void wk_batch_revoke(wk_batch *b, int32_t p);
/* true when p is owned and still at generation gen. */
bool wk_batch_current(const wk_batch *b, int32_t p, uint32_t gen);

#define WK_CONSUME_NOT_OURS (-1) /* the partition is not assigned: ignore the record */
#define WK_CONSUME_SKIP (-2)     /* offset not above the last one tracked: ignore it */
/* A record of p at offset was consumed: track it as unfinished and give
 * the partition's generation in *gen.  0 or a WK_CONSUME_* code. */
int wk_batch_consume(wk_batch *b, int32_t p, int64_t offset, uint32_t *gen);
/* Offset a transaction commits for p: its lowest unfinished offset (or
 * last + 1); -1 when p is not owned or nothing was consumed. */
int64_t wk_batch_commit_position(const wk_batch *b, int32_t p);

/* Add an output and the outputs chained after it (o->next; all of one
 * input offset, which is finished now), after every output of an earlier
 * offset of the same partition: a transaction produces a partition's
 * outputs in input order, so a conversation's results stay in turn order
 * even when a later turn finished first (a queued turn answered
 * `cancelled` at once while the turn ahead of it still runs).  now_us
 * starts the batch timer when the batch was empty. */
void wk_batch_add(wk_batch *b, wk_out *o, int64_t now_us);
/* true when the batch should be committed now: records waiting and
 * max_records reached or interval_us passed since since_us. */
bool wk_batch_due(const wk_batch *b, int64_t now_us, int max_records, int64_t interval_us);
/* true when the batch should be committed before wk_batch_due says so: it
 * holds a ready output (wk_batch_mark_ready, which this runs) and no other
 * turn is expected to finish within horizon_us (next_finish_us, the
 * scheduler's eng_sched_next_finish_us, is further than now_us +
 * horizon_us), so waiting would add latency and nothing to the
 * transaction.  Never with horizon_us <= 0 (worker.txn_horizon_ms 0: off). */
bool wk_batch_commit_early(wk_batch *b, int64_t now_us, int64_t horizon_us, int64_t next_finish_us);
/* Mark ready the outputs below their partition's commit position (only
 * those may be committed: an output above an unfinished record waits, so
 * a committed output is never redone by the next owner).  Returns how
 * many are ready. */
int wk_batch_mark_ready(wk_batch *b);
/* Remove and free every output for which drop(ctx, o) != 0, keeping the
 * order of the rest.  Returns how many were removed. */
typedef int (*wk_batch_drop_fn)(void *ctx, const wk_out *o);
int wk_batch_drop_if(wk_batch *b, wk_batch_drop_fn drop, void *ctx);
/* After a producer rebuild: remove the outputs already visible, those
 * below committed[partition] (the group's committed offsets, -1 unknown,
 * n entries), counting them into *n_res / *n_dlq.  Returns how many. */
int wk_batch_reconcile(wk_batch *b, const int64_t *committed, int32_t n, int *n_res, int *n_dlq);
/* Remove the outputs of partitions not ours at their generation. */
int wk_batch_drop_stale(wk_batch *b);
/* Free the outputs, the offsets and the partition arrays. */
void wk_batch_free(wk_batch *b);

/* wk_txn_state.c: a fatal producer error stops the worker (rather than starting a
 * rebuild) only when it is a fence of a transaction younger than
 * transaction.timeout.ms: another instance took the transactional.id.  A
 * fence of an older one is the coordinator's own timeout abort. */
bool wk_txn_fence_stops(int fenced, int64_t txn_age_us, int64_t txn_timeout_us);
/* Start a producer rebuild at now_us: stage WK_REC_PRODUCER, no open
 * transaction, no abort pending. */
void wk_txn_state_rebuild(wk_txn_state *t, int64_t now_us);
/* Outcome of one step of a producer rebuild. */
typedef enum wk_step {
    WK_STEP_OK = 0,  /* the stage's work is done */
    WK_STEP_WAIT,    /* not yet (delay, broker away): same stage next pass */
    WK_STEP_RESTART, /* the new producer failed fatally: make another */
    WK_STEP_FATAL    /* fenced, or no producer can be made: stop the worker */
} wk_step;
/* The stage after `stage` given the outcome of its step: PRODUCER -> INIT
 * -> RECONCILE -> 0 (done) on OK; the same on WAIT; PRODUCER on RESTART;
 * -1 (stop the worker) on FATAL.  A stage that is not WK_REC_* is
 * returned unchanged. */
int wk_txn_rec_next(int stage, wk_step outcome);

/* wk_loop.c: drop the turns and batch entries of partitions that are not
 * ours at their current generation (all turns when all != 0); write idle
 * conversations' KV to Redis first when handoff != 0. */
void wk_drop_stale(struct wk_worker *w, int all, int handoff);
/* wk_pause.c: pause (pause != 0) or resume every assigned partition. */
void wk_pause_all(struct wk_worker *w, int pause);
/* wk_pause.c: backpressure: pause every partition while in-flight turns or
 * KV memory are above their marks, resume when both are back below the low
 * marks (half of max_inflight; worker.resume_kv_pct); not while a producer
 * rebuild holds the pause. */
void wk_backpressure(struct wk_worker *w, int64_t max_inflight);
/* wk_pause.c: a producer rebuild starts (on: pause everything) or ends
 * (resume, unless backpressure still holds the partitions). */
void wk_pause_rebuild(struct wk_worker *w, int on);
/* wk_pause.c, PARLEY_TEST_ENGINE_HOLD: `trigger` happened (any thread;
 * n_toks: the tokens of the chunk's choice, compared with a number the
 * hold file may hold);
 * wk_test_hold_parse reads the variable at start (0, or -1 when malformed);
 * wk_test_hold_poll ends the hold once the file is gone (poll thread). */
int wk_test_hold_parse(struct wk_worker *w, const char *spec);
void wk_test_hold_trigger(struct wk_worker *w, int trigger, int n_toks);
void wk_test_hold_poll(struct wk_worker *w);
/* Free every conversation and its queued turns (wk_worker_free). */
void wk_conv_free_all(struct wk_worker *w);
/* wk_turn.c: free an output record (NULL is fine). */
void wk_out_free(wk_out *o);

#endif
