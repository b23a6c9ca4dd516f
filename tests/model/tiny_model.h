/*
 * tiny_model.h -- write tiny synthetic llama / gemma3 GGUFs (F32, Q8_0,
 * Q4_0 or Q4_K weights, deterministic random values) for the engine's unit tests, optionally
 * with parley's per-layer window and KV-source keys.
 */
#ifndef TINY_MODEL_H
#define TINY_MODEL_H

#include <stddef.h>
#include <stdint.h>

typedef struct tiny_spec {
    const char *arch;                                                /* "llama" or "gemma3" */
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab; /* model shape */
    int sliding_window; /* gemma3 attention.sliding_window */
    int ext;            /* 1: write layer_window / layer_kv_source */
    int window[16];     /* ext: per-layer window */
    int kv_src[16];     /* ext: per-layer KV source */
    uint64_t seed;      /* weight RNG seed */
    int q8_0;           /* 1: store 2-D weights as Q8_0 (rows a multiple of 32 wide) */
    /* TINY_Q4_0: 2-D weights as Q4_0; TINY_Q4_K: as Q4_K where rows are a
     * multiple of 256 wide, except attn_v, and the rest Q8_0 (a Q4_K_M-like
     * mix: a fused Q|K|V of Q4_K q and k beside a Q8_0 v) */
    int q4;
} tiny_spec;

enum { TINY_Q4_0 = 1, TINY_Q4_K = 2 };

/* Returns 0 or -1 with a message in err. */
int tiny_model_write(const char *path, const tiny_spec *s, char *err, size_t errlen);

#endif
