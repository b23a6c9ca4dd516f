/*
 * kern_isa_emu.c -- test-only emulation build of the AVX-512 VNNI and AMX
 * tile kernels (kernels/cpu/kern_gemm_avx512.inc, kern_gemm_amx.inc, with
 * kern_v512_core.inc) and of the W4A8 AVX-512 VNNI and AMX tile kernels
 * (kern_w4_avx512.inc, kern_w4_amx.inc), and of the AVX-512 attention
 * kernel (kern_attn_avx512.inc); see kern_isa_emu.h.
 *
 * _mm512_* come from SIMDe (portable implementations, native AVX2 underneath
 * since this file is compiled with -mavx2 -mfma -mf16c), plus six that
 * SIMDe 0.7.4 lacks, defined below.  The AMX tile instructions are emulated
 * here after the Intel SDM (LDTILECFG, TILEZERO, TILELOADD, TILESTORED,
 * TDPBSSD, TILERELEASE): eight tiles of up to 16 rows x 64 bytes with the
 * configured shapes; loads and stores touch exactly rows x colsb bytes at
 * the given stride, as the hardware does, so the sanitizer build catches an
 * out-of-bounds tile access; every condition the hardware faults on (no
 * configuration, tdpbssd shapes that do not chain, a tile used twice) is
 * counted instead, and the test requires the count to stay zero.
 */
#define SIMDE_ENABLE_NATIVE_ALIASES
#include <simde/x86/avx512.h>
#include <simde/x86/f16c.h>

#include <stdint.h>
#include <string.h>

#include "kern_isa_emu.h"

/* ---- AVX-512 intrinsics missing from SIMDe 0.7.4 ------------------------ */

static inline simde__m512 kern_emu_cvtepi32_ps(simde__m512i a) {
    int32_t i[16];
    float f[16];
    simde_mm512_storeu_si512(i, a);
    for (int k = 0; k < 16; k++) f[k] = (float)i[k];
    return simde_mm512_loadu_ps(f);
}

static inline simde__m512 kern_emu_cvtph_ps(simde__m256i a) {
    uint16_t h[16];
    float f[16];
    simde_mm256_storeu_si256(h, a);
    simde_mm256_storeu_ps(f, simde_mm256_cvtph_ps(simde_mm_loadu_si128(h)));
    simde_mm256_storeu_ps(f + 8, simde_mm256_cvtph_ps(simde_mm_loadu_si128(h + 8)));
    return simde_mm512_loadu_ps(f);
}

static inline simde__m512i kern_emu_cvtepu8_epi32(simde__m128i a) {
    uint8_t u[16];
    int32_t i[16];
    simde_mm_storeu_si128(u, a);
    for (int k = 0; k < 16; k++) i[k] = u[k];
    return simde_mm512_loadu_si512(i);
}

static inline simde__m512i kern_emu_cvtepi8_epi32(simde__m128i a) {
    int8_t u[16];
    int32_t i[16];
    simde_mm_storeu_si128(u, a);
    for (int k = 0; k < 16; k++) i[k] = u[k];
    return simde_mm512_loadu_si512(i);
}

/* Masked stores write only the selected lanes (like the hardware). */
static inline void kern_emu_mask_storeu_ps(void *p, simde__mmask16 k, simde__m512 a) {
    float f[16];
    simde_mm512_storeu_ps(f, a);
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1) memcpy((char *)p + 4 * i, &f[i], 4);
}

static inline void kern_emu_mask_storeu_epi32(void *p, simde__mmask16 k, simde__m512i a) {
    int32_t v[16];
    simde_mm512_storeu_si512(v, a);
    for (int i = 0; i < 16; i++)
        if ((k >> i) & 1) memcpy((char *)p + 4 * i, &v[i], 4);
}

#undef _mm512_cvtepi32_ps
#undef _mm512_cvtph_ps
#undef _mm512_cvtepu8_epi32
#undef _mm512_cvtepi8_epi32
#undef _mm512_mask_storeu_ps
#undef _mm512_mask_storeu_epi32
#define _mm512_cvtepi32_ps(a) kern_emu_cvtepi32_ps(a)
#define _mm512_cvtph_ps(a) kern_emu_cvtph_ps(a)
#define _mm512_cvtepu8_epi32(a) kern_emu_cvtepu8_epi32(a)
#define _mm512_cvtepi8_epi32(a) kern_emu_cvtepi8_epi32(a)
#define _mm512_mask_storeu_ps(p, k, a) kern_emu_mask_storeu_ps(p, k, a)
#define _mm512_mask_storeu_epi32(p, k, a) kern_emu_mask_storeu_epi32(p, k, a)

/* ---- AMX tile emulation ------------------------------------------------- */

typedef struct kern_emu_amx {
    int configured;       /* a palette-1 configuration is loaded */
    uint8_t rows[8];      /* rows of each tile (0: tile unused) */
    uint16_t colsb[8];    /* bytes per row of each tile */
    uint8_t t[8][16][64]; /* tile contents, row-major */
    int faults;           /* instructions real hardware would fault on */
    long ops;             /* tile instructions executed */
} kern_emu_amx;

static _Thread_local kern_emu_amx kern_emu_tiles;

/* Tile index valid and configured? Counts a fault when not. */
static int kern_emu_tile_ok(int i) {
    kern_emu_amx *s = &kern_emu_tiles;
    if (!s->configured || i < 0 || i > 7 || s->rows[i] == 0 || s->colsb[i] == 0) {
        s->faults++;
        return 0;
    }
    return 1;
}

static void kern_emu_loadconfig(const void *cfg) {
    kern_emu_amx *s = &kern_emu_tiles;
    const uint8_t *c = cfg;
    s->ops++;
    memset(s->t, 0, sizeof s->t);
    s->configured = 0;
    if (c[0] == 0) return; /* palette 0: back to the initial state */
    int bad = c[0] != 1 || c[1] != 0;
    for (int i = 2; i < 16; i++) bad |= c[i] != 0; /* reserved bytes */
    for (int i = 0; i < 16; i++) {
        uint16_t colsb;
        memcpy(&colsb, c + 16 + 2 * i, 2);
        uint8_t rows = c[48 + i];
        if (i >= 8) {
            bad |= colsb != 0 || rows != 0;
            continue;
        }
        bad |= colsb > 64 || rows > 16 || (colsb == 0) != (rows == 0);
        s->rows[i] = rows;
        s->colsb[i] = colsb;
    }
    if (bad) {
        s->faults++;
        return;
    }
    s->configured = 1;
}

static void kern_emu_zero(int i) {
    kern_emu_tiles.ops++;
    if (kern_emu_tile_ok(i)) memset(kern_emu_tiles.t[i], 0, sizeof kern_emu_tiles.t[i]);
}

static void kern_emu_loadd(int i, const void *base, long stride) {
    kern_emu_tiles.ops++;
    if (!kern_emu_tile_ok(i)) return;
    kern_emu_amx *s = &kern_emu_tiles;
    memset(s->t[i], 0, sizeof s->t[i]);
    for (int r = 0; r < s->rows[i]; r++)
        memcpy(s->t[i][r], (const char *)base + (long)r * stride, s->colsb[i]);
}

static void kern_emu_stored(int i, void *base, long stride) {
    kern_emu_tiles.ops++;
    if (!kern_emu_tile_ok(i)) return;
    kern_emu_amx *s = &kern_emu_tiles;
    for (int r = 0; r < s->rows[i]; r++)
        memcpy((char *)base + (long)r * stride, s->t[i][r], s->colsb[i]);
}

/* C[m][n] += sum_k sum_j A[m][4k+j] * B[k][4n+j], int32 wrapping (SDM TDPBSSD). */
static void kern_emu_dpbssd(int c, int a, int b) {
    kern_emu_tiles.ops++;
    if (!kern_emu_tile_ok(c) || !kern_emu_tile_ok(a) || !kern_emu_tile_ok(b)) return;
    kern_emu_amx *s = &kern_emu_tiles;
    int M = s->rows[c], N = s->colsb[c] / 4, K = s->colsb[a] / 4;
    if (c == a || c == b || a == b || s->rows[a] != M || s->rows[b] != K ||
        s->colsb[b] != s->colsb[c] || s->colsb[c] % 4 || s->colsb[a] % 4) {
        s->faults++;
        return;
    }
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            int32_t acc;
            memcpy(&acc, &s->t[c][m][4 * n], 4);
            uint32_t u = (uint32_t)acc;
            for (int k = 0; k < K; k++)
                for (int j = 0; j < 4; j++)
                    u += (uint32_t)((int32_t)(int8_t)s->t[a][m][4 * k + j] *
                                    (int8_t)s->t[b][k][4 * n + j]);
            acc = (int32_t)u;
            memcpy(&s->t[c][m][4 * n], &acc, 4);
        }
}

static void kern_emu_release(void) {
    kern_emu_amx *s = &kern_emu_tiles;
    s->ops++;
    s->configured = 0;
    memset(s->rows, 0, sizeof s->rows);
    memset(s->colsb, 0, sizeof s->colsb);
}

int kern_amx_emu_take_faults(void) {
    int f = kern_emu_tiles.faults;
    kern_emu_tiles.faults = 0;
    return f;
}

long kern_amx_emu_take_ops(void) {
    long n = kern_emu_tiles.ops;
    kern_emu_tiles.ops = 0;
    return n;
}

#undef _tile_loadconfig
#undef _tile_zero
#undef _tile_loadd
#undef _tile_stored
#undef _tile_dpbssd
#undef _tile_release
#define _tile_loadconfig(cfg) kern_emu_loadconfig(cfg)
#define _tile_zero(i) kern_emu_zero(i)
#define _tile_loadd(i, base, stride) kern_emu_loadd(i, base, (long)(stride))
#define _tile_stored(i, base, stride) kern_emu_stored(i, base, (long)(stride))
#define _tile_dpbssd(c, a, b) kern_emu_dpbssd(c, a, b)
#define _tile_release() kern_emu_release()

/* ---- the kernels, under test names -------------------------------------- */

#define KERN_V512_TARGET
#define KERN_V512_FN kern_q8_tile_avx512vnni_emu
#include "kern_gemm_avx512.inc"

#define KERN_AMX_TARGET
#define KERN_AMX_FN kern_q8_tile_amx_emu
#include "kern_gemm_amx.inc"

#define KERN_W4V_TARGET
#define KERN_W4V_FN kern_w4_tile_avx512vnni_emu
#include "kern_w4_avx512.inc"

#define KERN_W4A_TARGET
#define KERN_W4A_FN kern_w4_tile_amx_emu
#define KERN_W4A_TAIL kern_w4_tile_avx512vnni_emu
#include "kern_w4_amx.inc"

#include <math.h>

#include "kern_avx2_reduce.h"
#include "kern_exp_avx2.h"
#define KERN_A5_TARGET
#define KERN_A5_FN kern_attn_avx512_emu
#define KERN_A5_DPBUSD(acc, u, s) _mm512_dpbusd_epi32(acc, u, s)
#include "kern_attn_avx512.inc"
