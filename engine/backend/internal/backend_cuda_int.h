/*
 * backend_cuda_int.h -- internal to the CUDA backend: its context, its
 * form of a weight, the staging arenas, the device KV tier, and the slots
 * that live in their own files.
 *
 *   backend_cuda.c         the table (eng_backend_cuda_create), memory,
 *                          staging and flush, element-wise ops, argmax
 *   backend_cuda_weight.c  weight_upload / free / bytes, linear, embed
 *   backend_cuda_kv.c      the device KV tier, kv_store, attention,
 *                          kv_invalidate, kv_tier
 *
 * Staging.  Small host -> device copies (token ids, positions, attention
 * descriptors and block tables, KV blocks missing on the device) go
 * through `up`: a pinned host buffer and a device buffer bump-allocated in
 * step (the host bytes are filled, then one async copy is enqueued, so the
 * caller's memory may change as soon as the op returns).  kv_store's
 * kernel writes the quantised rows, besides the block's device copy, into
 * `wb`, mapped pinned memory, and the backend records where each token's
 * bytes belong (cuda_wb_rec).  A flush (cuda_flush) waits for the stream,
 * copies every recorded row into its host block, marks the tier's copies
 * clean and resets both arenas; it runs in every download and argmax (the
 * end of a step with logits), when an arena is full, and before a dirty
 * copy would be evicted.  So the host bytes of a block are complete
 * whenever a step has returned its logits; a step without logits (a
 * prefill chunk) leaves its rows pending until the next download (the
 * table has no slot that would mark the end of such a step), and
 * kv_invalidate cancels the pending rows of a block the cache re-allocated.
 *
 * KV tier.  One per block kind (sizes differ): a kern_cuda_tier slot table
 * and device memory for its slots, allocated CUDA_TIER_CHUNK bytes at a
 * time as slots are first used.  The byte budget (PARLEY_CUDA_KV_MIB, by
 * default CUDA_KV_SHARE of the device memory free at the first KV op) is
 * split so both kinds hold the same number of blocks.
 *
 * Threading.  One mutex serialises every slot (ops are enqueued whole on
 * the one stream); eng_forward may run on several threads at once.
 */
#ifndef BACKEND_CUDA_INT_H
#define BACKEND_CUDA_INT_H

#include <pthread.h>
#include <stdint.h>

#include "eng_backend.h"
#include "kern_cuda.h"
#include "kern_cuda_tier.h"

#define CUDA_UP_BYTES ((size_t)64 << 20)    /* host -> device staging */
#define CUDA_WB_BYTES ((size_t)32 << 20)    /* KV write-back staging */
#define CUDA_TIER_CHUNK ((size_t)256 << 20) /* device memory per tier allocation */
#define CUDA_KV_SHARE 0.4                   /* default tier budget: share of free memory */

/* How int8 linear weights are held and multiplied. */
enum {
    CUDA_WFORM_CHANNEL = 0, /* folded per channel, activations per token: IMMA / GEMV (default) */
    CUDA_WFORM_BLOCK = 1    /* the CPU's 32-value blocks, bit for bit: dp4a kernels */
};

/* A bump allocator over a pinned host buffer and its device counterpart. */
typedef struct cuda_arena {
    uint8_t *host; /* pinned host memory */
    uint8_t *dev;  /* device memory (up) or the device address of host (wb) */
    size_t cap;    /* bytes */
    size_t used;   /* bytes handed out since the last flush */
} cuda_arena;

/* One token's K/V rows waiting in wb for their host block. */
typedef struct cuda_wb_rec {
    void *blk;  /* host block (NULL: cancelled by kv_invalidate) */
    int slot;   /* position % B */
    int layer;  /* model layer whose arrays the rows belong to */
    size_t off; /* the rows' bytes in wb */
} cuda_wb_rec;

/* Device copies of one block kind. */
typedef struct cuda_tier {
    kern_cuda_tier *t; /* slot table, NULL until the first KV op */
    size_t bytes;      /* bytes of a block (the layout's block_bytes) */
    size_t stride;     /* bytes between slots (bytes rounded up to 256) */
    long capacity;     /* slots */
    long per_chunk;    /* slots per device allocation */
    uint8_t **chunk;   /* [n_chunk] allocations, NULL until a slot in them is used */
    long n_chunk;      /* entries of chunk */
} cuda_tier;

/* The block table of the last attention call, reused while nothing changed. */
typedef struct cuda_attn_memo {
    int valid;            /* 1 when the fields below describe a launched call */
    uint64_t epoch;       /* the staging epoch its device table lives in */
    uint64_t gen[2];      /* tier generations then */
    int n_desc;           /* descriptors */
    void *const **blocks; /* [n_desc] their block tables */
    int *first, *last;    /* [n_desc] block ranges */
    int *kind;            /* [n_desc] block kinds */
    int *tab;             /* [n_desc] offsets in the device table */
    int cap;              /* entries allocated in the arrays above */
    void **hblk;          /* [n_entries] the host blocks behind the table */
    long hcap;            /* entries allocated in hblk */
    long n_entries;       /* entries of the device table */
    const uint8_t **dtab; /* the device table (in up's device buffer) */
} cuda_attn_memo;

/* The CUDA backend's context. */
typedef struct cuda_be {
    kern_cuda *kc;            /* device context */
    kern_cuda_info info;      /* device facts */
    pthread_mutex_t mu;       /* serialises every slot */
    int n_threads;            /* host threads for loading */
    int gemm_path;            /* KERN_CUDA_GEMM_* forced by PARLEY_CUDA_GEMM, else AUTO */
    int wform;                /* CUDA_WFORM_*: how int8 weights are held (PARLEY_CUDA_WEIGHTS) */
    cuda_arena up;            /* host -> device staging */
    cuda_arena wb;            /* KV write-back staging (mapped) */
    cuda_wb_rec *wbr;         /* pending write-backs */
    size_t n_wbr, cap_wbr;    /* used / allocated */
    uint64_t epoch;           /* flushes so far */
    int have_kv;              /* 1 once the layout below is known */
    eng_kv_layout kvl;        /* copy of the model's KV layout */
    cuda_tier tier[2];        /* device copies per block kind */
    size_t kv_budget;         /* bytes for both tiers */
    const uint8_t **tabbuf;   /* host scratch: device block addresses of a call */
    long tabbuf_cap;          /* entries allocated */
    cuda_attn_memo memo;      /* last attention table */
    float *attn_ws;           /* attention split workspace (device) */
    size_t attn_ws_bytes;     /* its size */
    int32_t *argmax_out;      /* device [argmax_cap] */
    int argmax_cap;           /* entries */
    uint64_t memo_reads;      /* block reads served by a remembered table (all hits) */
    uint64_t upload_bytes;    /* KV bytes copied up */
    uint64_t writeback_bytes; /* KV bytes written through to host blocks */
} cuda_be;

/* A weight in the CUDA backend's form. */
struct eng_bweight {
    int rows, cols;     /* output channels x input dim */
    int use;            /* ENG_WUSE_* */
    kern_cuda_w8 w8;    /* int8 linear weight, per channel (q NULL when none) */
    kern_cuda_w8b w8b;  /* ... in 32-value blocks (CUDA_WFORM_BLOCK; q NULL when none) */
    float *f;           /* fp32 weights [rows][cols] (device), else NULL */
    kern_cuda_etab emb; /* embedding table (cols 0 when none) */
    int8_t *eq;         /* its int8 values (device), when separate */
    float *escale;      /* its scales (device) */
};

/* backend_cuda.c */
void cuda_lock(cuda_be *be);
void cuda_unlock(cuda_be *be);
/* Wait for the stream, write pending KV rows back, reset staging; the sticky status. */
int cuda_flush(cuda_be *be);
/* n bytes of staging in up (host and device addresses), flushing first if
 * full; NULL when n cannot fit (or the context failed). */
uint8_t *cuda_stage(cuda_be *be, size_t n, uint8_t **dev);
/* Copy n host bytes to device dst through up (or synchronously when large). */
void cuda_put(cuda_be *be, void *dst, const void *src, size_t n);

/* backend_cuda_weight.c */
int eng_cuda_weight_upload(void *ctx, const eng_wdesc *d, int native, eng_bweight **out, char *err,
                           size_t errlen);
void eng_cuda_weight_free(void *ctx, eng_bweight *w);
size_t eng_cuda_weight_bytes(void *ctx, const eng_bweight *w);
size_t eng_cuda_weight_read_bytes(void *ctx, const eng_bweight *w);
size_t eng_cuda_linear_ws(void *ctx, int M, int K);
void eng_cuda_linear(void *ctx, int M, const float *x, int ldx, const eng_bweight *w, float *C,
                     int ldc, void *ws);
void eng_cuda_embed(void *ctx, const eng_bweight *w, const int32_t *tok, int T, float mul, float *x,
                    int ldx);

/* backend_cuda_kv.c */
void eng_cuda_kv_store(void *ctx, const eng_kv_layout *l, int n_head, int layer, const float *qkv,
                       int ld, const eng_kv_span *spans, int n_spans);
void eng_cuda_attention(void *ctx, const eng_attn_shape *s, const eng_attn_desc *d, int n_desc);
void eng_cuda_kv_invalidate(void *ctx, const void *blk);
void eng_cuda_kv_tier(void *ctx, eng_backend_kv_tier *out);
/* Copy every pending write-back row into its host block (the stream is idle). */
void cuda_wb_scatter(cuda_be *be);
/* Free the tiers and the attention memo. */
void cuda_kv_free(cuda_be *be);

#endif
