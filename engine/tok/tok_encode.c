/*
 * tok_encode.c -- the encoder's driver: UTF-8 replacement, splitting at
 * special tokens, BOS/EOS, and the model-specific encoding of each text
 * fragment.
 *
 * Which tokens split the text: USER_DEFINED tokens always (they are
 * ordinary text that the vocabulary wants as one piece, such as Gemma's
 * runs of spaces, tabs and newlines and its HTML tags: SentencePiece and
 * llama.cpp match them in raw text whatever the caller asks); CONTROL and
 * UNKNOWN tokens only with ENG_TOK_PARSE_SPECIAL, so user text can never
 * become a control token.  Matches are leftmost-longest (HF's added-
 * vocabulary splitting): at each byte, the longest eligible token text
 * starting there wins; the text between matches is encoded as an ordinary
 * fragment.
 */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

static int encode_fragment(const eng_tok *t, const char *s, size_t n, bool prefix, tok_scratch *sc,
                           tok_ids *out) {
    if (n == 0) return 0;
    return t->model == ENG_TOK_MODEL_SPM ? tok_spm_encode(t, s, n, prefix, sc, out)
                                         : tok_bpe_encode(t, s, n, sc, out);
}

/* Longest eligible special token starting at s[0..n), or -1: any of them
 * when all is set, else USER_DEFINED ones only. */
static int32_t match_special(const eng_tok *t, const char *s, size_t n, int all) {
    uint8_t b = (uint8_t)s[0];
    for (int32_t k = t->special_start[b]; k < t->special_start[b + 1]; k++) {
        int32_t id = t->special[k];
        if (!all && t->types[id] != ENG_TOK_TYPE_USER_DEFINED) continue;
        size_t l = t->text_len[id];
        if (l <= n && memcmp(s, t->text_pool + t->text_off[id], l) == 0) return id;
    }
    return -1;
}

int32_t tok_control_at(const eng_tok *t, const char *s, size_t n) {
    if (n == 0 || t->n_special == 0) return -1;
    int32_t id = match_special(t, s, n, 1);
    return id >= 0 && t->types[id] != ENG_TOK_TYPE_USER_DEFINED ? id : -1;
}

int tok_encode_ids(const eng_tok *t, const char *text, size_t len, int flags, tok_ids *out,
                   char *err, size_t errlen) {
    if (!text && len) {
        return pl_errf(err, errlen, ENG_TOK_EINVAL, "tokenizer: NULL text");
    }
    if ((flags & ENG_TOK_ADD_BOS) && t->bos < 0) {
        return pl_errf(err, errlen, ENG_TOK_EINVAL,
                       "tokenizer: BOS requested but the vocabulary has no BOS token");
    }
    if ((flags & ENG_TOK_ADD_EOS) && t->eos < 0) {
        return pl_errf(err, errlen, ENG_TOK_EINVAL,
                       "tokenizer: EOS requested but the vocabulary has no EOS token");
    }
    char *clean = NULL;
    size_t n = 0;
    tok_scratch sc = {0};
    int rc = tok_utf8_sanitize(text ? text : "", len, &clean, &n);
    if (rc) goto err;
    if ((flags & ENG_TOK_ADD_BOS) && (rc = tok_ids_push(out, t->bos))) goto err;
    size_t frag = 0;
    int all = (flags & ENG_TOK_PARSE_SPECIAL) != 0;
    if ((all && t->n_special > 0) || t->n_user_defined > 0) {
        for (size_t i = 0; i < n;) {
            int32_t id = match_special(t, clean + i, n - i, all);
            if (id < 0) {
                i++;
                continue;
            }
            if ((rc = encode_fragment(t, clean + frag, i - frag,
                                      frag > 0 || !(flags & TOK_ENC_CONTINUE), &sc, out)))
                goto err;
            if ((rc = tok_ids_push(out, id))) goto err;
            i += t->text_len[id];
            frag = i;
        }
    }
    if ((rc = encode_fragment(t, clean + frag, n - frag, frag > 0 || !(flags & TOK_ENC_CONTINUE),
                              &sc, out)))
        goto err;
    if ((flags & ENG_TOK_ADD_EOS) && (rc = tok_ids_push(out, t->eos))) goto err;
    if (clean != text) free(clean);
    tok_scratch_free(&sc);
    return 0;
err:
    if (clean != text) free(clean);
    tok_scratch_free(&sc);
    return pl_errf(err, errlen, rc, "tokenizer: out of memory");
}

int eng_tok_encode(const eng_tok *t, const char *text, size_t len, int flags, int32_t *ids, int cap,
                   int *n_out, char *err, size_t errlen) {
    tok_ids v = {0};
    *n_out = 0;
    int rc = tok_encode_ids(t, text, len, flags, &v, err, errlen);
    if (rc) {
        free(v.v);
        return rc;
    }
    *n_out = v.n;
    if (v.n > cap) {
        if (cap > 0 && ids) memcpy(ids, v.v, (size_t)cap * sizeof *ids);
        free(v.v);
        return pl_errf(err, errlen, ENG_TOK_ENOSPC, "tokenizer: %d ids do not fit in %d", *n_out,
                       cap);
    }
    if (v.n) memcpy(ids, v.v, (size_t)v.n * sizeof *ids);
    free(v.v);
    return 0;
}

int eng_tok_count(const eng_tok *t, const char *text, size_t len, int flags, char *err,
                  size_t errlen) {
    tok_ids v = {0};
    int rc = tok_encode_ids(t, text, len, flags, &v, err, errlen);
    free(v.v);
    return rc ? rc : v.n;
}
