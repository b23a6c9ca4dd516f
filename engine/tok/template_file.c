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
    int tools_ok;     /* it renders tools, calls and results (probe_tools) */
    int args_string;  /* it shows a call's arguments only as the JSON string */
};

#define ESC 0x01 /* the byte that breaks a special spelling inside content */

/* Append s[0..n) to b as a JSON string; esc: break special spellings of t
 * (see eng_template.h) and double ESC bytes. */
static int put_json_str(tok_buf *b, const eng_tok *t, const char *s, size_t n, int esc) {
    int rc = tok_buf_put(b, "\"", 1);
    esc = esc && t;             /* no tokenizer: nothing to break, nothing unescapes */
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

static int hex4(const char *s, size_t n, size_t i, unsigned *v) {
    *v = 0;
    for (size_t k = 0; k < 4; k++) {
        char c = i + k < n ? s[i + k] : 0;
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return -1;
        *v = *v * 16 + (unsigned)d;
    }
    return 0;
}

/* Decode the JSON string starting after the quote at s[*i] into raw bytes
 * (tmp); *i ends after the closing quote.  -1 when it is not one. */
static int json_str_decode(const char *s, size_t n, size_t *i, tok_buf *tmp) {
    tmp->n = 0;
    for (size_t k = *i; k < n;) {
        char c = s[k];
        if (c == '"') {
            *i = k + 1;
            return 0;
        }
        if (c != '\\') {
            if (tok_buf_put(tmp, s + k, 1)) return -2;
            k++;
            continue;
        }
        if (k + 1 >= n) return -1;
        char e = s[k + 1], o = 0;
        unsigned u, lo;
        switch (e) {
        case '"': o = '"'; break;
        case '\\': o = '\\'; break;
        case '/': o = '/'; break;
        case 'b': o = '\b'; break;
        case 'f': o = '\f'; break;
        case 'n': o = '\n'; break;
        case 'r': o = '\r'; break;
        case 't': o = '\t'; break;
        case 'u': break;
        default: return -1;
        }
        if (e != 'u') {
            if (tok_buf_put(tmp, &o, 1)) return -2;
            k += 2;
            continue;
        }
        if (hex4(s, n, k + 2, &u)) return -1;
        k += 6;
        if (u >= 0xD800 && u < 0xDC00 && k + 1 < n && s[k] == '\\' && s[k + 1] == 'u' &&
            !hex4(s, n, k + 2, &lo) && lo >= 0xDC00 && lo < 0xE000) {
            u = 0x10000 + ((u - 0xD800) << 10) + (lo - 0xDC00);
            k += 6;
        }
        char b[4];
        size_t m = u < 0x80 ? 1 : u < 0x800 ? 2 : u < 0x10000 ? 3 : 4;
        if (m == 1) b[0] = (char)u;
        else if (m == 2) b[0] = (char)(0xC0 | (u >> 6)), b[1] = (char)(0x80 | (u & 0x3F));
        else if (m == 3)
            b[0] = (char)(0xE0 | (u >> 12)), b[1] = (char)(0x80 | ((u >> 6) & 0x3F)),
            b[2] = (char)(0x80 | (u & 0x3F));
        else
            b[0] = (char)(0xF0 | (u >> 18)), b[1] = (char)(0x80 | ((u >> 12) & 0x3F)),
            b[2] = (char)(0x80 | ((u >> 6) & 0x3F)), b[3] = (char)(0x80 | (u & 0x3F));
        if (tok_buf_put(tmp, b, m)) return -2;
    }
    return -1;
}

/* Append JSON text s[0..n) to b with every string's special spellings
 * broken (put_json_str's escaping); the structure is copied as it is (the
 * render's JSON parser checks it).  0, ENG_TMPL_EINVAL for an unterminated
 * or badly escaped string, ENG_TMPL_ENOMEM. */
static int put_json_escaped(tok_buf *b, const eng_tok *t, const char *s, size_t n) {
    tok_buf tmp = {0};
    int rc = 0;
    for (size_t i = 0; i < n && !rc;) {
        if (s[i] != '"') {
            size_t k = i;
            while (k < n && s[k] != '"') k++;
            if (tok_buf_put(b, s + i, k - i)) rc = ENG_TMPL_ENOMEM;
            i = k;
            continue;
        }
        i++;
        int d = json_str_decode(s, n, &i, &tmp);
        if (d) rc = d == -2 ? ENG_TMPL_ENOMEM : ENG_TMPL_EINVAL;
        else rc = put_json_str(b, t, tmp.v ? tmp.v : "", tmp.n, 1);
    }
    free(tmp.v);
    return rc;
}

/* Append a message's optional member ,"key":value. */
static int put_member(tok_buf *b, const eng_tok *t, const char *key, const char *v, size_t n,
                      int json) {
    int rc = tok_buf_put(b, ",\"", 2);
    if (!rc) rc = tok_buf_put(b, key, strlen(key));
    if (!rc) rc = tok_buf_put(b, "\":", 2);
    if (rc) return ENG_TMPL_ENOMEM;
    return json ? put_json_escaped(b, t, v, n) : put_json_str(b, t, v, n, 1);
}

/* The JSON context of a render (eng_template.h, "Variables"); bos and
 * eos are JSON strings. */
static int build_ctx(const eng_tok *t, const eng_tmpl_msg *m, int n, bool gen, const char *tools,
                     const char *bos, const char *eos, tok_buf *b) {
    int rc = tok_buf_put(b, "{\"messages\":[", 13) ? ENG_TMPL_ENOMEM : 0;
    for (int i = 0; i < n && !rc; i++) {
        rc = tok_buf_put(b, i ? ",{\"role\":" : "{\"role\":", i ? 9 : 8) ? ENG_TMPL_ENOMEM : 0;
        if (!rc) rc = put_json_str(b, t, m[i].role, m[i].role_len, 1);
        if (!rc && tok_buf_put(b, ",\"content\":", 11)) rc = ENG_TMPL_ENOMEM;
        if (!rc) rc = put_json_str(b, t, m[i].content, m[i].content_len, 1);
        if (!rc && m[i].tool_calls)
            rc = put_member(b, t, "tool_calls", m[i].tool_calls, m[i].tool_calls_len, 1);
        if (!rc && m[i].tool_call_id)
            rc = put_member(b, t, "tool_call_id", m[i].tool_call_id, m[i].tool_call_id_len, 0);
        if (!rc && m[i].name) rc = put_member(b, t, "name", m[i].name, m[i].name_len, 0);
        if (!rc && tok_buf_put(b, "}", 1)) rc = ENG_TMPL_ENOMEM;
    }
    const char *g = gen ? "],\"add_generation_prompt\":true" : "],\"add_generation_prompt\":false";
    if (!rc && (tok_buf_put(b, g, strlen(g)) || tok_buf_put(b, ",\"bos_token\":", 13) ||
                tok_buf_put(b, bos, strlen(bos)) || tok_buf_put(b, ",\"eos_token\":", 13) ||
                tok_buf_put(b, eos, strlen(eos)) || tok_buf_put(b, ",\"tools\":", 9)))
        rc = ENG_TMPL_ENOMEM;
    if (!rc && tools) rc = put_json_escaped(b, t, tools, strlen(tools));
    else if (!rc && tok_buf_put(b, "null", 4)) rc = ENG_TMPL_ENOMEM;
    if (!rc && tok_buf_put(b, "}", 1)) rc = ENG_TMPL_ENOMEM;
    return rc;
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
    if ((rc = build_ctx(f->t, m, n, gen, tools, f->bos_json, f->eos_json, &ctx))) {
        if (rc == ENG_TMPL_ENOMEM) goto oom;
        rc = pl_errf(err, errlen, ENG_TMPL_EINVAL, "chat template: tools or tool_calls not JSON");
        goto done;
    }
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
    eng_tmpl_msg m[2] = {
        {.role = "user", .role_len = 4, .content = "Hi", .content_len = 2},
        {.role = "assistant", .role_len = 9, .content = reply, .content_len = sizeof reply - 1}};
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

/* 1 when a render of m[0..n) (tools as given) succeeds and contains all
 * of want[] (NULL-terminated). */
static int probe_has(const eng_tmpl_file *f, const eng_tmpl_msg *m, int n, const char *tools,
                     const char *const *want) {
    tok_buf text = {0};
    eng_tmpl_special *spec = NULL;
    int n_spec = 0, ok = 0;
    char e[PL_ERR_LEN];
    if (render_flat(f, m, n, true, tools, &text, &spec, &n_spec, e, sizeof e) == 0 &&
        !tok_buf_put(&text, "", 1)) {
        ok = 1;
        for (int i = 0; want[i] && ok; i++) ok = strstr(text.v, want[i]) != NULL;
    }
    free(text.v);
    free(spec);
    return ok;
}

/* Whether the template renders tool use itself (eng_template.h, "Tools"):
 * the probe tool's name in a render of [user] with tools, and a
 * conversation with a call and its result renders and shows the result;
 * and whether it wants a call's arguments as the JSON string (it shows
 * them only so).  The call id is 9 alphanumerics, as Mistral's templates
 * insist, and an assistant reply follows the result so that templates
 * checking user/assistant alternation accept it. */
static void probe_tools(eng_tmpl_file *f) {
    static const char tools[] =
        "[{\"type\":\"function\",\"function\":{\"name\":\"parley_probe_fn\",\"description\":"
        "\"Probe.\",\"parameters\":{\"type\":\"object\",\"properties\":{\"q\":{\"type\":"
        "\"string\"}},\"required\":[\"q\"]}}}]";
    static const char obj[] = "[{\"id\":\"parley001\",\"type\":\"function\",\"function\":{"
                              "\"name\":\"parley_probe_fn\",\"arguments\":{\"q\":\"probe_arg\"}}}]";
    static const char str[] = "[{\"id\":\"parley001\",\"type\":\"function\",\"function\":{"
                              "\"name\":\"parley_probe_fn\",\"arguments\":\"{\\\"q\\\": "
                              "\\\"probe_arg\\\"}\"}}]";
    eng_tmpl_msg m[5] = {{.role = "user", .role_len = 4, .content = "Hi", .content_len = 2},
                         {.role = "assistant",
                          .role_len = 9,
                          .content = "",
                          .tool_calls = obj,
                          .tool_calls_len = sizeof obj - 1},
                         {.role = "tool",
                          .role_len = 4,
                          .content = "probe_result",
                          .content_len = 12,
                          .tool_call_id = "parley001",
                          .tool_call_id_len = 9,
                          .name = "parley_probe_fn",
                          .name_len = 15},
                         {.role = "assistant", .role_len = 9, .content = "Done", .content_len = 4},
                         {.role = "user", .role_len = 4, .content = "Thanks", .content_len = 6}};
    static const char *const want_def[] = {"parley_probe_fn", NULL};
    static const char *const want_res[] = {"probe_result", NULL};
    static const char *const want_arg[] = {"probe_arg", "probe_result", NULL};
    if (!probe_has(f, m, 1, tools, want_def)) return;
    if (probe_has(f, m, 5, tools, want_arg)) {
        f->tools_ok = 1;
        return;
    }
    m[1].tool_calls = str;
    m[1].tool_calls_len = sizeof str - 1;
    if (probe_has(f, m, 5, tools, want_arg)) {
        f->tools_ok = f->args_string = 1;
        return;
    }
    m[1].tool_calls = obj; /* renders without showing the call: the template's choice */
    m[1].tool_calls_len = sizeof obj - 1;
    f->tools_ok = probe_has(f, m, 5, tools, want_res);
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
    probe_tools(f);
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

bool eng_tmpl_file_renders_tools(const eng_tmpl_file *f) { return f && f->tools_ok; }

bool eng_tmpl_file_tool_args_string(const eng_tmpl_file *f) { return f && f->args_string; }

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

int eng_tmpl_file_context(const eng_tok *t, const eng_tmpl_msg *msgs, int n, bool add_gen,
                          const char *tools_json, const char *bos, const char *eos, char **out,
                          size_t *n_out, char *err, size_t errlen) {
    tok_buf b = {0}, bj = {0}, ej = {0};
    *out = NULL;
    *n_out = 0;
    if (n < 0 || (n > 0 && !msgs))
        return pl_errf(err, errlen, ENG_TMPL_EINVAL, "chat template: bad message list");
    int rc = put_json_str(&bj, NULL, bos ? bos : "", bos ? strlen(bos) : 0, 0);
    if (!rc) rc = put_json_str(&ej, NULL, eos ? eos : "", eos ? strlen(eos) : 0, 0);
    if (!rc && (tok_buf_put(&bj, "", 1) || tok_buf_put(&ej, "", 1))) rc = ENG_TMPL_ENOMEM;
    if (!rc) rc = build_ctx(t, msgs, n, add_gen, tools_json, bj.v, ej.v, &b);
    if (!rc && tok_buf_put(&b, "", 1)) rc = ENG_TMPL_ENOMEM;
    free(bj.v);
    free(ej.v);
    if (rc) {
        free(b.v);
        return rc == ENG_TMPL_ENOMEM
                   ? pl_errf(err, errlen, ENG_TMPL_ENOMEM, "chat template: out of memory")
                   : pl_errf(err, errlen, ENG_TMPL_EINVAL,
                             "chat template: tools or tool_calls not JSON");
    }
    *out = b.v;
    *n_out = b.n - 1;
    return 0;
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
