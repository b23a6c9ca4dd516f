/*
 * sch_cancel.c -- CancelTurn (spec 1.4): encode (gateway, batch runner,
 * clients) and decode (worker).
 *
 * A cancel names one turn by (conversation_id, turn_id).  It travels on the
 * turns topic with the turn's key, so it lands on the turn's partition after
 * the turn (when its producer sent the turn first) and is read by the worker
 * that owns the turn.  The content-type header SCH_CONTENT_TYPE_CANCEL is
 * what tells it from a ChatTurn: a reader that does not know it refuses the
 * record as E_UNSUPPORTED_CONTENT_TYPE before decoding any field, so an old
 * worker dead-letters a cancel and writes no TurnResult for it.
 */
#include "sch_internal.h"

#include <string.h>

void sch_cancel_init(sch_cancel *k) {
    memset(k, 0, sizeof *k);
    k->v = SCH_VERSION;
}

void sch_cancel_free(sch_cancel *k) {
    if (!k) return;
    if (k->zone_) msgpack_zone_free(k->zone_);
    memset(k, 0, sizeof *k);
}

static int sch_cancel_read(sch_ctx *c, const msgpack_object *root, void *out) {
    sch_cancel *k = out;
    const sch_limits *lim = c->lim;
    int rc;
    if ((rc = sch_get_turn_head(c, root, &k->v, &k->conversation_id, &k->turn_id)) ||
        (rc = sch_get_uint(c, root, "", "cancelled_ms", false, 0, UINT64_MAX, &k->cancelled_ms,
                           NULL)) ||
        (rc = sch_get_str(c, root, "", "reason", false, SCH_RULE_TEXT, lim->max_text_bytes,
                          SCH_E_STRING_TOO_LONG, &k->reason)))
        return rc;
    return SCH_OK;
}

int sch_cancel_decode(const void *buf, size_t len, const sch_limits *lim, sch_cancel *out,
                      char *err, size_t errlen) {
    return sch_decode_record(buf, len, lim, sch_cancel_read, out, sizeof *out,
                             out ? &out->zone_ : NULL, err, errlen);
}

int sch_cancel_encode(const sch_cancel *k, sch_buf *out, char *err, size_t errlen) {
    sch_writer w;
    int rc;
    if (!k || !out) return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "cancel or buffer is NULL");
    out->len = 0;
    if ((rc = sch_check_rule("conversation_id", &k->conversation_id, SCH_RULE_ID, err, errlen)) ||
        (rc = sch_check_rule("turn_id", &k->turn_id, SCH_RULE_ID, err, errlen)) ||
        (k->reason.ptr && (rc = sch_check_rule("reason", &k->reason, SCH_RULE_TEXT, err, errlen))))
        return rc;
    sch_w_open(&w, out);
    sch_w_map(&w, 3 + !!k->cancelled_ms + !!k->reason.ptr);
    sch_w_uint(&w, "v", SCH_VERSION);
    sch_w_str(&w, "conversation_id", &k->conversation_id);
    sch_w_str(&w, "turn_id", &k->turn_id);
    if (k->cancelled_ms) sch_w_uint(&w, "cancelled_ms", k->cancelled_ms);
    if (k->reason.ptr) sch_w_str(&w, "reason", &k->reason);
    return sch_w_close(&w, err, errlen);
}
