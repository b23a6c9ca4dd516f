/*
 * kern_gemm_int.h -- internal to kernels/cpu: the tile kernels of the packed
 * int8 GEMM, one per ISA, and what the driver (kern_gemm.c) hands them.
 *
 * A tile is up to KERN_TILE_M rows of A times ng consecutive 16-channel
 * groups of a kern_wpack (layout in kern_gemm.h).  The kernel writes
 * columns 0 .. ncol-1 of its rows (ncol = min(16 * ng, N - 16 * g0); the
 * padding channels past N are never written), either the scaled float
 * result (C) or, when C32 is non-NULL, the raw int32 sums (block scales
 * taken as 1).  Every kernel must produce exactly the values defined in
 * kern_gemm.h (fixed order, one fmaf per block with the activation block
 * scale, for both pack kinds; int32 mode sums all of K in int32); the unit tests compare every
 * available path with the scalar one bit for bit.
 *
 * Kernels for ISAs the compiler cannot target are still declared; the
 * driver only calls a kernel when kern_isa_best() reaches its level.
 */
#ifndef KERN_GEMM_INT_H
#define KERN_GEMM_INT_H

#include <stdint.h>

#include "kern_gemm.h"

#define KERN_TILE_M 64                                      /* most rows of A one tile covers */
#define KERN_PACK_NC 16                                     /* channels per packed group */
#define KERN_PACK_KB 32                                     /* inputs per block (the Q8_0 block) */
#define KERN_PACK_BLOCK_BYTES (KERN_PACK_NC * KERN_PACK_KB) /* 512: one (group, block) */
#define KERN_GEMM_MAX_GPT 8 /* most groups one task of the drivers covers */

typedef struct kern_q8_tile {
    int mr;               /* rows of A in the tile, 1 .. KERN_TILE_M */
    int g0, ng;           /* first group and number of groups */
    int ncol;             /* columns to write: min(16 * ng, N - 16 * g0) */
    const int8_t *A;      /* row 0 of the tile; rows lda bytes apart, zero past K up to Kp */
    int lda;              /* row stride of A in bytes (>= w->Kp) */
    const float *a_scale; /* float mode: block scales of the tile's row 0, a_scale[i * lds + b] */
    int lds;              /* row stride of a_scale / a_sum (>= w->n_blocks) */
    const int32_t *a_sum; /* float mode, optional: block sums of A (kern_block_sums), same
                           * addressing as a_scale; NULL: kernels that need them compute them */
    const kern_wpack *w;  /* the packed weights */
    float *C;             /* float mode: element (row 0, channel 16 * g0); rows ldc apart */
    int32_t *C32;         /* int32 mode when non-NULL: same addressing as C */
    int ldc;              /* row stride of C / C32 in elements */
} kern_q8_tile;

typedef void (*kern_q8_tile_fn)(const kern_q8_tile *t);

void kern_q8_tile_scalar(const kern_q8_tile *t);     /* kern_gemm.c */
void kern_q8_tile_avx2(const kern_q8_tile *t);       /* kern_gemm_avx2.c */
void kern_q8_tile_avx512vnni(const kern_q8_tile *t); /* kern_gemm_avx512.c */
void kern_q8_tile_amx(const kern_q8_tile *t);        /* kern_gemm_amx.c */

/* The driver's work split, shared by the packed GEMMs (kern_gemm_q8,
 * kern_gemm_w4): M rows in *n_mt tiles of up to KERN_TILE_M rows, n_groups
 * 16-channel groups in runs of *gpt (1..KERN_GEMM_MAX_GPT) per task, about 8 tasks per
 * thread of p (NULL: one thread).  Returns the task count; task i covers
 * group run i / *n_mt and row tile i % *n_mt (group-major, so consecutive
 * tasks share weights). */
int kern_gemm_split(const kern_pool *p, int M, int n_groups, int *n_mt, int *gpt);

/* What task `task` of such a split covers, for M rows and a weight of N
 * channels in n_groups groups. */
typedef struct kern_gemm_span {
    int m0, mr; /* first row, rows (1..KERN_TILE_M) */
    int g0, ng; /* first group, groups (1..gpt) */
    int ncol;   /* output channels: ng * KERN_PACK_NC, fewer at the end of N */
} kern_gemm_span;
kern_gemm_span kern_gemm_task_span(int task, int n_mt, int gpt, int M, int n_groups, int N);

/* One task body for every packed weight format (q8 here, w4 in
 * kern_w4.c): a format's job struct starts with a kern_gemm_job, and
 * kern_gemm_job_task (a kern_pool task) takes the task's span, sends the
 * tile kernel's output into a tile buffer and through the epilogue when
 * the caller asked for rows / an argmax (out != NULL), else straight into
 * the dense C (or C32) at the span's place, and calls `tile` to run the
 * format's kernel there. */
typedef struct kern_gemm_job kern_gemm_job;
struct kern_gemm_job {
    int M;                    /* rows of A */
    int n_mt;                 /* row tiles */
    int gpt;                  /* groups per task */
    int n_groups, N;          /* the weight's 16-channel groups and channels */
    kern_isa isa;             /* the level the job runs at (the epilogue's argmax) */
    const kern_gemm_out *out; /* rows / argmax epilogue, or NULL: the kernel writes C / C32 */
    float *C;                 /* dense float output (row 0, channel 0), or NULL */
    int32_t *C32;             /* dense int32 output instead of C, or NULL */
    int ldc;                  /* row stride of C / C32 in elements */
    /* Run the format's tile kernel on span sp, writing element (row sp->m0,
     * channel 16 * sp->g0) at C (or C32 when C is NULL), rows ldc apart. */
    void (*tile)(const kern_gemm_job *j, const kern_gemm_span *sp, float *C, int32_t *C32, int ldc);
};
void kern_gemm_job_task(void *arg, int task, int thread);

/* isa lowered to kern_isa_best(). */
kern_isa kern_gemm_level(kern_isa isa);

/* A task's epilogue when the caller asked for rows / an argmax
 * (kern_gemm_out): the tile's mr rows (from row m0) of ncol outputs (from
 * column n0 of this GEMM), written by the tile kernel into buf (rows ldb
 * apart), copied to out->rows and / or max-merged into out->amax (atomic:
 * tasks of other column ranges merge into the same rows). */
void kern_gemm_out_tile(const kern_gemm_out *out, kern_isa isa, int m0, int mr, int n0, int ncol,
                        const float *buf, int ldb);

/* fp16 bits -> float (exact), and float -> fp16 bits (round to nearest even). */
float kern_f16_to_f32(uint16_t h);
uint16_t kern_f32_to_f16(float f);

#endif
