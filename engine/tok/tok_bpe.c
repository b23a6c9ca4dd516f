/*
 * tok_bpe.c -- the merge loops of both vocabulary models.
 *
 * Byte-level BPE ("gpt2"): each pre-tokenized piece becomes one symbol per
 * byte (the token spelling that byte in GPT-2's alphabet); then, exactly as
 * HF tokenizers' BPE::merge_word, the pair with the lowest merge rank is
 * merged first, the leftmost on ties, until no adjacent pair has a merge.
 * With ignore_merges (Llama 3) a piece that is itself a token is emitted
 * whole first.
 *
 * SentencePiece-style ("llama"): spaces become "▁" (and one "▁" is
 * prepended with add_space_prefix); the symbols are the UTF-8 characters;
 * the adjacent pair whose concatenation is the token with the highest score
 * is merged first, the leftmost on ties (llama.cpp's llm_tokenizer_spm; HF's
 * BPE on a SentencePiece-converted merge list gives the same result);
 * control, unknown and byte tokens are never merge results (as in
 * SentencePiece itself, so text cannot turn into "<s>"); characters that
 * are not tokens fall back to <0xNN> byte tokens, or to the
 * unknown token (consecutive unknowns fused, as HF's fuse_unk) when a byte
 * token is missing.
 *
 * Both use a binary heap with stale-entry skipping: O(n log n) per piece,
 * so a megabyte of whitespace is no worse than a megabyte of words.
 */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

typedef struct sym {
    int32_t id;     /* token id (-1: not a token; never merged) */
    int32_t prev;   /* previous live symbol or -1 */
    int32_t next;   /* next live symbol or -1 */
    uint32_t start; /* SPM: byte offset of the symbol's text */
    uint32_t len;   /* SPM: byte length; 0 once merged away */
} sym;

typedef struct hent {
    float key;    /* SPM: -score; BPE: rank (exact for ranks < 2^24) */
    int32_t rank; /* BPE: rank (exact comparison) */
    int32_t pos;  /* left symbol index */
    int32_t res;  /* result token id */
} hent;

typedef struct heap {
    hent *v;    /* entries */
    size_t n;   /* used */
    size_t cap; /* allocated (entries) */
} heap;

static inline int hless(const hent *a, const hent *b) {
    if (a->rank != b->rank) return a->rank < b->rank;
    if (a->key != b->key) return a->key < b->key;
    return a->pos < b->pos;
}

static int hpush(heap *h, hent e) {
    if (h->n == h->cap) {
        size_t nc = h->cap ? h->cap * 2 : 64;
        hent *v = realloc(h->v, nc * sizeof *v);
        if (!v) return ENG_TOK_ENOMEM;
        h->v = v;
        h->cap = nc;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!hless(&e, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = e;
    return 0;
}

static hent hpop(heap *h) {
    hent top = h->v[0], last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const hent *best = &last;
        if (l < h->n && hless(&h->v[l], best)) m = l, best = &h->v[l];
        if (r < h->n && hless(&h->v[r], best)) m = r;
        if (m == i) break;
        h->v[i] = h->v[m];
        i = m;
    }
    if (h->n) h->v[i] = last;
    return top;
}

static int ensure_syms(tok_scratch *sc, size_t n) {
    if (n * sizeof(sym) <= sc->sym_cap) return 0;
    size_t cap = n * sizeof(sym) * 2;
    void *p = realloc(sc->sym, cap);
    if (!p) return ENG_TOK_ENOMEM;
    sc->sym = p;
    sc->sym_cap = cap;
    return 0;
}

/* ---------------- byte-level BPE ---------------- */

static int bpe_pair(const eng_tok *t, const sym *s, int32_t i, heap *h) {
    int32_t j = s[i].next, rank, res;
    if (j < 0 || s[i].id < 0 || s[j].id < 0) return 0;
    if (!tok_merge_lookup(t, s[i].id, s[j].id, &rank, &res)) return 0;
    hent e = {0.0f, rank, i, res};
    return hpush(h, e);
}

typedef struct bpe_ctx {
    const eng_tok *t; /* vocabulary */
    tok_scratch *sc;  /* scratch */
    tok_ids *out;     /* output ids */
} bpe_ctx;

static int bpe_piece(void *vctx, const char *p, size_t len) {
    bpe_ctx *c = vctx;
    const eng_tok *t = c->t;
    tok_scratch *sc = c->sc;
    if (t->ignore_merges || len == 1) {
        sc->buf.n = 0;
        for (size_t i = 0; i < len; i++) {
            char u[4];
            int k = tok_utf8_encode(tok_byte_to_cp((uint8_t)p[i]), u);
            if (tok_buf_put(&sc->buf, u, (size_t)k)) return ENG_TOK_ENOMEM;
        }
        int32_t id = tok_vocab_lookup(t, sc->buf.v, sc->buf.n);
        if (id >= 0) return tok_ids_push(c->out, id);
    }
    if (len > INT32_MAX / 2 || ensure_syms(sc, len)) return ENG_TOK_ENOMEM;
    sym *s = sc->sym;
    int32_t n = 0;
    for (size_t i = 0; i < len; i++) {
        int32_t id = t->byte_id[(uint8_t)p[i]];
        if (id < 0) continue; /* no token for this byte: dropped, as HF without unk */
        s[n] = (sym){id, n - 1, -1, 0, 1};
        if (n > 0) s[n - 1].next = n;
        n++;
    }
    heap h = {sc->heap, 0, sc->heap_cap / sizeof(hent)};
    int rc = 0;
    for (int32_t i = 0; i < n && !rc; i++) rc = bpe_pair(t, s, i, &h);
    while (!rc && h.n) {
        hent e = hpop(&h);
        int32_t i = e.pos, j = s[i].next;
        if (s[i].len == 0 || j < 0) continue;
        int32_t rank, res;
        if (!tok_merge_lookup(t, s[i].id, s[j].id, &rank, &res) || res != e.res || rank != e.rank)
            continue;
        s[i].id = res;
        s[j].len = 0;
        s[i].next = s[j].next;
        if (s[j].next >= 0) s[s[j].next].prev = i;
        if (s[i].prev >= 0) rc = bpe_pair(t, s, s[i].prev, &h);
        if (!rc) rc = bpe_pair(t, s, i, &h);
    }
    sc->heap = h.v;
    sc->heap_cap = h.cap * sizeof(hent);
    for (int32_t i = n > 0 ? 0 : -1; i >= 0 && !rc; i = s[i].next)
        rc = tok_ids_push(c->out, s[i].id);
    return rc;
}

int tok_bpe_encode(const eng_tok *t, const char *text, size_t len, tok_scratch *sc, tok_ids *out) {
    bpe_ctx c = {t, sc, out};
    return tok_pretokenize(t->pre, text, len, bpe_piece, &c);
}

/* ---------------- SentencePiece-style ---------------- */

static int spm_pair(const eng_tok *t, const char *txt, const sym *s, int32_t i, heap *h) {
    int32_t j = s[i].next;
    if (j < 0 || s[i].id < 0 || s[j].id < 0) return 0;
    int32_t id = tok_vocab_lookup(t, txt + s[i].start, s[i].len + s[j].len);
    /* text never merges into a control, unknown or byte token (SentencePiece
     * does not either): user content cannot spell "<s>" into BOS */
    if (id < 0 || t->types[id] == ENG_TOK_TYPE_CONTROL || t->types[id] == ENG_TOK_TYPE_UNKNOWN ||
        t->types[id] == ENG_TOK_TYPE_BYTE)
        return 0;
    hent e = {-t->scores[id], 0, i, id};
    return hpush(h, e);
}

static int spm_emit_unknown(const eng_tok *t, const char *p, size_t n, tok_ids *out) {
    for (size_t k = 0; k < n; k++)
        if (t->byte_id[(uint8_t)p[k]] < 0) goto unk;
    for (size_t k = 0; k < n; k++)
        if (tok_ids_push(out, t->byte_id[(uint8_t)p[k]])) return ENG_TOK_ENOMEM;
    return 0;
unk:
    if (t->unk < 0) return 0;
    if (out->n > 0 && out->v[out->n - 1] == t->unk) return 0; /* fuse_unk */
    return tok_ids_push(out, t->unk);
}

int tok_spm_encode(const eng_tok *t, const char *text, size_t len, bool prefix, tok_scratch *sc,
                   tok_ids *out) {
    if (len == 0) return 0;
    tok_buf *b = &sc->buf;
    b->n = 0;
    if (prefix && t->add_space_prefix && tok_buf_put(b, "\xE2\x96\x81", 3)) return ENG_TOK_ENOMEM;
    for (size_t i = 0; i < len; i++) {
        if (text[i] == ' ' ? tok_buf_put(b, "\xE2\x96\x81", 3) : tok_buf_put(b, text + i, 1))
            return ENG_TOK_ENOMEM;
    }
    if (b->n > INT32_MAX / 2 || ensure_syms(sc, b->n)) return ENG_TOK_ENOMEM;
    const char *txt = b->v;
    sym *s = sc->sym;
    int32_t n = 0;
    for (size_t pos = 0; pos < b->n;) {
        uint32_t cp;
        size_t bad;
        int k = tok_utf8_decode((const uint8_t *)txt + pos, b->n - pos, &cp, &bad);
        size_t l = k > 0 ? (size_t)k : bad;
        int32_t id = tok_vocab_lookup(t, txt + pos, l);
        if (id >= 0 && (t->types[id] == ENG_TOK_TYPE_CONTROL ||
                        t->types[id] == ENG_TOK_TYPE_UNKNOWN || t->types[id] == ENG_TOK_TYPE_BYTE))
            id = -1;
        s[n] = (sym){id, n - 1, -1, (uint32_t)pos, (uint32_t)l};
        if (n > 0) s[n - 1].next = n;
        n++;
        pos += l;
    }
    heap h = {sc->heap, 0, sc->heap_cap / sizeof(hent)};
    int rc = 0;
    for (int32_t i = 0; i < n && !rc; i++) rc = spm_pair(t, txt, s, i, &h);
    while (!rc && h.n) {
        hent e = hpop(&h);
        int32_t i = e.pos, j = s[i].next;
        if (s[i].len == 0 || j < 0) continue;
        /* stale unless the pair still spells the same token */
        if (s[i].id < 0 || s[j].id < 0 || t->text_len[e.res] != s[i].len + s[j].len) continue;
        s[i].id = e.res;
        s[i].len += s[j].len;
        s[j].len = 0;
        s[i].next = s[j].next;
        if (s[j].next >= 0) s[s[j].next].prev = i;
        if (s[i].prev >= 0) rc = spm_pair(t, txt, s, s[i].prev, &h);
        if (!rc) rc = spm_pair(t, txt, s, i, &h);
    }
    sc->heap = h.v;
    sc->heap_cap = h.cap * sizeof(hent);
    for (int32_t i = n > 0 ? 0 : -1; i >= 0 && !rc; i = s[i].next) {
        if (s[i].id >= 0) rc = tok_ids_push(out, s[i].id);
        else rc = spm_emit_unknown(t, txt + s[i].start, s[i].len, out);
    }
    return rc;
}
