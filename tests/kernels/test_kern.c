/*
 * test_kern.c -- the fp32 GEMM against its scalar reference (within
 * rounding, invariant to the batch it runs in) and the thread pool (the
 * int8 GEMM: test_kern_gemm.c; attention: test_kern_attn.c).
 */
#define PTEST_MAIN
#include "ptest.h"

#include <stdatomic.h>

#include "kern_gemm.h"
#include "kern_pool.h"

static float frand(void) { return (float)((double)(pt_rand() >> 11) / 9007199254740992.0 * 2 - 1); }

static void fill_f32(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = frand();
}

static const int Ms[] = {1, 2, 3, 4, 5, 17, 64, 65, 130};
static const int Ks[] = {1, 31, 32, 33, 64, 100, 257};

PT_TEST(gemm_f32_close_to_reference_and_batch_invariant) {
    kern_pool *pool;
    PT_ASSERT(kern_pool_create(2, &pool) == 0);
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
            int M = Ms[a], N = 33, K = Ks[c];
            float *A = malloc(sizeof(float) * M * K), *W = malloc(sizeof(float) * N * K);
            float *R = malloc(sizeof(float) * M * N), *C = malloc(sizeof(float) * M * N),
                  *C1 = malloc(sizeof(float) * N);
            fill_f32(A, (size_t)M * K);
            fill_f32(W, (size_t)N * K);
            kern_gemm_f32_ref(M, N, K, A, W, R);
            for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
                kern_gemm_f32(pool, (kern_isa)isa, M, N, K, A, W, C, N);
                for (int i = 0; i < M * N; i++) PT_NEAR(C[i], R[i], 1e-5 * K);
                /* the last row alone gives bit-identical results */
                kern_gemm_f32(NULL, (kern_isa)isa, 1, N, K, A + (size_t)(M - 1) * K, W, C1, N);
                PT_EQ_MEM(C1, C + (size_t)(M - 1) * N, sizeof(float) * N);
            }
            free(A), free(W), free(R), free(C), free(C1);
        }
    kern_pool_destroy(pool);
}

typedef struct pool_arg {
    atomic_int hits[1000]; /* times each task ran */
    atomic_int bad_thread; /* thread ids out of range */
    int size;              /* pool size */
} pool_arg;

static void pool_task(void *arg, int task, int thread) {
    pool_arg *p = arg;
    atomic_fetch_add(&p->hits[task], 1);
    if (thread < 0 || thread >= p->size) atomic_fetch_add(&p->bad_thread, 1);
}

PT_TEST(pool_runs_every_task_once) {
    kern_pool *pool;
    PT_ASSERT(kern_pool_create(4, &pool) == 0);
    PT_EQ_INT(kern_pool_size(pool), 4);
    static pool_arg a;
    for (int rep = 0; rep < 50; rep++) {
        memset(&a, 0, sizeof a);
        a.size = 4;
        int n = 1 + rep * 19 % 1000;
        kern_pool_run(pool, pool_task, &a, n);
        for (int i = 0; i < 1000; i++) PT_EQ_INT(atomic_load(&a.hits[i]), i < n ? 1 : 0);
        PT_EQ_INT(atomic_load(&a.bad_thread), 0);
    }
    kern_pool_destroy(pool);
}

typedef struct pool_seq_arg {
    atomic_int ran[4]; /* runs of each task of the current job */
} pool_seq_arg;

static void pool_seq_task(void *arg, int task, int thread) {
    (void)thread;
    pool_seq_arg *a = arg;
    atomic_fetch_add(&a->ran[task], 1);
}

PT_TEST(pool_many_tiny_jobs_no_late_worker_runs_stale_tasks) {
    /* thousands of 2..4-task jobs back to back on more threads than cores:
     * workers often wake after their job ended; each task still runs once,
     * with its own job's argument (two alternating argument blocks) */
    kern_pool *pool;
    PT_ASSERT(kern_pool_create(4, &pool) == 0);
    static pool_seq_arg a[2];
    for (int job = 0; job < 20000; job++) {
        pool_seq_arg *cur = &a[job % 2];
        int n = 2 + job % 3;
        for (int t = 0; t < 4; t++) atomic_store(&cur->ran[t], 0);
        kern_pool_run(pool, pool_seq_task, cur, n);
        for (int t = 0; t < 4; t++) PT_EQ_INT(atomic_load(&cur->ran[t]), t < n ? 1 : 0);
    }
    kern_pool_destroy(pool);
}
