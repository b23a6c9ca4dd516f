/*
 * kern_cuda_emu.c -- a CPU emulation of kern_cuda.h, for testing the CUDA
 * backend's host side (engine/backend/backend_cuda*.c) and the GPU test
 * programs (tests/gpu) on machines without a GPU.
 *
 * Purpose.  The CUDA backend is mostly host logic around the launchers:
 * staging arenas and their flush, the device KV tier, the write-back of
 * KV rows, attention descriptors and block tables, weight folding and
 * padding, the in-place GEMM output.  Linked in place of the real
 * kernels/cuda (parley_engine_cudaemu, tests/backend/CMakeLists.txt), the
 * backend and tests/gpu/gpu_ops.c / gpu_model.c run unchanged here, in the
 * ASan build.
 *
 * Fidelity.  "Device memory" is host memory, but every allocation is
 * registered and each launcher checks that the pointers it is handed lie
 * in device memory (or mapped pinned memory where kernels may write), and
 * asynchronous copies that their host side is pinned: handing a kernel a
 * host block instead of its device copy fails here as it would on a GPU.
 * The kernels are C mirrors of the .cu files' arithmetic and work split
 * (the same plan, key chunks and splits, combine formula, quantisation
 * rule, dequantisation order), run in stream order at launch.  The device
 * code itself (indexing inside a thread block, shared memory, shuffles) is
 * not exercised: tests/gpu on a GPU covers it.
 *
 * Threading: one global mutex around the registry; contexts are used
 * under the backend's own mutex as on the GPU.
 */
#include <math.h>
#include <float.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kern_cuda.h"

/* ---- allocation registry --------------------------------------------------------------------- */

enum { EMU_DEV = 1, EMU_PINNED = 2, EMU_MAPPED = 3 };

typedef struct emu_alloc {
    uintptr_t base;
    size_t size;
    int kind;
} emu_alloc;

static emu_alloc *g_allocs;
static size_t g_n, g_cap;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;

static void reg_add(void *p, size_t n, int kind) {
    pthread_mutex_lock(&g_mu);
    if (g_n == g_cap) {
        g_cap = g_cap ? 2 * g_cap : 256;
        g_allocs = realloc(g_allocs, g_cap * sizeof *g_allocs);
    }
    size_t i = g_n;
    while (i > 0 && g_allocs[i - 1].base > (uintptr_t)p) i--;
    memmove(g_allocs + i + 1, g_allocs + i, (g_n - i) * sizeof *g_allocs);
    g_allocs[i] = (emu_alloc){(uintptr_t)p, n, kind};
    g_n++;
    pthread_mutex_unlock(&g_mu);
}

/* Kind of the allocation holding [p, p + n), 0 if none. */
static int reg_kind(const void *p, size_t n) {
    uintptr_t a = (uintptr_t)p;
    int kind = 0;
    pthread_mutex_lock(&g_mu);
    size_t lo = 0, hi = g_n;
    while (lo < hi) { /* first entry with base > a */
        size_t mid = (lo + hi) / 2;
        if (g_allocs[mid].base <= a) lo = mid + 1;
        else hi = mid;
    }
    if (lo > 0) {
        const emu_alloc *e = &g_allocs[lo - 1];
        if (a >= e->base && a + n <= e->base + e->size) kind = e->kind;
    }
    pthread_mutex_unlock(&g_mu);
    return kind;
}

static int reg_del(void *p, int kind) {
    int ok = 0;
    pthread_mutex_lock(&g_mu);
    for (size_t i = 0; i < g_n; i++)
        if (g_allocs[i].base == (uintptr_t)p &&
            (g_allocs[i].kind == kind || (kind == EMU_PINNED && g_allocs[i].kind == EMU_MAPPED))) {
            memmove(g_allocs + i, g_allocs + i + 1, (g_n - i - 1) * sizeof *g_allocs);
            g_n--;
            ok = 1;
            break;
        }
    pthread_mutex_unlock(&g_mu);
    return ok;
}

/* ---- context ------------------------------------------------------------------------------ */

struct kern_cuda {
    int status;
    char msg[256];
    kern_cuda_info info;
    kern_cuda_stats st;
};

void kern_cuda_fail(kern_cuda *c, int code, const char *fmt, ...) {
    if (c->status) return;
    c->status = code < 0 ? code : KERN_CUDA_EFAIL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->msg, sizeof c->msg, fmt, ap);
    va_end(ap);
}

/* Check that a kernel argument is device memory (mapped pinned allowed where writable). */
static int dev_ok(kern_cuda *c, const void *p, size_t n, const char *what, int mapped_ok) {
    if (!n) return 1;
    int k = reg_kind(p, n);
    if (k == EMU_DEV || (mapped_ok && k == EMU_MAPPED)) return 1;
    kern_cuda_fail(c, KERN_CUDA_EFAIL, "emu: %s (%p, %zu bytes) is not device memory%s", what, p, n,
                   k ? " (pinned host memory)" : "");
    return 0;
}

int kern_cuda_device_count(void) { return 1; }

int kern_cuda_open(kern_cuda **out, int device, char *err, size_t errlen) {
    if (device != 0) {
        if (err && errlen) snprintf(err, errlen, "CUDA device %d: only 1 present", device);
        return KERN_CUDA_ENODEV;
    }
    kern_cuda *c = calloc(1, sizeof *c);
    if (!c) return KERN_CUDA_ENOMEM;
    snprintf(c->info.name, sizeof c->info.name, "parley CPU emulation");
    c->info.cc_major = 9;
    c->info.n_sm = 132;
    c->info.clock_khz = 1980000;
    c->info.mem_clock_khz = 2619000;
    c->info.bus_bits = 6144;
    c->info.mem_total = c->info.mem_free = (size_t)8 << 30;
    *out = c;
    return 0;
}

void kern_cuda_close(kern_cuda *c) { free(c); }
void kern_cuda_get_info(kern_cuda *c, kern_cuda_info *out) { *out = c->info; }
void kern_cuda_get_stats(const kern_cuda *c, kern_cuda_stats *out) { *out = c->st; }
void kern_cuda_bind(kern_cuda *c) { (void)c; }

int kern_cuda_status(const kern_cuda *c, char *err, size_t errlen) {
    if (c->status && err && errlen) snprintf(err, errlen, "%s", c->msg);
    return c->status;
}

void *kern_cuda_malloc(kern_cuda *c, size_t bytes) {
    (void)c;
    size_t n = ((bytes ? bytes : 1) + 255) / 256 * 256;
    void *p = aligned_alloc(256, n);
    if (p) {
        memset(p, 0xA5, n); /* cudaMalloc does not clear */
        reg_add(p, n, EMU_DEV);
    }
    return p;
}

void kern_cuda_free(kern_cuda *c, void *p) {
    if (!p) return;
    if (!reg_del(p, EMU_DEV)) kern_cuda_fail(c, KERN_CUDA_EFAIL, "emu: cudaFree of %p", p);
    else free(p);
}

void *kern_cuda_host_alloc(kern_cuda *c, size_t bytes, int mapped) {
    (void)c;
    size_t n = ((bytes ? bytes : 1) + 63) / 64 * 64;
    void *p = aligned_alloc(64, n);
    if (p) reg_add(p, n, mapped ? EMU_MAPPED : EMU_PINNED);
    return p;
}

void kern_cuda_host_free(kern_cuda *c, void *p) {
    if (!p) return;
    if (!reg_del(p, EMU_PINNED)) kern_cuda_fail(c, KERN_CUDA_EFAIL, "emu: cudaFreeHost of %p", p);
    else free(p);
}

void *kern_cuda_host_dev(kern_cuda *c, void *host) {
    (void)c;
    return reg_kind(host, 1) == EMU_MAPPED ? host : NULL;
}

void kern_cuda_copy_async(kern_cuda *c, void *dst, const void *src, size_t n) {
    if (!n || c->status) return;
    int kd = reg_kind(dst, n), ks = reg_kind(src, n);
    if (!kd || !ks) { /* pageable: cudaMemcpyAsync would run synchronously */
        kern_cuda_fail(c, KERN_CUDA_EFAIL,
                       "emu: async copy %p <- %p (%zu bytes) with pageable memory", dst, src, n);
        return;
    }
    memmove(dst, src, n);
}

int kern_cuda_copy_sync(kern_cuda *c, void *dst, const void *src, size_t n) {
    if (n && !c->status) {
        if (!reg_kind(dst, n) && !reg_kind(src, n))
            kern_cuda_fail(c, KERN_CUDA_EFAIL, "emu: copy between two host buffers");
        else memmove(dst, src, n);
    }
    return c->status;
}

void kern_cuda_memset_async(kern_cuda *c, void *dst, int value, size_t n) {
    if (!n || c->status || !dev_ok(c, dst, n, "memset", 0)) return;
    memset(dst, value, n);
}

int kern_cuda_sync(kern_cuda *c) { return c->status; }

/* ---- element-wise ops ------------------------------------------------------------------------ */

void kern_cuda_rmsnorm(kern_cuda *c, int rows, int per, int n, const float *x, int ld, int inner,
                       const float *w, float eps, float *y, int ldy) {
    if (rows <= 0 || n <= 0 || c->status) return;
    if (per < 1) per = 1;
    size_t span = (size_t)((rows - 1) / per) * ld + (size_t)((rows - 1) % per) * inner + n;
    size_t spany = (size_t)((rows - 1) / per) * ldy + (size_t)((rows - 1) % per) * inner + n;
    if (!dev_ok(c, x, span * 4, "rmsnorm x", 0) || !dev_ok(c, y, spany * 4, "rmsnorm y", 0) ||
        !dev_ok(c, w, (size_t)n * 4, "rmsnorm w", 0))
        return;
    for (int r = 0; r < rows; r++) {
        const float *xr = x + (size_t)(r / per) * ld + (size_t)(r % per) * inner;
        float *yr = y + (size_t)(r / per) * ldy + (size_t)(r % per) * inner;
        double ss = 0;
        for (int i = 0; i < n; i++) ss += (double)xr[i] * xr[i];
        float inv = 1.0f / sqrtf((float)(ss / n) + eps);
        for (int i = 0; i < n; i++) yr[i] = xr[i] * inv * w[i];
    }
}

void kern_cuda_rope(kern_cuda *c, int n_tok, int n_head, int hd, float *x, int ldx,
                    const int32_t *pos, const float *inv_freq, int neox) {
    if (n_tok <= 0 || n_head <= 0 || hd < 2 || c->status) return;
    if (!dev_ok(c, x, ((size_t)(n_tok - 1) * ldx + (size_t)n_head * hd) * 4, "rope x", 0) ||
        !dev_ok(c, pos, (size_t)n_tok * 4, "rope pos", 0) ||
        !dev_ok(c, inv_freq, (size_t)hd / 2 * 4, "rope freq", 0))
        return;
    int half = hd / 2;
    for (int t = 0; t < n_tok; t++)
        for (int i = 0; i < half; i++) {
            float ang = (float)pos[t] * inv_freq[i], s = sinf(ang), co = cosf(ang);
            int a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
            for (int h = 0; h < n_head; h++) {
                float *v = x + (size_t)t * ldx + (size_t)h * hd, x0 = v[a], x1 = v[b];
                v[a] = x0 * co - x1 * s;
                v[b] = x0 * s + x1 * co;
            }
        }
}

void kern_cuda_glu(kern_cuda *c, int M, int F, const float *gu, int ldgu, float *h, int ldh,
                   int gelu) {
    if (M <= 0 || F <= 0 || c->status) return;
    if (!dev_ok(c, gu, ((size_t)(M - 1) * ldgu + 2 * (size_t)F) * 4, "glu gu", 0) ||
        !dev_ok(c, h, ((size_t)(M - 1) * ldh + F) * 4, "glu h", 0))
        return;
    for (int m = 0; m < M; m++)
        for (int i = 0; i < F; i++) {
            float g = gu[(size_t)m * ldgu + i], u = gu[(size_t)m * ldgu + F + i], a;
            if (gelu) {
                float y = 0.7978845608028654f * (g + 0.044715f * g * g * g);
                a = g / (1.0f + expf(-2.0f * y));
            } else {
                a = g / (1.0f + expf(-g));
            }
            h[(size_t)m * ldh + i] = a * u;
        }
}

void kern_cuda_add(kern_cuda *c, int M, int n, float *y, int ldy, const float *x, int ldx) {
    if (M <= 0 || n <= 0 || c->status) return;
    if (!dev_ok(c, y, ((size_t)(M - 1) * ldy + n) * 4, "add y", 0) ||
        !dev_ok(c, x, ((size_t)(M - 1) * ldx + n) * 4, "add x", 0))
        return;
    for (int m = 0; m < M; m++)
        for (int i = 0; i < n; i++) y[(size_t)m * ldy + i] += x[(size_t)m * ldx + i];
}

void kern_cuda_softcap(kern_cuda *c, float *x, size_t n, float cap) {
    if (!n || c->status || !dev_ok(c, x, n * 4, "softcap", 0)) return;
    for (size_t i = 0; i < n; i++) x[i] = tanhf(x[i] / cap) * cap;
}

void kern_cuda_embed(kern_cuda *c, const kern_cuda_etab *e, const int32_t *tok, int T, float mul,
                     float *x, int ldx) {
    if (T <= 0 || c->status) return;
    size_t tab = (size_t)e->rows * e->cols;
    if (!dev_ok(c, tok, (size_t)T * 4, "embed tok", 0) ||
        !dev_ok(c, x, ((size_t)(T - 1) * ldx + e->cols) * 4, "embed x", 0) ||
        (e->q ? !dev_ok(c, e->q, tab, "embed q", 0) ||
                    !dev_ok(c, e->scale, tab / e->group * 4, "embed scale", 0)
              : !dev_ok(c, e->f, tab * 4, "embed f", 0)))
        return;
    for (int t = 0; t < T; t++)
        for (int k = 0; k < e->cols; k++) {
            int row = tok[t];
            float v = 0;
            if (row >= 0 && row < e->rows) {
                size_t at = (size_t)row * e->cols + k;
                if (!e->q) v = e->f[at] * mul;
                else if (e->group == e->cols) v = (float)e->q[at] * (e->scale[row] * mul);
                else
                    v = (float)e->q[at] *
                        e->scale[(size_t)row * (e->cols / e->group) + k / e->group] * mul;
            }
            x[(size_t)t * ldx + k] = v;
        }
}

/* The quantiser of kc_quantize_kernel / kc_quant_group (n values, stride 1). */
static float quant(const float *x, int n, int8_t *q) {
    float amax = 0;
    for (int k = 0; k < n; k++) amax = fmaxf(amax, fabsf(x[k]));
    float inv = 127.0f / amax;
    int zero = !(inv <= FLT_MAX);
    for (int k = 0; k < n; k++) {
        float r = zero ? 0 : rintf(x[k] * inv);
        r = r > 127.0f ? 127.0f : !(r >= -127.0f) ? -127.0f : r;
        q[k] = zero ? 0 : (int8_t)r;
    }
    return zero ? 0.0f : amax / 127.0f;
}

void kern_cuda_quantize(kern_cuda *c, int M, int K, const float *x, int ldx, int8_t *q, int ldq,
                        float *scale) {
    if (M <= 0 || K < 0 || c->status) return;
    if (!dev_ok(c, x, ((size_t)(M - 1) * ldx + K) * 4, "quantize x", 0) ||
        !dev_ok(c, q, (size_t)M * ldq, "quantize q", 0) ||
        !dev_ok(c, scale, (size_t)M * 4, "quantize scale", 0))
        return;
    for (int m = 0; m < M; m++) {
        int8_t *qr = q + (size_t)m * ldq;
        scale[m] = quant(x + (size_t)m * ldx, K, qr);
        memset(qr + K, 0, (size_t)(ldq - K));
    }
}

void kern_cuda_quantize_blocks(kern_cuda *c, int M, int K, const float *x, int ldx, int8_t *q,
                               int ldq, float *scale, int lds) {
    if (M <= 0 || K <= 0 || c->status) return;
    int nb = (K + 31) / 32;
    if (!dev_ok(c, x, ((size_t)(M - 1) * ldx + K) * 4, "quantize_blocks x", 0) ||
        !dev_ok(c, q, (size_t)M * ldq, "quantize_blocks q", 0) ||
        !dev_ok(c, scale, ((size_t)(M - 1) * lds + nb) * 4, "quantize_blocks scale", 0))
        return;
    for (int m = 0; m < M; m++) {
        int8_t *qr = q + (size_t)m * ldq;
        for (int b = 0; b < nb; b++) {
            int n = K - b * 32 < 32 ? K - b * 32 : 32;
            scale[(size_t)m * lds + b] = quant(x + (size_t)m * ldx + b * 32, n, qr + b * 32);
        }
        memset(qr + K, 0, (size_t)(ldq - K));
    }
}

static int better(float a, int ia, float b, int ib) {
    int na = isnan(a), nb = isnan(b);
    if (na != nb) return nb;
    if (!na && a != b) return a > b;
    return ia < ib;
}

void kern_cuda_argmax(kern_cuda *c, const float *x, int R, int V, int ld, int32_t *out) {
    if (R <= 0 || V <= 0 || c->status) return;
    if (!dev_ok(c, x, ((size_t)(R - 1) * ld + V) * 4, "argmax x", 0) ||
        !dev_ok(c, out, (size_t)R * 4, "argmax out", 0))
        return;
    for (int r = 0; r < R; r++) {
        float bv = NAN;
        int bi = 0x7fffffff;
        for (int i = 0; i < V; i++)
            if (better(x[(size_t)r * ld + i], i, bv, bi)) bv = x[(size_t)r * ld + i], bi = i;
        out[r] = bi < V ? bi : 0;
    }
}

/* ---- GEMM ------------------------------------------------------------------------------------ */

/* Sums of rows m < M over the weights' Np x Kp into D (ldd), or scaled into C (ldc). */
static void gemm_rows(int M, int N, const int8_t *xq, const float *xs, const kern_cuda_w8 *w,
                      float *C, int ldc, int32_t *D, int ldd) {
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            int32_t s = 0;
            const int8_t *a = xq + (size_t)m * w->Kp, *b = w->q + (size_t)n * w->Kp;
            for (int k = 0; k < w->Kp; k++) s += a[k] * b[k];
            if (C) C[(size_t)m * ldc + n] = (float)s * xs[m] * w->scale[n];
            else D[(size_t)m * ldd + n] = s;
        }
}

static int gemm_args(kern_cuda *c, int M, const int8_t *xq, const kern_cuda_w8 *w) {
    if (w->Np % 4 || w->Kp % 16 || w->Np < w->N || w->Kp < w->K) {
        kern_cuda_fail(c, KERN_CUDA_EINVAL, "emu: int8 GEMM with unpadded weights");
        return 0;
    }
    if (((uintptr_t)xq & 15) || ((uintptr_t)w->q & 15)) {
        kern_cuda_fail(c, KERN_CUDA_EINVAL, "emu: int8 GEMM operands not 16-byte aligned");
        return 0;
    }
    return dev_ok(c, xq, (size_t)M * w->Kp, "gemm x", 0) &&
           dev_ok(c, w->q, (size_t)w->Np * w->Kp, "gemm w", 0) &&
           dev_ok(c, w->scale, (size_t)w->Np * 4, "gemm scale", 0);
}

int kern_cuda_gemm_i32(kern_cuda *c, int M, const int8_t *xq, const kern_cuda_w8 *w, int32_t *D,
                       int ldd, int path) {
    if (M <= 0 || c->status || !gemm_args(c, M, xq, w)) return KERN_CUDA_GEMM_GEMV;
    if (!dev_ok(c, D, ((size_t)(M - 1) * ldd + w->Np) * 4, "gemm D", 0)) return path;
    if (path == KERN_CUDA_GEMM_AUTO) path = kern_cuda_gemm_pick(M, w->N, w->K);
    path == KERN_CUDA_GEMM_LT ? c->st.lt++ : c->st.gemv++;
    gemm_rows(M, w->Np, xq, NULL, w, NULL, 0, D, ldd);
    return path;
}

int kern_cuda_linear_i8(kern_cuda *c, int M, const int8_t *xq, const float *xs,
                        const kern_cuda_w8 *w, float *C, int ldc, int path) {
    if (M <= 0 || c->status || !gemm_args(c, M, xq, w)) return KERN_CUDA_GEMM_GEMV;
    if (!dev_ok(c, xs, (size_t)M * 4, "linear xs", 0) ||
        !dev_ok(c, C, ((size_t)(M - 1) * ldc + w->N) * 4, "linear C", 0))
        return path;
    if (path == KERN_CUDA_GEMM_AUTO) path = kern_cuda_gemm_pick(M, w->N, w->K);
    if (path == KERN_CUDA_GEMM_GEMV) {
        c->st.gemv++;
        gemm_rows(M, w->N, xq, xs, w, C, ldc, NULL, 0);
        return path;
    }
    /* cuBLASLt's way: int32 sums (into C itself when allowed), then the scales */
    c->st.lt++;
    int inplace = kern_cuda_gemm_inplace(w->N, ldc, (uintptr_t)C) && w->Np == w->N;
    int ldd = inplace ? ldc : w->Np;
    int32_t *D = inplace ? (int32_t *)C : malloc((size_t)M * w->Np * 4);
    gemm_rows(M, w->Np, xq, NULL, w, NULL, 0, D, ldd);
    for (int m = 0; m < M; m++)
        for (int n = 0; n < w->N; n++) {
            int32_t s = D[(size_t)m * ldd + n];
            C[(size_t)m * ldc + n] = (float)s * xs[m] * w->scale[n];
        }
    if (!inplace) free(D);
    return path;
}

void kern_cuda_linear_b32(kern_cuda *c, int M, const int8_t *xq, const float *xs,
                          const kern_cuda_w8b *w, float *C, int ldc) {
    if (M <= 0 || c->status) return;
    int nb = w->Kp / 32;
    if (w->Kp % 32 || w->Np < w->N || ((uintptr_t)xq & 15)) {
        kern_cuda_fail(c, KERN_CUDA_EINVAL, "emu: bad 32-block GEMM operands");
        return;
    }
    if (!dev_ok(c, xq, (size_t)M * w->Kp, "gemm_b32 x", 0) ||
        !dev_ok(c, xs, (size_t)M * nb * 4, "gemm_b32 xs", 0) ||
        !dev_ok(c, w->q, (size_t)w->Np * w->Kp, "gemm_b32 w", 0) ||
        (w->bscale ? !dev_ok(c, w->bscale, (size_t)w->Np * nb * 4, "gemm_b32 bscale", 0)
                   : !dev_ok(c, w->scale, (size_t)w->Np * 4, "gemm_b32 scale", 0)) ||
        !dev_ok(c, C, ((size_t)(M - 1) * ldc + w->N) * 4, "gemm_b32 C", 0))
        return;
    M <= KERN_CUDA_GEMV_MAX_M ? c->st.gemv++ : c->st.tiled++;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < w->N; n++) {
            float f = 0;
            for (int b = 0; b < nb; b++) {
                int32_t s = 0;
                const int8_t *a = xq + (size_t)m * w->Kp + b * 32,
                             *q = w->q + (size_t)n * w->Kp + b * 32;
                for (int k = 0; k < 32; k++) s += a[k] * q[k];
                float sc = xs[(size_t)m * nb + b];
                if (w->bscale) sc = w->bscale[(size_t)n * nb + b] * sc;
                f = fmaf((float)s, sc, f);
            }
            C[(size_t)m * ldc + n] = w->bscale ? f : f * w->scale[n];
        }
}

void kern_cuda_gemm_f32(kern_cuda *c, int M, int N, int K, const float *x, int ldx, const float *W,
                        float *C, int ldc) {
    if (M <= 0 || N <= 0 || c->status) return;
    if (!dev_ok(c, x, ((size_t)(M - 1) * ldx + K) * 4, "sgemm x", 0) ||
        !dev_ok(c, W, (size_t)N * K * 4, "sgemm W", 0) ||
        !dev_ok(c, C, ((size_t)(M - 1) * ldc + N) * 4, "sgemm C", 0))
        return;
    for (int m = 0; m < M; m++)
        for (int n = 0; n < N; n++) {
            float a = 0;
            for (int k = 0; k < K; k++) a += x[(size_t)m * ldx + k] * W[(size_t)n * K + k];
            C[(size_t)m * ldc + n] = a;
        }
}

/* ---- KV store and attention -------------------------------------------------------------------- */

void kern_cuda_kv_store(kern_cuda *c, const kern_cuda_kvst *k) {
    if (k->n_tok <= 0 || c->status) return;
    const kern_cuda_kvgeo *g = &k->g;
    size_t tb = kern_cuda_kv_token_bytes(g->nkv, g->hd, g->f32, g->k_scales);
    if (!dev_ok(c, k->tok, (size_t)k->n_tok * sizeof *k->tok, "kv_store tokens", 0) ||
        (k->stage && !dev_ok(c, k->stage, (size_t)k->n_tok * tb, "kv_store staging", 1)))
        return;
    for (int t = 0; t < k->n_tok; t++) {
        kern_cuda_kvst_tok tk = k->tok[t];
        if (!dev_ok(c, tk.blk + g->k_off, (size_t)g->B * g->row_bytes, "kv_store block", 0)) return;
        if (tk.slot < 0 || tk.slot >= g->B) {
            kern_cuda_fail(c, KERN_CUDA_EINVAL, "emu: kv_store slot %d", tk.slot);
            return;
        }
        uint8_t *st = k->stage ? k->stage + (size_t)t * tb : NULL;
        for (int h = 0; h < g->nkv; h++) {
            const float *kr = k->qkv + (size_t)tk.row * k->ld + k->col0 + (size_t)h * g->hd;
            const float *vr = kr + (size_t)g->nkv * g->hd;
            if (g->f32) {
                memcpy((float *)(tk.blk + g->k_off + tk.slot * g->row_bytes) + (size_t)h * g->hd,
                       kr, (size_t)g->hd * 4);
                memcpy((float *)(tk.blk + g->v_off + tk.slot * g->row_bytes) + (size_t)h * g->hd,
                       vr, (size_t)g->hd * 4);
                if (st) {
                    memcpy((float *)st + (size_t)h * g->hd, kr, (size_t)g->hd * 4);
                    memcpy((float *)(st + g->row_bytes) + (size_t)h * g->hd, vr, (size_t)g->hd * 4);
                }
                continue;
            }
            int8_t *dk = (int8_t *)(tk.blk + g->k_off + tk.slot * g->row_bytes) + (size_t)h * g->hd;
            int8_t *dv = (int8_t *)(tk.blk + g->v_off + tk.slot * g->row_bytes) + (size_t)h * g->hd;
            float *dks =
                (float *)(tk.blk + g->ks_off) + ((size_t)tk.slot * g->nkv + h) * g->k_scales;
            float *dvs = (float *)(tk.blk + g->vs_off) + (size_t)tk.slot * g->nkv + h;
            for (int grp = 0; grp < g->k_scales; grp++)
                dks[grp] =
                    quant(kr + (size_t)grp * g->k_group, g->k_group, dk + (size_t)grp * g->k_group);
            *dvs = quant(vr, g->hd, dv);
            if (st) {
                memcpy(st + (size_t)h * g->hd, dk, (size_t)g->hd);
                memcpy(st + g->row_bytes + (size_t)h * g->hd, dv, (size_t)g->hd);
                memcpy((float *)(st + 2 * g->row_bytes) + (size_t)h * g->k_scales, dks,
                       (size_t)g->k_scales * 4);
                ((float *)(st + 2 * g->row_bytes))[(size_t)g->nkv * g->k_scales + h] = *dvs;
            }
        }
    }
}

/* Key `key` of sequence S's KV head g: K and V values as floats (int8 dequantised per group). */
static int load_key(kern_cuda *c, const kern_cuda_attn *a, const kern_cuda_attn_seq *S, int g,
                    int key, float *k, float *v, float *vscale) {
    int idx = S->tab + key / a->B - S->first_blk;
    const uint8_t *blk = a->tab[idx];
    size_t es = a->f32 ? 4 : 1, row = (size_t)a->nkv * a->hd * es, slot = (size_t)(key % a->B);
    size_t span = a->f32 ? S->v_off + (size_t)a->B * row : S->vs_off + (size_t)a->B * a->nkv * 4;
    if (!dev_ok(c, blk + S->k_off, span - S->k_off, "attention block", 0)) return -1;
    const uint8_t *kr = blk + S->k_off + slot * row + (size_t)g * a->hd * es;
    const uint8_t *vr = blk + S->v_off + slot * row + (size_t)g * a->hd * es;
    if (a->f32) {
        memcpy(k, kr, (size_t)a->hd * 4);
        memcpy(v, vr, (size_t)a->hd * 4);
        *vscale = 1;
        return 0;
    }
    const float *ks = (const float *)(blk + S->ks_off) + (slot * a->nkv + g) * a->k_scales;
    for (int d = 0; d < a->hd; d++) {
        k[d] = (float)(int8_t)kr[d]; /* the group scale is applied to partial sums, as the kernel */
        v[d] = (float)(int8_t)vr[d];
    }
    (void)ks;
    *vscale = ((const float *)(blk + S->vs_off))[slot * a->nkv + g];
    return 0;
}

void kern_cuda_attention(kern_cuda *c, const kern_cuda_attn *a) {
    if (a->n_items <= 0 || c->status) return;
    const kern_cuda_attn_plan *P = &a->plan;
    if (P->n_split > 1 && !a->ws) {
        kern_cuda_fail(c, KERN_CUDA_EINVAL, "attention: %d splits without a workspace", P->n_split);
        return;
    }
    if (!dev_ok(c, a->seq, (size_t)a->n_seq * sizeof *a->seq, "attention descriptors", 0)) return;
    int hd = a->hd, G = a->n_head / a->nkv, chunk = P->chunk;
    float *k = malloc((size_t)chunk * hd * 4), *v = malloc((size_t)chunk * hd * 4);
    float vs[32], acc[KERN_CUDA_ATTN_MAX_HD], s[32], p[32];
    for (int item = 0; item < a->n_items; item++) {
        int si = 0;
        while (si + 1 < a->n_seq && a->seq[si + 1].item0 <= item) si++;
        const kern_cuda_attn_seq *S = &a->seq[si];
        int t = item - S->item0, pos = S->pos0 + t, klo, khi;
        if (t >= S->n_q) {
            kern_cuda_fail(c, KERN_CUDA_EINVAL, "emu: item %d beyond its sequence", item);
            break;
        }
        kern_cuda_key_range(pos, S->window, &klo, &khi);
        if (!dev_ok(c, S->q + (size_t)t * S->ldq, (size_t)a->n_head * hd * 4, "attention q", 0) ||
            !dev_ok(c, S->out + (size_t)t * S->ldo, (size_t)a->n_head * hd * 4, "attention out", 0))
            break;
        int last = (S->pos0 + S->n_q - 1) / a->B, first = S->first_blk;
        if (!dev_ok(c, a->tab + S->tab, (size_t)(last - first + 1) * sizeof(void *), "block table",
                    0))
            break;
        for (int g = 0; g < a->nkv; g++)
            for (int split = 0; split < P->n_split; split++) {
                int ka, kb;
                kern_cuda_split_range(klo, khi, P->n_split, split, chunk, &ka, &kb);
                for (int hl = 0; hl < G; hl++) {
                    int h = g * G + hl;
                    const float *q = S->q + (size_t)t * S->ldq + (size_t)h * hd;
                    float m = -INFINITY, l = 0;
                    for (int d = 0; d < hd; d++) acc[d] = 0;
                    for (int c0 = ka / chunk * chunk; c0 <= kb; c0 += chunk) {
                        int j0 = ka > c0 ? ka - c0 : 0,
                            j1 = kb < c0 + chunk - 1 ? kb - c0 : chunk - 1;
                        float cmax = -INFINITY;
                        for (int j = 0; j < chunk; j++) s[j] = -INFINITY;
                        for (int j = j0; j <= j1; j++) {
                            if (load_key(c, a, S, g, c0 + j, k + (size_t)j * hd, v + (size_t)j * hd,
                                         &vs[j]))
                                goto out;
                            float dot = 0;
                            if (a->f32) {
                                for (int d = 0; d < hd; d++) dot += q[d] * k[(size_t)j * hd + d];
                            } else {
                                int key = c0 + j, idx = S->tab + key / a->B - S->first_blk;
                                const float *ksc =
                                    (const float *)(a->tab[idx] + S->ks_off) +
                                    ((size_t)(key % a->B) * a->nkv + g) * a->k_scales;
                                for (int grp = 0; grp < a->k_scales; grp++) {
                                    float part = 0;
                                    for (int d = grp * a->k_group; d < (grp + 1) * a->k_group; d++)
                                        part += q[d] * k[(size_t)j * hd + d];
                                    dot += part * ksc[grp];
                                }
                            }
                            s[j] = dot * a->scale;
                            cmax = fmaxf(cmax, s[j]);
                        }
                        float mnew = fmaxf(m, cmax), sum = 0, alpha = expf(m - mnew);
                        for (int j = 0; j < chunk; j++) {
                            p[j] = s[j] == -INFINITY ? 0.0f : expf(s[j] - mnew);
                            sum += p[j];
                        }
                        l = l * alpha + sum;
                        m = mnew;
                        for (int d = 0; d < hd; d++) acc[d] *= alpha;
                        for (int j = j0; j <= j1; j++) {
                            float w = p[j] * (a->f32 ? 1.0f : vs[j]);
                            for (int d = 0; d < hd; d++) acc[d] += w * v[(size_t)j * hd + d];
                        }
                    }
                    if (P->n_split == 1) {
                        float *o = S->out + (size_t)t * S->ldo + (size_t)h * hd;
                        for (int d = 0; d < hd; d++) o[d] = acc[d] * (1.0f / l);
                    } else {
                        float *w = a->ws + (((size_t)item * a->n_head + h) * P->n_split + split) *
                                               (size_t)(hd + 2);
                        if (!dev_ok(c, w, (size_t)(hd + 2) * 4, "attention workspace", 0)) goto out;
                        w[0] = m, w[1] = l;
                        for (int d = 0; d < hd; d++) w[2 + d] = acc[d];
                    }
                }
            }
        if (P->n_split > 1) /* kc_attn_combine */
            for (int h = 0; h < a->n_head; h++) {
                const float *w =
                    a->ws + ((size_t)item * a->n_head + h) * P->n_split * (size_t)(hd + 2);
                float M = -INFINITY, L = 0;
                for (int sp = 0; sp < P->n_split; sp++) M = fmaxf(M, w[(size_t)sp * (hd + 2)]);
                for (int sp = 0; sp < P->n_split; sp++) {
                    float ms = w[(size_t)sp * (hd + 2)];
                    if (ms != -INFINITY) L += expf(ms - M) * w[(size_t)sp * (hd + 2) + 1];
                }
                float *o = S->out + (size_t)t * S->ldo + (size_t)h * hd;
                for (int d = 0; d < hd; d++) {
                    float x = 0;
                    for (int sp = 0; sp < P->n_split; sp++) {
                        float ms = w[(size_t)sp * (hd + 2)];
                        if (ms != -INFINITY) x += expf(ms - M) * w[(size_t)sp * (hd + 2) + 2 + d];
                    }
                    o[d] = x / L;
                }
            }
    }
out:
    free(k);
    free(v);
}
