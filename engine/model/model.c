/*
 * model.c -- loading a GGUF into an eng_model: configuration, tensor
 * checks, the thread pool and the backend (eng_backend_create: model
 * backend auto|cpu|cuda), the weights and vectors (model_load.c), the rope
 * tables, the digest; freeing; the model's size figures.
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
 * and data bytes, finally mixed with the precision (and, for loads that
 * hand Q4_K tensors over as their own codes, that choice: their numbers
 * differ from the requantised int8 load's).
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "eng_err.h"
#include "eng_model_int.h"
#include "model_load.h"

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

static uint64_t model_digest(const eng_config *c, const eng_gguf *g, eng_precision prec, int w4) {
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
    h = dg_mix(h, (uint64_t)prec + 1);
    return w4 ? dg_mix(h, 0x5734) : h; /* 4-bit weights kept: other numbers */
}

/* The two rope frequency tables (global, local layers); see the top. */
static int rope_tables(eng_model *m, char *err, size_t errlen) {
    const eng_config *c = &m->cfg;
    int half = c->head_dim / 2, rc;
    float *ff = NULL;
    if (c->rope_freq_factors) {
        if ((rc = mdl_load_vec_host(m, &ff, "rope_freqs.weight", half, 0, err, errlen))) return rc;
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
    float *tab = malloc(2 * (size_t)half * sizeof(float));
    if (!tab) {
        free(ff);
        return pl_errf(err, errlen, ENG_ENOMEM, "out of memory");
    }
    for (int k = 0; k < 2; k++) {
        double base = k ? c->rope_base_local : c->rope_base;
        float scale = k ? c->rope_freq_scale_local : c->rope_freq_scale;
        float *t = tab + k * half;
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
    rc = mdl_vec_upload(m, &m->rope_freq, tab, 2 * half, err, errlen);
    free(tab);
    if (rc) return rc;
    m->rope_freq_local = m->rope_freq + half;
    return 0;
}

int eng_model_load(const char *path, const eng_load_opts *o, eng_model **out, char *err,
                   size_t errlen) {
    *out = NULL;
    eng_load_opts def = {.prec = ENG_PREC_INT8, .block_tokens = 16};
    if (!o) o = &def;
    if (o->prec != ENG_PREC_INT8 && o->prec != ENG_PREC_FP32)
        return pl_errf(err, errlen, ENG_EINVAL, "unknown precision %d", (int)o->prec);
    if (o->weights != ENG_WEIGHTS_NATIVE && o->weights != ENG_WEIGHTS_INT8)
        return pl_errf(err, errlen, ENG_EINVAL, "unknown weight form %d", (int)o->weights);
    int rc = ENG_ENOMEM;
    eng_model *m = calloc(1, sizeof *m);
    if (!m) return pl_errf(err, errlen, ENG_ENOMEM, "out of memory");
    m->prec = o->prec;
    m->native = o->prec == ENG_PREC_INT8 && o->weights == ENG_WEIGHTS_NATIVE;
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
    if ((rc = eng_backend_create(&m->be, o->backend, m->pool, err, errlen))) goto err;
    if ((rc = rope_tables(m, err, errlen))) goto err;
    m->layers = calloc((size_t)c->n_layer, sizeof *m->layers);
    if (!m->layers) {
        rc = pl_errf(err, errlen, ENG_ENOMEM, "out of memory loading %s", path);
        goto err;
    }
    if ((rc = mdl_load_embd_out(m, err, errlen))) goto err;
    float *v;
    if ((rc = mdl_load_vec_host(m, &v, "output_norm.weight", c->n_embd, c->norm_add_one, err,
                                errlen)))
        goto err;
    rc = mdl_vec_upload(m, &m->out_norm, v, c->n_embd, err, errlen);
    free(v);
    if (rc) goto err;
    for (int i = 0; i < c->n_layer; i++)
        if ((rc = mdl_load_layer(m, i, err, errlen))) goto err;
    m->digest = model_digest(c, m->g, m->prec, m->q4k_parts > 0);
    *out = m;
    return 0;
err:
    eng_model_free(m);
    return rc;
}

void eng_model_free(eng_model *m) {
    if (!m) return;
    if (m->layers)
        for (int i = 0; i < m->cfg.n_layer; i++) {
            eng_layer *L = &m->layers[i];
            float *v[] = {L->attn_norm, L->q_norm,        L->k_norm, L->post_attn_norm,
                          L->ffn_norm,  L->post_ffn_norm, L->bqkv};
            for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) mdl_vec_free(m, v[k]);
            mdl_weight_free(m, &L->wqkv);
            mdl_weight_free(m, &L->wo);
            mdl_weight_free(m, &L->wgu);
            mdl_weight_free(m, &L->wdown);
        }
    free(m->layers);
    if (m->out_tied) memset(&m->out, 0, sizeof m->out); /* the embedding's handle */
    mdl_weight_free(m, &m->out);
    mdl_weight_free(m, &m->embd);
    mdl_vec_free(m, m->out_norm);
    mdl_vec_free(m, m->rope_freq);
    if (m->scratch) m->be.free(m->be.ctx, m->scratch);
    eng_backend_free(&m->be);
    kern_pool_destroy(m->pool);
    eng_gguf_close(m->g);
    pthread_mutex_destroy(&m->scratch_mu);
    free(m);
}

const char *eng_weights_name(eng_weights w) {
    return w == ENG_WEIGHTS_NATIVE ? "native" : w == ENG_WEIGHTS_INT8 ? "int8" : "?";
}

int eng_weights_parse(const char *s, eng_weights *out) {
    if (s && strcmp(s, "native") == 0) *out = ENG_WEIGHTS_NATIVE;
    else if (s && strcmp(s, "int8") == 0) *out = ENG_WEIGHTS_INT8;
    else return -1;
    return 0;
}

const eng_config *eng_model_config(const eng_model *m) { return &m->cfg; }
const eng_kv_layout *eng_model_kv_layout(const eng_model *m) { return &m->kv; }
const eng_gguf *eng_model_gguf(const eng_model *m) { return m->g; }
eng_precision eng_model_precision(const eng_model *m) { return m->prec; }
int eng_model_n_threads(const eng_model *m) { return kern_pool_size(m->pool); }
uint64_t eng_model_digest(const eng_model *m) { return m->digest; }
const char *eng_model_backend_name(const eng_model *m) { return m->be.name; }

void eng_model_kv_invalidate(eng_model *m, const void *blk) {
    if (m->be.kv_invalidate) m->be.kv_invalidate(m->be.ctx, blk);
}

int eng_model_kv_tier(const eng_model *m, eng_backend_kv_tier *out) {
    memset(out, 0, sizeof *out);
    if (!m->be.kv_tier) return -1;
    m->be.kv_tier(m->be.ctx, out);
    return 0;
}

static size_t weight_read(const eng_model *m, const eng_weight *w) {
    return w->bw ? m->be.weight_read_bytes(m->be.ctx, w->bw) : 0;
}

static size_t weight_held(const eng_model *m, const eng_weight *w) {
    return w->bw ? m->be.weight_bytes(m->be.ctx, w->bw) : 0;
}

static size_t vec_bytes(const float *v, int n) { return v ? (size_t)n * sizeof(float) : 0; }

size_t eng_model_resident_bytes(const eng_model *m) {
    const eng_config *c = &m->cfg;
    /* a tied output is the embedding's handle: counted once */
    size_t n = weight_held(m, &m->embd) + (m->out_tied ? 0 : weight_held(m, &m->out));
    n += vec_bytes(m->out_norm, c->n_embd) + vec_bytes(m->rope_freq, c->head_dim);
    for (int i = 0; i < c->n_layer; i++) {
        const eng_layer *L = &m->layers[i];
        n += weight_held(m, &L->wqkv) + weight_held(m, &L->wo) + weight_held(m, &L->wgu) +
             weight_held(m, &L->wdown);
        n += vec_bytes(L->bqkv, L->wqkv.rows) + vec_bytes(L->attn_norm, c->n_embd) +
             vec_bytes(L->post_attn_norm, c->n_embd) + vec_bytes(L->ffn_norm, c->n_embd) +
             vec_bytes(L->post_ffn_norm, c->n_embd) + vec_bytes(L->q_norm, c->head_dim) +
             vec_bytes(L->k_norm, c->head_dim);
    }
    return n;
}

static double weight_macs(const eng_weight *w) {
    return w->bw ? (double)w->rows * (double)w->cols : 0;
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
    size_t n = weight_read(m, &m->out);
    for (int i = 0; i < m->cfg.n_layer; i++) {
        const eng_layer *L = &m->layers[i];
        n += weight_read(m, &L->wqkv) + weight_read(m, &L->wo) + weight_read(m, &L->wgu) +
             weight_read(m, &L->wdown);
    }
    return n;
}
