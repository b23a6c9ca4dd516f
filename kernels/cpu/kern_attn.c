/*
 * kern_attn.c -- attention over one KV head of a paged cache (kern_attn.h):
 * the scalar textbook reference and the AVX2+FMA chunked kernel.
 *
 * The vector kernel walks the keys in chunks of C = KERN_ATTN_CHUNK(hd)
 * positions aligned to multiples of C.  For each chunk it first gathers
 * the chunk's rows once into stack buffers (K dequantised, in a
 * key-interleaved layout so eight keys' dot products read one stream; V
 * converted to float exactly), then updates every (query token,
 * head) pair of the tile that attends any key of the chunk: eight keys'
 * dot products at a time (one accumulator per key, reduced by a fixed
 * hadd tree), a running max / sum (online softmax) and the weighted V sum
 * kept in the output row.  Masked lanes of a group of eight keys score
 * -inf and contribute exact zeros, so a pair's arithmetic depends only on
 * its own position, window and the fixed chunk grid.
 */
#include "kern_attn.h"

#include <math.h>
#include <stdint.h>

#include "kern_isa.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>

#include "kern_avx2_reduce.h"
#include "kern_exp_avx2.h"
#define KERN_ATTN_X86 1
#else
#define KERN_ATTN_X86 0
#endif

/* First key position a query at p attends. */
static inline int ka_lo(int p, int window) {
    return window > 0 && p - window + 1 > 0 ? p - window + 1 : 0;
}

/* Block holding key position k and its slot there. */
static inline const char *ka_block(const kern_attn_kv *kv, int k, int *slot) {
    *slot = k % kv->block_tokens;
    return (const char *)kv->blocks[k / kv->block_tokens];
}

/* ---- reference ---------------------------------------------------------- */

/* Dequantised element d of key k's K (is_v 0) or V (is_v 1) row. */
static float ka_ref_elem(const kern_attn_kv *kv, const char *blk, int slot, int is_v, int d) {
    const char *row = blk + (is_v ? kv->v_off : kv->k_off) + (size_t)slot * kv->row_stride;
    if (kv->f32) return ((const float *)row)[d];
    const float *sc =
        is_v ? (const float *)(blk + kv->vs_off + (size_t)slot * kv->vs_stride)
             : (const float *)(blk + kv->ks_off + (size_t)slot * kv->ks_stride) + d / kv->k_group;
    return (float)((const int8_t *)row)[d] * *sc;
}

static float ka_ref_score(const kern_attn_kv *kv, const float *q, int k, int hd, float scale) {
    int slot;
    const char *blk = ka_block(kv, k, &slot);
    float s = 0;
    for (int d = 0; d < hd; d++) s += q[d] * ka_ref_elem(kv, blk, slot, 0, d);
    return s * scale;
}

void kern_attn_ref(const kern_attn_kv *kv, const kern_attn_q *a, int hd, float scale) {
    for (int t = 0; t < a->n_tok; t++)
        for (int h = 0; h < a->n_head; h++) {
            const float *q = a->q + (size_t)t * a->q_tok + (size_t)h * a->q_head;
            float *out = a->out + (size_t)t * a->o_tok + (size_t)h * a->o_head;
            int p = a->pos0 + t, lo = ka_lo(p, a->window);
            float mx = -INFINITY, sum = 0;
            for (int k = lo; k <= p; k++) {
                float s = ka_ref_score(kv, q, k, hd, scale);
                if (s > mx) mx = s;
            }
            for (int d = 0; d < hd; d++) out[d] = 0;
            for (int k = lo; k <= p; k++) {
                float w = expf(ka_ref_score(kv, q, k, hd, scale) - mx);
                int slot;
                const char *blk = ka_block(kv, k, &slot);
                sum += w;
                for (int d = 0; d < hd; d++) out[d] += w * ka_ref_elem(kv, blk, slot, 1, d);
            }
            float inv = 1.0f / sum;
            for (int d = 0; d < hd; d++) out[d] *= inv;
        }
}

/* ---- AVX2 + FMA --------------------------------------------------------- */

#if KERN_ATTN_X86
#define KA_AVX2 __attribute__((target("avx2,fma")))
#define KA_TILE 256 /* (token, head) pairs whose softmax state one tile keeps */
#define KA_MAXC 32  /* largest chunk */
#define KA_BUF 8192 /* floats of one dequantised chunk: C * hd <= 8192 */

/* One chunk, dequantised (or copied) once for every pair of the tile.
 * K is stored in groups of 8 keys, 8 dims at a time, so the 8-key dot loop
 * reads one stream: k[((j / 8) * (hd / 8) + d / 8) * 64 + (j % 8) * 8 + d % 8],
 * each value times its group's scale.  V is row-major and raw, v[j * hd + d],
 * its one scale per key applied to the softmax weight.  Keys outside the
 * loaded range are zero. */
typedef struct ka_chunk {
    float *k;                       /* K, grouped layout, C * hd floats, dequantised */
    float *v;                       /* V rows, C * hd floats, raw int8 values or floats */
    _Alignas(32) float vs[KA_MAXC]; /* V scale per key (1 for float rows) */
} ka_chunk;

/* Lane j = horizontal sum of a[j], each by ((0+1)+(2+3)) + ((4+5)+(6+7)). */
KA_AVX2 static __m256 ka_reduce8(const __m256 a[8]) {
    __m256 t0 = _mm256_hadd_ps(_mm256_hadd_ps(a[0], a[1]), _mm256_hadd_ps(a[2], a[3]));
    __m256 t1 = _mm256_hadd_ps(_mm256_hadd_ps(a[4], a[5]), _mm256_hadd_ps(a[6], a[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(t0, t1, 0x20),
                         _mm256_permute2f128_ps(t0, t1, 0x31));
}

/* 8 floats of row element d of key j in the grouped K layout. */
static inline float *ka_kslot(float *k, int hd, int j, int d) {
    return k + ((size_t)(j >> 3) * (size_t)(hd >> 3) + (size_t)(d >> 3)) * 64 + (size_t)(j & 7) * 8;
}

/* Gather keys [a0, b0] of the chunk starting at c0 (K int8 times its
 * group scale, V int8 to float exactly); the chunk's other keys become
 * zero rows. */
KA_AVX2 static void ka_load_chunk(const kern_attn_kv *kv, int hd, int C, int c0, int a0, int b0,
                                  ka_chunk *ch) {
    /* block index and slot of key c0 + j, stepped instead of divided per key */
    int bi = c0 / kv->block_tokens, slot = c0 % kv->block_tokens;
    for (int j = 0; j < C; j++, slot++) {
        int k = c0 + j;
        if (slot == kv->block_tokens) slot = 0, bi++;
        float *vrow = ch->v + (size_t)j * hd;
        if (k < a0 || k > b0) {
            for (int d = 0; d < hd; d += 8) {
                _mm256_store_ps(ka_kslot(ch->k, hd, j, d), _mm256_setzero_ps());
                _mm256_store_ps(vrow + d, _mm256_setzero_ps());
            }
            ch->vs[j] = 1.0f;
            continue;
        }
        const char *blk = (const char *)kv->blocks[bi];
        const char *kr = blk + kv->k_off + (size_t)slot * kv->row_stride;
        const char *vr = blk + kv->v_off + (size_t)slot * kv->row_stride;
        if (kv->f32) {
            for (int d = 0; d < hd; d += 8) {
                _mm256_store_ps(ka_kslot(ch->k, hd, j, d), _mm256_loadu_ps((const float *)kr + d));
                _mm256_store_ps(vrow + d, _mm256_loadu_ps((const float *)vr + d));
            }
            ch->vs[j] = 1.0f;
        } else {
            const float *ks = (const float *)(blk + kv->ks_off + (size_t)slot * kv->ks_stride);
            for (int d = 0; d < hd; d += 8) {
                __m128i kb = _mm_loadl_epi64((const __m128i *)(kr + d));
                __m128i vb = _mm_loadl_epi64((const __m128i *)(vr + d));
                _mm256_store_ps(ka_kslot(ch->k, hd, j, d),
                                _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(kb)),
                                              _mm256_set1_ps(ks[d / kv->k_group])));
                _mm256_store_ps(vrow + d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(vb)));
            }
            ch->vs[j] = *(const float *)(blk + kv->vs_off + (size_t)slot * kv->vs_stride);
        }
    }
}

/* One (token, head) pair, one chunk: keys ja..jb of the chunk (ja <= jb).
 * *pm / *pl: running max and sum; out: running weighted V sum. */
KA_AVX2 static void ka_update(const float *q, float *out, int hd, float scale, const ka_chunk *ch,
                              int ja, int jb, float *pm, float *pl) {
    _Alignas(32) float s[KA_MAXC];
    __m256 vmax = _mm256_set1_ps(-INFINITY), vscale = _mm256_set1_ps(scale);
    __m256 lane = _mm256_setr_ps(0, 1, 2, 3, 4, 5, 6, 7);
    int g0 = ja & ~7;
    for (int g = g0; g <= jb; g += 8) {
        __m256 acc[8];
        const float *kp = ch->k + (size_t)(g >> 3) * (size_t)hd * 8;
        for (int i = 0; i < 8; i++) acc[i] = _mm256_setzero_ps();
        for (int d = 0; d < hd; d += 8, kp += 64) {
            __m256 qv = _mm256_loadu_ps(q + d);
            for (int i = 0; i < 8; i++)
                acc[i] = _mm256_fmadd_ps(qv, _mm256_load_ps(kp + 8 * i), acc[i]);
        }
        __m256 sv = _mm256_mul_ps(ka_reduce8(acc), vscale);
        __m256 idx = _mm256_add_ps(lane, _mm256_set1_ps((float)g));
        __m256 ok = _mm256_and_ps(_mm256_cmp_ps(idx, _mm256_set1_ps((float)ja), _CMP_GE_OQ),
                                  _mm256_cmp_ps(idx, _mm256_set1_ps((float)jb), _CMP_LE_OQ));
        sv = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), sv, ok);
        _mm256_store_ps(s + g, sv);
        vmax = _mm256_max_ps(vmax, sv);
    }
    float mc = kern_hmax_ps(vmax), mold = *pm, mnew = mc > mold ? mc : mold;
    float alpha = _mm256_cvtss_f32(kern_exp_attn_ps(_mm256_set1_ps(mold - mnew)));
    __m256 vm = _mm256_set1_ps(mnew), psum = _mm256_setzero_ps();
    for (int g = g0; g <= jb; g += 8) {
        __m256 pv = kern_exp_attn_ps(_mm256_sub_ps(_mm256_load_ps(s + g), vm));
        _mm256_store_ps(s + g, _mm256_mul_ps(pv, _mm256_load_ps(ch->vs + g)));
        psum = _mm256_add_ps(psum, pv);
    }
    *pl = *pl * alpha + kern_hsum_ps(psum);
    *pm = mnew;
    __m256 va = _mm256_set1_ps(alpha);
    int d = 0;
    for (; d + 64 <= hd; d += 64) {
        __m256 acc[8];
        for (int i = 0; i < 8; i++) acc[i] = _mm256_mul_ps(_mm256_loadu_ps(out + d + 8 * i), va);
        const float *v = ch->v + (size_t)ja * hd + d;
        for (int j = ja; j <= jb; j++, v += hd) {
            __m256 w = _mm256_set1_ps(s[j]);
            for (int i = 0; i < 8; i++)
                acc[i] = _mm256_fmadd_ps(w, _mm256_load_ps(v + 8 * i), acc[i]);
        }
        for (int i = 0; i < 8; i++) _mm256_storeu_ps(out + d + 8 * i, acc[i]);
    }
    for (; d < hd; d += 8) {
        __m256 acc = _mm256_mul_ps(_mm256_loadu_ps(out + d), va);
        const float *v = ch->v + (size_t)ja * hd + d;
        for (int j = ja; j <= jb; j++, v += hd)
            acc = _mm256_fmadd_ps(_mm256_set1_ps(s[j]), _mm256_load_ps(v), acc);
        _mm256_storeu_ps(out + d, acc);
    }
}

/* Tokens [t0, t0+nt) x heads [h0, h0+nh) with nt * nh <= KA_TILE. */
KA_AVX2 static void ka_tile(const kern_attn_kv *kv, const kern_attn_q *a, int hd, float scale,
                            int t0, int nt, int h0, int nh, ka_chunk *ch) {
    int C = KERN_ATTN_CHUNK(hd);
    float m[KA_TILE], l[KA_TILE];
    for (int i = 0; i < nt * nh; i++) {
        float *out = a->out + (size_t)(t0 + i / nh) * a->o_tok + (size_t)(h0 + i % nh) * a->o_head;
        for (int d = 0; d < hd; d++) out[d] = 0;
        m[i] = -INFINITY;
        l[i] = 0;
    }
    int plo = ka_lo(a->pos0 + t0, a->window), phi = a->pos0 + t0 + nt - 1;
    for (int c0 = plo - plo % C; c0 <= phi; c0 += C) {
        int a0 = c0 > plo ? c0 : plo, b0 = c0 + C - 1 < phi ? c0 + C - 1 : phi;
        ka_load_chunk(kv, hd, C, c0, a0, b0, ch);
        for (int t = 0; t < nt; t++) {
            int p = a->pos0 + t0 + t, lo = ka_lo(p, a->window);
            int ja = (c0 > lo ? c0 : lo) - c0, jb = (c0 + C - 1 < p ? c0 + C - 1 : p) - c0;
            if (ja > jb) continue;
            for (int h = 0; h < nh; h++) {
                const float *q = a->q + (size_t)(t0 + t) * a->q_tok + (size_t)(h0 + h) * a->q_head;
                float *out = a->out + (size_t)(t0 + t) * a->o_tok + (size_t)(h0 + h) * a->o_head;
                ka_update(q, out, hd, scale, ch, ja, jb, &m[t * nh + h], &l[t * nh + h]);
            }
        }
    }
    for (int i = 0; i < nt * nh; i++) {
        float *out = a->out + (size_t)(t0 + i / nh) * a->o_tok + (size_t)(h0 + i % nh) * a->o_head;
        __m256 inv = _mm256_set1_ps(1.0f / l[i]);
        for (int d = 0; d < hd; d += 8)
            _mm256_storeu_ps(out + d, _mm256_mul_ps(_mm256_loadu_ps(out + d), inv));
    }
}

KA_AVX2 static void ka_attn_avx2(const kern_attn_kv *kv, const kern_attn_q *a, int hd,
                                 float scale) {
    _Alignas(32) float kbuf[KA_BUF];
    _Alignas(32) float vbuf[KA_BUF];
    ka_chunk ch = {.k = kbuf, .v = vbuf};
    int hb = a->n_head < KA_TILE ? a->n_head : KA_TILE, tb = KA_TILE / hb;
    for (int h0 = 0; h0 < a->n_head; h0 += hb)
        for (int t0 = 0; t0 < a->n_tok; t0 += tb) {
            int nh = a->n_head - h0 < hb ? a->n_head - h0 : hb;
            int nt = a->n_tok - t0 < tb ? a->n_tok - t0 : tb;
            ka_tile(kv, a, hd, scale, t0, nt, h0, nh, &ch);
        }
}
#endif

int kern_attn_uses_q8(const kern_attn_kv *kv, int hd) {
    return KERN_ATTN_X86 && kern_isa_best() >= KERN_ISA_AVX512VNNI && !kv->f32 &&
           kv->k_group == 32 && hd % 32 == 0 && hd <= KERN_ATTN_MAX_A5_HD;
}

/* nearbyintf clamped to [-127, 127]. */
static float ka_round127(float x) {
    float v = nearbyintf(x);
    return v > 127 ? 127 : v < -127 ? -127 : v;
}

void kern_attn_round_q(const float *q, int hd, float *out) {
    for (int b = 0; b + 32 <= hd; b += 32) {
        float amax = 0;
        for (int i = 0; i < 32; i++) amax = fabsf(q[b + i]) > amax ? fabsf(q[b + i]) : amax;
        float inv = 127.0f / amax, s = amax / 127.0f;
        for (int i = 0; i < 32; i++) {
            if (!(amax > 0) || !(inv <= 3.0e38f)) {
                out[b + i] = 0;
                continue;
            }
            float hi = ka_round127(q[b + i] * inv);
            float lo = ka_round127(fmaf(-hi, s, q[b + i]) * (inv * 254.0f));
            out[b + i] = hi * s + lo * (s / 254.0f);
        }
    }
}

void kern_attn(const kern_attn_kv *kv, const kern_attn_q *a, int hd, float scale) {
#if KERN_ATTN_X86
    if (kern_attn_uses_q8(kv, hd)) {
        kern_attn_avx512(kv, a, hd, scale);
        return;
    }
    if (kern_isa_best() >= KERN_ISA_AVX2 && hd % 8 == 0 && hd <= KERN_ATTN_MAX_VEC_HD &&
        (kv->f32 || kv->k_group % 8 == 0)) {
        ka_attn_avx2(kv, a, hd, scale);
        return;
    }
#endif
    kern_attn_ref(kv, a, hd, scale);
}
