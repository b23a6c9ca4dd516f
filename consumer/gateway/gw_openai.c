/*
 * gw_openai.c -- the OpenAI response, chunk and error objects and the
 * conversation key (see gw_openai.h; requests are parsed in gw_request.c).
 */
#define _POSIX_C_SOURCE 200809L
#include "gw_openai.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "pl_err.h"
#include "pl_hash.h"

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
