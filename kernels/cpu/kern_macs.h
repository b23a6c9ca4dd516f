/*
 * kern_macs.h -- measure this machine's int8 multiply-accumulate
 * throughput on a kern_pool with the instruction mix the int8 GEMM uses:
 * the compute-side figure of the prefill and batched-decode roofline, as
 * kern_membw.h is the bandwidth side of decode's.
 *
 * Method.  Every pool thread (the caller is one) runs the same fixed loop
 * of register-only multiply-accumulates on independent accumulators (so
 * the loop is bound by the multiply pipes, not by a dependency chain), then
 * stores its result so nothing is elided.  The mix per ISA, as in
 * kern_gemm_avx2.c / kern_gemm_avx512.c:
 *   avx2        vpmaddubsw (u8 x s8 pairs -> s16) + vpmaddwd (-> s32) +
 *               vpaddd on 256-bit vectors: 32 MACs per maddubs
 *   avx512vnni  vpdpbusd on 512-bit vectors: 64 MACs per instruction
 * AMX (tile) and the scalar path are not probed (result 0: AMX has only
 * run in emulation here).  One warm-up pass, then `repeats` timed passes;
 * GMAC/s = MACs / 1e9 / pass seconds.  The ISA is kern_isa_best() (the
 * level the GEMM runs at, PARLEY_ISA cap included).
 *
 * Threading.  Uses the pool for the duration of the call.  Failure: KERN_EINVAL / KERN_ENOMEM with
 * a message for bad arguments or out of memory; nothing is leaked.
 */
#ifndef KERN_MACS_H
#define KERN_MACS_H

#include <stddef.h>

#include "kern_isa.h"
#include "kern_pool.h"

typedef struct kern_macs_result {
    double best_gmacs;   /* fastest pass, 1e9 int8 MACs per second (0: not probed) */
    double median_gmacs; /* median pass */
    kern_isa isa;        /* the instruction mix measured */
    int threads;         /* pool threads that ran */
    int repeats;         /* timed passes */
} kern_macs_result;

/* Measure int8 MAC throughput on pool p (NULL: the calling thread only)
 * with `repeats` (1..1000) timed passes of `iters` (>= 1000) loop
 * iterations per thread.  Returns 0 and fills *out (best_gmacs 0 when the
 * ISA has no probe), or KERN_EINVAL / KERN_ENOMEM with a message in err. */
int kern_macs_measure(kern_pool *p, long iters, int repeats, kern_macs_result *out, char *err,
                      size_t errlen);

#endif
