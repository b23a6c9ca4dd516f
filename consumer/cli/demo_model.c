/*
 * demo_model.c -- the model files of `parley demo` (demo_model.h): where
 * the installed SmolLM2 is, the synthetic model written once, and what a
 * file says about itself (name, chat template).
 */
#include "demo_model.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_gguf.h"
#include "eng_mkmodel.h"
#include "eng_template.h"
#include "pl_err.h"

/* mkdir -p for the parent directories of path. */
int demo_mkdirs(const char *path) {
    char buf[1024];
    if (snprintf(buf, sizeof buf, "%s", path) >= (int)sizeof buf) return -1;
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return 0;
}

/* Path of the installed default model, SmolLM2-135M-Instruct (deploy/setup.sh
 * model-smollm), into path, or -1 when it is not there. */
int demo_real_model(char *path, size_t n) {
    const char *env = getenv("PARLEY_SMOLLM_MODEL"), *deps = getenv("PARLEY_DEPS"),
               *home = getenv("HOME");
    int w = env && *env ? snprintf(path, n, "%s", env)
            : deps && *deps
                ? snprintf(path, n, "%s/models/SmolLM2-135M-Instruct.Q4_1.gguf", deps)
                : snprintf(path, n, "%s/.cache/parley/models/SmolLM2-135M-Instruct.Q4_1.gguf",
                           home && *home ? home : "/tmp");
    if (w < 0 || (size_t)w >= n) return -1;
    return access(path, R_OK) == 0 ? 0 : -1;
}

/* 1 if the GGUF at path carries tokenizer.chat_template, 0 if not, -1 if
 * it cannot be read (the worker's load reports why). */
int demo_has_template(const char *path) {
    eng_gguf *g;
    char err[PL_ERR_LEN];
    const char *s;
    size_t n;
    if (eng_gguf_open(path, &g, err, sizeof err) != 0) return -1;
    int has = eng_gguf_get_str(g, "tokenizer.chat_template", &s, &n) == 0;
    eng_gguf_close(g);
    return has;
}

/* Which chat template the worker will use for the model at path, in
 * words, into out (the worker's own choice, eng_tmpl_choose: --chat-template
 * NAME wins; else the file's tokenizer.chat_template rendered by parley's
 * Jinja renderer; else, when the subset refuses it or there is none, a
 * built-in format).  "" when none applies (the worker's load says why). */
void demo_template(const char *path, const char *tmpl, char *out, size_t n) {
    eng_gguf *g = NULL;
    eng_tok *tok = NULL;
    eng_tmpl_choice tc;
    char err[PL_ERR_LEN];
    memset(&tc, 0, sizeof tc);
    out[0] = 0;
    if (eng_gguf_open(path, &g, err, sizeof err) != 0) return;
    if (eng_tok_load(g, &tok, err, sizeof err) == 0 &&
        eng_tmpl_choose(g, tok, tmpl, &tc, err, sizeof err) == 0) {
        if (tmpl) snprintf(out, n, "built-in format %s (--chat-template)", eng_tmpl_name(tc.fmt));
        else if (tc.fmt == ENG_TMPL_FILE)
            snprintf(out, n,
                     "the file's own (tokenizer.chat_template), rendered by parley's Jinja "
                     "renderer%s",
                     eng_tmpl_file_renders_tools(tc.file) ? "; it writes tool definitions itself"
                                                          : "");
        else if (tc.note[0])
            snprintf(out, n,
                     "built-in format %s: the file's own is outside parley's Jinja subset "
                     "(%.200s)",
                     eng_tmpl_name(tc.fmt), tc.note);
        else
            snprintf(out, n, "built-in format %s (the file has no chat template)",
                     eng_tmpl_name(tc.fmt));
    }
    eng_tmpl_choice_free(&tc);
    eng_tok_free(tok);
    eng_gguf_close(g);
}

/* The model's general.name (else its file name) into out. */
void demo_model_name(const char *path, char *out, size_t n) {
    eng_gguf *g;
    char err[PL_ERR_LEN];
    const char *s = NULL;
    size_t len = 0;
    const char *base = strrchr(path, '/');
    snprintf(out, n, "%s", base ? base + 1 : path);
    if (eng_gguf_open(path, &g, err, sizeof err) != 0) return;
    if (eng_gguf_get_str(g, "general.name", &s, &len) == 0 && len > 0)
        snprintf(out, n, "%.*s", (int)(len < 100 ? len : 100), s);
    eng_gguf_close(g);
}

/* The synthetic model: reuse the cached file or write it (to a temporary
 * name, renamed when complete) with eng_mkmodel. */
int demo_synthetic_model(char *path, size_t n) {
    const char *deps = getenv("PARLEY_DEPS");
    const char *home = getenv("HOME");
    int w = deps && *deps ? snprintf(path, n, "%s/models/cai-tiny.gguf", deps)
                          : snprintf(path, n, "%s/.cache/parley/models/cai-tiny.gguf",
                                     home && *home ? home : "/tmp");
    if (w < 0 || (size_t)w >= n) return -1;
    if (access(path, R_OK) == 0) return 0;
    char tmp[1100];
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    if (demo_mkdirs(path) != 0) {
        fprintf(stderr, "demo: cannot create the directory of %s: %s\n", path, strerror(errno));
        return -1;
    }
    printf("== writing the synthetic model %s (parley mkmodel --preset cai-tiny)\n", path);
    eng_mkmodel_opts mo;
    eng_mkmodel_opts_default(&mo);
    mo.preset = "cai-tiny";
    mo.out = tmp;
    char err[PL_ERR_LEN * 2] = ""; /* a path and its cause */
    if (eng_mkmodel(&mo, err, sizeof err) != 0 || rename(tmp, path) != 0) {
        fprintf(stderr, "demo: could not write %s%s%s\n", path, *err ? ": " : "", err);
        unlink(tmp);
        return -1;
    }
    return 0;
}
