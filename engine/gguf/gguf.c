/*
 * gguf.c -- the GGUF reader: open (mmap or caller buffer), validate every
 * field of the header against the bytes that exist, index keys and tensor
 * names, and answer metadata / tensor queries.
 *
 * The parser walks the header with a bounds-checked cursor: each read first
 * checks that the bytes are there, and each count or length is compared with
 * both a fixed cap and what the rest of the file could possibly hold before
 * anything is allocated from it.  Messages name the entry (key #i 'name' or
 * tensor #i 'name'), the field and the limit it broke.  Keys and tensor
 * names go into open-addressing hash tables (FNV-1a), which give duplicate
 * detection and O(1) lookup.  Type sizes and conversions live in
 * gguf_types.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "eng_gguf.h"
#include "pl_err.h"
#include "pl_hash.h"

#define GGUF_MAGIC 0x46554747u /* "GGUF" little-endian */

typedef struct gguf_kv {
    char *key;            /* NUL-terminated copy */
    int type;             /* ENG_GGUF_TYPE_* */
    int arr_type;         /* element type for arrays, else -1 */
    uint64_t n;           /* array count / string length / 1 */
    const uint8_t *val;   /* value bytes (string: its bytes; array: first
                             * element, or NULL for string arrays) */
    const uint8_t **strs; /* string arrays: pointer to each string's u64
                             * length field, n entries */
} gguf_kv;

struct eng_gguf {
    const uint8_t *base;      /* file bytes */
    size_t size;              /* file length */
    void *map;                /* mmap'd region (NULL for open_mem) */
    uint32_t version;         /* 2 or 3 */
    uint32_t alignment;       /* data alignment */
    uint64_t data_off;        /* start of the data section */
    int n_kv;                 /* metadata entries */
    gguf_kv *kv;              /* n_kv entries, file order */
    int n_tensors;            /* tensor count */
    eng_gguf_tensor *tensors; /* n_tensors entries, file order */
    char **tnames;            /* owned tensor name copies */
    int *kv_hash;             /* key index table, -1 empty, size hash_cap */
    int *t_hash;              /* tensor name index table */
    uint32_t kv_hash_cap;     /* power of two */
    uint32_t t_hash_cap;      /* power of two */
};

/* Bounds-checked cursor over the header. */
typedef struct gguf_rd {
    const uint8_t *p; /* file */
    size_t size;      /* file length */
    size_t pos;       /* next byte */
    char *err;        /* message buffer */
    size_t errlen;    /* its size */
} gguf_rd;

static int rd_fail(gguf_rd *r, const char *fmt, ...) {
    if (r->err && r->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, r->errlen, fmt, ap);
        va_end(ap);
    }
    return ENG_GGUF_EFORMAT;
}

static uint32_t ld_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t ld_u64(const uint8_t *p) {
    return (uint64_t)ld_u32(p) | (uint64_t)ld_u32(p + 4) << 32;
}

static size_t rd_left(const gguf_rd *r) { return r->size - r->pos; }

/* Read a u32/u64 field; what/ctx name it in the error. */
static int rd_u32(gguf_rd *r, uint32_t *v, const char *ctx, const char *what) {
    if (rd_left(r) < 4)
        return rd_fail(r, "%s: truncated reading %s at offset %zu (file is %zu bytes)", ctx, what,
                       r->pos, r->size);
    *v = ld_u32(r->p + r->pos);
    r->pos += 4;
    return 0;
}

static int rd_u64(gguf_rd *r, uint64_t *v, const char *ctx, const char *what) {
    if (rd_left(r) < 8)
        return rd_fail(r, "%s: truncated reading %s at offset %zu (file is %zu bytes)", ctx, what,
                       r->pos, r->size);
    *v = ld_u64(r->p + r->pos);
    r->pos += 8;
    return 0;
}

/* Read a string header and its bytes; max caps the length. */
static int rd_str(gguf_rd *r, const uint8_t **s, uint64_t *len, uint64_t max, const char *ctx,
                  const char *what) {
    int rc = rd_u64(r, len, ctx, what);
    if (rc) return rc;
    if (*len > max)
        return rd_fail(r, "%s: %s length %llu exceeds the limit %llu", ctx, what,
                       (unsigned long long)*len, (unsigned long long)max);
    if (*len > rd_left(r))
        return rd_fail(r, "%s: %s length %llu exceeds the %zu bytes left in the file", ctx, what,
                       (unsigned long long)*len, rd_left(r));
    *s = r->p + r->pos;
    r->pos += (size_t)*len;
    return 0;
}

static size_t kv_scalar_size(int type) {
    switch (type) {
    case ENG_GGUF_TYPE_U8:
    case ENG_GGUF_TYPE_I8:
    case ENG_GGUF_TYPE_BOOL: return 1;
    case ENG_GGUF_TYPE_U16:
    case ENG_GGUF_TYPE_I16: return 2;
    case ENG_GGUF_TYPE_U32:
    case ENG_GGUF_TYPE_I32:
    case ENG_GGUF_TYPE_F32: return 4;
    case ENG_GGUF_TYPE_U64:
    case ENG_GGUF_TYPE_I64:
    case ENG_GGUF_TYPE_F64: return 8;
    default: return 0;
    }
}

/* ---- hash tables over names ---- */

static uint32_t name_hash(const char *s) { return pl_fnv1a32_str(PL_FNV32_SEED, s); }

static int *hash_new(uint32_t n, uint32_t *cap) {
    uint32_t c = 16;
    while (c < 2u * n) c <<= 1;
    int *t = malloc((size_t)c * sizeof *t);
    if (t) memset(t, 0xff, (size_t)c * sizeof *t); /* all -1 */
    *cap = c;
    return t;
}

/* Find name; if absent and insert_idx >= 0, insert it.  Returns the index
 * found (or -1 when absent). */
static int hash_probe(int *t, uint32_t cap, const char *name, int insert_idx,
                      const char *(*name_of)(const eng_gguf *, int), const eng_gguf *g) {
    uint32_t i = name_hash(name) & (cap - 1);
    for (;; i = (i + 1) & (cap - 1)) {
        if (t[i] < 0) {
            if (insert_idx >= 0) t[i] = insert_idx;
            return -1;
        }
        if (!strcmp(name_of(g, t[i]), name)) return t[i];
    }
}

static const char *kv_name_of(const eng_gguf *g, int i) { return g->kv[i].key; }
static const char *t_name_of(const eng_gguf *g, int i) { return g->tensors[i].name; }

/* Copy len bytes into a NUL-terminated string, refusing embedded NULs. */
static int dup_name(gguf_rd *r, const uint8_t *s, uint64_t len, char **out, const char *ctx,
                    const char *what) {
    if (len == 0) return rd_fail(r, "%s: empty %s", ctx, what);
    if (memchr(s, 0, (size_t)len)) return rd_fail(r, "%s: %s contains a NUL byte", ctx, what);
    *out = malloc((size_t)len + 1);
    if (!*out) {
        snprintf(r->err, r->errlen, "%s: out of memory", ctx);
        return ENG_GGUF_ENOMEM;
    }
    memcpy(*out, s, (size_t)len);
    (*out)[len] = 0;
    return 0;
}

/* ---- metadata parse ---- */

static int parse_value(gguf_rd *r, gguf_kv *kv, const char *ctx) {
    if (kv->type == ENG_GGUF_TYPE_STR) {
        const uint8_t *s = NULL;
        int rc = rd_str(r, &s, &kv->n, ENG_GGUF_MAX_STR_LEN, ctx, "string value");
        kv->val = s;
        return rc;
    }
    if (kv->type != ENG_GGUF_TYPE_ARR) {
        size_t sz = kv_scalar_size(kv->type);
        if (rd_left(r) < sz)
            return rd_fail(r, "%s: truncated %s value at offset %zu", ctx,
                           eng_gguf_kv_type_name(kv->type), r->pos);
        kv->n = 1;
        kv->val = r->p + r->pos;
        r->pos += sz;
        return 0;
    }
    uint32_t et = 0;
    int rc = rd_u32(r, &et, ctx, "array element type");
    if (rc) return rc;
    if (et == ENG_GGUF_TYPE_ARR)
        return rd_fail(r, "%s: nested arrays (array of arrays) are not supported", ctx);
    if (et >= ENG_GGUF_TYPE_COUNT) return rd_fail(r, "%s: invalid array element type %u", ctx, et);
    kv->arr_type = (int)et;
    if ((rc = rd_u64(r, &kv->n, ctx, "array length"))) return rc;
    if (kv->n > ENG_GGUF_MAX_ARR_LEN)
        return rd_fail(r, "%s: array length %llu exceeds the limit %llu", ctx,
                       (unsigned long long)kv->n, (unsigned long long)ENG_GGUF_MAX_ARR_LEN);
    size_t esz = et == ENG_GGUF_TYPE_STR ? 8 : kv_scalar_size((int)et);
    if (kv->n > rd_left(r) / esz)
        return rd_fail(r,
                       "%s: array of %llu %s elements needs at least %llu bytes, "
                       "only %zu left in the file",
                       ctx, (unsigned long long)kv->n, eng_gguf_kv_type_name((int)et),
                       (unsigned long long)kv->n * esz, rd_left(r));
    if (et != ENG_GGUF_TYPE_STR) {
        kv->val = r->p + r->pos;
        r->pos += (size_t)kv->n * esz;
        return 0;
    }
    kv->strs = malloc((size_t)(kv->n ? kv->n : 1) * sizeof *kv->strs);
    if (!kv->strs) {
        snprintf(r->err, r->errlen, "%s: out of memory for %llu strings", ctx,
                 (unsigned long long)kv->n);
        return ENG_GGUF_ENOMEM;
    }
    for (uint64_t j = 0; j < kv->n; j++) {
        char what[64];
        const uint8_t *s = NULL;
        uint64_t len = 0;
        snprintf(what, sizeof what, "string #%llu", (unsigned long long)j);
        kv->strs[j] = r->p + r->pos;
        if ((rc = rd_str(r, &s, &len, ENG_GGUF_MAX_STR_LEN, ctx, what))) return rc;
    }
    return 0;
}

static int parse_kvs(eng_gguf *g, gguf_rd *r, uint64_t n_kv) {
    g->kv = calloc((size_t)(n_kv ? n_kv : 1), sizeof *g->kv);
    g->kv_hash = hash_new((uint32_t)n_kv, &g->kv_hash_cap);
    if (!g->kv || !g->kv_hash) {
        snprintf(r->err, r->errlen, "out of memory for %llu metadata entries",
                 (unsigned long long)n_kv);
        return ENG_GGUF_ENOMEM;
    }
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_kv *kv = &g->kv[i];
        char ctx[160];
        const uint8_t *s = NULL;
        uint64_t len = 0;
        uint32_t type = 0;
        int rc;
        kv->arr_type = -1;
        snprintf(ctx, sizeof ctx, "metadata key #%llu", (unsigned long long)i);
        if ((rc = rd_str(r, &s, &len, ENG_GGUF_MAX_KEY_LEN, ctx, "key"))) return rc;
        if ((rc = dup_name(r, s, len, &kv->key, ctx, "key"))) return rc;
        g->n_kv = (int)i + 1;
        snprintf(ctx, sizeof ctx, "metadata key #%llu '%.100s'", (unsigned long long)i, kv->key);
        if (hash_probe(g->kv_hash, g->kv_hash_cap, kv->key, (int)i, kv_name_of, g) >= 0)
            return rd_fail(r, "%s: duplicate key", ctx);
        if ((rc = rd_u32(r, &type, ctx, "value type"))) return rc;
        if (type >= ENG_GGUF_TYPE_COUNT) return rd_fail(r, "%s: invalid value type %u", ctx, type);
        kv->type = (int)type;
        if ((rc = parse_value(r, kv, ctx))) return rc;
        if (!strcmp(kv->key, "general.alignment")) {
            if (kv->type != ENG_GGUF_TYPE_U32)
                return rd_fail(r, "%s: must be u32, found %s", ctx,
                               eng_gguf_kv_type_name(kv->type));
            uint32_t a = ld_u32(kv->val);
            if (a == 0 || (a & (a - 1)) || a > ENG_GGUF_MAX_ALIGNMENT)
                return rd_fail(r, "%s: alignment %u is not a power of two in [1, %u]", ctx, a,
                               ENG_GGUF_MAX_ALIGNMENT);
            g->alignment = a;
        }
    }
    return 0;
}

/* ---- tensor infos ---- */

static int parse_tensor(eng_gguf *g, gguf_rd *r, int i) {
    eng_gguf_tensor *t = &g->tensors[i];
    char ctx[160];
    const uint8_t *s = NULL;
    uint64_t len = 0, off = 0;
    uint32_t nd = 0, type = 0;
    int rc;
    snprintf(ctx, sizeof ctx, "tensor #%d", i);
    if ((rc = rd_str(r, &s, &len, ENG_GGUF_MAX_KEY_LEN, ctx, "name"))) return rc;
    if ((rc = dup_name(r, s, len, &g->tnames[i], ctx, "name"))) return rc;
    t->name = g->tnames[i];
    g->n_tensors = i + 1;
    snprintf(ctx, sizeof ctx, "tensor #%d '%.100s'", i, t->name);
    if (hash_probe(g->t_hash, g->t_hash_cap, t->name, i, t_name_of, g) >= 0)
        return rd_fail(r, "%s: duplicate tensor name", ctx);
    if ((rc = rd_u32(r, &nd, ctx, "n_dims"))) return rc;
    if (nd < 1 || nd > 4) return rd_fail(r, "%s: n_dims %u is not in [1, 4]", ctx, nd);
    t->n_dims = (int)nd;
    int64_t nel = 1;
    for (int d = 0; d < 4; d++) {
        uint64_t ne = 1;
        if (d < (int)nd && (rc = rd_u64(r, &ne, ctx, "dimension"))) return rc;
        if (ne > (uint64_t)INT64_MAX)
            return rd_fail(r, "%s: ne[%d] = %llu is negative as int64", ctx, d,
                           (unsigned long long)ne);
        t->ne[d] = (int64_t)ne;
        if (ne && nel > INT64_MAX / (int64_t)ne)
            return rd_fail(r, "%s: element count overflows int64 at ne[%d]", ctx, d);
        nel *= (int64_t)ne;
    }
    if ((rc = rd_u32(r, &type, ctx, "type"))) return rc;
    t->type = (int)type;
    int64_t blck;
    size_t bsz;
    if (eng_gguf_type_block(t->type, &blck, &bsz))
        return rd_fail(r, "%s: unsupported tensor type %u", ctx, type);
    if (t->ne[0] % blck)
        return rd_fail(r, "%s: ne[0] = %lld is not a multiple of the %s block size %lld", ctx,
                       (long long)t->ne[0], eng_gguf_type_name(t->type), (long long)blck);
    uint64_t rowb = 0;
    if (eng_gguf_row_bytes(t->type, t->ne[0], &rowb))
        return rd_fail(r, "%s: row size overflows", ctx);
    uint64_t rows = (uint64_t)t->ne[1] * (uint64_t)t->ne[2] * (uint64_t)t->ne[3];
    if (t->ne[0] && rows && rowb > UINT64_MAX / rows)
        return rd_fail(r, "%s: byte size overflows", ctx);
    t->nbytes = rowb * rows;
    if ((rc = rd_u64(r, &off, ctx, "data offset"))) return rc;
    t->offset = off;
    return 0;
}

static int cmp_off(const void *a, const void *b, void *ctx) {
    const eng_gguf *g = ctx;
    uint64_t x = g->tensors[*(const int *)a].offset, y = g->tensors[*(const int *)b].offset;
    return x < y ? -1 : x > y;
}

/* Place every tensor inside the data section; refuse overlaps. */
static int place_tensors(eng_gguf *g, gguf_rd *r) {
    uint64_t avail = g->data_off <= g->size ? g->size - g->data_off : 0;
    int rc = 0;
    for (int i = 0; i < g->n_tensors; i++) {
        eng_gguf_tensor *t = &g->tensors[i];
        if (t->offset % g->alignment)
            return rd_fail(r,
                           "tensor #%d '%.100s': data offset %llu is not a multiple "
                           "of the alignment %u",
                           i, t->name, (unsigned long long)t->offset, g->alignment);
        if (t->offset > avail || t->nbytes > avail - t->offset)
            return rd_fail(r,
                           "tensor #%d '%.100s': data [%llu, +%llu) lies outside the "
                           "data section (%llu bytes at file offset %llu, file %zu bytes)",
                           i, t->name, (unsigned long long)t->offset, (unsigned long long)t->nbytes,
                           (unsigned long long)avail, (unsigned long long)g->data_off, g->size);
        t->data = g->base + g->data_off + t->offset;
    }
    if (g->n_tensors < 2) return 0;
    int *ord = malloc((size_t)g->n_tensors * sizeof *ord);
    if (!ord) {
        snprintf(r->err, r->errlen, "out of memory");
        return ENG_GGUF_ENOMEM;
    }
    for (int i = 0; i < g->n_tensors; i++) ord[i] = i;
    qsort_r(ord, (size_t)g->n_tensors, sizeof *ord, cmp_off, g);
    /* walk in offset order keeping the furthest end seen so far, so an
     * empty tensor in between cannot hide an overlap */
    const eng_gguf_tensor *last = NULL;
    for (int k = 0; k < g->n_tensors; k++) {
        const eng_gguf_tensor *b = &g->tensors[ord[k]];
        if (!b->nbytes) continue;
        if (last && last->offset + last->nbytes > b->offset) {
            rc = rd_fail(r,
                         "tensor '%.100s' data [%llu, +%llu) overlaps tensor '%.100s' "
                         "at %llu",
                         last->name, (unsigned long long)last->offset,
                         (unsigned long long)last->nbytes, b->name, (unsigned long long)b->offset);
            break;
        }
        if (!last || b->offset + b->nbytes > last->offset + last->nbytes) last = b;
    }
    free(ord);
    return rc;
}

static int parse(eng_gguf *g, gguf_rd *r) {
    uint32_t magic = 0, version = 0;
    uint64_t n_tensors = 0, n_kv = 0;
    int rc;
    if (r->size < 4) return rd_fail(r, "file too small for a GGUF header (%zu bytes)", r->size);
    magic = ld_u32(r->p);
    if (magic != GGUF_MAGIC)
        return rd_fail(r, "not a GGUF file (magic 0x%08x, expected 0x%08x \"GGUF\")", magic,
                       GGUF_MAGIC);
    r->pos = 4;
    if ((rc = rd_u32(r, &version, "header", "version"))) return rc;
    if (version == 1) return rd_fail(r, "GGUF version 1 is not supported (need 2 or 3)");
    if ((version & 0xffffu) == 0 && __builtin_bswap32(version) <= 3)
        return rd_fail(r, "big-endian GGUF (version %u byte-swapped) is not supported",
                       __builtin_bswap32(version));
    if (version != 2 && version != 3)
        return rd_fail(r, "unsupported GGUF version %u (need 2 or 3)", version);
    g->version = version;
    if ((rc = rd_u64(r, &n_tensors, "header", "tensor count"))) return rc;
    if ((rc = rd_u64(r, &n_kv, "header", "metadata count"))) return rc;
    if (n_kv > ENG_GGUF_MAX_KV || n_kv > rd_left(r) / 13)
        return rd_fail(r,
                       "header: metadata count %llu exceeds the limit (%u, and %zu "
                       "bytes left hold at most %zu entries)",
                       (unsigned long long)n_kv, ENG_GGUF_MAX_KV, rd_left(r), rd_left(r) / 13);
    if (n_tensors > ENG_GGUF_MAX_TENSORS || n_tensors > rd_left(r) / 25)
        return rd_fail(r,
                       "header: tensor count %llu exceeds the limit (%u, and %zu "
                       "bytes left hold at most %zu tensor infos)",
                       (unsigned long long)n_tensors, ENG_GGUF_MAX_TENSORS, rd_left(r),
                       rd_left(r) / 25);
    g->alignment = ENG_GGUF_DEFAULT_ALIGNMENT;
    if ((rc = parse_kvs(g, r, n_kv))) return rc;
    if (n_tensors > rd_left(r) / 25)
        return rd_fail(r,
                       "header: tensor count %llu cannot fit in the %zu bytes left "
                       "after the metadata",
                       (unsigned long long)n_tensors, rd_left(r));
    g->tensors = calloc((size_t)(n_tensors ? n_tensors : 1), sizeof *g->tensors);
    g->tnames = calloc((size_t)(n_tensors ? n_tensors : 1), sizeof *g->tnames);
    g->t_hash = hash_new((uint32_t)n_tensors, &g->t_hash_cap);
    if (!g->tensors || !g->tnames || !g->t_hash) {
        snprintf(r->err, r->errlen, "out of memory for %llu tensors",
                 (unsigned long long)n_tensors);
        return ENG_GGUF_ENOMEM;
    }
    for (int i = 0; i < (int)n_tensors; i++)
        if ((rc = parse_tensor(g, r, i))) return rc;
    g->data_off = ((uint64_t)r->pos + g->alignment - 1) & ~(uint64_t)(g->alignment - 1);
    return place_tensors(g, r);
}

int eng_gguf_open_mem(const void *buf, size_t len, eng_gguf **out, char *err, size_t errlen) {
    char dummy[1];
    gguf_rd r = {buf, len, 0, err && errlen ? err : dummy, err && errlen ? errlen : 1};
    *out = NULL;
    if (!buf && len) return rd_fail(&r, "NULL buffer");
    eng_gguf *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(r.err, r.errlen, "out of memory");
        return ENG_GGUF_ENOMEM;
    }
    g->base = buf;
    g->size = len;
    int rc = parse(g, &r);
    if (rc) goto err;
    *out = g;
    return 0;
err:
    eng_gguf_close(g);
    return rc;
}

int eng_gguf_open(const char *path, eng_gguf **out, char *err, size_t errlen) {
    struct stat st;
    void *map = NULL;
    int rc = ENG_GGUF_EIO;
    *out = NULL;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        return pl_errf(err, errlen, ENG_GGUF_EIO, "cannot open %s: %s", path, strerror(errno));
    }
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        pl_errf(err, errlen, rc, "%s is not a regular file", path);
        goto err;
    }
    if (st.st_size == 0) {
        pl_errf(err, errlen, rc, "%s is empty (0 bytes)", path);
        rc = ENG_GGUF_EFORMAT;
        goto err;
    }
    map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        map = NULL;
        pl_errf(err, errlen, rc, "cannot mmap %s: %s", path, strerror(errno));
        goto err;
    }
    if ((rc = eng_gguf_open_mem(map, (size_t)st.st_size, out, err, errlen))) goto err;
    (*out)->map = map;
    close(fd);
    return 0;
err:
    if (map) munmap(map, (size_t)st.st_size);
    close(fd);
    return rc;
}

void eng_gguf_close(eng_gguf *g) {
    if (!g) return;
    for (int i = 0; i < g->n_kv; i++) {
        free(g->kv[i].key);
        free(g->kv[i].strs);
    }
    for (int i = 0; i < g->n_tensors; i++) free(g->tnames[i]);
    free(g->kv);
    free(g->tensors);
    free(g->tnames);
    free(g->kv_hash);
    free(g->t_hash);
    if (g->map) munmap(g->map, g->size);
    free(g);
}

/* ---- queries ---- */

uint32_t eng_gguf_version(const eng_gguf *g) { return g->version; }
uint32_t eng_gguf_alignment(const eng_gguf *g) { return g->alignment; }
uint64_t eng_gguf_data_offset(const eng_gguf *g) { return g->data_off; }
uint64_t eng_gguf_file_size(const eng_gguf *g) { return g->size; }
int eng_gguf_n_kv(const eng_gguf *g) { return g->n_kv; }
int eng_gguf_n_tensors(const eng_gguf *g) { return g->n_tensors; }

const char *eng_gguf_kv_key(const eng_gguf *g, int i) {
    return i >= 0 && i < g->n_kv ? g->kv[i].key : NULL;
}

int eng_gguf_kv_type(const eng_gguf *g, int i) {
    return i >= 0 && i < g->n_kv ? g->kv[i].type : -1;
}

int eng_gguf_find(const eng_gguf *g, const char *key) {
    if (!key || !g->kv_hash) return -1;
    int i = hash_probe(g->kv_hash, g->kv_hash_cap, key, -1, kv_name_of, g);
    return i;
}

int eng_gguf_kv_value(const eng_gguf *g, int i, eng_gguf_value *out) {
    if (i < 0 || i >= g->n_kv) return ENG_GGUF_ENOTFOUND;
    const gguf_kv *kv = &g->kv[i];
    out->type = kv->type;
    out->arr_type = kv->arr_type;
    out->n = kv->n;
    out->data = kv->val;
    return 0;
}

int eng_gguf_kv_arr_str(const eng_gguf *g, int i, uint64_t j, const char **s, size_t *len) {
    if (i < 0 || i >= g->n_kv) return ENG_GGUF_ENOTFOUND;
    const gguf_kv *kv = &g->kv[i];
    if (kv->type != ENG_GGUF_TYPE_ARR || kv->arr_type != ENG_GGUF_TYPE_STR || j >= kv->n)
        return ENG_GGUF_ETYPE;
    *len = (size_t)ld_u64(kv->strs[j]);
    *s = (const char *)kv->strs[j] + 8;
    return 0;
}

/* Integer value of a scalar of any integer type (or bool) as int64 plus a
 * flag for u64 values above INT64_MAX. */
static int scalar_int(int type, const uint8_t *p, int64_t *v, uint64_t *uv, int *big) {
    *big = 0;
    switch (type) {
    case ENG_GGUF_TYPE_U8:
    case ENG_GGUF_TYPE_BOOL: *v = p[0]; break;
    case ENG_GGUF_TYPE_I8: *v = (int8_t)p[0]; break;
    case ENG_GGUF_TYPE_U16: *v = (uint16_t)(p[0] | p[1] << 8); break;
    case ENG_GGUF_TYPE_I16: *v = (int16_t)(uint16_t)(p[0] | p[1] << 8); break;
    case ENG_GGUF_TYPE_U32: *v = ld_u32(p); break;
    case ENG_GGUF_TYPE_I32: *v = (int32_t)ld_u32(p); break;
    case ENG_GGUF_TYPE_I64: *v = (int64_t)ld_u64(p); break;
    case ENG_GGUF_TYPE_U64:
        *uv = ld_u64(p);
        if (*uv > (uint64_t)INT64_MAX) *big = 1;
        *v = (int64_t)(*uv & (uint64_t)INT64_MAX);
        return 0;
    default: return ENG_GGUF_ETYPE;
    }
    *uv = (uint64_t)*v;
    return 0;
}

static const gguf_kv *kv_by_key(const eng_gguf *g, const char *key) {
    int i = eng_gguf_find(g, key);
    return i < 0 ? NULL : &g->kv[i];
}

int eng_gguf_get_i64(const eng_gguf *g, const char *key, int64_t *out) {
    const gguf_kv *kv = kv_by_key(g, key);
    int64_t v;
    uint64_t uv;
    int big;
    if (!kv) return ENG_GGUF_ENOTFOUND;
    if (scalar_int(kv->type, kv->val, &v, &uv, &big) || big) return ENG_GGUF_ETYPE;
    *out = v;
    return 0;
}

int eng_gguf_get_u32(const eng_gguf *g, const char *key, uint32_t *out) {
    const gguf_kv *kv = kv_by_key(g, key);
    int64_t v;
    uint64_t uv;
    int big;
    if (!kv) return ENG_GGUF_ENOTFOUND;
    if (scalar_int(kv->type, kv->val, &v, &uv, &big) || big || v < 0 || v > UINT32_MAX)
        return ENG_GGUF_ETYPE;
    *out = (uint32_t)v;
    return 0;
}

int eng_gguf_get_f32(const eng_gguf *g, const char *key, float *out) {
    const gguf_kv *kv = kv_by_key(g, key);
    int64_t v;
    uint64_t uv;
    int big;
    if (!kv) return ENG_GGUF_ENOTFOUND;
    if (kv->type == ENG_GGUF_TYPE_F32) {
        uint32_t b = ld_u32(kv->val);
        memcpy(out, &b, 4);
    } else if (kv->type == ENG_GGUF_TYPE_F64) {
        uint64_t b = ld_u64(kv->val);
        double d;
        memcpy(&d, &b, 8);
        *out = (float)d;
    } else if (kv->type != ENG_GGUF_TYPE_BOOL && !scalar_int(kv->type, kv->val, &v, &uv, &big)) {
        *out = big ? (float)uv : (float)v;
    } else {
        return ENG_GGUF_ETYPE;
    }
    return 0;
}

int eng_gguf_get_bool(const eng_gguf *g, const char *key, bool *out) {
    const gguf_kv *kv = kv_by_key(g, key);
    if (!kv) return ENG_GGUF_ENOTFOUND;
    if (kv->type != ENG_GGUF_TYPE_BOOL) return ENG_GGUF_ETYPE;
    *out = kv->val[0] != 0;
    return 0;
}

int eng_gguf_get_str(const eng_gguf *g, const char *key, const char **s, size_t *len) {
    const gguf_kv *kv = kv_by_key(g, key);
    if (!kv) return ENG_GGUF_ENOTFOUND;
    if (kv->type != ENG_GGUF_TYPE_STR) return ENG_GGUF_ETYPE;
    *s = (const char *)kv->val;
    *len = (size_t)kv->n;
    return 0;
}

int eng_gguf_get_arr(const eng_gguf *g, const char *key, int *elem_type, uint64_t *n,
                     const void **data) {
    const gguf_kv *kv = kv_by_key(g, key);
    if (!kv) return ENG_GGUF_ENOTFOUND;
    if (kv->type != ENG_GGUF_TYPE_ARR) return ENG_GGUF_ETYPE;
    *elem_type = kv->arr_type;
    *n = kv->n;
    *data = kv->arr_type == ENG_GGUF_TYPE_STR ? NULL : kv->val;
    return 0;
}

int eng_gguf_get_arr_str(const eng_gguf *g, const char *key, uint64_t i, const char **s,
                         size_t *len) {
    return eng_gguf_kv_arr_str(g, eng_gguf_find(g, key), i, s, len);
}

int eng_gguf_arr_get_i64(int elem_type, const void *data, uint64_t n, uint64_t i, int64_t *out) {
    size_t esz = kv_scalar_size(elem_type);
    int64_t v;
    uint64_t uv;
    int big;
    if (!data || i >= n || !esz || elem_type == ENG_GGUF_TYPE_F32 || elem_type == ENG_GGUF_TYPE_F64)
        return ENG_GGUF_ETYPE;
    if (scalar_int(elem_type, (const uint8_t *)data + i * esz, &v, &uv, &big) || big)
        return ENG_GGUF_ETYPE;
    *out = v;
    return 0;
}

const eng_gguf_tensor *eng_gguf_tensor_at(const eng_gguf *g, int i) {
    return i >= 0 && i < g->n_tensors ? &g->tensors[i] : NULL;
}

const eng_gguf_tensor *eng_gguf_find_tensor(const eng_gguf *g, const char *name) {
    if (!name || !g->t_hash) return NULL;
    int i = hash_probe(g->t_hash, g->t_hash_cap, name, -1, t_name_of, g);
    return i < 0 ? NULL : &g->tensors[i];
}
