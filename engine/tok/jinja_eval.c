/*
 * jinja_eval.c -- expression evaluation: names, attribute and item access
 * (jinja2's order: an attribute before an item for `.`, an item before an
 * attribute for `[]`), slices, calls, operators with Python's type rules.
 * Every node evaluated costs one step of the sandbox budget.
 */
#include <math.h>
#include <string.h>

#include "jinja_internal.h"

static int step(jj_ctx *c) {
    if (c->rc) return c->rc;
    if (++c->steps > c->max_steps)
        return jj_fail(c, ENG_JINJA_ELIMIT, "step limit of %llu reached",
                       (unsigned long long)c->max_steps);
    return 0;
}

static jj_val lookup(jj_scope *sc, const char *name) {
    size_t n = strlen(name);
    for (; sc; sc = sc->up) {
        jj_val *v = jj_dict_get(sc->vars, name, n);
        if (v) return *v;
    }
    static const char *const globals[] = {"raise_exception", "strftime_now", "namespace",
                                          "range",           "dict",         NULL};
    for (size_t i = 0; globals[i]; i++)
        if (!strcmp(globals[i], name)) return (jj_val){.kind = JV_FUNC, .u.fn = globals[i]};
    return jj_undef(name);
}

/* Number of UTF-8 code points, and the byte offset of code point k. */
static size_t u8_len(const jj_str *s) {
    size_t n = 0;
    for (size_t i = 0; i < s->n; i++) n += ((unsigned char)s->s[i] & 0xC0) != 0x80;
    return n;
}
static size_t u8_off(const jj_str *s, size_t k) {
    size_t i = 0;
    for (; i < s->n; i++)
        if (((unsigned char)s->s[i] & 0xC0) != 0x80 && k-- == 0) return i;
    return s->n;
}

int jj_iter_list(jj_ctx *c, jj_val v, jj_list **out) {
    jj_val l = jj_list_new(c->ar);
    if (l.kind != JV_LIST) return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
    switch (v.kind) {
    case JV_LIST: *out = v.u.l; return 0;
    case JV_UNDEF: *out = l.u.l; return 0;
    case JV_DICT:
        for (size_t i = 0; i < v.u.d->n; i++)
            if (jj_list_push(c->ar, l.u.l, v.u.d->k[i]))
                return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
        *out = l.u.l;
        return 0;
    case JV_STR:
        for (size_t i = 0, n = u8_len(v.u.s); i < n; i++) {
            size_t a = u8_off(v.u.s, i), b = u8_off(v.u.s, i + 1);
            if (jj_list_push(c->ar, l.u.l, jj_strn(c->ar, v.u.s->s + a, b - a)))
                return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
        }
        *out = l.u.l;
        return 0;
    default: return jj_fail(c, ENG_JINJA_ERENDER, "'%s' object is not iterable", jj_type_name(v));
    }
}

static int getattr(jj_ctx *c, jj_val obj, const char *name, jj_val *out) {
    if (obj.kind == JV_UNDEF)
        return jj_fail(c, ENG_JINJA_ERENDER,
                       "UndefinedError: undefined value has no attribute '%s'", name);
    if (jj_has_method(obj, name)) {
        jj_val box = jj_list_new(c->ar);
        if (box.kind != JV_LIST || jj_list_push(c->ar, box.u.l, obj))
            return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
        *out = (jj_val){.kind = JV_METHOD, .u.fn = name, .self = box.u.l};
        return 0;
    }
    if (obj.kind == JV_DICT) {
        jj_val *v = jj_dict_get(obj.u.d, name, strlen(name));
        *out = v ? *v : jj_undef(name);
        return 0;
    }
    *out = jj_undef(name);
    return 0;
}

static int getitem(jj_ctx *c, jj_val obj, jj_val key, jj_val *out) {
    if (obj.kind == JV_UNDEF)
        return jj_fail(c, ENG_JINJA_ERENDER, "UndefinedError: undefined value has no item");
    if (obj.kind == JV_DICT) {
        jj_val *v = jj_dict_getv(obj.u.d, key);
        if (v) {
            *out = *v;
            return 0;
        }
    }
    if ((obj.kind == JV_LIST || obj.kind == JV_STR) &&
        (key.kind == JV_INT || key.kind == JV_BOOL)) {
        long long i = key.kind == JV_INT ? key.u.i : key.u.b;
        long long n = obj.kind == JV_LIST ? (long long)obj.u.l->n : (long long)u8_len(obj.u.s);
        if (i < 0) i += n;
        if (i < 0 || i >= n) {
            *out = jj_undef(NULL);
            return 0;
        }
        if (obj.kind == JV_LIST) {
            *out = obj.u.l->v[i];
        } else {
            size_t a = u8_off(obj.u.s, (size_t)i), b = u8_off(obj.u.s, (size_t)i + 1);
            *out = jj_strn(c->ar, obj.u.s->s + a, b - a);
        }
        return 0;
    }
    if (key.kind == JV_STR) return getattr(c, obj, key.u.s->s, out);
    *out = jj_undef(NULL);
    return 0;
}

static int slice(jj_ctx *c, jj_val obj, jj_val *bnd, jj_val *out) {
    long long v[3], n;
    if (obj.kind == JV_LIST) n = (long long)obj.u.l->n;
    else if (obj.kind == JV_STR) n = (long long)u8_len(obj.u.s);
    else if (obj.kind == JV_UNDEF)
        return jj_fail(c, ENG_JINJA_ERENDER,
                       "UndefinedError: undefined value is not subscriptable");
    else
        return jj_fail(c, ENG_JINJA_ERENDER, "'%s' object is not subscriptable", jj_type_name(obj));
    long long st = 1;
    if (bnd[2].kind == JV_INT) st = bnd[2].u.i;
    if (st == 0) return jj_fail(c, ENG_JINJA_ERENDER, "slice step cannot be zero");
    for (int k = 0; k < 2; k++) {
        if (bnd[k].kind != JV_INT) {
            v[k] = st > 0 ? (k ? n : 0) : (k ? -1 : n - 1);
            continue;
        }
        long long i = bnd[k].u.i;
        if (i < 0) i += n;
        if (st > 0) v[k] = i < 0 ? 0 : i > n ? n : i;
        else v[k] = i < -1 ? -1 : i > n - 1 ? n - 1 : i;
    }
    jj_val l = jj_list_new(c->ar);
    jj_buf b = {.c = c};
    if (l.kind != JV_LIST) return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
    for (long long i = v[0]; st > 0 ? i < v[1] : i > v[1]; i += st) {
        if (step(c)) return c->rc;
        if (obj.kind == JV_LIST) {
            if (jj_list_push(c->ar, l.u.l, obj.u.l->v[i]))
                return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
        } else {
            size_t a = u8_off(obj.u.s, (size_t)i), e = u8_off(obj.u.s, (size_t)i + 1);
            if (jj_buf_put(&b, obj.u.s->s + a, e - a)) return c->rc;
        }
    }
    *out = obj.kind == JV_LIST ? l : jj_buf_val(&b);
    return 0;
}

static bool is_num(jj_val v) { return v.kind == JV_INT || v.kind == JV_FLOAT || v.kind == JV_BOOL; }
static double num(jj_val v) {
    return v.kind == JV_FLOAT ? v.u.f : v.kind == JV_INT ? (double)v.u.i : v.u.b;
}
static long long inum(jj_val v) { return v.kind == JV_INT ? v.u.i : v.u.b; }

int jj_compare(jj_ctx *c, const char *op, jj_val a, jj_val b, jj_val *out) {
    int cmp;
    if (!strcmp(op, "==")) return *out = jj_bool(jj_equal(a, b)), 0;
    if (!strcmp(op, "!=")) return *out = jj_bool(!jj_equal(a, b)), 0;
    if (is_num(a) && is_num(b)) cmp = num(a) < num(b) ? -1 : num(a) > num(b);
    else if (a.kind == JV_STR && b.kind == JV_STR) {
        size_t n = a.u.s->n < b.u.s->n ? a.u.s->n : b.u.s->n;
        cmp = memcmp(a.u.s->s, b.u.s->s, n);
        if (!cmp) cmp = a.u.s->n < b.u.s->n ? -1 : a.u.s->n > b.u.s->n;
    } else
        return jj_fail(c, ENG_JINJA_ERENDER,
                       "TypeError: '%s' not supported between instances of '%s' and '%s'", op,
                       jj_type_name(a), jj_type_name(b));
    bool r = op[0] == '<' ? (op[1] ? cmp <= 0 : cmp < 0) : (op[1] ? cmp >= 0 : cmp > 0);
    *out = jj_bool(r);
    return 0;
}

static int contains(jj_ctx *c, jj_val item, jj_val box, bool *out) {
    *out = false;
    if (box.kind == JV_STR) {
        if (item.kind != JV_STR)
            return jj_fail(c, ENG_JINJA_ERENDER,
                           "TypeError: 'in <string>' requires string as left operand, not %s",
                           jj_type_name(item));
        const jj_str *h = box.u.s, *nd = item.u.s;
        for (size_t i = 0; i + nd->n <= h->n && !*out; i++)
            *out = memcmp(h->s + i, nd->s, nd->n) == 0;
        return 0;
    }
    if (box.kind == JV_DICT) {
        *out = jj_dict_getv(box.u.d, item) != NULL;
        return 0;
    }
    if (box.kind == JV_LIST) {
        for (size_t i = 0; i < box.u.l->n && !*out; i++) *out = jj_equal(box.u.l->v[i], item);
        return 0;
    }
    if (box.kind == JV_UNDEF) return 0;
    return jj_fail(c, ENG_JINJA_ERENDER, "TypeError: argument of type '%s' is not iterable",
                   jj_type_name(box));
}

/* Append s; inside a Markup sum a plain str is HTML-escaped (markupsafe.escape). */
static int put_markup(jj_buf *b, jj_val s, bool markup) {
    if (!markup || s.safe) return jj_buf_put(b, s.u.s->s, s.u.s->n);
    size_t run = 0;
    for (size_t i = 0; i < s.u.s->n; i++) {
        const char *e = NULL;
        switch (s.u.s->s[i]) {
        case '&': e = "&amp;"; break;
        case '<': e = "&lt;"; break;
        case '>': e = "&gt;"; break;
        case '\'': e = "&#39;"; break;
        case '"': e = "&#34;"; break;
        }
        if (!e) {
            run++;
            continue;
        }
        if (jj_buf_put(b, s.u.s->s + i - run, run) || jj_buf_put(b, e, strlen(e))) return b->c->rc;
        run = 0;
    }
    return jj_buf_put(b, s.u.s->s + s.u.s->n - run, run);
}

static int arith(jj_ctx *c, const char *op, jj_val a, jj_val b, jj_val *out) {
    if (a.kind == JV_UNDEF || b.kind == JV_UNDEF)
        return jj_fail(c, ENG_JINJA_ERENDER, "UndefinedError: undefined value in '%s'", op);
    if (op[0] == '%' && a.kind == JV_STR) return jj_percent_format(c, a, b, out);
    if (op[0] == '+' && a.kind == JV_STR && b.kind == JV_STR) {
        jj_buf buf = {.c = c};
        bool safe = a.safe || b.safe;
        if (put_markup(&buf, a, safe) || put_markup(&buf, b, safe)) return c->rc;
        *out = jj_buf_val(&buf);
        out->safe = safe;
        return 0;
    }
    if (op[0] == '+' && a.kind == JV_LIST && b.kind == JV_LIST) {
        jj_val l = jj_list_new(c->ar);
        for (size_t i = 0; l.kind == JV_LIST && i < a.u.l->n + b.u.l->n; i++)
            if (jj_list_push(c->ar, l.u.l, i < a.u.l->n ? a.u.l->v[i] : b.u.l->v[i - a.u.l->n]))
                return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
        *out = l;
        return 0;
    }
    if (op[0] == '*' && !op[1] &&
        ((a.kind == JV_STR && b.kind == JV_INT) || (a.kind == JV_INT && b.kind == JV_STR))) {
        jj_val s = a.kind == JV_STR ? a : b;
        long long n = a.kind == JV_INT ? a.u.i : b.u.i;
        jj_buf buf = {.c = c};
        for (long long i = 0; i < n; i++)
            if (step(c) || jj_buf_put(&buf, s.u.s->s, s.u.s->n)) return c->rc;
        *out = jj_buf_val(&buf);
        return 0;
    }
    if (!is_num(a) || !is_num(b)) {
        if (op[0] == '+' && a.kind == JV_STR)
            return jj_fail(c, ENG_JINJA_ERENDER,
                           "TypeError: can only concatenate str (not \"%s\") to str",
                           jj_type_name(b));
        if (op[0] == '+' && a.kind == JV_LIST)
            return jj_fail(c, ENG_JINJA_ERENDER,
                           "TypeError: can only concatenate list (not \"%s\") to list",
                           jj_type_name(b));
        return jj_fail(c, ENG_JINJA_ERENDER,
                       "TypeError: unsupported operand type(s) for %s: '%s' and '%s'", op,
                       jj_type_name(a), jj_type_name(b));
    }
    bool fl = a.kind == JV_FLOAT || b.kind == JV_FLOAT || (op[0] == '/' && !op[1]);
    if ((op[0] == '/' || op[0] == '%') && num(b) == 0)
        return jj_fail(c, ENG_JINJA_ERENDER, "ZeroDivisionError: division by zero");
    if (fl) {
        double x = num(a), y = num(b), r;
        switch (op[0]) {
        case '+': r = x + y; break;
        case '-': r = x - y; break;
        case '*': r = op[1] ? pow(x, y) : x * y; break;
        case '/': r = op[1] ? floor(x / y) : x / y; break;
        default: r = x - y * floor(x / y);
        }
        *out = (jj_val){.kind = JV_FLOAT, .u.f = r};
        return 0;
    }
    long long x = inum(a), y = inum(b), r;
    switch (op[0]) {
    case '+': r = (long long)((unsigned long long)x + (unsigned long long)y); break;
    case '-': r = (long long)((unsigned long long)x - (unsigned long long)y); break;
    case '*':
        if (op[1]) {
            if (y < 0) {
                *out = (jj_val){.kind = JV_FLOAT, .u.f = pow((double)x, (double)y)};
                return 0;
            }
            r = 1;
            for (long long i = 0; i < y && i < 64; i++)
                r = (long long)((unsigned long long)r * (unsigned long long)x);
        } else r = (long long)((unsigned long long)x * (unsigned long long)y);
        break;
    case '/':
        if (y == -1) {
            r = (long long)(0ULL - (unsigned long long)x);
            break;
        }
        r = x / y - ((x % y != 0) && ((x < 0) != (y < 0)));
        break;
    default:
        if (y == -1) {
            r = 0;
            break;
        }
        r = x % y;
        if (r && ((r < 0) != (y < 0))) r += y;
    }
    *out = jj_int(r);
    return 0;
}

/* Evaluate the argument kids [from, n) of a call/filter/test node. */
static int eval_args(jj_ctx *c, jj_scope *sc, const jj_node *n, size_t from, jj_val **args) {
    size_t k = n->nkids - from;
    *args = jj_alloc(c->ar, (k ? k : 1) * sizeof **args);
    if (!*args) return jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
    for (size_t i = 0; i < k; i++)
        if (jj_eval(c, sc, n->kids[from + i], &(*args)[i])) return c->rc;
    return 0;
}

static int eval_binary(jj_ctx *c, jj_scope *sc, const jj_node *n, jj_val *out) {
    jj_val a, b;
    if (jj_eval(c, sc, n->kids[0], &a) || jj_eval(c, sc, n->kids[1], &b)) return c->rc;
    const char *op = n->name;
    if (op[0] == '~') {
        jj_buf buf = {.c = c};
        if (jj_str_of(&buf, a) || jj_str_of(&buf, b)) return c->rc;
        *out = jj_buf_val(&buf);
        return 0;
    }
    if (!strcmp(op, "in") || !strcmp(op, "notin")) {
        bool r;
        if (contains(c, a, b, &r)) return c->rc;
        *out = jj_bool(op[0] == 'i' ? r : !r);
        return 0;
    }
    if (op[0] == '=' || op[0] == '!' || op[0] == '<' || op[0] == '>')
        return jj_compare(c, op, a, b, out);
    return arith(c, op, a, b, out);
}

int jj_eval(jj_ctx *c, jj_scope *sc, const jj_node *n, jj_val *out) {
    if (step(c)) return c->rc;
    if (++c->depth > JJ_MAX_EVAL) return jj_fail(c, ENG_JINJA_ELIMIT, "recursion limit reached");
    int rc = 0;
    jj_val a, *args = NULL;
    switch (n->kind) {
    case JN_CONST: *out = n->val; break;
    case JN_NAME: *out = lookup(sc, n->name); break;
    case JN_LIST:
    case JN_TUPLE: {
        jj_val l = jj_list_new(c->ar);
        if (l.kind != JV_LIST || eval_args(c, sc, n, 0, &args)) {
            rc = jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
            break;
        }
        l.u.l->v = args;
        l.u.l->n = l.u.l->cap = n->nkids;
        l.u.l->tuple = n->kind == JN_TUPLE;
        *out = l;
        break;
    }
    case JN_DICT: {
        jj_val d = jj_dict_new(c->ar);
        if (d.kind != JV_DICT || eval_args(c, sc, n, 0, &args)) {
            rc = jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
            break;
        }
        for (size_t i = 0; i + 1 < n->nkids && !rc; i += 2)
            if (jj_dict_set(c->ar, d.u.d, args[i], args[i + 1]))
                rc = jj_fail(c, ENG_JINJA_ELIMIT, "render memory limit reached");
        *out = d;
        break;
    }
    case JN_ATTR:
        if (!(rc = jj_eval(c, sc, n->kids[0], &a))) rc = getattr(c, a, n->name, out);
        break;
    case JN_ITEM: {
        jj_val k;
        if (!(rc = jj_eval(c, sc, n->kids[0], &a)) && !(rc = jj_eval(c, sc, n->kids[1], &k)))
            rc = getitem(c, a, k, out);
        break;
    }
    case JN_SLICE: {
        jj_val b[3] = {{0}, {0}, {0}};
        rc = jj_eval(c, sc, n->kids[0], &a);
        for (int k = 0; k < 3 && !rc; k++)
            if (n->kids[k + 1]) rc = jj_eval(c, sc, n->kids[k + 1], &b[k]);
        if (!rc) rc = slice(c, a, b, out);
        break;
    }
    case JN_CALL:
        if (!(rc = jj_eval(c, sc, n->kids[0], &a)) && !(rc = eval_args(c, sc, n, 1, &args)))
            rc = jj_call_value(c, sc, a, args, n->nkids - 1, n->kwnames + 1, out);
        break;
    case JN_FILTER:
        if (!(rc = eval_args(c, sc, n, 0, &args)))
            rc = jj_filter(c, sc, n->name, args, n->nkids, n->kwnames, out);
        break;
    case JN_TEST: {
        bool r;
        if (!(rc = eval_args(c, sc, n, 0, &args)) &&
            !(rc = jj_test(c, sc, n->name, args, n->nkids, &r)))
            *out = jj_bool(n->neg ? !r : r);
        break;
    }
    case JN_UNARY:
        if ((rc = jj_eval(c, sc, n->kids[0], &a))) break;
        if (n->name[0] == 'n') *out = jj_bool(!jj_truthy(a));
        else if (n->name[0] == '-' && a.kind == JV_FLOAT)
            *out = (jj_val){.kind = JV_FLOAT, .u.f = -a.u.f};
        else if (n->name[0] == '-') rc = arith(c, "-", jj_int(0), a, out);
        else if (!is_num(a))
            rc = jj_fail(c, ENG_JINJA_ERENDER, "TypeError: bad operand type for unary +: '%s'",
                         jj_type_name(a));
        else *out = a;
        break;
    case JN_BINARY: rc = eval_binary(c, sc, n, out); break;
    case JN_AND:
    case JN_OR:
        if ((rc = jj_eval(c, sc, n->kids[0], &a))) break;
        if (jj_truthy(a) == (n->kind == JN_OR)) *out = a;
        else rc = jj_eval(c, sc, n->kids[1], out);
        break;
    case JN_COND:
        if ((rc = jj_eval(c, sc, n->kids[0], &a))) break;
        if (jj_truthy(a)) rc = jj_eval(c, sc, n->kids[1], out);
        else if (n->kids[2]) rc = jj_eval(c, sc, n->kids[2], out);
        else *out = jj_undef(NULL);
        break;
    default: rc = jj_fail(c, ENG_JINJA_EUNSUPPORTED, "unsupported expression");
    }
    c->depth--;
    return rc ? rc : c->rc;
}
