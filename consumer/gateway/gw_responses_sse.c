/*
 * gw_responses_sse.c -- a Responses turn answered as server-sent events
 * (the event sequence is in gw_responses.h).  As the chat stream
 * (gw_http.c): pieces of one attempt are forwarded as they arrive, and the
 * committed result decides the rest; a result whose text does not start
 * with what was streamed ends the stream with an error.
 */
#define _POSIX_C_SOURCE 200809L
#include "gw_responses.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_cancel.h"
#include "gw_sse_buf.h"
#include "pl_time.h"

/* A Responses stream in progress. */
typedef struct rs_sse {
    gw_rturn *t;              /* the turn (owned) */
    gw_wait *w;               /* its waiter (released at the end) */
    double t0, deadline;      /* monotonic ms: start, give up */
    int phase;                /* 0 opening events due, 1 streaming, 2 ended */
    int finished;             /* the last event was produced */
    int msg_open;             /* the message item was opened */
    long long seq;            /* next sequence_number */
    char *text;               /* text streamed so far */
    size_t len, cap;          /* its bytes / allocated */
    double last_out;          /* monotonic ms: bytes last produced (keep-alive every s) */
    struct MHD_Connection *c; /* the client's connection (looked at for a close) */
    gw_sse_buf out;           /* bytes waiting to go out */
} rs_sse;

static void rs_put(rs_sse *e, const char *p, size_t n) { gw_sse_buf_put(&e->out, p, n); }

/* One event: type is set in j (stolen) with its sequence number. */
static void rs_event(rs_sse *e, const char *type, json_t *j) {
    if (!j) return;
    json_object_set_new(j, "type", json_string(type));
    json_object_set_new(j, "sequence_number", json_integer(e->seq++));
    char *txt = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!txt) return;
    rs_put(e, "event: ", 7);
    rs_put(e, type, strlen(type));
    rs_put(e, "\ndata: ", 7);
    rs_put(e, txt, strlen(txt));
    rs_put(e, "\n\n", 2);
    free(txt);
}

static void rs_item_id(rs_sse *e, int k, char *buf, size_t n) {
    oa_resp_item_id(e->t->id, k, buf, n);
}

/* Open the message item (output 0) and its text part. */
static void rs_open_msg(rs_sse *e) {
    char iid[220];
    rs_item_id(e, -1, iid, sizeof iid);
    rs_event(e, "response.output_item.added",
             json_pack("{si s{ss ss ss ss s[]}}", "output_index", 0, "item", "type", "message",
                       "id", iid, "status", "in_progress", "role", "assistant", "content"));
    rs_event(e, "response.content_part.added",
             json_pack("{ss si si s{ss ss s[]}}", "item_id", iid, "output_index", 0,
                       "content_index", 0, "part", "type", "output_text", "text", "",
                       "annotations"));
    e->msg_open = 1;
}

static void rs_delta(rs_sse *e, const char *p, size_t n) {
    char iid[220];
    if (!n) return;
    if (!e->msg_open) rs_open_msg(e);
    rs_item_id(e, -1, iid, sizeof iid);
    rs_event(e, "response.output_text.delta",
             json_pack("{ss si si ss# s[]}", "item_id", iid, "output_index", 0, "content_index", 0,
                       "delta", p, (int)n, "logprobs"));
}

/* End with an error event and response.failed. */
static void rs_fail(rs_sse *e, json_t *err) {
    json_t *in = json_object_get(err, "error");
    rs_event(e, "error",
             json_pack("{sO* sO* sO*}", "code", json_object_get(in, "code"), "message",
                       json_object_get(in, "message"), "param", json_object_get(in, "param")));
    json_t *resp = oa_resp_json(NULL, &e->t->q, e->t->id, e->t->created_ms / 1000, 0);
    if (resp) {
        json_object_set_new(resp, "status", json_string("failed"));
        json_object_set_new(resp, "error",
                            json_pack("{sO* sO*}", "code", json_object_get(in, "code"), "message",
                                      json_object_get(in, "message")));
    }
    rs_event(e, "response.failed", json_pack("{so*}", "response", resp));
    json_decref(err);
    e->phase = 2;
    e->finished = 1;
}

/* The committed result: the rest of every output item, then completed. */
static void rs_result(rs_sse *e, const sch_result *r) {
    if (r->finish_reason == SCH_FINISH_ERROR || r->finish_reason == SCH_FINISH_EXPIRED) {
        json_t *err;
        gw_resp_failed(r, &err);
        rs_fail(e, err);
        return;
    }
    sch_choice c;
    oa_result_choice(r, 0, &c);
    if (e->len > c.text.len || (e->len && memcmp(e->text, c.text.ptr, e->len))) {
        rs_fail(e, oa_error_json("the turn was redone by another worker and its committed reply "
                                 "differs from the text already streamed; retry the request",
                                 "server_error", NULL, "stream_restarted"));
        return;
    }
    json_t *resp = gw_resp_finish(e->t, r);
    json_t *out = json_object_get(resp, "output"), *it;
    size_t k;
    json_array_foreach(out, k, it) {
        const char *ty = json_string_value(json_object_get(it, "type"));
        json_t *iid = json_object_get(it, "id");
        if (ty && !strcmp(ty, "message")) {
            rs_delta(e, c.text.ptr + e->len, c.text.len - e->len);
            if (!e->msg_open) rs_open_msg(e);
            json_t *part = json_array_get(json_object_get(it, "content"), 0);
            rs_event(e, "response.output_text.done",
                     json_pack("{sO si si sO s[]}", "item_id", iid, "output_index", (int)k,
                               "content_index", 0, "text", json_object_get(part, "text"),
                               "logprobs"));
            rs_event(e, "response.content_part.done",
                     json_pack("{sO si si sO}", "item_id", iid, "output_index", (int)k,
                               "content_index", 0, "part", part));
        } else {
            json_t *added = json_deep_copy(it);
            json_object_set_new(added, "arguments", json_string(""));
            json_object_set_new(added, "status", json_string("in_progress"));
            rs_event(e, "response.output_item.added",
                     json_pack("{si so}", "output_index", (int)k, "item", added));
            rs_event(e, "response.function_call_arguments.delta",
                     json_pack("{sO si sO}", "item_id", iid, "output_index", (int)k, "delta",
                               json_object_get(it, "arguments")));
            rs_event(e, "response.function_call_arguments.done",
                     json_pack("{sO si sO sO}", "item_id", iid, "output_index", (int)k, "name",
                               json_object_get(it, "name"), "arguments",
                               json_object_get(it, "arguments")));
        }
        rs_event(e, "response.output_item.done",
                 json_pack("{si sO}", "output_index", (int)k, "item", it));
    }
    rs_event(e, "response.completed", json_pack("{so*}", "response", resp));
    e->phase = 2;
    e->finished = 1;
}

static void rs_piece(rs_sse *e, const gw_piece *p) {
    if (p->index != 0) return;
    if (e->len + p->len + 1 > e->cap) {
        size_t cap = (e->len + p->len + 1) * 2;
        char *t = realloc(e->text, cap);
        if (!t) return; /* not forwarded: the result fills it in */
        e->text = t;
        e->cap = cap;
    }
    rs_delta(e, p->text, p->len);
    memcpy(e->text + e->len, p->text, p->len);
    e->len += p->len;
}

static ssize_t rs_read(void *cls, uint64_t pos, char *buf, size_t max) {
    rs_sse *e = cls;
    gw_http *s = e->t->s;
    (void)pos;
    while (gw_sse_buf_drained(&e->out)) {
        if (e->phase == 2) return MHD_CONTENT_READER_END_OF_STREAM;
        if (e->phase == 0) {
            json_t *resp =
                oa_resp_json(NULL, &e->t->q, e->t->id, e->t->created_ms / 1000, e->t->store);
            rs_event(e, "response.created", json_pack("{sO*}", "response", resp));
            rs_event(e, "response.in_progress", json_pack("{so*}", "response", resp));
            e->phase = 1;
            continue;
        }
        /* a client that closed is noticed here, before a write fails */
        if (gw_client_gone(e->c)) return MHD_CONTENT_READER_END_WITH_ERROR;
        double now = pl_mono_msf();
        int wait = (int)(e->deadline - now);
        wait = wait > GW_GONE_CHECK_MS ? GW_GONE_CHECK_MS : wait < 1 ? 1 : wait;
        gw_piece *pieces;
        const sch_result *r;
        gw_wait_poll(gw_http_hub(s), e->w, wait, &pieces, &r);
        now = pl_mono_msf();
        for (gw_piece *p = pieces; p && !r; p = p->next) rs_piece(e, p);
        gw_pieces_free(pieces);
        if (r) rs_result(e, r);
        else if (!pieces && now >= e->deadline)
            rs_fail(e, oa_error_json("no reply from the fleet before the gateway's timeout",
                                     "timeout", NULL, "timeout"));
        else if (!pieces && now - e->last_out >= 1000) rs_put(e, ": keep-alive\n\n", 14);
        if (e->out.len) e->last_out = now;
    }
    return (ssize_t)gw_sse_buf_take(&e->out, buf, max);
}

static void rs_free(void *cls) {
    rs_sse *e = cls;
    gw_http *s = e->t->s;
    if (!e->finished) gw_http_client_left(s, e->w);
    gw_hub_release(gw_http_hub(s), e->w);
    gw_http_leave(s);
    gw_rturn_free(e->t);
    free(e->text);
    gw_sse_buf_free(&e->out);
    free(e);
}

int gw_resp_stream(gw_rturn *t, struct MHD_Connection *c, gw_wait *w, double t0, int *rc) {
    *rc = MHD_NO;
    rs_sse *e = calloc(1, sizeof *e);
    struct MHD_Response *r =
        e ? MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, rs_read, e, rs_free) : NULL;
    if (!r) {
        free(e);
        return 0;
    }
    e->t = t;
    e->w = w;
    e->t0 = t0;
    e->c = c;
    e->last_out = pl_mono_msf();
    e->deadline = t0 + gw_http_opts_of(t->s)->timeout_ms;
    *rc = gw_http_queue_sse(t->s, c, r);
    return 1;
}
