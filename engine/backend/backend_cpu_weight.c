/*
 * backend_cpu_weight.c -- the CPU backend's weights: taking a weight from
 * the loader (weight_upload: packing runs of rows for the GEMM, keeping
 * fp32 values or an untied embedding's rows), linear() and embed().  The
 * forms a weight is held in are described in backend_cpu_int.h.
 *
 * linear() on an int8 weight quantises the input rows once (one scale and
 * one sum per 32 values, kern_quantize_blocks_sum, into the caller's
 * workspace) and runs kern_gemm_q8_run or kern_gemm_w4_run for each packed
 * run into that run's columns of C.  Every output of the GEMM depends only
 * on its own weight row, so splitting a weight into runs changes no bit of
 * the result.  logits() is the same GEMM with the outputs put into each
 * row's own buffer and / or reduced to a per-row argmax as the tiles finish
 * (kern_gemm_out: argmax keys max-merged across runs and tasks).
 *
 * Native loads (weight_upload's native = 1) keep 4-bit parts 4-bit: a Q4_K
 * part as kern_w4's affine kind (the file's codes, scales and mins), an
 * int8 block-scaled part that comes with a 16-value code book (Q4_0,
 * IQ4_NL) as the LUT kind -- which computes exactly what the int8 pack of
 * the same codes computes, bit for bit, from half the bytes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend_cpu_int.h"
#include "eng_err.h"
#include "kern_ops.h"

#define CPU_KB 32 /* inputs per activation / weight scale block */

static kern_pool *cpu_pool(void *ctx) { return ((cpu_be *)ctx)->pool; }

/* How a part is held: CPU_RUN_I8, or CPU_RUN_W4 for 4-bit parts of native loads. */
static int part_kind(const eng_wpart *p, int native) {
    if (p->fmt == ENG_WFMT_Q4_K) return CPU_RUN_W4;
    return native && p->fmt == ENG_WFMT_I8_B32 && p->lut ? CPU_RUN_W4 : CPU_RUN_I8;
}

/* 1 when parts a and b can share one packed run. */
static int same_run(const eng_wpart *a, const eng_wpart *b, int native) {
    if (part_kind(a, native) != part_kind(b, native) || a->fmt != b->fmt) return 0;
    return part_kind(a, native) == CPU_RUN_I8 || a->fmt == ENG_WFMT_Q4_K ||
           memcmp(a->lut, b->lut, 16) == 0;
}

/* Concatenate parts [p0, p1) (all in one int8 format) into row-major arrays. */
static int gather_i8(const eng_wdesc *d, int p0, int p1, int8_t **q, float **scale,
                     float **bscale) {
    int rows = 0, cols = d->cols, nb = cols / CPU_KB;
    for (int i = p0; i < p1; i++) rows += d->parts[i].rows;
    int bs = d->parts[p0].fmt == ENG_WFMT_I8_B32;
    *q = malloc((size_t)rows * cols);
    *scale = bs ? NULL : malloc((size_t)rows * sizeof(float));
    *bscale = bs ? malloc((size_t)rows * nb * sizeof(float)) : NULL;
    if (!*q || (bs ? !*bscale : !*scale)) return -1;
    for (int i = p0, r = 0; i < p1; r += d->parts[i].rows, i++) {
        const eng_wpart *p = &d->parts[i];
        memcpy(*q + (size_t)r * cols, p->q, (size_t)p->rows * cols);
        if (bs) memcpy(*bscale + (size_t)r * nb, p->bscale, (size_t)p->rows * nb * sizeof(float));
        else memcpy(*scale + r, p->scale, (size_t)p->rows * sizeof(float));
    }
    return 0;
}

/* Concatenate Q4_K parts [p0, p1) into one allocation: u[rows][cols],
 * sc, mn [rows][cols / 32] (bytes), d, dmin [rows][cols / 256] (floats). */
static int gather_q4k(const eng_wdesc *d, int p0, int p1, uint8_t **u, float **dd) {
    size_t rows = 0, cols = (size_t)d->cols;
    for (int i = p0; i < p1; i++) rows += (size_t)d->parts[i].rows;
    size_t n = rows * cols, nb = n / CPU_KB, ns = n / 256;
    *u = malloc(n + 2 * nb);
    *dd = malloc(2 * ns * sizeof(float));
    if (!*u || !*dd) return -1;
    for (int i = p0, r = 0; i < p1; r += d->parts[i].rows, i++) {
        const eng_wpart *p = &d->parts[i];
        size_t pr = (size_t)p->rows, o = (size_t)r;
        memcpy(*u + o * cols, p->u4, pr * cols);
        memcpy(*u + n + o * (cols / CPU_KB), p->sc, pr * (cols / CPU_KB));
        memcpy(*u + n + nb + o * (cols / CPU_KB), p->mn, pr * (cols / CPU_KB));
        memcpy(*dd + o * (cols / 256), p->d, pr * (cols / 256) * sizeof(float));
        memcpy(*dd + ns + o * (cols / 256), p->dmin, pr * (cols / 256) * sizeof(float));
    }
    return 0;
}

/* Pack 4-bit parts [p0, p1) (one kind) as run r. */
static int pack_w4(const eng_wdesc *d, int p0, int p1, cpu_wrun *r, char *sub, size_t sublen) {
    const eng_wpart *p = &d->parts[p0];
    size_t n = (size_t)r->rows * d->cols;
    if (p->fmt == ENG_WFMT_Q4_K) {
        uint8_t *u = NULL;
        float *dd = NULL;
        int rc = KERN_ENOMEM;
        if (p1 - p0 == 1)
            rc = kern_w4pack_init_affine(&r->w4, r->rows, d->cols, p->u4, p->sc, p->mn, p->d,
                                         p->dmin, sub, sublen);
        else if (gather_q4k(d, p0, p1, &u, &dd) == 0)
            rc = kern_w4pack_init_affine(&r->w4, r->rows, d->cols, u, u + n, u + n + n / CPU_KB, dd,
                                         dd + n / 256, sub, sublen);
        else snprintf(sub, sublen, "out of memory");
        free(u);
        free(dd);
        return rc;
    }
    int8_t *q = NULL;
    float *scale = NULL, *bscale = NULL;
    int rc = KERN_ENOMEM;
    if (p1 - p0 == 1)
        rc = kern_w4pack_init_lut(&r->w4, r->rows, d->cols, p->q, p->bscale, p->lut, sub, sublen);
    else if (gather_i8(d, p0, p1, &q, &scale, &bscale) == 0)
        rc = kern_w4pack_init_lut(&r->w4, r->rows, d->cols, q, bscale, p->lut, sub, sublen);
    else snprintf(sub, sublen, "out of memory");
    free(q);
    free(scale);
    free(bscale);
    return rc;
}

/* Pack parts [p0, p1) (one run's format) as run r. */
static int pack_run(const eng_wdesc *d, int p0, int p1, int native, cpu_wrun *r, char *err,
                    size_t errlen) {
    int8_t *q = NULL;
    float *scale = NULL, *bscale = NULL;
    const eng_wpart *p = &d->parts[p0];
    r->row0 = p->row0;
    r->rows = 0;
    r->kind = part_kind(p, native);
    for (int i = p0; i < p1; i++) r->rows += d->parts[i].rows;
    int rc = 0;
    char sub[PL_ERR_LEN];
    if (r->kind == CPU_RUN_W4) {
        rc = pack_w4(d, p0, p1, r, sub, sizeof sub);
    } else if (p1 - p0 == 1) {
        rc = kern_wpack_init(&r->pk, r->rows, d->cols, p->q,
                             p->fmt == ENG_WFMT_I8_ROW ? p->scale : NULL,
                             p->fmt == ENG_WFMT_I8_B32 ? p->bscale : NULL, sub, sizeof sub);
    } else if (gather_i8(d, p0, p1, &q, &scale, &bscale) != 0) {
        rc = KERN_ENOMEM;
        snprintf(sub, sizeof sub, "out of memory");
    } else {
        rc = kern_wpack_init(&r->pk, r->rows, d->cols, q, scale, bscale, sub, sizeof sub);
    }
    free(q);
    free(scale);
    free(bscale);
    if (rc != 0) /* the kernels' class: a bad shape is not out of memory */
        return pl_errf(err, errlen, rc == KERN_ENOMEM ? ENG_ENOMEM : ENG_EINVAL, "packing %s: %s",
                       d->name ? d->name : "weight", sub);
    return 0;
}

int eng_cpu_weight_upload(void *ctx, const eng_wdesc *d, int native, eng_bweight **out, char *err,
                          size_t errlen) {
    (void)ctx;
    *out = NULL;
    int rc = eng_wdesc_check(d, ENG_WUSE_LINEAR, err, errlen);
    if (rc) return rc;
    eng_bweight *w = calloc(1, sizeof *w);
    if (!w) return pl_errf(err, errlen, ENG_ENOMEM, "out of memory");
    w->rows = d->rows, w->cols = d->cols, w->use = d->use;
    const char *name = d->name ? d->name : "weight";
    if (d->parts[0].fmt == ENG_WFMT_F32) { /* fp32: the values, for linear and embed alike */
        w->f = malloc((size_t)d->rows * d->cols * sizeof(float));
        if (!w->f) goto oom;
        for (int i = 0; i < d->n_parts; i++)
            memcpy(w->f + (size_t)d->parts[i].row0 * d->cols, d->parts[i].f,
                   (size_t)d->parts[i].rows * d->cols * sizeof(float));
        *out = w;
        return 0;
    }
    if (!(d->use & ENG_WUSE_LINEAR)) { /* an untied embedding: rows for lookups */
        for (int i = 1; i < d->n_parts; i++)
            if (d->parts[i].fmt != d->parts[0].fmt) {
                eng_cpu_weight_free(ctx, w);
                return pl_errf(err, errlen, ENG_EINVAL, "%s: embedding parts in mixed formats",
                               name);
            }
        if (gather_i8(d, 0, d->n_parts, &w->q, &w->scale, &w->bscale) != 0) goto oom;
        *out = w;
        return 0;
    }
    w->runs = calloc((size_t)d->n_parts, sizeof *w->runs);
    if (!w->runs) goto oom;
    for (int p0 = 0; p0 < d->n_parts;) { /* one run per stretch of parts in one format */
        int p1 = p0 + 1;
        while (p1 < d->n_parts && same_run(&d->parts[p0], &d->parts[p1], native)) p1++;
        if ((rc = pack_run(d, p0, p1, native, &w->runs[w->n_runs], err, errlen)) != 0) {
            eng_cpu_weight_free(ctx, w);
            return rc;
        }
        w->n_runs++;
        p0 = p1;
    }
    *out = w;
    return 0;
oom:
    eng_cpu_weight_free(ctx, w);
    return pl_errf(err, errlen, ENG_ENOMEM, "out of memory loading %s", name);
}

void eng_cpu_weight_free(void *ctx, eng_bweight *w) {
    (void)ctx;
    if (!w) return;
    for (int i = 0; i < w->n_runs; i++) {
        kern_wpack_free(&w->runs[i].pk);
        kern_w4pack_free(&w->runs[i].w4);
    }
    free(w->runs);
    free(w->f);
    free(w->q);
    free(w->scale);
    free(w->bscale);
    free(w);
}

size_t eng_cpu_weight_read_bytes(void *ctx, const eng_bweight *w) {
    (void)ctx;
    if (!(w->use & ENG_WUSE_LINEAR)) return 0;
    if (w->f) return (size_t)w->rows * w->cols * sizeof(float);
    size_t n = 0;
    for (int i = 0; i < w->n_runs; i++)
        n += w->runs[i].kind == CPU_RUN_W4 ? kern_w4pack_bytes(&w->runs[i].w4)
                                           : kern_wpack_bytes(&w->runs[i].pk);
    return n;
}

size_t eng_cpu_weight_bytes(void *ctx, const eng_bweight *w) {
    size_t v = (size_t)w->rows * w->cols;
    if (w->f) return v * sizeof(float);
    size_t n = eng_cpu_weight_read_bytes(ctx, w);
    if (w->q) n += v;
    if (w->scale) n += (size_t)w->rows * sizeof(float);
    if (w->bscale) n += v / CPU_KB * sizeof(float);
    return n;
}

/* The workspace of linear / logits for M rows of K inputs: the int8 rows
 * (Kp bytes each), their block scales and block sums, and one argmax key
 * per row (logits), each region 64-byte aligned. */
typedef struct cpu_ws {
    int8_t *q;      /* [M][Kp] */
    float *scale;   /* [M][Kp / 32] */
    int32_t *sum;   /* [M][Kp / 32] */
    uint64_t *keys; /* [M] */
} cpu_ws;

static size_t ws_layout(int M, int K, void *ws, cpu_ws *out) {
    size_t Kp = ((size_t)K + CPU_KB - 1) / CPU_KB * CPU_KB, nb = Kp / CPU_KB;
    size_t sz[4] = {(size_t)M * Kp, (size_t)M * nb * sizeof(float),
                    (size_t)M * nb * sizeof(int32_t), (size_t)M * sizeof(uint64_t)};
    size_t off[4], n = 0;
    for (int i = 0; i < 4; i++) {
        off[i] = n;
        n += (sz[i] + 63) / 64 * 64;
    }
    if (out) {
        char *b = ws;
        *out = (cpu_ws){(int8_t *)(b + off[0]), (float *)(b + off[1]), (int32_t *)(b + off[2]),
                        (uint64_t *)(b + off[3])};
    }
    return n;
}

size_t eng_cpu_linear_ws(void *ctx, int M, int K) {
    (void)ctx;
    return ws_layout(M, K, NULL, NULL);
}

/* Quantise x (M rows of w->cols, one scale and sum per 32 values) into ws;
 * the GEMM's activations. */
static kern_gemm_act cpu_quantize(kern_pool *p, kern_isa isa, int M, const float *x, int ldx,
                                  const eng_bweight *w, void *ws, cpu_ws *l) {
    int K = w->cols, Kp = (K + CPU_KB - 1) / CPU_KB * CPU_KB, lds = Kp / CPU_KB;
    ws_layout(M, K, ws, l);
    kern_quantize_blocks_sum(p, isa, M, K, x, ldx, l->q, Kp, l->scale, l->sum, lds);
    return (kern_gemm_act){
        .M = M, .A = l->q, .lda = Kp, .a_scale = l->scale, .lds = lds, .a_sum = l->sum};
}

/* Every packed run of w over a, into out (its col0 moved to each run's rows). */
static void cpu_runs(kern_pool *p, kern_isa isa, const kern_gemm_act *a, const eng_bweight *w,
                     kern_gemm_out out) {
    int col0 = out.col0;
    float *C = out.C;
    for (int i = 0; i < w->n_runs; i++) {
        const cpu_wrun *r = &w->runs[i];
        out.col0 = col0 + r->row0;
        out.C = C ? C + r->row0 : NULL;
        if (r->kind == CPU_RUN_W4) kern_gemm_w4_run(p, isa, a, &r->w4, &out);
        else kern_gemm_q8_run(p, isa, a, &r->pk, &out);
    }
}

void eng_cpu_linear(void *ctx, int M, const float *x, int ldx, const eng_bweight *w, float *C,
                    int ldc, void *ws) {
    kern_pool *p = cpu_pool(ctx);
    kern_isa isa = kern_isa_best();
    if (w->f) { /* one call, or one per row when x's rows are not packed (same sums) */
        if (ldx == w->cols) kern_gemm_f32(p, isa, M, w->rows, w->cols, x, w->f, C, ldc);
        else
            for (int m = 0; m < M; m++)
                kern_gemm_f32(p, isa, 1, w->rows, w->cols, x + (size_t)m * ldx, w->f,
                              C + (size_t)m * ldc, ldc);
        return;
    }
    cpu_ws l;
    kern_gemm_act a = cpu_quantize(p, isa, M, x, ldx, w, ws, &l);
    cpu_runs(p, isa, &a, w, (kern_gemm_out){.C = C, .ldc = ldc});
}

void eng_cpu_logits(void *ctx, int R, const float *x, int ldx, const eng_bweight *w,
                    float *const *rows, int32_t *amax, void *ws) {
    kern_pool *p = cpu_pool(ctx);
    kern_isa isa = kern_isa_best();
    if (R <= 0) return;
    if (w->f) { /* fp32 models: a row at a time, argmax-only rows in column chunks */
        for (int r = 0; r < R; r++) {
            const float *xr = x + (size_t)r * ldx;
            if (rows && rows[r]) {
                kern_gemm_f32(p, isa, 1, w->rows, w->cols, xr, w->f, rows[r], w->rows);
                if (amax) amax[r] = kern_argmax(isa, rows[r], w->rows);
                continue;
            }
            if (!amax) continue;
            float buf[4096];
            uint64_t key = 0;
            for (int n0 = 0; n0 < w->rows; n0 += 4096) {
                int n = w->rows - n0 < 4096 ? w->rows - n0 : 4096;
                kern_gemm_f32(p, isa, 1, n, w->cols, xr, w->f + (size_t)n0 * w->cols, buf, n);
                int j = kern_argmax(isa, buf, n);
                uint64_t k = kern_amax_key(buf[j], n0 + j);
                if (k > key) key = k;
            }
            amax[r] = kern_amax_key_index(key);
        }
        return;
    }
    cpu_ws l;
    kern_gemm_act a = cpu_quantize(p, isa, R, x, ldx, w, ws, &l);
    if (amax) memset(l.keys, 0, (size_t)R * sizeof *l.keys);
    cpu_runs(p, isa, &a, w, (kern_gemm_out){.rows = rows, .amax = amax ? l.keys : NULL});
    if (amax)
        for (int r = 0; r < R; r++) amax[r] = kern_amax_key_index(l.keys[r]);
}

void eng_cpu_embed(void *ctx, const eng_bweight *w, const int32_t *tok, int T, float mul, float *x,
                   int ldx) {
    (void)ctx;
    int E = w->cols;
    for (int t = 0; t < T; t++) {
        int row = tok[t];
        float *xr = x + (size_t)t * ldx;
        if (w->f) {
            const float *f = w->f + (size_t)row * E;
            for (int k = 0; k < E; k++) xr[k] = f[k] * mul;
        } else if (w->n_runs) { /* a tied int8 table: read back from its pack */
            const cpu_wrun *r = w->runs;
            while (row >= r->row0 + r->rows) r++;
            if (r->kind == CPU_RUN_W4) kern_w4pack_row_f32(&r->w4, row - r->row0, mul, xr);
            else kern_wpack_row_f32(&r->pk, row - r->row0, mul, xr);
        } else if (w->bscale) {
            const int8_t *q = w->q + (size_t)row * E;
            const float *bs = w->bscale + (size_t)row * (E / CPU_KB);
            for (int k = 0; k < E; k++) xr[k] = (float)q[k] * bs[k / CPU_KB] * mul;
        } else {
            const int8_t *q = w->q + (size_t)row * E;
            float sc = w->scale[row] * mul;
            for (int k = 0; k < E; k++) xr[k] = (float)q[k] * sc;
        }
    }
}
