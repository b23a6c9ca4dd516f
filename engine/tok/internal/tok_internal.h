/*
 * tok_internal.h -- private declarations shared by the tokenizer's files
 * (tok_*.c, unicode_tables.c, template*.c).  Not part of the engine's
 * public API: eng_tok.h and eng_template.h are.
 *
 * Layout of a loaded vocabulary (struct eng_tok): token texts in one pool,
 * their decoded bytes ("pieces") in another, an open-addressing hash table
 * text -> id, a hash table (left id, right id) -> (rank, result id) for BPE
 * merges, the byte-token ids, and the special tokens bucketed by first byte.
 * Everything is written once by tok_vocab_build and read-only afterwards.
 */
#ifndef TOK_INTERNAL_H
#define TOK_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eng_template.h"
#include "eng_tok.h"
#include "pl_err.h"

/* ---- Unicode classes (unicode_tables.c, generated) ---- */
#define TOK_UF_L 0x01        /* general category L* (letters) */
#define TOK_UF_N 0x02        /* N* (numbers) */
#define TOK_UF_P 0x04        /* P* (punctuation) */
#define TOK_UF_S 0x08        /* S* (symbols) */
#define TOK_UF_M 0x10        /* M* (marks) */
#define TOK_UF_Z 0x20        /* Z* (separators) */
#define TOK_UF_C 0x40        /* C* (other, incl. unassigned) */
#define TOK_UF_WS 0x80       /* White_Space property (regex \s) */
#define TOK_UF_PYSPACE 0x100 /* Python str.isspace() (Jinja trim) */

typedef struct tok_urange {
    uint32_t first; /* first code point of the range */
    uint32_t last;  /* last code point (inclusive) */
    uint32_t flags; /* TOK_UF_* bits shared by the whole range */
} tok_urange;

extern const tok_urange tok_unicode_ranges[];
extern const int tok_unicode_n_ranges;
extern const char tok_unicode_version[];
extern const uint16_t tok_unicode_latin1[256];

/* Class flags of a code point (0 for values above 0x10FFFF). */
uint32_t tok_unicode_flags(uint32_t cp);

/* ---- UTF-8 (tok_utf8.c) ---- */
/* Length (1..4) of the well-formed UTF-8 sequence at s[0..len) and its code
 * point, or 0 if ill-formed; *bad then receives the length of the maximal
 * ill-formed subpart to replace (>= 1). */
int tok_utf8_decode(const uint8_t *s, size_t len, uint32_t *cp, size_t *bad);
/* Write cp as UTF-8 into out (>= 4 bytes); returns its length. */
int tok_utf8_encode(uint32_t cp, char *out);
/* Replace ill-formed subsequences by U+FFFD (Python's errors="replace").
 * *out = in when already valid (nothing allocated), else a malloc'd copy
 * the caller frees.  Returns 0 or ENG_TOK_ENOMEM. */
int tok_utf8_sanitize(const char *in, size_t len, char **out, size_t *out_len);
/* Length of the longest prefix of s that can still become valid UTF-8
 * when more bytes follow, counted from the end: the trailing bytes of an
 * incomplete but so-far-valid character (0..3). */
size_t tok_utf8_incomplete_tail(const uint8_t *s, size_t len);

/* ---- growable buffers ---- */
typedef struct tok_ids {
    int32_t *v; /* ids */
    int n;      /* used */
    int cap;    /* allocated */
} tok_ids;
int tok_ids_push(tok_ids *b, int32_t id);

typedef struct tok_buf {
    char *v;    /* bytes */
    size_t n;   /* used */
    size_t cap; /* allocated */
} tok_buf;
int tok_buf_put(tok_buf *b, const void *p, size_t n);

/* ---- the vocabulary ---- */
struct eng_tok {
    eng_tok_model model;  /* SPM or BPE */
    eng_tok_pre pre;      /* BPE pre-tokenizer */
    int n_vocab;          /* number of tokens */
    char *text_pool;      /* token texts, each NUL-terminated */
    uint32_t *text_off;   /* per id: offset of its text in text_pool */
    uint32_t *text_len;   /* per id: text length in bytes */
    char *piece_pool;     /* per id decoded bytes (see eng_tok_piece) */
    uint32_t *piece_off;  /* per id: offset in piece_pool */
    uint32_t *piece_len;  /* per id: piece length */
    float *scores;        /* per id score (SPM), NULL for BPE */
    int32_t *types;       /* per id ENG_TOK_TYPE_* */
    uint8_t *eog;         /* per id: 1 if end-of-generation */
    int32_t *tmap;        /* text hash table: id or -1; size tmap_mask+1 */
    uint32_t tmap_mask;   /* table size - 1 (power of two) */
    uint64_t *mkey;       /* merge table keys: (left << 32 | right) + 1, 0 = empty */
    int32_t *mrank;       /* merge rank per slot */
    int32_t *mres;        /* merge result id per slot */
    uint32_t mmask;       /* merge table size - 1 (0 when no table) */
    int32_t byte_id[256]; /* SPM: id of <0xNN>; BPE: id of the one-byte token; -1 missing */
    int32_t *special;     /* special token ids, by first byte then length desc */
    int n_special;        /* entries in special */
    int n_user_defined;   /* of which USER_DEFINED (matched even without ENG_TOK_PARSE_SPECIAL) */
    /* special[special_start[b] .. special_start[b+1]) start with byte b */
    int32_t special_start[257];
    int32_t bos, eos, eot, unk, pad; /* special ids or -1 */
    bool add_bos, add_eos;           /* model defaults */
    bool add_space_prefix;           /* SPM: prepend ▁ to fragments */
    bool ignore_merges;              /* BPE: whole-piece lookup first */
    size_t max_piece;                /* longest piece in bytes */
};

/* Id of token text s[0..n), or -1. */
int32_t tok_vocab_lookup(const eng_tok *t, const char *s, size_t n);
/* Merge (left, right): rank and result id; false when no such merge. */
bool tok_merge_lookup(const eng_tok *t, int32_t left, int32_t right, int32_t *rank, int32_t *res);

/* ---- pre-tokenizers (tok_pre.c) ---- */
/* Calls emit(ctx, start, len) for each piece of text[0..len) (valid UTF-8)
 * in order; stops and returns the first non-zero value emit returns. */
typedef int (*tok_piece_fn)(void *ctx, const char *piece, size_t len);
int tok_pretokenize(eng_tok_pre pre, const char *text, size_t len, tok_piece_fn emit, void *ctx);

/* ---- models ---- */
/* Scratch reused across the words of one encode call. */
typedef struct tok_scratch {
    void *sym;       /* symbol array */
    size_t sym_cap;  /* bytes allocated for sym */
    void *heap;      /* priority queue array */
    size_t heap_cap; /* bytes allocated for heap */
    tok_buf buf;     /* text scratch */
} tok_scratch;
void tok_scratch_free(tok_scratch *s);

/* Encode one valid-UTF-8 fragment (no special tokens) with the SPM model;
 * prefix: prepend the vocabulary's space prefix when it has one. */
int tok_spm_encode(const eng_tok *t, const char *text, size_t len, bool prefix, tok_scratch *sc,
                   tok_ids *out);
/* Encode one valid-UTF-8 fragment with the byte-level BPE model
 * (pre-tokenizes, then merges each piece). */
int tok_bpe_encode(const eng_tok *t, const char *text, size_t len, tok_scratch *sc, tok_ids *out);

/* Byte-level alphabet: code point that byte b is spelled as, and back
 * (-1 for a code point outside the alphabet). */
uint32_t tok_byte_to_cp(uint8_t b);
int tok_cp_to_byte(uint32_t cp);

/* tok_encode_ids flag beside eng_tok.h's: the text continues a run whose
 * start was encoded before (a splice), so its first fragment gets no SPM
 * space prefix. */
#define TOK_ENC_CONTINUE 0x100

/* Encode into a growable id list (the core of eng_tok_encode). */
int tok_encode_ids(const eng_tok *t, const char *text, size_t len, int flags, tok_ids *out,
                   char *err, size_t errlen);

/* The CONTROL or UNKNOWN token whose spelling is the longest match at
 * s[0..n), or -1 (a USER_DEFINED token, ordinary text, is not one). */
int32_t tok_control_at(const eng_tok *t, const char *s, size_t n);

/* ---- chat templates in flat form (template.c; template_splice.c) ---- */
/* Render msgs to one text (template-owned special tokens spelled out, as
 * eng_tmpl_render_text) plus the list of those special tokens, in text
 * order, with their ids (*spec malloc'd, NULL when none).  text is reset
 * first.  ENG_TMPL_EVOCAB when a special token is not in the vocabulary. */
int tmpl_render_flat(eng_tmpl_format f, const eng_tok *t, const eng_tmpl_msg *msgs, int n,
                     bool add_gen, tok_buf *text, eng_tmpl_special **spec, int *n_spec, char *err,
                     size_t errlen);
/* Append the ids of text[from..n_text) of a flat render to out, as
 * eng_tmpl_render_ids encodes a render: each run of text between special
 * tokens without special-token parsing, each special token by id.  from
 * must not fall inside a special token's spelling. */
int tmpl_encode_flat(const eng_tok *t, const char *text, size_t n_text,
                     const eng_tmpl_special *spec, int n_spec, size_t from, tok_ids *out, char *err,
                     size_t errlen);

/* The architecture's turn format for a file without a template
 * (template_detect.c); ENG_TMPL_EUNKNOWN when it has none. */
struct eng_gguf;
int tmpl_arch_format(const struct eng_gguf *g, eng_tmpl_format *out);

/* Build eng_tmpl_turn *out from a flat render (takes text and spec, freed
 * on error too), splicing prior's ids where the rules allow
 * (template_splice.c). */
int tmpl_turn_from_flat(const eng_tok *t, const eng_tmpl_msg *msgs, int n,
                        const eng_tmpl_prior *prior, tok_buf *text, eng_tmpl_special *spec,
                        int n_spec, eng_tmpl_turn *out, char *err, size_t errlen);

#endif
