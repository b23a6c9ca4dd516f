/*
 * eng_config.h -- a model's configuration as the engine sees it, read from
 * GGUF metadata, and the checks that the file's tensors match it.
 *
 * Purpose.  The forward pass, the KV layout and `parley inspect` all need
 * the same facts about a model (sizes, per-layer attention window, which
 * layer's KV each layer uses, norm/rope/FFN conventions).  eng_config_from_gguf
 * reads them once from the standard keys llama.cpp writes, plus parley's
 * extension keys, and validates them; eng_config_check_tensors checks that
 * every tensor the architecture needs is present with the expected shape.
 *
 * Architectures (general.architecture; any other is refused with this list):
 *   llama   keys llama.* : context_length, embedding_length, block_count,
 *           feed_forward_length, attention.head_count, attention.head_count_kv
 *           (default = head_count; 1 = MQA, GQA otherwise),
 *           attention.layer_norm_rms_epsilon, rope.freq_base (default 10000),
 *           rope.dimension_count (must equal head_dim when present: partial
 *           rotary is not supported), attention.key_length/value_length
 *           (must equal each other; default n_embd / n_head), vocab_size
 *           (default: length of tokenizer.ggml.tokens, else token_embd's
 *           rows).  RMSNorm y = x / rms(x) * w, SiLU-gated FFN, rope NORM
 *           (adjacent pairs, as llama.cpp runs llama), attn scale
 *           1/sqrt(head_dim), embd_scale 1, tied output when output.weight
 *           is absent.  Optional blk.N.attn_q/attn_k/attn_v.bias (as
 *           llama.cpp; the converter permutes the Q/K biases like the rows).
 *           Mistral 7B / Nemo files say "llama" and load here; "mistral3" /
 *           "mistral4" are other graphs (refused as unknown).
 *   qwen2   keys qwen2.* as llama; Q/K/V biases blk.N.attn_q.bias [n_head *
 *           head_dim], attn_k.bias / attn_v.bias [n_head_kv * head_dim]
 *           (required), added to the projections before rope; rope NEOX
 *           (llama.cpp's converter does not permute Q/K for qwen2/qwen3).
 *   qwen3   keys qwen3.* as llama (attention.key_length may differ from
 *           n_embd / n_head); no biases; per-head RMSNorm on Q and K
 *           (attn_q_norm / attn_k_norm [head_dim], weights used as stored:
 *           x / rms(x) * w) before rope; rope NEOX.
 *   gemma3  keys gemma3.* : the same names, with attention.key_length and
 *           attention.value_length (head_dim, equal), attention.sliding_window
 *           (W), rope.freq_base (global layers, default 1e6) and
 *           rope.freq_base_swa (local layers; llama.cpp hard-codes 10000 for
 *           gemma3 and newer converters write this key, accepted when present),
 *           optional attention.sliding_window_pattern (n_layer bools/ints,
 *           true = local layer, as llama.cpp reads it for gemma3n/gemma4).
 *           Without that key the 5 local : 1 global pattern is used: layer i
 *           is global iff (i + 1) % 6 == 0 (transformers' Gemma3TextConfig
 *           layer_types with sliding_window_pattern 6; llama.cpp
 *           set_swa_pattern(6)).  Conventions: embedding scaled by
 *           sqrt(n_embd); RMSNorm weights -- transformers computes x*(1+w),
 *           llama.cpp's converter stores w+1 in the GGUF, so the FILE HOLDS
 *           (1+w) and the engine computes x/rms(x) * w_file (norm_add_one = 0);
 *           Q and K RMSNorm over head_dim (attn_q_norm/attn_k_norm), norms
 *           after attention and after the FFN (post_attention_norm,
 *           post_ffw_norm) before each residual add; GELU-tanh gated FFN;
 *           rope NEOX (halves); attn scale 1/sqrt(head_dim) (llama.cpp's
 *           choice for every size but 27B, i.e. query_pre_attn_scalar =
 *           head_dim: build reference transformers models with that value).
 *
 * Rope scaling (any architecture, <arch> = its name):
 *   <arch>.rope.scaling.type "none" | "linear" (absent = linear, as
 *       llama.cpp) with <arch>.rope.scaling.factor f (absent or 0 = 1):
 *       every frequency is multiplied by rope_freq_scale = 1 / f, i.e.
 *       positions divided by f (gemma3: global layers only, local layers
 *       keep scale 1, as llama.cpp and transformers).
 *   "yarn" (llama, qwen2, qwen3; factor f >= 1): YaRN as llama.cpp's
 *       rope_yarn with ext_factor 1 and transformers' _compute_yarn_parameters
 *       (truncate): with e_i = base^(-2i/d) and d = head_dim, the correction
 *       range lo = max(0, floor(c(beta_fast))), hi = min(d - 1,
 *       ceil(c(beta_slow))), c(b) = d ln(n_orig / (2 pi b)) / (2 ln base),
 *       n_orig = rope.scaling.original_context_length (default
 *       context_length), beta_fast / beta_slow = 32 / 1 (llama.cpp's and
 *       transformers' defaults; the keys yarn_beta_fast / yarn_beta_slow are
 *       accepted only with those values, see config.c); r_i = 1 - clamp((i - lo) /
 *       max(0.001, hi - lo), 0, 1); frequency i = e_i / f (1 - r_i) + e_i r_i;
 *       cos and sin are scaled by m = 1 + 0.1 ln f, which the engine applies
 *       as attn_scale *= m^2.  Keys that change llama.cpp's YaRN defaults
 *       (yarn_ext_factor != 1, attn_factor or yarn_attn_factor != 1,
 *       yarn_log_multiplier != 0, betas other than 32 / 1) are refused, and
 *       so is YaRN on gemma3.
 *   Other types (longrope, ...) are refused: parley does not compute them.
 *   rope_freqs.weight  [head_dim / 2] f32 (llama only): Llama 3.1 "llama3"
 *       scaling as llama.cpp's converter stores it; frequency i is divided
 *       by rope_freqs[i] (1 = high frequencies kept, factor = low ones
 *       interpolated, smooth in between); every value must be finite and
 *       > 0 (checked at load).
 *   Frequency i of a layer: base^(-2i/head_dim) (double, rounded to float),
 *       then / rope_freqs[i], then * rope_freq_scale (float) -- or the YaRN
 *       mix above (in double, rounded to float) --, tabled at load; angle =
 *       pos * freq in float.
 *
 * Parley extension keys (valid on every architecture, <arch> = the
 * architecture name):
 *   <arch>.attention.layer_window     array of n_layer integers: per-layer
 *       attention window in tokens, 0 = global.  A layer of window W at
 *       position p attends positions (p-W, p].  Overrides the gemma3 pattern.
 *   <arch>.attention.layer_kv_source  array of n_layer integers: layer i
 *       reads and writes the KV of layer kv_src[i] (cross-layer KV sharing).
 *       Rules: kv_src[i] <= i; the source owns its KV (kv_src[src] == src);
 *       a sharing layer has the same window as its source (the head shape
 *       is model-wide, so it matches by construction).
 *   Tensor convention for sharing layers: a layer with kv_src[i] != i
 *   computes no K and V, so it has NO blk.i.attn_k.weight / attn_v.weight
 *   (nor attn_k_norm on gemma3/qwen3, attn_k/attn_v.bias on qwen2); their
 *   presence is an error.  Any blk.N.*.bias the architecture does not
 *   apply (attn_output, ffn_*, Q/K/V outside qwen2/llama) is refused.
 *
 * KV memory figures (int8 K and V with f32 scales as eng_kv.h lays them
 * out: head_dim / eng_kv_k_group(head_dim) for K, one for V, per KV head):
 *   per owning layer per token
 *       b = n_head_kv * (2 * head_dim + 4 * (head_dim / k_group + 1)) bytes
 *   eng_config_kv_bytes_per_token = b * (KV-owning global layers): the
 *       asymptotic cost of one more token (local layers hold at most W
 *       tokens, so they cost 0 per token beyond their window);
 *   eng_config_kv_bytes_at(c, n) = sum over owning layers of
 *       b * (window ? min(window, n) : n): total KV of an n-token context;
 *       amortised per token = kv_bytes_at(n) / n (inspect prints it at
 *       n = 8192 and at n_ctx_train);
 *   eng_config_kv_bytes_mha_fp16 = 2 * n_layer * n_head * head_dim * 2: the
 *       baseline of an MHA model of the same dims with an fp16 cache.
 *
 * Threading/ownership: eng_config is a plain value, filled by the caller's
 * call and freely copyable.  Failure behaviour: functions return 0 or a
 * negative ENG_CFG_E* code and write one line naming the key/tensor, the
 * value found and the rule it breaks; *cfg is unspecified on failure.
 */
#ifndef ENG_CONFIG_H
#define ENG_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "eng_gguf.h"

#define ENG_CFG_EMISSING (-405) /* required key or tensor missing */
#define ENG_CFG_EINVAL (-401)   /* a value out of range or inconsistent */
#define ENG_CFG_EARCH (-410)    /* unknown architecture */
#define ENG_CFG_ESHAPE (-406)   /* tensor shape / type mismatch */

typedef enum {
    ENG_ARCH_LLAMA = 1,
    ENG_ARCH_GEMMA3 = 2,
    ENG_ARCH_QWEN2 = 3,
    ENG_ARCH_QWEN3 = 4
} eng_arch;

#define ENG_MAX_LAYERS 256

/* Context length inspect uses for the amortised local-layer KV figure. */
#define ENG_CONFIG_REF_CTX 8192

typedef struct eng_config {
    eng_arch arch;         /* architecture */
    char arch_name[32];    /* general.architecture as in the file */
    int n_vocab;           /* vocabulary size (token_embd rows) */
    int n_embd;            /* model width */
    int n_layer;           /* transformer blocks, 1..ENG_MAX_LAYERS */
    int n_head;            /* query heads */
    int n_head_kv;         /* KV heads (divides n_head; 1 = MQA) */
    int head_dim;          /* per-head dim of Q, K and V */
    int n_ff;              /* FFN hidden width */
    int n_ctx_train;       /* context_length (0 if absent) */
    float norm_eps;        /* RMSNorm epsilon */
    float rope_base;       /* rope theta, global layers */
    float rope_base_local; /* rope theta, local (window > 0) layers;
                                  * = rope_base for llama */
    int rope_type;         /* eng_rope_type (eng_backend.h): llama NORM, gemma3/qwen2/qwen3 NEOX */
    float rope_freq_scale; /* global layers: multiplier on every rope
                                  * frequency (1 / linear factor; 1 = none) */
    float rope_freq_scale_local; /* local layers (gemma3: always 1) */
    int rope_freq_factors;       /* 1: rope_freqs.weight divides frequency i
                                  * (Llama 3 scaling; llama only) */
    int rope_yarn;               /* 1: YaRN (rope_freq_scale = 1 / factor) */
    int rope_yarn_orig_ctx;      /* YaRN original_context_length */
    float rope_yarn_beta_fast;   /* YaRN correction range bounds (rotations; */
    float rope_yarn_beta_slow;   /* always 32 and 1, the only values accepted) */
    float attn_scale;            /* multiplier on q.k (1/sqrt(head_dim), times
                                  * the YaRN m^2) */
    float embd_scale;            /* gemma3: sqrt(n_embd), llama: 1 */
    int norm_add_one;            /* 1: compute x*(1+w); always 0 for GGUF
                                  * input (the file already holds 1+w) */
    int has_qk_norm;             /* gemma3, qwen3: RMSNorm on q and k per head */
    int has_qkv_bias;            /* qwen2 (llama when present): Q/K/V biases */
    int has_post_norms;          /* gemma3: post-attention and post-FFN norms */
    int ffn_gelu;                /* 1: GELU-tanh gated (gemma), 0: SiLU gated */
    int tied_output;             /* output projection = token_embd */
    int sliding_window;          /* gemma3 attention.sliding_window (0 none) */
    int has_ext_keys;            /* parley extension keys were present */
    int window[ENG_MAX_LAYERS];  /* per layer window in tokens, 0 = global */
    int kv_src[ENG_MAX_LAYERS];  /* per layer: layer whose KV it reads and
                                  * writes (== i: owns its KV) */
    float final_logit_softcap;   /* 0 = none */
} eng_config;

/* Fill cfg from g's metadata (and token_embd/output presence).  Returns 0,
 * ENG_CFG_EARCH (message lists the supported architectures),
 * ENG_CFG_EMISSING or ENG_CFG_EINVAL. */
int eng_config_from_gguf(const eng_gguf *g, eng_config *cfg, char *err, size_t errlen);

/* Check every tensor the architecture needs: present, with the expected
 * shape (GGUF order ne[0] = input dim) and a type eng_gguf_row_to_f32
 * converts; K/V projections absent in KV-sharing layers.  Returns 0,
 * ENG_CFG_EMISSING or ENG_CFG_ESHAPE. */
int eng_config_check_tensors(const eng_config *c, const eng_gguf *g, char *err, size_t errlen);

/* Name of an architecture ("llama", "qwen2", "qwen3", "gemma3"). */
const char *eng_arch_name(eng_arch a);

/* Number of layers that own their KV (kv_src[i] == i), all / global only. */
int eng_config_n_kv_owners(const eng_config *c, int global_only);

/* KV figures, see the header comment for the formulas. */
size_t eng_config_kv_bytes_per_token(const eng_config *c);
uint64_t eng_config_kv_bytes_at(const eng_config *c, uint64_t n_ctx);
size_t eng_config_kv_bytes_mha_fp16(const eng_config *c);

/* Parameter count implied by the config (embeddings counted once when
 * tied; K/V projections only in KV-owning layers). */
uint64_t eng_config_n_params(const eng_config *c);

#endif /* ENG_CONFIG_H */
