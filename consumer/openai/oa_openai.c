/*
 * oa_openai.c -- the OpenAI response, chunk and error objects and the
 * conversation key (see oa_openai.h; requests are parsed in oa_request.c).
 */
#define _POSIX_C_SOURCE 200809L
#include "oa_openai.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pl_err.h"
#include "pl_hash.h"


static const char *gw_role_name(sch_role r) {
    const char *n = sch_role_name(r);
    return n ? n : "assistant";
}

void oa_conv_hash(const sch_message *msgs, size_t n, char out[20]) {
    uint64_t h = PL_FNV64_SEED;
    static const char zero = 0;
    for (size_t i = 0; i < n; i++) {
        const char *rn = gw_role_name(msgs[i].role);
        h = pl_fnv1a64(h, rn, strlen(rn));
        h = pl_fnv1a64(h, &zero, 1);
        h = pl_fnv1a64(h, msgs[i].content.ptr, msgs[i].content.len);
        h = pl_fnv1a64(h, &zero, 1);
        if (msgs[i].role == SCH_ROLE_USER) break;
    }
    snprintf(out, 20, "oa-%016llx", (unsigned long long)h);
}

void oa_prompt_hash(const sch_turn *t, char out[20]) {
    uint64_t h = PL_FNV64_SEED;
    if (t->prompt.ptr) h = pl_fnv1a64(h, t->prompt.ptr, t->prompt.len);
    else h = pl_fnv1a64(h, t->prompt_tokens, t->n_prompt_tokens * sizeof *t->prompt_tokens);
    snprintf(out, 20, "oc-%016llx", (unsigned long long)h);
}

int oa_result_choices(const sch_result *r) { return 1 + (int)r->n_choices; }

void oa_result_choice(const sch_result *r, int k, sch_choice *out) {
    sch_result_choice(r, (size_t)k, out);
    if (!out->text.ptr) out->text = (sch_str){"", 0};
}

const char *oa_finish_name(const sch_choice *c) {
    if (c->n_tool_calls) return "tool_calls";
    if (c->finish_reason == SCH_FINISH_CANCELLED) return "cancelled";
    return c->finish_reason == SCH_FINISH_LENGTH ? "length" : "stop";
}

static json_t *gw_usage_json(const sch_result *r) {
    return json_pack("{sI sI sI s{sI}}", "prompt_tokens", (json_int_t)r->prompt_tokens,
                     "completion_tokens", (json_int_t)r->completion_tokens, "total_tokens",
                     (json_int_t)(r->prompt_tokens + r->completion_tokens), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)r->cached_tokens);
}

/* The UTF-8 bytes OpenAI's `bytes` lists for an entry: its raw bytes when
 * the wire kept them (a partial character), else its text's. */
static json_t *gw_bytes_json(const sch_logprob *e) {
    const sch_str *b = e->bytes.ptr ? &e->bytes : &e->token;
    json_t *a = json_array();
    for (size_t i = 0; a && i < b->len; i++)
        json_array_append_new(a, json_integer((unsigned char)b->ptr[i]));
    return a;
}

static json_t *gw_lp_one(const sch_logprob *e) {
    return json_pack("{ss# sf so}", "token", e->token.ptr ? e->token.ptr : "", (int)e->token.len,
                     "logprob", e->logprob, "bytes", gw_bytes_json(e));
}

json_t *oa_logprobs_content(const sch_logprob *lp, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        json_t *top = json_array(), *e = gw_lp_one(&lp[i]);
        for (size_t j = 0; top && j < lp[i].n_top; j++)
            json_array_append_new(top, gw_lp_one(&lp[i].top[j]));
        if (!e || !top) {
            json_decref(e);
            json_decref(top);
            json_decref(a);
            return NULL;
        }
        json_object_set_new(e, "top_logprobs", top);
        json_array_append_new(a, e);
    }
    return a;
}

json_t *oa_logprobs_legacy(json_t *content, size_t text_from) {
    json_t *toks = json_array(), *vals = json_array(), *tops = json_array(), *offs = json_array();
    size_t off = text_from, i, j;
    json_t *e, *t;
    json_array_foreach(content, i, e) {
        json_t *tok = json_object_get(e, "token"), *top = json_object();
        json_array_foreach(json_object_get(e, "top_logprobs"), j, t) {
            const char *key = json_string_value(json_object_get(t, "token"));
            if (top && key && !json_object_get(top, key)) /* two ids may spell one text */
                json_object_set(top, key, json_object_get(t, "logprob"));
        }
        json_array_append(toks, tok);
        json_array_append(vals, json_object_get(e, "logprob"));
        json_array_append_new(tops, top ? top : json_null());
        json_array_append_new(offs, json_integer((json_int_t)off));
        off += json_string_length(tok);
    }
    return json_pack("{so so so so}", "tokens", toks, "token_logprobs", vals, "top_logprobs", tops,
                     "text_offset", offs);
}

json_t *oa_tool_calls_json(const sch_tool_call *t, size_t n) {
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++)
        json_array_append_new(a, json_pack("{ss# ss s{ss# ss#}}", "id", t[i].id.ptr,
                                           (int)t[i].id.len, "type", "function", "function", "name",
                                           t[i].name.ptr, (int)t[i].name.len, "arguments",
                                           t[i].arguments.ptr ? t[i].arguments.ptr : "",
                                           (int)t[i].arguments.len));
    return a;
}

/* One entry of `choices` of the complete response. */
static json_t *gw_choice_json(const oa_chat *q, const sch_choice *c) {
    json_t *lp = json_null();
    if (q->logprobs) {
        json_t *content = oa_logprobs_content(c->logprobs, c->n_logprobs);
        lp = q->legacy ? oa_logprobs_legacy(content, 0)
                       : json_pack("{sO sn}", "content", content, "refusal");
        json_decref(content);
    }
    if (q->legacy) {
        json_t *text;
        if (q->echo) {
            size_t pn = q->turn.prompt.len;
            char *buf = malloc(pn + c->text.len + 1);
            if (!buf) {
                json_decref(lp);
                return NULL;
            }
            memcpy(buf, q->turn.prompt.ptr, pn);
            memcpy(buf + pn, c->text.ptr, c->text.len);
            text = json_stringn(buf, pn + c->text.len);
            free(buf);
        } else {
            text = json_stringn(c->text.ptr, c->text.len);
        }
        return json_pack("{so sI so ss}", "text", text, "index", (json_int_t)c->index, "logprobs",
                         lp, "finish_reason", oa_finish_name(c));
    }
    json_t *msg = json_pack("{ss sn}", "role", "assistant", "refusal");
    if (msg && c->n_tool_calls && !c->text.len) json_object_set_new(msg, "content", json_null());
    else if (msg) json_object_set_new(msg, "content", json_stringn(c->text.ptr, c->text.len));
    if (msg && c->n_tool_calls)
        json_object_set_new(msg, "tool_calls", oa_tool_calls_json(c->tool_calls, c->n_tool_calls));
    return json_pack("{sI so so ss}", "index", (json_int_t)c->index, "message", msg, "logprobs", lp,
                     "finish_reason", oa_finish_name(c));
}

json_t *oa_completion_json(const sch_result *r, const oa_chat *q, const char *id,
                           uint64_t created_s) {
    json_t *choices = json_array(), *usage = gw_usage_json(r);
    for (int k = 0; choices && k < oa_result_choices(r); k++) {
        sch_choice c;
        oa_result_choice(r, k, &c);
        json_t *j = gw_choice_json(q, &c);
        if (!j) {
            json_decref(choices);
            choices = NULL;
            break;
        }
        json_array_append_new(choices, j);
    }
    if (!choices || !usage) {
        json_decref(choices);
        json_decref(usage);
        return NULL;
    }
    return json_pack("{ss ss sI ss so so}", "id", id, "object",
                     q->legacy ? "text_completion" : "chat.completion", "created",
                     (json_int_t)created_s, "model", q->model, "choices", choices, "usage", usage);
}

json_t *oa_chunk_json(const oa_chat *q, const char *id, uint64_t created_s, const oa_delta *d,
                      const sch_result *usage) {
    json_t *choices = json_array();
    json_t *o = json_pack("{ss ss sI ss}", "id", id, "object",
                          q->legacy ? "text_completion" : "chat.completion.chunk", "created",
                          (json_int_t)created_s, "model", q->model);
    if (!choices || !o) goto err;
    if (d) {
        json_t *ch, *lp = json_null();
        if (q->legacy && d->logprobs) lp = oa_logprobs_legacy(d->logprobs, d->text_from);
        json_t *fin = d->finish ? json_string(d->finish) : json_null();
        if (q->legacy) {
            ch = json_pack("{ss# sI so so}", "text", d->text ? d->text : "", (int)d->len, "index",
                           (json_int_t)d->index, "logprobs", lp, "finish_reason", fin);
        } else {
            json_t *delta = json_object();
            if (delta && d->role) json_object_set_new(delta, "role", json_string("assistant"));
            if (delta && d->text)
                json_object_set_new(delta, "content", json_stringn(d->text, d->len));
            if (delta && d->tool_calls) json_object_set(delta, "tool_calls", d->tool_calls);
            if (delta && d->logprobs) lp = json_pack("{sO sn}", "content", d->logprobs, "refusal");
            ch = json_pack("{sI so so so}", "index", (json_int_t)d->index, "delta", delta,
                           "logprobs", lp, "finish_reason", fin);
        }
        if (!ch) goto err;
        json_array_append_new(choices, ch);
    }
    json_object_set_new(o, "choices", choices);
    if (usage) json_object_set_new(o, "usage", gw_usage_json(usage));
    return o;
err:
    json_decref(choices);
    json_decref(o);
    return NULL;
}

json_t *oa_error_json(const char *message, const char *type, const char *param, const char *code) {
    return json_pack("{s{ss ss so so}}", "error", "message", message, "type", type, "param",
                     param ? json_string(param) : json_null(), "code",
                     code ? json_string(code) : json_null());
}

const char *oa_result_param(const sch_result *r, char *buf, size_t n) {
    /* worker messages about a request field start "params.<field>" */
    const char *m = r->error_message.ptr;
    if (!m || strncmp(m, "params.", 7) || !n) return NULL;
    size_t k = strcspn(m + 7, ".: ([");
    if (!k || k >= n) return NULL;
    memcpy(buf, m + 7, k);
    buf[k] = 0;
    if (!strcmp(buf, "n") || !strcmp(buf, "tool_choice") || !strcmp(buf, "tools") ||
        !strcmp(buf, "response_format") || !strcmp(buf, "logprobs"))
        return buf;
    return NULL;
}

int oa_result_status(const sch_result *r, const char **type, const char **code) {
    const char *name = r->error_name.ptr ? r->error_name.ptr : "";
    *code = r->has_error ? name : NULL;
    if (r->finish_reason == SCH_FINISH_EXPIRED || !strcmp(name, "E_EXPIRED")) {
        *type = "timeout";
        return 504;
    }
    if (!strcmp(name, "E_UNKNOWN_MODEL")) {
        *type = "invalid_request_error";
        *code = "model_not_found";
        return 404;
    }
    if (!strcmp(name, "E_UNSUPPORTED")) { /* a field the worker cannot honour */
        *type = "invalid_request_error";
        *code = "unsupported_parameter";
        return 400;
    }
    if (!strcmp(name, "E_INTERNAL") || !*name) {
        *type = "server_error";
        return 500;
    }
    *type = "invalid_request_error";
    return 400;
}
