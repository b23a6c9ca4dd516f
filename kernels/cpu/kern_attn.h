/*
 * kern_attn.h -- attention of a group of query heads over one KV head of a
 * paged int8 or fp32 KV cache.
 *
 * Purpose.  With multi-query / grouped-query attention several query heads
 * read the same K and V rows.  kern_attn takes every query head sharing one
 * KV head (and a run of consecutive query tokens) in one call, so each K and
 * V row is fetched and dequantised once per key chunk for all of them,
 * instead of once per (query token, head).  The kernel knows nothing about
 * the engine: the caller describes where one KV head's rows live with plain
 * byte offsets (kern_attn_kv).
 *
 * Data layout.  Key position k lives in block blocks[k / block_tokens], slot
 * s = k % block_tokens; its K row starts k_off + s * row_stride bytes into
 * the block, its V row v_off + s * row_stride bytes in.  int8 rows carry
 * float scales (value = int8 * scale): a K row has head_dim / k_group of
 * them, one per k_group consecutive values, at ks_off + s * ks_stride; a V
 * row has one, at vs_off + s * vs_stride.  (K gets group scales because
 * one scale over a whole K head lets its outlier channels set the step of
 * every other channel: see eng_kv.h.)  Queries and outputs are float rows
 * addressed by token and head strides (kern_attn_q).  Query token t sits at position p = pos0 + t and
 * attends keys [max(0, p - window + 1), p] (window 0: [0, p]); only blocks
 * holding such keys are read, so dead blocks may be NULL.
 *
 * Numerics.  out = softmax(scale * q.k) . v in fp32.  kern_attn_ref is the
 * textbook form over dequantised rows (int8 * scale), two passes with libm
 * expf.  kern_attn picks, at run time:
 *   AVX-512 VNNI (kern_attn_avx512.inc; int8 K/V with k_group 32,
 *     head_dim % 32 == 0, head_dim <= KERN_ATTN_MAX_A5_HD): flash-style
 *     tiles of up to 64 (token, head) pairs over key chunks of 32, the
 *     scores as int8 GEMMs -- each query split once into two int8 parts
 *     per 32 values (kern_attn_round_q: about 16 bits), exact int32 sums
 *     per 32-dim block folded with the key's and the parts' block scales
 *     -- then the online softmax and the weighted V sum in fp32 (see that
 *     file);
 *   AVX2+FMA (head_dim % 8 == 0, k_group % 8 == 0, head_dim <=
 *     KERN_ATTN_MAX_VEC_HD; fp32 caches too): online softmax over key
 *     chunks of KERN_ATTN_CHUNK(head_dim) keys: per chunk, K rows
 *     dequantised once (k_raw * its group's scale), scores (q . k) * scale,
 *     running max / sum update, then acc = acc * alpha + sum p * v_scale *
 *     v_raw;
 *   otherwise the reference.
 * Both vector paths align their key chunks to absolute key positions, and
 * every (query token, head) output is computed by the same sequence of
 * operations whatever other tokens or heads share the call, the call's
 * pos0/n_tok split or the block size, so results are bit-for-bit invariant
 * under chunked prefill, batching and threading.  The AVX2 path differs
 * from the reference by float rounding only; the AVX-512 path by float
 * rounding from the reference over its rounded queries, and by the query
 * rounding itself (at most half a step of max |q_block| / (127 * 254))
 * from the exact one.
 *
 * Threading.  Calls are independent and reentrant (no global state besides
 * the ISA choice); the caller splits work across threads.  Stack use is
 * about 80 KiB (AVX2), 72 KiB (AVX-512).
 *
 * Failure behaviour.  None for valid arguments: n_tok, n_head >= 1,
 * head_dim >= 1, k_group dividing head_dim (int8 rows), pos0 >= 0,
 * window >= 0, every attended block present, out not overlapping q or the
 * cache.
 */
#ifndef KERN_ATTN_H
#define KERN_ATTN_H

#include <stddef.h>

/* Largest head_dim the vector path takes (larger ones run the reference). */
#define KERN_ATTN_MAX_VEC_HD 1024
/* Keys per online-softmax chunk for head_dim hd (a multiple of 8, 8..32). */
#define KERN_ATTN_CHUNK(hd) ((hd) <= 256 ? 32 : (hd) <= 512 ? 16 : 8)

/* Where one KV head's rows live in a paged cache. */
typedef struct kern_attn_kv {
    /* block table: block i holds key positions [i*block_tokens, (i+1)*block_tokens) */
    void *const *blocks;
    int block_tokens;    /* tokens per block (>= 1) */
    int f32;             /* 1: float K/V rows, no scales; 0: int8 rows with float scales */
    size_t k_off, v_off; /* bytes from a block's start to slot 0's K / V row of this head */
    size_t row_stride;   /* bytes between consecutive slots' rows */
    /* int8 rows only: */
    size_t ks_off, vs_off;       /* bytes from a block's start to slot 0's first K / V scale */
    size_t ks_stride, vs_stride; /* bytes between consecutive slots' K / V scales */
    int k_group;                 /* K values per K scale (divides head_dim) */
} kern_attn_kv;

/* Query tokens x heads sharing the KV head, and where their outputs go. */
typedef struct kern_attn_q {
    const float *q;       /* query of token 0, head 0 (head_dim floats) */
    size_t q_tok, q_head; /* float strides between tokens / heads in q */
    float *out;           /* output of token 0, head 0 (head_dim floats) */
    size_t o_tok, o_head; /* float strides between tokens / heads in out */
    int n_tok;            /* query tokens, at positions pos0 .. pos0+n_tok-1 */
    int n_head;           /* query heads */
    int pos0;             /* position of token 0 */
    int window;           /* 0: attend keys [0, p]; else [max(0, p-window+1), p] */
} kern_attn_q;

/* Dispatched kernel (see Numerics). */
void kern_attn(const kern_attn_kv *kv, const kern_attn_q *q, int head_dim, float scale);
/* The AVX-512 VNNI path (kern_attn_avx512.inc): int8 K/V, k_group 32,
 * head_dim a multiple of 32 up to KERN_ATTN_MAX_A5_HD; only call it when
 * kern_isa_best() >= KERN_ISA_AVX512VNNI (kern_attn does). */
#define KERN_ATTN_MAX_A5_HD 256
void kern_attn_avx512(const kern_attn_kv *kv, const kern_attn_q *q, int head_dim, float scale);
/* 1 when kern_attn takes that path for this cache and head_dim (at the
 * current ISA level): its queries are rounded to int8, so its reference
 * is kern_attn_ref over queries passed through kern_attn_round_q. */
int kern_attn_uses_q8(const kern_attn_kv *kv, int head_dim);
/* q (head_dim floats, a multiple of 32) as the int8 path sees it: per
 * block of 32 values, s = max |x| / 127, high = round(x / s) and the
 * residual's low = round((x - high * s) * 254 / s) (half to even, int8; a
 * zero block stays zero): high * s + low * s / 254. */
void kern_attn_round_q(const float *q, int head_dim, float *out);
/* Scalar textbook reference. */
void kern_attn_ref(const kern_attn_kv *kv, const kern_attn_q *q, int head_dim, float scale);

#endif
