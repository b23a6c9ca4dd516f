/*
 * eng_gguf.h -- read-only GGUF model files (versions 2 and 3).
 *
 * Purpose.  Every model parley runs arrives as a GGUF file: a header of
 * typed key/value metadata, a table of tensor descriptions, and an aligned
 * data section holding the tensor bytes.  This reader parses the header,
 * validates it completely, and hands out pointers into the file for the
 * tensor data, so a 1B model "loads" by mmap with no copy.
 *
 * File layout (all integers little-endian):
 *   u32 magic "GGUF" | u32 version (2 or 3) | u64 n_tensors | u64 n_kv
 *   n_kv x { string key | u32 value type | value }
 *   n_tensors x { string name | u32 n_dims | u64 ne[n_dims] | u32 ggml type
 *                 | u64 offset (relative to the data section) }
 *   padding to general.alignment (default 32) | data section
 *   string = u64 length + bytes (no NUL); array = u32 elem type + u64 n + elems
 * Version 1 (32-bit counts) and big-endian files are refused; arrays of
 * arrays are refused (ggml's own reader refuses them too).
 *
 * Validation (a hostile file gets a clear error naming key/tensor, field and
 * limit, never a crash or out-of-bounds read): every length, count and
 * offset is checked against the bytes remaining before it is used; counts
 * are capped (ENG_GGUF_MAX_*) and also bounded by the file size, so no
 * allocation is larger than a small multiple of the file; duplicate keys and
 * duplicate tensor names are refused; general.alignment must be a power of
 * two <= 1 MiB; tensor dims are >= 0 with a product that fits in int64, ne[0]
 * is a multiple of the type's block size, byte sizes are computed with
 * overflow checks; every tensor's data lies inside the data section, is
 * aligned, and does not overlap another tensor.
 *
 * Data layout in memory: the handle keeps the mapping (or the caller's
 * buffer), a table of keys (NUL-terminated copies) with pointers to their
 * values inside the file, an offset table for every string array (random
 * access to the i-th string), and the tensor table with NUL-terminated names.
 *
 * Threading: a handle is immutable after open; any number of threads may
 * read it concurrently.  Ownership: the handle owns its mapping
 * (eng_gguf_open) or borrows the caller's buffer (eng_gguf_open_mem, which
 * must outlive the handle); pointers returned by getters live as long as the
 * handle.
 *
 * Failure behaviour: open functions return 0 or a negative ENG_GGUF_E* code
 * and write a one-line message to err (errlen may be 0); getters return 0 or
 * ENG_GGUF_ENOTFOUND / ENG_GGUF_ETYPE and never write on failure.
 */
#ifndef ENG_GGUF_H
#define ENG_GGUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Error codes (negative). */
#define ENG_GGUF_EIO (-103)       /* open/stat/mmap failed */
#define ENG_GGUF_EFORMAT (-110)   /* malformed, truncated or unsupported file */
#define ENG_GGUF_ENOMEM (-102)    /* allocation failed */
#define ENG_GGUF_ENOTFOUND (-105) /* getter: key missing */
#define ENG_GGUF_ETYPE (-106)     /* getter: wrong type or value does not fit */
#define ENG_GGUF_EINVAL (-101)    /* bad argument (unsupported tensor type...) */

/* Limits that stop allocation bombs (in addition to the file-size bound). */
#define ENG_GGUF_MAX_KV (1u << 20)        /* metadata entries */
#define ENG_GGUF_MAX_TENSORS (1u << 20)   /* tensor infos */
#define ENG_GGUF_MAX_KEY_LEN 65535u       /* key / tensor name bytes */
#define ENG_GGUF_MAX_STR_LEN (1ull << 30) /* one string value */
#define ENG_GGUF_MAX_ARR_LEN (1ull << 30) /* elements of one array */
#define ENG_GGUF_MAX_ALIGNMENT (1u << 20) /* general.alignment */
#define ENG_GGUF_DEFAULT_ALIGNMENT 32u

/* Metadata value types (GGUF's numbering). */
enum {
    ENG_GGUF_TYPE_U8 = 0,
    ENG_GGUF_TYPE_I8 = 1,
    ENG_GGUF_TYPE_U16 = 2,
    ENG_GGUF_TYPE_I16 = 3,
    ENG_GGUF_TYPE_U32 = 4,
    ENG_GGUF_TYPE_I32 = 5,
    ENG_GGUF_TYPE_F32 = 6,
    ENG_GGUF_TYPE_BOOL = 7,
    ENG_GGUF_TYPE_STR = 8,
    ENG_GGUF_TYPE_ARR = 9,
    ENG_GGUF_TYPE_U64 = 10,
    ENG_GGUF_TYPE_I64 = 11,
    ENG_GGUF_TYPE_F64 = 12,
    ENG_GGUF_TYPE_COUNT = 13
};

/* Tensor element types (GGML's numbering).  Sizes are known for all listed
 * (Q8_1 = 9 and the other IQ types are refused); eng_gguf_row_to_f32
 * converts F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, IQ4_NL
 * and IQ4_XS (eng_gguf_type_convertible; block layouts in gguf_quant.c). */
enum {
    ENG_GGML_TYPE_F32 = 0,
    ENG_GGML_TYPE_F16 = 1,
    ENG_GGML_TYPE_Q4_0 = 2,
    ENG_GGML_TYPE_Q4_1 = 3,
    ENG_GGML_TYPE_Q5_0 = 6,
    ENG_GGML_TYPE_Q5_1 = 7,
    ENG_GGML_TYPE_Q8_0 = 8,
    ENG_GGML_TYPE_Q2_K = 10,
    ENG_GGML_TYPE_Q3_K = 11,
    ENG_GGML_TYPE_Q4_K = 12,
    ENG_GGML_TYPE_Q5_K = 13,
    ENG_GGML_TYPE_Q6_K = 14,
    ENG_GGML_TYPE_Q8_K = 15,
    ENG_GGML_TYPE_IQ4_NL = 20,
    ENG_GGML_TYPE_IQ4_XS = 23,
    ENG_GGML_TYPE_I8 = 24,
    ENG_GGML_TYPE_I16 = 25,
    ENG_GGML_TYPE_I32 = 26,
    ENG_GGML_TYPE_I64 = 27,
    ENG_GGML_TYPE_F64 = 28,
    ENG_GGML_TYPE_BF16 = 30
};

/* Q8_0: blocks of 32 values, each an f16 scale d followed by 32 int8 q;
 * value = d * q. */
#define ENG_Q8_0_BLOCK 32
#define ENG_Q8_0_BYTES 34

typedef struct eng_gguf eng_gguf; /* opaque, read-only after open */

/* Open a file: mmap (read-only, private) the whole file and validate it.
 * Returns 0 and *out, or EIO/EFORMAT/ENOMEM with a message. */
int eng_gguf_open(const char *path, eng_gguf **out, char *err, size_t errlen);

/* Same over a caller's buffer (no copy; buf must outlive the handle). */
int eng_gguf_open_mem(const void *buf, size_t len, eng_gguf **out, char *err, size_t errlen);

/* Release the handle and its mapping.  NULL is allowed. */
void eng_gguf_close(eng_gguf *g);

/* File facts. */
uint32_t eng_gguf_version(const eng_gguf *g);     /* 2 or 3 */
uint32_t eng_gguf_alignment(const eng_gguf *g);   /* general.alignment or 32 */
uint64_t eng_gguf_data_offset(const eng_gguf *g); /* start of the data section */
uint64_t eng_gguf_file_size(const eng_gguf *g);   /* bytes of file / buffer */

/* ---- metadata ---- */

int eng_gguf_n_kv(const eng_gguf *g);
/* Key of entry i (NUL-terminated copy), NULL when i is out of range. */
const char *eng_gguf_kv_key(const eng_gguf *g, int i);
/* Value type of entry i (ENG_GGUF_TYPE_*), -1 when out of range. */
int eng_gguf_kv_type(const eng_gguf *g, int i);
/* Index of key, or -1. */
int eng_gguf_find(const eng_gguf *g, const char *key);

/* A metadata value by index, for generic printing (inspect). */
typedef struct eng_gguf_value {
    int type;         /* ENG_GGUF_TYPE_* */
    int arr_type;     /* element type when type == ARR, else -1 */
    uint64_t n;       /* ARR: element count; STR: byte length; else 1 */
    const void *data; /* raw little-endian value / first element / string
                        * bytes, pointing into the file (for string arrays:
                        * use eng_gguf_kv_arr_str) */
} eng_gguf_value;
int eng_gguf_kv_value(const eng_gguf *g, int i, eng_gguf_value *out);
/* j-th string of the string array at entry i. */
int eng_gguf_kv_arr_str(const eng_gguf *g, int i, uint64_t j, const char **s, size_t *len);

/* Typed getters by key.  Integer getters accept any integer type (and
 * bool) whose value fits the target; the float getter accepts f32/f64 and
 * integers.  Return 0, ENG_GGUF_ENOTFOUND or ENG_GGUF_ETYPE. */
int eng_gguf_get_u32(const eng_gguf *g, const char *key, uint32_t *out);
int eng_gguf_get_i64(const eng_gguf *g, const char *key, int64_t *out);
int eng_gguf_get_f32(const eng_gguf *g, const char *key, float *out);
int eng_gguf_get_bool(const eng_gguf *g, const char *key, bool *out);
/* String value: not NUL-terminated in general; points into the file. */
int eng_gguf_get_str(const eng_gguf *g, const char *key, const char **s, size_t *len);
/* Array: element type, count and raw little-endian elements (numeric and
 * bool arrays; for string arrays data is NULL, use eng_gguf_get_arr_str). */
int eng_gguf_get_arr(const eng_gguf *g, const char *key, int *elem_type, uint64_t *n,
                     const void **data);
/* i-th string of a string array. */
int eng_gguf_get_arr_str(const eng_gguf *g, const char *key, uint64_t i, const char **s,
                         size_t *len);
/* Element i of an integer (or bool) array as int64 (ETYPE when not an
 * integer array or a u64 element above INT64_MAX). */
int eng_gguf_arr_get_i64(int elem_type, const void *data, uint64_t n, uint64_t i, int64_t *out);

/* ---- tensors ---- */

typedef struct eng_gguf_tensor {
    const char *name; /* NUL-terminated copy */
    int n_dims;       /* 1..4 */
    int64_t ne[4];    /* GGUF order: ne[0] is the contiguous (innermost)
                       * dim; unused dims are 1 */
    int type;         /* ENG_GGML_TYPE_* */
    uint64_t offset;  /* offset of the data within the data section */
    uint64_t nbytes;  /* bytes of data */
    const void *data; /* points into the mapping, bounds-checked */
} eng_gguf_tensor;

int eng_gguf_n_tensors(const eng_gguf *g);
/* Tensor i (file order), NULL when out of range. */
const eng_gguf_tensor *eng_gguf_tensor_at(const eng_gguf *g, int i);
/* Tensor by name, NULL when absent. */
const eng_gguf_tensor *eng_gguf_find_tensor(const eng_gguf *g, const char *name);

/* ---- types and conversion ---- */

/* Name of a GGML tensor type ("f32", "q8_0"...), "?" when unknown. */
const char *eng_gguf_type_name(int ggml_type);
/* Name of a metadata value type ("u32", "str", "arr"...), "?" if unknown. */
const char *eng_gguf_kv_type_name(int kv_type);
/* Block size (values) and bytes per block of a tensor type; 0 / ok, or
 * ENG_GGUF_EINVAL for an unknown type. */
int eng_gguf_type_block(int ggml_type, int64_t *blck, size_t *bytes);
/* Bytes of n values of a type, with overflow and block-multiple checks:
 * 0, or ENG_GGUF_EINVAL (unknown type, n not a block multiple, overflow). */
int eng_gguf_row_bytes(int ggml_type, int64_t n, uint64_t *out);

/* Convert n values of a row (any eng_gguf_type_convertible type; n a whole
 * number of blocks) to float.  Returns 0 or ENG_GGUF_EINVAL (unsupported
 * type, partial block, a non-finite fp16 block scale). */
int eng_gguf_row_to_f32(int type, const void *src, int64_t n, float *dst);
/* The block formats of eng_gguf_row_to_f32 (gguf_quant.c), same contract. */
int eng_gguf_quant_to_f32(int type, const void *src, int64_t n, float *dst);
/* Q8_0, Q4_0, Q5_0, IQ4_NL: the int8 codes q[n] and the fp16 block scales
 * bscale[n/32] (as float) with value = bscale * code exactly (Q8_0's -128
 * clamped to -127).  0, or ENG_GGUF_EINVAL (other type, partial block,
 * non-finite scale). */
int eng_gguf_quant_codes(int type, const void *src, int64_t n, int8_t *q, float *bscale);
/* The 16 int8 values every eng_gguf_quant_codes code of a Q4_0 (-8..7) or
 * IQ4_NL (its code book) tensor is one of; NULL for other types. */
const int8_t *eng_gguf_quant_lut(int type);
/* Q4_K as stored, for n values (a multiple of 256): codes u[n] in 0..15,
 * per 32 values the 6-bit scale sc[n/32] and min mn[n/32], per 256 values
 * d[n/256] and dmin[n/256] (fp16, as float): value = d*sc*u - dmin*mn
 * (eng_gguf_row_to_f32 computes exactly (d*sc)*u - dmin*mn in float).
 * 0, or ENG_GGUF_EINVAL (n not a multiple of 256, non-finite d/dmin). */
int eng_gguf_q4k_codes(const void *src, int64_t n, uint8_t *u, uint8_t *sc, uint8_t *mn, float *d,
                       float *dmin);
/* 1 when eng_gguf_row_to_f32 converts the type, else 0. */
int eng_gguf_type_convertible(int ggml_type);
/* The convertible types' names, for error messages ("f32, f16, ..."). */
#define ENG_GGUF_CONVERTIBLE_NAMES \
    "f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q2_K, q3_K, q4_K, q5_K, q6_K, iq4_nl, iq4_xs"

/* IEEE half / bfloat16 <-> float, exact (subnormals, inf, nan kept; the
 * float -> half/bf16 direction rounds to nearest even, nan stays nan). */
float eng_f16_to_f32(uint16_t h);
uint16_t eng_f32_to_f16(float f);
float eng_bf16_to_f32(uint16_t h);
uint16_t eng_f32_to_bf16(float f);

#endif /* ENG_GGUF_H */
