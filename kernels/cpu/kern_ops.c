/*
 * kern_ops.c -- the element-wise ops of kern_ops.h: the scalar references,
 * the portable per-row kernels, and the drivers that pick a row table by
 * ISA (kern_ops_int.h) and spread whole rows over the thread pool.
 *
 * The references are the engine's original loops (the definition); the
 * portable rows repeat their arithmetic, so KERN_ISA_SCALAR gives the
 * references' bits.  RoPE's drivers table inv_freq once per call and
 * cos/sin once per token (the reference recomputes them per head pair with
 * pow), using the same float values.
 */
#include "kern_ops.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "kern_ops_int.h"

/* ---- portable rows (the references' arithmetic) ---- */

static void kern_quant_row_scalar(const float *x, int K, int8_t *q, int pad, float *scale) {
    memset(q + K, 0, (size_t)pad);
    float amax = 0;
    for (int k = 0; k < K; k++) {
        float a = fabsf(x[k]);
        if (a > amax) amax = a;
    }
    /* amax 0, or so small that inv overflows: a zero row */
    float inv = 127.0f / amax;
    if (!(inv <= FLT_MAX)) {
        *scale = 0;
        memset(q, 0, (size_t)K);
        return;
    }
    *scale = amax / 127.0f;
    for (int k = 0; k < K; k++) {
        float v = nearbyintf(x[k] * inv);
        if (v > 127) v = 127;
        else if (!(v >= -127)) v = -127; /* NaN too, as the vector path */
        q[k] = (int8_t)v;
    }
}

/* Blocks of KERN_QBLOCK values (the last one may be shorter), each
 * quantised as a row of its own; then the pad bytes zeroed; sum (when not
 * NULL) gets each block's sum of its int8 values. */
static void kern_quant_blocks_scalar(const float *x, int K, int8_t *q, int pad, float *scale,
                                     int32_t *sum) {
    for (int k = 0, b = 0; k < K; k += KERN_QBLOCK, b++) {
        int n = K - k < KERN_QBLOCK ? K - k : KERN_QBLOCK;
        kern_quant_row_scalar(x + k, n, q + k, 0, scale + b);
        if (!sum) continue;
        int32_t s = 0;
        for (int i = 0; i < n; i++) s += q[k + i];
        sum[b] = s;
    }
    memset(q + K, 0, (size_t)pad);
}

static void kern_rmsnorm_row_scalar(const float *x, int n, const float *w, float eps, float *y) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = 1.0f / sqrtf((float)(ss / n) + eps);
    for (int i = 0; i < n; i++) y[i] = x[i] * inv * w[i];
}

static void kern_rotate_row_scalar(float *row, int n_head, int head_dim, const float *c,
                                   const float *s, kern_rope_type type) {
    int half = head_dim / 2;
    for (int h = 0; h < n_head; h++) {
        float *v = row + (size_t)h * head_dim;
        for (int i = 0; i < half; i++) {
            int a = type == KERN_ROPE_NEOX ? i : 2 * i;
            int b = type == KERN_ROPE_NEOX ? i + half : 2 * i + 1;
            float x0 = v[a], x1 = v[b];
            v[a] = x0 * c[i] - x1 * s[i];
            v[b] = x0 * s[i] + x1 * c[i];
        }
    }
}

static float kern_gelu_tanh(float x) {
    return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

static void kern_glu_row_scalar(const float *g, const float *u, int F, float *h, kern_glu_act act) {
    if (act == KERN_GLU_GELU_TANH)
        for (int i = 0; i < F; i++) h[i] = kern_gelu_tanh(g[i]) * u[i];
    else
        for (int i = 0; i < F; i++) h[i] = g[i] / (1.0f + expf(-g[i])) * u[i];
}

static void kern_add_row_scalar(float *y, const float *x, int n) {
    for (int i = 0; i < n; i++) y[i] += x[i];
}

static void kern_softmax_scalar(float *x, int n) {
    if (n <= 0) return;
    float mx = x[0];
    for (int i = 1; i < n; i++)
        if (x[i] > mx) mx = x[i];
    float sum = 0;
    for (int i = 0; i < n; i++) {
        x[i] = expf(x[i] - mx);
        sum += x[i];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < n; i++) x[i] *= inv;
}

static int kern_argmax_scalar(const float *x, int n);
static int kern_scan_at_least_scalar(const float *x, int from, int n, float mul, float thr);

const kern_ops_rowfns kern_ops_rows_scalar = {
    .quant = kern_quant_row_scalar,
    .quant_blocks = kern_quant_blocks_scalar,
    .rmsnorm = kern_rmsnorm_row_scalar,
    .rotate = kern_rotate_row_scalar,
    .glu = kern_glu_row_scalar,
    .add = kern_add_row_scalar,
    .softmax = kern_softmax_scalar,
    .argmax = kern_argmax_scalar,
    .scan_at_least = kern_scan_at_least_scalar,
};

/* ---- references ---- */

void kern_quantize_rows_ref(int M, int K, const float *x, int ldx, int8_t *q, int ldq,
                            float *scale) {
    for (int m = 0; m < M; m++)
        kern_quant_row_scalar(x + (size_t)m * ldx, K, q + (size_t)m * ldq, ldq - K, scale + m);
}

void kern_quantize_blocks_ref(int M, int K, const float *x, int ldx, int8_t *q, int ldq,
                              float *scale, int lds) {
    for (int m = 0; m < M; m++)
        kern_quant_blocks_scalar(x + (size_t)m * ldx, K, q + (size_t)m * ldq, ldq - K,
                                 scale + (size_t)m * lds, NULL);
}

void kern_rmsnorm_ref(int M, int n, const float *x, int ldx, const float *w, float eps, float *y,
                      int ldy) {
    for (int m = 0; m < M; m++)
        kern_rmsnorm_row_scalar(x + (size_t)m * ldx, n, w, eps, y + (size_t)m * ldy);
}

void kern_rope_ref(int n_tok, int n_head, int head_dim, float *x, int ldx, const int32_t *pos,
                   float base, kern_rope_type type) {
    int half = head_dim / 2;
    for (int t = 0; t < n_tok; t++) {
        float *row = x + (size_t)t * ldx;
        for (int i = 0; i < half; i++) {
            /* as transformers: inv_freq in float, angle = pos * inv_freq in float */
            float inv_freq = (float)(1.0 / pow((double)base, (double)(2 * i) / head_dim));
            float ang = (float)pos[t] * inv_freq;
            float c = cosf(ang), s = sinf(ang);
            for (int h = 0; h < n_head; h++) {
                float *v = row + (size_t)h * head_dim;
                int a = type == KERN_ROPE_NEOX ? i : 2 * i;
                int b = type == KERN_ROPE_NEOX ? i + half : 2 * i + 1;
                float x0 = v[a], x1 = v[b];
                v[a] = x0 * c - x1 * s;
                v[b] = x0 * s + x1 * c;
            }
        }
    }
}

void kern_glu_ref(int M, int F, const float *gu, int ldgu, float *h, int ldh, kern_glu_act act) {
    for (int m = 0; m < M; m++) {
        const float *g = gu + (size_t)m * ldgu;
        kern_glu_row_scalar(g, g + F, F, h + (size_t)m * ldh, act);
    }
}

void kern_add_ref(int M, int n, float *y, int ldy, const float *x, int ldx) {
    for (int m = 0; m < M; m++) kern_add_row_scalar(y + (size_t)m * ldy, x + (size_t)m * ldx, n);
}

void kern_softmax_ref(float *x, int n) { kern_softmax_scalar(x, n); }

static int kern_argmax_scalar(const float *x, int n) {
    int best = 0;
    float bv = x[0] == x[0] ? x[0] : -INFINITY;
    for (int i = 1; i < n; i++)
        if (x[i] > bv) bv = x[i], best = i; /* NaN never compares greater */
    return best;
}

int kern_argmax_ref(const float *x, int n) { return kern_argmax_scalar(x, n); }

static int kern_scan_at_least_scalar(const float *x, int from, int n, float mul, float thr) {
    for (int i = from; i < n; i++)
        if (x[i] * mul >= thr) return i;
    return n;
}

int kern_scan_at_least_ref(const float *x, int from, int n, float mul, float thr) {
    return kern_scan_at_least_scalar(x, from, n, mul, thr);
}

/* ---- drivers ---- */

typedef struct kern_ops_job kern_ops_job;
/* Run one op over rows [r0, r1). */
typedef void (*kern_ops_rows_fn)(const kern_ops_job *j, int r0, int r1);

/* One op call; the fields an op does not use stay zero. */
struct kern_ops_job {
    const kern_ops_rowfns *f; /* row kernels of the chosen ISA */
    kern_ops_rows_fn rows;    /* the op's row loop */
    int M;                    /* rows (tokens) */
    int per;                  /* rows per pool task */
    int n;                    /* row length: K, n, F or head_dim */
    const float *x;           /* input rows (glu: gate | up) */
    int ldx;                  /* their stride */
    float *y;                 /* output rows (rope: the rows rotated in place) */
    int ldy;                  /* their stride */
    const float *w;           /* rmsnorm weight [n] */
    float eps;                /* rmsnorm epsilon */
    int8_t *q;                /* quantised rows */
    int ldq;                  /* their stride in bytes */
    float *scale;             /* quantisation scales: one per row, or lds per row */
    int32_t *sum;             /* block quantisation: block sums of q (NULL: none), lds per row */
    int lds;                  /* block quantisation: stride of scale / sum between rows */
    int n_head;               /* rope: heads per row */
    const int32_t *pos;       /* rope: position of every row */
    const float *inv_freq;    /* rope: [head_dim / 2] frequencies */
    kern_rope_type rope;      /* rope layout */
    kern_glu_act act;         /* glu activation */
};

static const kern_ops_rowfns *kern_ops_pick(kern_isa isa) {
    kern_isa best = kern_isa_best();
    if (isa > best) isa = best;
#if KERN_OPS_X86
    if (isa >= KERN_ISA_AVX2) return &kern_ops_rows_avx2;
#endif
    return &kern_ops_rows_scalar;
}

static void kern_ops_task(void *arg, int task, int thread) {
    (void)thread;
    const kern_ops_job *j = arg;
    int r0 = task * j->per, r1 = r0 + j->per < j->M ? r0 + j->per : j->M;
    j->rows(j, r0, r1);
}

/* Run j over its M rows: on the caller when the work (row_work floats per
 * row) is small, else about 4 whole-row tasks per thread on the pool. */
static void kern_ops_launch(kern_pool *p, kern_ops_job *j, long row_work) {
    int threads = kern_pool_size(p);
    if (j->M <= 0) return;
    if (threads < 2 || j->M < 2 || (long)j->M * row_work < KERN_OPS_POOL_MIN) {
        j->rows(j, 0, j->M);
        return;
    }
    int n_tasks = j->M < 4 * threads ? j->M : 4 * threads;
    j->per = (j->M + n_tasks - 1) / n_tasks;
    kern_pool_run(p, kern_ops_task, j, (j->M + j->per - 1) / j->per);
}

static void kern_quant_rows(const kern_ops_job *j, int r0, int r1) {
    for (int m = r0; m < r1; m++)
        j->f->quant(j->x + (size_t)m * j->ldx, j->n, j->q + (size_t)m * j->ldq, j->ldq - j->n,
                    j->scale + m);
}

void kern_quantize_rows(kern_pool *p, kern_isa isa, int M, int K, const float *x, int ldx,
                        int8_t *q, int ldq, float *scale) {
    if (K < 0) return;
    kern_ops_job j = {.f = kern_ops_pick(isa),
                      .rows = kern_quant_rows,
                      .M = M,
                      .n = K,
                      .x = x,
                      .ldx = ldx,
                      .q = q,
                      .ldq = ldq,
                      .scale = scale};
    kern_ops_launch(p, &j, K);
}

static void kern_quant_block_rows(const kern_ops_job *j, int r0, int r1) {
    for (int m = r0; m < r1; m++)
        j->f->quant_blocks(j->x + (size_t)m * j->ldx, j->n, j->q + (size_t)m * j->ldq,
                           j->ldq - j->n, j->scale + (size_t)m * j->lds,
                           j->sum ? j->sum + (size_t)m * j->lds : NULL);
}

void kern_quantize_blocks_sum(kern_pool *p, kern_isa isa, int M, int K, const float *x, int ldx,
                              int8_t *q, int ldq, float *scale, int32_t *sum, int lds) {
    if (K < 0) return;
    kern_ops_job j = {.f = kern_ops_pick(isa),
                      .rows = kern_quant_block_rows,
                      .M = M,
                      .n = K,
                      .x = x,
                      .ldx = ldx,
                      .q = q,
                      .ldq = ldq,
                      .scale = scale,
                      .sum = sum,
                      .lds = lds};
    kern_ops_launch(p, &j, K);
}

void kern_quantize_blocks(kern_pool *p, kern_isa isa, int M, int K, const float *x, int ldx,
                          int8_t *q, int ldq, float *scale, int lds) {
    kern_quantize_blocks_sum(p, isa, M, K, x, ldx, q, ldq, scale, NULL, lds);
}

static void kern_rmsnorm_rows(const kern_ops_job *j, int r0, int r1) {
    for (int m = r0; m < r1; m++)
        j->f->rmsnorm(j->x + (size_t)m * j->ldx, j->n, j->w, j->eps, j->y + (size_t)m * j->ldy);
}

void kern_rmsnorm(kern_pool *p, kern_isa isa, int M, int n, const float *x, int ldx, const float *w,
                  float eps, float *y, int ldy) {
    if (n <= 0) return;
    kern_ops_job j = {.f = kern_ops_pick(isa),
                      .rows = kern_rmsnorm_rows,
                      .M = M,
                      .n = n,
                      .x = x,
                      .ldx = ldx,
                      .y = y,
                      .ldy = ldy,
                      .w = w,
                      .eps = eps};
    kern_ops_launch(p, &j, n);
}

static void kern_rope_rows(const kern_ops_job *j, int r0, int r1) {
    float c[KERN_ROPE_MAX_DIM / 2], s[KERN_ROPE_MAX_DIM / 2];
    int half = j->n / 2;
    for (int t = r0; t < r1; t++) {
        float p = (float)j->pos[t];
        for (int i = 0; i < half; i++) {
            float ang = p * j->inv_freq[i];
            c[i] = cosf(ang);
            s[i] = sinf(ang);
        }
        j->f->rotate(j->y + (size_t)t * j->ldy, j->n_head, j->n, c, s, j->rope);
    }
}

void kern_rope_freq(kern_pool *p, kern_isa isa, int n_tok, int n_head, int head_dim, float *x,
                    int ldx, const int32_t *pos, const float *inv_freq, kern_rope_type type) {
    if (n_head <= 0 || head_dim < 2) return;
    if (head_dim > KERN_ROPE_MAX_DIM) { /* no per-token tables: the scalar rotation per pair */
        int half = head_dim / 2;
        for (int t = 0; t < n_tok; t++)
            for (int i = 0; i < half; i++) {
                float ang = (float)pos[t] * inv_freq[i], c = cosf(ang), s = sinf(ang);
                for (int h = 0; h < n_head; h++) {
                    float *v = x + (size_t)t * ldx + (size_t)h * head_dim;
                    int a = type == KERN_ROPE_NEOX ? i : 2 * i;
                    int b = type == KERN_ROPE_NEOX ? i + half : 2 * i + 1;
                    float x0 = v[a], x1 = v[b];
                    v[a] = x0 * c - x1 * s;
                    v[b] = x0 * s + x1 * c;
                }
            }
        return;
    }
    kern_ops_job j = {.f = kern_ops_pick(isa),
                      .rows = kern_rope_rows,
                      .M = n_tok,
                      .n = head_dim,
                      .y = x,
                      .ldy = ldx,
                      .n_head = n_head,
                      .pos = pos,
                      .inv_freq = inv_freq,
                      .rope = type};
    /* a sinf + cosf pair costs about as much as rotating 16 floats */
    kern_ops_launch(p, &j, (long)n_head * head_dim + 8L * head_dim);
}

void kern_rope(kern_pool *p, kern_isa isa, int n_tok, int n_head, int head_dim, float *x, int ldx,
               const int32_t *pos, float base, kern_rope_type type) {
    if (n_head <= 0 || head_dim < 2) return;
    if (head_dim > KERN_ROPE_MAX_DIM) {
        kern_rope_ref(n_tok, n_head, head_dim, x, ldx, pos, base, type);
        return;
    }
    float inv_freq[KERN_ROPE_MAX_DIM / 2];
    for (int i = 0; i < head_dim / 2; i++)
        inv_freq[i] = (float)(1.0 / pow((double)base, (double)(2 * i) / head_dim));
    kern_rope_freq(p, isa, n_tok, n_head, head_dim, x, ldx, pos, inv_freq, type);
}

static void kern_glu_rows(const kern_ops_job *j, int r0, int r1) {
    for (int m = r0; m < r1; m++) {
        const float *g = j->x + (size_t)m * j->ldx;
        j->f->glu(g, g + j->n, j->n, j->y + (size_t)m * j->ldy, j->act);
    }
}

void kern_glu(kern_pool *p, kern_isa isa, int M, int F, const float *gu, int ldgu, float *h,
              int ldh, kern_glu_act act) {
    if (F <= 0) return;
    kern_ops_job j = {.f = kern_ops_pick(isa),
                      .rows = kern_glu_rows,
                      .M = M,
                      .n = F,
                      .x = gu,
                      .ldx = ldgu,
                      .y = h,
                      .ldy = ldh,
                      .act = act};
    /* exp and a division per element: weigh an element as 4 */
    kern_ops_launch(p, &j, 4L * F);
}

static void kern_add_rows(const kern_ops_job *j, int r0, int r1) {
    for (int m = r0; m < r1; m++)
        j->f->add(j->y + (size_t)m * j->ldy, j->x + (size_t)m * j->ldx, j->n);
}

void kern_add(kern_pool *p, kern_isa isa, int M, int n, float *y, int ldy, const float *x,
              int ldx) {
    if (n <= 0) return;
    kern_ops_job j = {.f = kern_ops_pick(isa),
                      .rows = kern_add_rows,
                      .M = M,
                      .n = n,
                      .x = x,
                      .ldx = ldx,
                      .y = y,
                      .ldy = ldy};
    kern_ops_launch(p, &j, n);
}

void kern_softmax(kern_isa isa, float *x, int n) {
    if (n <= 0) return;
    kern_ops_pick(isa)->softmax(x, n);
}

int kern_argmax(kern_isa isa, const float *x, int n) {
    return n <= 1 ? 0 : kern_ops_pick(isa)->argmax(x, n);
}

int kern_scan_at_least(kern_isa isa, const float *x, int from, int n, float mul, float thr) {
    return from >= n ? n : kern_ops_pick(isa)->scan_at_least(x, from, n, mul, thr);
}
