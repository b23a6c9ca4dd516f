/*
 * test_gguf_quant.c -- the ggml block formats of gguf_quant.c: hand-made
 * blocks whose values are worked out by hand from ggml's layouts (one or
 * more values per field: scales, mins, high bits, sub-block scales), partial
 * blocks, non-finite fp16 scales and unknown types refused, sizes of the new
 * types, and the parser refusing truncated or non-whole-block tensors.
 * (Bit-exactness against gguf-py on random data: tests/py/test_gguf_quants.py.)
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_gguf.h"
#include "gguf_testutil.h"

static int fails;

#define CHECK(c)                                                    \
    do {                                                            \
        if (!(c)) {                                                 \
            fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, #c); \
            fails++;                                                \
        }                                                           \
    } while (0)

static void h16(uint8_t *p, uint16_t v) {
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}

#define F16_1 0x3C00
#define F16_HALF 0x3800
#define F16_M1 0xBC00
#define F16_2 0x4000
#define F16_QUARTER 0x3400
#define F16_INF 0x7C00
#define F16_NAN 0x7E00

static float y[512];

static int deq(int type, const uint8_t *blk, int64_t n) {
    for (int i = 0; i < 512; i++) y[i] = -12345.0f;
    return eng_gguf_row_to_f32(type, blk, n, y);
}

/* every type: a block with a bad scale at scale offset `off` is refused */
static void check_bad_scale(int type, int blck, int bytes, int off) {
    uint8_t b[2 * 210 + 4];
    memset(b, 0, sizeof b);
    h16(b + off, F16_1);
    h16(b + bytes + off, F16_1);
    CHECK(eng_gguf_row_to_f32(type, b, 2 * blck, y) == 0);
    h16(b + bytes + off, F16_INF);
    CHECK(eng_gguf_row_to_f32(type, b, 2 * blck, y) == ENG_GGUF_EINVAL);
    h16(b + bytes + off, F16_NAN);
    CHECK(eng_gguf_row_to_f32(type, b, 2 * blck, y) == ENG_GGUF_EINVAL);
    h16(b + bytes + off, 0xFC00); /* -inf */
    CHECK(eng_gguf_row_to_f32(type, b, 2 * blck, y) == ENG_GGUF_EINVAL);
    /* partial block */
    CHECK(eng_gguf_row_to_f32(type, b, blck + 16, y) == ENG_GGUF_EINVAL);
    CHECK(eng_gguf_row_to_f32(type, b, blck - 1, y) == ENG_GGUF_EINVAL);
    CHECK(eng_gguf_type_convertible(type));
    int64_t bl;
    size_t by;
    CHECK(eng_gguf_type_block(type, &bl, &by) == 0 && bl == blck && (int)by == bytes);
    uint64_t rb;
    CHECK(eng_gguf_row_bytes(type, 3 * blck, &rb) == 0 && rb == 3u * (uint64_t)bytes);
    CHECK(eng_gguf_row_bytes(type, blck + 1, &rb) == ENG_GGUF_EINVAL);
}

static void test_values(void) {
    uint8_t b[256];

    memset(b, 0, sizeof b); /* q4_0: y = d * (nibble - 8) */
    h16(b, F16_1);
    b[2] = 0x9F;
    CHECK(deq(ENG_GGML_TYPE_Q4_0, b, 32) == 0 && y[0] == 7 && y[16] == 1 && y[1] == -8);

    memset(b, 0, sizeof b); /* q4_1: y = d * nibble + m */
    h16(b, F16_HALF);
    h16(b + 2, F16_M1);
    b[4 + 3] = 0x2A;
    CHECK(deq(ENG_GGML_TYPE_Q4_1, b, 32) == 0 && y[3] == 4 && y[19] == 0 && y[0] == -1);

    memset(b, 0, sizeof b); /* q5_0: high bit i of qh */
    h16(b, F16_2);
    b[2] = 0x01; /* bit 0 */
    b[4] = 0x02; /* bit 17 */
    b[6 + 1] = 0x53;
    CHECK(deq(ENG_GGML_TYPE_Q5_0, b, 32) == 0 && y[0] == 0 && y[1] == -26 && y[17] == 10 &&
          y[2] == -32);

    memset(b, 0, sizeof b); /* q5_1: bit 31 */
    h16(b, F16_1);
    h16(b + 2, F16_HALF);
    b[4 + 3] = 0x80;
    b[8 + 15] = 0xF0;
    CHECK(deq(ENG_GGML_TYPE_Q5_1, b, 32) == 0 && y[31] == 31.5f && y[15] == 0.5f);

    memset(b, 0, sizeof b); /* q8_0 */
    h16(b, F16_QUARTER);
    b[2 + 5] = (uint8_t)-8;
    CHECK(deq(ENG_GGML_TYPE_Q8_0, b, 32) == 0 && y[5] == -2 && y[4] == 0);

    memset(b, 0, sizeof b); /* iq4_nl: code book */
    h16(b, F16_1);
    b[2] = 0x0F;
    CHECK(deq(ENG_GGML_TYPE_IQ4_NL, b, 32) == 0 && y[0] == 113 && y[16] == -127 && y[1] == -127);

    memset(b, 0, sizeof b); /* q2_K: scales[16] qs[64] d dmin */
    h16(b + 80, F16_1);
    h16(b + 82, F16_HALF);
    b[0] = 0x23;
    b[2] = 0x01;
    b[6] = 0x02;
    b[16] = 0xE4;
    CHECK(deq(ENG_GGML_TYPE_Q2_K, b, 256) == 0 && y[0] == -1 && y[32] == 1 && y[96] == 6 &&
          y[64] == 0);

    memset(b, 0, sizeof b); /* q3_K: hmask[32] qs[64] scales[12] d */
    h16(b + 108, F16_1);
    b[96 + 0] = 0x01; /* sub-block 0 low nibble 1 */
    b[96 + 8] = 0x02; /* sub-block 0 high bits 2 -> 33 - 32 = 1 */
    b[96 + 1] = 0xF0; /* sub-block 9 low 15 */
    b[96 + 9] = 0x30; /* sub-block 9 high 3 -> 63 - 32 = 31 */
    b[32 + 0] = 0x02;
    b[0] = 0x01; /* hmask bit 0 of value 0: no -4 */
    b[32 + 48] = 0x03;
    b[16] = 0x10; /* hmask bit 4 of value 144 */
    CHECK(deq(ENG_GGML_TYPE_Q3_K, b, 256) == 0 && y[0] == 2 && y[1] == -4 && y[144] == 93);

    memset(b, 0, sizeof b); /* q4_K: d dmin scales[12] qs[128] */
    h16(b, F16_1);
    h16(b + 2, F16_1);
    b[4 + 0] = 5;
    b[4 + 4] = 2;
    b[4 + 1] = 0x40;
    b[4 + 9] = 0x13;
    b[16 + 0] = 0x07;
    b[16 + 64] = 0xA0;
    CHECK(deq(ENG_GGML_TYPE_Q4_K, b, 256) == 0 && y[0] == 33 && y[160] == 189 && y[1] == -2 &&
          y[32] == 0);

    memset(b, 0, sizeof b); /* q5_K: d dmin scales[12] qh[32] qs[128] */
    h16(b, F16_1);
    b[4 + 0] = 1;
    b[4 + 1] = 2;
    b[16 + 0] = 0x03;
    b[48 + 0] = 0x0F;
    CHECK(deq(ENG_GGML_TYPE_Q5_K, b, 256) == 0 && y[0] == 31 && y[32] == 32 && y[1] == 0);

    memset(b, 0, sizeof b); /* q6_K: ql[128] qh[64] scales[16] d */
    h16(b + 208, F16_1);
    b[192 + 0] = (uint8_t)-2;
    b[192 + 12] = 1;
    b[0] = 0x05;
    b[128 + 0] = 0x02;
    b[69] = 0x90;
    b[128 + 37] = 0x30;
    CHECK(deq(ENG_GGML_TYPE_Q6_K, b, 256) == 0 && y[0] == -10 && y[197] == 25 && y[1] == 64);

    memset(b, 0, sizeof b); /* iq4_xs: d scales_h scales_l[4] qs[128] */
    h16(b, F16_HALF);
    b[2] = 0x42;
    b[4 + 0] = 0x02;
    b[4 + 1] = 0x10;
    b[8 + 0] = 0x8F;
    b[8 + 48] = 0x04;
    CHECK(deq(ENG_GGML_TYPE_IQ4_XS, b, 256) == 0 && y[0] == 113 && y[16] == 1 && y[96] == 367.5f);
}

static void test_refusals(void) {
    check_bad_scale(ENG_GGML_TYPE_Q4_0, 32, 18, 0);
    check_bad_scale(ENG_GGML_TYPE_Q4_1, 32, 20, 0);
    check_bad_scale(ENG_GGML_TYPE_Q4_1, 32, 20, 2);
    check_bad_scale(ENG_GGML_TYPE_Q5_0, 32, 22, 0);
    check_bad_scale(ENG_GGML_TYPE_Q5_1, 32, 24, 0);
    check_bad_scale(ENG_GGML_TYPE_Q5_1, 32, 24, 2);
    check_bad_scale(ENG_GGML_TYPE_Q8_0, 32, 34, 0);
    check_bad_scale(ENG_GGML_TYPE_IQ4_NL, 32, 18, 0);
    check_bad_scale(ENG_GGML_TYPE_Q2_K, 256, 84, 80);
    check_bad_scale(ENG_GGML_TYPE_Q2_K, 256, 84, 82);
    check_bad_scale(ENG_GGML_TYPE_Q3_K, 256, 110, 108);
    check_bad_scale(ENG_GGML_TYPE_Q4_K, 256, 144, 0);
    check_bad_scale(ENG_GGML_TYPE_Q4_K, 256, 144, 2);
    check_bad_scale(ENG_GGML_TYPE_Q5_K, 256, 176, 0);
    check_bad_scale(ENG_GGML_TYPE_Q5_K, 256, 176, 2);
    check_bad_scale(ENG_GGML_TYPE_Q6_K, 256, 210, 208);
    check_bad_scale(ENG_GGML_TYPE_IQ4_XS, 256, 136, 0);
    uint8_t z[300] = {0};
    CHECK(eng_gguf_row_to_f32(ENG_GGML_TYPE_Q8_K, z, 256, y) == ENG_GGUF_EINVAL);
    CHECK(eng_gguf_row_to_f32(16 /* iq2_xxs */, z, 256, y) == ENG_GGUF_EINVAL);
    CHECK(!eng_gguf_type_convertible(ENG_GGML_TYPE_Q8_K) && !eng_gguf_type_convertible(9));
    CHECK(!strcmp(eng_gguf_type_name(ENG_GGML_TYPE_IQ4_NL), "iq4_nl") &&
          !strcmp(eng_gguf_type_name(ENG_GGML_TYPE_IQ4_XS), "iq4_xs"));
}

/* One-tensor file: ne = [ne0, 2], data_len bytes of data. */
static int open_one(uint32_t type, uint64_t ne0, size_t data_len, char *err, size_t errlen) {
    rb b = {0};
    rb_header(&b, 3, 1, 0);
    rb_tensor(&b, "w", 2, (uint64_t[]){ne0, 2}, type, 0);
    rb_pad(&b, 32);
    uint8_t *d = calloc(1, data_len + 1);
    for (size_t i = 0; i + 1 < data_len; i += 2) h16(d + i, 0x3000);
    rb_bytes(&b, d, data_len);
    free(d);
    eng_gguf *g = NULL;
    void *copy;
    int rc = gt_open_copy(b.p, b.n, &g, &copy, err, errlen);
    if (g) eng_gguf_close(g);
    free(copy);
    free(b.p);
    return rc;
}

static void test_parser_sizes(void) {
    char err[256];
    const struct {
        uint32_t type;
        int blck, bytes;
    } ts[] = {
        {ENG_GGML_TYPE_Q4_0, 32, 18},     {ENG_GGML_TYPE_Q4_1, 32, 20},
        {ENG_GGML_TYPE_Q5_0, 32, 22},     {ENG_GGML_TYPE_Q5_1, 32, 24},
        {ENG_GGML_TYPE_IQ4_NL, 32, 18},   {ENG_GGML_TYPE_Q2_K, 256, 84},
        {ENG_GGML_TYPE_Q3_K, 256, 110},   {ENG_GGML_TYPE_Q4_K, 256, 144},
        {ENG_GGML_TYPE_Q5_K, 256, 176},   {ENG_GGML_TYPE_Q6_K, 256, 210},
        {ENG_GGML_TYPE_IQ4_XS, 256, 136},
    };
    for (size_t i = 0; i < sizeof ts / sizeof ts[0]; i++) {
        size_t full = 2 * (size_t)ts[i].bytes;
        CHECK(open_one(ts[i].type, (uint64_t)ts[i].blck, full, err, sizeof err) == 0);
        int rc = open_one(ts[i].type, (uint64_t)ts[i].blck, full - 1, err, sizeof err);
        CHECK(rc != 0);
        if (rc == 0) fprintf(stderr, "type %u: truncated data accepted\n", ts[i].type);
        rc = open_one(ts[i].type, (uint64_t)ts[i].blck + 16, 4 * full, err, sizeof err);
        CHECK(rc != 0 && strstr(err, "not a multiple"));
    }
}

/* eng_gguf_quant_codes: code * scale == the dequantised value, every
 * value of random blocks (finite scales), for the four exact formats. */
static void test_codes(void) {
    const struct {
        int type, bytes;
    } ts[] = {{ENG_GGML_TYPE_Q8_0, 34},
              {ENG_GGML_TYPE_Q4_0, 18},
              {ENG_GGML_TYPE_Q5_0, 22},
              {ENG_GGML_TYPE_IQ4_NL, 18}};
    uint8_t b[8 * 34];
    int8_t q[256];
    float sc[8];
    uint32_t x = 12345;
    for (size_t t = 0; t < sizeof ts / sizeof ts[0]; t++) {
        for (size_t i = 0; i < sizeof b; i++)
            b[i] = (uint8_t)((x = x * 1103515245u + 12345u) >> 24);
        for (int k = 0; k < 8; k++) h16(b + k * ts[t].bytes, (uint16_t)(0x2000 + k * 0x351));
        b[2] = 0x80; /* a -128 in q8_0 */
        CHECK(eng_gguf_quant_codes(ts[t].type, b, 256, q, sc) == 0);
        CHECK(deq(ts[t].type, b, 256) == 0);
        for (int i = 0; i < 256; i++) {
            float want = ts[t].type == ENG_GGML_TYPE_Q8_0 && i == 0 ? sc[0] * -127.0f : y[i];
            if (sc[i / 32] * (float)q[i] != want) {
                fprintf(stderr, "type %d value %d: %d * %g != %g\n", ts[t].type, i, q[i],
                        sc[i / 32], want);
                fails++;
                break;
            }
        }
        CHECK(eng_gguf_quant_codes(ts[t].type, b, 48, q, sc) == ENG_GGUF_EINVAL);
        h16(b + ts[t].bytes, F16_INF);
        CHECK(eng_gguf_quant_codes(ts[t].type, b, 256, q, sc) == ENG_GGUF_EINVAL);
    }
    CHECK(eng_gguf_quant_codes(ENG_GGML_TYPE_Q4_1, b, 32, q, sc) == ENG_GGUF_EINVAL);
    CHECK(eng_gguf_quant_codes(ENG_GGML_TYPE_Q4_K, b, 256, q, sc) == ENG_GGUF_EINVAL);
}

int main(void) {
    test_values();
    test_codes();
    test_refusals();
    test_parser_sizes();
    if (fails) {
        fprintf(stderr, "%d checks failed\n", fails);
        return 1;
    }
    printf("test_gguf_quant: ok\n");
    return 0;
}
