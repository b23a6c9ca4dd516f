/*
 * kv_stats.h -- counters of the KV cache, per tier,
 * in one plain struct the worker copies out (kv_cache_stats) and publishes.
 *
 * Every counter is monotonic since creation except the gauges marked so.
 * Latency histograms have log2 buckets over microseconds: bucket i counts
 * operations that took [2^i, 2^(i+1)) us (bucket 0 also takes < 1 us, the
 * last bucket everything above).  Counters are updated under the owning
 * object's lock; a snapshot is consistent.
 */
#ifndef KV_STATS_H
#define KV_STATS_H

#include <stdint.h>

/* Why a block (or a response) was not served by a tier. */
enum {
    KV_MISS_ABSENT = 0, /* not stored in this tier */
    KV_MISS_COLLISION,  /* hash matched, stored token ids did not */
    KV_MISS_NOLOCAL,    /* global KV present, local KV a resume needs was dropped */
    KV_MISS_CORRUPT,    /* Redis value malformed: magic, version, length, checksum */
    KV_MISS_FOREIGN,    /* Redis value intact but for another model/namespace/position */
    KV_MISS_TIMEOUT,    /* Redis command timed out */
    KV_MISS_DOWN,       /* Redis unreachable or backing off after a failure */
    KV_MISS_NOMEM,      /* fetched, but no pool block could be freed for it */
    KV_MISS_N
};

#define KV_HIST_N 24 /* log2 microsecond buckets: up to ~8 s */

typedef struct kv_tier_stats {
    uint64_t lookups;           /* lookups that reached this tier */
    uint64_t hits;              /* lookups that got at least one block from this tier */
    uint64_t hit_tokens;        /* tokens served from this tier */
    uint64_t misses[KV_MISS_N]; /* blocks not served, by reason */
    uint64_t evictions;         /* blocks evicted out of this tier */
    uint64_t bytes_in;          /* payload bytes stored into this tier */
    uint64_t bytes_out;         /* payload bytes served from this tier */
    uint64_t lat_us[KV_HIST_N]; /* latency histogram of lookups/fetches */
} kv_tier_stats;

typedef struct kv_stats {
    kv_tier_stats host;            /* host RAM tier */
    kv_tier_stats redis;           /* Redis tier (fetches; bytes_in = written) */
    uint64_t blocks_total[2];      /* pool capacity per kind (gauge) */
    uint64_t blocks_used[2];       /* blocks referenced by anyone (gauge) */
    uint64_t blocks_cached[2];     /* blocks held by the index (gauge) */
    uint64_t budget_bytes;         /* configured budget (gauge) */
    uint64_t pool_bytes;           /* bytes preallocated for payloads (gauge, <= budget) */
    uint64_t nodes;                /* index nodes (gauge) */
    uint64_t local_blocks_dropped; /* local blocks released because no resume needs them */
    uint64_t local_bytes_dropped;  /* their bytes: what sliding-window trimming saved */
    uint64_t inserts;              /* kv_cache_insert calls */
    uint64_t inserted_blocks;      /* nodes created by inserts */
    uint64_t inserted_tails;       /* partial last blocks kept by inserts (kv_cache.h) */
    uint64_t partial_hits;         /* lookups that ended inside a tail (served from its copy) */
    uint64_t partial_tokens;       /* tokens so served (also counted in host.hit_tokens) */
    uint64_t alloc_fail;           /* allocator returned NULL */
    uint64_t redis_writes;         /* values written to Redis */
    uint64_t redis_write_errors;   /* writes that failed (timeout, connection) */
    /* evicted blocks lost without a Redis copy (Redis down / writer stuck) */
    uint64_t redis_write_dropped;
    uint64_t redis_write_queued; /* values waiting for the writer (gauge) */
    uint64_t redis_reconnects;   /* successful (re)connections, both threads */
    uint64_t redis_connect_fail; /* failed connection attempts */
    uint64_t redis_refused;      /* connections/commands Redis refused: TLS, AUTH, NOAUTH, NOPERM */
    int redis_up;                /* gauge: 1 if the last Redis command succeeded */
} kv_stats;

/* Add one latency sample of us microseconds to a histogram. */
static inline void kv_hist_add(uint64_t *h, uint64_t us) {
    int b = 0;
    while (us > 1 && b < KV_HIST_N - 1) {
        us >>= 1;
        b++;
    }
    h[b]++;
}

#endif
