/*
 * kern_w4_amx.c -- the AMX-INT8 tile kernel of the W4A8 GEMM,
 * kern_w4_tile_amx (interface in kern_w4_int.h, contract in kern_w4.h).
 *
 * The kernel itself is kern_w4_amx.inc, compiled here with the real tile
 * intrinsics under a per-function target attribute (chosen at run time by
 * kern_isa.h, which also obtains the Linux permission for tile data); the
 * unit test compiles the same .inc against an emulation of the tile
 * instructions.  Compilers without AMX support get a definition that runs
 * the AVX-512 VNNI kernel: same results by contract.
 */
#include "kern_w4_int.h"

#if defined(__x86_64__) && (defined(__clang__) ? __clang_major__ >= 12 : __GNUC__ >= 11)
#include <immintrin.h>
#include <string.h>

#define KERN_W4A_TARGET \
    __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,avx512vnni,fma")))
#define KERN_W4A_FN kern_w4_tile_amx
#define KERN_W4A_TAIL kern_w4_tile_avx512vnni
#include "kern_w4_amx.inc"

#else

void kern_w4_tile_amx(const kern_w4_tile *t) { kern_w4_tile_avx512vnni(t); }

#endif
