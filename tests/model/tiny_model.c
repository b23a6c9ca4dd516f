/*
 * tiny_model.c -- tiny synthetic GGUF models for the engine unit tests
 * (tiny_model.h), written with the engine's own GGUF writer.
 */
#include "tiny_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_gguf_write.h"

typedef struct tiny_t {
    char name[64]; /* tensor name */
    int n_dims;    /* 1 or 2 */
    int64_t ne[2]; /* GGUF order */
    int norm;      /* 1: values near 1 (norm weights) */
} tiny_t;

/* Q4_0 block of 32 values: d = amax / 7 (f16), code = round(x / d) + 8 in 0..15. */
static void tiny_q4_0(const float *x, unsigned char blk[18]) {
    float amax = 0;
    for (int k = 0; k < 32; k++) amax = fmaxf(amax, fabsf(x[k]));
    uint16_t dh = eng_f32_to_f16(amax / 7.0f);
    float d = eng_f16_to_f32(dh);
    blk[0] = (unsigned char)(dh & 0xff), blk[1] = (unsigned char)(dh >> 8);
    for (int k = 0; k < 16; k++) {
        int lo = d > 0 ? (int)lrintf(x[k] / d) + 8 : 8,
            hi = d > 0 ? (int)lrintf(x[k + 16] / d) + 8 : 8;
        lo = lo < 0 ? 0 : lo > 15 ? 15 : lo, hi = hi < 0 ? 0 : hi > 15 ? 15 : hi;
        blk[2 + k] = (unsigned char)(lo | hi << 4);
    }
}

/* Q4_K super-block of 256 values (144 bytes), value = d*sc*q - dmin*mn:
 * per 32 values scale (max - min') / 15 and offset -min' (min' = min(min,
 * 0)), both 6-bit multiples of d = max scale / 63 and dmin = max offset / 63. */
static void tiny_q4_k(const float *x, unsigned char blk[144]) {
    float sca[8], off[8], msc = 0, moff = 0;
    for (int s = 0; s < 8; s++) {
        float lo = 0, hi = -INFINITY;
        for (int k = 0; k < 32; k++) lo = fminf(lo, x[s * 32 + k]), hi = fmaxf(hi, x[s * 32 + k]);
        sca[s] = (hi - lo) / 15, off[s] = -lo;
        msc = fmaxf(msc, sca[s]), moff = fmaxf(moff, off[s]);
    }
    uint16_t dh = eng_f32_to_f16(msc / 63), mh = eng_f32_to_f16(moff / 63);
    float d = eng_f16_to_f32(dh), dmin = eng_f16_to_f32(mh);
    int sc[8], mn[8];
    memset(blk, 0, 144);
    blk[0] = (unsigned char)(dh & 0xff), blk[1] = (unsigned char)(dh >> 8);
    blk[2] = (unsigned char)(mh & 0xff), blk[3] = (unsigned char)(mh >> 8);
    for (int s = 0; s < 8; s++) {
        sc[s] = d > 0 ? (int)lrintf(sca[s] / d) : 0;
        mn[s] = dmin > 0 ? (int)lrintf(off[s] / dmin) : 0;
        sc[s] = sc[s] > 63 ? 63 : sc[s], mn[s] = mn[s] > 63 ? 63 : mn[s];
        float step = d * (float)sc[s], base = dmin * (float)mn[s];
        for (int k = 0; k < 32; k++) {
            int q = step > 0 ? (int)lrintf((x[s * 32 + k] + base) / step) : 0;
            q = q < 0 ? 0 : q > 15 ? 15 : q;
            blk[16 + 32 * (s / 2) + k] |= (unsigned char)(q << (4 * (s % 2)));
        }
    }
    unsigned char *sb = blk + 4; /* the 6-bit packing eng_gguf decodes */
    for (int j = 0; j < 4; j++) {
        sb[j] = (unsigned char)((sc[j] & 63) | (sc[j + 4] >> 4) << 6);
        sb[j + 4] = (unsigned char)((mn[j] & 63) | (mn[j + 4] >> 4) << 6);
        sb[j + 8] = (unsigned char)((sc[j + 4] & 15) | (mn[j + 4] & 15) << 4);
    }
}

/* The type tensor t of spec s is stored in. */
static int tiny_type(const tiny_spec *s, const char *name, int n_dims, int64_t cols) {
    if (n_dims != 2) return ENG_GGML_TYPE_F32;
    if (s->q4 == TINY_Q4_0) return ENG_GGML_TYPE_Q4_0;
    if (s->q4 == TINY_Q4_K)
        return cols % 256 == 0 && !strstr(name, "attn_v") ? ENG_GGML_TYPE_Q4_K : ENG_GGML_TYPE_Q8_0;
    return s->q8_0 ? ENG_GGML_TYPE_Q8_0 : ENG_GGML_TYPE_F32;
}

static uint64_t tiny_rng(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

int tiny_model_write(const char *path, const tiny_spec *s, char *err, size_t errlen) {
    tiny_t t[16 * 16 + 4];
    int nt = 0, g3 = !strcmp(s->arch, "gemma3");
    int E = s->n_embd, nq = s->n_head * s->head_dim, nkv = s->n_head_kv * s->head_dim;
#define ADD(nm, d0, d1, isnorm)                      \
    do {                                             \
        tiny_t *x = &t[nt++];                        \
        snprintf(x->name, sizeof x->name, "%s", nm); \
        x->ne[0] = d0;                               \
        x->ne[1] = d1;                               \
        x->n_dims = d1 > 0 ? 2 : 1;                  \
        if (d1 <= 0) x->ne[1] = 1;                   \
        x->norm = isnorm;                            \
    } while (0)
    char nm[64];
    ADD("token_embd.weight", E, s->n_vocab, 0);
    ADD("output_norm.weight", E, 0, 1);
    for (int i = 0; i < s->n_layer; i++) {
        int owner = !s->ext || s->kv_src[i] == i;
#define L(x) (snprintf(nm, sizeof nm, "blk.%d.%s.weight", i, x), nm)
        ADD(L("attn_norm"), E, 0, 1);
        ADD(L("attn_q"), E, nq, 0);
        if (owner) {
            ADD(L("attn_k"), E, nkv, 0);
            ADD(L("attn_v"), E, nkv, 0);
        }
        ADD(L("attn_output"), nq, E, 0);
        if (g3) {
            ADD(L("attn_q_norm"), s->head_dim, 0, 1);
            if (owner) ADD(L("attn_k_norm"), s->head_dim, 0, 1);
            ADD(L("post_attention_norm"), E, 0, 1);
            ADD(L("post_ffw_norm"), E, 0, 1);
        }
        ADD(L("ffn_norm"), E, 0, 1);
        ADD(L("ffn_gate"), E, s->n_ff, 0);
        ADD(L("ffn_up"), E, s->n_ff, 0);
        ADD(L("ffn_down"), s->n_ff, E, 0);
#undef L
    }
#undef ADD
    eng_gguf_writer *w = NULL;
    FILE *f = NULL;
    float *buf = NULL;
    int rc = -1;
    if (eng_gguf_writer_new(0, &w) != 0) goto out;
    char k[96];
#define KEY(x) (snprintf(k, sizeof k, "%s.%s", s->arch, x), k)
    eng_gguf_writer_add_str(w, "general.architecture", s->arch);
    eng_gguf_writer_add_u32(w, KEY("context_length"), 4096);
    eng_gguf_writer_add_u32(w, KEY("embedding_length"), (uint32_t)E);
    eng_gguf_writer_add_u32(w, KEY("block_count"), (uint32_t)s->n_layer);
    eng_gguf_writer_add_u32(w, KEY("feed_forward_length"), (uint32_t)s->n_ff);
    eng_gguf_writer_add_u32(w, KEY("attention.head_count"), (uint32_t)s->n_head);
    eng_gguf_writer_add_u32(w, KEY("attention.head_count_kv"), (uint32_t)s->n_head_kv);
    eng_gguf_writer_add_u32(w, KEY("attention.key_length"), (uint32_t)s->head_dim);
    eng_gguf_writer_add_u32(w, KEY("attention.value_length"), (uint32_t)s->head_dim);
    eng_gguf_writer_add_f32(w, KEY("attention.layer_norm_rms_epsilon"), 1e-6f);
    eng_gguf_writer_add_f32(w, KEY("rope.freq_base"), g3 ? 1e6f : 10000.0f);
    eng_gguf_writer_add_u32(w, KEY("vocab_size"), (uint32_t)s->n_vocab);
    if (g3)
        eng_gguf_writer_add_u32(w, KEY("attention.sliding_window"), (uint32_t)s->sliding_window);
    if (s->ext) {
        int32_t a[16], b[16];
        for (int i = 0; i < s->n_layer; i++) a[i] = s->window[i], b[i] = s->kv_src[i];
        eng_gguf_writer_add_arr(w, KEY("attention.layer_window"), ENG_GGUF_TYPE_I32, a,
                                (uint64_t)s->n_layer);
        eng_gguf_writer_add_arr(w, KEY("attention.layer_kv_source"), ENG_GGUF_TYPE_I32, b,
                                (uint64_t)s->n_layer);
    }
#undef KEY
    for (int i = 0; i < nt; i++)
        eng_gguf_writer_add_tensor(w, t[i].name, tiny_type(s, t[i].name, t[i].n_dims, t[i].ne[0]),
                                   t[i].n_dims, t[i].ne);
    if (!(f = fopen(path, "wb"))) goto out;
    eng_gguf_writer_begin(w, f);
    uint64_t x = s->seed;
    for (int i = 0; i < nt; i++) {
        size_t n = (size_t)t[i].ne[0] * t[i].ne[1];
        float *nb = realloc(buf, n * sizeof *buf);
        if (!nb) goto out;
        buf = nb;
        float amp = t[i].norm ? 0.2f : 1.7f / sqrtf((float)t[i].ne[0]);
        for (size_t j = 0; j < n; j++) {
            float u = (float)((double)(tiny_rng(&x) >> 11) / 9007199254740992.0 * 2 - 1);
            buf[j] = (t[i].norm ? 1.0f : 0.0f) + amp * u;
        }
        int type = tiny_type(s, t[i].name, t[i].n_dims, t[i].ne[0]);
        if (type == ENG_GGML_TYPE_Q4_0 || type == ENG_GGML_TYPE_Q4_K) {
            unsigned char blk[144];
            int bl = type == ENG_GGML_TYPE_Q4_0 ? 32 : 256;
            for (size_t b = 0; b < n / (size_t)bl; b++) {
                if (bl == 32) tiny_q4_0(buf + b * 32, blk);
                else tiny_q4_k(buf + b * 256, blk);
                eng_gguf_writer_write(w, blk, bl == 32 ? 18 : 144);
            }
            continue;
        }
        if (type == ENG_GGML_TYPE_Q8_0) { /* as llama.cpp: d = amax/127 (f16), q = round(x/d) */
            for (size_t b = 0; b < n / 32; b++) {
                unsigned char blk[34];
                float amax = 0;
                for (int k = 0; k < 32; k++) amax = fmaxf(amax, fabsf(buf[b * 32 + k]));
                uint16_t dh = eng_f32_to_f16(amax / 127.0f);
                float d = eng_f16_to_f32(dh);
                blk[0] = (unsigned char)(dh & 0xff);
                blk[1] = (unsigned char)(dh >> 8);
                for (int k = 0; k < 32; k++)
                    blk[2 + k] = (unsigned char)(int8_t)(d > 0 ? lrintf(buf[b * 32 + k] / d) : 0);
                eng_gguf_writer_write(w, blk, sizeof blk);
            }
            continue;
        }
        eng_gguf_writer_write(w, buf, n * sizeof *buf);
    }
    rc = eng_gguf_writer_finish(w, err, errlen) == 0 ? 0 : -1;
out:
    if (rc && err && errlen && !err[0]) snprintf(err, errlen, "cannot write %s", path);
    if (f) fclose(f);
    free(buf);
    eng_gguf_writer_free(w);
    return rc;
}
