/*
 * kern_pool.c -- persistent worker threads for the kernels (kern_pool.h).
 *
 * A job is published through one 64-bit atomic "claim word": the job's
 * generation in the high 32 bits and the next unclaimed task index in the
 * low 32.  A thread claims a task with a compare-and-swap that succeeds only
 * while the word still carries the generation it joined, so a worker that
 * wakes late -- after the job it was woken for has finished, or even after
 * the next one started -- can never run a task of a job it did not read
 * the fields of.  Between jobs the caller parks the word at "closed"
 * (index KERN_POOL_CLOSED) before rewriting the job fields.
 *
 * Completion is counted in tasks, not workers: every finished task adds
 * one to `done`, and the caller returns when done == n_tasks.  So the
 * caller never waits for a worker that claimed nothing (on an oversubscribed
 * machine a worker may not be scheduled at all during a short job; the
 * caller then simply runs every task itself).
 *
 * Waiting spins briefly before sleeping.  A decode step runs about a hundred
 * small jobs back to back (every GEMM, attention, ...); waking a sleeping
 * thread through the kernel costs tens of microseconds each time, so both
 * the workers (for the next job) and the caller (for the last task) first
 * poll the atomics for up to KERN_POOL_SPIN_NS, then sleep on a condition
 * variable.  The mutex orders every sleep against the state change that
 * ends it (published under the mutex), so no wake-up is lost.
 */
#include "kern_pool.h"
#include "kern_isa.h"
#include "pl_time.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KERN_POOL_PAUSE() _mm_pause()
#else
#define KERN_POOL_PAUSE() ((void)0)
#endif

#define KERN_POOL_SPIN_NS 200000L    /* poll this long before sleeping */
#define KERN_POOL_CLOSED 0xffffffffu /* claim-word index while no job is open */
#define KERN_POOL_GEN(w) ((uint32_t)((w) >> 32))
#define KERN_POOL_IDX(w) ((uint32_t)(w))

struct kern_pool {
    int size;               /* threads including the caller */
    pthread_t *threads;     /* size-1 workers */
    pthread_mutex_t run_mu; /* serialises kern_pool_run calls (held for a whole job) */
    pthread_mutex_t mu;     /* orders sleeps against job starts / completion / stop */
    pthread_cond_t cv_work; /* broadcast when a job starts or on shutdown */
    pthread_cond_t cv_done; /* signalled when the last task of a job finishes */
    _Atomic uint64_t claim; /* generation << 32 | next task index (KERN_POOL_CLOSED between jobs) */
    atomic_int done;        /* tasks of the current job finished */
    atomic_int stop;        /* shutdown requested (set under mu) */
    /* The current job, written (release) under run_mu while the claim word
     * is closed and read (acquire) by workers: a worker that reads any field
     * of a later job also sees that job's close of the claim word, so the
     * generation check refuses its claims. */
    _Atomic(kern_task_fn) fn; /* task function */
    _Atomic(void *) arg;      /* its argument */
    atomic_int n_tasks;       /* task count */
};

typedef struct kern_worker_arg {
    kern_pool *p; /* pool */
    int id;       /* thread id (1..size-1) */
} kern_worker_arg;

/* Claim and run tasks of generation gen until none remain; fn/arg/n must
 * be the fields read after observing gen in the claim word. */
static void kern_pool_work(kern_pool *p, uint32_t gen, kern_task_fn fn, void *arg, int n, int id) {
    uint64_t w = atomic_load_explicit(&p->claim, memory_order_acquire);
    for (;;) {
        if (KERN_POOL_GEN(w) != gen || KERN_POOL_IDX(w) >= (uint32_t)n) return;
        if (!atomic_compare_exchange_weak_explicit(&p->claim, &w, w + 1, memory_order_acq_rel,
                                                   memory_order_acquire))
            continue; /* w reloaded */
        fn(arg, (int)KERN_POOL_IDX(w), id);
        if (atomic_fetch_add_explicit(&p->done, 1, memory_order_acq_rel) + 1 == n) {
            pthread_mutex_lock(&p->mu); /* orders the signal against the caller's sleep */
            pthread_cond_signal(&p->cv_done);
            pthread_mutex_unlock(&p->mu);
        }
        w = atomic_load_explicit(&p->claim, memory_order_acquire);
    }
}

/* Poll until done(p, v) holds or KERN_POOL_SPIN_NS pass; returns whether it held. */
static int kern_pool_spin(kern_pool *p, uint32_t v, int (*done)(kern_pool *, uint32_t)) {
    long t0 = 0;
    for (int i = 0;; i++) {
        if (done(p, v)) return 1;
        KERN_POOL_PAUSE();
        if ((i & 255) == 255) {
            long t = (long)pl_mono_ns();
            if (!t0) t0 = t;
            else if (t - t0 > KERN_POOL_SPIN_NS) return 0;
        }
    }
}

/* A job newer than generation `seen` is open, or the pool is stopping. */
static int kern_pool_new_job(kern_pool *p, uint32_t seen) {
    uint64_t w = atomic_load_explicit(&p->claim, memory_order_acquire);
    return (KERN_POOL_GEN(w) != seen && KERN_POOL_IDX(w) != KERN_POOL_CLOSED) ||
           atomic_load_explicit(&p->stop, memory_order_relaxed);
}

static int kern_pool_all_done(kern_pool *p, uint32_t n) {
    return atomic_load_explicit(&p->done, memory_order_acquire) == (int)n;
}

static void *kern_pool_main(void *varg) {
    kern_worker_arg wa = *(kern_worker_arg *)varg;
    free(varg);
    kern_pool *p = wa.p;
    uint32_t seen = 0;
    for (;;) {
        if (!kern_pool_spin(p, seen, kern_pool_new_job)) {
            pthread_mutex_lock(&p->mu);
            while (!kern_pool_new_job(p, seen)) pthread_cond_wait(&p->cv_work, &p->mu);
            pthread_mutex_unlock(&p->mu);
        }
        if (atomic_load(&p->stop)) break;
        uint64_t w = atomic_load_explicit(&p->claim, memory_order_acquire);
        seen = KERN_POOL_GEN(w);
        /* the fields may already belong to a later job; the generation check
         * in kern_pool_work then refuses every claim */
        kern_task_fn fn = atomic_load_explicit(&p->fn, memory_order_acquire);
        void *arg = atomic_load_explicit(&p->arg, memory_order_acquire);
        int n = atomic_load_explicit(&p->n_tasks, memory_order_acquire);
        kern_pool_work(p, seen, fn, arg, n, wa.id);
    }
    return NULL;
}

int kern_pool_create(int n_threads, kern_pool **out) {
    *out = NULL;
    if (n_threads <= 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = n > 0 ? (int)n : 1;
    }
    if (n_threads > 256) n_threads = 256;
    kern_pool *p = calloc(1, sizeof *p);
    if (!p) return KERN_ENOMEM;
    p->size = n_threads;
    pthread_mutex_init(&p->run_mu, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    atomic_init(&p->claim, (uint64_t)KERN_POOL_CLOSED);
    atomic_init(&p->done, 0);
    atomic_init(&p->stop, 0);
    atomic_init(&p->fn, NULL);
    atomic_init(&p->arg, NULL);
    atomic_init(&p->n_tasks, 0);
    p->threads = calloc((size_t)n_threads, sizeof *p->threads);
    if (!p->threads) goto err;
    for (int i = 1; i < n_threads; i++) {
        kern_worker_arg *wa = malloc(sizeof *wa);
        if (!wa) goto err_threads;
        wa->p = p;
        wa->id = i;
        if (pthread_create(&p->threads[i - 1], NULL, kern_pool_main, wa) != 0) {
            free(wa);
            goto err_threads;
        }
        continue;
    err_threads:
        p->size = i; /* only threads 1..i-1 exist */
        goto err;
    }
    *out = p;
    return 0;
err:
    kern_pool_destroy(p);
    return KERN_ESYS;
}

void kern_pool_destroy(kern_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    atomic_store(&p->stop, 1);
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->size && p->threads; i++) pthread_join(p->threads[i - 1], NULL);
    free(p->threads);
    pthread_cond_destroy(&p->cv_work);
    pthread_cond_destroy(&p->cv_done);
    pthread_mutex_destroy(&p->mu);
    pthread_mutex_destroy(&p->run_mu);
    free(p);
}

int kern_pool_size(const kern_pool *p) { return p ? p->size : 1; }

void kern_pool_run(kern_pool *p, kern_task_fn fn, void *arg, int n_tasks) {
    if (n_tasks <= 0) return;
    if (!p || p->size == 1 || n_tasks == 1) {
        for (int t = 0; t < n_tasks; t++) fn(arg, t, 0);
        return;
    }
    pthread_mutex_lock(&p->run_mu);
    /* the claim word is closed here (initially, or by the previous job) */
    uint32_t gen = KERN_POOL_GEN(atomic_load(&p->claim)) + 1;
    atomic_store_explicit(&p->fn, fn, memory_order_release);
    atomic_store_explicit(&p->arg, arg, memory_order_release);
    atomic_store_explicit(&p->n_tasks, n_tasks, memory_order_release);
    atomic_store(&p->done, 0);
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&p->claim, (uint64_t)gen << 32, memory_order_release); /* open */
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    kern_pool_work(p, gen, fn, arg, n_tasks, 0);
    if (!kern_pool_spin(p, (uint32_t)n_tasks, kern_pool_all_done)) {
        pthread_mutex_lock(&p->mu);
        while (!kern_pool_all_done(p, (uint32_t)n_tasks)) pthread_cond_wait(&p->cv_done, &p->mu);
        pthread_mutex_unlock(&p->mu);
    }
    /* every task is claimed and finished: close before the fields change */
    atomic_store_explicit(&p->claim, (uint64_t)gen << 32 | KERN_POOL_CLOSED, memory_order_release);
    pthread_mutex_unlock(&p->run_mu);
}
