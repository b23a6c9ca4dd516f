/*
 * sched_rec.h -- a recorder of what the scheduler delivers for requests
 * with several choices, log-probabilities and constraints (the tests of
 * issue 33): every token event per choice with its logprobs (and logits
 * when asked), and the completion with every choice's result.
 */
#ifndef SCHED_REC_H
#define SCHED_REC_H

#include <pthread.h>

#include "eng_sched.h"

#define SR_MAXC 16  /* choices recorded */
#define SR_MAXT 160 /* tokens recorded per choice */

/* One delivered token. */
typedef struct sr_tok {
    int32_t tok;                             /* token id */
    int has_lp;                              /* event carried logprobs */
    float lp;                                /* chosen token's logprob */
    int n_top;                               /* alternatives */
    eng_sampler_lp top[ENG_SAMPLER_TOP_MAX]; /* alternatives, best first */
} sr_tok;

/* What one request delivered. */
typedef struct sr_req {
    uint64_t id;                   /* scheduler id */
    int n_vocab;                   /* logits row size when logits are kept (0: not) */
    int n[SR_MAXC];                /* tokens per choice */
    sr_tok t[SR_MAXC][SR_MAXT];    /* tokens per choice in order */
    float *logits[SR_MAXC];        /* SR_MAXT rows per choice when kept */
    int order_ok;                  /* every index arrived in order per choice */
    int bad_choice;                /* a token event named a choice out of range */
    int done;                      /* on_done calls */
    int tokens_after_done;         /* token events after on_done (must stay 0) */
    eng_sched_result res;          /* the result (pointers cleared) */
    eng_sched_finish fin[SR_MAXC]; /* per choice: finish */
    int rn[SR_MAXC];               /* per choice: result tokens */
    int32_t rt[SR_MAXC][SR_MAXT];  /* per choice: result tokens */
    char err[SR_MAXC][256];        /* per choice: error text */
    /* stop choice `stop_choice` after it delivered `stop_after` tokens
     * (eng_sched_stop_choice from the callback; -1: never) */
    eng_sched *stop_s;
    int stop_choice, stop_after;
} sr_req;

/* Reset r; keep logits rows of n_vocab floats when n_vocab > 0. */
void sr_init(sr_req *r, int n_vocab);
void sr_free(sr_req *r);
/* Point q's callbacks at r (the rest of q is the caller's). */
void sr_bind(sr_req *r, eng_sched_request *q);
/* Wait until r's completion arrived (timeout_ms); 0 or -1. */
int sr_wait(sr_req *r, int timeout_ms);

#endif
