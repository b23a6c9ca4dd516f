/*
 * jinja_filter.c -- the filters of the subset, each as jinja2 3.1 defines
 * it (tojson as transformers replaces it: json.dumps, ensure_ascii=False).
 * An unknown filter name is ENG_JINJA_EUNSUPPORTED naming it.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"
#include "tok_internal.h"

#define NOMEM(c) jj_fail((c), ENG_JINJA_ELIMIT, "render memory limit reached")

/* Keyword argument `name`, else positional argument pos (0 = the value). */
static jj_val *arg(jj_val *args, size_t nargs, const char **kw, size_t pos, const char *name) {
    for (size_t i = 1; kw && i < nargs; i++)
        if (kw[i] && !strcmp(kw[i], name)) return &args[i];
    size_t p = 0;
    for (size_t i = 0; i < nargs; i++) {
        if (kw && kw[i]) continue;
        if (p++ == pos) return &args[i];
    }
    return NULL;
}

static int need_str(jj_ctx *c, const char *what, jj_val v, jj_val *out) {
    if (v.kind == JV_UNDEF) v = jj_strn(c->ar, "", 0);
    *out = jj_to_str(c, v);
    return out->kind == JV_STR ? 0 : (c->rc ? c->rc : NOMEM(c));
}

static jj_val strip(jj_ctx *c, jj_val s) {
    size_t b = 0, e = s.u.s->n;
    size_t k;
    while (b < e && (k = jj_space_fwd(s.u.s->s, e, b))) b += k;
    while (e > b && (k = jj_space_back(s.u.s->s + b, e - b))) e -= k;
    return jj_strn(c->ar, s.u.s->s + b, e - b);
}

static const jj_case_entry *case_find(uint32_t cp) {
    int lo = 0, hi = jj_case_n_one - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (jj_case_one[mid].cp == cp) return &jj_case_one[mid];
        if (jj_case_one[mid].cp < cp) lo = mid + 1;
        else hi = mid - 1;
    }
    return NULL;
}

static int put_cp(jj_buf *b, uint32_t cp) {
    char o[4];
    size_t n;
    if (cp < 0x80) {
        o[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6), o[1] = (char)(0x80 | (cp & 63));
        n = 2;
    } else if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 63)),
        o[2] = (char)(0x80 | (cp & 63));
        n = 3;
    } else {
        o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 63));
        o[2] = (char)(0x80 | (cp >> 6 & 63)), o[3] = (char)(0x80 | (cp & 63));
        n = 4;
    }
    return jj_buf_put(b, o, n);
}

/* Append cp upper- or lower-cased as Python maps it (jinja_case.c). */
static int put_cased(jj_buf *b, uint32_t cp, bool up) {
    const jj_case_entry *e = case_find(cp);
    if (e && (up ? e->up : e->lo)) return put_cp(b, up ? e->up : e->lo);
    for (int i = 0; e && i < jj_case_n_multi; i++)
        if (jj_case_multi[i].cp == cp) {
            const char *m = up ? jj_case_multi[i].up : jj_case_multi[i].lo;
            if (*m) return jj_buf_put(b, m, strlen(m));
        }
    return put_cp(b, cp);
}

/* Case mapping with Python's per-code-point tables: JJ_CASE_* modes.
 * Bytes that are not UTF-8 pass through. */
jj_val jj_case_map(jj_ctx *c, jj_val s, int mode) {
    jj_buf b = {.c = c};
    const char *p = s.u.s->s;
    size_t n = s.u.s->n;
    bool start = true;
    for (size_t i = 0; i < n && !c->rc;) {
        uint32_t cp;
        size_t bad, k = (size_t)tok_utf8_decode((const uint8_t *)p + i, n - i, &cp, &bad);
        if (!k) {
            jj_buf_put(&b, p + i, bad ? bad : 1);
            i += bad ? bad : 1;
            start = mode != 3;
            continue;
        }
        bool up = mode == 1 || (mode == 2 && i == 0) || (mode >= 3 && start);
        put_cased(&b, cp, up);
        if (mode == 3) /* str.title(): a cased character continues a word */
            start = !case_find(cp);
        else if (mode == 4) /* jinja2's |title: words start after - ( { [ < or whitespace */
            start = (cp < 0x80 && strchr("-({[<", (int)cp) && cp) || jj_space_fwd(p, n, i);
        i += k;
    }
    return c->rc ? (jj_val){.kind = JV_UNDEF} : jj_buf_val(&b);
}

static int indent(jj_ctx *c, jj_val s, jj_val *w, jj_val *first, jj_val *blank, jj_val *out) {
    jj_buf ind = {.c = c}, b = {.c = c};
    if (w && w->kind == JV_STR) jj_buf_put(&ind, w->u.s->s, w->u.s->n);
    else
        for (long long i = 0; i < (w && w->kind == JV_INT ? w->u.i : 4) && i < 1024; i++)
            jj_buf_put(&ind, " ", 1);
    const char *p = s.u.s->s, *end = p + s.u.s->n;
    bool bl = blank && jj_truthy(*blank);
    if (first && jj_truthy(*first) && ind.n) jj_buf_put(&b, ind.p, ind.n);
    for (size_t line = 0; p <= end && !c->rc; line++) {
        const char *q = p;
        while (q < end && *q != '\n' && *q != '\r') q++;
        /* (s + "\n").splitlines(): every piece of s, an empty last one too */
        if (line) {
            jj_buf_put(&b, "\n", 1);
            if ((bl || q > p) && ind.n) jj_buf_put(&b, ind.p, ind.n);
        }
        jj_buf_put(&b, p, (size_t)(q - p));
        if (q < end && *q == '\r' && q + 1 < end && q[1] == '\n') q++;
        p = q + 1;
    }
    if (c->rc) return c->rc;
    *out = jj_buf_val(&b);
    return 0;
}

static int replace(jj_ctx *c, jj_val s, jj_val *old, jj_val *new, jj_val *count, jj_val *out) {
    if (!old || !new || old->kind != JV_STR || new->kind != JV_STR)
        return jj_fail(c, ENG_JINJA_ERENDER, "TypeError: replace() needs two strings");
    long long max = count && count->kind == JV_INT ? count->u.i : -1;
    jj_buf b = {.c = c};
    const jj_str *h = s.u.s, *o = old->u.s;
    size_t i = 0;
    if (o->n == 0) { /* Python inserts between every character */
        jj_list *chars;
        if (jj_iter_list(c, s, &chars)) return c->rc;
        for (size_t k = 0; k <= chars->n; k++) {
            if (max < 0 || (long long)k < max) jj_buf_put(&b, new->u.s->s, new->u.s->n);
            if (k < chars->n) jj_buf_put(&b, chars->v[k].u.s->s, chars->v[k].u.s->n);
        }
    } else {
        while (i < h->n) {
            if (max != 0 && i + o->n <= h->n && !memcmp(h->s + i, o->s, o->n)) {
                jj_buf_put(&b, new->u.s->s, new->u.s->n);
                i += o->n;
                if (max > 0) max--;
            } else jj_buf_put(&b, h->s + i++, 1);
        }
    }
    if (c->rc) return c->rc;
    *out = jj_buf_val(&b);
    return 0;
}

/* select/reject/selectattr/rejectattr/map over a list. */
static int seq_filter(jj_ctx *c, jj_scope *sc, const char *name, jj_val *args, size_t nargs,
                      const char **kw, jj_val *out) {
    jj_list *src;
    bool attr = strstr(name, "attr") != NULL, rej = name[0] == 'r', map = name[0] == 'm';
    jj_val l = jj_list_new(c->ar);
    if (l.kind != JV_LIST) return NOMEM(c);
    if (!jj_truthy(args[0])) /* jinja2: `if value:` before iterating (None gives nothing) */
        return *out = l, 0;
    if (jj_iter_list(c, args[0], &src)) return c->rc;
    jj_val *attrname = map    ? arg(args, nargs, kw, 99, "attribute")
                       : attr ? arg(args, nargs, kw, 1, "")
                              : NULL;
    jj_val *dflt = map ? arg(args, nargs, kw, 99, "default") : NULL;
    size_t first = attr ? 2 : 1; /* the test or filter name's position */
    if (map && !attrname && nargs < 2)
        return jj_fail(c, ENG_JINJA_ERENDER, "map needs a filter name or attribute=");
    for (size_t i = 0; i < src->n; i++) {
        jj_val item = src->v[i], v = item;
        if (attrname) {
            if (attrname->kind != JV_STR)
                return jj_fail(c, ENG_JINJA_ERENDER, "attribute name must be a string");
            jj_val *f = item.kind == JV_DICT
                            ? jj_dict_get(item.u.d, attrname->u.s->s, attrname->u.s->n)
                            : NULL;
            v = f ? *f : jj_undef(NULL);
            if (map && !f && dflt) v = *dflt;
        }
        if (map) {
            if (!attrname) {
                jj_val *fa = jj_alloc(c->ar, nargs * sizeof *fa);
                if (!fa) return NOMEM(c);
                fa[0] = item;
                for (size_t k = 2; k < nargs; k++) fa[k - 1] = args[k];
                if (args[1].kind != JV_STR ||
                    jj_filter(c, sc, args[1].u.s->s, fa, nargs - 1, kw ? kw + 1 : NULL, &v))
                    return c->rc ? c->rc : jj_fail(c, ENG_JINJA_ERENDER, "map: bad filter name");
            }
            if (jj_list_push(c->ar, l.u.l, v)) return NOMEM(c);
            continue;
        }
        bool keep;
        if (nargs > first) {
            if (args[first].kind != JV_STR)
                return jj_fail(c, ENG_JINJA_ERENDER, "test name must be a string");
            jj_val *ta = jj_alloc(c->ar, (nargs - first) * sizeof *ta);
            if (!ta) return NOMEM(c);
            ta[0] = v;
            for (size_t k = first + 1; k < nargs; k++) ta[k - first] = args[k];
            if (jj_test(c, sc, args[first].u.s->s, ta, nargs - first, &keep)) return c->rc;
        } else keep = jj_truthy(v);
        if (keep != rej && jj_list_push(c->ar, l.u.l, item)) return NOMEM(c);
    }
    *out = l;
    return 0;
}

int jj_filter(jj_ctx *c, jj_scope *sc, const char *name, jj_val *args, size_t nargs,
              const char **kw, jj_val *out) {
    jj_val v = args[0], s;
    jj_buf b = {.c = c};
    if (!strcmp(name, "safe")) {
        if (need_str(c, name, v, out)) return c->rc;
        out->safe = true;
        return 0;
    }
    if (!strcmp(name, "string")) return need_str(c, name, v, out);
    if (!strcmp(name, "trim") || !strcmp(name, "upper") || !strcmp(name, "lower") ||
        !strcmp(name, "capitalize") || !strcmp(name, "title") || !strcmp(name, "indent") ||
        !strcmp(name, "replace")) {
        if (need_str(c, name, v, &s)) return c->rc;
        switch (name[0]) {
        case 't': {
            jj_val *chars = arg(args, nargs, kw, 1, "chars");
            if (name[1] == 'r' && chars && chars->kind == JV_STR)
                return jj_method(c, s, "strip", chars, 1, NULL, out);
            *out = name[1] == 'r' ? strip(c, s) : jj_case_map(c, s, 4);
            break;
        }
        case 'u': *out = jj_case_map(c, s, 1); break;
        case 'l': *out = jj_case_map(c, s, 0); break;
        case 'c': *out = jj_case_map(c, s, 2); break;
        case 'i':
            return indent(c, s, arg(args, nargs, kw, 1, "width"), arg(args, nargs, kw, 2, "first"),
                          arg(args, nargs, kw, 3, "blank"), out);
        default:
            return replace(c, s, arg(args, nargs, kw, 1, "old"), arg(args, nargs, kw, 2, "new"),
                           arg(args, nargs, kw, 3, "count"), out);
        }
        return out->kind == JV_STR ? 0 : NOMEM(c);
    }
    if (!strcmp(name, "length") || !strcmp(name, "count")) {
        if (v.kind == JV_STR) {
            long long n = 0;
            for (size_t i = 0; i < v.u.s->n; i++) n += ((unsigned char)v.u.s->s[i] & 0xC0) != 0x80;
            return *out = jj_int(n), 0;
        }
        if (v.kind == JV_LIST) return *out = jj_int((long long)v.u.l->n), 0;
        if (v.kind == JV_DICT) return *out = jj_int((long long)v.u.d->n), 0;
        if (v.kind == JV_UNDEF) return *out = jj_int(0), 0;
        return jj_fail(c, ENG_JINJA_ERENDER, "TypeError: object of type '%s' has no len()",
                       jj_type_name(v));
    }
    if (!strcmp(name, "tojson")) {
        jj_val *ind = arg(args, nargs, kw, 2, "indent"),
               *sk = arg(args, nargs, kw, 99, "sort_keys");
        if (jj_tojson(&b, v, ind && ind->kind == JV_INT ? (int)ind->u.i : -1, 0,
                      sk && jj_truthy(*sk)))
            return c->rc;
        return *out = jj_buf_val(&b), 0;
    }
    if (!strcmp(name, "default") || !strcmp(name, "d")) {
        jj_val *dv = arg(args, nargs, kw, 1, "default_value"),
               *bo = arg(args, nargs, kw, 2, "boolean");
        bool use = v.kind == JV_UNDEF || (bo && jj_truthy(*bo) && !jj_truthy(v));
        *out = use ? (dv ? *dv : jj_strn(c->ar, "", 0)) : v;
        return 0;
    }
    if (!strcmp(name, "join")) {
        jj_list *l;
        jj_val *sep = arg(args, nargs, kw, 1, "d"), *at = arg(args, nargs, kw, 2, "attribute");
        if (jj_iter_list(c, v, &l)) return c->rc;
        for (size_t i = 0; i < l->n && !c->rc; i++) {
            jj_val it = l->v[i];
            if (at && at->kind == JV_STR && it.kind == JV_DICT) {
                jj_val *f = jj_dict_get(it.u.d, at->u.s->s, at->u.s->n);
                it = f ? *f : jj_undef(NULL);
            }
            if (i && sep) jj_str_of(&b, *sep);
            jj_str_of(&b, it);
        }
        return c->rc ? c->rc : (*out = jj_buf_val(&b), 0);
    }
    if (!strcmp(name, "first") || !strcmp(name, "last")) {
        jj_list *l;
        if (jj_iter_list(c, v, &l)) return c->rc;
        *out = l->n ? l->v[name[0] == 'f' ? 0 : l->n - 1] : jj_undef(NULL);
        return 0;
    }
    if (!strcmp(name, "list")) {
        jj_list *l;
        if (jj_iter_list(c, v, &l)) return c->rc;
        jj_val r = jj_list_new(c->ar);
        for (size_t i = 0; r.kind == JV_LIST && i < l->n; i++)
            if (jj_list_push(c->ar, r.u.l, l->v[i])) return NOMEM(c);
        return r.kind == JV_LIST ? (*out = r, 0) : NOMEM(c);
    }
    if (!strcmp(name, "items") || !strcmp(name, "dictsort")) {
        if (v.kind == JV_UNDEF) return *out = jj_list_new(c->ar), 0;
        if (v.kind != JV_DICT)
            return jj_fail(c, ENG_JINJA_ERENDER, "%s: expected a mapping, got '%s'", name,
                           jj_type_name(v));
        return jj_method(c, v, "items", NULL, 0, NULL, out);
    }
    if (!strcmp(name, "int") || !strcmp(name, "float")) {
        bool fl = name[0] == 'f';
        if (v.kind == JV_STR) {
            char *end;
            double f = strtod(v.u.s->s, &end);
            if (end == v.u.s->s) f = 0;
            *out = fl ? (jj_val){.kind = JV_FLOAT, .u.f = f} : jj_int((long long)f);
        } else if (v.kind == JV_INT || v.kind == JV_BOOL || v.kind == JV_FLOAT) {
            double f = v.kind == JV_FLOAT ? v.u.f : (double)(v.kind == JV_INT ? v.u.i : v.u.b);
            *out = fl ? (jj_val){.kind = JV_FLOAT, .u.f = f}
                      : jj_int(v.kind == JV_INT ? v.u.i : (long long)f);
        } else *out = fl ? (jj_val){.kind = JV_FLOAT, .u.f = 0} : jj_int(0);
        return 0;
    }
    if (!strcmp(name, "unique")) {
        jj_list *l;
        jj_val r = jj_list_new(c->ar);
        if (jj_iter_list(c, v, &l) || r.kind != JV_LIST) return c->rc ? c->rc : NOMEM(c);
        for (size_t i = 0; i < l->n; i++) {
            bool seen = false;
            jj_val a = l->v[i].kind == JV_STR ? jj_case_map(c, l->v[i], 0) : l->v[i];
            for (size_t k = 0; k < r.u.l->n && !seen; k++) {
                jj_val o =
                    r.u.l->v[k].kind == JV_STR ? jj_case_map(c, r.u.l->v[k], 0) : r.u.l->v[k];
                seen = jj_equal(a, o);
            }
            if (!seen && jj_list_push(c->ar, r.u.l, l->v[i])) return NOMEM(c);
        }
        return *out = r, 0;
    }
    if (!strcmp(name, "reverse")) {
        jj_list *l;
        if (v.kind == JV_STR) {
            if (jj_iter_list(c, v, &l)) return c->rc;
            for (size_t i = l->n; i-- > 0;) jj_buf_put(&b, l->v[i].u.s->s, l->v[i].u.s->n);
            return c->rc ? c->rc : (*out = jj_buf_val(&b), 0);
        }
        jj_val r = jj_list_new(c->ar);
        if (jj_iter_list(c, v, &l) || r.kind != JV_LIST) return c->rc ? c->rc : NOMEM(c);
        for (size_t i = l->n; i-- > 0;)
            if (jj_list_push(c->ar, r.u.l, l->v[i])) return NOMEM(c);
        return *out = r, 0;
    }
    if (!strcmp(name, "sort") || !strcmp(name, "min") || !strcmp(name, "max") ||
        !strcmp(name, "sum") || !strcmp(name, "round"))
        return jj_filter_order(c, name, args, nargs, kw, out);
    if (!strcmp(name, "format")) { /* jinja2: value % args (positional only) */
        jj_val t = jj_list_new(c->ar);
        if (t.kind != JV_LIST || need_str(c, name, v, &s)) return c->rc ? c->rc : NOMEM(c);
        t.u.l->tuple = true;
        for (size_t i = 1; i < nargs; i++)
            if ((kw && kw[i]) || jj_list_push(c->ar, t.u.l, args[i]))
                return c->rc ? c->rc
                             : jj_fail(c, ENG_JINJA_EUNSUPPORTED,
                                       "format: keyword arguments are not supported");
        return jj_percent_format(c, s, t, out);
    }
    if (!strcmp(name, "abs")) {
        if (v.kind == JV_INT) return *out = jj_int(v.u.i < 0 ? -v.u.i : v.u.i), 0;
        if (v.kind == JV_FLOAT)
            return *out = (jj_val){.kind = JV_FLOAT, .u.f = v.u.f < 0 ? -v.u.f : v.u.f}, 0;
        return jj_fail(c, ENG_JINJA_ERENDER, "TypeError: bad operand type for abs(): '%s'",
                       jj_type_name(v));
    }
    if (!strcmp(name, "map") || !strcmp(name, "select") || !strcmp(name, "reject") ||
        !strcmp(name, "selectattr") || !strcmp(name, "rejectattr"))
        return seq_filter(c, sc, name, args, nargs, kw, out);
    return jj_fail(c, ENG_JINJA_EUNSUPPORTED, "the filter '%s' is not supported", name);
}
