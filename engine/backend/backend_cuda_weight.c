/*
 * backend_cuda_weight.c -- the CUDA backend's weights: taking a weight
 * from the loader (weight_upload), linear() and embed().
 *
 * Forms (struct eng_bweight, backend_cuda_int.h):
 *   linear, int8 model, PARLEY_CUDA_WEIGHTS=channel (the default)  one int8
 *     matrix [Np][Kp] with one scale per output channel (kern_cuda_w8):
 *     ENG_WFMT_I8_ROW parts copied, I8_B32 and Q4_K parts folded per channel
 *     at upload (kern_cuda_fold.h: dequantise, requantise; the 4-bit forms
 *     are not kept, so caps lacks ENG_BE_CAP_W4), zero padding to
 *     kern_cuda_pad_n / pad_k; linear() quantises each input row with one
 *     scale per token and runs the IMMA / GEMV path: the fast form;
 *   linear, int8 model, PARLEY_CUDA_WEIGHTS=block  the CPU's form
 *     (kern_cuda_w8b): all-I8_B32 weights keep their codes and 32-value
 *     block scales, all-I8_ROW ones their per-channel scales (other mixes
 *     and Q4_K are folded per channel); linear() quantises per 32 values
 *     and runs kern_cuda_linear_b32, the CPU backend's linear() bit for
 *     bit, on dp4a kernels (no tensor cores): the accurate form;
 *   fp32 model  the floats [rows][cols], for linear (cuBLAS SGEMM) and embed;
 *   embedding (ENG_WUSE_EMBED, tied or not)  its own table in the source's
 *     scales, so the lookup is the CPU's bit for bit: all-I8_ROW parts keep
 *     row scales, all-I8_B32 parts keep the 32-value block scales; other
 *     mixes (and Q4_K) use the folded per-channel values.
 *
 * linear() on an int8 weight quantises the input rows into the workspace
 * with one scale per row (kern_cuda_quantize: rows of Kp bytes, then M
 * floats) and runs kern_cuda_linear_i8 (GEMV for M <= 8, cuBLASLt above;
 * the same float result either way).  The CPU quantises per 32 values and
 * keeps block scales; the difference is measured by tests/gpu.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cuda_int.h"
#include "eng_err.h"
#include "kern_cuda_fold.h"

/* Row r (within part p) as per-channel int8 into q (cols bytes) and *scale; 0 or -1. */
static int fold_part_row(const eng_wpart *p, int r, int cols, float *tmp, int8_t *q, float *scale) {
    size_t rc = (size_t)r * cols;
    switch (p->fmt) {
    case ENG_WFMT_I8_ROW:
        memcpy(q, p->q + rc, (size_t)cols);
        *scale = p->scale[r];
        return 0;
    case ENG_WFMT_I8_B32:
        kern_cuda_dequant_b32(p->q + rc, p->bscale + (size_t)r * (cols / 32), cols, tmp);
        return kern_cuda_fold_row(tmp, cols, q, scale);
    case ENG_WFMT_Q4_K:
        kern_cuda_dequant_q4k(p->u4 + rc, p->sc + (size_t)r * (cols / 32),
                              p->mn + (size_t)r * (cols / 32), p->d + (size_t)r * (cols / 256),
                              p->dmin + (size_t)r * (cols / 256), cols, tmp);
        return kern_cuda_fold_row(tmp, cols, q, scale);
    default: return -1;
    }
}

/* Rows of a weight into host arrays, on several threads (a 1B model's
 * folding takes seconds on one). */
enum { ROWS_FOLD = 0, ROWS_COPY_ROW = 1, ROWS_COPY_B32 = 2 };
typedef struct rows_job {
    const eng_wdesc *d; /* the weight */
    int mode;           /* ROWS_* */
    int8_t *q;          /* [rows][ldq] values */
    int ldq;            /* their row stride */
    float *sc;          /* [rows] per-channel scales (FOLD, COPY_ROW) */
    float *bs;          /* [rows][cols / 32] block scales (COPY_B32) */
    int r0, r1;         /* the rows of one thread */
    int bad_row;        /* a row with non-finite values, -1, or -2 (out of memory) */
} rows_job;

static void *rows_run(void *arg) {
    rows_job *j = arg;
    const eng_wdesc *d = j->d;
    int K = d->cols;
    float *tmp = j->mode == ROWS_FOLD ? malloc((size_t)K * sizeof *tmp) : NULL;
    if (j->mode == ROWS_FOLD && !tmp) {
        j->bad_row = -2;
        return NULL;
    }
    for (int i = 0; i < d->n_parts; i++) {
        const eng_wpart *p = &d->parts[i];
        for (int r = 0; r < p->rows; r++) {
            int row = p->row0 + r;
            if (row < j->r0 || row >= j->r1) continue;
            int8_t *qd = j->q + (size_t)row * j->ldq;
            if (j->mode == ROWS_FOLD) {
                if (fold_part_row(p, r, K, tmp, qd, &j->sc[row]) != 0 && j->bad_row == -1)
                    j->bad_row = row;
                continue;
            }
            memcpy(qd, p->q + (size_t)r * K, (size_t)K);
            if (j->mode == ROWS_COPY_ROW) j->sc[row] = p->scale[r];
            else
                memcpy(j->bs + (size_t)row * (K / 32), p->bscale + (size_t)r * (K / 32),
                       (size_t)(K / 32) * sizeof(float));
        }
    }
    free(tmp);
    return NULL;
}

/* Fill the host arrays of d with n_threads threads; 0, ENG_EINVAL (a
 * non-finite row) or ENG_ENOMEM, with a message. */
static int rows_fill(int n_threads, const eng_wdesc *d, int mode, int8_t *q, int ldq, float *sc,
                     float *bs, char *err, size_t errlen) {
    enum { MAX_T = 32 };
    rows_job jobs[MAX_T];
    pthread_t th[MAX_T];
    int started[MAX_T] = {0};
    int T = n_threads < 1 ? 1 : n_threads > MAX_T ? MAX_T : n_threads;
    if ((long)d->rows * d->cols < (1L << 20)) T = 1; /* small: not worth a thread */
    for (int t = 0; t < T; t++)
        jobs[t] = (rows_job){.d = d,
                             .mode = mode,
                             .q = q,
                             .ldq = ldq,
                             .sc = sc,
                             .bs = bs,
                             .r0 = (int)((long)d->rows * t / T),
                             .r1 = (int)((long)d->rows * (t + 1) / T),
                             .bad_row = -1};
    for (int t = 1; t < T; t++)
        if (pthread_create(&th[t], NULL, rows_run, &jobs[t]) == 0) started[t] = 1;
        else rows_run(&jobs[t]);
    rows_run(&jobs[0]);
    for (int t = 1; t < T; t++)
        if (started[t]) pthread_join(th[t], NULL);
    for (int t = 0; t < T; t++) {
        if (jobs[t].bad_row == -2)
            return pl_errf(err, errlen, ENG_ENOMEM, "out of memory folding %s", d->name);
        if (jobs[t].bad_row >= 0)
            return pl_errf(err, errlen, ENG_EINVAL, "%s: row %d has non-finite values", d->name,
                           jobs[t].bad_row);
    }
    return 0;
}

/* Device copy of n host bytes (under the lock); NULL when out of memory. */
static void *dev_copy(cuda_be *be, const void *src, size_t n) {
    void *d = kern_cuda_malloc(be->kc, n);
    if (d) cuda_put(be, d, src, n);
    return d;
}

/* The int8 linear form of d (per channel, padded). */
static int upload_linear(cuda_be *be, const eng_wdesc *d, eng_bweight *w, char *err,
                         size_t errlen) {
    int N = d->rows, K = d->cols, Np = kern_cuda_pad_n(N), Kp = kern_cuda_pad_k(K);
    int8_t *q = calloc((size_t)Np, (size_t)Kp);
    float *sc = calloc((size_t)Np, sizeof *sc);
    int rc = 0;
    if (!q || !sc) {
        rc = pl_errf(err, errlen, ENG_ENOMEM, "out of memory folding %s", d->name);
        goto out;
    }
    if ((rc = rows_fill(be->n_threads, d, ROWS_FOLD, q, Kp, sc, NULL, err, errlen))) goto out;
    w->w8 = (kern_cuda_w8){.N = N, .K = K, .Np = Np, .Kp = Kp};
    w->w8.q = dev_copy(be, q, (size_t)Np * Kp);
    w->w8.scale = dev_copy(be, sc, (size_t)Np * sizeof(float));
    if (!w->w8.q || !w->w8.scale)
        rc = pl_errf(err, errlen, ENG_ENOMEM, "%s: out of device memory (%zu bytes)", d->name,
                     (size_t)Np * Kp);
out:
    free(q);
    free(sc);
    return rc;
}

/* The int8 linear form of d in 32-value blocks (CUDA_WFORM_BLOCK). */
static int upload_linear_b32(cuda_be *be, const eng_wdesc *d, eng_bweight *w, char *err,
                             size_t errlen) {
    int N = d->rows, K = d->cols, Np = kern_cuda_pad_n(N), Kp = (K + 31) / 32 * 32, nb = Kp / 32;
    int all_row = 1, all_b32 = 1;
    for (int i = 0; i < d->n_parts; i++) {
        all_row &= d->parts[i].fmt == ENG_WFMT_I8_ROW;
        all_b32 &= d->parts[i].fmt == ENG_WFMT_I8_B32;
    }
    int8_t *q = calloc((size_t)Np, (size_t)Kp);
    float *bs = all_b32 ? calloc((size_t)Np * nb, sizeof *bs) : NULL;
    float *sc = all_b32 ? NULL : calloc((size_t)Np, sizeof *sc);
    int rc = 0;
    if (!q || (all_b32 ? !bs : !sc)) {
        rc = pl_errf(err, errlen, ENG_ENOMEM, "out of memory loading %s", d->name);
        goto out;
    }
    rc = rows_fill(be->n_threads, d,
                   all_b32   ? ROWS_COPY_B32
                   : all_row ? ROWS_COPY_ROW
                             : ROWS_FOLD,
                   q, Kp, sc, bs, err, errlen);
    if (rc) goto out;
    w->w8b = (kern_cuda_w8b){.N = N, .K = K, .Np = Np, .Kp = Kp};
    w->w8b.q = dev_copy(be, q, (size_t)Np * Kp);
    if (bs) w->w8b.bscale = dev_copy(be, bs, (size_t)Np * nb * sizeof(float));
    else w->w8b.scale = dev_copy(be, sc, (size_t)Np * sizeof(float));
    if (!w->w8b.q || (bs ? !w->w8b.bscale : !w->w8b.scale))
        rc = pl_errf(err, errlen, ENG_ENOMEM, "%s: out of device memory", d->name);
out:
    free(q);
    free(bs);
    free(sc);
    return rc;
}

/* The embedding table of an int8 d in its source scales (see the file comment). */
static int upload_embed(cuda_be *be, const eng_wdesc *d, eng_bweight *w, char *err, size_t errlen) {
    int R = d->rows, E = d->cols, all_row = 1, all_b32 = 1;
    for (int i = 0; i < d->n_parts; i++) {
        all_row &= d->parts[i].fmt == ENG_WFMT_I8_ROW;
        all_b32 &= d->parts[i].fmt == ENG_WFMT_I8_B32;
    }
    int group = all_b32 ? 32 : E, ns = E / group;
    int8_t *q = malloc((size_t)R * E);
    float *sc = malloc((size_t)R * ns * sizeof *sc), *tmp = malloc((size_t)E * sizeof *tmp);
    int rc = 0;
    if (!q || !sc || !tmp) {
        rc = pl_errf(err, errlen, ENG_ENOMEM, "out of memory loading %s", d->name);
        goto out;
    }
    for (int i = 0; i < d->n_parts && !rc; i++) {
        const eng_wpart *p = &d->parts[i];
        size_t r0 = (size_t)p->row0;
        if (all_row || all_b32) { /* the source's values and scales */
            memcpy(q + r0 * E, p->q, (size_t)p->rows * E);
            memcpy(sc + r0 * ns, all_row ? p->scale : p->bscale,
                   (size_t)p->rows * ns * sizeof(float));
            continue;
        }
        for (int r = 0; r < p->rows; r++)
            if (fold_part_row(p, r, E, tmp, q + (r0 + r) * E, &sc[r0 + r]) != 0) {
                rc = pl_errf(err, errlen, ENG_EINVAL, "%s: row %d has non-finite values", d->name,
                             p->row0 + r);
                break;
            }
    }
    if (rc) goto out;
    w->eq = dev_copy(be, q, (size_t)R * E);
    w->escale = dev_copy(be, sc, (size_t)R * ns * sizeof(float));
    if (!w->eq || !w->escale) {
        rc = pl_errf(err, errlen, ENG_ENOMEM, "%s: out of device memory", d->name);
        goto out;
    }
    w->emb = (kern_cuda_etab){.rows = R, .cols = E, .q = w->eq, .scale = w->escale, .group = group};
out:
    free(q);
    free(sc);
    free(tmp);
    return rc;
}

int eng_cuda_weight_upload(void *ctx, const eng_wdesc *d, int native, eng_bweight **out, char *err,
                           size_t errlen) {
    cuda_be *be = ctx;
    (void)native; /* 4-bit parts are folded to int8: no native 4-bit form on the device */
    *out = NULL;
    int rc = eng_wdesc_check(d, 0, err, errlen);
    if (rc) return rc;
    eng_bweight *w = calloc(1, sizeof *w);
    if (!w) return pl_errf(err, errlen, ENG_ENOMEM, "out of memory");
    w->rows = d->rows, w->cols = d->cols, w->use = d->use;
    eng_wdesc named = *d;
    if (!named.name) named.name = "weight";
    cuda_lock(be);
    if (d->parts[0].fmt == ENG_WFMT_F32) { /* fp32: one float matrix for linear and embed */
        size_t rowb = (size_t)d->cols * sizeof(float);
        w->f = kern_cuda_malloc(be->kc, (size_t)d->rows * rowb);
        if (!w->f) rc = pl_errf(err, errlen, ENG_ENOMEM, "%s: out of device memory", named.name);
        for (int i = 0; i < d->n_parts && !rc; i++)
            cuda_put(be, (char *)w->f + (size_t)d->parts[i].row0 * rowb, d->parts[i].f,
                     (size_t)d->parts[i].rows * rowb);
        if (!rc) w->emb = (kern_cuda_etab){.rows = d->rows, .cols = d->cols, .f = w->f};
    } else {
        if (d->use & ENG_WUSE_LINEAR)
            rc = be->wform == CUDA_WFORM_BLOCK ? upload_linear_b32(be, &named, w, err, errlen)
                                               : upload_linear(be, &named, w, err, errlen);
        if (!rc && (d->use & ENG_WUSE_EMBED)) rc = upload_embed(be, &named, w, err, errlen);
    }
    char sub[PL_ERR_LEN];
    int st = kern_cuda_sync(be->kc);
    if (!rc && st) {
        kern_cuda_status(be->kc, sub, sizeof sub);
        rc = pl_errf(err, errlen, ENG_EIO, "%s: upload failed: %s", named.name, sub);
    }
    cuda_unlock(be);
    if (rc) {
        eng_cuda_weight_free(ctx, w);
        return rc;
    }
    *out = w;
    return 0;
}

void eng_cuda_weight_free(void *ctx, eng_bweight *w) {
    cuda_be *be = ctx;
    if (!w) return;
    cuda_lock(be);
    kern_cuda_free(be->kc, (void *)w->w8.q);
    kern_cuda_free(be->kc, (void *)w->w8.scale);
    kern_cuda_free(be->kc, (void *)w->w8b.q);
    kern_cuda_free(be->kc, (void *)w->w8b.bscale);
    kern_cuda_free(be->kc, (void *)w->w8b.scale);
    kern_cuda_free(be->kc, w->f);
    kern_cuda_free(be->kc, w->eq);
    kern_cuda_free(be->kc, w->escale);
    cuda_unlock(be);
    free(w);
}

size_t eng_cuda_weight_read_bytes(void *ctx, const eng_bweight *w) {
    (void)ctx;
    if (!(w->use & ENG_WUSE_LINEAR)) return 0;
    if (w->f) return (size_t)w->rows * w->cols * sizeof(float);
    if (w->w8b.q)
        return (size_t)w->w8b.Np * w->w8b.Kp +
               (w->w8b.bscale ? (size_t)w->w8b.Np * (w->w8b.Kp / 32) : (size_t)w->w8b.Np) *
                   sizeof(float);
    return (size_t)w->w8.Np * w->w8.Kp + (size_t)w->w8.Np * sizeof(float);
}

size_t eng_cuda_weight_bytes(void *ctx, const eng_bweight *w) {
    if (w->f) return (size_t)w->rows * w->cols * sizeof(float);
    size_t n = eng_cuda_weight_read_bytes(ctx, w);
    if (w->eq) n += (size_t)w->rows * w->cols;
    if (w->escale) n += (size_t)w->rows * (w->cols / w->emb.group) * sizeof(float);
    return n;
}

/* The quantised input: M rows of Kp bytes (the larger padding of the two
 * forms, 256-byte aligned size), then the scales. */
static size_t ws_q_bytes(int M, int K) {
    return ((size_t)M * ((K + 31) / 32 * 32) + 255) / 256 * 256;
}

size_t eng_cuda_linear_ws(void *ctx, int M, int K) {
    (void)ctx;
    return ws_q_bytes(M, K) + (size_t)M * ((K + 31) / 32) * sizeof(float);
}

void eng_cuda_linear(void *ctx, int M, const float *x, int ldx, const eng_bweight *w, float *C,
                     int ldc, void *ws) {
    cuda_be *be = ctx;
    if (M <= 0) return;
    cuda_lock(be);
    if (w->f) {
        kern_cuda_gemm_f32(be->kc, M, w->rows, w->cols, x, ldx, w->f, C, ldc);
    } else if (w->w8b.q) {
        int8_t *xq = ws;
        float *xs = (float *)((char *)ws + ws_q_bytes(M, w->cols));
        kern_cuda_quantize_blocks(be->kc, M, w->cols, x, ldx, xq, w->w8b.Kp, xs, w->w8b.Kp / 32);
        kern_cuda_linear_b32(be->kc, M, xq, xs, &w->w8b, C, ldc);
    } else {
        int8_t *xq = ws;
        float *xs = (float *)((char *)ws + ws_q_bytes(M, w->cols));
        kern_cuda_quantize(be->kc, M, w->cols, x, ldx, xq, w->w8.Kp, xs);
        kern_cuda_linear_i8(be->kc, M, xq, xs, &w->w8, C, ldc, be->gemm_path);
    }
    cuda_unlock(be);
}

void eng_cuda_embed(void *ctx, const eng_bweight *w, const int32_t *tok, int T, float mul, float *x,
                    int ldx) {
    cuda_be *be = ctx;
    cuda_lock(be);
    if (w->emb.cols) kern_cuda_embed(be->kc, &w->emb, tok, T, mul, x, ldx);
    else kern_cuda_fail(be->kc, KERN_CUDA_EINVAL, "embed: weight has no embedding table");
    cuda_unlock(be);
}
