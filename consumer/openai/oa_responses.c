/*
 * oa_responses.c -- a Responses request -> the chat-completions request
 * (and so the ChatTurn) the chat endpoint makes; a TurnResult -> the
 * `response` object (see oa_responses.h for the rules).
 */
#define _POSIX_C_SOURCE 200809L
#include "oa_responses.h"
#include "oa_request.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What the Responses endpoint does with a field. */
typedef enum rs_use {
    RS_PASS,  /* copied to the chat request under the same name */
    RS_MAP,   /* read here (mapped to chat fields or read by the gateway) */
    RS_NULL,  /* accepted only as null */
    RS_FALSE, /* null or false */
    RS_ZERO,  /* null or 0 */
    RS_EMPTY, /* null, {} or [] */
    RS_STR,   /* null or the string in `ok` */
} rs_use;

/* One field of OpenAI's Responses request. */
typedef struct rs_field {
    const char *name; /* JSON member */
    rs_use use;       /* what is done with it */
    const char *ok;   /* RS_STR: the accepted string */
    const char *why;  /* why other values are refused */
} rs_field;

static const rs_field rs_fields[] = {
    {"background", RS_FALSE, NULL, "background mode is not supported"},
    {"conversation", RS_NULL, NULL,
     "conversation objects are not supported (use previous_response_id)"},
    {"include", RS_EMPTY, NULL, "include is not supported"},
    {"input", RS_MAP, NULL, NULL},
    {"instructions", RS_MAP, NULL, NULL},
    {"max_output_tokens", RS_MAP, NULL, NULL},
    {"max_tool_calls", RS_NULL, NULL, "max_tool_calls is not supported"},
    {"metadata", RS_EMPTY, NULL, "metadata is not supported"},
    {"model", RS_PASS, NULL, NULL},
    {"parallel_tool_calls", RS_PASS, NULL, NULL},
    {"previous_response_id", RS_MAP, NULL, NULL},
    {"prompt", RS_NULL, NULL, "prompt templates are not supported"},
    {"prompt_cache_key", RS_NULL, NULL,
     "prompt_cache_key is not supported (parley keys the cache by conversation)"},
    {"prompt_cache_retention", RS_NULL, NULL, "prompt_cache_retention is not supported"},
    {"reasoning", RS_NULL, NULL, "reasoning options are not supported"},
    {"safety_identifier", RS_PASS, NULL, NULL},
    {"service_tier", RS_PASS, NULL, NULL},
    {"store", RS_MAP, NULL, NULL},
    {"stream", RS_MAP, NULL, NULL},
    {"stream_options", RS_NULL, NULL, "stream_options is not supported"},
    {"temperature", RS_PASS, NULL, NULL},
    {"text", RS_MAP, NULL, NULL},
    {"tool_choice", RS_MAP, NULL, NULL},
    {"tools", RS_MAP, NULL, NULL},
    {"top_logprobs", RS_ZERO, NULL, "top_logprobs is not supported by /v1/responses"},
    {"top_p", RS_PASS, NULL, NULL},
    {"truncation", RS_STR, "disabled", "truncation is not supported (only \"disabled\")"},
    {"user", RS_PASS, NULL, NULL},
};
#define RS_NFIELDS (sizeof rs_fields / sizeof rs_fields[0])

/* Check every field of o against the table; copy RS_PASS ones to chat. */
static int rs_fields_check(json_t *o, json_t *chat, oa_fault *f) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        const rs_field *fd = NULL;
        for (size_t i = 0; i < RS_NFIELDS && !fd; i++)
            if (!strcmp(rs_fields[i].name, k)) fd = &rs_fields[i];
        if (!fd)
            return oa_fail(f, k, "unknown_parameter", "Unrecognized request argument: %.100s", k);
        int ok = json_is_null(v);
        switch (fd->use) {
        case RS_PASS: json_object_set(chat, k, v); /* fall through */
        case RS_MAP: ok = 1; break;
        case RS_NULL: break;
        case RS_FALSE: ok |= json_is_false(v); break;
        case RS_ZERO: ok |= json_is_number(v) && json_number_value(v) == 0; break;
        case RS_EMPTY:
            ok |= (json_is_object(v) && json_object_size(v) == 0) ||
                  (json_is_array(v) && json_array_size(v) == 0);
            break;
        case RS_STR: ok |= json_is_string(v) && !strcmp(json_string_value(v), fd->ok); break;
        }
        if (!ok) return oa_fail(f, k, "unsupported_parameter", "%s", fd->why);
    }
    return 0;
}

/* A message's content: a string, or a list of text parts joined. */
static json_t *rs_content(json_t *c, const char *p, oa_fault *f) {
    if (json_is_string(c)) return json_incref(c);
    if (!json_is_array(c)) {
        oa_fail(f, p, NULL, "%s must be a string or a list of text parts", p);
        return NULL;
    }
    json_t *parts = json_array();
    size_t i;
    json_t *part;
    json_array_foreach(c, i, part) {
        json_t *t = json_object_get(part, "type"), *tx = json_object_get(part, "text");
        const char *ts = json_string_value(t);
        if (!ts || (strcmp(ts, "input_text") && strcmp(ts, "output_text") && strcmp(ts, "text"))) {
            char pp[160];
            snprintf(pp, sizeof pp, "%s[%zu].type", p, i);
            json_decref(parts);
            oa_fail(f, pp, "unsupported_value",
                    "%s must be input_text or output_text (parley takes text only)", pp);
            return NULL;
        }
        if (!json_is_string(tx)) {
            char pp[160];
            snprintf(pp, sizeof pp, "%s[%zu].text", p, i);
            json_decref(parts);
            oa_fail(f, pp, NULL, "%s must be a string", pp);
            return NULL;
        }
        json_array_append_new(parts, json_pack("{ss sO}", "type", "text", "text", tx));
    }
    return parts;
}

/* The string member k of item it (param input[i].k); NULL with *f. */
static json_t *rs_str(json_t *it, const char *k, size_t i, oa_fault *f) {
    json_t *v = json_object_get(it, k);
    if (json_is_string(v)) return v;
    char p[96];
    snprintf(p, sizeof p, "input[%zu].%s", i, k);
    oa_fail(f, p, NULL, "%s must be a string", p);
    return NULL;
}

/* One input item appended to msgs as a chat message. */
static int rs_item(json_t *msgs, json_t *it, size_t i, oa_fault *f) {
    char p[96];
    if (!json_is_object(it)) {
        snprintf(p, sizeof p, "input[%zu]", i);
        return oa_fail(f, p, NULL, "%s must be an object", p);
    }
    json_t *type = json_object_get(it, "type"), *x, *y;
    const char *ts = json_is_null(type) || !type ? "message" : json_string_value(type);
    snprintf(p, sizeof p, "input[%zu].type", i);
    if (!ts) return oa_fail(f, p, NULL, "%s must be a string", p);
    if (!strcmp(ts, "message")) {
        json_t *role = rs_str(it, "role", i, f);
        if (!role) return -1;
        snprintf(p, sizeof p, "input[%zu].content", i);
        json_t *c = rs_content(json_object_get(it, "content"), p, f);
        if (!c) return -1;
        return json_array_append_new(msgs, json_pack("{sO so}", "role", role, "content", c));
    }
    if (!strcmp(ts, "function_call")) {
        json_t *id = rs_str(it, "call_id", i, f), *name = id ? rs_str(it, "name", i, f) : NULL,
               *args = name ? rs_str(it, "arguments", i, f) : NULL;
        if (!args) return -1;
        json_t *call = json_pack("{sO ss s{sO sO}}", "id", id, "type", "function", "function",
                                 "name", name, "arguments", args);
        /* calls after an assistant message (or another call) join it */
        json_t *last = json_array_get(msgs, json_array_size(msgs) - 1);
        const char *lr = json_string_value(json_object_get(last, "role"));
        if (last && lr && !strcmp(lr, "assistant")) {
            json_t *tc = json_object_get(last, "tool_calls");
            if (!tc) json_object_set_new(last, "tool_calls", tc = json_array());
            return json_array_append_new(tc, call);
        }
        return json_array_append_new(
            msgs, json_pack("{ss sn s[o]}", "role", "assistant", "content", "tool_calls", call));
    }
    if (!strcmp(ts, "function_call_output")) {
        if (!(x = rs_str(it, "call_id", i, f)) || !(y = rs_str(it, "output", i, f))) return -1;
        return json_array_append_new(
            msgs, json_pack("{ss sO sO}", "role", "tool", "tool_call_id", x, "content", y));
    }
    return oa_fail(f, p, "unsupported_value",
                   "%s '%.40s' is not supported (message, function_call and "
                   "function_call_output are)",
                   p, ts);
}

static int rs_input(oa_resp *q, json_t *in, oa_fault *f) {
    q->input = json_array();
    if (json_is_string(in))
        return json_array_append_new(q->input, json_pack("{ss sO}", "role", "user", "content", in));
    if (!json_is_array(in) || json_array_size(in) == 0 || json_array_size(in) > OA_MAX_MESSAGES)
        return oa_fail(f, "input", NULL, "input is required: a string or a list of 1..%d items",
                       OA_MAX_MESSAGES);
    size_t i;
    json_t *it;
    json_array_foreach(in, i, it) if (rs_item(q->input, it, i, f) != 0) {
        return f->status ? -1 : oa_fail(f, "input", NULL, "out of memory reading input");
    }
    return 0;
}

/* tools and tool_choice -> the chat request's. */
static int rs_tools(oa_resp *q, oa_fault *f) {
    json_t *tools = json_object_get(q->root, "tools"),
           *tc = json_object_get(q->root, "tool_choice");
    char p[64];
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools)) return oa_fail(f, "tools", NULL, "tools must be an array");
        json_t *out = json_array(), *t;
        size_t i;
        json_object_set_new(q->chat, "tools", out);
        json_array_foreach(tools, i, t) {
            snprintf(p, sizeof p, "tools[%zu].type", i);
            const char *ty = json_string_value(json_object_get(t, "type"));
            if (!ty || strcmp(ty, "function"))
                return oa_fail(f, p, "unsupported_value",
                               "%s '%.40s' is not supported: parley serves function tools only "
                               "(no built-in tools such as web_search or file_search)",
                               p, ty ? ty : "?");
            json_t *fn = json_object();
            const char *k;
            json_t *v;
            json_object_foreach(t, k, v) {
                if (!strcmp(k, "type")) continue;
                if (strcmp(k, "name") && strcmp(k, "description") && strcmp(k, "parameters") &&
                    strcmp(k, "strict")) {
                    json_decref(fn);
                    snprintf(p, sizeof p, "tools[%zu].%.32s", i, k);
                    return oa_fail(f, p, "unknown_parameter", "%s is not a function tool field", p);
                }
                if (!json_is_null(v)) json_object_set(fn, k, v);
            }
            json_array_append_new(out, json_pack("{ss so}", "type", "function", "function", fn));
        }
    }
    if (tc && !json_is_null(tc)) {
        if (json_is_object(tc)) {
            const char *ty = json_string_value(json_object_get(tc, "type"));
            json_t *name = json_object_get(tc, "name");
            if (!ty || strcmp(ty, "function") || !json_is_string(name))
                return oa_fail(f, "tool_choice", "unsupported_value",
                               "tool_choice must be none, auto, required or {\"type\": "
                               "\"function\", \"name\": ...}");
            json_object_set_new(
                q->chat, "tool_choice",
                json_pack("{ss s{sO}}", "type", "function", "function", "name", name));
        } else {
            json_object_set(q->chat, "tool_choice", tc);
        }
    }
    return 0;
}

/* text.format -> response_format. */
static int rs_text(oa_resp *q, oa_fault *f) {
    json_t *text = json_object_get(q->root, "text");
    if (!text || json_is_null(text)) return 0;
    if (!json_is_object(text)) return oa_fail(f, "text", NULL, "text must be an object");
    const char *k;
    json_t *v;
    json_object_foreach(text, k, v) {
        if (!strcmp(k, "verbosity")) {
            if (!json_is_null(v) && !(json_is_string(v) && !strcmp(json_string_value(v), "medium")))
                return oa_fail(f, "text.verbosity", "unsupported_parameter",
                               "text.verbosity is not supported");
        } else if (strcmp(k, "format")) {
            char p[64];
            snprintf(p, sizeof p, "text.%.40s", k);
            return oa_fail(f, p, "unknown_parameter", "Unrecognized request argument: %s", p);
        }
    }
    json_t *fm = json_object_get(text, "format");
    if (!fm || json_is_null(fm)) return 0;
    const char *ty = json_string_value(json_object_get(fm, "type"));
    if (!json_is_object(fm) || !ty)
        return oa_fail(f, "text.format", NULL, "text.format must be an object with a type");
    if (!strcmp(ty, "text") || !strcmp(ty, "json_object")) {
        json_object_set_new(q->chat, "response_format", json_pack("{ss}", "type", ty));
        return 0;
    }
    if (strcmp(ty, "json_schema"))
        return oa_fail(f, "text.format.type", "unsupported_value",
                       "text.format.type must be text, json_object or json_schema");
    json_t *js = json_object();
    json_object_foreach(fm, k, v) {
        if (!strcmp(k, "type")) continue;
        if (strcmp(k, "name") && strcmp(k, "schema") && strcmp(k, "strict") &&
            strcmp(k, "description")) {
            json_decref(js);
            char p[64];
            snprintf(p, sizeof p, "text.format.%.32s", k);
            return oa_fail(f, p, "unknown_parameter", "Unrecognized request argument: %s", p);
        }
        json_object_set(js, k, v);
    }
    json_object_set_new(q->chat, "response_format",
                        json_pack("{ss so}", "type", "json_schema", "json_schema", js));
    return 0;
}

int oa_resp_parse(const char *body, size_t len, oa_resp *q, oa_fault *f) {
    json_error_t je;
    memset(q, 0, sizeof *q);
    memset(f, 0, sizeof *f);
    q->store = 1;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!o)
        return oa_fail(f, NULL, NULL, "the request body is not valid JSON: %s (line %d column %d)",
                       je.text, je.line, je.column);
    q->root = o;
    q->chat = json_object();
    if (!json_is_object(o)) {
        oa_fail(f, NULL, NULL, "the request body must be a JSON object");
        goto err;
    }
    if (rs_fields_check(o, q->chat, f) != 0 || rs_input(q, json_object_get(o, "input"), f) != 0 ||
        rs_tools(q, f) != 0 || rs_text(q, f) != 0)
        goto err;
    json_t *v = json_object_get(o, "instructions");
    if (v && !json_is_null(v)) {
        if (!json_is_string(v)) {
            oa_fail(f, "instructions", NULL, "instructions must be a string");
            goto err;
        }
        q->instructions = v;
    }
    v = json_object_get(o, "max_output_tokens");
    if (v && !json_is_null(v)) json_object_set(q->chat, "max_completion_tokens", v);
    const char *bools[2] = {"store", "stream"};
    int *dst[2] = {&q->store, &q->stream};
    for (int i = 0; i < 2; i++) {
        v = json_object_get(o, bools[i]);
        if (!v || json_is_null(v)) continue;
        if (!json_is_boolean(v)) {
            oa_fail(f, bools[i], NULL, "%s must be a boolean", bools[i]);
            goto err;
        }
        *dst[i] = json_is_true(v);
    }
    /* the turn streams its tokens (TokenChunks) only when asked */
    if (q->stream) json_object_set_new(q->chat, "stream", json_true());
    v = json_object_get(o, "previous_response_id");
    if (v && !json_is_null(v)) {
        const char *s = json_string_value(v);
        size_t n = s ? json_string_length(v) : 0;
        int bad = !s || n == 0 || n > OA_RESP_MAX_ID;
        for (size_t i = 0; !bad && i < n; i++)
            bad = !((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'z') ||
                    (s[i] >= 'A' && s[i] <= 'Z') || s[i] == '_' || s[i] == '-' || s[i] == '.');
        if (bad) {
            oa_fail(f, "previous_response_id", NULL,
                    "previous_response_id must be a response id (1..%d bytes of "
                    "[A-Za-z0-9_.-])",
                    OA_RESP_MAX_ID);
            goto err;
        }
        memcpy(q->prev_id, s, n + 1);
    }
    return 0;
err:
    oa_resp_free(q);
    return -1;
}

/* Rename a chat field in a fault to its Responses name. */
static void rs_rename(oa_fault *f) {
    static const char *const map[][2] = {{"max_completion_tokens", "max_output_tokens"},
                                         {"response_format", "text.format"},
                                         {"messages", "input"},
                                         {"tools", "tools"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        size_t n = strlen(map[i][0]);
        if (strncmp(f->param, map[i][0], n)) continue;
        char p[sizeof f->param];
        snprintf(p, sizeof p, "%s%s", map[i][1], f->param + n);
        /* tools[i].function.x -> tools[i].x */
        char *fn = strstr(p, ".function");
        if (fn && !strncmp(p, "tools[", 6)) memmove(fn, fn + 9, strlen(fn + 9) + 1);
        memcpy(f->param, p, sizeof p);
        return;
    }
}

int oa_resp_chat(const oa_resp *q, json_t *history, uint32_t cap, oa_chat *out, oa_fault *f) {
    json_t *chat = json_copy(q->chat), *msgs = json_array();
    if (q->instructions)
        json_array_append_new(msgs,
                              json_pack("{ss sO}", "role", "system", "content", q->instructions));
    if (history) json_array_extend(msgs, history);
    json_array_extend(msgs, q->input);
    json_object_set_new(chat, "messages", msgs);
    int rc = oa_chat_from_json(chat, cap, out, f);
    json_decref(chat);
    if (rc) rs_rename(f);
    return rc;
}

json_t *oa_resp_conversation(const oa_resp *q, json_t *history, const sch_result *r) {
    json_t *msgs = json_array();
    if (history) json_array_extend(msgs, history);
    json_array_extend(msgs, q->input);
    sch_choice c;
    oa_result_choice(r, 0, &c);
    json_t *m = json_pack("{ss ss#}", "role", "assistant", "content", c.text.ptr ? c.text.ptr : "",
                          (int)c.text.len);
    if (c.n_tool_calls)
        json_object_set_new(m, "tool_calls", oa_tool_calls_json(c.tool_calls, c.n_tool_calls));
    json_array_append_new(msgs, m);
    return msgs;
}

void oa_resp_item_id(const char *id, int k, char *buf, size_t n) {
    const char *tail = strncmp(id, "resp_", 5) ? id : id + 5;
    if (k < 0) snprintf(buf, n, "msg_%s", tail);
    else snprintf(buf, n, "fc_%s_%d", tail, k);
}

json_t *oa_resp_json(const sch_result *r, const oa_resp *q, const char *id, uint64_t created_s,
                     int store) {
    json_t *o =
        json_pack("{ss ss sI ss sn sn sO* sO*}", "id", id, "object", "response", "created_at",
                  (json_int_t)created_s, "status", r ? "completed" : "in_progress", "error",
                  "incomplete_details", "instructions", q->instructions, "model",
                  json_object_get(q->root, "model"));
    if (!o) return NULL;
    json_t *out = json_array(), *v;
    char iid[200];
    if (r) {
        sch_choice c;
        oa_result_choice(r, 0, &c);
        if (c.text.len || !c.n_tool_calls) {
            oa_resp_item_id(id, -1, iid, sizeof iid);
            json_array_append_new(out, json_pack("{ss ss ss ss s[{ss ss# s[]}]}", "type", "message",
                                                 "id", iid, "status", "completed", "role",
                                                 "assistant", "content", "type", "output_text",
                                                 "text", c.text.ptr ? c.text.ptr : "",
                                                 (int)c.text.len, "annotations"));
        }
        for (size_t k = 0; k < c.n_tool_calls; k++) {
            const sch_tool_call *t = &c.tool_calls[k];
            oa_resp_item_id(id, (int)k, iid, sizeof iid);
            json_array_append_new(
                out, json_pack("{ss ss ss# ss# ss# ss}", "type", "function_call", "id", iid,
                               "call_id", t->id.ptr ? t->id.ptr : "", (int)t->id.len, "name",
                               t->name.ptr ? t->name.ptr : "", (int)t->name.len, "arguments",
                               t->arguments.ptr ? t->arguments.ptr : "", (int)t->arguments.len,
                               "status", "completed"));
        }
        if (c.finish_reason == SCH_FINISH_LENGTH && !c.n_tool_calls) {
            json_object_set_new(o, "status", json_string("incomplete"));
            json_object_set_new(o, "incomplete_details",
                                json_pack("{ss}", "reason", "max_output_tokens"));
        }
        json_object_set_new(
            o, "usage",
            json_pack("{sI s{sI} sI s{sI} sI}", "input_tokens", (json_int_t)r->prompt_tokens,
                      "input_tokens_details", "cached_tokens", (json_int_t)r->cached_tokens,
                      "output_tokens", (json_int_t)r->completion_tokens, "output_tokens_details",
                      "reasoning_tokens", (json_int_t)0, "total_tokens",
                      (json_int_t)(r->prompt_tokens + r->completion_tokens)));
    } else {
        json_object_set_new(o, "usage", json_null());
    }
    json_object_set_new(o, "output", out);
    json_object_set_new(
        o, "parallel_tool_calls",
        json_boolean(!json_is_false(json_object_get(q->root, "parallel_tool_calls"))));
    json_object_set_new(o, "previous_response_id",
                        q->prev_id[0] ? json_string(q->prev_id) : json_null());
    v = json_object_get(q->root, "max_output_tokens");
    json_object_set_new(o, "max_output_tokens", v ? json_incref(v) : json_null());
    v = json_object_get(q->root, "temperature");
    json_object_set_new(o, "temperature", v && !json_is_null(v) ? json_incref(v) : json_real(1));
    v = json_object_get(q->root, "top_p");
    json_object_set_new(o, "top_p", v && !json_is_null(v) ? json_incref(v) : json_real(1));
    v = json_object_get(q->root, "tool_choice");
    json_object_set_new(o, "tool_choice",
                        v && !json_is_null(v) ? json_incref(v) : json_string("auto"));
    v = json_object_get(q->root, "tools");
    json_object_set_new(o, "tools", json_is_array(v) ? json_incref(v) : json_array());
    v = json_object_get(json_object_get(q->root, "text"), "format");
    json_object_set_new(
        o, "text",
        json_pack("{so}", "format",
                  json_is_object(v) ? json_incref(v) : json_pack("{ss}", "type", "text")));
    json_object_set_new(o, "store", json_boolean(store));
    json_object_set_new(o, "truncation", json_string("disabled"));
    json_object_set_new(o, "metadata", json_object());
    json_object_set_new(o, "background", json_false());
    return o;
}

void oa_resp_free(oa_resp *q) {
    json_decref(q->root);
    json_decref(q->chat);
    json_decref(q->input);
    memset(q, 0, sizeof *q);
}
