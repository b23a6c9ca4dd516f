/*
 * test_config.c -- model configuration from GGUF metadata: every mkmodel
 * preset that is cheap to build (written by the real `parley mkmodel` code
 * path), mkmodel determinism, hand-made metadata for each validation rule
 * (the error must name the key and the rule), the gemma3 conventions and
 * optional keys, tensor presence/shape checks, and the KV-bytes formulas on
 * the cai-1b and llama-1b dimensions (the inspect acceptance figures).
 */
#define PTEST_MAIN
#include "ptest.h"

#include <unistd.h>

#include "eng_mkmodel.h"
#include "eng_model.h"
#include "eng_config.h"
#include "gguf_testutil.h"

/* ---- files from mkmodel ---- */

static char *mk(const char *preset, const char *seed, const char *type, const char *window) {
    static int n;
    char *path = malloc(64);
    snprintf(path, 64, "/tmp/parley_cfg_%d_%d.gguf", (int)getpid(), n++);
    eng_mkmodel_opts o;
    eng_mkmodel_opts_default(&o);
    o.preset = preset;
    o.out = path;
    o.seed = strtoull(seed, NULL, 0);
    o.type = !strcmp(type, "f16") ? ENG_MKMODEL_F16 : ENG_MKMODEL_Q8_0;
    o.window = window ? atoi(window) : 0;
    char err[256];
    PT_ASSERT_MSG(eng_mkmodel(&o, err, sizeof err) == 0, "%s", err);
    return path;
}

static void load(const char *path, eng_gguf **g, eng_config *c) {
    char err[512];
    PT_ASSERT_MSG(eng_gguf_open(path, g, err, sizeof err) == 0, "%s", err);
    PT_ASSERT_MSG(eng_config_from_gguf(*g, c, err, sizeof err) == 0, "%s", err);
    PT_ASSERT_MSG(eng_config_check_tensors(c, *g, err, sizeof err) == 0, "%s", err);
}

static uint64_t tensor_elements(const eng_gguf *g) {
    uint64_t n = 0;
    for (int i = 0; i < eng_gguf_n_tensors(g); i++) {
        const eng_gguf_tensor *t = eng_gguf_tensor_at(g, i);
        n += (uint64_t)(t->ne[0] * t->ne[1] * t->ne[2] * t->ne[3]);
    }
    return n;
}

PT_TEST(preset_tiny_llama) {
    char *p = mk("tiny-llama", "1", "q8_0", NULL);
    eng_gguf *g;
    eng_config c;
    load(p, &g, &c);
    PT_EQ_INT(c.arch, ENG_ARCH_LLAMA);
    PT_EQ_INT(c.n_head, 4);
    PT_EQ_INT(c.n_head_kv, 2);
    PT_EQ_INT(c.head_dim, 32);
    PT_EQ_INT(c.rope_type, ENG_ROPE_NORM);
    PT_EQ_INT(c.tied_output, 0);
    PT_EQ_INT(c.has_qk_norm, 0);
    PT_EQ_INT(c.ffn_gelu, 0);
    PT_NEAR(c.embd_scale, 1.0, 0);
    PT_NEAR(c.attn_scale, 1.0 / sqrt(32.0), 1e-7);
    PT_NEAR(c.rope_base_local, c.rope_base, 0);
    for (int l = 0; l < c.n_layer; l++) {
        PT_EQ_INT(c.window[l], 0);
        PT_EQ_INT(c.kv_src[l], l);
    }
    PT_EQ_INT(eng_config_n_params(&c), tensor_elements(g));
    PT_EQ_INT(eng_gguf_find_tensor(g, "blk.0.attn_q.weight")->type, ENG_GGML_TYPE_Q8_0);
    eng_gguf_close(g);
    unlink(p);
    free(p);
}

PT_TEST(preset_tiny_gemma3) {
    char *p = mk("tiny-gemma3", "1", "f16", NULL);
    eng_gguf *g;
    eng_config c;
    load(p, &g, &c);
    PT_EQ_INT(c.arch, ENG_ARCH_GEMMA3);
    PT_EQ_INT(c.n_head_kv, 1);
    PT_EQ_INT(c.sliding_window, 16);
    for (int l = 0; l < c.n_layer; l++) PT_EQ_INT(c.window[l], (l + 1) % 6 == 0 ? 0 : 16);
    PT_NEAR(c.rope_base, 1e6, 0);
    PT_NEAR(c.rope_base_local, 1e4, 0);
    PT_EQ_INT(c.rope_type, ENG_ROPE_NEOX);
    PT_NEAR(c.embd_scale, sqrt(128.0), 1e-5);
    PT_ASSERT(c.has_qk_norm && c.has_post_norms && c.ffn_gelu && c.tied_output);
    PT_EQ_INT(c.norm_add_one, 0);
    PT_EQ_INT(eng_config_n_params(&c), tensor_elements(g));
    PT_EQ_INT(eng_gguf_find_tensor(g, "blk.0.attn_q.weight")->type, ENG_GGML_TYPE_F16);
    float w[128]; /* gemma norms hold 1 + w = 1 */
    const eng_gguf_tensor *t = eng_gguf_find_tensor(g, "blk.3.post_ffw_norm.weight");
    PT_EQ_INT(eng_gguf_row_to_f32(t->type, t->data, 128, w), 0);
    PT_NEAR(w[77], 1.0, 0);
    eng_gguf_close(g);
    unlink(p);
    free(p);
}

PT_TEST(preset_cai_tiny) {
    char *p = mk("cai-tiny", "3", "q8_0", NULL), *p8 = mk("cai-tiny", "3", "q8_0", "8");
    static const int src[12] = {0, 0, 2, 2, 4, 5, 6, 6, 8, 8, 10, 5};
    eng_gguf *g;
    eng_config c;
    load(p, &g, &c);
    PT_EQ_INT(c.arch, ENG_ARCH_LLAMA);
    PT_EQ_INT(c.n_layer, 12);
    PT_EQ_INT(c.n_head_kv, 1);
    PT_ASSERT(c.has_ext_keys);
    for (int l = 0; l < 12; l++) {
        PT_EQ_INT(c.window[l], (l + 1) % 6 == 0 ? 0 : 1024);
        PT_EQ_INT(c.kv_src[l], src[l]);
    }
    PT_ASSERT(eng_gguf_find_tensor(g, "blk.1.attn_k.weight") == NULL);
    PT_ASSERT(eng_gguf_find_tensor(g, "blk.11.attn_v.weight") == NULL);
    PT_EQ_INT(eng_config_n_kv_owners(&c, 0), 7);
    PT_EQ_INT(eng_config_kv_bytes_per_token(&c), 1 * 2 * (32 + 4)); /* one global owner */
    PT_EQ_INT(eng_config_n_params(&c), tensor_elements(g));
    eng_gguf_close(g);
    load(p8, &g, &c);
    for (int l = 0; l < 12; l++) PT_EQ_INT(c.window[l], (l + 1) % 6 == 0 ? 0 : 8);
    eng_gguf_close(g);
    unlink(p);
    unlink(p8);
    free(p);
    free(p8);
}

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    PT_ASSERT(f);
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *b = malloc(*n);
    PT_EQ_INT(fread(b, 1, *n, f), *n);
    fclose(f);
    return b;
}

PT_TEST(mkmodel_deterministic) {
    const char *types[2] = {"q8_0", "f16"};
    for (int k = 0; k < 2; k++) {
        char *a = mk("tiny-gemma3", "7", types[k], NULL),
             *b = mk("tiny-gemma3", "7", types[k], NULL);
        char *c = mk("tiny-gemma3", "8", types[k], NULL);
        size_t na, nb, nc;
        uint8_t *ba = slurp(a, &na), *bb = slurp(b, &nb), *bc = slurp(c, &nc);
        PT_EQ_INT(na, nb);
        PT_ASSERT_MSG(!memcmp(ba, bb, na), "same seed gave different bytes (%s)", types[k]);
        PT_EQ_INT(na, nc);                  /* same layout... */
        PT_ASSERT(memcmp(ba, bc, na) != 0); /* ...different weights */
        unlink(a);
        unlink(b);
        unlink(c);
        free(a);
        free(b);
        free(c);
        free(ba);
        free(bb);
        free(bc);
    }
    eng_mkmodel_opts o;
    eng_mkmodel_opts_default(&o);
    o.preset = "nope";
    o.out = "/tmp/x.gguf";
    char err[256];
    PT_EQ_INT(eng_mkmodel(&o, err, sizeof err), ENG_EINVAL);
    PT_ASSERT(strstr(err, "unknown preset 'nope'") != NULL);
    o.preset = "tiny-llama";
    o.window = 64; /* tiny-llama has no local layers */
    PT_EQ_INT(eng_mkmodel(&o, err, sizeof err), ENG_EINVAL);
}

/* ---- hand-made metadata ---- */

typedef void (*kv_fn)(eng_gguf_writer *w);

/* A file with base llama keys (unless base == 0) plus extra(w); no tensors. */
static int cfg_of(const char *arch, kv_fn extra, eng_config *c, char *err, size_t errlen) {
    eng_gguf_writer *w;
    gt_mem m;
    char k[96];
    PT_EQ_INT(eng_gguf_writer_new(0, &w), 0);
    if (arch) {
        eng_gguf_writer_add_str(w, "general.architecture", arch);
#define KU(s, v) (snprintf(k, sizeof k, "%s." s, arch), eng_gguf_writer_add_u32(w, k, v))
        KU("vocab_size", 40);
        KU("embedding_length", 32);
        KU("feed_forward_length", 64);
        KU("attention.head_count", 2);
        KU("attention.key_length", 16);
        snprintf(k, sizeof k, "%s.attention.layer_norm_rms_epsilon", arch);
        eng_gguf_writer_add_f32(w, k, 1e-5f);
#undef KU
    }
    if (extra) extra(w);
    gt_mem_begin(&m);
    eng_gguf_writer_begin(w, m.f);
    PT_EQ_INT(eng_gguf_writer_finish(w, err, errlen), 0);
    eng_gguf_writer_free(w);
    gt_mem_end(&m);
    eng_gguf *g;
    PT_ASSERT_MSG(eng_gguf_open_mem(m.buf, m.n, &g, err, errlen) == 0, "%s", err);
    int rc = eng_config_from_gguf(g, c, err, errlen);
    eng_gguf_close(g);
    free(m.buf);
    return rc;
}

static void expect_cfg(const char *arch, kv_fn extra, int code, const char *want) {
    eng_config c;
    char err[512] = "";
    int rc = cfg_of(arch, extra, &c, err, sizeof err);
    PT_ASSERT_MSG(rc == code, "rc %d, expected %d (%s)", rc, code, err);
    PT_ASSERT_MSG(strstr(err, want), "error '%s' lacks '%s'", err, want);
}

static void two_layers(eng_gguf_writer *w) { eng_gguf_writer_add_u32(w, "llama.block_count", 2); }
static void kv_4(eng_gguf_writer *w) {
    two_layers(w);
    eng_gguf_writer_add_u32(w, "llama.attention.head_count_kv", 4);
}
static void zero_layers(eng_gguf_writer *w) { eng_gguf_writer_add_u32(w, "llama.block_count", 0); }
static void str_layers(eng_gguf_writer *w) { eng_gguf_writer_add_str(w, "llama.block_count", "2"); }
static void rope16(eng_gguf_writer *w) {
    two_layers(w);
    eng_gguf_writer_add_u32(w, "llama.rope.dimension_count", 8);
}
static void vlen(eng_gguf_writer *w) {
    two_layers(w);
    eng_gguf_writer_add_u32(w, "llama.attention.value_length", 8);
}
static void arr_i32(eng_gguf_writer *w, const char *key, int32_t a, int32_t b) {
    int32_t v[2] = {a, b};
    eng_gguf_writer_add_arr(w, key, ENG_GGUF_TYPE_I32, v, 2);
}
static void src_fwd(eng_gguf_writer *w) {
    two_layers(w);
    arr_i32(w, "llama.attention.layer_kv_source", 1, 1);
}
static void win_mismatch(eng_gguf_writer *w) {
    two_layers(w);
    arr_i32(w, "llama.attention.layer_window", 16, 0);
    arr_i32(w, "llama.attention.layer_kv_source", 0, 0);
}
static void win_len(eng_gguf_writer *w) {
    two_layers(w);
    eng_gguf_writer_add_arr(w, "llama.attention.layer_window", ENG_GGUF_TYPE_I32,
                            (int32_t[3]){0, 0, 0}, 3);
}
static void win_f32(eng_gguf_writer *w) {
    two_layers(w);
    eng_gguf_writer_add_arr(w, "llama.attention.layer_window", ENG_GGUF_TYPE_F32, (float[2]){0, 0},
                            2);
}
static void three_chain(eng_gguf_writer *w) {
    eng_gguf_writer_add_u32(w, "llama.block_count", 3);
    eng_gguf_writer_add_arr(w, "llama.attention.layer_kv_source", ENG_GGUF_TYPE_U8,
                            (uint8_t[3]){0, 0, 1}, 3);
}
static void gem_layers(eng_gguf_writer *w) { eng_gguf_writer_add_u32(w, "gemma3.block_count", 8); }

PT_TEST(config_errors_named) {
    expect_cfg(NULL, NULL, ENG_CFG_EMISSING, "'general.architecture' is missing");
    expect_cfg("gpt2", NULL, ENG_CFG_EARCH,
               "unsupported architecture 'gpt2' (supported: llama, qwen2, qwen3, gemma3)");
    expect_cfg("mistral3", NULL, ENG_CFG_EARCH, "unsupported architecture 'mistral3'");
    expect_cfg("llama", NULL, ENG_CFG_EMISSING, "'llama.block_count' is missing");
    expect_cfg("llama", kv_4, ENG_CFG_EINVAL,
               "'llama.attention.head_count_kv' = 4 is out of range [1, 2]");
    expect_cfg("llama", zero_layers, ENG_CFG_EINVAL, "'llama.block_count' = 0 is out of range");
    expect_cfg("llama", str_layers, ENG_CFG_EINVAL,
               "'llama.block_count' has type str, expected an integer");
    expect_cfg("llama", rope16, ENG_CFG_EINVAL, "partial rotary");
    expect_cfg("llama", vlen, ENG_CFG_EINVAL, "value_length = 8");
    expect_cfg("llama", src_fwd, ENG_CFG_EINVAL, "layer_kv_source[0] = 1");
    expect_cfg("llama", win_mismatch, ENG_CFG_EINVAL, "sharing layers need the same window");
    expect_cfg("llama", win_len, ENG_CFG_EINVAL, "has 3 elements, expected block_count = 2");
    expect_cfg("llama", win_f32, ENG_CFG_EINVAL, "must be an array of integers");
    expect_cfg("llama", three_chain, ENG_CFG_EINVAL, "layer 1 does not own its KV");
    expect_cfg("gemma3", gem_layers, ENG_CFG_EMISSING,
               "'gemma3.attention.sliding_window' is missing");
}

static void gem_ok(eng_gguf_writer *w) {
    eng_gguf_writer_add_u32(w, "gemma3.block_count", 8);
    eng_gguf_writer_add_u32(w, "gemma3.attention.sliding_window", 512);
}
static void gem_pattern(eng_gguf_writer *w) {
    gem_ok(w);
    eng_gguf_writer_add_f32(w, "gemma3.rope.freq_base_swa", 20000.0f);
    eng_gguf_writer_add_arr(w, "gemma3.attention.sliding_window_pattern", ENG_GGUF_TYPE_BOOL,
                            (uint8_t[8]){1, 0, 1, 0, 1, 1, 1, 0}, 8);
}

PT_TEST(gemma3_keys) {
    eng_config c;
    char err[256];
    PT_ASSERT_MSG(cfg_of("gemma3", gem_ok, &c, err, sizeof err) == 0, "%s", err);
    PT_NEAR(c.rope_base, 1e6, 0);
    PT_NEAR(c.rope_base_local, 1e4, 0);
    for (int l = 0; l < 8; l++) PT_EQ_INT(c.window[l], l == 5 ? 0 : 512);
    PT_EQ_INT(c.head_dim, 16);
    PT_NEAR(c.attn_scale, 0.25, 1e-7);
    PT_ASSERT_MSG(cfg_of("gemma3", gem_pattern, &c, err, sizeof err) == 0, "%s", err);
    PT_NEAR(c.rope_base_local, 20000, 0);
    static const int pat[8] = {1, 0, 1, 0, 1, 1, 1, 0};
    for (int l = 0; l < 8; l++) PT_EQ_INT(c.window[l], pat[l] ? 512 : 0);
}

static void qwen_layers(eng_gguf_writer *w) {
    eng_gguf_writer_add_u32(w, "qwen2.block_count", 2);
    eng_gguf_writer_add_u32(w, "qwen3.block_count", 2);
}

PT_TEST(qwen_keys) {
    eng_config c;
    char err[256];
    PT_ASSERT_MSG(cfg_of("qwen2", qwen_layers, &c, err, sizeof err) == 0, "%s", err);
    PT_EQ_INT(c.arch, ENG_ARCH_QWEN2);
    PT_ASSERT(!strcmp(c.arch_name, "qwen2"));
    PT_EQ_INT(c.rope_type, ENG_ROPE_NEOX);
    PT_ASSERT(c.has_qkv_bias && !c.has_qk_norm && !c.has_post_norms && !c.ffn_gelu);
    PT_NEAR(c.rope_base, 1e4, 0);
    PT_NEAR(c.embd_scale, 1.0, 0);
    PT_ASSERT_MSG(cfg_of("qwen3", qwen_layers, &c, err, sizeof err) == 0, "%s", err);
    PT_EQ_INT(c.arch, ENG_ARCH_QWEN3);
    PT_EQ_INT(c.rope_type, ENG_ROPE_NEOX);
    PT_ASSERT(!c.has_qkv_bias && c.has_qk_norm && !c.has_post_norms && !c.ffn_gelu);
    PT_EQ_INT(c.head_dim, 16);
    PT_NEAR(c.rope_freq_scale, 1.0, 0);
}

static void rope_lin(eng_gguf_writer *w) {
    two_layers(w);
    eng_gguf_writer_add_str(w, "llama.rope.scaling.type", "linear");
    eng_gguf_writer_add_f32(w, "llama.rope.scaling.factor", 4.0f);
}
static void rope_factor_only(eng_gguf_writer *w) {
    two_layers(w);
    eng_gguf_writer_add_f32(w, "llama.rope.scaling.factor", 8.0f);
}
static void rope_none(eng_gguf_writer *w) {
    two_layers(w);
    eng_gguf_writer_add_str(w, "llama.rope.scaling.type", "none");
}
static void rope_none_factor(eng_gguf_writer *w) {
    rope_none(w);
    eng_gguf_writer_add_f32(w, "llama.rope.scaling.factor", 2.0f);
}
static void rope_yarn(eng_gguf_writer *w) {
    two_layers(w);
    eng_gguf_writer_add_u32(w, "llama.context_length", 512);
    eng_gguf_writer_add_str(w, "llama.rope.scaling.type", "yarn");
    eng_gguf_writer_add_f32(w, "llama.rope.scaling.factor", 4.0f);
}
static void rope_yarn_ext(eng_gguf_writer *w) {
    rope_yarn(w);
    eng_gguf_writer_add_f32(w, "llama.rope.scaling.yarn_ext_factor", 0.5f);
}
static void rope_longrope(eng_gguf_writer *w) {
    two_layers(w);
    eng_gguf_writer_add_str(w, "llama.rope.scaling.type", "longrope");
}
static void gem_yarn(eng_gguf_writer *w) {
    gem_ok(w);
    eng_gguf_writer_add_str(w, "gemma3.rope.scaling.type", "yarn");
    eng_gguf_writer_add_f32(w, "gemma3.rope.scaling.factor", 8.0f);
}
static void rope_llama3(eng_gguf_writer *w) {
    two_layers(w);
    eng_gguf_writer_add_str(w, "llama.rope.scaling.type", "llama3");
}
static void rope_neg(eng_gguf_writer *w) {
    two_layers(w);
    eng_gguf_writer_add_str(w, "llama.rope.scaling.type", "linear");
    eng_gguf_writer_add_f32(w, "llama.rope.scaling.factor", -2.0f);
}
static void rope_type_int(eng_gguf_writer *w) {
    two_layers(w);
    eng_gguf_writer_add_u32(w, "llama.rope.scaling.type", 1);
}
static void gem_lin(eng_gguf_writer *w) {
    gem_ok(w);
    eng_gguf_writer_add_str(w, "gemma3.rope.scaling.type", "linear");
    eng_gguf_writer_add_f32(w, "gemma3.rope.scaling.factor", 8.0f);
}

PT_TEST(rope_scaling_keys) {
    eng_config c;
    char err[256];
    PT_ASSERT_MSG(cfg_of("llama", rope_lin, &c, err, sizeof err) == 0, "%s", err);
    PT_NEAR(c.rope_freq_scale, 0.25, 0);
    PT_NEAR(c.rope_freq_scale_local, 0.25, 0);
    PT_EQ_INT(c.rope_freq_factors, 0);
    /* no type key: linear, as llama.cpp */
    PT_ASSERT_MSG(cfg_of("llama", rope_factor_only, &c, err, sizeof err) == 0, "%s", err);
    PT_NEAR(c.rope_freq_scale, 0.125, 0);
    PT_ASSERT_MSG(cfg_of("llama", rope_none, &c, err, sizeof err) == 0, "%s", err);
    PT_NEAR(c.rope_freq_scale, 1.0, 0);
    /* gemma3: global layers only */
    PT_ASSERT_MSG(cfg_of("gemma3", gem_lin, &c, err, sizeof err) == 0, "%s", err);
    PT_NEAR(c.rope_freq_scale, 0.125, 0);
    PT_NEAR(c.rope_freq_scale_local, 1.0, 0);
    expect_cfg("llama", rope_none_factor, ENG_CFG_EINVAL,
               "= 'none' but llama.rope.scaling.factor = 2");
    PT_ASSERT_MSG(cfg_of("llama", rope_yarn, &c, err, sizeof err) == 0, "%s", err);
    PT_EQ_INT(c.rope_yarn, 1);
    PT_NEAR(c.rope_freq_scale, 0.25, 0);
    PT_EQ_INT(c.rope_yarn_orig_ctx, 512);
    PT_NEAR(c.rope_yarn_beta_fast, 32, 0);
    PT_NEAR(c.rope_yarn_beta_slow, 1, 0);
    { /* attention scaled by (1 + 0.1 ln 4)^2 */
        double m = 1 + 0.1 * log(4.0);
        PT_NEAR(c.attn_scale, 0.25 * m * m, 1e-6);
    }
    expect_cfg("llama", rope_yarn_ext, ENG_CFG_EINVAL,
               "key 'llama.rope.scaling.yarn_ext_factor' = 0.5: YaRN with a value other than 1 "
               "is not supported");
    expect_cfg("gemma3", gem_yarn, ENG_CFG_EINVAL, "YaRN on gemma3 is not supported");
    expect_cfg(
        "llama", rope_longrope, ENG_CFG_EINVAL,
        "llama.rope.scaling.type = 'longrope': this rope scaling type is not supported "
        "(supported: none, linear, yarn, and Llama 3 frequency factors in rope_freqs.weight)");
    expect_cfg("llama", rope_llama3, ENG_CFG_EINVAL,
               "'llama3': this rope scaling type is not supported");
    expect_cfg("llama", rope_neg, ENG_CFG_EINVAL,
               "'llama.rope.scaling.factor' = -2 is out of range");
    expect_cfg("llama", rope_type_int, ENG_CFG_EINVAL, "'llama.rope.scaling.type' has type u32");
}

/* cai-1b's layer plan, written out (see engine/model/mkmodel.c). */
static void cai1b(eng_gguf_writer *w) {
    int32_t win[24], src[24] = {0,  0,  2,  2,  4,  5,  6,  6,  8,  8,  10, 5,
                                12, 12, 14, 14, 16, 17, 18, 18, 20, 20, 22, 17};
    for (int l = 0; l < 24; l++) win[l] = (l + 1) % 6 == 0 ? 0 : 1024;
    eng_gguf_writer_add_arr(w, "llama.attention.layer_window", ENG_GGUF_TYPE_I32, win, 24);
    eng_gguf_writer_add_arr(w, "llama.attention.layer_kv_source", ENG_GGUF_TYPE_I32, src, 24);
}

PT_TEST(kv_bytes_cai_1b) {
    eng_gguf_writer *w;
    gt_mem m;
    char err[256];
    eng_gguf *g;
    eng_config c;
    PT_EQ_INT(eng_gguf_writer_new(0, &w), 0);
    eng_gguf_writer_add_str(w, "general.architecture", "llama");
    eng_gguf_writer_add_u32(w, "llama.vocab_size", 32768);
    eng_gguf_writer_add_u32(w, "llama.embedding_length", 2048);
    eng_gguf_writer_add_u32(w, "llama.block_count", 24);
    eng_gguf_writer_add_u32(w, "llama.feed_forward_length", 5632);
    eng_gguf_writer_add_u32(w, "llama.attention.head_count", 16);
    eng_gguf_writer_add_u32(w, "llama.attention.head_count_kv", 1);
    eng_gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    cai1b(w);
    gt_mem_begin(&m);
    eng_gguf_writer_begin(w, m.f);
    PT_EQ_INT(eng_gguf_writer_finish(w, err, sizeof err), 0);
    eng_gguf_writer_free(w);
    gt_mem_end(&m);
    PT_EQ_INT(eng_gguf_open_mem(m.buf, m.n, &g, err, sizeof err), 0);
    PT_ASSERT_MSG(eng_config_from_gguf(g, &c, err, sizeof err) == 0, "%s", err);
    PT_EQ_INT(c.head_dim, 128);
    PT_EQ_INT(eng_config_n_kv_owners(&c, 0), 14);
    PT_EQ_INT(eng_config_n_kv_owners(&c, 1), 2);
    PT_EQ_INT(eng_config_kv_bytes_mha_fp16(&c), 196608);
    /* per owner and token: K, V int8 128 each, 4 K scales (one per 32), 1 V scale */
    PT_EQ_INT(eng_config_kv_bytes_per_token(&c), 2 * (2 * 128 + 4 * (4 + 1)));
    PT_EQ_INT(eng_config_kv_bytes_at(&c, 8192), 12 * 276 * 1024 + 2 * 276 * 8192);
    PT_EQ_INT(eng_config_kv_bytes_at(&c, 100), 14 * 276 * 100); /* inside the window */
    PT_ASSERT(196608.0 / (eng_config_kv_bytes_at(&c, 8192) / 8192.0) >= 20.0);
    PT_EQ_INT(eng_config_n_params(&c), 1106348032ull);
    eng_gguf_close(g);
    free(m.buf);
}

/* ---- tensor checks ---- */

/* Tiny llama file: n_embd 32, 2 layers, 2 heads (1 KV) x 16, ff 64, vocab 40,
 * layer 1 shares layer 0's KV; skip / reshape / add one tensor on demand. */
static int tensors_case(const char *skip, const char *reshape, const char *extra, int type,
                        char *err, size_t errlen) {
    struct {
        const char *n;
        int64_t a, b;
    } ts[] = {
        {"token_embd.weight", 32, 40},
        {"output_norm.weight", 32, 1},
        {"blk.0.attn_norm.weight", 32, 1},
        {"blk.0.attn_q.weight", 32, 32},
        {"blk.0.attn_k.weight", 32, 16},
        {"blk.0.attn_v.weight", 32, 16},
        {"blk.0.attn_output.weight", 32, 32},
        {"blk.0.ffn_norm.weight", 32, 1},
        {"blk.0.ffn_gate.weight", 32, 64},
        {"blk.0.ffn_up.weight", 32, 64},
        {"blk.0.ffn_down.weight", 64, 32},
        {"blk.1.attn_norm.weight", 32, 1},
        {"blk.1.attn_q.weight", 32, 32},
        {"blk.1.attn_output.weight", 32, 32},
        {"blk.1.ffn_norm.weight", 32, 1},
        {"blk.1.ffn_gate.weight", 32, 64},
        {"blk.1.ffn_up.weight", 32, 64},
        {"blk.1.ffn_down.weight", 64, 32},
        {extra ? extra : "unused.extra", 32, 16},
    };
    eng_gguf_writer *w;
    gt_mem m;
    PT_EQ_INT(eng_gguf_writer_new(0, &w), 0);
    eng_gguf_writer_add_str(w, "general.architecture", "llama");
    eng_gguf_writer_add_u32(w, "llama.vocab_size", 40);
    eng_gguf_writer_add_u32(w, "llama.embedding_length", 32);
    eng_gguf_writer_add_u32(w, "llama.block_count", 2);
    eng_gguf_writer_add_u32(w, "llama.feed_forward_length", 64);
    eng_gguf_writer_add_u32(w, "llama.attention.head_count", 2);
    eng_gguf_writer_add_u32(w, "llama.attention.head_count_kv", 1);
    eng_gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    arr_i32(w, "llama.attention.layer_kv_source", 0, 0);
    int n = (int)(sizeof ts / sizeof ts[0]);
    for (int i = 0; i < n; i++) {
        if (skip && !strcmp(ts[i].n, skip)) continue;
        int64_t ne[2] = {ts[i].a, ts[i].b + (reshape && !strcmp(ts[i].n, reshape))};
        int t = type >= 0 && i == 3 ? type : ENG_GGML_TYPE_F32;
        eng_gguf_writer_add_tensor(w, ts[i].n, t, ne[1] == 1 ? 1 : 2, ne);
    }
    gt_mem_begin(&m);
    eng_gguf_writer_begin(w, m.f);
    static const uint8_t zeros[65536];
    for (int i = 0; i < n; i++) {
        if (skip && !strcmp(ts[i].n, skip)) continue;
        uint64_t rowb;
        int t = type >= 0 && i == 3 ? type : ENG_GGML_TYPE_F32;
        PT_EQ_INT(eng_gguf_row_bytes(t, ts[i].a, &rowb), 0);
        eng_gguf_writer_write(
            w, zeros, (size_t)rowb * (size_t)(ts[i].b + (reshape && !strcmp(ts[i].n, reshape))));
    }
    PT_ASSERT_MSG(eng_gguf_writer_finish(w, err, errlen) == 0, "%s", err);
    eng_gguf_writer_free(w);
    gt_mem_end(&m);
    eng_gguf *g;
    eng_config c;
    PT_ASSERT_MSG(eng_gguf_open_mem(m.buf, m.n, &g, err, errlen) == 0, "%s", err);
    PT_ASSERT_MSG(eng_config_from_gguf(g, &c, err, errlen) == 0, "%s", err);
    PT_EQ_INT(c.tied_output, 1);
    int rc = eng_config_check_tensors(&c, g, err, errlen);
    eng_gguf_close(g);
    free(m.buf);
    return rc;
}

PT_TEST(tensor_checks) {
    char err[512];
    PT_ASSERT_MSG(tensors_case(NULL, NULL, NULL, -1, err, sizeof err) == 0, "%s", err);
    PT_EQ_INT(tensors_case("blk.1.ffn_up.weight", NULL, NULL, -1, err, sizeof err),
              ENG_CFG_EMISSING);
    PT_ASSERT(strstr(err, "tensor 'blk.1.ffn_up.weight' is missing"));
    PT_EQ_INT(tensors_case(NULL, "blk.0.attn_k.weight", NULL, -1, err, sizeof err), ENG_CFG_ESHAPE);
    PT_ASSERT(strstr(err, "'blk.0.attn_k.weight' has shape [32, 17, 1, 1], expected [32, 16]"));
    PT_EQ_INT(tensors_case(NULL, NULL, "blk.1.attn_v.weight", -1, err, sizeof err), ENG_CFG_ESHAPE);
    PT_ASSERT(strstr(err, "layer 1 reads layer 0's KV"));
    PT_EQ_INT(tensors_case(NULL, NULL, NULL, ENG_GGML_TYPE_I8, err, sizeof err), ENG_CFG_ESHAPE);
    PT_ASSERT(strstr(err, "'blk.0.attn_q.weight' has type i8 (supported: f32, f16, bf16, q4_0"));
    PT_EQ_INT(tensors_case(NULL, NULL, "blk.0.attn_output.bias", -1, err, sizeof err),
              ENG_CFG_ESHAPE);
    PT_ASSERT_MSG(strstr(err, "'blk.0.attn_output.bias': llama has no attn_output bias"), "%s",
                  err);
    PT_EQ_INT(tensors_case(NULL, NULL, "rope_freqs.weight", -1, err, sizeof err), ENG_CFG_ESHAPE);
    PT_ASSERT_MSG(strstr(err, "'rope_freqs.weight' has shape [32, 16, 1, 1], expected [8, 1]"),
                  "%s", err);
}

PT_TEST(head_dim_needs_divisible_width) {
    eng_gguf_writer *w;
    gt_mem m;
    char err[256];
    eng_gguf *g;
    eng_config c;
    PT_EQ_INT(eng_gguf_writer_new(0, &w), 0);
    eng_gguf_writer_add_str(w, "general.architecture", "llama");
    eng_gguf_writer_add_u32(w, "llama.vocab_size", 40);
    eng_gguf_writer_add_u32(w, "llama.embedding_length", 30);
    eng_gguf_writer_add_u32(w, "llama.block_count", 1);
    eng_gguf_writer_add_u32(w, "llama.feed_forward_length", 64);
    eng_gguf_writer_add_u32(w, "llama.attention.head_count", 4);
    eng_gguf_writer_add_f32(w, "llama.attention.layer_norm_rms_epsilon", 1e-5f);
    gt_mem_begin(&m);
    eng_gguf_writer_begin(w, m.f);
    PT_EQ_INT(eng_gguf_writer_finish(w, err, sizeof err), 0);
    eng_gguf_writer_free(w);
    gt_mem_end(&m);
    PT_EQ_INT(eng_gguf_open_mem(m.buf, m.n, &g, err, sizeof err), 0);
    PT_EQ_INT(eng_config_from_gguf(g, &c, err, sizeof err), ENG_CFG_EINVAL);
    PT_ASSERT_MSG(strstr(err, "embedding_length = 30 is not a multiple of head_count = 4"), "%s",
                  err);
    eng_gguf_close(g);
    free(m.buf);
}
