/*
 * jinja_parse.h -- the parser's state and token helpers, shared by
 * jinja_parse.c (expressions) and jinja_stmt.c (statements).
 */
#ifndef JINJA_PARSE_H
#define JINJA_PARSE_H
#include "jinja_internal.h"

#define MAX_PARSE_DEPTH 200

typedef struct {
    jj_arena *a;     /* tree memory */
    const jj_tok *t; /* tokens */
    size_t n, i;     /* count, position */
    int depth;       /* nesting, bounded by MAX_PARSE_DEPTH */
    int rc;          /* first error */
    char *err;       /* message buffer */
    size_t errlen;
} parser;

const jj_tok *jp_pk(parser *P); /* current token */
const jj_tok *jp_nx(parser *P); /* current token, then advance */
void *jp_perr(parser *P, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
bool jp_is_op(const jj_tok *t, const char *op);
bool jp_is_name(const jj_tok *t, const char *nm);
bool jp_accept_op(parser *P, const char *op);
bool jp_accept_name(parser *P, const char *nm);
bool jp_expect_op(parser *P, const char *op);
const char *jp_tokstr(parser *P, const jj_tok *t); /* NUL-terminated copy */
jj_node *jp_mk(parser *P, int kind, size_t nkids);
bool jp_add(parser *P, jj_node *n, jj_node *kid, const char *kw);
jj_node *jp_expr(parser *P);
jj_node *jp_or(parser *P);              /* an expression without inline if (for-loop iterables) */
jj_node *jp_primary_postfix(parser *P); /* a name with .attr / [item]: assignment targets */

#endif
