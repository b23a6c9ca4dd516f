/*
 * constraint_pool.c -- mask threads and the per-mask time budget
 * (eng_constraint.h "Threads", "Time budget").
 *
 * A FIFO of started constraints under one mutex; each thread pops one,
 * advances it with cons_advance (recording, before each mask, its own CPU
 * clock and that clock's value so a waiter can read how much CPU the
 * running mask has used) -- over a look-ahead handed over meanwhile too
 * (eng_constraint_ahead) -- and marks it done; the owner rolls the matcher
 * back when it takes the job in eng_constraint_wait.  A waiter blocks on the
 * pool's done condition in slices no longer than the budget left (at most
 * 5 ms), and cancels a running mask whose CPU time passed the budget
 * (llg_cancel: the computation stops at its next check and the matcher
 * stays cancelled).  Freeing a constraint whose job is queued unlinks it;
 * one whose job runs is cancelled and waited for.
 */
#include "eng_constraint.h"

#ifdef PARLEY_HAVE_LLGUIDANCE

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "constraint_int.h"
#include "pl_time.h"

/* Recorded under the pool's lock: the clock and start of the running mask. */
static void pool_mark(eng_constraint *c, int64_t cpu0) {
    eng_constraint_pool *p = c->pool;
    pthread_mutex_lock(&p->mu);
    c->run_cpu0_us = cpu0;
    pthread_mutex_unlock(&p->mu);
}

static void *pool_main(void *arg) {
    eng_constraint_pool *p = arg;
    clockid_t ck;
    if (pthread_getcpuclockid(pthread_self(), &ck) != 0) ck = CLOCK_THREAD_CPUTIME_ID;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stop) pthread_cond_wait(&p->work_cv, &p->mu);
        if (!p->head) break; /* stop and nothing queued */
        eng_constraint *c = p->head;
        p->head = c->qnext;
        if (!p->head) p->tail = NULL;
        c->qnext = NULL;
        c->state = CONS_RUNNING;
        c->run_clock = ck;
        c->run_cpu0_us = pl_clock_us(ck);
        int64_t cpu = 0, cpu_max = 0;
        int n_done = 0, rc;
        char msg[PL_ERR_LEN] = "";
        for (;;) {
            pthread_mutex_unlock(&p->mu);
            rc = cons_advance(c, c->budget_us, ck, pool_mark, &cpu, &cpu_max, &n_done, msg,
                              sizeof msg);
            pthread_mutex_lock(&p->mu);
            /* a look-ahead that arrived while this ran continues the job */
            if (rc || !c->n_pend || c->n_ahead) break;
            memcpy(c->ahead, c->pend, (size_t)c->n_pend * sizeof *c->pend);
            c->n_ahead = c->n_pend;
            c->n_pend = 0;
        }
        c->n_pend = 0;
        p->st.masks += (uint64_t)n_done;
        p->st.mask_cpu_ms += (double)cpu / 1000.0;
        if ((double)cpu_max / 1000.0 > p->st.mask_cpu_max_ms)
            p->st.mask_cpu_max_ms = (double)cpu_max / 1000.0;
        if (rc == ENG_CONSTRAINT_EBUDGET || (rc && c->cancelled)) p->st.over_budget++;
        c->job_rc = rc;
        snprintf(c->job_msg, sizeof c->job_msg, "%s", msg);
        c->state = CONS_DONE;
        pthread_cond_broadcast(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int eng_constraint_pool_new(int n_threads, eng_constraint_pool **out, char *err, size_t errlen) {
    if (out) *out = NULL;
    if (!out || n_threads < 1 || n_threads > 64)
        return pl_errf(err, errlen, ENG_CONSTRAINT_EINVAL,
                       "constraint: mask threads %d outside 1..64", n_threads);
    eng_constraint_pool *p = calloc(1, sizeof *p);
    if (!p) return pl_errf(err, errlen, ENG_CONSTRAINT_ENOMEM, "constraint: out of memory");
    p->th = calloc((size_t)n_threads, sizeof *p->th);
    if (!p->th) {
        free(p);
        return pl_errf(err, errlen, ENG_CONSTRAINT_ENOMEM, "constraint: out of memory");
    }
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p->done_cv, &ca);
    pthread_condattr_destroy(&ca);
    for (int i = 0; i < n_threads; i++) {
        if (pthread_create(&p->th[i], NULL, pool_main, p) != 0) {
            eng_constraint_pool_free(p);
            return pl_errf(err, errlen, ENG_CONSTRAINT_EINVAL,
                           "constraint: cannot start mask thread %d", i);
        }
        p->n_threads++;
    }
    *out = p;
    return 0;
}

void eng_constraint_pool_free(eng_constraint_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 0; i < p->n_threads; i++) pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
    free(p->th);
    free(p);
}

void eng_constraint_pool_stats_get(eng_constraint_pool *p, eng_constraint_pool_stats *out) {
    memset(out, 0, sizeof *out);
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    *out = p->st;
    pthread_mutex_unlock(&p->mu);
}

/* Queue c's job (under p->mu). */
static void pool_queue(eng_constraint_pool *p, eng_constraint *c) {
    c->state = CONS_QUEUED;
    c->qnext = NULL;
    if (p->tail) p->tail->qnext = c;
    else p->head = c;
    p->tail = c;
    pthread_cond_signal(&p->work_cv);
}

int eng_constraint_start(eng_constraint *c, eng_constraint_pool *p, const int32_t *ahead,
                         int n_ahead, int64_t budget_us) {
    if (!c || !p || c->busy || n_ahead < 0 || n_ahead > ENG_CONSTRAINT_MAX_AHEAD ||
        (n_ahead && !ahead))
        return ENG_CONSTRAINT_EINVAL;
    c->budget_us = budget_us;
    c->busy = 1;
    if (c->dead) { /* nothing to compute: wait reports the failure */
        c->pool = NULL;
        return 0;
    }
    /* a known mask of the current state is kept (n_masks 1), the rest of
     * an earlier look-ahead is stale */
    if (c->n_masks > 1) c->n_masks = 1;
    if (n_ahead) memcpy(c->ahead, ahead, (size_t)n_ahead * sizeof *ahead);
    c->n_ahead = n_ahead;
    c->consumed = 0;
    pthread_mutex_lock(&p->mu);
    c->pool = p;
    c->cancelled = 0;
    c->job_rc = 0;
    c->job_msg[0] = 0;
    c->n_pend = 0;
    pool_queue(p, c);
    pthread_mutex_unlock(&p->mu);
    return 0;
}

int eng_constraint_ahead(eng_constraint *c, eng_constraint_pool *p, const int32_t *ahead,
                         int n_ahead, int64_t budget_us) {
    if (!c || !p || n_ahead < 1 || n_ahead > ENG_CONSTRAINT_MAX_AHEAD || !ahead)
        return ENG_CONSTRAINT_EINVAL;
    if (!c->busy) return eng_constraint_start(c, p, ahead, n_ahead, budget_us);
    if (!c->pool) return 0; /* dead: wait reports it */
    if (c->pool != p) return ENG_CONSTRAINT_EINVAL;
    int rc = 0;
    pthread_mutex_lock(&p->mu);
    if (c->n_ahead || c->n_pend || c->consumed) {
        rc = ENG_CONSTRAINT_EINVAL; /* one look-ahead per job */
    } else if (c->state == CONS_QUEUED) {
        memcpy(c->ahead, ahead, (size_t)n_ahead * sizeof *ahead);
        c->n_ahead = n_ahead;
    } else if (c->state == CONS_RUNNING) {
        memcpy(c->pend, ahead, (size_t)n_ahead * sizeof *ahead);
        c->n_pend = n_ahead;
    } else if (c->state == CONS_DONE && c->job_rc == 0) { /* run again from the known mask */
        memcpy(c->ahead, ahead, (size_t)n_ahead * sizeof *ahead);
        c->n_ahead = n_ahead;
        pool_queue(p, c);
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

/* Take c's job back from the pool (under its lock): wait until done,
 * cancelling a running mask that passed the budget (cancel_now: at once). */
static void pool_join(eng_constraint *c, int cancel_now) {
    eng_constraint_pool *p = c->pool;
    pthread_mutex_lock(&p->mu);
    if (c->state == CONS_QUEUED && cancel_now) { /* never started: unlink */
        eng_constraint **pp = &p->head;
        eng_constraint *prev = NULL;
        while (*pp && *pp != c) prev = *pp, pp = &(*pp)->qnext;
        if (*pp) {
            *pp = c->qnext;
            if (p->tail == c) p->tail = prev;
        }
        c->state = CONS_DONE;
        c->job_rc = ENG_CONSTRAINT_EINVAL;
        snprintf(c->job_msg, sizeof c->job_msg, "constraint: cancelled");
    }
    while (c->state != CONS_DONE) {
        int64_t slice = 5000;
        if (c->state == CONS_RUNNING && !c->cancelled && (cancel_now || c->budget_us > 0)) {
            int64_t used = pl_clock_us(c->run_clock) - c->run_cpu0_us;
            if (cancel_now || used > c->budget_us) {
                c->cancelled = 1;
                llg_cancel(c->cancel);
            } else if (c->budget_us - used < slice) {
                slice = c->budget_us - used + 100;
            }
        }
        int64_t until = pl_mono_us() + slice;
        struct timespec ts = {until / 1000000, (long)(until % 1000000) * 1000};
        pthread_cond_timedwait(&p->done_cv, &p->mu, &ts);
    }
    c->state = CONS_IDLE;
    pthread_mutex_unlock(&p->mu);
}

void eng_constraint_cancel_job(eng_constraint *c) {
    if (c->pool) pool_join(c, 1);
    c->pool = NULL;
    c->busy = 0;
}

int eng_constraint_wait(eng_constraint *c, const uint32_t *const **masks, int *n_masks,
                        int64_t *waited_us, char *err, size_t errlen) {
    if (waited_us) *waited_us = 0;
    if (!c) return pl_errf(err, errlen, ENG_CONSTRAINT_EINVAL, "constraint: missing");
    int64_t t0 = pl_mono_us();
    int rc = 0;
    char msg[PL_ERR_LEN] = "";
    if (c->busy && c->pool) {
        pool_join(c, 0);
        rc = c->job_rc;
        if (rc && c->cancelled) {
            rc = ENG_CONSTRAINT_EBUDGET;
            snprintf(msg, sizeof msg,
                     "constraint: computing a token mask took more than the time budget of %.1f "
                     "ms of CPU",
                     (double)c->budget_us / 1000.0);
        } else if (rc) {
            snprintf(msg, sizeof msg, "%s", c->job_msg);
        }
        c->pool = NULL;
        if (!rc) rc = cons_rollback(c, msg, sizeof msg);
    } else if (!c->dead && c->n_masks < 1) { /* nothing started: compute here */
        int64_t cpu = 0, cpu_max = 0;
        int n = 0;
        c->n_ahead = c->consumed = 0;
        rc = cons_advance(c, c->budget_us, CLOCK_THREAD_CPUTIME_ID, NULL, &cpu, &cpu_max, &n, msg,
                          sizeof msg);
    }
    c->busy = 0;
    if (waited_us) *waited_us = pl_mono_us() - t0;
    if (rc) cons_kill(c, rc, msg);
    if (c->dead) {
        c->n_masks = 0;
        return pl_errf(err, errlen, c->dead_code, "%s", c->dead_msg);
    }
    *masks = c->mptr;
    *n_masks = c->n_masks;
    return 0;
}

#endif
