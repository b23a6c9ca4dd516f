/*
 * kv_redis.c -- the Redis tier: writer slots and the writer thread, start
 * and stop of both I/O threads (the fetcher is in kv_fetch.c, connections,
 * TLS, AUTH and backoff in kv_conn.c).
 *
 * Each thread owns one hiredis connection (kv_conn) and touches it without
 * any lock.  Shared state (slots, queues, tickets, counters, redis_down) is
 * guarded by c->mu, which is never held during network I/O.  Every command
 * is bounded by cfg.cmd_timeout_ms (hiredis socket timeouts); a failure
 * closes the connection and the next attempt waits an exponentially growing
 * backoff, during which requests fail at once (KV_MISS_DOWN).  The backoff
 * resets only after a command succeeds, so a server that accepts
 * connections but does not answer (SIGSTOP) is also backed off.  A reply
 * that is Redis refusing us (NOAUTH, NOPERM, WRONGPASS) fails the whole
 * batch the same way (kv_conn_refused).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv_internal.h"

#define WRITE_BATCH 32 /* values per pipelined write round trip */

static void abs_deadline(struct timespec *ts, int64_t deadline_ms) {
    ts->tv_sec = deadline_ms / 1000;
    ts->tv_nsec = (long)(deadline_ms % 1000) * 1000000L;
}

void kv_redis_key(const kv_cache *c, const char *ns, size_t ns_len, uint64_t key, char *out,
                  size_t cap, size_t *len) {
    int w = snprintf(out, cap, "parley:kv:%016llx:%.*s:%016llx", (unsigned long long)c->fp,
                     (int)ns_len, ns_len ? ns : "", (unsigned long long)key);
    *len = w < 0 ? 0 : (size_t)w < cap ? (size_t)w : cap - 1;
}

/* ---- writer ---- */

int kv_redis_wants_locked(kv_cache *c, const kv_node *n) {
    if (!c->use_redis || n->n_tok != c->B) return 0; /* Redis holds whole blocks only */
    return !(n->redis_ms && pl_mono_ms() - n->redis_ms < (int64_t)c->cfg.ttl_s * 500);
}

int kv_redis_enqueue_locked(kv_cache *c, kv_node *n) {
    if (c->slot_free < 0) return KV_EFULL;
    int i = c->slot_free;
    kv_slot *s = &c->slots[i];
    c->slot_free = s->next;
    kv_node *r = n->root;
    kv_redis_key(c, c->root_ns[r->root_idx], c->root_ns_len[r->root_idx], n->key, s->key,
                 sizeof s->key, &s->key_len);
    kv_value_meta m = {
        .fingerprint = c->fp,
        .ns_hash = kv_hash64(c->root_ns[r->root_idx], c->root_ns_len[r->root_idx], 0),
        .key_h = n->key,
        .check_g = n->g,
        .block_index = (uint32_t)(n->depth - 1),
        .block_tokens = (uint32_t)c->B,
        .global_len = n->blk[0] ? (uint32_t)c->bbytes[0] : 0,
        .local_len = n->blk[1] ? (uint32_t)c->bbytes[1] : 0,
    };
    kv_value_encode(s->buf, &m, n->tokens, n->blk[0], n->blk[1]);
    s->len = kv_value_size(m.block_tokens, m.global_len, m.local_len);
    s->next = -1;
    if (c->wq_tail >= 0) c->slots[c->wq_tail].next = i;
    else c->wq_head = i;
    c->wq_tail = i;
    c->st.redis_write_queued++;
    n->redis_ms = pl_mono_ms();
    pthread_cond_signal(&c->writer_cv);
    return 0;
}

int kv_slot_wait_locked(kv_cache *c, int64_t deadline_ms) {
    struct timespec ts;
    abs_deadline(&ts, deadline_ms);
    while (c->slot_free < 0) {
        if (pl_mono_ms() >= deadline_ms) return KV_ETIMEDOUT;
        pthread_cond_timedwait(&c->slot_cv, &c->mu, &ts);
    }
    return 0;
}

static void *writer_main(void *arg) {
    kv_cache *c = arg;
    kv_conn conn = {NULL, 0, c->cfg.backoff_min_ms};
    int batch[WRITE_BATCH];
    pthread_mutex_lock(&c->mu);
    for (;;) {
        while (c->wq_head < 0 && !c->stopping) {
            if (!c->redis_down) {
                pthread_cond_wait(&c->writer_cv, &c->mu);
                continue;
            }
            /* Redis is down and evictions are dropping blocks: probe it
             * once the backoff allows, so the tier comes back by itself.
             * The probe is a GET under the key prefix, so an ACL user
             * without read access to it stays down (NOPERM). */
            int64_t next = conn.next_try_ms > pl_mono_ms() ? conn.next_try_ms : pl_mono_ms();
            struct timespec ts;
            abs_deadline(&ts, next + 1);
            pthread_cond_timedwait(&c->writer_cv, &c->mu, &ts);
            if (c->wq_head >= 0 || c->stopping || pl_mono_ms() < conn.next_try_ms) continue;
            pthread_mutex_unlock(&c->mu);
            redisContext *ctx = kv_conn_get(c, &conn);
            redisReply *r = ctx ? redisCommand(ctx, "GET parley:kv:probe") : NULL;
            int refusal = kv_reply_refusal(r);
            if (refusal) kv_conn_refused(c, &conn, refusal, r);
            else if (r) kv_conn_ok(c, &conn, 0);
            else if (ctx) kv_conn_fail(c, &conn);
            if (r) freeReplyObject(r);
            pthread_mutex_lock(&c->mu);
        }
        if (c->wq_head < 0) break;
        int nb = 0;
        while (c->wq_head >= 0 && nb < WRITE_BATCH) {
            batch[nb++] = c->wq_head;
            c->wq_head = c->slots[c->wq_head].next;
        }
        if (c->wq_head < 0) c->wq_tail = -1;
        c->writer_busy = 1;
        pthread_mutex_unlock(&c->mu);

        int ok = 0;
        uint64_t bytes = 0;
        redisContext *ctx = kv_conn_get(c, &conn);
        if (ctx) {
            for (int i = 0; i < nb; i++) {
                kv_slot *s = &c->slots[batch[i]];
                redisAppendCommand(ctx, "SET %b %b EX %d", s->key, s->key_len, s->buf, s->len,
                                   c->cfg.ttl_s);
            }
            int i, refusal = KV_CAUSE_NONE;
            for (i = 0; i < nb; i++) {
                redisReply *r = NULL;
                if (redisGetReply(ctx, (void **)&r) != REDIS_OK || !r) break;
                if (r->type == REDIS_REPLY_STATUS) {
                    ok++;
                    bytes += c->slots[batch[i]].len;
                } else if ((refusal = kv_reply_refusal(r)) != KV_CAUSE_NONE) {
                    kv_conn_refused(c, &conn, refusal, r);
                    freeReplyObject(r);
                    break;
                }
                freeReplyObject(r);
            }
            /* a refusal was closed and backed off by kv_conn_refused */
            if (!refusal && i < nb) kv_conn_fail(c, &conn);
            else if (!refusal) kv_conn_ok(c, &conn, 1);
        }
        pthread_mutex_lock(&c->mu);
        c->st.redis_writes += (uint64_t)ok;
        c->st.redis.bytes_in += bytes;
        c->st.redis_write_errors += (uint64_t)(nb - ok);
        c->st.redis_write_queued -= (uint64_t)nb;
        for (int i = 0; i < nb; i++) {
            c->slots[batch[i]].next = c->slot_free;
            c->slot_free = batch[i];
        }
        c->writer_busy = 0;
        pthread_cond_broadcast(&c->slot_cv);
    }
    pthread_mutex_unlock(&c->mu);
    if (conn.ctx) redisFree(conn.ctx);
    return NULL;
}

#define KV_STR_(x) #x
#define KV_STR(x) KV_STR_(x)
const char *kv_cache_redis_client_version(void) {
    return KV_STR(HIREDIS_MAJOR) "." KV_STR(HIREDIS_MINOR) "." KV_STR(HIREDIS_PATCH);
}

int kv_cache_redis_drain(kv_cache *c, int timeout_ms) {
    if (!c || !c->use_redis) return 0;
    int64_t deadline = pl_mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    struct timespec ts;
    abs_deadline(&ts, deadline);
    int rc = 0;
    pthread_mutex_lock(&c->mu);
    while (c->wq_head >= 0 || c->writer_busy) {
        if (pl_mono_ms() >= deadline) {
            rc = KV_ETIMEDOUT;
            break;
        }
        pthread_cond_timedwait(&c->slot_cv, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}

/* ---- start / stop ---- */

int kv_redis_start(kv_cache *c, const kv_cache_config *cfg, char *err, size_t errlen) {
    int rc = kv_conn_setup(c, cfg, err, errlen);
    if (rc) return rc;
    c->slot_bytes = kv_value_size((uint32_t)c->B, (uint32_t)c->bbytes[0], (uint32_t)c->bbytes[1]);
    size_t n = c->cfg.write_queue_bytes / c->slot_bytes;
    c->n_slots = n < 4 ? 4 : n > 1 << 20 ? 1 << 20 : (int)n;
    c->slots = calloc((size_t)c->n_slots, sizeof *c->slots);
    c->fetch_h = malloc((size_t)(c->cfg.max_tokens / c->B + 1) * 2 * sizeof(uint64_t));
    c->fetch_replies = calloc((size_t)(c->cfg.max_tokens / c->B + 1), sizeof(void *));
    c->fetch_views = calloc((size_t)(c->cfg.max_tokens / c->B + 1), sizeof *c->fetch_views);
    c->fetch_ok = calloc((size_t)(c->cfg.max_tokens / c->B + 1), sizeof *c->fetch_ok);
    if (!c->slots || !c->fetch_h || !c->fetch_replies || !c->fetch_views || !c->fetch_ok)
        goto nomem;
    for (int i = 0; i < c->n_slots; i++) {
        if (!(c->slots[i].buf = malloc(c->slot_bytes))) goto nomem;
        c->slots[i].next = c->slot_free;
        c->slot_free = i;
    }
    if (pthread_create(&c->writer, NULL, writer_main, c)) {
        return pl_errf(err, errlen, KV_ENOMEM, "kv_cache: cannot start the Redis writer thread");
    }
    c->writer_started = 1;
    if (pthread_create(&c->fetcher, NULL, kv_fetcher_main, c)) {
        return pl_errf(err, errlen, KV_ENOMEM, "kv_cache: cannot start the Redis fetcher thread");
    }
    c->fetcher_started = 1;
    return 0;
nomem:
    return pl_errf(err, errlen, KV_ENOMEM, "kv_cache: out of memory for Redis write slots");
}

void kv_redis_stop(kv_cache *c) {
    pthread_mutex_lock(&c->mu);
    c->stopping = 1;
    pthread_cond_broadcast(&c->writer_cv);
    pthread_cond_broadcast(&c->fetch_cv);
    pthread_mutex_unlock(&c->mu);
    if (c->writer_started) pthread_join(c->writer, NULL);
    if (c->fetcher_started) pthread_join(c->fetcher, NULL);
    if (c->slots)
        for (int i = 0; i < c->n_slots; i++) free(c->slots[i].buf);
    free(c->slots);
    free(c->fetch_h);
    free(c->fetch_replies);
    free(c->fetch_views);
    free(c->fetch_ok);
    c->slots = NULL;
    kv_conn_teardown(c);
}
