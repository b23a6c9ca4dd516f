/*
 * kern_cuda_tier.c -- the device KV tier's slot table (kern_cuda_tier.h):
 * an open-addressing hash from block identity to slot, an LRU list over
 * slots, per-call pins (an epoch number per entry) and dirty flags.
 */
#include "kern_cuda_tier.h"

#include <stdlib.h>

#include "kern_cuda_err.h"

/* One slot. */
typedef struct tier_slot {
    const void *key; /* block held, or NULL when free */
    long prev, next; /* LRU neighbours (-1 at the ends): prev is more recent */
    uint64_t epoch;  /* call that last got it: pinned while == the table's epoch */
    int dirty;       /* written by the device since the last clean_all */
} tier_slot;

struct kern_cuda_tier {
    long capacity;           /* slots */
    tier_slot *slot;         /* [capacity] */
    long head, tail;         /* most / least recently used entry, -1 when empty */
    long *map;               /* hash: slot index or -1, [map_size] */
    size_t map_mask;         /* map_size - 1 (a power of two) */
    long *free_stack;        /* released slots, reused first */
    long n_free;             /* entries in free_stack */
    long next_fresh;         /* slots never used yet: next_fresh .. capacity-1 */
    long *dirty_list;        /* slots marked dirty since the last clean_all */
    long n_dirty;            /* entries in dirty_list */
    uint64_t epoch;          /* current call */
    uint64_t generation;     /* bumped on every drop */
    kern_cuda_tier_stats st; /* counters */
};

static size_t tier_hash(const kern_cuda_tier *t, const void *key) {
    uint64_t x = (uint64_t)(uintptr_t)key;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    return (size_t)x & t->map_mask;
}

/* Map position of key, or the empty position where it would go. */
static size_t tier_probe(const kern_cuda_tier *t, const void *key) {
    size_t i = tier_hash(t, key);
    while (t->map[i] >= 0 && t->slot[t->map[i]].key != key) i = (i + 1) & t->map_mask;
    return i;
}

/* Remove map position i, shifting later entries of its cluster back. */
static void tier_map_del(kern_cuda_tier *t, size_t i) {
    size_t j = i;
    for (;;) {
        t->map[i] = -1;
        for (;;) {
            j = (j + 1) & t->map_mask;
            if (t->map[j] < 0) return;
            size_t h = tier_hash(t, t->slot[t->map[j]].key);
            /* the entry at j may move to i unless its home lies cyclically in (i, j] */
            int stays = i <= j ? (i < h && h <= j) : (i < h || h <= j);
            if (!stays) break;
        }
        t->map[i] = t->map[j];
        i = j;
    }
}

static void lru_unlink(kern_cuda_tier *t, long s) {
    tier_slot *e = &t->slot[s];
    if (e->prev >= 0) t->slot[e->prev].next = e->next;
    else t->head = e->next;
    if (e->next >= 0) t->slot[e->next].prev = e->prev;
    else t->tail = e->prev;
    e->prev = e->next = -1;
}

static void lru_push_head(kern_cuda_tier *t, long s) {
    tier_slot *e = &t->slot[s];
    e->prev = -1;
    e->next = t->head;
    if (t->head >= 0) t->slot[t->head].prev = s;
    t->head = s;
    if (t->tail < 0) t->tail = s;
}

/* Forget the entry in slot s (map, LRU, dirty flag); the slot is not freed. */
static void tier_drop(kern_cuda_tier *t, long s) {
    tier_map_del(t, tier_probe(t, t->slot[s].key));
    lru_unlink(t, s);
    t->slot[s].key = NULL;
    t->slot[s].dirty = 0; /* a stale dirty_list entry is harmless: clean_all re-clears */
    t->st.resident--;
    t->generation++;
}

int kern_cuda_tier_create(kern_cuda_tier **out, long capacity) {
    *out = NULL;
    if (capacity < 1 || capacity > (1L << 40)) return KERN_CUDA_EINVAL;
    kern_cuda_tier *t = calloc(1, sizeof *t);
    if (!t) return KERN_CUDA_ENOMEM;
    size_t ms = 16;
    while (ms < (size_t)capacity * 2) ms <<= 1;
    t->capacity = capacity;
    t->map_mask = ms - 1;
    t->slot = calloc((size_t)capacity, sizeof *t->slot);
    t->map = malloc(ms * sizeof *t->map);
    t->free_stack = malloc((size_t)capacity * sizeof *t->free_stack);
    t->dirty_list = malloc((size_t)capacity * sizeof *t->dirty_list);
    if (!t->slot || !t->map || !t->free_stack || !t->dirty_list) {
        kern_cuda_tier_destroy(t);
        return KERN_CUDA_ENOMEM;
    }
    for (size_t i = 0; i < ms; i++) t->map[i] = -1;
    for (long s = 0; s < capacity; s++) t->slot[s].prev = t->slot[s].next = -1;
    t->head = t->tail = -1;
    t->epoch = 1;
    t->st.capacity = capacity;
    *out = t;
    return 0;
}

void kern_cuda_tier_destroy(kern_cuda_tier *t) {
    if (!t) return;
    free(t->slot);
    free(t->map);
    free(t->free_stack);
    free(t->dirty_list);
    free(t);
}

int kern_cuda_tier_get(kern_cuda_tier *t, const void *key, int count, kern_cuda_tier_ref *ref) {
    size_t pos = tier_probe(t, key);
    long s = t->map[pos];
    if (s >= 0) { /* hit */
        if (count) t->st.lookups++, t->st.hits++;
        lru_unlink(t, s);
        lru_push_head(t, s);
        t->slot[s].epoch = t->epoch;
        *ref = (kern_cuda_tier_ref){.slot = s, .hit = 1, .evicted = NULL};
        return 0;
    }
    const void *evicted = NULL;
    if (t->n_free > 0) {
        s = t->free_stack[--t->n_free];
    } else if (t->next_fresh < t->capacity) {
        s = t->next_fresh++;
        if (s + 1 > t->st.slots_touched) t->st.slots_touched = s + 1;
    } else { /* evict the least recently used entry, unless pinned or dirty */
        s = t->tail;
        if (t->slot[s].epoch == t->epoch) return KERN_CUDA_TIER_FULL; /* all pinned */
        if (t->slot[s].dirty) return KERN_CUDA_TIER_DIRTY;
        evicted = t->slot[s].key;
        tier_drop(t, s);
        t->st.evictions++;
        pos = tier_probe(t, key); /* the drop may have shifted the cluster */
    }
    if (count) t->st.lookups++;
    t->st.misses++;
    t->slot[s].key = key;
    t->slot[s].epoch = t->epoch;
    t->slot[s].dirty = 0;
    t->map[pos] = s;
    lru_push_head(t, s);
    t->st.resident++;
    *ref = (kern_cuda_tier_ref){.slot = s, .hit = 0, .evicted = evicted};
    return 0;
}

long kern_cuda_tier_find(const kern_cuda_tier *t, const void *key) {
    return t->map[tier_probe(t, key)];
}

void kern_cuda_tier_mark_dirty(kern_cuda_tier *t, long slot) {
    if (slot < 0 || slot >= t->capacity || !t->slot[slot].key || t->slot[slot].dirty) return;
    t->slot[slot].dirty = 1;
    t->dirty_list[t->n_dirty++] = slot; /* each slot at most once while dirty */
}

int kern_cuda_tier_is_dirty(const kern_cuda_tier *t, long slot) {
    return slot >= 0 && slot < t->capacity && t->slot[slot].dirty;
}

void kern_cuda_tier_clean_all(kern_cuda_tier *t) {
    for (long i = 0; i < t->n_dirty; i++) t->slot[t->dirty_list[i]].dirty = 0;
    t->n_dirty = 0;
}

void kern_cuda_tier_end_call(kern_cuda_tier *t) { t->epoch++; }

int kern_cuda_tier_invalidate(kern_cuda_tier *t, const void *key, int *was_dirty) {
    long s = t->map[tier_probe(t, key)];
    if (was_dirty) *was_dirty = 0;
    if (s < 0) return 0;
    if (was_dirty) *was_dirty = t->slot[s].dirty;
    /* a dirty slot dropped here stays in dirty_list: it could be marked
     * again after reuse and be listed twice, so compact the list now */
    if (t->slot[s].dirty) {
        long k = 0;
        for (long i = 0; i < t->n_dirty; i++)
            if (t->dirty_list[i] != s) t->dirty_list[k++] = t->dirty_list[i];
        t->n_dirty = k;
    }
    tier_drop(t, s);
    t->free_stack[t->n_free++] = s;
    t->st.invalidations++;
    return 1;
}

uint64_t kern_cuda_tier_generation(const kern_cuda_tier *t) { return t->generation; }

void kern_cuda_tier_stats_get(const kern_cuda_tier *t, kern_cuda_tier_stats *out) { *out = t->st; }
