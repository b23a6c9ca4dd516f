/*
 * template_detect.c -- choosing a chat format: by name, by recognising a
 * model's tokenizer.chat_template text, or, for a file without one, by its
 * architecture.
 *
 * Recognition is exact on a normalised form: Jinja whitespace-control
 * dashes ("{%-", "-%}", "{{-", "-}}") and every whitespace character outside
 * quoted string literals are removed, then the result is compared with the
 * normalised known template texts below (the originals from the models'
 * tokenizer_config.json; tests/tok/templates/ holds the same texts and the
 * tests render them with transformers).  Inside string literals whitespace
 * is kept and the escapes \n \t \r \\ \' \" are replaced by the
 * characters they stand for, so a template written with real newlines in
 * its literals matches, and templates that differ in the text they emit are
 * never confused.  Anything else is "not recognised" here (eng_tmpl_choose,
 * template_file.c, renders a file's template with eng_jinja instead), and guessing from marker substrings would silently mis-render look-alike
 * templates (Llama 3.1 adds a dated system header, Qwen a default system
 * prompt), so an unknown template needs an explicit override.
 */
#include <stdlib.h>
#include <string.h>

#include "eng_gguf.h"
#include "eng_template.h"
#include "tok_internal.h"

typedef struct known_tmpl {
    const char *name;    /* what it is (the model family) */
    eng_tmpl_format fmt; /* the renderer that reproduces it */
    const char *text;    /* the original Jinja text */
} known_tmpl;

static const known_tmpl known[] = {
    {"llama2", ENG_TMPL_LLAMA2,
     "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message "
     "= messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message "
     "= false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != "
     "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') "
     "}}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\\n' "
     "+ system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}{% else %}{% set content = message['content'] "
     "%}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + "
     "' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token "
     "}}{% endif %}{% endfor %}"},
    {"llama3", ENG_TMPL_LLAMA3,
     "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' "
     "+ message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | trim + '<|eot_id|>' %}{%"
     " if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor "
     "%}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}"
     "{% endif %}"},
    {"gemma1/2", ENG_TMPL_GEMMA2,
     "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not "
     "supported') }}{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != "
     "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') "
     "}}{% endif %}{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% "
     "set role = message['role'] %}{% endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] "
     "| trim + '<end_of_turn>\\n' }}{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}"
     "}{% endif %}"},
    {"gemma3", ENG_TMPL_GEMMA,
     "{{ bos_token }}\n"
     "{%- if messages[0]['role'] == 'system' -%}\n"
     "    {%- if messages[0]['content'] is string -%}\n"
     "        {%- set first_user_prefix = messages[0]['content'] + '\\n\\n' -%}\n"
     "    {%- else -%}\n"
     "        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '\\n\\n' -%}\n"
     "    {%- endif -%}\n"
     "    {%- set loop_messages = messages[1:] -%}\n"
     "{%- else -%}\n"
     "    {%- set first_user_prefix = \"\" -%}\n"
     "    {%- set loop_messages = messages -%}\n"
     "{%- endif -%}\n"
     "{%- for message in loop_messages -%}\n"
     "    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}\n"
     "        {{ raise_exception(\"Conversation roles must alternate user/assistant/user/assistant/...\") "
     "}}\n"
     "    {%- endif -%}\n"
     "    {%- if (message['role'] == 'assistant') -%}\n"
     "        {%- set role = \"model\" -%}\n"
     "    {%- else -%}\n"
     "        {%- set role = message['role'] -%}\n"
     "    {%- endif -%}\n"
     "    {{ '<start_of_turn>' + role + '\\n' + (first_user_prefix if loop.first else \"\") }}\n"
     "    {%- if message['content'] is string -%}\n"
     "        {{ message['content'] | trim }}\n"
     "    {%- elif message['content'] is iterable -%}\n"
     "        {%- for item in message['content'] -%}\n"
     "            {%- if item['type'] == 'image' -%}\n"
     "                {{ '<start_of_image>' }}\n"
     "            {%- elif item['type'] == 'text' -%}\n"
     "                {{ item['text'] | trim }}\n"
     "            {%- endif -%}\n"
     "        {%- endfor -%}\n"
     "    {%- else -%}\n"
     "        {{ raise_exception(\"Invalid content type\") }}\n"
     "    {%- endif -%}\n"
     "    {{ '<end_of_turn>\\n' }}\n"
     "{%- endfor -%}\n"
     "{%- if add_generation_prompt -%}\n"
     "    {{'<start_of_turn>model\\n'}}\n"
     "{%- endif -%}"},
    {"chatml", ENG_TMPL_CHATML,
     "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
     "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' "
     "}}{% endif %}"},
    {"smollm2", ENG_TMPL_SMOLLM2, /* SmolLM2-135M-Instruct (its GGUF writes real newlines) */
     "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
     "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
     "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
     "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
     "'<|im_start|>assistant\n' }}{% endif %}"},
};

static const char *const fmt_names[] = {"none",   "llama2",     "llama3",  "gemma", "chatml",
                                        "gemma2", "transcript", "smollm2", "file"};

const char *eng_tmpl_name(eng_tmpl_format f) {
    return (f >= ENG_TMPL_NONE && f <= ENG_TMPL_FILE) ? fmt_names[f] : "none";
}

eng_tmpl_turn_end eng_tmpl_end_of_turn(eng_tmpl_format f) {
    switch (f) {
    case ENG_TMPL_LLAMA3: return (eng_tmpl_turn_end){"<|eot_id|>", NULL};
    case ENG_TMPL_GEMMA:
    case ENG_TMPL_GEMMA2: return (eng_tmpl_turn_end){"<end_of_turn>", NULL};
    case ENG_TMPL_CHATML:
    case ENG_TMPL_SMOLLM2: return (eng_tmpl_turn_end){"<|im_end|>", NULL};
    case ENG_TMPL_TRANSCRIPT: return (eng_tmpl_turn_end){NULL, "\nUser:"};
    default: return (eng_tmpl_turn_end){NULL, NULL}; /* llama2: EOS, already an end of generation */
    }
}

int eng_tmpl_from_name(const char *name, eng_tmpl_format *out, char *err, size_t errlen) {
    for (int f = ENG_TMPL_LLAMA2; f <= ENG_TMPL_SMOLLM2; f++) {
        if (name && strcmp(name, fmt_names[f]) == 0) {
            *out = (eng_tmpl_format)f;
            return 0;
        }
    }
    return pl_errf(
        err, errlen, ENG_TMPL_EUNKNOWN,
        "chat template \"%.40s\" unknown (known: llama2, llama3, gemma, gemma2, chatml, smollm2, transcript)",
        name ? name : "(null)");
}

/* The format used when a file carries no tokenizer.chat_template, by
 * general.architecture (see eng_tmpl_detect). */
static const struct {
    const char *arch;    /* general.architecture value */
    eng_tmpl_format fmt; /* that family's turn format */
} by_arch[] = {
    {"gemma3", ENG_TMPL_GEMMA}, /* <start_of_turn>user ... <end_of_turn>, system folded into turn 1 */
    {"gemma2", ENG_TMPL_GEMMA2}, /* the same turns, system role refused */
    {"gemma", ENG_TMPL_GEMMA2},  {"qwen2", ENG_TMPL_CHATML}, /* <|im_start|>role ... <|im_end|> */
    {"qwen3", ENG_TMPL_CHATML},
};

/* Normalised form of s[0..n) into b (see the file comment). */
static int normalise(const char *s, size_t n, tok_buf *b) {
    char quote = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (quote) {
            /* an escape and the character it stands for are the same text
             * ('\\n' and a real newline render alike) */
            if (c == '\\' && i + 1 < n) {
                char e = s[++i];
                c = e == 'n' ? '\n' : e == 't' ? '\t' : e == 'r' ? '\r' : e;
            } else if (c == quote) quote = 0;
            if (tok_buf_put(b, &c, 1)) return ENG_TMPL_ENOMEM;
            continue;
        }
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v') continue;
        if (c == '-') {
            int after_open = b->n > 0 && (b->v[b->n - 1] == '%' || b->v[b->n - 1] == '{') &&
                             b->n > 1 && b->v[b->n - 2] == '{';
            int before_close =
                i + 1 < n && ((s[i + 1] == '%' || s[i + 1] == '}') && i + 2 < n && s[i + 2] == '}');
            if (after_open || before_close) continue;
        }
        if (c == '\'' || c == '"') quote = c;
        if (tok_buf_put(b, &c, 1)) return ENG_TMPL_ENOMEM;
    }
    return 0;
}

int eng_tmpl_recognise(const char *tmpl, size_t len, eng_tmpl_format *out, char *err,
                       size_t errlen) {
    tok_buf a = {0}, k = {0};
    int rc = ENG_TMPL_EUNKNOWN;
    *out = ENG_TMPL_NONE;
    if (normalise(tmpl, len, &a)) {
        rc = ENG_TMPL_ENOMEM;
        goto done;
    }
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
        k.n = 0;
        if (normalise(known[i].text, strlen(known[i].text), &k)) {
            rc = ENG_TMPL_ENOMEM;
            goto done;
        }
        if (k.n == a.n && memcmp(k.v, a.v, a.n) == 0) {
            *out = known[i].fmt;
            rc = 0;
            goto done;
        }
    }
    pl_errf(
        err, errlen, rc,
        "the model's chat template (tokenizer.chat_template, %zu bytes) is not one parley knows; "
        "set the format explicitly with the chat_template option (--chat-template llama2|llama3|gemma|gemma2|chatml|smollm2|transcript)",
        len);
done:
    if (rc == ENG_TMPL_ENOMEM) pl_errf(err, errlen, rc, "chat template: out of memory");
    free(a.v);
    free(k.v);
    return rc;
}

int tmpl_arch_format(const eng_gguf *g, eng_tmpl_format *out) {
    const char *s;
    size_t n;
    if (g && eng_gguf_get_str(g, "general.architecture", &s, &n) == 0) {
        for (size_t i = 0; i < sizeof by_arch / sizeof *by_arch; i++)
            if (strlen(by_arch[i].arch) == n && memcmp(by_arch[i].arch, s, n) == 0) {
                *out = by_arch[i].fmt;
                return 0;
            }
    }
    return ENG_TMPL_EUNKNOWN;
}

int eng_tmpl_detect(const eng_gguf *g, const char *override, eng_tmpl_format *out, char *err,
                    size_t errlen) {
    *out = ENG_TMPL_NONE;
    if (override && *override) return eng_tmpl_from_name(override, out, err, errlen);
    const char *s;
    size_t n;
    if (g && eng_gguf_get_str(g, "tokenizer.chat_template", &s, &n) == 0)
        return eng_tmpl_recognise(s, n, out, err, errlen);
    /* No template in the file: the architecture's own turn format, where
     * the family has exactly one (base files such as Gemma 3 270M ship
     * without a template).  Llama files do not: Llama 2 and Llama 3 share
     * the architecture and differ in format, so they need the override. */
    if (tmpl_arch_format(g, out) == 0) return 0;
    return pl_errf(
        err, errlen, ENG_TMPL_EUNKNOWN,
        "the model has no chat template (tokenizer.chat_template) and its architecture has no "
        "default turn format; set the format explicitly with the chat_template option "
        "(--chat-template llama2|llama3|gemma|gemma2|chatml|smollm2|transcript)");
}
