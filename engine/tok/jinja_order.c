/*
 * jinja_order.c -- the ordering and numeric filters: sort, min, max (by
 * jinja2's rule, strings compare case-insensitively unless
 * case_sensitive=true; `attribute=` picks a field), sum and round
 * (Python's round: halves to even; method "ceil" / "floor").
 */
#include <ctype.h>
#include <math.h>
#include <string.h>

#include "jinja_internal.h"

#define NOMEM(c) jj_fail((c), ENG_JINJA_ELIMIT, "render memory limit reached")

static jj_val *kwarg(jj_val *args, size_t nargs, const char **kw, const char *name, size_t pos) {
    for (size_t i = 1; kw && i < nargs; i++)
        if (kw[i] && !strcmp(kw[i], name)) return &args[i];
    return pos < nargs && !(kw && kw[pos]) ? &args[pos] : NULL;
}

/* The sort key of v: its attribute field when asked. */
static jj_val key_of(jj_val v, const jj_val *attr) {
    if (!attr || attr->kind != JV_STR) return v;
    jj_val *f = v.kind == JV_DICT ? jj_dict_get(v.u.d, attr->u.s->s, attr->u.s->n) : NULL;
    return f ? *f : jj_undef(NULL);
}

/* <0, 0, >0; *ok false when the two do not order (Python's TypeError). */
static int order(jj_val a, jj_val b, bool cs, bool *ok) {
    bool an = a.kind == JV_INT || a.kind == JV_FLOAT || a.kind == JV_BOOL;
    bool bn = b.kind == JV_INT || b.kind == JV_FLOAT || b.kind == JV_BOOL;
    *ok = true;
    if (an && bn) {
        double x = a.kind == JV_FLOAT ? a.u.f : a.kind == JV_INT ? (double)a.u.i : a.u.b;
        double y = b.kind == JV_FLOAT ? b.u.f : b.kind == JV_INT ? (double)b.u.i : b.u.b;
        return x < y ? -1 : x > y;
    }
    if (a.kind == JV_STR && b.kind == JV_STR) {
        size_t n = a.u.s->n < b.u.s->n ? a.u.s->n : b.u.s->n;
        for (size_t i = 0; i < n; i++) {
            int x = (unsigned char)a.u.s->s[i], y = (unsigned char)b.u.s->s[i];
            if (!cs) {
                x = tolower(x);
                y = tolower(y);
            }
            if (x != y) return x - y;
        }
        return a.u.s->n < b.u.s->n ? -1 : a.u.s->n > b.u.s->n;
    }
    *ok = false;
    return 0;
}

static int sorted(jj_ctx *c, jj_val v, jj_val *args, size_t nargs, const char **kw, bool rev,
                  jj_list **out) {
    jj_list *src;
    jj_val *cs = kwarg(args, nargs, kw, "case_sensitive", 99),
           *at = kwarg(args, nargs, kw, "attribute", 99);
    jj_val l = jj_list_new(c->ar);
    if (l.kind != JV_LIST) return NOMEM(c);
    if (jj_iter_list(c, v, &src)) return c->rc;
    for (size_t i = 0; i < src->n; i++) {
        if (jj_list_push(c->ar, l.u.l, src->v[i])) return NOMEM(c);
        for (size_t j = l.u.l->n - 1; j > 0; j--) { /* stable insertion */
            bool ok;
            if (++c->steps > c->max_steps)
                return jj_fail(c, ENG_JINJA_ELIMIT, "step limit reached");
            int o = order(key_of(l.u.l->v[j - 1], at), key_of(l.u.l->v[j], at),
                          cs && jj_truthy(*cs), &ok);
            if (!ok)
                return jj_fail(c, ENG_JINJA_ERENDER,
                               "TypeError: '<' not supported between instances of '%s' and '%s'",
                               jj_type_name(l.u.l->v[j - 1]), jj_type_name(l.u.l->v[j]));
            if (rev ? o >= 0 : o <= 0) break;
            jj_val t = l.u.l->v[j];
            l.u.l->v[j] = l.u.l->v[j - 1];
            l.u.l->v[j - 1] = t;
        }
    }
    *out = l.u.l;
    return 0;
}

int jj_filter_order(jj_ctx *c, const char *name, jj_val *args, size_t nargs, const char **kw,
                    jj_val *out) {
    jj_val v = args[0];
    jj_list *l;
    if (!strcmp(name, "sort")) {
        jj_val *rev = kwarg(args, nargs, kw, "reverse", 1);
        if (sorted(c, v, args, nargs, kw, rev && jj_truthy(*rev), &l)) return c->rc;
        return *out = (jj_val){.kind = JV_LIST, .u.l = l}, 0;
    }
    if (!strcmp(name, "min") || !strcmp(name, "max")) {
        if (sorted(c, v, args, nargs, kw, name[1] == 'a', &l)) return c->rc;
        *out = l->n ? l->v[0] : jj_undef(NULL);
        return 0;
    }
    if (!strcmp(name, "sum")) {
        jj_val *at = kwarg(args, nargs, kw, "attribute", 1),
               *st = kwarg(args, nargs, kw, "start", 2);
        long long si = st && st->kind == JV_INT ? st->u.i : 0;
        double sf = st && st->kind == JV_FLOAT ? st->u.f : 0;
        bool fl = st && st->kind == JV_FLOAT;
        if (jj_iter_list(c, v, &l)) return c->rc;
        for (size_t i = 0; i < l->n; i++) {
            jj_val x = key_of(l->v[i], at);
            if (x.kind == JV_INT || x.kind == JV_BOOL) si += x.kind == JV_INT ? x.u.i : x.u.b;
            else if (x.kind == JV_FLOAT) sf += x.u.f, fl = true;
            else
                return jj_fail(c, ENG_JINJA_ERENDER,
                               "TypeError: unsupported operand type(s) for +: 'int' and '%s'",
                               jj_type_name(x));
        }
        *out = fl ? (jj_val){.kind = JV_FLOAT, .u.f = sf + (double)si} : jj_int(si);
        return 0;
    }
    /* round */
    jj_val *pr = kwarg(args, nargs, kw, "precision", 1), *me = kwarg(args, nargs, kw, "method", 2);
    double x = v.kind == JV_FLOAT  ? v.u.f
               : v.kind == JV_INT  ? (double)v.u.i
               : v.kind == JV_BOOL ? v.u.b
                                   : NAN;
    if (isnan(x))
        return jj_fail(c, ENG_JINJA_ERENDER, "TypeError: type %s doesn't define __round__ method",
                       jj_type_name(v));
    double s = pow(10.0, pr && pr->kind == JV_INT ? (double)pr->u.i : 0.0), y = x * s;
    const char *m = me && me->kind == JV_STR ? me->u.s->s : "common";
    if (!strcmp(m, "ceil")) y = ceil(y);
    else if (!strcmp(m, "floor")) y = floor(y);
    else if (!strcmp(m, "common")) y = nearbyint(y);
    else
        return jj_fail(c, ENG_JINJA_ERENDER,
                       "FilterArgumentError: method must be common, ceil or floor");
    *out = (jj_val){.kind = JV_FLOAT, .u.f = y / s};
    return 0;
}
