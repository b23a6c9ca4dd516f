/*
 * jinja_tool.c -- renders a Jinja chat template with eng_jinja.h, driven
 * by tests/py/test_jinja_templates.py (and handy by hand).
 *   jinja_tool TEMPLATE CONTEXT.json [NOW]
 * CONTEXT.json is the object of template variables (messages, tools,
 * add_generation_prompt, bos_token, ...); NOW pins strftime_now's clock
 * (seconds since the epoch, UTC).  The render goes to stdout byte for
 * byte, exit 0; a compile or render error prints "E<code> <message>" to
 * stdout and exits 1; a usage or I/O error exits 2.
 */
#include <stdio.h>
#include <stdlib.h>

#include "eng_jinja.h"
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

int main(int argc, char **argv) {
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
