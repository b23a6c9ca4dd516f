/*
 * gguf_write.c -- streaming GGUF v3 writer (see eng_gguf_write.h).
 *
 * Metadata entries are serialised into a growing byte buffer as they are
 * added (so the header is written in one go by begin), tensors are kept as a
 * small table with offsets assigned at declaration (each tensor's start
 * aligned to the file's alignment), and data is streamed: the writer tracks
 * which tensor the next bytes belong to and inserts zero padding after each
 * one.  The first error is sticky (code + message) so callers may chain
 * calls and check once at finish.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_gguf_write.h"
#include "pl_err.h"

typedef struct gwr_tensor {
    char *name;      /* owned copy */
    int type;        /* ENG_GGML_TYPE_* */
    int n_dims;      /* 1..4 */
    int64_t ne[4];   /* GGUF order */
    uint64_t nbytes; /* data bytes */
    uint64_t offset; /* within the data section */
} gwr_tensor;

struct eng_gguf_writer {
    uint32_t alignment;   /* data alignment */
    uint8_t *kvbuf;       /* serialised KV entries */
    size_t kvlen, kvcap;  /* used / allocated bytes of kvbuf */
    uint64_t n_kv;        /* entries in kvbuf */
    char **keys;          /* copies of keys, for duplicate checks */
    size_t keys_cap;      /* allocated entries of keys */
    gwr_tensor *t;        /* declared tensors */
    int n_t, cap_t;       /* used / allocated */
    uint64_t data_size;   /* data section bytes so far (declared) */
    FILE *f;              /* output after begin */
    int cur;              /* tensor receiving data */
    uint64_t cur_done;    /* bytes of it written */
    int rc;               /* sticky error code (0 = none) */
    char msg[PL_ERR_LEN]; /* sticky error message */
};

static int gwr_fail(eng_gguf_writer *w, int rc, const char *fmt, ...) {
    if (w->rc) return w->rc;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg, sizeof w->msg, fmt, ap);
    va_end(ap);
    w->rc = rc;
    return rc;
}

static int gwr_put(eng_gguf_writer *w, const void *p, size_t n) {
    if (w->rc) return w->rc;
    if (n == 0) return 0;
    if (n > SIZE_MAX / 2 - w->kvlen) return gwr_fail(w, ENG_GGUF_ENOMEM, "metadata too large");
    if (w->kvlen + n > w->kvcap) {
        size_t c = w->kvcap ? w->kvcap : 4096;
        while (c < w->kvlen + n) c *= 2;
        uint8_t *b = realloc(w->kvbuf, c);
        if (!b) return gwr_fail(w, ENG_GGUF_ENOMEM, "out of memory for metadata");
        w->kvbuf = b;
        w->kvcap = c;
    }
    memcpy(w->kvbuf + w->kvlen, p, n);
    w->kvlen += n;
    return 0;
}

static int gwr_u32(eng_gguf_writer *w, uint32_t v) {
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    return gwr_put(w, b, 4);
}

static int gwr_u64(eng_gguf_writer *w, uint64_t v) {
    gwr_u32(w, (uint32_t)v);
    return gwr_u32(w, (uint32_t)(v >> 32));
}

static int gwr_str(eng_gguf_writer *w, const char *s, size_t len) {
    gwr_u64(w, len);
    return gwr_put(w, s, len);
}

int eng_gguf_writer_new(uint32_t alignment, eng_gguf_writer **out) {
    *out = NULL;
    if (alignment == 0) alignment = ENG_GGUF_DEFAULT_ALIGNMENT;
    if ((alignment & (alignment - 1)) || alignment > ENG_GGUF_MAX_ALIGNMENT) return ENG_GGUF_EINVAL;
    eng_gguf_writer *w = calloc(1, sizeof *w);
    if (!w) return ENG_GGUF_ENOMEM;
    w->alignment = alignment;
    if (alignment != ENG_GGUF_DEFAULT_ALIGNMENT &&
        eng_gguf_writer_add_u32(w, "general.alignment", alignment)) {
        eng_gguf_writer_free(w);
        return ENG_GGUF_ENOMEM;
    }
    *out = w;
    return 0;
}

void eng_gguf_writer_free(eng_gguf_writer *w) {
    if (!w) return;
    for (uint64_t i = 0; i < w->n_kv; i++) free(w->keys[i]);
    for (int i = 0; i < w->n_t; i++) free(w->t[i].name);
    free(w->keys);
    free(w->t);
    free(w->kvbuf);
    free(w);
}

/* Common start of a KV entry: state, name and duplicate checks, key + type. */
static int gwr_key(eng_gguf_writer *w, const char *key, int type) {
    if (w->rc) return w->rc;
    if (w->f) return gwr_fail(w, ENG_GGUF_EINVAL, "key '%s' added after begin", key);
    size_t len = key ? strlen(key) : 0;
    if (len == 0 || len > ENG_GGUF_MAX_KEY_LEN)
        return gwr_fail(w, ENG_GGUF_EINVAL, "key length %zu is not in [1, %u]", len,
                        ENG_GGUF_MAX_KEY_LEN);
    for (uint64_t i = 0; i < w->n_kv; i++)
        if (!strcmp(w->keys[i], key))
            return gwr_fail(w, ENG_GGUF_EINVAL, "duplicate key '%s'", key);
    if (w->n_kv == w->keys_cap) {
        size_t c = w->keys_cap ? 2 * w->keys_cap : 32;
        char **k = realloc(w->keys, c * sizeof *k);
        if (!k) return gwr_fail(w, ENG_GGUF_ENOMEM, "out of memory");
        w->keys = k;
        w->keys_cap = c;
    }
    if (!(w->keys[w->n_kv] = strdup(key))) return gwr_fail(w, ENG_GGUF_ENOMEM, "out of memory");
    w->n_kv++;
    gwr_str(w, key, len);
    return gwr_u32(w, (uint32_t)type);
}

static size_t gwr_scalar_size(int type) {
    static const size_t sz[ENG_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return type >= 0 && type < ENG_GGUF_TYPE_COUNT ? sz[type] : 0;
}

int eng_gguf_writer_add_scalar(eng_gguf_writer *w, const char *key, int type, const void *val) {
    size_t sz = gwr_scalar_size(type);
    if (!sz) return gwr_fail(w, ENG_GGUF_EINVAL, "key '%s': type %d is not a scalar", key, type);
    gwr_key(w, key, type);
    return gwr_put(w, val, sz); /* host is little-endian (x86-64, aarch64) */
}

int eng_gguf_writer_add_u32(eng_gguf_writer *w, const char *k, uint32_t v) {
    return eng_gguf_writer_add_scalar(w, k, ENG_GGUF_TYPE_U32, &v);
}
int eng_gguf_writer_add_i32(eng_gguf_writer *w, const char *k, int32_t v) {
    return eng_gguf_writer_add_scalar(w, k, ENG_GGUF_TYPE_I32, &v);
}
int eng_gguf_writer_add_u64(eng_gguf_writer *w, const char *k, uint64_t v) {
    return eng_gguf_writer_add_scalar(w, k, ENG_GGUF_TYPE_U64, &v);
}
int eng_gguf_writer_add_i64(eng_gguf_writer *w, const char *k, int64_t v) {
    return eng_gguf_writer_add_scalar(w, k, ENG_GGUF_TYPE_I64, &v);
}
int eng_gguf_writer_add_f32(eng_gguf_writer *w, const char *k, float v) {
    return eng_gguf_writer_add_scalar(w, k, ENG_GGUF_TYPE_F32, &v);
}
int eng_gguf_writer_add_f64(eng_gguf_writer *w, const char *k, double v) {
    return eng_gguf_writer_add_scalar(w, k, ENG_GGUF_TYPE_F64, &v);
}
int eng_gguf_writer_add_bool(eng_gguf_writer *w, const char *k, bool v) {
    uint8_t b = v ? 1 : 0;
    return eng_gguf_writer_add_scalar(w, k, ENG_GGUF_TYPE_BOOL, &b);
}

int eng_gguf_writer_add_str(eng_gguf_writer *w, const char *key, const char *s) {
    if (!s) return gwr_fail(w, ENG_GGUF_EINVAL, "key '%s': NULL string", key);
    gwr_key(w, key, ENG_GGUF_TYPE_STR);
    return gwr_str(w, s, strlen(s));
}

int eng_gguf_writer_add_arr(eng_gguf_writer *w, const char *key, int elem_type, const void *data,
                            uint64_t n) {
    size_t sz = gwr_scalar_size(elem_type);
    if (!sz || n > ENG_GGUF_MAX_ARR_LEN || (n && !data))
        return gwr_fail(w, ENG_GGUF_EINVAL, "key '%s': bad array (type %d, %llu elements)", key,
                        elem_type, (unsigned long long)n);
    gwr_key(w, key, ENG_GGUF_TYPE_ARR);
    gwr_u32(w, (uint32_t)elem_type);
    gwr_u64(w, n);
    return gwr_put(w, data, (size_t)n * sz);
}

int eng_gguf_writer_add_arr_str(eng_gguf_writer *w, const char *key, const char *const *strs,
                                const size_t *lens, uint64_t n) {
    if (n > ENG_GGUF_MAX_ARR_LEN || (n && !strs))
        return gwr_fail(w, ENG_GGUF_EINVAL, "key '%s': bad string array", key);
    gwr_key(w, key, ENG_GGUF_TYPE_ARR);
    gwr_u32(w, ENG_GGUF_TYPE_STR);
    gwr_u64(w, n);
    for (uint64_t i = 0; i < n; i++) gwr_str(w, strs[i], lens ? lens[i] : strlen(strs[i]));
    return w->rc;
}

int eng_gguf_writer_add_tensor(eng_gguf_writer *w, const char *name, int type, int n_dims,
                               const int64_t *ne) {
    if (w->rc) return w->rc;
    if (w->f) return gwr_fail(w, ENG_GGUF_EINVAL, "tensor '%s' declared after begin", name);
    size_t len = name ? strlen(name) : 0;
    if (len == 0 || len > ENG_GGUF_MAX_KEY_LEN)
        return gwr_fail(w, ENG_GGUF_EINVAL, "tensor name length %zu is not in [1, %u]", len,
                        ENG_GGUF_MAX_KEY_LEN);
    if (n_dims < 1 || n_dims > 4)
        return gwr_fail(w, ENG_GGUF_EINVAL, "tensor '%s': n_dims %d", name, n_dims);
    for (int i = 0; i < w->n_t; i++)
        if (!strcmp(w->t[i].name, name))
            return gwr_fail(w, ENG_GGUF_EINVAL, "duplicate tensor '%s'", name);
    gwr_tensor t = {0};
    uint64_t rows = 1;
    for (int d = 0; d < 4; d++) {
        t.ne[d] = d < n_dims ? ne[d] : 1;
        if (t.ne[d] < 0) return gwr_fail(w, ENG_GGUF_EINVAL, "tensor '%s': ne[%d] < 0", name, d);
        if (d > 0) {
            if (t.ne[d] && rows > UINT64_MAX / (uint64_t)t.ne[d])
                return gwr_fail(w, ENG_GGUF_EINVAL, "tensor '%s': size overflows", name);
            rows *= (uint64_t)t.ne[d];
        }
    }
    uint64_t rowb;
    if (eng_gguf_row_bytes(type, t.ne[0], &rowb) || (rows && rowb > UINT64_MAX / 2 / rows))
        return gwr_fail(w, ENG_GGUF_EINVAL,
                        "tensor '%s': type %d with ne[0] = %lld is not "
                        "supported (unknown type or not a block multiple)",
                        name, type, (long long)t.ne[0]);
    t.type = type;
    t.n_dims = n_dims;
    t.nbytes = rowb * rows;
    t.offset = w->data_size;
    if (w->n_t == w->cap_t) {
        int c = w->cap_t ? 2 * w->cap_t : 64;
        gwr_tensor *nt = realloc(w->t, (size_t)c * sizeof *nt);
        if (!nt) return gwr_fail(w, ENG_GGUF_ENOMEM, "out of memory");
        w->t = nt;
        w->cap_t = c;
    }
    if (!(t.name = strdup(name))) return gwr_fail(w, ENG_GGUF_ENOMEM, "out of memory");
    w->t[w->n_t++] = t;
    uint64_t a = w->alignment;
    w->data_size = (t.offset + t.nbytes + a - 1) / a * a;
    return 0;
}

static int gwr_pad(eng_gguf_writer *w, uint64_t pos) {
    static const uint8_t zeros[64];
    uint64_t pad = (w->alignment - pos % w->alignment) % w->alignment;
    while (pad) {
        size_t k = pad < sizeof zeros ? (size_t)pad : sizeof zeros;
        if (fwrite(zeros, 1, k, w->f) != k) return gwr_fail(w, ENG_GGUF_EIO, "write failed");
        pad -= k;
    }
    return 0;
}

int eng_gguf_writer_begin(eng_gguf_writer *w, FILE *f) {
    if (w->rc) return w->rc;
    if (w->f || !f) return gwr_fail(w, ENG_GGUF_EINVAL, "begin called twice or without a file");
    size_t kv_end = w->kvlen;
    gwr_put(w, "GGUF", 4); /* header is assembled after the KV bytes, then rotated */
    gwr_u32(w, 3);
    gwr_u64(w, (uint64_t)w->n_t);
    gwr_u64(w, w->n_kv);
    for (int i = 0; i < w->n_t; i++) {
        const gwr_tensor *t = &w->t[i];
        gwr_str(w, t->name, strlen(t->name));
        gwr_u32(w, (uint32_t)t->n_dims);
        for (int d = 0; d < t->n_dims; d++) gwr_u64(w, (uint64_t)t->ne[d]);
        gwr_u32(w, (uint32_t)t->type);
        gwr_u64(w, t->offset);
    }
    if (w->rc) return w->rc;
    w->f = f;
    const uint8_t *hdr = w->kvbuf + kv_end, *infos = hdr + 24;
    size_t ninfo = w->kvlen - kv_end - 24;
    if (fwrite(hdr, 1, 24, f) != 24 || fwrite(w->kvbuf, 1, kv_end, f) != kv_end ||
        fwrite(infos, 1, ninfo, f) != ninfo)
        return gwr_fail(w, ENG_GGUF_EIO, "write failed");
    w->cur = 0;
    w->cur_done = 0;
    return gwr_pad(w, 24 + kv_end + ninfo);
}

/* Move past completed tensors, padding after each. */
static int gwr_advance(eng_gguf_writer *w) {
    while (w->cur < w->n_t && w->cur_done == w->t[w->cur].nbytes) {
        if (gwr_pad(w, w->t[w->cur].offset + w->t[w->cur].nbytes)) return w->rc;
        w->cur++;
        w->cur_done = 0;
    }
    return 0;
}

int eng_gguf_writer_write(eng_gguf_writer *w, const void *data, size_t n) {
    const uint8_t *p = data;
    if (w->rc) return w->rc;
    if (!w->f) return gwr_fail(w, ENG_GGUF_EINVAL, "tensor data written before begin");
    while (n) {
        if (gwr_advance(w)) return w->rc;
        if (w->cur >= w->n_t)
            return gwr_fail(w, ENG_GGUF_EINVAL, "%zu bytes of data beyond the last tensor", n);
        uint64_t left = w->t[w->cur].nbytes - w->cur_done;
        size_t k = left < n ? (size_t)left : n;
        if (fwrite(p, 1, k, w->f) != k) return gwr_fail(w, ENG_GGUF_EIO, "write failed");
        w->cur_done += k;
        p += k;
        n -= k;
    }
    return gwr_advance(w);
}

int eng_gguf_writer_finish(eng_gguf_writer *w, char *err, size_t errlen) {
    if (!w->rc && !w->f) gwr_fail(w, ENG_GGUF_EINVAL, "finish called before begin");
    if (!w->rc) gwr_advance(w);
    if (!w->rc && w->cur < w->n_t)
        gwr_fail(w, ENG_GGUF_EINVAL, "tensor '%s' got %llu of its %llu bytes", w->t[w->cur].name,
                 (unsigned long long)w->cur_done, (unsigned long long)w->t[w->cur].nbytes);
    if (!w->rc && fflush(w->f)) gwr_fail(w, ENG_GGUF_EIO, "flush failed");
    if (w->rc) pl_errf(err, errlen, w->rc, "%s", w->msg);
    return w->rc;
}

const char *eng_gguf_writer_error(const eng_gguf_writer *w) { return w->msg; }
