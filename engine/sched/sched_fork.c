/*
 * sched_fork.c -- the choices of an n > 1 request (eng_sched.h "Several
 * choices"): the group that collects how each choice ended, and the fork
 * of a prefilled request into its other choices.
 *
 * A request with n choices runs as one sequence (choice 0) until its
 * prompt's last logits arrive.  Then, before choice 0 samples, each other
 * choice becomes a sequence of its own: a copy of the request (prompt
 * tokens, limits, callbacks), a sampler seeded eng_sched_choice_seed, a
 * clone of the constraint in its start state (with the first mask, which
 * the fork waits for), the logits row copied, and the KV forked
 * (eng_kvseq_fork: full blocks shared, the partial one copied).  It samples
 * its first token from those logits at once and joins the running list.
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

sched_group *sched_group_new(int n) {
    sched_group *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    g->n = n;
    g->res = calloc((size_t)n, sizeof *g->res);
    g->tok = calloc((size_t)n, sizeof *g->tok);
    g->err = calloc((size_t)n, sizeof *g->err);
    if (!g->res || !g->tok || !g->err) {
        sched_group_free(g);
        return NULL;
    }
    return g;
}

void sched_group_free(sched_group *g) {
    if (!g) return;
    if (g->tok)
        for (int i = 0; i < g->n; i++) free(g->tok[i]);
    free(g->tok);
    free(g->res);
    free(g->err);
    free(g);
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

int sched_fork(eng_sched *s, sched_req *r) {
    int n_run = 0, first = r->grp->n - r->n_fork;
    int64_t now = eng_sched_now_us();
    if (r->cons && eng_constraint_busy(r->cons)) { /* its start state's mask, for the clones */
        const uint32_t *const *m;
        int nm;
        int64_t waited = 0;
        (void)eng_constraint_wait(r->cons, &m, &nm, &waited, NULL, 0);
        pthread_mutex_lock(&s->mu);
        s->st.mask_wait_ms += (double)waited / 1000.0;
        pthread_mutex_unlock(&s->mu);
    }
    sched_req *made[ENG_SCHED_N_MAX];
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
        n_run++;
        pthread_mutex_lock(&s->mu);
        s->st.forks++;
        s->st.fork_tokens += (uint64_t)r->kv.n_tokens;
        pthread_mutex_unlock(&s->mu);
    }
    r->n_fork = 0;
    /* the running choices sample their first token from the prompt's logits */
    for (int i = 0; i < n_made; i++) sched_sample(s, made[i], 0, now);
    return n_run;
}
