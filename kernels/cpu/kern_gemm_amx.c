/*
 * kern_gemm_amx.c -- the AMX-INT8 tile kernel of the packed int8 GEMM,
 * kern_q8_tile_amx (interface in kern_gemm_int.h, contract in kern_gemm.h).
 *
 * The kernel itself is kern_gemm_amx.inc, compiled here with the real tile
 * intrinsics under a per-function target attribute (chosen at run time by
 * kern_isa.h, which also obtains the Linux permission for tile data); the
 * unit test compiles the same .inc against an emulation of the tile
 * instructions.  Compilers without AMX support (non-x86, GCC < 11, clang <
 * 12) get a definition that runs the AVX-512 VNNI kernel: same results by
 * contract.
 */
#include "kern_gemm_int.h"

#if defined(__x86_64__) && (defined(__clang__) ? __clang_major__ >= 12 : __GNUC__ >= 11)
#include <immintrin.h>
#include <string.h>

#define KERN_AMX_TARGET \
    __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512vnni,fma")))
#define KERN_AMX_FN kern_q8_tile_amx
#define KERN_V512_FN kern_q8_tile_avx512vnni
#include "kern_gemm_amx.inc"

#else

void kern_q8_tile_amx(const kern_q8_tile *t) { kern_q8_tile_avx512vnni(t); }

#endif
