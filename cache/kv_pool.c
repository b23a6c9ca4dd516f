/*
 * kv_pool.c -- the block pool (slabs, free lists, reference counts), the
 * LRU heap of evictable leaves, eviction, and the pool's eng_kv_allocator.
 *
 * Block memory is carved from one slab per kind at creation; a block's
 * header is found from its payload pointer by arithmetic, so the engine can
 * hand back plain pointers.  The heap holds exactly the unpinned leaves,
 * ordered by last-use tick; kv_heap_update_locked re-evaluates one node
 * after anything that can change its evictability (reference count, child
 * count, tick).  All functions here run with c->mu held unless they are the
 * allocator callbacks, which take it.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kv_internal.h"

int kv_pool_init(kv_cache *c, char *err, size_t errlen) {
    for (int k = 0; k < 2; k++) {
        c->free_blk[k] = -1;
        c->n_free[k] = 0;
        if (!c->nblk[k]) continue;
        /* 64-byte aligned slab: payloads start cache-line aligned when
         * block bytes are a multiple of 64 (they are for real models). */
        size_t bytes = (size_t)c->nblk[k] * c->bbytes[k];
        bytes = (bytes + 63) & ~(size_t)63;
        c->slab[k] = aligned_alloc(64, bytes);
        c->bh[k] = calloc((size_t)c->nblk[k], sizeof(kv_blk));
        if (!c->slab[k] || !c->bh[k]) {
            return pl_errf(err, errlen, KV_ENOMEM, "kv_cache: cannot allocate %zu bytes of pool",
                           bytes);
        }
        /* Touch the slab now so the first turns do not page-fault. */
        memset(c->slab[k], 0, bytes);
        for (int i = c->nblk[k] - 1; i >= 0; i--) {
            c->bh[k][i].next_free = c->free_blk[k];
            c->free_blk[k] = i;
        }
        c->n_free[k] = c->nblk[k];
    }
    return 0;
}

void kv_pool_free(kv_cache *c) {
    for (int k = 0; k < 2; k++) {
        free(c->slab[k]);
        free(c->bh[k]);
        c->slab[k] = NULL;
        c->bh[k] = NULL;
    }
}

kv_blk *kv_pool_hdr(kv_cache *c, int kind, const void *p) {
    if (kind < 0 || kind > 1 || !p || !c->slab[kind]) return NULL;
    const uint8_t *b = p;
    if (b < c->slab[kind]) return NULL;
    size_t off = (size_t)(b - c->slab[kind]);
    if (off % c->bbytes[kind] || off / c->bbytes[kind] >= (size_t)c->nblk[kind]) return NULL;
    return &c->bh[kind][off / c->bbytes[kind]];
}

/* ---- LRU heap (min tick at heap[0]) ---- */

static void heap_swap(kv_cache *c, int i, int j) {
    kv_node *t = c->heap[i];
    c->heap[i] = c->heap[j];
    c->heap[j] = t;
    c->heap[i]->heap_idx = i;
    c->heap[j]->heap_idx = j;
}

static void heap_fix(kv_cache *c, int i) {
    while (i > 0 && c->heap[(i - 1) / 2]->tick > c->heap[i]->tick) {
        heap_swap(c, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < c->n_heap && c->heap[l]->tick < c->heap[m]->tick) m = l;
        if (r < c->n_heap && c->heap[r]->tick < c->heap[m]->tick) m = r;
        if (m == i) return;
        heap_swap(c, i, m);
        i = m;
    }
}

static void heap_remove(kv_cache *c, kv_node *n) {
    int i = n->heap_idx;
    assert(i >= 0 && i < c->n_heap && c->heap[i] == n);
    n->heap_idx = -1;
    c->n_heap--;
    if (i == c->n_heap) return;
    c->heap[i] = c->heap[c->n_heap];
    c->heap[i]->heap_idx = i;
    heap_fix(c, i);
}

static int node_evictable(kv_cache *c, const kv_node *n) {
    if (n->root_idx >= 0 || n->n_children) return 0;
    for (int k = 0; k < 2; k++)
        if (n->blk[k] && kv_pool_hdr(c, k, n->blk[k])->ref != 1) return 0;
    return 1;
}

void kv_heap_update_locked(kv_cache *c, kv_node *n) {
    int ev = node_evictable(c, n);
    if (ev && n->heap_idx < 0) {
        /* only evictable leaves are in the heap, and it never outgrows the nodes */
        assert(n->root_idx < 0 && c->n_heap < c->max_nodes);
        n->heap_idx = c->n_heap;
        c->heap[c->n_heap++] = n;
        heap_fix(c, n->heap_idx);
    } else if (ev) {
        heap_fix(c, n->heap_idx);
    } else if (n->heap_idx >= 0) {
        heap_remove(c, n);
    }
}

/* ---- references ---- */

void kv_pool_set_node_locked(kv_cache *c, int kind, void *p, kv_node *n) {
    kv_blk *b = kv_pool_hdr(c, kind, p);
    /* a block a node holds is referenced, and names that node only */
    assert(b && b->ref >= 1 && (!n || !b->node || b->node == n));
    if (!b->node && n) {
        c->st.blocks_cached[kind]++;
        c->st.host.bytes_in += c->bbytes[kind];
    } else if (b->node && !n) {
        c->st.blocks_cached[kind]--;
    }
    b->node = n;
}

void kv_pool_ref_locked(kv_cache *c, int kind, void *p) {
    kv_blk *b = kv_pool_hdr(c, kind, p);
    assert(b && b->ref >= 1); /* only an allocated block gains references */
    b->ref++;
    if (b->node && b->ref == 2) kv_heap_update_locked(c, b->node);
}

void kv_pool_unref_locked(kv_cache *c, int kind, void *p) {
    kv_blk *b = kv_pool_hdr(c, kind, p);
    assert(b && b->ref >= 1); /* ref == 0 means free: no reference to drop */
    if (--b->ref == 0) {
        int idx = (int)(b - c->bh[kind]);
        b->node = NULL;
        b->next_free = c->free_blk[kind];
        c->free_blk[kind] = idx;
        c->n_free[kind]++;
        c->st.blocks_used[kind]--;
    } else if (b->ref == 1 && b->node) {
        kv_heap_update_locked(c, b->node);
    }
}

/* ---- eviction ---- */

int kv_evict_one_locked(kv_cache *c) {
    int64_t deadline = pl_mono_ms() + c->cfg.cmd_timeout_ms;
    for (;;) {
        if (!c->n_heap) return 0;
        kv_node *n = c->heap[0];
        /* the LRU victim is an unpinned leaf: only the tree references its blocks */
        assert(n->root_idx < 0 && n->n_children == 0 && n->heap_idx == 0);
        if (kv_redis_wants_locked(c, n)) {
            if (c->redis_down) {
                c->st.redis_write_dropped++;
            } else if (kv_redis_enqueue_locked(c, n) != 0) {
                /* Every slot is waiting for the writer: wait for one (mu is
                 * released meanwhile, so the victim is chosen again). */
                if (kv_slot_wait_locked(c, deadline) == 0) continue;
                c->st.redis_write_dropped++;
            }
        }
        c->st.host.evictions++;
        kv_node_remove_locked(c, n);
        return 1;
    }
}

void *kv_pool_alloc_locked(kv_cache *c, int kind) {
    if (kind < 0 || kind > 1 || !c->nblk[kind]) return NULL;
    while (c->free_blk[kind] < 0) {
        if (!kv_evict_one_locked(c)) {
            c->st.alloc_fail++;
            return NULL;
        }
    }
    int idx = c->free_blk[kind];
    kv_blk *b = &c->bh[kind][idx];
    assert(b->ref == 0 && !b->node && c->n_free[kind] > 0); /* free-list entries are free */
    c->free_blk[kind] = b->next_free;
    c->n_free[kind]--;
    b->next_free = -1;
    b->ref = 1;
    b->node = NULL;
    c->st.blocks_used[kind]++;
    void *blk = c->slab[kind] + (size_t)idx * c->bbytes[kind];
    if (c->alloc_hook) c->alloc_hook(c->alloc_hook_user, blk);
    return blk;
}

void kv_cache_set_alloc_hook(kv_cache *c, void (*fn)(void *user, const void *blk), void *user) {
    pthread_mutex_lock(&c->mu);
    c->alloc_hook = fn;
    c->alloc_hook_user = user;
    pthread_mutex_unlock(&c->mu);
}

/* ---- the eng_kv_allocator view ---- */

static void *pool_alloc_cb(void *ctx, int kind) {
    kv_cache *c = ctx;
    pthread_mutex_lock(&c->mu);
    void *p = kv_pool_alloc_locked(c, kind);
    pthread_mutex_unlock(&c->mu);
    return p;
}

static void pool_release_cb(void *ctx, int kind, void *blk) {
    kv_cache *c = ctx;
    pthread_mutex_lock(&c->mu);
    kv_blk *b = kv_pool_hdr(c, kind, blk);
    /* A foreign or already-free pointer is a caller bug; ignoring it is
     * safer than corrupting the free list. */
    if (b && b->ref > 0) kv_pool_unref_locked(c, kind, blk);
    pthread_mutex_unlock(&c->mu);
}

/* A second holder of an allocated block (a forked sequence). */
static int pool_retain_cb(void *ctx, int kind, void *blk) {
    kv_cache *c = ctx;
    pthread_mutex_lock(&c->mu);
    kv_blk *b = kv_pool_hdr(c, kind, blk);
    int ok = b && b->ref > 0;
    if (ok) kv_pool_ref_locked(c, kind, blk);
    pthread_mutex_unlock(&c->mu);
    return ok ? 0 : -1;
}

eng_kv_allocator kv_cache_allocator(kv_cache *c) {
    eng_kv_allocator a = {c, pool_alloc_cb, pool_release_cb, pool_retain_cb};
    return a;
}
