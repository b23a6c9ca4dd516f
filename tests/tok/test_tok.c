/*
 * test_tok.c -- unit tests of the tokenizer core on small in-memory
 * vocabularies (eng_tok_load_spec): UTF-8 replacement, the pre-tokenizer
 * matchers, SPM score merges with byte fallback, byte-level BPE merge
 * ranks, special-token parsing only on request, decode and the streaming
 * detokeniser.  The comparison against HF tokenizers on real trained
 * vocabularies is in tests/py/test_tok_hf.py.
 */
#define PTEST_MAIN
#include "ptest.h"

#include <pthread.h>

#include "eng_tok.h"
#include "tok_internal.h"

/* ---- UTF-8 replacement: expected values from Python's errors="replace" ---- */
PT_TEST(utf8_sanitize_matches_python) {
    struct {
        const char *in;
        size_t n;
        const char *want;
    } cases[] = {
        {"a\xff"
         "b",
         3,
         "a\xEF\xBF\xBD"
         "b"},
        {"\xe2\x82", 2, "\xEF\xBF\xBD"}, /* truncated: one U+FFFD */
        {"\xe2\x82"
         "A",
         3,
         "\xEF\xBF\xBD"
         "A"},
        {"\xed\xa0\x80", 3, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"}, /* surrogate: 3 */
        {"\xf0\x9f\x98\x80", 4, "\xf0\x9f\x98\x80"},
        {"\xf0\x9f\x98", 3, "\xEF\xBF\xBD"},
        {"\xc0\xaf", 2, "\xEF\xBF\xBD\xEF\xBF\xBD"}, /* overlong */
        {"\xf4\x90\x80\x80", 4, "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *o;
        size_t n;
        PT_EQ_INT(tok_utf8_sanitize(cases[i].in, cases[i].n, &o, &n), 0);
        PT_EQ_INT(n, strlen(cases[i].want));
        PT_ASSERT(memcmp(o, cases[i].want, n) == 0);
        if (o != cases[i].in) free(o);
    }
}

PT_TEST(unicode_classes) {
    PT_ASSERT(tok_unicode_flags('a') & TOK_UF_L);
    PT_ASSERT(tok_unicode_flags(0x4E2D) & TOK_UF_L); /* CJK */
    PT_ASSERT(tok_unicode_flags(0x0663) & TOK_UF_N); /* Arabic-Indic 3 */
    PT_ASSERT(tok_unicode_flags(0x00B2) & TOK_UF_N); /* superscript two: No */
    PT_ASSERT(tok_unicode_flags(0x0301) & TOK_UF_M); /* combining acute */
    PT_ASSERT(tok_unicode_flags(0x3000) & TOK_UF_WS);
    PT_ASSERT(!(tok_unicode_flags(0x1C) & TOK_UF_WS));
    PT_ASSERT(tok_unicode_flags(0x1C) & TOK_UF_PYSPACE);
    PT_ASSERT(tok_unicode_flags(0x1F600) & TOK_UF_S); /* emoji: So */
}

/* ---- pre-tokenizers ---- */
typedef struct pieces {
    char v[64][32];
    int n;
} pieces;
static int collect(void *ctx, const char *p, size_t n) {
    pieces *ps = ctx;
    if (ps->n < 64 && n < 32) {
        memcpy(ps->v[ps->n], p, n);
        ps->v[ps->n][n] = 0;
    }
    ps->n++;
    return 0;
}

static void check_split(eng_tok_pre pre, const char *text, const char *const *want, int nwant) {
    pieces ps = {.n = 0};
    PT_EQ_INT(tok_pretokenize(pre, text, strlen(text), collect, &ps), 0);
    PT_EQ_INT(ps.n, nwant);
    for (int i = 0; i < nwant; i++) PT_EQ_STR(ps.v[i], want[i]);
}

PT_TEST(pre_llama3) {
    /* expected: Python's `regex` module on Llama 3's pattern */
    const char *w[] = {"Hello", " world", "'S",   " ",  "123",   "456", "7",
                       "  ",    " x",     "\n\n", "  ", " !?\n", "\t"};
    check_split(ENG_TOK_PRE_LLAMA3, "Hello world'S 1234567   x\n\n   !?\n\t", w, 13);
}

PT_TEST(pre_qwen2_digits_single) {
    const char *w[] = {"a", "1", "2", "3"};
    check_split(ENG_TOK_PRE_QWEN2, "a123", w, 4);
}

PT_TEST(pre_gpt2) {
    const char *w[] = {"I", "'m", " 42", " ok", "'", "S", "!!", " ", " \xe4\xb8\xad\xe6\x96\x87"};
    check_split(ENG_TOK_PRE_GPT2, "I'm 42 ok'S!!  \xe4\xb8\xad\xe6\x96\x87", w, 9);
}

PT_TEST(pre_smollm_digits_alone_then_gpt2) {
    /* expected: HF tokenizers' Sequence[Digits(individual_digits=True),
     * ByteLevel] (SmolLM2's tokenizer.json), as llama.cpp's "smollm" */
    const char *w[] = {"I", "'m", " ", "4",  "2", " ok", "  ", "\xd9\xa3",
                       "x", "'",  "S", "  ", "1", "!!",  " ",  " \xe4\xb8\xad"};
    check_split(ENG_TOK_PRE_SMOLLM, "I'm 42 ok  \xd9\xa3x'S  1!!  \xe4\xb8\xad", w, 16);
}

/* ---- SPM ---- */
static eng_tok *spm_vocab(bool prefix) {
    static char bytes[256][8];
    const char *toks[300];
    float scores[300];
    int32_t types[300];
    int n = 0;
    toks[n] = "<unk>", types[n] = ENG_TOK_TYPE_UNKNOWN, scores[n++] = 0;
    toks[n] = "<s>", types[n] = ENG_TOK_TYPE_CONTROL, scores[n++] = 0;
    toks[n] = "</s>", types[n] = ENG_TOK_TYPE_CONTROL, scores[n++] = 0;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        toks[n] = bytes[b], types[n] = ENG_TOK_TYPE_BYTE, scores[n++] = 0;
    }
    const char *words[] = {"\xe2\x96\x81", "h",  "e",    "l",     "o",
                           "ll",           "he", "hell", "hello", "\xe2\x96\x81hello",
                           "\xe2\x96\x81h"};
    float ws[] = {-1, -2, -3, -4, -5, -6, -7, -8, -9, -10, -11};
    for (int i = 0; i < 11; i++)
        toks[n] = words[i], types[n] = ENG_TOK_TYPE_NORMAL, scores[n++] = ws[i];
    eng_tok_spec sp = {.model = ENG_TOK_MODEL_SPM,
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
                       .add_space_prefix = prefix};
    eng_tok *t;
    char err[128];
    PT_ASSERT_MSG(eng_tok_load_spec(&sp, &t, err, sizeof err) == 0, "%s", err);
    return t;
}

PT_TEST(spm_merges_and_fallback) {
    eng_tok *t = spm_vocab(true);
    int32_t ids[32];
    int n;
    char err[128];
    int32_t hello = eng_tok_find(t, "\xe2\x96\x81hello", 8);
    PT_ASSERT(hello > 0);
    PT_EQ_INT(eng_tok_encode(t, "hello", 5, ENG_TOK_ADD_BOS, ids, 32, &n, err, sizeof err), 0);
    PT_EQ_INT(n, 2);
    PT_EQ_INT(ids[0], 1);
    PT_EQ_INT(ids[1], hello);
    /* "é" is not a token: bytes C3 A9 */
    PT_EQ_INT(eng_tok_encode(t, "h\xc3\xa9", 3, 0, ids, 32, &n, err, sizeof err), 0);
    PT_EQ_INT(n, 3);
    PT_EQ_INT(ids[0], eng_tok_find(t, "\xe2\x96\x81h", 4));
    PT_EQ_INT(ids[1], 3 + 0xC3);
    PT_EQ_INT(ids[2], 3 + 0xA9);
    /* special text is text unless asked for */
    PT_EQ_INT(eng_tok_count(t, "</s>", 4, 0, err, sizeof err) > 1, 1);
    PT_EQ_INT(eng_tok_encode(t, "</s>", 4, ENG_TOK_PARSE_SPECIAL, ids, 32, &n, err, sizeof err), 0);
    PT_EQ_INT(n, 1);
    PT_EQ_INT(ids[0], 2);
    /* decode strips the prefix space and joins bytes */
    int32_t in[] = {1, hello, eng_tok_find(t, "\xe2\x96\x81h", 4), 3 + 0xC3, 3 + 0xA9};
    char out[64];
    size_t len;
    PT_EQ_INT(eng_tok_decode(t, in, 5, 0, out, sizeof out, &len, err, sizeof err), 0);
    PT_EQ_STR(out, "hello h\xc3\xa9");
    /* ENOSPC reports the size */
    PT_EQ_INT(eng_tok_encode(t, "hello hello", 11, 0, ids, 1, &n, err, sizeof err), ENG_TOK_ENOSPC);
    PT_EQ_INT(n, 2);
    eng_tok_free(t);
}

PT_TEST(stream_emits_complete_utf8_only) {
    eng_tok *t = spm_vocab(false);
    /* U+1F600 as four byte tokens, then a lone continuation byte */
    int32_t ids[] = {3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80, 3 + 0x80, 3 + 0xE2};
    eng_tok_stream s;
    eng_tok_stream_init(&s, t, 0);
    char out[64];
    size_t n, lens[6];
    for (int i = 0; i < 6; i++) {
        PT_EQ_INT(eng_tok_stream_push(&s, ids[i], out, sizeof out, &n), 0);
        lens[i] = n;
        if (i == 3) PT_ASSERT(n == 4 && memcmp(out, "\xf0\x9f\x98\x80", 4) == 0);
        if (i == 4) PT_ASSERT(n == 3 && memcmp(out, "\xEF\xBF\xBD", 3) == 0);
    }
    PT_EQ_INT(lens[0] + lens[1] + lens[2], 0);
    PT_EQ_INT(lens[5], 0);
    PT_EQ_INT(eng_tok_stream_flush(&s, out, sizeof out, &n), 0);
    PT_EQ_INT(n, 3);
    PT_EQ_INT(eng_tok_stream_push(&s, 99999, out, sizeof out, &n), ENG_TOK_EINVAL);
    eng_tok_free(t);
}

/* ---- byte-level BPE ---- */
PT_TEST(bpe_merge_ranks) {
    char store[256][4];
    const char *toks[300];
    int n = 0;
    for (int b = 0; b < 256; b++) {
        int k = tok_utf8_encode(tok_byte_to_cp((uint8_t)b), store[b]);
        store[b][k] = 0;
        toks[n++] = store[b];
    }
    /* merges: "l l" (rank 0), "h e" (1), "he ll" (2), "Ġ w" (3); "hell" + "o" missing */
    toks[n++] = "ll", toks[n++] = "he", toks[n++] = "hell", toks[n++] = "\xc4\xa0w",
    toks[n++] = "<|eot_id|>";
    int32_t types[300];
    for (int i = 0; i < n; i++) types[i] = i == n - 1 ? ENG_TOK_TYPE_CONTROL : ENG_TOK_TYPE_NORMAL;
    const char *merges[] = {"l l", "h e", "he ll", "\xc4\xa0 w"};
    eng_tok_spec sp = {.model = ENG_TOK_MODEL_BPE,
                       .pre = ENG_TOK_PRE_LLAMA3,
                       .n_tokens = n,
                       .tokens = toks,
                       .types = types,
                       .n_merges = 4,
                       .merges = merges,
                       .bos = -1,
                       .eos = n - 1,
                       .eot = n - 1,
                       .unk = -1,
                       .pad = -1,
                       .ignore_merges = true};
    eng_tok *t;
    char err[128];
    PT_ASSERT_MSG(eng_tok_load_spec(&sp, &t, err, sizeof err) == 0, "%s", err);
    int32_t ids[32];
    int cnt;
    PT_EQ_INT(eng_tok_encode(t, "hello w<|eot_id|>", 17, ENG_TOK_PARSE_SPECIAL, ids, 32, &cnt, err,
                             sizeof err),
              0);
    PT_EQ_INT(cnt, 4);
    PT_EQ_INT(ids[0], 258); /* hell */
    PT_EQ_INT(ids[1], 'o'); /* o */
    PT_EQ_INT(ids[2], 259); /* Ġw */
    PT_EQ_INT(ids[3], n - 1);
    PT_ASSERT(eng_tok_is_eog(t, n - 1));
    char out[64];
    size_t len;
    PT_EQ_INT(eng_tok_decode(t, ids, cnt, 0, out, sizeof out, &len, err, sizeof err), 0);
    PT_EQ_STR(out, "hello w");
    PT_EQ_INT(
        eng_tok_decode(t, ids, cnt, ENG_TOK_DECODE_SPECIAL, out, sizeof out, &len, err, sizeof err),
        0);
    PT_EQ_STR(out, "hello w<|eot_id|>");
    /* every byte round-trips */
    char all[256];
    for (int i = 0; i < 256; i++) all[i] = (char)i;
    int32_t big[600];
    PT_EQ_INT(eng_tok_encode(t, all + 128, 128, 0, big, 600, &cnt, err, sizeof err), 0);
    PT_EQ_INT(eng_tok_decode(t, big, cnt, 0, out, 0, &len, err, sizeof err), ENG_TOK_ENOSPC);
    PT_EQ_INT(len, 128 * 3); /* invalid bytes were replaced by U+FFFD before encoding */
    eng_tok_free(t);
}

PT_TEST(load_rejects_bad_spec) {
    const char *toks[] = {"a", "b"};
    eng_tok_spec sp = {.model = ENG_TOK_MODEL_BPE,
                       .pre = ENG_TOK_PRE_GPT2,
                       .n_tokens = 2,
                       .tokens = toks,
                       .n_merges = 1,
                       .merges = (const char *const[]){"a c"},
                       .bos = 5,
                       .eos = -1,
                       .eot = -1,
                       .unk = -1,
                       .pad = -1};
    eng_tok *t;
    char err[128];
    PT_EQ_INT(eng_tok_load_spec(&sp, &t, err, sizeof err), ENG_TOK_EFORMAT);
    PT_ASSERT(strstr(err, "bos") != NULL);
    sp.bos = -1;
    PT_EQ_INT(eng_tok_load_spec(&sp, &t, err, sizeof err), ENG_TOK_EFORMAT);
    PT_ASSERT(strstr(err, "merges") != NULL);
}

/* ---- one shared vocabulary, many threads ---- */
typedef struct thr_arg {
    const eng_tok *t; /* shared tokenizer */
    int ok;           /* 1 when every encode matched the reference */
    int32_t ref[64];  /* single-threaded result */
    int nref;         /* its length */
} thr_arg;

static const char thr_text[] = "hello h\xc3\xa9llo hello  hello";

static void *thr_main(void *p) {
    thr_arg *a = p;
    a->ok = 1;
    for (int i = 0; i < 2000; i++) {
        int32_t ids[64];
        int n;
        if (eng_tok_encode(a->t, thr_text, sizeof thr_text - 1, 0, ids, 64, &n, NULL, 0) != 0 ||
            n != a->nref || memcmp(ids, a->ref, (size_t)n * sizeof *ids) != 0)
            a->ok = 0;
    }
    return NULL;
}

PT_TEST(shared_vocab_threads) {
    eng_tok *t = spm_vocab(true);
    thr_arg args[4];
    pthread_t th[4];
    char err[128];
    for (int i = 0; i < 4; i++) {
        args[i].t = t;
        PT_EQ_INT(eng_tok_encode(t, thr_text, sizeof thr_text - 1, 0, args[i].ref, 64,
                                 &args[i].nref, err, sizeof err),
                  0);
        PT_EQ_INT(pthread_create(&th[i], NULL, thr_main, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        PT_ASSERT(args[i].ok);
    }
    eng_tok_free(t);
}
