/*
 * fuzz_tok.c -- libFuzzer target for the tokenizer and chat templates.
 *
 * The first input byte picks the work, the rest is the payload:
 *   encode   arbitrary bytes with each model / pre-tokenizer, with and without
 *            special-token parsing; without it, valid UTF-8 must round-trip
 *            through decode, and the ids must all be in the vocabulary
 *   decode   the payload as an id list (some out of range): decode and the
 *            streaming detokeniser must agree and emit valid UTF-8 only
 *   template the payload split into role/content messages, rendered by every
 *            format to text and to ids; and rendered again with the turn
 *            before its last assistant message as the prior
 *            (eng_tmpl_render_turn), its generated ids the encoding of that
 *            message (cut or ended by an end-of-turn id): the spliced ids
 *            must decode exactly as the full render's ids, with exactly the
 *            template's special tokens
 * Vocabularies are small in-memory ones built once (byte tokens, a few
 * merges, special tokens), so inputs reach every path quickly.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_template.h"
#include "eng_tok.h"
#include "tok_internal.h"

static eng_tok *bpe[4], *spm[2];

static eng_tok *make_bpe(eng_tok_pre pre) {
    static char store[256][4];
    const char *toks[300];
    int32_t types[300];
    int n = 0;
    for (int b = 0; b < 256; b++) {
        store[b][tok_utf8_encode(tok_byte_to_cp((uint8_t)b), store[b])] = 0;
        types[n] = ENG_TOK_TYPE_NORMAL;
        toks[n++] = store[b];
    }
    const char *extra[] = {"he",          "ll", "hell", "\xc4\xa0t",
                           "\xc4\xa0the", "th", "the",  "\xc4\xa0\xc4\xa0"};
    for (int i = 0; i < 8; i++) types[n] = ENG_TOK_TYPE_NORMAL, toks[n++] = extra[i];
    const char *sp[] = {"<|begin_of_text|>", "<|eot_id|>",   "<|start_header_id|>",
                        "<|end_header_id|>", "<|im_start|>", "<|im_end|>"};
    for (int i = 0; i < 6; i++) types[n] = ENG_TOK_TYPE_CONTROL, toks[n++] = sp[i];
    const char *merges[] = {"h e", "l l",  "he ll",        "\xc4\xa0 t",
                            "t h", "th e", "\xc4\xa0t he", "\xc4\xa0 \xc4\xa0"};
    eng_tok_spec s = {.model = ENG_TOK_MODEL_BPE,
                      .pre = pre,
                      .n_tokens = n,
                      .tokens = toks,
                      .types = types,
                      .n_merges = 8,
                      .merges = merges,
                      .bos = 264,
                      .eos = 265,
                      .eot = 265,
                      .unk = -1,
                      .pad = -1,
                      .ignore_merges = pre == ENG_TOK_PRE_LLAMA3};
    eng_tok *t = NULL;
    if (eng_tok_load_spec(&s, &t, NULL, 0) != 0) abort();
    return t;
}

static eng_tok *make_spm(bool prefix) {
    static char bytes[256][8];
    const char *toks[300];
    float scores[300];
    int32_t types[300];
    int n = 0;
    const char *sp[] = {"<unk>", "<s>", "</s>", "<start_of_turn>", "<end_of_turn>"};
    for (int i = 0; i < 5; i++)
        toks[n] = sp[i], scores[n] = 0,
        types[n++] = i ? ENG_TOK_TYPE_CONTROL : ENG_TOK_TYPE_UNKNOWN;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        toks[n] = bytes[b], scores[n] = 0, types[n++] = ENG_TOK_TYPE_BYTE;
    }
    const char *w[] = {"\xe2\x96\x81",
                       "a",
                       "b",
                       "ab",
                       "\xe2\x96\x81"
                       "a",
                       "\xe2\x96\x81"
                       "ab",
                       "\xe4\xb8\xad",
                       "<",
                       "s",
                       ">",
                       "<s"};
    for (int i = 0; i < 11; i++)
        toks[n] = w[i], scores[n] = -(float)i, types[n++] = ENG_TOK_TYPE_NORMAL;
    eng_tok_spec s = {.model = ENG_TOK_MODEL_SPM,
                      .n_tokens = n,
                      .tokens = toks,
                      .scores = scores,
                      .types = types,
                      .bos = 1,
                      .eos = 2,
                      .eot = 4,
                      .unk = 0,
                      .pad = -1,
                      .add_bos = true,
                      .add_space_prefix = prefix};
    eng_tok *t = NULL;
    if (eng_tok_load_spec(&s, &t, NULL, 0) != 0) abort();
    return t;
}

static void init(void) {
    if (bpe[0]) return;
    bpe[0] = make_bpe(ENG_TOK_PRE_LLAMA3);
    bpe[1] = make_bpe(ENG_TOK_PRE_QWEN2);
    bpe[2] = make_bpe(ENG_TOK_PRE_GPT2);
    bpe[3] = make_bpe(ENG_TOK_PRE_SMOLLM);
    spm[0] = make_spm(true);
    spm[1] = make_spm(false);
}

static int valid_utf8(const char *s, size_t n) {
    char *o;
    size_t m;
    if (tok_utf8_sanitize(s, n, &o, &m) != 0) abort();
    if (o != s) free(o);
    return o == s;
}

static void fuzz_encode(eng_tok *t, const char *d, size_t n, int flags) {
    int cnt = eng_tok_count(t, d, n, flags, NULL, 0);
    if (cnt < 0) abort();
    int32_t *ids = malloc(((size_t)cnt + 1) * sizeof *ids);
    int got;
    if (eng_tok_encode(t, d, n, flags, ids, cnt, &got, NULL, 0) != 0 || got != cnt) abort();
    for (int i = 0; i < got; i++)
        if (ids[i] < 0 || ids[i] >= eng_tok_n_vocab(t)) abort();
    size_t need;
    int rc = eng_tok_decode(t, ids, got, 0, NULL, 0, &need, NULL, 0);
    if (rc != 0 && rc != ENG_TOK_ENOSPC) abort();
    char *out = malloc(need + 1);
    if (eng_tok_decode(t, ids, got, 0, out, need + 1, &need, NULL, 0) != 0) abort();
    if (!valid_utf8(out, need)) abort();
    /* lossless except that SPM spells spaces as U+2581, so a literal U+2581
     * in the text comes back as a space (as with HF) */
    bool lossless =
        !(flags & ENG_TOK_PARSE_SPECIAL) && valid_utf8(d, n) &&
        !(eng_tok_model_kind(t) == ENG_TOK_MODEL_SPM && memmem(d, n, "\xe2\x96\x81", 3));
    if (lossless && (need != n || memcmp(out, d, n) != 0)) abort();
    free(out);
    free(ids);
}

static void fuzz_decode(eng_tok *t, const uint8_t *d, size_t n, int flags) {
    int k = (int)(n / 2);
    int32_t *ids = malloc(((size_t)k + 1) * sizeof *ids);
    for (int i = 0; i < k; i++) ids[i] = (int32_t)(d[2 * i] | (d[2 * i + 1] << 8)) - 8;
    size_t need;
    int rc = eng_tok_decode(t, ids, k, flags, NULL, 0, &need, NULL, 0);
    if (rc == ENG_TOK_EINVAL) {
        free(ids);
        return;
    }
    char *out = malloc(need + 1), *cat = malloc(need + 4);
    if (eng_tok_decode(t, ids, k, flags, out, need + 1, &need, NULL, 0) != 0) abort();
    eng_tok_stream s;
    eng_tok_stream_init(&s, t, flags);
    size_t cap = eng_tok_stream_cap(t), cl = 0, got;
    char *chunk = malloc(cap);
    for (int i = 0; i <= k; i++) {
        rc = i < k ? eng_tok_stream_push(&s, ids[i], chunk, cap, &got)
                   : eng_tok_stream_flush(&s, chunk, cap, &got);
        if (rc || !valid_utf8(chunk, got) || cl + got > need) abort();
        memcpy(cat + cl, chunk, got);
        cl += got;
    }
    if (cl != need || memcmp(cat, out, need) != 0) abort();
    free(chunk);
    free(cat);
    free(out);
    free(ids);
}

/* Decode ids with special tokens spelled (malloc'd, *len bytes), or NULL. */
static char *decode_all(const eng_tok *t, const int32_t *ids, int n, size_t *len) {
    size_t cap = (size_t)n * (eng_tok_max_piece(t) + 4) + 16;
    char *out = malloc(cap);
    if (out && eng_tok_decode(t, ids, n, ENG_TOK_DECODE_SPECIAL, out, cap, len, NULL, 0) != 0) {
        free(out);
        return NULL;
    }
    return out;
}

static void fuzz_splice(eng_tmpl_format f, const eng_tok *t, const eng_tmpl_msg *m, int nm,
                        uint8_t knob) {
    int a = -1;
    for (int i = 1; i < nm; i++)
        if (!strcmp(m[i].role, "assistant")) a = i;
    if (a < 1) return;
    eng_tmpl_turn prev, cur;
    if (eng_tmpl_render_turn(f, t, m, a, true, NULL, &prev, NULL, 0) != 0) return;
    int32_t gen[65];
    int ng = 0;
    size_t cl = m[a].content_len < 200 ? m[a].content_len : 200;
    if (eng_tok_encode(t, m[a].content, cl, 0, gen, 64, &ng, NULL, 0) != 0) ng = 0;
    if (ng > (knob & 63)) ng = knob & 63; /* the model stopped early (by length) */
    if (knob & 64) gen[ng++] = eng_tok_eos(t) >= 0 ? eng_tok_eos(t) : 0;
    eng_tmpl_prior p = {a,          prev.text, prev.n_text, prev.spec,    prev.n_spec,     prev.ids,
                        prev.n_ids, gen,       ng,          m[a].content, m[a].content_len};
    int rc = eng_tmpl_render_turn(f, t, m, nm, true, &p, &cur, NULL, 0);
    if (rc == 0) {
        int nfull = 0;
        eng_tmpl_render_ids(f, t, m, nm, true, NULL, 0, &nfull, NULL, 0);
        int32_t *full = malloc(((size_t)nfull + 1) * sizeof *full);
        if (!full || eng_tmpl_render_ids(f, t, m, nm, true, full, nfull, &nfull, NULL, 0) != 0)
            abort();
        size_t la = 0, lb = 0;
        char *da = decode_all(t, cur.ids, cur.n_ids, &la), *db = decode_all(t, full, nfull, &lb);
        if (!da || !db || la != lb || memcmp(da, db, la) != 0) {
            fprintf(stderr, "DBG f=%d\nA[%.*s]\nB[%.*s]\n", (int)f, (int)la, da, (int)lb, db);
            for (int i = 0; i < cur.n_ids; i++) fprintf(stderr, "%d ", cur.ids[i]);
            fprintf(stderr, "\n");
            for (int i = 0; i < nfull; i++) fprintf(stderr, "%d ", full[i]);
            fprintf(stderr, "\nspliced %d gen %d\n", cur.n_spliced, cur.n_gen_spliced);
            abort();
        }
        int k = 0;
        for (int i = 0; i < cur.n_ids; i++) k += eng_tok_is_special(t, cur.ids[i]);
        if (k != cur.n_spec || cur.n_spliced < (cur.n_spliced ? prev.n_ids : 0)) abort();
        free(da);
        free(db);
        free(full);
        eng_tmpl_turn_free(&cur);
    } else if (rc != ENG_TMPL_EROLE && rc != ENG_TMPL_EVOCAB && rc != ENG_TMPL_ENOMEM) {
        abort();
    }
    eng_tmpl_turn_free(&prev);
}

static void fuzz_template(const char *d, size_t n) {
    eng_tmpl_msg m[16];
    int nm = 0;
    static const char *roles[] = {"system", "user", "assistant", "tool"};
    size_t pos = 0;
    while (pos < n && nm < 16) {
        const char *end = memchr(d + pos, 0, n - pos);
        size_t len = end ? (size_t)(end - (d + pos)) : n - pos;
        const char *r = roles[(uint8_t)(len ? d[pos] : 0) % 4];
        m[nm++] = (eng_tmpl_msg){
            .role = r, .role_len = strlen(r), .content = d + pos, .content_len = len};
        pos += len + 1;
    }
    for (int f = ENG_TMPL_LLAMA2; f <= ENG_TMPL_SMOLLM2; f++) {
        eng_tok *t = (f == ENG_TMPL_LLAMA2 || f == ENG_TMPL_GEMMA || f == ENG_TMPL_GEMMA2 ||
                      f == ENG_TMPL_TRANSCRIPT)
                         ? spm[0]
                         : bpe[0];
        size_t need;
        int nid;
        char err[128];
        int rc = eng_tmpl_render_text((eng_tmpl_format)f, t, m, nm, true, NULL, 0, &need, err,
                                      sizeof err);
        if (rc != 0 && rc != ENG_TMPL_ENOSPC && rc != ENG_TMPL_EROLE) abort();
        rc =
            eng_tmpl_render_ids((eng_tmpl_format)f, t, m, nm, true, NULL, 0, &nid, err, sizeof err);
        if (rc != 0 && rc != ENG_TMPL_ENOSPC && rc != ENG_TMPL_EROLE && rc != ENG_TMPL_EVOCAB)
            abort();
        fuzz_splice((eng_tmpl_format)f, t, m, nm, n ? (uint8_t)d[n - 1] : 0);
    }
    eng_tmpl_format f;
    eng_tmpl_recognise(d, n, &f, NULL, 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    init();
    if (size < 1) return 0;
    uint8_t sel = data[0];
    const char *d = (const char *)data + 1;
    size_t n = size - 1;
    switch (sel % 4) {
    case 0: fuzz_encode(bpe[(sel >> 2) % 4], d, n, (sel & 0x40) ? ENG_TOK_PARSE_SPECIAL : 0); break;
    case 1: fuzz_encode(spm[(sel >> 2) & 1], d, n, (sel & 0x40) ? ENG_TOK_PARSE_SPECIAL : 0); break;
    case 2:
        fuzz_decode((sel >> 2) & 1 ? spm[(sel >> 3) & 1] : bpe[0], (const uint8_t *)d, n,
                    (sel >> 4) & 1);
        break;
    default: fuzz_template(d, n); break;
    }
    return 0;
}
