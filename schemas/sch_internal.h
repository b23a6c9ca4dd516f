/*
 * sch_internal.h -- helpers shared by the four record codecs (not public).
 *
 * Decoding runs in three steps: sch_scan() checks the raw bytes
 * structurally (depth, counts, truncation, trailing bytes) without
 * allocating; msgpack_unpack_next() builds msgpack_objects that point into
 * the input; the record's decoder walks those objects with the typed getters
 * below, which check type, range and text rules and copy what they keep
 * into the output arena (a msgpack_zone).  Every getter reports failures
 * through pl_errf() (pl_err.h, parley's one formatter), which formats "path: what" into the caller's buffer and
 * returns the code, so a decoder can `return` or `goto err` on any
 * non-zero result.  Encoding uses sch_w_* wrappers around msgpack_packer
 * writing into an sch_buf.
 */
#ifndef PARLEY_SCH_INTERNAL_H
#define PARLEY_SCH_INTERNAL_H

#include "sch.h"
#include "pl_err.h"

#include <msgpack.h>
#include <stdarg.h>

/* Decode context: limits, destination arena and error sink. */
typedef struct sch_ctx {
    const sch_limits *lim; /* limits in force */
    msgpack_zone *zone;    /* output arena */
    char *err;             /* caller's message buffer (may be NULL) */
    size_t errlen;         /* its size */
} sch_ctx;

/* Text rules a string field can have. */
typedef enum sch_rule {
    SCH_RULE_BYTES, /* any bytes, str or bin accepted */
    SCH_RULE_TEXT,  /* str, valid UTF-8 */
    SCH_RULE_ID,    /* str, UTF-8, 1+ bytes, no C0 controls or DEL */
    SCH_RULE_NS,    /* str, 1+ bytes of [A-Za-z0-9._-] */
    SCH_RULE_CODE   /* str, 1..64 bytes of [A-Z0-9_] (error code names) */
} sch_rule;


/* Write up to 40 bytes of s as a quoted ASCII snippet ("...", \xNN escapes,
 * "..." suffix when cut) into dst[dstlen]. */
void sch_quote(char *dst, size_t dstlen, const char *s, size_t len);

/* Name of a msgpack object type for messages ("str", "map"...). */
const char *sch_type_name(const msgpack_object *o);

/* Structural pre-scan of a whole record (see sch_scan.c). */
int sch_scan(const unsigned char *p, size_t len, const sch_limits *lim, char *err, size_t errlen);

/* Scan, then parse with msgpack-c into *up (caller destroys it).  On
 * success up->data is a map; on failure up is already destroyed. */
int sch_parse(const void *buf, size_t len, const sch_limits *lim, msgpack_unpacked *up, char *err,
              size_t errlen);

/* Reads the fields of a parsed root map into a record struct. */
typedef int (*sch_read_fn)(sch_ctx *c, const msgpack_object *root, void *out);

/* The whole decode of one record: zero out (out_size bytes), apply default
 * limits when lim is NULL, scan and parse, run read into a fresh arena, and
 * on success store the arena in *zone_slot (a field of out); on failure free
 * everything and zero out again. */
int sch_decode_record(const void *buf, size_t len, const sch_limits *lim, sch_read_fn read,
                      void *out, size_t out_size, struct msgpack_zone **zone_slot, char *err,
                      size_t errlen);

/* Check that o is a schema map: a map of <= SCH_MAX_MAP_FIELDS entries with
 * str keys of 1..SCH_MAX_KEY_BYTES bytes and no key twice.  path names the
 * map in messages ("" for the root). */
int sch_map_check(sch_ctx *c, const msgpack_object *o, const char *path);

/* Value of key in a checked map, or NULL when absent or nil. */
const msgpack_object *sch_map_get(const msgpack_object *map, const char *key);

/* Typed getters.  path/key name the field in messages.  When the field is
 * absent (or nil): required -> SCH_E_MISSING_FIELD, else *present = false
 * and *out untouched.  present may be NULL. */
int sch_get_uint(sch_ctx *c, const msgpack_object *map, const char *path, const char *key,
                 bool required, uint64_t min, uint64_t max, uint64_t *out, bool *present);
int sch_get_int(sch_ctx *c, const msgpack_object *map, const char *path, const char *key,
                bool required, int64_t min, int64_t max, int64_t *out, bool *present);
int sch_get_number(sch_ctx *c, const msgpack_object *map, const char *path, const char *key,
                   bool required, double min, bool min_open, double max, double *out,
                   bool *present);
int sch_get_bool(sch_ctx *c, const msgpack_object *map, const char *path, const char *key,
                 bool required, bool *out, bool *present);
/* String field: checks rule and max bytes (too_long = code on excess) and
 * copies into the arena. */
int sch_get_str(sch_ctx *c, const msgpack_object *map, const char *path, const char *key,
                bool required, sch_rule rule, size_t max, int too_long, sch_str *out);
/* Same checks on an object already in hand (arrays of strings). */
int sch_take_str(sch_ctx *c, const msgpack_object *o, const char *path, sch_rule rule, size_t max,
                 int too_long, sch_str *out);
/* Array of token ids (uint 0..2^31-1), at most max entries (too_many = code
 * on excess); empty arrays give NULL/0. */
int sch_take_tokens(sch_ctx *c, const msgpack_object *o, const char *path, size_t max, int too_many,
                    const uint32_t **out, size_t *n);
/* The `v` field of a root map: required uint equal to SCH_VERSION. */
int sch_get_version(sch_ctx *c, const msgpack_object *root, uint32_t *v);
/* The head of every record that names a turn: root is a map, its version
 * (sch_get_version), then the required conversation_id and turn_id. */
int sch_get_turn_head(sch_ctx *c, const msgpack_object *root, uint32_t *v, sch_str *conversation_id,
                      sch_str *turn_id);

/* Check a string against a rule (for encoders); len limit not applied. */
int sch_check_rule(const char *path, const sch_str *s, sch_rule rule, char *err, size_t errlen);

/* Encoder check of a token array (NULL with a count, ids > 2^31-1). */
int sch_check_tokens(const char *path, const uint32_t *t, size_t n, char *err, size_t errlen);

/* Encoding: a msgpack_packer writing into an sch_buf; a failed allocation
 * sets `failed` and later writes are dropped. */
typedef struct sch_writer {
    msgpack_packer pk; /* msgpack-c packer whose data is this writer */
    sch_buf *out;      /* destination */
    bool failed;       /* an allocation failed */
} sch_writer;

void sch_w_open(sch_writer *w, sch_buf *out);
void sch_w_map(sch_writer *w, size_t n);
void sch_w_key(sch_writer *w, const char *key);
void sch_w_str(sch_writer *w, const char *key, const sch_str *s);
/* bytes as str when valid UTF-8, else bin (header names) */
void sch_w_name(sch_writer *w, const sch_str *s);
void sch_w_bin(sch_writer *w, const char *key, const sch_str *s);
void sch_w_uint(sch_writer *w, const char *key, uint64_t v);
void sch_w_int(sch_writer *w, const char *key, int64_t v);
void sch_w_double(sch_writer *w, const char *key, double v);
void sch_w_bool(sch_writer *w, const char *key, bool v);
void sch_w_tokens(sch_writer *w, const char *key, const uint32_t *t, size_t n);
/* The 1.2 reply parts (sch_reply.c).  Decoders: map's `logprobs` (one
 * entry per token: n_tokens of them), `tool_calls`, a result's `choices`;
 * absent gives NULL/0; path names map in messages ("" = the root). */
int sch_logprobs_read(sch_ctx *c, const msgpack_object *map, const char *path, size_t n_tokens,
                      const sch_logprob **out, size_t *n_out);
int sch_tool_calls_read(sch_ctx *c, const msgpack_object *map, const char *path,
                        const sch_tool_call **out, size_t *n_out);
int sch_choices_read(sch_ctx *c, const msgpack_object *root, sch_result *r);
/* map's required `finish_reason` (sch_read.c). */
int sch_finish_take(sch_ctx *c, const msgpack_object *map, const char *path, sch_finish *out);
/* Encoder checks of the same (n entries; logprobs need n == n_tokens). */
int sch_check_logprobs(const char *path, const sch_logprob *lp, size_t n, size_t n_tokens,
                       char *err, size_t errlen);
int sch_check_tool_calls(const char *path, const sch_tool_call *t, size_t n, char *err,
                         size_t errlen);
int sch_check_choices(const sch_result *r, char *err, size_t errlen);
/* Writers: key and array. */
void sch_w_logprobs(sch_writer *w, const sch_logprob *lp, size_t n);
void sch_w_tool_calls(sch_writer *w, const sch_tool_call *t, size_t n);
void sch_w_choices(sch_writer *w, const sch_choice *ch, size_t n);

/* Finish: SCH_E_NOMEM if any write failed (out->len reset to 0). */
int sch_w_close(sch_writer *w, char *err, size_t errlen);

#endif /* PARLEY_SCH_INTERNAL_H */
