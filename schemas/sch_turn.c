/*
 * sch_turn.c -- ChatTurn: decode (worker side) and encode (client side).
 *
 * A ChatTurn carries the whole conversation (`messages`), a pre-tokenized
 * prompt (`prompt_tokens`) or a raw prompt text (`prompt`, 1.2), exactly
 * one of them, plus generation parameters with defaults.  The 1.2 params
 * (response_format, logprobs, n, tools, tool_choice, parallel_tool_calls)
 * are written only when they differ from their defaults, so a turn that
 * uses none of them encodes exactly as under 1.1.  The decoder checks fields in a fixed order
 * (version, ids, input, params, the rest) so a record with several faults
 * always reports the same one, which the golden vectors rely on.  The
 * encoder enforces the same value rules as the decoder, but not the
 * sch_limits, which are each reader's policy.
 */
#include "sch_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Ranges of the params (the spec's table). */
#define SCH_TEMP_MAX 100.0
#define SCH_PENALTY_MAX 100.0
#define SCH_DEFAULT_MAX_TOKENS 256u

static const char *const sch_roles[] = {"system", "user", "assistant", "tool"};
#define SCH_NROLES 4
static const char *const sch_rfs[] = {"text", "json_object", "json_schema", "regex", "grammar"};
/* the member of response_format holding the constraint, by type */
static const char *const sch_rf_keys[] = {NULL, NULL, "schema", "pattern", "grammar"};
#define SCH_NRFS 5

void sch_params_default(sch_params *p) {
    memset(p, 0, sizeof *p);
    p->max_tokens = SCH_DEFAULT_MAX_TOKENS;
    p->temperature = 1.0;
    p->top_p = 1.0;
    p->top_k = 0;
    p->repetition_penalty = 1.0;
    p->n = 1;
    p->parallel_tool_calls = true;
}

void sch_turn_init(sch_turn *t) {
    memset(t, 0, sizeof *t);
    t->v = SCH_VERSION;
    sch_params_default(&t->params);
}

void sch_turn_free(sch_turn *t) {
    if (!t) return;
    if (t->zone_) msgpack_zone_free(t->zone_);
    memset(t, 0, sizeof *t);
}

static int sch_messages_read(sch_ctx *c, const msgpack_object *o, sch_turn *t) {
    char path[48], q[200];
    int rc;
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "messages: expected array, got %s",
                       sch_type_name(o));
    size_t n = o->via.array.size;
    if (n == 0) return pl_errf(c->err, c->errlen, SCH_E_EMPTY_INPUT, "messages: empty array");
    if (n > c->lim->max_messages)
        return pl_errf(c->err, c->errlen, SCH_E_TOO_MANY_MESSAGES,
                       "messages: %zu messages exceeds the limit of %zu", n, c->lim->max_messages);
    sch_message *m = msgpack_zone_malloc(c->zone, n * sizeof *m);
    if (!m) return pl_errf(c->err, c->errlen, SCH_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const msgpack_object *e = &o->via.array.ptr[i];
        snprintf(path, sizeof path, "messages[%zu]", i);
        if ((rc = sch_map_check(c, e, path))) return rc;
        const msgpack_object *r = sch_map_get(e, "role");
        if (!r)
            return pl_errf(c->err, c->errlen, SCH_E_MISSING_FIELD,
                           "%s.role: required field missing", path);
        if (r->type != MSGPACK_OBJECT_STR)
            return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "%s.role: expected str, got %s",
                           path, sch_type_name(r));
        int role = -1;
        for (int k = 0; k < SCH_NROLES; k++)
            if (r->via.str.size == strlen(sch_roles[k]) &&
                !memcmp(r->via.str.ptr, sch_roles[k], r->via.str.size))
                role = k;
        if (role < 0) {
            sch_quote(q, sizeof q, r->via.str.ptr, r->via.str.size);
            return pl_errf(c->err, c->errlen, SCH_E_BAD_ROLE,
                           "%s.role: %s is not system, user, assistant or tool", path, q);
        }
        m[i].role = (sch_role)role;
        memset(&m[i].tool_calls, 0, sizeof m[i].tool_calls);
        memset(&m[i].tool_call_id, 0, sizeof m[i].tool_call_id);
        if ((rc = sch_get_str(c, e, path, "content", true, SCH_RULE_TEXT, c->lim->max_content_bytes,
                              SCH_E_CONTENT_TOO_LONG, &m[i].content)) ||
            (rc = sch_get_str(c, e, path, "tool_calls", false, SCH_RULE_TEXT,
                              c->lim->max_constraint_bytes, SCH_E_STRING_TOO_LONG,
                              &m[i].tool_calls)) ||
            (rc = sch_get_str(c, e, path, "tool_call_id", false, SCH_RULE_ID, c->lim->max_id_bytes,
                              SCH_E_STRING_TOO_LONG, &m[i].tool_call_id)))
            return rc;
    }
    t->messages = m;
    t->n_messages = n;
    return SCH_OK;
}

static int sch_stop_read(sch_ctx *c, const msgpack_object *o, sch_params *p) {
    char path[48];
    const msgpack_object *items = o;
    size_t n = 1;
    int rc;
    if (o->type == MSGPACK_OBJECT_ARRAY) {
        items = o->via.array.ptr;
        n = o->via.array.size;
    } else if (o->type != MSGPACK_OBJECT_STR) {
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE,
                       "params.stop: expected str or array, got %s", sch_type_name(o));
    }
    if (n > c->lim->max_stop)
        return pl_errf(c->err, c->errlen, SCH_E_TOO_MANY_STOP_STRINGS,
                       "params.stop: %zu stop strings exceeds the limit of "
                       "%zu",
                       n, c->lim->max_stop);
    if (n == 0) return SCH_OK;
    sch_str *s = msgpack_zone_malloc(c->zone, n * sizeof *s);
    if (!s) return pl_errf(c->err, c->errlen, SCH_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        snprintf(path, sizeof path, "params.stop[%zu]", i);
        rc = sch_take_str(c, &items[i], path, SCH_RULE_TEXT, c->lim->max_stop_bytes,
                          SCH_E_STOP_STRING_TOO_LONG, &s[i]);
        if (rc) return rc;
        if (s[i].len == 0)
            return pl_errf(c->err, c->errlen, SCH_E_BAD_VALUE, "%s: empty stop string", path);
    }
    p->stop = s;
    p->n_stop = n;
    return SCH_OK;
}

/* params.response_format (1.2): {type, and by type schema / pattern /
 * grammar}. */
static int sch_rf_read(sch_ctx *c, const msgpack_object *o, sch_response_format *rf) {
    const char *P = "params.response_format";
    char q[200];
    int rc;
    if ((rc = sch_map_check(c, o, P))) return rc;
    const msgpack_object *t = sch_map_get(o, "type");
    if (!t)
        return pl_errf(c->err, c->errlen, SCH_E_MISSING_FIELD, "%s.type: required field missing",
                       P);
    if (t->type != MSGPACK_OBJECT_STR)
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "%s.type: expected str, got %s", P,
                       sch_type_name(t));
    int k = SCH_NRFS;
    while (--k >= 0 && !(t->via.str.size == strlen(sch_rfs[k]) &&
                         !memcmp(t->via.str.ptr, sch_rfs[k], t->via.str.size))) {
    }
    if (k < 0) {
        sch_quote(q, sizeof q, t->via.str.ptr, t->via.str.size);
        return pl_errf(c->err, c->errlen, SCH_E_BAD_VALUE,
                       "%s.type: %s is not text, json_object, json_schema, regex or grammar", P, q);
    }
    rf->type = (sch_rf)k;
    if (!sch_rf_keys[k]) return SCH_OK;
    if ((rc = sch_get_str(c, o, P, sch_rf_keys[k], true, SCH_RULE_TEXT,
                          c->lim->max_constraint_bytes, SCH_E_STRING_TOO_LONG, &rf->spec)))
        return rc;
    if (!rf->spec.len)
        return pl_errf(c->err, c->errlen, SCH_E_BAD_VALUE, "%s.%s: empty", P, sch_rf_keys[k]);
    return SCH_OK;
}

/* service_class (1.3): "interactive" or "bulk"; absent / nil = interactive. */
static int sch_class_read(sch_ctx *c, const msgpack_object *o, sch_class *out) {
    char q[200];
    *out = SCH_CLASS_INTERACTIVE;
    if (!o || o->type == MSGPACK_OBJECT_NIL) return SCH_OK;
    if (o->type != MSGPACK_OBJECT_STR)
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "service_class: expected str, got %s",
                       sch_type_name(o));
    for (int k = SCH_CLASS_INTERACTIVE; k <= SCH_CLASS_BULK; k++) {
        const char *name = sch_class_name((sch_class)k);
        if (o->via.str.size == strlen(name) && !memcmp(o->via.str.ptr, name, o->via.str.size)) {
            *out = (sch_class)k;
            return SCH_OK;
        }
    }
    sch_quote(q, sizeof q, o->via.str.ptr, o->via.str.size);
    return pl_errf(c->err, c->errlen, SCH_E_BAD_VALUE,
                   "service_class: %s is not interactive or bulk", q);
}

/* An optional non-empty text param of at most max_constraint_bytes. */
static int sch_json_text_read(sch_ctx *c, const msgpack_object *o, const char *key, sch_str *out) {
    int rc = sch_get_str(c, o, "params", key, false, SCH_RULE_TEXT, c->lim->max_constraint_bytes,
                         SCH_E_STRING_TOO_LONG, out);
    if (!rc && out->ptr && !out->len)
        return pl_errf(c->err, c->errlen, SCH_E_BAD_VALUE, "params.%s: empty", key);
    return rc;
}

/* The 1.2 params, after repetition_penalty. */
static int sch_params12_read(sch_ctx *c, const msgpack_object *o, sch_params *p) {
    const char *P = "params";
    const msgpack_object *rf = sch_map_get(o, "response_format");
    uint64_t u;
    int rc;
    if (rf && (rc = sch_rf_read(c, rf, &p->response_format))) return rc;
    if ((rc = sch_get_uint(c, o, P, "logprobs", false, 0, SCH_MAX_TOP_LOGPROBS, &u,
                           &p->has_logprobs)))
        return rc;
    if (p->has_logprobs) p->top_logprobs = (uint32_t)u;
    bool present;
    if ((rc = sch_get_uint(c, o, P, "n", false, 1, SCH_MAX_N, &u, &present))) return rc;
    if (present) p->n = (uint32_t)u;
    if ((rc = sch_json_text_read(c, o, "tools", &p->tools)) ||
        (rc = sch_json_text_read(c, o, "tool_choice", &p->tool_choice)))
        return rc;
    return sch_get_bool(c, o, P, "parallel_tool_calls", false, &p->parallel_tool_calls, NULL);
}

static int sch_params_read(sch_ctx *c, const msgpack_object *o, sch_params *p) {
    const char *P = "params";
    uint64_t u;
    bool present;
    const msgpack_object *stop;
    int rc;
    sch_params_default(p);
    if (p->max_tokens > c->lim->max_tokens) p->max_tokens = c->lim->max_tokens;
    if (!o) return SCH_OK;
    if ((rc = sch_map_check(c, o, P))) return rc;
    rc = sch_get_uint(c, o, P, "max_tokens", false, 1, UINT32_MAX, &u, &present);
    if (rc) return rc;
    if (present && u > c->lim->max_tokens)
        return pl_errf(c->err, c->errlen, SCH_E_MAX_TOKENS_TOO_LARGE,
                       "params.max_tokens: %llu exceeds the limit of %u", (unsigned long long)u,
                       c->lim->max_tokens);
    if (present) p->max_tokens = (uint32_t)u;
    if ((rc = sch_get_number(c, o, P, "temperature", false, 0, false, SCH_TEMP_MAX, &p->temperature,
                             NULL)) ||
        (rc = sch_get_number(c, o, P, "top_p", false, 0, true, 1.0, &p->top_p, NULL)))
        return rc;
    rc = sch_get_uint(c, o, P, "top_k", false, 0, INT32_MAX, &u, &present);
    if (rc) return rc;
    if (present) p->top_k = (uint32_t)u;
    rc = sch_get_uint(c, o, P, "seed", false, 0, UINT64_MAX, &p->seed, &p->has_seed);
    if (rc) return rc;
    if ((stop = sch_map_get(o, "stop")) && (rc = sch_stop_read(c, stop, p))) return rc;
    if ((rc = sch_get_number(c, o, P, "repetition_penalty", false, 0, true, SCH_PENALTY_MAX,
                             &p->repetition_penalty, NULL)))
        return rc;
    return sch_params12_read(c, o, p);
}

static int sch_turn_read(sch_ctx *c, const msgpack_object *root, void *out) {
    sch_turn *t = out;
    const sch_limits *lim = c->lim;
    const msgpack_object *msgs, *toks, *text;
    int rc;
    if ((rc = sch_get_turn_head(c, root, &t->v, &t->conversation_id, &t->turn_id))) return rc;
    msgs = sch_map_get(root, "messages");
    toks = sch_map_get(root, "prompt_tokens");
    text = sch_map_get(root, "prompt");
    if (!!msgs + !!toks + !!text > 1)
        return pl_errf(c->err, c->errlen, SCH_E_BOTH_INPUTS,
                       "messages, prompt_tokens and prompt are exclusive");
    if (!msgs && !toks && !text)
        return pl_errf(c->err, c->errlen, SCH_E_MISSING_INPUT,
                       "one of messages, prompt_tokens or prompt is required");
    if (msgs) {
        rc = sch_messages_read(c, msgs, t);
    } else if (text) {
        rc = sch_take_str(c, text, "prompt", SCH_RULE_TEXT, lim->max_content_bytes,
                          SCH_E_CONTENT_TOO_LONG, &t->prompt);
        if (!rc && t->prompt.len == 0)
            rc = pl_errf(c->err, c->errlen, SCH_E_EMPTY_INPUT, "prompt: empty string");
    } else {
        rc = sch_take_tokens(c, toks, "prompt_tokens", lim->max_prompt_tokens,
                             SCH_E_TOO_MANY_PROMPT_TOKENS, &t->prompt_tokens, &t->n_prompt_tokens);
        if (!rc && t->n_prompt_tokens == 0)
            rc = pl_errf(c->err, c->errlen, SCH_E_EMPTY_INPUT, "prompt_tokens: empty array");
    }
    if (rc) return rc;
    if ((rc = sch_params_read(c, sch_map_get(root, "params"), &t->params)) ||
        (rc = sch_get_bool(c, root, "", "stream", false, &t->stream, NULL)) ||
        (rc = sch_get_str(c, root, "", "namespace", false, SCH_RULE_NS, lim->max_id_bytes,
                          SCH_E_STRING_TOO_LONG, &t->ns)) ||
        (rc = sch_get_uint(c, root, "", "deadline_ms", false, 0, UINT64_MAX, &t->deadline_ms,
                           NULL)) ||
        (rc =
             sch_get_uint(c, root, "", "created_ms", false, 0, UINT64_MAX, &t->created_ms, NULL)) ||
        (rc = sch_get_str(c, root, "", "model", false, SCH_RULE_ID, lim->max_id_bytes,
                          SCH_E_STRING_TOO_LONG, &t->model)) ||
        (rc = sch_class_read(c, sch_map_get(root, "service_class"), &t->service_class)))
        return rc;
    if (!t->ns.ptr) t->ns = sch_str_c(SCH_DEFAULT_NAMESPACE);
    return SCH_OK;
}

int sch_turn_decode(const void *buf, size_t len, const sch_limits *lim, sch_turn *out, char *err,
                    size_t errlen) {
    return sch_decode_record(buf, len, lim, sch_turn_read, out, sizeof *out,
                             out ? &out->zone_ : NULL, err, errlen);
}

/* Value rules of params for the encoder (the decoder's getters apply the
 * same ranges). */
static int sch_params_check(const sch_params *p, char *err, size_t errlen) {
    char path[48];
    if (p->max_tokens < 1)
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE, "params.max_tokens: must be >= 1");
    if (!isfinite(p->temperature) || p->temperature < 0 || p->temperature > SCH_TEMP_MAX)
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE, "params.temperature: %g outside [0, %g]",
                       p->temperature, SCH_TEMP_MAX);
    if (!isfinite(p->top_p) || p->top_p <= 0 || p->top_p > 1)
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE, "params.top_p: %g outside (0, 1]",
                       p->top_p);
    if (p->top_k > INT32_MAX)
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE, "params.top_k: %u above 2147483647",
                       p->top_k);
    if (!isfinite(p->repetition_penalty) || p->repetition_penalty <= 0 ||
        p->repetition_penalty > SCH_PENALTY_MAX)
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE,
                       "params.repetition_penalty: %g outside (0, %g]", p->repetition_penalty,
                       SCH_PENALTY_MAX);
    if (p->response_format.type < SCH_RF_TEXT || p->response_format.type > SCH_RF_GRAMMAR)
        return pl_errf(err, errlen, SCH_E_BAD_VALUE,
                       "params.response_format.type: %d is not a sch_rf",
                       (int)p->response_format.type);
    if (sch_rf_keys[p->response_format.type] && !p->response_format.spec.len)
        return pl_errf(err, errlen, SCH_E_MISSING_FIELD, "params.response_format.%s: required",
                       sch_rf_keys[p->response_format.type]);
    if (p->has_logprobs && p->top_logprobs > SCH_MAX_TOP_LOGPROBS)
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE, "params.logprobs: %u above %d",
                       p->top_logprobs, SCH_MAX_TOP_LOGPROBS);
    if (p->n < 1 || p->n > SCH_MAX_N)
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE, "params.n: %u outside 1..%d", p->n,
                       SCH_MAX_N);
    const sch_str *texts[] = {&p->response_format.spec, &p->tools, &p->tool_choice};
    const char *names[] = {"params.response_format", "params.tools", "params.tool_choice"};
    for (int i = 0; i < 3; i++) {
        if (i && texts[i]->ptr && !texts[i]->len)
            return pl_errf(err, errlen, SCH_E_BAD_VALUE, "%s: empty", names[i]);
        int rc = texts[i]->ptr ? sch_check_rule(names[i], texts[i], SCH_RULE_TEXT, err, errlen) : 0;
        if (rc) return rc;
    }
    if (p->n_stop && !p->stop)
        return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "params.stop: NULL with n_stop %zu",
                       p->n_stop);
    for (size_t i = 0; i < p->n_stop; i++) {
        snprintf(path, sizeof path, "params.stop[%zu]", i);
        if (p->stop[i].len == 0)
            return pl_errf(err, errlen, SCH_E_BAD_VALUE, "%s: empty stop string", path);
        int rc = sch_check_rule(path, &p->stop[i], SCH_RULE_TEXT, err, errlen);
        if (rc) return rc;
    }
    return SCH_OK;
}

static int sch_turn_check(const sch_turn *t, char *err, size_t errlen) {
    char path[48];
    int rc;
    if ((rc = sch_check_rule("conversation_id", &t->conversation_id, SCH_RULE_ID, err, errlen)) ||
        (rc = sch_check_rule("turn_id", &t->turn_id, SCH_RULE_ID, err, errlen)))
        return rc;
    if (!!t->n_messages + !!t->n_prompt_tokens + !!t->prompt.ptr > 1)
        return pl_errf(err, errlen, SCH_E_BOTH_INPUTS,
                       "messages, prompt_tokens and prompt are exclusive");
    if (!t->n_messages && !t->n_prompt_tokens && !t->prompt.ptr)
        return pl_errf(err, errlen, SCH_E_MISSING_INPUT,
                       "one of messages, prompt_tokens or prompt is required");
    if (t->prompt.ptr && !t->prompt.len)
        return pl_errf(err, errlen, SCH_E_EMPTY_INPUT, "prompt: empty string");
    if (!sch_class_name(t->service_class))
        return pl_errf(err, errlen, SCH_E_BAD_VALUE, "service_class: %d is not a sch_class",
                       (int)t->service_class);
    if (t->prompt.ptr && (rc = sch_check_rule("prompt", &t->prompt, SCH_RULE_TEXT, err, errlen)))
        return rc;
    if (t->n_messages && !t->messages)
        return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "messages: NULL with a count of %zu",
                       t->n_messages);
    for (size_t i = 0; i < t->n_messages; i++) {
        snprintf(path, sizeof path, "messages[%zu].content", i);
        if (!sch_role_name(t->messages[i].role))
            return pl_errf(err, errlen, SCH_E_BAD_ROLE, "messages[%zu].role: %d is not a sch_role",
                           i, (int)t->messages[i].role);
        if ((rc = sch_check_rule(path, &t->messages[i].content, SCH_RULE_TEXT, err, errlen)))
            return rc;
        snprintf(path, sizeof path, "messages[%zu].tool_calls", i);
        if (t->messages[i].tool_calls.ptr &&
            (rc = sch_check_rule(path, &t->messages[i].tool_calls, SCH_RULE_TEXT, err, errlen)))
            return rc;
        snprintf(path, sizeof path, "messages[%zu].tool_call_id", i);
        if (t->messages[i].tool_call_id.ptr &&
            (rc = sch_check_rule(path, &t->messages[i].tool_call_id, SCH_RULE_ID, err, errlen)))
            return rc;
    }
    if ((rc = sch_check_tokens("prompt_tokens", t->prompt_tokens, t->n_prompt_tokens, err, errlen)))
        return rc;
    if ((rc = sch_params_check(&t->params, err, errlen))) return rc;
    if (t->ns.ptr && (rc = sch_check_rule("namespace", &t->ns, SCH_RULE_NS, err, errlen)))
        return rc;
    if (t->model.ptr && (rc = sch_check_rule("model", &t->model, SCH_RULE_ID, err, errlen)))
        return rc;
    return SCH_OK;
}

int sch_turn_encode(const sch_turn *t, sch_buf *out, char *err, size_t errlen) {
    sch_writer w;
    int rc;
    if (!t || !out) return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "turn or buffer is NULL");
    out->len = 0;
    if ((rc = sch_turn_check(t, err, errlen))) return rc;
    const sch_params *p = &t->params;
    sch_w_open(&w, out);
    sch_w_map(&w, 6 + !!t->ns.ptr + !!t->deadline_ms + !!t->created_ms + !!t->model.ptr +
                      (t->service_class != SCH_CLASS_INTERACTIVE));
    sch_w_uint(&w, "v", SCH_VERSION);
    sch_w_str(&w, "conversation_id", &t->conversation_id);
    sch_w_str(&w, "turn_id", &t->turn_id);
    if (t->n_messages) {
        sch_w_key(&w, "messages");
        msgpack_pack_array(&w.pk, t->n_messages);
        for (size_t i = 0; i < t->n_messages; i++) {
            const sch_message *m = &t->messages[i];
            sch_str role = sch_str_c(sch_role_name(m->role));
            sch_w_map(&w, 2 + !!m->tool_calls.ptr + !!m->tool_call_id.ptr);
            sch_w_str(&w, "role", &role);
            sch_w_str(&w, "content", &m->content);
            if (m->tool_calls.ptr) sch_w_str(&w, "tool_calls", &m->tool_calls);
            if (m->tool_call_id.ptr) sch_w_str(&w, "tool_call_id", &m->tool_call_id);
        }
    } else if (t->prompt.ptr) {
        sch_w_str(&w, "prompt", &t->prompt);
    } else {
        sch_w_tokens(&w, "prompt_tokens", t->prompt_tokens, t->n_prompt_tokens);
    }
    const sch_response_format *rf = &p->response_format;
    sch_w_key(&w, "params");
    sch_w_map(&w, 5 + p->has_seed + !!p->n_stop + (rf->type != SCH_RF_TEXT) + p->has_logprobs +
                      (p->n != 1) + !!p->tools.ptr + !!p->tool_choice.ptr +
                      !p->parallel_tool_calls);
    sch_w_uint(&w, "max_tokens", p->max_tokens);
    sch_w_double(&w, "temperature", p->temperature);
    sch_w_double(&w, "top_p", p->top_p);
    sch_w_uint(&w, "top_k", p->top_k);
    if (p->has_seed) sch_w_uint(&w, "seed", p->seed);
    if (p->n_stop) {
        sch_w_key(&w, "stop");
        msgpack_pack_array(&w.pk, p->n_stop);
        for (size_t i = 0; i < p->n_stop; i++) sch_w_str(&w, NULL, &p->stop[i]);
    }
    sch_w_double(&w, "repetition_penalty", p->repetition_penalty);
    if (rf->type != SCH_RF_TEXT) {
        sch_str type = sch_str_c(sch_rf_name(rf->type));
        sch_w_key(&w, "response_format");
        sch_w_map(&w, 1 + !!sch_rf_keys[rf->type]);
        sch_w_str(&w, "type", &type);
        if (sch_rf_keys[rf->type]) sch_w_str(&w, sch_rf_keys[rf->type], &rf->spec);
    }
    if (p->has_logprobs) sch_w_uint(&w, "logprobs", p->top_logprobs);
    if (p->n != 1) sch_w_uint(&w, "n", p->n);
    if (p->tools.ptr) sch_w_str(&w, "tools", &p->tools);
    if (p->tool_choice.ptr) sch_w_str(&w, "tool_choice", &p->tool_choice);
    if (!p->parallel_tool_calls) sch_w_bool(&w, "parallel_tool_calls", false);
    sch_w_bool(&w, "stream", t->stream);
    if (t->ns.ptr) sch_w_str(&w, "namespace", &t->ns);
    if (t->deadline_ms) sch_w_uint(&w, "deadline_ms", t->deadline_ms);
    if (t->created_ms) sch_w_uint(&w, "created_ms", t->created_ms);
    if (t->model.ptr) sch_w_str(&w, "model", &t->model);
    if (t->service_class != SCH_CLASS_INTERACTIVE) {
        sch_str cls = sch_str_c(sch_class_name(t->service_class));
        sch_w_str(&w, "service_class", &cls);
    }
    return sch_w_close(&w, err, errlen);
}
