/*
 * wk_loop.c -- the worker's poll loop: consumption, per-conversation
 * queues, rebalances, backpressure and shutdown (the transactions
 * themselves and the producer rebuild are in wk_txn.c; the state logic of
 * ownership, offsets and the batch, which both drive, in wk_batch.c).
 *
 * Exactly-once.  A consumed record is tracked in wk_offsets until its one
 * output (TurnResult, expired TurnResult or DeadLetter) joins the batch.
 * An output is committed only once every lower offset of its partition is
 * finished too (its offset is below the commit position), so the outputs
 * visible to read_committed readers are always exactly those of the
 * records below the committed offsets: whoever owns the partition next
 * redoes precisely the records whose outputs are not visible.  Completion is
 * out of order (conversations run concurrently); a finished output waits
 * in the batch for the slower turns before it -- the price of exactly-once
 * without a dedup store (token chunks still stream at once).  A
 * transaction produces the ready outputs and sends
 * the commit position of every owned partition (lowest unfinished offset)
 * with the consumer's group metadata, then commits.  If it aborts, the batch
 * stays and is produced again in the next one, by a rebuilt producer (a new
 * epoch fences any late request of the aborted transaction, which
 * transactions v1 would let join the next one: wk_txn_failed); nothing is
 * marked committed that is not.  A crash leaves at most an open
 * transaction, which the broker aborts (transaction.timeout.ms) or the
 * restarted worker's init_transactions fences; the new owner of the partitions starts at the
 * committed positions and redoes the unfinished turns under new attempts.
 *
 * Rebalances (cooperative).  Revocation first commits the finished work of
 * every partition (still ours), then drops the revoked partitions' turns:
 * queued ones are freed, running ones are cancelled and marked orphan (their
 * outcome is discarded), and a generation counter per partition makes any
 * late outcome of an earlier assignment stale.  A lost assignment commits
 * nothing of the lost partitions.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wk_internal.h"
#include "wk_worker.h"
#include "pl_err.h"
#include "pl_hash.h"

/* Counters are read by the metrics thread: update them atomically. */

/* ------------------------------------------------------ conversations */

static uint64_t wk_hash(const char *p, size_t n) { return pl_fnv1a64(PL_FNV64_SEED, p, n); }

/* The queue of (partition, key): a conversation's turns normally share a
 * partition; a client that spreads one key over several partitions gets a
 * queue per partition, so a revocation never strands another partition's
 * turns. */
/* The conversation (partition, key), or NULL. */
static wk_conv *wk_conv_find(wk_worker *w, int32_t part, const char *key, size_t len) {
    if (!w->convs.cap || !key) return NULL;
    size_t b = (wk_hash(key, len) ^ (uint64_t)part) & (w->convs.cap - 1);
    for (wk_conv *c = w->convs.tab[b]; c; c = c->hnext)
        if (c->partition == part && c->key_len == len && !memcmp(c->key, key, len)) return c;
    return NULL;
}

static wk_conv *wk_conv_get(wk_worker *w, int32_t part, const char *key, size_t len) {
    if (w->convs.cap == 0 || w->convs.n * 2 > w->convs.cap) {
        size_t cap = w->convs.cap ? 2 * w->convs.cap : 256;
        wk_conv **tab = calloc(cap, sizeof *tab);
        if (!tab) return NULL;
        for (size_t i = 0; i < w->convs.cap; i++)
            for (wk_conv *c = w->convs.tab[i], *n; c; c = n) {
                n = c->hnext;
                size_t b = (wk_hash(c->key, c->key_len) ^ (uint64_t)c->partition) & (cap - 1);
                c->hnext = tab[b];
                tab[b] = c;
            }
        free(w->convs.tab);
        w->convs.tab = tab;
        w->convs.cap = cap;
    }
    size_t b = (wk_hash(key, len) ^ (uint64_t)part) & (w->convs.cap - 1);
    for (wk_conv *c = w->convs.tab[b]; c; c = c->hnext)
        if (c->partition == part && c->key_len == len && !memcmp(c->key, key, len)) return c;
    wk_conv *c = calloc(1, sizeof *c);
    if (!c || !(c->key = malloc(len + 1))) {
        free(c);
        return NULL;
    }
    memcpy(c->key, key, len);
    c->key[len] = 0;
    c->key_len = len;
    c->partition = part;
    c->hnext = w->convs.tab[b];
    w->convs.tab[b] = c;
    w->convs.n++;
    return c;
}

/* Idle list: conversations with no queued turn, least recently used first,
 * remembered (up to WK_MAX_IDLE) so a revocation can hand their KV to
 * Redis. */
static void wk_idle_unlink(wk_worker *w, wk_conv *c) {
    if (!c->idle) return;
    if (c->lru_prev) c->lru_prev->lru_next = c->lru_next;
    else w->convs.idle_head = c->lru_next;
    if (c->lru_next) c->lru_next->lru_prev = c->lru_prev;
    else w->convs.idle_tail = c->lru_prev;
    c->lru_prev = c->lru_next = NULL;
    c->idle = 0;
    w->convs.n_idle--;
}

static void wk_idle_push(wk_worker *w, wk_conv *c) {
    c->lru_prev = w->convs.idle_tail;
    c->lru_next = NULL;
    if (w->convs.idle_tail) w->convs.idle_tail->lru_next = c;
    else w->convs.idle_head = c;
    w->convs.idle_tail = c;
    c->idle = 1;
    w->convs.n_idle++;
}

static void wk_conv_remove(wk_worker *w, wk_conv *c) {
    wk_idle_unlink(w, c);
    size_t b = (wk_hash(c->key, c->key_len) ^ (uint64_t)c->partition) & (w->convs.cap - 1);
    for (wk_conv **pp = &w->convs.tab[b]; *pp; pp = &(*pp)->hnext)
        if (*pp == c) {
            *pp = c->hnext;
            break;
        }
    w->convs.n--;
    if (c->hist) w->convs.hist_bytes -= c->hist->bytes;
    free(c->hist);
    free(c->last_toks);
    free(c->key);
    free(c);
}

void wk_conv_free_all(wk_worker *w) {
    for (size_t i = 0; i < w->convs.cap; i++)
        for (wk_conv *c = w->convs.tab[i], *n; c; c = n) {
            n = c->hnext;
            for (wk_turn *t = c->head, *tn; t; t = tn) {
                tn = t->next;
                wk_turn_free(t);
            }
            free(c->hist);
            free(c->last_toks);
            free(c->key);
            free(c);
        }
    w->convs.hist_bytes = 0;
    w->convs.idle_head = w->convs.idle_tail = NULL;
    w->convs.n_idle = 0;
    free(w->convs.tab);
    w->convs.tab = NULL;
    w->convs.cap = w->convs.n = 0;
}

/* ----------------------------------------------------------- partitions */

void wk_drop_stale(wk_worker *w, int all, int handoff) {
    int flushed = 0, n_conv = 0, n_failed = 0;
    for (size_t i = 0; i < w->convs.cap; i++)
        for (wk_conv *c = w->convs.tab[i], *n; c; c = n) {
            n = c->hnext;
            bool owned = c->partition < w->batch.n_parts && w->batch.owned[c->partition];
            if (!all && owned &&
                (!c->head || wk_batch_current(&w->batch, c->head->partition, c->head->gen)))
                continue;
            if (handoff && w->convs.handoff && c->last_toks) { /* the next owner starts warm */
                int nq = 0;
                if (kv_cache_flush_to_redis(w->eng.cache, c->ns, strlen(c->ns), c->last_toks,
                                            c->n_last, &nq) == 0) {
                    flushed += nq;
                    n_conv++;
                } else {
                    n_failed++; /* Redis down or slow: the next owner recomputes */
                }
            }
            for (wk_turn *t = c->head, *tn; t; t = tn) {
                tn = t->next;
                w->convs.inflight--;
                WK_ADD(w->met.ctr.dropped, 1);
                if (t == c->head && c->running) {
                    t->conv = NULL;
                    __atomic_store_n(&t->orphan, 1, __ATOMIC_RELEASE);
                    eng_sched_cancel(w->eng.sched, t->sched_id);
                } else {
                    wk_turn_free(t);
                }
            }
            wk_conv_remove(w, c);
        }
    if (flushed || n_failed) {
        int rc = flushed ? kv_cache_redis_drain(w->eng.cache, 2000) : 0;
        if (flushed && !rc) WK_ADD(w->met.ctr.handoff_blocks, (uint64_t)flushed);
        wk_log(n_failed ? "warn" : "info", "kv_handoff",
               "conversations=%d blocks=%d drained=%s failed_conversations=%d", n_conv, flushed,
               rc ? "no" : "yes", n_failed);
    }
    wk_batch_drop_stale(&w->batch);
}

/* --------------------------------------------------------- rebalancing */

static void wk_drain_done(wk_worker *w);

/* "0,2,5" of a partition list (truncated to fit; "-" when empty). */
static const char *wk_part_ids(const rd_kafka_topic_partition_list_t *l, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = 0;
    for (int i = 0; i < l->cnt && n + 12 < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, "%s%d", i ? "," : "", (int)l->elems[i].partition);
    if (!l->cnt) snprintf(buf, cap, "-");
    return buf;
}

void wk_rebalance_cb(rd_kafka_t *rk, rd_kafka_resp_err_t err,
                     rd_kafka_topic_partition_list_t *parts, void *opaque) {
    wk_worker *w = opaque;
    int coop = !strcmp(rd_kafka_rebalance_protocol(rk), "COOPERATIVE");
    if (err == RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS) {
        for (int i = 0; i < parts->cnt; i++) {
            wk_batch_assign(&w->batch, parts->elems[i].partition);
        }
        rd_kafka_error_t *e = coop ? rd_kafka_incremental_assign(rk, parts) : NULL;
        if (!coop) rd_kafka_assign(rk, parts);
        if (e) {
            wk_log("error", "assign_failed", "err=\"%s\"", rd_kafka_error_string(e));
            rd_kafka_error_destroy(e);
        }
        if (w->pause.paused || w->txn.recovering) rd_kafka_pause_partitions(rk, parts);
        WK_ADD(w->met.ctr.assigned, parts->cnt);
        char ids[256];
        wk_log("info", "assigned", "partitions=%d ids=%s", parts->cnt,
               wk_part_ids(parts, ids, sizeof ids));
        return;
    }
    int lost = rd_kafka_assignment_lost(rk);
    if (!lost) { /* finish what is done while we still own it */
        wk_drain_done(w);
        wk_txn_commit(w);
    }
    for (int i = 0; i < parts->cnt; i++) {
        wk_batch_revoke(&w->batch, parts->elems[i].partition);
    }
    wk_drop_stale(w, 0, 1);
    WK_ADD(w->met.ctr.assigned, -parts->cnt);
    /* librdkafka keeps a partition's pause flag across unassign and a
     * later assign, and wk_pause_all resumes only what is assigned: a
     * partition revoked or lost while paused would never be fetched again
     * once it came back (turns lost).  Clear the flag while it is ours. */
    int was_paused = w->pause.paused || w->txn.recovering;
    if (was_paused) rd_kafka_resume_partitions(rk, parts);
    if (coop) {
        rd_kafka_error_t *e = rd_kafka_incremental_unassign(rk, parts);
        if (e) rd_kafka_error_destroy(e);
    } else {
        rd_kafka_assign(rk, NULL);
    }
    char ids[256];
    wk_log("info", lost ? "lost" : "revoked", "partitions=%d ids=%s inflight=%lld paused=%d",
           parts->cnt, wk_part_ids(parts, ids, sizeof ids), (long long)w->convs.inflight,
           was_paused);
}

/* ---------------------------------------------------------------- loop */

static void wk_on_message(wk_worker *w, rd_kafka_message_t *m) {
    if (m->err) {
        if (m->err == RD_KAFKA_RESP_ERR_UNKNOWN_TOPIC_OR_PART ||
            m->err == RD_KAFKA_RESP_ERR__UNKNOWN_TOPIC)
            wk_kafka_topic_missing(w, m->rkt ? rd_kafka_topic_name(m->rkt) : w->topics.turns,
                                   rd_kafka_message_errstr(m));
        else if (m->err != RD_KAFKA_RESP_ERR__PARTITION_EOF)
            wk_log("warn", "consume_error", "err=\"%s\"", rd_kafka_message_errstr(m));
        wk_kafka_note_refusal(w, m->err, rd_kafka_message_errstr(m)); /* ACLs: stop */
        return;
    }
    uint32_t gen = 0;
    int cr = wk_batch_consume(&w->batch, m->partition, m->offset, &gen);
    if (cr == WK_CONSUME_NOT_OURS) return;
    if (cr == WK_CONSUME_SKIP) {
        wk_log("warn", "offset_skip", "partition=%d offset=%lld", (int)m->partition,
               (long long)m->offset);
        return;
    }
    WK_ADD(w->met.ctr.consumed, 1);
    int64_t t_in = eng_sched_now_us();
    wk_turn *t = NULL;
    wk_out *o = NULL;
    wk_record rec;
    wk_header hbuf[16], *hheap = NULL; /* the Kafka boundary: the turn path sees a wk_record */
    int rc = wk_record_from_kafka(m, &rec, hbuf, sizeof hbuf / sizeof hbuf[0], &hheap);
    if (!rc && wk_cancel_record_is(&rec)) { /* a CancelTurn (wk_cancel.c) */
        rc =
            wk_cancel_apply(w, &rec, gen, wk_conv_find(w, rec.partition, rec.key, rec.key_len), &o);
        if (!rc && !o) {
            free(hheap);
            return;
        }
    } else if (!rc) {
        const wk_conv *hc = wk_conv_find(w, rec.partition, rec.key, rec.key_len);
        rc = wk_turn_from_record(w, &rec, gen, hc ? hc->hist : NULL, &t, &o);
    }
    free(hheap);
    if (rc != 0) {
        w->halt.fatal = 1;
        snprintf(w->halt.fatal_msg, sizeof w->halt.fatal_msg, "out of memory");
        return;
    }
    if (o) { /* a DeadLetter (and the turn's error result chained after it), or a result */
        wk_batch_add(&w->batch, o, eng_sched_now_us());
        return;
    }
    if (wk_cancel_take(w, t)) return; /* its cancel came first: answered, never queued */
    wk_conv *c = wk_conv_get(w, t->partition, t->conv_id, strlen(t->conv_id));
    if (!c) {
        wk_turn_free(t);
        w->halt.fatal = 1;
        snprintf(w->halt.fatal_msg, sizeof w->halt.fatal_msg, "out of memory");
        return;
    }
    wk_idle_unlink(w, c);
    t->conv = c;
    t->tm.ready_us = t_in;
    if (c->tail) c->tail->next = t;
    else c->head = t;
    c->tail = t;
    w->convs.inflight++;
    if (!c->running) {
        c->running = 1;
        wk_turn_submit(t);
    }
}

/* Take finished turns from the scheduler side. */
static void wk_drain_done(wk_worker *w) {
    pthread_mutex_lock(&w->convs.mu);
    wk_turn *list = w->convs.done_head;
    w->convs.done_head = w->convs.done_tail = NULL;
    pthread_mutex_unlock(&w->convs.mu);
    for (wk_turn *t = list, *n; t; t = n) {
        n = t->dnext;
        wk_conv *c = t->conv;
        if (!c) { /* orphan: its partition was revoked */
            wk_turn_free(t);
            continue;
        }
        c->head = t->next;
        if (!c->head) c->tail = NULL;
        c->running = 0;
        w->convs.inflight--;
        if (t->final_toks) { /* remember the conversation's KV path */
            free(c->last_toks);
            c->last_toks = t->final_toks;
            c->n_last = t->n_final;
            t->final_toks = NULL;
            snprintf(c->ns, sizeof c->ns, "%s", t->ns);
        }
        if (t->hist) { /* the conversation's history is now this turn */
            if (c->hist) w->convs.hist_bytes -= c->hist->bytes;
            free(c->hist);
            c->hist = t->hist;
            t->hist = NULL;
            w->convs.hist_bytes += c->hist->bytes;
        }
        wk_out *o = wk_turn_take_out(t);
        if (o) {
            wk_batch_add(&w->batch, o, eng_sched_now_us());
        } else {
            wk_log("error", "result_lost", "turn_id=\"%.100s\"", t->turn_id);
            wk_offsets_done(w->batch.offs, t->partition, t->offset);
        }
        wk_turn_free(t);
        if (c->head) {
            c->running = 1;
            c->head->tm.ready_us = eng_sched_now_us(); /* it waited for its predecessor */
            wk_turn_submit(c->head);
        } else if ((w->convs.handoff && c->last_toks) || c->hist) {
            wk_idle_push(w, c);
            /* forget the least recently used idle conversations beyond the
             * count and worker.history_mib (this one last) */
            while (w->convs.idle_head != c &&
                   (w->convs.n_idle > WK_MAX_IDLE || w->convs.hist_bytes > w->convs.hist_max))
                wk_conv_remove(w, w->convs.idle_head);
        } else {
            wk_conv_remove(w, c);
        }
    }
}

/* Refresh the per-partition lag gauge from librdkafka's cached high
 * watermarks (no network round trip). */
static void wk_lag_update(wk_worker *w) {
    pthread_mutex_lock(&w->met.lag_mu);
    if (w->met.n_lag < w->batch.n_parts) {
        int64_t *l = realloc(w->met.lag, (size_t)w->batch.n_parts * sizeof *l);
        if (!l) {
            pthread_mutex_unlock(&w->met.lag_mu);
            return;
        }
        w->met.lag = l;
        w->met.n_lag = w->batch.n_parts;
    }
    for (int32_t p = 0; p < w->met.n_lag; p++) {
        int64_t lo = -1, hi = -1;
        int64_t pos = wk_batch_commit_position(&w->batch, p);
        w->met.lag[p] = -1;
        if (pos >= 0 &&
            rd_kafka_get_watermark_offsets(w->cons, w->topics.turns, p, &lo, &hi) ==
                RD_KAFKA_RESP_ERR_NO_ERROR &&
            hi >= pos)
            w->met.lag[p] = hi - pos;
    }
    pthread_mutex_unlock(&w->met.lag_mu);
}

static int wk_cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The shutdown summary: counts, turns/s over the run, and where a served
 * turn's time went (means; exact median overhead over the latest
 * WK_OVH_RING turns). */
static void wk_log_summary(wk_worker *w, int64_t run_us) {
    const wk_counters *c = &w->met.ctr;
    size_t n = c->ovh_n < WK_OVH_RING ? (size_t)c->ovh_n : WK_OVH_RING;
    double med = 0, k = c->ovh_n ? 1000.0 * (double)c->ovh_n : 1;
    if (n) {
        qsort(w->met.ovh_ring, n, sizeof w->met.ovh_ring[0], wk_cmp_float);
        med = n % 2 ? w->met.ovh_ring[n / 2]
                    : (w->met.ovh_ring[n / 2 - 1] + w->met.ovh_ring[n / 2]) / 2.0;
    }
    wk_log(
        "info", "stopped",
        "results=%llu dlq=%llu commits=%llu aborts=%llu producer_rebuilds=%llu "
        "chunk_rebuilds=%llu pauses=%llu pauses_kv=%llu run_s=%.1f turns_per_s=%.2f overhead_turns=%llu "
        "overhead_p50_ms=%.2f overhead_mean_ms=%.2f pre_mean_ms=%.2f sched_queue_mean_ms=%.2f "
        "engine_mean_ms=%.2f post_mean_ms=%.2f",
        (unsigned long long)c->turns_done, (unsigned long long)c->dlq,
        (unsigned long long)c->txn_commits, (unsigned long long)c->txn_aborts,
        (unsigned long long)c->producer_rebuilds, (unsigned long long)c->chunk_rebuilds,
        (unsigned long long)c->pauses, (unsigned long long)c->pauses_kv, (double)run_us / 1e6,
        run_us > 0 ? (double)c->turns_done * 1e6 / (double)run_us : 0.0,
        (unsigned long long)c->ovh_n, med, (double)c->ovh_sum_us / k, (double)c->pre_sum_us / k,
        (double)c->squeue_sum_us / k, (double)c->engine_sum_us / k, (double)c->post_sum_us / k);
}

/* Set (q) or clear (NULL) the queue finished turns yield (wk_convs.wake),
 * destroying the reference held before. */
static void wk_wake_set(wk_worker *w, rd_kafka_queue_t *q) {
    pthread_mutex_lock(&w->convs.mu);
    rd_kafka_queue_t *old = w->convs.wake;
    w->convs.wake = q;
    pthread_mutex_unlock(&w->convs.mu);
    if (old) rd_kafka_queue_destroy(old);
}

int wk_worker_run(wk_worker *w, char *err, size_t errlen) {
    const cm_config *cfg = w->cfg;
    int64_t iv_us = cm_config_int(cfg, "worker.txn_interval_ms") * 1000;
    int64_t hz_us = cm_config_int(cfg, "worker.txn_horizon_ms") * 1000;
    int recheck = 0; /* poll for 1 ms only: the early commit looks again */
    int max_rec = (int)cm_config_int(cfg, "worker.txn_max_records");
    int64_t max_inflight = cm_config_int(cfg, "worker.max_inflight");
    int64_t grace_us = cm_config_int(cfg, "worker.grace_ms") * 1000;
    int64_t stop_at = 0, last_log = eng_sched_now_us(), last_lag = 0, t0 = last_log;
    w->pause.kv_hi = cm_config_int(cfg, "worker.pause_kv_pct") * 10;
    w->pause.kv_lo = cm_config_int(cfg, "worker.resume_kv_pct") * 10;
    wk_wake_set(w, rd_kafka_queue_get_consumer(w->cons));
    w->met.stall_us = cm_config_int(cfg, "worker.stall_ms") * 1000;
    while (!w->halt.fatal) {
        int64_t now = eng_sched_now_us();
        __atomic_store_n(&w->met.loop_beat_us, now, __ATOMIC_RELEASE); /* /healthz */
        if (__atomic_load_n(&w->halt.refused, __ATOMIC_ACQUIRE)) {
            /* stop now, commit nothing: what was consumed is read again */
            w->halt.fatal = 1;
            snprintf(w->halt.fatal_msg, sizeof w->halt.fatal_msg, "%s", w->halt.refused_msg);
            break;
        }
        if (w->halt.stop_req && !stop_at) {
            stop_at = now + grace_us;
            wk_pause_all(w, 1);
            wk_log("info", "shutdown", "inflight=%lld grace_ms=%lld", (long long)w->convs.inflight,
                   (long long)(grace_us / 1000));
        }
        if (stop_at && (w->halt.stop_fast || now >= stop_at) && w->convs.inflight) {
            wk_log("warn", "shutdown_cancel", "inflight=%lld", (long long)w->convs.inflight);
            wk_drop_stale(w, 1, 1);
        }
        if (stop_at && !w->convs.inflight) break;
        if (w->txn.recovering && !stop_at) wk_txn_recover_step(w);
        if (w->halt.fatal) break;
        /* a finished turn ends the wait (wk_convs.wake) */
        int poll_ms = recheck ? 1 : w->convs.inflight ? 5 : 20;
        rd_kafka_message_t *m = rd_kafka_consumer_poll(w->cons, poll_ms);
        if (m) { /* served while recovering too: the rebuild keeps all work */
            if (!stop_at) wk_on_message(w, m);
            rd_kafka_message_destroy(m);
        }
        pthread_mutex_lock(&w->prod.chp_mu);
        rd_kafka_poll(w->prod.chp, 0);
        pthread_mutex_unlock(&w->prod.chp_mu);
        if (w->prod.txp) rd_kafka_poll(w->prod.txp, 0);
        wk_drain_done(w);
        __atomic_store_n(&w->met.ctr.inflight, w->convs.inflight, __ATOMIC_RELAXED);
        now = eng_sched_now_us();
        /* The early commit: nothing else due within the horizon or the
         * scheduler's step time, whichever is longer (a turn ending in the
         * step under way is due: while steps end turns, they batch). */
        int64_t step_us = 0, next = INT64_MAX;
        bool early = false;
        if (hz_us && w->batch.n && !w->txn.recovering) {
            next = eng_sched_next_finish_us(w->eng.sched, &step_us);
            early = wk_batch_commit_early(&w->batch, now, hz_us > step_us ? hz_us : step_us, next);
        }
        if (early || wk_batch_due(&w->batch, now, max_rec, iv_us)) wk_txn_commit(w);
        /* a completion being delivered (next 0) is on the done list within
         * moments: look again in a millisecond rather than five */
        recheck = next == 0 && w->batch.n;
        if (!stop_at) wk_backpressure(w, max_inflight);
        if (now - last_lag >= 1000000) {
            last_lag = now;
            wk_lag_update(w);
        }
        if (now - last_log >= 10000000) {
            last_log = now;
            wk_log(
                "info", "stats",
                "consumed=%llu results=%llu dlq=%llu chunks=%llu inflight=%lld "
                "commits=%llu aborts=%llu prompt_tokens=%llu cached_tokens=%llu",
                (unsigned long long)w->met.ctr.consumed, (unsigned long long)w->met.ctr.turns_done,
                (unsigned long long)w->met.ctr.dlq,
                (unsigned long long)__atomic_load_n(&w->met.ctr.chunks, __ATOMIC_RELAXED),
                (long long)w->convs.inflight, (unsigned long long)w->met.ctr.txn_commits,
                (unsigned long long)w->met.ctr.txn_aborts,
                (unsigned long long)__atomic_load_n(&w->met.ctr.prompt_tokens, __ATOMIC_RELAXED),
                (unsigned long long)__atomic_load_n(&w->met.ctr.cached_tokens, __ATOMIC_RELAXED));
        }
    }
    if (!w->halt.fatal)
        for (int tries = 0; tries < 3 && w->batch.n; tries++) wk_txn_commit(w);
    wk_wake_set(w, NULL);
    if (w->halt.fatal) {
        int code = __atomic_load_n(&w->halt.refused, __ATOMIC_ACQUIRE) ? WK_EREFUSED : WK_EKAFKA;
        return pl_errf(err, errlen, code, "%s", w->halt.fatal_msg);
    }
    rd_kafka_consumer_close(w->cons);
    rd_kafka_destroy(w->cons);
    w->cons = NULL;
    if (w->eng.cache) kv_cache_redis_drain(w->eng.cache, 2000);
    wk_log_summary(w, eng_sched_now_us() - t0);
    return 0;
}
