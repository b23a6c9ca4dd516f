/*
 * test_template.c -- unit tests of the chat formats' text output and role
 * validation, and of template recognition (exact texts as in
 * tests/tok/templates/).  transformers' rendering of the original Jinja is
 * compared in tests/py/test_tok_template.py.
 */
#define PTEST_MAIN
#include "ptest.h"

#include "eng_template.h"

#define M(r, c) \
    { .role = r, .role_len = sizeof(r) - 1, .content = c, .content_len = sizeof(c) - 1 }

static const char *render(eng_tmpl_format f, const eng_tmpl_msg *m, int n, bool gen, int *rc) {
    static char out[4096];
    size_t len;
    static char err[256]; /* returned on error: must outlive the call */
    *rc = eng_tmpl_render_text(f, NULL, m, n, gen, out, sizeof out, &len, err, sizeof err);
    return *rc ? err : out;
}

PT_TEST(llama3_text) {
    eng_tmpl_msg m[] = {M("system", "Be brief. "), M("user", "  Hi\n")};
    int rc;
    PT_EQ_STR(render(ENG_TMPL_LLAMA3, m, 2, true, &rc),
              "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
              "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
              "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

PT_TEST(llama2_text_and_alternation) {
    eng_tmpl_msg m[] = {M("system", "S"), M("user", "q1 "), M("assistant", " a1"), M("user", "q2")};
    int rc;
    PT_EQ_STR(render(ENG_TMPL_LLAMA2, m, 4, true, &rc),
              "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nq1 [/INST] a1 </s><s>[INST] q2 [/INST]");
    eng_tmpl_msg bad[] = {M("user", "a"), M("user", "b")};
    render(ENG_TMPL_LLAMA2, bad, 2, false, &rc);
    PT_EQ_INT(rc, ENG_TMPL_EROLE);
    eng_tmpl_msg blank[] = {M("system", "S"), M("user", " \n")};
    PT_EQ_STR(render(ENG_TMPL_LLAMA2, blank, 2, false, &rc),
              "<s>[INST] <<SYS>>\nS\n<</SYS>> [/INST]");
}

PT_TEST(gemma_folds_system) {
    eng_tmpl_msg m[] = {M("system", "S"), M("user", "q"), M("assistant", "a")};
    int rc;
    PT_EQ_STR(
        render(ENG_TMPL_GEMMA, m, 3, true, &rc),
        "<bos><start_of_turn>user\nS\n\nq<end_of_turn>\n<start_of_turn>model\na<end_of_turn>\n"
        "<start_of_turn>model\n");
    eng_tmpl_msg bad[] = {M("assistant", "a")};
    render(ENG_TMPL_GEMMA, bad, 1, false, &rc);
    PT_EQ_INT(rc, ENG_TMPL_EROLE);
    /* Gemma 1/2 refuse the system role; without one they render alike */
    PT_ASSERT(strstr(render(ENG_TMPL_GEMMA2, m, 3, true, &rc), "System role") != NULL);
    PT_EQ_INT(rc, ENG_TMPL_EROLE);
    PT_EQ_STR(render(ENG_TMPL_GEMMA2, m + 1, 2, false, &rc),
              "<bos><start_of_turn>user\nq<end_of_turn>\n<start_of_turn>model\na<end_of_turn>\n");
}

PT_TEST(chatml_text) {
    eng_tmpl_msg m[] = {M("user", " q ")};
    int rc;
    PT_EQ_STR(render(ENG_TMPL_CHATML, m, 1, true, &rc),
              "<|im_start|>user\n q <|im_end|>\n<|im_start|>assistant\n");
}

/* SmolLM2-Instruct's ChatML: its default system message when the
 * conversation has none, the conversation as given when it has one. */
PT_TEST(smollm2_text) {
    eng_tmpl_msg m[] = {M("system", "S"), M("user", "q")};
    int rc;
    PT_EQ_STR(render(ENG_TMPL_SMOLLM2, m + 1, 1, true, &rc),
              "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
              "Face<|im_end|>\n<|im_start|>user\nq<|im_end|>\n<|im_start|>assistant\n");
    PT_EQ_STR(render(ENG_TMPL_SMOLLM2, m, 2, false, &rc),
              "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nq<|im_end|>\n");
    PT_EQ_STR(render(ENG_TMPL_SMOLLM2, m, 0, true, &rc), "<|im_start|>assistant\n");
}

PT_TEST(recognise_and_names) {
    eng_tmpl_format f;
    char err[512];
    const char *chatml =
        "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
        "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|im_start|>assistant\\n' }}{% endif %}";
    PT_EQ_INT(eng_tmpl_recognise(chatml, strlen(chatml), &f, err, sizeof err), 0);
    PT_EQ_INT(f, ENG_TMPL_CHATML);
    /* reformatted with whitespace control: still recognised */
    const char *ws =
        "{%- for message in messages -%}\n  {{ '<|im_start|>' + message['role'] + '\\n' + "
        "message['content'] + '<|im_end|>' + '\\n' }}\n{%- endfor -%}{% if add_generation_prompt %}"
        "{{ '<|im_start|>assistant\\n' }}{% endif %}";
    PT_EQ_INT(eng_tmpl_recognise(ws, strlen(ws), &f, err, sizeof err), 0);
    /* real newlines in the literals instead of \n escapes (as parley
     * mkmodel writes Llama 3's template): the same template */
    const char *nl =
        "{% set loop_messages = messages %}{% for message in loop_messages %}"
        "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
        "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
        "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
        "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
        "{% endif %}";
    PT_EQ_INT(eng_tmpl_recognise(nl, strlen(nl), &f, err, sizeof err), 0);
    PT_EQ_INT(f, ENG_TMPL_LLAMA3);
    /* SmolLM2-135M-Instruct's template as its GGUF carries it (real
     * newlines in the literals): ChatML with a default system message,
     * not plain chatml */
    const char *smol =
        "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
        "{{ '<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
        "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
        "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}"
        "{{ '<|im_start|>assistant\n' }}{% endif %}";
    PT_EQ_INT(eng_tmpl_recognise(smol, strlen(smol), &f, err, sizeof err), 0);
    PT_EQ_INT(f, ENG_TMPL_SMOLLM2);
    PT_EQ_INT(eng_tmpl_from_name("smollm2", &f, err, sizeof err), 0);
    PT_EQ_INT(f, ENG_TMPL_SMOLLM2);
    PT_EQ_STR(eng_tmpl_name(ENG_TMPL_SMOLLM2), "smollm2");
    /* a changed literal is not */
    const char *other = "{% for message in messages %}{{'<|im_start|>' + message['role'] + ' ' + "
                        "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}";
    PT_EQ_INT(eng_tmpl_recognise(other, strlen(other), &f, err, sizeof err), ENG_TMPL_EUNKNOWN);
    PT_ASSERT(strstr(err, "chat_template") != NULL);
    PT_EQ_INT(eng_tmpl_from_name("gemma", &f, err, sizeof err), 0);
    PT_EQ_INT(f, ENG_TMPL_GEMMA);
    PT_EQ_INT(eng_tmpl_from_name("vicuna", &f, err, sizeof err), ENG_TMPL_EUNKNOWN);
    PT_EQ_STR(eng_tmpl_name(ENG_TMPL_LLAMA2), "llama2");
}

/* Each format's end of turn (eng_tmpl_end_of_turn) is what its render puts
 * right after an assistant message: the closing token, or for transcript
 * the text that starts the next user line; llama2 closes with EOS. */
PT_TEST(end_of_turn_follows_the_assistant_message) {
    static const eng_tmpl_format fs[] = {ENG_TMPL_LLAMA2, ENG_TMPL_LLAMA3, ENG_TMPL_GEMMA,
                                         ENG_TMPL_GEMMA2, ENG_TMPL_CHATML, ENG_TMPL_TRANSCRIPT,
                                         ENG_TMPL_SMOLLM2};
    for (size_t i = 0; i < sizeof fs / sizeof fs[0]; i++) {
        eng_tmpl_msg m[] = {M("user", "q1"), M("assistant", "REPLY"), M("user", "q2")};
        int rc;
        const char *out = render(fs[i], m, 3, true, &rc);
        PT_ASSERT_MSG(rc == 0, "%s: %s", eng_tmpl_name(fs[i]), out);
        const char *at = strstr(out, "REPLY");
        PT_ASSERT(at);
        at += 5;
        eng_tmpl_turn_end e = eng_tmpl_end_of_turn(fs[i]);
        if (fs[i] == ENG_TMPL_LLAMA2) {
            PT_ASSERT(!e.token && !e.text); /* EOS, an end of generation already */
            PT_ASSERT_MSG(!strncmp(at, " </s>", 5), "llama2: %s", at);
            continue;
        }
        PT_ASSERT_MSG((e.token != NULL) != (e.text != NULL), "%s", eng_tmpl_name(fs[i]));
        const char *want = e.token ? e.token : e.text;
        PT_ASSERT_MSG(!strncmp(at, want, strlen(want)), "%s: after the reply comes \"%.20s\"",
                      eng_tmpl_name(fs[i]), at);
    }
}
