/*
 * model.c -- loading a GGUF into an eng_model: configuration, tensor
 * checks, weight conversion (int8 per-channel quantisation or fp32
 * dequantisation), Q/K/V and gate/up fusion, the digest, the thread pool
 * and the backend table.
 *
 * Quantisation: each output channel (weight row) r gets scale
 * s_r = max_k |w_rk| / 127 and q_rk = round(w_rk / s_r) in [-127, 127]
 * (F32, F16, BF16 rows, converted to float with eng_gguf_row_to_f32).
 * Q8_0 tensors keep their int8 values and their 32-value block scales
 * (f16 -> float; a -128 from a hostile file is clamped to -127, the
 * kernels' operand range) when every tensor fused into the weight is Q8_0.
 * Measured on llama-1b's Q8_0 weights (tests/bench/q8_0_error.py):
 * requantising per channel adds 0.73% RMS weight error vs the file (keeping
 * blocks: 0%) and raises the W8A8 GEMM output error (per-token int8
 * activations) from 0.83% to 1.11% for Gaussian activations, 5.40% to 5.45%
 * with outlier channels (activation quantisation then dominates); from a
 * float source, Q8_0 blocks give 0.53% weight error vs 0.88% for Q8_0 ->
 * per channel.
 * Keeping the block scales is better on every measure, so it is kept.
 *
 * The other ggml block formats (gguf_quant.c) also use 32-value block
 * scales when every tensor fused into a weight is a block format:
 * Q4_0, Q5_0 and IQ4_NL are, like Q8_0, d times a small integer, so their
 * codes and fp16 d are kept exactly (eng_gguf_quant_codes); Q4_1, Q5_1,
 * Q2_K..Q6_K and IQ4_XS are dequantised to float (eng_gguf_row_to_f32) and
 * requantised per 32 values, d = fp16(max|w| / 127) (the packer stores
 * fp16 scales, so q = round(w / d) uses the rounded d), q clamped to +-127.
 * Measured over every non-Q8_0 linear weight of Gemma 3 270M Q4_K_M (Q4_K
 * 23.6M, Q5_0 63.4M, Q6_K 11.8M values; tests/bench/q_block_error.py, 32
 * tokens, per-token int8 activations, error vs the float GEMM with the
 * dequantised weights), per channel / block-32 requantised / as loaded
 * (Q5_0 codes kept, K formats block-32):
 *   weights                     0.863% / 0.527% / 0.214% (Q5_0 0%)
 *   GEMM, Gaussian activations  1.153% / 0.929% / 0.794%
 *   GEMM, 4 outlier channels    4.022% / 3.966% / 3.932%
 *   GEMM, normed embeddings     2.044% / 1.937% / 1.862% (q/k/v, gate/up)
 * so block scales win for these types too.  F32/F16/BF16 weights stay per
 * channel.  Conversion runs on the pool, 64 rows per task.
 *
 * Rope frequencies: per layer kind (global / local), frequency i =
 * (float)(1 / base^(2i/head_dim)) / rope_freqs[i] (Llama 3 factors, when
 * the file has them) * rope_freq_scale (linear scaling), in float; the
 * forward pass hands the table to the backend's rope; YaRN mixes the
 * interpolated and original frequencies per pair (eng_config.h).  Without
 * scaling the table is exactly the one kern_rope builds from the base.
 *
 * Digest: a 64-bit multiply-rotate hash over the configuration fields that
 * affect numerics (the rope scales only when not 1, so unscaled models keep
 * their digests) and, for every tensor in file order, its name, type, shape
 * and data bytes, finally mixed with the precision.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_model_int.h"
#include "kern_gemm.h"
#include "eng_err.h"

#define LOAD_ROWS_PER_TASK 64

/* ---- digest ---------------------------------------------------------------- */

static uint64_t dg_mix(uint64_t h, uint64_t w) {
    h ^= w * 0x9E3779B97F4A7C15ull;
    h = (h << 31) | (h >> 33);
    return h * 0xBF58476D1CE4E5B9ull;
}

static uint64_t dg_bytes(uint64_t h, const void *p, uint64_t n) {
    const unsigned char *b = p;
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, b + i, 8);
        h = dg_mix(h, w);
    }
    uint64_t w = 0;
    memcpy(&w, b + i, (size_t)(n - i));
    return dg_mix(dg_mix(h, w), n);
}

static uint64_t model_digest(const eng_config *c, const eng_gguf *g, eng_precision prec) {
    uint64_t h = 0x7061726C6579ull; /* "parley" */
    int ints[] = {c->arch,        c->n_vocab,        c->n_embd,   c->n_layer,    c->n_head,
                  c->n_head_kv,   c->head_dim,       c->n_ff,     c->rope_type,  c->norm_add_one,
                  c->has_qk_norm, c->has_post_norms, c->ffn_gelu, c->tied_output};
    float fl[] = {c->norm_eps,   c->rope_base,  c->rope_base_local,
                  c->attn_scale, c->embd_scale, c->final_logit_softcap};
    h = dg_bytes(h, ints, sizeof ints);
    h = dg_bytes(h, fl, sizeof fl);
    if (c->rope_freq_scale != 1.0f || c->rope_freq_scale_local != 1.0f) {
        float rs[] = {c->rope_freq_scale, c->rope_freq_scale_local};
        h = dg_bytes(h, rs, sizeof rs);
    }
    if (c->rope_yarn) {
        float yp[] = {(float)c->rope_yarn_orig_ctx, c->rope_yarn_beta_fast, c->rope_yarn_beta_slow};
        h = dg_bytes(h, yp, sizeof yp);
    }
    h = dg_bytes(h, c->window, sizeof(int) * (size_t)c->n_layer);
    h = dg_bytes(h, c->kv_src, sizeof(int) * (size_t)c->n_layer);
    for (int i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        h = dg_bytes(h, t->name, strlen(t->name));
        h = dg_mix(h, (uint64_t)t->type);
        h = dg_bytes(h, t->ne, sizeof t->ne);
        h = dg_bytes(h, t->data, t->nbytes);
    }
    return dg_mix(h, (uint64_t)prec + 1);
}

/* ---- weight conversion ----------------------------------------------------- */

typedef struct load_job {
    const eng_gguf_tensor *t; /* source tensor [rows][cols] in GGUF order */
    eng_weight *w;            /* destination */
    int row0;                 /* destination row of source row 0 */
    int rows;                 /* source rows */
    uint64_t row_bytes;       /* bytes per source row */
    float *buf;               /* per-thread row buffers, cols floats each */
    int failed;               /* set by a task whose conversion failed */
} load_job;

/* Block formats whose codes the int8 path keeps (eng_gguf_quant_codes). */
static int exact_codes(int type) {
    return type == ENG_GGML_TYPE_Q8_0 || type == ENG_GGML_TYPE_Q4_0 || type == ENG_GGML_TYPE_Q5_0 ||
           type == ENG_GGML_TYPE_IQ4_NL;
}

static void load_task(void *arg, int task, int thread) {
    load_job *j = arg;
    int cols = j->w->cols;
    float *row = j->buf + (size_t)thread * cols;
    int r0 = task * LOAD_ROWS_PER_TASK;
    int r1 = r0 + LOAD_ROWS_PER_TASK < j->rows ? r0 + LOAD_ROWS_PER_TASK : j->rows;
    for (int r = r0; r < r1; r++) {
        const char *src = (const char *)j->t->data + (uint64_t)r * j->row_bytes;
        size_t dr = (size_t)(j->row0 + r);
        if (j->w->bscale) { /* Q8_0 / Q4_0 / Q5_0 / IQ4_NL: the file's codes and scales */
            int nb = cols / ENG_Q8_0_BLOCK;
            int rc = eng_gguf_quant_codes(j->t->type, src, cols, j->w->q + dr * cols,
                                          j->w->bscale + dr * nb);
            if (rc == 0) continue;
            if (exact_codes(j->t->type)) {
                j->failed = 2;
                return;
            }
        }
        if (j->w->bscale) { /* other block formats: requantise per 32 values */
            if (eng_gguf_row_to_f32(j->t->type, src, cols, row) != 0) {
                j->failed = 1;
                return;
            }
            int nb = cols / ENG_Q8_0_BLOCK;
            for (int b = 0; b < nb; b++) {
                const float *x = row + (size_t)b * ENG_Q8_0_BLOCK;
                int8_t *q = j->w->q + dr * cols + (size_t)b * ENG_Q8_0_BLOCK;
                float amax = 0;
                for (int k = 0; k < ENG_Q8_0_BLOCK; k++)
                    if (fabsf(x[k]) > amax) amax = fabsf(x[k]);
                if (!(amax < INFINITY)) {
                    j->failed = 2;
                    return;
                }
                /* the packer keeps fp16 scales: quantise with the rounded one */
                float d = eng_f16_to_f32(eng_f32_to_f16(amax / 127.0f));
                float inv = d > 0 ? 1.0f / d : 0;
                j->w->bscale[dr * nb + b] = d;
                for (int k = 0; k < ENG_Q8_0_BLOCK; k++) {
                    float v = nearbyintf(x[k] * inv);
                    q[k] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
                }
            }
            continue;
        }
        float *dst = j->w->f ? j->w->f + dr * cols : row;
        if (eng_gguf_row_to_f32(j->t->type, src, cols, dst) != 0) {
            j->failed = 1;
            return;
        }
        if (j->w->f) continue;
        float amax = 0;
        for (int k = 0; k < cols; k++)
            if (fabsf(row[k]) > amax) amax = fabsf(row[k]);
        if (!(amax < INFINITY)) {
            j->failed = 2;
            return;
        }
        int8_t *q = j->w->q + dr * cols;
        j->w->scale[dr] = amax / 127.0f;
        float inv = amax > 0 ? 127.0f / amax : 0;
        for (int k = 0; k < cols; k++) q[k] = (int8_t)nearbyintf(row[k] * inv);
    }
}

/* A ggml block format (int8 weights then use 32-value block scales). */
static int block_type(int type) {
    return eng_gguf_type_convertible(type) && type != ENG_GGML_TYPE_F32 &&
           type != ENG_GGML_TYPE_F16 && type != ENG_GGML_TYPE_BF16;
}

/* bs: keep Q8_0 block scales (int8 models whose sources are all Q8_0). */
static int weight_alloc(eng_weight *w, int rows, int cols, eng_precision prec, int bs) {
    w->rows = rows;
    w->cols = cols;
    size_t n = (size_t)rows * cols;
    if (prec == ENG_PREC_FP32) return (w->f = malloc(n * sizeof(float))) ? 0 : -1;
    w->q = malloc(n);
    if (bs && cols % ENG_Q8_0_BLOCK == 0) {
        w->bscale = malloc(n / ENG_Q8_0_BLOCK * sizeof(float));
        return w->q && w->bscale ? 0 : -1;
    }
    w->scale = malloc((size_t)rows * sizeof(float));
    return w->q && w->scale ? 0 : -1;
}

/* Repack an int8 linear weight for the GEMM (kern_gemm.h) and drop its
 * row-major copy unless keep (the embedding table, still read by rows when
 * the output projection is tied to it). */
static int weight_pack(eng_weight *w, int keep, const char *name, char *err, size_t errlen) {
    char sub[160];
    if (kern_wpack_init(&w->pk, w->rows, w->cols, w->q, w->bscale ? NULL : w->scale, w->bscale, sub,
                        sizeof sub) != 0)
        return pl_errf(err, errlen, ENG_ENOMEM, "packing %s: %s", name, sub);
    w->packed = 1;
    if (!keep) {
        free(w->q);
        free(w->scale);
        free(w->bscale);
        w->q = NULL;
        w->scale = w->bscale = NULL;
    }
    return 0;
}

static void weight_free(eng_weight *w) {
    kern_wpack_free(&w->pk);
    free(w->q);
    free(w->f);
    free(w->scale);
    free(w->bscale);
    memset(w, 0, sizeof *w);
}

/* Append tensor `name` ([rows][w->cols]) into w at row row0. */
static int load_rows(eng_model *m, eng_weight *w, int row0, const char *name, int rows, char *err,
                     size_t errlen) {
    const eng_gguf_tensor *t = eng_gguf_find_tensor(m->g, name);
    if (!t) return pl_errf(err, errlen, ENG_EINVAL, "tensor %s missing", name);
    if (t->ne[0] != w->cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1 ||
        row0 + rows > w->rows)
        return pl_errf(err, errlen, ENG_EINVAL, "tensor %s has shape [%lld, %lld], want [%d, %d]",
                       name, (long long)t->ne[0], (long long)t->ne[1], w->cols, rows);
    load_job j = {.t = t, .w = w, .row0 = row0, .rows = rows};
    if (w->bscale && !block_type(t->type))
        return pl_errf(err, errlen, ENG_EINVAL,
                       "tensor %s: mixed block / float types in one weight", name);
    if (eng_gguf_row_bytes(t->type, w->cols, &j.row_bytes) != 0 ||
        j.row_bytes * (uint64_t)rows > t->nbytes)
        return pl_errf(err, errlen, ENG_EINVAL, "tensor %s: unsupported type %s", name,
                       eng_gguf_type_name(t->type));
    j.buf = malloc((size_t)kern_pool_size(m->pool) * w->cols * sizeof(float));
    if (!j.buf) return pl_errf(err, errlen, ENG_ENOMEM, "out of memory loading %s", name);
    kern_pool_run(m->pool, load_task, &j, (rows + LOAD_ROWS_PER_TASK - 1) / LOAD_ROWS_PER_TASK);
    free(j.buf);
    if (j.failed == 1)
        return pl_errf(err, errlen, ENG_EINVAL, "tensor %s: cannot convert type %s", name,
                       eng_gguf_type_name(t->type));
    if (j.failed == 2)
        return pl_errf(err, errlen, ENG_EINVAL, "tensor %s holds a non-finite value", name);
    return 0;
}

static int load_vec(eng_model *m, float **out, const char *name, int n, int add_one, char *err,
                    size_t errlen) {
    const eng_gguf_tensor *t = eng_gguf_find_tensor(m->g, name);
    if (!t) return pl_errf(err, errlen, ENG_EINVAL, "tensor %s missing", name);
    if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return pl_errf(err, errlen, ENG_EINVAL, "tensor %s has %lld values, want %d", name,
                       (long long)t->ne[0], n);
    uint64_t nb;
    if (eng_gguf_row_bytes(t->type, n, &nb) != 0 || nb > t->nbytes)
        return pl_errf(err, errlen, ENG_EINVAL, "tensor %s: unsupported type", name);
    float *v = malloc((size_t)n * sizeof *v);
    if (!v) return pl_errf(err, errlen, ENG_ENOMEM, "out of memory");
    if (eng_gguf_row_to_f32(t->type, t->data, n, v) != 0) {
        free(v);
        return pl_errf(err, errlen, ENG_EINVAL, "tensor %s: cannot convert", name);
    }
    if (add_one)
        for (int i = 0; i < n; i++) v[i] += 1.0f;
    *out = v;
    return 0;
}

/* 1 when every named tensor exists and is in a block format (Q8_0 kept,
 * the others requantised to Q8_0-style 32-value blocks; NULL-terminated). */
static int all_q8_0(const eng_model *m, const char *const *names) {
    for (; *names; names++) {
        const eng_gguf_tensor *t = eng_gguf_find_tensor(m->g, *names);
        if (!t || !block_type(t->type)) return 0;
    }
    return 1;
}

static int load_layer(eng_model *m, int i, char *err, size_t errlen) {
    const eng_config *c = &m->cfg;
    eng_layer *L = &m->layers[i];
    int E = c->n_embd, hd = c->head_dim, nq = c->n_head * hd, nkv = c->n_head_kv * hd;
    int owner = c->kv_src[i] == i, rc;
    char n[96];
#define LNAME(s) (snprintf(n, sizeof n, "blk.%d.%s.weight", i, s), n)
    int add1 = c->norm_add_one;
    if ((rc = load_vec(m, &L->attn_norm, LNAME("attn_norm"), E, add1, err, errlen))) return rc;
    if ((rc = load_vec(m, &L->ffn_norm, LNAME("ffn_norm"), E, add1, err, errlen))) return rc;
    if (c->has_qk_norm) {
        if ((rc = load_vec(m, &L->q_norm, LNAME("attn_q_norm"), hd, add1, err, errlen))) return rc;
        if (owner && (rc = load_vec(m, &L->k_norm, LNAME("attn_k_norm"), hd, add1, err, errlen)))
            return rc;
    }
    if (c->has_post_norms) {
        if ((rc = load_vec(m, &L->post_attn_norm, LNAME("post_attention_norm"), E, add1, err,
                           errlen)))
            return rc;
        if ((rc = load_vec(m, &L->post_ffn_norm, LNAME("post_ffw_norm"), E, add1, err, errlen)))
            return rc;
    }
    if (c->has_qkv_bias) {
        int rows = nq + (owner ? 2 * nkv : 0);
        float *bk = NULL, *bv = NULL;
        if ((rc = load_vec(m, &L->bqkv, (snprintf(n, sizeof n, "blk.%d.attn_q.bias", i), n), nq, 0,
                           err, errlen)))
            return rc;
        if (owner) {
            float *all = realloc(L->bqkv, (size_t)rows * sizeof(float));
            if (!all) return pl_errf(err, errlen, ENG_ENOMEM, "out of memory for layer %d", i);
            L->bqkv = all;
            if ((rc = load_vec(m, &bk, (snprintf(n, sizeof n, "blk.%d.attn_k.bias", i), n), nkv, 0,
                               err, errlen)))
                return rc;
            if ((rc = load_vec(m, &bv, (snprintf(n, sizeof n, "blk.%d.attn_v.bias", i), n), nkv, 0,
                               err, errlen))) {
                free(bk);
                return rc;
            }
            memcpy(all + nq, bk, (size_t)nkv * sizeof(float));
            memcpy(all + nq + nkv, bv, (size_t)nkv * sizeof(float));
            free(bk);
            free(bv);
        }
    }
    char nq_[96], nk_[96], nv_[96], no_[96], ng_[96], nu_[96], nd_[96];
    snprintf(nq_, sizeof nq_, "blk.%d.attn_q.weight", i);
    snprintf(nk_, sizeof nk_, "blk.%d.attn_k.weight", i);
    snprintf(nv_, sizeof nv_, "blk.%d.attn_v.weight", i);
    snprintf(no_, sizeof no_, "blk.%d.attn_output.weight", i);
    snprintf(ng_, sizeof ng_, "blk.%d.ffn_gate.weight", i);
    snprintf(nu_, sizeof nu_, "blk.%d.ffn_up.weight", i);
    snprintf(nd_, sizeof nd_, "blk.%d.ffn_down.weight", i);
    const char *qkv[] = {nq_, owner ? nk_ : NULL, nv_, NULL}, *o[] = {no_, NULL},
               *gu[] = {ng_, nu_, NULL}, *dn[] = {nd_, NULL};
    if (weight_alloc(&L->wqkv, nq + (owner ? 2 * nkv : 0), E, m->prec, all_q8_0(m, qkv)) ||
        weight_alloc(&L->wo, E, nq, m->prec, all_q8_0(m, o)) ||
        weight_alloc(&L->wgu, 2 * c->n_ff, E, m->prec, all_q8_0(m, gu)) ||
        weight_alloc(&L->wdown, E, c->n_ff, m->prec, all_q8_0(m, dn)))
        return pl_errf(err, errlen, ENG_ENOMEM, "out of memory for layer %d", i);
    if ((rc = load_rows(m, &L->wqkv, 0, LNAME("attn_q"), nq, err, errlen))) return rc;
    if (owner) {
        if ((rc = load_rows(m, &L->wqkv, nq, LNAME("attn_k"), nkv, err, errlen))) return rc;
        if ((rc = load_rows(m, &L->wqkv, nq + nkv, LNAME("attn_v"), nkv, err, errlen))) return rc;
    }
    if ((rc = load_rows(m, &L->wo, 0, LNAME("attn_output"), E, err, errlen))) return rc;
    if ((rc = load_rows(m, &L->wgu, 0, LNAME("ffn_gate"), c->n_ff, err, errlen))) return rc;
    if ((rc = load_rows(m, &L->wgu, c->n_ff, LNAME("ffn_up"), c->n_ff, err, errlen))) return rc;
    if ((rc = load_rows(m, &L->wdown, 0, LNAME("ffn_down"), E, err, errlen))) return rc;
    if (m->prec == ENG_PREC_INT8) {
        snprintf(n, sizeof n, "layer %d", i);
        if ((rc = weight_pack(&L->wqkv, 0, n, err, errlen)) ||
            (rc = weight_pack(&L->wo, 0, n, err, errlen)) ||
            (rc = weight_pack(&L->wgu, 0, n, err, errlen)) ||
            (rc = weight_pack(&L->wdown, 0, n, err, errlen)))
            return rc;
    }
#undef LNAME
    return 0;
}

/* The two rope frequency tables (global, local layers); see the top. */
static int rope_tables(eng_model *m, char *err, size_t errlen) {
    const eng_config *c = &m->cfg;
    int half = c->head_dim / 2, rc;
    float *ff = NULL;
    if (c->rope_freq_factors) {
        if ((rc = load_vec(m, &ff, "rope_freqs.weight", half, 0, err, errlen))) return rc;
        for (int i = 0; i < half; i++)
            if (!(ff[i] > 0 && ff[i] < INFINITY)) {
                rc = pl_errf(err, errlen, ENG_EINVAL,
                             "tensor rope_freqs.weight[%d] = %g: rope "
                             "frequency factors must be finite and > 0",
                             i, (double)ff[i]);
                free(ff);
                return rc;
            }
    }
    m->rope_freq = malloc(2 * (size_t)half * sizeof(float));
    if (!m->rope_freq) {
        free(ff);
        return pl_errf(err, errlen, ENG_ENOMEM, "out of memory");
    }
    m->rope_freq_local = m->rope_freq + half;
    for (int k = 0; k < 2; k++) {
        double base = k ? c->rope_base_local : c->rope_base;
        float scale = k ? c->rope_freq_scale_local : c->rope_freq_scale;
        float *t = k ? m->rope_freq_local : m->rope_freq;
        double lo = 0, hi = 0;
        if (c->rope_yarn) { /* correction range, eng_config.h */
            double d = c->head_dim, n = c->rope_yarn_orig_ctx;
            lo = floor(d * log(n / (2 * M_PI * c->rope_yarn_beta_fast)) / (2 * log(base)));
            hi = ceil(d * log(n / (2 * M_PI * c->rope_yarn_beta_slow)) / (2 * log(base)));
            if (lo < 0) lo = 0;
            if (hi > d - 1) hi = d - 1;
        }
        for (int i = 0; i < half; i++) {
            double e = 1.0 / pow(base, (double)(2 * i) / c->head_dim);
            if (c->rope_yarn) {
                double y = (i - lo) / (hi - lo > 0.001 ? hi - lo : 0.001);
                double r = 1 - (y < 0 ? 0 : y > 1 ? 1 : y);
                t[i] = (float)(e * scale * (1 - r) + e * r);
                continue;
            }
            float f = (float)e;
            if (ff) f /= ff[i];
            t[i] = f * scale;
        }
    }
    free(ff);
    return 0;
}

int eng_model_load(const char *path, const eng_load_opts *o, eng_model **out, char *err,
                   size_t errlen) {
    *out = NULL;
    eng_load_opts def = {ENG_PREC_INT8, 0, 16};
    if (!o) o = &def;
    if (o->prec != ENG_PREC_INT8 && o->prec != ENG_PREC_FP32)
        return pl_errf(err, errlen, ENG_EINVAL, "unknown precision %d", (int)o->prec);
    int rc = ENG_ENOMEM;
    eng_model *m = calloc(1, sizeof *m);
    if (!m) return pl_errf(err, errlen, ENG_ENOMEM, "out of memory");
    m->prec = o->prec;
    pthread_mutex_init(&m->scratch_mu, NULL);
    char sub[PL_ERR_LEN];
    int grc = eng_gguf_open(path, &m->g, sub, sizeof sub);
    if (grc != 0) {
        /* keep the cause: out of memory stays ENG_ENOMEM, the rest is I/O */
        rc = pl_errf(err, errlen, pl_err_recode(grc, PL_ERR_ENG, ENG_EIO), "%s", sub);
        goto err;
    }
    if (eng_config_from_gguf(m->g, &m->cfg, sub, sizeof sub) != 0 ||
        eng_config_check_tensors(&m->cfg, m->g, sub, sizeof sub) != 0) {
        rc = pl_errf(err, errlen, ENG_EINVAL, "%s: %s", path, sub);
        goto err;
    }
    const eng_config *c = &m->cfg;
    if (eng_kv_layout_init_ex(&m->kv, c, o->block_tokens > 0 ? o->block_tokens : 16,
                              o->prec == ENG_PREC_FP32, sub, sizeof sub) != 0) {
        rc = pl_errf(err, errlen, ENG_EINVAL, "%s", sub);
        goto err;
    }
    if (kern_pool_create(o->n_threads, &m->pool) != 0) {
        rc = pl_errf(err, errlen, ENG_ENOMEM, "cannot create %d compute threads", o->n_threads);
        goto err;
    }
    eng_backend_cpu_init(&m->be, m->pool);
    if ((rc = rope_tables(m, err, errlen))) goto err;
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->layers) goto err_mem;
    const char *embd_names[] = {"token_embd.weight", NULL}, *out_names[] = {"output.weight", NULL};
    if (weight_alloc(&m->embd, c->n_vocab, c->n_embd, m->prec, all_q8_0(m, embd_names)))
        goto err_mem;
    if ((rc = load_rows(m, &m->embd, 0, "token_embd.weight", c->n_vocab, err, errlen))) goto err;
    if (c->tied_output) {
        /* the projection reads the embedding's values (out_tied): fp32
         * shares the array; int8 packs it for the GEMM and then looks the
         * embedding rows up in that pack (kern_wpack_row_f32, bit-identical),
         * so the table is held once */
        m->out = m->embd;
        m->out_tied = 1;
        memset(&m->out.pk, 0, sizeof m->out.pk);
        if (m->prec == ENG_PREC_INT8) {
            if ((rc = weight_pack(&m->out, 0, "output", err, errlen))) goto err;
            m->embd.q = NULL;
            m->embd.scale = m->embd.bscale = NULL;
        }
    } else {
        if (weight_alloc(&m->out, c->n_vocab, c->n_embd, m->prec, all_q8_0(m, out_names)))
            goto err_mem;
        if ((rc = load_rows(m, &m->out, 0, "output.weight", c->n_vocab, err, errlen))) goto err;
        if (m->prec == ENG_PREC_INT8 && (rc = weight_pack(&m->out, 0, "output", err, errlen)))
            goto err;
    }
    if ((rc = load_vec(m, &m->out_norm, "output_norm.weight", c->n_embd, c->norm_add_one, err,
                       errlen)))
        goto err;
    for (int i = 0; i < c->n_layer; i++)
        if ((rc = load_layer(m, i, err, errlen))) goto err;
    m->digest = model_digest(c, m->g, m->prec);
    *out = m;
    return 0;
err_mem:
    rc = pl_errf(err, errlen, ENG_ENOMEM, "out of memory loading %s", path);
err:
    eng_model_free(m);
    return rc;
}

void eng_model_free(eng_model *m) {
    if (!m) return;
    if (m->layers)
        for (int i = 0; i < m->cfg.n_layer; i++) {
            eng_layer *L = &m->layers[i];
            free(L->attn_norm);
            free(L->q_norm);
            free(L->k_norm);
            free(L->post_attn_norm);
            free(L->ffn_norm);
            free(L->post_ffn_norm);
            free(L->bqkv);
            weight_free(&L->wqkv);
            weight_free(&L->wo);
            weight_free(&L->wgu);
            weight_free(&L->wdown);
        }
    free(m->layers);
    if (m->out_tied) kern_wpack_free(&m->out.pk);
    else weight_free(&m->out);
    weight_free(&m->embd);
    free(m->out_norm);
    free(m->rope_freq);
    kern_pool_destroy(m->pool);
    eng_gguf_close(m->g);
    free(m->scratch);
    pthread_mutex_destroy(&m->scratch_mu);
    free(m);
}

const eng_config *eng_model_config(const eng_model *m) { return &m->cfg; }
const eng_kv_layout *eng_model_kv_layout(const eng_model *m) { return &m->kv; }
const eng_gguf *eng_model_gguf(const eng_model *m) { return m->g; }
eng_precision eng_model_precision(const eng_model *m) { return m->prec; }
int eng_model_n_threads(const eng_model *m) { return kern_pool_size(m->pool); }
uint64_t eng_model_digest(const eng_model *m) { return m->digest; }

static size_t weight_bytes(const eng_weight *w) {
    return w->packed ? kern_wpack_bytes(&w->pk)
           : w->f    ? (size_t)w->rows * w->cols * sizeof(float)
                     : 0;
}

/* Bytes of a weight's row-major arrays (kept only by the embedding, for row lookups). */
static size_t row_bytes(const eng_weight *w) {
    size_t n = (size_t)w->rows * w->cols;
    return (w->q ? n : 0) + (w->scale ? (size_t)w->rows * sizeof(float) : 0) +
           (w->bscale ? n / 32 * sizeof(float) : 0) + (w->f ? n * sizeof(float) : 0);
}

static size_t vec_bytes(const float *v, int n) { return v ? (size_t)n * sizeof(float) : 0; }

size_t eng_model_resident_bytes(const eng_model *m) {
    const eng_config *c = &m->cfg;
    size_t n = row_bytes(&m->embd) + (m->embd.packed ? kern_wpack_bytes(&m->embd.pk) : 0);
    /* a tied fp32 output is the embedding's own array; a tied int8 one has its own pack */
    if (!m->out_tied || m->out.packed)
        n += m->out.packed ? kern_wpack_bytes(&m->out.pk) : row_bytes(&m->out);
    n += vec_bytes(m->out_norm, c->n_embd) + vec_bytes(m->rope_freq, c->head_dim);
    for (int i = 0; i < c->n_layer; i++) {
        const eng_layer *L = &m->layers[i];
        n += weight_bytes(&L->wqkv) + weight_bytes(&L->wo) + weight_bytes(&L->wgu) +
             weight_bytes(&L->wdown);
        n += vec_bytes(L->bqkv, L->wqkv.rows) + vec_bytes(L->attn_norm, c->n_embd) +
             vec_bytes(L->post_attn_norm, c->n_embd) + vec_bytes(L->ffn_norm, c->n_embd) +
             vec_bytes(L->post_ffn_norm, c->n_embd) + vec_bytes(L->q_norm, c->head_dim) +
             vec_bytes(L->k_norm, c->head_dim);
    }
    return n;
}

static double weight_macs(const eng_weight *w) {
    return w->packed || w->f ? (double)w->rows * (double)w->cols : 0;
}

void eng_model_weight_macs(const eng_model *m, double *layers, double *output) {
    double n = 0;
    for (int i = 0; i < m->cfg.n_layer; i++) {
        const eng_layer *L = &m->layers[i];
        n += weight_macs(&L->wqkv) + weight_macs(&L->wo) + weight_macs(&L->wgu) +
             weight_macs(&L->wdown);
    }
    *layers = n;
    *output = weight_macs(&m->out);
}

size_t eng_model_weight_bytes(const eng_model *m) {
    size_t n = weight_bytes(&m->out);
    for (int i = 0; i < m->cfg.n_layer; i++) {
        const eng_layer *L = &m->layers[i];
        n += weight_bytes(&L->wqkv) + weight_bytes(&L->wo) + weight_bytes(&L->wgu) +
             weight_bytes(&L->wdown);
    }
    return n;
}
