/*
 * kern_attn_avx512.c -- the AVX-512 VNNI attention kernel over int8 KV,
 * kern_attn_avx512 (kern_attn.h; chosen by kern_attn for int8 caches with
 * k_group 32 and head_dim a multiple of 32 up to 256 when kern_isa_best()
 * reaches AVX-512 VNNI).
 *
 * The kernel itself is kern_attn_avx512.inc, compiled here with the real
 * intrinsics under a per-function target attribute; the unit test compiles
 * the same .inc against SIMDe so CPUs without AVX-512 check it too.
 * Compilers that cannot target AVX-512 VNNI get a definition that runs the
 * reference (kern_isa never selects this level there).
 */
#include "kern_attn.h"

#include <stdint.h>

#if defined(__x86_64__) && (defined(__clang__) ? __clang_major__ >= 8 : __GNUC__ >= 8)
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "kern_avx2_reduce.h"
#include "kern_exp_avx2.h"

#define KERN_A5_TARGET \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma")))
#define KERN_A5_FN kern_attn_avx512

/* acc += dot(unsigned bytes of u, signed bytes of s), one instruction (see
 * kern_gemm_avx512.c for why not the intrinsic). */
KERN_A5_TARGET static inline __attribute__((always_inline)) __m512i
kern_a5_dpbusd(__m512i acc, __m512i u, __m512i s) {
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(u), "vm"(s));
    return acc;
}
#define KERN_A5_DPBUSD(acc, u, s) kern_a5_dpbusd(acc, u, s)
#include "kern_attn_avx512.inc"

#else

void kern_attn_avx512(const kern_attn_kv *kv, const kern_attn_q *a, int hd, float scale) {
    kern_attn_ref(kv, a, hd, scale);
}

#endif
