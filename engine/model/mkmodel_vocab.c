/*
 * mkmodel_vocab.c -- builds the byte-level BPE tokenizer embedded in the
 * synthetic models of `parley mkmodel` (layout: mkmodel_vocab.h).
 *
 * The tokenizer is a real GPT-2 style vocabulary (tokenizer.ggml.model =
 * "gpt2", pre = "llama-bpe"), so parley's tokenizer, llama.cpp and the demo
 * can all take text.  Merges come from running textbook BPE on a built-in
 * word list: each round merges the most frequent adjacent pair (weights from
 * word rank; ties by the pair's strings, so it is deterministic), skipping a
 * pair whose concatenation is already a token.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_err.h"
#include "mkmodel_vocab.h"

/* Common English and chat words; a leading space is written as ' ' and
 * mapped to GPT-2's 'Ġ' like every other byte. */
static const char *const mv_words[] = {
    " the",     " of",       " and",    " to",        " a",       " in",       " is",
    " you",     " that",     " it",     " he",        " was",     " for",      " on",
    " are",     " as",       " with",   " his",       " they",    " I",        " at",
    " be",      " this",     " have",   " from",      " or",      " one",      " had",
    " by",      " word",     " but",    " not",       " what",    " all",      " were",
    " we",      " when",     " your",   " can",       " said",    " there",    " use",
    " an",      " each",     " which",  " she",       " do",      " how",      " their",
    " if",      " will",     " up",     " other",     " about",   " out",      " many",
    " then",    " them",     " these",  " so",        " some",    " her",      " would",
    " make",    " like",     " him",    " into",      " time",    " has",      " look",
    " two",     " more",     " write",  " go",        " see",     " number",   " no",
    " way",     " could",    " people", " my",        " than",    " first",    " water",
    " been",    " call",     " who",    " oil",       " its",     " now",      " find",
    " long",    " down",     " day",    " did",       " get",     " come",     " made",
    " may",     " part",     " over",   " new",       " sound",   " take",     " only",
    " little",  " work",     " know",   " place",     " year",    " live",     " me",
    " back",    " give",     " most",   " very",      " after",   " thing",    " our",
    " just",    " name",     " good",   " sentence",  " man",     " think",    " say",
    " great",   " where",    " help",   " through",   " much",    " before",   " line",
    " right",   " too",      " mean",   " old",       " any",     " same",     " tell",
    " boy",     " follow",   " came",   " want",      " show",    " also",     " around",
    " form",    " three",    " small",  " set",       " put",     " end",      " does",
    " another", " well",     " large",  " must",      " big",     " even",     " such",
    " because", " turn",     " here",   " why",       " ask",     " went",     " men",
    " read",    " need",     " land",   " different", " home",    " us",       " move",
    " try",     " kind",     " hand",   " picture",   " again",   " change",   " off",
    " play",    " spell",    " air",    " away",      " animal",  " house",    " point",
    " page",    " letter",   " mother", " answer",    " found",   " study",    " still",
    " learn",   " should",   " world",  " high",      " every",   " near",     " add",
    " food",    " between",  " own",    " below",     " country", " plant",    " last",
    " school",  " father",   " keep",   " tree",      " never",   " start",    " city",
    " earth",   " eye",      " light",  " thought",   " head",    " under",    " story",
    " saw",     " left",     " hello",  " please",    " thanks",  " question", " model",
    " cache",   " token",    " chat",   " turn",      " reply",   " user",     " assistant",
    "user",     "assistant", "system",  "The",        "It",       "This",      "What",
    "How",      "Hello",     "Yes",     "No",         "I",        "We",        "You",
    ".\n\n",    ",",         ".",       "?",          "!",        "\n\n",      "'s",
    "'t",       " -",        ":",
};
#define MV_NWORDS (int)(sizeof mv_words / sizeof mv_words[0])

static const char *const mv_specials[5] = {"<|begin_of_text|>", "<|end_of_text|>",
                                           "<|start_header_id|>", "<|end_header_id|>",
                                           "<|eot_id|>"};

static const char mv_template[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}"
    "{% endif %}";

/* GPT-2 byte-to-unicode: id order of the byte tokens and each byte's code
 * point. */
static void mv_bytes(int order[256], int cp[256]) {
    int n = 0, extra = 0;
    for (int b = 0; b < 256; b++)
        if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) {
            order[n++] = b;
            cp[b] = b;
        }
    for (int b = 0; b < 256; b++)
        if (!((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF))) {
            order[n++] = b;
            cp[b] = 256 + extra++;
        }
}

static char *mv_strdup2(const char *a, const char *b) {
    size_t la = strlen(a), lb = b ? strlen(b) : 0;
    char *s = malloc(la + lb + 1);
    if (!s) return NULL;
    memcpy(s, a, la);
    if (b) memcpy(s + la, b, lb);
    s[la + lb] = 0;
    return s;
}

/* BPE training state. */
typedef struct mv_train {
    int *sym;     /* all words' symbols, concatenated */
    int *wstart;  /* word w occupies sym[wstart[w] .. wstart[w] + wlen[w]) */
    int *wlen;    /* current symbol count per word */
    int *weight;  /* per word */
    int64_t *key; /* pair-count table: pair (a << 32 | b), MV_HASH slots */
    int *cnt;     /* weighted count per slot (0 = empty) */
} mv_train;
#define MV_HASH 8192

static int mv_find(char **tokens, int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (!strcmp(tokens[i], s)) return i;
    return -1;
}

/* Pick the best pair (max weighted count, ties by strings); -1 if none.
 * Counts go into a small open-addressing table keyed by the pair. */
static int mv_best(const mv_train *t, char **tok, const int *banned, int n_banned, int *pa,
                   int *pb) {
    int64_t *key = t->key;
    int *cnt = t->cnt, best = 0;
    memset(cnt, 0, MV_HASH * sizeof *cnt);
    for (int w = 0; w < MV_NWORDS; w++)
        for (int i = 0; i + 1 < t->wlen[w]; i++) {
            int64_t k = (int64_t)t->sym[t->wstart[w] + i] << 32 | t->sym[t->wstart[w] + i + 1];
            uint32_t h = (uint32_t)((uint64_t)k * 0x9E3779B97F4A7C15ull >> 51);
            while (cnt[h] && key[h] != k) h = (h + 1) & (MV_HASH - 1);
            key[h] = k;
            cnt[h] += t->weight[w];
        }
    for (int h = 0; h < MV_HASH; h++) {
        if (!cnt[h]) continue;
        int a = (int)(key[h] >> 32), b = (int)(key[h] & 0xffffffff), ban = 0;
        for (int k = 0; k < n_banned; k++) ban |= banned[2 * k] == a && banned[2 * k + 1] == b;
        if (ban) continue;
        int cmp = cnt[h] - best;
        if (cmp == 0 && best) {
            cmp = strcmp(tok[*pa], tok[a]);
            if (!cmp) cmp = strcmp(tok[*pb], tok[b]);
        }
        if (cmp > 0) {
            best = cnt[h];
            *pa = a;
            *pb = b;
        }
    }
    return best ? 0 : -1;
}

int eng_mkvocab_build(int n_vocab, eng_mkvocab *v, char *err, size_t errlen) {
    int order[256], cp[256], rc = -1, banned[64], n_banned = 0;
    mv_train t = {0};
    memset(v, 0, sizeof *v);
    if (n_vocab < 320 || n_vocab > (1 << 24)) {
        return pl_errf(err, errlen, ENG_EINVAL, "vocabulary size %d is not in [320, %d]", n_vocab,
                       1 << 24);
    }
    int max_merges = n_vocab - 256 - 5 - 8;
    if (max_merges > 1500) max_merges = 1500;
    v->n_vocab = n_vocab;
    v->tokens = calloc((size_t)n_vocab, sizeof *v->tokens);
    v->types = calloc((size_t)n_vocab, sizeof *v->types);
    v->merges = calloc((size_t)max_merges, sizeof *v->merges);
    int total = 0;
    for (int w = 0; w < MV_NWORDS; w++) total += (int)strlen(mv_words[w]);
    t.sym = malloc((size_t)total * sizeof *t.sym);
    t.wstart = malloc(MV_NWORDS * sizeof *t.wstart);
    t.wlen = malloc(MV_NWORDS * sizeof *t.wlen);
    t.weight = malloc(MV_NWORDS * sizeof *t.weight);
    t.key = malloc(MV_HASH * sizeof *t.key);
    t.cnt = malloc(MV_HASH * sizeof *t.cnt);
    if (!t.key || !t.cnt || !v->tokens || !v->types || !v->merges || !t.sym || !t.wstart ||
        !t.wlen || !t.weight)
        goto nomem;
    mv_bytes(order, cp);
    int id_of_byte[256];
    for (int i = 0; i < 256; i++) {
        char s[3];
        int c = cp[order[i]];
        if (c < 0x80) {
            s[0] = (char)c;
            s[1] = 0;
        } else {
            s[0] = (char)(0xC0 | c >> 6);
            s[1] = (char)(0x80 | (c & 0x3F));
            s[2] = 0;
        }
        if (!(v->tokens[i] = mv_strdup2(s, NULL))) goto nomem;
        v->types[i] = 1;
        id_of_byte[order[i]] = i;
    }
    int n_tok = 256, pos = 0;
    for (int w = 0; w < MV_NWORDS; w++) {
        t.wstart[w] = pos;
        t.wlen[w] = (int)strlen(mv_words[w]);
        t.weight[w] = 1 + (MV_NWORDS - w) / 8;
        for (int i = 0; i < t.wlen[w]; i++) t.sym[pos++] = id_of_byte[(uint8_t)mv_words[w][i]];
    }
    while (v->n_merges < max_merges) {
        int a = 0, b = 0;
        if (mv_best(&t, v->tokens, banned, n_banned, &a, &b)) break;
        char *m = mv_strdup2(v->tokens[a], v->tokens[b]);
        if (!m) goto nomem;
        if (mv_find(v->tokens, n_tok, m) >= 0) { /* already a token: never merge this pair */
            free(m);
            if (n_banned == 32) break;
            banned[2 * n_banned] = a;
            banned[2 * n_banned + 1] = b;
            n_banned++;
            continue;
        }
        char *ms = malloc(strlen(v->tokens[a]) + strlen(v->tokens[b]) + 2);
        if (!ms) {
            free(m);
            goto nomem;
        }
        sprintf(ms, "%s %s", v->tokens[a], v->tokens[b]);
        v->merges[v->n_merges++] = ms;
        v->tokens[n_tok] = m;
        v->types[n_tok] = 1;
        for (int w = 0; w < MV_NWORDS; w++) { /* apply the merge, left to right */
            int *s = t.sym + t.wstart[w], o = 0;
            for (int i = 0; i < t.wlen[w]; i++) {
                if (i + 1 < t.wlen[w] && s[i] == a && s[i + 1] == b) {
                    s[o++] = n_tok;
                    i++;
                } else s[o++] = s[i];
            }
            t.wlen[w] = o;
        }
        n_tok++;
    }
    for (int i = 0; i < 5; i++) {
        if (!(v->tokens[n_tok] = mv_strdup2(mv_specials[i], NULL))) goto nomem;
        v->types[n_tok++] = 3;
    }
    v->bos = n_tok - 5;
    v->eos = n_tok - 4;
    v->eot = n_tok - 1;
    for (int r = 0; n_tok < n_vocab; r++) {
        char s[32];
        snprintf(s, sizeof s, "<|reserved_%d|>", r);
        if (!(v->tokens[n_tok] = mv_strdup2(s, NULL))) goto nomem;
        v->types[n_tok++] = 3;
    }
    rc = 0;
    goto out;
nomem:
    pl_errf(err, errlen, ENG_ENOMEM, "out of memory building the vocabulary");
    eng_mkvocab_free(v);
out:
    free(t.sym);
    free(t.wstart);
    free(t.wlen);
    free(t.weight);
    free(t.key);
    free(t.cnt);
    return rc;
}

int eng_mkvocab_write(const eng_mkvocab *v, eng_gguf_writer *w) {
    eng_gguf_writer_add_str(w, "tokenizer.ggml.model", "gpt2");
    eng_gguf_writer_add_str(w, "tokenizer.ggml.pre", "llama-bpe");
    eng_gguf_writer_add_arr_str(w, "tokenizer.ggml.tokens", (const char *const *)v->tokens, NULL,
                                (uint64_t)v->n_vocab);
    eng_gguf_writer_add_arr(w, "tokenizer.ggml.token_type", ENG_GGUF_TYPE_I32, v->types,
                            (uint64_t)v->n_vocab);
    eng_gguf_writer_add_arr_str(w, "tokenizer.ggml.merges", (const char *const *)v->merges, NULL,
                                (uint64_t)v->n_merges);
    eng_gguf_writer_add_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)v->bos);
    eng_gguf_writer_add_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)v->eos);
    eng_gguf_writer_add_u32(w, "tokenizer.ggml.eot_token_id", (uint32_t)v->eot);
    eng_gguf_writer_add_bool(w, "tokenizer.ggml.add_bos_token", true);
    return eng_gguf_writer_add_str(w, "tokenizer.chat_template", mv_template);
}

void eng_mkvocab_free(eng_mkvocab *v) {
    if (v->tokens)
        for (int i = 0; i < v->n_vocab; i++) free(v->tokens[i]);
    if (v->merges)
        for (int i = 0; i < v->n_merges; i++) free(v->merges[i]);
    free(v->tokens);
    free(v->types);
    free(v->merges);
    memset(v, 0, sizeof *v);
}
