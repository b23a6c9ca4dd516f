/*
 * sched_alloc.c -- the scheduler's plain KV allocator (used when no prefix
 * cache is given) and the block arithmetic of admission.
 *
 * Without a cache, sequences draw blocks from the engine's malloc allocator
 * through a counting wrapper that refuses to go past a per-kind block cap.
 * The caps split the byte budget the way the cache's pool does, with the
 * same function (eng_kv_layout_split: local_share local blocks per global
 * block), so cache-on and cache-off runs of the
 * benchmark get the same KV memory.  The wrapper records the peak so tests
 * can check the budget was never exceeded.  Forked sequences share blocks
 * (eng_kvseq_fork): the wrapper counts the extra references of a shared
 * block in a small hash table and frees (and uncounts) a block only when
 * its last holder releases it.
 */
#include <stdlib.h>
#include <string.h>
#include <stdio.h>

#include "sched_int.h"

static void *budget_alloc(void *ctx, int kind) {
    sched_budget *b = ctx;
    if (kind < 0 || kind > 1) return NULL;
    pthread_mutex_lock(&b->mu);
    if (b->live[kind] >= b->cap[kind]) {
        pthread_mutex_unlock(&b->mu);
        return NULL;
    }
    b->live[kind]++;
    if (b->live[kind] > b->peak[kind]) b->peak[kind] = b->live[kind];
    pthread_mutex_unlock(&b->mu);
    void *p = b->inner.alloc(b->inner.ctx, kind);
    if (!p) {
        pthread_mutex_lock(&b->mu);
        b->live[kind]--;
        pthread_mutex_unlock(&b->mu);
    }
    return p;
}

static size_t ref_slot(const sched_budget *b, const void *blk) {
    uint64_t h = (uint64_t)(uintptr_t)blk * 0x9E3779B97F4A7C15ull;
    return (size_t)(h >> 20) & (b->ref_cap - 1);
}

/* Slot of blk in the reference table, or the empty slot where it would go. */
static size_t ref_find(const sched_budget *b, const void *blk) {
    size_t i = ref_slot(b, blk);
    while (b->ref_key[i] && b->ref_key[i] != blk) i = (i + 1) & (b->ref_cap - 1);
    return i;
}

/* Grow the table to hold one more entry at half load.  0 or -1. */
static int ref_grow(sched_budget *b) {
    if (b->ref_cap && (b->ref_used + 1) * 2 <= b->ref_cap) return 0;
    size_t cap = b->ref_cap ? b->ref_cap * 2 : 64;
    void **key = calloc(cap, sizeof *key);
    int *extra = calloc(cap, sizeof *extra);
    if (!key || !extra) {
        free(key);
        free(extra);
        return -1;
    }
    sched_budget old = *b;
    b->ref_key = key;
    b->ref_extra = extra;
    b->ref_cap = cap;
    for (size_t i = 0; i < old.ref_cap; i++)
        if (old.ref_key[i]) {
            size_t j = ref_find(b, old.ref_key[i]);
            b->ref_key[j] = old.ref_key[i];
            b->ref_extra[j] = old.ref_extra[i];
        }
    free(old.ref_key);
    free(old.ref_extra);
    return 0;
}

/* Remove slot i, shifting later entries of its run back (linear probing). */
static void ref_remove(sched_budget *b, size_t i) {
    size_t mask = b->ref_cap - 1, j = i;
    b->ref_key[i] = NULL;
    b->ref_used--;
    for (;;) {
        j = (j + 1) & mask;
        if (!b->ref_key[j]) return;
        size_t home = ref_slot(b, b->ref_key[j]);
        /* move j into the hole i unless its home lies cyclically in (i, j] */
        if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
            b->ref_key[i] = b->ref_key[j];
            b->ref_extra[i] = b->ref_extra[j];
            b->ref_key[j] = NULL;
            i = j;
        }
    }
}

/* Another holder of blk: 0, or -1 without memory for the table (the fork
 * then copies the block). */
static int budget_retain(void *ctx, int kind, void *blk) {
    sched_budget *b = ctx;
    (void)kind;
    if (!blk) return -1;
    pthread_mutex_lock(&b->mu);
    int rc = ref_grow(b);
    if (rc == 0) {
        size_t i = ref_find(b, blk);
        if (!b->ref_key[i]) {
            b->ref_key[i] = blk;
            b->ref_extra[i] = 0;
            b->ref_used++;
        }
        b->ref_extra[i]++;
    }
    pthread_mutex_unlock(&b->mu);
    return rc;
}

static void budget_release(void *ctx, int kind, void *blk) {
    sched_budget *b = ctx;
    if (!blk) return;
    pthread_mutex_lock(&b->mu);
    if (b->ref_cap) {
        size_t i = ref_find(b, blk);
        if (b->ref_key[i]) { /* shared: drop one extra reference */
            if (--b->ref_extra[i] == 0) ref_remove(b, i);
            pthread_mutex_unlock(&b->mu);
            return;
        }
    }
    pthread_mutex_unlock(&b->mu);
    b->inner.release(b->inner.ctx, kind, blk);
    pthread_mutex_lock(&b->mu);
    b->live[kind]--;
    pthread_mutex_unlock(&b->mu);
}

int sched_budget_create(const eng_kv_layout *l, size_t budget, double local_share,
                        sched_budget **out, char *err, size_t errlen) {
    *out = NULL;
    sched_budget *b = calloc(1, sizeof *b);
    if (!b) {
        return pl_errf(err, errlen, ENG_SCHED_ENOMEM, "sched: out of memory");
    }
    size_t gb = l->n_layers[0] ? l->block_bytes[0] : 0;
    size_t lb = l->n_layers[1] ? l->block_bytes[1] : 0;
    eng_kv_layout_split(l, budget, local_share, b->cap);
    if ((gb && b->cap[0] < 1) || (lb && b->cap[1] < 1)) {
        pl_errf(err, errlen, ENG_SCHED_EINVAL,
                "sched: KV budget of %zu bytes holds no block (block bytes %zu/%zu)", budget, gb,
                lb);
        free(b);
        return ENG_SCHED_EINVAL;
    }
    if (eng_kv_allocator_malloc(&b->inner, l) != 0) {
        pl_errf(err, errlen, ENG_SCHED_ENOMEM, "sched: cannot create the block allocator");
        free(b);
        return ENG_SCHED_ENOMEM;
    }
    pthread_mutex_init(&b->mu, NULL);
    *out = b;
    return 0;
}

void sched_budget_free(sched_budget *b) {
    if (!b) return;
    eng_kv_allocator_malloc_free(&b->inner);
    free(b->ref_key);
    free(b->ref_extra);
    pthread_mutex_destroy(&b->mu);
    free(b);
}

eng_kv_allocator sched_budget_allocator(sched_budget *b) {
    eng_kv_allocator a = {b, budget_alloc, budget_release, budget_retain};
    return a;
}

void sched_budget_peak(sched_budget *b, long live[2], long peak[2]) {
    pthread_mutex_lock(&b->mu);
    live[0] = b->live[0];
    live[1] = b->live[1];
    peak[0] = b->peak[0];
    peak[1] = b->peak[1];
    pthread_mutex_unlock(&b->mu);
}

void sched_blocks_for(const eng_sched *s, int n_before, int n_after, long need[2]) {
    const eng_kv_layout *l = s->layout;
    long B = l->block_tokens;
    long nb_after = (n_after + B - 1) / B;
    need[0] = l->n_layers[0] ? nb_after : 0;
    need[1] = 0;
    if (l->n_layers[1]) {
        /* live local blocks before the step start at the first block a query
         * at n_before can attend; all blocks up to nb_after exist until the
         * step commits. */
        long first = n_before - l->max_window;
        first = first > 0 ? first / B : 0;
        need[1] = nb_after - first;
        if (need[1] < 0) need[1] = 0;
    }
}
