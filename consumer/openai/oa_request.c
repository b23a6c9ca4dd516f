/*
 * oa_request.c -- OpenAI request bodies -> a validated oa_chat (see
 * oa_openai.h for the rules).
 *
 * Every field of OpenAI's chat-completions request is in gw_fields with
 * what the gateway does with it: GW_F_READ fields are parsed by
 * oa_chat_from_json and honoured; the others are accepted only at their
 * default value (GW_DEF_*: a request that asks for nothing is honoured
 * trivially) and refused otherwise, with `param` naming the field.  A
 * field the table does not know is not OpenAI's (or is newer than this
 * gateway) and is refused as well, so nothing a client asks for is
 * silently dropped.
 */
#define _POSIX_C_SOURCE 200809L
#include "oa_openai.h"
#include "oa_request.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int oa_fail(oa_fault *f, const char *p, const char *code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
    f->status = 400;
    snprintf(f->param, sizeof f->param, "%s", p ? p : "");
    f->code = code;
    return -1;
}

/* What a field's value may be when parley does not implement the field:
 * its default, which asks for nothing. */
typedef enum gw_def {
    GW_F_READ = 0,    /* parsed and honoured by oa_chat_from_json */
    GW_DEF_NULL,      /* null only */
    GW_DEF_FALSE,     /* null or false */
    GW_DEF_ZERO,      /* null or the number 0 */
    GW_DEF_EMPTY,     /* null or {} */
    GW_DEF_STR,       /* null or one of the strings in `ok` ("a|b") */
    GW_DEF_TEXT_ONLY, /* null or ["text"] (modalities) */
    GW_DEF_TEXT_FMT   /* null or {"type": "text"} (response_format) */
} gw_def;

/* One field of the request. */
typedef struct gw_field {
    const char *name; /* JSON member */
    gw_def def;       /* GW_F_READ, or the value accepted */
    const char *ok;   /* GW_DEF_STR: accepted strings, '|'-separated */
    const char *why;  /* why other values are refused */
} gw_field;

/* OpenAI's chat-completions request fields (and the two extensions),
 * alphabetical. */
static const gw_field gw_fields[] = {
    {"audio", GW_DEF_NULL, NULL, "audio output is not supported"},
    {"frequency_penalty", GW_DEF_ZERO, NULL,
     "frequency_penalty is not supported (parley has repetition_penalty)"},
    {"function_call", GW_DEF_STR, "none", "functions are not supported"},
    {"functions", GW_DEF_NULL, NULL, "functions are not supported"},
    {"logit_bias", GW_DEF_EMPTY, NULL, "logit_bias is not supported"},
    {"logprobs", GW_F_READ, NULL, NULL},
    {"max_completion_tokens", GW_F_READ, NULL, NULL},
    {"max_tokens", GW_F_READ, NULL, NULL},
    {"messages", GW_F_READ, NULL, NULL},
    {"metadata", GW_DEF_EMPTY, NULL,
     "metadata belongs to stored completions (store), which "
     "parley does not keep"},
    {"modalities", GW_DEF_TEXT_ONLY, NULL, "only the text modality is supported"},
    {"model", GW_F_READ, NULL, NULL},
    {"n", GW_F_READ, NULL, NULL},
    {"parallel_tool_calls", GW_F_READ, NULL, NULL},
    {"prediction", GW_DEF_NULL, NULL, "predicted outputs are not supported"},
    {"presence_penalty", GW_DEF_ZERO, NULL,
     "presence_penalty is not supported (parley has repetition_penalty)"},
    {"prompt_cache_key", GW_DEF_NULL, NULL,
     "prompt_cache_key is not supported: parley keys its cache by prefix and routes a "
     "conversation by its opening messages or the X-Parley-Conversation header"},
    {"reasoning_effort", GW_DEF_NULL, NULL, "the models parley serves do not reason"},
    {"repetition_penalty", GW_F_READ, NULL, NULL},
    {"response_format", GW_F_READ, NULL, NULL},
    {"safety_identifier", GW_F_READ, NULL, NULL},
    {"seed", GW_F_READ, NULL, NULL},
    {"service_tier", GW_F_READ, NULL, NULL},
    {"stop", GW_F_READ, NULL, NULL},
    {"store", GW_DEF_FALSE, NULL, "parley does not store completions"},
    {"stream", GW_F_READ, NULL, NULL},
    {"stream_options", GW_F_READ, NULL, NULL},
    {"temperature", GW_F_READ, NULL, NULL},
    {"tool_choice", GW_F_READ, NULL, NULL},
    {"tools", GW_F_READ, NULL, NULL},
    {"top_k", GW_F_READ, NULL, NULL},
    {"top_logprobs", GW_F_READ, NULL, NULL},
    {"top_p", GW_F_READ, NULL, NULL},
    {"user", GW_F_READ, NULL, NULL},
    {"verbosity", GW_DEF_STR, "medium", "verbosity is not supported"},
    {"web_search_options", GW_DEF_NULL, NULL, "web search is not supported"},
};
#define GW_NFIELDS (sizeof gw_fields / sizeof gw_fields[0])

/* OpenAI's legacy completions request fields (and the two extensions). */
static const gw_field gw_cmpl_fields[] = {
    {"best_of", GW_DEF_STR, NULL, "best_of is not supported (use n and pick)"},
    {"echo", GW_F_READ, NULL, NULL},
    {"frequency_penalty", GW_DEF_ZERO, NULL,
     "frequency_penalty is not supported (parley has repetition_penalty)"},
    {"logit_bias", GW_DEF_EMPTY, NULL, "logit_bias is not supported"},
    {"logprobs", GW_F_READ, NULL, NULL},
    {"max_tokens", GW_F_READ, NULL, NULL},
    {"model", GW_F_READ, NULL, NULL},
    {"n", GW_F_READ, NULL, NULL},
    {"presence_penalty", GW_DEF_ZERO, NULL,
     "presence_penalty is not supported (parley has repetition_penalty)"},
    {"prompt", GW_F_READ, NULL, NULL},
    {"repetition_penalty", GW_F_READ, NULL, NULL},
    {"seed", GW_F_READ, NULL, NULL},
    {"stop", GW_F_READ, NULL, NULL},
    {"stream", GW_F_READ, NULL, NULL},
    {"stream_options", GW_F_READ, NULL, NULL},
    {"suffix", GW_DEF_STR, "",
     "suffix (text after the insertion) is not supported: the models parley serves have no "
     "fill-in-the-middle format"},
    {"temperature", GW_F_READ, NULL, NULL},
    {"top_k", GW_F_READ, NULL, NULL},
    {"top_p", GW_F_READ, NULL, NULL},
    {"user", GW_F_READ, NULL, NULL},
};
#define GW_NCMPL (sizeof gw_cmpl_fields / sizeof gw_cmpl_fields[0])

static const gw_field *gw_field_of(const gw_field *tab, size_t n, const char *name) {
    for (size_t i = 0; i < n; i++)
        if (!strcmp(tab[i].name, name)) return &tab[i];
    return NULL;
}

/* s is one of the '|'-separated strings in ok. */
static int gw_str_in(const char *s, size_t n, const char *ok) {
    for (const char *p = ok; *p;) {
        size_t k = strcspn(p, "|");
        if (k == n && !memcmp(p, s, n)) return 1;
        p += k + (p[k] == '|');
    }
    return 0;
}

/* v is the default value of field fd (nothing asked for). */
static int gw_at_default(const gw_field *fd, json_t *v) {
    if (json_is_null(v)) return 1;
    if (!strcmp(fd->name, "best_of")) return json_is_integer(v) && json_integer_value(v) == 1;
    switch (fd->def) {
    case GW_DEF_FALSE: return json_is_false(v);
    case GW_DEF_ZERO: return json_is_number(v) && json_number_value(v) == 0;
    case GW_DEF_EMPTY: return json_is_object(v) && json_object_size(v) == 0;
    case GW_DEF_STR:
        return json_is_string(v) && gw_str_in(json_string_value(v), json_string_length(v), fd->ok);
    case GW_DEF_TEXT_ONLY: {
        json_t *m = json_array_get(v, 0);
        return json_is_array(v) && json_array_size(v) == 1 && json_is_string(m) &&
               !strcmp(json_string_value(m), "text");
    }
    case GW_DEF_TEXT_FMT: {
        json_t *t = json_object_get(v, "type");
        return json_is_object(v) && json_object_size(v) == 1 && json_is_string(t) &&
               !strcmp(json_string_value(t), "text");
    }
    default: return 0;
    }
}

/* Every member of the request is a known field, and each one parley does
 * not implement is at its default. */
static int gw_fields_check(json_t *o, int legacy, oa_fault *f) {
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v) {
        const gw_field *fd = legacy ? gw_field_of(gw_cmpl_fields, GW_NCMPL, k)
                                    : gw_field_of(gw_fields, GW_NFIELDS, k);
        if (!fd)
            return oa_fail(f, k, "unknown_parameter",
                           "Unrecognized request argument supplied: %.100s (not a field of "
                           "OpenAI's %s request)",
                           k, legacy ? "completions" : "chat completions");
        if (fd->def != GW_F_READ && !gw_at_default(fd, v))
            return oa_fail(f, k, "unsupported_parameter",
                           "%s: %s; parley refuses what it "
                           "cannot honour",
                           k, fd->why);
    }
    return 0;
}

char *oa_keep(oa_chat *c, char *s) {
    char **np = s ? realloc(c->parts, (c->n_parts + 1) * sizeof *np) : NULL;
    if (!np) {
        free(s);
        return NULL;
    }
    c->parts = np;
    c->parts[c->n_parts++] = s;
    return s;
}

/* A string with no C0 control or DEL, 1..OA_MAX_ID bytes. */
static int gw_id_ok(const char *s, size_t n) {
    if (n == 0 || n > OA_MAX_ID) return 0;
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) return 0;
    return 1;
}

/* Content of message i: a string, or text parts joined. */
static int gw_content(oa_chat *c, size_t i, json_t *v, sch_str *out, oa_fault *f) {
    char p[64];
    snprintf(p, sizeof p, "messages[%zu].content", i);
    if (json_is_string(v)) {
        out->ptr = json_string_value(v);
        out->len = json_string_length(v);
    } else if (json_is_array(v)) {
        size_t total = 0, k;
        json_t *part;
        json_array_foreach(v, k, part) {
            json_t *ty = json_object_get(part, "type"), *tx = json_object_get(part, "text");
            if (!json_is_object(part) || !json_is_string(ty) ||
                strcmp(json_string_value(ty), "text") != 0 || !json_is_string(tx))
                return oa_fail(f, p, "unsupported_value",
                               "%s: only content parts of type \"text\" with a string \"text\" "
                               "are supported",
                               p);
            if (json_object_size(part) != 2)
                return oa_fail(f, p, "unsupported_parameter",
                               "%s: a text part has only \"type\" and \"text\"", p);
            total += json_string_length(tx);
            if (total > 256 * 1024) break;
        }
        if (total <= 256 * 1024) {
            char *buf = malloc(total + 1), **np;
            if (!buf || !(np = realloc(c->parts, (c->n_parts + 1) * sizeof *np))) {
                free(buf);
                return oa_fail(f, NULL, NULL, "out of memory");
            }
            c->parts = np;
            c->parts[c->n_parts++] = buf;
            size_t off = 0;
            json_array_foreach(v, k, part) {
                json_t *tx = json_object_get(part, "text");
                memcpy(buf + off, json_string_value(tx), json_string_length(tx));
                off += json_string_length(tx);
            }
            buf[off] = 0;
            out->ptr = buf;
        }
        out->len = total;
    } else {
        return oa_fail(f, p, NULL, "%s must be a string or an array of text parts", p);
    }
    if (out->len > 256 * 1024)
        return oa_fail(f, p, NULL, "%s: content longer than 262144 bytes", p);
    return 0;
}

/* The members of message i other than role and content: name (a string;
 * parley's chat templates, like the models' own, do not show it) and
 * OpenAI's assistant-message fields at their defaults; anything else is
 * refused. */
static int gw_message_fields(json_t *msg, size_t i, oa_fault *f) {
    const char *k;
    json_t *v;
    char p[96];
    json_object_foreach(msg, k, v) {
        snprintf(p, sizeof p, "messages[%zu].%.40s", i, k);
        if (!strcmp(k, "role") || !strcmp(k, "content")) continue;
        if (!strcmp(k, "name")) {
            if (!json_is_null(v) && !json_is_string(v))
                return oa_fail(f, p, NULL, "%s must be a string", p);
        } else if (!strcmp(k, "tool_calls") || !strcmp(k, "tool_call_id")) {
            continue; /* gw_message_tools */
        } else if (!strcmp(k, "refusal") || !strcmp(k, "audio") || !strcmp(k, "function_call")) {
            if (!json_is_null(v))
                return oa_fail(f, p, "unsupported_parameter",
                               "%s is not supported; parley refuses what it cannot honour", p);
        } else {
            return oa_fail(f, p, "unknown_parameter", "%s is not a field of OpenAI's chat messages",
                           p);
        }
    }
    return 0;
}

/* An assistant message's tool_calls (OpenAI's array of {id, type
 * "function", function: {name, arguments}}) as the wire's JSON text, and a
 * tool message's tool_call_id. */
static int gw_message_tools(oa_chat *c, json_t *msg, size_t i, sch_message *out, oa_fault *f) {
    json_t *calls = json_object_get(msg, "tool_calls"), *id = json_object_get(msg, "tool_call_id");
    char p[64];
    if (calls && !json_is_null(calls) && !(json_is_array(calls) && !json_array_size(calls))) {
        snprintf(p, sizeof p, "messages[%zu].tool_calls", i);
        if (out->role != SCH_ROLE_ASSISTANT || !json_is_array(calls))
            return oa_fail(f, p, NULL, "%s: an array, on assistant messages only", p);
        size_t k;
        json_t *call;
        json_array_foreach(calls, k, call) {
            json_t *fn = json_object_get(call, "function");
            const char *type = json_string_value(json_object_get(call, "type"));
            if (!json_is_object(call) || !json_is_string(json_object_get(call, "id")) ||
                (type && strcmp(type, "function")) || !json_is_object(fn) ||
                !json_is_string(json_object_get(fn, "name")) ||
                !json_is_string(json_object_get(fn, "arguments")))
                return oa_fail(f, p, NULL,
                               "%s[%zu] must be {\"id\", \"type\": \"function\", \"function\": "
                               "{\"name\", \"arguments\": a string}}",
                               p, k);
        }
        char *txt = oa_keep(c, json_dumps(calls, JSON_COMPACT));
        if (!txt) return oa_fail(f, NULL, NULL, "out of memory");
        out->tool_calls = sch_str_c(txt);
    }
    snprintf(p, sizeof p, "messages[%zu].tool_call_id", i);
    if (out->role == SCH_ROLE_TOOL) {
        if (!json_is_string(id) || !gw_id_ok(json_string_value(id), json_string_length(id)))
            return oa_fail(f, p, NULL, "%s: a tool message needs the id of the call it answers", p);
        out->tool_call_id = (sch_str){json_string_value(id), json_string_length(id)};
    } else if (id && !json_is_null(id)) {
        return oa_fail(f, p, NULL, "%s: on tool messages only", p);
    }
    return 0;
}

static int gw_messages(oa_chat *c, json_t *m, oa_fault *f) {
    if (!json_is_array(m) || json_array_size(m) == 0)
        return oa_fail(f, "messages", NULL, "messages must be a non-empty array");
    if (json_array_size(m) > OA_MAX_MESSAGES)
        return oa_fail(f, "messages", NULL, "messages: more than 4096 messages");
    if (!(c->msgs = calloc(json_array_size(m), sizeof *c->msgs)))
        return oa_fail(f, NULL, NULL, "out of memory");
    size_t i;
    json_t *msg;
    json_array_foreach(m, i, msg) {
        json_t *role = json_object_get(msg, "role");
        char p[64];
        snprintf(p, sizeof p, "messages[%zu].role", i);
        if (!json_is_object(msg) || !json_is_string(role))
            return oa_fail(f, p, NULL, "messages[%zu] must be an object with a string \"role\"", i);
        const char *r = json_string_value(role);
        sch_message *out = &c->msgs[i];
        if (!strcmp(r, "system") || !strcmp(r, "developer")) out->role = SCH_ROLE_SYSTEM;
        else if (!strcmp(r, "user")) out->role = SCH_ROLE_USER;
        else if (!strcmp(r, "assistant")) out->role = SCH_ROLE_ASSISTANT;
        else if (!strcmp(r, "tool")) out->role = SCH_ROLE_TOOL;
        else
            return oa_fail(f, p, NULL,
                           "%s must be system, developer, user, assistant or tool, not \"%.40s\"",
                           p, r);
        json_t *content = json_object_get(msg, "content");
        if (gw_message_fields(msg, i, f) != 0 || gw_message_tools(c, msg, i, out, f) != 0)
            return -1;
        if ((!content || json_is_null(content)) && out->tool_calls.ptr)
            out->content = (sch_str){"", 0}; /* a reply that only called tools */
        else if (gw_content(c, i, content, &out->content, f) != 0) return -1;
        c->n_msgs = i + 1;
    }
    return 0;
}

/* An optional integer field in [lo, hi]: 1 present, 0 absent, -1 bad. */
static int gw_int(json_t *o, const char *k, long long lo, long long hi, long long *out,
                  oa_fault *f) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return oa_fail(f, k, NULL, "%s must be an integer in %lld..%lld", k, lo, hi);
    *out = json_integer_value(v);
    return 1;
}

/* An optional number field in [lo, hi] (lo excluded when open_lo). */
static int gw_num(json_t *o, const char *k, double lo, double hi, int open_lo, double *out,
                  oa_fault *f) {
    json_t *v = json_object_get(o, k);
    if (!v || json_is_null(v)) return 0;
    double d = json_is_number(v) ? json_number_value(v) : NAN;
    if (!isfinite(d) || d < lo || d > hi || (open_lo && d == lo))
        return oa_fail(f, k, NULL, "%s must be a number in %s%g, %g]", k, open_lo ? "(" : "[", lo,
                       hi);
    *out = d;
    return 1;
}

static int gw_stop(oa_chat *c, json_t *s, oa_fault *f) {
    size_t n = 0;
    if (!s || json_is_null(s)) return 0;
    json_t *one[1] = {s};
    if (json_is_string(s)) {
        n = 1;
    } else if (json_is_array(s)) {
        n = json_array_size(s);
        if (n > OA_MAX_STOP) return oa_fail(f, "stop", NULL, "stop: at most 16 stop strings");
    } else {
        return oa_fail(f, "stop", NULL, "stop must be a string or an array of strings");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_is_string(s) ? one[0] : json_array_get(s, i);
        if (!json_is_string(v) || json_string_length(v) == 0 || json_string_length(v) > 256)
            return oa_fail(f, "stop", NULL, "stop: each stop string must be 1..256 bytes");
        c->stop[i].ptr = json_string_value(v);
        c->stop[i].len = json_string_length(v);
    }
    c->turn.params.stop = c->stop;
    c->turn.params.n_stop = n;
    return 0;
}

/* stream and stream_options. */
static int gw_stream(oa_chat *c, json_t *o, oa_fault *f) {
    json_t *st = json_object_get(o, "stream");
    if (st && !json_is_null(st) && !json_is_boolean(st))
        return oa_fail(f, "stream", NULL, "stream must be a boolean");
    c->stream = json_is_true(st);
    c->turn.stream = c->stream;
    json_t *so = json_object_get(o, "stream_options");
    if (!so || json_is_null(so)) return 0;
    if (!json_is_object(so)) return oa_fail(f, "stream_options", NULL, "must be an object");
    const char *k;
    json_t *v;
    json_object_foreach(so, k, v) {
        char p[96];
        snprintf(p, sizeof p, "stream_options.%.60s", k);
        if (!json_is_null(v) && !json_is_boolean(v))
            return oa_fail(f, p, NULL, "%s must be a boolean", p);
        if (!strcmp(k, "include_usage")) c->include_usage = json_is_true(v);
        else if (!strcmp(k, "include_obfuscation")) {
            if (json_is_true(v))
                return oa_fail(f, p, "unsupported_value",
                               "%s: parley does not pad stream events (set it false or leave "
                               "it out)",
                               p);
        } else {
            return oa_fail(f, p, "unknown_parameter", "%s is not an OpenAI stream option", p);
        }
    }
    return 0;
}

/* logprobs (bool) and top_logprobs (0..20, only with logprobs true). */
static int gw_logprobs(oa_chat *c, json_t *o, oa_fault *f) {
    json_t *lp = json_object_get(o, "logprobs"), *top = json_object_get(o, "top_logprobs");
    if (lp && !json_is_null(lp) && !json_is_boolean(lp))
        return oa_fail(f, "logprobs", NULL, "logprobs must be a boolean");
    if (top && !json_is_null(top)) {
        if (!json_is_integer(top) || json_integer_value(top) < 0 ||
            json_integer_value(top) > SCH_MAX_TOP_LOGPROBS)
            return oa_fail(f, "top_logprobs", NULL, "top_logprobs must be an integer in 0..%d",
                           SCH_MAX_TOP_LOGPROBS);
        if (!json_is_true(lp))
            return oa_fail(f, "top_logprobs", NULL, "top_logprobs needs logprobs set to true");
        c->turn.params.top_logprobs = (uint32_t)json_integer_value(top);
    }
    c->turn.params.has_logprobs = json_is_true(lp);
    c->logprobs = json_is_true(lp);
    return 0;
}

/* n: choices, 1..SCH_MAX_N. */
static int gw_n(oa_chat *c, json_t *n, oa_fault *f) {
    if (!n || json_is_null(n)) return 0;
    if (!json_is_integer(n) || json_integer_value(n) < 1)
        return oa_fail(f, "n", NULL, "n must be an integer >= 1");
    if (json_integer_value(n) > SCH_MAX_N)
        return oa_fail(f, "n", "unsupported_value",
                       "n: parley gives at most %d choices per request", SCH_MAX_N);
    c->turn.params.n = (uint32_t)json_integer_value(n);
    return 0;
}

/* service_tier: the turn's service class (docs/service-classes.md).  auto
 * and default are interactive, flex is bulk; OpenAI's other tiers
 * (priority, scale) promise what parley does not offer: 400. */
static int gw_service_tier(oa_chat *c, json_t *o, oa_fault *f) {
    json_t *v = json_object_get(o, "service_tier");
    if (!v || json_is_null(v)) return 0;
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    if (s && (!strcmp(s, "auto") || !strcmp(s, "default"))) {
        c->turn.service_class = SCH_CLASS_INTERACTIVE;
    } else if (s && !strcmp(s, "flex")) {
        c->turn.service_class = SCH_CLASS_BULK;
    } else {
        return oa_fail(f, "service_tier", "unsupported_value",
                       "service_tier: parley offers auto / default (interactive) and flex "
                       "(bulk: throughput, preempted by interactive work)");
    }
    c->tier_set = 1;
    return 0;
}

/* user and safety_identifier: identifiers of the end user (abuse
 * monitoring), which parley keeps nowhere. */
static int gw_ident(json_t *o, const char *k, oa_fault *f) {
    json_t *v = json_object_get(o, k);
    if (v && !json_is_null(v) && (!json_is_string(v) || json_string_length(v) > 256))
        return oa_fail(f, k, NULL, "%s must be a string of at most 256 bytes", k);
    return 0;
}

/* A legacy completions prompt: one string (the ChatTurn's raw `prompt`)
 * or one array of token ids (`prompt_tokens`); a string or token array in
 * a one-element array is the same.  Several prompts are refused. */
static int gw_prompt(oa_chat *c, json_t *p, oa_fault *f) {
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        if (json_string_length(p) == 0 || json_string_length(p) > 256 * 1024)
            return oa_fail(f, "prompt", NULL, "prompt must be a string of 1..262144 bytes");
        c->turn.prompt = (sch_str){json_string_value(p), json_string_length(p)};
        return 0;
    }
    if (json_is_array(p) && json_array_size(p) > 0 && json_is_integer(json_array_get(p, 0))) {
        size_t n = json_array_size(p);
        if (n > 131072) return oa_fail(f, "prompt", NULL, "prompt: more than 131072 tokens");
        uint32_t *ids = malloc(n * sizeof *ids);
        if (!ids || !oa_keep(c, (char *)ids)) return oa_fail(f, NULL, NULL, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *v = json_array_get(p, i);
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) > 2147483647LL)
                return oa_fail(f, "prompt", NULL, "prompt: token ids are integers in 0..2^31-1");
            ids[i] = (uint32_t)json_integer_value(v);
        }
        c->turn.prompt_tokens = ids;
        c->turn.n_prompt_tokens = n;
        return 0;
    }
    if (json_is_array(p) && json_array_size(p) > 1)
        return oa_fail(f, "prompt", "unsupported_value",
                       "prompt: one prompt per request (send the others as requests of their "
                       "own)");
    return oa_fail(f, "prompt", NULL, "prompt must be a non-empty string or an array of token ids");
}

/* The completions-only fields: logprobs (0..20 alternatives), echo. */
static int gw_cmpl_fields_read(oa_chat *c, json_t *o, oa_fault *f) {
    long long iv = 0;
    int r = gw_int(o, "logprobs", 0, SCH_MAX_TOP_LOGPROBS, &iv, f);
    if (r < 0) return -1;
    if (r) {
        c->logprobs = 1;
        c->turn.params.has_logprobs = true;
        c->turn.params.top_logprobs = (uint32_t)iv;
    }
    json_t *echo = json_object_get(o, "echo");
    if (echo && !json_is_null(echo) && !json_is_boolean(echo))
        return oa_fail(f, "echo", NULL, "echo must be a boolean");
    c->echo = json_is_true(echo);
    if (c->echo && c->logprobs)
        return oa_fail(f, "echo", "unsupported_value",
                       "echo with logprobs would need the prompt's log-probabilities, which parley "
                       "does not compute; ask for one or the other");
    if (c->echo && !c->turn.prompt.ptr)
        return oa_fail(f, "echo", "unsupported_value",
                       "echo needs the prompt as text (parley does not detokenize token "
                       "prompts)");
    return 0;
}

/* The body of both endpoints (legacy: /v1/completions). */
static int gw_request_from_json(json_t *o, uint32_t cap, int legacy, oa_chat *c, oa_fault *f) {
    long long iv = 0;
    double dv = 0;
    int r;
    memset(c, 0, sizeof *c);
    memset(f, 0, sizeof *f);
    sch_turn_init(&c->turn);
    c->legacy = legacy;
    if (!json_is_object(o)) return oa_fail(f, NULL, NULL, "the request body must be a JSON object");
    c->root = json_incref(o);
    if (gw_fields_check(o, legacy, f) != 0) goto err;
    json_t *model = json_object_get(o, "model");
    if (!json_is_string(model) || !gw_id_ok(json_string_value(model), json_string_length(model))) {
        oa_fail(f, "model", NULL,
                "model must be a string of 1..256 bytes without control characters");
        goto err;
    }
    memcpy(c->model, json_string_value(model), json_string_length(model) + 1);
    c->turn.model = (sch_str){c->model, strlen(c->model)};
    if (legacy) {
        if (gw_prompt(c, json_object_get(o, "prompt"), f) != 0) goto err;
        c->turn.params.max_tokens = cap < 16 ? cap : 16; /* OpenAI's default for completions */
    } else {
        if (gw_messages(c, json_object_get(o, "messages"), f) != 0) goto err;
        c->turn.messages = c->msgs;
        c->turn.n_messages = c->n_msgs;
        c->turn.params.max_tokens = cap < 256 ? cap : 256;
    }
    if ((r = gw_int(o, "max_tokens", 1, cap, &iv, f)) < 0) goto err;
    if (r) c->turn.params.max_tokens = (uint32_t)iv;
    if ((r = gw_int(o, "max_completion_tokens", 1, cap, &iv, f)) < 0) goto err;
    if (r) c->turn.params.max_tokens = (uint32_t)iv;
    if ((r = gw_num(o, "temperature", 0, 2, 0, &dv, f)) < 0) goto err;
    if (r) c->turn.params.temperature = dv;
    if ((r = gw_num(o, "top_p", 0, 1, 1, &dv, f)) < 0) goto err;
    if (r) c->turn.params.top_p = dv;
    if ((r = gw_num(o, "repetition_penalty", 0, 100, 1, &dv, f)) < 0) goto err;
    if (r) c->turn.params.repetition_penalty = dv;
    if ((r = gw_int(o, "top_k", 0, 2147483647LL, &iv, f)) < 0) goto err;
    if (r) c->turn.params.top_k = (uint32_t)iv;
    if ((r = gw_int(o, "seed", 0, INT64_MAX, &iv, f)) < 0) goto err;
    if (r) {
        c->turn.params.has_seed = true;
        c->turn.params.seed = (uint64_t)iv;
    }
    if (gw_n(c, json_object_get(o, "n"), f) != 0 ||
        (legacy ? gw_cmpl_fields_read(c, o, f)
                : gw_logprobs(c, o, f) || oa_tools(c, o, f) ||
                      oa_response_format(c, json_object_get(o, "response_format"), f)) != 0 ||
        gw_stop(c, json_object_get(o, "stop"), f) != 0 || gw_stream(c, o, f) != 0 ||
        (!legacy && gw_service_tier(c, o, f) != 0) || gw_ident(o, "user", f) != 0 ||
        gw_ident(o, "safety_identifier", f) != 0)
        goto err;
    return 0;
err:
    oa_chat_free(c);
    return -1;
}

int oa_chat_from_json(json_t *o, uint32_t cap, oa_chat *c, oa_fault *f) {
    return gw_request_from_json(o, cap, 0, c, f);
}

int oa_cmpl_from_json(json_t *o, uint32_t cap, oa_chat *c, oa_fault *f) {
    return gw_request_from_json(o, cap, 1, c, f);
}

static int gw_parse(const char *body, size_t len, uint32_t cap, int legacy, oa_chat *c,
                    oa_fault *f) {
    json_error_t je;
    memset(c, 0, sizeof *c);
    memset(f, 0, sizeof *f);
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    if (!o)
        return oa_fail(f, NULL, NULL, "the request body is not valid JSON: %s (line %d column %d)",
                       je.text, je.line, je.column);
    int rc = gw_request_from_json(o, cap, legacy, c, f);
    json_decref(o);
    return rc;
}

int oa_chat_parse(const char *body, size_t len, uint32_t cap, oa_chat *c, oa_fault *f) {
    return gw_parse(body, len, cap, 0, c, f);
}

int oa_cmpl_parse(const char *body, size_t len, uint32_t cap, oa_chat *c, oa_fault *f) {
    return gw_parse(body, len, cap, 1, c, f);
}

void oa_chat_move(oa_chat *dst, oa_chat *src) {
    *dst = *src;
    /* the turn points at arrays inside the struct: at dst's now */
    dst->turn.model = (sch_str){dst->model, strlen(dst->model)};
    if (dst->turn.params.n_stop) dst->turn.params.stop = dst->stop;
    memset(src, 0, sizeof *src);
}

void oa_chat_free(oa_chat *c) {
    if (c->root) json_decref(c->root);
    for (size_t i = 0; i < c->n_parts; i++) free(c->parts[i]);
    free(c->parts);
    free(c->msgs);
    memset(c, 0, sizeof *c);
}
