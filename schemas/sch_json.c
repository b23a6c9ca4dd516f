/*
 * sch_json.c -- ChatTurns written as JSON, and JSON copies of worker output.
 *
 * Why.  Many producers (kcat, shell scripts, any language's JSON library)
 * can write JSON but not msgpack.  A ChatTurn whose Kafka `content-type` is
 * application/json carries the same fields as the msgpack record, written
 * as one JSON object (schemas/README.md section 4a).  A turn whose `accept`
 * header is application/json gets its TurnResult and TokenChunks as JSON.
 *
 * One set of rules.  A JSON turn is not validated by a second decoder: the
 * JSON text is parsed by jansson, converted value for value into msgpack
 * bytes, and those bytes go through sch_turn_decode.  So every field rule,
 * limit and error code (and their order) is the msgpack decoder's, and a
 * JSON turn can never be accepted where its msgpack twin would be refused.
 * The conversion is type-preserving: an integer literal stays an int
 * (msgpack's shortest form), a literal with a fraction or exponent becomes
 * float64 (so `"max_tokens": 16.0` is E_WRONG_TYPE, exactly like a float in
 * msgpack), strings stay str (JSON has no bin: text fields are always str),
 * null is nil (= absent), objects keep their document order.
 *
 * Hostile input.  Before jansson allocates anything, a pre-scan over the
 * bytes enforces the record's limits: max_total_bytes on the JSON text,
 * max_depth on bracket nesting (root object = 1, as in msgpack), and
 * max_objects on a lower bound of the value count (containers + commas,
 * each comma starting at least one more value), so a 4 MiB `[0,0,0,...]`
 * is refused without building two million jansson values.  The exact
 * object count is then checked again by sch_scan on the converted bytes.
 * jansson's parser is recursive but the pre-scan has already bounded the
 * depth at max_depth (<= SCH_MAX_DEPTH_CEILING), and so is the conversion.
 * Parse flags: JSON_REJECT_DUPLICATES (a key twice is E_DUPLICATE_KEY, as
 * in msgpack: jansson would otherwise keep the last silently),
 * JSON_DECODE_ANY (a JSON array or string root parses, then is E_NOT_MAP
 * with the same message as msgpack) and JSON_ALLOW_NUL (text may hold
 * U+0000, written \u0000).  jansson checks UTF-8 and refuses lone
 * surrogate escapes.  Its error codes map onto ours: premature end ->
 * E_TRUNCATED, data after the document -> E_TRAILING_BYTES, invalid UTF-8
 * -> E_BAD_UTF8, duplicate key -> E_DUPLICATE_KEY, an integer beyond int64
 * -> E_OUT_OF_RANGE (so a JSON `seed` is limited to 0..2^63-1), any other
 * syntax error -> E_BAD_JSON; the message carries jansson's text with the
 * line and column, ASCII-escaped like every codec message.  The converted
 * record may be a little larger than the JSON (a short real like 1.5
 * becomes a 9-byte float64), so the inner decode does not re-apply
 * max_total_bytes; the JSON bytes were already held to it.
 *
 * Output.  sch_msgpack_to_json writes any msgpack value as compact JSON
 * with a small writer of its own (jansson cannot hold integers above
 * 2^63-1, and the output is made from records parley encoded itself, so
 * there is nothing to parse): ints exact, floats with %.17g (always with a
 * '.' or exponent so they read back as reals), strings UTF-8-checked with
 * '"', '\\' and control characters escaped.  sch_result_encode_json and
 * sch_chunk_encode_json are the msgpack encoders followed by that
 * conversion, so the JSON output has exactly the msgpack record's fields.
 */
#include "sch_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------ JSON -> msgpack */

/* Bracket depth and a lower bound of the value count, outside strings. */
static int sch_json_prescan(const unsigned char *p, size_t len, const sch_limits *lim, char *err,
                            size_t errlen) {
    uint32_t max_depth = lim->max_depth;
    if (max_depth > SCH_MAX_DEPTH_CEILING) max_depth = SCH_MAX_DEPTH_CEILING;
    size_t depth = 0, objects = 0;
    bool in_str = false;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = p[i];
        if (in_str) {
            if (ch == '\\') i++;
            else if (ch == '"') in_str = false;
            continue;
        }
        switch (ch) {
        case '"': in_str = true; break;
        case '[':
        case '{':
            if (++depth > max_depth)
                return pl_errf(err, errlen, SCH_E_TOO_DEEP,
                               "JSON nesting deeper than max_depth %u at "
                               "byte %zu",
                               (unsigned)max_depth, i);
            /* a container is a value: count it like a comma */
            /* fallthrough */
        case ',':
            if (++objects > lim->max_objects)
                return pl_errf(err, errlen, SCH_E_TOO_MANY_OBJECTS,
                               "JSON holds more than max_objects %zu values", lim->max_objects);
            break;
        case ']':
        case '}':
            if (depth) depth--;
            break;
        default: break;
        }
    }
    return SCH_OK;
}

/* ASCII copy of jansson's message (it may quote input bytes). */
static void sch_json_ascii(char *dst, size_t n, const char *src) {
    size_t o = 0;
    for (; *src && o + 5 < n; src++) {
        unsigned char ch = (unsigned char)*src;
        if (ch >= 0x20 && ch < 0x7f) {
            dst[o++] = (char)ch;
        } else {
            snprintf(dst + o, n - o, "\\x%02x", ch);
            o += 4;
        }
    }
    dst[o] = 0;
}

static int sch_json_parse_error(const json_error_t *je, char *err, size_t errlen) {
    char text[JSON_ERROR_TEXT_LENGTH * 4 + 8];
    int code;
    sch_json_ascii(text, sizeof text, je->text);
    switch (json_error_code(je)) {
    case json_error_premature_end_of_input: code = SCH_E_TRUNCATED; break;
    case json_error_end_of_input_expected: code = SCH_E_TRAILING_BYTES; break;
    case json_error_invalid_utf8: code = SCH_E_BAD_UTF8; break;
    case json_error_duplicate_key: code = SCH_E_DUPLICATE_KEY; break;
    case json_error_numeric_overflow: code = SCH_E_OUT_OF_RANGE; break;
    case json_error_out_of_memory: code = SCH_E_NOMEM; break;
    default: code = SCH_E_BAD_JSON; break;
    }
    return pl_errf(err, errlen, code, "JSON line %d column %d: %s", je->line, je->column, text);
}

/* Pack v (depth already bounded by the pre-scan). */
static void sch_json_pack(msgpack_packer *pk, const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        msgpack_pack_map(pk, json_object_size(v));
        for (void *it = json_object_iter((json_t *)v); it;
             it = json_object_iter_next((json_t *)v, it)) {
            size_t kl = json_object_iter_key_len(it);
            msgpack_pack_str(pk, kl);
            msgpack_pack_str_body(pk, json_object_iter_key(it), kl);
            sch_json_pack(pk, json_object_iter_value(it));
        }
        break;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        msgpack_pack_array(pk, n);
        for (size_t i = 0; i < n; i++) sch_json_pack(pk, json_array_get(v, i));
        break;
    }
    case JSON_STRING: {
        size_t n = json_string_length(v);
        msgpack_pack_str(pk, n);
        msgpack_pack_str_body(pk, json_string_value(v), n);
        break;
    }
    case JSON_INTEGER: {
        json_int_t i = json_integer_value(v);
        if (i >= 0) msgpack_pack_uint64(pk, (uint64_t)i);
        else msgpack_pack_int64(pk, (int64_t)i);
        break;
    }
    case JSON_REAL: msgpack_pack_double(pk, json_real_value(v)); break;
    case JSON_TRUE: msgpack_pack_true(pk); break;
    case JSON_FALSE: msgpack_pack_false(pk); break;
    case JSON_NULL: msgpack_pack_nil(pk); break;
    }
}

int sch_json_to_msgpack(const void *json, size_t len, const sch_limits *lim, sch_buf *out,
                        char *err, size_t errlen) {
    sch_limits dl;
    json_error_t je;
    sch_writer w;
    int rc;
    if (!out) return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "out is NULL");
    out->len = 0;
    if (!json && len)
        return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "NULL buffer with length %zu", len);
    if (!lim) {
        sch_limits_default(&dl);
        lim = &dl;
    }
    if (len > lim->max_total_bytes)
        return pl_errf(err, errlen, SCH_E_RECORD_TOO_LARGE, "JSON record is %zu bytes (max %zu)",
                       len, lim->max_total_bytes);
    if (!len) return pl_errf(err, errlen, SCH_E_TRUNCATED, "JSON record is empty");
    if ((rc = sch_json_prescan(json, len, lim, err, errlen))) return rc;
    json_t *root =
        json_loadb(json, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY | JSON_ALLOW_NUL, &je);
    if (!root) return sch_json_parse_error(&je, err, errlen);
    sch_w_open(&w, out);
    sch_json_pack(&w.pk, root);
    json_decref(root);
    return sch_w_close(&w, err, errlen);
}

int sch_turn_decode_json(const void *buf, size_t len, const sch_limits *lim, sch_turn *out,
                         char *err, size_t errlen) {
    sch_limits l;
    sch_buf mp;
    int rc;
    if (!out) return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "out is NULL");
    memset(out, 0, sizeof *out);
    if (lim) l = *lim;
    else sch_limits_default(&l);
    sch_buf_init(&mp);
    rc = sch_json_to_msgpack(buf, len, &l, &mp, err, errlen);
    if (rc) {
        sch_buf_free(&mp);
        return rc;
    }
    l.max_total_bytes = mp.len; /* the JSON bytes were held to the limit */
    rc = sch_turn_decode(mp.data, mp.len, &l, out, err, errlen);
    sch_buf_free(&mp);
    return rc;
}

/* ------------------------------------------------------ msgpack -> JSON */

typedef struct sch_jw {
    sch_buf *out;  /* destination */
    int rc;        /* first error (0 = none) */
    char *err;     /* caller's message buffer */
    size_t errlen; /* its size */
} sch_jw;

static void sch_jw_put(sch_jw *j, const char *p, size_t n) {
    sch_buf *b = j->out;
    if (j->rc || !n) return;
    if (n > b->cap - b->len) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n) {
            if (cap > SIZE_MAX / 2) {
                j->rc = pl_errf(j->err, j->errlen, SCH_E_NOMEM, "out of memory");
                return;
            }
            cap *= 2;
        }
        char *d = realloc(b->data, cap);
        if (!d) {
            j->rc = pl_errf(j->err, j->errlen, SCH_E_NOMEM, "out of memory");
            return;
        }
        b->data = d;
        b->cap = cap;
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

static void sch_jw_str(sch_jw *j, const char *s, size_t n) {
    char esc[8];
    size_t from = 0;
    if (!n) { /* msgpack-c gives an empty str a NULL pointer */
        sch_jw_put(j, "\"\"", 2);
        return;
    }
    if (!sch_utf8_valid(s, n)) {
        if (!j->rc)
            j->rc = pl_errf(j->err, j->errlen, SCH_E_BAD_UTF8,
                            "str of %zu bytes is not UTF-8: no JSON form", n);
        return;
    }
    sch_jw_put(j, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *rep = NULL;
        if (ch == '"') rep = "\\\"";
        else if (ch == '\\') rep = "\\\\";
        else if (ch == '\n') rep = "\\n";
        else if (ch == '\r') rep = "\\r";
        else if (ch == '\t') rep = "\\t";
        else if (ch < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", ch);
            rep = esc;
        }
        if (!rep) continue;
        sch_jw_put(j, s + from, i - from);
        sch_jw_put(j, rep, strlen(rep));
        from = i + 1;
    }
    sch_jw_put(j, s + from, n - from);
    sch_jw_put(j, "\"", 1);
}

/* Depth is bounded by the caller's record (decoded by msgpack-c, whose
 * own stack stops at 32 levels). */
static void sch_jw_value(sch_jw *j, const msgpack_object *o) {
    char num[40];
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: sch_jw_put(j, "null", 4); break;
    case MSGPACK_OBJECT_BOOLEAN:
        if (o->via.boolean) sch_jw_put(j, "true", 4);
        else sch_jw_put(j, "false", 5);
        break;
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        snprintf(num, sizeof num, "%llu", (unsigned long long)o->via.u64);
        sch_jw_put(j, num, strlen(num));
        break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        snprintf(num, sizeof num, "%lld", (long long)o->via.i64);
        sch_jw_put(j, num, strlen(num));
        break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        if (!isfinite(o->via.f64)) {
            if (!j->rc)
                j->rc = pl_errf(j->err, j->errlen, SCH_E_OUT_OF_RANGE, "float %g has no JSON form",
                                o->via.f64);
            return;
        }
        snprintf(num, sizeof num, "%.17g", o->via.f64);
        if (!strpbrk(num, ".eE")) strcat(num, ".0");
        sch_jw_put(j, num, strlen(num));
        break;
    case MSGPACK_OBJECT_STR: sch_jw_str(j, o->via.str.ptr, o->via.str.size); break;
    case MSGPACK_OBJECT_ARRAY:
        sch_jw_put(j, "[", 1);
        for (uint32_t i = 0; i < o->via.array.size; i++) {
            if (i) sch_jw_put(j, ",", 1);
            sch_jw_value(j, &o->via.array.ptr[i]);
        }
        sch_jw_put(j, "]", 1);
        break;
    case MSGPACK_OBJECT_MAP:
        sch_jw_put(j, "{", 1);
        for (uint32_t i = 0; i < o->via.map.size; i++) {
            const msgpack_object *k = &o->via.map.ptr[i].key;
            if (i) sch_jw_put(j, ",", 1);
            if (k->type != MSGPACK_OBJECT_STR) {
                if (!j->rc)
                    j->rc = pl_errf(j->err, j->errlen, SCH_E_BAD_KEY,
                                    "map key is %s: JSON keys are strings", sch_type_name(k));
                return;
            }
            sch_jw_str(j, k->via.str.ptr, k->via.str.size);
            sch_jw_put(j, ":", 1);
            sch_jw_value(j, &o->via.map.ptr[i].val);
        }
        sch_jw_put(j, "}", 1);
        break;
    default:
        if (!j->rc)
            j->rc = pl_errf(j->err, j->errlen, SCH_E_WRONG_TYPE, "%s has no JSON form",
                            sch_type_name(o));
        break;
    }
}

int sch_msgpack_to_json(const void *buf, size_t len, sch_buf *out, char *err, size_t errlen) {
    msgpack_unpacked up;
    size_t off = 0;
    if (!out) return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "out is NULL");
    out->len = 0;
    if (!buf || !len) return pl_errf(err, errlen, SCH_E_TRUNCATED, "empty msgpack value");
    msgpack_unpacked_init(&up);
    msgpack_unpack_return r = msgpack_unpack_next(&up, buf, len, &off);
    if (r != MSGPACK_UNPACK_SUCCESS || off != len) {
        msgpack_unpacked_destroy(&up);
        return pl_errf(err, errlen, r == MSGPACK_UNPACK_NOMEM_ERROR ? SCH_E_NOMEM : SCH_E_MALFORMED,
                       "msgpack-c rejected the value (status %d)", (int)r);
    }
    sch_jw j = {out, 0, err, errlen};
    sch_jw_value(&j, &up.data);
    msgpack_unpacked_destroy(&up);
    if (j.rc) out->len = 0;
    return j.rc;
}

/* Replace the msgpack bytes in *b by their JSON text. */
static int sch_to_json_inplace(sch_buf *b, char *err, size_t errlen) {
    sch_buf j;
    sch_buf_init(&j);
    int rc = sch_msgpack_to_json(b->data, b->len, &j, err, errlen);
    sch_buf_free(b);
    if (rc) {
        sch_buf_free(&j);
        return rc;
    }
    *b = j;
    return SCH_OK;
}

int sch_result_encode_json(const sch_result *r, sch_buf *out, char *err, size_t errlen) {
    int rc = sch_result_encode(r, out, err, errlen);
    return rc ? rc : sch_to_json_inplace(out, err, errlen);
}

int sch_chunk_encode_json(const sch_chunk *c, sch_buf *out, char *err, size_t errlen) {
    int rc = sch_chunk_encode(c, out, err, errlen);
    return rc ? rc : sch_to_json_inplace(out, err, errlen);
}
