/*
 * sch_turn.c -- ChatTurn: decode (worker side) and encode (client side).
 *
 * A ChatTurn carries either the whole conversation (`messages`) or a
 * pre-tokenized prompt (`prompt_tokens`), never both, plus generation
 * parameters with defaults.  The decoder checks fields in a fixed order
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

static const char *const sch_roles[] = {"system", "user", "assistant"};

void sch_params_default(sch_params *p) {
    memset(p, 0, sizeof *p);
    p->max_tokens = SCH_DEFAULT_MAX_TOKENS;
    p->temperature = 1.0;
    p->top_p = 1.0;
    p->top_k = 0;
    p->repetition_penalty = 1.0;
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
        for (int k = 0; k < 3; k++)
            if (r->via.str.size == strlen(sch_roles[k]) &&
                !memcmp(r->via.str.ptr, sch_roles[k], r->via.str.size))
                role = k;
        if (role < 0) {
            sch_quote(q, sizeof q, r->via.str.ptr, r->via.str.size);
            return pl_errf(c->err, c->errlen, SCH_E_BAD_ROLE,
                           "%s.role: %s is not system, user or assistant", path, q);
        }
        m[i].role = (sch_role)role;
        rc = sch_get_str(c, e, path, "content", true, SCH_RULE_TEXT, c->lim->max_content_bytes,
                         SCH_E_CONTENT_TOO_LONG, &m[i].content);
        if (rc) return rc;
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
    return sch_get_number(c, o, P, "repetition_penalty", false, 0, true, SCH_PENALTY_MAX,
                          &p->repetition_penalty, NULL);
}

static int sch_turn_read(sch_ctx *c, const msgpack_object *root, void *out) {
    sch_turn *t = out;
    const sch_limits *lim = c->lim;
    const msgpack_object *msgs, *toks;
    int rc;
    if ((rc = sch_map_check(c, root, "")) || (rc = sch_get_version(c, root, &t->v)) ||
        (rc = sch_get_str(c, root, "", "conversation_id", true, SCH_RULE_ID, lim->max_id_bytes,
                          SCH_E_STRING_TOO_LONG, &t->conversation_id)) ||
        (rc = sch_get_str(c, root, "", "turn_id", true, SCH_RULE_ID, lim->max_id_bytes,
                          SCH_E_STRING_TOO_LONG, &t->turn_id)))
        return rc;
    msgs = sch_map_get(root, "messages");
    toks = sch_map_get(root, "prompt_tokens");
    if (msgs && toks)
        return pl_errf(c->err, c->errlen, SCH_E_BOTH_INPUTS,
                       "messages and prompt_tokens are exclusive");
    if (!msgs && !toks)
        return pl_errf(c->err, c->errlen, SCH_E_MISSING_INPUT,
                       "one of messages or prompt_tokens is required");
    if (msgs) {
        rc = sch_messages_read(c, msgs, t);
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
                          SCH_E_STRING_TOO_LONG, &t->model)))
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
    if (t->n_messages && t->n_prompt_tokens)
        return pl_errf(err, errlen, SCH_E_BOTH_INPUTS, "messages and prompt_tokens are exclusive");
    if (!t->n_messages && !t->n_prompt_tokens)
        return pl_errf(err, errlen, SCH_E_MISSING_INPUT,
                       "one of messages or prompt_tokens is required");
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
    sch_w_map(&w, 6 + !!t->ns.ptr + !!t->deadline_ms + !!t->created_ms + !!t->model.ptr);
    sch_w_uint(&w, "v", SCH_VERSION);
    sch_w_str(&w, "conversation_id", &t->conversation_id);
    sch_w_str(&w, "turn_id", &t->turn_id);
    if (t->n_messages) {
        sch_w_key(&w, "messages");
        msgpack_pack_array(&w.pk, t->n_messages);
        for (size_t i = 0; i < t->n_messages; i++) {
            sch_str role = sch_str_c(sch_role_name(t->messages[i].role));
            sch_w_map(&w, 2);
            sch_w_str(&w, "role", &role);
            sch_w_str(&w, "content", &t->messages[i].content);
        }
    } else {
        sch_w_tokens(&w, "prompt_tokens", t->prompt_tokens, t->n_prompt_tokens);
    }
    sch_w_key(&w, "params");
    sch_w_map(&w, 5 + p->has_seed + !!p->n_stop);
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
    sch_w_bool(&w, "stream", t->stream);
    if (t->ns.ptr) sch_w_str(&w, "namespace", &t->ns);
    if (t->deadline_ms) sch_w_uint(&w, "deadline_ms", t->deadline_ms);
    if (t->created_ms) sch_w_uint(&w, "created_ms", t->created_ms);
    if (t->model.ptr) sch_w_str(&w, "model", &t->model);
    return sch_w_close(&w, err, errlen);
}
