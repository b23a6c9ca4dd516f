/*
 * kv_internal.h -- the KV cache's private structures, shared by its .c
 * files (kv_pool.c, kv_index.c, kv_redis.c, kv_conn.c, kv_fetch.c, kv_cache.c).  Not installed;
 * nothing outside cache/ includes it.  Locking is described in kv_cache.h:
 * every field of kv_cache below the "guarded by mu" line is read and
 * written only with mu held, except where a field says otherwise.
 */
#ifndef KV_INTERNAL_H
#define KV_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include <hiredis/hiredis.h>

#include "kv_cache.h"
#include "kv_value.h"
#include "pl_err.h"
#include "pl_time.h"

typedef struct kv_node kv_node;

/* Header of one pool block (payload lives in the kind's slab). */
typedef struct kv_blk {
    int32_t ref;       /* references: tree + sequences + matches; 0 = free */
    int32_t next_free; /* free-list link (block index) or -1 */
    kv_node *node;     /* index node holding this block, or NULL */
} kv_blk;

/* One index node: a full block of a cached prefix, a namespace root, or a
 * tail -- the partial last block (1..B-1 tokens) of an inserted sequence,
 * a leaf under the node it continues (its parent's `tail`, at most one per
 * parent), not in the hash table and never written to Redis. */
struct kv_node {
    uint64_t key;       /* h_k masked by hash_mask_bits (root: h_0 masked) */
    uint64_t h;         /* h_k unmasked (chains into the child's h) */
    uint64_t g;         /* g_k, the check chain */
    kv_node *parent;    /* NULL for roots */
    kv_node *root;      /* the namespace root of this node's path (roots: itself) */
    kv_node *hnext;     /* next node in the same hash bucket */
    kv_node *free_next; /* free-list link while unused */
    int32_t *tokens;    /* B token ids (arena; a tail's n_tok, then -1s); roots: NULL */
    int n_tok;          /* tokens of its block: B, or 1..B-1 for a tail; roots 0 */
    kv_node *tail;      /* the partial block cached after this node, or NULL */
    void *blk[2];       /* payload per kind held by the tree (NULL if none) */
    int depth;          /* k: blocks from the root (root 0) */
    int n_children;     /* live children */
    int lneed;          /* end marks whose local window covers this node */
    int is_end;         /* 1: an insert with turn_boundary ended here */
    uint64_t tick;      /* last use (lookup, insert, fetch) */
    int heap_idx;       /* index in the LRU heap, -1 when not an evictable leaf */
    int root_idx;       /* roots: index in ns arrays; other nodes: -1 */
    int64_t redis_ms;   /* when last queued to Redis by us (0 never) */
};

/* A preallocated buffer holding one encoded value waiting for the writer. */
typedef struct kv_slot {
    uint8_t *buf;   /* encoded value (slot_bytes capacity) */
    size_t len;     /* bytes used */
    char key[160];  /* Redis key */
    size_t key_len; /* bytes of key */
    int next;       /* queue / free-list link, -1 at the end */
} kv_slot;

enum { KV_TK_FREE = 0, KV_TK_QUEUED, KV_TK_RUNNING, KV_TK_DONE };

/* A prefetch request. */
typedef struct kv_ticket {
    int state;          /* KV_TK_* */
    int abandoned;      /* released while queued/running: the fetcher frees it */
    int next;           /* fetch queue link */
    char ns[KV_NS_MAX]; /* namespace */
    size_t ns_len;      /* its bytes */
    int n;              /* tokens */
    int32_t *tokens;    /* copy of the tokens (max_tokens capacity) */
    int n_inserted;     /* result: blocks brought into host RAM */
} kv_ticket;

/* Why the Redis tier is unavailable (kv_conn.c reports these). */
enum {
    KV_CAUSE_NONE = 0, /* available */
    KV_CAUSE_CONNECT,  /* TCP connect or I/O failed, or timed out */
    KV_CAUSE_TLS,      /* TLS handshake failed (certificate verification among others) */
    KV_CAUSE_AUTH,     /* AUTH refused: WRONGPASS / invalid password */
    KV_CAUSE_NOAUTH,   /* the server wants AUTH and we sent none */
    KV_CAUSE_NOPERM,   /* ACL: the user may not run the command or touch the key */
    KV_CAUSE_N
};

/* One Redis connection with its reconnect state (owned by one thread). */
typedef struct kv_conn {
    redisContext *ctx;   /* NULL when disconnected */
    int64_t next_try_ms; /* no connection attempt before this time */
    int backoff_ms;      /* next delay after a failure */
} kv_conn;

struct kv_cache {
    /* immutable after create */
    kv_cache_config cfg;         /* copy of the configuration; its strings are owned copies
                                   * (kv_conn_setup) or NULL, redis_host points below */
    char redis_host[256];        /* Redis host ("" = no tier) */
    const eng_kv_layout *layout; /* block layout */
    uint64_t fp;                 /* model fingerprint */
    int B;                       /* block tokens */
    int wb;                      /* local window in blocks, ceil(max_window/B); 0 = no local kind */
    int has_kind[2];             /* layout has layers of this kind */
    size_t bbytes[2];            /* block bytes per kind */
    int nblk[2];                 /* pool blocks per kind */
    uint8_t *slab[2];            /* payload slabs */
    kv_blk *bh[2];               /* block headers */
    int max_nodes;               /* node capacity (excluding roots) */
    kv_node *nodes;              /* node array */
    int32_t *tok_arena;          /* max_nodes * B token ids */
    kv_node *roots;              /* max_namespaces root nodes */
    char (*root_ns)[KV_NS_MAX];  /* namespace of each root */
    size_t *root_ns_len;         /* its bytes */
    kv_node **buckets;           /* hash table heads */
    uint64_t bucket_mask;        /* buckets - 1 */
    uint64_t key_mask;           /* mask applied to h_k */
    kv_node **heap;              /* LRU min-heap of evictable leaves */
    size_t slot_bytes;           /* capacity of one writer slot */
    int n_slots;                 /* writer slots */
    kv_slot *slots;              /* writer slots */
    kv_ticket *tickets;          /* prefetch tickets */
    int use_redis;               /* Redis tier configured */
    void *ssl;                   /* redisSSLContext shared by both connections; NULL = plain TCP */
    int writer_started;          /* writer thread running (join at stop) */
    int fetcher_started;         /* fetcher thread running */
    uint64_t *fetch_h;           /* fetcher scratch: h then g of each block (fetcher thread only) */
    void **fetch_replies;        /* fetcher scratch: redisReply per block (fetcher thread only) */
    kv_value_view *fetch_views;  /* fetcher scratch: decoded payload views per block */
    int *fetch_ok;               /* fetcher scratch: 1 where the block's value is valid */
    void (*alloc_hook)(void *user, const void *blk); /* kv_cache_set_alloc_hook, or NULL */
    void *alloc_hook_user;                           /* its argument */

    pthread_mutex_t mu;        /* guards everything below */
    pthread_cond_t writer_cv;  /* writer queue non-empty or stopping */
    pthread_cond_t slot_cv;    /* a writer slot was freed / writer idle */
    pthread_cond_t fetch_cv;   /* fetch queue non-empty or stopping */
    pthread_cond_t done_cv;    /* a ticket finished */
    int free_blk[2];           /* free-list heads per kind */
    int n_free[2];             /* free blocks per kind */
    kv_node *free_nodes;       /* unused nodes */
    int n_heap;                /* entries in heap */
    uint64_t tick;             /* use clock */
    int slot_free;             /* free writer slots (stack) */
    int wq_head, wq_tail;      /* writer FIFO */
    int writer_busy;           /* writer holds popped slots */
    int fq_head, fq_tail;      /* fetch FIFO of tickets */
    int stopping;              /* destroy in progress */
    int redis_down;            /* last Redis attempt failed (eviction then drops) */
    int rep_cause;             /* KV_CAUSE_* last reported (NONE: nothing outstanding) */
    int64_t rep_ms;            /* when it was reported */
    uint64_t rep_held;         /* reports of the same cause held back since */
    kv_stats st;               /* counters */
    pthread_t writer, fetcher; /* I/O threads (when use_redis) */
};

/* kv_pool.c */
int kv_pool_init(kv_cache *c, char *err, size_t errlen);
void kv_pool_free(kv_cache *c);
kv_blk *kv_pool_hdr(kv_cache *c, int kind, const void *p); /* NULL if not a pool block */
void *kv_pool_alloc_locked(kv_cache *c, int kind);
void kv_pool_ref_locked(kv_cache *c, int kind, void *p);
/* Record that block p is (n != NULL) or stops being (n == NULL) held by
 * index node n; keeps the blocks_cached gauge and host bytes_in. */
void kv_pool_set_node_locked(kv_cache *c, int kind, void *p, kv_node *n);
void kv_pool_unref_locked(kv_cache *c, int kind, void *p);
void kv_heap_update_locked(kv_cache *c, kv_node *n); /* re-evaluate n's evictability */
int kv_evict_one_locked(kv_cache *c);                /* 1 if a leaf was evicted */

/* kv_index.c */
int kv_ns_valid(const char *ns, size_t ns_len);
kv_node *kv_root_find_locked(kv_cache *c, const char *ns, size_t ns_len, uint64_t h0);
kv_node *kv_root_get_locked(kv_cache *c, const char *ns, size_t ns_len, uint64_t h0);
kv_node *kv_child_find_locked(kv_cache *c, kv_node *parent, uint64_t key, const int32_t *tok);
/* 1 if parent has a child under key (whatever its tokens). */
int kv_child_collides_locked(kv_cache *c, kv_node *parent, uint64_t key);
kv_node *kv_node_new_locked(kv_cache *c, kv_node *parent, uint64_t h, uint64_t g,
                            const int32_t *tok);
void kv_node_remove_locked(kv_cache *c, kv_node *n);
/* A tail of n_tok (1..B-1) tokens under parent, replacing its old tail
 * (removed).  NULL when no node is free. */
kv_node *kv_tail_new_locked(kv_cache *c, kv_node *parent, const int32_t *tok, int n_tok);
void kv_node_drop_local_locked(kv_cache *c, kv_node *n);
uint64_t kv_key(const kv_cache *c, uint64_t h);
/* Chain hashes of the first nb blocks of tokens: h[k], g[k] for block k (0-based). */
void kv_chain(const kv_cache *c, const char *ns, size_t ns_len, const int32_t *tokens, int nb,
              uint64_t *h, uint64_t *g);

/* kv_fetch.c */
void *kv_fetcher_main(void *arg);
/* kv_conn.c */
/* Copy the Redis strings of cfg into c->cfg and create the TLS context.
 * Returns 0, KV_EINVAL (message names the problem) or KV_ENOMEM. */
int kv_conn_setup(kv_cache *c, const kv_cache_config *cfg, char *err, size_t errlen);
/* Free what kv_conn_setup made (safe after a partial setup). */
void kv_conn_teardown(kv_cache *c);
/* Connected (TLS, authenticated) context of k, connecting if the backoff
 * allows; NULL: down (a failure is counted, backed off and reported). */
redisContext *kv_conn_get(kv_cache *c, kv_conn *k);
/* Close k after a failed command, start backoff; returns KV_MISS_TIMEOUT or KV_MISS_DOWN. */
int kv_conn_fail(kv_cache *c, kv_conn *k);
/* KV_CAUSE_NOAUTH / _NOPERM / _AUTH when reply r is Redis refusing us, else KV_CAUSE_NONE. */
int kv_reply_refusal(const redisReply *r);
/* Redis refused a command with reply r (cause from kv_reply_refusal):
 * report, close, back off.  Returns KV_MISS_DOWN. */
int kv_conn_refused(kv_cache *c, kv_conn *k, int cause, const redisReply *r);
/* A command on k succeeded: clear redis_down; data != 0 (a GET/SET, not a
 * probe) also resets the backoff and reports a recovery. */
void kv_conn_ok(kv_cache *c, kv_conn *k, int data);
/* Count a refusal (cause != CONNECT) and report cause, rate-limited. */
void kv_conn_report(kv_cache *c, int cause, const char *detail);
/* kv_redis.c */
int kv_redis_start(kv_cache *c, const kv_cache_config *cfg, char *err, size_t errlen);
void kv_redis_stop(kv_cache *c);
/* Encode node n into a free writer slot and queue it.  Returns 0 or
 * KV_EFULL (no free slot: see kv_slot_wait_locked). */
int kv_redis_enqueue_locked(kv_cache *c, kv_node *n);
/* Wait (releasing mu) until a writer slot is free or deadline_ms passes.
 * Returns 0 or KV_ETIMEDOUT. */
int kv_slot_wait_locked(kv_cache *c, int64_t deadline_ms);
/* Whether evicting n should write it to Redis first. */
int kv_redis_wants_locked(kv_cache *c, const kv_node *n);
void kv_redis_key(const kv_cache *c, const char *ns, size_t ns_len, uint64_t key, char *out,
                  size_t cap, size_t *len);

#endif
