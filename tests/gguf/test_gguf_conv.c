/*
 * test_gguf_conv.c -- half / bfloat16 conversions and row dequantisation:
 * exhaustive round trips over all 65536 encodings, round-to-nearest-even at
 * every midpoint between adjacent halves, overflow / subnormal / NaN edge
 * cases, Q8_0 rows, and type size arithmetic with its overflow checks.
 */
#define PTEST_MAIN
#include "ptest.h"

#include "eng_gguf.h"

static uint32_t bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

PT_TEST(f16_exhaustive_roundtrip) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = eng_f16_to_f32((uint16_t)h);
        int is_nan = (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
        if (is_nan) {
            PT_ASSERT(f != f);
            uint16_t r = eng_f32_to_f16(f);
            PT_ASSERT((r & 0x7c00) == 0x7c00 && (r & 0x3ff));
        } else {
            PT_EQ_INT(eng_f32_to_f16(f), h);
        }
    }
    PT_NEAR(eng_f16_to_f32(0x0001), 5.9604644775390625e-8, 0); /* smallest subnormal */
    PT_NEAR(eng_f16_to_f32(0x03ff), 6.097555160522461e-5, 0);  /* largest subnormal */
    PT_NEAR(eng_f16_to_f32(0x7bff), 65504.0, 0);
    PT_ASSERT(isinf(eng_f16_to_f32(0x7c00)) && eng_f16_to_f32(0xfc00) < 0);
    PT_EQ_INT(bits(eng_f16_to_f32(0x8000)), 0x80000000u); /* -0 */
}

PT_TEST(f16_rounding_midpoints) {
    /* between every pair of adjacent finite positive halves, the exact
     * midpoint rounds to the even one; a hair above/below goes up/down */
    for (uint32_t h = 0; h < 0x7bff; h++) {
        float lo = eng_f16_to_f32((uint16_t)h), hi = eng_f16_to_f32((uint16_t)(h + 1));
        float mid = (lo + hi) * 0.5f; /* exact: halves have 11 significant bits */
        uint16_t even = (h & 1) ? (uint16_t)(h + 1) : (uint16_t)h;
        PT_EQ_INT(eng_f32_to_f16(mid), even);
        PT_EQ_INT(eng_f32_to_f16(-mid), even | 0x8000);
        PT_EQ_INT(eng_f32_to_f16(from_bits(bits(mid) + 1)), h + 1);
        PT_EQ_INT(eng_f32_to_f16(from_bits(bits(mid) - 1)), h);
    }
    PT_EQ_INT(eng_f32_to_f16(65519.996f), 0x7bff);
    PT_EQ_INT(eng_f32_to_f16(65520.0f), 0x7c00); /* rounds to infinity */
    PT_EQ_INT(eng_f32_to_f16(1e30f), 0x7c00);
    PT_EQ_INT(eng_f32_to_f16(-INFINITY), 0xfc00);
    PT_EQ_INT(eng_f32_to_f16(2.9802322387695312e-8f), 0x0000); /* 2^-25 ties to 0 */
    PT_EQ_INT(eng_f32_to_f16(1e-30f), 0x0000);
    uint16_t n = eng_f32_to_f16(NAN);
    PT_ASSERT((n & 0x7c00) == 0x7c00 && (n & 0x3ff));
}

PT_TEST(bf16_exhaustive_and_rounding) {
    for (uint32_t h = 0; h < 65536; h++) {
        float f = eng_bf16_to_f32((uint16_t)h);
        PT_EQ_INT(bits(f), h << 16);
        if (f == f) PT_EQ_INT(eng_f32_to_bf16(f), h);
        else PT_ASSERT(isnan(eng_bf16_to_f32(eng_f32_to_bf16(f))));
    }
    PT_EQ_INT(eng_f32_to_bf16(from_bits(0x3f808000u)), 0x3f80); /* tie -> even */
    PT_EQ_INT(eng_f32_to_bf16(from_bits(0x3f818000u)), 0x3f82); /* tie -> even (up) */
    PT_EQ_INT(eng_f32_to_bf16(from_bits(0x3f808001u)), 0x3f81);
    PT_EQ_INT(eng_f32_to_bf16(from_bits(0x7f7fffffu)), 0x7f80); /* overflow to inf */
    PT_EQ_INT(eng_f32_to_bf16(from_bits(0x00000001u)), 0x0000); /* subnormal rounds */
    uint16_t n = eng_f32_to_bf16(from_bits(0x7f800001u));       /* nan with low payload */
    PT_ASSERT((n & 0x7f80) == 0x7f80 && (n & 0x7f));
}

PT_TEST(q8_0_rows) {
    uint8_t blk[2 * 34];
    float out[64];
    uint16_t d0 = eng_f32_to_f16(0.125f), d1 = eng_f32_to_f16(-3.0f);
    blk[0] = (uint8_t)d0;
    blk[1] = (uint8_t)(d0 >> 8);
    blk[34] = (uint8_t)d1;
    blk[35] = (uint8_t)(d1 >> 8);
    for (int j = 0; j < 32; j++) {
        blk[2 + j] = (uint8_t)(int8_t)(j * 8 - 128);
        blk[36 + j] = (uint8_t)(int8_t)(127 - j);
    }
    PT_EQ_INT(eng_gguf_row_to_f32(ENG_GGML_TYPE_Q8_0, blk, 64, out), 0);
    for (int j = 0; j < 32; j++) {
        PT_NEAR(out[j], 0.125 * (j * 8 - 128), 0);
        PT_NEAR(out[32 + j], -3.0 * (127 - j), 0);
    }
    PT_EQ_INT(eng_gguf_row_to_f32(ENG_GGML_TYPE_Q8_0, blk, 33, out), ENG_GGUF_EINVAL);
    PT_EQ_INT(eng_gguf_row_to_f32(ENG_GGML_TYPE_I8, blk, 32, out), ENG_GGUF_EINVAL);
    float f[3] = {1.5f, -2.0f, 1e-40f};
    PT_EQ_INT(eng_gguf_row_to_f32(ENG_GGML_TYPE_F32, f, 3, out), 0);
    PT_EQ_MEM(out, f, sizeof f);
}

PT_TEST(type_sizes) {
    uint64_t n;
    int64_t blck;
    size_t bytes;
    PT_EQ_INT(eng_gguf_row_bytes(ENG_GGML_TYPE_Q8_0, 2048, &n), 0);
    PT_EQ_INT(n, 64 * 34);
    PT_EQ_INT(eng_gguf_row_bytes(ENG_GGML_TYPE_Q4_K, 512, &n), 0);
    PT_EQ_INT(n, 288);
    PT_EQ_INT(eng_gguf_row_bytes(ENG_GGML_TYPE_BF16, 7, &n), 0);
    PT_EQ_INT(n, 14);
    PT_EQ_INT(eng_gguf_row_bytes(ENG_GGML_TYPE_Q8_0, 31, &n), ENG_GGUF_EINVAL);
    PT_EQ_INT(eng_gguf_row_bytes(ENG_GGML_TYPE_F64, INT64_MAX, &n), ENG_GGUF_EINVAL);
    PT_EQ_INT(eng_gguf_row_bytes(77, 32, &n), ENG_GGUF_EINVAL);
    PT_EQ_INT(eng_gguf_type_block(ENG_GGML_TYPE_Q6_K, &blck, &bytes), 0);
    PT_EQ_INT(blck, 256);
    PT_EQ_INT(bytes, 210);
    PT_EQ_STR(eng_gguf_type_name(ENG_GGML_TYPE_BF16), "bf16");
    PT_EQ_STR(eng_gguf_type_name(1000), "?");
    PT_EQ_STR(eng_gguf_kv_type_name(ENG_GGUF_TYPE_ARR), "arr");
}
