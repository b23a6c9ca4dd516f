/*
 * kern_pool.c -- persistent worker threads for the kernels (kern_pool.h).
 *
 * Workers wait for a job generation number to change, then claim task
 * indices from a shared atomic counter until none remain, and report
 * completion by decrementing an "active workers" count.  The caller works
 * on the same job, then waits for the count to reach zero.
 */
#include "kern_pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct kern_pool {
    int size;                 /* threads including the caller */
    pthread_t *threads;       /* size-1 workers */
    pthread_mutex_t run_mu;   /* serialises kern_pool_run calls */
    pthread_mutex_t mu;       /* guards the fields below */
    pthread_cond_t cv_work;   /* signalled when a job starts or on shutdown */
    pthread_cond_t cv_done;   /* signalled when the last worker finishes */
    unsigned long gen;        /* job generation */
    int active;               /* workers still busy with the current job */
    int stop;                 /* shutdown requested */
    kern_task_fn fn;          /* current job */
    void *arg;                /* its argument */
    int n_tasks;              /* its task count */
    atomic_int next;          /* next unclaimed task */
};

typedef struct kern_worker_arg {
    kern_pool *p; /* pool */
    int id;       /* thread id (1..size-1) */
} kern_worker_arg;

static void kern_pool_work(kern_pool *p, kern_task_fn fn, void *arg, int n, int id) {
    for (;;) {
        int t = atomic_fetch_add_explicit(&p->next, 1, memory_order_relaxed);
        if (t >= n) break;
        fn(arg, t, id);
    }
}

static void *kern_pool_main(void *varg) {
    kern_worker_arg wa = *(kern_worker_arg *)varg;
    free(varg);
    kern_pool *p = wa.p;
    unsigned long seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->stop && p->gen == seen) pthread_cond_wait(&p->cv_work, &p->mu);
        if (p->stop) break;
        seen = p->gen;
        kern_task_fn fn = p->fn;
        void *arg = p->arg;
        int n = p->n_tasks;
        pthread_mutex_unlock(&p->mu);
        kern_pool_work(p, fn, arg, n, wa.id);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0) pthread_cond_signal(&p->cv_done);
    }
    pthread_mutex_unlock(&p->mu);
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
    if (!p) return -1;
    p->size = n_threads;
    pthread_mutex_init(&p->run_mu, NULL);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv_work, NULL);
    pthread_cond_init(&p->cv_done, NULL);
    atomic_init(&p->next, 0);
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
    return -1;
}

void kern_pool_destroy(kern_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
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
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->arg = arg;
    p->n_tasks = n_tasks;
    atomic_store(&p->next, 0);
    p->active = p->size - 1;
    p->gen++;
    pthread_cond_broadcast(&p->cv_work);
    pthread_mutex_unlock(&p->mu);
    kern_pool_work(p, fn, arg, n_tasks, 0);
    pthread_mutex_lock(&p->mu);
    while (p->active > 0) pthread_cond_wait(&p->cv_done, &p->mu);
    pthread_mutex_unlock(&p->mu);
    pthread_mutex_unlock(&p->run_mu);
}
