/*
 * test_gguf.c -- unit tests of the GGUF reader and writer: a writer/reader
 * round trip over every value type and the four tensor types, truncation at
 * every byte, bit flips and random mutations of a valid header, a catalogue
 * of hostile headers (each must fail with a message naming the problem),
 * file open errors, and writer misuse.
 */
#define PTEST_MAIN
#include "ptest.h"

#include <unistd.h>

#include "gguf_exercise.h"
#include "gguf_testutil.h"

/* A small valid file: a few keys (incl. a string array) and two tensors. */
static uint8_t *small_file(size_t *len, uint64_t *data_end) {
    eng_gguf_writer *w;
    gt_mem m;
    const char *strs[3] = {"a", "", "xyz"};
    float f[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    uint8_t q[34] = {0x00, 0x3c}; /* d = 1.0 */
    PT_EQ_INT(eng_gguf_writer_new(0, &w), 0);
    eng_gguf_writer_add_str(w, "general.architecture", "llama");
    eng_gguf_writer_add_u32(w, "llama.block_count", 1);
    eng_gguf_writer_add_arr_str(w, "tok", strs, NULL, 3);
    eng_gguf_writer_add_tensor(w, "a", ENG_GGML_TYPE_F32, 1, (int64_t[]){8});
    eng_gguf_writer_add_tensor(w, "b", ENG_GGML_TYPE_Q8_0, 1, (int64_t[]){32});
    gt_mem_begin(&m);
    PT_EQ_INT(eng_gguf_writer_begin(w, m.f), 0);
    eng_gguf_writer_write(w, f, sizeof f);
    for (int i = 0; i < 32; i++) q[2 + i] = (uint8_t)(i - 16);
    eng_gguf_writer_write(w, q, sizeof q);
    char err[256];
    PT_EQ_INT(eng_gguf_writer_finish(w, err, sizeof err), 0);
    eng_gguf_writer_free(w);
    gt_mem_end(&m);
    eng_gguf *g;
    PT_EQ_INT(eng_gguf_open_mem(m.buf, m.n, &g, err, sizeof err), 0);
    *data_end = eng_gguf_data_offset(g) + eng_gguf_tensor_at(g, 1)->offset + 34;
    eng_gguf_close(g);
    *len = m.n;
    return (uint8_t *)m.buf;
}

PT_TEST(roundtrip_all_types) {
    eng_gguf_writer *w;
    gt_mem m;
    char err[256];
    PT_EQ_INT(eng_gguf_writer_new(64, &w), 0);
    uint8_t u8 = 200;
    int8_t i8 = -100;
    uint16_t u16 = 60000;
    int16_t i16 = -30000;
    double f64 = 3.141592653589793;
    eng_gguf_writer_add_scalar(w, "t.u8", ENG_GGUF_TYPE_U8, &u8);
    eng_gguf_writer_add_scalar(w, "t.i8", ENG_GGUF_TYPE_I8, &i8);
    eng_gguf_writer_add_scalar(w, "t.u16", ENG_GGUF_TYPE_U16, &u16);
    eng_gguf_writer_add_scalar(w, "t.i16", ENG_GGUF_TYPE_I16, &i16);
    eng_gguf_writer_add_u32(w, "t.u32", 4000000000u);
    eng_gguf_writer_add_i32(w, "t.i32", -2000000000);
    eng_gguf_writer_add_f32(w, "t.f32", 0.5f);
    eng_gguf_writer_add_bool(w, "t.bool", true);
    eng_gguf_writer_add_str(w, "t.str", "h\xc3\xa9llo");
    eng_gguf_writer_add_u64(w, "t.u64", 18000000000000000000ull);
    eng_gguf_writer_add_i64(w, "t.i64", -9000000000000000000ll);
    eng_gguf_writer_add_f64(w, "t.f64", f64);
    int32_t ai[4] = {1, -2, 3, -4};
    uint8_t ab[3] = {1, 0, 1};
    const char *as[4] = {"zero", "", "\xe2\x82\xac", "three"};
    eng_gguf_writer_add_arr(w, "a.i32", ENG_GGUF_TYPE_I32, ai, 4);
    eng_gguf_writer_add_arr(w, "a.bool", ENG_GGUF_TYPE_BOOL, ab, 3);
    eng_gguf_writer_add_arr(w, "a.empty", ENG_GGUF_TYPE_F32, NULL, 0);
    eng_gguf_writer_add_arr_str(w, "a.str", as, NULL, 4);
    float f32d[24];
    uint16_t f16d[32], bf16d[4];
    uint8_t q8[2 * 2 * 34];
    for (int i = 0; i < 24; i++) f32d[i] = (float)i * 0.25f - 3.0f;
    for (int i = 0; i < 32; i++) f16d[i] = eng_f32_to_f16((float)i - 10.5f);
    for (int i = 0; i < 4; i++) bf16d[i] = eng_f32_to_bf16((float)i * 1.5f);
    for (int i = 0; i < (int)sizeof q8; i++) q8[i] = (uint8_t)(i * 7);
    eng_gguf_writer_add_tensor(w, "t.f32", ENG_GGML_TYPE_F32, 2, (int64_t[]){8, 3});
    eng_gguf_writer_add_tensor(w, "t.f16", ENG_GGML_TYPE_F16, 2, (int64_t[]){16, 2});
    eng_gguf_writer_add_tensor(w, "t.bf16", ENG_GGML_TYPE_BF16, 1, (int64_t[]){4});
    eng_gguf_writer_add_tensor(w, "t.q8", ENG_GGML_TYPE_Q8_0, 3, (int64_t[]){64, 1, 2});
    gt_mem_begin(&m);
    PT_EQ_INT(eng_gguf_writer_begin(w, m.f), 0);
    eng_gguf_writer_write(w, f32d, sizeof f32d);
    eng_gguf_writer_write(w, f16d, 10); /* in pieces */
    eng_gguf_writer_write(w, (uint8_t *)f16d + 10, sizeof f16d - 10);
    eng_gguf_writer_write(w, bf16d, sizeof bf16d);
    eng_gguf_writer_write(w, q8, sizeof q8);
    PT_EQ_INT(eng_gguf_writer_finish(w, err, sizeof err), 0);
    eng_gguf_writer_free(w);
    gt_mem_end(&m);

    eng_gguf *g;
    void *copy;
    PT_ASSERT_MSG(!gt_open_copy(m.buf, m.n, &g, &copy, err, sizeof err), "%s", err);
    free(m.buf);
    PT_EQ_INT(eng_gguf_version(g), 3);
    PT_EQ_INT(eng_gguf_alignment(g), 64);
    PT_EQ_INT(eng_gguf_data_offset(g) % 64, 0);
    PT_EQ_INT(eng_gguf_n_kv(g), 17); /* general.alignment + 16 */
    PT_EQ_STR(eng_gguf_kv_key(g, 0), "general.alignment");
    PT_EQ_STR(eng_gguf_kv_key(g, 1), "t.u8");
    PT_EQ_INT(eng_gguf_kv_type(g, 1), ENG_GGUF_TYPE_U8);
    int64_t x;
    uint32_t u;
    float f;
    bool b;
    PT_EQ_INT(eng_gguf_get_i64(g, "t.u8", &x), 0);
    PT_EQ_INT(x, 200);
    PT_EQ_INT(eng_gguf_get_i64(g, "t.i8", &x), 0);
    PT_EQ_INT(x, -100);
    PT_EQ_INT(eng_gguf_get_i64(g, "t.u16", &x), 0);
    PT_EQ_INT(x, 60000);
    PT_EQ_INT(eng_gguf_get_i64(g, "t.i16", &x), 0);
    PT_EQ_INT(x, -30000);
    PT_EQ_INT(eng_gguf_get_u32(g, "t.u32", &u), 0);
    PT_EQ_INT(u, 4000000000u);
    PT_EQ_INT(eng_gguf_get_i64(g, "t.i32", &x), 0);
    PT_EQ_INT(x, -2000000000);
    PT_EQ_INT(eng_gguf_get_u32(g, "t.i32", &u), ENG_GGUF_ETYPE); /* negative */
    PT_EQ_INT(eng_gguf_get_u32(g, "t.i8", &u), ENG_GGUF_ETYPE);
    PT_EQ_INT(eng_gguf_get_f32(g, "t.f32", &f), 0);
    PT_NEAR(f, 0.5, 0);
    PT_EQ_INT(eng_gguf_get_f32(g, "t.f64", &f), 0);
    PT_NEAR(f, (float)f64, 0);
    PT_EQ_INT(eng_gguf_get_f32(g, "t.i16", &f), 0);
    PT_NEAR(f, -30000, 0);
    PT_EQ_INT(eng_gguf_get_bool(g, "t.bool", &b), 0);
    PT_ASSERT(b);
    PT_EQ_INT(eng_gguf_get_bool(g, "t.u8", &b), ENG_GGUF_ETYPE);
    PT_EQ_INT(eng_gguf_get_i64(g, "t.u64", &x), ENG_GGUF_ETYPE); /* > INT64_MAX */
    PT_EQ_INT(eng_gguf_get_i64(g, "t.i64", &x), 0);
    PT_EQ_INT(x, -9000000000000000000ll);
    PT_EQ_INT(eng_gguf_get_i64(g, "missing", &x), ENG_GGUF_ENOTFOUND);
    PT_EQ_INT(eng_gguf_get_i64(g, "t.str", &x), ENG_GGUF_ETYPE);
    const char *s;
    size_t len;
    PT_EQ_INT(eng_gguf_get_str(g, "t.str", &s, &len), 0);
    PT_EQ_INT(len, 6);
    PT_EQ_MEM(s, "h\xc3\xa9llo", 6);
    int et;
    uint64_t n;
    const void *d;
    PT_EQ_INT(eng_gguf_get_arr(g, "a.i32", &et, &n, &d), 0);
    PT_EQ_INT(et, ENG_GGUF_TYPE_I32);
    PT_EQ_INT(n, 4);
    PT_EQ_INT(eng_gguf_arr_get_i64(et, d, n, 3, &x), 0);
    PT_EQ_INT(x, -4);
    PT_EQ_INT(eng_gguf_arr_get_i64(et, d, n, 4, &x), ENG_GGUF_ETYPE);
    PT_EQ_INT(eng_gguf_get_arr(g, "a.bool", &et, &n, &d), 0);
    PT_EQ_INT(et, ENG_GGUF_TYPE_BOOL);
    PT_EQ_MEM(d, ab, 3);
    PT_EQ_INT(eng_gguf_get_arr(g, "a.empty", &et, &n, &d), 0);
    PT_EQ_INT(n, 0);
    PT_EQ_INT(eng_gguf_get_arr(g, "a.str", &et, &n, &d), 0);
    PT_EQ_INT(et, ENG_GGUF_TYPE_STR);
    PT_EQ_INT(n, 4);
    PT_ASSERT(d == NULL);
    for (int i = 0; i < 4; i++) {
        PT_EQ_INT(eng_gguf_get_arr_str(g, "a.str", (uint64_t)i, &s, &len), 0);
        PT_EQ_INT(len, strlen(as[i]));
        PT_EQ_MEM(s, as[i], len);
    }
    PT_EQ_INT(eng_gguf_get_arr_str(g, "a.str", 4, &s, &len), ENG_GGUF_ETYPE);
    PT_EQ_INT(eng_gguf_n_tensors(g), 4);
    const eng_gguf_tensor *t = eng_gguf_find_tensor(g, "t.q8");
    PT_ASSERT(t);
    PT_EQ_INT(t->n_dims, 3);
    PT_EQ_INT(t->ne[0], 64);
    PT_EQ_INT(t->ne[1], 1);
    PT_EQ_INT(t->ne[2], 2);
    PT_EQ_INT(t->ne[3], 1);
    PT_EQ_INT(t->nbytes, sizeof q8);
    PT_EQ_MEM(t->data, q8, sizeof q8);
    PT_EQ_INT(t->offset % 64, 0);
    t = eng_gguf_find_tensor(g, "t.f16");
    PT_EQ_MEM(t->data, f16d, sizeof f16d);
    float row[32];
    PT_EQ_INT(eng_gguf_row_to_f32(t->type, t->data, 32, row), 0);
    for (int i = 0; i < 32; i++) PT_NEAR(row[i], (float)i - 10.5f, 0);
    t = eng_gguf_find_tensor(g, "t.bf16");
    PT_EQ_INT(eng_gguf_row_to_f32(t->type, t->data, 4, row), 0);
    for (int i = 0; i < 4; i++) PT_NEAR(row[i], (float)i * 1.5f, 0);
    t = eng_gguf_find_tensor(g, "t.f32");
    PT_EQ_INT(t->ne[1], 3);
    PT_EQ_MEM(t->data, f32d, sizeof f32d);
    PT_ASSERT(eng_gguf_find_tensor(g, "nope") == NULL);
    PT_ASSERT(eng_gguf_tensor_at(g, 4) == NULL && eng_gguf_kv_key(g, 17) == NULL);
    eng_gguf_close(g);
    free(copy);
}

PT_TEST(truncated_at_every_byte) {
    size_t len;
    uint64_t end;
    uint8_t *buf = small_file(&len, &end);
    char err[256];
    for (size_t k = 0; k <= len; k++) {
        eng_gguf *g = NULL;
        void *copy;
        err[0] = 0;
        int rc = gt_open_copy(buf, k, &g, &copy, err, sizeof err);
        if (k < end) {
            PT_ASSERT_MSG(rc == ENG_GGUF_EFORMAT && g == NULL, "length %zu opened", k);
            PT_ASSERT_MSG(strlen(err) > 10, "length %zu: no message", k);
        } else {
            PT_ASSERT_MSG(rc == 0, "length %zu (data ends at %llu): %s", k, (unsigned long long)end,
                          err);
            gguf_exercise(g);
        }
        eng_gguf_close(g);
        free(copy);
    }
    free(buf);
}

PT_TEST(bit_flips_in_header) {
    size_t len;
    uint64_t end;
    uint8_t *buf = small_file(&len, &end);
    char err[256];
    int opened = 0, refused = 0;
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            eng_gguf *g = NULL;
            void *copy;
            buf[i] ^= (uint8_t)(1u << bit);
            if (gt_open_copy(buf, len, &g, &copy, err, sizeof err) == 0) {
                gguf_exercise(g);
                opened++;
            } else {
                PT_ASSERT(err[0]);
                refused++;
            }
            eng_gguf_close(g);
            free(copy);
            buf[i] ^= (uint8_t)(1u << bit);
        }
    PT_ASSERT(opened > 0 && refused > 0);
    free(buf);
}

PT_TEST(random_mutations) {
    size_t len;
    uint64_t end;
    uint8_t *buf = small_file(&len, &end);
    uint8_t *mut = malloc(len);
    char err[256];
    for (int it = 0; it < 3000; it++) {
        memcpy(mut, buf, len);
        int nm = 1 + (int)(pt_rand() % 6);
        for (int k = 0; k < nm; k++) {
            size_t pos = (size_t)(pt_rand() % len);
            uint64_t r = pt_rand();
            mut[pos] = (r & 3) == 0 ? 0xff : (r & 3) == 1 ? 0 : (uint8_t)(r >> 8);
        }
        eng_gguf *g = NULL;
        void *copy;
        if (gt_open_copy(mut, (size_t)(pt_rand() % 4 ? len : pt_rand() % len), &g, &copy, err,
                         sizeof err) == 0)
            gguf_exercise(g);
        eng_gguf_close(g);
        free(copy);
    }
    free(mut);
    free(buf);
}

/* Open b's bytes; expect failure with a message containing want. */
static void expect_error(rb *b, const char *want) {
    eng_gguf *g = NULL;
    void *copy;
    char err[512] = "";
    int rc = gt_open_copy(b->p, b->n, &g, &copy, err, sizeof err);
    eng_gguf_close(g);
    free(copy);
    free(b->p);
    memset(b, 0, sizeof *b);
    PT_ASSERT_MSG(rc != 0, "expected an error containing '%s', file opened", want);
    PT_ASSERT_MSG(strstr(err, want) != NULL, "error '%s' lacks '%s'", err, want);
}

PT_TEST(hostile_headers) {
    rb b = {0};
    uint64_t ne1[1] = {32}, ne2[2];
    rb_bytes(&b, "GGUX", 4);
    rb_u32(&b, 3);
    rb_u64(&b, 0);
    rb_u64(&b, 0);
    expect_error(&b, "not a GGUF file");
    rb_bytes(&b, "GG", 2);
    expect_error(&b, "too small");
    rb_header(&b, 1, 0, 0);
    expect_error(&b, "version 1 is not supported");
    rb_bytes(&b, "GGUF", 4);
    rb_u32(&b, 0x03000000u);
    rb_u64(&b, 0);
    rb_u64(&b, 0);
    expect_error(&b, "big-endian");
    rb_header(&b, 4, 0, 0);
    expect_error(&b, "unsupported GGUF version 4");
    rb_header(&b, 3, 0, 1ull << 60);
    expect_error(&b, "metadata count");
    rb_header(&b, 3, 1ull << 40, 0);
    expect_error(&b, "tensor count");
    rb_header(&b, 3, 0, 1);
    rb_u64(&b, 1ull << 62);
    rb_bytes(&b, "abcdefghijklmn", 14);
    expect_error(&b, "key length");
    rb_header(&b, 3, 0, 1);
    rb_u64(&b, 30);
    rb_bytes(&b, "abcdefghijklmn", 14);
    expect_error(&b, "bytes left");
    rb_header(&b, 3, 0, 1);
    rb_u64(&b, 0);
    rb_u32(&b, 4);
    rb_u32(&b, 1);
    rb_u32(&b, 0);
    expect_error(&b, "empty key");
    rb_header(&b, 3, 0, 1);
    rb_u64(&b, 3);
    rb_bytes(&b, "a\0b", 3);
    rb_u32(&b, 4);
    rb_u32(&b, 1);
    expect_error(&b, "NUL byte");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k.str");
    rb_u32(&b, ENG_GGUF_TYPE_STR);
    rb_u64(&b, 1ull << 50);
    expect_error(&b, "'k.str': string value length");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k.arr");
    rb_u32(&b, ENG_GGUF_TYPE_ARR);
    rb_u32(&b, ENG_GGUF_TYPE_U64);
    rb_u64(&b, 1ull << 40);
    expect_error(&b, "'k.arr': array length");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k.arr");
    rb_u32(&b, ENG_GGUF_TYPE_ARR);
    rb_u32(&b, ENG_GGUF_TYPE_U64);
    rb_u64(&b, 1ull << 20);
    rb_u64(&b, 7);
    expect_error(&b, "needs at least");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k.strs");
    rb_u32(&b, ENG_GGUF_TYPE_ARR);
    rb_u32(&b, ENG_GGUF_TYPE_STR);
    rb_u64(&b, 2);
    rb_str(&b, "ok");
    rb_u64(&b, 1ull << 33);
    expect_error(&b, "'k.strs': string #1 length");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k.nest");
    rb_u32(&b, ENG_GGUF_TYPE_ARR);
    rb_u32(&b, ENG_GGUF_TYPE_ARR);
    rb_u64(&b, 1);
    expect_error(&b, "nested arrays");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "k.bad");
    rb_u32(&b, 13);
    rb_u32(&b, 0);
    expect_error(&b, "'k.bad': invalid value type 13");
    rb_header(&b, 3, 0, 2);
    rb_kv_u32(&b, "dup", 1);
    rb_kv_u32(&b, "dup", 2);
    expect_error(&b, "'dup': duplicate key");
    rb_header(&b, 3, 0, 1);
    rb_kv_u32(&b, "general.alignment", 48);
    expect_error(&b, "alignment 48 is not a power of two");
    rb_header(&b, 3, 0, 1);
    rb_str(&b, "general.alignment");
    rb_u32(&b, ENG_GGUF_TYPE_U64);
    rb_u64(&b, 32);
    expect_error(&b, "must be u32");
    rb_header(&b, 3, 0, 1);
    rb_kv_u32(&b, "trunc", 1);
    b.n -= 2;
    expect_error(&b, "'trunc': truncated u32 value");
    /* tensor infos */
    rb_header(&b, 3, 1, 0);
    rb_tensor(&b, "w", 5, (uint64_t[]){1, 1, 1, 1, 1}, 0, 0);
    expect_error(&b, "'w': n_dims 5");
    rb_header(&b, 3, 1, 0);
    rb_tensor(&b, "w", 1, (uint64_t[]){1ull << 63}, 0, 0);
    expect_error(&b, "'w': ne[0]");
    ne2[0] = 1ull << 32;
    ne2[1] = 1ull << 32;
    rb_header(&b, 3, 1, 0);
    rb_tensor(&b, "w", 2, ne2, 0, 0);
    expect_error(&b, "overflows");
    rb_header(&b, 3, 1, 0);
    rb_tensor(&b, "w", 1, ne1, 99, 0);
    expect_error(&b, "'w': unsupported tensor type 99");
    rb_header(&b, 3, 1, 0);
    rb_tensor(&b, "w", 1, (uint64_t[]){33}, ENG_GGML_TYPE_Q8_0, 0);
    expect_error(&b, "not a multiple of the q8_0 block size");
    ne2[0] = 1ull << 40;
    ne2[1] = 1ull << 22; /* elements fit int64, bytes do not */
    rb_header(&b, 3, 1, 0);
    rb_tensor(&b, "w", 2, ne2, ENG_GGML_TYPE_F64, 0);
    expect_error(&b, "'w': ");
    rb_header(&b, 3, 1, 0);
    rb_tensor(&b, "w", 1, ne1, 0, 16);
    rb_pad(&b, 32);
    rb_bytes(&b, (uint8_t[256]){0}, 256);
    expect_error(&b, "not a multiple of the alignment 32");
    rb_header(&b, 3, 1, 0);
    rb_tensor(&b, "w", 1, ne1, 0, 0);
    rb_pad(&b, 32);
    rb_bytes(&b, (uint8_t[64]){0}, 64);
    expect_error(&b, "'w': data [0, +128) lies outside the data section");
    rb_header(&b, 3, 1, 0);
    rb_tensor(&b, "w", 1, ne1, 0, 1ull << 62);
    rb_pad(&b, 32);
    expect_error(&b, "outside the data section");
    rb_header(&b, 3, 2, 0);
    rb_tensor(&b, "w", 1, ne1, 0, 0);
    rb_tensor(&b, "v", 1, ne1, 0, 64);
    rb_pad(&b, 32);
    rb_bytes(&b, (uint8_t[256]){0}, 256);
    expect_error(&b, "overlaps");
    rb_header(&b, 3, 3, 0);
    rb_tensor(&b, "w", 1, ne1, 0, 0); /* an empty tensor between */
    rb_tensor(&b, "z", 1, (uint64_t[]){0}, 0, 32);
    rb_tensor(&b, "v", 1, ne1, 0, 96);
    rb_pad(&b, 32);
    rb_bytes(&b, (uint8_t[256]){0}, 256);
    expect_error(&b, "tensor 'w' data [0, +128) overlaps tensor 'v'");
    rb_header(&b, 3, 2, 0);
    rb_tensor(&b, "w", 1, ne1, 0, 0);
    rb_tensor(&b, "w", 1, ne1, 0, 128);
    rb_pad(&b, 32);
    rb_bytes(&b, (uint8_t[256]){0}, 256);
    expect_error(&b, "'w': duplicate tensor name");
    /* and the same shapes are fine when valid, in a v2 file */
    rb_header(&b, 2, 2, 1);
    rb_kv_u32(&b, "k", 1);
    rb_tensor(&b, "w", 1, ne1, 0, 0);
    rb_tensor(&b, "v", 1, ne1, 0, 128);
    rb_pad(&b, 32);
    rb_bytes(&b, (uint8_t[256]){0}, 256);
    eng_gguf *g;
    char err[256];
    PT_ASSERT_MSG(eng_gguf_open_mem(b.p, b.n, &g, err, sizeof err) == 0, "%s", err);
    PT_EQ_INT(eng_gguf_version(g), 2);
    PT_EQ_INT(eng_gguf_find_tensor(g, "v")->nbytes, 128);
    eng_gguf_close(g);
    free(b.p);
}

PT_TEST(open_file_errors) {
    eng_gguf *g;
    char err[256], path[] = "/tmp/parley_gguf_testXXXXXX";
    PT_EQ_INT(eng_gguf_open("/nonexistent/x.gguf", &g, err, sizeof err), ENG_GGUF_EIO);
    PT_ASSERT(strstr(err, "cannot open /nonexistent/x.gguf"));
    int fd = mkstemp(path);
    PT_ASSERT(fd >= 0);
    PT_EQ_INT(eng_gguf_open(path, &g, err, sizeof err), ENG_GGUF_EFORMAT);
    PT_ASSERT(strstr(err, "empty"));
    size_t len;
    uint64_t end;
    uint8_t *buf = small_file(&len, &end);
    PT_EQ_INT(write(fd, buf, len), (long long)len);
    close(fd);
    PT_ASSERT_MSG(eng_gguf_open(path, &g, err, sizeof err) == 0, "%s", err);
    PT_EQ_INT(eng_gguf_file_size(g), len);
    PT_EQ_MEM(eng_gguf_find_tensor(g, "b")->data, buf + end - 34, 34);
    gguf_exercise(g);
    eng_gguf_close(g);
    unlink(path);
    free(buf);
}

PT_TEST(writer_misuse) {
    eng_gguf_writer *w;
    gt_mem m;
    char err[256];
    PT_EQ_INT(eng_gguf_writer_new(48, &w), ENG_GGUF_EINVAL);
    PT_EQ_INT(eng_gguf_writer_new(0, &w), 0);
    PT_EQ_INT(eng_gguf_writer_add_u32(w, "k", 1), 0);
    PT_ASSERT(eng_gguf_writer_add_u32(w, "k", 2) != 0);
    PT_ASSERT(strstr(eng_gguf_writer_error(w), "duplicate key 'k'"));
    PT_ASSERT(eng_gguf_writer_add_u32(w, "other", 2) != 0); /* sticky */
    eng_gguf_writer_free(w);

    PT_EQ_INT(eng_gguf_writer_new(0, &w), 0);
    PT_ASSERT(eng_gguf_writer_add_tensor(w, "q", ENG_GGML_TYPE_Q8_0, 1, (int64_t[]){33}) != 0);
    eng_gguf_writer_free(w);
    PT_EQ_INT(eng_gguf_writer_new(0, &w), 0);
    eng_gguf_writer_add_tensor(w, "t", ENG_GGML_TYPE_F32, 1, (int64_t[]){4});
    PT_ASSERT(eng_gguf_writer_add_tensor(w, "t", ENG_GGML_TYPE_F32, 1, (int64_t[]){4}) != 0);
    eng_gguf_writer_free(w);

    PT_EQ_INT(eng_gguf_writer_new(0, &w), 0);
    eng_gguf_writer_add_tensor(w, "t", ENG_GGML_TYPE_F32, 1, (int64_t[]){4});
    gt_mem_begin(&m);
    PT_EQ_INT(eng_gguf_writer_begin(w, m.f), 0);
    PT_ASSERT(eng_gguf_writer_add_u32(w, "late", 1) != 0);
    eng_gguf_writer_free(w);
    gt_mem_end(&m);
    free(m.buf);

    PT_EQ_INT(eng_gguf_writer_new(0, &w), 0);
    eng_gguf_writer_add_tensor(w, "t", ENG_GGML_TYPE_F32, 1, (int64_t[]){4});
    gt_mem_begin(&m);
    eng_gguf_writer_begin(w, m.f);
    eng_gguf_writer_write(w, (float[3]){0}, 12);
    PT_ASSERT(eng_gguf_writer_finish(w, err, sizeof err) != 0);
    PT_ASSERT(strstr(err, "tensor 't' got 12 of its 16 bytes"));
    eng_gguf_writer_free(w);
    gt_mem_end(&m);
    free(m.buf);

    PT_EQ_INT(eng_gguf_writer_new(0, &w), 0);
    eng_gguf_writer_add_tensor(w, "t", ENG_GGML_TYPE_F32, 1, (int64_t[]){1});
    gt_mem_begin(&m);
    eng_gguf_writer_begin(w, m.f);
    PT_ASSERT(eng_gguf_writer_write(w, (float[2]){0}, 8) != 0);
    PT_ASSERT(strstr(eng_gguf_writer_error(w), "beyond the last tensor"));
    eng_gguf_writer_free(w);
    gt_mem_end(&m);
    free(m.buf);
}
