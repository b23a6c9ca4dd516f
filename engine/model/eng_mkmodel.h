/*
 * eng_mkmodel.h -- write synthetic GGUF models (deterministic random
 * weights) for tests, demos and benchmarks.
 *
 * Purpose.  The presets are the shapes parley needs without a real model:
 * tiny-llama, tiny-gemma3, the Character.AI-shaped cai-tiny and cai-1b
 * (MQA, 1 global layer in 6, local window, KV shared by adjacent layers)
 * and llama-1b (see mkmodel.c for each shape and the layer plan).  Every
 * file carries a synthetic byte-level BPE tokenizer, so text prompts work.
 * `parley mkmodel` is a thin command over eng_mkmodel; tests and the demo
 * call eng_mkmodel directly.
 *
 * Determinism.  Same options (preset, type, seed, window) -> byte-identical
 * file, on every machine.
 *
 * Failure behaviour.  eng_mkmodel returns 0, or a negative code with a
 * message in err (eng_err.h): ENG_EINVAL for options it refuses (unknown
 * preset, --window on a preset without local layers or out of range, bad
 * type), ENG_ENOMEM, ENG_EIO when the file cannot be created or written
 * (the partial file is removed).  Nothing prints.
 *
 * Threading.  Reentrant: no global state.
 */
#ifndef ENG_MKMODEL_H
#define ENG_MKMODEL_H

#include <stddef.h>
#include <stdint.h>

#define ENG_MKMODEL_MAX_WINDOW (1 << 30) /* largest local window accepted */

/* Weight storage of the 2-D tensors (norm weights are always F32). */
typedef enum eng_mkmodel_type {
    ENG_MKMODEL_Q8_0 = 0, /* ggml Q8_0 blocks (the default) */
    ENG_MKMODEL_F16 = 1   /* IEEE half, the same values */
} eng_mkmodel_type;

/* What to write.  eng_mkmodel_opts_default sets the defaults of
 * `parley mkmodel`; preset and out are required. */
typedef struct eng_mkmodel_opts {
    const char *preset;    /* preset name, e.g. "cai-tiny" */
    const char *out;       /* path of the GGUF to write (replaced) */
    eng_mkmodel_type type; /* weight storage (default Q8_0) */
    uint64_t seed;         /* weight seed (default 1) */
    int window;            /* local attention window; 0 = the preset's */
} eng_mkmodel_opts;

void eng_mkmodel_opts_default(eng_mkmodel_opts *o);

/* Write the model described by o.  Returns 0 or < 0 (see above). */
int eng_mkmodel(const eng_mkmodel_opts *o, char *err, size_t errlen);

/* Name of preset i (0-based), NULL past the last: for usage texts. */
const char *eng_mkmodel_preset_name(int i);

/* One-line description of preset i (architecture and shapes) into buf;
 * returns buf, or NULL past the last preset. */
const char *eng_mkmodel_preset_describe(int i, char *buf, size_t n);

#endif
