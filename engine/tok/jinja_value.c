/*
 * jinja_value.c -- the arena, value constructors, containers, truth and
 * equality, and the three ways a value becomes text: Python's str() and
 * repr() (what {{ }} prints).  JSON in and out is jinja_json.c.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jinja_internal.h"
#include "tok_internal.h"
#include "pl_err.h"

struct jj_chunk {
    jj_chunk *next; /* older chunk */
    size_t size;    /* bytes after the header */
    size_t used;    /* bytes handed out */
    _Alignas(16) unsigned char mem[];
};

void *jj_alloc(jj_arena *a, size_t n) {
    n = (n + 15) & ~(size_t)15;
    if (n == 0) n = 16;
    if (a->limit && a->used + n > a->limit) {
        a->failed = true;
        return NULL;
    }
    jj_chunk *c = a->head;
    if (!c || c->size - c->used < n) {
        size_t sz = n > 65536 ? n : 65536;
        c = malloc(sizeof *c + sz);
        if (!c) {
            a->failed = true;
            return NULL;
        }
        c->next = a->head;
        c->size = sz;
        c->used = 0;
        a->head = c;
    }
    void *p = c->mem + c->used;
    c->used += n;
    a->used += n;
    memset(p, 0, n);
    return p;
}

void jj_arena_free(jj_arena *a) {
    jj_chunk *c = a->head;
    while (c) {
        jj_chunk *next = c->next;
        free(c);
        c = next;
    }
    a->head = NULL;
    a->used = 0;
}

int jj_fail(jj_ctx *c, int rc, const char *fmt, ...) {
    if (!c->rc) {
        va_list ap;
        va_start(ap, fmt);
        if (c->err && c->errlen) vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
        c->rc = rc;
    }
    return c->rc;
}

jj_val jj_none(void) { return (jj_val){.kind = JV_NONE}; }
jj_val jj_bool(bool b) { return (jj_val){.kind = JV_BOOL, .u.b = b}; }
jj_val jj_int(long long i) { return (jj_val){.kind = JV_INT, .u.i = i}; }
jj_val jj_undef(const char *name) {
    (void)name;
    return (jj_val){.kind = JV_UNDEF};
}

jj_val jj_strn(jj_arena *a, const char *s, size_t n) {
    jj_str *p = jj_alloc(a, sizeof *p + n + 1);
    if (!p) return (jj_val){.kind = JV_UNDEF};
    p->n = n;
    if (n) memcpy(p->s, s, n);
    p->s[n] = 0;
    return (jj_val){.kind = JV_STR, .u.s = p};
}

jj_val jj_cstr(jj_arena *a, const char *s) { return jj_strn(a, s, strlen(s)); }

jj_val jj_list_new(jj_arena *a) {
    jj_list *l = jj_alloc(a, sizeof *l);
    return l ? (jj_val){.kind = JV_LIST, .u.l = l} : (jj_val){.kind = JV_UNDEF};
}

jj_val jj_dict_new(jj_arena *a) {
    jj_dict *d = jj_alloc(a, sizeof *d);
    return d ? (jj_val){.kind = JV_DICT, .u.d = d} : (jj_val){.kind = JV_UNDEF};
}

int jj_list_push(jj_arena *a, jj_list *l, jj_val v) {
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 8;
        jj_val *p = jj_alloc(a, cap * sizeof *p);
        if (!p) return ENG_JINJA_ELIMIT;
        if (l->n) memcpy(p, l->v, l->n * sizeof *p);
        l->v = p;
        l->cap = cap;
    }
    l->v[l->n++] = v;
    return 0;
}

jj_val *jj_dict_getv(const jj_dict *d, jj_val key) {
    for (size_t i = 0; i < d->n; i++)
        if (jj_equal(d->k[i], key)) return &d->v[i];
    return NULL;
}

jj_val *jj_dict_get(const jj_dict *d, const char *key, size_t klen) {
    for (size_t i = 0; i < d->n; i++)
        if (d->k[i].kind == JV_STR && d->k[i].u.s->n == klen &&
            memcmp(d->k[i].u.s->s, key, klen) == 0)
            return &d->v[i];
    return NULL;
}

int jj_dict_set(jj_arena *a, jj_dict *d, jj_val k, jj_val v) {
    jj_val *p = jj_dict_getv(d, k);
    if (p) {
        *p = v;
        return 0;
    }
    if (d->n == d->cap) {
        size_t cap = d->cap ? d->cap * 2 : 8;
        jj_val *nk = jj_alloc(a, cap * sizeof *nk), *nv = jj_alloc(a, cap * sizeof *nv);
        if (!nk || !nv) return ENG_JINJA_ELIMIT;
        if (d->n) {
            memcpy(nk, d->k, d->n * sizeof *nk);
            memcpy(nv, d->v, d->n * sizeof *nv);
        }
        d->k = nk;
        d->v = nv;
        d->cap = cap;
    }
    d->k[d->n] = k;
    d->v[d->n++] = v;
    return 0;
}

bool jj_truthy(jj_val v) {
    switch (v.kind) {
    case JV_BOOL: return v.u.b;
    case JV_INT: return v.u.i != 0;
    case JV_FLOAT: return v.u.f != 0.0;
    case JV_STR: return v.u.s->n != 0;
    case JV_LIST: return v.u.l->n != 0;
    case JV_DICT: return v.u.d->n != 0 || v.u.d->ns;
    case JV_FUNC:
    case JV_MACRO:
    case JV_METHOD: return true;
    default: return false;
    }
}

static bool equal_at(jj_val a, jj_val b, int level);

bool jj_equal(jj_val a, jj_val b) { return equal_at(a, b, 0); }

/* Values nest at most JJ_MAX_NEST deep in a comparison (deeper: unequal). */
static bool equal_at(jj_val a, jj_val b, int level) {
    if (level > JJ_MAX_NEST) return false;
    bool an = a.kind == JV_INT || a.kind == JV_FLOAT || a.kind == JV_BOOL;
    bool bn = b.kind == JV_INT || b.kind == JV_FLOAT || b.kind == JV_BOOL;
    if (an && bn) {
        if (a.kind != JV_FLOAT && b.kind != JV_FLOAT) {
            long long x = a.kind == JV_BOOL ? a.u.b : a.u.i, y = b.kind == JV_BOOL ? b.u.b : b.u.i;
            return x == y;
        }
        double x = a.kind == JV_FLOAT ? a.u.f : a.kind == JV_BOOL ? a.u.b : (double)a.u.i;
        double y = b.kind == JV_FLOAT ? b.u.f : b.kind == JV_BOOL ? b.u.b : (double)b.u.i;
        return x == y;
    }
    if (a.kind != b.kind) return false;
    switch (a.kind) {
    case JV_UNDEF:
    case JV_NONE: return true;
    case JV_STR: return a.u.s->n == b.u.s->n && memcmp(a.u.s->s, b.u.s->s, a.u.s->n) == 0;
    case JV_LIST:
        if (a.u.l->n != b.u.l->n) return false;
        for (size_t i = 0; i < a.u.l->n; i++)
            if (!equal_at(a.u.l->v[i], b.u.l->v[i], level + 1)) return false;
        return true;
    case JV_DICT:
        if (a.u.d->n != b.u.d->n) return false;
        for (size_t i = 0; i < a.u.d->n; i++) {
            jj_val *o = jj_dict_getv(b.u.d, a.u.d->k[i]);
            if (!o || !equal_at(a.u.d->v[i], *o, level + 1)) return false;
        }
        return true;
    default: return a.u.s == b.u.s && a.u.m == b.u.m;
    }
}

const char *jj_type_name(jj_val v) {
    static const char *const names[] = {"Undefined", "NoneType", "bool",  "int",
                                        "float",     "str",      "list",  "dict",
                                        "function",  "Macro",    "method"};
    if (v.kind == JV_LIST && v.u.l->tuple) return "tuple";
    if (v.kind == JV_DICT && v.u.d->ns) return "Namespace";
    return names[v.kind];
}

/* ------------------------------------------------------------- text */

int jj_buf_put(jj_buf *b, const char *s, size_t n) {
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        while (cap < b->n + n + 1) cap *= 2;
        if (cap > b->c->max_out + 64)
            return jj_fail(b->c, ENG_JINJA_ELIMIT, "output limit of %zu bytes reached",
                           b->c->max_out);
        char *p = jj_alloc(b->c->ar, cap);
        if (!p) return jj_fail(b->c, ENG_JINJA_ELIMIT, "render memory limit reached");
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
    return 0;
}

static int bputs(jj_buf *b, const char *s) { return jj_buf_put(b, s, strlen(s)); }

jj_val jj_buf_val(jj_buf *b) {
    return b->p ? jj_strn(b->c->ar, b->p, b->n) : jj_strn(b->c->ar, "", 0);
}

/* Python's repr(float): shortest round-trip digits, fixed notation for
 * exponents -4..15, else d.ddde+XX. */
static void float_repr(double f, char *out, size_t cap) {
    if (isnan(f)) {
        snprintf(out, cap, "NaN");
        return;
    }
    if (isinf(f)) {
        snprintf(out, cap, f > 0 ? "Infinity" : "-Infinity");
        return;
    }
    char tmp[40];
    int p;
    for (p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof tmp, "%.*e", p - 1, f);
        if (strtod(tmp, NULL) == f) break;
    }
    char *e = strchr(tmp, 'e');
    int exp = atoi(e + 1);
    *e = 0;
    char digits[40];
    size_t nd = 0;
    bool neg = tmp[0] == '-';
    for (char *q = tmp + neg; *q; q++)
        if (*q != '.') digits[nd++] = *q;
    digits[nd] = 0;
    while (nd > 1 && digits[nd - 1] == '0') digits[--nd] = 0;
    size_t o = 0;
    if (neg) out[o++] = '-';
    if (exp >= -4 && exp < 16) {
        if (exp < 0) {
            o += (size_t)snprintf(out + o, cap - o, "0.");
            for (int k = -1; k > exp; k--) out[o++] = '0';
            o += (size_t)snprintf(out + o, cap - o, "%s", digits);
        } else {
            for (int k = 0; k <= exp; k++) out[o++] = (size_t)k < nd ? digits[k] : '0';
            out[o++] = '.';
            if ((size_t)exp + 1 < nd)
                o += (size_t)snprintf(out + o, cap - o, "%s", digits + exp + 1);
            else out[o++] = '0';
        }
        out[o] = 0;
    } else {
        out[o++] = digits[0];
        if (nd > 1) {
            out[o++] = '.';
            o += (size_t)snprintf(out + o, cap - o, "%s", digits + 1);
        }
        snprintf(out + o, cap - o, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
    }
}

int jj_num_str(jj_buf *b, jj_val v) {
    char tmp[64];
    if (v.kind == JV_INT) snprintf(tmp, sizeof tmp, "%lld", v.u.i);
    else float_repr(v.u.f, tmp, sizeof tmp);
    return bputs(b, tmp);
}

static int str_repr(jj_buf *b, const jj_str *s) {
    char q = memchr(s->s, '\'', s->n) && !memchr(s->s, '"', s->n) ? '"' : '\'';
    int rc = jj_buf_put(b, &q, 1);
    for (size_t i = 0; i < s->n && !rc; i++) {
        unsigned char ch = (unsigned char)s->s[i];
        char tmp[8];
        if (ch == '\\' || ch == (unsigned char)q) snprintf(tmp, sizeof tmp, "\\%c", ch);
        else if (ch == '\n') snprintf(tmp, sizeof tmp, "\\n");
        else if (ch == '\r') snprintf(tmp, sizeof tmp, "\\r");
        else if (ch == '\t') snprintf(tmp, sizeof tmp, "\\t");
        else if (ch < 0x20 || ch == 0x7f) snprintf(tmp, sizeof tmp, "\\x%02x", ch);
        else {
            tmp[0] = (char)ch;
            tmp[1] = 0;
        }
        rc = bputs(b, tmp);
    }
    return rc ? rc : jj_buf_put(b, &q, 1);
}

static int repr_at(jj_buf *b, jj_val v, int level);

int jj_repr_of(jj_buf *b, jj_val v) { return repr_at(b, v, 0); }

static int repr_at(jj_buf *b, jj_val v, int level) {
    if (level > JJ_MAX_NEST)
        return jj_fail(b->c, ENG_JINJA_ELIMIT, "value nested too deeply to print");
    int rc = 0;
    switch (v.kind) {
    case JV_STR: return str_repr(b, v.u.s);
    case JV_LIST: {
        bool tu = v.u.l->tuple;
        rc = bputs(b, tu ? "(" : "[");
        for (size_t i = 0; i < v.u.l->n && !rc; i++) {
            if (i) rc = bputs(b, ", ");
            if (!rc) rc = repr_at(b, v.u.l->v[i], level + 1);
        }
        if (!rc && tu && v.u.l->n == 1) rc = bputs(b, ",");
        return rc ? rc : bputs(b, tu ? ")" : "]");
    }
    case JV_DICT:
        if (v.u.d->ns) return bputs(b, "<Namespace>");
        rc = bputs(b, "{");
        for (size_t i = 0; i < v.u.d->n && !rc; i++) {
            if (i) rc = bputs(b, ", ");
            if (!rc) rc = repr_at(b, v.u.d->k[i], level + 1);
            if (!rc) rc = bputs(b, ": ");
            if (!rc) rc = repr_at(b, v.u.d->v[i], level + 1);
        }
        return rc ? rc : bputs(b, "}");
    default: return jj_str_of(b, v);
    }
}

int jj_str_of(jj_buf *b, jj_val v) {
    switch (v.kind) {
    case JV_UNDEF: return 0;
    case JV_NONE: return bputs(b, "None");
    case JV_BOOL: return bputs(b, v.u.b ? "True" : "False");
    case JV_INT:
    case JV_FLOAT: return jj_num_str(b, v);
    case JV_STR: return jj_buf_put(b, v.u.s->s, v.u.s->n);
    case JV_LIST:
    case JV_DICT: return jj_repr_of(b, v);
    default: return bputs(b, "<function>");
    }
}

jj_val jj_to_str(jj_ctx *c, jj_val v) {
    if (v.kind == JV_STR) return v;
    jj_buf b = {.c = c};
    if (jj_str_of(&b, v)) return (jj_val){.kind = JV_UNDEF};
    return jj_buf_val(&b);
}

/* ------------------------------------------------------------- whitespace */

size_t jj_space_fwd(const char *s, size_t n, size_t i) {
    uint32_t cp;
    size_t bad, k = (size_t)tok_utf8_decode((const uint8_t *)s + i, n - i, &cp, &bad);
    return k && (tok_unicode_flags(cp) & TOK_UF_PYSPACE) ? k : 0;
}

size_t jj_space_back(const char *s, size_t e) {
    size_t b = e;
    while (b > 0 && e - b < 4 && ((unsigned char)s[b - 1] & 0xC0) == 0x80) b--;
    if (b == 0) return 0;
    b--;
    return jj_space_fwd(s, e, b) == e - b ? e - b : 0;
}
