/*
 * kv_hash.c -- XXH64 from the xxHash specification, plus the fingerprint and
 * block-identity recipes documented in kv_hash.h.
 *
 * A small streaming state lets the recipes hash their little-endian fields
 * without building a buffer.  Input is consumed byte-wise (kv_le*_get), so
 * the result does not depend on host endianness or alignment.
 */
#include "kv_hash.h"

#include <string.h>

#define P1 0x9E3779B185EBCA87ull
#define P2 0xC2B2AE3D27D4EB4Full
#define P3 0x165667B19E3779F9ull
#define P4 0x85EBCA77C2B2AE63ull
#define P5 0x27D4EB2F165667C5ull

void kv_le64_put(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}

void kv_le32_put(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t kv_le64_get(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

uint32_t kv_le32_get(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static uint64_t round1(uint64_t acc, uint64_t lane) {
    acc += lane * P2;
    acc = rotl(acc, 31);
    return acc * P1;
}

static uint64_t merge(uint64_t acc, uint64_t v) {
    acc ^= round1(0, v);
    return acc * P1 + P4;
}

/* Streaming XXH64 state. */
typedef struct xs {
    uint64_t v[4];   /* the four stripe accumulators */
    uint64_t seed;   /* seed, for inputs shorter than one stripe */
    uint64_t total;  /* bytes consumed so far */
    uint8_t buf[32]; /* pending bytes of an incomplete stripe */
    size_t nbuf;     /* bytes used in buf */
} xs;

static void xs_init(xs *s, uint64_t seed) {
    s->v[0] = seed + P1 + P2;
    s->v[1] = seed + P2;
    s->v[2] = seed;
    s->v[3] = seed - P1;
    s->seed = seed;
    s->total = 0;
    s->nbuf = 0;
}

static void xs_stripe(xs *s, const uint8_t *p) {
    for (int i = 0; i < 4; i++) s->v[i] = round1(s->v[i], kv_le64_get(p + 8 * i));
}

static void xs_update(xs *s, const void *data, size_t len) {
    const uint8_t *p = data;
    s->total += len;
    if (s->nbuf) {
        size_t take = 32 - s->nbuf < len ? 32 - s->nbuf : len;
        memcpy(s->buf + s->nbuf, p, take);
        s->nbuf += take;
        p += take;
        len -= take;
        if (s->nbuf < 32) return;
        xs_stripe(s, s->buf);
        s->nbuf = 0;
    }
    while (len >= 32) {
        xs_stripe(s, p);
        p += 32;
        len -= 32;
    }
    memcpy(s->buf, p, len);
    s->nbuf = len;
}

static uint64_t xs_digest(const xs *s) {
    uint64_t h;
    if (s->total >= 32) {
        h = rotl(s->v[0], 1) + rotl(s->v[1], 7) + rotl(s->v[2], 12) + rotl(s->v[3], 18);
        for (int i = 0; i < 4; i++) h = merge(h, s->v[i]);
    } else {
        h = s->seed + P5;
    }
    h += s->total;
    const uint8_t *p = s->buf;
    size_t len = s->nbuf;
    while (len >= 8) {
        h ^= round1(0, kv_le64_get(p));
        h = rotl(h, 27) * P1 + P4;
        p += 8;
        len -= 8;
    }
    if (len >= 4) {
        h ^= (uint64_t)kv_le32_get(p) * P1;
        h = rotl(h, 23) * P2 + P3;
        p += 4;
        len -= 4;
    }
    while (len > 0) {
        h ^= (uint64_t)(*p) * P5;
        h = rotl(h, 11) * P1;
        p++;
        len--;
    }
    h ^= h >> 33;
    h *= P2;
    h ^= h >> 29;
    h *= P3;
    h ^= h >> 32;
    return h;
}

uint64_t kv_hash64(const void *p, size_t len, uint64_t seed) {
    xs s;
    xs_init(&s, seed);
    xs_update(&s, p, len);
    return xs_digest(&s);
}

static void xs_u32(xs *s, uint32_t v) {
    uint8_t b[4];
    kv_le32_put(b, v);
    xs_update(s, b, 4);
}

static void xs_u64(xs *s, uint64_t v) {
    uint8_t b[8];
    kv_le64_put(b, v);
    xs_update(s, b, 8);
}

static void xs_str(xs *s, const char *str, size_t len) {
    xs_u32(s, (uint32_t)len);
    if (len) xs_update(s, str, len);
}

uint64_t kv_fingerprint(const kv_fp_inputs *in) {
    xs s;
    xs_init(&s, 0);
    xs_update(&s, "parley-kv-fp", 12);
    xs_u32(&s, 1);
    xs_str(&s, in->arch ? in->arch : "", in->arch ? strlen(in->arch) : 0);
    xs_u64(&s, in->weights_digest);
    xs_str(&s, in->tokenizer_id ? in->tokenizer_id : "",
           in->tokenizer_id ? strlen(in->tokenizer_id) : 0);
    xs_u32(&s, in->quant_version);
    xs_u32(&s, in->block_tokens);
    return xs_digest(&s);
}

static uint64_t seed_with(uint64_t seed, uint64_t fingerprint, const char *ns, size_t ns_len) {
    xs s;
    xs_init(&s, seed);
    xs_update(&s, "parley-kv-ns", 12);
    xs_u64(&s, fingerprint);
    xs_str(&s, ns ? ns : "", ns ? ns_len : 0);
    return xs_digest(&s);
}

uint64_t kv_hash_seed(uint64_t fingerprint, const char *ns, size_t ns_len) {
    return seed_with(0, fingerprint, ns, ns_len);
}

uint64_t kv_hash_seed_check(uint64_t fingerprint, const char *ns, size_t ns_len) {
    return seed_with(KV_CHECK_SEED, fingerprint, ns, ns_len);
}

static uint64_t block_with(uint64_t seed, uint64_t prev, const int32_t *tokens, int block_tokens) {
    xs s;
    xs_init(&s, seed);
    xs_u64(&s, prev);
    for (int i = 0; i < block_tokens; i++) xs_u32(&s, (uint32_t)tokens[i]);
    return xs_digest(&s);
}

uint64_t kv_hash_block(uint64_t prev, const int32_t *tokens, int block_tokens) {
    return block_with(0, prev, tokens, block_tokens);
}

uint64_t kv_hash_block_check(uint64_t prev, const int32_t *tokens, int block_tokens) {
    return block_with(KV_CHECK_SEED, prev, tokens, block_tokens);
}
