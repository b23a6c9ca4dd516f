/*
 * kern_cuda.h -- the C API of parley's CUDA kernels: a device context
 * (stream, cuBLAS / cuBLASLt handles, workspaces), memory and copies, and
 * one launcher per op of the forward pass.  engine/backend/backend_cuda*.c
 * fills the engine's backend table (eng_backend.h) with these; the GPU
 * tests (tests/gpu) call them directly too.
 *
 * Ops and their CPU references (kernels/cpu; checked op by op in
 * tests/gpu/gpu_ops.c):
 *   kern_cuda_rmsnorm      kern_rmsnorm (rows, or the heads of rows: Q/K norm)
 *   kern_cuda_rope         kern_rope_freq, NORM and NEOX pairs
 *   kern_cuda_glu          kern_glu, SiLU and GELU-tanh
 *   kern_cuda_add          kern_add (ldx 0: one row added to every row)
 *   kern_cuda_softcap      tanh(x / cap) * cap
 *   kern_cuda_embed        the CPU backend's lookup, same multiplication order
 *   kern_cuda_quantize     kern_quantize_rows (one scale per row), bit for bit
 *   kern_cuda_linear_i8    W8A8: int32 sums (dp4a GEMV for M <= 8, cuBLASLt
 *                          IMMA above) then C = sum * x_scale * w_scale
 *   kern_cuda_linear_b32   the CPU's W8A8 with 32-value blocks (kern_gemm_q8),
 *                          bit for bit
 *   kern_cuda_quantize_blocks  kern_quantize_blocks, bit for bit
 *   kern_cuda_gemm_f32     cuBLAS SGEMM (fp32 reference models)
 *   kern_cuda_kv_store     the CPU backend's kv_store, bit for bit
 *   kern_cuda_attention    kern_attn over device block copies
 *   kern_cuda_argmax       lowest index of the row maximum, NaN below -inf
 *
 * Data layout.  All pointers an op takes are device memory (cudaMalloc or
 * mapped pinned host memory), row-major with the strides given.  Shapes
 * and the padding of int8 weights are in kern_cuda_plan.h.
 *
 * Threading.  A context belongs to one device and one stream; every op is
 * enqueued on that stream and returns before it runs.  Calls on one
 * context must be serialised by the caller (the backend's mutex); any
 * thread may make them (kern_cuda_bind sets the device for the calling
 * thread; every launcher calls it).
 *
 * Ownership.  The context owns its stream, handles and internal scratch
 * (cuBLASLt workspace, int32 GEMM output, cached matmul plans); callers own
 * every buffer they pass.
 *
 * Failure behaviour.  Open / alloc return errors directly.  Launchers
 * cannot report synchronously: the first error (a failed launch, an
 * unsupported shape, a cuBLAS failure; later, a fault seen by
 * kern_cuda_sync) is kept in the context as its sticky status, with a
 * message, and returned by kern_cuda_sync / kern_cuda_status.  Nothing
 * exits or aborts.
 */
#ifndef KERN_CUDA_H
#define KERN_CUDA_H

#include <stddef.h>
#include <stdint.h>

#include "kern_cuda_err.h"
#include "kern_cuda_plan.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kern_cuda kern_cuda;

/* What the device is (filled at open; mem_free refreshed by kern_cuda_get_info). */
typedef struct kern_cuda_info {
    char name[256];    /* e.g. "NVIDIA H200" */
    int device;        /* CUDA device index */
    int cc_major;      /* compute capability */
    int cc_minor;      /* ... minor part */
    int n_sm;          /* multiprocessors */
    int clock_khz;     /* peak SM clock */
    int mem_clock_khz; /* peak memory clock */
    int bus_bits;      /* memory bus width */
    size_t mem_total;  /* device memory bytes */
    size_t mem_free;   /* free bytes when last asked */
    int runtime;       /* cudaRuntimeGetVersion */
    int driver;        /* cudaDriverGetVersion */
    size_t cublaslt;   /* cublasLtGetVersion */
} kern_cuda_info;

/* Counters of the GEMM paths taken (for the benchmarks and reports). */
typedef struct kern_cuda_stats {
    uint64_t gemv;        /* int8 GEMMs by the dp4a GEMV */
    uint64_t lt;          /* ... by cuBLASLt */
    uint64_t lt_fallback; /* ... that cuBLASLt refused, done by the GEMV instead */
    uint64_t lt_plans;    /* cuBLASLt heuristic queries (plan-cache misses) */
    uint64_t tiled;       /* 32-value-block GEMMs by the tiled dp4a kernel */
} kern_cuda_stats;

/* Devices visible (0 without a driver or device). */
int kern_cuda_device_count(void);
/* Open device `device`.  Returns 0, KERN_CUDA_ENODEV, KERN_CUDA_ENOMEM or
 * KERN_CUDA_EFAIL with a message. */
int kern_cuda_open(kern_cuda **out, int device, char *err, size_t errlen);
/* Wait for the stream, free everything the context owns. */
void kern_cuda_close(kern_cuda *c);
void kern_cuda_get_info(kern_cuda *c, kern_cuda_info *out);
void kern_cuda_get_stats(const kern_cuda *c, kern_cuda_stats *out);
/* Make c's device current on the calling thread (cheap when it already is). */
void kern_cuda_bind(kern_cuda *c);
/* The sticky status: 0, or the first error's code with its message. */
int kern_cuda_status(const kern_cuda *c, char *err, size_t errlen);
/* Record an error found on the host side (the first one sticks). */
void kern_cuda_fail(kern_cuda *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- memory and copies ------------------------------------------------------------------ */

/* Device memory (256-byte aligned), or NULL (out of memory; no status change). */
void *kern_cuda_malloc(kern_cuda *c, size_t bytes);
/* Free device memory (waits for the device first, so queued work may still use it). */
void kern_cuda_free(kern_cuda *c, void *p);
/* Pinned host memory; mapped: also addressable by kernels (kern_cuda_host_dev). NULL on failure. */
void *kern_cuda_host_alloc(kern_cuda *c, size_t bytes, int mapped);
void kern_cuda_host_free(kern_cuda *c, void *p);
/* The device address of mapped pinned memory (NULL if it is not). */
void *kern_cuda_host_dev(kern_cuda *c, void *host);
/* Enqueue a copy of n bytes in any direction (host memory must be pinned). */
void kern_cuda_copy_async(kern_cuda *c, void *dst, const void *src, size_t n);
/* Copy now, from or to any host memory: enqueued on the stream, then waited
 * for.  Returns the sticky status. */
int kern_cuda_copy_sync(kern_cuda *c, void *dst, const void *src, size_t n);
void kern_cuda_memset_async(kern_cuda *c, void *dst, int value, size_t n);
/* Wait until everything enqueued is done; returns the sticky status. */
int kern_cuda_sync(kern_cuda *c);

/* ---- element-wise ops (all floats; see the CPU references above) ------------------------- */

/* rows rows of n floats; row r starts at x + (r / per) * ld + (r % per) * inner
 * (plain rows: per 1; the heads of token rows: per = heads, inner = n), and
 * its result goes to the same place in y (strides ldy / the same inner). */
void kern_cuda_rmsnorm(kern_cuda *c, int rows, int per, int n, const float *x, int ld, int inner,
                       const float *w, float eps, float *y, int ldy);
void kern_cuda_rope(kern_cuda *c, int n_tok, int n_head, int head_dim, float *x, int ldx,
                    const int32_t *pos, const float *inv_freq, int neox);
void kern_cuda_glu(kern_cuda *c, int M, int F, const float *gu, int ldgu, float *h, int ldh,
                   int gelu);
void kern_cuda_add(kern_cuda *c, int M, int n, float *y, int ldy, const float *x, int ldx);
void kern_cuda_softcap(kern_cuda *c, float *x, size_t n, float cap);

/* A table embed() reads rows of. */
typedef struct kern_cuda_etab {
    int rows, cols;     /* entries x width */
    const int8_t *q;    /* int8 values [rows][cols], or NULL for a float table */
    const float *scale; /* [rows][cols / group] */
    int group;      /* values per scale: cols (one per row: q * (s * mul)) or 32 (q * s * mul) */
    const float *f; /* float values [rows][cols] when q is NULL */
} kern_cuda_etab;

/* x[t] = row tok[t] of e times mul, t < T (rows ldx apart). */
void kern_cuda_embed(kern_cuda *c, const kern_cuda_etab *e, const int32_t *tok, int T, float mul,
                     float *x, int ldx);
/* One scale per row, exactly as kern_quantize_rows_ref: q rows ldq bytes
 * apart (K .. ldq-1 zeroed), scale[m]. */
void kern_cuda_quantize(kern_cuda *c, int M, int K, const float *x, int ldx, int8_t *q, int ldq,
                        float *scale);
/* One scale per 32 values, exactly as kern_quantize_blocks_ref: q rows ldq
 * bytes apart (K .. ldq-1 zeroed), scale[m * lds + b] for b < ceil(K / 32). */
void kern_cuda_quantize_blocks(kern_cuda *c, int M, int K, const float *x, int ldx, int8_t *q,
                               int ldq, float *scale, int lds);
/* out[r] (device) = index of the largest of V values of row r (rows ld
 * apart): the lowest such index; NaN counts below -inf (the CPU backend's rule). */
void kern_cuda_argmax(kern_cuda *c, const float *x, int R, int V, int ld, int32_t *out);

/* ---- GEMM ------------------------------------------------------------------------------ */

/* An int8 weight on the device (kern_cuda_plan.h: padding). */
typedef struct kern_cuda_w8 {
    int N, K;           /* output channels x inputs */
    int Np, Kp;         /* padded: kern_cuda_pad_n(N), kern_cuda_pad_k(K) */
    const int8_t *q;    /* [Np][Kp], zeros in the padding */
    const float *scale; /* [Np] per-channel scales, 0 past N */
} kern_cuda_w8;

/* C[m][n] = (float)sum_k xq[m][k] w[n][k] * xs[m] * w.scale[n] for m < M,
 * n < N (xq rows Kp bytes apart, zero past K; C rows ldc floats apart).
 * path: KERN_CUDA_GEMM_AUTO (kern_cuda_gemm_pick), _GEMV or _LT (cuBLASLt,
 * falling back to the GEMV if it refuses).  Returns the path taken. */
int kern_cuda_linear_i8(kern_cuda *c, int M, const int8_t *xq, const float *xs,
                        const kern_cuda_w8 *w, float *C, int ldc, int path);
/* An int8 weight in the CPU's form (kern_gemm.h): 32-value blocks. */
typedef struct kern_cuda_w8b {
    int N, K;            /* output channels x inputs */
    int Np, Kp;          /* kern_cuda_pad_n(N), K rounded up to 32 */
    const int8_t *q;     /* [Np][Kp], zeros in the padding */
    const float *bscale; /* [Np][Kp / 32] block scales, or NULL: per-channel scale */
    const float *scale;  /* [Np] per-channel scales when bscale is NULL */
} kern_cuda_w8b;

/* The CPU's W8A8 on the device, bit for bit: xq rows of Kp bytes
 * quantised per 32 values (kern_cuda_quantize_blocks, xs[m * (Kp / 32) + b]);
 * for every output f = 0; for b in order: f = fmaf((float)S_b, s_b, f) with
 * S_b the int32 sum over block b and s_b = bscale[n][b] * xs[m][b] (block
 * scales) or xs[m][b] (per-channel, then C = f * scale[n]).  A dp4a GEMV
 * for M <= KERN_CUDA_GEMV_MAX_M, a tiled dp4a GEMM above (no tensor cores:
 * the accurate path, not the fast one). */
void kern_cuda_linear_b32(kern_cuda *c, int M, const int8_t *xq, const float *xs,
                          const kern_cuda_w8b *w, float *C, int ldc);

/* The raw int32 sums D[m][n], n < Np (rows ldd >= Np apart, ldd a multiple
 * of 4); returns the path taken. */
int kern_cuda_gemm_i32(kern_cuda *c, int M, const int8_t *xq, const kern_cuda_w8 *w, int32_t *D,
                       int ldd, int path);
/* C[m][n] = x[m] . W[n] in fp32 (W [N][K] row-major; x rows ldx apart). */
void kern_cuda_gemm_f32(kern_cuda *c, int M, int N, int K, const float *x, int ldx, const float *W,
                        float *C, int ldc);

/* ---- KV store and attention ------------------------------------------------------------ */

/* One written token of kv_store. */
typedef struct kern_cuda_kvst_tok {
    uint8_t *blk; /* device copy of its block */
    int slot;     /* position % B */
    int row;      /* its row of qkv */
} kern_cuda_kvst_tok;

/* One kv_store call (one layer). */
typedef struct kern_cuda_kvst {
    const kern_cuda_kvst_tok *tok; /* device [n_tok] */
    int n_tok;                     /* tokens */
    const float *qkv;              /* rows ld floats apart: K at column col0, V after it */
    int ld;                        /* row stride of qkv */
    int col0;                      /* n_head * head_dim */
    kern_cuda_kvgeo g;             /* the layer's arrays in a block */
    uint8_t *stage; /* device address: token i's bytes at i * kern_cuda_kv_token_bytes, or NULL */
} kern_cuda_kvst;

/* Quantise (int8 layouts: K per k_group values, V per head, as the CPU)
 * or copy (fp32) each token's K and V rows into its block copy and, when
 * stage is not NULL, into the staging for the write-back to the host. */
void kern_cuda_kv_store(kern_cuda *c, const kern_cuda_kvst *k);

/* One sequence of an attention call (device memory, filled by the host). */
typedef struct kern_cuda_attn_seq {
    const float *q;  /* query token 0, head 0 */
    float *out;      /* output token 0, head 0 */
    int ldq, ldo;    /* row strides (floats) */
    int n_q;         /* query tokens */
    int pos0;        /* position of query 0 */
    int window;      /* 0: global */
    int item0;       /* its first query token's index among the call's items */
    int first_blk;   /* block index of its first table entry */
    int tab;         /* offset of its entries in the call's table */
    uint64_t k_off;  /* the layer's K rows in a block (kern_cuda_kvgeo) */
    uint64_t v_off;  /* ... V rows */
    uint64_t ks_off; /* ... K scales */
    uint64_t vs_off; /* ... V scales */
} kern_cuda_attn_seq;

/* One attention call. */
typedef struct kern_cuda_attn {
    const kern_cuda_attn_seq *seq; /* device [n_seq], item0 ascending from 0 */
    int n_seq;                     /* sequences */
    int n_items;                   /* query tokens of all sequences */
    const uint8_t *const *tab;     /* device: block device addresses */
    int B, nkv, hd, n_head;        /* block tokens, KV heads, head_dim, query heads */
    int f32;                       /* 1: float K/V */
    int k_group, k_scales;         /* int8 K: values per scale, scales per head */
    float scale;                   /* multiplier on q.k */
    kern_cuda_attn_plan plan;      /* kern_cuda_attn_plan_make for this call */
    float *ws;                     /* split workspace (kern_cuda_attn_ws_floats), or NULL */
} kern_cuda_attn;

void kern_cuda_attention(kern_cuda *c, const kern_cuda_attn *a);

#ifdef __cplusplus
}
#endif

#endif
