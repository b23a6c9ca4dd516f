/*
 * gw_responses.c -- POST /v1/responses (JSON), GET and DELETE
 * /v1/responses/ID (see gw_responses.h); the stream is gw_responses_sse.c.
 */
#define _POSIX_C_SOURCE 200809L
#include "gw_cmd.h" /* GW_E* */
#include "gw_responses.h"

#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gw_store.h"
#include "pl_err.h"
#include "pl_time.h"

#define GW_RESP_CATCH_UP_MS 5000 /* wait for the store's reader at most */

static int rs_err(gw_http *s, struct MHD_Connection *c, int status, const char *msg,
                  const char *type, const char *param, const char *code) {
    return gw_http_reply(s, c, status, oa_error_json(msg, type, param, code));
}

static int rs_catch_up_ms(gw_http *s) {
    int t = gw_http_opts_of(s)->timeout_ms;
    return t < GW_RESP_CATCH_UP_MS ? t : GW_RESP_CATCH_UP_MS;
}

void gw_rturn_free(gw_rturn *t) {
    if (!t) return;
    oa_resp_free(&t->q);
    json_decref(t->history);
    free(t);
}

int gw_resp_failed(const sch_result *r, json_t **err) {
    const char *type, *code;
    char pbuf[32];
    int st = oa_result_status(r, &type, &code);
    *err = oa_error_json(r->error_message.ptr ? r->error_message.ptr : "the turn failed", type,
                         oa_result_param(r, pbuf, sizeof pbuf), code);
    return st;
}

json_t *gw_resp_finish(gw_rturn *t, const sch_result *r) {
    json_t *resp = oa_resp_json(r, &t->q, t->id, t->created_ms / 1000, t->store);
    if (!resp || !t->store) return resp;
    char err[PL_ERR_LEN];
    json_t *rec = json_pack("{ss sI ss so sO}", "tenant", t->ns, "created_ms",
                            (json_int_t)t->created_ms, "conv", t->conv, "messages",
                            oa_resp_conversation(&t->q, t->history, r), "response", resp);
    if (!rec || gw_store_put(gw_http_opts_of(t->s)->store, t->id, rec, err, sizeof err) != 0) {
        fprintf(stderr, "parley gateway: response %s not stored: %s\n", t->id,
                rec ? err : "out of memory");
        json_object_set_new(resp, "store", json_false());
    }
    json_decref(rec);
    return resp;
}

/* Wait for w's result until the gateway's timeout; answer it (nothing to
 * a client that left: its turn is cancelled). */
static int rs_wait(gw_rturn *t, struct MHD_Connection *c, gw_wait *w, double t0) {
    gw_http *s = t->s;
    const sch_result *res;
    if (gw_http_await(s, c, w, t0, &res) < 0) return MHD_NO;
    if (!res)
        return rs_err(s, c, 504, "no reply from the fleet before the gateway's timeout", "timeout",
                      NULL, "timeout");
    if (res->finish_reason == SCH_FINISH_ERROR || res->finish_reason == SCH_FINISH_EXPIRED) {
        json_t *e;
        int st = gw_resp_failed(res, &e);
        return gw_http_reply(s, c, st, e);
    }
    json_t *resp = gw_resp_finish(t, res);
    return resp ? gw_http_reply(s, c, 200, resp)
                : rs_err(s, c, 500, "out of memory", "server_error", NULL, NULL);
}

/* The stored record continued by t->q.prev_id: history and conversation
 * key.  0, or -1 with the answer in *rc. */
static int rs_continue(gw_rturn *t, struct MHD_Connection *c, int *rc) {
    gw_store *st = gw_http_opts_of(t->s)->store;
    char msg[400];
    if (!st) {
        *rc = rs_err(t->s, c, 400,
                     "previous_response_id needs the response store, which is off on this "
                     "gateway (gateway.topic.stored)",
                     "invalid_request_error", "previous_response_id", "unsupported_parameter");
        return -1;
    }
    json_t *rec = gw_store_get(st, t->q.prev_id, t->ns, rs_catch_up_ms(t->s));
    json_t *msgs = json_object_get(rec, "messages");
    const char *conv = json_string_value(json_object_get(rec, "conv"));
    if (!json_is_array(msgs) || !conv) {
        json_decref(rec);
        snprintf(msg, sizeof msg, "Previous response with id '%.200s' not found.", t->q.prev_id);
        *rc = rs_err(t->s, c, 400, msg, "invalid_request_error", "previous_response_id",
                     "previous_response_not_found");
        return -1;
    }
    t->history = json_incref(msgs);
    snprintf(t->conv, sizeof t->conv, "%s", conv);
    json_decref(rec);
    return 0;
}

/* POST /v1/responses. */
static int rs_create(gw_http *s, struct MHD_Connection *c, const char *ns, const char *body,
                     size_t len) {
    const gw_http_opts *o = gw_http_opts_of(s);
    char err[PL_ERR_LEN * 2], turn_id[160];
    oa_fault f;
    oa_chat ch;
    memset(&ch, 0, sizeof ch);
    int rc, counted = 0;
    gw_wait *w = NULL;
    gw_rturn *t = calloc(1, sizeof *t);
    if (!t) return rs_err(s, c, 500, "out of memory", "server_error", NULL, NULL);
    t->s = s;
    snprintf(t->ns, sizeof t->ns, "%s", ns);
    if (oa_resp_parse(body, len, &t->q, &f) != 0) {
        rc = rs_err(s, c, f.status, f.message, "invalid_request_error", f.param[0] ? f.param : NULL,
                    f.code);
        goto out;
    }
    t->store = t->q.store && o->store;
    if (t->q.prev_id[0] && rs_continue(t, c, &rc) != 0) goto out;
    if (oa_resp_chat(&t->q, t->history, o->max_tokens, &ch, &f) != 0) {
        rc = rs_err(s, c, f.status, f.message, "invalid_request_error", f.param[0] ? f.param : NULL,
                    f.code);
        goto out;
    }
    int model_ok = o->n_models == 0;
    for (size_t i = 0; i < o->n_models && !model_ok; i++)
        model_ok = !strcmp(o->models[i], ch.model);
    if (!model_ok) {
        pl_errf(err, sizeof err, GW_EINVAL, "The model '%.256s' does not exist", ch.model);
        rc = rs_err(s, c, 404, err, "invalid_request_error", "model", "model_not_found");
        goto out;
    }
    if (!t->conv[0]) oa_conv_hash(ch.msgs, ch.n_msgs, t->conv);
    if (gw_http_admit(s) != 0) {
        rc = rs_err(s, c, 429, "too many requests in flight; retry shortly", "rate_limit_exceeded",
                    NULL, "rate_limit_exceeded");
        goto out;
    }
    counted = 1;
    double t0 = pl_mono_msf();
    t->created_ms = pl_unix_ms();
    snprintf(turn_id, sizeof turn_id, "%s-%llu", o->id_prefix, gw_http_next_seq(s));
    snprintf(t->id, sizeof t->id, "resp_%s", turn_id);
    ch.turn.conversation_id = sch_str_c(t->conv);
    ch.turn.turn_id = sch_str_c(turn_id);
    ch.turn.ns = sch_str_c(ns);
    ch.turn.created_ms = t->created_ms;
    ch.turn.deadline_ms = t->created_ms + (uint64_t)o->timeout_ms;
    if (!(w = gw_hub_send(gw_http_hub(s), &ch.turn, ns, err, sizeof err))) {
        rc = rs_err(s, c, 503, err, "server_error", NULL, NULL);
        goto out;
    }
    oa_chat_free(&ch); /* the turn is on its way: the request's copy is done */
    if (!t->q.stream) {
        rc = rs_wait(t, c, w, t0);
    } else if (gw_resp_stream(t, c, w, t0, &rc)) {
        return rc; /* the stream owns t, w and the in-flight count */
    }
out:
    if (w) gw_hub_release(gw_http_hub(s), w);
    if (counted) gw_http_leave(s);
    oa_chat_free(&ch);
    gw_rturn_free(t);
    return rc;
}

/* GET / DELETE /v1/responses/ID. */
static int rs_by_id(gw_http *s, struct MHD_Connection *c, const char *ns, const char *id, int del) {
    gw_store *st = gw_http_opts_of(s)->store;
    char msg[400], err[PL_ERR_LEN];
    size_t n = strlen(id);
    int ok = n > 0 && n <= OA_RESP_MAX_ID;
    for (size_t i = 0; ok && i < n; i++)
        ok = (id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'z') ||
             (id[i] >= 'A' && id[i] <= 'Z') || id[i] == '_' || id[i] == '-' || id[i] == '.';
    snprintf(msg, sizeof msg, "No response found with id '%.200s'.", id);
    if (!ok || !st) return rs_err(s, c, 404, msg, "invalid_request_error", NULL, "not_found");
    if (del) {
        int r = gw_store_delete(st, id, ns, rs_catch_up_ms(s), err, sizeof err);
        if (r < 0) return rs_err(s, c, 503, err, "server_error", NULL, NULL);
        if (r == 0) return rs_err(s, c, 404, msg, "invalid_request_error", NULL, "not_found");
        return gw_http_reply(
            s, c, 200,
            json_pack("{ss ss sb}", "id", id, "object", "response.deleted", "deleted", 1));
    }
    json_t *rec = gw_store_get(st, id, ns, rs_catch_up_ms(s));
    json_t *resp = json_object_get(rec, "response");
    if (!json_is_object(resp)) {
        json_decref(rec);
        return rs_err(s, c, 404, msg, "invalid_request_error", NULL, "not_found");
    }
    json_incref(resp);
    json_decref(rec);
    return gw_http_reply(s, c, 200, resp);
}

int gw_resp_route(gw_http *s, struct MHD_Connection *c, const char *url, const char *method,
                  const char *body, size_t len, int too_big) {
    const char *ns;
    const char *id = url[13] == '/' ? url + 14 : NULL;
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST"),
        del = !strcmp(method, "DELETE");
    if (id ? !(get || del) : !post)
        return rs_err(s, c, 405, id ? "use GET or DELETE" : "use POST", "invalid_request_error",
                      NULL, NULL);
    if (gw_http_auth(s, c, &ns) != 0)
        return rs_err(s, c, 401, "missing or incorrect API key (Authorization: Bearer KEY)",
                      "invalid_request_error", NULL, "invalid_api_key");
    if (id) return rs_by_id(s, c, ns, id, del);
    if (too_big) {
        char err[PL_ERR_LEN];
        pl_errf(err, sizeof err, GW_EINVAL, "the request body is larger than %zu bytes",
                gw_http_opts_of(s)->max_body);
        return rs_err(s, c, 400, err, "invalid_request_error", NULL, "request_too_large");
    }
    return rs_create(s, c, ns, body, len);
}
