/*
 * kvt_util.h -- helpers shared by the cache tests: synthetic KV layouts
 * built through the engine's eng_kv_layout_init, and a "prefill" that fills
 * blocks through the real eng_kvseq/allocator path with bytes that are a
 * pure function of the token prefix, so any block handed back by the cache
 * can be checked for being exactly the KV of its prefix.
 */
#ifndef KVT_UTIL_H
#define KVT_UTIL_H

#include <stdint.h>
#include <string.h>

#include "eng_kv.h"
#include "kv_cache.h"

/* Layout of a small model: n_layer layers, one KV head of dim 8; layers
 * with (i+1) % 6 != 0 get window `window` when window > 0 (gemma3's 5:1). */
static inline int kvt_layout(eng_kv_layout *l, int B, int n_layer, int window) {
    static eng_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.n_layer = n_layer;
    cfg.n_head = 1;
    cfg.n_head_kv = 1;
    cfg.head_dim = 8;
    for (int i = 0; i < n_layer; i++) {
        cfg.kv_src[i] = i;
        cfg.window[i] = window > 0 && (i + 1) % 6 != 0 ? window : 0;
    }
    char err[128];
    return eng_kv_layout_init(l, &cfg, B, err, sizeof err);
}

/* Bytes of block i of a sequence whose first (i+1)*B tokens are tok. */
static inline void kvt_fill(const eng_kv_layout *l, int kind, void *blk, const int32_t *tok,
                            int i) {
    uint64_t h =
        kv_hash64(tok, sizeof(int32_t) * (size_t)(i + 1) * l->block_tokens, (uint64_t)kind + 1);
    uint8_t *p = blk;
    for (size_t j = 0; j < l->block_bytes[kind]; j++) {
        h ^= h >> 29;
        h *= 0xBF58476D1CE4E5B9ull;
        p[j] = (uint8_t)(h >> 56);
    }
}

static inline int kvt_check(const eng_kv_layout *l, int kind, const void *blk, const int32_t *tok,
                            int i) {
    uint8_t want[1 << 14];
    if (l->block_bytes[kind] > sizeof want) return 0;
    kvt_fill(l, kind, want, tok, i);
    return !memcmp(want, blk, l->block_bytes[kind]);
}

/* Append n tokens to s as a forward pass would (allocate, write, commit).
 * Blocks that become full get their final bytes.  Returns 0 or the
 * eng_kvseq_reserve error. */
static inline int kvt_prefill(eng_kvseq *s, const int32_t *tok, int n) {
    int before, rc = eng_kvseq_reserve(s, n, &before);
    if (rc) return rc;
    const eng_kv_layout *l = s->layout;
    int B = l->block_tokens, end = s->n_tokens + n;
    int32_t all[8192];
    if (end > 8192) return -1;
    memcpy(all, s->tokens, sizeof(int32_t) * (size_t)s->n_tokens);
    memcpy(all + s->n_tokens, tok, sizeof(int32_t) * (size_t)n);
    for (int i = s->n_tokens / B; i < end / B; i++)
        for (int k = 0; k < 2; k++)
            if (s->blk[k][i]) kvt_fill(l, k, s->blk[k][i], all, i);
    eng_kvseq_commit(s, tok, n);
    return 0;
}

#endif
