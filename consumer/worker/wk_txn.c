/*
 * wk_txn.c -- the worker's Kafka transactions and their failure handling:
 * one transaction produces the finished outputs and commits the input
 * offsets (see wk_loop.c for why this is exactly-once), and a transactional
 * producer that failed fatally is rebuilt in place.  The decisions that
 * need no broker (which outputs are ready, what a commit or a reconcile
 * removes, the rebuild's stages, when a fence stops the worker) are in
 * wk_batch.c; this file makes the Kafka calls around them.
 *
 * When.  wk_loop.c commits the batch when wk_batch_due says so
 * (worker.txn_max_records outputs waiting, or worker.txn_interval_ms since
 * the oldest) or sooner, when wk_batch_commit_early does: a ready output
 * waits and the scheduler (eng_sched_next_finish_us) expects no other turn
 * to end within worker.txn_horizon_ms or its step time, whichever is
 * longer.  A lone turn's reply is then visible one commit after the turn
 * ended, while turns ending close together -- every step ends some under
 * load -- still share a transaction.  A finished turn wakes the poll loop
 * (it yields the consumer queue, wk_convs.wake), so the decision is made
 * at once.  A commit (begin, produce, send_offsets, commit) takes a few ms
 * on a local broker given two producer settings of wk_kafka.c: a delivery
 * report callback (without one, commit_transaction's flush noticed the
 * delivery only at the end of a 10 ms wait), and a short retry.backoff.ms
 * (a transaction begun right after a commit is refused with
 * CONCURRENT_TRANSACTIONS while the coordinator writes the previous one's
 * markers).
 *
 * Errors.  A retriable error of send_offsets_to_transaction or
 * commit_transaction (a timeout while the broker is away) is retried a few
 * times; any other non-fatal error aborts the transaction and keeps the
 * batch for the next one.  An abort that itself fails retriably is retried
 * before the next begin_transaction.  A fatal error is one of two kinds:
 *
 *   - fenced (ERR__FENCED / PRODUCER_FENCED) while the transaction was
 *     younger than transaction.timeout.ms: another instance took the
 *     transactional.id.  The worker stops (wk_worker_run returns
 *     WK_EKAFKA, exit status 1): two live workers with one worker.id is a
 *     deployment error.
 *   - anything else, typically a broker outage longer than
 *     transaction.timeout.ms: the coordinator aborted the open transaction
 *     on its own, and librdkafka 2.0 reports the late abort as fatal
 *     (INVALID_TXN_STATE, or _FENCED when the coordinator bumped the
 *     producer epoch: a fence of a transaction older than its timeout is
 *     the coordinator's, not a new instance's).  The worker recovers
 *     without exiting and without redoing anything: the turns in flight
 *     keep running and the batch is kept, exactly as after a non-fatal
 *     abort.  It pauses its partitions (the batch cannot drain until a
 *     producer is back, so consumption must not run ahead) and, one step
 *     per poll loop pass, destroys the producer, makes a new one with the
 *     same transactional.id and calls init_transactions until the broker
 *     answers.  init_transactions returns only once the coordinator has
 *     finished the old epoch's open transaction, so its outcome is final by
 *     then; the worker then reads the group's committed offsets (stable
 *     offsets: the consumer is read_committed) and reconciles the batch:
 *     an output below its partition's committed offset was in a
 *     transaction that did land although the client saw it fail (a commit
 *     whose reply was lost), so it is already visible and is dropped; every
 *     other output was never committed and goes in the next transaction.
 *     Then it resumes its partitions.  Still exactly one visible TurnResult
 *     per turn, and the token chunks of its one attempt are the real ones.
 *
 *     An earlier design dropped the batch and the turns in flight and
 *     sought the partitions back to the committed offsets; a fresh clone's
 *     CI run lost 108 turns after such a rebuild (none redone: the dropped
 *     turns were never consumed again).  Keeping the work removes the seek
 *     on paused partitions and the discarding of records during recovery
 *     that the loss depended on, and the redo it cost.
 *
 * Fault injection (tests only): PARLEY_TEST_TXN_FATAL_AFTER=N[:landed]
 * raises a fatal error on the transactional producer
 * (rd_kafka_test_fatal_error) once, in transaction N + 1: before its
 * offsets are sent (the transaction never lands), or with ":landed" right
 * after it committed (the outcome the client cannot tell from a lost
 * reply).  The broker cannot be made to do either on demand.
 * PARLEY_TEST_REBUILD_HOLD_FILE=PATH holds each rebuild before it starts
 * while PATH exists (the worker stays paused), so a test can rebalance
 * meanwhile and end the hold when it has seen what it waits for, not after
 * a time that a loaded machine may overrun.
 * PARLEY_TEST_TXN_HOLD=AFTER:MS keeps one transaction open MS ms after its
 * records reached the broker, so a test can take the broker away under an
 * open transaction every time, not by luck (wk_txn_test_hold).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "wk_internal.h"

#define WK_TXN_RETRIES 3 /* tries of a retriable send_offsets / commit */

const double wk_ovh_bounds_ms[WK_OVH_N - 1] = {1,   2,   5,   10,  20,   50,  100,
                                               150, 200, 300, 500, 1000, 2000};

static void wk_set_fatal(wk_worker *w, const char *what, const char *msg) {
    w->halt.fatal = 1;
    snprintf(w->halt.fatal_msg, sizeof w->halt.fatal_msg, "%.100s: %.400s", what, msg);
    wk_log("error", "kafka_fatal", "what=%s err=\"%s\"", what, msg);
}

/* The producer is in a fatal state: stop when fenced, else start a rebuild
 * (keep every turn and the batch, pause, see wk_txn_recover_step). */
static void wk_txn_on_fatal(wk_worker *w, const char *step, const char *msg) {
    char why[512];
    rd_kafka_resp_err_t fe = rd_kafka_fatal_error(w->prod.txp, why, sizeof why);
    if (!fe) snprintf(why, sizeof why, "%s", msg);
    int64_t age = w->txn.begin_us ? eng_sched_now_us() - w->txn.begin_us : 0;
    if (wk_txn_fence_stops(fe == RD_KAFKA_RESP_ERR__FENCED ||
                               fe == RD_KAFKA_RESP_ERR_PRODUCER_FENCED,
                           age, w->txn.timeout_us)) {
        wk_set_fatal(w, step, why);
        return;
    }
    wk_pause_rebuild(w, 1);
    wk_txn_state_rebuild(&w->txn, eng_sched_now_us());
    wk_log("warn", "producer_fatal",
           "step=%s err=\"%s\" txn_age_ms=%lld kept_inflight=%lld kept_batch=%d action=rebuild",
           step, why, (long long)(age / 1000), (long long)w->convs.inflight, w->batch.n);
}

/* PARLEY_TEST_TXN_FATAL_AFTER: 1 when the injected fatal error is due now
 * at `where` (0 before the offsets are sent, 1 after the commit); raises it
 * on the producer once.
 *
 * Before the "open" injection the transaction's records are flushed to the
 * broker (they sit there uncommitted, for the new producer's
 * init_transactions to abort).  rd_kafka_test_fatal_error, unlike the
 * fatal errors librdkafka raises itself, leaves the transaction manager in
 * IN_TRANSACTION, where a partition registration may still be sent while
 * the rebuild destroys the producer; librdkafka 2.12.1 then fails that
 * AddPartitionsToTxn request with __DESTROY on the broker thread before
 * its main thread has counted it, and asserts (txn_req_cnt > 0 in
 * rd_kafka_txn_handle_AddPartitionsToTxn: seen once in a fresh clone's
 * CI run).  After the flush every partition is registered, so none is
 * left to send. */
static int wk_txn_inject(wk_worker *w, int where) {
    if (w->txn.test_fatal_at <= 0 || w->txn.test_fatal_landed != where ||
        (long)w->met.ctr.txn_commits < w->txn.test_fatal_at)
        return 0;
    w->txn.test_fatal_at = 0;
    if (where == 0) rd_kafka_flush(w->prod.txp, 10000);
    rd_kafka_test_fatal_error(w->prod.txp, RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH,
                              "injected by PARLEY_TEST_TXN_FATAL_AFTER");
    return 1;
}

/* PARLEY_TEST_TXN_HOLD=AFTER:MS (fault injection for tests): the first
 * transaction after AFTER commits stays open MS ms once its records have
 * reached the broker, so a test can take the broker away under an open
 * transaction (the coordinator then aborts it on timeout: a fatal error
 * for the producer, which is rebuilt).  Logs event=test_txn_hold first. */
static void wk_txn_test_hold(wk_worker *w) {
    if (w->txn.test_hold_ms <= 0 || (long)w->met.ctr.txn_commits < w->txn.test_hold_after) return;
    int64_t ms = w->txn.test_hold_ms;
    w->txn.test_hold_ms = 0;
    rd_kafka_flush(w->prod.txp, 10000);
    wk_log("warn", "test_txn_hold", "ms=%lld", (long long)ms);
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Abort the open transaction.  0 aborted; -1 not (retried before the next
 * begin when retriable; a fatal error starts the rebuild). */
static int wk_txn_abort(wk_worker *w) {
    rd_kafka_error_t *e = rd_kafka_abort_transaction(w->prod.txp, 10000);
    if (!e) {
        w->txn.abort_pending = 0;
        w->txn.begin_us = 0;
        return 0;
    }
    if (rd_kafka_error_is_fatal(e)) {
        wk_txn_on_fatal(w, "abort_transaction", rd_kafka_error_string(e));
    } else {
        w->txn.abort_pending = 1;
        wk_log("warn", "txn_abort_failed", "err=\"%s\" retry=yes", rd_kafka_error_string(e));
    }
    rd_kafka_error_destroy(e);
    return -1;
}

/* A transaction step failed with e (consumed): abort, then rebuild the
 * producer before the next transaction.  librdkafka speaks transactions v1
 * (no KIP-890), where the producer epoch stays the same from one
 * transaction to the next: a produce request of the aborted transaction
 * still on its way (its connection dropped, the broker slow or restarting)
 * can land after the abort marker and join the next transaction, which
 * then commits it beside the same outputs produced again (a doubled
 * TurnResult, seen after a broker restart under load).  The new producer's
 * init_transactions bumps the epoch, which fences every request of the old
 * one; the batch is kept and reconciled as after a fatal error. */
static void wk_txn_failed(wk_worker *w, const char *step, rd_kafka_error_t *e) {
    if (rd_kafka_error_is_fatal(e)) {
        wk_txn_on_fatal(w, step, rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        return;
    }
    wk_log("warn", "txn_abort", "step=%s err=\"%s\" records=%d action=rebuild", step,
           rd_kafka_error_string(e), w->batch.n);
    rd_kafka_error_destroy(e);
    WK_ADD(w->met.ctr.txn_aborts, 1);
    wk_txn_abort(w); /* best effort: the new producer's init aborts what is left open */
    if (w->halt.fatal || w->txn.recovering) return; /* the abort met a fatal error */
    wk_pause_rebuild(w, 1);
    wk_txn_state_rebuild(&w->txn, eng_sched_now_us());
    w->txn.after_abort = 1;
}

/* Retry a retriable error of a blocking transaction call a few times. */
static bool wk_txn_retry(wk_worker *w, const char *step, rd_kafka_error_t *e, int tries) {
    if (!rd_kafka_error_is_retriable(e) || tries + 1 >= WK_TXN_RETRIES || w->halt.stop_fast)
        return false;
    wk_log("warn", "txn_retry", "step=%s err=\"%s\" try=%d", step, rd_kafka_error_string(e),
           tries + 2);
    return true;
}

/* Timing of the committed TurnResults: overhead = time outside a running
 * batch, from ready (consumed) to committed. */
static void wk_txn_timing(wk_worker *w, const wk_out *o, int64_t now) {
    const wk_timing *t = &o->tm;
    if (o->dlq || !t->ready_us || !t->submit_us || !t->admit_us || !t->end_us) return;
    int64_t pre = t->submit_us - t->ready_us, sq = t->admit_us - t->submit_us;
    int64_t eng = t->end_us - t->admit_us, post = now - t->end_us;
    if (pre < 0 || sq < 0 || eng < 0 || post < 0) return;
    int64_t ovh = pre + sq + post;
    int b = 0;
    while (b < WK_OVH_N - 1 && (double)ovh > wk_ovh_bounds_ms[b] * 1000) b++;
    WK_ADD(w->met.ctr.ovh_hist[b], 1);
    WK_ADD(w->met.ctr.ovh_n, 1);
    WK_ADD(w->met.ctr.ovh_sum_us, (uint64_t)ovh);
    WK_ADD(w->met.ctr.pre_sum_us, (uint64_t)pre);
    WK_ADD(w->met.ctr.squeue_sum_us, (uint64_t)sq);
    WK_ADD(w->met.ctr.engine_sum_us, (uint64_t)eng);
    WK_ADD(w->met.ctr.post_sum_us, (uint64_t)post);
    w->met.ovh_ring[w->met.ovh_next++ % WK_OVH_RING] = (float)(ovh / 1000.0);
}

/* wk_batch_drop_if predicate after a commit: the ready outputs landed
 * (their timing is recorded); the others stay for the next one. */
typedef struct wk_committed_ctx {
    wk_worker *w; /* whose metrics */
    int64_t now;  /* commit time (eng_sched_now_us) */
} wk_committed_ctx;

static int wk_committed(void *ctx, const wk_out *o) {
    wk_committed_ctx *c = ctx;
    if (!o->ready) return 0;
    wk_txn_timing(c->w, o, c->now);
    return 1;
}

int wk_txn_commit(wk_worker *w) {
    if (!w->batch.n || w->halt.fatal || w->txn.recovering) return 0;
    if (w->txn.abort_pending && wk_txn_abort(w) != 0) return -1;
    /* Only outputs below their partition's commit position are ready: an
     * output above an unfinished record waits, so a committed output is
     * never redone by the next owner of the partition. */
    int n_ready = wk_batch_mark_ready(&w->batch);
    w->batch.since_us = eng_sched_now_us();
    if (!n_ready) return 0;
    rd_kafka_error_t *e = rd_kafka_begin_transaction(w->prod.txp);
    if (!e) w->txn.begin_us = eng_sched_now_us();
    if (e) {
        if (rd_kafka_error_is_fatal(e))
            wk_txn_on_fatal(w, "begin_transaction", rd_kafka_error_string(e));
        else wk_log("warn", "txn_begin_failed", "err=\"%s\"", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        return -1;
    }
    const char *step = "produce";
    int n_res = 0, n_dlq = 0;
    for (wk_out *o = w->batch.head; o; o = o->next) {
        if (!o->ready) continue;
        rd_kafka_headers_t *h = rd_kafka_headers_new(2);
        rd_kafka_header_add(h, SCH_HEADER_CONTENT_TYPE, -1,
                            o->json ? SCH_CONTENT_TYPE_JSON : SCH_CONTENT_TYPE, -1);
        if (o->tp[0]) rd_kafka_header_add(h, SCH_HEADER_TRACEPARENT, -1, o->tp, -1);
        const char *topic = o->dlq ? w->topics.dlq : w->topics.resp;
        rd_kafka_resp_err_t re = rd_kafka_producev(
            w->prod.txp, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_KEY(o->key, o->key_len),
            RD_KAFKA_V_VALUE(o->val.data, o->val.len), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
        if (re) {
            rd_kafka_headers_destroy(h);
            if (re == RD_KAFKA_RESP_ERR__FATAL) {
                wk_txn_on_fatal(w, step, rd_kafka_err2str(re));
                return -1;
            }
            e = rd_kafka_error_new(re, "produce: %s", rd_kafka_err2str(re));
            goto fail;
        }
        if (o->dlq) n_dlq++;
        else n_res++;
    }
    wk_txn_test_hold(w);
    rd_kafka_topic_partition_list_t *offs = rd_kafka_topic_partition_list_new(8);
    for (int32_t p = 0; p < w->batch.n_parts; p++) {
        int64_t pos = wk_batch_commit_position(&w->batch, p);
        if (pos >= 0) rd_kafka_topic_partition_list_add(offs, w->topics.turns, p)->offset = pos;
    }
    if (wk_txn_inject(w, 0)) {
        rd_kafka_topic_partition_list_destroy(offs);
        wk_txn_on_fatal(w, "send_offsets_to_transaction", "injected");
        return -1;
    }
    rd_kafka_consumer_group_metadata_t *md = rd_kafka_consumer_group_metadata(w->cons);
    step = "send_offsets_to_transaction";
    for (int tries = 0;; tries++) {
        e = rd_kafka_send_offsets_to_transaction(w->prod.txp, offs, md, 30000);
        if (!e || !wk_txn_retry(w, step, e, tries)) break;
        rd_kafka_error_destroy(e);
    }
    rd_kafka_consumer_group_metadata_destroy(md);
    rd_kafka_topic_partition_list_destroy(offs);
    if (e) goto fail;
    step = "commit_transaction";
    for (int tries = 0;; tries++) {
        e = rd_kafka_commit_transaction(w->prod.txp, 30000);
        if (!e || !wk_txn_retry(w, step, e, tries)) break;
        rd_kafka_error_destroy(e);
    }
    if (e) goto fail;
    if (wk_txn_inject(w, 1)) { /* landed, but the client is told it failed */
        WK_ADD(w->met.ctr.txn_commits, 1);
        wk_txn_on_fatal(w, "commit_transaction", "injected");
        return -1;
    }
    w->txn.begin_us = 0;
    wk_committed_ctx cc = {w, eng_sched_now_us()};
    wk_batch_drop_if(&w->batch, wk_committed, &cc);
    WK_ADD(w->met.ctr.txn_commits, 1);
    WK_ADD(w->met.ctr.turns_done, (uint64_t)n_res);
    WK_ADD(w->met.ctr.dlq, (uint64_t)n_dlq);
    return 0;
fail:
    wk_txn_failed(w, step, e);
    return -1;
}

/* After a rebuild: drop the batch outputs that a transaction the client
 * saw fail did commit (below their partition's committed offset), keep the
 * rest.  0 done, -1 try again later (the committed offsets unreadable). */
static int wk_txn_reconcile(wk_worker *w) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(8);
    for (int32_t p = 0; p < w->batch.n_parts; p++)
        if (w->batch.owned[p]) rd_kafka_topic_partition_list_add(l, w->topics.turns, p);
    rd_kafka_resp_err_t re = l->cnt ? rd_kafka_committed(w->cons, l, 2000) : 0;
    for (int i = 0; !re && i < l->cnt; i++) re = l->elems[i].err;
    if (re) {
        wk_log("warn", "reconcile_retry", "err=\"%s\"", rd_kafka_err2str(re));
        rd_kafka_topic_partition_list_destroy(l);
        return -1;
    }
    /* committed offset per partition; -1 for those not asked (not owned) */
    int64_t *committed =
        malloc((size_t)(w->batch.n_parts ? w->batch.n_parts : 1) * sizeof *committed);
    if (!committed) {
        wk_log("warn", "reconcile_retry", "err=\"out of memory\"");
        rd_kafka_topic_partition_list_destroy(l);
        return -1;
    }
    for (int32_t p = 0; p < w->batch.n_parts; p++) committed[p] = -1;
    for (int i = 0; i < l->cnt; i++)
        if (l->elems[i].partition >= 0 && l->elems[i].partition < w->batch.n_parts)
            committed[l->elems[i].partition] = l->elems[i].offset;
    int n_res = 0, n_dlq = 0;
    int landed = wk_batch_reconcile(&w->batch, committed, w->batch.n_parts, &n_res, &n_dlq);
    free(committed);
    WK_ADD(w->met.ctr.turns_done, (uint64_t)n_res); /* already visible */
    WK_ADD(w->met.ctr.dlq, (uint64_t)n_dlq);
    for (int i = 0; i < l->cnt; i++)
        wk_log("info", "reconciled", "partition=%d committed=%lld", (int)l->elems[i].partition,
               (long long)l->elems[i].offset);
    wk_log("info", "batch_reconciled", "landed=%d kept=%d", landed, w->batch.n);
    rd_kafka_topic_partition_list_destroy(l);
    return 0;
}

/* Tear a replaced transactional producer down off the poll thread: purge
 * what it still holds, then destroy it.  librdkafka's destroy waits for its
 * threads, and once (a CI run under broker faults) the poll thread stayed
 * silent for over 30 s right after an aborted transaction, before the
 * rebuild's init_transactions was ever sent; a rebuild must not wait on the
 * old handle, whose requests the new one's init_transactions fences anyway.
 * Logs event=producer_destroyed with the time it took. */
static void *wk_txp_destroy_main(void *arg) {
    rd_kafka_t *rk = arg;
    int64_t t0 = eng_sched_now_us();
    rd_kafka_purge(rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
    rd_kafka_destroy(rk);
    wk_log("info", "producer_destroyed", "ms=%lld", (long long)((eng_sched_now_us() - t0) / 1000));
    return NULL;
}

static void wk_txp_destroy_async(rd_kafka_t *rk) {
    pthread_t th;
    pthread_attr_t at;
    int ok = pthread_attr_init(&at) == 0;
    if (ok && pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED) == 0 &&
        pthread_create(&th, &at, wk_txp_destroy_main, rk) == 0) {
        pthread_attr_destroy(&at);
        return;
    }
    if (ok) pthread_attr_destroy(&at);
    wk_txp_destroy_main(rk); /* no thread: here, as before */
}

/* One stage's Kafka work of a producer rebuild: its outcome (a fatal one
 * has set w->halt.fatal with its message). */
static wk_step wk_txn_recover_work(wk_worker *w) {
    char err[PL_ERR_LEN * 2]; /* a prefix in front of librdkafka's message */
    switch (w->txn.recovering) {
    case WK_REC_PRODUCER:
        if (w->txn.test_rebuild_hold_file && access(w->txn.test_rebuild_hold_file, F_OK) == 0)
            return WK_STEP_WAIT;
        if (w->prod.txp) {
            wk_txp_destroy_async(w->prod.txp);
            w->prod.txp = NULL;
        }
        if (wk_kafka_txp_new(w, &w->prod.txp, err, sizeof err) != 0) {
            wk_set_fatal(w, "producer_rebuild", err);
            return WK_STEP_FATAL;
        }
        return WK_STEP_OK;
    case WK_REC_INIT: {
        rd_kafka_error_t *e = rd_kafka_init_transactions(w->prod.txp, 2000);
        if (!e) return WK_STEP_OK;
        wk_step st = WK_STEP_WAIT;
        if (rd_kafka_error_is_fatal(e)) {
            rd_kafka_resp_err_t code = rd_kafka_error_code(e);
            if (code == RD_KAFKA_RESP_ERR__FENCED || code == RD_KAFKA_RESP_ERR_PRODUCER_FENCED) {
                wk_set_fatal(w, "init_transactions", rd_kafka_error_string(e));
                st = WK_STEP_FATAL;
            } else {
                st = WK_STEP_RESTART; /* start over with a new producer */
            }
        }
        wk_log("warn", "init_transactions_retry", "err=\"%s\"", rd_kafka_error_string(e));
        rd_kafka_error_destroy(e);
        return st;
    }
    case WK_REC_RECONCILE: return wk_txn_reconcile(w) != 0 ? WK_STEP_WAIT : WK_STEP_OK;
    default: return WK_STEP_WAIT;
    }
}

void wk_txn_recover_step(wk_worker *w) {
    if (!w->txn.recovering) return;
    int next = wk_txn_rec_next(w->txn.recovering, wk_txn_recover_work(w));
    if (next < 0) return; /* fatal: the loop stops on w->halt.fatal */
    w->txn.recovering = next;
    if (next) return;
    /* parley_producer_rebuilds_total counts the rebuilds after a fatal
     * error (the alert's signal); the routine one after an abort is in
     * parley_txn_aborts_total already */
    if (!w->txn.after_abort) WK_ADD(w->met.ctr.producer_rebuilds, 1);
    wk_pause_rebuild(w, 0);
    wk_log("info", "producer_rebuilt", "reason=%s rebuilds=%llu",
           w->txn.after_abort ? "abort" : "fatal",
           (unsigned long long)w->met.ctr.producer_rebuilds);
    w->txn.after_abort = 0;
}
