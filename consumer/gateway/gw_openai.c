/*
 * gw_openai.c -- OpenAI chat-completions request validation and the
 * response, chunk and error objects (see gw_openai.h for the rules).
 */
#define _POSIX_C_SOURCE 200809L
#include "gw_openai.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pl_err.h"
#include "pl_hash.h"

/* Set err/param and return -1. */
static int gw_bad(char *err, size_t errlen, const char **param, const char *p, const char *fmt,
                  const char *a) {
    pl_errf(err, errlen, -1, fmt, p ? p : "", a ? a : "");
    if (param) *param = p;
    return -1;
}

uint64_t gw_fnv64(uint64_t h, const void *p, size_t n) { return pl_fnv1a64(h, p, n); }

static const char *gw_role_name(sch_role r) {
    return r == SCH_ROLE_SYSTEM ? "system" : r == SCH_ROLE_USER ? "user" : "assistant";
}

void gw_conv_hash(const sch_message *msgs, size_t n, char out[20]) {
    uint64_t h = GW_FNV_SEED;
    static const char zero = 0;
    for (size_t i = 0; i < n; i++) {
        const char *rn = gw_role_name(msgs[i].role);
        h = gw_fnv64(h, rn, strlen(rn));
        h = gw_fnv64(h, &zero, 1);
        h = gw_fnv64(h, msgs[i].content.ptr, msgs[i].content.len);
        h = gw_fnv64(h, &zero, 1);
        if (msgs[i].role == SCH_ROLE_USER) break;
    }
    snprintf(out, 20, "oa-%016llx", (unsigned long long)h);
}

/* A string with no C0 control or DEL, 1..GW_MAX_ID bytes. */
static int gw_id_ok(const char *s, size_t n) {
    if (n == 0 || n > GW_MAX_ID) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return 0;
    return 1;
}

/* Content of one message: a string, or text parts joined. */
static int gw_content(gw_chat *c, json_t *v, sch_str *out, char *err, size_t errlen,
                      const char **param) {
    if (json_is_string(v)) {
        out->ptr = json_string_value(v);
        out->len = json_string_length(v);
    } else if (json_is_array(v)) {
        size_t total = 0, i;
        json_t *part;
        json_array_foreach(v, i, part) {
            json_t *ty = json_object_get(part, "type"), *tx = json_object_get(part, "text");
            if (!json_is_object(part) || !json_is_string(ty) ||
                strcmp(json_string_value(ty), "text") != 0 || !json_is_string(tx))
                return gw_bad(err, errlen, param, "messages",
                              "%s: only content parts of "
                              "type \"text\" with a string \"text\" are supported%s",
                              NULL);
            total += json_string_length(tx);
            if (total > 256 * 1024) break;
        }
        if (total <= 256 * 1024) {
            char *buf = malloc(total + 1), **np;
            if (!buf || !(np = realloc(c->parts, (c->n_parts + 1) * sizeof *np))) {
                free(buf);
                return gw_bad(err, errlen, param, NULL, "out of memory%s%s", NULL);
            }
            c->parts = np;
            c->parts[c->n_parts++] = buf;
            size_t off = 0;
            json_array_foreach(v, i, part) {
                json_t *tx = json_object_get(part, "text");
                memcpy(buf + off, json_string_value(tx), json_string_length(tx));
                off += json_string_length(tx);
            }
            buf[off] = 0;
            out->ptr = buf;
        }
        out->len = total;
    } else {
        return gw_bad(err, errlen, param, "messages",
                      "%s: content must be a string or an "
                      "array of text parts%s",
                      NULL);
    }
    if (out->len > 256 * 1024)
        return gw_bad(err, errlen, param, "messages",
                      "%s: content longer than 262144 "
                      "bytes%s",
                      NULL);
    return 0;
}

static int gw_messages(gw_chat *c, json_t *m, char *err, size_t errlen, const char **param) {
    if (!json_is_array(m) || json_array_size(m) == 0)
        return gw_bad(err, errlen, param, "messages", "%s must be a non-empty array%s", NULL);
    if (json_array_size(m) > GW_MAX_MESSAGES)
        return gw_bad(err, errlen, param, "messages", "%s: more than 4096 messages%s", NULL);
    if (!(c->msgs = calloc(json_array_size(m), sizeof *c->msgs)))
        return gw_bad(err, errlen, param, NULL, "out of memory%s%s", NULL);
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        json_t *role = json_object_get(msg, "role");
        if (!json_is_object(msg) || !json_is_string(role))
            return gw_bad(err, errlen, param, "messages",
                          "%s: each message must be an "
                          "object with a string \"role\"%s",
                          NULL);
        const char *r = json_string_value(role);
        sch_message *out = &c->msgs[i];
        if (!strcmp(r, "system") || !strcmp(r, "developer")) out->role = SCH_ROLE_SYSTEM;
        else if (!strcmp(r, "user")) out->role = SCH_ROLE_USER;
        else if (!strcmp(r, "assistant")) out->role = SCH_ROLE_ASSISTANT;
        else
            return gw_bad(err, errlen, param, "messages",
                          "%s: role must be system, "
                          "developer, user or assistant, not \"%.40s\"",
                          r);
        if (gw_content(c, json_object_get(msg, "content"), &out->content, err, errlen, param) != 0)
            return -1;
        c->n_msgs = i + 1;
    }
    return 0;
}

/* An optional integer field in [lo, hi]: 1 present, 0 absent, -1 bad. */
static int gw_int(json_t *o, const char *k, long long lo, long long hi, long long *out, char *err,
                  size_t errlen, const char **param) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
        char range[96];
        snprintf(range, sizeof range, "an integer in %lld..%lld", lo, hi);
        return gw_bad(err, errlen, param, k, "%s must be %s", range);
    }
    *out = json_integer_value(v);
    return 1;
}

/* An optional number field in [lo, hi] (lo excluded when open_lo). */
static int gw_num(json_t *o, const char *k, double lo, double hi, int open_lo, double *out,
                  char *err, size_t errlen, const char **param) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    double d = json_is_number(v) ? json_number_value(v) : NAN;
    if (!isfinite(d) || d < lo || d > hi || (open_lo && d == lo)) {
        char range[96];
        snprintf(range, sizeof range, "a number in %s%g, %g]", open_lo ? "(" : "[", lo, hi);
        return gw_bad(err, errlen, param, k, "%s must be %s", range);
    }
    *out = d;
    return 1;
}

static int gw_stop(gw_chat *c, json_t *s, char *err, size_t errlen, const char **param) {
    size_t n = 0;
    if (!s || json_is_null(s)) return 0;
    json_t *one[1] = {s};
    if (json_is_string(s)) {
        n = 1;
    } else if (json_is_array(s)) {
        n = json_array_size(s);
        if (n > GW_MAX_STOP)
            return gw_bad(err, errlen, param, "stop", "%s: at most 16 stop strings%s", NULL);
    } else {
        return gw_bad(err, errlen, param, "stop",
                      "%s must be a string or an array of "
                      "strings%s",
                      NULL);
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_is_string(s) ? one[0] : json_array_get(s, i);
        if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 256)
            return gw_bad(err, errlen, param, "stop",
                          "%s: each stop string must be 1..256 "
                          "bytes%s",
                          NULL);
        c->stop[i].ptr = json_string_value(v);
        c->stop[i].len = json_string_length(v);
    }
    c->turn.params.stop = c->stop;
    c->turn.params.n_stop = n;
    return 0;
}

int gw_chat_from_json(json_t *o, uint32_t cap, gw_chat *c, char *err, size_t errlen,
                      const char **param) {
    long long iv;
    double dv;
    int r;
    memset(c, 0, sizeof *c);
    if (param) *param = NULL;
    sch_turn_init(&c->turn);
    if (!json_is_object(o))
        return gw_bad(err, errlen, param, NULL, "the request body must be a JSON object%s%s", NULL);
    c->root = json_incref(o);
    json_t *model = json_object_get(o, "model");
    if (!json_is_string(model) || !gw_id_ok(json_string_value(model), json_string_length(model)))
        goto bad_model;
    memcpy(c->model, json_string_value(model), json_string_length(model) + 1);
    c->turn.model = (sch_str){c->model, strlen(c->model)};
    if (gw_messages(c, json_object_get(o, "messages"), err, errlen, param) != 0) goto err;
    c->turn.messages = c->msgs;
    c->turn.n_messages = c->n_msgs;
    c->turn.params.max_tokens = cap < 256 ? cap : 256;
    if ((r = gw_int(o, "max_tokens", 1, cap, &iv, err, errlen, param)) < 0) goto err;
    if (r) c->turn.params.max_tokens = (uint32_t)iv;
    if ((r = gw_int(o, "max_completion_tokens", 1, cap, &iv, err, errlen, param)) < 0) goto err;
    if (r) c->turn.params.max_tokens = (uint32_t)iv;
    if ((r = gw_num(o, "temperature", 0, 2, 0, &dv, err, errlen, param)) < 0) goto err;
    if (r) c->turn.params.temperature = dv;
    if ((r = gw_num(o, "top_p", 0, 1, 1, &dv, err, errlen, param)) < 0) goto err;
    if (r) c->turn.params.top_p = dv;
    if ((r = gw_num(o, "repetition_penalty", 0, 100, 1, &dv, err, errlen, param)) < 0) goto err;
    if (r) c->turn.params.repetition_penalty = dv;
    if ((r = gw_int(o, "top_k", 0, 2147483647LL, &iv, err, errlen, param)) < 0) goto err;
    if (r) c->turn.params.top_k = (uint32_t)iv;
    if ((r = gw_int(o, "seed", 0, INT64_MAX, &iv, err, errlen, param)) < 0) goto err;
    if (r) {
        c->turn.params.has_seed = true;
        c->turn.params.seed = (uint64_t)iv;
    }
    if ((r = gw_int(o, "n", 1, 1, &iv, err, errlen, param)) < 0) goto err;
    if (gw_stop(c, json_object_get(o, "stop"), err, errlen, param) != 0) goto err;
    json_t *st = json_object_get(o, "stream");
    if (st && !json_is_null(st) && !json_is_boolean(st)) {
        gw_bad(err, errlen, param, "stream", "%s must be a boolean%s", NULL);
        goto err;
    }
    c->stream = json_is_true(st);
    c->turn.stream = c->stream;
    json_t *so = json_object_get(o, "stream_options");
    if (so && !json_is_null(so)) {
        json_t *iu = json_object_get(so, "include_usage");
        if (!json_is_object(so) || (iu && !json_is_null(iu) && !json_is_boolean(iu))) {
            gw_bad(err, errlen, param, "stream_options",
                   "%s must be an object whose "
                   "include_usage is a boolean%s",
                   NULL);
            goto err;
        }
        c->include_usage = json_is_true(iu);
    }
    json_t *user = json_object_get(o, "user");
    if (user && !json_is_null(user) && (!json_is_string(user) || json_string_length(user) > 256)) {
        gw_bad(err, errlen, param, "user", "%s must be a string of at most 256 bytes%s", NULL);
        goto err;
    }
    return 0;
bad_model:
    gw_bad(err, errlen, param, "model",
           "%s must be a string of 1..256 bytes without "
           "control characters%s",
           NULL);
err:
    gw_chat_free(c);
    return -1;
}

int gw_chat_parse(const char *body, size_t len, uint32_t cap, gw_chat *c, char *err, size_t errlen,
                  const char **param) {
    json_error_t je;
    memset(c, 0, sizeof *c);
    if (param) *param = NULL;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!o) {
        return pl_errf(err, errlen, -1,
                       "the request body is not valid JSON: %s (line %d column %d)", je.text,
                       je.line, je.column);
    }
    int rc = gw_chat_from_json(o, cap, c, err, errlen, param);
    json_decref(o);
    return rc;
}

void gw_chat_free(gw_chat *c) {
    if (c->root) json_decref(c->root);
    for (size_t i = 0; i < c->n_parts; i++) free(c->parts[i]);
    free(c->parts);
    free(c->msgs);
    memset(c, 0, sizeof *c);
}

const char *gw_finish_reason(const sch_result *r) {
    return r->finish_reason == SCH_FINISH_LENGTH ? "length" : "stop";
}

static json_t *gw_usage_json(const sch_result *r) {
    return json_pack("{sI sI sI s{sI}}", "prompt_tokens", (json_int_t)r->prompt_tokens,
                     "completion_tokens", (json_int_t)r->completion_tokens, "total_tokens",
                     (json_int_t)(r->prompt_tokens + r->completion_tokens), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)r->cached_tokens);
}

json_t *gw_completion_json(const sch_result *r, const char *id, const char *model,
                           uint64_t created_s) {
    json_t *msg = json_pack("{ss s:s#}", "role", "assistant", "content",
                            r->text.ptr ? r->text.ptr : "", (int)r->text.len);
    json_t *usage = gw_usage_json(r);
    if (!msg || !usage) {
        json_decref(msg);
        json_decref(usage);
        return NULL;
    }
    return json_pack("{ss ss sI ss s[{sI so ss so}] so}", "id", id, "object", "chat.completion",
                     "created", (json_int_t)created_s, "model", model, "choices", "index",
                     (json_int_t)0, "message", msg, "finish_reason", gw_finish_reason(r),
                     "logprobs", json_null(), "usage", usage);
}

json_t *gw_chunk_json(const char *id, const char *model, uint64_t created_s, int role,
                      const char *text, size_t len, const char *finish, const sch_result *r) {
    json_t *delta = json_object(), *choices = json_array();
    json_t *o = json_pack("{ss ss sI ss}", "id", id, "object", "chat.completion.chunk", "created",
                          (json_int_t)created_s, "model", model);
    if (!delta || !choices || !o) goto err;
    if (role) json_object_set_new(delta, "role", json_string("assistant"));
    if (text) json_object_set_new(delta, "content", json_stringn(text, len));
    if (!r || finish) {
        json_t *ch =
            json_pack("{sI sO so so}", "index", (json_int_t)0, "delta", delta, "logprobs",
                      json_null(), "finish_reason", finish ? json_string(finish) : json_null());
        if (!ch) goto err;
        json_array_append_new(choices, ch);
    }
    json_decref(delta);
    json_object_set_new(o, "choices", choices);
    if (r) json_object_set_new(o, "usage", gw_usage_json(r));
    return o;
err:
    json_decref(delta);
    json_decref(choices);
    json_decref(o);
    return NULL;
}

json_t *gw_error_json(const char *message, const char *type, const char *param, const char *code) {
    return json_pack("{s{ss ss so so}}", "error", "message", message, "type", type, "param",
                     param ? json_string(param) : json_null(), "code",
                     code ? json_string(code) : json_null());
}

int gw_result_status(const sch_result *r, const char **type, const char **code) {
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
    if (!strcmp(name, "E_INTERNAL") || !*name) {
        *type = "server_error";
        return 500;
    }
    *type = "invalid_request_error";
    return 400;
}
