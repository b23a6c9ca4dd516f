/*
 * bench_cache.c -- KV cache benchmarks (a program, not a test; reports,
 * asserts nothing).  Uses cai-1b's KV shapes (24 layers, 1 KV head of 128,
 * 1 global in 6, local window 1024, adjacent local layers sharing KV: 12
 * local + 2 global KV-owning layers), built through eng_kv_layout_init.
 *
 *   bench_cache [redis_host:port [cai-1b.gguf]]
 *
 * 1. lookup+insert cost per token, host RAM only, B = 16 and 32: chat
 *    conversations of 20 turns x 200 tokens, each turn = lookup, prefill of
 *    the new tokens (not timed), insert.
 * 2. sliding-window trimming: local KV bytes the index holds vs what it
 *    would hold without trimming, for the same conversations.
 * 3. with Redis: fetch latency and throughput of whole prefixes (one
 *    pipelined round trip per request) for B = 16 and 32.
 * 4. with a model file too: prefill time of n-token prefixes (int8, 2
 *    threads) next to the Redis fetch time of the same prefix, and the
 *    break-even prefix length (the shortest where fetching wins).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eng_model.h"
#include "kvt_util.h"
#include "pl_time.h"

static double now_s(void) { return pl_mono_s(); }

static void cai1b_layout(eng_kv_layout *l, int B) {
    static eng_config c;
    memset(&c, 0, sizeof c);
    c.n_layer = 24;
    c.n_head = 16;
    c.n_head_kv = 1;
    c.head_dim = 128;
    int n_global = 0, prev_global = -1;
    for (int i = 0; i < 24; i++) {
        c.window[i] = (i + 1) % 6 == 0 ? 0 : 1024;
        c.kv_src[i] = i;
        if (c.window[i]) {
            if (i % 2 && c.window[i - 1] == c.window[i] && c.kv_src[i - 1] == i - 1)
                c.kv_src[i] = i - 1;
        } else {
            if (n_global % 2) c.kv_src[i] = prev_global;
            n_global++;
            prev_global = i;
        }
    }
    char err[128];
    if (eng_kv_layout_init(l, &c, B, err, sizeof err)) {
        fprintf(stderr, "layout: %s\n", err);
        exit(1);
    }
}

static kv_cache *mk(const eng_kv_layout *l, const char *host, int port) {
    kv_cache_config cfg;
    kv_cache_config_default(&cfg);
    cfg.budget_bytes = host ? 256u << 20 : 1536u << 20;
    cfg.max_tokens = 8192;
    cfg.redis_host = host;
    cfg.redis_port = port;
    cfg.cmd_timeout_ms = 2000;
    cfg.write_queue_bytes = 64u << 20;
    kv_cache *c;
    char err[256];
    if (kv_cache_create(&cfg, l, 0xbe4c4ull, &c, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        exit(1);
    }
    return c;
}

enum { TURNS = 20, TURN_TOK = 200, CONVS = 4 };
static int32_t conv[CONVS][TURNS * TURN_TOK + 1];

/* One turn: lookup (timed), resume + prefill (not timed), insert (timed). */
static double turn(kv_cache *c, const eng_kv_layout *l, const char *ns, const int32_t *t, int n) {
    eng_kv_allocator a = kv_cache_allocator(c);
    eng_kvseq s;
    char err[128];
    eng_kvseq_init(&s, l, &a, err, sizeof err);
    static void *g[1024], *lb[1024];
    kv_match m = {g, lb, 1024, 0, 0, 0, 0, 0};
    double t0 = now_s();
    kv_cache_lookup(c, ns, strlen(ns), t, n, -1, &m);
    double dt = now_s() - t0;
    if (m.n_tokens) eng_kvseq_adopt_prefix(&s, m.n_tokens, g, lb, t);
    kvt_prefill(&s, t + m.n_tokens, n - m.n_tokens);
    t0 = now_s();
    kv_cache_insert(c, ns, strlen(ns), &s, 1);
    dt += now_s() - t0;
    eng_kvseq_free(&s);
    return dt;
}

/* Prefill vs Redis fetch for prefixes of n tokens with the real model. */
static void break_even(const char *host, int port, const char *path) {
    eng_load_opts o = {.prec = ENG_PREC_INT8, .n_threads = 2, .block_tokens = 16};
    eng_model *m;
    char err[256];
    if (eng_model_load(path, &o, &m, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    const eng_kv_layout *l = eng_model_kv_layout(m);
    int nv = eng_model_config(m)->n_vocab;
    static float logits[1 << 17];
    static int32_t t[1025];
    for (int i = 0; i < 1025; i++) t[i] = rand() % nv;
    kv_cache *c = mk(l, host, port);
    char ns[32];
    snprintf(ns, sizeof ns, "be-%ld", (long)time(NULL));
    /* store a 1024-token conversation in Redis via the real engine */
    eng_kv_allocator a = kv_cache_allocator(c);
    eng_kvseq s;
    eng_kvseq_init(&s, l, &a, err, sizeof err);
    double t0 = now_s();
    eng_seq_step st = {
        .kv = &s, .tokens = t, .n_tokens = 1024, .logits = ENG_LOGITS_LAST, .out = logits};
    if (eng_forward(m, &st, 1, err, sizeof err)) {
        fprintf(stderr, "%s\n", err);
        return;
    }
    double full = now_s() - t0;
    kv_cache_insert(c, ns, strlen(ns), &s, 1);
    eng_kvseq_free(&s);
    int q;
    kv_cache_flush_to_redis(c, ns, strlen(ns), t, 1024, &q);
    kv_cache_redis_drain(c, 60000);
    kv_cache_destroy(c);
    printf("cai-1b int8 prefill of 1024 tokens: %.2f s (%.1f ms/token)\n", full, full / 1024 * 1e3);
    int lens[] = {16, 32, 64, 128, 256};
    int be = 0;
    for (int li = 0; li < 5; li++) {
        int n = lens[li];
        eng_kv_allocator ma;
        eng_kv_allocator_malloc(&ma, l);
        eng_kvseq_init(&s, l, &ma, err, sizeof err);
        eng_seq_step ps = {
            .kv = &s, .tokens = t, .n_tokens = n, .logits = ENG_LOGITS_LAST, .out = logits};
        t0 = now_s();
        eng_forward(m, &ps, 1, err, sizeof err);
        double pre = now_s() - t0;
        eng_kvseq_free(&s);
        eng_kv_allocator_malloc_free(&ma);
        /* fetch: a fresh cache (another worker) pulls the n-token prefix;
         * the resume point n carries its local window only at turn ends, so
         * time the transfer of every block of the prefix (prefetch). */
        c = mk(l, host, port);
        int tk;
        t0 = now_s();
        kv_cache_prefetch(c, ns, strlen(ns), t, n + 1, &tk);
        kv_cache_prefetch_wait(c, tk, 5000);
        double fe = now_s() - t0;
        kv_cache_prefetch_release(c, tk);
        kv_stats ks;
        kv_cache_stats(c, &ks);
        kv_cache_destroy(c);
        printf(
            "  prefix %4d tokens: recompute %.1f ms, Redis fetch %.2f ms (%llu tokens fetched)\n",
            n, pre * 1e3, fe * 1e3, (unsigned long long)ks.redis.hit_tokens);
        if (!be && fe < pre) be = n;
    }
    if (be)
        printf("  break-even: fetching wins from a %d-token prefix on (the smallest measured)\n",
               be);
    eng_model_free(m);
}

int main(int argc, char **argv) {
    const char *host = NULL;
    int port = 0;
    char hbuf[128];
    if (argc > 1) {
        const char *colon = strrchr(argv[1], ':');
        if (!colon || colon - argv[1] >= (long)sizeof hbuf) return 2;
        memcpy(hbuf, argv[1], (size_t)(colon - argv[1]));
        hbuf[colon - argv[1]] = 0;
        host = hbuf;
        port = atoi(colon + 1);
    }
    const char *model_path = argc > 2 ? argv[2] : NULL;
    srand(1);
    for (int k = 0; k < CONVS; k++)
        for (int i = 0; i <= TURNS * TURN_TOK; i++) conv[k][i] = rand() % 32768;
    for (int B = 16; B <= 32; B *= 2) {
        eng_kv_layout l;
        cai1b_layout(&l, B);
        printf("B=%d: block bytes global %zu, local %zu (owners %d global, %d local)\n", B,
               l.block_bytes[0], l.block_bytes[1], l.n_layers[0], l.n_layers[1]);
        kv_cache *c = mk(&l, NULL, 0);
        double t = 0;
        long toks = 0;
        for (int tr = 1; tr <= TURNS; tr++)
            for (int k = 0; k < CONVS; k++) {
                char ns[8];
                snprintf(ns, sizeof ns, "c%d", k);
                t += turn(c, &l, ns, conv[k], tr * TURN_TOK + 1);
                toks += tr * TURN_TOK + 1;
            }
        kv_stats st;
        kv_cache_stats(c, &st);
        printf("  lookup+insert: %.1f ns per token (%ld tokens looked up and inserted, %d turns)\n",
               t / (double)toks * 1e9, toks, TURNS * CONVS);
        printf("  host hits %llu / %llu lookups, %llu hit tokens\n",
               (unsigned long long)st.host.hits, (unsigned long long)st.host.lookups,
               (unsigned long long)st.host.hit_tokens);
        double held = (double)st.blocks_cached[1] * l.block_bytes[1];
        double untrimmed = (double)st.blocks_cached[0] * l.block_bytes[1];
        double global = (double)st.blocks_cached[0] * l.block_bytes[0];
        printf("  sliding window: local KV held %.1f MiB vs %.1f MiB untrimmed (saved %.1f%%); "
               "global %.1f MiB; total held %.1f MiB vs %.1f MiB\n",
               held / 1048576, untrimmed / 1048576, 100 * (1 - held / untrimmed), global / 1048576,
               (held + global) / 1048576, (untrimmed + global) / 1048576);
        kv_cache_destroy(c);

        if (!host) continue;
        /* Redis: write every conversation, then fetch prefixes cold. */
        c = mk(&l, host, port);
        char ns[32];
        snprintf(ns, sizeof ns, "bench%d-%ld", B, (long)time(NULL));
        for (int k = 0; k < CONVS; k++) {
            turn(c, &l, ns, conv[k], 4097);
            int q;
            kv_cache_flush_to_redis(c, ns, strlen(ns), conv[k], 4097, &q);
            kv_cache_redis_drain(c, 60000);
            kv_cache_evict(c, 1 << 20);
        }
        kv_cache_destroy(c);
        int lens[] = {256, 1024, 4096};
        for (int li = 0; li < 3; li++) {
            int n = lens[li] + 1;
            double tt = 0, bytes = 0;
            long blocks = 0;
            for (int k = 0; k < CONVS; k++) {
                c = mk(&l, host, port);
                static void *g[1024], *lb[1024];
                kv_match m = {g, lb, 1024, 0, 0, 0, 0, 0};
                double t0 = now_s();
                kv_cache_lookup(c, ns, strlen(ns), conv[k], n, 5000, &m);
                tt += now_s() - t0;
                kv_stats st;
                kv_cache_stats(c, &st);
                /* Blocks brought into host RAM (a resume at a non-boundary
                 * prefix may still be refused for want of local KV). */
                blocks += (long)(st.redis.hit_tokens / (uint64_t)B);
                bytes += (double)st.redis.bytes_out;
                kv_match_release(c, &m);
                kv_cache_destroy(c);
            }
            /* Values carry local payload only for the resume window. */
            printf(
                "  redis fetch %5d-token prefix: %.2f ms per request, %.0f blocks/s, %.0f tokens/s, "
                "%.0f MB/s (%ld blocks fetched)\n",
                lens[li], tt / CONVS * 1e3, blocks / tt, blocks * B / tt, bytes / tt / 1e6, blocks);
        }
    }
    if (host && model_path) break_even(host, port, model_path);
    return 0;
}
