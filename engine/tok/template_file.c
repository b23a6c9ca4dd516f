/*
 * template_file.c -- the model file's own chat template (eng_template.h,
 * "The model file's own template"): tokenizer.chat_template compiled with
 * eng_jinja.h, rendered per turn to the flat form the built-in formats
 * give (text + template-owned special tokens), then encoded and spliced by
 * the same code; and the choice between it and the built-in formats.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_gguf.h"
#include "eng_jinja.h"
#include "eng_template.h"
#include "tok_internal.h"

struct eng_tmpl_file {
    eng_jinja *j;     /* the compiled template */
    const eng_tok *t; /* the tokenizer whose specials it writes (not owned) */
    char *bos_json;   /* "bos_token": a JSON string ("" when the vocabulary has none) */
    char *eos_json;   /* "eos_token": likewise */
    char eot[64];     /* end-of-turn token spelling ("" : none found) */
};

#define ESC 0x01 /* the byte that breaks a special spelling inside content */

/* Append s[0..n) to b as a JSON string; esc: break special spellings of t
 * (see eng_template.h) and double ESC bytes. */
static int put_json_str(tok_buf *b, const eng_tok *t, const char *s, size_t n, int esc) {
    int rc = tok_buf_put(b, "\"", 1);
    size_t esc_at = (size_t)-1; /* put ESC before this byte (after a special's first character) */
    for (size_t i = 0; i < n && !rc; i++) {
        uint8_t c = (uint8_t)s[i];
        char u[8];
        if (i == esc_at) rc = tok_buf_put(b, "\\u0001", 6);
        if (!rc && esc && tok_control_at(t, s + i, n - i) >= 0) {
            size_t k = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
            esc_at = i + k;
        }
        if (rc) break;
        if (c == '"' || c == '\\') {
            u[0] = '\\';
            u[1] = (char)c;
            rc = tok_buf_put(b, u, 2);
        } else if (c < 0x20) {
            snprintf(u, sizeof u, "\\u%04x", c);
            rc = tok_buf_put(b, u, 6);
            if (!rc && esc && c == ESC) rc = tok_buf_put(b, u, 6);
        } else rc = tok_buf_put(b, s + i, 1);
    }
    if (!rc && esc_at == n) rc = tok_buf_put(b, "\\u0001", 6);
    if (!rc) rc = tok_buf_put(b, "\"", 1);
    return rc ? ENG_TMPL_ENOMEM : 0;
}

/* The JSON context of a render. */
static int build_ctx(const eng_tmpl_file *f, const eng_tmpl_msg *m, int n, bool gen,
                     const char *tools, tok_buf *b) {
    int rc = tok_buf_put(b, "{\"messages\":[", 13);
    for (int i = 0; i < n && !rc; i++) {
        if (i) rc = tok_buf_put(b, ",", 1);
        if (!rc) rc = tok_buf_put(b, "{\"role\":", 8);
        if (!rc) rc = put_json_str(b, f->t, m[i].role, m[i].role_len, 1);
        if (!rc) rc = tok_buf_put(b, ",\"content\":", 11);
        if (!rc) rc = put_json_str(b, f->t, m[i].content, m[i].content_len, 1);
        if (!rc) rc = tok_buf_put(b, "}", 1);
    }
    const char *g = gen ? "],\"add_generation_prompt\":true" : "],\"add_generation_prompt\":false";
    if (!rc) rc = tok_buf_put(b, g, strlen(g));
    if (!rc) rc = tok_buf_put(b, ",\"bos_token\":", 13);
    if (!rc) rc = tok_buf_put(b, f->bos_json, strlen(f->bos_json));
    if (!rc) rc = tok_buf_put(b, ",\"eos_token\":", 13);
    if (!rc) rc = tok_buf_put(b, f->eos_json, strlen(f->eos_json));
    if (!rc) rc = tok_buf_put(b, ",\"tools\":", 9);
    if (!rc) rc = tok_buf_put(b, tools ? tools : "null", strlen(tools ? tools : "null"));
    if (!rc) rc = tok_buf_put(b, "}", 1);
    return rc ? ENG_TMPL_ENOMEM : 0;
}

/* Render and split: the flat text (unescaped) and its template-owned
 * special tokens. */
static int render_flat(const eng_tmpl_file *f, const eng_tmpl_msg *m, int n, bool gen,
                       const char *tools, tok_buf *text, eng_tmpl_special **spec, int *n_spec,
                       char *err, size_t errlen) {
    tok_buf ctx = {0};
    char *r = NULL;
    size_t rn = 0;
    int cap = 0, rc;
    *spec = NULL;
    *n_spec = 0;
    text->n = 0;
    if (n < 0 || (n > 0 && !m)) {
        return pl_errf(err, errlen, ENG_TMPL_EINVAL, "chat template: bad message list");
    }
    if ((rc = build_ctx(f, m, n, gen, tools, &ctx))) goto oom;
    rc = eng_jinja_render(f->j, ctx.v, ctx.n, NULL, &r, &rn, err, errlen);
    if (rc == ENG_JINJA_ENOMEM) goto oom;
    if (rc) {
        rc = ENG_TMPL_EROLE; /* the template refused these messages (err says why) */
        goto done;
    }
    for (size_t i = 0; i < rn;) {
        if ((uint8_t)r[i] == ESC) { /* a doubled ESC is content's own */
            if (i + 1 < rn && (uint8_t)r[i + 1] == ESC && tok_buf_put(text, r + i, 1)) goto oom;
            i += i + 1 < rn && (uint8_t)r[i + 1] == ESC ? 2 : 1;
            continue;
        }
        int32_t id = tok_control_at(f->t, r + i, rn - i);
        if (id < 0) {
            if (tok_buf_put(text, r + i, 1)) goto oom;
            i++;
            continue;
        }
        size_t len = strlen(eng_tok_text(f->t, id));
        if (*n_spec == cap) {
            int nc = cap ? cap * 2 : 32;
            eng_tmpl_special *v = realloc(*spec, (size_t)nc * sizeof *v);
            if (!v) goto oom;
            *spec = v;
            cap = nc;
        }
        (*spec)[(*n_spec)++] = (eng_tmpl_special){(uint32_t)text->n, (uint32_t)len, id};
        if (tok_buf_put(text, r + i, len)) goto oom;
        i += len;
    }
    rc = 0;
    goto done;
oom:
    rc = pl_errf(err, errlen, ENG_TMPL_ENOMEM, "chat template: out of memory");
done:
    if (rc) {
        free(*spec);
        *spec = NULL;
        *n_spec = 0;
    }
    free(ctx.v);
    free(r);
    return rc;
}

/* The end of turn: the special token right after the reply of a
 * [user, assistant] render (whitespace between allowed), else EOS. */
static void find_end_of_turn(eng_tmpl_file *f) {
    static const char reply[] = "PARLEY-END-OF-TURN-PROBE";
    eng_tmpl_msg m[2] = {{"user", 4, "Hi", 2}, {"assistant", 9, reply, sizeof reply - 1}};
    tok_buf text = {0};
    eng_tmpl_special *spec = NULL;
    int n_spec = 0;
    char e[PL_ERR_LEN];
    const char *eos = f->t->eos >= 0 ? eng_tok_text(f->t, f->t->eos) : NULL;
    if (render_flat(f, m, 2, false, NULL, &text, &spec, &n_spec, e, sizeof e) == 0) {
        char *p = NULL;
        for (size_t i = 0; text.v && i + sizeof reply - 1 <= text.n && !p; i++)
            if (memcmp(text.v + i, reply, sizeof reply - 1) == 0) p = text.v + i;
        size_t at = p ? (size_t)(p - text.v) + sizeof reply - 1 : text.n;
        while (p && at < text.n && (text.v[at] == ' ' || text.v[at] == '\n')) at++;
        for (int i = 0; p && i < n_spec; i++)
            if (spec[i].off == at) eos = eng_tok_text(f->t, spec[i].id);
    }
    if (eos && strlen(eos) < sizeof f->eot) strcpy(f->eot, eos);
    free(text.v);
    free(spec);
}

static char *json_of_token(const eng_tok *t, int32_t id) {
    tok_buf b = {0};
    const char *s = id >= 0 ? eng_tok_text(t, id) : NULL;
    if (put_json_str(&b, t, s ? s : "", s ? strlen(s) : 0, 0) || tok_buf_put(&b, "", 1)) {
        free(b.v);
        return NULL;
    }
    return b.v;
}

int eng_tmpl_file_compile(const char *src, size_t len, const eng_tok *t, eng_tmpl_file **out,
                          char *err, size_t errlen) {
    *out = NULL;
    if (!t || (!src && len)) {
        return pl_errf(err, errlen, ENG_TMPL_EINVAL, "chat template: bad argument");
    }
    eng_tmpl_file *f = calloc(1, sizeof *f);
    if (!f) goto oom;
    f->t = t;
    int rc = eng_jinja_compile(src, len, &f->j, err, errlen);
    if (rc) {
        eng_tmpl_file_free(f);
        return rc;
    }
    if (!(f->bos_json = json_of_token(t, t->bos)) || !(f->eos_json = json_of_token(t, t->eos)))
        goto oom;
    find_end_of_turn(f);
    *out = f;
    return 0;
oom:
    eng_tmpl_file_free(f);
    return pl_errf(err, errlen, ENG_TMPL_ENOMEM, "chat template: out of memory");
}

void eng_tmpl_file_free(eng_tmpl_file *f) {
    if (!f) return;
    eng_jinja_free(f->j);
    free(f->bos_json);
    free(f->eos_json);
    free(f);
}

eng_tmpl_turn_end eng_tmpl_file_end_of_turn(const eng_tmpl_file *f) {
    return (eng_tmpl_turn_end){f && f->eot[0] ? f->eot : NULL, NULL};
}

int eng_tmpl_file_render_turn(const eng_tmpl_file *f, const eng_tmpl_msg *msgs, int n, bool add_gen,
                              const char *tools_json, const eng_tmpl_prior *prior,
                              eng_tmpl_turn *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    tok_buf text = {0};
    eng_tmpl_special *spec = NULL;
    int n_spec = 0;
    if (!f) return pl_errf(err, errlen, ENG_TMPL_EINVAL, "chat template: no template");
    int rc = render_flat(f, msgs, n, add_gen, tools_json, &text, &spec, &n_spec, err, errlen);
    if (rc) {
        free(text.v);
        return rc;
    }
    return tmpl_turn_from_flat(f->t, msgs, n, prior, &text, spec, n_spec, out, err, errlen);
}

int eng_tmpl_file_render_text(const eng_tmpl_file *f, const eng_tmpl_msg *msgs, int n, bool add_gen,
                              const char *tools_json, char **out, size_t *n_out, char *err,
                              size_t errlen) {
    tok_buf text = {0};
    eng_tmpl_special *spec = NULL;
    int n_spec = 0;
    *out = NULL;
    *n_out = 0;
    if (!f) return pl_errf(err, errlen, ENG_TMPL_EINVAL, "chat template: no template");
    int rc = render_flat(f, msgs, n, add_gen, tools_json, &text, &spec, &n_spec, err, errlen);
    free(spec);
    if (!rc && tok_buf_put(&text, "", 1))
        rc = pl_errf(err, errlen, ENG_TMPL_ENOMEM, "chat template: out of memory");
    if (rc) {
        free(text.v);
        return rc;
    }
    *out = text.v;
    *n_out = text.n - 1;
    return 0;
}

int eng_tmpl_choose(const eng_gguf *g, const eng_tok *t, const char *override, eng_tmpl_choice *out,
                    char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (override && *override) {
        int rc = eng_tmpl_from_name(override, &out->fmt, err, errlen);
        out->family = out->fmt;
        return rc;
    }
    const char *s;
    size_t n;
    if (!g || !t || eng_gguf_get_str(g, "tokenizer.chat_template", &s, &n) != 0) {
        int rc = eng_tmpl_detect(g, NULL, &out->fmt, err, errlen);
        out->family = out->fmt;
        return rc;
    }
    char e[PL_ERR_LEN];
    if (eng_tmpl_recognise(s, n, &out->family, e, sizeof e) != 0) out->family = ENG_TMPL_NONE;
    int rc = eng_tmpl_file_compile(s, n, t, &out->file, e, sizeof e);
    if (rc == ENG_TMPL_ENOMEM || rc == ENG_JINJA_ENOMEM)
        return pl_errf(err, errlen, ENG_TMPL_ENOMEM, "chat template: out of memory");
    if (rc == 0) {
        out->fmt = ENG_TMPL_FILE;
        if (out->family == ENG_TMPL_NONE) tmpl_arch_format(g, &out->family);
        return 0;
    }
    /* refused: the built-in format it is recognised as, else the architecture's */
    snprintf(out->note, sizeof out->note, "%s", e);
    if (out->family != ENG_TMPL_NONE) {
        out->fmt = out->family;
        return 0;
    }
    if (tmpl_arch_format(g, &out->fmt) == 0) {
        out->family = out->fmt;
        return 0;
    }
    return pl_errf(err, errlen, ENG_TMPL_EUNKNOWN,
                   "the model's chat template (tokenizer.chat_template) is outside the supported "
                   "Jinja subset (%s) and its architecture has no default turn format; set the "
                   "format explicitly with the chat_template option "
                   "(--chat-template llama2|llama3|gemma|gemma2|chatml|smollm2|transcript)",
                   e);
}

void eng_tmpl_choice_free(eng_tmpl_choice *c) {
    if (!c) return;
    eng_tmpl_file_free(c->file);
    memset(c, 0, sizeof *c);
}
