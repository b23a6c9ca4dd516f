/*
 * gguf_dump.c -- test helper for tests/py/test_gguf_compat.py.
 *
 *   gguf_dump FILE          print FILE as parley's reader sees it, as JSON:
 *                           version, alignment, every key with its type and
 *                           full value, every tensor with shape, type,
 *                           offset, size, an FNV-1a 64 digest of its bytes
 *                           and (every type eng_gguf_row_to_f32 converts,
 *                           <= 65536 values, row 0 convertible) the
 *                           values converted by eng_gguf_row_to_f32.
 *   gguf_dump --write FILE  write a fixed file with parley's writer: every
 *                           value type, arrays, alignment 16 and one tensor
 *                           of each supported type (contents documented in
 *                           the Python test that checks them with gguf-py).
 * Exit 0 on success, 1 with a message on stderr otherwise.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_gguf.h"
#include "eng_gguf_write.h"
#include "pl_hash.h"

static void js_str(const char *s, size_t n) {
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') printf("\\%c", c);
        else if (c < 0x20) printf("\\u%04x", c);
        else putchar(c);
    }
    putchar('"');
}

static void js_double(double v) {
    if (isnan(v)) printf("\"nan\"");
    else if (isinf(v)) printf(v > 0 ? "\"inf\"" : "\"-inf\"");
    else printf("%.17g", v);
}

static void js_scalar(int t, const uint8_t *p) {
    uint64_t u = 0;
    size_t sz = t == ENG_GGUF_TYPE_U8 || t == ENG_GGUF_TYPE_I8 || t == ENG_GGUF_TYPE_BOOL    ? 1
                : t == ENG_GGUF_TYPE_U16 || t == ENG_GGUF_TYPE_I16                           ? 2
                : t == ENG_GGUF_TYPE_U32 || t == ENG_GGUF_TYPE_I32 || t == ENG_GGUF_TYPE_F32 ? 4
                                                                                             : 8;
    for (int i = (int)sz - 1; i >= 0; i--) u = u << 8 | p[i];
    float f;
    double d;
    switch (t) {
    case ENG_GGUF_TYPE_I8: printf("%d", (int8_t)u); break;
    case ENG_GGUF_TYPE_I16: printf("%d", (int16_t)u); break;
    case ENG_GGUF_TYPE_I32: printf("%d", (int32_t)u); break;
    case ENG_GGUF_TYPE_I64: printf("%lld", (long long)(int64_t)u); break;
    case ENG_GGUF_TYPE_BOOL: printf(u ? "true" : "false"); break;
    case ENG_GGUF_TYPE_F32: {
        uint32_t b = (uint32_t)u;
        memcpy(&f, &b, 4);
        js_double(f);
        break;
    }
    case ENG_GGUF_TYPE_F64:
        memcpy(&d, &u, 8);
        js_double(d);
        break;
    default: printf("%llu", (unsigned long long)u);
    }
}

static size_t esz(int t) {
    static const size_t s[ENG_GGUF_TYPE_COUNT] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    return s[t];
}

static int dump(const char *path) {
    eng_gguf *g;
    char err[512];
    if (eng_gguf_open(path, &g, err, sizeof err)) {
        fprintf(stderr, "gguf_dump: %s\n", err);
        return 1;
    }
    printf("{\"version\": %u, \"alignment\": %u, \"data_offset\": %llu, \"kv\": [",
           eng_gguf_version(g), eng_gguf_alignment(g), (unsigned long long)eng_gguf_data_offset(g));
    for (int i = 0; i < eng_gguf_n_kv(g); i++) {
        eng_gguf_value v;
        eng_gguf_kv_value(g, i, &v);
        const char *k = eng_gguf_kv_key(g, i);
        printf("%s\n {\"key\": ", i ? "," : "");
        js_str(k, strlen(k));
        printf(", \"type\": %d, \"arr_type\": %d, \"value\": ", v.type, v.arr_type);
        if (v.type == ENG_GGUF_TYPE_STR) js_str(v.data, (size_t)v.n);
        else if (v.type != ENG_GGUF_TYPE_ARR) js_scalar(v.type, v.data);
        else {
            putchar('[');
            for (uint64_t j = 0; j < v.n; j++) {
                if (j) putchar(',');
                if (v.arr_type == ENG_GGUF_TYPE_STR) {
                    const char *s;
                    size_t len;
                    eng_gguf_kv_arr_str(g, i, j, &s, &len);
                    js_str(s, len);
                } else {
                    js_scalar(v.arr_type, (const uint8_t *)v.data + j * esz(v.arr_type));
                }
            }
            putchar(']');
        }
        putchar('}');
    }
    printf("],\n\"tensors\": [");
    for (int i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        uint64_t h = pl_fnv1a64(PL_FNV64_SEED, t->data, (size_t)t->nbytes), nel = 1;
        printf("%s\n {\"name\": ", i ? "," : "");
        js_str(t->name, strlen(t->name));
        printf(", \"type\": %d, \"ne\": [", t->type);
        for (int d = 0; d < t->n_dims; d++) {
            printf("%s%lld", d ? ", " : "", (long long)t->ne[d]);
            nel *= (uint64_t)t->ne[d];
        }
        printf("], \"offset\": %llu, \"nbytes\": %llu, \"fnv\": \"%016llx\"",
               (unsigned long long)t->offset, (unsigned long long)t->nbytes, (unsigned long long)h);
        uint64_t rowb;
        float *row = malloc((size_t)t->ne[0] * sizeof *row + 4);
        if (nel <= 65536 && row && !eng_gguf_row_bytes(t->type, t->ne[0], &rowb) &&
            !eng_gguf_row_to_f32(t->type, t->data, t->ne[0], row)) {
            printf(", \"f32\": [");
            for (uint64_t r = 0; r < nel / (uint64_t)t->ne[0]; r++) {
                eng_gguf_row_to_f32(t->type, (const uint8_t *)t->data + r * rowb, t->ne[0], row);
                for (int64_t j = 0; j < t->ne[0]; j++) {
                    if (r || j) putchar(',');
                    js_double(row[j]);
                }
            }
            putchar(']');
        }
        free(row);
        putchar('}');
    }
    printf("]}\n");
    eng_gguf_close(g);
    return 0;
}

static int write_fixed(const char *path) {
    eng_gguf_writer *w;
    char err[512];
    if (eng_gguf_writer_new(16, &w)) return 1;
    uint8_t u8 = 255;
    int8_t i8 = -128;
    uint16_t u16 = 65535;
    int16_t i16 = -32768;
    eng_gguf_writer_add_scalar(w, "w.u8", ENG_GGUF_TYPE_U8, &u8);
    eng_gguf_writer_add_scalar(w, "w.i8", ENG_GGUF_TYPE_I8, &i8);
    eng_gguf_writer_add_scalar(w, "w.u16", ENG_GGUF_TYPE_U16, &u16);
    eng_gguf_writer_add_scalar(w, "w.i16", ENG_GGUF_TYPE_I16, &i16);
    eng_gguf_writer_add_u32(w, "w.u32", 4294967295u);
    eng_gguf_writer_add_i32(w, "w.i32", INT32_MIN);
    eng_gguf_writer_add_f32(w, "w.f32", 1.5f);
    eng_gguf_writer_add_bool(w, "w.bool", true);
    eng_gguf_writer_add_str(w, "w.str", "h\xc3\xa9llo \xe2\x9c\x93");
    eng_gguf_writer_add_u64(w, "w.u64", UINT64_MAX);
    eng_gguf_writer_add_i64(w, "w.i64", INT64_MIN);
    eng_gguf_writer_add_f64(w, "w.f64", -2.25);
    eng_gguf_writer_add_arr(w, "w.arr.u8", ENG_GGUF_TYPE_U8, (uint8_t[3]){0, 1, 255}, 3);
    eng_gguf_writer_add_arr(w, "w.arr.i16", ENG_GGUF_TYPE_I16, (int16_t[2]){-1, 2}, 2);
    eng_gguf_writer_add_arr(w, "w.arr.f32", ENG_GGUF_TYPE_F32, (float[2]){0.5f, -1.25f}, 2);
    eng_gguf_writer_add_arr(w, "w.arr.f64", ENG_GGUF_TYPE_F64, (double[1]){1e300}, 1);
    eng_gguf_writer_add_arr(w, "w.arr.bool", ENG_GGUF_TYPE_BOOL, (uint8_t[2]){1, 0}, 2);
    eng_gguf_writer_add_arr(w, "w.arr.u64", ENG_GGUF_TYPE_U64,
                            (uint64_t[2]){1, 9223372036854775808ull}, 2);
    eng_gguf_writer_add_arr(w, "w.arr.empty", ENG_GGUF_TYPE_I32, NULL, 0);
    const char *strs[3] = {"a", "", "\xc3\xbc"};
    eng_gguf_writer_add_arr_str(w, "w.arr.str", strs, NULL, 3);
    eng_gguf_writer_add_tensor(w, "t.f32", ENG_GGML_TYPE_F32, 2, (int64_t[]){4, 3});
    eng_gguf_writer_add_tensor(w, "t.f16", ENG_GGML_TYPE_F16, 2, (int64_t[]){8, 2});
    eng_gguf_writer_add_tensor(w, "t.bf16", ENG_GGML_TYPE_BF16, 1, (int64_t[]){6});
    eng_gguf_writer_add_tensor(w, "t.q8_0", ENG_GGML_TYPE_Q8_0, 2, (int64_t[]){64, 2});
    FILE *f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "gguf_dump: cannot create %s\n", path);
        return 1;
    }
    eng_gguf_writer_begin(w, f);
    for (int i = 0; i < 12; i++) eng_gguf_writer_write(w, &(float){(float)i * 0.5f - 1.0f}, 4);
    for (int i = 0; i < 16; i++)
        eng_gguf_writer_write(w, &(uint16_t){eng_f32_to_f16((float)(i - 8) * 0.25f)}, 2);
    for (int i = 0; i < 6; i++)
        eng_gguf_writer_write(w, &(uint16_t){eng_f32_to_bf16((float)i * -1.5f)}, 2);
    for (int b = 0; b < 4; b++) { /* block b: d = 2^-b, q_j = (37 * (32b + j)) % 255 - 127 */
        uint8_t blk[34];
        uint16_t d = eng_f32_to_f16(ldexpf(1.0f, -b));
        blk[0] = (uint8_t)d;
        blk[1] = (uint8_t)(d >> 8);
        for (int j = 0; j < 32; j++)
            blk[2 + j] = (uint8_t)(int8_t)((37 * (32 * b + j)) % 255 - 127);
        eng_gguf_writer_write(w, blk, sizeof blk);
    }
    int rc = eng_gguf_writer_finish(w, err, sizeof err);
    eng_gguf_writer_free(w);
    if (fclose(f) || rc) {
        fprintf(stderr, "gguf_dump: %s\n", rc ? err : "write failed");
        return 1;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write")) return write_fixed(argv[2]);
    if (argc == 2) return dump(argv[1]);
    fprintf(stderr, "usage: gguf_dump FILE | gguf_dump --write FILE\n");
    return 2;
}
