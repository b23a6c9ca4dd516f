/*
 * test_tok_gguf.c -- eng_tok_load and eng_tmpl_detect on GGUF metadata
 * built in memory with parley's GGUF writer: a valid byte-level vocabulary
 * loads and encodes; hostile or incomplete tokenizer.ggml.* keys are
 * refused with a message naming the key, never a crash.
 */
#define PTEST_MAIN
#include "ptest.h"

#include "eng_gguf.h"
#include "eng_gguf_write.h"
#include "eng_template.h"
#include "eng_tok.h"
#include "tok_internal.h"

/* What to break in the vocabulary. */
enum { OK, NO_MODEL, BAD_MODEL, NO_PRE, BAD_TYPE, BAD_BOS, BAD_MERGE, SCORES_LEN };

static char toks_store[300][8];

/* Writes a 258-token byte-level vocab (+ "ab", <|eot_id|>) with one merge. */
static int load(int what, eng_tok **t, eng_gguf **g, char **mem, char *buf_err, size_t errlen) {
    const char *toks[300];
    int32_t types[300];
    float scores[300];
    int n = 0;
    for (int b = 0; b < 256; b++) {
        toks_store[b][tok_utf8_encode(tok_byte_to_cp((uint8_t)b), toks_store[b])] = 0;
        toks[n] = toks_store[b], types[n] = 1, scores[n++] = 0;
    }
    toks[n] = "ab", types[n] = 1, scores[n++] = 0;
    toks[n] = "<|eot_id|>", types[n] = what == BAD_TYPE ? 9 : 3, scores[n++] = 0;
    const char *merges[] = {what == BAD_MERGE ? "a zz" : "a b"};
    eng_gguf_writer *w;
    PT_EQ_INT(eng_gguf_writer_new(0, &w), 0);
    if (what != NO_MODEL)
        eng_gguf_writer_add_str(w, "tokenizer.ggml.model", what == BAD_MODEL ? "bert" : "gpt2");
    if (what != NO_PRE) eng_gguf_writer_add_str(w, "tokenizer.ggml.pre", "llama-bpe");
    eng_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", toks, NULL, (uint64_t)n);
    eng_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", ENG_GGUF_TYPE_I32, types, (uint64_t)n);
    if (what == SCORES_LEN)
        eng_gguf_writer_add_arr(w, "tokenizer.ggml.scores", ENG_GGUF_TYPE_F32, scores, 3);
    eng_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", merges, NULL, 1);
    eng_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", what == BAD_BOS ? 5000 : 257);
    eng_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", 257);
    eng_gguf_writer_add_str(w, "tokenizer.chat_template", "{{ unknown }}");
    size_t len = 0;
    *mem = NULL;
    FILE *f = open_memstream(mem, &len);
    PT_EQ_INT(eng_gguf_writer_begin(w, f), 0);
    PT_EQ_INT(eng_gguf_writer_finish(w, buf_err, errlen), 0);
    eng_gguf_writer_free(w);
    fclose(f);
    /* the reader borrows the buffer: the caller frees it after closing */
    PT_EQ_INT(eng_gguf_open_mem(*mem, len, g, buf_err, errlen), 0);
    return eng_tok_load(*g, t, buf_err, errlen);
}

PT_TEST(gguf_valid_vocab_loads) {
    eng_tok *t;
    eng_gguf *g;
    char err[256], *mem;
    PT_ASSERT_MSG(load(OK, &t, &g, &mem, err, sizeof err) == 0, "%s", err);
    int32_t ids[8];
    int n;
    PT_EQ_INT(
        eng_tok_encode(t, "ab<|eot_id|>", 12, ENG_TOK_PARSE_SPECIAL, ids, 8, &n, err, sizeof err),
        0);
    PT_EQ_INT(n, 2);
    PT_EQ_INT(ids[0], 256);
    PT_EQ_INT(ids[1], 257);
    PT_EQ_INT(eng_tok_eot(t), 257); /* found by name */
    PT_ASSERT(eng_tok_is_eog(t, 257));
    eng_tmpl_format f;
    PT_EQ_INT(eng_tmpl_detect(g, NULL, &f, err, sizeof err), ENG_TMPL_EUNKNOWN);
    PT_ASSERT(strstr(err, "--chat-template") != NULL);
    PT_EQ_INT(eng_tmpl_detect(g, "llama3", &f, err, sizeof err), 0);
    PT_EQ_INT(f, ENG_TMPL_LLAMA3);
    eng_tok_free(t);
    eng_gguf_close(g);
    free(mem);
}

PT_TEST(gguf_hostile_vocab_refused) {
    struct {
        int what;
        const char *word;
    } cases[] = {
        {NO_MODEL, "tokenizer.ggml.model"},
        {BAD_MODEL, "supported"},
        {NO_PRE, "tokenizer.ggml.pre"},
        {BAD_TYPE, "token_type"},
        {BAD_BOS, "bos"},
        {BAD_MERGE, "merges"},
        {SCORES_LEN, "scores"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        eng_tok *t = NULL;
        eng_gguf *g = NULL;
        char err[256] = "", *mem = NULL;
        int rc = load(cases[i].what, &t, &g, &mem, err, sizeof err);
        eng_gguf_close(g);
        free(mem);
        PT_EQ_INT(rc, ENG_TOK_EFORMAT);
        PT_ASSERT_MSG(strstr(err, cases[i].word) != NULL, "case %zu: %s", i, err);
        PT_ASSERT(t == NULL);
    }
}
