/*
 * sched_util.h -- helpers of the scheduler tests: a temporary synthetic
 * model (written with `parley mkmodel`'s code at test time), and a
 * collector that records what the scheduler's callbacks deliver so a test
 * can wait for completions and compare tokens and logits.
 */
#ifndef SCHED_UTIL_H
#define SCHED_UTIL_H

#include <pthread.h>

#include "eng_model.h"
#include "eng_sched.h"

#define SU_MAX_TOK 512 /* tokens recorded per request */

/* What one request delivered. */
typedef struct su_req {
    struct su_coll *coll;           /* owning collector */
    uint64_t id;                    /* scheduler id */
    int32_t tokens[SU_MAX_TOK];     /* on_token tokens in order */
    int n_tokens;                   /* tokens received */
    int order_ok;                   /* every index arrived in order */
    float *logits;                  /* n_vocab * SU_MAX_TOK floats when logits are kept */
    int done;                       /* on_done called (count) */
    eng_sched_result res;           /* copy of the result (tokens / error not kept) */
    int32_t res_tokens[SU_MAX_TOK]; /* result tokens */
    int tokens_after_done;          /* on_token after on_done (must stay 0) */
} su_req;

/* A set of requests and the lock the callbacks take. */
typedef struct su_coll {
    pthread_mutex_t mu; /* guards everything */
    pthread_cond_t cv;  /* signalled on every completion */
    su_req *reqs;       /* n entries */
    int n;              /* requests */
    int n_vocab;        /* logits row size (0: logits not kept) */
    int n_done;         /* completions */
} su_coll;

/* Write preset `preset` (window > 0 overrides its local window) into a
 * fresh temp dir and load it (int8, threads, block 16).  Returns the model
 * or NULL; the file is removed after loading. */
eng_model *su_model(const char *preset, int window, int threads);

void su_coll_init(su_coll *c, int n, int n_vocab);
void su_coll_free(su_coll *c);
/* Fill r with request i of c: prompt, greedy, max_tokens, callbacks. */
void su_request(su_coll *c, int i, eng_sched_request *r, const int32_t *prompt, int n_prompt,
                int max_tokens);
/* Wait until n completions arrived (timeout_ms); returns 0 or -1. */
int su_wait(su_coll *c, int n, int timeout_ms);
/* Deterministic pseudo-random tokens in [1, n_vocab). */
void su_tokens(int32_t *t, int n, int n_vocab, uint64_t seed);

/* Submit one request (prompt, max_tokens, namespace ns) to s and wait for
 * it (30 s); *out gets its record (tokens, result; no logits).  Returns 0
 * or the submit/wait error. */
int su_run_one(eng_sched *s, const int32_t *prompt, int n, int max_tokens, const char *ns,
               su_req *out);

#endif
