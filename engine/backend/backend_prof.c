/*
 * backend_prof.c -- the profiling backend wrapper (eng_prof.h).
 *
 * eng_prof_start copies the model's backend table into a heap state, then
 * points every slot of m->be at a wrapper here and m->be.ctx at that state;
 * a wrapper reads the clock, calls the saved slot with the saved context,
 * reads the clock again and adds the difference to the slot's counter.
 * eng_prof_stop copies the saved table back, so the model runs exactly the
 * kernels it ran before.  A model is being profiled iff its gemm_q8 slot is
 * this file's wrapper: no global state.
 *
 * The static assertions below pin the table's shape: a slot added to
 * eng_backend without a wrapper here would otherwise be called with this
 * file's context and crash, so the build fails instead.
 */
#define _POSIX_C_SOURCE 200809L
#include "eng_prof.h"
#include "pl_err.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "eng_model_int.h"
#include "pl_time.h"

typedef void (*prof_any_fn)(void);
_Static_assert(offsetof(eng_backend, attention) - offsetof(eng_backend, gemm_q8) ==
                   9 * sizeof(prof_any_fn),
               "eng_backend slots changed: update backend_prof.c");
_Static_assert(sizeof(eng_backend) == offsetof(eng_backend, attention) + sizeof(prof_any_fn),
               "eng_backend slots changed: update backend_prof.c");
_Static_assert(offsetof(eng_backend, gemm_q8) <= offsetof(eng_backend, n_threads) + sizeof(void *),
               "eng_backend slots changed: update backend_prof.c");

/* Profiler state of one model (m->be.ctx while profiling). */
typedef struct prof_state {
    eng_backend orig;  /* the table before start (restored by stop) */
    eng_model *m;      /* the profiled model (weight attribution) */
    eng_prof_report r; /* counters */
    double t0;         /* start time */
} prof_state;

/* Charge the time since t0 to a slot; returns it. */
static double prof_add(prof_state *s, int slot, double t0) {
    double dt = pl_mono_s() - t0;
    s->r.slot_s[slot] += dt;
    s->r.slot_calls[slot]++;
    return dt;
}

/* Weight kind of an int8 pack or fp32 matrix of the model. */
static int prof_weight_kind(const eng_model *m, const kern_wpack *pk, const float *f) {
    for (int i = 0; i < m->cfg.n_layer; i++) {
        const eng_layer *L = &m->layers[i];
        if (pk ? pk == &L->wqkv.pk : f == L->wqkv.f) return ENG_PROF_W_QKV;
        if (pk ? pk == &L->wo.pk : f == L->wo.f) return ENG_PROF_W_O;
        if (pk ? pk == &L->wgu.pk : f == L->wgu.f) return ENG_PROF_W_GATE_UP;
        if (pk ? pk == &L->wdown.pk : f == L->wdown.f) return ENG_PROF_W_DOWN;
    }
    if (pk ? pk == &m->out.pk : f == m->out.f) return ENG_PROF_W_OUTPUT;
    return ENG_PROF_W_OTHER;
}

static void prof_weight_add(prof_state *s, int kind, double dt, double bytes, int M) {
    s->r.weight_s[kind] += dt;
    s->r.weight_calls[kind]++;
    s->r.weight_bytes[kind] += bytes;
    s->r.weight_rows[kind] += M;
}

static void prof_gemm_q8(void *ctx, int M, const int8_t *A, int lda, const float *a_scale, int lds,
                         const struct kern_wpack *w, float *C, int ldc) {
    prof_state *s = ctx;
    double t0 = pl_mono_s();
    s->orig.gemm_q8(s->orig.ctx, M, A, lda, a_scale, lds, w, C, ldc);
    double dt = prof_add(s, ENG_PROF_GEMM_Q8, t0);
    prof_weight_add(s, prof_weight_kind(s->m, w, NULL), dt, (double)kern_wpack_bytes(w), M);
}

static void prof_gemm_f32(void *ctx, int M, int N, int K, const float *A, const float *W, float *C,
                          int ldc) {
    prof_state *s = ctx;
    double t0 = pl_mono_s();
    s->orig.gemm_f32(s->orig.ctx, M, N, K, A, W, C, ldc);
    double dt = prof_add(s, ENG_PROF_GEMM_F32, t0);
    prof_weight_add(s, prof_weight_kind(s->m, NULL, W), dt, (double)N * K * sizeof(float), M);
}

static void prof_quantize(void *ctx, int M, int K, const float *x, int ldx, int8_t *q, int ldq,
                          float *scale) {
    prof_state *s = ctx;
    double t0 = pl_mono_s();
    s->orig.quantize_rows(s->orig.ctx, M, K, x, ldx, q, ldq, scale);
    prof_add(s, ENG_PROF_QUANTIZE, t0);
}

/* Block quantisation (the GEMM inputs) counts under the same "quantize" slot. */
static void prof_quantize_blocks(void *ctx, int M, int K, const float *x, int ldx, int8_t *q,
                                 int ldq, float *scale, int lds) {
    prof_state *s = ctx;
    double t0 = pl_mono_s();
    s->orig.quantize_blocks(s->orig.ctx, M, K, x, ldx, q, ldq, scale, lds);
    prof_add(s, ENG_PROF_QUANTIZE, t0);
}

static void prof_rmsnorm(void *ctx, int M, int n, const float *x, int ldx, const float *w,
                         float eps, float *y, int ldy) {
    prof_state *s = ctx;
    double t0 = pl_mono_s();
    s->orig.rmsnorm(s->orig.ctx, M, n, x, ldx, w, eps, y, ldy);
    prof_add(s, ENG_PROF_RMSNORM, t0);
}

static void prof_rope(void *ctx, int n_tok, int n_head, int head_dim, float *x, int ldx,
                      const int32_t *pos, const float *inv_freq, int type) {
    prof_state *s = ctx;
    double t0 = pl_mono_s();
    s->orig.rope(s->orig.ctx, n_tok, n_head, head_dim, x, ldx, pos, inv_freq, type);
    prof_add(s, ENG_PROF_ROPE, t0);
}

static void prof_glu(void *ctx, int M, int F, const float *gu, int ldgu, float *h, int ldh,
                     int act) {
    prof_state *s = ctx;
    double t0 = pl_mono_s();
    s->orig.glu(s->orig.ctx, M, F, gu, ldgu, h, ldh, act);
    prof_add(s, ENG_PROF_GLU, t0);
}

static void prof_addv(void *ctx, int M, int n, float *y, int ldy, const float *x, int ldx) {
    prof_state *s = ctx;
    double t0 = pl_mono_s();
    s->orig.add(s->orig.ctx, M, n, y, ldy, x, ldx);
    prof_add(s, ENG_PROF_ADD, t0);
}

static void prof_softmax(void *ctx, float *x, int n) {
    prof_state *s = ctx;
    double t0 = pl_mono_s();
    s->orig.softmax(s->orig.ctx, x, n);
    prof_add(s, ENG_PROF_SOFTMAX, t0);
}

static void prof_attention(void *ctx, const eng_attn_shape *sh, const eng_attn_desc *d,
                           int n_desc) {
    prof_state *s = ctx;
    double t0 = pl_mono_s();
    s->orig.attention(s->orig.ctx, sh, d, n_desc);
    prof_add(s, ENG_PROF_ATTENTION, t0);
}

int eng_prof_active(const eng_model *m) { return m && m->be.gemm_q8 == prof_gemm_q8; }

int eng_prof_start(eng_model *m, char *err, size_t errlen) {
    if (!m || eng_prof_active(m)) {
        return pl_errf(err, errlen, ENG_EINVAL, "profiler: %s",
                       m ? "model is already being profiled" : "no model");
    }
    prof_state *s = calloc(1, sizeof *s);
    if (!s) {
        return pl_errf(err, errlen, ENG_ENOMEM, "profiler: out of memory");
    }
    s->orig = m->be;
    s->m = m;
    eng_backend *b = &m->be;
    b->ctx = s;
    b->gemm_q8 = prof_gemm_q8;
    b->gemm_f32 = prof_gemm_f32;
    b->quantize_rows = prof_quantize;
    b->quantize_blocks = prof_quantize_blocks;
    b->rmsnorm = prof_rmsnorm;
    b->rope = prof_rope;
    b->glu = prof_glu;
    b->add = prof_addv;
    b->softmax = prof_softmax;
    b->attention = prof_attention;
    s->t0 = pl_mono_s();
    return 0;
}

int eng_prof_stop(eng_model *m, eng_prof_report *r) {
    if (!eng_prof_active(m)) {
        if (r) memset(r, 0, sizeof *r);
        return ENG_EINVAL;
    }
    prof_state *s = m->be.ctx;
    s->r.elapsed_s = pl_mono_s() - s->t0;
    m->be = s->orig;
    if (r) *r = s->r;
    free(s);
    return 0;
}

const char *eng_prof_slot_name(int slot) {
    static const char *const names[ENG_PROF_N_SLOTS] = {"gemm_q8", "gemm_f32", "quantize_rows",
                                                        "rmsnorm", "rope",     "glu",
                                                        "add",     "softmax",  "attention"};
    return slot >= 0 && slot < ENG_PROF_N_SLOTS ? names[slot] : "?";
}

const char *eng_prof_weight_name(int w) {
    static const char *const names[ENG_PROF_N_WEIGHTS] = {"qkv",  "o",      "gate_up",
                                                          "down", "output", "other"};
    return w >= 0 && w < ENG_PROF_N_WEIGHTS ? names[w] : "?";
}
