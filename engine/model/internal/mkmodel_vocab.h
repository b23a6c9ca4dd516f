/*
 * mkmodel_vocab.h -- the synthetic byte-level BPE tokenizer that
 * `parley mkmodel` embeds in every model (internal to mkmodel).
 *
 * Layout of the vocabulary (ids in order):
 *   [0, 256)            the 256 byte tokens, GPT-2 byte-to-unicode mapping,
 *                       in GPT-2's order ("!" = 0 ...), type 1 (normal)
 *   [256, 256+n_merges) one token per merge, "a b" -> "ab", type 1
 *   next 5              <|begin_of_text|> <|end_of_text|> <|start_header_id|>
 *                       <|end_header_id|> <|eot_id|>, type 3 (control)
 *   rest up to n_vocab  <|reserved_N|>, type 3 (control)
 * Merges are learnt deterministically by plain BPE over a small built-in
 * list of common English and chat words (weighted by rank; ties broken by
 * the pair's strings), so the same n_vocab always gives the same tokenizer.
 *
 * Ownership: eng_mkvocab owns its strings; free with eng_mkvocab_free.
 * Failure: eng_mkvocab_build returns 0 or -1 (n_vocab too small / no
 * memory) with a message.
 */
#ifndef MKMODEL_VOCAB_H
#define MKMODEL_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "eng_gguf_write.h"

typedef struct eng_mkvocab {
    int n_vocab;       /* tokens */
    char **tokens;     /* n_vocab UTF-8 strings (owned) */
    int32_t *types;    /* n_vocab token types (1 normal, 3 control) */
    int n_merges;      /* merges, rank order */
    char **merges;     /* "a b" strings (owned) */
    int bos, eos, eot; /* special ids */
} eng_mkvocab;

/* Build the vocabulary for n_vocab tokens (>= 320). */
int eng_mkvocab_build(int n_vocab, eng_mkvocab *v, char *err, size_t errlen);
/* Add the tokenizer.* keys (model, pre, tokens, token_type, merges, ids,
 * add_bos, chat_template) to a writer; returns the writer's status. */
int eng_mkvocab_write(const eng_mkvocab *v, eng_gguf_writer *w);
void eng_mkvocab_free(eng_mkvocab *v);

#endif /* MKMODEL_VOCAB_H */
