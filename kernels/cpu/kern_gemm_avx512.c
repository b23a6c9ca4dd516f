/*
 * kern_gemm_avx512.c -- the AVX-512 VNNI tile kernel of the packed int8 GEMM,
 * kern_q8_tile_avx512vnni (interface in kern_gemm_int.h, contract in
 * kern_gemm.h).
 *
 * The kernel itself is kern_gemm_avx512.inc, compiled here with the real
 * intrinsics and a per-function target attribute (the portable build stays
 * baseline x86-64; kern_isa.h decides at run time whether this runs); the unit
 * test compiles the same .inc against SIMDe to check it on CPUs without
 * AVX-512.  Compilers that cannot target AVX-512 VNNI (non-x86, very old
 * GCC/clang) get a definition that runs the scalar tile kernel: same results
 * by contract, and kern_isa never selects this level there anyway.
 */
#include "kern_gemm_int.h"

#if defined(__x86_64__) && (defined(__clang__) ? __clang_major__ >= 8 : __GNUC__ >= 8)
#include <immintrin.h>
#include <string.h>

#define KERN_V512_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,fma")))
#define KERN_V512_FN kern_q8_tile_avx512vnni

/* acc += dot(unsigned bytes of a, signed bytes of w) per 32-bit lane: the
 * instruction _mm512_dpbusd_epi32(acc, a, w) emits, without the register
 * copies GCC 12 puts around the intrinsic (see kern_gemm_avx512.inc). */
KERN_V512_TARGET static inline __attribute__((always_inline)) __m512i
kern_v512_dpbusd(__m512i acc, __m512i a, __m512i w) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "vm"(w));
    return acc;
}
#define KERN_V512_DPBUSD(acc, a, w) kern_v512_dpbusd(acc, a, w)
#include "kern_gemm_avx512.inc"

#else

void kern_q8_tile_avx512vnni(const kern_q8_tile *t) { kern_q8_tile_scalar(t); }

#endif
