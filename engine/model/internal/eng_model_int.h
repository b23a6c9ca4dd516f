/*
 * eng_model_int.h -- the engine's private view of a loaded model, shared by
 * model.c (loading, conversion), forward.c (the forward pass) and the
 * profiler.  Not a public header: other modules use eng_model.h.
 *
 * Every linear layer is an eng_weight: its shape and the backend's handle
 * (eng_backend.h).  model.c converts each source tensor on the host
 * (model_load.c: int8 rows with per-channel or 32-block
 * scales, fp32 values, or a Q4_K tensor's own codes when the load keeps
 * 4-bit weights) and hands the parts to the backend's weight_upload, which
 * keeps them in its own form (the CPU packs them for its GEMM) -- the host
 * arrays are freed right after.  Norm weights and biases are float vectors
 * as the file holds them (gemma3 files hold 1 + w), and the rope frequency
 * tables (scaling included, eng_config.h) are made once at load; all of
 * them live in backend memory.  A tied output projection is the embedding
 * table's handle used both ways (ENG_WUSE_LINEAR | ENG_WUSE_EMBED).
 */
#ifndef ENG_MODEL_INT_H
#define ENG_MODEL_INT_H

#include <pthread.h>

#include "eng_backend.h"
#include "eng_model.h"
#include "kern_pool.h"

typedef struct eng_weight {
    int rows, cols;  /* output channels, input dim */
    eng_bweight *bw; /* the backend's form (owned by the model; shared by embd/out when tied) */
} eng_weight;

typedef struct eng_layer {
    /* every vector below is backend memory (eng_backend.h) */
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
    int native;         /* 1: 4-bit source tensors kept 4-bit where the backend can */
    int q4k_parts;      /* Q4_K tensors handed to the backend as their own codes */
    eng_gguf *g;        /* the open file (owned) */
    kern_pool *pool;    /* host threads: conversion at load, the CPU backend's compute (owned) */
    eng_backend be;     /* backend table (owned: eng_backend_free) */
    uint64_t digest;    /* eng_model_digest */
    eng_weight embd;    /* token embedding [n_vocab][n_embd] (use EMBED; tied: EMBED | LINEAR) */
    eng_weight out;     /* output projection; the same handle as embd when tied */
    int out_tied;       /* 1: tied output (out.bw == embd.bw) */
    float *out_norm;    /* [n_embd] final norm (backend memory) */
    float *rope_freq;   /* [head_dim / 2] rope frequencies of global layers (scaled; backend) */
    float *rope_freq_local;     /* [head_dim / 2] of local (window > 0) layers (same allocation) */
    eng_layer *layers;          /* [n_layer] */
    pthread_mutex_t scratch_mu; /* guards scratch: held by the eng_forward call using it */
    char *scratch;        /* forward-step scratch in backend memory kept between calls, or NULL */
    size_t scratch_bytes; /* its size */
};

#endif
