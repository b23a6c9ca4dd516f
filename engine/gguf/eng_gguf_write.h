/*
 * eng_gguf_write.h -- write GGUF v3 files (synthetic models, tests).
 *
 * Purpose.  `parley mkmodel` and the tests need GGUF files that llama.cpp,
 * gguf-py and our own reader all accept.  The writer streams: the caller
 * first declares every metadata entry and every tensor (name, type, shape),
 * then calls eng_gguf_writer_begin, which writes the header, and then feeds
 * each tensor's bytes in declaration order with eng_gguf_writer_write (in
 * as many pieces as it likes); the writer pads between tensors to the
 * alignment.  A 1B model therefore never has to sit in memory.
 *
 * Output layout is exactly GGUF v3 (see eng_gguf.h): header, KV entries in
 * the order added, tensor infos in the order declared with offsets assigned
 * consecutively (each aligned), zero padding to the alignment, data.
 *
 * Errors are sticky: the first failing call records a message and code;
 * every later call returns that code without doing anything, and
 * eng_gguf_writer_finish reports it.  So a caller may check only finish.
 * Refused: duplicate keys or tensor names, empty or over-long names,
 * unsupported tensor types, shapes whose ne[0] is not a block multiple,
 * writing more or fewer bytes than declared, declaring after begin.
 *
 * Threading: one writer per thread.  Ownership: the writer copies keys,
 * names and values; the FILE * given to begin stays the caller's (the writer
 * writes and flushes but never closes it).
 */
#ifndef ENG_GGUF_WRITE_H
#define ENG_GGUF_WRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "eng_gguf.h"

typedef struct eng_gguf_writer eng_gguf_writer; /* opaque */

/* New writer with the given alignment (0 = 32; else a power of two).  When
 * the alignment is not 32 it is also stored as general.alignment.
 * Returns 0 or ENG_GGUF_ENOMEM / ENG_GGUF_EINVAL. */
int eng_gguf_writer_new(uint32_t alignment, eng_gguf_writer **out);
void eng_gguf_writer_free(eng_gguf_writer *w);

/* Metadata.  Each returns 0 or the sticky error code. */
int eng_gguf_writer_add_u32(eng_gguf_writer *w, const char *key, uint32_t v);
int eng_gguf_writer_add_i32(eng_gguf_writer *w, const char *key, int32_t v);
int eng_gguf_writer_add_u64(eng_gguf_writer *w, const char *key, uint64_t v);
int eng_gguf_writer_add_i64(eng_gguf_writer *w, const char *key, int64_t v);
int eng_gguf_writer_add_f32(eng_gguf_writer *w, const char *key, float v);
int eng_gguf_writer_add_f64(eng_gguf_writer *w, const char *key, double v);
int eng_gguf_writer_add_bool(eng_gguf_writer *w, const char *key, bool v);
int eng_gguf_writer_add_str(eng_gguf_writer *w, const char *key, const char *s);
/* Any scalar type (ENG_GGUF_TYPE_* except STR and ARR) from its raw
 * little-endian bytes. */
int eng_gguf_writer_add_scalar(eng_gguf_writer *w, const char *key, int type, const void *val);
/* Numeric / bool array: n elements of elem_type, raw little-endian. */
int eng_gguf_writer_add_arr(eng_gguf_writer *w, const char *key, int elem_type, const void *data,
                            uint64_t n);
/* String array: n strings; lens may be NULL (NUL-terminated strings). */
int eng_gguf_writer_add_arr_str(eng_gguf_writer *w, const char *key, const char *const *strs,
                                const size_t *lens, uint64_t n);

/* Declare a tensor (ENG_GGML_TYPE_*, n_dims 1..4, ne in GGUF order).
 * Returns 0 or the sticky error code. */
int eng_gguf_writer_add_tensor(eng_gguf_writer *w, const char *name, int type, int n_dims,
                               const int64_t *ne);

/* Write the header to f.  No declarations are accepted afterwards. */
int eng_gguf_writer_begin(eng_gguf_writer *w, FILE *f);
/* Append n bytes of tensor data (declaration order, any chunking). */
int eng_gguf_writer_write(eng_gguf_writer *w, const void *data, size_t n);
/* Check that every tensor got all its bytes and flush.  Returns 0 or the
 * sticky error code with its message in err. */
int eng_gguf_writer_finish(eng_gguf_writer *w, char *err, size_t errlen);

/* The recorded error message ("" when none). */
const char *eng_gguf_writer_error(const eng_gguf_writer *w);

#endif /* ENG_GGUF_WRITE_H */
