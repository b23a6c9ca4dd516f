/*
 * sched_loop.c -- the scheduler's step loop (its own thread).
 *
 * One iteration: take new requests from the inbox; end cancelled and
 * expired ones; while held (eng_sched_hold) go no further; mark waiting
 * requests admissible once their prefetch is done; when idle, hold new
 * arrivals for the batching window; admit waiting
 * requests in cache-aware order with the fairness bound while their KV
 * fits; build one batch (a decode token per decoding sequence, then prefill
 * chunks in admission order under the step's token budget); preempt the
 * youngest sequences until the batch's new blocks fit; run eng_forward;
 * sample, queue token events, end finished requests.  The policy and its
 * justification are in eng_sched.h.  Every request this thread takes ends
 * through sched_finish exactly once, so exactly one completion is delivered.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sched_int.h"
#include "pl_time.h"


/* Blocks a running sequence holds, per kind, from block `from` on. */
static void seq_held(const sched_req *r, int from, long held[2]) {
    held[0] = held[1] = 0;
    if (!r->kv_live) return;
    for (int k = 0; k < 2; k++)
        if (r->kv.blk[k])
            for (int i = from; i < r->kv.n_blocks; i++) held[k] += r->kv.blk[k][i] != NULL;
}

/* Blocks the running and parked sequences hold; the blocks forked choices
 * share are counted once per group (by the first choice holding them). */
static void running_held(eng_sched *s, long held[2]) {
    held[0] = held[1] = 0;
    uint64_t epoch = ++s->held_epoch;
    sched_req *lists[2] = {s->running, s->parked};
    for (int l = 0; l < 2; l++)
        for (sched_req *r = lists[l]; r; r = r->next) {
            long h[2];
            int from = r->n_shared;
            if (from && r->grp && r->grp->held_epoch != epoch) {
                r->grp->held_epoch = epoch;
                from = 0;
            }
            seq_held(r, from, h);
            held[0] += h[0];
            held[1] += h[1];
        }
}

static sched_req *youngest_running(eng_sched *s) {
    sched_req *y = NULL;
    for (sched_req *r = s->running; r; r = r->next)
        if (!y || r->run_seq > y->run_seq) y = r;
    return y;
}

/* Short of memory: the youngest parked sequence gives its KV up first
 * (it is not in the batch), else the youngest running one. */
static sched_req *preempt_victim(eng_sched *s) {
    sched_req *y = NULL;
    for (sched_req *r = s->parked; r; r = r->next)
        if (!y || r->run_seq > y->run_seq) y = r;
    return y ? y : youngest_running(s);
}

/* ---- admission ---- */

typedef struct cand_ctx {
    int64_t now_us, fair_us; /* ordering clock and fairness bound */
    int first_cls;           /* the class whose candidates go first */
    const eng_sched *s;      /* the scheduler (its tenants' virtual times) */
} cand_ctx;

/* qsort has no context argument: the loop thread sets its own copy. */
static _Thread_local cand_ctx t_cand;

static int cand_overdue(const sched_req *r) {
    return t_cand.now_us - r->submit_us >= t_cand.fair_us;
}

/* The first class (interactive unless bulk is starved) first; within a
 * class overdue first in submit order; then the tenant with the lowest
 * virtual time; then longest cached prefix; then submit order. */
static int cand_cmp(const void *a, const void *b) {
    const sched_req *x = *(sched_req *const *)a, *y = *(sched_req *const *)b;
    int fx = x->cls == t_cand.first_cls, fy = y->cls == t_cand.first_cls;
    if (fx != fy) return fy - fx;
    int ox = cand_overdue(x), oy = cand_overdue(y);
    if (ox != oy) return oy - ox;
    if (!ox) {
        double vx = sched_tenant_vt(t_cand.s, x), vy = sched_tenant_vt(t_cand.s, y);
        if (vx != vy) return vx < vy ? -1 : 1;
    }
    if (!ox && x->hint != y->hint) return y->hint > x->hint ? 1 : -1;
    if (x->submit_us != y->submit_us) return x->submit_us < y->submit_us ? -1 : 1;
    return x->id < y->id ? -1 : (x->id > y->id);
}

/* Look up the cached prefix and set up r's sequence.  Returns 0 or < 0
 * with a message. */
static int sched_admit(eng_sched *s, sched_req *r, char *err, size_t errlen) {
    if (!r->logits) r->logits = malloc((size_t)s->n_vocab * sizeof(float));
    if (!r->logits) {
        return pl_errf(err, errlen, ENG_SCHED_ENOMEM, "sched: out of memory for logits");
    }
    if (eng_kvseq_init(&r->kv, s->layout, &s->alloc, err, errlen) != 0) return ENG_SCHED_EINVAL;
    r->kv_live = 1;
    int n_cached = 0;
    if (s->has_cache) {
        int cap = r->n_toks / s->layout->block_tokens + 1;
        void **arr = calloc((size_t)cap * 2, sizeof *arr);
        if (arr) {
            eng_sched_match m = {arr, arr + cap, cap, 0, 0, 0};
            if (s->ops.lookup(s->ops.ctx, r->ns, r->ns_len, r->toks, r->n_toks, &m) == 0 &&
                m.n_tokens > 0) {
                if (eng_kvseq_adopt_prefix(&r->kv, m.n_tokens, m.gblk, m.lblk, r->toks) == 0)
                    n_cached = m.n_tokens;
                else s->ops.release(s->ops.ctx, &m);
            }
            free(arr);
        }
    }
    if (r->ticket >= 0) s->ops.prefetch_release(s->ops.ctx, r->ticket);
    r->ticket = -1;
    int64_t now = pl_mono_us();
    int first = r->admit_us == 0;
    if (first) {
        r->admit_us = now;
        r->admit_seq = ++s->admit_counter;
        r->cached_tokens = n_cached < r->n_prompt ? n_cached : r->n_prompt;
    }
    r->run_seq = ++s->run_counter;
    r->state = SCHED_RUNNING;
    pthread_mutex_lock(&s->mu);
    if (first) {
        s->st.prompt_tokens += (uint64_t)r->n_prompt;
        s->st.cached_tokens += (uint64_t)r->cached_tokens;
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* Admit what fits, in cache-aware order with the fairness bound. */
static void sched_admit_waiting(eng_sched *s, int64_t now) {
    int n_wait = sched_list_len(s->waiting), n_run = sched_list_len(s->running);
    sched_class_resume(s, &n_run);
    if (!n_wait || n_run >= s->cfg.max_running) return;
    sched_req **c = malloc((size_t)n_wait * sizeof *c);
    if (!c) return;
    int n = 0;
    for (sched_req *r = s->waiting; r; r = r->next)
        if (r->ready) c[n++] = r;
    t_cand.now_us = now;
    t_cand.fair_us = (int64_t)s->cfg.fairness_ms * 1000;
    t_cand.first_cls = sched_class_bulk_first(s) ? ENG_SCHED_BULK : ENG_SCHED_INTERACTIVE;
    t_cand.s = s;
    int n_tenants = sched_tenant_refresh(s);
    qsort(c, (size_t)n, sizeof *c, cand_cmp);
    long held[2], total[2] = {s->blocks_total[0], s->blocks_total[1]};
    running_held(s, held);
    int B = s->layout->block_tokens;
    long chunk_blocks = (s->cfg.step_tokens + B - 1) / B + 1;
    for (int i = 0; i < n && n_run < s->cfg.max_running; i++) {
        sched_req *r = c[i];
        /* parked bulk sequences resume before a new bulk request starts */
        if (r->cls == ENG_SCHED_BULK && t_cand.first_cls != ENG_SCHED_BULK && s->parked) break;
        /* a request still to fork takes a running slot per choice */
        if (n_run + 1 + r->n_fork > s->cfg.max_running) {
            if (cand_overdue(r) && n_run > 0) break;
            continue;
        }
        long need[2];
        sched_blocks_for(s, 0, r->n_toks, need);
        if (need[1] > s->wb + 1 + chunk_blocks) need[1] = s->wb + 1 + chunk_blocks;
        need[0] += r->n_fork; /* each fork copies the partial last block */
        need[1] += r->n_fork;
        int fits = 1;
        for (int k = 0; k < 2; k++)
            if (s->layout->n_layers[k] && held[k] + need[k] + n_run + 1 > total[k]) fits = 0;
        if (!fits && s->parked && r->cls == ENG_SCHED_INTERACTIVE) {
            /* parked KV gives way to interactive work: recompute later */
            sched_preempt(s, preempt_victim(s));
            running_held(s, held);
            i--;
            continue;
        }
        if (!fits && n_run > 0) {
            if (cand_overdue(r)) break; /* hold memory for the overdue request */
            continue;
        }
        char err[PL_ERR_LEN];
        sched_list_remove(&s->waiting, r);
        if (sched_admit(s, r, err, sizeof err) != 0) {
            sched_finish(s, r, ENG_SCHED_ERROR, err);
            continue;
        }
        sched_list_append(&s->running, r);
        held[0] += need[0];
        held[1] += need[1];
        n_run += 1 + r->n_fork;
        /* the tenant's turn is used: the others' candidates may now go first */
        sched_tenant_charge(s, r, 1 + r->n_fork);
        if (n_tenants > 1 && i + 1 < n) qsort(c + i + 1, (size_t)(n - i - 1), sizeof *c, cand_cmp);
    }
    free(c);
}

/* ---- one step ---- */

/* The draft each decoding sequence of this step may feed at most: the
 * step's decode rows (last tokens and drafts) share spec_max_batch_tokens
 * (the memory-bound regime, eng_sched.h; also the rows of spec_logits) and
 * the step's token budget, up to spec_tokens each.  0: no drafting. */
static int sched_draft_limit(const eng_sched *s) {
    if (s->cfg.speculative == ENG_SCHED_SPEC_OFF) return 0;
    long n_dec = 0;
    for (const sched_req *r = s->running; r && n_dec < s->cfg.max_running; r = r->next)
        n_dec += r->n_toks - r->kv.n_tokens == 1;
    if (!n_dec) return 0;
    long rows = s->spec_rows < s->cfg.step_tokens ? s->spec_rows : s->cfg.step_tokens;
    long k = rows / n_dec - 1;
    return (int)(k < s->cfg.spec_tokens ? (k > 0 ? k : 0) : s->cfg.spec_tokens);
}

/* 1 when r's next token is the argmax of its logits and nothing else reads
 * them: greedy, no penalty, no logits in its token events.  Its steps then
 * ask eng_forward for the argmax only (ENG_LOGITS_ARGMAX: the output
 * projection never writes the n_vocab row).  Whatever else reads or
 * changes the logits (logprobs, penalties, constraint masks, sampling)
 * must make this 0. */
static int sched_argmax_only(const sched_req *r) { return !sched_req_needs_logits(r); }

/* The step's logits request for r's last row: the argmax only, or the row. */
static void sched_want_last(sched_req *r, eng_seq_step *st) {
    st->logits = sched_argmax_only(r) ? ENG_LOGITS_ARGMAX : ENG_LOGITS_LAST;
    st->out = r->logits;
    st->next = &r->argmax;
}

/* Build the batch; returns its size.  Prefill chunks never make a step
 * exceed step_tokens beyond the decode tokens.  With draft, decoding
 * sequences feed their drafts too (a verify chunk, ENG_LOGITS_ALL into
 * spec_logits); *n_drafted gets the drafted tokens. */
static int sched_build(eng_sched *s, int *n_decode, int draft, int *n_drafted) {
    int n = 0, budget = s->cfg.step_tokens, rows = 0;
    *n_drafted = 0;
    int limit = draft ? sched_draft_limit(s) : 0;
    /* bulk decodes capped while interactive work is here: the bulk ones
     * numbered first .. first + cap - 1 (mod their count) take this step */
    int nb, ib = 0, cap = s->cfg.bulk_decode_seqs, first = sched_class_bulk_decode_cap(s, &nb);
    for (sched_req *r = s->running; r && n < s->cfg.max_running; r = r->next)
        if (r->n_toks - r->kv.n_tokens == 1) {
            if (first >= 0 && r->cls == ENG_SCHED_BULK && (ib++ - first + nb) % nb >= cap) continue;
            int k = limit ? sched_spec_draft(s, r, limit) : 0;
            eng_seq_step *st = &s->steps[n];
            st->kv = &r->kv;
            st->tokens = r->toks + r->kv.n_tokens;
            st->n_tokens = 1 + k;
            sched_want_last(r, st);
            if (k)
                st->logits = ENG_LOGITS_ALL, st->out = s->spec_logits + (size_t)rows * s->n_vocab;
            rows += k ? k + 1 : 0;
            *n_drafted += k;
            s->step_req[n++] = r;
            budget -= 1 + k;
        }
    *n_decode = n;
    /* prefill chunks: interactive ones first, then bulk ones within their cap */
    int bulk = s->cfg.bulk_step_tokens > 0 ? s->cfg.bulk_step_tokens : s->cfg.step_tokens;
    for (int cls = ENG_SCHED_INTERACTIVE; cls <= ENG_SCHED_BULK; cls++)
        for (sched_req *r = s->running; r && n < s->cfg.max_running && budget > 0; r = r->next) {
            int rem = r->n_toks - r->kv.n_tokens;
            if (rem <= 1 || r->cls != cls) continue;
            int room = cls == ENG_SCHED_BULK && bulk < budget ? bulk : budget;
            if (room <= 0) break;
            int chunk = rem < room ? rem : room;
            eng_seq_step *st = &s->steps[n];
            st->kv = &r->kv;
            st->tokens = r->toks + r->kv.n_tokens;
            st->n_tokens = chunk;
            sched_want_last(r, st);
            if (chunk != rem) st->logits = ENG_LOGITS_NONE;
            s->step_req[n++] = r;
            budget -= chunk;
            if (cls == ENG_SCHED_BULK) bulk -= chunk;
        }
    return n;
}

/* 1 if the batch's new blocks fit next to what running sequences hold. */
static int sched_fits(eng_sched *s, int n) {
    long held[2], add[2] = {0, 0};
    running_held(s, held);
    int B = s->layout->block_tokens;
    for (int i = 0; i < n; i++) {
        const eng_kvseq *kv = s->steps[i].kv;
        long nb = (kv->n_tokens + s->steps[i].n_tokens + B - 1) / B - kv->n_blocks;
        if (nb > 0) add[0] += nb, add[1] += nb;
    }
    for (int k = 0; k < 2; k++)
        if (s->layout->n_layers[k] && held[k] + add[k] > s->blocks_total[k]) return 0;
    return 1;
}


/* Sample r's next token (sched_int.h); a request with choices still to
 * fork forks them first, and they sample their first token from the same
 * prompt logits before r does. */
static int sched_sample(eng_sched *s, sched_req *r, int use_argmax, int64_t now) {
    if (r->n_fork > 0) {
        sched_req *made[ENG_SCHED_N_MAX];
        int n_made = sched_fork(s, r, made);
        for (int i = 0; i < n_made; i++) sched_sample_one(s, made[i], 0, now);
    }
    return sched_sample_one(s, r, use_argmax, now);
}

static int hist_bucket(uint64_t v) {
    int b = 0;
    while (v > 1 && b < ENG_SCHED_HIST - 1) v >>= 1, b++;
    return b;
}

/* Run one step over the running sequences.  Returns 1 if a forward ran. */
static int sched_step(eng_sched *s) {
    char err[PL_ERR_LEN];
    int n, n_decode, n_drafted, draft = 1;
    /* short of memory, drafts go first, then the youngest sequences */
    for (;;) {
        n = sched_build(s, &n_decode, draft, &n_drafted);
        if (!n) return 0;
        if (sched_fits(s, n)) break;
        if (n_drafted) {
            draft = 0;
            continue;
        }
        if (!s->running->next && !s->parked) break;
        sched_preempt(s, preempt_victim(s));
    }
    int64_t t0 = pl_mono_us();
    int rc;
    for (;;) {
        rc = eng_forward(s->model, s->steps, n, err, sizeof err);
        if (rc != ENG_ENOMEM || !s->running || (!n_drafted && !s->running->next && !s->parked))
            break;
        pthread_mutex_lock(&s->mu);
        s->st.oom_retries++;
        pthread_mutex_unlock(&s->mu);
        if (!n_drafted) sched_preempt(s, preempt_victim(s));
        n = sched_build(s, &n_decode, 0, &n_drafted);
        if (!n) return 0;
    }
    if (rc != 0) {
        for (int i = 0; i < n; i++) {
            sched_list_remove(&s->running, s->step_req[i]);
            sched_finish(s, s->step_req[i], ENG_SCHED_ERROR, err);
        }
        return 1;
    }
    sched_class_step(s, n); /* before sampling, which may free requests */
    uint64_t prefill = 0, sampled = 0;
    int64_t now = pl_mono_us();
    for (int i = 0; i < n; i++) {
        if (i >= n_decode) prefill += (uint64_t)s->steps[i].n_tokens;
        int lg = s->steps[i].logits;
        if (lg == ENG_LOGITS_LAST || lg == ENG_LOGITS_ARGMAX) { /* may end and free the request */
            sampled++;
            sched_sample(s, s->step_req[i], lg == ENG_LOGITS_ARGMAX, now);
        } else if (s->steps[i].logits == ENG_LOGITS_ALL) { /* a verify chunk; may end it too */
            sched_spec_commit(s, s->step_req[i], s->steps[i].n_tokens - 1, s->steps[i].out, now,
                              &sampled);
        }
    }
    double ms = (pl_mono_us() - t0) / 1e3;
    pthread_mutex_lock(&s->mu);
    s->st.steps++;
    s->st.prefill_tokens += prefill;
    s->st.decode_tokens += (uint64_t)n_decode;
    s->st.generated_tokens += sampled;
    s->st.step_ms_total += ms;
    int64_t us = (int64_t)(ms * 1000.0);
    s->step_us_ema = s->step_us_ema ? (3 * s->step_us_ema + us) / 4 : us;
    if (ms > s->st.step_ms_max) s->st.step_ms_max = ms;
    s->st.batch_hist[hist_bucket((uint64_t)n)]++;
    s->st.step_us_hist[hist_bucket((uint64_t)(ms * 1000.0) >> 6)]++;
    pthread_mutex_unlock(&s->mu);
    return 1;
}

/* Publish the earliest expected finish of the requests in flight (s->mu
 * held; loop thread). */
static void sched_eta_publish(eng_sched *s, int64_t now) {
    int64_t eta = INT64_MAX;
    int idle = !s->running;
    const sched_req *lists[4] = {s->running, s->parked, s->waiting, s->inbox};
    for (int l = 0; l < 4; l++)
        for (const sched_req *r = lists[l]; r; r = r->next) {
            int64_t t = sched_eta(s, r, now, idle);
            if (t < eta) eta = t;
        }
    s->eta_us = eta;
}

/* ---- the loop ---- */

/* eng_sched_stop's n_keep: drop the generated tokens past `keep` and cut
 * the KV back to the tokens before the last kept one (as a request that
 * stopped on its own holds it).  Should the cut be refused (a sliding-window
 * block it needs is already released), the KV stays whole: it is still
 * the KV of the tokens it records, only longer. */
static void sched_trim(sched_req *r, int keep) {
    if (keep < 0 || keep >= r->n_gen) return;
    r->n_gen = keep;
    r->n_toks = r->n_prompt + keep;
    int kv_keep = r->n_toks > 0 ? r->n_toks - 1 : 0;
    if (r->kv_live && r->kv.n_tokens > kv_keep) (void)eng_kvseq_truncate(&r->kv, kv_keep);
}

/* End waiting/running requests that were cancelled or passed their deadline,
 * or all of them (cancel_all). */
static void sched_reap(eng_sched *s, int64_t now, int cancel_all) {
    sched_req **lists[3] = {&s->waiting, &s->running, &s->parked};
    for (int l = 0; l < 3; l++) {
        sched_req *r = *lists[l];
        while (r) {
            sched_req *next = r->next;
            pthread_mutex_lock(&s->mu);
            int flag = cancel_all ? SCHED_END_CANCEL : r->cancel;
            int keep = r->stop_keep;
            pthread_mutex_unlock(&s->mu);
            eng_sched_finish why = ENG_SCHED_EXPIRED;
            if (flag == SCHED_END_CANCEL) why = ENG_SCHED_CANCELLED;
            else if (flag == SCHED_END_STOP) why = ENG_SCHED_STOP;
            if (flag || (r->deadline_us && now >= r->deadline_us)) {
                if (flag == SCHED_END_STOP) sched_trim(r, keep);
                sched_list_remove(lists[l], r);
                sched_finish(s, r, why, NULL);
            }
            r = next;
        }
    }
}

/* Mark waiting requests admissible once their prefetch is done or waited long enough. */
static int sched_ready(eng_sched *s, int64_t now) {
    int n_ready = 0;
    for (sched_req *r = s->waiting; r; r = r->next) {
        if (!r->ready) {
            int done = r->ticket < 0 || s->ops.prefetch_done(s->ops.ctx, r->ticket) ||
                       now - r->submit_us >= (int64_t)s->cfg.prefetch_wait_ms * 1000;
            if (done) {
                r->ready = 1;
                r->hint = s->has_cache
                              ? s->ops.probe(s->ops.ctx, r->ns, r->ns_len, r->toks, r->n_toks)
                              : 0;
            }
        }
        n_ready += r->ready;
    }
    return n_ready;
}

static void cv_wait_until(eng_sched *s, int64_t until_us) {
    struct timespec ts = {until_us / 1000000, (long)(until_us % 1000000) * 1000};
    pthread_cond_timedwait(&s->cv, &s->mu, &ts);
}

void *sched_loop_main(void *arg) {
    eng_sched *s = arg;
    int64_t window_end = 0;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        sched_req *fresh = s->inbox;
        while (s->inbox) {
            sched_req *r = s->inbox;
            s->inbox = r->next;
            r->state = SCHED_WAITING;
            sched_list_append(&s->waiting, r);
        }
        s->inbox_tail = NULL;
        int closing = s->closing, drain = s->drain, held = s->held;
        pthread_mutex_unlock(&s->mu);
        /* a new constrained request's first mask is computed while it
         * queues and prefills (a failure to start shows at its wait) */
        for (sched_req *r = fresh; r; r = r->next)
            if (r->cons && r->state == SCHED_WAITING && !eng_constraint_busy(r->cons))
                (void)eng_constraint_start(r->cons, s->pool, NULL, 0, s->cfg.mask_budget_us);

        int64_t now = pl_mono_us();
        sched_reap(s, now, closing && !drain);
        if (closing && !s->waiting && !s->running && !s->parked) break;
        if (held && !closing) {
            /* eng_sched_hold: no step; wake for a release, a close, new
             * work to queue, or the next deadline check (5 ms) */
            pthread_mutex_lock(&s->mu);
            if (s->held && !s->inbox && !s->closing) cv_wait_until(s, now + 5000);
            pthread_mutex_unlock(&s->mu);
            continue;
        }

        int n_ready = sched_ready(s, now);
        if (!s->running && !s->parked) {
            /* Idle: sleep until work arrives, a prefetch may have finished,
             * or the batching window of the first arrival has passed. */
            int64_t wake = -1; /* -1: run now, 0: no timeout */
            if (!s->waiting) {
                wake = 0;
            } else if (!n_ready) {
                wake = now + 1000;
            } else if (s->cfg.batch_window_us > 0 && !closing) {
                if (!window_end) window_end = now + s->cfg.batch_window_us;
                if (now < window_end && n_ready < s->cfg.max_running) wake = window_end;
            }
            if (wake >= 0) {
                /* deadlines of waiting requests are checked at least every 5 ms */
                if (s->waiting && wake > now + 5000) wake = now + 5000;
                pthread_mutex_lock(&s->mu);
                sched_eta_publish(s, now);
                if (!s->inbox && !s->closing) {
                    if (wake) cv_wait_until(s, wake);
                    else pthread_cond_wait(&s->cv, &s->mu);
                }
                pthread_mutex_unlock(&s->mu);
                continue;
            }
        }
        window_end = 0;
        sched_class_balance(s);
        sched_admit_waiting(s, pl_mono_us());
        int ran = sched_step(s);
        pthread_mutex_lock(&s->mu);
        s->st.running = sched_list_len(s->running);
        s->st.waiting = sched_list_len(s->waiting);
        s->st.parked = sched_list_len(s->parked);
        for (int c = 0; c < ENG_SCHED_CLASSES; c++)
            s->st.running_class[c] = s->st.waiting_class[c] = 0;
        for (const sched_req *r = s->running; r; r = r->next) s->st.running_class[r->cls]++;
        for (const sched_req *r = s->waiting; r; r = r->next) s->st.waiting_class[r->cls]++;
        running_held(s, s->st.blocks_held);
        sched_eta_publish(s, pl_mono_us());
        for (int k = 0; k < 2; k++)
            if (s->st.blocks_held[k] > s->st.blocks_held_peak[k])
                s->st.blocks_held_peak[k] = s->st.blocks_held[k];
        /* Nothing could run (memory held elsewhere): do not spin. */
        if (!ran && !s->inbox && !s->closing) cv_wait_until(s, pl_mono_us() + 1000);
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}
