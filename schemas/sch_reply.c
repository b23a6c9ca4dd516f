/*
 * sch_reply.c -- the parts of a reply that TokenChunks and TurnResults
 * share since spec 1.2: per-token logprobs, tool calls, and (results) the
 * extra choices of an n > 1 turn.  Decoders and encoders of each, used by
 * sch_chunk.c and sch_result.c.
 *
 * A logprob entry is a map {id, token, logprob, bytes?, top?}; `top` holds
 * entries of the same shape without their own `top` (one found there is
 * ignored, as an unknown field would be).  An array of logprobs always
 * has one entry per token of the reply it belongs to.  A tool call is a
 * map {id, name, arguments}.  A choice is a map {index, text, tokens,
 * finish_reason, logprobs?, tool_calls?}, the choices of a result
 * numbered 1, 2, ... in order (choice 0 is the result's own fields).
 */
#include "sch_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* Token text and raw bytes are bounded by max_text_bytes. */
static int sch_lp_entry_read(sch_ctx *c, const msgpack_object *o, const char *path, int with_top,
                             sch_logprob *e) {
    char p[96];
    uint64_t u;
    int rc;
    memset(e, 0, sizeof *e);
    if ((rc = sch_map_check(c, o, path)) ||
        (rc = sch_get_uint(c, o, path, "id", true, 0, INT32_MAX, &u, NULL)) ||
        (rc = sch_get_str(c, o, path, "token", true, SCH_RULE_TEXT, c->lim->max_text_bytes,
                          SCH_E_STRING_TOO_LONG, &e->token)) ||
        (rc = sch_get_number(c, o, path, "logprob", true, -1e308, false, 0, &e->logprob, NULL)))
        return rc;
    e->id = (uint32_t)u;
    const msgpack_object *b = sch_map_get(o, "bytes");
    if (b) {
        snprintf(p, sizeof p, "%s.bytes", path);
        if (b->type != MSGPACK_OBJECT_ARRAY)
            return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "%s: expected array, got %s", p,
                           sch_type_name(b));
        size_t n = b->via.array.size;
        if (n > c->lim->max_text_bytes)
            return pl_errf(c->err, c->errlen, SCH_E_STRING_TOO_LONG,
                           "%s: %zu bytes exceeds the limit of %zu", p, n, c->lim->max_text_bytes);
        char *d = msgpack_zone_malloc_no_align(c->zone, n + 1);
        if (!d) return pl_errf(c->err, c->errlen, SCH_E_NOMEM, "out of memory");
        for (size_t i = 0; i < n; i++) {
            const msgpack_object *x = &b->via.array.ptr[i];
            if (x->type != MSGPACK_OBJECT_POSITIVE_INTEGER || x->via.u64 > 255)
                return pl_errf(c->err, c->errlen,
                               x->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
                                       x->type == MSGPACK_OBJECT_NEGATIVE_INTEGER
                                   ? SCH_E_OUT_OF_RANGE
                                   : SCH_E_WRONG_TYPE,
                               "%s[%zu]: expected a byte (uint 0..255)", p, i);
            d[i] = (char)x->via.u64;
        }
        d[n] = 0;
        e->bytes = (sch_str){d, n};
    }
    const msgpack_object *top = with_top ? sch_map_get(o, "top") : NULL;
    if (!top) return SCH_OK;
    snprintf(p, sizeof p, "%s.top", path);
    if (top->type != MSGPACK_OBJECT_ARRAY)
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "%s: expected array, got %s", p,
                       sch_type_name(top));
    size_t n = top->via.array.size;
    if (n > SCH_MAX_TOP_LOGPROBS)
        return pl_errf(c->err, c->errlen, SCH_E_OUT_OF_RANGE, "%s: %zu entries (at most %d)", p, n,
                       SCH_MAX_TOP_LOGPROBS);
    if (!n) return SCH_OK;
    sch_logprob *t = msgpack_zone_malloc(c->zone, n * sizeof *t);
    if (!t) return pl_errf(c->err, c->errlen, SCH_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char q[112];
        snprintf(q, sizeof q, "%s[%zu]", p, i);
        if ((rc = sch_lp_entry_read(c, &top->via.array.ptr[i], q, 0, &t[i]))) return rc;
    }
    e->top = t;
    e->n_top = n;
    return SCH_OK;
}

int sch_logprobs_read(sch_ctx *c, const msgpack_object *map, const char *path, size_t n_tokens,
                      const sch_logprob **out, size_t *n_out) {
    char p[96];
    int rc;
    const msgpack_object *o = sch_map_get(map, "logprobs");
    *out = NULL;
    *n_out = 0;
    if (!o) return SCH_OK;
    snprintf(p, sizeof p, "%s%slogprobs", path, *path ? "." : "");
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "%s: expected array, got %s", p,
                       sch_type_name(o));
    size_t n = o->via.array.size;
    if (n != n_tokens)
        return pl_errf(c->err, c->errlen, SCH_E_BAD_VALUE,
                       "%s: %zu entries for %zu tokens (one per token)", p, n, n_tokens);
    if (!n) return SCH_OK;
    sch_logprob *e = msgpack_zone_malloc(c->zone, n * sizeof *e);
    if (!e) return pl_errf(c->err, c->errlen, SCH_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char q[112];
        snprintf(q, sizeof q, "%s[%zu]", p, i);
        if ((rc = sch_lp_entry_read(c, &o->via.array.ptr[i], q, 1, &e[i]))) return rc;
    }
    *out = e;
    *n_out = n;
    return SCH_OK;
}

int sch_tool_calls_read(sch_ctx *c, const msgpack_object *map, const char *path,
                        const sch_tool_call **out, size_t *n_out) {
    char p[96];
    int rc;
    const msgpack_object *o = sch_map_get(map, "tool_calls");
    *out = NULL;
    *n_out = 0;
    if (!o) return SCH_OK;
    snprintf(p, sizeof p, "%s%stool_calls", path, *path ? "." : "");
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "%s: expected array, got %s", p,
                       sch_type_name(o));
    size_t n = o->via.array.size;
    if (n > SCH_MAX_TOOL_CALLS)
        return pl_errf(c->err, c->errlen, SCH_E_OUT_OF_RANGE, "%s: %zu calls (at most %d)", p, n,
                       SCH_MAX_TOOL_CALLS);
    if (!n) return SCH_OK;
    sch_tool_call *t = msgpack_zone_malloc(c->zone, n * sizeof *t);
    if (!t) return pl_errf(c->err, c->errlen, SCH_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char q[112];
        const msgpack_object *e = &o->via.array.ptr[i];
        snprintf(q, sizeof q, "%s[%zu]", p, i);
        memset(&t[i], 0, sizeof t[i]);
        if ((rc = sch_map_check(c, e, q)) ||
            (rc = sch_get_str(c, e, q, "id", true, SCH_RULE_ID, c->lim->max_id_bytes,
                              SCH_E_STRING_TOO_LONG, &t[i].id)) ||
            (rc = sch_get_str(c, e, q, "name", true, SCH_RULE_ID, c->lim->max_id_bytes,
                              SCH_E_STRING_TOO_LONG, &t[i].name)) ||
            (rc = sch_get_str(c, e, q, "arguments", true, SCH_RULE_TEXT, c->lim->max_content_bytes,
                              SCH_E_CONTENT_TOO_LONG, &t[i].arguments)))
            return rc;
    }
    *out = t;
    *n_out = n;
    return SCH_OK;
}

int sch_choices_read(sch_ctx *c, const msgpack_object *root, sch_result *r) {
    int rc;
    const msgpack_object *o = sch_map_get(root, "choices");
    if (!o) return SCH_OK;
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "choices: expected array, got %s",
                       sch_type_name(o));
    size_t n = o->via.array.size;
    if (n > SCH_MAX_N - 1)
        return pl_errf(c->err, c->errlen, SCH_E_OUT_OF_RANGE, "choices: %zu entries (at most %d)",
                       n, SCH_MAX_N - 1);
    if (!n) return SCH_OK;
    sch_choice *ch = msgpack_zone_malloc(c->zone, n * sizeof *ch);
    if (!ch) return pl_errf(c->err, c->errlen, SCH_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        char q[48];
        uint64_t idx;
        const msgpack_object *e = &o->via.array.ptr[i], *toks;
        snprintf(q, sizeof q, "choices[%zu]", i);
        memset(&ch[i], 0, sizeof ch[i]);
        if ((rc = sch_map_check(c, e, q)) ||
            (rc = sch_get_uint(c, e, q, "index", true, 1, SCH_MAX_N - 1, &idx, NULL)))
            return rc;
        if (idx != i + 1)
            return pl_errf(c->err, c->errlen, SCH_E_BAD_VALUE, "%s.index: %llu, expected %zu", q,
                           (unsigned long long)idx, i + 1);
        ch[i].index = (uint32_t)idx;
        if ((rc = sch_get_str(c, e, q, "text", true, SCH_RULE_TEXT, c->lim->max_content_bytes,
                              SCH_E_CONTENT_TOO_LONG, &ch[i].text)))
            return rc;
        if (!(toks = sch_map_get(e, "tokens")))
            return pl_errf(c->err, c->errlen, SCH_E_MISSING_FIELD,
                           "%s.tokens: required field missing", q);
        char tp[64];
        snprintf(tp, sizeof tp, "%s.tokens", q);
        if ((rc = sch_take_tokens(c, toks, tp, c->lim->max_tokens, SCH_E_TOO_MANY_TOKENS,
                                  &ch[i].tokens, &ch[i].n_tokens)) ||
            (rc = sch_finish_take(c, e, q, &ch[i].finish_reason)) ||
            (rc = sch_logprobs_read(c, e, q, ch[i].n_tokens, &ch[i].logprobs, &ch[i].n_logprobs)) ||
            (rc = sch_tool_calls_read(c, e, q, &ch[i].tool_calls, &ch[i].n_tool_calls)))
            return rc;
    }
    r->choices = ch;
    r->n_choices = n;
    return SCH_OK;
}

/* ---- encoding -------------------------------------------------------- */

static int sch_lp_entry_check(const char *path, const sch_logprob *e, int with_top, char *err,
                              size_t errlen) {
    char p[160];
    int rc;
    if (e->id > INT32_MAX)
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE, "%s.id: %u above 2147483647", path, e->id);
    snprintf(p, sizeof p, "%s.token", path);
    if ((rc = sch_check_rule(p, &e->token, SCH_RULE_TEXT, err, errlen))) return rc;
    if (!isfinite(e->logprob) || e->logprob > 0)
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE, "%s.logprob: %g is not finite and <= 0",
                       path, e->logprob);
    if (e->bytes.len && !e->bytes.ptr)
        return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "%s.bytes: NULL with a length", path);
    if (!with_top) return SCH_OK;
    if (e->n_top > SCH_MAX_TOP_LOGPROBS || (e->n_top && !e->top))
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE, "%s.top: %zu entries (at most %d)", path,
                       e->n_top, SCH_MAX_TOP_LOGPROBS);
    for (size_t i = 0; i < e->n_top; i++) {
        snprintf(p, sizeof p, "%s.top[%zu]", path, i);
        if ((rc = sch_lp_entry_check(p, &e->top[i], 0, err, errlen))) return rc;
    }
    return SCH_OK;
}

int sch_check_logprobs(const char *path, const sch_logprob *lp, size_t n, size_t n_tokens,
                       char *err, size_t errlen) {
    char p[112];
    int rc;
    if (!n) return SCH_OK;
    if (!lp || n != n_tokens)
        return pl_errf(err, errlen, SCH_E_BAD_VALUE, "%s: %zu entries for %zu tokens", path, n,
                       n_tokens);
    for (size_t i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s[%zu]", path, i);
        if ((rc = sch_lp_entry_check(p, &lp[i], 1, err, errlen))) return rc;
    }
    return SCH_OK;
}

int sch_check_tool_calls(const char *path, const sch_tool_call *t, size_t n, char *err,
                         size_t errlen) {
    char p[112];
    int rc;
    if (n > SCH_MAX_TOOL_CALLS || (n && !t))
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE, "%s: %zu calls (at most %d)", path, n,
                       SCH_MAX_TOOL_CALLS);
    for (size_t i = 0; i < n; i++) {
        snprintf(p, sizeof p, "%s[%zu].id", path, i);
        if ((rc = sch_check_rule(p, &t[i].id, SCH_RULE_ID, err, errlen))) return rc;
        snprintf(p, sizeof p, "%s[%zu].name", path, i);
        if ((rc = sch_check_rule(p, &t[i].name, SCH_RULE_ID, err, errlen))) return rc;
        snprintf(p, sizeof p, "%s[%zu].arguments", path, i);
        if ((rc = sch_check_rule(p, &t[i].arguments, SCH_RULE_TEXT, err, errlen))) return rc;
    }
    return SCH_OK;
}

int sch_check_choices(const sch_result *r, char *err, size_t errlen) {
    char p[64];
    int rc;
    if (r->n_choices > SCH_MAX_N - 1 || (r->n_choices && !r->choices))
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE, "choices: %zu entries (at most %d)",
                       r->n_choices, SCH_MAX_N - 1);
    for (size_t i = 0; i < r->n_choices; i++) {
        const sch_choice *ch = &r->choices[i];
        if (ch->index != i + 1)
            return pl_errf(err, errlen, SCH_E_BAD_VALUE, "choices[%zu].index: %u, expected %zu", i,
                           ch->index, i + 1);
        if (!sch_finish_name(ch->finish_reason))
            return pl_errf(err, errlen, SCH_E_BAD_VALUE,
                           "choices[%zu].finish_reason: %d is not a sch_finish", i,
                           (int)ch->finish_reason);
        snprintf(p, sizeof p, "choices[%zu].text", i);
        if ((rc = sch_check_rule(p, &ch->text, SCH_RULE_TEXT, err, errlen))) return rc;
        snprintf(p, sizeof p, "choices[%zu].tokens", i);
        if ((rc = sch_check_tokens(p, ch->tokens, ch->n_tokens, err, errlen))) return rc;
        snprintf(p, sizeof p, "choices[%zu].logprobs", i);
        if ((rc = sch_check_logprobs(p, ch->logprobs, ch->n_logprobs, ch->n_tokens, err, errlen)))
            return rc;
        snprintf(p, sizeof p, "choices[%zu].tool_calls", i);
        if ((rc = sch_check_tool_calls(p, ch->tool_calls, ch->n_tool_calls, err, errlen)))
            return rc;
    }
    return SCH_OK;
}

static void sch_w_lp_entry(sch_writer *w, const sch_logprob *e, int with_top) {
    int top = with_top && e->n_top;
    sch_w_map(w, 3 + !!e->bytes.ptr + top);
    sch_w_uint(w, "id", e->id);
    sch_w_str(w, "token", &e->token);
    sch_w_double(w, "logprob", e->logprob);
    if (e->bytes.ptr) {
        sch_w_key(w, "bytes");
        msgpack_pack_array(&w->pk, e->bytes.len);
        for (size_t i = 0; i < e->bytes.len; i++)
            msgpack_pack_uint8(&w->pk, (uint8_t)e->bytes.ptr[i]);
    }
    if (top) {
        sch_w_key(w, "top");
        msgpack_pack_array(&w->pk, e->n_top);
        for (size_t i = 0; i < e->n_top; i++) sch_w_lp_entry(w, &e->top[i], 0);
    }
}

void sch_w_logprobs(sch_writer *w, const sch_logprob *lp, size_t n) {
    sch_w_key(w, "logprobs");
    msgpack_pack_array(&w->pk, n);
    for (size_t i = 0; i < n; i++) sch_w_lp_entry(w, &lp[i], 1);
}

void sch_w_tool_calls(sch_writer *w, const sch_tool_call *t, size_t n) {
    sch_w_key(w, "tool_calls");
    msgpack_pack_array(&w->pk, n);
    for (size_t i = 0; i < n; i++) {
        sch_w_map(w, 3);
        sch_w_str(w, "id", &t[i].id);
        sch_w_str(w, "name", &t[i].name);
        sch_w_str(w, "arguments", &t[i].arguments);
    }
}

void sch_w_choices(sch_writer *w, const sch_choice *ch, size_t n) {
    sch_w_key(w, "choices");
    msgpack_pack_array(&w->pk, n);
    for (size_t i = 0; i < n; i++) {
        sch_str finish = sch_str_c(sch_finish_name(ch[i].finish_reason));
        sch_w_map(w, 4 + !!ch[i].n_logprobs + !!ch[i].n_tool_calls);
        sch_w_uint(w, "index", ch[i].index);
        sch_w_str(w, "text", &ch[i].text);
        sch_w_tokens(w, "tokens", ch[i].tokens, ch[i].n_tokens);
        sch_w_str(w, "finish_reason", &finish);
        if (ch[i].n_logprobs) sch_w_logprobs(w, ch[i].logprobs, ch[i].n_logprobs);
        if (ch[i].n_tool_calls) sch_w_tool_calls(w, ch[i].tool_calls, ch[i].n_tool_calls);
    }
}
