/*
 * bench_kern_w4.c -- throughput of the W4A8 GEMM (kern_gemm_w4, both
 * kinds) against the int8 block-scaled GEMM (kern_gemm_q8) on the same
 * shapes: not a test (no ctest registration), a measuring tool.
 *
 * Usage:  bench_kern_w4 [threads [repeats [N K ...]]]
 *   threads  pool size (default 2); repeats  timed runs per figure (5)
 *   N K      weight shapes (default 2048 2048 and 8192 2048)
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
    kern_pool *p;     /* pool */
    kern_isa isa;     /* level cap */
    int M, K;         /* rows, inputs */
    const int8_t *A;  /* activations [M][K] */
    const float *as;  /* [M][K/32] */
    float *C;         /* [M][N] */
    int N;            /* channels */
    const void *pack; /* kern_wpack or kern_w4pack */
    int w4;           /* pack is a kern_w4pack */
} bench_case;

static void bench_call(const bench_case *c) {
    if (c->w4) kern_gemm_w4(c->p, c->isa, c->M, c->A, c->K, c->as, c->K / 32, c->pack, c->C, c->N);
    else kern_gemm_q8(c->p, c->isa, c->M, c->A, c->K, c->as, c->K / 32, c->pack, c->C, c->N);
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
    int def[] = {2048, 2048, 8192, 2048}, *shapes = def, n_shapes = 2;
    if (argc > 4) {
        n_shapes = (argc - 3) / 2;
        shapes = malloc(sizeof(int) * 2 * (size_t)n_shapes);
        for (int i = 0; i < 2 * n_shapes; i++) shapes[i] = atoi(argv[3 + i]);
    }
    if (threads < 1 || repeats < 1 || repeats > 64) {
        fprintf(stderr, "usage: bench_kern_w4 [threads [repeats (1..64) [N K ...]]]\n");
        return 2;
    }
    kern_pool *p;
    if (kern_pool_create(threads, &p)) return 1;
    static const int Ms[] = {1, 64, 512};
    char err[128];
    printf("threads %d, median of %d runs; GMAC/s (GB/s of weights); ratio = W4 / int8 speed\n",
           threads, repeats);
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
        for (int mi = 0; mi < 3; mi++) {
            int M = Ms[mi];
            int8_t *A = malloc((size_t)M * K);
            float *as = malloc(sizeof(float) * (size_t)M * nb), *C = malloc(sizeof(float) * M * N);
            for (size_t i = 0; i < (size_t)M * K; i++)
                A[i] = (int8_t)((int)(bench_rand() >> 8 & 255) % 255 - 127);
            for (int i = 0; i < M * nb; i++) as[i] = 0.02f;
            for (int isa = KERN_ISA_AVX2; isa <= KERN_ISA_AVX512VNNI; isa++) {
                if (kern_isa_best() < (kern_isa)isa) continue;
                bench_case c = {p, (kern_isa)isa, M, K, A, as, C, N, &q8, 0};
                double tq = bench_time(&c, repeats);
                c.pack = &lut, c.w4 = 1;
                double tl = bench_time(&c, repeats);
                c.pack = &aff;
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
        kern_wpack_free(&q8), kern_w4pack_free(&lut), kern_w4pack_free(&aff);
        free(W), free(U), free(sc), free(mn), free(bs), free(d);
    }
    if (shapes != def) free(shapes);
    kern_pool_destroy(p);
    return 0;
}
