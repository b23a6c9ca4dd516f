/*
 * eng_model_int.h -- the engine's private view of a loaded model, shared by
 * model.c (loading, quantisation) and forward.c (the forward pass).  Not a
 * public header: other modules use eng_model.h.
 *
 * Every linear layer is an eng_weight of rows = output channels and cols =
 * input dim, row-major.  int8 models keep q (int8, [rows][cols]) and one
 * scale per row -- or, when every source tensor of the weight is Q8_0, the
 * file's int8 values unchanged with one scale per 32 values (bscale; this
 * measured better than requantising per channel, see model.c); fp32 models
 * keep f ([rows][cols] floats).  After loading, every int8 linear weight
 * is repacked for the GEMM (pk; kern_gemm.h) and its row-major arrays are
 * freed -- only an untied embedding keeps them (row lookups; a tied int8
 * embedding is looked up in the output projection's pack).  Norm weights
 * and biases are float vectors as the file holds them (gemma3 files hold
 * 1 + w); biases are added in fp32 after the GEMM on both paths.  Rope
 * frequencies (scaling included, eng_config.h) are tabled once at load.
 */
#ifndef ENG_MODEL_INT_H
#define ENG_MODEL_INT_H

#include <pthread.h>

#include "eng_backend.h"
#include "eng_model.h"
#include "kern_gemm.h"
#include "kern_pool.h"

typedef struct eng_weight {
    int rows, cols; /* output channels, input dim */
    int8_t *q;      /* int8 models: quantised values [rows][cols] */
    float *scale; /* int8 models: per-row scale (value = q * scale), or NULL when bscale is used */
    /* int8 models from Q8_0 tensors: per-row per-32-value scales [rows][cols/32] (value = q * bscale[k/32]) */
    float *bscale;
    float *f; /* fp32 models: values [rows][cols] */
    /* int8 models: the values repacked for the GEMM (q/scale/bscale are freed after packing, except the embedding's) */
    kern_wpack pk;
    int packed; /* 1: pk holds the weight */
} eng_weight;

typedef struct eng_layer {
    float *attn_norm;       /* [n_embd] pre-attention RMSNorm */
    float *q_norm, *k_norm; /* [head_dim] gemma3 Q/K norms (k_norm NULL in sharing layers) */
    float *post_attn_norm;  /* [n_embd] gemma3 post-attention norm, or NULL */
    float *ffn_norm;        /* [n_embd] pre-FFN RMSNorm */
    float *post_ffn_norm;   /* [n_embd] gemma3 post-FFN norm, or NULL */
    eng_weight wqkv;        /* [n_head*hd (+ 2*n_head_kv*hd if KV owner)][n_embd] fused Q|K|V */
    float *bqkv;            /* [wqkv.rows] Q|K|V biases (qwen2, llama with biases), or NULL */
    eng_weight wo;          /* [n_embd][n_head*hd] */
    eng_weight wgu;         /* [2*n_ff][n_embd] fused gate|up */
    eng_weight wdown;       /* [n_embd][n_ff] */
} eng_layer;

struct eng_model {
    eng_config cfg;     /* configuration from the file */
    eng_kv_layout kv;   /* KV block layout (int8 or fp32) */
    eng_precision prec; /* numerics of this load */
    eng_gguf *g;        /* the open file (owned) */
    kern_pool *pool;    /* compute threads (owned) */
    eng_backend be;     /* backend table (CPU) */
    uint64_t digest;    /* eng_model_digest */
    /* token embedding [n_vocab][n_embd]; empty when tied in int8 (rows come from out.pk) */
    eng_weight embd;
    eng_weight out;   /* output projection; aliases embd's arrays when tied (fp32) */
    int out_tied;     /* 1: tied output (fp32: out shares embd's array; int8: embd is empty) */
    float *out_norm;  /* [n_embd] final norm */
    float *rope_freq; /* [head_dim / 2] rope frequencies of global layers (scaled) */
    float *rope_freq_local;     /* [head_dim / 2] of local (window > 0) layers */
    eng_layer *layers;          /* [n_layer] */
    pthread_mutex_t scratch_mu; /* guards scratch: held by the eng_forward call using it */
    char *scratch;        /* forward-step scratch kept between calls (64-byte aligned), or NULL */
    size_t scratch_bytes; /* its size */
};

#endif
