/*
 * tok_gguf.c -- eng_tok_load: the tokenizer.ggml.* metadata of a GGUF file
 * (as llama.cpp's converter writes it) into an eng_tok_spec, then
 * eng_tok_load_spec.  Every array length and id is checked against the
 * vocabulary size; unknown models and pre-tokenizers are refused by name.
 *
 * Keys read: tokenizer.ggml.model ("llama" | "gpt2"), .pre (gpt2 only:
 * "llama-bpe"/"llama3"/"llama-v3" | "qwen2" | "gpt-2"/"gpt2" |
 * "smollm"), .tokens,
 * .scores (llama: required), .token_type, .merges (gpt2: required),
 * .bos_token_id, .eos_token_id, .eot_token_id, .unknown_token_id,
 * .padding_token_id, .add_bos_token (default: llama true, gpt2 false),
 * .add_eos_token (false), .add_space_prefix (llama default true).  Without
 * eot_token_id the end-of-turn id is looked up by name (<|eot_id|>,
 * <|im_end|>, <end_of_turn>).
 */
#include <stdlib.h>
#include <string.h>

#include "eng_gguf.h"
#include "tok_internal.h"

static int str_is(const char *s, size_t n, const char *lit) {
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

static int load_strs(const eng_gguf *g, const char *key, uint64_t n, const char ***strs,
                     size_t **lens, char *err, size_t errlen) {
    *strs = malloc((n ? n : 1) * sizeof **strs);
    *lens = malloc((n ? n : 1) * sizeof **lens);
    if (!*strs || !*lens) {
        return pl_errf(err, errlen, ENG_TOK_ENOMEM, "tokenizer: out of memory");
    }
    for (uint64_t i = 0; i < n; i++) {
        if (eng_gguf_get_arr_str(g, key, i, &(*strs)[i], &(*lens)[i]) != 0) {
            return pl_errf(err, errlen, ENG_TOK_EFORMAT, "%s[%llu]: unreadable string", key,
                           (unsigned long long)i);
        }
    }
    return 0;
}

static int get_id(const eng_gguf *g, const char *key, int32_t *out, char *err, size_t errlen) {
    int64_t v;
    *out = -1;
    if (eng_gguf_find(g, key) < 0) return 0;
    if (eng_gguf_get_i64(g, key, &v) != 0 || v < -1 || v > INT32_MAX) {
        return pl_errf(err, errlen, ENG_TOK_EFORMAT, "%s: not a token id", key);
    }
    *out = (int32_t)v;
    return 0;
}

static int get_flag(const eng_gguf *g, const char *key, bool dflt, bool *out, char *err,
                    size_t errlen) {
    *out = dflt;
    if (eng_gguf_find(g, key) < 0) return 0;
    if (eng_gguf_get_bool(g, key, out) != 0) {
        return pl_errf(err, errlen, ENG_TOK_EFORMAT, "%s: not a bool", key);
    }
    return 0;
}

int eng_tok_load(const eng_gguf *g, eng_tok **out, char *err, size_t errlen) {
    eng_tok_spec sp;
    memset(&sp, 0, sizeof sp);
    const char **toks = NULL, **merges = NULL;
    size_t *tok_lens = NULL, *merge_lens = NULL;
    float *scores = NULL;
    int32_t *types = NULL;
    int rc = ENG_TOK_EFORMAT;
    const char *s;
    size_t sl;
    *out = NULL;
    if (eng_gguf_get_str(g, "tokenizer.ggml.model", &s, &sl) != 0) {
        return pl_errf(err, errlen, ENG_TOK_EFORMAT,
                       "tokenizer.ggml.model: missing (the model has no vocabulary)");
    }
    if (str_is(s, sl, "llama")) sp.model = ENG_TOK_MODEL_SPM;
    else if (str_is(s, sl, "gpt2")) sp.model = ENG_TOK_MODEL_BPE;
    else {
        return pl_errf(err, errlen, ENG_TOK_EFORMAT,
                       "tokenizer.ggml.model \"%.*s\" not supported (supported: llama, gpt2)",
                       (int)(sl > 40 ? 40 : sl), s);
    }
    if (sp.model == ENG_TOK_MODEL_BPE) {
        if (eng_gguf_get_str(g, "tokenizer.ggml.pre", &s, &sl) != 0) {
            return pl_errf(
                err, errlen, ENG_TOK_EFORMAT,
                "tokenizer.ggml.pre: missing (supported: llama-bpe, qwen2, gpt-2, smollm)");
        }
        if (str_is(s, sl, "llama-bpe") || str_is(s, sl, "llama3") || str_is(s, sl, "llama-v3"))
            sp.pre = ENG_TOK_PRE_LLAMA3, sp.ignore_merges = true;
        else if (str_is(s, sl, "qwen2")) sp.pre = ENG_TOK_PRE_QWEN2;
        else if (str_is(s, sl, "gpt-2") || str_is(s, sl, "gpt2")) sp.pre = ENG_TOK_PRE_GPT2;
        else if (str_is(s, sl, "smollm")) sp.pre = ENG_TOK_PRE_SMOLLM;
        else {
            return pl_errf(
                err, errlen, ENG_TOK_EFORMAT,
                "tokenizer.ggml.pre \"%.*s\" not supported (supported: llama-bpe, qwen2, gpt-2, smollm)",
                (int)(sl > 40 ? 40 : sl), s);
        }
    }
    int et;
    uint64_t n;
    const void *data;
    if (eng_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &data) != 0 ||
        et != ENG_GGUF_TYPE_STR || n == 0 || n > (1u << 26)) {
        return pl_errf(err, errlen, ENG_TOK_EFORMAT,
                       "tokenizer.ggml.tokens: missing, empty or not a string array");
    }
    sp.n_tokens = (int)n;
    if ((rc = load_strs(g, "tokenizer.ggml.tokens", n, &toks, &tok_lens, err, errlen))) goto done;
    sp.tokens = toks;
    sp.token_lens = tok_lens;
    rc = ENG_TOK_EFORMAT;
    uint64_t m;
    if (eng_gguf_get_arr(g, "tokenizer.ggml.scores", &et, &m, &data) == 0) {
        if (et != ENG_GGUF_TYPE_F32 || m != n) {
            pl_errf(err, errlen, rc, "tokenizer.ggml.scores: want %llu f32 values",
                    (unsigned long long)n);
            goto done;
        }
        if (!(scores = malloc(n * sizeof *scores))) goto nomem;
        memcpy(scores, data, n * sizeof *scores);
        sp.scores = scores;
    }
    if (eng_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &m, &data) == 0) {
        if (m != n) {
            pl_errf(err, errlen, rc, "tokenizer.ggml.token_type: want %llu values",
                    (unsigned long long)n);
            goto done;
        }
        if (!(types = malloc(n * sizeof *types))) goto nomem;
        for (uint64_t i = 0; i < n; i++) {
            int64_t v;
            if (eng_gguf_arr_get_i64(et, data, m, i, &v) != 0 || v < 0 || v > 6) {
                pl_errf(err, errlen, rc, "tokenizer.ggml.token_type[%llu]: not a token type 0..6",
                        (unsigned long long)i);
                goto done;
            }
            types[i] = (int32_t)v;
        }
        sp.types = types;
    }
    if (sp.model == ENG_TOK_MODEL_BPE) {
        if (eng_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &m, &data) != 0 ||
            et != ENG_GGUF_TYPE_STR || m > (1u << 26)) {
            pl_errf(err, errlen, rc,
                    "tokenizer.ggml.merges: missing or not a string array (needed by gpt2)");
            goto done;
        }
        if ((rc = load_strs(g, "tokenizer.ggml.merges", m, &merges, &merge_lens, err, errlen)))
            goto done;
        rc = ENG_TOK_EFORMAT;
        sp.n_merges = (int)m;
        sp.merges = merges;
        sp.merge_lens = merge_lens;
    }
    if (get_id(g, "tokenizer.ggml.bos_token_id", &sp.bos, err, errlen) ||
        get_id(g, "tokenizer.ggml.eos_token_id", &sp.eos, err, errlen) ||
        get_id(g, "tokenizer.ggml.eot_token_id", &sp.eot, err, errlen) ||
        get_id(g, "tokenizer.ggml.unknown_token_id", &sp.unk, err, errlen) ||
        get_id(g, "tokenizer.ggml.padding_token_id", &sp.pad, err, errlen) ||
        get_flag(g, "tokenizer.ggml.add_bos_token", sp.model == ENG_TOK_MODEL_SPM, &sp.add_bos, err,
                 errlen) ||
        get_flag(g, "tokenizer.ggml.add_eos_token", false, &sp.add_eos, err, errlen) ||
        get_flag(g, "tokenizer.ggml.add_space_prefix", sp.model == ENG_TOK_MODEL_SPM,
                 &sp.add_space_prefix, err, errlen))
        goto done;
    rc = eng_tok_load_spec(&sp, out, err, errlen);
    if (rc == 0 && (*out)->eot < 0) {
        static const char *const names[] = {"<|eot_id|>", "<|im_end|>", "<end_of_turn>"};
        for (size_t k = 0; k < 3 && (*out)->eot < 0; k++) {
            int32_t id = tok_vocab_lookup(*out, names[k], strlen(names[k]));
            if (id >= 0 && (*out)->types[id] == ENG_TOK_TYPE_CONTROL) {
                (*out)->eot = id;
                (*out)->eog[id] = 1;
            }
        }
    }
    goto done;
nomem:
    rc = pl_errf(err, errlen, ENG_TOK_ENOMEM, "tokenizer: out of memory");
done:
    free(toks);
    free(tok_lens);
    free(merges);
    free(merge_lens);
    free(scores);
    free(types);
    return rc;
}
