/*
 * test_kern.c -- kernels/cpu against their scalar references: int8 GEMM
 * (portable and AVX2 tiles, threaded) bit-exact for random shapes including
 * odd sizes, fp32 GEMM within rounding and invariant to the batch it runs
 * in, the attention vector kernels, and the thread pool.
 */
#define PTEST_MAIN
#include "ptest.h"

#include <stdatomic.h>

#include "kern_gemm.h"
#include "kern_pool.h"
#include "kern_vec.h"

static void fill_i8(int8_t *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = (int8_t)((int)(pt_rand() % 255) - 127);
}

static float frand(void) { return (float)((double)(pt_rand() >> 11) / 9007199254740992.0 * 2 - 1); }

static void fill_f32(float *p, size_t n) {
    for (size_t i = 0; i < n; i++) p[i] = frand();
}

static const int Ms[] = {1, 2, 3, 4, 5, 17, 64, 65, 130};
static const int Ns[] = {1, 2, 7, 16, 17, 33};
static const int Ks[] = {1, 31, 32, 33, 64, 100, 257};

PT_TEST(gemm_i8_matches_reference_all_shapes) {
    kern_pool *pool;
    PT_ASSERT(kern_pool_create(3, &pool) == 0);
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t b = 0; b < sizeof Ns / sizeof *Ns; b++)
            for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
                int M = Ms[a], N = Ns[b], K = Ks[c];
                int8_t *A = malloc((size_t)M * K), *W = malloc((size_t)N * K);
                int32_t *R = malloc((size_t)M * N * 4), *C = malloc((size_t)M * N * 4);
                fill_i8(A, (size_t)M * K);
                fill_i8(W, (size_t)N * K);
                kern_gemm_i8_ref(M, N, K, A, W, R);
                for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
                    memset(C, 0x55, (size_t)M * N * 4);
                    kern_gemm_i8(isa ? pool : NULL, (kern_isa)isa, M, N, K, A, W, C);
                    PT_ASSERT_MSG(!memcmp(R, C, (size_t)M * N * 4), "isa %d M %d N %d K %d differs", isa, M, N, K);
                }
                free(A), free(W), free(R), free(C);
            }
    kern_pool_destroy(pool);
}

PT_TEST(gemm_i8_extremes_no_saturation) {
    /* all +-127: the largest pairwise sums the AVX2 sign trick sees */
    int M = 5, N = 3, K = 96;
    int8_t A[5 * 96], W[3 * 96];
    for (int i = 0; i < M * K; i++) A[i] = (i & 1) ? -127 : 127;
    for (int i = 0; i < N * K; i++) W[i] = (i % 3) ? -127 : 127;
    int32_t R[15], C[15];
    kern_gemm_i8_ref(M, N, K, A, W, R);
    kern_gemm_i8(NULL, kern_isa_best(), M, N, K, A, W, C);
    PT_EQ_MEM(R, C, sizeof R);
}

PT_TEST(gemm_i8_scaled_epilogue) {
    int M = 6, N = 19, K = 70;
    int8_t *A = malloc((size_t)M * K), *W = malloc((size_t)N * K);
    fill_i8(A, (size_t)M * K);
    fill_i8(W, (size_t)N * K);
    float as[6], ws[19], C[6 * 24];
    for (int i = 0; i < M; i++) as[i] = 0.01f * (i + 1);
    for (int i = 0; i < N; i++) ws[i] = 0.003f * (i + 2);
    int32_t R[6 * 19];
    kern_gemm_i8_ref(M, N, K, A, W, R);
    kern_gemm_i8_scaled(NULL, kern_isa_best(), M, N, K, A, as, W, ws, C, 24);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float want = (float)R[m * N + n] * as[m] * ws[n];
            PT_EQ_MEM(&want, &C[m * 24 + n], sizeof want);
        }
    free(A), free(W);
}

PT_TEST(gemm_i8_block_scaled_matches_reference) {
    kern_pool *pool;
    PT_ASSERT(kern_pool_create(2, &pool) == 0);
    int Ks32[] = {32, 64, 96, 256};
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t c = 0; c < 4; c++) {
            int M = Ms[a], N = 17, K = Ks32[c], nb = K / 32;
            int8_t *A = malloc((size_t)M * K), *W = malloc((size_t)N * K);
            float *as = malloc(sizeof(float) * M), *bs = malloc(sizeof(float) * N * nb);
            float *R = malloc(sizeof(float) * M * N), *C = malloc(sizeof(float) * M * N), *C1 = malloc(sizeof(float) * N);
            fill_i8(A, (size_t)M * K);
            fill_i8(W, (size_t)N * K);
            for (int i = 0; i < M; i++) as[i] = 0.01f + 0.001f * i;
            for (int i = 0; i < N * nb; i++) bs[i] = 0.002f * (1 + i % 7);
            kern_gemm_i8_bs_ref(M, N, K, A, as, W, bs, R);
            for (int isa = 0; isa <= (int)kern_isa_best(); isa++) {
                kern_gemm_i8_bs(pool, (kern_isa)isa, M, N, K, A, as, W, bs, C, N);
                for (int i = 0; i < M * N; i++) PT_NEAR(C[i], R[i], 1e-5 * (fabs(R[i]) + 1));
                if (isa == 0) PT_EQ_MEM(C, R, sizeof(float) * M * N); /* same order as the reference */
                kern_gemm_i8_bs(NULL, (kern_isa)isa, 1, N, K, A + (size_t)(M - 1) * K, as + M - 1, W, bs, C1, N);
                PT_EQ_MEM(C1, C + (size_t)(M - 1) * N, sizeof(float) * N);
            }
            free(A), free(W), free(as), free(bs), free(R), free(C), free(C1);
        }
    kern_pool_destroy(pool);
}

PT_TEST(gemm_f32_close_to_reference_and_batch_invariant) {
    kern_pool *pool;
    PT_ASSERT(kern_pool_create(2, &pool) == 0);
    for (size_t a = 0; a < sizeof Ms / sizeof *Ms; a++)
        for (size_t c = 0; c < sizeof Ks / sizeof *Ks; c++) {
            int M = Ms[a], N = 33, K = Ks[c];
            float *A = malloc(sizeof(float) * M * K), *W = malloc(sizeof(float) * N * K);
            float *R = malloc(sizeof(float) * M * N), *C = malloc(sizeof(float) * M * N), *C1 = malloc(sizeof(float) * N);
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

PT_TEST(vec_kernels_match_reference) {
    int ns[] = {0, 1, 7, 8, 9, 64, 100};
    for (size_t i = 0; i < sizeof ns / sizeof *ns; i++) {
        int n = ns[i];
        float x[100], y[100], y2[100], yf[100];
        int8_t q[100];
        fill_f32(x, 100);
        fill_f32(yf, 100);
        fill_i8(q, 100);
        PT_NEAR(kern_dot_f32_i8(x, q, n), kern_dot_f32_i8_ref(x, q, n), 1e-3);
        PT_NEAR(kern_dot_f32(x, yf, n), kern_dot_f32_ref(x, yf, n), 1e-5);
        memcpy(y, x, sizeof y);
        memcpy(y2, x, sizeof y);
        kern_axpy_i8(y, 0.25f, q, n);
        kern_axpy_i8_ref(y2, 0.25f, q, n);
        for (int k = 0; k < 100; k++) PT_NEAR(y[k], y2[k], 1e-4);
        memcpy(y, x, sizeof y);
        memcpy(y2, x, sizeof y);
        kern_axpy_f32(y, -0.5f, yf, n);
        kern_axpy_f32_ref(y2, -0.5f, yf, n);
        for (int k = 0; k < 100; k++) PT_NEAR(y[k], y2[k], 1e-6);
    }
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
