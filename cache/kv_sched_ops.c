/*
 * kv_sched_ops.c -- eng_sched_cache_ops over kv_cache (see kv_sched_ops.h):
 * thin functions that translate the scheduler's match struct to kv_match
 * and back.  Kept in the cache module so the engine never links it.
 */
#include <stdlib.h>
#include <string.h>

#include "kv_sched_ops.h"

static long ops_blocks_total(void *ctx, int kind) {
    kv_stats st;
    if (kind < 0 || kind > 1) return 0;
    kv_cache_stats(ctx, &st);
    return (long)st.blocks_total[kind];
}

static int ops_lookup(void *ctx, const char *ns, size_t ns_len, const int32_t *tokens, int n,
                      eng_sched_match *m) {
    kv_match km = {m->gblk, m->lblk, m->cap, 0, 0, 0, 1, 0}; /* partial blocks too */
    int rc = kv_cache_lookup(ctx, ns ? ns : "", ns_len, tokens, n, -1, &km);
    m->n_blocks = km.n_blocks;
    m->n_tokens = km.n_tokens;
    m->n_remote = km.n_from_redis;
    return rc;
}

static void ops_release(void *ctx, eng_sched_match *m) {
    kv_match km = {m->gblk, m->lblk, m->cap, m->n_blocks, m->n_tokens, m->n_remote, 0, 0};
    kv_match_release(ctx, &km);
    m->n_blocks = m->n_tokens = m->n_remote = 0;
}

static int ops_probe(void *ctx, const char *ns, size_t ns_len, const int32_t *tokens, int n) {
    if (n <= 0) return 0;
    /* arrays for the longest possible match (block size unknown here: >= 1) */
    int cap = n;
    void **arr = calloc((size_t)cap * 2, sizeof *arr);
    if (!arr) return 0;
    kv_match km = {arr, arr + cap, cap, 0, 0, 0, 0, 0};
    int got = 0;
    if (kv_cache_lookup(ctx, ns ? ns : "", ns_len, tokens, n, -1, &km) == 0) got = km.n_tokens;
    kv_match_release(ctx, &km);
    free(arr);
    return got;
}

static int ops_insert(void *ctx, const char *ns, size_t ns_len, const eng_kvseq *seq,
                      int turn_boundary) {
    return kv_cache_insert(ctx, ns ? ns : "", ns_len, seq, turn_boundary);
}

static int ops_prefetch(void *ctx, const char *ns, size_t ns_len, const int32_t *tokens, int n) {
    int ticket = -1;
    if (kv_cache_prefetch(ctx, ns ? ns : "", ns_len, tokens, n, &ticket) != 0) return -1;
    return ticket;
}

static int ops_prefetch_done(void *ctx, int ticket) {
    return kv_cache_prefetch_wait(ctx, ticket, 0) == 0;
}

static void ops_prefetch_release(void *ctx, int ticket) { kv_cache_prefetch_release(ctx, ticket); }

int kv_sched_ops_init(eng_sched_cache_ops *ops, kv_cache *c) {
    if (!ops || !c) return KV_EINVAL;
    memset(ops, 0, sizeof *ops);
    ops->ctx = c;
    ops->alloc = kv_cache_allocator(c);
    ops->blocks_total = ops_blocks_total;
    ops->lookup = ops_lookup;
    ops->release = ops_release;
    ops->probe = ops_probe;
    ops->insert = ops_insert;
    ops->prefetch = ops_prefetch;
    ops->prefetch_done = ops_prefetch_done;
    ops->prefetch_release = ops_prefetch_release;
    return 0;
}
