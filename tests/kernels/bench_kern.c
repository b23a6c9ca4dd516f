/*
 * bench_kern.c -- throughput of the packed GEMMs on real model shapes, as a
 * share of this machine's int8 multiply-accumulate probe measured in the
 * same run: not a test (no ctest registration), a measuring tool.
 *
 * Usage:  bench_kern [--threads N] [--repeat R] [--m LIST] [--model gemma|llama1b|all]
 *                    [--isa LIST] [--format LIST] [--rotate-mb MB] [--shape NxK ...]
 *   --threads  pool size (default 2)          --repeat  timed runs per figure (5)
 *   --m        rows of A, comma-separated (default 1,64,512)
 *   --model    which model's layer shapes (default all):
 *                gemma    Gemma 3 270M: qkv 1536x640, o 640x1024, gate_up 4096x640,
 *                         down 640x2048, output 262144x640
 *                llama1b  Llama-3.2-1B: qkv 3072x2048, o 2048x2048, gate_up 16384x2048,
 *                         down 2048x8192, output 128256x2048
 *   --shape    N x K of an extra weight (repeatable; replaces --model's)
 *   --isa      levels to run, comma-separated (default every level the machine has
 *              from avx2 up: avx2, avx512vnni, amx)
 *   --format   int8 (block-scaled, Q8_0-like), int8pc (per-channel scales),
 *              lut (W4 IQ4_NL / Q4_0 codes), affine (W4 Q4_K) (default all four;
 *              affine only where K % 256 == 0)
 *   --rotate-mb  0 (default): every call reads the same weights (which stay in
 *              cache when they fit); > 0: copies of each pack until they hold that
 *              many MB, cycled, so the M = 1 figures stream from DRAM
 *
 * For each ISA it first measures the probe (kern_macs.h: the GEMM's
 * instruction mix at that level on the same pool; AMX is probed as VNNI,
 * so the tile path may exceed 100%), then per shape, M and format prints
 * the median GMAC/s over the runs, its share of the probe's best pass, and
 * the weight bytes streamed per second (the decode figure).  The
 * activations come with their block sums (kern_quantize_blocks_sum), as the
 * engine calls the GEMMs.  /proc/loadavg is printed at the start and end:
 * other work on the machine lowers every figure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kern_gemm.h"
#include "kern_macs.h"
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

enum { F_INT8, F_INT8PC, F_LUT, F_AFFINE, F_COUNT };
static const char *const bench_fmt_name[F_COUNT] = {"int8", "int8pc", "lut", "affine"};

typedef struct bench_shape {
    const char *name; /* "gemma qkv" */
    int N, K;
} bench_shape;

static const bench_shape bench_gemma[] = {{"gemma qkv", 1536, 640},
                                          {"gemma o", 640, 1024},
                                          {"gemma gate_up", 4096, 640},
                                          {"gemma down", 640, 2048},
                                          {"gemma output", 262144, 640}};
static const bench_shape bench_llama[] = {{"llama1b qkv", 3072, 2048},
                                          {"llama1b o", 2048, 2048},
                                          {"llama1b gate_up", 16384, 2048},
                                          {"llama1b down", 2048, 8192},
                                          {"llama1b output", 128256, 2048}};

/* One format's packs: n copies (copy 0 the original). */
typedef struct bench_packs {
    int fmt;         /* F_* */
    int n;           /* copies */
    kern_wpack *q8;  /* int8 formats */
    kern_w4pack *w4; /* W4 formats */
    size_t bytes;    /* of one copy */
} bench_packs;

typedef struct bench_case {
    kern_pool *p;
    kern_isa isa;
    const kern_gemm_act *a;
    float *C;
    int N;
    const bench_packs *pk;
    int next; /* the copy the next call reads */
} bench_case;

static void bench_call(bench_case *c) {
    int i = c->next++ % c->pk->n;
    kern_gemm_out o = {.C = c->C, .ldc = c->N};
    if (c->pk->w4) kern_gemm_w4_run(c->p, c->isa, c->a, &c->pk->w4[i], &o);
    else kern_gemm_q8_run(c->p, c->isa, c->a, &c->pk->q8[i], &o);
}

/* Median seconds per call over `repeats` runs of about 0.1 s each. */
static double bench_time(bench_case *c, int repeats) {
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

static void *bench_dup(const void *src, size_t n) {
    if (!src) return NULL;
    void *d = kern_huge_alloc(n);
    if (!d) {
        fprintf(stderr, "bench_kern: out of memory copying weights\n");
        exit(1);
    }
    return memcpy(d, src, n);
}

/* Packs of format fmt for an N x K weight, copied until rotate_mb is held. */
static int bench_make(bench_packs *pk, int fmt, int N, int K, double rotate_mb) {
    char err[256];
    int nb = K / 32, rc;
    memset(pk, 0, sizeof *pk);
    pk->fmt = fmt;
    if (fmt == F_AFFINE && K % 256) return -1;
    int8_t *W = malloc((size_t)N * K);
    uint8_t *U = malloc((size_t)N * K), *sc = malloc((size_t)N * nb), *mn = malloc((size_t)N * nb);
    float *bs = malloc(sizeof(float) * (size_t)N * nb), *d = malloc(sizeof(float) * (size_t)N * nb);
    if (!W || !U || !sc || !mn || !bs || !d) {
        fprintf(stderr, "bench_kern: out of memory\n");
        exit(1);
    }
    for (size_t i = 0; i < (size_t)N * K; i++) {
        U[i] = (uint8_t)(bench_rand() >> 8 & 15);
        W[i] = fmt == F_LUT ? kern_w4_lut_iq4_nl[U[i]]
                            : (int8_t)((int)(bench_rand() >> 8 & 255) % 255 - 127);
    }
    for (int i = 0; i < N * nb; i++) {
        bs[i] = 0.0125f;
        d[i] = 0.001953125f;
        sc[i] = (uint8_t)(bench_rand() >> 8 & 63), mn[i] = (uint8_t)(bench_rand() >> 8 & 63);
    }
    kern_wpack q8;
    kern_w4pack w4p;
    if (fmt == F_INT8 || fmt == F_INT8PC)
        rc = kern_wpack_init(&q8, N, K, W, fmt == F_INT8PC ? bs : NULL, fmt == F_INT8 ? bs : NULL,
                             err, sizeof err);
    else if (fmt == F_LUT)
        rc = kern_w4pack_init_lut(&w4p, N, K, W, bs, kern_w4_lut_iq4_nl, err, sizeof err);
    else rc = kern_w4pack_init_affine(&w4p, N, K, U, sc, mn, d, d, err, sizeof err);
    free(W), free(U), free(sc), free(mn), free(bs), free(d);
    if (rc) {
        fprintf(stderr, "bench_kern: pack %d x %d: %s\n", N, K, err);
        exit(1);
    }
    int w4 = fmt == F_LUT || fmt == F_AFFINE;
    pk->bytes = w4 ? kern_w4pack_bytes(&w4p) : kern_wpack_bytes(&q8);
    pk->n = rotate_mb <= 0 ? 1 : (int)(rotate_mb * 1e6 / (double)pk->bytes) + 1;
    if (w4) pk->w4 = calloc((size_t)pk->n, sizeof *pk->w4);
    else pk->q8 = calloc((size_t)pk->n, sizeof *pk->q8);
    size_t gb = (size_t)(N + 15) / 16 * nb;
    for (int i = 0; i < pk->n; i++) {
        if (!w4) {
            pk->q8[i] = q8;
            if (!i) continue;
            pk->q8[i].q8 = bench_dup(q8.q8, gb * 512);
            pk->q8[i].bscale = bench_dup(q8.bscale, gb * 16 * sizeof(uint16_t));
            pk->q8[i].scale = bench_dup(q8.scale, (gb / nb) * 16 * sizeof(float));
            continue;
        }
        pk->w4[i] = w4p;
        if (!i) continue;
        pk->w4[i].nib = bench_dup(w4p.nib, gb * 256);
        pk->w4[i].bscale = bench_dup(w4p.bscale, gb * 16 * sizeof(uint16_t));
        pk->w4[i].scmn = bench_dup(w4p.scmn, gb * 32);
        pk->w4[i].dd = bench_dup(w4p.dd, gb / 8 * 32 * sizeof(uint16_t));
    }
    return 0;
}

static void bench_free(bench_packs *pk) {
    for (int i = 0; i < pk->n; i++) {
        if (pk->q8) kern_wpack_free(&pk->q8[i]);
        if (pk->w4) kern_w4pack_free(&pk->w4[i]);
    }
    free(pk->q8), free(pk->w4);
}

static void bench_loadavg(const char *when) {
    char line[128] = "?";
    FILE *fp = fopen("/proc/loadavg", "r");
    if (fp) {
        if (!fgets(line, sizeof line, fp)) strcpy(line, "?\n");
        fclose(fp);
    }
    printf("loadavg (%s): %s", when, line);
}

/* Parses "a,b,c" of ints into v (at most max); returns the count. */
static int bench_ints(const char *s, int *v, int max) {
    int n = 0;
    while (*s && n < max) {
        v[n++] = atoi(s);
        const char *c = strchr(s, ',');
        if (!c) break;
        s = c + 1;
    }
    return n;
}

static int bench_has(const char *list, const char *name) {
    if (!list) return 1;
    size_t n = strlen(name);
    for (const char *s = list; (s = strstr(s, name)) != NULL; s += n)
        if ((s == list || s[-1] == ',') && (s[n] == ',' || s[n] == 0)) return 1;
    return 0;
}

int main(int argc, char **argv) {
    int threads = 2, repeats = 5, Ms[16] = {1, 64, 512}, nM = 3;
    const char *model = "all", *isas = NULL, *fmts = NULL;
    double rotate_mb = 0;
    bench_shape extra[16];
    int n_extra = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) goto usage;
        if (!strcmp(a, "--threads")) threads = atoi(v);
        else if (!strcmp(a, "--repeat")) repeats = atoi(v);
        else if (!strcmp(a, "--m")) nM = bench_ints(v, Ms, 16);
        else if (!strcmp(a, "--model")) model = v;
        else if (!strcmp(a, "--isa")) isas = v;
        else if (!strcmp(a, "--format")) fmts = v;
        else if (!strcmp(a, "--rotate-mb")) rotate_mb = atof(v);
        else if (!strcmp(a, "--shape") && n_extra < 16) {
            int N = 0, K = 0;
            if (sscanf(v, "%dx%d", &N, &K) != 2 || N < 1 || K < 32 || K % 32) goto usage;
            extra[n_extra++] = (bench_shape){"shape", N, K};
        } else goto usage;
        i++;
    }
    if (threads < 1 || repeats < 1 || repeats > 64 || nM < 1) goto usage;
    bench_shape shapes[32];
    int n_shapes = 0;
    if (n_extra) {
        memcpy(shapes, extra, sizeof(bench_shape) * (size_t)n_extra);
        n_shapes = n_extra;
    } else {
        if (!strcmp(model, "gemma") || !strcmp(model, "all"))
            for (int i = 0; i < 5; i++) shapes[n_shapes++] = bench_gemma[i];
        if (!strcmp(model, "llama1b") || !strcmp(model, "all"))
            for (int i = 0; i < 5; i++) shapes[n_shapes++] = bench_llama[i];
        if (!n_shapes) goto usage;
    }
    kern_pool *p;
    if (kern_pool_create(threads, &p)) return 1;
    kern_isa best = kern_isa_best();
    printf("bench_kern: %d threads, medians of %d runs, machine best %s\n", threads, repeats,
           kern_isa_name(best));
    bench_loadavg("start");
    for (int isa = KERN_ISA_AVX2; isa <= (int)best; isa++) {
        if (!bench_has(isas, kern_isa_name((kern_isa)isa))) continue;
        kern_isa_set_max((kern_isa)isa);
        kern_macs_result mc;
        char err[128];
        if (kern_macs_measure(p, 200000, 9, &mc, err, sizeof err) != 0) {
            fprintf(stderr, "bench_kern: probe: %s\n", err);
            return 1;
        }
        printf("\n== %s: probe %s %.1f GMAC/s best, %.1f median (%d threads)\n",
               kern_isa_name((kern_isa)isa), kern_isa_name(mc.isa), mc.best_gmacs, mc.median_gmacs,
               threads);
        printf("%-16s %5s %7s %8s %7s %9s\n", "shape", "M", "format", "GMAC/s", "probe",
               "weight GB/s");
        for (int s = 0; s < n_shapes; s++) {
            int N = shapes[s].N, K = shapes[s].K, nb = K / 32;
            for (int f = 0; f < F_COUNT; f++) {
                if (!bench_has(fmts, bench_fmt_name[f])) continue;
                bench_packs pk;
                if (bench_make(&pk, f, N, K, rotate_mb) != 0) continue;
                for (int mi = 0; mi < nM; mi++) {
                    int M = Ms[mi];
                    int8_t *A = malloc((size_t)M * K);
                    float *as = malloc(sizeof(float) * (size_t)M * nb);
                    int32_t *sum = malloc(sizeof(int32_t) * (size_t)M * nb);
                    float *C = malloc(sizeof(float) * (size_t)M * N);
                    if (!A || !as || !sum || !C) {
                        fprintf(stderr, "bench_kern: out of memory\n");
                        return 1;
                    }
                    for (size_t i = 0; i < (size_t)M * K; i++)
                        A[i] = (int8_t)((int)(bench_rand() >> 8 & 255) % 255 - 127);
                    for (int i = 0; i < M * nb; i++) {
                        int32_t t = 0;
                        for (int k = 0; k < 32; k++)
                            t += A[(size_t)(i / nb) * K + (i % nb) * 32 + k];
                        sum[i] = t;
                        as[i] = 0.02f;
                    }
                    kern_gemm_act act = {
                        .M = M, .A = A, .lda = K, .a_scale = as, .lds = nb, .a_sum = sum};
                    bench_case c = {p, (kern_isa)isa, &act, C, N, &pk, 0};
                    double t = bench_time(&c, repeats);
                    double gmacs = (double)M * N * K / 1e9 / t;
                    printf("%-16s %5d %7s %8.1f %6.1f%% %9.1f\n", shapes[s].name, M,
                           bench_fmt_name[f], gmacs, 100 * gmacs / mc.best_gmacs,
                           (double)pk.bytes / t / 1e9);
                    fflush(stdout);
                    free(A), free(as), free(sum), free(C);
                }
                bench_free(&pk);
            }
        }
    }
    kern_isa_set_max(KERN_ISA_AMX);
    bench_loadavg("end");
    kern_pool_destroy(p);
    return 0;
usage:
    fprintf(stderr, "usage: bench_kern [--threads N] [--repeat R] [--m 1,64,512] [--model "
                    "gemma|llama1b|all] [--isa LIST] [--format int8,int8pc,lut,affine] "
                    "[--rotate-mb MB] [--shape NxK ...]\n");
    return 2;
}
