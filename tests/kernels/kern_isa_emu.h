/*
 * kern_isa_emu.h -- test-only: the AVX-512 VNNI and AMX tile kernels of
 * kernels/cpu compiled a second time against an emulation of their
 * instructions (kern_isa_emu.c), so test_kern_isa can check the exact kernel
 * source bit for bit on CPUs that have neither (this project's build machine
 * is AVX2-only).  Never linked into parley.
 *
 * The emulation TU is compiled with -mavx2 -mfma -mf16c (SIMDe then fuses
 * fmadd like the hardware does; its unfused fallback would not match the
 * kernels' fmaf contract), so these functions may only be called when
 * kern_isa_detect() >= KERN_ISA_AVX2.  Single test thread assumed for the
 * fault counter (the tile state is thread-local).
 */
#ifndef KERN_ISA_EMU_H
#define KERN_ISA_EMU_H

#include "kern_attn.h"
#include "kern_gemm_int.h"
#include "kern_w4_int.h"

/* kern_gemm_avx512.inc over SIMDe. */
void kern_q8_tile_avx512vnni_emu(const kern_q8_tile *t);
/* kern_gemm_amx.inc over SIMDe and the tile emulation (tail rows go to
 * kern_q8_tile_avx512vnni_emu). */
void kern_q8_tile_amx_emu(const kern_q8_tile *t);
/* kern_w4_avx512.inc (the W4A8 tile kernel) over SIMDe. */
void kern_w4_tile_avx512vnni_emu(const kern_w4_tile *t);
/* kern_w4_amx.inc over SIMDe and the tile emulation (tail rows go to
 * kern_w4_tile_avx512vnni_emu). */
void kern_w4_tile_amx_emu(const kern_w4_tile *t);
/* kern_attn_avx512.inc (int8-query attention) over SIMDe. */
void kern_attn_avx512_emu(const kern_attn_kv *kv, const kern_attn_q *a, int head_dim, float scale);
/* Tile instructions this thread executed that real hardware would fault on
 * (bad or missing configuration, shape mismatch); reset to 0 by the call. */
int kern_amx_emu_take_faults(void);
/* Tile instructions executed by this thread since the last call (reset to 0). */
long kern_amx_emu_take_ops(void);

#endif
