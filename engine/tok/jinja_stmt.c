/*
 * jinja_stmt.c -- the statement half of the parser: template text, {{ }}
 * output and the {% %} tags of the subset (if, for, set, macro, call,
 * filter, generation, break, continue).  Any other tag is refused with
 * ENG_JINJA_EUNSUPPORTED naming it.
 */
#include <string.h>

#include "jinja_internal.h"
#include "jinja_parse.h"
#include "pl_err.h"

static jj_node *body(parser *P, const char *const *ends);

/* After "{%": is the tag name one of ends? (position unchanged) */
static bool at_end_tag(parser *P, const char *const *ends) {
    if (jp_pk(P)->kind != JT_BLK_BEG || !ends) return false;
    const jj_tok *t = &P->t[P->i + 1];
    for (size_t k = 0; ends[k]; k++)
        if (jp_is_name(t, ends[k])) return true;
    return false;
}

static bool blk_end(parser *P) {
    if (jp_pk(P)->kind == JT_BLK_END) {
        jp_nx(P);
        return true;
    }
    jp_perr(P, ENG_JINJA_ESYNTAX, "expected the end of the tag '%%}'");
    return false;
}

/* Consume "{% name %}" for a closing tag. */
static bool close_tag(parser *P, const char *name) {
    if (jp_pk(P)->kind != JT_BLK_BEG || !jp_is_name(&P->t[P->i + 1], name)) {
        jp_perr(P, ENG_JINJA_ESYNTAX, "expected '{%% %s %%}'", name);
        return false;
    }
    jp_nx(P);
    jp_nx(P);
    return blk_end(P);
}

static jj_node *st_if(parser *P) {
    jj_node *n = jp_mk(P, JN_IF, 3);
    static const char *const ends[] = {"elif", "else", "endif", NULL};
    if (!n || !(n->kids[0] = jp_expr(P)) || !blk_end(P) || !(n->kids[1] = body(P, ends)))
        return NULL;
    jp_nx(P); /* {% */
    if (jp_accept_name(P, "elif")) {
        n->kids[2] = st_if(P); /* consumes the endif */
        return n->kids[2] ? n : NULL;
    }
    if (jp_accept_name(P, "else")) {
        static const char *const e2[] = {"endif", NULL};
        if (!blk_end(P) || !(n->kids[2] = body(P, e2))) return NULL;
        jp_nx(P);
    }
    return jp_accept_name(P, "endif") && blk_end(P)
               ? n
               : jp_perr(P, ENG_JINJA_ESYNTAX, "expected endif");
}

static jj_node *st_for(parser *P) {
    jj_node *n = jp_mk(P, JN_FOR, 4);
    if (!n) return NULL;
    const char *names[8];
    size_t nn = 0;
    do {
        const jj_tok *t = jp_nx(P);
        if (t->kind != JT_NAME || nn == 8)
            return jp_perr(P, ENG_JINJA_ESYNTAX, "expected a loop variable");
        names[nn++] = jp_tokstr(P, t);
    } while (jp_accept_op(P, ","));
    if (!jp_accept_name(P, "in")) return jp_perr(P, ENG_JINJA_ESYNTAX, "expected 'in'");
    n->names = jj_alloc(P->a, nn * sizeof *n->names);
    if (!n->names) return jp_perr(P, ENG_JINJA_ENOMEM, "out of memory");
    memcpy(n->names, names, nn * sizeof *names);
    n->nnames = nn;
    /* the iterable: no inline-if here, it would eat the loop filter */
    P->depth++;
    if (!(n->kids[0] = jp_or(P))) return NULL;
    P->depth--;
    if (jp_accept_name(P, "if") && !(n->kids[3] = jp_or(P))) return NULL;
    if (jp_accept_name(P, "recursive"))
        return jp_perr(P, ENG_JINJA_EUNSUPPORTED, "recursive loops are not supported");
    static const char *const ends[] = {"else", "endfor", NULL};
    if (!blk_end(P) || !(n->kids[1] = body(P, ends))) return NULL;
    jp_nx(P);
    if (jp_accept_name(P, "else")) {
        static const char *const e2[] = {"endfor", NULL};
        if (!blk_end(P) || !(n->kids[2] = body(P, e2))) return NULL;
        jp_nx(P);
    }
    return jp_accept_name(P, "endfor") && blk_end(P)
               ? n
               : jp_perr(P, ENG_JINJA_ESYNTAX, "expected endfor");
}

static jj_node *st_set(parser *P) {
    jj_node *tgt = jp_primary_postfix(P);
    if (!tgt) return NULL;
    if (tgt->kind != JN_NAME && tgt->kind != JN_ATTR)
        return jp_perr(P, ENG_JINJA_EUNSUPPORTED, "unsupported assignment target");
    if (jp_is_op(jp_pk(P), ",")) {
        jj_node *tu = jp_mk(P, JN_TUPLE, 0);
        if (!tu || !jp_add(P, tu, tgt, NULL)) return NULL;
        while (jp_accept_op(P, ",")) {
            jj_node *t = jp_primary_postfix(P);
            if (!t || t->kind != JN_NAME || !jp_add(P, tu, t, NULL))
                return jp_perr(P, ENG_JINJA_ESYNTAX, "bad assignment target");
        }
        tgt = tu;
    }
    if (jp_accept_op(P, "=")) {
        jj_node *n = jp_mk(P, JN_SET, 2);
        if (!n) return NULL;
        n->kids[0] = tgt;
        if (!(n->kids[1] = jp_expr(P))) return NULL;
        if (jp_is_op(jp_pk(P), ",")) { /* set a = 1, 2 -> tuple */
            jj_node *tu = jp_mk(P, JN_TUPLE, 0);
            if (!tu || !jp_add(P, tu, n->kids[1], NULL)) return NULL;
            while (jp_accept_op(P, ",")) {
                jj_node *e = jp_expr(P);
                if (!e || !jp_add(P, tu, e, NULL)) return NULL;
            }
            n->kids[1] = tu;
        }
        return blk_end(P) ? n : NULL;
    }
    if (tgt->kind != JN_NAME) return jp_perr(P, ENG_JINJA_ESYNTAX, "expected '='");
    if (jp_is_op(jp_pk(P), "|"))
        return jp_perr(P, ENG_JINJA_EUNSUPPORTED, "filtered block set is not supported");
    static const char *const ends[] = {"endset", NULL};
    jj_node *n = jp_mk(P, JN_SETBLOCK, 1);
    if (!n || !blk_end(P) || !(n->kids[0] = body(P, ends)) || !close_tag(P, "endset")) return NULL;
    n->name = tgt->name;
    return n;
}

static jj_node *st_macro(parser *P) {
    const jj_tok *t = jp_nx(P);
    if (t->kind != JT_NAME) return jp_perr(P, ENG_JINJA_ESYNTAX, "expected a macro name");
    jj_node *n = jp_mk(P, JN_MACRO, 1);
    if (!n) return NULL;
    n->name = jp_tokstr(P, t);
    const char *names[32];
    size_t nn = 0;
    if (!jp_expect_op(P, "(")) return NULL;
    while (!jp_accept_op(P, ")")) {
        const jj_tok *a = jp_nx(P);
        if (a->kind != JT_NAME || nn == 32)
            return jp_perr(P, ENG_JINJA_ESYNTAX, "expected a parameter name");
        names[nn++] = jp_tokstr(P, a);
        jj_node *def = NULL;
        if (jp_accept_op(P, "=") && !(def = jp_expr(P))) return NULL;
        if (!jp_add(P, n, def, NULL)) return NULL;
        if (!jp_is_op(jp_pk(P), ")") && !jp_expect_op(P, ",")) return NULL;
    }
    n->names = jj_alloc(P->a, (nn ? nn : 1) * sizeof *n->names);
    if (!n->names) return jp_perr(P, ENG_JINJA_ENOMEM, "out of memory");
    memcpy(n->names, names, nn * sizeof *names);
    n->nnames = nn;
    static const char *const ends[] = {"endmacro", NULL};
    if (!blk_end(P) || !(n->kids[0] = body(P, ends)) || !close_tag(P, "endmacro")) return NULL;
    return n;
}

static jj_node *st_tag(parser *P) {
    const jj_tok *t = jp_nx(P);
    if (t->kind != JT_NAME) return jp_perr(P, ENG_JINJA_ESYNTAX, "expected a tag name");
    if (jp_is_name(t, "if")) return st_if(P);
    if (jp_is_name(t, "for")) return st_for(P);
    if (jp_is_name(t, "set")) return st_set(P);
    if (jp_is_name(t, "macro")) return st_macro(P);
    if (jp_is_name(t, "break") || jp_is_name(t, "continue")) {
        jj_node *n = jp_mk(P, t->s[0] == 'b' ? JN_BREAK : JN_CONTINUE, 0);
        return n && blk_end(P) ? n : NULL;
    }
    if (jp_is_name(t, "generation")) {
        static const char *const ends[] = {"endgeneration", NULL};
        jj_node *b;
        if (!blk_end(P) || !(b = body(P, ends)) || !close_tag(P, "endgeneration")) return NULL;
        return b;
    }
    if (jp_is_name(t, "call")) {
        if (jp_is_op(jp_pk(P), "("))
            return jp_perr(P, ENG_JINJA_EUNSUPPORTED,
                           "call blocks with caller arguments are not supported");
        jj_node *n = jp_mk(P, JN_CALLBLK, 2);
        static const char *const ends[] = {"endcall", NULL};
        if (!n || !(n->kids[0] = jp_expr(P))) return NULL;
        if (n->kids[0]->kind != JN_CALL)
            return jp_perr(P, ENG_JINJA_ESYNTAX, "expected a macro call");
        if (!blk_end(P) || !(n->kids[1] = body(P, ends)) || !close_tag(P, "endcall")) return NULL;
        return n;
    }
    if (jp_is_name(t, "filter")) {
        jj_node *n = jp_mk(P, JN_FILTBLK, 2);
        jj_node *f = jp_mk(P, JN_FILTER, 1); /* kids[0] NULL: the body's text */
        static const char *const ends[] = {"endfilter", NULL};
        const jj_tok *fn = jp_nx(P);
        if (!n || !f || fn->kind != JT_NAME)
            return jp_perr(P, ENG_JINJA_ESYNTAX, "expected a filter name");
        f->name = jp_tokstr(P, fn);
        if (jp_accept_op(P, "(")) {
            while (!jp_accept_op(P, ")")) {
                jj_node *e = jp_expr(P);
                if (!e || !jp_add(P, f, e, NULL)) return NULL;
                if (!jp_is_op(jp_pk(P), ")") && !jp_expect_op(P, ",")) return NULL;
            }
        }
        n->kids[0] = f;
        if (!blk_end(P) || !(n->kids[1] = body(P, ends)) || !close_tag(P, "endfilter")) return NULL;
        return n;
    }
    return jp_perr(P, ENG_JINJA_EUNSUPPORTED, "the tag '%.*s' is not supported", (int)t->n, t->s);
}

static jj_node *body(parser *P, const char *const *ends) {
    if (++P->depth > MAX_PARSE_DEPTH) /* nested tags: the parser's and the renderer's recursion */
        return jp_perr(P, ENG_JINJA_ELIMIT, "tags nested too deeply");
    jj_node *b = jp_mk(P, JN_BODY, 0);
    while (b && !P->rc) {
        const jj_tok *t = jp_pk(P);
        jj_node *n = NULL;
        if (t->kind == JT_EOF) {
            if (ends) return jp_perr(P, ENG_JINJA_ESYNTAX, "missing '{%% %s %%}'", ends[0]);
            P->depth--;
            return b;
        }
        if (at_end_tag(P, ends)) {
            P->depth--;
            return b;
        }
        if (t->kind == JT_TEXT) {
            jp_nx(P);
            if ((n = jp_mk(P, JN_TEXT, 0))) n->val = jj_strn(P->a, t->s, t->n);
        } else if (t->kind == JT_VAR_BEG) {
            jp_nx(P);
            if ((n = jp_mk(P, JN_OUT, 1)) && (n->kids[0] = jp_expr(P))) {
                if (jp_pk(P)->kind != JT_VAR_END)
                    return jp_perr(P, ENG_JINJA_ESYNTAX, "expected '}}'");
                jp_nx(P);
            } else n = NULL;
        } else if (t->kind == JT_BLK_BEG) {
            jp_nx(P);
            n = st_tag(P);
        } else return jp_perr(P, ENG_JINJA_ESYNTAX, "unexpected token");
        if (!n || !jp_add(P, b, n, NULL)) return NULL;
    }
    return P->rc ? NULL : b;
}

int jj_parse(jj_arena *a, const jj_tok *toks, size_t ntok, jj_node **root, char *err,
             size_t errlen) {
    parser P = {.a = a, .t = toks, .n = ntok, .err = err, .errlen = errlen};
    jj_node *b = body(&P, NULL);
    if (!b) {
        if (!P.rc) {
            pl_errf(err, errlen, ENG_JINJA_ESYNTAX, "template does not parse");
            P.rc = ENG_JINJA_ESYNTAX;
        }
        return P.rc;
    }
    *root = b;
    return 0;
}
