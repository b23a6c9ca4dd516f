/*
 * kern_w4_int.h -- internal to kernels/cpu: the tile kernels of the W4A8
 * GEMM (kern_w4.h), one per ISA, what the driver (kern_w4.c) hands them,
 * and the per-thread unpack buffer they share.
 *
 * A tile is up to KERN_TILE_M rows of A times ng consecutive 16-channel
 * groups of a kern_w4pack; the kernel writes columns 0 .. ncol-1 of its
 * rows (ncol = min(16 * ng, N - 16 * g0)) with exactly the values
 * kern_w4.h defines (the unit tests compare every path with
 * kern_w4_tile_scalar bit for bit).
 *
 * Scratch.  Tiles of more than KERN_W4_FUSED_MAX_MR rows unpack weights
 * into the thread's scratch (kern_w4_scratch_bytes(w) bytes, 64-byte
 * aligned; t->scratch NULL means none: the kernel then unpacks in
 * registers for every row count, same bits).  Layout, nb = n_blocks:
 *   lines  uint8 [2][nb][512]   two groups' blocks in kern_wpack's line
 *                               layout (the kernel's choice of byte per code)
 *   wsm    float [2][nb][32]    AFFINE: ws then wm of 16 channels per block
 *   asum   int32 [KERN_TILE_M][nb]  the tile rows' block sums A_b
 */
#ifndef KERN_W4_INT_H
#define KERN_W4_INT_H

#include <stdint.h>

#include "kern_gemm_int.h"
#include "kern_w4.h"

#define KERN_W4_NIB_BYTES 256  /* packed bytes of one (group, block) */
#define KERN_W4_SUPER 8        /* blocks per AFFINE super-block (256 inputs) */
#define KERN_W4_FUSED_MAX_MR 3 /* tiles up to this many rows unpack in registers */

typedef struct kern_w4_tile {
    int mr;               /* rows of A in the tile, 1 .. KERN_TILE_M */
    int g0, ng;           /* first group and number of groups */
    int ncol;             /* columns to write: min(16 * ng, N - 16 * g0) */
    const int8_t *A;      /* row 0 of the tile; rows lda bytes apart */
    int lda;              /* row stride of A in bytes (>= w->K) */
    const float *a_scale; /* block scales of the tile's row 0, a_scale[i * lds + b] */
    int lds;              /* row stride of a_scale in floats (>= w->n_blocks) */
    const kern_w4pack *w; /* the packed weights */
    float *C;             /* element (row 0, channel 16 * g0); rows ldc apart */
    int ldc;              /* row stride of C in floats */
    void *scratch;        /* this thread's unpack buffer (layout above), or NULL */
} kern_w4_tile;

typedef void (*kern_w4_tile_fn)(const kern_w4_tile *t);

void kern_w4_tile_scalar(const kern_w4_tile *t);     /* kern_w4.c */
void kern_w4_tile_avx2(const kern_w4_tile *t);       /* kern_w4_avx2.c */
void kern_w4_tile_avx512vnni(const kern_w4_tile *t); /* kern_w4_avx512.c */

/* Bytes of one thread's scratch for pack w (a multiple of 64). */
static inline size_t kern_w4_scratch_bytes(const kern_w4pack *w) {
    return (size_t)w->n_blocks * (2 * 512 + 2 * 32 * sizeof(float) + KERN_TILE_M * sizeof(int32_t));
}

/* The three parts of a scratch buffer s for pack w. */
static inline uint8_t *kern_w4_scr_lines(void *s) { return (uint8_t *)s; }
static inline float *kern_w4_scr_wsm(void *s, const kern_w4pack *w) {
    return (float *)((uint8_t *)s + (size_t)w->n_blocks * 2 * 512);
}
static inline int32_t *kern_w4_scr_asum(void *s, const kern_w4pack *w) {
    return (int32_t *)((uint8_t *)s + (size_t)w->n_blocks * (2 * 512 + 2 * 32 * sizeof(float)));
}

#endif
