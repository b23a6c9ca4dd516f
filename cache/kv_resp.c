/*
 * kv_resp.c -- the exact-match response cache (design in kv_resp.h).
 */
#include "kv_resp.h"
#include "pl_err.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv_cache.h"
#include "kv_hash.h"
#include "pl_time.h"

typedef struct ent {
    struct ent *hnext;         /* bucket chain */
    struct ent *prev, *next;   /* LRU list (head = most recent) */
    uint64_t h;                /* hash of the key bytes */
    int64_t expires_ms;        /* end of life */
    size_t key_len, reply_len; /* sizes of the two byte strings below */
    uint8_t data[];            /* key bytes then reply bytes */
} ent;

struct kv_resp {
    kv_resp_config cfg; /* limits */
    uint64_t fp;        /* model fingerprint (part of every key) */
    pthread_mutex_t mu; /* guards everything below */
    ent **buckets;      /* hash table */
    size_t mask;        /* buckets - 1 */
    ent *head, *tail;   /* LRU list */
    int n;              /* entries */
    size_t bytes;       /* key + reply bytes held */
    kv_tier_stats st;   /* counters */
};

void kv_resp_config_default(kv_resp_config *c) {
    c->enabled = 0;
    c->max_bytes = 16u << 20;
    c->max_entries = 4096;
    c->ttl_ms = 30000;
}

int kv_resp_create(const kv_resp_config *cfg, uint64_t fingerprint, kv_resp **out, char *err,
                   size_t errlen) {
    if (!cfg || !out || cfg->max_entries < 1 || cfg->max_bytes < 1 || cfg->ttl_ms < 1) {
        return pl_errf(err, errlen, KV_EINVAL,
                       "kv_resp: bad config (max_entries, max_bytes, ttl_ms must be > 0)");
    }
    kv_resp *r = calloc(1, sizeof *r);
    size_t nb = 16;
    while (nb < (size_t)cfg->max_entries * 2) nb <<= 1;
    if (!r || !(r->buckets = calloc(nb, sizeof *r->buckets))) {
        free(r);
        return pl_errf(err, errlen, KV_ENOMEM, "kv_resp: out of memory");
    }
    r->cfg = *cfg;
    r->fp = fingerprint;
    r->mask = nb - 1;
    pthread_mutex_init(&r->mu, NULL);
    *out = r;
    return 0;
}

static void unlink_ent(kv_resp *r, ent *e) {
    ent **pp = &r->buckets[e->h & r->mask];
    while (*pp != e) pp = &(*pp)->hnext;
    *pp = e->hnext;
    if (e->prev) e->prev->next = e->next;
    else r->head = e->next;
    if (e->next) e->next->prev = e->prev;
    else r->tail = e->prev;
    r->n--;
    r->bytes -= e->key_len + e->reply_len;
    free(e);
}

void kv_resp_destroy(kv_resp *r) {
    if (!r) return;
    while (r->head) unlink_ent(r, r->head);
    pthread_mutex_destroy(&r->mu);
    free(r->buckets);
    free(r);
}

int kv_resp_deterministic(const kv_resp_params *p) {
    return p && (p->temperature == 0.0f || p->has_seed);
}

static void put32(uint8_t **p, uint32_t v) {
    kv_le32_put(*p, v);
    *p += 4;
}

/* Canonical key bytes (malloc'd); NULL on bad input or no memory. */
static uint8_t *key_bytes(const kv_resp *r, const char *ns, size_t ns_len, const int32_t *tok,
                          int n, const kv_resp_params *p, size_t *len) {
    *len = 4 + ns_len + 8 + 4 + 4 * (size_t)n + 4 * 4 + 8 + 4 + 4 + 4 + p->extra_len;
    uint8_t *k = malloc(*len), *q = k;
    if (!k) return NULL;
    put32(&q, (uint32_t)ns_len);
    if (ns_len) memcpy(q, ns, ns_len);
    q += ns_len;
    kv_le64_put(q, r->fp);
    q += 8;
    put32(&q, (uint32_t)n);
    for (int i = 0; i < n; i++) put32(&q, (uint32_t)tok[i]);
    uint32_t f;
    memcpy(&f, &p->temperature, 4);
    put32(&q, f);
    memcpy(&f, &p->top_p, 4);
    put32(&q, f);
    memcpy(&f, &p->repetition_penalty, 4);
    put32(&q, f);
    put32(&q, (uint32_t)p->has_seed);
    kv_le64_put(q, p->has_seed ? p->seed : 0);
    q += 8;
    put32(&q, (uint32_t)p->top_k);
    put32(&q, (uint32_t)p->max_tokens);
    put32(&q, (uint32_t)p->extra_len);
    if (p->extra_len) memcpy(q, p->extra, p->extra_len);
    return k;
}

static int args_ok(const char *ns, size_t ns_len, const int32_t *tok, int n,
                   const kv_resp_params *p) {
    return p && ns_len <= KV_NS_MAX && (ns || !ns_len) && n >= 0 && (tok || !n) &&
           (p->extra || !p->extra_len) && p->extra_len <= (1u << 20);
}

int kv_resp_get(kv_resp *r, const char *ns, size_t ns_len, const int32_t *tokens, int n,
                const kv_resp_params *p, void *buf, size_t cap, size_t *len) {
    if (!r || !len || !args_ok(ns, ns_len, tokens, n, p)) return KV_EINVAL;
    *len = 0;
    if (!r->cfg.enabled || !kv_resp_deterministic(p)) return 0;
    size_t kl;
    uint8_t *k = key_bytes(r, ns, ns_len, tokens, n, p, &kl);
    if (!k) return 0;
    uint64_t h = kv_hash64(k, kl, 0);
    int hit = 0, why = KV_MISS_ABSENT;
    pthread_mutex_lock(&r->mu);
    r->st.lookups++;
    for (ent *e = r->buckets[h & r->mask]; e; e = e->hnext) {
        if (e->h != h) continue;
        if (e->key_len != kl || memcmp(e->data, k, kl)) {
            why = KV_MISS_COLLISION;
            continue;
        }
        if (pl_mono_ms() >= e->expires_ms) {
            why = KV_MISS_EXPIRED;
            unlink_ent(r, e);
            break;
        }
        if (e->reply_len <= cap) {
            memcpy(buf, e->data + kl, e->reply_len);
            *len = e->reply_len;
            hit = 1;
            /* most recently used to the head */
            if (e->prev) {
                e->prev->next = e->next;
                if (e->next) e->next->prev = e->prev;
                else r->tail = e->prev;
                e->prev = NULL;
                e->next = r->head;
                r->head->prev = e;
                r->head = e;
            }
        }
        break;
    }
    if (hit) {
        r->st.hits++;
        r->st.hit_tokens += (uint64_t)n;
        r->st.bytes_out += *len;
    } else {
        r->st.misses[why]++;
    }
    pthread_mutex_unlock(&r->mu);
    free(k);
    return hit;
}

int kv_resp_put(kv_resp *r, const char *ns, size_t ns_len, const int32_t *tokens, int n,
                const kv_resp_params *p, const void *reply, size_t len) {
    if (!r || (len && !reply) || !args_ok(ns, ns_len, tokens, n, p)) return KV_EINVAL;
    if (!r->cfg.enabled || !kv_resp_deterministic(p)) return 0;
    size_t kl;
    uint8_t *k = key_bytes(r, ns, ns_len, tokens, n, p, &kl);
    if (!k) return KV_ENOMEM;
    if (kl + len > r->cfg.max_bytes) {
        free(k);
        return 0;
    }
    ent *e = malloc(sizeof *e + kl + len);
    if (!e) {
        free(k);
        return KV_ENOMEM;
    }
    e->h = kv_hash64(k, kl, 0);
    e->key_len = kl;
    e->reply_len = len;
    memcpy(e->data, k, kl);
    if (len) memcpy(e->data + kl, reply, len);
    free(k);
    pthread_mutex_lock(&r->mu);
    e->expires_ms = pl_mono_ms() + r->cfg.ttl_ms;
    /* replace an equal key */
    for (ent *x = r->buckets[e->h & r->mask]; x; x = x->hnext)
        if (x->h == e->h && x->key_len == kl && !memcmp(x->data, e->data, kl)) {
            unlink_ent(r, x);
            break;
        }
    while (r->tail && (r->n + 1 > r->cfg.max_entries || r->bytes + kl + len > r->cfg.max_bytes)) {
        unlink_ent(r, r->tail);
        r->st.evictions++;
    }
    e->hnext = r->buckets[e->h & r->mask];
    r->buckets[e->h & r->mask] = e;
    e->prev = NULL;
    e->next = r->head;
    if (r->head) r->head->prev = e;
    else r->tail = e;
    r->head = e;
    r->n++;
    r->bytes += kl + len;
    r->st.bytes_in += len;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

void kv_resp_stats(kv_resp *r, kv_tier_stats *out) {
    pthread_mutex_lock(&r->mu);
    *out = r->st;
    pthread_mutex_unlock(&r->mu);
}
