/*
 * sched_cons.h -- the fixture that the constraint tests
 * (test_sched_constraint.c) and the logprobs and choices tests
 * (test_sched_choices.c) share: a synthetic cai-tiny model written at test
 * time (its tokenizer is a real byte-level BPE vocabulary of NV tokens),
 * its tokenizer and constraint vocabulary, a scheduler over them, request
 * helpers, and schemas with a finite language and their hand-written
 * validators.
 */
#ifndef SCHED_CONS_H
#define SCHED_CONS_H

#include <stddef.h>
#include <stdint.h>

#include "eng_constraint.h"
#include "eng_sampler.h"
#include "eng_sched.h"
#include "eng_tok.h"
#include "sched_rec.h"
#include "sched_util.h"

#define NV 768      /* cai-tiny vocabulary */
#define K_SCHEMAS 4 /* entries of k_schemas */

extern eng_model *g_model;            /* the model, loaded by model() */
extern eng_tok *g_tok;                /* its tokenizer */
extern eng_constraint_vocab *g_vocab; /* its constraint vocabulary (NULL without llguidance) */

/* Schemas with a finite language: a greedy run must complete. */
extern const char *const k_schemas[K_SCHEMAS];

/* The model, written and loaded on first use (with g_tok and g_vocab). */
eng_model *model(void);
/* 1 when constraint tests can run; under CI=true a build without
 * llguidance fails the current test instead. */
int have_llg(void);
/* A scheduler with the constraint vocabulary; kv_budget 0: the default. */
eng_sched *mk(int spec, eng_sched_draft_fn fn, void *ctx, int64_t budget_us, size_t kv_budget);
/* Prompt i (12..47 tokens) into p; returns its length. */
int mk_prompt(int32_t *p, int i);
/* q: prompt p, default sampling, max_tokens. */
void req_init(eng_sched_request *q, const int32_t *p, int np, int max_tokens);
/* q's constraint: kind k over text (NULL: none). */
void set_cons(eng_sched_request *q, eng_constraint_kind k, const char *text);
/* Run one request to completion into r (allocated by the caller). */
void run1(eng_sched *s, eng_sched_request *q, sr_req *r);
sr_req *sr_new(int n_vocab);
void sr_del(sr_req *r);
/* Decoded text of choice c's result (a static buffer). */
char *text_of(const sr_req *r, int c);
/* 1 when text is JSON that validates against k_schemas[i], else 0 with why. */
int schema_ok(int i, const char *text, char *why, size_t n);
/* Free the model, tokenizer and vocabulary (each program's last test). */
void sc_cleanup(void);

#endif
