/*
 * tok_decode.c -- ids back to text, whole or streaming.
 *
 * A token's bytes are precomputed at load (eng_tok_piece).  Decoding
 * concatenates them (special tokens only with ENG_TOK_DECODE_SPECIAL),
 * removes the one leading space an SPM add_space_prefix encoder added (HF's
 * Strip decoder), and turns ill-formed bytes into U+FFFD per maximal
 * subpart (Rust's from_utf8_lossy, which HF's decoders use), so the result
 * is always valid UTF-8.  The stream variant holds back the bytes of an
 * unfinished character so that each chunk is valid on its own and the
 * chunks concatenate to the whole decode.
 */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

/* Lossy UTF-8 copy of s[0..n) into out (NULL: only measure); returns bytes. */
static size_t lossy(const uint8_t *s, size_t n, char *out) {
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t bad;
        int k = s[i] < 0x80 ? 1 : tok_utf8_decode(s + i, n - i, &cp, &bad);
        if (k > 0) {
            if (out) memcpy(out + w, s + i, (size_t)k);
            w += (size_t)k;
            i += (size_t)k;
        } else {
            if (out) memcpy(out + w, "\xEF\xBF\xBD", 3);
            w += 3;
            i += bad;
        }
    }
    return w;
}

static bool skipped(const eng_tok *t, int32_t id, int flags) {
    int ty = t->types[id];
    return !(flags & ENG_TOK_DECODE_SPECIAL) &&
           (ty == ENG_TOK_TYPE_CONTROL || ty == ENG_TOK_TYPE_UNKNOWN);
}

int eng_tok_decode(const eng_tok *t, const int32_t *ids, int n, int flags, char *out, size_t cap,
                   size_t *n_out, char *err, size_t errlen) {
    tok_buf raw = {0};
    int rc = 0;
    *n_out = 0;
    for (int i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_vocab) {
            rc = pl_errf(err, errlen, ENG_TOK_EINVAL,
                         "tokenizer: id %d at position %d outside the vocabulary", id, i);
            goto done;
        }
        if (skipped(t, id, flags)) continue;
        if (tok_buf_put(&raw, t->piece_pool + t->piece_off[id], t->piece_len[id])) {
            rc = pl_errf(err, errlen, ENG_TOK_ENOMEM, "tokenizer: out of memory");
            goto done;
        }
    }
    size_t skip = (t->add_space_prefix && raw.n > 0 && raw.v[0] == ' ') ? 1 : 0;
    const uint8_t *src = raw.n ? (const uint8_t *)raw.v + skip : (const uint8_t *)"";
    size_t len = raw.n - skip;
    size_t need = lossy(src, len, NULL);
    *n_out = need;
    if (need > cap) {
        rc = pl_errf(err, errlen, ENG_TOK_ENOSPC,
                     "tokenizer: decoded text (%zu bytes) does not fit in %zu", need, cap);
        goto done;
    }
    lossy(src, len, out);
    if (need < cap) out[need] = 0;
done:
    free(raw.v);
    return rc;
}

size_t eng_tok_stream_cap(const eng_tok *t) { return 3 * (t->max_piece + 4); }

void eng_tok_stream_init(eng_tok_stream *s, const eng_tok *t, int flags) {
    memset(s, 0, sizeof *s);
    s->tok = t;
    s->flags = flags;
    s->at_start = true;
}

int eng_tok_stream_push(eng_tok_stream *s, int32_t id, char *out, size_t cap, size_t *n_out) {
    const eng_tok *t = s->tok;
    *n_out = 0;
    if (id < 0 || id >= t->n_vocab) return ENG_TOK_EINVAL;
    if (skipped(t, id, s->flags)) return 0;
    const uint8_t *p = (const uint8_t *)t->piece_pool + t->piece_off[id];
    size_t pl = t->piece_len[id];
    if (pl == 0) return 0;
    bool strip = s->at_start && s->n_pend == 0 && t->add_space_prefix && p[0] == ' ';
    if (strip) p++, pl--;
    /* data = held-back bytes + this piece; the unfinished tail waits */
    uint8_t small[64];
    size_t dl = (size_t)s->n_pend + pl;
    uint8_t *data = dl <= sizeof small ? small : malloc(dl);
    if (!data) return ENG_TOK_ENOMEM;
    memcpy(data, s->pend, (size_t)s->n_pend);
    if (pl) memcpy(data + s->n_pend, p, pl);
    size_t tail = tok_utf8_incomplete_tail(data, dl);
    size_t need = lossy(data, dl - tail, NULL);
    *n_out = need;
    if (need > cap) {
        if (data != small) free(data);
        return ENG_TOK_ENOSPC;
    }
    lossy(data, dl - tail, out);
    memcpy(s->pend, data + dl - tail, tail);
    s->n_pend = (int)tail;
    if (dl > 0 || strip) s->at_start = false;
    if (data != small) free(data);
    return 0;
}

int eng_tok_stream_flush(eng_tok_stream *s, char *out, size_t cap, size_t *n_out) {
    *n_out = s->n_pend ? 3 : 0;
    if (*n_out > cap) return ENG_TOK_ENOSPC;
    if (s->n_pend) memcpy(out, "\xEF\xBF\xBD", 3);
    s->n_pend = 0;
    return 0;
}
