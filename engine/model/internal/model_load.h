/*
 * model_load.h -- internal to engine/model: the weight and vector loading
 * of model_load.c, called by eng_model_load (model.c).
 *
 * Every function converts tensors of m->g on the host (m->pool) and hands
 * the result to m->be: weights through weight_upload (eng_weight.bw),
 * vectors into backend memory (alloc + upload).  Failure: 0 or a negative
 * ENG_E* code with a message; what was loaded before stays in m and is
 * freed by eng_model_free.
 */
#ifndef MODEL_LOAD_H
#define MODEL_LOAD_H

#include <stddef.h>

#include "eng_model_int.h"

/* Layer i: norms, biases, fused Q|K|V, O, gate|up, down. */
int mdl_load_layer(eng_model *m, int i, char *err, size_t errlen);
/* The token embedding and the output projection (one handle when tied). */
int mdl_load_embd_out(eng_model *m, char *err, size_t errlen);
/* Vector tensor `name` of n floats into a host allocation (+1 with add_one). */
int mdl_load_vec_host(const eng_model *m, float **out, const char *name, int n, int add_one,
                      char *err, size_t errlen);
/* n host floats into a new backend allocation *out. */
int mdl_vec_upload(eng_model *m, float **out, const float *v, int n, char *err, size_t errlen);
/* Free a backend vector (NULL is fine). */
void mdl_vec_free(eng_model *m, float *v);
/* Free a weight's backend handle and clear it. */
void mdl_weight_free(eng_model *m, eng_weight *w);

#endif
