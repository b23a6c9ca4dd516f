/*
 * kv_index.c -- the prefix index: namespace roots, the node hash table,
 * node creation/removal and the chain hashes.  Lookup and insert walks
 * (kv_cache.c) are built from these primitives.  Everything here runs with
 * c->mu held except kv_ns_valid, kv_key and kv_chain (pure).
 *
 * A child is identified by (parent pointer, key, token ids): the key only
 * chooses the bucket, so masked or colliding keys cost time, never
 * correctness.  A tail (a partial last block) is found through its
 * parent's `tail` pointer only.
 */
#include <string.h>

#include "kv_internal.h"

int kv_ns_valid(const char *ns, size_t ns_len) {
    if (ns_len > KV_NS_MAX || (ns_len && !ns)) return 0;
    /* Printable ASCII without ':' (the Redis key separator) or spaces. */
    for (size_t i = 0; i < ns_len; i++)
        if (ns[i] <= 0x20 || ns[i] >= 0x7f || ns[i] == ':') return 0;
    return 1;
}

uint64_t kv_key(const kv_cache *c, uint64_t h) { return h & c->key_mask; }

void kv_chain(const kv_cache *c, const char *ns, size_t ns_len, const int32_t *tokens, int nb,
              uint64_t *h, uint64_t *g) {
    uint64_t ph = kv_hash_seed(c->fp, ns, ns_len);
    uint64_t pg = kv_hash_seed_check(c->fp, ns, ns_len);
    for (int k = 0; k < nb; k++) {
        ph = kv_hash_block(ph, tokens + (size_t)k * c->B, c->B);
        h[k] = ph;
        if (g) {
            pg = kv_hash_block_check(pg, tokens + (size_t)k * c->B, c->B);
            g[k] = pg;
        }
    }
}

static kv_node **bucket(kv_cache *c, uint64_t key) {
    /* Fibonacci hashing spreads keys even when the test hook masks them. */
    return &c->buckets[(key * 0x9E3779B97F4A7C15ull >> 17) & c->bucket_mask];
}

static void hash_unlink(kv_cache *c, kv_node *n) {
    kv_node **pp = bucket(c, n->key);
    while (*pp != n) pp = &(*pp)->hnext;
    *pp = n->hnext;
    n->hnext = NULL;
}

kv_node *kv_root_find_locked(kv_cache *c, const char *ns, size_t ns_len, uint64_t h0) {
    uint64_t key = kv_key(c, h0);
    for (kv_node *n = *bucket(c, key); n; n = n->hnext)
        if (n->root_idx >= 0 && n->key == key && c->root_ns_len[n->root_idx] == ns_len &&
            (ns_len == 0 || !memcmp(c->root_ns[n->root_idx], ns, ns_len)))
            return n;
    return NULL;
}

kv_node *kv_root_get_locked(kv_cache *c, const char *ns, size_t ns_len, uint64_t h0) {
    kv_node *r = kv_root_find_locked(c, ns, ns_len, h0);
    if (r) return r;
    for (int i = 0; i < c->cfg.max_namespaces; i++) {
        if (c->root_ns_len[i] != (size_t)-1) continue;
        r = &c->roots[i];
        memset(r, 0, sizeof *r);
        r->key = kv_key(c, h0);
        r->h = h0;
        r->g = kv_hash_seed_check(c->fp, ns, ns_len);
        r->root = r;
        r->heap_idx = -1;
        r->root_idx = i;
        if (ns_len) memcpy(c->root_ns[i], ns, ns_len);
        c->root_ns_len[i] = ns_len;
        kv_node **b = bucket(c, r->key);
        r->hnext = *b;
        *b = r;
        return r;
    }
    return NULL;
}

kv_node *kv_child_find_locked(kv_cache *c, kv_node *parent, uint64_t key, const int32_t *tok) {
    for (kv_node *n = *bucket(c, key); n; n = n->hnext)
        if (n->key == key && n->parent == parent &&
            !memcmp(n->tokens, tok, sizeof(int32_t) * (size_t)c->B))
            return n;
    return NULL;
}

int kv_child_collides_locked(kv_cache *c, kv_node *parent, uint64_t key) {
    for (kv_node *n = *bucket(c, key); n; n = n->hnext)
        if (n->key == key && n->parent == parent) return 1;
    return 0;
}

kv_node *kv_node_new_locked(kv_cache *c, kv_node *parent, uint64_t h, uint64_t g,
                            const int32_t *tok) {
    kv_node *n = c->free_nodes;
    if (!n) return NULL;
    c->free_nodes = n->free_next;
    int32_t *tokens = c->tok_arena + (size_t)(n - c->nodes) * c->B;
    memset(n, 0, sizeof *n);
    n->key = kv_key(c, h);
    n->h = h;
    n->g = g;
    n->parent = parent;
    n->root = parent->root;
    n->tokens = tokens;
    memcpy(tokens, tok, sizeof(int32_t) * (size_t)c->B);
    n->n_tok = c->B;
    n->depth = parent->depth + 1;
    n->heap_idx = -1;
    n->root_idx = -1;
    n->tick = ++c->tick;
    kv_node **b = bucket(c, n->key);
    n->hnext = *b;
    *b = n;
    parent->n_children++;
    if (parent->root_idx < 0) kv_heap_update_locked(c, parent);
    c->st.nodes++;
    return n;
}

kv_node *kv_tail_new_locked(kv_cache *c, kv_node *parent, const int32_t *tok, int n_tok) {
    if (n_tok < 1 || n_tok >= c->B) return NULL;
    kv_node *n = c->free_nodes, *old = parent->tail;
    if (!n) return NULL;
    c->free_nodes = n->free_next;
    int32_t *tokens = c->tok_arena + (size_t)(n - c->nodes) * c->B;
    memset(n, 0, sizeof *n);
    n->parent = parent;
    n->root = parent->root;
    n->tokens = tokens;
    memcpy(tokens, tok, sizeof(int32_t) * (size_t)n_tok);
    for (int i = n_tok; i < c->B; i++) tokens[i] = -1;
    n->n_tok = n_tok;
    n->depth = parent->depth + 1;
    n->heap_idx = -1;
    n->root_idx = -1;
    n->tick = ++c->tick;
    parent->n_children++; /* before the old tail goes: a root must not empty */
    c->st.nodes++;
    if (old) kv_node_remove_locked(c, old);
    parent->tail = n;
    if (parent->root_idx < 0) kv_heap_update_locked(c, parent);
    return n;
}

static void node_release_blk(kv_cache *c, kv_node *n, int k) {
    kv_pool_set_node_locked(c, k, n->blk[k], NULL);
    kv_pool_unref_locked(c, k, n->blk[k]);
    n->blk[k] = NULL;
}

void kv_node_drop_local_locked(kv_cache *c, kv_node *n) {
    if (!n->blk[ENG_KV_LOCAL]) return;
    c->st.local_blocks_dropped++;
    c->st.local_bytes_dropped += c->bbytes[ENG_KV_LOCAL];
    node_release_blk(c, n, ENG_KV_LOCAL);
    kv_heap_update_locked(c, n);
}

void kv_node_remove_locked(kv_cache *c, kv_node *n) {
    if (n->heap_idx >= 0) {
        /* kv_heap_update_locked removes it once it stops being a leaf; do
         * the same directly by marking it non-evictable. */
        n->n_children++;
        kv_heap_update_locked(c, n);
        n->n_children--;
    }
    kv_node *p = n->parent;
    if (n->n_tok == c->B) hash_unlink(c, n);
    else if (p->tail == n) p->tail = NULL;
    for (int k = 0; k < 2; k++)
        if (n->blk[k]) node_release_blk(c, n, k);
    p->n_children--;
    if (p->root_idx >= 0) {
        if (!p->n_children) {
            hash_unlink(c, p);
            c->root_ns_len[p->root_idx] = (size_t)-1;
        }
    } else {
        kv_heap_update_locked(c, p);
    }
    n->free_next = c->free_nodes;
    c->free_nodes = n;
    c->st.nodes--;
}
