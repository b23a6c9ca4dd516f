/*
 * sched_class.c -- service classes in the scheduler (eng_sched.h "Service
 * classes"): parking running bulk sequences, with their KV, for waiting
 * interactive ones; resuming parked sequences; the bulk share of steps
 * that keeps bulk from starving.  Loop thread only, except the counters
 * (under s->mu).
 */
#include <stdlib.h>

#include "sched_int.h"

/* EMA weight of one step in the bulk share. */
#define SCHED_SHARE_W (1.0 / 16.0)

/* 1 when a sequence of class c is parked, or ready and waiting. */
static int class_pending(const eng_sched *s, int c, int waiting_only) {
    if (!waiting_only)
        for (const sched_req *r = s->parked; r; r = r->next)
            if (r->cls == c) return 1;
    for (const sched_req *r = s->waiting; r; r = r->next)
        if (r->cls == c && r->ready) return 1;
    return 0;
}

/* 1 when a running sequence is of class c. */
static int class_running(const eng_sched *s, int c) {
    for (const sched_req *r = s->running; r; r = r->next)
        if (r->cls == c) return 1;
    return 0;
}

/* 1 while bulk is below its minimum share of steps: nothing bulk is parked. */
static int bulk_protected(const eng_sched *s) {
    return s->cfg.bulk_min_share > 0 && s->bulk_share < s->cfg.bulk_min_share;
}

int sched_class_bulk_decode_cap(eng_sched *s, int *nb) {
    int cap = s->cfg.bulk_decode_seqs;
    *nb = 0;
    if (cap <= 0 || sched_class_bulk_first(s) ||
        (!class_running(s, ENG_SCHED_INTERACTIVE) && !class_pending(s, ENG_SCHED_INTERACTIVE, 0)))
        return -1;
    for (const sched_req *r = s->running; r; r = r->next)
        *nb += r->cls == ENG_SCHED_BULK && r->n_toks - r->kv.n_tokens == 1;
    if (*nb <= cap) return -1;
    int first = (int)(s->bulk_turn % (unsigned)*nb);
    s->bulk_turn += (unsigned)cap;
    return first;
}

int sched_class_bulk_first(const eng_sched *s) {
    return bulk_protected(s) && !class_running(s, ENG_SCHED_BULK) &&
           class_pending(s, ENG_SCHED_BULK, 0);
}

/* The youngest running sequence of class c that can leave the batch (not
 * one with choices still to fork: they need their slots at once). */
static sched_req *youngest_of(const eng_sched *s, int c) {
    sched_req *y = NULL;
    for (sched_req *r = s->running; r; r = r->next)
        if (r->cls == c && r->n_fork == 0 && (!y || r->run_seq > y->run_seq)) y = r;
    return y;
}

/* Take r out of the batch, keeping everything it holds. */
static void sched_park(eng_sched *s, sched_req *r) {
    sched_list_remove(&s->running, r);
    r->state = SCHED_PARKED;
    r->preemptions++;
    sched_list_append(&s->parked, r);
    pthread_mutex_lock(&s->mu);
    s->st.class_preemptions++;
    pthread_mutex_unlock(&s->mu);
}

void sched_class_balance(eng_sched *s) {
    if (!s->running) return;
    int free_slots = s->cfg.max_running - sched_list_len(s->running);
    if (sched_class_bulk_first(s)) {
        /* bulk starved: make it one slot, from the youngest interactive */
        sched_req *v = free_slots > 0 ? NULL : youngest_of(s, ENG_SCHED_INTERACTIVE);
        if (v) sched_park(s, v);
        return;
    }
    if (!s->cfg.class_preempt || bulk_protected(s)) return;
    int need = -free_slots;
    for (const sched_req *r = s->waiting; r; r = r->next)
        if (r->cls == ENG_SCHED_INTERACTIVE && r->ready) need += 1 + r->n_fork;
    for (const sched_req *r = s->parked; r; r = r->next) need += r->cls == ENG_SCHED_INTERACTIVE;
    for (sched_req *v; need > 0 && (v = youngest_of(s, ENG_SCHED_BULK)) != NULL; need--)
        sched_park(s, v);
}

int sched_class_resume(eng_sched *s, int *n_run) {
    if (!s->parked) return 0;
    int bulk_first = sched_class_bulk_first(s);
    int bulk_ok = bulk_first || !class_pending(s, ENG_SCHED_INTERACTIVE, 1);
    int order[2] = {ENG_SCHED_INTERACTIVE, ENG_SCHED_BULK}, resumed = 0;
    if (bulk_first) order[0] = order[1] = ENG_SCHED_BULK; /* the slot is bulk's */
    for (int pass = 0; pass < 2; pass++) {
        if (order[pass] == ENG_SCHED_BULK && !bulk_ok) break;
        if (pass && order[1] == order[0]) break;
        sched_req *r = s->parked;
        while (r && *n_run < s->cfg.max_running) {
            sched_req *next = r->next;
            if (r->cls == order[pass]) {
                sched_list_remove(&s->parked, r);
                r->state = SCHED_RUNNING;
                r->run_seq = ++s->run_counter;
                sched_list_append(&s->running, r);
                (*n_run)++;
                resumed++;
            }
            r = next;
        }
    }
    if (resumed) {
        pthread_mutex_lock(&s->mu);
        s->st.resumes += (uint64_t)resumed;
        pthread_mutex_unlock(&s->mu);
    }
    return resumed;
}

void sched_class_step(eng_sched *s, int n) {
    int has_bulk = 0;
    for (int i = 0; i < n && !has_bulk; i++) has_bulk = s->step_req[i]->cls == ENG_SCHED_BULK;
    /* the share counts only steps where bulk had work to do */
    if (has_bulk || class_pending(s, ENG_SCHED_BULK, 0))
        s->bulk_share += ((has_bulk ? 1.0 : 0.0) - s->bulk_share) * SCHED_SHARE_W;
    if (!has_bulk) return;
    pthread_mutex_lock(&s->mu);
    s->st.bulk_steps++;
    pthread_mutex_unlock(&s->mu);
}
