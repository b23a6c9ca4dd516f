/*
 * bench_kern_w4.c -- throughput of the W4A8 GEMM (kern_gemm_w4, both
 * kinds) against the int8 block-scaled GEMM (kern_gemm_q8) on the same
 * shapes: not a test (no ctest registration), a measuring tool.
 *
 * Usage:  bench_kern_w4 [threads [repeats [rotate_mb [N K ...]]]]
 *   threads    pool size (default 2); repeats  timed runs per figure (5)
 *   rotate_mb  0 (default): every call reads the same weights, which then
 *              stay in the last-level cache when they fit; > 0: each pack
 *              is copied until the copies hold at least rotate_mb MB and
 *              the calls cycle through them (a working set larger than the
 *              cache makes the M = 1 figures DRAM streaming)
 *   N K        weight shapes (default 2048 2048 and 8192 2048)
 * For each shape, M in {1, 64, 512} and ISA avx2 / avx512vnni (those the
 * machine has; the kernels' isa argument caps the level), it prints the
 * median over the runs of GMAC/s and of GB/s of weight bytes streamed
 * (kern_*pack_bytes per call: the decode figure), for int8 (q8), W4 LUT
 * (IQ4_NL codes; Q4_0 is the same kernel) and W4 AFFINE (Q4_K), and the
 * W4 / int8 speed ratio.  Each run repeats the call for about 0.1 s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kern_gemm.h"
#include "kern_w4.h"

static double bench_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int bench_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static unsigned bench_seed = 12345;
static unsigned bench_rand(void) { return bench_seed = bench_seed * 1103515245u + 12345u; }

typedef struct bench_case {
    kern_pool *p;      /* pool */
    kern_isa isa;      /* level cap */
    int M, K;          /* rows, inputs */
    const int8_t *A;   /* activations [M][K] */
    const float *as;   /* [M][K/32] */
    float *C;          /* [M][N] */
    int N;             /* channels */
    const void *packs; /* n copies of a kern_wpack or a kern_w4pack (an array) */
    int n;             /* copies */
    int w4;            /* the packs are kern_w4pack */
    int *next;         /* the copy the next call reads */
} bench_case;

static void bench_call(const bench_case *c) {
    int i = (*c->next)++ % c->n;
    if (c->w4)
        kern_gemm_w4(c->p, c->isa, c->M, c->A, c->K, c->as, c->K / 32,
                     (const kern_w4pack *)c->packs + i, c->C, c->N);
    else
        kern_gemm_q8(c->p, c->isa, c->M, c->A, c->K, c->as, c->K / 32,
                     (const kern_wpack *)c->packs + i, c->C, c->N);
}

/* A copy of n bytes at src (NULL for NULL), freeable with free(). */
static void *bench_dup(const void *src, size_t n) {
    if (!src) return NULL;
    void *d = kern_huge_alloc(n);
    if (!d) {
        fprintf(stderr, "out of memory copying weights\n");
        exit(1);
    }
    return memcpy(d, src, n);
}

/* copies[0] = *q (shared), copies[1..n-1] deep copies. */
static void bench_copy_q8(kern_wpack *copies, const kern_wpack *q, int n) {
    size_t gb = (size_t)q->n_groups * q->n_blocks;
    for (int i = 0; i < n; i++) {
        copies[i] = *q;
        if (!i) continue;
        copies[i].q8 = bench_dup(q->q8, gb * 512);
        copies[i].bscale = bench_dup(q->bscale, gb * 16 * sizeof(uint16_t));
        copies[i].scale = NULL;
    }
}

static void bench_copy_w4(kern_w4pack *copies, const kern_w4pack *w, int n) {
    size_t gb = (size_t)w->n_groups * w->n_blocks;
    for (int i = 0; i < n; i++) {
        copies[i] = *w;
        if (!i) continue;
        copies[i].nib = bench_dup(w->nib, gb * 256);
        copies[i].bscale = bench_dup(w->bscale, gb * 16 * sizeof(uint16_t));
        copies[i].scmn = bench_dup(w->scmn, gb * 32);
        copies[i].dd = bench_dup(w->dd, gb / 8 * 32 * sizeof(uint16_t));
    }
}

/* Copies of a pack of `bytes` to hold at least rotate_mb MB (1 when 0). */
static int bench_n_copies(double rotate_mb, size_t bytes) {
    return rotate_mb <= 0 ? 1 : (int)(rotate_mb * 1e6 / (double)bytes) + 1;
}

/* Median seconds per call over `repeats` runs of about 0.1 s. */
static double bench_time(const bench_case *c, int repeats) {
    double t0 = bench_now();
    bench_call(c); /* warm-up, and the size of a run */
    double one = bench_now() - t0;
    int iters = one > 0.1 ? 1 : (int)(0.1 / (one > 1e-6 ? one : 1e-6)) + 1;
    double t[64];
    for (int r = 0; r < repeats; r++) {
        t0 = bench_now();
        for (int i = 0; i < iters; i++) bench_call(c);
        t[r] = (bench_now() - t0) / iters;
    }
    qsort(t, (size_t)repeats, sizeof *t, bench_cmp);
    return t[repeats / 2];
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 2, repeats = argc > 2 ? atoi(argv[2]) : 5;
    double rotate_mb = argc > 3 ? atof(argv[3]) : 0;
    int def[] = {2048, 2048, 8192, 2048}, *shapes = def, n_shapes = 2;
    if (argc > 5) {
        n_shapes = (argc - 4) / 2;
        shapes = malloc(sizeof(int) * 2 * (size_t)n_shapes);
        for (int i = 0; i < 2 * n_shapes; i++) shapes[i] = atoi(argv[4 + i]);
    }
    if (threads < 1 || repeats < 1 || repeats > 64) {
        fprintf(stderr, "usage: bench_kern_w4 [threads [repeats (1..64) [rotate_mb [N K ...]]]]\n");
        return 2;
    }
    kern_pool *p;
    if (kern_pool_create(threads, &p)) return 1;
    static const int Ms[] = {1, 64, 512};
    char err[128];
    printf("threads %d, median of %d runs; GMAC/s (GB/s of weights); ratio = W4 / int8 speed\n",
           threads, repeats);
    if (rotate_mb > 0)
        printf("calls cycle through copies of each pack, >= %.0f MB each\n", rotate_mb);
    for (int s = 0; s < n_shapes; s++) {
        int N = shapes[2 * s], K = shapes[2 * s + 1], nb = K / 32;
        if (N < 1 || K < 256 || K % 256) {
            fprintf(stderr, "shape %d x %d: K must be a multiple of 256\n", N, K);
            return 2;
        }
        int8_t *W = malloc((size_t)N * K);
        uint8_t *U = malloc((size_t)N * K), *sc = malloc((size_t)N * nb),
                *mn = malloc((size_t)N * nb);
        float *bs = malloc(sizeof(float) * N * nb), *d = malloc(sizeof(float) * N * (K / 256));
        for (size_t i = 0; i < (size_t)N * K; i++) {
            U[i] = (uint8_t)(bench_rand() >> 8 & 15);
            W[i] = kern_w4_lut_iq4_nl[U[i]];
        }
        for (int i = 0; i < N * nb; i++) {
            bs[i] = 0.0125f;
            sc[i] = (uint8_t)(bench_rand() >> 8 & 63), mn[i] = (uint8_t)(bench_rand() >> 8 & 63);
        }
        for (int i = 0; i < N * (K / 256); i++) d[i] = 0.001953125f;
        kern_wpack q8;
        kern_w4pack lut, aff;
        if (kern_wpack_init(&q8, N, K, W, NULL, bs, err, sizeof err) ||
            kern_w4pack_init_lut(&lut, N, K, W, bs, kern_w4_lut_iq4_nl, err, sizeof err) ||
            kern_w4pack_init_affine(&aff, N, K, U, sc, mn, d, d, err, sizeof err)) {
            fprintf(stderr, "pack: %s\n", err);
            return 1;
        }
        printf("\nweights %d x %d: int8 %.2f MB, W4 LUT %.2f MB, W4 AFFINE %.2f MB\n", N, K,
               kern_wpack_bytes(&q8) / 1e6, kern_w4pack_bytes(&lut) / 1e6,
               kern_w4pack_bytes(&aff) / 1e6);
        int nq = bench_n_copies(rotate_mb, kern_wpack_bytes(&q8));
        int nl = bench_n_copies(rotate_mb, kern_w4pack_bytes(&lut));
        int na = bench_n_copies(rotate_mb, kern_w4pack_bytes(&aff));
        kern_wpack *cq = malloc(sizeof *cq * nq);
        kern_w4pack *cl = malloc(sizeof *cl * nl), *ca = malloc(sizeof *ca * na);
        bench_copy_q8(cq, &q8, nq), bench_copy_w4(cl, &lut, nl), bench_copy_w4(ca, &aff, na);
        int next = 0;
        for (int mi = 0; mi < 3; mi++) {
            int M = Ms[mi];
            int8_t *A = malloc((size_t)M * K);
            float *as = malloc(sizeof(float) * (size_t)M * nb), *C = malloc(sizeof(float) * M * N);
            for (size_t i = 0; i < (size_t)M * K; i++)
                A[i] = (int8_t)((int)(bench_rand() >> 8 & 255) % 255 - 127);
            for (int i = 0; i < M * nb; i++) as[i] = 0.02f;
            for (int isa = KERN_ISA_AVX2; isa <= KERN_ISA_AVX512VNNI; isa++) {
                if (kern_isa_best() < (kern_isa)isa) continue;
                bench_case c = {p, (kern_isa)isa, M, K, A, as, C, N, cq, nq, 0, &next};
                double tq = bench_time(&c, repeats);
                c.packs = cl, c.n = nl, c.w4 = 1;
                double tl = bench_time(&c, repeats);
                c.packs = ca, c.n = na;
                double ta = bench_time(&c, repeats);
                double macs = (double)M * N * K / 1e9;
                printf("M %4d %-10s int8 %6.1f (%5.1f)  LUT %6.1f (%5.1f) x%.2f  AFFINE %6.1f "
                       "(%5.1f) x%.2f\n",
                       M, kern_isa_name((kern_isa)isa), macs / tq, kern_wpack_bytes(&q8) / tq / 1e9,
                       macs / tl, kern_w4pack_bytes(&lut) / tl / 1e9, tq / tl, macs / ta,
                       kern_w4pack_bytes(&aff) / ta / 1e9, tq / ta);
                fflush(stdout);
            }
            free(A), free(as), free(C);
        }
        for (int i = 0; i < nq; i++) kern_wpack_free(&cq[i]); /* [0] is q8 */
        for (int i = 0; i < nl; i++) kern_w4pack_free(&cl[i]);
        for (int i = 0; i < na; i++) kern_w4pack_free(&ca[i]);
        free(cq), free(cl), free(ca);
        free(W), free(U), free(sc), free(mn), free(bs), free(d);
    }
    if (shapes != def) free(shapes);
    kern_pool_destroy(p);
    return 0;
}
