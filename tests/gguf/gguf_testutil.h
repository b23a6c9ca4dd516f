/*
 * gguf_testutil.h -- helpers shared by the GGUF unit tests: a raw byte
 * builder for hand-made (valid or hostile) headers, writing a writer's
 * output to memory, and opening a buffer through an exact-size heap copy
 * (so ASan sees any read past its end).
 */
#ifndef GGUF_TESTUTIL_H
#define GGUF_TESTUTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_gguf.h"
#include "eng_gguf_write.h"

typedef struct rb {
    uint8_t *p; /* bytes */
    size_t n;   /* used */
    size_t cap; /* allocated */
} rb;

static inline void rb_bytes(rb *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static inline void rb_u32(rb *b, uint32_t v) { rb_bytes(b, &v, 4); }
static inline void rb_u64(rb *b, uint64_t v) { rb_bytes(b, &v, 8); }
static inline void rb_str(rb *b, const char *s) {
    rb_u64(b, strlen(s));
    rb_bytes(b, s, strlen(s));
}
/* GGUF header start: magic, version, counts. */
static inline void rb_header(rb *b, uint32_t version, uint64_t n_tensors, uint64_t n_kv) {
    rb_bytes(b, "GGUF", 4);
    rb_u32(b, version);
    rb_u64(b, n_tensors);
    rb_u64(b, n_kv);
}
/* A u32 KV entry. */
static inline void rb_kv_u32(rb *b, const char *key, uint32_t v) {
    rb_str(b, key);
    rb_u32(b, ENG_GGUF_TYPE_U32);
    rb_u32(b, v);
}
/* A tensor info. */
static inline void rb_tensor(rb *b, const char *name, uint32_t n_dims, const uint64_t *ne,
                             uint32_t type, uint64_t off) {
    rb_str(b, name);
    rb_u32(b, n_dims);
    for (uint32_t i = 0; i < n_dims; i++) rb_u64(b, ne[i]);
    rb_u32(b, type);
    rb_u64(b, off);
}
/* Pad with zeros to a multiple of a. */
static inline void rb_pad(rb *b, size_t a) {
    static const uint8_t z[64];
    while (b->n % a) rb_bytes(b, z, 1);
}

/* An in-memory output stream for the writer: gt_mem_begin, then
 * eng_gguf_writer_begin(w, m.f) ... finish, then gt_mem_end; the bytes are
 * in m.buf (free it), m.n long. */
typedef struct gt_mem {
    FILE *f;   /* stream */
    char *buf; /* bytes after gt_mem_end */
    size_t n;  /* length after gt_mem_end */
} gt_mem;
static inline void gt_mem_begin(gt_mem *m) {
    m->buf = NULL;
    m->n = 0;
    m->f = open_memstream(&m->buf, &m->n);
    if (!m->f) abort();
}
static inline void gt_mem_end(gt_mem *m) { fclose(m->f); }

/* Open an exact-size heap copy of buf[0..len); *copy must be freed after
 * closing the handle. */
static inline int gt_open_copy(const void *buf, size_t len, eng_gguf **g, void **copy, char *err,
                               size_t errlen) {
    *copy = malloc(len ? len : 1);
    if (!*copy) abort();
    if (len) memcpy(*copy, buf, len);
    return eng_gguf_open_mem(*copy, len, g, err, errlen);
}

#endif /* GGUF_TESTUTIL_H */
