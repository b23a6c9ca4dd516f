/*
 * kern_w4_avx512.c -- the AVX-512 VNNI tile kernel of the W4A8 GEMM,
 * kern_w4_tile_avx512vnni (interface in kern_w4_int.h, contract in
 * kern_w4.h); the AMX kernel runs it for the rows past its last 16.
 *
 * The kernel itself is kern_w4_avx512.inc, compiled here with the real
 * intrinsics and a per-function target attribute (kern_isa.h decides at
 * run time whether this runs); the unit test compiles the same .inc against
 * SIMDe to check it on CPUs without AVX-512.  Compilers that cannot target
 * AVX-512 VNNI get a definition that runs the scalar tile kernel: same
 * results by contract, and kern_isa never selects this level there anyway.
 */
#include "kern_w4_int.h"

#if defined(__x86_64__) && (defined(__clang__) ? __clang_major__ >= 8 : __GNUC__ >= 8)
#include <immintrin.h>
#include <string.h>

#define KERN_W4V_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512vnni,avx2,fma")))
#define KERN_W4V_FN kern_w4_tile_avx512vnni

/* acc += dot(unsigned bytes of u, signed bytes of s) per 32-bit lane, as
 * one instruction (GCC 12 wraps the intrinsic in register copies; see
 * kern_gemm_avx512.c). */
KERN_W4V_TARGET static inline __attribute__((always_inline)) __m512i
kern_w4v_dpbusd(__m512i acc, __m512i u, __m512i s) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "vm"(s));
    return acc;
}
#define KERN_W4V_DPBUSD(acc, u, s) kern_w4v_dpbusd(acc, u, s)
#include "kern_w4_avx512.inc"

#else

void kern_w4_tile_avx512vnni(const kern_w4_tile *t) { kern_w4_tile_scalar(t); }

#endif
