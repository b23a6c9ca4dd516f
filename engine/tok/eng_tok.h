/*
 * eng_tok.h -- tokenizers read from GGUF metadata: text <-> token ids.
 *
 * Purpose.  Turns chat text into the token ids the model was trained on,
 * identical to Hugging Face `tokenizers` on the same vocabulary, and back.
 * Two vocabulary models, as GGUF's `tokenizer.ggml.model` names them:
 *   "llama"  SentencePiece-style BPE (Llama 2, Gemma): spaces become U+2581
 *            "▁", a "▁" is prepended to every text fragment when
 *            tokenizer.ggml.add_space_prefix is true (default true), the
 *            fragment is merged greedily by token score (highest first,
 *            leftmost on ties; control, unknown and byte tokens are never
 *            merge results, so text cannot spell "<s>" into BOS), and
 *            characters absent from the vocabulary fall back to their UTF-8
 *            bytes as <0xNN> tokens (or the unknown token, runs fused).
 *   "gpt2"   byte-level BPE (Llama 3, Qwen2, GPT-2): the text is split by the
 *            pre-tokenizer named in tokenizer.ggml.pre ("llama-bpe"/"llama3",
 *            "qwen2", "gpt2"/"default", "smollm"; hand-written matchers equivalent to
 *            their regexes, with full Unicode categories: L and N exactly as
 *            HF tokenizers' Oniguruma (Unicode 16.0) matches them, see
 *            tests/tok/gen_unicode_tables.py), each piece's bytes
 *            are mapped to GPT-2's printable byte alphabet and merged by
 *            merge rank (tokenizer.ggml.merges).  llama-bpe sets
 *            ignore_merges (a piece that is itself a token is emitted whole),
 *            as Llama 3's tokenizer.json does.
 *
 * Special tokens.  Tokens of type CONTROL (3), USER_DEFINED (4) or UNKNOWN (2) are
 * "special".  CONTROL and UNKNOWN tokens are recognised inside text only when
 * the caller passes ENG_TOK_PARSE_SPECIAL (template text); user content is
 * always encoded with the flag clear, so it cannot inject control tokens.
 * USER_DEFINED tokens are plain text the vocabulary keeps whole (Gemma 3's
 * whitespace runs and HTML tags) and are recognised always, as SentencePiece
 * and llama.cpp do.  Text is first split at special-token occurrences
 * (longest match first), then each fragment is encoded on its own, as HF and
 * llama.cpp do.
 *
 * Invalid UTF-8 input is not an error: every maximal ill-formed subsequence
 * is replaced by U+FFFD before encoding, exactly what Python's
 * bytes.decode("utf-8", errors="replace") does (the Unicode "maximal
 * subpart" practice), so the ids equal HF's on the replaced string.  Decoded
 * text is always valid UTF-8: byte tokens that do not form a complete
 * character come out as U+FFFD, one per maximal ill-formed subpart (as HF's
 * byte-level decoder; HF's SentencePiece ByteFallback decoder instead writes
 * one U+FFFD per byte token of a broken run -- only decoding of ill-formed
 * byte sequences differs).
 *
 * Data layout.  The vocabulary is a flat array of token strings (one
 * allocation), a hash table from token text to id, a hash table from merge
 * pair (left id, right id) to rank for "gpt2", the 256 byte-token ids for
 * "llama" byte fallback, and the list of special tokens sorted by length.
 *
 * Threading.  An eng_tok is immutable after load: any number of threads may
 * encode/decode/render with one shared eng_tok.  Every call uses only its
 * arguments and stack/heap scratch of its own.  An eng_tok_stream is owned by
 * one sequence (not shared).
 *
 * Ownership.  eng_tok_load copies everything it needs out of the GGUF: the
 * eng_gguf may be closed afterwards.  eng_tok_free releases it.
 *
 * Failure behaviour.  Functions return 0 or a negative ENG_TOK_E* code and
 * write a message into err (errlen bytes, may be NULL/0).  Output buffers
 * follow snprintf's convention: up to `cap` elements are written, *n_out
 * receives the full size needed, and ENG_TOK_ENOSPC is returned when it did
 * not fit (so a call with cap 0 measures).  Hostile metadata (bad ids,
 * wrong array lengths, unknown model or pre-tokenizer, missing byte tokens
 * where needed) is refused at load with a message naming the key.
 */
#ifndef ENG_TOK_H
#define ENG_TOK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct eng_gguf;

#define ENG_TOK_EINVAL (-1)  /* bad argument or unknown token id */
#define ENG_TOK_ENOMEM (-2)  /* allocation failed */
#define ENG_TOK_ENOSPC (-3)  /* output did not fit; *n_out has the size needed */
#define ENG_TOK_EFORMAT (-4) /* vocabulary metadata missing or malformed */

/* Encode flags. */
#define ENG_TOK_ADD_BOS 1       /* prepend BOS (eng_tok_add_bos() says what the model wants) */
#define ENG_TOK_PARSE_SPECIAL 2 /* also recognise CONTROL/UNKNOWN token texts in the input */
#define ENG_TOK_ADD_EOS 4       /* append EOS */

/* Decode flags. */
#define ENG_TOK_DECODE_SPECIAL 1 /* render special tokens' text (default: skip them) */

/* GGUF token types (tokenizer.ggml.token_type). */
#define ENG_TOK_TYPE_NORMAL 1
#define ENG_TOK_TYPE_UNKNOWN 2
#define ENG_TOK_TYPE_CONTROL 3
#define ENG_TOK_TYPE_USER_DEFINED 4
#define ENG_TOK_TYPE_UNUSED 5
#define ENG_TOK_TYPE_BYTE 6

typedef enum eng_tok_model {
    ENG_TOK_MODEL_SPM = 1, /* "llama": SentencePiece-style, scores */
    ENG_TOK_MODEL_BPE = 2  /* "gpt2": byte-level BPE, merges */
} eng_tok_model;

typedef enum eng_tok_pre {
    ENG_TOK_PRE_NONE = 0,   /* SPM: no pre-tokenizer */
    ENG_TOK_PRE_GPT2 = 1,   /* GPT-2's regex ('s|'t|... ?\p{L}+| ?\p{N}+|...) */
    ENG_TOK_PRE_LLAMA3 = 2, /* Llama 3's regex (\p{N}{1,3}, case-insensitive contractions) */
    ENG_TOK_PRE_QWEN2 = 3,  /* Qwen2's regex (Llama 3's with single \p{N}) */
    ENG_TOK_PRE_SMOLLM = 4  /* every \p{N} alone, then GPT-2's regex on the rest */
} eng_tok_pre;

/*
 * An in-memory description of a vocabulary, the form eng_tok_load builds from
 * GGUF metadata and the form unit tests build by hand.  Nothing is retained:
 * eng_tok_load_spec copies what it needs.
 */
typedef struct eng_tok_spec {
    eng_tok_model model;       /* vocabulary model */
    eng_tok_pre pre;           /* pre-tokenizer (BPE only; NONE for SPM) */
    int n_tokens;              /* vocabulary size (> 0) */
    const char *const *tokens; /* n_tokens token strings (UTF-8, as GGUF stores them) */
    const size_t *token_lens;  /* their byte lengths, or NULL for NUL-terminated strings */
    const float *scores;       /* SPM: n_tokens scores (merge priority); may be NULL for BPE */
    const int32_t *types;      /* n_tokens ENG_TOK_TYPE_* values, or NULL (all NORMAL) */
    int n_merges;              /* BPE: number of merges */
    const char *const *merges; /* BPE: "left right" strings in rank order */
    const size_t *merge_lens;  /* their byte lengths, or NULL for NUL-terminated */
    int32_t bos, eos, eot, unk, pad; /* special ids, -1 when absent */
    bool add_bos;                    /* model wants BOS prepended (tokenizer.ggml.add_bos_token) */
    bool add_eos;                    /* model wants EOS appended (tokenizer.ggml.add_eos_token) */
    bool add_space_prefix;           /* SPM: prepend "▁" to each fragment */
    bool ignore_merges;              /* BPE: emit a piece whole when it is a token */
} eng_tok_spec;

typedef struct eng_tok eng_tok; /* opaque; immutable after load, thread-safe */

/* Load from a GGUF's tokenizer.ggml.* keys.  Errors: ENG_TOK_EFORMAT naming
 * the missing or malformed key (unknown tokenizer.ggml.model or .pre are
 * refused, listing the supported ones), ENG_TOK_ENOMEM. */
int eng_tok_load(const struct eng_gguf *g, eng_tok **out, char *err, size_t errlen);

/* Load from an in-memory description (same validation as eng_tok_load). */
int eng_tok_load_spec(const eng_tok_spec *spec, eng_tok **out, char *err, size_t errlen);

/* Free a tokenizer (NULL is fine). */
void eng_tok_free(eng_tok *t);

/*
 * Encode len bytes of text (any bytes; invalid UTF-8 is replaced, see above).
 * flags: ENG_TOK_ADD_BOS | ENG_TOK_ADD_EOS | ENG_TOK_PARSE_SPECIAL.
 * Writes up to cap ids; *n_out = ids produced.  Returns 0, ENG_TOK_ENOSPC
 * (cap too small, *n_out = needed), ENG_TOK_EINVAL (ADD_BOS/ADD_EOS without
 * such a token), ENG_TOK_ENOMEM.
 */
int eng_tok_encode(const eng_tok *t, const char *text, size_t len, int flags, int32_t *ids, int cap,
                   int *n_out, char *err, size_t errlen);

/* Number of tokens eng_tok_encode would produce (>= 0), or a negative error. */
int eng_tok_count(const eng_tok *t, const char *text, size_t len, int flags, char *err,
                  size_t errlen);

/*
 * Decode ids to text (always valid UTF-8; flags: ENG_TOK_DECODE_SPECIAL).
 * For SPM vocabularies with add_space_prefix, the one space the encoder
 * prepended to the text is removed (HF's Strip decoder), so
 * decode(encode(x)) == x for valid UTF-8 x (for SPM: x without U+2581,
 * which SPM vocabularies use to spell spaces).  Writes up to cap bytes plus a
 * terminating NUL when room remains; *n_out = bytes of text (without NUL).
 * Returns 0, ENG_TOK_ENOSPC, ENG_TOK_EINVAL (an id outside the vocabulary),
 * ENG_TOK_ENOMEM.
 */
int eng_tok_decode(const eng_tok *t, const int32_t *ids, int n, int flags, char *out, size_t cap,
                   size_t *n_out, char *err, size_t errlen);

/* Raw bytes of one token as decoding produces them (▁ -> space, byte tokens
 * -> their byte, byte-level alphabet -> bytes; no prefix stripping; may be
 * partial UTF-8).  Same buffer convention.  ENG_TOK_EINVAL for a bad id. */
int eng_tok_piece(const eng_tok *t, int32_t id, char *out, size_t cap, size_t *n_out);

/* Stored text of a token as the vocabulary spells it (NUL-terminated; NULL
 * for a bad id). */
const char *eng_tok_text(const eng_tok *t, int32_t id);

/* Id of a token by its exact vocabulary text, or -1. */
int32_t eng_tok_find(const eng_tok *t, const char *text, size_t len);

/* Vocabulary facts. */
int eng_tok_n_vocab(const eng_tok *t);
eng_tok_model eng_tok_model_kind(const eng_tok *t);
int32_t eng_tok_bos(const eng_tok *t);                 /* -1 when absent */
int32_t eng_tok_eos(const eng_tok *t);                 /* -1 when absent */
int32_t eng_tok_eot(const eng_tok *t);                 /* end-of-turn id, -1 when absent */
bool eng_tok_add_bos(const eng_tok *t);                /* does the model want BOS prepended */
bool eng_tok_is_special(const eng_tok *t, int32_t id); /* CONTROL, USER_DEFINED or UNKNOWN */
int eng_tok_type(const eng_tok *t, int32_t id);        /* ENG_TOK_TYPE_* (0 for a bad id) */
/* End of generation: eos, eot, and the well-known end-of-turn tokens
 * present in the vocabulary (<|eot_id|>, <|im_end|>, <end_of_turn>,
 * <|end_of_text|>, <|endoftext|>, </s>, <|eom_id|>). */
bool eng_tok_is_eog(const eng_tok *t, int32_t id);
/* The end-of-generation ids in ascending order, at most cap of them into
 * out (a sampler's stop list); returns how many were written. */
int eng_tok_eog_ids(const eng_tok *t, int32_t *out, int cap);
/* Longest token piece in bytes (sizing stream buffers). */
size_t eng_tok_max_piece(const eng_tok *t);

/* Length of the longest common prefix of two id sequences: the tokens a KV
 * cache holding a can reuse for b. */
int eng_tok_common_prefix(const int32_t *a, int na, const int32_t *b, int nb);

/*
 * Streaming detokeniser.  Feed generated ids one at a time; every emitted
 * chunk is complete, valid UTF-8 on its own (bytes of an unfinished character
 * wait for the next token; an impossible sequence becomes U+FFFD).  The
 * concatenation of all chunks plus the final flush equals eng_tok_decode of
 * the same ids.  A plain caller-owned struct; one per sequence.
 */
typedef struct eng_tok_stream {
    const eng_tok *tok; /* vocabulary (shared, read-only) */
    int flags;          /* decode flags (ENG_TOK_DECODE_SPECIAL) */
    bool at_start;      /* nothing emitted yet (SPM leading-space strip pending) */
    int n_pend;         /* bytes of an incomplete UTF-8 character held back */
    uint8_t pend[4];    /* those bytes */
} eng_tok_stream;

/* Bytes an output buffer for eng_tok_stream_push must hold to never see
 * ENG_TOK_ENOSPC: 3 * (max_piece + 4). */
size_t eng_tok_stream_cap(const eng_tok *t);

void eng_tok_stream_init(eng_tok_stream *s, const eng_tok *t, int flags);

/* Push one id; writes the newly complete text (possibly empty) to out.
 * Returns 0, ENG_TOK_EINVAL (bad id), ENG_TOK_ENOSPC (*n_out = bytes
 * needed) or ENG_TOK_ENOMEM; the stream state is unchanged on any error. */
int eng_tok_stream_push(eng_tok_stream *s, int32_t id, char *out, size_t cap, size_t *n_out);

/* End of stream: held-back bytes of an unfinished character become U+FFFD.
 * Returns 0 or ENG_TOK_ENOSPC (needs at most 3 bytes). */
int eng_tok_stream_flush(eng_tok_stream *s, char *out, size_t cap, size_t *n_out);

#endif
