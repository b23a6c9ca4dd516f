/*
 * kern_w4.c -- the W4A8 GEMM: packing (both kinds), the row look-up, the
 * plain AFFINE reference, the portable tile kernel that defines the exact
 * result, and the threaded driver (contracts and layout in kern_w4.h, the
 * tile interface in kern_w4_int.h).
 *
 * The driver splits the work exactly as kern_gemm_q8's (kern_gemm_split):
 * tasks of up to KERN_TILE_M rows x a few 16-channel groups, group-major,
 * about 8 per thread (an M = 1 GEMM of 2048 channels gives both cores
 * dozens of tasks, each streaming its groups front to back).  The ISA
 * kernels live in kern_w4_avx2.c and kern_w4_avx512.c.
 */
#include "kern_w4_int.h"
#include "pl_err.h"

#include <assert.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

const int8_t kern_w4_lut_q4_0[16] = {-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7};
const int8_t kern_w4_lut_iq4_nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                       1,    13,   25,  38,  53,  69,  89,  113};

/* ---- codes in the packed layout --------------------------------------------- */

/* Byte and nibble shift of code (n, k) in a pack of nb blocks. */
static size_t kern_w4_at(int nb, int n, int k, int *shift) {
    int g = n / KERN_PACK_NC, c = n % KERN_PACK_NC, b = k / KERN_PACK_KB, q = (k % 32) / 4;
    *shift = 4 * (q & 1);
    return ((size_t)g * nb + b) * KERN_W4_NIB_BYTES + (size_t)(q / 2) * 64 + (size_t)c * 4 + k % 4;
}

static int kern_w4_code(const kern_w4pack *w, int n, int k) {
    int sh;
    size_t i = kern_w4_at(w->n_blocks, n, k, &sh);
    return (w->nib[i] >> sh) & 15;
}

/* Allocates the codes (zeroed) and sets the shape; -1 when out of memory. */
static int kern_w4_alloc(kern_w4pack *w, kern_w4_kind kind, int N, int K) {
    w->kind = kind, w->N = N, w->K = K;
    w->n_groups = (N + KERN_PACK_NC - 1) / KERN_PACK_NC;
    w->n_blocks = K / KERN_PACK_KB;
    size_t bytes = (size_t)w->n_groups * w->n_blocks * KERN_W4_NIB_BYTES;
    w->nib = kern_huge_alloc(bytes);
    if (!w->nib) return KERN_ENOMEM;
    memset(w->nib, 0, bytes);
    return 0;
}

static int kern_w4_finite(const float *v, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!(fabsf(v[i]) <= 65504.0f)) return 0; /* inf, nan or past fp16 */
    return 1;
}

/* ---- packing ----------------------------------------------------------------- */

int kern_w4pack_init_lut(kern_w4pack *w, int N, int K, const int8_t *W, const float *bscale,
                         const int8_t lut[16], char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    if (N < 1 || K < KERN_PACK_KB || K % KERN_PACK_KB || !W || !bscale || !lut)
        return pl_errf(err, errlen, KERN_EINVAL, "bad W4 weight shape %d x %d (K a multiple of 32)",
                       N, K);
    int8_t code_of[256];
    memset(code_of, -1, sizeof code_of);
    for (int i = 15; i >= 0; i--) { /* a repeated value keeps its first code */
        if (lut[i] == -128) return pl_errf(err, errlen, KERN_EINVAL, "W4 code book value -128");
        code_of[lut[i] + 128] = (int8_t)i;
    }
    int nb = K / KERN_PACK_KB;
    if (!kern_w4_finite(bscale, (size_t)N * nb))
        return pl_errf(err, errlen, KERN_EINVAL, "W4 block scale not finite in fp16");
    if (kern_w4_alloc(w, KERN_W4_LUT, N, K) ||
        !(w->bscale = calloc((size_t)w->n_groups * nb * KERN_PACK_NC, sizeof *w->bscale))) {
        kern_w4pack_free(w);
        return pl_errf(err, errlen, KERN_ENOMEM, "out of memory packing %d x %d W4 weights", N, K);
    }
    memcpy(w->lut, lut, sizeof w->lut);
    for (int n = 0; n < N; n++) {
        const int8_t *row = W + (size_t)n * K;
        for (int k = 0; k < K; k++) {
            int code = code_of[row[k] + 128], sh;
            if (code < 0) {
                kern_w4pack_free(w);
                return pl_errf(err, errlen, KERN_EINVAL,
                               "W4 weight [%d][%d] = %d is not in the code book", n, k, row[k]);
            }
            size_t at = kern_w4_at(nb, n, k, &sh);
            w->nib[at] |= (uint8_t)(code << sh);
        }
        int g = n / KERN_PACK_NC, c = n % KERN_PACK_NC;
        for (int b = 0; b < nb; b++)
            w->bscale[((size_t)g * nb + b) * KERN_PACK_NC + c] =
                kern_f32_to_f16(bscale[(size_t)n * nb + b]);
    }
    return 0;
}

int kern_w4pack_init_affine(kern_w4pack *w, int N, int K, const uint8_t *U, const uint8_t *sc,
                            const uint8_t *mn, const float *d, const float *dmin, char *err,
                            size_t errlen) {
    memset(w, 0, sizeof *w);
    const int SK = KERN_W4_SUPER * KERN_PACK_KB;
    if (N < 1 || K < SK || K % SK || !U || !sc || !mn || !d || !dmin)
        return pl_errf(err, errlen, KERN_EINVAL,
                       "bad W4 weight shape %d x %d (K a multiple of 256)", N, K);
    int nb = K / KERN_PACK_KB, ns = K / SK;
    if (!kern_w4_finite(d, (size_t)N * ns) || !kern_w4_finite(dmin, (size_t)N * ns))
        return pl_errf(err, errlen, KERN_EINVAL, "W4 super-block scale not finite in fp16");
    if (kern_w4_alloc(w, KERN_W4_AFFINE, N, K) ||
        !(w->scmn = calloc((size_t)w->n_groups * nb * 2 * KERN_PACK_NC, 1)) ||
        !(w->dd = calloc((size_t)w->n_groups * ns * 2 * KERN_PACK_NC, sizeof *w->dd))) {
        kern_w4pack_free(w);
        return pl_errf(err, errlen, KERN_ENOMEM, "out of memory packing %d x %d W4 weights", N, K);
    }
    for (int n = 0; n < N; n++) {
        const uint8_t *row = U + (size_t)n * K;
        for (int k = 0; k < K; k++) {
            int sh;
            if (row[k] > 15) {
                kern_w4pack_free(w);
                return pl_errf(err, errlen, KERN_EINVAL, "W4 code [%d][%d] = %d is not 0..15", n, k,
                               row[k]);
            }
            size_t at = kern_w4_at(nb, n, k, &sh);
            w->nib[at] |= (uint8_t)(row[k] << sh);
        }
        int g = n / KERN_PACK_NC, c = n % KERN_PACK_NC;
        for (int b = 0; b < nb; b++) {
            uint8_t *p = w->scmn + ((size_t)g * nb + b) * 2 * KERN_PACK_NC;
            p[c] = sc[(size_t)n * nb + b];
            p[KERN_PACK_NC + c] = mn[(size_t)n * nb + b];
        }
        for (int s = 0; s < ns; s++) {
            uint16_t *p = w->dd + ((size_t)g * ns + s) * 2 * KERN_PACK_NC;
            p[c] = kern_f32_to_f16(d[(size_t)n * ns + s]);
            p[KERN_PACK_NC + c] = kern_f32_to_f16(dmin[(size_t)n * ns + s]);
        }
    }
    return 0;
}

void kern_w4pack_free(kern_w4pack *w) {
    free(w->nib);
    free(w->bscale);
    free(w->scmn);
    free(w->dd);
    memset(w, 0, sizeof *w);
}

size_t kern_w4pack_bytes(const kern_w4pack *w) {
    size_t gb = (size_t)w->n_groups * w->n_blocks;
    size_t n = w->nib ? gb * KERN_W4_NIB_BYTES : 0;
    if (w->bscale) n += gb * KERN_PACK_NC * sizeof *w->bscale;
    if (w->scmn) n += gb * 2 * KERN_PACK_NC;
    if (w->dd) n += gb / KERN_W4_SUPER * 2 * KERN_PACK_NC * sizeof *w->dd;
    return n;
}

/* AFFINE ws = d * sc and wm = dmin * mn of channel c of group g, block b. */
static void kern_w4_affine_scales(const kern_w4pack *w, int g, int c, int b, float *ws, float *wm) {
    int nb = w->n_blocks, ns = nb / KERN_W4_SUPER;
    const uint8_t *p = w->scmn + ((size_t)g * nb + b) * 2 * KERN_PACK_NC;
    const uint16_t *q = w->dd + ((size_t)g * ns + b / KERN_W4_SUPER) * 2 * KERN_PACK_NC;
    *ws = kern_f16_to_f32(q[c]) * (float)p[c];
    *wm = kern_f16_to_f32(q[KERN_PACK_NC + c]) * (float)p[KERN_PACK_NC + c];
}

void kern_w4pack_row_f32(const kern_w4pack *w, int n, float mul, float *out) {
    assert(n >= 0 && n < w->N);
    int g = n / KERN_PACK_NC, c = n % KERN_PACK_NC;
    for (int b = 0; b < w->n_blocks; b++) {
        if (w->kind == KERN_W4_LUT) {
            float s = kern_f16_to_f32(w->bscale[((size_t)g * w->n_blocks + b) * KERN_PACK_NC + c]);
            for (int k = b * 32; k < b * 32 + 32; k++) {
                float v = (float)w->lut[kern_w4_code(w, n, k)];
                out[k] = v * s * mul;
            }
            continue;
        }
        float ws, wm;
        kern_w4_affine_scales(w, g, c, b, &ws, &wm);
        for (int k = b * 32; k < b * 32 + 32; k++) {
            float t = ws * (float)kern_w4_code(w, n, k);
            float y = t - wm;
            out[k] = y * mul;
        }
    }
}

/* ---- reference ----------------------------------------------------------------- */

void kern_gemm_w4_affine_ref(int M, int N, int K, const int8_t *A, const float *a_scale,
                             const uint8_t *U, const uint8_t *sc, const uint8_t *mn, const float *d,
                             const float *dmin, float *C) {
    int nb = K / 32, ns = K / 256;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float acc = 0;
            for (int b = 0; b < nb; b++) {
                int32_t s = 0, as = 0;
                for (int k = b * 32; k < b * 32 + 32; k++) {
                    s += (int32_t)A[(size_t)m * K + k] * U[(size_t)n * K + k];
                    as += A[(size_t)m * K + k];
                }
                float x = a_scale[(size_t)m * nb + b];
                float ws = d[(size_t)n * ns + b / 8] * (float)sc[(size_t)n * nb + b];
                float wm = dmin[(size_t)n * ns + b / 8] * (float)mn[(size_t)n * nb + b];
                float t = (float)s * (ws * x);
                float u = (float)as * (wm * x);
                acc += t - u;
            }
            C[(size_t)m * N + n] = acc;
        }
}

/* ---- the portable tile kernel (defines the exact result) ---------------------- */

void kern_w4_tile_scalar(const kern_w4_tile *t) {
    const kern_w4pack *w = t->w;
    int nb = w->n_blocks, aff = w->kind == KERN_W4_AFFINE;
    for (int gi = 0; gi < t->ng; gi++) {
        int g = t->g0 + gi, cols = t->ncol - gi * KERN_PACK_NC;
        if (cols > KERN_PACK_NC) cols = KERN_PACK_NC;
        const uint8_t *wg = w->nib + (size_t)g * nb * KERN_W4_NIB_BYTES;
        for (int i = 0; i < t->mr; i++) {
            const int8_t *a = t->A + (size_t)i * t->lda;
            const float *as = t->a_scale + (size_t)i * t->lds;
            float f[KERN_PACK_NC] = {0};
            for (int b = 0; b < nb; b++) {
                int32_t s[KERN_PACK_NC] = {0}, asum = 0;
                const int8_t *ab = a + b * 32;
                for (int k = 0; k < 32; k++) asum += ab[k];
                for (int q = 0; q < 8; q++) {
                    const uint8_t *line = wg + (size_t)b * KERN_W4_NIB_BYTES + (q / 2) * 64;
                    int sh = 4 * (q & 1);
                    for (int c = 0; c < KERN_PACK_NC; c++)
                        for (int j = 0; j < 4; j++) {
                            int code = (line[c * 4 + j] >> sh) & 15;
                            s[c] += (int32_t)ab[q * 4 + j] * (aff ? code : w->lut[code]);
                        }
                }
                for (int c = 0; c < KERN_PACK_NC; c++) {
                    if (!aff) {
                        float bs =
                            kern_f16_to_f32(w->bscale[((size_t)g * nb + b) * KERN_PACK_NC + c]);
                        f[c] = fmaf((float)s[c], bs * as[b], f[c]);
                        continue;
                    }
                    float ws, wm;
                    kern_w4_affine_scales(w, g, c, b, &ws, &wm);
                    float t = fmaf((float)s[c], ws, -((float)asum * wm));
                    f[c] = fmaf(t, as[b], f[c]);
                }
            }
            memcpy(t->C + (size_t)i * t->ldc + (size_t)gi * KERN_PACK_NC, f,
                   (size_t)cols * sizeof(float));
        }
    }
}

/* ---- driver ------------------------------------------------------------------ */

typedef struct kern_w4_job {
    kern_gemm_job g;    /* the shared task (first: kern_gemm_job_task's argument) */
    kern_w4_tile base;  /* shared tile fields: A, lda, a_scale, lds, a_sum, w */
    kern_w4_tile_fn fn; /* tile kernel */
} kern_w4_job;

static void kern_w4_tile_at(const kern_gemm_job *g, const kern_gemm_span *sp, float *C,
                            int32_t *C32, int ldc) {
    (void)C32; /* w4 has no int32 mode */
    const kern_w4_job *j = (const kern_w4_job *)g;
    kern_w4_tile t = j->base;
    t.mr = sp->mr, t.g0 = sp->g0, t.ng = sp->ng, t.ncol = sp->ncol;
    t.A += (size_t)sp->m0 * t.lda;
    t.a_scale += (size_t)sp->m0 * t.lds;
    if (t.a_sum) t.a_sum += (size_t)sp->m0 * t.lds;
    t.C = C, t.ldc = ldc;
    j->fn(&t);
}

int kern_gemm_w4_run(kern_pool *p, kern_isa isa, const kern_gemm_act *a, const kern_w4pack *w,
                     const kern_gemm_out *out) {
    int dense = !out->rows && !out->amax;
    if (dense && !out->C) return KERN_EINVAL;
    if (a->M <= 0) return 0;
    isa = kern_gemm_level(isa);
    kern_w4_job j = {.g = {.M = a->M,
                           .n_groups = w->n_groups,
                           .N = w->N,
                           .isa = isa,
                           .out = dense ? NULL : out,
                           .C = out->C,
                           .ldc = out->ldc,
                           .tile = kern_w4_tile_at},
                     .base = {.A = a->A,
                              .lda = a->lda,
                              .a_scale = a->a_scale,
                              .lds = a->lds,
                              .a_sum = a->a_sum,
                              .w = w},
                     .fn = isa == KERN_ISA_AMX          ? kern_w4_tile_amx
                           : isa == KERN_ISA_AVX512VNNI ? kern_w4_tile_avx512vnni
                           : isa == KERN_ISA_AVX2       ? kern_w4_tile_avx2
                                                        : kern_w4_tile_scalar};
    int n_tasks = kern_gemm_split(p, a->M, w->n_groups, &j.g.n_mt, &j.g.gpt);
    kern_pool_run(p, kern_gemm_job_task, &j, n_tasks);
    return 0;
}

void kern_gemm_w4(kern_pool *p, kern_isa isa, int M, const int8_t *A, int lda, const float *a_scale,
                  int lds, const kern_w4pack *w, float *C, int ldc) {
    kern_gemm_act a = {.M = M, .A = A, .lda = lda, .a_scale = a_scale, .lds = lds};
    kern_gemm_out o = {.C = C, .ldc = ldc};
    kern_gemm_w4_run(p, isa, &a, w, &o);
}
