/*
 * kern_cuda_tier.h -- the bookkeeping of the CUDA backend's device KV tier:
 * which host KV blocks have a copy in which device slot, in LRU order.
 * Plain C, no CUDA: unit-tested on the CPU (tests/backend/test_cuda_host.c).
 *
 * Purpose.  KV blocks live in host memory (the cache's pool); their
 * pointers are their identities.  The CUDA backend keeps copies of hot
 * blocks in a pool of equal device slots (one tier per block size) and
 * asks this table, for every block an op touches, which slot holds it:
 * a hit is used as is, a miss gets a slot (a free one, else the least
 * recently used one's) and the caller uploads the host bytes into it.
 * Eviction only forgets a copy: the host bytes are complete (write-through).
 *
 * Calls, pins and dirt.  The backend brackets each op with the blocks it
 * touches: every block got during one call is pinned until
 * kern_cuda_tier_end_call, so a call never evicts a block it already uses
 * (an op whose blocks do not all fit is split by the caller: get answers
 * KERN_CUDA_TIER_FULL when every slot is pinned).  A copy the device wrote
 * (kv_store) is dirty until the backend has written those rows back to
 * the host (kern_cuda_tier_clean_all after its flush): a dirty copy must
 * not be evicted before that, else a later miss would upload stale host
 * bytes, so get answers KERN_CUDA_TIER_DIRTY instead of evicting one (the
 * caller flushes, cleans and asks again).  Invalidation (the host bytes
 * changed under the copy) drops an entry whatever its state.
 *
 * Data layout.  Slots 0 .. capacity-1; an open-addressing hash (linear
 * probing, backward-shift deletion, 2-4x the capacity) maps a key to its
 * slot; a doubly linked list over slots keeps LRU order (head = most
 * recent).  Fresh slots are handed out in increasing order (so the backend
 * can back them with device memory lazily), released ones are reused first.
 *
 * Threading.  None: the caller serialises (the backend's mutex).
 * Ownership.  The table owns its arrays; keys are borrowed identities,
 * never dereferenced.
 * Failure behaviour.  create returns KERN_CUDA_EINVAL / KERN_CUDA_ENOMEM;
 * the other calls cannot fail (get reports FULL / DIRTY without changes).
 */
#ifndef KERN_CUDA_TIER_H
#define KERN_CUDA_TIER_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* kern_cuda_tier_get outcomes besides 0. */
#define KERN_CUDA_TIER_FULL 1  /* every slot is pinned by this call */
#define KERN_CUDA_TIER_DIRTY 2 /* the LRU victim is dirty: flush, clean_all, ask again */

typedef struct kern_cuda_tier kern_cuda_tier;

/* Counters since create. */
typedef struct kern_cuda_tier_stats {
    uint64_t lookups;       /* counted gets (attention's block reads) */
    uint64_t hits;          /* of which found resident */
    uint64_t misses;        /* gets (counted or not) that took a slot: the caller uploads */
    uint64_t evictions;     /* entries dropped for room (LRU) */
    uint64_t invalidations; /* entries dropped by kern_cuda_tier_invalidate */
    long resident;          /* entries held now */
    long capacity;          /* slots */
    long slots_touched;     /* highest slot index ever handed out + 1 */
} kern_cuda_tier_stats;

/* The result of a get. */
typedef struct kern_cuda_tier_ref {
    long slot;           /* the slot holding (or to hold) the key */
    int hit;             /* 1: it held the key already; 0: the caller fills it */
    const void *evicted; /* the key whose copy was dropped for room, or NULL */
} kern_cuda_tier_ref;

/* A table of capacity (>= 1) slots.  Returns 0, KERN_CUDA_EINVAL, KERN_CUDA_ENOMEM. */
int kern_cuda_tier_create(kern_cuda_tier **out, long capacity);
void kern_cuda_tier_destroy(kern_cuda_tier *t);

/* The slot of key for the current call (pinned until end_call; moved to
 * the LRU head).  count: add it to lookups / hits (attention reads; the
 * backend's own writes pass 0).  Returns 0 with *ref filled, or
 * KERN_CUDA_TIER_FULL / KERN_CUDA_TIER_DIRTY with nothing changed. */
int kern_cuda_tier_get(kern_cuda_tier *t, const void *key, int count, kern_cuda_tier_ref *ref);
/* The slot holding key, or -1; changes nothing. */
long kern_cuda_tier_find(const kern_cuda_tier *t, const void *key);
/* Mark the copy in slot dirty (the device wrote it; the host gets the rows later). */
void kern_cuda_tier_mark_dirty(kern_cuda_tier *t, long slot);
/* 1 when slot holds a dirty copy. */
int kern_cuda_tier_is_dirty(const kern_cuda_tier *t, long slot);
/* Every copy is clean again (the backend wrote all pending rows back). */
void kern_cuda_tier_clean_all(kern_cuda_tier *t);
/* End the current call: unpin every entry. */
void kern_cuda_tier_end_call(kern_cuda_tier *t);
/* Drop key's copy if any; returns 1 when one was dropped (*was_dirty, if
 * not NULL, tells whether it was dirty), 0 otherwise. */
int kern_cuda_tier_invalidate(kern_cuda_tier *t, const void *key, int *was_dirty);
/* Incremented whenever an entry is dropped (eviction, invalidation): a
 * caller that remembers key -> slot mappings is still right while it is
 * unchanged. */
uint64_t kern_cuda_tier_generation(const kern_cuda_tier *t);
void kern_cuda_tier_stats_get(const kern_cuda_tier *t, kern_cuda_tier_stats *out);

#ifdef __cplusplus
}
#endif

#endif
