/*
 * sch_dead.c -- DeadLetter: encode (worker side) and decode (DLQ tooling).
 *
 * A DeadLetter wraps an input record the worker refused: its raw key, value
 * and headers (bin, since they may not be decodable at all), where it came
 * from (topic, partition, offset, timestamp), and why (error_code, an
 * sch_err name, and a human `reason`).  A value too large to embed is cut
 * by the worker to a prefix; value_size keeps the original length so the
 * cut is visible.  Header names are written as str when they are UTF-8 and
 * as bin otherwise, so readers in languages that decode str strictly still
 * read every record.
 */
#include "sch_internal.h"

#include <stdio.h>
#include <string.h>

void sch_dead_init(sch_dead *d) {
    memset(d, 0, sizeof *d);
    d->v = SCH_VERSION;
    d->timestamp_ms = -1;
}

void sch_dead_free(sch_dead *d) {
    if (!d) return;
    if (d->zone_) msgpack_zone_free(d->zone_);
    memset(d, 0, sizeof *d);
}

static int sch_headers_read(sch_ctx *c, const msgpack_object *o, sch_dead *d) {
    char path[48];
    int rc;
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "headers: expected array, got %s",
                       sch_type_name(o));
    size_t n = o->via.array.size;
    if (n > c->lim->max_headers)
        return pl_errf(c->err, c->errlen, SCH_E_TOO_MANY_HEADERS,
                       "headers: %zu headers exceeds the limit of %zu", n, c->lim->max_headers);
    if (!n) return SCH_OK;
    sch_header *h = msgpack_zone_malloc(c->zone, n * sizeof *h);
    if (!h) return pl_errf(c->err, c->errlen, SCH_E_NOMEM, "out of memory");
    for (size_t i = 0; i < n; i++) {
        const msgpack_object *e = &o->via.array.ptr[i];
        if (e->type != MSGPACK_OBJECT_ARRAY || e->via.array.size != 2)
            return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE,
                           "headers[%zu]: expected [name, value], got %s", i, sch_type_name(e));
        snprintf(path, sizeof path, "headers[%zu].name", i);
        if ((rc = sch_take_str(c, &e->via.array.ptr[0], path, SCH_RULE_BYTES, c->lim->max_id_bytes,
                               SCH_E_STRING_TOO_LONG, &h[i].name)))
            return rc;
        h[i].value.ptr = NULL;
        h[i].value.len = 0;
        if (e->via.array.ptr[1].type == MSGPACK_OBJECT_NIL) continue;
        snprintf(path, sizeof path, "headers[%zu].value", i);
        if ((rc = sch_take_str(c, &e->via.array.ptr[1], path, SCH_RULE_BYTES,
                               c->lim->max_content_bytes, SCH_E_CONTENT_TOO_LONG, &h[i].value)))
            return rc;
    }
    d->headers = h;
    d->n_headers = n;
    return SCH_OK;
}

static int sch_dead_read(sch_ctx *c, const msgpack_object *root, void *out) {
    sch_dead *d = out;
    const sch_limits *lim = c->lim;
    const msgpack_object *h;
    int64_t part = 0;
    bool has_size;
    int rc;
    d->timestamp_ms = -1;
    if ((rc = sch_map_check(c, root, "")) || (rc = sch_get_version(c, root, &d->v)) ||
        (rc = sch_get_str(c, root, "", "reason", true, SCH_RULE_TEXT, lim->max_text_bytes,
                          SCH_E_STRING_TOO_LONG, &d->reason)) ||
        (rc = sch_get_str(c, root, "", "error_code", true, SCH_RULE_CODE, SCH_MAX_KEY_BYTES,
                          SCH_E_BAD_VALUE, &d->error_name)) ||
        (rc = sch_get_str(c, root, "", "topic", true, SCH_RULE_ID, lim->max_id_bytes,
                          SCH_E_STRING_TOO_LONG, &d->topic)) ||
        (rc = sch_get_int(c, root, "", "partition", true, 0, INT32_MAX, &part, NULL)) ||
        (rc = sch_get_int(c, root, "", "offset", true, 0, INT64_MAX, &d->offset, NULL)) ||
        (rc = sch_get_int(c, root, "", "timestamp_ms", false, -1, INT64_MAX, &d->timestamp_ms,
                          NULL)) ||
        (rc = sch_get_str(c, root, "", "key", false, SCH_RULE_BYTES, lim->max_content_bytes,
                          SCH_E_CONTENT_TOO_LONG, &d->key)) ||
        (rc = sch_get_str(c, root, "", "value", false, SCH_RULE_BYTES, lim->max_total_bytes,
                          SCH_E_RECORD_TOO_LARGE, &d->value)) ||
        (rc = sch_get_uint(c, root, "", "value_size", false, 0, UINT64_MAX, &d->value_size,
                           &has_size)))
        return rc;
    d->error_code = sch_err_from_name(d->error_name.ptr, d->error_name.len);
    d->partition = (int32_t)part;
    if (!has_size) d->value_size = d->value.len;
    if (d->value_size < d->value.len)
        return pl_errf(c->err, c->errlen, SCH_E_OUT_OF_RANGE,
                       "value_size: %llu below the %zu bytes of value",
                       (unsigned long long)d->value_size, d->value.len);
    if ((h = sch_map_get(root, "headers")) && (rc = sch_headers_read(c, h, d))) return rc;
    if ((rc = sch_get_str(c, root, "", "conversation_id", false, SCH_RULE_ID, lim->max_id_bytes,
                          SCH_E_STRING_TOO_LONG, &d->conversation_id)) ||
        (rc = sch_get_str(c, root, "", "turn_id", false, SCH_RULE_ID, lim->max_id_bytes,
                          SCH_E_STRING_TOO_LONG, &d->turn_id)) ||
        (rc = sch_get_str(c, root, "", "worker", false, SCH_RULE_ID, lim->max_id_bytes,
                          SCH_E_STRING_TOO_LONG, &d->worker)))
        return rc;
    return sch_get_uint(c, root, "", "dead_ms", false, 0, UINT64_MAX, &d->dead_ms, NULL);
}

int sch_dead_decode(const void *buf, size_t len, const sch_limits *lim, sch_dead *out, char *err,
                    size_t errlen) {
    return sch_decode_record(buf, len, lim, sch_dead_read, out, sizeof *out,
                             out ? &out->zone_ : NULL, err, errlen);
}

static int sch_dead_check(const sch_dead *d, const sch_str *code, char *err, size_t errlen) {
    int rc;
    if ((rc = sch_check_rule("reason", &d->reason, SCH_RULE_TEXT, err, errlen)) ||
        (rc = sch_check_rule("error_code", code, SCH_RULE_CODE, err, errlen)) ||
        (rc = sch_check_rule("topic", &d->topic, SCH_RULE_ID, err, errlen)))
        return rc;
    if (d->partition < 0 || d->offset < 0 || d->timestamp_ms < -1)
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE,
                       "partition, offset or timestamp_ms negative");
    if ((d->key.len && !d->key.ptr) || (d->value.len && !d->value.ptr))
        return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "key or value NULL with a length");
    if (d->value_size && d->value_size < d->value.len)
        return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE, "value_size: below the length of value");
    if (d->n_headers && !d->headers)
        return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "headers: NULL with a count of %zu",
                       d->n_headers);
    for (size_t i = 0; i < d->n_headers; i++)
        if ((d->headers[i].name.len && !d->headers[i].name.ptr) ||
            (d->headers[i].value.len && !d->headers[i].value.ptr))
            return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "headers[%zu]: NULL with a length",
                           i);
    if ((d->conversation_id.ptr &&
         (rc = sch_check_rule("conversation_id", &d->conversation_id, SCH_RULE_ID, err, errlen))) ||
        (d->turn_id.ptr &&
         (rc = sch_check_rule("turn_id", &d->turn_id, SCH_RULE_ID, err, errlen))) ||
        (d->worker.ptr && (rc = sch_check_rule("worker", &d->worker, SCH_RULE_ID, err, errlen))))
        return rc;
    return SCH_OK;
}

int sch_dead_encode(const sch_dead *d, sch_buf *out, char *err, size_t errlen) {
    sch_writer w;
    sch_str code;
    int rc;
    if (!d || !out)
        return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "dead letter or buffer is NULL");
    out->len = 0;
    code = d->error_name.ptr ? d->error_name : sch_str_c(sch_err_name(d->error_code));
    if ((rc = sch_dead_check(d, &code, err, errlen))) return rc;
    sch_w_open(&w, out);
    sch_w_map(&w, 8 + (d->timestamp_ms >= 0) + !!d->key.ptr + !!d->value.ptr +
                      !!d->conversation_id.ptr + !!d->turn_id.ptr + !!d->worker.ptr + !!d->dead_ms);
    sch_w_uint(&w, "v", SCH_VERSION);
    sch_w_str(&w, "reason", &d->reason);
    sch_w_str(&w, "error_code", &code);
    sch_w_str(&w, "topic", &d->topic);
    sch_w_int(&w, "partition", d->partition);
    sch_w_int(&w, "offset", d->offset);
    if (d->timestamp_ms >= 0) sch_w_int(&w, "timestamp_ms", d->timestamp_ms);
    if (d->key.ptr) sch_w_bin(&w, "key", &d->key);
    if (d->value.ptr) sch_w_bin(&w, "value", &d->value);
    sch_w_uint(&w, "value_size", d->value_size ? d->value_size : (uint64_t)d->value.len);
    sch_w_key(&w, "headers");
    msgpack_pack_array(&w.pk, d->n_headers);
    for (size_t i = 0; i < d->n_headers; i++) {
        msgpack_pack_array(&w.pk, 2);
        sch_w_name(&w, &d->headers[i].name);
        sch_w_bin(&w, NULL, &d->headers[i].value);
    }
    if (d->conversation_id.ptr) sch_w_str(&w, "conversation_id", &d->conversation_id);
    if (d->turn_id.ptr) sch_w_str(&w, "turn_id", &d->turn_id);
    if (d->worker.ptr) sch_w_str(&w, "worker", &d->worker);
    if (d->dead_ms) sch_w_uint(&w, "dead_ms", d->dead_ms);
    return sch_w_close(&w, err, errlen);
}
