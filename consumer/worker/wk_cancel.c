/*
 * wk_cancel.c -- CancelTurn records (spec 1.4, schemas/README.md section
 * 7a): a client that no longer wants a turn stops it, and the compute it
 * would have cost is freed.
 *
 * A cancel comes on the turns topic with the turn's key, so this worker
 * owns the turn's partition and reads the cancel after the turn when one
 * producer sent both.  What it finds in the conversation's queue:
 *   - the running head: the engine cancels it at its next step
 *     (eng_sched_cancel: KV blocks and the batch slot released) and
 *     wk_on_done builds its one TurnResult, `cancelled`, with the tokens
 *     generated so far (wk_gen.c);
 *   - a queued turn (waiting for its predecessor): it never runs; its
 *     TurnResult, `cancelled` with nothing generated, joins the batch now;
 *   - nothing (the turn already answered, or not consumed yet): remembered
 *     in a small ring (WK_CANCEL_MEMO entries, WK_CANCEL_TTL_MS), so a turn
 *     consumed later under that (partition, conversation, turn id) is
 *     answered `cancelled` without running.  An entry for a turn that had
 *     already finished is never used and ages out: that cancel is ignored.
 * Exactly-once: a cancel writes no output of its own; its offset is marked
 * finished at once and committed with the next transaction of its
 * partition, after every lower offset (its turn's included) has its output.
 * A cancel replayed after a crash finds its turn answered (or redone and
 * cancelled again): every turn keeps exactly one committed TurnResult.
 * Poll thread only.
 */
#include <stdlib.h>
#include <string.h>

#include "wk_internal.h"
#include "wk_offsets.h"

#define WK_CANCEL_MEMO 1024     /* cancels remembered for turns not seen yet */
#define WK_CANCEL_TTL_MS 120000 /* how long one is remembered */

/* One remembered cancel. */
typedef struct wk_cancel_entry {
    int32_t partition; /* the cancel's partition */
    char *conv_id;     /* conversation id (malloc'd; NULL = free slot) */
    char *turn_id;     /* turn id (malloc'd) */
    int64_t until_us;  /* eng_sched_now_us after which it is forgotten */
} wk_cancel_entry;

struct wk_cancel_memo {
    wk_cancel_entry e[WK_CANCEL_MEMO]; /* ring */
    size_t next;                       /* slot the next entry overwrites */
};

static void wk_cancel_entry_clear(wk_cancel_entry *e) {
    free(e->conv_id);
    free(e->turn_id);
    memset(e, 0, sizeof *e);
}

void wk_cancel_free(wk_worker *w) {
    struct wk_cancel_memo *m = w->convs.memo;
    if (!m) return;
    for (size_t i = 0; i < WK_CANCEL_MEMO; i++) wk_cancel_entry_clear(&m->e[i]);
    free(m);
    w->convs.memo = NULL;
}

bool wk_cancel_record_is(const wk_record *rec) {
    const wk_header *h = wk_record_header(rec, SCH_HEADER_CONTENT_TYPE);
    return h && h->value && sch_content_type_cancel(h->value, h->size);
}

/* Remember k for a turn not seen yet (the oldest entry makes room). */
static int wk_cancel_remember(wk_worker *w, int32_t partition, const sch_cancel *k) {
    struct wk_cancel_memo *m = w->convs.memo;
    if (!m && !(m = w->convs.memo = calloc(1, sizeof *m))) return SCH_E_NOMEM;
    wk_cancel_entry *e = &m->e[m->next];
    wk_cancel_entry_clear(e);
    if (!(e->conv_id = strdup(k->conversation_id.ptr)) || !(e->turn_id = strdup(k->turn_id.ptr))) {
        wk_cancel_entry_clear(e);
        return SCH_E_NOMEM;
    }
    e->partition = partition;
    e->until_us = eng_sched_now_us() + (int64_t)WK_CANCEL_TTL_MS * 1000;
    m->next = (m->next + 1) % WK_CANCEL_MEMO;
    return 0;
}

/* Answer t (out of every queue) cancelled without running it. */
static void wk_cancel_answer(wk_worker *w, wk_turn *t) {
    wk_turn_cancel_unrun(t);
    wk_out *o = wk_turn_take_out(t);
    if (o) {
        wk_batch_add(&w->batch, o, eng_sched_now_us());
    } else {
        wk_log("error", "result_lost", "turn_id=\"%.100s\"", t->turn_id);
        wk_offsets_done(w->batch.offs, t->partition, t->offset);
    }
    wk_turn_free(t);
}

bool wk_cancel_take(wk_worker *w, wk_turn *t) {
    struct wk_cancel_memo *m = w->convs.memo;
    if (!m) return false;
    int64_t now = eng_sched_now_us();
    for (size_t i = 0; i < WK_CANCEL_MEMO; i++) {
        wk_cancel_entry *e = &m->e[i];
        if (!e->conv_id) continue;
        if (now > e->until_us) {
            wk_cancel_entry_clear(e);
            continue;
        }
        if (e->partition != t->partition || strcmp(e->conv_id, t->conv_id) ||
            strcmp(e->turn_id, t->turn_id))
            continue;
        wk_cancel_entry_clear(e);
        wk_log("info", "cancel_early", "turn_id=\"%.100s\"", t->turn_id);
        wk_cancel_answer(w, t);
        return true;
    }
    return false;
}

/* The turn of c named by k (*prev: the one before it in the queue). */
static wk_turn *wk_cancel_find(wk_conv *c, const sch_cancel *k, wk_turn **prev) {
    *prev = NULL;
    for (wk_turn *t = c ? c->head : NULL; t; *prev = t, t = t->next)
        if (strlen(t->turn_id) == k->turn_id.len &&
            !memcmp(t->turn_id, k->turn_id.ptr, k->turn_id.len))
            return t;
    return NULL;
}

int wk_cancel_apply(wk_worker *w, const wk_record *rec, uint32_t gen, wk_conv *c, wk_out **out) {
    char msg[512], tp[WK_TRACEPARENT_MAX] = "";
    sch_cancel k;
    int rc = 0;
    *out = NULL;
    WK_ADD(w->met.ctr.cancels, 1);
    const wk_header *h = wk_record_header(rec, SCH_HEADER_TRACEPARENT);
    if (h && h->value && h->size < sizeof tp && sch_traceparent_check(h->value, h->size) == 0) {
        memcpy(tp, h->value, h->size);
        tp[h->size] = 0;
    }
    int code = sch_cancel_decode(rec->value, rec->len, &w->eng.lim, &k, msg, sizeof msg);
    if (!code && (!rec->key || rec->key_len != k.conversation_id.len ||
                  memcmp(rec->key, k.conversation_id.ptr, rec->key_len))) {
        snprintf(msg, sizeof msg, "record key differs from conversation_id");
        code = SCH_E_KEY_MISMATCH;
    }
    if (code) { /* a DeadLetter, and no TurnResult: a cancel answers no turn itself */
        sch_cancel_free(&k);
        *out = wk_dead(w, rec, gen, tp, code, msg, NULL);
        return *out ? 0 : SCH_E_NOMEM;
    }
    wk_turn *prev, *t = wk_cancel_find(c, &k, &prev);
    if (t && t == c->head && c->running) {
        /* running (or waiting in the engine): it ends at the next step */
        if (__atomic_exchange_n(&t->cancel_req, 1, __ATOMIC_ACQ_REL) ||
            eng_sched_cancel(w->eng.sched, t->sched_id) != 0) {
            WK_ADD(w->met.ctr.cancels_ignored, 1); /* asked twice, or already finishing */
            wk_log("info", "cancel_ignored", "turn_id=\"%.100s\" why=finishing", t->turn_id);
        } else {
            wk_log("info", "cancel", "turn_id=\"%.100s\" state=running", t->turn_id);
        }
    } else if (t) { /* queued behind its conversation's running turn */
        prev->next = t->next;
        if (c->tail == t) c->tail = prev;
        t->next = NULL;
        w->convs.inflight--;
        wk_log("info", "cancel", "turn_id=\"%.100s\" state=queued", t->turn_id);
        wk_cancel_answer(w, t);
    } else { /* answered already, or still to come */
        WK_ADD(w->met.ctr.cancels_ignored, 1);
        wk_log("info", "cancel_ignored", "turn_id=\"%.100s\" why=not_in_flight", k.turn_id.ptr);
        rc = wk_cancel_remember(w, rec->partition, &k);
    }
    sch_cancel_free(&k);
    wk_offsets_done(w->batch.offs, rec->partition, rec->offset);
    return rc;
}
