/*
 * kv_cache.h -- parley's KV cache: a block pool, a prefix index over token
 * blocks, LRU eviction to a Redis tier, and the worker's handoff API.
 *
 * ** Purpose **
 * A worker sees each conversation again and again (Kafka partition
 * affinity).  The cache remembers the KV of every prefix it computed, in
 * blocks of B tokens, so a new turn only computes the tokens after the
 * longest cached prefix: first in host RAM, then in Redis.
 *
 * ** Data structures **
 * Pool.  Two slabs preallocated at kv_cache_create, one per block kind
 * (ENG_KV_GLOBAL / ENG_KV_LOCAL, bytes per block from eng_kv_layout),
 * together never more than config.budget_bytes.  Each block has a header
 * (kv_blk: reference count, owning tree node, free-list link).  A block's
 * references: one for the tree when a node holds it, one per eng_kvseq
 * table entry, one per kv_match entry.  A block with more references than
 * its tree reference is pinned.  Nothing on the lookup/insert/alloc path
 * calls malloc: nodes, blocks, namespace roots, writer slots and prefetch
 * tickets all come from arrays sized at creation (only hiredis allocates,
 * for replies, on the Redis I/O threads).
 *
 * Prefix index.  A trie with one node per full block ("radix tree over
 * blocks").  A node stores h_k (kv_hash.h), its parent, its B token ids,
 * its global block and optionally its local block.  Every namespace has a
 * root node (no blocks) whose identity is h_0 = H(fingerprint, namespace).
 * Children are found through one global hash table keyed by h_k; a child
 * matches only if its parent pointer AND its stored tokens equal the
 * query's, so a hash collision (tests weaken H to 4 bits through
 * config.hash_mask_bits) is a miss, never wrong KV.  Lookup walks block by
 * block: O(n) in the query length.
 *
 * Partial blocks.  An insert whose sequence ends inside a block (n_tokens
 * not a multiple of B) also keeps that last block as a tail: a leaf with
 * 1..B-1 tokens under the node it continues, at most one per node (a newer
 * insert's replaces it), found through the node's `tail` pointer, not the
 * hash table.  A lookup (kv_match.partial set) that ends its walk at the
 * deepest node of the path, resumable, continues into that node's tail
 * for as many tokens as agree with the query (verified token by token, at
 * most n - 1 in all), so a next turn reuses the previous turn's KV down to
 * the token, not the block.  The new sequence writes its next tokens into
 * that block, so the match never hands out the tail's blocks: it hands a
 * copy made at lookup (copy-on-write taken eagerly: the sequence always
 * diverges inside the block, at the first token it computes), from the
 * pool like any block; when the pool has nothing to evict for the copy the
 * match stops at the full blocks.  Tails are LRU leaves like any other;
 * they are never written to Redis (an evicted tail is dropped: Redis holds
 * whole blocks only), so a prefix brought back from Redis resumes at its
 * last whole block.  config.partial_blocks = 0 turns tails off.
 *
 * Sliding-window layers.  A resume at position p needs the local KV of
 * blocks i with (i+1)*B > p - W only (W = layout max_window, wb = ceil(W/B)
 * blocks).  An insert with turn_boundary marks its last node as an end and
 * adds 1 to `lneed` of the wb nodes ending there; an older end on the same
 * path is superseded (unmarked: the conversation moved on).  Local blocks of
 * nodes with lneed == 0 on an inserted path are released: no resume at a
 * turn boundary can use them.  Lookup returns the deepest node at which all
 * the local blocks a resume needs are present (resumable).  Models without
 * local layers resume anywhere.  The bytes this saves are counted in
 * kv_stats.local_bytes_dropped.  When an end leaf is evicted its lneed
 * contributions stay on its ancestors, so they go to Redis with their local
 * payload (they are the next LRU victims: their ticks are not newer).
 *
 * Eviction.  A min-heap keyed by last-use tick holds exactly the unpinned
 * leaves (no children; every held block has only the tree's reference).
 * When a kind runs out of free blocks, alloc evicts the least recently used
 * leaf: its payload is serialised into a preallocated writer slot for the
 * Redis tier (when Redis is configured), then its blocks are freed.  If no
 * slot is free, the evicting thread waits on the writer up to
 * config.cmd_timeout_ms; a block is dropped without a Redis copy only when
 * Redis is down or the writer could not drain within that time, and every
 * such drop is counted (kv_stats.redis_write_dropped) -- never silent.
 *
 * Redis tier.  Key  parley:kv:<fingerprint %016x>:<namespace>:<h_k %016x>.
 * One value per block position holding both kinds (global payload and,
 * when present, local payload): one GET answers "can I resume here" and one
 * checksum covers both.  Value format (kv_value.h): magic, version, flags,
 * fingerprint, namespace hash, h_k, g_k (an independent check chain over
 * the whole prefix, since Redis has no parent pointers), block index, B,
 * payload lengths, token ids, payloads, XXH64 checksum of everything before
 * it.  A fetched value is used only if all of these match the request.
 * Values carry a TTL (config.ttl_s).  Two I/O threads with their own connections: the writer
 * (SET EX of queued slots, pipelined) and the fetcher (prefetch tickets:
 * GET of every missing block boundary of a request, pipelined in one round
 * trip).  Failures (connect refused, timeouts bounded by cmd_timeout_ms,
 * bad values) are misses counted by reason; a failed connection is retried
 * with exponential backoff (backoff_min_ms .. backoff_max_ms) and while
 * backing off requests fail immediately, so Redis down never stalls a turn
 * beyond the command timeout.
 *
 * Secured Redis.  A connection is TCP, then TLS when redis_tls (hiredis_ssl,
 * one SSL context per cache, peer verified against redis_tls_ca and, where
 * hiredis supports it, the server name), then AUTH [user] password when a
 * password is set.  A Redis that refuses us -- TLS handshake or certificate
 * verification failed, WRONGPASS, NOAUTH, NOPERM (an ACL user without the
 * parley:kv:* keys) -- is handled like a Redis that is down: the command
 * fails, the connection is closed and backed off, requests are misses
 * (recompute) and the refusal is counted (kv_stats.redis_refused).  The
 * cause is reported through config.log, rate-limited (kv_redis.c), never
 * per block; the password never appears in it.
 *
 * ** Invariants ** (kv_cache_check verifies all of them; the property
 * tests call it after every operation, and debug builds assert the local
 * ones where references and the heap change, kv_pool.c)
 *  - A block with ref == 0 is on its kind's free list and has no node; a
 *    block a node holds has b->node == that node and ref >= 1.
 *  - heap_idx >= 0 exactly for evictable nodes: non-root, no children,
 *    every held block at ref == 1.  Pinned blocks are therefore never
 *    evicted, and a path's interior is never evicted before its leaves.
 *  - When the layout has global layers every non-root node holds a global
 *    block, so nodes <= global blocks.
 *  - blocks_used <= blocks_total per kind and pool bytes <= budget_bytes
 *    (the pool never grows).
 *  - A tail has 1..B-1 tokens, no children, is its parent's `tail` and is
 *    not in the hash table; every other non-root node has B tokens.
 *
 * ** Locking **
 * One mutex, c->mu, guards ALL in-memory state: pool headers and free lists,
 * the tree, hash table, heap, namespace roots, writer slots and queue,
 * tickets, statistics.  Critical sections are short and never include
 * network I/O: the I/O threads copy what they need under mu, release it,
 * talk to Redis, then reacquire it to publish.  Lookup and insert hash
 * their blocks during the walk under mu (tens of ns per block); the fetcher
 * hashes whole requests outside it.
 * Condition variables on mu: writer_cv (work for the writer), slot_cv (a
 * writer slot was freed), fetch_cv (work for the fetcher), done_cv (a
 * ticket finished).  Callers (scheduler thread, engine through the
 * allocator, worker handoff) may use any function from any thread.
 * Payload bytes of a block are not guarded by mu: a pinned block is only
 * written by the one sequence that allocated it before it is inserted (or
 * by the fetcher, under mu, before its node exists), and only read
 * afterwards.
 *
 * ** Failure behaviour **
 * Functions return 0 or a negative KV_E* code and write a message to
 * (err, errlen) where they take one.  Nothing in here calls exit/abort or
 * prints.  Redis problems never surface as errors of lookup/insert: they
 * are misses, counted.
 */
#ifndef KV_CACHE_H
#define KV_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "eng_kv.h"
#include "kv_hash.h"
#include "kv_stats.h"

#define KV_EINVAL (-901)    /* bad argument */
#define KV_ENOMEM (-902)    /* creation could not allocate, or pool exhausted */
#define KV_ETIMEDOUT (-909) /* a wait ran out of time */
#define KV_EFULL (-908)     /* a fixed table (tickets, namespaces) is full */
#define KV_EREDIS (-903)    /* Redis unavailable (only from explicit Redis calls) */

#define KV_NS_MAX 64 /* longest namespace in bytes */

typedef struct kv_cache_config {
    size_t budget_bytes; /* hard limit on pool payload bytes (both kinds) */
    double local_share;  /* local blocks per global block in the pool (default 0.5: with trimming a
                               * conversation keeps ~W/B local blocks, ~W/B global per W tokens; ignored
                               * without local layers) */
    int max_tokens;      /* longest sequence handled by lookup/prefetch (default 32768) */
    int max_namespaces;  /* namespace roots (default 256) */
    const char *redis_host; /* NULL or "": no Redis tier */
    int redis_port;         /* default 6379 */
    const char *redis_user; /* ACL user for AUTH (needs redis_password); NULL/"" = default user */
    const char *redis_password; /* AUTH password after every connect; NULL/"" = no AUTH */
    int redis_tls;            /* 1: TLS with certificate verification (KV_EINVAL if not built in) */
    const char *redis_tls_ca; /* CA bundle (PEM) that signs the server; NULL/"" = system store */
    const char *redis_tls_cert; /* client certificate (PEM), with redis_tls_key; NULL/"" = none */
    const char *redis_tls_key;  /* its private key (PEM) */
    const char *redis_tls_server_name; /* SNI and the name the server certificate must carry;
                                        * NULL/"" = redis_host */
    void (*log)(void *log_ctx, const char *msg); /* Redis tier trouble and recovery, one line
                                        * per change of cause (at most every 30 s while it
                                        * lasts); called from the I/O threads, never under mu;
                                        * NULL = silent (the counters still tell) */
    void *log_ctx;                               /* first argument of log */
    int cmd_timeout_ms;                          /* connect and command timeout (default 200) */
    int backoff_min_ms;                          /* first reconnect delay (default 50) */
    int backoff_max_ms;                          /* reconnect delay cap (default 2000) */
    int ttl_s;                                   /* Redis TTL of KV values (default 3600) */
    /* memory for pending Redis writes (default 8 MiB, at least 4 values) */
    size_t write_queue_bytes;
    int max_tickets;    /* concurrent prefetch tickets (default 64) */
    int partial_blocks; /* 1 (default): keep and serve partial last blocks ("Partial blocks");
                         * 0: whole blocks only */
    int hash_mask_bits; /* TEST HOOK: keep only this many low bits of every h_k (0 = all 64) */
} kv_cache_config;

/* Fill c with the defaults above (no Redis). */
void kv_cache_config_default(kv_cache_config *c);

typedef struct kv_cache kv_cache;

/* Create a cache for blocks of layout l (which must outlive the cache) and
 * model fingerprint fp (kv_fingerprint).  Preallocates the pool and every
 * table; starts the Redis threads when redis_host is set (a Redis that is
 * down at start-up is not an error: it is retried).  Returns 0, KV_EINVAL
 * (bad config/layout, message says which) or KV_ENOMEM. */
int kv_cache_create(const kv_cache_config *cfg, const eng_kv_layout *l, uint64_t fp, kv_cache **out,
                    char *err, size_t errlen);

/* Stop the threads (pending writes are given cmd_timeout_ms to drain) and
 * free everything.  Every sequence and match using the pool must be gone. */
void kv_cache_destroy(kv_cache *c);

/* The pool as an engine allocator (ctx = c).  alloc evicts LRU leaves when
 * the kind is exhausted and returns NULL when nothing is evictable. */
eng_kv_allocator kv_cache_allocator(kv_cache *c);

/* Call fn(user, blk) whenever the pool hands a block out anew (to a
 * sequence, a Redis fetch or a partial-block copy): its host bytes are
 * about to change outside the forward pass, so a backend holding a copy of
 * it (a device KV tier: eng_model_kv_invalidate) drops that copy.  fn runs
 * under the cache's lock: it must not call back into the cache.  Set it
 * before the cache is used; fn NULL removes it. */
void kv_cache_set_alloc_hook(kv_cache *c, void (*fn)(void *user, const void *blk), void *user);

/* Result of a lookup.  The caller provides the arrays (cap entries each).
 * Every non-NULL pointer returned is one reference owned by the match. */
typedef struct kv_match {
    void **gblk;      /* caller array: global blocks of the prefix (NULLs without global layers) */
    void **lblk;      /* caller array: local blocks (NULL where no resume needs them) */
    int cap;          /* entries in gblk/lblk */
    int n_blocks;     /* blocks matched */
    int n_tokens;     /* tokens matched: n_blocks * B, less with a partial last block */
    int n_from_redis; /* of which beyond the host RAM path, i.e. brought from Redis */
    int partial;      /* in: 1 = the match may end inside a cached tail, its last entries
                       * then being the match's own copy (see "Partial blocks") */
    int n_partial;    /* out: tokens of n_tokens served from a tail's copy (0..B-1) */
} kv_match;

/* Longest resumable cached prefix of tokens[0..n) in namespace ns
 * (ns_len <= KV_NS_MAX bytes, printable ASCII without ':' or space).  The
 * match is capped at m->cap blocks and at n - 1 tokens (a resume must
 * compute at least one token for logits).  With sliding-window layers a
 * prefix is resumable only where the local KV of its last W tokens is
 * cached: in practice at the turn boundaries given to kv_cache_insert.
 * redis_wait_ms < 0: host RAM only; >= 0: when host RAM misses a block and
 * Redis is configured, fetch the rest from Redis and wait at most
 * min(redis_wait_ms, cmd_timeout_ms) for it (a prefetch issued earlier
 * makes this instant).  Returns 0 (a miss is n_tokens = 0) or KV_EINVAL.
 * Hand the blocks to eng_kvseq_adopt_prefix (their references become the
 * sequence's) or give them back with kv_match_release. */
int kv_cache_lookup(kv_cache *c, const char *ns, size_t ns_len, const int32_t *tokens, int n,
                    int redis_wait_ms, kv_match *m);

/* Drop the match's references and clear it. */
void kv_match_release(kv_cache *c, kv_match *m);

/* Adopt the full blocks of seq (which allocates from kv_cache_allocator(c))
 * into the index under namespace ns: new blocks gain a tree reference, blocks
 * already cached are left as they are.  turn_boundary != 0 marks the
 * sequence end as a resume point (keeps its local window).  Returns 0,
 * KV_EINVAL (a block not from this pool, bad ns) or KV_ENOMEM (index full:
 * the prefix up to there stays inserted). */
int kv_cache_insert(kv_cache *c, const char *ns, size_t ns_len, const eng_kvseq *seq,
                    int turn_boundary);

/* Start fetching from Redis the blocks of tokens[0..n) missing in host RAM.
 * *ticket identifies the request for kv_cache_prefetch_wait/_release.
 * Returns 0, KV_EINVAL, KV_EFULL (no free ticket) or KV_EREDIS (no tier). */
int kv_cache_prefetch(kv_cache *c, const char *ns, size_t ns_len, const int32_t *tokens, int n,
                      int *ticket);
/* Wait up to timeout_ms for a ticket.  Returns 0 done, KV_ETIMEDOUT, KV_EINVAL. */
int kv_cache_prefetch_wait(kv_cache *c, int ticket, int timeout_ms);
/* Give a ticket back (a running fetch finishes in the background). */
void kv_cache_prefetch_release(kv_cache *c, int ticket);

/* Handoff: queue every host-resident block on the path of tokens[0..n) in
 * ns for a Redis write now (partition revocation).  Waits for writer slots
 * up to cmd_timeout_ms each.  *n_queued (may be NULL) gets the number of
 * blocks queued.  Returns 0, KV_EINVAL, KV_EREDIS (no tier / Redis down) or
 * KV_ETIMEDOUT. */
int kv_cache_flush_to_redis(kv_cache *c, const char *ns, size_t ns_len, const int32_t *tokens,
                            int n, int *n_queued);
/* Wait until every queued write has been attempted, up to timeout_ms.
 * Returns 0 or KV_ETIMEDOUT. */
int kv_cache_redis_drain(kv_cache *c, int timeout_ms);
/* "X.Y.Z": the hiredis (Redis client) version this cache was built with
 * (hiredis has no run-time version call; `parley --version` prints it). */
const char *kv_cache_redis_client_version(void);
/* 1 if this build has TLS for Redis (hiredis_ssl), so config.redis_tls works. */
int kv_cache_redis_tls(void);

/* Evict up to n_blocks LRU leaves now (to Redis when configured).
 * Returns how many were evicted.  (Used by memory back-pressure and tests.) */
int kv_cache_evict(kv_cache *c, int n_blocks);

/* Snapshot of every counter (consistent: taken under mu). */
void kv_cache_stats(kv_cache *c, kv_stats *out);
/* Walk the whole cache (under mu) and check the invariants above.  Returns
 * 0, or KV_EINVAL with a message naming the first broken invariant (or
 * KV_ENOMEM).  O(blocks + nodes) and allocates: for tests and debugging,
 * not for the serving path. */
int kv_cache_check(kv_cache *c, char *err, size_t errlen);

/* The model fingerprint this cache was created with. */
uint64_t kv_cache_fingerprint(const kv_cache *c);

#endif
