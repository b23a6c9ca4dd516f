/*
 * sch_chunk.c -- TokenChunk: encode (worker side) and decode (streaming
 * readers, tests).
 *
 * A chunk is a few tokens of a streamed reply.  Chunks are published at
 * least once through an idempotent producer outside the turn's transaction,
 * so a reader may see a chunk twice or see chunks of an abandoned attempt;
 * (attempt, seq) identifies a chunk and the TurnResult names the attempt
 * that counts.  `text` must be valid UTF-8, so the worker holds back the
 * bytes of a code point split across tokens until it is complete.  Since
 * 1.2 a chunk names the choice its tokens belong to (`index`, for n > 1
 * turns; written when not 0) and may carry their logprobs.
 */
#include "sch_internal.h"

#include <string.h>

void sch_chunk_init(sch_chunk *c) {
    memset(c, 0, sizeof *c);
    c->v = SCH_VERSION;
}

void sch_chunk_free(sch_chunk *c) {
    if (!c) return;
    if (c->zone_) msgpack_zone_free(c->zone_);
    memset(c, 0, sizeof *c);
}

static int sch_chunk_read(sch_ctx *c, const msgpack_object *root, void *out) {
    sch_chunk *k = out;
    const sch_limits *lim = c->lim;
    const msgpack_object *toks;
    int rc;
    if ((rc = sch_get_turn_head(c, root, &k->v, &k->conversation_id, &k->turn_id)) ||
        (rc = sch_get_uint(c, root, "", "attempt", true, 0, UINT64_MAX, &k->attempt, NULL)) ||
        (rc = sch_get_uint(c, root, "", "seq", true, 0, UINT64_MAX, &k->seq, NULL)) ||
        (rc = sch_get_str(c, root, "", "text", true, SCH_RULE_TEXT, lim->max_content_bytes,
                          SCH_E_CONTENT_TOO_LONG, &k->text)))
        return rc;
    if (!(toks = sch_map_get(root, "tokens")))
        return pl_errf(c->err, c->errlen, SCH_E_MISSING_FIELD, "tokens: required field missing");
    if ((rc = sch_take_tokens(c, toks, "tokens", lim->max_tokens, SCH_E_TOO_MANY_TOKENS, &k->tokens,
                              &k->n_tokens)))
        return rc;
    uint64_t idx;
    bool has_idx;
    if ((rc = sch_get_bool(c, root, "", "last", false, &k->last, NULL)) ||
        (rc = sch_get_uint(c, root, "", "index", false, 0, SCH_MAX_N - 1, &idx, &has_idx)) ||
        (rc = sch_logprobs_read(c, root, "", k->n_tokens, &k->logprobs, &k->n_logprobs)))
        return rc;
    if (has_idx) k->index = (uint32_t)idx;
    return SCH_OK;
}

int sch_chunk_decode(const void *buf, size_t len, const sch_limits *lim, sch_chunk *out, char *err,
                     size_t errlen) {
    return sch_decode_record(buf, len, lim, sch_chunk_read, out, sizeof *out,
                             out ? &out->zone_ : NULL, err, errlen);
}

int sch_chunk_encode(const sch_chunk *k, sch_buf *out, char *err, size_t errlen) {
    sch_writer w;
    int rc;
    if (!k || !out) return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "chunk or buffer is NULL");
    out->len = 0;
    if ((rc = sch_check_rule("conversation_id", &k->conversation_id, SCH_RULE_ID, err, errlen)) ||
        (rc = sch_check_rule("turn_id", &k->turn_id, SCH_RULE_ID, err, errlen)) ||
        (rc = sch_check_rule("text", &k->text, SCH_RULE_TEXT, err, errlen)))
        return rc;
    if ((rc = sch_check_tokens("tokens", k->tokens, k->n_tokens, err, errlen)) ||
        (rc = sch_check_logprobs("logprobs", k->logprobs, k->n_logprobs, k->n_tokens, err, errlen)))
        return rc;
    if (k->index >= SCH_MAX_N)
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE, "index: %u outside 0..%d", k->index,
                       SCH_MAX_N - 1);
    sch_w_open(&w, out);
    sch_w_map(&w, 8 + !!k->index + !!k->n_logprobs);
    sch_w_uint(&w, "v", SCH_VERSION);
    sch_w_str(&w, "conversation_id", &k->conversation_id);
    sch_w_str(&w, "turn_id", &k->turn_id);
    sch_w_uint(&w, "attempt", k->attempt);
    sch_w_uint(&w, "seq", k->seq);
    sch_w_str(&w, "text", &k->text);
    sch_w_tokens(&w, "tokens", k->tokens, k->n_tokens);
    sch_w_bool(&w, "last", k->last);
    if (k->index) sch_w_uint(&w, "index", k->index);
    if (k->n_logprobs) sch_w_logprobs(&w, k->logprobs, k->n_logprobs);
    return sch_w_close(&w, err, errlen);
}
