/*
 * kv_sched_ops.h -- the KV cache as the scheduler's prefix cache.
 *
 * The engine's scheduler (eng_sched.h) cannot link the cache module (the
 * cache depends on the engine, not the reverse), so it talks to a prefix
 * cache through eng_sched_cache_ops.  kv_sched_ops_init fills that table
 * over a kv_cache:
 *   alloc        kv_cache_allocator: sequences draw blocks from the pool,
 *                which evicts unpinned LRU leaves (to Redis when configured);
 *   blocks_total the pool's blocks per kind;
 *   lookup       kv_cache_lookup in host RAM only: blocks that live in Redis
 *                were brought to host RAM by the prefetch the scheduler
 *                starts at submit, which it waits for (up to its
 *                prefetch_wait_ms) before admitting the request, so the
 *                loop thread never waits on the network;
 *   probe        a host-RAM lookup released at once (ordering hint; it
 *                counts as a lookup in kv_stats);
 *   insert       kv_cache_insert;
 *   prefetch     kv_cache_prefetch (no Redis tier: no ticket, no wait).
 *
 * Threading: every function is safe from any thread (kv_cache locks).
 * Ownership: the table points at the cache, which must outlive every
 * scheduler using it.  Failure behaviour: see each kv_cache function; cache
 * errors are misses for the scheduler, never failed requests.
 */
#ifndef KV_SCHED_OPS_H
#define KV_SCHED_OPS_H

#include "eng_sched.h"
#include "kv_cache.h"

/* Fill ops for cache c.  Returns 0 or KV_EINVAL (NULL argument). */
int kv_sched_ops_init(eng_sched_cache_ops *ops, kv_cache *c);

#endif
