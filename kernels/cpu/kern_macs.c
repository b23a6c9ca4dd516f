/*
 * kern_macs.c -- int8 multiply-accumulate throughput (kern_macs.h).
 *
 * Each task runs iters iterations of independent multiply-accumulate
 * chains (12 on VNNI, 6 on AVX2, each with its own operand) over registers (the operands stay in
 * registers: this measures the pipes, not the caches) and stores the
 * folded accumulators.  An empty asm statement per iteration tells the
 * compiler the operands changed, so the products are not hoisted out of
 * the loop; the tasks are 8 per thread (claimed from the pool's counter)
 * so a thread that wakes late does not leave the others idle.
 */
#define _POSIX_C_SOURCE 200809L
#include "kern_macs.h"
#include "pl_err.h"

#include <stdint.h>
#include <stdlib.h>

#include "pl_time.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KERN_MACS_X86 1
#endif

#define KERN_MACS_CHAINS 12     /* VNNI accumulators */
#define KERN_MACS_AVX2_CHAINS 6 /* AVX2 accumulators (16 ymm registers) */

/* One measurement (the pool task argument). */
typedef struct macs_job {
    long iters;       /* loop iterations per task */
    kern_isa isa;     /* which loop */
    uint8_t seed;     /* operand bytes */
    int32_t sink[64]; /* one folded result per task */
} macs_job;

#ifdef KERN_MACS_X86
__attribute__((target("avx2"))) static int32_t macs_avx2(long iters, uint8_t seed) {
    /* 6 chains, each with its own operand (16 ymm registers: 6 accumulators,
     * 6 operands, the shared one and the ones vector) */
    const __m256i a = _mm256_set1_epi8((char)(seed | 1)), one = _mm256_set1_epi16(1);
    __m256i acc[KERN_MACS_AVX2_CHAINS], bv[KERN_MACS_AVX2_CHAINS];
    for (int c = 0; c < KERN_MACS_AVX2_CHAINS; c++) {
        acc[c] = _mm256_setzero_si256();
        bv[c] = _mm256_set1_epi8((char)(seed + c));
    }
    for (long i = 0; i < iters; i++) {
        __asm__("" : "+x"(bv[0]), "+x"(bv[1]), "+x"(bv[2]), "+x"(bv[3]), "+x"(bv[4]), "+x"(bv[5]));
        for (int c = 0; c < KERN_MACS_AVX2_CHAINS; c++)
            acc[c] =
                _mm256_add_epi32(acc[c], _mm256_madd_epi16(_mm256_maddubs_epi16(a, bv[c]), one));
    }
    __m256i s = acc[0];
    for (int c = 1; c < KERN_MACS_AVX2_CHAINS; c++) s = _mm256_xor_si256(s, acc[c]);
    return _mm256_extract_epi32(s, 0) ^ _mm256_extract_epi32(s, 7);
}

__attribute__((target("avx512f,avx512bw,avx512vnni"))) static int32_t macs_vnni(long iters,
                                                                                uint8_t seed) {
    const __m512i a = _mm512_set1_epi8((char)(seed | 1)), b = _mm512_set1_epi8((char)(seed >> 1));
    __m512i acc[KERN_MACS_CHAINS];
    for (int c = 0; c < KERN_MACS_CHAINS; c++) acc[c] = _mm512_setzero_si512();
    __m512i av = a, bv = b;
    for (long i = 0; i < iters; i++) {
        __asm__("" : "+v"(av), "+v"(bv));
        for (int c = 0; c < KERN_MACS_CHAINS; c++) acc[c] = _mm512_dpbusd_epi32(acc[c], av, bv);
    }
    __m512i s = acc[0];
    for (int c = 1; c < KERN_MACS_CHAINS; c++) s = _mm512_xor_si512(s, acc[c]);
    return _mm512_reduce_add_epi32(s);
}
#endif

static void macs_task(void *arg, int task, int thread) {
    macs_job *j = arg;
    (void)thread;
    int32_t r = 0;
#ifdef KERN_MACS_X86
    if (j->isa == KERN_ISA_AVX512VNNI) r = macs_vnni(j->iters, j->seed);
    else if (j->isa == KERN_ISA_AVX2) r = macs_avx2(j->iters, j->seed);
#endif
    j->sink[task & 63] = r;
}

/* MACs one task performs. */
static double macs_per_task(const macs_job *j) {
    if (j->isa == KERN_ISA_AVX512VNNI) return 64.0 * KERN_MACS_CHAINS * (double)j->iters;
    return 32.0 * KERN_MACS_AVX2_CHAINS * (double)j->iters; /* per maddubs */
}

static int macs_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int kern_macs_measure(kern_pool *p, long iters, int repeats, kern_macs_result *out, char *err,
                      size_t errlen) {
    if (!out || iters < 1000 || repeats < 1 || repeats > 1000)
        return pl_errf(err, errlen, KERN_EINVAL, "macs: need iters >= 1000 and 1..1000 repeats");
    macs_job *j = calloc(1, sizeof *j);
    double *g = malloc((size_t)repeats * sizeof *g);
    if (!j || !g) {
        free(j);
        free(g);
        return pl_errf(err, errlen, KERN_ENOMEM, "macs: out of memory");
    }
    int threads = p ? kern_pool_size(p) : 1;
    kern_isa isa = kern_isa_best();
    if (isa == KERN_ISA_AMX) isa = KERN_ISA_AVX512VNNI; /* the tile path is not probed */
    *out = (kern_macs_result){0, 0, isa, threads, repeats};
#ifdef KERN_MACS_X86
    int probed = isa == KERN_ISA_AVX2 || isa == KERN_ISA_AVX512VNNI;
#else
    int probed = 0;
#endif
    if (probed) {
        j->iters = iters;
        j->isa = isa;
        j->seed = (uint8_t)(0x5a ^ repeats);
        for (int r = -1; r < repeats; r++) { /* r = -1: warm-up */
            double t0 = pl_mono_s();
            if (p) kern_pool_run(p, macs_task, j, 8 * threads);
            else
                for (int t = 0; t < 8; t++) macs_task(j, t, 0);
            double dt = pl_mono_s() - t0;
            if (r >= 0) g[r] = macs_per_task(j) * 8 * threads / 1e9 / (dt > 0 ? dt : 1e-9);
        }
        qsort(g, (size_t)repeats, sizeof *g, macs_cmp);
        out->best_gmacs = g[repeats - 1];
        out->median_gmacs =
            repeats % 2 ? g[repeats / 2] : 0.5 * (g[repeats / 2 - 1] + g[repeats / 2]);
    }
    free(j);
    free(g);
    return 0;
}
