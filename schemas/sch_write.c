/*
 * sch_write.c -- the encoding half shared by all records: the output buffer
 * and thin wrappers around msgpack_packer.
 *
 * msgpack-c's packer writes through a callback; ours appends to an sch_buf,
 * growing it geometrically.  A failed allocation marks the writer failed and
 * every later write becomes a no-op, so record encoders can emit all their
 * fields unconditionally and check once in sch_w_close().  Numbers use the
 * smallest msgpack encoding (msgpack_pack_uint64 picks it), floats are
 * always float64 so values round-trip exactly.
 */
#include "sch_internal.h"

#include <stdlib.h>
#include <string.h>

void sch_buf_init(sch_buf *b) {
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
}

void sch_buf_free(sch_buf *b) {
    free(b->data);
    sch_buf_init(b);
}

static int sch_w_cb(void *data, const char *buf, size_t len) {
    sch_writer *w = data;
    sch_buf *b = w->out;
    if (w->failed) return -1;
    if (len > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < len) {
            if (cap > SIZE_MAX / 2) {
                w->failed = true;
                return -1;
            }
            cap *= 2;
        }
        char *d = realloc(b->data, cap);
        if (!d) {
            w->failed = true;
            return -1;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, buf, len);
    b->len += len;
    return 0;
}

void sch_w_open(sch_writer *w, sch_buf *out) {
    w->out = out;
    w->failed = false;
    out->len = 0;
    msgpack_packer_init(&w->pk, w, sch_w_cb);
}

void sch_w_map(sch_writer *w, size_t n) { msgpack_pack_map(&w->pk, n); }

void sch_w_key(sch_writer *w, const char *key) {
    if (key) msgpack_pack_str_with_body(&w->pk, key, strlen(key));
}

void sch_w_str(sch_writer *w, const char *key, const sch_str *s) {
    sch_w_key(w, key);
    msgpack_pack_str_with_body(&w->pk, s->len ? s->ptr : "", s->len);
}

void sch_w_name(sch_writer *w, const sch_str *s) {
    if (sch_utf8_valid(s->ptr, s->len))
        msgpack_pack_str_with_body(&w->pk, s->len ? s->ptr : "", s->len);
    else msgpack_pack_bin_with_body(&w->pk, s->ptr, s->len);
}

void sch_w_bin(sch_writer *w, const char *key, const sch_str *s) {
    sch_w_key(w, key);
    if (!s->ptr) msgpack_pack_nil(&w->pk);
    else msgpack_pack_bin_with_body(&w->pk, s->len ? s->ptr : "", s->len);
}

void sch_w_uint(sch_writer *w, const char *key, uint64_t v) {
    sch_w_key(w, key);
    msgpack_pack_uint64(&w->pk, v);
}

void sch_w_int(sch_writer *w, const char *key, int64_t v) {
    sch_w_key(w, key);
    msgpack_pack_int64(&w->pk, v);
}

void sch_w_double(sch_writer *w, const char *key, double v) {
    sch_w_key(w, key);
    msgpack_pack_double(&w->pk, v);
}

void sch_w_bool(sch_writer *w, const char *key, bool v) {
    sch_w_key(w, key);
    if (v) msgpack_pack_true(&w->pk);
    else msgpack_pack_false(&w->pk);
}

void sch_w_tokens(sch_writer *w, const char *key, const uint32_t *t, size_t n) {
    sch_w_key(w, key);
    msgpack_pack_array(&w->pk, n);
    for (size_t i = 0; i < n; i++) msgpack_pack_uint32(&w->pk, t[i]);
}

int sch_check_tokens(const char *path, const uint32_t *t, size_t n, char *err, size_t errlen) {
    if (n && !t)
        return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "%s: NULL with a count of %zu", path,
                       n);
    for (size_t i = 0; i < n; i++)
        if (t[i] > INT32_MAX)
            return pl_errf(err, errlen, SCH_E_OUT_OF_RANGE, "%s[%zu]: %u above 2147483647", path, i,
                           t[i]);
    return SCH_OK;
}

int sch_w_close(sch_writer *w, char *err, size_t errlen) {
    if (!w->failed) return SCH_OK;
    w->out->len = 0;
    return pl_errf(err, errlen, SCH_E_NOMEM, "out of memory encoding");
}
