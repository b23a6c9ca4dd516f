/*
 * sched.c -- the scheduler's public API: create / free, submit, cancel,
 * statistics, close, and the delivery thread that runs callbacks.
 *
 * submit validates and copies a request into an inbox under s->mu and wakes
 * the loop (sched_loop.c), which owns the request from then on.  The loop
 * never calls user code: it queues events (sched_deliver) that the delivery
 * thread pops and runs in order, so a slow callback delays other callbacks
 * but never a forward step.  See eng_sched.h for the design.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched_int.h"
#include "pl_time.h"

int64_t eng_sched_now_us(void) { return pl_mono_us(); }

const char *eng_sched_finish_name(eng_sched_finish f) {
    switch (f) {
    case ENG_SCHED_STOP: return "stop";
    case ENG_SCHED_LENGTH: return "length";
    case ENG_SCHED_EXPIRED: return "expired";
    case ENG_SCHED_CANCELLED: return "cancelled";
    case ENG_SCHED_ERROR: return "error";
    }
    return "unknown";
}

void eng_sched_config_default(eng_sched_config *c) {
    memset(c, 0, sizeof *c);
    c->max_running = 64;
    c->step_tokens = 512;
    c->batch_window_us = 10000;
    c->fairness_ms = 200;
    c->prefetch_wait_ms = 50;
    c->kv_budget_bytes = (size_t)256 << 20;
    c->local_share = 0.5;
    c->max_queue = 4096;
    c->speculative = ENG_SCHED_SPEC_NGRAM;
    c->spec_tokens = 6;
    c->spec_ngram_min = 2;
    c->spec_ngram_max = 4;
    c->spec_max_batch_tokens = 8;
    c->mask_threads = 1;
    c->mask_budget_us = 100000;
    c->class_preempt = 1;
    c->bulk_min_share = 0.1;
    c->bulk_step_tokens = 128;
    c->bulk_decode_seqs = 0;
}

/* ---- delivery thread ---- */

static void *sched_deliv_main(void *arg) {
    eng_sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->dmu);
        while (!s->dq && !s->dstop) pthread_cond_wait(&s->dcv, &s->dmu);
        sched_event *e = s->dq;
        if (!e) { /* dstop and empty */
            pthread_mutex_unlock(&s->dmu);
            return NULL;
        }
        s->dq = e->next;
        if (!s->dq) s->dq_tail = NULL;
        pthread_mutex_unlock(&s->dmu);
        if (e->is_done) {
            if (e->grp) {
                e->res.choices = e->grp->res;
                e->res.tokens = e->grp->res[0].tokens;
                e->res.error = e->grp->res[0].error;
            } else {
                e->res.tokens = e->res_tokens;
                e->res.error = e->error;
                e->one.tokens = e->res_tokens;
                e->one.error = e->error;
                e->res.choices = &e->one;
            }
            if (e->on_done) e->on_done(e->user, e->id, &e->res);
            pthread_mutex_lock(&s->mu);
            s->done_pending--;
            pthread_mutex_unlock(&s->mu);
        } else if (e->on_token) {
            e->tok.logits = e->logits;
            e->tok.top = e->top;
            e->on_token(e->user, e->id, &e->tok);
        }
        free(e->logits);
        free(e->res_tokens);
        sched_group_free(e->grp);
        free(e);
    }
}

/* ---- create / free ---- */

static int cfg_check(const eng_sched_config *c, char *err, size_t errlen) {
    if (c->max_running < 1 || c->max_running > 4096) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL, "sched: max_running %d out of range 1..4096",
                       c->max_running);
    }
    if (c->step_tokens < 1) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL, "sched: step_tokens must be >= 1");
    }
    if (c->batch_window_us < 0 || c->fairness_ms < 0 || c->prefetch_wait_ms < 0) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL,
                       "sched: negative batch window, fairness bound or prefetch wait");
    }
    if (c->max_queue < 1 || !(c->local_share >= 0.0 && c->local_share <= 16.0)) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL,
                       "sched: max_queue must be >= 1 and local_share in [0, 16]");
    }
    if (c->speculative != ENG_SCHED_SPEC_OFF && c->speculative != ENG_SCHED_SPEC_NGRAM) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL, "sched: speculative must be off or ngram");
    }
    if (c->speculative != ENG_SCHED_SPEC_OFF &&
        (c->spec_tokens < 1 || c->spec_tokens > 64 || c->spec_max_batch_tokens < 0 ||
         c->spec_max_batch_tokens > (1 << 16) || c->spec_ngram_min < 1 ||
         c->spec_ngram_max < c->spec_ngram_min || c->spec_ngram_max > ENG_SPEC_NGRAM_MAX)) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL,
                       "sched: spec_tokens must be in 1..64, spec_max_batch_tokens in 0..65536 "
                       "and 1 <= spec_ngram_min <= spec_ngram_max <= %d",
                       ENG_SPEC_NGRAM_MAX);
    }
    for (int i = 0; i < c->n_tenant_weights; i++)
        if (!c->tenant_weights || !c->tenant_weights[i].ns ||
            strlen(c->tenant_weights[i].ns) > ENG_SCHED_NS_MAX ||
            !(c->tenant_weights[i].weight > 0.0 && c->tenant_weights[i].weight <= 1e6))
            return pl_errf(err, errlen, ENG_SCHED_EINVAL,
                           "sched: tenant weight %d: a namespace and a weight in (0, 1e6]", i);
    if (c->bulk_step_tokens < 0)
        return pl_errf(err, errlen, ENG_SCHED_EINVAL, "sched: bulk_step_tokens must be >= 0");
    if (c->bulk_decode_seqs < 0)
        return pl_errf(err, errlen, ENG_SCHED_EINVAL, "sched: bulk_decode_seqs must be >= 0");
    if (!(c->bulk_min_share >= 0.0 && c->bulk_min_share <= 1.0)) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL, "sched: bulk_min_share must be in [0, 1]");
    }
    if (c->constraint_vocab && (c->mask_threads < 1 || c->mask_threads > 64)) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL, "sched: mask_threads must be in 1..64");
    }
    if (c->mask_budget_us < 0) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL, "sched: mask_budget_us must be >= 0");
    }
    return 0;
}

int eng_sched_create(eng_model *m, const eng_sched_config *cfg, const eng_sched_cache_ops *ops,
                     eng_sched **out, char *err, size_t errlen) {
    int rc = ENG_SCHED_ENOMEM;
    if (!out) return ENG_SCHED_EINVAL;
    *out = NULL;
    if (!m) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL, "sched: no model");
    }
    eng_sched *s = calloc(1, sizeof *s);
    if (!s) {
        return pl_errf(err, errlen, ENG_SCHED_ENOMEM, "sched: out of memory");
    }
    s->eta_us = INT64_MAX; /* nothing in flight */
    s->bulk_share = 1.0;   /* no history: bulk is not starved */
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC); /* timed waits use eng_sched_now_us's clock */
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&s->dmu, NULL);
    pthread_cond_init(&s->dcv, NULL);
    s->model = m;
    s->layout = eng_model_kv_layout(m);
    s->n_vocab = eng_model_config(m)->n_vocab;
    s->next_id = 1;
    if (cfg) s->cfg = *cfg;
    else eng_sched_config_default(&s->cfg);
    if ((rc = cfg_check(&s->cfg, err, errlen)) != 0) goto err;
    int B = s->layout->block_tokens;
    s->wb = s->layout->n_layers[1] ? (s->layout->max_window + B - 1) / B : 0;
    if (ops) {
        if (!ops->alloc.alloc || !ops->alloc.release || !ops->blocks_total || !ops->lookup ||
            !ops->release || !ops->insert || !ops->probe ||
            (ops->prefetch && (!ops->prefetch_done || !ops->prefetch_release))) {
            rc = pl_errf(err, errlen, ENG_SCHED_EINVAL, "sched: cache ops table is incomplete");
            goto err;
        }
        s->has_cache = 1;
        s->ops = *ops;
        s->alloc = ops->alloc;
        for (int k = 0; k < 2; k++) s->blocks_total[k] = ops->blocks_total(ops->ctx, k);
    } else {
        rc = sched_budget_create(s->layout, s->cfg.kv_budget_bytes, s->cfg.local_share, &s->budget,
                                 err, errlen);
        if (rc) goto err;
        s->alloc = sched_budget_allocator(s->budget);
        for (int k = 0; k < 2; k++) s->blocks_total[k] = s->budget->cap[k];
    }
    for (int k = 0; k < 2; k++) {
        if (s->layout->n_layers[k] && s->blocks_total[k] < 1) {
            rc = pl_errf(err, errlen, ENG_SCHED_EINVAL,
                         "sched: the allocator offers no block of kind %d", k);
            goto err;
        }
        s->st.blocks_total[k] = s->blocks_total[k];
    }
    rc = ENG_SCHED_ENOMEM;
    s->steps = calloc((size_t)s->cfg.max_running, sizeof *s->steps);
    s->step_req = calloc((size_t)s->cfg.max_running, sizeof *s->step_req);
    if (!s->steps || !s->step_req) {
        pl_errf(err, errlen, rc, "sched: out of memory");
        goto err;
    }
    /* the verify chunks of a drafting step: at most spec_max_batch_tokens
     * rows (and the step's budget); none when not even a one-token draft
     * fits */
    if (s->cfg.speculative != ENG_SCHED_SPEC_OFF) {
        int rows = s->cfg.spec_max_batch_tokens < s->cfg.step_tokens ? s->cfg.spec_max_batch_tokens
                                                                     : s->cfg.step_tokens;
        if (rows >= 2) {
            s->spec_logits = malloc((size_t)rows * (size_t)s->n_vocab * sizeof(float));
            if (!s->spec_logits) {
                pl_errf(err, errlen, rc, "sched: out of memory for %d rows of logits", rows);
                goto err;
            }
            s->spec_rows = rows;
        }
    }
    if (s->cfg.constraint_vocab) {
        int crc = eng_constraint_pool_new(s->cfg.mask_threads, &s->pool, err, errlen);
        if (crc) {
            rc = crc == ENG_CONSTRAINT_ENOMEM     ? ENG_SCHED_ENOMEM
                 : crc == ENG_CONSTRAINT_EUNAVAIL ? ENG_SCHED_ENOTSUP
                                                  : ENG_SCHED_ETHREAD;
            goto err;
        }
    }
    rc = ENG_SCHED_ETHREAD;
    if (pthread_create(&s->deliv_th, NULL, sched_deliv_main, s) != 0) {
        pl_errf(err, errlen, rc, "sched: cannot start the delivery thread");
        goto err;
    }
    s->deliv_started = 1;
    if (pthread_create(&s->loop_th, NULL, sched_loop_main, s) != 0) {
        pl_errf(err, errlen, rc, "sched: cannot start the scheduler thread");
        goto err;
    }
    s->loop_started = 1;
    *out = s;
    return 0;
err:
    eng_sched_free(s);
    return rc;
}

void eng_sched_close(eng_sched *s, int drain) {
    if (!s || s->closed) return;
    pthread_mutex_lock(&s->mu);
    s->closing = 1;
    s->drain = drain ? 1 : 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (s->loop_started) pthread_join(s->loop_th, NULL);
    s->loop_started = 0;
    pthread_mutex_lock(&s->dmu);
    s->dstop = 1;
    pthread_cond_broadcast(&s->dcv);
    pthread_mutex_unlock(&s->dmu);
    if (s->deliv_started) pthread_join(s->deliv_th, NULL);
    s->deliv_started = 0;
    s->closed = 1;
}

void eng_sched_free(eng_sched *s) {
    if (!s) return;
    eng_sched_close(s, 0);
    /* The loop ended every request; free what a failed create left. */
    sched_event *e = s->dq;
    while (e) {
        sched_event *n = e->next;
        free(e->logits);
        free(e->res_tokens);
        sched_group_free(e->grp);
        free(e);
        e = n;
    }
    eng_constraint_pool_free(s->pool);
    sched_budget_free(s->budget);
    free(s->steps);
    free(s->step_req);
    free(s->spec_logits);
    free(s->tenants);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->dmu);
    pthread_cond_destroy(&s->dcv);
    free(s);
}

/* ---- submit / cancel / stats ---- */

static int req_check(const eng_sched *s, const eng_sched_request *r, char *err, size_t errlen) {
    if (!r->prompt || r->n_prompt < 1) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL, "sched: empty prompt");
    }
    if (r->max_tokens < 1 || r->n_prompt > (1 << 24) || r->max_tokens > (1 << 24)) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL,
                       "sched: max_tokens must be >= 1 and sizes below 2^24");
    }
    for (int i = 0; i < r->n_prompt; i++)
        if (r->prompt[i] < 0 || r->prompt[i] >= s->n_vocab) {
            return pl_errf(err, errlen, ENG_SCHED_EINVAL,
                           "sched: prompt token %d at %d outside [0, %d)", r->prompt[i], i,
                           s->n_vocab);
        }
    if (r->ns_len > ENG_SCHED_NS_MAX || (r->ns_len && !r->ns)) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL, "sched: namespace longer than %d bytes",
                       ENG_SCHED_NS_MAX);
    }
    int n = r->n > 0 ? r->n : 1;
    if (r->n < 0 || n > ENG_SCHED_N_MAX || n > s->cfg.max_running) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL,
                       "sched: n = %d choices outside 1..%d (and max_running %d)", r->n,
                       ENG_SCHED_N_MAX, s->cfg.max_running);
    }
    if (r->logprobs < 0 || r->logprobs > 1 || r->top_logprobs < 0 ||
        r->top_logprobs > ENG_SCHED_TOP_MAX || (r->top_logprobs && !r->logprobs)) {
        return pl_errf(err, errlen, ENG_SCHED_EINVAL,
                       "sched: logprobs must be 0 or 1 and top_logprobs in 0..%d (with logprobs)",
                       ENG_SCHED_TOP_MAX);
    }
    /* Could it run alone?  Otherwise it would wait forever.  (Each choice
     * of an n > 1 request is a sequence of its own, preempted and resumed
     * alone: each must fit, not all at once.) */
    long need[2];
    sched_blocks_for(s, 0, r->n_prompt + r->max_tokens, need);
    if (s->layout->n_layers[1]) {
        long live = s->wb + 2;
        if (need[1] > live) need[1] = live;
    }
    for (int k = 0; k < 2; k++)
        if (need[k] > s->blocks_total[k]) {
            return pl_errf(
                err, errlen, ENG_SCHED_EINVAL,
                "sched: request needs %ld KV blocks of kind %d (%d prompt + %d max tokens), "
                "the budget holds %ld",
                need[k], k, r->n_prompt, r->max_tokens, s->blocks_total[k]);
        }
    return 0;
}

int eng_sched_submit(eng_sched *s, const eng_sched_request *r, uint64_t *id, char *err,
                     size_t errlen) {
    if (!s || !r) return ENG_SCHED_EINVAL;
    eng_constraint *pre = r->compiled; /* taken over: the request's, or freed on refusal */
    int rc = req_check(s, r, err, errlen);
    if (rc) {
        eng_constraint_free(pre);
        return rc;
    }
    sched_req *q = calloc(1, sizeof *q);
    if (!q) goto nomem;
    q->cap_toks = r->n_prompt + (r->max_tokens < 256 ? r->max_tokens : 256);
    q->toks = malloc((size_t)q->cap_toks * sizeof *q->toks);
    if (!q->toks) goto nomem;
    memcpy(q->toks, r->prompt, (size_t)r->n_prompt * sizeof *q->toks);
    q->n_toks = q->n_prompt = r->n_prompt;
    q->max_tokens = r->max_tokens;
    q->sp = r->sampling;
    if (eng_sampler_new(&r->sampling, s->n_vocab, &q->sampler, err, errlen) != 0) {
        rc = ENG_SCHED_EINVAL;
        goto refuse;
    }
    int n = r->n > 0 ? r->n : 1;
    if (n > 1) {
        q->grp = sched_group_new(n);
        q->n_fork = n - 1;
        if (!q->grp) goto nomem;
    }
    q->logprobs = r->logprobs;
    if (r->logprobs) {
        int pos = (s->cfg.speculative != ENG_SCHED_SPEC_OFF ? s->cfg.spec_tokens : 0) + 1;
        q->lp = calloc((size_t)pos, sizeof *q->lp);
        if (!q->lp) goto nomem;
        for (int i = 0; i < pos; i++) q->lp[i].top_logprobs = r->top_logprobs;
    }
    if (r->constraint.kind != ENG_CONSTRAINT_NONE || pre) {
        int crc;
        if (!s->pool) {
            rc =
                pl_errf(err, errlen, ENG_SCHED_ENOTSUP,
                        "sched: a %s constraint was asked for, but this scheduler has no "
                        "constraint vocabulary%s",
                        eng_constraint_kind_name(r->constraint.kind),
                        eng_constraint_available() ? "" : " (parley was built without llguidance)");
            goto refuse;
        }
        if (pre) { /* compiled by the caller */
            q->cons = pre;
            pre = NULL;
        }
        crc = q->cons ? 0
                      : eng_constraint_new(s->cfg.constraint_vocab, &r->constraint, &q->cons, err,
                                           errlen);
        if (crc) {
            rc = crc == ENG_CONSTRAINT_ENOMEM     ? ENG_SCHED_ENOMEM
                 : crc == ENG_CONSTRAINT_EUNAVAIL ? ENG_SCHED_ENOTSUP
                                                  : ENG_SCHED_ECONSTRAINT;
            goto refuse;
        }
    }
    if (r->ns_len) memcpy(q->ns, r->ns, r->ns_len);
    q->ns_len = r->ns_len;
    q->deadline_us = r->deadline_us;
    q->cls = r->service_class == ENG_SCHED_BULK ? ENG_SCHED_BULK : ENG_SCHED_INTERACTIVE;
    q->want_logits = r->want_logits;
    q->on_token = r->on_token;
    q->on_done = r->on_done;
    q->user = r->user;
    q->ticket = -1;
    q->state = SCHED_INBOX;
    q->submit_us = eng_sched_now_us();
    /* Start the lower-tier fetch now so it overlaps queueing. */
    if (s->has_cache && s->ops.prefetch)
        q->ticket = s->ops.prefetch(s->ops.ctx, q->ns, q->ns_len, q->toks, q->n_toks);
    if (q->ticket < 0) q->ticket = -1;
    pthread_mutex_lock(&s->mu);
    if (s->closing || s->n_live + n > s->cfg.max_queue) {
        pthread_mutex_unlock(&s->mu);
        pl_errf(err, errlen, ENG_SCHED_ECLOSED,
                s->closing ? "sched: closing" : "sched: %d requests in flight", s->n_live);
        if (q->ticket >= 0) s->ops.prefetch_release(s->ops.ctx, q->ticket);
        rc = ENG_SCHED_ECLOSED;
        goto refuse;
    }
    if (q->cons) s->st.constrained++;
    q->id = s->next_id++;
    q->live_next = s->live;
    s->live = q;
    s->n_live++;
    if (s->inbox_tail) s->inbox_tail->next = q;
    else s->inbox = q;
    s->inbox_tail = q;
    s->st.submitted++;
    s->st.submitted_class[q->cls]++;
    int64_t eta = sched_eta(s, q, eng_sched_now_us(), s->st.running == 0);
    if (s->n_live == 1 || eta < s->eta_us) s->eta_us = eta; /* the loop refines it */
    if (id) *id = q->id;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
nomem:
    rc = pl_errf(err, errlen, ENG_SCHED_ENOMEM, "sched: out of memory");
refuse:
    eng_constraint_free(pre);
    if (q) {
        eng_sampler_free(q->sampler);
        eng_constraint_free(q->cons);
        sched_group_free(q->grp);
        free(q->lp);
        free(q->toks);
    }
    free(q);
    return rc;
}

/* Flag request id's choice `choice` (< 0: every choice) for the loop
 * (SCHED_END_CANCEL or SCHED_END_STOP, which keeps `keep` generated
 * tokens, -1 all). */
static int sched_flag(eng_sched *s, uint64_t id, int choice, int how, int keep) {
    if (!s) return ENG_SCHED_EINVAL;
    int rc = ENG_SCHED_ENOENT;
    pthread_mutex_lock(&s->mu);
    for (sched_req *q = s->live; q; q = q->live_next)
        if (q->id == id && (choice < 0 || q->choice == choice) && !q->cancel) {
            q->cancel = how;
            q->stop_keep = keep;
            rc = 0;
            pthread_cond_signal(&s->cv);
        }
    pthread_mutex_unlock(&s->mu);
    return rc;
}

int eng_sched_cancel(eng_sched *s, uint64_t id) {
    return sched_flag(s, id, -1, SCHED_END_CANCEL, -1);
}

int eng_sched_stop(eng_sched *s, uint64_t id, int n_keep) {
    return sched_flag(s, id, -1, SCHED_END_STOP, n_keep < 0 ? -1 : n_keep);
}

int eng_sched_stop_choice(eng_sched *s, uint64_t id, int choice, int n_keep) {
    return sched_flag(s, id, choice < 0 ? -1 : choice, SCHED_END_STOP, n_keep < 0 ? -1 : n_keep);
}

void eng_sched_hold(eng_sched *s, int hold) {
    pthread_mutex_lock(&s->mu);
    s->held = hold != 0;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

int64_t eng_sched_next_finish_us(eng_sched *s, int64_t *step_us) {
    pthread_mutex_lock(&s->mu);
    int64_t t = s->done_pending ? 0 : s->n_live ? s->eta_us : INT64_MAX;
    if (step_us) *step_us = s->step_us_ema;
    pthread_mutex_unlock(&s->mu);
    return t;
}

void eng_sched_stats_get(eng_sched *s, eng_sched_stats *out) {
    pthread_mutex_lock(&s->mu);
    *out = s->st;
    pthread_mutex_unlock(&s->mu);
    if (s->budget) sched_budget_peak(s->budget, out->alloc_live, out->alloc_live_peak);
    if (s->pool) {
        eng_constraint_pool_stats ps;
        eng_constraint_pool_stats_get(s->pool, &ps);
        out->masks = ps.masks;
        out->mask_cpu_ms = ps.mask_cpu_ms;
        out->mask_over_budget = ps.over_budget;
    }
}
