/*
 * vocab_util.h -- small in-memory vocabularies for the constraint tests
 * and fuzz target: a byte-level BPE one (every byte a token, a few merges
 * of JSON pieces, control tokens, an end-of-turn token) and an SPM one
 * (byte fallback, "▁" words, <unk>/<s>/</s>), so masks are quick to
 * compute and every constraint can be satisfied.
 */
#ifndef VOCAB_UTIL_H
#define VOCAB_UTIL_H

#include "eng_tok.h"

/* The BPE vocabulary (once; never freed).  NULL on failure. */
eng_tok *vu_bpe(void);
/* The SPM vocabulary (once). */
eng_tok *vu_spm(void);

#endif
