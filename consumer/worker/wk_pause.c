/*
 * wk_pause.c -- every pause and resume of the worker's partitions in one
 * place: backpressure (in-flight turns and KV memory above their marks,
 * wk_backpressure from the loop), a producer rebuild (wk_pause_rebuild from
 * wk_txn.c) and shutdown (the loop).  librdkafka keeps a pause flag per
 * partition; the worker keeps why it paused (w->pause.why: backpressure
 * reasons) and whether it is paused (w->pause.paused), and a rebuild's end
 * resumes only when no backpressure reason holds.  Poll thread only, but
 * for wk_test_hold_trigger (a test hook; any thread).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "wk_internal.h"

void wk_pause_all(wk_worker *w, int pause) {
    rd_kafka_topic_partition_list_t *a = NULL;
    if (rd_kafka_assignment(w->cons, &a) != RD_KAFKA_RESP_ERR_NO_ERROR) return;
    if (pause) rd_kafka_pause_partitions(w->cons, a);
    else rd_kafka_resume_partitions(w->cons, a);
    rd_kafka_topic_partition_list_destroy(a);
    w->pause.paused = pause != 0;
}

/* KV blocks held by running sequences, per mille of the pool (the larger
 * of the two block kinds).  Cached blocks nobody runs on are evictable and
 * do not count: a full prefix cache is not memory pressure. */
static int64_t wk_kv_permille(wk_worker *w) {
    eng_sched_stats st;
    eng_sched_stats_get(w->eng.sched, &st);
    int64_t pm = 0;
    for (int k = 0; k < 2; k++)
        if (st.blocks_total[k] > 0) {
            int64_t v = (int64_t)st.blocks_held[k] * 1000 / st.blocks_total[k];
            if (v > pm) pm = v;
        }
    return pm;
}

/* PARLEY_TEST_ENGINE_HOLD=TRIGGER:PATH (tests only).  A test that must see
 * the worker in a state a fast or loaded machine would pass through too
 * quickly (the KV pool full; a turn part-way through its generation)
 * holds it there: from the moment TRIGGER happens while PATH exists, no
 * engine step runs (eng_sched_hold) until the test removes PATH.
 * TRIGGER is kv_pause (the worker pauses its partitions for KV memory; the
 * hold is set in the same poll-loop pass, so the pool stays as full as it
 * was, give or take the step in progress) or chunk (a non-final chunk of a
 * turn is produced, or a non-streaming turn reaches where one would be
 * cut; when PATH holds a number N, only a chunk whose choice
 * has reached N tokens: a test that closes its stream after N tokens).
 * The pause and resume stay the marks' own. */
int wk_test_hold_parse(wk_worker *w, const char *spec) {
    const char *colon = strchr(spec, ':');
    if (!colon || !colon[1] || strlen(colon + 1) >= sizeof w->thold.path) return -1;
    size_t n = (size_t)(colon - spec);
    if (n == 8 && !strncmp(spec, "kv_pause", n)) w->thold.trigger = WK_HOLD_KV_PAUSE;
    else if (n == 5 && !strncmp(spec, "chunk", n)) w->thold.trigger = WK_HOLD_CHUNK;
    else return -1;
    snprintf(w->thold.path, sizeof w->thold.path, "%s", colon + 1);
    return 0;
}

void wk_test_hold_trigger(wk_worker *w, int trigger, int n_toks) {
    if (w->thold.trigger != trigger || __atomic_load_n(&w->thold.held, __ATOMIC_ACQUIRE)) return;
    FILE *f = fopen(w->thold.path, "r");
    if (!f) return;
    long at = 0; /* the file may name the tokens a chunk's choice must have reached */
    if (fscanf(f, "%ld", &at) != 1) at = 0;
    fclose(f);
    if (n_toks < at) return;
    if (__atomic_exchange_n(&w->thold.held, 1, __ATOMIC_ACQ_REL)) return;
    eng_sched_hold(w->eng.sched, 1);
    wk_log("info", "test_engine_hold", "held=1");
}

void wk_test_hold_poll(wk_worker *w) {
    if (!__atomic_load_n(&w->thold.held, __ATOMIC_ACQUIRE) || access(w->thold.path, F_OK) == 0)
        return;
    eng_sched_hold(w->eng.sched, 0);
    __atomic_store_n(&w->thold.held, 0, __ATOMIC_RELEASE);
    wk_log("info", "test_engine_hold", "held=0");
}

/* Backpressure: pause every partition while in-flight turns or KV memory
 * are above their marks, resume when both are back below the low marks
 * (half of worker.max_inflight; worker.resume_kv_pct). */
void wk_backpressure(wk_worker *w, int64_t max_inflight) {
    int why = w->pause.why;
    if (w->convs.inflight >= max_inflight) why |= WK_PAUSE_INFLIGHT;
    else if (w->convs.inflight <= max_inflight / 2) why &= ~WK_PAUSE_INFLIGHT;
    int64_t pm = wk_kv_permille(w);
    __atomic_store_n(&w->met.ctr.kv_permille, pm, __ATOMIC_RELAXED);
    if (w->pause.kv_hi > 0) {
        if (pm >= w->pause.kv_hi) why |= WK_PAUSE_KV;
        else if (pm <= w->pause.kv_lo) why &= ~WK_PAUSE_KV;
    }
    if (why && !w->pause.why) {
        WK_ADD(w->met.ctr.pauses, 1);
        if (why & WK_PAUSE_KV) WK_ADD(w->met.ctr.pauses_kv, 1);
        wk_log("info", "pause", "reason=%s inflight=%lld kv_permille=%lld",
               why & WK_PAUSE_KV ? "kv_memory" : "inflight", (long long)w->convs.inflight,
               (long long)w->met.ctr.kv_permille);
    } else if ((why & WK_PAUSE_KV) && !(w->pause.why & WK_PAUSE_KV)) {
        WK_ADD(w->met.ctr.pauses_kv, 1);
    }
    if (why & WK_PAUSE_KV) wk_test_hold_trigger(w, WK_HOLD_KV_PAUSE, 0);
    wk_test_hold_poll(w);
    w->pause.why = why;
    __atomic_store_n(&w->met.ctr.pause_why, (int64_t)why, __ATOMIC_RELAXED);
    if (!w->txn.recovering && (why != 0) != w->pause.paused) wk_pause_all(w, why != 0);
}

void wk_pause_rebuild(wk_worker *w, int on) {
    if (on) wk_pause_all(w, 1);
    else if (!w->pause.why) wk_pause_all(w, 0); /* backpressure may still hold it */
}
