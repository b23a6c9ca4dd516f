/*
 * kv_value.c -- encode and strictly validate Redis block values (format in
 * kv_value.h).
 */
#include "kv_value.h"

#include <string.h>

#include "kv_hash.h"
#include "kv_stats.h"

size_t kv_value_size(uint32_t block_tokens, uint32_t global_len, uint32_t local_len) {
    return KV_VALUE_HDR + 4 * (size_t)block_tokens + global_len + local_len + 8;
}

void kv_value_encode(uint8_t *dst, const kv_value_meta *m, const int32_t *tokens, const void *g,
                     const void *l) {
    kv_le32_put(dst, KV_VALUE_MAGIC);
    dst[4] = KV_VALUE_VERSION & 0xff;
    dst[5] = KV_VALUE_VERSION >> 8;
    uint16_t flags = m->local_len ? KV_VALUE_FLAG_LOCAL : 0;
    dst[6] = flags & 0xff;
    dst[7] = flags >> 8;
    kv_le64_put(dst + 8, m->fingerprint);
    kv_le64_put(dst + 16, m->ns_hash);
    kv_le64_put(dst + 24, m->key_h);
    kv_le64_put(dst + 32, m->check_g);
    kv_le32_put(dst + 40, m->block_index);
    kv_le32_put(dst + 44, m->block_tokens);
    kv_le32_put(dst + 48, m->global_len);
    kv_le32_put(dst + 52, m->local_len);
    uint8_t *p = dst + KV_VALUE_HDR;
    for (uint32_t i = 0; i < m->block_tokens; i++, p += 4) kv_le32_put(p, (uint32_t)tokens[i]);
    if (m->global_len) memcpy(p, g, m->global_len);
    p += m->global_len;
    if (m->local_len) memcpy(p, l, m->local_len);
    p += m->local_len;
    kv_le64_put(p, kv_hash64(dst, (size_t)(p - dst), 0));
}

int kv_value_decode(const uint8_t *buf, size_t len, const kv_value_meta *e, const int32_t *tokens,
                    kv_value_view *v) {
    if (!buf || len < KV_VALUE_HDR + 8) return KV_MISS_CORRUPT;
    if (kv_le32_get(buf) != KV_VALUE_MAGIC) return KV_MISS_CORRUPT;
    if ((buf[4] | buf[5] << 8) != KV_VALUE_VERSION) return KV_MISS_CORRUPT;
    unsigned flags = buf[6] | buf[7] << 8;
    if (flags & ~KV_VALUE_FLAG_LOCAL) return KV_MISS_CORRUPT;
    uint32_t bt = kv_le32_get(buf + 44), gl = kv_le32_get(buf + 48), ll = kv_le32_get(buf + 52);
    if ((ll != 0) != ((flags & KV_VALUE_FLAG_LOCAL) != 0)) return KV_MISS_CORRUPT;
    /* 64-bit arithmetic: three u32 fields cannot overflow it. */
    uint64_t want = KV_VALUE_HDR + 4 * (uint64_t)bt + gl + (uint64_t)ll + 8;
    if (want != len) return KV_MISS_CORRUPT;
    if (kv_le64_get(buf + len - 8) != kv_hash64(buf, len - 8, 0)) return KV_MISS_CORRUPT;
    if (kv_le64_get(buf + 8) != e->fingerprint || kv_le64_get(buf + 16) != e->ns_hash ||
        kv_le64_get(buf + 24) != e->key_h || kv_le32_get(buf + 40) != e->block_index ||
        bt != e->block_tokens || gl != e->global_len || (ll && ll != e->local_len))
        return KV_MISS_FOREIGN;
    /* Token ids decide collisions of the block itself; g_k covers the
     * blocks before it (Redis has no parent pointer to compare). */
    const uint8_t *p = buf + KV_VALUE_HDR;
    for (uint32_t i = 0; i < bt; i++, p += 4)
        if ((int32_t)kv_le32_get(p) != tokens[i]) return KV_MISS_COLLISION;
    if (kv_le64_get(buf + 32) != e->check_g) return KV_MISS_COLLISION;
    v->global = gl ? p : NULL;
    v->local = ll ? p + gl : NULL;
    return 0;
}
