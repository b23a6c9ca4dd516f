/*
 * gpu_ops.c -- every op of the CUDA backend against the CPU backend (or
 * the CPU kernels) on the same random inputs.
 *
 *   gpu_ops [filter]      runs the cases whose name contains one of the
 *                         comma-separated words of filter (all without one)
 *
 * Through the backend tables (eng_backend_cpu_create vs
 * eng_backend_cuda_create, the slots forward.c calls): rmsnorm,
 * rmsnorm_heads, rope (norm, neox), glu (SiLU, GELU-tanh), add (rows and
 * the ldx-0 bias), softcap, embed (bit for bit), linear (int8: error of
 * both backends against the float GEMM of the dequantised weights, the
 * device's per-token W8A8 next to the CPU's 32-value blocks, and the
 * device's block form bit for bit equal to the CPU; fp32),
 * argmax (bit for bit, ties / NaN / -inf), kv_store (host block bytes bit
 * for bit after the write-back), attention (int8 and fp32 KV, MHA / GQA /
 * MQA, decode with key splits, prefill, sliding windows, dead blocks NULL)
 * and the device KV tier (hits, uploads, invalidation, a stale copy used
 * until invalidated, bytes re-uploaded equal bytes written on the device,
 * a tier too small for one sequence reported by the next download).
 * Through kern_cuda.h directly: per-row quantisation bit for bit against
 * kern_quantize_rows_ref, and the int8 GEMM's int32 sums exact on both
 * paths (GEMV, cuBLASLt) with the same float results bit for bit.
 * The KV cases (kv_store, attention, tier) are in gpu_ops_kv.c.
 */
#include <stdint.h>

#include "eng_backend.h"
#include "eng_config.h"
#include "eng_kv.h"
#include "gpu_common.h"
#include "gpu_ops.h"
#include "kern_cuda_fold.h"
#include "kern_gemm.h"
#include "kern_ops.h"
#include "kern_pool.h"

eng_backend g_cpu, g_gpu; /* the two backends under comparison */
static kern_pool *g_pool; /* the CPU backend's threads */
static kern_cuda *g_kc;   /* a context for the direct kernel tests */
uint64_t g_seed = 12345;  /* random stream */

/* ---- helpers ------------------------------------------------------------------------------- */

float *rnd(size_t n, float scale) {
    float *v = malloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = gpu_gauss(&g_seed) * scale;
    return v;
}

/* Backend memory holding a copy of h (n bytes; h NULL: zeros). */
void *up(eng_backend *b, const void *h, size_t n) {
    void *d = b->alloc(b->ctx, n);
    if (!d) return NULL;
    if (h) {
        b->upload(b->ctx, d, h, n);
    } else {
        void *z = calloc(1, n);
        b->upload(b->ctx, d, z, n);
        free(z);
    }
    return d;
}

void *down(eng_backend *b, const void *d, size_t n) {
    void *h = malloc(n);
    if (b->download(b->ctx, h, d, n) != 0) {
        free(h);
        return NULL;
    }
    return h;
}

void bfree(eng_backend *b, void *d) { b->free(b->ctx, d); }

/* ---- element-wise ops ------------------------------------------------------------------------- */

static int t_rmsnorm(void) {
    static const int ns[] = {640, 2048, 8192 + 7};
    for (size_t k = 0; k < 3; k++) {
        int M = 37, n = ns[k], ld = n + 8, ldy = n + 4;
        float *x = rnd((size_t)M * ld, 3), *w = rnd((size_t)n, 1);
        float *xc = up(&g_cpu, x, (size_t)M * ld * 4), *xg = up(&g_gpu, x, (size_t)M * ld * 4);
        float *wc = up(&g_cpu, w, (size_t)n * 4), *wg = up(&g_gpu, w, (size_t)n * 4);
        float *yc = up(&g_cpu, NULL, (size_t)M * ldy * 4),
              *yg = up(&g_gpu, NULL, (size_t)M * ldy * 4);
        g_cpu.rmsnorm(g_cpu.ctx, M, n, xc, ld, wc, 1e-6f, yc, ldy);
        g_gpu.rmsnorm(g_gpu.ctx, M, n, xg, ld, wg, 1e-6f, yg, ldy);
        g_cpu.rmsnorm(g_cpu.ctx, M, n, xc, ld, wc, 1e-6f, xc, ld); /* in place */
        g_gpu.rmsnorm(g_gpu.ctx, M, n, xg, ld, wg, 1e-6f, xg, ld);
        float *a = down(&g_cpu, yc, (size_t)M * ldy * 4),
              *b = down(&g_gpu, yg, (size_t)M * ldy * 4);
        float *c = down(&g_cpu, xc, (size_t)M * ld * 4), *d = down(&g_gpu, xg, (size_t)M * ld * 4);
        GPU_CHECK(a && b && c && d, "download failed");
        double e1 = gpu_max_rel(b, a, (size_t)M * ldy), e2 = gpu_max_rel(d, c, (size_t)M * ld);
        printf("    rmsnorm n %d: max rel err %.2e, in place %.2e\n", n, e1, e2);
        GPU_CHECK(e1 < 1e-5 && e2 < 1e-5, "rmsnorm n %d: %g %g", n, e1, e2);
        free(x), free(w), free(a), free(b), free(c), free(d);
        bfree(&g_cpu, xc), bfree(&g_gpu, xg), bfree(&g_cpu, wc), bfree(&g_gpu, wg);
        bfree(&g_cpu, yc), bfree(&g_gpu, yg);
    }
    return 0;
}

static int t_rmsnorm_heads(void) {
    int T = 5, nh = 8, hd = 128, ld = 11 * hd; /* Q heads, then K/V columns that must stay put */
    size_t n = (size_t)T * ld;
    float *x = rnd(n, 2), *w = rnd((size_t)hd, 1);
    float *xc = up(&g_cpu, x, n * 4), *xg = up(&g_gpu, x, n * 4);
    float *wc = up(&g_cpu, w, (size_t)hd * 4), *wg = up(&g_gpu, w, (size_t)hd * 4);
    g_cpu.rmsnorm_heads(g_cpu.ctx, T, nh, hd, xc, ld, wc, 1e-6f);
    g_gpu.rmsnorm_heads(g_gpu.ctx, T, nh, hd, xg, ld, wg, 1e-6f);
    float *a = down(&g_cpu, xc, n * 4), *b = down(&g_gpu, xg, n * 4);
    GPU_CHECK(a && b, "download failed");
    double e = gpu_max_rel(b, a, n);
    printf("    rmsnorm_heads: max rel err %.2e\n", e);
    GPU_CHECK(e < 1e-5, "err %g", e);
    for (int t = 0; t < T; t++) /* the columns past the heads are untouched */
        GPU_CHECK(!memcmp(b + (size_t)t * ld + nh * hd, x + (size_t)t * ld + nh * hd,
                          (size_t)(ld - nh * hd) * 4),
                  "token %d: columns past the heads changed", t);
    free(x), free(w), free(a), free(b);
    bfree(&g_cpu, xc), bfree(&g_gpu, xg), bfree(&g_cpu, wc), bfree(&g_gpu, wg);
    return 0;
}

static int t_rope(void) {
    int T = 9, nh = 6, hd = 128, ldx = nh * hd + 64;
    size_t n = (size_t)T * ldx;
    int32_t pos[9];
    float freq[64];
    for (int t = 0; t < T; t++) pos[t] = t < 3 ? t : (int32_t)(gpu_rand(&g_seed) % 100000);
    for (int type = ENG_ROPE_NORM; type <= ENG_ROPE_NEOX; type++) {
        double base = type == ENG_ROPE_NEOX ? 1e6 : 1e4;
        for (int i = 0; i < hd / 2; i++) freq[i] = (float)(1.0 / pow(base, 2.0 * i / hd));
        float *x = rnd(n, 1);
        float *xc = up(&g_cpu, x, n * 4), *xg = up(&g_gpu, x, n * 4);
        int32_t *pc = up(&g_cpu, pos, sizeof pos), *pg = up(&g_gpu, pos, sizeof pos);
        float *fc = up(&g_cpu, freq, sizeof freq), *fg = up(&g_gpu, freq, sizeof freq);
        g_cpu.rope(g_cpu.ctx, T, nh, hd, xc, ldx, pc, fc, type);
        g_gpu.rope(g_gpu.ctx, T, nh, hd, xg, ldx, pg, fg, type);
        float *a = down(&g_cpu, xc, n * 4), *b = down(&g_gpu, xg, n * 4);
        GPU_CHECK(a && b, "download failed");
        double e = gpu_max_rel(b, a, n);
        printf("    rope %s: max rel err %.2e\n", type == ENG_ROPE_NEOX ? "neox" : "norm", e);
        GPU_CHECK(e < 2e-5, "rope type %d: %g", type, e);
        free(x), free(a), free(b);
        bfree(&g_cpu, xc), bfree(&g_gpu, xg), bfree(&g_cpu, pc), bfree(&g_gpu, pg);
        bfree(&g_cpu, fc), bfree(&g_gpu, fg);
    }
    return 0;
}

static int t_glu(void) {
    int M = 7, F = 2000, ldgu = 2 * F + 16, ldh = F + 8;
    for (int act = ENG_GLU_SILU; act <= ENG_GLU_GELU_TANH; act++) {
        float *gu = rnd((size_t)M * ldgu, 3);
        float *gc = up(&g_cpu, gu, (size_t)M * ldgu * 4),
              *gg = up(&g_gpu, gu, (size_t)M * ldgu * 4);
        float *hc = up(&g_cpu, NULL, (size_t)M * ldh * 4),
              *hg = up(&g_gpu, NULL, (size_t)M * ldh * 4);
        g_cpu.glu(g_cpu.ctx, M, F, gc, ldgu, hc, ldh, act);
        g_gpu.glu(g_gpu.ctx, M, F, gg, ldgu, hg, ldh, act);
        float *a = down(&g_cpu, hc, (size_t)M * ldh * 4),
              *b = down(&g_gpu, hg, (size_t)M * ldh * 4);
        GPU_CHECK(a && b, "download failed");
        double e = gpu_max_rel(b, a, (size_t)M * ldh);
        printf("    glu %s: max rel err %.2e\n", act == ENG_GLU_SILU ? "silu" : "gelu-tanh", e);
        GPU_CHECK(e < 1e-5, "act %d: %g", act, e);
        free(gu), free(a), free(b);
        bfree(&g_cpu, gc), bfree(&g_gpu, gg), bfree(&g_cpu, hc), bfree(&g_gpu, hg);
    }
    return 0;
}

static int t_add_softcap(void) {
    int M = 5, n = 1000, ldy = n + 3, ldx = n + 2;
    float *y = rnd((size_t)M * ldy, 1), *x = rnd((size_t)M * ldx, 1);
    float *yc = up(&g_cpu, y, (size_t)M * ldy * 4), *yg = up(&g_gpu, y, (size_t)M * ldy * 4);
    float *xc = up(&g_cpu, x, (size_t)M * ldx * 4), *xg = up(&g_gpu, x, (size_t)M * ldx * 4);
    g_cpu.add(g_cpu.ctx, M, n, yc, ldy, xc, ldx);
    g_gpu.add(g_gpu.ctx, M, n, yg, ldy, xg, ldx);
    g_cpu.add(g_cpu.ctx, M, n, yc, ldy, xc, 0); /* one row to every row: the bias */
    g_gpu.add(g_gpu.ctx, M, n, yg, ldy, xg, 0);
    float *a = down(&g_cpu, yc, (size_t)M * ldy * 4), *b = down(&g_gpu, yg, (size_t)M * ldy * 4);
    GPU_CHECK(a && b, "download failed");
    GPU_CHECK(!memcmp(a, b, (size_t)M * ldy * 4), "add differs");
    free(a), free(b);
    size_t N = 10007;
    float *l = rnd(N, 60);
    float *lc = up(&g_cpu, l, N * 4), *lg = up(&g_gpu, l, N * 4);
    g_cpu.softcap(g_cpu.ctx, lc, N, 30.0f);
    g_gpu.softcap(g_gpu.ctx, lg, N, 30.0f);
    a = down(&g_cpu, lc, N * 4), b = down(&g_gpu, lg, N * 4);
    GPU_CHECK(a && b, "download failed");
    double e = gpu_max_rel(b, a, N);
    printf("    add: bit-exact; softcap: max rel err %.2e\n", e);
    GPU_CHECK(e < 1e-6, "softcap %g", e);
    free(y), free(x), free(l), free(a), free(b);
    bfree(&g_cpu, yc), bfree(&g_gpu, yg), bfree(&g_cpu, xc), bfree(&g_gpu, xg);
    bfree(&g_cpu, lc), bfree(&g_gpu, lg);
    return 0;
}

/* ---- weights ------------------------------------------------------------------------------ */

/* A random int8 weight of rows x cols in parts of the given formats. */
typedef struct rw {
    int rows, cols, n_parts;
    eng_wpart parts[3];
    int8_t *q;
    float *scale, *bscale, *f;
    float *deq; /* the dequantised values [rows][cols] */
} rw;

static void rw_make(rw *w, int rows, int cols, int n_parts, const eng_wfmt *fmt) {
    memset(w, 0, sizeof *w);
    w->rows = rows, w->cols = cols, w->n_parts = n_parts;
    w->q = malloc((size_t)rows * cols);
    w->scale = malloc((size_t)rows * 4);
    w->bscale = malloc((size_t)rows * (cols / 32 + 1) * 4);
    w->f = malloc((size_t)rows * cols * 4);
    w->deq = malloc((size_t)rows * cols * 4);
    for (size_t i = 0; i < (size_t)rows * cols; i++) {
        float g = gpu_gauss(&g_seed) * 40;
        w->q[i] = (int8_t)(g > 127 ? 127 : g < -127 ? -127 : (int)lrintf(g));
        w->f[i] = gpu_gauss(&g_seed) * 0.03f;
    }
    for (int r = 0; r < rows; r++) w->scale[r] = 0.0002f * (1 + (float)(gpu_rand(&g_seed) % 8));
    for (int i = 0; i < rows * (cols / 32 + 1); i++)
        w->bscale[i] = 0.0001220703125f * (float)(1 + gpu_rand(&g_seed) % 16); /* fp16 values */
    int row0 = 0;
    for (int p = 0; p < n_parts; p++) {
        int pr = p + 1 < n_parts ? rows / n_parts : rows - row0;
        eng_wpart *pt = &w->parts[p];
        *pt = (eng_wpart){.row0 = row0, .rows = pr, .fmt = fmt[p]};
        pt->q = w->q + (size_t)row0 * cols;
        pt->scale = w->scale + row0;
        pt->bscale = w->bscale + (size_t)row0 * (cols / 32);
        pt->f = w->f + (size_t)row0 * cols;
        for (int r = row0; r < row0 + pr; r++)
            for (int k = 0; k < cols; k++) {
                size_t i = (size_t)r * cols + k;
                w->deq[i] = fmt[p] == ENG_WFMT_F32 ? w->f[i]
                            : fmt[p] == ENG_WFMT_I8_ROW
                                ? (float)w->q[i] * w->scale[r]
                                : (float)w->q[i] * w->bscale[(size_t)r * (cols / 32) + k / 32];
            }
        row0 += pr;
    }
}

static void rw_free(rw *w) {
    free(w->q), free(w->scale), free(w->bscale), free(w->f), free(w->deq);
}

static int upload2(rw *w, int use, eng_bweight **c, eng_bweight **g) {
    eng_wdesc d = {.name = "test",
                   .rows = w->rows,
                   .cols = w->cols,
                   .use = use,
                   .n_parts = w->n_parts,
                   .parts = w->parts};
    char err[256];
    int rc = g_cpu.weight_upload(g_cpu.ctx, &d, 0, c, err, sizeof err);
    if (rc) printf("    cpu upload: %s\n", err);
    int rg = g_gpu.weight_upload(g_gpu.ctx, &d, 0, g, err, sizeof err);
    if (rg) printf("    cuda upload: %s\n", err);
    return rc || rg;
}

static int t_embed(void) {
    static const eng_wfmt f_row[] = {ENG_WFMT_I8_ROW, ENG_WFMT_I8_ROW};
    static const eng_wfmt f_b32[] = {ENG_WFMT_I8_B32, ENG_WFMT_I8_B32};
    static const eng_wfmt f_f32[] = {ENG_WFMT_F32};
    const eng_wfmt *fmts[] = {f_row, f_b32, f_f32};
    const char *names[] = {"I8_ROW", "I8_B32", "F32"};
    int T = 40, E = 256;
    int32_t tok[40];
    for (int t = 0; t < T; t++) tok[t] = (int32_t)(gpu_rand(&g_seed) % 300);
    tok[0] = 0, tok[1] = 299;
    for (int k = 0; k < 3; k++)
        for (int use = ENG_WUSE_EMBED; use <= (ENG_WUSE_EMBED | ENG_WUSE_LINEAR); use += 1) {
            if (!(use & ENG_WUSE_EMBED)) continue;
            rw w;
            rw_make(&w, 300, E, k == 2 ? 1 : 2, fmts[k]);
            eng_bweight *wc, *wg;
            GPU_CHECK(!upload2(&w, use, &wc, &wg), "upload");
            int32_t *tc = up(&g_cpu, tok, sizeof tok), *tg = up(&g_gpu, tok, sizeof tok);
            float *xc = up(&g_cpu, NULL, (size_t)T * (E + 8) * 4);
            float *xg = up(&g_gpu, NULL, (size_t)T * (E + 8) * 4);
            g_cpu.embed(g_cpu.ctx, wc, tc, T, 25.298221f, xc, E + 8);
            g_gpu.embed(g_gpu.ctx, wg, tg, T, 25.298221f, xg, E + 8);
            float *a = down(&g_cpu, xc, (size_t)T * (E + 8) * 4);
            float *b = down(&g_gpu, xg, (size_t)T * (E + 8) * 4);
            GPU_CHECK(a && b, "download failed");
            GPU_CHECK(!memcmp(a, b, (size_t)T * (E + 8) * 4), "embed %s use %d differs (%g)",
                      names[k], use, gpu_max_rel(b, a, (size_t)T * (E + 8)));
            printf("    embed %s%s: bit-exact\n", names[k], use & ENG_WUSE_LINEAR ? " (tied)" : "");
            free(a), free(b);
            bfree(&g_cpu, tc), bfree(&g_gpu, tg), bfree(&g_cpu, xc), bfree(&g_gpu, xg);
            g_cpu.weight_free(g_cpu.ctx, wc), g_gpu.weight_free(g_gpu.ctx, wg);
            rw_free(&w);
        }
    return 0;
}

/* Float reference C[m][n] = x[m] . deq[n] in double. */
static void ref_gemm(int M, int N, int K, const float *x, int ldx, const float *w, double *R) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double a = 0;
            for (int k = 0; k < K; k++) a += (double)x[(size_t)m * ldx + k] * w[(size_t)n * K + k];
            R[(size_t)m * N + n] = a;
        }
}

static double rel_to(const float *C, int ldc, const double *R, int M, int N) {
    double e = 0, r = 0;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            double d = C[(size_t)m * ldc + n] - R[(size_t)m * N + n];
            e += d * d;
            r += R[(size_t)m * N + n] * R[(size_t)m * N + n];
        }
    return sqrt(e / r);
}

static int t_linear(void) {
    static const eng_wfmt f_b32[] = {ENG_WFMT_I8_B32, ENG_WFMT_I8_B32};
    static const eng_wfmt f_row[] = {ENG_WFMT_I8_ROW};
    static const eng_wfmt f_f32[] = {ENG_WFMT_F32};
    static const struct {
        int N, K, parts;
        const eng_wfmt *fmt;
        const char *name;
    } ws[] = {{1536, 640, 2, f_b32, "I8_B32 1536x640"},
              {1000, 650, 1, f_row, "I8_ROW 1000x650"},
              {300, 257, 1, f_f32, "F32 300x257"}};
    static const int Ms[] = {1, 5, 8, 9, 64, 300};
    /* the block form (a backend made with PARLEY_CUDA_WEIGHTS=block) is the CPU's arithmetic */
    eng_backend gb;
    char err[256];
    setenv("PARLEY_CUDA_WEIGHTS", "block", 1);
    int brc = eng_backend_cuda_create(&gb, 0, 4, err, sizeof err);
    unsetenv("PARLEY_CUDA_WEIGHTS");
    GPU_CHECK(brc == 0, "create: %s", err);
    for (size_t wi = 0; wi < 3; wi++) {
        rw w;
        rw_make(&w, ws[wi].N, ws[wi].K, ws[wi].parts, ws[wi].fmt);
        eng_bweight *wc, *wg, *wb;
        GPU_CHECK(!upload2(&w, ENG_WUSE_LINEAR, &wc, &wg), "upload");
        eng_wdesc bd = {.name = "test",
                        .rows = w.rows,
                        .cols = w.cols,
                        .use = ENG_WUSE_LINEAR,
                        .n_parts = w.n_parts,
                        .parts = w.parts};
        GPU_CHECK(gb.weight_upload(gb.ctx, &bd, 0, &wb, err, sizeof err) == 0, "%s", err);
        for (size_t mi = 0; mi < 6; mi++) {
            int M = Ms[mi], N = w.rows, K = w.cols, ldx = K + 5, ldc = N + 3;
            float *x = rnd((size_t)M * ldx, 1);
            double *R = malloc((size_t)M * N * sizeof *R);
            ref_gemm(M, N, K, x, ldx, w.deq, R);
            size_t wsb = g_cpu.linear_ws(g_cpu.ctx, M, K), wsg = g_gpu.linear_ws(g_gpu.ctx, M, K);
            void *wsc = up(&g_cpu, NULL, wsb + 64), *wsgp = up(&g_gpu, NULL, wsg + 64);
            float *xc = up(&g_cpu, x, (size_t)M * ldx * 4),
                  *xg = up(&g_gpu, x, (size_t)M * ldx * 4);
            float *cc = up(&g_cpu, NULL, (size_t)M * ldc * 4),
                  *cg = up(&g_gpu, NULL, (size_t)M * ldc * 4);
            g_cpu.linear(g_cpu.ctx, M, xc, ldx, wc, cc, ldc, wsc);
            g_gpu.linear(g_gpu.ctx, M, xg, ldx, wg, cg, ldc, wsgp);
            float *a = down(&g_cpu, cc, (size_t)M * ldc * 4),
                  *b = down(&g_gpu, cg, (size_t)M * ldc * 4);
            GPU_CHECK(a && b, "download failed");
            void *wsb2 = up(&gb, NULL, wsg + 64);
            float *xb = up(&gb, x, (size_t)M * ldx * 4), *cb = up(&gb, NULL, (size_t)M * ldc * 4);
            gb.linear(gb.ctx, M, xb, ldx, wb, cb, ldc, wsb2);
            float *bb = down(&gb, cb, (size_t)M * ldc * 4);
            GPU_CHECK(bb, "download failed");
            double ec = rel_to(a, ldc, R, M, N), eg = rel_to(b, ldc, R, M, N);
            double eb = rel_to(bb, ldc, R, M, N);
            int same = !memcmp(a, bb, (size_t)M * ldc * 4);
            printf("    linear %s M %3d: RMS error vs float GEMM: cpu %.3f%%, cuda channel %.3f%%, "
                   "cuda block %.3f%%%s\n",
                   ws[wi].name, M, 100 * ec, 100 * eg, 100 * eb, same ? " (= cpu, bit-exact)" : "");
            GPU_CHECK(wi == 2 || same, "block form differs from the CPU (%g)",
                      gpu_max_rel(bb, a, (size_t)M * ldc));
            free(bb);
            bfree(&gb, wsb2), bfree(&gb, xb), bfree(&gb, cb);
            if (M == 64) {
                char k[64];
                snprintf(k, sizeof k, "linear_err_%s", wi == 0 ? "b32" : wi == 1 ? "row" : "f32");
                GPU_RESULT(k, "cpu=%.4f%%,cuda=%.4f%%", 100 * ec, 100 * eg);
            }
            GPU_CHECK(eg < (wi == 2 ? 1e-5 : 0.03), "error %g", eg);
            free(x), free(R), free(a), free(b);
            bfree(&g_cpu, wsc), bfree(&g_gpu, wsgp), bfree(&g_cpu, xc), bfree(&g_gpu, xg);
            bfree(&g_cpu, cc), bfree(&g_gpu, cg);
        }
        g_cpu.weight_free(g_cpu.ctx, wc), g_gpu.weight_free(g_gpu.ctx, wg);
        gb.weight_free(gb.ctx, wb);
        rw_free(&w);
    }
    eng_backend_free(&gb);
    return 0;
}

/* ---- direct kernels: quantisation and the int8 GEMM ---------------------------------------- */

static void *dup_dev(const void *h, size_t n) {
    void *d = kern_cuda_malloc(g_kc, n);
    if (d) kern_cuda_copy_sync(g_kc, d, h, n);
    return d;
}

static int t_quantize_exact(void) {
    int M = 13, K = 1000, ldq = 1008;
    float *x = rnd((size_t)M * K, 2);
    for (int k = 0; k < K; k++) x[k] = 0;                       /* a zero row */
    for (int k = 0; k < K; k++) x[K + k] = k == 5 ? 1e-38f : 0; /* 127 / max overflows */
    x[2 * K + 7] = NAN;                                         /* NaN -> -127, skipped by max */
    for (int k = 0; k < K; k++) /* max 127: inv = 1, so x.5 values are ties */
        x[3 * K + k] = k == 0 ? 127.0f : (float)(k % 250 - 125) + 0.5f;
    x[4 * K + 3] = -INFINITY;
    int8_t *qr = malloc((size_t)M * ldq), *qg = malloc((size_t)M * ldq);
    float sr[13], sg[13];
    kern_quantize_rows_ref(M, K, x, K, qr, ldq, sr);
    float *dx = dup_dev(x, (size_t)M * K * 4);
    int8_t *dq = kern_cuda_malloc(g_kc, (size_t)M * ldq);
    float *ds = kern_cuda_malloc(g_kc, sizeof sg);
    kern_cuda_memset_async(g_kc, dq, 0x55, (size_t)M * ldq); /* the pad must be zeroed */
    kern_cuda_quantize(g_kc, M, K, dx, K, dq, ldq, ds);
    kern_cuda_copy_sync(g_kc, qg, dq, (size_t)M * ldq);
    GPU_CHECK(kern_cuda_copy_sync(g_kc, sg, ds, sizeof sg) == 0, "device error");
    for (int m = 0; m < M; m++) {
        GPU_CHECK(!memcmp(&sr[m], &sg[m], 4), "row %d scale %a vs %a", m, sr[m], sg[m]);
        GPU_CHECK(!memcmp(qr + (size_t)m * ldq, qg + (size_t)m * ldq, (size_t)ldq), "row %d q", m);
    }
    printf("    quantize: %d rows bit-exact (zero, tiny, NaN, ties, -inf rows included)\n", M);
    free(x), free(qr), free(qg);
    kern_cuda_free(g_kc, dx), kern_cuda_free(g_kc, dq), kern_cuda_free(g_kc, ds);
    return 0;
}

static int t_gemm_exact(void) {
    static const int shapes[][3] = {{1, 1536, 640},  {8, 1540, 656},    {9, 1000, 2048},
                                    {64, 4096, 640}, {300, 1536, 2048}, {4, 262, 64}};
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
        int Np = kern_cuda_pad_n(N), Kp = kern_cuda_pad_k(K);
        int8_t *w = calloc((size_t)Np, (size_t)Kp), *x = calloc((size_t)M, (size_t)Kp);
        float *ws = calloc((size_t)Np, 4), *xs = malloc((size_t)M * 4);
        for (int n = 0; n < N; n++) {
            for (int k = 0; k < K; k++)
                w[(size_t)n * Kp + k] = (int8_t)(gpu_rand(&g_seed) % 255 - 127);
            ws[n] = 1e-3f * (1 + (float)(gpu_rand(&g_seed) % 100));
        }
        for (int m = 0; m < M; m++) {
            for (int k = 0; k < K; k++)
                x[(size_t)m * Kp + k] = (int8_t)(gpu_rand(&g_seed) % 255 - 127);
            xs[m] = 1e-2f * (1 + (float)(gpu_rand(&g_seed) % 100));
        }
        int32_t *S = malloc((size_t)M * Np * 4), *D = malloc((size_t)M * Np * 4);
        float *Cref = malloc((size_t)M * N * 4), *C = malloc((size_t)M * N * 4);
        for (int m = 0; m < M; m++)
            for (int n = 0; n < Np; n++) {
                int32_t a = 0;
                for (int k = 0; k < Kp; k++) a += x[(size_t)m * Kp + k] * w[(size_t)n * Kp + k];
                S[(size_t)m * Np + n] = a;
                if (n < N) Cref[(size_t)m * N + n] = (float)a * xs[m] * ws[n];
            }
        kern_cuda_w8 W = {.N = N, .K = K, .Np = Np, .Kp = Kp};
        W.q = dup_dev(w, (size_t)Np * Kp);
        W.scale = dup_dev(ws, (size_t)Np * 4);
        int8_t *dx = dup_dev(x, (size_t)M * Kp);
        float *dxs = dup_dev(xs, (size_t)M * 4);
        int32_t *dD = kern_cuda_malloc(g_kc, (size_t)M * Np * 4);
        float *dC = kern_cuda_malloc(g_kc, (size_t)M * (N + 1) * 4);
        for (int path = KERN_CUDA_GEMM_GEMV; path <= KERN_CUDA_GEMM_LT; path++) {
            int got = kern_cuda_gemm_i32(g_kc, M, dx, &W, dD, Np, path);
            GPU_CHECK(kern_cuda_copy_sync(g_kc, D, dD, (size_t)M * Np * 4) == 0, "device error");
            GPU_CHECK(!memcmp(D, S, (size_t)M * Np * 4),
                      "M %d N %d K %d path %d: int32 sums differ", M, N, K, got);
            for (int ld = N; ld <= N + 1; ld++) { /* in place (ld % 4 == 0) and through scratch */
                kern_cuda_linear_i8(g_kc, M, dx, dxs, &W, dC, ld, path);
                for (int m = 0; m < M; m++)
                    kern_cuda_copy_sync(g_kc, C + (size_t)m * N, dC + (size_t)m * ld,
                                        (size_t)N * 4);
                GPU_CHECK(kern_cuda_status(g_kc, NULL, 0) == 0, "device error");
                GPU_CHECK(!memcmp(C, Cref, (size_t)M * N * 4),
                          "M %d N %d K %d path %d ld %d: float results differ", M, N, K, got, ld);
            }
            printf("    gemm M %3d N %4d K %4d %s: int32 exact, float bit-exact%s\n", M, N, K,
                   got == KERN_CUDA_GEMM_LT ? "cuBLASLt" : "GEMV    ",
                   path == KERN_CUDA_GEMM_LT && got != path ? " (cuBLASLt refused: GEMV ran)" : "");
        }
        free(w), free(x), free(ws), free(xs), free(S), free(D), free(Cref), free(C);
        kern_cuda_free(g_kc, (void *)W.q), kern_cuda_free(g_kc, (void *)W.scale);
        kern_cuda_free(g_kc, dx), kern_cuda_free(g_kc, dxs), kern_cuda_free(g_kc, dD);
        kern_cuda_free(g_kc, dC);
    }
    kern_cuda_stats st;
    kern_cuda_get_stats(g_kc, &st);
    GPU_RESULT("gemm_lt_fallbacks", "%llu", (unsigned long long)st.lt_fallback);
    return 0;
}

static int t_argmax(void) {
    int R = 6, V = 50000, ld = V + 3;
    float *x = rnd((size_t)R * ld, 5);
    x[(size_t)1 * ld + 100] = 1e9f, x[(size_t)1 * ld + 40000] = 1e9f; /* tie: the lower index */
    x[(size_t)2 * ld + 0] = NAN, x[(size_t)2 * ld + 7] = NAN;         /* NaN loses */
    for (int i = 0; i < V; i++) x[(size_t)3 * ld + i] = NAN;          /* all NaN: 0 */
    for (int i = 0; i < V; i++) x[(size_t)4 * ld + i] = i % 2 ? -INFINITY : NAN;
    for (int i = 0; i < V; i++) x[(size_t)5 * ld + i] = -INFINITY;
    x[(size_t)5 * ld + V - 1] = -1e30f;
    float *xc = up(&g_cpu, x, (size_t)R * ld * 4), *xg = up(&g_gpu, x, (size_t)R * ld * 4);
    int32_t a[6], b[6];
    GPU_CHECK(g_cpu.argmax(g_cpu.ctx, xc, R, V, ld, a) == 0, "cpu argmax");
    GPU_CHECK(g_gpu.argmax(g_gpu.ctx, xg, R, V, ld, b) == 0, "cuda argmax");
    for (int r = 0; r < R; r++) GPU_CHECK(a[r] == b[r], "row %d: cpu %d cuda %d", r, a[r], b[r]);
    GPU_CHECK(a[1] == 100 && a[3] == 0 && a[4] == 1 && a[5] == V - 1, "reference rule");
    printf("    argmax: %d rows bit-exact (ties, NaN, -inf)\n", R);
    free(x);
    bfree(&g_cpu, xc), bfree(&g_gpu, xg);
    return 0;
}

/* KV store, attention and the device tier: gpu_ops_kv.c. */

static const gpu_case cases[] = {
    {"rmsnorm", t_rmsnorm},
    {"rmsnorm_heads", t_rmsnorm_heads},
    {"rope", t_rope},
    {"glu", t_glu},
    {"add_softcap", t_add_softcap},
    {"embed", t_embed},
    {"quantize_exact", t_quantize_exact},
    {"gemm_exact", t_gemm_exact},
    {"linear", t_linear},
    {"argmax", t_argmax},
    {"kv_store_exact", t_kv_store_exact},
    {"attention", t_attention},
    {"tier", t_tier},
    {"tier_small", t_tier_small},
};

int main(int argc, char **argv) {
    char err[256];
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (kern_cuda_device_count() <= 0) {
        printf("gpu_ops: no CUDA device: skipped\n");
        return 77;
    }
    if (kern_pool_create(8, &g_pool) != 0 ||
        eng_backend_cpu_create(&g_cpu, g_pool, err, sizeof err) ||
        eng_backend_cuda_create(&g_gpu, 0, 4, err, sizeof err) ||
        kern_cuda_open(&g_kc, 0, err, sizeof err)) {
        printf("gpu_ops: setup failed: %s\n", err);
        return 1;
    }
    kern_cuda_info info;
    gpu_peaks pk;
    kern_cuda_get_info(g_kc, &info);
    gpu_peaks_of(&info, &pk);
    gpu_print_device(&info, &pk);
    int rc =
        gpu_run(cases, (int)(sizeof cases / sizeof cases[0]), argc > 1 ? argv[1] : NULL, "gpu_ops");
    char msg[256];
    float probe;
    void *p = g_gpu.alloc(g_gpu.ctx, 64);
    if (g_gpu.download(g_gpu.ctx, &probe, p, 4) != 0 || kern_cuda_status(g_kc, msg, sizeof msg)) {
        printf("gpu_ops: device error at the end\n");
        rc = 1;
    }
    g_gpu.free(g_gpu.ctx, p);
    eng_backend_free(&g_gpu);
    eng_backend_free(&g_cpu);
    kern_cuda_close(g_kc);
    kern_pool_destroy(g_pool);
    return rc;
}
