/*
 * kern_w4_int.h -- internal to kernels/cpu: the tile kernels of the W4A8
 * GEMM (kern_w4.h), one per ISA, what the driver (kern_w4.c) hands them,
 * and the working buffer of their prefill path.
 *
 * A tile is up to KERN_TILE_M rows of A times ng consecutive 16-channel
 * groups of a kern_w4pack; the kernel writes columns 0 .. ncol-1 of its
 * rows (ncol = min(16 * ng, N - 16 * g0)) with exactly the values
 * kern_w4.h defines (the unit tests compare every path with
 * kern_w4_tile_scalar bit for bit).
 *
 * Paths.  Tiles of up to KERN_W4_FUSED_MAX_MR rows unpack the nibbles in
 * registers and use them at once (decode).  Larger tiles take passes of up
 * to KERN_W4_GB groups; each pass walks K in chunks of KERN_W4_KC blocks,
 * unpacks a chunk of a group pair into a kern_w4_buf on the kernel's stack
 * (in L1), runs register blocks of rows over it, and keeps the pass's
 * float accumulators in the buffer between chunks (the fold order per
 * output stays blocks 0, 1, ..).
 */
#ifndef KERN_W4_INT_H
#define KERN_W4_INT_H

#include <stdint.h>

#include "kern_gemm_int.h"
#include "kern_w4.h"

#define KERN_W4_NIB_BYTES 256  /* packed bytes of one (group, block) */
#define KERN_W4_SUPER 8        /* blocks per AFFINE super-block (256 inputs) */
#define KERN_W4_FUSED_MAX_MR 4 /* tiles up to this many rows unpack in registers */
#define KERN_W4_KC 8           /* blocks per chunk of the buffered path */
#define KERN_W4_GB 8           /* groups per pass of the buffered path */
#define KERN_W4_PF 8           /* blocks ahead the fused path prefetches a group's nibbles */

typedef struct kern_w4_tile {
    int mr;               /* rows of A in the tile, 1 .. KERN_TILE_M */
    int g0, ng;           /* first group and number of groups */
    int ncol;             /* columns to write: min(16 * ng, N - 16 * g0) */
    const int8_t *A;      /* row 0 of the tile; rows lda bytes apart */
    int lda;              /* row stride of A in bytes (>= w->K) */
    const float *a_scale; /* block scales of the tile's row 0, a_scale[i * lds + b] */
    int lds;              /* row stride of a_scale / a_sum (>= w->n_blocks) */
    const int32_t *a_sum; /* optional: block sums of A, same addressing as a_scale; NULL:
                           * kernels that need them compute them */
    const kern_w4pack *w; /* the packed weights */
    float *C;             /* element (row 0, channel 16 * g0); rows ldc apart */
    int ldc;              /* row stride of C in floats */
} kern_w4_tile;

/* The buffered path's working set (about 44 KiB, on the kernel's stack). */
typedef struct kern_w4_buf {
    _Alignas(64) uint8_t lines[2][KERN_W4_KC][KERN_PACK_BLOCK_BYTES]; /* a group pair's chunk */
    _Alignas(64) float wsm[2][KERN_W4_KC][32]; /* its scales: LUT bs, AFFINE ws then wm */
    _Alignas(64) float f[KERN_TILE_M][KERN_W4_GB * KERN_PACK_NC]; /* the pass's accumulators */
    int32_t asum[KERN_TILE_M][KERN_W4_KC];                        /* the rows' chunk block sums */
} kern_w4_buf;

typedef void (*kern_w4_tile_fn)(const kern_w4_tile *t);

void kern_w4_tile_scalar(const kern_w4_tile *t);     /* kern_w4.c */
void kern_w4_tile_avx2(const kern_w4_tile *t);       /* kern_w4_avx2.c */
void kern_w4_tile_avx512vnni(const kern_w4_tile *t); /* kern_w4_avx512.c */
void kern_w4_tile_amx(const kern_w4_tile *t);        /* kern_w4_amx.c */

#endif
