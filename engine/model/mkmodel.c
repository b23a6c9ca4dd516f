/*
 * mkmodel.c -- eng_mkmodel (eng_mkmodel.h): write synthetic GGUF models
 * with deterministic random weights for tests, demos and benchmarks.  The
 * command `parley mkmodel` is engine/cli/mkmodel_cmd.c.
 *
 * Presets (shapes in mk_presets below):
 *   tiny-llama   llama, GQA (4 heads, 2 KV heads), 4 layers, untied output
 *   tiny-gemma3  gemma3, MQA, 8 layers, sliding window 16 (5 local : 1 global)
 *   cai-tiny     llama + parley keys: MQA, 12 layers, 1 global in 6,
 *                local window 1024, KV shared by adjacent layers
 *   cai-1b       the same design at ~1.1B parameters: n_embd 2048, 24 layers,
 *                16 heads of 128, 1 KV head, n_ff 5632, vocab 32768, tied
 *   llama-1b     Llama-3.2-1B shapes: n_embd 2048, 16 layers, 32 heads,
 *                8 KV heads, head_dim 64, n_ff 8192, vocab 128256, rope
 *                base 500000, tied embeddings
 * Character.AI layer plan (cai-*): layer i is global iff (i+1) % 6 == 0,
 * else local with the window.  Local layers share KV in adjacent pairs
 * (odd layer 2k+1 reads layer 2k when both are local); a global layer
 * cannot pair with its local neighbour (sharing needs the same window), so
 * global layers pair among themselves: every second global layer reads the
 * previous global layer's KV.  24 layers: 12 local + 2 global KV owners.
 *
 * Weights: every matrix ~ N(0, 1/fan_in) (std 1/sqrt(ne[0]), so each
 * projection keeps unit-scale activations; ~0.02 at width 2048), norms 1.
 * Q8_0 blocks hold int8 codes drawn from a clipped normal (sigma 32) through
 * a 65536-entry inverse-CDF table fed by xoshiro256** seeded per tensor
 * from (seed, tensor name), and one scale per tensor; F16 stores the same
 * values.  Same seed and options -> byte-identical file.  Data is generated
 * straight into a buffered stream, so a 1B model takes seconds.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_config.h"
#include "eng_err.h"
#include "eng_gguf_write.h"
#include "eng_mkmodel.h"
#include "eng_model.h"
#include "mkmodel_vocab.h"
#include "pl_time.h"
#include "pl_hash.h"

typedef struct mk_preset {
    const char *name; /* --preset value */
    const char *arch; /* general.architecture */
    int n_vocab, n_embd, n_layer, n_head, n_head_kv, head_dim, n_ff, n_ctx;
    float rope_base; /* global rope theta */
    float eps;       /* rms eps */
    int window;      /* local window (gemma3: sliding_window; cai: layer windows) */
    int cai;         /* write parley's layer_window / layer_kv_source keys */
    int tied;        /* no output.weight */
} mk_preset;

static const mk_preset mk_presets[] = {
    {"tiny-llama", "llama", 768, 128, 4, 4, 2, 32, 384, 2048, 10000.f, 1e-5f, 0, 0, 0},
    {"tiny-gemma3", "gemma3", 768, 128, 8, 4, 1, 32, 256, 2048, 1e6f, 1e-6f, 16, 0, 1},
    {"cai-tiny", "llama", 768, 128, 12, 4, 1, 32, 384, 4096, 10000.f, 1e-5f, 1024, 1, 1},
    {"cai-1b", "llama", 32768, 2048, 24, 16, 1, 128, 5632, 8192, 500000.f, 1e-5f, 1024, 1, 1},
    {"llama-1b", "llama", 128256, 2048, 16, 32, 8, 64, 8192, 131072, 500000.f, 1e-5f, 0, 0, 1},
};
#define MK_NPRESETS (int)(sizeof mk_presets / sizeof mk_presets[0])

/* ---- deterministic random numbers ---- */

typedef struct mk_rng {
    uint64_t s[4];
} mk_rng; /* xoshiro256** state */

static uint64_t mk_splitmix(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void mk_rng_seed(mk_rng *r, uint64_t seed, const char *name) {
    uint64_t x = seed;
    x = pl_fnv1a64_str(x, name);
    for (int i = 0; i < 4; i++) r->s[i] = mk_splitmix(&x);
}

static uint64_t mk_next(mk_rng *r) {
    uint64_t *s = r->s, res = s[1] * 5;
    res = (res << 7 | res >> 57) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = s[3] << 45 | s[3] >> 19;
    return res;
}

#define MK_SIGMA 32.0 /* std of the int8 codes */

/* 16-bit uniform -> int8 code with a clipped N(0, MK_SIGMA) distribution. */
static void mk_normal_table(int8_t *tab) {
    int at = 0;
    for (int k = -127; k <= 127; k++) {
        int end = 65536;
        if (k < 127) end = (int)llround(0.5 * erfc(-((k + 0.5) / MK_SIGMA) / sqrt(2.0)) * 65536.0);
        for (; at < end; at++) tab[at] = (int8_t)k;
    }
}

/* ---- tensors ---- */

typedef struct mk_ctx {
    const mk_preset *p;                                 /* shapes */
    int type;                                           /* ENG_GGML_TYPE_Q8_0 or F16 */
    uint64_t seed;                                      /* --seed */
    int window[ENG_MAX_LAYERS], kv_src[ENG_MAX_LAYERS]; /* layer plan */
    int8_t normal[65536];                               /* inverse-CDF table */
    uint8_t *buf;                                       /* staging buffer for data */
    size_t bufcap;                                      /* its size */
} mk_ctx;

/* Tensor list in file order; calls fn for each (declare or fill). */
typedef int (*mk_fn)(mk_ctx *c, eng_gguf_writer *w, const char *name, int n_dims, int64_t ne0,
                     int64_t ne1);

static int mk_each(mk_ctx *c, eng_gguf_writer *w, mk_fn fn) {
    const mk_preset *p = c->p;
    int64_t e = p->n_embd, q = (int64_t)p->n_head * p->head_dim,
            kv = (int64_t)p->n_head_kv * p->head_dim;
    int gem = !strcmp(p->arch, "gemma3"), rc;
    char n[64];
#define MK_T(nd, a, b, ...)                          \
    do {                                             \
        snprintf(n, sizeof n, __VA_ARGS__);          \
        if ((rc = fn(c, w, n, nd, a, b))) return rc; \
    } while (0)
    MK_T(2, e, p->n_vocab, "token_embd.weight");
    for (int l = 0; l < p->n_layer; l++) {
        int own = c->kv_src[l] == l;
        MK_T(1, e, 1, "blk.%d.attn_norm.weight", l);
        MK_T(2, e, q, "blk.%d.attn_q.weight", l);
        if (own) MK_T(2, e, kv, "blk.%d.attn_k.weight", l);
        if (own) MK_T(2, e, kv, "blk.%d.attn_v.weight", l);
        MK_T(2, q, e, "blk.%d.attn_output.weight", l);
        if (gem) MK_T(1, p->head_dim, 1, "blk.%d.attn_q_norm.weight", l);
        if (gem && own) MK_T(1, p->head_dim, 1, "blk.%d.attn_k_norm.weight", l);
        if (gem) MK_T(1, e, 1, "blk.%d.post_attention_norm.weight", l);
        MK_T(1, e, 1, "blk.%d.ffn_norm.weight", l);
        MK_T(2, e, p->n_ff, "blk.%d.ffn_gate.weight", l);
        MK_T(2, e, p->n_ff, "blk.%d.ffn_up.weight", l);
        MK_T(2, p->n_ff, e, "blk.%d.ffn_down.weight", l);
        if (gem) MK_T(1, e, 1, "blk.%d.post_ffw_norm.weight", l);
    }
    MK_T(1, e, 1, "output_norm.weight");
    if (!p->tied) MK_T(2, e, p->n_vocab, "output.weight");
#undef MK_T
    return 0;
}

static int mk_declare(mk_ctx *c, eng_gguf_writer *w, const char *name, int n_dims, int64_t ne0,
                      int64_t ne1) {
    int64_t ne[2] = {ne0, ne1};
    return eng_gguf_writer_add_tensor(w, name, n_dims == 1 ? ENG_GGML_TYPE_F32 : c->type, n_dims,
                                      ne);
}

/* Generate one tensor's data row by row into the staging buffer. */
static int mk_fill(mk_ctx *c, eng_gguf_writer *w, const char *name, int n_dims, int64_t ne0,
                   int64_t ne1) {
    if (n_dims == 1) { /* norm weights: 1.0 */
        float *f = (float *)c->buf;
        for (int64_t i = 0; i < ne0; i++) f[i] = 1.0f;
        return eng_gguf_writer_write(w, c->buf, (size_t)ne0 * 4);
    }
    mk_rng r;
    mk_rng_seed(&r, c->seed, name);
    float std = 1.0f / sqrtf((float)ne0);
    uint16_t d = eng_f32_to_f16(std / (float)MK_SIGMA);
    float df = eng_f16_to_f32(d);
    uint16_t h[256];
    for (int k = -128; k < 128; k++) h[k + 128] = eng_f32_to_f16(df * (float)k);
    size_t rowb = c->type == ENG_GGML_TYPE_Q8_0 ? (size_t)ne0 / 32 * 34 : (size_t)ne0 * 2;
    int64_t rows_per = (int64_t)(c->bufcap / rowb);
    for (int64_t r0 = 0; r0 < ne1; r0 += rows_per) {
        int64_t nr = ne1 - r0 < rows_per ? ne1 - r0 : rows_per;
        uint8_t *o = c->buf;
        for (int64_t v = 0; v < nr * ne0; v += 32) { /* 32 values per step */
            int8_t q[32];
            for (int j = 0; j < 32; j += 4) {
                uint64_t x = mk_next(&r);
                for (int k = 0; k < 4; k++) q[j + k] = c->normal[(x >> (16 * k)) & 0xffff];
            }
            if (c->type == ENG_GGML_TYPE_Q8_0) {
                o[0] = (uint8_t)d;
                o[1] = (uint8_t)(d >> 8);
                memcpy(o + 2, q, 32);
                o += 34;
            } else {
                for (int j = 0; j < 32; j++) {
                    uint16_t hv = h[q[j] + 128];
                    o[2 * j] = (uint8_t)hv;
                    o[2 * j + 1] = (uint8_t)(hv >> 8);
                }
                o += 64;
            }
        }
        int rc = eng_gguf_writer_write(w, c->buf, (size_t)(o - c->buf));
        if (rc) return rc;
    }
    return 0;
}

/* Layer plan: windows and KV sources (see the file comment). */
static void mk_plan(mk_ctx *c, int window) {
    const mk_preset *p = c->p;
    int n_global = 0, prev_global = -1;
    for (int l = 0; l < p->n_layer; l++) {
        c->window[l] = 0;
        c->kv_src[l] = l;
        if (!p->cai) continue;
        c->window[l] = (l + 1) % 6 == 0 ? 0 : window;
        if (c->window[l]) {
            if (l % 2 && c->window[l - 1] == c->window[l] && c->kv_src[l - 1] == l - 1)
                c->kv_src[l] = l - 1;
        } else {
            if (n_global % 2) c->kv_src[l] = prev_global;
            prev_global = l;
            n_global++;
        }
    }
}

static void mk_key(char *k, size_t n, const char *arch, const char *suffix) {
    snprintf(k, n, "%s.%s", arch, suffix);
}

static int mk_metadata(mk_ctx *c, eng_gguf_writer *w, const eng_mkvocab *v, int window) {
    const mk_preset *p = c->p;
    const char *a = p->arch;
    char k[128], name[64];
    snprintf(name, sizeof name, "parley %s", p->name);
    eng_gguf_writer_add_str(w, "general.architecture", a);
    eng_gguf_writer_add_str(w, "general.name", name);
    eng_gguf_writer_add_u32(w, "general.alignment", 32);
    eng_gguf_writer_add_u32(w, "general.file_type", c->type == ENG_GGML_TYPE_Q8_0 ? 7 : 1);
    eng_gguf_writer_add_str(w, "parley.preset", p->name);
    eng_gguf_writer_add_u64(w, "parley.mkmodel.seed", c->seed);
#define MK_U32(s, val) (mk_key(k, sizeof k, a, s), eng_gguf_writer_add_u32(w, k, (uint32_t)(val)))
#define MK_F32(s, val) (mk_key(k, sizeof k, a, s), eng_gguf_writer_add_f32(w, k, (val)))
    MK_U32("vocab_size", p->n_vocab);
    MK_U32("context_length", p->n_ctx);
    MK_U32("embedding_length", p->n_embd);
    MK_U32("block_count", p->n_layer);
    MK_U32("feed_forward_length", p->n_ff);
    MK_U32("attention.head_count", p->n_head);
    MK_U32("attention.head_count_kv", p->n_head_kv);
    MK_U32("attention.key_length", p->head_dim);
    MK_U32("attention.value_length", p->head_dim);
    MK_U32("rope.dimension_count", p->head_dim);
    MK_F32("rope.freq_base", p->rope_base);
    MK_F32("attention.layer_norm_rms_epsilon", p->eps);
    if (!strcmp(a, "gemma3")) {
        MK_U32("attention.sliding_window", window);
        MK_F32("rope.freq_base_swa", 10000.0f);
    }
    if (p->cai) {
        int32_t win[ENG_MAX_LAYERS], src[ENG_MAX_LAYERS];
        for (int l = 0; l < p->n_layer; l++) {
            win[l] = c->window[l];
            src[l] = c->kv_src[l];
        }
        mk_key(k, sizeof k, a, "attention.layer_window");
        eng_gguf_writer_add_arr(w, k, ENG_GGUF_TYPE_I32, win, (uint64_t)p->n_layer);
        mk_key(k, sizeof k, a, "attention.layer_kv_source");
        eng_gguf_writer_add_arr(w, k, ENG_GGUF_TYPE_I32, src, (uint64_t)p->n_layer);
    }
#undef MK_U32
#undef MK_F32
    return eng_mkvocab_write(v, w);
}

const char *eng_mkmodel_preset_name(int i) {
    return i >= 0 && i < MK_NPRESETS ? mk_presets[i].name : NULL;
}

const char *eng_mkmodel_preset_describe(int i, char *buf, size_t n) {
    if (i < 0 || i >= MK_NPRESETS) return NULL;
    const mk_preset *p = &mk_presets[i];
    snprintf(buf, n, "%-6s n_embd %d, %d layers, %d heads (%d kv) x %d, n_ff %d, vocab %d%s",
             p->arch, p->n_embd, p->n_layer, p->n_head, p->n_head_kv, p->head_dim, p->n_ff,
             p->n_vocab, p->window ? ", local window" : "");
    return buf;
}

/* Write the model; returns 0 or ENG_ENOMEM / ENG_EIO with a message. */
static int mk_write(mk_ctx *c, const char *out, int window, char *err, size_t errlen) {
    eng_mkvocab v;
    eng_gguf_writer *w = NULL;
    FILE *f = NULL;
    int rc = ENG_EIO;
    if (eng_mkvocab_build(c->p->n_vocab, &v, err, errlen)) return ENG_ENOMEM;
    if (eng_gguf_writer_new(32, &w)) {
        rc = pl_errf(err, errlen, ENG_ENOMEM, "out of memory");
        goto err;
    }
    mk_metadata(c, w, &v, window);
    mk_each(c, w, mk_declare);
    if (!(f = fopen(out, "wb"))) {
        pl_errf(err, errlen, ENG_EIO, "cannot create %s", out);
        goto err;
    }
    setvbuf(f, NULL, _IOFBF, 1 << 22);
    if (!eng_gguf_writer_begin(w, f)) mk_each(c, w, mk_fill);
    if (eng_gguf_writer_finish(w, err, errlen)) goto err;
    if (fclose(f)) {
        f = NULL;
        pl_errf(err, errlen, ENG_EIO, "write error on %s", out);
        goto err;
    }
    f = NULL;
    rc = 0;
err:
    if (f) fclose(f);
    eng_gguf_writer_free(w);
    eng_mkvocab_free(&v);
    return rc;
}

void eng_mkmodel_opts_default(eng_mkmodel_opts *o) {
    memset(o, 0, sizeof *o);
    o->type = ENG_MKMODEL_Q8_0;
    o->seed = 1;
}

int eng_mkmodel(const eng_mkmodel_opts *o, char *err, size_t errlen) {
    if (!o || !o->preset || !o->out)
        return pl_errf(err, errlen, ENG_EINVAL, "--preset and --out are required");
    const mk_preset *p = NULL;
    for (int i = 0; i < MK_NPRESETS; i++)
        if (!strcmp(mk_presets[i].name, o->preset)) p = &mk_presets[i];
    if (!p) return pl_errf(err, errlen, ENG_EINVAL, "unknown preset '%s'", o->preset);
    if (o->type != ENG_MKMODEL_Q8_0 && o->type != ENG_MKMODEL_F16)
        return pl_errf(err, errlen, ENG_EINVAL, "--type must be q8_0 or f16");
    if (o->window < 0 || o->window > ENG_MKMODEL_MAX_WINDOW)
        return pl_errf(err, errlen, ENG_EINVAL, "bad --window %d (1..2^30)", o->window);
    if (o->window > 0 && !p->window)
        return pl_errf(err, errlen, ENG_EINVAL, "preset %s has no local layers (--window)",
                       p->name);
    mk_ctx *c = calloc(1, sizeof *c);
    if (!c) return pl_errf(err, errlen, ENG_ENOMEM, "out of memory");
    int win = o->window > 0 ? o->window : p->window;
    c->p = p;
    c->type = o->type == ENG_MKMODEL_F16 ? ENG_GGML_TYPE_F16 : ENG_GGML_TYPE_Q8_0;
    c->seed = o->seed;
    mk_normal_table(c->normal);
    mk_plan(c, win);
    c->bufcap = (size_t)1 << 22;
    int rc;
    if (!(c->buf = malloc(c->bufcap))) rc = pl_errf(err, errlen, ENG_ENOMEM, "out of memory");
    else if ((rc = mk_write(c, o->out, win, err, errlen)) != 0) remove(o->out);
    free(c->buf);
    free(c);
    return rc;
}
