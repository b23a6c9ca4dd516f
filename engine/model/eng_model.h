/*
 * eng_model.h -- a loaded model and the batch-first forward pass.
 *
 * Purpose.  eng_model_load reads a GGUF (llama or gemma3, plus parley's
 * per-layer window / KV-source keys), converts every weight once and keeps
 * the GGUF mapping open for the tokenizer.  eng_forward advances a batch of
 * sequences, each with its own paged KV (eng_kv.h) and its own new tokens (a
 * prefill chunk of any length or one decode token), and writes logits for
 * the positions asked for.
 *
 * Numerics.
 *   ENG_PREC_INT8: weights int8 symmetric, one scale per output channel
 *     from F32/F16/BF16 tensors; block-format tensors keep 32-value block
 *     scales (Q8_0, Q4_0, Q5_0, IQ4_NL codes kept exactly, the others
 *     requantised per 32 values: more accurate than per channel -- see
 *     model_load.c); with model.weights = native (the default) a backend
 *     that can (the CPU: ENG_BE_CAP_W4) keeps Q4_0 / IQ4_NL codes as 4-bit
 *     indices (the same numbers, half the bytes) and Q4_K tensors exactly as
 *     the file stores them (codes, scales and mins: W4A8, no requantisation);
 *     activations quantised on the fly, symmetric, one scale per 32 values
 *     of a GEMM input row (kern_gemm.h); int32 accumulation with the scales
 *     applied in the GEMM epilogue; norms, softmax, RoPE and residuals in
 *     fp32.  KV stored int8, K with one scale per 32 values of a head, V
 *     one per token per head (eng_kv.h); attention dequantises K/V on the
 *     fly and accumulates in fp32.
 *   ENG_PREC_FP32: the same forward code with float weights (dequantised at
 *     load), float GEMMs and fp32 KV blocks (eng_kv_layout.kv_fp32 = 1).
 *   Within one precision and backend the result for a token does not depend
 *   on how the tokens are batched or chunked (per-row quantisation, fixed
 *   summation order), so chunked prefill reproduces one-shot prefill.
 *
 * Backends.  Every op of the forward pass goes through the model's backend
 * table (eng_backend.h): model.backend picks the CPU (always built, the
 * reference) or CUDA (when built; auto takes it when a GPU answers).  The
 * CUDA backend is checked against the CPU by tolerance, not bit for bit.
 *
 * Data layout.  Q/K/V projections are fused into one [n_q+2*n_kv][n_embd]
 * matrix per layer (Q only for layers that share KV), gate/up into one
 * [2*n_ff][n_embd] matrix, each handed to the backend once at load as one
 * part per source tensor (the CPU packs the parts for its GEMM; kern_gemm.h,
 * kern_w4.h); a tied output projection is the embedding's own weight, its
 * rows read back from the pack for lookups.
 *
 * Threading.  A model's weights are immutable after load; it owns a thread pool of
 * n_threads workers (kern_pool) that converts weights at load and that the
 * CPU backend computes on.  eng_forward may be called from several threads on
 * distinct sequences; calls then take turns on the pool.
 *
 * Ownership.  The model owns its weights, pool and the GGUF mapping
 * (eng_model_gguf stays valid until eng_model_free).  Sequences and their
 * KV blocks belong to the caller.
 *
 * Failure behaviour.  Functions return 0 or a negative ENG_E* code and
 * write a message into (err, errlen); no partial state is left behind.
 */
#ifndef ENG_MODEL_H
#define ENG_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "eng_backend.h"
#include "eng_config.h"
#include "eng_err.h" /* ENG_EINVAL, ENG_ENOMEM, ENG_EIO */
#include "eng_gguf.h"
#include "eng_kv.h"

typedef struct eng_model eng_model; /* opaque; immutable after load */

typedef enum { ENG_PREC_INT8 = 0, ENG_PREC_FP32 = 1 } eng_precision;

/* How int8 loads hold 4-bit source tensors (model.weights). */
typedef enum {
    ENG_WEIGHTS_NATIVE = 0, /* keep Q4_0 / IQ4_NL / Q4_K 4-bit where the backend can (W4A8) */
    ENG_WEIGHTS_INT8 = 1    /* every weight int8 (Q4_K requantised per 32 values) */
} eng_weights;

/* "native", "int8"; parse one of them (0, or -1 for anything else). */
const char *eng_weights_name(eng_weights w);
int eng_weights_parse(const char *s, eng_weights *out);

typedef struct eng_load_opts {
    eng_precision prec;       /* int8 (serving) or fp32 (reference) */
    int n_threads;            /* worker threads of the model's pool; <= 0: one per online CPU */
    int block_tokens;         /* KV block size B; <= 0: 16 */
    eng_backend_kind backend; /* where it computes (model.backend); 0 = auto */
    eng_weights weights;      /* 4-bit weights kept 4-bit or made int8; 0 = native */
} eng_load_opts;

/* Load path.  Refuses unsupported architectures / tensor types / shapes
 * with a message naming the problem.  Returns 0, ENG_EIO, ENG_EINVAL or
 * ENG_ENOMEM. */
int eng_model_load(const char *path, const eng_load_opts *o, eng_model **out, char *err,
                   size_t errlen);
void eng_model_free(eng_model *m);

const eng_config *eng_model_config(const eng_model *m);
const eng_kv_layout *eng_model_kv_layout(const eng_model *m);
const eng_gguf *eng_model_gguf(const eng_model *m); /* e.g. for the tokenizer */
eng_precision eng_model_precision(const eng_model *m);
int eng_model_n_threads(const eng_model *m);
/* Bytes of weights one decode step reads: every linear layer's packed (int8)
 * or float (fp32) values and scales, including the output projection, not
 * the embedding table (one row per token) or the norms.  The numerator of
 * the memory-bandwidth roofline. */
size_t eng_model_weight_bytes(const eng_model *m);
/* Multiply-accumulates per token of those linear layers (rows x cols
 * summed, attention not counted): *layers for the transformer layers,
 * *output for the output projection (a prefill chunk runs it for its last
 * token only, a decode step for every sequence).  The numerator of the
 * compute roofline. */
void eng_model_weight_macs(const eng_model *m, double *layers, double *output);
/* Bytes the loaded weights occupy in RAM: every linear layer's pack (or
 * fp32 array), the embedding table in its lookup form, norms, biases and
 * rope tables.  Not the KV cache or scratch buffers. */
size_t eng_model_resident_bytes(const eng_model *m);
/* 64-bit digest computed at load: a multiply-rotate hash over 8-byte words
 * of the numerics-relevant config fields (shapes, eps, rope bases, scales,
 * per-layer window and KV source) and, for every tensor in file order, its
 * name, type, shape and data bytes; finally mixed with the precision.  Two
 * loads give the same digest iff they run the same weights and config at
 * the same precision (up to hash collisions).  Metadata that does not
 * change the numbers (e.g. general.name, the vocab) is not included: the
 * cache fingerprint hashes the tokenizer separately. */
uint64_t eng_model_digest(const eng_model *m);
/* The backend the model computes on ("cpu", "cuda"). */
const char *eng_model_backend_name(const eng_model *m);

/* The host bytes of KV block blk changed outside eng_forward (a cache
 * refilled or re-allocated it): a backend keeping its own copy of the block
 * (a device KV tier) drops it.  No-op on the CPU backend.  Thread-safe. */
void eng_model_kv_invalidate(eng_model *m, const void *blk);
/* The backend's own KV tier counters (eng_backend_kv_tier); returns 0, or
 * -1 (out zeroed) when the backend has no such tier (the CPU). */
int eng_model_kv_tier(const eng_model *m, eng_backend_kv_tier *out);

/* Which logits a step wants.  ENG_LOGITS_ARGMAX: only the argmax of the
 * last token's logits (the lowest index of the largest; NaN counts as
 * -inf), written to *next -- greedy decode with nothing else reading the
 * logits (no penalties, logprobs or constraints): the output projection
 * then reduces each row to its argmax as it computes it and never writes
 * the n_vocab floats (eng_backend.h's logits op). */
enum { ENG_LOGITS_NONE = 0, ENG_LOGITS_LAST = 1, ENG_LOGITS_ALL = 2, ENG_LOGITS_ARGMAX = 3 };

typedef struct eng_seq_step {
    eng_kvseq *kv;         /* the sequence's KV state; advanced by n_tokens */
    const int32_t *tokens; /* new tokens (prefill chunk or 1 decode token) */
    int n_tokens;          /* >= 1 */
    int logits;            /* ENG_LOGITS_NONE, _LAST, _ALL or _ARGMAX */
    float *out;            /* caller buffer: n_vocab floats (LAST) or n_tokens*n_vocab (ALL) */
    int32_t *next;         /* ENG_LOGITS_ARGMAX: receives the argmax (unused otherwise) */
} eng_seq_step;

/* Advance every sequence of steps[0..n_steps) by its tokens.  The KV of
 * every step must use this model's layout, and each sequence may appear
 * once.  Token ids outside [0, n_vocab) are refused.  Returns 0,
 * ENG_EINVAL (bad step) or ENG_ENOMEM (allocator out of blocks, or host
 * memory); on error every sequence is left unchanged. */
int eng_forward(eng_model *m, eng_seq_step *steps, int n_steps, char *err, size_t errlen);

#endif
