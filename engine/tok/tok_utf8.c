/*
 * tok_utf8.c -- UTF-8 validation, replacement and the small helpers the
 * tokenizer shares (growable buffers, error messages, Unicode class lookup).
 *
 * Ill-formed input is replaced, never rejected: each maximal ill-formed
 * subpart (Unicode 15 section 3.9, "U+FFFD substitution of maximal
 * subparts") becomes one U+FFFD, which is exactly what Python's
 * bytes.decode("utf-8", "replace") and Rust's String::from_utf8_lossy do, so
 * parley tokenizes invalid bytes the way HF does on the replaced string.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

uint32_t tok_unicode_flags(uint32_t cp) {
    if (cp < 256) return tok_unicode_latin1[cp];
    int lo = 0, hi = tok_unicode_n_ranges - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (cp < tok_unicode_ranges[mid].first) hi = mid - 1;
        else if (cp > tok_unicode_ranges[mid].last) lo = mid + 1;
        else return tok_unicode_ranges[mid].flags;
    }
    return 0;
}

/* Valid range of the second byte for a lead byte (Table 3-7); the third and
 * fourth bytes are always 80..BF. */
static int second_range(uint8_t lead, uint8_t *lo, uint8_t *hi, int *need) {
    *lo = 0x80;
    *hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) *need = 2;
    else if (lead >= 0xE0 && lead <= 0xEF) {
        *need = 3;
        if (lead == 0xE0) *lo = 0xA0;
        if (lead == 0xED) *hi = 0x9F;
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        *need = 4;
        if (lead == 0xF0) *lo = 0x90;
        if (lead == 0xF4) *hi = 0x8F;
    } else return 0;
    return 1;
}

int tok_utf8_decode(const uint8_t *s, size_t len, uint32_t *cp, size_t *bad) {
    *bad = 1;
    if (len == 0) return 0;
    uint8_t b0 = s[0];
    if (b0 < 0x80) {
        *cp = b0;
        return 1;
    }
    uint8_t lo, hi;
    int need;
    if (!second_range(b0, &lo, &hi, &need)) return 0;
    if (len < 2 || s[1] < lo || s[1] > hi) return 0;
    for (int i = 2; i < need; i++) {
        if ((size_t)i >= len || (s[i] & 0xC0) != 0x80) {
            *bad = (size_t)i;
            return 0;
        }
    }
    uint32_t c = b0 & (need == 2 ? 0x1F : need == 3 ? 0x0F : 0x07);
    for (int i = 1; i < need; i++) c = (c << 6) | (s[i] & 0x3F);
    *cp = c;
    return need;
}

size_t tok_utf8_incomplete_tail(const uint8_t *s, size_t len) {
    /* Look at the last up to 3 bytes for a lead byte whose sequence is a
     * valid but unfinished prefix reaching the end. */
    for (size_t k = 1; k <= 3 && k <= len; k++) {
        const uint8_t *p = s + len - k;
        uint8_t lo, hi;
        int need;
        if (*p < 0x80) return 0;
        if ((*p & 0xC0) == 0x80) continue;
        if (!second_range(*p, &lo, &hi, &need)) return 0;
        if ((size_t)need <= k) return 0;
        if (k >= 2 && (p[1] < lo || p[1] > hi)) return 0;
        for (size_t i = 2; i < k; i++)
            if ((p[i] & 0xC0) != 0x80) return 0;
        return k;
    }
    return 0;
}

int tok_utf8_encode(uint32_t cp, char *out) {
    uint8_t *o = (uint8_t *)out;
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (uint8_t)(0xF0 | (cp >> 18));
    o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (uint8_t)(0x80 | (cp & 0x3F));
    return 4;
}

int tok_utf8_sanitize(const char *in, size_t len, char **out, size_t *out_len) {
    const uint8_t *s = (const uint8_t *)in;
    size_t pos = 0, bad = 1;
    uint32_t cp;
    while (pos < len) {
        if (s[pos] < 0x80) {
            pos++;
            continue;
        }
        int n = tok_utf8_decode(s + pos, len - pos, &cp, &bad);
        if (n == 0) break;
        pos += (size_t)n;
    }
    if (pos == len) {
        *out = (char *)in;
        *out_len = len;
        return 0;
    }
    /* Worst case: every byte becomes 3 bytes. */
    if (len > (SIZE_MAX - 1) / 3) return ENG_TOK_ENOMEM;
    char *o = malloc(len * 3 + 1);
    if (!o) return ENG_TOK_ENOMEM;
    memcpy(o, in, pos);
    size_t w = pos;
    while (pos < len) {
        int n = tok_utf8_decode(s + pos, len - pos, &cp, &bad);
        if (n > 0) {
            memcpy(o + w, s + pos, (size_t)n);
            w += (size_t)n;
            pos += (size_t)n;
        } else {
            memcpy(o + w, "\xEF\xBF\xBD", 3);
            w += 3;
            pos += bad;
        }
    }
    o[w] = 0;
    *out = o;
    *out_len = w;
    return 0;
}

int tok_ids_push(tok_ids *b, int32_t id) {
    if (b->n == b->cap) {
        if (b->cap > (1 << 29)) return ENG_TOK_ENOMEM;
        int nc = b->cap ? b->cap * 2 : 256;
        int32_t *v = realloc(b->v, (size_t)nc * sizeof *v);
        if (!v) return ENG_TOK_ENOMEM;
        b->v = v;
        b->cap = nc;
    }
    b->v[b->n++] = id;
    return 0;
}

int tok_buf_put(tok_buf *b, const void *p, size_t n) {
    if (n > SIZE_MAX / 4 - b->n) return ENG_TOK_ENOMEM;
    if (b->n + n + 1 > b->cap) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc < b->n + n + 1) nc *= 2;
        char *v = realloc(b->v, nc);
        if (!v) return ENG_TOK_ENOMEM;
        b->v = v;
        b->cap = nc;
    }
    if (n) memcpy(b->v + b->n, p, n);
    b->n += n;
    b->v[b->n] = 0;
    return 0;
}

void tok_scratch_free(tok_scratch *s) {
    free(s->sym);
    free(s->heap);
    free(s->buf.v);
    memset(s, 0, sizeof *s);
}
