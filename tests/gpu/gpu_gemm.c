/*
 * gpu_gemm.c -- the int8 GEMM microbenchmark: TOPS against the device's
 * dense int8 peak at M = 1, 64, 512, 4096 (N = K = 8192 by default).
 *
 *   gpu_gemm [N K]
 *
 * For each M: the raw int32 GEMM on the path the backend picks (GEMV up to
 * KERN_CUDA_GEMV_MAX_M rows, cuBLASLt above), the other path where it
 * applies, and the whole linear() (per-row quantisation + GEMM +
 * dequantisation) as the backend runs it, and the block form
 * (PARLEY_CUDA_WEIGHTS=block: quantise per 32 values + the dp4a block
 * GEMV / tiled GEMM).  TOPS = 2 M N K / time; the GEMV
 * rows also give the weight stream in TB/s against the memory roofline
 * (the decode path is bound by it, not by the tensor cores).  Each timing
 * is the median of several runs of a batch of calls between two
 * synchronisations, after a warm-up (cuBLASLt plans are made then).
 * Result lines: @ gemm_M<m>_<path>=<TOPS>,<% of peak>.
 */
#include <stdint.h>

#include "gpu_common.h"

static kern_cuda *g_kc;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median seconds per call of fn over 5 runs of reps calls. */
typedef void (*bench_fn)(void *arg);
static double timed(bench_fn fn, void *arg, int reps) {
    double t[5];
    fn(arg); /* warm-up */
    kern_cuda_sync(g_kc);
    for (int r = 0; r < 5; r++) {
        double t0 = gpu_now();
        for (int i = 0; i < reps; i++) fn(arg);
        kern_cuda_sync(g_kc);
        t[r] = (gpu_now() - t0) / reps;
    }
    qsort(t, 5, sizeof t[0], cmp_d);
    return t[2];
}

typedef struct bench {
    int M, path;
    kern_cuda_w8 *w;
    kern_cuda_w8b *wb;
    int8_t *xq;
    float *xs, *x, *C;
    int32_t *D;
} bench;

/* Calls per timed batch: about 0.1-1 ms of work, at most 200. */
static int reps_for(double ops) {
    double r = 2e11 / ops + 1;
    return r > 200 ? 200 : (int)r;
}

static void run_i32(void *arg) {
    bench *b = arg;
    kern_cuda_gemm_i32(g_kc, b->M, b->xq, b->w, b->D, b->w->Np, b->path);
}

static void run_b32(void *arg) {
    bench *b = arg;
    kern_cuda_quantize_blocks(g_kc, b->M, b->wb->K, b->x, b->wb->K, b->xq, b->wb->Kp, b->xs,
                              b->wb->Kp / 32);
    kern_cuda_linear_b32(g_kc, b->M, b->xq, b->xs, b->wb, b->C, b->wb->N);
}

static void run_linear(void *arg) {
    bench *b = arg;
    kern_cuda_quantize(g_kc, b->M, b->w->K, b->x, b->w->K, b->xq, b->w->Kp, b->xs);
    kern_cuda_linear_i8(g_kc, b->M, b->xq, b->xs, b->w, b->C, b->w->N, KERN_CUDA_GEMM_AUTO);
}

int main(int argc, char **argv) {
    char err[256];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (kern_cuda_device_count() <= 0) {
        printf("gpu_gemm: no CUDA device: skipped\n");
        return 77;
    }
    if (kern_cuda_open(&g_kc, 0, err, sizeof err) != 0) {
        printf("gpu_gemm: %s\n", err);
        return 1;
    }
    int N = argc > 2 ? atoi(argv[1]) : 8192, K = argc > 2 ? atoi(argv[2]) : 8192;
    static const int Ms[] = {1, 64, 512, 4096};
    int Mmax = 4096, Np = kern_cuda_pad_n(N), Kp = kern_cuda_pad_k(K);
    kern_cuda_info info;
    gpu_peaks pk;
    kern_cuda_get_info(g_kc, &info);
    gpu_peaks_of(&info, &pk);
    gpu_print_device(&info, &pk);
    /* random operands, made on the host once */
    uint64_t seed = 7;
    int8_t *hw = malloc((size_t)Np * Kp);
    float *hx = malloc((size_t)Mmax * K * 4), *hs = malloc((size_t)Np * 4);
    for (size_t i = 0; i < (size_t)Np * Kp; i++) hw[i] = (int8_t)(gpu_rand(&seed) % 255 - 127);
    for (size_t i = 0; i < (size_t)Mmax * K; i++) hx[i] = gpu_gauss(&seed);
    for (int n = 0; n < Np; n++) hs[n] = 1e-3f;
    kern_cuda_w8 w = {.N = N, .K = K, .Np = Np, .Kp = Kp};
    int8_t *dw = kern_cuda_malloc(g_kc, (size_t)Np * Kp);
    float *ds = kern_cuda_malloc(g_kc, (size_t)Np * 4);
    bench b = {.w = &w};
    b.x = kern_cuda_malloc(g_kc, (size_t)Mmax * K * 4);
    b.xq = kern_cuda_malloc(g_kc, (size_t)Mmax * Kp);
    b.xs = kern_cuda_malloc(g_kc, (size_t)Mmax * (Kp / 16) * 4); /* block scales fit too */
    b.C = kern_cuda_malloc(g_kc, (size_t)Mmax * N * 4);
    b.D = kern_cuda_malloc(g_kc, (size_t)Mmax * Np * 4);
    if (!dw || !ds || !b.x || !b.xq || !b.xs || !b.C || !b.D) {
        printf("gpu_gemm: out of device memory\n");
        return 1;
    }
    kern_cuda_copy_sync(g_kc, dw, hw, (size_t)Np * Kp);
    kern_cuda_copy_sync(g_kc, ds, hs, (size_t)Np * 4);
    kern_cuda_copy_sync(g_kc, b.x, hx, (size_t)Mmax * K * 4);
    w.q = dw;
    w.scale = ds;
    /* the same values in the CPU's form (K a multiple of 32 here), one block scale each */
    int K32 = (K + 31) / 32 * 32;
    kern_cuda_w8b wb = {.N = N, .K = K, .Np = Np, .Kp = K32, .q = dw};
    float *hbs = malloc((size_t)Np * (K32 / 32) * 4);
    for (size_t i = 0; i < (size_t)Np * (K32 / 32); i++) hbs[i] = 1e-3f;
    float *dbs = kern_cuda_malloc(g_kc, (size_t)Np * (K32 / 32) * 4);
    if (!dbs || K32 != Kp) {
        printf("gpu_gemm: K must be a multiple of 32\n");
        return 1;
    }
    kern_cuda_copy_sync(g_kc, dbs, hbs, (size_t)Np * (K32 / 32) * 4);
    wb.bscale = dbs;
    b.wb = &wb;
    kern_cuda_quantize(g_kc, Mmax, K, b.x, K, b.xq, Kp, b.xs);
    printf("int8 GEMM N %d K %d (weights %.0f MiB)\n", N, K, (double)Np * Kp / (1 << 20));
    printf("  %5s  %-9s %10s %9s %8s %10s\n", "M", "path", "us/call", "TOPS", "% peak", "TB/s (W)");
    for (size_t i = 0; i < sizeof Ms / sizeof Ms[0]; i++) {
        b.M = Ms[i];
        int auto_path = kern_cuda_gemm_pick(b.M, N, K);
        int paths[2] = {auto_path, auto_path == KERN_CUDA_GEMM_GEMV ? KERN_CUDA_GEMM_LT : 0};
        if (b.M == 64) paths[1] = KERN_CUDA_GEMM_GEMV; /* GEMV at 64 rows: 8 passes, for scale */
        for (int p = 0; p < 2 && paths[p]; p++) {
            b.path = paths[p];
            double ops = 2.0 * b.M * N * K;
            double t = timed(run_i32, &b, reps_for(ops));
            int got = kern_cuda_gemm_i32(g_kc, b.M, b.xq, &w, b.D, Np, b.path);
            const char *name = got == KERN_CUDA_GEMM_LT ? "cuBLASLt" : "GEMV";
            double tops = ops / t / 1e12, pct = 100 * ops / t / pk.int8_ops;
            double wbw = ((double)Np * Kp + Np * 4.0) / t / 1e12;
            printf("  %5d  %-9s %10.1f %9.1f %7.1f%% %10.2f\n", b.M, name, t * 1e6, tops, pct, wbw);
            char key[64];
            snprintf(key, sizeof key, "gemm_M%d_%s", b.M, got == KERN_CUDA_GEMM_LT ? "lt" : "gemv");
            GPU_RESULT(key, "%.1fTOPS,%.1f%%peak,%.2fTB/s", tops, pct, wbw);
        }
        double t = timed(run_linear, &b, reps_for(2.0 * b.M * N * K));
        double tops = 2.0 * b.M * N * K / t / 1e12;
        printf("  %5d  %-9s %10.1f %9.1f %7.1f%%   (quantise + GEMM + scales)\n", b.M, "linear",
               t * 1e6, tops, 100 * tops * 1e12 / pk.int8_ops);
        char key[64];
        snprintf(key, sizeof key, "linear_M%d", b.M);
        GPU_RESULT(key, "%.1fTOPS,%.1f%%peak", tops, 100 * tops * 1e12 / pk.int8_ops);
        t = timed(run_b32, &b, reps_for(2.0 * b.M * N * K));
        tops = 2.0 * b.M * N * K / t / 1e12;
        printf("  %5d  %-9s %10.1f %9.1f %7.1f%% %10.2f (the CPU's 32-value blocks, dp4a)\n", b.M,
               "block", t * 1e6, tops, 100 * tops * 1e12 / pk.int8_ops,
               (double)Np * Kp * 1.125 / t / 1e12);
        snprintf(key, sizeof key, "block_M%d", b.M);
        GPU_RESULT(key, "%.1fTOPS,%.1f%%peak", tops, 100 * tops * 1e12 / pk.int8_ops);
    }
    kern_cuda_stats st;
    kern_cuda_get_stats(g_kc, &st);
    printf("paths: %llu GEMV, %llu cuBLASLt, %llu cuBLASLt refusals, %llu plans\n",
           (unsigned long long)st.gemv, (unsigned long long)st.lt,
           (unsigned long long)st.lt_fallback, (unsigned long long)st.lt_plans);
    GPU_RESULT("gemm_lt_refusals", "%llu", (unsigned long long)st.lt_fallback);
    int rc = kern_cuda_status(g_kc, err, sizeof err);
    if (rc) printf("gpu_gemm: device error: %s\n", err);
    kern_cuda_close(g_kc);
    free(hw), free(hx), free(hs), free(hbs);
    return rc ? 1 : 0;
}
