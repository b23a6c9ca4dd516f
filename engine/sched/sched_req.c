/*
 * sched_req.c -- one request's life on the loop thread: the lists it sits
 * in, its token events, sampling its next token, its memory preemption
 * and its end.
 *
 * These are the primitives the step loop (sched_loop.c), the choices of an
 * n > 1 request (sched_fork.c), speculative decoding (sched_spec.c) and the
 * class balance (sched_class.c) share; this file calls none of them, so the
 * scheduler's files call one way: sched.c -> sched_loop.c -> sched_fork.c,
 * sched_spec.c, sched_class.c, sched_tenant.c -> sched_req.c.  Every
 * request ends through sched_finish exactly once, so exactly one
 * completion is delivered.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sched_int.h"
#include "pl_time.h"

/* Queue event e for the delivery thread (sched.c), which runs callbacks
 * in order off the loop thread. */
void sched_deliver(eng_sched *s, sched_event *e) {
    e->next = NULL;
    pthread_mutex_lock(&s->dmu);
    if (s->dq_tail) s->dq_tail->next = e;
    else s->dq = e;
    s->dq_tail = e;
    pthread_cond_signal(&s->dcv);
    pthread_mutex_unlock(&s->dmu);
}

/* ---- lists (singly linked, small) ---- */

void sched_list_remove(sched_req **head, sched_req *r) {
    for (sched_req **p = head; *p; p = &(*p)->next)
        if (*p == r) {
            *p = r->next;
            r->next = NULL;
            return;
        }
}

void sched_list_append(sched_req **head, sched_req *r) {
    sched_req **p = head;
    while (*p) p = &(*p)->next;
    r->next = NULL;
    *p = r;
}

int sched_list_len(const sched_req *h) {
    int n = 0;
    for (; h; h = h->next) n++;
    return n;
}

/* ---- the completion record of an n > 1 request ---- */

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

/* Give a sequence's KV up, inserting it in the cache first (when there is
 * one and the KV is valid) so a later turn or a resume can reuse it. */
static void seq_drop(eng_sched *s, sched_req *r, int insert) {
    if (!r->kv_live) return;
    if (insert && s->has_cache && r->kv.n_tokens >= s->layout->block_tokens)
        s->ops.insert(s->ops.ctx, r->ns, r->ns_len, &r->kv, 1);
    eng_kvseq_free(&r->kv);
    r->kv_live = 0;
}

/* Record how choice c of group g ended (tokens copied). */
static void group_record(sched_group *g, int c, eng_sched_finish why, const int32_t *toks, int n,
                         int preemptions, double ttft_ms, const char *msg) {
    eng_sched_choice *ch = &g->res[c];
    ch->finish = why;
    ch->n_tokens = 0;
    if (n > 0 && (g->tok[c] = malloc((size_t)n * sizeof(int32_t)))) {
        memcpy(g->tok[c], toks, (size_t)n * sizeof(int32_t));
        ch->n_tokens = n;
    }
    ch->tokens = g->tok[c];
    ch->preemptions = preemptions;
    ch->ttft_ms = ttft_ms;
    snprintf(g->err[c], PL_ERR_LEN, "%s", msg ? msg : "");
    ch->error = g->err[c];
    g->n_done++;
}

/* End request r (already removed from the waiting/running lists).  A
 * choice of an n > 1 request records its end in the group; the request's
 * completion is delivered when its last choice ends (choices never forked,
 * because the first ended before its first token, end with it). */
void sched_finish(eng_sched *s, sched_req *r, eng_sched_finish why, const char *msg) {
    seq_drop(s, r, why != ENG_SCHED_ERROR);
    if (r->ticket >= 0) s->ops.prefetch_release(s->ops.ctx, r->ticket);
    r->ticket = -1;
    int64_t now = pl_mono_us();
    double ttft = r->first_tok_us ? (r->first_tok_us - r->submit_us) / 1e3 : 0;
    sched_group *g = r->grp;
    int last = 1;
    if (g) {
        group_record(g, r->choice, why, r->toks + r->n_prompt, r->n_gen, r->preemptions, ttft, msg);
        for (int c = g->n - r->n_fork; c < g->n && r->n_fork > 0; c++)
            group_record(g, c, why, NULL, 0, 0, 0, msg);
        r->n_fork = 0;
        last = g->n_done == g->n;
    }
    eng_sched_finish fin = g && last ? g->res[0].finish : why; /* the request's */
    sched_event *e = last ? calloc(1, sizeof *e) : NULL;
    if (e) {
        e->is_done = 1;
        e->id = r->id;
        e->user = r->user;
        e->on_done = r->on_done;
        eng_sched_result *res = &e->res;
        res->finish = why;
        res->n_tokens = r->n_gen;
        res->n_choices = 1;
        if (g) { /* the completion takes the group over; choice 0 on top */
            e->grp = g;
            res->n_choices = g->n;
            res->finish = g->res[0].finish;
            res->n_tokens = g->res[0].n_tokens;
        } else if (r->n_gen) {
            e->res_tokens = malloc((size_t)r->n_gen * sizeof(int32_t));
            if (e->res_tokens)
                memcpy(e->res_tokens, r->toks + r->n_prompt, (size_t)r->n_gen * sizeof(int32_t));
            else res->n_tokens = 0;
        }
        res->prompt_tokens = r->n_prompt;
        res->cached_tokens = r->cached_tokens;
        res->preemptions = r->preemptions;
        res->submit_us = r->submit_us;
        res->admit_us = r->admit_us;
        res->admit_seq = r->admit_seq;
        res->queue_ms =
            r->admit_us ? (r->admit_us - r->submit_us) / 1e3 : (now - r->submit_us) / 1e3;
        res->ttft_ms = ttft;
        res->total_ms = (now - r->submit_us) / 1e3;
        snprintf(e->error, sizeof e->error, "%s", msg ? msg : "");
        e->one.finish = why;
        e->one.n_tokens = res->n_tokens;
        e->one.preemptions = r->preemptions;
        e->one.ttft_ms = ttft;
        if (g) {
            res->preemptions = g->res[0].preemptions;
            res->ttft_ms = g->res[0].ttft_ms;
        }
    } else if (last) {
        sched_group_free(g); /* no memory to report the completion */
    }
    pthread_mutex_lock(&s->mu);
    for (sched_req **p = &s->live; *p; p = &(*p)->live_next)
        if (*p == r) {
            *p = r->live_next;
            break;
        }
    s->n_live--;
    s->done_pending += e != NULL; /* until its on_done returns */
    if (last) {
        s->st.finished++;
        s->st.finish[fin]++;
    }
    pthread_mutex_unlock(&s->mu);
    /* Without memory for the event the completion cannot be reported; the
     * request still ends and its memory is freed. */
    if (e) sched_deliver(s, e);
    eng_sampler_free(r->sampler);
    eng_ngram_free(r->ngram);
    eng_constraint_free(r->cons);
    free(r->lp);
    free(r->toks);
    free(r->logits);
    free(r);
}

void sched_end_running(eng_sched *s, sched_req *r, eng_sched_finish why, const char *msg) {
    sched_list_remove(&s->running, r);
    sched_finish(s, r, why, msg);
}

/* Move running or parked request r back to the waiting list (its KV
 * parked in the cache or dropped; a resume recomputes what is missing). */
void sched_preempt(eng_sched *s, sched_req *r) {
    sched_list_remove(r->state == SCHED_PARKED ? &s->parked : &s->running, r);
    seq_drop(s, r, 1);
    r->n_shared = 0;
    free(r->logits);
    r->logits = NULL;
    r->preemptions++;
    r->state = SCHED_WAITING;
    r->hint = s->has_cache ? s->ops.probe(s->ops.ctx, r->ns, r->ns_len, r->toks, r->n_toks) : 0;
    sched_list_append(&s->waiting, r);
    pthread_mutex_lock(&s->mu);
    s->st.preemptions++;
    pthread_mutex_unlock(&s->mu);
}

static int append_token(sched_req *r, int32_t tok) {
    if (r->n_toks == r->cap_toks) {
        int cap = r->cap_toks * 2;
        int32_t *t = realloc(r->toks, (size_t)cap * sizeof *t);
        if (!t) return -1;
        r->toks = t;
        r->cap_toks = cap;
    }
    r->toks[r->n_toks++] = tok;
    r->n_gen++;
    return 0;
}

void sched_token_event(eng_sched *s, sched_req *r, int index, const float *logits,
                       const eng_sampler_logprobs *lp) {
    if (!r->on_token) return;
    sched_event *e = calloc(1, sizeof *e);
    if (!e) return;
    e->id = r->id;
    e->user = r->user;
    e->on_token = r->on_token;
    e->tok.token = r->toks[r->n_prompt + index];
    e->tok.index = index;
    e->tok.choice = r->choice;
    if (lp && r->logprobs) {
        e->tok.has_logprobs = 1;
        e->tok.logprob = lp->logprob;
        e->tok.n_top = lp->n_top;
        memcpy(e->top, lp->top, (size_t)lp->n_top * sizeof *e->top);
    }
    if (r->want_logits) {
        e->logits = malloc((size_t)s->n_vocab * sizeof(float));
        if (e->logits) memcpy(e->logits, logits, (size_t)s->n_vocab * sizeof(float));
    }
    sched_deliver(s, e);
}

int sched_cons_wait(eng_sched *s, sched_req *r, const uint32_t *const **masks, int *n_masks) {
    char err[PL_ERR_LEN];
    int64_t waited = 0;
    int rc = eng_constraint_wait(r->cons, masks, n_masks, &waited, err, sizeof err);
    pthread_mutex_lock(&s->mu);
    s->st.mask_wait_ms += (double)waited / 1000.0;
    pthread_mutex_unlock(&s->mu);
    if (rc == 0 && *n_masks >= 1) return 0;
    if (rc == 0) snprintf(err, sizeof err, "constraint: no mask");
    sched_end_running(s, r, ENG_SCHED_ERROR, err);
    return -1;
}

int sched_cons_next(eng_sched *s, sched_req *r) {
    r->n_cons_ahead = 0;
    if (eng_constraint_is_stopped(r->cons)) { /* complete: nothing but an end could follow */
        sched_end_running(s, r, ENG_SCHED_STOP, NULL);
        return 1;
    }
    if (eng_constraint_start(r->cons, s->pool, NULL, 0, s->cfg.mask_budget_us) != 0) {
        sched_end_running(s, r, ENG_SCHED_ERROR, "constraint: cannot start the next mask");
        return 1;
    }
    return 0;
}

int sched_sample_one(eng_sched *s, sched_req *r, int use_argmax, int64_t now) {
    char err[PL_ERR_LEN];
    const uint32_t *const *masks = NULL;
    int n_masks = 0;
    if (r->cons && sched_cons_wait(s, r, &masks, &n_masks) != 0) return 1;
    eng_sampler_logprobs *lp = r->logprobs ? r->lp : NULL;
    int32_t tok = use_argmax ? r->argmax
                             : eng_sampler_sample_masked(r->sampler, r->logits, r->toks, r->n_toks,
                                                         masks ? masks[0] : NULL, lp);
    if (tok < 0) {
        sched_end_running(s, r, ENG_SCHED_ERROR, "constraint: the mask allows no token");
        return 1;
    }
    if (append_token(r, tok) != 0) {
        sched_end_running(s, r, ENG_SCHED_ERROR, "sched: out of memory for tokens");
        return 1;
    }
    if (!r->first_tok_us) r->first_tok_us = now;
    sched_token_event(s, r, r->n_gen - 1, r->logits, lp);
    int stop = eng_sampler_is_stop(r->sampler, tok);
    if (r->cons && !stop && eng_constraint_commit(r->cons, &tok, 1, err, sizeof err) != 0) {
        sched_end_running(s, r, ENG_SCHED_ERROR, err);
        return 1;
    }
    if (stop) {
        sched_end_running(s, r, ENG_SCHED_STOP, NULL);
        return 1;
    }
    if (r->cons && eng_constraint_is_stopped(r->cons)) {
        sched_end_running(s, r, ENG_SCHED_STOP, NULL);
        return 1;
    }
    if (r->n_gen >= r->max_tokens) {
        sched_end_running(s, r, ENG_SCHED_LENGTH, NULL);
        return 1;
    }
    return r->cons ? sched_cons_next(s, r) : 0;
}

/* ---- the completion estimate (eng_sched_next_finish_us) ---- */

int64_t sched_eta(const eng_sched *s, const sched_req *r, int64_t now, int idle) {
    int stored =
        (r->state == SCHED_RUNNING || r->state == SCHED_PARKED) && r->kv_live ? r->kv.n_tokens : 0;
    int64_t feed = r->n_toks - stored > 1 ? r->n_toks - stored : 1;
    int64_t per = s->cfg.step_tokens;
    if (r->cls == ENG_SCHED_BULK && s->cfg.bulk_step_tokens > 0 && s->cfg.bulk_step_tokens < per)
        per = s->cfg.bulk_step_tokens;
    int64_t chunks = (feed + per - 1) / per;
    int64_t left = r->max_tokens - r->n_gen > 1 ? r->max_tokens - r->n_gen : 1;
    int64_t t = now + (chunks + left - 1) * s->step_us_ema;
    if (idle && r->state != SCHED_RUNNING) t += s->cfg.batch_window_us;
    return t;
}
