/*
 * tok_vocab.c -- building and querying a loaded vocabulary (struct eng_tok).
 *
 * eng_tok_load_spec validates an eng_tok_spec (the in-memory form of the
 * GGUF tokenizer.ggml.* keys), copies the token texts into one pool,
 * precomputes every token's decoded bytes, and builds the hash tables the
 * encoder needs: token text -> id, and for byte-level BPE (left, right) ->
 * (rank, result).  Everything is read-only afterwards, so one eng_tok is
 * shared by all threads.
 */
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"
#include "pl_hash.h"

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = pl_fnv1a64(PL_FNV64_SEED, s, n);
    return h ^ (h >> 29);
}

static uint64_t hash_u64(uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    return k ^ (k >> 33);
}

static uint32_t table_size(size_t n) {
    uint32_t s = 16;
    while (s < n * 2) s <<= 1;
    return s;
}

int32_t tok_vocab_lookup(const eng_tok *t, const char *s, size_t n) {
    uint32_t i = (uint32_t)hash_bytes(s, n) & t->tmap_mask;
    for (;;) {
        int32_t id = t->tmap[i];
        if (id < 0) return -1;
        if (t->text_len[id] == n && memcmp(t->text_pool + t->text_off[id], s, n) == 0) return id;
        i = (i + 1) & t->tmap_mask;
    }
}

bool tok_merge_lookup(const eng_tok *t, int32_t left, int32_t right, int32_t *rank, int32_t *res) {
    if (!t->mmask) return false;
    uint64_t key = (((uint64_t)(uint32_t)left << 32) | (uint32_t)right) + 1;
    uint32_t i = (uint32_t)hash_u64(key) & t->mmask;
    for (;;) {
        uint64_t k = t->mkey[i];
        if (k == 0) return false;
        if (k == key) {
            *rank = t->mrank[i];
            *res = t->mres[i];
            return true;
        }
        i = (i + 1) & t->mmask;
    }
}

static size_t slen(const char *const *v, const size_t *lens, int i) {
    return lens ? lens[i] : strlen(v[i]);
}

/* Decoded bytes of token id (see eng_tok_piece), appended to b. */
static int build_piece(eng_tok *t, int32_t id, tok_buf *b) {
    const char *s = t->text_pool + t->text_off[id];
    size_t n = t->text_len[id];
    int ty = t->types[id];
    if (ty == ENG_TOK_TYPE_CONTROL || ty == ENG_TOK_TYPE_USER_DEFINED || ty == ENG_TOK_TYPE_UNKNOWN)
        return tok_buf_put(b, s, n);
    if (t->model == ENG_TOK_MODEL_SPM) {
        if (ty == ENG_TOK_TYPE_BYTE && n == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>') {
            char hex[3] = {s[3], s[4], 0};
            char *end;
            unsigned long v = strtoul(hex, &end, 16);
            if (*end == 0) {
                uint8_t byte = (uint8_t)v;
                return tok_buf_put(b, &byte, 1);
            }
        }
        for (size_t i = 0; i < n;) {
            if (i + 3 <= n && memcmp(s + i, "\xE2\x96\x81", 3) == 0) {
                if (tok_buf_put(b, " ", 1)) return ENG_TOK_ENOMEM;
                i += 3;
            } else {
                if (tok_buf_put(b, s + i, 1)) return ENG_TOK_ENOMEM;
                i++;
            }
        }
        return 0;
    }
    /* byte-level: map each alphabet character back to its byte */
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t bad;
        int k = tok_utf8_decode((const uint8_t *)s + i, n - i, &cp, &bad);
        if (k == 0) {
            if (tok_buf_put(b, s + i, bad)) return ENG_TOK_ENOMEM;
            i += bad;
            continue;
        }
        int byte = tok_cp_to_byte(cp);
        if (byte >= 0) {
            uint8_t c = (uint8_t)byte;
            if (tok_buf_put(b, &c, 1)) return ENG_TOK_ENOMEM;
        } else if (tok_buf_put(b, s + i, (size_t)k)) return ENG_TOK_ENOMEM;
        i += (size_t)k;
    }
    return 0;
}

static const char *const eog_names[] = {"<|eot_id|>",      "<|im_end|>",    "<end_of_turn>",
                                        "<|end_of_text|>", "<|endoftext|>", "</s>",
                                        "<|eom_id|>"};

static int cmp_special(const void *a, const void *b, void *ctx) {
    const eng_tok *t = ctx;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint8_t fx = (uint8_t)t->text_pool[t->text_off[x]], fy = (uint8_t)t->text_pool[t->text_off[y]];
    if (fx != fy) return fx < fy ? -1 : 1;
    if (t->text_len[x] != t->text_len[y]) return t->text_len[x] > t->text_len[y] ? -1 : 1;
    return x < y ? -1 : x > y;
}

static int check_id(int32_t id, int n, const char *what, char *err, size_t errlen) {
    if (id < -1 || id >= n) {
        return pl_errf(err, errlen, ENG_TOK_EFORMAT,
                       "tokenizer: %s id %d outside the vocabulary (0..%d)", what, id, n - 1);
    }
    return 0;
}

static int build_merges(eng_tok *t, const eng_tok_spec *sp, char *err, size_t errlen) {
    if (sp->n_merges < 0 || (sp->n_merges > 0 && !sp->merges)) {
        return pl_errf(err, errlen, ENG_TOK_EFORMAT, "tokenizer: bad merge list");
    }
    t->mmask = table_size((size_t)sp->n_merges) - 1;
    t->mkey = calloc((size_t)t->mmask + 1, sizeof *t->mkey);
    t->mrank = malloc(((size_t)t->mmask + 1) * sizeof *t->mrank);
    t->mres = malloc(((size_t)t->mmask + 1) * sizeof *t->mres);
    if (!t->mkey || !t->mrank || !t->mres) return ENG_TOK_ENOMEM;
    tok_buf cat = {0};
    int rc = 0;
    for (int r = 0; r < sp->n_merges; r++) {
        const char *m = sp->merges[r];
        size_t n = m ? slen(sp->merges, sp->merge_lens, r) : 0;
        const char *sp_ = n > 1 ? memchr(m + 1, ' ', n - 1) : NULL;
        if (!sp_) {
            rc = pl_errf(err, errlen, ENG_TOK_EFORMAT,
                         "tokenizer.ggml.merges[%d]: not \"left right\"", r);
            break;
        }
        size_t ln = (size_t)(sp_ - m), rn = n - ln - 1;
        int32_t l = tok_vocab_lookup(t, m, ln), rr = tok_vocab_lookup(t, sp_ + 1, rn);
        cat.n = 0;
        if (tok_buf_put(&cat, m, ln) || tok_buf_put(&cat, sp_ + 1, rn)) {
            rc = ENG_TOK_ENOMEM;
            break;
        }
        int32_t res = tok_vocab_lookup(t, cat.v, cat.n);
        if (l < 0 || rr < 0 || res < 0) {
            rc = pl_errf(err, errlen, ENG_TOK_EFORMAT,
                         "tokenizer.ggml.merges[%d]: \"%.*s\" names a token not in the vocabulary",
                         r, (int)(n > 60 ? 60 : n), m);
            break;
        }
        uint64_t key = (((uint64_t)(uint32_t)l << 32) | (uint32_t)rr) + 1;
        uint32_t i = (uint32_t)hash_u64(key) & t->mmask;
        while (t->mkey[i] != 0 && t->mkey[i] != key) i = (i + 1) & t->mmask;
        if (t->mkey[i] == key) continue; /* duplicate: the first rank wins */
        t->mkey[i] = key;
        t->mrank[i] = r;
        t->mres[i] = res;
    }
    free(cat.v);
    return rc;
}

/* The spec's shape: sizes, model, the fields each model needs, special ids. */
static int spec_check(const eng_tok_spec *sp, char *err, size_t errlen) {
    int rc;
    if (!sp || sp->n_tokens <= 0 || sp->n_tokens > (1 << 26) || !sp->tokens) {
        return pl_errf(err, errlen, ENG_TOK_EFORMAT, "tokenizer: empty or oversized vocabulary");
    }
    if (sp->model != ENG_TOK_MODEL_SPM && sp->model != ENG_TOK_MODEL_BPE) {
        return pl_errf(err, errlen, ENG_TOK_EFORMAT, "tokenizer: unknown model");
    }
    if (sp->model == ENG_TOK_MODEL_SPM && !sp->scores) {
        return pl_errf(err, errlen, ENG_TOK_EFORMAT,
                       "tokenizer.ggml.scores: required for the \"llama\" (SentencePiece) model");
    }
    if (sp->model == ENG_TOK_MODEL_BPE &&
        (sp->pre != ENG_TOK_PRE_GPT2 && sp->pre != ENG_TOK_PRE_LLAMA3 &&
         sp->pre != ENG_TOK_PRE_QWEN2 && sp->pre != ENG_TOK_PRE_SMOLLM)) {
        return pl_errf(
            err, errlen, ENG_TOK_EFORMAT,
            "tokenizer: byte-level BPE needs a pre-tokenizer (gpt2, llama3, qwen2, smollm)");
    }
    int n = sp->n_tokens;
    if ((rc = check_id(sp->bos, n, "bos", err, errlen)) ||
        (rc = check_id(sp->eos, n, "eos", err, errlen)) ||
        (rc = check_id(sp->eot, n, "eot", err, errlen)) ||
        (rc = check_id(sp->unk, n, "unknown", err, errlen)) ||
        (rc = check_id(sp->pad, n, "padding", err, errlen)))
        return rc;
    return 0;
}

/* Every token text present and bounded; *total = bytes of the text pool. */
static int spec_text_bytes(const eng_tok_spec *sp, size_t *total, char *err, size_t errlen) {
    *total = 0;
    for (int i = 0; i < sp->n_tokens; i++) {
        if (!sp->tokens[i])
            return pl_errf(err, errlen, ENG_TOK_EFORMAT, "tokenizer.ggml.tokens[%d]: missing", i);
        size_t l = slen(sp->tokens, sp->token_lens, i);
        if (l > (1u << 20) || *total > UINT32_MAX - l - 1 - (1u << 20))
            return pl_errf(err, errlen, ENG_TOK_EFORMAT,
                           "tokenizer.ggml.tokens: token %d too long or texts too large", i);
        *total += l + 1;
    }
    return 0;
}

/* The per-token arrays and the text map (-1 = empty); 0 or ENG_TOK_ENOMEM. */
static int vocab_alloc(eng_tok *t, const eng_tok_spec *sp, size_t total) {
    size_t n = (size_t)t->n_vocab;
    t->text_pool = malloc(total);
    t->text_off = malloc(n * sizeof *t->text_off);
    t->text_len = malloc(n * sizeof *t->text_len);
    t->types = malloc(n * sizeof *t->types);
    t->eog = calloc(n, 1);
    t->piece_off = malloc(n * sizeof *t->piece_off);
    t->piece_len = malloc(n * sizeof *t->piece_len);
    t->tmap_mask = table_size(n) - 1;
    t->tmap = malloc(((size_t)t->tmap_mask + 1) * sizeof *t->tmap);
    t->special = malloc(n * sizeof *t->special);
    if (!t->text_pool || !t->text_off || !t->text_len || !t->types || !t->eog || !t->piece_off ||
        !t->piece_len || !t->tmap || !t->special)
        return ENG_TOK_ENOMEM;
    if (sp->scores) {
        t->scores = malloc(n * sizeof *t->scores);
        if (!t->scores) return ENG_TOK_ENOMEM;
        for (size_t i = 0; i < n; i++) /* a NaN score would make merge order undefined */
            t->scores[i] = sp->scores[i] == sp->scores[i] ? sp->scores[i] : -3.0e38f;
    }
    memset(t->tmap, 0xff, ((size_t)t->tmap_mask + 1) * sizeof *t->tmap);
    return 0;
}

/* Texts into the pool, types, and the text -> id map; a repeated text maps
 * to its last id, as llama.cpp. */
static void vocab_fill_texts(eng_tok *t, const eng_tok_spec *sp) {
    size_t off = 0;
    for (int i = 0; i < t->n_vocab; i++) {
        size_t l = slen(sp->tokens, sp->token_lens, i);
        memcpy(t->text_pool + off, sp->tokens[i], l);
        t->text_pool[off + l] = 0;
        t->text_off[i] = (uint32_t)off;
        t->text_len[i] = (uint32_t)l;
        off += l + 1;
        int ty = sp->types ? sp->types[i] : ENG_TOK_TYPE_NORMAL;
        t->types[i] = (ty >= 1 && ty <= 6) ? ty : ENG_TOK_TYPE_NORMAL;
        uint32_t h = (uint32_t)hash_bytes(sp->tokens[i], l) & t->tmap_mask;
        for (;;) {
            int32_t id = t->tmap[h];
            if (id < 0 || (t->text_len[id] == l &&
                           memcmp(t->text_pool + t->text_off[id], sp->tokens[i], l) == 0)) {
                t->tmap[h] = i;
                break;
            }
            h = (h + 1) & t->tmap_mask;
        }
    }
}

/* The id of each byte's fallback token: <0xHH> (SentencePiece) or the
 * byte's GPT-2 code point (byte-level BPE); -1 where the vocabulary has none. */
static void vocab_byte_ids(eng_tok *t) {
    for (int b = 0; b < 256; b++) {
        char s[8];
        int l;
        if (t->model == ENG_TOK_MODEL_SPM) {
            static const char hx[] = "0123456789ABCDEF";
            memcpy(s, "<0x", 3);
            s[3] = hx[b >> 4], s[4] = hx[b & 15], s[5] = '>';
            l = 6;
        } else {
            l = tok_utf8_encode(tok_byte_to_cp((uint8_t)b), s);
        }
        t->byte_id[b] = tok_vocab_lookup(t, s, (size_t)l);
    }
}

/* Each token's decoded piece into one pool; 0 or ENG_TOK_ENOMEM. */
static int vocab_pieces(eng_tok *t) {
    tok_buf pieces = {0};
    for (int i = 0; i < t->n_vocab; i++) {
        size_t before = pieces.n;
        if (build_piece(t, i, &pieces)) {
            free(pieces.v);
            return ENG_TOK_ENOMEM;
        }
        t->piece_off[i] = (uint32_t)before;
        t->piece_len[i] = (uint32_t)(pieces.n - before);
        if (t->piece_len[i] > t->max_piece) t->max_piece = t->piece_len[i];
    }
    if (pieces.n == 0 && tok_buf_put(&pieces, "", 0)) {
        free(pieces.v);
        return ENG_TOK_ENOMEM;
    }
    t->piece_pool = pieces.v;
    return 0;
}

/* End-of-generation marks and the special tokens, sorted for matching with
 * an index by first byte. */
static void vocab_specials(eng_tok *t) {
    for (int i = 0; i < t->n_vocab; i++) {
        int ty = t->types[i];
        /* An end-of-generation text is a control token even where the file
         * types it USER_DEFINED (Gemma 3's "</s>"), as llama.cpp decides:
         * it ends a reply, and user text must not be able to produce it. */
        for (size_t k = 0; k < sizeof eog_names / sizeof *eog_names; k++)
            if (strlen(eog_names[k]) == t->text_len[i] &&
                memcmp(eog_names[k], t->text_pool + t->text_off[i], t->text_len[i]) == 0 &&
                (ty == ENG_TOK_TYPE_CONTROL || ty == ENG_TOK_TYPE_USER_DEFINED)) {
                t->eog[i] = 1;
                t->types[i] = ty = ENG_TOK_TYPE_CONTROL;
            }
        if ((ty == ENG_TOK_TYPE_CONTROL || ty == ENG_TOK_TYPE_USER_DEFINED ||
             ty == ENG_TOK_TYPE_UNKNOWN) &&
            t->text_len[i] > 0) {
            t->special[t->n_special++] = i;
            t->n_user_defined += ty == ENG_TOK_TYPE_USER_DEFINED;
        }
    }
    if (t->eos >= 0) t->eog[t->eos] = 1;
    if (t->eot >= 0) t->eog[t->eot] = 1;
    qsort_r(t->special, (size_t)t->n_special, sizeof *t->special, cmp_special, t);
    for (int b = 0, k = 0; b <= 256; b++) {
        while (k < t->n_special && (uint8_t)t->text_pool[t->text_off[t->special[k]]] < b) k++;
        t->special_start[b] = k;
    }
}

int eng_tok_load_spec(const eng_tok_spec *sp, eng_tok **out, char *err, size_t errlen) {
    int rc;
    size_t total;
    *out = NULL;
    if ((rc = spec_check(sp, err, errlen)) || (rc = spec_text_bytes(sp, &total, err, errlen)))
        return rc;
    eng_tok *t = calloc(1, sizeof *t);
    if (!t) return pl_errf(err, errlen, ENG_TOK_ENOMEM, "tokenizer: out of memory");
    t->model = sp->model;
    t->pre = sp->model == ENG_TOK_MODEL_BPE ? sp->pre : ENG_TOK_PRE_NONE;
    t->n_vocab = sp->n_tokens;
    t->bos = sp->bos, t->eos = sp->eos, t->eot = sp->eot, t->unk = sp->unk, t->pad = sp->pad;
    t->add_bos = sp->add_bos, t->add_eos = sp->add_eos;
    t->add_space_prefix = sp->model == ENG_TOK_MODEL_SPM && sp->add_space_prefix;
    t->ignore_merges = sp->model == ENG_TOK_MODEL_BPE && sp->ignore_merges;
    if ((rc = vocab_alloc(t, sp, total))) goto err;
    vocab_fill_texts(t, sp);
    vocab_byte_ids(t);
    if ((rc = vocab_pieces(t))) goto err;
    vocab_specials(t);
    if (t->model == ENG_TOK_MODEL_BPE && (rc = build_merges(t, sp, err, errlen)) != 0) goto err;
    *out = t;
    return 0;
err:
    if (rc == ENG_TOK_ENOMEM) pl_errf(err, errlen, rc, "tokenizer: out of memory");
    eng_tok_free(t);
    return rc;
}

void eng_tok_free(eng_tok *t) {
    if (!t) return;
    free(t->text_pool);
    free(t->text_off);
    free(t->text_len);
    free(t->piece_pool);
    free(t->piece_off);
    free(t->piece_len);
    free(t->scores);
    free(t->types);
    free(t->eog);
    free(t->tmap);
    free(t->mkey);
    free(t->mrank);
    free(t->mres);
    free(t->special);
    free(t);
}

int eng_tok_n_vocab(const eng_tok *t) { return t->n_vocab; }
eng_tok_model eng_tok_model_kind(const eng_tok *t) { return t->model; }
int32_t eng_tok_bos(const eng_tok *t) { return t->bos; }
int32_t eng_tok_eos(const eng_tok *t) { return t->eos; }
int32_t eng_tok_eot(const eng_tok *t) { return t->eot; }
bool eng_tok_add_bos(const eng_tok *t) { return t->add_bos; }
size_t eng_tok_max_piece(const eng_tok *t) { return t->max_piece; }

bool eng_tok_is_special(const eng_tok *t, int32_t id) {
    if (id < 0 || id >= t->n_vocab) return false;
    int ty = t->types[id];
    return ty == ENG_TOK_TYPE_CONTROL || ty == ENG_TOK_TYPE_USER_DEFINED ||
           ty == ENG_TOK_TYPE_UNKNOWN;
}

int eng_tok_type(const eng_tok *t, int32_t id) {
    return id < 0 || id >= t->n_vocab ? 0 : t->types[id];
}

bool eng_tok_is_eog(const eng_tok *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && t->eog[id];
}

int eng_tok_eog_ids(const eng_tok *t, int32_t *out, int cap) {
    int n = 0;
    for (int32_t i = 0; i < t->n_vocab && n < cap; i++)
        if (t->eog[i]) out[n++] = i;
    return n;
}

const char *eng_tok_text(const eng_tok *t, int32_t id) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    return t->text_pool + t->text_off[id];
}

int32_t eng_tok_find(const eng_tok *t, const char *text, size_t len) {
    return tok_vocab_lookup(t, text, len);
}

int eng_tok_piece(const eng_tok *t, int32_t id, char *out, size_t cap, size_t *n_out) {
    if (id < 0 || id >= t->n_vocab) return ENG_TOK_EINVAL;
    size_t n = t->piece_len[id];
    *n_out = n;
    if (n > cap) return ENG_TOK_ENOSPC;
    memcpy(out, t->piece_pool + t->piece_off[id], n);
    return 0;
}

int eng_tok_common_prefix(const int32_t *a, int na, const int32_t *b, int nb) {
    int i = 0;
    while (i < na && i < nb && a[i] == b[i]) i++;
    return i;
}
