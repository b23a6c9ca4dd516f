/*
 * jinja_json.c -- JSON in and out of the interpreter: a render's context
 * is read with jansson (the parser schemas/ already uses; objects keep
 * their key order), and the tojson filter writes json.dumps' text with
 * transformers' settings (ensure_ascii=False, separators ", " / ": ", or
 * "," / ": " with an indent; sort_keys on request).
 */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "jinja_internal.h"

static int bputs(jj_buf *b, const char *s) { return jj_buf_put(b, s, strlen(s)); }

static int json_str(jj_buf *b, const char *s, size_t n) {
    int rc = bputs(b, "\"");
    size_t run = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        unsigned char ch = (unsigned char)s[i];
        const char *esc = NULL;
        char tmp[8];
        switch (ch) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (ch < 0x20) {
                snprintf(tmp, sizeof tmp, "\\u%04x", ch);
                esc = tmp;
            }
        }
        if (esc) {
            rc = jj_buf_put(b, s + i - run, run);
            run = 0;
            if (!rc) rc = bputs(b, esc);
        } else run++;
    }
    if (!rc) rc = jj_buf_put(b, s + n - run, run);
    return rc ? rc : bputs(b, "\"");
}

static int json_nl(jj_buf *b, int indent, int level) {
    int rc = bputs(b, "\n");
    for (int i = 0; i < indent * level && !rc; i++) rc = bputs(b, " ");
    return rc;
}

int jj_tojson(jj_buf *b, jj_val v, int indent, int level, bool sort) {
    int rc = 0;
    if (level > JJ_MAX_NEST)
        return jj_fail(b->c, ENG_JINJA_ELIMIT, "tojson: value nested too deeply");
    switch (v.kind) {
    case JV_NONE: return bputs(b, "null");
    case JV_BOOL: return bputs(b, v.u.b ? "true" : "false");
    case JV_INT:
    case JV_FLOAT: return jj_num_str(b, v);
    case JV_STR: return json_str(b, v.u.s->s, v.u.s->n);
    case JV_LIST:
        if (!v.u.l->n) return bputs(b, "[]");
        rc = bputs(b, "[");
        for (size_t i = 0; i < v.u.l->n && !rc; i++) {
            if (i) rc = bputs(b, indent >= 0 ? "," : ", ");
            if (!rc && indent >= 0) rc = json_nl(b, indent, level + 1);
            if (!rc) rc = jj_tojson(b, v.u.l->v[i], indent, level + 1, sort);
        }
        if (!rc && indent >= 0) rc = json_nl(b, indent, level);
        return rc ? rc : bputs(b, "]");
    case JV_DICT: {
        jj_dict *d = v.u.d;
        if (!d->n) return bputs(b, "{}");
        size_t *ord = jj_alloc(b->c->ar, d->n * sizeof *ord);
        if (!ord) return jj_fail(b->c, ENG_JINJA_ELIMIT, "render memory limit reached");
        for (size_t i = 0; i < d->n; i++) ord[i] = i;
        for (size_t i = 1; sort && i < d->n; i++) /* insertion sort by key */
            for (size_t j = i;
                 j > 0 && d->k[ord[j]].kind == JV_STR && d->k[ord[j - 1]].kind == JV_STR &&
                 strcmp(d->k[ord[j]].u.s->s, d->k[ord[j - 1]].u.s->s) < 0;
                 j--) {
                size_t t = ord[j];
                ord[j] = ord[j - 1];
                ord[j - 1] = t;
            }
        rc = bputs(b, "{");
        for (size_t i = 0; i < d->n && !rc; i++) {
            jj_val k = d->k[ord[i]];
            if (i) rc = bputs(b, indent >= 0 ? "," : ", ");
            if (!rc && indent >= 0) rc = json_nl(b, indent, level + 1);
            if (rc) break;
            if (k.kind == JV_STR) rc = json_str(b, k.u.s->s, k.u.s->n);
            else {
                jj_val ks = jj_to_str(b->c, k);
                rc = ks.kind == JV_STR ? json_str(b, ks.u.s->s, ks.u.s->n) : ENG_JINJA_ELIMIT;
            }
            if (!rc) rc = bputs(b, ": ");
            if (!rc) rc = jj_tojson(b, d->v[ord[i]], indent, level + 1, sort);
        }
        if (!rc && indent >= 0) rc = json_nl(b, indent, level);
        return rc ? rc : bputs(b, "}");
    }
    default:
        return jj_fail(b->c, ENG_JINJA_ERENDER, "Object of type %s is not JSON serializable",
                       jj_type_name(v));
    }
}

/* ------------------------------------------------------------- JSON in */

static int from_json(jj_ctx *c, json_t *j, jj_val *out, int depth) {
    if (depth > 100) return jj_fail(c, ENG_JINJA_ELIMIT, "context JSON nested too deeply");
    switch (json_typeof(j)) {
    case JSON_NULL: *out = jj_none(); return 0;
    case JSON_TRUE: *out = jj_bool(true); return 0;
    case JSON_FALSE: *out = jj_bool(false); return 0;
    case JSON_INTEGER: *out = jj_int(json_integer_value(j)); return 0;
    case JSON_REAL: *out = (jj_val){.kind = JV_FLOAT, .u.f = json_real_value(j)}; return 0;
    case JSON_STRING:
        *out = jj_strn(c->ar, json_string_value(j), json_string_length(j));
        return out->kind == JV_STR ? 0
                                   : jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
    case JSON_ARRAY: {
        *out = jj_list_new(c->ar);
        for (size_t i = 0; out->kind == JV_LIST && i < json_array_size(j); i++) {
            jj_val v;
            if (from_json(c, json_array_get(j, i), &v, depth + 1)) return c->rc;
            if (jj_list_push(c->ar, out->u.l, v)) break;
        }
        return c->ar->failed ? jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached") : 0;
    }
    case JSON_OBJECT: {
        const char *k;
        json_t *jv;
        *out = jj_dict_new(c->ar);
        json_object_foreach(j, k, jv) {
            jj_val v;
            if (out->kind != JV_DICT || from_json(c, jv, &v, depth + 1)) break;
            if (jj_dict_set(c->ar, out->u.d, jj_cstr(c->ar, k), v)) break;
        }
        if (c->rc) return c->rc;
        return c->ar->failed ? jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached") : 0;
    }
    }
    return jj_fail(c, ENG_JINJA_EINVAL, "unknown JSON value");
}

int jj_from_json(jj_ctx *c, const char *json, size_t len, jj_val *out) {
    json_error_t je;
    json_t *j = json_loadb(json, len, JSON_ALLOW_NUL, &je);
    if (!j)
        return jj_fail(c, ENG_JINJA_EINVAL, "context is not JSON: %s (line %d)", je.text, je.line);
    int rc = json_is_object(j) ? from_json(c, j, out, 0)
                               : jj_fail(c, ENG_JINJA_EINVAL, "context JSON must be an object");
    json_decref(j);
    return rc;
}
