/*
 * kern_pool.h -- a persistent thread pool for the compute kernels.
 *
 * Purpose.  Every GEMM and attention call of a forward step splits its work
 * into tasks; creating threads per call would cost more than a decode step's
 * small GEMMs, so the pool's workers are created once (sized to the cores or
 * as configured) and sleep on a condition variable between jobs.
 *
 * Model.  kern_pool_run(p, fn, arg, n_tasks) runs fn(arg, task, thread) for
 * every task in [0, n_tasks), spread over the workers AND the calling thread
 * (thread ids 0..size-1, the caller is thread 0), and returns when all tasks
 * are done.  Tasks are claimed with an atomic counter, so uneven tasks
 * balance themselves.  A pool of size 1 runs everything on the caller.
 *
 * Threading.  kern_pool_run may be called from several threads; calls take
 * turns (a mutex serialises jobs).  fn must not call kern_pool_run on the
 * same pool.
 *
 * Failure behaviour.  kern_pool_create returns KERN_ENOMEM or KERN_ESYS
 * (kern_isa.h) when memory or threads cannot be had (nothing is leaked); kern_pool_run cannot fail.
 */
#ifndef KERN_POOL_H
#define KERN_POOL_H

typedef struct kern_pool kern_pool; /* opaque */

/* One task: arg as given to kern_pool_run, task index, executing thread id
 * (0..kern_pool_size-1; use it to index per-thread scratch). */
typedef void (*kern_task_fn)(void *arg, int task, int thread);

/* n_threads <= 0: one per online CPU.  Returns 0 or KERN_ENOMEM / KERN_ESYS. */
int kern_pool_create(int n_threads, kern_pool **out);
void kern_pool_destroy(kern_pool *p);
int kern_pool_size(const kern_pool *p);
void kern_pool_run(kern_pool *p, kern_task_fn fn, void *arg, int n_tasks);

#endif
