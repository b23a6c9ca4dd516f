/*
 * test_kv_engine.c -- the cache with the real engine (integration: needs
 * PARLEY_TEST_REDIS).  A cai-tiny model (mkmodel preset, local window 32,
 * 1 global layer in 6, KV shared by adjacent layers) is generated into a
 * temporary file.  A conversation is prefilled once through the cache's
 * allocator and inserted; its tail is evicted to Redis (or the whole path
 * is flushed and a second cache -- another worker -- resumes from Redis
 * alone), or the next turn resumes into the cached partial last block (a
 * copy of it); the resumed sequence then computes the remaining tokens.
 * Its KV blocks and its logits must be bit-identical to a fresh prefill.
 */
#define PTEST_MAIN
#include "ptest.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "eng_mkmodel.h"
#include "eng_model.h"
#include "kv_cache.h"

enum { N = 100, B = 16 };

static char host[128];
static int port;
static eng_model *model;
static char model_path[512];

static int setup(void) {
    const char *e = getenv("PARLEY_TEST_REDIS");
    const char *colon = e ? strrchr(e, ':') : NULL;
    if (!colon || (size_t)(colon - e) >= sizeof host) return 0;
    memcpy(host, e, (size_t)(colon - e));
    host[colon - e] = 0;
    port = atoi(colon + 1);
    if (model) return 1;
    const char *tmp = getenv("TMPDIR");
    snprintf(model_path, sizeof model_path, "%s/kvtest-%ld.gguf", tmp && *tmp ? tmp : "/tmp",
             (long)getpid());
    eng_mkmodel_opts mo;
    eng_mkmodel_opts_default(&mo);
    mo.preset = "cai-tiny";
    mo.out = model_path;
    mo.window = 32;
    char err[256];
    if (eng_mkmodel(&mo, err, sizeof err) != 0) {
        fprintf(stderr, "mkmodel: %s\n", err);
        return 0;
    }
    eng_load_opts o = {.prec = ENG_PREC_INT8, .n_threads = 2, .block_tokens = B};
    int rc = eng_model_load(model_path, &o, &model, err, sizeof err);
    unlink(model_path);
    return rc == 0;
}

static kv_cache *mk(void) {
    const eng_config *cfg = eng_model_config(model);
    kv_fp_inputs in = {cfg->arch_name, eng_model_digest(model), "mkmodel-vocab", 1, B};
    kv_cache_config cc;
    kv_cache_config_default(&cc);
    cc.budget_bytes = 8u << 20;
    cc.redis_host = host;
    cc.redis_port = port;
    cc.cmd_timeout_ms = 1000;
    kv_cache *c = NULL;
    char err[256];
    if (kv_cache_create(&cc, eng_model_kv_layout(model), kv_fingerprint(&in), &c, err, sizeof err))
        return NULL;
    return c;
}

static int32_t tok[N];
static float ref_logits[N * 1024], res_logits[N * 1024];
static char ns[32];

/* Fresh prefill of all N tokens (malloc allocator); logits of every position. */
static void reference(eng_kvseq *s, eng_kv_allocator *a) {
    char err[256];
    const eng_kv_layout *l = eng_model_kv_layout(model);
    PT_EQ_INT(eng_kv_allocator_malloc(a, l), 0);
    PT_EQ_INT(eng_kvseq_init(s, l, a, err, sizeof err), 0);
    eng_seq_step st = {
        .kv = s, .tokens = tok, .n_tokens = N, .logits = ENG_LOGITS_ALL, .out = ref_logits};
    PT_ASSERT_MSG(eng_forward(model, &st, 1, err, sizeof err) == 0, "%s", err);
}

/* Resume tokens from cache c, compute the rest, compare with the reference. */
static void resume_and_compare(kv_cache *c, int partial, int expect_tokens, int expect_redis) {
    const eng_kv_layout *l = eng_model_kv_layout(model);
    int nv = eng_model_config(model)->n_vocab;
    PT_ASSERT(nv <= 1024);
    void *g[16], *lb[16];
    kv_match m = {g, lb, 16, 0, 0, 0, partial, 0};
    PT_EQ_INT(kv_cache_lookup(c, ns, strlen(ns), tok, N, 1000, &m), 0);
    PT_EQ_INT(m.n_tokens, expect_tokens);
    PT_EQ_INT(m.n_from_redis, expect_redis);
    eng_kv_allocator a = kv_cache_allocator(c), ra;
    eng_kvseq s, ref;
    char err[256];
    PT_EQ_INT(eng_kvseq_init(&s, l, &a, err, sizeof err), 0);
    PT_EQ_INT(eng_kvseq_adopt_prefix(&s, m.n_tokens, g, lb, tok), 0);
    eng_seq_step st = {.kv = &s,
                       .tokens = tok + m.n_tokens,
                       .n_tokens = N - m.n_tokens,
                       .logits = ENG_LOGITS_ALL,
                       .out = res_logits};
    PT_ASSERT_MSG(eng_forward(model, &st, 1, err, sizeof err) == 0, "%s", err);
    reference(&ref, &ra);
    /* identical logits for every computed position */
    PT_EQ_MEM(res_logits, ref_logits + (size_t)m.n_tokens * nv,
              sizeof(float) * (size_t)(N - m.n_tokens) * nv);
    /* bit-identical KV in every block both sequences still hold */
    PT_EQ_INT(s.n_blocks, ref.n_blocks);
    int compared = 0;
    for (int i = 0; i < s.n_blocks; i++)
        for (int k = 0; k < 2; k++) {
            if (!l->block_bytes[k] || !s.blk[k][i] || !ref.blk[k][i]) continue;
            size_t bytes = l->block_bytes[k];
            if ((i + 1) * B > N) bytes = 0; /* partial block: only filled rows are defined */
            PT_ASSERT_MSG(!memcmp(s.blk[k][i], ref.blk[k][i], bytes), "block %d kind %d differs", i,
                          k);
            compared++;
        }
    PT_ASSERT(compared >= 6);
    eng_kvseq_free(&s);
    eng_kvseq_free(&ref);
    eng_kv_allocator_malloc_free(&ra);
}

/* Prefill the first n tokens through the cache and insert them. */
static void first_turn(kv_cache *c, int n) {
    const eng_kv_layout *l = eng_model_kv_layout(model);
    eng_kv_allocator a = kv_cache_allocator(c);
    eng_kvseq s;
    char err[256];
    PT_EQ_INT(eng_kvseq_init(&s, l, &a, err, sizeof err), 0);
    eng_seq_step st = {
        .kv = &s, .tokens = tok, .n_tokens = n, .logits = ENG_LOGITS_NONE, .out = NULL};
    PT_ASSERT_MSG(eng_forward(model, &st, 1, err, sizeof err) == 0, "%s", err);
    PT_EQ_INT(kv_cache_insert(c, ns, strlen(ns), &s, 1), 0);
    eng_kvseq_free(&s);
}

PT_TEST(partly_evicted_resume_is_bit_identical) {
    PT_ASSERT_MSG(setup(), "needs PARLEY_TEST_REDIS=host:port and a cai-tiny model");
    int nv = eng_model_config(model)->n_vocab;
    for (int i = 0; i < N; i++) tok[i] = (int32_t)(pt_rand() % (uint64_t)nv);
    snprintf(ns, sizeof ns, "e%ld-%ld", (long)getpid(), (long)pt_rand() % 100000);
    kv_cache *c = mk();
    PT_ASSERT(c);
    first_turn(c, 64);                  /* 4 full blocks cached */
    PT_EQ_INT(kv_cache_evict(c, 2), 2); /* blocks 3 and 2 go to Redis */
    PT_EQ_INT(kv_cache_redis_drain(c, 2000), 0);
    resume_and_compare(c, 0, 64, 2);
    kv_cache_destroy(c);
}

PT_TEST(resume_into_a_partial_block_is_bit_identical) {
    PT_ASSERT_MSG(setup(), "needs PARLEY_TEST_REDIS=host:port and a cai-tiny model");
    int nv = eng_model_config(model)->n_vocab;
    for (int i = 0; i < N; i++) tok[i] = (int32_t)(pt_rand() % (uint64_t)nv);
    snprintf(ns, sizeof ns, "p%ld-%ld", (long)getpid(), (long)pt_rand() % 100000);
    kv_cache *c = mk();
    PT_ASSERT(c);
    first_turn(c, 70); /* 4 full blocks and a tail of 6 tokens */
    resume_and_compare(c, 1, 70, 0);
    /* the tail went on serving its 6 tokens (the resume wrote into a copy) */
    resume_and_compare(c, 1, 70, 0);
    kv_stats st;
    kv_cache_stats(c, &st);
    PT_EQ_INT(st.partial_hits, 2);
    kv_cache_destroy(c);
}

PT_TEST(other_worker_resumes_from_redis_alone) {
    PT_ASSERT_MSG(setup(), "needs PARLEY_TEST_REDIS=host:port and a cai-tiny model");
    int nv = eng_model_config(model)->n_vocab;
    for (int i = 0; i < N; i++) tok[i] = (int32_t)(pt_rand() % (uint64_t)nv);
    snprintf(ns, sizeof ns, "f%ld-%ld", (long)getpid(), (long)pt_rand() % 100000);
    kv_cache *c = mk();
    PT_ASSERT(c);
    first_turn(c, 90); /* 5 full blocks */
    int q = 0;
    PT_EQ_INT(kv_cache_flush_to_redis(c, ns, strlen(ns), tok, 90, &q), 0);
    PT_EQ_INT(q, 5);
    PT_EQ_INT(kv_cache_redis_drain(c, 2000), 0);
    kv_cache_destroy(c);
    c = mk();                        /* the new owner of the partition */
    resume_and_compare(c, 1, 80, 5); /* Redis holds whole blocks: no tail */
    kv_cache_destroy(c);
    eng_model_free(model);
    model = NULL;
}
