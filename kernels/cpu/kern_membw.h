/*
 * kern_membw.h -- measure this machine's memory read bandwidth on a
 * kern_pool, the denominator-side figure of the decode roofline.
 *
 * Purpose.  Single-stream decode reads every weight byte once per token, so
 * its ceiling is (read bandwidth) / (weight bytes per step).  The benchmark
 * measures that bandwidth in the same process and on the same threads as
 * the engine, instead of quoting a datasheet figure.
 *
 * Method.  One buffer of `bytes` (rounded down to a multiple of 4 KiB; use
 * far more than the last-level cache, e.g. 1 GiB) is allocated 64-byte
 * aligned and written once (so its pages are mapped).  A pass splits the
 * buffer into many equal chunks claimed by the pool's threads (the caller
 * is one of them), each chunk streamed start to end with 32-byte AVX2 loads
 * where the CPU has AVX2 (else 8-byte scalar loads) into independent
 * accumulators whose result is stored, so the loads cannot be elided.  One
 * unmeasured warm-up pass, then `repeats` timed passes; GB/s = bytes / 1e9 /
 * pass seconds.  The ISA is the hardware's (kern_isa_detect), not the
 * PARLEY_ISA cap: bandwidth is a property of the machine.
 *
 * Threading.  Uses the pool for the duration of the call (callers must not
 * run other work on it meanwhile).  Ownership: the buffer is freed before
 * returning.  Failure: returns KERN_EINVAL with a message for bad arguments,
 * KERN_ENOMEM when the buffer cannot be allocated; nothing is leaked.
 */
#ifndef KERN_MEMBW_H
#define KERN_MEMBW_H

#include <stddef.h>

#include "kern_pool.h"

typedef struct kern_membw_result {
    double best_gbs;   /* fastest pass, GB/s (1e9 bytes) */
    double median_gbs; /* median pass, GB/s */
    size_t bytes;      /* bytes read per pass */
    int threads;       /* pool threads that streamed */
    int repeats;       /* timed passes */
    int avx2;          /* 1: AVX2 loads were used */
} kern_membw_result;

/* Measure read bandwidth over a buffer of `bytes` (>= 64 KiB) on pool p
 * (NULL: the calling thread only) with `repeats` (1..1000) timed passes.
 * Returns 0 and fills *out, or KERN_EINVAL / KERN_ENOMEM with a message in err (bad argument, out
 * of memory). */
int kern_membw_measure(kern_pool *p, size_t bytes, int repeats, kern_membw_result *out, char *err,
                       size_t errlen);

#endif
