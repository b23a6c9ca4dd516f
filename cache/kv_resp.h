/*
 * kv_resp.h -- the response cache: whole replies of deterministic requests,
 * matched exactly on (model fingerprint, namespace, every prompt token,
 * every sampling parameter), kept for a short TTL.
 *
 * Off by default (kv_resp_config.enabled = 0), because it is the riskier
 * half of the cache: (1) a reply depends on more than the fingerprint
 * covers -- engine code, kernels and sampler versions change outputs
 * without changing weights, so a deploy could serve replies the new code
 * would not produce; (2) users retrying a greedy request often want a
 * different answer, and an exact replay hides regenerate-style requests
 * unless the caller includes a nonce in `extra`; (3) it stores reply text
 * in memory, which a tenant may not expect.  Enable it where the requests
 * are canned (greetings) and the TTL short (default 30 s).
 *
 * Data: a chained hash table keyed by XXH64 of the canonical key bytes
 * (LE32 namespace length, namespace, LE64 fingerprint, LE32 token count,
 * LE32 tokens, the parameters as LE32/LE64 fields, extra bytes); every hit
 * compares the full stored key bytes (a hash collision is a miss), and the
 * namespace is part of the key (no cross-tenant hits).  Entries are
 * malloc'd on put (a reply was just generated: this is not the KV hot
 * path) and evicted LRU when max_entries or max_bytes would be exceeded.
 * Only deterministic requests (temperature 0, or an explicit seed) are
 * stored or looked up.
 *
 * Threading: one internal mutex guards everything; any thread may call.
 */
#ifndef KV_RESP_H
#define KV_RESP_H

#include <stddef.h>
#include <stdint.h>

#include "kv_stats.h"

typedef struct kv_resp_config {
    int enabled;      /* 0 (default): every get misses, every put is ignored */
    size_t max_bytes; /* keys + replies held (default 16 MiB) */
    int max_entries;  /* entries held (default 4096) */
    int ttl_ms;       /* entry lifetime (default 30000) */
} kv_resp_config;

/* Sampling parameters of a request, as they affect the reply. */
typedef struct kv_resp_params {
    float temperature;        /* 0 = greedy */
    int has_seed;             /* 1: seed below was given explicitly */
    uint64_t seed;            /* RNG seed */
    float top_p;              /* nucleus */
    int top_k;                /* top-k */
    float repetition_penalty; /* penalty */
    int max_tokens;           /* length limit */
    const void *extra;        /* canonical bytes of the rest (stop strings, ...) or NULL */
    size_t extra_len;         /* bytes of extra */
} kv_resp_params;

typedef struct kv_resp kv_resp;

void kv_resp_config_default(kv_resp_config *c);
/* Returns 0, KV_EINVAL (bad limits) or KV_ENOMEM. */
int kv_resp_create(const kv_resp_config *cfg, uint64_t fingerprint, kv_resp **out, char *err,
                   size_t errlen);
void kv_resp_destroy(kv_resp *r);
/* 1 if p is deterministic (temperature 0 or explicit seed). */
int kv_resp_deterministic(const kv_resp_params *p);
/* Look the request up; on a hit copies the reply into buf (cap bytes) and
 * sets *len.  Returns 1 hit, 0 miss (also: disabled, non-deterministic,
 * reply larger than cap), KV_EINVAL (bad arguments). */
int kv_resp_get(kv_resp *r, const char *ns, size_t ns_len, const int32_t *tokens, int n,
                const kv_resp_params *p, void *buf, size_t cap, size_t *len);
/* Store a reply (copied).  Returns 0 (stored, or ignored when disabled /
 * non-deterministic / larger than max_bytes), KV_EINVAL or KV_ENOMEM. */
int kv_resp_put(kv_resp *r, const char *ns, size_t ns_len, const int32_t *tokens, int n,
                const kv_resp_params *p, const void *reply, size_t len);
/* Counters (lookups, hits, misses by reason, evictions, bytes in/out). */
void kv_resp_stats(kv_resp *r, kv_tier_stats *out);

#endif
