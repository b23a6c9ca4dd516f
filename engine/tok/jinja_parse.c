/*
 * jinja_parse.c -- tokens to a tree, by recursive descent with jinja2's
 * precedence: inline if < or < and < not < comparisons/in < + - < ~ <
 * * / // % < ** < unary - + < postfix (. [] ()) and filters/tests.
 * Statements outside the subset are refused here, naming the tag.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "jinja_internal.h"
#include "jinja_parse.h"
#include "pl_err.h"


const jj_tok *jp_pk(parser *P) { return &P->t[P->i < P->n ? P->i : P->n - 1]; }
const jj_tok *jp_nx(parser *P) {
    const jj_tok *t = jp_pk(P);
    if (P->i < P->n - 1) P->i++;
    return t;
}

void *jp_perr(parser *P, int rc, const char *fmt, ...) {
    if (!P->rc) {
        va_list ap;
        va_start(ap, fmt);
        char msg[PL_ERR_LEN];
        vsnprintf(msg, sizeof msg, fmt, ap);
        va_end(ap);
        pl_errf(P->err, P->errlen, rc, "line %d: %s", jp_pk(P)->line, msg);
        P->rc = rc;
    }
    return NULL;
}

bool jp_is_op(const jj_tok *t, const char *op) {
    return t->kind == JT_OP && t->n == strlen(op) && memcmp(t->s, op, t->n) == 0;
}
bool jp_is_name(const jj_tok *t, const char *nm) {
    return t->kind == JT_NAME && t->n == strlen(nm) && memcmp(t->s, nm, t->n) == 0;
}
bool jp_accept_op(parser *P, const char *op) {
    return jp_is_op(jp_pk(P), op) ? (jp_nx(P), true) : false;
}
bool jp_accept_name(parser *P, const char *nm) {
    return jp_is_name(jp_pk(P), nm) ? (jp_nx(P), true) : false;
}

bool jp_expect_op(parser *P, const char *op) {
    if (jp_accept_op(P, op)) return true;
    jp_perr(P, ENG_JINJA_ESYNTAX, "expected '%s'", op);
    return false;
}

const char *jp_tokstr(parser *P, const jj_tok *t) {
    char *s = jj_alloc(P->a, t->n + 1);
    if (s) memcpy(s, t->s, t->n);
    return s;
}

jj_node *jp_mk(parser *P, int kind, size_t nkids) {
    jj_node *n = jj_alloc(P->a, sizeof *n);
    if (!n) return jp_perr(P, ENG_JINJA_ENOMEM, "out of memory");
    n->kind = kind;
    n->line = jp_pk(P)->line;
    if (nkids) {
        n->kids = jj_alloc(P->a, nkids * sizeof *n->kids);
        n->kwnames = jj_alloc(P->a, nkids * sizeof *n->kwnames);
        if (!n->kids || !n->kwnames) return jp_perr(P, ENG_JINJA_ENOMEM, "out of memory");
    }
    n->nkids = nkids;
    return n;
}

/* Append a kid (growing by copying; trees are small). */
bool jp_add(parser *P, jj_node *n, jj_node *kid, const char *kw) {
    jj_node **k = jj_alloc(P->a, (n->nkids + 1) * sizeof *k);
    const char **w = jj_alloc(P->a, (n->nkids + 1) * sizeof *w);
    if (!k || !w) {
        jp_perr(P, ENG_JINJA_ENOMEM, "out of memory");
        return false;
    }
    if (n->nkids) {
        memcpy(k, n->kids, n->nkids * sizeof *k);
        memcpy(w, n->kwnames, n->nkids * sizeof *w);
    }
    k[n->nkids] = kid;
    w[n->nkids] = kw;
    n->kids = k;
    n->kwnames = w;
    n->nkids++;
    return true;
}

static jj_node *or_expr(parser *P);
static jj_node *unary(parser *P, bool with_filter);

static jj_node *bin(parser *P, int kind, const char *op, jj_node *l, jj_node *r) {
    if (!l || !r) return NULL;
    jj_node *n = jp_mk(P, kind, 2);
    if (!n) return NULL;
    n->name = op;
    n->kids[0] = l;
    n->kids[1] = r;
    return n;
}

/* Arguments "(a, b, k=v)" after the '(' was consumed, appended to n. */
static bool call_args(parser *P, jj_node *n) {
    while (!jp_accept_op(P, ")")) {
        if (P->rc) return false;
        const char *kw = NULL;
        if (jp_pk(P)->kind == JT_NAME && P->i + 1 < P->n && jp_is_op(&P->t[P->i + 1], "=")) {
            kw = jp_tokstr(P, jp_nx(P));
            jp_nx(P);
        }
        jj_node *v = jp_expr(P);
        if (!v || !jp_add(P, n, v, kw)) return false;
        if (!jp_is_op(jp_pk(P), ")") && !jp_expect_op(P, ",")) return false;
    }
    return true;
}

static jj_node *primary(parser *P) {
    const jj_tok *t = jp_pk(P);
    jj_node *n;
    if (t->kind == JT_NAME) {
        jp_nx(P);
        if (jp_is_name(t, "true") || jp_is_name(t, "True") || jp_is_name(t, "false") ||
            jp_is_name(t, "False")) {
            n = jp_mk(P, JN_CONST, 0);
            if (n) n->val = jj_bool(t->s[0] == 't' || t->s[0] == 'T');
            return n;
        }
        if (jp_is_name(t, "none") || jp_is_name(t, "None")) {
            n = jp_mk(P, JN_CONST, 0);
            if (n) n->val = jj_none();
            return n;
        }
        n = jp_mk(P, JN_NAME, 0);
        if (n) n->name = jp_tokstr(P, t);
        return n;
    }
    if (t->kind == JT_STR) {
        /* adjacent literals concatenate */
        size_t len = 0, j = P->i;
        while (j < P->n && P->t[j].kind == JT_STR) len += P->t[j++].n;
        char *s = jj_alloc(P->a, len + 1);
        if (!s || !(n = jp_mk(P, JN_CONST, 0)))
            return jp_perr(P, ENG_JINJA_ENOMEM, "out of memory");
        size_t k = 0;
        while (jp_pk(P)->kind == JT_STR) {
            t = jp_nx(P);
            memcpy(s + k, t->s, t->n);
            k += t->n;
        }
        n->val = jj_strn(P->a, s, len);
        return n;
    }
    if (t->kind == JT_INT || t->kind == JT_FLOAT) {
        jp_nx(P);
        n = jp_mk(P, JN_CONST, 0);
        if (n) {
            n->val = t->kind == JT_INT ? jj_int(t->i) : (jj_val){.kind = JV_FLOAT, .u.f = t->f};
        }
        return n;
    }
    if (jp_accept_op(P, "(")) {
        if (jp_accept_op(P, ")")) return jp_mk(P, JN_TUPLE, 0);
        jj_node *e = jp_expr(P);
        if (!e) return NULL;
        if (jp_accept_op(P, ")")) return e;
        n = jp_mk(P, JN_TUPLE, 0);
        if (!n || !jp_add(P, n, e, NULL)) return NULL;
        while (jp_accept_op(P, ",")) {
            if (jp_is_op(jp_pk(P), ")")) break;
            if (!(e = jp_expr(P)) || !jp_add(P, n, e, NULL)) return NULL;
        }
        return jp_expect_op(P, ")") ? n : NULL;
    }
    if (jp_accept_op(P, "[")) {
        n = jp_mk(P, JN_LIST, 0);
        while (n && !jp_accept_op(P, "]")) {
            jj_node *e = jp_expr(P);
            if (!e || !jp_add(P, n, e, NULL)) return NULL;
            if (!jp_is_op(jp_pk(P), "]") && !jp_expect_op(P, ",")) return NULL;
        }
        return n;
    }
    if (jp_accept_op(P, "{")) {
        n = jp_mk(P, JN_DICT, 0);
        while (n && !jp_accept_op(P, "}")) {
            jj_node *k = jp_expr(P);
            if (!k || !jp_expect_op(P, ":")) return NULL;
            jj_node *v = jp_expr(P);
            if (!v || !jp_add(P, n, k, NULL) || !jp_add(P, n, v, NULL)) return NULL;
            if (!jp_is_op(jp_pk(P), "}") && !jp_expect_op(P, ",")) return NULL;
        }
        return n;
    }
    if (t->kind == JT_OP)
        return jp_perr(P, ENG_JINJA_ESYNTAX, "unexpected '%.*s'", (int)t->n, t->s);
    return jp_perr(P, ENG_JINJA_ESYNTAX, "unexpected end of expression");
}

static jj_node *postfix(parser *P, jj_node *n) {
    while (n) {
        if (jp_accept_op(P, ".")) {
            const jj_tok *t = jp_nx(P);
            if (t->kind != JT_NAME && t->kind != JT_INT)
                return jp_perr(P, ENG_JINJA_ESYNTAX, "expected an attribute name after '.'");
            jj_node *a = jp_mk(P, JN_ATTR, 1);
            if (!a) return NULL;
            a->kids[0] = n;
            a->name = jp_tokstr(P, t);
            n = a;
        } else if (jp_accept_op(P, "[")) {
            jj_node *parts[3] = {NULL, NULL, NULL};
            int np = 0;
            bool slice = false;
            for (;;) {
                if (jp_is_op(jp_pk(P), ":") || jp_is_op(jp_pk(P), "]")) parts[np] = NULL;
                else if (!(parts[np] = jp_expr(P))) return NULL;
                if (jp_accept_op(P, ":")) {
                    slice = true;
                    if (++np > 2) return jp_perr(P, ENG_JINJA_ESYNTAX, "bad slice");
                    continue;
                }
                break;
            }
            if (!jp_expect_op(P, "]")) return NULL;
            jj_node *s = jp_mk(P, slice ? JN_SLICE : JN_ITEM, slice ? 4 : 2);
            if (!s) return NULL;
            s->kids[0] = n;
            for (int k = 0; k < (slice ? 3 : 1); k++) s->kids[k + 1] = parts[k];
            if (!slice && !parts[0]) return jp_perr(P, ENG_JINJA_ESYNTAX, "empty subscript");
            n = s;
        } else if (jp_accept_op(P, "(")) {
            jj_node *c = jp_mk(P, JN_CALL, 1);
            if (!c) return NULL;
            c->kids[0] = n;
            if (!call_args(P, c)) return NULL;
            n = c;
        } else break;
    }
    return n;
}

static jj_node *filters_tests(parser *P, jj_node *n) {
    while (n) {
        if (jp_accept_op(P, "|")) {
            const jj_tok *t = jp_nx(P);
            if (t->kind != JT_NAME)
                return jp_perr(P, ENG_JINJA_ESYNTAX, "expected a filter name after '|'");
            jj_node *f = jp_mk(P, JN_FILTER, 1);
            if (!f) return NULL;
            f->name = jp_tokstr(P, t);
            f->kids[0] = n;
            if (jp_accept_op(P, "(") && !call_args(P, f)) return NULL;
            n = postfix(P, f);
        } else if (jp_accept_name(P, "is")) {
            jj_node *f = jp_mk(P, JN_TEST, 1);
            if (!f) return NULL;
            f->neg = jp_accept_name(P, "not");
            const jj_tok *t = jp_nx(P);
            if (t->kind != JT_NAME)
                return jp_perr(P, ENG_JINJA_ESYNTAX, "expected a test name after 'is'");
            f->name = jp_tokstr(P, t);
            f->kids[0] = n;
            if (jp_accept_op(P, "(")) {
                if (!call_args(P, f)) return NULL;
            } else {
                const jj_tok *u = jp_pk(P);
                /* jinja2's rule: one argument without parentheses when a
                 * name, string, number, [ or { follows, unless else/or/and
                 * (so `x is defined if c else d` is a syntax error there too) */
                bool arg = u->kind == JT_STR || u->kind == JT_INT || u->kind == JT_FLOAT ||
                           jp_is_op(u, "[") || jp_is_op(u, "{") ||
                           (u->kind == JT_NAME && !jp_is_name(u, "else") && !jp_is_name(u, "or") &&
                            !jp_is_name(u, "and"));
                if (arg && jp_is_name(u, "is"))
                    return jp_perr(P, ENG_JINJA_ESYNTAX, "You cannot chain multiple tests with is");
                if (arg) {
                    jj_node *a = postfix(P, primary(P));
                    if (!a || !jp_add(P, f, a, NULL)) return NULL;
                }
            }
            n = f;
        } else break;
    }
    return n;
}

static jj_node *unary(parser *P, bool with_filter) {
    if (++P->depth > MAX_PARSE_DEPTH)
        return jp_perr(P, ENG_JINJA_ELIMIT, "expression nested too deeply");
    jj_node *n;
    if (jp_is_op(jp_pk(P), "-") || jp_is_op(jp_pk(P), "+")) {
        const char *op = jp_nx(P)->s[0] == '-' ? "-" : "+";
        n = jp_mk(P, JN_UNARY, 1);
        if (n && !(n->kids[0] = unary(P, false))) n = NULL;
        if (n) n->name = op;
    } else n = postfix(P, primary(P));
    if (with_filter) n = filters_tests(P, n);
    P->depth--;
    return n;
}

static jj_node *power(parser *P) {
    jj_node *l = unary(P, true);
    while (l && jp_accept_op(P, "**")) l = bin(P, JN_BINARY, "**", l, unary(P, true));
    return l;
}

static jj_node *math2(parser *P) {
    jj_node *l = power(P);
    static const char *ops[] = {"*", "//", "/", "%"};
    for (;;) {
        int k;
        for (k = 0; k < 4 && !jp_is_op(jp_pk(P), ops[k]); k++)
            ;
        if (!l || k == 4) return l;
        jp_nx(P);
        l = bin(P, JN_BINARY, ops[k], l, power(P));
    }
}

static jj_node *concat(parser *P) {
    jj_node *l = math2(P);
    while (l && jp_accept_op(P, "~")) l = bin(P, JN_BINARY, "~", l, math2(P));
    return l;
}

static jj_node *math1(parser *P) {
    jj_node *l = concat(P);
    while (l && (jp_is_op(jp_pk(P), "+") || jp_is_op(jp_pk(P), "-"))) {
        const char *op = jp_nx(P)->s[0] == '+' ? "+" : "-";
        l = bin(P, JN_BINARY, op, l, concat(P));
    }
    return l;
}

/* Comparisons chain as in Python: a < b < c is (a < b) and (b < c). */
static jj_node *compare(parser *P) {
    jj_node *l = math1(P), *chain = NULL, *left = l;
    static const char *ops[] = {"==", "!=", "<=", ">=", "<", ">"};
    while (left) {
        int k;
        const char *op;
        for (k = 0; k < 6 && !jp_is_op(jp_pk(P), ops[k]); k++)
            ;
        if (k < 6) {
            jp_nx(P);
            op = ops[k];
        } else if (jp_accept_name(P, "in")) {
            op = "in";
        } else if (jp_is_name(jp_pk(P), "not") && P->i + 1 < P->n &&
                   jp_is_name(&P->t[P->i + 1], "in")) {
            jp_nx(P);
            jp_nx(P);
            op = "notin";
        } else break;
        jj_node *right = math1(P);
        jj_node *cmp = bin(P, JN_BINARY, op, left, right);
        chain = chain ? bin(P, JN_AND, "and", chain, cmp) : cmp;
        left = cmp ? right : NULL;
    }
    return chain ? chain : l;
}

static jj_node *not_expr(parser *P) {
    if (jp_accept_name(P, "not")) {
        jj_node *n = jp_mk(P, JN_UNARY, 1);
        if (n && !(n->kids[0] = not_expr(P))) return NULL;
        if (n) n->name = "not";
        return n;
    }
    return compare(P);
}

static jj_node *and_expr(parser *P) {
    jj_node *l = not_expr(P);
    while (l && jp_accept_name(P, "and")) l = bin(P, JN_AND, "and", l, not_expr(P));
    return l;
}

static jj_node *or_expr(parser *P) {
    jj_node *l = and_expr(P);
    while (l && jp_accept_name(P, "or")) l = bin(P, JN_OR, "or", l, and_expr(P));
    return l;
}

jj_node *jp_expr(parser *P) {
    if (++P->depth > MAX_PARSE_DEPTH)
        return jp_perr(P, ENG_JINJA_ELIMIT, "expression nested too deeply");
    jj_node *body = or_expr(P);
    while (body && jp_accept_name(P, "if")) {
        jj_node *n = jp_mk(P, JN_COND, 3);
        if (!n || !(n->kids[0] = or_expr(P))) return NULL;
        n->kids[1] = body;
        if (jp_accept_name(P, "else") && !(n->kids[2] = jp_expr(P))) return NULL;
        body = n;
    }
    P->depth--;
    return body;
}


jj_node *jp_primary_postfix(parser *P) { return postfix(P, primary(P)); }
jj_node *jp_or(parser *P) { return or_expr(P); }
