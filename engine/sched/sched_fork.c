/*
 * sched_fork.c -- the choices of an n > 1 request (eng_sched.h "Several
 * choices"): their seeds, and the fork of a prefilled request into its
 * other choices (the group that collects how each ended is in
 * sched_req.c, where requests end).
 *
 * A request with n choices runs as one sequence (choice 0) until its
 * prompt's last logits arrive.  Then, before choice 0 samples, each other
 * choice becomes a sequence of its own: a copy of the request (prompt
 * tokens, limits, callbacks), a sampler seeded eng_sched_choice_seed, a
 * clone of the constraint in its start state (with the first mask, which
 * the fork waits for), the logits row copied, and the KV forked
 * (eng_kvseq_fork: full blocks shared, the partial one copied).  It joins
 * the running list, and the loop samples its first token from those
 * logits at once (sched_loop.c's sched_sample).
 * Should the allocator have no block for the partial copy, the choice
 * goes to the waiting list instead and recomputes its prompt when admitted
 * (its first token is then the same: the forward pass does not depend on
 * batching).  A choice that cannot be made at all (no memory) ends with
 * finish reason error.  Every choice is added to the live list, so
 * cancel, stop and deadlines reach it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"

/* The sampler seed of choice `choice` (eng_sched.h). */
uint64_t eng_sched_choice_seed(uint64_t seed, int choice) {
    if (choice <= 0) return seed;
    uint64_t z = seed + (uint64_t)choice * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Choice c of parent r as a new sequence (not yet in any list): every
 * field but the KV, logits and constraint.  NULL without memory. */
static sched_req *fork_copy(eng_sched *s, const sched_req *r, int c) {
    sched_req *q = calloc(1, sizeof *q);
    if (!q) return NULL;
    q->id = r->id;
    q->state = SCHED_RUNNING;
    q->stop_keep = -1;
    q->cap_toks = r->cap_toks;
    q->toks = malloc((size_t)q->cap_toks * sizeof *q->toks);
    q->n_toks = q->n_prompt = r->n_prompt;
    q->max_tokens = r->max_tokens;
    q->sp = r->sp;
    q->sp.seed = eng_sched_choice_seed(r->sp.seed, c);
    memcpy(q->ns, r->ns, r->ns_len);
    q->ns_len = r->ns_len;
    q->deadline_us = r->deadline_us;
    q->cls = r->cls;
    q->submit_us = r->submit_us;
    q->admit_us = r->admit_us;
    q->admit_seq = r->admit_seq;
    q->ticket = -1;
    q->ready = 1;
    q->cached_tokens = r->cached_tokens;
    q->want_logits = r->want_logits;
    q->on_token = r->on_token;
    q->on_done = r->on_done;
    q->user = r->user;
    q->choice = c;
    q->grp = r->grp;
    q->logprobs = r->logprobs;
    if (q->toks) memcpy(q->toks, r->toks, (size_t)r->n_prompt * sizeof *q->toks);
    if (r->lp) {
        int pos = (s->cfg.speculative != ENG_SCHED_SPEC_OFF ? s->cfg.spec_tokens : 0) + 1;
        q->lp = malloc((size_t)pos * sizeof *q->lp);
        if (q->lp) memcpy(q->lp, r->lp, (size_t)pos * sizeof *q->lp);
    }
    if (!q->toks || (r->lp && !q->lp) ||
        eng_sampler_new(&q->sp, s->n_vocab, &q->sampler, NULL, 0) != 0) {
        free(q->toks);
        free(q->lp);
        free(q);
        return NULL;
    }
    return q;
}

int sched_fork(eng_sched *s, sched_req *r, sched_req **made) {
    int first = r->grp->n - r->n_fork;
    if (r->cons && eng_constraint_busy(r->cons)) { /* its start state's mask, for the clones */
        const uint32_t *const *m;
        int nm;
        int64_t waited = 0;
        (void)eng_constraint_wait(r->cons, &m, &nm, &waited, NULL, 0);
        pthread_mutex_lock(&s->mu);
        s->st.mask_wait_ms += (double)waited / 1000.0;
        pthread_mutex_unlock(&s->mu);
    }
    int n_made = 0;
    for (int c = first; c < r->grp->n; c++) {
        char err[PL_ERR_LEN] = "sched: out of memory for a choice";
        sched_req *q = fork_copy(s, r, c);
        if (!q) { /* record it ended; the group needs every choice's end */
            sched_group *g = r->grp;
            g->res[c].finish = ENG_SCHED_ERROR;
            snprintf(g->err[c], PL_ERR_LEN, "%s", err);
            g->res[c].error = g->err[c];
            g->n_done++;
            continue;
        }
        pthread_mutex_lock(&s->mu);
        q->live_next = s->live;
        s->live = q;
        s->n_live++;
        pthread_mutex_unlock(&s->mu);
        if (r->cons && eng_constraint_clone(r->cons, &q->cons, err, sizeof err) != 0) {
            sched_end_running(s, q, ENG_SCHED_ERROR, err); /* in no list: just ends */
            continue;
        }
        int shared = 0;
        q->logits = malloc((size_t)s->n_vocab * sizeof(float));
        int kv_ok = q->logits && eng_kvseq_init(&q->kv, s->layout, &s->alloc, NULL, 0) == 0;
        if (kv_ok) {
            q->kv_live = 1;
            kv_ok = eng_kvseq_fork(&q->kv, &r->kv, &shared) == 0;
        }
        if (!kv_ok) { /* no block for the copy: recompute the prompt later */
            if (q->kv_live) eng_kvseq_free(&q->kv);
            q->kv_live = 0;
            free(q->logits);
            q->logits = NULL;
            q->state = SCHED_WAITING;
            q->hint = 0;
            sched_list_append(&s->waiting, q);
            continue;
        }
        memcpy(q->logits, r->logits, (size_t)s->n_vocab * sizeof(float));
        q->n_shared = shared;
        r->n_shared = shared;
        q->run_seq = ++s->run_counter;
        sched_list_append(&s->running, q);
        made[n_made++] = q;
        pthread_mutex_lock(&s->mu);
        s->st.forks++;
        s->st.fork_tokens += (uint64_t)r->kv.n_tokens;
        pthread_mutex_unlock(&s->mu);
    }
    r->n_fork = 0;
    return n_made;
}
