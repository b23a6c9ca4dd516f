/*
 * eng_kv.h -- paged attention KV storage: block layout, block allocator
 * interface and per-sequence block tables.
 *
 * Purpose.  The forward pass writes every new token's K and V into fixed-size
 * blocks of B tokens (B = block_tokens, 16 or 32); the cache module keeps the
 * same blocks in its pool, indexes them by token prefix and hands them back
 * to a sequence that resumes a conversation.  This header is the contract
 * between the two.
 *
 * Two block kinds, because sliding-window layers only need the last W tokens:
 *   ENG_KV_GLOBAL  holds every KV-owning layer with window == 0
 *   ENG_KV_LOCAL   holds every KV-owning layer with window  > 0
 * A layer that reads another layer's KV (cross-layer sharing: kv_src[i] != i)
 * stores nothing: it has no K/V projections and attends over its source's
 * KV, so shared KV is stored once.
 *
 * Byte layout of one block of kind k, for each owning layer of that kind in
 * layer order (int8 models):
 *   K int8 [B][n_head_kv][head_dim] | V int8 [B][n_head_kv][head_dim]
 *   | K scale f32 [B][n_head_kv][head_dim / k_group] | V scale f32 [B][n_head_kv]
 * Symmetric, value = int8 * scale: V has one scale per token per KV head, K
 * one per k_group = 32 consecutive values of a head (the whole head when
 * head_dim is not a multiple of 32).  Why K is finer: its channels are far
 * from alike (Gemma 3's K norm weights scale a few of them up), so one
 * scale per head lets those set the step for all.  On Gemma 3 270M against
 * the fp32 path (tests/bench/int8_fidelity.py, 1022 teacher-forced tokens,
 * everything else fp32): K per head cost mean KL 0.0062 nats, K per 32
 * values 0.00064; V per head 0.00015.  The K scales add 4 / 32 bytes per
 * value.  ENG_KV_QUANT_VERSION names this scheme in cache fingerprints.
 * fp32 reference models (ENG_PREC_FP32, layout built with kv_fp32 = 1) use
 * the same block structure with float elements and no scale arrays:
 *   K f32 [B][n_head_kv][head_dim] | V f32 [B][n_head_kv][head_dim]
 * The eng_kv_layer_* helpers below give each array's address either way.
 *
 * Block i of a sequence holds positions [i*B, (i+1)*B).  A local layer of
 * window W at position p attends positions (p-W, p] (the last W tokens
 * including itself, as transformers' Gemma3 and llama.cpp do).  A local block
 * is dead once no future query can attend it: (i+1)*B <= n_tokens - max_window
 * (conservative by one token); the forward pass then releases it and stores
 * NULL in the local table.
 *
 * Forking.  eng_kvseq_fork makes a second sequence continue from the same
 * tokens (the choices of an n > 1 request, prefilled once): every full
 * block is shared -- one more reference through alloc.retain, never
 * written again by either sequence, because the forward pass writes only
 * positions >= n_tokens -- and the partial last block, which both would
 * write into, is copied.  An allocator without retain gets copies of the
 * full blocks too (the prompt is still computed once).  Each sequence
 * then releases its own references, so a shared block lives until its
 * last holder drops it.
 *
 * Threading: a layout is immutable after init and may be shared.  An
 * eng_kvseq belongs to one caller at a time (no internal locking); the
 * allocator callbacks may be called from the thread that calls eng_forward.
 *
 * Ownership: every non-NULL block pointer in an eng_kvseq's tables is one
 * reference held by that sequence, released through alloc.release by
 * eng_kvseq_free / eng_kvseq_truncate / the forward pass (dead local blocks).
 *
 * Failure behaviour: functions return 0 or a negative ENG_KV_E* code and,
 * where they take (err, errlen), write a message; nothing is changed on
 * failure.
 */
#ifndef ENG_KV_H
#define ENG_KV_H

#include <stddef.h>
#include <stdint.h>

/* The layout is built from the model's configuration (eng_config.h), by
 * the model part (engine/model/kv_layout.c): this header names the struct
 * only, so the KV storage and the backend that reads it depend on nothing
 * of the model. */
struct eng_config;

#define ENG_KV_MAX_LAYERS 256 /* model layers a layout describes (>= ENG_MAX_LAYERS) */

/* Error codes of this module (negative). */
#define ENG_KV_EINVAL (-601) /* bad argument or inconsistent state */
#define ENG_KV_ENOMEM (-602) /* host allocation or allocator out of blocks */

enum { ENG_KV_GLOBAL = 0, ENG_KV_LOCAL = 1 };

/* Version of the int8 KV scheme above (1: one K scale per head; 2: per 32
 * values).  Cache fingerprints include it, so blocks written under another
 * scheme are never read back. */
#define ENG_KV_QUANT_VERSION 2
/* K values per K scale for a head of head_dim values. */
static inline int eng_kv_k_group(int head_dim) { return head_dim % 32 == 0 ? 32 : head_dim; }
/* Bytes one token takes in one owning layer of the int8 layout: K and V
 * rows plus their scales (head_dim / k_group for K, one for V, per KV head). */
static inline size_t eng_kv_token_bytes(int n_head_kv, int head_dim) {
    size_t k_scales = (size_t)(head_dim / eng_kv_k_group(head_dim));
    return (size_t)n_head_kv * (2 * (size_t)head_dim + sizeof(float) * (k_scales + 1));
}

typedef struct eng_kv_layout {
    int block_tokens;                  /* B: tokens per block */
    int n_head_kv, head_dim;           /* KV heads and their dimension */
    int kv_fp32;                       /* 1: float K/V, no scale arrays (fp32 reference models) */
    int k_group;                       /* K values per K scale, eng_kv_k_group(head_dim) */
    int k_scales;                      /* K scales per token per KV head: head_dim / k_group */
    int n_layers[2];                   /* owning layers per kind */
    size_t block_bytes[2];             /* bytes of one block per kind (0 if no such layers) */
    size_t layer_bytes;                /* bytes one owning layer takes inside a block */
    int max_window;                    /* largest local window (0 if none) */
    int layer_kind[ENG_KV_MAX_LAYERS]; /* per model layer: kind of its KV source */
    /* per model layer: byte offset of its source's K within a block */
    size_t layer_offset[ENG_KV_MAX_LAYERS];
} eng_kv_layout;

/* Build the int8 layout of config c for blocks of block_tokens (1..4096)
 * (engine/model/kv_layout.c).
 * Returns 0, or ENG_KV_EINVAL with a message (bad block size, kv_src not
 * pointing at an owning layer, n_layer out of range). */
int eng_kv_layout_init(eng_kv_layout *l, const struct eng_config *c, int block_tokens, char *err,
                       size_t errlen);
/* Same, choosing the element type: kv_fp32 = 1 builds the fp32 layout. */
int eng_kv_layout_init_ex(eng_kv_layout *l, const struct eng_config *c, int block_tokens,
                          int kv_fp32, char *err, size_t errlen);

/* Split a byte budget into block counts per kind, the one rule the cache's
 * pool and the scheduler's budget share: with both kinds, local_share
 * local blocks per global one (rounded down, then local blocks dropped
 * until the total fits); with one kind, all of it.  n[k] is 0 for a kind
 * the layout has no layers of; n[0] * block_bytes[0] + n[1] *
 * block_bytes[1] <= budget always.  local_share > 0. */
void eng_kv_layout_split(const eng_kv_layout *l, size_t budget, double local_share, long n[2]);

/* Addresses inside block blk for model layer `layer` (which may be a sharing
 * layer: the offsets are its source's).  Scale helpers return NULL for fp32
 * layouts. */
void *eng_kv_layer_k(const eng_kv_layout *l, void *blk, int layer);
void *eng_kv_layer_v(const eng_kv_layout *l, void *blk, int layer);
float *eng_kv_layer_kscale(const eng_kv_layout *l, void *blk, int layer);
float *eng_kv_layer_vscale(const eng_kv_layout *l, void *blk, int layer);

/* Block allocator: the cache implements it over its pool; eng_kv_allocator_malloc
 * is a plain malloc one for standalone use. */
typedef struct eng_kv_allocator {
    void *ctx; /* allocator state, passed back to the callbacks */
    void *(*alloc)(void *ctx,
                   int kind); /* a block of block_bytes[kind], or NULL when out of budget */
    void (*release)(void *ctx, int kind, void *blk); /* drop the sequence's reference */
    /* take one more reference to an allocated block (a fork shares it):
     * 0, or -1 when it cannot (the fork then copies that block); NULL:
     * blocks are never shared, forks copy them */
    int (*retain)(void *ctx, int kind, void *blk);
} eng_kv_allocator;

/* Fill a with a malloc-backed allocator for layout l (which must outlive it).
 * Returns 0 or ENG_KV_ENOMEM.  Free its context with eng_kv_allocator_malloc_free
 * after every sequence using it has been freed. */
int eng_kv_allocator_malloc(eng_kv_allocator *a, const eng_kv_layout *l);
void eng_kv_allocator_malloc_free(eng_kv_allocator *a);
/* Blocks currently allocated by a malloc allocator, per kind (for tests). */
long eng_kv_allocator_malloc_live(const eng_kv_allocator *a, int kind);

/* Per-sequence state (plain struct, owned by the caller). */
typedef struct eng_kvseq {
    const eng_kv_layout *layout; /* layout of every block referenced */
    eng_kv_allocator alloc;      /* where blocks come from / go back to */
    int n_tokens;                /* tokens whose KV is stored = next position */
    int n_blocks, cap_blocks;    /* table entries used / allocated */
    /* block tables per kind; blk[ENG_KV_LOCAL][i] is NULL once block i is dead;
     * a table of a kind with no layers is all NULL */
    void **blk[2];
    int32_t *tokens; /* token ids stored (for the cache's insertion); cap_blocks*B entries */
} eng_kvseq;

/* Initialise an empty sequence.  Returns 0 or ENG_KV_EINVAL. */
int eng_kvseq_init(eng_kvseq *s, const eng_kv_layout *l, const eng_kv_allocator *a, char *err,
                   size_t errlen);
/* Release every block the sequence references and its tables. */
void eng_kvseq_free(eng_kvseq *s);
/* Resume an EMPTY sequence from cached blocks: n_tokens tokens, gblk/lblk
 * hold ceil(n_tokens/B) block pointers each (either may be NULL
 * when the layout has no layers of that kind; lblk may hold NULLs for dead
 * blocks but not for blocks a query at position n_tokens can attend).  When
 * n_tokens is not a multiple of B the last block is partly filled and the
 * sequence writes its next tokens into it: it must be the sequence's own
 * (a copy of a cached partial block, never one the cache or another
 * sequence reads).  The caller has already taken one reference per block
 * for the sequence.
 * Returns 0, ENG_KV_EINVAL (not empty, bad count, missing live block) or
 * ENG_KV_ENOMEM. */
int eng_kvseq_adopt_prefix(eng_kvseq *s, int n_tokens, void *const *gblk, void *const *lblk,
                           const int32_t *tokens);
/* Make dst -- initialised, EMPTY, same layout and allocator as src --
 * hold src's tokens and KV (see "Forking"): full blocks shared through
 * alloc.retain (copied without it), the partial last block copied; dead
 * local blocks stay NULL.  *n_shared (may be NULL) gets the leading blocks
 * now shared.  Returns 0, ENG_KV_EINVAL (dst not empty, other layout or
 * allocator) or ENG_KV_ENOMEM (dst left empty, nothing retained). */
int eng_kvseq_fork(eng_kvseq *dst, const eng_kvseq *src, int *n_shared);

/* Forget every token from n_tokens on, releasing whole blocks past it.
 * Fails with ENG_KV_EINVAL when n_tokens > s->n_tokens or when a local block
 * that a query at position n_tokens would attend has already been released. */
int eng_kvseq_truncate(eng_kvseq *s, int n_tokens);

/* Internal to the engine (used by eng_forward): make room for n_new more
 * tokens, allocating blocks; on failure everything allocated is released
 * and the sequence is unchanged.  Returns 0, ENG_KV_ENOMEM. */
int eng_kvseq_reserve(eng_kvseq *s, int n_new, int *n_blocks_before);
/* Undo eng_kvseq_reserve: release blocks from index n_blocks_before on. */
void eng_kvseq_unreserve(eng_kvseq *s, int n_blocks_before);
/* Commit n_new tokens (ids in tok) after their KV is written, and release
 * local blocks that became dead. */
void eng_kvseq_commit(eng_kvseq *s, const int32_t *tok, int n_new);

#endif
