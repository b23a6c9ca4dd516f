/*
 * kern_w4_amx.c -- the AMX-INT8 tile kernel of the W4A8 GEMM (placeholder:
 * runs the AVX-512 VNNI kernel).
 */
#include "kern_w4_int.h"

void kern_w4_tile_amx(const kern_w4_tile *t) { kern_w4_tile_avx512vnni(t); }
