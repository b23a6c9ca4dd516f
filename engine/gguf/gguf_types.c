/*
 * gguf_types.c -- GGML tensor type facts (names, block sizes, byte sizes
 * with overflow checks), IEEE half / bfloat16 conversion, and dequantising
 * a row of F32/F16/BF16 to float (the block formats: gguf_quant.c).
 *
 * Kept apart from the parser because the forward pass, the writer and
 * mkmodel use these too.  The half conversions are bit-exact: half -> float
 * is exact for every input (subnormals, infinities, NaNs); float -> half and
 * float -> bf16 round to nearest even, overflow to infinity, and keep NaN a
 * (quiet) NaN, matching numpy's float16 and ggml's bf16 rounding.
 */
#include <string.h>

#include "eng_gguf.h"

typedef struct gguf_type_info {
    int id;           /* ENG_GGML_TYPE_* */
    const char *name; /* ggml's name */
    int blck;         /* values per block */
    int bytes;        /* bytes per block */
} gguf_type_info;

static const gguf_type_info gguf_types[] = {
    {ENG_GGML_TYPE_F32, "f32", 1, 4},           {ENG_GGML_TYPE_F16, "f16", 1, 2},
    {ENG_GGML_TYPE_Q4_0, "q4_0", 32, 18},       {ENG_GGML_TYPE_Q4_1, "q4_1", 32, 20},
    {ENG_GGML_TYPE_Q5_0, "q5_0", 32, 22},       {ENG_GGML_TYPE_Q5_1, "q5_1", 32, 24},
    {ENG_GGML_TYPE_Q8_0, "q8_0", 32, 34},       {ENG_GGML_TYPE_Q2_K, "q2_K", 256, 84},
    {ENG_GGML_TYPE_Q3_K, "q3_K", 256, 110},     {ENG_GGML_TYPE_Q4_K, "q4_K", 256, 144},
    {ENG_GGML_TYPE_Q5_K, "q5_K", 256, 176},     {ENG_GGML_TYPE_Q6_K, "q6_K", 256, 210},
    {ENG_GGML_TYPE_Q8_K, "q8_K", 256, 292},     {ENG_GGML_TYPE_IQ4_NL, "iq4_nl", 32, 18},
    {ENG_GGML_TYPE_IQ4_XS, "iq4_xs", 256, 136}, {ENG_GGML_TYPE_I8, "i8", 1, 1},
    {ENG_GGML_TYPE_I16, "i16", 1, 2},           {ENG_GGML_TYPE_I32, "i32", 1, 4},
    {ENG_GGML_TYPE_I64, "i64", 1, 8},           {ENG_GGML_TYPE_F64, "f64", 1, 8},
    {ENG_GGML_TYPE_BF16, "bf16", 1, 2},
};

static const gguf_type_info *type_info(int t) {
    for (size_t i = 0; i < sizeof gguf_types / sizeof gguf_types[0]; i++)
        if (gguf_types[i].id == t) return &gguf_types[i];
    return NULL;
}

const char *eng_gguf_type_name(int t) {
    const gguf_type_info *ti = type_info(t);
    return ti ? ti->name : "?";
}

const char *eng_gguf_kv_type_name(int t) {
    static const char *const names[ENG_GGUF_TYPE_COUNT] = {
        "u8", "i8", "u16", "i16", "u32", "i32", "f32", "bool", "str", "arr", "u64", "i64", "f64"};
    return t >= 0 && t < ENG_GGUF_TYPE_COUNT ? names[t] : "?";
}

int eng_gguf_type_block(int t, int64_t *blck, size_t *bytes) {
    const gguf_type_info *ti = type_info(t);
    if (!ti) return ENG_GGUF_EINVAL;
    *blck = ti->blck;
    *bytes = (size_t)ti->bytes;
    return 0;
}

int eng_gguf_row_bytes(int t, int64_t n, uint64_t *out) {
    const gguf_type_info *ti = type_info(t);
    if (!ti || n < 0 || n % ti->blck) return ENG_GGUF_EINVAL;
    uint64_t blocks = (uint64_t)(n / ti->blck);
    if (blocks > UINT64_MAX / (uint64_t)ti->bytes) return ENG_GGUF_EINVAL;
    *out = blocks * (uint64_t)ti->bytes;
    return 0;
}

/* ---- half / bfloat16 ---- */

static float bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint32_t f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

float eng_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu, mant = h & 0x3ffu;
    if (exp == 0) { /* zero or subnormal: mant * 2^-24, exact in float */
        float v = (float)mant * 5.9604644775390625e-8f;
        return sign ? -v : v;
    }
    if (exp == 31) return bits_f32(sign | 0x7f800000u | mant << 13);
    return bits_f32(sign | (exp + 112) << 23 | mant << 13);
}

/* Round to nearest even; subnormal results through a float add with a
 * magic constant (exact in round-to-nearest mode). */
uint16_t eng_f32_to_f16(float fv) {
    const uint32_t f32inf = 255u << 23, f16max = (127u + 16) << 23;
    const uint32_t magic = ((127u - 15) + (23 - 10) + 1) << 23;
    uint32_t f = f32_bits(fv), sign = f & 0x80000000u;
    uint16_t o;
    f ^= sign;
    if (f >= f16max) {
        o = f > f32inf ? 0x7e00 : 0x7c00;
    } else if (f < (113u << 23)) {
        f = f32_bits(bits_f32(f) + bits_f32(magic));
        o = (uint16_t)(f - magic);
    } else {
        uint32_t odd = (f >> 13) & 1u;
        f += ((uint32_t)(15 - 127) << 23) + 0xfffu;
        f += odd;
        o = (uint16_t)(f >> 13);
    }
    return (uint16_t)(o | sign >> 16);
}

float eng_bf16_to_f32(uint16_t h) { return bits_f32((uint32_t)h << 16); }

uint16_t eng_f32_to_bf16(float fv) {
    uint32_t u = f32_bits(fv);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 64); /* quiet nan */
    return (uint16_t)((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

int eng_gguf_row_to_f32(int type, const void *src, int64_t n, float *dst) {
    const uint8_t *p = src;
    if (n < 0) return ENG_GGUF_EINVAL;
    switch (type) {
    case ENG_GGML_TYPE_F32:
        if (n) memcpy(dst, src, (size_t)n * 4);
        return 0;
    case ENG_GGML_TYPE_F16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = eng_f16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return 0;
    case ENG_GGML_TYPE_BF16:
        for (int64_t i = 0; i < n; i++)
            dst[i] = eng_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return 0;
    default: return eng_gguf_quant_to_f32(type, src, n, dst);
    }
}
