/*
 * tok_pre.c -- byte-level BPE pre-tokenizers as hand-written matchers.
 *
 * Each function below is equivalent to one regex that HF tokenizers runs
 * (with Oniguruma) to split text into pieces before BPE; the regexes are
 * quoted above each.  \p{L} and \p{N} are Unicode general categories L and
 * N and \s is the White_Space property, from the generated tables in
 * unicode_tables.c.  The matchers follow the regexes' alternation order at
 * each position (leftmost alternative first, each greedy, with the one
 * look-ahead \s+(?!\S) handled by giving back the last whitespace).  Input is
 * valid UTF-8 (the encoder replaced ill-formed bytes before).
 *
 * "smollm" (SmolLM/SmolLM2, StarCoder) is two splits in sequence, as HF's
 * Sequence[Digits(individual_digits), ByteLevel] and llama.cpp's two-regex
 * list do: first every \p{N} code point becomes a piece of its own, then
 * GPT-2's regex runs on each run of non-numbers separately (a run's end is
 * the end of text for the look-ahead, so " 7" is " " then "7").
 *
 * Also the GPT-2 byte alphabet: bytes 0x21-0x7E, 0xA1-0xAC, 0xAE-0xFF stand
 * for themselves, the other 68 bytes map to U+0100.. in byte order.
 */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

uint32_t tok_byte_to_cp(uint8_t b) {
    if ((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE) return b;
    /* position of b among the non-printable bytes */
    uint32_t k = b <= 0x20 ? b : b <= 0xA0 ? (uint32_t)b - 0x7F + 0x21 : 0x21 + 0x22;
    return 0x100 + k;
}

int tok_cp_to_byte(uint32_t cp) {
    if ((cp >= 0x21 && cp <= 0x7E) || (cp >= 0xA1 && cp <= 0xAC) || (cp >= 0xAE && cp <= 0xFF))
        return (int)cp;
    if (cp < 0x100 || cp > 0x100 + 0x43) return -1;
    uint32_t k = cp - 0x100;
    if (k <= 0x20) return (int)k;
    if (k <= 0x20 + 0x22) return (int)(k - 0x21 + 0x7F);
    return 0xAD;
}

/* Decoded code points of the text with their byte offsets. */
typedef struct cps {
    uint32_t *cp;  /* code points */
    uint32_t *off; /* byte offset of each, plus off[n] = text length */
    uint16_t *fl;  /* TOK_UF_* flags of each */
    size_t n;      /* count */
} cps;

#define CP_EOF 0xFFFFFFFFu

static inline uint32_t at(const cps *c, size_t i) { return i < c->n ? c->cp[i] : CP_EOF; }
static inline uint32_t fl(const cps *c, size_t i) { return i < c->n ? c->fl[i] : 0; }
static inline int is_l(const cps *c, size_t i) { return (fl(c, i) & TOK_UF_L) != 0; }
static inline int is_n(const cps *c, size_t i) { return (fl(c, i) & TOK_UF_N) != 0; }
static inline int is_ws(const cps *c, size_t i) { return (fl(c, i) & TOK_UF_WS) != 0; }
static inline int is_crlf(uint32_t c) { return c == '\r' || c == '\n'; }
/* [^\s\p{L}\p{N}] (and not past the end) */
static inline int is_other(const cps *c, size_t i) {
    return i < c->n && !(fl(c, i) & (TOK_UF_WS | TOK_UF_L | TOK_UF_N));
}

static uint32_t fold(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c == 0x17F) return 's'; /* LATIN SMALL LETTER LONG S case-folds to s */
    return c;
}

/* Contractions 's|'t|'re|'ve|'m|'ll|'d at i (case-insensitive when ci);
 * returns the match length in code points or 0. */
static size_t contraction(const cps *c, size_t i, int ci) {
    if (at(c, i) != '\'') return 0;
    uint32_t a = at(c, i + 1), b = at(c, i + 2);
    if (ci) a = fold(a), b = fold(b);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
}

/* \s*[\r\n]+|\s+(?!\S)|\s+ at a whitespace position i: match length. */
static size_t whitespace_tail(const cps *c, size_t i, int with_crlf) {
    size_t n = 0, last_nl = 0;
    while (is_ws(c, i + n)) {
        if (with_crlf && is_crlf(at(c, i + n))) last_nl = n + 1;
        n++;
    }
    if (last_nl) return last_nl;
    if (n > 1 && i + n < c->n) return n - 1;
    return n;
}

/* One match of the GPT-2 regex at i:
 * 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t match_gpt2(const cps *c, size_t i) {
    size_t k = contraction(c, i, 0);
    if (k) return k;
    size_t j = i + (at(c, i) == ' ');
    if (is_l(c, j)) {
        while (is_l(c, j)) j++;
        return j - i;
    }
    if (is_n(c, j)) {
        while (is_n(c, j)) j++;
        return j - i;
    }
    if (is_other(c, j)) {
        while (is_other(c, j)) j++;
        return j - i;
    }
    if (is_ws(c, i)) return whitespace_tail(c, i, 0);
    return 1;
}

/* One match of the Llama 3 (max_digits 3) or Qwen2 (max_digits 1) regex:
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t match_llama3(const cps *c, size_t i, size_t max_digits) {
    size_t k = contraction(c, i, 1);
    if (k) return k;
    uint32_t c0 = at(c, i);
    if (!is_crlf(c0) && !is_n(c, i) && (is_l(c, i) || is_l(c, i + 1))) {
        size_t j = i + 1;
        while (is_l(c, j)) j++;
        return j - i;
    }
    if (is_n(c, i)) {
        size_t j = i;
        while (j - i < max_digits && is_n(c, j)) j++;
        return j - i;
    }
    size_t j = i + (c0 == ' ');
    if (is_other(c, j)) {
        while (is_other(c, j)) j++;
        while (is_crlf(at(c, j))) j++;
        return j - i;
    }
    if (is_ws(c, i)) return whitespace_tail(c, i, 1);
    return 1;
}

/* One piece of the "smollm" split at i: a single \p{N}, or one GPT-2 match
 * inside the run of non-numbers that holds i, which ends at *run_end
 * (found once per run, kept by the caller, so the split stays linear). */
static size_t match_smollm(const cps *c, size_t i, size_t *run_end) {
    if (is_n(c, i)) return 1;
    if (*run_end <= i) {
        *run_end = i;
        while (*run_end < c->n && !is_n(c, *run_end)) (*run_end)++;
    }
    cps run = {c->cp + i, c->off + i, c->fl + i, *run_end - i};
    return match_gpt2(&run, 0);
}

int tok_pretokenize(eng_tok_pre pre, const char *text, size_t len, tok_piece_fn emit, void *ctx) {
    if (len == 0) return 0;
    cps c = {0};
    int rc = 0;
    c.cp = malloc((len + 1) * sizeof *c.cp);
    c.off = malloc((len + 1) * sizeof *c.off);
    c.fl = malloc((len + 1) * sizeof *c.fl);
    if (!c.cp || !c.off || !c.fl || len > UINT32_MAX - 1) {
        rc = ENG_TOK_ENOMEM;
        goto out;
    }
    const uint8_t *s = (const uint8_t *)text;
    for (size_t pos = 0; pos < len;) {
        uint32_t cp;
        size_t bad;
        int n;
        if (s[pos] < 0x80) cp = s[pos], n = 1;
        else if ((n = tok_utf8_decode(s + pos, len - pos, &cp, &bad)) == 0)
            cp = 0xFFFD, n = (int)bad;
        c.cp[c.n] = cp;
        c.off[c.n] = (uint32_t)pos;
        c.fl[c.n] = (uint16_t)tok_unicode_flags(cp);
        c.n++;
        pos += (size_t)n;
    }
    c.off[c.n] = (uint32_t)len;
    size_t run_end = 0; /* "smollm": end of the current run of non-numbers */
    for (size_t i = 0; i < c.n;) {
        size_t k;
        if (pre == ENG_TOK_PRE_SMOLLM) k = match_smollm(&c, i, &run_end);
        else if (pre == ENG_TOK_PRE_GPT2) k = match_gpt2(&c, i);
        else if (pre == ENG_TOK_PRE_QWEN2) k = match_llama3(&c, i, 1);
        else k = match_llama3(&c, i, 3);
        if (k == 0) k = 1;
        if (i + k > c.n) k = c.n - i;
        rc = emit(ctx, text + c.off[i], c.off[i + k] - c.off[i]);
        if (rc) goto out;
        i += k;
    }
out:
    free(c.cp);
    free(c.off);
    free(c.fl);
    return rc;
}
