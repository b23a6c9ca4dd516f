/*
 * model_load.c -- converting a GGUF's tensors into the backend's weights
 * and vectors: int8 per-channel quantisation, 32-value block scales, fp32
 * dequantisation or (native loads) Q4_K codes kept as the file has them;
 * Q/K/V and gate/up fusion; norm vectors and biases into backend memory.
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
 * channel.
 *
 * Parts.  Each source tensor of a weight is one eng_wpart (rows of the
 * fused weight), so a backend can keep each in its own form.  Q4_0 and
 * IQ4_NL parts carry their 16-value code book (lut).  On a native load
 * (model.weights = native) with a backend that keeps 4-bit weights
 * (ENG_BE_CAP_W4), a Q4_K tensor is handed over as its own codes, scales
 * and mins (eng_gguf_q4k_codes: the file's weights exactly, instead of the
 * requantised int8 above).  Conversion runs on the pool, 64 rows per task;
 * the host arrays are freed once the backend has taken the weight.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_err.h"
#include "model_load.h"

#define LOAD_ROWS_PER_TASK 64
#define LOAD_MAX_PARTS 3 /* source tensors fused into one weight (Q|K|V) */

/* One weight on the host while it is converted. */
typedef struct load_weight {
    int rows, cols; /* the fused weight's shape */
    int bs;         /* int8 with 32-value block scales (every source a block format) */
    int use;        /* ENG_WUSE_* of the weight */
    int8_t *q;      /* int8 values [rows][cols] (int8 loads) */
    float *scale;   /* per-row scales [rows] (per-channel int8), or NULL */
    float *bscale;  /* 32-block scales [rows][cols / 32] (bs), or NULL */
    float *f;       /* fp32 values [rows][cols] (fp32 loads), or NULL */
    int n_parts;    /* parts filled */
    eng_wpart parts[LOAD_MAX_PARTS]; /* one per source tensor */
    uint8_t *u4[LOAD_MAX_PARTS];     /* Q4_K parts: codes, then sc, mn (one allocation) */
    float *d[LOAD_MAX_PARTS];        /* Q4_K parts: d, then dmin (one allocation) */
} load_weight;

typedef struct load_job {
    const eng_gguf_tensor *t; /* source tensor [rows][cols] in GGUF order */
    load_weight *w;           /* destination */
    const eng_wpart *part;    /* the part being filled */
    uint64_t row_bytes;       /* bytes per source row */
    float *buf;               /* per-thread row buffers, cols floats each */
    int failed;               /* set by a task whose conversion failed */
} load_job;

/* Block formats whose codes the int8 path keeps (eng_gguf_quant_codes). */
static int exact_codes(int type) {
    return type == ENG_GGML_TYPE_Q8_0 || type == ENG_GGML_TYPE_Q4_0 || type == ENG_GGML_TYPE_Q5_0 ||
           type == ENG_GGML_TYPE_IQ4_NL;
}

/* Requantise one float row per 32 values (other block formats). */
static int requant_blocks(const float *x, int cols, int8_t *q, float *bscale) {
    for (int b = 0; b < cols / ENG_Q8_0_BLOCK; b++, x += ENG_Q8_0_BLOCK, q += ENG_Q8_0_BLOCK) {
        float amax = 0;
        for (int k = 0; k < ENG_Q8_0_BLOCK; k++)
            if (fabsf(x[k]) > amax) amax = fabsf(x[k]);
        if (!(amax < INFINITY)) return -1;
        /* the packer keeps fp16 scales: quantise with the rounded one */
        float d = eng_f16_to_f32(eng_f32_to_f16(amax / 127.0f));
        float inv = d > 0 ? 1.0f / d : 0;
        bscale[b] = d;
        for (int k = 0; k < ENG_Q8_0_BLOCK; k++) {
            float v = nearbyintf(x[k] * inv);
            q[k] = (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
        }
    }
    return 0;
}

/* Quantise one float row per channel. */
static int requant_row(const float *row, int cols, int8_t *q, float *scale) {
    float amax = 0;
    for (int k = 0; k < cols; k++)
        if (fabsf(row[k]) > amax) amax = fabsf(row[k]);
    if (!(amax < INFINITY)) return -1;
    *scale = amax / 127.0f;
    float inv = amax > 0 ? 127.0f / amax : 0;
    for (int k = 0; k < cols; k++) q[k] = (int8_t)nearbyintf(row[k] * inv);
    return 0;
}

static void load_task(void *arg, int task, int thread) {
    load_job *j = arg;
    const eng_wpart *pt = j->part;
    int cols = j->w->cols, nb = cols / ENG_Q8_0_BLOCK;
    float *row = j->buf + (size_t)thread * cols;
    int r0 = task * LOAD_ROWS_PER_TASK;
    int r1 = r0 + LOAD_ROWS_PER_TASK < pt->rows ? r0 + LOAD_ROWS_PER_TASK : pt->rows;
    for (int r = r0; r < r1; r++) {
        const char *src = (const char *)j->t->data + (uint64_t)r * j->row_bytes;
        size_t dr = (size_t)(pt->row0 + r);
        switch (pt->fmt) {
        case ENG_WFMT_Q4_K: /* the file's codes (native loads) */
            if (eng_gguf_q4k_codes(src, cols, (uint8_t *)pt->u4 + (size_t)r * cols,
                                   (uint8_t *)pt->sc + (size_t)r * nb,
                                   (uint8_t *)pt->mn + (size_t)r * nb,
                                   (float *)pt->d + (size_t)r * (cols / 256),
                                   (float *)pt->dmin + (size_t)r * (cols / 256)) != 0)
                j->failed = 2;
            break;
        case ENG_WFMT_I8_B32: /* Q8_0 / Q4_0 / Q5_0 / IQ4_NL: the file's codes and scales */
            if (eng_gguf_quant_codes(j->t->type, src, cols, j->w->q + dr * cols,
                                     j->w->bscale + dr * nb) == 0)
                break;
            if (exact_codes(j->t->type)) { /* a non-finite scale */
                j->failed = 2;
                break;
            }
            if (eng_gguf_row_to_f32(j->t->type, src, cols, row) != 0) j->failed = 1;
            else if (requant_blocks(row, cols, j->w->q + dr * cols, j->w->bscale + dr * nb))
                j->failed = 2;
            break;
        case ENG_WFMT_F32:
            if (eng_gguf_row_to_f32(j->t->type, src, cols, j->w->f + dr * cols) != 0) j->failed = 1;
            break;
        default: /* ENG_WFMT_I8_ROW */
            if (eng_gguf_row_to_f32(j->t->type, src, cols, row) != 0) j->failed = 1;
            else if (requant_row(row, cols, j->w->q + dr * cols, &j->w->scale[dr])) j->failed = 2;
            break;
        }
        if (j->failed) return;
    }
}

/* A ggml block format (int8 weights then use 32-value block scales). */
static int block_type(int type) {
    return eng_gguf_type_convertible(type) && type != ENG_GGML_TYPE_F32 &&
           type != ENG_GGML_TYPE_F16 && type != ENG_GGML_TYPE_BF16;
}

/* 1 when every named tensor exists and is in a block format (NULL-terminated). */
static int all_blocks(const eng_model *m, const char *const *names) {
    for (; *names; names++) {
        const eng_gguf_tensor *t = eng_gguf_find_tensor(m->g, *names);
        if (!t || !block_type(t->type)) return 0;
    }
    return 1;
}

static int lw_alloc(load_weight *w, int rows, int cols, eng_precision prec, int bs) {
    memset(w, 0, sizeof *w);
    w->rows = rows;
    w->cols = cols;
    size_t n = (size_t)rows * cols;
    if (prec == ENG_PREC_FP32) return (w->f = malloc(n * sizeof(float))) ? 0 : -1;
    w->q = malloc(n);
    if (bs && cols % ENG_Q8_0_BLOCK == 0) {
        w->bs = 1;
        w->bscale = malloc(n / ENG_Q8_0_BLOCK * sizeof(float));
        return w->q && w->bscale ? 0 : -1;
    }
    w->scale = malloc((size_t)rows * sizeof(float));
    return w->q && w->scale ? 0 : -1;
}

static void lw_free(load_weight *w) {
    free(w->q);
    free(w->scale);
    free(w->bscale);
    free(w->f);
    for (int i = 0; i < LOAD_MAX_PARTS; i++) {
        free(w->u4[i]);
        free(w->d[i]);
    }
    memset(w, 0, sizeof *w);
}

/* Describe the next part (rows [row0, row0 + rows) from tensor t); Q4_K on
 * a native load gets its own code arrays.  Returns 0 or -1 (memory). */
static int lw_part(eng_model *m, load_weight *w, const eng_gguf_tensor *t, int row0, int rows) {
    eng_wpart *p = &w->parts[w->n_parts];
    int i = w->n_parts++, cols = w->cols;
    *p = (eng_wpart){.row0 = row0, .rows = rows};
    if (w->f) {
        p->fmt = ENG_WFMT_F32;
        p->f = w->f + (size_t)row0 * cols;
    } else if (w->bs && m->native && (m->be.caps & ENG_BE_CAP_W4) && (w->use & ENG_WUSE_LINEAR) &&
               t->type == ENG_GGML_TYPE_Q4_K && cols % 256 == 0) {
        size_t n = (size_t)rows * cols;
        p->fmt = ENG_WFMT_Q4_K;
        m->q4k_parts++;
        w->u4[i] = malloc(n + 2 * (n / 32));
        w->d[i] = malloc(2 * (n / 256) * sizeof(float));
        if (!w->u4[i] || !w->d[i]) return -1;
        p->u4 = w->u4[i];
        p->sc = w->u4[i] + n;
        p->mn = w->u4[i] + n + n / 32;
        p->d = w->d[i];
        p->dmin = w->d[i] + n / 256;
    } else if (w->bs) {
        p->fmt = ENG_WFMT_I8_B32;
        p->q = w->q + (size_t)row0 * cols;
        p->bscale = w->bscale + (size_t)row0 * (cols / ENG_Q8_0_BLOCK);
        p->lut = eng_gguf_quant_lut(t->type);
    } else {
        p->fmt = ENG_WFMT_I8_ROW;
        p->q = w->q + (size_t)row0 * cols;
        p->scale = w->scale + row0;
    }
    return 0;
}

/* Convert tensor `name` ([rows][w->cols]) into w at row row0, as its next part. */
static int load_rows(eng_model *m, load_weight *w, int row0, const char *name, int rows, char *err,
                     size_t errlen) {
    const eng_gguf_tensor *t = eng_gguf_find_tensor(m->g, name);
    if (!t) return pl_errf(err, errlen, ENG_EINVAL, "tensor %s missing", name);
    if (t->ne[0] != w->cols || t->ne[1] != rows || t->ne[2] != 1 || t->ne[3] != 1 ||
        row0 + rows > w->rows || w->n_parts >= LOAD_MAX_PARTS)
        return pl_errf(err, errlen, ENG_EINVAL, "tensor %s has shape [%lld, %lld], want [%d, %d]",
                       name, (long long)t->ne[0], (long long)t->ne[1], w->cols, rows);
    if (w->bs && !block_type(t->type))
        return pl_errf(err, errlen, ENG_EINVAL,
                       "tensor %s: mixed block / float types in one weight", name);
    load_job j = {.t = t, .w = w};
    if (eng_gguf_row_bytes(t->type, w->cols, &j.row_bytes) != 0 ||
        j.row_bytes * (uint64_t)rows > t->nbytes)
        return pl_errf(err, errlen, ENG_EINVAL, "tensor %s: unsupported type %s", name,
                       eng_gguf_type_name(t->type));
    if (lw_part(m, w, t, row0, rows) != 0)
        return pl_errf(err, errlen, ENG_ENOMEM, "out of memory loading %s", name);
    j.part = &w->parts[w->n_parts - 1];
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

/* Load the tensors names[i] (rows[i] rows each, in order) as one weight
 * with the given uses and hand it to the backend. */
static int load_weight_fused(eng_model *m, eng_weight *dst, const char *what, int cols,
                             const char *const *names, const int *rows, int use, char *err,
                             size_t errlen) {
    int total = 0, n = 0, rc;
    for (; names[n]; n++) total += rows[n];
    load_weight w;
    if (lw_alloc(&w, total, cols, m->prec, all_blocks(m, names)) != 0) {
        lw_free(&w);
        return pl_errf(err, errlen, ENG_ENOMEM, "out of memory loading %s", what);
    }
    w.use = use;
    for (int i = 0, r = 0; i < n; r += rows[i], i++)
        if ((rc = load_rows(m, &w, r, names[i], rows[i], err, errlen)) != 0) {
            lw_free(&w);
            return rc;
        }
    eng_wdesc d = {.name = what,
                   .rows = total,
                   .cols = cols,
                   .use = use,
                   .n_parts = w.n_parts,
                   .parts = w.parts};
    rc = m->be.weight_upload(m->be.ctx, &d, m->native, &dst->bw, err, errlen);
    lw_free(&w);
    if (rc) return rc;
    dst->rows = total;
    dst->cols = cols;
    return 0;
}

int mdl_vec_upload(eng_model *m, float **out, const float *v, int n, char *err, size_t errlen) {
    *out = m->be.alloc(m->be.ctx, (size_t)n * sizeof(float));
    if (!*out) return pl_errf(err, errlen, ENG_ENOMEM, "out of backend memory");
    m->be.upload(m->be.ctx, *out, v, (size_t)n * sizeof(float));
    return 0;
}

void mdl_vec_free(eng_model *m, float *v) {
    if (v) m->be.free(m->be.ctx, v);
}

int mdl_load_vec_host(const eng_model *m, float **out, const char *name, int n, int add_one,
                      char *err, size_t errlen) {
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

/* A vector tensor into backend memory. */
static int load_vec(eng_model *m, float **out, const char *name, int n, int add_one, char *err,
                    size_t errlen) {
    float *v = NULL;
    int rc = mdl_load_vec_host(m, &v, name, n, add_one, err, errlen);
    if (rc) return rc;
    rc = mdl_vec_upload(m, out, v, n, err, errlen);
    free(v);
    return rc;
}

/* The Q|K|V biases of layer i (q only in KV-sharing layers), one vector. */
static int load_bias(eng_model *m, eng_layer *L, int i, int owner, char *err, size_t errlen) {
    int nq = m->cfg.n_head * m->cfg.head_dim, nkv = m->cfg.n_head_kv * m->cfg.head_dim;
    int rows = nq + (owner ? 2 * nkv : 0), rc = 0;
    float *all = malloc((size_t)rows * sizeof(float)), *v = NULL;
    if (!all) return pl_errf(err, errlen, ENG_ENOMEM, "out of memory for layer %d", i);
    const char *parts[] = {"attn_q", "attn_k", "attn_v"};
    const int len[] = {nq, nkv, nkv};
    for (int p = 0, off = 0; p < (owner ? 3 : 1) && !rc; off += len[p], p++) {
        char n[96];
        snprintf(n, sizeof n, "blk.%d.%s.bias", i, parts[p]);
        if ((rc = mdl_load_vec_host(m, &v, n, len[p], 0, err, errlen)) == 0) {
            memcpy(all + off, v, (size_t)len[p] * sizeof(float));
            free(v);
        }
    }
    if (!rc) rc = mdl_vec_upload(m, &L->bqkv, all, rows, err, errlen);
    free(all);
    return rc;
}

int mdl_load_layer(eng_model *m, int i, char *err, size_t errlen) {
    const eng_config *c = &m->cfg;
    eng_layer *L = &m->layers[i];
    int E = c->n_embd, hd = c->head_dim, nq = c->n_head * hd, nkv = c->n_head_kv * hd;
    int owner = c->kv_src[i] == i, rc, add1 = c->norm_add_one;
    char n[96];
#define LNAME(s) (snprintf(n, sizeof n, "blk.%d.%s.weight", i, s), n)
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
#undef LNAME
    if (c->has_qkv_bias && (rc = load_bias(m, L, i, owner, err, errlen))) return rc;
    char nq_[96], nk_[96], nv_[96], no_[96], ng_[96], nu_[96], nd_[96], what[64];
    snprintf(nq_, sizeof nq_, "blk.%d.attn_q.weight", i);
    snprintf(nk_, sizeof nk_, "blk.%d.attn_k.weight", i);
    snprintf(nv_, sizeof nv_, "blk.%d.attn_v.weight", i);
    snprintf(no_, sizeof no_, "blk.%d.attn_output.weight", i);
    snprintf(ng_, sizeof ng_, "blk.%d.ffn_gate.weight", i);
    snprintf(nu_, sizeof nu_, "blk.%d.ffn_up.weight", i);
    snprintf(nd_, sizeof nd_, "blk.%d.ffn_down.weight", i);
    const char *qkv[] = {nq_, owner ? nk_ : NULL, nv_, NULL}, *o[] = {no_, NULL},
               *gu[] = {ng_, nu_, NULL}, *dn[] = {nd_, NULL};
    if (!owner) qkv[1] = NULL; /* Q only */
    const int qkv_rows[] = {nq, nkv, nkv}, o_rows[] = {E}, gu_rows[] = {c->n_ff, c->n_ff},
              dn_rows[] = {E};
    const int L_ = ENG_WUSE_LINEAR;
    snprintf(what, sizeof what, "layer %d wqkv", i);
    if ((rc = load_weight_fused(m, &L->wqkv, what, E, qkv, qkv_rows, L_, err, errlen))) return rc;
    snprintf(what, sizeof what, "layer %d wo", i);
    if ((rc = load_weight_fused(m, &L->wo, what, nq, o, o_rows, L_, err, errlen))) return rc;
    snprintf(what, sizeof what, "layer %d wgu", i);
    if ((rc = load_weight_fused(m, &L->wgu, what, E, gu, gu_rows, L_, err, errlen))) return rc;
    snprintf(what, sizeof what, "layer %d wdown", i);
    return load_weight_fused(m, &L->wdown, what, c->n_ff, dn, dn_rows, L_, err, errlen);
}

int mdl_load_embd_out(eng_model *m, char *err, size_t errlen) {
    const eng_config *c = &m->cfg;
    const char *embd[] = {"token_embd.weight", NULL}, *out[] = {"output.weight", NULL};
    const int rows[] = {c->n_vocab};
    int rc;
    if (c->tied_output) {
        /* one table used both ways: the CPU backend packs it for the GEMM and
         * reads embedding rows back from the pack (bit-identical), so it is held once */
        rc = load_weight_fused(m, &m->embd, "token_embd", c->n_embd, embd, rows,
                               ENG_WUSE_EMBED | ENG_WUSE_LINEAR, err, errlen);
        if (rc) return rc;
        m->out = m->embd;
        m->out_tied = 1;
        return 0;
    }
    if ((rc = load_weight_fused(m, &m->embd, "token_embd", c->n_embd, embd, rows, ENG_WUSE_EMBED,
                                err, errlen)))
        return rc;
    return load_weight_fused(m, &m->out, "output", c->n_embd, out, rows, ENG_WUSE_LINEAR, err,
                             errlen);
}

void mdl_weight_free(eng_model *m, eng_weight *w) {
    if (w->bw) m->be.weight_free(m->be.ctx, w->bw);
    memset(w, 0, sizeof *w);
}
