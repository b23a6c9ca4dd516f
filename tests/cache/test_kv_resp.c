/*
 * test_kv_resp.c -- the response cache: exact matching on every key part,
 * deterministic requests only, namespaces, TTL expiry, bounded size, off by
 * default.
 */
#define PTEST_MAIN
#include "ptest.h"

#include <unistd.h>

#include "kv_cache.h"
#include "kv_resp.h"

static kv_resp *mk(int enabled, int max_entries, size_t max_bytes, int ttl_ms) {
    kv_resp_config cfg;
    kv_resp_config_default(&cfg);
    cfg.enabled = enabled;
    cfg.max_entries = max_entries;
    cfg.max_bytes = max_bytes;
    cfg.ttl_ms = ttl_ms;
    kv_resp *r = NULL;
    char err[128];
    if (kv_resp_create(&cfg, 77, &r, err, sizeof err)) return NULL;
    return r;
}

static const int32_t prompt[5] = {1, 15043, 29892, 920, 526};

PT_TEST(off_by_default) {
    kv_resp_config cfg;
    kv_resp_config_default(&cfg);
    PT_EQ_INT(cfg.enabled, 0);
    PT_EQ_INT(cfg.ttl_ms, 30000);
    kv_resp *r = mk(0, 16, 4096, 30000);
    kv_resp_params p = {0};
    char buf[64];
    size_t len;
    PT_EQ_INT(kv_resp_put(r, "a", 1, prompt, 5, &p, "Hello!", 6), 0);
    PT_EQ_INT(kv_resp_get(r, "a", 1, prompt, 5, &p, buf, sizeof buf, &len), 0);
    kv_resp_destroy(r);
}

PT_TEST(exact_match_on_every_part) {
    kv_resp *r = mk(1, 16, 1 << 16, 30000);
    PT_ASSERT(r);
    kv_resp_params p = {
        .temperature = 0, .top_p = 1, .top_k = 40, .repetition_penalty = 1, .max_tokens = 64};
    char buf[64];
    size_t len;
    PT_EQ_INT(kv_resp_put(r, "a", 1, prompt, 5, &p, "Hello!", 6), 0);
    PT_EQ_INT(kv_resp_get(r, "a", 1, prompt, 5, &p, buf, sizeof buf, &len), 1);
    PT_EQ_INT(len, 6);
    PT_EQ_MEM(buf, "Hello!", 6);
    /* every key part matters */
    PT_EQ_INT(kv_resp_get(r, "b", 1, prompt, 5, &p, buf, sizeof buf, &len), 0); /* namespace */
    PT_EQ_INT(kv_resp_get(r, "a", 1, prompt, 4, &p, buf, sizeof buf, &len), 0); /* prefix only */
    int32_t other[5];
    memcpy(other, prompt, sizeof other);
    other[4]++;
    PT_EQ_INT(kv_resp_get(r, "a", 1, other, 5, &p, buf, sizeof buf, &len), 0);
    kv_resp_params q = p;
    q.max_tokens = 65;
    PT_EQ_INT(kv_resp_get(r, "a", 1, prompt, 5, &q, buf, sizeof buf, &len), 0);
    q = p;
    q.top_k = 41;
    PT_EQ_INT(kv_resp_get(r, "a", 1, prompt, 5, &q, buf, sizeof buf, &len), 0);
    q = p;
    q.extra = "stop:\n";
    q.extra_len = 6;
    PT_EQ_INT(kv_resp_get(r, "a", 1, prompt, 5, &q, buf, sizeof buf, &len), 0);
    /* too small a buffer is a miss, not a truncated reply */
    PT_EQ_INT(kv_resp_get(r, "a", 1, prompt, 5, &p, buf, 3, &len), 0);
    kv_tier_stats st;
    kv_resp_stats(r, &st);
    PT_EQ_INT(st.hits, 1);
    PT_EQ_INT(st.lookups, 8);
    kv_resp_destroy(r);
}

PT_TEST(deterministic_requests_only) {
    kv_resp *r = mk(1, 16, 1 << 16, 30000);
    kv_resp_params hot = {.temperature = 0.8f, .top_p = 0.9f};
    char buf[64];
    size_t len;
    PT_EQ_INT(kv_resp_deterministic(&hot), 0);
    PT_EQ_INT(kv_resp_put(r, "a", 1, prompt, 5, &hot, "Hi", 2), 0);
    PT_EQ_INT(kv_resp_get(r, "a", 1, prompt, 5, &hot, buf, sizeof buf, &len), 0);
    kv_resp_params seeded = hot;
    seeded.has_seed = 1;
    seeded.seed = 1234;
    PT_EQ_INT(kv_resp_deterministic(&seeded), 1);
    PT_EQ_INT(kv_resp_put(r, "a", 1, prompt, 5, &seeded, "Hi", 2), 0);
    PT_EQ_INT(kv_resp_get(r, "a", 1, prompt, 5, &seeded, buf, sizeof buf, &len), 1);
    seeded.seed = 1235;
    PT_EQ_INT(kv_resp_get(r, "a", 1, prompt, 5, &seeded, buf, sizeof buf, &len), 0);
    kv_resp_destroy(r);
}

PT_TEST(ttl_and_bounds) {
    kv_resp *r = mk(1, 4, 1 << 16, 50);
    kv_resp_params p = {0};
    char buf[64];
    size_t len;
    PT_EQ_INT(kv_resp_put(r, "a", 1, prompt, 5, &p, "Hi", 2), 0);
    usleep(80000);
    PT_EQ_INT(kv_resp_get(r, "a", 1, prompt, 5, &p, buf, sizeof buf, &len), 0);
    kv_tier_stats st;
    kv_resp_stats(r, &st);
    PT_EQ_INT(st.misses[KV_MISS_EXPIRED], 1);
    kv_resp_destroy(r);
    /* at most 4 entries: the least recently used go first */
    r = mk(1, 4, 1 << 16, 30000);
    for (int i = 0; i < 6; i++) {
        int32_t t[1] = {i};
        PT_EQ_INT(kv_resp_put(r, "a", 1, t, 1, &p, "x", 1), 0);
    }
    for (int i = 0; i < 6; i++) {
        int32_t t[1] = {i};
        PT_EQ_INT(kv_resp_get(r, "a", 1, t, 1, &p, buf, sizeof buf, &len), i >= 2);
    }
    kv_resp_stats(r, &st);
    PT_EQ_INT(st.evictions, 2);
    kv_resp_destroy(r);
    /* byte bound */
    r = mk(1, 100, 300, 30000);
    char big[200];
    memset(big, 'z', sizeof big);
    PT_EQ_INT(kv_resp_put(r, "a", 1, prompt, 5, &p, big, 200), 0);
    PT_EQ_INT(kv_resp_put(r, "a", 1, prompt, 4, &p, big, 200), 0); /* evicts the first */
    PT_EQ_INT(kv_resp_get(r, "a", 1, prompt, 5, &p, big, sizeof big, &len), 0);
    PT_EQ_INT(kv_resp_get(r, "a", 1, prompt, 4, &p, big, sizeof big, &len), 1);

    kv_resp_destroy(r);
}
