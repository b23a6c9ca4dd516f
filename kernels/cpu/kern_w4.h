/*
 * kern_w4.h -- W4A8: 4-bit weights kept 4-bit in memory, unpacked to int8
 * in registers and multiplied with int8 activations.
 *
 * Purpose.  Decode is bound by reading the weights once per step; a 4-bit
 * file (Q4_0, IQ4_NL, Q4_K) packed as int8 (kern_gemm.h) streams 1.06
 * bytes per weight, packed here 0.56-0.58.  The product is the one of
 * kern_gemm.h, C = A . W^T with A int8 [M][K] (per-(row, 32-block) scales
 * a_scale[m][b], kern_quantize_blocks) and W the 4-bit weights [N][K].
 *
 * Two kinds of weights:
 *   LUT     (Q4_0, IQ4_NL): W[n][k] = lut[code] * bscale[n][k/32], lut 16
 *           int8 values (kern_w4_lut_q4_0: -8..7; kern_w4_lut_iq4_nl),
 *           bscale fp16 -- the int8 block-scaled kern_wpack of the same
 *           codes, 4 bits per code instead of 8;
 *   AFFINE  (Q4_K as the file stores it): code u in 0..15, per 32-block
 *           scale sc[n][k/32] and min mn[n][k/32] (u8; Q4_K's are 6-bit),
 *           per 256-super-block d[n][k/256], dmin[n][k/256] (fp16):
 *           W[n][k] = (d * sc) * u - dmin * mn.
 *
 * Layout (one for every ISA path).  As kern_wpack: group g = channels
 * 16g..16g+15, block b = inputs 32b..32b+31, line q = inputs 32b+4q..+3
 * of the 16 channels (64 codes, byte c*4+j = channel 16g+c, input
 * 32b+4q+j).  A (group, block) is 8 lines in 256 bytes; lines 2i and 2i+1
 * share bytes 64i..64i+63 (low / high nibble):
 *   nib[(g * n_blocks + b) * 256 + 64 * i + p] = line(2i)[p] | line(2i+1)[p] << 4
 * so one 64-byte load gives two kern_wpack lines (one zmm each, or two
 * ymm halves each on AVX2) with an and / a shift.  A group's nibbles are
 * one contiguous stream.  Scales beside it:
 *   LUT     bscale[(g * n_blocks + b) * 16 + c] fp16 (kern_wpack's array)
 *           -- 256 + 32 bytes per 512 weights: 4.5 bits per weight;
 *   AFFINE  scmn[(g * n_blocks + b) * 32 + c] = sc, [.. + 16 + c] = mn;
 *           dd[(g * n_blocks / 8 + s) * 32 + c] = d, [.. + 16 + c] = dmin
 *           (fp16) -- 256 + 32 + 8 bytes per 512 weights: 4.625 bits.
 * Channels past N have code 0 and zero scales (never written to C).
 *
 * Numerics (the contract; every ISA path gives these bits whatever M,
 * the tiling or the thread count).  For output (m, n), blocks b = 0, 1,
 * .. in order, as = a_scale[m][b], S_b = sum over the block of
 * A[m][k] * value(code) and A_b = sum of A[m][k] (exact int32):
 *   LUT     f = 0; for b: f = fmaf((float)S_b, bs * as, f);  C = f
 *           (value = lut[code], bs the fp16 block scale): exactly what
 *           kern_gemm_q8 computes on kern_wpack_init(W, bscale) of the
 *           same codes, bit for bit;
 *   AFFINE  f = 0; for b: { t = fmaf((float)S_b, ws, -((float)A_b * wm));
 *                           f = fmaf(t, as, f); }  C = f
 *           (value = u, ws = d * (float)sc, wm = dmin * (float)mn -- both
 *           exact in float -- and the product A_b * wm rounded first).
 * The affine form is sum_k a*as*((d*sc)*u - dmin*mn) regrouped per block:
 * the block's weight-side sum t (the min subtracted inside the block, one
 * fma and one multiply), then one fma with the activation scale -- one
 * vector operation fewer per output and block than folding the two terms
 * into f separately.  Within float rounding of kern_gemm_w4_affine_ref
 * and of the float GEMM of the dequantised weights.
 *
 * Kernels.  Tiles of up to 4 rows (decode) unpack each 64-byte load of
 * nibbles in registers and use it at once: the weights stream in once,
 * front to back.  Larger tiles (prefill) walk K in chunks of 8 blocks:
 * a chunk of a group triple is unpacked once per tile into an L1-sized
 * buffer on the kernel's stack in kern_wpack's line layout and register
 * blocks of 4 rows x 3 groups run over it (the unpack is paid once per 64
 * rows; the float accumulators wait in the buffer between chunks, so each
 * output is still folded blocks 0, 1, .. in order).  AVX-512 puts the
 * weight bytes in vpdpbusd's unsigned operand (AFFINE u as is; LUT codes
 * map to lut + 128, the accumulators start at -128 * A_b) and broadcasts
 * the activations as the signed one; the activation block sums A_b come
 * from the quantiser (kern_gemm_act.a_sum) when the caller has them.  AVX2
 * multiplies u by a with maddubs (no sign trick; a block's int16 sums
 * cannot overflow: 16 * 15 * 127) and the LUT values as kern_gemm_q8 does
 * (sign trick).  AMX (kern_w4_amx.inc) unpacks a group's chunk into signed
 * bytes (LUT values, AFFINE codes) as B tiles, runs one tdpbssd per
 * 16 rows x 32 inputs and folds each block's C tile in the order above;
 * rows past the last 16 run the AVX-512 VNNI kernel.
 *
 * Threading.  kern_gemm_w4 runs on the given pool (NULL: the calling
 * thread), tasks split as kern_gemm_q8's (kern_gemm_split); it allocates
 * nothing (a prefill tile uses about 44 KiB of its thread's stack).  Packs
 * are read-only after init and may be shared by concurrent calls.
 *
 * Failure.  The init functions return KERN_EINVAL (KERN_ENOMEM) with a message (bad shape, a code
 * or scale out of range, out of memory) and leave the pack empty; the
 * GEMM and row look-up have no failure modes.  Nothing aborts.
 */
#ifndef KERN_W4_H
#define KERN_W4_H

#include <stddef.h>
#include <stdint.h>

#include "kern_gemm.h"
#include "kern_isa.h"
#include "kern_pool.h"

/* ggml's code books: Q4_0 (code - 8) and IQ4_NL (kvalues_iq4nl). */
extern const int8_t kern_w4_lut_q4_0[16];
extern const int8_t kern_w4_lut_iq4_nl[16];

typedef enum kern_w4_kind {
    KERN_W4_NONE = 0,   /* empty pack */
    KERN_W4_LUT = 1,    /* value = lut[code] * fp16 block scale */
    KERN_W4_AFFINE = 2, /* value = (d * sc) * u - dmin * mn (Q4_K) */
} kern_w4_kind;

typedef struct kern_w4pack {
    kern_w4_kind kind; /* which of the two; KERN_W4_NONE when empty */
    int N, K;          /* logical shape: N output channels x K inputs */
    int n_groups;      /* ceil(N / 16) */
    int n_blocks;      /* K / 32 */
    uint8_t *nib;      /* codes, n_groups * n_blocks * 256 bytes, 64-byte aligned (layout above) */
    int8_t lut[16];    /* LUT: the value of each code, in [-127, 127]; zero for AFFINE */
    uint16_t *bscale;  /* LUT: fp16 [n_groups][n_blocks][16]; NULL for AFFINE */
    uint8_t *scmn;     /* AFFINE: [n_groups][n_blocks][32] sc then mn of 16 channels; else NULL */
    uint16_t *dd;      /* AFFINE: fp16 [n_groups][n_blocks / 8][32] d then dmin; else NULL */
} kern_w4pack;

/* LUT kind from int8 codes W[N][K] (row-major) every one of which is one
 * of lut[0..15] (values in [-127, 127]; a repeated value takes its first
 * code) and block scales bscale[N][K/32], rounded to fp16 as
 * kern_wpack_init does (exact for the fp16 scales of Q4_0 / IQ4_NL).
 * K must be a multiple of 32.  Returns 0, or KERN_EINVAL / KERN_ENOMEM with a message in err (bad
 * shape, a value not in lut, a non-finite scale, out of memory); on failure
 * *w is left empty (kern_w4pack_free is safe). */
int kern_w4pack_init_lut(kern_w4pack *w, int N, int K, const int8_t *W, const float *bscale,
                         const int8_t lut[16], char *err, size_t errlen);
/* AFFINE kind from codes U[N][K] (0..15), sc[N][K/32], mn[N][K/32] and
 * d[N][K/256], dmin[N][K/256] (rounded to fp16: exact for Q4_K's).  K must
 * be a multiple of 256.  Returns 0, or KERN_EINVAL / KERN_ENOMEM with a message as above. */
int kern_w4pack_init_affine(kern_w4pack *w, int N, int K, const uint8_t *U, const uint8_t *sc,
                            const uint8_t *mn, const float *d, const float *dmin, char *err,
                            size_t errlen);
void kern_w4pack_free(kern_w4pack *w);
/* Bytes the pack holds (codes + scales). */
size_t kern_w4pack_bytes(const kern_w4pack *w);
/* Row n dequantised, times mul, into out[0..K-1]:
 *   LUT     out[k] = (float)lut[code] * bs * mul  (left to right: equal to
 *           kern_wpack_row_f32 of the equivalent block-scaled kern_wpack)
 *   AFFINE  out[k] = ((d * sc) * u - dmin * mn) * mul  (each operation
 *           rounded, as ggml's dequantize_row_q4_K; mul 1 gives its floats)
 * 0 <= n < N. */
void kern_w4pack_row_f32(const kern_w4pack *w, int n, float mul, float *out);

/* C[m][n] (row stride ldc >= N) for m < M, n < N, as the numerics above.
 * A is [M][lda] int8 in [-127, 127], lda >= K; a_scale[m * lds + b] the
 * scale of row m's block b (lds >= K / 32).  isa above kern_isa_best() is
 * lowered to it.  Runs on pool p (NULL: calling thread). */
void kern_gemm_w4(kern_pool *p, kern_isa isa, int M, const int8_t *A, int lda, const float *a_scale,
                  int lds, const kern_w4pack *w, float *C, int ldc);
/* The general form (kern_gemm.h: block sums, outputs into rows or an
 * argmax); the values are kern_gemm_w4's.  Returns 0, or -1 when out names
 * no output. */
int kern_gemm_w4_run(kern_pool *p, kern_isa isa, const kern_gemm_act *a, const kern_w4pack *w,
                     const kern_gemm_out *out);

/* Plain reference of the AFFINE kind over row-major arrays (U[N][K],
 * sc/mn[N][K/32], d/dmin[N][K/256] as floats, A[M][K], a_scale[M][K/32]):
 *   C[m][n] = sum_b ((float)S_b * (ws * as) - (float)A_b * (wm * as))
 * blocks in order, plain multiply and add (no fma). */
void kern_gemm_w4_affine_ref(int M, int N, int K, const int8_t *A, const float *a_scale,
                             const uint8_t *U, const uint8_t *sc, const uint8_t *mn, const float *d,
                             const float *dmin, float *C);

#endif
