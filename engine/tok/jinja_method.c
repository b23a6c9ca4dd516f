/*
 * jinja_method.c -- tests (`is defined`, ...), the str/dict/list methods
 * templates call, and the globals (range, namespace, dict,
 * raise_exception, strftime_now).  As in jinja2's
 * ImmutableSandboxedEnvironment, methods that modify a list or dict
 * (append, pop, update, ...) are refused with a SecurityError.
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "jinja_internal.h"
#include "pl_err.h"
#include "pl_time.h"

#define NOMEM(c) jj_fail((c), ENG_JINJA_ELIMIT, "render memory limit reached")

static bool is_num(jj_val v) { return v.kind == JV_INT || v.kind == JV_FLOAT; }

int jj_test(jj_ctx *c, jj_scope *sc, const char *name, jj_val *args, size_t nargs, bool *out) {
    jj_val v = args[0];
    jj_val o = nargs > 1 ? args[1] : jj_undef(NULL);
    if (!strcmp(name, "defined")) *out = v.kind != JV_UNDEF;
    else if (!strcmp(name, "undefined")) *out = v.kind == JV_UNDEF;
    else if (!strcmp(name, "none")) *out = v.kind == JV_NONE;
    else if (!strcmp(name, "string")) *out = v.kind == JV_STR;
    else if (!strcmp(name, "mapping")) *out = v.kind == JV_DICT;
    else if (!strcmp(name, "iterable"))
        *out = v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_DICT;
    else if (!strcmp(name, "sequence"))
        *out = v.kind == JV_STR || v.kind == JV_LIST || v.kind == JV_DICT;
    else if (!strcmp(name, "number")) *out = is_num(v) || v.kind == JV_BOOL;
    else if (!strcmp(name, "integer")) *out = v.kind == JV_INT;
    else if (!strcmp(name, "float")) *out = v.kind == JV_FLOAT;
    else if (!strcmp(name, "boolean")) *out = v.kind == JV_BOOL;
    else if (!strcmp(name, "true")) *out = v.kind == JV_BOOL && v.u.b;
    else if (!strcmp(name, "false")) *out = v.kind == JV_BOOL && !v.u.b;
    else if (!strcmp(name, "callable"))
        *out = v.kind == JV_FUNC || v.kind == JV_MACRO || v.kind == JV_METHOD;
    else if (!strcmp(name, "equalto") || !strcmp(name, "eq") || !strcmp(name, "=="))
        *out = jj_equal(v, o);
    else if (!strcmp(name, "ne") || !strcmp(name, "!=")) *out = !jj_equal(v, o);
    else if (!strcmp(name, "gt") || !strcmp(name, "lt") || !strcmp(name, "ge") ||
             !strcmp(name, "le") || !strcmp(name, "greaterthan") || !strcmp(name, "lessthan") ||
             !strcmp(name, ">") || !strcmp(name, "<") || !strcmp(name, ">=") ||
             !strcmp(name, "<=")) {
        static const char *const alias[][2] = {{"gt", ">"},          {"lt", "<"},
                                               {"ge", ">="},         {"le", "<="},
                                               {"greaterthan", ">"}, {"lessthan", "<"}};
        const char *op = name;
        for (size_t i = 0; i < 6; i++)
            if (!strcmp(alias[i][0], name)) op = alias[i][1];
        jj_val r;
        if (jj_compare(c, op, v, o, &r)) return c->rc;
        *out = r.u.b;
    } else if (!strcmp(name, "lower") || !strcmp(name, "upper")) {
        *out = v.kind == JV_STR;
        for (size_t i = 0; *out && i < v.u.s->n; i++) {
            char ch = v.u.s->s[i];
            *out = name[0] == 'l' ? !(ch >= 'A' && ch <= 'Z') : !(ch >= 'a' && ch <= 'z');
        }
    } else if (!strcmp(name, "even") || !strcmp(name, "odd") || !strcmp(name, "divisibleby")) {
        if (v.kind != JV_INT)
            return jj_fail(c, ENG_JINJA_ERENDER, "TypeError: test '%s' needs an integer", name);
        long long d = name[0] == 'd' ? (o.kind == JV_INT ? o.u.i : 0) : 2;
        if (d == 0)
            return jj_fail(c, ENG_JINJA_ERENDER,
                           "ZeroDivisionError: integer division or modulo by zero");
        *out = name[0] == 'o' ? v.u.i % 2 != 0 : v.u.i % d == 0;
    } else if (!strcmp(name, "in")) {
        jj_val r;
        if (o.kind == JV_LIST || o.kind == JV_DICT || o.kind == JV_STR) {
            jj_list *l;
            if (o.kind == JV_STR) {
                if (v.kind != JV_STR)
                    return jj_fail(c, ENG_JINJA_ERENDER,
                                   "TypeError: 'in <string>' requires string");
                *out = v.u.s->n == 0 || strstr(o.u.s->s, v.u.s->s) != NULL;
                return 0;
            }
            if (jj_iter_list(c, o, &l)) return c->rc;
            *out = false;
            for (size_t i = 0; i < l->n && !*out; i++) *out = jj_equal(l->v[i], v);
            (void)r;
            return 0;
        }
        return jj_fail(c, ENG_JINJA_ERENDER, "TypeError: argument of type '%s' is not iterable",
                       jj_type_name(o));
    } else return jj_fail(c, ENG_JINJA_EUNSUPPORTED, "the test '%s' is not supported", name);
    return 0;
}

static const char *const STR_METHODS[] = {
    "strip",      "lstrip",  "rstrip",  "split",      "startswith", "endswith", "upper",
    "lower",      "replace", "title",   "capitalize", "find",       "count",    "join",
    "splitlines", "isdigit", "isalpha", "format",     NULL};
static const char *const DICT_METHODS[] = {"items", "keys", "values", "get", NULL};
static const char *const UNSAFE[] = {"append",  "pop",   "extend",  "insert",
                                     "remove",  "clear", "update",  "setdefault",
                                     "popitem", "sort",  "reverse", NULL};

static bool in_set(const char *const *set, const char *name) {
    for (size_t i = 0; set[i]; i++)
        if (!strcmp(set[i], name)) return true;
    return false;
}

bool jj_has_method(jj_val self, const char *name) {
    if (self.kind == JV_STR) return in_set(STR_METHODS, name);
    if (self.kind == JV_DICT && !self.u.d->ns)
        return in_set(DICT_METHODS, name) || in_set(UNSAFE, name);
    if (self.kind == JV_LIST) return in_set(UNSAFE, name);
    return false;
}

static bool in_chars(const jj_val *chars, char ch) {
    if (!chars || chars->kind != JV_STR)
        return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r' || ch == '\f' || ch == '\v';
    return memchr(chars->u.s->s, ch, chars->u.s->n) != NULL;
}

static bool prefix_match(const jj_str *s, jj_val p, bool end) {
    if (p.kind == JV_LIST) {
        for (size_t i = 0; i < p.u.l->n; i++)
            if (prefix_match(s, p.u.l->v[i], end)) return true;
        return false;
    }
    if (p.kind != JV_STR || p.u.s->n > s->n) return false;
    return !memcmp(s->s + (end ? s->n - p.u.s->n : 0), p.u.s->s, p.u.s->n);
}

static int str_split(jj_ctx *c, const jj_str *s, jj_val *sep, jj_val *maxs, jj_val *out) {
    long long max = maxs && maxs->kind == JV_INT ? maxs->u.i : -1;
    jj_val l = jj_list_new(c->ar);
    if (l.kind != JV_LIST) return NOMEM(c);
    size_t i = 0;
    if (!sep || sep->kind == JV_NONE) { /* runs of (Unicode) whitespace, none empty */
        size_t k;
        while (i < s->n) {
            while (i < s->n && (k = jj_space_fwd(s->s, s->n, i))) i += k;
            if (i == s->n) break;
            size_t b = i, e;
            if (max == 0) { /* the rest, trailing whitespace kept (Python) */
                e = i = s->n;
            } else {
                while (i < s->n && !jj_space_fwd(s->s, s->n, i)) i++;
                e = i;
            }
            if (jj_list_push(c->ar, l.u.l, jj_strn(c->ar, s->s + b, e - b))) return NOMEM(c);
            if (max > 0) max--;
        }
        return *out = l, 0;
    }
    if (sep->kind != JV_STR || sep->u.s->n == 0)
        return jj_fail(c, ENG_JINJA_ERENDER, "ValueError: empty separator");
    const jj_str *p = sep->u.s;
    size_t b = 0;
    while (i + p->n <= s->n && max != 0) {
        if (!memcmp(s->s + i, p->s, p->n)) {
            if (jj_list_push(c->ar, l.u.l, jj_strn(c->ar, s->s + b, i - b))) return NOMEM(c);
            i += p->n;
            b = i;
            if (max > 0) max--;
        } else i++;
    }
    if (jj_list_push(c->ar, l.u.l, jj_strn(c->ar, s->s + b, s->n - b))) return NOMEM(c);
    return *out = l, 0;
}

int jj_method(jj_ctx *c, jj_val self, const char *name, jj_val *args, size_t nargs, const char **kw,
              jj_val *out) {
    jj_val a0 = nargs > 0 ? args[0] : jj_undef(NULL), a1 = nargs > 1 ? args[1] : jj_undef(NULL);
    if (in_set(UNSAFE, name))
        return jj_fail(c, ENG_JINJA_ERENDER,
                       "SecurityError: access to attribute '%s' of '%s' object is unsafe.", name,
                       jj_type_name(self));
    if (self.kind == JV_DICT && !strcmp(name, "cycle")) { /* loop.cycle(a, b, ...) */
        jj_val *i0 = jj_dict_get(self.u.d, "index0", 6);
        if (!nargs || !i0 || i0->kind != JV_INT)
            return jj_fail(c, ENG_JINJA_ERENDER, "TypeError: no items for cycling given");
        *out = args[i0->u.i % (long long)nargs];
        return 0;
    }
    if (self.kind == JV_DICT) {
        if (!strcmp(name, "get")) {
            jj_val *v = jj_dict_getv(self.u.d, a0);
            *out = v ? *v : nargs > 1 ? a1 : jj_none();
            return 0;
        }
        jj_val l = jj_list_new(c->ar);
        if (l.kind != JV_LIST) return NOMEM(c);
        for (size_t i = 0; i < self.u.d->n; i++) {
            jj_val it = self.u.d->v[i];
            if (name[0] == 'k') it = self.u.d->k[i];
            else if (name[0] == 'i') {
                it = jj_list_new(c->ar);
                if (it.kind != JV_LIST || jj_list_push(c->ar, it.u.l, self.u.d->k[i]) ||
                    jj_list_push(c->ar, it.u.l, self.u.d->v[i]))
                    return NOMEM(c);
                it.u.l->tuple = true;
            }
            if (jj_list_push(c->ar, l.u.l, it)) return NOMEM(c);
        }
        return *out = l, 0;
    }
    const jj_str *s = self.u.s;
    jj_buf b = {.c = c};
    if (!strcmp(name, "strip") || !strcmp(name, "lstrip") || !strcmp(name, "rstrip")) {
        size_t lo = 0, hi = s->n;
        jj_val *ch = nargs > 0 && a0.kind != JV_NONE ? &args[0] : NULL;
        size_t k;
        if (!ch) { /* Python's str.isspace() code points */
            if (name[0] != 'r')
                while (lo < hi && (k = jj_space_fwd(s->s, hi, lo))) lo += k;
            if (name[0] != 'l')
                while (hi > lo && (k = jj_space_back(s->s + lo, hi - lo))) hi -= k;
        }
        if (ch && name[0] != 'r')
            while (lo < hi && in_chars(ch, s->s[lo])) lo++;
        if (ch && name[0] != 'l')
            while (hi > lo && in_chars(ch, s->s[hi - 1])) hi--;
        *out = jj_strn(c->ar, s->s + lo, hi - lo);
        return out->kind == JV_STR ? 0 : NOMEM(c);
    }
    if (!strcmp(name, "format")) return jj_str_format(c, self, args, nargs, kw, out);
    if (!strcmp(name, "title")) {
        *out = jj_case_map(c, self, 3);
        return out->kind == JV_STR ? 0 : NOMEM(c);
    }
    if (!strcmp(name, "split"))
        return str_split(c, s, nargs > 0 ? &args[0] : NULL, nargs > 1 ? &args[1] : NULL, out);
    if (!strcmp(name, "startswith") || !strcmp(name, "endswith"))
        return *out = jj_bool(prefix_match(s, a0, name[0] == 'e')), 0;
    if (!strcmp(name, "find") || !strcmp(name, "count")) {
        if (a0.kind != JV_STR)
            return jj_fail(c, ENG_JINJA_ERENDER, "TypeError: must be str, not %s",
                           jj_type_name(a0));
        long long hit = -1, n = 0;
        for (size_t i = 0; i + a0.u.s->n <= s->n; i++)
            if (!memcmp(s->s + i, a0.u.s->s, a0.u.s->n)) {
                if (hit < 0) hit = (long long)i;
                n++;
                i += a0.u.s->n ? a0.u.s->n - 1 : 0;
            }
        return *out = jj_int(name[0] == 'f' ? hit : n), 0;
    }
    if (!strcmp(name, "join")) {
        jj_list *l;
        if (jj_iter_list(c, a0, &l)) return c->rc;
        for (size_t i = 0; i < l->n; i++) {
            if (l->v[i].kind != JV_STR)
                return jj_fail(c, ENG_JINJA_ERENDER,
                               "TypeError: sequence item %zu: expected str instance, %s found", i,
                               jj_type_name(l->v[i]));
            if ((i && jj_buf_put(&b, s->s, s->n)) || jj_buf_put(&b, l->v[i].u.s->s, l->v[i].u.s->n))
                return c->rc;
        }
        return *out = jj_buf_val(&b), 0;
    }
    if (!strcmp(name, "isdigit") || !strcmp(name, "isalpha")) {
        bool r = s->n > 0;
        for (size_t i = 0; i < s->n && r; i++) {
            char ch = s->s[i];
            r = name[2] == 'd' ? (ch >= '0' && ch <= '9') : ((ch | 32) >= 'a' && (ch | 32) <= 'z');
        }
        return *out = jj_bool(r), 0;
    }
    /* upper lower replace title capitalize splitlines: as the filters */
    jj_val *fa = jj_alloc(c->ar, (nargs + 1) * sizeof *fa);
    const char **fk = jj_alloc(c->ar, (nargs + 1) * sizeof *fk);
    if (!fa || !fk) return NOMEM(c);
    fa[0] = self;
    for (size_t i = 0; i < nargs; i++) {
        fa[i + 1] = args[i];
        fk[i + 1] = kw ? kw[i] : NULL;
    }
    if (!strcmp(name, "splitlines"))
        return jj_fail(c, ENG_JINJA_EUNSUPPORTED, "str.splitlines is not supported");
    return jj_filter(c, NULL, name, fa, nargs + 1, fk, out);
}

int jj_builtin(jj_ctx *c, const char *name, jj_val *args, size_t nargs, const char **kw,
               jj_val *out) {
    if (!strcmp(name, "raise_exception")) {
        jj_val m = nargs ? jj_to_str(c, args[0]) : jj_strn(c->ar, "", 0);
        return jj_fail(c, ENG_JINJA_ERAISED, "%s", m.kind == JV_STR ? m.u.s->s : "");
    }
    if (!strcmp(name, "strftime_now")) {
        char buf[256];
        time_t t = c->now ? (time_t)c->now : (time_t)(pl_unix_ms() / 1000);
        struct tm tm;
        gmtime_r(&t, &tm);
        if (!nargs || args[0].kind != JV_STR)
            return jj_fail(c, ENG_JINJA_ERENDER, "TypeError: strftime_now() needs a format string");
        size_t n = strftime(buf, sizeof buf, args[0].u.s->s, &tm);
        *out = jj_strn(c->ar, buf, n);
        return out->kind == JV_STR ? 0 : NOMEM(c);
    }
    if (!strcmp(name, "namespace") || !strcmp(name, "dict")) {
        jj_val d = jj_dict_new(c->ar);
        if (d.kind != JV_DICT) return NOMEM(c);
        d.u.d->ns = name[0] == 'n';
        for (size_t i = 0; i < nargs; i++) {
            if (kw && kw[i]) {
                if (jj_dict_set(c->ar, d.u.d, jj_cstr(c->ar, kw[i]), args[i])) return NOMEM(c);
            } else if (args[i].kind == JV_DICT) {
                for (size_t k = 0; k < args[i].u.d->n; k++)
                    if (jj_dict_set(c->ar, d.u.d, args[i].u.d->k[k], args[i].u.d->v[k]))
                        return NOMEM(c);
            } else
                return jj_fail(c, ENG_JINJA_ERENDER, "TypeError: %s() takes keyword arguments",
                               name);
        }
        return *out = d, 0;
    }
    /* range */
    long long v[3] = {0, 0, 1};
    if (nargs < 1 || nargs > 3)
        return jj_fail(c, ENG_JINJA_ERENDER, "TypeError: range expected 1 to 3 arguments");
    for (size_t i = 0; i < nargs; i++) {
        if (args[i].kind != JV_INT)
            return jj_fail(c, ENG_JINJA_ERENDER,
                           "TypeError: '%s' object cannot be interpreted as an integer",
                           jj_type_name(args[i]));
        v[nargs == 1 ? 1 : i] = args[i].u.i;
    }
    if (v[2] == 0)
        return jj_fail(c, ENG_JINJA_ERENDER, "ValueError: range() arg 3 must not be zero");
    jj_val l = jj_list_new(c->ar);
    if (l.kind != JV_LIST) return NOMEM(c);
    for (long long i = v[0]; v[2] > 0 ? i < v[1] : i > v[1]; i += v[2]) {
        if (++c->steps > c->max_steps) return jj_fail(c, ENG_JINJA_ELIMIT, "step limit reached");
        if (jj_list_push(c->ar, l.u.l, jj_int(i))) return NOMEM(c);
    }
    return *out = l, 0;
}
