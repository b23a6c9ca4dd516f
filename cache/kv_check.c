/*
 * kv_check.c -- kv_cache_check: walks the whole cache under mu and checks
 * the invariants kv_cache.h writes down (its "Invariants" list), so the
 * property tests can assert them after every operation instead of
 * inferring them from the stats.
 *
 * Checked, per kind with a pool:
 *  - the free list is acyclic, holds exactly n_free blocks, each with
 *    ref == 0 and no node; every block with ref == 0 is on it;
 *  - a block held by a node has b->node == that node and ref >= 1, and a
 *    block whose header names a node is held by that node;
 *  - blocks_used == nblk - n_free, and pool bytes <= budget_bytes.
 * Per node (live = not on the node free list):
 *  - n_children equals the live nodes naming it as parent;
 *  - a tail has 1..B-1 tokens, no children and is its parent's tail;
 *  - heap_idx >= 0 exactly when it is evictable (non-root, no children,
 *    every held block at ref == 1), heap[heap_idx] == node, n_heap equals
 *    their count, and the heap is ordered by tick;
 *  - with global layers, every non-root node holds a global block.
 * Cost O(blocks + nodes); it allocates two mark arrays (test / debug use,
 * never on the serving path).
 */
#include "kv_internal.h"

#include <stdlib.h>
#include <string.h>

#include "pl_err.h"

/* The block pool of each kind: free list, ownership, counters, budget. */
static int check_blocks_locked(kv_cache *c, uint8_t *mark, char *err, size_t errlen) {
    size_t pool_bytes = 0;
    for (int k = 0; k < 2; k++) {
        if (!c->nblk[k]) continue;
        pool_bytes += (size_t)c->nblk[k] * c->bbytes[k];
        memset(mark, 0, (size_t)c->nblk[k]);
        int n = 0;
        for (int i = c->free_blk[k]; i >= 0; i = c->bh[k][i].next_free) {
            if (i >= c->nblk[k])
                return pl_errf(err, errlen, KV_EINVAL, "kind %d: free list names block %d of %d", k,
                               i, c->nblk[k]);
            if (mark[i])
                return pl_errf(err, errlen, KV_EINVAL, "kind %d: free list loops at block %d", k,
                               i);
            mark[i] = 1;
            const kv_blk *b = &c->bh[k][i];
            if (b->ref != 0 || b->node)
                return pl_errf(err, errlen, KV_EINVAL,
                               "kind %d: free block %d has ref %d and %s node", k, i, (int)b->ref,
                               b->node ? "a" : "no");
            n++;
        }
        if (n != c->n_free[k])
            return pl_errf(err, errlen, KV_EINVAL, "kind %d: %d blocks on the free list, n_free %d",
                           k, n, c->n_free[k]);
        for (int i = 0; i < c->nblk[k]; i++) {
            const kv_blk *b = &c->bh[k][i];
            if (b->ref < 0)
                return pl_errf(err, errlen, KV_EINVAL, "kind %d: block %d has ref %d", k, i,
                               (int)b->ref);
            if (b->ref == 0 && !mark[i])
                return pl_errf(err, errlen, KV_EINVAL,
                               "kind %d: block %d has ref 0 but is not free", k, i);
            if (b->node && b->node->blk[k] != c->slab[k] + (size_t)i * c->bbytes[k])
                return pl_errf(err, errlen, KV_EINVAL,
                               "kind %d: block %d names a node that does not hold it", k, i);
        }
        if (c->st.blocks_used[k] != (uint64_t)(c->nblk[k] - c->n_free[k]))
            return pl_errf(err, errlen, KV_EINVAL, "kind %d: blocks_used %llu, %d blocks not free",
                           k, (unsigned long long)c->st.blocks_used[k], c->nblk[k] - c->n_free[k]);
    }
    if (pool_bytes > c->cfg.budget_bytes)
        return pl_errf(err, errlen, KV_EINVAL, "pool of %zu bytes exceeds the budget of %zu",
                       pool_bytes, c->cfg.budget_bytes);
    return 0;
}

/* The node free list, then each live node: parent, blocks, children,
 * evictability against the LRU heap; the namespace roots; the heap order. */
static int check_nodes_locked(kv_cache *c, uint8_t *nfree, char *err, size_t errlen) {
    memset(nfree, 0, (size_t)c->max_nodes);
    int n_free_nodes = 0;
    for (kv_node *n = c->free_nodes; n; n = n->free_next) {
        ptrdiff_t i = n - c->nodes;
        if (i < 0 || i >= c->max_nodes || nfree[i])
            return pl_errf(err, errlen, KV_EINVAL, "node free list is corrupt at entry %d",
                           n_free_nodes);
        nfree[i] = 1;
        n_free_nodes++;
    }
    int *kids = calloc((size_t)c->max_nodes + (size_t)c->cfg.max_namespaces, sizeof *kids);
    if (!kids) return pl_errf(err, errlen, KV_ENOMEM, "kv_cache_check: out of memory");
    int rc = 0, evictable = 0;
    for (int i = 0; i < c->max_nodes && !rc; i++) {
        if (nfree[i]) continue;
        const kv_node *n = &c->nodes[i];
        const kv_node *p = n->parent;
        if (!p) {
            rc = pl_errf(err, errlen, KV_EINVAL, "node %d has no parent", i);
            break;
        }
        if (p->root_idx >= 0) kids[c->max_nodes + p->root_idx]++;
        else kids[p - c->nodes]++;
        for (int k = 0; k < 2 && !rc; k++) {
            if (!n->blk[k]) continue;
            kv_blk *b = kv_pool_hdr(c, k, n->blk[k]);
            if (!b || b->node != n || b->ref < 1)
                rc = pl_errf(err, errlen, KV_EINVAL, "node %d: its kind-%d block is %s", i, k,
                             !b             ? "not a pool block"
                             : b->node != n ? "owned by another node"
                                            : "free");
        }
        if (!rc && c->has_kind[ENG_KV_GLOBAL] && !n->blk[ENG_KV_GLOBAL])
            rc = pl_errf(err, errlen, KV_EINVAL, "node %d holds no global block", i);
        if (!rc && n->n_tok != c->B &&
            (n->n_tok < 1 || n->n_tok >= c->B || n->n_children || p->tail != n))
            rc = pl_errf(err, errlen, KV_EINVAL,
                         "node %d: a tail of %d tokens with %d children, %s its parent's tail", i,
                         n->n_tok, n->n_children, p->tail == n ? "" : "not");
        if (!rc && p->tail && (p->tail->parent != p || p->tail->n_tok == c->B))
            rc = pl_errf(err, errlen, KV_EINVAL, "node %d: its parent's tail is not its tail", i);
    }
    for (int i = 0; i < c->max_nodes && !rc; i++) {
        if (nfree[i]) continue;
        const kv_node *n = &c->nodes[i];
        if (n->n_children != kids[i]) {
            rc = pl_errf(err, errlen, KV_EINVAL, "node %d: n_children %d, %d live children", i,
                         n->n_children, kids[i]);
            break;
        }
        int ev = n->root_idx < 0 && !n->n_children;
        for (int k = 0; k < 2 && ev; k++)
            if (n->blk[k] && kv_pool_hdr(c, k, n->blk[k])->ref != 1) ev = 0;
        evictable += ev;
        if (ev != (n->heap_idx >= 0))
            rc = pl_errf(err, errlen, KV_EINVAL, "node %d: %s but heap_idx %d", i,
                         ev ? "evictable" : "not evictable", n->heap_idx);
        else if (ev && (n->heap_idx >= c->n_heap || c->heap[n->heap_idx] != n))
            rc = pl_errf(err, errlen, KV_EINVAL, "node %d: heap slot %d does not hold it", i,
                         n->heap_idx);
    }
    for (int r = 0; r < c->cfg.max_namespaces && !rc; r++) {
        const kv_node *root = &c->roots[r];
        if (c->root_ns_len[r] == (size_t)-1) { /* unused slot: no live node may name it */
            if (kids[c->max_nodes + r])
                rc = pl_errf(err, errlen, KV_EINVAL, "unused namespace root %d has %d children", r,
                             kids[c->max_nodes + r]);
            continue;
        }
        if (root->n_children != kids[c->max_nodes + r])
            rc = pl_errf(err, errlen, KV_EINVAL,
                         "namespace root %d: n_children %d, %d live children", r, root->n_children,
                         kids[c->max_nodes + r]);
        else if (root->heap_idx >= 0)
            rc = pl_errf(err, errlen, KV_EINVAL, "namespace root %d is in the LRU heap", r);
    }
    free(kids);
    if (rc) return rc;
    if (evictable != c->n_heap)
        return pl_errf(err, errlen, KV_EINVAL, "%d evictable leaves, heap holds %d", evictable,
                       c->n_heap);
    for (int i = 1; i < c->n_heap; i++)
        if (c->heap[(i - 1) / 2]->tick > c->heap[i]->tick)
            return pl_errf(err, errlen, KV_EINVAL, "LRU heap out of order at %d", i);
    if (c->st.nodes != (uint64_t)(c->max_nodes - n_free_nodes))
        return pl_errf(err, errlen, KV_EINVAL, "stats count %llu nodes, %d live",
                       (unsigned long long)c->st.nodes, c->max_nodes - n_free_nodes);
    return 0;
}

static int check_locked(kv_cache *c, uint8_t *mark, uint8_t *nfree, char *err, size_t errlen) {
    int rc = check_blocks_locked(c, mark, err, errlen);
    return rc ? rc : check_nodes_locked(c, nfree, err, errlen);
}

int kv_cache_check(kv_cache *c, char *err, size_t errlen) {
    if (!c) return pl_errf(err, errlen, KV_EINVAL, "kv_cache_check: no cache");
    int nb = c->nblk[0] > c->nblk[1] ? c->nblk[0] : c->nblk[1];
    uint8_t *mark = malloc((size_t)nb + 1), *nfree = malloc((size_t)c->max_nodes + 1);
    if (!mark || !nfree) {
        free(mark);
        free(nfree);
        return pl_errf(err, errlen, KV_ENOMEM, "kv_cache_check: out of memory");
    }
    pthread_mutex_lock(&c->mu);
    int rc = check_locked(c, mark, nfree, err, errlen);
    pthread_mutex_unlock(&c->mu);
    free(mark);
    free(nfree);
    return rc;
}
