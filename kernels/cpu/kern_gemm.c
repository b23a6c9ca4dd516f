/*
 * kern_gemm.c -- the int8 (W8A8) GEMM: scalar references, weight packing,
 * the portable tile kernel and the threaded driver (contracts and the
 * packed layout in kern_gemm.h; the tile interface in kern_gemm_int.h).
 *
 * The driver cuts C into tasks of up to KERN_TILE_M rows x a few 16-channel
 * groups.  The group count per task is chosen so that every thread gets
 * several tasks (an M = 1 decode GEMM of 2048 channels is 128 groups, i.e.
 * dozens of tasks, so both cores stream weights), capped so one task's
 * weights stay cache-sized for prefill.  Tasks are ordered group-major:
 * consecutive tasks (claimed by different threads) share weight groups.
 *
 * The ISA tile kernels live in kern_gemm_avx2.c, kern_gemm_avx512.c and
 * kern_gemm_amx.c; this file's scalar kernel defines the exact result every
 * one of them must reproduce.
 */
#include "kern_gemm_int.h"
#include "kern_ops.h"
#include "pl_err.h"

#include <assert.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* ---- references ------------------------------------------------------------ */

void kern_gemm_i8_ref(int M, int N, int K, const int8_t *A, const int8_t *W, int32_t *C) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            int32_t s = 0;
            for (int k = 0; k < K; k++) s += (int32_t)A[(size_t)m * K + k] * W[(size_t)n * K + k];
            C[(size_t)m * N + n] = s;
        }
}

void kern_gemm_i8_bs_ref(int M, int N, int K, const int8_t *A, const float *a_scale,
                         const int8_t *W, const float *bscale, float *C) {
    int nb = K / 32;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float acc = 0;
            for (int b = 0; b < nb; b++) {
                int32_t s = 0;
                for (int k = b * 32; k < b * 32 + 32; k++)
                    s += (int32_t)A[(size_t)m * K + k] * W[(size_t)n * K + k];
                acc += (float)s * (bscale[(size_t)n * nb + b] * a_scale[(size_t)m * nb + b]);
            }
            C[(size_t)m * N + n] = acc;
        }
}

void kern_gemm_i8_pc_ref(int M, int N, int K, const int8_t *A, const float *a_scale,
                         const int8_t *W, const float *scale, float *C) {
    int nb = (K + 31) / 32;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float acc = 0;
            for (int b = 0; b < nb; b++) {
                int32_t s = 0;
                for (int k = b * 32; k < b * 32 + 32 && k < K; k++)
                    s += (int32_t)A[(size_t)m * K + k] * W[(size_t)n * K + k];
                acc += (float)s * a_scale[(size_t)m * nb + b];
            }
            C[(size_t)m * N + n] = acc * scale[n];
        }
}

/* ---- fp16 ------------------------------------------------------------------ */

float kern_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0x1f) {
        bits = sign | 0x7f800000u | man << 13; /* inf / nan */
    } else if (exp == 0) {
        float f = ldexpf((float)man, -24); /* zero / subnormal: exact */
        return sign ? -f : f;
    } else {
        bits = sign | (exp + 112) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

uint16_t kern_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, sizeof x);
    uint16_t sign = (uint16_t)(x >> 16 & 0x8000);
    uint32_t ax = x & 0x7fffffffu;
    if (ax >= 0x7f800000u) return (uint16_t)(sign | 0x7c00 | (ax > 0x7f800000u ? 0x200 : 0));
    if (ax >= 0x477ff000u) return (uint16_t)(sign | 0x7c00); /* rounds past 65504: inf */
    if (ax < 0x38800000u) {                                  /* below 2^-14: subnormal */
        float a;
        memcpy(&a, &ax, sizeof a);
        return (uint16_t)(sign | (uint16_t)nearbyintf(a * 16777216.0f)); /* units of 2^-24 */
    }
    uint32_t r = ax + 0xfff + (ax >> 13 & 1); /* round to nearest even on the 13 dropped bits */
    return (uint16_t)(sign | ((r - 0x38000000u) >> 13));
}

/* ---- packing ----------------------------------------------------------------- */

void *kern_huge_alloc(size_t bytes) {
    const size_t huge = (size_t)2 << 20;
    if (bytes < huge) return aligned_alloc(64, (bytes + 63) / 64 * 64);
    size_t n = (bytes + huge - 1) / huge * huge;
    void *p = aligned_alloc(huge, n);
#ifdef MADV_HUGEPAGE
    if (p) (void)madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
}

int kern_wpack_init(kern_wpack *w, int N, int K, const int8_t *W, const float *scale,
                    const float *bscale, char *err, size_t errlen) {
    memset(w, 0, sizeof *w);
    if (N < 1 || K < 1 || !W || !scale == !bscale || (bscale && K % KERN_PACK_KB)) {
        return pl_errf(err, errlen, KERN_EINVAL, "bad weight shape %d x %d or scales", N, K);
    }
    int Kp = (K + KERN_PACK_KB - 1) / KERN_PACK_KB * KERN_PACK_KB;
    int G = (N + KERN_PACK_NC - 1) / KERN_PACK_NC, nb = Kp / KERN_PACK_KB;
    size_t qbytes = (size_t)G * nb * KERN_PACK_BLOCK_BYTES;
    w->q8 = kern_huge_alloc(qbytes);
    if (bscale) w->bscale = calloc((size_t)G * nb * KERN_PACK_NC, sizeof *w->bscale);
    else w->scale = calloc((size_t)G * KERN_PACK_NC, sizeof *w->scale);
    if (!w->q8 || (!w->bscale && !w->scale)) {
        kern_wpack_free(w);
        return pl_errf(err, errlen, KERN_ENOMEM, "out of memory packing %d x %d weights", N, K);
    }
    memset(w->q8, 0, qbytes);
    w->N = N, w->K = K, w->Kp = Kp, w->n_groups = G, w->n_blocks = nb;
    for (int n = 0; n < N; n++) {
        int g = n / KERN_PACK_NC, c = n % KERN_PACK_NC;
        const int8_t *row = W + (size_t)n * K;
        int8_t *dst = w->q8 + (size_t)g * nb * KERN_PACK_BLOCK_BYTES + (size_t)c * 4;
        for (int k = 0; k < K; k += 4) /* quad k/4 of the row: line k/4 of the group */
            memcpy(dst + (size_t)(k / 4) * 64, row + k, (size_t)(K - k < 4 ? K - k : 4));
        if (scale) {
            w->scale[n] = scale[n];
        } else {
            for (int b = 0; b < nb; b++)
                w->bscale[((size_t)g * nb + b) * KERN_PACK_NC + c] =
                    kern_f32_to_f16(bscale[(size_t)n * nb + b]);
        }
    }
    return 0;
}

void kern_wpack_free(kern_wpack *w) {
    free(w->q8);
    free(w->bscale);
    free(w->scale);
    memset(w, 0, sizeof *w);
}

void kern_wpack_row_f32(const kern_wpack *w, int n, float mul, float *out) {
    assert(n >= 0 && n < w->N);
    int g = n / KERN_PACK_NC, c = n % KERN_PACK_NC;
    for (int b = 0; b < w->n_blocks; b++) {
        const int8_t *blk = w->q8 + ((size_t)g * w->n_blocks + b) * KERN_PACK_BLOCK_BYTES;
        float s = w->bscale
                      ? kern_f16_to_f32(w->bscale[((size_t)g * w->n_blocks + b) * KERN_PACK_NC + c])
                      : w->scale[n] * mul;
        for (int k = b * 32; k < b * 32 + 32 && k < w->K; k++) {
            float v = (float)blk[((k % 32) / 4) * 64 + c * 4 + k % 4];
            out[k] = w->bscale ? v * s * mul : v * s;
        }
    }
}

size_t kern_wpack_bytes(const kern_wpack *w) {
    size_t n = (size_t)w->n_groups * w->n_blocks * KERN_PACK_BLOCK_BYTES;
    if (w->bscale) n += (size_t)w->n_groups * w->n_blocks * KERN_PACK_NC * sizeof *w->bscale;
    if (w->scale) n += (size_t)w->n_groups * KERN_PACK_NC * sizeof *w->scale;
    return n;
}

/* ---- the portable tile kernel (defines the exact result) ---------------------- */

void kern_q8_tile_scalar(const kern_q8_tile *t) {
    const kern_wpack *w = t->w;
    int nb = w->n_blocks;
    for (int gi = 0; gi < t->ng; gi++) {
        int g = t->g0 + gi, cols = t->ncol - gi * KERN_PACK_NC;
        if (cols > KERN_PACK_NC) cols = KERN_PACK_NC;
        const int8_t *wg = w->q8 + (size_t)g * nb * KERN_PACK_BLOCK_BYTES;
        for (int i = 0; i < t->mr; i++) {
            const int8_t *a = t->A + (size_t)i * t->lda;
            const float *as = t->C32 ? NULL : t->a_scale + (size_t)i * t->lds;
            int32_t tot[KERN_PACK_NC] = {0};
            float f[KERN_PACK_NC] = {0};
            for (int b = 0; b < nb; b++) {
                int32_t s[KERN_PACK_NC] = {0};
                const int8_t *wb = wg + (size_t)b * KERN_PACK_BLOCK_BYTES;
                for (int q = 0; q < 8; q++)
                    for (int c = 0; c < KERN_PACK_NC; c++)
                        for (int j = 0; j < 4; j++)
                            s[c] += (int32_t)a[b * 32 + q * 4 + j] * wb[q * 64 + c * 4 + j];
                for (int c = 0; c < KERN_PACK_NC; c++) {
                    tot[c] += s[c];
                    if (!as) continue;
                    float sc = as[b];
                    if (w->bscale)
                        sc = kern_f16_to_f32(w->bscale[((size_t)g * nb + b) * KERN_PACK_NC + c]) *
                             sc;
                    f[c] = fmaf((float)s[c], sc, f[c]);
                }
            }
            for (int c = 0; c < cols; c++) {
                size_t o = (size_t)i * t->ldc + (size_t)gi * KERN_PACK_NC + c;
                if (t->C32) t->C32[o] = tot[c];
                else if (w->bscale) t->C[o] = f[c];
                else t->C[o] = f[c] * w->scale[g * KERN_PACK_NC + c];
            }
        }
    }
}

/* ---- outputs ------------------------------------------------------------------ */

uint64_t kern_amax_key(float v, int32_t idx) {
    uint32_t u;
    if (v != v) v = -INFINITY; /* NaN counts as -inf */
    v += 0.0f;                 /* -0 -> +0: they compare equal */
    memcpy(&u, &v, sizeof u);
    u = u >> 31 ? ~u : u | 0x80000000u; /* ascending in v; -inf's is above 0 */
    return (uint64_t)u << 32 | (uint32_t) ~(uint32_t)idx;
}

int32_t kern_amax_key_index(uint64_t key) { return key ? (int32_t) ~(uint32_t)key : 0; }

void kern_gemm_out_tile(const kern_gemm_out *out, kern_isa isa, int m0, int mr, int n0, int ncol,
                        const float *buf, int ldb) {
    for (int i = 0; i < mr; i++) {
        const float *src = buf + (size_t)i * ldb;
        if (out->rows && out->rows[m0 + i])
            memcpy(out->rows[m0 + i] + out->col0 + n0, src, (size_t)ncol * sizeof(float));
        if (!out->amax) continue;
        int j = kern_argmax(isa, src, ncol);
        uint64_t key = kern_amax_key(src[j], out->col0 + n0 + j);
        uint64_t *dst = out->amax + m0 + i, cur = __atomic_load_n(dst, __ATOMIC_RELAXED);
        while (key > cur && !__atomic_compare_exchange_n(dst, &cur, key, 1, __ATOMIC_RELAXED,
                                                         __ATOMIC_RELAXED)) {
        }
    }
}

/* ---- driver ------------------------------------------------------------------ */

void kern_gemm_job_task(void *arg, int task, int thread) {
    (void)thread;
    const kern_gemm_job *j = arg;
    kern_gemm_span sp = kern_gemm_task_span(task, j->n_mt, j->gpt, j->M, j->n_groups, j->N);
    if (j->out) { /* into a tile buffer, then where the caller wants it */
        _Alignas(64) float buf[KERN_TILE_M * KERN_GEMM_MAX_GPT * KERN_PACK_NC];
        int ldb = sp.ng * KERN_PACK_NC;
        j->tile(j, &sp, buf, NULL, ldb);
        kern_gemm_out_tile(j->out, j->isa, sp.m0, sp.mr, sp.g0 * KERN_PACK_NC, sp.ncol, buf, ldb);
        return;
    }
    size_t off = (size_t)sp.m0 * j->ldc + (size_t)sp.g0 * KERN_PACK_NC;
    if (j->C32) j->tile(j, &sp, NULL, j->C32 + off, j->ldc);
    else j->tile(j, &sp, j->C + off, NULL, j->ldc);
}

typedef struct kern_q8_job {
    kern_gemm_job g;    /* the shared task (first: kern_gemm_job_task's argument) */
    kern_q8_tile base;  /* shared tile fields: A, lda, a_scale, lds, a_sum, w */
    kern_q8_tile_fn fn; /* tile kernel */
} kern_q8_job;

static void kern_q8_tile_at(const kern_gemm_job *g, const kern_gemm_span *sp, float *C,
                            int32_t *C32, int ldc) {
    const kern_q8_job *j = (const kern_q8_job *)g;
    kern_q8_tile t = j->base;
    t.mr = sp->mr, t.g0 = sp->g0, t.ng = sp->ng, t.ncol = sp->ncol;
    t.A += (size_t)sp->m0 * t.lda;
    if (t.a_scale) t.a_scale += (size_t)sp->m0 * t.lds;
    if (t.a_sum) t.a_sum += (size_t)sp->m0 * t.lds;
    t.C = C, t.C32 = C32, t.ldc = ldc;
    j->fn(&t);
}

kern_isa kern_gemm_level(kern_isa isa) {
    kern_isa best = kern_isa_best();
    return isa > best ? best : isa;
}

static kern_q8_tile_fn kern_q8_pick(kern_isa isa) {
    switch (kern_gemm_level(isa)) {
    case KERN_ISA_AMX: return kern_q8_tile_amx;
    case KERN_ISA_AVX512VNNI: return kern_q8_tile_avx512vnni;
    case KERN_ISA_AVX2: return kern_q8_tile_avx2;
    default: return kern_q8_tile_scalar;
    }
}

kern_gemm_span kern_gemm_task_span(int task, int n_mt, int gpt, int M, int n_groups, int N) {
    kern_gemm_span s;
    s.m0 = task % n_mt * KERN_TILE_M;
    s.mr = M - s.m0 < KERN_TILE_M ? M - s.m0 : KERN_TILE_M;
    s.g0 = task / n_mt * gpt;
    s.ng = n_groups - s.g0 < gpt ? n_groups - s.g0 : gpt;
    s.ncol = N - s.g0 * KERN_PACK_NC;
    if (s.ncol > s.ng * KERN_PACK_NC) s.ncol = s.ng * KERN_PACK_NC;
    return s;
}

int kern_gemm_split(const kern_pool *p, int M, int n_groups, int *n_mt, int *gpt) {
    *n_mt = (M + KERN_TILE_M - 1) / KERN_TILE_M;
    /* about 8 tasks per thread, 1..KERN_GEMM_MAX_GPT groups (128 channels) each */
    int threads = p ? kern_pool_size(p) : 1;
    long want = 8L * threads;
    long g = ((long)n_groups * *n_mt + want - 1) / want;
    *gpt = g < 1 ? 1 : g > KERN_GEMM_MAX_GPT ? KERN_GEMM_MAX_GPT : (int)g;
    return (n_groups + *gpt - 1) / *gpt * *n_mt;
}

static void kern_q8_launch(kern_pool *p, kern_isa isa, int M, kern_q8_job *j) {
    if (M <= 0) return;
    j->g.M = M;
    j->g.isa = kern_gemm_level(isa);
    j->g.n_groups = j->base.w->n_groups;
    j->g.N = j->base.w->N;
    j->g.tile = kern_q8_tile_at;
    j->fn = kern_q8_pick(isa);
    int n_tasks = kern_gemm_split(p, M, j->g.n_groups, &j->g.n_mt, &j->g.gpt);
    kern_pool_run(p, kern_gemm_job_task, j, n_tasks);
}

int kern_gemm_q8_run(kern_pool *p, kern_isa isa, const kern_gemm_act *a, const kern_wpack *w,
                     const kern_gemm_out *out) {
    int dense = !out->rows && !out->amax;
    if (dense && !out->C) return KERN_EINVAL;
    kern_q8_job j = {.g = {.out = dense ? NULL : out, .C = out->C, .ldc = out->ldc},
                     .base = {.A = a->A,
                              .lda = a->lda,
                              .a_scale = a->a_scale,
                              .lds = a->lds,
                              .a_sum = a->a_sum,
                              .w = w}};
    kern_q8_launch(p, isa, a->M, &j);
    return 0;
}

void kern_gemm_q8(kern_pool *p, kern_isa isa, int M, const int8_t *A, int lda, const float *a_scale,
                  int lds, const kern_wpack *w, float *C, int ldc) {
    kern_gemm_act a = {.M = M, .A = A, .lda = lda, .a_scale = a_scale, .lds = lds};
    kern_gemm_out o = {.C = C, .ldc = ldc};
    kern_gemm_q8_run(p, isa, &a, w, &o);
}

void kern_gemm_q8_i32(kern_pool *p, kern_isa isa, int M, const int8_t *A, int lda,
                      const kern_wpack *w, int32_t *C, int ldc) {
    kern_q8_job j = {.g = {.C32 = C, .ldc = ldc}, .base = {.A = A, .lda = lda, .w = w}};
    kern_q8_launch(p, isa, M, &j);
}
