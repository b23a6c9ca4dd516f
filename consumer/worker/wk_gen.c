/*
 * wk_gen.c -- generation side of a turn: submission to the scheduler and
 * the callbacks its delivery thread runs.  Tokens are detokenized as they
 * come (eng_tok_stream: every piece is whole UTF-8), accumulated into the
 * reply text, and for streaming turns cut into TokenChunks produced through
 * the idempotent producer under the turn's attempt id.  The final chunk
 * (last = true) is produced before the TurnResult is built, and both use
 * the same text, so the chunks of the counted attempt concatenate to the
 * result's text.  Stop strings end generation through eng_sched_stop, and
 * the reply ends where the first stop string begins (the stop string and
 * anything after it are not part of it; the tokens list keeps every
 * generated id up to the one that completed the stop string, and none the
 * loop generated after it before it saw the stop).  So that no chunk
 * streams text the stop string later cuts, a streaming turn with stop
 * strings holds back its last (longest stop - 1) bytes, backed off to a
 * UTF-8 character boundary, until the next chunk or the last one.
 *
 * Spec 1.2: every choice of an n > 1 turn has its own delivery state
 * (wk_choice: text, detokenizer, stop strings stopped per choice, chunks
 * naming their index, one seq counter over all); logprobs are kept as ids
 * and numbers and written out with their texts (wk_reply.c); a turn with
 * tools holds back streamed text from where a call may begin, and when it
 * ends its calls are read from each choice's reply and the text becomes
 * what lies outside them (wk_tools.h).  The TurnResult carries choice 0 in
 * its own fields and the others in `choices`; a choice that failed fails
 * the turn.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wk_internal.h"
#include "pl_time.h"

static int wk_text_append(wk_choice *c, const char *p, size_t n) {
    if (c->text_len + n + 1 > c->text_cap) {
        size_t cap = c->text_cap ? c->text_cap : 256;
        while (cap < c->text_len + n + 1) cap *= 2;
        char *x = realloc(c->text, cap);
        if (!x) return -1;
        c->text = x;
        c->text_cap = cap;
    }
    memcpy(c->text + c->text_len, p, n);
    c->text_len += n;
    c->text[c->text_len] = 0;
    return 0;
}

/* Keep a token's log-probabilities (logprobs turns).  -1 out of memory. */
static int wk_lp_push(wk_choice *c, const eng_sched_token *ev) {
    if (c->n_lp == c->cap_lp) {
        int cap = c->cap_lp ? 2 * c->cap_lp : 64;
        wk_lp *x = realloc(c->lp, (size_t)cap * sizeof *x);
        if (!x) return -1;
        c->lp = x;
        c->cap_lp = cap;
    }
    if (c->n_tops + ev->n_top > c->cap_tops) {
        int cap = c->cap_tops ? 2 * c->cap_tops : 256;
        while (cap < c->n_tops + ev->n_top) cap *= 2;
        eng_sampler_lp *x = realloc(c->tops, (size_t)cap * sizeof *x);
        if (!x) return -1;
        c->tops = x;
        c->cap_tops = cap;
    }
    c->lp[c->n_lp++] = (wk_lp){ev->token, ev->logprob, c->n_tops, ev->n_top};
    if (ev->n_top) memcpy(c->tops + c->n_tops, ev->top, (size_t)ev->n_top * sizeof *ev->top);
    c->n_tops += ev->n_top;
    return 0;
}

/* Under chp_mu: when the chunk producer is in a fatal state (idempotence
 * broken, e.g. an out-of-order sequence after the broker lost the producer
 * state), build a new one in its place.  Chunks still queued in the old one
 * are lost -- streaming is at-least-once per attempt and best effort across
 * such an error; the TurnResult, on the transactional producer, is not
 * affected.  If the new one cannot be made the old one stays and the next
 * chunk tries again.  PARLEY_TEST_CHUNK_FATAL_AFTER=N injects the fatal
 * error (librdkafka's rd_kafka_test_fatal_error) once, before chunk N + 1. */
static void wk_chp_check(wk_worker *w) {
    char why[512], err[PL_ERR_LEN];
    if (w->prod.test_fatal_at > 0 &&
        (long)__atomic_load_n(&w->met.ctr.chunks, __ATOMIC_RELAXED) >= w->prod.test_fatal_at) {
        w->prod.test_fatal_at = 0;
        rd_kafka_test_fatal_error(w->prod.chp, RD_KAFKA_RESP_ERR_OUT_OF_ORDER_SEQUENCE_NUMBER,
                                  "injected by PARLEY_TEST_CHUNK_FATAL_AFTER");
    }
    if (rd_kafka_fatal_error(w->prod.chp, why, sizeof why) == RD_KAFKA_RESP_ERR_NO_ERROR) return;
    rd_kafka_t *fresh = NULL;
    if (wk_kafka_chp_new(w, &fresh, err, sizeof err) != 0) {
        wk_log("error", "chunk_producer_fatal", "err=\"%.200s\" rebuild=\"%s\"", why, err);
        return;
    }
    rd_kafka_t *old = w->prod.chp;
    w->prod.chp = fresh;
    rd_kafka_destroy(old);
    uint64_t n = WK_ADD(w->met.ctr.chunk_rebuilds, 1);
    wk_log("warn", "chunk_producer_rebuilt", "err=\"%.200s\" rebuilds=%llu", why,
           (unsigned long long)n);
}

/* End of the text a non-final chunk of choice c may carry: text_len less
 * the bytes a stop string could still claim, backed off to a character
 * boundary. */
static size_t wk_stream_safe_end(const wk_turn *t, const wk_choice *c) {
    size_t hold = 0;
    for (int i = 0; i < t->n_stop; i++) {
        size_t sl = strlen(t->stop[i]);
        if (sl > hold + 1) hold = sl - 1;
    }
    size_t end = c->text_len > hold ? c->text_len - hold : 0;
    /* a turn with tools: not from where a call begins or may begin */
    size_t tools_end = c->text ? wk_tools_stream_safe(&t->tools, c->text, c->text_len) : 0;
    if (tools_end < end) end = tools_end;
    if (end < c->chunk_from) return c->chunk_from;
    while (end > c->chunk_from && end < c->text_len && ((unsigned char)c->text[end] & 0xC0) == 0x80)
        end--;
    return end;
}

/* Produce choice k's open chunk (text since chunk_from up to the safe end,
 * or all of it when final; its tokens and their logprobs) with seq++;
 * last marks the attempt's final chunk. */
static void wk_chunk_emit(wk_turn *t, int k, int final, int last) {
    wk_worker *w = t->w;
    wk_choice *ch = &t->ch[k];
    if (!last) wk_test_hold_trigger(w, WK_HOLD_CHUNK, ch->n_toks);
    size_t end = final ? ch->text_len : wk_stream_safe_end(t, ch);
    if (end < ch->chunk_from) end = ch->chunk_from; /* (a final text shorter than streamed) */
    sch_chunk c;
    sch_chunk_init(&c);
    c.conversation_id = sch_str_c(t->conv_id);
    c.turn_id = sch_str_c(t->turn_id);
    c.attempt = t->attempt;
    c.seq = t->seq++;
    c.index = (uint32_t)k;
    c.text = (sch_str){ch->text ? ch->text + ch->chunk_from : "", end - ch->chunk_from};
    uint32_t *toks = NULL;
    wk_lp_set lps = {0};
    if (ch->n_ctoks) {
        toks = malloc((size_t)ch->n_ctoks * sizeof *toks);
        if (!toks) return;
        for (int i = 0; i < ch->n_ctoks; i++) toks[i] = (uint32_t)ch->ctoks[i];
        /* the open chunk's tokens are the last n_ctoks delivered */
        if (t->logprobs && ch->n_lp == ch->n_toks &&
            wk_lp_set_build(w, ch, ch->n_toks - ch->n_ctoks, ch->n_toks, &lps) == 0) {
            c.logprobs = lps.lp;
            c.n_logprobs = (size_t)ch->n_ctoks;
        }
    }
    c.tokens = toks;
    c.n_tokens = (size_t)ch->n_ctoks;
    c.last = last != 0;
    sch_buf b;
    sch_buf_init(&b);
    char err[PL_ERR_LEN];
    if ((t->json_out ? sch_chunk_encode_json(&c, &b, err, sizeof err)
                     : sch_chunk_encode(&c, &b, err, sizeof err)) != 0) {
        wk_log("error", "chunk_encode", "turn_id=\"%.100s\" err=\"%s\"", t->turn_id, err);
        goto done;
    }
    for (int tries = 0; tries < 1000; tries++) {
        rd_kafka_headers_t *h = rd_kafka_headers_new(2);
        rd_kafka_header_add(h, SCH_HEADER_CONTENT_TYPE, -1,
                            t->json_out ? SCH_CONTENT_TYPE_JSON : SCH_CONTENT_TYPE, -1);
        if (t->tp[0]) rd_kafka_header_add(h, SCH_HEADER_TRACEPARENT, -1, t->tp, -1);
        pthread_mutex_lock(&w->prod.chp_mu);
        wk_chp_check(w);
        rd_kafka_resp_err_t e = rd_kafka_producev(
            w->prod.chp, RD_KAFKA_V_TOPIC(w->topics.tokens),
            RD_KAFKA_V_KEY(t->conv_id, strlen(t->conv_id)), RD_KAFKA_V_VALUE(b.data, b.len),
            RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY), RD_KAFKA_V_HEADERS(h), RD_KAFKA_V_END);
        pthread_mutex_unlock(&w->prod.chp_mu);
        if (e == RD_KAFKA_RESP_ERR_NO_ERROR) {
            WK_ADD(w->met.ctr.chunks, 1);
            break;
        }
        rd_kafka_headers_destroy(h);
        if (e != RD_KAFKA_RESP_ERR__QUEUE_FULL && (e != RD_KAFKA_RESP_ERR__FATAL || tries > 0)) {
            wk_log("error", "chunk_produce", "turn_id=\"%.100s\" err=\"%s\"", t->turn_id,
                   rd_kafka_err2str(e));
            break;
        }
        if (e == RD_KAFKA_RESP_ERR__FATAL) continue; /* wk_chp_check rebuilds it */
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
done:
    sch_buf_free(&b);
    wk_lp_set_free(&lps);
    free(toks);
    ch->chunk_from = end;
    ch->n_ctoks = 0;
}

static void wk_on_token(void *user, uint64_t id, const eng_sched_token *ev) {
    wk_turn *t = user;
    wk_worker *w = t->w;
    if (ev->choice < 0 || ev->choice >= t->n_choices) return;
    wk_choice *c = &t->ch[ev->choice];
    if (c->stopped) return; /* generated after the stop string: not the turn's */
    size_t n = 0;
    size_t before = c->text_len;
    if (eng_tok_stream_push(&c->ts, ev->token, w->eng.dscratch, w->eng.dscratch_cap, &n) == 0)
        wk_text_append(c, w->eng.dscratch, n);
    if (c->n_ctoks == c->cap_ctoks) {
        int cap = c->cap_ctoks ? 2 * c->cap_ctoks : 16;
        int32_t *x = realloc(c->ctoks, (size_t)cap * sizeof *x);
        if (!x) return;
        c->ctoks = x;
        c->cap_ctoks = cap;
    }
    c->ctoks[c->n_ctoks++] = ev->token;
    c->n_toks++;
    if (t->logprobs && ev->has_logprobs && c->n_lp == c->n_toks - 1) wk_lp_push(c, ev);
    if (t->n_stop && c->text) {
        for (int i = 0; i < t->n_stop; i++) {
            size_t sl = strlen(t->stop[i]);
            size_t from = before >= sl ? before - sl + 1 : 0;
            const char *at = c->text_len >= sl
                                 ? memmem(c->text + from, c->text_len - from, t->stop[i], sl)
                                 : NULL;
            if (at) {
                /* the reply ends before the stop string (chunk_from <= at: see wk_stream_safe_end) */
                c->text_len = (size_t)(at - c->text);
                c->text[c->text_len] = 0;
                c->stopped = 1;
                c->stop_keep = ev->index + 1;
                if (t->n_choices > 1)
                    eng_sched_stop_choice(w->eng.sched, id, ev->choice, c->stop_keep);
                else eng_sched_stop(w->eng.sched, id, c->stop_keep);
                break;
            }
        }
    }
    if (t->stream && c->n_ctoks >= w->chunk_tokens) wk_chunk_emit(t, ev->choice, 0, 0);
    else if (!t->stream && c->n_toks % w->chunk_tokens == 0) /* where a chunk would be cut */
        wk_test_hold_trigger(w, WK_HOLD_CHUNK, c->n_toks);
}

static sch_finish wk_finish(eng_sched_finish f) {
    switch (f) {
    case ENG_SCHED_STOP: return SCH_FINISH_STOP;
    case ENG_SCHED_LENGTH: return SCH_FINISH_LENGTH;
    case ENG_SCHED_EXPIRED: return SCH_FINISH_EXPIRED;
    default: return SCH_FINISH_ERROR;
    }
}

/* How one choice ended, as the TurnResult reports it: a choice that met a
 * stop string ends there even when the loop ended it on its own (length,
 * a stop token) before it saw the flag -- the ids past the one that
 * completed the stop string are not the turn's. */
typedef struct wk_outcome {
    eng_sched_finish finish; /* why it ended */
    const int32_t *tokens;   /* its tokens */
    int n_tokens;            /* how many count */
    const char *error;       /* engine message when finish is ERROR */
} wk_outcome;

static wk_outcome wk_outcome_of(const wk_turn *t, const eng_sched_result *r, int k) {
    wk_outcome o;
    if (k == 0 || r->n_choices <= k) {
        o = (wk_outcome){r->finish, r->tokens, r->n_tokens, r->error};
        if (k) o.n_tokens = 0; /* an engine without choices: none */
    } else {
        const eng_sched_choice *c = &r->choices[k];
        o = (wk_outcome){c->finish, c->tokens, c->n_tokens, c->error};
    }
    const wk_choice *c = &t->ch[k];
    if (c->stopped && (o.n_tokens > c->stop_keep || o.finish == ENG_SCHED_LENGTH)) {
        if (o.n_tokens > c->stop_keep) o.n_tokens = c->stop_keep;
        o.finish = ENG_SCHED_STOP;
    }
    return o;
}

/* tokens as the wire's uint32 array (NULL when none or out of memory). */
static uint32_t *wk_u32(const int32_t *t, int n) {
    uint32_t *u = n > 0 ? malloc((size_t)n * sizeof *u) : NULL;
    for (int i = 0; u && i < n; i++) u[i] = (uint32_t)t[i];
    return u;
}

/* The error a finished choice reports (0 when it has none). */
static int wk_outcome_error(const wk_outcome *o, const char **msg) {
    switch (o->finish) {
    case ENG_SCHED_EXPIRED: *msg = "deadline_ms passed during generation"; return SCH_E_EXPIRED;
    case ENG_SCHED_CANCELLED: *msg = "turn cancelled (worker shutting down)"; return SCH_E_INTERNAL;
    case ENG_SCHED_ERROR:
        *msg = o->error && *o->error ? o->error : "engine error";
        /* a constraint over its time budget, or its matcher failing */
        return !strncmp(*msg, "constraint", 10) ? SCH_E_BAD_CONSTRAINT : SCH_E_INTERNAL;
    default: return 0;
    }
}

/* Encode t's TurnResult from r (NULL: submission failed with msg, code;
 * NULL with code 0: cancelled before it ran).  A choice the engine ended
 * ENG_SCHED_CANCELLED because a CancelTurn asked (t->cancel_req) ends
 * `cancelled` with what it had generated, not as an error. */
static void wk_result_build(wk_turn *t, const eng_sched_result *r, const char *msg, int code) {
    wk_worker *w = t->w;
    int n = r ? t->n_choices : 1;
    sch_result s;
    sch_result_init(&s);
    s.conversation_id = sch_str_c(t->conv_id);
    s.turn_id = sch_str_c(t->turn_id);
    s.attempt = t->attempt;
    s.text = (sch_str){t->ch[0].text ? t->ch[0].text : "", t->ch[0].text_len};
    s.worker = sch_str_c(w->id);
    s.model = sch_str_c(w->eng.model_name);
    int64_t before_submit = t->submit_unix_ms - t->queued_unix_ms;
    if (before_submit < 0) before_submit = 0;
    s.prompt_tokens = (uint64_t)t->n_prompt;
    uint32_t *toks[SCH_MAX_N] = {0};
    wk_lp_set lps[SCH_MAX_N];
    sch_choice more[SCH_MAX_N - 1];
    memset(lps, 0, sizeof lps);
    if (r) {
        s.cached_tokens = (uint64_t)r->cached_tokens;
        s.queue_ms = (uint64_t)before_submit + (uint64_t)r->queue_ms;
        s.ttft_ms = (uint64_t)r->ttft_ms;
        s.total_ms = (uint64_t)r->total_ms;
        const char *fail_msg = NULL;
        int fail_code = 0, n_cancelled = 0;
        bool asked = __atomic_load_n(&t->cancel_req, __ATOMIC_ACQUIRE);
        for (int k = 0; k < n; k++) {
            wk_outcome o = wk_outcome_of(t, r, k);
            const wk_choice *c = &t->ch[k];
            const char *why;
            bool cancelled = asked && o.finish == ENG_SCHED_CANCELLED;
            int ecode = cancelled ? 0 : wk_outcome_error(&o, &why);
            n_cancelled += cancelled;
            if (ecode && !fail_code) { /* a turn that fails fails as a whole */
                fail_code = ecode;
                fail_msg = why;
            }
            toks[k] = wk_u32(o.tokens, o.n_tokens);
            size_t nt = toks[k] ? (size_t)o.n_tokens : 0;
            s.completion_tokens += nt;
            if (t->logprobs && nt && c->n_lp >= (int)nt) wk_lp_set_build(w, c, 0, (int)nt, &lps[k]);
            sch_choice ch = {(uint32_t)k,
                             {c->text ? c->text : "", c->text_len},
                             toks[k],
                             nt,
                             cancelled ? SCH_FINISH_CANCELLED : wk_finish(o.finish),
                             lps[k].lp,
                             lps[k].lp ? nt : 0,
                             c->calls.calls,
                             (size_t)c->calls.n};
            sch_result_set_choice(&s, more, &ch);
        }
        if (fail_code) sch_result_fail(&s, fail_code, sch_str_c(fail_msg));
        else if (n_cancelled) WK_ADD(w->met.ctr.cancelled, 1);
    } else if (!code) {
        s.finish_reason = SCH_FINISH_CANCELLED;
        WK_ADD(w->met.ctr.cancelled, 1);
    } else {
        sch_result_fail(&s, code, sch_str_c(msg));
    }
    char err[PL_ERR_LEN];
    t->result_rc =
        wk_result_encode(&s, t->json_out, w->eng.lim.max_total_bytes, &t->result, err, sizeof err);
    if (t->result_rc)
        wk_log("error", "result_encode", "turn_id=\"%.100s\" err=\"%s\"", t->turn_id, err);
    for (int k = 0; k < SCH_MAX_N; k++) {
        free(toks[k]);
        wk_lp_set_free(&lps[k]);
    }
}

static void wk_done_push(wk_turn *t) {
    wk_worker *w = t->w;
    pthread_mutex_lock(&w->convs.mu);
    t->dnext = NULL;
    if (w->convs.done_tail) w->convs.done_tail->dnext = t;
    else w->convs.done_head = t;
    w->convs.done_tail = t;
    if (w->convs.wake) rd_kafka_queue_yield(w->convs.wake); /* the poll loop takes it now */
    pthread_mutex_unlock(&w->convs.mu);
}

static void wk_on_done(void *user, uint64_t id, const eng_sched_result *res) {
    wk_turn *t = user;
    wk_worker *w = t->w;
    wk_outcome o0 = wk_outcome_of(t, res, 0);
    for (int k = 0; k < t->n_choices; k++) {
        wk_choice *c = &t->ch[k];
        size_t n = 0;
        if (eng_tok_stream_flush(&c->ts, w->eng.dscratch, w->eng.dscratch_cap, &n) == 0 && n &&
            !c->stopped)
            wk_text_append(c, w->eng.dscratch, n);
    }
    if (t->tools.mode != WK_TOOLS_OFF) /* the calls, and the text is the rest */
        for (int k = 0; k < t->n_choices; k++) {
            wk_choice *c = &t->ch[k];
            if (wk_tools_read(&t->tools, c->text ? c->text : "", c->text_len, t->turn_id, k,
                              &c->calls) == 0) {
                c->text_len = 0;
                if (c->calls.content_len) wk_text_append(c, c->calls.content, c->calls.content_len);
            }
        }
    if (!__atomic_load_n(&t->orphan, __ATOMIC_ACQUIRE)) {
        if (t->stream)
            for (int k = 0; k < t->n_choices; k++) wk_chunk_emit(t, k, 1, k == t->n_choices - 1);
        wk_result_build(t, res, NULL, 0);
        if (w->convs.handoff &&
            (t->final_toks =
                 malloc(((size_t)t->n_prompt + (size_t)o0.n_tokens) * sizeof(int32_t)))) {
            memcpy(t->final_toks, t->prompt, (size_t)t->n_prompt * sizeof(int32_t));
            if (o0.n_tokens)
                memcpy(t->final_toks + t->n_prompt, o0.tokens,
                       (size_t)o0.n_tokens * sizeof(int32_t));
            t->n_final = t->n_prompt + o0.n_tokens;
        }
        uint64_t gen = 0;
        for (int k = 0; k < t->n_choices; k++) gen += (uint64_t)wk_outcome_of(t, res, k).n_tokens;
        WK_ADD(w->met.ctr.tokens, gen);
        WK_ADD(w->met.ctr.prompt_tokens, (uint64_t)res->prompt_tokens);
        WK_ADD(w->met.ctr.cached_tokens, (uint64_t)res->cached_tokens);
        int bt = 0, bo = 0;
        while (bt < WK_LAT_N - 1 && res->ttft_ms > wk_lat_bounds_ms[bt]) bt++;
        while (bo < WK_LAT_N - 1 && res->total_ms > wk_lat_bounds_ms[bo]) bo++;
        WK_ADD(w->met.ctr.ttft_hist[bt], 1);
        WK_ADD(w->met.ctr.total_hist[bo], 1);
        WK_ADD(w->met.ctr.ttft_sum_us, (uint64_t)(res->ttft_ms * 1000));
        WK_ADD(w->met.ctr.total_sum_us, (uint64_t)(res->total_ms * 1000));
        int tb = 0; /* turn-index bucket: 1, 2, 3-4, 5-8, 9-16, 17+ */
        while (tb < WK_TURN_N - 1 && t->turn_index > (1 << tb)) tb++;
        WK_ADD(w->met.ctr.ttft_turn_hist[tb][bt], 1);
        WK_ADD(w->met.ctr.ttft_turn_sum_us[tb], (uint64_t)(res->ttft_ms * 1000));
        WK_ADD(w->met.ctr.class_turns[t->service_class], 1);
        WK_ADD(w->met.ctr.ttft_class_hist[t->service_class][bt], 1);
        WK_ADD(w->met.ctr.ttft_class_sum_us[t->service_class], (uint64_t)(res->ttft_ms * 1000));
        /* the conversation's next history: this turn as it ran and replied
         * (choice 0; a client that goes on with another choice's text gets
         * no splice, only a re-render) */
        const wk_choice *c0 = &t->ch[0];
        if (t->n_msgs && w->convs.hist_max &&
            (o0.finish == ENG_SCHED_STOP || o0.finish == ENG_SCHED_LENGTH))
            t->hist =
                wk_history_new(&t->rt, t->n_msgs, t->ns, t->prompt, t->n_prompt, o0.tokens,
                               o0.n_tokens, c0->text ? c0->text : "", c0->text ? c0->text_len : 0);
    }
    t->tm.admit_us = res->admit_us;
    t->tm.end_us = res->submit_us + (int64_t)(res->total_ms * 1000.0);
    wk_done_push(t);
}

/* The worker code of a scheduler refusal at submit. */
static int wk_submit_code(int rc) {
    return rc == ENG_SCHED_ECONSTRAINT ? SCH_E_BAD_CONSTRAINT
           : rc == ENG_SCHED_ENOTSUP   ? SCH_E_UNSUPPORTED
                                       : SCH_E_INTERNAL;
}

void wk_turn_submit(wk_turn *t) {
    wk_worker *w = t->w;
    t->attempt = w->convs.attempt_base + ++w->convs.attempt_ctr;
    t->submit_unix_ms = pl_unix_ms();
    t->tm.submit_us = eng_sched_now_us();
    for (int k = 0; k < t->n_choices; k++) eng_tok_stream_init(&t->ch[k].ts, w->eng.tok, 0);
    eng_sched_request q;
    memset(&q, 0, sizeof q);
    q.prompt = t->prompt;
    q.n_prompt = t->n_prompt;
    q.sampling = t->sampling;
    q.max_tokens = t->max_tokens;
    q.ns = t->ns;
    q.ns_len = strlen(t->ns);
    q.deadline_us = t->deadline_us;
    q.service_class = t->service_class;
    q.compiled = t->cons; /* the scheduler takes it, whatever submit returns */
    t->cons = NULL;
    q.logprobs = t->logprobs;
    q.top_logprobs = t->top_logprobs;
    q.n = t->n_choices;
    q.on_token = wk_on_token;
    q.on_done = wk_on_done;
    q.user = t;
    char err[PL_ERR_LEN];
    int rc = eng_sched_submit(w->eng.sched, &q, &t->sched_id, err, sizeof err);
    if (rc != 0) {
        wk_log("warn", "submit_failed", "turn_id=\"%.100s\" err=\"%s\"", t->turn_id, err);
        if (t->stream) wk_chunk_emit(t, 0, 1, 1);
        wk_result_build(t, NULL, err, wk_submit_code(rc));
        wk_done_push(t);
    }
}

void wk_turn_cancel_unrun(wk_turn *t) {
    wk_worker *w = t->w;
    t->attempt = w->convs.attempt_base + ++w->convs.attempt_ctr;
    t->submit_unix_ms = pl_unix_ms();
    t->tm.submit_us = eng_sched_now_us();
    for (int k = 0; k < t->n_choices; k++) eng_tok_stream_init(&t->ch[k].ts, w->eng.tok, 0);
    if (t->stream) wk_chunk_emit(t, 0, 1, 1);
    wk_result_build(t, NULL, NULL, 0);
}

wk_out *wk_turn_take_out(wk_turn *t) {
    if (t->result_rc || !t->result.len) return NULL;
    wk_out *o = calloc(1, sizeof *o);
    if (!o) return NULL;
    o->key = strdup(t->conv_id);
    if (!o->key) {
        free(o);
        return NULL;
    }
    o->key_len = strlen(t->conv_id);
    o->val = t->result;
    o->json = t->json_out;
    sch_buf_init(&t->result);
    memcpy(o->tp, t->tp, sizeof o->tp);
    o->partition = t->partition;
    o->offset = t->offset;
    o->gen = t->gen;
    o->tm = t->tm;
    return o;
}
