/*
 * kv_value.h -- the versioned binary format of one KV block stored in Redis.
 *
 * Layout (little-endian, offsets in bytes, B = block tokens):
 *    0 u32 magic 0x31564B50 ("PKV1")     4 u16 version (1)   6 u16 flags (bit 0: local payload present)
 *    8 u64 model fingerprint            16 u64 XXH64 of the namespace bytes
 *   24 u64 h_k as keyed (masked)        32 u64 g_k, the check chain (kv_hash.h)
 *   40 u32 block index k-1 (0-based)    44 u32 B
 *   48 u32 global payload bytes         52 u32 local payload bytes (0 when absent)
 *   56 i32[B] token ids of the block
 *   56+4B   global payload, then local payload (eng_kv.h block layouts)
 *   end-8   u64 XXH64(every byte before it, seed 0)
 * Global and local payload share one value: one GET tells whether a resume
 * can start at this block, one checksum covers both, and keys stay one per
 * block boundary.
 *
 * kv_value_decode treats its input as hostile: every length is checked
 * before use and a value is accepted only if it is intact (magic, version,
 * exact length, checksum) AND is the block the caller asked for (model,
 * namespace, position, both chain hashes, token ids, payload sizes).
 */
#ifndef KV_VALUE_H
#define KV_VALUE_H

#include <stddef.h>
#include <stdint.h>

#define KV_VALUE_MAGIC 0x31564B50u
#define KV_VALUE_VERSION 1
#define KV_VALUE_HDR 56
#define KV_VALUE_FLAG_LOCAL 1u

/* Identity and sizes of a block value (what is written / what is expected). */
typedef struct kv_value_meta {
    uint64_t fingerprint;  /* model fingerprint */
    uint64_t ns_hash;      /* kv_hash64(namespace, len, 0) */
    uint64_t key_h;        /* h_k as used in the key */
    uint64_t check_g;      /* g_k */
    uint32_t block_index;  /* k-1 */
    uint32_t block_tokens; /* B */
    uint32_t global_len;   /* global payload bytes */
    uint32_t local_len;    /* local payload bytes (write: 0 = none; expect: size if present) */
} kv_value_meta;

/* Where the payloads are inside a decoded value (pointers into its buffer). */
typedef struct kv_value_view {
    const uint8_t *global; /* global payload, global_len bytes (NULL when 0) */
    const uint8_t *local;  /* local payload or NULL when the value has none */
} kv_value_view;

/* Bytes of a value with these sizes. */
size_t kv_value_size(uint32_t block_tokens, uint32_t global_len, uint32_t local_len);

/* Write a value into dst (kv_value_size bytes).  l may be NULL iff
 * m->local_len == 0. */
void kv_value_encode(uint8_t *dst, const kv_value_meta *m, const int32_t *tokens, const void *g,
                     const void *l);

/* Check buf[0..len) against the expected block *e and its tokens.
 * Returns 0 (view filled) or a KV_MISS_* reason (kv_stats.h):
 * KV_MISS_CORRUPT (not a well-formed intact value), KV_MISS_FOREIGN (another
 * model, namespace, position, chain or payload size), KV_MISS_COLLISION
 * (everything matches but the token ids). */
int kv_value_decode(const uint8_t *buf, size_t len, const kv_value_meta *e, const int32_t *tokens,
                    kv_value_view *v);

#endif
