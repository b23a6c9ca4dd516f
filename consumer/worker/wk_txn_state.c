/*
 * wk_txn_state.c -- the transaction's state logic without a Kafka call:
 * whether a fatal producer error stops the worker or starts a rebuild, and
 * the stages of that rebuild (WK_REC_*).  wk_txn.c makes the Kafka calls
 * and drives these; tests/worker/test_wk_batch.c drives them without a
 * broker.
 */
#include "wk_internal.h"

bool wk_txn_fence_stops(int fenced, int64_t txn_age_us, int64_t txn_timeout_us) {
    return fenced && txn_age_us < txn_timeout_us;
}

void wk_txn_state_rebuild(wk_txn_state *t, int64_t now_us) {
    t->recovering = WK_REC_PRODUCER;
    t->rec_since_us = now_us;
    t->abort_pending = 0;
    t->after_abort = 0;
    t->begin_us = 0;
}

int wk_txn_rec_next(int stage, wk_step outcome) {
    if (stage != WK_REC_PRODUCER && stage != WK_REC_INIT && stage != WK_REC_RECONCILE)
        return stage; /* not recovering */
    switch (outcome) {
    case WK_STEP_OK:
        return stage == WK_REC_PRODUCER ? WK_REC_INIT : stage == WK_REC_INIT ? WK_REC_RECONCILE : 0;
    case WK_STEP_WAIT: return stage;
    case WK_STEP_RESTART: return WK_REC_PRODUCER;
    case WK_STEP_FATAL:
    default: return -1;
    }
}
