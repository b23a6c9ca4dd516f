/*
 * kv_hash.h -- the cache's fixed 64-bit hash, model fingerprints and block
 * identities.
 *
 * Every key the cache writes (host radix tree, Redis keys)
 * is derived from one function, H = XXH64 (xxHash, 64-bit variant, as
 * specified in xxhash's doc/xxhash_spec.md), implemented here from the
 * specification with no external dependency.  All multi-byte inputs are
 * serialised little-endian byte by byte before hashing and the algorithm
 * reads its input byte-wise little-endian, so a value is the same in every
 * process, build and machine (tests check known-answer vectors and compare
 * two processes).
 *
 * Definitions (LE32/LE64 = little-endian encoding, || = concatenation):
 *
 *   fingerprint = XXH64("parley-kv-fp" || LE32(1 = this recipe's version)
 *                       || LE32(len(arch)) || arch
 *                       || LE64(weights digest, eng_model_digest)
 *                       || LE32(len(tokenizer id)) || tokenizer id
 *                       || LE32(quantisation scheme version)
 *                       || LE32(block tokens B), seed 0)
 *   h_0         = XXH64("parley-kv-ns" || LE64(fingerprint)
 *                       || LE32(len(ns)) || ns, seed 0)
 *   h_k         = XXH64(LE64(h_{k-1}) || LE32(t_{(k-1)B}) .. LE32(t_{kB-1}),
 *                       seed 0)          for the k-th full block, k >= 1
 *
 *   g_0 = XXH64(same bytes as h_0, seed KV_CHECK_SEED)
 *   g_k = XXH64(LE64(g_{k-1}) || same token bytes, seed KV_CHECK_SEED)
 *
 * g_k is an independent "check chain": Redis values carry it so that a
 * value under a colliding key (same h_k, different earlier blocks) is
 * rejected even though Redis has no parent pointers to compare.
 *
 * h_k names the block of tokens [(k-1)B, kB) together with everything
 * before it, so equal h_k means (up to collisions) equal prefixes.  Users of
 * these hashes always verify token ids, so a collision costs a miss only.
 *
 * Thread safety: pure functions, no state.
 */
#ifndef KV_HASH_H
#define KV_HASH_H

#include <stddef.h>
#include <stdint.h>

/* XXH64 of len bytes at p with the given seed (spec-exact). */
uint64_t kv_hash64(const void *p, size_t len, uint64_t seed);

/* Inputs of the model fingerprint (see the recipe above). */
typedef struct kv_fp_inputs {
    const char *arch;        /* architecture name, e.g. "gemma3" (NUL-terminated) */
    uint64_t weights_digest; /* eng_model_digest() of the loaded model */
    /* tokenizer identity, e.g. model + vocab digest in hex (NUL-terminated) */
    const char *tokenizer_id;
    uint32_t quant_version; /* version of the KV quantisation scheme (ENG_KV_QUANT_VERSION) */
    uint32_t block_tokens;  /* B */
} kv_fp_inputs;

/* The model fingerprint of *in (NULL strings hash as empty). */
uint64_t kv_fingerprint(const kv_fp_inputs *in);

/* h_0 for (fingerprint, namespace); ns of ns_len bytes, need not be NUL-terminated. */
uint64_t kv_hash_seed(uint64_t fingerprint, const char *ns, size_t ns_len);

/* h_k from h_{k-1} and the block's B token ids. */
uint64_t kv_hash_block(uint64_t prev, const int32_t *tokens, int block_tokens);

#define KV_CHECK_SEED 0x70617273656B7631ull /* "parsekv1": seed of the check chain g */

/* g_0 and g_k of the check chain. */
uint64_t kv_hash_seed_check(uint64_t fingerprint, const char *ns, size_t ns_len);
uint64_t kv_hash_block_check(uint64_t prev, const int32_t *tokens, int block_tokens);

/* Encode v little-endian into p (8 / 4 bytes). */
void kv_le64_put(uint8_t *p, uint64_t v);
void kv_le32_put(uint8_t *p, uint32_t v);
uint64_t kv_le64_get(const uint8_t *p);
uint32_t kv_le32_get(const uint8_t *p);

#endif
