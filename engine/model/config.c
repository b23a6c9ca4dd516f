/*
 * config.c -- model configuration from GGUF metadata (llama, qwen2, qwen3,
 * gemma3, rope scaling, and parley's per-layer window / KV-source extension
 * keys), tensor presence
 * and shape checks, and the derived figures inspect prints (KV bytes per
 * token, parameter count).  Conventions and formulas: eng_config.h.
 *
 * Every key is read through one helper that names the key, the type found
 * and the accepted range in its error message, so a bad file says exactly
 * what is wrong with it.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "eng_backend.h" /* eng_rope_type */
#include "eng_config.h"
#include "eng_err.h"
#include "eng_kv.h"

/* Every architecture the engine runs, as general.architecture names it. */
static const struct {
    eng_arch a;
    const char *name;
} ARCHS[] = {
    {ENG_ARCH_LLAMA, "llama"},
    {ENG_ARCH_QWEN2, "qwen2"},
    {ENG_ARCH_QWEN3, "qwen3"},
    {ENG_ARCH_GEMMA3, "gemma3"},
};
#define N_ARCHS (sizeof ARCHS / sizeof ARCHS[0])

const char *eng_arch_name(eng_arch a) {
    for (size_t i = 0; i < N_ARCHS; i++)
        if (ARCHS[i].a == a) return ARCHS[i].name;
    return "?";
}

/* Read integer key "<arch>.<suffix>" into *out within [lo, hi]; when absent
 * use def if !required.  Returns 0 or an ENG_CFG_E* code with a message. */
static int cfg_int(const eng_gguf *g, const char *arch, const char *suffix, int required,
                   int64_t def, int64_t lo, int64_t hi, int *out, char *err, size_t errlen) {
    char key[128];
    int64_t v;
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int i = eng_gguf_find(g, key);
    if (i < 0) {
        if (required)
            return pl_errf(err, errlen, ENG_CFG_EMISSING, "required key '%s' is missing", key);
        *out = (int)def;
        return 0;
    }
    if (eng_gguf_get_i64(g, key, &v))
        return pl_errf(err, errlen, ENG_CFG_EINVAL,
                       "key '%s' has type %s, expected an integer "
                       "(per-layer arrays are not supported here)",
                       key, eng_gguf_kv_type_name(eng_gguf_kv_type(g, i)));
    if (v < lo || v > hi)
        return pl_errf(err, errlen, ENG_CFG_EINVAL, "key '%s' = %lld is out of range [%lld, %lld]",
                       key, (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return 0;
}

static int cfg_float(const eng_gguf *g, const char *arch, const char *suffix, int required,
                     float def, float lo, float hi, float *out, char *err, size_t errlen) {
    char key[128];
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int i = eng_gguf_find(g, key);
    if (i < 0) {
        if (required)
            return pl_errf(err, errlen, ENG_CFG_EMISSING, "required key '%s' is missing", key);
        *out = def;
        return 0;
    }
    if (eng_gguf_get_f32(g, key, out))
        return pl_errf(err, errlen, ENG_CFG_EINVAL, "key '%s' has type %s, expected a number", key,
                       eng_gguf_kv_type_name(eng_gguf_kv_type(g, i)));
    if (!(*out >= lo && *out <= hi))
        return pl_errf(err, errlen, ENG_CFG_EINVAL, "key '%s' = %g is out of range [%g, %g]", key,
                       (double)*out, (double)lo, (double)hi);
    return 0;
}

/* Per-layer integer array "<arch>.<suffix>": 1 if present (vals filled),
 * 0 if absent, negative on error. */
static int cfg_layer_arr(const eng_gguf *g, const char *arch, const char *suffix, int n_layer,
                         int64_t lo, int64_t hi, int *vals, char *err, size_t errlen) {
    char key[128];
    int et;
    uint64_t n;
    const void *data;
    snprintf(key, sizeof key, "%s.%s", arch, suffix);
    int i = eng_gguf_find(g, key);
    if (i < 0) return 0;
    if (eng_gguf_get_arr(g, key, &et, &n, &data) || et == ENG_GGUF_TYPE_STR ||
        et == ENG_GGUF_TYPE_F32 || et == ENG_GGUF_TYPE_F64)
        return pl_errf(err, errlen, ENG_CFG_EINVAL, "key '%s' must be an array of integers", key);
    if (n != (uint64_t)n_layer)
        return pl_errf(err, errlen, ENG_CFG_EINVAL,
                       "key '%s' has %llu elements, expected "
                       "block_count = %d",
                       key, (unsigned long long)n, n_layer);
    for (int l = 0; l < n_layer; l++) {
        int64_t v;
        if (eng_gguf_arr_get_i64(et, data, n, (uint64_t)l, &v) || v < lo || v > hi)
            return pl_errf(err, errlen, ENG_CFG_EINVAL,
                           "key '%s'[%d] is out of range "
                           "[%lld, %lld]",
                           key, l, (long long)lo, (long long)hi);
        vals[l] = (int)v;
    }
    return 1;
}

/* "llama, qwen2, qwen3, gemma3" into list[n]: the list every refusal names. */
static const char *arch_list(char *list, size_t n) {
    size_t k = 0;
    list[0] = 0;
    for (size_t i = 0; i < N_ARCHS && k < n; i++)
        k += (size_t)snprintf(list + k, n - k, "%s%s", i ? ", " : "", ARCHS[i].name);
    return list;
}

static int cfg_arch(const eng_gguf *g, eng_config *c, char *err, size_t errlen) {
    const char *s;
    size_t len;
    char list[64];
    int rc = eng_gguf_get_str(g, "general.architecture", &s, &len);
    if (rc == ENG_GGUF_ENOTFOUND)
        return pl_errf(err, errlen, ENG_CFG_EMISSING,
                       "required key 'general.architecture' is "
                       "missing (supported architectures: %s)",
                       arch_list(list, sizeof list));
    if (rc)
        return pl_errf(err, errlen, ENG_CFG_EINVAL, "key 'general.architecture' is not a string");
    c->arch = 0;
    for (size_t i = 0; i < N_ARCHS; i++)
        if (len == strlen(ARCHS[i].name) && !memcmp(s, ARCHS[i].name, len)) c->arch = ARCHS[i].a;
    if (!c->arch)
        return pl_errf(err, errlen, ENG_CFG_EARCH,
                       "unsupported architecture '%.*s' "
                       "(supported: %s)",
                       (int)(len > 64 ? 64 : len), s, arch_list(list, sizeof list));
    snprintf(c->arch_name, sizeof c->arch_name, "%s", eng_arch_name(c->arch));
    return 0;
}

/* Vocabulary size: <arch>.vocab_size, else tokenizer.ggml.tokens, else
 * token_embd's row count. */
static int cfg_vocab(const eng_gguf *g, eng_config *c, char *err, size_t errlen) {
    int et;
    uint64_t n;
    const void *d;
    const eng_gguf_tensor *te = eng_gguf_find_tensor(g, "token_embd.weight");
    int rc = cfg_int(g, c->arch_name, "vocab_size", 0, 0, 1, 1 << 24, &c->n_vocab, err, errlen);
    if (rc || c->n_vocab) return rc;
    if (!eng_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n, &d)) {
        if (n < 1 || n > (1u << 24))
            return pl_errf(err, errlen, ENG_CFG_EINVAL,
                           "tokenizer.ggml.tokens has %llu entries, "
                           "expected [1, %d]",
                           (unsigned long long)n, 1 << 24);
        c->n_vocab = (int)n;
    } else if (te && te->ne[1] >= 1 && te->ne[1] <= (1 << 24)) {
        c->n_vocab = (int)te->ne[1];
    } else {
        return pl_errf(err, errlen, ENG_CFG_EMISSING,
                       "cannot tell the vocabulary size: no "
                       "%s.vocab_size, tokenizer.ggml.tokens or token_embd.weight",
                       c->arch_name);
    }
    return 0;
}

/* A YaRN key that must keep llama.cpp's default value `want`; absent is
 * fine.  Other values are refused: for the attention factors and the log
 * multiplier parley lacks the formulas; non-default betas it could apply,
 * but llama.cpp (llama-cpp-python 0.3.36, measured) ignores the file's
 * yarn_beta_fast/slow while transformers applies them, so no reference
 * would agree with the result. */
static int cfg_yarn_default(const eng_gguf *g, const char *arch, const char *suffix, float want,
                            char *err, size_t errlen) {
    float v;
    int rc = cfg_float(g, arch, suffix, 0, want, -1e9f, 1e9f, &v, err, errlen);
    if (rc) return rc;
    if (v != want)
        return pl_errf(err, errlen, ENG_CFG_EINVAL,
                       "key '%s.%s' = %g: YaRN with a value other "
                       "than %g is not supported",
                       arch, suffix, (double)v, (double)want);
    return 0;
}

/* Rope scaling, as llama.cpp reads it.  <arch>.rope.scaling.type absent
 * means linear (llama.cpp's default), so a lone factor key scales too;
 * "none" must carry no factor other than 1; "linear" divides every
 * frequency by the factor (freq_scale = 1 / factor; gemma3: global layers
 * only, as llama.cpp and transformers apply it); "yarn" (llama, qwen2,
 * qwen3) ramps between interpolated and original frequencies and scales
 * the attention (eng_config.h), with the keys that would change llama.cpp's
 * defaults for that refused; any other type (longrope, ...) is refused.
 * rope_freqs.weight (Llama 3.1 "llama3" scaling: head_dim / 2 per-dimension
 * divisors) is accepted on llama only (llama.cpp reads it for llama; its
 * qwen2/qwen3/gemma3 graphs do not); its values are checked at load. */
static int cfg_rope_scaling(const eng_gguf *g, eng_config *c, char *err, size_t errlen) {
    const char *a = c->arch_name;
    char key[96], fkey[96];
    const char *s = "linear";
    size_t len = 6;
    float f = 1.0f;
    snprintf(key, sizeof key, "%s.rope.scaling.type", a);
    snprintf(fkey, sizeof fkey, "%s.rope.scaling.factor", a);
    int ti = eng_gguf_find(g, key), fi = eng_gguf_find(g, fkey);
    if (ti >= 0 && eng_gguf_get_str(g, key, &s, &len))
        return pl_errf(err, errlen, ENG_CFG_EINVAL, "key '%s' has type %s, expected a string", key,
                       eng_gguf_kv_type_name(eng_gguf_kv_type(g, ti)));
    if (fi >= 0 && eng_gguf_get_f32(g, fkey, &f))
        return pl_errf(err, errlen, ENG_CFG_EINVAL, "key '%s' has type %s, expected a number", fkey,
                       eng_gguf_kv_type_name(eng_gguf_kv_type(g, fi)));
    c->rope_freq_scale = c->rope_freq_scale_local = 1.0f;
    if (len == 4 && !memcmp(s, "none", 4)) {
        if (f != 1.0f && f != 0.0f)
            return pl_errf(err, errlen, ENG_CFG_EINVAL,
                           "%s = 'none' but %s = %g: inconsistent "
                           "rope scaling",
                           key, fkey, (double)f);
    } else if (len == 6 && !memcmp(s, "linear", 6)) {
        /* llama.cpp: factor 0 (or absent) = no scaling */
        if (!(f == 0.0f || (f >= 1e-3f && f <= 1e6f)))
            return pl_errf(err, errlen, ENG_CFG_EINVAL,
                           "key '%s' = %g is out of range "
                           "[0.001, 1e6] (or 0: none)",
                           fkey, (double)f);
        if (f != 0.0f) c->rope_freq_scale = 1.0f / f;
        if (c->arch != ENG_ARCH_GEMMA3) c->rope_freq_scale_local = c->rope_freq_scale;
    } else if (len == 4 && !memcmp(s, "yarn", 4)) {
        int rc;
        if (c->arch == ENG_ARCH_GEMMA3)
            return pl_errf(err, errlen, ENG_CFG_EINVAL,
                           "%s = 'yarn': YaRN on gemma3 is not "
                           "supported (llama, qwen2, qwen3)",
                           key);
        if (!(f >= 1.0f && f <= 1e6f))
            return pl_errf(err, errlen, ENG_CFG_EINVAL,
                           "key '%s' = %g is out of range [1, 1e6] "
                           "for YaRN",
                           fkey, (double)f);
        if ((rc = cfg_int(g, a, "rope.scaling.original_context_length", c->n_ctx_train == 0,
                          c->n_ctx_train, 1, 1 << 30, &c->rope_yarn_orig_ctx, err, errlen)) ||
            (rc = cfg_yarn_default(g, a, "rope.scaling.yarn_beta_fast", 32.0f, err, errlen)) ||
            (rc = cfg_yarn_default(g, a, "rope.scaling.yarn_beta_slow", 1.0f, err, errlen)) ||
            (rc = cfg_yarn_default(g, a, "rope.scaling.yarn_ext_factor", 1.0f, err, errlen)) ||
            (rc = cfg_yarn_default(g, a, "rope.scaling.attn_factor", 1.0f, err, errlen)) ||
            (rc = cfg_yarn_default(g, a, "rope.scaling.yarn_attn_factor", 1.0f, err, errlen)) ||
            (rc = cfg_yarn_default(g, a, "rope.scaling.yarn_log_multiplier", 0.0f, err, errlen)))
            return rc;
        c->rope_yarn = 1;
        c->rope_yarn_beta_fast = 32.0f;
        c->rope_yarn_beta_slow = 1.0f;
        c->rope_freq_scale = c->rope_freq_scale_local = 1.0f / f;
    } else {
        return pl_errf(err, errlen, ENG_CFG_EINVAL,
                       "%s = '%.*s': this rope scaling type is not "
                       "supported (supported: none, linear, yarn, and Llama 3 frequency factors "
                       "in rope_freqs.weight)",
                       key, (int)(len > 32 ? 32 : len), s);
    }
    if (eng_gguf_find_tensor(g, "rope_freqs.weight")) {
        if (c->rope_yarn)
            return pl_errf(err, errlen, ENG_CFG_EINVAL,
                           "tensor rope_freqs.weight with %s = "
                           "'yarn': frequency factors and YaRN together are not supported",
                           key);
        if (c->arch != ENG_ARCH_LLAMA)
            return pl_errf(err, errlen, ENG_CFG_EINVAL,
                           "tensor rope_freqs.weight (rope "
                           "frequency factors) on architecture %s: only llama files apply it",
                           a);
        c->rope_freq_factors = 1;
    }
    return 0;
}

/* Windows and KV sources: architecture defaults, then extension keys. */
static int cfg_layers(const eng_gguf *g, eng_config *c, char *err, size_t errlen) {
    const char *a = c->arch_name;
    int rc, pat[ENG_MAX_LAYERS];
    for (int l = 0; l < c->n_layer; l++) {
        c->window[l] = 0;
        c->kv_src[l] = l;
    }
    if (c->arch == ENG_ARCH_GEMMA3) {
        rc = cfg_layer_arr(g, a, "attention.sliding_window_pattern", c->n_layer, 0, 1, pat, err,
                           errlen);
        if (rc < 0) return rc;
        for (int l = 0; l < c->n_layer; l++)
            c->window[l] = (rc ? pat[l] : (l + 1) % 6 != 0) ? c->sliding_window : 0;
    }
    rc = cfg_layer_arr(g, a, "attention.layer_window", c->n_layer, 0, 1 << 30, c->window, err,
                       errlen);
    if (rc < 0) return rc;
    c->has_ext_keys = rc;
    rc = cfg_layer_arr(g, a, "attention.layer_kv_source", c->n_layer, 0, ENG_MAX_LAYERS - 1,
                       c->kv_src, err, errlen);
    if (rc < 0) return rc;
    c->has_ext_keys |= rc;
    for (int l = 0; l < c->n_layer; l++) {
        int s = c->kv_src[l];
        if (s > l)
            return pl_errf(err, errlen, ENG_CFG_EINVAL,
                           "%s.attention.layer_kv_source[%d] = %d: "
                           "a layer can only read the KV of itself or an earlier layer",
                           a, l, s);
        if (c->kv_src[s] != s)
            return pl_errf(err, errlen, ENG_CFG_EINVAL,
                           "%s.attention.layer_kv_source[%d] = %d: "
                           "layer %d does not own its KV (it reads layer %d's)",
                           a, l, s, s, c->kv_src[s]);
        if (c->window[s] != c->window[l])
            return pl_errf(err, errlen, ENG_CFG_EINVAL,
                           "layer %d (window %d) shares the KV of "
                           "layer %d (window %d): sharing layers need the same window",
                           l, c->window[l], s, c->window[s]);
    }
    return 0;
}

int eng_config_from_gguf(const eng_gguf *g, eng_config *c, char *err, size_t errlen) {
    int rc, kl, vl, rd;
    char key[96];
    memset(c, 0, sizeof *c);
    if ((rc = cfg_arch(g, c, err, errlen))) return rc;
    const char *a = c->arch_name;
    int gem = c->arch == ENG_ARCH_GEMMA3;
    int qwen = c->arch == ENG_ARCH_QWEN2 || c->arch == ENG_ARCH_QWEN3;
    if ((rc = cfg_int(g, a, "context_length", 0, 0, 0, 1 << 30, &c->n_ctx_train, err, errlen)) ||
        (rc = cfg_int(g, a, "embedding_length", 1, 0, 1, 1 << 20, &c->n_embd, err, errlen)) ||
        (rc = cfg_int(g, a, "block_count", 1, 0, 1, ENG_MAX_LAYERS, &c->n_layer, err, errlen)) ||
        (rc = cfg_int(g, a, "feed_forward_length", 1, 0, 1, 1 << 22, &c->n_ff, err, errlen)) ||
        (rc = cfg_int(g, a, "attention.head_count", 1, 0, 1, 4096, &c->n_head, err, errlen)) ||
        (rc = cfg_int(g, a, "attention.head_count_kv", 0, c->n_head, 1, c->n_head, &c->n_head_kv,
                      err, errlen)))
        return rc;
    if (c->n_head % c->n_head_kv)
        return pl_errf(err, errlen, ENG_CFG_EINVAL,
                       "%s.attention.head_count = %d is not a "
                       "multiple of head_count_kv = %d",
                       a, c->n_head, c->n_head_kv);
    if (eng_gguf_find(g, (snprintf(key, sizeof key, "%s.attention.key_length", a), key)) < 0 &&
        c->n_embd % c->n_head)
        return pl_errf(err, errlen, ENG_CFG_EINVAL,
                       "%s.embedding_length = %d is not a multiple "
                       "of head_count = %d and %s is absent",
                       a, c->n_embd, c->n_head, key);
    if ((rc = cfg_int(g, a, "attention.key_length", 0, c->n_embd / c->n_head, 1, 4096, &kl, err,
                      errlen)) ||
        (rc = cfg_int(g, a, "attention.value_length", 0, kl, 1, 4096, &vl, err, errlen)))
        return rc;
    if (kl != vl)
        return pl_errf(err, errlen, ENG_CFG_EINVAL,
                       "%s.attention.key_length = %d differs from "
                       "value_length = %d (not supported)",
                       a, kl, vl);
    if (kl % 2)
        return pl_errf(err, errlen, ENG_CFG_EINVAL, "head dim %d is odd (rope needs pairs)", kl);
    c->head_dim = kl;
    if ((rc = cfg_int(g, a, "rope.dimension_count", 0, kl, 1, 4096, &rd, err, errlen))) return rc;
    if (rd != kl)
        return pl_errf(err, errlen, ENG_CFG_EINVAL,
                       "%s.rope.dimension_count = %d differs from the "
                       "head dim %d (partial rotary is not supported)",
                       a, rd, kl);
    if ((rc = cfg_float(g, a, "attention.layer_norm_rms_epsilon", 1, 0, 1e-12f, 0.1f, &c->norm_eps,
                        err, errlen)) ||
        (rc = cfg_float(g, a, "rope.freq_base", 0, gem ? 1e6f : 1e4f, 1.0f, 1e12f, &c->rope_base,
                        err, errlen)) ||
        (rc = cfg_float(g, a, "rope.freq_base_swa", 0, gem ? 1e4f : c->rope_base, 1.0f, 1e12f,
                        &c->rope_base_local, err, errlen)) ||
        (rc = cfg_float(g, a, "final_logit_softcapping", 0, 0.0f, 0.0f, 1e6f,
                        &c->final_logit_softcap, err, errlen)) ||
        (rc = cfg_int(g, a, "attention.sliding_window", gem, 0, gem ? 1 : 0, 1 << 30,
                      &c->sliding_window, err, errlen)))
        return rc;
    if ((rc = cfg_rope_scaling(g, c, err, errlen))) return rc;
    if ((rc = cfg_vocab(g, c, err, errlen))) return rc;
    c->rope_type = gem || qwen ? ENG_ROPE_NEOX : ENG_ROPE_NORM;
    c->attn_scale = 1.0f / sqrtf((float)c->head_dim);
    if (c->rope_yarn) { /* YaRN scales cos and sin by m: q.k by m^2 */
        float ms = 1.0f + 0.1f * logf(1.0f / c->rope_freq_scale);
        c->attn_scale *= ms * ms;
    }
    c->embd_scale = gem ? sqrtf((float)c->n_embd) : 1.0f;
    c->norm_add_one = 0;
    c->has_qk_norm = gem || c->arch == ENG_ARCH_QWEN3;
    /* qwen2 always has Q/K/V biases; llama.cpp's llama graph applies them
     * when the file has them (attention_bias models), so llama does too */
    c->has_qkv_bias = c->arch == ENG_ARCH_QWEN2 ||
                      (c->arch == ENG_ARCH_LLAMA && eng_gguf_find_tensor(g, "blk.0.attn_q.bias"));
    c->has_post_norms = gem;
    c->ffn_gelu = gem;
    c->tied_output = eng_gguf_find_tensor(g, "output.weight") == NULL;
    return cfg_layers(g, c, err, errlen);
}

/* ---- tensors ---- */

static int convertible(int type) { return eng_gguf_type_convertible(type); }

/* Check one tensor: present (unless absent_ok) with shape [ne0, ne1]. */
static int check_one(const eng_gguf *g, const char *name, int64_t ne0, int64_t ne1, char *err,
                     size_t errlen) {
    const eng_gguf_tensor *t = eng_gguf_find_tensor(g, name);
    if (!t) return pl_errf(err, errlen, ENG_CFG_EMISSING, "tensor '%s' is missing", name);
    if (t->ne[0] != ne0 || t->ne[1] != ne1 || t->ne[2] != 1 || t->ne[3] != 1)
        return pl_errf(err, errlen, ENG_CFG_ESHAPE,
                       "tensor '%s' has shape [%lld, %lld, %lld, "
                       "%lld], expected [%lld, %lld]",
                       name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                       (long long)t->ne[3], (long long)ne0, (long long)ne1);
    if (!convertible(t->type))
        return pl_errf(err, errlen, ENG_CFG_ESHAPE,
                       "tensor '%s' has type %s (supported: " ENG_GGUF_CONVERTIBLE_NAMES ")", name,
                       eng_gguf_type_name(t->type));
    return 0;
}

int eng_config_check_tensors(const eng_config *c, const eng_gguf *g, char *err, size_t errlen) {
    int64_t e = c->n_embd, q = (int64_t)c->n_head * c->head_dim;
    int64_t kv = (int64_t)c->n_head_kv * c->head_dim;
    char n[96];
    int rc;
    if ((rc = check_one(g, "token_embd.weight", e, c->n_vocab, err, errlen)) ||
        (rc = check_one(g, "output_norm.weight", e, 1, err, errlen)) ||
        (!c->tied_output && (rc = check_one(g, "output.weight", e, c->n_vocab, err, errlen))) ||
        (c->rope_freq_factors &&
         (rc = check_one(g, "rope_freqs.weight", c->head_dim / 2, 1, err, errlen))))
        return rc;
    for (int l = 0; l < c->n_layer; l++) {
        /* want: which layers carry the tensor; kv: only KV owners (K/V
         * projections, K norm, K/V biases) */
        enum { ALL, QK_NORM, POST_NORMS, QKV_BIAS };
        struct {
            const char *s, *kind;
            int64_t a, b;
            int want, kv;
        } ts[] = {
            {"attn_norm", "weight", e, 1, ALL, 0},
            {"attn_q", "weight", e, q, ALL, 0},
            {"attn_k", "weight", e, kv, ALL, 1},
            {"attn_v", "weight", e, kv, ALL, 1},
            {"attn_output", "weight", q, e, ALL, 0},
            {"ffn_norm", "weight", e, 1, ALL, 0},
            {"ffn_gate", "weight", e, c->n_ff, ALL, 0},
            {"ffn_up", "weight", e, c->n_ff, ALL, 0},
            {"ffn_down", "weight", c->n_ff, e, ALL, 0},
            {"attn_q_norm", "weight", c->head_dim, 1, QK_NORM, 0},
            {"attn_k_norm", "weight", c->head_dim, 1, QK_NORM, 1},
            {"post_attention_norm", "weight", e, 1, POST_NORMS, 0},
            {"post_ffw_norm", "weight", e, 1, POST_NORMS, 0},
            {"attn_q", "bias", q, 1, QKV_BIAS, 0},
            {"attn_k", "bias", kv, 1, QKV_BIAS, 1},
            {"attn_v", "bias", kv, 1, QKV_BIAS, 1},
        };
        int owner = c->kv_src[l] == l;
        for (size_t k = 0; k < sizeof ts / sizeof ts[0]; k++) {
            int w = ts[k].want, kv_only = ts[k].kv;
            snprintf(n, sizeof n, "blk.%d.%s.%s", l, ts[k].s, ts[k].kind);
            if ((w == QK_NORM && !c->has_qk_norm) || (w == POST_NORMS && !c->has_post_norms) ||
                (w == QKV_BIAS && !c->has_qkv_bias))
                continue;
            if (kv_only && !owner) {
                if (eng_gguf_find_tensor(g, n))
                    return pl_errf(err, errlen, ENG_CFG_ESHAPE,
                                   "tensor '%s' is present but layer "
                                   "%d reads layer %d's KV (KV-sharing layers carry no K/V "
                                   "weights or biases)",
                                   n, l, c->kv_src[l]);
                continue;
            }
            if ((rc = check_one(g, n, ts[k].a, ts[k].b, err, errlen))) return rc;
        }
        /* a bias the forward pass would not add is refused, not ignored */
        static const char *const bias[] = {"attn_q",   "attn_k", "attn_v",  "attn_output",
                                           "ffn_gate", "ffn_up", "ffn_down"};
        for (size_t k = c->has_qkv_bias ? 3 : 0; k < sizeof bias / sizeof bias[0]; k++) {
            snprintf(n, sizeof n, "blk.%d.%s.bias", l, bias[k]);
            if (eng_gguf_find_tensor(g, n))
                return pl_errf(err, errlen, ENG_CFG_ESHAPE,
                               "tensor '%s': %s has no %s bias "
                               "(supported: Q/K/V biases on qwen2 and llama)",
                               n, c->arch_name, bias[k]);
        }
    }
    return 0;
}

/* ---- figures ---- */

int eng_config_n_kv_owners(const eng_config *c, int global_only) {
    int n = 0;
    for (int l = 0; l < c->n_layer; l++)
        if (c->kv_src[l] == l && (!global_only || c->window[l] == 0)) n++;
    return n;
}

/* One owning layer's int8 K and V of one token with their scales (eng_kv.h). */
static size_t kv_layer_token_bytes(const eng_config *c) {
    return eng_kv_token_bytes(c->n_head_kv, c->head_dim);
}

size_t eng_config_kv_bytes_per_token(const eng_config *c) {
    return kv_layer_token_bytes(c) * (size_t)eng_config_n_kv_owners(c, 1);
}

uint64_t eng_config_kv_bytes_at(const eng_config *c, uint64_t n_ctx) {
    uint64_t total = 0;
    for (int l = 0; l < c->n_layer; l++) {
        if (c->kv_src[l] != l) continue;
        uint64_t w = (uint64_t)c->window[l];
        total += kv_layer_token_bytes(c) * (w && w < n_ctx ? w : n_ctx);
    }
    return total;
}

size_t eng_config_kv_bytes_mha_fp16(const eng_config *c) {
    return 2 * (size_t)c->n_layer * (size_t)c->n_head * (size_t)c->head_dim * 2;
}

uint64_t eng_config_n_params(const eng_config *c) {
    uint64_t e = (uint64_t)c->n_embd, q = (uint64_t)c->n_head * (uint64_t)c->head_dim;
    uint64_t kv = (uint64_t)c->n_head_kv * (uint64_t)c->head_dim, hd = (uint64_t)c->head_dim;
    uint64_t p = (uint64_t)c->n_vocab * e * (c->tied_output ? 1 : 2) + e;
    if (c->rope_freq_factors) p += hd / 2;
    for (int l = 0; l < c->n_layer; l++) {
        int owner = c->kv_src[l] == l;
        p += 2 * e + 2 * e * q + 3 * e * (uint64_t)c->n_ff;
        if (owner) p += 2 * e * kv;
        if (c->has_qk_norm) p += hd + (owner ? hd : 0);
        if (c->has_qkv_bias) p += q + (owner ? 2 * kv : 0);
        if (c->has_post_norms) p += 2 * e;
    }
    return p;
}
