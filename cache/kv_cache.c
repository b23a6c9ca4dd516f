/*
 * kv_cache.c -- creation and teardown of the KV cache, the lookup and
 * insert walks over the prefix index, the handoff calls and statistics.
 * The design (data structures, invariants, locking) is in kv_cache.h.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kv_internal.h"

void kv_cache_config_default(kv_cache_config *c) {
    memset(c, 0, sizeof *c);
    c->budget_bytes = 256u << 20;
    c->local_share = 0.5;
    c->max_tokens = 32768;
    c->max_namespaces = 256;
    c->redis_port = 6379;
    c->cmd_timeout_ms = 200;
    c->backoff_min_ms = 50;
    c->backoff_max_ms = 2000;
    c->ttl_s = 3600;
    c->write_queue_bytes = 8u << 20;
    c->max_tickets = 64;
    c->partial_blocks = 1;
}

static int cfg_check(const kv_cache_config *cfg, const eng_kv_layout *l, char *err, size_t errlen) {
    if (!l || l->block_tokens < 1 || l->block_tokens > 1024) {
        return pl_errf(err, errlen, KV_EINVAL,
                       "kv_cache: layout missing or block_tokens out of 1..1024");
    }
    if (!l->block_bytes[0] && !l->block_bytes[1]) {
        return pl_errf(err, errlen, KV_EINVAL, "kv_cache: layout has no KV-owning layers");
    }
    if (cfg->local_share <= 0 || cfg->local_share > 64 || cfg->max_tokens < l->block_tokens ||
        cfg->max_namespaces < 1 || cfg->cmd_timeout_ms < 1 || cfg->backoff_min_ms < 1 ||
        cfg->backoff_max_ms < cfg->backoff_min_ms || cfg->ttl_s < 1 || cfg->max_tickets < 1 ||
        cfg->hash_mask_bits < 0 || cfg->hash_mask_bits > 64) {
        return pl_errf(err, errlen, KV_EINVAL,
                       "kv_cache: config out of range (local_share, max_tokens >= B, "
                       "max_namespaces, timeouts, ttl_s, max_tickets >= 1, hash_mask_bits 0..64)");
    }
    return 0;
}

/* Free the pool, every array and c itself (tickets may be NULL). */
static void kv_cache_free_mem(kv_cache *c, int max_tickets) {
    kv_pool_free(c);
    if (c->tickets)
        for (int i = 0; i < max_tickets; i++) free(c->tickets[i].tokens);
    free(c->nodes);
    free(c->tok_arena);
    free(c->roots);
    free(c->root_ns);
    free(c->root_ns_len);
    free(c->buckets);
    free(c->heap);
    free(c->tickets);
    free(c);
}

int kv_cache_create(const kv_cache_config *cfg, const eng_kv_layout *l, uint64_t fp, kv_cache **out,
                    char *err, size_t errlen) {
    int rc = KV_EINVAL;
    kv_cache *c = NULL;
    if (!cfg || !out) {
        return pl_errf(err, errlen, KV_EINVAL, "kv_cache: NULL argument");
    }
    *out = NULL;
    if ((rc = cfg_check(cfg, l, err, errlen))) return rc;
    rc = KV_ENOMEM;
    if (!(c = calloc(1, sizeof *c))) goto nomem;
    c->cfg = *cfg;
    /* The strings are copied by kv_conn_setup; never keep the caller's. */
    c->cfg.redis_user = c->cfg.redis_password = NULL;
    c->cfg.redis_tls_ca = c->cfg.redis_tls_cert = c->cfg.redis_tls_key = NULL;
    c->cfg.redis_tls_server_name = NULL;
    if (cfg->redis_host && cfg->redis_host[0]) {
        if (strlen(cfg->redis_host) >= sizeof c->redis_host || cfg->redis_port < 1 ||
            cfg->redis_port > 65535) {
            rc = pl_errf(err, errlen, KV_EINVAL, "kv_cache: bad Redis address");
            goto err;
        }
        strcpy(c->redis_host, cfg->redis_host);
        c->use_redis = 1;
    }
    c->cfg.redis_host = c->redis_host;
    c->layout = l;
    c->fp = fp;
    c->B = l->block_tokens;
    for (int k = 0; k < 2; k++) {
        c->bbytes[k] = l->block_bytes[k];
        c->has_kind[k] = l->block_bytes[k] != 0;
    }
    c->wb = c->has_kind[ENG_KV_LOCAL] ? (l->max_window + c->B - 1) / c->B : 0;
    c->key_mask = cfg->hash_mask_bits == 0 || cfg->hash_mask_bits == 64
                      ? ~0ull
                      : (1ull << cfg->hash_mask_bits) - 1;
    /* Split the budget: local_share local blocks per global one (the
     * scheduler's budget splits its own the same way). */
    long split[2];
    eng_kv_layout_split(l, cfg->budget_bytes, cfg->local_share, split);
    for (int k = 0; k < 2; k++) c->nblk[k] = split[k] > INT_MAX ? INT_MAX : (int)split[k];
    if (c->nblk[0] + c->nblk[1] < 2 || (c->has_kind[0] && c->nblk[0] < 1) ||
        (c->has_kind[1] && c->nblk[1] < 1)) {
        rc = pl_errf(err, errlen, KV_EINVAL,
                     "kv_cache: budget of %zu bytes holds no blocks (block bytes %zu/%zu)",
                     cfg->budget_bytes, c->bbytes[0], c->bbytes[1]);
        goto err;
    }
    c->max_nodes = c->nblk[0] + c->nblk[1];
    size_t nb = 16;
    while (nb < (size_t)c->max_nodes * 2 + (size_t)cfg->max_namespaces) nb <<= 1;
    c->bucket_mask = nb - 1;
    c->nodes = calloc((size_t)c->max_nodes, sizeof *c->nodes);
    c->tok_arena = malloc((size_t)c->max_nodes * c->B * sizeof(int32_t));
    c->roots = calloc((size_t)cfg->max_namespaces, sizeof *c->roots);
    c->root_ns = calloc((size_t)cfg->max_namespaces, sizeof *c->root_ns);
    c->root_ns_len = malloc((size_t)cfg->max_namespaces * sizeof *c->root_ns_len);
    c->buckets = calloc(nb, sizeof *c->buckets);
    c->heap = calloc((size_t)c->max_nodes, sizeof *c->heap);
    c->tickets = calloc((size_t)cfg->max_tickets, sizeof *c->tickets);
    if (!c->nodes || !c->tok_arena || !c->roots || !c->root_ns || !c->root_ns_len || !c->buckets ||
        !c->heap || !c->tickets)
        goto nomem;
    for (int i = 0; i < cfg->max_namespaces; i++) c->root_ns_len[i] = (size_t)-1;
    for (int i = c->max_nodes - 1; i >= 0; i--) {
        c->nodes[i].free_next = c->free_nodes;
        c->free_nodes = &c->nodes[i];
    }
    for (int i = 0; i < cfg->max_tickets; i++)
        if (!(c->tickets[i].tokens = malloc((size_t)cfg->max_tokens * sizeof(int32_t)))) goto nomem;
    c->fq_head = c->fq_tail = -1;
    c->wq_head = c->wq_tail = -1;
    c->slot_free = -1;
    if ((rc = kv_pool_init(c, err, errlen))) goto err;
    c->st.budget_bytes = cfg->budget_bytes;
    for (int k = 0; k < 2; k++) {
        c->st.blocks_total[k] = (uint64_t)c->nblk[k];
        c->st.pool_bytes += (uint64_t)c->nblk[k] * c->bbytes[k];
    }
    pthread_mutex_init(&c->mu, NULL);
    /* Timed waits use CLOCK_MONOTONIC deadlines (pl_mono_ms). */
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&c->writer_cv, &ca);
    pthread_cond_init(&c->slot_cv, &ca);
    pthread_cond_init(&c->fetch_cv, &ca);
    pthread_cond_init(&c->done_cv, &ca);
    pthread_condattr_destroy(&ca);
    if (c->use_redis && (rc = kv_redis_start(c, cfg, err, errlen))) {
        kv_cache_destroy(c);
        return rc;
    }
    *out = c;
    return 0;
nomem:
    rc = pl_errf(err, errlen, KV_ENOMEM, "kv_cache: out of memory creating the cache");
err:
    if (c) kv_cache_free_mem(c, cfg->max_tickets);
    return rc;
}

void kv_cache_destroy(kv_cache *c) {
    if (!c) return;
    if (c->use_redis) kv_redis_stop(c);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->writer_cv);
    pthread_cond_destroy(&c->slot_cv);
    pthread_cond_destroy(&c->fetch_cv);
    pthread_cond_destroy(&c->done_cv);
    kv_cache_free_mem(c, c->cfg.max_tickets);
}

uint64_t kv_cache_fingerprint(const kv_cache *c) { return c->fp; }

/* Blocks [need_from, d) carry local KV a resume at depth d attends. */
static int local_need_from(const kv_cache *c, int d) {
    long p = (long)d * c->B, w = c->layout->max_window;
    return p > w ? (int)((p - w) / c->B) : 0;
}

/* Walk the index along tokens for at most nb blocks.  Returns the deepest
 * resumable node (or NULL) and its depth in *best; *why gets the reason the
 * walk could not go to nb (KV_MISS_N when it did); *walked the depth of
 * the cached path whether resumable or not. */
static kv_node *walk_locked(kv_cache *c, const char *ns, size_t ns_len, const int32_t *tokens,
                            int nb, int *best, int *why, int *walked) {
    *best = 0;
    *walked = 0;
    *why = KV_MISS_ABSENT;
    uint64_t h = kv_hash_seed(c->fp, ns, ns_len);
    kv_node *node = kv_root_find_locked(c, ns, ns_len, h), *best_node = NULL;
    if (!node) return NULL;
    int run = 0; /* trailing nodes on the path that hold local KV */
    for (int k = 0; k < nb; k++) {
        const int32_t *tok = tokens + (size_t)k * c->B;
        h = kv_hash_block(h, tok, c->B);
        uint64_t key = kv_key(c, h);
        kv_node *child = kv_child_find_locked(c, node, key, tok);
        if (!child) {
            /* A same-key child under this parent with other tokens is a
             * collision (visible with the weakened test hash). */
            *why = kv_child_collides_locked(c, node, key) ? KV_MISS_COLLISION : KV_MISS_ABSENT;
            break;
        }
        node = child;
        *walked = k + 1;
        node->tick = ++c->tick;
        if (node->heap_idx >= 0) kv_heap_update_locked(c, node);
        run = node->blk[ENG_KV_LOCAL] ? run + 1 : 0;
        int d = k + 1;
        if (!c->has_kind[ENG_KV_LOCAL] || run >= d - local_need_from(c, d)) {
            *best = d;
            best_node = node;
        }
        if (d == nb) *why = KV_MISS_N;
    }
    if (*why == KV_MISS_N && *best < nb) *why = KV_MISS_NOLOCAL;
    else if (*why != KV_MISS_N && best_node != node) *why = KV_MISS_NOLOCAL;
    return best_node;
}

/* Take the match's references on the path ending at node (depth d). */
static void pin_path_locked(kv_cache *c, kv_node *node, int d, kv_match *m) {
    int from = local_need_from(c, d);
    for (kv_node *n = node; n && n->root_idx < 0; n = n->parent) {
        int i = n->depth - 1;
        m->gblk[i] = n->blk[ENG_KV_GLOBAL];
        m->lblk[i] = i >= from ? n->blk[ENG_KV_LOCAL] : NULL;
        for (int k = 0; k < 2; k++) {
            void *b = k ? m->lblk[i] : m->gblk[i];
            if (!b) continue;
            kv_pool_ref_locked(c, k, b);
            c->st.host.bytes_out += c->bbytes[k];
        }
    }
    m->n_blocks = d;
    m->n_tokens = d * c->B;
}

/* Copy tail t's blocks into blocks of the pool for a match; 0 when the
 * pool has none to give (the allocation may evict and release mu
 * meanwhile: t's blocks are pinned for the copy, t itself is not used
 * after). */
static int tail_copy_locked(kv_cache *c, kv_node *t, void **copy) {
    void *src[2] = {t->blk[0], t->blk[1]};
    int ok = 1;
    for (int k = 0; k < 2; k++)
        if (src[k]) kv_pool_ref_locked(c, k, src[k]);
    for (int k = 0; k < 2; k++) {
        copy[k] = NULL;
        if (!src[k] || !ok) continue;
        if (!(copy[k] = kv_pool_alloc_locked(c, k))) ok = 0;
        else memcpy(copy[k], src[k], c->bbytes[k]);
    }
    for (int k = 0; k < 2; k++) {
        if (src[k]) kv_pool_unref_locked(c, k, src[k]);
        if (!ok && copy[k]) kv_pool_unref_locked(c, k, copy[k]);
    }
    return ok;
}

/* After a walk that reached depth d at node deep (the deepest node of the
 * path, resumable): continue into deep's tail for the tokens that agree,
 * adding the copy as entry d of m.  At most avail tokens. */
static void match_tail_locked(kv_cache *c, kv_node *deep, const int32_t *tokens, int avail,
                              kv_match *m) {
    kv_node *t = deep ? deep->tail : NULL;
    int d = m->n_blocks, k = 0, lim = t ? (t->n_tok < avail ? t->n_tok : avail) : 0;
    if (!t || d >= m->cap || (c->has_kind[ENG_KV_LOCAL] && !t->blk[ENG_KV_LOCAL])) return;
    while (k < lim && t->tokens[k] == tokens[k]) k++;
    void *copy[2];
    if (!k) return;
    t->tick = ++c->tick;
    if (t->heap_idx >= 0) kv_heap_update_locked(c, t);
    if (!tail_copy_locked(c, t, copy)) return;
    m->gblk[d] = copy[ENG_KV_GLOBAL];
    m->lblk[d] = copy[ENG_KV_LOCAL];
    m->n_blocks = d + 1;
    m->n_tokens += k;
    m->n_partial = k;
    c->st.partial_hits++;
    c->st.partial_tokens += (uint64_t)k;
    c->st.host.hit_tokens += (uint64_t)k;
    for (int i = 0; i < 2; i++)
        if (copy[i]) c->st.host.bytes_out += c->bbytes[i];
}

int kv_cache_lookup(kv_cache *c, const char *ns, size_t ns_len, const int32_t *tokens, int n,
                    int redis_wait_ms, kv_match *m) {
    if (!c || !m || n < 0 || (n && !tokens) || !kv_ns_valid(ns, ns_len) ||
        (m->cap > 0 && (!m->gblk || !m->lblk)))
        return KV_EINVAL;
    m->n_blocks = m->n_tokens = m->n_from_redis = m->n_partial = 0;
    int nb = n > 0 ? (n - 1) / c->B : 0;
    if (nb > m->cap) nb = m->cap;
    if (nb > c->cfg.max_tokens / c->B) nb = c->cfg.max_tokens / c->B;
    uint64_t t0 = (uint64_t)pl_mono_us();
    int best = 0, why = KV_MISS_ABSENT, walked = 0, w2;
    pthread_mutex_lock(&c->mu);
    c->st.host.lookups++;
    kv_node *node = nb ? walk_locked(c, ns, ns_len, tokens, nb, &best, &why, &walked) : NULL;
    if (best) {
        c->st.host.hits++;
        c->st.host.hit_tokens += (uint64_t)best * c->B;
    }
    if (why != KV_MISS_N) c->st.host.misses[why]++;
    kv_hist_add(c->st.host.lat_us, (uint64_t)pl_mono_us() - t0);
    if (best < nb && redis_wait_ms >= 0 && c->use_redis) {
        pthread_mutex_unlock(&c->mu);
        int ticket,
            wait = redis_wait_ms < c->cfg.cmd_timeout_ms ? redis_wait_ms : c->cfg.cmd_timeout_ms;
        if (kv_cache_prefetch(c, ns, ns_len, tokens, n, &ticket) == 0) {
            kv_cache_prefetch_wait(c, ticket, wait);
            kv_cache_prefetch_release(c, ticket);
        }
        pthread_mutex_lock(&c->mu);
        node = walk_locked(c, ns, ns_len, tokens, nb, &best, &why, &w2);
    } else {
        w2 = walked;
    }
    if (best) pin_path_locked(c, node, best, m);
    /* Blocks below the host path's depth were in host RAM already. */
    m->n_from_redis = best > walked ? best - walked : 0;
    /* The walk stopped at the deepest cached node and it is resumable: its
     * tail may hold the next tokens (the root's, for a short prefix). */
    if (m->partial && c->cfg.partial_blocks && c->B > 1 && best == w2 && n > 0) {
        kv_node *deep =
            best ? node : kv_root_find_locked(c, ns, ns_len, kv_hash_seed(c->fp, ns, ns_len));
        match_tail_locked(c, deep, tokens + (size_t)best * c->B, n - 1 - best * c->B, m);
    }
    pthread_mutex_unlock(&c->mu);
    return 0;
}

void kv_match_release(kv_cache *c, kv_match *m) {
    if (!c || !m) return;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < m->n_blocks; i++) {
        if (m->gblk[i]) kv_pool_unref_locked(c, ENG_KV_GLOBAL, m->gblk[i]);
        if (m->lblk[i]) kv_pool_unref_locked(c, ENG_KV_LOCAL, m->lblk[i]);
        m->gblk[i] = m->lblk[i] = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    m->n_blocks = m->n_tokens = m->n_from_redis = m->n_partial = 0;
}

/* A block pointer of the sequence usable by the index: from this pool and
 * referenced (by the sequence). */
static int seq_blk_ok(kv_cache *c, int kind, void *p) {
    kv_blk *b = kv_pool_hdr(c, kind, p);
    return b && b->ref > 0;
}

/* Add delta to lneed of the window ending at node n (n and wb-1 ancestors). */
static void window_add(kv_cache *c, kv_node *n, int delta) {
    for (int i = 0; i < c->wb && n && n->root_idx < 0; i++, n = n->parent) n->lneed += delta;
}

int kv_cache_insert(kv_cache *c, const char *ns, size_t ns_len, const eng_kvseq *seq,
                    int turn_boundary) {
    if (!c || !seq || !kv_ns_valid(ns, ns_len) || seq->alloc.ctx != c || !seq->layout ||
        seq->layout->block_tokens != c->B || seq->n_tokens < 0 ||
        seq->n_tokens > seq->cap_blocks * c->B)
        return KV_EINVAL;
    int nb = seq->n_tokens / c->B, rc = 0;
    pthread_mutex_lock(&c->mu);
    c->st.inserts++;
    uint64_t h = kv_hash_seed(c->fp, ns, ns_len);
    kv_node *node = kv_root_get_locked(c, ns, ns_len, h);
    if (!node) {
        rc = KV_EFULL;
        goto out;
    }
    uint64_t g = node->g;
    for (int k = 0; k < nb; k++) {
        const int32_t *tok = seq->tokens + (size_t)k * c->B;
        h = kv_hash_block(h, tok, c->B);
        g = kv_hash_block_check(g, tok, c->B);
        void *gp = seq->blk[ENG_KV_GLOBAL] ? seq->blk[ENG_KV_GLOBAL][k] : NULL;
        void *lp = seq->blk[ENG_KV_LOCAL] ? seq->blk[ENG_KV_LOCAL][k] : NULL;
        if ((gp && !seq_blk_ok(c, ENG_KV_GLOBAL, gp)) || (lp && !seq_blk_ok(c, ENG_KV_LOCAL, lp))) {
            rc = KV_EINVAL;
            break;
        }
        kv_node *child = kv_child_find_locked(c, node, kv_key(c, h), tok);
        if (!child) {
            /* A new node needs the block of its primary kind, not already
             * held by another node. */
            if ((c->has_kind[ENG_KV_GLOBAL] && (!gp || kv_pool_hdr(c, 0, gp)->node)) ||
                (!c->has_kind[ENG_KV_GLOBAL] && (!lp || kv_pool_hdr(c, 1, lp)->node)))
                break;
            if (!(child = kv_node_new_locked(c, node, h, g, tok))) {
                rc = KV_ENOMEM;
                break;
            }
            c->st.inserted_blocks++;
            if (gp) {
                child->blk[ENG_KV_GLOBAL] = gp;
                kv_pool_ref_locked(c, ENG_KV_GLOBAL, gp);
                kv_pool_set_node_locked(c, ENG_KV_GLOBAL, gp, child);
            }
        }
        if (lp && !child->blk[ENG_KV_LOCAL] && !kv_pool_hdr(c, ENG_KV_LOCAL, lp)->node) {
            child->blk[ENG_KV_LOCAL] = lp;
            kv_pool_ref_locked(c, ENG_KV_LOCAL, lp);
            kv_pool_set_node_locked(c, ENG_KV_LOCAL, lp, child);
        }
        child->tick = ++c->tick;
        node = child;
    }
    int rest = seq->n_tokens - nb * c->B;
    if (c->cfg.partial_blocks && rc == 0 && node->depth == nb && rest > 0 && nb < seq->n_blocks) {
        /* the partial last block becomes the node's tail */
        void *gp = seq->blk[ENG_KV_GLOBAL] ? seq->blk[ENG_KV_GLOBAL][nb] : NULL;
        void *lp = seq->blk[ENG_KV_LOCAL] ? seq->blk[ENG_KV_LOCAL][nb] : NULL;
        void *bp[2] = {gp, lp};
        int ok = 1;
        for (int k = 0; k < 2; k++)
            if (c->has_kind[k] &&
                (!bp[k] || !seq_blk_ok(c, k, bp[k]) || kv_pool_hdr(c, k, bp[k])->node))
                ok = 0;
        kv_node *t = ok ? kv_tail_new_locked(c, node, seq->tokens + (size_t)nb * c->B, rest) : NULL;
        for (int k = 0; t && k < 2; k++)
            if (c->has_kind[k]) {
                t->blk[k] = bp[k];
                kv_pool_ref_locked(c, k, bp[k]);
                kv_pool_set_node_locked(c, k, bp[k], t);
            }
        if (t) {
            c->st.inserted_tails++;
            kv_heap_update_locked(c, t);
        }
    }
    if (node->root_idx < 0) {
        if (c->wb) {
            int full = node->depth == nb && rc == 0;
            /* The conversation moved on: older ends on this path are no
             * longer resume points. */
            if (turn_boundary && full)
                for (kv_node *a = node->parent; a && a->root_idx < 0; a = a->parent)
                    if (a->is_end) {
                        a->is_end = 0;
                        window_add(c, a, -1);
                    }
            if (turn_boundary && full && !node->is_end) {
                node->is_end = 1;
                window_add(c, node, +1);
            }
            for (kv_node *a = node; a && a->root_idx < 0; a = a->parent)
                if (!a->lneed && a->blk[ENG_KV_LOCAL]) kv_node_drop_local_locked(c, a);
        }
        kv_heap_update_locked(c, node);
    }
out:
    pthread_mutex_unlock(&c->mu);
    return rc;
}

int kv_cache_evict(kv_cache *c, int n_blocks) {
    int done = 0;
    pthread_mutex_lock(&c->mu);
    while (done < n_blocks && kv_evict_one_locked(c)) done++;
    pthread_mutex_unlock(&c->mu);
    return done;
}

int kv_cache_flush_to_redis(kv_cache *c, const char *ns, size_t ns_len, const int32_t *tokens,
                            int n, int *n_queued) {
    if (n_queued) *n_queued = 0;
    if (!c || n < 0 || (n && !tokens) || !kv_ns_valid(ns, ns_len)) return KV_EINVAL;
    if (!c->use_redis) return KV_EREDIS;
    int nb = n / c->B, rc = 0, queued = 0;
    if (nb > c->cfg.max_tokens / c->B) nb = c->cfg.max_tokens / c->B;
    pthread_mutex_lock(&c->mu);
    uint64_t h = kv_hash_seed(c->fp, ns, ns_len);
    kv_node *node = kv_root_find_locked(c, ns, ns_len, h);
    for (int k = 0; node && k < nb; k++) {
        const int32_t *tok = tokens + (size_t)k * c->B;
        h = kv_hash_block(h, tok, c->B);
        kv_node *child = kv_child_find_locked(c, node, kv_key(c, h), tok);
        if (!child) break;
        if (c->redis_down) {
            rc = KV_EREDIS;
            break;
        }
        /* Waiting releases mu: pin the node meanwhile so it stays. */
        while (kv_redis_enqueue_locked(c, child) != 0) {
            child->n_children++;
            kv_heap_update_locked(c, child);
            int w = kv_slot_wait_locked(c, pl_mono_ms() + c->cfg.cmd_timeout_ms);
            child->n_children--;
            kv_heap_update_locked(c, child);
            if (w) {
                rc = KV_ETIMEDOUT;
                break;
            }
        }
        if (rc) break;
        queued++;
        node = child;
    }
    pthread_mutex_unlock(&c->mu);
    if (n_queued) *n_queued = queued;
    return rc;
}

void kv_cache_stats(kv_cache *c, kv_stats *out) {
    pthread_mutex_lock(&c->mu);
    *out = c->st;
    out->redis_up = c->use_redis && !c->redis_down;
    pthread_mutex_unlock(&c->mu);
}
