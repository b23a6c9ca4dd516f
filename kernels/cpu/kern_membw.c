/*
 * kern_membw.c -- memory read-bandwidth measurement (kern_membw.h).
 *
 * The buffer is cut into KERN_MEMBW_CHUNKS_PER_THREAD chunks per pool
 * thread; the pool's atomic task counter hands them out, so both (all)
 * threads stream at once even when one wakes late.  Each chunk is read with
 * eight independent accumulators (AVX2: 256-bit xor, one 32-byte load each;
 * scalar: 64-bit adds) so the loop is bound by loads, not by a dependency
 * chain, and the folded result is stored per task so nothing is elided.
 */
#define _POSIX_C_SOURCE 200809L
#include "kern_membw.h"
#include "pl_err.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kern_gemm.h"
#include "kern_isa.h"
#include "pl_time.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define KERN_MEMBW_X86 1
#endif

#define KERN_MEMBW_CHUNKS_PER_THREAD 16

/* One measurement job (the pool task argument). */
typedef struct membw_job {
    uint8_t *buf;   /* buffer start, 64-byte aligned */
    size_t chunk;   /* bytes per task, a multiple of 256 */
    int avx2;       /* 1: use the AVX2 loop */
    uint64_t *sink; /* one result word per task */
} membw_job;

static uint64_t membw_read_scalar(const uint8_t *p, size_t n) {
    const uint64_t *w = (const uint64_t *)(const void *)p;
    uint64_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, a4 = 0, a5 = 0, a6 = 0, a7 = 0;
    for (size_t i = 0; i < n / 8; i += 8) {
        a0 += w[i], a1 += w[i + 1], a2 += w[i + 2], a3 += w[i + 3];
        a4 += w[i + 4], a5 += w[i + 5], a6 += w[i + 6], a7 += w[i + 7];
    }
    return a0 ^ a1 ^ a2 ^ a3 ^ a4 ^ a5 ^ a6 ^ a7;
}

#ifdef KERN_MEMBW_X86
__attribute__((target("avx2"))) static uint64_t membw_read_avx2(const uint8_t *p, size_t n) {
    __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0, a4 = a0, a5 = a0, a6 = a0,
            a7 = a0;
    for (size_t i = 0; i < n; i += 256) {
        const __m256i *v = (const __m256i *)(const void *)(p + i);
        a0 = _mm256_xor_si256(a0, _mm256_load_si256(v + 0));
        a1 = _mm256_xor_si256(a1, _mm256_load_si256(v + 1));
        a2 = _mm256_xor_si256(a2, _mm256_load_si256(v + 2));
        a3 = _mm256_xor_si256(a3, _mm256_load_si256(v + 3));
        a4 = _mm256_xor_si256(a4, _mm256_load_si256(v + 4));
        a5 = _mm256_xor_si256(a5, _mm256_load_si256(v + 5));
        a6 = _mm256_xor_si256(a6, _mm256_load_si256(v + 6));
        a7 = _mm256_xor_si256(a7, _mm256_load_si256(v + 7));
    }
    a0 = _mm256_xor_si256(_mm256_xor_si256(a0, a1), _mm256_xor_si256(a2, a3));
    a4 = _mm256_xor_si256(_mm256_xor_si256(a4, a5), _mm256_xor_si256(a6, a7));
    a0 = _mm256_xor_si256(a0, a4);
    uint64_t out[4];
    _mm256_storeu_si256((__m256i *)(void *)out, a0);
    return out[0] ^ out[1] ^ out[2] ^ out[3];
}
#endif

static void membw_task(void *arg, int task, int thread) {
    membw_job *j = arg;
    const uint8_t *p = j->buf + (size_t)task * j->chunk;
    uint64_t r;
    (void)thread;
#ifdef KERN_MEMBW_X86
    if (j->avx2) r = membw_read_avx2(p, j->chunk);
    else r = membw_read_scalar(p, j->chunk);
#else
    r = membw_read_scalar(p, j->chunk);
#endif
    j->sink[task] = r;
}

/* Write pass: maps every page (first touch spread over the threads). */
static void membw_fill_task(void *arg, int task, int thread) {
    membw_job *j = arg;
    (void)thread;
    memset(j->buf + (size_t)task * j->chunk, task & 0xff, j->chunk);
}

static int membw_cmp(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void membw_run(kern_pool *p, kern_task_fn fn, membw_job *j, int n_tasks) {
    if (p) {
        kern_pool_run(p, fn, j, n_tasks);
        return;
    }
    for (int t = 0; t < n_tasks; t++) fn(j, t, 0);
}

int kern_membw_measure(kern_pool *p, size_t bytes, int repeats, kern_membw_result *out, char *err,
                       size_t errlen) {
    uint8_t *buf = NULL;
    uint64_t *sink = NULL;
    double *gbs = NULL;
    if (!out || bytes < ((size_t)64 << 10) || repeats < 1 || repeats > 1000) {
        return pl_errf(err, errlen, KERN_EINVAL, "membw: need bytes >= 64 KiB and 1..1000 repeats");
    }
    int threads = p ? kern_pool_size(p) : 1;
    int n_tasks = threads * KERN_MEMBW_CHUNKS_PER_THREAD;
    size_t chunk = bytes / (size_t)n_tasks / 4096 * 4096;
    if (chunk == 0) {
        n_tasks = (int)(bytes / 4096);
        chunk = 4096;
    }
    size_t total = chunk * (size_t)n_tasks;
    buf = kern_huge_alloc(total); /* the same pages as packed weights */
    sink = calloc((size_t)n_tasks, sizeof *sink);
    gbs = malloc((size_t)repeats * sizeof *gbs);
    if (!buf || !sink || !gbs) {
        pl_errf(err, errlen, KERN_ENOMEM, "membw: cannot allocate %zu bytes", total);
        goto err;
    }
    membw_job j = {buf, chunk, 0, sink};
#ifdef KERN_MEMBW_X86
    j.avx2 = kern_isa_detect() >= KERN_ISA_AVX2;
#endif
    membw_run(p, membw_fill_task, &j, n_tasks);
    membw_run(p, membw_task, &j, n_tasks); /* warm-up */
    for (int r = 0; r < repeats; r++) {
        double t0 = pl_mono_s();
        membw_run(p, membw_task, &j, n_tasks);
        double dt = pl_mono_s() - t0;
        gbs[r] = (double)total / 1e9 / (dt > 0 ? dt : 1e-9);
    }
    qsort(gbs, (size_t)repeats, sizeof *gbs, membw_cmp);
    out->best_gbs = gbs[repeats - 1];
    out->median_gbs =
        repeats % 2 ? gbs[repeats / 2] : 0.5 * (gbs[repeats / 2 - 1] + gbs[repeats / 2]);
    out->bytes = total;
    out->threads = threads;
    out->repeats = repeats;
    out->avx2 = j.avx2;
    free(buf);
    free(sink);
    free(gbs);
    return 0;
err:
    free(buf);
    free(sink);
    free(gbs);
    return KERN_ENOMEM;
}
