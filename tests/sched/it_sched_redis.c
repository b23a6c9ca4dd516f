/*
 * it_sched_redis.c -- the scheduler resumes a conversation from the Redis
 * tier (label integration; needs PARLEY_TEST_REDIS=host:port, missing is a
 * failure).
 *
 * Worker A serves turn 1 and writes the conversation's KV to Redis (what a
 * partition handoff does).  Worker B -- a fresh cache with the same model
 * fingerprint and nothing in host RAM -- gets turn 2: the prefetch the
 * scheduler starts at submit brings the blocks from Redis, so turn 2 reports
 * turn 1's prompt + reply as cached (minus at most one block) and still
 * produces the tokens an uncached run produces.
 */
#define PTEST_MAIN
#include "ptest.h"

#include <time.h>
#include <unistd.h>

#include "kv_cache.h"
#include "kv_sched_ops.h"
#include "sched_util.h"

#define NV 768
#define B 16

static int redis_addr(char *host, size_t hostlen, int *port) {
    const char *a = getenv("PARLEY_TEST_REDIS");
    if (!a) return -1;
    const char *colon = strrchr(a, ':');
    if (!colon || (size_t)(colon - a) >= hostlen) return -1;
    memcpy(host, a, (size_t)(colon - a));
    host[colon - a] = 0;
    *port = atoi(colon + 1);
    return *port > 0 ? 0 : -1;
}

static kv_cache *mk_cache(eng_model *m, const char *host, int port) {
    kv_cache_config cfg;
    kv_cache_config_default(&cfg);
    cfg.budget_bytes = (size_t)8 << 20;
    cfg.redis_host = host;
    cfg.redis_port = port;
    cfg.cmd_timeout_ms = 1000;
    cfg.ttl_s = 120;
    kv_fp_inputs fi = {"llama", eng_model_digest(m), "it", 1, B};
    kv_cache *c = NULL;
    char err[256];
    if (kv_cache_create(&cfg, eng_model_kv_layout(m), kv_fingerprint(&fi), &c, err, sizeof err))
        fprintf(stderr, "  cache: %s\n", err);
    return c;
}

static eng_sched *mk_sched(eng_model *m, kv_cache *kc) {
    eng_sched_config cfg;
    eng_sched_config_default(&cfg);
    cfg.prefetch_wait_ms = 3000; /* deterministic: wait for the fetch */
    eng_sched_cache_ops ops;
    if (kc) kv_sched_ops_init(&ops, kc);
    eng_sched *s = NULL;
    char err[256];
    if (eng_sched_create(m, &cfg, kc ? &ops : NULL, &s, err, sizeof err) != 0)
        fprintf(stderr, "  create: %s\n", err);
    return s;
}

PT_TEST(resume_from_redis) {
    char host[128];
    int port;
    PT_ASSERT_MSG(redis_addr(host, sizeof host, &port) == 0, "PARLEY_TEST_REDIS=host:port not set");
    eng_model *m = su_model("cai-tiny", 32, 2);
    PT_ASSERT(m);
    char ns[32]; /* fresh namespace: no keys from earlier runs */
    snprintf(ns, sizeof ns, "it%lx", (unsigned long)time(NULL) ^ (unsigned long)getpid());
    static int32_t conv[512];
    int n = 50;
    su_tokens(conv, n, NV, 4242);
    static su_req a, b, ref;
    kv_cache *ka = mk_cache(m, host, port);
    PT_ASSERT(ka);
    eng_sched *sa = mk_sched(m, ka);
    PT_ASSERT(sa);
    PT_EQ_INT(su_run_one(sa, conv, n, 20, ns, &a), 0);
    PT_EQ_INT(a.res.finish, ENG_SCHED_LENGTH);
    memcpy(conv + n, a.tokens, 20 * sizeof(int32_t));
    n += 20;
    int prev = n;
    su_tokens(conv + n, 12, NV, 4343);
    n += 12;
    /* handoff: A writes the conversation's KV to Redis */
    int nq = 0;
    PT_EQ_INT(kv_cache_flush_to_redis(ka, ns, strlen(ns), conv, prev, &nq), 0);
    PT_ASSERT(nq > 0);
    PT_EQ_INT(kv_cache_redis_drain(ka, 5000), 0);
    eng_sched_free(sa);
    kv_cache_destroy(ka);
    /* B starts cold in host RAM */
    kv_cache *kb = mk_cache(m, host, port);
    PT_ASSERT(kb);
    eng_sched *sb = mk_sched(m, kb), *off = mk_sched(m, NULL);
    PT_ASSERT(sb && off);
    PT_EQ_INT(su_run_one(sb, conv, n, 10, ns, &b), 0);
    PT_EQ_INT(su_run_one(off, conv, n, 10, ns, &ref), 0);
    PT_ASSERT_MSG(b.res.cached_tokens >= prev - B, "%d cached of %d", b.res.cached_tokens, prev);
    PT_EQ_MEM(b.tokens, ref.tokens, 10 * sizeof(int32_t));
    kv_stats ks;
    kv_cache_stats(kb, &ks);
    PT_ASSERT(ks.redis.hit_tokens > 0);
    eng_sched_free(sb);
    eng_sched_free(off);
    kv_cache_destroy(kb);
    eng_model_free(m);
}
