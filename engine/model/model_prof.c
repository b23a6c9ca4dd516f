/*
 * model_prof.c -- the profiling backend wrapper (eng_prof.h): it wraps a model's
 * backend table and attributes each weight to its layer, so it lives with the
 * model (it reads the model's internals), not among the backends.
 *
 * eng_prof_start copies the model's backend table into a heap state, then
 * points every slot of m->be at a wrapper here and m->be.ctx at that state;
 * a wrapper of a compute op reads the clock, calls the saved slot with the
 * saved context, reads the clock again and adds the difference to the op's
 * counter; the other slots (memory, weights, KV tier) just forward.
 * eng_prof_stop copies the saved table back, so the model runs exactly the
 * kernels it ran before.  A model is being profiled iff its linear slot is
 * this file's wrapper: no global state.
 *
 * The static assertion below pins the table's shape: a slot added to
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
#define PROF_N_FN 25 /* function slots of eng_backend, alloc .. destroy */
_Static_assert(sizeof(eng_backend) ==
                   offsetof(eng_backend, alloc) + PROF_N_FN * sizeof(prof_any_fn),
               "eng_backend slots changed: update model_prof.c");
_Static_assert(offsetof(eng_backend, destroy) ==
                   offsetof(eng_backend, alloc) + (PROF_N_FN - 1) * sizeof(prof_any_fn),
               "eng_backend slots changed: update model_prof.c");

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

/* Weight kind of a weight handle of the model. */
static int prof_weight_kind(const eng_model *m, const eng_bweight *w) {
    for (int i = 0; i < m->cfg.n_layer; i++) {
        const eng_layer *L = &m->layers[i];
        if (w == L->wqkv.bw) return ENG_PROF_W_QKV;
        if (w == L->wo.bw) return ENG_PROF_W_O;
        if (w == L->wgu.bw) return ENG_PROF_W_GATE_UP;
        if (w == L->wdown.bw) return ENG_PROF_W_DOWN;
    }
    if (w == m->out.bw) return ENG_PROF_W_OUTPUT;
    return ENG_PROF_W_OTHER;
}

/* ---- forwarded slots ---- */

#define S ((prof_state *)ctx)
#define O (S->orig)

static void *prof_alloc(void *ctx, size_t bytes) { return O.alloc(O.ctx, bytes); }
static void prof_free(void *ctx, void *p) { O.free(O.ctx, p); }
static int prof_weight_upload(void *ctx, const eng_wdesc *d, int native, eng_bweight **out,
                              char *err, size_t errlen) {
    return O.weight_upload(O.ctx, d, native, out, err, errlen);
}
static void prof_weight_free(void *ctx, eng_bweight *w) { O.weight_free(O.ctx, w); }
static size_t prof_weight_bytes(void *ctx, const eng_bweight *w) {
    return O.weight_bytes(O.ctx, w);
}
static size_t prof_weight_read_bytes(void *ctx, const eng_bweight *w) {
    return O.weight_read_bytes(O.ctx, w);
}
static size_t prof_linear_ws(void *ctx, int M, int K) { return O.linear_ws(O.ctx, M, K); }
static int prof_argmax(void *ctx, const float *logits, int R, int V, int ld, int32_t *out) {
    return O.argmax(O.ctx, logits, R, V, ld, out);
}
static void prof_kv_invalidate(void *ctx, const void *blk) { O.kv_invalidate(O.ctx, blk); }
static void prof_kv_tier(void *ctx, eng_backend_kv_tier *out) { O.kv_tier(O.ctx, out); }
static void prof_destroy(void *ctx) { O.destroy(O.ctx); }

/* ---- timed slots ---- */

/* Time one call of the original slot `call` under `slot`. */
#define PROF_TIMED(slot, call)    \
    do {                          \
        double t0_ = pl_mono_s(); \
        call;                     \
        prof_add(S, slot, t0_);   \
    } while (0)

static void prof_upload(void *ctx, void *dst, const void *src, size_t n) {
    PROF_TIMED(ENG_PROF_TRANSFER, O.upload(O.ctx, dst, src, n));
}
static int prof_download(void *ctx, void *dst, const void *src, size_t n) {
    int rc;
    PROF_TIMED(ENG_PROF_TRANSFER, rc = O.download(O.ctx, dst, src, n));
    return rc;
}
static void prof_copy(void *ctx, void *dst, const void *src, size_t n) {
    PROF_TIMED(ENG_PROF_TRANSFER, O.copy(O.ctx, dst, src, n));
}

/* Charge a GEMM call of M rows over w that started at t0 (linear, logits). */
static void prof_gemm(void *ctx, const eng_bweight *w, int M, double t0) {
    double dt = prof_add(S, ENG_PROF_LINEAR, t0);
    int kind = prof_weight_kind(S->m, w);
    S->r.weight_s[kind] += dt;
    S->r.weight_calls[kind]++;
    S->r.weight_bytes[kind] += (double)O.weight_read_bytes(O.ctx, w);
    S->r.weight_rows[kind] += M;
}
static void prof_linear(void *ctx, int M, const float *x, int ldx, const eng_bweight *w, float *C,
                        int ldc, void *ws) {
    double t0 = pl_mono_s();
    O.linear(O.ctx, M, x, ldx, w, C, ldc, ws);
    prof_gemm(ctx, w, M, t0);
}
static void prof_logits(void *ctx, int R, const float *x, int ldx, const eng_bweight *w,
                        float *const *rows, int32_t *amax, void *ws) {
    double t0 = pl_mono_s();
    O.logits(O.ctx, R, x, ldx, w, rows, amax, ws);
    prof_gemm(ctx, w, R, t0);
}
static void prof_embed(void *ctx, const eng_bweight *w, const int32_t *tok, int T, float mul,
                       float *x, int ldx) {
    PROF_TIMED(ENG_PROF_EMBED, O.embed(O.ctx, w, tok, T, mul, x, ldx));
}
static void prof_rmsnorm(void *ctx, int M, int n, const float *x, int ldx, const float *w,
                         float eps, float *y, int ldy) {
    PROF_TIMED(ENG_PROF_RMSNORM, O.rmsnorm(O.ctx, M, n, x, ldx, w, eps, y, ldy));
}
static void prof_rmsnorm_heads(void *ctx, int T, int n_head, int hd, float *x, int ld,
                               const float *w, float eps) {
    PROF_TIMED(ENG_PROF_RMSNORM, O.rmsnorm_heads(O.ctx, T, n_head, hd, x, ld, w, eps));
}
static void prof_rope(void *ctx, int n_tok, int n_head, int head_dim, float *x, int ldx,
                      const int32_t *pos, const float *inv_freq, int type) {
    PROF_TIMED(ENG_PROF_ROPE, O.rope(O.ctx, n_tok, n_head, head_dim, x, ldx, pos, inv_freq, type));
}
static void prof_glu(void *ctx, int M, int F, const float *gu, int ldgu, float *h, int ldh,
                     int act) {
    PROF_TIMED(ENG_PROF_GLU, O.glu(O.ctx, M, F, gu, ldgu, h, ldh, act));
}
static void prof_addv(void *ctx, int M, int n, float *y, int ldy, const float *x, int ldx) {
    PROF_TIMED(ENG_PROF_ADD, O.add(O.ctx, M, n, y, ldy, x, ldx));
}
static void prof_softcap(void *ctx, float *x, size_t n, float cap) {
    PROF_TIMED(ENG_PROF_SOFTCAP, O.softcap(O.ctx, x, n, cap));
}
static void prof_kv_store(void *ctx, const eng_kv_layout *l, int n_head, int layer,
                          const float *qkv, int ld, const eng_kv_span *spans, int n_spans) {
    PROF_TIMED(ENG_PROF_KV_STORE, O.kv_store(O.ctx, l, n_head, layer, qkv, ld, spans, n_spans));
}
static void prof_attention(void *ctx, const eng_attn_shape *sh, const eng_attn_desc *d,
                           int n_desc) {
    PROF_TIMED(ENG_PROF_ATTENTION, O.attention(O.ctx, sh, d, n_desc));
}

#undef S
#undef O

int eng_prof_active(const eng_model *m) { return m && m->be.linear == prof_linear; }

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
    b->alloc = prof_alloc;
    b->free = prof_free;
    b->upload = prof_upload;
    b->download = prof_download;
    b->copy = prof_copy;
    b->weight_upload = prof_weight_upload;
    b->weight_free = prof_weight_free;
    b->weight_bytes = prof_weight_bytes;
    b->weight_read_bytes = prof_weight_read_bytes;
    b->linear_ws = prof_linear_ws;
    b->linear = prof_linear;
    b->logits = s->orig.logits ? prof_logits : NULL;
    b->embed = prof_embed;
    b->rmsnorm = prof_rmsnorm;
    b->rmsnorm_heads = prof_rmsnorm_heads;
    b->rope = prof_rope;
    b->glu = prof_glu;
    b->add = prof_addv;
    b->softcap = prof_softcap;
    b->kv_store = prof_kv_store;
    b->attention = prof_attention;
    b->argmax = s->orig.argmax ? prof_argmax : NULL;
    b->kv_invalidate = s->orig.kv_invalidate ? prof_kv_invalidate : NULL;
    b->kv_tier = s->orig.kv_tier ? prof_kv_tier : NULL;
    b->destroy = s->orig.destroy ? prof_destroy : NULL;
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
    static const char *const names[ENG_PROF_N_SLOTS] = {
        "linear", "embed",   "rmsnorm",  "rope",      "glu",
        "add",    "softcap", "kv_store", "attention", "transfer"};
    return slot >= 0 && slot < ENG_PROF_N_SLOTS ? names[slot] : "?";
}

const char *eng_prof_weight_name(int w) {
    static const char *const names[ENG_PROF_N_WEIGHTS] = {"qkv",  "o",      "gate_up",
                                                          "down", "output", "other"};
    return w >= 0 && w < ENG_PROF_N_WEIGHTS ? names[w] : "?";
}
