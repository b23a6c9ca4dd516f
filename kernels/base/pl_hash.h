/*
 * pl_hash.h -- the tree's one home for FNV-1a.
 *
 * Purpose.  FNV-1a (Fowler/Noll/Vo, "1a": xor the byte, then multiply) is
 * the small non-cryptographic hash parley uses wherever it needs a stable,
 * seedable hash of a short byte string: conversation buckets, default
 * sampling seeds from a turn id, tokenizer identity, hash tables over names,
 * per-tensor RNG streams.  Values feed caches, fingerprints and golden test
 * output, so the function is fixed: changing it changes those values.
 *
 * Use.  Start from PL_FNV64_SEED (the standard offset basis) or from any
 * running value to continue a hash over several pieces:
 *     h = pl_fnv1a64(PL_FNV64_SEED, a, na); h = pl_fnv1a64(h, b, nb);
 * The 32-bit variant exists for the GGUF name tables (which store 32-bit
 * hashes).  It is not a defence against adversarial collisions: callers
 * that index by it compare the keys themselves.
 *
 * Failure behaviour.  None; p may be NULL only when n is 0.  Header only,
 * pure functions.
 */
#ifndef PL_HASH_H
#define PL_HASH_H

#include <stddef.h>
#include <stdint.h>

#define PL_FNV64_SEED 0xcbf29ce484222325ull /* 64-bit offset basis */
#define PL_FNV64_PRIME 0x100000001b3ull     /* 64-bit FNV prime */
#define PL_FNV32_SEED 0x811c9dc5u           /* 32-bit offset basis */
#define PL_FNV32_PRIME 0x01000193u          /* 32-bit FNV prime */

/* FNV-1a 64 of n bytes at p, continuing from h. */
static inline uint64_t pl_fnv1a64(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = (const unsigned char *)p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * PL_FNV64_PRIME;
    return h;
}

/* FNV-1a 64 of the NUL-terminated string s, continuing from h. */
static inline uint64_t pl_fnv1a64_str(uint64_t h, const char *s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * PL_FNV64_PRIME;
    return h;
}

/* FNV-1a 32 of the NUL-terminated string s, continuing from h. */
static inline uint32_t pl_fnv1a32_str(uint32_t h, const char *s) {
    for (; *s; s++) h = (h ^ (unsigned char)*s) * PL_FNV32_PRIME;
    return h;
}

#endif
