/*
 * sch_result.c -- TurnResult: encode (worker side) and decode (clients).
 *
 * The TurnResult is written in the same Kafka transaction as the input
 * offset, so a read_committed consumer sees exactly one per turn.  It names
 * the attempt whose TokenChunks are the real ones, the reason generation
 * ended, token usage (how much of the prompt came from the KV cache) and
 * timings.  finish_reason "error" requires an `error` map whose `code` is an
 * sch_err name; a reader keeps names it does not know (from newer writers)
 * as text and maps them to SCH_E_UNKNOWN.  Since 1.2 a result may also
 * carry per-token logprobs, tool calls and the extra choices of an n > 1
 * turn (sch_reply.c); they are written only when present.
 */
#include "sch_internal.h"

#include <string.h>


void sch_result_init(sch_result *r) {
    memset(r, 0, sizeof *r);
    r->v = SCH_VERSION;
}

void sch_result_free(sch_result *r) {
    if (!r) return;
    if (r->zone_) msgpack_zone_free(r->zone_);
    memset(r, 0, sizeof *r);
}

void sch_result_choice(const sch_result *r, size_t k, sch_choice *out) {
    memset(out, 0, sizeof *out);
    out->index = (uint32_t)k;
    if (k == 0) {
        out->text = r->text;
        out->tokens = r->tokens;
        out->n_tokens = r->n_tokens;
        out->finish_reason = r->finish_reason;
        out->logprobs = r->logprobs;
        out->n_logprobs = r->n_logprobs;
        out->tool_calls = r->tool_calls;
        out->n_tool_calls = r->n_tool_calls;
    } else if (k <= r->n_choices && r->choices) {
        *out = r->choices[k - 1];
    }
}

void sch_result_set_choice(sch_result *r, sch_choice *more, const sch_choice *c) {
    if (c->index == 0) {
        r->text = c->text;
        r->tokens = c->tokens;
        r->n_tokens = c->n_tokens;
        r->finish_reason = c->finish_reason;
        r->logprobs = c->logprobs;
        r->n_logprobs = c->n_logprobs;
        r->tool_calls = c->tool_calls;
        r->n_tool_calls = c->n_tool_calls;
    } else if (c->index < SCH_MAX_N) {
        more[c->index - 1] = *c;
        r->choices = more;
        if (r->n_choices < c->index) r->n_choices = c->index;
    }
}

void sch_result_fail(sch_result *r, int code, sch_str message) {
    r->has_error = true;
    r->error_code = code;
    r->error_name = (sch_str){0};
    r->error_message = message;
    r->finish_reason = code == SCH_E_EXPIRED ? SCH_FINISH_EXPIRED : SCH_FINISH_ERROR;
    r->choices = NULL;
    r->n_choices = 0;
    r->logprobs = NULL;
    r->n_logprobs = 0;
    r->tool_calls = NULL;
    r->n_tool_calls = 0;
}

/* A required sub-map whose fields are all required uints. */
static int sch_uint_map_read(sch_ctx *c, const msgpack_object *root, const char *name,
                             const char *const *keys, uint64_t *const *dst, int n) {
    const msgpack_object *o = sch_map_get(root, name);
    int rc;
    if (!o)
        return pl_errf(c->err, c->errlen, SCH_E_MISSING_FIELD, "%s: required field missing", name);
    if ((rc = sch_map_check(c, o, name))) return rc;
    for (int i = 0; i < n; i++)
        if ((rc = sch_get_uint(c, o, name, keys[i], true, 0, UINT64_MAX, dst[i], NULL))) return rc;
    return SCH_OK;
}

static int sch_error_read(sch_ctx *c, const msgpack_object *root, sch_result *r) {
    const msgpack_object *o = sch_map_get(root, "error");
    int rc;
    if (!o) {
        if (r->finish_reason == SCH_FINISH_ERROR)
            return pl_errf(c->err, c->errlen, SCH_E_MISSING_FIELD,
                           "error: required when finish_reason is error");
        return SCH_OK;
    }
    if ((rc = sch_map_check(c, o, "error")) ||
        (rc = sch_get_str(c, o, "error", "code", true, SCH_RULE_CODE, SCH_MAX_KEY_BYTES,
                          SCH_E_BAD_VALUE, &r->error_name)) ||
        (rc = sch_get_str(c, o, "error", "message", true, SCH_RULE_TEXT, c->lim->max_text_bytes,
                          SCH_E_STRING_TOO_LONG, &r->error_message)))
        return rc;
    r->has_error = true;
    r->error_code = sch_err_from_name(r->error_name.ptr, r->error_name.len);
    return SCH_OK;
}

static int sch_result_read(sch_ctx *c, const msgpack_object *root, void *out) {
    static const char *const usage_keys[] = {"prompt_tokens", "cached_tokens", "completion_tokens"};
    static const char *const timing_keys[] = {"queue_ms", "ttft_ms", "total_ms"};
    sch_result *r = out;
    const sch_limits *lim = c->lim;
    const msgpack_object *toks;
    uint64_t *const usage[] = {&r->prompt_tokens, &r->cached_tokens, &r->completion_tokens};
    uint64_t *const timing[] = {&r->queue_ms, &r->ttft_ms, &r->total_ms};
    int rc;
    if ((rc = sch_get_turn_head(c, root, &r->v, &r->conversation_id, &r->turn_id)) ||
        (rc = sch_get_uint(c, root, "", "attempt", true, 0, UINT64_MAX, &r->attempt, NULL)) ||
        (rc = sch_get_str(c, root, "", "text", true, SCH_RULE_TEXT, lim->max_content_bytes,
                          SCH_E_CONTENT_TOO_LONG, &r->text)))
        return rc;
    if (!(toks = sch_map_get(root, "tokens")))
        return pl_errf(c->err, c->errlen, SCH_E_MISSING_FIELD, "tokens: required field missing");
    if ((rc = sch_take_tokens(c, toks, "tokens", lim->max_tokens, SCH_E_TOO_MANY_TOKENS, &r->tokens,
                              &r->n_tokens)) ||
        (rc = sch_finish_take(c, root, "", &r->finish_reason)) ||
        (rc = sch_uint_map_read(c, root, "usage", usage_keys, usage, 3)) ||
        (rc = sch_uint_map_read(c, root, "timing", timing_keys, timing, 3)))
        return rc;
    if (r->cached_tokens > r->prompt_tokens)
        return pl_errf(c->err, c->errlen, SCH_E_OUT_OF_RANGE,
                       "usage.cached_tokens: %llu above prompt_tokens %llu",
                       (unsigned long long)r->cached_tokens, (unsigned long long)r->prompt_tokens);
    if ((rc = sch_get_str(c, root, "", "worker", true, SCH_RULE_ID, lim->max_id_bytes,
                          SCH_E_STRING_TOO_LONG, &r->worker)) ||
        (rc = sch_get_str(c, root, "", "model", false, SCH_RULE_ID, lim->max_id_bytes,
                          SCH_E_STRING_TOO_LONG, &r->model)))
        return rc;
    if ((rc = sch_error_read(c, root, r)) ||
        (rc = sch_logprobs_read(c, root, "", r->n_tokens, &r->logprobs, &r->n_logprobs)) ||
        (rc = sch_tool_calls_read(c, root, "", &r->tool_calls, &r->n_tool_calls)))
        return rc;
    return sch_choices_read(c, root, r);
}

int sch_result_decode(const void *buf, size_t len, const sch_limits *lim, sch_result *out,
                      char *err, size_t errlen) {
    return sch_decode_record(buf, len, lim, sch_result_read, out, sizeof *out,
                             out ? &out->zone_ : NULL, err, errlen);
}

int sch_result_encode(const sch_result *r, sch_buf *out, char *err, size_t errlen) {
    sch_writer w;
    sch_str code = {0}, finish;
    int rc;
    if (!r || !out) return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "result or buffer is NULL");
    out->len = 0;
    if ((rc = sch_check_rule("conversation_id", &r->conversation_id, SCH_RULE_ID, err, errlen)) ||
        (rc = sch_check_rule("turn_id", &r->turn_id, SCH_RULE_ID, err, errlen)) ||
        (rc = sch_check_rule("text", &r->text, SCH_RULE_TEXT, err, errlen)) ||
        (rc = sch_check_tokens("tokens", r->tokens, r->n_tokens, err, errlen)) ||
        (rc = sch_check_rule("worker", &r->worker, SCH_RULE_ID, err, errlen)) ||
        (r->model.ptr && (rc = sch_check_rule("model", &r->model, SCH_RULE_ID, err, errlen))))
        return rc;
    if (!(finish.ptr = sch_finish_name(r->finish_reason)))
        return pl_errf(err, errlen, SCH_E_BAD_VALUE, "finish_reason: %d is not a sch_finish",
                       (int)r->finish_reason);
    finish.len = strlen(finish.ptr);
    if (r->finish_reason == SCH_FINISH_ERROR && !r->has_error)
        return pl_errf(err, errlen, SCH_E_MISSING_FIELD,
                       "error: required when finish_reason is error");
    if (r->cached_tokens > r->prompt_tokens)
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE, "usage.cached_tokens: above prompt_tokens");
    if ((rc = sch_check_logprobs("logprobs", r->logprobs, r->n_logprobs, r->n_tokens, err,
                                 errlen)) ||
        (rc = sch_check_tool_calls("tool_calls", r->tool_calls, r->n_tool_calls, err, errlen)) ||
        (rc = sch_check_choices(r, err, errlen)))
        return rc;
    if (r->has_error) {
        code = r->error_name.ptr ? r->error_name : sch_str_c(sch_err_name(r->error_code));
        if ((rc = sch_check_rule("error.code", &code, SCH_RULE_CODE, err, errlen)) ||
            (rc = sch_check_rule("error.message", &r->error_message, SCH_RULE_TEXT, err, errlen)))
            return rc;
    }
    sch_w_open(&w, out);
    sch_w_map(&w, 10 + !!r->model.ptr + r->has_error + !!r->n_logprobs + !!r->n_tool_calls +
                      !!r->n_choices);
    sch_w_uint(&w, "v", SCH_VERSION);
    sch_w_str(&w, "conversation_id", &r->conversation_id);
    sch_w_str(&w, "turn_id", &r->turn_id);
    sch_w_uint(&w, "attempt", r->attempt);
    sch_w_str(&w, "text", &r->text);
    sch_w_tokens(&w, "tokens", r->tokens, r->n_tokens);
    sch_w_str(&w, "finish_reason", &finish);
    sch_w_key(&w, "usage");
    sch_w_map(&w, 3);
    sch_w_uint(&w, "prompt_tokens", r->prompt_tokens);
    sch_w_uint(&w, "cached_tokens", r->cached_tokens);
    sch_w_uint(&w, "completion_tokens", r->completion_tokens);
    sch_w_key(&w, "timing");
    sch_w_map(&w, 3);
    sch_w_uint(&w, "queue_ms", r->queue_ms);
    sch_w_uint(&w, "ttft_ms", r->ttft_ms);
    sch_w_uint(&w, "total_ms", r->total_ms);
    sch_w_str(&w, "worker", &r->worker);
    if (r->model.ptr) sch_w_str(&w, "model", &r->model);
    if (r->has_error) {
        sch_w_key(&w, "error");
        sch_w_map(&w, 2);
        sch_w_str(&w, "code", &code);
        sch_w_str(&w, "message", &r->error_message);
    }
    if (r->n_logprobs) sch_w_logprobs(&w, r->logprobs, r->n_logprobs);
    if (r->n_tool_calls) sch_w_tool_calls(&w, r->tool_calls, r->n_tool_calls);
    if (r->n_choices) sch_w_choices(&w, r->choices, r->n_choices);
    return sch_w_close(&w, err, errlen);
}
