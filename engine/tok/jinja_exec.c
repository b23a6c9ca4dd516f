/*
 * jinja_exec.c -- statements (output, if, for with loop.*, set, macros,
 * call and filter blocks) and calls of macros and built-in globals.
 * Scoping follows jinja2: a for loop and a macro call open a scope whose
 * assignments vanish when it ends (hence namespace()); if does not.
 */
#include <string.h>

#include "jinja_internal.h"

static int out_val(jj_ctx *c, jj_val v) { return jj_str_of(c->out, v) ? c->rc : 0; }

static int bind(jj_ctx *c, jj_scope *sc, const char *name, jj_val v) {
    if (jj_dict_set(c->ar, sc->vars, jj_cstr(c->ar, name), v))
        return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
    return 0;
}

static int new_scope(jj_ctx *c, jj_scope *up, jj_scope **out) {
    jj_scope *s = jj_alloc(c->ar, sizeof *s);
    jj_val d = jj_dict_new(c->ar);
    if (!s || d.kind != JV_DICT) return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
    s->up = up;
    s->vars = d.u.d;
    *out = s;
    return 0;
}

/* Run body with output captured into a fresh string. */
static int capture(jj_ctx *c, jj_scope *sc, const jj_node *body, jj_val *out) {
    jj_buf b = {.c = c}, *saved = c->out;
    c->out = &b;
    int rc = jj_exec(c, sc, body);
    c->out = saved;
    if (!rc) *out = jj_buf_val(&b);
    return rc;
}

static int unpack(jj_ctx *c, jj_scope *sc, const char **names, size_t nn, jj_val v) {
    if (nn == 1) return bind(c, sc, names[0], v);
    if (v.kind != JV_LIST || v.u.l->n != nn)
        return jj_fail(c, ENG_JINJA_ERENDER, "ValueError: cannot unpack %s into %zu names",
                       jj_type_name(v), nn);
    for (size_t i = 0; i < nn; i++)
        if (bind(c, sc, names[i], v.u.l->v[i])) return c->rc;
    return 0;
}

static int loop_var(jj_ctx *c, jj_dict *lp, const char *k, jj_val v) {
    if (jj_dict_set(c->ar, lp, jj_cstr(c->ar, k), v))
        return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
    return 0;
}

/* loop.cycle: a method value bound to this iteration's loop object. */
static int loop_cycle(jj_ctx *c, jj_val lp) {
    jj_val box = jj_list_new(c->ar);
    if (box.kind != JV_LIST || jj_list_push(c->ar, box.u.l, lp))
        return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
    return loop_var(c, lp.u.d, "cycle",
                    (jj_val){.kind = JV_METHOD, .u.fn = "cycle", .self = box.u.l});
}

static int st_for(jj_ctx *c, jj_scope *sc, const jj_node *n) {
    jj_val it;
    jj_list *src, *items;
    jj_scope *ls = NULL;
    if (jj_eval(c, sc, n->kids[0], &it) || jj_iter_list(c, it, &src) || new_scope(c, sc, &ls))
        return c->rc;
    items = src;
    if (n->kids[3]) { /* the loop filter applies before loop.* is counted */
        jj_val f = jj_list_new(c->ar);
        if (f.kind != JV_LIST) return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
        for (size_t i = 0; i < src->n; i++) {
            jj_val keep;
            if (unpack(c, ls, n->names, n->nnames, src->v[i]) || jj_eval(c, ls, n->kids[3], &keep))
                return c->rc;
            if (jj_truthy(keep) && jj_list_push(c->ar, f.u.l, src->v[i]))
                return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
        }
        items = f.u.l;
    }
    size_t count = items->n; /* the list may grow while looping; Python iterates a snapshot here */
    for (size_t i = 0; i < count; i++) {
        if (++c->steps > c->max_steps) return jj_fail(c, ENG_JINJA_ELIMIT, "step limit reached");
        jj_val lp = jj_dict_new(c->ar);
        if (lp.kind != JV_DICT) return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
        long long k = (long long)i, len = (long long)count;
        if (loop_var(c, lp.u.d, "index", jj_int(k + 1)) ||
            loop_var(c, lp.u.d, "index0", jj_int(k)) ||
            loop_var(c, lp.u.d, "revindex", jj_int(len - k)) ||
            loop_var(c, lp.u.d, "revindex0", jj_int(len - k - 1)) ||
            loop_var(c, lp.u.d, "first", jj_bool(i == 0)) ||
            loop_var(c, lp.u.d, "last", jj_bool(i + 1 == count)) ||
            loop_var(c, lp.u.d, "length", jj_int(len)) || loop_var(c, lp.u.d, "depth", jj_int(1)) ||
            loop_var(c, lp.u.d, "depth0", jj_int(0)) ||
            loop_var(c, lp.u.d, "previtem", i ? items->v[i - 1] : jj_undef(NULL)) ||
            loop_var(c, lp.u.d, "nextitem", i + 1 < count ? items->v[i + 1] : jj_undef(NULL)) ||
            loop_cycle(c, lp) || bind(c, ls, "loop", lp) ||
            unpack(c, ls, n->names, n->nnames, items->v[i]))
            return c->rc;
        if (jj_exec(c, ls, n->kids[1])) return c->rc;
        int brk = c->brk;
        c->brk = 0;
        if (brk == 1) break;
    }
    if (count == 0 && n->kids[2]) return jj_exec(c, sc, n->kids[2]);
    return 0;
}

static int st_set(jj_ctx *c, jj_scope *sc, const jj_node *n) {
    jj_val v;
    const jj_node *t = n->kids[0];
    if (jj_eval(c, sc, n->kids[1], &v)) return c->rc;
    if (t->kind == JN_NAME) return bind(c, sc, t->name, v);
    if (t->kind == JN_TUPLE) {
        if (v.kind != JV_LIST || v.u.l->n != t->nkids)
            return jj_fail(c, ENG_JINJA_ERENDER, "ValueError: cannot unpack into %zu names",
                           t->nkids);
        for (size_t i = 0; i < t->nkids; i++)
            if (bind(c, sc, t->kids[i]->name, v.u.l->v[i])) return c->rc;
        return 0;
    }
    jj_val obj; /* JN_ATTR: only namespace() objects take attributes */
    if (jj_eval(c, sc, t->kids[0], &obj)) return c->rc;
    if (obj.kind != JV_DICT || !obj.u.d->ns)
        return jj_fail(c, ENG_JINJA_ERENDER,
                       "TemplateRuntimeError: cannot assign attribute on non-namespace object");
    if (jj_dict_set(c->ar, obj.u.d, jj_cstr(c->ar, t->name), v))
        return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
    return 0;
}

int jj_exec(jj_ctx *c, jj_scope *sc, const jj_node *n) {
    if (c->rc) return c->rc;
    if (++c->steps > c->max_steps)
        return jj_fail(c, ENG_JINJA_ELIMIT, "step limit of %llu reached",
                       (unsigned long long)c->max_steps);
    jj_val v;
    switch (n->kind) {
    case JN_BODY:
        for (size_t i = 0; i < n->nkids && !c->brk; i++)
            if (jj_exec(c, sc, n->kids[i])) return c->rc;
        return 0;
    case JN_TEXT: return jj_buf_put(c->out, n->val.u.s->s, n->val.u.s->n) ? c->rc : 0;
    case JN_OUT: return jj_eval(c, sc, n->kids[0], &v) ? c->rc : out_val(c, v);
    case JN_IF:
        if (jj_eval(c, sc, n->kids[0], &v)) return c->rc;
        if (jj_truthy(v)) return jj_exec(c, sc, n->kids[1]);
        return n->kids[2] ? jj_exec(c, sc, n->kids[2]) : 0;
    case JN_FOR: return st_for(c, sc, n);
    case JN_SET: return st_set(c, sc, n);
    case JN_SETBLOCK: return capture(c, sc, n->kids[0], &v) ? c->rc : bind(c, sc, n->name, v);
    case JN_MACRO: return bind(c, sc, n->name, (jj_val){.kind = JV_MACRO, .u.m = n, .env = sc});
    case JN_CALLBLK: {
        const jj_node *call = n->kids[0];
        jj_val fn, *args = jj_alloc(c->ar, (call->nkids + 1) * sizeof *args);
        const char **kw = jj_alloc(c->ar, (call->nkids + 1) * sizeof *kw);
        if (!args || !kw) return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
        if (jj_eval(c, sc, call->kids[0], &fn)) return c->rc;
        for (size_t i = 1; i < call->nkids; i++) {
            if (jj_eval(c, sc, call->kids[i], &args[i - 1])) return c->rc;
            kw[i - 1] = call->kwnames[i];
        }
        args[call->nkids - 1] = (jj_val){.kind = JV_MACRO, .u.m = n, .env = sc};
        kw[call->nkids - 1] = "caller";
        if (jj_call_value(c, sc, fn, args, call->nkids, kw, &v)) return c->rc;
        return out_val(c, v);
    }
    case JN_FILTBLK: {
        jj_val *args = jj_alloc(c->ar, (n->kids[0]->nkids + 1) * sizeof *args);
        const jj_node *f = n->kids[0];
        if (!args) return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
        if (capture(c, sc, n->kids[1], &args[0])) return c->rc;
        for (size_t i = 1; i < f->nkids; i++)
            if (jj_eval(c, sc, f->kids[i], &args[i])) return c->rc;
        if (jj_filter(c, sc, f->name, args, f->nkids ? f->nkids : 1, f->kwnames, &v)) return c->rc;
        return out_val(c, v);
    }
    case JN_BREAK: c->brk = 1; return 0;
    case JN_CONTINUE: c->brk = 2; return 0;
    default: return jj_fail(c, ENG_JINJA_EUNSUPPORTED, "unsupported statement");
    }
}

static int call_macro(jj_ctx *c, jj_val fn, jj_val *args, size_t nargs, const char **kw,
                      jj_val *out) {
    const jj_node *m = fn.u.m;
    jj_scope *ms = NULL;
    if (c->calls + 1 > c->max_depth)
        return jj_fail(c, ENG_JINJA_ELIMIT, "recursion limit of %d reached", c->max_depth);
    if (new_scope(c, fn.env, &ms)) return c->rc;
    if (m->kind == JN_CALLBLK) /* caller() of a call block */
        return capture(c, ms, m->kids[1], out);
    size_t pos = 0;
    for (size_t i = 0; i < nargs; i++) {
        if (kw && kw[i]) {
            size_t k;
            for (k = 0; k < m->nnames && strcmp(m->names[k], kw[i]); k++)
                ;
            if (k == m->nnames && strcmp(kw[i], "caller"))
                return jj_fail(c, ENG_JINJA_ERENDER,
                               "TypeError: macro '%s' takes no keyword argument '%s'", m->name,
                               kw[i]);
            if (bind(c, ms, kw[i], args[i])) return c->rc;
        } else {
            if (pos >= m->nnames)
                return jj_fail(c, ENG_JINJA_ERENDER,
                               "TypeError: macro '%s' takes not more than %zu argument(s)", m->name,
                               m->nnames);
            if (bind(c, ms, m->names[pos++], args[i])) return c->rc;
        }
    }
    for (size_t k = 0; k < m->nnames; k++) {
        if (jj_dict_get(ms->vars, m->names[k], strlen(m->names[k]))) continue;
        jj_val d = jj_undef(m->names[k]);
        if (m->kids[k + 1] && jj_eval(c, ms, m->kids[k + 1], &d)) return c->rc;
        if (bind(c, ms, m->names[k], d)) return c->rc;
    }
    c->calls++;
    int rc = capture(c, ms, m->kids[0], out);
    c->calls--;
    c->brk = 0;
    return rc;
}

int jj_call_value(jj_ctx *c, jj_scope *sc, jj_val fn, jj_val *args, size_t nargs, const char **kw,
                  jj_val *out) {
    switch (fn.kind) {
    case JV_MACRO: return call_macro(c, fn, args, nargs, kw, out);
    case JV_FUNC: return jj_builtin(c, fn.u.fn, args, nargs, kw, out);
    case JV_METHOD: return jj_method(c, fn.self->v[0], fn.u.fn, args, nargs, kw, out);
    case JV_UNDEF:
        return jj_fail(c, ENG_JINJA_ERENDER, "UndefinedError: an undefined value is not callable");
    default:
        return jj_fail(c, ENG_JINJA_ERENDER, "TypeError: '%s' object is not callable",
                       jj_type_name(fn));
    }
}
