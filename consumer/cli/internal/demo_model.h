/*
 * demo_model.h -- the model files of `parley demo` (cmd_demo.c): the
 * installed default model, the synthetic one, and what a GGUF file says
 * about itself.
 *
 * Purpose.  The demo picks its model before anything else starts:
 * --model FILE, else SmolLM2-135M-Instruct where `deploy/setup.sh
 * model-smollm` installed it, else a synthetic model written once to the
 * cache directory.  Its banner then names the model and the chat template
 * the worker will use (the worker's own choice, eng_tmpl_choose).
 *
 * Threading.  The demo's main thread.  Failure behaviour: -1 (or an empty
 * string) with the reason printed to stderr where the user must see it;
 * nothing leaks.
 */
#ifndef DEMO_MODEL_H
#define DEMO_MODEL_H

#include <stddef.h>

/* mkdir -p for the parent directories of path; 0 or -1 (errno set). */
int demo_mkdirs(const char *path);

/* The installed SmolLM2-135M-Instruct ($PARLEY_SMOLLM_MODEL, else under
 * $PARLEY_DEPS or ~/.cache/parley) into path: 0, or -1 when not there. */
int demo_real_model(char *path, size_t n);

/* 1 if the GGUF at path carries tokenizer.chat_template, 0 if not, -1 if
 * it cannot be read. */
int demo_has_template(const char *path);

/* Which chat template the worker will use for the model at path (tmpl:
 * --chat-template NAME or NULL), in words, into out; "" when none. */
void demo_template(const char *path, const char *tmpl, char *out, size_t n);

/* The model's general.name, else its file name, into out. */
void demo_model_name(const char *path, char *out, size_t n);

/* The synthetic cai-tiny model's path into path, written once (to a
 * temporary name renamed when complete): 0 or -1. */
int demo_synthetic_model(char *path, size_t n);

#endif
