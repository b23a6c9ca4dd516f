/*
 * sch_read.c -- the decoding half shared by all records: limits, the
 * scan-then-parse entry, schema-map checks and the typed field getters.
 *
 * Fields are looked up by linear search in the map's key/value array: a
 * schema map holds at most SCH_MAX_MAP_FIELDS entries (checked first), so a
 * lookup costs a few dozen short memcmp's and needs no hashing.  The same
 * bound makes the pairwise duplicate-key check cheap (<= 2016 comparisons of
 * keys of <= 64 bytes).  A field whose value is nil is treated as absent, so
 * writers that emit `null` for unset optionals are accepted.
 */
#include "sch_internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

void sch_limits_default(sch_limits *lim) {
    lim->max_total_bytes = 4u << 20;
    lim->max_depth = 16;
    lim->max_objects = 1u << 19;
    lim->max_messages = 4096;
    lim->max_content_bytes = 256u << 10;
    lim->max_stop = 16;
    lim->max_stop_bytes = 256;
    lim->max_tokens = 32768;
    lim->max_prompt_tokens = 131072;
    lim->max_id_bytes = 256;
    lim->max_text_bytes = 4096;
    lim->max_headers = 64;
    lim->max_constraint_bytes = 64u << 10;
}

sch_str sch_str_c(const char *s) {
    sch_str r = {s, s ? strlen(s) : 0};
    return r;
}

const char *sch_type_name(const msgpack_object *o) {
    switch (o->type) {
    case MSGPACK_OBJECT_NIL: return "nil";
    case MSGPACK_OBJECT_BOOLEAN: return "bool";
    case MSGPACK_OBJECT_POSITIVE_INTEGER: return "uint";
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: return "negative int";
    case MSGPACK_OBJECT_FLOAT32: return "float32";
    case MSGPACK_OBJECT_FLOAT64: return "float64";
    case MSGPACK_OBJECT_STR: return "str";
    case MSGPACK_OBJECT_ARRAY: return "array";
    case MSGPACK_OBJECT_MAP: return "map";
    case MSGPACK_OBJECT_BIN: return "bin";
    case MSGPACK_OBJECT_EXT: return "ext";
    }
    return "unknown";
}

int sch_parse(const void *buf, size_t len, const sch_limits *lim, msgpack_unpacked *up, char *err,
              size_t errlen) {
    size_t off = 0;
    int rc;
    if (!buf && len)
        return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "NULL buffer with length %zu", len);
    rc = sch_scan(buf, len, lim, err, errlen);
    if (rc) return rc;
    msgpack_unpacked_init(up);
    msgpack_unpack_return r = msgpack_unpack_next(up, buf, len, &off);
    if ((r != MSGPACK_UNPACK_SUCCESS && r != MSGPACK_UNPACK_EXTRA_BYTES) || off != len ||
        up->data.type != MSGPACK_OBJECT_MAP) {
        msgpack_unpacked_destroy(up);
        if (r == MSGPACK_UNPACK_NOMEM_ERROR)
            return pl_errf(err, errlen, SCH_E_NOMEM, "out of memory parsing a %zu-byte record",
                           len);
        return pl_errf(err, errlen, SCH_E_MALFORMED, "msgpack-c rejected the record (status %d)",
                       (int)r);
    }
    return SCH_OK;
}

int sch_decode_record(const void *buf, size_t len, const sch_limits *lim, sch_read_fn read,
                      void *out, size_t out_size, struct msgpack_zone **zone_slot, char *err,
                      size_t errlen) {
    sch_limits dl;
    msgpack_unpacked up;
    sch_ctx c = {0};
    int rc;
    if (!out) return pl_errf(err, errlen, SCH_E_INVALID_ARGUMENT, "out is NULL");
    memset(out, 0, out_size);
    if (!lim) {
        sch_limits_default(&dl);
        lim = &dl;
    }
    if ((rc = sch_parse(buf, len, lim, &up, err, errlen))) return rc;
    c.lim = lim;
    c.err = err;
    c.errlen = errlen;
    /* one chunk usually holds every copy: strings are at most len bytes */
    c.zone = msgpack_zone_new(len + 1024);
    if (!c.zone) {
        rc = pl_errf(err, errlen, SCH_E_NOMEM, "out of memory");
        goto err;
    }
    if ((rc = read(&c, &up.data, out))) goto err;
    msgpack_unpacked_destroy(&up);
    *zone_slot = c.zone;
    return SCH_OK;
err:
    msgpack_unpacked_destroy(&up);
    if (c.zone) msgpack_zone_free(c.zone);
    memset(out, 0, out_size);
    return rc;
}

/* "path.key", "key" at the root, or "path" when key is NULL. */
static const char *sch_join(char *dst, size_t n, const char *path, const char *key) {
    if (!key) snprintf(dst, n, "%s", path && *path ? path : "record");
    else if (!path || !*path) snprintf(dst, n, "%s", key);
    else snprintf(dst, n, "%s.%s", path, key);
    return dst;
}

int sch_map_check(sch_ctx *c, const msgpack_object *o, const char *path) {
    char p[128], q[200];
    if (o->type != MSGPACK_OBJECT_MAP)
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "%s: expected map, got %s",
                       sch_join(p, sizeof p, path, NULL), sch_type_name(o));
    const msgpack_object_kv *kv = o->via.map.ptr;
    uint32_t n = o->via.map.size;
    if (n > SCH_MAX_MAP_FIELDS)
        return pl_errf(c->err, c->errlen, SCH_E_TOO_MANY_FIELDS, "%s: map has %u entries (max %d)",
                       sch_join(p, sizeof p, path, NULL), n, SCH_MAX_MAP_FIELDS);
    for (uint32_t i = 0; i < n; i++) {
        const msgpack_object *k = &kv[i].key;
        if (k->type != MSGPACK_OBJECT_STR || k->via.str.size == 0 ||
            k->via.str.size > SCH_MAX_KEY_BYTES) {
            if (k->type == MSGPACK_OBJECT_STR)
                return pl_errf(
                    c->err, c->errlen, SCH_E_BAD_KEY, "%s: key %u is a str of %u bytes (1..%d)",
                    sch_join(p, sizeof p, path, NULL), i, k->via.str.size, SCH_MAX_KEY_BYTES);
            return pl_errf(c->err, c->errlen, SCH_E_BAD_KEY, "%s: key %u is %s, expected str",
                           sch_join(p, sizeof p, path, NULL), i, sch_type_name(k));
        }
        for (uint32_t j = 0; j < i; j++) {
            const msgpack_object *k2 = &kv[j].key;
            if (k2->via.str.size == k->via.str.size &&
                !memcmp(k2->via.str.ptr, k->via.str.ptr, k->via.str.size)) {
                sch_quote(q, sizeof q, k->via.str.ptr, k->via.str.size);
                return pl_errf(c->err, c->errlen, SCH_E_DUPLICATE_KEY, "%s: key %s appears twice",
                               sch_join(p, sizeof p, path, NULL), q);
            }
        }
    }
    return SCH_OK;
}

const msgpack_object *sch_map_get(const msgpack_object *map, const char *key) {
    size_t klen = strlen(key);
    const msgpack_object_kv *kv = map->via.map.ptr;
    for (uint32_t i = 0; i < map->via.map.size; i++) {
        const msgpack_object *k = &kv[i].key;
        if (k->via.str.size == klen && !memcmp(k->via.str.ptr, key, klen))
            return kv[i].val.type == MSGPACK_OBJECT_NIL ? NULL : &kv[i].val;
    }
    return NULL;
}

/* Common absent-field handling; *o is the value or NULL. */
static int sch_field(sch_ctx *c, const msgpack_object *map, const char *path, const char *key,
                     bool required, const msgpack_object **o, bool *present) {
    char p[128];
    *o = sch_map_get(map, key);
    if (present) *present = *o != NULL;
    if (!*o && required)
        return pl_errf(c->err, c->errlen, SCH_E_MISSING_FIELD, "%s: required field missing",
                       sch_join(p, sizeof p, path, key));
    return SCH_OK;
}

int sch_get_uint(sch_ctx *c, const msgpack_object *map, const char *path, const char *key,
                 bool required, uint64_t min, uint64_t max, uint64_t *out, bool *present) {
    const msgpack_object *o;
    char p[128];
    int rc = sch_field(c, map, path, key, required, &o, present);
    if (rc || !o) return rc;
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        return pl_errf(c->err, c->errlen, SCH_E_OUT_OF_RANGE,
                       "%s: %lld is negative (range %llu..%llu)", sch_join(p, sizeof p, path, key),
                       (long long)o->via.i64, (unsigned long long)min, (unsigned long long)max);
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "%s: expected uint, got %s",
                       sch_join(p, sizeof p, path, key), sch_type_name(o));
    if (o->via.u64 < min || o->via.u64 > max)
        return pl_errf(c->err, c->errlen, SCH_E_OUT_OF_RANGE, "%s: %llu outside %llu..%llu",
                       sch_join(p, sizeof p, path, key), (unsigned long long)o->via.u64,
                       (unsigned long long)min, (unsigned long long)max);
    *out = o->via.u64;
    return SCH_OK;
}

int sch_get_int(sch_ctx *c, const msgpack_object *map, const char *path, const char *key,
                bool required, int64_t min, int64_t max, int64_t *out, bool *present) {
    const msgpack_object *o;
    char p[128];
    int rc = sch_field(c, map, path, key, required, &o, present);
    if (rc || !o) return rc;
    if (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
        if (o->via.u64 > (uint64_t)max)
            return pl_errf(c->err, c->errlen, SCH_E_OUT_OF_RANGE, "%s: %llu above %lld",
                           sch_join(p, sizeof p, path, key), (unsigned long long)o->via.u64,
                           (long long)max);
        *out = (int64_t)o->via.u64;
    } else if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER) {
        *out = o->via.i64;
    } else {
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "%s: expected int, got %s",
                       sch_join(p, sizeof p, path, key), sch_type_name(o));
    }
    if (*out < min || *out > max)
        return pl_errf(c->err, c->errlen, SCH_E_OUT_OF_RANGE, "%s: %lld outside %lld..%lld",
                       sch_join(p, sizeof p, path, key), (long long)*out, (long long)min,
                       (long long)max);
    return SCH_OK;
}

int sch_get_number(sch_ctx *c, const msgpack_object *map, const char *path, const char *key,
                   bool required, double min, bool min_open, double max, double *out,
                   bool *present) {
    const msgpack_object *o;
    char p[128];
    double v;
    int rc = sch_field(c, map, path, key, required, &o, present);
    if (rc || !o) return rc;
    switch (o->type) {
    case MSGPACK_OBJECT_POSITIVE_INTEGER: v = (double)o->via.u64; break;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER: v = (double)o->via.i64; break;
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64: v = o->via.f64; break;
    default:
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "%s: expected number, got %s",
                       sch_join(p, sizeof p, path, key), sch_type_name(o));
    }
    if (!isfinite(v) || v < min || (min_open && v == min) || v > max)
        return pl_errf(c->err, c->errlen, SCH_E_OUT_OF_RANGE, "%s: %g outside %c%g, %g]",
                       sch_join(p, sizeof p, path, key), v, min_open ? '(' : '[', min, max);
    *out = v;
    return SCH_OK;
}

int sch_get_bool(sch_ctx *c, const msgpack_object *map, const char *path, const char *key,
                 bool required, bool *out, bool *present) {
    const msgpack_object *o;
    char p[128];
    int rc = sch_field(c, map, path, key, required, &o, present);
    if (rc || !o) return rc;
    if (o->type != MSGPACK_OBJECT_BOOLEAN)
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "%s: expected bool, got %s",
                       sch_join(p, sizeof p, path, key), sch_type_name(o));
    *out = o->via.boolean;
    return SCH_OK;
}

int sch_take_str(sch_ctx *c, const msgpack_object *o, const char *path, sch_rule rule, size_t max,
                 int too_long, sch_str *out) {
    const char *src;
    size_t len;
    if (o->type == MSGPACK_OBJECT_STR) {
        src = o->via.str.ptr;
        len = o->via.str.size;
    } else if (o->type == MSGPACK_OBJECT_BIN && rule == SCH_RULE_BYTES) {
        src = o->via.bin.ptr;
        len = o->via.bin.size;
    } else {
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "%s: expected %s, got %s", path,
                       rule == SCH_RULE_BYTES ? "bin or str" : "str", sch_type_name(o));
    }
    if (len > max)
        return pl_errf(c->err, c->errlen, too_long, "%s: %zu bytes exceeds the limit of %zu", path,
                       len, max);
    sch_str s = {src, len};
    int rc = sch_check_rule(path, &s, rule, c->err, c->errlen);
    if (rc) return rc;
    char *d = msgpack_zone_malloc_no_align(c->zone, len + 1);
    if (!d) return pl_errf(c->err, c->errlen, SCH_E_NOMEM, "out of memory");
    if (len) memcpy(d, src, len);
    d[len] = 0;
    out->ptr = d;
    out->len = len;
    return SCH_OK;
}

int sch_get_str(sch_ctx *c, const msgpack_object *map, const char *path, const char *key,
                bool required, sch_rule rule, size_t max, int too_long, sch_str *out) {
    const msgpack_object *o;
    char p[128];
    int rc = sch_field(c, map, path, key, required, &o, NULL);
    if (rc || !o) return rc;
    return sch_take_str(c, o, sch_join(p, sizeof p, path, key), rule, max, too_long, out);
}

int sch_take_tokens(sch_ctx *c, const msgpack_object *o, const char *path, size_t max, int too_many,
                    const uint32_t **out, size_t *n) {
    if (o->type != MSGPACK_OBJECT_ARRAY)
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "%s: expected array, got %s", path,
                       sch_type_name(o));
    size_t cnt = o->via.array.size;
    if (cnt > max)
        return pl_errf(c->err, c->errlen, too_many, "%s: %zu tokens exceeds the limit of %zu", path,
                       cnt, max);
    *out = NULL;
    *n = 0;
    if (!cnt) return SCH_OK;
    uint32_t *t = msgpack_zone_malloc(c->zone, cnt * sizeof *t);
    if (!t) return pl_errf(c->err, c->errlen, SCH_E_NOMEM, "out of memory");
    for (size_t i = 0; i < cnt; i++) {
        const msgpack_object *e = &o->via.array.ptr[i];
        if (e->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ||
            (e->type == MSGPACK_OBJECT_POSITIVE_INTEGER && e->via.u64 > INT32_MAX))
            return pl_errf(c->err, c->errlen, SCH_E_OUT_OF_RANGE,
                           "%s[%zu]: token id outside 0..2147483647", path, i);
        if (e->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
            return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "%s[%zu]: expected uint, got %s",
                           path, i, sch_type_name(e));
        t[i] = (uint32_t)e->via.u64;
    }
    *out = t;
    *n = cnt;
    return SCH_OK;
}

int sch_get_version(sch_ctx *c, const msgpack_object *root, uint32_t *v) {
    const msgpack_object *o;
    int rc = sch_field(c, root, "", "v", true, &o, NULL);
    if (rc) return rc;
    if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER ||
        (o->type == MSGPACK_OBJECT_POSITIVE_INTEGER && o->via.u64 != SCH_VERSION)) {
        if (o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
            return pl_errf(c->err, c->errlen, SCH_E_UNSUPPORTED_VERSION,
                           "v: %lld is not a version (this reader reads "
                           "major %d)",
                           (long long)o->via.i64, SCH_VERSION);
        return pl_errf(c->err, c->errlen, SCH_E_UNSUPPORTED_VERSION,
                       "v: major version %llu not supported (this reader "
                       "reads major %d)",
                       (unsigned long long)o->via.u64, SCH_VERSION);
    }
    if (o->type != MSGPACK_OBJECT_POSITIVE_INTEGER)
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE, "v: expected uint, got %s",
                       sch_type_name(o));
    *v = SCH_VERSION;
    return SCH_OK;
}

/* A map's required `finish_reason` (a TurnResult's, or a choice's). */
int sch_finish_take(sch_ctx *c, const msgpack_object *map, const char *path, sch_finish *out) {
    char q[200];
    const char *dot = *path ? "." : "";
    const msgpack_object *o = sch_map_get(map, "finish_reason");
    if (!o)
        return pl_errf(c->err, c->errlen, SCH_E_MISSING_FIELD,
                       "%s%sfinish_reason: required field missing", path, dot);
    if (o->type != MSGPACK_OBJECT_STR)
        return pl_errf(c->err, c->errlen, SCH_E_WRONG_TYPE,
                       "%s%sfinish_reason: expected str, got %s", path, dot, sch_type_name(o));
    for (int k = 0; sch_finish_name((sch_finish)k); k++) {
        const char *name = sch_finish_name((sch_finish)k);
        if (o->via.str.size == strlen(name) && !memcmp(o->via.str.ptr, name, o->via.str.size)) {
            *out = (sch_finish)k;
            return SCH_OK;
        }
    }
    sch_quote(q, sizeof q, o->via.str.ptr, o->via.str.size);
    return pl_errf(c->err, c->errlen, SCH_E_BAD_VALUE,
                   "%s%sfinish_reason: %s is not stop, length, expired, error or cancelled", path,
                   dot, q);
}

int sch_get_turn_head(sch_ctx *c, const msgpack_object *root, uint32_t *v, sch_str *conversation_id,
                      sch_str *turn_id) {
    const sch_limits *lim = c->lim;
    int rc;
    if ((rc = sch_map_check(c, root, "")) || (rc = sch_get_version(c, root, v)) ||
        (rc = sch_get_str(c, root, "", "conversation_id", true, SCH_RULE_ID, lim->max_id_bytes,
                          SCH_E_STRING_TOO_LONG, conversation_id)) ||
        (rc = sch_get_str(c, root, "", "turn_id", true, SCH_RULE_ID, lim->max_id_bytes,
                          SCH_E_STRING_TOO_LONG, turn_id)))
        return rc;
    return SCH_OK;
}
