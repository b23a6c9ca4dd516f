/*
 * jinja_internal.h -- the Jinja-subset interpreter's private types, shared
 * by jinja_lex.c (source -> tokens), jinja_parse.c (tokens -> tree),
 * jinja_value.c (values, arena, str()/repr()/tojson), jinja_eval.c
 * (expressions and statements) and jinja_filter.c (filters, tests, methods).
 * The public contract is eng_jinja.h.
 *
 * Memory.  A compiled template owns one arena (jj_arena) holding its tokens
 * and tree; a render owns another for every value it makes, freed in one go
 * at the end, so values are plain structs copied by value and never freed
 * one by one.  Lists and dicts are mutable in place (list.append, namespace
 * attributes) and shared by reference, as in Python.
 */
#ifndef JINJA_INTERNAL_H
#define JINJA_INTERNAL_H
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eng_jinja.h"

/* Deepest nesting of list/dict values that printing, comparing and tojson
 * walk (recursion, so bounded; Python would raise RecursionError). */
#define JJ_MAX_NEST 500

/* Deepest nesting of expression evaluation, macro calls included (C stack). */
#define JJ_MAX_EVAL 1000

/* ------------------------------------------------------------- arena */

typedef struct jj_chunk jj_chunk;
typedef struct {
    jj_chunk *head; /* newest chunk first */
    size_t used;    /* bytes handed out so far, all chunks */
    size_t limit;   /* most bytes it may hand out; 0 = no limit */
    bool failed;    /* an allocation was refused (limit or malloc) */
} jj_arena;

void *jj_alloc(jj_arena *a, size_t n); /* zeroed; NULL on failure */
void jj_arena_free(jj_arena *a);

/* ------------------------------------------------------------- tokens */

enum {
    JT_EOF = 0,
    JT_TEXT,    /* template data between tags */
    JT_VAR_BEG, /* {{ */
    JT_VAR_END, /* }} */
    JT_BLK_BEG, /* {% */
    JT_BLK_END, /* %} */
    JT_NAME,    /* identifier or keyword */
    JT_STR,     /* string literal, escapes resolved */
    JT_INT,     /* integer literal */
    JT_FLOAT,   /* float literal */
    JT_OP       /* operator; op holds its spelling */
};

typedef struct {
    int kind;      /* JT_* */
    const char *s; /* text, name, string value or operator spelling */
    size_t n;      /* its length */
    long long i;   /* JT_INT value */
    double f;      /* JT_FLOAT value */
    int line;      /* 1-based source line */
} jj_tok;

/* Lex src (already newline-normalised) into toks (arena-allocated). */
int jj_lex(jj_arena *a, const char *src, size_t len, jj_tok **toks, size_t *ntok, char *err,
           size_t errlen);

/* ------------------------------------------------------------- tree */

enum {
    /* expressions */
    JN_CONST = 1, /* literal: val */
    JN_NAME,      /* variable: name */
    JN_LIST,      /* [kids] */
    JN_TUPLE,     /* (kids) */
    JN_DICT,      /* {kids[2i]: kids[2i+1]} */
    JN_ATTR,      /* kids[0].name */
    JN_ITEM,      /* kids[0][kids[1]] */
    JN_SLICE,     /* kids[0][kids[1]:kids[2]:kids[3]] (NULL = omitted) */
    JN_CALL,      /* kids[0](kids[1..]); kwnames[i] names kid i+1 or NULL */
    JN_FILTER,    /* name(kids[0], kids[1..]) */
    JN_TEST,      /* kids[0] is name(kids[1..]); neg for `is not` */
    JN_UNARY,     /* op kids[0]: "-", "+", "not" */
    JN_BINARY,    /* kids[0] op kids[1] */
    JN_AND,
    JN_OR,
    JN_COND, /* kids[1] if kids[0] else kids[2] (kids[2] may be NULL) */
    /* statements */
    JN_BODY,     /* kids in order */
    JN_TEXT,     /* literal output: val */
    JN_OUT,      /* {{ kids[0] }} */
    JN_IF,       /* if kids[0]: kids[1] else kids[2] */
    JN_FOR,      /* for names in kids[0] [if kids[3]]: kids[1] else kids[2] */
    JN_SET,      /* set kids[0] (NAME, TUPLE or ATTR) = kids[1] */
    JN_SETBLOCK, /* set name: body kids[0] */
    JN_MACRO,    /* macro name(names, defaults kids[1..]): body kids[0] */
    JN_CALLBLK,  /* call kids[0] (a JN_CALL) with caller body kids[1] */
    JN_FILTBLK,  /* filter: kids[0] is a JN_FILTER over a placeholder, kids[1] body */
    JN_BREAK,
    JN_CONTINUE
};

typedef struct jj_val jj_val;
typedef struct jj_node jj_node;

/* ------------------------------------------------------------- values */

enum {
    JV_UNDEF = 0, /* jinja2's Undefined: prints empty, is falsy, fails on use */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST,  /* also tuples (flag) */
    JV_DICT,  /* also namespace() and loop (flags) */
    JV_FUNC,  /* built-in global: raise_exception, range, namespace, ... */
    JV_MACRO, /* user macro */
    JV_METHOD /* bound method: self.name */
};

typedef struct {
    size_t n; /* bytes */
    char s[]; /* UTF-8, NUL-terminated */
} jj_str;

typedef struct jj_list jj_list;
typedef struct jj_dict jj_dict;

struct jj_val {
    int kind;  /* JV_* */
    bool safe; /* JV_STR: a markupsafe.Markup (from |safe): `+` escapes
                                * the plain-str operand, as Markup.__add__ does */
    union {
        bool b;           /* JV_BOOL */
        long long i;      /* JV_INT */
        double f;         /* JV_FLOAT */
        const jj_str *s;  /* JV_STR */
        const char *fn;   /* JV_FUNC / JV_METHOD: the name */
        jj_list *l;       /* JV_LIST */
        jj_dict *d;       /* JV_DICT */
        const jj_node *m; /* JV_MACRO */
    } u;
    jj_list *self;        /* JV_METHOD: receiver boxed in a 1-list */
    struct jj_scope *env; /* JV_MACRO: the scope it was defined in */
};

struct jj_list {
    jj_val *v;     /* items */
    size_t n, cap; /* count, capacity */
    bool tuple;    /* a tuple (prints with parentheses) */
};

struct jj_dict {
    jj_val *k, *v; /* keys and values, insertion order */
    size_t n, cap; /* count, capacity */
    bool ns;       /* a namespace(): attributes may be assigned */
};

struct jj_node {
    int kind;         /* JN_* */
    int line;         /* source line for messages */
    const char *name; /* NAME/ATTR/FILTER/TEST/SET/MACRO name; op spelling */
    jj_val val;       /* JN_CONST / JN_TEXT */
    jj_node **kids;   /* children (see kind) */
    size_t nkids;
    const char **kwnames; /* JN_CALL/FILTER/TEST: keyword of kid i+1, NULL if positional */
    const char **names;   /* JN_FOR targets / JN_MACRO params */
    size_t nnames;
    bool neg; /* JN_TEST: `is not` */
};

int jj_parse(jj_arena *a, const jj_tok *toks, size_t ntok, jj_node **root, char *err,
             size_t errlen);

/* ------------------------------------------------------------- render state */

typedef struct jj_scope jj_scope;
struct jj_scope {
    jj_scope *up;  /* enclosing scope, NULL for globals */
    jj_dict *vars; /* this scope's names */
};

typedef struct jj_buf jj_buf;
typedef struct {
    jj_arena *ar;              /* render arena */
    jj_buf *out;               /* current output (swapped for set blocks and macros) */
    size_t max_out;            /* limit on any output buffer */
    int64_t now;               /* strftime_now's clock (seconds since the epoch, UTC) */
    uint64_t steps, max_steps; /* evaluation steps taken / allowed */
    int depth;                 /* nested jj_eval calls (bounded by JJ_MAX_EVAL) */
    int calls, max_depth;      /* macro calls in progress / allowed */
    int rc;                    /* first error code (0 = none) */
    char *err;                 /* message buffer */
    size_t errlen;
    int brk; /* 1 break, 2 continue pending */
} jj_ctx;

/* Record an error (first one wins) and return its code. */
int jj_fail(jj_ctx *c, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* value helpers (jinja_value.c) */
jj_val jj_none(void);
jj_val jj_bool(bool b);
jj_val jj_int(long long i);
jj_val jj_undef(const char *name);
jj_val jj_strn(jj_arena *a, const char *s, size_t n);
jj_val jj_cstr(jj_arena *a, const char *s);
jj_val jj_list_new(jj_arena *a);
jj_val jj_dict_new(jj_arena *a);
int jj_list_push(jj_arena *a, jj_list *l, jj_val v);
int jj_dict_set(jj_arena *a, jj_dict *d, jj_val k, jj_val v);
jj_val *jj_dict_get(const jj_dict *d, const char *key, size_t klen);
jj_val *jj_dict_getv(const jj_dict *d, jj_val key);
bool jj_truthy(jj_val v);
/* Bytes of the Python-whitespace (str.isspace) code point at s[i] of an
 * n-byte string / ending at s[e], or 0. */
size_t jj_space_fwd(const char *s, size_t n, size_t i);
size_t jj_space_back(const char *s, size_t e);
bool jj_equal(jj_val a, jj_val b);
const char *jj_type_name(jj_val v); /* Python's type name: 'str', 'NoneType', ... */

/* Growable byte buffer in the arena (for str(), tojson, joins). */
struct jj_buf {
    jj_ctx *c;     /* owner: arena and limits */
    char *p;       /* bytes, NUL-terminated */
    size_t n, cap; /* length, capacity */
};
int jj_buf_put(jj_buf *b, const char *s, size_t n);
jj_val jj_buf_val(jj_buf *b);

/* str(v) / repr(v) as Python prints them; tojson as json.dumps */
int jj_str_of(jj_buf *b, jj_val v);
int jj_repr_of(jj_buf *b, jj_val v);
int jj_tojson(jj_buf *b, jj_val v, int indent, int level, bool sort);
int jj_num_str(jj_buf *b, jj_val v); /* an int or float as Python prints it */
jj_val jj_to_str(jj_ctx *c, jj_val v);

/* JSON text -> value (jansson) */
int jj_from_json(jj_ctx *c, const char *json, size_t len, jj_val *out);

/* evaluation (jinja_eval.c) */
int jj_eval(jj_ctx *c, jj_scope *sc, const jj_node *n, jj_val *out);
int jj_compare(jj_ctx *c, const char *op, jj_val a, jj_val b, jj_val *out); /* == != < <= > >= */
int jj_exec(jj_ctx *c, jj_scope *sc, const jj_node *n);
int jj_call_value(jj_ctx *c, jj_scope *sc, jj_val fn, jj_val *args, size_t nargs, const char **kw,
                  jj_val *out);
int jj_iter_list(jj_ctx *c, jj_val v, jj_list **out); /* iterable -> list */

/* filters, tests, methods (jinja_filter.c) */
int jj_filter(jj_ctx *c, jj_scope *sc, const char *name, jj_val *args, size_t nargs,
              const char **kw, jj_val *out);
/* Case mapping: 0 lower, 1 upper, 2 capitalize, 3 str.title(), 4 jinja2's
 * |title (jinja_filter.c), by Python's tables (jinja_case.c, generated by
 * tests/tok/gen_jinja_case.py). */
typedef struct {
    uint32_t cp;     /* code point */
    uint32_t up, lo; /* its one-code-point upper / lower case, 0 = unchanged or see jj_case_multi */
} jj_case_entry;
typedef struct {
    uint32_t cp;         /* code point */
    const char *up, *lo; /* UTF-8 of a several-code-point mapping, "" = none */
} jj_case_multi_entry;
extern const jj_case_entry jj_case_one[];
extern const int jj_case_n_one;
extern const jj_case_multi_entry jj_case_multi[];
extern const int jj_case_n_multi;
jj_val jj_case_map(jj_ctx *c, jj_val s, int mode);
int jj_filter_order(jj_ctx *c, const char *name, jj_val *args, size_t nargs, const char **kw,
                    jj_val *out); /* sort min max sum round (jinja_order.c) */
/* str % args (printf-style) and str.format(...) (jinja_format.c) */
int jj_percent_format(jj_ctx *c, jj_val fmt, jj_val args, jj_val *out);
int jj_str_format(jj_ctx *c, jj_val fmt, jj_val *args, size_t nargs, const char **kw, jj_val *out);
int jj_test(jj_ctx *c, jj_scope *sc, const char *name, jj_val *args, size_t nargs, bool *out);
int jj_method(jj_ctx *c, jj_val self, const char *name, jj_val *args, size_t nargs, const char **kw,
              jj_val *out);
bool jj_has_method(jj_val self, const char *name);
int jj_builtin(jj_ctx *c, const char *name, jj_val *args, size_t nargs, const char **kw,
               jj_val *out);

#endif
