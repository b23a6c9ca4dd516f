/*
 * wk_batch.c -- the state logic of exactly-once, without a Kafka call:
 * partition ownership and generations, consumed offsets, the batch of
 * outputs of the next transaction (which of them are ready, which a
 * commit or a reconcile removes, which a rebalance makes stale);
 * wk_txn_state.c holds the stages of a producer rebuild.  wk_loop.c and
 * wk_txn.c make the Kafka
 * calls and drive these functions; tests/worker/test_wk_batch.c drives
 * them without a broker.  See wk_loop.c for why committing only outputs
 * below their partition's commit position is exactly-once.
 */
#include <stdlib.h>

#include "wk_internal.h"

int wk_batch_parts_grow(wk_batch *b, int32_t p) {
    if (p < 0 || p >= WK_OFF_MAX_PARTITIONS) return -1;
    if (p < b->n_parts) return 0;
    int32_t n = p + 1;
    uint32_t *g = realloc(b->gen, (size_t)n * sizeof *g);
    if (!g) return -1;
    b->gen = g;
    bool *o = realloc(b->owned, (size_t)n * sizeof *o);
    if (!o) return -1;
    b->owned = o;
    for (int32_t i = b->n_parts; i < n; i++) g[i] = 0, o[i] = false;
    b->n_parts = n;
    return 0;
}

int wk_batch_assign(wk_batch *b, int32_t p) {
    if (wk_batch_parts_grow(b, p) != 0) return -1;
    b->owned[p] = true;
    b->gen[p]++;
    wk_offsets_reset(b->offs, p);
    return 0;
}

void wk_batch_revoke(wk_batch *b, int32_t p) {
    if (p < 0 || p >= b->n_parts) return;
    b->owned[p] = false;
    b->gen[p]++;
    wk_offsets_reset(b->offs, p);
}

bool wk_batch_current(const wk_batch *b, int32_t p, uint32_t gen) {
    return p >= 0 && p < b->n_parts && b->owned[p] && b->gen[p] == gen;
}

int wk_batch_consume(wk_batch *b, int32_t p, int64_t offset, uint32_t *gen) {
    if (p < 0 || p >= b->n_parts || !b->owned[p]) return WK_CONSUME_NOT_OURS;
    if (wk_offsets_add(b->offs, p, offset) != 0) return WK_CONSUME_SKIP;
    *gen = b->gen[p];
    return 0;
}

int64_t wk_batch_commit_position(const wk_batch *b, int32_t p) {
    return p >= 0 && p < b->n_parts && b->owned[p] ? wk_offsets_position(b->offs, p) : -1;
}

void wk_batch_add(wk_batch *b, wk_out *o, int64_t now_us) {
    wk_offsets_done(b->offs, o->partition, o->offset);
    if (!b->n) b->since_us = now_us;
    /* before the first output of a later offset of the same partition (the
     * outputs of a partition are in offset order); at the tail when none */
    wk_out **link = &b->head;
    while (*link && !((*link)->partition == o->partition && (*link)->offset > o->offset))
        link = &(*link)->next;
    wk_out *rest = *link, *last = o;
    *link = o;
    for (;; last = last->next) { /* the chain finishes one input offset */
        last->ready = 0;
        b->n++;
        if (!last->next) break;
    }
    last->next = rest;
    if (!rest) b->tail = last;
}

bool wk_batch_due(const wk_batch *b, int64_t now_us, int max_records, int64_t interval_us) {
    return b->n && (b->n >= max_records || now_us - b->since_us >= interval_us);
}

bool wk_batch_commit_early(wk_batch *b, int64_t now_us, int64_t horizon_us,
                           int64_t next_finish_us) {
    if (!b->n || horizon_us <= 0 || next_finish_us - now_us <= horizon_us) return false;
    return wk_batch_mark_ready(b) > 0;
}

int wk_batch_mark_ready(wk_batch *b) {
    int n_ready = 0;
    for (wk_out *o = b->head; o; o = o->next) {
        o->ready = o->offset < wk_offsets_position(b->offs, o->partition);
        n_ready += o->ready;
    }
    return n_ready;
}

int wk_batch_drop_if(wk_batch *b, wk_batch_drop_fn drop, void *ctx) {
    int dropped = 0;
    wk_out **pp = &b->head;
    b->tail = NULL;
    while (*pp) {
        wk_out *o = *pp;
        if (drop(ctx, o)) {
            *pp = o->next;
            b->n--;
            dropped++;
            wk_out_free(o);
        } else {
            b->tail = o;
            pp = &o->next;
        }
    }
    return dropped;
}

/* wk_batch_reconcile's predicate. */
typedef struct wk_reconcile_ctx {
    const int64_t *committed; /* committed offset per partition (-1 unknown) */
    int32_t n;                /* entries */
    int n_res, n_dlq;         /* dropped TurnResults / DeadLetters */
} wk_reconcile_ctx;

static int wk_landed(void *ctx, const wk_out *o) {
    wk_reconcile_ctx *c = ctx;
    if (o->partition < 0 || o->partition >= c->n) return 0;
    int64_t at = c->committed[o->partition];
    if (at < 0 || o->offset >= at) return 0;
    if (o->dlq) c->n_dlq++;
    else c->n_res++;
    return 1;
}

int wk_batch_reconcile(wk_batch *b, const int64_t *committed, int32_t n, int *n_res, int *n_dlq) {
    wk_reconcile_ctx c = {committed, n, 0, 0};
    int landed = wk_batch_drop_if(b, wk_landed, &c);
    *n_res = c.n_res;
    *n_dlq = c.n_dlq;
    return landed;
}

/* wk_batch_drop_stale's predicate. */
static int wk_stale(void *ctx, const wk_out *o) {
    return !wk_batch_current(ctx, o->partition, o->gen);
}

int wk_batch_drop_stale(wk_batch *b) { return wk_batch_drop_if(b, wk_stale, b); }

void wk_batch_free(wk_batch *b) {
    for (wk_out *o = b->head, *n; o; o = n) {
        n = o->next;
        wk_out_free(o);
    }
    b->head = b->tail = NULL;
    b->n = 0;
    wk_offsets_free(b->offs);
    b->offs = NULL;
    free(b->gen);
    free(b->owned);
    b->gen = NULL;
    b->owned = NULL;
    b->n_parts = 0;
}
