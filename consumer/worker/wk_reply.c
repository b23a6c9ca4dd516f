/*
 * wk_reply.c -- what a reply carries besides its text: the wire form of
 * per-token log-probabilities (schemas/README.md 6b).
 *
 * The delivery thread keeps only ids and numbers (wk_lp, wk_choice.tops);
 * the texts are looked up here, when a TokenChunk or TurnResult is
 * encoded.  A token's text is its piece as the tokenizer decodes it (a
 * control token: its vocabulary spelling, e.g. "<end_of_turn>"); a piece
 * that is not whole UTF-8 (a byte-level token holding part of a
 * character) becomes valid text with U+FFFD in place of each byte that
 * does not form a character, and its raw bytes go in `bytes`.  The wire
 * wants finite log-probabilities <= 0: -inf (a probability that is 0 in
 * float) is written as -9999, OpenAI's convention, and a rounding
 * excursion above 0 as 0.
 *
 * Also the TurnResult's encoding (wk_result_encode) with its fallbacks: a
 * reply over the record limit, or an engine message the schema refuses,
 * still ends the turn with one decodable error result.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "wk_internal.h"

#define WK_PIECE_MAX 512 /* longest token text kept (longer ones are cut) */

/* Length of the UTF-8 sequence a lead byte starts (1 for a stray byte). */
static size_t wk_utf8_len(unsigned char b) {
    return b < 0x80             ? 1
           : (b & 0xE0) == 0xC0 ? 2
           : (b & 0xF0) == 0xE0 ? 3
           : (b & 0xF8) == 0xF0 ? 4
                                : 1;
}

/* Write p[0..n) as valid UTF-8 into out (room for 3n bytes): each byte
 * that is not part of a whole character becomes U+FFFD.  Returns the
 * bytes written; *changed says whether anything was replaced. */
static size_t wk_utf8_clean(const char *p, size_t n, char *out, int *changed) {
    size_t o = 0;
    *changed = 0;
    for (size_t i = 0; i < n;) {
        size_t k = wk_utf8_len((unsigned char)p[i]);
        if (i + k <= n && sch_utf8_valid(p + i, k)) {
            memcpy(out + o, p + i, k);
            o += k;
            i += k;
        } else {
            memcpy(out + o, "\xef\xbf\xbd", 3);
            o += 3;
            i++;
            *changed = 1;
        }
    }
    return o;
}

static float wk_lp_clamp(float v) {
    return isnan(v) ? -9999.0f : v < -9999.0f ? -9999.0f : v > 0 ? 0 : v;
}

/* Fill e for token id with log-probability v, its text in the arena at
 * *used (cap bytes). */
static void wk_lp_entry(const wk_worker *w, int32_t id, float v, sch_logprob *e, char *arena,
                        size_t *used) {
    char piece[WK_PIECE_MAX];
    size_t n = 0;
    const char *txt = NULL;
    memset(e, 0, sizeof *e);
    e->id = (uint32_t)(id < 0 ? 0 : id);
    e->logprob = wk_lp_clamp(v);
    if (eng_tok_is_special(w->eng.tok, id) && (txt = eng_tok_text(w->eng.tok, id))) {
        n = strlen(txt);
        if (n > 64) n = 64;
        memcpy(piece, txt, n);
    } else if (eng_tok_piece(w->eng.tok, id, piece, sizeof piece, &n) != 0) {
        n = n > sizeof piece ? sizeof piece : 0; /* cut, or a bad id: no text */
    }
    int changed;
    char *t = arena + *used;
    size_t tn = wk_utf8_clean(piece, n, t, &changed);
    e->token = (sch_str){t, tn};
    *used += tn;
    if (changed) {
        memcpy(arena + *used, piece, n);
        e->bytes = (sch_str){arena + *used, n};
        *used += n;
    }
}

int wk_lp_set_build(const wk_worker *w, const wk_choice *c, int from, int to, wk_lp_set *out) {
    memset(out, 0, sizeof *out);
    if (to <= from || to > c->n_lp) return 0;
    size_t n = (size_t)(to - from), n_top = 0;
    for (int i = from; i < to; i++) n_top += (size_t)c->lp[i].n_top;
    out->lp = calloc(n, sizeof *out->lp);
    out->tops = n_top ? calloc(n_top, sizeof *out->tops) : NULL;
    /* each text at most 3 x its piece cleaned plus the piece raw */
    size_t maxp = eng_tok_max_piece(w->eng.tok);
    if (maxp < 64) maxp = 64; /* control tokens' spellings */
    if (maxp > WK_PIECE_MAX) maxp = WK_PIECE_MAX;
    out->arena = malloc((n + n_top) * 4 * maxp);
    if (!out->lp || (n_top && !out->tops) || !out->arena) {
        wk_lp_set_free(out);
        return -1;
    }
    size_t used = 0, k = 0;
    for (int i = from; i < to; i++) {
        const wk_lp *l = &c->lp[i];
        sch_logprob *e = &out->lp[i - from];
        wk_lp_entry(w, l->id, l->logprob, e, out->arena, &used);
        e->top = l->n_top ? out->tops + k : NULL;
        e->n_top = (size_t)l->n_top;
        for (int j = 0; j < l->n_top; j++, k++) {
            const eng_sampler_lp *a = &c->tops[l->top_from + j];
            wk_lp_entry(w, a->token, a->logprob, &out->tops[k], out->arena, &used);
        }
    }
    return 0;
}

void wk_lp_set_free(wk_lp_set *s) {
    free(s->lp);
    free(s->tops);
    free(s->arena);
    memset(s, 0, sizeof *s);
}

int wk_result_encode(sch_result *s, bool json, size_t max_bytes, sch_buf *out, char *err,
                     size_t errlen) {
    int (*enc)(const sch_result *, sch_buf *, char *, size_t) =
        json ? sch_result_encode_json : sch_result_encode;
    int rc = enc(s, out, err, errlen);
    if (!rc && out->len > max_bytes) {
        /* admission bounds logprobs, so this is a worker bug: say so plainly */
        sch_result_fail(s, SCH_E_INTERNAL, sch_str_c("the reply is larger than max_total_bytes"));
        rc = enc(s, out, err, errlen);
    }
    if (rc) {
        /* The message (engine text) broke the schema's rules: say so plainly. */
        s->error_message = sch_str_c("engine error (message not representable)");
        rc = enc(s, out, err, errlen);
    }
    return rc;
}
