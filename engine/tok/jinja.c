/*
 * jinja.c -- eng_jinja.h's entry points: normalise the source (newlines,
 * the one trailing newline jinja2 drops), lex, parse; render a compiled
 * template over a JSON context inside the sandbox limits.
 */
#include <stdlib.h>
#include <string.h>

#include "eng_jinja.h"
#include "jinja_internal.h"
#include "pl_err.h"

struct eng_jinja {
    jj_arena ar;   /* tokens, tree, the normalised source */
    jj_node *root; /* the template's body */
};

int eng_jinja_compile(const char *src, size_t len, eng_jinja **out, char *err, size_t errlen) {
    int rc;
    if (!src || !out) {
        pl_errf(err, errlen, ENG_JINJA_EINVAL, "eng_jinja_compile: NULL argument");
        return ENG_JINJA_EINVAL;
    }
    *out = NULL;
    eng_jinja *t = calloc(1, sizeof *t);
    if (!t) {
        pl_errf(err, errlen, ENG_JINJA_ENOMEM, "out of memory");
        return ENG_JINJA_ENOMEM;
    }
    t->ar.limit = 64u << 20;
    char *s = jj_alloc(&t->ar, len + 1);
    if (!s) {
        pl_errf(err, errlen, ENG_JINJA_ENOMEM, "out of memory");
        rc = ENG_JINJA_ENOMEM;
        goto err;
    }
    size_t n = 0; /* "\r\n" and "\r" -> "\n" */
    for (size_t i = 0; i < len; i++) {
        if (src[i] == '\r') {
            s[n++] = '\n';
            if (i + 1 < len && src[i + 1] == '\n') i++;
        } else s[n++] = src[i];
    }
    if (n && s[n - 1] == '\n') /* keep_trailing_newline=False */
        n--;
    s[n] = 0;
    jj_tok *toks;
    size_t ntok;
    if ((rc = jj_lex(&t->ar, s, n, &toks, &ntok, err, errlen))) goto err;
    if ((rc = jj_parse(&t->ar, toks, ntok, &t->root, err, errlen))) goto err;
    *out = t;
    return 0;
err:
    eng_jinja_free(t);
    return rc;
}

void eng_jinja_free(eng_jinja *t) {
    if (!t) return;
    jj_arena_free(&t->ar);
    free(t);
}

int eng_jinja_render(const eng_jinja *t, const char *ctx_json, size_t ctx_len,
                     const eng_jinja_limits *lim, char **out, size_t *outlen, char *err,
                     size_t errlen) {
    if (!t || !ctx_json || !out) {
        pl_errf(err, errlen, ENG_JINJA_EINVAL, "eng_jinja_render: NULL argument");
        return ENG_JINJA_EINVAL;
    }
    *out = NULL;
    if (outlen) *outlen = 0;
    eng_jinja_limits L = lim ? *lim : (eng_jinja_limits){0};
    jj_arena ar = {.limit = L.max_memory ? L.max_memory : 64u << 20};
    jj_ctx c = {
        .ar = &ar,
        .max_out = L.max_output ? L.max_output : 4u << 20,
        .now = L.now,
        .max_steps = L.max_steps ? L.max_steps : 10000000,
        .max_depth = L.max_depth > 0 ? L.max_depth : 64,
        .err = err,
        .errlen = errlen,
    };
    jj_buf b = {.c = &c};
    jj_scope globals = {0}, top = {.up = &globals};
    jj_val g;
    int rc;
    c.out = &b;
    if (err && errlen) err[0] = 0;
    if ((rc = jj_from_json(&c, ctx_json, ctx_len, &g))) goto done;
    globals.vars = g.u.d;
    jj_val d = jj_dict_new(&ar);
    if (d.kind != JV_DICT) {
        rc = jj_fail(&c, ENG_JINJA_ELIMIT, "render memory limit reached");
        goto done;
    }
    top.vars = d.u.d;
    if ((rc = jj_exec(&c, &top, t->root))) goto done;
    if (ar.failed) {
        rc = jj_fail(&c, ENG_JINJA_ELIMIT, "render memory limit reached");
        goto done;
    }
    *out = malloc(b.n + 1);
    if (!*out) {
        rc = ENG_JINJA_ENOMEM;
        pl_errf(err, errlen, ENG_JINJA_ENOMEM, "out of memory");
        goto done;
    }
    if (b.n) memcpy(*out, b.p, b.n);
    (*out)[b.n] = 0;
    if (outlen) *outlen = b.n;
done:
    jj_arena_free(&ar);
    return rc;
}
