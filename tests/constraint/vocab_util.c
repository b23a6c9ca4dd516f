/*
 * vocab_util.c -- see vocab_util.h.
 */
#include "vocab_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GPT-2's printable alphabet for byte b, as UTF-8 into out (NUL-ended). */
static void byte_cp(int b, char *out) {
    int cp;
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255)) {
        cp = b;
    } else { /* the 68 others map to 256.. in byte order */
        int n = 0;
        for (int x = 0; x < b; x++)
            if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) n++;
        cp = 256 + n;
    }
    if (cp < 0x80) {
        out[0] = (char)cp, out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6)), out[1] = (char)(0x80 | (cp & 0x3F)), out[2] = 0;
    }
}

eng_tok *vu_bpe(void) {
    static eng_tok *t;
    if (t) return t;
    static char store[256][4];
    const char *toks[300];
    int32_t types[300];
    int n = 0;
    for (int b = 0; b < 256; b++) {
        byte_cp(b, store[b]);
        types[n] = ENG_TOK_TYPE_NORMAL;
        toks[n++] = store[b];
    }
    /* merged pieces: "\"", ":" and ", " already bytes; some JSON words */
    const char *extra[] = {"tr", "ue", "true", "fa", "lse", "false", "nu", "ll", "null", "\":"};
    const char *merges[] = {"t r",    "u e", "tr ue", "f a",   "l s", "ls e",
                            "fa lse", "n u", "l l",   "nu ll", "\" :"};
    for (int i = 0; i < 10; i++) types[n] = ENG_TOK_TYPE_NORMAL, toks[n++] = extra[i];
    /* "lse" is "ls" + "e": add "ls" so the merges chain */
    types[n] = ENG_TOK_TYPE_NORMAL, toks[n++] = "ls";
    const char *sp[] = {"<|begin_of_text|>", "<|eot_id|>", "<|im_start|>"};
    for (int i = 0; i < 3; i++) types[n] = ENG_TOK_TYPE_CONTROL, toks[n++] = sp[i];
    eng_tok_spec s = {.model = ENG_TOK_MODEL_BPE,
                      .pre = ENG_TOK_PRE_LLAMA3,
                      .n_tokens = n,
                      .tokens = toks,
                      .types = types,
                      .n_merges = 11,
                      .merges = merges,
                      .bos = n - 3,
                      .eos = n - 2,
                      .eot = n - 2,
                      .unk = -1,
                      .pad = -1};
    char err[256];
    if (eng_tok_load_spec(&s, &t, err, sizeof err) != 0) {
        fprintf(stderr, "vu_bpe: %s\n", err);
        t = NULL;
    }
    return t;
}

eng_tok *vu_spm(void) {
    static eng_tok *t;
    if (t) return t;
    static char bytes[256][8];
    const char *toks[300];
    float scores[300];
    int32_t types[300];
    int n = 0;
    const char *sp[] = {"<unk>", "<s>", "</s>"};
    for (int i = 0; i < 3; i++)
        toks[n] = sp[i], scores[n] = 0,
        types[n++] = i ? ENG_TOK_TYPE_CONTROL : ENG_TOK_TYPE_UNKNOWN;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        toks[n] = bytes[b], scores[n] = 0, types[n++] = ENG_TOK_TYPE_BYTE;
    }
    const char *w[] = {"\xe2\x96\x81",
                       "{",
                       "}",
                       "\"",
                       "a",
                       "b",
                       "\xe2\x96\x81\x61", /* "▁a" */
                       "1",
                       "2"};
    for (int i = 0; i < 9; i++)
        toks[n] = w[i], scores[n] = -(float)i, types[n++] = ENG_TOK_TYPE_NORMAL;
    eng_tok_spec s = {.model = ENG_TOK_MODEL_SPM,
                      .n_tokens = n,
                      .tokens = toks,
                      .scores = scores,
                      .types = types,
                      .bos = 1,
                      .eos = 2,
                      .eot = -1,
                      .unk = 0,
                      .pad = -1,
                      .add_bos = true,
                      .add_space_prefix = false};
    char err[256];
    if (eng_tok_load_spec(&s, &t, err, sizeof err) != 0) {
        fprintf(stderr, "vu_spm: %s\n", err);
        t = NULL;
    }
    return t;
}
