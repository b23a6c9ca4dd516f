/*
 * kv_fetch.c -- prefetch tickets and the fetcher thread of the Redis tier.
 *
 * A ticket copies the request (namespace, tokens) under c->mu so the caller
 * may reuse its buffers at once.  The fetcher computes both chain hashes
 * outside the lock, finds how deep host RAM already goes, GETs every
 * missing block boundary in one pipelined round trip, validates each value
 * (kv_value_decode), and then, under the lock, attaches the consecutive
 * valid blocks to the index as unpinned, recently used nodes.  The
 * scheduler's next kv_cache_lookup finds them in host RAM.
 */
#include <stdlib.h>
#include <string.h>

#include "kv_internal.h"

int kv_cache_prefetch(kv_cache *c, const char *ns, size_t ns_len, const int32_t *tokens, int n,
                      int *ticket) {
    if (!c || !ticket || n < 0 || (n && !tokens) || !kv_ns_valid(ns, ns_len)) return KV_EINVAL;
    if (!c->use_redis) return KV_EREDIS;
    if (n > c->cfg.max_tokens) n = c->cfg.max_tokens;
    pthread_mutex_lock(&c->mu);
    int i;
    for (i = 0; i < c->cfg.max_tickets; i++)
        if (c->tickets[i].state == KV_TK_FREE) break;
    if (i == c->cfg.max_tickets) {
        pthread_mutex_unlock(&c->mu);
        return KV_EFULL;
    }
    kv_ticket *t = &c->tickets[i];
    t->state = KV_TK_QUEUED;
    t->abandoned = 0;
    t->next = -1;
    if (ns_len) memcpy(t->ns, ns, ns_len);
    t->ns_len = ns_len;
    t->n = n;
    if (n) memcpy(t->tokens, tokens, (size_t)n * sizeof(int32_t));
    t->n_inserted = 0;
    if (c->fq_tail >= 0) c->tickets[c->fq_tail].next = i;
    else c->fq_head = i;
    c->fq_tail = i;
    pthread_cond_signal(&c->fetch_cv);
    pthread_mutex_unlock(&c->mu);
    *ticket = i;
    return 0;
}

int kv_cache_prefetch_wait(kv_cache *c, int ticket, int timeout_ms) {
    if (!c || ticket < 0 || ticket >= c->cfg.max_tickets) return KV_EINVAL;
    int64_t deadline = pl_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    struct timespec ts = {deadline / 1000, (long)(deadline % 1000) * 1000000L};
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    kv_ticket *t = &c->tickets[ticket];
    if (t->state == KV_TK_FREE) rc = KV_EINVAL;
    while (!rc && t->state != KV_TK_DONE) {
        if (pl_mono_ms() >= deadline) rc = KV_ETIMEDOUT;
        else pthread_cond_timedwait(&c->done_cv, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

void kv_cache_prefetch_release(kv_cache *c, int ticket) {
    if (!c || ticket < 0 || ticket >= c->cfg.max_tickets) return;
    pthread_mutex_lock(&c->mu);
    kv_ticket *t = &c->tickets[ticket];
    if (t->state == KV_TK_DONE) t->state = KV_TK_FREE;
    else if (t->state != KV_TK_FREE) t->abandoned = 1;
    pthread_mutex_unlock(&c->mu);
}

/* Depth of the host path of the first nb blocks (h = chain hashes). */
static kv_node *host_path_locked(kv_cache *c, kv_ticket *t, const uint64_t *h, int nb, int *depth) {
    *depth = 0;
    kv_node *node = kv_root_find_locked(c, t->ns, t->ns_len, kv_hash_seed(c->fp, t->ns, t->ns_len));
    for (int k = 0; node && k < nb; k++) {
        kv_node *ch = kv_child_find_locked(c, node, kv_key(c, h[k]), t->tokens + (size_t)k * c->B);
        if (!ch) break;
        node = ch;
        *depth = k + 1;
    }
    return node;
}

/* Attach valid fetched blocks d.. under the host path; returns blocks added. */
static int attach_locked(kv_cache *c, kv_ticket *t, const uint64_t *h, const uint64_t *g,
                         const kv_value_view *views, const int *ok, int from, int nb) {
    int d, added = 0;
    kv_node *node = host_path_locked(c, t, h, nb, &d);
    if (!node)
        node = kv_root_get_locked(c, t->ns, t->ns_len, kv_hash_seed(c->fp, t->ns, t->ns_len));
    if (!node || d < from) return 0;
    for (int k = d; k < nb && ok[k]; k++) {
        /* Allocation may evict: keep the node being extended out of the heap. */
        node->n_children++;
        if (node->root_idx < 0) kv_heap_update_locked(c, node);
        void *gb = c->has_kind[0] ? kv_pool_alloc_locked(c, 0) : NULL;
        void *lb = (views[k].local || !c->has_kind[0]) && c->has_kind[1] && (gb || !c->has_kind[0])
                       ? kv_pool_alloc_locked(c, 1)
                       : NULL;
        node->n_children--;
        if ((c->has_kind[0] && !gb) || (!c->has_kind[0] && !lb)) {
            if (gb) kv_pool_unref_locked(c, 0, gb);
            if (lb) kv_pool_unref_locked(c, 1, lb);
            c->st.redis.misses[KV_MISS_NOMEM] += (uint64_t)(nb - k);
            if (node->root_idx < 0) kv_heap_update_locked(c, node);
            break;
        }
        kv_node *ch = kv_node_new_locked(c, node, h[k], g[k], t->tokens + (size_t)k * c->B);
        if (!ch) {
            if (gb) kv_pool_unref_locked(c, 0, gb);
            if (lb) kv_pool_unref_locked(c, 1, lb);
            c->st.redis.misses[KV_MISS_NOMEM] += (uint64_t)(nb - k);
            if (node->root_idx < 0) kv_heap_update_locked(c, node);
            break;
        }
        if (gb) {
            memcpy(gb, views[k].global, c->bbytes[0]);
            ch->blk[0] = gb;
            kv_pool_set_node_locked(c, 0, gb, ch);
            c->st.redis.bytes_out += c->bbytes[0];
        }
        if (lb && views[k].local) {
            memcpy(lb, views[k].local, c->bbytes[1]);
            ch->blk[1] = lb;
            kv_pool_set_node_locked(c, 1, lb, ch);
            c->st.redis.bytes_out += c->bbytes[1];
        } else if (lb) {
            kv_pool_unref_locked(c, 1, lb);
        }
        kv_heap_update_locked(c, ch);
        if (node->root_idx < 0) kv_heap_update_locked(c, node);
        node = ch;
        added++;
    }
    return added;
}

/* Fetch the missing blocks of ticket t (called without mu). */
static void fetch_one(kv_cache *c, kv_conn *conn, kv_ticket *t) {
    int nb = t->n > 0 ? (t->n - 1) / c->B : 0, d = 0;
    uint64_t *h = c->fetch_h, *g = c->fetch_h + nb, t0 = (uint64_t)pl_mono_us();
    redisReply **rep = (redisReply **)c->fetch_replies;
    kv_chain(c, t->ns, t->ns_len, t->tokens, nb, h, g);
    pthread_mutex_lock(&c->mu);
    if (nb) host_path_locked(c, t, h, nb, &d);
    if (d < nb) c->st.redis.lookups++;
    pthread_mutex_unlock(&c->mu);
    if (d >= nb) return;

    int why_all = -1, got = 0;
    redisContext *ctx = kv_conn_get(c, conn);
    if (!ctx) why_all = KV_MISS_DOWN;
    for (int k = d; ctx && k < nb; k++) {
        char key[160];
        size_t kl;
        kv_redis_key(c, t->ns, t->ns_len, kv_key(c, h[k]), key, sizeof key, &kl);
        redisAppendCommand(ctx, "GET %b", key, kl);
    }
    for (int k = d; ctx && k < nb; k++) {
        rep[k] = NULL;
        if (redisGetReply(ctx, (void **)&rep[k]) != REDIS_OK || !rep[k]) {
            rep[k] = NULL;
            for (int j = d; j < k; j++) freeReplyObject(rep[j]);
            why_all = kv_conn_fail(c, conn);
            ctx = NULL;
            break;
        }
        got = k + 1;
        int refusal = kv_reply_refusal(rep[k]);
        if (refusal) { /* NOAUTH / NOPERM: the tier is unavailable, not the value bad */
            why_all = kv_conn_refused(c, conn, refusal, rep[k]);
            for (int j = d; j <= k; j++) freeReplyObject(rep[j]);
            ctx = NULL;
            break;
        }
    }
    if (why_all >= 0) {
        pthread_mutex_lock(&c->mu);
        c->st.redis.misses[why_all] += (uint64_t)(nb - d);
        kv_hist_add(c->st.redis.lat_us, (uint64_t)pl_mono_us() - t0);
        pthread_mutex_unlock(&c->mu);
        return;
    }
    kv_conn_ok(c, conn, 1);
    /* Validate without the lock; views point into the replies. */
    kv_value_view *v = c->fetch_views;
    int *ok = c->fetch_ok;
    uint64_t miss[KV_MISS_N] = {0};
    {
        uint64_t ns_hash = kv_hash64(t->ns, t->ns_len, 0);
        for (int k = d; k < got; k++) {
            kv_value_meta e = {
                c->fp,       ns_hash,        kv_key(c, h[k]),        g[k],
                (uint32_t)k, (uint32_t)c->B, (uint32_t)c->bbytes[0], (uint32_t)c->bbytes[1]};
            int why = KV_MISS_ABSENT;
            ok[k] = 0;
            /* kv_value_decode returns 0 for a valid value (0 is never one
             * of its miss reasons). */
            if (rep[k]->type == REDIS_REPLY_STRING) {
                why = kv_value_decode((const uint8_t *)rep[k]->str, (size_t)rep[k]->len, &e,
                                      t->tokens + (size_t)k * c->B, &v[k]);
                if (why == 0) {
                    ok[k] = 1;
                    continue;
                }
            } else if (rep[k]->type != REDIS_REPLY_NIL) {
                why = KV_MISS_CORRUPT;
            }
            miss[why]++;
        }
        pthread_mutex_lock(&c->mu);
        int added = attach_locked(c, t, h, g, v, ok, d, got);
        for (int r = 0; r < KV_MISS_N; r++) c->st.redis.misses[r] += miss[r];
        if (added) {
            c->st.redis.hits++;
            c->st.redis.hit_tokens += (uint64_t)added * c->B;
        }
        t->n_inserted = added;
        kv_hist_add(c->st.redis.lat_us, (uint64_t)pl_mono_us() - t0);
        pthread_mutex_unlock(&c->mu);
    }
    for (int k = d; k < got; k++) freeReplyObject(rep[k]);
}

void *kv_fetcher_main(void *arg) {
    kv_cache *c = arg;
    kv_conn conn = {NULL, 0, c->cfg.backoff_min_ms};
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (c->fq_head < 0 && !c->stopping) pthread_cond_wait(&c->fetch_cv, &c->mu);
        if (c->fq_head < 0) break;
        int i = c->fq_head;
        kv_ticket *t = &c->tickets[i];
        c->fq_head = t->next;
        if (c->fq_head < 0) c->fq_tail = -1;
        t->state = KV_TK_RUNNING;
        int stop = c->stopping;
        pthread_mutex_unlock(&c->mu);
        if (!stop) fetch_one(c, &conn, t);
        pthread_mutex_lock(&c->mu);
        if (t->abandoned) {
            t->state = KV_TK_FREE;
            t->abandoned = 0;
        } else {
            t->state = KV_TK_DONE;
        }
        pthread_cond_broadcast(&c->done_cv);
    }
    pthread_mutex_unlock(&c->mu);
    if (conn.ctx) redisFree(conn.ctx);
    return NULL;
}
