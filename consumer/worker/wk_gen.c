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
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "wk_internal.h"

static int wk_text_append(wk_turn *t, const char *p, size_t n) {
    if (t->text_len + n + 1 > t->text_cap) {
        size_t cap = t->text_cap ? t->text_cap : 256;
        while (cap < t->text_len + n + 1) cap *= 2;
        char *x = realloc(t->text, cap);
        if (!x) return -1;
        t->text = x;
        t->text_cap = cap;
    }
    memcpy(t->text + t->text_len, p, n);
    t->text_len += n;
    t->text[t->text_len] = 0;
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
    uint64_t n = __atomic_add_fetch(&w->met.ctr.chunk_rebuilds, 1, __ATOMIC_RELAXED);
    wk_log("warn", "chunk_producer_rebuilt", "err=\"%.200s\" rebuilds=%llu", why,
           (unsigned long long)n);
}

/* End of the text a non-final chunk may carry: text_len less the bytes a
 * stop string could still claim, backed off to a character boundary. */
static size_t wk_stream_safe_end(const wk_turn *t) {
    size_t hold = 0;
    for (int i = 0; i < t->n_stop; i++) {
        size_t sl = strlen(t->stop[i]);
        if (sl > hold + 1) hold = sl - 1;
    }
    size_t end = t->text_len > hold ? t->text_len - hold : 0;
    if (end < t->chunk_from) return t->chunk_from;
    while (end > t->chunk_from && end < t->text_len && ((unsigned char)t->text[end] & 0xC0) == 0x80)
        end--;
    return end;
}

/* Produce the open chunk (text since chunk_from up to the safe end, or all
 * of it when last; ctoks) with seq++. */
static void wk_chunk_emit(wk_turn *t, int last) {
    wk_worker *w = t->w;
    size_t end = last ? t->text_len : wk_stream_safe_end(t);
    sch_chunk c;
    sch_chunk_init(&c);
    c.conversation_id = sch_str_c(t->conv_id);
    c.turn_id = sch_str_c(t->turn_id);
    c.attempt = t->attempt;
    c.seq = t->seq++;
    c.text = (sch_str){t->text ? t->text + t->chunk_from : "", end - t->chunk_from};
    uint32_t *toks = NULL;
    if (t->n_ctoks) {
        toks = malloc((size_t)t->n_ctoks * sizeof *toks);
        if (!toks) return;
        for (int i = 0; i < t->n_ctoks; i++) toks[i] = (uint32_t)t->ctoks[i];
    }
    c.tokens = toks;
    c.n_tokens = (size_t)t->n_ctoks;
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
            __atomic_add_fetch(&w->met.ctr.chunks, 1, __ATOMIC_RELAXED);
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
    free(toks);
    t->chunk_from = end;
    t->n_ctoks = 0;
}

static void wk_on_token(void *user, uint64_t id, int32_t token, int index, const float *logits) {
    wk_turn *t = user;
    wk_worker *w = t->w;
    if (t->stopped) return; /* generated after the stop string: not the turn's */
    size_t n = 0;
    size_t before = t->text_len;
    if (eng_tok_stream_push(&t->ts, token, w->eng.dscratch, w->eng.dscratch_cap, &n) == 0 &&
        !t->stopped)
        wk_text_append(t, w->eng.dscratch, n);
    if (t->n_ctoks == t->cap_ctoks) {
        int cap = t->cap_ctoks ? 2 * t->cap_ctoks : 16;
        int32_t *x = realloc(t->ctoks, (size_t)cap * sizeof *x);
        if (!x) return;
        t->ctoks = x;
        t->cap_ctoks = cap;
    }
    t->ctoks[t->n_ctoks++] = token;
    if (t->n_stop && !t->stopped && t->text) {
        for (int i = 0; i < t->n_stop; i++) {
            size_t sl = strlen(t->stop[i]);
            size_t from = before >= sl ? before - sl + 1 : 0;
            const char *at = t->text_len >= sl
                                 ? memmem(t->text + from, t->text_len - from, t->stop[i], sl)
                                 : NULL;
            if (at) {
                /* the reply ends before the stop string (chunk_from <= at: see wk_stream_safe_end) */
                t->text_len = (size_t)(at - t->text);
                t->text[t->text_len] = 0;
                t->stopped = 1;
                t->stop_keep = index + 1;
                eng_sched_stop(w->eng.sched, id, t->stop_keep);
                break;
            }
        }
    }
    if (t->stream && t->n_ctoks >= w->chunk_tokens) wk_chunk_emit(t, 0);
}

static sch_finish wk_finish(eng_sched_finish f) {
    switch (f) {
    case ENG_SCHED_STOP: return SCH_FINISH_STOP;
    case ENG_SCHED_LENGTH: return SCH_FINISH_LENGTH;
    case ENG_SCHED_EXPIRED: return SCH_FINISH_EXPIRED;
    default: return SCH_FINISH_ERROR;
    }
}

/* Encode t's TurnResult from r (NULL: submission failed with msg). */
static void wk_result_build(wk_turn *t, const eng_sched_result *r, const char *msg) {
    wk_worker *w = t->w;
    sch_result s;
    sch_result_init(&s);
    s.conversation_id = sch_str_c(t->conv_id);
    s.turn_id = sch_str_c(t->turn_id);
    s.attempt = t->attempt;
    s.text = (sch_str){t->text ? t->text : "", t->text_len};
    s.worker = sch_str_c(w->id);
    s.model = sch_str_c(w->eng.model_name);
    uint32_t *toks = NULL;
    if (r && r->n_tokens > 0) {
        toks = malloc((size_t)r->n_tokens * sizeof *toks);
        if (toks) {
            for (int i = 0; i < r->n_tokens; i++) toks[i] = (uint32_t)r->tokens[i];
            s.tokens = toks;
            s.n_tokens = (size_t)r->n_tokens;
        }
    }
    int64_t before_submit = t->submit_unix_ms - t->queued_unix_ms;
    if (before_submit < 0) before_submit = 0;
    s.prompt_tokens = (uint64_t)t->n_prompt;
    if (r) {
        s.finish_reason = wk_finish(r->finish);
        s.cached_tokens = (uint64_t)r->cached_tokens;
        s.completion_tokens = (uint64_t)r->n_tokens;
        s.queue_ms = (uint64_t)before_submit + (uint64_t)r->queue_ms;
        s.ttft_ms = (uint64_t)r->ttft_ms;
        s.total_ms = (uint64_t)r->total_ms;
        if (r->finish == ENG_SCHED_EXPIRED) {
            s.has_error = true;
            s.error_code = SCH_E_EXPIRED;
            s.error_message = sch_str_c("deadline_ms passed during generation");
        } else if (r->finish == ENG_SCHED_ERROR || r->finish == ENG_SCHED_CANCELLED) {
            s.has_error = true;
            s.error_code = SCH_E_INTERNAL;
            s.error_message =
                sch_str_c(r->finish == ENG_SCHED_CANCELLED ? "turn cancelled (worker shutting down)"
                          : r->error && *r->error          ? r->error
                                                           : "engine error");
        }
    } else {
        s.finish_reason = SCH_FINISH_ERROR;
        s.has_error = true;
        s.error_code = SCH_E_INTERNAL;
        s.error_message = sch_str_c(msg);
    }
    char err[PL_ERR_LEN];
    int (*enc)(const sch_result *, sch_buf *, char *, size_t) =
        t->json_out ? sch_result_encode_json : sch_result_encode;
    t->result_rc = enc(&s, &t->result, err, sizeof err);
    if (t->result_rc) {
        /* The message (engine text) broke the schema's rules: say so plainly. */
        s.error_message = sch_str_c("engine error (message not representable)");
        t->result_rc = enc(&s, &t->result, err, sizeof err);
        if (t->result_rc)
            wk_log("error", "result_encode", "turn_id=\"%.100s\" err=\"%s\"", t->turn_id, err);
    }
    free(toks);
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
    /* A turn that met a stop string ends there even when the loop ended the
     * request on its own (length, a stop token) before it saw the flag: the
     * ids past the one that completed the stop string are not the turn's. */
    eng_sched_result stopped_res;
    const eng_sched_result *r = res;
    if (t->stopped && (res->n_tokens > t->stop_keep || res->finish == ENG_SCHED_LENGTH)) {
        stopped_res = *res;
        if (stopped_res.n_tokens > t->stop_keep) stopped_res.n_tokens = t->stop_keep;
        stopped_res.finish = ENG_SCHED_STOP;
        r = &stopped_res;
    }
    size_t n = 0;
    if (eng_tok_stream_flush(&t->ts, w->eng.dscratch, w->eng.dscratch_cap, &n) == 0 && n &&
        !t->stopped)
        wk_text_append(t, w->eng.dscratch, n);
    if (!__atomic_load_n(&t->orphan, __ATOMIC_ACQUIRE)) {
        if (t->stream) wk_chunk_emit(t, 1);
        wk_result_build(t, r, NULL);
        if (w->convs.handoff &&
            (t->final_toks =
                 malloc(((size_t)t->n_prompt + (size_t)r->n_tokens) * sizeof(int32_t)))) {
            memcpy(t->final_toks, t->prompt, (size_t)t->n_prompt * sizeof(int32_t));
            if (r->n_tokens)
                memcpy(t->final_toks + t->n_prompt, r->tokens,
                       (size_t)r->n_tokens * sizeof(int32_t));
            t->n_final = t->n_prompt + r->n_tokens;
        }
        __atomic_add_fetch(&w->met.ctr.tokens, (uint64_t)r->n_tokens, __ATOMIC_RELAXED);
        __atomic_add_fetch(&w->met.ctr.prompt_tokens, (uint64_t)r->prompt_tokens, __ATOMIC_RELAXED);
        __atomic_add_fetch(&w->met.ctr.cached_tokens, (uint64_t)r->cached_tokens, __ATOMIC_RELAXED);
        int bt = 0, bo = 0;
        while (bt < WK_LAT_N - 1 && r->ttft_ms > wk_lat_bounds_ms[bt]) bt++;
        while (bo < WK_LAT_N - 1 && r->total_ms > wk_lat_bounds_ms[bo]) bo++;
        __atomic_add_fetch(&w->met.ctr.ttft_hist[bt], 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&w->met.ctr.total_hist[bo], 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&w->met.ctr.ttft_sum_us, (uint64_t)(r->ttft_ms * 1000),
                           __ATOMIC_RELAXED);
        __atomic_add_fetch(&w->met.ctr.total_sum_us, (uint64_t)(r->total_ms * 1000),
                           __ATOMIC_RELAXED);
        int tb = 0; /* turn-index bucket: 1, 2, 3-4, 5-8, 9-16, 17+ */
        while (tb < WK_TURN_N - 1 && t->turn_index > (1 << tb)) tb++;
        WK_ADD(w->met.ctr.ttft_turn_hist[tb][bt], 1);
        WK_ADD(w->met.ctr.ttft_turn_sum_us[tb], (uint64_t)(r->ttft_ms * 1000));
        /* the conversation's next history: this turn as it ran and replied */
        if (t->n_msgs && w->convs.hist_max &&
            (r->finish == ENG_SCHED_STOP || r->finish == ENG_SCHED_LENGTH))
            t->hist =
                wk_history_new(&t->rt, t->n_msgs, t->ns, t->prompt, t->n_prompt, r->tokens,
                               r->n_tokens, t->text ? t->text : "", t->text ? t->text_len : 0);
    }
    t->tm.admit_us = r->admit_us;
    t->tm.end_us = r->submit_us + (int64_t)(r->total_ms * 1000.0);
    wk_done_push(t);
}

void wk_turn_submit(wk_turn *t) {
    wk_worker *w = t->w;
    t->attempt = w->convs.attempt_base + ++w->convs.attempt_ctr;
    t->submit_unix_ms = wk_unix_ms();
    t->tm.submit_us = eng_sched_now_us();
    eng_tok_stream_init(&t->ts, w->eng.tok, 0);
    eng_sched_request q;
    memset(&q, 0, sizeof q);
    q.prompt = t->prompt;
    q.n_prompt = t->n_prompt;
    q.sampling = t->sampling;
    q.max_tokens = t->max_tokens;
    q.ns = t->ns;
    q.ns_len = strlen(t->ns);
    q.deadline_us = t->deadline_us;
    q.on_token = wk_on_token;
    q.on_done = wk_on_done;
    q.user = t;
    char err[PL_ERR_LEN];
    if (eng_sched_submit(w->eng.sched, &q, &t->sched_id, err, sizeof err) != 0) {
        wk_log("warn", "submit_failed", "turn_id=\"%.100s\" err=\"%s\"", t->turn_id, err);
        if (t->stream) wk_chunk_emit(t, 1);
        wk_result_build(t, NULL, err);
        wk_done_push(t);
    }
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
