/*
 * gpu_ops.h -- what gpu_ops.c (element-wise ops, weights, the direct
 * kernels, main) and gpu_ops_kv.c (KV store, attention, the device tier)
 * share: the two backends under comparison, the random stream, the
 * host <-> backend copies, and the KV cases main runs.
 */
#ifndef GPU_OPS_H
#define GPU_OPS_H

#include <stddef.h>
#include <stdint.h>

#include "eng_backend.h"

extern eng_backend g_cpu, g_gpu; /* the CPU backend and the CUDA one */
extern uint64_t g_seed;          /* random stream (gpu_gauss) */

/* n gaussian floats times scale (malloc'd). */
float *rnd(size_t n, float scale);
/* Backend memory holding a copy of h (n bytes; h NULL: zeros). */
void *up(eng_backend *b, const void *h, size_t n);
/* A malloc'd host copy of n bytes of backend memory d (NULL on failure). */
void *down(eng_backend *b, const void *d, size_t n);
/* Free backend memory. */
void bfree(eng_backend *b, void *d);

/* gpu_ops_kv.c: 0 pass, else failed (gpu_common.h's case contract). */
int t_kv_store_exact(void);
int t_attention(void);
int t_tier(void);
int t_tier_small(void);

#endif
