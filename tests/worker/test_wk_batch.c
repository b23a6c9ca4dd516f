/*
 * test_wk_batch.c -- the worker's exactly-once state logic (wk_batch.c)
 * without a broker: partition ownership and generations, which outputs a
 * transaction may carry (only those below their partition's commit
 * position), what a commit, a reconcile after a producer rebuild and a
 * rebalance remove, the producer-rebuild stages, and a randomized run of
 * consumption, out-of-order completion, commits that succeed, abort, fail
 * fatally after landing or before, revocations and re-assignments, checked
 * against a model of the outputs read_committed readers see: every input
 * record ends with exactly one visible output.  The early commit
 * (wk_batch_commit_early: ready outputs, no other turn due within the
 * horizon) decides some of the run's commits.
 */
#define PTEST_MAIN
#include "ptest.h"
#include "wk_internal.h"

static void tb_init(wk_batch *b) {
    memset(b, 0, sizeof *b);
    PT_EQ_INT(wk_offsets_new(&b->offs), 0);
}

static wk_out *tb_out(int32_t p, int64_t off, uint32_t gen, int dlq) {
    wk_out *o = calloc(1, sizeof *o);
    PT_ASSERT(o);
    sch_buf_init(&o->val);
    o->partition = p;
    o->offset = off;
    o->gen = gen;
    o->dlq = dlq;
    return o;
}

static int tb_is_ready(void *ctx, const wk_out *o) {
    (void)ctx;
    return o->ready;
}

/* The batch's offsets in order, and a check that tail and n agree and
 * that each partition's outputs are in offset order. */
static int tb_list(const wk_batch *b, int64_t *offs, int cap) {
    int n = 0;
    const wk_out *last = NULL;
    for (const wk_out *o = b->head; o; o = o->next) {
        PT_ASSERT(n < cap);
        for (const wk_out *x = b->head; x != o; x = x->next)
            PT_ASSERT_MSG(x->partition != o->partition || x->offset <= o->offset,
                          "partition %d: offset %lld before %lld", (int)o->partition,
                          (long long)x->offset, (long long)o->offset);
        offs[n++] = o->offset;
        last = o;
    }
    PT_EQ_INT(n, b->n);
    PT_ASSERT(b->tail == last);
    return n;
}

PT_TEST(ownership_and_generations) {
    wk_batch b;
    tb_init(&b);
    uint32_t gen = 0;
    PT_EQ_INT(wk_batch_consume(&b, 0, 0, &gen), WK_CONSUME_NOT_OURS);
    PT_EQ_INT(wk_batch_assign(&b, -1), -1);
    PT_EQ_INT(wk_batch_assign(&b, WK_OFF_MAX_PARTITIONS), -1);
    PT_EQ_INT(wk_batch_assign(&b, 2), 0);
    PT_EQ_INT(b.n_parts, 3);
    PT_ASSERT(!b.owned[0] && !b.owned[1] && b.owned[2]);
    PT_EQ_INT(wk_batch_consume(&b, 1, 0, &gen), WK_CONSUME_NOT_OURS);
    PT_EQ_INT(wk_batch_consume(&b, 2, 5, &gen), 0);
    PT_EQ_INT(gen, 1);
    PT_EQ_INT(wk_batch_consume(&b, 2, 5, &gen), WK_CONSUME_SKIP); /* not increasing */
    PT_EQ_INT(wk_batch_commit_position(&b, 2), 5);
    PT_EQ_INT(wk_batch_commit_position(&b, 1), -1);
    PT_EQ_INT(wk_batch_commit_position(&b, 99), -1);
    PT_ASSERT(wk_batch_current(&b, 2, 1));
    wk_batch_revoke(&b, 2);
    wk_batch_revoke(&b, 50); /* never assigned: ignored */
    PT_ASSERT(!wk_batch_current(&b, 2, 1));
    PT_EQ_INT(wk_batch_commit_position(&b, 2), -1);
    PT_EQ_INT(wk_batch_assign(&b, 2), 0);
    PT_EQ_INT(b.gen[2], 3);                 /* assign, revoke, assign */
    PT_ASSERT(!wk_batch_current(&b, 2, 1)); /* outcomes of the first assignment are stale */
    PT_ASSERT(wk_batch_current(&b, 2, 3));
    PT_EQ_INT(wk_batch_consume(&b, 2, 3, &gen), 0); /* offsets start anew */
    PT_EQ_INT(gen, 3);
    PT_ASSERT(!wk_batch_current(&b, -1, 0));
    wk_batch_free(&b);
}

PT_TEST(only_outputs_below_the_commit_position_are_ready) {
    wk_batch b;
    tb_init(&b);
    PT_EQ_INT(wk_batch_assign(&b, 0), 0);
    uint32_t g;
    for (int64_t off = 10; off < 15; off++) PT_EQ_INT(wk_batch_consume(&b, 0, off, &g), 0);
    /* 12 and 13 finish first: they wait for 10 and 11 */
    wk_batch_add(&b, tb_out(0, 12, g, 0), 100);
    PT_EQ_INT(b.since_us, 100);
    wk_batch_add(&b, tb_out(0, 13, g, 1), 200);
    PT_EQ_INT(b.since_us, 100); /* the oldest entry's time */
    PT_EQ_INT(wk_batch_mark_ready(&b), 0);
    PT_EQ_INT(wk_batch_commit_position(&b, 0), 10);
    wk_batch_add(&b, tb_out(0, 10, g, 0), 300);
    int64_t l[8];
    PT_EQ_INT(tb_list(&b, l, 8), 3); /* in offset order: 10 goes first */
    PT_ASSERT(l[0] == 10 && l[1] == 12 && l[2] == 13);
    PT_EQ_INT(wk_batch_mark_ready(&b), 1); /* 10; 12 and 13 still wait for 11 */
    PT_EQ_INT(wk_batch_commit_position(&b, 0), 11);
    wk_batch_add(&b, tb_out(0, 11, g, 0), 400);
    PT_EQ_INT(wk_batch_mark_ready(&b), 4);
    PT_EQ_INT(wk_batch_commit_position(&b, 0), 14);
    /* a commit removes the ready ones and keeps order and tail */
    wk_batch_add(&b, tb_out(0, 14, g, 0), 500); /* finished after the marking */
    PT_EQ_INT(wk_batch_drop_if(&b, tb_is_ready, NULL), 4);
    PT_EQ_INT(tb_list(&b, l, 8), 1);
    PT_EQ_INT(l[0], 14);
    wk_batch_add(&b, tb_out(0, 15, g, 0), 600); /* appends after the kept tail */
    PT_EQ_INT(tb_list(&b, l, 8), 2);
    PT_EQ_INT(l[1], 15);
    wk_batch_free(&b);
    PT_ASSERT(b.head == NULL && b.offs == NULL && b.n == 0);
}

/* Outputs of two partitions finishing out of order, one of them a chain:
 * each partition's outputs end up in offset order (a transaction produces
 * them so: a conversation's results stay in turn order), the partitions
 * interleaved as they came. */
PT_TEST(partition_outputs_in_offset_order) {
    wk_batch b;
    tb_init(&b);
    PT_EQ_INT(wk_batch_assign(&b, 0), 0);
    PT_EQ_INT(wk_batch_assign(&b, 1), 0);
    uint32_t g0, g1;
    for (int64_t off = 0; off < 10; off++) {
        PT_EQ_INT(wk_batch_consume(&b, 0, off, &g0), 0);
        PT_EQ_INT(wk_batch_consume(&b, 1, off, &g1), 0);
    }
    wk_batch_add(&b, tb_out(0, 7, g0, 0), 100);
    wk_batch_add(&b, tb_out(1, 3, g1, 0), 200);
    wk_out *dead = tb_out(0, 6, g0, 1);
    dead->next = tb_out(0, 6, g0, 0);
    wk_batch_add(&b, dead, 300);
    wk_batch_add(&b, tb_out(1, 1, g1, 0), 400);
    wk_batch_add(&b, tb_out(0, 9, g0, 0), 500);
    wk_batch_add(&b, tb_out(0, 2, g0, 0), 600);
    int64_t l[16];
    PT_EQ_INT(tb_list(&b, l, 16), 7); /* checks each partition's order */
    const int64_t want[7] = {2, 6, 6, 7, 1, 3, 9};
    for (int i = 0; i < 7; i++) PT_EQ_INT((int)l[i], (int)want[i]);
    PT_ASSERT(b.head->dlq == 0 && b.head->next->dlq == 1); /* the chain kept its order */
    PT_EQ_INT(b.since_us, 100);
    wk_batch_free(&b);
}

/* A chain (a refused turn's DeadLetter and its error result) is added
 * whole: two records of one input offset, ready and dropped together. */
PT_TEST(chain_of_one_offset) {
    wk_batch b;
    tb_init(&b);
    PT_EQ_INT(wk_batch_assign(&b, 0), 0);
    uint32_t g;
    for (int64_t off = 0; off < 3; off++) PT_EQ_INT(wk_batch_consume(&b, 0, off, &g), 0);
    wk_out *dead = tb_out(0, 1, g, 1);
    dead->next = tb_out(0, 1, g, 0);
    wk_batch_add(&b, dead, 100);
    int64_t l[8];
    PT_EQ_INT(tb_list(&b, l, 8), 2);
    PT_ASSERT(l[0] == 1 && l[1] == 1);
    PT_EQ_INT(b.since_us, 100);
    PT_EQ_INT(wk_batch_commit_position(&b, 0), 0); /* 0 is not finished */
    wk_batch_add(&b, tb_out(0, 2, g, 0), 200);
    wk_batch_add(&b, tb_out(0, 0, g, 0), 300);
    PT_EQ_INT(tb_list(&b, l, 8), 4);
    PT_EQ_INT(wk_batch_commit_position(&b, 0), 3); /* offset 1 finished once */
    PT_EQ_INT(wk_batch_mark_ready(&b), 4);
    PT_EQ_INT(wk_batch_drop_if(&b, tb_is_ready, NULL), 4);
    PT_ASSERT(b.head == NULL && b.tail == NULL && b.n == 0);
    wk_batch_free(&b);
}

PT_TEST(due) {
    wk_batch b;
    tb_init(&b);
    PT_ASSERT(!wk_batch_due(&b, 1000000, 1, 0)); /* nothing to commit */
    PT_EQ_INT(wk_batch_assign(&b, 0), 0);
    uint32_t g;
    PT_EQ_INT(wk_batch_consume(&b, 0, 0, &g), 0);
    PT_EQ_INT(wk_batch_consume(&b, 0, 1, &g), 0);
    wk_batch_add(&b, tb_out(0, 0, g, 0), 1000);
    PT_ASSERT(!wk_batch_due(&b, 1500, 2, 1000));
    PT_ASSERT(wk_batch_due(&b, 2000, 2, 1000)); /* the interval passed */
    wk_batch_add(&b, tb_out(0, 1, g, 0), 1100);
    PT_ASSERT(wk_batch_due(&b, 1200, 2, 1000)); /* max records reached */
    wk_batch_free(&b);
}

PT_TEST(commit_early) {
    wk_batch b;
    tb_init(&b);
    const int64_t H = 10000; /* the horizon: 10 ms */
    /* nothing to commit */
    PT_ASSERT(!wk_batch_commit_early(&b, 1000, H, INT64_MAX));
    PT_EQ_INT(wk_batch_assign(&b, 0), 0);
    uint32_t g;
    for (int64_t off = 0; off < 3; off++) PT_EQ_INT(wk_batch_consume(&b, 0, off, &g), 0);
    /* offset 1 finishes first: not ready (0 still runs), so never early */
    wk_batch_add(&b, tb_out(0, 1, g, 0), 1000);
    PT_ASSERT(!wk_batch_commit_early(&b, 1000, H, INT64_MAX));
    wk_batch_add(&b, tb_out(0, 0, g, 0), 2000);
    /* no other turn in flight in the scheduler, or none due within H */
    PT_ASSERT(wk_batch_commit_early(&b, 2000, H, INT64_MAX));
    PT_ASSERT(b.head->ready && b.head->next->ready); /* it marked them */
    PT_ASSERT(wk_batch_commit_early(&b, 2000, H, 2000 + H + 1));
    /* a turn due within the horizon (or overdue): wait for it */
    PT_ASSERT(!wk_batch_commit_early(&b, 2000, H, 2000 + H));
    PT_ASSERT(!wk_batch_commit_early(&b, 2000, H, 2500));
    PT_ASSERT(!wk_batch_commit_early(&b, 2000, H, 1500));
    PT_ASSERT(!wk_batch_commit_early(&b, 2000, H, 0)); /* a completion being delivered */
    /* horizon 0: off, only wk_batch_due commits */
    PT_ASSERT(!wk_batch_commit_early(&b, 2000, 0, INT64_MAX));
    PT_ASSERT(!wk_batch_due(&b, 2000, 500, 100000));
    wk_batch_free(&b);
}

PT_TEST(reconcile_drops_what_landed) {
    wk_batch b;
    tb_init(&b);
    uint32_t g[3];
    for (int32_t p = 0; p < 3; p++) {
        PT_EQ_INT(wk_batch_assign(&b, p), 0);
        for (int64_t off = 0; off < 4; off++) PT_EQ_INT(wk_batch_consume(&b, p, off, &g[p]), 0);
    }
    for (int32_t p = 0; p < 3; p++)
        for (int64_t off = 0; off < 4; off++) wk_batch_add(&b, tb_out(p, off, g[p], off == 1), 0);
    /* partition 0 committed up to 2 (offsets 0, 1 visible: one result,
     * one DeadLetter), 1 unknown, 2 up to 4; entries beyond n are kept */
    int64_t committed[2] = {2, -1};
    int n_res = -1, n_dlq = -1;
    PT_EQ_INT(wk_batch_reconcile(&b, committed, 2, &n_res, &n_dlq), 2);
    PT_EQ_INT(n_res, 1);
    PT_EQ_INT(n_dlq, 1);
    int64_t l[16];
    PT_EQ_INT(tb_list(&b, l, 16), 10);
    PT_EQ_INT(l[0], 2);
    int64_t all[3] = {4, 4, 4};
    PT_EQ_INT(wk_batch_reconcile(&b, all, 3, &n_res, &n_dlq), 10);
    PT_EQ_INT(n_res, 8);
    PT_EQ_INT(n_dlq, 2);
    PT_EQ_INT(tb_list(&b, l, 16), 0);
    PT_EQ_INT(wk_batch_reconcile(&b, all, 3, &n_res, &n_dlq), 0);
    wk_batch_free(&b);
}

PT_TEST(revocation_makes_outputs_stale) {
    wk_batch b;
    tb_init(&b);
    uint32_t g0, g1;
    PT_EQ_INT(wk_batch_assign(&b, 0), 0);
    PT_EQ_INT(wk_batch_assign(&b, 1), 0);
    PT_EQ_INT(wk_batch_consume(&b, 0, 0, &g0), 0);
    PT_EQ_INT(wk_batch_consume(&b, 1, 0, &g1), 0);
    wk_batch_add(&b, tb_out(0, 0, g0, 0), 0);
    wk_batch_add(&b, tb_out(1, 0, g1, 0), 0);
    PT_EQ_INT(wk_batch_drop_stale(&b), 0);
    wk_batch_revoke(&b, 0);
    PT_EQ_INT(wk_batch_assign(&b, 0), 0); /* back at once: still a new generation */
    PT_EQ_INT(wk_batch_drop_stale(&b), 1);
    int64_t l[4];
    PT_EQ_INT(tb_list(&b, l, 4), 1);
    PT_EQ_INT(b.head->partition, 1);
    wk_batch_revoke(&b, 1);
    PT_EQ_INT(wk_batch_drop_stale(&b), 1);
    PT_EQ_INT(tb_list(&b, l, 4), 0);
    wk_batch_free(&b);
}

PT_TEST(producer_rebuild_stages) {
    /* the happy path */
    PT_EQ_INT(wk_txn_rec_next(WK_REC_PRODUCER, WK_STEP_OK), WK_REC_INIT);
    PT_EQ_INT(wk_txn_rec_next(WK_REC_INIT, WK_STEP_OK), WK_REC_RECONCILE);
    PT_EQ_INT(wk_txn_rec_next(WK_REC_RECONCILE, WK_STEP_OK), 0);
    /* not yet: the same stage on the next pass */
    int stages[] = {WK_REC_PRODUCER, WK_REC_INIT, WK_REC_RECONCILE};
    for (int i = 0; i < 3; i++) {
        PT_EQ_INT(wk_txn_rec_next(stages[i], WK_STEP_WAIT), stages[i]);
        PT_EQ_INT(wk_txn_rec_next(stages[i], WK_STEP_RESTART), WK_REC_PRODUCER);
        PT_EQ_INT(wk_txn_rec_next(stages[i], WK_STEP_FATAL), -1);
    }
    /* not recovering: nothing to do */
    PT_EQ_INT(wk_txn_rec_next(0, WK_STEP_OK), 0);
    PT_EQ_INT(wk_txn_rec_next(0, WK_STEP_FATAL), 0);
    /* a fence stops the worker only for a transaction younger than the
     * timeout; other fatal errors, and a fence of an older one (the
     * coordinator's timeout abort), rebuild */
    PT_ASSERT(wk_txn_fence_stops(1, 0, 60000000));
    PT_ASSERT(wk_txn_fence_stops(1, 59999999, 60000000));
    PT_ASSERT(!wk_txn_fence_stops(1, 60000000, 60000000));
    PT_ASSERT(!wk_txn_fence_stops(0, 0, 60000000));
    wk_txn_state t = {.recovering = 0, .abort_pending = 1, .begin_us = 5};
    wk_txn_state_rebuild(&t, 1234);
    PT_EQ_INT(t.recovering, WK_REC_PRODUCER);
    PT_EQ_INT(t.rec_since_us, 1234);
    PT_EQ_INT(t.abort_pending, 0);
    PT_EQ_INT(t.begin_us, 0);
}

/* ------------------------------------------------------ randomized run */

enum { TB_P = 3, TB_N = 300 }; /* partitions, records per partition */

/* A record consumed and not yet finished (a turn running). */
typedef struct tb_pending {
    int32_t p;
    int64_t off;
    uint32_t gen;
} tb_pending;

/* The world: the worker's batch plus what the broker holds. */
typedef struct tb_world {
    wk_batch b;
    int visible[TB_P][TB_N]; /* committed outputs per input record */
    int64_t committed[TB_P]; /* the group's committed offsets (-1 none) */
    int64_t next[TB_P];      /* next offset the consumer fetches */
    tb_pending pend[TB_P * TB_N];
    int n_pend;
} tb_world;

static void tb_assign(tb_world *x, int32_t p) {
    PT_EQ_INT(wk_batch_assign(&x->b, p), 0);
    x->next[p] = x->committed[p] < 0 ? 0 : x->committed[p]; /* fetch from the committed offset */
}

static void tb_consume(tb_world *x, int32_t p) {
    if (!x->b.owned[p] || x->next[p] >= TB_N) return;
    uint32_t gen;
    PT_EQ_INT(wk_batch_consume(&x->b, p, x->next[p], &gen), 0);
    x->pend[x->n_pend++] = (tb_pending){p, x->next[p], gen};
    x->next[p]++;
}

static void tb_finish(tb_world *x) {
    if (!x->n_pend) return;
    int i = (int)(pt_rand() % (uint64_t)x->n_pend);
    tb_pending t = x->pend[i];
    x->pend[i] = x->pend[--x->n_pend];
    PT_ASSERT(wk_batch_current(&x->b, t.p, t.gen)); /* revocation removed the others */
    wk_batch_add(&x->b, tb_out(t.p, t.off, t.gen, (int)(pt_rand() % 5 == 0)), 0);
}

/* The broker side of a transaction that landed: its outputs become
 * visible and the commit positions of the owned partitions committed. */
static int tb_land(tb_world *x) {
    int n = 0;
    for (const wk_out *o = x->b.head; o; o = o->next)
        if (o->ready) {
            x->visible[o->partition][o->offset]++;
            n++;
        }
    for (int32_t p = 0; p < x->b.n_parts; p++) {
        int64_t pos = wk_batch_commit_position(&x->b, p);
        if (pos >= 0) x->committed[p] = pos;
    }
    return n;
}

/* One transaction as wk_txn_commit runs it, with the outcome `kind`:
 * 0 commits, 1 aborts (batch kept), 2 fails fatally after it landed,
 * 3 fails fatally before it landed; 2 and 3 reconcile after a few other
 * events, as the rebuild does a few poll passes later. */
static void tb_commit(tb_world *x, int kind) {
    int n_ready = wk_batch_mark_ready(&x->b);
    if (!n_ready || kind == 1) return;
    if (kind == 0) {
        PT_EQ_INT(tb_land(x), n_ready);
        PT_EQ_INT(wk_batch_drop_if(&x->b, tb_is_ready, NULL), n_ready);
        return;
    }
    if (kind == 2) tb_land(x);
    for (int k = (int)(pt_rand() % 4); k > 0; k--) { /* turns keep finishing meanwhile */
        tb_consume(x, (int32_t)(pt_rand() % TB_P));
        tb_finish(x);
    }
    int n_res, n_dlq;
    int landed = wk_batch_reconcile(&x->b, x->committed, TB_P, &n_res, &n_dlq);
    PT_EQ_INT(landed, kind == 2 ? n_ready : 0);
    PT_EQ_INT(n_res + n_dlq, landed);
}

/* Partition p revoked (lost: nothing committed first) and maybe given
 * back at once. */
static void tb_revoke(tb_world *x, int32_t p, int lost) {
    if (!x->b.owned[p]) {
        tb_assign(x, p);
        return;
    }
    if (!lost) tb_commit(x, 0);
    wk_batch_revoke(&x->b, p);
    for (int i = 0; i < x->n_pend;) /* its turns are dropped */
        if (x->pend[i].p == p) x->pend[i] = x->pend[--x->n_pend];
        else i++;
    wk_batch_drop_stale(&x->b);
    if (pt_rand() % 2) tb_assign(x, p);
}

PT_TEST(random_run_is_exactly_once) {
    static tb_world x;
    for (int round = 0; round < 20; round++) {
        memset(&x, 0, sizeof x);
        tb_init(&x.b);
        for (int32_t p = 0; p < TB_P; p++) {
            x.committed[p] = -1;
            tb_assign(&x, p);
        }
        for (int step = 0; step < 4000; step++) {
            uint64_t r = pt_rand() % 100;
            int32_t p = (int32_t)(pt_rand() % TB_P);
            if (r < 40) tb_consume(&x, p);
            else if (r < 75) tb_finish(&x);
            else if (r < 85) tb_commit(&x, 0);
            else if (r < 90) { /* the early commit, against a random estimate */
                int64_t next = (int64_t)(pt_rand() % 3) * 10000;
                if (wk_batch_commit_early(&x.b, 10000, 5000, next ? next : INT64_MAX))
                    tb_commit(&x, 0);
            } else if (r < 97) tb_commit(&x, 1 + (int)(pt_rand() % 3));
            else tb_revoke(&x, p, (int)(pt_rand() % 2));
        }
        /* settle: everything assigned, consumed, finished and committed */
        for (int32_t p = 0; p < TB_P; p++)
            if (!x.b.owned[p]) tb_assign(&x, p);
        for (int guard = 0; guard < 100000; guard++) {
            int done = !x.n_pend && !x.b.n;
            for (int32_t p = 0; p < TB_P; p++) {
                done &= x.next[p] == TB_N;
                tb_consume(&x, p);
            }
            if (done) break;
            tb_finish(&x);
            tb_commit(&x, 0);
        }
        for (int32_t p = 0; p < TB_P; p++) {
            PT_EQ_INT(x.committed[p], TB_N);
            for (int i = 0; i < TB_N; i++)
                PT_ASSERT_MSG(x.visible[p][i] == 1,
                              "round %d: partition %d offset %d has %d "
                              "visible outputs",
                              round, (int)p, i, x.visible[p][i]);
        }
        wk_batch_free(&x.b);
    }
}
