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

#include "eng_config.h"
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

/* Block bytes are laid out as B equal slices, one per token position, plus
 * a remainder (block_bytes % B): slice j of block i is a pure function of
 * the first i*B + j + 1 tokens, as the KV of a position depends only on the
 * tokens up to it; the remainder is a function of the whole block's
 * tokens.  So a partial block can be checked for exactly the positions it
 * serves, and a write past them is invisible to that check. */
static inline void kvt_fill_range(const eng_kv_layout *l, int kind, void *blk, const int32_t *tok,
                                  int i, int from, int to) {
    int B = l->block_tokens;
    size_t per = l->block_bytes[kind] / (size_t)B;
    uint8_t *p = blk;
    for (int j = from; j <= to && j <= B; j++) {
        int whole = j == B; /* the remainder */
        uint64_t h = kv_hash64(tok, sizeof(int32_t) * ((size_t)i * B + (size_t)(whole ? B : j + 1)),
                               (uint64_t)kind + 1 + (whole ? 16 : 0));
        size_t a = whole ? per * (size_t)B : per * (size_t)j;
        size_t b = whole ? l->block_bytes[kind] : a + per;
        for (size_t x = a; x < b; x++) {
            h ^= h >> 29;
            h *= 0xBF58476D1CE4E5B9ull;
            p[x] = (uint8_t)(h >> 56);
        }
    }
}

/* Bytes of block i of a sequence whose first (i+1)*B tokens are tok. */
static inline void kvt_fill(const eng_kv_layout *l, int kind, void *blk, const int32_t *tok,
                            int i) {
    kvt_fill_range(l, kind, blk, tok, i, 0, l->block_tokens);
}

/* Positions 0..upto-1 of block i hold the KV of tok (upto == B: the whole
 * block, remainder included). */
static inline int kvt_check_upto(const eng_kv_layout *l, int kind, const void *blk,
                                 const int32_t *tok, int i, int upto) {
    uint8_t want[1 << 14];
    if (l->block_bytes[kind] > sizeof want) return 0;
    int B = l->block_tokens;
    size_t per = l->block_bytes[kind] / (size_t)B;
    kvt_fill_range(l, kind, want, tok, i, 0, upto >= B ? B : upto - 1);
    return !memcmp(want, blk, upto >= B ? l->block_bytes[kind] : per * (size_t)upto);
}

static inline int kvt_check(const eng_kv_layout *l, int kind, const void *blk, const int32_t *tok,
                            int i) {
    return kvt_check_upto(l, kind, blk, tok, i, l->block_tokens);
}

/* Append n tokens to s as a forward pass would (allocate, write, commit):
 * each new position's slice, and a block's remainder when it becomes
 * full.  Returns 0 or the eng_kvseq_reserve error. */
static inline int kvt_prefill(eng_kvseq *s, const int32_t *tok, int n) {
    int before, rc = eng_kvseq_reserve(s, n, &before);
    if (rc) return rc;
    const eng_kv_layout *l = s->layout;
    int B = l->block_tokens, end = s->n_tokens + n;
    int32_t all[8192];
    if (end > 8192) return -1;
    memcpy(all, s->tokens, sizeof(int32_t) * (size_t)s->n_tokens);
    memcpy(all + s->n_tokens, tok, sizeof(int32_t) * (size_t)n);
    for (int p = s->n_tokens; p < end; p++) {
        int i = p / B, j = p % B;
        for (int k = 0; k < 2; k++)
            if (s->blk[k][i]) kvt_fill_range(l, k, s->blk[k][i], all, i, j, j == B - 1 ? B : j);
    }
    eng_kvseq_commit(s, tok, n);
    return 0;
}

#endif
