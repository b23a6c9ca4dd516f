/*
 * constraint_int.h -- internals shared by constraint.c (vocabulary,
 * matchers, synchronous operations) and constraint_pool.c (mask threads,
 * time budget).  Only built with llguidance (PARLEY_HAVE_LLGUIDANCE).
 *
 * A constraint's job state lives under its pool's mutex: IDLE (owned by
 * the caller), QUEUED (in the pool's FIFO), RUNNING (a pool thread owns
 * the matcher), DONE (results ready; the caller takes the constraint back
 * in eng_constraint_wait).  `busy` is set by start and cleared by wait and
 * is the caller's view (no lock: only the owner touches it).
 */
#ifndef CONSTRAINT_INT_H
#define CONSTRAINT_INT_H

#include <pthread.h>
#include <stdint.h>
#include <time.h>

#include <llguidance.h>

#include "eng_constraint.h"
#include "pl_err.h"

enum { CONS_IDLE = 0, CONS_QUEUED = 1, CONS_RUNNING = 2, CONS_DONE = 3 };

struct eng_constraint_vocab {
    LlgTokenizer *tok; /* llguidance's tokenizer (trie of token bytes) */
    int n_vocab;       /* tokens it covers (masks' bits) */
    size_t words;      /* 32-bit words per mask */
    int32_t *special;  /* control / unknown / unused ids that do not end generation */
    int n_special;     /* their count: cleared from every mask (cons_advance) */
    int32_t eog[64];   /* end-of-generation ids: cleared where the matcher is not accepting */
    int n_eog;         /* their count */
};

struct eng_constraint {
    const eng_constraint_vocab *v; /* vocabulary (shared) */
    eng_constraint_kind kind;      /* what it was compiled from */
    LlgMatcher *m;                 /* the matcher */
    LlgCancellationHandle *cancel; /* cancels a running computation (time budget) */
    uint32_t *masks;               /* cap_masks masks of v->words words */
    int cap_masks;                 /* masks allocated */
    const uint32_t *mptr[ENG_CONSTRAINT_MAX_AHEAD + 1]; /* results of the last wait */
    int n_masks;                                        /* masks valid in mptr */
    int dead;                  /* 1 after a failure: every operation refuses */
    int dead_code;             /* the failure's code */
    char dead_msg[PL_ERR_LEN]; /* and message */
    int busy;                  /* started and not yet waited for (owner's view) */
    int64_t budget_us;         /* CPU time per mask (<= 0: none) */
    /* the job, under pool->mu */
    struct eng_constraint_pool *pool;        /* pool of the job in flight */
    struct eng_constraint *qnext;            /* FIFO link */
    int state;                               /* CONS_* */
    int32_t ahead[ENG_CONSTRAINT_MAX_AHEAD]; /* draft to look ahead over */
    int n_ahead;                             /* its length (cut at a refused token) */
    int consumed;                            /* look-ahead tokens the matcher has taken */
    int32_t pend[ENG_CONSTRAINT_MAX_AHEAD];  /* a look-ahead given while the job runs */
    int n_pend;                              /* its length (0: none) */
    clockid_t run_clock;                     /* CPU clock of the thread running it */
    int64_t run_cpu0_us;                     /* that clock when the current mask started */
    int cancelled;                           /* a waiter cancelled it for the budget */
    int job_rc;                              /* 0 or ENG_CONSTRAINT_E* */
    char job_msg[PL_ERR_LEN];                /* message when job_rc != 0 */
};

struct eng_constraint_pool {
    pthread_mutex_t mu;                 /* guards the queue, job states, stats */
    pthread_cond_t work_cv;             /* a job was queued, or stop */
    pthread_cond_t done_cv;             /* a job finished */
    struct eng_constraint *head, *tail; /* FIFO of queued jobs */
    int stop;                           /* threads exit */
    int n_threads;                      /* threads started */
    pthread_t *th;                      /* the threads */
    eng_constraint_pool_stats st;       /* counters */
};


/* Advance c's look-ahead job (the caller owns the matcher: a pool thread
 * or the owner): compute the mask of the current look-ahead state when it
 * is unknown (c->n_masks == c->consumed), step over the next look-ahead
 * token when that mask allows it (c->consumed++), until the look-ahead is
 * used up or a token is refused (which ends it: c->n_ahead = consumed).
 * The CPU clock ck measures each mask; `mark` (may be NULL) gets the
 * clock at each mask's start (the pool records it for waiters); the CPU
 * time in all / of the slowest mask and the masks computed are added to
 * the counters.  Returns 0 or an ENG_CONSTRAINT_E* code with its message;
 * the constraint is not marked dead here. */
int cons_advance(eng_constraint *c, int64_t budget_us, clockid_t ck,
                 void (*mark)(eng_constraint *, int64_t), int64_t *cpu_total_us,
                 int64_t *cpu_max_us, int *n_done, char *msg, size_t msglen);

/* Back to the state before the look-ahead (c->consumed tokens).  0 or
 * ENG_CONSTRAINT_EMATCH. */
int cons_rollback(eng_constraint *c, char *msg, size_t msglen);

/* Mark c dead with code and message (idempotent: the first failure stays). */
void cons_kill(eng_constraint *c, int code, const char *msg);

#endif
