/*
 * test_kv_value.c -- the Redis value format: round trip, and every kind of
 * damaged or foreign value is rejected with the right reason.
 */
#define PTEST_MAIN
#include "ptest.h"

#include "kv_hash.h"
#include "kv_stats.h"
#include "kv_value.h"

enum { B = 16, GL = 96, LL = 160 };

static kv_value_meta meta(void) {
    kv_value_meta m = {0x1234, 0x5678, 0x9abc, 0xdef0, 3, B, GL, LL};
    return m;
}

static size_t make(uint8_t *buf, int32_t *tok, uint8_t *g, uint8_t *l, int with_local) {
    for (int i = 0; i < B; i++) tok[i] = 100 + i;
    for (int i = 0; i < GL; i++) g[i] = (uint8_t)(i * 3);
    for (int i = 0; i < LL; i++) l[i] = (uint8_t)(i * 5 + 1);
    kv_value_meta m = meta();
    if (!with_local) m.local_len = 0;
    kv_value_encode(buf, &m, tok, g, with_local ? l : NULL);
    return kv_value_size(B, GL, with_local ? LL : 0);
}

PT_TEST(round_trip_with_and_without_local) {
    uint8_t buf[1024], g[GL], l[LL];
    int32_t tok[B];
    kv_value_meta e = meta();
    kv_value_view v;
    size_t n = make(buf, tok, g, l, 1);
    PT_EQ_INT(kv_value_decode(buf, n, &e, tok, &v), 0);
    PT_EQ_MEM(v.global, g, GL);
    PT_EQ_MEM(v.local, l, LL);
    n = make(buf, tok, g, l, 0);
    PT_EQ_INT(kv_value_decode(buf, n, &e, tok, &v), 0);
    PT_ASSERT(v.local == NULL);
    PT_EQ_MEM(v.global, g, GL);
}

PT_TEST(every_flipped_byte_is_rejected) {
    uint8_t buf[1024], g[GL], l[LL];
    int32_t tok[B];
    kv_value_meta e = meta();
    kv_value_view v;
    size_t n = make(buf, tok, g, l, 1);
    for (size_t i = 0; i < n; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            buf[i] ^= (uint8_t)(1u << bit);
            int r = kv_value_decode(buf, n, &e, tok, &v);
            PT_ASSERT_MSG(r == KV_MISS_CORRUPT, "byte %zu bit %d accepted (%d)", i, bit, r);
            buf[i] ^= (uint8_t)(1u << bit);
        }
    }
}

PT_TEST(truncated_extended_and_garbage_rejected) {
    uint8_t buf[1100], g[GL], l[LL];
    int32_t tok[B];
    kv_value_meta e = meta();
    kv_value_view v;
    size_t n = make(buf, tok, g, l, 1);
    for (size_t k = 0; k < n; k += 7)
        PT_EQ_INT(kv_value_decode(buf, k, &e, tok, &v), KV_MISS_CORRUPT);
    PT_EQ_INT(kv_value_decode(buf, n + 1, &e, tok, &v), KV_MISS_CORRUPT);
    PT_EQ_INT(kv_value_decode(NULL, 0, &e, tok, &v), KV_MISS_CORRUPT);
    const char *foreign = "{\"some\":\"json value another program stored\"}";
    PT_EQ_INT(kv_value_decode((const uint8_t *)foreign, strlen(foreign), &e, tok, &v),
              KV_MISS_CORRUPT);
    /* Huge lengths in an otherwise valid-looking header must not overflow. */
    kv_le32_put(buf + 48, 0xffffffffu);
    kv_le32_put(buf + 52, 0xffffffffu);
    PT_EQ_INT(kv_value_decode(buf, n, &e, tok, &v), KV_MISS_CORRUPT);
}

PT_TEST(intact_but_foreign_or_colliding) {
    uint8_t buf[1024], g[GL], l[LL];
    int32_t tok[B];
    kv_value_view v;
    size_t n = make(buf, tok, g, l, 1);
    kv_value_meta e = meta();
    e.fingerprint ^= 1; /* another model */
    PT_EQ_INT(kv_value_decode(buf, n, &e, tok, &v), KV_MISS_FOREIGN);
    e = meta();
    e.ns_hash ^= 1; /* another namespace */
    PT_EQ_INT(kv_value_decode(buf, n, &e, tok, &v), KV_MISS_FOREIGN);
    e = meta();
    e.block_index = 4;
    PT_EQ_INT(kv_value_decode(buf, n, &e, tok, &v), KV_MISS_FOREIGN);
    e = meta();
    e.global_len = GL + 2; /* another layout */
    PT_EQ_INT(kv_value_decode(buf, n, &e, tok, &v), KV_MISS_FOREIGN);
    e = meta();
    int32_t other[B];
    memcpy(other, tok, sizeof other);
    other[5]++;
    PT_EQ_INT(kv_value_decode(buf, n, &e, other, &v), KV_MISS_COLLISION);
    e.check_g ^= 1; /* same key and tokens, different earlier blocks */
    PT_EQ_INT(kv_value_decode(buf, n, &e, tok, &v), KV_MISS_COLLISION);
}
