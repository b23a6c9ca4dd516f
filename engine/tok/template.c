/*
 * template.c -- the built-in chat formats (llama2, llama3, gemma, chatml,
 * transcript),
 * each a C transcription of its original Jinja template (quoted above each
 * renderer), rendered to text or straight to token ids.
 *
 * A render is a list of segments: text (template literals and message
 * content) or a template-owned special token.  Text output concatenates
 * them; id output encodes each run of adjacent text segments WITHOUT
 * special-token parsing (so content cannot inject control tokens) and puts
 * the special tokens in by id.  Jinja's trim / str.strip() remove Python
 * whitespace (str.isspace), reproduced with the generated Unicode table.
 */
#include <stdlib.h>
#include <string.h>

#include "eng_template.h"
#include "tok_internal.h"

typedef struct seg {
    const char *p; /* text (special: the token's spelling) */
    size_t n;      /* bytes */
    int special;   /* 1: a special token to encode by id */
} seg;

typedef struct segs {
    seg *v;     /* segments */
    int n, cap; /* used / allocated */
    int oom;    /* an append failed */
} segs;

static void add(segs *s, const char *p, size_t n, int special) {
    if (s->oom || (n == 0 && !special)) return;
    if (s->n == s->cap) {
        int nc = s->cap ? s->cap * 2 : 32;
        seg *v = realloc(s->v, (size_t)nc * sizeof *v);
        if (!v) {
            s->oom = 1;
            return;
        }
        s->v = v;
        s->cap = nc;
    }
    s->v[s->n++] = (seg){p, n, special};
}
#define LIT(s, str) add((s), (str), sizeof(str) - 1, 0)
#define SPECIAL(s, str) add((s), (str), sizeof(str) - 1, 1)

static int is_pyspace_at(const char *p, size_t n, size_t *len) {
    uint32_t cp;
    size_t bad;
    int k = tok_utf8_decode((const uint8_t *)p, n, &cp, &bad);
    if (k <= 0) return 0;
    *len = (size_t)k;
    return (tok_unicode_flags(cp) & TOK_UF_PYSPACE) != 0;
}

/* Python str.strip() on p[0..*n): adjusts p and n. */
static void pystrip(const char **p, size_t *n) {
    size_t k;
    while (*n && is_pyspace_at(*p, *n, &k)) *p += k, *n -= k;
    while (*n) {
        size_t back = 1;
        while (back < *n && back < 4 && (((uint8_t)(*p)[*n - back]) & 0xC0) == 0x80) back++;
        if (!is_pyspace_at(*p + *n - back, back, &k) || k != back) break;
        *n -= back;
    }
}

static int role_is(const eng_tmpl_msg *m, const char *r) {
    return m->role_len == strlen(r) && memcmp(m->role, r, m->role_len) == 0;
}

static const char *tok_or(const eng_tok *t, int32_t id, const char *dflt) {
    const char *s = t ? eng_tok_text(t, id) : NULL;
    return s ? s : dflt;
}

static int alternate_err(char *err, size_t errlen) {
    return pl_errf(
        err, errlen, ENG_TMPL_EROLE,
        "chat template: Conversation roles must alternate user/assistant/user/assistant/...");
}

/* {% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}
 * {% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}
 * {% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception(...) }}{% endif %}
 * {% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}
 * {% else %}{% set content = message['content'] %}{% endif %}
 * {% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}
 * {% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %} */
static int r_llama2(const eng_tok *t, const eng_tmpl_msg *m, int n, segs *s, char *err,
                    size_t errlen) {
    const char *bos = tok_or(t, t ? t->bos : -1, "<s>"), *eos = tok_or(t, t ? t->eos : -1, "</s>");
    if (n == 0) {
        return pl_errf(err, errlen, ENG_TMPL_EROLE, "chat template llama2: no messages");
    }
    int first = role_is(&m[0], "system") ? 1 : 0;
    for (int i = first; i < n; i++) {
        int idx = i - first;
        if (role_is(&m[i], "user") != (idx % 2 == 0)) return alternate_err(err, errlen);
        const char *c = m[i].content;
        size_t cn = m[i].content_len;
        if (role_is(&m[i], "user")) {
            add(s, bos, strlen(bos), 1);
            LIT(s, "[INST] ");
            if (idx == 0 && first) {
                /* strip() of '<<SYS>>\n' + system + '\n<</SYS>>\n\n' + content: only the content's end is stripped */
                LIT(s, "<<SYS>>\n");
                add(s, m[0].content, m[0].content_len, 0);
                const char *c0 = c;
                size_t n0 = cn;
                pystrip(&c0, &n0);
                if (n0 == 0) {
                    LIT(s, "\n<</SYS>>"); /* strip() ate the blank lines too */
                } else {
                    LIT(s, "\n<</SYS>>\n\n");
                    add(s, c, (size_t)(c0 - c) + n0, 0);
                }
            } else {
                pystrip(&c, &cn);
                add(s, c, cn, 0);
            }
            LIT(s, " [/INST]");
        } else if (role_is(&m[i], "assistant")) {
            pystrip(&c, &cn);
            LIT(s, " ");
            add(s, c, cn, 0);
            LIT(s, " ");
            add(s, eos, strlen(eos), 1);
        }
    }
    return 0;
}

/* {% set loop_messages = messages %}{% for message in loop_messages %}
 * {% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' %}
 * {% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}
 * {% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %} */
static int r_llama3(const eng_tok *t, const eng_tmpl_msg *m, int n, bool gen, segs *s) {
    const char *bos = tok_or(t, t ? t->bos : -1, "<|begin_of_text|>");
    for (int i = 0; i < n; i++) {
        if (i == 0) add(s, bos, strlen(bos), 1);
        SPECIAL(s, "<|start_header_id|>");
        add(s, m[i].role, m[i].role_len, 0);
        SPECIAL(s, "<|end_header_id|>");
        LIT(s, "\n\n");
        const char *c = m[i].content;
        size_t cn = m[i].content_len;
        pystrip(&c, &cn);
        add(s, c, cn, 0);
        SPECIAL(s, "<|eot_id|>");
    }
    if (gen) {
        SPECIAL(s, "<|start_header_id|>");
        LIT(s, "assistant");
        SPECIAL(s, "<|end_header_id|>");
        LIT(s, "\n\n");
    }
    return 0;
}

/* Gemma 3 (strict = 0) and Gemma 1/2 (strict = 1: the template begins
 * {{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}
 * and has no system folding; otherwise the same turns).  Gemma 3's:
 * {{ bos_token }}{%- if messages[0]['role'] == 'system' -%}{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}
 * {%- set loop_messages = messages[1:] -%}{%- else -%}{%- set first_user_prefix = "" -%}{%- set loop_messages = messages -%}{%- endif -%}
 * {%- for message in loop_messages -%}{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}{{ raise_exception(...) }}{%- endif -%}
 * {%- if (message['role'] == 'assistant') -%}{%- set role = "model" -%}{%- else -%}{%- set role = message['role'] -%}{%- endif -%}
 * {{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else "") }}{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}
 * {%- endfor -%}{%- if add_generation_prompt -%}{{'<start_of_turn>model\n'}}{%- endif -%} */
static int r_gemma(const eng_tok *t, const eng_tmpl_msg *m, int n, bool gen, int strict, segs *s,
                   char *err, size_t errlen) {
    const char *bos = tok_or(t, t ? t->bos : -1, "<bos>");
    if (n == 0) {
        return pl_errf(err, errlen, ENG_TMPL_EROLE, "chat template gemma: no messages");
    }
    if (strict && role_is(&m[0], "system")) {
        return pl_errf(err, errlen, ENG_TMPL_EROLE,
                       "chat template gemma2: System role not supported");
    }
    add(s, bos, strlen(bos), 1);
    int first = role_is(&m[0], "system") ? 1 : 0;
    for (int i = first; i < n; i++) {
        int idx = i - first;
        if (role_is(&m[i], "user") != (idx % 2 == 0)) return alternate_err(err, errlen);
        SPECIAL(s, "<start_of_turn>");
        if (role_is(&m[i], "assistant")) LIT(s, "model");
        else add(s, m[i].role, m[i].role_len, 0);
        LIT(s, "\n");
        if (idx == 0 && first) {
            add(s, m[0].content, m[0].content_len, 0);
            LIT(s, "\n\n");
        }
        const char *c = m[i].content;
        size_t cn = m[i].content_len;
        pystrip(&c, &cn);
        add(s, c, cn, 0);
        SPECIAL(s, "<end_of_turn>");
        LIT(s, "\n");
    }
    if (gen) {
        SPECIAL(s, "<start_of_turn>");
        LIT(s, "model\n");
    }
    return 0;
}

/* {% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}
 * {% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %} */
/* chatml; dflt_sys (smollm2) is the system message put first when the
 * conversation does not start with one.  SmolLM2-135M-Instruct's template
 * (tests/tok/templates/smollm2.jinja):
 * {% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}
 * {{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n' }}
 * {% endif %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}
 * {% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %} */
static int r_chatml(const eng_tmpl_msg *m, int n, bool gen, const char *dflt_sys, segs *s) {
    if (dflt_sys && n > 0 && !(m[0].role_len == 6 && memcmp(m[0].role, "system", 6) == 0)) {
        SPECIAL(s, "<|im_start|>");
        LIT(s, "system\n");
        add(s, dflt_sys, strlen(dflt_sys), 0);
        SPECIAL(s, "<|im_end|>");
        LIT(s, "\n");
    }
    for (int i = 0; i < n; i++) {
        SPECIAL(s, "<|im_start|>");
        add(s, m[i].role, m[i].role_len, 0);
        LIT(s, "\n");
        add(s, m[i].content, m[i].content_len, 0);
        SPECIAL(s, "<|im_end|>");
        LIT(s, "\n");
    }
    if (gen) {
        SPECIAL(s, "<|im_start|>");
        LIT(s, "assistant\n");
    }
    return 0;
}

/* parley's own format for base models (tests/tok/templates/transcript.jinja):
 * {{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ messages[0]['content'] | trim + '\n\n' }}
 * {% set loop_messages = messages[1:] %}{% else %}{% set loop_messages = messages %}{% endif %}
 * {% for message in loop_messages %}{% if message['role'] == 'user' %}{{ 'User: ' + message['content'] | trim + '\n' }}
 * {% elif message['role'] == 'assistant' %}{{ 'Assistant: ' + message['content'] | trim + '\n' }}
 * {% else %}{{ raise_exception(...) }}{% endif %}{% endfor %}{% if add_generation_prompt %}{{ 'Assistant:' }}{% endif %} */
static int r_transcript(const eng_tok *t, const eng_tmpl_msg *m, int n, bool gen, segs *s,
                        char *err, size_t errlen) {
    const char *bos = tok_or(t, t ? t->bos : -1, "<bos>");
    add(s, bos, strlen(bos), 1);
    for (int i = 0; i < n; i++) {
        const char *c = m[i].content;
        size_t cn = m[i].content_len;
        pystrip(&c, &cn);
        if (i == 0 && role_is(&m[i], "system")) {
            add(s, c, cn, 0);
            LIT(s, "\n\n");
            continue;
        }
        if (role_is(&m[i], "user")) LIT(s, "User: ");
        else if (role_is(&m[i], "assistant")) LIT(s, "Assistant: ");
        else {
            return pl_errf(
                err, errlen, ENG_TMPL_EROLE,
                "chat template transcript: roles are user and assistant after an optional "
                "first system message");
        }
        add(s, c, cn, 0);
        LIT(s, "\n");
    }
    if (gen) LIT(s, "Assistant:");
    return 0;
}

static int render(eng_tmpl_format f, const eng_tok *t, const eng_tmpl_msg *m, int n, bool gen,
                  segs *s, char *err, size_t errlen) {
    if (n < 0 || (n > 0 && !m)) {
        return pl_errf(err, errlen, ENG_TMPL_EINVAL, "chat template: bad message list");
    }
    for (int i = 0; i < n; i++) {
        if ((!m[i].role && m[i].role_len) || (!m[i].content && m[i].content_len)) {
            return pl_errf(err, errlen, ENG_TMPL_EINVAL,
                           "chat template: message %d has a NULL role or content", i);
        }
    }
    int rc;
    switch (f) {
    case ENG_TMPL_LLAMA2: rc = r_llama2(t, m, n, s, err, errlen); break;
    case ENG_TMPL_LLAMA3: rc = r_llama3(t, m, n, gen, s); break;
    case ENG_TMPL_GEMMA: rc = r_gemma(t, m, n, gen, 0, s, err, errlen); break;
    case ENG_TMPL_GEMMA2: rc = r_gemma(t, m, n, gen, 1, s, err, errlen); break;
    case ENG_TMPL_CHATML: rc = r_chatml(m, n, gen, NULL, s); break;
    case ENG_TMPL_SMOLLM2:
        rc = r_chatml(m, n, gen,
                      "You are a helpful AI assistant named SmolLM, trained by Hugging Face", s);
        break;
    case ENG_TMPL_TRANSCRIPT: rc = r_transcript(t, m, n, gen, s, err, errlen); break;
    default: return pl_errf(err, errlen, ENG_TMPL_EUNKNOWN, "chat template: no format chosen");
    }
    if (rc == 0 && s->oom) {
        rc = pl_errf(err, errlen, ENG_TMPL_ENOMEM, "chat template: out of memory");
    }
    return rc;
}

int eng_tmpl_validate(eng_tmpl_format f, const eng_tmpl_msg *msgs, int n, char *err,
                      size_t errlen) {
    segs s = {0};
    int rc = render(f, NULL, msgs, n, false, &s, err, errlen);
    free(s.v);
    return rc;
}

int eng_tmpl_render_text(eng_tmpl_format f, const eng_tok *t, const eng_tmpl_msg *msgs, int n,
                         bool add_gen, char *out, size_t cap, size_t *n_out, char *err,
                         size_t errlen) {
    segs s = {0};
    *n_out = 0;
    int rc = render(f, t, msgs, n, add_gen, &s, err, errlen);
    if (rc) goto done;
    size_t total = 0;
    for (int i = 0; i < s.n; i++) total += s.v[i].n;
    *n_out = total;
    if (total > cap) {
        rc = pl_errf(err, errlen, ENG_TMPL_ENOSPC, "chat template: %zu bytes do not fit in %zu",
                     total, cap);
        goto done;
    }
    size_t w = 0;
    for (int i = 0; i < s.n; i++) {
        if (s.v[i].n) memcpy(out + w, s.v[i].p, s.v[i].n);
        w += s.v[i].n;
    }
    if (w < cap) out[w] = 0;
done:
    free(s.v);
    return rc;
}

/* The render as one text (specials spelled) and the list of its special
 * tokens with their ids (tok_internal.h). */
int tmpl_render_flat(eng_tmpl_format f, const eng_tok *t, const eng_tmpl_msg *msgs, int n,
                     bool add_gen, tok_buf *text, eng_tmpl_special **spec, int *n_spec, char *err,
                     size_t errlen) {
    segs s = {0};
    *spec = NULL;
    *n_spec = 0;
    text->n = 0;
    if (!t) {
        return pl_errf(err, errlen, ENG_TMPL_EINVAL,
                       "chat template: rendering to ids needs a tokenizer");
    }
    int rc = render(f, t, msgs, n, add_gen, &s, err, errlen), k = 0;
    for (int i = 0; i < s.n && !rc; i++) k += s.v[i].special;
    if (!rc && k && !(*spec = malloc((size_t)k * sizeof **spec))) rc = ENG_TMPL_ENOMEM;
    for (int i = 0; i < s.n && !rc; i++) {
        if (s.v[i].special) {
            int32_t id = tok_vocab_lookup(t, s.v[i].p, s.v[i].n);
            if (id < 0) {
                rc = pl_errf(err, errlen, ENG_TMPL_EVOCAB,
                             "chat template %s: token \"%.*s\" is not in the vocabulary",
                             eng_tmpl_name(f), (int)(s.v[i].n > 40 ? 40 : s.v[i].n), s.v[i].p);
                break;
            }
            (*spec)[(*n_spec)++] = (eng_tmpl_special){(uint32_t)text->n, (uint32_t)s.v[i].n, id};
        }
        if (tok_buf_put(text, s.v[i].p, s.v[i].n)) rc = ENG_TMPL_ENOMEM;
    }
    if (rc == ENG_TMPL_ENOMEM) pl_errf(err, errlen, rc, "chat template: out of memory");
    if (rc) {
        free(*spec);
        *spec = NULL;
        *n_spec = 0;
    }
    free(s.v);
    return rc;
}

/* Encode text[from..n_text) of a flat render (tok_internal.h): each run of
 * text between special tokens WITHOUT special-token parsing, the special
 * tokens by id.  When from falls inside a run, that run's rest continues
 * ids encoded before: no SPM space prefix for it. */
int tmpl_encode_flat(const eng_tok *t, const char *text, size_t n_text,
                     const eng_tmpl_special *spec, int n_spec, size_t from, tok_ids *out, char *err,
                     size_t errlen) {
    size_t pos = from;
    int i = 0;
    while (i < n_spec && spec[i].off < from) i++;
    int mid = from > 0 && !(i > 0 && spec[i - 1].off + spec[i - 1].len == from);
    for (;; i++, mid = 0) {
        size_t end = i < n_spec ? spec[i].off : n_text;
        if (end > pos) {
            int rc = tok_encode_ids(t, text + pos, end - pos, mid ? TOK_ENC_CONTINUE : 0, out, err,
                                    errlen);
            /* a tokenizer code becomes this module's, same class (pl_err.h) */
            if (rc) return pl_err_recode(rc, PL_ERR_TMPL, ENG_TMPL_EINVAL);
        }
        if (i == n_spec) return 0;
        if (tok_ids_push(out, spec[i].id))
            return pl_errf(err, errlen, ENG_TMPL_ENOMEM, "chat template: out of memory");
        pos = spec[i].off + spec[i].len;
    }
}

int eng_tmpl_render_ids(eng_tmpl_format f, const eng_tok *t, const eng_tmpl_msg *msgs, int n,
                        bool add_gen, int32_t *ids, int cap, int *n_out, char *err, size_t errlen) {
    tok_buf text = {0};
    tok_ids v = {0};
    eng_tmpl_special *spec = NULL;
    int n_spec = 0;
    *n_out = 0;
    int rc = tmpl_render_flat(f, t, msgs, n, add_gen, &text, &spec, &n_spec, err, errlen);
    if (!rc) rc = tmpl_encode_flat(t, text.v, text.n, spec, n_spec, 0, &v, err, errlen);
    if (rc) goto done;
    *n_out = v.n;
    if (v.n > cap) {
        rc = pl_errf(err, errlen, ENG_TMPL_ENOSPC, "chat template: %d ids do not fit in %d", v.n,
                     cap);
        goto done;
    }
    if (v.n) memcpy(ids, v.v, (size_t)v.n * sizeof *ids);
done:
    free(spec);
    free(text.v);
    free(v.v);
    return rc;
}

int eng_tmpl_stable_prefix(eng_tmpl_format f, const eng_tok *t, const int32_t *ids, int n_ids) {
    (void)f;
    int last = 0;
    for (int i = 0; i < n_ids; i++)
        if (eng_tok_is_special(t, ids[i])) last = i + 1;
    return last;
}
