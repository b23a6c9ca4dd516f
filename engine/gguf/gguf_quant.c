/*
 * gguf_quant.c -- dequantising the ggml block formats to float.
 *
 * Purpose.  Model files from llama.cpp's quantiser store most weights in
 * block formats: a run of values shares one or two fp16 scales (and, in the
 * K formats, 6- or 8-bit sub-block scales).  The loader (model.c) turns every
 * row into float with eng_gguf_row_to_f32, which calls eng_gguf_quant_to_f32
 * here for every type below; the fp32 path keeps those floats, the int8 path
 * requantises them (model.c's header says how).
 *
 * Formats (bytes little-endian, "d"/"m"/"dmin" fp16; value i of a block):
 *   q4_0   32 v / 18 B  d, qs[16]: q = nib(i) - 8, y = d*q
 *                       nib(i) = i < 16 ? qs[i] & 15 : qs[i-16] >> 4
 *   q4_1   32 v / 20 B  d, m, qs[16]: y = d*nib(i) + m
 *   q5_0   32 v / 22 B  d, qh (u32), qs[16]: q = nib(i) | bit i of qh << 4,
 *                       y = d*(q - 16)
 *   q5_1   32 v / 24 B  d, m, qh, qs[16]: y = d*q + m
 *   q8_0   32 v / 34 B  d, qs[32] int8: y = d*qs[i]
 *   iq4_nl 32 v / 18 B  d, qs[16]: y = d*kv[nib(i)], kv the 16-entry
 *                       non-linear table below
 *   q2_K  256 v / 84 B  scales[16], qs[64], d, dmin; 16-value sub-block
 *                       s = i/16: y = (d*(sc_s & 15))*q - dmin*(sc_s >> 4),
 *                       q = (qs[32*(i/128) + i%32] >> 2*((i/32)%4)) & 3
 *   q3_K  256 v / 110 B hmask[32], qs[64], scales[12] (16 6-bit values),
 *                       d: y = (d*(sc_s - 32)) * (q2 - (hbit ? 0 : 4)), q2 as
 *                       in q2_K, hbit = bit i/32 of hmask[i%32]
 *   q4_K  256 v / 144 B d, dmin, scales[12] (8 6-bit scales + 8 6-bit mins),
 *                       qs[128]; 32-value sub-block s: y = (d*sc_s)*q -
 *                       dmin*mn_s, q = (qs[32*(s/2) + i%32] >> 4*(s%2)) & 15
 *   q5_K  256 v / 176 B d, dmin, scales[12], qh[32], qs[128]: q4_K's q plus
 *                       bit s of qh[i%32] as bit 4
 *   q6_K  256 v / 210 B ql[128], qh[64], scales[16] int8, d:
 *                       y = (d*sc_{i/16}) * (q - 32), 4 low bits from ql,
 *                       2 high bits from qh
 *   iq4_xs 256 v / 136 B d, scales_h (u16), scales_l[4], qs[128]; 32-value
 *                       sub-block s: ls = (scales_l nibble s) | (2 bits s of
 *                       scales_h) << 4, y = (d*(ls - 32)) * kv[nib]
 * These follow ggml's block structs (ggml-common.h) and dequantize_row_*;
 * each product and difference is one float operation in the order written
 * above (separate statements, so no compiler contracts them to an fma),
 * which makes the result bit-identical to gguf-py's gguf.quants.dequantize
 * (tests/py/test_gguf_quants.py checks every type).
 *
 * Validation.  n must be a whole number of blocks (EINVAL otherwise); the
 * caller has checked that the bytes exist (eng_gguf_row_bytes and the
 * parser's tensor size checks).  A non-finite fp16 scale (inf or nan in d,
 * m or dmin) makes the row an error instead of inf/nan weights; finite
 * scales times the bounded integer codes are always finite in float.
 *
 * Exact int8 form.  Q8_0, Q4_0, Q5_0 and IQ4_NL blocks are d times a
 * signed integer code of at most 8 bits, so eng_gguf_quant_codes hands the
 * int8 path those codes and d unchanged (the 32-value block-scaled GEMM then
 * computes with exactly the file's weights; Q8_0's -128 becomes -127, the
 * kernels' operand range).  The other formats carry a min (q4_1, q5_1,
 * q2_K..q5_K) or 16-value sub-block scales (q3_K, q6_K, q2_K) or 8-bit
 * scale products (iq4_xs) and are requantised by the loader.  Q4_0 and
 * IQ4_NL codes are each one of 16 values (eng_gguf_quant_lut), so a backend
 * may keep them as 4-bit indices; eng_gguf_q4k_codes hands Q4_K over as the
 * file stores it (codes, 6-bit scales and mins, fp16 d and dmin) for
 * backends that keep it 4-bit.
 *
 * Threading: pure functions of their arguments, called concurrently by the
 * loader's pool.  Nothing is allocated.
 */
#include <math.h>
#include <string.h>

#include "eng_gguf.h"

/* iq4_nl / iq4_xs code book (ggml's kvalues_iq4nl). */
static const int8_t kv_iq4[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                  1,    13,   25,  38,  53,  69,  89,  113};

static int h2f(const uint8_t *p, float *out) {
    float v = eng_f16_to_f32((uint16_t)(p[0] | p[1] << 8));
    if (!(fabsf(v) < INFINITY)) return -1;
    *out = v;
    return 0;
}

static int nib32(const uint8_t *qs, int i) { return i < 16 ? qs[i] & 15 : qs[i - 16] >> 4; }

static uint32_t le32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* q5_0 / q5_1 5-bit code of value i (qh: the block's high bits). */
static int q5b(uint32_t qh, const uint8_t *qs, int i) {
    return nib32(qs, i) | (int)((qh >> i) & 1u) << 4;
}
static int q5(const uint8_t *qh4, const uint8_t *qs, int i) { return q5b(le32(qh4), qs, i); }

/* q4_K / q5_K 6-bit scale and min of sub-block s (ggml get_scale_min_k4). */
static void k4_scale_min(const uint8_t *s, int j, int *sc, int *mn) {
    if (j < 4) {
        *sc = s[j] & 63;
        *mn = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *mn = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

static int blk_q4_0(const uint8_t *p, float *y) {
    float d;
    if (h2f(p, &d)) return -1;
    for (int i = 0; i < 32; i++) y[i] = d * (float)(nib32(p + 2, i) - 8);
    return 0;
}

static int blk_q4_1(const uint8_t *p, float *y) {
    float d, m;
    if (h2f(p, &d) || h2f(p + 2, &m)) return -1;
    for (int i = 0; i < 32; i++) {
        float t = d * (float)nib32(p + 4, i);
        y[i] = t + m;
    }
    return 0;
}

static int blk_q5_0(const uint8_t *p, float *y) {
    float d;
    if (h2f(p, &d)) return -1;
    uint32_t qh = le32(p + 2);
    for (int i = 0; i < 32; i++) y[i] = d * (float)(q5b(qh, p + 6, i) - 16);
    return 0;
}

static int blk_q5_1(const uint8_t *p, float *y) {
    float d, m;
    if (h2f(p, &d) || h2f(p + 2, &m)) return -1;
    uint32_t qh = le32(p + 4);
    for (int i = 0; i < 32; i++) {
        float t = d * (float)q5b(qh, p + 8, i);
        y[i] = t + m;
    }
    return 0;
}

static int blk_q8_0(const uint8_t *p, float *y) {
    float d;
    if (h2f(p, &d)) return -1;
    for (int i = 0; i < 32; i++) y[i] = d * (float)(int8_t)p[2 + i];
    return 0;
}

static int blk_iq4_nl(const uint8_t *p, float *y) {
    float d;
    if (h2f(p, &d)) return -1;
    for (int i = 0; i < 32; i++) y[i] = d * (float)kv_iq4[nib32(p + 2, i)];
    return 0;
}

static int blk_q2_k(const uint8_t *p, float *y) {
    const uint8_t *sc = p, *qs = p + 16;
    float d, dmin;
    if (h2f(p + 80, &d) || h2f(p + 82, &dmin)) return -1;
    for (int s = 0; s < 16; s++) {
        float dl = d * (float)(sc[s] & 15);
        float ml = dmin * (float)(sc[s] >> 4);
        for (int k = 0; k < 16; k++) {
            int i = s * 16 + k;
            int q = (qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3;
            float t = dl * (float)q;
            y[i] = t - ml;
        }
    }
    return 0;
}

static int blk_q3_k(const uint8_t *p, float *y) {
    const uint8_t *hm = p, *qs = p + 32, *sc = p + 96;
    float d;
    if (h2f(p + 108, &d)) return -1;
    for (int s = 0; s < 16; s++) {
        int lo = s < 8 ? sc[s] & 15 : sc[s - 8] >> 4;
        int hi = (sc[8 + s % 4] >> (2 * (s / 4))) & 3;
        float dl = d * (float)((lo | hi << 4) - 32);
        for (int k = 0; k < 16; k++) {
            int i = s * 16 + k;
            int q = (qs[32 * (i / 128) + i % 32] >> (2 * ((i / 32) % 4))) & 3;
            int hb = (hm[i % 32] >> (i / 32)) & 1;
            y[i] = dl * (float)(q - (hb ? 0 : 4));
        }
    }
    return 0;
}

static int blk_q4_k(const uint8_t *p, float *y) {
    float d, dmin;
    if (h2f(p, &d) || h2f(p + 2, &dmin)) return -1;
    const uint8_t *qs = p + 16;
    for (int s = 0; s < 8; s++) {
        int sc, mn;
        k4_scale_min(p + 4, s, &sc, &mn);
        float dl = d * (float)sc, ml = dmin * (float)mn;
        for (int l = 0; l < 32; l++) {
            int q = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
            float t = dl * (float)q;
            y[s * 32 + l] = t - ml;
        }
    }
    return 0;
}

static int blk_q5_k(const uint8_t *p, float *y) {
    float d, dmin;
    if (h2f(p, &d) || h2f(p + 2, &dmin)) return -1;
    const uint8_t *qh = p + 16, *qs = p + 48;
    for (int s = 0; s < 8; s++) {
        int sc, mn;
        k4_scale_min(p + 4, s, &sc, &mn);
        float dl = d * (float)sc, ml = dmin * (float)mn;
        for (int l = 0; l < 32; l++) {
            int q = ((qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15) | ((qh[l] >> s) & 1) << 4;
            float t = dl * (float)q;
            y[s * 32 + l] = t - ml;
        }
    }
    return 0;
}

static int blk_q6_k(const uint8_t *p, float *y) {
    const uint8_t *ql = p, *qh = p + 128;
    const int8_t *sc = (const int8_t *)(p + 192);
    float d;
    if (h2f(p + 208, &d)) return -1;
    for (int s = 0; s < 16; s++) {
        float dl = d * (float)sc[s];
        int h = s / 8, r0 = (s % 8) * 16; /* value i = 128 h + r */
        const uint8_t *l = ql + 64 * h + r0 % 64, *u = qh + 32 * h + r0 % 32;
        int ls = 4 * (r0 / 64), hs = 2 * (r0 / 32);
        for (int k = 0; k < 16; k++) {
            int lo = (l[k] >> ls) & 15, hi = (u[k] >> hs) & 3;
            y[s * 16 + k] = dl * (float)((lo | hi << 4) - 32);
        }
    }
    return 0;
}

static int blk_iq4_xs(const uint8_t *p, float *y) {
    float d;
    if (h2f(p, &d)) return -1;
    unsigned sh = (unsigned)p[2] | (unsigned)p[3] << 8;
    const uint8_t *sl = p + 4, *qs = p + 8;
    for (int s = 0; s < 8; s++) {
        int ls = ((sl[s / 2] >> (4 * (s % 2))) & 15) | (int)((sh >> (2 * s)) & 3u) << 4;
        float dl = d * (float)(ls - 32);
        for (int l = 0; l < 32; l++) y[s * 32 + l] = dl * (float)kv_iq4[nib32(qs + 16 * s, l)];
    }
    return 0;
}

int eng_gguf_quant_to_f32(int type, const void *src, int64_t n, float *dst) {
    int (*fn)(const uint8_t *, float *);
    int blck, bytes;
    switch (type) {
    case ENG_GGML_TYPE_Q4_0: fn = blk_q4_0, blck = 32, bytes = 18; break;
    case ENG_GGML_TYPE_Q4_1: fn = blk_q4_1, blck = 32, bytes = 20; break;
    case ENG_GGML_TYPE_Q5_0: fn = blk_q5_0, blck = 32, bytes = 22; break;
    case ENG_GGML_TYPE_Q5_1: fn = blk_q5_1, blck = 32, bytes = 24; break;
    case ENG_GGML_TYPE_Q8_0: fn = blk_q8_0, blck = 32, bytes = 34; break;
    case ENG_GGML_TYPE_IQ4_NL: fn = blk_iq4_nl, blck = 32, bytes = 18; break;
    case ENG_GGML_TYPE_Q2_K: fn = blk_q2_k, blck = 256, bytes = 84; break;
    case ENG_GGML_TYPE_Q3_K: fn = blk_q3_k, blck = 256, bytes = 110; break;
    case ENG_GGML_TYPE_Q4_K: fn = blk_q4_k, blck = 256, bytes = 144; break;
    case ENG_GGML_TYPE_Q5_K: fn = blk_q5_k, blck = 256, bytes = 176; break;
    case ENG_GGML_TYPE_Q6_K: fn = blk_q6_k, blck = 256, bytes = 210; break;
    case ENG_GGML_TYPE_IQ4_XS: fn = blk_iq4_xs, blck = 256, bytes = 136; break;
    default: return ENG_GGUF_EINVAL;
    }
    if (n < 0 || n % blck) return ENG_GGUF_EINVAL;
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / blck; b++, p += bytes)
        if (fn(p, dst + b * blck)) return ENG_GGUF_EINVAL;
    return 0;
}

int eng_gguf_quant_codes(int type, const void *src, int64_t n, int8_t *q, float *bscale) {
    int bytes;
    switch (type) {
    case ENG_GGML_TYPE_Q8_0: bytes = 34; break;
    case ENG_GGML_TYPE_Q4_0:
    case ENG_GGML_TYPE_IQ4_NL: bytes = 18; break;
    case ENG_GGML_TYPE_Q5_0: bytes = 22; break;
    default: return ENG_GGUF_EINVAL;
    }
    if (n < 0 || n % 32) return ENG_GGUF_EINVAL;
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 32; b++, p += bytes, q += 32) {
        if (h2f(p, &bscale[b])) return ENG_GGUF_EINVAL;
        for (int i = 0; i < 32; i++) {
            int v;
            switch (type) {
            case ENG_GGML_TYPE_Q8_0: v = (int8_t)p[2 + i]; break;
            case ENG_GGML_TYPE_Q4_0: v = nib32(p + 2, i) - 8; break;
            case ENG_GGML_TYPE_IQ4_NL: v = kv_iq4[nib32(p + 2, i)]; break;
            default: v = q5(p + 2, p + 6, i) - 16; break;
            }
            q[i] = (int8_t)(v < -127 ? -127 : v); /* a file's q8_0 -128: kernels take -127.. */
        }
    }
    return 0;
}

const int8_t *eng_gguf_quant_lut(int type) {
    static const int8_t q4_0[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};
    return type == ENG_GGML_TYPE_Q4_0 ? q4_0 : type == ENG_GGML_TYPE_IQ4_NL ? kv_iq4 : NULL;
}

int eng_gguf_q4k_codes(const void *src, int64_t n, uint8_t *u, uint8_t *sc, uint8_t *mn, float *d,
                       float *dmin) {
    if (n < 0 || n % 256) return ENG_GGUF_EINVAL;
    const uint8_t *p = src;
    for (int64_t b = 0; b < n / 256; b++, p += 144, u += 256) {
        if (h2f(p, &d[b]) || h2f(p + 2, &dmin[b])) return ENG_GGUF_EINVAL;
        const uint8_t *qs = p + 16;
        for (int s = 0; s < 8; s++) {
            int a, m;
            k4_scale_min(p + 4, s, &a, &m);
            sc[b * 8 + s] = (uint8_t)a;
            mn[b * 8 + s] = (uint8_t)m;
            for (int l = 0; l < 32; l++)
                u[s * 32 + l] = (qs[32 * (s / 2) + l] >> (4 * (s % 2))) & 15;
        }
    }
    return 0;
}

int eng_gguf_type_convertible(int type) {
    switch (type) {
    case ENG_GGML_TYPE_F32:
    case ENG_GGML_TYPE_F16:
    case ENG_GGML_TYPE_BF16:
    case ENG_GGML_TYPE_Q4_0:
    case ENG_GGML_TYPE_Q4_1:
    case ENG_GGML_TYPE_Q5_0:
    case ENG_GGML_TYPE_Q5_1:
    case ENG_GGML_TYPE_Q8_0:
    case ENG_GGML_TYPE_IQ4_NL:
    case ENG_GGML_TYPE_Q2_K:
    case ENG_GGML_TYPE_Q3_K:
    case ENG_GGML_TYPE_Q4_K:
    case ENG_GGML_TYPE_Q5_K:
    case ENG_GGML_TYPE_Q6_K:
    case ENG_GGML_TYPE_IQ4_XS: return 1;
    default: return 0;
    }
}
