/*
 * jinja_tool.c -- renders a Jinja chat template with eng_jinja.h, driven
 * by tests/py/test_jinja_templates.py (and handy by hand).
 *   jinja_tool TEMPLATE CONTEXT.json [NOW]
 * CONTEXT.json is the object of template variables (messages, tools,
 * add_generation_prompt, bos_token, ...); NOW pins strftime_now's clock
 * (seconds since the epoch, UTC).  The render goes to stdout byte for
 * byte, exit 0; a compile or render error prints "E<code> <message>" to
 * stdout and exits 1; a usage or I/O error exits 2.
 *   jinja_tool builtin FORMAT GEN      stdin: one message a line,
 *                                      "hexrole:hexcontent"
 * renders with parley's built-in C renderer of FORMAT instead
 * (eng_tmpl_render_text, tokenizer-less spellings), same output rules, so
 * tests can check eng_jinja on a format's original template against it.
 */
#include <stdio.h>
#include <stdlib.h>

#include <string.h>

#include "eng_jinja.h"
#include "eng_template.h"
#include "pl_err.h"

static char *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    char *buf = NULL;
    size_t cap = 0, n = 0;
    if (!f) return NULL;
    for (;;) {
        if (n == cap) {
            char *p = realloc(buf, cap = cap ? cap * 2 : 65536);
            if (!p) {
                free(buf);
                fclose(f);
                return NULL;
            }
            buf = p;
        }
        size_t r = fread(buf + n, 1, cap - n, f);
        if (!r) break;
        n += r;
    }
    fclose(f);
    *len = n;
    return buf;
}

static int hexval(int c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Decode hex in place; returns the byte count or -1. */
static long unhex(char *s, size_t n) {
    if (n % 2) return -1;
    for (size_t i = 0; i < n; i += 2) {
        int a = hexval(s[i]), b = hexval(s[i + 1]);
        if (a < 0 || b < 0) return -1;
        s[i / 2] = (char)(a * 16 + b);
    }
    return (long)(n / 2);
}

static int builtin(const char *name, bool gen) {
    eng_tmpl_format f;
    eng_tmpl_msg msgs[64];
    int n = 0;
    char err[PL_ERR_LEN], line[1 << 16];
    if (eng_tmpl_from_name(name, &f, err, sizeof err)) return fprintf(stderr, "%s\n", err), 2;
    while (n < 64 && fgets(line, sizeof line, stdin)) {
        size_t len = strcspn(line, "\n");
        char *colon = memchr(line, ':', len);
        if (!colon) continue;
        char *role = strdup(line), *content = strdup(colon + 1);
        long rn = unhex(role, (size_t)(colon - line)),
             cn = unhex(content, len - (size_t)(colon - line) - 1);
        if (rn < 0 || cn < 0) return fprintf(stderr, "bad hex\n"), 2;
        msgs[n++] = (eng_tmpl_msg){
            .role = role, .role_len = (size_t)rn, .content = content, .content_len = (size_t)cn};
    }
    size_t need = 0;
    int rc = eng_tmpl_render_text(f, NULL, msgs, n, gen, NULL, 0, &need, err, sizeof err);
    char *out = rc && rc != ENG_TMPL_ENOSPC ? NULL : malloc(need + 1);
    if (out)
        rc = eng_tmpl_render_text(f, NULL, msgs, n, gen, out, need + 1, &need, err, sizeof err);
    if (rc) printf("E%d %s", rc, err);
    else fwrite(out, 1, need, stdout);
    free(out);
    for (int i = 0; i < n; i++) {
        free((char *)msgs[i].role);
        free((char *)msgs[i].content);
    }
    return rc ? 1 : 0;
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "builtin")) return builtin(argv[2], !strcmp(argv[3], "1"));
    if (argc < 3) {
        fprintf(stderr, "usage: jinja_tool TEMPLATE CONTEXT.json [NOW]\n");
        return 2;
    }
    size_t tl, cl;
    char *tsrc = slurp(argv[1], &tl), *ctx = slurp(argv[2], &cl);
    if (!tsrc || !ctx) {
        fprintf(stderr, "jinja_tool: cannot read %s\n", tsrc ? argv[2] : argv[1]);
        return 2;
    }
    eng_jinja_limits lim = {.now = argc > 3 ? strtoll(argv[3], NULL, 10) : 0};
    char err[PL_ERR_LEN], *out = NULL;
    size_t outlen = 0;
    eng_jinja *t = NULL;
    int rc = eng_jinja_compile(tsrc, tl, &t, err, sizeof err);
    if (!rc) rc = eng_jinja_render(t, ctx, cl, &lim, &out, &outlen, err, sizeof err);
    if (rc) printf("E%d %s", rc, err);
    else fwrite(out, 1, outlen, stdout);
    free(out);
    eng_jinja_free(t);
    free(tsrc);
    free(ctx);
    return rc ? 1 : 0;
}
