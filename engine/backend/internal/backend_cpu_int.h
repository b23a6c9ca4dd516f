/*
 * backend_cpu_int.h -- internal to the CPU backend: the ops that live in
 * their own files (backend_cpu_attn.c) and are installed into the table by
 * eng_backend_cpu_init (backend_cpu.c).  ctx is the backend's kern_pool.
 */
#ifndef BACKEND_CPU_INT_H
#define BACKEND_CPU_INT_H

#include "eng_backend.h"

void eng_cpu_softmax(void *ctx, float *x, int n);
void eng_cpu_attention(void *ctx, const eng_attn_shape *s, const eng_attn_desc *d, int n_desc);

#endif
