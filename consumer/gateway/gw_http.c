/*
 * gw_http.c -- libmicrohttpd handlers of `parley gateway`: routing, auth,
 * body limit, chat completions (JSON and SSE), models, health, metrics,
 * the fleet (gw_fleet.h), the playground and fleet pages (see gw_http.h);
 * /v1/responses goes to gw_responses.c.
 */
#define _POSIX_C_SOURCE 200809L
#include "gw_cmd.h" /* GW_E* */
#include "gw_http.h"
#include "gw_sse_buf.h"

#include <arpa/inet.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_cancel.h"
#include "gw_responses.h"
#include "gw_web.h"
#include "oa_openai.h"
#include "pl_err.h"
#include "pl_time.h"

#define GW_NCODES 10 /* status codes counted in /metrics */
static const int gw_codes[GW_NCODES] = {200, 400, 401, 404, 405, 429, 500, 503, 504, 0};
#define GW_NBUCKETS 14 /* latency histogram buckets (seconds), last +Inf */
static const double gw_buckets[GW_NBUCKETS - 1] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5,
                                                   1,     2.5,  5,     10,   30,  60};

struct gw_http {
    struct MHD_Daemon *d;                  /* the server */
    gw_hub *hub;                           /* Kafka side */
    const gw_http_opts *o;                 /* options (borrowed) */
    atomic_int inflight;                   /* chat requests in flight */
    atomic_ullong seq;                     /* turn id counter */
    atomic_ullong by_code[GW_NCODES];      /* responses by status (last: other) */
    atomic_ullong lat_bucket[GW_NBUCKETS]; /* chat latency histogram */
    atomic_ullong lat_count;               /* chat requests timed */
    atomic_ullong lat_sum_us;              /* their total latency, us */
    atomic_ullong streams;                 /* streamed chat requests */
    atomic_ullong disconnects;             /* requests the client left before the reply */
    atomic_ullong cancels;                 /* CancelTurns sent for clients that left */
};

/* Per-request state: the body read so far. */
typedef struct gw_req {
    char *body;  /* bytes received (malloc'd) */
    size_t len;  /* bytes in body */
    int too_big; /* body passed the limit (rest discarded) */
} gw_req;

static void gw_count(gw_http *s, int code) {
    int i = 0;
    while (i < GW_NCODES - 1 && gw_codes[i] != code) i++;
    atomic_fetch_add(&s->by_code[i], 1);
}

static void gw_time(gw_http *s, double ms) {
    int b = 0;
    while (b < GW_NBUCKETS - 1 && ms / 1000.0 > gw_buckets[b]) b++;
    atomic_fetch_add(&s->lat_bucket[b], 1);
    atomic_fetch_add(&s->lat_count, 1);
    atomic_fetch_add(&s->lat_sum_us, (unsigned long long)(ms * 1000.0));
}

/* Queue `body` (len bytes, copied) with a status and content type. */
static enum MHD_Result gw_send(gw_http *s, struct MHD_Connection *c, int status, const char *ctype,
                               const char *body, size_t len) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    if (status == 429) MHD_add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    enum MHD_Result rc = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    gw_count(s, status);
    return rc;
}

/* Queue a JSON document (stolen). */
static enum MHD_Result gw_send_json(gw_http *s, struct MHD_Connection *c, int status, json_t *j) {
    char *txt = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!txt)
        return gw_send(s, c, 500, "application/json",
                       "{\"error\":{\"message\":\"out of "
                       "memory\",\"type\":\"server_error\",\"param\":null,\"code\":null}}",
                       82);
    enum MHD_Result rc = gw_send(s, c, status, "application/json", txt, strlen(txt));
    free(txt);
    return rc;
}

static enum MHD_Result gw_error(gw_http *s, struct MHD_Connection *c, int status, const char *msg,
                                const char *type, const char *param, const char *code) {
    return gw_send_json(s, c, status, oa_error_json(msg, type, param, code));
}

/* The tenant of the request's API key: 0 and *ns set, or -1. */
static int gw_auth(gw_http *s, struct MHD_Connection *c, const char **ns) {
    const gw_http_opts *o = s->o;
    if (o->n_keys == 0) {
        *ns = o->ns;
        return 0;
    }
    const char *a = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!a || strncmp(a, "Bearer ", 7) != 0) return -1;
    a += 7;
    size_t n = strlen(a);
    for (size_t i = 0; i < o->n_keys; i++) {
        const char *k = o->keys[i].key;
        size_t kn = strlen(k);
        unsigned diff = (unsigned)(kn ^ n);
        for (size_t j = 0; j < kn; j++)
            diff |= (unsigned)(unsigned char)k[j] ^ (unsigned)(unsigned char)(j < n ? a[j] : 0);
        if (!diff) {
            *ns = o->keys[i].tenant;
            return 0;
        }
    }
    return -1;
}

static enum MHD_Result gw_models(gw_http *s, struct MHD_Connection *c) {
    json_t *data = json_array();
    for (size_t i = 0; i < s->o->n_models; i++)
        json_array_append_new(data,
                              json_pack("{ss ss sI ss}", "id", s->o->models[i], "object", "model",
                                        "created", (json_int_t)0, "owned_by", "parley"));
    return gw_send_json(s, c, 200, json_pack("{ss so}", "object", "list", "data", data));
}

static enum MHD_Result gw_metrics(gw_http *s, struct MHD_Connection *c) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f) return MHD_NO;
    fprintf(f, "# HELP parley_gateway_requests_total HTTP responses by status code.\n"
               "# TYPE parley_gateway_requests_total counter\n");
    for (int i = 0; i < GW_NCODES; i++) {
        if (gw_codes[i])
            fprintf(f, "parley_gateway_requests_total{code=\"%d\"} %llu\n", gw_codes[i],
                    atomic_load(&s->by_code[i]));
        else
            fprintf(f, "parley_gateway_requests_total{code=\"other\"} %llu\n",
                    atomic_load(&s->by_code[i]));
    }
    fprintf(f,
            "# HELP parley_gateway_inflight Chat requests waiting for their reply.\n"
            "# TYPE parley_gateway_inflight gauge\nparley_gateway_inflight %d\n"
            "# HELP parley_gateway_turns_waiting Turns registered with the Kafka reader.\n"
            "# TYPE parley_gateway_turns_waiting gauge\nparley_gateway_turns_waiting %zu\n"
            "# HELP parley_gateway_streams_total Streamed chat requests.\n"
            "# TYPE parley_gateway_streams_total counter\nparley_gateway_streams_total %llu\n"
            "# HELP parley_gateway_disconnects_total Chat requests the client left before the "
            "reply.\n"
            "# TYPE parley_gateway_disconnects_total counter\n"
            "parley_gateway_disconnects_total %llu\n"
            "# HELP parley_gateway_cancels_total CancelTurns sent for clients that left.\n"
            "# TYPE parley_gateway_cancels_total counter\n"
            "parley_gateway_cancels_total %llu\n"
            "# HELP parley_gateway_latency_seconds Chat request latency (to the last byte).\n"
            "# TYPE parley_gateway_latency_seconds histogram\n",
            atomic_load(&s->inflight), gw_hub_inflight(s->hub), atomic_load(&s->streams),
            atomic_load(&s->disconnects), atomic_load(&s->cancels));
    unsigned long long cum = 0;
    for (int b = 0; b < GW_NBUCKETS; b++) {
        cum += atomic_load(&s->lat_bucket[b]);
        if (b < GW_NBUCKETS - 1)
            fprintf(f, "parley_gateway_latency_seconds_bucket{le=\"%g\"} %llu\n", gw_buckets[b],
                    cum);
        else fprintf(f, "parley_gateway_latency_seconds_bucket{le=\"+Inf\"} %llu\n", cum);
    }
    fprintf(f,
            "parley_gateway_latency_seconds_sum %.6f\nparley_gateway_latency_seconds_count "
            "%llu\n",
            (double)atomic_load(&s->lat_sum_us) / 1e6, atomic_load(&s->lat_count));
    fclose(f);
    enum MHD_Result rc = gw_send(s, c, 200, "text/plain; version=0.0.4", buf, len);
    free(buf);
    return rc;
}

/* GET of a playground file (gw_web.h), with the page's security headers:
 * the CSP, no MIME sniffing, no framing, no referrer. */
static enum MHD_Result gw_web(gw_http *s, struct MHD_Connection *c, const gw_web_asset *a) {
    struct MHD_Response *r =
        MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, a->ctype);
    MHD_add_response_header(r, "Content-Security-Policy", gw_web_csp);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result rc = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    gw_count(s, 200);
    return rc;
}

/* ---- streaming ---------------------------------------------------------- */

/* What was streamed of one choice. */
typedef struct gw_sse_choice {
    char *text;      /* its text forwarded so far (echo excluded) */
    size_t len, cap; /* bytes / allocated */
    size_t n_lp;     /* logprob entries forwarded */
} gw_sse_choice;

/* A streaming reply in progress. */
typedef struct gw_sse {
    gw_http *s;                  /* server */
    struct MHD_Connection *c;    /* its connection (looked at for a client that left) */
    gw_wait *w;                  /* the request's waiter */
    oa_chat q;                   /* the request (owned: legacy, logprobs, echo, prompt) */
    char id[320];                /* chatcmpl-<turn id> / cmpl-<turn id> */
    uint64_t created;            /* unix seconds */
    gw_sse_choice ch[SCH_MAX_N]; /* per choice */
    int n;                       /* choices asked for */
    double t0, deadline;         /* monotonic ms: start, give up */
    double last_out;             /* monotonic ms: bytes last produced (keep-alive every s) */
    int phase;                   /* 0 opening chunks due, 1 streaming, 2 ended */
    int finished;                /* [DONE] was produced */
    gw_sse_buf out;              /* bytes waiting to go out */
} gw_sse;

static void gw_sse_put(gw_sse *e, const char *p, size_t n) { gw_sse_buf_put(&e->out, p, n); }

/* Append one `data: JSON` event (j stolen). */
static void gw_sse_event(gw_sse *e, json_t *j) {
    char *txt = j ? json_dumps(j, JSON_COMPACT) : NULL;
    json_decref(j);
    if (!txt) return;
    gw_sse_put(e, "data: ", 6);
    gw_sse_put(e, txt, strlen(txt));
    gw_sse_put(e, "\n\n", 2);
    free(txt);
}

/* One chunk event with one choice's delta. */
static void gw_sse_delta(gw_sse *e, const oa_delta *d) {
    gw_sse_event(e, oa_chunk_json(&e->q, e->id, e->created, d, NULL));
}

static void gw_sse_done(gw_sse *e, double now) {
    gw_sse_put(e, "data: [DONE]\n\n", 14);
    e->phase = 2;
    e->finished = 1;
    gw_time(e->s, now - e->t0);
}

/* Offset of choice k's streamed text in its OpenAI text (legacy echo). */
static size_t gw_sse_from(const gw_sse *e, int k) {
    return (e->q.echo ? e->q.turn.prompt.len : 0) + e->ch[k].len;
}

/* The rest of choice k from the committed result: its text and logprobs
 * beyond what was streamed, its tool calls as OpenAI streams them (one
 * delta with id, type and name, one with the arguments), its finish. */
static void gw_sse_finish_choice(gw_sse *e, const sch_choice *c) {
    gw_sse_choice *sc = &e->ch[c->index];
    oa_delta d = {.index = c->index};
    json_t *lp = NULL;
    if (e->q.logprobs && c->n_logprobs > sc->n_lp)
        lp = oa_logprobs_content(c->logprobs + sc->n_lp, c->n_logprobs - sc->n_lp);
    if (c->text.len > sc->len || lp) {
        d.text = c->text.ptr + sc->len;
        d.len = c->text.len - sc->len;
        d.text_from = gw_sse_from(e, c->index);
        d.logprobs = lp;
        gw_sse_delta(e, &d);
        json_decref(lp);
    }
    for (size_t i = 0; !e->q.legacy && i < c->n_tool_calls; i++) {
        const sch_tool_call *t = &c->tool_calls[i];
        oa_delta td = {.index = c->index};
        td.tool_calls = json_pack("[{sI ss# ss s{ss# ss}}]", "index", (json_int_t)i, "id",
                                  t->id.ptr, (int)t->id.len, "type", "function", "function", "name",
                                  t->name.ptr, (int)t->name.len, "arguments", "");
        gw_sse_delta(e, &td);
        json_decref(td.tool_calls);
        td.tool_calls = json_pack("[{sI s{ss#}}]", "index", (json_int_t)i, "function", "arguments",
                                  t->arguments.ptr ? t->arguments.ptr : "", (int)t->arguments.len);
        gw_sse_delta(e, &td);
        json_decref(td.tool_calls);
    }
    oa_delta f = {.index = c->index, .finish = oa_finish_name(c)};
    if (e->q.legacy) f.text = "";
    gw_sse_delta(e, &f);
}

/* The committed result arrived: finish the stream. */
static void gw_sse_result(gw_sse *e, const sch_result *r, double now) {
    const char *type, *code;
    char pbuf[32];
    if (r->finish_reason == SCH_FINISH_ERROR || r->finish_reason == SCH_FINISH_EXPIRED) {
        oa_result_status(r, &type, &code);
        gw_sse_event(e,
                     oa_error_json(r->error_message.ptr ? r->error_message.ptr : "the turn failed",
                                   type, oa_result_param(r, pbuf, sizeof pbuf), code));
        gw_sse_done(e, now);
        return;
    }
    int ok = oa_result_choices(r) >= e->n;
    for (int k = 0; ok && k < e->n; k++) {
        sch_choice c;
        oa_result_choice(r, k, &c);
        ok = e->ch[k].len <= c.text.len && !memcmp(e->ch[k].text, c.text.ptr, e->ch[k].len) &&
             e->ch[k].n_lp <= c.n_logprobs;
    }
    if (!ok) {
        gw_sse_event(e, oa_error_json("the turn was redone by another worker and its committed "
                                      "reply differs from the text already streamed; retry "
                                      "the request",
                                      "server_error", NULL, "stream_restarted"));
        gw_sse_done(e, now);
        return;
    }
    for (int k = 0; k < e->n; k++) {
        sch_choice c;
        oa_result_choice(r, k, &c);
        gw_sse_finish_choice(e, &c);
    }
    if (e->q.include_usage) gw_sse_event(e, oa_chunk_json(&e->q, e->id, e->created, NULL, r));
    gw_sse_done(e, now);
}

/* Forward one streamed piece (before the result). */
static void gw_sse_piece(gw_sse *e, const gw_piece *p) {
    if (p->index < 0 || p->index >= e->n) return;
    gw_sse_choice *sc = &e->ch[p->index];
    if (sc->len + p->len + 1 > sc->cap) {
        size_t cap = (sc->len + p->len + 1) * 2;
        char *t = realloc(sc->text, cap);
        if (!t) return; /* not forwarded: the result fills it in */
        sc->text = t;
        sc->cap = cap;
    }
    oa_delta d = {.index = p->index, .text = p->text, .len = p->len};
    d.text_from = gw_sse_from(e, p->index);
    d.logprobs = e->q.logprobs ? p->logprobs : NULL;
    gw_sse_delta(e, &d);
    memcpy(sc->text + sc->len, p->text, p->len);
    sc->len += p->len;
    sc->n_lp += d.logprobs ? json_array_size(d.logprobs) : 0;
}

static ssize_t gw_sse_read(void *cls, uint64_t pos, char *buf, size_t max) {
    gw_sse *e = cls;
    (void)pos;
    while (gw_sse_buf_drained(&e->out)) {
        if (e->phase == 2) return MHD_CONTENT_READER_END_OF_STREAM;
        if (e->phase == 0) {
            /* chat: each choice opens with role assistant; legacy echo: with the prompt */
            for (int k = 0; k < e->n; k++) {
                oa_delta d = {.index = k, .role = 1, .text = "", .len = 0};
                if (e->q.echo) {
                    d.text = e->q.turn.prompt.ptr;
                    d.len = e->q.turn.prompt.len;
                }
                if (!e->q.legacy || e->q.echo) gw_sse_delta(e, &d);
            }
            e->phase = 1;
            if (e->out.len) continue;
        }
        /* a client that closed is noticed here, before a write fails
         * (which takes a piece or a keep-alive, and a second write) */
        if (gw_client_gone(e->c)) return MHD_CONTENT_READER_END_WITH_ERROR;
        double now = pl_mono_msf();
        int wait = (int)(e->deadline - now);
        wait = wait > GW_GONE_CHECK_MS ? GW_GONE_CHECK_MS : wait < 1 ? 1 : wait;
        gw_piece *pieces;
        const sch_result *r;
        gw_wait_poll(e->s->hub, e->w, wait, &pieces, &r);
        now = pl_mono_msf();
        for (gw_piece *p = pieces; p && !r; p = p->next) gw_sse_piece(e, p);
        /* with the result at hand, the result decides what the rest is */
        gw_pieces_free(pieces);
        if (r) gw_sse_result(e, r, now);
        else if (!pieces && now >= e->deadline) {
            gw_sse_event(e, oa_error_json("no reply from the fleet before the gateway's timeout",
                                          "timeout", NULL, "timeout"));
            gw_sse_done(e, now);
        } else if (!pieces && now - e->last_out >= 1000) {
            gw_sse_put(e, ": keep-alive\n\n", 14);
        }
        if (e->out.len) e->last_out = now;
    }
    return (ssize_t)gw_sse_buf_take(&e->out, buf, max);
}

static void gw_sse_free(void *cls) {
    gw_sse *e = cls;
    if (!e->finished) gw_http_client_left(e->s, e->w);
    gw_hub_release(e->s->hub, e->w);
    atomic_fetch_sub(&e->s->inflight, 1);
    for (int k = 0; k < SCH_MAX_N; k++) free(e->ch[k].text);
    oa_chat_free(&e->q);
    gw_sse_buf_free(&e->out);
    free(e);
}

/* ---- chat completions ---------------------------------------------------- */

static int gw_model_ok(const gw_http_opts *o, const char *m) {
    if (o->n_models == 0) return 1;
    for (size_t i = 0; i < o->n_models; i++)
        if (!strcmp(o->models[i], m)) return 1;
    return 0;
}

/* The conversation key of a request: the X-Parley-Conversation header, or
 * a hash of the opening messages (of the prompt when legacy).  0, or -1
 * with *rc the 400 answered. */
static int gw_chat_conv(gw_http *s, struct MHD_Connection *c, const oa_chat *ch, int legacy,
                        char conv[OA_MAX_ID + 1], enum MHD_Result *rc) {
    const char *hc = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "X-Parley-Conversation");
    if (!hc) {
        if (legacy) oa_prompt_hash(&ch->turn, conv);
        else oa_conv_hash(ch->msgs, ch->n_msgs, conv);
        return 0;
    }
    size_t n = strlen(hc), bad = n == 0 || n > 200;
    for (size_t i = 0; i < n; i++) bad |= (unsigned char)hc[i] < 0x20 || hc[i] == 0x7f;
    if (bad) {
        *rc = gw_error(s, c, 400,
                       "X-Parley-Conversation must be 1..200 bytes without "
                       "control characters",
                       "invalid_request_error", NULL, NULL);
        return -1;
    }
    snprintf(conv, OA_MAX_ID + 1, "%s", hc);
    return 0;
}

/* A sent turn, answered as a stream.  Returns 1 when the SSE response took
 * the request (*ch is left empty), the hub's wait and the in-flight count,
 * which gw_sse_free releases (also when queueing it fails: *rc MHD_NO);
 * 0 when out of memory (*rc MHD_NO), and the caller still owns them. */
static int gw_chat_stream(gw_http *s, struct MHD_Connection *c, oa_chat *ch, gw_wait *w,
                          const char *id, double t0, uint64_t now_ms, enum MHD_Result *rc) {
    *rc = MHD_NO;
    gw_sse *e = calloc(1, sizeof *e);
    struct MHD_Response *r =
        e ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, gw_sse_read, e, gw_sse_free)
          : NULL;
    if (!r) {
        free(e);
        return 0;
    }
    e->s = s;
    e->c = c;
    e->w = w;
    snprintf(e->id, sizeof e->id, "%s", id);
    e->created = now_ms / 1000;
    e->n = (int)ch->turn.params.n;
    oa_chat_move(&e->q, ch); /* the stream keeps the request; ch is empty now */
    e->t0 = e->last_out = t0;
    e->deadline = t0 + s->o->timeout_ms;
    atomic_fetch_add(&s->streams, 1);
    *rc = gw_http_queue_sse(s, c, r);
    return 1;
}

int gw_http_queue_sse(gw_http *s, struct MHD_Connection *c, struct MHD_Response *r) {
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
    MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    enum MHD_Result rc = MHD_queue_response(c, 200, r);
    MHD_destroy_response(r);
    gw_count(s, 200);
    return rc;
}

/* A sent turn, answered whole: wait for its TurnResult until the
 * gateway's timeout, then answer with the completion or the error.  The
 * connection is looked at between waits of GW_GONE_CHECK_MS: a client
 * that closed it cancels its turn (gw_cancel.h) and gets no answer. */
void gw_http_client_left(gw_http *s, gw_wait *w) {
    atomic_fetch_add(&s->disconnects, 1);
    if (gw_cancel_turn(s->hub, w, "client disconnected")) atomic_fetch_add(&s->cancels, 1);
}

int gw_http_await(gw_http *s, struct MHD_Connection *c, gw_wait *w, double t0,
                  const sch_result **res) {
    *res = NULL;
    for (;;) {
        double left = t0 + s->o->timeout_ms - pl_mono_msf();
        if (left <= 0) return 0;
        gw_piece *pieces;
        int got = gw_wait_poll(
            s->hub, w, left > GW_GONE_CHECK_MS ? GW_GONE_CHECK_MS : (int)left + 1, &pieces, res);
        gw_pieces_free(pieces);
        if (got) return 1;
        if (gw_client_gone(c)) {
            gw_http_client_left(s, w);
            return -1;
        }
    }
}

static enum MHD_Result gw_chat_wait(gw_http *s, struct MHD_Connection *c, const oa_chat *ch,
                                    gw_wait *w, const char *id, double t0, uint64_t now_ms) {
    const sch_result *res;
    if (gw_http_await(s, c, w, t0, &res) < 0) return MHD_NO; /* nobody to answer: close */
    enum MHD_Result rc;
    if (!res) {
        rc = gw_error(s, c, 504, "no reply from the fleet before the gateway's timeout", "timeout",
                      NULL, "timeout");
    } else if (res->finish_reason == SCH_FINISH_ERROR || res->finish_reason == SCH_FINISH_EXPIRED) {
        const char *type, *code;
        char pbuf[32];
        int st = oa_result_status(res, &type, &code);
        rc = gw_error(s, c, st, res->error_message.ptr ? res->error_message.ptr : "the turn failed",
                      type, oa_result_param(res, pbuf, sizeof pbuf), code);
    } else {
        rc = gw_send_json(s, c, 200, oa_completion_json(res, ch, id, now_ms / 1000));
    }
    gw_time(s, pl_mono_msf() - t0);
    return rc;
}

/* POST /v1/chat/completions, or /v1/completions when legacy: admit (key,
 * body, model, conversation, in-flight limit), send the ChatTurn, then
 * stream or wait. */
static enum MHD_Result gw_on_chat(gw_http *s, struct MHD_Connection *c, gw_req *rq, int legacy) {
    const gw_http_opts *o = s->o;
    /* err quotes a model name of up to 256 bytes */
    char err[PL_ERR_LEN * 2], turn_id[160], conv[OA_MAX_ID + 1];
    const char *ns;
    if (gw_auth(s, c, &ns) != 0)
        return gw_error(s, c, 401, "missing or incorrect API key (Authorization: Bearer KEY)",
                        "invalid_request_error", NULL, "invalid_api_key");
    if (rq->too_big) {
        pl_errf(err, sizeof err, GW_EINVAL, "the request body is larger than %zu bytes",
                o->max_body);
        return gw_error(s, c, 400, err, "invalid_request_error", NULL, "request_too_large");
    }
    oa_chat ch;
    oa_fault f;
    if ((legacy ? oa_cmpl_parse : oa_chat_parse)(rq->body ? rq->body : "", rq->len, o->max_tokens,
                                                 &ch, &f) != 0)
        return gw_error(s, c, f.status, f.message, "invalid_request_error",
                        f.param[0] ? f.param : NULL, f.code);
    enum MHD_Result rc;
    gw_wait *w = NULL; /* the hub's wait, released at out: unless a stream took it */
    int counted = 0;   /* 1 while this request counts in s->inflight (ditto) */
    if (!gw_model_ok(o, ch.model)) {
        pl_errf(err, sizeof err, GW_EINVAL, "The model '%.256s' does not exist", ch.model);
        rc = gw_error(s, c, 404, err, "invalid_request_error", "model", "model_not_found");
        goto out;
    }
    if (gw_chat_conv(s, c, &ch, legacy, conv, &rc) != 0) goto out;
    counted = 1;
    if (atomic_fetch_add(&s->inflight, 1) >= o->max_inflight) {
        rc = gw_error(s, c, 429, "too many requests in flight; retry shortly",
                      "rate_limit_exceeded", NULL, "rate_limit_exceeded");
        goto out;
    }
    double t0 = pl_mono_msf();
    uint64_t now_ms = pl_unix_ms();
    snprintf(turn_id, sizeof turn_id, "%s-%llu", o->id_prefix,
             (unsigned long long)atomic_fetch_add(&s->seq, 1));
    ch.turn.conversation_id = sch_str_c(conv);
    ch.turn.turn_id = sch_str_c(turn_id);
    ch.turn.ns = sch_str_c(ns);
    ch.turn.created_ms = now_ms;
    ch.turn.deadline_ms = now_ms + (uint64_t)o->timeout_ms;
    if (!(w = gw_hub_send(s->hub, &ch.turn, ns, err, sizeof err))) {
        rc = gw_error(s, c, 503, err, "server_error", NULL, NULL);
        goto out;
    }
    char id[320];
    snprintf(id, sizeof id, "%s-%s", legacy ? "cmpl" : "chatcmpl", turn_id);
    if (!ch.stream) {
        rc = gw_chat_wait(s, c, &ch, w, id, t0, now_ms);
    } else if (gw_chat_stream(s, c, &ch, w, id, t0, now_ms, &rc)) {
        w = NULL; /* the stream releases the wait and the in-flight count */
        counted = 0;
    }
out:
    if (w) gw_hub_release(s->hub, w);
    if (counted) atomic_fetch_sub(&s->inflight, 1);
    oa_chat_free(&ch);
    return rc;
}

static enum MHD_Result gw_on_request(void *cls, struct MHD_Connection *c, const char *url,
                                     const char *method, const char *version, const char *data,
                                     size_t *data_size, void **con_cls) {
    gw_http *s = cls;
    (void)version;
    gw_req *rq = *con_cls;
    if (!rq) {
        if (!(rq = calloc(1, sizeof *rq))) return MHD_NO;
        *con_cls = rq;
        const char *cl =
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoull(cl, NULL, 10) > s->o->max_body) rq->too_big = 1;
        return MHD_YES;
    }
    if (*data_size) {
        if (!rq->too_big && rq->len + *data_size <= s->o->max_body) {
            char *b = realloc(rq->body, rq->len + *data_size + 1);
            if (!b) return MHD_NO;
            rq->body = b;
            memcpy(b + rq->len, data, *data_size);
            rq->len += *data_size;
            b[rq->len] = 0;
        } else {
            rq->too_big = 1;
        }
        *data_size = 0;
        return MHD_YES;
    }
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    const char *ns;
    if (!strcmp(url, "/healthz"))
        return get ? gw_send(s, c, 200, "application/json", "{\"status\":\"ok\"}", 15)
                   : gw_error(s, c, 405, "use GET", "invalid_request_error", NULL, NULL);
    if (!strcmp(url, "/metrics"))
        return get ? gw_metrics(s, c)
                   : gw_error(s, c, 405, "use GET", "invalid_request_error", NULL, NULL);
    if (!strcmp(url, "/v1/models")) {
        if (!get) return gw_error(s, c, 405, "use GET", "invalid_request_error", NULL, NULL);
        if (gw_auth(s, c, &ns) != 0)
            return gw_error(s, c, 401,
                            "missing or incorrect API key (Authorization: Bearer "
                            "KEY)",
                            "invalid_request_error", NULL, "invalid_api_key");
        return gw_models(s, c);
    }
    if (!strcmp(url, "/v1/fleet") && s->o->fleet) {
        if (!get) return gw_error(s, c, 405, "use GET", "invalid_request_error", NULL, NULL);
        if (gw_auth(s, c, &ns) != 0)
            return gw_error(s, c, 401, "missing or incorrect API key (Authorization: Bearer KEY)",
                            "invalid_request_error", NULL, "invalid_api_key");
        int st;
        char *txt = gw_fleet_json(s->o->fleet, &st);
        enum MHD_Result rc = txt ? gw_send(s, c, st, "application/json", txt, strlen(txt)) : MHD_NO;
        free(txt);
        return rc;
    }
    if (!strcmp(url, "/v1/chat/completions") || !strcmp(url, "/v1/completions"))
        return post ? gw_on_chat(s, c, rq, url[4] == 'c' && url[5] == 'o')
                    : gw_error(s, c, 405, "use POST", "invalid_request_error", NULL, NULL);
    if (!strncmp(url, "/v1/responses", 13) && (!url[13] || url[13] == '/'))
        return gw_resp_route(s, c, url, method, rq->body ? rq->body : "", rq->len, rq->too_big);
    const gw_web_asset *a = s->o->playground ? gw_web_find(url) : NULL;
    if (a)
        return get ? gw_web(s, c, a)
                   : gw_error(s, c, 405, "use GET", "invalid_request_error", NULL, NULL);
    return gw_error(s, c, 404,
                    "unknown path; parley serves /v1/chat/completions, /v1/completions, "
                    "/v1/responses, /v1/models, /v1/fleet, /healthz, /metrics and (when on) "
                    "the playground at / and the fleet page at /fleet",
                    "invalid_request_error", NULL, "not_found");
}

static void gw_on_done(void *cls, struct MHD_Connection *c, void **con_cls,
                       enum MHD_RequestTerminationCode toe) {
    (void)cls;
    (void)c;
    (void)toe;
    gw_req *rq = *con_cls;
    if (rq) {
        free(rq->body);
        free(rq);
        *con_cls = NULL;
    }
}

gw_http *gw_http_start(const gw_http_opts *o, gw_hub *hub, int *port_out, char *err,
                       size_t errlen) {
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)o->port);
    if (inet_pton(AF_INET, o->host, &sa.sin_addr) != 1) {
        pl_errf(err, errlen, GW_EINVAL, "gateway.listen: '%s' is not an IPv4 address", o->host);
        return NULL;
    }
    gw_http *s = calloc(1, sizeof *s);
    if (!s) {
        pl_errf(err, errlen, GW_ENOMEM, "out of memory");
        return NULL;
    }
    s->hub = hub;
    s->o = o;
    s->d = MHD_start_daemon(
        MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL, 0, NULL,
        NULL, gw_on_request, s, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&sa,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)o->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)(o->timeout_ms / 1000 + 30), MHD_OPTION_NOTIFY_COMPLETED, gw_on_done, s,
        MHD_OPTION_END);
    if (!s->d) {
        pl_errf(err, errlen, GW_EHTTP, "cannot listen on %s:%d (address in use or not allowed)",
                o->host, o->port);
        free(s);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(s->d, MHD_DAEMON_INFO_BIND_PORT);
    *port_out = di ? di->port : o->port;
    return s;
}

void gw_http_stop(gw_http *s) {
    if (!s) return;
    MHD_stop_daemon(s->d);
    free(s);
}

int gw_http_inflight(gw_http *s) { return atomic_load(&s->inflight); }

int gw_http_auth(gw_http *s, struct MHD_Connection *c, const char **ns) {
    return gw_auth(s, c, ns);
}
int gw_http_reply(gw_http *s, struct MHD_Connection *c, int status, json_t *j) {
    return gw_send_json(s, c, status, j);
}
void gw_http_count(gw_http *s, int status) { gw_count(s, status); }
gw_hub *gw_http_hub(gw_http *s) { return s->hub; }
const gw_http_opts *gw_http_opts_of(gw_http *s) { return s->o; }
unsigned long long gw_http_next_seq(gw_http *s) { return atomic_fetch_add(&s->seq, 1); }
int gw_http_admit(gw_http *s) {
    if (atomic_fetch_add(&s->inflight, 1) < s->o->max_inflight) return 0;
    atomic_fetch_sub(&s->inflight, 1);
    return -1;
}
void gw_http_leave(gw_http *s) { atomic_fetch_sub(&s->inflight, 1); }
